//! Admin commands a fabrics controller serves (Base §5): typed views parsed from an [`Sqe`] and
//! built back into one.
//!
//! [`Identify`], [`GetLogPage`], [`GetFeatures`], [`SetFeatures`], [`KeepAlive`],
//! [`AsyncEventRequest`] and [`Abort`], plus [`AdminCommand`] to dispatch on the opcode.
//!
//! Each `parse` checks the opcode ([`ParseError::WrongOpcode`] otherwise) and rejects the field
//! encodings the specification makes invalid, reporting the SQE byte offset for the error
//! location: Get Features SEL 4–7 (byte 41), a Get Log Page offset that is not dword aligned or
//! overflows with the length (byte 48). Reserved fields are not checked: the specification lets
//! controllers ignore them, and later revisions give them meaning (UUID index, CNS specific
//! identifiers). Codes chosen by the host (CNS, LID, FID, CSI) are kept even when unknown, so
//! the controller can answer exactly that value. The fused-operation bits and PSDT are common to
//! all commands and are the transport's to check.
//!
//! `parse(to_sqe(v)) == v` for every view `v` whose fields are within their widths.

use crate::error::ParseError;
use crate::features::{FeatureId, FeatureSelect};
use crate::identify::{Cns, Csi};
use crate::log::LogPageId;
use crate::opcode::AdminOpcode;
use crate::sgl::SglDescriptor;
use crate::sqe::Sqe;

/// SQE byte offsets of the admin command fields (Base Figures 168, 197, 272, 316, 325).
pub mod field {
    /// Identify CNS (CDW10 bits 7:0).
    pub const IDENTIFY_CNS: usize = 40;
    /// Identify CNTID (CDW10 bits 31:16).
    pub const IDENTIFY_CNTID: usize = 42;
    /// Identify CNS Specific Identifier (CDW11 bits 15:0).
    pub const IDENTIFY_CNSSID: usize = 44;
    /// Identify CSI (CDW11 bits 31:24).
    pub const IDENTIFY_CSI: usize = 47;
    /// UUID Index (CDW14 bits 6:0) of Identify, Get Log Page and Get/Set Features.
    pub const UUID_INDEX: usize = 56;
    /// Get Log Page LID (CDW10 bits 7:0).
    pub const LOG_LID: usize = 40;
    /// Get Log Page LSP (CDW10 bits 14:8) and RAE (bit 15).
    pub const LOG_LSP_RAE: usize = 41;
    /// Get Log Page NUMDL (CDW10 bits 31:16).
    pub const LOG_NUMDL: usize = 42;
    /// Get Log Page NUMDU (CDW11 bits 15:0).
    pub const LOG_NUMDU: usize = 44;
    /// Get Log Page LSI (CDW11 bits 31:16).
    pub const LOG_LSI: usize = 46;
    /// Get Log Page LPOL/LPOU (CDW12–13).
    pub const LOG_LPO: usize = 48;
    /// Get Log Page OT (CDW14 bit 23).
    pub const LOG_OT: usize = 58;
    /// Get Log Page CSI (CDW14 bits 31:24).
    pub const LOG_CSI: usize = 59;
    /// Get/Set Features FID (CDW10 bits 7:0).
    pub const FEATURE_FID: usize = 40;
    /// Get Features SEL (CDW10 bits 10:8).
    pub const FEATURE_SEL: usize = 41;
    /// Set Features SV (CDW10 bit 31).
    pub const FEATURE_SV: usize = 43;
    /// Abort SQID (CDW10 bits 15:0).
    pub const ABORT_SQID: usize = 40;
    /// Abort CID (CDW10 bits 31:16).
    pub const ABORT_CID: usize = 42;
}

/// Checks the opcode of `sqe`.
fn expect(sqe: &Sqe, op: AdminOpcode, what: &'static str) -> Result<(), ParseError> {
    if sqe.opcode() == op.0 {
        Ok(())
    } else {
        Err(ParseError::WrongOpcode {
            what,
            opcode: sqe.opcode(),
        })
    }
}

