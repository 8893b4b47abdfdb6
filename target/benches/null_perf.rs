//! The target's own CPU cost per I/O: a [`Target`] serving one null namespace (every request
//! completes at once in the poller, no storage workers) over the in-memory fabric, driven
//! in-process by the initiator library's perf engine ([`run_worker`]), with the CPU time of
//! every thread read from `/proc/self/task/<tid>/schedstat` (nanoseconds on CPU) and
//! `/proc/self/task/<tid>/stat` (utime/stime ticks, for the user/system split).
//!
//! Per row: start the workers (one thread per I/O queue), warm up, meet at a barrier, sample
//! the target's threads (`poller-*`, `control`), run for the measured time, let every worker
//! drain, sample again. Each worker samples its own thread around its measured run. Every
//! command the target serves in the window is one the workers count (keep-alive and AER are
//! off), so poller CPU / completed I/Os is the target's CPU per I/O.
//!
//! What the in-memory fabric does to the figures (read them with this in mind): transfers run
//! synchronously inside the thread that posts them, under the network's one mutex. So the
//! poller's CPU includes copying the read data into the host's memory (its RDMA WRITEs) and
//! the responses into the host's receive buffers (its SENDs), and the initiator's includes
//! copying each capsule (with 4 KiB of in-capsule data for the writes) into the target's
//! receive buffers. On a NIC those copies are DMA and cost the CPU a doorbell. The Flush rows
//! move no data at all: they are the pure per-command cost (receive, parse, dispatch to the
//! namespace queue, completion, response, receive repost). A poller that spins without work
//! also counts: `poller util` near 100 % with IOPS limited by the host side means the row is
//! an upper bound of the busy cost (the rows with more queues load the poller harder; the
//! `event` rows never spin, but pay a wake-up per batch).
//!
//! To split the poller's CPU between the target's own code and the emulated NIC, profile one
//! row (`perf record -e cpu-clock --call-graph dwarf -- <bench binary> --runs 1 ROW`) and
//! class each `poller-0` sample by its stack: a frame in `raidline_fabric::mem` or
//! `raidline_fabric::sys_mem` is the fabric, a frame in `Poller::idle` is idling, the rest is
//! the target's own cost. `target/benches/null_perf_own.py [--runs N] ROW...` does exactly
//! that and prints `own_us_per_io` per run and the median (the bar: ≤ 1.0 µs per
//! 4 KiB I/O).
//!
//! Usage: `cargo bench -p raidline-target --bench null_perf --no-default-features -- [--secs S]
//! [--warmup S] [--runs N] [ROW...]` (a ROW equal to a row's name selects it alone, otherwise
//! every row whose name contains it). Each row runs N times, interleaved (run 1 of
//! every row, then run 2, ...); the summary gives the median and the spread of the runs.
//!
//! Invariants: every I/O is checked (an error fails the bench, no silent zero rows); the
//! namespace is never written by anything but the workers; CPU samples of a thread come from
//! the same clock at both ends of a window.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use raidline_fabric::mem::{MemFabric, MemNetwork};
use raidline_initiator::hist::Histogram;
use raidline_initiator::io::submit_flush;
use raidline_initiator::perf::{run_worker, Live, PerfConfig};
use raidline_initiator::{Controller, ControllerOptions, HostIdentity, Namespace, Nsid, Queue};
use raidline_proto::text::Nqn;
use raidline_target::config::PollMode;
use raidline_target::daemon::{Backend, NamespaceSpec, SubsystemSpec, Target, TargetSpec};
use raidline_target::identity;
use raidline_target::subsystem::{HostAccess, Limits, NamespaceInfo, Subsystem};

/// The subsystem served.
const SUBNQN: &str = "nqn.2026-11.io.raidline:null-perf";
/// Where the target listens.
const ADDR: &str = "10.9.0.1:4420";
/// Size of the null namespace (1 TiB: random offsets never repeat in a run).
const NS_BYTES: u64 = 1 << 40;
/// Logical block size.
const BLOCK: u32 = 4096;
/// I/O queues the controller connects (the rows use the first 1..=4).
const MAX_QUEUES: u16 = 4;

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What a row's workers submit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Random reads (data back by the poller's RDMA WRITE).
    Read,
    /// Random writes (4 KiB: in the capsule; larger: the poller's RDMA READ).
    Write,
    /// Flush of the namespace: no data, the pure per-command cost.
    Flush,
}

