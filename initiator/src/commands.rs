//! What each CLI command does, over any fabric and with typed inputs (the binary parses the
//! command line and does the file I/O; these take and return values): connect, discover,
//! identify, read, write, verify, perf, and the text each prints.
//!
//! Invariants: every command services the controller's keep-alive while it runs; a command
//! that connected shuts the controller down before returning, on success and on failure alike
//! (a failed shutdown is only reported when the command itself succeeded).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use raidline_fabric::Fabric;
use raidline_proto::aen::AsyncEvent;
use raidline_proto::identify::{sgls, ControllerType};
use raidline_proto::io::DsmRange;
use raidline_proto::log::{ChangedNsList, DiscoveryLog, Tsas};
use raidline_proto::text::Nqn;

use crate::controller::{Controller, ControllerOptions, Namespace};
use crate::discovery;
use crate::error::Error;
use crate::io::IoOp;
use crate::pattern;
use crate::perf::{run_worker, validate, Live, PerfConfig, PerfResult};
use crate::types::{format_uuid, HostIdentity, Lba, Nsid};

/// Where the target is and how patient to be with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Transport address (IP and service id).
    pub addr: SocketAddr,
    /// Who we are.
    pub host: HostIdentity,
    /// Admin command and connect deadline.
    pub admin_timeout: Duration,
    /// I/O command deadline.
    pub io_timeout: Duration,
    /// Keep-alive timeout for I/O controllers.
    pub kato: Duration,
}

impl Target {
    /// Controller options for `nqn` with `queues` I/O queues of `depth`, transfers up to
    /// `max_io` bytes.
    pub fn options(&self, nqn: Nqn, queues: u16, depth: u16, max_io: u32) -> ControllerOptions {
        let mut o = ControllerOptions::new(self.host.clone(), nqn);
        o.admin_timeout = self.admin_timeout;
        o.io_timeout = self.io_timeout;
        o.kato = self.kato;
        o.io_queues = queues;
        o.io_depth = depth;
        o.max_io_bytes = max_io;
        o
    }
}

/// Connects to the discovery controller and reads its log.
pub fn discover<F: Fabric>(fabric: F, t: &Target) -> Result<DiscoveryLog, Error> {
    let mut o = ControllerOptions::discovery(t.host.clone());
    o.admin_timeout = t.admin_timeout;
    discovery::discover(fabric, t.addr, o)
}

/// The discovery log as nvme-cli prints it.
pub fn format_discovery(log: &DiscoveryLog) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nDiscovery Log Number of Records {}, Generation counter {}",
        log.entries.len(),
        log.genctr
    );
    for (i, e) in log.entries.iter().enumerate() {
        let _ = writeln!(s, "=====Discovery Log Entry {i}======");
        let _ = writeln!(
            s,
            "trtype:  {}",
            e.trtype.name().unwrap_or("unrecognized").to_lowercase()
        );
        let _ = writeln!(
            s,
            "adrfam:  {}",
            e.adrfam.name().unwrap_or("unrecognized").to_lowercase()
        );
        let _ = writeln!(
            s,
            "subtype: {}",
            match e.subtype.0 {
                1 => "discovery subsystem referral",
                2 => "nvme subsystem",
                3 => "current discovery subsystem",
                _ => "unrecognized",
            }
        );
        let _ = writeln!(s, "treq:    {:#x}", e.treq);
        let _ = writeln!(s, "portid:  {}", e.portid);
        let _ = writeln!(s, "trsvcid: {}", e.trsvcid);
        let _ = writeln!(s, "subnqn:  {}", e.subnqn);
        let _ = writeln!(s, "traddr:  {}", e.traddr);
        if let Tsas::Rdma {
            qptype,
            prtype,
            cms,
            pkey,
        } = e.tsas
        {
            let _ = writeln!(
                s,
                "rdma_prtype: {:#x}\nrdma_qptype: {:#x}\nrdma_cms:    {:#x}\nrdma_pkey: {pkey:#06x}",
                prtype.0, qptype.0, cms.0
            );
        }
    }
    s
}

