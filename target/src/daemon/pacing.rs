//! Live per-QP pacing: the configured congestion-control algorithm (crate `raidline-cc`) driving
//! a token bucket on every I/O queue pair, RTT probes on the live QP, per-queue statistics for
//! `raidline status` and the metrics, and run-time parameter changes.
//!
//! - [`CcSpec`] is the configured algorithm name and parameters; [`Algorithm`] is the validated
//!   algorithm value (the same names as the simulator: `rtt-aimd`, `ctcc`, `swift`, `timely`,
//!   `dcqcn`, `fixed`); [`DEFAULT_ALGORITHM`] is what a configuration naming none gets, and
//!   [`PACING_OFF`] turns pacing off.
//! - [`QpPacer`] is one queue pair's controller (the `cc` crate's `QpController` plus the
//!   algorithm value it runs), driven by the poller on the poller's clock: nanoseconds since the
//!   poller started. What passes the bucket: every RDMA READ of host data and every RDMA WRITE of
//!   read data; responses without data and SENDs are never held.
//! - [`QueueStats`] is what a poller publishes about each queue (atomics, read without locks by
//!   the management socket); [`CcState`] holds the current parameters and a generation counter
//!   that pollers check every [`PARAM_CHECK`] to take up run-time changes.
//!
//! Invariants: a refused parameter change changes nothing anywhere; the algorithm's name never
//! changes while the target runs (only its parameters); probes are signaled zero-length RDMA
//! WRITEs that never hold back a response (the send queue has a slot of its own for one).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use raidline_cc::algo::{dcqcn, fixed, rtt_aimd, swift, timely};
use raidline_cc::algo::{CongestionControl, Dcqcn, Event, FixedRate, RttAimd, Swift, Timely};
use raidline_cc::netrtt::{Dir, NetRtt, NetRttConfig, ProbeTag};
use raidline_cc::pacer::Readiness;
use raidline_cc::params::Params;
use raidline_cc::probe::ProbeSeq;
use raidline_cc::qp::{QpConfig, QpController};
use raidline_cc::{CcError, Nanos, Rate};

/// The algorithm names the target accepts (the simulator's names).
pub const ALGORITHMS: &[&str] = &["rtt-aimd", "ctcc", "swift", "timely", "dcqcn", "fixed"];

/// The configured algorithm name that turns pacing off.
pub const PACING_OFF: &str = "off";

/// The algorithm a configuration without `[cc] algorithm` gets: [`PACING_OFF`]. `rtt-aimd`
/// with its host-clock defaults ([`RttAimd::host_clock`]) passes the lab's bottleneck check
/// (`deploy/lab/checks/56-bottleneck.sh`), but uncongested it cost more than issue 17's 5 % in
/// one of two 3-round side-by-side runs (randwrite-4k 0.90 x off, seqwrite-128k 0.94, one round
/// of host writes at 0.65; README, twentieth session), so it is not the default yet.
pub const DEFAULT_ALGORITHM: &str = PACING_OFF;

/// How often pollers look for changed parameters.
pub const PARAM_CHECK: Duration = Duration::from_millis(100);

/// The link rate a QP's algorithm may not exceed (the target does not read the port speed).
pub const LINE_RATE_GBPS: f64 = 100.0;

/// Token-bucket depth: two 128 KiB transfers, so a poller that wakes a little late loses no
/// tokens. Read data leaves in 16 KiB chunks (the poller's `PACE_CHUNK`), each passing the
/// bucket. Smaller buckets were measured at the lab's 40 Mbit/s bottleneck, with 4 QPs `fixed`
/// at 1 MB/s each: 32 KiB moved 2.88 MB/s (ping p50 5.5 ms) and 64 KiB 2.66 MB/s (5.7 ms),
/// against 3.88 MB/s (10.3 ms) with this one. The TCG guest's poller wakes tens of ms late
/// under load, and a small bucket loses those tokens.
pub const BURST_BYTES: u64 = 256 << 10;

/// ...or this long at the queue pair's rate, if that is more ([`raidline_cc::pacer`]'s
/// `burst_time`). A poller that comes late to a queue pair whose transfers wait for the bucket
/// (woken late, or busy with the ring: tens of ms in the lab's TCG guest under load) finds at
/// most one bucket of tokens, so with 256 KiB alone a fast queue pair moved at most 256 KiB
/// per late visit whatever its rate: rtt-aimd at 40-55 MB/s per queue pair moved 25 MB/s of
/// the lab's fullstripe-192k (whole-stripe host writes, one RDMA READ of 192 KiB each)
/// against 35 MB/s unpaced. At the lab's bottleneck (1-5 MB/s per queue pair) 20 ms at the
/// rate is under 256 KiB: the bucket there is what it was.
pub const BURST_TIME: Nanos = Nanos::from_ms(20);

/// What a queue pair with nothing waiting for the bucket may bank (two 16 KiB chunks), and
/// what a new one starts with: the whole bucket fills only while a transfer waits for it
/// ([`raidline_cc::pacer`]'s idle bank). Before, the lab's queue pairs, idle between connect
/// and load, each let a full 256 KiB bucket go at the load's first transfers: 200 ms of the
/// 40 Mbit/s bottleneck at once, raw probe RTTs of 36–223 ms in the load's first second.
pub const IDLE_BURST_BYTES: u64 = 32 << 10;

