// A host emulation of the slice of the CUDA driver API that raidline's GPU parity engine
// uses, built as libcuda.so.1, for checking the engine WITHOUT a GPU (raid/gpu/emulated-check.sh).
//
// What it checks: the engine's host side end to end (library probing, context, module
// loading, streams, events, registration, the job table, pointer translation, launch
// parameters, fallbacks) and the kernels' C++ logic, which is compiled here for the CPU from
// the very source NVRTC compiles (kernels.cu, extracted from raid/src/gpu/kernels.rs) and run
// over the launch grid one thread at a time (the kernels use no shared memory and no
// barriers, so this order is one of the orders a GPU may run them in).
//
// What it does not check: anything about a real GPU — timing, PCIe, the real driver's rules.
//
// Registered host memory gets device addresses DIFFERENT from its host addresses (host +
// 2^46), so a missing host→device translation cannot pass by accident; before each launch
// every job buffer of the table is checked to lie wholly inside one registered range or
// device allocation, else the process aborts with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

typedef int CUresult;
enum : int {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    ALREADY_REGISTERED = 712,
    NOT_REGISTERED = 713,
};

struct dim3 { unsigned x, y, z; };
static dim3 blockIdx, blockDim, gridDim, threadIdx;

#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __restrict__ __restrict
#define __launch_bounds__(...)
// Every 16-byte load and store of the kernels must lie inside registered memory or a device
// allocation (checked below, under the launch's lock).
static void emu_check(const void *p, unsigned long long n);
#define RL_HOST_CHECK(p, n) emu_check((const void *)(p), (n))
#include "kernels.cu"

namespace {
constexpr uint64_t DEV_OFFSET = 1ull << 46;
std::mutex mu;
struct Range { uint64_t host, len; };
std::map<uint64_t, Range> registered;  // device base -> host range
std::map<uint64_t, uint64_t> device;   // device allocations: base -> len (identity mapped)
int kXor, kPq;                          // function handles: their addresses

void die(const char *what, uint64_t a, uint64_t n) {
    fprintf(stderr, "fake libcuda: %s [%#llx, +%llu) is outside every mapping\n", what,
            (unsigned long long)a, (unsigned long long)n);
    abort();
}

// Host address of device range [a, a+n), or abort.
uint64_t to_host(const char *what, uint64_t a, uint64_t n) {
    auto r = registered.upper_bound(a);
    if (r != registered.begin()) {
        --r;
        if (a >= r->first && a - r->first <= r->second.len && n <= r->second.len - (a - r->first))
            return r->second.host + (a - r->first);
    }
    auto d = device.upper_bound(a);
    if (d != device.begin()) {
        --d;
        if (a >= d->first && a - d->first <= d->second && n <= d->second - (a - d->first)) return a;
    }
    die(what, a, n);
    return 0;
}
}  // namespace

// Aborts unless host range [p, p+n) lies inside one registered range or device allocation
// (called from the kernels while cuLaunchKernel holds `mu`).
static void emu_check(const void *p, unsigned long long n) {
    const uint64_t a = (uint64_t)p;
    for (auto &r : registered)
        if (a >= r.second.host && a - r.second.host <= r.second.len && n <= r.second.len - (a - r.second.host))
            return;
    auto d = device.upper_bound(a);
    if (d != device.begin()) {
        --d;
        if (a - d->first <= d->second && n <= d->second - (a - d->first)) return;
    }
    fprintf(stderr, "fake libcuda: a kernel accessed [%#llx, +%llu), outside every mapping\n",
            (unsigned long long)a, n);
    abort();
}