/// A new SQE with `op`, `cid` and `nsid`.
fn admin_sqe(op: AdminOpcode, cid: u16, nsid: u32) -> Sqe {
    let mut s = Sqe::new(op.0, cid);
    s.set_nsid(nsid);
    s
}

/// Identify (opcode 06h; Base §5.17, Figure 272).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identify {
    /// Command identifier.
    pub cid: u16,
    /// Namespace identifier (meaning depends on CNS).
    pub nsid: u32,
    /// Where the 4096-byte data structure goes.
    pub sgl: SglDescriptor,
    /// Controller or Namespace Structure (CDW10 bits 7:0).
    pub cns: Cns,
    /// Controller Identifier (CDW10 bits 31:16), for the controller-list CNS values.
    pub cntid: u16,
    /// CNS Specific Identifier (CDW11 bits 15:0): NVM set, endurance group or domain id.
    pub cnssid: u16,
    /// Command Set Identifier (CDW11 bits 31:24), for the command-set specific CNS values.
    pub csi: Csi,
    /// UUID Index (CDW14 bits 6:0).
    pub uuid_index: u8,
}

impl Identify {
    const WHAT: &'static str = "Identify";

    /// A plain Identify for `cns` and `nsid` (CNTID 0, NVM command set).
    pub fn new(cid: u16, cns: Cns, nsid: u32, sgl: SglDescriptor) -> Identify {
        Identify {
            cid,
            nsid,
            sgl,
            cns,
            cntid: 0,
            cnssid: 0,
            csi: Csi::NVM,
            uuid_index: 0,
        }
    }

    /// Parses an Identify command.
    pub fn parse(sqe: &Sqe) -> Result<Identify, ParseError> {
        expect(sqe, AdminOpcode::IDENTIFY, Self::WHAT)?;
        let (c10, c11) = (sqe.cdw(10), sqe.cdw(11));
        Ok(Identify {
            cid: sqe.cid(),
            nsid: sqe.nsid(),
            sgl: sqe.sgl1()?,
            cns: Cns(c10 as u8),
            cntid: (c10 >> 16) as u16,
            cnssid: c11 as u16,
            csi: Csi((c11 >> 24) as u8),
            uuid_index: (sqe.cdw(14) & 0x7F) as u8,
        })
    }

    /// Builds the SQE (PSDT set to SGL). The UUID index is cut to 7 bits.
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let mut s = admin_sqe(AdminOpcode::IDENTIFY, self.cid, self.nsid);
        s.set_sgl1(&self.sgl)?;
        s.set_cdw(10, u32::from(self.cns.0) | u32::from(self.cntid) << 16);
        s.set_cdw(11, u32::from(self.cnssid) | u32::from(self.csi.0) << 24);
        s.set_cdw(14, u32::from(self.uuid_index & 0x7F));
        Ok(s)
    }
}

/// Get Log Page (opcode 02h; Base §5.16, Figures 197–201).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetLogPage {
    /// Command identifier.
    pub cid: u16,
    /// Namespace identifier (FFFFFFFFh or 0 for controller-wide pages).
    pub nsid: u32,
    /// Where the data goes.
    pub sgl: SglDescriptor,
    /// Log Page Identifier (CDW10 bits 7:0).
    pub lid: LogPageId,
    /// Log Specific Parameter (CDW10 bits 14:8), e.g. [`crate::log::ANA_LSP_RGO`].
    pub lsp: u8,
    /// Retain Asynchronous Event (CDW10 bit 15): reading does not clear the pending event.
    pub rae: bool,
    /// Number of dwords to return, 0-based: NUMDU (CDW11 15:0) << 16 | NUMDL (CDW10 31:16).
    pub numd: u32,
    /// Log Specific Identifier (CDW11 bits 31:16).
    pub lsi: u16,
    /// Log Page Offset (CDW13:CDW12): a byte offset, or an index when `offset_is_index`.
    pub offset: u64,
    /// Offset Type (CDW14 bit 23): the offset is an index into the page's list of entries.
    pub offset_is_index: bool,
    /// UUID Index (CDW14 bits 6:0).
    pub uuid_index: u8,
    /// Command Set Identifier (CDW14 bits 31:24).
    pub csi: Csi,
}

