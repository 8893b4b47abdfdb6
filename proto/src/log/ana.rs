//! Asymmetric Namespace Access log page (LID 0Ch; Base §5.16.1.12, Figures 218–219; Linux
//! `struct nvme_ana_rsp_hdr` / `nvme_ana_group_desc`).
//!
//! A 16-byte header (change count, number of group descriptors) followed by that many
//! descriptors, each 32 bytes plus 4 bytes per NSID. With Get Log Page LSP bit 0 (RGO, "return
//! groups only") descriptors carry no NSIDs. The page has no fixed size: [`AnaLog::parse`] takes
//! exactly the encoded bytes, [`AnaLog::parse_prefix`] a buffer that may continue past them (the
//! host reads a buffer sized for the worst case). Group id 0 is rejected, as the Linux host does.

use crate::error::{at_least, room, ParseError};
use crate::identify::{get, put};

/// Get Log Page LSP bit 0 for the ANA log: Return Groups Only (no NSID lists).
pub const ANA_LSP_RGO: u8 = 1 << 0;

code_newtype! {
    /// ANA state of a group (descriptor byte 16 bits 3:0; Base Figure 219).
    pub struct AnaState(u8) {
        /// ANA Optimized.
        OPTIMIZED = 0x01,
        /// ANA Non-Optimized.
        NON_OPTIMIZED = 0x02,
        /// ANA Inaccessible.
        INACCESSIBLE = 0x03,
        /// ANA Persistent Loss.
        PERSISTENT_LOSS = 0x04,
        /// ANA Change (transitioning).
        CHANGE = 0x0F,
    }
}

mod field {
    use crate::bytes::Field;
    pub const HEADER_LEN: usize = 16;
    pub const CHGCNT: Field = 0..8;
    pub const NGRPS: Field = 8..10;
    pub const DESC_LEN: usize = 32;
    pub const D_GRPID: Field = 0..4;
    pub const D_NNSIDS: Field = 4..8;
    pub const D_CHGCNT: Field = 8..16;
    pub const D_STATE: usize = 16;
}

/// One ANA group descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AnaGroupDescriptor {
    /// ANA Group ID (bytes 3:0), never 0.
    pub grpid: u32,
    /// Change Count of this group (bytes 15:8).
    pub change_count: u64,
    /// ANA state (byte 16 bits 3:0; bits 7:4 are reserved and ignored).
    pub state: AnaState,
    /// NSIDs in the group (the count is bytes 7:4); empty with RGO.
    pub nsids: Vec<u32>,
}

impl AnaGroupDescriptor {
    /// Bytes this descriptor takes on the wire.
    pub fn encoded_len(&self) -> usize {
        field::DESC_LEN + 4 * self.nsids.len()
    }
}

/// The ANA log page.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AnaLog {
    /// Change Count of the whole page (bytes 7:0).
    pub change_count: u64,
    /// Group descriptors (their number is bytes 9:8, so at most 65535).
    pub groups: Vec<AnaGroupDescriptor>,
}

const WHAT: &str = "ANA log";

impl AnaLog {
    /// Bytes the page takes on the wire.
    pub fn encoded_len(&self) -> usize {
        field::HEADER_LEN
            + self
                .groups
                .iter()
                .map(AnaGroupDescriptor::encoded_len)
                .sum::<usize>()
    }

    /// Parses a page that fills `b` exactly.
    pub fn parse(b: &[u8]) -> Result<AnaLog, ParseError> {
        let (log, used) = Self::parse_prefix(b)?;
        if used != b.len() {
            return Err(ParseError::TrailingBytes {
                what: WHAT,
                expected: used,
                got: b.len(),
            });
        }
        Ok(log)
    }

