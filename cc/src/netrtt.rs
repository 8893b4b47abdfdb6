//! Net RTT of a live queue pair: a probe's RTT less the time the QP's own data, posted ahead of
//! the probe and not yet completed, needed to drain.
//!
//! A probe is a signaled zero-length RDMA WRITE. An RC send queue completes in order, so the
//! probe completes only after every transfer posted before it: its raw RTT (completion − post,
//! on the host clock) holds the local send queue's drain time (on rxe, 8–27 ms behind 128 KiB
//! transfers) on top of the fabric's round trip and the queues of the network. TIMELY removes a
//! segment's serialization time (length ÷ line rate) from each sample; the same idea on a QP:
//!
//! ```text
//! net RTT = (completion − post) − ahead ÷ peak drain
//! ```
//!
//! - `ahead`: bytes of the QP's data transfers posted before the probe and not completed when
//!   it was posted ([`NetRtt::on_posted`], [`NetRtt::on_completed`]).
//! - `drain`: the QP's measured drain rate. A completion that follows the previous one while the
//!   QP stayed backlogged in between (something was outstanding at every instant) departed
//!   `bytes` in `gap`; the estimate is the ratio of exponentially weighted sums of those bytes
//!   and gaps (gain [`NetRttConfig::drain_gain`]), so a burst of tiny gaps does not dominate.
//!   A completion after an idle moment carries its whole round trip, not a departure: it is
//!   not a drain sample. On rxe this rate is the CPU's, not the link's.
//! - `peak drain`: the highest drain estimate of the last [`NetRttConfig::base_window`] (a
//!   windowed maximum, as the base is a windowed minimum): the rate the QP's bytes leave at
//!   when nothing else holds them, TIMELY's line rate. Subtracting at the current drain rate
//!   instead removes the queue of a shared bottleneck along with the QP's own serialization:
//!   the QP's bytes in that queue drain at its share, and `ahead ÷ share` is the whole
//!   queue's delay. In the lab's bottleneck run (4 QPs through a 40 Mbit/s tbf) that gave one
//!   QP a net RTT of 0.12 ms against 25.8 ms raw and a zero base; it kept raising its rate
//!   while the others cut (Jain 0.68).
//! - **Samples are taken when little is queued ahead.** [`NetRtt::probe_allowed`] holds a
//!   wanted probe back while more than [`NetRttConfig::max_ahead`] bytes are outstanding, so
//!   the subtraction is small and its error smaller. A QP that never drains that far within
//!   [`NetRttConfig::max_defer`] sends its probe anyway and the sample keeps its raw RTT (no
//!   subtraction): the QP posts faster than its data drains, which a congestion law must see
//!   as queueing, not have subtracted away.
//! - A paced QP whose transfers are spaced has nothing ahead of a probe posted before its next
//!   transfer, and then nothing is subtracted: the runtime posts a wanted probe ahead of the
//!   transfers it releases, not behind them.
//! - **A paced QP** ([`NetRtt::probe_answered_paced`]) keeps its raw RTT: nothing is
//!   subtracted. While the path keeps up, its completions are spaced by its pacer, so the
//!   measured drain is the pacing rate and the bytes ahead are on their way, not waiting
//!   (taking `ahead ÷ pace` off zeroed 12 % of the lab's samples). When they drain slower than
//!   the pacer releases them, the QP's own queue grows because its rate is above what the
//!   path gives it: that is the congestion its law must see. Subtracting then (first at the
//!   drain rate, then at the peak) left net RTTs near zero and zero bases in the lab's
//!   bottleneck runs, and the QPs with them raised their rates while the others cut (Jain
//!   0.68 and 0.88, p99 queue above off's median).
//! - **RDMA READs ahead are always taken off** ([`Dir::In`]), paced or not, forced or not.
//!   A target fetches a host write's data with an RDMA READ; a probe posted behind one
//!   completes only when the read's last byte has arrived, so its raw RTT holds the whole
//!   transfer's serialization at the peer's sending rate (a 128 KiB read is about 3 ms on rxe
//!   in the lab: the bench's floor job reads 332 of them a second). Kept, that time read as queueing: rtt-aimd on the lab's uncongested
//!   seqwrite-128k saw raw RTTs of about 5 ms against a 66 us base, held its queue pairs near
//!   what they moved, and the host's writes went at 0.63 x `off`. The reads outstanding are at
//!   most the QP's initiator depth, so their subtraction is bounded, and a read's bytes are
//!   not this side's send queue: they do not count against `max_ahead`, and a probe is not
//!   held back for them.
//! - The **base** is a windowed minimum of the net samples ([`NetRttConfig::base_window`], two
//!   half-window buckets): a path that changes is taken up within a window, a single low
//!   outlier is forgotten.
//!
//! **Error.** With `ahead ≤ max_ahead` and the peak drain rate estimated within a factor
//! `(1 ± e)`, the subtracted time is off by at most `max_ahead ÷ peak × e ÷ (1 − e)`: 64 KiB at
//! rxe's ~10 MB/s in the lab is 6.5 ms of drain, so a 20 % error in the rate is 1.6 ms at
//! worst, and nothing when nothing is ahead (the common case for a paced QP, whose transfers
//! are spaced). RDMA READs ahead are not bounded by `max_ahead` but by the initiator depth:
//! their error is `ahead_in ÷ peak × e ÷ (1 − e)`, and as `peak` is the highest estimate of the
//! window, `e` errs towards taking too little off (the sample stays high, the law cuts: the
//! safe side). Where the bottleneck is in the network, the QP's own bytes ahead of the probe
//! wait in that bottleneck's queue: at most `ahead ÷ peak` of their time is taken off, the
//! rest (the queue) stays in the sample, as it must for a law that keeps queues short.
//!
//! Pure: every call takes `now`; the runtime owns the clock (host clock, or a device's
//! completion timestamps converted to nanoseconds where a NIC offers them).

