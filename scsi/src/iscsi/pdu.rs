//! One typed structure per iSCSI opcode (RFC 7143 §11), each parsed from and emitted to the
//! 48-byte BHS, and [`Pdu`] over all of them.
//!
//! Parsers take exactly 48 bytes and check the opcode. Reserved bytes and bits are written as
//! zero and ignored on parse, as Linux and the other targets do, so that an initiator's
//! harmless slip does not end its session; what the RFC forbids outright (a reserved login
//! stage, T with C, F with C) is an error. The DataSegmentLength is a field of every
//! structure that has a data segment, so `emit` writes it; checking it against the
//! negotiated maximum is [`crate::iscsi::bhs::split_pdu`]'s job.
//!
//! Layouts: RFC 7143 §11.3-§11.19 and Linux `include/scsi/iscsi_proto.h`.

use crate::bytes::{be16, be32, put_be16, put_be32, put_be64};
use raidline_proto::code_newtype;

use super::bhs::{field, Bhs, Opcode, BHS_LEN, FINAL_BIT, IMMEDIATE_BIT, RESERVED_TAG};
use super::error::{PduError, RejectReason};
use crate::sense::Status;

/// Checks that `b` is a 48-byte BHS of opcode `op`.
fn expect(b: &[u8], op: Opcode, what: &'static str) -> Result<Bhs, PduError> {
    let h = Bhs::parse(b)?;
    if h.opcode() != op {
        return Err(PduError::WrongOpcode {
            what,
            opcode: h.opcode().0,
        });
    }
    Ok(h)
}

/// Zeroes `out` and writes byte 0 (I bit and opcode), the flags and the DataSegmentLength.
fn start(out: &mut [u8; BHS_LEN], op: Opcode, immediate: bool, flags: u8, dsl: u32) {
    let mut h = Bhs::new(op);
    if immediate {
        h.as_bytes_mut()[field::OPCODE] |= IMMEDIATE_BIT;
    }
    h.as_bytes_mut()[field::FLAGS] = flags;
    h.set_data_segment_len(dsl);
    *out = *h.as_bytes();
}

fn flag(b: u8, bit: u8) -> bool {
    b & bit != 0
}

fn bit(on: bool, bit: u8) -> u8 {
    if on {
        bit
    } else {
        0
    }
}

/// Implements `to_bytes` from `emit` for each structure.
macro_rules! to_bytes {
    ($($t:ty),* $(,)?) => {$(
        impl $t {
            /// The 48-byte BHS.
            pub fn to_bytes(&self) -> [u8; BHS_LEN] {
                let mut b = [0u8; BHS_LEN];
                self.emit(&mut b);
                b
            }
        }
    )*};
}

to_bytes!(
    NopOut,
    ScsiCommand,
    TaskMgmtRequest,
    LoginRequest,
    TextRequest,
    DataOut,
    LogoutRequest,
    SnackRequest,
    NopIn,
    ScsiResponse,
    TaskMgmtResponse,
    LoginResponse,
    TextResponse,
    DataIn,
    LogoutResponse,
    R2t,
    AsyncMessage,
    Reject,
);

// ---------------------------------------------------------------------------------------------
// Codes
// ---------------------------------------------------------------------------------------------

code_newtype! {
    /// Task attribute of a SCSI Command (RFC 7143 §11.3.1.3, byte 1 bits 2-0; SAM-5).
    pub struct TaskAttr(u8) {
        /// Untagged.
        UNTAGGED = 0,
        /// Simple.
        SIMPLE = 1,
        /// Ordered.
        ORDERED = 2,
        /// Head of queue.
        HEAD_OF_QUEUE = 3,
        /// ACA.
        ACA = 4,
    }
}

code_newtype! {
    /// Response byte of a SCSI Response (RFC 7143 §11.4.3).
    pub struct ScsiResponseCode(u8) {
        /// Command completed at target (the SCSI status says how).
        COMMAND_COMPLETED = 0x00,
        /// Target failure.
        TARGET_FAILURE = 0x01,
    }
}

code_newtype! {
    /// Task management function (RFC 7143 §11.5.1, byte 1 bits 6-0).
    pub struct TmFunction(u8) {
        /// ABORT TASK.
        ABORT_TASK = 1,
        /// ABORT TASK SET.
        ABORT_TASK_SET = 2,
        /// CLEAR ACA.
        CLEAR_ACA = 3,
        /// CLEAR TASK SET.
        CLEAR_TASK_SET = 4,
        /// LOGICAL UNIT RESET.
        LOGICAL_UNIT_RESET = 5,
        /// TARGET WARM RESET.
        TARGET_WARM_RESET = 6,
        /// TARGET COLD RESET.
        TARGET_COLD_RESET = 7,
        /// TASK REASSIGN.
        TASK_REASSIGN = 8,
    }
}

code_newtype! {
    /// Response of a Task Management Function Response (RFC 7143 §11.6.1).
    pub struct TmResponse(u8) {
        /// Function complete.
        FUNCTION_COMPLETE = 0,
        /// Task does not exist.
        TASK_DOES_NOT_EXIST = 1,
        /// LUN does not exist.
        LUN_DOES_NOT_EXIST = 2,
        /// Task still allegiant.
        TASK_STILL_ALLEGIANT = 3,
        /// Task allegiance reassignment not supported.
        REASSIGNMENT_NOT_SUPPORTED = 4,
        /// Task management function not supported.
        FUNCTION_NOT_SUPPORTED = 5,
        /// Function authorization failed.
        AUTHORIZATION_FAILED = 6,
        /// Function rejected.
        FUNCTION_REJECTED = 255,
    }
}

code_newtype! {
    /// Reason code of a Logout Request (RFC 7143 §11.14.1, byte 1 bits 6-0).
    pub struct LogoutReason(u8) {
        /// Close the session.
        CLOSE_SESSION = 0,
        /// Close the connection.
        CLOSE_CONNECTION = 1,
        /// Remove the connection for recovery.
        REMOVE_CONNECTION_FOR_RECOVERY = 2,
    }
}

code_newtype! {
    /// Response of a Logout Response (RFC 7143 §11.15.1).
    pub struct LogoutResponseCode(u8) {
        /// Connection or session closed successfully.
        CLOSED_SUCCESSFULLY = 0,
        /// CID not found.
        CID_NOT_FOUND = 1,
        /// Connection recovery is not supported.
        RECOVERY_NOT_SUPPORTED = 2,
        /// Cleanup failed for various reasons.
        CLEANUP_FAILED = 3,
    }
}

