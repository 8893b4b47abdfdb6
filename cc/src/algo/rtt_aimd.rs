//! `rtt-aimd`: RTT-target AIMD on a rate, in the CTCC family.
//!
//! Law (per RTT probe; `base` = lowest RTT seen, `dt` = time since the previous update):
//! - projected RTT `rtt_p = rtt + (rtt − rtt_prev)·k`, never below `base`, with
//!   `k = max((rtt − base)/(dt/2), horizon)`: CTCC's projection (`horizon` = 0), or at least
//!   `horizon` update intervals ahead — at large fan-in a flow acts only every few milliseconds,
//!   so the trend is extrapolated to its next chance to act;
//! - target `base + offset + scale/sqrt(rate in Gb/s)`, the scaled term capped at its value at
//!   the minimum rate and at `scale_cap_us` (so low-rate flows aim a little higher: fairness);
//! - `rtt_p ≥ target`: `rate *= 1 − cut`, stage back to 0, where CTCC's cut (`lin_span_us` = 0)
//!   is `beta·(rtt_p − target)/(rtt_p − base)` and the linear law's (`lin_span_us` = s > 0) is
//!   `beta·min(1, τ·(rtt_p − target)/s)` (beta per `s` of excess and per step time, at most
//!   beta);
//! - otherwise `stage = min(stage + 1, stage_max)`, `rate += min(rate·incr_cap, ai·stage)·f·τ·a`
//!   with `f = 1` (CTCC) or `min(1, (target − rtt_p)/s)` (linear law: small steps near the
//!   target, so the aggregate of thousands of flows settles instead of swinging ±3 % around it);
//! - time scaling (`step_time_us` T > 0, off in CTCC): `τ = min(dt/T, 4)`, so every step is a
//!   rate of change per unit time and the aggregate behaves the same whether a flow updates every
//!   5 µs (few flows) or every 2.5 ms (7,000 flows); with T = 0, `τ = 1` (CTCC: per update);
//! - empty-queue acceleration (`accel_us` A > 0, off in CTCC): `a = min(1 + t_idle/A, accel_max)`
//!   where `t_idle` is the time since the first of an unbroken run of samples with
//!   `rtt − base ≤ idle_us` (1 otherwise): one empty-queue sample is noise, a run of them after a
//!   departure is spare capacity that no RTT can measure, so the increase grows with how long it
//!   has lasted;
//! - responder utilisation (`np_util_th` U > 0, off in CTCC): when a probe answer carries the
//!   responder port's receive utilisation (a DOCA PCC notification point can report it in the
//!   answer's custom data; NVIDIA's RTT template sends its receive byte counter for the same test,
//!   `DOCA_PCC_NP_RX_RATE`, threshold 0.9) and it is below U, an increase gets the full
//!   `accel_max` boost at once: spare capacity is known, no need to wait for a run of empty-queue
//!   samples. Answers without it (a verbs responder, the live daemon) leave the law as above;
//! - NACK (out of sequence): halve; probe lost after `waited`: treated as an RTT of `waited`;
//! - RTT filter (`filter_us` W > 0, off in CTCC): the law's RTT is the lowest sample of the
//!   last W to 2W (Copa's "standing RTT"). A host clock's scheduling and interrupt delays only
//!   ever add to a sample and come and go between samples, while a standing queue raises every
//!   one (in the lab's two TCG guests, probes with nothing of their own queue pair ahead spread
//!   over 8–60 ms between p10 and p90). The cost is a later reaction to a queue that builds (up
//!   to 2W);
//! - application-limited cap (`app_window_us` A > 0, off in CTCC): an increase never takes the
//!   rate above `app_headroom` (2; 4 in the host-clock law) times what the flow sent over the last
//!   A to 2A (RFC 7661's idea for TCP's window; never below the rate it already has). A flow with
//!   little to send keeps its rate: without the cap, the lab's queue pairs probed an idle path for
//!   seconds, each answer below target raised their rates to 40–100 MB/s over a 5 MB/s bottleneck,
//!   and the first load after the idle spell filled the bottleneck's queue (0.7 s RTT,
//!   retransmissions). The window must hold several of the flow's transfers: a hold per update
//!   (usage since the previous answer) kept queue pairs at their floor, whose 16 KiB chunks leave
//!   less often than the answers come;
//! - cut from what was sent (`cut_headroom` h > 0, off everywhere by default; needs
//!   `app_window_us`): a cut starts from at most h times what the flow sent over the same window.
//!   A rate above what the path carried (the bottleneck, not the pacer, held the flow) is not
//!   cut where it binds until several cuts have brought it down; with h = 1 the first cut binds.
//!   At the lab's 40 Mbit/s bottleneck (2026-12-08, two runs): the tbf's queue median 4.1-4.8 ms
//!   against 6.5-18.2 without, its p99 43-48 against 46-50, Jain 0.998 against 0.94-0.99, for
//!   0.93 x off's throughput against 0.95. Off by default: a cut on a host-clock sample that
//!   carries no queue (the one guest's scheduling) binds at once as well, and uncongested (one
//!   guest, 3 rounds) it cost host writes: seqwrite-128k 0.77 / 0.91 / 0.88 x off round by round
//!   against the plain law's 0.95 / 1.28 / 0.89;
//! - `base` is never taken above `base_cap_us` (like Swift's configured base delay): a flow that
//!   starts while a queue stands would otherwise take the queue for the path and aim higher;
//! - rate matching (`match_gain` g > 0, off in CTCC): before the step above, with
//!   `slope = (rtt − rtt_prev)/dt` — the queue's growth rate, i.e. (arrivals − capacity)/capacity —
//!   `rate /= 1 + g·slope` (slope clamped to [−0.5, 2]). At large fan-in a flow acts only every few
//!   milliseconds; this lets each action remove the flow's share of the measured overload;
//! - optional slow start (`slow_start` = 1, off by default): until the first RTT more than
//!   `ss_margin_us` above base (the `ss_exit_samples`-th such update in a row: a single sample
//!   may be a host's hiccup), multiply the rate by `1 + ss_gain` per RTT, within the
//!   application-limited cap, and keep a probe in flight while the cap does not hold the rate
//!   (a flow held by it probes at the usual cadence: on an idle path slow start need not end).
//!
//! RTT source: probes (default), or with `ack_rtt` = 1 the data ACKs, as in the public ns-3
//! CTCC code (`RdmaHw::HandleAckCTCC`): no probe is sent; the RTT of the data packet whose ACK
//! completes each `probe_bytes` acknowledged (and the first ACK) drives one update. It needs
//! ACKs that carry an RTT (NIC timestamps); an ACK without one changes nothing.
//!
//! With `probe_per_rtt` = 1 the next probe is also asked for as soon as an answer arrives (the
//! NVIDIA DOCA PCC RTT template's cadence: `results->rtt_req = 1` on every RTT event).
//!
//! Probes are asked for every `probe_bytes` sent and, when `probe_interval_us` > 0, also when
//! that long has passed since the last request (checked on each send). The rate always stays in
//! `[min_rate, line_rate]`; the minimum defaults to 100 Gb/s / 2^14 so 7,000 flows fit in 100 G.
//!
//! Two parameter sets share this code: [`RttAimd::ctcc`] is the published CTCC law (CC.md), and
//! [`RttAimd::new`] is Raidline's default, whose defaults are documented in `cc/README.md`.

use super::{clamp_rate, CongestionControl, Decision, Event, NackKind, RxUtil};
use crate::params::{ParamSpec, Params};
use crate::units::{Nanos, Rate};

const OFFSET_US: usize = 0;
const SCALE_US: usize = 1;
const SCALE_CAP_US: usize = 2;
const BETA: usize = 3;
const AI_MBPS: usize = 4;
const STAGE_MAX: usize = 5;
const INCR_CAP: usize = 6;
const PROBE_BYTES: usize = 7;
const PROBE_INTERVAL_US: usize = 8;
const MIN_RATE_MBPS: usize = 9;
const INIT_RATE_MBPS: usize = 10;
const GRADIENT: usize = 11;
const HORIZON: usize = 12;
const BASE_CAP_US: usize = 13;
const MATCH_GAIN: usize = 14;
const SLOW_START: usize = 15;
const SS_GAIN: usize = 16;
const SS_MARGIN_US: usize = 17;
const LIN_SPAN_US: usize = 18;
const ACCEL_US: usize = 19;
const ACCEL_MAX: usize = 20;
const STEP_TIME_US: usize = 21;
const IDLE_US: usize = 22;
const ACK_RTT: usize = 23;
const PROBE_PER_RTT: usize = 24;
const NP_UTIL_TH: usize = 25;
const APP_WINDOW_US: usize = 26;
const FILTER_US: usize = 27;
const APP_HEADROOM: usize = 28;
const SS_EXIT_SAMPLES: usize = 29;
const CUT_HEADROOM: usize = 30;

