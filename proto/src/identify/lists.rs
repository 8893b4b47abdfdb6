//! Identify lists: the Active Namespace ID list (CNS 02h; Base §5.17.2.2) and the Namespace
//! Identification Descriptor list (CNS 03h; Base §5.17.2.3, Figures 278–279; Linux
//! `struct nvme_ns_id_desc`).
//!
//! Invariants kept by both parse and emit:
//! - the active list holds at most 1024 NSIDs, strictly increasing, none 0 or FFFFFFFFh, and
//!   every entry after the first zero is zero;
//! - a descriptor of a known type (EUI64, NGUID, UUID, CSI) has exactly its defined length;
//!   the descriptor list ends at the first NIDT 0 (bytes after it are ignored) or at the end of
//!   the 4096-byte buffer, and no descriptor may run past the buffer.

use super::{get, put, Csi, IDENTIFY_DATA_LEN as LEN};
use crate::error::{exact, room, ParseError};

/// Largest number of NSIDs in one namespace list (4096 / 4).
pub const NS_LIST_MAX: usize = LEN / 4;

/// The broadcast NSID, never a namespace of its own.
const NSID_BROADCAST: u32 = 0xFFFF_FFFF;

/// Active Namespace ID list: the active NSIDs greater than the command's NSID, ascending.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ActiveNsList {
    /// The NSIDs, strictly increasing, at most [`NS_LIST_MAX`].
    pub ids: Vec<u32>,
}

impl ActiveNsList {
    const WHAT: &'static str = "Active Namespace ID list";

    /// The list a controller returns for Identify CNS 02h with NSID `after`: the NSIDs of `ids`
    /// greater than `after`, sorted, without duplicates, 0 or FFFFFFFFh, at most 1024 of them.
    pub fn after(after: u32, ids: impl IntoIterator<Item = u32>) -> ActiveNsList {
        let mut v: Vec<u32> = ids
            .into_iter()
            .filter(|&id| id > after && id != NSID_BROADCAST)
            .collect();
        v.sort_unstable();
        v.dedup();
        v.truncate(NS_LIST_MAX);
        ActiveNsList { ids: v }
    }

    /// Parses exactly 4096 bytes.
    pub fn parse(b: &[u8]) -> Result<ActiveNsList, ParseError> {
        exact(Self::WHAT, b, LEN)?;
        Ok(ActiveNsList {
            ids: parse_id_list(Self::WHAT, b, true)?,
        })
    }

    /// Writes exactly 4096 bytes (unused entries zero). Fails if the list breaks an invariant.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, LEN)?;
        emit_id_list(Self::WHAT, b, &self.ids, true)
    }

    /// The list as 4096 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// Reads a zero-terminated list of NSIDs filling `b` (a multiple of 4 bytes); with `ascending`,