code_newtype! {
    /// SNACK type (RFC 7143 §11.16.1, byte 1 bits 3-0).
    pub struct SnackType(u8) {
        /// Data/R2T SNACK.
        DATA_R2T = 0,
        /// Status SNACK.
        STATUS = 1,
        /// DataACK.
        DATA_ACK = 2,
        /// R-Data SNACK.
        RDATA = 3,
    }
}

code_newtype! {
    /// AsyncEvent of an Asynchronous Message (RFC 7143 §11.9.1).
    pub struct AsyncEvent(u8) {
        /// A SCSI asynchronous event is reported in the sense data.
        SCSI_EVENT = 0,
        /// The target requests a logout.
        LOGOUT_REQUEST = 1,
        /// The target will drop the connection.
        CONNECTION_DROP = 2,
        /// The target will drop all connections of the session.
        SESSION_DROP = 3,
        /// The target requests parameter negotiation.
        NEGOTIATION_REQUEST = 4,
        /// The target will terminate all remaining tasks of the connection.
        TASK_TERMINATION = 5,
        /// Vendor-specific.
        VENDOR_SPECIFIC = 255,
    }
}

code_newtype! {
    /// Status-Class and Status-Detail of a Login Response (RFC 7143 §11.13.5), as
    /// `class << 8 | detail`.
    pub struct LoginStatus(u16) {
        /// Login is proceeding OK.
        SUCCESS = 0x0000,
        /// The target moved temporarily.
        TARGET_MOVED_TEMPORARILY = 0x0101,
        /// The target moved permanently.
        TARGET_MOVED_PERMANENTLY = 0x0102,
        /// Miscellaneous initiator error (a malformed request, a bad stage transition).
        INITIATOR_ERROR = 0x0200,
        /// Authentication failure.
        AUTHENTICATION_FAILURE = 0x0201,
        /// The initiator is not allowed access to this target.
        AUTHORIZATION_FAILURE = 0x0202,
        /// The requested target name does not exist here.
        NOT_FOUND = 0x0203,
        /// The target has been removed.
        TARGET_REMOVED = 0x0204,
        /// The requested iSCSI version range is not supported.
        UNSUPPORTED_VERSION = 0x0205,
        /// Too many connections on this session.
        TOO_MANY_CONNECTIONS = 0x0206,
        /// A required key was missing.
        MISSING_PARAMETER = 0x0207,
        /// The target does not support session spanning to this connection.
        CANT_INCLUDE_IN_SESSION = 0x0208,
        /// The target does not support this session type.
        SESSION_TYPE_NOT_SUPPORTED = 0x0209,
        /// An attempt to add a connection to a session that does not exist.
        SESSION_DOES_NOT_EXIST = 0x020a,
        /// A request other than Login Request during login.
        INVALID_REQUEST_DURING_LOGIN = 0x020b,
        /// Miscellaneous target error.
        TARGET_ERROR = 0x0300,
        /// The target cannot serve the session now.
        SERVICE_UNAVAILABLE = 0x0301,
        /// The target is out of resources.
        OUT_OF_RESOURCES = 0x0302,
    }
}

impl LoginStatus {
    /// Status-Class (byte 36): 0 success, 1 redirection, 2 initiator error, 3 target error.
    pub fn class(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// Status-Detail (byte 37).
    pub fn detail(self) -> u8 {
        self.0 as u8
    }

    /// Whether the login proceeds (class 0).
    pub fn is_success(self) -> bool {
        self.class() == 0
    }
}

/// A login stage (RFC 7143 §11.12.3, CSG and NSG fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LoginStage {
    /// SecurityNegotiation (0).
    #[default]
    Security = 0,
    /// LoginOperationalNegotiation (1).
    Operational = 1,
    /// FullFeaturePhase (3).
    FullFeature = 3,
}

impl LoginStage {
    /// The stage of a 2-bit CSG/NSG value; 2 is reserved.
    pub fn from_bits(v: u8) -> Option<LoginStage> {
        match v & 3 {
            0 => Some(LoginStage::Security),
            1 => Some(LoginStage::Operational),
            3 => Some(LoginStage::FullFeature),
            _ => None,
        }
    }

    /// The 2-bit encoding.
    pub fn bits(self) -> u8 {
        self as u8
    }
}

/// Login flags (byte 1 of Login Request and Response): T 0x80, C 0x40, CSG bits 3-2,
/// NSG bits 1-0.
pub mod login_flags {
    /// Transit: the sender wants to (or agrees to) move to NSG.
    pub const TRANSIT: u8 = 0x80;
    /// Continue: the text is not complete.
    pub const CONTINUE: u8 = 0x40;
}

fn login_stages(what: &'static str, flags: u8) -> Result<(LoginStage, LoginStage), PduError> {
    let stage = |v: u8| {
        LoginStage::from_bits(v).ok_or(PduError::InvalidField {
            what,
            field: "CSG/NSG",
            offset: field::FLAGS,
            value: u64::from(flags),
        })
    };
    if flag(flags, login_flags::TRANSIT) && flag(flags, login_flags::CONTINUE) {
        return Err(PduError::ProtocolError {
            what,
            reason: "T and C bits both set",
        });
    }
    Ok((stage(flags >> 2)?, stage(flags)?))
}

fn login_flag_byte(transit: bool, cont: bool, csg: LoginStage, nsg: LoginStage) -> u8 {
    bit(transit, login_flags::TRANSIT)
        | bit(cont, login_flags::CONTINUE)
        | csg.bits() << 2
        | nsg.bits()
}

/// An Initiator Session ID (6 bytes: T, A, B, C, D fields, RFC 7143 §11.12.5).
pub type Isid = [u8; 6];

fn isid_at(b: &[u8; BHS_LEN]) -> Isid {
    let mut i = [0u8; 6];
    i.copy_from_slice(&b[8..14]);
    i
}

// ---------------------------------------------------------------------------------------------
// Initiator PDUs
// ---------------------------------------------------------------------------------------------