/// ...or this long at the queue pair's rate, if that is more, so a fast queue pair whose reads
/// come with gaps between them still sends each whole ([`raidline_cc::pacer`]). A read larger
/// than the idle bank no longer raises it for itself: with whole transfers going whole (see
/// the poller's `advance`), each idle lab queue pair sent its first 128 KiB read at once, 100
/// ms of the bottleneck for four of them (pings of 50-60 ms a second into the load).
pub const IDLE_BANK_TIME: Nanos = Nanos::from_ms(10);

/// First probe timeout. The RTT is taken on the host clock (poll to poll, so software
/// latency is in it: hundreds of microseconds on a busy host), and an RC QP does not lose a
/// probe short of breaking, so the timeout is far above the reference 300 us.
pub const PROBE_TIMEOUT: Nanos = Nanos::from_ms(5);

/// Even an algorithm that never asks for one gets a probe this often, so `raidline status`
/// shows every paced queue's RTT.
pub const REPORT_PROBE_INTERVAL: Nanos = Nanos::from_ms(100);

/// Configured congestion control: algorithm name and parameter overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct CcSpec {
    /// One of [`ALGORITHMS`].
    pub algorithm: String,
    /// `(name, value)` overrides of the algorithm's defaults.
    pub params: Vec<(String, f64)>,
}

impl CcSpec {
    /// The algorithm with its parameters set; refuses unknown names and out-of-range values.
    pub fn build(&self) -> Result<Algorithm, CcError> {
        let mut a = Algorithm::by_name(&self.algorithm)?;
        for (name, value) in &self.params {
            a.set(name, *value)?;
        }
        Ok(a)
    }
}

/// A validated algorithm value (one per queue pair at run time: parameters are copied in).
#[derive(Clone, Debug)]
pub enum Algorithm {
    /// `rtt-aimd` or `ctcc`.
    RttAimd(RttAimd),
    /// `swift`.
    Swift(Swift),
    /// `timely`.
    Timely(Timely),
    /// `dcqcn`.
    Dcqcn(Dcqcn),
    /// `fixed`.
    Fixed(FixedRate),
}

macro_rules! on_algo {
    ($v:expr, $a:ident => $e:expr) => {
        match $v {
            Algorithm::RttAimd($a) => $e,
            Algorithm::Swift($a) => $e,
            Algorithm::Timely($a) => $e,
            Algorithm::Dcqcn($a) => $e,
            Algorithm::Fixed($a) => $e,
        }
    };
}

impl Algorithm {
    /// The algorithm at its defaults. `rtt-aimd`'s are those for RTTs timed on the host clock
    /// ([`RttAimd::host_clock`]): the daemon's probes are (the simulator's `rtt-aimd`,
    /// [`RttAimd::new`], models NIC-timestamped microsecond RTTs).
    pub fn by_name(name: &str) -> Result<Algorithm, CcError> {
        Ok(match name {
            "rtt-aimd" => Algorithm::RttAimd(RttAimd::host_clock()),
            "ctcc" => Algorithm::RttAimd(RttAimd::ctcc()),
            "swift" => Algorithm::Swift(Swift::new()),
            "timely" => Algorithm::Timely(Timely::new()),
            "dcqcn" => Algorithm::Dcqcn(Dcqcn::new()),
            "fixed" => Algorithm::Fixed(FixedRate::new()),
            other => return Err(CcError::UnknownAlgorithm(other.to_owned())),
        })
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        on_algo!(self, a => a.name())
    }

    /// Current parameters.
    pub fn params(&self) -> &Params {
        on_algo!(self, a => a.params())
    }

    /// Sets one parameter ([`Params::set`]: a refusal changes nothing).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), CcError> {
        on_algo!(self, a => a.params_mut().set(name, value))
    }

    /// Takes `other`'s parameter values (same algorithm; a different one is ignored).
    fn adopt(&mut self, other: &Algorithm) {
        if self.name() == other.name() {
            *self = other.clone();
        }
    }
}

/// One QP's controller state, typed by algorithm.
#[derive(Debug)]
enum Ctl {
    RttAimd(QpController<rtt_aimd::State>),
    Swift(QpController<swift::State>),
    Timely(QpController<timely::State>),
    Dcqcn(QpController<dcqcn::State>),
    Fixed(QpController<fixed::State>),
}

/// Runs `$e` with `$a` the algorithm and `$c` the matching controller.
macro_rules! on_ctl {
    ($algo:expr, $ctl:expr, $a:ident, $c:ident => $e:expr, $other:expr) => {
        match ($algo, $ctl) {
            (Algorithm::RttAimd($a), Ctl::RttAimd($c)) => $e,
            (Algorithm::Swift($a), Ctl::Swift($c)) => $e,
            (Algorithm::Timely($a), Ctl::Timely($c)) => $e,
            (Algorithm::Dcqcn($a), Ctl::Dcqcn($c)) => $e,
            (Algorithm::Fixed($a), Ctl::Fixed($c)) => $e,
            _ => $other,
        }
    };
}

/// Distinct dither seeds for the pacers of one process (every QP's dither and first-packet
/// phase differ, so thousands of paced QPs do not fall into the same phase).
static NEXT_SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x9E37_79B9);