/// Runs `f` on a controller connected with `opts`, then shuts it down.
pub fn with_controller<F: Fabric, T>(
    fabric: F,
    addr: SocketAddr,
    opts: ControllerOptions,
    f: impl FnOnce(&mut Controller<F>) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut c = Controller::connect(fabric, addr, opts)?;
    let r = f(&mut c);
    let s = c.shutdown();
    let v = r?;
    s?;
    Ok(v)
}

/// Identify Controller and every active namespace, as text.
pub fn identify<F: Fabric>(c: &mut Controller<F>) -> Result<String, Error> {
    let id = c.identity().clone();
    let mut s = String::new();
    let vs = c.version();
    let _ = writeln!(s, "NVME Identify Controller:");
    let _ = writeln!(s, "vid       : {:#x}", id.vid);
    let _ = writeln!(s, "ssvid     : {:#x}", id.ssvid);
    let _ = writeln!(s, "sn        : {}", id.sn.trim());
    let _ = writeln!(s, "mn        : {}", id.mn.trim());
    let _ = writeln!(s, "fr        : {}", id.fr.trim());
    let _ = writeln!(s, "cntlid    : {:#x}", id.cntlid);
    let _ = writeln!(
        s,
        "ver       : {:#x} (NVMe {}.{}.{})",
        id.ver, vs.major, vs.minor, vs.tertiary
    );
    let _ = writeln!(
        s,
        "cntrltype : {} ({})",
        id.cntrltype.0,
        match id.cntrltype {
            ControllerType::IO => "I/O",
            ControllerType::DISCOVERY => "discovery",
            ControllerType::ADMINISTRATIVE => "administrative",
            _ => "not reported",
        }
    );
    let _ = writeln!(s, "cmic      : {:#x}", id.cmic);
    let _ = writeln!(
        s,
        "mdts      : {}{}",
        id.mdts,
        c.mdts_bytes()
            .map(|b| format!(" ({b} bytes)"))
            .unwrap_or_default()
    );
    let _ = writeln!(s, "oaes      : {:#x}", id.oaes);
    let _ = writeln!(s, "kas       : {} (x100 ms)", id.kas);
    let _ = writeln!(s, "maxcmd    : {}", id.maxcmd);
    let _ = writeln!(s, "nn        : {}", id.nn);
    let _ = writeln!(s, "oncs      : {:#x}", id.oncs);
    let _ = writeln!(s, "vwc       : {:#x}", id.vwc);
    let _ = writeln!(
        s,
        "sgls      : {:#x}{}{}",
        id.sgls,
        if id.sgls & sgls::KEYED != 0 {
            " keyed"
        } else {
            ""
        },
        if id.sgls & sgls::OFFSET != 0 {
            " in-capsule"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "subnqn    : {}",
        id.subnqn.as_ref().map(|n| n.as_str()).unwrap_or("")
    );
    let _ = writeln!(
        s,
        "ioccsz    : {} (in-capsule data up to {} bytes)",
        id.ioccsz,
        c.in_capsule_max()
    );
    let _ = writeln!(s, "iorcsz    : {}", id.iorcsz);
    let _ = writeln!(s, "icdoff    : {}", id.icdoff);
    let _ = writeln!(s, "cap.mqes  : {}", c.cap().mqes);
    let _ = writeln!(s, "cap.to    : {} (x500 ms)", c.cap().to);
    let _ = writeln!(s, "io queues : {}", c.io.len());
    if c.is_discovery() {
        return Ok(s);
    }
    for nsid in c.active_namespaces()? {
        let ns = c.namespace(nsid)?;
        let _ = writeln!(
            s,
            "namespace {}: {} blocks of {} bytes ({} MiB), nguid {}, eui64 {}",
            nsid,
            ns.blocks,
            ns.block_size,
            (ns.blocks * u64::from(ns.block_size)) >> 20,
            hex(&ns.id.nguid),
            hex(&ns.id.eui64)
        );
    }
    Ok(s)
}

fn hex(b: &[u8]) -> String {
    if b.len() == 16 {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        return format_uuid(&a);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How a long command reports as it goes: (phase: "read" | "write", bytes done, bytes in all),
/// after every step of at most [`STEP_BYTES`].
pub type Progress<'a> = &'a mut dyn FnMut(&'static str, u64, u64);

/// The largest transfer between two progress reports.
pub const STEP_BYTES: usize = 1 << 20;

/// Reads `bytes` (rounded up to whole blocks) from `lba`; returns exactly `bytes`.
pub fn read<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    bytes: u64,
) -> Result<Vec<u8>, Error> {
    read_with(c, nsid, lba, bytes, &mut |_, _, _| {})
}

/// [`read`], reporting progress.
pub fn read_with<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    bytes: u64,
    progress: Progress<'_>,
) -> Result<Vec<u8>, Error> {
    let ns = c.namespace(nsid)?;
    let bs = u64::from(ns.block_size);
    let len = usize::try_from(bytes.div_ceil(bs) * bs)
        .map_err(|_| Error::InvalidArgument(format!("{bytes} bytes")))?;
    let mut buf = vec![0u8; len];
    move_data(c, IoOp::Read, &ns, lba, &mut buf, progress)?;
    buf.truncate(bytes as usize);
    Ok(buf)
}

/// Writes `data` at `lba`, the last block padded with zeros.
pub fn write<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    data: &[u8],
) -> Result<(), Error> {
    write_with(c, nsid, lba, data, &mut |_, _, _| {})
}

/// [`write`], reporting progress.
pub fn write_with<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    data: &[u8],
    progress: Progress<'_>,
) -> Result<(), Error> {
    let ns = c.namespace(nsid)?;
    let bs = ns.block_size as usize;
    let mut buf = data.to_vec();
    buf.resize(data.len().div_ceil(bs).max(1) * bs, 0);
    move_data(c, IoOp::Write, &ns, lba, &mut buf, progress)
}