/// NOP-Out (RFC 7143 §11.18): a ping, or the answer to a target's NOP-In (ITT 0xffffffff).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NopOut {
    /// I bit.
    pub immediate: bool,
    /// DataSegmentLength: the ping data.
    pub data_segment_len: u32,
    /// LUN (bytes 8-15), echoing a NOP-In's.
    pub lun: u64,
    /// Initiator Task Tag; 0xffffffff when answering a NOP-In.
    pub itt: u32,
    /// Target Transfer Tag: the NOP-In's when answering it, else 0xffffffff.
    pub ttt: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl NopOut {
    const WHAT: &'static str = "NOP-Out";

    /// Parses the BHS (byte 1 is always 0x80; other values are tolerated).
    pub fn parse(b: &[u8]) -> Result<NopOut, PduError> {
        let h = expect(b, Opcode::NOP_OUT, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(NopOut {
            immediate: h.immediate(),
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(
            out,
            Opcode::NOP_OUT,
            self.immediate,
            FINAL_BIT,
            self.data_segment_len,
        );
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
    }
}

/// SCSI Command flags (byte 1, RFC 7143 §11.3.1).
pub mod command_flags {
    /// F: no unsolicited data follows in Data-Out PDUs.
    pub const FINAL: u8 = 0x80;
    /// R: the command reads (data flows to the initiator).
    pub const READ: u8 = 0x40;
    /// W: the command writes (data flows to the target).
    pub const WRITE: u8 = 0x20;
    /// ATTR: task attribute, bits 2-0.
    pub const ATTR_MASK: u8 = 0x07;
}

/// SCSI Command (RFC 7143 §11.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScsiCommand {
    /// I bit.
    pub immediate: bool,
    /// F bit: no unsolicited Data-Out follows.
    pub final_pdu: bool,
    /// R bit.
    pub read: bool,
    /// W bit.
    pub write: bool,
    /// Task attribute (bits 2-0).
    pub attr: TaskAttr,
    /// TotalAHSLength in words (an extended CDB or a bidirectional read length).
    pub total_ahs_words: u8,
    /// DataSegmentLength: immediate data.
    pub data_segment_len: u32,
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag.
    pub itt: u32,
    /// Expected Data Transfer Length.
    pub expected_data_len: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// The first 16 bytes of the CDB (the rest is in an Extended CDB AHS,
    /// [`crate::iscsi::bhs::CommandAhs`]).
    pub cdb: [u8; 16],
}

impl ScsiCommand {
    const WHAT: &'static str = "SCSI Command";

    /// Parses the BHS (reserved bits 4-3 of byte 1 are ignored).
    pub fn parse(b: &[u8]) -> Result<ScsiCommand, PduError> {
        let h = expect(b, Opcode::SCSI_COMMAND, Self::WHAT)?;
        let b = h.as_bytes();
        let f = h.flags();
        let mut cdb = [0u8; 16];
        cdb.copy_from_slice(&b[32..48]);
        Ok(ScsiCommand {
            immediate: h.immediate(),
            final_pdu: flag(f, command_flags::FINAL),
            read: flag(f, command_flags::READ),
            write: flag(f, command_flags::WRITE),
            attr: TaskAttr(f & command_flags::ATTR_MASK),
            total_ahs_words: h.total_ahs_words(),
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            expected_data_len: be32(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
            cdb,
        })
    }

    /// Writes the BHS (the task attribute is cut to its 3 bits).
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = bit(self.final_pdu, command_flags::FINAL)
            | bit(self.read, command_flags::READ)
            | bit(self.write, command_flags::WRITE)
            | (self.attr.0 & command_flags::ATTR_MASK);
        start(
            out,
            Opcode::SCSI_COMMAND,
            self.immediate,
            flags,
            self.data_segment_len,
        );
        out[field::TOTAL_AHS_LEN] = self.total_ahs_words;
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.expected_data_len);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
        out[32..48].copy_from_slice(&self.cdb);
    }
}

/// SCSI Task Management Function Request (RFC 7143 §11.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskMgmtRequest {
    /// I bit.
    pub immediate: bool,
    /// Function (byte 1 bits 6-0; bit 7 is always 1).
    pub function: TmFunction,
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag of this request.
    pub itt: u32,
    /// Referenced Task Tag (ABORT TASK, TASK REASSIGN), else 0xffffffff.
    pub referenced_task_tag: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// RefCmdSN: the CmdSN of the referenced task (ABORT TASK).
    pub ref_cmd_sn: u32,
    /// ExpDataSN (TASK REASSIGN).
    pub exp_data_sn: u32,
}

impl TaskMgmtRequest {
    const WHAT: &'static str = "Task Management Request";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<TaskMgmtRequest, PduError> {
        let h = expect(b, Opcode::TASK_MGMT_REQUEST, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(TaskMgmtRequest {
            immediate: h.immediate(),
            function: TmFunction(h.flags() & 0x7f),
            lun: h.lun(),
            itt: h.itt(),
            referenced_task_tag: be32(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
            ref_cmd_sn: be32(b, 32),
            exp_data_sn: be32(b, 36),
        })
    }

    /// Writes the BHS (the function is cut to 7 bits).
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = FINAL_BIT | (self.function.0 & 0x7f);
        start(out, Opcode::TASK_MGMT_REQUEST, self.immediate, flags, 0);
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.referenced_task_tag);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
        put_be32(out, 32, self.ref_cmd_sn);
        put_be32(out, 36, self.exp_data_sn);
    }
}

/// Login Request (RFC 7143 §11.12). Always sent with the I bit (byte 0 = 0x43).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoginRequest {
    /// T: the initiator wants to move to `nsg`.
    pub transit: bool,
    /// C: the text continues in the next Login Request.
    pub cont: bool,
    /// Current stage.
    pub csg: LoginStage,
    /// Next stage (meaningful with T).
    pub nsg: LoginStage,
    /// Version-max.
    pub version_max: u8,
    /// Version-min.
    pub version_min: u8,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// ISID.
    pub isid: Isid,
    /// TSIH: 0 for a new session, else the session a connection joins.
    pub tsih: u16,
    /// Initiator Task Tag.
    pub itt: u32,
    /// Connection ID.
    pub cid: u16,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl LoginRequest {
    const WHAT: &'static str = "Login Request";

    /// Parses the BHS. The reserved stage 2 in CSG or NSG is [`PduError::InvalidField`]; T
    /// and C together are [`PduError::ProtocolError`] (RFC 7143 §11.12.2).
    pub fn parse(b: &[u8]) -> Result<LoginRequest, PduError> {
        let h = expect(b, Opcode::LOGIN_REQUEST, Self::WHAT)?;
        let b = h.as_bytes();
        let f = h.flags();
        let (csg, nsg) = login_stages(Self::WHAT, f)?;
        Ok(LoginRequest {
            transit: flag(f, login_flags::TRANSIT),
            cont: flag(f, login_flags::CONTINUE),
            csg,
            nsg,
            version_max: b[2],
            version_min: b[3],
            data_segment_len: h.data_segment_len(),
            isid: isid_at(b),
            tsih: be16(b, 14),
            itt: h.itt(),
            cid: be16(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
        })
    }

    /// Writes the BHS (with the I bit).
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = login_flag_byte(self.transit, self.cont, self.csg, self.nsg);
        start(
            out,
            Opcode::LOGIN_REQUEST,
            true,
            flags,
            self.data_segment_len,
        );
        out[2] = self.version_max;
        out[3] = self.version_min;
        out[8..14].copy_from_slice(&self.isid);
        put_be16(out, 14, self.tsih);
        put_be32(out, 16, self.itt);
        put_be16(out, 20, self.cid);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
    }
}

