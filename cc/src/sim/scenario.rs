//! Scenario files: the network, the traffic groups and the algorithm runs, parsed once.
//!
//! A scenario is TOML (see `cc/scenarios/*.toml`); unknown keys are refused. [`Scenario::parse`]
//! checks every range, so the engine never re-validates. Topology: one output-queued switch with a
//! shared buffer, one port per host; every flow goes from its sender to the single receiver.

use serde::Deserialize;
use std::collections::BTreeMap;

use crate::error::CcError;

/// A whole scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in output file names.
    pub name: String,
    /// One line for the results table.
    #[serde(default)]
    pub description: String,
    /// RNG seed (start jitter, ECN marking, arrivals).
    #[serde(default = "one")]
    pub seed: u64,
    /// Simulated time.
    pub duration_ms: f64,
    /// Start of the window over which throughput, queue p99 and fairness are measured.
    pub measure_from_ms: f64,
    /// Sampling period of the time series (plots, fairness, convergence).
    #[serde(default = "hundred")]
    pub sample_us: f64,
    /// The network.
    #[serde(default)]
    pub network: Network,
    /// Traffic.
    pub groups: Vec<Group>,
    /// Algorithms to run on this scenario, one simulation each.
    pub runs: Vec<RunSpec>,
}

fn one() -> u64 {
    1
}
fn hundred() -> f64 {
    100.0
}

/// Links, switch and NIC model.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Network {
    /// Every link's rate (hosts and the switch port to the receiver).
    pub line_rate_gbps: f64,
    /// One-way propagation delay of each host–switch link.
    pub link_delay_us: f64,
    /// Data payload per packet.
    pub mtu: u32,
    /// Per-packet header and framing bytes on the wire.
    pub header_bytes: u32,
    /// Probe size on the wire.
    pub probe_bytes: u32,
    /// Shared switch buffer.
    pub buffer_mb: f64,
    /// PFC dynamic threshold: pause an ingress port when its bytes exceed `alpha · free buffer`.
    pub pfc_alpha: f64,
    /// ECN marking starts above this egress queue.
    pub ecn_kmin_kb: f64,
    /// ECN marking probability reaches `ecn_pmax` here (and 1 above).
    pub ecn_kmax_kb: f64,
    /// Marking probability at Kmax.
    pub ecn_pmax: f64,
    /// Whether the switch marks ECN at all.
    pub ecn: bool,
    /// Receiver: at most one CNP per flow per this interval.
    pub cnp_interval_us: f64,
    /// First probe timeout (doubles on loss, up to 64×).
    pub probe_timeout_us: f64,
    /// Go-back-N retransmission timeout.
    pub rto_us: f64,
    /// Pacer bucket depth (default two packets: with one-packet buckets, many flows sharing a
    /// NIC phase-lock into bursts).
    pub burst_bytes: u32,
    /// Pacer dither in `[0, 1]` (default [`crate::qp::DEFAULT_JITTER`]; see [`crate::pacer`]).
    pub pace_jitter: f64,
    /// Extra delay, uniform in `[0, reverse_jitter_us)`, on every answer from the receiver (ACK,
    /// NACK, CNP, probe answer): RTT measurement noise such as NIC or host processing jitter.
    /// Default 0 (off; no random numbers are drawn, so other runs are unchanged).
    pub reverse_jitter_us: f64,
    /// The receiver (the notification point) reports in every probe answer its port's receive
    /// utilisation over the last `np_window_us` (all bytes on the wire that reached it ÷ what the
    /// line could carry in that time), as a DOCA PCC NP program can in the answer's custom data.
    /// Default 1,000 us; 0: answers carry no utilisation (a plain verbs responder, as in the live
    /// daemon). Only algorithms that read it (`rtt-aimd` with `np_util_th` > 0) are affected.
    pub np_window_us: f64,
}

impl Default for Network {
    fn default() -> Network {
        Network {
            line_rate_gbps: 100.0,
            link_delay_us: 1.0,
            mtu: 4096,
            header_bytes: 64,
            probe_bytes: 64,
            buffer_mb: 32.0,
            pfc_alpha: 0.125,
            ecn_kmin_kb: 400.0,
            ecn_kmax_kb: 1600.0,
            ecn_pmax: 0.2,
            ecn: true,
            cnp_interval_us: 50.0,
            probe_timeout_us: 300.0,
            rto_us: 2000.0,
            burst_bytes: 8320,
            pace_jitter: crate::qp::DEFAULT_JITTER,
            reverse_jitter_us: 0.0,
            np_window_us: 1000.0,
        }
    }
}

