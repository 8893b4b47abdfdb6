//! What the storage workers per namespace buy at a host's queue depth: the daemon's own bring-up
//! (`service::build_spec` from a configuration) creates a RAID-5 over four O_DIRECT file
//! members on this machine's disk (io_uring, the target's registered pool), a [`Target`] serves
//! it over the in-memory fabric, and the initiator library's perf engine drives one I/O queue
//! at QD16 with 4 KiB random reads, then random writes (read-modify-write on the array). The
//! same rows run with `storage_workers` = 4 and 16 on the worker path (`io_path = "workers"`),
//! and with 16 on the poller's own ring (`io_path = "ring"`: reads, and writes once their
//! bitmap region is marked, run there), interleaved (run 1 of every row, then run 2, ...);
//! the summary gives medians and the ratios to the first variant from the same run.
//!
//! Each worker thread runs one array request at a time, so the number of workers is the number
//! of array requests in flight per poller and namespace; a host queue deeper than that waits.
//!
//! With `--scale`, the rows are instead the ring path with 1, 2 and 4 pollers (`cores`) and
//! four I/O queues at QD16 each (one host thread per queue): what `cores = N` buys on this
//! machine.
//!
//! With `--degraded`, every variant serves a new array whose fourth member is failed before
//! the host connects: reads rebuild its chunks, writes reconstruct or skip them and are
//! recorded in the partial-parity log (`write_hole = "degraded"`, the default).
//!
//! Usage: `cargo bench -p raidline-target --bench array_qd --no-default-features -- [--secs S]
//! [--runs N] [--dir PATH] [--scale] [--degraded] [--only ring|workers] [--job
//! randread|randwrite]` (PATH: where the member files go, default /var/tmp; it must be a
//! filesystem with O_DIRECT, not tmpfs). `--only` and `--job` keep some rows, for a profiler's
//! run (`valgrind --tool=callgrind --separate-threads=yes`: instructions per I/O on the
//! poller). Every I/O is checked: an error fails the bench.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use raidline_fabric::mem::MemNetwork;
use raidline_initiator::hist::Histogram;
use raidline_initiator::perf::{run_worker, Live, PerfConfig};
use raidline_initiator::{Controller, ControllerOptions, HostIdentity, Nsid};
use raidline_proto::text::Nqn;
use raidline_target::config::Config;
use raidline_target::daemon::Target;
use raidline_target::service::build_spec;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

const SUBNQN: &str = "nqn.2026-11.io.raidline:array-qd";
const MEMBER_BYTES: u64 = 256 << 20;
const QUEUE_DEPTH: u16 = 16;
/// One configuration under test.
#[derive(Clone, Copy)]
struct Variant {
    workers: u32,
    io_path: &'static str,
    pollers: u32,
    queues: u16,
}

/// (storage workers, io_path) of each variant: one queue, one poller.
const VARIANTS: [Variant; 3] = [
    Variant {
        workers: 4,
        io_path: "workers",
        pollers: 1,
        queues: 1,
    },
    Variant {
        workers: 16,
        io_path: "workers",
        pollers: 1,
        queues: 1,
    },
    Variant {
        workers: 16,
        io_path: "ring",
        pollers: 1,
        queues: 1,
    },
];

/// `--scale`: the ring path on 1, 2 and 4 pollers, four queues.
const SCALE: [Variant; 3] = [
    Variant {
        workers: 16,
        io_path: "ring",
        pollers: 1,
        queues: 4,
    },
    Variant {
        workers: 16,
        io_path: "ring",
        pollers: 2,
        queues: 4,
    },
    Variant {
        workers: 16,
        io_path: "ring",
        pollers: 4,
        queues: 4,
    },
];

impl Variant {
    fn name(&self) -> String {
        if self.queues == 1 {
            format!("{} workers, {}", self.workers, self.io_path)
        } else {
            format!("{} poller(s), {} queues", self.pollers, self.queues)
        }
    }
}

