//! A poller thread: owns one completion queue, the queue pairs on it, a payload pool and one
//! storage queue per namespace, and drives every command from its receive to its response.
//!
//! Per command (SPDK's nvmf RDMA request states, reduced): receive → parse and dispatch →
//! [need a pool buffer] → [RDMA READ of host data, at most the negotiated ORD at a time] →
//! [storage] → repost the receive → [RDMA WRITE of read data] + SEND of the completion
//! (plain SEND: rxe's SEND_WITH_INV support is not relied on) → buffer back to the pool when
//! the SEND completes. Nothing here blocks: storage runs on the namespace queues' workers.
//!
//! Idle behaviour ([`PollMode`]): busy spins; adaptive spins for a moment after the last work,
//! then arms the CQ and sleeps on its fd and on the waker that storage workers, the control
//! thread (new queues, closes, stop) and admin events signal; 100 ms at most, as a backstop, so
//! an idle target uses ≈ 0 % CPU. It never sleeps past the time a paced transfer or probe is due
//! (see `pace`).
//!
//! Pacing (`pace`): on I/O queues every RDMA READ and every RDMA WRITE of read data passes the
//! queue's token bucket first; what may not go yet waits on the queue and goes at its due time.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use phases::{PassCounts, Phase};
use raidline_cc::netrtt::Dir;
use raidline_fabric::slab::{Chain, SrqEndpoint, WrKind};
use raidline_fabric::sys_poll::wait_ready;
use raidline_fabric::{
    Completion as Wc, CompletionQueue, ConnId, Fabric, Payload, RemoteBuf, SendOp, SendWr, Sge,
    WcStatus, WrId,
};
use raidline_proto::fabrics::{ConnectData, ConnectResponse, InvalidParameterIn};
use raidline_proto::{AdminOpcode, SglDescriptor, Sqe, Status, StatusCode};
use raidline_raid::{
    ArrayBlock, Completion as Done, MemberIdx, OwnedRing, RaidError, Request, RequestKind,
    RingCompletion,
};

mod auth;
mod iser;
mod pace;
use pace::Seen;
pub(crate) use pace::CHUNK_SLOTS;
mod phases;
mod table;
mod writes;

use super::backend::{NsQueue, Waker};
use super::pool::{Pool, RecvBuffers};
use super::queue::{DataSrc, Queue, Req, Slot, Step, Wr};
use super::{ControlMsg, CtrlEntry, Shared};
use crate::config::PollMode;
use crate::controller::{AdminEnv, AdminOutcome, Completion as AdminCompletion, Controller};
use crate::io::{self, DataLocation, IoRequest};
use crate::queue::Dispatch;
use crate::registry::Served;
use crate::status::{for_parse_error, for_storage_error, StorageError};

/// Messages from the control thread.
pub(crate) enum PollerMsg<F: Fabric> {
    /// A new queue pair, receives already posted.
    NewQueue(Box<Queue<F>>),
    /// Tear this connection's queue down.
    Close(ConnId, String),
    /// Finish what is in flight, then close every queue and exit.
    Drain,
    /// The control thread ran a step of this connection's authentication.
    AuthDone {
        conn: ConnId,
        auth: Box<raidline_auth::Authenticator>,
        result: super::AuthResult,
    },
}

/// What to do once a pool buffer is attached.
enum AfterBuf {
    /// Fetch host data with RDMA READ.
    Fetch(RemoteBuf),
    /// Submit the request's step to storage.
    Storage,
    /// Send admin data to the host, then the completion.
    AdminOut(Vec<u8>, RemoteBuf),
}

const BLOCK: u64 = 4096;
/// Longest sleep of an idle poller. Everything that gives it work wakes it (CQ events, the
/// waker for storage, control messages and admin events); the timeout is a backstop only, so
/// an idle target wakes 10 times a second (each wake-up costs system calls).
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// How soon an idle poller polls again while its CQ holds completions back
/// ([`CompletionQueue::holds_completions`]).
const HELD_POLL: Duration = Duration::from_micros(50);
/// Something due sooner than this is spun for rather than slept for: arming the CQ and a
/// timed sleep cost about as much.
const SPIN_BELOW: Duration = Duration::from_micros(20);

/// Host-to-controller admin data we accept (Set Features payloads are tiny).
const MAX_ADMIN_IN: u32 = 8192;

/// Responses posted with one call to the device, at most ([`Poller::send_responses`]).
const DOORBELL_BATCH: usize = 32;

/// Finished requests' boxes a poller keeps for reuse (beyond that, freed).
const SPARE_REQS: usize = 1024;

pub(crate) struct Poller<F: Fabric> {
    pub id: usize,
    pub shared: Arc<Shared>,
    pub cq: F::Cq,
    pub rx: Receiver<PollerMsg<F>>,
    pub pool: Pool<F>,
    pub nsq: Vec<NsQueue>,
    /// Storage workers wake the poller through this.
    pub waker: Waker,
    pub mode: PollMode,
    /// Queue pairs by slot (see [`table`]): a queue is taken out and put back around the
    /// handling of each of its completions, which moves a pointer, through no map.
    queues: table::QueueTable<F>,
    inflight: FxHashMap<u64, (u32, Box<Req>)>,
    next_tag: u64,
    buf_wait: VecDeque<(u32, Box<Req>, usize, AfterBuf)>,
    stash: Vec<Wc>,
    /// Boxes of finished requests, reused by the next commands (no allocation per command).
    // The boxes themselves are what is reused: a request travels as `Box<Req>`.
    #[allow(clippy::vec_box)]
    spare_reqs: Vec<Box<Req>>,
    /// Scratch of the iSER connections' actions (kept: no allocation per PDU for the list).
    iser_out: Vec<crate::iser::Action>,
    /// The iSER keep-alive's clock: its zero, and when the connections are next ticked.
    iser_clock: (Instant, Instant),
    /// Logins reinstating a session, answered once the old session is gone.
    iser_held: Vec<iser::HeldLogin>,
    /// iSER queues on this poller (the keep-alive costs an NVMe-only poller nothing).
    iser_queues: usize,
    draining: bool,
    pace: pace::PollerPacing,
    /// The poller's own io_uring (`io_path = "ring"` where the kernel has one).
    ring: Option<OwnedRing>,
    ring_done: Vec<RingCompletion>,
    /// The ring's (fixed, plain) operation counts already added to the data-path metrics.
    ring_ops_seen: (u64, u64),
    /// The ring's polled operations, and polled operations refused, already counted.
    ring_polled_seen: u64,
    /// See [`Poller::ring_polled_seen`].
    ring_refused_seen: u64,
    /// Per request on the ring: what to hand the engine if it fails there (namespace, kind,
    /// first block, bytes).
    ring_redo: FxHashMap<u64, (usize, RequestKind, ArrayBlock, usize)>,
    /// Array writes on the ring (the engine's completion-driven path) and parked ones.
    writes: writes::Writes,
    /// The loop's own counts, added to the data-path metrics before each sleep and every
    /// [`phases::PASSES_PUBLISHED`] passes (no shared atomic per pass).
    passes: PassCounts,
    /// Where the poller's time goes (`RAIDLINE_POLLER_PHASES=1`; see [`phases`]).
    phases: phases::Phases,
    srq: Option<SharedRecv<F>>,
    /// When draining started, and whether a long drain was reported.
    draining_since: Option<Instant>,
    drain_reported: bool,
    /// The pass's clock, read at its first use in the pass ([`Self::clock`]).
    pass_clock: Option<Instant>,
    /// With `raidline::poll` tracing on: when this pass polled its completion queue.
    traced_poll: Option<Instant>,
    /// Completions read early, after a long post while queues are paced, each with when it was
    /// seen ([`Poller::stamp_poll`]); handled, in order, before the queue is polled again.
    early: Vec<(Seen, Wc)>,
    early_tmp: Vec<Wc>,
    /// When the completion being handled was seen, if earlier than its handling, with the
    /// posting clock then and at the poll before (`PollerPacing::cq_polled`).
    wc_at: Option<Seen>,
    /// While storage completions are handled, responses wait in `held_responses`
    /// (see [`Self::poll_storage`]).
    hold_responses: bool,
    #[allow(clippy::vec_box)]
    held_responses: Vec<(u32, u32, Box<Req>, Status, u64)>,
    /// Scratch of [`Self::send_responses`] (kept: no allocation per pass).
    #[allow(clippy::vec_box)]
    sending: Vec<(Box<Req>, Status, u64)>,
    #[allow(clippy::vec_box)]
    sending_one: Vec<(Box<Req>, Status, u64)>,
    chains: Vec<Chain<Wr>>,
    #[allow(clippy::vec_box)]
    quiet_done: Vec<Box<Req>>,
}

/// What a poller is built from: its completion queue and control channel, its payload pool,
/// its queues to every namespace's storage and the waker those signal.
pub(crate) struct PollerIo<F: Fabric> {
    pub cq: F::Cq,
    pub rx: Receiver<PollerMsg<F>>,
    pub pool: Pool<F>,
    pub nsq: Vec<NsQueue>,
    pub waker: Waker,
    pub ring: Option<OwnedRing>,
    /// The poller's shared receive queue, its buffers and their slots (posted at start).
    pub srq: Option<(F::Srq, RecvBuffers<F>, Vec<Slot>)>,
}

/// A poller's shared receive queue: every I/O queue pair of the poller takes its commands
/// from it, so receive memory does not grow with the number of connected queues.
struct SharedRecv<F: Fabric> {
    ep: SrqEndpoint<F::Srq, Slot>,
    bufs: RecvBuffers<F>,
}