/// One measured configuration.
#[derive(Clone, Debug)]
struct Row {
    name: String,
    mode: PollMode,
    work: Work,
    bytes: u32,
    queue_depth: u16,
    queues: usize,
    /// Poller threads of the target (its queues are spread over them).
    pollers: usize,
}

fn row(mode: PollMode, work: Work, bytes: u32, queue_depth: u16, queues: usize) -> Row {
    row_p(mode, work, bytes, queue_depth, queues, 1)
}

/// A row on a target with `pollers` poller threads (`-p<N>` in its name when more than one).
fn row_p(
    mode: PollMode,
    work: Work,
    bytes: u32,
    queue_depth: u16,
    queues: usize,
    pollers: usize,
) -> Row {
    let w = match work {
        Work::Read => "rd",
        Work::Write => "wr",
        Work::Flush => "flush",
    };
    let size = match work {
        Work::Flush => String::new(),
        _ => format!("{}k", bytes / 1024),
    };
    let m = match mode {
        PollMode::Busy => "-busy",
        PollMode::Adaptive => "",
        PollMode::Event => "-event",
    };
    let p = if pollers > 1 {
        format!("-p{pollers}")
    } else {
        String::new()
    };
    Row {
        name: format!("{w}{size}-q{queue_depth}x{queues}{m}{p}"),
        mode,
        work,
        bytes,
        queue_depth,
        queues,
        pollers,
    }
}

/// The rows, grouped by poll mode and poller count (one target per group). The `-p2`/`-p4`
/// rows spread 4 queues over 2 and 4 pollers (`cores = N`); on a 2-CPU machine the host
/// threads compete with them, so read them as what N pollers cost, not as a ceiling.
fn all_rows() -> Vec<Row> {
    use PollMode::{Adaptive, Event};
    use Work::{Flush, Read, Write};
    vec![
        row(Adaptive, Read, 4096, 1, 1),
        row(Adaptive, Read, 4096, 32, 1),
        row(Adaptive, Read, 4096, 32, 2),
        row(Adaptive, Read, 4096, 32, 4),
        row(Adaptive, Write, 4096, 32, 1),
        row(Adaptive, Write, 4096, 32, 4),
        row(Adaptive, Read, 128 << 10, 32, 1),
        row(Adaptive, Flush, 0, 32, 1),
        row(Adaptive, Flush, 0, 32, 4),
        row(Event, Read, 4096, 32, 1),
        row(Event, Read, 4096, 32, 4),
        row(Event, Write, 4096, 32, 4),
        row(Event, Read, 128 << 10, 32, 1),
        row(Event, Flush, 0, 32, 1),
        row(Event, Flush, 0, 32, 4),
        row_p(Adaptive, Read, 4096, 32, 4, 2),
        row_p(Adaptive, Read, 4096, 32, 4, 4),
        row_p(Adaptive, Write, 4096, 32, 4, 2),
        row_p(Adaptive, Write, 4096, 32, 4, 4),
        row_p(Adaptive, Flush, 0, 32, 4, 2),
        row_p(Adaptive, Flush, 0, 32, 4, 4),
    ]
}

/// The (mode, pollers) groups of `rows`, in a fixed order.
fn groups(rows: &[Row]) -> Vec<(PollMode, usize)> {
    let mut out = Vec::new();
    for mode in [PollMode::Busy, PollMode::Adaptive, PollMode::Event] {
        for p in [1, 2, 4] {
            if rows.iter().any(|r| r.mode == mode && r.pollers == p) {
                out.push((mode, p));
            }
        }
    }
    out
}

/// Command-line options.
#[derive(Clone, Debug)]
struct Opts {
    secs: f64,
    warmup: f64,
    runs: usize,
    filters: Vec<String>,
}

