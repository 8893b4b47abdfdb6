//! Login and text `key=value` data (RFC 7143 §6.1): pairs separated by NUL bytes, keys of at
//! most 63 bytes of `[A-Za-z0-9.+@_-]` starting with a capital letter, UTF-8 values; and the
//! [`TextAssembler`] that joins the data segments of PDUs sent with the C (continue) bit.
//!
//! Leniencies (each seen from some initiator or allowed by the RFC's grammar): empty entries
//! between NULs (padding sent inside the data segment) are skipped; `#` is accepted in keys,
//! as the RFC's `X#` private-extension keys use it; empty values are kept (`SendTargets=`).

use thiserror::Error;

use super::error::RejectReason;
use super::pdu::LoginStatus;

/// Longest key (RFC 7143 §6.1: 63 bytes).
pub const MAX_KEY_LEN: usize = 63;
/// Longest value of most keys (RFC 7143 §6.1: 255 bytes).
pub const MAX_SHORT_VALUE_LEN: usize = 255;
/// Default longest value [`parse_text`] accepts: 8192 bytes, the longest any key allows
/// (RFC 7143 §6.1, e.g. CHAP binary values and long TargetAddress lists).
pub const DEFAULT_MAX_VALUE_LEN: usize = 8192;
/// Default limit of [`TextAssembler`]: 64 KiB of text across continued PDUs.
pub const DEFAULT_MAX_TEXT_LEN: usize = 64 * 1024;

/// One `key=value` pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value (possibly empty).
    pub value: String,
}

impl KeyValue {
    /// A pair from anything string-like.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// Why login or text data is not valid `key=value` text. Offsets count from the start of
/// the (assembled) text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TextError {
    /// A pair has no `=`.
    #[error("text byte {offset}: no '=' in pair")]
    MissingEquals {
        /// Offset of the pair.
        offset: usize,
    },
    /// A pair starts with `=`.
    #[error("text byte {offset}: empty key")]
    EmptyKey {
        /// Offset of the pair.
        offset: usize,
    },
    /// A key is longer than 63 bytes.
    #[error("text byte {offset}: key of {len} bytes (at most 63)")]
    KeyTooLong {
        /// Offset of the pair.
        offset: usize,
        /// The key's length.
        len: usize,
    },
    /// A key holds a byte outside `[A-Za-z0-9.+@_#-]` or does not start with a capital.
    #[error("text byte {offset}: invalid key byte {byte:#04x}")]
    InvalidKeyChar {
        /// Offset of the byte.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// A value is longer than allowed.
    #[error("key {key}: value of {len} bytes (at most {max})")]
    ValueTooLong {
        /// The key.
        key: String,
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value is not UTF-8.
    #[error("text byte {offset}: value is not UTF-8")]
    NotUtf8 {
        /// Offset of the value.
        offset: usize,
    },
    /// A key appears twice in one exchange (RFC 7143 §6.1: a protocol error).
    #[error("key {key} given twice")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// The last pair is not NUL-terminated and the PDU did not have the C bit.
    #[error("text byte {offset}: last pair not NUL-terminated")]
    Unterminated {
        /// Offset of the pair.
        offset: usize,
    },
    /// Continued text grew past the assembler's limit.
    #[error("continued text of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Length the text would have.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl TextError {
    /// The login status that answers this error during login: initiator error (0x0200).
    pub fn login_status(&self) -> LoginStatus {
        LoginStatus::INITIATOR_ERROR
    }

    /// The Reject reason that answers it in a full-feature Text Request: protocol error.
    pub fn reject_reason(&self) -> RejectReason {
        RejectReason::PROTOCOL_ERROR
    }
}

/// Whether `b` may appear in a key (RFC 7143 §6.1, plus `#` for `X#` keys).
pub fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'@' | b'_' | b'#')
}