/// Text flags (byte 1 of Text Request and Response).
pub mod text_flags {
    /// F: the last PDU of the text exchange's request or response.
    pub const FINAL: u8 = 0x80;
    /// C: the text continues in the next PDU.
    pub const CONTINUE: u8 = 0x40;
}

fn text_bits(what: &'static str, f: u8) -> Result<(bool, bool), PduError> {
    let (fin, cont) = (flag(f, text_flags::FINAL), flag(f, text_flags::CONTINUE));
    if fin && cont {
        return Err(PduError::ProtocolError {
            what,
            reason: "F and C bits both set",
        });
    }
    Ok((fin, cont))
}

/// Text Request (RFC 7143 §11.10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextRequest {
    /// I bit.
    pub immediate: bool,
    /// F: the initiator's last text of this exchange.
    pub final_pdu: bool,
    /// C: the text continues in the next Text Request.
    pub cont: bool,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// LUN (reserved unless a key needs it).
    pub lun: u64,
    /// Initiator Task Tag.
    pub itt: u32,
    /// Target Transfer Tag: 0xffffffff to start, else the one of the target's continuing
    /// Text Response.
    pub ttt: u32,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl TextRequest {
    const WHAT: &'static str = "Text Request";

    /// Parses the BHS; F and C together are [`PduError::ProtocolError`].
    pub fn parse(b: &[u8]) -> Result<TextRequest, PduError> {
        let h = expect(b, Opcode::TEXT_REQUEST, Self::WHAT)?;
        let b = h.as_bytes();
        let (final_pdu, cont) = text_bits(Self::WHAT, h.flags())?;
        Ok(TextRequest {
            immediate: h.immediate(),
            final_pdu,
            cont,
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = bit(self.final_pdu, text_flags::FINAL) | bit(self.cont, text_flags::CONTINUE);
        start(
            out,
            Opcode::TEXT_REQUEST,
            self.immediate,
            flags,
            self.data_segment_len,
        );
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
    }
}

/// SCSI Data-Out (RFC 7143 §11.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataOut {
    /// F: the last Data-Out of the sequence (of an R2T, or of the unsolicited data).
    pub final_pdu: bool,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// LUN (of the R2T; reserved for unsolicited data).
    pub lun: u64,
    /// Initiator Task Tag of the command.
    pub itt: u32,
    /// Target Transfer Tag of the R2T, 0xffffffff for unsolicited data.
    pub ttt: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// DataSN within the sequence.
    pub data_sn: u32,
    /// Buffer Offset of this data in the command's buffer.
    pub buffer_offset: u32,
}

impl DataOut {
    const WHAT: &'static str = "SCSI Data-Out";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<DataOut, PduError> {
        let h = expect(b, Opcode::SCSI_DATA_OUT, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(DataOut {
            final_pdu: flag(h.flags(), FINAL_BIT),
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            exp_stat_sn: be32(b, 28),
            data_sn: be32(b, 36),
            buffer_offset: be32(b, 40),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = bit(self.final_pdu, FINAL_BIT);
        start(
            out,
            Opcode::SCSI_DATA_OUT,
            false,
            flags,
            self.data_segment_len,
        );
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 28, self.exp_stat_sn);
        put_be32(out, 36, self.data_sn);
        put_be32(out, 40, self.buffer_offset);
    }
}

/// Logout Request (RFC 7143 §11.14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogoutRequest {
    /// I bit.
    pub immediate: bool,
    /// Reason code (byte 1 bits 6-0).
    pub reason: LogoutReason,
    /// Initiator Task Tag.
    pub itt: u32,
    /// CID of the connection to close (reasons 1 and 2).
    pub cid: u16,
    /// CmdSN.
    pub cmd_sn: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
}

impl LogoutRequest {
    const WHAT: &'static str = "Logout Request";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<LogoutRequest, PduError> {
        let h = expect(b, Opcode::LOGOUT_REQUEST, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(LogoutRequest {
            immediate: h.immediate(),
            reason: LogoutReason(h.flags() & 0x7f),
            itt: h.itt(),
            cid: be16(b, 20),
            cmd_sn: be32(b, 24),
            exp_stat_sn: be32(b, 28),
        })
    }

    /// Writes the BHS (the reason is cut to 7 bits).
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = FINAL_BIT | (self.reason.0 & 0x7f);
        start(out, Opcode::LOGOUT_REQUEST, self.immediate, flags, 0);
        put_be32(out, 16, self.itt);
        put_be16(out, 20, self.cid);
        put_be32(out, 24, self.cmd_sn);
        put_be32(out, 28, self.exp_stat_sn);
    }
}

/// SNACK Request (RFC 7143 §11.16). Parsed so that it can be answered: this target runs
/// ErrorRecoveryLevel 0, where a SNACK is answered with a Reject, reason "protocol error"
/// (as Linux LIO does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnackRequest {
    /// Type (byte 1 bits 3-0).
    pub snack_type: SnackType,
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag (0xffffffff for a Status SNACK).
    pub itt: u32,
    /// Target Transfer Tag or SNACK Tag.
    pub ttt: u32,
    /// ExpStatSN.
    pub exp_stat_sn: u32,
    /// BegRun.
    pub beg_run: u32,
    /// RunLength.
    pub run_length: u32,
}

