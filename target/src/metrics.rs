//! Counters and latency histograms, updated lock-free by pollers and rendered in the Prometheus
//! text exposition format (version 0.0.4) by the metrics endpoint (`crate::http`).
//!
//! Every counter is a relaxed atomic: pollers only add, the renderer only reads; a scrape may
//! see a read counted in `reads` a moment before its bytes, which Prometheus tolerates.
//! Gauges that the control plane already knows — array state, rebuild progress, per-QP pacer
//! rate and RTT — come in as a plain-data [`Snapshot`] per scrape (built from the management
//! status report with [`Snapshot::from_status`]), so nothing here locks the data path.
//!
//! Output invariants (tested by parsing it back): each family has exactly one `# HELP` and one
//! `# TYPE` line, before its samples, and its samples are contiguous; label values are escaped
//! (`\\`, `\"`, `\n`); histograms carry cumulative `_bucket{le=…}` series ending at `+Inf`,
//! then `_sum` and `_count`; non-finite gauges print as `NaN`, `+Inf`, `-Inf`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::mgmt::{StatusReport, ARRAY_STATES};

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

    fn render(&self, w: &mut Exposition, name: &str, labels: &[(&str, &str)]) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = (LATENCY_BUCKETS_US[i] as f64 / 1e6).to_string();
            let mut l = labels.to_vec();
            l.push(("le", &le));
            w.sample(&bucket, &l, Value::Int(cumulative));
        }
        // The counters are read one by one while pollers add, so the +Inf bucket is derived
        // from the same reads as the finite ones (cumulative stays monotonic) and `_count` is
        // that same total.
        cumulative += self.overflow.load(Ordering::Relaxed);
        let mut l = labels.to_vec();
        l.push(("le", "+Inf"));
        w.sample(&bucket, &l, Value::Int(cumulative));
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        w.sample(&format!("{name}_sum"), labels, Value::Float(sum));
        w.sample(&format!("{name}_count"), labels, Value::Int(cumulative));
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
    /// Storage requests served on a poller's own io_uring (no thread hop).
    pub ring_requests: AtomicU64,
    /// Storage requests the blocking engine ran off the poller: on storage worker threads
    /// (`io_path = "workers"`, or arrays without a member the ring can serve), else on the
    /// array's maintenance thread (what the ring path hands back: redos after a member
    /// error, writes while a torn write waits for its redo, writes while draining).
    pub worker_requests: AtomicU64,
    /// Member reads and writes the pollers' io_uring rings issued on registered (fixed)
    /// buffers, and on other memory (each such operation pins its pages).
    pub ring_fixed_ops: AtomicU64,
    /// See [`DataPathMetrics::ring_fixed_ops`].
    pub ring_plain_ops: AtomicU64,
    /// Of those, the ones issued to the pollers' polled rings (members with poll queues,
    /// `io_poll = "on"`), to complete by polling, with no interrupt.
    pub ring_polled_ops: AtomicU64,
    /// Passes of the pollers' loops that found work, and passes that found none (the poller
    /// then spun, napped or slept).
    pub poller_work_passes: AtomicU64,
    /// See [`DataPathMetrics::poller_work_passes`].
    pub poller_empty_passes: AtomicU64,
    /// Times a poller slept on its completion channel, waker and ring (armed, woken by an
    /// event or at the time a paced transfer or probe is due), and how long in all
    /// (nanoseconds).
    pub poller_sleeps: AtomicU64,
    /// See [`DataPathMetrics::poller_sleeps`].
    pub poller_sleep_ns: AtomicU64,
    /// Short naps of a poller (50 us, not woken by events) while its CQ held completions back
    /// or parked or held writes waited: none of these notifies.
    pub poller_naps: AtomicU64,
    /// Array writes (and reads that rebuild a missing chunk) parked on a poller because a
    /// stripe they need was held (each counted once, however often it was tried again).
    pub parked_writes: AtomicU64,
    /// Array writes a poller wrote in one task with the writes that follow them (a stream
    /// gathered into whole stripes).
    pub gathered_writes: AtomicU64,
    /// Bytes of receive buffers registered now (command capsules and in-capsule data): per
    /// queue pair, or per poller with a shared receive queue.
    pub receive_bytes: std::sync::Arc<AtomicU64>,
    /// Queues whose host authenticated (DH-HMAC-CHAP), admin and I/O queues alike.
    pub auth_authenticated: AtomicU64,
    /// Authentications the target refused (a Failure1: wrong secret, nothing in common...).
    pub auth_refused: AtomicU64,
    /// Authentications the host ended with a Failure2 (e.g. the controller's response did not
    /// match the host's controller secret).
    pub auth_host_failed: AtomicU64,
    /// Reads and writes completed for iSCSI hosts over iSER (the namespace counters count both
    /// protocols; NVMe-oF's share is their sum less this, derived when scraped).
    pub iscsi_io: AtomicU64,
    /// iSCSI logins that reached full-feature phase.
    pub iscsi_logins: AtomicU64,
}

