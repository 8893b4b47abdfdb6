//! GPU parity: correctness, then throughput of the zero-copy (mapped host memory) engine
//! against the staged way (copy in, compute, copy out) and the CPU engine, across batch
//! sizes (up to 8192 stripes, 2 GiB of data); the host→device copy bandwidth of the same
//! run; CPU time per GB; the crossover batch size for `AutoParity`; RAID-6 P+Q throughput;
//! the kernels' memory-access variants compared at a middle and the largest batch.
//!
//! Timing: one warm-up call, then the best of 3 timed repetitions, each of as many calls as
//! fill at least 30 ms (10 ms with `--quick`; a 2 GiB batch is one call). The host→device
//! copy is timed the same way (the best of 5 single copies of 1 GiB, each from enqueue to
//! completion), so the ratio compares like with like. Job lists are built outside the timed
//! part.
//!
//!     cargo bench -p raidline-raid --features gpu --bench gpu [-- --quick] [-- --require-gpu]
//!
//! Stripes are 4+1 × 64 KiB chunks (P+Q: 4+2). "GB/s" is source (data) bytes processed per
//! second, 10^9 bytes. CPU time is the whole process's user+system time (getrusage), every
//! thread included (CUDA's own threads too), divided by the data processed.
//!
//! Output: plain tables, then `key=value` lines (the machine-readable summary). Exit codes:
//! 0 done (or no GPU, without `--require-gpu`: one line `no GPU: <reason>`), 1 a correctness
//! failure, 2 no GPU with `--require-gpu`, 3 a device error during the run.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use raidline_raid::gpu::kernels::{self, Access};
use raidline_raid::gpu::{pq_gen_cpu, GpuParity, PqJob};
use raidline_raid::sys::gpu::{nvrtc_version, process_cpu_time};
use raidline_raid::{BufferArena, CpuXor, IoBuf, ParityEngine, XorJob};

/// Data chunks per stripe.
const K: usize = 4;
/// Chunk bytes.
const CHUNK: usize = 64 << 10;
/// Chunks laid out per stripe in the arena: data, P, Q.
const SLOTS: usize = K + 2;
/// Goal: mapped parity ≥ this × host→device copy bandwidth.
const GOAL_MAPPED_VS_H2D: f64 = 0.9;
/// Goal: CPU time per GB with the GPU ≤ this × the CPU engine's.
const GOAL_CPU_TIME: f64 = 0.10;
/// Timed repetitions per measurement (the best one counts).
const REPS: usize = 3;

