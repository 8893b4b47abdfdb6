//! The CUDA C++ source of the parity kernels (compiled at run time with NVRTC) and the
//! layout of the job table they read.
//!
//! One launch runs a whole batch. The host writes a table of 64-bit words to device memory:
//! `n_jobs` job records of [`JOB_WORDS`] words, then every job's source pointers, back to back.
//! A job record is `[dst, q, len, meta]`:
//! - `dst`: device address of the destination (P for the Q kernel);
//! - `q`: device address of Q (Q kernel only, 0 otherwise);
//! - `len`: bytes per buffer;
//! - `meta`: bits 0..16 the source count, bits 16..32 the flags ([`FLAG_ACC`], [`FLAG_VEC`]),
//!   bits 32..64 the index of the job's first source pointer in the pointer area.
//!
//! Grid: `blockIdx.y` walks the jobs (stride `gridDim.y`), `blockIdx.x`/`threadIdx.x` walk a
//! job's bytes with a grid-stride loop — 16-byte vectors ([`FLAG_VEC`]: every pointer of the
//! job is 16-byte aligned), four vectors in flight per thread and source, then a byte tail;
//! jobs with an unaligned pointer run byte-wise. Every address the kernels touch is `dst`,
//! `q` or a source pointer plus an offset below `len`: the table alone bounds their accesses.

/// Words per job record.
pub const JOB_WORDS: usize = 4;
/// `dst ^= sources` instead of `dst = sources`.
pub const FLAG_ACC: u64 = 1;
/// Every pointer of the job is 16-byte aligned: the kernel uses 16-byte loads and stores.
pub const FLAG_VEC: u64 = 2;
/// Most sources one job may have (the count is a 16-bit field).
pub const MAX_SOURCES: usize = 0xFFFF;
/// Most jobs in one table (the pointer index is a 32-bit field; far above any real batch).
pub const MAX_TABLE_WORDS: usize = u32::MAX as usize;
/// Threads per block.
pub const BLOCK_THREADS: u32 = 256;
/// 16-byte vectors each thread keeps in flight per source (must match `UNROLL` below).
pub const UNROLL: u64 = 4;
/// Most blocks along a job (x); enough to cover an H200 (132 SMs) several times over.
pub const MAX_BLOCKS_X: u64 = 1024;
/// Most blocks along the jobs (y), CUDA's limit for `gridDim.y`.
pub const MAX_BLOCKS_Y: u64 = 65_535;

/// XOR kernel name.
pub const XOR_KERNEL: &str = "raidline_xor";
/// P+Q kernel name.
pub const PQ_KERNEL: &str = "raidline_pq";

/// Packs a job's `meta` word.
pub fn meta(n_srcs: usize, flags: u64, first_src: usize) -> u64 {
    (n_srcs as u64 & 0xFFFF) | ((flags & 0xFFFF) << 16) | ((first_src as u64) << 32)
}

/// Launch grid for a batch: `(blocks along a job, blocks along the jobs)`. `max_units` is
/// the largest job's work in kernel units (16-byte vectors, or bytes for byte-wise jobs).
pub fn grid(max_units: u64, n_jobs: usize) -> (u32, u32) {
    let per_block = u64::from(BLOCK_THREADS) * UNROLL;
    let x = max_units.div_ceil(per_block).clamp(1, MAX_BLOCKS_X);
    let y = (n_jobs as u64).clamp(1, MAX_BLOCKS_Y);
    (x as u32, y as u32)
}

/// Kernel source (CUDA C++, no headers: NVRTC needs nothing installed beside itself).
pub const SOURCE: &str = r#"
// Raidline parity kernels. See raid/src/gpu/kernels.rs for the job table layout.
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

struct __align__(16) v4 { u32 x, y, z, w; };
struct Job { u64 dst; u64 q; u64 len; u64 meta; };

#define F_ACC 1u
#define F_VEC 2u
#define UNROLL 4

__device__ __forceinline__ void xor4(v4 &a, const v4 b) {
    a.x ^= b.x; a.y ^= b.y; a.z ^= b.z; a.w ^= b.w;
}

// Multiplication by the generator 2 in GF(2^8) with polynomial 0x11D, four bytes at once.
__device__ __forceinline__ u32 mul2w(u32 x) {
    return ((x & 0x7f7f7f7fu) << 1) ^ (((x >> 7) & 0x01010101u) * 0x1du);
}
__device__ __forceinline__ v4 mul2v(const v4 a) {
    v4 r; r.x = mul2w(a.x); r.y = mul2w(a.y); r.z = mul2w(a.z); r.w = mul2w(a.w); return r;
}
__device__ __forceinline__ u8 mul2b(u8 x) {
    return (u8)((x << 1) ^ ((x & 0x80u) ? 0x1du : 0u));
}

