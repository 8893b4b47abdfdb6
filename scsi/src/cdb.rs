//! Command descriptor blocks of the SCSI block commands, parsed into typed commands.
//!
//! The set is what Linux `sd` sends to a disk, and what other hosts (ESXi, Windows, libiscsi)
//! add to it: SPC-4's INQUIRY, REQUEST SENSE, TEST UNIT READY, MODE SENSE(6/10), REPORT LUNS,
//! and SBC-3's READ CAPACITY(10/16), READ/WRITE(6/10/12/16), SYNCHRONIZE CACHE(10/16),
//! WRITE SAME(10/16), UNMAP and START STOP UNIT.
//!
//! [`Command::parse`] is total: any bytes give a command or the [`Sense`] that answers them,
//! with the field pointer at the offending byte (SPC-4 §4.5.2.4.2). It checks what a CDB can
//! get wrong on its own (reserved encodings, features this target does not offer, a CDB
//! shorter than its opcode's group); ranges against the logical unit are
//! [`crate::sbc`]'s.

use crate::bytes::{be16, be32, be64};
use crate::sense::Sense;

/// Operation codes (SPC-4 Annex D, SBC-3 §5).
pub mod opcode {
    /// TEST UNIT READY.
    pub const TEST_UNIT_READY: u8 = 0x00;
    /// REQUEST SENSE.
    pub const REQUEST_SENSE: u8 = 0x03;
    /// READ(6).
    pub const READ_6: u8 = 0x08;
    /// WRITE(6).
    pub const WRITE_6: u8 = 0x0a;
    /// INQUIRY.
    pub const INQUIRY: u8 = 0x12;
    /// MODE SENSE(6).
    pub const MODE_SENSE_6: u8 = 0x1a;
    /// START STOP UNIT.
    pub const START_STOP_UNIT: u8 = 0x1b;
    /// READ CAPACITY(10).
    pub const READ_CAPACITY_10: u8 = 0x25;
    /// READ(10).
    pub const READ_10: u8 = 0x28;
    /// WRITE(10).
    pub const WRITE_10: u8 = 0x2a;
    /// SYNCHRONIZE CACHE(10).
    pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
    /// WRITE SAME(10).
    pub const WRITE_SAME_10: u8 = 0x41;
    /// UNMAP.
    pub const UNMAP: u8 = 0x42;
    /// MODE SENSE(10).
    pub const MODE_SENSE_10: u8 = 0x5a;
    /// READ(16).
    pub const READ_16: u8 = 0x88;
    /// WRITE(16).
    pub const WRITE_16: u8 = 0x8a;
    /// SYNCHRONIZE CACHE(16).
    pub const SYNCHRONIZE_CACHE_16: u8 = 0x91;
    /// WRITE SAME(16).
    pub const WRITE_SAME_16: u8 = 0x93;
    /// SERVICE ACTION IN(16): READ CAPACITY(16) is its service action 0x10.
    pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
    /// REPORT LUNS.
    pub const REPORT_LUNS: u8 = 0xa0;
    /// READ(12).
    pub const READ_12: u8 = 0xa8;
    /// WRITE(12).
    pub const WRITE_12: u8 = 0xaa;
}

/// SERVICE ACTION IN(16)'s READ CAPACITY(16) service action.
pub const SA_READ_CAPACITY_16: u8 = 0x10;

/// The length of a CDB by its opcode's group code (SPC-4 §4.2.5.1), `None` for the variable
/// length group (0x7f) and the vendor-specific groups.
pub fn cdb_len(opcode: u8) -> Option<usize> {
    match opcode >> 5 {
        0 => Some(6),
        1 | 2 => Some(10),
        4 => Some(16),
        5 => Some(12),
        _ => None,
    }
}

/// Which page MODE SENSE returns values of (SPC-4 §6.11.1, PC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageControl {
    /// The values in effect.
    Current,
    /// Which bits MODE SELECT may change.
    Changeable,
    /// The power-on defaults.
    Default,
    /// The saved values (this target saves none).
    Saved,
}