/// What a group's flows send.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Traffic {
    /// Always backlogged.
    Long,
    /// One flow per host sending `message_bytes`, the next one `interval_us` after the sender
    /// learns that the previous one completed (closed loop, like a latency test).
    Messages,
    /// New flows arrive per host as a Poisson process, sizes drawn from `sizes_kb`.
    Poisson,
}

/// A set of sender hosts with the same traffic.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Label.
    pub name: String,
    /// Sender hosts in the group, each on its own switch port.
    pub hosts: u32,
    /// Flows (QPs) per host for `long` traffic.
    #[serde(default = "one_u32")]
    pub flows_per_host: u32,
    /// When the first flow starts.
    #[serde(default)]
    pub start_ms: f64,
    /// Flow starts spread uniformly (seeded) over this long.
    #[serde(default)]
    pub spread_ms: f64,
    /// When every flow of the group stops sending new data.
    #[serde(default)]
    pub stop_ms: Option<f64>,
    /// Traffic kind.
    pub traffic: Traffic,
    /// `messages`: bytes per message.
    #[serde(default)]
    pub message_bytes: u32,
    /// `messages`: period.
    #[serde(default)]
    pub interval_us: f64,
    /// `poisson`: offered load of the whole group.
    #[serde(default)]
    pub load_gbps: f64,
    /// `poisson`: flow sizes, drawn uniformly.
    #[serde(default)]
    pub sizes_kb: Vec<f64>,
    /// Whether the group's flows count in the fairness index (long flows only).
    #[serde(default)]
    pub fairness: bool,
}

fn one_u32() -> u32 {
    1
}

/// One simulation: an algorithm, its parameter overrides, PFC on or off.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Row label (defaults to the algorithm name plus "+pfc").
    #[serde(default)]
    pub label: Option<String>,
    /// `rtt-aimd`, `ctcc`, `swift`, `timely`, `dcqcn` or `fixed`.
    pub algorithm: String,
    /// Lossless (PFC) or lossy switch.
    #[serde(default)]
    pub pfc: bool,
    /// Parameter overrides by name.
    #[serde(default)]
    pub params: BTreeMap<String, f64>,
}

impl RunSpec {
    /// The row label.
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| {
            if self.pfc {
                format!("{}+pfc", self.algorithm)
            } else {
                self.algorithm.clone()
            }
        })
    }
}

/// Points a validation error at the line of the key it names (TOML syntax errors carry their
/// own line already): the first identifier of the message that is a key of the file, inside
/// the named group's `[[groups]]` table for a group's error; the `algorithm = "…"` line for an
/// unknown algorithm; the parameter's line for a run's parameter.
fn at_line(text: &str, e: CcError) -> CcError {
    let lines: Vec<&str> = text.lines().collect();
    // The line range of each [[groups]] table and its name.
    let mut groups: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    let mut open: Option<(Option<String>, usize)> = None;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            if let Some((name, start)) = open.take() {
                groups.push((name.unwrap_or_default(), start..i));
            }
            if t == "[[groups]]" {
                open = Some((None, i));
            }
        } else if let Some((name @ None, _)) = open.as_mut() {
            if let Some(v) = t.strip_prefix("name").map(str::trim_start) {
                if let Some(v) = v.strip_prefix('=') {
                    *name = Some(v.trim().trim_matches('"').to_owned());
                }
            }
        }
    }
    if let Some((name, start)) = open {
        groups.push((name.unwrap_or_default(), start..lines.len()));
    }
    let key_at = |key: &str, range: std::ops::Range<usize>| {
        range.into_iter().find(|&i| {
            let t = lines[i].trim_start();
            let has = |s: &str| {
                s.strip_prefix(key)
                    .is_some_and(|r| r.trim_start().starts_with('='))
            };
            has(t) || t.split(['{', ',']).any(|part| has(part.trim_start()))
        })
    };
    let line = match &e {
        CcError::UnknownAlgorithm(name) => {
            let want = format!("\"{name}\"");
            (0..lines.len()).find(|&i| {
                let t = lines[i].trim_start();
                t.starts_with("algorithm") && t.contains(&want)
            })
        }
        CcError::OutOfRange { name, .. } => key_at(name, 0..lines.len()),
        CcError::UnknownParam { name, .. } => key_at(name, 0..lines.len()),
        CcError::ScenarioInvalid(msg) => {
            let (range, rest) = match msg.strip_prefix("group `").and_then(|r| r.split_once('`')) {
                Some((g, rest)) => (
                    groups
                        .iter()
                        .find(|(n, _)| n == g)
                        .map_or(0..lines.len(), |(_, r)| r.clone()),
                    rest,
                ),
                None => (0..lines.len(), msg.as_str()),
            };
            rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.contains('_') || w.len() > 3)
                .find_map(|w| key_at(w, range.clone()))
        }
        _ => None,
    };
    match line {
        Some(i) => CcError::ScenarioAt {
            line: i + 1,
            source: Box::new(e),
        },
        None => e,
    }
}

