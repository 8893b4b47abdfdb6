//! The poller's side of live pacing (see [`super::super::pacing`]): attaching a pacer to each
//! new I/O queue, the token-bucket gate in front of RDMA READs and of responses carrying data,
//! the paced wait lists retried at their due time, RTT probes, run-time parameter changes and
//! the per-queue statistics.
//!
//! Invariants: a queue with waiting responses is always due at some time (the bucket's ready
//! time, or an acknowledgement for a window-limited algorithm); waiting responses count in the
//! queue's `elsewhere`, so a closing queue is not reaped before they are recycled; the poller
//! never sleeps past the earliest due time ([`Poller::until_due`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_cc::netrtt::Dir;
use raidline_cc::pacer::Readiness;
use raidline_cc::probe::ProbeSeq;
use raidline_cc::Nanos;
use raidline_fabric::{Fabric, FabricError, Payload, RemoteBuf, SendOp, SendWr, Sge, WrId};
use raidline_proto::Status;

use super::super::pacing::{QpPacer, QueueStats, PARAM_CHECK};
use super::super::queue::{Queue, Req, Wr};
use super::lock;
use super::Poller;

/// How often queue statistics are published.
const PUBLISH_EVERY: Nanos = Nanos::from_ms(20);
/// When the algorithm stopped the flow (rate 0), look again this much later.
const STOPPED_RETRY: Nanos = Nanos::from_ms(1);

/// A paced queue's read data leaves in RDMA WRITEs of at most this many bytes, each waiting for
/// its tokens. A work request leaves the device as one burst: a whole 128 KiB transfer is 26 ms
/// of a 40 Mbit/s bottleneck, so pacing whole transfers left a fair-share `fixed` allocation
/// with a 27.5 ms queue in the lab (README, "At a real bottleneck").
pub(super) const PACE_CHUNK: u64 = 16 << 10;

/// Send-queue slots a paced queue pair has for chunks beyond its responses' own (its send
/// queue is that much deeper): chunks not yet completed never exceed it, so
/// they never take a slot a response needs.
pub(crate) const CHUNK_SLOTS: u32 = 64;

/// The `len` bytes at `off` of a response's read data: where they go in the host's buffer and
/// where they lie in the pool buffer (`sge` covers the data from its start). The host's
/// address is unchecked: it wraps, and a bogus one fails at the device.
pub(super) fn data_at(remote: RemoteBuf, sge: Sge, off: u64, len: u32) -> (RemoteBuf, Sge) {
    (
        RemoteBuf {
            addr: remote.addr.wrapping_add(off),
            ..remote
        },
        Sge {
            addr: sge.addr + off,
            length: len,
            ..sge
        },
    )
}

/// The poller's pacing clock and bookkeeping.
pub(crate) struct PollerPacing {
    /// Time zero of the poller clock.
    start: Instant,
    /// Parameter generation the queues run with.
    generation: u64,
    checked: Nanos,
    published: Nanos,
    /// Earliest due time of any queue.
    next_due: Option<Nanos>,
    /// Queue statistics changed since they were last published.
    unpublished: bool,
    /// Passes that read no clock, counted to look at the clock now and then.
    clockless: u32,
    /// Queues with a pacer.
    pub(super) paced: usize,
    /// Time spent inside send-side post calls while a queue is paced (see
    /// [`PollerPacing::posting`]).
    posting: Nanos,
    /// The posting clock at the latest completion poll ([`PollerPacing::cq_polled`]).
    polled: Nanos,
}

/// The posting that can have hidden a probe's answer read at posting clock `posting`: the part
/// since `before` (the clock at the completion poll before the one that read it) or since
/// `probe` (the clock at the probe's post) if that came later.
fn hidden_posting(posting: Nanos, before: Nanos, probe: Nanos) -> Nanos {
    posting.saturating_sub(before.max(probe))
}

/// When a completion was seen: the clock, the posting clock then, and the posting clock at the
/// completion poll before the one that read it ([`PollerPacing::cq_polled`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    at: Instant,
    posting: Nanos,
    posting_before: Nanos,
}

