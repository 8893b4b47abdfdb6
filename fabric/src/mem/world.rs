//! The in-memory fabric's shared state and its execution model.
//!
//! Model (deterministic, no threads, no timers):
//! - A work request executes *during the post call that makes it executable*: `post_send`
//!   runs the QP's queue at once; a SEND that finds no receive at the peer either fails at once
//!   with `RnrRetryExceeded` (the QP's RNR retry count is below 7: retries take no time here,
//!   so a finite count is exhausted immediately) or, with 7 (retry forever), stays at the head
//!   of the send queue, blocking everything behind it (RC order), until the peer posts a
//!   receive — that peer `post_recv` then runs this queue.
//! - Completions land in the CQs as the work executes; polling only hands them out.
//! - Checks match an RC responder: remote key, range, access and protection domain; a
//!   violation completes the requester's work request with `RemoteAccessError` and moves both
//!   QPs to the error state. A zero-length RDMA WRITE is checked for nothing.
//! - A QP in the error state flushes every outstanding and newly posted work request with
//!   `WrFlushError`; error completions are generated even for unsignaled work requests.
//! - A SEND towards a QP that is gone or in the error state completes with `RetryExceeded`
//!   (a real requester would time out) and moves the sender to the error state.
//! - RDMA CM: connect queues a request at the listener's channel; accept links the two QPs
//!   (both ready to send at once) and queues `Established` at both ends; reject and no
//!   listener queue `Rejected`; the first `disconnect` moves that side's QP to error and
//!   queues `Disconnected` at both ends; when both sides have disconnected (or the peer is
//!   gone) both get `TimewaitExit`. Private data is padded to the IB CM sizes, as received.
//!
//! Invariants: one mutex guards the whole world; no user object is dropped while it is held
//! (states hold ids, user objects hold the `Arc`s), so `Drop` impls may lock it.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use crate::error::{FabricError, PostError};
use crate::sys_mem::{read_bytes, write_bytes, RegionMemory};
use crate::types::{
    Access, Completion, ConnId, QpCaps, QpNum, RecvWr, RemoteBuf, SendOp, SendWr, Sge, WcOpcode,
    WcStatus, WrId, MAX_ACCEPT_PRIVATE_DATA, MAX_CONNECT_PRIVATE_DATA, MAX_REJECT_PRIVATE_DATA,
    REJECT_REASON_CONSUMER, REJECT_REASON_INVALID_SERVICE_ID,
};

pub(crate) struct MrEntry {
    pub pd: u64,
    pub mem: Arc<dyn RegionMemory>,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub valid: bool,
}

pub(crate) struct CqState {
    pub device: u64,
    pub entries: VecDeque<Completion>,
    pub depth: u32,
    pub overflow: bool,
    pub armed: bool,
    pub notify: UnixStream,
}

pub(crate) struct SrqState {
    pub pd: u64,
    pub recvs: VecDeque<Posted>,
    pub max_wr: u32,
    pub max_sge: u32,
}

pub(crate) struct Posted {
    pub wr_id: WrId,
    pub sges: Vec<Sge>,
}

enum Data {
    Sges(Vec<Sge>),
    Inline(Vec<u8>),
}

struct PendingWr {
    wr_id: WrId,
    op: SendOp,
    data: Data,
    signaled: bool,
}

pub(crate) struct QpState {
    pub pd: u64,
    pub send_cq: u64,
    pub recv_cq: u64,
    pub srq: Option<u64>,
    pub caps: QpCaps,
    pub error: bool,
    pub peer: Option<u32>,
    recvs: VecDeque<Posted>,
    pending: VecDeque<PendingWr>,
    pub rnr_retry: u8,
}

/// An event as queued in a channel; the connection manager turns it into a `CmEvent`.
pub(crate) enum RawEvent {
    Request(u64),
    Established {
        conn: u64,
        private_data: Vec<u8>,
    },
    Rejected {
        conn: u64,
        reason: i32,
        private_data: Vec<u8>,
    },
    Disconnected(u64),
    TimewaitExit(u64),
}

