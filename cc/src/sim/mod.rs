//! `raidline-ccsim`: a seeded, deterministic, discrete-event, packet-level simulator that runs
//! the same [`CongestionControl`] code as the live pacer.
//!
//! [`Scenario`] describes the network and traffic; [`run`] simulates one [`RunSpec`] of it and
//! returns a [`RunResult`]; [`metrics::markdown_table`] and [`plot`] turn results into a table
//! and SVG files. The same scenario and seed always give the same result.

pub mod engine;
pub mod metrics;
pub mod plot;
pub mod queue;
pub mod rng;
pub mod scenario;

pub use engine::{Audit, Counters, Sim};
pub use metrics::{markdown_table, RunResult};
pub use scenario::{RunSpec, Scenario};

use crate::algo::{apply_params, CongestionControl, Dcqcn, FixedRate, RttAimd, Swift, Timely};
use crate::error::CcError;

/// The algorithms the simulator knows, by name.
pub const ALGORITHMS: &[&str] = &["rtt-aimd", "ctcc", "swift", "timely", "dcqcn", "fixed"];

fn build<A: CongestionControl>(mut algo: A, run: &RunSpec) -> Result<A, CcError> {
    let pairs: Vec<(String, f64)> = run.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
    apply_params(&mut algo, &pairs)?;
    Ok(algo)
}

/// Check that the run names a known algorithm and valid parameters.
pub fn check_algorithm(run: &RunSpec) -> Result<(), CcError> {
    match run.algorithm.as_str() {
        "rtt-aimd" => build(RttAimd::new(), run).map(drop),
        "ctcc" => build(RttAimd::ctcc(), run).map(drop),
        "swift" => build(Swift::new(), run).map(drop),
        "timely" => build(Timely::new(), run).map(drop),
        "dcqcn" => build(Dcqcn::new(), run).map(drop),
        "fixed" => build(FixedRate::new(), run).map(drop),
        other => Err(CcError::UnknownAlgorithm(other.to_owned())),
    }
}

/// Simulate one run of a scenario.
pub fn run(sc: &Scenario, spec: &RunSpec) -> Result<RunResult, CcError> {
    fn go<A: CongestionControl>(
        sc: &Scenario,
        spec: &RunSpec,
        algo: A,
    ) -> Result<RunResult, CcError> {
        let algo = build(algo, spec)?;
        Ok(Sim::new(sc, spec.pfc, algo, spec.label()).run())
    }
    match spec.algorithm.as_str() {
        "rtt-aimd" => go(sc, spec, RttAimd::new()),
        "ctcc" => go(sc, spec, RttAimd::ctcc()),
        "swift" => go(sc, spec, Swift::new()),
        "timely" => go(sc, spec, Timely::new()),
        "dcqcn" => go(sc, spec, Dcqcn::new()),
        "fixed" => go(sc, spec, FixedRate::new()),
        other => Err(CcError::UnknownAlgorithm(other.to_owned())),
    }
}