use crate::units::Nanos;

/// Settings of the estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetRttConfig {
    /// A wanted probe waits while more than this many bytes are outstanding.
    pub max_ahead: u64,
    /// ... but not longer than this: then it goes, and its sample is not subtracted.
    pub max_defer: Nanos,
    /// Span of the windowed minimum that is the base RTT.
    pub base_window: Nanos,
    /// Weight of a new drain sample in the weighted sums, `(0, 1]`.
    pub drain_gain: f64,
}

impl Default for NetRttConfig {
    /// 64 KiB ahead at most (half a 128 KiB transfer), 20 ms of deferral, a 10 s base window
    /// (BBR's min-RTT window), drain gain 1/8.
    fn default() -> NetRttConfig {
        NetRttConfig {
            max_ahead: 64 << 10,
            max_defer: Nanos::from_ms(20),
            base_window: Nanos::from_ms(10_000),
            drain_gain: 0.125,
        }
    }
}

/// Which way a transfer's data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From this side to the peer: an RDMA WRITE or a SEND. Its bytes leave at the QP's own
    /// rate; the pacer's gate and its queue are this side's.
    Out,
    /// From the peer to this side: an RDMA READ, whose data the peer's device sends in its
    /// read response. Its bytes queue at the peer's responder, not in this side's send queue.
    In,
}

/// What a probe carried when it was posted ([`NetRtt::probe_posted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeTag {
    /// Post time.
    pub sent: Nanos,
    /// Bytes outstanding ahead of it, both ways.
    pub ahead: u64,
    /// Of those, the bytes of RDMA READs ([`Dir::In`]).
    pub ahead_in: u64,
    /// How long the transfer at the head of those had been in service: since it was posted
    /// to an idle QP, or since the transfer before it completed (zero: nothing ahead).
    pub head_for: Nanos,
}

/// One RTT sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Completion − post.
    pub raw: Nanos,
    /// Bytes that were ahead of the probe (both ways).
    pub ahead: u64,
    /// The drain time subtracted (see [`NetRtt::probe_answered_paced`]; zero before the first
    /// drain estimate).
    pub drained: Nanos,
    /// `raw − drained`, at least 1 ns.
    pub net: Nanos,
    /// The probe went after [`NetRttConfig::max_defer`] with more than `max_ahead` of
    /// outgoing bytes ahead.
    pub forced: bool,
}

/// Windowed extreme (the minimum or the maximum, by `pick`) over two half-window buckets:
/// the lower (higher) of the current and the previous bucket, so an extreme is kept for
/// between half a window and a whole one.
#[derive(Clone, Copy, Debug)]
struct Windowed<T> {
    half: u64,
    start: u64,
    cur: Option<T>,
    prev: Option<T>,
    pick: fn(T, T) -> T,
}

impl<T: Copy> Windowed<T> {
    fn new(window: Nanos, pick: fn(T, T) -> T) -> Windowed<T> {
        Windowed {
            half: (window.0 / 2).max(1),
            start: 0,
            cur: None,
            prev: None,
            pick,
        }
    }

    fn push(&mut self, now: Nanos, v: T) {
        let elapsed = now.0.saturating_sub(self.start);
        if elapsed >= 2 * self.half {
            self.prev = None;
            self.cur = None;
            self.start = now.0;
        } else if elapsed >= self.half {
            self.prev = self.cur;
            self.cur = None;
            self.start += self.half;
        }
        self.cur = Some(self.cur.map_or(v, |c| (self.pick)(c, v)));
    }

    fn get(&self) -> Option<T> {
        match (self.cur, self.prev) {
            (Some(a), Some(b)) => Some((self.pick)(a, b)),
            (a, b) => a.or(b),
        }
    }
}

/// The estimator of one queue pair.
#[derive(Clone, Debug)]
pub struct NetRtt {
    cfg: NetRttConfig,
    outstanding: u64,
    /// Of `outstanding`, the bytes of RDMA READs.
    outstanding_in: u64,
    /// When the last completion came, if the QP stayed backlogged since.
    backlogged_since: Option<Nanos>,
    /// When the transfer now at the head of the queue began its service (its post to an idle
    /// QP, or the completion before it); `None` while nothing is outstanding.
    head_since: Option<Nanos>,
    /// Weighted sums of drained bytes and of the gaps they took (ns).
    drain_bytes: f64,
    drain_ns: f64,
    /// When a wanted probe was first held back.
    deferred_since: Option<Nanos>,
    /// Windowed maximum of the drain estimate, bytes per second.
    peak: Windowed<f64>,
    base: Windowed<Nanos>,
    /// Windowed minimum of the samples with nothing ahead (the path alone): no subtraction
    /// takes a sample below it.
    clear: Windowed<Nanos>,
    last: Option<Sample>,
    samples: u64,
    forced: u64,
}

