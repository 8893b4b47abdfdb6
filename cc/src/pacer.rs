//! Per-QP pacer: a token bucket at the algorithm's rate plus an optional in-flight window.
//!
//! The pacer has no clock: every call takes `now`, so it runs the same under the simulator's
//! virtual time, a test, or the target's poller. Tokens are bytes; they accrue at `rate` up to
//! `burst` bytes (never less than one packet, so any packet can eventually go). A packet may leave
//! when the bucket holds at least its size and the window, if any, has room; leaving takes its
//! size out of the bucket and adds it to the bytes in flight until acknowledged.
//!
//! Dither (`jitter` j in `[0, 1]`, off at 0): packet k of `len_k` bytes is charged
//! `len_k + 2j·(m_k·u_k − m_{k−1}·u_{k−1})` tokens, `u_k` uniform in `[−1/2, 1/2)` from a
//! per-pacer seeded generator and `m_k = min(len_k, burst)` its dither amplitude. So a packet no
//! larger than the bucket leaves up to `j` packet gaps early or late around the regular
//! schedule, while the charges telescope: over packets a..b the bytes charged differ from the
//! bytes sent by at most `j·(m_{a−1} + m_b)` (`m_{a−1}` is `m_a` for the first packet), so the
//! long-run rate is exact, whatever the sizes. The amplitude stops at the bucket because a
//! packet larger than the bucket waits until the tokens reach its size: dithered by its own
//! size (`2j·len`), its charge could be near zero and leave up to its whole size behind for the
//! next packets to take at once: eight buckets for a 512 KiB transfer through a 64 KiB
//! bucket. Bounded by the bucket, what one charge leaves behind is at most `2j·burst` (one
//! bucket at the daemon's `j = 0.5`). For equal packets within the bucket the charges are
//! those of `len·(1 + 2j·(u_k − u_{k−1}))`, the same draws (to floating-point rounding). With
//! dither on, the bucket also starts with a uniformly random fraction of `initial` (a random
//! first-packet phase).
//! Why: thousands of paced flows on a few NICs otherwise keep the relative phases they started
//! with, and a delay-based law that answers each flow's probe phase-locks them into bursts (seen
//! in `raidline-ccsim`, see `cc/README.md`); with dither every probe samples the queue at a fresh
//! phase.
//!
//! Idle bank (`idle_burst`, off when equal to `burst`): tokens fill the whole bucket only while
//! a packet waits for them (the last [`Pacer::readiness`] said not yet, and nothing left
//! since). While nothing waits, tokens earned take the bucket to at most `idle_burst`, or
//! `idle_time` at the current rate if that is more (never above `burst`), whatever the size of
//! the packet asking: a larger one waits, and the bucket then fills for it. So a fast flow
//! whose transfers come with gaps still sends each whole, and a slow one restarts gently. A
//! backlogged flow whose sender came late (a busy poller) keeps what it earned meanwhile;
//! a flow that had nothing to send banks no burst for when it restarts. Without it, the
//! lab's queue pairs, connected and idle before the load, each released a full 256 KiB bucket
//! at the load's first transfers: 200 ms of its 40 Mbit/s bottleneck at once (TCP restarts
//! after idle for the same reason, RFC 7661 and Linux's `tcp_slow_start_after_idle`).
//!
//! Invariants: `−2j·min(max packet, burst) ≤ tokens ≤ max(burst, packet) + 2j·burst`;
//! `in_flight` only counts bytes sent and not yet acknowledged or declared lost; the same seed
//! and inputs give the same schedule.

use crate::algo::Decision;
use crate::units::{Nanos, Rate};

/// Whether a packet of some size may leave now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Send now.
    Now,
    /// Tokens suffice at this time (assuming the rate does not change).
    At(Nanos),
    /// The window is full: wait for acknowledgements.
    WindowFull,
    /// The rate is zero: nothing will go until it changes.
    Stopped,
}

