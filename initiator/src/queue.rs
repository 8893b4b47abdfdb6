//! One NVMe/RDMA queue seen from the host: its RDMA CM connection, its registered memory, and
//! the life cycle of every command slot on it.
//!
//! Memory: one registered region per queue, laid out as `depth` 64-byte SQE slots, `depth`
//! 16-byte response buffers (each permanently posted as a receive), and `depth` data buffers of
//! `data_slot` bytes. A command's [`Tag`] indexes its SQE slot and its data buffer, and is the
//! command identifier on the wire, so a response names its slot directly.
//!
//! Life cycle of a slot (moved only here):
//! `Free` →[`Queue::alloc`]→ `Reserved` (the caller fills the data buffer) →[`Queue::submit`]→
//! `InFlight { sent, cqe }` → `Done(result)` once both the SEND completed and the response
//! arrived (either order), or at once on a queue failure →[`Queue::take`]→ `Free`.
//!
//! Failures never hang: every command but the Asynchronous Event Request carries a deadline; a
//! command past it, an RDMA CM disconnect, a transport error completion or a response for a
//! command that is not in flight takes the whole queue down — the QP goes to the error state
//! and every slot in flight completes with the error. A down queue refuses new commands.
//!
//! Invariants: at most `depth` commands are in flight (each has a posted receive for its
//! response, and the controller's receive queue is at least as deep); the data buffer of a slot
//! in flight is never touched by the host.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_fabric::slab::Endpoint;
use raidline_fabric::{
    Access, CmEvent, Completion, CompletionQueue, ConnId, ConnectParams, ConnectionManager,
    DmaMemory, Fabric, MemoryRegion, Payload, QpCaps, QpInit, QueuePair, SendOp, SendWr, Sge,
    WcStatus,
};
use raidline_proto::cqe::CQE_LEN;
use raidline_proto::rdma_cm::{CmAccept, CmReject, CmRequest};
use raidline_proto::sqe::SQE_LEN;
use raidline_proto::{Cqe, SglDescriptor, Sqe};

use crate::error::Error;
use crate::types::{Qid, Tag};

/// How a queue is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueParams {
    /// Queue id (0 = admin).
    pub qid: Qid,
    /// Queue size: commands in flight at most, receives posted (hrqsize), SQSIZE + 1.
    pub depth: u16,
    /// Bytes of data buffer per command slot.
    pub data_slot: u32,
    /// Controller id for the CM request (I/O queues: the admin queue's; admin: 0).
    pub cntlid: u16,
    /// Deadline of every command and of the connection setup.
    pub timeout: Duration,
}

/// Where a command's data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xfer {
    /// No data (a null keyed SGL, as Linux sends).
    None,
    /// The controller writes `len` bytes into the slot's buffer (RDMA WRITE; reads, Identify).
    ToHost(u32),
    /// The controller takes `len` bytes from the slot's buffer: in the capsule when the queue
    /// allows it and they fit, else by RDMA READ through a keyed SGL.
    FromHost(u32),
}

#[derive(Debug, Clone, Copy)]
enum Ctx {
    Send(u16),
    Recv(u16),
}

enum Phase {
    Free,
    Reserved,
    InFlight {
        sent: bool,
        cqe: Option<Cqe>,
        start: Instant,
        deadline: Option<Instant>,
        command: &'static str,
    },
    Done {
        result: Result<Cqe, Error>,
        latency: Duration,
    },
}

/// What a finished command gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The response (success status) or why the command failed.
    pub result: Result<Cqe, Error>,
    /// From submission to completion.
    pub latency: Duration,
}

/// One connected NVMe/RDMA queue.
pub struct Queue<F: Fabric> {
    qid: Qid,
    depth: u16,
    data_slot: u32,
    timeout: Duration,
    cm: F::Cm,
    conn: ConnId,
    ep: Endpoint<F::Qp, Ctx>,
    cq: F::Cq,
    mr: F::Mr,
    mem: Arc<DmaMemory>,
    cqe_base: u64,
    data_base: u64,
    slots: Vec<Phase>,
    free: Vec<u16>,
    in_flight: usize,
    crqsize: u16,
    in_capsule_max: u32,
    down: Option<String>,
    disconnected: bool,
    scratch: Vec<Completion>,
    last_check: Instant,
    last_cm: Instant,
    polls_since_check: u32,
}

