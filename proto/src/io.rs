//! NVM command set I/O commands (NVM Command Set 1.0 §3): Read, Write, Compare, Flush, Write
//! Zeroes, Dataset Management and its range list.
//!
//! [`IoCommand::parse`] turns an SQE from an I/O queue into a typed command, or a
//! [`ParseError`] naming the offending field's byte, or `IoCommand::Unsupported` for an opcode
//! this crate does not model (the target answers "invalid opcode" with DNR). NLB fields are
//! 0-based on the wire; the typed values here are counts (`nlb + 1`), so no caller can forget.

use crate::bytes::{le32, le64, put_le32, put_le64};
use crate::error::{exact, room, ParseError};
use crate::opcode::IoOpcode;
use crate::sgl::SglDescriptor;
use crate::sqe::Sqe;

mod field {
    use crate::bytes::Field;
    /// Starting LBA: CDW10 (low) and CDW11 (high).
    pub const SLBA: Field = 40..48;
    /// CDW12.
    pub const CDW12: Field = 48..52;
    /// CDW13.
    pub const CDW13: Field = 52..56;
    /// CDW14.
    pub const CDW14: Field = 56..60;
    /// CDW15.
    pub const CDW15: Field = 60..64;
    /// CDW10 (DSM: number of ranges).
    pub const CDW10: Field = 40..44;
    /// CDW11 (DSM: attributes).
    pub const CDW11: Field = 44..48;
}

/// Read, Write or Compare (NVM Figures 37, 64, 22): one LBA range moved through one SGL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadWrite {
    /// Command identifier.
    pub cid: u16,
    /// Namespace.
    pub nsid: u32,
    /// Data pointer.
    pub sgl: SglDescriptor,
    /// Starting LBA.
    pub slba: u64,
    /// Number of logical blocks (1–65536; the wire field is this minus one).
    pub nlb: u32,
    /// Force Unit Access (CDW12 bit 30).
    pub fua: bool,
    /// Limited Retry (CDW12 bit 31).
    pub limited_retry: bool,
    /// Protection Information field (CDW12 bits 29:26).
    pub prinfo: u8,
    /// Directive type (CDW12 bits 23:20, Write only).
    pub dtype: u8,
    /// Dataset management hints (CDW13 bits 7:0).
    pub dsm: u8,
    /// Directive specific (CDW13 bits 31:16, Write only).
    pub dspec: u16,
    /// Expected initial logical block reference tag (CDW14).
    pub reftag: u32,
    /// Expected logical block application tag and mask (CDW15).
    pub apptag: u32,
}

/// Write Zeroes (NVM Figure 69).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteZeroes {
    /// Command identifier.
    pub cid: u16,
    /// Namespace.
    pub nsid: u32,
    /// Starting LBA.
    pub slba: u64,
    /// Number of logical blocks (1–65536).
    pub nlb: u32,
    /// Deallocate (CDW12 bit 25): the blocks may be deallocated.
    pub deallocate: bool,
    /// Force Unit Access (CDW12 bit 30).
    pub fua: bool,
    /// Limited Retry (CDW12 bit 31).
    pub limited_retry: bool,
    /// Protection Information field (CDW12 bits 29:26).
    pub prinfo: u8,
}

/// Dataset Management (NVM Figure 39); the ranges travel as data ([`DsmRange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatasetManagement {
    /// Command identifier.
    pub cid: u16,
    /// Namespace.
    pub nsid: u32,
    /// Data pointer to the range list.
    pub sgl: SglDescriptor,
    /// Number of ranges (1–256; the wire field is this minus one).
    pub ranges: u16,
    /// Integral dataset for read (CDW11 bit 0).
    pub idr: bool,
    /// Integral dataset for write (CDW11 bit 1).
    pub idw: bool,
    /// Deallocate (CDW11 bit 2).
    pub deallocate: bool,
}

impl DatasetManagement {
    /// Bytes of range list the command carries.
    pub fn data_len(&self) -> usize {
        usize::from(self.ranges) * DSM_RANGE_LEN
    }
}