impl GetLogPage {
    const WHAT: &'static str = "Get Log Page";

    /// A Get Log Page reading `len` bytes of `lid` from byte `offset` (RAE clear, LSP 0), or
    /// `None` if `len` is not a non-zero multiple of 4 up to 16 GiB, or `offset` is not a
    /// multiple of 4.
    pub fn read(
        cid: u16,
        lid: LogPageId,
        nsid: u32,
        offset: u64,
        len: u64,
        sgl: SglDescriptor,
    ) -> Option<GetLogPage> {
        if len == 0 || len % 4 != 0 || offset % 4 != 0 {
            return None;
        }
        let numd = u32::try_from(len / 4 - 1).ok()?;
        Some(GetLogPage {
            cid,
            nsid,
            sgl,
            lid,
            lsp: 0,
            rae: false,
            numd,
            lsi: 0,
            offset,
            offset_is_index: false,
            uuid_index: 0,
            csi: Csi::NVM,
        })
    }

    /// Parses a Get Log Page command. With a byte offset (OT clear), an offset that is not
    /// dword aligned, or whose end (offset + length) overflows 64 bits, is
    /// [`ParseError::InvalidField`] at byte 48.
    pub fn parse(sqe: &Sqe) -> Result<GetLogPage, ParseError> {
        expect(sqe, AdminOpcode::GET_LOG_PAGE, Self::WHAT)?;
        let (c10, c11, c14) = (sqe.cdw(10), sqe.cdw(11), sqe.cdw(14));
        let offset = u64::from(sqe.cdw(12)) | u64::from(sqe.cdw(13)) << 32;
        let v = GetLogPage {
            cid: sqe.cid(),
            nsid: sqe.nsid(),
            sgl: sqe.sgl1()?,
            lid: LogPageId(c10 as u8),
            lsp: ((c10 >> 8) & 0x7F) as u8,
            rae: c10 & (1 << 15) != 0,
            numd: (c10 >> 16) | (c11 & 0xFFFF) << 16,
            lsi: (c11 >> 16) as u16,
            offset,
            offset_is_index: c14 & (1 << 23) != 0,
            uuid_index: (c14 & 0x7F) as u8,
            csi: Csi((c14 >> 24) as u8),
        };
        if !v.offset_is_index && (offset % 4 != 0 || offset.checked_add(v.byte_len()).is_none()) {
            return Err(ParseError::InvalidField {
                what: Self::WHAT,
                field: "lpo",
                offset: field::LOG_LPO,
                value: offset,
            });
        }
        Ok(v)
    }

    /// Builds the SQE (PSDT set to SGL). LSP and the UUID index are cut to 7 bits.
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let mut s = admin_sqe(AdminOpcode::GET_LOG_PAGE, self.cid, self.nsid);
        s.set_sgl1(&self.sgl)?;
        s.set_cdw(
            10,
            u32::from(self.lid.0)
                | u32::from(self.lsp & 0x7F) << 8
                | u32::from(self.rae) << 15
                | (self.numd & 0xFFFF) << 16,
        );
        s.set_cdw(11, self.numd >> 16 | u32::from(self.lsi) << 16);
        s.set_cdw(12, self.offset as u32);
        s.set_cdw(13, (self.offset >> 32) as u32);
        s.set_cdw(
            14,
            u32::from(self.uuid_index & 0x7F)
                | u32::from(self.offset_is_index) << 23
                | u32::from(self.csi.0) << 24,
        );
        Ok(s)
    }

    /// Bytes requested: (NUMD + 1) × 4, at most 16 GiB.
    pub fn byte_len(&self) -> u64 {
        (u64::from(self.numd) + 1) * 4
    }

    /// The requested byte range as (offset, length), or `None` when the offset is an index.
    pub fn byte_range(&self) -> Option<(u64, u64)> {
        (!self.offset_is_index).then_some((self.offset, self.byte_len()))
    }

    /// The part of a whole log page `page` this command reads: from the offset to the end of
    /// the request or of the page, whichever comes first. The controller returns these bytes
    /// and zero-fills the rest of [`Self::byte_len`]. An offset past the end of the page, or an
    /// index offset, is [`ParseError::InvalidField`] at byte 48 (the host gets "invalid field").
    pub fn slice<'a>(&self, page: &'a [u8]) -> Result<&'a [u8], ParseError> {
        let bad = ParseError::InvalidField {
            what: Self::WHAT,
            field: "lpo",
            offset: field::LOG_LPO,
            value: self.offset,
        };
        let (offset, len) = self.byte_range().ok_or(bad.clone())?;
        let start = usize::try_from(offset).map_err(|_| bad.clone())?;
        if start > page.len() {
            return Err(bad);
        }
        // Bounded by page.len(), so the cast back to usize is lossless.
        let end = offset.saturating_add(len).min(page.len() as u64) as usize;
        Ok(&page[start..end])
    }
}

