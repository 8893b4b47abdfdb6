//! Commands Supported and Effects (LID 05h; Base §5.16.1.6, Figures 210–211; Linux
//! `struct nvme_effects_log`) and the Changed Namespace List (LID 04h; Base §5.16.1.5).
//!
//! The effects page keeps every entry as its raw 32-bit value (reserved bits included), so it
//! round trips byte for byte apart from its reserved second half. The changed list is either up
//! to 1024 NSIDs in increasing order, or the overflow marker: FFFFFFFFh first, then zeros.

use crate::error::{exact, room, ParseError};
use crate::identify::{get, put, NS_LIST_MAX};

/// One Commands Supported and Effects entry (Base Figure 211).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommandEffects(pub u32);

impl core::fmt::Debug for CommandEffects {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CommandEffects({:#010x})", self.0)
    }
}

impl CommandEffects {
    /// Command Supported (bit 0).
    pub const CSUPP: u32 = 1 << 0;
    /// Logical Block Content Change (bit 1).
    pub const LBCC: u32 = 1 << 1;
    /// Namespace Capability Change (bit 2).
    pub const NCC: u32 = 1 << 2;
    /// Namespace Inventory Change (bit 3).
    pub const NIC: u32 = 1 << 3;
    /// Controller Capability Change (bit 4).
    pub const CCC: u32 = 1 << 4;
    /// UUID Selection Supported (bit 19).
    pub const USS: u32 = 1 << 19;
    const CSE_SHIFT: u32 = 16;

    /// A supported command with the given effect bits.
    pub const fn supported(effects: u32) -> CommandEffects {
        CommandEffects(Self::CSUPP | effects)
    }

    /// Whether bit(s) `flag` are all set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }

    /// Command Submission and Execution (bits 18:16): 0 no restriction, 1 no other command on
    /// the namespace concurrently, 2 no other command on any namespace concurrently.
    pub fn cse(self) -> u8 {
        ((self.0 >> Self::CSE_SHIFT) & 0x7) as u8
    }

    /// The entry with CSE set to `cse` (cut to 3 bits).
    pub fn with_cse(self, cse: u8) -> CommandEffects {
        CommandEffects(
            (self.0 & !(0x7 << Self::CSE_SHIFT)) | u32::from(cse & 0x7) << Self::CSE_SHIFT,
        )
    }
}

/// The Commands Supported and Effects log page (4096 bytes): one entry per admin opcode and one
/// per I/O opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandEffectsLog {
    /// Admin Command Supported entries, indexed by opcode (bytes 1023:0).
    pub admin: [CommandEffects; 256],
    /// I/O Command Supported entries, indexed by opcode (bytes 2047:1024).
    pub io: [CommandEffects; 256],
}

impl Default for CommandEffectsLog {
    fn default() -> Self {
        CommandEffectsLog {
            admin: [CommandEffects::default(); 256],
            io: [CommandEffects::default(); 256],
        }
    }
}

impl CommandEffectsLog {
    /// Size of the page.
    pub const LEN: usize = 4096;
    const WHAT: &'static str = "Commands Supported and Effects";
    const ADMIN: usize = 0;
    const IO: usize = 1024;

    /// Parses exactly 4096 bytes (every such buffer parses; bytes 4095:2048 are reserved).
    pub fn parse(b: &[u8]) -> Result<CommandEffectsLog, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        let mut log = CommandEffectsLog::default();
        for i in 0..256 {
            let a = Self::ADMIN + 4 * i;
            let o = Self::IO + 4 * i;
            log.admin[i] = CommandEffects(get(b, a..a + 4));
            log.io[i] = CommandEffects(get(b, o..o + 4));
        }
        Ok(log)
    }

    /// Writes exactly 4096 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        b.fill(0);
        for i in 0..256 {
            let a = Self::ADMIN + 4 * i;
            let o = Self::IO + 4 * i;
            put(b, a..a + 4, self.admin[i].0);
            put(b, o..o + 4, self.io[i].0);
        }
        Ok(())
    }

    /// The page as 4096 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        // Cannot fail: the buffer has the exact size.
        let _ = self.emit(&mut b);
        b
    }
}

/// The Changed Namespace List log page (4096 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangedNsList {
    /// The NSIDs whose attributes changed since the page was last read with RAE clear, in
    /// increasing order, at most 1024 (none 0 or FFFFFFFFh).
    Changed(Vec<u32>),
    /// More than 1024 namespaces changed: the page holds FFFFFFFFh then zeros, and the host
    /// rescans every namespace.
    TooMany,
}

impl Default for ChangedNsList {
    fn default() -> Self {
        ChangedNsList::Changed(Vec::new())
    }
}

impl ChangedNsList {
    /// Size of the page.
    pub const LEN: usize = 4096;
    const WHAT: &'static str = "Changed Namespace List";
    const OVERFLOW: u32 = 0xFFFF_FFFF;

    /// The page for a set of changed NSIDs: sorted and deduplicated (0 and FFFFFFFFh dropped),
    /// or [`ChangedNsList::TooMany`] beyond 1024.
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> ChangedNsList {
        let mut v: Vec<u32> = ids
            .into_iter()
            .filter(|&id| id != 0 && id != Self::OVERFLOW)
            .collect();
        v.sort_unstable();
        v.dedup();
        if v.len() > NS_LIST_MAX {
            ChangedNsList::TooMany
        } else {
            ChangedNsList::Changed(v)
        }
    }