type Failure = (ExitCode, String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let require = args.iter().any(|a| a == "--require-gpu");
    let gpu = match GpuParity::new() {
        Ok(g) => g,
        Err(e) => {
            println!("{e}");
            println!("gpu_available=0");
            return if require {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(&gpu, quick) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            println!("FAILED: {msg}");
            code
        }
    }
}

fn device_err(e: impl std::fmt::Display) -> Failure {
    (ExitCode::from(3), e.to_string())
}

fn run(gpu: &GpuParity, quick: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let d = gpu.device();
    let nvrtc = nvrtc_version().map_err(device_err)?;
    println!(
        "device: {} (sm_{}{}, {} SMs), driver API {}, NVRTC {}.{}, kernels loaded as {}",
        d.name,
        d.cc.0,
        d.cc.1,
        d.sms,
        d.driver_version,
        nvrtc.0,
        nvrtc.1,
        gpu.kernel_image()
    );
    println!(
        "kernels: access {}, {} threads × {} × 16 B per source per tile ({} KiB tiles), loads of {} sources in flight together",
        gpu.access().name(),
        kernels::BLOCK_THREADS,
        kernels::UNROLL,
        kernels::TILE_BYTES >> 10,
        kernels::GROUP
    );
    let cpu = CpuXor::detect();
    println!("cpu engine: {} (one thread)", cpu.name());

    let batches: &[usize] = if quick {
        &[1, 8, 64, 512]
    } else {
        &[1, 8, 64, 512, 4096, 8192]
    };
    let max_stripes = *batches.last().unwrap_or(&1);
    let t = Instant::now();
    let mut buf = arena(max_stripes * SLOTS * CHUNK)?;
    fill(&mut buf, 0x5EED);
    gpu.register(buf.arena()).map_err(device_err)?;
    println!(
        "arena: {} MiB registered (pinned, device-mapped) in {:.2} s",
        buf.len() >> 20,
        t.elapsed().as_secs_f64()
    );

    correctness(gpu, &cpu)?;

    let h2d_bytes = if quick { 64 << 20 } else { 1 << 30 };
    let h2d_reps = 5;
    let h2d = gpu.h2d_bandwidth(h2d_bytes, h2d_reps).map_err(device_err)?;
    println!(
        "host->device copy (pinned, {} MiB, best of {h2d_reps}): {:.2} GB/s",
        h2d_bytes >> 20,
        h2d / 1e9
    );

    let rep_min = Duration::from_millis(if quick { 10 } else { 30 });
    println!();
    println!(
        "XOR parity, {K}+1 × {} KiB stripes, GB/s of data",
        CHUNK >> 10
    );
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>14} {:>14}",
        "stripes", "data MiB", "mapped", "staged", "cpu", "cpu ms/GB gpu", "cpu ms/GB cpu"
    );
    let mut rows = Vec::new();
    for &stripes in batches {
        let mapped = xor_mapped(gpu, &mut buf, stripes, rep_min)?;
        let mut rig = gpu.staged_rig(stripes, K, CHUNK).map_err(device_err)?;
        fill(rig.sources_mut(), stripes as u64);
        let staged = time(rep_min, stripes, || rig.run().map_err(device_err))?;
        drop(rig);
        let mut jobs = xor_jobs(&mut buf, stripes);
        let on_cpu = time(rep_min, stripes, || {
            cpu.xor_batch(&mut jobs).map_err(device_err)
        })?;
        drop(jobs);
        println!(
            "{:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>14.3} {:>14.3}",
            stripes,
            (stripes * K * CHUNK) as f64 / f64::from(1u32 << 20),
            mapped.gbps(),
            staged.gbps(),
            on_cpu.gbps(),
            mapped.cpu_ms_per_gb(),
            on_cpu.cpu_ms_per_gb()
        );
        rows.push((stripes, mapped, staged, on_cpu));
    }

    let pq_stripes = max_stripes;
    let mut jobs = pq_jobs(&mut buf, pq_stripes);
    let pq = time(rep_min, pq_stripes, || {
        gpu.pq_gen_batch(&mut jobs).map_err(device_err)
    })?;
    drop(jobs);
    let pq_cpu_stripes = pq_stripes.min(64);
    let mut jobs = pq_jobs(&mut buf, pq_cpu_stripes);
    let pq_cpu = time(rep_min, pq_cpu_stripes, || {
        jobs.iter_mut()
            .try_for_each(|j| pq_gen_cpu(&j.srcs, j.p, j.q))
            .map_err(device_err)
    })?;
    drop(jobs);
    println!();
    println!(
        "RAID-6 P+Q ({K}+2 × {} KiB): mapped GPU {:.2} GB/s over {pq_stripes} stripes; CPU reference {:.2} GB/s",
        CHUNK >> 10,
        pq.gbps(),
        pq_cpu.gbps()
    );

    // The kernels' memory-access variants, each recompiled and timed at a middle and the
    // largest batch (the default measured again, in the same conditions).
    let sweep = [64.min(max_stripes), max_stripes];
    println!();
    println!("access variants (mapped XOR, GB/s of data; / H2D at {max_stripes} stripes)");
    println!(
        "{:>10} {:>14} {:>14} {:>8}",
        "access",
        format!("{} stripes", sweep[0]),
        format!("{} stripes", sweep[1]),
        "/ H2D"
    );
    let mut variants = Vec::new();
    for access in Access::ALL {
        gpu.set_access(access).map_err(device_err)?;
        let mid = xor_mapped(gpu, &mut buf, sweep[0], rep_min)?;
        let big = xor_mapped(gpu, &mut buf, sweep[1], rep_min)?;
        println!(
            "{:>10} {:>14.2} {:>14.2} {:>8.3}",
            access.name(),
            mid.gbps(),
            big.gbps(),
            big.gbps() * 1e9 / h2d
        );
        variants.push((access, mid, big));
    }
    gpu.set_access(Access::DEFAULT).map_err(device_err)?;
    let best = variants
        .iter()
        .copied()
        .max_by(|a, b| a.2.gbps().total_cmp(&b.2.gbps()))
        .ok_or_else(|| device_err("no variants"))?;
    println!(
        "best access variant at {max_stripes} stripes: {} ({:.2} GB/s, {:.3} x H2D); the engine uses {}",
        best.0.name(),
        best.2.gbps(),
        best.2.gbps() * 1e9 / h2d,
        Access::DEFAULT.name()
    );

    let (_, big_mapped, big_staged, big_cpu) =
        rows.last().copied().ok_or_else(|| device_err("no rows"))?;
    let ratio = big_mapped.gbps() * 1e9 / h2d;
    let cpu_ratio = big_mapped.cpu_ms_per_gb() / big_cpu.cpu_ms_per_gb().max(1e-9);
    let crossover = rows
        .iter()
        .find(|(_, m, _, c)| m.gbps() > c.gbps())
        .map(|r| r.0);
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    println!();
    println!(
        "goal mapped >= {GOAL_MAPPED_VS_H2D} x H2D: {:.2} / {:.2} GB/s = {ratio:.3} -> {}",
        big_mapped.gbps(),
        h2d / 1e9,
        verdict(ratio >= GOAL_MAPPED_VS_H2D)
    );
    println!(
        "goal cpu time/GB <= {:.0} % of cpu engine: {:.3} / {:.3} ms/GB = {:.1} % -> {}",
        GOAL_CPU_TIME * 100.0,
        big_mapped.cpu_ms_per_gb(),
        big_cpu.cpu_ms_per_gb(),
        cpu_ratio * 100.0,
        verdict(cpu_ratio <= GOAL_CPU_TIME)
    );
    match crossover {
        Some(s) => println!(
            "crossover: mapped GPU beats the CPU engine from {s} stripes ({} KiB of data) per batch",
            (s * K * CHUNK) >> 10
        ),
        None => println!("crossover: the CPU engine was faster at every batch size measured"),
    }
    let stats = gpu.stats();
    println!(
        "engine stats: {} launches, {} jobs, {} GB on the GPU; {} CPU fallbacks; {} faults",
        stats.gpu_calls,
        stats.gpu_jobs,
        stats.gpu_bytes / 1_000_000_000,
        stats.cpu_fallback_calls,
        stats.faults
    );

    println!();
    println!("gpu_available=1");
    println!("device={}", d.name);
    println!("compute_capability={}.{}", d.cc.0, d.cc.1);
    println!("driver_api={}", d.driver_version);
    println!("nvrtc={}.{}", nvrtc.0, nvrtc.1);
    println!("kernel_image={}", gpu.kernel_image());
    println!("cpu_engine={}", cpu.name());
    println!("correctness=PASS");
    println!("h2d_gbps={:.3}", h2d / 1e9);
    for (s, m, st, c) in &rows {
        println!("mapped_gbps_{s}={:.3}", m.gbps());
        println!("staged_gbps_{s}={:.3}", st.gbps());
        println!("cpu_gbps_{s}={:.3}", c.gbps());
        println!("mapped_cpu_ms_per_gb_{s}={:.4}", m.cpu_ms_per_gb());
        println!("cpu_cpu_ms_per_gb_{s}={:.4}", c.cpu_ms_per_gb());
    }
    println!("staged_gbps_large={:.3}", big_staged.gbps());
    println!("mapped_over_h2d={ratio:.4}");
    println!(
        "goal_mapped_vs_h2d={}",
        verdict(ratio >= GOAL_MAPPED_VS_H2D)
    );
    println!("cpu_time_ratio={cpu_ratio:.4}");
    println!("goal_cpu_time={}", verdict(cpu_ratio <= GOAL_CPU_TIME));
    match crossover {
        Some(s) => {
            println!("crossover_batch_stripes={s}");
            println!("crossover_batch_bytes={}", s * K * CHUNK);
        }
        None => println!("crossover_batch_stripes=none"),
    }
    for (access, mid, big) in &variants {
        let name = access.name().replace('-', "_");
        println!("access_{name}_gbps_{}={:.3}", sweep[0], mid.gbps());
        println!("access_{name}_gbps_{}={:.3}", sweep[1], big.gbps());
    }
    println!("best_access={}", best.0.name());
    println!("best_access_over_h2d={:.4}", best.2.gbps() * 1e9 / h2d);
    println!("pq_mapped_gbps={:.3}", pq.gbps());
    println!("pq_cpu_reference_gbps={:.3}", pq_cpu.gbps());
    println!("cpu_fallback_calls={}", stats.cpu_fallback_calls);
    println!("faults={}", stats.faults);
    println!("bench_seconds={:.1}", started.elapsed().as_secs_f64());
    gpu.unregister(buf.arena());
    Ok(())
}