    /// Parses a page at the start of `b`, returning it and the bytes it used; what follows is
    /// not looked at.
    pub fn parse_prefix(b: &[u8]) -> Result<(AnaLog, usize), ParseError> {
        at_least(WHAT, b, field::HEADER_LEN)?;
        let ngrps: u16 = get(b, field::NGRPS);
        let mut groups = Vec::new();
        let mut at = field::HEADER_LEN;
        for _ in 0..ngrps {
            at_least(WHAT, b, at + field::DESC_LEN)?;
            let d = &b[at..at + field::DESC_LEN];
            let grpid: u32 = get(d, field::D_GRPID);
            if grpid == 0 {
                return Err(ParseError::InvalidField {
                    what: WHAT,
                    field: "grpid",
                    offset: at,
                    value: 0,
                });
            }
            let nnsids: u32 = get(d, field::D_NNSIDS);
            // Checked in u64 so a hostile count cannot overflow or allocate.
            let end = at as u64 + field::DESC_LEN as u64 + 4 * u64::from(nnsids);
            if end > b.len() as u64 {
                return Err(ParseError::Truncated {
                    what: WHAT,
                    need: usize::try_from(end).unwrap_or(usize::MAX),
                    got: b.len(),
                });
            }
            let list = at + field::DESC_LEN;
            let nsids = (0..nnsids as usize)
                .map(|i| get(b, list + 4 * i..list + 4 * i + 4))
                .collect();
            groups.push(AnaGroupDescriptor {
                grpid,
                change_count: get(d, field::D_CHGCNT),
                state: AnaState(d[field::D_STATE] & 0xF),
                nsids,
            });
            at = end as usize;
        }
        Ok((
            AnaLog {
                change_count: get(b, field::CHGCNT),
                groups,
            },
            at,
        ))
    }