fn parse_args() -> BenchResult<Opts> {
    let mut o = Opts {
        secs: 3.0,
        warmup: 0.5,
        runs: 3,
        filters: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> BenchResult<f64> {
            let v = args.next().ok_or_else(|| format!("{what} needs a value"))?;
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{what}: not a number: {v}").into())
        };
        match a.as_str() {
            // cargo bench passes --bench to harness = false binaries.
            "--bench" => {}
            "--secs" => o.secs = num("--secs")?.max(0.1),
            "--warmup" => o.warmup = num("--warmup")?,
            "--runs" => o.runs = (num("--runs")? as usize).max(1),
            "-h" | "--help" => {
                println!("null_perf [--secs S] [--warmup S] [--runs N] [ROW-FILTER...]");
                for r in all_rows() {
                    println!("  {}", r.name);
                }
                std::process::exit(0);
            }
            f if f.starts_with('-') => return Err(format!("unknown option {f}").into()),
            f => o.filters.push(f.to_string()),
        }
    }
    Ok(o)
}

/// CPU time of one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cpu {
    /// Nanoseconds on CPU (schedstat; when absent, (utime + stime) ticks converted).
    ns: u64,
    /// User-mode clock ticks.
    utime: u64,
    /// Kernel-mode clock ticks.
    stime: u64,
}

impl Cpu {
    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            ns: self.ns.saturating_sub(before.ns),
            utime: self.utime.saturating_sub(before.utime),
            stime: self.stime.saturating_sub(before.stime),
        }
    }
    fn add(self, o: Cpu) -> Cpu {
        Cpu {
            ns: self.ns + o.ns,
            utime: self.utime + o.utime,
            stime: self.stime + o.stime,
        }
    }
    fn secs(self) -> f64 {
        self.ns as f64 / 1e9
    }
    /// Share of the ticks spent in the kernel (system calls, page faults).
    fn sys_share(self) -> f64 {
        let t = self.utime + self.stime;
        if t == 0 {
            0.0
        } else {
            self.stime as f64 / t as f64
        }
    }
}

/// Clock ticks per second of `/proc/*/stat` (`getconf CLK_TCK`: 100 on Linux/x86-64 and arm64).
const CLK_TCK: u64 = 100;

/// Reads a thread's CPU time from its `/proc` directory (`/proc/self/task/<tid>` or
/// `/proc/thread-self`).
fn read_cpu(dir: &str) -> BenchResult<Cpu> {
    let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
    // Fields after the parenthesised comm: state is field 3, utime 14, stime 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| format!("{dir}/stat: no comm"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> BenchResult<u64> {
        Ok(f.get(i)
            .ok_or_else(|| format!("{dir}/stat: short"))?
            .parse()?)
    };
    let (utime, stime) = (tick(11)?, tick(12)?);
    let ns = match std::fs::read_to_string(format!("{dir}/schedstat")) {
        Ok(s) => s
            .split_whitespace()
            .next()
            .ok_or_else(|| format!("{dir}/schedstat: empty"))?
            .parse()?,
        Err(_) => (utime + stime) * (1_000_000_000 / CLK_TCK),
    };
    Ok(Cpu { ns, utime, stime })
}

/// CPU of the target's threads: pollers and the control thread, apart.
#[derive(Clone, Copy, Debug, Default)]
struct TargetCpu {
    pollers: Cpu,
    control: Cpu,
    poller_threads: usize,
}

fn target_cpu() -> BenchResult<TargetCpu> {
    let mut t = TargetCpu::default();
    for e in std::fs::read_dir("/proc/self/task")? {
        let dir = format!("/proc/self/task/{}", e?.file_name().to_string_lossy());
        // A thread may exit between the listing and the read: skip it.
        let Ok(comm) = std::fs::read_to_string(format!("{dir}/comm")) else {
            continue;
        };
        let comm = comm.trim_end();
        if comm.starts_with("poller") {
            if let Ok(c) = read_cpu(&dir) {
                t.pollers = t.pollers.add(c);
                t.poller_threads += 1;
            }
        } else if comm == "control" {
            if let Ok(c) = read_cpu(&dir) {
                t.control = t.control.add(c);
            }
        }
    }
    if t.poller_threads == 0 {
        return Err("no poller thread found in /proc/self/task".into());
    }
    Ok(t)
}

