//! Completion status: Status Code Type, Status Code, Command Retry Delay, More, Do Not Retry.
//!
//! Base §4.6.1 (Completion Queue Entry, Status Field). In the CQE, DW3 bits 31:17 carry the
//! status and bit 16 the phase tag. [`Status`] is the 15-bit status field without the phase:
//! bits 7:0 SC, 10:8 SCT, 12:11 CRD, 13 More, 14 DNR.

code_newtype! {
    /// Status Code Type (Base Figure 93).
    pub struct StatusCodeType(u8) {
        /// Generic Command Status.
        GENERIC = 0x0,
        /// Command Specific Status (fabrics commands' codes live here too).
        COMMAND_SPECIFIC = 0x1,
        /// Media and Data Integrity Errors.
        MEDIA = 0x2,
        /// Path Related Status.
        PATH = 0x3,
        /// Vendor Specific.
        VENDOR = 0x7,
    }
}

/// A status code within its type: what went wrong, without the retry flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusCode {
    /// The status code type.
    pub sct: StatusCodeType,
    /// The status code.
    pub sc: u8,
}

macro_rules! status_codes {
    ($( $(#[$m:meta])* $name:ident = ($sct:ident, $sc:expr), )*) => {
        impl StatusCode {
            $( $(#[$m])* pub const $name: StatusCode = StatusCode { sct: StatusCodeType::$sct, sc: $sc }; )*

            /// Every named status code.
            pub const KNOWN: &'static [StatusCode] = &[ $( StatusCode::$name, )* ];

            /// The constant's name, if this code has one.
            pub fn name(self) -> Option<&'static str> {
                $( if self == StatusCode::$name { return Some(stringify!($name)); } )*
                None
            }
        }
    };
}

status_codes! {
    // Generic Command Status (Base Figure 94).
    /// Successful completion.
    SUCCESS = (GENERIC, 0x00),
    /// Invalid command opcode.
    INVALID_OPCODE = (GENERIC, 0x01),
    /// Invalid field in command.
    INVALID_FIELD = (GENERIC, 0x02),
    /// Command ID conflict.
    CMDID_CONFLICT = (GENERIC, 0x03),
    /// Data transfer error.
    DATA_TRANSFER_ERROR = (GENERIC, 0x04),
    /// Commands aborted due to power loss notification.
    ABORTED_POWER_LOSS = (GENERIC, 0x05),
    /// Internal error.
    INTERNAL_ERROR = (GENERIC, 0x06),
    /// Command abort requested.
    ABORT_REQUESTED = (GENERIC, 0x07),
    /// Command aborted due to SQ deletion.
    ABORTED_SQ_DELETION = (GENERIC, 0x08),
    /// Invalid namespace or format.
    INVALID_NAMESPACE = (GENERIC, 0x0B),
    /// Command sequence error.
    COMMAND_SEQUENCE_ERROR = (GENERIC, 0x0C),
    /// Invalid SGL segment descriptor.
    INVALID_SGL_SEGMENT = (GENERIC, 0x0D),
    /// Invalid number of SGL descriptors.
    INVALID_SGL_COUNT = (GENERIC, 0x0E),
    /// Data SGL length invalid.
    DATA_SGL_LENGTH_INVALID = (GENERIC, 0x0F),
    /// Metadata SGL length invalid.
    METADATA_SGL_LENGTH_INVALID = (GENERIC, 0x10),
    /// SGL descriptor type invalid.
    SGL_DESCRIPTOR_TYPE_INVALID = (GENERIC, 0x11),
    /// SGL offset invalid.
    SGL_OFFSET_INVALID = (GENERIC, 0x16),
    /// Host identifier inconsistent format.
    HOST_ID_INCONSISTENT = (GENERIC, 0x18),
    /// Keep alive timer expired.
    KEEP_ALIVE_EXPIRED = (GENERIC, 0x19),
    /// Keep alive timeout invalid.
    KEEP_ALIVE_INVALID = (GENERIC, 0x1A),
    /// Command aborted due to preempt and abort.
    ABORTED_PREEMPT = (GENERIC, 0x1B),
    /// Sanitize in progress.
    SANITIZE_IN_PROGRESS = (GENERIC, 0x1D),
    /// Namespace is write protected.
    NS_WRITE_PROTECTED = (GENERIC, 0x20),
    /// Command interrupted.
    COMMAND_INTERRUPTED = (GENERIC, 0x21),
    /// Transient transport error.
    TRANSIENT_TRANSPORT_ERROR = (GENERIC, 0x22),
    /// LBA out of range (NVM command set).
    LBA_OUT_OF_RANGE = (GENERIC, 0x80),
    /// Capacity exceeded.
    CAPACITY_EXCEEDED = (GENERIC, 0x81),
    /// Namespace not ready.
    NS_NOT_READY = (GENERIC, 0x82),
    /// Reservation conflict.
    RESERVATION_CONFLICT = (GENERIC, 0x83),

    // Command Specific Status (Base Figure 95).
    /// Completion queue invalid.
    CQ_INVALID = (COMMAND_SPECIFIC, 0x00),
    /// Invalid queue identifier.
    INVALID_QUEUE_ID = (COMMAND_SPECIFIC, 0x01),
    /// Invalid queue size.
    INVALID_QUEUE_SIZE = (COMMAND_SPECIFIC, 0x02),
    /// Abort command limit exceeded.
    ABORT_LIMIT_EXCEEDED = (COMMAND_SPECIFIC, 0x03),
    /// Asynchronous event request limit exceeded.
    AER_LIMIT_EXCEEDED = (COMMAND_SPECIFIC, 0x05),
    /// Invalid firmware slot.
    INVALID_FIRMWARE_SLOT = (COMMAND_SPECIFIC, 0x06),
    /// Invalid log page.
    INVALID_LOG_PAGE = (COMMAND_SPECIFIC, 0x09),
    /// Invalid format.
    INVALID_FORMAT = (COMMAND_SPECIFIC, 0x0A),
    /// Feature identifier not saveable.
    FEATURE_NOT_SAVEABLE = (COMMAND_SPECIFIC, 0x0D),
    /// Feature not changeable.
    FEATURE_NOT_CHANGEABLE = (COMMAND_SPECIFIC, 0x0E),
    /// Feature not namespace specific.
    FEATURE_NOT_PER_NS = (COMMAND_SPECIFIC, 0x0F),
    /// Conflicting attributes (Dataset Management, NVM).
    CONFLICTING_ATTRIBUTES = (COMMAND_SPECIFIC, 0x80),
    /// Invalid protection information.
    INVALID_PI = (COMMAND_SPECIFIC, 0x81),
    /// Attempted write to read only range.
    WRITE_TO_READ_ONLY = (COMMAND_SPECIFIC, 0x82),

    // Fabrics command status (Fabrics Figure 35; SCT 1 with the fabrics command's opcode).
    /// Incompatible format (Connect: unsupported RECFMT).
    CONNECT_INCOMPATIBLE_FORMAT = (COMMAND_SPECIFIC, 0x80),
    /// Controller busy (Connect: the controller cannot accept more queues).
    CONNECT_CONTROLLER_BUSY = (COMMAND_SPECIFIC, 0x81),
    /// Connect invalid parameters (DW0 carries IATTR/IPO).
    CONNECT_INVALID_PARAMETERS = (COMMAND_SPECIFIC, 0x82),
    /// Connect restart discovery.
    CONNECT_RESTART_DISCOVERY = (COMMAND_SPECIFIC, 0x83),
    /// Connect invalid host.
    CONNECT_INVALID_HOST = (COMMAND_SPECIFIC, 0x84),
    /// Invalid queue type.
    INVALID_QUEUE_TYPE = (COMMAND_SPECIFIC, 0x85),
    /// Discover restart.
    DISCOVER_RESTART = (COMMAND_SPECIFIC, 0x90),
    /// Authentication required.
    AUTH_REQUIRED = (COMMAND_SPECIFIC, 0x91),

    // Media and Data Integrity Errors (Base Figure 96).
    /// Write fault.
    WRITE_FAULT = (MEDIA, 0x80),
    /// Unrecovered read error.
    UNRECOVERED_READ_ERROR = (MEDIA, 0x81),
    /// End-to-end guard check error.
    GUARD_CHECK_ERROR = (MEDIA, 0x82),
    /// Compare failure.
    COMPARE_FAILURE = (MEDIA, 0x85),
    /// Access denied.
    ACCESS_DENIED = (MEDIA, 0x86),
    /// Deallocated or unwritten logical block.
    DEALLOCATED_OR_UNWRITTEN = (MEDIA, 0x87),

    // Path Related Status (Base Figure 97).
    /// Internal path error.
    INTERNAL_PATH_ERROR = (PATH, 0x00),
    /// Asymmetric access persistent loss.
    ANA_PERSISTENT_LOSS = (PATH, 0x01),
    /// Asymmetric access inaccessible.
    ANA_INACCESSIBLE = (PATH, 0x02),
    /// Asymmetric access transition.
    ANA_TRANSITION = (PATH, 0x03),
    /// Controller pathing error.
    CONTROLLER_PATH_ERROR = (PATH, 0x60),
    /// Host pathing error.
    HOST_PATH_ERROR = (PATH, 0x70),
    /// Command aborted by host.
    ABORTED_BY_HOST = (PATH, 0x71),
}

impl core::fmt::Debug for StatusCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "StatusCode({:?}, {:#04x}", self.sct, self.sc)?;
        // Several fabrics/NVM codes share (SCT, SC): print the first name as a hint only.
        if let Some(n) = self.name() {
            write!(f, " {n}")?;
        }
        f.write_str(")")
    }
}

