//! A seeded fault-injecting wrapper over any backend (smoltcp's `FaultInjector` idea): it
//! delays or drops completions, fails posts, breaks QPs and rejects connects, either at random
//! with per-mille rates from a seed, or on demand through one-shot triggers.
//!
//! Invariants: with every rate 0 and no trigger armed the wrapper is transparent; a delayed
//! CQ holds back *all* its completions for the delay (order within a CQ is kept, as hardware
//! keeps it); a failed post reaches nothing (the work comes back whole); every injected fault
//! is counted in [`FaultCounters`].

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::api::{CompletionQueue, ConnectionManager, Fabric, QueuePair};
use crate::error::{FabricError, PostError};
use crate::sys_mem::RegionMemory;
use crate::types::{
    AcceptParams, Access, Capabilities, CmEvent, Completion, ConnId, ConnectParams, DeviceAttrs,
    QpInit, QpNum, RecvWr, SendWr,
};

/// Random fault rates, per mille of the opportunities (posts, completions, connect requests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// RNG seed: the same seed and the same calls give the same faults.
    pub seed: u64,
    /// A post fails with [`FabricError::Injected`] and reaches nothing.
    pub fail_post: u32,
    /// A post first moves the QP to the error state (so it and everything outstanding flush).
    pub break_qp: u32,
    /// A completion is lost.
    pub drop_completion: u32,
    /// A poll that would return completions holds the CQ back for `delay_polls` polls.
    pub delay_completion: u32,
    /// How many polls a delay lasts.
    pub delay_polls: u32,
    /// An incoming connect request is rejected with `reject_private_data`.
    pub reject_connect: u32,
    /// Private data of injected rejects.
    pub reject_private_data: Vec<u8>,
}

/// How many faults were injected, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Posts failed.
    pub posts_failed: u64,
    /// QPs broken.
    pub qps_broken: u64,
    /// Completions dropped.
    pub completions_dropped: u64,
    /// Delays started.
    pub delays: u64,
    /// Connect requests rejected.
    pub connects_rejected: u64,
}

struct State {
    config: FaultConfig,
    rng: u64,
    fail_posts: u32,
    break_qps: u32,
    drop_completions: u32,
    reject_connects: u32,
    counters: FaultCounters,
}

impl State {
    /// splitmix64: small, seeded, good enough to spread faults.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn roll(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && self.next() % 1000 < u64::from(per_mille)
    }
    fn take(trigger: &mut u32) -> bool {
        if *trigger > 0 {
            *trigger -= 1;
            true
        } else {
            false
        }
    }
}

/// Shared control of one wrapper's faults: triggers and counters.
#[derive(Clone)]
pub struct FaultControl(Arc<Mutex<State>>);

impl FaultControl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The next `n` posts (any QP) fail.
    pub fn fail_next_posts(&self, n: u32) {
        self.lock().fail_posts += n;
    }
    /// The next `n` posts (any QP) break their QP first.
    pub fn break_next_posts(&self, n: u32) {
        self.lock().break_qps += n;
    }
    /// The next `n` completions (any CQ) are lost.
    pub fn drop_next_completions(&self, n: u32) {
        self.lock().drop_completions += n;
    }
    /// The next `n` connect requests are rejected.
    pub fn reject_next_connects(&self, n: u32) {
        self.lock().reject_connects += n;
    }
    /// What was injected so far.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters
    }
    /// Replaces the random rates (the RNG keeps its state).
    pub fn set_config(&self, config: FaultConfig) {
        self.lock().config = config;
    }

    fn post_fault(&self) -> Option<PostFault> {
        let mut s = self.lock();
        let rate = s.config.fail_post;
        if State::take(&mut s.fail_posts) || s.roll(rate) {
            s.counters.posts_failed += 1;
            return Some(PostFault::Fail);
        }
        let rate = s.config.break_qp;
        if State::take(&mut s.break_qps) || s.roll(rate) {
            s.counters.qps_broken += 1;
            return Some(PostFault::Break);
        }
        None
    }
}

enum PostFault {
    Fail,
    Break,
}

/// Any backend with faults injected.
pub struct Faulty<F> {
    inner: F,
    control: FaultControl,
}