    /// Writes the page into exactly [`Self::encoded_len`] bytes. More than 65535 groups, a
    /// group id of 0, or a state above 0Fh is an error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(WHAT, b, self.encoded_len())?;
        let ngrps = u16::try_from(self.groups.len()).map_err(|_| ParseError::InvalidField {
            what: WHAT,
            field: "number of groups",
            offset: field::NGRPS.start,
            value: self.groups.len() as u64,
        })?;
        b.fill(0);
        put(b, field::CHGCNT, self.change_count);
        put(b, field::NGRPS, ngrps);
        let mut at = field::HEADER_LEN;
        for g in &self.groups {
            if g.grpid == 0 || g.state.0 > 0xF {
                return Err(ParseError::InvalidField {
                    what: WHAT,
                    field: if g.grpid == 0 { "grpid" } else { "state" },
                    offset: at,
                    value: u64::from(if g.grpid == 0 { 0 } else { g.state.0 }),
                });
            }
            put(b, at..at + 4, g.grpid);
            put(b, at + 4..at + 8, g.nsids.len() as u32);
            put(b, at + 8..at + 16, g.change_count);
            b[at + field::D_STATE] = g.state.0;
            let list = at + field::DESC_LEN;
            for (i, &id) in g.nsids.iter().enumerate() {
                put(b, list + 4 * i..list + 4 * i + 4, id);
            }
            at += g.encoded_len();
        }
        Ok(())
    }

    /// The page as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; self.encoded_len()];
        self.emit(&mut b)?;
        Ok(b)
    }

    /// The same page as returned with RGO: every group without its NSID list.
    pub fn groups_only(&self) -> AnaLog {
        AnaLog {
            change_count: self.change_count,
            groups: self
                .groups
                .iter()
                .map(|g| AnaGroupDescriptor {
                    nsids: Vec::new(),
                    ..g.clone()
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two groups: group 1 optimized with NSIDs 1 and 2, group 2 inaccessible with NSID 3.
    fn hand_built() -> Vec<u8> {
        let mut b = vec![0u8; 16 + 32 + 8 + 32 + 4];
        b[0..8].copy_from_slice(&9u64.to_le_bytes());
        b[8..10].copy_from_slice(&2u16.to_le_bytes());
        let d = 16;
        b[d..d + 4].copy_from_slice(&1u32.to_le_bytes());
        b[d + 4..d + 8].copy_from_slice(&2u32.to_le_bytes());
        b[d + 8..d + 16].copy_from_slice(&5u64.to_le_bytes());
        b[d + 16] = 0x01;
        b[d + 32..d + 36].copy_from_slice(&1u32.to_le_bytes());
        b[d + 36..d + 40].copy_from_slice(&2u32.to_le_bytes());
        let d = 16 + 40;
        b[d..d + 4].copy_from_slice(&2u32.to_le_bytes());
        b[d + 4..d + 8].copy_from_slice(&1u32.to_le_bytes());
        b[d + 8..d + 16].copy_from_slice(&6u64.to_le_bytes());
        b[d + 16] = 0x03;
        b[d + 32..d + 36].copy_from_slice(&3u32.to_le_bytes());
        b
    }

    fn expected() -> AnaLog {
        AnaLog {
            change_count: 9,
            groups: vec![
                AnaGroupDescriptor {
                    grpid: 1,
                    change_count: 5,
                    state: AnaState::OPTIMIZED,
                    nsids: vec![1, 2],
                },
                AnaGroupDescriptor {
                    grpid: 2,
                    change_count: 6,
                    state: AnaState::INACCESSIBLE,
                    nsids: vec![3],
                },
            ],
        }
    }

    #[test]
    fn layout() {
        assert_eq!(AnaLog::parse(&hand_built()).unwrap(), expected());
        assert_eq!(expected().to_bytes().unwrap(), hand_built());
        assert_eq!(expected().encoded_len(), hand_built().len());
        let rgo = expected().groups_only().to_bytes().unwrap();
        assert_eq!(rgo.len(), 16 + 64);
        assert_eq!(&rgo[16 + 4..16 + 8], &0u32.to_le_bytes());
        assert_eq!(rgo[16 + 32 + 16], 0x03);
    }

    #[test]
    fn prefix_and_trailing() {
        let mut b = hand_built();
        b.extend_from_slice(&[0u8; 100]);
        let (log, used) = AnaLog::parse_prefix(&b).unwrap();
        assert_eq!(log, expected());
        assert_eq!(used, hand_built().len());
        assert!(matches!(
            AnaLog::parse(&b),
            Err(ParseError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn rejections() {
        let b = hand_built();
        assert!(matches!(
            AnaLog::parse(&b[..b.len() - 1]),
            Err(ParseError::Truncated { .. })
        ));
        assert!(AnaLog::parse(&b[..10]).is_err());
        let mut huge = b.clone();
        huge[16 + 4..16 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            AnaLog::parse(&huge),
            Err(ParseError::Truncated { .. })
        ));
        let mut zero = b.clone();
        zero[56..60].fill(0);
        assert_eq!(AnaLog::parse(&zero).unwrap_err().offset(), Some(56));
        let mut bad = expected();
        bad.groups[1].grpid = 0;
        assert!(bad.to_bytes().is_err());
        let mut bad = expected();
        bad.groups[0].state = AnaState(0x10);
        assert!(bad.to_bytes().is_err());
        let many = AnaLog {
            change_count: 0,
            groups: vec![
                AnaGroupDescriptor {
                    grpid: 1,
                    ..Default::default()
                };
                65536
            ],
        };
        assert!(many.to_bytes().is_err());
    }

    fn group() -> impl Strategy<Value = AnaGroupDescriptor> {
        (
            1u32..,
            any::<u64>(),
            0u8..16,
            proptest::collection::vec(any::<u32>(), 0..8),
        )
            .prop_map(|(grpid, change_count, state, nsids)| AnaGroupDescriptor {
                grpid,
                change_count,
                state: AnaState(state),
                nsids,
            })
    }

    proptest! {
        #[test]
        fn round_trip(change_count: u64, groups in proptest::collection::vec(group(), 0..6)) {
            let log = AnaLog { change_count, groups };
            let b = log.to_bytes().unwrap();
            let back = AnaLog::parse(&b).unwrap();
            prop_assert_eq!(&back, &log);
            prop_assert_eq!(back.to_bytes().unwrap(), b);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok((log, used)) = AnaLog::parse_prefix(&b) {
                prop_assert!(used <= b.len());
                prop_assert_eq!(AnaLog::parse(&log.to_bytes().unwrap()).unwrap(), log);
            }
        }
    }
}