impl<F: Fabric> Poller<F> {
    pub(crate) fn new(id: usize, shared: Arc<Shared>, io: PollerIo<F>, mode: PollMode) -> Self {
        let mut p = Poller {
            id,
            shared,
            cq: io.cq,
            rx: io.rx,
            pool: io.pool,
            nsq: io.nsq,
            waker: io.waker,
            mode,
            queues: table::QueueTable::default(),
            inflight: FxHashMap::default(),
            next_tag: 1,
            buf_wait: VecDeque::new(),
            stash: Vec::new(),
            spare_reqs: Vec::new(),
            iser_out: Vec::new(),
            iser_clock: (Instant::now(), Instant::now()),
            iser_held: Vec::new(),
            iser_queues: 0,
            draining: false,
            pace: pace::PollerPacing::new(),
            ring: io.ring,
            ring_done: Vec::with_capacity(64),
            ring_ops_seen: (0, 0),
            ring_polled_seen: 0,
            ring_refused_seen: 0,
            ring_redo: FxHashMap::default(),
            writes: writes::Writes::default(),
            passes: PassCounts::default(),
            phases: phases::Phases::from_env(),
            srq: None,
            draining_since: None,
            drain_reported: false,
            pass_clock: None,
            traced_poll: None,
            early: Vec::new(),
            early_tmp: Vec::new(),
            wc_at: None,
            hold_responses: false,
            held_responses: Vec::with_capacity(64),
            sending: Vec::with_capacity(DOORBELL_BATCH),
            sending_one: Vec::with_capacity(1),
            chains: Vec::with_capacity(DOORBELL_BATCH),
            quiet_done: Vec::with_capacity(DOORBELL_BATCH),
        };
        if let Some((q, bufs, slots)) = io.srq {
            let mut shared = SharedRecv {
                ep: SrqEndpoint::new(q),
                bufs,
            };
            for slot in slots {
                if let Err(e) = post_shared(&mut shared, slot) {
                    tracing::error!("poller {id}: shared receive not posted: {e}");
                }
            }
            p.srq = Some(shared);
        }
        p
    }

    /// The poller loop; returns when drained after [`PollerMsg::Drain`] or when the control
    /// thread is gone.
    pub(crate) fn run(mut self) {
        let mut wcs = Vec::with_capacity(64);
        let mut done = Vec::with_capacity(64);
        let mut last_work = Instant::now();
        loop {
            self.pass_clock = None;
            let mut work = self.intake();
            self.phases.mark(Phase::Intake);
            wcs.clear();
            // Completions read early come first: the queue holds only later ones. If handling
            // them read more early, those go next pass, still ahead of the queue's.
            let early = self.handle_early();
            work += early;
            // A paced queue's completions are timed at this poll, not when their turn comes
            // in the batch: handling the ones before (a write task's parity, a post whose
            // packet work rxe does in the call) took milliseconds in the lab's guests, and a
            // probe's answer behind them read that as network delay.
            let (polled, polled_at) = if self.early.is_empty() {
                let polled = self.cq.poll(&mut wcs, 64);
                (polled, self.pace.cq_polled(!wcs.is_empty()))
            } else {
                (Ok(0), None)
            };
            self.phases.mark(Phase::CqPoll);
            let traced = tracing::enabled!(target: "raidline::poll", tracing::Level::TRACE);
            self.traced_poll = traced.then(Instant::now);
            let npolled = *polled.as_ref().unwrap_or(&0);
            match polled {
                Ok(n) => work += n,
                Err(e) => {
                    tracing::error!("poller {}: completion queue failed: {e}", self.id);
                    for q in self.queues.values_mut() {
                        q.close("completion queue failed");
                    }
                }
            }
            for wc in wcs.drain(..) {
                self.wc_at = polled_at;
                self.on_wc(wc);
            }
            self.wc_at = None;
            self.phases.mark(Phase::OnWc);
            work += self.poll_storage(&mut done);
            work += self.events();
            work += self.serve_buf_waiters();
            work += self.pace();
            self.iser_keepalive();
            self.reap();
            if self.draining {
                self.drain_watch();
            }
            self.phases.mark(Phase::Other);
            if self.draining && self.queues.is_empty() && self.inflight.is_empty() {
                let lent = self.pool.in_use();
                if lent > 0 {
                    tracing::error!(
                        "poller {}: {lent} pool buffers not returned at exit",
                        self.id
                    );
                }
                if let Some(line) = self.phases.report() {
                    tracing::info!("poller {}: time by phase: {line}", self.id);
                }
                return;
            }
            if let Some(t) = self.traced_poll {
                let took = t.elapsed();
                if took > Duration::from_millis(5) {
                    tracing::trace!(
                        target: "raidline::poll",
                        "poller {} pass took {} us after its completion poll ({} completions)",
                        self.id,
                        took.as_micros(),
                        npolled
                    );
                }
            }
            self.passes.count(work > 0, &self.shared.data_path);
            if work > 0 {
                // The end of the pass, read afresh: the pass's clock is as old as its first
                // use, and the idle poller spins for a while after the last work.
                last_work = Instant::now();
                continue;
            }
            self.idle(last_work);
        }
    }

    /// The time of this pass: the clock is read once per pass, at its first use, and serves
    /// every command's arrival and completion stamps (the latency metrics) and the pacing
    /// bookkeeping of the pass. A stamp is early by at most the part of the pass before it
    /// (a few microseconds on a busy poller). The pacer itself reads the clock afresh, and only
    /// while pacing is on.
    fn clock(&mut self) -> Instant {
        *self.pass_clock.get_or_insert_with(Instant::now)
    }