/// entries must be strictly increasing.
pub(crate) fn parse_id_list(
    what: &'static str,
    b: &[u8],
    ascending: bool,
) -> Result<Vec<u32>, ParseError> {
    let mut ids = Vec::new();
    let mut ended = false;
    for at in (0..b.len()).step_by(4) {
        let id: u32 = get(b, at..at + 4);
        let bad = |reason: &'static str| ParseError::InvalidField {
            what,
            field: reason,
            offset: at,
            value: u64::from(id),
        };
        if ended {
            if id != 0 {
                return Err(bad("entry after the terminating zero"));
            }
        } else if id == 0 {
            ended = true;
        } else if id == NSID_BROADCAST {
            return Err(bad("broadcast NSID in a list"));
        } else if ascending && ids.last().is_some_and(|&last| id <= last) {
            return Err(bad("NSIDs not strictly increasing"));
        } else {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Writes a zero-terminated NSID list into all of `b` (a multiple of 4 bytes).
pub(crate) fn emit_id_list(
    what: &'static str,
    b: &mut [u8],
    ids: &[u32],
    ascending: bool,
) -> Result<(), ParseError> {
    if ids.len() * 4 > b.len() {
        return Err(ParseError::InvalidField {
            what,
            field: "number of NSIDs",
            offset: 0,
            value: ids.len() as u64,
        });
    }
    b.fill(0);
    let mut last = 0u32;
    for (i, &id) in ids.iter().enumerate() {
        let bad = |reason: &'static str| ParseError::InvalidField {
            what,
            field: reason,
            offset: 4 * i,
            value: u64::from(id),
        };
        if id == 0 || id == NSID_BROADCAST {
            return Err(bad("NSID 0 or broadcast in a list"));
        }
        if ascending && id <= last {
            return Err(bad("NSIDs not strictly increasing"));
        }
        last = id;
        put(b, 4 * i..4 * i + 4, id);
    }
    Ok(())
}

code_newtype! {
    /// Namespace Identifier Type (NIDT; Base Figure 279).
    pub struct NsIdType(u8) {
        /// IEEE Extended Unique Identifier, 8 bytes.
        EUI64 = 0x01,
        /// Namespace Globally Unique Identifier, 16 bytes.
        NGUID = 0x02,
        /// Namespace UUID, 16 bytes.
        UUID = 0x03,
        /// Command Set Identifier, 1 byte.
        CSI = 0x04,
    }
}

impl NsIdType {
    /// The NIDL a descriptor of this type must have, for known types.
    pub fn required_len(self) -> Option<usize> {
        match self {
            NsIdType::EUI64 => Some(8),
            NsIdType::NGUID | NsIdType::UUID => Some(16),
            NsIdType::CSI => Some(1),
            _ => None,
        }
    }
}

/// One namespace identification descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NsIdDescriptor {
    /// IEEE EUI-64.
    Eui64([u8; 8]),
    /// NGUID.
    Nguid([u8; 16]),
    /// UUID (RFC 4122 byte order).
    Uuid([u8; 16]),
    /// Command set of the namespace.
    Csi(Csi),
    /// A type this crate does not know, kept with its identifier bytes. `nidt` is never 0 or a
    /// known type, and `nid` is at most 255 bytes.
    Unknown {
        /// Namespace Identifier Type.
        nidt: NsIdType,
        /// Namespace Identifier bytes.
        nid: Vec<u8>,
    },
}

impl NsIdDescriptor {
    /// Size of the descriptor header (NIDT, NIDL, 2 reserved bytes).
    pub const HEADER_LEN: usize = 4;

    /// The descriptor's type.
    pub fn nidt(&self) -> NsIdType {
        match self {
            NsIdDescriptor::Eui64(_) => NsIdType::EUI64,
            NsIdDescriptor::Nguid(_) => NsIdType::NGUID,
            NsIdDescriptor::Uuid(_) => NsIdType::UUID,
            NsIdDescriptor::Csi(_) => NsIdType::CSI,
            NsIdDescriptor::Unknown { nidt, .. } => *nidt,
        }
    }

    fn nid(&self) -> Vec<u8> {
        match self {
            NsIdDescriptor::Eui64(v) => v.to_vec(),
            NsIdDescriptor::Nguid(v) | NsIdDescriptor::Uuid(v) => v.to_vec(),
            NsIdDescriptor::Csi(c) => vec![c.0],
            NsIdDescriptor::Unknown { nid, .. } => nid.clone(),
        }
    }

    /// Bytes the descriptor takes on the wire (header plus identifier).
    pub fn encoded_len(&self) -> usize {
        Self::HEADER_LEN + self.nid().len()
    }
}

/// Namespace Identification Descriptor list (CNS 03h): exactly 4096 bytes on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NsIdDescriptorList {
    /// The descriptors in wire order.
    pub descriptors: Vec<NsIdDescriptor>,
}

impl NsIdDescriptorList {
    const WHAT: &'static str = "Namespace Identification Descriptor list";