pub(crate) struct ChannelState {
    pub events: VecDeque<RawEvent>,
    pub notify: UnixStream,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Active side waiting for an answer.
    Connecting,
    /// Passive side: a request not yet answered.
    Requested,
    Connected,
    Closed,
}

pub(crate) struct ConnState {
    channel: u64,
    peer: Option<u64>,
    pub qp: Option<u32>,
    phase: Phase,
    disconnect_called: bool,
    disconnected_sent: bool,
    timewait_sent: bool,
    /// The active side's requested RNR retry for the passive QP.
    peer_rnr_retry: u8,
    /// Passive side: the request as sent (private data, responder resources, initiator depth).
    request: Option<(Vec<u8>, u8, u8)>,
    /// Passive side: the address the peer connected to.
    local: Option<SocketAddr>,
}

/// Everything of one in-memory network.
pub(crate) struct World {
    next_id: u64,
    next_qpn: u32,
    next_key: u32,
    next_port: u16,
    pub mrs: HashMap<u32, MrEntry>,
    pub cqs: HashMap<u64, CqState>,
    pub srqs: HashMap<u64, SrqState>,
    pub pds: HashMap<u64, u64>,
    pub qps: HashMap<u32, QpState>,
    pub channels: HashMap<u64, ChannelState>,
    pub conns: HashMap<u64, ConnState>,
    listeners: HashMap<SocketAddr, u64>,
}

fn signal(s: &mut UnixStream) {
    // Non-blocking: a full socket buffer already means "readable", which is all we need.
    let _ = s.write(&[1]);
}

fn pad(data: &[u8], len: usize) -> Vec<u8> {
    let mut v = data.to_vec();
    if v.len() < len {
        v.resize(len, 0);
    }
    v
}

impl World {
    pub fn new() -> Self {
        Self {
            next_id: 1,
            next_qpn: 0x11,
            next_key: 0x1000,
            next_port: 20_000,
            mrs: HashMap::new(),
            cqs: HashMap::new(),
            srqs: HashMap::new(),
            pds: HashMap::new(),
            qps: HashMap::new(),
            channels: HashMap::new(),
            conns: HashMap::new(),
            listeners: HashMap::new(),
        }
    }

    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn key(&mut self) -> u32 {
        // Keys step by an odd stride so they do not look like small indexes.
        self.next_key = self.next_key.wrapping_add(0x0101);
        while self.next_key == 0 || self.mrs.contains_key(&self.next_key) {
            self.next_key = self.next_key.wrapping_add(0x0101);
        }
        self.next_key
    }

    pub fn qpn(&mut self) -> u32 {
        self.next_qpn += 1;
        self.next_qpn & 0x00FF_FFFF
    }

    pub fn push_cqe(&mut self, cq: u64, c: Completion) {
        let Some(cq) = self.cqs.get_mut(&cq) else {
            return;
        };
        if cq.entries.len() >= cq.depth as usize {
            cq.overflow = true;
            return;
        }
        cq.entries.push_back(c);
        if cq.armed {
            cq.armed = false;
            signal(&mut cq.notify);
        }
    }

    pub fn push_event(&mut self, channel: u64, ev: RawEvent) {
        if let Some(ch) = self.channels.get_mut(&channel) {
            ch.events.push_back(ev);
            signal(&mut ch.notify);
        }
    }

    // ----- queue pairs -------------------------------------------------------------------

    pub fn create_qp(
        &mut self,
        pd: u64,
        send_cq: u64,
        recv_cq: u64,
        srq: Option<u64>,
        caps: QpCaps,
    ) -> Result<u32, FabricError> {
        let device = *self
            .pds
            .get(&pd)
            .ok_or(FabricError::WrongDomain("protection domain"))?;
        for cq in [send_cq, recv_cq] {
            match self.cqs.get(&cq) {
                Some(c) if c.device == device => {}
                _ => return Err(FabricError::WrongDomain("completion queue")),
            }
        }
        if let Some(s) = srq {
            match self.srqs.get(&s) {
                Some(st) if st.pd == pd => {}
                _ => return Err(FabricError::WrongDomain("shared receive queue")),
            }
        }
        let qpn = self.qpn();
        self.qps.insert(
            qpn,
            QpState {
                pd,
                send_cq,
                recv_cq,
                srq,
                caps,
                error: false,
                peer: None,
                recvs: VecDeque::new(),
                pending: VecDeque::new(),
                rnr_retry: 7,
            },
        );
        Ok(qpn)
    }

