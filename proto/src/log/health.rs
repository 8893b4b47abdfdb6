//! Health log pages: Error Information entries (LID 01h, Base Figure 205), SMART / Health
//! Information (LID 02h, Base Figure 207) and Firmware Slot Information (LID 03h, Base
//! Figure 209). Layouts cross-checked with libnvme `struct nvme_error_log_page`,
//! `nvme_smart_log` and `nvme_firmware_slot`.

use crate::error::{exact, room, ParseError};
use crate::identify::{emit_ascii_or_zero, get, parse_ascii_field, put};
use crate::status::Status;

/// Byte ranges of an Error Information Log entry (Base Figure 205).
mod error_field {
    use crate::bytes::Field;
    pub const ERROR_COUNT: Field = 0..8;
    pub const SQID: Field = 8..10;
    pub const CID: Field = 10..12;
    /// Bit 0 phase tag, bits 15:1 the status field.
    pub const STATUS: Field = 12..14;
    pub const PARAM_ERROR_LOCATION: Field = 14..16;
    pub const LBA: Field = 16..24;
    pub const NSID: Field = 24..28;
    pub const VS: Field = 28..29;
    pub const TRTYPE: Field = 29..30;
    pub const CSI: Field = 32..40;
    pub const TTSI: Field = 40..42;
    #[cfg(test)]
    pub const RESERVED: &[Field] = &[30..32, 42..64];
}

/// One Error Information Log entry (64 bytes). The page is an array of these, newest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ErrorLogEntry {
    /// Error Count: unique, incrementing identifier of the error; 0 = invalid entry (bytes 7:0).
    pub error_count: u64,
    /// Submission Queue ID of the failed command (bytes 9:8).
    pub sqid: u16,
    /// Command ID of the failed command (bytes 11:10).
    pub cid: u16,
    /// Phase tag of the failing completion (byte 12 bit 0).
    pub phase: bool,
    /// Status of the failing completion (bytes 13:12 bits 15:1).
    pub status: Status,
    /// Parameter Error Location (bytes 15:14): bits 7:0 the byte and bits 10:8 the bit of the
    /// command that caused the error; FFFFh when not specific to a parameter.
    pub param_error_location: u16,
    /// First LBA that experienced the error (bytes 23:16).
    pub lba: u64,
    /// Namespace of the error (bytes 27:24).
    pub nsid: u32,
    /// Vendor Specific Information Available: log page id with more data, 0 = none (byte 28).
    pub vs: u8,
    /// Transport Type if the error is transport related, 0 otherwise (byte 29).
    pub trtype: u8,
    /// Command Specific Information (bytes 39:32).
    pub command_specific: u64,
    /// Transport Type Specific Information (bytes 41:40).
    pub transport_specific: u16,
}

impl ErrorLogEntry {
    /// Size of one entry.
    pub const LEN: usize = 64;
    const WHAT: &'static str = "Error Information entry";

    /// The location value for byte `byte` bit `bit` of the command (bit is 0..=7).
    pub fn location(byte: u8, bit: u8) -> u16 {
        u16::from(byte) | u16::from(bit & 0x7) << 8
    }

    /// Parses exactly 64 bytes (every such buffer parses; reserved bytes are ignored).
    pub fn parse(b: &[u8]) -> Result<ErrorLogEntry, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        use error_field::*;
        let sp: u16 = get(b, STATUS);
        Ok(ErrorLogEntry {
            error_count: get(b, ERROR_COUNT),
            sqid: get(b, SQID),
            cid: get(b, CID),
            phase: sp & 1 != 0,
            status: Status::from_field(sp >> 1),
            param_error_location: get(b, PARAM_ERROR_LOCATION),
            lba: get(b, LBA),
            nsid: get(b, NSID),
            vs: get(b, VS),
            trtype: get(b, TRTYPE),
            command_specific: get(b, CSI),
            transport_specific: get(b, TTSI),
        })
    }

    /// Writes exactly 64 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        use error_field::*;
        b.fill(0);
        put(b, ERROR_COUNT, self.error_count);
        put(b, SQID, self.sqid);
        put(b, CID, self.cid);
        put(
            b,
            STATUS,
            self.status.to_field() << 1 | u16::from(self.phase),
        );
        put(b, PARAM_ERROR_LOCATION, self.param_error_location);
        put(b, LBA, self.lba);
        put(b, NSID, self.nsid);
        put(b, VS, self.vs);
        put(b, TRTYPE, self.trtype);
        put(b, CSI, self.command_specific);
        put(b, TTSI, self.transport_specific);
        Ok(())
    }

    /// The entry as 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        // Cannot fail: the buffer has the exact size.
        let _ = self.emit(&mut b);
        b
    }
}

