//! The per-QP congestion controller that a runtime drives: algorithm state + pacer + prober.
//!
//! One [`QpController`] per queue pair (or simulated flow). It is the only place where an
//! algorithm's [`Decision`] is applied: the rate and window go to the [`Pacer`], a probe request
//! to the [`Prober`], the timer is remembered. Like its parts it has no clock — every call takes
//! `now` — so the live target's pollers and the simulator run the same code.
//!
//! Runtime loop, in order: [`QpController::start`]; before each packet [`QpController::readiness`],
//! after it [`QpController::on_sent`]; [`QpController::poll_probe`] for a probe to send (then arm
//! a wake-up at [`QpController::probe_deadline`]); feed completions, NACKs, CNPs and probe answers
//! through [`QpController::handle`] / [`QpController::on_probe_answer`]; at or after
//! [`QpController::timer`] or the probe deadline call [`QpController::poll_timers`]. Each of these
//! returns [`Changes`], which says whether the send schedule or the timer moved.

use crate::algo::{CongestionControl, Decision, Event, RemoteStamps};
use crate::pacer::{Pacer, Readiness};
use crate::probe::{ProbeSeq, Prober};
use crate::units::{Nanos, Rate};

/// What moved after an input, so the runtime can reschedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Rate or window changed: the next send time must be recomputed.
    pub schedule: bool,
    /// The algorithm's timer changed (see [`QpController::timer`]).
    pub timer: bool,
    /// A probe is wanted and none is in flight: call [`QpController::poll_probe`].
    pub probe: bool,
}

impl Changes {
    fn merge(self, other: Changes) -> Changes {
        Changes {
            schedule: self.schedule || other.schedule,
            timer: self.timer || other.timer,
            probe: self.probe || other.probe,
        }
    }
}

/// Static settings of the runtime side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QpConfig {
    /// The QP's link rate.
    pub line_rate: Rate,
    /// Pacer bucket depth, bytes.
    pub burst: u64,
    /// Bytes the bucket holds at start (one packet lets the first packet go at once).
    pub initial: u64,
    /// Tokens earned while no packet waits fill the bucket to at most this, or to
    /// `idle_time` at the rate (see [`Pacer`]'s idle bank); `burst` turns the rule off.
    pub idle_burst: u64,
    /// See `idle_burst`.
    pub idle_time: Nanos,
    /// The bucket holds at least this long at the rate (see [`Pacer::with_burst_time`]; zero:
    /// `burst` alone).
    pub burst_time: Nanos,
    /// First probe timeout (reference: 300 us).
    pub probe_timeout: Nanos,
    /// Largest probe timeout after back-off.
    pub max_probe_timeout: Nanos,
    /// Pacer dither in `[0, 1]` (see [`Pacer`]; [`DEFAULT_JITTER`] in the simulator, 0: off).
    pub jitter: f64,
    /// Seed of the dither sequence; mixed with the start time, so QPs that share a seed but not
    /// a start nanosecond still dither differently.
    pub seed: u64,
    /// The probes ride a reliable connection (an RC queue pair): a probe past its timeout is
    /// late, not lost, and its answer still counts ([`Prober::reliable`]).
    pub reliable: bool,
}

/// The pacer dither the simulator's results are measured with (`cc/README.md`).
pub const DEFAULT_JITTER: f64 = 0.5;

/// Algorithm state, pacer and prober of one QP.
#[derive(Clone, Debug)]
pub struct QpController<S> {
    state: S,
    decision: Decision,
    pacer: Pacer,
    prober: Prober,
}

impl<S: Copy + Default + std::fmt::Debug> QpController<S> {
    /// A started QP: the algorithm has seen [`Event::FlowStart`] at `now`.
    pub fn start<A: CongestionControl<State = S>>(
        algo: &A,
        now: Nanos,
        cfg: &QpConfig,
    ) -> QpController<S> {
        let mut state = S::default();
        let decision = algo.on_event(
            &mut state,
            now,
            Event::FlowStart {
                line_rate: cfg.line_rate,
            },
        );
        let seed = cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ now.0;
        let mut pacer = Pacer::new(now, cfg.line_rate, cfg.burst, cfg.initial)
            .with_idle_burst(cfg.idle_burst, cfg.idle_time)
            .with_burst_time(cfg.burst_time)
            .with_jitter(cfg.jitter, seed);
        pacer.apply(now, &decision);
        let mut prober = if cfg.reliable {
            Prober::reliable(cfg.probe_timeout, cfg.max_probe_timeout)
        } else {
            Prober::new(cfg.probe_timeout, cfg.max_probe_timeout)
        };
        if decision.probe {
            prober.request();
        }
        QpController {
            state,
            decision,
            pacer,
            prober,
        }
    }

