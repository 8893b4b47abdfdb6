//! iSER (RFC 7145; Linux `include/scsi/iser.h`): the 28-byte iSER header in front of every
//! iSCSI PDU carried in an RDMA SEND, the RDMA CM private data both sides exchange when the
//! connection is set up, and splitting a received SEND into its parts.
//!
//! On InfiniBand and RoCE the iSER Hello exchange is not used (RFC 7145: it serves iWARP
//! connections; Linux never sends it), so a header whose opcode is Hello
//! or HelloReply is an error here.

use raidline_proto::code_newtype;
use thiserror::Error;

use crate::bytes::{be32, be64, put_be32, put_be64};
use crate::iscsi::bhs::{split_pdu, Bhs};
use crate::iscsi::error::PduError;

/// Size of the iSER header (`struct iser_ctrl`).
pub const ISER_HDR_LEN: usize = 28;
/// Size of the RDMA CM private data (`struct iser_cm_hdr`).
pub const ISER_CM_HDR_LEN: usize = 4;

/// Byte offsets of the iSER header fields (RFC 7145 §9, `struct iser_ctrl`).
pub mod field {
    /// Byte 0: opcode (bits 7-4) and the WSV/RSV flags.
    pub const FLAGS: usize = 0;
    /// Bytes 4-7: Write STag.
    pub const WRITE_STAG: usize = 4;
    /// Bytes 8-15: Write Base Offset (tagged offset / VA).
    pub const WRITE_VA: usize = 8;
    /// Bytes 16-19: Read STag.
    pub const READ_STAG: usize = 16;
    /// Bytes 20-27: Read Base Offset.
    pub const READ_VA: usize = 20;
}

/// Byte 0 bit 3: the Write STag and offset are valid (`ISER_WSV`): the target reads the
/// command's write data with RDMA READs from there.
pub const ISER_WSV: u8 = 0x08;
/// Byte 0 bit 2: the Read STag and offset are valid (`ISER_RSV`): the target writes the read
/// data with RDMA WRITEs there.
pub const ISER_RSV: u8 = 0x04;

code_newtype! {
    /// The iSER opcode, byte 0 bits 7-4 (RFC 7145 §9: `ISCSI_CTRL` 0x10, `ISER_HELLO` 0x20,
    /// `ISER_HELLORPLY` 0x30 in Linux, shifted down here).
    pub struct IserOpcode(u8) {
        /// iSCSI control-type PDU: an iSCSI PDU follows.
        ISCSI_CONTROL = 0x1,
        /// iSER Hello (iWARP only).
        HELLO = 0x2,
        /// iSER HelloReply (iWARP only).
        HELLO_REPLY = 0x3,
    }
}

/// Why bytes are not a valid iSER header or SEND.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IserError {
    /// The buffer is shorter than the iSER header.
    #[error("{what}: {got} bytes, need {need}")]
    Truncated {
        /// The structure being parsed.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// The buffer is longer than the iSER header (which has a fixed size).
    #[error("{what}: {got} bytes, expected exactly {expected}")]
    TrailingBytes {
        /// The structure being parsed.
        what: &'static str,
        /// Its size.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// The opcode is not iSCSI control (Hello, HelloReply, or an undefined one).
    #[error("iSER header: unsupported opcode {0:?}")]
    UnsupportedOpcode(IserOpcode),
    /// The iSCSI PDU after the header is malformed (offsets count from the BHS).
    #[error("iSCSI PDU in iSER SEND: {0}")]
    Pdu(#[from] PduError),
}

/// A remote buffer the initiator registered: STag (rkey) and base offset (VA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RemoteBuffer {
    /// The steering tag (memory region rkey).
    pub stag: u32,
    /// The base offset: a virtual address (zero-based when ZBVA is used).
    pub va: u64,
}

/// The iSER header of an iSCSI control-type PDU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IserHeader {
    /// Write STag and offset (WSV): where the target reads a command's write data.
    pub write: Option<RemoteBuffer>,
    /// Read STag and offset (RSV): where the target writes a command's read data.
    pub read: Option<RemoteBuffer>,
}

impl IserHeader {
    const WHAT: &'static str = "iSER header";

    /// Parses exactly 28 bytes. An opcode other than iSCSI control is
    /// [`IserError::UnsupportedOpcode`]. Reserved bits and bytes are ignored, and so are the
    /// STag and offset whose valid bit is clear.
    pub fn parse(b: &[u8]) -> Result<IserHeader, IserError> {
        if b.len() > ISER_HDR_LEN {
            return Err(IserError::TrailingBytes {
                what: Self::WHAT,
                expected: ISER_HDR_LEN,
                got: b.len(),
            });
        }
        let Some(b) = b.get(..ISER_HDR_LEN) else {
            return Err(IserError::Truncated {
                what: Self::WHAT,
                need: ISER_HDR_LEN,
                got: b.len(),
            });
        };
        let flags = b[field::FLAGS];
        let op = IserOpcode(flags >> 4);
        if op != IserOpcode::ISCSI_CONTROL {
            return Err(IserError::UnsupportedOpcode(op));
        }
        let buf = |valid: u8, stag, va| {
            (flags & valid != 0).then(|| RemoteBuffer {
                stag: be32(b, stag),
                va: be64(b, va),
            })
        };
        Ok(IserHeader {
            write: buf(ISER_WSV, field::WRITE_STAG, field::WRITE_VA),
            read: buf(ISER_RSV, field::READ_STAG, field::READ_VA),
        })
    }