    pub fn destroy_qp(&mut self, qpn: u32) {
        self.qps.remove(&qpn);
    }

    pub fn post_send(&mut self, qpn: u32, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let Some(qp) = self.qps.get(&qpn) else {
            return Err(PostError::nothing_posted(FabricError::QpNotReady(qpn)));
        };
        if qp.peer.is_none() && !qp.error {
            return Err(PostError::nothing_posted(FabricError::QpNotReady(qpn)));
        }
        let caps = qp.caps;
        if qp.pending.len() + wrs.len() > caps.max_send_wr as usize {
            return Err(PostError::nothing_posted(FabricError::QueueFull {
                needed: wrs.len() as u32,
                in_use: qp.pending.len() as u32,
                capacity: caps.max_send_wr,
            }));
        }
        let mut staged = Vec::with_capacity(wrs.len());
        for wr in wrs {
            let data = match wr.payload {
                crate::types::Payload::Sges(s) => {
                    if s.len() > caps.max_send_sge as usize {
                        return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                            format!("{} SGEs > max_send_sge {}", s.len(), caps.max_send_sge),
                        )));
                    }
                    Data::Sges(s.to_vec())
                }
                crate::types::Payload::Inline(b) => {
                    if b.len() > caps.max_inline_data as usize
                        || matches!(wr.op, SendOp::RdmaRead(_))
                    {
                        return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                            format!("inline payload of {} bytes not allowed here", b.len()),
                        )));
                    }
                    Data::Inline(b.to_vec())
                }
            };
            staged.push(PendingWr {
                wr_id: wr.wr_id,
                op: wr.op,
                data,
                signaled: wr.signaled,
            });
        }
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.pending.extend(staged);
        }
        self.pump(qpn);
        Ok(())
    }

    pub fn post_recv(&mut self, qpn: u32, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return Err(PostError::nothing_posted(FabricError::QpNotReady(qpn)));
        };
        if qp.srq.is_some() {
            return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                "post_recv on a QP with a shared receive queue".into(),
            )));
        }
        if qp.recvs.len() + wrs.len() > qp.caps.max_recv_wr as usize {
            return Err(PostError::nothing_posted(FabricError::QueueFull {
                needed: wrs.len() as u32,
                in_use: qp.recvs.len() as u32,
                capacity: qp.caps.max_recv_wr,
            }));
        }
        if let Some(w) = wrs
            .iter()
            .find(|w| w.sges.len() > qp.caps.max_recv_sge as usize)
        {
            return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                format!(
                    "{} SGEs > max_recv_sge {}",
                    w.sges.len(),
                    qp.caps.max_recv_sge
                ),
            )));
        }
        qp.recvs.extend(wrs.iter().map(|w| Posted {
            wr_id: w.wr_id,
            sges: w.sges.to_vec(),
        }));
        let (error, peer) = (qp.error, qp.peer);
        if error {
            self.flush(qpn);
        } else if let Some(p) = peer {
            self.pump(p);
        }
        Ok(())
    }

    pub fn post_srq_recv(&mut self, srq: u64, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let Some(s) = self.srqs.get_mut(&srq) else {
            return Err(PostError::nothing_posted(FabricError::WrongDomain(
                "shared receive queue",
            )));
        };
        if s.recvs.len() + wrs.len() > s.max_wr as usize {
            return Err(PostError::nothing_posted(FabricError::QueueFull {
                needed: wrs.len() as u32,
                in_use: s.recvs.len() as u32,
                capacity: s.max_wr,
            }));
        }
        if wrs.iter().any(|w| w.sges.len() > s.max_sge as usize) {
            return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                "too many SGEs for the shared receive queue".into(),
            )));
        }
        s.recvs.extend(wrs.iter().map(|w| Posted {
            wr_id: w.wr_id,
            sges: w.sges.to_vec(),
        }));
        // Senders blocked on receiver-not-ready towards a QP on this SRQ may proceed now.
        let blocked: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| !q.pending.is_empty())
            .filter(|(_, q)| {
                q.peer
                    .and_then(|p| self.qps.get(&p))
                    .is_some_and(|p| p.srq == Some(srq))
            })
            .map(|(n, _)| *n)
            .collect();
        for q in blocked {
            self.pump(q);
        }
        Ok(())
    }

    /// Moves a QP to the error state and flushes everything it holds.
    pub fn set_error(&mut self, qpn: u32) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.error = true;
        }
        self.flush(qpn);
    }

    fn flush(&mut self, qpn: u32) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let recvs: Vec<Posted> = qp.recvs.drain(..).collect();
        let sends: Vec<PendingWr> = qp.pending.drain(..).collect();
        let (scq, rcq) = (qp.send_cq, qp.recv_cq);
        for r in recvs {
            self.push_cqe(
                rcq,
                cqe(r.wr_id, WcStatus::WrFlushError, None, 0, qpn, None),
            );
        }
        for s in sends {
            self.push_cqe(
                scq,
                cqe(s.wr_id, WcStatus::WrFlushError, None, 0, qpn, None),
            );
        }
    }

    /// Runs the head of `qpn`'s send queue while it can make progress.
    fn pump(&mut self, qpn: u32) {
        loop {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                return;
            };
            if qp.error {
                self.flush(qpn);
                return;
            }
            let Some(wr) = qp.pending.pop_front() else {
                return;
            };
            match self.execute(qpn, &wr) {
                Step::Done => {}
                Step::Blocked => {
                    if let Some(qp) = self.qps.get_mut(&qpn) {
                        qp.pending.push_front(wr);
                    }
                    return;
                }
            }
        }
    }

    fn fail(&mut self, qpn: u32, wr_id: WrId, status: WcStatus) -> Step {
        if let Some(qp) = self.qps.get(&qpn) {
            let cq = qp.send_cq;
            self.push_cqe(cq, cqe(wr_id, status, None, 0, qpn, None));
        }
        self.set_error(qpn);
        Step::Done
    }

    fn execute(&mut self, qpn: u32, wr: &PendingWr) -> Step {
        let Some(qp) = self.qps.get(&qpn) else {
            return Step::Done;
        };
        let (pd, send_cq, rnr_retry) = (qp.pd, qp.send_cq, qp.rnr_retry);
        let peer = match qp.peer.and_then(|p| self.qps.get(&p).map(|s| (p, s))) {
            Some((p, s)) if !s.error => p,
            _ => return self.fail(qpn, wr.wr_id, WcStatus::RetryExceeded),
        };
        let sink = matches!(wr.op, SendOp::RdmaRead(_));
        let local = match &wr.data {
            Data::Sges(s) => {
                let need = if sink {
                    Access::LOCAL_WRITE
                } else {
                    Access::NONE
                };
                match self.resolve_local(pd, s, need) {
                    Some(v) => Some(v),
                    None => return self.fail(qpn, wr.wr_id, WcStatus::LocalProtectionError),
                }
            }
            Data::Inline(_) => None,
        };
        let (opcode, byte_len, ok) = match wr.op {
            SendOp::Send | SendOp::SendWithInvalidate { .. } => {
                let bytes = match (&wr.data, &local) {
                    (Data::Inline(b), _) => b.clone(),
                    (Data::Sges(_), Some(l)) => gather(l),
                    (Data::Sges(_), None) => Vec::new(),
                };
                match self.deliver_send(qpn, peer, wr, &bytes, rnr_retry) {
                    Delivery::Delivered => (WcOpcode::Send, 0, true),
                    Delivery::Blocked => return Step::Blocked,
                    Delivery::Failed(status) => return self.fail(qpn, wr.wr_id, status),
                }
            }
            SendOp::RdmaWrite(remote) => {
                let bytes = match (&wr.data, &local) {
                    (Data::Inline(b), _) => b.clone(),
                    (Data::Sges(_), Some(l)) => gather(l),
                    (Data::Sges(_), None) => Vec::new(),
                };
                if !bytes.is_empty() {
                    let Some((mem, off)) =
                        self.resolve_remote(peer, remote, bytes.len() as u64, Access::REMOTE_WRITE)
                    else {
                        self.set_error(peer);
                        return self.fail(qpn, wr.wr_id, WcStatus::RemoteAccessError);
                    };
                    if write_bytes(mem.as_ref(), off, &bytes).is_err() {
                        return self.fail(qpn, wr.wr_id, WcStatus::LocalQpOperationError);
                    }
                }
                (WcOpcode::RdmaWrite, 0, true)
            }
            SendOp::RdmaRead(remote) => {
                let segs = local.unwrap_or_default();
                let len: u64 = segs.iter().map(|s| s.2 as u64).sum();
                if len > 0 {
                    let Some((mem, off)) =
                        self.resolve_remote(peer, remote, len, Access::REMOTE_READ)
                    else {
                        self.set_error(peer);
                        return self.fail(qpn, wr.wr_id, WcStatus::RemoteAccessError);
                    };
                    let mut buf = vec![0u8; len as usize];
                    if read_bytes(mem.as_ref(), off, &mut buf).is_err() {
                        return self.fail(qpn, wr.wr_id, WcStatus::LocalQpOperationError);
                    }
                    scatter(&segs, &buf);
                }
                (WcOpcode::RdmaRead, len as u32, true)
            }
        };
        if ok && wr.signaled {
            self.push_cqe(
                send_cq,
                cqe(
                    wr.wr_id,
                    WcStatus::Success,
                    Some(opcode),
                    byte_len,
                    qpn,
                    None,
                ),
            );
        }
        Step::Done
    }

    fn deliver_send(
        &mut self,
        qpn: u32,
        peer: u32,
        wr: &PendingWr,
        bytes: &[u8],
        rnr_retry: u8,
    ) -> Delivery {
        let Some(p) = self.qps.get_mut(&peer) else {
            return Delivery::Failed(WcStatus::RetryExceeded);
        };
        let (ppd, prcq, psrq) = (p.pd, p.recv_cq, p.srq);
        let recv = match psrq {
            Some(s) => self.srqs.get_mut(&s).and_then(|s| s.recvs.pop_front()),
            None => p.recvs.pop_front(),
        };
        let Some(recv) = recv else {
            return if rnr_retry >= 7 {
                Delivery::Blocked
            } else {
                Delivery::Failed(WcStatus::RnrRetryExceeded)
            };
        };
        let _ = qpn;
        let Some(segs) = self.resolve_local(ppd, &recv.sges, Access::LOCAL_WRITE) else {
            self.push_cqe(
                prcq,
                cqe(
                    recv.wr_id,
                    WcStatus::LocalProtectionError,
                    None,
                    0,
                    peer,
                    None,
                ),
            );
            self.set_error(peer);
            return Delivery::Failed(WcStatus::RemoteOperationError);
        };
        let room: usize = segs.iter().map(|s| s.2).sum();
        if room < bytes.len() {
            self.push_cqe(
                prcq,
                cqe(recv.wr_id, WcStatus::LocalLengthError, None, 0, peer, None),
            );
            self.set_error(peer);
            return Delivery::Failed(WcStatus::RemoteInvalidRequest);
        }
        let mut invalidated = None;
        if let SendOp::SendWithInvalidate { rkey } = wr.op {
            match self.mrs.get_mut(&rkey) {
                Some(mr) if mr.pd == ppd && mr.valid => {
                    mr.valid = false;
                    invalidated = Some(rkey);
                }
                _ => {
                    self.push_cqe(
                        prcq,
                        cqe(
                            recv.wr_id,
                            WcStatus::LocalProtectionError,
                            None,
                            0,
                            peer,
                            None,
                        ),
                    );
                    self.set_error(peer);
                    return Delivery::Failed(WcStatus::RemoteOperationError);
                }
            }
        }
        scatter(&segs, bytes);
        self.push_cqe(
            prcq,
            cqe(
                recv.wr_id,
                WcStatus::Success,
                Some(WcOpcode::Recv),
                bytes.len() as u32,
                peer,
                invalidated,
            ),
        );
        Delivery::Delivered
    }

    /// Checks local SGEs against the QP's protection domain; returns (memory, offset, len).
    fn resolve_local(&self, pd: u64, sges: &[Sge], need: Access) -> Option<Vec<Seg>> {
        let mut out = Vec::with_capacity(sges.len());
        for s in sges {
            if s.length == 0 {
                continue;
            }
            let mr = self.mrs.get(&s.lkey)?;
            if mr.pd != pd || !mr.valid || !mr.access.contains(need) {
                return None;
            }
            let end = s.addr.checked_add(u64::from(s.length))?;
            if s.addr < mr.addr || end > mr.addr + mr.len {
                return None;
            }
            out.push((
                Arc::clone(&mr.mem),
                (s.addr - mr.addr) as usize,
                s.length as usize,
            ));
        }
        Some(out)
    }

    fn resolve_remote(
        &self,
        peer: u32,
        r: RemoteBuf,
        len: u64,
        need: Access,
    ) -> Option<(Arc<dyn RegionMemory>, usize)> {
        let pd = self.qps.get(&peer)?.pd;
        let mr = self.mrs.get(&r.rkey)?;
        if mr.pd != pd || !mr.valid || !mr.access.contains(need) {
            return None;
        }
        let end = r.addr.checked_add(len)?;
        if r.addr < mr.addr || end > mr.addr + mr.len {
            return None;
        }
        Some((Arc::clone(&mr.mem), (r.addr - mr.addr) as usize))
    }

    // ----- connection management -----------------------------------------------------------

    pub fn new_channel(&mut self, notify: UnixStream) -> u64 {
        let id = self.id();
        self.channels.insert(
            id,
            ChannelState {
                events: VecDeque::new(),
                notify,
            },
        );
        id
    }

    pub fn drop_channel(&mut self, channel: u64) {
        let conns: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.channel == channel)
            .map(|(i, _)| *i)
            .collect();
        for c in conns {
            self.release(c);
        }
        self.listeners.retain(|_, ch| *ch != channel);
        self.channels.remove(&channel);
    }

    pub fn listen(
        &mut self,
        channel: u64,
        mut addr: SocketAddr,
    ) -> Result<SocketAddr, FabricError> {
        if addr.port() == 0 {
            loop {
                self.next_port = self.next_port.checked_add(1).unwrap_or(20_000);
                let cand = SocketAddr::new(addr.ip(), self.next_port);
                if !self.listeners.contains_key(&cand) {
                    addr = cand;
                    break;
                }
            }
        }
        if self.listeners.contains_key(&addr) {
            return Err(FabricError::AddressInUse(addr));
        }
        self.listeners.insert(addr, channel);
        Ok(addr)
    }

    fn new_conn(&mut self, channel: u64, phase: Phase) -> u64 {
        let id = self.id();
        self.conns.insert(
            id,
            ConnState {
                channel,
                peer: None,
                qp: None,
                phase,
                disconnect_called: false,
                disconnected_sent: false,
                timewait_sent: false,
                peer_rnr_retry: 7,
                request: None,
                local: None,
            },
        );
        id
    }

    /// The request data of a passive connection, taken once.
    pub fn take_request(&mut self, b: u64) -> Option<(Vec<u8>, u8, u8)> {
        self.conns.get_mut(&b).and_then(|c| c.request.take())
    }

    /// The address a passive connection's peer connected to.
    pub fn local_addr(&self, b: u64) -> Option<SocketAddr> {
        self.conns.get(&b).and_then(|c| c.local)
    }

    /// Starts an active connect with an already created (unconnected) QP.
    /// Returns (active conn, passive conn if a listener took it).
    pub fn connect(
        &mut self,
        channel: u64,
        addr: SocketAddr,
        qpn: u32,
        rnr_for_peer: u8,
        request: (Vec<u8>, u8, u8),
    ) -> (u64, Option<u64>) {
        let a = self.new_conn(channel, Phase::Connecting);
        if let Some(c) = self.conns.get_mut(&a) {
            c.qp = Some(qpn);
        }
        let wildcard = SocketAddr::new(
            match addr.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            },
            addr.port(),
        );
        let listener = self
            .listeners
            .get(&addr)
            .or_else(|| self.listeners.get(&wildcard))
            .copied();
        let Some(lch) = listener else {
            if let Some(c) = self.conns.get_mut(&a) {
                c.phase = Phase::Closed;
            }
            self.push_event(
                channel,
                RawEvent::Rejected {
                    conn: a,
                    reason: REJECT_REASON_INVALID_SERVICE_ID,
                    private_data: Vec::new(),
                },
            );
            return (a, None);
        };
        let b = self.new_conn(lch, Phase::Requested);
        if let Some(c) = self.conns.get_mut(&b) {
            c.peer = Some(a);
            c.peer_rnr_retry = rnr_for_peer;
            c.request = Some(request);
            c.local = Some(addr);
        }
        if let Some(c) = self.conns.get_mut(&a) {
            c.peer = Some(b);
        }
        self.push_event(lch, RawEvent::Request(b));
        (a, Some(b))
    }

    pub fn accept(
        &mut self,
        b: u64,
        qpn: u32,
        private_data: &[u8],
        rnr_for_peer: u8,
    ) -> Result<(), FabricError> {
        let Some(cb) = self.conns.get(&b) else {
            return Err(FabricError::UnknownConnection(b));
        };
        let a = cb.peer;
        let rnr_mine = cb.peer_rnr_retry;
        let (a, aqp, ach) = match a.and_then(|a| self.conns.get(&a).map(|c| (a, c))) {
            Some((a, ca)) if ca.phase == Phase::Connecting => match ca.qp {
                Some(q) => (a, q, ca.channel),
                None => return Err(FabricError::UnknownConnection(a)),
            },
            _ => {
                return Err(FabricError::InvalidArgument(
                    "the connecting peer is gone".into(),
                ))
            }
        };
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.peer = Some(aqp);
            q.rnr_retry = rnr_mine;
        }
        if let Some(q) = self.qps.get_mut(&aqp) {
            q.peer = Some(qpn);
            q.rnr_retry = rnr_for_peer;
        }
        for (c, q) in [(a, aqp), (b, qpn)] {
            if let Some(cs) = self.conns.get_mut(&c) {
                cs.phase = Phase::Connected;
                cs.qp = Some(q);
            }
        }
        let bch = self.conns.get(&b).map(|c| c.channel).unwrap_or(0);
        self.push_event(
            ach,
            RawEvent::Established {
                conn: a,
                private_data: pad(private_data, MAX_ACCEPT_PRIVATE_DATA),
            },
        );
        self.push_event(
            bch,
            RawEvent::Established {
                conn: b,
                private_data: Vec::new(),
            },
        );
        Ok(())
    }

    pub fn reject(&mut self, b: u64, private_data: &[u8], reason: i32) {
        let Some(cb) = self.conns.remove(&b) else {
            return;
        };
        if let Some(a) = cb.peer {
            if let Some(ca) = self.conns.get_mut(&a) {
                if ca.phase == Phase::Connecting {
                    ca.phase = Phase::Closed;
                    let ch = ca.channel;
                    self.push_event(
                        ch,
                        RawEvent::Rejected {
                            conn: a,
                            reason,
                            private_data: pad(private_data, MAX_REJECT_PRIVATE_DATA),
                        },
                    );
                }
            }
        }
    }

    pub fn disconnect(&mut self, x: u64) -> Result<(), FabricError> {
        let Some(cx) = self.conns.get_mut(&x) else {
            return Err(FabricError::UnknownConnection(x));
        };
        if cx.phase != Phase::Connected && cx.phase != Phase::Closed {
            return Err(FabricError::InvalidArgument(
                "disconnect before the connection is established".into(),
            ));
        }
        if cx.disconnect_called {
            return Ok(());
        }
        cx.disconnect_called = true;
        cx.phase = Phase::Closed;
        let (qp, peer) = (cx.qp, cx.peer);
        if let Some(q) = qp {
            self.set_error(q);
        }
        let live_peer = peer.filter(|p| self.conns.contains_key(p));
        for c in [Some(x), live_peer].into_iter().flatten() {
            if let Some(cs) = self.conns.get_mut(&c) {
                if !cs.disconnected_sent {
                    cs.disconnected_sent = true;
                    cs.phase = Phase::Closed;
                    let ch = cs.channel;
                    self.push_event(ch, RawEvent::Disconnected(c));
                }
            }
        }
        let peer_done = live_peer.map_or(true, |p| {
            self.conns.get(&p).is_some_and(|c| c.disconnect_called)
        });
        if peer_done {
            for c in [Some(x), live_peer].into_iter().flatten() {
                if let Some(cs) = self.conns.get_mut(&c) {
                    if !cs.timewait_sent {
                        cs.timewait_sent = true;
                        let ch = cs.channel;
                        self.push_event(ch, RawEvent::TimewaitExit(c));
                    }
                }
            }
        }
        Ok(())
    }

    /// Forgets a connection; a live one is disconnected first, an unanswered request rejected.
    pub fn release(&mut self, c: u64) {
        let Some(cs) = self.conns.get(&c) else { return };
        match cs.phase {
            Phase::Requested => {
                self.reject(c, &[], REJECT_REASON_CONSUMER);
                return;
            }
            Phase::Connected => {
                let _ = self.disconnect(c);
            }
            Phase::Connecting => {
                // The passive side's request, if unanswered, loses its peer: accept will fail.
            }
            Phase::Closed => {}
        }
        self.conns.remove(&c);
        // A peer that already disconnected now waits for nobody.
        let peers: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, s)| s.peer == Some(c))
            .map(|(i, _)| *i)
            .collect();
        for p in peers {
            if let Some(ps) = self.conns.get_mut(&p) {
                ps.peer = None;
                if ps.disconnect_called && !ps.timewait_sent {
                    ps.timewait_sent = true;
                    let ch = ps.channel;
                    self.push_event(ch, RawEvent::TimewaitExit(p));
                }
            }
        }
    }
}

