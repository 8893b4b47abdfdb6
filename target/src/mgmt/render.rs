//! The text `raidline status` prints: arrays with their member tables and rebuild/scrub
//! progress, subsystems with their namespaces, controllers with their queue pairs (rate, RTT).
//!
//! Pure formatting over a [`StatusReport`]; column widths follow the widest cell, so the output
//! stays aligned for any path or NQN length. Non-finite figures print as "-".

use std::fmt::Write as _;

use super::{
    ArrayStatus, ByteRange, ControllerStatus, ExposureStatus, Progress, QueueStatus, StatusReport,
    SubsystemStatus,
};

/// Exposed ranges `raidline status` lists before it says how many more there are (the JSON
/// report has them all).
const EXPOSED_RANGES_SHOWN: usize = 16;

/// Logical block size the LBAs of exposed ranges are counted in (the namespaces' block size).
const LBA_BYTES: u64 = crate::subsystem::DEFAULT_BLOCK_SIZE as u64;

/// Renders `r` for a terminal.
pub fn render_status(r: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "raidline {}, up {}", r.version, duration(r.uptime_s));
    let listen = if r.listen.is_empty() {
        "nothing".to_owned()
    } else {
        r.listen.join(", ")
    };
    let _ = writeln!(out, "listening on {listen}");

    let _ = writeln!(out, "\narrays: {}", r.arrays.len());
    for a in &r.arrays {
        array(&mut out, a);
    }
    let _ = writeln!(out, "\nsubsystems: {}", r.subsystems.len());
    for s in &r.subsystems {
        subsystem(&mut out, s);
    }
    let _ = writeln!(out, "\ncontrollers: {}", r.controllers.len());
    for c in &r.controllers {
        controller(&mut out, c);
    }
    if !r.iscsi_sessions.is_empty() {
        let _ = writeln!(out, "\niSCSI sessions: {}", r.iscsi_sessions.len());
        for s in &r.iscsi_sessions {
            let target = if s.target.is_empty() {
                "(discovery)"
            } else {
                &s.target
            };
            let _ = writeln!(
                out,
                "  {} -> {target}  {} session, ISID {} TSIH {}, from {}, poller {}",
                s.initiator, s.session_type, s.isid, s.tsih, s.peer, s.poller
            );
        }
    }
    out
}

fn array(out: &mut String, a: &ArrayStatus) {
    let exposed = if a.exposure.is_some() {
        ", EXPOSED"
    } else {
        ""
    };
    let uuid = if a.uuid.is_empty() {
        "unknown"
    } else {
        &a.uuid
    };
    let _ = writeln!(out, "  {} [{}{exposed}]  uuid {uuid}", a.name, a.state);
    if let Some(why) = &a.refused {
        let _ = writeln!(out, "    refused at start: {why}");
        let _ = writeln!(
            out,
            "    not running: its namespaces serve no I/O until `raidline array start {}` assembles it",
            a.name
        );
    }
    let _ = writeln!(
        out,
        "    capacity {}, chunk {}, parity {}, write-hole protection {}, write hole: {}",
        bytes(a.capacity_bytes),
        bytes(u64::from(a.chunk_bytes)),
        if a.parity_engine.is_empty() {
            "-"
        } else {
            &a.parity_engine
        },
        if a.write_hole_protection { "on" } else { "off" },
        a.write_hole_policy
    );
    if let Some(e) = &a.exposure {
        exposure(out, e);
    }
    if let Some(w) = &a.stripe_writes {
        let _ = writeln!(
            out,
            "    stripes written: {} whole, {} read-modify-write, {} reconstruct-write",
            w.full, w.rmw, w.rcw
        );
    }
    let why = a.members.iter().any(|m| m.reason.is_some());
    let mut rows = vec![if why {
        row(["role", "state", "device", "why"])
    } else {
        row(["role", "state", "device"])
    }];
    for m in &a.members {
        let path = if m.path.is_empty() { "-" } else { &m.path };
        let mut r = vec![m.role.to_string(), m.state.clone(), path.to_owned()];
        if why {
            r.push(m.reason.clone().unwrap_or_default());
        }
        rows.push(r);
    }
    table(out, "    ", &rows);
    let spares = if a.spares.is_empty() {
        "none".to_owned()
    } else {
        a.spares.join(", ")
    };
    let _ = writeln!(out, "    spares: {spares}");
    for (what, p) in jobs(a) {
        let _ = writeln!(out, "    {what}: {}", progress(&p));
    }
}