/// Byte ranges of the SMART / Health Information log (Base Figure 207).
mod smart_field {
    use crate::bytes::Field;
    pub const CRITICAL_WARNING: Field = 0..1;
    pub const COMPOSITE_TEMPERATURE: Field = 1..3;
    pub const AVAILABLE_SPARE: Field = 3..4;
    pub const AVAILABLE_SPARE_THRESHOLD: Field = 4..5;
    pub const PERCENTAGE_USED: Field = 5..6;
    pub const ENDURANCE_GROUP_CRITICAL_WARNING: Field = 6..7;
    pub const DATA_UNITS_READ: Field = 32..48;
    pub const DATA_UNITS_WRITTEN: Field = 48..64;
    pub const HOST_READ_COMMANDS: Field = 64..80;
    pub const HOST_WRITE_COMMANDS: Field = 80..96;
    pub const CONTROLLER_BUSY_TIME: Field = 96..112;
    pub const POWER_CYCLES: Field = 112..128;
    pub const POWER_ON_HOURS: Field = 128..144;
    pub const UNSAFE_SHUTDOWNS: Field = 144..160;
    pub const MEDIA_ERRORS: Field = 160..176;
    pub const ERROR_LOG_ENTRIES: Field = 176..192;
    pub const WARNING_TEMP_TIME: Field = 192..196;
    pub const CRITICAL_TEMP_TIME: Field = 196..200;
    /// Temperature sensors 1–8, 2 bytes each.
    pub const TEMP_SENSORS: usize = 200;
    pub const TMT1_TRANSITIONS: Field = 216..220;
    pub const TMT2_TRANSITIONS: Field = 220..224;
    pub const TMT1_TIME: Field = 224..228;
    pub const TMT2_TIME: Field = 228..232;
    #[cfg(test)]
    pub const RESERVED: &[Field] = &[7..32, 232..512];
}

/// Critical Warning bits (SMART log byte 0).
pub mod critical_warning {
    /// Available spare below threshold.
    pub const SPARE: u8 = 1 << 0;
    /// Temperature beyond a threshold.
    pub const TEMPERATURE: u8 = 1 << 1;
    /// Reliability degraded by media or internal errors (a degraded RAID array reports this).
    pub const RELIABILITY: u8 = 1 << 2;
    /// All media placed in read-only mode.
    pub const READ_ONLY: u8 = 1 << 3;
    /// Volatile memory backup device failed.
    pub const VOLATILE_BACKUP: u8 = 1 << 4;
    /// Persistent memory region became read-only or unreliable.
    pub const PMR_READ_ONLY: u8 = 1 << 5;
}

