//! Measurements of one run: the bottleneck queue, goodput, drops, PFC, latency, fairness.
//!
//! Definitions (also in `cc/README.md`):
//! - queue: bytes in the receiver's egress FIFO. Peak over the whole run; p99 time-weighted over
//!   the measurement window (1 KB buckets).
//! - goodput: payload bytes delivered in order to the receiver over the measurement window.
//! - small-flow latency: for messages and flows of at most [`SMALL_BYTES`], from the moment the
//!   application submits it to the moment its last byte is delivered in order (one way), for
//!   completions inside the measurement window.
//! - Jain index `(Σx)²/(n·Σx²)` over the rates the algorithm holds for the active flows of the
//!   groups marked `fairness`, sampled every `sample_us`; reported as the mean over the window.
//! - convergence: after each step (the last flow of a `fairness` group has started, or the group
//!   stopped), the time until every later
//!   sample of that phase has Jain ≥ [`CONVERGED_JAIN`] and goodput (averaged over the trailing
//!   [`GOODPUT_WINDOW`]) ≥ [`CONVERGED_UTIL`] of the line's payload rate; the largest over the
//!   steps inside the run.

use super::engine::Counters;
use super::scenario::Scenario;
use crate::units::Nanos;

/// Messages and flows up to this size count as small.
pub const SMALL_BYTES: u64 = 64 * 1024;
/// Fairness threshold for convergence (CC.md's field convention).
pub const CONVERGED_JAIN: f64 = 0.95;
/// Goodput threshold for convergence, as a fraction of the line's payload rate.
pub const CONVERGED_UTIL: f64 = 0.9;
/// Goodput is averaged over this trailing window when testing convergence.
pub const GOODPUT_WINDOW: Nanos = Nanos(1_000_000);

const BUCKET: u64 = 1024;

/// One point of the time series.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Time.
    pub t: Nanos,
    /// Bottleneck queue, bytes.
    pub queue: u64,
    /// Goodput over the last interval, Gb/s.
    pub goodput_gbps: f64,
    /// Jain index over active fairness flows (None: none active).
    pub jain: Option<f64>,
    /// Sum of the rates the algorithm holds for the active fairness flows, Gb/s (what they
    /// offer; the pacers' rates count data packets with their headers).
    pub offered_gbps: f64,
    /// Rates of the tracked flows, Mb/s (NaN when inactive).
    pub rates_mbps: Vec<f64>,
}

/// Everything a run reports.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Row label.
    pub label: String,
    /// Algorithm name.
    pub algorithm: &'static str,
    /// PFC on.
    pub pfc: bool,
    /// Goodput over the measurement window, Gb/s.
    pub goodput_gbps: f64,
    /// Peak queue over the run, bytes.
    pub peak_queue: u64,
    /// Time-weighted p99 queue over the measurement window, bytes.
    pub p99_queue: u64,
    /// Time-weighted mean queue over the measurement window, bytes (1 KB resolution).
    pub mean_queue: u64,
    /// Packets dropped by the switch (data and probes).
    pub drops: u64,
    /// Sum over sender ports of the time spent paused.
    pub pfc_pause: Nanos,
    /// Small-flow latency: mean, p99, count.
    pub small_latency: Option<(f64, f64, usize)>,
    /// Mean Jain index over the measurement window.
    pub jain: Option<f64>,
    /// Worst convergence time over the steps (None: some step never converged).
    pub convergence: Option<Nanos>,
    /// Whether any step was measured.
    pub has_steps: bool,
    /// The time series.
    pub samples: Vec<Sample>,
    /// Tracked flow ids (the columns of `Sample::rates_mbps`).
    pub tracked: Vec<u32>,
    /// Engine counters.
    pub counters: Counters,
    /// The packet-conservation audit held at the end.
    pub conserved: bool,
}

/// Collects measurements while the engine runs.
pub struct Recorder {
    scenario: String,
    label: String,
    algorithm: &'static str,
    pfc: bool,
    measure_from: Nanos,
    end: Nanos,
    line_goodput_gbps: f64,
    fair: Vec<u32>,
    tracked: Vec<u32>,
    steps: Vec<Nanos>,
    queue: u64,
    queue_since: Nanos,
    peak: u64,
    hist: Vec<u64>,
    drops: u64,
    delivered_window: u64,
    delivered_interval: u64,
    last_sample: Nanos,
    latencies: Vec<f64>,
    samples: Vec<Sample>,
}