/// Token bucket + window for one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct Pacer {
    rate: Rate,
    window: Option<u64>,
    burst: u64,
    tokens: f64,
    last: Nanos,
    in_flight: u64,
    jitter: f64,
    rng: u64,
    /// The previous packet's dither draw and amplitude (`u_{k−1}`, `m_{k−1}`); the amplitude is
    /// `None` until a packet has left, and the first packet then takes its own.
    prev_u: f64,
    prev_m: Option<f64>,
    /// Tokens earned while nothing waits fill the bucket to at most this, or to `idle_time`
    /// at the rate.
    idle_burst: u64,
    idle_time: Nanos,
    /// The bucket holds at least this long at the rate ([`Pacer::with_burst_time`]).
    burst_time: Nanos,
    /// A packet waits for tokens: the last readiness was not `Now`, and nothing left since.
    waiting: bool,
}

impl Pacer {
    /// A pacer at `now` whose bucket holds `initial` bytes (at most `burst`): a new flow may send
    /// its first packet at once without also bursting a whole bucket.
    pub fn new(now: Nanos, rate: Rate, burst: u64, initial: u64) -> Pacer {
        Pacer {
            rate,
            window: None,
            burst,
            tokens: initial.min(burst) as f64,
            last: now,
            in_flight: 0,
            jitter: 0.0,
            rng: 0,
            prev_u: 0.0,
            prev_m: None,
            idle_burst: burst,
            idle_time: Nanos::ZERO,
            burst_time: Nanos::ZERO,
            waiting: false,
        }
    }

    /// Bank at most `idle_burst` bytes, or `idle_time` at the rate, while nothing waits (see
    /// the module header; at most `burst`, which is the default: no idle rule).
    pub fn with_idle_burst(mut self, idle_burst: u64, idle_time: Nanos) -> Pacer {
        self.idle_burst = idle_burst.min(self.burst);
        self.idle_time = idle_time;
        self
    }

    /// The bucket holds `burst` bytes or `burst_time` at the rate, whichever is more (zero, the
    /// default: `burst` alone). A sender that comes late (a poller woken late) loses no more
    /// than what it earned beyond that: with a fixed bucket, a flow whose sender comes every
    /// `T` moves at most one bucket per `T`, whatever its rate.
    pub fn with_burst_time(mut self, burst_time: Nanos) -> Pacer {
        self.burst_time = burst_time;
        self
    }

    /// The bucket's depth now: `burst`, or `burst_time` at the rate if that is more.
    fn depth(&self) -> f64 {
        (self.burst as f64).max(self.burst_time.as_secs_f64() * self.rate.bps() / 8.0)
    }

    /// Turn dither on (see the module header): `jitter` is clamped to `[0, 1]`; `seed` picks the
    /// random sequence. The initial bucket becomes a random fraction of what it was.
    pub fn with_jitter(mut self, jitter: f64, seed: u64) -> Pacer {
        self.jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.rng = seed;
        if self.jitter > 0.0 {
            self.tokens *= self.unit();
            self.prev_u = self.unit() - 0.5;
        }
        self
    }

    /// SplitMix64 step mapped to `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Current rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Current window, if any.
    pub fn window(&self) -> Option<u64> {
        self.window
    }

    /// Bytes sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Apply an algorithm's decision: tokens earned so far are kept at the old rate.
    pub fn apply(&mut self, now: Nanos, decision: &Decision) {
        self.refill(now, 0);
        self.rate = decision.rate;
        self.window = decision.window;
    }

    /// When a packet of `len` bytes may leave.
    pub fn readiness(&mut self, now: Nanos, len: u64) -> Readiness {
        if let Some(w) = self.window {
            // One packet may always be in flight, so a window below a packet still makes progress.
            if self.in_flight > 0 && self.in_flight + len > w {
                return Readiness::WindowFull;
            }
        }
        self.refill(now, len);
        let need = len as f64 - self.tokens;
        if need <= 0.0 {
            return Readiness::Now;
        }
        self.waiting = true;
        if self.rate.0 == 0 {
            return Readiness::Stopped;
        }
        let wait = Nanos::from_secs_f64(need * 8.0 / self.rate.bps()).max(Nanos(1));
        Readiness::At(now + wait)
    }