/// Published CTCC values (CC.md); Raidline's default overrides some of them in [`RttAimd::new`].
static SPECS: [ParamSpec; 31] = [
    ParamSpec {
        name: "offset_us",
        min: 0.0,
        max: 100_000.0,
        default: 6.0,
        doc: "fixed target above base RTT, us",
    },
    ParamSpec {
        name: "scale_us",
        min: 0.0,
        max: 1000.0,
        default: 12.0,
        doc: "rate-scaled target term: scale/sqrt(rate in Gb/s), us",
    },
    ParamSpec {
        name: "scale_cap_us",
        min: 0.0,
        max: 100_000.0,
        default: 100_000.0,
        doc: "upper bound on the rate-scaled term, us",
    },
    ParamSpec {
        name: "beta",
        min: 0.0,
        max: 1.0,
        default: 0.05,
        doc: "multiplicative decrease gain",
    },
    ParamSpec {
        name: "ai_mbps",
        min: 0.0,
        max: 100_000.0,
        default: 100.0,
        doc: "additive step per stage, Mb/s",
    },
    ParamSpec {
        name: "stage_max",
        min: 1.0,
        max: 1000.0,
        default: 10.0,
        doc: "largest additive stage",
    },
    ParamSpec {
        name: "incr_cap",
        min: 0.0,
        max: 10.0,
        default: 0.25,
        doc: "largest increase per update as a fraction of the rate",
    },
    ParamSpec {
        name: "probe_bytes",
        min: 64.0,
        max: 1e9,
        default: 9000.0,
        doc: "bytes sent between probe requests",
    },
    ParamSpec {
        name: "probe_interval_us",
        min: 0.0,
        max: 1e6,
        default: 0.0,
        doc: "also probe when this long passed since the last request (0: off), us",
    },
    ParamSpec {
        name: "min_rate_mbps",
        min: 0.001,
        max: 1e6,
        default: 100_000.0 / 16_384.0,
        doc: "rate floor, Mb/s",
    },
    ParamSpec {
        name: "init_rate_mbps",
        min: 0.001,
        max: 1e6,
        default: 100_000.0 / 16_384.0,
        doc: "rate at flow start (clamped to the line rate), Mb/s",
    },
    ParamSpec {
        name: "gradient",
        min: 0.0,
        max: 1.0,
        default: 1.0,
        doc: "1: use the gradient-projected RTT, 0: the raw RTT",
    },
    ParamSpec {
        name: "horizon",
        min: 0.0,
        max: 100.0,
        default: 0.0,
        doc: "least projection, in update intervals: rtt_p = rtt + (rtt - prev) * max((rtt - base)/(dt/2), horizon)",
    },
    ParamSpec {
        name: "base_cap_us",
        min: 0.0,
        max: 100_000.0,
        default: 100_000.0,
        doc: "the fabric's unloaded RTT is at most this: base = min(lowest RTT seen, base_cap), us",
    },
    ParamSpec {
        name: "match_gain",
        min: 0.0,
        max: 2.0,
        default: 0.0,
        doc: "rate matching: before the AIMD step, rate /= 1 + g*slope, slope = (rtt - prev)/dt = (arrivals - capacity)/capacity",
    },
    ParamSpec {
        name: "slow_start",
        min: 0.0,
        max: 1.0,
        default: 0.0,
        doc: "1: from the start until the first RTT above base + ss_margin_us, grow by ss_gain per RTT (within app_window_us's cap) and probe every RTT while the cap does not hold the rate",
    },
    ParamSpec {
        name: "ss_gain",
        min: 0.0,
        max: 10.0,
        default: 1.0,
        doc: "slow-start growth per RTT (1: doubling)",
    },
    ParamSpec {
        name: "ss_margin_us",
        min: 0.0,
        max: 100_000.0,
        default: 2.0,
        doc: "slow start ends when ss_exit_samples updates in a row have an RTT more than this above base, us",
    },
    ParamSpec {
        name: "lin_span_us",
        min: 0.0,
        max: 10_000.0,
        default: 0.0,
        doc: "0: CTCC steps; > 0: linear law, the cut is beta times min(1, distance above target / span_us), the increase incr_cap times min(1, distance below target / span_us)",
    },
    ParamSpec {
        name: "accel_us",
        min: 0.0,
        max: 1e6,
        default: 0.0,
        doc: "0: off; > 0: the increase is multiplied by 1 + (time since the first of an unbroken run of RTTs within idle_us of base)/accel_us",
    },
    ParamSpec {
        name: "accel_max",
        min: 1.0,
        max: 1000.0,
        default: 1.0,
        doc: "largest increase multiplier from accel_us",
    },
    ParamSpec {
        name: "step_time_us",
        min: 0.0,
        max: 1e6,
        default: 0.0,
        doc: "0: steps per update; > 0: steps scaled by (time since the previous update)/step_time_us, at most 4x",
    },
    ParamSpec {
        name: "idle_us",
        min: 0.0,
        max: 1000.0,
        default: 0.0,
        doc: "an RTT at most this above base counts as an empty queue (for accel_us), us",
    },
    ParamSpec {
        name: "ack_rtt",
        min: 0.0,
        max: 1.0,
        default: 0.0,
        doc: "1: no probes; the RTT of the data packet whose ACK completes each probe_bytes acknowledged drives the update (the public ns-3 CTCC code); needs NIC-timestamped ACKs",
    },
    ParamSpec {
        name: "probe_per_rtt",
        min: 0.0,
        max: 1.0,
        default: 0.0,
        doc: "1: ask for the next probe as soon as an answer arrives (the DOCA PCC RTT template's cadence: one probe always in flight, one update per RTT), besides every probe_bytes",
    },
    ParamSpec {
        name: "np_util_th",
        min: 0.0,
        max: 1.0,
        default: 0.0,
        doc: "0: off; > 0: an answer whose responder reports a receive utilisation below this (the DOCA PCC RTT template's NP RX rate test, 0.9 there) gives an increase the full accel_max boost at once",
    },
    ParamSpec {
        name: "app_window_us",
        min: 0.0,
        max: 1e7,
        default: 0.0,
        doc: "0: off; > 0: an increase never takes the rate above app_headroom x what the flow sent over the last app_window_us to 2 x app_window_us (RFC 7661): an application-limited flow keeps its rate",
    },
    ParamSpec {
        name: "filter_us",
        min: 0.0,
        max: 1e6,
        default: 0.0,
        doc: "0: off; > 0: the law acts on the lowest RTT of the last filter_us to 2 x filter_us (Copa's standing RTT): a host clock's scheduling delays only add to an RTT, a standing queue raises every sample",
    },
    ParamSpec {
        name: "app_headroom",
        min: 1.0,
        max: 1000.0,
        default: 2.0,
        doc: "with app_window_us: an increase never takes the rate above app_headroom x what the flow sent",
    },
    ParamSpec {
        name: "ss_exit_samples",
        min: 1.0,
        max: 100.0,
        default: 1.0,
        doc: "slow start ends at the n-th update in a row whose RTT is more than ss_margin_us above base (1: the first)",
    },
    ParamSpec {
        name: "cut_headroom",
        min: 0.0,
        max: 1000.0,
        default: 0.0,
        doc: "0: off; > 0 (with app_window_us): a cut starts from at most this times what the flow sent over the last app_window_us to 2 x app_window_us, so a rate above what the path carried binds at the first cut",
    },
];

/// Per-flow state (104 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
    rate: f64,
    /// `filter_us`: lowest RTT of the current and of the previous window, and when the
    /// current one began.
    filt_cur: u64,
    filt_prev: u64,
    filt_start: u64,
    line: f64,
    base: u64,
    prev_rtt: u64,
    last_update: u64,
    last_probe_req: u64,
    idle_since: u64,
    bytes_since_probe: u32,
    /// `app_window_us`: bytes sent in the current and in the previous window, and when the
    /// current one began.
    sent_cur: u32,
    sent_prev: u32,
    sent_start: u64,
    stage: u16,
    have_prev: bool,
    ss_done: bool,
    /// Updates in a row whose RTT was more than `ss_margin_us` above base (slow start ends
    /// at `ss_exit_samples`).
    ss_high: u16,
    /// Slow start's last increase was held by `app_window_us`'s cap: the flow sends less than
    /// its rate, so it waits for the probe cadence instead of keeping a probe in flight.
    ss_capped: bool,
}

