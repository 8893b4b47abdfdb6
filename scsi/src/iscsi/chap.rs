//! CHAP as iSCSI uses it (RFC 7143 §12.1.3, RFC 1994): the target's secrets, the digests, and
//! the encodings of binary values in login text.
//!
//! The target challenges the initiator with `CHAP_A` (the algorithm it chose from the
//! initiator's list), `CHAP_I` (an identifier) and `CHAP_C` (a random challenge); the initiator
//! answers `CHAP_N` (its user name) and `CHAP_R` = H(I ‖ secret ‖ C). For mutual CHAP the
//! initiator adds its own `CHAP_I` and `CHAP_C`, and the target answers with its name and the
//! digest over its own secret. The state machine is [`super::login::Login`]'s; the random bytes
//! come from its caller (this crate does no I/O).

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use sha3::Sha3_256;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Bytes of the challenge the target sends (RFC 7143 §12.1.3: at least as long as the digest
/// is usual practice; LIO and open-iscsi use 16).
pub const CHALLENGE_LEN: usize = 16;
/// Random bytes a login needs for CHAP: the identifier, then the challenge.
pub const NONCE_LEN: usize = 1 + CHALLENGE_LEN;

/// Shortest secret accepted (RFC 7143 §12.1.3: CHAP secrets should hold at least 96 bits).
pub const MIN_SECRET_LEN: usize = 12;
/// Longest secret accepted (open-iscsi's limit).
pub const MAX_SECRET_LEN: usize = 255;

/// One side's CHAP credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ChapAccount {
    /// The user name (`CHAP_N`).
    pub user: String,
    /// The secret.
    pub secret: Zeroizing<Vec<u8>>,
}

impl core::fmt::Debug for ChapAccount {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the secret.
        write!(
            f,
            "ChapAccount {{ user: {:?}, secret: <{} bytes> }}",
            self.user,
            self.secret.len()
        )
    }
}

/// A target's CHAP policy: the initiator must prove `initiator`'s secret; with `target`, the
/// target can prove its own when the initiator asks (mutual CHAP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChapConfig {
    /// What the initiator must know.
    pub initiator: ChapAccount,
    /// What the target answers a mutual challenge with.
    pub target: Option<ChapAccount>,
}

/// A CHAP digest algorithm (`CHAP_A`, RFC 7143 §13.3 and the IANA registry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChapAlg {
    /// MD5 (5).
    Md5,
    /// SHA-1 (6).
    Sha1,
    /// SHA-256 (7).
    Sha256,
    /// SHA3-256 (8).
    Sha3_256,
}

impl ChapAlg {
    /// The target's preference, strongest first.
    pub const PREFERENCE: [ChapAlg; 4] = [
        ChapAlg::Sha3_256,
        ChapAlg::Sha256,
        ChapAlg::Sha1,
        ChapAlg::Md5,
    ];

    /// The algorithm of a `CHAP_A` code.
    pub fn from_code(code: u32) -> Option<ChapAlg> {
        match code {
            5 => Some(ChapAlg::Md5),
            6 => Some(ChapAlg::Sha1),
            7 => Some(ChapAlg::Sha256),
            8 => Some(ChapAlg::Sha3_256),
            _ => None,
        }
    }

    /// Its `CHAP_A` code.
    pub fn code(self) -> u32 {
        match self {
            ChapAlg::Md5 => 5,
            ChapAlg::Sha1 => 6,
            ChapAlg::Sha256 => 7,
            ChapAlg::Sha3_256 => 8,
        }
    }

    /// The strongest algorithm of the initiator's `CHAP_A` list (codes separated by commas).
    pub fn choose(list: &str) -> Option<ChapAlg> {
        let offered: Vec<u32> = list
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        Self::PREFERENCE
            .into_iter()
            .find(|a| offered.contains(&a.code()))
    }