/// A typed I/O command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoCommand {
    /// Read.
    Read(ReadWrite),
    /// Write.
    Write(ReadWrite),
    /// Compare.
    Compare(ReadWrite),
    /// Flush the namespace's volatile write cache.
    Flush {
        /// Command identifier.
        cid: u16,
        /// Namespace (0xFFFFFFFF = all).
        nsid: u32,
    },
    /// Write Zeroes.
    WriteZeroes(WriteZeroes),
    /// Dataset Management.
    DatasetManagement(DatasetManagement),
    /// An opcode this crate does not model (fabrics 0x7F included: parse it with
    /// [`crate::fabrics`]).
    Unsupported {
        /// Command identifier.
        cid: u16,
        /// The opcode.
        opcode: IoOpcode,
    },
}

fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1 << width) - 1)
}

impl IoCommand {
    /// Parses an I/O command from its SQE.
    pub fn parse(sqe: &Sqe) -> Result<IoCommand, ParseError> {
        let b = sqe.as_bytes();
        let cid = sqe.cid();
        let nsid = sqe.nsid();
        let op = IoOpcode(sqe.opcode());
        let cdw12 = le32(b, field::CDW12);
        let cdw13 = le32(b, field::CDW13);
        let slba = le64(b, field::SLBA);
        Ok(match op {
            IoOpcode::READ | IoOpcode::WRITE | IoOpcode::COMPARE => {
                let rw = ReadWrite {
                    cid,
                    nsid,
                    sgl: sqe.sgl1()?,
                    slba,
                    nlb: bits(cdw12, 0, 16) + 1,
                    fua: bits(cdw12, 30, 1) != 0,
                    limited_retry: bits(cdw12, 31, 1) != 0,
                    prinfo: bits(cdw12, 26, 4) as u8,
                    dtype: if op == IoOpcode::WRITE {
                        bits(cdw12, 20, 4) as u8
                    } else {
                        0
                    },
                    dsm: bits(cdw13, 0, 8) as u8,
                    dspec: if op == IoOpcode::WRITE {
                        bits(cdw13, 16, 16) as u16
                    } else {
                        0
                    },
                    reftag: le32(b, field::CDW14),
                    apptag: le32(b, field::CDW15),
                };
                match op {
                    IoOpcode::READ => IoCommand::Read(rw),
                    IoOpcode::WRITE => IoCommand::Write(rw),
                    _ => IoCommand::Compare(rw),
                }
            }
            IoOpcode::FLUSH => IoCommand::Flush { cid, nsid },
            IoOpcode::WRITE_ZEROES => IoCommand::WriteZeroes(WriteZeroes {
                cid,
                nsid,
                slba,
                nlb: bits(cdw12, 0, 16) + 1,
                deallocate: bits(cdw12, 25, 1) != 0,
                fua: bits(cdw12, 30, 1) != 0,
                limited_retry: bits(cdw12, 31, 1) != 0,
                prinfo: bits(cdw12, 26, 4) as u8,
            }),
            IoOpcode::DATASET_MANAGEMENT => {
                let cdw10 = le32(b, field::CDW10);
                if bits(cdw10, 8, 24) != 0 {
                    return Err(ParseError::InvalidField {
                        what: "Dataset Management",
                        field: "cdw10 reserved",
                        offset: field::CDW10.start + 1,
                        value: u64::from(cdw10),
                    });
                }
                let cdw11 = le32(b, field::CDW11);
                IoCommand::DatasetManagement(DatasetManagement {
                    cid,
                    nsid,
                    sgl: sqe.sgl1()?,
                    ranges: bits(cdw10, 0, 8) as u16 + 1,
                    idr: bits(cdw11, 0, 1) != 0,
                    idw: bits(cdw11, 1, 1) != 0,
                    deallocate: bits(cdw11, 2, 1) != 0,
                })
            }
            opcode => IoCommand::Unsupported { cid, opcode },
        })
    }

