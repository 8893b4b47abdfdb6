//! Parity engines: the [`ParityEngine`] trait and the CPU XOR engine.
//!
//! RAID-5 parity is the XOR of a stripe's data chunks. Engines see only byte slices: the
//! caller's (pool) buffers for new data, scratch buffers for parity and old data. An engine
//! never keeps a reference after returning. Every source must be exactly as long as the
//! destination, and at least one source is required; violations are a typed error, not a
//! panic. The GPU engine (cargo feature `gpu`, [`crate::gpu`]) implements the same trait;
//! engines that read memory through a device map it once with
//! [`ParityEngine::register_memory`].
//!
//! [`CpuXor`] picks the widest SIMD level the CPU has at run time (AVX-512F, AVX2, SSE2 on
//! x86-64; the vectorised kernels live in `sys::xor`, the only SIMD code allowed `unsafe_code`) and
//! falls back to a portable 64-bit-word loop elsewhere. Every level computes identical bytes.

use std::sync::Arc;

use crate::error::ParityError;
use crate::sys::buf::BufferArena;

/// One parity computation of a batch: `dst = XOR(srcs)`.
#[derive(Debug)]
pub struct XorJob<'a> {
    /// Sources, each as long as `dst`.
    pub srcs: Vec<&'a [u8]>,
    /// Destination.
    pub dst: &'a mut [u8],
}

/// Computes RAID-5 parity (XOR) over equally long buffers.
pub trait ParityEngine: Send + Sync + std::fmt::Debug {
    /// Short name for logs and benchmark tables (e.g. `cpu-avx512`).
    fn name(&self) -> &'static str;

    /// `dst = srcs[0] ^ srcs[1] ^ ...`.
    fn xor_gen(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError>;

    /// `dst ^= srcs[0] ^ srcs[1] ^ ...`.
    fn xor_acc(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError>;

    /// Runs independent `xor_gen` jobs. The array hands whole rounds of stripes (full-stripe
    /// writes, rebuild) here, so an engine with a high per-call cost (a GPU launch) can do
    /// them in one go; the default runs them one by one.
    fn xor_batch(&self, jobs: &mut [XorJob<'_>]) -> Result<(), ParityError> {
        for job in jobs.iter_mut() {
            self.xor_gen(&job.srcs, job.dst)?;
        }
        Ok(())
    }

    /// Makes `arena`'s memory directly usable by the engine: a GPU engine maps it for
    /// zero-copy access, and computes parity on the device only for buffers inside
    /// registered arenas. Register the target's buffer pool and each array's
    /// [`crate::Array::scratch_arena`] (parity and old-data scratch). CPU engines need
    /// nothing: the default does nothing.
    fn register_memory(&self, arena: &Arc<BufferArena>) -> Result<(), ParityError> {
        let _ = arena;
        Ok(())
    }
}

/// SIMD level a [`CpuXor`] runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdLevel {
    /// 64-bit words, no intrinsics (the compiler may still vectorise it).
    Portable,
    /// x86-64 SSE2 (128-bit).
    Sse2,
    /// x86-64 AVX2 (256-bit).
    Avx2,
    /// x86-64 AVX-512F (512-bit).
    Avx512,
}

impl SimdLevel {
    /// Every level this CPU can run, narrowest first.
    pub fn available() -> Vec<SimdLevel> {
        [
            SimdLevel::Portable,
            SimdLevel::Sse2,
            SimdLevel::Avx2,
            SimdLevel::Avx512,
        ]
        .into_iter()
        .filter(|l| l.is_supported())
        .collect()
    }

    /// Whether this CPU supports the level.
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Portable => true,
            _ => crate::sys::xor::supported(self),
        }
    }
}

/// XOR parity on the CPU.
#[derive(Debug, Clone, Copy)]
pub struct CpuXor {
    level: SimdLevel,
}

impl Default for CpuXor {
    fn default() -> Self {
        Self::detect()
    }
}

impl CpuXor {
    /// Uses the widest level the CPU supports.
    pub fn detect() -> Self {
        let level = SimdLevel::available().pop().unwrap_or(SimdLevel::Portable);
        CpuXor { level }
    }

    /// Uses `level`, or `None` when this CPU lacks it.
    pub fn with_level(level: SimdLevel) -> Option<Self> {
        level.is_supported().then_some(CpuXor { level })
    }

    /// The level in use.
    pub fn level(&self) -> SimdLevel {
        self.level
    }

    fn run(&self, srcs: &[&[u8]], dst: &mut [u8], acc: bool) -> Result<(), ParityError> {
        check(srcs, dst)?;
        match self.level {
            SimdLevel::Portable => portable(srcs, dst, acc),
            level => crate::sys::xor::xor(level, srcs, dst, acc),
        }
        Ok(())
    }
}

impl ParityEngine for CpuXor {
    fn name(&self) -> &'static str {
        match self.level {
            SimdLevel::Portable => "cpu-portable",
            SimdLevel::Sse2 => "cpu-sse2",
            SimdLevel::Avx2 => "cpu-avx2",
            SimdLevel::Avx512 => "cpu-avx512",
        }
    }

    fn xor_gen(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        self.run(srcs, dst, false)
    }

    fn xor_acc(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        self.run(srcs, dst, true)
    }
}