const CHECK_EVERY: Duration = Duration::from_millis(1);
const CM_EVERY: Duration = Duration::from_millis(5);

impl<F: Fabric> Queue<F> {
    /// Connects a queue to `addr`: RDMA CM connect with the NVMe/RDMA request private data,
    /// receives posted for every response. The Fabrics Connect command is the caller's next step.
    pub fn connect(
        fabric: &F,
        pd: &F::Pd,
        addr: SocketAddr,
        p: &QueueParams,
    ) -> Result<Queue<F>, Error> {
        let qid = p.qid;
        if p.depth < 2 || p.data_slot == 0 || p.data_slot > 0x00FF_FFFF {
            return Err(Error::InvalidArgument(format!(
                "queue {qid}: depth {} and data slot {} (need depth ≥ 2, 1 ≤ slot < 16 MiB)",
                p.depth, p.data_slot
            )));
        }
        let depth = u64::from(p.depth);
        let cqe_base = depth * SQE_LEN as u64;
        let data_base = (cqe_base + depth * CQE_LEN as u64).next_multiple_of(4096);
        let total = data_base + depth * u64::from(p.data_slot);
        let total = usize::try_from(total)
            .map_err(|_| Error::InvalidArgument(format!("queue {qid}: {total} bytes")))?;
        let mem = Arc::new(DmaMemory::new(total, false)?);
        let mr = fabric.register(pd, mem.clone(), Access::ALL)?;
        let cq = fabric.create_cq(2 * u32::from(p.depth) + 4)?;
        let mut cm = fabric.create_cm()?;
        let attrs = fabric.attrs();
        let req = CmRequest {
            recfmt: 0,
            qid: qid.0,
            hrqsize: p.depth,
            hsqsize: p.depth - 1,
            cntlid: p.cntlid,
        };
        let params = ConnectParams {
            private_data: req.to_bytes().to_vec(),
            responder_resources: u8::try_from(attrs.max_qp_rd_atom).unwrap_or(u8::MAX),
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            resolve_timeout_ms: u32::try_from(p.timeout.as_millis().min(5000)).unwrap_or(5000),
        };
        let init = QpInit::<F> {
            pd: pd.clone(),
            send_cq: cq.handle(),
            recv_cq: cq.handle(),
            srq: None,
            caps: QpCaps {
                max_send_wr: u32::from(p.depth) + 1,
                max_recv_wr: u32::from(p.depth),
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        };
        let conn = cm.connect(addr, params, init)?;
        let deadline = Instant::now() + p.timeout;
        let mut idle = 0u32;
        let (qp, accept) = loop {
            match cm.poll_event()? {
                Some(CmEvent::Established {
                    conn: c,
                    qp: Some(qp),
                    private_data,
                }) if c == conn => break (qp, private_data),
                Some(CmEvent::Rejected {
                    conn: c,
                    reason,
                    private_data,
                }) if c == conn => {
                    cm.release(conn);
                    let status = CmReject::parse(&private_data)
                        .ok()
                        .filter(|r| r.status.0 != 0)
                        .map(|r| r.status);
                    return Err(Error::Rejected {
                        qid,
                        reason,
                        status,
                    });
                }
                Some(CmEvent::ConnectFailed { conn: c, reason }) if c == conn => {
                    cm.release(conn);
                    return Err(Error::ConnectFailed { qid, reason });
                }
                Some(CmEvent::Disconnected { conn: c }) if c == conn => {
                    cm.release(conn);
                    return Err(Error::Disconnected { qid });
                }
                Some(_) => idle = 0,
                None => {
                    if Instant::now() > deadline {
                        cm.release(conn);
                        return Err(Error::Timeout {
                            qid,
                            cid: 0xFFFF,
                            command: "RDMA CM connect",
                            after: p.timeout,
                        });
                    }
                    idle += 1;
                    backoff(idle);
                }
            }
        };
        // Targets that predate the accept data send none; assume the queue size then.
        let crqsize = CmAccept::parse(&accept)
            .ok()
            .map(|a| a.crqsize)
            .filter(|&c| c != 0)
            .unwrap_or(p.depth);
        let mut slots = Vec::with_capacity(usize::from(p.depth));
        slots.resize_with(usize::from(p.depth), || Phase::Free);
        let now = Instant::now();
        let mut q = Queue {
            qid,
            depth: p.depth,
            data_slot: p.data_slot,
            timeout: p.timeout,
            cm,
            conn,
            ep: Endpoint::new(qp, u32::from(p.depth) + 1),
            cq,
            mr,
            mem,
            cqe_base,
            data_base,
            slots,
            free: (0..p.depth).rev().collect(),
            in_flight: 0,
            crqsize,
            in_capsule_max: 0,
            down: None,
            disconnected: false,
            scratch: Vec::with_capacity(64),
            last_check: now,
            last_cm: now,
            polls_since_check: 0,
        };
        for i in 0..p.depth {
            q.post_recv(i)?;
        }
        Ok(q)
    }

    /// The queue id.
    pub fn qid(&self) -> Qid {
        self.qid
    }
    /// The queue size.
    pub fn depth(&self) -> u16 {
        self.depth
    }
    /// The controller's receive queue size from the CM accept.
    pub fn crqsize(&self) -> u16 {
        self.crqsize
    }
    /// Bytes of data buffer per slot.
    pub fn data_slot(&self) -> u32 {
        self.data_slot
    }
    /// Commands in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
    /// Commands that may be in flight at once: the queue size, bounded by the controller's
    /// receive queue.
    pub fn max_in_flight(&self) -> usize {
        usize::from(self.depth.min(self.crqsize))
    }
    /// The command timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// Sets the command timeout for commands submitted from now on.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }
    /// Largest write sent in the capsule (0: never).
    pub fn in_capsule_max(&self) -> u32 {
        self.in_capsule_max
    }
    /// Allows in-capsule writes up to `bytes` (the controller's IOCCSZ·16 − 64 when it sets
    /// SGLS bit 20), capped by the slot size.
    pub fn set_in_capsule_max(&mut self, bytes: u32) {
        self.in_capsule_max = bytes.min(self.data_slot);
    }
    /// Why the queue is down, if it is.
    pub fn down_reason(&self) -> Option<&str> {
        self.down.as_deref()
    }

    /// A free slot, or `None` when every slot is taken or the flight limit is reached (slots
    /// reserved, in flight or finished but not yet taken all count).
    pub fn alloc(&mut self) -> Option<Tag> {
        let used = usize::from(self.depth) - self.free.len();
        if used >= self.max_in_flight() {
            return None;
        }
        let i = self.free.pop()?;
        self.slots[usize::from(i)] = Phase::Reserved;
        Some(Tag(i))
    }

    /// Gives back a reserved or finished slot without submitting it.
    pub fn release(&mut self, tag: Tag) {
        if let Some(s) = self.slots.get_mut(tag.index()) {
            if matches!(s, Phase::Reserved | Phase::Done { .. }) {
                *s = Phase::Free;
                self.free.push(tag.0);
            }
        }
    }

    /// Copies `src` into the slot's data buffer at `offset`.
    pub fn write_data(&self, tag: Tag, offset: u32, src: &[u8]) -> Result<(), Error> {
        self.check_range(offset, src.len())?;
        self.mem
            .write(self.data_off(tag) + offset as usize, src)
            .map_err(Error::from)
    }

    /// Copies the slot's data buffer at `offset` into `dst`.
    pub fn read_data(&self, tag: Tag, offset: u32, dst: &mut [u8]) -> Result<(), Error> {
        self.check_range(offset, dst.len())?;
        self.mem
            .read(self.data_off(tag) + offset as usize, dst)
            .map_err(Error::from)
    }

    fn check_range(&self, offset: u32, len: usize) -> Result<(), Error> {
        if u64::from(offset) + len as u64 > u64::from(self.data_slot) {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes at {offset} exceed the {}-byte data slot",
                self.data_slot
            )));
        }
        Ok(())
    }

    fn data_off(&self, tag: Tag) -> usize {
        (self.data_base + tag.index() as u64 * u64::from(self.data_slot)) as usize
    }

    /// Sends `sqe` from the reserved slot `tag` (its command identifier and data pointer are
    /// set here). `command` names it in errors. `deadline: false` exempts it from the timeout
    /// (the Asynchronous Event Request). On error the slot stays reserved.
    pub fn submit(
        &mut self,
        tag: Tag,
        mut sqe: Sqe,
        xfer: Xfer,
        command: &'static str,
        deadline: bool,
    ) -> Result<(), Error> {
        if let Some(cause) = &self.down {
            return Err(Error::QueueDown {
                qid: self.qid,
                cause: cause.clone(),
            });
        }
        if !matches!(self.slots.get(tag.index()), Some(Phase::Reserved)) {
            return Err(Error::InvalidArgument(format!(
                "queue {}: slot {} is not reserved",
                self.qid,
                tag.index()
            )));
        }
        sqe.set_cid(tag.0);
        let data_addr = self.mr.addr() + self.data_off(tag) as u64;
        let (sgl, in_capsule) = match xfer {
            Xfer::None => (
                SglDescriptor::Keyed {
                    address: 0,
                    length: 0,
                    key: 0,
                    invalidate: false,
                },
                0,
            ),
            Xfer::ToHost(len) | Xfer::FromHost(len) if len > self.data_slot => {
                return Err(Error::InvalidArgument(format!(
                    "{len} bytes exceed the {}-byte data slot",
                    self.data_slot
                )))
            }
            Xfer::FromHost(len) if len > 0 && len <= self.in_capsule_max => (
                SglDescriptor::InCapsule {
                    offset: 0,
                    length: len,
                },
                len,
            ),
            Xfer::ToHost(len) | Xfer::FromHost(len) => (
                SglDescriptor::Keyed {
                    address: data_addr,
                    length: len,
                    key: self.mr.rkey(),
                    invalidate: false,
                },
                0,
            ),
        };
        sqe.set_sgl1(&sgl)?;
        let sqe_off = tag.index() * SQE_LEN;
        self.mem.write(sqe_off, sqe.as_bytes())?;
        let mut sges = [self.mr.sge(sqe_off as u64, SQE_LEN as u32)?, EMPTY_SGE];
        let n = if in_capsule > 0 {
            sges[1] = self.mr.sge(self.data_off(tag) as u64, in_capsule)?;
            2
        } else {
            1
        };
        let mut wr = [SendWr {
            wr_id: Default::default(),
            op: SendOp::Send,
            payload: Payload::Sges(&sges[..n]),
            signaled: true,
        }];
        if let Err(r) = self.ep.post_send(Ctx::Send(tag.0), &mut wr) {
            return Err(Error::Post {
                qid: self.qid,
                error: r.error,
            });
        }
        let start = Instant::now();
        self.slots[tag.index()] = Phase::InFlight {
            sent: false,
            cqe: None,
            start,
            deadline: deadline.then(|| start + self.timeout),
            command,
        };
        self.in_flight += 1;
        Ok(())
    }

    /// Polls for progress; appends the slots that finished to `finished` and returns how many.
    /// Also checks deadlines and RDMA CM events, at most every millisecond.
    pub fn poll(&mut self, finished: &mut Vec<Tag>) -> usize {
        let before = finished.len();
        let mut comps = std::mem::take(&mut self.scratch);
        comps.clear();
        let n = match self.cq.poll(&mut comps, 64) {
            Ok(n) => n,
            Err(e) => {
                self.fail(Error::Fabric(e), finished);
                0
            }
        };
        for c in &comps {
            self.on_completion(c, finished);
        }
        self.scratch = comps;
        self.polls_since_check += 1;
        if n == 0 || self.polls_since_check >= 1024 {
            self.polls_since_check = 0;
            self.housekeeping(finished);
        }
        finished.len() - before
    }

    fn housekeeping(&mut self, finished: &mut Vec<Tag>) {
        let now = Instant::now();
        if now.duration_since(self.last_check) >= CHECK_EVERY {
            self.last_check = now;
            let expired = self.slots.iter().enumerate().find_map(|(i, s)| match s {
                Phase::InFlight {
                    deadline: Some(d),
                    command,
                    start,
                    ..
                } if now > *d => Some((i, *command, now.duration_since(*start))),
                _ => None,
            });
            if let Some((i, command, after)) = expired {
                self.fail(
                    Error::Timeout {
                        qid: self.qid,
                        cid: i as u16,
                        command,
                        after,
                    },
                    finished,
                );
            }
        }
        if now.duration_since(self.last_cm) >= CM_EVERY {
            self.last_cm = now;
            self.poll_cm(finished);
        }
    }

    fn poll_cm(&mut self, finished: &mut Vec<Tag>) {
        loop {
            match self.cm.poll_event() {
                Ok(Some(CmEvent::Disconnected { conn })) if conn == self.conn => {
                    if !self.disconnected {
                        self.disconnected = true;
                        let _ = self.cm.disconnect(self.conn);
                    }
                    self.fail(Error::Disconnected { qid: self.qid }, finished);
                }
                Ok(Some(CmEvent::DeviceRemoval { .. })) => {
                    self.fail(Error::Disconnected { qid: self.qid }, finished)
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.fail(Error::Fabric(e), finished);
                    break;
                }
            }
        }
    }

    fn on_completion(&mut self, c: &Completion, finished: &mut Vec<Tag>) {
        let Some(done) = self.ep.complete(c) else {
            if c.status != WcStatus::Success && self.down.is_none() {
                self.fail(
                    Error::Transport {
                        qid: self.qid,
                        status: c.status,
                    },
                    finished,
                );
            }
            return;
        };
        if c.status != WcStatus::Success {
            if self.down.is_none() {
                self.fail(
                    Error::Transport {
                        qid: self.qid,
                        status: c.status,
                    },
                    finished,
                );
            }
            return;
        }
        match done.ctx {
            Ctx::Send(i) => {
                if let Some(Phase::InFlight { sent, cqe, .. }) = self.slots.get_mut(usize::from(i))
                {
                    *sent = true;
                    if let Some(cqe) = *cqe {
                        self.finish(i, cqe, finished);
                    }
                }
            }
            Ctx::Recv(r) => self.on_response(r, c, finished),
        }
    }

    fn on_response(&mut self, r: u16, c: &Completion, finished: &mut Vec<Tag>) {
        if c.invalidated_rkey.is_some() {
            // We never ask for remote invalidation: our region must stay valid.
            self.fail(
                Error::Protocol(format!(
                    "queue {}: the controller invalidated rkey {:#x} we did not offer",
                    self.qid,
                    c.invalidated_rkey.unwrap_or(0)
                )),
                finished,
            );
            return;
        }
        if c.byte_len as usize != CQE_LEN {
            self.fail(
                Error::Protocol(format!(
                    "queue {}: response of {} bytes (a completion is {CQE_LEN})",
                    self.qid, c.byte_len
                )),
                finished,
            );
            return;
        }
        let mut b = [0u8; CQE_LEN];
        let off = self.cqe_base as usize + usize::from(r) * CQE_LEN;
        if let Err(e) = self.mem.read(off, &mut b) {
            self.fail(Error::Fabric(e), finished);
            return;
        }
        // The buffer is free again: repost it before anything else can need it.
        if let Err(e) = self.post_recv(r) {
            self.fail(e, finished);
            return;
        }
        let cqe = match Cqe::parse(&b) {
            Ok(c) => c,
            Err(e) => {
                self.fail(Error::Malformed(e), finished);
                return;
            }
        };
        match self.slots.get_mut(usize::from(cqe.cid)) {
            Some(Phase::InFlight {
                sent, cqe: slot, ..
            }) if slot.is_none() => {
                if *sent {
                    self.finish(cqe.cid, cqe, finished);
                } else {
                    *slot = Some(cqe);
                }
            }
            _ => self.fail(
                Error::Protocol(format!(
                    "queue {}: response for command id {} which is not in flight",
                    self.qid, cqe.cid
                )),
                finished,
            ),
        }
    }

    fn finish(&mut self, i: u16, cqe: Cqe, finished: &mut Vec<Tag>) {
        let idx = usize::from(i);
        let (start, command) = match &self.slots[idx] {
            Phase::InFlight { start, command, .. } => (*start, *command),
            _ => return,
        };
        let result = if cqe.status.is_success() {
            Ok(cqe)
        } else {
            Err(Error::Nvme {
                qid: self.qid,
                cid: i,
                command,
                status: cqe.status,
                dw0: cqe.dw0(),
            })
        };
        self.slots[idx] = Phase::Done {
            result,
            latency: start.elapsed(),
        };
        self.in_flight -= 1;
        finished.push(Tag(i));
    }

    /// Takes the queue down with `cause`: every command in flight finishes with it.
    fn fail(&mut self, cause: Error, finished: &mut Vec<Tag>) {
        if self.down.is_some() {
            return;
        }
        self.down = Some(cause.to_string());
        let _ = self.ep.qp_mut().set_error();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Phase::InFlight { start, .. } = s {
                let latency = start.elapsed();
                *s = Phase::Done {
                    result: Err(cause.clone()),
                    latency,
                };
                self.in_flight -= 1;
                finished.push(Tag(i as u16));
            }
        }
    }

    /// Takes the result of a finished slot and frees it; `None` if it has not finished.
    pub fn take(&mut self, tag: Tag) -> Option<Finished> {
        let s = self.slots.get_mut(tag.index())?;
        if !matches!(s, Phase::Done { .. }) {
            return None;
        }
        let Phase::Done { result, latency } = std::mem::replace(s, Phase::Free) else {
            return None;
        };
        self.free.push(tag.0);
        Some(Finished { result, latency })
    }

    /// Whether the slot has finished (its result waits in [`Queue::take`]).
    pub fn is_finished(&self, tag: Tag) -> bool {
        matches!(self.slots.get(tag.index()), Some(Phase::Done { .. }))
    }

    /// Polls until `tag` finishes and takes it. Bounded by the command's deadline (a command
    /// without one is refused).
    pub fn wait(&mut self, tag: Tag) -> Result<Cqe, Error> {
        match self.slots.get(tag.index()) {
            Some(Phase::InFlight { deadline: None, .. }) => {
                return Err(Error::InvalidArgument(
                    "waiting on a command without a deadline".into(),
                ))
            }
            Some(Phase::InFlight { .. } | Phase::Done { .. }) => {}
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "slot {} has no command",
                    tag.index()
                )))
            }
        }
        let mut scratch = Vec::new();
        let mut idle = 0u32;
        loop {
            if let Some(f) = self.take(tag) {
                return f.result;
            }
            scratch.clear();
            if self.poll(&mut scratch) == 0 {
                idle += 1;
                backoff(idle);
            } else {
                idle = 0;
            }
        }
    }

    /// Submits `sqe` on a fresh slot and waits for it; `data_in` is copied into the slot first
    /// (for [`Xfer::FromHost`]), and the slot's first `data_out.len()` bytes are copied out
    /// after success.
    pub fn execute(
        &mut self,
        sqe: Sqe,
        xfer: Xfer,
        command: &'static str,
        data_in: &[u8],
        data_out: &mut [u8],
    ) -> Result<Cqe, Error> {
        let Some(tag) = self.alloc() else {
            return Err(match &self.down {
                Some(cause) => Error::QueueDown {
                    qid: self.qid,
                    cause: cause.clone(),
                },
                None => Error::InvalidArgument(format!("queue {} has no free slot", self.qid)),
            });
        };
        let r = self
            .write_data(tag, 0, data_in)
            .and_then(|()| self.submit(tag, sqe, xfer, command, true));
        if let Err(e) = r {
            self.release(tag);
            return Err(e);
        }
        let cqe = self.wait(tag)?;
        // The slot is free again but nothing can reuse it before this copy: single owner.
        self.copy_out(tag, data_out)?;
        Ok(cqe)
    }

    fn copy_out(&self, tag: Tag, dst: &mut [u8]) -> Result<(), Error> {
        if dst.is_empty() {
            return Ok(());
        }
        self.read_data(tag, 0, dst)
    }

    /// Disconnects the RDMA CM connection (idempotent).
    pub fn disconnect(&mut self) {
        if !self.disconnected {
            self.disconnected = true;
            let _ = self.cm.disconnect(self.conn);
        }
        if self.down.is_none() {
            self.down = Some("disconnected by the host".into());
        }
    }

    fn post_recv(&mut self, i: u16) -> Result<(), Error> {
        let off = self.cqe_base + u64::from(i) * CQE_LEN as u64;
        let sge = self.mr.sge(off, CQE_LEN as u32)?;
        self.ep
            .post_recv(Ctx::Recv(i), &[sge])
            .map_err(|r| Error::Post {
                qid: self.qid,
                error: r.error,
            })
    }
}

impl<F: Fabric> Drop for Queue<F> {
    fn drop(&mut self) {
        self.disconnect();
    }
}

/// Placeholder for the unused second SGE of a send without in-capsule data.
const EMPTY_SGE: Sge = Sge {
    addr: 0,
    length: 0,
    lkey: 0,
};

/// Waits politely after `idle` empty polls: spin, then yield, then short sleeps (≤ 200 µs), so a
/// waiting command costs little CPU and still sees its answer quickly.
pub(crate) fn backoff(idle: u32) {
    if idle < 64 {
        std::hint::spin_loop();
    } else if idle < 256 {
        std::thread::yield_now();
    } else {
        let us = u64::from((idle - 256).min(200)).max(10);
        std::thread::sleep(Duration::from_micros(us));
    }
}