    /// Builds the SQE. Counts outside their wire range (NLB 1–65536, DSM ranges 1–256) are an
    /// error.
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        match *self {
            IoCommand::Read(rw) => rw.to_sqe(IoOpcode::READ),
            IoCommand::Write(rw) => rw.to_sqe(IoOpcode::WRITE),
            IoCommand::Compare(rw) => rw.to_sqe(IoOpcode::COMPARE),
            IoCommand::Flush { cid, nsid } => {
                let mut s = Sqe::new(IoOpcode::FLUSH.0, cid);
                s.set_nsid(nsid);
                Ok(s)
            }
            IoCommand::WriteZeroes(w) => {
                let mut s = Sqe::new(IoOpcode::WRITE_ZEROES.0, w.cid);
                s.set_nsid(w.nsid);
                let b = s.as_bytes_mut();
                put_le64(b, field::SLBA, w.slba);
                let cdw12 = nlb_field("Write Zeroes", w.nlb)?
                    | u32::from(w.deallocate) << 25
                    | u32::from(w.prinfo & 0xF) << 26
                    | u32::from(w.fua) << 30
                    | u32::from(w.limited_retry) << 31;
                put_le32(b, field::CDW12, cdw12);
                Ok(s)
            }
            IoCommand::DatasetManagement(d) => {
                if d.ranges == 0 || d.ranges > 256 {
                    return Err(ParseError::InvalidField {
                        what: "Dataset Management",
                        field: "nr",
                        offset: field::CDW10.start,
                        value: u64::from(d.ranges),
                    });
                }
                let mut s = Sqe::new(IoOpcode::DATASET_MANAGEMENT.0, d.cid);
                s.set_nsid(d.nsid);
                s.set_sgl1(&d.sgl)?;
                let b = s.as_bytes_mut();
                put_le32(b, field::CDW10, u32::from(d.ranges - 1));
                put_le32(
                    b,
                    field::CDW11,
                    u32::from(d.idr) | u32::from(d.idw) << 1 | u32::from(d.deallocate) << 2,
                );
                Ok(s)
            }
            IoCommand::Unsupported { cid, opcode } => Ok(Sqe::new(opcode.0, cid)),
        }
    }

    /// The command identifier.
    pub fn cid(&self) -> u16 {
        match *self {
            IoCommand::Read(rw) | IoCommand::Write(rw) | IoCommand::Compare(rw) => rw.cid,
            IoCommand::Flush { cid, .. } | IoCommand::Unsupported { cid, .. } => cid,
            IoCommand::WriteZeroes(w) => w.cid,
            IoCommand::DatasetManagement(d) => d.cid,
        }
    }
}

fn nlb_field(what: &'static str, nlb: u32) -> Result<u32, ParseError> {
    if nlb == 0 || nlb > 0x1_0000 {
        return Err(ParseError::InvalidField {
            what,
            field: "nlb",
            offset: field::CDW12.start,
            value: u64::from(nlb),
        });
    }
    Ok(nlb - 1)
}

impl ReadWrite {
    /// Bytes of data the command moves for a given logical block size.
    pub fn data_len(&self, block_size: u32) -> u64 {
        u64::from(self.nlb) * u64::from(block_size)
    }

    fn to_sqe(self, op: IoOpcode) -> Result<Sqe, ParseError> {
        let mut s = Sqe::new(op.0, self.cid);
        s.set_nsid(self.nsid);
        s.set_sgl1(&self.sgl)?;
        let write = op == IoOpcode::WRITE;
        let b = s.as_bytes_mut();
        put_le64(b, field::SLBA, self.slba);
        let mut cdw12 = nlb_field("Read/Write", self.nlb)?
            | u32::from(self.prinfo & 0xF) << 26
            | u32::from(self.fua) << 30
            | u32::from(self.limited_retry) << 31;
        let mut cdw13 = u32::from(self.dsm);
        if write {
            cdw12 |= u32::from(self.dtype & 0xF) << 20;
            cdw13 |= u32::from(self.dspec) << 16;
        }
        put_le32(b, field::CDW12, cdw12);
        put_le32(b, field::CDW13, cdw13);
        put_le32(b, field::CDW14, self.reftag);
        put_le32(b, field::CDW15, self.apptag);
        Ok(s)
    }
}

/// Size of one Dataset Management range.
pub const DSM_RANGE_LEN: usize = 16;