/// The long jobs running on an array: ("rebuild" | "replace copy" | "resync" | "scrub",
/// progress).
pub fn jobs(a: &ArrayStatus) -> Vec<(&'static str, Progress)> {
    let copy = match a.state.as_str() {
        "replacing" => "replace copy",
        "resyncing" => "resync",
        _ => "rebuild",
    };
    [(copy, a.rebuild), ("scrub", a.scrub)]
        .into_iter()
        .filter_map(|(w, p)| p.map(|p| (w, p)))
        .collect()
}

/// One line for every long job of every array, for systemd's STATUS= and `raidline status
/// --watch` without a terminal: "array0 rebuild 25.0 % (1.00 GiB of 4.00 GiB) at 1.00 MiB/s,
/// 00:51:12 left". Empty when nothing runs.
pub fn jobs_line(r: &StatusReport) -> String {
    let mut parts = Vec::new();
    for a in &r.arrays {
        for (what, p) in jobs(a) {
            parts.push(format!("{} {what} {}", a.name, progress(&p)));
        }
    }
    parts.join("; ")
}

fn exposure(out: &mut String, e: &ExposureStatus) {
    let missing: Vec<String> = e.missing.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "    WRITE HOLE EXPOSED: started over an unclean stop with role(s) {} missing that no log \
         covered ({}); the missing member's data in {} range(s) may read back wrong until a \
         rebuild rewrites them:",
        missing.join(", "),
        e.reason,
        e.ranges.len()
    );
    for line in exposed_ranges_text(&e.ranges, EXPOSED_RANGES_SHOWN) {
        let _ = writeln!(out, "      {line}");
    }
}

/// The ranges one per line as bytes and as LBAs of the namespace's 4 KiB blocks ("bytes
/// 0..4194304 (4.00 MiB), LBA 0..1024"), at most `max` of them, then a line saying how many
/// more there are.
pub fn exposed_ranges_text(ranges: &[ByteRange], max: usize) -> Vec<String> {
    let mut lines: Vec<String> = ranges
        .iter()
        .take(max)
        .map(|r| {
            format!(
                "bytes {}..{} ({}), LBA {}..{}",
                r.start,
                r.end,
                bytes(r.end.saturating_sub(r.start)),
                r.start / LBA_BYTES,
                r.end.div_ceil(LBA_BYTES)
            )
        })
        .collect();
    if ranges.len() > max {
        lines.push(format!(
            "… and {} more (raidline status --json lists them all)",
            ranges.len() - max
        ));
    }
    lines
}

fn subsystem(out: &mut String, s: &SubsystemStatus) {
    let _ = writeln!(out, "  {}", s.nqn);
    let _ = writeln!(out, "    serial {}, model {}", s.serial, s.model);
    let hosts = if s.allow_any_host {
        "any".to_owned()
    } else if s.hosts.is_empty() {
        "none".to_owned()
    } else {
        s.hosts.join(", ")
    };
    let _ = writeln!(out, "    hosts: {hosts}");
    for a in &s.auth_hosts {
        let _ = writeln!(out, "    must authenticate: {a}");
    }
    if s.namespaces.is_empty() {
        let _ = writeln!(out, "    no namespaces");
        return;
    }
    let mut rows = vec![row([
        "nsid", "backing", "block", "size", "reads", "writes", "read", "written",
    ])];
    for n in &s.namespaces {
        rows.push(vec![
            n.nsid.to_string(),
            if n.active {
                n.backing.clone()
            } else {
                // Disabled by the operator, or its array is not running (see the array).
                format!("{} (inactive)", n.backing)
            },
            n.block_size.to_string(),
            bytes(n.blocks.saturating_mul(u64::from(n.block_size))),
            n.read_ops.to_string(),
            n.write_ops.to_string(),
            bytes(n.read_bytes),
            bytes(n.write_bytes),
        ]);
    }
    table(out, "    ", &rows);
}

fn controller(out: &mut String, c: &ControllerStatus) {
    let kato = if c.kato_ms == 0 {
        "no keep-alive".to_owned()
    } else {
        format!("kato {} ms", c.kato_ms)
    };
    let auth = if c.auth.is_empty() || c.auth == "none" {
        String::new()
    } else {
        format!("  auth {}", c.auth)
    };
    let _ = writeln!(
        out,
        "  cntlid {}  {} from {}  to {}  {}{}",
        c.cntlid, c.hostnqn, c.host_addr, c.subnqn, kato, auth
    );
    let mut rows = vec![row([
        "qid",
        "depth",
        "in-flight",
        "poller",
        "rate",
        "rtt",
        "raw-rtt",
        "net-rtt",
        "base-rtt",
    ])];
    for q in &c.queues {
        let mut r = vec![
            q.qid.to_string(),
            q.depth.to_string(),
            q.in_flight.to_string(),
            q.poller.to_string(),
            rate(q.rate_bytes_per_s),
            rtt(q.rtt_us),
        ];
        r.extend(rtts(q));
        rows.push(r);
    }
    table(out, "    ", &rows);
}