    /// Writes the 28 bytes: opcode iSCSI control, the valid bits, zeroes where no buffer is.
    pub fn emit(&self, out: &mut [u8; ISER_HDR_LEN]) {
        *out = [0; ISER_HDR_LEN];
        let mut flags = IserOpcode::ISCSI_CONTROL.0 << 4;
        if let Some(w) = self.write {
            flags |= ISER_WSV;
            put_be32(out, field::WRITE_STAG, w.stag);
            put_be64(out, field::WRITE_VA, w.va);
        }
        if let Some(r) = self.read {
            flags |= ISER_RSV;
            put_be32(out, field::READ_STAG, r.stag);
            put_be64(out, field::READ_VA, r.va);
        }
        out[field::FLAGS] = flags;
    }

    /// The 28 bytes.
    pub fn to_bytes(&self) -> [u8; ISER_HDR_LEN] {
        let mut b = [0u8; ISER_HDR_LEN];
        self.emit(&mut b);
        b
    }
}

/// The RDMA CM private data of iSER (RFC 7145 §9, `struct iser_cm_hdr`): one flags byte and
/// three reserved bytes, in the initiator's connect request and in the target's accept.
///
/// Parsing is total: CM pads private data, so only the first byte is read; empty private data
/// reads as no flags (both features supported), which is what Linux `isert` does when the
/// request carries none. The flags byte is kept whole, reserved bits included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmPrivateData {
    /// The flags byte.
    pub flags: u8,
}

impl CmPrivateData {
    /// Initiator: it cannot use zero-based virtual addresses (`ISER_ZBVA_NOT_SUP`);
    /// target: it does not use them (`ISERT_ZBVA_NOT_USED`).
    pub const ZBVA_NOT_SUPPORTED: u8 = 0x80;
    /// Initiator: it does not support Send with Invalidate (`ISER_SEND_W_INV_NOT_SUP`);
    /// target: it does not use it (`ISERT_SEND_W_INV_NOT_USED`).
    pub const SEND_W_INV_NOT_SUPPORTED: u8 = 0x40;

    /// Reads the flags from the first byte of any private data (see the type's doc).
    pub fn parse(b: &[u8]) -> CmPrivateData {
        CmPrivateData {
            flags: b.first().copied().unwrap_or(0),
        }
    }

    /// The target's answer in its CM accept: it uses neither zero-based addressing nor remote
    /// invalidation (0xC0, as Linux `isert` answers without remote invalidation).
    pub fn target_answer() -> CmPrivateData {
        CmPrivateData {
            flags: Self::ZBVA_NOT_SUPPORTED | Self::SEND_W_INV_NOT_SUPPORTED,
        }
    }

    /// Whether the ZBVA-not-supported flag is set: the VAs in iSER headers are absolute.
    pub fn zbva_not_supported(self) -> bool {
        self.flags & Self::ZBVA_NOT_SUPPORTED != 0
    }

    /// Whether the Send-with-Invalidate-not-supported flag is set.
    pub fn send_with_invalidate_not_supported(self) -> bool {
        self.flags & Self::SEND_W_INV_NOT_SUPPORTED != 0
    }

    /// The 4 bytes (flags, then three zero bytes).
    pub fn to_bytes(self) -> [u8; ISER_CM_HDR_LEN] {
        [self.flags, 0, 0, 0]
    }
}

/// A received iSER SEND cut into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IserPdu<'a> {
    /// The iSER header.
    pub header: IserHeader,
    /// The iSCSI BHS.
    pub bhs: Bhs,
    /// The AHS bytes.
    pub ahs: &'a [u8],
    /// The data segment (iSER does not pad it; padding that is present is dropped).
    pub data: &'a [u8],
}

/// Splits a received SEND payload into iSER header, BHS, AHS and data segment. Errors: a
/// payload shorter than the iSER header or the BHS, a header that is not iSCSI control, and
/// every framing error of [`split_pdu`] (offsets and lengths there count from the BHS).
pub fn split_send(payload: &[u8], max_data_segment_len: u32) -> Result<IserPdu<'_>, IserError> {
    let (Some(hdr), Some(pdu)) = (payload.get(..ISER_HDR_LEN), payload.get(ISER_HDR_LEN..)) else {
        return Err(IserError::Truncated {
            what: "iSER SEND",
            need: ISER_HDR_LEN,
            got: payload.len(),
        });
    };
    let header = IserHeader::parse(hdr)?;
    let parts = split_pdu(pdu, max_data_segment_len)?;
    Ok(IserPdu {
        header,
        bhs: parts.bhs,
        ahs: parts.ahs,
        data: parts.data,
    })
}

/// Builds a SEND payload: iSER header, BHS, AHS and data segment (unpadded, as iSER sends).
pub fn build_send(header: &IserHeader, bhs: &[u8; 48], ahs: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ISER_HDR_LEN + 48 + ahs.len() + data.len());
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(bhs);
    out.extend_from_slice(ahs);
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
#[path = "iser_tests.rs"]
mod tests;
