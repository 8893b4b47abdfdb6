//! SGL descriptors (Base §4.3.2, Figures 114–120) as NVMe/RDMA uses them.
//!
//! A descriptor is 16 bytes; byte 15 is the SGL identifier: bits 7:4 the descriptor type, bits
//! 3:0 the sub type. NVMe/RDMA hosts send either a *keyed data block* (type 4: the target moves
//! the data with RDMA READ/WRITE using the host's address and rkey; sub type 0xF asks the target
//! to invalidate the key) or a *data block with offset* (type 0, sub type 1: in-capsule data
//! starting `offset` bytes after the 64-byte SQE).

use crate::bytes::{is_zero, le24, le32, le64, put_le24, put_le32, put_le64, Field};
use crate::error::{exact, room, ParseError};

/// Size of one SGL descriptor.
pub const SGL_DESCRIPTOR_LEN: usize = 16;

mod field {
    use crate::bytes::Field;
    pub const ADDRESS: Field = 0..8;
    /// Data block / segment length (4 bytes).
    pub const LENGTH: Field = 8..12;
    /// Keyed data block length (3 bytes).
    pub const KEYED_LENGTH: Field = 8..11;
    pub const KEY: Field = 11..15;
    /// Reserved bytes of unkeyed descriptors (ignored on parse, zero on emit).
    #[cfg(test)]
    pub const RESERVED_DATA_BLOCK: Field = 12..15;
    pub const IDENTIFIER: usize = 15;
}

code_newtype! {
    /// SGL descriptor type (Base Figure 116, identifier bits 7:4).
    pub struct SglType(u8) {
        /// Data block.
        DATA_BLOCK = 0x0,
        /// Bit bucket.
        BIT_BUCKET = 0x1,
        /// Segment.
        SEGMENT = 0x2,
        /// Last segment.
        LAST_SEGMENT = 0x3,
        /// Keyed data block.
        KEYED_DATA_BLOCK = 0x4,
        /// Transport SGL data block.
        TRANSPORT_DATA_BLOCK = 0x5,
    }
}

code_newtype! {
    /// SGL descriptor sub type (Base Figure 117, identifier bits 3:0).
    pub struct SglSubtype(u8) {
        /// The address field is a memory address.
        ADDRESS = 0x0,
        /// The address field is an offset (in-capsule data on fabrics).
        OFFSET = 0x1,
        /// Transport specific (keyed SGL: "invalidate the key" on NVMe/RDMA).
        INVALIDATE_KEY = 0xF,
    }
}

/// One SGL descriptor as a typed value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SglDescriptor {
    /// Keyed SGL data block: remote memory the target reaches with RDMA READ/WRITE.
    Keyed {
        /// Remote virtual address.
        address: u64,
        /// Length in bytes (24 bits on the wire: at most 16 MiB − 1).
        length: u32,
        /// Remote key (rkey).
        key: u32,
        /// Sub type 0xF: the host asks the target to invalidate `key` when the command completes.
        invalidate: bool,
    },
    /// Data block with offset: in-capsule data `offset` bytes after the SQE.
    InCapsule {
        /// Offset from the end of the SQE (hosts send 0; Identify Controller icdoff is 0).
        offset: u64,
        /// Length in bytes.
        length: u32,
    },
    /// Data block with a plain address (not usable over fabrics, parsed to be rejected precisely).
    DataBlock {
        /// Address.
        address: u64,
        /// Length in bytes.
        length: u32,
    },
    /// Segment or last segment: points at a list of descriptors.
    Segment {
        /// Whether this is the last segment (type 3) rather than a segment (type 2).
        last: bool,
        /// The sub type (address or offset).
        subtype: SglSubtype,
        /// Address or offset of the list.
        address: u64,
        /// Length of the list in bytes (a multiple of 16).
        length: u32,
    },
    /// Bit bucket (type 1): data the host discards.
    BitBucket {
        /// Length in bytes.
        length: u32,
    },
}

const WHAT: &str = "SGL descriptor";

impl SglDescriptor {
    /// The descriptor's type and sub type from its identifier byte.
    pub fn identifier(byte: u8) -> (SglType, SglSubtype) {
        (SglType(byte >> 4), SglSubtype(byte & 0xF))
    }