    /// A packet of `len` bytes left at `now` (call after [`Readiness::Now`]).
    pub fn on_sent(&mut self, now: Nanos, len: u64) {
        self.refill(now, len);
        let (charge, swing) = if self.jitter > 0.0 {
            let u = self.unit() - 0.5;
            let m = len.min(self.burst) as f64;
            let pm = self.prev_m.unwrap_or(m);
            let d = 2.0 * self.jitter * (m * u - pm * self.prev_u);
            self.prev_u = u;
            self.prev_m = Some(m);
            (len as f64 + d, 2.0 * self.jitter * m.max(pm))
        } else {
            (len as f64, 0.0)
        };
        // never below what a full dither swing can owe, so a stalled flow cannot bank debt
        self.tokens = (self.tokens - charge).max(-swing);
        self.waiting = false;
        self.in_flight = self.in_flight.saturating_add(len);
    }

    /// `len` bytes were acknowledged, or are known lost and will be sent again.
    pub fn on_acked(&mut self, len: u64) {
        self.in_flight = self.in_flight.saturating_sub(len);
    }

    /// Forget everything in flight (go-back-N rewinds the flow).
    pub fn reset_in_flight(&mut self) {
        self.in_flight = 0;
    }

    /// Earns tokens since the last refill, up to the bucket (or `len`, a packet larger than
    /// the bucket; the idle bank instead while nothing waited); tokens already above that
    /// (left by a large packet's dithered charge, or banked while a packet waited) are kept,
    /// not clipped: clipping them at a rate change or a bare refill made a runtime whose
    /// packets exceed the bucket lose 7 % of its rate.
    fn refill(&mut self, now: Nanos, len: u64) {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let full = self.depth();
        let depth = if self.waiting || self.idle_burst >= self.burst {
            full.max(len as f64)
        } else {
            // not raised to `len`: a packet above the idle bank waits, and then it fills
            let at_rate = self.idle_time.as_secs_f64() * self.rate.bps() / 8.0;
            (self.idle_burst as f64).max(at_rate).min(full)
        };
        let cap = depth.max(self.tokens);
        self.tokens = (self.tokens + dt.as_secs_f64() * self.rate.bps() / 8.0).min(cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(rate: Rate, window: Option<u64>) -> Decision {
        Decision {
            rate,
            window,
            probe: false,
            timer: None,
        }
    }

    #[test]
    fn paces_at_rate_without_sleeping() {
        // 1 Gb/s, 1000-byte packets: one every 8 us.
        let mut p = Pacer::new(Nanos::ZERO, Rate::from_gbps(1.0), 1000, 1000);
        let mut now = Nanos::ZERO;
        let mut sent = 0;
        while now < Nanos::from_us(800) {
            match p.readiness(now, 1000) {
                Readiness::Now => {
                    p.on_sent(now, 1000);
                    p.on_acked(1000);
                    sent += 1;
                }
                Readiness::At(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(sent, 100, "800 us at 1 Gb/s = 100 packets of 1000 B");
        assert_eq!(now, Nanos::from_us(800));
        assert_eq!(p.readiness(now, 1000), Readiness::Now);
        p.on_sent(now, 1000);
        assert_eq!(p.readiness(now, 1000), Readiness::At(Nanos::from_us(808)));
    }

    /// Send `n` packets of 1000 B at 1 Gb/s (8 us each) as soon as allowed; the send times.
    fn schedule(mut p: Pacer, n: usize) -> Vec<Nanos> {
        let mut now = Nanos::ZERO;
        let mut times = Vec::new();
        while times.len() < n {
            match p.readiness(now, 1000) {
                Readiness::Now => {
                    p.on_sent(now, 1000);
                    p.on_acked(1000);
                    times.push(now);
                }
                Readiness::At(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        times
    }

    /// Packets larger than the bucket, dithered, with the algorithm's decision applied after
    /// each (as a runtime does): the long-run rate holds. `apply` refilled with the bucket as
    /// the cap and clipped the tokens a small dithered charge left: 93 % of the rate.
    #[test]
    fn packets_larger_than_the_bucket_keep_the_rate_through_apply() {
        let rate = Rate::from_mbps(800.0);
        let mut p = Pacer::new(Nanos::ZERO, rate, 32 << 10, 16 << 10).with_jitter(0.5, 7);
        let len = 128 << 10;
        let mut now = Nanos::ZERO;
        let mut sent = 0u64;
        while now < Nanos::from_ms(1000) {
            match p.readiness(now, len) {
                Readiness::Now => {
                    p.on_sent(now, len);
                    p.apply(now, &dec(rate, None));
                    p.on_acked(len);
                    sent += len;
                }
                Readiness::At(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        let got = sent as f64 / now.as_secs_f64();
        assert!((got / 100e6 - 1.0).abs() < 0.01, "{got}");
    }

    /// Waits for `len` to be ready from `now` on, sends it, and returns the time it left.
    fn send_when_ready(p: &mut Pacer, mut now: Nanos, len: u64) -> Nanos {
        loop {
            match p.readiness(now, len) {
                Readiness::Now => break,
                Readiness::At(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        p.on_sent(now, len);
        p.on_acked(len);
        now
    }

    /// A dithered transfer larger than the bucket leaves at most its dither amplitude, the
    /// bucket at j = 1/2, behind in tokens. Dithered by its own size, one 512 KiB transfer
    /// charged near zero left up to 512 KiB, and the next ones went at once: a burst of eight
    /// buckets (found in `e2e_iser`'s paced read test, where a read after a write's RDMA READ
    /// went through without waiting).
    #[test]
    fn a_transfer_larger_than_the_bucket_leaves_at_most_a_bucket_behind() {
        let rate = Rate::from_mbps(800.0);
        let (burst, big) = (64u64 << 10, 512u64 << 10);
        let mut worst = 0.0f64;
        for seed in 0..200 {
            let mut p = Pacer::new(Nanos::ZERO, rate, burst, burst).with_jitter(0.5, seed);
            let mut now = Nanos::ZERO;
            for _ in 0..20 {
                now = send_when_ready(&mut p, now, big);
                worst = worst.max(p.tokens);
            }
        }
        assert!(worst <= burst as f64 + 1.0, "{worst}");
        assert!(worst > 0.5 * burst as f64, "still dithered: {worst}");
    }

    /// Packets of mixed sizes, some above the bucket, dithered: the charges still telescope,
    /// so after every packet the bytes sent stay within three buckets of what the rate earned
    /// (the random initial bucket, the last charge's swing, the telescoped sum). Scaled by each
    /// packet's own size, the draws did not telescope over mixed sizes: the error was a random
    /// walk of 2j·len steps, hundreds of KiB after a few hundred packets.
    #[test]
    fn dither_keeps_the_rate_with_mixed_sizes() {
        let rate = Rate::from_mbps(800.0);
        let burst = 64u64 << 10;
        for seed in 1..=20 {
            let mut p = Pacer::new(Nanos::ZERO, rate, burst, burst).with_jitter(0.5, seed);
            let (mut now, mut sent, mut k, mut worst) = (Nanos::ZERO, 0u64, 0usize, 0.0f64);
            while now < Nanos::from_ms(1000) {
                let len = [4 << 10, 512 << 10, 16 << 10, 200 << 10][k % 4];
                now = send_when_ready(&mut p, now, len);
                sent += len;
                k += 1;
                // Bytes sent beyond what the rate earned by now, either way.
                let ahead = sent as f64 - now.as_secs_f64() * 100e6;
                worst = worst.max(ahead.abs());
            }
            assert!(worst <= 3.0 * burst as f64 + 1024.0, "seed {seed}: {worst}");
        }
    }

    #[test]
    fn dither_moves_each_packet_but_keeps_the_long_run_rate() {
        let new =
            |seed| Pacer::new(Nanos::ZERO, Rate::from_gbps(1.0), 1000, 1000).with_jitter(0.5, seed);
        let t = schedule(new(7), 10_001);
        // 10,000 gaps of 8 us on average: the charges telescope, so the end is off by less
        // than 2j = 1 packet time (8 us) plus the random first phase (at most one gap)
        let span = (t[10_000] - t[0]).as_secs_f64();
        assert!((span - 0.08).abs() < 16e-6, "{span}");
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]).as_us_f64()).collect();
        let (lo, hi) = gaps
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), g| (l.min(*g), h.max(*g)));
        assert!(lo < 3.0 && hi > 13.0 && hi <= 16.0 + 1e-3, "{lo} {hi}");
        // the first packet waits a random part of its gap; same seed, same schedule
        assert!(t[0] > Nanos::ZERO && t[0] < Nanos::from_us(8));
        assert_eq!(schedule(new(7), 100), t[..100].to_vec());
        assert_ne!(schedule(new(8), 100), t[..100].to_vec());
        // no dither: the regular schedule, first packet at once
        let plain = schedule(Pacer::new(Nanos::ZERO, Rate::from_gbps(1.0), 1000, 1000), 3);
        assert_eq!(
            plain,
            vec![Nanos::ZERO, Nanos::from_us(8), Nanos::from_us(16)]
        );
    }

    #[test]
    fn burst_is_bounded_and_rate_change_keeps_earned_tokens() {
        let mut p = Pacer::new(Nanos::ZERO, Rate::from_gbps(1.0), 2000, 2000);
        // idle for a long time: still only 2 packets back to back
        let now = Nanos::from_ms(10);
        for _ in 0..2 {
            assert_eq!(p.readiness(now, 1000), Readiness::Now);
            p.on_sent(now, 1000);
        }
        assert!(matches!(p.readiness(now, 1000), Readiness::At(_)));
        // earn 500 bytes at 1 Gb/s (4 us), then drop the rate to 0.5 Gb/s: 500 more bytes take 8 us
        let t = now + Nanos::from_us(4);
        p.apply(t, &dec(Rate::from_gbps(0.5), None));
        assert_eq!(p.readiness(t, 1000), Readiness::At(t + Nanos::from_us(8)));
        p.apply(t, &dec(Rate(0), None));
        assert_eq!(p.readiness(t, 1000), Readiness::Stopped);
    }

    #[test]
    fn window_limits_in_flight_but_one_packet_always_goes() {
        let mut p = Pacer::new(Nanos::ZERO, Rate::from_gbps(100.0), 1_000_000, 1_000_000);
        p.apply(Nanos::ZERO, &dec(Rate::from_gbps(100.0), Some(2500)));
        for _ in 0..2 {
            assert_eq!(p.readiness(Nanos::ZERO, 1000), Readiness::Now);
            p.on_sent(Nanos::ZERO, 1000);
        }
        assert_eq!(p.readiness(Nanos::ZERO, 1000), Readiness::WindowFull);
        p.on_acked(1000);
        assert_eq!(p.readiness(Nanos::ZERO, 1000), Readiness::Now);
        p.apply(Nanos::ZERO, &dec(Rate::from_gbps(100.0), Some(10)));
        p.reset_in_flight();
        assert_eq!(
            p.readiness(Nanos::ZERO, 1000),
            Readiness::Now,
            "sub-packet window"
        );
        p.on_sent(Nanos::ZERO, 1000);
        assert_eq!(p.readiness(Nanos::ZERO, 1000), Readiness::WindowFull);
    }

    /// An empty 256 KB bucket at `bps` with `burst_time`, whose first `len`-byte packet waits
    /// (so the whole bucket fills for it).
    fn waiting_at(bps: f64, burst_time: Nanos, len: u64) -> Pacer {
        let rate = Rate::from_bps_f64(bps);
        let mut p = Pacer::new(Nanos::ZERO, rate, 256_000, 0).with_burst_time(burst_time);
        p.apply(Nanos::ZERO, &dec(rate, None));
        assert!(matches!(p.readiness(Nanos::ZERO, len), Readiness::At(_)));
        p
    }

    #[test]
    fn a_fast_flow_bucket_holds_burst_time_at_its_rate() {
        // 40 MB/s (320 Mb/s), bucket 256 KB or 20 ms at the rate (800 KB): a sender that comes
        // 30 ms late to a waiting transfer finds 800 KB, not 256 KB.
        let mut p = waiting_at(320e6, Nanos::from_ms(20), 192_000);
        let late = Nanos::from_ms(30);
        for _ in 0..4 {
            assert_eq!(p.readiness(late, 192_000), Readiness::Now);
            p.on_sent(late, 192_000);
        }
        assert!(matches!(p.readiness(late, 192_000), Readiness::At(_)));
        // Without burst_time: one bucket.
        let mut q = waiting_at(320e6, Nanos::ZERO, 192_000);
        assert_eq!(q.readiness(late, 192_000), Readiness::Now);
        q.on_sent(late, 192_000);
        assert!(matches!(q.readiness(late, 192_000), Readiness::At(_)));
        // A slow flow's bucket is `burst`: 20 ms at 1 MB/s is 20 KB.
        let mut r = waiting_at(8e6, Nanos::from_ms(20), 256_000);
        let t = Nanos::from_ms(10_000);
        assert_eq!(r.readiness(t, 256_000), Readiness::Now);
        r.on_sent(t, 256_000);
        assert!(matches!(r.readiness(t, 1_000), Readiness::At(_)));
    }

    #[test]
    fn an_idle_flow_banks_only_its_idle_burst_a_waiting_one_the_whole_bucket() {
        // 8 Mb/s = 1 MB/s: 1000 bytes a millisecond; bucket 256 KB, idle bank 32 KB
        let rate = Rate::from_bps_f64(8e6);
        let mut p =
            Pacer::new(Nanos::ZERO, rate, 256_000, 32_000).with_idle_burst(32_000, Nanos::ZERO);
        p.apply(Nanos::ZERO, &dec(rate, None));
        // a second of nothing to send: the bucket holds the idle bank, not 256 KB
        let t = Nanos::from_ms(1000);
        assert_eq!(p.readiness(t, 32_000), Readiness::Now);
        assert_eq!(
            p.readiness(t, 64_000),
            Readiness::At(t + Nanos::from_ms(32))
        );
        // that 64 KB transfer now waits; the sender comes back 500 ms late (a busy poller):
        // everything earned meanwhile is kept, up to the whole bucket
        let late = t + Nanos::from_ms(500);
        assert_eq!(p.readiness(late, 64_000), Readiness::Now);
        p.on_sent(late, 64_000);
        assert_eq!(p.readiness(late, 256_000 - 64_000), Readiness::Now);
        p.on_sent(late, 256_000 - 64_000);
        // sent: nothing waits any more, so the next idle spell banks the idle burst again
        let t2 = late + Nanos::from_ms(1000);
        assert_eq!(p.readiness(t2, 32_000), Readiness::Now);
        assert!(matches!(p.readiness(t2, 33_000), Readiness::At(_)));
        // the default is no idle rule: the whole bucket fills while idle
        let mut q = Pacer::new(Nanos::ZERO, rate, 256_000, 32_000);
        q.apply(Nanos::ZERO, &dec(rate, None));
        assert_eq!(q.readiness(t, 256_000), Readiness::Now);
        // a large transfer first after an idle spell does not raise the idle bank: it waits
        // for its rest, then goes
        let mut b =
            Pacer::new(Nanos::ZERO, rate, 256_000, 32_000).with_idle_burst(32_000, Nanos::ZERO);
        b.apply(Nanos::ZERO, &dec(rate, None));
        assert_eq!(
            b.readiness(t, 128_000),
            Readiness::At(t + Nanos::from_ms(96))
        );
        assert_eq!(b.readiness(t + Nanos::from_ms(96), 128_000), Readiness::Now);
        // with an idle time, a fast flow banks that long at its rate: 10 ms at 80 Mb/s is
        // 100 KB, so a 100 KB transfer after a gap goes whole, a 101 KB one waits
        let fast = Rate::from_bps_f64(80e6);
        for (len, whole) in [(100_000, true), (101_000, false)] {
            let mut f = Pacer::new(Nanos::ZERO, fast, 256_000, 32_000)
                .with_idle_burst(32_000, Nanos::from_ms(10));
            f.apply(Nanos::ZERO, &dec(fast, None));
            assert_eq!(f.readiness(t, len) == Readiness::Now, whole, "{len}");
        }
    }
}