/// One Dataset Management range (NVM Figure 40).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DsmRange {
    /// Context attributes.
    pub attributes: u32,
    /// Length in logical blocks (a count, not 0-based; 0 means an empty range).
    pub nlb: u32,
    /// Starting LBA.
    pub slba: u64,
}

impl DsmRange {
    /// Parses exactly 16 bytes.
    pub fn parse(b: &[u8]) -> Result<DsmRange, ParseError> {
        exact("DSM range", b, DSM_RANGE_LEN)?;
        Ok(DsmRange {
            attributes: le32(b, 0..4),
            nlb: le32(b, 4..8),
            slba: le64(b, 8..16),
        })
    }

    /// Writes exactly 16 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room("DSM range", b, DSM_RANGE_LEN)?;
        put_le32(b, 0..4, self.attributes);
        put_le32(b, 4..8, self.nlb);
        put_le64(b, 8..16, self.slba);
        Ok(())
    }

    /// Parses a range list of exactly `count` ranges (`b` must be `count` × 16 bytes).
    pub fn parse_list(b: &[u8], count: u16) -> Result<Vec<DsmRange>, ParseError> {
        exact("DSM range list", b, usize::from(count) * DSM_RANGE_LEN)?;
        b.chunks_exact(DSM_RANGE_LEN).map(DsmRange::parse).collect()
    }

    /// Encodes a range list.
    pub fn list_to_bytes(ranges: &[DsmRange]) -> Vec<u8> {
        let mut out = vec![0u8; ranges.len() * DSM_RANGE_LEN];
        for (r, b) in ranges.iter().zip(out.chunks_exact_mut(DSM_RANGE_LEN)) {
            // Cannot fail: each chunk is exactly 16 bytes.
            let _ = r.emit(b);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keyed(len: u32) -> SglDescriptor {
        SglDescriptor::Keyed {
            address: 0x1000,
            length: len,
            key: 0x77,
            invalidate: false,
        }
    }

    #[test]
    fn write_layout() {
        let mut raw = [0u8; 64];
        raw[0] = 0x01;
        raw[1] = 0x40;
        raw[2..4].copy_from_slice(&0x22u16.to_le_bytes());
        raw[4..8].copy_from_slice(&1u32.to_le_bytes());
        raw[24..32].copy_from_slice(&0x1000u64.to_le_bytes());
        raw[32..35].copy_from_slice(&[0x00, 0x20, 0x00]); // 8192
        raw[35..39].copy_from_slice(&0x77u32.to_le_bytes());
        raw[39] = 0x40;
        raw[40..48].copy_from_slice(&0x0000_0001_0000_0010u64.to_le_bytes()); // SLBA
        raw[48..52].copy_from_slice(&(1u32 | 1 << 30).to_le_bytes()); // NLB 2, FUA
        raw[52..56].copy_from_slice(&(0x07u32 | 0xABCD << 16).to_le_bytes()); // DSM, DSPEC
        let cmd = IoCommand::parse(&Sqe::parse(&raw).unwrap()).unwrap();
        let IoCommand::Write(w) = cmd else {
            panic!("not a write: {cmd:?}")
        };
        assert_eq!(w.slba, 0x1_0000_0010);
        assert_eq!(w.nlb, 2);
        assert!(w.fua && !w.limited_retry);
        assert_eq!((w.dsm, w.dspec), (7, 0xABCD));
        assert_eq!(w.sgl, keyed(8192));
        assert_eq!(w.data_len(4096), 8192);
        assert_eq!(cmd.to_sqe().unwrap().as_bytes(), &raw);
    }

    #[test]
    fn read_in_capsule_and_compare() {
        let rw = ReadWrite {
            cid: 1,
            nsid: 1,
            sgl: keyed(4096),
            slba: 5,
            nlb: 65536,
            fua: false,
            limited_retry: true,
            prinfo: 0,
            dtype: 0,
            dsm: 0,
            dspec: 0,
            reftag: 0,
            apptag: 0,
        };
        let s = IoCommand::Read(rw).to_sqe().unwrap();
        assert_eq!(s.opcode(), 0x02);
        assert_eq!(s.cdw(12), 0xFFFF | 1 << 31);
        assert_eq!(IoCommand::parse(&s).unwrap(), IoCommand::Read(rw));
        let c = IoCommand::Compare(rw).to_sqe().unwrap();
        assert_eq!(c.opcode(), 0x05);
        let mut too_many = rw;
        too_many.nlb = 65537;
        assert!(IoCommand::Read(too_many).to_sqe().is_err());
    }

    #[test]
    fn flush_write_zeroes_and_unknown() {
        let f = IoCommand::parse(&Sqe::new(0x00, 4)).unwrap();
        assert_eq!(f, IoCommand::Flush { cid: 4, nsid: 0 });
        let mut raw = [0u8; 64];
        raw[0] = 0x08;
        raw[40..48].copy_from_slice(&100u64.to_le_bytes());
        raw[48..52].copy_from_slice(&(7u32 | 1 << 25).to_le_bytes());
        let IoCommand::WriteZeroes(w) = IoCommand::parse(&Sqe::parse(&raw).unwrap()).unwrap()
        else {
            panic!("not write zeroes")
        };
        assert_eq!((w.slba, w.nlb, w.deallocate), (100, 8, true));
        assert_eq!(IoCommand::WriteZeroes(w).to_sqe().unwrap().as_bytes(), &raw);
        assert_eq!(
            IoCommand::parse(&Sqe::new(0x99, 5)).unwrap(),
            IoCommand::Unsupported {
                cid: 5,
                opcode: IoOpcode(0x99)
            }
        );
    }

    #[test]
    fn dsm_layout_and_ranges() {
        let mut raw = [0u8; 64];
        raw[0] = 0x09;
        raw[1] = 0x40;
        raw[4..8].copy_from_slice(&1u32.to_le_bytes());
        raw[32..35].copy_from_slice(&[32, 0, 0]);
        raw[35..39].copy_from_slice(&0x77u32.to_le_bytes());
        raw[24..32].copy_from_slice(&0x1000u64.to_le_bytes());
        raw[39] = 0x40;
        raw[40] = 1; // two ranges
        raw[44] = 0b100; // deallocate
        let IoCommand::DatasetManagement(d) = IoCommand::parse(&Sqe::parse(&raw).unwrap()).unwrap()
        else {
            panic!("not DSM")
        };
        assert_eq!(d.ranges, 2);
        assert!(d.deallocate && !d.idr && !d.idw);
        assert_eq!(d.data_len(), 32);
        assert_eq!(
            IoCommand::DatasetManagement(d).to_sqe().unwrap().as_bytes(),
            &raw
        );
        raw[41] = 1; // reserved bits of CDW10
        assert!(matches!(
            IoCommand::parse(&Sqe::parse(&raw).unwrap()),
            Err(ParseError::InvalidField { offset: 41, .. })
        ));

        let mut list = [0u8; 32];
        list[4..8].copy_from_slice(&8u32.to_le_bytes());
        list[8..16].copy_from_slice(&0x10u64.to_le_bytes());
        list[16..20].copy_from_slice(&0xAAu32.to_le_bytes());
        list[20..24].copy_from_slice(&1u32.to_le_bytes());
        list[24..32].copy_from_slice(&0x99u64.to_le_bytes());
        let ranges = DsmRange::parse_list(&list, 2).unwrap();
        assert_eq!(
            ranges,
            vec![
                DsmRange {
                    attributes: 0,
                    nlb: 8,
                    slba: 0x10
                },
                DsmRange {
                    attributes: 0xAA,
                    nlb: 1,
                    slba: 0x99
                }
            ]
        );
        assert_eq!(DsmRange::list_to_bytes(&ranges), list);
        assert!(DsmRange::parse_list(&list, 3).is_err());
    }

    proptest! {
        #[test]
        fn any_sqe_parses_or_errors_and_round_trips(raw in proptest::collection::vec(any::<u8>(), 64)) {
            let sqe = Sqe::parse(&raw).unwrap();
            if let Ok(cmd) = IoCommand::parse(&sqe) {
                let again = IoCommand::parse(&cmd.to_sqe().unwrap()).unwrap();
                prop_assert_eq!(again, cmd);
            }
        }
    }
}
