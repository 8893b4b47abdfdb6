//! Finite-field Diffie-Hellman over the RFC 7919 groups (generator 2), constant time
//! (crypto-bigint's Montgomery exponentiation).
//!
//! Values on the wire are big-endian and exactly as long as the prime (leading zeros kept), as
//! Linux's `dh` kpp writes them; the shared secret is the same length.

use crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
use crypto_bigint::{BoxedUint, Odd};
use raidline_proto::auth::dhgroup_id;
use zeroize::Zeroizing;

/// A DH-HMAC-CHAP Diffie-Hellman group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DhGroup {
    /// No exchange: the responses depend on the secrets and the challenges only.
    Null,
    /// ffdhe2048.
    Ffdhe2048,
    /// ffdhe3072.
    Ffdhe3072,
    /// ffdhe4096.
    Ffdhe4096,
    /// ffdhe6144.
    Ffdhe6144,
    /// ffdhe8192.
    Ffdhe8192,
}

/// Why a peer's public value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DhError {
    /// Not exactly as long as the group's prime.
    #[error("DH public value of {got} bytes, the group's is {want}")]
    Length {
        /// Bytes received.
        got: usize,
        /// Bytes the group's values have.
        want: usize,
    },
    /// Outside 2 ..= p − 2 (0, 1 and p − 1 give a predictable secret).
    #[error("DH public value out of range")]
    Range,
}

impl DhGroup {
    /// Every group, the order a controller prefers them by default: the cheapest exchange first.
    pub const ALL: [DhGroup; 6] = [
        DhGroup::Ffdhe2048,
        DhGroup::Ffdhe3072,
        DhGroup::Ffdhe4096,
        DhGroup::Ffdhe6144,
        DhGroup::Ffdhe8192,
        DhGroup::Null,
    ];

    /// The identifier on the wire.
    pub fn id(self) -> u8 {
        match self {
            DhGroup::Null => dhgroup_id::NULL,
            DhGroup::Ffdhe2048 => dhgroup_id::FFDHE2048,
            DhGroup::Ffdhe3072 => dhgroup_id::FFDHE3072,
            DhGroup::Ffdhe4096 => dhgroup_id::FFDHE4096,
            DhGroup::Ffdhe6144 => dhgroup_id::FFDHE6144,
            DhGroup::Ffdhe8192 => dhgroup_id::FFDHE8192,
        }
    }

    /// The group for a wire identifier.
    pub fn from_id(id: u8) -> Option<DhGroup> {
        DhGroup::ALL.into_iter().find(|g| g.id() == id)
    }

    /// The name the configuration and Linux use: `null`, `ffdhe2048` … `ffdhe8192`.
    pub fn name(self) -> &'static str {
        match self {
            DhGroup::Null => "null",
            DhGroup::Ffdhe2048 => "ffdhe2048",
            DhGroup::Ffdhe3072 => "ffdhe3072",
            DhGroup::Ffdhe4096 => "ffdhe4096",
            DhGroup::Ffdhe6144 => "ffdhe6144",
            DhGroup::Ffdhe8192 => "ffdhe8192",
        }
    }

    /// The group for a name.
    pub fn from_name(s: &str) -> Option<DhGroup> {
        let s = s.trim();
        DhGroup::ALL
            .into_iter()
            .find(|g| g.name().eq_ignore_ascii_case(s))
    }

    /// Bits of the prime (0 for the null group).
    pub fn bits(self) -> u32 {
        match self {
            DhGroup::Null => 0,
            DhGroup::Ffdhe2048 => 2048,
            DhGroup::Ffdhe3072 => 3072,
            DhGroup::Ffdhe4096 => 4096,
            DhGroup::Ffdhe6144 => 6144,
            DhGroup::Ffdhe8192 => 8192,
        }
    }

    /// Bytes of a public value or shared secret.
    pub fn value_len(self) -> usize {
        self.bits() as usize / 8
    }

    /// Private exponent bits: at least twice the group's security strength (RFC 7919 §5.2:
    /// 2048 → 225, 3072 → 275, 4096 → 325, 6144 → 375, 8192 → 400), rounded up.
    fn exponent_bits(self) -> u32 {
        match self {
            DhGroup::Null => 0,
            DhGroup::Ffdhe2048 => 256,
            DhGroup::Ffdhe3072 => 320,
            DhGroup::Ffdhe4096 => 384,
            DhGroup::Ffdhe6144 => 448,
            DhGroup::Ffdhe8192 => 512,
        }
    }

    fn prime_hex(self) -> &'static str {
        match self {
            DhGroup::Null => "",
            DhGroup::Ffdhe2048 => include_str!("ffdhe/ffdhe2048.hex"),
            DhGroup::Ffdhe3072 => include_str!("ffdhe/ffdhe3072.hex"),
            DhGroup::Ffdhe4096 => include_str!("ffdhe/ffdhe4096.hex"),
            DhGroup::Ffdhe6144 => include_str!("ffdhe/ffdhe6144.hex"),
            DhGroup::Ffdhe8192 => include_str!("ffdhe/ffdhe8192.hex"),
        }
    }

    fn prime(self) -> BoxedUint {
        let hex: Vec<u8> = self
            .prime_hex()
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .collect();
        let bytes: Vec<u8> = hex
            .chunks(2)
            .map(|c| {
                let s = std::str::from_utf8(c).unwrap_or("00");
                u8::from_str_radix(s, 16).unwrap_or(0)
            })
            .collect();
        BoxedUint::from_be_slice(&bytes, self.bits())
            .unwrap_or_else(|_| unreachable!("the RFC 7919 primes fit their width"))
    }

    fn params(self) -> BoxedMontyParams {
        let p = Odd::new(self.prime()).into_option();
        BoxedMontyParams::new(p.unwrap_or_else(|| unreachable!("the RFC 7919 primes are odd")))
    }

    fn pow(self, base: BoxedUint, exp: &BoxedUint) -> BoxedUint {
        BoxedMontyForm::new(base, self.params())
            .pow_bounded_exp(exp, self.exponent_bits())
            .retrieve()
    }

    fn to_value(self, x: &BoxedUint) -> Zeroizing<Vec<u8>> {
        let b = x.to_be_bytes();
        let mut v = Zeroizing::new(vec![0u8; self.value_len()]);
        let n = b.len().min(v.len());
        let at = v.len() - n;
        v[at..].copy_from_slice(&b[b.len() - n..]);
        v
    }

    /// A fresh key pair from `random` bytes (at least 64): the private exponent and g^x mod p.
    /// `None` for the null group.
    pub fn keypair(self, random: &[u8]) -> Option<KeyPair> {
        if self == DhGroup::Null {
            return None;
        }
        let n = self.exponent_bits() as usize / 8;
        let mut x = Zeroizing::new(vec![0u8; n]);
        for (i, b) in x.iter_mut().enumerate() {
            *b = random[i % random.len().max(1)];
        }
        x[0] |= 0x80; // the full exponent width
        let x = BoxedUint::from_be_slice(&x, self.bits())
            .unwrap_or_else(|_| unreachable!("the exponent is narrower than the prime"));
        let g =
            BoxedUint::from_be_slice(&[2], self.bits()).unwrap_or_else(|_| unreachable!("2 fits"));
        let public = self.to_value(&self.pow(g, &x)).to_vec();
        Some(KeyPair {
            group: self,
            private: x,
            public,
        })
    }
}