    /// Parses exactly 4096 bytes.
    pub fn parse(b: &[u8]) -> Result<ChangedNsList, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        if get::<u32>(b, 0..4) == Self::OVERFLOW {
            if let Some(at) = (4..Self::LEN).find(|&i| b[i] != 0) {
                return Err(ParseError::InvalidField {
                    what: Self::WHAT,
                    field: "entry after the overflow marker",
                    offset: at & !3,
                    value: u64::from(b[at]),
                });
            }
            return Ok(ChangedNsList::TooMany);
        }
        Ok(ChangedNsList::Changed(crate::identify::parse_id_list(
            Self::WHAT,
            b,
            true,
        )?))
    }

    /// Writes exactly 4096 bytes. A `Changed` list that is not strictly increasing, holds 0 or
    /// FFFFFFFFh, or has more than 1024 entries is an error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        match self {
            ChangedNsList::TooMany => {
                b.fill(0);
                put(b, 0..4, Self::OVERFLOW);
                Ok(())
            }
            ChangedNsList::Changed(ids) => crate::identify::emit_id_list(Self::WHAT, b, ids, true),
        }
    }

    /// The page as 4096 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; Self::LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn effects_layout() {
        let mut b = vec![0u8; 4096];
        // Admin Identify (06h) supported; Set Features (09h) changes controller capabilities.
        b[0x06 * 4..0x06 * 4 + 4].copy_from_slice(&0x0000_0001u32.to_le_bytes());
        b[0x09 * 4..0x09 * 4 + 4].copy_from_slice(&0x0000_0011u32.to_le_bytes());
        // I/O Write (01h) changes LBA content; Dataset Management (09h) with CSE 1.
        b[1024 + 4..1024 + 8].copy_from_slice(&0x0000_0003u32.to_le_bytes());
        b[1024 + 0x24..1024 + 0x28].copy_from_slice(&0x0001_0003u32.to_le_bytes());
        b[2044..2048].copy_from_slice(&0x8000_0001u32.to_le_bytes()); // reserved bit kept
        let mut want = CommandEffectsLog::default();
        want.admin[0x06] = CommandEffects::supported(0);
        want.admin[0x09] = CommandEffects::supported(CommandEffects::CCC);
        want.io[0x01] = CommandEffects::supported(CommandEffects::LBCC);
        want.io[0x09] = CommandEffects::supported(CommandEffects::LBCC).with_cse(1);
        want.io[0xFF] = CommandEffects(0x8000_0001);
        let log = CommandEffectsLog::parse(&b).unwrap();
        assert_eq!(log, want);
        assert_eq!(log.io[0x09].cse(), 1);
        assert!(log.admin[0x09].has(CommandEffects::CSUPP | CommandEffects::CCC));
        assert!(!log.admin[0x09].has(CommandEffects::NIC));
        assert_eq!(want.to_bytes(), b);
        b[3000] = 0xEE; // reserved half ignored
        assert_eq!(CommandEffectsLog::parse(&b).unwrap(), want);
        assert!(CommandEffectsLog::parse(&b[..4095]).is_err());
        b.push(0);
        assert!(CommandEffectsLog::parse(&b).is_err());
    }

    #[test]
    fn changed_list_layout() {
        let mut b = vec![0u8; 4096];
        b[0..4].copy_from_slice(&1u32.to_le_bytes());
        b[4..8].copy_from_slice(&7u32.to_le_bytes());
        let l = ChangedNsList::parse(&b).unwrap();
        assert_eq!(l, ChangedNsList::Changed(vec![1, 7]));
        assert_eq!(l.to_bytes().unwrap(), b);
        assert_eq!(ChangedNsList::from_ids([7, 1, 7, 0]), l);

        let mut over = vec![0u8; 4096];
        over[0..4].copy_from_slice(&[0xFF; 4]);
        assert_eq!(ChangedNsList::parse(&over).unwrap(), ChangedNsList::TooMany);
        assert_eq!(ChangedNsList::TooMany.to_bytes().unwrap(), over);
        assert_eq!(ChangedNsList::from_ids(1..=1025), ChangedNsList::TooMany);
        over[4000] = 1;
        assert_eq!(
            ChangedNsList::parse(&over).unwrap_err().offset(),
            Some(4000)
        );
        b[4..8].copy_from_slice(&1u32.to_le_bytes()); // not increasing
        assert_eq!(ChangedNsList::parse(&b).unwrap_err().offset(), Some(4));
        assert!(ChangedNsList::Changed(vec![2, 1]).to_bytes().is_err());
        assert!(ChangedNsList::parse(&b[..100]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn effects_round_trip(b in proptest::collection::vec(any::<u8>(), 4096)) {
            let mut b = b;
            let log = CommandEffectsLog::parse(&b).unwrap();
            b[2048..].fill(0);
            prop_assert_eq!(log.to_bytes(), b);
        }

        #[test]
        fn changed_lists_round_trip(ids in proptest::collection::vec(any::<u32>(), 0..1100)) {
            let l = ChangedNsList::from_ids(ids);
            let b = l.to_bytes().unwrap();
            prop_assert_eq!(ChangedNsList::parse(&b).unwrap(), l);
        }

        #[test]
        fn any_changed_page_never_panics(b in proptest::collection::vec(any::<u8>(), 4096)) {
            if let Ok(l) = ChangedNsList::parse(&b) {
                prop_assert_eq!(l.to_bytes().unwrap(), b);
            }
        }
    }
}
