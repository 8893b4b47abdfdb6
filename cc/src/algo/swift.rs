//! Swift: target-delay AIMD on a congestion window (Kumar et al., SIGCOMM 2020).
//!
//! Per ACK with a delay sample (`delay` = the packet's RTT, `base` = lowest seen):
//! - `target = base + hops·per_hop + clamp(α/sqrt(cwnd) + β', 0, fs_range)`, with
//!   `fs_range = fs_factor·base`, `α = fs_range/(1/sqrt(fs_min_cwnd) − 1/sqrt(fs_max_cwnd))`,
//!   `β' = −α/sqrt(fs_max_cwnd)` (cwnd in packets);
//! - `delay < target`: `cwnd += ai·n/cwnd` when `cwnd ≥ 1`, else `cwnd += ai·n` (n packets acked);
//! - otherwise, at most once per RTT: `cwnd *= max(1 − β·(delay − target)/delay, 1 − max_mdf)`;
//! - NACK (loss): `cwnd *= 1 − max_mdf`, also at most once per RTT.
//!
//! Output: with `cwnd ≥ 1` a window of `cwnd·mtu` bytes at line rate; below one packet a window of
//! one packet paced at `cwnd·mtu/rtt` — one packet every `rtt/cwnd`, which is what lets Swift
//! survive very large incasts. `cwnd` stays in `[min_cwnd, max_cwnd]`.

use super::{clamp_rate, CongestionControl, Decision, Event, NackKind};
use crate::params::{ParamSpec, Params};
use crate::units::{Nanos, Rate};

const AI: usize = 0;
const BETA: usize = 1;
const MAX_MDF: usize = 2;
const HOPS: usize = 3;
const PER_HOP_US: usize = 4;
const FS_FACTOR: usize = 5;
const FS_MIN_CWND: usize = 6;
const FS_MAX_CWND: usize = 7;
const MIN_CWND: usize = 8;
const MAX_CWND: usize = 9;
const INIT_CWND: usize = 10;
const MTU: usize = 11;
const INIT_RTT_US: usize = 12;

static SPECS: [ParamSpec; 13] = [
    ParamSpec {
        name: "ai",
        min: 0.0,
        max: 100.0,
        default: 1.0,
        doc: "additive increase, packets per RTT",
    },
    ParamSpec {
        name: "beta",
        min: 0.0,
        max: 1.0,
        default: 0.8,
        doc: "multiplicative decrease gain",
    },
    ParamSpec {
        name: "max_mdf",
        min: 0.0,
        max: 1.0,
        default: 0.5,
        doc: "largest decrease fraction per RTT",
    },
    ParamSpec {
        name: "hops",
        min: 0.0,
        max: 64.0,
        default: 1.0,
        doc: "switch hops on the path",
    },
    ParamSpec {
        name: "per_hop_us",
        min: 0.0,
        max: 1000.0,
        default: 1.0,
        doc: "target added per hop, us",
    },
    ParamSpec {
        name: "fs_factor",
        min: 0.0,
        max: 100.0,
        default: 5.0,
        doc: "flow-scaling range as a multiple of base RTT",
    },
    ParamSpec {
        name: "fs_min_cwnd",
        min: 0.001,
        max: 1e6,
        default: 0.1,
        doc: "cwnd (packets) where flow scaling reaches its range",
    },
    ParamSpec {
        name: "fs_max_cwnd",
        min: 0.001,
        max: 1e6,
        default: 100.0,
        doc: "cwnd (packets) where flow scaling reaches zero",
    },
    ParamSpec {
        name: "min_cwnd",
        min: 1e-6,
        max: 1e6,
        default: 0.001,
        doc: "window floor, packets",
    },
    ParamSpec {
        name: "max_cwnd",
        min: 1.0,
        max: 1e7,
        default: 1000.0,
        doc: "window ceiling, packets",
    },
    ParamSpec {
        name: "init_cwnd",
        min: 1e-6,
        max: 1e7,
        default: 1.0,
        doc: "window at flow start, packets",
    },
    ParamSpec {
        name: "mtu",
        min: 64.0,
        max: 65536.0,
        default: 4096.0,
        doc: "packet payload, bytes",
    },
    ParamSpec {
        name: "init_rtt_us",
        min: 0.1,
        max: 1e6,
        default: 10.0,
        doc: "RTT assumed before the first sample (pacing), us",
    },
];

