//! SCSI status and fixed-format sense data (SPC-4 §4.5.3), with the sense keys and additional
//! sense codes the target answers with.
//!
//! Only the fixed format is emitted: every host in the field reads it, and it fits the 128
//! data bytes that open-iscsi's iSER receive buffers hold in full-feature phase (18 bytes of
//! sense plus the 2-byte SenseLength of the SCSI Response's data segment).

use crate::bytes::{be16, be32, put_be16, put_be32};

/// A SCSI status byte (SAM-5 §5.3). The default is GOOD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Status(pub u8);

impl Status {
    /// The command completed.
    pub const GOOD: Status = Status(0x00);
    /// Sense data describes why the command failed.
    pub const CHECK_CONDITION: Status = Status(0x02);
    /// The logical unit is busy; the host retries.
    pub const BUSY: Status = Status(0x08);
    /// A reservation conflict.
    pub const RESERVATION_CONFLICT: Status = Status(0x18);
    /// The task set is full; the host retries with fewer commands in flight.
    pub const TASK_SET_FULL: Status = Status(0x28);
}

/// A sense key (SPC-4 Table 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SenseKey(pub u8);

impl SenseKey {
    /// No error to report.
    pub const NO_SENSE: SenseKey = SenseKey(0x0);
    /// The command succeeded after recovery.
    pub const RECOVERED_ERROR: SenseKey = SenseKey(0x1);
    /// The logical unit cannot be accessed now.
    pub const NOT_READY: SenseKey = SenseKey(0x2);
    /// The medium failed the command (an unrecovered read or write).
    pub const MEDIUM_ERROR: SenseKey = SenseKey(0x3);
    /// The target failed the command for a reason other than the medium.
    pub const HARDWARE_ERROR: SenseKey = SenseKey(0x4);
    /// The command or its parameters are invalid.
    pub const ILLEGAL_REQUEST: SenseKey = SenseKey(0x5);
    /// Something changed that the host must know about (reset, capacity, LUN inventory).
    pub const UNIT_ATTENTION: SenseKey = SenseKey(0x6);
    /// The logical unit is write protected.
    pub const DATA_PROTECT: SenseKey = SenseKey(0x7);
    /// The target aborted the command; the host may retry.
    pub const ABORTED_COMMAND: SenseKey = SenseKey(0xb);
    /// A verify or compare found different data.
    pub const MISCOMPARE: SenseKey = SenseKey(0xe);
}

/// An additional sense code and qualifier, `ASC << 8 | ASCQ` (SPC-4 Table 49).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Asc(pub u16);

impl Asc {
    /// No additional sense information.
    pub const NO_ADDITIONAL_SENSE: Asc = Asc(0x0000);
    /// Logical unit not ready, cause not reportable.
    pub const NOT_READY_CAUSE_NOT_REPORTABLE: Asc = Asc(0x0400);
    /// Logical unit is in process of becoming ready (Linux retries it, with a delay).
    pub const NOT_READY_BECOMING_READY: Asc = Asc(0x0401);
    /// Logical unit not ready, manual intervention required (an operator disabled the
    /// namespace behind it). Linux fails commands at once and stops its spin-up polling.
    pub const NOT_READY_MANUAL_INTERVENTION: Asc = Asc(0x0403);
    /// Write error.
    pub const WRITE_ERROR: Asc = Asc(0x0c00);
    /// Invalid field in command information unit (an iSCSI header that contradicts its CDB:
    /// an expected transfer length or data direction the command does not have).
    pub const INVALID_FIELD_IN_COMMAND_IU: Asc = Asc(0x0e03);
    /// Unrecovered read error.
    pub const UNRECOVERED_READ_ERROR: Asc = Asc(0x1100);
    /// Parameter list length error.
    pub const PARAMETER_LIST_LENGTH_ERROR: Asc = Asc(0x1a00);
    /// Invalid command operation code.
    pub const INVALID_COMMAND_OPERATION_CODE: Asc = Asc(0x2000);
    /// Logical block address out of range.
    pub const LBA_OUT_OF_RANGE: Asc = Asc(0x2100);
    /// Invalid field in CDB.
    pub const INVALID_FIELD_IN_CDB: Asc = Asc(0x2400);
    /// Logical unit not supported.
    pub const LOGICAL_UNIT_NOT_SUPPORTED: Asc = Asc(0x2500);
    /// Invalid field in parameter list.
    pub const INVALID_FIELD_IN_PARAMETER_LIST: Asc = Asc(0x2600);
    /// Write protected.
    pub const WRITE_PROTECTED: Asc = Asc(0x2700);
    /// Not ready to ready change, medium may have changed: the unit became ready again (a
    /// namespace enabled after it was disabled).
    pub const NOT_READY_TO_READY_CHANGE: Asc = Asc(0x2800);
    /// Power on, reset, or bus device reset occurred.
    pub const POWER_ON_RESET: Asc = Asc(0x2900);
    /// Capacity data has changed.
    pub const CAPACITY_DATA_CHANGED: Asc = Asc(0x2a09);
    /// Saving parameters not supported.
    pub const SAVING_PARAMETERS_NOT_SUPPORTED: Asc = Asc(0x3900);
    /// Reported LUNs data has changed.
    pub const REPORTED_LUNS_DATA_CHANGED: Asc = Asc(0x3f0e);
    /// Internal target failure.
    pub const INTERNAL_TARGET_FAILURE: Asc = Asc(0x4400);