/// One worker's measured window.
#[derive(Debug, Default)]
struct Window {
    ios: u64,
    bytes: u64,
    latency: Histogram,
    elapsed: Duration,
    cpu: Cpu,
}

/// One row's measured outcome.
#[derive(Debug)]
struct Measured {
    ios: u64,
    bytes: u64,
    latency: Histogram,
    wall: Duration,
    pollers: Cpu,
    control: Cpu,
    initiator: Cpu,
}

impl Measured {
    fn iops(&self) -> f64 {
        self.ios as f64 / self.wall.as_secs_f64()
    }
    fn mb_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.wall.as_secs_f64()
    }
    /// Target (poller) CPU per I/O, microseconds.
    fn target_us(&self) -> f64 {
        self.pollers.secs() * 1e6 / self.ios.max(1) as f64
    }
    fn initiator_us(&self) -> f64 {
        self.initiator.secs() * 1e6 / self.ios.max(1) as f64
    }
    /// I/Os per second of poller CPU.
    fn iops_per_core(&self) -> f64 {
        self.ios as f64 / self.pollers.secs().max(1e-9)
    }
    /// Poller CPU over wall time (per poller: one poller here).
    fn poller_util(&self) -> f64 {
        self.pollers.secs() / self.wall.as_secs_f64()
    }
}

/// Keeps `qd` Flushes of `nsid` in flight on `q` for `duration`, then drains; polls and backs
/// off exactly as [`run_worker`] does, so the Flush rows load the machine like the others.
fn run_flush(
    q: &mut Queue<MemFabric>,
    nsid: Nsid,
    qd: u16,
    duration: Duration,
) -> BenchResult<Window> {
    let mut w = Window::default();
    let mut done = Vec::with_capacity(64);
    let start = Instant::now();
    let end = start + duration;
    let mut submitting = true;
    let mut checks = 0u32;
    let mut idle = 0u32;
    loop {
        while submitting && q.in_flight() < usize::from(qd) {
            let Some(tag) = q.alloc() else { break };
            if let Err(e) = submit_flush(q, tag, nsid) {
                q.release(tag);
                return Err(e.into());
            }
        }
        done.clear();
        if q.poll(&mut done) == 0 {
            idle += 1;
            if idle > 1024 {
                // As `run_worker` does: after a long run of empty polls stop burning the core
                // (the initiator's `queue::backoff`, which is crate-private, past 1024 polls).
                let us = u64::from((idle - 256).min(200)).max(10);
                std::thread::sleep(Duration::from_micros(us));
            }
        } else {
            idle = 0;
        }
        for &tag in &done {
            let Some(f) = q.take(tag) else { continue };
            f.result?;
            w.latency.record(f.latency.as_nanos() as u64);
            w.ios += 1;
        }
        checks += 1;
        if submitting && checks >= 64 {
            checks = 0;
            submitting = Instant::now() < end;
        }
        if !submitting && q.in_flight() == 0 {
            break;
        }
    }
    w.elapsed = start.elapsed();
    Ok(w)
}

/// Runs `row`'s workload on `q` for `duration` (drained at the end).
fn run_work(
    row: &Row,
    q: &mut Queue<MemFabric>,
    ns: &Namespace,
    index: usize,
    duration: Duration,
) -> BenchResult<Window> {
    if row.work == Work::Flush {
        return run_flush(q, ns.nsid, row.queue_depth, duration);
    }
    let cfg = PerfConfig {
        queue_depth: row.queue_depth,
        block_size: row.bytes,
        read_percent: if row.work == Work::Read { 100 } else { 0 },
        random: true,
        duration,
        range_blocks: 0,
        seed: 0x6e75_6c6c ^ index as u64,
    };
    let r = run_worker(
        q,
        ns,
        &cfg,
        index,
        row.queues,
        &AtomicBool::new(false),
        &Live::default(),
    )?;
    if let Some(e) = r.first_error {
        return Err(format!("{} I/O errors, first: {e}", r.errors).into());
    }
    Ok(Window {
        ios: r.ios(),
        bytes: r.bytes,
        latency: r.latency,
        elapsed: r.elapsed,
        cpu: Cpu::default(),
    })
}