    fn idle(&mut self, last_work: Instant) {
        // A paced transfer or probe due: the sleep below ends at its time (`wait_ready` has
        // nanosecond resolution); only one due sooner than a sleep would take is spun for.
        let due = self.until_due();
        // Held writes wait for completions, which wake the poller (an RDMA READ's on the CQ,
        // a running task's on the ring), or for their time limit.
        let due = match (due, self.writes.held_for()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Completions held back by the CQ itself come with no notification: poll again soon.
        // Parked writes wait for stripes other threads may hold: look again soon.
        if !self.early.is_empty() {
            return;
        }
        // Member operations on the polled ring complete only when polled: no interrupt would
        // wake a sleep (`io_poll = "on"`, members with poll queues). A poller that may sleep
        // offers its CPU to whatever else is runnable there between polls (the lab measured
        // yielding ahead of spinning, both behind interrupts: README).
        if self.ring.as_ref().is_some_and(OwnedRing::polling) {
            match self.mode {
                PollMode::Busy => std::hint::spin_loop(),
                PollMode::Adaptive | PollMode::Event => std::thread::yield_now(),
            }
            self.phases.mark(Phase::Spin);
            return;
        }
        if self.cq.holds_completions() || !self.writes.parked.is_empty() {
            let d = due.map_or(HELD_POLL, |d| d.min(HELD_POLL));
            if d < SPIN_BELOW {
                std::hint::spin_loop();
            } else {
                self.passes.naps += 1;
                std::thread::sleep(d);
            }
            self.phases.mark(Phase::Spin);
            return;
        }
        if due.is_some_and(|d| d < SPIN_BELOW) {
            std::hint::spin_loop();
            self.phases.mark(Phase::Spin);
            return;
        }
        match self.mode {
            PollMode::Busy => {
                std::hint::spin_loop();
                self.phases.mark(Phase::Spin);
            }
            PollMode::Adaptive | PollMode::Event => {
                // Spin briefly for the next command only when no storage work is pending: while
                // the storage workers run, the CPU is theirs and their completions wake us.
                let storage_busy = !self.inflight.is_empty() || !self.buf_wait.is_empty();
                let spin = if self.mode == PollMode::Adaptive && !storage_busy {
                    Duration::from_micros(200)
                } else {
                    Duration::ZERO
                };
                if last_work.elapsed() < spin {
                    std::hint::spin_loop();
                    self.phases.mark(Phase::Spin);
                    return;
                }
                self.publish_idle();
                if self.cq.arm().is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                    return;
                }
                // From here notifiers write to the waker. A completion may have arrived between
                // the last poll and the arm, storage may have finished or a message come before
                // the flag went up: one more look at all three before sleeping.
                self.waker.sleeping();
                let mut work = 0;
                let mut wcs = Vec::new();
                if let Ok(n) = self.cq.poll(&mut wcs, 64) {
                    work += n;
                    for wc in wcs {
                        self.on_wc(wc);
                    }
                }
                work += self.intake();
                work += self.poll_storage(&mut Vec::new());
                // (Whatever started a polled operation counted as work; checked anyway: no
                // interrupt would end this sleep for it.)
                if work > 0 || self.ring.as_ref().is_some_and(OwnedRing::polling) {
                    self.waker.awake();
                    self.phases.mark(Phase::Arm);
                    return;
                }
                // Storage completions and control messages come through the waker, admin
                // events too (Shared::wake_pollers); paced work wakes at its due time.
                let wait = due.map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT));
                self.passes.publish(&self.shared.data_path);
                self.phases.mark(Phase::Arm);
                let asleep = Instant::now();
                let ready = match self.ring.as_ref().map(|r| r.event_fd()) {
                    Some(ring_fd) => {
                        wait_ready(&[&self.cq, &self.waker, &ring_fd], wait).unwrap_or(0b111)
                    }
                    None => wait_ready(&[&self.cq, &self.waker], wait).unwrap_or(0b11),
                };
                self.passes.sleeps += 1;
                let slept = asleep.elapsed();
                self.passes.sleep_ns += slept.as_nanos() as u64;
                tracing::trace!(
                    target: "raidline::poll",
                    "poller {} slept {} us of {} us, ready {ready:#b}",
                    self.id,
                    slept.as_micros(),
                    wait.as_micros()
                );
                self.phases.mark(Phase::Sleep);
                self.waker.awake();
                // Only what became readable is read: each read is a system call.
                if ready & 1 != 0 {
                    let _ = self.cq.ack_events();
                }
                if ready & 2 != 0 {
                    self.waker.drain();
                }
                if ready & 4 != 0 {
                    if let Some(r) = &self.ring {
                        r.clear_event();
                    }
                }
                self.phases.mark(Phase::Wake);
            }
        }
    }

    /// Collects and handles storage completions of the poller's ring and of every namespace
    /// queue; returns how many.
    ///
    /// The responses of what completed wait until the member operations those completions
    /// started (a write's data and parity after its reads, the next parked or held write)
    /// are in the kernel: posting a response can take long (rxe builds and delivers a user
    /// QP's packets inside the posting system call), and the drives should not idle
    /// meanwhile. So a pass submits, reaps, submits what the completions started, and only
    /// then posts the responses ([`Self::flush_responses`]).
    fn poll_storage(&mut self, done: &mut Vec<Done>) -> usize {
        let mut work = 0;
        self.hold_responses = true;
        if self.ring.is_some() {
            work += self.pump_ring();
            if self.ring.as_ref().is_some_and(OwnedRing::has_queued) {
                work += self.pump_ring();
            }
        }
        for i in 0..self.nsq.len() {
            done.clear();
            work += self.nsq[i].poll(done);
            for c in done.drain(..) {
                self.on_storage(c);
            }
        }
        self.phases.mark(Phase::NsQueues);
        self.hold_responses = false;
        self.flush_responses();
        self.phases.mark(Phase::Responses);
        work
    }

    /// One pass over the poller's ring: submit, reap, and hand on what completed (parked and
    /// held writes get their next try); returns the work done.
    fn pump_ring(&mut self) -> usize {
        let Some(ring) = self.ring.as_mut() else {
            return 0;
        };
        let mut out = std::mem::take(&mut self.ring_done);
        let pumped = ring.pump(&mut out);
        self.phases.mark(Phase::RingPump);
        if let Err(e) = pumped {
            tracing::error!("poller {}: io_uring: {e}", self.id);
        }
        let (fixed, plain) = ring.op_counts();
        let (seen_fixed, seen_plain) = self.ring_ops_seen;
        if (fixed, plain) != self.ring_ops_seen {
            use std::sync::atomic::Ordering::Relaxed;
            let dp = &self.shared.data_path;
            dp.ring_fixed_ops.fetch_add(fixed - seen_fixed, Relaxed);
            dp.ring_plain_ops.fetch_add(plain - seen_plain, Relaxed);
            let polled = ring.polled_ops();
            dp.ring_polled_ops
                .fetch_add(polled - self.ring_polled_seen, Relaxed);
            self.ring_polled_seen = polled;
            self.ring_ops_seen = (fixed, plain);
            let refused = ring.polled_fallbacks();
            if refused != self.ring_refused_seen {
                self.ring_refused_seen = refused;
                tracing::warn!(
                    "poller {}: the kernel refused polled I/O on {} ({refused} operations so \
                     far): that member's reads and writes now complete by interrupt",
                    self.id,
                    ring.last_refused_member().unwrap_or("a member")
                );
            }
        }
        let mut work = out.len();
        for c in out.drain(..) {
            self.on_ring(c);
        }
        self.ring_done = out;
        work += self.retry_parked();
        work += self.start_held();
        self.phases.mark(Phase::OnRing);
        work
    }

    /// Posts the responses held during [`Self::poll_storage`]: per queue, in the order they
    /// were held, together ([`Self::send_responses`]).
    fn flush_responses(&mut self) {
        if self.held_responses.is_empty() {
            return;
        }
        let mut held = std::mem::take(&mut self.held_responses);
        // By queue, each queue's in the order held (no allocation: the key is unique).
        held.sort_unstable_by_key(|(qpn, seq, ..)| (*qpn, *seq));
        let mut batch = std::mem::take(&mut self.sending);
        let mut cur: Option<Box<Queue<F>>> = None;
        // Whether the batch's data was charged to its queue's pacer already.
        let mut paced_batch = false;
        for (qpn, _, req, status, result) in held.drain(..) {
            if cur.as_ref().map(|q| q.qp_num().0) != Some(qpn) {
                if let Some(mut q) = cur.take() {
                    self.post_held(&mut q, &mut batch, paced_batch);
                    paced_batch = false;
                    self.queues.put(q);
                }
                cur = self.queues.take(qpn);
            }
            let Some(q) = cur.as_mut() else {
                self.recycle(req);
                continue;
            };
            q.elsewhere -= 1;
            // `respond` returned the in-capsule buffer before holding it.
            if q.closing {
                self.recycle(req);
                continue;
            }
            // Responses that return data (an RDMA WRITE, then the SEND) go together. A
            // data-less one goes on its own: batched, they bunched the host's next commands
            // and cost small writes (lab, RAM disk: 0.82x the IOPS), where reads gained
            // (1.25x).
            if status.is_success() && req.write_back.is_some() {
                let req = if q.pacing.pacer.is_some() {
                    // A paced queue's pass the pacer's gate here, in the order held: what may
                    // not go yet waits on the queue behind what waits already, and what may go
                    // is charged now, so that the next one's gate sees it (the batch is
                    // posted after the last; a post that fails closes the queue, so a charge
                    // for bytes that never left changes nothing).
                    let Some(req) = self.pace_response(q, req, status, result) else {
                        continue;
                    };
                    let len = pace::write_len(&req, status).unwrap_or(0);
                    self.charge_release(q, &req, len);
                    paced_batch = true;
                    req
                } else {
                    req
                };
                batch.push((req, status, result));
            } else {
                self.send_response(q, req, status, result);
            }
        }
        if let Some(mut q) = cur.take() {
            self.post_held(&mut q, &mut batch, paced_batch);
            self.queues.put(q);
        }
        self.sending = batch;
        self.held_responses = held;
    }

    /// Takes control messages; returns how many.
    fn intake(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.rx.try_recv() {
                Ok(PollerMsg::NewQueue(mut q)) => {
                    n += 1;
                    self.attach_pacing(&mut q);
                    self.queues.add(q);
                    let stashed: Vec<Wc> = std::mem::take(&mut self.stash);
                    for wc in stashed {
                        self.on_wc(wc);
                    }
                }
                Ok(PollerMsg::Close(conn, why)) => {
                    n += 1;
                    if let Some(q) = self.queues.values_mut().find(|q| q.conn == conn) {
                        q.close(why);
                    }
                }
                Ok(PollerMsg::Drain) => {
                    n += 1;
                    self.draining = true;
                }
                Ok(PollerMsg::AuthDone { conn, auth, result }) => {
                    n += 1;
                    let qpn = self
                        .queues
                        .iter()
                        .find(|(_, q)| q.conn == conn)
                        .map(|(k, _)| k);
                    if let Some(mut q) = qpn.and_then(|k| self.queues.take(k)) {
                        self.auth_done(&mut q, auth, result);
                        self.queues.put(q);
                    }
                }
                Err(TryRecvError::Empty) => return n,
                Err(TryRecvError::Disconnected) => {
                    if !self.draining {
                        self.draining = true;
                    }
                    return n;
                }
            }
        }
    }

    /// A drain that takes long says what it waits for (once, after 10 s).
    fn drain_watch(&mut self) {
        let since = *self.draining_since.get_or_insert_with(Instant::now);
        if self.drain_reported || since.elapsed() < Duration::from_secs(10) {
            return;
        }
        self.drain_reported = true;
        let queues: Vec<String> = self
            .queues
            .values()
            .map(|q| {
                format!(
                    "controller {} queue {} (closing {}, in storage {}, work requests {}, \
                     own receives {}, shared receives held {}, waiting for RDMA READ {})",
                    q.cntlid,
                    q.proto.qid(),
                    q.closing,
                    q.elsewhere,
                    q.ep.in_flight(),
                    q.posted_recvs,
                    q.srq_held,
                    q.read_wait.len()
                )
            })
            .collect();
        let msg = format!(
            "poller {}: still draining after 10 s: {} requests in flight ({} writes parked, {} \
             held for a neighbour, {} on the ring), queues: [{}]",
            self.id,
            self.inflight.len(),
            self.writes.parked.len(),
            self.writes.held.len(),
            self.writes.running.len() + self.writes.reads.len(),
            queues.join("; ")
        );
        tracing::warn!("{msg}");
    }

    /// Removes drained queues and tells the control thread; while draining, closes queues
    /// with nothing of theirs in flight but receives.
    fn reap(&mut self) {
        if self.draining {
            for q in self.queues.values_mut() {
                if !q.closing && q.elsewhere == 0 && q.ep.in_flight() == q.posted_recvs {
                    q.close("target shutting down");
                }
            }
        }
        self.drop_paced_of_closing();
        let gone: Vec<u32> = self
            .queues
            .iter()
            .filter(|(_, q)| q.drained())
            .map(|(k, _)| k)
            .collect();
        for k in gone {
            if let Some(mut q) = self.queues.retire(k) {
                // Requests still waiting for their RDMA READ hold receive slots (shared ones
                // must go back to the shared receive queue).
                for req in std::mem::take(&mut q.read_wait) {
                    self.fetch_dropped(req);
                }
                self.detach_pacing(&q);
                self.shared.tell_control(ControlMsg::QueueClosed {
                    conn: q.conn,
                    role: q.proto.role(),
                    reason: q.close_reason.clone().unwrap_or_default(),
                });
                // Responses whose chunks the device may have been reading: the QP goes with
                // the queue, and nothing reads their buffers any more.
                let late = std::mem::take(&mut q.pacing.late);
                drop(q);
                for r in late {
                    self.recycle(r);
                }
            }
        }
    }

    /// Handles the completions [`Poller::stamp_poll`] read early, each at the time it was seen;
    /// returns how many.
    fn handle_early(&mut self) -> usize {
        if self.early.is_empty() {
            return 0;
        }
        let mut early = std::mem::take(&mut self.early);
        let n = early.len();
        for (seen, wc) in early.drain(..) {
            self.wc_at = Some(seen);
            self.on_wc(wc);
        }
        self.wc_at = None;
        // What was read while these were handled stays next, in order.
        early.append(&mut self.early);
        self.early = early;
        n
    }

    /// With queues paced, reads the completion queue after a post: rxe does a transfer's packet
    /// work inside the posting call (milliseconds under the lab's TCG guests, where a pass
    /// that posts took 12.8 ms at the median after its completion poll, 39 ms at p90), and a
    /// probe's answer that came meanwhile would be timed at the next pass. What is read here
    /// is stamped now and handled, in order, at the start of the next pass.
    pub(super) fn stamp_poll(&mut self) {
        if self.pace.paced == 0 {
            return;
        }
        let mut tmp = std::mem::take(&mut self.early_tmp);
        tmp.clear();
        if let Ok(n) = self.cq.poll(&mut tmp, 64) {
            if let Some(seen) = self.pace.cq_polled(n > 0) {
                self.early.extend(tmp.drain(..).map(|wc| (seen, wc)));
            }
        }
        self.early_tmp = tmp;
    }

    fn on_wc(&mut self, wc: Wc) {
        let qpn = wc.qp_num.0;
        let Some(mut q) = self.queues.take(qpn) else {
            // A completion can overtake the queue's hand-over from the control thread.
            if self.stash.len() < 65536 {
                self.stash.push(wc);
            }
            return;
        };
        let ok = wc.status == WcStatus::Success;
        if !ok && !q.closing {
            q.close(format!("work request failed: {:?}", wc.status));
        }
        if WrKind::of(wc.wr_id) == WrKind::SrqRecv {
            // A command from the poller's shared receive queue.
            if let Some(done) = self.srq.as_mut().and_then(|s| s.ep.complete(&wc)) {
                let slot = done.ctx;
                if ok && !q.closing {
                    q.srq_held += 1;
                    self.on_command(&mut q, slot, wc.byte_len as usize);
                } else {
                    self.repost_shared(slot);
                }
            }
            self.queues.put(q);
            return;
        }
        if let Some(done) = q.ep.complete(&wc) {
            match done.ctx {
                Wr::Recv(slot) => {
                    q.posted_recvs = q.posted_recvs.saturating_sub(1);
                    if ok && !q.closing {
                        self.on_command(&mut q, slot, wc.byte_len as usize);
                    }
                }
                Wr::Read(req) => {
                    q.reads_in_flight = q.reads_in_flight.saturating_sub(1);
                    self.pace_acked(&mut q, req.paced_len, Dir::In);
                    if let Step::Write { ns, lba, len, .. } = req.step {
                        self.write_arrived(ns, lba, len);
                    }
                    if ok && !q.closing {
                        self.on_data(&mut q, req);
                    } else {
                        self.recycle(req);
                    }
                    self.pump_reads(&mut q);
                }
                Wr::Resp(req) => {
                    self.pace_acked(&mut q, req.paced_len, Dir::Out);
                    let close = req.close_after;
                    self.recycle(req);
                    if close {
                        q.close("host disconnected the queue");
                    }
                }
                Wr::Chunk => self.chunk_done(&mut q),
                Wr::IserSend { buf, close } => {
                    if let Some(b) = buf {
                        self.pool.put(b);
                    }
                    if close {
                        q.close("iSCSI: connection ended after its last answer");
                    }
                }
                Wr::Probe { seq, sent_ns } => {
                    if ok {
                        self.probe_answered(&mut q, seq, sent_ns);
                    }
                }
            }
        }
        self.queues.put(q);
    }

    fn on_command(&mut self, q: &mut Queue<F>, slot: Slot, len: usize) {
        if q.iser.is_some() {
            return self.on_iser_recv(q, slot, len);
        }
        if len < 64 {
            q.close(format!("capsule of {len} bytes is shorter than a command"));
            return self.drop_slot(q, slot);
        }
        if self.draining {
            // Not acknowledged, so the host retries it after reconnecting: nothing is lost.
            return self.drop_slot(q, slot);
        }
        let Ok(sqe) = Sqe::parse(&slot.cmd[..64]) else {
            q.close("unreadable command");
            return self.drop_slot(q, slot);
        };
        let started = self.clock();
        let req = self.new_req(Some(slot), sqe, len - 64, started, 0);
        match q.proto.receive(&sqe) {
            Dispatch::Reject(st) => self.respond(q, req, st, 0),
            Dispatch::Connect(c) => {
                let loc = match location(&c.sgl) {
                    Ok(l) => l,
                    Err(st) => return self.respond(q, req, st, 0),
                };
                let mut req = req;
                req.step = Step::Connect(c);
                self.fetch(q, req, loc, 1024);
            }
            Dispatch::PropertyGet(pg) => {
                let r = match &q.ctrl {
                    Some(c) => lock(c).handle_property_get(&pg),
                    None => Err(Status::new(StatusCode::COMMAND_SEQUENCE_ERROR)),
                };
                match r {
                    Ok(v) => self.respond(q, req, Status::SUCCESS, v),
                    Err(st) => self.respond(q, req, st, 0),
                }
            }
            Dispatch::PropertySet(ps) => {
                let r = match &q.ctrl {
                    Some(c) => lock(c).handle_property_set(&ps),
                    None => Err(Status::new(StatusCode::COMMAND_SEQUENCE_ERROR)),
                };
                let st = r.err().unwrap_or(Status::SUCCESS);
                self.respond(q, req, st, 0);
            }
            Dispatch::Disconnect(_) => {
                let mut req = req;
                req.close_after = true;
                self.respond(q, req, Status::SUCCESS, 0);
            }
            Dispatch::Auth(a) => self.auth_command(q, req, a),
            Dispatch::Admin => self.admin(q, req),
            Dispatch::Io => self.io(q, req),
        }
    }

    /// Counts a finished request in its namespace's metrics (bytes and latency when `ok`, an
    /// error otherwise), whichever protocol it came by; whether it counted a completed read or
    /// write.
    pub(super) fn account(&mut self, req: &Req, ok: bool) -> bool {
        let Some((ns, read, bytes)) = req.account else {
            return false;
        };
        let took = self
            .clock()
            .saturating_duration_since(req.started)
            .as_nanos() as u64;
        let entry = &self.shared.namespaces[ns];
        if !ok {
            entry
                .metrics
                .errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return false;
        }
        if read {
            entry.metrics.read_done(bytes, took);
        } else {
            entry.metrics.write_done(bytes, took);
        }
        true
    }

    /// A request box for a new command, reusing a finished request's box (and its flush
    /// list's capacity) when one is spare: no allocation per command.
    pub(super) fn new_req(
        &mut self,
        slot: Option<Slot>,
        sqe: Sqe,
        icd_len: usize,
        started: Instant,
        itt: u32,
    ) -> Box<Req> {
        let fresh = Req {
            slot,
            sqe,
            cid: sqe.cid(),
            icd_len,
            started,
            data: None,
            data_src: DataSrc::None,
            data_len: 0,
            step: Step::Respond,
            write_back: None,
            status: Status::SUCCESS,
            result: 0,
            close_after: false,
            account: None,
            remote: None,
            zeroed: false,
            paced_len: 0,
            chunked: 0,
            flush_nss: VecDeque::new(),
            itt,
            immediate: (0, 0),
            iser_resp: Vec::new(),
        };
        match self.spare_reqs.pop() {
            Some(mut b) => {
                let mut nss = std::mem::take(&mut b.flush_nss);
                nss.clear();
                *b = fresh;
                b.flush_nss = nss;
                b
            }
            None => Box::new(fresh),
        }
    }

    /// Brings `len` bytes of host data to the request (in-capsule: already here; keyed: RDMA
    /// READ into a pool buffer), then continues with [`Self::on_data`].
    fn fetch(&mut self, q: &mut Queue<F>, mut req: Box<Req>, loc: DataLocation, len: usize) {
        match loc {
            DataLocation::Remote {
                address,
                length,
                key,
                ..
            } => {
                if length as usize != len {
                    let st = Status::new(StatusCode::DATA_SGL_LENGTH_INVALID).dnr();
                    return self.respond(q, req, st, 0);
                }
                let remote = RemoteBuf {
                    addr: address,
                    rkey: key,
                };
                self.with_buffer(q, req, len, AfterBuf::Fetch(remote));
            }
            DataLocation::InCapsule { length } => {
                let icd = req.slot.as_mut().and_then(|s| s.icd.take());
                match icd {
                    Some(b) if length as usize == len && req.icd_len >= len => {
                        req.data = Some(b);
                        req.data_src = DataSrc::Icd;
                        req.data_len = len;
                        self.on_data(q, req);
                    }
                    other => {
                        if let (Some(b), Some(s)) = (other, req.slot.as_mut()) {
                            s.icd = Some(b);
                        }
                        let st = Status::new(StatusCode::DATA_SGL_LENGTH_INVALID).dnr();
                        self.respond(q, req, st, 0);
                    }
                }
            }
        }
    }

    fn with_buffer(&mut self, q: &mut Queue<F>, mut req: Box<Req>, len: usize, then: AfterBuf) {
        if len > self.pool.max_len() {
            let st = Status::new(StatusCode::INVALID_FIELD).dnr();
            return self.respond(q, req, st, 0);
        }
        match self.pool.get(len) {
            Some(b) => {
                req.data = Some(b);
                req.data_src = DataSrc::Pool;
                req.data_len = len;
                self.after_buf(q, req, then);
            }
            None => {
                q.elsewhere += 1;
                self.buf_wait.push_back((q.qp_num().0, req, len, then));
            }
        }
    }

    fn serve_buf_waiters(&mut self) -> usize {
        let mut n = 0;
        while let Some((_, _, len, _)) = self.buf_wait.front() {
            let Some(b) = self.pool.get(*len) else { break };
            let Some((qpn, mut req, len, then)) = self.buf_wait.pop_front() else {
                self.pool.put(b);
                break;
            };
            n += 1;
            req.data = Some(b);
            req.data_src = DataSrc::Pool;
            req.data_len = len;
            match self.queues.take(qpn) {
                Some(mut q) => {
                    q.elsewhere -= 1;
                    if q.closing {
                        self.recycle(req);
                    } else {
                        self.after_buf(&mut q, req, then);
                    }
                    self.queues.put(q);
                }
                None => self.recycle(req),
            }
        }
        n
    }

    fn after_buf(&mut self, q: &mut Queue<F>, mut req: Box<Req>, then: AfterBuf) {
        if req.immediate.1 > 0 && req.slot.is_some() {
            // An iSCSI write's immediate data, in its receive: to the buffer's front.
            self.iser_take_immediate(q, &mut req);
        }
        match then {
            AfterBuf::Fetch(remote) => {
                req.remote = Some(remote);
                if let Step::Write { ns, lba, len, .. } = req.step {
                    // A stream's writes gather into whole stripes around it.
                    let now = self.clock();
                    self.write_coming(ns, lba, len, now);
                }
                q.read_wait.push_back(req);
                self.pump_reads(q);
            }
            AfterBuf::Storage => self.submit(q, req),
            AfterBuf::AdminOut(bytes, remote) => {
                if let Some(b) = req.data.as_mut() {
                    b[..bytes.len()].copy_from_slice(&bytes);
                }
                req.data_len = bytes.len();
                req.write_back = Some((remote, bytes.len()));
                let (st, result) = (req.status, req.result);
                self.respond(q, req, st, result);
            }
        }
    }

    /// Posts waiting RDMA READs while the negotiated initiator depth and the pacer allow.
    fn pump_reads(&mut self, q: &mut Queue<F>) {
        while q.reads_in_flight < u32::from(q.setup.initiator_depth.max(1)) && !q.closing {
            // What is fetched: the buffer after any immediate data already in it.
            let Some((at, len)) = q.read_wait.front().map(|r| {
                (
                    r.immediate.1,
                    r.data_len.saturating_sub(r.immediate.1) as u64,
                )
            }) else {
                return;
            };
            if !self.pace_gate(q, len) {
                return;
            }
            let Some(mut req) = q.read_wait.pop_front() else {
                return;
            };
            let (Some(remote), Some(buf)) = (req.remote, req.data.as_ref()) else {
                self.fetch_dropped(req);
                continue;
            };
            let sge = match self.pool.sge_at(buf, at, len as usize) {
                Ok(s) => s,
                Err(e) => {
                    q.close(format!("pool buffer not registered: {e}"));
                    self.fetch_dropped(req);
                    return;
                }
            };
            let sges = [sge];
            let mut wr = [SendWr {
                wr_id: WrId(0),
                op: SendOp::RdmaRead(remote),
                payload: Payload::Sges(&sges),
                signaled: true,
            }];
            req.paced_len = len;
            let write = match req.step {
                Step::Write { ns, lba, len, .. } => Some((ns, lba, len)),
                _ => None,
            };
            let t0 = self.pace.post_began();
            let posted = q.ep.post_send(Wr::Read(req), &mut wr);
            self.pace.post_ended(t0);
            match posted {
                Ok(()) => {
                    q.reads_in_flight += 1;
                    self.pace_sent(q, len, Dir::In);
                    self.stamp_poll();
                    if let Some((ns, lba, len)) = write {
                        let now = self.clock();
                        self.write_fetching(ns, lba, len, now);
                    }
                }
                Err(rej) => {
                    q.close(format!("RDMA READ not posted: {}", rej.error));
                    if let Wr::Read(r) = rej.ctx {
                        self.fetch_dropped(r);
                    }
                    return;
                }
            }
        }
    }

    /// A request whose RDMA READ was queued and will not be posted: a write among them is no
    /// longer on its way ([`Poller::write_coming`]).
    fn fetch_dropped(&mut self, req: Box<Req>) {
        if let Step::Write { ns, lba, len, .. } = req.step {
            self.write_arrived(ns, lba, len);
        }
        self.recycle(req);
    }

    /// The request's host data is here.
    fn on_data(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        match std::mem::replace(&mut req.step, Step::Respond) {
            Step::Connect(c) => self.finish_connect(q, req, c),
            Step::AdminIn => self.run_admin(q, req),
            Step::AuthIn => self.auth_data(q, req),
            Step::ScsiOut { ns, lun, io } => self.iser_data_out(q, req, ns, lun, io),
            step @ Step::Write { .. } => {
                req.step = step;
                self.submit(q, req);
            }
            Step::Dsm {
                ns,
                count,
                deallocate,
            } => {
                let ranges = {
                    let bytes = req.data_bytes();
                    let want = (usize::from(count) * 16).min(bytes.len());
                    io::validate_dsm_ranges(&self.shared.namespaces[ns].info, &bytes[..want], count)
                };
                self.drop_data(&mut req);
                match ranges {
                    Err(st) => self.respond(q, req, st, 0),
                    Ok(ranges) if deallocate => {
                        let pieces: VecDeque<(u64, u64)> = ranges
                            .iter()
                            .filter(|r| r.nlb > 0)
                            .map(|r| (r.slba, u64::from(r.nlb)))
                            .collect();
                        if pieces.is_empty() {
                            return self.respond(q, req, Status::SUCCESS, 0);
                        }
                        let len = self.zero_len(&pieces);
                        req.step = Step::Zero { ns, pieces };
                        self.with_buffer(q, req, len, AfterBuf::Storage);
                    }
                    Ok(_) => self.respond(q, req, Status::SUCCESS, 0),
                }
            }
            _ => {
                let st = Status::new(StatusCode::INTERNAL_ERROR);
                self.respond(q, req, st, 0);
            }
        }
    }

    fn zero_len(&self, pieces: &VecDeque<(u64, u64)>) -> usize {
        let most = pieces.iter().map(|p| p.1).max().unwrap_or(1) * BLOCK;
        most.min(self.pool.max_len() as u64) as usize
    }

    fn finish_connect(
        &mut self,
        q: &mut Queue<F>,
        mut req: Box<Req>,
        cmd: raidline_proto::fabrics::Connect,
    ) {
        let data = ConnectData::parse(&req.data_bytes()[..1024.min(req.data_bytes().len())]);
        self.drop_data(&mut req);
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                let st = for_parse_error(&e);
                return self.respond(q, req, st, 0);
            }
        };
        if cmd.qid != q.setup.qid {
            // The queue id must be the one the RDMA CM connect asked for (nvmet does the same).
            let st = Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr();
            let dw0 = ConnectResponse::InvalidParameter {
                attribute: InvalidParameterIn::Command,
                offset: 42,
            }
            .to_dw0();
            return self.respond(q, req, st, u64::from(dw0));
        }
        let peer = self.peer_of(q);
        let accepted = {
            let mut reg = self
                .shared
                .registry
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            reg.connect(&cmd, &data)
        };
        match accepted {
            Err(refusal) => {
                tracing::warn!(
                    "connect refused: host {} ({peer}) to {} queue {}: {}",
                    data.hostnqn,
                    data.subnqn,
                    cmd.qid,
                    refusal.reason
                );
                self.respond(q, req, refusal.status, u64::from(refusal.dw0));
            }
            Ok(acc) => {
                q.proto.connected(&cmd, acc.cntlid);
                q.cntlid = acc.cntlid;
                q.served = Some(acc.served.clone());
                let atr = self.auth_on_connect(q, &data.hostnqn, &acc.served);
                let mut ctrls = self
                    .shared
                    .controllers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if acc.new_controller {
                    let ctrl = Arc::new(std::sync::Mutex::new(Controller::new(
                        acc.cntlid,
                        acc.served.clone(),
                        data.hostnqn.clone(),
                        self.shared.limits,
                        cmd.kato,
                        Instant::now(),
                    )));
                    tracing::info!(
                        "controller {} connected: host {} ({peer}) to {} (kato {} ms)",
                        acc.cntlid,
                        data.hostnqn,
                        data.subnqn,
                        cmd.kato
                    );
                    q.io = Some(lock(&ctrl).io_counters().clone());
                    q.ctrl = Some(ctrl.clone());
                    ctrls.insert(
                        acc.cntlid,
                        CtrlEntry {
                            ctrl,
                            conns: vec![(0, q.conn, self.id)],
                            hostnqn: data.hostnqn.to_string(),
                            subnqn: data.subnqn.to_string(),
                            host_addr: peer,
                            kato_ms: cmd.kato,
                            expired: false,
                            auth: auth::describe(None, atr),
                        },
                    );
                } else if let Some(e) = ctrls.get_mut(&acc.cntlid) {
                    tracing::debug!(
                        "controller {}: I/O queue {} connected (depth {})",
                        acc.cntlid,
                        cmd.qid,
                        q.setup.depth
                    );
                    e.conns.push((cmd.qid, q.conn, self.id));
                    q.io = Some(lock(&e.ctrl).io_counters().clone());
                    q.ctrl = Some(e.ctrl.clone());
                }
                drop(ctrls);
                let dw0 = ConnectResponse::Success {
                    cntlid: acc.cntlid,
                    authreq: u8::from(atr),
                }
                .to_dw0();
                self.respond(q, req, Status::SUCCESS, u64::from(dw0));
            }
        }
    }

    fn admin(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        if req.sqe.opcode() & 0x3 == 0x1 {
            // Host-to-controller data.
            let sgl = match req.sqe.sgl1() {
                Ok(s) => s,
                Err(e) => {
                    let st = for_parse_error(&e);
                    return self.respond(q, req, st, 0);
                }
            };
            let len = sgl.length();
            if len > 0 {
                if len > MAX_ADMIN_IN {
                    let st = Status::new(StatusCode::INVALID_FIELD).dnr();
                    return self.respond(q, req, st, 0);
                }
                let loc = match location(&sgl) {
                    Ok(l) => l,
                    Err(st) => return self.respond(q, req, st, 0),
                };
                req.step = Step::AdminIn;
                return self.fetch(q, req, loc, len as usize);
            }
        }
        self.run_admin(q, req);
    }

    fn run_admin(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        let Some(ctrl) = q.ctrl.clone() else {
            let st = Status::new(StatusCode::COMMAND_SEQUENCE_ERROR);
            return self.respond(q, req, st, 0);
        };
        let log = match (&q.served, req.sqe.opcode()) {
            (Some(Served::Discovery), op) if op == AdminOpcode::GET_LOG_PAGE.0 => {
                let host = lock(&ctrl).hostnqn().clone();
                let reg = self
                    .shared
                    .registry
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let genctr = self
                    .shared
                    .genctr
                    .load(std::sync::atomic::Ordering::Relaxed);
                Some(crate::discovery::log_for_host(
                    &reg,
                    &self.shared.ports,
                    &host,
                    genctr,
                ))
            }
            _ => None,
        };
        let wall_clock_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let env = AdminEnv {
            discovery: log.as_ref(),
            wall_clock_ms,
        };
        let outcome = lock(&ctrl).handle_admin(Instant::now(), &req.sqe, req.data_bytes(), &env);
        self.drop_data(&mut req);
        match outcome {
            AdminOutcome::Parked => {
                q.parked.insert(req.cid, req);
            }
            AdminOutcome::Complete(c) => self.complete_admin(q, req, c),
        }
    }

    fn complete_admin(&mut self, q: &mut Queue<F>, mut req: Box<Req>, c: AdminCompletion) {
        if c.data.is_empty() || !c.status.is_success() {
            return self.respond(q, req, c.status, c.result);
        }
        match req.sqe.sgl1() {
            Ok(SglDescriptor::Keyed { address, key, .. }) => {
                req.status = c.status;
                req.result = c.result;
                let len = c.data.len();
                let remote = RemoteBuf {
                    addr: address,
                    rkey: key,
                };
                self.with_buffer(q, req, len, AfterBuf::AdminOut(c.data, remote));
            }
            _ => {
                let st = Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr();
                self.respond(q, req, st, 0);
            }
        }
    }

    /// Asynchronous events that became ready on admin queues with parked requests.
    fn events(&mut self) -> usize {
        let qpns: Vec<u32> = self
            .queues
            .iter()
            .filter(|(_, q)| !q.parked.is_empty() && !q.closing)
            .map(|(k, _)| k)
            .collect();
        let mut n = 0;
        for qpn in qpns {
            let Some(mut q) = self.queues.take(qpn) else {
                continue;
            };
            let ready: Vec<(u16, AdminCompletion)> = match &q.ctrl {
                Some(c) => {
                    let mut c = lock(c);
                    std::iter::from_fn(|| c.poll_event()).collect()
                }
                None => Vec::new(),
            };
            for (cid, comp) in ready {
                if let Some(req) = q.parked.remove(&cid) {
                    n += 1;
                    self.complete_admin(&mut q, req, comp);
                }
            }
            self.queues.put(q);
        }
        n
    }

    fn ns_index(&self, sub: &raidline_proto::text::Nqn, nsid: u32) -> Option<usize> {
        self.shared
            .namespaces
            .iter()
            .position(|n| &n.subnqn == sub && n.info.nsid == nsid)
    }

    fn io(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        // The queue's subsystem is borrowed, not cloned: an Arc clone per command is an atomic
        // on a cache line every poller serving the subsystem shares.
        let Some(Served::Nvm(sub)) = q.served.as_ref() else {
            let st = Status::new(StatusCode::INVALID_OPCODE).dnr();
            return self.respond(q, req, st, 0);
        };
        let v = io::validate(&req.sqe, &self.shared.limits, req.icd_len, |nsid| {
            sub.configured(nsid)
        });
        let r = match v {
            Ok(r) => r,
            Err(st) => return self.respond(q, req, st, 0),
        };
        let nsid = match &r {
            IoRequest::Read { nsid, .. }
            | IoRequest::Write { nsid, .. }
            | IoRequest::Flush { nsid }
            | IoRequest::WriteZeroes { nsid, .. }
            | IoRequest::DatasetManagement { nsid, .. } => *nsid,
        };
        // Flush of every namespace (nsid FFFFFFFFh) names the subsystem's active ones.
        let all: Option<VecDeque<usize>> = (nsid == 0xFFFF_FFFF).then(|| {
            sub.active_namespaces()
                .filter_map(|n| self.ns_index(&sub.nqn, n.nsid))
                .collect()
        });
        let ns = match q.ns_cache {
            Some((id, ns)) if id == nsid => Some(ns),
            _ => {
                let ns = self.ns_index(&sub.nqn, nsid);
                if let Some(i) = ns {
                    q.ns_cache = Some((nsid, i));
                }
                ns
            }
        };
        match r {
            IoRequest::Read { lba, data, .. } => {
                let (
                    Some(ns),
                    DataLocation::Remote {
                        address,
                        length,
                        key,
                        ..
                    },
                ) = (ns, data)
                else {
                    let st = Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr();
                    return self.respond(q, req, st, 0);
                };
                let len = length as usize;
                req.step = Step::Read { ns, lba, len };
                req.account = Some((ns, true, len as u64));
                req.write_back = Some((
                    RemoteBuf {
                        addr: address,
                        rkey: key,
                    },
                    len,
                ));
                self.with_buffer(q, req, len, AfterBuf::Storage);
            }
            IoRequest::Write { lba, data, fua, .. } => {
                let Some(ns) = ns else {
                    let st = Status::new(StatusCode::INVALID_NAMESPACE).dnr();
                    return self.respond(q, req, st, 0);
                };
                let len = data.len() as usize;
                req.step = Step::Write { ns, lba, len, fua };
                req.account = Some((ns, false, len as u64));
                self.fetch(q, req, data, len);
            }
            IoRequest::Flush { .. } => {
                req.flush_nss.clear();
                match all {
                    Some(all) => req.flush_nss.extend(all),
                    None => req.flush_nss.extend(ns),
                }
                if req.flush_nss.is_empty() {
                    return self.respond(q, req, Status::SUCCESS, 0);
                }
                req.step = Step::Flush;
                self.submit(q, req);
            }
            IoRequest::WriteZeroes { lba, blocks, .. } => {
                let Some(ns) = ns else {
                    let st = Status::new(StatusCode::INVALID_NAMESPACE).dnr();
                    return self.respond(q, req, st, 0);
                };
                let pieces: VecDeque<(u64, u64)> = [(lba, u64::from(blocks))].into();
                let len = self.zero_len(&pieces);
                req.step = Step::Zero { ns, pieces };
                self.with_buffer(q, req, len, AfterBuf::Storage);
            }
            IoRequest::DatasetManagement {
                ranges,
                deallocate,
                data,
                ..
            } => {
                let Some(ns) = ns else {
                    let st = Status::new(StatusCode::INVALID_NAMESPACE).dnr();
                    return self.respond(q, req, st, 0);
                };
                req.step = Step::Dsm {
                    ns,
                    count: ranges,
                    deallocate,
                };
                let len = data.len() as usize;
                self.fetch(q, req, data, len);
            }
        }
    }

    /// Hands the request's current step to its namespace's storage queue.
    fn submit(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let (ns, request) = match &mut req.step {
            Step::Read { ns, lba, len } => (
                *ns,
                Request {
                    tag,
                    kind: RequestKind::Read,
                    lba: ArrayBlock(*lba),
                    len: *len,
                    buf: req.data.take(),
                },
            ),
            Step::Write { ns, lba, len, .. } => (
                *ns,
                Request {
                    tag,
                    kind: RequestKind::Write,
                    lba: ArrayBlock(*lba),
                    len: *len,
                    buf: req.data.take(),
                },
            ),
            Step::Zero { ns, pieces } => {
                let ns = *ns;
                let cap = req.data.as_ref().map_or(0, |b| b.len() as u64) / BLOCK;
                let Some(front) = pieces.front_mut() else {
                    return self.respond(q, req, Status::SUCCESS, 0);
                };
                let blocks = front.1.min(cap.max(1));
                let lba = front.0;
                front.0 += blocks;
                front.1 -= blocks;
                if front.1 == 0 {
                    pieces.pop_front();
                }
                if !req.zeroed {
                    if let Some(b) = req.data.as_mut() {
                        b.fill(0);
                    }
                    req.zeroed = true;
                }
                (
                    ns,
                    Request {
                        tag,
                        kind: RequestKind::Write,
                        lba: ArrayBlock(lba),
                        len: (blocks * BLOCK) as usize,
                        buf: req.data.take(),
                    },
                )
            }
            Step::Flush => {
                let Some(ns) = req.flush_nss.pop_front() else {
                    return self.respond(q, req, Status::SUCCESS, 0);
                };
                (
                    ns,
                    Request {
                        tag,
                        kind: RequestKind::Flush,
                        lba: ArrayBlock(0),
                        len: 0,
                        buf: None,
                    },
                )
            }
            _ => {
                let st = Status::new(StatusCode::INTERNAL_ERROR);
                return self.respond(q, req, st, 0);
            }
        };
        // The poller's own ring first, where it serves the request (no thread hop); a host
        // write may wait there to be written with its neighbours.
        let (kind, lba, len) = (request.kind, request.lba, request.len);
        let taken = if matches!(req.step, Step::Write { .. }) {
            self.gather_array_write(ns, request)
        } else {
            self.start_array_write(ns, request, false)
        };
        let request = match taken {
            writes::Taken::Yes => {
                q.elsewhere += 1;
                self.inflight.insert(tag, (q.qp_num().0, req));
                return;
            }
            writes::Taken::No(request) => request,
        };
        let request = match self.ring.as_mut() {
            Some(ring) => {
                match super::backend::try_direct(&self.shared.namespaces[ns].backend, request, ring)
                {
                    Ok(()) => {
                        self.shared
                            .data_path
                            .ring_requests
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        self.ring_redo.insert(tag, (ns, kind, lba, len));
                        q.elsewhere += 1;
                        self.inflight.insert(tag, (q.qp_num().0, req));
                        return;
                    }
                    // A read with a chunk to rebuild: a read task on the ring.
                    Err(back) => match self.start_array_read(ns, back, false) {
                        writes::Taken::Yes => {
                            q.elsewhere += 1;
                            self.inflight.insert(tag, (q.qp_num().0, req));
                            return;
                        }
                        writes::Taken::No(back) => back,
                    },
                }
            }
            None => request,
        };
        match self.submit_to_workers(ns, request) {
            Ok(()) => {
                q.elsewhere += 1;
                self.inflight.insert(tag, (q.qp_num().0, req));
            }
            Err(back) => {
                req.data = back.buf;
                tracing::error!("namespace storage workers are gone");
                let st = for_storage_error(StorageError::NotReady);
                self.respond(q, req, st, 0);
            }
        }
    }

    /// Hands `request` to namespace `ns`'s storage workers, counted as theirs.
    fn submit_to_workers(&mut self, ns: usize, request: Request) -> Result<(), Request> {
        self.nsq[ns].submit(request)?;
        self.shared
            .data_path
            .worker_requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// A request served on the poller's ring completed. A failed array request is redone by
    /// the blocking engine off the poller, on the array's maintenance thread (it marks the
    /// member failed and reconstructs or goes on without it; the poller must not write
    /// superblocks); a failed file operation is the request's error.
    fn on_ring(&mut self, c: RingCompletion) {
        let Err(c) = self.on_write_task(c) else {
            return;
        };
        let Err(c) = self.on_read_task(c) else {
            return;
        };
        let redo = self.ring_redo.remove(&c.tag);
        let Err((_, error)) = c.result else {
            return self.on_storage(Done {
                tag: c.tag,
                buf: c.buf,
                result: Ok(()),
            });
        };
        let mut buf = c.buf;
        if let Some((ns, kind, lba, len)) = redo {
            if !matches!(
                self.shared.namespaces[ns].backend,
                super::backend::Backend::File(_)
            ) {
                tracing::debug!(
                    "poller {}: array request failed on the ring ({error}); the engine redoes it",
                    self.id
                );
                let request = Request {
                    tag: c.tag,
                    kind,
                    lba,
                    len,
                    buf,
                };
                match self.submit_to_workers(ns, request) {
                    Ok(()) => return,
                    Err(back) => buf = back.buf,
                }
            }
        }
        self.on_storage(Done {
            tag: c.tag,
            buf,
            result: Err(RaidError::Member {
                role: MemberIdx(0),
                source: error,
            }),
        });
    }

    fn on_storage(&mut self, c: Done) {
        self.note_worker_done(c.tag);
        let Some((qpn, mut req)) = self.inflight.remove(&c.tag) else {
            if let Some(b) = c.buf {
                self.pool.put(b);
            }
            return;
        };
        if let Some(b) = c.buf {
            req.data = Some(b);
        }
        let Some(mut q) = self.queues.take(qpn) else {
            self.recycle(req);
            return;
        };
        q.elsewhere -= 1;
        if q.closing {
            self.recycle(req);
            self.queues.put(q);
            return;
        }
        match c.result {
            Err(e) => {
                let kind = storage_error_kind(&req.step, &e);
                tracing::warn!(
                    "controller {} queue {} command {}: storage error: {e}",
                    q.cntlid,
                    q.proto.qid(),
                    req.cid
                );
                if let Some((ns, _, _)) = req.account {
                    self.shared.namespaces[ns]
                        .metrics
                        .errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                req.account = None;
                req.write_back = None;
                self.respond(&mut q, req, for_storage_error(kind), 0);
            }
            Ok(()) => match &mut req.step {
                Step::Read { .. } => self.respond(&mut q, req, Status::SUCCESS, 0),
                Step::Write { ns, fua, .. } => {
                    if *fua {
                        let ns = *ns;
                        self.drop_data(&mut req);
                        req.flush_nss.clear();
                        req.flush_nss.push_back(ns);
                        req.step = Step::Flush;
                        self.submit(&mut q, req);
                    } else {
                        self.respond(&mut q, req, Status::SUCCESS, 0);
                    }
                }
                Step::Zero { pieces, .. } if !pieces.is_empty() => self.submit(&mut q, req),
                Step::Flush if !req.flush_nss.is_empty() => self.submit(&mut q, req),
                _ => self.respond(&mut q, req, Status::SUCCESS, 0),
            },
        }
        self.queues.put(q);
    }

    /// Returns the request's data buffer to where it came from.
    fn drop_data(&mut self, req: &mut Req) {
        if let Some(b) = req.data.take() {
            match req.data_src {
                DataSrc::Icd => {
                    if let Some(s) = req.slot.as_mut() {
                        s.icd = Some(b);
                    }
                }
                _ => self.pool.put(b),
            }
        }
        req.data_src = DataSrc::None;
        req.data_len = 0;
    }

    /// Forgets a request whose queue is going away; its pool buffer goes back.
    fn recycle(&mut self, mut req: Box<Req>) {
        self.drop_data(&mut req);
        // A shared receive outlives the queue pair it served.
        if let Some(slot) = req.slot.take().filter(|s| s.shared) {
            self.repost_shared(slot);
        }
        // Kept for the next command, up to what a busy poller has in flight.
        if self.spare_reqs.len() < SPARE_REQS {
            self.spare_reqs.push(req);
        }
    }

    /// A receive slot whose command is not served: a shared one goes back to the shared
    /// receive queue (a queue pair's own die with it).
    fn drop_slot(&mut self, q: &mut Queue<F>, slot: Slot) {
        if slot.shared {
            q.srq_held = q.srq_held.saturating_sub(1);
            self.repost_shared(slot);
        }
    }

    /// Puts a slot back on the poller's shared receive queue.
    fn repost_shared(&mut self, slot: Slot) {
        let Some(srq) = self.srq.as_mut() else {
            return;
        };
        if let Err(e) = post_shared(srq, slot) {
            tracing::error!("poller {}: shared receive not reposted: {e}", self.id);
        }
    }

    /// Reposts the request's receive, then sends its completion (after the RDMA WRITE of its
    /// data, if any). The request travels in the SEND's context until it completes.
    fn respond(&mut self, q: &mut Queue<F>, mut req: Box<Req>, status: Status, result: u64) {
        if q.iser.is_some() {
            return self.iser_respond(q, req, status);
        }
        if req.data_src == DataSrc::Icd {
            self.drop_data(&mut req);
        }
        if q.closing {
            return self.recycle(req);
        }
        if self.hold_responses {
            // Counted as the queue's until posted (a draining queue waits for it). A paced
            // queue's pass its pacer's gate when they are posted, in the order held.
            q.elsewhere += 1;
            let seq = self.held_responses.len() as u32;
            self.held_responses
                .push((q.qp_num().0, seq, req, status, result));
            return;
        }
        if let Some(req) = self.pace_response(q, req, status, result) {
            self.send_response(q, req, status, result);
        }
    }

    /// [`Self::respond`] once the pacer lets the response's data go.
    fn send_response(&mut self, q: &mut Queue<F>, req: Box<Req>, status: Status, result: u64) {
        if q.iser.is_some() {
            // An iSCSI read the pacer held: its data (what chunks did not send), then its
            // SCSI Response.
            return self.iser_read_response(q, req);
        }
        // Its own scratch (`sending` is taken while held responses are flushed), and arrays
        // sized for one: they live on the stack and are set up per call.
        let mut one = std::mem::take(&mut self.sending_one);
        one.push((req, status, result));
        self.send_responses::<1, 2>(q, &mut one, false);
        self.sending_one = one;
    }

    /// [`Self::send_responses`] for what was held or released together: [`DOORBELL_BATCH`]
    /// responses to a call.
    pub(super) fn post_held(
        &mut self,
        q: &mut Queue<F>,
        batch: &mut Vec<(Box<Req>, Status, u64)>,
        charged: bool,
    ) {
        self.send_responses::<DOORBELL_BATCH, { 2 * DOORBELL_BATCH }>(q, batch, charged);
    }

    /// Posts the responses in `batch` (drained) on `q`, up to `N` with each call to the
    /// device (`W` = 2 `N` work requests; the held responses go [`DOORBELL_BATCH`] at a time):
    /// on rxe a post is a system call that also does the packets' work, and SPDK's target
    /// likewise posts what a poll gathered with one doorbell. Each response is the chain it
    /// would be alone: the RDMA WRITE of its data (if any), then its SEND, and it is tracked
    /// as if posted alone. `charged`: the data was charged to the queue's pacer as each
    /// response passed its gate ([`Self::flush_responses`]); otherwise it is charged once
    /// posted.
    fn send_responses<const N: usize, const W: usize>(
        &mut self,
        q: &mut Queue<F>,
        batch: &mut Vec<(Box<Req>, Status, u64)>,
        charged: bool,
    ) {
        let mut chains = std::mem::take(&mut self.chains);
        let mut quiet_done: Vec<Box<Req>> = std::mem::take(&mut self.quiet_done);
        let mut it = batch.drain(..);
        loop {
            // One doorbell's worth, prepared on the stack: the capsules and data SGEs the work
            // requests point at live here until the post returns.
            let mut cqes = [[0u8; 16]; N];
            let mut datas: [Option<(RemoteBuf, [Sge; 1])>; N] = [None; N];
            let mut n = 0;
            let mut pending = q.ep.unsignaled_pending();
            // Half the slots the responses have: a paced queue's extra chunk slots are not
            // theirs to fill with unsignaled sends.
            let chunk_slots = if q.pacing.pacer.is_some() {
                CHUNK_SLOTS
            } else {
                0
            };
            let half = q.ep.sq_depth().saturating_sub(chunk_slots) / 2;
            chains.clear();
            for (mut req, status, result) in it.by_ref() {
                if let Some(slot) = req.slot.take() {
                    self.post_recv(q, slot);
                }
                let Some((cqe, data)) = self.prepare_response(q, &mut req, status, result) else {
                    self.recycle_posted(q, req);
                    continue;
                };
                cqes[n] = cqe;
                datas[n] = data;
                req.paced_len = paced_len(&data);
                let len = if data.is_some() { 2 } else { 1 };
                // A response with no data needs no completion: its capsule goes inline,
                // nothing of the request stays in use by the device. Unsignaled, its
                // send-queue slot comes back with a later signaled completion, so one in
                // every half queue is signaled.
                let quiet = len == 1 && !req.close_after && pending < half;
                if quiet {
                    pending += 1;
                    quiet_done.push(req);
                    chains.push(Chain::new(1, None));
                } else {
                    pending = 0;
                    chains.push(Chain::new(len, Some(Wr::Resp(req))));
                }
                n += 1;
                if n == N {
                    break;
                }
            }
            if n == 0 {
                break;
            }
            let send = SendWr {
                wr_id: WrId(0),
                op: SendOp::Send,
                payload: Payload::Inline(&[]),
                signaled: false,
            };
            let mut wrs = [send; W];
            let mut w = 0;
            for (cqe, data) in cqes[..n].iter().zip(&datas[..n]) {
                if let Some((remote, sge)) = data {
                    wrs[w] = SendWr {
                        wr_id: WrId(0),
                        op: SendOp::RdmaWrite(*remote),
                        payload: Payload::Sges(sge),
                        signaled: false,
                    };
                    w += 1;
                }
                wrs[w] = SendWr {
                    payload: Payload::Inline(cqe),
                    ..send
                };
                w += 1;
            }
            let t0 = self.pace.post_began();
            let posted = q.ep.post_send_batch(&mut chains, &mut wrs[..w]);
            self.pace.post_ended(t0);
            match posted {
                Ok(()) => {
                    if !charged {
                        for data in &datas[..n] {
                            self.pace_sent(q, paced_len(data), Dir::Out);
                        }
                    }
                    self.stamp_poll();
                }
                Err(rej) => {
                    q.close(format!("response not posted: {}", rej.error));
                    for ctx in rej.ctxs {
                        if let Wr::Resp(r) = ctx {
                            self.recycle_posted(q, r);
                        }
                    }
                }
            }
            for r in quiet_done.drain(..) {
                self.recycle(r);
            }
        }
        drop(it);
        self.chains = chains;
        self.quiet_done = quiet_done;
    }

    /// A response's accounting (latency, counters, the debug line of a refusal) and what it
    /// sends: the completion queue entry, and the data's RDMA WRITE if it returns any.
    /// `None`: it cannot be sent (the queue is closed).
    #[allow(clippy::type_complexity)]
    fn prepare_response(
        &mut self,
        q: &mut Queue<F>,
        req: &mut Req,
        status: Status,
        result: u64,
    ) -> Option<([u8; 16], Option<(RemoteBuf, [Sge; 1])>)> {
        let ok = status.is_success();
        if !ok && tracing::enabled!(tracing::Level::DEBUG) {
            let sqe: String = req
                .sqe
                .as_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            tracing::debug!(
                "controller {} queue {} cid {} opcode {:#04x}: {:?} (sqe {sqe})",
                q.cntlid,
                q.proto.qid(),
                req.cid,
                req.sqe.opcode(),
                status
            );
        }
        if let (Some((_, read, bytes)), true) = (req.account, self.account(req, ok)) {
            if let Some(io) = &q.io {
                io.count(read, bytes);
            }
        }
        let cqe = q.proto.completion(req.cid, status, result).to_bytes();
        let write_back = if ok { req.write_back } else { None };
        let sge = match (write_back, req.data.as_ref()) {
            (Some((_, len)), Some(buf)) => match self.pool.sge(buf, len) {
                Ok(s) => Some(s),
                Err(e) => {
                    q.close(format!("pool buffer not registered: {e}"));
                    return None;
                }
            },
            _ => None,
        };
        // Chunks already posted by the pacer: the last RDMA WRITE carries the rest.
        let done = req.chunked as u32;
        Some((
            cqe,
            write_back.zip(sge).map(|((remote, _), s)| {
                let (to, from) = pace::data_at(remote, s, u64::from(done), s.length - done);
                (to, [from])
            }),
        ))
    }

    fn post_recv(&mut self, q: &mut Queue<F>, slot: Slot) {
        if slot.shared {
            q.srq_held = q.srq_held.saturating_sub(1);
            return self.repost_shared(slot);
        }
        let Some(rb) = q.recv_bufs.as_ref() else {
            return q.close("a receive of its own on a queue without receive buffers");
        };
        let sges = match rb.sges(&slot.cmd, slot.icd.as_ref()) {
            Ok(s) => s,
            Err(e) => return q.close(format!("receive buffer not registered: {e}")),
        };
        match q.ep.post_recv(Wr::Recv(slot), &sges) {
            Ok(()) => q.posted_recvs += 1,
            Err(rej) => q.close(format!("receive not posted: {}", rej.error)),
        }
    }
}

/// Bytes a response's RDMA WRITE moves (what its pacer counts).
fn paced_len(data: &Option<(RemoteBuf, [Sge; 1])>) -> u64 {
    data.map_or(0, |(_, s)| u64::from(s[0].length))
}

/// Posts `slot` on the shared receive queue.
fn post_shared<F: Fabric>(srq: &mut SharedRecv<F>, slot: Slot) -> Result<(), String> {
    let sges = srq
        .bufs
        .sges(&slot.cmd, slot.icd.as_ref())
        .map_err(|e| e.to_string())?;
    srq.ep
        .post_recv(slot, &sges)
        .map_err(|rej| rej.error.to_string())
}

fn storage_error_kind(step: &Step, e: &RaidError) -> StorageError {
    if matches!(e, RaidError::ArrayFailed { .. }) {
        return match step {
            Step::Read { .. } => StorageError::Unrecovered,
            _ => StorageError::WriteFault,
        };
    }
    match step {
        Step::Read { .. } => StorageError::Unrecovered,
        Step::Write { .. } | Step::Zero { .. } => StorageError::WriteFault,
        _ => StorageError::Internal,
    }
}

/// Where an SGL descriptor's data is, for fabrics and admin commands.
fn location(sgl: &SglDescriptor) -> Result<DataLocation, Status> {
    match *sgl {
        SglDescriptor::Keyed {
            address,
            length,
            key,
            invalidate,
        } => Ok(DataLocation::Remote {
            address,
            length,
            key,
            invalidate,
        }),
        SglDescriptor::InCapsule { offset, length } => {
            if offset != 0 {
                Err(Status::new(StatusCode::SGL_OFFSET_INVALID).dnr())
            } else {
                Ok(DataLocation::InCapsule { length })
            }
        }
        _ => Err(Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr()),
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