/// Per-flow state (48 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
    cwnd: f64,
    line: f64,
    base: u64,
    srtt: u64,
    last_decrease: u64,
    have_decreased: bool,
}

/// Swift (see the module header).
#[derive(Clone, Debug)]
pub struct Swift {
    params: Params,
}

impl Swift {
    /// Simulator values from CC.md (ai 1.0, β 0.8, max_mdf 0.5).
    pub fn new() -> Swift {
        Swift {
            params: Params::new("swift", &SPECS),
        }
    }

    fn target_ns(&self, s: &State) -> f64 {
        let p = &self.params;
        let base = s.base as f64;
        let fs_range = p.at(FS_FACTOR) * base;
        let alpha = fs_range / (1.0 / p.at(FS_MIN_CWND).sqrt() - 1.0 / p.at(FS_MAX_CWND).sqrt());
        let beta_p = -alpha / p.at(FS_MAX_CWND).sqrt();
        let fs = (alpha / s.cwnd.max(1e-9).sqrt() + beta_p).clamp(0.0, fs_range.max(0.0));
        base + p.at(HOPS) * p.at(PER_HOP_US) * 1e3 + fs
    }

    fn can_decrease(s: &State, now: Nanos) -> bool {
        !s.have_decreased || now.0.saturating_sub(s.last_decrease) >= s.srtt
    }

    fn clamp(&self, s: &mut State) {
        let p = &self.params;
        s.cwnd = s
            .cwnd
            .clamp(p.at(MIN_CWND), p.at(MAX_CWND).max(p.at(MIN_CWND)));
    }

    fn decision(&self, s: &State) -> Decision {
        let mtu = self.params.at(MTU);
        if s.cwnd >= 1.0 {
            Decision {
                rate: Rate::from_bps_f64(s.line),
                window: Some((s.cwnd * mtu) as u64),
                probe: false,
                timer: None,
            }
        } else {
            let rate = s.cwnd * mtu * 8.0 / (s.srtt.max(1) as f64 / 1e9);
            Decision {
                rate: Rate::from_bps_f64(clamp_rate(rate, 1.0, s.line)),
                window: Some(mtu as u64),
                probe: false,
                timer: None,
            }
        }
    }
}

impl Default for Swift {
    fn default() -> Swift {
        Swift::new()
    }
}

impl CongestionControl for Swift {
    type State = State;

