//! Congestion control for Raidline: algorithms, per-QP pacing, RTT probing and a simulator.
//!
//! - [`algo`]: the [`CongestionControl`](algo::CongestionControl) trait (events in, a decision
//!   out, a fixed-size per-flow state, named run-time parameters) and the algorithms `rtt-aimd`
//!   (Raidline's default), `ctcc`, `swift`, `timely`, `dcqcn` and `fixed`.
//! - [`qp`], [`pacer`] and [`probe`]: the runtime side shared by the live target and the
//!   simulator — a per-QP controller that applies an algorithm's decisions to a token bucket with
//!   a window and to one-probe-in-flight RTT bookkeeping; none of them reads a clock.
//! - [`netrtt`]: the live target's RTT signal, a probe's RTT net of the QP's own data queued
//!   ahead of it.
//! - [`sim`]: `raidline-ccsim`'s discrete-event, packet-level network simulator.
//!
//! Invariant across the crate: algorithms are pure functions of (parameters, state, now, event);
//! only runtimes own time.

pub mod algo;
pub mod error;
pub mod netrtt;
pub mod pacer;
pub mod params;
pub mod probe;
pub mod qp;
pub mod sim;
pub mod units;

pub use error::CcError;
pub use units::{Nanos, Rate};