/// The SMART / Health Information log page (512 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SmartLog {
    /// Critical Warning bits, see [`critical_warning`] (byte 0).
    pub critical_warning: u8,
    /// Composite Temperature in kelvin (bytes 2:1).
    pub composite_temperature: u16,
    /// Available Spare, percent (byte 3).
    pub available_spare: u8,
    /// Available Spare Threshold, percent (byte 4).
    pub available_spare_threshold: u8,
    /// Percentage Used (byte 5; may exceed 100).
    pub percentage_used: u8,
    /// Endurance Group Critical Warning Summary (byte 6).
    pub endurance_group_critical_warning: u8,
    /// Data Units Read, in thousands of 512-byte units, rounded up (bytes 47:32).
    pub data_units_read: u128,
    /// Data Units Written, same units (bytes 63:48).
    pub data_units_written: u128,
    /// Host Read Commands completed (bytes 79:64).
    pub host_read_commands: u128,
    /// Host Write Commands completed (bytes 95:80).
    pub host_write_commands: u128,
    /// Controller Busy Time in minutes (bytes 111:96).
    pub controller_busy_time: u128,
    /// Power Cycles (bytes 127:112).
    pub power_cycles: u128,
    /// Power On Hours (bytes 143:128).
    pub power_on_hours: u128,
    /// Unsafe Shutdowns (bytes 159:144).
    pub unsafe_shutdowns: u128,
    /// Media and Data Integrity Errors (bytes 175:160).
    pub media_errors: u128,
    /// Number of Error Information Log Entries over the controller's life (bytes 191:176).
    pub error_log_entries: u128,
    /// Warning Composite Temperature Time in minutes (bytes 195:192).
    pub warning_temp_time: u32,
    /// Critical Composite Temperature Time in minutes (bytes 199:196).
    pub critical_temp_time: u32,
    /// Temperature Sensors 1–8 in kelvin, 0 = not implemented (bytes 215:200).
    pub temp_sensors: [u16; 8],
    /// Thermal Management Temperature 1 Transition Count (bytes 219:216).
    pub tmt1_transitions: u32,
    /// Thermal Management Temperature 2 Transition Count (bytes 223:220).
    pub tmt2_transitions: u32,
    /// Total Time For Thermal Management Temperature 1, seconds (bytes 227:224).
    pub tmt1_time: u32,
    /// Total Time For Thermal Management Temperature 2, seconds (bytes 231:228).
    pub tmt2_time: u32,
}

impl SmartLog {
    /// Size of the page.
    pub const LEN: usize = 512;
    const WHAT: &'static str = "SMART / Health Information";

