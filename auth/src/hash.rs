//! The three hash functions of DH-HMAC-CHAP and their HMACs.

use hmac::{Hmac, Mac};
use raidline_proto::auth::hash_id;
use sha2::{Digest, Sha256, Sha384, Sha512};
use zeroize::Zeroizing;

/// A DH-HMAC-CHAP hash function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashFn {
    /// SHA-256 (id 1, 32 bytes).
    Sha256,
    /// SHA-384 (id 2, 48 bytes).
    Sha384,
    /// SHA-512 (id 3, 64 bytes).
    Sha512,
}

impl HashFn {
    /// Every hash, in the order a controller prefers them by default.
    pub const ALL: [HashFn; 3] = [HashFn::Sha256, HashFn::Sha384, HashFn::Sha512];

    /// The identifier on the wire.
    pub fn id(self) -> u8 {
        match self {
            HashFn::Sha256 => hash_id::SHA256,
            HashFn::Sha384 => hash_id::SHA384,
            HashFn::Sha512 => hash_id::SHA512,
        }
    }

    /// The hash for a wire identifier.
    pub fn from_id(id: u8) -> Option<HashFn> {
        HashFn::ALL.into_iter().find(|h| h.id() == id)
    }

    /// The name the configuration and `nvme-cli` use: `sha256`, `sha384`, `sha512`.
    pub fn name(self) -> &'static str {
        match self {
            HashFn::Sha256 => "sha256",
            HashFn::Sha384 => "sha384",
            HashFn::Sha512 => "sha512",
        }
    }

    /// The hash for a name (`sha256`, or Linux's `hmac(sha256)`).
    pub fn from_name(s: &str) -> Option<HashFn> {
        let s = s.trim();
        let s = s
            .strip_prefix("hmac(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(s);
        HashFn::ALL
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(s))
    }

    /// Digest length in bytes.
    #[allow(clippy::len_without_is_empty)] // a hash's length, not a container's
    pub fn len(self) -> usize {
        match self {
            HashFn::Sha256 => 32,
            HashFn::Sha384 => 48,
            HashFn::Sha512 => 64,
        }
    }

    /// H(data).
    pub fn digest(self, data: &[u8]) -> Zeroizing<Vec<u8>> {
        Zeroizing::new(match self {
            HashFn::Sha256 => Sha256::digest(data).to_vec(),
            HashFn::Sha384 => Sha384::digest(data).to_vec(),
            HashFn::Sha512 => Sha512::digest(data).to_vec(),
        })
    }

    /// HMAC_H(key, parts[0] ‖ parts[1] ‖ …).
    pub fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            // HMAC takes keys of any length.
            let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes().to_vec()
        }
        Zeroizing::new(match self {
            HashFn::Sha256 => run::<Hmac<Sha256>>(key, parts),
            HashFn::Sha384 => run::<Hmac<Sha384>>(key, parts),
            HashFn::Sha512 => run::<Hmac<Sha512>>(key, parts),
        })
    }
}

impl std::fmt::Display for HashFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hmac({})", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let m = HashFn::Sha256.hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex(&m),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let m = HashFn::Sha512.hmac(b"Jefe", &[b"what do ya want for nothing?"]);
        assert!(
            hex(&m).starts_with("164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554")
        );
        assert_eq!(HashFn::from_name("hmac(sha384)"), Some(HashFn::Sha384));
        assert_eq!(HashFn::from_id(3), Some(HashFn::Sha512));
        assert_eq!(HashFn::from_id(4), None);
    }

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
