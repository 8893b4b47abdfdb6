//! DH-HMAC-CHAP secrets in the `DHHC-1:hh:<base64>:` form `nvme gen-dhchap-key` prints, and the
//! key transformation the Linux host and nvmet apply (`nvme_auth_transform_key`).

use base64::Engine as _;
use zeroize::Zeroizing;

use crate::HashFn;

/// Why a secret is not usable. Never carries the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not of the form `DHHC-1:hh:<base64>:`.
    #[error("not a DH-HMAC-CHAP secret: expected DHHC-1:hh:<base64>: as `nvme gen-dhchap-key` prints it")]
    Format,
    /// The `hh` field names no transformation.
    #[error("unknown key transformation {0:?} (00 none, 01 SHA-256, 02 SHA-384, 03 SHA-512)")]
    Transform(String),
    /// The base64 part does not decode.
    #[error("the key is not valid base64")]
    Base64,
    /// The decoded key has a length other than 32, 48 or 64 bytes (plus the 4-byte CRC).
    #[error("the key is {0} bytes; DH-HMAC-CHAP keys are 32, 48 or 64 bytes")]
    Length(usize),
    /// The CRC-32 after the key does not match it.
    #[error("the key's CRC-32 does not match (a typo, or a truncated copy)")]
    Crc,
}

/// A parsed secret. Its key is wiped when dropped and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: Zeroizing<Vec<u8>>,
    transform: Option<HashFn>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Secret({} bytes, transform {})",
            self.key.len(),
            self.transform.map_or("none", HashFn::name)
        )
    }
}