/// Gauges of one array at scrape time.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayGauges {
    /// Array name (the `array` label).
    pub name: String,
    /// One of [`ARRAY_STATES`]; anything else is exported as its own `state` label.
    pub state: String,
    /// Member slots not serving redundancy (failed, missing or still rebuilding).
    pub degraded_members: u32,
    /// Rebuild progress in `0.0..=1.0` while a rebuild runs.
    pub rebuild_ratio: Option<f64>,
    /// Scrub progress in `0.0..=1.0` while a scrub runs.
    pub scrub_ratio: Option<f64>,
    /// It did not assemble at start-up and serves nothing (state "refused").
    pub refused: bool,
    /// It was started over an unclean stop no log covered, and some of its data may read back
    /// wrong until a rebuild rewrote those stripes.
    pub write_hole_exposed: bool,
    /// Its write-hole policy is "always" (every write that is not a whole stripe is logged).
    pub write_hole_always: bool,
    /// Stripes written since start-up, by how (absent while it does not run).
    pub stripe_writes: Option<crate::mgmt::StripeWrites>,
    /// Roles with no member: (role, the device that held it or "(missing)", reason class).
    pub lost: Vec<(u32, String, String)>,
}

/// Gauges of one queue pair at scrape time.
#[derive(Clone, Debug, PartialEq)]
pub struct QpGauges {
    /// Controller id (the `cntlid` label; unique target-wide).
    pub cntlid: u16,
    /// Queue id (the `qid` label).
    pub qid: u16,
    /// Pacer rate.
    pub rate_bytes_per_s: f64,
    /// Smoothed RTT in seconds (NaN before the first sample).
    pub rtt_seconds: f64,
    /// Last raw probe RTT, seconds (NaN: none).
    pub raw_rtt_seconds: f64,
    /// Last net RTT (what the congestion law sees), seconds (NaN: none).
    pub net_rtt_seconds: f64,
    /// Windowed-minimum net RTT, seconds (NaN: none).
    pub base_rtt_seconds: f64,
    /// Commands in flight.
    pub in_flight: u32,
    /// Payload bytes moved with RDMA READ and WRITE.
    pub bytes: u64,
}

/// The control plane's gauges for one scrape: plain data, no locks held while rendering.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// One entry per array.
    pub arrays: Vec<ArrayGauges>,
    /// One entry per queue pair of every connected controller.
    pub queues: Vec<QpGauges>,
}

impl Snapshot {
    /// The gauges a management status report carries. A member counts as degraded unless its
    /// state is "active".
    pub fn from_status(r: &StatusReport) -> Snapshot {
        let arrays = r
            .arrays
            .iter()
            .map(|a| ArrayGauges {
                name: a.name.clone(),
                state: a.state.clone(),
                degraded_members: a
                    .members
                    .iter()
                    .filter(|m| !m.state.starts_with("active"))
                    .count()
                    .try_into()
                    .unwrap_or(u32::MAX),
                rebuild_ratio: a.rebuild.map(|p| p.ratio()),
                scrub_ratio: a.scrub.map(|p| p.ratio()),
                refused: a.refused.is_some() || a.state == "refused",
                write_hole_exposed: a.exposure.is_some(),
                write_hole_always: a.write_hole_policy == "always",
                stripe_writes: a.stripe_writes,
                lost: a
                    .members
                    .iter()
                    .filter_map(|m| {
                        let class = m.reason_class.clone()?;
                        Some((m.role, m.path.clone(), class))
                    })
                    .collect(),
            })
            .collect();
        let queues = r
            .controllers
            .iter()
            .flat_map(|c| {
                c.queues.iter().map(|q| QpGauges {
                    cntlid: c.cntlid,
                    qid: q.qid,
                    rate_bytes_per_s: q.rate_bytes_per_s,
                    rtt_seconds: q.rtt_us / 1e6,
                    raw_rtt_seconds: q.raw_rtt_us / 1e6,
                    net_rtt_seconds: q.net_rtt_us / 1e6,
                    base_rtt_seconds: q.base_rtt_us / 1e6,
                    in_flight: q.in_flight,
                    bytes: q.bytes,
                })
            })
            .collect();
        Snapshot { arrays, queues }
    }
}

/// A sample value.
#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

/// Builds exposition text; each family is opened once with its HELP and TYPE.
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: Value) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(val));
            }
            self.out.push('}');
        }
        let _ = match v {
            Value::Int(n) => writeln!(self.out, " {n}"),
            Value::Float(x) if x.is_nan() => writeln!(self.out, " NaN"),
            Value::Float(x) if x.is_infinite() => {
                writeln!(self.out, " {}Inf", if x > 0.0 { '+' } else { '-' })
            }
            Value::Float(x) => writeln!(self.out, " {x}"),
        };
    }

    /// A family with one sample per item.
    fn per<T>(
        &mut self,
        (name, kind, help): (&str, &str, &str),
        items: &[T],
        labels: impl Fn(&T) -> Vec<(&'static str, String)>,
        value: impl Fn(&T) -> Value,
    ) {
        self.family(name, kind, help);
        for it in items {
            let owned = labels(it);
            let l: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.sample(name, &l, value(it));
        }
    }
}