impl NetRtt {
    /// An estimator with nothing outstanding and no samples.
    pub fn new(cfg: NetRttConfig) -> NetRtt {
        NetRtt {
            cfg,
            outstanding: 0,
            outstanding_in: 0,
            backlogged_since: None,
            head_since: None,
            drain_bytes: 0.0,
            drain_ns: 0.0,
            deferred_since: None,
            peak: Windowed::new(cfg.base_window, f64::max),
            base: Windowed::new(cfg.base_window, Ord::min),
            clear: Windowed::new(cfg.base_window, Ord::min),
            last: None,
            samples: 0,
            forced: 0,
        }
    }

    /// `bytes` of outgoing data were posted at `now`.
    pub fn on_posted(&mut self, now: Nanos, bytes: u64) {
        self.on_posted_dir(now, bytes, Dir::Out);
    }

    /// `bytes` of data going `dir` were posted at `now`.
    pub fn on_posted_dir(&mut self, now: Nanos, bytes: u64, dir: Dir) {
        if bytes == 0 {
            return;
        }
        if dir == Dir::In {
            self.outstanding_in += bytes;
        }
        if self.outstanding == 0 {
            // A departure clock starts only at the next completion: this transfer's own
            // completion carries its round trip.
            self.backlogged_since = None;
            self.head_since = Some(now);
        }
        self.outstanding += bytes;
    }

    /// An outgoing transfer of `bytes` completed at `now` (completions come in posting
    /// order).
    pub fn on_completed(&mut self, now: Nanos, bytes: u64) {
        self.on_completed_dir(now, bytes, Dir::Out);
    }

    /// A transfer of `bytes` going `dir` completed at `now` (completions come in posting
    /// order, both ways: one send queue).
    pub fn on_completed_dir(&mut self, now: Nanos, bytes: u64, dir: Dir) {
        if bytes == 0 {
            return;
        }
        if dir == Dir::In {
            self.outstanding_in = self.outstanding_in.saturating_sub(bytes);
        }
        if let Some(t) = self.backlogged_since {
            let gap = now.saturating_sub(t).0;
            if gap > 0 {
                let g = self.cfg.drain_gain;
                self.drain_bytes = self.drain_bytes * (1.0 - g) + bytes as f64;
                self.drain_ns = self.drain_ns * (1.0 - g) + gap as f64;
                self.peak.push(now, self.drain_bytes / self.drain_ns * 1e9);
            }
        }
        self.outstanding = self.outstanding.saturating_sub(bytes);
        self.backlogged_since = (self.outstanding > 0).then_some(now);
        self.head_since = self.backlogged_since;
    }

    /// Everything outstanding is gone (the QP was reset or flushed).
    pub fn reset_outstanding(&mut self) {
        self.outstanding = 0;
        self.outstanding_in = 0;
        self.backlogged_since = None;
        self.head_since = None;
    }

    /// Whether a wanted probe may be posted at `now` (see the module header): outgoing bytes
    /// ahead are held under `max_ahead` (RDMA READs ahead are always subtracted, see
    /// [`NetRtt::probe_answered_paced`]); the first refusal starts the deferral clock.
    pub fn probe_allowed(&mut self, now: Nanos) -> bool {
        if self.outstanding_out() <= self.cfg.max_ahead {
            return true;
        }
        let since = *self.deferred_since.get_or_insert(now);
        now.saturating_sub(since) >= self.cfg.max_defer
    }

    /// A probe was posted at `now`: what its answer is measured against.
    pub fn probe_posted(&mut self, now: Nanos) -> ProbeTag {
        self.deferred_since = None;
        ProbeTag {
            sent: now,
            ahead: self.outstanding,
            ahead_in: self.outstanding_in,
            head_for: self
                .head_since
                .filter(|_| self.outstanding > 0)
                .map_or(Nanos::ZERO, |h| now.saturating_sub(h)),
        }
    }

    /// The probe posted with `tag` completed at `now`: the sample (also kept as the last).
    pub fn probe_answered(&mut self, now: Nanos, tag: ProbeTag) -> Sample {
        self.probe_answered_paced(now, tag, false)
    }

    /// [`NetRtt::probe_answered`] for a QP a pacer releases (`paced`). What is taken off the
    /// raw RTT, at the peak drain rate (see the module header):
    /// - the bytes of RDMA READs ahead ([`ProbeTag::ahead_in`]), always: a read's data is
    ///   the peer's to send, at most the QP's initiator depth of reads is outstanding, and a
    ///   probe behind one completes only when its last byte has arrived, so its raw RTT holds
    ///   that transfer's whole serialization. What the head transfer moved before the probe
    ///   was posted is not in the raw RTT: the time it had been in service
    ///   ([`ProbeTag::head_for`]) is not taken off twice (the remaining work of a FIFO queue:
    ///   `ahead_in ÷ peak − head_for`, at least zero). Without that, a probe posted late in a
    ///   read's transfer had more taken off than it waited: the lab's bases went to zero;
    /// - the outgoing bytes ahead, unless the QP is paced (its sample then keeps that part of
    ///   its raw RTT) or the probe was forced past [`NetRttConfig::max_defer`]. Outgoing bytes
    ///   ahead of a paced QP's probe are either on their way (the path keeps up; their time is
    ///   a pacing interval, not a queue) or queued because the QP is paced above what the path
    ///   gives it, which is the congestion the law must see.
    pub fn probe_answered_paced(&mut self, now: Nanos, tag: ProbeTag, paced: bool) -> Sample {
        self.probe_answered_local(now, tag, paced, Nanos::ZERO)
    }