struct Opts {
    secs: f64,
    runs: usize,
    dir: PathBuf,
    scale: bool,
    degraded: bool,
    /// `--only PATH`: only the variants on this `io_path` (for a profiler's run).
    only: Option<String>,
    /// `--job randread|randwrite`: only that row (for a profiler's run).
    job: Option<String>,
}

fn parse_args() -> BenchResult<Opts> {
    let mut o = Opts {
        secs: 5.0,
        runs: 3,
        dir: PathBuf::from("/var/tmp"),
        scale: false,
        degraded: false,
        only: None,
        job: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--secs" => o.secs = val()?.parse()?,
            "--runs" => o.runs = val()?.parse()?,
            "--dir" => o.dir = PathBuf::from(val()?),
            "--scale" => o.scale = true,
            "--degraded" => o.degraded = true,
            "--only" => o.only = Some(val()?),
            "--job" => match val()?.as_str() {
                j @ ("randread" | "randwrite") => o.job = Some(j.to_string()),
                j => return Err(format!("--job {j}: randread or randwrite").into()),
            },
            // cargo bench passes --bench; nothing else is expected.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(o)
}

fn config(dir: &Path, v: Variant, port: u16) -> BenchResult<Config> {
    let members: Vec<String> = (0..4)
        .map(|i| format!("\"{}\"", dir.join(format!("m{i}.img")).display()))
        .collect();
    let text = format!(
        r#"
[target]
listen = ["10.7.0.1:{port}"]
cores = {pollers}
storage_workers = {workers}
io_path = "{io_path}"
management_socket = "{dir}/raidline.sock"
state_dir = "{dir}/state"

[[array]]
name = "bench"
members = [{members}]
chunk_kib = 64
parity = "cpu"
assume_clean = true

[[subsystem]]
nqn = "{SUBNQN}"
model = "Raidline bench"
allow_any_host = true

[[subsystem.namespace]]
nsid = 1
array = "bench"
"#,
        dir = dir.display(),
        members = members.join(", "),
        pollers = v.pollers,
        workers = v.workers,
        io_path = v.io_path,
    );
    Ok(Config::parse(&text, "array_qd.toml")?)
}

/// IOPS and p99 (µs) of one row run: `queues` I/O queues, one host thread each.
fn run_row(
    net: &MemNetwork,
    target: &Target,
    read: bool,
    secs: f64,
    queues: u16,
) -> BenchResult<(f64, f64)> {
    let mut o = ControllerOptions::new(HostIdentity::from_uuid([0x42; 16]), Nqn::new(SUBNQN)?);
    o.kato = Duration::ZERO;
    o.aer = false;
    o.io_queues = queues;
    o.io_depth = 64;
    o.io_timeout = Duration::from_secs(30);
    let addr: SocketAddr = *target.local_addrs().first().ok_or("no listener")?;
    let mut c = Controller::connect(net.device("host"), addr, o)?;
    let ns = c.namespace(Nsid(1))?;
    let mut qs = c.take_io_queues();
    let n = qs.len();
    let stop = AtomicBool::new(false);
    let live = Live::default();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(i, q)| {
                let (ns, stop, live) = (&ns, &stop, &live);
                s.spawn(move || {
                    let cfg = PerfConfig {
                        queue_depth: QUEUE_DEPTH,
                        block_size: 4096,
                        read_percent: if read { 100 } else { 0 },
                        random: true,
                        duration: Duration::from_secs_f64(secs),
                        range_blocks: 0,
                        seed: 0x5157 ^ u64::from(read) ^ ((i as u64) << 8),
                    };
                    run_worker(q, ns, &cfg, i, n, stop, live)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "perf worker panicked".to_string()))
            .collect::<Vec<_>>()
    });
    let (mut ios, mut elapsed, mut lat) = (0u64, Duration::ZERO, Histogram::default());
    for r in results {
        let r = r??;
        if let Some(e) = r.first_error {
            return Err(format!("{} I/O errors, first: {e}", r.errors).into());
        }
        ios += r.ios();
        elapsed = elapsed.max(r.elapsed);
        lat.merge(&r.latency);
    }
    let iops = ios as f64 / elapsed.as_secs_f64();
    Ok((iops, lat.percentile(99.0) as f64 / 1e3))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> BenchResult<()> {
    let o = parse_args()?;
    let dir = o
        .dir
        .join(format!("raidline-array-qd-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // Zeroed member files (no array on them yet).
    let blank = || -> BenchResult<()> {
        for i in 0..4 {
            let f = std::fs::File::create(dir.join(format!("m{i}.img")))?;
            f.set_len(MEMBER_BYTES)?;
        }
        Ok(())
    };
    blank()?;
    let net = MemNetwork::new();
    // results[variant][read?] = runs of (IOPS, p99)
    let all: &[Variant] = if o.scale { &SCALE } else { &VARIANTS };
    let variants: Vec<Variant> = all
        .iter()
        .filter(|v| o.only.as_deref().map_or(true, |p| v.io_path == p))
        .copied()
        .collect();
    if variants.is_empty() {
        return Err("--only: no variant on that io_path".into());
    }
    let mut results = vec![[Vec::new(), Vec::new()]; variants.len()];
    let mut port = 4420u16;
    for run in 0..o.runs {
        for (wi, &v) in variants.iter().enumerate() {
            port += 1;
            if o.degraded {
                // A new array each time: the last one's superblocks record the failure.
                blank()?;
            }
            let spec = build_spec(&config(&dir, v, port)?)?;
            if o.degraded {
                let array = &spec.arrays.first().ok_or("no array")?.1;
                array.set_faulty(raidline_raid::MemberIdx(3))?;
            }
            let target = Target::start(net.device(&format!("t{port}")), spec)?;
            for read in [true, false] {
                let job = if read { "randread" } else { "randwrite" };
                if o.job.as_deref().is_some_and(|j| j != job) {
                    continue;
                }
                let r = run_row(&net, &target, read, o.secs, v.queues)?;
                println!(
                    "run {} {:24} {:9} {:8.0} IOPS  p99 {:8.0} us",
                    run + 1,
                    v.name(),
                    if read { "randread" } else { "randwrite" },
                    r.0,
                    r.1
                );
                results[wi][usize::from(!read)].push(r);
            }
            let errors = target.shutdown();
            if !errors.is_empty() {
                return Err(format!("shutdown: {errors:?}").into());
            }
        }
    }
    println!(
        "\n4 KiB random I/O, QD{QUEUE_DEPTH} per queue, RAID-5 of 4 O_DIRECT files (64 KiB chunk{}) under {}; median of {} runs",
        if o.degraded { ", the fourth failed" } else { "" },
        o.dir.display(),
        o.runs
    );
    let head: Vec<String> = variants.iter().map(Variant::name).collect();
    println!(
        "| job | {} | ratios to the first | p99 µs |",
        head.iter()
            .map(|h| format!("{h} IOPS"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("| --- |{} ---: | ---: |", " ---: |".repeat(variants.len()));
    for (k, job) in ["randread-4k", "randwrite-4k"].iter().enumerate() {
        if results.iter().any(|r| r[k].is_empty()) {
            continue;
        }
        let iops = |wi: usize| median(results[wi][k].iter().map(|r| r.0).collect());
        let p99 = |wi: usize| median(results[wi][k].iter().map(|r| r.1).collect());
        let all: Vec<String> = (0..variants.len())
            .map(|i| format!("{:.0}", iops(i)))
            .collect();
        let ratios: Vec<String> = (1..variants.len())
            .map(|i| format!("{:.2}", iops(i) / iops(0)))
            .collect();
        let lat: Vec<String> = (0..variants.len())
            .map(|i| format!("{:.0}", p99(i)))
            .collect();
        println!(
            "| {job} | {} | {} | {} |",
            all.join(" | "),
            ratios.join(" / "),
            lat.join(" / ")
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
