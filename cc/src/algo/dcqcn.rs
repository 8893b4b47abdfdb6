//! DCQCN: ECN-driven rate control for RoCEv2 (Zhu et al., SIGCOMM 2015), reaction point only.
//!
//! The switch marks ECN (RED between Kmin and Kmax), the receiver answers marked packets with a
//! CNP (at most one per flow per interval), and this sender reacts:
//! - on CNP: `alpha = (1−g)·alpha + g`; at most once per `dec_interval_us`: `RT = RC`,
//!   `RC *= 1 − alpha/2`, and both increase counters restart;
//! - `alpha *= (1−g)` for every `alpha_interval_us` without a CNP (computed in closed form at the
//!   next event, so no per-microsecond timer is needed);
//! - increase events come from the timer (`inc_timer_us`) and from every `byte_counter` bytes
//!   sent: while both counters are below `f` fast recovery (`RC = (RT+RC)/2`); when both exceed
//!   `f` hyper increase (`RT += hai`), otherwise additive (`RT += ai`), then `RC = (RT+RC)/2`.
//!
//! Defaults are the HPCC simulator's "Mellanox" set at 100 G (CC.md), including its 1 Gb/s
//! minimum rate — which 7,000 flows cannot share below 7 Tb/s; lower `min_rate_mbps` to see
//! DCQCN without that floor.

use super::{clamp_rate, CongestionControl, Decision, Event};
use crate::params::{ParamSpec, Params};
use crate::units::{Nanos, Rate};

const G: usize = 0;
const ALPHA_INTERVAL_US: usize = 1;
const DEC_INTERVAL_US: usize = 2;
const INC_TIMER_US: usize = 3;
const BYTE_COUNTER: usize = 4;
const F: usize = 5;
const AI_MBPS: usize = 6;
const HAI_MBPS: usize = 7;
const MIN_RATE_MBPS: usize = 8;
const INIT_RATE_FRAC: usize = 9;

static SPECS: [ParamSpec; 10] = [
    ParamSpec {
        name: "g",
        min: 0.0,
        max: 1.0,
        default: 1.0 / 256.0,
        doc: "alpha gain",
    },
    ParamSpec {
        name: "alpha_interval_us",
        min: 0.1,
        max: 1e6,
        default: 1.0,
        doc: "alpha decay period, us",
    },
    ParamSpec {
        name: "dec_interval_us",
        min: 0.0,
        max: 1e6,
        default: 4.0,
        doc: "least time between two decreases, us",
    },
    ParamSpec {
        name: "inc_timer_us",
        min: 1.0,
        max: 1e6,
        default: 300.0,
        doc: "rate-increase timer, us",
    },
    ParamSpec {
        name: "byte_counter",
        min: 1.0,
        max: 1e12,
        default: 10e6,
        doc: "bytes sent per byte-counter increase event",
    },
    ParamSpec {
        name: "f",
        min: 0.0,
        max: 100.0,
        default: 1.0,
        doc: "fast-recovery steps",
    },
    ParamSpec {
        name: "ai_mbps",
        min: 0.0,
        max: 1e6,
        default: 20.0,
        doc: "additive increase, Mb/s",
    },
    ParamSpec {
        name: "hai_mbps",
        min: 0.0,
        max: 1e6,
        default: 200.0,
        doc: "hyper increase, Mb/s",
    },
    ParamSpec {
        name: "min_rate_mbps",
        min: 0.001,
        max: 1e6,
        default: 1000.0,
        doc: "rate floor, Mb/s",
    },
    ParamSpec {
        name: "init_rate_frac",
        min: 0.0,
        max: 1.0,
        default: 1.0,
        doc: "start rate as a fraction of line rate",
    },
];

/// Per-flow state (64 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
    rc: f64,
    rt: f64,
    alpha: f64,
    line: f64,
    alpha_since: u64,
    last_decrease: u64,
    next_timer: u64,
    bytes: u64,
    t_count: u32,
    b_count: u32,
    decreased: bool,
}

/// DCQCN reaction point (see the module header).
#[derive(Clone, Debug)]
pub struct Dcqcn {
    params: Params,
}

impl Dcqcn {
    /// HPCC-simulator "Mellanox defaults" at 100 G.
    pub fn new() -> Dcqcn {
        Dcqcn {
            params: Params::new("dcqcn", &SPECS),
        }
    }

    fn decay_alpha(&self, s: &mut State, now: Nanos) {
        let period = (self.params.at(ALPHA_INTERVAL_US) * 1e3).max(1.0) as u64;
        let n = now.0.saturating_sub(s.alpha_since) / period;
        if n > 0 {
            s.alpha *= (1.0 - self.params.at(G)).powf(n as f64);
            s.alpha_since += n * period;
        }
    }

    fn increase(&self, s: &mut State) {
        let p = &self.params;
        let f = p.at(F);
        let (t, b) = (f64::from(s.t_count), f64::from(s.b_count));
        if t.max(b) < f {
            // fast recovery: RT unchanged
        } else if t.min(b) > f {
            s.rt += p.at(HAI_MBPS) * 1e6;
        } else {
            s.rt += p.at(AI_MBPS) * 1e6;
        }
        s.rt = s.rt.min(s.line);
        s.rc = clamp_rate((s.rt + s.rc) / 2.0, p.at(MIN_RATE_MBPS) * 1e6, s.line);
    }

    fn decision(&self, s: &State) -> Decision {
        Decision {
            rate: Rate::from_bps_f64(s.rc),
            window: None,
            probe: false,
            timer: Some(Nanos(s.next_timer)),
        }
    }
}

impl Default for Dcqcn {
    fn default() -> Dcqcn {
        Dcqcn::new()
    }
}

impl CongestionControl for Dcqcn {
    type State = State;