/// Get Features (opcode 0Ah; Base §5.15, Figure 191).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFeatures {
    /// Command identifier.
    pub cid: u16,
    /// Namespace identifier, for namespace-specific features.
    pub nsid: u32,
    /// Where data goes, for features that return a data structure (Timestamp, Host Behavior).
    pub sgl: SglDescriptor,
    /// Feature Identifier (CDW10 bits 7:0).
    pub fid: FeatureId,
    /// Select (CDW10 bits 10:8).
    pub sel: FeatureSelect,
    /// Feature specific CDW11.
    pub cdw11: u32,
    /// UUID Index (CDW14 bits 6:0).
    pub uuid_index: u8,
}

impl GetFeatures {
    const WHAT: &'static str = "Get Features";

    /// A Get Features of the current value of `fid`.
    pub fn current(cid: u16, fid: FeatureId, sgl: SglDescriptor) -> GetFeatures {
        GetFeatures {
            cid,
            nsid: 0,
            sgl,
            fid,
            sel: FeatureSelect::Current,
            cdw11: 0,
            uuid_index: 0,
        }
    }

    /// Parses a Get Features command. SEL 4–7 is [`ParseError::InvalidField`] at byte 41.
    pub fn parse(sqe: &Sqe) -> Result<GetFeatures, ParseError> {
        expect(sqe, AdminOpcode::GET_FEATURES, Self::WHAT)?;
        let c10 = sqe.cdw(10);
        let sel_bits = ((c10 >> 8) & 0x7) as u8;
        let sel = FeatureSelect::from_bits(sel_bits).ok_or(ParseError::InvalidField {
            what: Self::WHAT,
            field: "sel",
            offset: field::FEATURE_SEL,
            value: u64::from(sel_bits),
        })?;
        Ok(GetFeatures {
            cid: sqe.cid(),
            nsid: sqe.nsid(),
            sgl: sqe.sgl1()?,
            fid: FeatureId(c10 as u8),
            sel,
            cdw11: sqe.cdw(11),
            uuid_index: (sqe.cdw(14) & 0x7F) as u8,
        })
    }

    /// Builds the SQE (PSDT set to SGL).
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let mut s = admin_sqe(AdminOpcode::GET_FEATURES, self.cid, self.nsid);
        s.set_sgl1(&self.sgl)?;
        s.set_cdw(10, u32::from(self.fid.0) | u32::from(self.sel.bits()) << 8);
        s.set_cdw(11, self.cdw11);
        s.set_cdw(14, u32::from(self.uuid_index & 0x7F));
        Ok(s)
    }
}

/// Set Features (opcode 09h; Base §5.27, Figure 316).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetFeatures {
    /// Command identifier.
    pub cid: u16,
    /// Namespace identifier, for namespace-specific features.
    pub nsid: u32,
    /// Where the data is, for features set with a data structure (Timestamp, Host Behavior).
    pub sgl: SglDescriptor,
    /// Feature Identifier (CDW10 bits 7:0).
    pub fid: FeatureId,
    /// Save (CDW10 bit 31): keep the value across resets.
    pub save: bool,
    /// Feature specific CDW11 (e.g. [`crate::features::NumberOfQueues`]).
    pub cdw11: u32,
    /// Feature specific CDW12.
    pub cdw12: u32,
    /// Feature specific CDW13.
    pub cdw13: u32,
    /// Feature specific CDW15.
    pub cdw15: u32,
    /// UUID Index (CDW14 bits 6:0).
    pub uuid_index: u8,
}

