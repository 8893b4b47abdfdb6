//! Counters and latency histograms, updated lock-free by pollers and rendered in the Prometheus
//! text exposition format (version 0.0.4) by the metrics endpoint.
//!
//! Every counter is a relaxed atomic: pollers only add, the renderer only reads; a scrape may
//! see a read counted in `reads` a moment before its bytes, which Prometheus tolerates.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the latency buckets in microseconds (a 1-2-5 series from 1 µs to 1 s).
pub const LATENCY_BUCKETS_US: [u64; 19] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
    200_000, 500_000, 1_000_000,
];

/// A latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len()],
    overflow: AtomicU64,
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation of `ns` nanoseconds.
    pub fn record_ns(&self, ns: u64) {
        let us = ns / 1000;
        match LATENCY_BUCKETS_US.iter().position(|&b| us <= b) {
            Some(i) => self.buckets[i].fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The smallest bucket bound (µs) at or below which a fraction `q` of observations fall;
    /// `None` when empty or when the quantile lies beyond the last bucket.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= want {
                return Some(LATENCY_BUCKETS_US[i]);
            }
        }
        None
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = LATENCY_BUCKETS_US[i] as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.overflow.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count());
    }
}

/// Per-namespace I/O metrics.
#[derive(Debug, Default)]
pub struct NamespaceMetrics {
    /// Read commands completed.
    pub reads: AtomicU64,
    /// Write commands completed.
    pub writes: AtomicU64,
    /// Bytes read by hosts.
    pub bytes_read: AtomicU64,
    /// Bytes written by hosts.
    pub bytes_written: AtomicU64,
    /// Commands completed with an error status.
    pub errors: AtomicU64,
    /// Read latency, capsule received to response posted.
    pub read_latency: Histogram,
    /// Write latency, capsule received to response posted.
    pub write_latency: Histogram,
}

impl NamespaceMetrics {
    /// Counts a completed read of `bytes` that took `ns`.
    pub fn read_done(&self, bytes: u64, ns: u64) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        self.read_latency.record_ns(ns);
    }

    /// Counts a completed write of `bytes` that took `ns`.
    pub fn write_done(&self, bytes: u64, ns: u64) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.write_latency.record_ns(ns);
    }
}

/// Target-wide data-path counters.
#[derive(Debug, Default)]
pub struct DataPathMetrics {
    /// Payload bytes copied between the wire and the drives. The zero-copy data path keeps this
    /// at 0; any code path that must copy payload adds to it, so tests can assert the claim.
    pub payload_bytes_copied: AtomicU64,
}

fn counter(out: &mut String, name: &str, help: &str, samples: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

/// Renders the metrics of `namespaces` (label value → metrics) and the data path.
pub fn render(namespaces: &[(String, &NamespaceMetrics)], data_path: &DataPathMetrics) -> String {
    let mut out = String::new();
    let lbl = |ns: &str| {
        format!(
            "namespace=\"{}\"",
            ns.replace('\\', "\\\\").replace('"', "\\\"")
        )
    };
    let per = |f: &dyn Fn(&NamespaceMetrics) -> u64| -> Vec<(String, u64)> {
        namespaces.iter().map(|(n, m)| (lbl(n), f(m))).collect()
    };
    counter(
        &mut out,
        "raidline_reads_total",
        "Read commands completed.",
        &per(&|m| m.reads.load(Ordering::Relaxed)),
    );
    counter(
        &mut out,
        "raidline_writes_total",
        "Write commands completed.",
        &per(&|m| m.writes.load(Ordering::Relaxed)),
    );
    counter(
        &mut out,
        "raidline_read_bytes_total",
        "Bytes read by hosts.",
        &per(&|m| m.bytes_read.load(Ordering::Relaxed)),
    );
    counter(
        &mut out,
        "raidline_written_bytes_total",
        "Bytes written by hosts.",
        &per(&|m| m.bytes_written.load(Ordering::Relaxed)),
    );
    counter(
        &mut out,
        "raidline_command_errors_total",
        "I/O commands completed with an error status.",
        &per(&|m| m.errors.load(Ordering::Relaxed)),
    );
    for (name, help, pick) in [
        (
            "raidline_read_latency_seconds",
            "Read latency from capsule to response.",
            (|m: &NamespaceMetrics| &m.read_latency) as fn(&NamespaceMetrics) -> &Histogram,
        ),
        (
            "raidline_write_latency_seconds",
            "Write latency from capsule to response.",
            |m: &NamespaceMetrics| &m.write_latency,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (n, m) in namespaces {
            pick(m).render(&mut out, name, &lbl(n));
        }
    }
    let _ = writeln!(
        out,
        "# HELP raidline_payload_bytes_copied_total Payload bytes copied on the data path (0 = zero-copy held).\n# TYPE raidline_payload_bytes_copied_total counter\nraidline_payload_bytes_copied_total {}",
        data_path.payload_bytes_copied.load(Ordering::Relaxed)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_quantiles() {
        let h = Histogram::default();
        for us in [1u64, 3, 3, 40, 900] {
            h.record_ns(us * 1000);
        }
        h.record_ns(5_000_000_000); // 5 s: overflow
        assert_eq!(h.count(), 6);
        assert_eq!(h.quantile_us(0.5), Some(5));
        assert_eq!(h.quantile_us(0.8), Some(1_000));
        assert_eq!(h.quantile_us(1.0), None);
        assert_eq!(Histogram::default().quantile_us(0.5), None);
    }

    #[test]
    fn renders_prometheus_text() {
        let m = NamespaceMetrics::default();
        m.read_done(4096, 30_000);
        m.write_done(8192, 2_000_000);
        let dp = DataPathMetrics::default();
        let text = render(&[("nqn.a:b/1".into(), &m)], &dp);
        assert!(
            text.contains("raidline_reads_total{namespace=\"nqn.a:b/1\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("raidline_written_bytes_total{namespace=\"nqn.a:b/1\"} 8192\n"));
        assert!(text.contains("# TYPE raidline_read_latency_seconds histogram"));
        assert!(
            text.contains(
                "raidline_read_latency_seconds_bucket{namespace=\"nqn.a:b/1\",le=\"0.00005\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("raidline_write_latency_seconds_count{namespace=\"nqn.a:b/1\"} 1\n"));
        assert!(text.contains("raidline_payload_bytes_copied_total 0\n"));
        // Every sample line is "name{labels} value" or "name value".
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').unwrap();
            assert!(v.parse::<f64>().is_ok(), "{line}");
        }
    }
}
