//! The congestion-control interface and its algorithms.
//!
//! Modelled on NVIDIA DOCA PCC: the runtime (the simulator or the live pacer) owns time, probes
//! and enforcement, and calls one pure handler per [`Event`] with the flow's small fixed-size
//! state; the handler answers with a [`Decision`] (rate, optional window, whether to send a probe,
//! the next timer). Algorithms keep no per-flow data outside that state and no clock: `now` is an
//! argument. Invariants every algorithm keeps (checked by its tests): the decided rate lies in
//! `[min_rate, line_rate]` and the state is `Copy` and at most [`MAX_STATE_BYTES`] bytes.

pub mod dcqcn;
pub mod fixed;
pub mod rtt_aimd;
pub mod swift;
pub mod timely;

use crate::error::CcError;
use crate::params::Params;
use crate::units::{Nanos, Rate};

pub use dcqcn::Dcqcn;
pub use fixed::FixedRate;
pub use rtt_aimd::RttAimd;
pub use swift::Swift;
pub use timely::Timely;

/// Upper bound on an algorithm's per-flow state (DOCA PCC gives each flow a small fixed context).
pub const MAX_STATE_BYTES: usize = 128;

/// Why the responder refused or reordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackKind {
    /// A packet sequence gap: a packet was lost (go-back-N follows).
    OutOfSequence,
    /// Receiver not ready: no receive buffer posted. Not a network signal.
    ReceiverNotReady,
    /// A duplicate RDMA READ request.
    DuplicateRead,
}

/// Timestamps taken by the remote NIC for one probe, on the remote clock, and what else the
/// responder put in its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteStamps {
    /// When the probe arrived at the responder.
    pub received: Nanos,
    /// When the responder sent the answer.
    pub sent: Nanos,
    /// The responder port's receive utilisation over its recent past, when the responder reports
    /// it (a DOCA PCC notification point can put it in the answer's custom data, as NVIDIA's RTT
    /// template does with its receive byte counter); `None` from a plain responder such as a
    /// verbs RDMA WRITE's ACK.
    pub rx_util: Option<RxUtil>,
}

/// A receive utilisation: bytes received over a window ÷ what the port's line rate could carry
/// in it, in units of 1/65,536 (16-bit fixed point, the DOCA PCC convention), at most 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RxUtil(u32);

impl RxUtil {
    /// Full utilisation.
    pub const FULL: RxUtil = RxUtil(1 << 16);

    /// From a fraction (clamped to `[0, 1]`; NaN counts as 0).
    pub fn from_fraction(f: f64) -> RxUtil {
        let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        RxUtil((f * 65_536.0).round() as u32)
    }

    /// As a fraction in `[0, 1]`.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / 65_536.0
    }
}

impl RemoteStamps {
    /// Time the probe spent inside the responder (to subtract from the round trip).
    pub fn turnaround(&self) -> Nanos {
        self.sent - self.received
    }
}

/// One input to an algorithm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// The flow starts on a link of `line_rate`; the state is fresh (`Default`).
    FlowStart {
        /// The sender's link rate: the highest rate the algorithm may decide.
        line_rate: Rate,
    },
    /// A burst of data left the NIC.
    Sent {
        /// Bytes on the wire in the burst.
        bytes: u64,
    },
    /// Data was acknowledged (a completion). Delivered only when [`CongestionControl::wants_acks`].
    Ack {
        /// Bytes newly acknowledged.
        bytes: u64,
        /// Round-trip time of the acknowledged packet when the NIC timestamps it.
        rtt: Option<Nanos>,
    },
    /// The responder sent a negative acknowledgement.
    Nack(NackKind),
    /// A congestion notification packet (ECN echoed by the receiver, as in RoCEv2 DCQCN).
    Cnp,
    /// A probe came back.
    Rtt {
        /// Round trip measured by the sender (send to answer).
        rtt: Nanos,
        /// The responder's own timestamps, when it offers them.
        remote: Option<RemoteStamps>,
    },
    /// A probe timed out; the runtime will retry it.
    ProbeLost {
        /// How long the runtime waited.
        waited: Nanos,
    },
    /// The timer the last decision asked for has fired.
    Timer,
}

/// What the algorithm wants after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Pacing rate, `min_rate ≤ rate ≤ line_rate`.
    pub rate: Rate,
    /// Most bytes in flight, when the algorithm is window based.
    pub window: Option<u64>,
    /// Ask the runtime for an RTT probe (it keeps at most one in flight per flow).
    pub probe: bool,
    /// When to deliver [`Event::Timer`]; replaces any earlier timer, `None` cancels it.
    pub timer: Option<Nanos>,
}

/// A congestion-control algorithm: a pure handler over a per-flow state and a parameter set.
///
/// Call order per flow: [`Event::FlowStart`] first on a `Default` state, then any events in time
/// order. One algorithm value serves every flow of a runtime; changing a parameter takes effect at
/// each flow's next event.
pub trait CongestionControl {
    /// Per-flow state, small and fixed size (`size_of` ≤ [`MAX_STATE_BYTES`]).
    type State: Copy + Default + std::fmt::Debug;

    /// The algorithm's name as used in scenario files and on the management socket.
    fn name(&self) -> &'static str;

    /// Current parameters.
    fn params(&self) -> &Params;

    /// Parameters for writing by name ([`Params::set`] checks the range).
    fn params_mut(&mut self) -> &mut Params;

    /// Whether [`Event::Ack`] should be delivered (DOCA masks ACK events by default).
    fn wants_acks(&self) -> bool {
        false
    }

    /// Handle one event at `now` and decide.
    fn on_event(&self, state: &mut Self::State, now: Nanos, event: Event) -> Decision;

    /// The rate the flow currently runs at (for metrics; no side effects).
    fn current_rate(&self, state: &Self::State) -> Rate;
}

/// Set several parameters by name, stopping at the first refusal.
pub fn apply_params<A: CongestionControl>(
    algo: &mut A,
    pairs: &[(String, f64)],
) -> Result<(), CcError> {
    for (name, value) in pairs {
        algo.params_mut().set(name, *value)?;
    }
    Ok(())
}

/// Clamp a rate in bit/s to `[min, max]` (min wins when the two cross).
pub(crate) fn clamp_rate(rate: f64, min: f64, max: f64) -> f64 {
    if rate.is_nan() {
        return min;
    }
    rate.min(max).max(min)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers shared by the algorithm tests.
    use super::*;

    /// 100 Gb/s.
    pub const LINE: Rate = Rate(100_000_000_000);

    /// A started flow.
    pub fn started<A: CongestionControl>(a: &A) -> (A::State, Decision) {
        let mut s = A::State::default();
        let d = a.on_event(&mut s, Nanos::ZERO, Event::FlowStart { line_rate: LINE });
        (s, d)
    }

    /// An RTT sample without remote stamps.
    pub fn rtt(us: f64) -> Event {
        Event::Rtt {
            rtt: Nanos::from_us_f64(us),
            remote: None,
        }
    }

    /// Relative difference.
    pub fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }
}
