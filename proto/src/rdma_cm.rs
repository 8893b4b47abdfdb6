//! NVMe/RDMA connection management private data (NVMe over Fabrics 1.1 §7.3.3 "RDMA transport
//! binding", Linux `include/linux/nvme-rdma.h`): the request a host puts in its RDMA CM
//! CONNECT_REQUEST, the target's accept, and the target's reject with its status.
//!
//! RDMA CM delivers private data padded to the transport's size (56 bytes on a RoCE REQ), so
//! parsers take *at least* the structure's size and ignore the padding, exactly as the Linux
//! target does (`nvmet_rdma_parse_cm_connect_req` checks only the minimum length). What we send
//! is exactly the structure's size.

use crate::bytes::{le16, put_le16};
use crate::error::{at_least, room, ParseError};

/// Size of the request private data.
pub const CM_REQ_LEN: usize = 32;
/// Size of the accept private data.
pub const CM_REP_LEN: usize = 32;
/// Size of the reject private data.
pub const CM_REJ_LEN: usize = 4;

mod field {
    use crate::bytes::Field;
    pub const RECFMT: Field = 0..2;
    pub const QID: Field = 2..4;
    pub const HRQSIZE: Field = 4..6;
    pub const HSQSIZE: Field = 6..8;
    pub const CNTLID: Field = 8..10;
    pub const CRQSIZE: Field = 2..4;
    pub const STS: Field = 2..4;
}

/// The host's connect request (`struct nvme_rdma_cm_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmRequest {
    /// Record format: 0 is the only one defined.
    pub recfmt: u16,
    /// Queue id the connection will carry (0 = admin).
    pub qid: u16,
    /// Host receive queue size: how many responses the target may have outstanding.
    pub hrqsize: u16,
    /// Host send queue size, 0-based: receive depth = hsqsize + 1.
    pub hsqsize: u16,
    /// Controller id the host wants (newer hosts fill it for I/O queues; 0 otherwise).
    pub cntlid: u16,
}

impl CmRequest {
    const WHAT: &'static str = "NVMe/RDMA CM request";

    /// Parses at least 32 bytes (padding after them is ignored, see the module doc).
    pub fn parse(b: &[u8]) -> Result<CmRequest, ParseError> {
        at_least(Self::WHAT, b, CM_REQ_LEN)?;
        Ok(CmRequest {
            recfmt: le16(b, field::RECFMT),
            qid: le16(b, field::QID),
            hrqsize: le16(b, field::HRQSIZE),
            hsqsize: le16(b, field::HSQSIZE),
            cntlid: le16(b, field::CNTLID),
        })
    }

    /// Writes exactly 32 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, CM_REQ_LEN)?;
        b.fill(0);
        put_le16(b, field::RECFMT, self.recfmt);
        put_le16(b, field::QID, self.qid);
        put_le16(b, field::HRQSIZE, self.hrqsize);
        put_le16(b, field::HSQSIZE, self.hsqsize);
        put_le16(b, field::CNTLID, self.cntlid);
        Ok(())
    }

    /// The request as 32 bytes.
    pub fn to_bytes(&self) -> [u8; CM_REQ_LEN] {
        let mut b = [0u8; CM_REQ_LEN];
        // Cannot fail: exact size.
        let _ = self.emit(&mut b);
        b
    }
}

/// The target's accept (`struct nvme_rdma_cm_rep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmAccept {
    /// Record format (0).
    pub recfmt: u16,
    /// Controller receive queue size: how many capsules the host may have outstanding.
    pub crqsize: u16,
}

impl CmAccept {
    const WHAT: &'static str = "NVMe/RDMA CM accept";

    /// Parses at least 32 bytes (padding ignored).
    pub fn parse(b: &[u8]) -> Result<CmAccept, ParseError> {
        at_least(Self::WHAT, b, CM_REP_LEN)?;
        Ok(CmAccept {
            recfmt: le16(b, field::RECFMT),
            crqsize: le16(b, field::CRQSIZE),
        })
    }

    /// The accept as 32 bytes.
    pub fn to_bytes(&self) -> [u8; CM_REP_LEN] {
        let mut b = [0u8; CM_REP_LEN];
        put_le16(&mut b, field::RECFMT, self.recfmt);
        put_le16(&mut b, field::CRQSIZE, self.crqsize);
        b
    }
}

