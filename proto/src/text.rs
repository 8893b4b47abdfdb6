//! Fixed-size text fields: NQNs (UTF-8, NUL-terminated/padded, Base §4.5) and ASCII strings
//! padded with spaces (serial number, model number, firmware revision; Base Figure 275).

use crate::error::ParseError;

/// Maximum length of an NQN in bytes, excluding the terminating NUL (Base §4.5: 223).
pub const NQN_MAX_LEN: usize = 223;

/// An NVMe Qualified Name: non-empty UTF-8 of at most 223 bytes, without NUL.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nqn(String);

/// The well-known NQN of discovery controllers (Base §4.5.1).
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

impl Nqn {
    /// Validates `s` as an NQN. Hosts send whatever they like; the structural rules (non-empty,
    /// ≤ 223 bytes, no NUL, no control characters) are checked here, naming rules by the caller.
    pub fn new(s: &str) -> Result<Nqn, &'static str> {
        if s.is_empty() {
            Err("empty")
        } else if s.len() > NQN_MAX_LEN {
            Err("longer than 223 bytes")
        } else if s.chars().any(|c| c.is_control()) {
            Err("contains a control character")
        } else {
            Ok(Nqn(s.to_owned()))
        }
    }

    /// The discovery controller's NQN.
    pub fn discovery() -> Nqn {
        Nqn(DISCOVERY_NQN.to_owned())
    }

    /// The NQN as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the well-known discovery NQN.
    pub fn is_discovery(&self) -> bool {
        self.0 == DISCOVERY_NQN
    }
}

impl core::fmt::Debug for Nqn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl core::fmt::Display for Nqn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads an NQN from a fixed field: the text ends at the first NUL; every byte after it must be
/// NUL too (a field that is not NUL-terminated within its size is rejected).
pub(crate) fn parse_nqn(
    what: &'static str,
    field: &'static str,
    offset: usize,
    b: &[u8],
) -> Result<Nqn, ParseError> {
    let err = |reason| ParseError::InvalidText {
        what,
        field,
        offset,
        reason,
    };
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(err("not NUL-terminated"))?;
    if b[end..].iter().any(|&c| c != 0) {
        return Err(err("bytes after the terminating NUL"));
    }
    let s = core::str::from_utf8(&b[..end]).map_err(|_| err("not UTF-8"))?;
    Nqn::new(s).map_err(err)
}

/// Writes an NQN into a fixed field, NUL padded. The field must be larger than the NQN.
pub(crate) fn emit_nqn(b: &mut [u8], n: &Nqn) {
    b.fill(0);
    let s = n.as_str().as_bytes();
    let len = s.len().min(b.len().saturating_sub(1));
    b[..len].copy_from_slice(&s[..len]);
}

/// Reads a space-padded ASCII field (trailing spaces and NULs removed). Non-ASCII bytes are an
/// error: the specification requires printable ASCII.
pub(crate) fn parse_ascii(
    what: &'static str,
    field: &'static str,
    offset: usize,
    b: &[u8],
) -> Result<String, ParseError> {
    if b.iter().any(|&c| !(c == 0 || (0x20..0x7F).contains(&c))) {
        return Err(ParseError::InvalidText {
            what,
            field,
            offset,
            reason: "not printable ASCII",
        });
    }
    let s: String = b.iter().map(|&c| c as char).collect();
    Ok(s.trim_end_matches([' ', '\0']).to_owned())
}

/// Writes an ASCII field padded with spaces; non-ASCII characters become '?', and text longer
/// than the field is cut.
pub(crate) fn emit_ascii(b: &mut [u8], s: &str) {
    b.fill(b' ');
    for (dst, c) in b.iter_mut().zip(s.chars()) {
        *dst = if (' '..='~').contains(&c) {
            c as u8
        } else {
            b'?'
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nqn_field_rules() {
        let mut f = [0u8; 256];
        f[..5].copy_from_slice(b"nqn.x");
        assert_eq!(parse_nqn("t", "n", 0, &f).unwrap().as_str(), "nqn.x");
        f[10] = b'y';
        assert!(parse_nqn("t", "n", 0, &f).is_err());
        let full = [b'a'; 256];
        assert!(parse_nqn("t", "n", 0, &full).is_err());
        assert!(parse_nqn("t", "n", 0, &[0u8; 256]).is_err());
        let mut long = [0u8; 256];
        long[..224].fill(b'a');
        assert!(parse_nqn("t", "n", 0, &long).is_err());
        let mut out = [0xFFu8; 256];
        emit_nqn(&mut out, &Nqn::new("nqn.x").unwrap());
        assert_eq!(&out[..6], b"nqn.x\0");
        assert!(out[6..].iter().all(|&c| c == 0));
    }

    #[test]
    fn ascii_fields_are_space_padded() {
        let mut b = [0u8; 8];
        emit_ascii(&mut b, "SN1é");
        assert_eq!(&b, b"SN1?    ");
        assert_eq!(parse_ascii("t", "sn", 4, &b).unwrap(), "SN1?");
        assert!(parse_ascii("t", "sn", 4, &[0xC3, 0xA9]).is_err());
    }
}