/// The RTT-target AIMD algorithm (see the module header for the law).
#[derive(Clone, Debug)]
pub struct RttAimd {
    name: &'static str,
    params: Params,
}

impl RttAimd {
    /// The published CTCC law and parameters (CC.md), named `ctcc`.
    pub fn ctcc() -> RttAimd {
        RttAimd {
            name: "ctcc",
            params: Params::new("ctcc", &SPECS),
        }
    }

    /// Raidline's default, named `rtt-aimd`: the same code with a low target (`base + 4 us +
    /// 1 us/sqrt(Gb/s)`), the linear law (3 % per 17 us from target, per 2.4 ms), empty-queue
    /// acceleration (at once when the responder reports a receive utilisation below 0.95), rate
    /// matching on the RTT slope, a probe per packet (and at least every 200 us while sending)
    /// and a 10 us cap on the base RTT (see `cc/README.md` for the measured effect of each).
    pub fn new() -> RttAimd {
        RttAimd {
            name: "rtt-aimd",
            params: Params::new("rtt-aimd", &SPECS),
        }
        .overridden(DEFAULT_OVERRIDES)
    }

    /// With `overrides` set; they are inside the ranges of SPECS (checked by a unit test).
    fn overridden(mut self, overrides: &[(&str, f64)]) -> RttAimd {
        for (name, v) in overrides {
            let _ = self.params.set(name, *v);
        }
        self
    }

    /// Raidline's default for RTTs timed on the **host clock**, also named `rtt-aimd`:
    /// [`RttAimd::new`] with [`HOST_CLOCK_OVERRIDES`]. The daemon times its probes on the host
    /// clock (no NIC completion timestamps: rxe has none, and the daemon does not read a
    /// NIC's yet), where a sample holds the poller's own latency: hundreds of microseconds on
    /// a busy host, milliseconds in the lab's TCG guests. [`RttAimd::new`]'s 10 us base cap and
    /// 4 us target pin such a flow to its floor. Measured at the lab's 40 Mbit/s bottleneck
    /// (`deploy/lab/bottleneck.sh`, see `cc/README.md`).
    pub fn host_clock() -> RttAimd {
        RttAimd::new().overridden(HOST_CLOCK_OVERRIDES)
    }

    fn target_ns(&self, s: &State) -> f64 {
        let p = &self.params;
        let min_rate = p.at(MIN_RATE_MBPS) * 1e6;
        let scaled = |rate: f64| p.at(SCALE_US) * 1e3 / (rate.max(1.0) / 1e9).sqrt();
        let term = scaled(s.rate)
            .min(scaled(min_rate))
            .min(p.at(SCALE_CAP_US) * 1e3);
        s.base as f64 + p.at(OFFSET_US) * 1e3 + term
    }

    /// One control update from an RTT (already net of remote turnaround).
    fn update(&self, s: &mut State, now: Nanos, rtt: u64, project: bool, rx_util: Option<RxUtil>) {
        let p = &self.params;
        let rtt = if project {
            self.filtered(s, now, rtt)
        } else {
            rtt
        };
        s.base = s
            .base
            .min(rtt)
            .min(Nanos::from_us_f64(p.at(BASE_CAP_US)).0.max(1));
        let base = s.base as f64;
        let r = rtt as f64;
        let mut rtt_p = r;
        if project && s.have_prev && p.at(MATCH_GAIN) > 0.0 {
            let dt = now.0.saturating_sub(s.last_update) as f64;
            if dt > 0.0 {
                let slope = ((r - s.prev_rtt as f64) / dt).clamp(-0.5, 2.0);
                s.rate /= 1.0 + p.at(MATCH_GAIN) * slope;
            }
        }
        if project && s.have_prev && p.at(GRADIENT) > 0.5 {
            let dt = now.0.saturating_sub(s.last_update) as f64;
            if dt > 0.0 {
                let k = ((r - base) / (dt / 2.0)).max(p.at(HORIZON));
                rtt_p = r + (r - s.prev_rtt as f64) * k;
            }
        }
        let rtt_p = rtt_p.max(base);
        if rtt_p - base > p.at(SS_MARGIN_US) * 1e3 {
            s.ss_high = s.ss_high.saturating_add(1);
            if f64::from(s.ss_high) >= p.at(SS_EXIT_SAMPLES) {
                s.ss_done = true;
            }
        } else {
            s.ss_high = 0;
        }
        let target = self.target_ns(s);
        let span = p.at(LIN_SPAN_US) * 1e3;
        let step_time = p.at(STEP_TIME_US) * 1e3;
        let tscale = if step_time > 0.0 {
            (now.0.saturating_sub(s.last_update) as f64 / step_time).min(4.0)
        } else {
            1.0
        };
        if rtt_p >= target && rtt_p > base {
            let cut = if span > 0.0 {
                // beta per span of excess (per step_time), never more than beta
                p.at(BETA) * (tscale * (rtt_p - target) / span).min(1.0)
            } else {
                (p.at(BETA) * tscale * (rtt_p - target) / (rtt_p - base)).min(1.0)
            };
            // `cut_headroom`: a rate far above what the flow sent (the path, not the pacer,
            // held it) is cut from what was sent, so the cut binds now rather than after the
            // several updates that first bring the rate down to what the path carries.
            if p.at(CUT_HEADROOM) > 0.0 {
                let sent = self.sent_rate(s, now);
                if sent > 0.0 {
                    s.rate = s.rate.min(p.at(CUT_HEADROOM) * sent);
                }
            }
            s.rate *= 1.0 - cut;
            s.stage = 0;
            s.idle_since = 0;
            s.ss_capped = false;
        } else {
            if r - base > p.at(IDLE_US) * 1e3 {
                s.idle_since = 0;
            } else if s.idle_since == 0 {
                s.idle_since = now.0;
            }
            s.stage = (s.stage + 1).min(p.at(STAGE_MAX) as u16);
            if self.in_slow_start(s) {
                // `app_window_us` caps slow start too: a queue pair whose demand is below its
                // rate does not double its way to line rate on an idle path.
                let grown = s.rate * (1.0 + p.at(SS_GAIN));
                let cap = self.usage_cap(s, now).max(s.rate);
                s.ss_capped = grown > cap;
                s.rate = grown.min(cap);
            } else {
                // linear law: full step at `span` or more below target, less nearer to it
                let frac = if span > 0.0 {
                    ((target - rtt_p) / span).min(1.0)
                } else {
                    1.0
                };
                let accel = p.at(ACCEL_US) * 1e3;
                // the responder says its port has spare capacity: a departure (or an idle path)
                // that the RTT cannot measure, so no need to wait for a run of empty samples
                let np_low = rx_util.is_some_and(|u| u.fraction() < p.at(NP_UTIL_TH));
                let boost = if np_low {
                    p.at(ACCEL_MAX)
                } else if accel > 0.0 && s.idle_since != 0 {
                    (1.0 + now.0.saturating_sub(s.idle_since) as f64 / accel).min(p.at(ACCEL_MAX))
                } else {
                    1.0
                };
                let step = (s.rate * p.at(INCR_CAP)).min(p.at(AI_MBPS) * 1e6 * f64::from(s.stage))
                    * frac
                    * boost
                    * tscale;
                s.rate = (s.rate + step).min(self.usage_cap(s, now).max(s.rate));
            }
        }
        s.rate = clamp_rate(s.rate, p.at(MIN_RATE_MBPS) * 1e6, s.line);
        if project {
            s.prev_rtt = rtt;
            s.have_prev = true;
            s.last_update = now.0;
        }
    }

    /// `app_window_us`: counts `bytes` sent at `now` in the current window, starting a new
    /// one when it is W old.
    fn count_sent(&self, s: &mut State, now: Nanos, bytes: u64) {
        let w = Nanos::from_us_f64(self.params.at(APP_WINDOW_US)).0;
        if w == 0 {
            return;
        }
        let bytes = bytes.min(u64::from(u32::MAX)) as u32;
        let age = now.0.saturating_sub(s.sent_start);
        if s.sent_start == 0 || age >= w {
            s.sent_prev = if s.sent_start != 0 && age < 2 * w {
                s.sent_cur
            } else {
                0
            };
            s.sent_cur = bytes;
            // windows follow each other, so the previous one spans exactly W
            s.sent_start = if s.sent_start != 0 && age < 2 * w {
                s.sent_start + w
            } else {
                now.0.max(1)
            };
        } else {
            s.sent_cur = s.sent_cur.saturating_add(bytes);
        }
    }