    /// The additional sense code (the high byte).
    pub fn asc(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// The additional sense code qualifier (the low byte).
    pub fn ascq(self) -> u8 {
        self.0 as u8
    }
}

/// Where in the CDB or the parameter list an ILLEGAL REQUEST's invalid field lies: the
/// sense-key specific field pointer (SPC-4 §4.5.2.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldPointer {
    /// The field is in the CDB (C/D = 1), else in the parameter list (data-out).
    pub in_cdb: bool,
    /// Byte offset of the field.
    pub byte: u16,
    /// The field's most significant bit within that byte, when it does not start at bit 7.
    pub bit: Option<u8>,
}

/// Length of fixed-format sense data as emitted here (additional sense length 10).
pub const SENSE_LEN: usize = 18;

/// Fixed-format sense data for one failed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sense {
    /// The sense key.
    pub key: SenseKey,
    /// The additional sense code and qualifier.
    pub asc: Asc,
    /// The INFORMATION field (for a medium error, the first failed LBA), when valid. Fixed
    /// format holds 32 bits; a larger LBA is reported without it (SPC-4 §4.5.3).
    pub information: Option<u32>,
    /// For ILLEGAL REQUEST: the invalid field.
    pub field: Option<FieldPointer>,
}

impl Sense {
    /// Sense with a key and an additional sense code, nothing else.
    pub const fn new(key: SenseKey, asc: Asc) -> Sense {
        Sense {
            key,
            asc,
            information: None,
            field: None,
        }
    }

    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE, pointing at byte 0 of the CDB.
    pub const fn invalid_opcode() -> Sense {
        Sense::invalid_cdb_field(0, None).with_asc(Asc::INVALID_COMMAND_OPERATION_CODE)
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB at `byte` (and `bit`, the field's top bit when it
    /// does not start at bit 7).
    pub const fn invalid_cdb_field(byte: u16, bit: Option<u8>) -> Sense {
        Sense {
            key: SenseKey::ILLEGAL_REQUEST,
            asc: Asc::INVALID_FIELD_IN_CDB,
            information: None,
            field: Some(FieldPointer {
                in_cdb: true,
                byte,
                bit,
            }),
        }
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST at `byte` of the data-out buffer.
    pub const fn invalid_parameter_field(byte: u16) -> Sense {
        Sense {
            key: SenseKey::ILLEGAL_REQUEST,
            asc: Asc::INVALID_FIELD_IN_PARAMETER_LIST,
            information: None,
            field: Some(FieldPointer {
                in_cdb: false,
                byte,
                bit: None,
            }),
        }
    }

    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE.
    pub const fn lba_out_of_range() -> Sense {
        Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::LBA_OUT_OF_RANGE)
    }

    /// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (a command to a LUN the target does not
    /// have; INQUIRY and REPORT LUNS are answered instead, SPC-4 §6.6.2 and §6.33).
    pub const fn lun_not_supported() -> Sense {
        Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    }

    /// NOT READY, LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED: the namespace behind
    /// the LUN is disabled. Linux fails such commands at once, and `sd_spinup_disk` stops at
    /// it (with 04/12 "offline" it would send START STOP UNIT and poll TEST UNIT READY for
    /// 100 s on every revalidation).
    pub const fn not_ready_disabled() -> Sense {
        Sense::new(SenseKey::NOT_READY, Asc::NOT_READY_MANUAL_INTERVENTION)
    }

    /// MEDIUM ERROR, UNRECOVERED READ ERROR, with the first failed LBA where it fits 32 bits.
    pub fn read_error(lba: u64) -> Sense {
        Sense {
            information: u32::try_from(lba).ok(),
            ..Sense::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR)
        }
    }

    /// MEDIUM ERROR, WRITE ERROR, with the first failed LBA where it fits 32 bits.
    pub fn write_error(lba: u64) -> Sense {
        Sense {
            information: u32::try_from(lba).ok(),
            ..Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR)
        }
    }

    /// ABORTED COMMAND, INTERNAL TARGET FAILURE: the storage failed for a reason that is not
    /// the medium's and may not recur (resources, an internal error). Linux retries an aborted
    /// command (`scsi_check_sense`), as the NVMe host retries Internal Error without DNR; a
    /// HARDWARE ERROR would reach the filesystem at once.
    pub const fn internal_failure() -> Sense {
        Sense::new(SenseKey::ABORTED_COMMAND, Asc::INTERNAL_TARGET_FAILURE)
    }