    /// H(id ‖ secret ‖ challenge) (RFC 1994 §4.1).
    pub fn response(self, id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
        fn h<D: Digest>(id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
            let mut d = D::new();
            d.update([id]);
            d.update(secret);
            d.update(challenge);
            d.finalize().to_vec()
        }
        match self {
            ChapAlg::Md5 => h::<Md5>(id, secret, challenge),
            ChapAlg::Sha1 => h::<Sha1>(id, secret, challenge),
            ChapAlg::Sha256 => h::<Sha256>(id, secret, challenge),
            ChapAlg::Sha3_256 => h::<Sha3_256>(id, secret, challenge),
        }
    }

    /// Whether `got` is the response to (`id`, `challenge`) over `secret`, in constant time.
    pub fn verify(self, id: u8, secret: &[u8], challenge: &[u8], got: &[u8]) -> bool {
        let want = self.response(id, secret, challenge);
        want.len() == got.len() && bool::from(want.ct_eq(got))
    }
}

/// A binary value of login text (RFC 7143 §6.1): `0x` + hex digits or `0b` + base64.
pub fn decode_binary(v: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        // An odd number of digits has an implied leading zero.
        let h = if h.len() % 2 == 1 {
            format!("0{h}")
        } else {
            h.to_owned()
        };
        if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
            .collect()
    } else if let Some(b) = v.strip_prefix("0b").or_else(|| v.strip_prefix("0B")) {
        base64::engine::general_purpose::STANDARD.decode(b).ok()
    } else {
        None
    }
}

/// `b` as a `0x` hex value of login text.
pub fn encode_hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_response_matches_rfc_1994_construction() {
        // RFC 1994's digest is MD5(id ‖ secret ‖ challenge); a value worked out independently
        // (python3 -c "import hashlib; print(hashlib.md5(bytes([1]) + b'secretsecret' +
        // bytes(range(16))).hexdigest())").
        let r = ChapAlg::Md5.response(1, b"secretsecret", &(0u8..16).collect::<Vec<_>>());
        assert_eq!(encode_hex(&r), "0x226dc576c33f04ff9c3a200ffe35f442");
        assert_eq!(r.len(), 16);
        assert_eq!(ChapAlg::Sha256.response(1, b"s", b"c").len(), 32);
        assert_eq!(ChapAlg::Sha3_256.response(1, b"s", b"c").len(), 32);
        assert_eq!(ChapAlg::Sha1.response(1, b"s", b"c").len(), 20);
        assert!(ChapAlg::Md5.verify(1, b"secretsecret", &(0u8..16).collect::<Vec<_>>(), &r));
        assert!(!ChapAlg::Md5.verify(2, b"secretsecret", &(0u8..16).collect::<Vec<_>>(), &r));
    }

    #[test]
    fn the_strongest_offered_algorithm_is_chosen() {
        assert_eq!(ChapAlg::choose("5"), Some(ChapAlg::Md5));
        assert_eq!(ChapAlg::choose("5,7,6"), Some(ChapAlg::Sha256));
        assert_eq!(ChapAlg::choose("8, 5"), Some(ChapAlg::Sha3_256));
        assert_eq!(ChapAlg::choose("1,2,x"), None);
    }

    #[test]
    fn binary_values_in_hex_and_base64() {
        assert_eq!(decode_binary("0x0a0B"), Some(vec![0x0a, 0x0b]));
        assert_eq!(decode_binary("0xabc"), Some(vec![0x0a, 0xbc]));
        assert_eq!(decode_binary("0bAQI="), Some(vec![1, 2]));
        assert_eq!(decode_binary("0x"), None);
        assert_eq!(decode_binary("0xzz"), None);
        assert_eq!(decode_binary("1234"), None);
        assert_eq!(encode_hex(&[0, 255]), "0x00ff");
        let a = ChapAccount {
            user: "u".into(),
            secret: Zeroizing::new(b"topsecretvalue".to_vec()),
        };
        assert!(!format!("{a:?}").contains("topsecret"));
    }
}