/// One measurement: the best repetition's rate, and CPU time per GB over all repetitions.
#[derive(Debug, Clone, Copy)]
struct Rate {
    gbps: f64,
    cpu_ms_per_gb: f64,
}

impl Rate {
    fn gbps(&self) -> f64 {
        self.gbps
    }
    fn cpu_ms_per_gb(&self) -> f64 {
        self.cpu_ms_per_gb
    }
}

/// Runs `f` (one call over `stripes` stripes) once to warm up, then [`REPS`] timed
/// repetitions of as many calls as fill `rep_min` (at least one); the fastest counts.
fn time(
    rep_min: Duration,
    stripes: usize,
    mut f: impl FnMut() -> Result<(), Failure>,
) -> Result<Rate, Failure> {
    f()?;
    let per_call = (stripes * K * CHUNK) as f64;
    let cpu0 = process_cpu_time().unwrap_or_default();
    let (mut best, mut bytes) = (0f64, 0f64);
    for _ in 0..REPS {
        let t = Instant::now();
        let mut n = 0usize;
        while n == 0 || t.elapsed() < rep_min {
            f()?;
            n += 1;
        }
        let wall = t.elapsed().as_secs_f64().max(1e-12);
        best = best.max(n as f64 * per_call / wall);
        bytes += n as f64 * per_call;
    }
    let cpu = process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu0)
        .as_secs_f64();
    Ok(Rate {
        gbps: best / 1e9,
        cpu_ms_per_gb: cpu * 1e3 / (bytes / 1e9).max(1e-12),
    })
}