    /// Parses exactly 16 bytes.
    ///
    /// Unknown types and sub types are [`ParseError::InvalidField`] at byte 15 (a bit bucket's
    /// non-zero reserved address at its byte), which the target answers
    /// with "SGL descriptor type invalid".
    pub fn parse(b: &[u8]) -> Result<SglDescriptor, ParseError> {
        exact(WHAT, b, SGL_DESCRIPTOR_LEN)?;
        let id = b[field::IDENTIFIER];
        let (ty, sub) = Self::identifier(id);
        let bad_id = || ParseError::InvalidField {
            what: WHAT,
            field: "identifier",
            offset: field::IDENTIFIER,
            value: u64::from(id),
        };
        let address = le64(b, field::ADDRESS);
        match ty {
            SglType::KEYED_DATA_BLOCK => {
                let invalidate = match sub {
                    SglSubtype::ADDRESS => false,
                    SglSubtype::INVALIDATE_KEY => true,
                    _ => return Err(bad_id()),
                };
                Ok(SglDescriptor::Keyed {
                    address,
                    length: le24(b, field::KEYED_LENGTH),
                    key: le32(b, field::KEY),
                    invalidate,
                })
            }
            SglType::DATA_BLOCK | SglType::BIT_BUCKET => {
                // Bytes 12..15 are reserved but NOT checked: the Linux host fills only address,
                // length and identifier of its in-capsule descriptor and leaves the previous
                // command's key bytes there (seen in the lab: `cc 00 00`), and Linux nvmet
                // ignores them. Refusing them fails every small write of a Linux host.
                let length = le32(b, field::LENGTH);
                match (ty, sub) {
                    (SglType::DATA_BLOCK, SglSubtype::OFFSET) => Ok(SglDescriptor::InCapsule {
                        offset: address,
                        length,
                    }),
                    (SglType::DATA_BLOCK, SglSubtype::ADDRESS) => {
                        Ok(SglDescriptor::DataBlock { address, length })
                    }
                    (SglType::BIT_BUCKET, SglSubtype::ADDRESS) => {
                        // The address field of a bit bucket is reserved (Base Figure 119).
                        check_reserved(b, field::ADDRESS)?;
                        Ok(SglDescriptor::BitBucket { length })
                    }
                    _ => Err(bad_id()),
                }
            }
            SglType::SEGMENT | SglType::LAST_SEGMENT => {
                // Reserved bytes 12..15 ignored, as for data blocks.
                if sub != SglSubtype::ADDRESS && sub != SglSubtype::OFFSET {
                    return Err(bad_id());
                }
                Ok(SglDescriptor::Segment {
                    last: ty == SglType::LAST_SEGMENT,
                    subtype: sub,
                    address,
                    length: le32(b, field::LENGTH),
                })
            }
            _ => Err(bad_id()),
        }
    }

    /// Writes the descriptor into exactly 16 bytes.
    ///
    /// A keyed length over 24 bits cannot be encoded and is an error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(WHAT, b, SGL_DESCRIPTOR_LEN)?;
        b.fill(0);
        let (ty, sub) = match *self {
            SglDescriptor::Keyed {
                address,
                length,
                key,
                invalidate,
            } => {
                if length > 0xFF_FFFF {
                    return Err(ParseError::InvalidField {
                        what: WHAT,
                        field: "keyed length",
                        offset: field::KEYED_LENGTH.start,
                        value: u64::from(length),
                    });
                }
                put_le64(b, field::ADDRESS, address);
                put_le24(b, field::KEYED_LENGTH, length);
                put_le32(b, field::KEY, key);
                let sub = if invalidate {
                    SglSubtype::INVALIDATE_KEY
                } else {
                    SglSubtype::ADDRESS
                };
                (SglType::KEYED_DATA_BLOCK, sub)
            }
            SglDescriptor::InCapsule { offset, length } => {
                put_le64(b, field::ADDRESS, offset);
                put_le32(b, field::LENGTH, length);
                (SglType::DATA_BLOCK, SglSubtype::OFFSET)
            }
            SglDescriptor::DataBlock { address, length } => {
                put_le64(b, field::ADDRESS, address);
                put_le32(b, field::LENGTH, length);
                (SglType::DATA_BLOCK, SglSubtype::ADDRESS)
            }
            SglDescriptor::Segment {
                last,
                subtype,
                address,
                length,
            } => {
                put_le64(b, field::ADDRESS, address);
                put_le32(b, field::LENGTH, length);
                let ty = if last {
                    SglType::LAST_SEGMENT
                } else {
                    SglType::SEGMENT
                };
                (ty, SglSubtype(subtype.0 & 0xF))
            }
            SglDescriptor::BitBucket { length } => {
                put_le32(b, field::LENGTH, length);
                (SglType::BIT_BUCKET, SglSubtype::ADDRESS)
            }
        };
        b[field::IDENTIFIER] = ty.0 << 4 | sub.0;
        Ok(())
    }

    /// The descriptor as 16 bytes.
    pub fn to_bytes(&self) -> Result<[u8; SGL_DESCRIPTOR_LEN], ParseError> {
        let mut b = [0u8; SGL_DESCRIPTOR_LEN];
        self.emit(&mut b)?;
        Ok(b)
    }

    /// Bytes of data this descriptor describes.
    pub fn length(&self) -> u32 {
        match *self {
            SglDescriptor::Keyed { length, .. }
            | SglDescriptor::InCapsule { length, .. }
            | SglDescriptor::DataBlock { length, .. }
            | SglDescriptor::Segment { length, .. }
            | SglDescriptor::BitBucket { length } => length,
        }
    }
}