impl PollerPacing {
    pub(crate) fn new() -> PollerPacing {
        PollerPacing {
            start: Instant::now(),
            generation: 0,
            checked: Nanos::ZERO,
            published: Nanos::ZERO,
            next_due: None,
            unpublished: false,
            clockless: 0,
            paced: 0,
            posting: Nanos::ZERO,
            polled: Nanos::ZERO,
        }
    }

    /// The completion queue was just polled (`found`: it gave completions). With a queue
    /// paced and something found, when they were seen: the time now, the posting clock, and
    /// the posting clock at the poll before this one. Only the posting since that earlier
    /// poll can have hidden an answer: one that had come before it would have been read
    /// there ([`PollerPacing::posting`]).
    pub(super) fn cq_polled(&mut self, found: bool) -> Option<Seen> {
        let before = std::mem::replace(&mut self.polled, self.posting);
        (self.paced > 0 && found).then(|| Seen {
            at: Instant::now(),
            posting: self.posting,
            posting_before: before,
        })
    }

    /// Before a send-side post call: its start, when a queue is paced.
    pub(super) fn post_began(&self) -> Option<Instant> {
        (self.paced > 0).then(Instant::now)
    }

    /// After the post call that began at `t0` ([`PollerPacing::post_began`]).
    pub(super) fn post_ended(&mut self, t0: Option<Instant>) {
        if let Some(t0) = t0 {
            self.posting = self.posting + Nanos(t0.elapsed().as_nanos() as u64);
        }
    }

    /// The time this poller has spent inside send-side post calls (while a queue was paced).
    /// rxe runs a user queue pair's packet work inside the call, and over its loopback the
    /// peer's too: in the lab's one guest, posting a 128 KiB RDMA READ returns after the whole
    /// read response was built and taken in (3.0-3.5 ms). A probe's answer that arrives
    /// meanwhile is seen only after the call, so the time spent posting between the poll
    /// before the one that saw its answer (or the probe's post, if later) and that poll is
    /// the poller's own, not the path's
    /// ([`raidline_cc::netrtt::NetRtt::probe_answered_local`]). Posting before that earlier
    /// poll hid nothing: the answer had not come. Taking it off as well (all the posting
    /// since the probe went) removed the bottleneck's queue from the samples in the lab's two
    /// guests, where the poller spends most of a loaded pass inside post calls: raw RTTs of
    /// 32-67 ms with nothing ahead came out as 3-6 ms net (`raidline::cc` trace, 2026-12-07)
    /// while the tbf held 20-50 ms.
    pub(super) fn posting(&self) -> Nanos {
        self.posting
    }

    /// The clock now (a fresh read: for the pacer's own decisions and probe stamps).
    fn now(&self) -> Nanos {
        self.at(Instant::now())
    }

    /// `t` on the pacing clock.
    fn at(&self, t: Instant) -> Nanos {
        Nanos(
            t.saturating_duration_since(self.start)
                .as_nanos()
                .min(u128::from(u64::MAX)) as u64,
        )
    }
}

/// Bytes a response moves with RDMA WRITE (`None`: nothing to pace).
pub(super) fn write_len(req: &Req, status: Status) -> Option<u64> {
    match (req.write_back, &req.data) {
        (Some((_, len)), Some(_)) if status.is_success() && len > 0 => Some(len as u64),
        _ => None,
    }
}

impl<F: Fabric> Poller<F> {
    /// A new queue: an I/O queue gets a pacer when pacing is on; every queue gets statistics.
    pub(super) fn attach_pacing(&mut self, q: &mut Queue<F>) {
        let now = self.pace.now();
        if q.setup.qid != 0 {
            if let Some(a) = self.shared.cc.current() {
                q.pacing.pacer = Some(QpPacer::new(&a, now));
                self.pace.paced += 1;
                q.pacing.wake_at(now);
                self.note_due(now);
            }
        }
        let stats = Arc::new(QueueStats::default());
        stats.qid.store(u32::from(q.setup.qid), Ordering::Relaxed);
        stats
            .depth
            .store(u32::from(q.setup.depth), Ordering::Relaxed);
        q.pacing.recvs = q.posted_recvs;
        q.pacing.stats = stats.clone();
        self.pace.unpublished = true;
        lock(&self.shared.queue_stats).insert(q.conn, stats);
        if q.iser.is_some() {
            self.iser_queues += 1;
        }
    }