/// Parses complete text (every pair NUL-terminated) into pairs in order. Values longer than
/// `max_value_len` bytes, a key given twice, and every syntax error are [`TextError`]s.
pub fn parse_text(data: &[u8], max_value_len: usize) -> Result<Vec<KeyValue>, TextError> {
    let mut out: Vec<KeyValue> = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let rest = data.get(at..).unwrap_or_default();
        let Some(end) = rest.iter().position(|&c| c == 0) else {
            return Err(TextError::Unterminated { offset: at });
        };
        let pair = rest.get(..end).unwrap_or_default();
        if !pair.is_empty() {
            let kv = parse_pair(pair, at, max_value_len)?;
            if out.iter().any(|p| p.key == kv.key) {
                return Err(TextError::DuplicateKey { key: kv.key });
            }
            out.push(kv);
        }
        at += end + 1;
    }
    Ok(out)
}

fn parse_pair(pair: &[u8], offset: usize, max_value_len: usize) -> Result<KeyValue, TextError> {
    let eq = pair
        .iter()
        .position(|&c| c == b'=')
        .ok_or(TextError::MissingEquals { offset })?;
    let (key, value) = (
        pair.get(..eq).unwrap_or_default(),
        pair.get(eq + 1..).unwrap_or_default(),
    );
    check_key(key, offset)?;
    // The key is ASCII, checked above.
    let key = String::from_utf8_lossy(key).into_owned();
    if value.len() > max_value_len {
        return Err(TextError::ValueTooLong {
            key,
            len: value.len(),
            max: max_value_len,
        });
    }
    let value = core::str::from_utf8(value)
        .map_err(|_| TextError::NotUtf8 {
            offset: offset + eq + 1,
        })?
        .to_owned();
    Ok(KeyValue { key, value })
}

/// Checks a key's syntax; `offset` is where it starts in the text.
pub fn check_key(key: &[u8], offset: usize) -> Result<(), TextError> {
    match key.first() {
        None => return Err(TextError::EmptyKey { offset }),
        Some(&c) if !c.is_ascii_uppercase() => {
            return Err(TextError::InvalidKeyChar { offset, byte: c })
        }
        _ => {}
    }
    if key.len() > MAX_KEY_LEN {
        return Err(TextError::KeyTooLong {
            offset,
            len: key.len(),
        });
    }
    match key.iter().position(|&c| !is_key_byte(c)) {
        Some(i) => Err(TextError::InvalidKeyChar {
            offset: offset + i,
            byte: key.get(i).copied().unwrap_or_default(),
        }),
        None => Ok(()),
    }
}

/// The text of `pairs`: `key=value` each followed by a NUL.
pub fn emit_text(pairs: &[KeyValue]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pairs.iter().map(|p| p.key.len() + p.value.len() + 2).sum());
    for p in pairs {
        out.extend_from_slice(p.key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(p.value.as_bytes());
        out.push(0);
    }
    out
}

/// The value of `key` in `pairs`, if present.
pub fn get<'a>(pairs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|p| p.key == key)
        .map(|p| p.value.as_str())
}

/// Joins the data segments of PDUs sent with the C bit (RFC 7143 §6.1, §11.10.2): a pair may
/// be split anywhere across PDUs, so the text is parsed only once the PDU without C arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextAssembler {
    buf: Vec<u8>,
    limit: usize,
    pending: bool,
}

impl Default for TextAssembler {
    fn default() -> Self {
        TextAssembler::new(DEFAULT_MAX_TEXT_LEN)
    }
}

impl TextAssembler {
    /// An empty assembler accepting at most `limit` bytes of text.
    pub fn new(limit: usize) -> TextAssembler {
        TextAssembler {
            buf: Vec::new(),
            limit,
            pending: false,
        }
    }

    /// Adds one PDU's data segment. With `cont` (the C bit) the text is incomplete and
    /// `Ok(None)` comes back; without it the whole text comes back and the assembler is empty
    /// again. Text past the limit is [`TextError::TooLong`] (and the assembler is reset).
    pub fn push(&mut self, data: &[u8], cont: bool) -> Result<Option<Vec<u8>>, TextError> {
        let len = self.buf.len().saturating_add(data.len());
        if len > self.limit {
            self.reset();
            return Err(TextError::TooLong {
                len,
                max: self.limit,
            });
        }
        self.buf.extend_from_slice(data);
        if cont {
            self.pending = true;
            Ok(None)
        } else {
            self.pending = false;
            Ok(Some(core::mem::take(&mut self.buf)))
        }
    }

    /// Whether a continued text is waiting for its next PDU.
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// Drops any partial text.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pending = false;
    }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