/// Runs one row on the first `row.queues` queues.
fn measure(
    row: &Row,
    queues: &mut [Queue<MemFabric>],
    ns: &Namespace,
    opts: &Opts,
) -> BenchResult<Measured> {
    let n = row.queues;
    let qs = queues
        .get_mut(..n)
        .ok_or_else(|| format!("{}: {n} queues wanted, {} connected", row.name, MAX_QUEUES))?;
    let barrier = Barrier::new(n + 1);
    let warmup = Duration::from_secs_f64(opts.warmup);
    let secs = Duration::from_secs_f64(opts.secs);
    std::thread::scope(|s| -> BenchResult<Measured> {
        let mut handles = Vec::new();
        for (i, q) in qs.iter_mut().enumerate() {
            let barrier = &barrier;
            let h = std::thread::Builder::new()
                .name(format!("perf-w{i}"))
                .spawn_scoped(s, move || -> BenchResult<Window> {
                    // Warm-up (pool, caches, page faults of the buffers); a failure still
                    // meets the barrier so the main thread is not left waiting.
                    let warm = if warmup.is_zero() {
                        Ok(Window::default())
                    } else {
                        run_work(row, q, ns, i, warmup)
                    };
                    barrier.wait();
                    warm?;
                    let before = read_cpu("/proc/thread-self")?;
                    let mut w = run_work(row, q, ns, i, secs)?;
                    w.cpu = read_cpu("/proc/thread-self")?.since(before);
                    Ok(w)
                })?;
            handles.push(h);
        }
        barrier.wait();
        let before = target_cpu()?;
        let t0 = Instant::now();
        let windows: Vec<BenchResult<Window>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect();
        let wall = t0.elapsed();
        let after = target_cpu()?;
        let mut m = Measured {
            ios: 0,
            bytes: 0,
            latency: Histogram::new(),
            wall,
            pollers: after.pollers.since(before.pollers),
            control: after.control.since(before.control),
            initiator: Cpu::default(),
        };
        for w in windows {
            let w = w?;
            m.ios += w.ios;
            m.bytes += w.bytes;
            m.latency.merge(&w.latency);
            m.initiator = m.initiator.add(w.cpu);
            m.wall = m.wall.max(w.elapsed);
        }
        if m.ios == 0 {
            return Err(format!("{}: no I/O completed", row.name).into());
        }
        Ok(m)
    })
}

/// The target: one subsystem, one null namespace, `pollers` pollers in `mode`.
fn start_target(net: &MemNetwork, mode: PollMode, pollers: usize) -> BenchResult<Target> {
    let addr: SocketAddr = ADDR.parse()?;
    let limits = Limits::default();
    let mut spec = TargetSpec::new(limits);
    spec.listen = vec![addr];
    spec.pollers = pollers;
    spec.poll_mode = mode;
    spec.workers_per_namespace = 1;
    spec.subsystems.push(SubsystemSpec {
        subsystem: Subsystem {
            nqn: Nqn::new(SUBNQN)?,
            serial: identity::serial_for(SUBNQN.as_bytes()),
            model: "Raidline null".into(),
            hosts: HostAccess::Any,
            auth: Default::default(),
            namespaces: vec![],
        },
        namespaces: vec![NamespaceSpec {
            info: NamespaceInfo {
                nsid: 1,
                block_size: BLOCK,
                blocks: NS_BYTES / u64::from(BLOCK),
                ids: identity::for_file(SUBNQN, 1, "null"),
                preferred_write_blocks: 1,
                deallocate: false,
                active: Default::default(),
            },
            backend: Backend::Null(NS_BYTES),
            array: None,
        }],
    });
    Ok(Target::start(net.device("target0"), spec)?)
}