    /// Parses exactly 4096 bytes.
    ///
    /// A known type with the wrong NIDL is [`ParseError::InvalidField`] at the NIDL byte; a
    /// descriptor running past the buffer is [`ParseError::InvalidField`] at its NIDT byte.
    pub fn parse(b: &[u8]) -> Result<NsIdDescriptorList, ParseError> {
        exact(Self::WHAT, b, LEN)?;
        let mut descriptors = Vec::new();
        let mut at = 0;
        while at < LEN {
            let nidt = NsIdType(b[at]);
            if nidt.0 == 0 {
                break;
            }
            let past_end = ParseError::InvalidField {
                what: Self::WHAT,
                field: "descriptor runs past the buffer",
                offset: at,
                value: u64::from(nidt.0),
            };
            if at + NsIdDescriptor::HEADER_LEN > LEN {
                return Err(past_end);
            }
            let nidl = usize::from(b[at + 1]);
            if let Some(need) = nidt.required_len() {
                if nidl != need {
                    return Err(ParseError::InvalidField {
                        what: Self::WHAT,
                        field: "nidl",
                        offset: at + 1,
                        value: nidl as u64,
                    });
                }
            }
            let start = at + NsIdDescriptor::HEADER_LEN;
            let end = start + nidl;
            if end > LEN {
                return Err(past_end);
            }
            let nid = &b[start..end];
            descriptors.push(match nidt {
                NsIdType::EUI64 => NsIdDescriptor::Eui64(get(b, start..end)),
                NsIdType::NGUID => NsIdDescriptor::Nguid(get(b, start..end)),
                NsIdType::UUID => NsIdDescriptor::Uuid(get(b, start..end)),
                NsIdType::CSI => NsIdDescriptor::Csi(Csi(nid[0])),
                _ => NsIdDescriptor::Unknown {
                    nidt,
                    nid: nid.to_vec(),
                },
            });
            at = end;
        }
        Ok(NsIdDescriptorList { descriptors })
    }