    /// The same sense with another additional sense code.
    pub const fn with_asc(mut self, asc: Asc) -> Sense {
        self.asc = asc;
        self
    }

    /// The 18 bytes of fixed-format sense data (response code 0x70, current error).
    pub fn to_bytes(&self) -> [u8; SENSE_LEN] {
        let mut b = [0u8; SENSE_LEN];
        b[0] = 0x70;
        if let Some(info) = self.information {
            b[0] |= 0x80;
            put_be32(&mut b, 3, info);
        }
        b[2] = self.key.0 & 0x0f;
        b[7] = (SENSE_LEN - 8) as u8;
        b[12] = self.asc.asc();
        b[13] = self.asc.ascq();
        if let Some(f) = self.field {
            b[15] = 0x80 | if f.in_cdb { 0x40 } else { 0 };
            if let Some(bit) = f.bit {
                b[15] |= 0x08 | (bit & 0x07);
            }
            put_be16(&mut b, 16, f.byte);
        }
        b
    }

    /// Reads fixed-format sense data (response code 0x70 or 0x71, at least 14 bytes). `None`
    /// for descriptor format or a short buffer. For hosts and tests; the target only emits.
    pub fn parse(b: &[u8]) -> Option<Sense> {
        if b.len() < 14 || !matches!(b[0] & 0x7f, 0x70 | 0x71) {
            return None;
        }
        let information = (b[0] & 0x80 != 0).then(|| be32(b, 3));
        let field = match b.get(15..18) {
            Some(sks) if sks[0] & 0x80 != 0 && b[2] & 0x0f == SenseKey::ILLEGAL_REQUEST.0 => {
                Some(FieldPointer {
                    in_cdb: sks[0] & 0x40 != 0,
                    byte: be16(sks, 1),
                    bit: (sks[0] & 0x08 != 0).then_some(sks[0] & 0x07),
                })
            }
            _ => None,
        };
        Some(Sense {
            key: SenseKey(b[2] & 0x0f),
            asc: Asc(u16::from(b[12]) << 8 | u16::from(b[13])),
            information,
            field,
        })
    }
}

impl core::fmt::Display for Sense {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "sense key {:#x}, ASC/ASCQ {:02x}/{:02x}",
            self.key.0,
            self.asc.asc(),
            self.asc.ascq()
        )?;
        if let Some(p) = self.field {
            let place = if p.in_cdb { "CDB" } else { "parameter list" };
            write!(f, ", {place} byte {}", p.byte)?;
            if let Some(bit) = p.bit {
                write!(f, " bit {bit}")?;
            }
        }
        if let Some(info) = self.information {
            write!(f, ", information {info:#x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_field_in_cdb_is_byte_exact() {
        // INVALID FIELD IN CDB at byte 1, bit 5 (e.g. a READ(10)'s RDPROTECT).
        let s = Sense::invalid_cdb_field(1, Some(5));
        assert_eq!(
            s.to_bytes(),
            [
                0x70,
                0,
                0x05,
                0,
                0,
                0,
                0,
                10,
                0,
                0,
                0,
                0,
                0x24,
                0x00,
                0, //
                0x80 | 0x40 | 0x08 | 5,
                0,
                1
            ]
        );
        assert_eq!(Sense::parse(&s.to_bytes()), Some(s));
    }

    #[test]
    fn medium_error_carries_the_lba_when_it_fits() {
        let s = Sense::read_error(0x1234_5678);
        let b = s.to_bytes();
        assert_eq!(b[0], 0xf0);
        assert_eq!(&b[3..7], &[0x12, 0x34, 0x56, 0x78]);
        assert_eq!((b[2], b[12], b[13]), (0x03, 0x11, 0x00));
        assert_eq!(Sense::parse(&b), Some(s));
        // Past 32 bits the INFORMATION field is not valid (fixed format holds 4 bytes).
        let big = Sense::write_error(1 << 40);
        assert_eq!(big.information, None);
        assert_eq!(big.to_bytes()[0], 0x70);
    }

    #[test]
    fn parameter_list_pointer_has_cd_clear() {
        let b = Sense::invalid_parameter_field(24).to_bytes();
        assert_eq!(&b[15..18], &[0x80, 0, 24]);
        assert_eq!(b[12], 0x26);
    }

    #[test]
    fn parse_refuses_descriptor_format_and_short_buffers() {
        let mut b = Sense::internal_failure().to_bytes();
        assert!(Sense::parse(&b[..13]).is_none());
        b[0] = 0x72;
        assert!(Sense::parse(&b).is_none());
    }

    #[test]
    fn display_names_the_field() {
        let s = Sense::invalid_cdb_field(2, None).to_string();
        assert_eq!(s, "sense key 0x5, ASC/ASCQ 24/00, CDB byte 2");
    }
}
