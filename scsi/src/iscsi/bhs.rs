//! The 48-byte Basic Header Segment (RFC 7143 §11.2.1), the framing of a whole PDU
//! (§11.2: BHS, Additional Header Segments, data segment padded to 4 bytes), the AHS list
//! (§11.2.2) and the 8-byte LUN field (SAM-5 §4.7, RFC 7143 §11.2.1.7).
//!
//! [`Bhs`] is a view over any 48 bytes with accessors for the fields every opcode shares;
//! [`crate::iscsi::pdu`] turns it into the typed PDU of its opcode. Every 48-byte string is a
//! valid `Bhs`, so the transport can always read the opcode, lengths and ITT and answer.

use crate::bytes::{be16, be24, be32, be64, put_be16, put_be24, put_be32};
use raidline_proto::code_newtype;

use super::error::{exact, PduError};

/// Size of the Basic Header Segment.
pub const BHS_LEN: usize = 48;

/// Largest data segment a 24-bit DataSegmentLength can declare.
pub const MAX_DATA_SEGMENT_LEN: u32 = (1 << 24) - 1;

/// Byte offsets of the fields every opcode shares (RFC 7143 §11.2.1).
pub mod field {
    /// Byte 0: bit 6 I (immediate delivery), bits 5-0 opcode.
    pub const OPCODE: usize = 0;
    /// Byte 1: opcode-specific flags (bit 7 is F, final, for most opcodes).
    pub const FLAGS: usize = 1;
    /// Byte 4: TotalAHSLength in 4-byte words.
    pub const TOTAL_AHS_LEN: usize = 4;
    /// Bytes 5-7: DataSegmentLength (24 bits, without padding).
    pub const DATA_SEGMENT_LEN: usize = 5;
    /// Bytes 8-15: LUN or opcode-specific.
    pub const LUN: usize = 8;
    /// Bytes 16-19: Initiator Task Tag.
    pub const ITT: usize = 16;
}

/// Byte 0 bit 6: immediate delivery (initiator PDUs).
pub const IMMEDIATE_BIT: u8 = 0x40;
/// Byte 0 bits 5-0: the opcode.
pub const OPCODE_MASK: u8 = 0x3f;
/// Byte 1 bit 7: F (final), on every opcode that has it.
pub const FINAL_BIT: u8 = 0x80;
/// The reserved Initiator Task Tag (unsolicited target PDUs, NOP-Out answering a NOP-In).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

code_newtype! {
    /// An iSCSI opcode (RFC 7143 §11.2.1.2, byte 0 bits 5-0). Initiator opcodes are below
    /// 0x20, target opcodes 0x20 and above.
    pub struct Opcode(u8) {
        /// NOP-Out (§11.18).
        NOP_OUT = 0x00,
        /// SCSI Command (§11.3).
        SCSI_COMMAND = 0x01,
        /// SCSI Task Management Function Request (§11.5).
        TASK_MGMT_REQUEST = 0x02,
        /// Login Request (§11.12).
        LOGIN_REQUEST = 0x03,
        /// Text Request (§11.10).
        TEXT_REQUEST = 0x04,
        /// SCSI Data-Out (§11.7).
        SCSI_DATA_OUT = 0x05,
        /// Logout Request (§11.14).
        LOGOUT_REQUEST = 0x06,
        /// SNACK Request (§11.16).
        SNACK_REQUEST = 0x10,
        /// NOP-In (§11.19).
        NOP_IN = 0x20,
        /// SCSI Response (§11.4).
        SCSI_RESPONSE = 0x21,
        /// SCSI Task Management Function Response (§11.6).
        TASK_MGMT_RESPONSE = 0x22,
        /// Login Response (§11.13).
        LOGIN_RESPONSE = 0x23,
        /// Text Response (§11.11).
        TEXT_RESPONSE = 0x24,
        /// SCSI Data-In (§11.7).
        SCSI_DATA_IN = 0x25,
        /// Logout Response (§11.15).
        LOGOUT_RESPONSE = 0x26,
        /// Ready To Transfer (§11.8).
        R2T = 0x31,
        /// Asynchronous Message (§11.9).
        ASYNC_MESSAGE = 0x32,
        /// Reject (§11.17).
        REJECT = 0x3f,
    }
}