/// A parsed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// TEST UNIT READY.
    TestUnitReady,
    /// REQUEST SENSE.
    RequestSense {
        /// Descriptor-format sense asked for (DESC).
        desc: bool,
        /// Allocation length.
        alloc: u8,
    },
    /// INQUIRY: standard data, or a vital product data page.
    Inquiry {
        /// A VPD page is asked for (EVPD).
        evpd: bool,
        /// The VPD page code (0 when `evpd` is clear).
        page: u8,
        /// Allocation length.
        alloc: u16,
    },
    /// MODE SENSE(6) or (10).
    ModeSense {
        /// MODE SENSE(10) rather than (6).
        ten: bool,
        /// No block descriptors wanted (DBD).
        dbd: bool,
        /// Long LBA block descriptors accepted (LLBAA, (10) only).
        llbaa: bool,
        /// Page control.
        pc: PageControl,
        /// Page code (0x3f: all pages).
        page: u8,
        /// Subpage code.
        subpage: u8,
        /// Allocation length.
        alloc: u16,
    },
    /// START STOP UNIT: answered without action (the array has no spindle to stop).
    StartStopUnit {
        /// Answer before the operation completes (IMMED).
        immed: bool,
        /// Start (START = 1) rather than stop.
        start: bool,
    },
    /// READ CAPACITY(10).
    ReadCapacity10,
    /// READ CAPACITY(16).
    ReadCapacity16 {
        /// Allocation length.
        alloc: u32,
    },
    /// READ(6/10/12/16).
    Read {
        /// First logical block.
        lba: u64,
        /// Number of blocks (0: none, not an error).
        blocks: u32,
        /// Force unit access.
        fua: bool,
    },
    /// WRITE(6/10/12/16).
    Write {
        /// First logical block.
        lba: u64,
        /// Number of blocks (0: none, not an error).
        blocks: u32,
        /// Force unit access: durable before the status.
        fua: bool,
    },
    /// SYNCHRONIZE CACHE(10/16).
    SynchronizeCache {
        /// First logical block.
        lba: u64,
        /// Number of blocks (0: to the end of the medium).
        blocks: u32,
        /// Answer before the flush completes (IMMED).
        immed: bool,
    },
    /// WRITE SAME(10/16): one block of data-out written over the range, or the range unmapped.
    WriteSame {
        /// First logical block.
        lba: u64,
        /// Number of blocks (0 is rejected: the block limits page sets WSNZ).
        blocks: u32,
        /// Unmap the range where the pattern allows (UNMAP).
        unmap: bool,
        /// No data-out buffer: the pattern is zeroes (NDOB, WRITE SAME(16) only).
        ndob: bool,
    },
    /// UNMAP: the block descriptors come in the data-out buffer.
    Unmap {
        /// Parameter list length (the data-out buffer's size).
        param_len: u16,
    },
    /// REPORT LUNS.
    ReportLuns {
        /// SELECT REPORT.
        select: u8,
        /// Allocation length.
        alloc: u32,
    },
}