fn qp_config() -> QpConfig {
    let n = NEXT_SEED.fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed);
    QpConfig {
        line_rate: Rate::from_gbps(LINE_RATE_GBPS),
        burst: BURST_BYTES,
        initial: IDLE_BURST_BYTES,
        idle_burst: IDLE_BURST_BYTES,
        idle_time: IDLE_BANK_TIME,
        burst_time: BURST_TIME,
        probe_timeout: PROBE_TIMEOUT,
        max_probe_timeout: Nanos::from_ms(100),
        jitter: raidline_cc::qp::DEFAULT_JITTER,
        seed: n,
        // An RC QP: a probe is late, never lost (a broken QP takes its pacer with it).
        reliable: true,
    }
}

/// One queue pair's pacer: algorithm + controller + what `raidline status` reports.
///
/// The algorithm sees each probe's **net** RTT ([`raidline_cc::netrtt`]): the raw RTT less
/// the time the QP's own transfers posted ahead of the probe needed to drain. A wanted probe
/// waits while more than [`NetRttConfig::max_ahead`] bytes are outstanding (at most
/// [`NetRttConfig::max_defer`]).
#[derive(Debug)]
pub(crate) struct QpPacer {
    algo: Algorithm,
    ctl: Ctl,
    net: NetRtt,
    /// The probe in flight and what was ahead of it.
    probe: Option<(ProbeSeq, ProbeTag)>,
    /// The runtime's posting clock when the probe in flight was posted
    /// ([`QpPacer::probe_sent`]).
    probe_posting: Nanos,
    last_probe: Nanos,
    srtt: Option<Nanos>,
    last_rtt: Option<Nanos>,
    min_rtt: Option<Nanos>,
    probes: u64,
    waits: u64,
}

impl QpPacer {
    /// A started flow at `now` running (a copy of) `algo`.
    pub fn new(algo: &Algorithm, now: Nanos) -> QpPacer {
        let cfg = qp_config();
        let ctl = match algo {
            Algorithm::RttAimd(a) => Ctl::RttAimd(QpController::start(a, now, &cfg)),
            Algorithm::Swift(a) => Ctl::Swift(QpController::start(a, now, &cfg)),
            Algorithm::Timely(a) => Ctl::Timely(QpController::start(a, now, &cfg)),
            Algorithm::Dcqcn(a) => Ctl::Dcqcn(QpController::start(a, now, &cfg)),
            Algorithm::Fixed(a) => Ctl::Fixed(QpController::start(a, now, &cfg)),
        };
        QpPacer {
            algo: algo.clone(),
            ctl,
            net: NetRtt::new(NetRttConfig::default()),
            probe: None,
            probe_posting: Nanos::ZERO,
            last_probe: now,
            srtt: None,
            last_rtt: None,
            min_rtt: None,
            probes: 0,
            waits: 0,
        }
    }

    /// Whether `len` bytes may go now.
    pub fn readiness(&mut self, now: Nanos, len: u64) -> Readiness {
        on_ctl!(&self.algo, &mut self.ctl, _a, c => c.readiness(now, len), Readiness::Now)
    }

    /// A transfer had to wait for the bucket (counted for the status).
    pub fn note_wait(&mut self) {
        self.waits += 1;
    }

    /// `len` bytes going `dir` were posted at `now`.
    pub fn on_sent(&mut self, now: Nanos, len: u64, dir: Dir) {
        self.net.on_posted_dir(now, len, dir);
        on_ctl!(&self.algo, &mut self.ctl, a, c => { c.on_sent(a, now, len); }, ())
    }

    /// The transfer of `len` bytes going `dir` completed.
    pub fn on_acked(&mut self, now: Nanos, len: u64, dir: Dir) {
        self.net.on_completed_dir(now, len, dir);
        on_ctl!(&self.algo, &mut self.ctl, a, c => {
            c.on_acked(len);
            if a.wants_acks() {
                c.handle(a, now, Event::Ack { bytes: len, rtt: None });
            }
        }, ())
    }

    /// A probe to send now, if one is wanted (by the algorithm, or for the report every
    /// [`REPORT_PROBE_INTERVAL`]), none is in flight and little of the QP's data is queued
    /// ahead ([`NetRtt::probe_allowed`]).
    pub fn poll_probe(&mut self, now: Nanos) -> Option<ProbeSeq> {
        if now.saturating_sub(self.last_probe) >= REPORT_PROBE_INTERVAL {
            on_ctl!(&self.algo, &mut self.ctl, _a, c => c.request_probe(), ());
        }
        let wanted = on_ctl!(&self.algo, &self.ctl, _a, c => c.probe_wanted(), false);
        if !wanted || !self.net.probe_allowed(now) {
            return None;
        }
        let seq = on_ctl!(&self.algo, &mut self.ctl, _a, c => c.poll_probe(now), None)?;
        self.last_probe = now;
        self.probe = Some((seq, self.net.probe_posted(now)));
        Some(seq)
    }

    /// The probe `seq` from [`QpPacer::poll_probe`] could not be posted (send queue full): it
    /// is wanted again, for the next visit.
    pub fn probe_unsent(&mut self, seq: ProbeSeq) {
        if self.probe.is_some_and(|(s, _)| s == seq) {
            self.probe = None;
        }
        on_ctl!(&self.algo, &mut self.ctl, _a, c => c.probe_unsent(seq), ());
    }