/// The trait's argument rules: at least one source, each as long as `dst`.
pub(crate) fn check(srcs: &[&[u8]], dst: &[u8]) -> Result<(), ParityError> {
    if srcs.is_empty() {
        return Err(ParityError::NoSources);
    }
    if let Some((i, s)) = srcs.iter().enumerate().find(|(_, s)| s.len() != dst.len()) {
        return Err(ParityError::LengthMismatch {
            index: i,
            len: s.len(),
            expected: dst.len(),
        });
    }
    Ok(())
}

/// Portable kernel: 64-bit words, then a byte tail. Lengths were checked by the caller.
pub(crate) fn portable(srcs: &[&[u8]], dst: &mut [u8], acc: bool) {
    portable_from(srcs, dst, acc, 0);
}

/// Portable kernel over `dst[from..]` (the SIMD kernels use it for their tails).
pub(crate) fn portable_from(srcs: &[&[u8]], dst: &mut [u8], acc: bool, from: usize) {
    let (first, rest) = if acc {
        (None, srcs)
    } else {
        (Some(srcs[0]), &srcs[1..])
    };
    let words = from + (dst.len() - from) / 8 * 8;
    let mut i = from;
    while i < words {
        let mut w = match first {
            Some(f) => word(f, i),
            None => word(dst, i),
        };
        for s in rest {
            w ^= word(s, i);
        }
        dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
        i += 8;
    }
    for j in words..dst.len() {
        let mut b = match first {
            Some(f) => f[j],
            None => dst[j],
        };
        for s in rest {
            b ^= s[j];
        }
        dst[j] = b;
    }
}

fn word(s: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[i..i + 8]);
    u64::from_ne_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn reference(srcs: &[Vec<u8>], init: Option<&[u8]>) -> Vec<u8> {
        let len = srcs[0].len();
        (0..len)
            .map(|j| {
                srcs.iter()
                    .fold(init.map_or(0, |d| d[j]), |acc, s| acc ^ s[j])
            })
            .collect()
    }

    #[test]
    fn every_level_matches_bytewise_reference() {
        let levels = SimdLevel::available();
        assert!(levels.contains(&SimdLevel::Portable));
        let lens = [
            0usize,
            1,
            7,
            8,
            63,
            64,
            65,
            255,
            256,
            257,
            4096,
            4096 + 200,
            65536,
        ];
        for level in levels {
            let e = CpuXor::with_level(level).unwrap();
            for nsrc in 1..=20usize {
                for &len in &lens {
                    let srcs: Vec<Vec<u8>> = (0..nsrc)
                        .map(|k| pattern((k * 31 + len) as u64, len))
                        .collect();
                    let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
                    let mut dst = pattern(999, len);
                    let init = dst.clone();
                    e.xor_gen(&refs, &mut dst).unwrap();
                    assert_eq!(
                        dst,
                        reference(&srcs, None),
                        "{level:?} gen n={nsrc} len={len}"
                    );
                    let mut acc = init.clone();
                    e.xor_acc(&refs, &mut acc).unwrap();
                    assert_eq!(
                        acc,
                        reference(&srcs, Some(&init)),
                        "{level:?} acc n={nsrc} len={len}"
                    );
                }
            }
        }
    }

    #[test]
    fn unaligned_slices_work_at_every_level() {
        let big = pattern(5, 9000);
        let other = pattern(6, 9000);
        for level in SimdLevel::available() {
            let e = CpuXor::with_level(level).unwrap();
            for off in 0..9 {
                let a = &big[off..off + 5000];
                let b = &other[3..5003];
                let mut dst = vec![0u8; 5000];
                e.xor_gen(&[a, b], &mut dst).unwrap();
                assert!(dst
                    .iter()
                    .zip(a.iter().zip(b))
                    .all(|(d, (x, y))| *d == x ^ y));
            }
        }
    }

    #[test]
    fn batch_runs_every_job() {
        let e = CpuXor::detect();
        let a = pattern(1, 4096);
        let b = pattern(2, 4096);
        let mut d1 = vec![0u8; 4096];
        let mut d2 = vec![0u8; 4096];
        let mut jobs = [
            XorJob {
                srcs: vec![&a, &b],
                dst: &mut d1,
            },
            XorJob {
                srcs: vec![&a],
                dst: &mut d2,
            },
        ];
        e.xor_batch(&mut jobs).unwrap();
        assert_eq!(d1, reference(&[a.clone(), b.clone()], None));
        assert_eq!(d2, a);
        let mut short = vec![0u8; 10];
        let mut bad = [XorJob {
            srcs: vec![&a],
            dst: &mut short,
        }];
        assert!(e.xor_batch(&mut bad).is_err());
    }

    #[test]
    fn bad_lengths_are_errors() {
        let e = CpuXor::detect();
        let mut dst = [0u8; 16];
        assert_eq!(e.xor_gen(&[], &mut dst), Err(ParityError::NoSources));
        let short = [0u8; 15];
        let ok = [0u8; 16];
        assert_eq!(
            e.xor_acc(&[&ok, &short], &mut dst),
            Err(ParityError::LengthMismatch {
                index: 1,
                len: 15,
                expected: 16
            })
        );
    }

    #[test]
    fn detect_picks_widest_level() {
        let e = CpuXor::detect();
        assert_eq!(Some(&e.level()), SimdLevel::available().last());
        assert!(e.name().starts_with("cpu-"));
    }
}