    /// Parses exactly 512 bytes (every such buffer parses; reserved bytes are ignored).
    pub fn parse(b: &[u8]) -> Result<SmartLog, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        use smart_field::*;
        let mut temp_sensors = [0u16; 8];
        for (i, t) in temp_sensors.iter_mut().enumerate() {
            let at = TEMP_SENSORS + 2 * i;
            *t = get(b, at..at + 2);
        }
        Ok(SmartLog {
            critical_warning: get(b, CRITICAL_WARNING),
            composite_temperature: get(b, COMPOSITE_TEMPERATURE),
            available_spare: get(b, AVAILABLE_SPARE),
            available_spare_threshold: get(b, AVAILABLE_SPARE_THRESHOLD),
            percentage_used: get(b, PERCENTAGE_USED),
            endurance_group_critical_warning: get(b, ENDURANCE_GROUP_CRITICAL_WARNING),
            data_units_read: get(b, DATA_UNITS_READ),
            data_units_written: get(b, DATA_UNITS_WRITTEN),
            host_read_commands: get(b, HOST_READ_COMMANDS),
            host_write_commands: get(b, HOST_WRITE_COMMANDS),
            controller_busy_time: get(b, CONTROLLER_BUSY_TIME),
            power_cycles: get(b, POWER_CYCLES),
            power_on_hours: get(b, POWER_ON_HOURS),
            unsafe_shutdowns: get(b, UNSAFE_SHUTDOWNS),
            media_errors: get(b, MEDIA_ERRORS),
            error_log_entries: get(b, ERROR_LOG_ENTRIES),
            warning_temp_time: get(b, WARNING_TEMP_TIME),
            critical_temp_time: get(b, CRITICAL_TEMP_TIME),
            temp_sensors,
            tmt1_transitions: get(b, TMT1_TRANSITIONS),
            tmt2_transitions: get(b, TMT2_TRANSITIONS),
            tmt1_time: get(b, TMT1_TIME),
            tmt2_time: get(b, TMT2_TIME),
        })
    }

    /// Writes exactly 512 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        use smart_field::*;
        b.fill(0);
        put(b, CRITICAL_WARNING, self.critical_warning);
        put(b, COMPOSITE_TEMPERATURE, self.composite_temperature);
        put(b, AVAILABLE_SPARE, self.available_spare);
        put(b, AVAILABLE_SPARE_THRESHOLD, self.available_spare_threshold);
        put(b, PERCENTAGE_USED, self.percentage_used);
        put(
            b,
            ENDURANCE_GROUP_CRITICAL_WARNING,
            self.endurance_group_critical_warning,
        );
        put(b, DATA_UNITS_READ, self.data_units_read);
        put(b, DATA_UNITS_WRITTEN, self.data_units_written);
        put(b, HOST_READ_COMMANDS, self.host_read_commands);
        put(b, HOST_WRITE_COMMANDS, self.host_write_commands);
        put(b, CONTROLLER_BUSY_TIME, self.controller_busy_time);
        put(b, POWER_CYCLES, self.power_cycles);
        put(b, POWER_ON_HOURS, self.power_on_hours);
        put(b, UNSAFE_SHUTDOWNS, self.unsafe_shutdowns);
        put(b, MEDIA_ERRORS, self.media_errors);
        put(b, ERROR_LOG_ENTRIES, self.error_log_entries);
        put(b, WARNING_TEMP_TIME, self.warning_temp_time);
        put(b, CRITICAL_TEMP_TIME, self.critical_temp_time);
        for (i, &t) in self.temp_sensors.iter().enumerate() {
            let at = TEMP_SENSORS + 2 * i;
            put(b, at..at + 2, t);
        }
        put(b, TMT1_TRANSITIONS, self.tmt1_transitions);
        put(b, TMT2_TRANSITIONS, self.tmt2_transitions);
        put(b, TMT1_TIME, self.tmt1_time);
        put(b, TMT2_TIME, self.tmt2_time);
        Ok(())
    }

    /// The page as 512 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        // Cannot fail: the buffer has the exact size.
        let _ = self.emit(&mut b);
        b
    }

    /// Data units (1000 × 512 bytes, rounded up) for `bytes` bytes transferred, as the page
    /// counts them.
    pub fn data_units(bytes: u128) -> u128 {
        bytes.div_ceil(512_000)
    }
}

/// Byte ranges of the Firmware Slot Information log (Base Figure 209).
mod fw_field {
    use crate::bytes::Field;
    pub const AFI: Field = 0..1;
    /// Firmware Revision for Slot 1..7, 8 ASCII bytes each.
    pub const FRS: usize = 8;
    #[cfg(test)]
    pub const RESERVED: &[Field] = &[1..8, 64..512];
}

/// The Firmware Slot Information log page (512 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FirmwareSlotLog {
    /// Active firmware slot, 1..=7 (AFI bits 2:0).
    pub active_slot: u8,
    /// Slot activated at the next reset, 0 = not indicated (AFI bits 6:4).
    pub next_slot: u8,
    /// Firmware revision in slots 1–7 (ASCII, at most 8 characters); empty = no firmware,
    /// written as zeros.
    pub revisions: [String; 7],
}

impl FirmwareSlotLog {
    /// Size of the page.
    pub const LEN: usize = 512;
    const WHAT: &'static str = "Firmware Slot Information";
    const FRS_NAMES: [&'static str; 7] = ["frs1", "frs2", "frs3", "frs4", "frs5", "frs6", "frs7"];

    /// Parses exactly 512 bytes. Slot revisions must be printable ASCII (or zero); reserved
    /// AFI bits 3 and 7 are ignored.
    pub fn parse(b: &[u8]) -> Result<FirmwareSlotLog, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        let afi: u8 = get(b, fw_field::AFI);
        let mut revisions: [String; 7] = Default::default();
        for (i, r) in revisions.iter_mut().enumerate() {
            let at = fw_field::FRS + 8 * i;
            *r = parse_ascii_field(Self::WHAT, Self::FRS_NAMES[i], b, at..at + 8)?;
        }
        Ok(FirmwareSlotLog {
            active_slot: afi & 0x7,
            next_slot: (afi >> 4) & 0x7,
            revisions,
        })
    }

