//! Errors at the `cc` crate boundary: parameter changes and scenario loading.
//!
//! Every variant names the offending input, so a management-socket or command-line user sees
//! which name or value was refused.

/// What can go wrong when configuring an algorithm or loading a simulator scenario.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CcError {
    /// No parameter of that name exists for this algorithm.
    #[error("unknown parameter `{name}` for algorithm `{algorithm}`")]
    UnknownParam {
        /// The algorithm asked.
        algorithm: &'static str,
        /// The name that was not found.
        name: String,
    },
    /// The value is outside the parameter's published range (or not a finite number).
    #[error("parameter `{name}` = {value} is outside [{min}, {max}]")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// The refused value.
        value: f64,
        /// Lowest allowed value.
        min: f64,
        /// Highest allowed value.
        max: f64,
    },
    /// No algorithm of that name exists.
    #[error("unknown algorithm `{0}` (known: rtt-aimd, ctcc, swift, timely, dcqcn, fixed)")]
    UnknownAlgorithm(String),
    /// The scenario text is not valid TOML or does not match the scenario schema.
    #[error("scenario does not parse: {0}")]
    ScenarioSyntax(String),
    /// The scenario parses but describes something the simulator cannot run.
    #[error("invalid scenario: {0}")]
    ScenarioInvalid(String),
    /// A scenario error at a line of its file (1-based).
    #[error("line {line}: {source}")]
    ScenarioAt {
        /// The line of the key the error is about.
        line: usize,
        /// The error.
        source: Box<CcError>,
    },
}
