//! [`PduError`], the one error of every PDU parser, and the Reject reason that answers it
//! (RFC 7143 §11.17.1).
//!
//! In full-feature phase a PDU the target cannot accept is answered with a Reject PDU whose
//! reason [`PduError::reject_reason`] gives and whose data segment is the offending header.
//! During login the same errors end the login with status 0x0200 "initiator error" instead
//! (the login state machine does that, see [`crate::iscsi::login`]).

use raidline_proto::code_newtype;
use thiserror::Error;

code_newtype! {
    /// Reason of a Reject PDU (RFC 7143 §11.17.1, byte 2).
    pub struct RejectReason(u8) {
        /// A data digest did not match (not used: digests are None).
        DATA_DIGEST_ERROR = 0x02,
        /// A SNACK cannot be honoured.
        SNACK_REJECT = 0x03,
        /// The PDU breaks the protocol (a SNACK at ErrorRecoveryLevel 0, a data segment over
        /// the negotiated maximum, inconsistent flags, a malformed frame).
        PROTOCOL_ERROR = 0x04,
        /// The opcode is not supported.
        COMMAND_NOT_SUPPORTED = 0x05,
        /// Too many immediate commands.
        IMMEDIATE_COMMAND_REJECT = 0x06,
        /// The task is still in progress.
        TASK_IN_PROGRESS = 0x07,
        /// A DataACK SNACK names data that does not exist.
        INVALID_DATA_ACK = 0x08,
        /// A field of the PDU holds an invalid value.
        INVALID_PDU_FIELD = 0x09,
        /// Out of resources for a long operation.
        LONG_OPERATION_REJECT = 0x0a,
        /// A text negotiation was reset.
        NEGOTIATION_RESET = 0x0b,
        /// The target is waiting for a logout.
        WAITING_FOR_LOGOUT = 0x0c,
    }
}

/// Why bytes are not a valid iSCSI PDU (or part of one).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PduError {
    /// The buffer is shorter than the structure or than the lengths its header declares.
    #[error("{what}: {got} bytes, need {need}")]
    Truncated {
        /// The structure being parsed.
        what: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// The buffer is longer than the structure (or than its declared lengths plus padding).
    #[error("{what}: {got} bytes, expected at most {expected}")]
    TrailingBytes {
        /// The structure being parsed.
        what: &'static str,
        /// The structure's size (with padding, for a whole PDU).
        expected: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// A field holds a value the specification does not allow here.
    #[error("{what}: field {field} (byte {offset}) has invalid value {value:#x}")]
    InvalidField {
        /// The structure being parsed.
        what: &'static str,
        /// The field's name.
        field: &'static str,
        /// Byte offset of the field inside the structure.
        offset: usize,
        /// The offending value.
        value: u64,
    },
    /// Fields that are valid one by one contradict each other or the protocol (T and C both
    /// set in a Login Request, F and C in a Text Request).
    #[error("{what}: protocol error: {reason}")]
    ProtocolError {
        /// The structure being parsed.
        what: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The data segment is longer than the receiver allows (MaxRecvDataSegmentLength).
    #[error("{what}: data segment of {len} bytes exceeds the limit of {max}")]
    DataSegmentTooLong {
        /// The structure being parsed.
        what: &'static str,
        /// DataSegmentLength of the header.
        len: u32,
        /// The receiver's limit.
        max: u32,
    },
    /// No iSCSI opcode this crate knows (answered with Reject reason 0x05).
    #[error("unknown iSCSI opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// The structure was asked of a header with another opcode.
    #[error("{what}: opcode {opcode:#04x} is not this PDU")]
    WrongOpcode {
        /// The structure being parsed.
        what: &'static str,
        /// The opcode found.
        opcode: u8,
    },
}

impl PduError {
    /// The Reject reason that answers this error in full-feature phase (RFC 7143 §11.17.1):
    /// an unknown opcode is "command not supported" (0x05), a bad field "invalid PDU field"
    /// (0x09), everything else (bad framing, contradictory flags, an over-long data segment,
    /// a PDU handed to the wrong parser) "protocol error" (0x04).
    pub fn reject_reason(&self) -> RejectReason {
        match self {
            PduError::UnknownOpcode(_) => RejectReason::COMMAND_NOT_SUPPORTED,
            PduError::InvalidField { .. } => RejectReason::INVALID_PDU_FIELD,
            PduError::Truncated { .. }
            | PduError::TrailingBytes { .. }
            | PduError::ProtocolError { .. }
            | PduError::DataSegmentTooLong { .. }
            | PduError::WrongOpcode { .. } => RejectReason::PROTOCOL_ERROR,
        }
    }

    /// Byte offset of the offending field, where the error names one.
    pub fn offset(&self) -> Option<usize> {
        match self {
            PduError::InvalidField { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}

/// Checks that `buf` is exactly `len` bytes long.
pub(crate) fn exact(what: &'static str, buf: &[u8], len: usize) -> Result<(), PduError> {
    if buf.len() < len {
        Err(PduError::Truncated {
            what,
            need: len,
            got: buf.len(),
        })
    } else if buf.len() > len {
        Err(PduError::TrailingBytes {
            what,
            expected: len,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}