impl SetFeatures {
    const WHAT: &'static str = "Set Features";

    /// A Set Features of `fid` with the dword value `cdw11` (not saved).
    pub fn dword(cid: u16, fid: FeatureId, cdw11: u32, sgl: SglDescriptor) -> SetFeatures {
        SetFeatures {
            cid,
            nsid: 0,
            sgl,
            fid,
            save: false,
            cdw11,
            cdw12: 0,
            cdw13: 0,
            cdw15: 0,
            uuid_index: 0,
        }
    }

    /// Parses a Set Features command.
    pub fn parse(sqe: &Sqe) -> Result<SetFeatures, ParseError> {
        expect(sqe, AdminOpcode::SET_FEATURES, Self::WHAT)?;
        let c10 = sqe.cdw(10);
        Ok(SetFeatures {
            cid: sqe.cid(),
            nsid: sqe.nsid(),
            sgl: sqe.sgl1()?,
            fid: FeatureId(c10 as u8),
            save: c10 & (1 << 31) != 0,
            cdw11: sqe.cdw(11),
            cdw12: sqe.cdw(12),
            cdw13: sqe.cdw(13),
            cdw15: sqe.cdw(15),
            uuid_index: (sqe.cdw(14) & 0x7F) as u8,
        })
    }

    /// Builds the SQE (PSDT set to SGL).
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let mut s = admin_sqe(AdminOpcode::SET_FEATURES, self.cid, self.nsid);
        s.set_sgl1(&self.sgl)?;
        s.set_cdw(10, u32::from(self.fid.0) | u32::from(self.save) << 31);
        s.set_cdw(11, self.cdw11);
        s.set_cdw(12, self.cdw12);
        s.set_cdw(13, self.cdw13);
        s.set_cdw(14, u32::from(self.uuid_index & 0x7F));
        s.set_cdw(15, self.cdw15);
        Ok(s)
    }
}

/// Keep Alive (opcode 18h; Base §5.25): no parameters, no data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeepAlive {
    /// Command identifier.
    pub cid: u16,
}

impl KeepAlive {
    const WHAT: &'static str = "Keep Alive";

    /// Parses a Keep Alive command.
    pub fn parse(sqe: &Sqe) -> Result<KeepAlive, ParseError> {
        expect(sqe, AdminOpcode::KEEP_ALIVE, Self::WHAT)?;
        Ok(KeepAlive { cid: sqe.cid() })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        admin_sqe(AdminOpcode::KEEP_ALIVE, self.cid, 0)
    }
}

/// Asynchronous Event Request (opcode 0Ch; Base §5.2): stays outstanding until an event
/// completes it (see [`crate::aen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncEventRequest {
    /// Command identifier.
    pub cid: u16,
}

impl AsyncEventRequest {
    const WHAT: &'static str = "Asynchronous Event Request";

    /// Parses an Asynchronous Event Request.
    pub fn parse(sqe: &Sqe) -> Result<AsyncEventRequest, ParseError> {
        expect(sqe, AdminOpcode::ASYNC_EVENT_REQUEST, Self::WHAT)?;
        Ok(AsyncEventRequest { cid: sqe.cid() })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        admin_sqe(AdminOpcode::ASYNC_EVENT_REQUEST, self.cid, 0)
    }
}

/// Abort (opcode 08h; Base §5.1, Figure 140). Completion DW0 bit 0 is 1 when the command was
/// *not* aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Abort {
    /// Command identifier of the Abort itself.
    pub cid: u16,
    /// Submission queue of the command to abort (CDW10 bits 15:0).
    pub sqid: u16,
    /// Command identifier of the command to abort (CDW10 bits 31:16).
    pub target_cid: u16,
}

impl Abort {
    const WHAT: &'static str = "Abort";

