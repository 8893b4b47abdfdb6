//! The CUDA C++ source of the parity kernels (compiled at run time with NVRTC), the layout
//! of the job table they read, and their launch grid.
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
//! Work is cut into tiles of [`TILE_BYTES`] of every buffer of a job; every job gets the
//! same number of tiles (`tiles_per_job`, from the longest job: shorter jobs' extra tiles
//! are empty). A 1-D grid of [`BLOCK_THREADS`]-thread blocks walks the `(job, tile)` pairs
//! with a grid-stride loop, tile-major within a job, so even a one-stripe batch spreads
//! over several multiprocessors and the blocks resident at one time read neighbouring
//! memory. Reading host memory through mapped pointers crosses PCIe, so the kernels are
//! written for many loads in flight: in a job whose pointers are all 16-byte aligned
//! ([`FLAG_VEC`]) each thread holds [`UNROLL`] 16-byte lanes per source and issues the
//! loads of [`GROUP`] sources for all its lanes before combining any of them (one PCIe
//! round trip per group of sources, not one per source); sources are read through the
//! read-only (non-coherent) path, parity is written with streaming stores. A vector job's
//! last `len % 16` bytes, and all of an unaligned job, go byte by byte.
//!
//! Every address the kernels touch is `dst`, `q` or a source pointer plus an offset below
//! `len`: the table alone bounds their accesses. Sources never overlap destinations (the
//! callers' borrows), which is what makes the non-coherent loads valid.

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
/// Threads per block (the source's `BLOCK`; launch with exactly this many).
pub const BLOCK_THREADS: u32 = 256;
/// 16-byte vectors each thread handles per source in a tile (the source's `UNROLL`).
pub const UNROLL: u32 = 2;
/// Sources whose loads a thread has in flight together (the source's `GROUP`).
pub const GROUP: u32 = 4;
/// Bytes of each of a job's buffers one block handles per tile (the source's `TILE_BYTES`).
pub const TILE_BYTES: u64 = BLOCK_THREADS as u64 * UNROLL as u64 * 16;
/// Most blocks in one launch; the kernels' grid-stride loop covers any further tiles.
pub const MAX_BLOCKS: u64 = 1 << 20;

/// XOR kernel name.
pub const XOR_KERNEL: &str = "raidline_xor";
/// P+Q kernel name.
pub const PQ_KERNEL: &str = "raidline_pq";

/// Packs a job's `meta` word.
pub fn meta(n_srcs: usize, flags: u64, first_src: usize) -> u64 {
    (n_srcs as u64 & 0xFFFF) | ((flags & 0xFFFF) << 16) | ((first_src as u64) << 32)
}

/// A launch's shape: blocks along x, and the tiles of every job (the kernels' last
/// parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Blocks (`gridDim.x`).
    pub blocks: u32,
    /// Tiles per job: [`TILE_BYTES`] each, enough for the longest job.
    pub tiles_per_job: u32,
}

/// The grid for `n_jobs` jobs whose longest buffer is `max_len` bytes; `None` when one job
/// would need more than `u32::MAX` tiles (32 TiB, far beyond any buffer).
pub fn grid(max_len: u64, n_jobs: usize) -> Option<Grid> {
    let tiles_per_job = u32::try_from(max_len.div_ceil(TILE_BYTES).max(1)).ok()?;
    let tiles = (n_jobs as u64).saturating_mul(u64::from(tiles_per_job));
    Some(Grid {
        blocks: tiles.clamp(1, MAX_BLOCKS) as u32,
        tiles_per_job,
    })
}

/// How the kernels load sources and store parity (the source's `RL_ACCESS`). The engine
/// uses [`Access::DEFAULT`]; the others exist so the benchmark can compare them on a real
/// GPU ([`crate::gpu::GpuParity::set_access`]). All of them compute the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Sources through the read-only (non-coherent) path (`ld.global.nc`), parity with
    /// streaming stores (`st.global.cs`).
    ReadOnly,
    /// Plain loads and stores (the compiler's choice).
    Plain,
    /// As [`Access::ReadOnly`], with a 256-byte L2 prefetch hint on each load (sm_80 and
    /// newer; plain read-only loads before that).
    ReadOnlyL2Prefetch,
    /// As [`Access::ReadOnly`], without allocating the sources in L1.
    ReadOnlyNoL1,
    /// As [`Access::ReadOnly`], after the block has asked the TMA unit to bring the tile
    /// of every source into L2 (`cp.async.bulk.prefetch`, sm_90 and newer; plain read-only
    /// loads before that).
    ReadOnlyBulkPrefetch,
}