/// Moves `buf` in steps of at most [`STEP_BYTES`] (whole blocks), reporting after each.
fn move_data<F: Fabric>(
    c: &mut Controller<F>,
    op: IoOp,
    ns: &Namespace,
    lba: Lba,
    buf: &mut [u8],
    progress: Progress<'_>,
) -> Result<(), Error> {
    if c.io.is_empty() {
        return Err(Error::Protocol(
            "the controller granted no I/O queue".into(),
        ));
    }
    let bs = (ns.block_size as usize).max(1);
    let step = (STEP_BYTES / bs).max(1) * bs;
    let total = buf.len() as u64;
    let phase = match op {
        IoOp::Read => "read",
        IoOp::Write => "write",
    };
    let mut done = 0usize;
    for chunk in buf.chunks_mut(step) {
        let at = Lba(lba.0 + (done / bs) as u64);
        match op {
            IoOp::Read => c.read(0, ns, at, chunk)?,
            IoOp::Write => c.write(0, ns, at, chunk)?,
        }
        done += chunk.len();
        progress(phase, done as u64, total);
    }
    Ok(())
}

/// Write Zeroes over `blocks` blocks from `lba` (at most 65536 per command), optionally letting
/// the controller deallocate them.
pub fn write_zeroes<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    blocks: u64,
    deallocate: bool,
) -> Result<(), Error> {
    let ns = c.namespace(nsid)?;
    let mut at = lba.0;
    let end = lba
        .0
        .checked_add(blocks)
        .ok_or_else(|| Error::InvalidArgument(format!("LBA {lba}+{blocks}")))?;
    while at < end {
        let n = (end - at).min(0x1_0000) as u32;
        c.write_zeroes(0, &ns, Lba(at), n, deallocate)?;
        at += u64::from(n);
    }
    Ok(())
}