impl Command {
    /// Parses the CDB at the start of `cdb`. Bytes after the opcode's length are ignored: the
    /// iSCSI SCSI Command PDU carries every CDB in a 16-byte field.
    pub fn parse(cdb: &[u8]) -> Result<Command, Sense> {
        use opcode::*;
        let Some(&op) = cdb.first() else {
            return Err(Sense::invalid_opcode());
        };
        let len = cdb_len(op).ok_or(Sense::invalid_opcode())?;
        // A CDB shorter than its group: the host sent less than the opcode promises.
        let c = cdb.get(..len).ok_or(Sense::invalid_cdb_field(0, None))?;
        let control = c[len - 1];
        // NACA is not supported (SPC-4 §4.3): a CDB that sets it is rejected; so is the
        // obsolete LINK bit. The pointer names the bit that is set (NACA first).
        if control & 0x05 != 0 {
            let bit = if control & 0x04 != 0 { 2 } else { 0 };
            return Err(Sense::invalid_cdb_field(len as u16 - 1, Some(bit)));
        }
        let cmd = match op {
            TEST_UNIT_READY => Command::TestUnitReady,
            REQUEST_SENSE => Command::RequestSense {
                desc: c[1] & 0x01 != 0,
                alloc: c[4],
            },
            INQUIRY => {
                let evpd = c[1] & 0x01 != 0;
                if c[1] & 0x02 != 0 {
                    // CMDDT is obsolete; SPC-4 answers it as an invalid field.
                    return Err(Sense::invalid_cdb_field(1, Some(1)));
                }
                if !evpd && c[2] != 0 {
                    return Err(Sense::invalid_cdb_field(2, None));
                }
                Command::Inquiry {
                    evpd,
                    page: c[2],
                    alloc: be16(c, 3),
                }
            }
            MODE_SENSE_6 | MODE_SENSE_10 => {
                let ten = op == MODE_SENSE_10;
                let pc = match c[2] >> 6 {
                    0 => PageControl::Current,
                    1 => PageControl::Changeable,
                    2 => PageControl::Default,
                    _ => PageControl::Saved,
                };
                Command::ModeSense {
                    ten,
                    dbd: c[1] & 0x08 != 0,
                    llbaa: ten && c[1] & 0x10 != 0,
                    pc,
                    page: c[2] & 0x3f,
                    subpage: c[3],
                    alloc: if ten { be16(c, 7) } else { u16::from(c[4]) },
                }
            }
            START_STOP_UNIT => {
                // LOEJ (eject) and a power condition have no meaning for an array; plain
                // start and stop are answered as done.
                if c[4] & 0x02 != 0 {
                    return Err(Sense::invalid_cdb_field(4, Some(1)));
                }
                if c[4] >> 4 != 0 {
                    return Err(Sense::invalid_cdb_field(4, Some(7)));
                }
                Command::StartStopUnit {
                    immed: c[1] & 0x01 != 0,
                    start: c[4] & 0x01 != 0,
                }
            }
            READ_CAPACITY_10 => {
                // Without PMI the LBA field must be zero (SBC-3 §5.16); PMI itself is
                // obsolete and answered as if clear.
                if c[8] & 0x01 == 0 && be32(c, 2) != 0 {
                    return Err(Sense::invalid_cdb_field(2, None));
                }
                Command::ReadCapacity10
            }
            SERVICE_ACTION_IN_16 => match c[1] & 0x1f {
                SA_READ_CAPACITY_16 => Command::ReadCapacity16 { alloc: be32(c, 10) },
                _ => return Err(Sense::invalid_cdb_field(1, Some(4))),
            },
            READ_6 | WRITE_6 => {
                let lba = u64::from(c[1] & 0x1f) << 16 | u64::from(be16(c, 2));
                // A transfer length of 0 means 256 blocks in the 6-byte CDBs (SBC-3 §5.7).
                let blocks = if c[4] == 0 { 256 } else { u32::from(c[4]) };
                if op == READ_6 {
                    Command::Read {
                        lba,
                        blocks,
                        fua: false,
                    }
                } else {
                    Command::Write {
                        lba,
                        blocks,
                        fua: false,
                    }
                }
            }
            READ_10 | WRITE_10 | READ_12 | WRITE_12 | READ_16 | WRITE_16 => {
                // RDPROTECT/WRPROTECT: the logical unit has no protection information.
                if c[1] >> 5 != 0 {
                    return Err(Sense::invalid_cdb_field(1, Some(7)));
                }
                let fua = c[1] & 0x08 != 0;
                let (lba, blocks) = match op {
                    READ_10 | WRITE_10 => (u64::from(be32(c, 2)), u32::from(be16(c, 7))),
                    READ_12 | WRITE_12 => (u64::from(be32(c, 2)), be32(c, 6)),
                    _ => (be64(c, 2), be32(c, 10)),
                };
                if matches!(op, READ_10 | READ_12 | READ_16) {
                    Command::Read { lba, blocks, fua }
                } else {
                    Command::Write { lba, blocks, fua }
                }
            }
            SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16 => {
                let (lba, blocks) = if op == SYNCHRONIZE_CACHE_10 {
                    (u64::from(be32(c, 2)), u32::from(be16(c, 7)))
                } else {
                    (be64(c, 2), be32(c, 10))
                };
                Command::SynchronizeCache {
                    lba,
                    blocks,
                    immed: c[1] & 0x02 != 0,
                }
            }
            WRITE_SAME_10 | WRITE_SAME_16 => {
                if c[1] >> 5 != 0 {
                    return Err(Sense::invalid_cdb_field(1, Some(7)));
                }
                // ANCHOR: anchored blocks are not offered (the provisioning page's ANC_SUP).
                if c[1] & 0x10 != 0 {
                    return Err(Sense::invalid_cdb_field(1, Some(4)));
                }
                // PBDATA / LBDATA would stamp each block with its address: not offered, and
                // never silently ignored (LIO's `sbc_setup_write_same` refuses them too).
                if c[1] & 0x06 != 0 {
                    return Err(Sense::invalid_cdb_field(1, Some(2)));
                }
                let ten = op == WRITE_SAME_10;
                let ndob = !ten && c[1] & 0x01 != 0;
                let (lba, blocks) = if ten {
                    (u64::from(be32(c, 2)), u32::from(be16(c, 7)))
                } else {
                    (be64(c, 2), be32(c, 10))
                };
                if blocks == 0 {
                    // WSNZ is set in the block limits page: 0 ("to the end") is refused.
                    return Err(Sense::invalid_cdb_field(if ten { 7 } else { 10 }, None));
                }
                Command::WriteSame {
                    lba,
                    blocks,
                    unmap: c[1] & 0x08 != 0,
                    ndob,
                }
            }
            UNMAP => {
                if c[1] & 0x01 != 0 {
                    return Err(Sense::invalid_cdb_field(1, Some(0)));
                }
                Command::Unmap {
                    param_len: be16(c, 7),
                }
            }
            REPORT_LUNS => {
                // SPC-4 §6.33: an allocation length under 16 may be refused or the list cut;
                // it is cut, as LIO's `spc_emulate_report_luns` does.
                let alloc = be32(c, 6);
                // 0: every LUN but the well-known ones; 1: well-known only; 2: all.
                if c[2] > 2 {
                    return Err(Sense::invalid_cdb_field(2, None));
                }
                Command::ReportLuns {
                    select: c[2],
                    alloc,
                }
            }
            _ => return Err(Sense::invalid_opcode()),
        };
        Ok(cmd)
    }

