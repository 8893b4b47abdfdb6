//! `fixed`: a constant rate, for tests and as a baseline. Ignores every signal.

use super::{clamp_rate, CongestionControl, Decision, Event};
use crate::params::{ParamSpec, Params};
use crate::units::{Nanos, Rate};

static SPECS: [ParamSpec; 1] = [ParamSpec {
    name: "rate_mbps",
    min: 0.001,
    max: 1e7,
    default: 1000.0,
    doc: "the rate, Mb/s (clamped to the line rate)",
}];

/// Per-flow state: the line rate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
    line: f64,
}

/// A constant rate.
#[derive(Clone, Debug)]
pub struct FixedRate {
    params: Params,
}

impl FixedRate {
    /// At the default rate (1 Gb/s).
    pub fn new() -> FixedRate {
        FixedRate {
            params: Params::new("fixed", &SPECS),
        }
    }

    fn rate(&self, s: &State) -> f64 {
        clamp_rate(self.params.at(0) * 1e6, 0.0, s.line)
    }
}

impl Default for FixedRate {
    fn default() -> FixedRate {
        FixedRate::new()
    }
}

impl CongestionControl for FixedRate {
    type State = State;

    fn name(&self) -> &'static str {
        "fixed"
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }

    fn current_rate(&self, s: &State) -> Rate {
        Rate::from_bps_f64(self.rate(s))
    }

    fn on_event(&self, s: &mut State, _now: Nanos, event: Event) -> Decision {
        if let Event::FlowStart { line_rate } = event {
            s.line = line_rate.bps();
        }
        Decision {
            rate: Rate::from_bps_f64(self.rate(s)),
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

    #[test]
    fn constant_and_clamped_to_line() {
        let mut a = FixedRate::new();
        let (mut s, d) = started(&a);
        assert_eq!(d.rate, Rate::from_gbps(1.0));
        assert_eq!(
            a.on_event(&mut s, Nanos(5), Event::Cnp).rate,
            Rate::from_gbps(1.0)
        );
        a.params_mut().set("rate_mbps", 500_000.0).unwrap();
        assert_eq!(a.on_event(&mut s, Nanos(6), Event::Timer).rate, LINE);
    }
}
