//! The control thread: owns the RDMA CM, accepts or rejects queue pairs, hands them to
//! pollers, tears connections down, enforces keep-alive, and turns array health changes into
//! asynchronous events.
//!
//! It never touches a command: pollers own their queues. What it shares with them is the
//! registry and the controller table (locks on the control path only) and two channels.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_fabric::slab::Endpoint;
use raidline_fabric::sys_poll::wait_ready;
use raidline_fabric::{
    AcceptParams, CmEvent, ConnId, ConnectionManager, Fabric, IncomingRequest, QpCaps, QpInit,
};
use raidline_proto::aen::{AsyncEvent, SmartEvent};
use raidline_proto::rdma_cm::CmReject;

use super::backend::Waker;
use super::poller::PollerMsg;
use super::pool::RecvBuffers;
use super::queue::Queue;
use super::{AuthJob, AuthResult, ControlMsg, Shared};
use crate::queue::QueueRole;

/// How a poller is reached.
pub(crate) struct PollerLink<F: Fabric> {
    pub tx: Sender<PollerMsg<F>>,
    /// Wakes the poller after a message.
    pub wake: super::Notifier,
    pub cq: F::CqHandle,
    /// The poller's shared receive queue, which its I/O queue pairs use (if it has one).
    pub srq: Option<F::SrqHandle>,
    /// Entries of the poller's completion queue.
    pub cq_entries: u32,
    /// Entries its queue pairs (and shared receive queue) may fill at once: every posted
    /// work request can complete, a closing queue pair's all together, so the control thread
    /// places no queue pair where they would overflow the completion queue.
    pub cq_used: u32,
}

impl<F: Fabric> PollerLink<F> {
    /// Sends `msg` to the poller and wakes it.
    fn send(&self, msg: PollerMsg<F>) {
        let _ = self.tx.send(msg);
        (self.wake)();
    }
}

/// Longest sleep of the control thread: pollers' messages, stop requests and RDMA CM events
/// wake it; this bounds how late a keep-alive timeout or an array's health change is seen.
const CONTROL_WAIT: Duration = Duration::from_millis(100);

struct ConnInfo {
    poller: usize,
    /// Completion-queue entries its queue pair may fill (released when it closed).
    cq_need: u32,
    disconnected: bool,
    closed: bool,
    released: bool,
}

pub(crate) struct Control<F: Fabric> {
    pub fabric: Arc<F>,
    pub pd: F::Pd,
    pub cm: F::Cm,
    pub shared: Arc<Shared>,
    pub rx: Receiver<ControlMsg>,
    /// What [`Shared::tell_control`] and a stop request wake.
    waker: Waker,
    pub pollers: Vec<PollerLink<F>>,
    conns: HashMap<ConnId, ConnInfo>,
    next_poller: usize,
    degraded: Vec<usize>,
    last_health: Instant,
    /// The authentication thread's inbox, started with the first step (none without hosts
    /// that must authenticate).
    auth: Option<std::sync::mpsc::Sender<AuthJob>>,
    /// The TSIH the next iSCSI session gets (never 0).
    next_tsih: u16,
}

/// Commands an iSER session may have in flight (its CmdSN window): what open-iscsi's iser
/// transport queues per session by default (`ISER_DEF_XMIT_CMDS_MAX`).
const ISER_QUEUE_DEPTH: u32 = 128;
/// Receives beyond the command window. A write with immediate data keeps its receive until its
/// data is written, so a full window and [`crate::iser::MAX_IMMEDIATE_TASKS`] immediate
/// commands hold that many; eight more stay posted for what the initiator sends immediately
/// (NOP-Out, task management, Logout, Text).
const ISER_EXTRA_RECVS: u32 = crate::iser::MAX_IMMEDIATE_TASKS as u32 + 8;