code_newtype! {
    /// Reject status (`enum nvme_rdma_cm_status`).
    pub struct CmRejectStatus(u16) {
        /// Invalid private data length.
        INVALID_LEN = 0x01,
        /// Invalid record format.
        INVALID_RECFMT = 0x02,
        /// Invalid queue id.
        INVALID_QID = 0x03,
        /// Invalid host SQ size.
        INVALID_HSQSIZE = 0x04,
        /// Invalid host RQ size.
        INVALID_HRQSIZE = 0x05,
        /// No resources.
        NO_RESOURCES = 0x06,
        /// Invalid IRD.
        INVALID_IRD = 0x07,
        /// Invalid ORD.
        INVALID_ORD = 0x08,
        /// Invalid controller id.
        INVALID_CNTLID = 0x09,
    }
}

/// The target's reject (`struct nvme_rdma_cm_rej`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmReject {
    /// Record format (0).
    pub recfmt: u16,
    /// Why the connection was refused.
    pub status: CmRejectStatus,
}

impl CmReject {
    const WHAT: &'static str = "NVMe/RDMA CM reject";

    /// Parses at least 4 bytes (padding ignored).
    pub fn parse(b: &[u8]) -> Result<CmReject, ParseError> {
        at_least(Self::WHAT, b, CM_REJ_LEN)?;
        Ok(CmReject {
            recfmt: le16(b, field::RECFMT),
            status: CmRejectStatus(le16(b, field::STS)),
        })
    }

    /// The reject as 4 bytes.
    pub fn to_bytes(&self) -> [u8; CM_REJ_LEN] {
        let mut b = [0u8; CM_REJ_LEN];
        put_le16(&mut b, field::RECFMT, self.recfmt);
        put_le16(&mut b, field::STS, self.status.0);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_layout_as_the_linux_host_sends_it() {
        // Seen in the lab: recfmt=0 qid=0 hrqsize=32 hsqsize=31, padded to 56 bytes by RDMA CM.
        let mut raw = [0u8; 56];
        raw[4..6].copy_from_slice(&32u16.to_le_bytes());
        raw[6..8].copy_from_slice(&31u16.to_le_bytes());
        let r = CmRequest::parse(&raw).unwrap();
        assert_eq!(
            r,
            CmRequest {
                recfmt: 0,
                qid: 0,
                hrqsize: 32,
                hsqsize: 31,
                cntlid: 0
            }
        );
        assert_eq!(&r.to_bytes()[..], &raw[..32]);
        let io = CmRequest {
            recfmt: 0,
            qid: 3,
            hrqsize: 128,
            hsqsize: 127,
            cntlid: 0x11,
        };
        let b = io.to_bytes();
        assert_eq!(&b[..10], &[0, 0, 3, 0, 128, 0, 127, 0, 0x11, 0]);
        assert!(CmRequest::parse(&b[..31]).is_err());
    }

    #[test]
    fn accept_and_reject_layout() {
        let a = CmAccept {
            recfmt: 0,
            crqsize: 128,
        };
        let b = a.to_bytes();
        assert_eq!(&b[..4], &[0, 0, 128, 0]);
        assert!(b[4..].iter().all(|&x| x == 0));
        assert_eq!(CmAccept::parse(&b).unwrap(), a);
        let r = CmReject {
            recfmt: 0,
            status: CmRejectStatus::NO_RESOURCES,
        };
        assert_eq!(r.to_bytes(), [0, 0, 6, 0]);
        assert_eq!(CmReject::parse(&[0, 0, 6, 0, 0, 0]).unwrap(), r);
        assert!(CmReject::parse(&[0, 0, 6]).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(r) = CmRequest::parse(&raw) { prop_assert_eq!(CmRequest::parse(&r.to_bytes()).unwrap(), r); }
            if let Ok(a) = CmAccept::parse(&raw) { prop_assert_eq!(CmAccept::parse(&a.to_bytes()).unwrap(), a); }
            if let Ok(j) = CmReject::parse(&raw) { prop_assert_eq!(CmReject::parse(&j.to_bytes()).unwrap(), j); }
        }
    }
}
