//! The RDMA CM connect-request decision for one queue pair: accept with sizes, or reject with
//! the NVMe/RDMA status (`nvme-rdma.h` `enum nvme_rdma_cm_status`), before any NVMe command.
//!
//! Rules (NVMe over Fabrics 1.1 §7.3.3, and Linux nvmet-rdma `nvmet_rdma_parse_cm_connect_req`):
//! private data shorter than 32 bytes → invalid length; RECFMT ≠ 0 → invalid record format;
//! QID beyond the I/O queue limit → invalid QID; HSQSIZE (0-based) giving a queue deeper than
//! allowed (admin: 32 entries, I/O: the configured depth) or shallower than 2 entries →
//! invalid HSQSIZE; HRQSIZE 0 or larger than our send capacity → invalid HRQSIZE; a host that
//! can serve no RDMA READ of ours (responder resources 0) → invalid ORD.

use raidline_proto::rdma_cm::{CmAccept, CmRejectStatus, CmRequest};

use crate::subsystem::Limits;

/// Sizes of an accepted queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSetup {
    /// NVMe queue id (0 = admin).
    pub qid: u16,
    /// Commands the host may have outstanding (HSQSIZE + 1): receives to post.
    pub depth: u16,
    /// Responses we may have outstanding (HRQSIZE).
    pub host_recv_depth: u16,
    /// RDMA READs we may have in flight towards the host (our initiator depth).
    pub initiator_depth: u8,
    /// Private data for the accept.
    pub accept: CmAccept,
}

/// Decides a CM connect request.
///
/// `host_responder_resources` is what the host offers to serve (its max_qp_rd_atom), and
/// `device_max_init_rd_atom` our device's limit on outstanding RDMA READs per QP.
pub fn decide(
    private_data: &[u8],
    host_responder_resources: u8,
    device_max_init_rd_atom: u32,
    limits: &Limits,
) -> Result<QueueSetup, CmRejectStatus> {
    let req = CmRequest::parse(private_data).map_err(|_| CmRejectStatus::INVALID_LEN)?;
    if req.recfmt != 0 {
        return Err(CmRejectStatus::INVALID_RECFMT);
    }
    if req.qid > limits.max_io_queues {
        return Err(CmRejectStatus::INVALID_QID);
    }
    let max_depth = if req.qid == 0 {
        limits.max_admin_queue_depth
    } else {
        limits.max_queue_depth
    };
    let depth = u32::from(req.hsqsize) + 1;
    if depth < 2 || depth > u32::from(max_depth) {
        return Err(CmRejectStatus::INVALID_HSQSIZE);
    }
    // Responses for every outstanding command plus one AER per allowed slot can be in flight.
    let max_hrq = u32::from(max_depth) + u32::from(limits.aer_limit);
    if req.hrqsize == 0 || u32::from(req.hrqsize) > max_hrq {
        return Err(CmRejectStatus::INVALID_HRQSIZE);
    }
    let initiator_depth = u32::from(host_responder_resources).min(device_max_init_rd_atom);
    if initiator_depth == 0 {
        return Err(CmRejectStatus::INVALID_ORD);
    }
    Ok(QueueSetup {
        qid: req.qid,
        depth: depth as u16,
        host_recv_depth: req.hrqsize,
        initiator_depth: initiator_depth.min(255) as u8,
        accept: CmAccept {
            recfmt: 0,
            crqsize: depth as u16,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(qid: u16, hrqsize: u16, hsqsize: u16) -> Vec<u8> {
        let mut v = CmRequest {
            recfmt: 0,
            qid,
            hrqsize,
            hsqsize,
            cntlid: 0,
        }
        .to_bytes()
        .to_vec();
        v.resize(56, 0); // RDMA CM pads to the REQ private data size
        v
    }

    #[test]
    fn the_linux_host_requests_are_accepted() {
        let l = Limits::default();
        let a = decide(&req(0, 32, 31), 16, 16, &l).unwrap();
        assert_eq!((a.qid, a.depth, a.host_recv_depth), (0, 32, 32));
        assert_eq!(a.accept.crqsize, 32);
        let io = decide(&req(3, 128, 127), 16, 4, &l).unwrap();
        assert_eq!((io.depth, io.initiator_depth), (128, 4));
    }

    #[test]
    fn each_bad_field_gets_its_reject_status() {
        let l = Limits::default();
        assert_eq!(
            decide(&[0; 31], 16, 16, &l),
            Err(CmRejectStatus::INVALID_LEN)
        );
        let mut bad = req(0, 32, 31);
        bad[0] = 1;
        assert_eq!(
            decide(&bad, 16, 16, &l),
            Err(CmRejectStatus::INVALID_RECFMT)
        );
        assert_eq!(
            decide(&req(17, 128, 127), 16, 16, &l),
            Err(CmRejectStatus::INVALID_QID)
        );
        assert_eq!(
            decide(&req(0, 64, 63), 16, 16, &l),
            Err(CmRejectStatus::INVALID_HSQSIZE)
        );
        assert_eq!(
            decide(&req(1, 256, 255), 16, 16, &l),
            Err(CmRejectStatus::INVALID_HSQSIZE)
        );
        assert_eq!(
            decide(&req(1, 128, 0), 16, 16, &l),
            Err(CmRejectStatus::INVALID_HSQSIZE)
        );
        assert_eq!(
            decide(&req(1, 0, 127), 16, 16, &l),
            Err(CmRejectStatus::INVALID_HRQSIZE)
        );
        assert_eq!(
            decide(&req(1, 128, 127), 0, 16, &l),
            Err(CmRejectStatus::INVALID_ORD)
        );
    }
}