/// Escapes a label value: backslash, double quote and line feed.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Renders the metrics of `namespaces` (label value → metrics) and the data path.
pub fn render(namespaces: &[(String, &NamespaceMetrics)], data_path: &DataPathMetrics) -> String {
    render_all(namespaces, data_path, &Snapshot::default())
}

/// Renders everything: per-namespace counters and latency histograms, the data-path counter,
/// and the array and queue-pair gauges of `snapshot`.
pub fn render_all(
    namespaces: &[(String, &NamespaceMetrics)],
    data_path: &DataPathMetrics,
    snapshot: &Snapshot,
) -> String {
    let mut w = Exposition { out: String::new() };
    let ns_label = |(n, _): &(String, &NamespaceMetrics)| vec![("namespace", n.clone())];
    let load = |a: &AtomicU64| Value::Int(a.load(Ordering::Relaxed));
    type Pick = fn(&NamespaceMetrics) -> &AtomicU64;
    let counters: [(&str, &str, Pick); 5] = [
        ("raidline_reads_total", "Read commands completed.", |m| {
            &m.reads
        }),
        ("raidline_writes_total", "Write commands completed.", |m| {
            &m.writes
        }),
        ("raidline_read_bytes_total", "Bytes read by hosts.", |m| {
            &m.bytes_read
        }),
        (
            "raidline_written_bytes_total",
            "Bytes written by hosts.",
            |m| &m.bytes_written,
        ),
        (
            "raidline_command_errors_total",
            "I/O commands completed with an error status.",
            |m| &m.errors,
        ),
    ];
    for (name, help, pick) in counters {
        w.per((name, "counter", help), namespaces, ns_label, |(_, m)| {
            load(pick(m))
        });
    }
    type PickH = fn(&NamespaceMetrics) -> &Histogram;
    let histograms: [(&str, &str, PickH); 2] = [
        (
            "raidline_read_latency_seconds",
            "Read latency from capsule to response.",
            |m| &m.read_latency,
        ),
        (
            "raidline_write_latency_seconds",
            "Write latency from capsule to response.",
            |m| &m.write_latency,
        ),
    ];
    for (name, help, pick) in histograms {
        w.family(name, "histogram", help);
        for (n, m) in namespaces {
            pick(m).render(&mut w, name, &[("namespace", n)]);
        }
    }
    // The data path's counters: per family its samples, by one label or none.
    let dp = data_path;
    // NVMe-oF's reads and writes are every namespace's less iSCSI's: derived here, so the
    // NVMe path counts nothing more per command.
    let all_io: u64 = namespaces
        .iter()
        .map(|(_, m)| m.reads.load(Ordering::Relaxed) + m.writes.load(Ordering::Relaxed))
        .sum();
    let nvme_io = AtomicU64::new(all_io.saturating_sub(dp.iscsi_io.load(Ordering::Relaxed)));
    counter_families(
        &mut w,
        &[
            (
                "raidline_payload_bytes_copied_total",
                "Payload bytes copied on the data path (0 = zero-copy held).",
                "",
                &[("", &dp.payload_bytes_copied)],
            ),
            (
                "raidline_io_commands_total",
                "Reads and writes completed, by the protocol the host spoke.",
                "protocol",
                &[("nvme", &nvme_io), ("iscsi", &dp.iscsi_io)],
            ),
            (
                "raidline_iscsi_logins_total",
                "iSCSI logins over iSER that reached full-feature phase.",
                "",
                &[("", &dp.iscsi_logins)],
            ),
            (
                "raidline_storage_requests_total",
                "Storage requests by where they ran: the poller's own io_uring, or the blocking engine off the poller (storage worker threads, or with the ring the array's maintenance thread).",
                "path",
                &[("ring", &dp.ring_requests), ("workers", &dp.worker_requests)],
            ),
            (
                "raidline_poller_passes_total",
                "Passes of the pollers' loops, by whether they found work.",
                "result",
                &[("work", &dp.poller_work_passes), ("empty", &dp.poller_empty_passes)],
            ),
            (
                "raidline_poller_sleeps_total",
                "Times a poller slept, by how: on its completion channel, waker and ring until an event or a paced transfer's due time (wait), or a 50 us nap while parked or held writes or held completions were looked at again (nap).",
                "how",
                &[("wait", &dp.poller_sleeps), ("nap", &dp.poller_naps)],
            ),
        ],
    );
    w.family(
        "raidline_poller_sleep_seconds_total",
        "counter",
        "Time the pollers slept waiting for an event.",
    );
    w.sample(
        "raidline_poller_sleep_seconds_total",
        &[],
        Value::Float(dp.poller_sleep_ns.load(Ordering::Relaxed) as f64 / 1e9),
    );
    counter_families(
        &mut w,
        &[
            (
                "raidline_ring_operations_total",
                "Member reads and writes issued on the pollers' io_uring rings, by buffer: registered (fixed) or plain (its pages pinned per operation).",
                "buffer",
                &[("fixed", &dp.ring_fixed_ops), ("plain", &dp.ring_plain_ops)],
            ),
            (
                "raidline_ring_polled_operations_total",
                "Of the member reads and writes on the pollers' io_uring rings, those issued to the polled rings (members with poll queues, io_poll = on), to complete with no interrupt (an operation the kernel refused as not pollable went again by interrupt, and counts here too).",
                "",
                &[("", &dp.ring_polled_ops)],
            ),
            (
                "raidline_parked_writes_total",
                "Array writes (and reads rebuilding a missing chunk) a poller parked until a stripe they need was released.",
                "",
                &[("", &dp.parked_writes)],
            ),
            (
                "raidline_gathered_writes_total",
                "Array writes a poller wrote in one task with their neighbours (a stream written as whole stripes).",
                "",
                &[("", &dp.gathered_writes)],
            ),
        ],
    );

    w.family(
        "raidline_auth_total",
        "counter",
        "In-band authentication (DH-HMAC-CHAP) outcomes per queue: authenticated, refused by the target (Failure1), ended by the host (Failure2).",
    );
    for (result, c) in [
        ("authenticated", &data_path.auth_authenticated),
        ("refused", &data_path.auth_refused),
        ("host_failed", &data_path.auth_host_failed),
    ] {
        w.sample("raidline_auth_total", &[("result", result)], load(c));
    }

    w.family(
        "raidline_receive_buffer_bytes",
        "gauge",
        "Registered receive buffer memory (command capsules and in-capsule data).",
    );
    w.sample(
        "raidline_receive_buffer_bytes",
        &[],
        load(&data_path.receive_bytes),
    );

    render_arrays(&mut w, &snapshot.arrays);
    render_queues(&mut w, &snapshot.queues);
    w.out
}