/// The 15-bit status field of a completion (without the phase tag).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Status {
    /// What happened.
    pub code: StatusCode,
    /// Command Retry Delay index (0–3; 0 = no delay).
    pub crd: u8,
    /// More status information is available in the Error Information log page.
    pub more: bool,
    /// Do Not Retry: the same command will fail again.
    pub dnr: bool,
}

impl Status {
    /// Successful completion.
    pub const SUCCESS: Status = Status::new(StatusCode::SUCCESS);

    /// A status with no retry delay, no "more", and DNR clear.
    pub const fn new(code: StatusCode) -> Status {
        Status {
            code,
            crd: 0,
            more: false,
            dnr: false,
        }
    }

    /// The same status with Do Not Retry set: a retry cannot succeed.
    pub const fn dnr(mut self) -> Status {
        self.dnr = true;
        self
    }

    /// Whether this is a successful completion.
    pub fn is_success(&self) -> bool {
        self.code == StatusCode::SUCCESS
    }

    /// Decodes the 15-bit status field (CQE DW3 bits 31:17, shifted down to bit 0).
    ///
    /// Every 15-bit value decodes; bit 15 (the phase tag's neighbour) is ignored.
    pub fn from_field(v: u16) -> Status {
        Status {
            code: StatusCode {
                sc: (v & 0xFF) as u8,
                sct: StatusCodeType(((v >> 8) & 0x7) as u8),
            },
            crd: ((v >> 11) & 0x3) as u8,
            more: v & (1 << 13) != 0,
            dnr: v & (1 << 14) != 0,
        }
    }