impl<F: Fabric> Faulty<F> {
    /// Wraps `inner`.
    pub fn new(inner: F, config: FaultConfig) -> Self {
        let rng = config.seed;
        let state = State {
            config,
            rng,
            fail_posts: 0,
            break_qps: 0,
            drop_completions: 0,
            reject_connects: 0,
            counters: FaultCounters::default(),
        };
        Self {
            inner,
            control: FaultControl(Arc::new(Mutex::new(state))),
        }
    }
    /// The control shared by everything this wrapper creates.
    pub fn control(&self) -> FaultControl {
        self.control.clone()
    }
    /// The wrapped backend.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

fn unwrap_init<F: Fabric>(i: QpInit<Faulty<F>>) -> QpInit<F> {
    QpInit {
        pd: i.pd,
        send_cq: i.send_cq,
        recv_cq: i.recv_cq,
        srq: i.srq,
        caps: i.caps,
    }
}

impl<F: Fabric> Fabric for Faulty<F> {
    type Pd = F::Pd;
    type Mr = F::Mr;
    type Cq = FaultyCq<F::Cq>;
    type CqHandle = F::CqHandle;
    type Srq = F::Srq;
    type SrqHandle = F::SrqHandle;
    type Qp = FaultyQp<F::Qp>;
    type Request = F::Request;
    type Cm = FaultyCm<F>;