    /// The probe `seq` sent at `sent` completed at `now`: the algorithm gets its net RTT.
    ///
    /// Each answer is traced (target `raidline::cc`, level trace: `RUST_LOG=raidline::cc=trace`)
    /// with what the law saw and did, for the lab's bottleneck runs.
    #[cfg(test)]
    pub fn on_probe_answer(&mut self, qid: u16, now: Nanos, seq: ProbeSeq, sent: Nanos) {
        self.on_probe_answer_local(qid, now, seq, sent, Nanos::ZERO);
    }

    /// The probe from [`QpPacer::poll_probe`] was posted; the runtime's posting clock (time
    /// it has spent inside post calls, see `PollerPacing::posting`) read `posting` after it.
    pub fn probe_sent(&mut self, posting: Nanos) {
        self.probe_posting = posting;
    }

    /// The runtime's posting clock when the probe in flight was posted.
    pub fn probe_posting(&self) -> Nanos {
        self.probe_posting
    }

    /// [`QpPacer::on_probe_answer`] where the runtime spent `local` of the RTT inside post
    /// calls made after the probe's ([`NetRtt::probe_answered_local`]).
    pub fn on_probe_answer_local(
        &mut self,
        qid: u16,
        now: Nanos,
        seq: ProbeSeq,
        sent: Nanos,
        local: Nanos,
    ) {
        let rtt = now.saturating_sub(sent);
        self.probes += 1;
        self.last_rtt = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        // Smoothed as TCP's SRTT (gain 1/8).
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => Nanos((s.0 * 7 + rtt.0) / 8),
        });
        let before = self.rate_bytes_per_s();
        let (drained, ahead, forced) = match self.probe.take() {
            Some((s, tag)) if s == seq => {
                // The tag's post time is the probe's: `sent` is the same stamp. A QP with a
                // finite rate is paced: its sample keeps its raw RTT.
                let s = self
                    .net
                    .probe_answered_local(now, tag, before.is_finite(), local);
                (s.drained, s.ahead, s.forced)
            }
            other => {
                self.probe = other;
                (Nanos::ZERO, 0, false)
            }
        };
        on_ctl!(&self.algo, &mut self.ctl, a, c => {
            c.on_probe_answer_net(a, now, seq, drained);
        }, ());
        tracing::trace!(
            target: "raidline::cc",
            "qid {qid} t {:.3} ms raw {:.1} us ahead {ahead} forced {forced} local {:.1} us \
             drained {:.1} us net {:.1} us base {:.1} us rate {:.3} -> {:.3} MB/s",
            now.0 as f64 / 1e6,
            rtt.0 as f64 / 1e3,
            local.0 as f64 / 1e3,
            drained.0 as f64 / 1e3,
            rtt.saturating_sub(drained).0 as f64 / 1e3,
            self.net.base().map_or(f64::NAN, |b| b.0 as f64 / 1e3),
            before / 1e6,
            self.rate_bytes_per_s() / 1e6,
        );
    }

    /// Fires the algorithm's timer and the probe timeout when due.
    #[cfg(test)]
    pub fn poll_timers(&mut self, now: Nanos) {
        self.poll_timers_posting(now, self.probe_posting);
    }

    /// [`QpPacer::poll_timers`] with the runtime's posting clock at `posting`: the probe in
    /// flight is not late for the time the transfers ahead of it need
    /// ([`NetRtt::ahead_time`]) nor for the time the runtime spent posting since it went
    /// ([`QpPacer::on_probe_answer_local`]).
    pub fn poll_timers_posting(&mut self, now: Nanos, posting: Nanos) {
        let paced = self.rate_bytes_per_s().is_finite();
        let excused = self.probe.map_or(Nanos::ZERO, |(_, tag)| {
            self.net.ahead_time(tag, paced) + posting.saturating_sub(self.probe_posting)
        });
        on_ctl!(&self.algo, &mut self.ctl, a, c => { c.poll_timers_excused(a, now, excused); }, ())
    }

    /// When [`QpPacer::poll_timers`] has something to do next.
    pub fn next_timer(&self) -> Option<Nanos> {
        let (t, p) = match &self.ctl {
            Ctl::RttAimd(c) => (c.timer(), c.probe_deadline()),
            Ctl::Swift(c) => (c.timer(), c.probe_deadline()),
            Ctl::Timely(c) => (c.timer(), c.probe_deadline()),
            Ctl::Dcqcn(c) => (c.timer(), c.probe_deadline()),
            Ctl::Fixed(c) => (c.timer(), c.probe_deadline()),
        };
        match (t, p) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the algorithm limits the bytes in flight with a window (not only the rate).
    pub fn windowed(&self) -> bool {
        on_ctl!(&self.algo, &self.ctl, _a, c => c.decision().window.is_some(), false)
    }

    /// The algorithm's current rate, bytes per second.
    pub fn rate_bytes_per_s(&self) -> f64 {
        on_ctl!(&self.algo, &self.ctl, a, c => c.rate(a).bps() / 8.0, f64::NAN)
    }

    /// Takes up changed parameters.
    pub fn adopt(&mut self, algo: &Algorithm) {
        self.algo.adopt(algo);
    }

    /// Publishes rate, RTTs and counters.
    pub fn publish(&self, stats: &QueueStats) {
        let ns = |n: Option<Nanos>| n.map_or(0, |n| n.0.max(1));
        stats
            .rate_bits
            .store(self.rate_bytes_per_s().to_bits(), Ordering::Relaxed);
        stats.srtt_ns.store(ns(self.srtt), Ordering::Relaxed);
        stats
            .last_rtt_ns
            .store(ns(self.last_rtt), Ordering::Relaxed);
        stats.min_rtt_ns.store(ns(self.min_rtt), Ordering::Relaxed);
        stats.probes.store(self.probes, Ordering::Relaxed);
        let last = self.net.last();
        stats
            .net_rtt_ns
            .store(ns(last.map(|s| s.net)), Ordering::Relaxed);
        stats
            .base_rtt_ns
            .store(ns(self.net.base()), Ordering::Relaxed);
        stats
            .probe_ahead_bytes
            .store(last.map_or(0, |s| s.ahead), Ordering::Relaxed);
        stats.drain_bits.store(
            self.net.drain_rate().unwrap_or(f64::NAN).to_bits(),
            Ordering::Relaxed,
        );
        stats
            .probes_forced
            .store(self.net.counts().1, Ordering::Relaxed);
        let lost = match &self.ctl {
            Ctl::RttAimd(c) => c.probes_lost(),
            Ctl::Swift(c) => c.probes_lost(),
            Ctl::Timely(c) => c.probes_lost(),
            Ctl::Dcqcn(c) => c.probes_lost(),
            Ctl::Fixed(c) => c.probes_lost(),
        };
        stats.probes_lost.store(lost, Ordering::Relaxed);
        stats.paced_waits.store(self.waits, Ordering::Relaxed);
    }
}