    /// `app_window_us`: the highest rate an increase may reach, `app_headroom` times the rate the
    /// flow sent at over the last W to 2W (infinite when off; zero before anything was sent, so a
    /// flow that has not sent yet keeps its starting rate).
    fn usage_cap(&self, s: &State, now: Nanos) -> f64 {
        if Nanos::from_us_f64(self.params.at(APP_WINDOW_US)).0 == 0 {
            return f64::INFINITY;
        }
        self.params.at(APP_HEADROOM) * self.sent_rate(s, now)
    }

    /// `app_window_us`: the rate (bits per second) the flow sent at over the last W to 2W; zero
    /// when off or before anything was sent.
    fn sent_rate(&self, s: &State, now: Nanos) -> f64 {
        let w = Nanos::from_us_f64(self.params.at(APP_WINDOW_US)).0;
        if w == 0 || s.sent_start == 0 {
            return 0.0;
        }
        let age = now.0.saturating_sub(s.sent_start);
        let (bytes, span) = if age >= 2 * w {
            (0, age)
        } else if age >= w {
            (u64::from(s.sent_cur), age)
        } else {
            (u64::from(s.sent_cur) + u64::from(s.sent_prev), age + w)
        };
        bytes as f64 * 8.0 / (span as f64 / 1e9)
    }

    /// The RTT the law acts on: with `filter_us` = W > 0 the lowest sample of the last W to
    /// 2W (two windows, the older dropped as a new one begins), else `rtt` itself.
    fn filtered(&self, s: &mut State, now: Nanos, rtt: u64) -> u64 {
        let w = Nanos::from_us_f64(self.params.at(FILTER_US)).0;
        if w == 0 {
            return rtt;
        }
        let age = now.0.saturating_sub(s.filt_start);
        if age >= w {
            // A window that ended more than W ago is older than the filter's reach.
            s.filt_prev = if age >= 2 * w { u64::MAX } else { s.filt_cur };
            s.filt_cur = rtt;
            s.filt_start = now.0;
        } else {
            s.filt_cur = s.filt_cur.min(rtt);
        }
        s.filt_cur.min(s.filt_prev)
    }

    /// RTT from data ACKs instead of probes (`ack_rtt` = 1).
    fn ack_mode(&self) -> bool {
        self.params.at(ACK_RTT) > 0.5
    }

    /// Slow start: on, and no RTT so far was more than `ss_margin_us` above base.
    fn in_slow_start(&self, s: &State) -> bool {
        self.params.at(SLOW_START) > 0.5 && !s.ss_done
    }

    fn decision(&self, s: &State, probe: bool) -> Decision {
        Decision {
            rate: Rate::from_bps_f64(s.rate),
            window: None,
            probe,
            timer: None,
        }
    }
}

impl Default for RttAimd {
    fn default() -> RttAimd {
        RttAimd::new()
    }
}

/// Raidline's default parameters, where they differ from CTCC's (see `cc/README.md`).
pub const DEFAULT_OVERRIDES: &[(&str, f64)] = &[
    ("offset_us", 4.0),
    ("scale_us", 1.0),
    ("beta", 0.03),
    ("incr_cap", 0.03),
    ("lin_span_us", 17.0),
    ("step_time_us", 2400.0),
    ("idle_us", 5.0),
    ("accel_us", 1500.0),
    ("accel_max", 3.0),
    ("match_gain", 0.6),
    ("base_cap_us", 10.0),
    ("probe_bytes", 4160.0),
    ("probe_interval_us", 200.0),
    ("init_rate_mbps", 100_000.0 / 8192.0),
    ("np_util_th", 0.95),
];

/// [`RttAimd::host_clock`]'s parameters, where they differ from [`DEFAULT_OVERRIDES`]: a
/// target of about base + 6 ms at 1 MB/s (`offset_us` 3000 plus `scale_us` 300/sqrt(Gb/s),
/// at most 4 ms), above the spread of host-clock samples with nothing queued; the law acts on
/// the lowest RTT of the last 50-100 ms (`filter_us`); a probe every 20 ms per queue pair,
/// not per packet or per RTT (rxe's retransmit timer, armed by an outstanding probe and never
/// cancelled, fires spuriously: fewer probes in flight, fewer retries); steps per 20 ms; no
/// base cap (the base is the lowest sample); a 1 Mb/s floor and an 8 Mb/s start, an additive
/// step of 0.2 Mb/s per stage up to 2 stages (larger steps, 0.4 Mb/s up to 4 stages, swung the
/// lab's queue between empty and 50 ms; 0.1 Mb/s in one stage left the link idle, 0.82 x
/// off's throughput), a cut of at most 5 % per 20 ms (10 % left 0.88-0.90 x off's
/// throughput), and an increase never above four times what the queue pair sent over the
/// last 100-200 ms (`app_window_us`, `app_headroom` 4: an idle queue pair keeps its rate).
/// Slow start (`slow_start`, `ss_gain` 0.25, `ss_margin_us` 1000): from the start until the
/// filtered RTT is 1 ms above base, the rate grows by a quarter per RTT, within that cap.
/// Without it the 8 Mb/s start cost an uncongested queue pair a fifth of its throughput over a
/// 20 s job (0.82 x off in the lab, one guest, 128 KiB reads over 4 queue pairs); with it,
/// 0.96-0.99 x uncapped (but rates of GiB/s on an idle path), 0.86-0.98 (mean 0.92) within
/// 4 x what was sent, 0.91-0.92 within 2 x. A run of empty-queue samples speeds the increase
/// up over `accel_us` 200 ms (up to `accel_max` 3): on this clock one sample at the base, 20 ms
/// after the last, is not yet a departure, and [`DEFAULT_OVERRIDES`]' 1.5 ms gave the full 3
/// times at the second such sample. At the lab's bottleneck that swung the queue further: ping
/// p99 46.6-57.1 ms against 36.5-49.9 with 200 ms (six phases each), and twice as many pings
/// above 30 ms, at 0.93 against 0.91 x off's throughput (means); uncongested, 200 ms moved
/// more than 1.5 ms in each of six triples run side by side (0.95 against 0.88 x off there;
/// 0.92 over all ten of its triples).
pub const HOST_CLOCK_OVERRIDES: &[(&str, f64)] = &[
    ("base_cap_us", 100_000.0),
    ("offset_us", 3000.0),
    ("scale_us", 300.0),
    ("scale_cap_us", 4000.0),
    ("lin_span_us", 4000.0),
    ("idle_us", 1000.0),
    ("min_rate_mbps", 1.0),
    ("init_rate_mbps", 8.0),
    ("match_gain", 0.0),
    ("filter_us", 50_000.0),
    ("probe_per_rtt", 0.0),
    ("probe_bytes", 1e9),
    ("probe_interval_us", 20_000.0),
    ("step_time_us", 20_000.0),
    ("app_window_us", 100_000.0),
    ("beta", 0.05),
    ("ai_mbps", 0.2),
    ("stage_max", 2.0),
    ("incr_cap", 1.0),
    ("slow_start", 1.0),
    ("ss_gain", 0.25),
    ("ss_margin_us", 1000.0),
    ("ss_exit_samples", 3.0),
    ("app_headroom", 4.0),
    ("accel_us", 200_000.0),
];

impl CongestionControl for RttAimd {
    type State = State;