extern "C" {
CUresult cuInit(unsigned) { return OK; }
// NVRTC itself opens libcuda.so.1 and asks for the driver's private export tables; an
// emulator has none to give.
CUresult cuGetExportTable(const void **table, const void *) {
    *table = nullptr;
    return NOT_FOUND;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return INVALID_VALUE; *d = 0; return OK; }
CUresult cuDeviceGetName(char *name, int len, int) { snprintf(name, len, "Emulated GPU (fake libcuda, CPU)"); return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int) {
    switch (attr) {
        case 16: *v = 4; break;   // multiprocessors
        case 19: *v = 1; break;   // can map host memory
        case 41: *v = 1; break;   // unified addressing
        case 75: *v = 9; break;   // compute capability major
        case 76: *v = 0; break;   // minor
        case 99: *v = 1; break;   // host register supported
        default: *v = 0;
    }
    return OK;
}
static int ctx_token;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int) { *ctx = &ctx_token; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return OK; }
CUresult cuCtxSetCurrent(void *) { return OK; }
CUresult cuCtxSynchronize() { return OK; }
CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = e == ALREADY_REGISTERED ? "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" : "CUDA_ERROR_EMULATED";
    return OK;
}
CUresult cuGetErrorString(CUresult e, const char **s) { return cuGetErrorName(e, s); }
CUresult cuStreamCreate(void **s, unsigned) { *s = malloc(1); return OK; }
CUresult cuStreamSynchronize(void *) { return OK; }
CUresult cuStreamDestroy_v2(void *s) { free(s); return OK; }
CUresult cuEventCreate(void **e, unsigned) { *e = malloc(1); return OK; }
CUresult cuEventRecord(void *, void *) { return OK; }
CUresult cuEventSynchronize(void *) { return OK; }
CUresult cuEventDestroy_v2(void *e) { free(e); return OK; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return OUT_OF_MEMORY;
    std::lock_guard<std::mutex> g(mu);
    *p = (uint64_t)m;
    device[*p] = n;
    return OK;
}
CUresult cuMemFree_v2(uint64_t p) {
    std::lock_guard<std::mutex> g(mu);
    if (!device.erase(p)) return INVALID_VALUE;
    free((void *)p);
    return OK;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned) {
    *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    return *p ? OK : OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) { free(p); return OK; }
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned) {
    std::lock_guard<std::mutex> g(mu);
    uint64_t h = (uint64_t)p;
    for (auto &r : registered)
        if (h < r.second.host + r.second.len && r.second.host < h + n) return ALREADY_REGISTERED;
    registered[h + DEV_OFFSET] = Range{h, n};
    return OK;
}
CUresult cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned) {
    std::lock_guard<std::mutex> g(mu);
    for (auto &r : registered)
        if (r.second.host == (uint64_t)p) { *d = r.first; return OK; }
    return INVALID_VALUE;
}
CUresult cuMemHostUnregister(void *p) {
    std::lock_guard<std::mutex> g(mu);
    for (auto it = registered.begin(); it != registered.end(); ++it)
        if (it->second.host == (uint64_t)p) { registered.erase(it); return OK; }
    return NOT_REGISTERED;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *) {
    std::lock_guard<std::mutex> g(mu);
    memcpy((void *)to_host("memcpy destination", dst, n), src, n);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *) {
    std::lock_guard<std::mutex> g(mu);
    memcpy(dst, (const void *)to_host("memcpy source", src, n), n);
    return OK;
}
CUresult cuModuleLoadData(void **m, const void *image) {
    if (!image) return INVALID_VALUE;
    *m = malloc(1);
    return OK;
}
CUresult cuModuleGetFunction(void **f, void *, const char *name) {
    if (!strcmp(name, "raidline_xor")) { *f = &kXor; return OK; }
    if (!strcmp(name, "raidline_pq")) { *f = &kPq; return OK; }
    return NOT_FOUND;
}
CUresult cuModuleUnload(void *m) { free(m); return OK; }

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shm, void *, void **params, void **extra) {
    if ((f != &kXor && f != &kPq) || gz != 1 || by != 1 || bz != 1 || shm != 0 || extra || !gx || !gy || !bx)
        return INVALID_VALUE;
    std::lock_guard<std::mutex> g(mu);
    const uint64_t jobs_dev = *(uint64_t *)params[0];
    const uint64_t srcs_dev = *(uint64_t *)params[1];
    const unsigned n = *(unsigned *)params[2];
    const unsigned tiles_per_job = *(unsigned *)params[3];
    if (gy != 1 || bx != BLOCK || tiles_per_job == 0) return INVALID_VALUE;
    const u64 *jobs = (const u64 *)to_host("job table", jobs_dev, (uint64_t)n * 32);
    // Copy the table with every buffer address checked and translated to its host address.
    std::vector<u64> tjobs(jobs, jobs + (size_t)n * 4);
    std::vector<u64> tsrcs;
    for (unsigned j = 0; j < n; ++j) {
        u64 *job = &tjobs[(size_t)j * 4];
        const u64 len = job[2], meta = job[3];
        const u64 count = meta & 0xffff, first = meta >> 32, flags = (meta >> 16) & 0xffff;
        const u64 *sp = (const u64 *)to_host("source pointers", srcs_dev + first * 8, count * 8);
        if (count == 0) { fprintf(stderr, "fake libcuda: job %u has no sources\n", j); abort(); }
        job[0] = to_host("destination", job[0], len);
        if (f == &kPq) job[1] = to_host("Q", job[1], len);
        job[3] = (meta & 0xffffffffull) | ((u64)tsrcs.size() << 32);
        for (u64 s = 0; s < count; ++s) {
            if ((flags & 2) && (sp[s] % 16)) { fprintf(stderr, "fake libcuda: VEC job with unaligned source\n"); abort(); }
            tsrcs.push_back(to_host("source", sp[s], len));
        }
    }
    gridDim = dim3{gx, gy, 1};
    blockDim = dim3{bx, 1, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x)
            for (unsigned t = 0; t < bx; ++t) {
                blockIdx = dim3{x, y, 0};
                threadIdx = dim3{t, 0, 0};
                if (f == &kXor)
                    raidline_xor((const Job *)tjobs.data(), tsrcs.data(), n, tiles_per_job);
                else
                    raidline_pq((const Job *)tjobs.data(), tsrcs.data(), n, tiles_per_job);
            }
    return OK;
}
}