/// What a poller publishes about one queue pair (updated every few milliseconds).
#[derive(Debug)]
pub struct QueueStats {
    /// Controller id (0 until the Connect).
    pub cntlid: AtomicU32,
    /// Queue id.
    pub qid: AtomicU32,
    /// Queue depth.
    pub depth: AtomicU32,
    /// Commands received and not yet answered.
    pub in_flight: AtomicU32,
    /// Payload bytes the queue pair moved with RDMA READ and WRITE (paced or not).
    pub bytes: AtomicU64,
    /// RDMA WRITEs of read data posted as paced chunks ahead of their response's last one.
    pub paced_chunks: AtomicU64,
    /// Pacer rate in bytes per second as `f64` bits (NaN: not paced).
    pub rate_bits: AtomicU64,
    /// Smoothed probe RTT, ns (0: no sample yet).
    pub srtt_ns: AtomicU64,
    /// Last probe RTT, ns (0: none).
    pub last_rtt_ns: AtomicU64,
    /// Lowest probe RTT, ns (0: none).
    pub min_rtt_ns: AtomicU64,
    /// Last net RTT (raw less the drain time of the QP's own data ahead of the probe), ns
    /// (0: none).
    pub net_rtt_ns: AtomicU64,
    /// Windowed minimum of the net RTT (the base), ns (0: none).
    pub base_rtt_ns: AtomicU64,
    /// Bytes of the QP's own data that were ahead of the last probe.
    pub probe_ahead_bytes: AtomicU64,
    /// The QP's measured drain rate in bytes per second as `f64` bits (NaN: not measured).
    pub drain_bits: AtomicU64,
    /// Probes sent behind more than the allowed bytes after waiting the longest (their RTT
    /// is not reduced).
    pub probes_forced: AtomicU64,
    /// Probes answered.
    pub probes: AtomicU64,
    /// Probe timeouts: an RC QP's probe past its timeout is late, not lost, and each backed-off
    /// timeout of it counts once (its answer still comes and counts).
    pub probes_lost: AtomicU64,
    /// Transfers that waited for the token bucket.
    pub paced_waits: AtomicU64,
}

impl Default for QueueStats {
    fn default() -> QueueStats {
        QueueStats {
            cntlid: AtomicU32::new(0),
            qid: AtomicU32::new(0),
            depth: AtomicU32::new(0),
            in_flight: AtomicU32::new(0),
            bytes: AtomicU64::new(0),
            paced_chunks: AtomicU64::new(0),
            rate_bits: AtomicU64::new(f64::NAN.to_bits()),
            srtt_ns: AtomicU64::new(0),
            last_rtt_ns: AtomicU64::new(0),
            min_rtt_ns: AtomicU64::new(0),
            net_rtt_ns: AtomicU64::new(0),
            base_rtt_ns: AtomicU64::new(0),
            probe_ahead_bytes: AtomicU64::new(0),
            drain_bits: AtomicU64::new(f64::NAN.to_bits()),
            probes_forced: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            probes_lost: AtomicU64::new(0),
            paced_waits: AtomicU64::new(0),
        }
    }
}

impl QueueStats {
    /// Pacer rate, bytes per second (NaN when the queue is not paced).
    pub fn rate_bytes_per_s(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }

    /// Smoothed RTT in microseconds (NaN before the first probe answer).
    pub fn rtt_us(&self) -> f64 {
        us(&self.srtt_ns)
    }

    /// Last raw probe RTT in microseconds (NaN before the first probe answer).
    pub fn raw_rtt_us(&self) -> f64 {
        us(&self.last_rtt_ns)
    }