    /// Writes exactly 512 bytes. Slot numbers are cut to 3 bits; a revision that is not
    /// printable ASCII of at most 8 characters is an error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        b.fill(0);
        put(
            b,
            fw_field::AFI,
            (self.active_slot & 0x7) | (self.next_slot & 0x7) << 4,
        );
        for (i, r) in self.revisions.iter().enumerate() {
            let at = fw_field::FRS + 8 * i;
            emit_ascii_or_zero(Self::WHAT, Self::FRS_NAMES[i], b, at..at + 8, r)?;
        }
        Ok(())
    }

    /// The page as 512 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; Self::LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identify::testutil;
    use crate::status::StatusCode;
    use proptest::prelude::*;

    #[test]
    fn error_entry_layout() {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&42u64.to_le_bytes());
        b[8..10].copy_from_slice(&3u16.to_le_bytes());
        b[10..12].copy_from_slice(&0x1234u16.to_le_bytes());
        // Invalid field with DNR (0x4002) shifted over the phase bit, phase 1.
        b[12..14].copy_from_slice(&(0x4002u16 << 1 | 1).to_le_bytes());
        b[14..16].copy_from_slice(&0x0228u16.to_le_bytes()); // byte 0x28 bit 2
        b[16..24].copy_from_slice(&0xABCDu64.to_le_bytes());
        b[24..28].copy_from_slice(&1u32.to_le_bytes());
        b[28] = 0xC1;
        b[29] = 1; // RDMA
        b[32..40].copy_from_slice(&7u64.to_le_bytes());
        b[40..42].copy_from_slice(&0x55AAu16.to_le_bytes());
        let want = ErrorLogEntry {
            error_count: 42,
            sqid: 3,
            cid: 0x1234,
            phase: true,
            status: Status::new(StatusCode::INVALID_FIELD).dnr(),
            param_error_location: ErrorLogEntry::location(0x28, 2),
            lba: 0xABCD,
            nsid: 1,
            vs: 0xC1,
            trtype: 1,
            command_specific: 7,
            transport_specific: 0x55AA,
        };
        assert_eq!(ErrorLogEntry::parse(&b).unwrap(), want);
        assert_eq!(want.to_bytes(), b);
        assert!(ErrorLogEntry::parse(&b[..63]).is_err());
        assert!(ErrorLogEntry::parse(&[0u8; 65]).is_err());
    }

    #[test]
    fn smart_layout() {
        let mut b = vec![0u8; 512];
        b[0] = critical_warning::RELIABILITY;
        b[1..3].copy_from_slice(&310u16.to_le_bytes());
        b[3] = 100;
        b[4] = 10;
        b[5] = 3;
        b[6] = 1;
        for (i, at) in (32..192).step_by(16).enumerate() {
            // Ten 128-bit counters holding 1..=10, the last with a high bit set.
            let v = (i as u128 + 1) | if i == 9 { 1 << 100 } else { 0 };
            b[at..at + 16].copy_from_slice(&v.to_le_bytes());
        }
        b[192..196].copy_from_slice(&11u32.to_le_bytes());
        b[196..200].copy_from_slice(&12u32.to_le_bytes());
        for i in 0..8 {
            b[200 + 2 * i..202 + 2 * i].copy_from_slice(&(300 + i as u16).to_le_bytes());
        }
        b[216..220].copy_from_slice(&13u32.to_le_bytes());
        b[220..224].copy_from_slice(&14u32.to_le_bytes());
        b[224..228].copy_from_slice(&15u32.to_le_bytes());
        b[228..232].copy_from_slice(&16u32.to_le_bytes());
        let want = SmartLog {
            critical_warning: critical_warning::RELIABILITY,
            composite_temperature: 310,
            available_spare: 100,
            available_spare_threshold: 10,
            percentage_used: 3,
            endurance_group_critical_warning: 1,
            data_units_read: 1,
            data_units_written: 2,
            host_read_commands: 3,
            host_write_commands: 4,
            controller_busy_time: 5,
            power_cycles: 6,
            power_on_hours: 7,
            unsafe_shutdowns: 8,
            media_errors: 9,
            error_log_entries: 10 | 1 << 100,
            warning_temp_time: 11,
            critical_temp_time: 12,
            temp_sensors: [300, 301, 302, 303, 304, 305, 306, 307],
            tmt1_transitions: 13,
            tmt2_transitions: 14,
            tmt1_time: 15,
            tmt2_time: 16,
        };
        assert_eq!(SmartLog::parse(&b).unwrap(), want);
        assert_eq!(want.to_bytes(), b);
        assert!(SmartLog::parse(&b[..511]).is_err());
        b.push(0);
        assert!(SmartLog::parse(&b).is_err());
        assert_eq!(SmartLog::data_units(0), 0);
        assert_eq!(SmartLog::data_units(1), 1);
        assert_eq!(SmartLog::data_units(512_000), 1);
        assert_eq!(SmartLog::data_units(512_001), 2);
    }

    #[test]
    fn firmware_slot_layout() {
        let mut b = vec![0u8; 512];
        b[0] = 0x21; // active slot 1, next slot 2
        b[8..16].copy_from_slice(b"0.1.0   ");
        b[16..24].copy_from_slice(b"0.2.0-rc");
        let want = FirmwareSlotLog {
            active_slot: 1,
            next_slot: 2,
            revisions: [
                "0.1.0".into(),
                "0.2.0-rc".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        };
        assert_eq!(FirmwareSlotLog::parse(&b).unwrap(), want);
        assert_eq!(want.to_bytes().unwrap(), b);
        let mut bad = b.clone();
        bad[60] = 0xFF; // non-ASCII in slot 7
        assert_eq!(FirmwareSlotLog::parse(&bad).unwrap_err().offset(), Some(56));
        let mut too_long = want.clone();
        too_long.revisions[6] = "123456789".into();
        assert!(too_long.to_bytes().is_err());
        assert!(FirmwareSlotLog::parse(&b[..500]).is_err());
    }

    proptest! {
        #[test]
        fn error_entries_round_trip(b in proptest::array::uniform32(any::<u8>()), c in proptest::array::uniform32(any::<u8>())) {
            let mut raw = [0u8; 64];
            raw[..32].copy_from_slice(&b);
            raw[32..].copy_from_slice(&c);
            let e = ErrorLogEntry::parse(&raw).unwrap();
            testutil::zero(&mut raw, error_field::RESERVED);
            prop_assert_eq!(e.to_bytes(), raw);
        }

        #[test]
        fn smart_pages_round_trip(b in proptest::collection::vec(any::<u8>(), 512)) {
            let mut b = b;
            let s = SmartLog::parse(&b).unwrap();
            testutil::zero(&mut b, smart_field::RESERVED);
            prop_assert_eq!(s.to_bytes(), b);
        }

        #[test]
        fn firmware_pages_round_trip(b in proptest::collection::vec(any::<u8>(), 510..514)) {
            if let Ok(f) = FirmwareSlotLog::parse(&b) {
                prop_assert_eq!(FirmwareSlotLog::parse(&f.to_bytes().unwrap()).unwrap(), f);
            }
            if b.len() == 512 {
                let mut b = b;
                testutil::zero(&mut b, fw_field::RESERVED);
                b[0] &= 0x77;
                for at in (8..64).step_by(8) {
                    testutil::ascii(&mut b, at..at + 8);
                    b[at] = b'A'; // a slot of only spaces reads as empty and emits as zeros
                }
                let f = FirmwareSlotLog::parse(&b).unwrap();
                prop_assert_eq!(f.to_bytes().unwrap(), b);
            }
        }
    }
}
