//! TIMELY: RTT-gradient rate control (Mittal et al., SIGCOMM 2015).
//!
//! Per RTT sample (from ACKs), at most once per `min_rtt_us`:
//! `rtt_diff = (1−a)·rtt_diff + a·(rtt − prev)`, `g = rtt_diff / min_rtt`;
//! `rtt < t_low` → `rate += δ`; `rtt > t_high` → `rate *= 1 − β·(1 − t_high/rtt)`;
//! `g ≤ 0` → `rate += N·δ` (N = `hai_n` after `hai_count` negative gradients in a row, else 1);
//! otherwise `rate *= 1 − β·g`. NACK (loss) halves. The rate stays in `[min_rate, line_rate]`.

use super::{clamp_rate, CongestionControl, Decision, Event, NackKind};
use crate::params::{ParamSpec, Params};
use crate::units::{Nanos, Rate};

const A: usize = 0;
const BETA: usize = 1;
const T_LOW_US: usize = 2;
const T_HIGH_US: usize = 3;
const MIN_RTT_US: usize = 4;
const DELTA_MBPS: usize = 5;
const HAI_COUNT: usize = 6;
const HAI_N: usize = 7;
const MIN_RATE_MBPS: usize = 8;
const INIT_RATE_MBPS: usize = 9;

static SPECS: [ParamSpec; 10] = [
    ParamSpec {
        name: "a",
        min: 0.0,
        max: 1.0,
        default: 0.875,
        doc: "EWMA weight of the newest RTT difference",
    },
    ParamSpec {
        name: "beta",
        min: 0.0,
        max: 1.0,
        default: 0.8,
        doc: "multiplicative decrease gain",
    },
    ParamSpec {
        name: "t_low_us",
        min: 0.0,
        max: 1e6,
        default: 50.0,
        doc: "below this RTT always increase, us",
    },
    ParamSpec {
        name: "t_high_us",
        min: 0.0,
        max: 1e6,
        default: 500.0,
        doc: "above this RTT always decrease, us",
    },
    ParamSpec {
        name: "min_rtt_us",
        min: 0.1,
        max: 1e6,
        default: 20.0,
        doc: "gradient normaliser and update spacing, us",
    },
    ParamSpec {
        name: "delta_mbps",
        min: 0.0,
        max: 1e5,
        default: 10.0,
        doc: "additive step, Mb/s",
    },
    ParamSpec {
        name: "hai_count",
        min: 1.0,
        max: 1000.0,
        default: 5.0,
        doc: "negative gradients in a row before hyper increase",
    },
    ParamSpec {
        name: "hai_n",
        min: 1.0,
        max: 1000.0,
        default: 5.0,
        doc: "hyper-increase multiple of delta",
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
        doc: "rate at flow start, Mb/s",
    },
];

/// Per-flow state (48 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
    rate: f64,
    line: f64,
    rtt_diff: f64,
    prev_rtt: u64,
    last_update: u64,
    neg_count: u32,
    have_prev: bool,
}

/// TIMELY (see the module header).
#[derive(Clone, Debug)]
pub struct Timely {
    params: Params,
}

impl Timely {
    /// Simulator values from CC.md.
    pub fn new() -> Timely {
        Timely {
            params: Params::new("timely", &SPECS),
        }
    }

    fn update(&self, s: &mut State, now: Nanos, rtt: u64) {
        let p = &self.params;
        let r = rtt as f64;
        if !s.have_prev {
            s.prev_rtt = rtt;
            s.have_prev = true;
            s.last_update = now.0;
            return;
        }
        if (now.0.saturating_sub(s.last_update) as f64) < p.at(MIN_RTT_US) * 1e3 {
            return;
        }
        let a = p.at(A);
        s.rtt_diff = (1.0 - a) * s.rtt_diff + a * (r - s.prev_rtt as f64);
        s.prev_rtt = rtt;
        s.last_update = now.0;
        let g = s.rtt_diff / (p.at(MIN_RTT_US) * 1e3);
        let delta = p.at(DELTA_MBPS) * 1e6;
        let t_high = p.at(T_HIGH_US) * 1e3;
        if r < p.at(T_LOW_US) * 1e3 {
            s.rate += delta;
            s.neg_count = 0;
        } else if r > t_high {
            s.rate *= 1.0 - p.at(BETA) * (1.0 - t_high / r);
            s.neg_count = 0;
        } else if g <= 0.0 {
            s.neg_count = s.neg_count.saturating_add(1);
            let n = if f64::from(s.neg_count) >= p.at(HAI_COUNT) {
                p.at(HAI_N)
            } else {
                1.0
            };
            s.rate += n * delta;
        } else {
            s.rate *= 1.0 - (p.at(BETA) * g).min(1.0);
            s.neg_count = 0;
        }
        s.rate = clamp_rate(s.rate, p.at(MIN_RATE_MBPS) * 1e6, s.line);
    }
}