    fn name(&self) -> &'static str {
        self.name
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }

    fn wants_acks(&self) -> bool {
        self.ack_mode()
    }

    fn current_rate(&self, s: &State) -> Rate {
        Rate::from_bps_f64(s.rate)
    }

    fn on_event(&self, s: &mut State, now: Nanos, event: Event) -> Decision {
        let p = &self.params;
        match event {
            Event::FlowStart { line_rate } => {
                *s = State {
                    line: line_rate.bps(),
                    base: u64::MAX,
                    filt_cur: u64::MAX,
                    filt_prev: u64::MAX,
                    filt_start: now.0,
                    last_probe_req: now.0,
                    last_update: now.0,
                    ..State::default()
                };
                s.rate = clamp_rate(
                    p.at(INIT_RATE_MBPS) * 1e6,
                    p.at(MIN_RATE_MBPS) * 1e6,
                    s.line,
                );
                // A first probe right away gives the flow its base RTT (in ACK mode the
                // first ACK does).
                return self.decision(s, !self.ack_mode());
            }
            Event::Sent { .. } if self.ack_mode() => {}
            Event::Sent { bytes } => {
                self.count_sent(s, now, bytes);
                s.bytes_since_probe = s
                    .bytes_since_probe
                    .saturating_add(bytes.min(u64::from(u32::MAX)) as u32);
                let interval = p.at(PROBE_INTERVAL_US) * 1e3;
                let by_time =
                    interval > 0.0 && (now.0.saturating_sub(s.last_probe_req) as f64) >= interval;
                if f64::from(s.bytes_since_probe) >= p.at(PROBE_BYTES) || by_time {
                    s.bytes_since_probe = 0;
                    s.last_probe_req = now.0;
                    return self.decision(s, true);
                }
            }
            Event::Rtt { rtt, remote } => {
                let net = rtt - remote.map_or(Nanos::ZERO, |r| r.turnaround());
                self.update(s, now, net.0.max(1), true, remote.and_then(|r| r.rx_util));
                if (self.in_slow_start(s) && !s.ss_capped) || p.at(PROBE_PER_RTT) > 0.5 {
                    // slow start (still on an idle path, and the flow uses its rate) or
                    // per-RTT cadence: keep one probe in flight so the rate is updated every
                    // RTT. A flow held by what it sent probes at the usual cadence: on an idle
                    // path slow start may never end, and rxe's retransmit timer retries a probe
                    // it finds in flight.
                    s.last_probe_req = now.0;
                    s.bytes_since_probe = 0;
                    return self.decision(s, true);
                }
            }
            Event::ProbeLost { waited } => {
                if s.base != u64::MAX {
                    self.update(s, now, waited.0.max(s.base), false, None);
                }
            }
            Event::Nack(NackKind::OutOfSequence) => {
                s.rate = clamp_rate(s.rate / 2.0, p.at(MIN_RATE_MBPS) * 1e6, s.line);
                s.stage = 0;
            }
            Event::Ack {
                bytes,
                rtt: Some(rtt),
            } if self.ack_mode() => {
                s.bytes_since_probe = s
                    .bytes_since_probe
                    .saturating_add(bytes.min(u64::from(u32::MAX)) as u32);
                // The first ACK gives the base RTT (CTCC measures on the first packet too).
                if !s.have_prev || f64::from(s.bytes_since_probe) >= p.at(PROBE_BYTES) {
                    s.bytes_since_probe = 0;
                    self.update(s, now, rtt.0.max(1), true, None);
                }
            }
            Event::Nack(_) | Event::Ack { .. } | Event::Cnp | Event::Timer => {}
        }
        self.decision(s, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn at_rate(a: &RttAimd, gbps: f64, base_us: f64) -> State {
        let (mut s, _) = started(a);
        s.rate = gbps * 1e9;
        s.base = Nanos::from_us_f64(base_us).0;
        s
    }

    #[test]
    fn state_is_small_and_overrides_are_in_range() {
        assert!(std::mem::size_of::<State>() <= super::super::MAX_STATE_BYTES);
        let mut p = Params::new("x", &SPECS);
        for (n, v) in DEFAULT_OVERRIDES.iter().chain(HOST_CLOCK_OVERRIDES) {
            p.set(n, *v).unwrap();
        }
        assert_eq!(RttAimd::host_clock().name(), "rtt-aimd");
        assert_eq!(
            RttAimd::host_clock().params().get("filter_us").unwrap(),
            50_000.0
        );
    }

    #[test]
    fn ctcc_target_matches_cc_md_consistency_check() {
        // 7,000 flows at 100 G: fair share 14.3 Mb/s -> target ~ base + 6 + 12/sqrt(0.0143) us = base + 106 us.
        let a = RttAimd::ctcc();
        let s = at_rate(&a, 100.0 / 7000.0, 10.0);
        let extra_us = (a.target_ns(&s) - 10_000.0) / 1e3;
        assert!(
            close(extra_us, 6.0 + 12.0 / (100.0f64 / 7000.0).sqrt(), 1e-9),
            "{extra_us}"
        );
        assert!(extra_us > 105.0 && extra_us < 107.0);
        // capped at its value at the minimum rate (6.1 Mb/s): 6 + 12/sqrt(0.0061) = 159.6 us
        let s = at_rate(&a, 0.000_001, 10.0);
        let cap_us = (a.target_ns(&s) - 10_000.0) / 1e3;
        assert!(
            close(cap_us, 6.0 + 12.0 / (100.0f64 / 16384.0).sqrt(), 1e-9),
            "{cap_us}"
        );
    }

    #[test]
    fn decrease_is_proportional_to_excess_and_at_most_beta() {
        let a = RttAimd::ctcc();
        let mut s = at_rate(&a, 10.0, 10.0);
        // target at 10 Gb/s: 10 + 6 + 12/sqrt(10) = 19.795 us; no previous sample: rtt_p = rtt.
        let target = a.target_ns(&s);
        a.on_event(&mut s, Nanos::from_us(100), rtt(40.0));
        let expect = 10e9 * (1.0 - 0.05 * (40_000.0 - target) / (40_000.0 - 10_000.0));
        assert!(close(s.rate, expect, 1e-9), "{} vs {}", s.rate, expect);
        assert_eq!(s.stage, 0);
        // an enormous RTT cuts by at most beta
        let mut s = at_rate(&a, 10.0, 10.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(1e6));
        assert!(s.rate >= 10e9 * 0.95 - 1.0 && s.rate < 10e9 * 0.951);
    }

    #[test]
    fn a_cut_starts_from_what_the_flow_sent_with_cut_headroom() {
        // 10 Gb/s allowed while the path carried 1 Gb/s (125 kB per ms sent for 2 ms), then a
        // queued answer: off, the cut is beta of 10 Gb/s; with `cut_headroom` 1.2, beta of 1.2
        // Gb/s. A flow that sent nothing keeps the plain cut (nothing to start from).
        let run = |headroom: f64, sent_per_100us: u64| {
            let mut a = RttAimd::ctcc();
            a.params_mut().set("app_window_us", 1000.0).unwrap();
            a.params_mut().set("cut_headroom", headroom).unwrap();
            let mut s = at_rate(&a, 10.0, 10.0);
            for i in 1..=20u64 {
                a.on_event(
                    &mut s,
                    Nanos::from_us(i * 100),
                    Event::Sent {
                        bytes: sent_per_100us,
                    },
                );
            }
            a.on_event(&mut s, Nanos::from_us(2000), rtt(1e6));
            s.rate
        };
        let plain = run(0.0, 12_500);
        assert!(close(plain, 10e9 * 0.95, 1e-6), "off: {plain}");
        // sent: 250 kB over the window's 1.9 ms (the current 0.9 ms and the previous 1 ms)
        let sent = 250_000.0 * 8.0 / 1.9e-3;
        let from_sent = run(1.2, 12_500);
        assert!(
            close(from_sent, 1.2 * sent * 0.95, 1e-3),
            "from 1.2 x {sent}: {from_sent}"
        );
        assert!(
            close(run(1.2, 0), plain, 1e-9),
            "nothing sent: the plain cut"
        );
        // a rate already below what was sent is cut from itself
        assert!(close(run(20.0, 12_500), plain, 1e-9));
    }

    #[test]
    fn the_filter_ignores_delay_spikes_and_sees_a_standing_queue_within_two_windows() {
        let run = |filter_us: f64| {
            let mut a = RttAimd::ctcc();
            a.params_mut().set("gradient", 0.0).unwrap();
            a.params_mut().set("filter_us", filter_us).unwrap();
            let mut s = at_rate(&a, 1.0, 10.0);
            // every other sample 490 us late (a descheduled poller), for 5 ms
            let mut cuts = 0;
            for i in 1..=50u64 {
                let before = s.rate;
                let r = if i % 2 == 0 { 500.0 } else { 10.0 };
                a.on_event(&mut s, Nanos::from_us(i * 100), rtt(r));
                cuts += u32::from(s.rate < before);
            }
            // then a standing queue of 490 us: every sample late
            let mut first_cut = None;
            for i in 51..=100u64 {
                let before = s.rate;
                a.on_event(&mut s, Nanos::from_us(i * 100), rtt(500.0));
                if s.rate < before && first_cut.is_none() {
                    first_cut = Some((i - 50) * 100);
                }
            }
            (cuts, first_cut)
        };
        let (cuts, first) = run(0.0);
        assert_eq!(cuts, 25, "unfiltered, every spike cuts");
        assert_eq!(first, Some(100));
        let (cuts, first) = run(1000.0);
        assert_eq!(cuts, 0, "filtered, no spike cuts");
        let first = first.expect("the standing queue cuts");
        assert!(
            first > 100 && first <= 2000,
            "within two windows: {first} us"
        );
    }

    #[test]
    fn an_application_limited_flow_keeps_its_rate() {
        // 1 Gb/s (125 kB per ms), an answer at the base every 100 us for 20 ms, with
        // `per_ms` bytes sent each ms (a tenth every 100 us)
        let run = |window_us: f64, per_ms: u64| {
            let mut a = RttAimd::ctcc();
            a.params_mut().set("app_window_us", window_us).unwrap();
            let mut s = at_rate(&a, 1.0, 10.0);
            let r0 = s.rate;
            for i in 0..=200u64 {
                let now = Nanos::from_us(i * 100);
                if per_ms > 0 {
                    a.on_event(&mut s, now, Event::Sent { bytes: per_ms / 10 });
                }
                a.on_event(&mut s, now, rtt(10.0));
            }
            s.rate / r0
        };
        assert!(run(0.0, 1000) > 4.0, "off: an idle flow's rate still grows");
        assert_eq!(run(1000.0, 0), 1.0, "never sent: held at the starting rate");
        assert_eq!(run(1000.0, 1000), 1.0, "8 Mb/s sent: held at 1 Gb/s");
        let r = run(1000.0, 100_000);
        assert!(
            r > 1.5 && r < 2.0,
            "0.8 Gb/s sent: grows to about twice that at most: {r}"
        );
        assert!(
            run(1000.0, 1_000_000) > 4.0,
            "a flow that uses its rate grows"
        );
    }

    /// `ctcc` in slow start within `app_window_us` 1000 and `app_headroom`, at 1 Gb/s over a
    /// 10 us base.
    fn capped_slow_start(headroom: f64) -> (RttAimd, State) {
        let mut a = RttAimd::ctcc();
        a.params_mut().set("slow_start", 1.0).unwrap();
        a.params_mut().set("app_window_us", 1000.0).unwrap();
        a.params_mut().set("app_headroom", headroom).unwrap();
        let s = at_rate(&a, 1.0, 10.0);
        (a, s)
    }

    #[test]
    fn slow_start_is_capped_by_what_the_flow_sent() {
        // as above, in slow start: each answer at the base would double the rate
        let run_with = |per_ms: u64, headroom: f64| {
            let (a, mut s) = capped_slow_start(headroom);
            let r0 = s.rate;
            for i in 0..=200u64 {
                let now = Nanos::from_us(i * 100);
                a.on_event(&mut s, now, Event::Sent { bytes: per_ms / 10 });
                a.on_event(&mut s, now, rtt(10.0));
            }
            assert!(a.in_slow_start(&s), "still on an idle path");
            s.rate / r0
        };
        let run = |per_ms: u64| run_with(per_ms, 2.0);
        assert_eq!(run(1000), 1.0, "8 Mb/s sent: held at 1 Gb/s");
        let r = run_with(100_000, 4.0);
        assert!(
            r > 3.0 && r <= 4.0,
            "0.8 Gb/s sent, headroom 4: about four times that at most: {r}"
        );
        let r = run(100_000);
        assert!(
            r > 1.5 && r <= 2.0,
            "0.8 Gb/s sent: about twice that at most: {r}"
        );
        assert!(run(1_000_000) > 4.0, "a flow that uses its rate grows");
    }

    #[test]
    fn slow_start_keeps_a_probe_in_flight_only_while_the_flow_uses_its_rate() {
        // An answer at the base RTT in slow start: the next probe at once while the flow sends
        // at its rate, at the probe cadence once what it sent holds the rate.
        let probes_after = |per_ms: u64, answers: u64| {
            let (mut a, mut s) = capped_slow_start(2.0);
            a.params_mut().set("probe_per_rtt", 0.0).unwrap();
            let mut asked = 0;
            for i in 0..answers {
                let now = Nanos::from_us(i * 100);
                a.on_event(&mut s, now, Event::Sent { bytes: per_ms / 10 });
                if a.on_event(&mut s, now, rtt(10.0)).probe {
                    asked += 1;
                }
            }
            assert!(a.in_slow_start(&s), "still on an idle path");
            (asked, s.ss_capped)
        };
        let (asked, capped) = probes_after(1000, 200);
        assert!(capped, "8 Mb/s sent at 1 Gb/s: held by the cap");
        assert!(asked <= 1, "held: no probe per answer ({asked} of 200)");
        // 80 Gb/s sent: five doublings (32 Gb/s) stay under twice what the window saw
        let (asked, capped) = probes_after(10_000_000, 5);
        assert!(!capped, "80 Gb/s sent: the rate grows");
        assert_eq!(asked, 5, "growing: a probe after every answer");
    }

    #[test]
    fn increase_is_additive_by_stage_and_capped_at_a_quarter() {
        let a = RttAimd::ctcc();
        let mut s = at_rate(&a, 10.0, 10.0);
        let mut t = 100;
        for stage in 1..=12u32 {
            let before = s.rate;
            t += 100;
            a.on_event(&mut s, Nanos::from_us(t), rtt(10.0));
            let expect = (100e6 * f64::from(stage.min(10))).min(before / 4.0);
            assert!(close(s.rate - before, expect, 1e-9), "stage {stage}");
        }
        // a tiny rate grows by at most 25 % per step
        let mut s = at_rate(&a, 0.01, 10.0);
        a.on_event(&mut s, Nanos::from_us(50), rtt(10.0));
        assert!(close(s.rate, 0.0125e9, 1e-9));
    }

    #[test]
    fn gradient_projection_reacts_to_a_rising_rtt_before_the_target() {
        let a = RttAimd::ctcc();
        // base 10 us; rate 10 G -> target 19.8 us. RTT rises 14 -> 18 us over 4 us:
        // rtt_p = 18 + 4*(8)/(2) = 34 us > target: decrease although 18 < target.
        let mut s = at_rate(&a, 10.0, 10.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(14.0));
        let before = s.rate;
        a.on_event(&mut s, Nanos::from_us(104), rtt(18.0));
        assert!(s.rate < before, "{} !< {}", s.rate, before);
        let mut b = RttAimd::ctcc();
        b.params_mut().set("gradient", 0.0).unwrap();
        let mut s = at_rate(&b, 10.0, 10.0);
        b.on_event(&mut s, Nanos::from_us(100), rtt(14.0));
        let before = s.rate;
        b.on_event(&mut s, Nanos::from_us(104), rtt(18.0));
        assert!(s.rate > before);
    }

    #[test]
    fn rate_matching_removes_the_measured_overload() {
        // ctcc with match_gain 1: RTT rising 2 us per 100 us = slope 0.02 -> rate / 1.02 first,
        // then the usual law (rising RTT far below target: increase, capped at 25 %)
        let mut a = RttAimd::ctcc();
        a.params_mut().set("match_gain", 1.0).unwrap();
        a.params_mut().set("gradient", 0.0).unwrap();
        let mut s = at_rate(&a, 10.0, 10.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(10.0));
        let before = s.rate;
        a.on_event(&mut s, Nanos::from_us(200), rtt(12.0));
        let matched = before / 1.02;
        let expect = matched + (matched / 4.0).min(100e6 * 2.0);
        assert!(close(s.rate, expect, 1e-9), "{} vs {}", s.rate, expect);
        // a falling RTT (queue draining) raises the rate by the same rule: slope -0.04
        let mut s = at_rate(&a, 10.0, 10.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(18.0));
        let before = s.rate;
        a.on_event(&mut s, Nanos::from_us(200), rtt(14.0));
        let matched = before / 0.96;
        let expect = matched + (matched / 4.0).min(100e6 * 2.0);
        assert!(close(s.rate, expect, 1e-9), "{} vs {}", s.rate, expect);
    }

    #[test]
    fn base_cap_bounds_the_base_a_late_flow_sees() {
        let a = RttAimd::new();
        let (mut s, _) = started(&a);
        // the first sample already carries 100 us of standing queue
        a.on_event(&mut s, Nanos::from_us(100), rtt(110.0));
        assert_eq!(s.base, 10_000, "base capped at 10 us");
        let c = RttAimd::ctcc();
        let (mut s, _) = started(&c);
        c.on_event(&mut s, Nanos::from_us(100), rtt(110.0));
        assert_eq!(s.base, 110_000, "CTCC takes the first sample as base");
    }

    #[test]
    fn slow_start_doubles_per_rtt_until_the_first_queued_sample() {
        // on the CTCC parameters (no rate matching), so each step is the slow-start step alone
        let mut a = RttAimd::ctcc();
        a.params_mut().set("slow_start", 1.0).unwrap();
        let (mut s, _) = started(&a);
        let r0 = s.rate;
        let d = a.on_event(&mut s, Nanos::from_us(5), rtt(5.0));
        assert!(
            close(s.rate, 2.0 * r0, 1e-9) && d.probe,
            "doubled, next probe at once"
        );
        let d = a.on_event(&mut s, Nanos::from_us(11), rtt(6.0));
        assert!(
            close(s.rate, 4.0 * r0, 1e-9) && d.probe,
            "1 us above base is still idle"
        );
        // 3 us above base ends slow start for good: back to the 3 % law
        a.on_event(&mut s, Nanos::from_us(20), rtt(8.0));
        assert!(!a.in_slow_start(&s));
        let before = s.rate;
        let d = a.on_event(&mut s, Nanos::from_us(40), rtt(5.0));
        assert!(!d.probe);
        assert!(
            close(s.rate, before * 1.25, 1e-9),
            "the CTCC step, not a doubling"
        );
    }

    #[test]
    fn slow_start_ends_only_after_ss_exit_samples_high_updates_in_a_row() {
        // CTCC's values with slow start (no filter): a high sample alone, as a host's hiccup
        // gives one (the lab: a probe with nothing ahead answered in 3.6 ms against a 100 us
        // base at the start of a job), does not end it at 3; three in a row do.
        let mut a = RttAimd::ctcc();
        a.params_mut().set("slow_start", 1.0).unwrap();
        a.params_mut().set("ss_exit_samples", 3.0).unwrap();
        let (mut s, _) = started(&a);
        let r0 = s.rate;
        a.on_event(&mut s, Nanos::from_us(5), rtt(5.0));
        a.on_event(&mut s, Nanos::from_us(20), rtt(8.0));
        a.on_event(&mut s, Nanos::from_us(30), rtt(8.0));
        assert!(a.in_slow_start(&s), "two high updates");
        a.on_event(&mut s, Nanos::from_us(40), rtt(5.0));
        let grown = s.rate;
        assert!(grown > 2.0 * r0, "{grown} from {r0}");
        a.on_event(&mut s, Nanos::from_us(50), rtt(8.0));
        a.on_event(&mut s, Nanos::from_us(60), rtt(8.0));
        assert!(a.in_slow_start(&s), "the count started again");
        a.on_event(&mut s, Nanos::from_us(70), rtt(8.0));
        assert!(!a.in_slow_start(&s), "three in a row");
        // The daemon's law asks for three.
        let h = RttAimd::host_clock();
        assert_eq!(h.params().get("ss_exit_samples").unwrap(), 3.0);
    }

    /// The default law with rate matching and the gradient projection off, so each step is the
    /// linear law alone, with a 15 us span (round numbers below).
    fn linear() -> RttAimd {
        let mut a = RttAimd::new();
        a.params_mut().set("match_gain", 0.0).unwrap();
        a.params_mut().set("gradient", 0.0).unwrap();
        a.params_mut().set("lin_span_us", 15.0).unwrap();
        a
    }

    /// A flow at `mbps` with base 5 us whose previous update was at `t_us`.
    fn flow_at(a: &RttAimd, mbps: f64, t_us: u64) -> State {
        let mut s = at_rate(a, mbps / 1e3, 5.0);
        s.last_update = Nanos::from_us(t_us).0;
        s
    }

    #[test]
    fn linear_law_steps_grow_with_the_distance_from_target_and_with_time() {
        let a = linear();
        let s0 = flow_at(&a, 14.0, 1000);
        let target_us = a.target_ns(&s0) / 1e3;
        // (RTTs are whole nanoseconds, hence 1e-6)
        // 7.5 us below target (half the 15 us span), 2.4 ms after the previous update: half of
        // the 3 % step
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(3400), rtt(target_us - 7.5));
        assert!(close(s.rate, 14e6 * (1.0 + 0.03 * 0.5), 1e-6), "{}", s.rate);
        // the same sample 1.2 ms after the previous update: half again
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(2200), rtt(target_us - 7.5));
        assert!(
            close(s.rate, 14e6 * (1.0 + 0.03 * 0.25), 1e-6),
            "{}",
            s.rate
        );
        // a long gap counts at most 4 times
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(100_000), rtt(target_us - 7.5));
        assert!(
            close(s.rate, 14e6 * (1.0 + 0.03 * 0.5 * 4.0), 1e-5),
            "{}",
            s.rate
        );
        // 5 us above target: beta per 15 us of excess = 1 %
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(3400), rtt(target_us + 5.0));
        assert!(close(s.rate, 14e6 * (1.0 - 0.01), 1e-6), "{}", s.rate);
        // ... or half that 1.2 ms after the previous update
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(2200), rtt(target_us + 5.0));
        assert!(close(s.rate, 14e6 * (1.0 - 0.005), 1e-6), "{}", s.rate);
        // 100 us above target: capped at beta = 3 %, however long the silence
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(3400), rtt(target_us + 100.0));
        assert!(close(s.rate, 14e6 * (1.0 - 0.03), 1e-6), "{}", s.rate);
        let mut s = s0;
        a.on_event(&mut s, Nanos::from_us(50_000), rtt(target_us + 100.0));
        assert!(close(s.rate, 14e6 * (1.0 - 0.03), 1e-6), "{}", s.rate);
    }

    #[test]
    fn a_run_of_empty_queue_samples_accelerates_the_increase_and_a_queue_ends_it() {
        let a = linear();
        // the increase relative to the plain linear step at this sample
        let boost = |s: &mut State, t_us: u64, rtt_us: f64| {
            let before = s.rate;
            let plain = 0.03 * ((a.target_ns(s) / 1e3 - rtt_us) / 15.0).min(1.0);
            a.on_event(s, Nanos::from_us(t_us), rtt(rtt_us));
            (s.rate / before - 1.0) / plain
        };
        let mut s = flow_at(&a, 14.0, 1000);
        // RTT at base: the first empty sample starts the run and gets the plain step
        assert!(close(boost(&mut s, 3400, 5.0), 1.0, 1e-9));
        // 2.4 ms into the run: 1 + 2.4/1.5 = 2.6 times
        assert!(close(boost(&mut s, 5800, 5.0), 2.6, 1e-9));
        // 4.8 ms: capped at accel_max = 3
        assert!(close(boost(&mut s, 8200, 5.0), 3.0, 1e-9));
        // a sample 6 us above base (a queue, though below target) ends the run...
        assert!(close(boost(&mut s, 10_600, 11.0), 1.0, 1e-9));
        // ...so the next empty sample starts over
        assert!(close(boost(&mut s, 13_000, 5.0), 1.0, 1e-9));
        assert!(boost(&mut s, 15_400, 5.0) > 2.0);
        // and a sample above target ends it too
        let target_us = a.target_ns(&s) / 1e3;
        a.on_event(&mut s, Nanos::from_us(17_800), rtt(target_us + 1.0));
        assert!(close(boost(&mut s, 20_200, 5.0), 1.0, 1e-9));
    }

    #[test]
    fn host_clock_accelerates_after_a_run_of_empty_samples_on_its_own_time_scale() {
        // The daemon's law hears an answer every 20 ms and acts on a 50-100 ms filter: one
        // answer at the base is not a departure there.
        let mut a = RttAimd::host_clock();
        // (no usage cap: this flow sends nothing)
        a.params_mut().set("app_window_us", 0.0).unwrap();
        let mut s = at_rate(&a, 0.01, 500.0);
        s.ss_done = true;
        // the increase relative to the plain additive step, `ai_mbps` per stage (the base is
        // 6 ms below target, more than the 4 ms span: the whole step), at an answer at the
        // base `t_ms` into the flow
        let mut boost = |t_ms: u64| {
            let before = s.rate;
            a.on_event(&mut s, Nanos::from_us(t_ms * 1000), rtt(500.0));
            (s.rate - before) / (0.2e6 * f64::from(s.stage))
        };
        assert!(close(boost(20), 1.0, 1e-9), "the first empty answer");
        // 20 ms into the run: 1 + 20/200, where the fabric's 1.5 ms gave accel_max at once
        assert!(close(boost(40), 1.1, 1e-9));
        for t in 3..21 {
            boost(t * 20);
        }
        // 400 ms into the run: accel_max = 3
        assert!(close(boost(420), 3.0, 1e-9));
    }

    #[test]
    fn a_responder_reporting_spare_capacity_gives_the_full_boost_at_once() {
        let a = linear();
        assert!(close(a.params().get("np_util_th").unwrap(), 0.95, 0.0));
        let answer = |rtt_us: f64, u: Option<f64>| Event::Rtt {
            rtt: Nanos::from_us_f64(rtt_us),
            remote: Some(super::super::RemoteStamps {
                received: Nanos(0),
                sent: Nanos(0),
                rx_util: u.map(RxUtil::from_fraction),
            }),
        };
        // the increase at a first below-target sample, relative to the plain linear step
        let boost = |rtt_us: f64, u: Option<f64>| {
            let mut s = flow_at(&a, 14.0, 1000);
            let plain = 0.03 * ((a.target_ns(&s) / 1e3 - rtt_us) / 15.0).min(1.0);
            a.on_event(&mut s, Nanos::from_us(3400), answer(rtt_us, u));
            (s.rate / 14e6 - 1.0) / plain
        };
        // 86 % utilised (a departure): accel_max = 3 on the very first sample, queue or not
        assert!(close(boost(5.0, Some(0.86)), 3.0, 1e-9));
        assert!(close(boost(8.0, Some(0.86)), 3.0, 1e-9));
        // at or above the threshold, or no report (a verbs responder): the plain step
        assert!(close(boost(5.0, Some(0.96)), 1.0, 1e-9));
        assert!(close(boost(5.0, None), 1.0, 1e-9));
        // it never turns a cut into an increase: above target the report is ignored
        let mut s = flow_at(&a, 14.0, 1000);
        let target_us = a.target_ns(&s) / 1e3;
        a.on_event(
            &mut s,
            Nanos::from_us(3400),
            answer(target_us + 5.0, Some(0.5)),
        );
        assert!(s.rate < 14e6);
        // off in CTCC
        let c = RttAimd::ctcc();
        assert!(close(c.params().get("np_util_th").unwrap(), 0.0, 0.0));
    }

    #[test]
    fn rx_util_is_16_bit_fixed_point_clamped_to_one() {
        assert_eq!(RxUtil::from_fraction(0.5), RxUtil(32_768));
        assert_eq!(RxUtil::from_fraction(1.7), RxUtil::FULL);
        assert_eq!(RxUtil::from_fraction(-1.0), RxUtil(0));
        assert_eq!(RxUtil::from_fraction(f64::NAN), RxUtil(0));
        assert!(close(RxUtil::from_fraction(0.9).fraction(), 0.9, 1e-4));
    }

    #[test]
    fn nack_halves_and_floor_and_line_hold() {
        let a = RttAimd::ctcc();
        let mut s = at_rate(&a, 8.0, 10.0);
        let d = a.on_event(&mut s, Nanos(1), Event::Nack(NackKind::OutOfSequence));
        assert_eq!(d.rate, Rate::from_gbps(4.0));
        let d = a.on_event(&mut s, Nanos(2), Event::Nack(NackKind::ReceiverNotReady));
        assert_eq!(d.rate, Rate::from_gbps(4.0), "RNR is not congestion");
        for i in 0..200 {
            a.on_event(&mut s, Nanos(3 + i), Event::Nack(NackKind::OutOfSequence));
        }
        assert!(close(s.rate, 100e9 / 16384.0, 1e-9));
        assert!(s.rate * 7000.0 <= 100e9, "7,000 floors fit in 100 G");
        let mut s = at_rate(&a, 99.99, 10.0);
        for i in 0..20 {
            a.on_event(&mut s, Nanos::from_us(10 * (i + 1)), rtt(10.0));
        }
        assert_eq!(s.rate, 100e9);
    }

    #[test]
    fn ack_rtt_mode_updates_once_per_probe_bytes_acked_and_never_probes() {
        let mut a = RttAimd::ctcc();
        a.params_mut().set("ack_rtt", 1.0).unwrap();
        a.params_mut().set("init_rate_mbps", 100_000.0).unwrap();
        assert!(a.wants_acks());
        let (mut s, d) = started(&a);
        assert!(!d.probe, "no probe at start in ACK mode");
        assert_eq!(d.rate, LINE, "the ns-3 code starts at line rate");
        for i in 0..20 {
            assert!(
                !a.on_event(&mut s, Nanos(i), Event::Sent { bytes: 4160 })
                    .probe
            );
        }
        let ack = |us: f64| Event::Ack {
            bytes: 4096,
            rtt: Some(Nanos::from_us_f64(us)),
        };
        // first ACK: base RTT, below target -> +min(rate/4, 100 Mb/s)
        let r0 = s.rate;
        a.on_event(&mut s, Nanos::from_us(10), ack(5.0));
        assert_eq!(s.base, 5_000);
        assert!(close(s.rate, (r0 + 100e6).min(100e9), 1e-12));
        // at 4,096 B per ACK, the next update waits for the third ACK (>= 9,000 B)
        s.rate = 1e9;
        a.on_event(&mut s, Nanos::from_us(20), ack(500.0));
        a.on_event(&mut s, Nanos::from_us(30), ack(500.0));
        assert_eq!(s.rate, 1e9, "8,192 B acknowledged: no update yet");
        a.on_event(&mut s, Nanos::from_us(40), ack(500.0));
        assert!(
            s.rate < 1e9,
            "12,288 B: one update, far above target: a cut"
        );
        // an ACK without a timestamp (host-clock completions) changes nothing
        let r = s.rate;
        for i in 0..10 {
            a.on_event(
                &mut s,
                Nanos::from_us(50 + i),
                Event::Ack {
                    bytes: 4096,
                    rtt: None,
                },
            );
        }
        assert_eq!(s.rate, r);
        // probe mode (the default) ignores ACKs
        let b = RttAimd::ctcc();
        assert!(!b.wants_acks());
        let (mut t, _) = started(&b);
        let r = t.rate;
        b.on_event(&mut t, Nanos::from_us(10), ack(500.0));
        assert_eq!(t.rate, r);
    }

    #[test]
    fn probe_per_rtt_asks_for_the_next_probe_on_every_answer() {
        let mut a = RttAimd::ctcc();
        let (mut s, _) = started(&a);
        assert!(!a.on_event(&mut s, Nanos::from_us(10), rtt(10.0)).probe);
        a.params_mut().set("probe_per_rtt", 1.0).unwrap();
        for i in 0..5 {
            let d = a.on_event(&mut s, Nanos::from_us(20 + 10 * i), rtt(10.0));
            assert!(
                d.probe,
                "one probe always in flight (DOCA template cadence)"
            );
        }
        // the byte cadence still holds in between
        let mut probes = 0;
        for i in 0..9 {
            if a.on_event(&mut s, Nanos::from_us(100 + i), Event::Sent { bytes: 1000 })
                .probe
            {
                probes += 1;
            }
        }
        assert_eq!(probes, 1);
    }

    #[test]
    fn probes_every_probe_bytes_and_on_start() {
        let a = RttAimd::ctcc();
        let (mut s, d) = started(&a);
        assert!(d.probe);
        assert_eq!(d.rate, Rate::from_bps_f64(100e9 / 16384.0));
        let mut probes = 0;
        for i in 0..90 {
            if a.on_event(&mut s, Nanos(i), Event::Sent { bytes: 1000 })
                .probe
            {
                probes += 1;
            }
        }
        assert_eq!(probes, 10);
        let b = RttAimd::new();
        let (mut s, _) = started(&b);
        assert!(
            !b.on_event(&mut s, Nanos::from_us(10), Event::Sent { bytes: 100 })
                .probe
        );
        assert!(
            b.on_event(&mut s, Nanos::from_us(250), Event::Sent { bytes: 100 })
                .probe,
            "time bound"
        );
    }

    #[test]
    fn remote_turnaround_is_subtracted_and_probe_loss_decreases() {
        let a = RttAimd::ctcc();
        let mut s = at_rate(&a, 10.0, 10.0);
        let ev = Event::Rtt {
            rtt: Nanos::from_us(30),
            remote: Some(super::super::RemoteStamps {
                received: Nanos::from_us(5),
                sent: Nanos::from_us(25),
                rx_util: None,
            }),
        };
        let before = s.rate;
        a.on_event(&mut s, Nanos::from_us(100), ev);
        assert!(s.rate > before, "net RTT 10 us is below target");
        let before = s.rate;
        a.on_event(
            &mut s,
            Nanos::from_us(500),
            Event::ProbeLost {
                waited: Nanos::from_us(300),
            },
        );
        assert!(s.rate < before);
    }
}