impl Opcode {
    /// Whether an initiator sends this opcode (0x00-0x1f).
    pub fn is_initiator(self) -> bool {
        self.0 < 0x20
    }
}

/// The 4-byte-aligned length of `len` bytes (a data segment with its padding).
pub fn pad4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// Total length of a PDU with `total_ahs_words` words of AHS and a data segment of
/// `data_segment_len` bytes, padding included: 48 + 4·AHS + pad4(DSL).
pub fn pdu_len(total_ahs_words: u8, data_segment_len: u32) -> usize {
    BHS_LEN + 4 * usize::from(total_ahs_words) + pad4(data_segment_len as usize)
}

/// A Basic Header Segment: exactly 48 bytes, any content.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bhs([u8; BHS_LEN]);

impl Default for Bhs {
    fn default() -> Self {
        Bhs([0; BHS_LEN])
    }
}

impl core::fmt::Debug for Bhs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bhs")
            .field("opcode", &self.opcode())
            .field("immediate", &self.immediate())
            .field("flags", &format_args!("{:#04x}", self.flags()))
            .field("total_ahs_words", &self.total_ahs_words())
            .field("data_segment_len", &self.data_segment_len())
            .field("itt", &format_args!("{:#010x}", self.itt()))
            .finish()
    }
}

impl From<[u8; BHS_LEN]> for Bhs {
    fn from(b: [u8; BHS_LEN]) -> Self {
        Bhs(b)
    }
}

impl Bhs {
    /// Parses exactly 48 bytes (never fails for a 48-byte input).
    pub fn parse(b: &[u8]) -> Result<Bhs, PduError> {
        exact("BHS", b, BHS_LEN)?;
        let mut a = [0u8; BHS_LEN];
        a.copy_from_slice(b);
        Ok(Bhs(a))
    }

    /// Reads the first 48 bytes of a longer buffer (a whole received PDU).
    pub fn from_prefix(b: &[u8]) -> Result<Bhs, PduError> {
        match b.get(..BHS_LEN) {
            Some(h) => Bhs::parse(h),
            None => Err(PduError::Truncated {
                what: "BHS",
                need: BHS_LEN,
                got: b.len(),
            }),
        }
    }

    /// An all-zero header with the given opcode.
    pub fn new(opcode: Opcode) -> Bhs {
        let mut b = Bhs::default();
        b.0[field::OPCODE] = opcode.0 & OPCODE_MASK;
        b
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; BHS_LEN] {
        &self.0
    }

    /// Mutable raw bytes (for builders).
    pub fn as_bytes_mut(&mut self) -> &mut [u8; BHS_LEN] {
        &mut self.0
    }

    /// The opcode (byte 0 bits 5-0).
    pub fn opcode(&self) -> Opcode {
        Opcode(self.0[field::OPCODE] & OPCODE_MASK)
    }

    /// The I bit (byte 0 bit 6): immediate delivery.
    pub fn immediate(&self) -> bool {
        self.0[field::OPCODE] & IMMEDIATE_BIT != 0
    }

    /// The opcode-specific flags (byte 1).
    pub fn flags(&self) -> u8 {
        self.0[field::FLAGS]
    }

    /// TotalAHSLength (byte 4) in 4-byte words.
    pub fn total_ahs_words(&self) -> u8 {
        self.0[field::TOTAL_AHS_LEN]
    }

    /// TotalAHSLength in bytes.
    pub fn total_ahs_len(&self) -> usize {
        4 * usize::from(self.total_ahs_words())
    }

    /// DataSegmentLength (bytes 5-7), without padding.
    pub fn data_segment_len(&self) -> u32 {
        be24(&self.0, field::DATA_SEGMENT_LEN)
    }

