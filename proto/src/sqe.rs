//! The 64-byte Submission Queue Entry (Base §4.2, Figure 88 "Common Command Format").
//!
//! [`Sqe`] is a checked view over exactly 64 bytes with accessors for the common fields; command
//! specific parsers ([`crate::fabrics`], [`crate::admin`], [`crate::io`]) turn it into typed
//! commands. Every 64-byte string is a valid `Sqe`: validation is the command parsers' job, so
//! the transport can always read the command id and answer.

use crate::bytes::{le16, le32, le64, put_le16, put_le32, put_le64, u8_at};
use crate::error::{exact, ParseError};
use crate::sgl::SglDescriptor;

/// Size of a submission queue entry (IOSQES = 6).
pub const SQE_LEN: usize = 64;

pub(crate) mod field {
    use crate::bytes::Field;
    pub const OPCODE: usize = 0;
    /// Bits 1:0 FUSE, bits 7:6 PSDT.
    pub const FLAGS: usize = 1;
    pub const CID: Field = 2..4;
    pub const NSID: Field = 4..8;
    /// Fabrics command type (overlays NSID byte 0 in fabrics commands).
    pub const FCTYPE: usize = 4;
    pub const CDW2: Field = 8..12;
    pub const CDW3: Field = 12..16;
    pub const MPTR: Field = 16..24;
    pub const DPTR: Field = 24..40;
    /// CDW10 starts here; CDWn is at 40 + 4·(n − 10).
    pub const CDW10: usize = 40;
}

code_newtype! {
    /// PRP or SGL for Data Transfer (SQE byte 1 bits 7:6).
    pub struct Psdt(u8) {
        /// PRPs (not used over fabrics).
        PRP = 0,
        /// SGLs, metadata pointer is a contiguous buffer (what fabrics hosts send).
        SGL_MPTR_CONTIGUOUS = 1,
        /// SGLs, metadata pointer is an SGL segment.
        SGL_MPTR_SGL = 2,
    }
}

/// A submission queue entry: exactly 64 bytes, any content.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Sqe([u8; SQE_LEN]);

impl Default for Sqe {
    fn default() -> Self {
        Sqe([0; SQE_LEN])
    }
}

impl core::fmt::Debug for Sqe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sqe")
            .field("opcode", &format_args!("{:#04x}", self.opcode()))
            .field("cid", &self.cid())
            .field("nsid", &self.nsid())
            .field("psdt", &self.psdt())
            .field("dptr", &self.sgl1())
            .field("cdw10_15", &[10, 11, 12, 13, 14, 15].map(|n| self.cdw(n)))
            .finish()
    }
}

impl Sqe {
    /// Parses exactly 64 bytes (never fails for a 64-byte input).
    pub fn parse(b: &[u8]) -> Result<Sqe, ParseError> {
        exact("SQE", b, SQE_LEN)?;
        let mut a = [0u8; SQE_LEN];
        a.copy_from_slice(b);
        Ok(Sqe(a))
    }

    /// An all-zero entry with the given opcode and command id.
    pub fn new(opcode: u8, cid: u16) -> Sqe {
        let mut s = Sqe::default();
        s.0[field::OPCODE] = opcode;
        s.set_cid(cid);
        s
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; SQE_LEN] {
        &self.0
    }

    /// Mutable raw bytes (for command builders).
    pub fn as_bytes_mut(&mut self) -> &mut [u8; SQE_LEN] {
        &mut self.0
    }

    /// Opcode (byte 0).
    pub fn opcode(&self) -> u8 {
        u8_at(&self.0, field::OPCODE)
    }

    /// Fused operation (byte 1 bits 1:0): 0 normal, 1 first, 2 second.
    pub fn fuse(&self) -> u8 {
        self.0[field::FLAGS] & 0x3
    }

    /// PRP or SGL for data transfer (byte 1 bits 7:6).
    pub fn psdt(&self) -> Psdt {
        Psdt(self.0[field::FLAGS] >> 6)
    }

    /// Sets PSDT.
    pub fn set_psdt(&mut self, p: Psdt) {
        self.0[field::FLAGS] = (self.0[field::FLAGS] & 0x3F) | (p.0 & 0x3) << 6;
    }

    /// Command identifier (bytes 2–3).
    pub fn cid(&self) -> u16 {
        le16(&self.0, field::CID)
    }

    /// Sets the command identifier.
    pub fn set_cid(&mut self, cid: u16) {
        put_le16(&mut self.0, field::CID, cid);
    }

    /// Namespace identifier (bytes 4–7).
    pub fn nsid(&self) -> u32 {
        le32(&self.0, field::NSID)
    }