/// Dataset Management (deallocate) of `blocks` blocks from `lba`, in ranges of at most
/// 2^32 − 1 blocks, 256 ranges per command.
pub fn trim<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    blocks: u64,
) -> Result<(), Error> {
    let ns = c.namespace(nsid)?;
    if blocks == 0 || lba.0.checked_add(blocks).map_or(true, |e| e > ns.blocks) {
        return Err(Error::InvalidArgument(format!(
            "LBA {lba}+{blocks} is not inside namespace {nsid} of {} blocks",
            ns.blocks
        )));
    }
    let mut ranges = Vec::new();
    let mut at = lba.0;
    while at < lba.0 + blocks {
        let n = (lba.0 + blocks - at).min(u64::from(u32::MAX)) as u32;
        ranges.push(DsmRange {
            attributes: 0,
            nlb: n,
            slba: at,
        });
        at += u64::from(n);
    }
    for chunk in ranges.chunks(256) {
        c.dataset_management(0, nsid, chunk, true)?;
    }
    Ok(())
}

/// One asynchronous event as a line of text.
pub fn format_event(e: &AsyncEvent) -> String {
    let what = match e.as_notice() {
        Some(n) => n.name().map(|s| s.to_lowercase().replace('_', " ")),
        None => None,
    };
    format!(
        "async event: {} info {:#04x}{} (log page {:#04x}{})",
        e.event_type
            .name()
            .map(|s| s.to_lowercase().replace('_', " "))
            .unwrap_or_else(|| format!("type {:#x}", e.event_type.0)),
        e.info,
        what.map(|w| format!(" {w}")).unwrap_or_default(),
        e.log_page.0,
        e.log_page
            .name()
            .map(|s| format!(" {}", s.to_lowercase().replace('_', " ")))
            .unwrap_or_default()
    )
}

/// A Changed Namespace List as a line of text.
pub fn format_changed(l: &ChangedNsList) -> String {
    match l {
        ChangedNsList::Changed(ids) => {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            format!("changed namespaces: {}", ids.join(" "))
        }
        ChangedNsList::TooMany => "changed namespaces: more than 1024".into(),
    }
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Blocks written and read back.
    pub blocks: u64,
    /// Block size.
    pub block_size: u32,
    /// LBAs whose content differed.
    pub mismatches: Vec<u64>,
    /// Time spent writing (incl. the flush).
    pub write_time: Duration,
    /// Time spent reading back.
    pub read_time: Duration,
}

/// Writes the seeded pattern over `blocks` blocks from `lba` (0: to the end of the namespace),
/// flushes, reads everything back and names every LBA that differs. Works in 1 MiB steps.
pub fn verify<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    blocks: u64,
    seed: u64,
) -> Result<VerifyReport, Error> {
    verify_with(c, nsid, lba, blocks, seed, &mut |_, _, _| {})
}

/// [`verify`], reporting the write pass and then the read pass.
pub fn verify_with<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    lba: Lba,
    blocks: u64,
    seed: u64,
    progress: Progress<'_>,
) -> Result<VerifyReport, Error> {
    let ns = c.namespace(nsid)?;
    let blocks = if blocks == 0 {
        ns.blocks.saturating_sub(lba.0)
    } else {
        blocks
    };
    if blocks == 0 || lba.0.checked_add(blocks).map_or(true, |e| e > ns.blocks) {
        return Err(Error::InvalidArgument(format!(
            "LBA {lba}+{blocks} is not inside namespace {nsid} of {} blocks",
            ns.blocks
        )));
    }
    let bs = ns.block_size as usize;
    let step = ((1 << 20) / bs).max(1) as u64;
    let t = Instant::now();
    let mut buf = Vec::new();
    let mut at = lba.0;
    while at < lba.0 + blocks {
        let n = step.min(lba.0 + blocks - at);
        buf.resize(n as usize * bs, 0);
        pattern::fill(seed, at, bs, &mut buf);
        move_data(c, IoOp::Write, &ns, Lba(at), &mut buf, &mut |_, _, _| {})?;
        at += n;
        progress("write", (at - lba.0) * bs as u64, blocks * bs as u64);
    }
    c.flush(0, nsid)?;
    let write_time = t.elapsed();
    let t = Instant::now();
    let mut mismatches = Vec::new();
    let mut at = lba.0;
    while at < lba.0 + blocks {
        let n = step.min(lba.0 + blocks - at);
        buf.resize(n as usize * bs, 0);
        buf.fill(0);
        move_data(c, IoOp::Read, &ns, Lba(at), &mut buf, &mut |_, _, _| {})?;
        mismatches.extend(pattern::mismatches(seed, at, bs, &buf));
        at += n;
        progress("read", (at - lba.0) * bs as u64, blocks * bs as u64);
    }
    Ok(VerifyReport {
        blocks,
        block_size: ns.block_size,
        mismatches,
        write_time,
        read_time: t.elapsed(),
    })
}