impl SnackRequest {
    const WHAT: &'static str = "SNACK Request";

    /// The Reject reason a target at ErrorRecoveryLevel 0 answers a SNACK with.
    pub const REJECT_REASON_ERL0: RejectReason = RejectReason::PROTOCOL_ERROR;

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<SnackRequest, PduError> {
        let h = expect(b, Opcode::SNACK_REQUEST, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(SnackRequest {
            snack_type: SnackType(h.flags() & 0x0f),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            exp_stat_sn: be32(b, 28),
            beg_run: be32(b, 40),
            run_length: be32(b, 44),
        })
    }

    /// Writes the BHS (the type is cut to 4 bits).
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = FINAL_BIT | (self.snack_type.0 & 0x0f);
        start(out, Opcode::SNACK_REQUEST, false, flags, 0);
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 28, self.exp_stat_sn);
        put_be32(out, 40, self.beg_run);
        put_be32(out, 44, self.run_length);
    }
}

// ---------------------------------------------------------------------------------------------
// Target PDUs
// ---------------------------------------------------------------------------------------------

/// NOP-In (RFC 7143 §11.19): the answer to a NOP-Out, or a target's ping (TTT other than
/// 0xffffffff, ITT 0xffffffff).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NopIn {
    /// DataSegmentLength: the ping data echoed.
    pub data_segment_len: u32,
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag (of the NOP-Out answered, or 0xffffffff).
    pub itt: u32,
    /// Target Transfer Tag (0xffffffff when answering a NOP-Out).
    pub ttt: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl NopIn {
    const WHAT: &'static str = "NOP-In";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<NopIn, PduError> {
        let h = expect(b, Opcode::NOP_IN, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(NopIn {
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(out, Opcode::NOP_IN, false, FINAL_BIT, self.data_segment_len);
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
    }
}

/// SCSI Response flags (byte 1, RFC 7143 §11.4.1).
pub mod response_flags {
    /// o: bidirectional read residual overflow.
    pub const BIDI_OVERFLOW: u8 = 0x10;
    /// u: bidirectional read residual underflow.
    pub const BIDI_UNDERFLOW: u8 = 0x08;
    /// O: residual overflow.
    pub const OVERFLOW: u8 = 0x04;
    /// U: residual underflow.
    pub const UNDERFLOW: u8 = 0x02;
}

/// SCSI Response (RFC 7143 §11.4). Its data segment, when there is sense data, is built by
/// [`scsi_response_data`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScsiResponse {
    /// o: bidirectional read residual overflow.
    pub bidi_overflow: bool,
    /// u: bidirectional read residual underflow.
    pub bidi_underflow: bool,
    /// O: residual overflow (the command wanted more than Expected Data Transfer Length).
    pub overflow: bool,
    /// U: residual underflow (less was transferred than expected).
    pub underflow: bool,
    /// Response (byte 2).
    pub response: ScsiResponseCode,
    /// SCSI status (byte 3).
    pub status: Status,
    /// DataSegmentLength: sense data and response data.
    pub data_segment_len: u32,
    /// Initiator Task Tag of the command.
    pub itt: u32,
    /// SNACK Tag.
    pub snack_tag: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// ExpDataSN: the number of Data-In (read) PDUs the target sent.
    pub exp_data_sn: u32,
    /// Bidirectional Read Residual Count.
    pub bidi_read_residual: u32,
    /// Residual Count.
    pub residual_count: u32,
}

impl ScsiResponse {
    const WHAT: &'static str = "SCSI Response";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<ScsiResponse, PduError> {
        let h = expect(b, Opcode::SCSI_RESPONSE, Self::WHAT)?;
        let b = h.as_bytes();
        let f = h.flags();
        Ok(ScsiResponse {
            bidi_overflow: flag(f, response_flags::BIDI_OVERFLOW),
            bidi_underflow: flag(f, response_flags::BIDI_UNDERFLOW),
            overflow: flag(f, response_flags::OVERFLOW),
            underflow: flag(f, response_flags::UNDERFLOW),
            response: ScsiResponseCode(b[2]),
            status: Status(b[3]),
            data_segment_len: h.data_segment_len(),
            itt: h.itt(),
            snack_tag: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            exp_data_sn: be32(b, 36),
            bidi_read_residual: be32(b, 40),
            residual_count: be32(b, 44),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = FINAL_BIT
            | bit(self.bidi_overflow, response_flags::BIDI_OVERFLOW)
            | bit(self.bidi_underflow, response_flags::BIDI_UNDERFLOW)
            | bit(self.overflow, response_flags::OVERFLOW)
            | bit(self.underflow, response_flags::UNDERFLOW);
        start(
            out,
            Opcode::SCSI_RESPONSE,
            false,
            flags,
            self.data_segment_len,
        );
        out[2] = self.response.0;
        out[3] = self.status.0;
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.snack_tag);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be32(out, 36, self.exp_data_sn);
        put_be32(out, 40, self.bidi_read_residual);
        put_be32(out, 44, self.residual_count);
    }
}

/// The data segment of a SCSI Response carrying sense data (RFC 7143 §11.4.7.2): the 2-byte
/// SenseLength, then the sense bytes. Sense longer than 65535 bytes is cut.
pub fn scsi_response_data(sense: &[u8]) -> Vec<u8> {
    let sense = sense.get(..usize::from(u16::MAX)).unwrap_or(sense);
    let mut out = vec![0u8; 2 + sense.len()];
    put_be16(&mut out, 0, sense.len() as u16);
    out[2..].copy_from_slice(sense);
    out
}

/// The sense bytes of a SCSI Response's data segment (an initiator's view): an empty segment
/// has none; otherwise SenseLength must fit in it (response data may follow the sense).
pub fn parse_scsi_response_data(data: &[u8]) -> Result<&[u8], PduError> {
    const WHAT: &str = "SCSI Response data";
    if data.is_empty() {
        return Ok(data);
    }
    let Some(head) = data.get(..2) else {
        return Err(PduError::Truncated {
            what: WHAT,
            need: 2,
            got: data.len(),
        });
    };
    let len = usize::from(be16(head, 0));
    data.get(2..2 + len).ok_or(PduError::Truncated {
        what: WHAT,
        need: 2 + len,
        got: data.len(),
    })
}

/// SCSI Task Management Function Response (RFC 7143 §11.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskMgmtResponse {
    /// Response (byte 2).
    pub response: TmResponse,
    /// Initiator Task Tag of the request.
    pub itt: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl TaskMgmtResponse {
    const WHAT: &'static str = "Task Management Response";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<TaskMgmtResponse, PduError> {
        let h = expect(b, Opcode::TASK_MGMT_RESPONSE, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(TaskMgmtResponse {
            response: TmResponse(b[2]),
            itt: h.itt(),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(out, Opcode::TASK_MGMT_RESPONSE, false, FINAL_BIT, 0);
        out[2] = self.response.0;
        put_be32(out, 16, self.itt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
    }
}

/// Login Response (RFC 7143 §11.13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoginResponse {
    /// T: the target agrees to move to `nsg`.
    pub transit: bool,
    /// C: the text continues in the next Login Response.
    pub cont: bool,
    /// Current stage.
    pub csg: LoginStage,
    /// Next stage (meaningful with T).
    pub nsg: LoginStage,
    /// Version-max.
    pub version_max: u8,
    /// Version-active.
    pub version_active: u8,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// ISID (echoed).
    pub isid: Isid,
    /// TSIH: the new session's in the final response.
    pub tsih: u16,
    /// Initiator Task Tag (echoed).
    pub itt: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// Status-Class and Status-Detail (bytes 36-37).
    pub status: LoginStatus,
}

impl LoginResponse {
    const WHAT: &'static str = "Login Response";

    /// Parses the BHS; a reserved stage or T with C is an error as for the request.
    pub fn parse(b: &[u8]) -> Result<LoginResponse, PduError> {
        let h = expect(b, Opcode::LOGIN_RESPONSE, Self::WHAT)?;
        let b = h.as_bytes();
        let f = h.flags();
        let (csg, nsg) = login_stages(Self::WHAT, f)?;
        Ok(LoginResponse {
            transit: flag(f, login_flags::TRANSIT),
            cont: flag(f, login_flags::CONTINUE),
            csg,
            nsg,
            version_max: b[2],
            version_active: b[3],
            data_segment_len: h.data_segment_len(),
            isid: isid_at(b),
            tsih: be16(b, 14),
            itt: h.itt(),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            status: LoginStatus(be16(b, 36)),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = login_flag_byte(self.transit, self.cont, self.csg, self.nsg);
        start(
            out,
            Opcode::LOGIN_RESPONSE,
            false,
            flags,
            self.data_segment_len,
        );
        out[2] = self.version_max;
        out[3] = self.version_active;
        out[8..14].copy_from_slice(&self.isid);
        put_be16(out, 14, self.tsih);
        put_be32(out, 16, self.itt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be16(out, 36, self.status.0);
    }
}

/// Text Response (RFC 7143 §11.11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextResponse {
    /// F: the target's last response of the exchange.
    pub final_pdu: bool,
    /// C: the text continues in the next Text Response.
    pub cont: bool,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag (echoed).
    pub itt: u32,
    /// Target Transfer Tag: 0xffffffff with F, else a tag the initiator returns to continue.
    pub ttt: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

impl TextResponse {
    const WHAT: &'static str = "Text Response";

    /// Parses the BHS; F and C together are [`PduError::ProtocolError`].
    pub fn parse(b: &[u8]) -> Result<TextResponse, PduError> {
        let h = expect(b, Opcode::TEXT_RESPONSE, Self::WHAT)?;
        let b = h.as_bytes();
        let (final_pdu, cont) = text_bits(Self::WHAT, h.flags())?;
        Ok(TextResponse {
            final_pdu,
            cont,
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = bit(self.final_pdu, text_flags::FINAL) | bit(self.cont, text_flags::CONTINUE);
        start(
            out,
            Opcode::TEXT_RESPONSE,
            false,
            flags,
            self.data_segment_len,
        );
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
    }
}

/// SCSI Data-In flags (byte 1, RFC 7143 §11.7.1).
pub mod data_in_flags {
    /// F: the last Data-In of the sequence.
    pub const FINAL: u8 = 0x80;
    /// A: acknowledge requested (ErrorRecoveryLevel > 0).
    pub const ACK: u8 = 0x40;
    /// O: residual overflow (valid with S).
    pub const OVERFLOW: u8 = 0x04;
    /// U: residual underflow (valid with S).
    pub const UNDERFLOW: u8 = 0x02;
    /// S: the PDU carries the command's status (phase collapse).
    pub const STATUS: u8 = 0x01;
}

/// SCSI Data-In (RFC 7143 §11.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataIn {
    /// F: the last Data-In of the sequence.
    pub final_pdu: bool,
    /// A: acknowledge requested.
    pub ack: bool,
    /// O: residual overflow.
    pub overflow: bool,
    /// U: residual underflow.
    pub underflow: bool,
    /// S: the status is in this PDU.
    pub status_present: bool,
    /// SCSI status (valid with S).
    pub status: Status,
    /// DataSegmentLength.
    pub data_segment_len: u32,
    /// LUN (with A; else reserved).
    pub lun: u64,
    /// Initiator Task Tag.
    pub itt: u32,
    /// Target Transfer Tag (with A; else 0xffffffff).
    pub ttt: u32,
    /// StatSN (valid with S).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// DataSN.
    pub data_sn: u32,
    /// Buffer Offset.
    pub buffer_offset: u32,
    /// Residual Count (valid with S).
    pub residual_count: u32,
}

impl DataIn {
    const WHAT: &'static str = "SCSI Data-In";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<DataIn, PduError> {
        let h = expect(b, Opcode::SCSI_DATA_IN, Self::WHAT)?;
        let b = h.as_bytes();
        let f = h.flags();
        Ok(DataIn {
            final_pdu: flag(f, data_in_flags::FINAL),
            ack: flag(f, data_in_flags::ACK),
            overflow: flag(f, data_in_flags::OVERFLOW),
            underflow: flag(f, data_in_flags::UNDERFLOW),
            status_present: flag(f, data_in_flags::STATUS),
            status: Status(b[3]),
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            data_sn: be32(b, 36),
            buffer_offset: be32(b, 40),
            residual_count: be32(b, 44),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        let flags = bit(self.final_pdu, data_in_flags::FINAL)
            | bit(self.ack, data_in_flags::ACK)
            | bit(self.overflow, data_in_flags::OVERFLOW)
            | bit(self.underflow, data_in_flags::UNDERFLOW)
            | bit(self.status_present, data_in_flags::STATUS);
        start(
            out,
            Opcode::SCSI_DATA_IN,
            false,
            flags,
            self.data_segment_len,
        );
        out[3] = self.status.0;
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be32(out, 36, self.data_sn);
        put_be32(out, 40, self.buffer_offset);
        put_be32(out, 44, self.residual_count);
    }
}

/// Logout Response (RFC 7143 §11.15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogoutResponse {
    /// Response (byte 2).
    pub response: LogoutResponseCode,
    /// Initiator Task Tag of the request.
    pub itt: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// Time2Wait (seconds).
    pub time2wait: u16,
    /// Time2Retain (seconds).
    pub time2retain: u16,
}

impl LogoutResponse {
    const WHAT: &'static str = "Logout Response";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<LogoutResponse, PduError> {
        let h = expect(b, Opcode::LOGOUT_RESPONSE, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(LogoutResponse {
            response: LogoutResponseCode(b[2]),
            itt: h.itt(),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            time2wait: be16(b, 40),
            time2retain: be16(b, 42),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(out, Opcode::LOGOUT_RESPONSE, false, FINAL_BIT, 0);
        out[2] = self.response.0;
        put_be32(out, 16, self.itt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be16(out, 40, self.time2wait);
        put_be16(out, 42, self.time2retain);
    }
}

/// Ready To Transfer (RFC 7143 §11.8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct R2t {
    /// LUN.
    pub lun: u64,
    /// Initiator Task Tag of the command.
    pub itt: u32,
    /// Target Transfer Tag the Data-Out PDUs carry.
    pub ttt: u32,
    /// StatSN (the next one; R2T does not advance it).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// R2TSN.
    pub r2t_sn: u32,
    /// Buffer Offset.
    pub buffer_offset: u32,
    /// Desired Data Transfer Length.
    pub desired_len: u32,
}

impl R2t {
    const WHAT: &'static str = "R2T";

    /// Parses the BHS.
    pub fn parse(b: &[u8]) -> Result<R2t, PduError> {
        let h = expect(b, Opcode::R2T, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(R2t {
            lun: h.lun(),
            itt: h.itt(),
            ttt: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            r2t_sn: be32(b, 36),
            buffer_offset: be32(b, 40),
            desired_len: be32(b, 44),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(out, Opcode::R2T, false, FINAL_BIT, 0);
        put_be64(out, 8, self.lun);
        put_be32(out, 16, self.itt);
        put_be32(out, 20, self.ttt);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be32(out, 36, self.r2t_sn);
        put_be32(out, 40, self.buffer_offset);
        put_be32(out, 44, self.desired_len);
    }
}

/// Asynchronous Message (RFC 7143 §11.9). Its ITT is always 0xffffffff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncMessage {
    /// DataSegmentLength (sense data for a SCSI event).
    pub data_segment_len: u32,
    /// LUN.
    pub lun: u64,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// AsyncEvent.
    pub event: AsyncEvent,
    /// AsyncVCode.
    pub vcode: u8,
    /// Parameter1.
    pub parameter1: u16,
    /// Parameter2.
    pub parameter2: u16,
    /// Parameter3.
    pub parameter3: u16,
}

impl AsyncMessage {
    const WHAT: &'static str = "Asynchronous Message";

    /// Parses the BHS (the ITT is not checked).
    pub fn parse(b: &[u8]) -> Result<AsyncMessage, PduError> {
        let h = expect(b, Opcode::ASYNC_MESSAGE, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(AsyncMessage {
            data_segment_len: h.data_segment_len(),
            lun: h.lun(),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            event: AsyncEvent(b[36]),
            vcode: b[37],
            parameter1: be16(b, 38),
            parameter2: be16(b, 40),
            parameter3: be16(b, 42),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(
            out,
            Opcode::ASYNC_MESSAGE,
            false,
            FINAL_BIT,
            self.data_segment_len,
        );
        put_be64(out, 8, self.lun);
        put_be32(out, 16, RESERVED_TAG);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        out[36] = self.event.0;
        out[37] = self.vcode;
        put_be16(out, 38, self.parameter1);
        put_be16(out, 40, self.parameter2);
        put_be16(out, 42, self.parameter3);
    }
}

/// Reject (RFC 7143 §11.17). Its data segment is the rejected PDU's 48-byte header; its
/// ITT is always 0xffffffff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reject {
    /// Reason (byte 2).
    pub reason: RejectReason,
    /// DataSegmentLength (48: the rejected header).
    pub data_segment_len: u32,
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// DataSN/R2TSN (for a rejected SNACK), else 0.
    pub data_sn: u32,
}

impl Reject {
    const WHAT: &'static str = "Reject";

    /// A Reject for `reason` whose data segment will be the 48-byte rejected header.
    pub fn new(reason: RejectReason, stat_sn: u32, exp_cmd_sn: u32, max_cmd_sn: u32) -> Reject {
        Reject {
            reason,
            data_segment_len: BHS_LEN as u32,
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            data_sn: 0,
        }
    }

    /// Parses the BHS (the ITT is not checked).
    pub fn parse(b: &[u8]) -> Result<Reject, PduError> {
        let h = expect(b, Opcode::REJECT, Self::WHAT)?;
        let b = h.as_bytes();
        Ok(Reject {
            reason: RejectReason(b[2]),
            data_segment_len: h.data_segment_len(),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            data_sn: be32(b, 36),
        })
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        start(out, Opcode::REJECT, false, FINAL_BIT, self.data_segment_len);
        out[2] = self.reason.0;
        put_be32(out, 16, RESERVED_TAG);
        put_be32(out, 24, self.stat_sn);
        put_be32(out, 28, self.exp_cmd_sn);
        put_be32(out, 32, self.max_cmd_sn);
        put_be32(out, 36, self.data_sn);
    }
}

// ---------------------------------------------------------------------------------------------
// Any PDU
// ---------------------------------------------------------------------------------------------

/// Any iSCSI PDU's header, typed by its opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pdu {
    /// NOP-Out (0x00).
    NopOut(NopOut),
    /// SCSI Command (0x01).
    ScsiCommand(ScsiCommand),
    /// Task Management Function Request (0x02).
    TaskMgmtRequest(TaskMgmtRequest),
    /// Login Request (0x03).
    LoginRequest(LoginRequest),
    /// Text Request (0x04).
    TextRequest(TextRequest),
    /// SCSI Data-Out (0x05).
    DataOut(DataOut),
    /// Logout Request (0x06).
    LogoutRequest(LogoutRequest),
    /// SNACK Request (0x10).
    SnackRequest(SnackRequest),
    /// NOP-In (0x20).
    NopIn(NopIn),
    /// SCSI Response (0x21).
    ScsiResponse(ScsiResponse),
    /// Task Management Function Response (0x22).
    TaskMgmtResponse(TaskMgmtResponse),
    /// Login Response (0x23).
    LoginResponse(LoginResponse),
    /// Text Response (0x24).
    TextResponse(TextResponse),
    /// SCSI Data-In (0x25).
    DataIn(DataIn),
    /// Logout Response (0x26).
    LogoutResponse(LogoutResponse),
    /// R2T (0x31).
    R2t(R2t),
    /// Asynchronous Message (0x32).
    AsyncMessage(AsyncMessage),
    /// Reject (0x3f).
    Reject(Reject),
}

impl Pdu {
    /// Parses a 48-byte BHS into the structure of its opcode. An opcode this crate does not
    /// know is [`PduError::UnknownOpcode`], answered with Reject reason 0x05.
    pub fn parse(b: &[u8]) -> Result<Pdu, PduError> {
        let h = Bhs::parse(b)?;
        Ok(match h.opcode() {
            Opcode::NOP_OUT => Pdu::NopOut(NopOut::parse(b)?),
            Opcode::SCSI_COMMAND => Pdu::ScsiCommand(ScsiCommand::parse(b)?),
            Opcode::TASK_MGMT_REQUEST => Pdu::TaskMgmtRequest(TaskMgmtRequest::parse(b)?),
            Opcode::LOGIN_REQUEST => Pdu::LoginRequest(LoginRequest::parse(b)?),
            Opcode::TEXT_REQUEST => Pdu::TextRequest(TextRequest::parse(b)?),
            Opcode::SCSI_DATA_OUT => Pdu::DataOut(DataOut::parse(b)?),
            Opcode::LOGOUT_REQUEST => Pdu::LogoutRequest(LogoutRequest::parse(b)?),
            Opcode::SNACK_REQUEST => Pdu::SnackRequest(SnackRequest::parse(b)?),
            Opcode::NOP_IN => Pdu::NopIn(NopIn::parse(b)?),
            Opcode::SCSI_RESPONSE => Pdu::ScsiResponse(ScsiResponse::parse(b)?),
            Opcode::TASK_MGMT_RESPONSE => Pdu::TaskMgmtResponse(TaskMgmtResponse::parse(b)?),
            Opcode::LOGIN_RESPONSE => Pdu::LoginResponse(LoginResponse::parse(b)?),
            Opcode::TEXT_RESPONSE => Pdu::TextResponse(TextResponse::parse(b)?),
            Opcode::SCSI_DATA_IN => Pdu::DataIn(DataIn::parse(b)?),
            Opcode::LOGOUT_RESPONSE => Pdu::LogoutResponse(LogoutResponse::parse(b)?),
            Opcode::R2T => Pdu::R2t(R2t::parse(b)?),
            Opcode::ASYNC_MESSAGE => Pdu::AsyncMessage(AsyncMessage::parse(b)?),
            Opcode::REJECT => Pdu::Reject(Reject::parse(b)?),
            other => return Err(PduError::UnknownOpcode(other.0)),
        })
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        match self {
            Pdu::NopOut(_) => Opcode::NOP_OUT,
            Pdu::ScsiCommand(_) => Opcode::SCSI_COMMAND,
            Pdu::TaskMgmtRequest(_) => Opcode::TASK_MGMT_REQUEST,
            Pdu::LoginRequest(_) => Opcode::LOGIN_REQUEST,
            Pdu::TextRequest(_) => Opcode::TEXT_REQUEST,
            Pdu::DataOut(_) => Opcode::SCSI_DATA_OUT,
            Pdu::LogoutRequest(_) => Opcode::LOGOUT_REQUEST,
            Pdu::SnackRequest(_) => Opcode::SNACK_REQUEST,
            Pdu::NopIn(_) => Opcode::NOP_IN,
            Pdu::ScsiResponse(_) => Opcode::SCSI_RESPONSE,
            Pdu::TaskMgmtResponse(_) => Opcode::TASK_MGMT_RESPONSE,
            Pdu::LoginResponse(_) => Opcode::LOGIN_RESPONSE,
            Pdu::TextResponse(_) => Opcode::TEXT_RESPONSE,
            Pdu::DataIn(_) => Opcode::SCSI_DATA_IN,
            Pdu::LogoutResponse(_) => Opcode::LOGOUT_RESPONSE,
            Pdu::R2t(_) => Opcode::R2T,
            Pdu::AsyncMessage(_) => Opcode::ASYNC_MESSAGE,
            Pdu::Reject(_) => Opcode::REJECT,
        }
    }

    /// Writes the BHS.
    pub fn emit(&self, out: &mut [u8; BHS_LEN]) {
        match self {
            Pdu::NopOut(p) => p.emit(out),
            Pdu::ScsiCommand(p) => p.emit(out),
            Pdu::TaskMgmtRequest(p) => p.emit(out),
            Pdu::LoginRequest(p) => p.emit(out),
            Pdu::TextRequest(p) => p.emit(out),
            Pdu::DataOut(p) => p.emit(out),
            Pdu::LogoutRequest(p) => p.emit(out),
            Pdu::SnackRequest(p) => p.emit(out),
            Pdu::NopIn(p) => p.emit(out),
            Pdu::ScsiResponse(p) => p.emit(out),
            Pdu::TaskMgmtResponse(p) => p.emit(out),
            Pdu::LoginResponse(p) => p.emit(out),
            Pdu::TextResponse(p) => p.emit(out),
            Pdu::DataIn(p) => p.emit(out),
            Pdu::LogoutResponse(p) => p.emit(out),
            Pdu::R2t(p) => p.emit(out),
            Pdu::AsyncMessage(p) => p.emit(out),
            Pdu::Reject(p) => p.emit(out),
        }
    }

    /// The 48-byte BHS.
    pub fn to_bytes(&self) -> [u8; BHS_LEN] {
        let mut b = [0u8; BHS_LEN];
        self.emit(&mut b);
        b
    }
}

#[cfg(test)]
#[path = "pdu_tests.rs"]
mod tests;