fn check(ok: bool, what: &str) -> Result<(), CcError> {
    if ok {
        Ok(())
    } else {
        Err(CcError::ScenarioInvalid(what.to_owned()))
    }
}

fn pos(x: f64) -> bool {
    x.is_finite() && x > 0.0
}
fn nonneg(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

impl Scenario {
    /// Parse and check a scenario.
    pub fn parse(text: &str) -> Result<Scenario, CcError> {
        let s: Scenario =
            toml::from_str(text).map_err(|e| CcError::ScenarioSyntax(e.to_string()))?;
        s.validate().map_err(|e| at_line(text, e))?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), CcError> {
        let n = &self.network;
        check(
            pos(self.duration_ms) && self.duration_ms <= 10_000.0,
            "duration_ms must be in (0, 10000]",
        )?;
        check(
            nonneg(self.measure_from_ms) && self.measure_from_ms < self.duration_ms,
            "measure_from_ms must be in [0, duration_ms)",
        )?;
        check(pos(self.sample_us), "sample_us must be > 0")?;
        check(
            pos(n.line_rate_gbps) && n.line_rate_gbps <= 10_000.0,
            "line_rate_gbps must be in (0, 10000]",
        )?;
        check(nonneg(n.link_delay_us), "link_delay_us must be >= 0")?;
        check((64..=65_536).contains(&n.mtu), "mtu must be in [64, 65536]")?;
        check(
            n.header_bytes <= 1024 && (1..=4096).contains(&n.probe_bytes),
            "header_bytes <= 1024, probe_bytes in [1, 4096]",
        )?;
        check(pos(n.buffer_mb), "buffer_mb must be > 0")?;
        check(pos(n.pfc_alpha), "pfc_alpha must be > 0")?;
        check(
            nonneg(n.ecn_kmin_kb) && n.ecn_kmax_kb > n.ecn_kmin_kb,
            "need 0 <= ecn_kmin_kb < ecn_kmax_kb",
        )?;
        check(
            (0.0..=1.0).contains(&n.ecn_pmax),
            "ecn_pmax must be in [0, 1]",
        )?;
        check(
            nonneg(n.cnp_interval_us) && pos(n.probe_timeout_us) && pos(n.rto_us),
            "cnp_interval_us >= 0, probe_timeout_us and rto_us > 0",
        )?;
        check(n.burst_bytes >= 1, "burst_bytes must be >= 1")?;
        check(
            (0.0..=1.0).contains(&n.pace_jitter),
            "pace_jitter must be in [0, 1]",
        )?;
        check(
            (0.0..=1000.0).contains(&n.reverse_jitter_us),
            "reverse_jitter_us must be in [0, 1000]",
        )?;
        check(
            (0.0..=1e6).contains(&n.np_window_us),
            "np_window_us must be in [0, 1e6]",
        )?;
        check(
            !self.groups.is_empty() && !self.runs.is_empty(),
            "need at least one group and one run",
        )?;
        let mut hosts = 0u64;
        let mut flows = 0u64;
        for g in &self.groups {
            let ctx = |m: &str| format!("group `{}`: {m}", g.name);
            check(
                g.hosts >= 1 && g.flows_per_host >= 1,
                &ctx("hosts and flows_per_host must be >= 1"),
            )?;
            check(
                nonneg(g.start_ms) && nonneg(g.spread_ms),
                &ctx("start_ms and spread_ms must be >= 0"),
            )?;
            if let Some(stop) = g.stop_ms {
                check(
                    stop.is_finite() && stop > g.start_ms,
                    &ctx("stop_ms must be after start_ms"),
                )?;
            }
            match g.traffic {
                Traffic::Long => {}
                Traffic::Messages => check(
                    g.message_bytes >= 1 && pos(g.interval_us),
                    &ctx("messages need message_bytes >= 1 and interval_us > 0"),
                )?,
                Traffic::Poisson => check(
                    pos(g.load_gbps)
                        && !g.sizes_kb.is_empty()
                        && g.sizes_kb.iter().all(|s| pos(*s) && *s <= 1e6),
                    &ctx("poisson needs load_gbps > 0 and sizes_kb in (0, 1e6]"),
                )?,
            }
            hosts += u64::from(g.hosts);
            flows += u64::from(g.hosts) * u64::from(g.flows_per_host);
        }
        check(
            hosts <= 100_000 && flows <= 1_000_000,
            "at most 100,000 hosts and 1,000,000 flows",
        )?;
        for r in &self.runs {
            crate::sim::check_algorithm(r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
name = "t"
duration_ms = 1.0
measure_from_ms = 0.5
[[groups]]
name = "g"
hosts = 2
traffic = "long"
[[runs]]
algorithm = "fixed"
"#;

    /// The error under its line, if it has one.
    fn root(e: CcError) -> CcError {
        match e {
            CcError::ScenarioAt { source, .. } => *source,
            e => e,
        }
    }

    /// Issue 20 item 7: a scenario's errors point at the line of the key they are about.
    #[test]
    fn errors_name_the_line() {
        let line = |text: &str| match Scenario::parse(text) {
            Err(CcError::ScenarioAt { line, source }) => (line, source.to_string()),
            other => panic!("{other:?}"),
        };
        let (l, m) = line(&MIN.replace("measure_from_ms = 0.5", "measure_from_ms = 5.0"));
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("measure_from_ms"), "{m}");
        let two = format!("{MIN}[[groups]]\nname = \"h\"\nhosts = 0\ntraffic = \"long\"\n");
        let (l, m) = line(&two);
        assert_eq!(l, 13, "{m}: the second group's hosts line");
        assert!(m.contains("group `h`"), "{m}");
        let (l, _) = line(&MIN.replace("\"fixed\"", "\"nope\""));
        assert_eq!(l, 10);
        let (l, _) = line(&MIN.replace(
            "algorithm = \"fixed\"",
            "algorithm = \"fixed\"\nparams = { rate_mbps = -1.0 }",
        ));
        assert_eq!(l, 11);
        assert!(
            Scenario::parse(&MIN.replace("measure_from_ms = 0.5", "measure_from_ms = 5.0"))
                .unwrap_err()
                .to_string()
                .starts_with("line 4: invalid scenario: measure_from_ms")
        );
    }

    #[test]
    fn parses_with_defaults_and_refuses_bad_input() {
        let s = Scenario::parse(MIN).unwrap();
        assert_eq!(s.network.mtu, 4096);
        assert_eq!(s.runs[0].label(), "fixed");
        assert!(matches!(
            Scenario::parse("name = 1"),
            Err(CcError::ScenarioSyntax(_))
        ));
        let bad = MIN.replace("hosts = 2", "hosts = 2\nbogus = 1");
        assert!(matches!(
            Scenario::parse(&bad),
            Err(CcError::ScenarioSyntax(_))
        ));
        let bad = MIN.replace("measure_from_ms = 0.5", "measure_from_ms = 5.0");
        assert!(matches!(
            Scenario::parse(&bad).map_err(root),
            Err(CcError::ScenarioInvalid(_))
        ));
        let bad = MIN.replace("\"fixed\"", "\"nope\"");
        assert!(matches!(
            Scenario::parse(&bad).map_err(root),
            Err(CcError::UnknownAlgorithm(_))
        ));
        let bad = MIN.replace(
            "algorithm = \"fixed\"",
            "algorithm = \"fixed\"\nparams = { rate_mbps = -1.0 }",
        );
        assert!(matches!(
            Scenario::parse(&bad).map_err(root),
            Err(CcError::OutOfRange { .. })
        ));
    }
}