    /// [`NetRtt::probe_answered_paced`] where the runtime spent `local` of the raw RTT where it
    /// could not see the answer: inside post calls made after the probe's and after the last
    /// completion poll that did not find it (on rxe, a user queue pair's packet work runs
    /// inside the call, and over a loopback the peer's too, so a 128 KiB RDMA READ posted
    /// after a probe returned 3.0-3.5 ms later in the lab's one guest, and 42 % of the probes
    /// with nothing ahead of them read that as the path). It is taken off with the rest,
    /// within the same floor: the answer came at the earliest when that time began, at the
    /// latest when it ended. Posting before a poll that did not find the answer hid nothing,
    /// and is the runtime's to leave in (see the daemon's `PollerPacing::posting`).
    pub fn probe_answered_local(
        &mut self,
        now: Nanos,
        tag: ProbeTag,
        paced: bool,
        local: Nanos,
    ) -> Sample {
        let raw = now.saturating_sub(tag.sent);
        let forced = self.forced(tag);
        let drained = self.ahead_time(tag, paced) + local;
        // Never below the lowest sample with nothing ahead (the path itself): a subtraction
        // that would take the sample there overestimates the time the bytes ahead still
        // needed (the head transfer's service began before its predecessor's completion was
        // seen: on a busy host, completions are stamped when the poller gets to them). Taken
        // down to zero, such samples made the lab's bases zero.
        let drained = self
            .clear
            .get()
            .map_or(drained, |c| drained.min(raw.saturating_sub(c)));
        let net = Nanos(raw.saturating_sub(drained).0.max(1));
        if tag.ahead == 0 {
            // The path alone: what is left of the raw RTT without the runtime's own time,
            // within the floor as it stood (a post call that ended long after the answer
            // came must not take the floor itself down).
            self.clear.push(now, net);
        }
        let s = Sample {
            raw,
            ahead: tag.ahead,
            drained,
            net,
            forced,
        };
        self.base.push(now, net);
        self.last = Some(s);
        self.samples += 1;
        self.forced += u64::from(forced);
        s
    }

    /// Whether the probe posted with `tag` went past [`NetRttConfig::max_defer`] with more
    /// than `max_ahead` outgoing bytes ahead.
    fn forced(&self, tag: ProbeTag) -> bool {
        tag.ahead - tag.ahead_in.min(tag.ahead) > self.cfg.max_ahead
    }

    /// The time the bytes ahead of the probe posted with `tag` are taken to need, at the peak
    /// drain rate ([`NetRtt::probe_answered_paced`]): the RDMA READs' remaining work, and the
    /// outgoing bytes unless the QP is `paced` or the probe was forced. Zero before the first
    /// drain estimate.
    pub fn ahead_time(&self, tag: ProbeTag, paced: bool) -> Nanos {
        let ahead_in = tag.ahead_in.min(tag.ahead);
        let ahead_out = tag.ahead - ahead_in;
        let out = if self.forced(tag) || paced {
            0
        } else {
            ahead_out
        };
        match (self.drain_rate(), self.peak_drain_rate()) {
            (Some(r), Some(peak)) if ahead_in + out > 0 => {
                let at = |b: u64| Nanos::from_secs_f64(b as f64 / peak.max(r));
                at(ahead_in).saturating_sub(tag.head_for) + at(out)
            }
            _ => Nanos::ZERO,
        }
    }

    /// The measured drain rate, bytes per second (`None` before the first backlogged
    /// departure).
    pub fn drain_rate(&self) -> Option<f64> {
        (self.drain_ns > 0.0).then(|| self.drain_bytes / self.drain_ns * 1e9)
    }

    /// The highest drain estimate of the last base window, bytes per second: what the bytes
    /// ahead of a probe are taken off at.
    pub fn peak_drain_rate(&self) -> Option<f64> {
        self.peak.get()
    }

    /// The windowed minimum of the net samples.
    pub fn base(&self) -> Option<Nanos> {
        self.base.get()
    }

    /// The last sample.
    pub fn last(&self) -> Option<Sample> {
        self.last
    }

    /// Bytes outstanding now (both ways).
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Outgoing bytes outstanding now.
    pub fn outstanding_out(&self) -> u64 {
        self.outstanding - self.outstanding_in.min(self.outstanding)
    }