type Seg = (Arc<dyn RegionMemory>, usize, usize);

fn gather(segs: &[Seg]) -> Vec<u8> {
    let total = segs.iter().map(|s| s.2).sum();
    let mut v = vec![0u8; total];
    let mut at = 0;
    for (mem, off, len) in segs {
        // Bounds were checked against the registration, which lies within the memory.
        let _ = read_bytes(mem.as_ref(), *off, &mut v[at..at + len]);
        at += len;
    }
    v
}

fn scatter(segs: &[Seg], bytes: &[u8]) {
    let mut at = 0;
    for (mem, off, len) in segs {
        if at >= bytes.len() {
            break;
        }
        let n = (*len).min(bytes.len() - at);
        let _ = write_bytes(mem.as_ref(), *off, &bytes[at..at + n]);
        at += n;
    }
}

enum Step {
    Done,
    Blocked,
}

enum Delivery {
    Delivered,
    Blocked,
    Failed(WcStatus),
}

pub(crate) fn cqe(
    wr_id: WrId,
    status: WcStatus,
    opcode: Option<WcOpcode>,
    byte_len: u32,
    qpn: u32,
    invalidated_rkey: Option<u32>,
) -> Completion {
    Completion {
        wr_id,
        status,
        opcode,
        byte_len,
        qp_num: QpNum(qpn),
        invalidated_rkey,
    }
}

/// The private data a listener sees in a request.
pub(crate) fn request_data(data: &[u8]) -> Vec<u8> {
    pad(data, MAX_CONNECT_PRIVATE_DATA)
}

/// Keeps ConnId conversions in one place.
pub(crate) fn conn_id(c: u64) -> ConnId {
    ConnId(c)
}