    fn attrs(&self) -> &DeviceAttrs {
        self.inner.attrs()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn alloc_pd(&self) -> Result<F::Pd, FabricError> {
        self.inner.alloc_pd()
    }
    fn register(
        &self,
        pd: &F::Pd,
        memory: Arc<dyn RegionMemory>,
        access: Access,
    ) -> Result<F::Mr, FabricError> {
        self.inner.register(pd, memory, access)
    }
    fn create_cq(&self, depth: u32) -> Result<Self::Cq, FabricError> {
        Ok(FaultyCq {
            inner: self.inner.create_cq(depth)?,
            control: self.control(),
            held: Vec::new(),
            delay_left: 0,
        })
    }
    fn create_srq(&self, pd: &F::Pd, max_wr: u32, max_sge: u32) -> Result<F::Srq, FabricError> {
        self.inner.create_srq(pd, max_wr, max_sge)
    }
    fn create_cm(&self) -> Result<Self::Cm, FabricError> {
        Ok(FaultyCm {
            inner: self.inner.create_cm()?,
            control: self.control(),
        })
    }
}

/// A CQ whose completions may be delayed or lost.
pub struct FaultyCq<C> {
    inner: C,
    control: FaultControl,
    held: Vec<Completion>,
    delay_left: u32,
}

impl<C: CompletionQueue> AsRawFd for FaultyCq<C> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<C: CompletionQueue> std::os::fd::AsFd for FaultyCq<C> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<C: CompletionQueue> CompletionQueue for FaultyCq<C> {
    type Handle = C::Handle;
    fn handle(&self) -> C::Handle {
        self.inner.handle()
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, FabricError> {
        let mut fresh = Vec::new();
        self.inner
            .poll(&mut fresh, max.saturating_sub(self.held.len()).max(1))?;
        {
            let arrived = !fresh.is_empty();
            let mut s = self.control.lock();
            for c in fresh {
                let rate = s.config.drop_completion;
                if State::take(&mut s.drop_completions) || s.roll(rate) {
                    s.counters.completions_dropped += 1;
                } else {
                    self.held.push(c);
                }
            }
            // A delay starts when completions arrive, never again for ones already held.
            if arrived && self.delay_left == 0 && !self.held.is_empty() {
                let rate = s.config.delay_completion;
                if s.roll(rate) {
                    s.counters.delays += 1;
                    self.delay_left = s.config.delay_polls.max(1);
                }
            }
        }
        if self.delay_left > 0 {
            self.delay_left -= 1;
            return Ok(0);
        }
        let n = self.held.len().min(max);
        out.extend(self.held.drain(..n));
        Ok(n)
    }
    fn arm(&mut self) -> Result<(), FabricError> {
        self.inner.arm()
    }
    fn ack_events(&mut self) -> Result<u32, FabricError> {
        self.inner.ack_events()
    }
    fn holds_completions(&self) -> bool {
        !self.held.is_empty() || self.inner.holds_completions()
    }
}

/// A QP whose posts may fail or break it.
pub struct FaultyQp<Q> {
    inner: Q,
    control: FaultControl,
}

impl<Q: QueuePair> FaultyQp<Q> {
    fn fault(&mut self) -> Result<(), PostError> {
        match self.control.post_fault() {
            Some(PostFault::Fail) => Err(PostError::nothing_posted(FabricError::Injected(
                "post failed",
            ))),
            Some(PostFault::Break) => {
                self.inner.set_error().map_err(PostError::nothing_posted)?;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl<Q: QueuePair> QueuePair for FaultyQp<Q> {
    fn qp_num(&self) -> QpNum {
        self.inner.qp_num()
    }
    fn conn(&self) -> ConnId {
        self.inner.conn()
    }
    fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        self.fault()?;
        self.inner.post_send(wrs)
    }
    fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.fault()?;
        self.inner.post_recv(wrs)
    }
    fn set_error(&mut self) -> Result<(), FabricError> {
        self.inner.set_error()
    }
}

/// A connection manager whose incoming requests may be rejected.
pub struct FaultyCm<F: Fabric> {
    inner: F::Cm,
    control: FaultControl,
}

impl<F: Fabric> AsRawFd for FaultyCm<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<F: Fabric> std::os::fd::AsFd for FaultyCm<F> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<F: Fabric> FaultyCm<F> {
    fn wrap_qp(&self, qp: F::Qp) -> FaultyQp<F::Qp> {
        FaultyQp {
            inner: qp,
            control: self.control.clone(),
        }
    }
}

impl<F: Fabric> ConnectionManager<Faulty<F>> for FaultyCm<F> {
    fn listen(&mut self, addr: SocketAddr, backlog: u32) -> Result<SocketAddr, FabricError> {
        self.inner.listen(addr, backlog)
    }
    fn connect(
        &mut self,
        addr: SocketAddr,
        params: ConnectParams,
        init: QpInit<Faulty<F>>,
    ) -> Result<ConnId, FabricError> {
        self.inner.connect(addr, params, unwrap_init(init))
    }
    fn accept(
        &mut self,
        req: F::Request,
        init: QpInit<Faulty<F>>,
        params: AcceptParams,
    ) -> Result<FaultyQp<F::Qp>, (FabricError, F::Request)> {
        let qp = self.inner.accept(req, unwrap_init(init), params)?;
        Ok(self.wrap_qp(qp))
    }
    fn reject(&mut self, req: F::Request, private_data: &[u8]) -> Result<(), FabricError> {
        self.inner.reject(req, private_data)
    }
    fn disconnect(&mut self, conn: ConnId) -> Result<(), FabricError> {
        self.inner.disconnect(conn)
    }
    fn release(&mut self, conn: ConnId) {
        self.inner.release(conn)
    }
    fn poll_event(&mut self) -> Result<Option<CmEvent<Faulty<F>>>, FabricError> {
        loop {
            let Some(ev) = self.inner.poll_event()? else {
                return Ok(None);
            };
            return Ok(Some(match ev {
                CmEvent::ConnectRequest(req) => {
                    let reject = {
                        let mut s = self.control.lock();
                        let rate = s.config.reject_connect;
                        let hit = State::take(&mut s.reject_connects) || s.roll(rate);
                        if hit {
                            s.counters.connects_rejected += 1;
                        }
                        hit.then(|| s.config.reject_private_data.clone())
                    };
                    match reject {
                        Some(data) => {
                            self.inner.reject(req, &data)?;
                            continue;
                        }
                        None => CmEvent::ConnectRequest(req),
                    }
                }
                CmEvent::Established {
                    conn,
                    qp,
                    private_data,
                } => CmEvent::Established {
                    conn,
                    qp: qp.map(|q| self.wrap_qp(q)),
                    private_data,
                },
                CmEvent::Rejected {
                    conn,
                    reason,
                    private_data,
                } => CmEvent::Rejected {
                    conn,
                    reason,
                    private_data,
                },
                CmEvent::ConnectFailed { conn, reason } => CmEvent::ConnectFailed { conn, reason },
                CmEvent::Disconnected { conn } => CmEvent::Disconnected { conn },
                CmEvent::TimewaitExit { conn } => CmEvent::TimewaitExit { conn },
                CmEvent::DeviceRemoval { conn } => CmEvent::DeviceRemoval { conn },
            }));
        }
    }
}
