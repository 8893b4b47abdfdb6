//! GPU engine tests (feature `gpu`).
//!
//! Tests declared with `gpu_tests!` need a GPU. Without one each prints
//! `gpu test <name>: SKIPPED (no GPU: <reason>)` to the terminal (past the test harness's
//! capture) and returns, and `gpu_tests_summary` prints `gpu tests: N skipped (no GPU: …)`.
//! With `RAIDLINE_REQUIRE_GPU=1` (the device check sets it) a missing GPU fails them instead,
//! so a run on the GPU machine cannot pass by skipping. Any error other than "no GPU" while
//! opening the engine (a kernel that does not compile, a driver call that fails) fails them
//! everywhere. The remaining tests run on every machine.

use std::io::Write;
use std::sync::{Mutex, OnceLock, PoisonError};

use super::*;
use crate::error::ParityError;
use crate::parity::XorJob;
use crate::sys::buf::{BufferArena, IoBuf};

fn shared() -> &'static Result<GpuParity, GpuError> {
    static SHARED: OnceLock<Result<GpuParity, GpuError>> = OnceLock::new();
    SHARED.get_or_init(GpuParity::new)
}

fn require_gpu() -> bool {
    std::env::var_os("RAIDLINE_REQUIRE_GPU").is_some_and(|v| v == "1")
}

/// Writes past libtest's capture, so skips show in a plain `cargo test` run.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The shared engine, or `None` after reporting the skip.
fn gpu_or_skip(name: &str) -> Option<&'static GpuParity> {
    match shared() {
        Ok(g) => Some(g),
        Err(GpuError::Unavailable { reason }) if !require_gpu() => {
            say(&format!("gpu test {name}: SKIPPED (no GPU: {reason})"));
            None
        }
        Err(e) => panic!("gpu test {name}: the GPU engine did not open: {e}"),
    }
}

/// GPU tests run one at a time: they assert on the shared engine's counters.
static SERIAL: Mutex<()> = Mutex::new(());