/// Runs perf on every I/O queue of `c` (one thread each) for `cfg.duration`, calling
/// `progress` about once a second with the time so far and the live counters.
pub fn perf<F: Fabric>(
    c: &mut Controller<F>,
    nsid: Nsid,
    cfg: &PerfConfig,
    progress: &mut dyn FnMut(Duration, &Live),
) -> Result<PerfResult, Error> {
    let ns = c.namespace(nsid)?;
    let Some(first) = c.io.first() else {
        return Err(Error::Protocol(
            "the controller granted no I/O queue".into(),
        ));
    };
    validate(cfg, &ns, first.data_slot())?;
    let mut qs = c.take_io_queues();
    let n = qs.len();
    let stop = AtomicBool::new(false);
    let live = Live::default();
    let start = Instant::now();
    let (results, service_err) = std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(i, q)| {
                let (ns, stop, live) = (&ns, &stop, &live);
                s.spawn(move || run_worker(q, ns, cfg, i, n, stop, live))
            })
            .collect();
        let mut next = start + Duration::from_secs(1);
        let mut service_err = None;
        while handles.iter().any(|h| !h.is_finished()) {
            if let Err(e) = c.service() {
                stop.store(true, Ordering::Relaxed);
                service_err.get_or_insert(e);
            }
            if Instant::now() >= next {
                next += Duration::from_secs(1);
                progress(start.elapsed(), &live);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Protocol("perf worker panicked".into())))
            })
            .collect();
        (results, service_err)
    });
    c.io = qs;
    let mut total = PerfResult::default();
    for r in results {
        total.merge(&r?);
    }
    if let Some(e) = service_err {
        return Err(e);
    }
    Ok(total)
}

/// The perf summary: throughput, latency percentiles and CPU time per I/O (when measured).
pub fn format_perf(
    cfg: &PerfConfig,
    queues: usize,
    r: &PerfResult,
    cpu: Option<Duration>,
) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    let h = &r.latency;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "perf: {} queue(s) x QD {}, {} bytes, {}% reads, {}, {:.1} s",
        queues,
        cfg.queue_depth,
        cfg.block_size,
        cfg.read_percent,
        if cfg.random { "random" } else { "sequential" },
        r.elapsed.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "  IOPS {:.0}   MB/s {:.2}   ios {} (reads {}, writes {})   errors {}",
        r.iops(),
        r.mb_per_s(),
        r.ios(),
        r.reads,
        r.writes,
        r.errors
    );
    let _ = writeln!(
        s,
        "  latency us: avg {:.1}  min {:.1}  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        us(h.mean()),
        us(h.min()),
        us(h.percentile(50.0)),
        us(h.percentile(99.0)),
        us(h.percentile(99.9)),
        us(h.max())
    );
    if let Some(cpu) = cpu {
        let per = if r.ios() == 0 {
            0.0
        } else {
            cpu.as_nanos() as f64 / r.ios() as f64 / 1000.0
        };
        let _ = writeln!(
            s,
            "  cpu: {:.2} s total, {per:.2} us per I/O",
            cpu.as_secs_f64()
        );
    }
    if let Some(e) = &r.first_error {
        let _ = writeln!(s, "  first error: {e}");
    }
    s
}