impl Secret {
    /// Parses `DHHC-1:hh:<base64(key ‖ le32 CRC-32(key))>:`.
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        let t = text.trim();
        let rest = t.strip_prefix("DHHC-1:").ok_or(SecretError::Format)?;
        let (hh, rest) = rest.split_once(':').ok_or(SecretError::Format)?;
        let b64 = rest.strip_suffix(':').ok_or(SecretError::Format)?;
        if b64.contains(':') {
            return Err(SecretError::Format);
        }
        let transform = match hh {
            "00" => None,
            "01" => Some(HashFn::Sha256),
            "02" => Some(HashFn::Sha384),
            "03" => Some(HashFn::Sha512),
            other => return Err(SecretError::Transform(other.chars().take(8).collect())),
        };
        let raw = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| SecretError::Base64)?,
        );
        if raw.len() < 4 || !matches!(raw.len() - 4, 32 | 48 | 64) {
            return Err(SecretError::Length(raw.len().saturating_sub(4)));
        }
        let (key, crc) = raw.split_at(raw.len() - 4);
        let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32fast::hash(key) != want {
            return Err(SecretError::Crc);
        }
        Ok(Secret {
            key: Zeroizing::new(key.to_vec()),
            transform,
        })
    }

    /// A secret from raw key bytes (tests, and hosts built in process).
    pub fn from_key(key: &[u8], transform: Option<HashFn>) -> Result<Secret, SecretError> {
        if !matches!(key.len(), 32 | 48 | 64) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(Secret {
            key: Zeroizing::new(key.to_vec()),
            transform,
        })
    }

    /// The `DHHC-1:hh:…:` text of this secret.
    pub fn to_text(&self) -> Zeroizing<String> {
        let mut raw = Zeroizing::new(self.key.to_vec());
        raw.extend_from_slice(&crc32fast::hash(&self.key).to_le_bytes());
        let hh = match self.transform {
            None => "00",
            Some(HashFn::Sha256) => "01",
            Some(HashFn::Sha384) => "02",
            Some(HashFn::Sha512) => "03",
        };
        Zeroizing::new(format!(
            "DHHC-1:{hh}:{}:",
            base64::engine::general_purpose::STANDARD.encode(&*raw)
        ))
    }

    /// The transformation `hh` names.
    pub fn transform(&self) -> Option<HashFn> {
        self.transform
    }

    /// The key as the HMAC uses it: `HMAC_hh(key, nqn ‖ "NVMe-over-Fabrics")`, or the key
    /// itself when `hh` is 00. The host's NQN for the host's secret, the subsystem's NQN for
    /// the controller's.
    pub fn transformed(&self, nqn: &str) -> Zeroizing<Vec<u8>> {
        match self.transform {
            None => self.key.clone(),
            Some(h) => h.hmac(&self.key, &[nqn.as_bytes(), b"NVMe-over-Fabrics"]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_nvme_cli_prints() {
        // `nvme gen-dhchap-key -m 1 -n nqn.2014-08.org.nvmexpress:uuid:test` (nvme-cli 2.3, in
        // the lab's 6.12 guest).
        let s =
            Secret::parse("DHHC-1:01:pYVItjmNx+tuaJSeIMEDlEZmepEMhAVABIHKOMjrNR5YOMS9:").unwrap();
        assert_eq!(s.transform(), Some(HashFn::Sha256));
        assert_eq!(s.key.len(), 32);
        assert_eq!(
            &*s.to_text(),
            "DHHC-1:01:pYVItjmNx+tuaJSeIMEDlEZmepEMhAVABIHKOMjrNR5YOMS9:"
        );
        assert_eq!(s.transformed("nqn.x").len(), 32);
        assert!(!format!("{s:?}").contains("pYV"));
    }

    #[test]
    fn refuses_bad_secrets_precisely() {
        let good = "DHHC-1:01:pYVItjmNx+tuaJSeIMEDlEZmepEMhAVABIHKOMjrNR5YOMS9:";
        assert_eq!(Secret::parse("DHHC-2:01:abc:"), Err(SecretError::Format));
        assert_eq!(
            Secret::parse(&good.replace(":01:", ":07:")),
            Err(SecretError::Transform("07".into()))
        );
        assert_eq!(
            Secret::parse(&good.replace("pYVI", "pYVJ")),
            Err(SecretError::Crc)
        );
        assert_eq!(Secret::parse("DHHC-1:00:!!!!:"), Err(SecretError::Base64));
        assert_eq!(
            Secret::parse("DHHC-1:00:AAAAAAAAAAAA:"),
            Err(SecretError::Length(5))
        );
        assert_eq!(
            Secret::parse(&good[..good.len() - 1]),
            Err(SecretError::Format)
        );
    }

    /// Known answers from Linux's own code: libnvme 1.3 (nvme-cli 2.3) transforms a given key
    /// as the kernel's `nvme_auth_transform_key` does and prints the result:
    /// `nvme gen-dhchap-key --secret=<hex of bytes 0, 1, 2, …> --hmac=M --nqn=NQN`.
    #[test]
    fn transformation_matches_libnvme() {
        let nqn = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001";
        for (h, printed) in [
            (HashFn::Sha256, "DHHC-1:01:bHuByyp0b3RFSx1xQPMVO1HKmUWfzveoahfydpW4fNgSLMVm:"),
            (HashFn::Sha384, "DHHC-1:02:yRbznXvUOKyUzpjxLyIgLGvEOxsb9/CBo2/XbRG0sXMHJv918yV2tXSc+gbRp7T1eXmwtA==:"),
            (HashFn::Sha512, "DHHC-1:03:XaedOIjF3axQewl4QMTIr4xwmePzL78hYgnSQQP1S88iKE5wNLtXmomXR19QrsC/88ytGEVjd56B9IxAUHG5cMGgMCQ=:"),
        ] {
            let raw: Vec<u8> = (0..h.len() as u8).collect();
            let ours = Secret::from_key(&raw, Some(h)).unwrap().transformed(nqn);
            let linux = Secret::parse(printed).unwrap();
            assert_eq!(*ours, *linux.key, "{h}");
        }
    }

    #[test]
    fn untransformed_keys_are_used_as_they_are() {
        let s = Secret::from_key(&[7; 48], None).unwrap();
        assert_eq!(&*s.transformed("any"), &[7; 48][..]);
        let t = Secret::from_key(&[7; 48], Some(HashFn::Sha512)).unwrap();
        assert_eq!(
            *t.transformed("nqn.h"),
            *HashFn::Sha512.hmac(&[7; 48], &[b"nqn.hNVMe-over-Fabrics"])
        );
        assert_eq!(Secret::parse(&t.to_text()).unwrap(), t);
    }
}