    /// Completion DW0 when the command was not aborted (bit 0 set; Base Figure 141).
    pub const DW0_NOT_ABORTED: u32 = 1;

    /// Parses an Abort command.
    pub fn parse(sqe: &Sqe) -> Result<Abort, ParseError> {
        expect(sqe, AdminOpcode::ABORT, Self::WHAT)?;
        let c10 = sqe.cdw(10);
        Ok(Abort {
            cid: sqe.cid(),
            sqid: c10 as u16,
            target_cid: (c10 >> 16) as u16,
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        let mut s = admin_sqe(AdminOpcode::ABORT, self.cid, 0);
        s.set_cdw(10, u32::from(self.sqid) | u32::from(self.target_cid) << 16);
        s
    }
}

/// An admin command, dispatched on its opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminCommand {
    /// Identify.
    Identify(Identify),
    /// Get Log Page.
    GetLogPage(GetLogPage),
    /// Get Features.
    GetFeatures(GetFeatures),
    /// Set Features.
    SetFeatures(SetFeatures),
    /// Keep Alive.
    KeepAlive(KeepAlive),
    /// Asynchronous Event Request.
    AsyncEventRequest(AsyncEventRequest),
    /// Abort.
    Abort(Abort),
    /// Any other opcode (fabrics commands included): the controller either handles it
    /// elsewhere or answers "invalid opcode".
    Other {
        /// Command identifier.
        cid: u16,
        /// The opcode.
        opcode: AdminOpcode,
    },
}

impl AdminCommand {
    /// Parses an admin-queue SQE. Errors are those of the command's own parser.
    pub fn parse(sqe: &Sqe) -> Result<AdminCommand, ParseError> {
        Ok(match AdminOpcode(sqe.opcode()) {
            AdminOpcode::IDENTIFY => AdminCommand::Identify(Identify::parse(sqe)?),
            AdminOpcode::GET_LOG_PAGE => AdminCommand::GetLogPage(GetLogPage::parse(sqe)?),
            AdminOpcode::GET_FEATURES => AdminCommand::GetFeatures(GetFeatures::parse(sqe)?),
            AdminOpcode::SET_FEATURES => AdminCommand::SetFeatures(SetFeatures::parse(sqe)?),
            AdminOpcode::KEEP_ALIVE => AdminCommand::KeepAlive(KeepAlive::parse(sqe)?),
            AdminOpcode::ASYNC_EVENT_REQUEST => {
                AdminCommand::AsyncEventRequest(AsyncEventRequest::parse(sqe)?)
            }
            AdminOpcode::ABORT => AdminCommand::Abort(Abort::parse(sqe)?),
            opcode => AdminCommand::Other {
                cid: sqe.cid(),
                opcode,
            },
        })
    }

    /// Builds the SQE of a known command; `None` for [`AdminCommand::Other`], which has no
    /// parameters to build from.
    pub fn to_sqe(&self) -> Option<Result<Sqe, ParseError>> {
        Some(match self {
            AdminCommand::Identify(c) => c.to_sqe(),
            AdminCommand::GetLogPage(c) => c.to_sqe(),
            AdminCommand::GetFeatures(c) => c.to_sqe(),
            AdminCommand::SetFeatures(c) => c.to_sqe(),
            AdminCommand::KeepAlive(c) => Ok(c.to_sqe()),
            AdminCommand::AsyncEventRequest(c) => Ok(c.to_sqe()),
            AdminCommand::Abort(c) => Ok(c.to_sqe()),
            AdminCommand::Other { .. } => return None,
        })
    }

    /// The command identifier.
    pub fn cid(&self) -> u16 {
        match self {
            AdminCommand::Identify(c) => c.cid,
            AdminCommand::GetLogPage(c) => c.cid,
            AdminCommand::GetFeatures(c) => c.cid,
            AdminCommand::SetFeatures(c) => c.cid,
            AdminCommand::KeepAlive(c) => c.cid,
            AdminCommand::AsyncEventRequest(c) => c.cid,
            AdminCommand::Abort(c) => c.cid,
            AdminCommand::Other { cid, .. } => *cid,
        }
    }
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