impl Access {
    /// What the engine uses: the best variant on the H200 (device run 2, 2026-11-29: 49.61 GB/s
    /// at 8192 stripes, 0.904 × the 54.88 GB/s host→device copy; plain `nc` 49.32, 0.899).
    pub const DEFAULT: Access = Access::ReadOnlyBulkPrefetch;
    /// Every variant, the default first.
    pub const ALL: [Access; 5] = [
        Access::ReadOnlyBulkPrefetch,
        Access::ReadOnly,
        Access::Plain,
        Access::ReadOnlyL2Prefetch,
        Access::ReadOnlyNoL1,
    ];

    /// Short name (benchmark output).
    pub fn name(self) -> &'static str {
        match self {
            Access::ReadOnly => "nc",
            Access::Plain => "plain",
            Access::ReadOnlyL2Prefetch => "nc-l2-256",
            Access::ReadOnlyNoL1 => "nc-no-l1",
            Access::ReadOnlyBulkPrefetch => "nc-bulk-l2",
        }
    }

    fn code(self) -> u8 {
        match self {
            Access::ReadOnly => 0,
            Access::Plain => 1,
            Access::ReadOnlyL2Prefetch => 2,
            Access::ReadOnlyNoL1 => 3,
            Access::ReadOnlyBulkPrefetch => 4,
        }
    }

    /// The kernel source for this variant: [`SOURCE`] with `RL_ACCESS` defined.
    pub fn source(self) -> String {
        format!("#define RL_ACCESS {}\n{SOURCE}", self.code())
    }
}

/// Kernel source (CUDA C++, no headers: NVRTC needs nothing installed beside itself).
pub const SOURCE: &str = r#"
// Raidline parity kernels. See raid/src/gpu/kernels.rs for the job table and the grid.
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

struct __align__(16) v4 { u32 x, y, z, w; };
struct Job { u64 dst; u64 q; u64 len; u64 meta; };

#define F_ACC 1u
#define F_VEC 2u
#define BLOCK 256
#define UNROLL 2
#define GROUP 4
#define TILE_VECS (BLOCK * UNROLL)
#define TILE_BYTES (TILE_VECS * 16)

// RL_ACCESS (set by the host, see Access in kernels.rs) picks how sources are loaded and
// parity is stored. Sources are never written during a launch, so the read-only
// (non-coherent) path is valid for them; parity is never read back by the kernel.
#ifndef RL_ACCESS
#define RL_ACCESS 0
#endif
#if defined(__CUDA_ARCH__) && RL_ACCESS != 1
#if RL_ACCESS == 2 && __CUDA_ARCH__ >= 800
#define RL_LD "ld.global.nc.L2::256B.v4.u32"
#elif RL_ACCESS == 3
#define RL_LD "ld.global.nc.L1::no_allocate.v4.u32"
#else
#define RL_LD "ld.global.nc.v4.u32"
#endif
__device__ __forceinline__ v4 ld_src(const v4 *p) {
    v4 r;
    asm(RL_LD " {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
// Streaming store (evict-first).
__device__ __forceinline__ void st_par(v4 *p, const v4 v) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
#else
// Plain accesses (RL_ACCESS 1, and the host build of this source in raid/gpu/emulator, which
// defines RL_HOST_CHECK to bounds-check every access).
#ifndef RL_HOST_CHECK
#define RL_HOST_CHECK(p, n)
#endif
__device__ __forceinline__ v4 ld_src(const v4 *p) { RL_HOST_CHECK(p, 16); return *p; }
__device__ __forceinline__ void st_par(v4 *p, const v4 v) { RL_HOST_CHECK(p, 16); *p = v; }
#endif

// RL_ACCESS 4: one bulk L2 prefetch per source of the tile's vectors [lo, min(lo + TILE_VECS,
// nv)), issued by the first threads of the block before their loads (a hint: a prefetch
// some thread does not issue changes nothing but speed).
__device__ __forceinline__ void prefetch_tile(const u64 *sp, u32 n, u64 lo, u64 nv) {
#if defined(__CUDA_ARCH__) && RL_ACCESS == 4 && __CUDA_ARCH__ >= 900
    const u64 hi = lo + TILE_VECS < nv ? lo + TILE_VECS : nv;
    const u32 bytes = (u32)((hi - lo) * 16);
    for (u32 s = threadIdx.x; s < n; s += BLOCK) {
        const v4 *p = (const v4 *)sp[s] + lo;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes)
                     : "memory");
    }
#else
    (void)sp; (void)n; (void)lo; (void)nv;
#endif
}

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