fn arena(bytes: usize) -> Result<IoBuf, Failure> {
    BufferArena::with_buffers(1, bytes, 4096)
        .and_then(|mut v| v.pop())
        .ok_or_else(|| device_err(format!("cannot allocate {bytes} bytes")))
}

fn fill(b: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in b.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_ne_bytes()[..chunk.len()]);
    }
}

/// XOR jobs for the first `stripes` stripes of the arena: data → P slot.
fn xor_jobs(buf: &mut [u8], stripes: usize) -> Vec<XorJob<'_>> {
    buf.chunks_mut(SLOTS * CHUNK)
        .take(stripes)
        .map(|stripe| {
            let (data, rest) = stripe.split_at_mut(K * CHUNK);
            XorJob {
                srcs: data.chunks(CHUNK).collect(),
                dst: &mut rest[..CHUNK],
            }
        })
        .collect()
}

fn pq_jobs(buf: &mut [u8], stripes: usize) -> Vec<PqJob<'_>> {
    buf.chunks_mut(SLOTS * CHUNK)
        .take(stripes)
        .map(|stripe| {
            let (data, rest) = stripe.split_at_mut(K * CHUNK);
            let (p, q) = rest.split_at_mut(CHUNK);
            PqJob {
                srcs: data.chunks(CHUNK).collect(),
                p,
                q,
            }
        })
        .collect()
}

/// Mapped XOR over the first `stripes` stripes of `buf` (registered), timed.
fn xor_mapped(
    gpu: &GpuParity,
    buf: &mut [u8],
    stripes: usize,
    rep_min: Duration,
) -> Result<Rate, Failure> {
    let mut jobs = xor_jobs(buf, stripes);
    time(rep_min, stripes, || {
        gpu.xor_batch(&mut jobs).map_err(device_err)
    })
}