/// One controller with [`MAX_QUEUES`] I/O queues; no keep-alive and no AER, so the admin queue
/// is silent during the measurements.
fn connect(net: &MemNetwork, target: &Target) -> BenchResult<Controller<MemFabric>> {
    let mut o = ControllerOptions::new(HostIdentity::from_uuid([0x11; 16]), Nqn::new(SUBNQN)?);
    o.kato = Duration::ZERO;
    o.aer = false;
    o.io_queues = MAX_QUEUES;
    o.io_depth = 128;
    o.max_io_bytes = 128 << 10;
    o.io_timeout = Duration::from_secs(10);
    o.admin_timeout = Duration::from_secs(10);
    let addr = *target
        .local_addrs()
        .first()
        .ok_or("target listens nowhere")?;
    Ok(Controller::connect(net.device("host0"), addr, o)?)
}

/// Runs `rows` (all of one poll mode) once each on a fresh target; results in row order.
fn run_group(rows: &[&Row], opts: &Opts) -> BenchResult<Vec<Measured>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let net = MemNetwork::new();
    let target = start_target(&net, first.mode, first.pollers)?;
    let mut c = connect(&net, &target)?;
    let ns = c.namespace(Nsid(1))?;
    let mut qs = c.take_io_queues();
    if qs.len() < usize::from(MAX_QUEUES) {
        return Err(format!("{} I/O queues granted, {MAX_QUEUES} wanted", qs.len()).into());
    }
    if qs[0].in_capsule_max() < 4096 {
        return Err("the target offers less than 4 KiB of in-capsule data".into());
    }
    let mut out = Vec::new();
    for r in rows {
        let m = measure(r, &mut qs, &ns, opts)?;
        println!("{}", kv_line(r, &m));
        out.push(m);
    }
    for q in &mut qs {
        q.disconnect();
    }
    c.shutdown()?;
    let errs = target.shutdown();
    if !errs.is_empty() {
        return Err(format!("target shutdown: {errs:?}").into());
    }
    Ok(out)
}

fn mode_name(m: PollMode) -> &'static str {
    match m {
        PollMode::Busy => "busy",
        PollMode::Adaptive => "adaptive",
        PollMode::Event => "event",
    }
}

fn kv_line(r: &Row, m: &Measured) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "null_perf row={} mode={} queues={} qd={} bytes={} ios={} wall_s={:.3} iops={:.0} \
         mb_s={:.1} lat_p50_us={:.1} lat_p99_us={:.1} poller_cpu_s={:.3} poller_util={:.3} \
         poller_sys_share={:.3} target_us_per_io={:.3} iops_per_poller_core={:.0} \
         control_cpu_ms={:.1} initiator_cpu_s={:.3} initiator_us_per_io={:.3}",
        r.name,
        mode_name(r.mode),
        r.queues,
        r.queue_depth,
        r.bytes,
        m.ios,
        m.wall.as_secs_f64(),
        m.iops(),
        m.mb_s(),
        us(m.latency.percentile(50.0)),
        us(m.latency.percentile(99.0)),
        m.pollers.secs(),
        m.poller_util(),
        m.pollers.sys_share(),
        m.target_us(),
        m.iops_per_core(),
        m.control.secs() * 1e3,
        m.initiator.secs(),
        m.initiator_us(),
    )
}

/// Median of `v` (the mean of the middle two for an even count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Median, smallest and largest of one figure over the runs.
fn stats(runs: &[&Measured], f: impl Fn(&Measured) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = runs.iter().map(|m| f(m)).collect();
    let med = median(&mut v);
    match (v.first(), v.last()) {
        (Some(&lo), Some(&hi)) => (med, lo, hi),
        _ => (f64::NAN, f64::NAN, f64::NAN),
    }
}

fn p50_us(m: &Measured) -> f64 {
    m.latency.percentile(50.0) as f64 / 1e3
}

fn p99_us(m: &Measured) -> f64 {
    m.latency.percentile(99.0) as f64 / 1e3
}