// This thread's lanes of a vector tile: vector index i + u * BLOCK of every buffer, where
// ok[u] says whether that lane lies inside the job.
// An invalid lane reads lane 0's vector again (off[u] = 0) and is never stored: the loads
// need no predicate, so they are all issued before the first one is waited for.
struct Lanes {
    u64 i;
    bool ok[UNROLL];
    u32 off[UNROLL];
};

// Loads sources sp[0..G) for every valid lane, all issued before any is used.
template <int G>
__device__ __forceinline__ void load_group(v4 (&b)[G][UNROLL], const u64 *sp, const Lanes &l) {
    const v4 *p[G];
#pragma unroll
    for (int g = 0; g < G; ++g) p[g] = (const v4 *)sp[g] + l.i;
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) b[g][u] = ld_src(p[g] + l.off[u]);
}

template <int G>
__device__ __forceinline__ void xor_group(v4 (&a)[UNROLL], const u64 *sp, const Lanes &l) {
    v4 b[G][UNROLL];
    load_group<G>(b, sp, l);
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) xor4(a[u], b[g][u]);
}

// Sources sp[0..G) in descending order into P and Q (Horner's rule).
template <int G>
__device__ __forceinline__ void pq_group(v4 (&p)[UNROLL], v4 (&q)[UNROLL], const u64 *sp,
                                         const Lanes &l) {
    v4 b[G][UNROLL];
    load_group<G>(b, sp, l);
#pragma unroll
    for (int g = G - 1; g >= 0; --g)
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            xor4(p[u], b[g][u]);
            q[u] = mul2v(q[u]);
            xor4(q[u], b[g][u]);
        }
}

// Lanes of tile k; false when the tile holds no vector of a job of nv vectors.
__device__ __forceinline__ bool lanes(u64 k, u64 nv, Lanes &l) {
    l.i = k * TILE_VECS + threadIdx.x;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        l.ok[u] = l.i + u * BLOCK < nv;
        l.off[u] = l.ok[u] ? u * BLOCK : 0u;
    }
    return l.ok[0];
}

// Bytes [lo, hi) of tile k that this thread handles byte by byte: the whole tile for an
// unaligned job; for a vector job only its last len % 16 bytes, in the tile holding them.
__device__ __forceinline__ void byte_span(const Job &job, bool vec, u64 k, u64 &lo, u64 &hi) {
    const u64 start = vec ? (job.len >> 4) << 4 : 0;
    lo = k * TILE_BYTES > start ? k * TILE_BYTES : start;
    hi = (k + 1) * TILE_BYTES < job.len ? (k + 1) * TILE_BYTES : job.len;
}

// dst = XOR(srcs) or, with F_ACC, dst ^= XOR(srcs).
// Launch bounds: 4 resident blocks per SM for XOR (64 registers), 3 for P+Q. With the
// default bounds ptxas split a group's loads around the first XORs (two PCIe round trips
// instead of one); with these it issues all of them before the first use (SASS, sm_90).
extern "C" __global__ void __launch_bounds__(BLOCK, 4)
raidline_xor(const Job *__restrict__ jobs, const u64 *__restrict__ srcs, u32 n_jobs,
             u32 tiles_per_job) {
    const u64 tiles = (u64)n_jobs * tiles_per_job;
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const u64 j = t / tiles_per_job;
        const u64 k = t - j * tiles_per_job;
        const Job job = jobs[j];
        const u32 n = (u32)(job.meta & 0xffffu);
        const u32 flags = (u32)((job.meta >> 16) & 0xffffu);
        const u64 *sp = srcs + (job.meta >> 32);
        const bool acc = (flags & F_ACC) != 0;
        const bool vec = (flags & F_VEC) != 0;
        Lanes l;
        if (vec && lanes(k, job.len >> 4, l)) {
            prefetch_tile(sp, n, k * TILE_VECS, job.len >> 4);
            v4 *d = (v4 *)job.dst + l.i;
            v4 a[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                a[u].x = a[u].y = a[u].z = a[u].w = 0u;
                if (acc && l.ok[u]) a[u] = d[u * BLOCK];
            }
            u32 s = 0;
            for (; s + GROUP <= n; s += GROUP) xor_group<GROUP>(a, sp + s, l);
            if (n - s >= 2) { xor_group<2>(a, sp + s, l); s += 2; }
            if (s < n) xor_group<1>(a, sp + s, l);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (l.ok[u]) st_par(d + u * BLOCK, a[u]);
        }
        u64 lo, hi;
        byte_span(job, vec, k, lo, hi);
        u8 *d8 = (u8 *)job.dst;
        for (u64 b = lo + threadIdx.x; b < hi; b += BLOCK) {
            u8 a = acc ? d8[b] : 0;
            for (u32 s = 0; s < n; ++s) a ^= ((const u8 *)sp[s])[b];
            d8[b] = a;
        }
    }
}