    /// Writes exactly 4096 bytes: the descriptors, then zeros (the terminating NIDT 0).
    ///
    /// Fails if the descriptors do not fit, or an `Unknown` descriptor has NIDT 0, a known
    /// NIDT, or more than 255 identifier bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, LEN)?;
        b.fill(0);
        let mut at = 0;
        for d in &self.descriptors {
            let nidt = d.nidt();
            let nid = d.nid();
            let bad = |field: &'static str, value: u64| ParseError::InvalidField {
                what: Self::WHAT,
                field,
                offset: at,
                value,
            };
            if let NsIdDescriptor::Unknown { nidt, .. } = d {
                if nidt.0 == 0 || nidt.is_known() {
                    return Err(bad(
                        "unknown descriptor with a zero or known nidt",
                        u64::from(nidt.0),
                    ));
                }
            }
            let nidl = u8::try_from(nid.len()).map_err(|_| bad("nidl", nid.len() as u64))?;
            let end = at + NsIdDescriptor::HEADER_LEN + nid.len();
            if end > LEN {
                return Err(bad("descriptors exceed 4096 bytes", end as u64));
            }
            b[at] = nidt.0;
            b[at + 1] = nidl;
            b[at + NsIdDescriptor::HEADER_LEN..end].copy_from_slice(&nid);
            at = end;
        }
        Ok(())
    }

    /// The list as 4096 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; LEN];
        self.emit(&mut b)?;
        Ok(b)
    }

    /// The first descriptor of type `nidt`, if any.
    pub fn find(&self, nidt: NsIdType) -> Option<&NsIdDescriptor> {
        self.descriptors.iter().find(|d| d.nidt() == nidt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn active_list_layout() {
        let mut b = vec![0u8; 4096];
        b[0..4].copy_from_slice(&1u32.to_le_bytes());
        b[4..8].copy_from_slice(&2u32.to_le_bytes());
        b[8..12].copy_from_slice(&0x100u32.to_le_bytes());
        let l = ActiveNsList::parse(&b).unwrap();
        assert_eq!(l.ids, vec![1, 2, 0x100]);
        assert_eq!(l.to_bytes().unwrap(), b);
        assert_eq!(
            ActiveNsList::after(1, [0x100, 2, 1, 2, 0xFFFF_FFFF]).ids,
            vec![2, 0x100]
        );
        let full = ActiveNsList::after(0, 1..=5000);
        assert_eq!(full.ids.len(), 1024);
        let fb = full.to_bytes().unwrap();
        assert_eq!(&fb[4092..4096], &1024u32.to_le_bytes());
        assert_eq!(ActiveNsList::parse(&fb).unwrap(), full);
    }

    #[test]
    fn active_list_rejections() {
        let mut b = vec![0u8; 4096];
        b[0..4].copy_from_slice(&5u32.to_le_bytes());
        b[4..8].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(ActiveNsList::parse(&b).unwrap_err().offset(), Some(4));
        b[4..8].fill(0);
        b[12..16].copy_from_slice(&9u32.to_le_bytes()); // after the terminator
        assert_eq!(ActiveNsList::parse(&b).unwrap_err().offset(), Some(12));
        b[12..16].fill(0);
        b[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ActiveNsList::parse(&b).unwrap_err().offset(), Some(0));
        assert!(ActiveNsList::parse(&b[..4092]).is_err());
        assert!(ActiveNsList::parse(&[0u8; 4100]).is_err());
        for bad in [vec![3, 2], vec![0], vec![u32::MAX], (1..=1025).collect()] {
            assert!(ActiveNsList { ids: bad }.to_bytes().is_err());
        }
    }

    /// What Linux nvmet returns for a namespace with UUID, NGUID, EUI64... in its own order:
    /// EUI64 (if set), NGUID, UUID, CSI.
    fn hand_built() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0] = 1; // NIDT EUI64
        b[1] = 8;
        b[4..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b[12] = 2; // NGUID
        b[13] = 16;
        b[16..32].copy_from_slice(&[0xAA; 16]);
        b[32] = 3; // UUID
        b[33] = 16;
        b[36..52].copy_from_slice(&[0x55; 16]);
        b[52] = 4; // CSI
        b[53] = 1;
        b[56] = 0; // NVM
        b[57] = 0xE0; // unknown type
        b[58] = 3;
        b[61..64].copy_from_slice(&[9, 9, 9]);
        b
    }

    fn expected() -> NsIdDescriptorList {
        NsIdDescriptorList {
            descriptors: vec![
                NsIdDescriptor::Eui64([1, 2, 3, 4, 5, 6, 7, 8]),
                NsIdDescriptor::Nguid([0xAA; 16]),
                NsIdDescriptor::Uuid([0x55; 16]),
                NsIdDescriptor::Csi(Csi::NVM),
                NsIdDescriptor::Unknown {
                    nidt: NsIdType(0xE0),
                    nid: vec![9, 9, 9],
                },
            ],
        }
    }

    #[test]
    fn descriptor_list_layout() {
        let l = NsIdDescriptorList::parse(&hand_built()).unwrap();
        assert_eq!(l, expected());
        assert_eq!(
            l.find(NsIdType::UUID),
            Some(&NsIdDescriptor::Uuid([0x55; 16]))
        );
        assert_eq!(expected().to_bytes().unwrap(), hand_built());
    }

    #[test]
    fn descriptor_list_rejections() {
        let mut b = hand_built();
        b[13] = 15; // NGUID with NIDL 15
        assert_eq!(
            NsIdDescriptorList::parse(&b).unwrap_err().offset(),
            Some(13)
        );
        let mut b = hand_built();
        b[53] = 2; // CSI with NIDL 2
        assert_eq!(
            NsIdDescriptorList::parse(&b).unwrap_err().offset(),
            Some(53)
        );
        let mut b = vec![0u8; 4096];
        b[4090] = 0xE0; // unknown type whose identifier runs past the end
        b[4091] = 10;
        b[..4090].fill(0xE1); // chain of unknown descriptors (NIDL 0xE1 = 225) up to 4090
        let mut at = 0;
        while at + 4 + 225 <= 4090 {
            b[at + 1] = 225;
            at += 4 + 225;
        }
        // Fill the gap before 4090 with one descriptor of the right length.
        b[at] = 0xE1;
        b[at + 1] = (4090 - at - 4) as u8;
        assert!(matches!(
            NsIdDescriptorList::parse(&b),
            Err(ParseError::InvalidField { offset: 4090, .. })
        ));
        let mut b = vec![0u8; 4096];
        b[4094] = 0xE0; // header itself runs past the end
        b[..4094].fill(0);
        b[0] = 0xE1;
        b[1] = 0xFF;
        let mut at = 0;
        while at + 4 + 255 <= 4094 {
            b[at] = 0xE1;
            b[at + 1] = 255;
            at += 259;
        }
        b[at] = 0xE1;
        b[at + 1] = (4094 - at - 4) as u8;
        assert!(matches!(
            NsIdDescriptorList::parse(&b),
            Err(ParseError::InvalidField { offset: 4094, .. })
        ));
        assert!(NsIdDescriptorList::parse(&[0u8; 4095]).is_err());
        assert!(NsIdDescriptorList::parse(&[0u8; 4097]).is_err());
    }

    #[test]
    fn descriptor_emit_rejections() {
        let known_as_unknown = NsIdDescriptorList {
            descriptors: vec![NsIdDescriptor::Unknown {
                nidt: NsIdType::NGUID,
                nid: vec![0; 16],
            }],
        };
        assert!(known_as_unknown.to_bytes().is_err());
        let too_long = NsIdDescriptorList {
            descriptors: vec![NsIdDescriptor::Unknown {
                nidt: NsIdType(0x80),
                nid: vec![0; 256],
            }],
        };
        assert!(too_long.to_bytes().is_err());
        let too_many = NsIdDescriptorList {
            descriptors: vec![NsIdDescriptor::Nguid([1; 16]); 205],
        };
        assert!(too_many.to_bytes().is_err());
        let exactly_full = NsIdDescriptorList {
            descriptors: vec![NsIdDescriptor::Nguid([1; 16]); 204]
                .into_iter()
                .chain([NsIdDescriptor::Unknown {
                    nidt: NsIdType(0x80),
                    nid: vec![2; 12],
                }])
                .collect(),
        };
        let b = exactly_full.to_bytes().unwrap();
        assert_eq!(b[4095], 2);
        assert_eq!(NsIdDescriptorList::parse(&b).unwrap(), exactly_full);
    }

    fn descriptor() -> impl Strategy<Value = NsIdDescriptor> {
        prop_oneof![
            any::<[u8; 8]>().prop_map(NsIdDescriptor::Eui64),
            any::<[u8; 16]>().prop_map(NsIdDescriptor::Nguid),
            any::<[u8; 16]>().prop_map(NsIdDescriptor::Uuid),
            any::<u8>().prop_map(|c| NsIdDescriptor::Csi(Csi(c))),
            (5u8..=255, proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(t, nid)| {
                NsIdDescriptor::Unknown {
                    nidt: NsIdType(t),
                    nid,
                }
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn descriptor_lists_round_trip(ds in proptest::collection::vec(descriptor(), 0..20)) {
            let l = NsIdDescriptorList { descriptors: ds };
            let b = l.to_bytes().unwrap();
            let back = NsIdDescriptorList::parse(&b).unwrap();
            prop_assert_eq!(&back, &l);
            prop_assert_eq!(back.to_bytes().unwrap(), b);
        }

        #[test]
        fn active_lists_round_trip(mut ids in proptest::collection::vec(1u32..u32::MAX, 0..1024)) {
            ids.sort_unstable();
            ids.dedup();
            let l = ActiveNsList { ids };
            let b = l.to_bytes().unwrap();
            prop_assert_eq!(ActiveNsList::parse(&b).unwrap(), l);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 4096)) {
            if let Ok(l) = NsIdDescriptorList::parse(&b) {
                prop_assert_eq!(NsIdDescriptorList::parse(&l.to_bytes().unwrap()).unwrap(), l);
            }
            if let Ok(l) = ActiveNsList::parse(&b) {
                prop_assert_eq!(l.to_bytes().unwrap(), b);
            }
        }
    }
}