    /// Whether the command reads or writes the medium (and so needs the logical unit ready).
    pub fn accesses_medium(&self) -> bool {
        matches!(
            self,
            Command::Read { .. }
                | Command::Write { .. }
                | Command::SynchronizeCache { .. }
                | Command::WriteSame { .. }
                | Command::Unmap { .. }
        )
    }

    /// Bytes the host sends with the command (data-out), for blocks of `block_size`.
    pub fn data_out_len(&self, block_size: u32) -> u64 {
        match *self {
            Command::Write { blocks, .. } => u64::from(blocks) * u64::from(block_size),
            Command::WriteSame { ndob: false, .. } => u64::from(block_size),
            Command::Unmap { param_len } => u64::from(param_len),
            _ => 0,
        }
    }

    /// Bytes at most the target returns (data-in): the transfer for a READ, the allocation
    /// length for the others.
    pub fn data_in_len(&self, block_size: u32) -> u64 {
        match *self {
            Command::Read { blocks, .. } => u64::from(blocks) * u64::from(block_size),
            Command::RequestSense { alloc, .. } => u64::from(alloc),
            Command::Inquiry { alloc, .. } | Command::ModeSense { alloc, .. } => u64::from(alloc),
            Command::ReadCapacity10 => 8,
            Command::ReadCapacity16 { alloc } | Command::ReportLuns { alloc, .. } => {
                u64::from(alloc)
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::opcode::*;
    use super::*;
    use crate::sense::{Asc, FieldPointer, SenseKey};
    use proptest::prelude::*;

    fn cdb16(bytes: &[u8]) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..bytes.len()].copy_from_slice(bytes);
        c
    }

    #[test]
    fn read_and_write_in_every_size() {
        let r10 = [READ_10, 0x08, 0, 0, 0x12, 0x34, 0, 0x00, 0x08, 0];
        assert_eq!(
            Command::parse(&cdb16(&r10)),
            Ok(Command::Read {
                lba: 0x1234,
                blocks: 8,
                fua: true
            })
        );
        let w16 = [
            WRITE_16, 0, 0, 0, 0, 0x01, 0, 0, 0, 0x10, 0, 0, 0x01, 0x00, 0, 0,
        ];
        assert_eq!(
            Command::parse(&w16),
            Ok(Command::Write {
                lba: 0x01_0000_0010,
                blocks: 256,
                fua: false
            })
        );
        let r12 = [READ_12, 0, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0];
        assert_eq!(
            Command::parse(&r12),
            Ok(Command::Read {
                lba: 7,
                blocks: 3,
                fua: false
            })
        );
        // READ(6): 21-bit LBA, length 0 means 256.
        let r6 = [READ_6, 0x1f, 0xff, 0xff, 0, 0];
        assert_eq!(
            Command::parse(&r6),
            Ok(Command::Read {
                lba: 0x1f_ffff,
                blocks: 256,
                fua: false
            })
        );
        // Zero blocks in a 10-byte CDB is a transfer of nothing, not an error.
        let w10 = [WRITE_10, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            Command::parse(&w10),
            Ok(Command::Write {
                lba: 1,
                blocks: 0,
                fua: false
            })
        );
    }

    #[test]
    fn protection_information_is_refused_with_a_bit_pointer() {
        let r = Command::parse(&[READ_10, 0x20, 0, 0, 0, 0, 0, 0, 1, 0]).unwrap_err();
        assert_eq!(r.key, SenseKey::ILLEGAL_REQUEST);
        assert_eq!(r.asc, Asc::INVALID_FIELD_IN_CDB);
        assert_eq!(
            r.field,
            Some(FieldPointer {
                in_cdb: true,
                byte: 1,
                bit: Some(7)
            })
        );
    }

    #[test]
    fn unknown_opcodes_and_short_cdbs() {
        // PERSISTENT RESERVE IN is not offered.
        let e = Command::parse(&cdb16(&[0x5e])).unwrap_err();
        assert_eq!(e.asc, Asc::INVALID_COMMAND_OPERATION_CODE);
        assert_eq!(e.field.map(|f| f.byte), Some(0));
        // Variable-length and vendor groups.
        assert_eq!(
            Command::parse(&cdb16(&[0x7f])),
            Err(Sense::invalid_opcode())
        );
        assert_eq!(
            Command::parse(&cdb16(&[0xc0])),
            Err(Sense::invalid_opcode())
        );
        assert_eq!(Command::parse(&[]), Err(Sense::invalid_opcode()));
        // A READ(16) cut to 10 bytes.
        assert_eq!(
            Command::parse(&[READ_16, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Sense::invalid_cdb_field(0, None))
        );
    }

    #[test]
    fn naca_in_the_control_byte_is_refused() {
        let e = Command::parse(&[TEST_UNIT_READY, 0, 0, 0, 0, 0x04]).unwrap_err();
        assert_eq!(e, Sense::invalid_cdb_field(5, Some(2)));
        let e = Command::parse(&cdb16(&[
            READ_16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x04,
        ]))
        .unwrap_err();
        assert_eq!(e, Sense::invalid_cdb_field(15, Some(2)));
    }

    #[test]
    fn inquiry_fields() {
        assert_eq!(
            Command::parse(&[INQUIRY, 0x01, 0x83, 0x01, 0x00, 0]),
            Ok(Command::Inquiry {
                evpd: true,
                page: 0x83,
                alloc: 256
            })
        );
        // A page code without EVPD is an invalid field (SPC-4 §6.6.1).
        assert_eq!(
            Command::parse(&[INQUIRY, 0, 0x80, 0, 36, 0]),
            Err(Sense::invalid_cdb_field(2, None))
        );
        assert_eq!(
            Command::parse(&[INQUIRY, 0x02, 0, 0, 36, 0]),
            Err(Sense::invalid_cdb_field(1, Some(1)))
        );
    }

    #[test]
    fn mode_sense_six_and_ten() {
        assert_eq!(
            Command::parse(&[MODE_SENSE_6, 0x08, 0x08, 0, 0xc0, 0]),
            Ok(Command::ModeSense {
                ten: false,
                dbd: true,
                llbaa: false,
                pc: PageControl::Current,
                page: 0x08,
                subpage: 0,
                alloc: 0xc0
            })
        );
        assert_eq!(
            Command::parse(&[MODE_SENSE_10, 0x10, 0xff, 0xff, 0, 0, 0, 0x02, 0x00, 0]),
            Ok(Command::ModeSense {
                ten: true,
                dbd: false,
                llbaa: true,
                pc: PageControl::Saved,
                page: 0x3f,
                subpage: 0xff,
                alloc: 512
            })
        );
    }

    #[test]
    fn capacity_sync_same_unmap_report_luns() {
        let mut rc16 = cdb16(&[SERVICE_ACTION_IN_16, SA_READ_CAPACITY_16]);
        rc16[13] = 32;
        assert_eq!(
            Command::parse(&rc16),
            Ok(Command::ReadCapacity16 { alloc: 32 })
        );
        let other_sa = cdb16(&[SERVICE_ACTION_IN_16, 0x12]);
        assert_eq!(
            Command::parse(&other_sa),
            Err(Sense::invalid_cdb_field(1, Some(4)))
        );
        assert_eq!(
            Command::parse(&[READ_CAPACITY_10, 0, 0, 0, 0, 1, 0, 0, 0, 0]),
            Err(Sense::invalid_cdb_field(2, None))
        );
        assert_eq!(
            Command::parse(&[SYNCHRONIZE_CACHE_10, 0x02, 0, 0, 0, 0, 0, 0, 0, 0]),
            Ok(Command::SynchronizeCache {
                lba: 0,
                blocks: 0,
                immed: true
            })
        );
        let mut ws = cdb16(&[WRITE_SAME_16, 0x08 | 0x01]);
        ws[13] = 64;
        assert_eq!(
            Command::parse(&ws),
            Ok(Command::WriteSame {
                lba: 0,
                blocks: 64,
                unmap: true,
                ndob: true
            })
        );
        ws[13] = 0;
        assert_eq!(Command::parse(&ws), Err(Sense::invalid_cdb_field(10, None)));
        assert_eq!(
            Command::parse(&[UNMAP, 0, 0, 0, 0, 0, 0, 0, 24, 0]),
            Ok(Command::Unmap { param_len: 24 })
        );
        // A short allocation length cuts the list (LIO), it is not refused.
        assert_eq!(
            Command::parse(&[REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0]),
            Ok(Command::ReportLuns {
                select: 0,
                alloc: 8
            })
        );
        assert_eq!(
            Command::parse(&[REPORT_LUNS, 0, 3, 0, 0, 0, 0, 0, 0, 16, 0, 0]),
            Err(Sense::invalid_cdb_field(2, None))
        );
        // WRITE SAME with LBDATA: not offered, refused rather than ignored.
        let mut lb = [0u8; 16];
        lb[0] = WRITE_SAME_16;
        lb[1] = 0x02;
        lb[13] = 1;
        assert_eq!(
            Command::parse(&lb),
            Err(Sense::invalid_cdb_field(1, Some(2)))
        );
        // The LINK bit alone is pointed at as bit 0.
        assert_eq!(
            Command::parse(&[TEST_UNIT_READY, 0, 0, 0, 0, 0x01]),
            Err(Sense::invalid_cdb_field(5, Some(0)))
        );
        assert_eq!(
            Command::parse(&[REPORT_LUNS, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
            Ok(Command::ReportLuns {
                select: 2,
                alloc: 256
            })
        );
    }

    #[test]
    fn lengths_for_the_transport() {
        let w = Command::Write {
            lba: 0,
            blocks: 8,
            fua: false,
        };
        assert_eq!((w.data_out_len(512), w.data_in_len(512)), (4096, 0));
        let ws = Command::WriteSame {
            lba: 0,
            blocks: 8,
            unmap: false,
            ndob: false,
        };
        assert_eq!(ws.data_out_len(4096), 4096);
        assert!(ws.accesses_medium());
        assert!(!Command::ReadCapacity10.accesses_medium());
    }

    proptest! {
        /// Total: any 16 bytes give a command or a sense, and a sense always names the CDB.
        #[test]
        fn parse_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
            match Command::parse(&bytes) {
                Ok(_) => {}
                Err(s) => {
                    prop_assert_eq!(s.key, SenseKey::ILLEGAL_REQUEST);
                    prop_assert!(s.field.is_some_and(|f| f.in_cdb));
                }
            }
        }
    }
}