impl std::fmt::Display for DhGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One side's exchange: the private exponent (wiped on drop) and the public value.
pub struct KeyPair {
    group: DhGroup,
    private: BoxedUint,
    /// g^x mod p, big-endian, as long as the prime.
    pub public: Vec<u8>,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyPair({})", self.group)
    }
}

impl Drop for KeyPair {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.private);
    }
}

impl KeyPair {
    /// The shared secret (peer^x mod p, as long as the prime) for the peer's public value.
    pub fn shared(&self, peer: &[u8]) -> Result<Zeroizing<Vec<u8>>, DhError> {
        let g = self.group;
        if peer.len() != g.value_len() {
            return Err(DhError::Length {
                got: peer.len(),
                want: g.value_len(),
            });
        }
        let y = BoxedUint::from_be_slice(peer, g.bits()).map_err(|_| DhError::Range)?;
        let one = BoxedUint::one_with_precision(g.bits());
        let p_minus_1 = g.prime().wrapping_sub(&one);
        if y <= one || y >= p_minus_1 {
            return Err(DhError::Range);
        }
        Ok(g.to_value(&g.pow(y, &self.private)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_agree_and_bad_values_are_refused() {
        for g in [DhGroup::Ffdhe2048, DhGroup::Ffdhe3072] {
            let a = g.keypair(&[0x11; 64]).unwrap();
            let b = g.keypair(&[0x5a; 64]).unwrap();
            assert_eq!(a.public.len(), g.value_len());
            assert_ne!(a.public, b.public);
            let s1 = a.shared(&b.public).unwrap();
            let s2 = b.shared(&a.public).unwrap();
            assert_eq!(*s1, *s2);
            assert_eq!(s1.len(), g.value_len());
            let mut one = vec![0u8; g.value_len()];
            *one.last_mut().unwrap() = 1;
            assert_eq!(a.shared(&one), Err(DhError::Range));
            assert_eq!(a.shared(&vec![0xFF; g.value_len()]), Err(DhError::Range));
            assert!(matches!(a.shared(&one[1..]), Err(DhError::Length { .. })));
        }
    }

    #[test]
    fn the_primes_are_the_rfc_7919_ones() {
        // Every ffdhe prime starts with 64 one bits, then the bits of e (ADF85458A2BB4A9A),
        // and ends with 64 one bits; and Fermat's test with base 2 holds for each (a corrupted
        // digit would fail it).
        for g in DhGroup::ALL.into_iter().filter(|g| *g != DhGroup::Null) {
            let hex: String = g.prime_hex().split_whitespace().collect();
            assert_eq!(hex.len() * 4, g.bits() as usize, "{g}");
            assert!(hex.starts_with("FFFFFFFFFFFFFFFFADF85458A2BB4A9A"), "{g}");
            assert!(hex.ends_with("FFFFFFFFFFFFFFFF"), "{g}");
        }
        for g in [DhGroup::Ffdhe2048, DhGroup::Ffdhe4096] {
            let p = g.prime();
            let one = BoxedUint::one_with_precision(g.bits());
            let two = one.wrapping_add(&one);
            let e = p.wrapping_sub(&one);
            let r = BoxedMontyForm::new(two, g.params()).pow(&e).retrieve();
            assert_eq!(r, one, "{g}: 2^(p-1) mod p is not 1");
        }
    }
}