    fn name(&self) -> &'static str {
        "dcqcn"
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }

    fn current_rate(&self, s: &State) -> Rate {
        Rate::from_bps_f64(s.rc)
    }

    fn on_event(&self, s: &mut State, now: Nanos, event: Event) -> Decision {
        let p = &self.params;
        let timer = Nanos::from_us_f64(p.at(INC_TIMER_US));
        match event {
            Event::FlowStart { line_rate } => {
                let line = line_rate.bps();
                let start =
                    clamp_rate(line * p.at(INIT_RATE_FRAC), p.at(MIN_RATE_MBPS) * 1e6, line);
                *s = State {
                    rc: start,
                    rt: start,
                    alpha: 1.0,
                    line,
                    alpha_since: now.0,
                    next_timer: (now + timer).0,
                    ..State::default()
                };
            }
            Event::Cnp => {
                self.decay_alpha(s, now);
                let g = p.at(G);
                s.alpha = (1.0 - g) * s.alpha + g;
                s.alpha_since = now.0;
                let gap = Nanos::from_us_f64(p.at(DEC_INTERVAL_US)).0;
                if !s.decreased || now.0.saturating_sub(s.last_decrease) >= gap {
                    s.rt = s.rc;
                    s.rc = clamp_rate(
                        s.rc * (1.0 - s.alpha / 2.0),
                        p.at(MIN_RATE_MBPS) * 1e6,
                        s.line,
                    );
                    s.last_decrease = now.0;
                    s.decreased = true;
                    s.t_count = 0;
                    s.b_count = 0;
                    s.bytes = 0;
                    s.next_timer = (now + timer).0;
                }
            }
            Event::Timer => {
                self.decay_alpha(s, now);
                if now.0 >= s.next_timer {
                    s.t_count = s.t_count.saturating_add(1);
                    self.increase(s);
                    s.next_timer = (now + timer).0;
                }
            }
            Event::Sent { bytes } => {
                s.bytes = s.bytes.saturating_add(bytes);
                let bc = p.at(BYTE_COUNTER) as u64;
                if bc > 0 && s.bytes >= bc {
                    s.bytes -= bc;
                    s.b_count = s.b_count.saturating_add(1);
                    self.increase(s);
                }
            }
            Event::Ack { .. } | Event::Nack(_) | Event::Rtt { .. } | Event::ProbeLost { .. } => {}
        }
        self.decision(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn cnp_cuts_by_half_alpha_and_sets_target() {
        let a = Dcqcn::new();
        let (mut s, d) = started(&a);
        assert_eq!(d.rate, LINE);
        assert_eq!(d.timer, Some(Nanos::from_us(300)));
        let d = a.on_event(&mut s, Nanos::ZERO, Event::Cnp);
        // alpha stays 1 (= (1-g)*1 + g), RC = line/2, RT = line
        assert!(close(d.rate.bps(), 50e9, 1e-12));
        assert_eq!(s.rt, 100e9);
        // a second CNP within 4 us does not cut again
        let d = a.on_event(&mut s, Nanos::from_us(2), Event::Cnp);
        assert!(close(d.rate.bps(), 50e9, 1e-12));
        assert!(std::mem::size_of::<State>() <= super::super::MAX_STATE_BYTES);
    }

    #[test]
    fn alpha_decays_per_interval_without_cnp() {
        let a = Dcqcn::new();
        let (mut s, _) = started(&a);
        a.on_event(&mut s, Nanos::ZERO, Event::Cnp);
        // 100 us later: alpha = (1 - 1/256)^100, then the CNP adds g
        a.on_event(&mut s, Nanos::from_us(100), Event::Cnp);
        let g: f64 = 1.0 / 256.0;
        let alpha = (1.0 - g) * (1.0 - g).powi(100) + g;
        assert!(close(s.alpha, alpha, 1e-9), "{} vs {}", s.alpha, alpha);
        assert!(close(s.rc, 50e9 * (1.0 - alpha / 2.0), 1e-9));
    }

    #[test]
    fn recovery_then_additive_then_hyper() {
        let a = Dcqcn::new();
        let (mut s, _) = started(&a);
        a.on_event(&mut s, Nanos::ZERO, Event::Cnp); // RC 50, RT 100
        a.on_event(&mut s, Nanos::from_us(300), Event::Timer);
        // t_count = 1 = F, b_count 0: additive: RT = 100 (capped at line), RC = 75
        assert!(close(s.rc, 75e9, 1e-12));
        let mut a2 = Dcqcn::new();
        a2.params_mut().set("f", 5.0).unwrap();
        let (mut s, _) = started(&a2);
        a2.on_event(&mut s, Nanos::ZERO, Event::Cnp);
        a2.on_event(&mut s, Nanos::from_us(300), Event::Timer);
        assert!(close(s.rc, 75e9, 1e-12), "fast recovery halves the gap");
        assert_eq!(s.rt, 100e9);
        // hyper increase when both counters exceed F
        let (mut s, _) = started(&a);
        s.rc = 10e9;
        s.rt = 10e9;
        s.t_count = 2;
        s.b_count = 2;
        a.increase(&mut s);
        assert!(close(s.rt, 10.2e9, 1e-12));
        assert!(close(s.rc, 10.1e9, 1e-12));
        // early timer events do nothing
        let before = s.rc;
        a.on_event(&mut s, Nanos::from_us(1), Event::Timer);
        assert_eq!(s.rc, before);
    }

    #[test]
    fn floor_is_one_gigabit_by_default() {
        let a = Dcqcn::new();
        let (mut s, _) = started(&a);
        for i in 0..2000 {
            a.on_event(&mut s, Nanos::from_us(5 * i), Event::Cnp);
        }
        assert!(close(s.rc, 1e9, 1e-12));
    }
}
