//! Small value types of the host API: queue and namespace identifiers, logical block addresses,
//! command tags and the host's identity.
//!
//! Invariants: a [`Tag`] is only meaningful for the queue that handed it out; the command
//! identifier on the wire equals the tag's index, so a response names its slot directly.

use std::fmt;

use raidline_proto::text::Nqn;

/// A queue identifier: 0 is the admin queue, 1.. are I/O queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qid(pub u16);

impl Qid {
    /// The admin queue.
    pub const ADMIN: Qid = Qid(0);
}

impl fmt::Display for Qid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A namespace identifier (1-based; 0xFFFFFFFF addresses every namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nsid(pub u32);

impl Nsid {
    /// Every namespace (Flush of all, controller-wide log pages).
    pub const ALL: Nsid = Nsid(0xFFFF_FFFF);
}

impl fmt::Display for Nsid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A logical block address within a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Lba(pub u64);

impl fmt::Display for Lba {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A command slot of one queue: its data buffer and its command identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub(crate) u16);

impl Tag {
    /// The slot index (also the command identifier on the wire).
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Who the host is: what it puts in every Connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// Host NQN.
    pub hostnqn: Nqn,
    /// Host identifier (a UUID in its 16 wire bytes).
    pub hostid: [u8; 16],
}

impl HostIdentity {
    /// A host whose NQN is the UUID form `nqn.2014-08.org.nvmexpress:uuid:<hostid>`.
    pub fn from_uuid(hostid: [u8; 16]) -> HostIdentity {
        let u = format_uuid(&hostid);
        HostIdentity {
            // The string is ASCII and well under 223 bytes, so it is always a valid NQN.
            hostnqn: Nqn::new(&format!("nqn.2014-08.org.nvmexpress:uuid:{u}"))
                .unwrap_or_else(|_| Nqn::discovery()),
            hostid,
        }
    }
}

/// Formats 16 bytes as a canonical UUID string (8-4-4-4-12 lowercase hex).
pub fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// Parses a canonical UUID string (hyphens optional) into its 16 bytes.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|&c| c != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let pair = std::str::from_utf8(&hex[2 * i..2 * i + 2]).ok()?;
        *o = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_and_host_nqn_uses_it() {
        let b = [
            0x5f, 0x0c, 0x8d, 0x1e, 0x6a, 0x2b, 0x4c, 0x3d, 0x9e, 0x4f, 0x0a, 0x1b, 0x2c, 0x3d,
            0x4e, 0x5f,
        ];
        let s = format_uuid(&b);
        assert_eq!(s, "5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f");
        assert_eq!(parse_uuid(&s), Some(b));
        assert_eq!(parse_uuid("5f0c8d1e6a2b4c3d9e4f0a1b2c3d4e5f"), Some(b));
        assert_eq!(parse_uuid("5f0c8d1e-6a2b"), None);
        assert_eq!(parse_uuid("zz0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f"), None);
        let h = HostIdentity::from_uuid(b);
        assert_eq!(
            h.hostnqn.as_str(),
            "nqn.2014-08.org.nvmexpress:uuid:5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f"
        );
    }
}