    /// Sets DataSegmentLength (values above 2^24 - 1 are cut to 24 bits).
    pub fn set_data_segment_len(&mut self, len: u32) {
        put_be24(
            &mut self.0,
            field::DATA_SEGMENT_LEN,
            len & MAX_DATA_SEGMENT_LEN,
        );
    }

    /// Bytes 8-15 as a big-endian integer: the LUN for the opcodes that carry one.
    pub fn lun(&self) -> u64 {
        be64(&self.0, field::LUN)
    }

    /// Initiator Task Tag (bytes 16-19).
    pub fn itt(&self) -> u32 {
        be32(&self.0, field::ITT)
    }

    /// Total length of the PDU this header announces, padding included.
    pub fn pdu_len(&self) -> usize {
        pdu_len(self.total_ahs_words(), self.data_segment_len())
    }

    /// Checks DataSegmentLength against the receiver's limit.
    pub fn check_data_segment_len(&self, max: u32) -> Result<(), PduError> {
        let len = self.data_segment_len();
        if len > max {
            Err(PduError::DataSegmentTooLong {
                what: "BHS",
                len,
                max,
            })
        } else {
            Ok(())
        }
    }
}

/// A received PDU cut into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PduParts<'a> {
    /// The Basic Header Segment.
    pub bhs: Bhs,
    /// The Additional Header Segments (TotalAHSLength·4 bytes; see [`parse_ahs`]).
    pub ahs: &'a [u8],
    /// The data segment, without padding.
    pub data: &'a [u8],
}

/// Splits a received PDU (BHS, AHS, data segment, padding) into its parts.
///
/// The buffer must hold at least 48 + AHS + DataSegmentLength bytes and at most the padded
/// length: the padding may be absent (iSER carries data segments unpadded, as Linux `ib_iser`
/// sends them) but nothing may follow it. A DataSegmentLength over `max_data_segment_len`
/// is [`PduError::DataSegmentTooLong`]. Digests are not supported (HeaderDigest and
/// DataDigest are always negotiated to None).
pub fn split_pdu(buf: &[u8], max_data_segment_len: u32) -> Result<PduParts<'_>, PduError> {
    const WHAT: &str = "PDU";
    let bhs = Bhs::from_prefix(buf)?;
    bhs.check_data_segment_len(max_data_segment_len)?;
    let ahs_end = BHS_LEN + bhs.total_ahs_len();
    let data_end = ahs_end + bhs.data_segment_len() as usize;
    let padded_end = ahs_end + pad4(bhs.data_segment_len() as usize);
    if buf.len() < data_end {
        return Err(PduError::Truncated {
            what: WHAT,
            need: data_end,
            got: buf.len(),
        });
    }
    if buf.len() > padded_end {
        return Err(PduError::TrailingBytes {
            what: WHAT,
            expected: padded_end,
            got: buf.len(),
        });
    }
    match (buf.get(BHS_LEN..ahs_end), buf.get(ahs_end..data_end)) {
        (Some(ahs), Some(data)) => Ok(PduParts { bhs, ahs, data }),
        _ => Err(PduError::Truncated {
            what: WHAT,
            need: data_end,
            got: buf.len(),
        }),
    }
}

code_newtype! {
    /// Type of an Additional Header Segment (RFC 7143 §11.2.2.1).
    pub struct AhsType(u8) {
        /// Extended CDB: the bytes of a CDB beyond the 16 in the BHS (§11.2.2.3).
        EXTENDED_CDB = 1,
        /// Bidirectional Read Expected Data Transfer Length (§11.2.2.4).
        BIDI_READ_LENGTH = 2,
    }
}

/// One Additional Header Segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahs<'a> {
    /// AHSType (byte 2).
    pub ahs_type: AhsType,
    /// The AHSLength bytes from byte 3 on: the AHS-specific byte followed by the rest
    /// (AHSLength counts byte 3 but neither bytes 0-2 nor the padding).
    pub specific: &'a [u8],
}

