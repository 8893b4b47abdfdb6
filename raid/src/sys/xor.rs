//! SIMD XOR kernels (x86-64: SSE2, AVX2, AVX-512F) behind one safe entry point, [`xor`].
//!
//! Invariants the `unsafe` code relies on, all established in [`xor`] before any kernel runs:
//! - the CPU supports the kernel's target feature (checked with `is_x86_feature_detected!`,
//!   which caches, so the check costs one atomic load);
//! - every source slice is exactly `dst.len()` bytes and there is at least one source, so
//!   `ptr.add(i)` for `i + step <= len` stays inside each allocation;
//! - loads and stores are unaligned (`loadu`/`storeu`), so no alignment is assumed.
//!
//! A kernel handles the largest multiple of its 4-vector step; the portable loop does the tail.
#![allow(unsafe_code)]

use crate::parity::SimdLevel;

/// Sources handled per kernel pass; more are folded in by accumulating passes.
const MAX_PASS: usize = 16;

/// Whether the CPU supports `level` (Portable is handled by the caller).
pub fn supported(level: SimdLevel) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match level {
            SimdLevel::Portable => true,
            SimdLevel::Sse2 => std::arch::is_x86_feature_detected!("sse2"),
            SimdLevel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            SimdLevel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        matches!(level, SimdLevel::Portable)
    }
}

/// `dst (^)= XOR(srcs)` at `level`. Lengths must already be checked (all equal, `srcs`
/// non-empty); if they are not, or the level is unsupported, the portable code runs, which
/// panics on bad lengths rather than touching memory out of bounds.
pub fn xor(level: SimdLevel, srcs: &[&[u8]], dst: &mut [u8], acc: bool) {
    let lengths_ok = !srcs.is_empty() && srcs.iter().all(|s| s.len() == dst.len());
    if !lengths_ok || !supported(level) {
        crate::parity::portable(srcs, dst, acc);
        return;
    }
    let mut acc = acc;
    let mut done = 0;
    for pass in srcs.chunks(MAX_PASS) {
        let mut ptrs = [std::ptr::null::<u8>(); MAX_PASS];
        for (p, s) in ptrs.iter_mut().zip(pass) {
            *p = s.as_ptr();
        }
        let ptrs = &ptrs[..pass.len()];
        done = kernel(level, ptrs, dst, acc);
        if done < dst.len() {
            crate::parity::portable_from(pass, dst, acc, done);
        }
        acc = true;
    }
    debug_assert!(done <= dst.len());
}

#[cfg(target_arch = "x86_64")]
fn kernel(level: SimdLevel, ptrs: &[*const u8], dst: &mut [u8], acc: bool) -> usize {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    // Sources folded into the first vector: all of them when accumulating into `dst`.
    let rest = if acc {
        ptrs.len()
    } else {
        ptrs.len().saturating_sub(1)
    };
    macro_rules! dispatch {
        ($f:ident) => {
            // SAFETY: `xor` checked that the CPU has the kernel's target feature and that
            // every pointer in `ptrs` and `d` addresses `len` readable (and for `d` writable)
            // bytes; `dst` is borrowed mutably for the call, so nothing else aliases it. `K`
            // equals the number of folded sources (`rest`), or is 0 (any number).
            unsafe {
                match rest {
                    1 => x86::$f::<1>(ptrs, d, len, acc),
                    2 => x86::$f::<2>(ptrs, d, len, acc),
                    3 => x86::$f::<3>(ptrs, d, len, acc),
                    4 => x86::$f::<4>(ptrs, d, len, acc),
                    5 => x86::$f::<5>(ptrs, d, len, acc),
                    6 => x86::$f::<6>(ptrs, d, len, acc),
                    7 => x86::$f::<7>(ptrs, d, len, acc),
                    8 => x86::$f::<8>(ptrs, d, len, acc),
                    _ => x86::$f::<0>(ptrs, d, len, acc),
                }
            }
        };
    }
    match level {
        SimdLevel::Sse2 => dispatch!(sse2),
        SimdLevel::Avx2 => dispatch!(avx2),
        SimdLevel::Avx512 => dispatch!(avx512),
        SimdLevel::Portable => 0,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn kernel(_level: SimdLevel, _ptrs: &[*const u8], _dst: &mut [u8], _acc: bool) -> usize {
    0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Defines one kernel: processes `len / (4 * W) * (4 * W)` bytes four vectors at a time
    /// and returns how many bytes it did.
    ///
    /// # Safety
    /// The CPU supports the target feature; every pointer in `srcs` is readable and `dst`
    /// readable and writable for `len` bytes; `srcs` is non-empty unless `acc`.
    macro_rules! kernel {
        ($name:ident, $feat:literal, $w:expr, $load:ident, $xor:ident, $store:ident) => {
            /// `K` > 0: exactly `K` sources are folded into the first (the loop unrolls);
            /// `K` = 0: any number.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name<const K: usize>(
                srcs: &[*const u8],
                dst: *mut u8,
                len: usize,
                acc: bool,
            ) -> usize {
                let step = 4 * $w;
                let (init, rest) = if acc {
                    (dst as *const u8, srcs)
                } else {
                    (srcs[0], &srcs[1..])
                };
                let count = if K > 0 { K } else { rest.len() };
                if count > rest.len() {
                    return 0;
                }
                let mut i = 0;
                while i + step <= len {
                    let mut x0 = $load(init.add(i).cast());
                    let mut x1 = $load(init.add(i + $w).cast());
                    let mut x2 = $load(init.add(i + 2 * $w).cast());
                    let mut x3 = $load(init.add(i + 3 * $w).cast());
                    for j in 0..count {
                        let s = *rest.get_unchecked(j);
                        x0 = $xor(x0, $load(s.add(i).cast()));
                        x1 = $xor(x1, $load(s.add(i + $w).cast()));
                        x2 = $xor(x2, $load(s.add(i + 2 * $w).cast()));
                        x3 = $xor(x3, $load(s.add(i + 3 * $w).cast()));
                    }
                    $store(dst.add(i).cast(), x0);
                    $store(dst.add(i + $w).cast(), x1);
                    $store(dst.add(i + 2 * $w).cast(), x2);
                    $store(dst.add(i + 3 * $w).cast(), x3);
                    i += step;
                }
                i
            }
        };
    }

    kernel!(
        sse2,
        "sse2",
        16,
        _mm_loadu_si128,
        _mm_xor_si128,
        _mm_storeu_si128
    );
    kernel!(
        avx2,
        "avx2",
        32,
        _mm256_loadu_si256,
        _mm256_xor_si256,
        _mm256_storeu_si256
    );
    kernel!(
        avx512,
        "avx512f",
        64,
        _mm512_loadu_si512,
        _mm512_xor_si512,
        _mm512_storeu_si512
    );
}