    /// A queue is gone: its statistics go with it, and an iSER connection's session ends
    /// with a log line that says why (its login said when it began).
    pub(super) fn detach_pacing(&mut self, q: &Queue<F>) {
        if q.pacing.pacer.is_some() {
            self.pace.paced = self.pace.paced.saturating_sub(1);
        }
        lock(&self.shared.queue_stats).remove(&q.conn);
        if q.iser.is_some() {
            self.iser_queues = self.iser_queues.saturating_sub(1);
            let reason = q.close_reason.as_deref().unwrap_or("closed");
            let session = lock(&self.shared.iscsi_sessions).remove(&q.conn);
            match session {
                Some(st) => tracing::info!("{st} ended: {reason}"),
                None => tracing::info!(
                    "iSER connection from {} closed before its login completed: {reason}",
                    q.peer.map_or_else(|| "?".into(), |p| p.to_string())
                ),
            }
        }
    }

    /// Recycles the waiting responses of closing queues. One whose data is partly posted in
    /// chunks stays with the queue (no longer counted in `elsewhere`, so the queue can be
    /// reaped): the device may still read its buffer until the QP is destroyed, so it is
    /// recycled only then (`Poller::reap`).
    pub(super) fn drop_paced_of_closing(&mut self) {
        let mut dropped = Vec::new();
        for q in self.queues.values_mut() {
            if q.closing {
                while let Some((req, _, _)) = q.pacing.waiting.pop_front() {
                    q.elsewhere -= 1;
                    if req.chunked > 0 {
                        q.pacing.late.push(req);
                    } else {
                        dropped.push(req);
                    }
                }
            }
        }
        for r in dropped {
            self.recycle(r);
        }
    }

    /// When the completion being handled was seen: at its early read
    /// ([`Poller::stamp_poll`]), else now.
    fn wc_now(&self) -> Nanos {
        self.wc_at
            .map_or_else(|| self.pace.now(), |seen| self.pace.at(seen.at))
    }

    /// The posting clock when the completion being handled was seen, and at the poll before
    /// (with no stamp: now, and at the latest poll).
    fn wc_posting(&self) -> (Nanos, Nanos) {
        self.wc_at
            .map_or((self.pace.posting, self.pace.polled), |seen| {
                (seen.posting, seen.posting_before)
            })
    }

    fn note_due(&mut self, t: Nanos) {
        let d = &mut self.pace.next_due;
        *d = Some(d.map_or(t, |d| d.min(t)));
    }

    /// How long until some queue is due (`None`: nothing paced is waiting).
    pub(super) fn until_due(&self) -> Option<Duration> {
        let due = self.pace.next_due?;
        Some(Duration::from_nanos(due.saturating_sub(self.pace.now()).0))
    }

    /// Whether `len` bytes may go now on `q`; if not, the queue is due when they may.
    pub(super) fn pace_gate(&mut self, q: &mut Queue<F>, len: u64) -> bool {
        let Some(p) = q.pacing.pacer.as_mut() else {
            return true;
        };
        let now = self.pace.now();
        let due = match p.readiness(now, len) {
            Readiness::Now => return true,
            Readiness::At(t) => Some(t),
            // An acknowledgement wakes the queue.
            Readiness::WindowFull => None,
            Readiness::Stopped => Some(now + STOPPED_RETRY),
        };
        if let Some(t) = due {
            q.pacing.wake_at(t);
            self.note_due(t);
        }
        false
    }