fn summary(rows: &[Row], results: &[Vec<Measured>]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nnull_perf summary: medians of {} run(s) (target us/IO also min-max); target = the \
         poller thread's CPU, fabric copies included",
        results.len()
    );
    let _ = writeln!(
        s,
        "{:<20} {:>8} {:>7} {:>9} {:>9} {:>6} {:>9} {:>17} {:>10} {:>9}",
        "row",
        "IOPS",
        "MB/s",
        "p50 us",
        "p99 us",
        "util",
        "target",
        "(min-max) us/IO",
        "IOPS/core",
        "init us"
    );
    for (i, r) in rows.iter().enumerate() {
        let runs: Vec<&Measured> = results.iter().map(|v| &v[i]).collect();
        let (t, tmin, tmax) = stats(&runs, Measured::target_us);
        let _ = writeln!(
            s,
            "{:<20} {:>8.0} {:>7.1} {:>9.1} {:>9.1} {:>6.2} {:>9.3} {:>17} {:>10.0} {:>9.3}",
            r.name,
            stats(&runs, Measured::iops).0,
            stats(&runs, Measured::mb_s).0,
            stats(&runs, p50_us).0,
            stats(&runs, p99_us).0,
            stats(&runs, Measured::poller_util).0,
            t,
            format!("({tmin:.3}-{tmax:.3})"),
            stats(&runs, Measured::iops_per_core).0,
            stats(&runs, Measured::initiator_us).0,
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let runs: Vec<&Measured> = results.iter().map(|v| &v[i]).collect();
        let (t, tmin, tmax) = stats(&runs, Measured::target_us);
        let (iops, imin, imax) = stats(&runs, Measured::iops);
        let _ = writeln!(
            s,
            "null_perf_median row={} runs={} target_us_per_io={t:.3} target_us_min={tmin:.3} \
             target_us_max={tmax:.3} iops_per_poller_core={:.0} iops={iops:.0} iops_min={imin:.0} \
             iops_max={imax:.0} lat_p50_us={:.1} lat_p99_us={:.1} poller_util={:.3} \
             initiator_us_per_io={:.3}",
            r.name,
            runs.len(),
            stats(&runs, Measured::iops_per_core).0,
            stats(&runs, p50_us).0,
            stats(&runs, p99_us).0,
            stats(&runs, Measured::poller_util).0,
            stats(&runs, Measured::initiator_us).0,
        );
    }
    s
}

const CAVEATS: &str = "\
null_perf: target = one poller thread serving a null namespace over the in-memory fabric.
  The in-memory fabric runs every transfer synchronously in the posting thread: the poller's CPU
  includes the copies of read data (its RDMA WRITEs) and of responses (its SENDs); the initiator's
  includes the capsule copies (and 4 KiB in-capsule write data). Flush rows move no data: the
  pure per-command cost. A poller that spins idle is counted too (poller util ~1.00 with IOPS set
  by the host side makes a row an upper bound); event rows never spin but pay wake-ups.";

fn main() -> BenchResult<()> {
    let opts = parse_args()?;
    let all = all_rows();
    // A filter equal to a row's name selects that row only; otherwise it selects every row
    // whose name contains it.
    let matches =
        |name: &str, f: &str| name == f || (!all.iter().any(|r| r.name == f) && name.contains(f));
    let rows: Vec<Row> = all
        .iter()
        .filter(|r| opts.filters.is_empty() || opts.filters.iter().any(|f| matches(&r.name, f)))
        .cloned()
        .collect();
    if rows.is_empty() {
        return Err("no row matches the filter (see --help)".into());
    }
    println!("{CAVEATS}");
    println!(
        "null_perf: {} row(s) x {} run(s), {:.1} s each after {:.1} s warm-up",
        rows.len(),
        opts.runs,
        opts.secs,
        opts.warmup
    );
    let mut results: Vec<Vec<Measured>> = Vec::new();
    for run in 0..opts.runs {
        println!("null_perf: run {}", run + 1);
        let mut this = Vec::new();
        for (mode, pollers) in groups(&rows) {
            let group: Vec<&Row> = rows
                .iter()
                .filter(|r| r.mode == mode && r.pollers == pollers)
                .collect();
            this.extend(run_group(&group, &opts)?);
        }
        results.push(this);
    }
    // Rows were run grouped by mode and pollers: put the results back in that order.
    let order: Vec<Row> = groups(&rows)
        .into_iter()
        .flat_map(|(m, p)| {
            rows.iter()
                .filter(move |r| r.mode == m && r.pollers == p)
                .cloned()
        })
        .collect();
    print!("{}", summary(&order, &results));
    Ok(())
}