/// One counter family per entry: (name, help, label, samples). Each sample is (the label's
/// value, its counter); with an empty label the family has one unlabelled sample.
type CounterFamily<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a AtomicU64)]);

fn counter_families(w: &mut Exposition, families: &[CounterFamily<'_>]) {
    for &(name, help, label, samples) in families {
        w.family(name, "counter", help);
        for &(value, c) in samples {
            let v = Value::Int(c.load(Ordering::Relaxed));
            if label.is_empty() {
                w.sample(name, &[], v);
            } else {
                w.sample(name, &[(label, value)], v);
            }
        }
    }
}

fn render_arrays(w: &mut Exposition, arrays: &[ArrayGauges]) {
    let name = "raidline_array_state";
    w.family(
        name,
        "gauge",
        "Array state, one-hot: 1 for the current state, 0 for the others.",
    );
    for a in arrays {
        for s in ARRAY_STATES {
            let v = u64::from(a.state == s);
            w.sample(name, &[("array", &a.name), ("state", s)], Value::Int(v));
        }
        if !ARRAY_STATES.contains(&a.state.as_str()) {
            w.sample(
                name,
                &[("array", &a.name), ("state", &a.state)],
                Value::Int(1),
            );
        }
    }
    let array_label = |a: &ArrayGauges| vec![("array", a.name.clone())];
    w.per(
        (
            "raidline_array_degraded_members",
            "gauge",
            "Member slots not serving redundancy (failed, missing or rebuilding).",
        ),
        arrays,
        array_label,
        |a| Value::Int(u64::from(a.degraded_members)),
    );
    // One sample per lost role, so an alert names the drive to pull and why.
    let lost: Vec<(String, u32, String, String)> = arrays
        .iter()
        .flat_map(|a| {
            a.lost
                .iter()
                .map(|(r, d, c)| (a.name.clone(), *r, d.clone(), c.clone()))
        })
        .collect();
    w.per(
        (
            "raidline_array_member_lost",
            "gauge",
            "1 for each role with no member: the device that held it (or \"(missing)\") and why (io_error, administrator, failed_before_stop, missing_at_assembly).",
        ),
        &lost,
        |(a, r, d, c)| {
            vec![
                ("array", a.clone()),
                ("role", r.to_string()),
                ("device", d.clone()),
                ("reason", c.clone()),
            ]
        },
        |_| Value::Int(1),
    );
    for (name, help, pick) in [
        (
            "raidline_array_refused",
            "1 while the array did not assemble at start-up and serves nothing (raidline array start).",
            (|a: &ArrayGauges| a.refused) as fn(&ArrayGauges) -> bool,
        ),
        (
            "raidline_array_write_hole_exposed",
            "1 while the array runs over an unclean stop no log covered: data of the missing member in the regions written then may read back wrong until a rebuild.",
            |a: &ArrayGauges| a.write_hole_exposed,
        ),
        (
            "raidline_array_write_hole_always",
            "1 when the write-hole policy is \"always\" (every write that is not a whole stripe is logged), 0 for \"degraded\".",
            |a: &ArrayGauges| a.write_hole_always,
        ),
    ] {
        w.per((name, "gauge", help), arrays, array_label, |a| {
            Value::Int(u64::from(pick(a)))
        });
    }
    let name = "raidline_array_stripe_writes_total";
    w.family(
        name,
        "counter",
        "Stripes written, by how: whole (no reads), read-modify-write, reconstruct-write.",
    );
    for a in arrays {
        if let Some(s) = a.stripe_writes {
            for (mode, v) in [("full", s.full), ("rmw", s.rmw), ("rcw", s.rcw)] {
                w.sample(name, &[("array", &a.name), ("mode", mode)], Value::Int(v));
            }
        }
    }
    for (name, help, pick) in [
        (
            "raidline_array_rebuild_progress_ratio",
            "Fraction of the running rebuild done (present only while one runs).",
            (|a: &ArrayGauges| a.rebuild_ratio) as fn(&ArrayGauges) -> Option<f64>,
        ),
        (
            "raidline_array_scrub_progress_ratio",
            "Fraction of the running scrub done (present only while one runs).",
            |a: &ArrayGauges| a.scrub_ratio,
        ),
    ] {
        w.family(name, "gauge", help);
        for a in arrays {
            if let Some(r) = pick(a) {
                w.sample(name, &[("array", &a.name)], Value::Float(r));
            }
        }
    }
}

fn render_queues(w: &mut Exposition, queues: &[QpGauges]) {
    let qp = |q: &QpGauges| vec![("cntlid", q.cntlid.to_string()), ("qid", q.qid.to_string())];
    w.per(
        (
            "raidline_qp_rate_bytes_per_second",
            "gauge",
            "Pacer rate of the queue pair.",
        ),
        queues,
        qp,
        |q| Value::Float(q.rate_bytes_per_s),
    );
    w.per(
        (
            "raidline_qp_rtt_seconds",
            "gauge",
            "Smoothed RTT of the queue pair (NaN before the first sample).",
        ),
        queues,
        qp,
        |q| Value::Float(q.rtt_seconds),
    );
    w.per(
        (
            "raidline_qp_raw_rtt_seconds",
            "gauge",
            "Last raw probe RTT of the queue pair, completion minus post on the host clock (NaN before the first sample).",
        ),
        queues,
        qp,
        |q| Value::Float(q.raw_rtt_seconds),
    );
    w.per(
        (
            "raidline_qp_net_rtt_seconds",
            "gauge",
            "Last net RTT of the queue pair: the raw probe RTT less the drain time of the queue pair's own data queued ahead of the probe; what the congestion law sees (NaN before the first sample).",
        ),
        queues,
        qp,
        |q| Value::Float(q.net_rtt_seconds),
    );
    w.per(
        (
            "raidline_qp_base_rtt_seconds",
            "gauge",
            "Windowed minimum (10 s) of the queue pair's net RTT (NaN before the first sample).",
        ),
        queues,
        qp,
        |q| Value::Float(q.base_rtt_seconds),
    );
    w.per(
        (
            "raidline_qp_in_flight",
            "gauge",
            "Commands in flight on the queue pair.",
        ),
        queues,
        qp,
        |q| Value::Int(u64::from(q.in_flight)),
    );
    w.per(
        (
            "raidline_qp_bytes_total",
            "counter",
            "Payload bytes the queue pair moved with RDMA READ and WRITE since it connected.",
        ),
        queues,
        qp,
        |q| Value::Int(q.bytes),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

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
        check_exposition(&text);
    }

    /// One parsed sample line.
    #[derive(Debug)]
    struct Sample {
        name: String,
        labels: BTreeMap<String, String>,
        value: f64,
    }

    /// Parses `text` as exposition format 0.0.4 and checks the invariants the module header
    /// promises; returns the samples with their family's type.
    fn check_exposition(text: &str) -> Vec<(String, Sample)> {
        assert!(text.ends_with('\n'), "no final newline");
        let mut families: BTreeSet<String> = BTreeSet::new();
        let mut current: Option<(String, String)> = None;
        let mut series = BTreeSet::new();
        let mut samples = Vec::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("HELP has a text");
                assert!(!help.is_empty());
                assert!(
                    families.insert(name.to_owned()),
                    "family {name} opened twice"
                );
                let ty = lines.next().expect("TYPE after HELP");
                let kind = ty
                    .strip_prefix(&format!("# TYPE {name} "))
                    .unwrap_or_else(|| panic!("TYPE for {name} right after HELP: {ty}"));
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{kind}");
                current = Some((name.to_owned(), kind.to_owned()));
                continue;
            }
            assert!(!line.starts_with('#'), "stray comment {line}");
            let s = parse_sample(line);
            let (family, kind) = current.clone().expect("sample before any family");
            let ok = match kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suf| s.name == format!("{family}{suf}")),
                _ => s.name == family,
            };
            assert!(ok, "sample {} outside its family {family}", s.name);
            assert!(
                series.insert((s.name.clone(), s.labels.clone())),
                "duplicate series {line}"
            );
            samples.push((kind, s));
        }
        check_histograms(&samples);
        samples
    }

    fn parse_sample(line: &str) -> Sample {
        let name_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..name_end];
        assert!(
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'),
            "{line}"
        );
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices();
            let mut key = String::new();
            loop {
                let (_, c) = chars.next().expect("unterminated labels");
                match c {
                    '}' if key.is_empty() => break,
                    '=' => {
                        assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line}");
                        let mut val = String::new();
                        loop {
                            match chars.next().expect("unterminated value").1 {
                                '\\' => match chars.next().expect("dangling escape").1 {
                                    '\\' => val.push('\\'),
                                    '"' => val.push('"'),
                                    'n' => val.push('\n'),
                                    e => panic!("bad escape \\{e} in {line}"),
                                },
                                '"' => break,
                                '\n' => panic!("raw newline in {line}"),
                                c => val.push(c),
                            }
                        }
                        assert!(
                            labels.insert(std::mem::take(&mut key), val).is_none(),
                            "repeated label in {line}"
                        );
                        match chars.next().expect("unterminated labels") {
                            (_, ',') => {}
                            (i, '}') => {
                                rest = &r[i + 1..];
                                break;
                            }
                            (_, c) => panic!("unexpected {c} in {line}"),
                        }
                    }
                    c if c.is_ascii_alphanumeric() || c == '_' => key.push(c),
                    c => panic!("bad label name char {c:?} in {line}"),
                }
            }
        }
        let v = rest.strip_prefix(' ').unwrap_or_else(|| panic!("{line}"));
        let value = match v {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        Sample {
            name: name.to_owned(),
            labels,
            value,
        }
    }

    /// Buckets cumulative with ascending `le` ending at +Inf, and `_count` = the +Inf bucket.
    fn check_histograms(samples: &[(String, Sample)]) {
        type Series = (String, BTreeMap<String, String>);
        let mut buckets: BTreeMap<Series, Vec<(f64, f64)>> = BTreeMap::new();
        let mut counts = BTreeMap::new();
        for (kind, s) in samples.iter().filter(|(k, _)| k == "histogram") {
            assert_eq!(kind, "histogram");
            if let Some(base) = s.name.strip_suffix("_bucket") {
                let mut l = s.labels.clone();
                let le = l.remove("le").expect("bucket without le");
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                buckets
                    .entry((base.to_owned(), l))
                    .or_default()
                    .push((le, s.value));
            } else if let Some(base) = s.name.strip_suffix("_count") {
                counts.insert((base.to_owned(), s.labels.clone()), s.value);
            }
        }
        assert_eq!(buckets.len(), counts.len());
        for (key, b) in &buckets {
            assert!(
                b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                "{key:?}"
            );
            let last = b.last().unwrap();
            assert_eq!(last.0, f64::INFINITY, "{key:?}");
            assert_eq!(Some(&last.1), counts.get(key), "{key:?}");
        }
    }

    fn status() -> StatusReport {
        use crate::mgmt::*;
        let member = |role, state: &str| MemberStatus {
            role,
            path: format!("/dev/nvme{role}n1"),
            state: state.into(),
            reason: None,
            reason_class: None,
        };
        let array = |name: &str, state: &str, members, rebuild| ArrayStatus {
            name: name.into(),
            uuid: String::new(),
            state: state.into(),
            capacity_bytes: 1 << 30,
            chunk_bytes: 65536,
            members,
            spares: vec![],
            rebuild,
            scrub: None,
            parity_engine: "cpu".into(),
            write_hole_protection: true,
            write_hole_policy: "degraded".into(),
            refused: None,
            exposure: None,
            stripe_writes: (state == "rebuilding").then_some(StripeWrites {
                full: 7,
                rmw: 5,
                rcw: 3,
            }),
        };
        let q = |qid, rate, rtt_us| QueueStatus {
            qid,
            depth: 128,
            in_flight: 3,
            bytes: 1 << 20,
            poller: 0,
            rate_bytes_per_s: rate,
            rtt_us,
            raw_rtt_us: rtt_us * 4.0,
            net_rtt_us: rtt_us / 2.0,
            base_rtt_us: rtt_us / 4.0,
        };
        StatusReport {
            version: "0.1.0".into(),
            uptime_s: 1,
            listen: vec![],
            arrays: vec![
                array(
                    "array0",
                    "rebuilding",
                    vec![
                        member(0, "active"),
                        member(1, "rebuilding"),
                        member(2, "active"),
                    ],
                    Some(Progress {
                        done_bytes: 1 << 28,
                        total_bytes: 1 << 30,
                        rate_bytes_per_s: 1,
                    }),
                ),
                array(
                    "odd\"one\\",
                    "reshaping",
                    vec![member(0, "failed"), member(1, "missing")],
                    None,
                ),
            ],
            subsystems: vec![],
            controllers: vec![ControllerStatus {
                cntlid: 3,
                subnqn: "s".into(),
                hostnqn: "h".into(),
                host_addr: "a".into(),
                kato_ms: 0,
                auth: String::new(),
                queues: vec![q(0, 0.0, f64::NAN), q(1, 1.5e9, 25.0)],
            }],
            iscsi_sessions: Vec::new(),
        }
    }

    #[test]
    fn snapshot_from_status() {
        let snap = Snapshot::from_status(&status());
        assert_eq!(
            snap.arrays[0],
            ArrayGauges {
                name: "array0".into(),
                state: "rebuilding".into(),
                degraded_members: 1,
                rebuild_ratio: Some(0.25),
                scrub_ratio: None,
                refused: false,
                write_hole_exposed: false,
                write_hole_always: false,
                stripe_writes: Some(crate::mgmt::StripeWrites {
                    full: 7,
                    rmw: 5,
                    rcw: 3
                }),
                lost: vec![],
            }
        );
        assert_eq!(snap.arrays[1].degraded_members, 2);
        // A lost member is exported with its device and why.
        let mut st = status();
        st.arrays[1].members[0].reason_class = Some("io_error".into());
        let snap2 = Snapshot::from_status(&st);
        assert_eq!(
            snap2.arrays[1].lost,
            vec![(0, "/dev/nvme0n1".to_string(), "io_error".to_string())]
        );
        let text = render_all(&[], &DataPathMetrics::default(), &snap2);
        assert!(
            text.contains(
                "raidline_array_member_lost{array=\"odd\\\"one\\\\\",role=\"0\",device=\"/dev/nvme0n1\",reason=\"io_error\"} 1"
            ),
            "{text}"
        );
        assert_eq!(snap.queues.len(), 2);
        assert_eq!((snap.queues[1].cntlid, snap.queues[1].qid), (3, 1));
        assert_eq!(snap.queues[1].rtt_seconds, 25e-6);
        assert!(snap.queues[0].rtt_seconds.is_nan());
    }

    #[test]
    fn full_render_is_valid_and_complete() {
        let weird = "nqn.x:\"quoted\"\\back\nline/1";
        let a = NamespaceMetrics::default();
        let b = NamespaceMetrics::default();
        for i in 0..100 {
            a.read_done(4096, i * 10_000);
        }
        b.write_done(1 << 20, 3_000_000_000); // beyond the last bucket
        b.errors.fetch_add(2, Ordering::Relaxed);
        let dp = DataPathMetrics::default();
        let snap = Snapshot::from_status(&status());
        let text = render_all(&[("nqn.a:b/1".into(), &a), (weird.into(), &b)], &dp, &snap);
        let samples = check_exposition(&text);
        let get = |name: &str, labels: &[(&str, &str)]| -> f64 {
            let want: BTreeMap<String, String> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            samples
                .iter()
                .find(|(_, s)| s.name == name && s.labels == want)
                .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
                .1
                .value
        };
        // Label escaping round-trips.
        assert_eq!(
            get("raidline_command_errors_total", &[("namespace", weird)]),
            2.0
        );
        assert_eq!(
            get("raidline_written_bytes_total", &[("namespace", weird)]),
            1048576.0
        );
        assert_eq!(
            get(
                "raidline_write_latency_seconds_bucket",
                &[("namespace", weird), ("le", "1")]
            ),
            0.0
        );
        assert_eq!(
            get(
                "raidline_write_latency_seconds_bucket",
                &[("namespace", weird), ("le", "+Inf")]
            ),
            1.0
        );
        assert_eq!(
            get(
                "raidline_write_latency_seconds_sum",
                &[("namespace", weird)]
            ),
            3.0
        );
        assert_eq!(
            get(
                "raidline_read_latency_seconds_count",
                &[("namespace", "nqn.a:b/1")]
            ),
            100.0
        );
        assert_eq!(
            get(
                "raidline_read_latency_seconds_bucket",
                &[("namespace", "nqn.a:b/1"), ("le", "0.0002")]
            ),
            21.0
        );
        // Arrays: one-hot state, an unknown state kept, degraded members, progress.
        for s in ARRAY_STATES {
            let want = if s == "rebuilding" { 1.0 } else { 0.0 };
            assert_eq!(
                get("raidline_array_state", &[("array", "array0"), ("state", s)]),
                want
            );
            assert_eq!(
                get(
                    "raidline_array_state",
                    &[("array", "odd\"one\\"), ("state", s)]
                ),
                0.0
            );
        }
        assert_eq!(
            get(
                "raidline_array_state",
                &[("array", "odd\"one\\"), ("state", "reshaping")]
            ),
            1.0
        );
        assert_eq!(
            get("raidline_array_degraded_members", &[("array", "array0")]),
            1.0
        );
        for (mode, n) in [("full", 7.0), ("rmw", 5.0), ("rcw", 3.0)] {
            assert_eq!(
                get(
                    "raidline_array_stripe_writes_total",
                    &[("array", "array0"), ("mode", mode)]
                ),
                n
            );
        }
        assert_eq!(
            get(
                "raidline_array_rebuild_progress_ratio",
                &[("array", "array0")]
            ),
            0.25
        );
        assert!(!text.contains("raidline_array_rebuild_progress_ratio{array=\"odd"));
        // Queue pairs.
        assert_eq!(
            get(
                "raidline_qp_rate_bytes_per_second",
                &[("cntlid", "3"), ("qid", "1")]
            ),
            1.5e9
        );
        assert_eq!(
            get("raidline_qp_rtt_seconds", &[("cntlid", "3"), ("qid", "1")]),
            25e-6
        );
        assert!(get("raidline_qp_rtt_seconds", &[("cntlid", "3"), ("qid", "0")]).is_nan());
        assert_eq!(
            get("raidline_qp_in_flight", &[("cntlid", "3"), ("qid", "0")]),
            3.0
        );
        assert_eq!(
            get("raidline_qp_bytes_total", &[("cntlid", "3"), ("qid", "1")]),
            1048576.0
        );
        assert!(text.contains("raidline_qp_rtt_seconds{cntlid=\"3\",qid=\"0\"} NaN\n"));
    }

    #[test]
    fn refused_and_exposed_arrays_have_their_gauges() {
        let r = crate::mgmt::tests::refused_and_exposed();
        let snap = Snapshot::from_status(&r);
        assert_eq!(
            (
                snap.arrays[0].refused,
                snap.arrays[0].write_hole_exposed,
                snap.arrays[0].write_hole_always
            ),
            (false, true, false)
        );
        assert_eq!(
            (
                snap.arrays[1].refused,
                snap.arrays[1].write_hole_exposed,
                snap.arrays[1].write_hole_always
            ),
            (true, false, true)
        );
        let text = render_all(&[], &DataPathMetrics::default(), &snap);
        let samples = check_exposition(&text);
        let get = |name: &str, labels: &[(&str, &str)]| -> f64 {
            let want: BTreeMap<String, String> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            samples
                .iter()
                .find(|(_, s)| s.name == name && s.labels == want)
                .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
                .1
                .value
        };
        for (name, array0, array1) in [
            ("raidline_array_refused", 0.0, 1.0),
            ("raidline_array_write_hole_exposed", 1.0, 0.0),
            ("raidline_array_write_hole_always", 0.0, 1.0),
        ] {
            assert_eq!(get(name, &[("array", "array0")]), array0, "{name}");
            assert_eq!(get(name, &[("array", "array1")]), array1, "{name}");
        }
        // "refused" is one of the one-hot states.
        for s in ARRAY_STATES {
            let want = f64::from(u8::from(s == "refused"));
            assert_eq!(
                get("raidline_array_state", &[("array", "array1"), ("state", s)]),
                want,
                "{s}"
            );
        }
        assert_eq!(
            get(
                "raidline_array_state",
                &[("array", "array0"), ("state", "degraded")]
            ),
            1.0
        );
    }

    #[test]
    fn an_empty_target_renders_valid_text() {
        let text = render_all(&[], &DataPathMetrics::default(), &Snapshot::default());
        let samples = check_exposition(&text);
        // The payload-copy counter, the storage requests by path (ring, workers), the ring's
        // operations by buffer (fixed, plain) and the polled ones, the poller loops' passes
        // (work, empty), sleeps (wait, nap) and sleep time, the parked and the gathered writes,
        // the authentication outcomes (3), the receive memory, the I/O commands by protocol
        // (nvme, iscsi) and the iSCSI logins.
        assert_eq!(samples.len(), 20);
        assert!(text.contains("raidline_ring_polled_operations_total 0\n"));
        assert!(text.contains("raidline_io_commands_total{protocol=\"iscsi\"} 0\n"));
        assert!(text.contains("# TYPE raidline_qp_rtt_seconds gauge\n"));
    }

    #[test]
    fn the_checker_rejects_broken_text() {
        for bad in [
            "# HELP a x\n# TYPE a counter\na 1\n# HELP a x\n# TYPE a counter\n",
            "# HELP a x\n# TYPE a counter\nb 1\n",
            "# HELP a x\n# TYPE a counter\na{l=\"x\\q\"} 1\n",
            "# HELP a x\n# TYPE a counter\na{l=\"1\"} 1\na{l=\"1\"} 2\n",
            "# HELP a x\n# TYPE a counter\na one\n",
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        ] {
            let r = std::panic::catch_unwind(|| check_exposition(bad));
            assert!(r.is_err(), "accepted {bad:?}");
        }
    }
}