// RAID-6: P = XOR(D_i), Q = sum g^i * D_i (g = 2), by Horner from the last source down.
extern "C" __global__ void __launch_bounds__(BLOCK, 3)
raidline_pq(const Job *__restrict__ jobs, const u64 *__restrict__ srcs, u32 n_jobs,
            u32 tiles_per_job) {
    const u64 tiles = (u64)n_jobs * tiles_per_job;
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const u64 j = t / tiles_per_job;
        const u64 k = t - j * tiles_per_job;
        const Job job = jobs[j];
        const u32 n = (u32)(job.meta & 0xffffu);
        const bool vec = (((job.meta >> 16) & 0xffffu) & F_VEC) != 0;
        const u64 *sp = srcs + (job.meta >> 32);
        Lanes l;
        if (vec && lanes(k, job.len >> 4, l)) {
            prefetch_tile(sp, n, k * TILE_VECS, job.len >> 4);
            v4 p[UNROLL], q[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                p[u].x = p[u].y = p[u].z = p[u].w = 0u;
                q[u] = p[u];
            }
            u32 s = n;
            for (; s >= GROUP; s -= GROUP) pq_group<GROUP>(p, q, sp + s - GROUP, l);
            if (s >= 2) { s -= 2; pq_group<2>(p, q, sp + s, l); }
            if (s == 1) pq_group<1>(p, q, sp, l);
            v4 *dp = (v4 *)job.dst + l.i;
            v4 *dq = (v4 *)job.q + l.i;
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (l.ok[u]) { st_par(dp + u * BLOCK, p[u]); st_par(dq + u * BLOCK, q[u]); }
        }
        u64 lo, hi;
        byte_span(job, vec, k, lo, hi);
        u8 *p8 = (u8 *)job.dst;
        u8 *q8 = (u8 *)job.q;
        for (u64 b = lo + threadIdx.x; b < hi; b += BLOCK) {
            u8 p = 0, q = 0;
            for (u32 s = n; s-- > 0;) {
                const u8 d = ((const u8 *)sp[s])[b];
                p ^= d;
                q = (u8)(mul2b(q) ^ d);
            }
            p8[b] = p;
            q8[b] = q;
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
    fn grid_covers_every_tile_within_limits() {
        let g = |len, jobs| grid(len, jobs).map(|g| (g.blocks, g.tiles_per_job));
        assert_eq!(TILE_BYTES, 8192);
        assert_eq!(g(0, 0), Some((1, 1)));
        assert_eq!(g(1, 1), Some((1, 1)));
        // One 64 KiB stripe: 8 tiles, one block each.
        assert_eq!(g(64 << 10, 1), Some((8, 8)));
        assert_eq!(g((64 << 10) + 1, 3), Some((27, 9)));
        // 8192 stripes of 64 KiB: 65,536 blocks.
        assert_eq!(g(64 << 10, 8192), Some((65_536, 8)));
        // Capped: the kernels' grid-stride loop covers the rest.
        assert_eq!(g(1 << 30, 1024), Some((1 << 20, 131_072)));
        assert_eq!(g(u64::MAX, 1), None);
    }

    /// The constants the host computes the grid with are the ones the source uses.
    #[test]
    fn source_constants_match() {
        for (name, value) in [
            ("BLOCK", u64::from(BLOCK_THREADS)),
            ("UNROLL", u64::from(UNROLL)),
            ("GROUP", u64::from(GROUP)),
        ] {
            let line = format!("#define {name} {value}\n");
            assert!(SOURCE.contains(&line), "source lacks {line:?}");
        }
        let mut codes: Vec<u8> = Access::ALL.iter().map(|a| a.code()).collect();
        for a in Access::ALL {
            assert!(a
                .source()
                .starts_with(&format!("#define RL_ACCESS {}\n", a.code())));
            assert!(a.source().ends_with(SOURCE));
        }
        codes.sort_unstable();
        assert_eq!(codes, [0, 1, 2, 3, 4], "every variant has its own code");
        assert_eq!(Access::ALL[0], Access::DEFAULT);
    }
}