impl Default for Timely {
    fn default() -> Timely {
        Timely::new()
    }
}

impl CongestionControl for Timely {
    type State = State;

    fn name(&self) -> &'static str {
        "timely"
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
        Rate::from_bps_f64(s.rate)
    }

    fn on_event(&self, s: &mut State, now: Nanos, event: Event) -> Decision {
        let p = &self.params;
        match event {
            Event::FlowStart { line_rate } => {
                *s = State {
                    line: line_rate.bps(),
                    ..State::default()
                };
                s.rate = clamp_rate(
                    p.at(INIT_RATE_MBPS) * 1e6,
                    p.at(MIN_RATE_MBPS) * 1e6,
                    s.line,
                );
            }
            Event::Ack { rtt: Some(rtt), .. } => self.update(s, now, rtt.0),
            Event::Rtt { rtt, .. } => self.update(s, now, rtt.0),
            Event::Nack(NackKind::OutOfSequence) => {
                s.rate = clamp_rate(s.rate / 2.0, p.at(MIN_RATE_MBPS) * 1e6, s.line);
            }
            Event::Ack { rtt: None, .. }
            | Event::Nack(_)
            | Event::Sent { .. }
            | Event::Cnp
            | Event::ProbeLost { .. }
            | Event::Timer => {}
        }
        Decision {
            rate: Rate::from_bps_f64(s.rate),
            window: None,
            probe: false,
            timer: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn at(a: &Timely, gbps: f64, first_rtt_us: f64) -> State {
        let (mut s, _) = started(a);
        s.rate = gbps * 1e9;
        a.on_event(&mut s, Nanos::ZERO, rtt(first_rtt_us));
        s
    }

    #[test]
    fn low_rtt_adds_delta_high_rtt_cuts() {
        let a = Timely::new();
        let mut s = at(&a, 10.0, 30.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(40.0));
        assert!(close(s.rate, 10e9 + 10e6, 1e-12));
        let mut s = at(&a, 10.0, 600.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(1000.0));
        assert!(close(s.rate, 10e9 * (1.0 - 0.8 * (1.0 - 0.5)), 1e-12));
        assert!(std::mem::size_of::<State>() <= super::super::MAX_STATE_BYTES);
    }

    #[test]
    fn gradient_region() {
        let a = Timely::new();
        // rising: diff = 0.875 * 20 us; g = 17.5/20 = 0.875; rate *= 1 - 0.8*0.875 = 0.3
        let mut s = at(&a, 10.0, 100.0);
        a.on_event(&mut s, Nanos::from_us(100), rtt(120.0));
        assert!(close(s.rate, 10e9 * 0.3, 1e-9), "{}", s.rate);
        // falling five times in a row: the fifth adds 5 delta
        let mut s = at(&a, 10.0, 400.0);
        for i in 1..=5u64 {
            let before = s.rate;
            a.on_event(
                &mut s,
                Nanos::from_us(100 * i),
                rtt(400.0 - 10.0 * i as f64),
            );
            let n = if i >= 5 { 5.0 } else { 1.0 };
            assert!(close(s.rate - before, n * 10e6, 1e-6), "step {i}");
        }
        // updates closer than min_rtt are ignored
        let before = s.rate;
        a.on_event(&mut s, Nanos::from_us(505), rtt(60.0));
        assert_eq!(s.rate, before);
    }
}