    /// Encodes the 15-bit status field. SCT and CRD are truncated to their widths (3 and 2 bits).
    pub fn to_field(&self) -> u16 {
        u16::from(self.code.sc)
            | u16::from(self.code.sct.0 & 0x7) << 8
            | u16::from(self.crd & 0x3) << 11
            | u16::from(self.more) << 13
            | u16::from(self.dnr) << 14
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.code.name() {
            Some(n) => write!(f, "{n}")?,
            None => write!(f, "sct {:#x} sc {:#04x}", self.code.sct.0, self.code.sc)?,
        }
        if self.dnr {
            f.write_str(" (DNR)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_layout_matches_base_4_6_1() {
        // LBA out of range with DNR: SC 0x80, SCT 0, DNR bit 14.
        let s = Status::new(StatusCode::LBA_OUT_OF_RANGE).dnr();
        assert_eq!(s.to_field(), 0x4080);
        // Unrecovered read error: SCT 2 → bits 10:8 = 0b010.
        assert_eq!(
            Status::new(StatusCode::UNRECOVERED_READ_ERROR).to_field(),
            0x0281
        );
        // Connect invalid host: SCT 1, SC 0x84, DNR.
        assert_eq!(
            Status::new(StatusCode::CONNECT_INVALID_HOST)
                .dnr()
                .to_field(),
            0x4184
        );
        let mut s = Status::new(StatusCode::INTERNAL_ERROR);
        s.crd = 3;
        s.more = true;
        assert_eq!(s.to_field(), 0x0006 | 3 << 11 | 1 << 13);
    }

    #[test]
    fn every_15_bit_value_round_trips() {
        for v in 0u16..0x8000 {
            assert_eq!(Status::from_field(v).to_field(), v);
        }
    }
}