/// Random stripes (aligned and not, 2..=16 sources, many sizes) on the GPU against the CPU
/// engine, mapped XOR, accumulate, P+Q and the staged rig; fails the run on any difference.
fn correctness(gpu: &GpuParity, cpu: &CpuXor) -> Result<(), Failure> {
    let t = Instant::now();
    let bad = |what: String| (ExitCode::from(1), format!("correctness: {what}"));
    let mut buf = arena(64 << 20)?;
    gpu.register(buf.arena()).map_err(device_err)?;
    let mut checked = 0usize;
    for (seed, &(stripes, n, len, shift)) in [
        (1usize, 2usize, 4096usize, 0usize),
        (64, 4, 65_536, 0),
        (100, 16, 4097, 0),
        (37, 7, 10_000, 3),
        (500, 3, 1000, 5),
        (3, 9, 1_000_001, 1),
    ]
    .iter()
    .enumerate()
    {
        let per = (n + 1) * (len + 16);
        if stripes * per > buf.len() {
            return Err(bad(format!(
                "shape too large for the check arena ({stripes}×{per})"
            )));
        }
        fill(&mut buf, seed as u64 + 1);
        let mut expect = Vec::with_capacity(stripes);
        for s in buf.chunks(per).take(stripes) {
            let srcs: Vec<&[u8]> = (0..n).map(|i| &s[shift + i * len..][..len]).collect();
            let mut p = vec![0u8; len];
            cpu.xor_gen(&srcs, &mut p).map_err(device_err)?;
            expect.push(p);
        }
        let mut jobs: Vec<XorJob<'_>> = buf
            .chunks_mut(per)
            .take(stripes)
            .map(|s| {
                let (srcs, dst) = s[shift..].split_at_mut(n * len);
                XorJob {
                    srcs: srcs.chunks(len).collect(),
                    dst: &mut dst[..len],
                }
            })
            .collect();
        let calls = gpu.stats().gpu_calls;
        gpu.xor_batch(&mut jobs).map_err(device_err)?;
        if gpu.stats().gpu_calls != calls + 1 {
            return Err(bad("the batch did not run on the GPU".into()));
        }
        for (j, (job, e)) in jobs.iter().zip(&expect).enumerate() {
            if job.dst[..] != e[..] {
                return Err(bad(format!(
                    "xor {stripes}×{n}×{len}+{shift}: job {j} differs"
                )));
            }
        }
        // Accumulate: dst ^= srcs again gives zero.
        for job in jobs.iter_mut().take(4) {
            gpu.xor_acc(&job.srcs, job.dst).map_err(device_err)?;
            if job.dst.iter().any(|&b| b != 0) {
                return Err(bad(format!("xor_acc {n}×{len}+{shift} differs")));
            }
        }
        checked += stripes;
    }
    // P+Q against the CPU reference.
    fill(&mut buf, 99);
    let mut expect = Vec::new();
    for s in buf.chunks(SLOTS * CHUNK).take(64) {
        let srcs: Vec<&[u8]> = s[..K * CHUNK].chunks(CHUNK).collect();
        let (mut p, mut q) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
        pq_gen_cpu(&srcs, &mut p, &mut q).map_err(device_err)?;
        expect.push((p, q));
    }
    let mut jobs = pq_jobs(&mut buf, 64);
    gpu.pq_gen_batch(&mut jobs).map_err(device_err)?;
    for (j, (job, (p, q))) in jobs.iter().zip(&expect).enumerate() {
        if job.p[..] != p[..] || job.q[..] != q[..] {
            return Err(bad(format!("P+Q stripe {j} differs")));
        }
    }
    drop(jobs);
    // Staged rig.
    let mut rig = gpu.staged_rig(16, K, CHUNK).map_err(device_err)?;
    fill(rig.sources_mut(), 7);
    rig.run().map_err(device_err)?;
    let srcs = rig.sources_mut().to_vec();
    for (j, stripe) in srcs.chunks(K * CHUNK).enumerate() {
        let data: Vec<&[u8]> = stripe.chunks(CHUNK).collect();
        let mut p = vec![0u8; CHUNK];
        cpu.xor_gen(&data, &mut p).map_err(device_err)?;
        if rig.parity()[j * CHUNK..][..CHUNK] != p[..] {
            return Err(bad(format!("staged stripe {j} differs")));
        }
    }
    gpu.unregister(buf.arena());
    if let Some(f) = gpu.fault() {
        return Err(device_err(format!("device fault: {f}")));
    }
    println!(
        "correctness: PASS ({checked} XOR stripes of 2..16 sources incl. unaligned, xor_acc, 64 P+Q stripes, staged rig; {:.2} s)",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