impl<F: Fabric> Control<F> {
    pub(crate) fn new(
        fabric: Arc<F>,
        pd: F::Pd,
        cm: F::Cm,
        shared: Arc<Shared>,
        (rx, waker): (Receiver<ControlMsg>, Waker),
        pollers: Vec<PollerLink<F>>,
    ) -> Self {
        let degraded = shared
            .arrays
            .iter()
            .map(|a| a.array().map_or(0, |arr| arr.degraded_roles().len()))
            .collect();
        Control {
            waker,
            fabric,
            pd,
            cm,
            shared,
            rx,
            pollers,
            conns: HashMap::new(),
            next_poller: 0,
            degraded,
            last_health: Instant::now(),
            auth: None,
            next_tsih: 1,
        }
    }

    /// Hands an authentication step to the authentication thread (started on first use): its
    /// modular exponentiations (53 ms for an ffdhe8192 exchange) must not hold up RDMA CM
    /// events, keep-alive, array health or a stop request here, whatever a host sends.
    fn authenticate(&mut self, job: AuthJob) {
        if self.auth.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<AuthJob>();
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("raidline-auth".into())
                .spawn(move || {
                    for mut job in rx {
                        let result = job.run();
                        shared.tell_control(ControlMsg::AuthDone(job, result));
                    }
                });
            match spawned {
                Ok(_) => self.auth = Some(tx),
                Err(e) => {
                    tracing::error!("cannot start the authentication thread: {e}");
                }
            }
        }
        let job = match &self.auth {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(std::sync::mpsc::SendError(job)) => job,
            },
            None => job,
        };
        // No thread: the step runs here rather than never.
        let mut job = job;
        let result = job.run();
        self.auth_done(job, result);
    }

    fn auth_done(&mut self, job: AuthJob, result: AuthResult) {
        if let Some(p) = self.pollers.get(job.poller) {
            p.send(PollerMsg::AuthDone {
                conn: job.conn,
                auth: job.auth,
                result,
            });
        }
    }

    /// Runs until [`Shared::exit`] is set; then disconnects whatever is left.
    pub(crate) fn run(mut self) {
        let mut drained = false;
        loop {
            // Sleep only after one more look at the inbox with the waker's flag up (see
            // backend::Waker); CM events wake through their channel's descriptor.
            self.waker.sleeping();
            if let Ok(msg) = self.rx.try_recv() {
                self.waker.awake();
                self.on_msg(msg);
            } else {
                let ready = wait_ready(&[&self.cm, &self.waker], CONTROL_WAIT).unwrap_or(0b10);
                self.waker.awake();
                if ready & 0b10 != 0 {
                    self.waker.drain();
                }
            }
            loop {
                match self.cm.poll_event() {
                    Ok(Some(ev)) => self.on_event(ev),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!("RDMA CM event channel failed: {e}");
                        break;
                    }
                }
            }
            while let Ok(msg) = self.rx.try_recv() {
                self.on_msg(msg);
            }
            self.keep_alive();
            if self.last_health.elapsed() >= Duration::from_millis(250) {
                self.last_health = Instant::now();
                self.health();
            }
            if self.shared.stopping.load(Ordering::Acquire) && !drained {
                drained = true;
                for p in &self.pollers {
                    p.send(PollerMsg::Drain);
                }
            }
            if self.shared.exit.load(Ordering::Acquire) {
                let conns: Vec<ConnId> = self.conns.keys().copied().collect();
                for c in conns {
                    let _ = self.cm.disconnect(c);
                    self.cm.release(c);
                }
                return;
            }
        }
    }

    fn on_event(&mut self, ev: CmEvent<F>) {
        match ev {
            CmEvent::ConnectRequest(req) => self.on_request(req),
            CmEvent::Established { conn, .. } => {
                tracing::debug!("connection {conn:?} established");
            }
            CmEvent::Disconnected { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    if !c.disconnected {
                        c.disconnected = true;
                        let _ = self.cm.disconnect(conn);
                    }
                    if !c.closed {
                        self.pollers[c.poller]
                            .send(PollerMsg::Close(conn, "host disconnected".into()));
                    }
                }
            }
            CmEvent::TimewaitExit { conn } => {
                self.cm.release(conn);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.released = true;
                    if c.closed {
                        self.conns.remove(&conn);
                    }
                }
            }
            CmEvent::DeviceRemoval { conn } => {
                tracing::error!("RDMA device removed (connection {conn:?}): closing every queue");
                let all: Vec<(ConnId, usize)> =
                    self.conns.iter().map(|(k, v)| (*k, v.poller)).collect();
                for (c, p) in all {
                    self.pollers[p].send(PollerMsg::Close(c, "RDMA device removed".into()));
                }
            }
            CmEvent::Rejected { .. } | CmEvent::ConnectFailed { .. } => {}
        }
    }

    fn on_request(&mut self, req: F::Request) {
        let info = req.info().clone();
        let peer = info
            .remote_addr
            .map_or_else(|| "unknown address".to_string(), |a| a.to_string());
        if self.shared.stopping.load(Ordering::Acquire) {
            tracing::info!("refusing a connection from {peer}: shutting down");
            let _ = self.cm.reject(req, &[]);
            return;
        }
        if let Some(served) = self
            .shared
            .iscsi
            .clone()
            .filter(|s| s.is_iser_port(info.local_addr))
        {
            return self.on_iser_request(req, &info, &served, &peer);
        }
        let limits = self.shared.limits;
        let setup = match crate::cm::decide(
            &info.private_data,
            // The CM swapped the host's values: this is its responder resources, the RDMA
            // READs we may have outstanding against it.
            info.initiator_depth,
            self.fabric.attrs().max_qp_init_rd_atom,
            &limits,
        ) {
            Ok(s) => s,
            Err(status) => {
                tracing::warn!("rejecting an RDMA connection from {peer}: {status:?}");
                let rej = CmReject { recfmt: 0, status };
                let _ = self.cm.reject(req, &rej.to_bytes());
                return;
            }
        };
        let depth = usize::from(setup.depth);
        let icd = if setup.qid == 0 {
            0
        } else {
            limits.in_capsule_data as usize
        };
        // Per command a response chain (RDMA WRITE + SEND) or an RDMA READ, two spare, and one
        // slot for the pacer's RTT probe so a probe never holds back a response; with pacing
        // on, room for the paced chunks of read data ahead of their responses.
        let chunks = if setup.qid != 0 {
            self.chunk_slots()
        } else {
            0
        };
        let sq = 2 * depth as u32 + 3 + chunks;
        // The next poller (round robin) whose completion queue has room for this queue pair:
        // its sends, and its receives unless it takes them from the shared receive queue.
        let n = self.pollers.len().max(1);
        let need = |l: &super::control::PollerLink<F>| {
            sq + if l.srq.is_some() && setup.qid != 0 {
                0
            } else {
                depth as u32
            }
        };
        let start = self.next_poller;
        self.next_poller = self.next_poller.wrapping_add(1);
        let Some(p) = (0..n).map(|k| (start + k) % n).find(|&p| {
            self.pollers[p].cq_used + need(&self.pollers[p]) <= self.pollers[p].cq_entries
        }) else {
            tracing::error!(
                "rejecting a queue from {peer}: every poller's completion queue is full ({} \
                 entries each; a queue pair needs {}); use more cores or the shared receive \
                 queue",
                self.pollers[0].cq_entries,
                need(&self.pollers[0])
            );
            let _ = self.cm.reject(req, &[]);
            return;
        };
        let cq_need = need(&self.pollers[p]);
        // I/O queues take their commands from the poller's shared receive queue when it has
        // one; the admin queue keeps its own few receives.
        let srq = self.pollers[p].srq.clone().filter(|_| setup.qid != 0);
        let (bufs, slots) = if srq.is_some() {
            (None, Vec::new())
        } else {
            let account = &self.shared.data_path.receive_bytes;
            match RecvBuffers::new(&*self.fabric, &self.pd, depth, icd, false, account) {
                Ok((b, slots)) => (Some(b), slots),
                Err(e) => {
                    tracing::error!("rejecting a queue from {peer}: receive buffers: {e}");
                    let _ = self.cm.reject(req, &[]);
                    return;
                }
            }
        };
        let init = QpInit {
            pd: self.pd.clone(),
            send_cq: self.pollers[p].cq.clone(),
            recv_cq: self.pollers[p].cq.clone(),
            srq,
            caps: QpCaps {
                max_send_wr: sq,
                max_recv_wr: if bufs.is_none() { 0 } else { depth as u32 },
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
        };
        let params = AcceptParams {
            private_data: setup.accept.to_bytes().to_vec(),
            responder_resources: info
                .responder_resources
                .min(u8::try_from(self.fabric.attrs().max_qp_rd_atom).unwrap_or(u8::MAX)),
            initiator_depth: setup.initiator_depth,
            rnr_retry_count: 7,
        };
        let qp = match self.cm.accept(req, init, params) {
            Ok(qp) => qp,
            Err((e, req)) => {
                tracing::error!("accepting a queue from {peer} failed: {e}");
                let _ = self.cm.reject(req, &[]);
                return;
            }
        };
        let mut q = Queue::new(
            info.conn,
            Endpoint::new(qp, sq),
            setup,
            bufs,
            info.remote_addr,
            None,
        );
        q.post_receives(slots);
        tracing::debug!(
            "queue {} from {peer} accepted on poller {p} (depth {}, ORD {})",
            setup.qid,
            setup.depth,
            setup.initiator_depth
        );
        self.pollers[p].cq_used += cq_need;
        self.conns.insert(
            info.conn,
            ConnInfo {
                poller: p,
                cq_need,
                disconnected: false,
                closed: false,
                released: false,
            },
        );
        self.pollers[p].send(PollerMsg::NewQueue(Box::new(q)));
    }

    /// An iSER connect request (it came in on an iSCSI portal): a queue pair with receives of
    /// the iSER header and BHS plus 8 KiB of data segment, on the next poller with room.
    fn on_iser_request(
        &mut self,
        req: F::Request,
        info: &raidline_fabric::RequestInfo,
        served: &super::iscsi::IscsiServed,
        peer: &str,
    ) {
        let cm = raidline_scsi::iser::CmPrivateData::parse(&info.private_data);
        let recvs = ISER_QUEUE_DEPTH + ISER_EXTRA_RECVS;
        // Per command an RDMA READ, or an RDMA WRITE and its response; per immediate PDU a
        // response; three spare (a NOP-In ping among them); with pacing on, room for the paced
        // chunks of read data ahead of their responses, as an NVMe/RDMA I/O queue has.
        let sq = 2 * recvs + 3 + self.chunk_slots();
        let need = sq + recvs;
        let n = self.pollers.len().max(1);
        let start = self.next_poller;
        self.next_poller = self.next_poller.wrapping_add(1);
        let Some(p) = (0..n)
            .map(|k| (start + k) % n)
            .find(|&p| self.pollers[p].cq_used + need <= self.pollers[p].cq_entries)
        else {
            tracing::error!(
                "rejecting an iSER connection from {peer}: every poller's completion queue is full"
            );
            let _ = self.cm.reject(req, &[]);
            return;
        };
        let account = &self.shared.data_path.receive_bytes;
        let (bufs, slots) = match RecvBuffers::with_head(
            &*self.fabric,
            &self.pd,
            recvs as usize,
            crate::iser::HEAD_LEN,
            crate::iser::LOGIN_RECV_DATA as usize,
            false,
            account,
        ) {
            Ok(x) => x,
            Err(e) => {
                tracing::error!("rejecting an iSER connection from {peer}: receive buffers: {e}");
                let _ = self.cm.reject(req, &[]);
                return;
            }
        };
        let init = QpInit {
            pd: self.pd.clone(),
            send_cq: self.pollers[p].cq.clone(),
            recv_cq: self.pollers[p].cq.clone(),
            srq: None,
            caps: QpCaps {
                max_send_wr: sq,
                max_recv_wr: recvs,
                max_send_sge: 2,
                max_recv_sge: 2,
                // A SCSI Response with sense is 28 + 48 + 20 bytes: it goes inline.
                max_inline_data: 128,
            },
        };
        let attrs = self.fabric.attrs();
        // RDMA READs fetch write data: as many in flight as the initiator serves and the
        // device allows (LIO accepts with min(requested, max_qp_init_rd_atom)).
        let initiator_depth = info
            .initiator_depth
            .min(u8::try_from(attrs.max_qp_init_rd_atom).unwrap_or(u8::MAX))
            .max(1);
        let params = AcceptParams {
            private_data: raidline_scsi::iser::CmPrivateData::target_answer()
                .to_bytes()
                .to_vec(),
            responder_resources: info
                .responder_resources
                .min(u8::try_from(attrs.max_qp_rd_atom).unwrap_or(u8::MAX)),
            initiator_depth,
            rnr_retry_count: 7,
        };
        let tsih = std::num::NonZeroU16::new(self.next_tsih).unwrap_or(std::num::NonZeroU16::MIN);
        self.next_tsih = self.next_tsih.checked_add(1).unwrap_or(1);
        let conn = match served.connection(info.local_addr, ISER_QUEUE_DEPTH, tsih) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("rejecting an iSER connection from {peer}: {e}");
                let _ = self.cm.reject(req, &[]);
                return;
            }
        };
        let qp = match self.cm.accept(req, init, params) {
            Ok(qp) => qp,
            Err((e, req)) => {
                tracing::error!("accepting an iSER connection from {peer} failed: {e}");
                let _ = self.cm.reject(req, &[]);
                return;
            }
        };
        let setup = crate::cm::QueueSetup {
            qid: 1,
            depth: recvs as u16,
            host_recv_depth: ISER_QUEUE_DEPTH as u16,
            initiator_depth,
            accept: raidline_proto::rdma_cm::CmAccept {
                recfmt: 0,
                crqsize: 0,
            },
        };
        let mut q = Queue::new(
            info.conn,
            Endpoint::new(qp, sq),
            setup,
            Some(bufs),
            info.remote_addr,
            Some(Box::new(conn)),
        );
        q.post_receives(slots);
        tracing::info!(
            "iSER connection from {peer} accepted on poller {p} (ZBVA {}, send with invalidate {})",
            if cm.zbva_not_supported() {
                "not supported"
            } else {
                "supported"
            },
            if cm.send_with_invalidate_not_supported() {
                "not supported"
            } else {
                "supported"
            },
        );
        self.pollers[p].cq_used += need;
        self.conns.insert(
            info.conn,
            ConnInfo {
                poller: p,
                cq_need: need,
                disconnected: false,
                closed: false,
                released: false,
            },
        );
        self.pollers[p].send(PollerMsg::NewQueue(Box::new(q)));
    }

    fn on_msg(&mut self, msg: ControlMsg) {
        match msg {
            ControlMsg::Auth(job) => self.authenticate(job),
            ControlMsg::AuthDone(job, result) => self.auth_done(job, result),
            ControlMsg::CloseConn { conn, reason } => self.close_conn(conn, reason),
            ControlMsg::QueueClosed { conn, role, reason } => {
                self.queue_closed(role, &reason);
                if let Some(c) = self.conns.get_mut(&conn) {
                    if !c.closed {
                        let l = &mut self.pollers[c.poller];
                        l.cq_used = l.cq_used.saturating_sub(c.cq_need);
                    }
                    c.closed = true;
                    if !c.disconnected {
                        c.disconnected = true;
                        let _ = self.cm.disconnect(conn);
                    }
                    if c.released {
                        self.conns.remove(&conn);
                    }
                }
            }
        }
    }

    fn queue_closed(&mut self, role: QueueRole, reason: &str) {
        match role {
            QueueRole::Admin { cntlid } => {
                let io = {
                    let mut reg = self
                        .shared
                        .registry
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    reg.remove_controller(cntlid)
                };
                let entry = self
                    .shared
                    .controllers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&cntlid);
                if let Some(e) = entry {
                    tracing::info!(
                        "controller {cntlid} disconnected: host {} ({}) from {}: {reason}",
                        e.hostnqn,
                        e.host_addr,
                        e.subnqn
                    );
                    for (qid, conn, poller) in e.conns {
                        if qid != 0 && io.contains(&qid) {
                            self.pollers[poller]
                                .send(PollerMsg::Close(conn, "controller went away".into()));
                        }
                    }
                }
            }
            QueueRole::Io { cntlid, qid } => {
                {
                    let mut reg = self
                        .shared
                        .registry
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    reg.io_queue_gone(cntlid, qid);
                }
                let mut ctrls = self
                    .shared
                    .controllers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if let Some(e) = ctrls.get_mut(&cntlid) {
                    e.conns.retain(|(q, _, _)| *q != qid);
                }
                tracing::debug!("controller {cntlid}: I/O queue {qid} closed: {reason}");
            }
            QueueRole::Unconnected => {
                tracing::debug!("unconnected queue closed: {reason}");
            }
        }
    }

    fn keep_alive(&mut self) {
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut ctrls = self
                .shared
                .controllers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for (cntlid, e) in ctrls.iter_mut() {
                if e.expired {
                    continue;
                }
                let exp = e
                    .ctrl
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .handle_timeout(now);
                if let Some(crate::controller::Expiry::KeepAlive { kato }) = exp {
                    e.expired = true;
                    tracing::warn!(
                        "controller {cntlid}: keep-alive timeout ({} ms) expired for host {} ({}); tearing it down",
                        kato.as_millis(),
                        e.hostnqn,
                        e.host_addr
                    );
                    expired.extend(e.conns.iter().map(|(_, c, _)| *c));
                }
            }
        }
        for conn in expired {
            self.close_conn(conn, "keep-alive timeout".into());
        }
    }

    /// Send-queue slots an I/O queue pair keeps for paced chunks of read data: none while
    /// pacing is off.
    fn chunk_slots(&self) -> u32 {
        if self.shared.cc.current().is_some() {
            super::poller::CHUNK_SLOTS
        } else {
            0
        }
    }

    /// Tears a connection down: its poller closes the queue, and the host is disconnected.
    fn close_conn(&mut self, conn: ConnId, reason: String) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if !c.closed {
                self.pollers[c.poller].send(PollerMsg::Close(conn, reason));
            }
            if !c.disconnected {
                c.disconnected = true;
                let _ = self.cm.disconnect(conn);
            }
        }
    }

    /// Posts a SMART reliability event to the controllers of every subsystem using an array
    /// whose number of missing members changed, and keeps their critical warning bit current.
    fn health(&mut self) {
        for (i, a) in self.shared.arrays.iter().enumerate() {
            // A refused array counts as whole until it runs: once started, its missing
            // members show here as a change.
            let Some(array) = a.array() else { continue };
            let now = array.degraded_roles().len();
            if now == self.degraded[i] {
                continue;
            }
            let was = self.degraded[i];
            self.degraded[i] = now;
            if now > was {
                tracing::warn!("array {}: degraded ({now} member(s) missing)", a.name);
            } else {
                tracing::info!("array {}: {now} member(s) missing (was {was})", a.name);
            }
            let subs: Vec<String> = self
                .shared
                .namespaces
                .iter()
                .filter(|n| n.array.as_deref() == Some(a.name.as_str()))
                .map(|n| n.subnqn.to_string())
                .collect();
            let ctrls = self
                .shared
                .controllers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for e in ctrls.values().filter(|e| subs.contains(&e.subnqn)) {
                let mut c = e.ctrl.lock().unwrap_or_else(|p| p.into_inner());
                let s = c.stats_mut();
                if now > 0 {
                    s.critical_warning |= 1 << 2;
                } else {
                    s.critical_warning &= !(1 << 2);
                }
                c.post_event(AsyncEvent::smart(SmartEvent::RELIABILITY), &[]);
            }
            drop(ctrls);
            self.shared.wake_pollers();
        }
    }
}