    /// Whether a response must wait for the bucket; if so it is queued on `q` and `None`
    /// comes back. Its data goes in [`PACE_CHUNK`]s as the tokens allow ([`Self::advance`]);
    /// the response itself, with the last chunk, once that may go too.
    pub(super) fn pace_response(
        &mut self,
        q: &mut Queue<F>,
        mut req: Box<Req>,
        status: Status,
        result: u64,
    ) -> Option<Box<Req>> {
        let Some(len) = write_len(&req, status) else {
            return Some(req);
        };
        if q.pacing.pacer.is_none()
            || (q.pacing.waiting.is_empty() && self.advance(q, &mut req, len))
        {
            return Some(req);
        }
        if let Some(p) = q.pacing.pacer.as_mut() {
            p.note_wait();
        }
        q.elsewhere += 1;
        q.pacing.waiting.push_back((req, status, result));
        None
    }

    /// Posts the chunks of `req`'s `len` bytes of read data that the bucket lets go now, each
    /// a signaled RDMA WRITE (`Wr::Chunk`: its completion tells the pacer and the RTT
    /// estimator its bytes left, and frees its slot); whether the
    /// rest, at most one chunk, may go now with the response. A chunk is posted only while
    /// fewer than [`CHUNK_SLOTS`] chunks await their response's completion (the slots the send
    /// queue has for them); beyond that the rest goes whole with the response.
    ///
    /// A window-limited law (swift) gets no chunks: it limits the bytes in flight by its own
    /// acknowledgements already. (While chunks were unsignaled and acknowledged only with
    /// their response, a window under a transfer's size waited for an acknowledgement only the
    /// same transfer could bring: large reads hung.)
    ///
    /// Data the bucket lets go whole goes whole, as one RDMA WRITE with the response, as it
    /// would unpaced: chunks are for a queue pair its rate holds back. With every read in
    /// chunks (eight signaled work requests and completions for one), the lab's uncongested
    /// run (one guest, no bottleneck, 128 KiB reads at QD16 over 4 queue pairs, every rate
    /// well above what its queue pair used) moved 0.80 x what it moved with pacing off; with
    /// whole transfers where the bucket allows, 0.85 (the rest: README, eighth session).
    fn advance(&mut self, q: &mut Queue<F>, req: &mut Req, len: u64) -> bool {
        if self.pace_gate(q, len - req.chunked as u64) {
            return true;
        }
        let before = req.chunked;
        let windowed = q.pacing.pacer.as_ref().is_some_and(QpPacer::windowed);
        while !windowed
            && len - req.chunked as u64 > PACE_CHUNK
            && q.pacing.chunks_in_flight < CHUNK_SLOTS
        {
            if !self.pace_gate(q, PACE_CHUNK) {
                return false;
            }
            if !self.post_chunk(q, req) {
                return false;
            }
        }
        // The rest was gated above already when no chunk went since.
        req.chunked != before && self.pace_gate(q, len - req.chunked as u64)
    }

    /// Posts the next [`PACE_CHUNK`] of `req`'s read data; false when it could not be (the
    /// queue is closing, or its send queue is full: looked at again soon).
    fn post_chunk(&mut self, q: &mut Queue<F>, req: &mut Req) -> bool {
        let (Some((remote, _)), Some(buf)) = (req.write_back, req.data.as_ref()) else {
            return false;
        };
        let off = req.chunked;
        let sge = match self.pool.sge(buf, off + PACE_CHUNK as usize) {
            Ok(s) => s,
            Err(e) => {
                q.close(format!("pool buffer not registered: {e}"));
                return false;
            }
        };
        let (to, from) = data_at(remote, sge, off as u64, PACE_CHUNK as u32);
        let sges = [from];
        let mut wr = [SendWr {
            wr_id: WrId(0),
            op: SendOp::RdmaWrite(to),
            payload: Payload::Sges(&sges),
            signaled: true,
        }];
        let t0 = self.pace.post_began();
        let posted = q.ep.post_send(Wr::Chunk, &mut wr);
        self.pace.post_ended(t0);
        match posted {
            Ok(()) => {
                req.chunked += PACE_CHUNK as usize;
                q.pacing.chunks += 1;
                q.pacing.chunks_in_flight += 1;
                self.pace_sent(q, PACE_CHUNK, Dir::Out);
                self.stamp_poll();
                true
            }
            Err(rej) if matches!(rej.error.error, FabricError::QueueFull { .. }) => {
                let t = self.pace.now() + STOPPED_RETRY;
                q.pacing.wake_at(t);
                self.note_due(t);
                false
            }
            Err(rej) => {
                q.close(format!("paced RDMA WRITE not posted: {}", rej.error));
                false
            }
        }
    }