    fn name(&self) -> &'static str {
        "swift"
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }

    fn wants_acks(&self) -> bool {
        true
    }

    fn current_rate(&self, s: &State) -> Rate {
        let mtu = self.params.at(MTU);
        let by_window = s.cwnd * mtu * 8.0 / (s.srtt.max(1) as f64 / 1e9);
        Rate::from_bps_f64(by_window.min(s.line))
    }

    fn on_event(&self, s: &mut State, now: Nanos, event: Event) -> Decision {
        let p = &self.params;
        match event {
            Event::FlowStart { line_rate } => {
                *s = State {
                    cwnd: p.at(INIT_CWND),
                    line: line_rate.bps(),
                    base: u64::MAX,
                    srtt: Nanos::from_us_f64(p.at(INIT_RTT_US)).0,
                    ..State::default()
                };
                self.clamp(s);
            }
            Event::Ack {
                bytes,
                rtt: Some(rtt),
            } => {
                let delay = rtt.0.max(1);
                s.base = s.base.min(delay);
                s.srtt = delay;
                let acked = bytes as f64 / p.at(MTU);
                let target = self.target_ns(s);
                if (delay as f64) < target {
                    if s.cwnd >= 1.0 {
                        s.cwnd += p.at(AI) * acked / s.cwnd;
                    } else {
                        s.cwnd += p.at(AI) * acked;
                    }
                } else if Self::can_decrease(s, now) {
                    let d = delay as f64;
                    let f = (1.0 - p.at(BETA) * (d - target) / d).max(1.0 - p.at(MAX_MDF));
                    s.cwnd *= f;
                    s.last_decrease = now.0;
                    s.have_decreased = true;
                }
                self.clamp(s);
            }
            Event::Nack(NackKind::OutOfSequence) | Event::ProbeLost { .. } => {
                if Self::can_decrease(s, now) {
                    s.cwnd *= 1.0 - p.at(MAX_MDF);
                    s.last_decrease = now.0;
                    s.have_decreased = true;
                    self.clamp(s);
                }
            }
            Event::Ack { rtt: None, .. }
            | Event::Nack(_)
            | Event::Sent { .. }
            | Event::Cnp
            | Event::Rtt { .. }
            | Event::Timer => {}
        }
        self.decision(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn ack(us: f64) -> Event {
        Event::Ack {
            bytes: 4096,
            rtt: Some(Nanos::from_us_f64(us)),
        }
    }

    #[test]
    fn flow_scaling_term_spans_its_range() {
        let a = Swift::new();
        let (mut s, _) = started(&a);
        s.base = 10_000;
        // fs_range = 5 * base = 50 us: full range at cwnd 0.1, zero at cwnd 100
        s.cwnd = 0.1;
        assert!(close(a.target_ns(&s), 10_000.0 + 1_000.0 + 50_000.0, 1e-9));
        s.cwnd = 100.0;
        assert!(close(a.target_ns(&s), 11_000.0, 1e-9));
        s.cwnd = 0.001;
        assert!(
            close(a.target_ns(&s), 61_000.0, 1e-9),
            "clamped to fs_range"
        );
        assert!(std::mem::size_of::<State>() <= super::super::MAX_STATE_BYTES);
    }

    #[test]
    fn additive_increase_per_ack() {
        let a = Swift::new();
        let (mut s, _) = started(&a);
        s.cwnd = 4.0;
        a.on_event(&mut s, Nanos::from_us(10), ack(10.0));
        assert!(close(s.cwnd, 4.25, 1e-9), "{}", s.cwnd);
        s.cwnd = 0.5;
        let d = a.on_event(&mut s, Nanos::from_us(20), ack(10.0));
        assert!(close(s.cwnd, 1.5, 1e-9));
        assert_eq!(d.window, Some(6144));
    }

    #[test]
    fn decrease_once_per_rtt_bounded_by_max_mdf() {
        let a = Swift::new();
        let (mut s, _) = started(&a);
        a.on_event(&mut s, Nanos::from_us(1), ack(10.0)); // base 10 us
        s.cwnd = 50.0;
        let target = a.target_ns(&s);
        a.on_event(&mut s, Nanos::from_us(100), ack(30.0));
        let expect = 50.0 * (1.0 - 0.8 * (30_000.0 - target) / 30_000.0);
        assert!(close(s.cwnd, expect, 1e-9), "{} vs {}", s.cwnd, expect);
        let after = s.cwnd;
        a.on_event(&mut s, Nanos::from_us(110), ack(30.0));
        assert_eq!(s.cwnd, after, "not twice within one RTT");
        a.on_event(&mut s, Nanos::from_ms(20), ack(10_000.0));
        assert!(close(s.cwnd, after * 0.5, 1e-9), "max_mdf bounds the cut");
    }

    #[test]
    fn sub_packet_window_paces_one_packet_per_rtt_over_cwnd() {
        let a = Swift::new();
        let (mut s, _) = started(&a);
        a.on_event(&mut s, Nanos::from_us(1), ack(10.0));
        s.cwnd = 0.01;
        let d = a.decision(&s);
        // one 4096-byte packet every 10 us / 0.01 = 1 ms -> 32.768 Mb/s
        assert!(close(d.rate.bps(), 4096.0 * 8.0 / 1e-3, 1e-6), "{}", d.rate);
        assert_eq!(d.window, Some(4096));
        for i in 0..100 {
            a.on_event(
                &mut s,
                Nanos::from_ms(i + 1),
                Event::Nack(NackKind::OutOfSequence),
            );
        }
        assert!(close(s.cwnd, 0.001, 1e-9), "floor holds");
    }
}