impl Recorder {
    /// For one run of `sc`.
    pub fn new(
        sc: &Scenario,
        label: String,
        algorithm: &'static str,
        pfc: bool,
        fair: Vec<u32>,
        tracked: Vec<u32>,
        steps: Vec<Nanos>,
    ) -> Recorder {
        let n = &sc.network;
        let eff = f64::from(n.mtu) / f64::from(n.mtu + n.header_bytes);
        Recorder {
            scenario: sc.name.clone(),
            label,
            algorithm,
            pfc,
            measure_from: Nanos::from_secs_f64(sc.measure_from_ms * 1e-3),
            end: Nanos::from_secs_f64(sc.duration_ms * 1e-3),
            line_goodput_gbps: n.line_rate_gbps * eff,
            fair,
            tracked,
            steps,
            queue: 0,
            queue_since: Nanos::ZERO,
            peak: 0,
            hist: Vec::new(),
            drops: 0,
            delivered_window: 0,
            delivered_interval: 0,
            last_sample: Nanos::ZERO,
            latencies: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// Current bottleneck queue.
    pub fn queue_bytes(&self) -> u64 {
        self.queue
    }

    /// The queue changed to `bytes` at `now`.
    pub fn queue_change(&mut self, now: Nanos, bytes: u64) {
        self.account_queue(now);
        self.queue = bytes;
        self.peak = self.peak.max(bytes);
    }

    fn account_queue(&mut self, now: Nanos) {
        let from = self.queue_since.max(self.measure_from);
        if now > from {
            let b = (self.queue / BUCKET) as usize;
            if self.hist.len() <= b {
                self.hist.resize(b + 1, 0);
            }
            self.hist[b] += (now - from).0;
        }
        self.queue_since = now;
    }

    /// A packet was dropped.
    pub fn drop_packet(&mut self) {
        self.drops += 1;
    }

    /// Payload delivered in order.
    pub fn delivered(&mut self, now: Nanos, payload: u64) {
        self.delivered_interval += payload;
        if now >= self.measure_from {
            self.delivered_window += payload;
        }
    }

    /// A message or flow of `bytes` completed after `latency`.
    pub fn completion(&mut self, now: Nanos, latency: Nanos, bytes: u64) {
        if bytes <= SMALL_BYTES && now >= self.measure_from {
            self.latencies.push(latency.as_us_f64());
        }
    }

    /// Take a sample; `rate(flow)` is the algorithm's rate in bit/s of an active flow.
    pub fn sample(&mut self, now: Nanos, rate: impl Fn(u32) -> Option<f64>) {
        let dt = now - self.last_sample;
        let goodput = if dt.0 > 0 {
            self.delivered_interval as f64 * 8.0 / dt.0 as f64
        } else {
            0.0
        };
        self.delivered_interval = 0;
        self.last_sample = now;
        let active: Vec<f64> = self.fair.iter().filter_map(|&f| rate(f)).collect();
        let jain = jain(&active);
        let offered_gbps = active.iter().sum::<f64>() / 1e9;
        let rates_mbps = self
            .tracked
            .iter()
            .map(|&f| rate(f).map_or(f64::NAN, |r| r / 1e6))
            .collect();
        self.samples.push(Sample {
            t: now,
            queue: self.queue,
            goodput_gbps: goodput,
            jain,
            offered_gbps,
            rates_mbps,
        });
    }

    /// Close the run.
    pub fn finish(mut self, counters: Counters, pfc_pause: Nanos, conserved: bool) -> RunResult {
        self.account_queue(self.end);
        let window = (self.end - self.measure_from).as_secs_f64();
        let goodput_gbps = self.delivered_window as f64 * 8.0 / window / 1e9;
        let total: u64 = self.hist.iter().sum();
        let mut acc = 0u64;
        let mut p99 = 0u64;
        for (i, t) in self.hist.iter().enumerate() {
            acc += t;
            if total > 0 && acc as f64 >= 0.99 * total as f64 {
                p99 = (i as u64 + 1) * BUCKET;
                break;
            }
        }
        let weighted: f64 = self
            .hist
            .iter()
            .enumerate()
            .map(|(i, t)| (i as f64 + 0.5) * BUCKET as f64 * *t as f64)
            .sum();
        let mean_queue = if total > 0 {
            (weighted / total as f64) as u64
        } else {
            0
        };
        let small_latency = (!self.latencies.is_empty()).then(|| {
            let mut l = self.latencies.clone();
            l.sort_by(f64::total_cmp);
            let mean = l.iter().sum::<f64>() / l.len() as f64;
            let idx = ((l.len() as f64 * 0.99).ceil() as usize).clamp(1, l.len()) - 1;
            (mean, l[idx], l.len())
        });
        let in_window: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.t >= self.measure_from)
            .filter_map(|s| s.jain)
            .collect();
        let jain =
            (!in_window.is_empty()).then(|| in_window.iter().sum::<f64>() / in_window.len() as f64);
        let (convergence, has_steps) = self.convergence();
        RunResult {
            scenario: self.scenario,
            label: self.label,
            algorithm: self.algorithm,
            pfc: self.pfc,
            goodput_gbps,
            peak_queue: self.peak,
            p99_queue: p99,
            mean_queue,
            drops: self.drops,
            pfc_pause,
            small_latency,
            jain,
            convergence,
            has_steps,
            samples: self.samples,
            tracked: self.tracked,
            counters,
            conserved,
        }
    }

    fn convergence(&self) -> (Option<Nanos>, bool) {
        if self.fair.is_empty() {
            return (None, false);
        }
        let mut steps: Vec<Nanos> = self
            .steps
            .iter()
            .copied()
            .filter(|s| *s < self.end)
            .collect();
        steps.sort();
        steps.dedup();
        // goodput averaged over the trailing GOODPUT_WINDOW, so that packet-level burstiness
        // within one sample does not count as a loss of throughput
        let smoothed = |i: usize| {
            let t = self.samples[i].t;
            let w: Vec<f64> = self.samples[..=i]
                .iter()
                .rev()
                .take_while(|x| t - x.t < GOODPUT_WINDOW)
                .map(|x| x.goodput_gbps)
                .collect();
            w.iter().sum::<f64>() / w.len().max(1) as f64
        };
        let ok = |i: usize| {
            self.samples[i].jain.is_some_and(|j| j >= CONVERGED_JAIN)
                && smoothed(i) >= CONVERGED_UTIL * self.line_goodput_gbps
        };
        let mut worst = Some(Nanos::ZERO);
        for (k, &s) in steps.iter().enumerate() {
            let next = steps.get(k + 1).copied().unwrap_or(self.end);
            let phase: Vec<usize> = (0..self.samples.len())
                .filter(|&i| self.samples[i].t > s && self.samples[i].t < next)
                .collect();
            // the first sample from which every later sample of the phase is ok
            let mut from = None;
            for &i in phase.iter().rev() {
                if ok(i) {
                    from = Some(i);
                } else {
                    break;
                }
            }
            let t = from.map(|i| self.samples[i].t - s);
            worst = match (worst, t) {
                (Some(w), Some(t)) => Some(w.max(t)),
                _ => None,
            };
        }
        (worst, !steps.is_empty())
    }
}

/// Jain's fairness index of `xs` (1 for equal shares, 1/n for one flow taking everything).
pub fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && sq > 0.0).then(|| sum * sum / (xs.len() as f64 * sq))
}

/// The markdown table of several runs.
pub fn markdown_table(results: &[RunResult]) -> String {
    let mut s = String::from(
        "| scenario | run | goodput Gb/s | peak queue MB | p99 queue MB | mean queue MB | drops | PFC pause ms | small-flow latency avg / p99 us | Jain (mean) | convergence ms |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        let lat = r
            .small_latency
            .map_or("–".to_owned(), |(m, p, _)| format!("{m:.1} / {p:.1}"));
        let jain = r.jain.map_or("–".to_owned(), |j| format!("{j:.3}"));
        let conv = if !r.has_steps {
            "–".to_owned()
        } else {
            r.convergence.map_or("not reached".to_owned(), |c| {
                format!("{:.2}", c.as_secs_f64() * 1e3)
            })
        };
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.3} | {:.3} | {:.3} | {} | {:.2} | {} | {} | {} |\n",
            r.scenario,
            r.label,
            r.goodput_gbps,
            r.peak_queue as f64 / 1e6,
            r.p99_queue as f64 / 1e6,
            r.mean_queue as f64 / 1e6,
            r.drops,
            r.pfc_pause.as_secs_f64() * 1e3,
            lat,
            jain,
            conv
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_extremes() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
    }
}