// dst = XOR(srcs) or, with F_ACC, dst ^= XOR(srcs).
extern "C" __global__ void raidline_xor(const Job *__restrict__ jobs,
                                        const u64 *__restrict__ srcs, u32 n_jobs) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nthreads = (u64)gridDim.x * blockDim.x;
    for (u32 j = blockIdx.y; j < n_jobs; j += gridDim.y) {
        const Job job = jobs[j];
        const u32 n = (u32)(job.meta & 0xffffu);
        const u32 flags = (u32)((job.meta >> 16) & 0xffffu);
        const u64 *sp = srcs + (job.meta >> 32);
        const bool acc = (flags & F_ACC) != 0;
        const u32 first = acc ? 0u : 1u;
        u64 done = 0;
        if (flags & F_VEC) {
            const u64 nv = job.len >> 4;
            v4 *d = (v4 *)job.dst;
            const v4 *s0 = (const v4 *)sp[0];
            u64 i = tid;
            for (; i + (UNROLL - 1) * nthreads < nv; i += UNROLL * nthreads) {
                v4 a[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) a[u] = acc ? d[i + u * nthreads] : s0[i + u * nthreads];
                for (u32 s = first; s < n; ++s) {
                    const v4 *p = (const v4 *)sp[s];
                    v4 b[UNROLL];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) b[u] = p[i + u * nthreads];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) xor4(a[u], b[u]);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) d[i + u * nthreads] = a[u];
            }
            for (; i < nv; i += nthreads) {
                v4 a = acc ? d[i] : s0[i];
                for (u32 s = first; s < n; ++s) xor4(a, ((const v4 *)sp[s])[i]);
                d[i] = a;
            }
            done = nv << 4;
        }
        u8 *d8 = (u8 *)job.dst;
        const u8 *b0 = (const u8 *)sp[0];
        for (u64 i = done + tid; i < job.len; i += nthreads) {
            u8 a = acc ? d8[i] : b0[i];
            for (u32 s = first; s < n; ++s) a ^= ((const u8 *)sp[s])[i];
            d8[i] = a;
        }
    }
}

// RAID-6: P = XOR(D_i), Q = sum g^i * D_i (g = 2), by Horner from the last source down.
extern "C" __global__ void raidline_pq(const Job *__restrict__ jobs,
                                       const u64 *__restrict__ srcs, u32 n_jobs) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nthreads = (u64)gridDim.x * blockDim.x;
    for (u32 j = blockIdx.y; j < n_jobs; j += gridDim.y) {
        const Job job = jobs[j];
        const int n = (int)(job.meta & 0xffffu);
        const u32 flags = (u32)((job.meta >> 16) & 0xffffu);
        const u64 *sp = srcs + (job.meta >> 32);
        u64 done = 0;
        if (flags & F_VEC) {
            const u64 nv = job.len >> 4;
            v4 *dp = (v4 *)job.dst;
            v4 *dq = (v4 *)job.q;
            const v4 *last = (const v4 *)sp[n - 1];
            u64 i = tid;
            for (; i + (UNROLL - 1) * nthreads < nv; i += UNROLL * nthreads) {
                v4 p[UNROLL], q[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) { p[u] = last[i + u * nthreads]; q[u] = p[u]; }
                for (int s = n - 2; s >= 0; --s) {
                    const v4 *src = (const v4 *)sp[s];
                    v4 b[UNROLL];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) b[u] = src[i + u * nthreads];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        xor4(p[u], b[u]);
                        q[u] = mul2v(q[u]);
                        xor4(q[u], b[u]);
                    }
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) { dp[i + u * nthreads] = p[u]; dq[i + u * nthreads] = q[u]; }
            }
            for (; i < nv; i += nthreads) {
                v4 p = last[i];
                v4 q = p;
                for (int s = n - 2; s >= 0; --s) {
                    const v4 b = ((const v4 *)sp[s])[i];
                    xor4(p, b);
                    q = mul2v(q);
                    xor4(q, b);
                }
                dp[i] = p;
                dq[i] = q;
            }
            done = nv << 4;
        }
        u8 *p8 = (u8 *)job.dst;
        u8 *q8 = (u8 *)job.q;
        for (u64 i = done + tid; i < job.len; i += nthreads) {
            u8 p = ((const u8 *)sp[n - 1])[i];
            u8 q = p;
            for (int s = n - 2; s >= 0; --s) {
                const u8 b = ((const u8 *)sp[s])[i];
                p ^= b;
                q = (u8)(mul2b(q) ^ b);
            }
            p8[i] = p;
            q8[i] = q;
        }
    }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_packs_fields_apart() {
        let m = meta(5, FLAG_ACC | FLAG_VEC, 123_456);
        assert_eq!(m & 0xFFFF, 5);
        assert_eq!((m >> 16) & 0xFFFF, FLAG_ACC | FLAG_VEC);
        assert_eq!(m >> 32, 123_456);
    }

    #[test]
    fn grid_covers_the_largest_job_within_limits() {
        assert_eq!(grid(0, 0), (1, 1));
        assert_eq!(grid(4096, 8), (4, 8));
        assert_eq!(grid(u64::MAX, 1_000_000), (1024, 65_535));
        // 1 GiB in one job: capped; the grid-stride loop does the rest.
        assert_eq!(grid((1 << 30) / 16, 1).0, 1024);
    }
}