    /// A response that passed `q`'s gate, to be posted with others: its data (`len`, its
    /// [`write_len`]) is charged now, less what its chunks were charged already
    /// ([`Self::post_chunk`]), so that the next response's gate sees it. The post that follows
    /// skips its own charge ([`Poller::send_responses`]'s `charged`).
    pub(super) fn charge_release(&mut self, q: &mut Queue<F>, req: &Req, len: u64) {
        self.pace_sent(q, len.saturating_sub(req.chunked as u64), Dir::Out);
    }

    /// `len` bytes were posted on `q`: RDMA WRITE or SEND (`Dir::Out`), RDMA READ (`Dir::In`).
    pub(super) fn pace_sent(&mut self, q: &mut Queue<F>, len: u64, dir: Dir) {
        if len == 0 {
            return;
        }
        q.pacing.bytes += len;
        if let Some(p) = q.pacing.pacer.as_mut() {
            let now = self.pace.now();
            p.on_sent(now, len, dir);
            // The algorithm may want a probe now.
            q.pacing.wake_at(now);
            self.note_due(now);
        }
    }

    /// Recycles a response that was not (wholly) posted; one whose chunks are posted waits
    /// for the queue's QP to go (the device may still read its buffer): the queue is closing.
    pub(super) fn recycle_posted(&mut self, q: &mut Queue<F>, req: Box<Req>) {
        if req.chunked > 0 {
            q.pacing.late.push(req);
        } else {
            self.recycle(req);
        }
    }

    /// A chunk completed (or flushed): its bytes left, its send-queue slot is free.
    pub(super) fn chunk_done(&mut self, q: &mut Queue<F>) {
        q.pacing.chunks_in_flight = q.pacing.chunks_in_flight.saturating_sub(1);
        self.pace_acked(q, PACE_CHUNK, Dir::Out);
    }

    /// A paced transfer of `len` bytes going `dir` completed on `q`.
    pub(super) fn pace_acked(&mut self, q: &mut Queue<F>, len: u64, dir: Dir) {
        if len == 0 {
            return;
        }
        if let Some(p) = q.pacing.pacer.as_mut() {
            let now = self.wc_now();
            p.on_acked(now, len, dir);
            q.pacing.wake_at(now);
            self.note_due(now);
        }
    }

    /// The probe `seq` posted at `sent_ns` completed.
    pub(super) fn probe_answered(&mut self, q: &mut Queue<F>, seq: ProbeSeq, sent_ns: u64) {
        if let Some(p) = q.pacing.pacer.as_mut() {
            let now = self.wc_now();
            let (posting, before) = self.wc_posting();
            let local = hidden_posting(posting, before, p.probe_posting());
            p.on_probe_answer_local(q.setup.qid, now, seq, Nanos(sent_ns), local);
            q.pacing.wake_at(now);
            self.note_due(now);
        }
    }

