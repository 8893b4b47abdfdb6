//! The one error type of every parser in this crate.
//!
//! Parse errors describe *malformed bytes*: the caller (the target's controller) decides which
//! NVMe status answers them, usually "invalid field in command" with DNR and the byte offset
//! given here, in the single place that maps errors to statuses.

use thiserror::Error;

/// Why a byte string is not a valid instance of a structure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The buffer is shorter than the structure.
    #[error("{what}: {got} bytes, need {need}")]
    Truncated {
        /// The structure being parsed.
        what: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// The buffer is longer than the structure (trailing bytes are never silently ignored).
    #[error("{what}: {got} bytes, expected exactly {expected}")]
    TrailingBytes {
        /// The structure being parsed.
        what: &'static str,
        /// The structure's exact size.
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
        /// Byte offset of the field inside the structure (reported to hosts as IPO/error location).
        offset: usize,
        /// The offending value.
        value: u64,
    },
    /// The structure was asked of a command with another opcode or command type.
    #[error("{what}: opcode {opcode:#04x} is not this command")]
    WrongOpcode {
        /// The structure being parsed.
        what: &'static str,
        /// The opcode found.
        opcode: u8,
    },
    /// A text field is not valid (not UTF-8/ASCII, not terminated, too long, or empty).
    #[error("{what}: text field {field} (byte {offset}) is invalid: {reason}")]
    InvalidText {
        /// The structure being parsed.
        what: &'static str,
        /// The field's name.
        field: &'static str,
        /// Byte offset of the field inside the structure.
        offset: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl ParseError {
    /// Byte offset of the offending field, where the error names one.
    pub fn offset(&self) -> Option<usize> {
        match self {
            ParseError::InvalidField { offset, .. } | ParseError::InvalidText { offset, .. } => {
                Some(*offset)
            }
            _ => None,
        }
    }
}

/// Checks that `buf` is exactly `len` bytes long.
pub(crate) fn exact(what: &'static str, buf: &[u8], len: usize) -> Result<(), ParseError> {
    if buf.len() < len {
        Err(ParseError::Truncated {
            what,
            need: len,
            got: buf.len(),
        })
    } else if buf.len() > len {
        Err(ParseError::TrailingBytes {
            what,
            expected: len,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Checks that `buf` is at least `len` bytes long (for structures followed by a list).
pub(crate) fn at_least(what: &'static str, buf: &[u8], len: usize) -> Result<(), ParseError> {
    if buf.len() < len {
        Err(ParseError::Truncated {
            what,
            need: len,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Checks that an output buffer can hold `len` bytes; emitting into a short buffer is a caller
/// bug, reported as an error rather than a panic.
pub(crate) fn room(what: &'static str, buf: &[u8], len: usize) -> Result<(), ParseError> {
    exact(what, buf, len)
}