    /// Samples taken, and how many of them were forced (see [`Sample::forced`]).
    pub fn counts(&self) -> (u64, u64) {
        (self.samples, self.forced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QP model: a FIFO send queue that serializes at `drain` bytes/s (the local queue and
    /// the QP's share of a bottleneck, as rxe's requester does), then a fixed `path` delay to
    /// the acknowledgement. Transfers and probes complete in posting order.
    struct Model {
        drain: f64,
        path: Nanos,
        /// When the serializer is next free.
        free_at: Nanos,
    }

    /// The lab's QP: 10 MB/s of drain (rxe's CPU-bound rate), 300 us of path (host clock);
    /// a fresh estimator and no completions pending.
    fn lab_qp() -> (Model, NetRtt, Vec<(Nanos, u64)>) {
        let m = Model {
            drain: 10e6,
            path: Nanos::from_us(300),
            free_at: Nanos::ZERO,
        };
        (m, NetRtt::new(NetRttConfig::default()), Vec::new())
    }

    impl Model {
        /// Completion time of `bytes` posted at `now`.
        fn post(&mut self, now: Nanos, bytes: u64) -> Nanos {
            let start = self.free_at.max(now);
            self.free_at = start + Nanos::from_secs_f64(bytes as f64 / self.drain);
            self.free_at + self.path
        }
    }

    /// Posts `n` transfers back to back at `t`, feeds every completion up to `until`
    /// (completions are events in time order), and returns the completion times left.
    fn run(
        e: &mut NetRtt,
        m: &mut Model,
        pending: &mut Vec<(Nanos, u64)>,
        t: Nanos,
        n: usize,
        len: u64,
    ) {
        for _ in 0..n {
            e.on_posted(t, len);
            pending.push((m.post(t, len), len));
        }
    }

    fn complete_until(e: &mut NetRtt, pending: &mut Vec<(Nanos, u64)>, until: Nanos) {
        pending.sort();
        while let Some(&(c, len)) = pending.first() {
            if c > until {
                break;
            }
            e.on_completed(c, len);
            pending.remove(0);
        }
    }

    /// [`complete_until`] for RDMA READs.
    fn complete_in_until(e: &mut NetRtt, pending: &mut Vec<(Nanos, u64)>, until: Nanos) {
        pending.sort();
        while let Some(&(c, len)) = pending.first() {
            if c > until {
                break;
            }
            e.on_completed_dir(c, len, Dir::In);
            pending.remove(0);
        }
    }

    #[test]
    fn the_local_queue_is_subtracted_and_the_path_is_left() {
        let (mut m, mut e, mut pending) = lab_qp();
        // 16 x 128 KiB posted at once: 2 MiB queued, 210 ms to drain.
        run(&mut e, &mut m, &mut pending, Nanos::ZERO, 16, 128 << 10);
        assert!(
            !e.probe_allowed(Nanos::ZERO),
            "2 MiB ahead: the probe waits"
        );
        // Let half of them drain: the drain rate is measured from the departures.
        complete_until(&mut e, &mut pending, Nanos::from_ms(105));
        let r = e.drain_rate().expect("measured");
        assert!((r / 10e6 - 1.0).abs() < 0.01, "drain {r}");
        // A probe forced behind a deep queue (held back since 0, longer than max_defer)
        // keeps its raw RTT.
        let now = Nanos::from_ms(105);
        assert!(e.probe_allowed(now));
        let tag = e.probe_posted(now);
        let done = m.post(now, 0);
        complete_until(&mut e, &mut pending, done);
        let s = e.probe_answered(done, tag);
        assert!(s.forced && s.drained == Nanos::ZERO && s.net == s.raw);
        assert!(s.raw > Nanos::from_ms(90), "{s:?}");
        // One transfer of 32 KiB ahead: subtracted, the path is what is left.
        let now = done + Nanos::from_ms(1);
        run(&mut e, &mut m, &mut pending, now, 1, 32 << 10);
        assert!(e.probe_allowed(now));
        let tag = e.probe_posted(now);
        let done = m.post(now, 0);
        complete_until(&mut e, &mut pending, done);
        let s = e.probe_answered(done, tag);
        assert!(!s.forced);
        assert_eq!(s.ahead, 32 << 10);
        let raw_expect = (32 << 10) as f64 / 10e6 + 300e-6;
        assert!((s.raw.as_secs_f64() - raw_expect).abs() < 1e-6, "{s:?}");
        assert!(
            (s.net.as_us_f64() - 300.0).abs() < 40.0,
            "net {} us, raw {} us",
            s.net.as_us_f64(),
            s.raw.as_us_f64()
        );
        // Nothing ahead: net = raw = path.
        let now = done + Nanos::from_ms(1);
        let tag = e.probe_posted(now);
        let done = m.post(now, 0);
        let s = e.probe_answered(done, tag);
        assert_eq!((s.ahead, s.drained), (0, Nanos::ZERO));
        assert_eq!(s.net, Nanos::from_us(300));
        assert_eq!(e.base(), Some(Nanos::from_us(300)));
        assert_eq!(e.counts(), (3, 1));
    }

    #[test]
    fn a_paced_qp_whose_path_keeps_up_keeps_its_raw_rtt() {
        // Paced at 1 MB/s over a 10 MB/s path with 20 ms of delay: a 16 KiB chunk every
        // 16.4 ms, each completing 21.6 ms after its post, so one is always outstanding and
        // the completions come at the pacer's spacing (the measured drain is 1 MB/s).
        let (mut m, mut e, mut pending) = lab_qp();
        m.path = Nanos::from_ms(20);
        let chunk = 16 << 10;
        let gap = Nanos::from_secs_f64(chunk as f64 / 1e6);
        let mut t = Nanos::ZERO;
        for _ in 0..20 {
            complete_until(&mut e, &mut pending, t);
            run(&mut e, &mut m, &mut pending, t, 1, chunk);
            t = t + gap;
        }
        complete_until(&mut e, &mut pending, t);
        let r = e.drain_rate().expect("measured");
        assert!((r / 1e6 - 1.0).abs() < 0.01, "drain {r}");
        // A probe with the last chunk ahead (on its way, not waiting): 21.6 ms raw.
        let tag = e.probe_posted(t);
        assert_eq!(tag.ahead, chunk);
        let done = m.post(t, 0);
        complete_until(&mut e, &mut pending, done);
        let mut unpaced = e.clone();
        let s = e.probe_answered_paced(done, tag, true);
        assert_eq!((s.drained, s.net), (Nanos::ZERO, s.raw), "{s:?}");
        assert!(s.raw >= Nanos::from_ms(20), "{s:?}");
        // Without the pacing rate, a pacing interval is taken off: 16.4 ms of the 20 ms path.
        let s = unpaced.probe_answered(done, tag);
        assert!(s.net < Nanos::from_ms(6), "{s:?}");
        // A QP paced above what its path drains: its own queue grows, and that is the
        // congestion the law must see, so nothing is taken off either.
        let mut q = e.clone();
        q.on_posted(done, chunk);
        let tag = q.probe_posted(done);
        let s = q.probe_answered_paced(done + Nanos::from_ms(40), tag, true);
        assert_eq!((s.drained, s.net), (Nanos::ZERO, s.raw), "{s:?}");
    }

    #[test]
    fn queueing_in_the_path_shows_in_the_net_rtt() {
        // The same QP, with its path delay growing as another flow fills a shared queue:
        // the net RTT follows the path, the drain subtraction does not hide it.
        let (mut m, mut e, mut pending) = lab_qp();
        let mut t = Nanos::ZERO;
        let mut nets = Vec::new();
        for step in 0..40u64 {
            // A paced QP: two 32 KiB transfers every 12 ms (5.5 MB/s, under the drain rate;
            // the second departs behind the first: a drain sample).
            m.path = Nanos::from_us(300 + 100 * step);
            run(&mut e, &mut m, &mut pending, t, 2, 32 << 10);
            // Probe right after them: 64 KiB ahead, within max_ahead.
            assert!(e.probe_allowed(t));
            let tag = e.probe_posted(t);
            let done = m.post(t, 0);
            complete_until(&mut e, &mut pending, done);
            let s = e.probe_answered(done, tag);
            nets.push((m.path, s));
            t = t + Nanos::from_ms(12);
            complete_until(&mut e, &mut pending, t);
        }
        // Once the drain rate is known (from the first period's second departure), each net
        // sample is the path within 1 ms (the 64 KiB ahead is 6.5 ms of drain).
        for (path, s) in &nets[1..] {
            let err = s.net.as_us_f64() - path.as_us_f64();
            assert!(
                err.abs() < 1000.0,
                "path {path} net {} raw {}",
                s.net,
                s.raw
            );
            assert!(s.raw > s.net);
        }
        // The rise of 3.5 ms in the path is seen whole in the net RTT.
        let first = nets[1].1.net.as_us_f64();
        let last = nets[39].1.net.as_us_f64();
        assert!((last - first - 3800.0).abs() < 500.0, "{first} -> {last}");
        assert_eq!(e.counts().1, 0, "no probe was forced");
    }

    #[test]
    fn a_shared_bottleneck_queue_is_not_subtracted_away() {
        // The QP drains at 10 MB/s alone; then three other flows share its bottleneck and its
        // bytes leave at 2.5 MB/s, its share: a probe behind 64 KiB of them waits 26 ms.
        let (mut m, mut e, mut pending) = lab_qp();
        run(&mut e, &mut m, &mut pending, Nanos::ZERO, 8, 16 << 10);
        complete_until(&mut e, &mut pending, Nanos::from_ms(100));
        m.drain = 2.5e6;
        let t = Nanos::from_ms(100);
        run(&mut e, &mut m, &mut pending, t, 32, 16 << 10);
        // 28 of them gone (each 6.6 ms at the share), 4 (64 KiB) left
        let t = Nanos::from_ms(284);
        complete_until(&mut e, &mut pending, t);
        let r = e.drain_rate().unwrap();
        assert!(r < 3e6, "the drain estimate follows the share: {r}");
        assert!(
            e.peak_drain_rate().unwrap() > 9.9e6,
            "the peak is the QP's own rate"
        );
        let ahead = e.outstanding();
        assert_eq!(ahead, 64 << 10);
        let tag = e.probe_posted(t);
        let done = m.post(t, 0);
        complete_until(&mut e, &mut pending, done);
        let s = e.probe_answered(done, tag);
        // Taken off at the peak: the bytes' own serialization (6.5 ms for 64 KiB at 10 MB/s),
        // not their 26 ms in the shared queue.
        let own = Nanos::from_secs_f64(ahead as f64 / 10e6);
        assert!(
            (s.drained.as_us_f64() - own.as_us_f64()).abs() < 50.0,
            "{s:?}, own serialization {own}"
        );
        assert!(
            s.net.as_secs_f64() > s.raw.as_secs_f64() * 0.7,
            "the queue stays in the sample: {s:?}"
        );
        // At the current drain rate, the sample would have been the bare path.
        let at_share = s.raw.saturating_sub(Nanos::from_secs_f64(ahead as f64 / r));
        assert!(at_share < Nanos::from_ms(2), "{at_share}");
    }

    #[test]
    fn reads_ahead_are_taken_off_a_paced_probe_and_do_not_hold_it_back() {
        // A target fetching 128 KiB host writes, paced: RDMA READs whose data the host sends
        // at 10 MB/s, 300 us of path. Two of them back to back give a drain sample.
        let (mut m, mut e, mut pending) = lab_qp();
        let len = 128 << 10;
        for _ in 0..2 {
            e.on_posted_dir(Nanos::ZERO, len, Dir::In);
            pending.push((m.post(Nanos::ZERO, len), len));
        }
        let t = Nanos::from_ms(27);
        complete_in_until(&mut e, &mut pending, t);
        assert_eq!(e.outstanding(), 0);
        // Two reads in flight (256 KiB, four times max_ahead): the probe goes at once.
        for _ in 0..2 {
            e.on_posted_dir(t, len, Dir::In);
            pending.push((m.post(t, len), len));
        }
        assert_eq!(e.outstanding_out(), 0);
        assert!(e.probe_allowed(t), "reads do not hold a probe back");
        let tag = e.probe_posted(t);
        assert_eq!((tag.ahead, tag.ahead_in), (2 * len, 2 * len));
        let done = m.post(t, 0);
        let s = e.probe_answered_paced(done, tag, true);
        // 26 ms raw (the reads' serialization), the path left.
        assert!(s.raw > Nanos::from_ms(26), "{s:?}");
        assert!(!s.forced);
        assert!((s.net.as_us_f64() - 300.0).abs() < 50.0, "{s:?}");
        // A probe posted 5 ms into the first read's transfer waits for the rest only: that
        // is what comes off, not the whole 256 KiB.
        let mut late = e.clone();
        let tag = late.probe_posted(t + Nanos::from_ms(5));
        assert_eq!(tag.head_for, Nanos::from_ms(5));
        let s = late.probe_answered_paced(done, tag, true);
        assert!((s.net.as_us_f64() - 300.0).abs() < 50.0, "{s:?}");
        complete_in_until(&mut e, &mut pending, done);
        assert_eq!(e.outstanding(), 0);
        // A read whose data had mostly arrived before its predecessor's completion was seen
        // (a busy poller stamps completions late): 128 KiB ahead, service seemingly just
        // begun, answered in 400 us. Taken off whole it would leave nothing; the sample stays
        // at the path's floor, the lowest sample with nothing ahead (300 us here).
        let mut stale = e.clone();
        let idle = done + Nanos::from_ms(100);
        let tag = stale.probe_posted(idle);
        let clear = stale.probe_answered_paced(idle + Nanos::from_us(300), tag, true);
        assert_eq!(clear.net, Nanos::from_us(300));
        let tag = ProbeTag {
            sent: idle + Nanos::from_ms(1),
            ahead: len,
            ahead_in: len,
            head_for: Nanos::ZERO,
        };
        let s = stale.probe_answered_paced(tag.sent + Nanos::from_us(400), tag, true);
        assert_eq!(
            (s.drained, s.net),
            (Nanos::from_us(100), Nanos::from_us(300))
        );
        // An outgoing chunk ahead of a paced probe still stays in the sample.
        let mut f = e.clone();
        f.on_posted(done, 16 << 10);
        f.on_posted_dir(done, len, Dir::In);
        let tag = f.probe_posted(done);
        let s = f.probe_answered_paced(done + Nanos::from_ms(20), tag, true);
        let read = Nanos::from_secs_f64(len as f64 / 10e6);
        assert!(
            (s.drained.as_us_f64() - read.as_us_f64()).abs() < 50.0,
            "{s:?}"
        );
        // A shared bottleneck on the way in: the reads now arrive at 2.5 MB/s, their share.
        // Taken off at the peak (their own serialization), the shared queue stays.
        m.drain = 2.5e6;
        let t = done + Nanos::from_ms(1);
        for _ in 0..4 {
            e.on_posted_dir(t, len, Dir::In);
            pending.push((m.post(t, len), len));
        }
        let tag = e.probe_posted(t);
        let done = m.post(t, 0);
        complete_in_until(&mut e, &mut pending, done);
        let s = e.probe_answered_paced(done, tag, true);
        let own = Nanos::from_secs_f64((4 * len) as f64 / 10e6);
        assert!(s.drained <= own + Nanos::from_us(50), "{s:?}, own {own}");
        assert!(
            s.net.as_secs_f64() > s.raw.as_secs_f64() * 0.7,
            "the queue stays in the sample: {s:?}"
        );
    }

    #[test]
    fn the_runtimes_own_posting_time_is_taken_off_within_the_floor() {
        let mut e = NetRtt::new(NetRttConfig::default());
        // A probe with nothing ahead answered in 3.3 ms, 3 ms of which the poller spent inside
        // a READ's post call made after it (rxe in the lab): the path is the 300 us left, and
        // that is the floor.
        let t = Nanos::from_ms(1);
        let tag = e.probe_posted(t);
        let s = e.probe_answered_local(t + Nanos::from_us(3300), tag, true, Nanos::from_ms(3));
        assert_eq!(
            (s.raw, s.drained, s.net),
            (Nanos::from_us(3300), Nanos::from_ms(3), Nanos::from_us(300))
        );
        assert_eq!(e.base(), Some(Nanos::from_us(300)));
        // The same raw time without the post call is the path's: it stays.
        let t = Nanos::from_ms(10);
        let tag = e.probe_posted(t);
        let s = e.probe_answered_local(t + Nanos::from_us(3300), tag, true, Nanos::ZERO);
        assert_eq!(s.net, Nanos::from_us(3300));
        // A post call that ended long after the answer came: taken off only down to the floor,
        // and the floor stays where it was.
        let t = Nanos::from_ms(20);
        let tag = e.probe_posted(t);
        let s = e.probe_answered_local(t + Nanos::from_us(500), tag, true, Nanos::from_us(450));
        assert_eq!(
            (s.drained, s.net),
            (Nanos::from_us(200), Nanos::from_us(300))
        );
        let t = Nanos::from_ms(30);
        let tag = e.probe_posted(t);
        let s = e.probe_answered_local(t + Nanos::from_us(400), tag, true, Nanos::ZERO);
        assert_eq!(
            s.net,
            Nanos::from_us(400),
            "not taken below the 300 us floor"
        );
        assert_eq!(e.base(), Some(Nanos::from_us(300)));
        // Posting time adds to the bytes ahead: a probe behind one outgoing 32 KiB transfer
        // (3.3 ms at a measured 10 MB/s) and 1 ms of posting.
        e.on_posted(Nanos::from_ms(40), 4096);
        e.on_posted(Nanos::from_ms(40), 4096);
        e.on_completed(Nanos::from_ms(41), 4096);
        e.on_completed(Nanos::from_secs_f64(0.041 + 4096.0 / 10e6), 4096);
        let t = Nanos::from_ms(50);
        e.on_posted(t, 32 << 10);
        let tag = e.probe_posted(t);
        let ahead = e.ahead_time(tag, false);
        assert!((ahead.as_us_f64() - 3276.8).abs() < 1.0, "{ahead}");
        assert_eq!(
            e.ahead_time(tag, true),
            Nanos::ZERO,
            "a paced QP's own bytes stay"
        );
        let raw = ahead + Nanos::from_ms(1) + Nanos::from_us(300);
        let s = e.probe_answered_local(t + raw, tag, false, Nanos::from_ms(1));
        assert!((s.net.as_us_f64() - 300.0).abs() < 1.0, "{s:?}");
    }

    #[test]
    fn a_departure_after_idle_is_not_a_drain_sample() {
        let mut e = NetRtt::new(NetRttConfig::default());
        // One transfer at a time, each completing 5 ms after its post: no backlog, no rate.
        for i in 0..10u64 {
            let t = Nanos::from_ms(10 * i);
            e.on_posted(t, 4096);
            e.on_completed(t + Nanos::from_ms(5), 4096);
        }
        assert_eq!(e.drain_rate(), None);
        assert_eq!(e.outstanding(), 0);
        // Two in flight: the second's departure 1 ms after the first is a sample of 4 MB/s.
        e.on_posted(Nanos::from_ms(200), 4096);
        e.on_posted(Nanos::from_ms(200), 4096);
        e.on_completed(Nanos::from_ms(205), 4096);
        e.on_completed(Nanos::from_ms(206), 4096);
        let r = e.drain_rate().unwrap();
        assert!((r - 4.096e6).abs() < 1.0, "{r}");
        // Before a drain rate is known nothing is subtracted.
        let mut f = NetRtt::new(NetRttConfig::default());
        f.on_posted(Nanos::ZERO, 4096);
        let tag = f.probe_posted(Nanos::ZERO);
        let s = f.probe_answered(Nanos::from_us(700), tag);
        assert_eq!((s.drained, s.net), (Nanos::ZERO, Nanos::from_us(700)));
    }

    #[test]
    fn deferral_ends_after_max_defer() {
        let cfg = NetRttConfig {
            max_defer: Nanos::from_ms(20),
            ..NetRttConfig::default()
        };
        let mut e = NetRtt::new(cfg);
        e.on_posted(Nanos::ZERO, 1 << 20);
        assert!(!e.probe_allowed(Nanos::from_ms(1)));
        assert!(!e.probe_allowed(Nanos::from_ms(20)));
        assert!(e.probe_allowed(Nanos::from_ms(21)));
        let tag = e.probe_posted(Nanos::from_ms(21));
        assert_eq!(tag.ahead, 1 << 20);
        // The clock starts again for the next probe.
        assert!(!e.probe_allowed(Nanos::from_ms(22)));
    }

    #[test]
    fn the_base_is_a_windowed_minimum() {
        let mut w = Windowed::new(Nanos::from_ms(10), Ord::min);
        w.push(Nanos::ZERO, Nanos::from_us(100));
        w.push(Nanos::from_ms(1), Nanos::from_us(300));
        assert_eq!(w.get(), Some(Nanos::from_us(100)));
        // Into the second half-window: the first bucket still counts.
        w.push(Nanos::from_ms(6), Nanos::from_us(400));
        assert_eq!(w.get(), Some(Nanos::from_us(100)));
        // A third half-window: the 100 us of the first is forgotten.
        w.push(Nanos::from_ms(11), Nanos::from_us(500));
        assert_eq!(w.get(), Some(Nanos::from_us(400)));
        // A long silence forgets everything.
        w.push(Nanos::from_ms(100), Nanos::from_us(900));
        assert_eq!(w.get(), Some(Nanos::from_us(900)));
    }
}