    /// Sets the namespace identifier.
    pub fn set_nsid(&mut self, nsid: u32) {
        put_le32(&mut self.0, field::NSID, nsid);
    }

    /// Fabrics command type (byte 4), meaningful when the opcode is 0x7F.
    pub fn fctype(&self) -> u8 {
        self.0[field::FCTYPE]
    }

    /// Command dword 2.
    pub fn cdw2(&self) -> u32 {
        le32(&self.0, field::CDW2)
    }

    /// Command dword 3.
    pub fn cdw3(&self) -> u32 {
        le32(&self.0, field::CDW3)
    }

    /// Metadata pointer (bytes 16–23).
    pub fn mptr(&self) -> u64 {
        le64(&self.0, field::MPTR)
    }

    /// Command dword `n` for n in 10..=15; other values read as 0.
    pub fn cdw(&self, n: usize) -> u32 {
        match n {
            10..=15 => {
                let at = field::CDW10 + 4 * (n - 10);
                le32(&self.0, at..at + 4)
            }
            _ => 0,
        }
    }

    /// Sets command dword `n` for n in 10..=15; other values are ignored.
    pub fn set_cdw(&mut self, n: usize, v: u32) {
        if let 10..=15 = n {
            let at = field::CDW10 + 4 * (n - 10);
            put_le32(&mut self.0, at..at + 4, v);
        }
    }

    /// The data pointer's 16 raw bytes.
    pub fn dptr(&self) -> &[u8] {
        &self.0[field::DPTR]
    }

    /// SGL entry 1 (the data pointer as an SGL descriptor). Errors carry the offset inside
    /// the SQE (the descriptor's byte 15 is SQE byte 39), as hosts expect in error locations.
    pub fn sgl1(&self) -> Result<SglDescriptor, ParseError> {
        SglDescriptor::parse(&self.0[field::DPTR]).map_err(|e| match e {
            ParseError::InvalidField {
                what,
                field: f,
                offset,
                value,
            } => ParseError::InvalidField {
                what,
                field: f,
                offset: offset + field::DPTR.start,
                value,
            },
            other => other,
        })
    }

    /// Sets SGL entry 1 and PSDT = SGL.
    pub fn set_sgl1(&mut self, d: &SglDescriptor) -> Result<(), ParseError> {
        d.emit(&mut self.0[field::DPTR])?;
        self.set_psdt(Psdt::SGL_MPTR_CONTIGUOUS);
        Ok(())
    }

    /// Sets the metadata pointer.
    pub fn set_mptr(&mut self, v: u64) {
        put_le64(&mut self.0, field::MPTR, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_fields_at_spec_offsets() {
        let mut raw = [0u8; 64];
        raw[0] = 0x02; // read
        raw[1] = 0x40; // PSDT 01b
        raw[2..4].copy_from_slice(&0xBEEFu16.to_le_bytes());
        raw[4..8].copy_from_slice(&1u32.to_le_bytes());
        raw[16..24].copy_from_slice(&0x1234u64.to_le_bytes());
        raw[39] = 0x40; // keyed SGL
        raw[40..44].copy_from_slice(&0xAAAA_0001u32.to_le_bytes()); // CDW10
        raw[60..64].copy_from_slice(&0x5555_0015u32.to_le_bytes()); // CDW15
        let s = Sqe::parse(&raw).unwrap();
        assert_eq!(s.opcode(), 0x02);
        assert_eq!(s.psdt(), Psdt::SGL_MPTR_CONTIGUOUS);
        assert_eq!(s.cid(), 0xBEEF);
        assert_eq!(s.nsid(), 1);
        assert_eq!(s.mptr(), 0x1234);
        assert_eq!(s.cdw(10), 0xAAAA_0001);
        assert_eq!(s.cdw(15), 0x5555_0015);
        assert_eq!(s.cdw(16), 0);
        assert!(matches!(s.sgl1(), Ok(SglDescriptor::Keyed { .. })));

        let mut b = Sqe::new(0x02, 0xBEEF);
        b.set_psdt(Psdt::SGL_MPTR_CONTIGUOUS);
        b.set_nsid(1);
        b.set_mptr(0x1234);
        b.as_bytes_mut()[39] = 0x40;
        b.set_cdw(10, 0xAAAA_0001);
        b.set_cdw(15, 0x5555_0015);
        assert_eq!(b.as_bytes(), &raw);
    }

    #[test]
    fn length_is_exact() {
        assert!(Sqe::parse(&[0; 63]).is_err());
        assert!(Sqe::parse(&[0; 65]).is_err());
    }
}