    /// Parameter changes, statistics, and the queues that are due; returns the work done.
    pub(super) fn pace(&mut self) -> usize {
        // The pass's clock, where the pass read it or something paced may be due. Otherwise
        // the checks below wait for every 256th such pass: a spinning poller would read the
        // clock on every turn, and a poller going to sleep publishes first (`publish_idle`).
        let t = match self.pass_clock {
            // Something paced may be due: the pacer's decisions and its probes' send stamps
            // need the time now, not the pass's first read (a stale stamp inflates the probe
            // RTT by the age of the pass).
            _ if self.pace.next_due.is_some() => Instant::now(),
            Some(t) => t,
            None => {
                self.pace.clockless = self.pace.clockless.wrapping_add(1);
                if !self.pace.unpublished || self.pace.clockless % 256 != 0 {
                    return 0;
                }
                self.clock()
            }
        };
        let now = self.pace.at(t);
        if now.saturating_sub(self.pace.checked) >= Nanos(PARAM_CHECK.as_nanos() as u64) {
            self.pace.checked = now;
            let g = self.shared.cc.generation();
            if g != self.pace.generation {
                self.pace.generation = g;
                if let Some(a) = self.shared.cc.current() {
                    for q in self.queues.values_mut() {
                        if let Some(p) = q.pacing.pacer.as_mut() {
                            p.adopt(&a);
                            q.pacing.wake_at(now);
                        }
                    }
                    self.note_due(now);
                }
            }
        }
        if now.saturating_sub(self.pace.published) >= PUBLISH_EVERY {
            self.pace.published = now;
            self.pace.unpublished = false;
            self.publish();
        } else {
            self.pace.unpublished = true;
        }
        if !self.pace.next_due.is_some_and(|d| d <= now) {
            return 0;
        }
        let due: Vec<u32> = self
            .queues
            .iter()
            .filter(|(_, q)| q.pacing.due.is_some_and(|d| d <= now))
            .map(|(k, _)| k)
            .collect();
        let mut work = 0;
        for qpn in due {
            if let Some(mut q) = self.queues.take(qpn) {
                work += self.visit(&mut q, now);
                self.queues.put(q);
            }
        }
        self.pace.next_due = self.queues.values().filter_map(|q| q.pacing.due).min();
        work
    }

    /// Timers, waiting responses, waiting reads and the probe of one due queue.
    fn visit(&mut self, q: &mut Queue<F>, now: Nanos) -> usize {
        q.pacing.due = None;
        if q.closing {
            return 0;
        }
        let Some(p) = q.pacing.pacer.as_mut() else {
            return 0;
        };
        p.poll_timers_posting(now, self.pace.posting());
        // The probe goes ahead of the transfers released below, not behind them: its RTT
        // then carries none of their drain time ([`raidline_cc::netrtt`]).
        self.send_probe(q);
        let mut work = 0;
        // What the bucket lets go now goes with one post, as held responses do
        // ([`Poller::flush_responses`]): each charged as it passes the gate, so that the next
        // one's gate sees it. An iSCSI read goes alone (its data, then its SCSI Response).
        let mut batch = std::mem::take(&mut self.sending);
        while let Some((mut req, status, result)) = q.pacing.waiting.pop_front() {
            let len = write_len(&req, status).unwrap_or(0);
            if q.closing || !self.advance(q, &mut req, len) {
                q.pacing.waiting.push_front((req, status, result));
                break;
            }
            q.elsewhere -= 1;
            work += 1;
            if q.iser.is_some() {
                self.send_response(q, req, status, result);
            } else {
                self.charge_release(q, &req, len);
                batch.push((req, status, result));
            }
        }
        if !batch.is_empty() {
            self.post_held(q, &mut batch, true);
        }
        self.sending = batch;
        if !q.read_wait.is_empty() {
            self.pump_reads(q);
        }
        if let Some(t) = q.pacing.pacer.as_ref().and_then(QpPacer::next_timer) {
            q.pacing.wake_at(t.max(now));
        }
        work
    }