/// The paced queue pairs of every controller, for `raidline cc show`: rate, the raw probe
/// RTT, the net RTT the law sees, and the base; a line saying so when none is paced.
pub fn paced_queues(r: &StatusReport) -> String {
    let mut rows = vec![row([
        "cntlid", "qid", "rate", "raw-rtt", "net-rtt", "base-rtt",
    ])];
    for c in &r.controllers {
        for q in c.queues.iter().filter(|q| q.rate_bytes_per_s.is_finite()) {
            let mut r = vec![
                c.cntlid.to_string(),
                q.qid.to_string(),
                rate(q.rate_bytes_per_s),
            ];
            r.extend(rtts(q));
            rows.push(r);
        }
    }
    if rows.len() == 1 {
        return "no paced queue pairs connected".into();
    }
    let mut out = String::from("paced queue pairs:\n");
    table(&mut out, "  ", &rows);
    out.truncate(out.trim_end().len());
    out
}

/// A queue pair's last raw, net and base probe RTTs, as table cells.
fn rtts(q: &QueueStatus) -> [String; 3] {
    [rtt(q.raw_rtt_us), rtt(q.net_rtt_us), rtt(q.base_rtt_us)]
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

/// Writes `rows` left-aligned in columns, each line indented by `indent`.
fn table(out: &mut String, indent: &str, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::from(indent);
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// "25.0 % (1.00 GiB of 4.00 GiB) at 1.00 MiB/s, 00:51:12 left".
pub fn progress(p: &Progress) -> String {
    let mut s = format!(
        "{:.1} % ({} of {}) at {}",
        p.ratio() * 100.0,
        bytes(p.done_bytes),
        bytes(p.total_bytes),
        rate(p.rate_bytes_per_s as f64)
    );
    let left = p.total_bytes.saturating_sub(p.done_bytes);
    if p.rate_bytes_per_s > 0 && left > 0 {
        let _ = write!(s, ", {} left", duration(left.div_ceil(p.rate_bytes_per_s)));
    }
    s
}

/// Binary units with two decimals above 1 KiB ("1.50 GiB"), exact bytes below.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2} {}", UNITS[unit])
}

fn rate(bytes_per_s: f64) -> String {
    if !bytes_per_s.is_finite() || bytes_per_s < 0.0 {
        return "-".into();
    }
    // Saturating float-to-int conversion; rates beyond u64 are not a concern.
    format!("{}/s", bytes(bytes_per_s as u64))
}

fn rtt(us: f64) -> String {
    if !us.is_finite() || us < 0.0 {
        "-".into()
    } else if us < 1000.0 {
        format!("{us:.1} us")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

fn duration(s: u64) -> String {
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 << 40), "3.00 TiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
        assert_eq!(rate(200.0 * 1048576.0), "200.00 MiB/s");
        assert_eq!(rate(f64::NAN), "-");
        assert_eq!(rtt(12.34), "12.3 us");
        assert_eq!(rtt(2500.0), "2.50 ms");
        assert_eq!(rtt(f64::INFINITY), "-");
        assert_eq!(duration(59), "00:00:59");
        assert_eq!(duration(93_784), "1d 02:03:04");
    }

    #[test]
    fn progress_line() {
        let p = Progress {
            done_bytes: 1 << 30,
            total_bytes: 4 << 30,
            rate_bytes_per_s: 1 << 20,
        };
        assert_eq!(
            progress(&p),
            "25.0 % (1.00 GiB of 4.00 GiB) at 1.00 MiB/s, 00:51:12 left"
        );
        let empty = Progress {
            done_bytes: 0,
            total_bytes: 0,
            rate_bytes_per_s: 0,
        };
        assert_eq!(progress(&empty), "100.0 % (0 B of 0 B) at 0 B/s");
    }

    #[test]
    fn table_aligns_columns() {
        let mut out = String::new();
        let rows = vec![row(["a", "bb", "c"]), row(["long", "x", "y"])];
        table(&mut out, "  ", &rows);
        assert_eq!(out, "  a     bb  c\n  long  x   y\n");
    }
}