macro_rules! gpu_tests {
    ($( $(#[$m:meta])* fn $name:ident($g:ident) $body:block )*) => {
        /// Names of the tests that need a GPU.
        const GPU_TESTS: &[&str] = &[$(stringify!($name)),*];
        $(
            $(#[$m])*
            #[test]
            fn $name() {
                let Some($g) = gpu_or_skip(stringify!($name)) else { return };
                let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
                $body
            }
        )*
    };
}

#[test]
fn gpu_tests_summary() {
    match shared() {
        Ok(g) => say(&format!(
            "gpu tests: {} run on {} (sm_{}{}, {} kernels, driver {})",
            GPU_TESTS.len(),
            g.device().name,
            g.device().cc.0,
            g.device().cc.1,
            g.kernel_image(),
            g.device().driver_version
        )),
        Err(GpuError::Unavailable { reason }) if !require_gpu() => say(&format!(
            "gpu tests: {} skipped (no GPU: {reason})",
            GPU_TESTS.len()
        )),
        Err(e) => panic!("the GPU engine did not open: {e}"),
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, b: &mut [u8]) {
        for chunk in b.chunks_mut(8) {
            let w = self.next().to_ne_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

/// One big buffer of a fresh arena.
fn arena_buf(bytes: usize) -> IoBuf {
    BufferArena::with_buffers(1, bytes, 4096)
        .and_then(|mut v| v.pop())
        .expect("arena allocation")
}

/// Cuts `area` into consecutive slices, skipping `gap` bytes before each of `len` bytes.
fn carve<'a>(mut area: &'a mut [u8], layout: &[(usize, usize)]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(layout.len());
    for &(gap, len) in layout {
        let (_, rest) = std::mem::take(&mut area).split_at_mut(gap);
        let (piece, rest) = rest.split_at_mut(len);
        out.push(piece);
        area = rest;
    }
    out
}

/// A batch shape: per job, its source count and length; `unaligned` shifts every buffer by
/// a random 0..16 bytes.
struct Shape {
    jobs: Vec<(usize, usize)>,
    unaligned: bool,
}

/// Where `carve` puts pieces of `lens`: 16-byte aligned, or after a random 1..16-byte gap.
fn layout(lens: &[usize], unaligned: bool, rng: &mut Rng) -> Vec<(usize, usize)> {
    let mut cur = 0;
    lens.iter()
        .map(|&len| {
            let gap = if unaligned {
                1 + rng.below(15)
            } else {
                (16 - cur % 16) % 16
            };
            cur += gap + len;
            (gap, len)
        })
        .collect()
}

fn src_lens(shape: &Shape) -> Vec<usize> {
    shape
        .jobs
        .iter()
        .flat_map(|&(n, len)| std::iter::repeat_n(len, n))
        .collect()
}

/// Bytes a layout covers, rounded up to 16 so that the next area starts aligned.
fn total(l: &[(usize, usize)]) -> usize {
    l.iter()
        .map(|(g, n)| g + n)
        .sum::<usize>()
        .next_multiple_of(16)
}

/// Runs `shape` through `gpu.xor_batch` (or `xor_acc` per job) in registered memory and
/// compares with the CPU engine; returns the GPU stats delta.
fn check_xor(gpu: &GpuParity, shape: &Shape, acc: bool, seed: u64) -> GpuStats {
    let mut rng = Rng::new(seed);
    let src_l = layout(&src_lens(shape), shape.unaligned, &mut rng);
    let dst_lens: Vec<usize> = shape.jobs.iter().map(|j| j.1).collect();
    let dst_l = layout(&dst_lens, shape.unaligned, &mut rng);
    let mut buf = arena_buf(total(&src_l) + total(&dst_l) + 64);
    gpu.register(buf.arena()).unwrap();
    let (src_area, dst_area) = buf.split_at_mut(total(&src_l));
    rng.fill(src_area);
    rng.fill(dst_area);
    let srcs: Vec<&[u8]> = carve(src_area, &src_l).into_iter().map(|s| &*s).collect();
    let mut dsts = carve(dst_area, &dst_l);
    let mut expect: Vec<Vec<u8>> = dsts.iter().map(|d| d.to_vec()).collect();
    let cpu = CpuXor::detect();
    let mut at = 0;
    for (j, &(n, _)) in shape.jobs.iter().enumerate() {
        let s = &srcs[at..at + n];
        if acc {
            cpu.xor_acc(s, &mut expect[j]).unwrap();
        } else {
            cpu.xor_gen(s, &mut expect[j]).unwrap();
        }
        at += n;
    }
    let before = gpu.stats();
    let mut at = 0;
    let mut jobs = Vec::new();
    for (d, &(n, _)) in dsts.iter_mut().zip(&shape.jobs) {
        jobs.push(XorJob {
            srcs: srcs[at..at + n].to_vec(),
            dst: d,
        });
        at += n;
    }
    if acc {
        for j in jobs.iter_mut() {
            gpu.xor_acc(&j.srcs, j.dst).unwrap();
        }
    } else {
        gpu.xor_batch(&mut jobs).unwrap();
    }
    drop(jobs);
    for (j, (d, e)) in dsts.iter().zip(&expect).enumerate() {
        assert!(
            **d == e[..],
            "job {j} of {} (len {}, acc {acc}) differs from the CPU engine",
            shape.jobs.len(),
            e.len()
        );
    }
    let after = gpu.stats();
    assert!(gpu.unregister(buf.arena()));
    assert_eq!(gpu.fault(), None);
    GpuStats {
        gpu_calls: after.gpu_calls - before.gpu_calls,
        gpu_jobs: after.gpu_jobs - before.gpu_jobs,
        gpu_bytes: after.gpu_bytes - before.gpu_bytes,
        cpu_fallback_calls: after.cpu_fallback_calls - before.cpu_fallback_calls,
        cpu_fallback_bytes: after.cpu_fallback_bytes - before.cpu_fallback_bytes,
        faults: after.faults - before.faults,
    }
}

/// P+Q batches (1..=16 sources, every length, aligned or not) on the GPU against
/// [`pq_gen_cpu`], one launch each.
fn check_pq_rounds(gpu: &GpuParity, seed: u64) {
    let mut rng = Rng::new(seed);
    for (round, &(batch, unaligned)) in [(1usize, false), (5, true), (40, false), (200, true)]
        .iter()
        .enumerate()
    {
        let jobs: Vec<(usize, usize)> = (0..batch)
            .map(|_| (1 + rng.below(16), LENS[rng.below(LENS.len())]))
            .collect();
        let shape = Shape { jobs, unaligned };
        let src_l = layout(&src_lens(&shape), unaligned, &mut rng);
        let pq_lens: Vec<usize> = shape.jobs.iter().flat_map(|j| [j.1, j.1]).collect();
        let dst_l = layout(&pq_lens, unaligned, &mut rng);
        let mut buf = arena_buf(total(&src_l) + total(&dst_l));
        gpu.register(buf.arena()).unwrap();
        let (src_area, dst_area) = buf.split_at_mut(total(&src_l));
        rng.fill(src_area);
        rng.fill(dst_area);
        let srcs: Vec<&[u8]> = carve(src_area, &src_l).into_iter().map(|s| &*s).collect();
        let mut outs = carve(dst_area, &dst_l);
        let mut expect = Vec::new();
        let mut at = 0;
        for &(n, len) in &shape.jobs {
            let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
            pq_gen_cpu(&srcs[at..at + n], &mut p, &mut q).unwrap();
            expect.push((p, q));
            at += n;
        }
        let before = gpu.stats();
        let mut jobs = Vec::new();
        let mut at = 0;
        let mut it = outs.iter_mut();
        for &(n, _) in &shape.jobs {
            let (Some(p), Some(q)) = (it.next(), it.next()) else {
                unreachable!()
            };
            jobs.push(PqJob {
                srcs: srcs[at..at + n].to_vec(),
                p,
                q,
            });
            at += n;
        }
        gpu.pq_gen_batch(&mut jobs).unwrap();
        drop(jobs);
        let after = gpu.stats();
        assert_eq!(
            after.gpu_calls - before.gpu_calls,
            1,
            "round {round}: one launch"
        );
        assert_eq!(after.cpu_fallback_calls, before.cpu_fallback_calls);
        for (j, pair) in outs.chunks(2).enumerate() {
            assert!(
                pair[0][..] == expect[j].0[..],
                "round {round} job {j}: P differs"
            );
            assert!(
                pair[1][..] == expect[j].1[..],
                "round {round} job {j}: Q differs"
            );
        }
        drop(outs);
        assert!(gpu.unregister(buf.arena()));
    }
}

const LENS: &[usize] = &[
    1,
    3,
    15,
    16,
    17,
    255,
    4095,
    4096,
    4097,
    65_536,
    65_536 + 3,
    200_000,
];

gpu_tests! {
    fn xor_batch_matches_cpu_on_random_stripes(gpu) {
        let mut rng = Rng::new(1);
        for (round, batch) in [1usize, 2, 7, 64, 300, 1000].into_iter().enumerate() {
            for unaligned in [false, true] {
                let jobs: Vec<(usize, usize)> = (0..batch)
                    .map(|_| {
                        let n = 2 + rng.below(15);
                        let len = if batch > 64 { 1 + rng.below(4097) } else { LENS[rng.below(LENS.len())] };
                        (n, len)
                    })
                    .collect();
                let shape = Shape { jobs, unaligned };
                let d = check_xor(gpu, &shape, false, round as u64 * 2 + unaligned as u64);
                assert_eq!(d.gpu_calls, 1, "one launch per batch");
                assert_eq!(d.gpu_jobs, batch as u64);
                assert_eq!(d.cpu_fallback_calls, 0);
            }
        }
    }

    fn every_size_and_source_count(gpu) {
        for n in 2..=16usize {
            for (i, &len) in LENS.iter().enumerate() {
                let shape = Shape { jobs: vec![(n, len); 3], unaligned: i % 2 == 1 };
                let d = check_xor(gpu, &shape, false, (n * 100 + i) as u64);
                assert_eq!((d.gpu_calls, d.cpu_fallback_calls), (1, 0));
            }
        }
        // One source: a copy.
        let d = check_xor(gpu, &Shape { jobs: vec![(1, 5000)], unaligned: false }, false, 9);
        assert_eq!(d.gpu_calls, 1);
    }

    fn xor_acc_matches_cpu(gpu) {
        for n in 1..=8usize {
            for (i, &len) in LENS.iter().enumerate() {
                let shape = Shape { jobs: vec![(n, len)], unaligned: (n + i) % 2 == 1 };
                let d = check_xor(gpu, &shape, true, (n * 1000 + i) as u64);
                assert_eq!((d.gpu_calls, d.cpu_fallback_calls), (1, 0));
            }
        }
    }

    fn reconstruction_rebuilds_a_dropped_chunk(gpu) {
        // 64 stripes of 4+1 × 64 KiB: parity, then each stripe loses one chunk (data or
        // parity) and gets it back from the other four, all in single batches.
        let (k, len, stripes) = (4usize, 65_536usize, 64usize);
        let mut buf = arena_buf(stripes * (k + 2) * len);
        gpu.register(buf.arena()).unwrap();
        let mut rng = Rng::new(77);
        rng.fill(&mut buf[..]);
        let mut chunks: Vec<&mut [u8]> = buf.chunks_mut(len).collect();
        let mut rebuilt: Vec<&mut [u8]> = chunks.split_off(stripes * (k + 1));
        // Stripe s: chunks[s*(k+1) .. s*(k+1)+k] data, chunks[s*(k+1)+k] parity.
        {
            let mut jobs = Vec::new();
            for stripe in chunks.chunks_mut(k + 1) {
                let (data, parity) = stripe.split_at_mut(k);
                jobs.push(XorJob { srcs: data.iter().map(|d| &**d).collect(), dst: &mut *parity[0] });
            }
            gpu.xor_batch(&mut jobs).unwrap();
        }
        let cpu = CpuXor::detect();
        for stripe in chunks.chunks(k + 1) {
            let data: Vec<&[u8]> = stripe[..k].iter().map(|d| &**d).collect();
            let mut p = vec![0u8; len];
            cpu.xor_gen(&data, &mut p).unwrap();
            assert!(p[..] == stripe[k][..], "parity differs from the CPU engine");
        }
        let lost: Vec<usize> = (0..stripes).map(|s| s % (k + 1)).collect();
        {
            let mut jobs = Vec::new();
            for ((stripe, out), &l) in chunks.chunks(k + 1).zip(rebuilt.iter_mut()).zip(&lost) {
                let srcs = stripe.iter().enumerate().filter(|(i, _)| *i != l).map(|(_, c)| &**c).collect();
                jobs.push(XorJob { srcs, dst: out });
            }
            gpu.xor_batch(&mut jobs).unwrap();
        }
        for (s, (stripe, out)) in chunks.chunks(k + 1).zip(&rebuilt).enumerate() {
            assert!(stripe[lost[s]][..] == out[..], "stripe {s}: rebuilt chunk {} differs", lost[s]);
        }
        drop((chunks, rebuilt));
        assert!(gpu.unregister(buf.arena()));
    }

    fn q_syndrome_matches_cpu_reference(gpu) {
        check_pq_rounds(gpu, 5);
    }

    /// Every memory-access variant of the kernels computes the same bytes (on a GPU this
    /// checks the inline PTX of each; the emulator runs their shared C++).
    fn every_access_variant_is_exact(gpu) {
        assert_eq!(gpu.access(), kernels::Access::DEFAULT);
        for (i, access) in kernels::Access::ALL.into_iter().enumerate() {
            gpu.set_access(access).unwrap();
            assert_eq!(gpu.access(), access);
            for (n, len, unaligned) in [(4, 65_536, false), (9, 200_000, false), (3, 4097, true)] {
                let shape = Shape { jobs: vec![(n, len); 5], unaligned };
                let d = check_xor(gpu, &shape, false, 7000 + i as u64);
                assert_eq!((d.gpu_calls, d.cpu_fallback_calls), (1, 0), "{}", access.name());
                let acc = Shape { jobs: vec![(n, len)], unaligned };
                check_xor(gpu, &acc, true, 7100 + i as u64);
            }
            check_pq_rounds(gpu, 7200 + i as u64);
        }
        gpu.set_access(kernels::Access::DEFAULT).unwrap();
    }

    fn unregistered_memory_falls_back_and_is_correct(gpu) {
        let mut rng = Rng::new(8);
        let mut a = vec![0u8; 70_000];
        let mut b = vec![0u8; 70_000];
        rng.fill(&mut a);
        rng.fill(&mut b);
        let expect: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
        let before = gpu.stats();
        let mut d = vec![0u8; 70_000];
        gpu.xor_gen(&[&a, &b], &mut d).unwrap();
        assert_eq!(d, expect);
        // Sources registered, destination not: still the CPU.
        let mut reg = arena_buf(140_000);
        gpu.register(reg.arena()).unwrap();
        let (ra, rb) = reg.split_at_mut(70_000);
        ra.copy_from_slice(&a);
        rb.copy_from_slice(&b);
        let mut d2 = vec![0u8; 70_000];
        gpu.xor_gen(&[ra, rb], &mut d2).unwrap();
        assert_eq!(d2, expect);
        let mut pq = (vec![0u8; 70_000], vec![0u8; 70_000]);
        gpu.pq_gen_batch(&mut [PqJob { srcs: vec![&a, &b], p: &mut pq.0, q: &mut pq.1 }]).unwrap();
        assert_eq!(pq.0, expect);
        let after = gpu.stats();
        assert_eq!(after.cpu_fallback_calls - before.cpu_fallback_calls, 3);
        assert_eq!(after.cpu_fallback_bytes - before.cpu_fallback_bytes, 3 * 140_000);
        assert_eq!(after.gpu_calls, before.gpu_calls);
        assert!(gpu.unregister(reg.arena()));
    }

    fn registration_is_idempotent_and_reversible(gpu) {
        let mut buf = arena_buf(8192);
        let before = gpu.registered();
        gpu.register(buf.arena()).unwrap();
        gpu.register(buf.arena()).unwrap();
        assert_eq!(gpu.registered(), before + 1);
        let (s, d) = buf.split_at_mut(4096);
        s.fill(0x5A);
        let calls = gpu.stats().gpu_calls;
        gpu.xor_gen(&[s], d).unwrap();
        assert!(d.iter().all(|&x| x == 0x5A));
        assert_eq!(gpu.stats().gpu_calls, calls + 1);
        assert!(gpu.unregister(buf.arena()));
        assert!(!gpu.unregister(buf.arena()));
        assert_eq!(gpu.registered(), before);
        let fallbacks = gpu.stats().cpu_fallback_calls;
        let (s, d) = buf.split_at_mut(4096);
        gpu.xor_gen(&[s], d).unwrap();
        assert_eq!(gpu.stats().cpu_fallback_calls, fallbacks + 1);
    }

    fn dropping_an_engine_unregisters_its_memory(gpu) {
        let buf = arena_buf(1 << 20);
        {
            let other = GpuParity::new().unwrap();
            other.register(buf.arena()).unwrap();
        }
        // Same primary context: a registration left behind would make this one fail.
        gpu.register(buf.arena()).unwrap();
        assert!(gpu.unregister(buf.arena()));
    }

    fn bad_arguments_are_the_cpu_engines_errors(gpu) {
        let mut buf = arena_buf(4096);
        gpu.register(buf.arena()).unwrap();
        let (a, d) = buf.split_at_mut(2048);
        assert_eq!(gpu.xor_gen(&[], d), Err(ParityError::NoSources));
        assert_eq!(
            gpu.xor_acc(&[&a[..10]], d),
            Err(ParityError::LengthMismatch { index: 0, len: 10, expected: 2048 })
        );
        gpu.xor_batch(&mut []).unwrap();
        let mut empty: [u8; 0] = [];
        gpu.xor_gen(&[&[]], &mut empty).unwrap();
        assert!(gpu.unregister(buf.arena()));
    }

    fn concurrent_callers_get_exact_results(gpu) {
        std::thread::scope(|s| {
            for t in 0..8u64 {
                s.spawn(move || {
                    for round in 0..20 {
                        let shape = Shape {
                            jobs: vec![(4, 16_384 + 16 * round); 1 + (t as usize * 3 + round) % 17],
                            unaligned: round % 3 == 0,
                        };
                        check_xor(gpu, &shape, round % 4 == 1, t * 1000 + round as u64);
                    }
                });
            }
        });
        assert_eq!(gpu.fault(), None);
    }

    fn auto_routes_by_size(gpu) {
        let auto = AutoParity::new(Some(GpuParity::new().unwrap()), 1 << 20);
        assert_eq!(auto.name(), "auto-gpu");
        let mut buf = arena_buf(4 << 20);
        auto.register_memory(buf.arena()).unwrap();
        let inner = auto.gpu().unwrap();
        let (src, dst) = buf.split_at_mut(3 << 20);
        Rng::new(3).fill(src);
        let (a, rest) = src.split_at(1 << 20);
        let (b, c) = rest.split_at(1 << 20);
        // 3 × 4 KiB: below the threshold → CPU.
        auto.xor_gen(&[&a[..4096], &b[..4096], &c[..4096]], &mut dst[..4096]).unwrap();
        assert_eq!(inner.stats().gpu_calls, 0);
        // 3 × 1 MiB → GPU.
        auto.xor_gen(&[a, b, c], dst).unwrap();
        assert_eq!(inner.stats().gpu_calls, 1);
        let expect: Vec<u8> = (0..1 << 20).map(|i| a[i] ^ b[i] ^ c[i]).collect();
        assert!(dst[..] == expect[..]);
        assert_eq!(auto.routed(), (1, 1));
        let _ = gpu;
    }
}

#[test]
fn no_gpu_is_a_clean_error() {
    match GpuParity::probe() {
        Err(GpuError::Unavailable { reason }) => {
            assert!(!reason.is_empty());
            match GpuParity::new() {
                Err(GpuError::Unavailable { reason: r }) => assert_eq!(r, reason),
                other => panic!("libraries missing, yet {other:?}"),
            }
        }
        Err(e) => panic!("probe returns only Unavailable, got {e}"),
        Ok(()) => {
            // The libraries are here: a device that does not exist is still a clean error.
            match GpuParity::on_device(4096) {
                Err(GpuError::Unavailable { .. }) => {}
                other => panic!("device 4096: {other:?}"),
            }
        }
    }
}

#[test]
fn auto_without_a_gpu_is_the_cpu_engine() {
    let auto = AutoParity::new(None, 0);
    assert_eq!(auto.name(), "auto-cpu");
    let a = vec![0x0Fu8; 5000];
    let b = vec![0xF1u8; 5000];
    let mut d = vec![0u8; 5000];
    auto.xor_gen(&[&a, &b], &mut d).unwrap();
    assert!(d.iter().all(|&x| x == 0xFE));
    auto.xor_acc(&[&a], &mut d).unwrap();
    assert!(d.iter().all(|&x| x == 0xF1));
    let (mut p, mut q) = (vec![0u8; 5000], vec![0u8; 5000]);
    auto.pq_gen_batch(&mut [PqJob {
        srcs: vec![&a, &b],
        p: &mut p,
        q: &mut q,
    }])
    .unwrap();
    assert!(p.iter().all(|&x| x == 0xFE));
    assert_eq!(auto.routed(), (0, 3));
    auto.register_memory(&BufferArena::empty()).unwrap();
}

/// The kernel source compiles with NVRTC — needs only libnvrtc, no GPU (set
/// LD_LIBRARY_PATH to a CUDA 13 `libnvrtc.so.13` to run it on a machine without CUDA).
#[test]
fn kernel_source_compiles_with_nvrtc() {
    if let Err(e) = crate::sys::gpu::nvrtc_library() {
        if require_gpu() {
            panic!("NVRTC: {e}");
        }
        let reason = match e {
            GpuError::Unavailable { reason } => reason,
            other => other.to_string(),
        };
        say(&format!(
            "gpu test kernel_source_compiles_with_nvrtc: SKIPPED (no NVRTC: {reason})"
        ));
        return;
    }
    let version = crate::sys::gpu::nvrtc_version().unwrap();
    for cc in [(7, 5), (8, 0), (9, 0), (10, 0), (12, 0)] {
        for cubin in [true, false] {
            let img = crate::sys::gpu::compile(&kernels::Access::DEFAULT.source(), cc, cubin)
                .unwrap_or_else(|e| panic!("NVRTC {version:?}, sm_{}{}: {e}", cc.0, cc.1));
            assert!(img.len() > 1000, "{cc:?} {cubin}: {} bytes", img.len());
        }
    }
    // The other access variants (inline PTX that differs by variant and architecture).
    for access in &kernels::Access::ALL[1..] {
        for cc in [(7, 5), (9, 0), (12, 0)] {
            crate::sys::gpu::compile(&access.source(), cc, true).unwrap_or_else(|e| {
                panic!(
                    "NVRTC {version:?}, {} sm_{}{}: {e}",
                    access.name(),
                    cc.0,
                    cc.1
                )
            });
        }
    }
    say(&format!(
        "gpu test kernel_source_compiles_with_nvrtc: NVRTC {}.{} compiled the kernels (every access variant) for sm_75..sm_120",
        version.0, version.1
    ));
}

#[test]
fn a_bad_kernel_is_a_compile_error_with_the_log() {
    if crate::sys::gpu::nvrtc_library().is_err() {
        say("gpu test a_bad_kernel_is_a_compile_error_with_the_log: SKIPPED (no NVRTC)");
        return;
    }
    match crate::sys::gpu::compile("extern \"C\" __global__ void k() { nope; }", (9, 0), true) {
        Err(GpuError::Compile { arch, log }) => {
            assert_eq!(arch, "sm_90");
            assert!(log.contains("nope"), "{log}");
        }
        other => panic!("{other:?}"),
    }
}