    /// Last net RTT in microseconds (NaN before the first probe answer).
    pub fn net_rtt_us(&self) -> f64 {
        us(&self.net_rtt_ns)
    }

    /// Windowed-minimum net RTT in microseconds (NaN before the first probe answer).
    pub fn base_rtt_us(&self) -> f64 {
        us(&self.base_rtt_ns)
    }

    /// Measured drain rate, bytes per second (NaN: not measured yet).
    pub fn drain_bytes_per_s(&self) -> f64 {
        f64::from_bits(self.drain_bits.load(Ordering::Relaxed))
    }
}

fn us(a: &AtomicU64) -> f64 {
    match a.load(Ordering::Relaxed) {
        0 => f64::NAN,
        ns => ns as f64 / 1e3,
    }
}

/// The target-wide congestion-control settings: the algorithm with its current parameters
/// (`None`: pacing off) and a generation counter bumped on every accepted change.
#[derive(Debug)]
pub struct CcState {
    algorithm: Mutex<Option<Algorithm>>,
    generation: AtomicU64,
}

impl CcState {
    /// From the configuration (`None`: pacing off); refuses an unknown algorithm or parameter.
    pub fn new(spec: Option<&CcSpec>) -> Result<CcState, CcError> {
        let algorithm = spec.map(CcSpec::build).transpose()?;
        Ok(CcState {
            algorithm: Mutex::new(algorithm),
            generation: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Algorithm>> {
        self.algorithm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The algorithm with its current parameters (`None`: pacing off).
    pub fn current(&self) -> Option<Algorithm> {
        self.lock().clone()
    }

    /// Bumped on every accepted change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Sets one parameter for every queue pair (pollers take it up within [`PARAM_CHECK`]).
    pub fn set(&self, param: &str, value: f64) -> Result<String, String> {
        let mut g = self.lock();
        let Some(a) = g.as_mut() else {
            return Err("pacing is off (cc.algorithm = \"off\"): no parameter to set".into());
        };
        let old = a.params().get(param).map_err(|e| e.to_string())?;
        a.set(param, value).map_err(|e| e.to_string())?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(format!("{} {param}: {old} -> {value}", a.name()))
    }

    /// The algorithm and every parameter with its value, range and meaning, one per line.
    pub fn show(&self) -> String {
        use std::fmt::Write as _;
        let g = self.lock();
        let Some(a) = g.as_ref() else {
            return "algorithm: off (no pacing)".into();
        };
        let mut s = format!("algorithm: {}\n", a.name());
        let p = a.params();
        for (spec, (_, v)) in p.specs().iter().zip(p.iter()) {
            let _ = writeln!(
                s,
                "  {:<18} {:>14} [{} .. {}]  {}",
                spec.name, v, spec.min, spec.max, spec.doc
            );
        }
        s.pop();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(algorithm: &str, params: &[(&str, f64)]) -> CcSpec {
        CcSpec {
            algorithm: algorithm.into(),
            params: params.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn names_and_params_are_checked() {
        for n in ALGORITHMS {
            assert_eq!(spec(n, &[]).build().unwrap().name(), *n);
        }
        let e = spec("cubic", &[]).build().unwrap_err();
        assert!(e.to_string().contains("unknown algorithm `cubic`"), "{e}");
        let e = spec("fixed", &[("speed", 1.0)]).build().unwrap_err();
        assert!(e.to_string().contains("unknown parameter `speed`"), "{e}");
        let e = spec("fixed", &[("rate_mbps", 0.0)]).build().unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let a = spec("fixed", &[("rate_mbps", 800.0)]).build().unwrap();
        assert_eq!(a.params().get("rate_mbps"), Ok(800.0));
    }

    #[test]
    fn fixed_pacer_holds_its_rate_and_adopts_changes() {
        let a = spec("fixed", &[("rate_mbps", 800.0)]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        assert_eq!(p.rate_bytes_per_s(), 100e6);
        // 128 KiB transfers at 100 MB/s: after the initial half bucket, one per 1.31 ms.
        let len = 128 << 10;
        let mut now = Nanos::ZERO;
        let mut sent = 0u64;
        while now < Nanos::from_ms(1000) {
            match p.readiness(now, len) {
                Readiness::Now => {
                    p.on_sent(now, len, Dir::Out);
                    p.on_acked(now, len, Dir::Out);
                    sent += len;
                }
                Readiness::At(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        let rate = (sent - BURST_BYTES / 2) as f64 / now.as_secs_f64();
        assert!((rate / 100e6 - 1.0).abs() < 0.01, "{rate}");
        let mut b = a.clone();
        b.set("rate_mbps", 1600.0).unwrap();
        p.adopt(&b);
        p.poll_timers(now);
        assert_eq!(p.rate_bytes_per_s(), 200e6);
    }

    #[test]
    fn probes_are_asked_for_the_report_and_measured() {
        let a = spec("fixed", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        assert_eq!(p.poll_probe(Nanos::from_ms(1)), None, "fixed asks for none");
        let seq = p.poll_probe(REPORT_PROBE_INTERVAL).expect("report probe");
        assert_eq!(p.next_timer(), Some(REPORT_PROBE_INTERVAL + PROBE_TIMEOUT));
        p.on_probe_answer(
            1,
            REPORT_PROBE_INTERVAL + Nanos(40_000),
            seq,
            REPORT_PROBE_INTERVAL,
        );
        let s = QueueStats::default();
        assert!(s.rtt_us().is_nan() && s.rate_bytes_per_s().is_nan());
        p.publish(&s);
        assert_eq!(s.rtt_us(), 40.0);
        assert_eq!(s.probes.load(Ordering::Relaxed), 1);
        assert_eq!(p.next_timer(), None);
    }

    #[test]
    fn rtt_aimd_slows_down_when_the_rtt_grows() {
        // The daemon's rtt-aimd, at its host-clock defaults: a 1 ms path, then 20 ms.
        let a = spec("rtt-aimd", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        let mut now = Nanos::ZERO;
        let mut run = |p: &mut QpPacer, rtt: Nanos, n: usize| {
            for _ in 0..n {
                p.on_sent(now, 4096, Dir::Out);
                let seq = p.poll_probe(now);
                // The transfer completes first, then the probe posted behind it.
                p.on_acked(now + rtt, 4096, Dir::Out);
                if let Some(seq) = seq {
                    p.on_probe_answer(1, now + rtt, seq, now);
                }
                now = now + rtt + Nanos::from_us(10);
            }
        };
        run(&mut p, Nanos::from_ms(1), 300);
        let fast = p.rate_bytes_per_s();
        run(&mut p, Nanos::from_ms(20), 100);
        let slow = p.rate_bytes_per_s();
        assert!(slow < fast / 2.0, "{fast} -> {slow}");
    }

    #[test]
    fn a_probe_that_could_not_be_posted_goes_again_at_the_next_visit() {
        let a = spec("fixed", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        let t0 = REPORT_PROBE_INTERVAL;
        let s0 = p.poll_probe(t0).expect("first probe");
        assert_eq!(p.poll_probe(t0 + Nanos(1)), None, "one in flight");
        // The send queue was full: the probe never left.
        p.probe_unsent(s0);
        let s1 = p.poll_probe(t0 + Nanos(2)).expect("wanted again at once");
        assert_ne!(s0, s1);
        p.on_probe_answer(1, t0 + Nanos::from_us(300), s1, t0 + Nanos(2));
        let s = QueueStats::default();
        p.publish(&s);
        assert_eq!(s.probes_lost.load(Ordering::Relaxed), 0);
        assert!((s.raw_rtt_us() - 300.0).abs() < 0.01, "{}", s.raw_rtt_us());
    }

    #[test]
    fn a_probe_waits_for_the_queue_pair_own_data_and_a_paced_qp_keeps_its_raw_rtt() {
        let a = spec("fixed", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        // `fixed` asks for no probe: the report's come every REPORT_PROBE_INTERVAL.
        let t0 = REPORT_PROBE_INTERVAL;
        assert_eq!(p.poll_probe(t0 - Nanos(1)), None);
        let s0 = p.poll_probe(t0).expect("first probe");
        p.on_probe_answer(1, t0 + Nanos::from_us(300), s0, t0);
        // 8 x 128 KiB posted: 1 MiB ahead, the next probe waits.
        let t = t0 + REPORT_PROBE_INTERVAL;
        for _ in 0..8 {
            p.on_sent(t, 128 << 10, Dir::Out);
        }
        assert_eq!(p.poll_probe(t), None);
        assert_eq!(p.poll_probe(t + Nanos::from_ms(19)), None);
        // Held for max_defer (20 ms): it goes behind the 1 MiB, and its sample is not reduced
        // (the QP posts faster than it drains). They drain at 10 MB/s, one every 13.1 ms.
        let forced = p.poll_probe(t + Nanos::from_ms(20)).expect("forced");
        let gap = Nanos::from_secs_f64((128 << 10) as f64 / 10e6);
        let mut now = t + Nanos::from_us(300) + gap;
        for _ in 0..8 {
            p.on_acked(now, 128 << 10, Dir::Out);
            now = now + gap;
        }
        p.on_probe_answer(1, now - gap, forced, t + Nanos::from_ms(20));
        let s = QueueStats::default();
        p.publish(&s);
        assert_eq!(s.raw_rtt_us(), s.net_rtt_us());
        assert_eq!(s.probes_forced.load(Ordering::Relaxed), 1);
        // Later, with 64 KiB ahead (a last transfer of that size), the probe goes at once.
        let now = now + REPORT_PROBE_INTERVAL;
        p.on_sent(now, 64 << 10, Dir::Out);
        let seq = p.poll_probe(now).expect("64 KiB ahead: sent");
        // It completes behind the 64 KiB (6.55 ms at the drain rate) and a 300 us path. The
        // QP is paced (`fixed` has a rate): its sample keeps the raw RTT, since bytes ahead of
        // a paced QP's probe are on their way or queued by a rate above the path's
        // (`raidline_cc::netrtt`).
        let done = now + Nanos::from_secs_f64((64 << 10) as f64 / 10e6) + Nanos::from_us(300);
        p.on_acked(done - Nanos::from_us(1), 64 << 10, Dir::Out);
        p.on_probe_answer(1, done, seq, now);
        let s = QueueStats::default();
        p.publish(&s);
        assert!((s.raw_rtt_us() - 6853.6).abs() < 1.0, "{}", s.raw_rtt_us());
        assert_eq!(s.net_rtt_us(), s.raw_rtt_us());
        assert!((s.drain_bytes_per_s() / 10e6 - 1.0).abs() < 0.01);
        assert_eq!(s.probe_ahead_bytes.load(Ordering::Relaxed), 64 << 10);
        assert_eq!(s.probes_forced.load(Ordering::Relaxed), 1);
        assert!((s.base_rtt_ns.load(Ordering::Relaxed) as f64 / 1e3 - 300.0).abs() < 20.0);
    }

    #[test]
    fn a_paced_probe_behind_rdma_reads_has_their_serialization_taken_off() {
        // A paced queue pair fetching 128 KiB host writes: the host sends each read's data at
        // 10 MB/s (13.1 ms), the path is 300 us.
        let a = spec("fixed", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        let len = 128 << 10;
        let gap = Nanos::from_secs_f64(len as f64 / 10e6);
        let t0 = Nanos::from_ms(1);
        p.on_sent(t0, len, Dir::In);
        p.on_sent(t0, len, Dir::In);
        p.on_acked(t0 + gap + Nanos::from_us(300), len, Dir::In);
        p.on_acked(t0 + gap + gap + Nanos::from_us(300), len, Dir::In);
        // Two more reads in flight (256 KiB): the report's probe is not held back for them.
        let t = REPORT_PROBE_INTERVAL;
        p.on_sent(t, len, Dir::In);
        p.on_sent(t, len, Dir::In);
        let seq = p.poll_probe(t).expect("reads do not hold the probe back");
        let done = t + gap + gap + Nanos::from_us(300);
        p.on_acked(t + gap + Nanos::from_us(300), len, Dir::In);
        p.on_acked(done - Nanos(1), len, Dir::In);
        p.on_probe_answer(1, done, seq, t);
        let s = QueueStats::default();
        p.publish(&s);
        assert!(s.raw_rtt_us() > 26_000.0, "{}", s.raw_rtt_us());
        assert!((s.net_rtt_us() - 300.0).abs() < 20.0, "{}", s.net_rtt_us());
        assert_eq!(s.probes_forced.load(Ordering::Relaxed), 0);
        assert_eq!(s.probe_ahead_bytes.load(Ordering::Relaxed), 2 * len);
    }

    #[test]
    fn the_pollers_posting_time_is_not_the_paths() {
        // The poller's posting clock reads 1 ms when the report's probe goes; it then spends 3
        // ms inside post calls (rxe moves a 128 KiB READ inside the call in the lab).
        let a = spec("fixed", &[]).build().unwrap();
        let mut p = QpPacer::new(&a, Nanos::ZERO);
        let t = REPORT_PROBE_INTERVAL;
        let seq = p.poll_probe(t).expect("report probe");
        p.probe_sent(Nanos::from_ms(1));
        assert_eq!(p.probe_posting(), Nanos::from_ms(1));
        // At the 5 ms timeout the probe is not late: 3 ms of it were the poller's.
        p.poll_timers_posting(t + PROBE_TIMEOUT, Nanos::from_ms(4));
        assert_eq!(
            p.next_timer(),
            Some(t + Nanos::from_ms(8)),
            "deadline moved by 3 ms"
        );
        let s = QueueStats::default();
        p.publish(&s);
        assert_eq!(s.probes_lost.load(Ordering::Relaxed), 0);
        // Answered at 5.3 ms, 5 ms of posting since: the path is the 300 us left.
        p.on_probe_answer_local(1, t + Nanos::from_us(5300), seq, t, Nanos::from_ms(5));
        p.publish(&s);
        assert!((s.raw_rtt_us() - 5300.0).abs() < 0.01, "{}", s.raw_rtt_us());
        assert!((s.net_rtt_us() - 300.0).abs() < 0.01, "{}", s.net_rtt_us());
        // The next probe with no posting since is late at its timeout.
        let t = t + REPORT_PROBE_INTERVAL;
        p.poll_probe(t).expect("report probe");
        p.probe_sent(Nanos::from_ms(6));
        p.poll_timers_posting(t + PROBE_TIMEOUT, Nanos::from_ms(6));
        p.publish(&s);
        assert_eq!(s.probes_lost.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn state_sets_checks_and_shows() {
        let s = CcState::new(Some(&spec("fixed", &[]))).unwrap();
        assert_eq!(s.generation(), 0);
        let m = s.set("rate_mbps", 1600.0).unwrap();
        assert_eq!(m, "fixed rate_mbps: 1000 -> 1600");
        assert_eq!(s.generation(), 1);
        let e = s.set("rate_mbps", -1.0).unwrap_err();
        assert!(e.contains("outside"), "{e}");
        let e = s.set("beta", 0.5).unwrap_err();
        assert!(
            e.contains("unknown parameter `beta` for algorithm `fixed`"),
            "{e}"
        );
        assert_eq!(s.generation(), 1, "refusals change nothing");
        assert!(s.show().contains("rate_mbps"), "{}", s.show());
        let off = CcState::new(None).unwrap();
        assert!(off
            .set("rate_mbps", 1.0)
            .unwrap_err()
            .contains("pacing is off"));
        assert!(off.current().is_none());
    }
}