    /// Posts the probe the pacer wants, if any: a signaled zero-length RDMA WRITE. A post that
    /// fails (send queue full, QP breaking) gives the probe back to the pacer, which wants it
    /// again at a visit soon after (the probe timeout would not: on an RC QP a late probe is
    /// kept, never re-sent). A
    /// probe held back while the QP's own data drains ([`QpPacer::poll_probe`]) is looked at
    /// again at the next visit: every completion of a paced transfer makes the queue due.
    fn send_probe(&mut self, q: &mut Queue<F>) {
        // Stamped with a fresh read, not the pass's: the visits before this one in the pass
        // may have posted many chunks (rxe runs their packet work inside the posting call),
        // and a stale stamp adds that time to the RTT.
        let now = self.pace.now();
        let Some(seq) = q.pacing.pacer.as_mut().and_then(|p| p.poll_probe(now)) else {
            return;
        };
        let mut wr = [SendWr {
            wr_id: WrId(0),
            op: SendOp::RdmaWrite(RemoteBuf { addr: 0, rkey: 0 }),
            payload: Payload::Sges(&[]),
            signaled: true,
        }];
        // The probe's own post is not counted as posting time: on rxe's loopback its whole
        // round trip runs inside it.
        let posted = q.ep.post_send(
            Wr::Probe {
                seq,
                sent_ns: now.0,
            },
            &mut wr,
        );
        if posted.is_ok() {
            if let Some(p) = q.pacing.pacer.as_mut() {
                p.probe_sent(self.pace.posting());
            }
        }
        if let Err(rej) = posted {
            tracing::debug!(
                "controller {} queue {}: probe not posted: {}",
                q.cntlid,
                q.proto.qid(),
                rej.error
            );
            if let Some(p) = q.pacing.pacer.as_mut() {
                p.probe_unsent(seq);
            }
            let t = now + STOPPED_RETRY;
            q.pacing.wake_at(t);
            self.note_due(t);
        }
    }

    /// Before the poller sleeps: the statistics of its last passes, if not published yet.
    pub(super) fn publish_idle(&mut self) {
        if self.pace.unpublished {
            self.pace.unpublished = false;
            self.publish();
        }
    }

    fn publish(&mut self) {
        for q in self.queues.values() {
            let s = &q.pacing.stats;
            s.cntlid.store(u32::from(q.cntlid), Ordering::Relaxed);
            let in_flight = q.pacing.recvs.saturating_sub(q.posted_recvs) + q.srq_held;
            s.in_flight.store(in_flight as u32, Ordering::Relaxed);
            s.bytes.store(q.pacing.bytes, Ordering::Relaxed);
            s.paced_chunks.store(q.pacing.chunks, Ordering::Relaxed);
            if let Some(p) = &q.pacing.pacer {
                p.publish(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_posting_since_the_poll_before_can_hide_an_answer() {
        let mut pace = PollerPacing::new();
        // Nothing paced: no stamp, though the clock of the poll moves on.
        assert!(pace.cq_polled(true).is_none());
        pace.paced = 1;
        // The probe goes at 1 ms of posting; a poll then finds nothing.
        pace.posting = Nanos::from_ms(1);
        let probe = pace.posting;
        assert!(pace.cq_polled(false).is_none());
        // 30 ms inside post calls (the lab's loaded pass), a poll finds nothing: the answer
        // had not come, so that time was the path's.
        pace.posting = Nanos::from_ms(31);
        assert!(pace.cq_polled(false).is_none());
        // 4 ms more, and the next poll reads the answer: only those 4 ms can have hidden it.
        pace.posting = Nanos::from_ms(35);
        let seen = pace.cq_polled(true).expect("stamped");
        assert_eq!(seen.posting, Nanos::from_ms(35));
        assert_eq!(seen.posting_before, Nanos::from_ms(31));
        assert_eq!(
            hidden_posting(seen.posting, seen.posting_before, probe),
            Nanos::from_ms(4)
        );
        // A probe posted after the poll before: only the posting since its own post counts.
        assert_eq!(
            hidden_posting(seen.posting, seen.posting_before, Nanos::from_ms(33)),
            Nanos::from_ms(2)
        );
        // A poll with nothing posted since: nothing hidden.
        let seen = pace.cq_polled(true).expect("stamped");
        assert_eq!(
            hidden_posting(seen.posting, seen.posting_before, probe),
            Nanos::ZERO
        );
    }
}