    /// Deliver one event to the algorithm and apply its decision.
    pub fn handle<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        event: Event,
    ) -> Changes {
        let d = algo.on_event(&mut self.state, now, event);
        self.pacer.apply(now, &d);
        let changes = Changes {
            schedule: d.rate != self.decision.rate || d.window != self.decision.window,
            timer: d.timer != self.decision.timer,
            probe: false,
        };
        self.decision = d;
        if d.probe {
            self.prober.request();
        }
        changes.merge(Changes {
            probe: self.wants_probe(),
            ..Changes::default()
        })
    }

    /// Whether a packet of `len` bytes may leave now (see [`Readiness`]).
    pub fn readiness(&mut self, now: Nanos, len: u64) -> Readiness {
        self.pacer.readiness(now, len)
    }

    /// A packet of `len` bytes left at `now`: charge the pacer and tell the algorithm.
    pub fn on_sent<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        len: u64,
    ) -> Changes {
        self.pacer.on_sent(now, len);
        self.handle(algo, now, Event::Sent { bytes: len })
    }

    /// `len` bytes were acknowledged: frees window (the ACK event, if the algorithm wants it, is
    /// delivered separately through [`QpController::handle`]).
    pub fn on_acked(&mut self, len: u64) {
        self.pacer.on_acked(len);
    }

    /// Go-back-N rewound the QP: nothing is in flight any more.
    pub fn on_rewind(&mut self) {
        self.pacer.reset_in_flight();
    }

    /// The probe to send now, if one is wanted and none is in flight.
    pub fn poll_probe(&mut self, now: Nanos) -> Option<ProbeSeq> {
        self.prober.poll_send(now)
    }

    /// Ask for a probe whatever the algorithm wants (a runtime measuring RTT for its own
    /// reports, e.g. the target's status); it goes out through [`QpController::poll_probe`]
    /// like any other, and its answer reaches the algorithm like any other.
    pub fn request_probe(&mut self) {
        self.prober.request();
    }

    /// Lowest probe RTT seen so far.
    pub fn min_rtt(&self) -> Option<Nanos> {
        self.prober.min_rtt()
    }

    /// When the probe in flight times out.
    pub fn probe_deadline(&self) -> Option<Nanos> {
        self.prober.deadline()
    }

    /// A probe answer arrived (stale answers change nothing).
    pub fn on_probe_answer<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        seq: ProbeSeq,
        remote: Option<RemoteStamps>,
    ) -> Changes {
        self.answer(algo, now, seq, remote, Nanos::ZERO)
    }

    /// A probe answer whose RTT is taken `drained` shorter: the time the QP's own data queued
    /// ahead of the probe needed to drain ([`crate::netrtt`]), so the algorithm sees the net
    /// RTT. Stale answers change nothing.
    pub fn on_probe_answer_net<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        seq: ProbeSeq,
        drained: Nanos,
    ) -> Changes {
        self.answer(algo, now, seq, None, drained)
    }

    /// A probe answer, its RTT taken `drained` shorter (at least 1 ns) when that is not zero.
    fn answer<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        seq: ProbeSeq,
        remote: Option<RemoteStamps>,
        drained: Nanos,
    ) -> Changes {
        match self.prober.on_response(now, seq, remote) {
            Some(Event::Rtt { rtt, remote }) if drained > Nanos::ZERO => {
                let rtt = Nanos(rtt.saturating_sub(drained).0.max(1));
                self.handle(algo, now, Event::Rtt { rtt, remote })
            }
            Some(ev) => self.handle(algo, now, ev),
            None => Changes {
                probe: self.wants_probe(),
                ..Changes::default()
            },
        }
    }

    /// The probe `seq` from [`QpController::poll_probe`] could not be posted: it goes again
    /// at the next [`QpController::poll_probe`] (on a reliable connection no timeout would
    /// ever retry it).
    pub fn probe_unsent(&mut self, seq: ProbeSeq) {
        self.prober.unsent(seq);
    }

    /// Whether a probe is wanted and none is in flight ([`QpController::poll_probe`] would
    /// hand one out).
    pub fn probe_wanted(&self) -> bool {
        self.wants_probe()
    }

    /// Fire whatever is due at `now`: the algorithm's timer and the probe timeout.
    pub fn poll_timers<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
    ) -> Changes {
        self.poll_timers_excused(algo, now, Nanos::ZERO)
    }

    /// [`QpController::poll_timers`] where `excused` of the outstanding probe's time is known
    /// not to be the path's ([`Prober::poll_timeout_excused`]).
    pub fn poll_timers_excused<A: CongestionControl<State = S>>(
        &mut self,
        algo: &A,
        now: Nanos,
        excused: Nanos,
    ) -> Changes {
        let mut changes = Changes::default();
        if let Some(ev) = self.prober.poll_timeout_excused(now, excused) {
            changes = changes.merge(self.handle(algo, now, ev));
        }
        if self.decision.timer.is_some_and(|t| t <= now) {
            self.decision.timer = None;
            changes = changes.merge(self.handle(algo, now, Event::Timer));
            changes.timer = true;
        }
        changes
    }

    /// When the algorithm wants [`Event::Timer`].
    pub fn timer(&self) -> Option<Nanos> {
        self.decision.timer
    }

    /// The last decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The algorithm's current rate (for metrics).
    pub fn rate<A: CongestionControl<State = S>>(&self, algo: &A) -> Rate {
        algo.current_rate(&self.state)
    }

    /// Probes declared lost so far.
    pub fn probes_lost(&self) -> u64 {
        self.prober.lost()
    }

    fn wants_probe(&self) -> bool {
        self.prober.ready_to_send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::{Dcqcn, RttAimd};

    fn cfg() -> QpConfig {
        QpConfig {
            line_rate: Rate::from_gbps(100.0),
            burst: 8320,
            initial: 4160,
            idle_burst: 8320,
            idle_time: Nanos::ZERO,
            burst_time: Nanos::ZERO,
            probe_timeout: Nanos::from_us(300),
            max_probe_timeout: Nanos::from_us(19_200),
            jitter: 0.0,
            seed: 0,
            reliable: false,
        }
    }

    #[test]
    fn rtt_aimd_paces_probes_and_reacts_to_a_queue() {
        let a = RttAimd::ctcc();
        let mut q = QpController::start(&a, Nanos::ZERO, &cfg());
        // the first packet goes at once, then the pacer holds the floor rate (6.1 Mb/s)
        assert_eq!(q.readiness(Nanos::ZERO, 4160), Readiness::Now);
        let ch = q.on_sent(&a, Nanos::ZERO, 4160);
        assert!(ch.probe, "the start asked for a probe");
        let seq = q.poll_probe(Nanos::ZERO).unwrap();
        assert_eq!(q.probe_deadline(), Some(Nanos::from_us(300)));
        let Readiness::At(next) = q.readiness(Nanos::ZERO, 4160) else {
            panic!("paced")
        };
        let expect = 4160.0 * 8.0 / (100e9 / 16384.0);
        assert!((next.as_secs_f64() - expect).abs() < 1e-6, "{next}");
        // answer at 5 us: base 5 us, below target -> increase, schedule moves
        let ch = q.on_probe_answer(&a, Nanos::from_us(5), seq, None);
        assert!(ch.schedule);
        let r1 = q.rate(&a);
        assert!(r1 > Rate::from_bps_f64(100e9 / 16384.0));
        // a stale answer changes nothing
        assert_eq!(
            q.on_probe_answer(&a, Nanos::from_us(6), seq, None),
            Changes::default()
        );
        // a lost probe is reported at its deadline and retried
        for i in 0..3 {
            q.on_sent(&a, Nanos::from_ms(10 + i), 4160);
        }
        let seq2 = q.poll_probe(Nanos::from_ms(13)).unwrap();
        assert_ne!(seq, seq2);
        let ch = q.poll_timers(&a, Nanos::from_ms(13) + Nanos::from_us(300));
        assert!(ch.probe && q.probes_lost() == 1);
    }

    #[test]
    fn a_net_answer_reaches_the_algorithm_shortened() {
        let a = RttAimd::ctcc();
        // Three QPs get a 10 us first answer (their base); then a probe that took 900 us, of
        // which 890 us was the QP's own queue: told net, the law increases as on a 10 us
        // answer; told raw, it decreases.
        let answer = |rtt2: u64, drained: u64| {
            let mut q = QpController::start(&a, Nanos::ZERO, &cfg());
            assert!(q.probe_wanted());
            let s1 = q.poll_probe(Nanos::ZERO).unwrap();
            assert!(!q.probe_wanted(), "one in flight");
            q.on_probe_answer_net(&a, Nanos::from_us(10), s1, Nanos::ZERO);
            q.request_probe();
            let t = Nanos::from_us(100);
            let s2 = q.poll_probe(t).unwrap();
            q.on_probe_answer_net(&a, t + Nanos::from_us(rtt2), s2, Nanos::from_us(drained));
            // A stale answer changes nothing.
            assert_eq!(
                q.on_probe_answer_net(&a, t + Nanos::from_us(999), s2, Nanos::ZERO),
                Changes::default()
            );
            q.rate(&a)
        };
        let net = answer(900, 890);
        assert_eq!(net, answer(10, 0));
        assert!(net > answer(900, 0));
    }

    #[test]
    fn dcqcn_timer_fires_through_poll_timers() {
        let a = Dcqcn::new();
        let mut q = QpController::start(&a, Nanos::ZERO, &cfg());
        assert_eq!(q.timer(), Some(Nanos::from_us(300)));
        q.handle(&a, Nanos::ZERO, Event::Cnp);
        assert_eq!(q.rate(&a), Rate::from_gbps(50.0));
        assert_eq!(q.poll_timers(&a, Nanos::from_us(299)), Changes::default());
        let ch = q.poll_timers(&a, Nanos::from_us(300));
        assert!(ch.timer && ch.schedule);
        assert_eq!(q.rate(&a), Rate::from_gbps(75.0));
        assert_eq!(q.timer(), Some(Nanos::from_us(600)));
    }
}