fn check_reserved(b: &[u8], f: Field) -> Result<(), ParseError> {
    if is_zero(b, f.clone()) {
        Ok(())
    } else {
        Err(ParseError::InvalidField {
            what: WHAT,
            field: "reserved",
            offset: f.start,
            value: u64::from(b[f.start]) | u64::from(b[f.start + 1]) << 8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keyed_invalidate_layout() {
        // What Linux nvme-rdma's nvme_rdma_map_sg_single() builds: addr, 3-byte length, key,
        // type (NVME_KEY_SGL_FMT_DATA_DESC << 4) | NVME_SGL_FMT_INVALIDATE = 0x4F.
        let d = SglDescriptor::Keyed {
            address: 0x1122_3344_5566_7788,
            length: 0x01_0000,
            key: 0xDEAD_BEEF,
            invalidate: true,
        };
        let want = [
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x00, 0x01, 0xEF, 0xBE, 0xAD,
            0xDE, 0x4F,
        ];
        assert_eq!(d.to_bytes().unwrap(), want);
        assert_eq!(SglDescriptor::parse(&want).unwrap(), d);
    }

    #[test]
    fn in_capsule_offset_layout() {
        // nvme_rdma_map_sg_inline(): offset 0, length, type (NVME_SGL_FMT_DATA_DESC << 4) |
        // NVME_SGL_FMT_OFFSET = 0x01.
        let d = SglDescriptor::InCapsule {
            offset: 0,
            length: 4096,
        };
        let mut want = [0u8; 16];
        want[8..12].copy_from_slice(&4096u32.to_le_bytes());
        want[15] = 0x01;
        assert_eq!(d.to_bytes().unwrap(), want);
        assert_eq!(SglDescriptor::parse(&want).unwrap(), d);
    }

    #[test]
    fn last_segment_layout() {
        let d = SglDescriptor::Segment {
            last: true,
            subtype: SglSubtype::OFFSET,
            address: 0x40,
            length: 32,
        };
        let b = d.to_bytes().unwrap();
        assert_eq!(b[15], 0x31);
        assert_eq!(&b[0..8], &0x40u64.to_le_bytes());
        assert_eq!(&b[8..12], &32u32.to_le_bytes());
        assert_eq!(SglDescriptor::parse(&b).unwrap(), d);
    }

    #[test]
    fn rejects_unknown_types_reserved_bytes_and_bad_lengths() {
        let mut b = [0u8; 16];
        b[15] = 0x70; // type 7: reserved
        assert!(matches!(
            SglDescriptor::parse(&b),
            Err(ParseError::InvalidField { offset: 15, .. })
        ));
        b[15] = 0x10; // bit bucket with a non-zero (reserved) address: found by fuzzing
        b[0] = 10;
        assert!(matches!(
            SglDescriptor::parse(&b),
            Err(ParseError::InvalidField { offset: 0, .. })
        ));
        b[0] = 0;
        b[15] = 0x42; // keyed with sub type 2
        assert!(SglDescriptor::parse(&b).is_err());
        b[15] = 0x01;
        b[8] = 0x00;
        b[9] = 0x20;
        b[12] = 0xcc; // reserved bytes of a data block: the Linux host leaves stale key bytes
        assert_eq!(
            SglDescriptor::parse(&b).unwrap(),
            SglDescriptor::InCapsule {
                offset: 0,
                length: 0x2000
            }
        );
        assert!(matches!(
            SglDescriptor::parse(&[0u8; 15]),
            Err(ParseError::Truncated { .. })
        ));
        assert!(matches!(
            SglDescriptor::parse(&[0u8; 17]),
            Err(ParseError::TrailingBytes { .. })
        ));
        let too_long = SglDescriptor::Keyed {
            address: 0,
            length: 1 << 24,
            key: 0,
            invalidate: false,
        };
        assert!(too_long.to_bytes().is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_error_and_valid_ones_round_trip(b in proptest::array::uniform16(any::<u8>())) {
            if let Ok(d) = SglDescriptor::parse(&b) {
                // Round trip up to the reserved bytes 12..15 of unkeyed descriptors, which are
                // ignored on parse and written as zero.
                let mut want = b;
                if b[15] >> 4 != 4 {
                    want[field::RESERVED_DATA_BLOCK].fill(0);
                }
                prop_assert_eq!(d.to_bytes().unwrap(), want);
            }
        }
    }
}