/// Parses the AHS list of a PDU (TotalAHSLength·4 bytes): each AHS is a 2-byte AHSLength,
/// the AHSType byte and AHSLength bytes, padded to 4. An AHS that runs past the list is
/// [`PduError::Truncated`].
pub fn parse_ahs(b: &[u8]) -> Result<Vec<Ahs<'_>>, PduError> {
    const WHAT: &str = "AHS";
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < b.len() {
        let (Some(head), Some(&ty)) = (b.get(at..at + 2), b.get(at + 2)) else {
            return Err(PduError::Truncated {
                what: WHAT,
                need: at + 3,
                got: b.len(),
            });
        };
        let len = usize::from(be16(head, 0));
        let end = at + 3 + len;
        let Some(specific) = b.get(at + 3..end) else {
            return Err(PduError::Truncated {
                what: WHAT,
                need: end,
                got: b.len(),
            });
        };
        out.push(Ahs {
            ahs_type: AhsType(ty),
            specific,
        });
        at = pad4(end);
    }
    Ok(out)
}

/// Builds an AHS: length, type, then `specific` (starting with the AHS-specific byte),
/// padded to 4 bytes. `specific` longer than 65535 bytes is cut.
pub fn emit_ahs(ahs_type: AhsType, specific: &[u8]) -> Vec<u8> {
    let specific = specific.get(..usize::from(u16::MAX)).unwrap_or(specific);
    let mut out = vec![0u8; pad4(3 + specific.len())];
    put_be16(&mut out, 0, specific.len() as u16);
    out[2] = ahs_type.0;
    out[3..3 + specific.len()].copy_from_slice(specific);
    out
}

/// The AHS of a SCSI Command: the whole CDB when it is longer than 16 bytes, and the expected
/// read length of a bidirectional command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandAhs {
    /// The CDB bytes beyond the 16 in the BHS (from an Extended CDB AHS).
    pub extended_cdb: Option<Vec<u8>>,
    /// Bidirectional Read Expected Data Transfer Length.
    pub bidi_read_length: Option<u32>,
}

impl CommandAhs {
    const WHAT: &'static str = "SCSI Command AHS";

    /// Parses the AHS list of a SCSI Command. An AHS type other than 1 and 2, either of them
    /// twice, or a bidirectional length AHS whose AHSLength is not 5 is
    /// [`PduError::InvalidField`] (offset inside the AHS list).
    pub fn parse(b: &[u8]) -> Result<CommandAhs, PduError> {
        let mut out = CommandAhs::default();
        let mut at = 0usize;
        for a in parse_ahs(b)? {
            let invalid = |field, offset, value| PduError::InvalidField {
                what: Self::WHAT,
                field,
                offset,
                value,
            };
            match a.ahs_type {
                AhsType::EXTENDED_CDB if out.extended_cdb.is_none() => {
                    out.extended_cdb = Some(a.specific.get(1..).unwrap_or_default().to_vec());
                }
                AhsType::BIDI_READ_LENGTH if out.bidi_read_length.is_none() => {
                    if a.specific.len() != 5 {
                        return Err(invalid("AHSLength", at, a.specific.len() as u64));
                    }
                    out.bidi_read_length = Some(be32(a.specific, 1));
                }
                t => return Err(invalid("AHSType", at + 2, u64::from(t.0))),
            }
            at = pad4(at + 3 + a.specific.len());
        }
        Ok(out)
    }

    /// The AHS list bytes (extended CDB first, then the bidirectional length).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(cdb) = &self.extended_cdb {
            let mut s = Vec::with_capacity(cdb.len() + 1);
            s.push(0);
            s.extend_from_slice(cdb);
            out.extend(emit_ahs(AhsType::EXTENDED_CDB, &s));
        }
        if let Some(len) = self.bidi_read_length {
            let mut s = [0u8; 5];
            put_be32(&mut s, 1, len);
            out.extend(emit_ahs(AhsType::BIDI_READ_LENGTH, &s));
        }
        out
    }
}

// LUN addressing is SAM's, shared with REPORT LUNS: it lives in `crate::sbc`.
pub use crate::sbc::{
    decode_lun, encode_lun, LUN_METHOD_FLAT, LUN_METHOD_PERIPHERAL, MAX_FLAT_LUN,
};
