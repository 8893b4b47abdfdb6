//! CUDA for the GPU parity engine (feature `gpu`): the driver API and NVRTC through `cudarc`,
//! both loaded at run time, wrapped so that the engine above needs no `unsafe`.
//!
//! Invariants the `unsafe` code relies on:
//! - **libraries first**: no `cudarc` call is made before [`libraries`] has found libcuda and
//!   libnvrtc loadable with every symbol this module uses (cudarc panics on a missing
//!   library or symbol); [`Context::open`] is the only door and runs that check;
//! - **context bound**: every driver call that needs a context runs after
//!   [`Context::bind`] on the calling thread, and every object below holds an
//!   `Arc<Context>`, so the primary context outlives its streams, modules and registrations;
//! - **mapped memory stays mapped**: a [`Registration`] holds the `Arc<BufferArena>` it
//!   registered, so the host memory is allocated for as long as it is registered, and
//!   unregisters it in `Drop`;
//! - **borrows outlive the kernel**: [`Lane::run_xor`] and [`Lane::run_pq`] take the
//!   callers' slices by reference, translate every one of them into a registered range (or
//!   give up before launching), and do not return before the stream is synchronised — so a
//!   kernel only ever touches memory that is borrowed (sources shared, destinations
//!   exclusively) for the whole time it runs. If synchronising fails, the context has taken a
//!   sticky error and the driver has stopped all of its work; the caller treats the engine as
//!   dead from then on;
//! - **tables bound the kernels**: the kernels access only `ptr + i` with `i < len` for the
//!   pointers and lengths of the job table (see `gpu::kernels`), and the table is built here
//!   from those slices.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use cudarc::driver::result as cur;
use cudarc::driver::sys as cu;
use cudarc::nvrtc::result as nvr;
use cudarc::nvrtc::sys as nv;

use crate::gpu::kernels::{self, Access, Grid, FLAG_ACC, FLAG_VEC, JOB_WORDS};
use crate::gpu::{GpuError, PqJob};
use crate::parity::XorJob;
use crate::sys::buf::BufferArena;

/// Driver symbols this module calls through cudarc (each one's exported name).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostRegister_v2",
    "cuMemHostGetDevicePointer_v2",
    "cuMemHostUnregister",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
];

/// NVRTC symbols this module calls.
const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcDestroyProgram",
];

/// Transfers at or above this many bytes wait on a blocking-sync event (the thread sleeps);
/// smaller ones spin on the stream, which costs less latency than a wake-up.
pub const BLOCKING_SYNC_BYTES: u64 = 1 << 20;

fn unavailable(reason: impl Into<String>) -> GpuError {
    GpuError::Unavailable {
        reason: reason.into(),
    }
}

fn driver(call: &'static str) -> impl FnOnce(cur::DriverError) -> GpuError {
    move |e| GpuError::Cuda {
        call,
        code: describe(e),
    }
}

fn describe(e: cur::DriverError) -> String {
    // cuGetErrorName only runs once the driver library is loaded (an error value implies a
    // call was made, which implies `libraries` passed).
    match e.error_name() {
        Ok(name) => format!("{} ({})", name.to_string_lossy(), e.0 as i32),
        Err(_) => format!("{:?}", e.0),
    }
}

/// Whether libcuda is loadable with every symbol used here; cached.
pub fn driver_library() -> Result<(), GpuError> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: `is_culib_present` only `dlopen`s (and closes) the library names cudarc
            // loads; the driver library's initialisers have no preconditions on the caller.
            if !unsafe { cu::is_culib_present() } {
                return Err("the CUDA driver library (libcuda.so.1) is not loadable: \
                            no NVIDIA driver on this machine"
                    .into());
            }
            // SAFETY: presence was just checked, so `culib` loads instead of panicking;
            // looking a symbol up has no side effect.
            let lib = unsafe { cu::culib() };
            // SAFETY: the symbol is looked up, not called; its type is irrelevant here.
            let has = |n: &str| unsafe { lib.get::<*const c_void>(n.as_bytes()) }.is_ok();
            missing_symbol(DRIVER_SYMBOLS, has).map_or(Ok(()), |s| {
                Err(format!(
                    "the CUDA driver library lacks {s}: too old for this build (CUDA 13)"
                ))
            })
        })
        .clone()
        .map_err(unavailable)
}

/// Whether NVRTC is loadable with every symbol used here; cached.
pub fn nvrtc_library() -> Result<(), GpuError> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: as for the driver: `dlopen` attempts on cudarc's candidate names only.
            if !unsafe { nv::is_culib_present() } {
                return Err(
                    "NVRTC (libnvrtc.so.13) is not loadable: install the CUDA 13 \
                            runtime compiler or put its directory on LD_LIBRARY_PATH"
                        .into(),
                );
            }
            // SAFETY: presence was just checked, so `culib` loads instead of panicking.
            let lib = unsafe { nv::culib() };
            // SAFETY: the symbol is looked up, not called.
            let has = |n: &str| unsafe { lib.get::<*const c_void>(n.as_bytes()) }.is_ok();
            missing_symbol(NVRTC_SYMBOLS, has).map_or(Ok(()), |s| Err(format!("NVRTC lacks {s}")))
        })
        .clone()
        .map_err(unavailable)
}

/// Both libraries.
pub fn libraries() -> Result<(), GpuError> {
    driver_library()?;
    nvrtc_library()
}

fn missing_symbol(names: &[&str], has: impl Fn(&str) -> bool) -> Option<String> {
    names.iter().find(|n| !has(n)).map(|n| (*n).to_string())
}

/// NVRTC's version, e.g. `(13, 0)`.
pub fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    nvrtc_library()?;
    let (mut major, mut minor) = (0 as c_int, 0 as c_int);
    // SAFETY: the library is present (checked above); the out-pointers are live locals.
    let r = unsafe { nv::nvrtcVersion(&mut major, &mut minor) };
    r.result().map_err(|e| GpuError::Compile {
        arch: String::new(),
        log: format!("nvrtcVersion: {e:?}"),
    })?;
    Ok((major, minor))
}

/// Compiled kernel image: a CUBIN for one GPU generation, or PTX for the driver to JIT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// Machine code for `sm_XY`.
    Cubin(Vec<u8>),
    /// PTX for `compute_XY` (NUL-terminated).
    Ptx(Vec<u8>),
}

impl Image {
    /// Bytes of the image.
    pub fn len(&self) -> usize {
        match self {
            Image::Cubin(b) | Image::Ptx(b) => b.len(),
        }
    }

    /// Whether the image is empty (never, for a successful compile).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Compiles `source` with NVRTC for compute capability `cc`: a CUBIN (`sm_XY`) when `cubin`,
/// else PTX (`compute_XY`). Needs only libnvrtc — no GPU.
pub fn compile(source: &str, cc: (i32, i32), cubin: bool) -> Result<Image, GpuError> {
    nvrtc_library()?;
    let arch = if cubin {
        format!("sm_{}{}", cc.0, cc.1)
    } else {
        format!("compute_{}{}", cc.0, cc.1)
    };
    let fail = |log: String| GpuError::Compile {
        arch: arch.clone(),
        log,
    };
    let src = CString::new(source).map_err(|_| fail("source contains a NUL byte".into()))?;
    let prog = nvr::create_program(&src, Some(c"raidline_parity.cu"))
        .map_err(|e| fail(format!("nvrtcCreateProgram: {e:?}")))?;
    let options = [format!("--gpu-architecture={arch}"), "-std=c++17".into()];
    // SAFETY: `prog` was created above and is destroyed once, at the end of this function;
    // `src` outlives it.
    let compiled = unsafe { nvr::compile_program(prog, &options) };
    let result = match compiled {
        Err(e) => {
            // SAFETY: `prog` is live.
            let log = unsafe { nvr::get_program_log(prog) }
                .map(|l| c_chars_to_string(&l))
                .unwrap_or_default();
            Err(fail(format!("{e:?}: {log}")))
        }
        // SAFETY: `prog` is live and compiled.
        Ok(()) if cubin => unsafe { get_cubin(prog) }
            .map(Image::Cubin)
            .map_err(|e| fail(format!("nvrtcGetCUBIN: {e:?}"))),
        // SAFETY: `prog` is live and compiled.
        Ok(()) => unsafe { nvr::get_ptx(prog) }
            .map(|p| Image::Ptx(p.iter().map(|&c| c as u8).collect()))
            .map_err(|e| fail(format!("nvrtcGetPTX: {e:?}"))),
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { nvr::destroy_program(prog) };
    result
}

/// # Safety
/// `prog` must be a live, compiled NVRTC program.
unsafe fn get_cubin(prog: nv::nvrtcProgram) -> Result<Vec<u8>, nvr::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is live (caller); `size` is a live local.
    unsafe { nv::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds exactly the `size` bytes NVRTC reported.
    unsafe { nv::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) }.result()?;
    Ok(buf)
}

fn c_chars_to_string(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What the driver says about the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (e.g. `NVIDIA H200`).
    pub name: String,
    /// Compute capability.
    pub cc: (i32, i32),
    /// Streaming multiprocessors.
    pub sms: i32,
    /// Driver API version (e.g. 13000).
    pub driver_version: i32,
}

/// A retained primary context on one device.
#[derive(Debug)]
pub struct Context {
    dev: cu::CUdevice,
    ctx: cu::CUcontext,
    info: DeviceInfo,
}

// SAFETY: a CUDA context may be made current on any number of threads at once; the driver
// API is thread-safe. The handle is never freed before the last `Arc<Context>` drops.
unsafe impl Send for Context {}
// SAFETY: as above; `&Context` only binds the context or reads `info`.
unsafe impl Sync for Context {}

impl Context {
    /// Opens device `ordinal`: checks the libraries, initialises the driver, checks the
    /// device can map host memory, retains its primary context and binds it. Any failure to
    /// find a usable GPU is [`GpuError::Unavailable`]; a panic inside cudarc (a library that
    /// vanished between the check and the load) is caught and reported the same way.
    pub fn open(ordinal: usize) -> Result<Arc<Context>, GpuError> {
        libraries()?;
        catch_unwind(AssertUnwindSafe(|| Self::open_checked(ordinal))).unwrap_or_else(|_| {
            Err(unavailable(
                "the CUDA library panicked while loading (see the message above)",
            ))
        })
    }

    fn open_checked(ordinal: usize) -> Result<Arc<Context>, GpuError> {
        cur::init().map_err(|e| unavailable(format!("cuInit: {}", describe(e))))?;
        let count = cur::device::get_count()
            .map_err(|e| unavailable(format!("cuDeviceGetCount: {}", describe(e))))?;
        let count = usize::try_from(count).unwrap_or(0);
        if ordinal >= count {
            return Err(unavailable(format!(
                "no CUDA device {ordinal} ({count} present)"
            )));
        }
        let ord = c_int::try_from(ordinal).map_err(|_| unavailable("device ordinal too large"))?;
        let dev = cur::device::get(ord).map_err(driver("cuDeviceGet"))?;
        let attr = |a: cu::CUdevice_attribute| {
            // SAFETY: `dev` came from cuDeviceGet.
            unsafe { cur::device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"))
        };
        use cu::CUdevice_attribute as A;
        if attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? == 0
            || attr(A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)? == 0
        {
            return Err(unavailable(
                "the device cannot map registered host memory (zero-copy parity needs it)",
            ));
        }
        let cc = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let name = cur::device::get_name(dev).unwrap_or_else(|_| "unknown".into());
        let mut driver_version: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        unsafe { cu::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(driver("cuDriverGetVersion"))?;
        // SAFETY: `dev` came from cuDeviceGet; released once in `Drop`.
        let ctx =
            unsafe { cur::primary_ctx::retain(dev) }.map_err(driver("cuDevicePrimaryCtxRetain"))?;
        let ctx = Arc::new(Context {
            dev,
            ctx,
            info: DeviceInfo {
                ordinal,
                name,
                cc,
                sms,
                driver_version,
            },
        });
        ctx.bind()?;
        Ok(ctx)
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<(), GpuError> {
        // SAFETY: `ctx` is a retained primary context, released only in `Drop`.
        unsafe { cur::ctx::set_current(self.ctx) }.map_err(driver("cuCtxSetCurrent"))
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: retained once in `open_checked`; every object using the context held an
        // `Arc<Context>`, so none is left.
        let _ = unsafe { cur::primary_ctx::release(self.dev) };
    }
}

/// The parity kernels, loaded into a context.
#[derive(Debug)]
pub struct Kernels {
    ctx: Arc<Context>,
    module: cu::CUmodule,
    xor: cu::CUfunction,
    pq: cu::CUfunction,
    image: &'static str,
    access: Access,
}

// SAFETY: module and function handles are immutable once loaded and usable from any thread
// that has the context current (every use binds it first).
unsafe impl Send for Kernels {}
// SAFETY: as above.
unsafe impl Sync for Kernels {}

impl Kernels {
    /// Compiles the kernel source of `access` ([`Access::source`]) for the device (a CUBIN;
    /// PTX if NVRTC cannot emit one for this GPU or the driver refuses it) and loads it.
    pub fn load(ctx: &Arc<Context>, access: Access) -> Result<Kernels, GpuError> {
        ctx.bind()?;
        let cc = ctx.info().cc;
        let source = access.source();
        let cubin = compile(&source, cc, true).and_then(|img| load_image(&img));
        let (module, image) = match cubin {
            Ok(m) => (m, "cubin"),
            Err(first) => {
                let ptx = compile(&source, cc, false)?;
                let m = load_image(&ptx).map_err(|e| GpuError::Compile {
                    arch: format!("sm_{}{}", cc.0, cc.1),
                    log: format!("cubin: {first}; ptx: {e}"),
                })?;
                (m, "ptx")
            }
        };
        let get = |name: &str| {
            let cname = CString::new(name).unwrap_or_default();
            // SAFETY: `module` was loaded above and stays loaded until `Drop`.
            unsafe { cur::module::get_function(module, cname) }
                .map_err(driver("cuModuleGetFunction"))
        };
        let xor = get(kernels::XOR_KERNEL);
        let pq = get(kernels::PQ_KERNEL);
        match (xor, pq) {
            (Ok(xor), Ok(pq)) => Ok(Kernels {
                ctx: ctx.clone(),
                module,
                xor,
                pq,
                image,
                access,
            }),
            (Err(e), _) | (_, Err(e)) => {
                // SAFETY: loaded above, not used after this.
                let _ = unsafe { cur::module::unload(module) };
                Err(e)
            }
        }
    }

    /// `"cubin"` or `"ptx"`: how the kernels were loaded.
    pub fn image_kind(&self) -> &'static str {
        self.image
    }

    /// How these kernels access memory.
    pub fn access(&self) -> Access {
        self.access
    }
}

fn load_image(img: &Image) -> Result<cu::CUmodule, GpuError> {
    let bytes = match img {
        Image::Cubin(b) => b.clone(),
        Image::Ptx(p) => {
            let mut p = p.clone();
            if p.last() != Some(&0) {
                p.push(0);
            }
            p
        }
    };
    // SAFETY: `bytes` is a complete CUBIN or a NUL-terminated PTX text, alive for the call
    // (the driver copies the image). The caller bound the context.
    unsafe { cur::module::load_data(bytes.as_ptr().cast()) }.map_err(driver("cuModuleLoadData"))
}

impl Drop for Kernels {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: no lane is running (lanes synchronise before returning and are dropped
            // with the engine); the module is unloaded once.
            let _ = unsafe { cur::module::unload(self.module) };
        }
    }
}

/// Device memory.
#[derive(Debug)]
struct DeviceMem {
    ctx: Arc<Context>,
    ptr: cu::CUdeviceptr,
}

impl DeviceMem {
    fn new(ctx: &Arc<Context>, len: usize) -> Result<Self, GpuError> {
        ctx.bind()?;
        // SAFETY: plain allocation in the bound context; freed once in `Drop`.
        let ptr = unsafe { cur::malloc_sync(len.max(1)) }.map_err(driver("cuMemAlloc"))?;
        Ok(DeviceMem {
            ctx: ctx.clone(),
            ptr,
        })
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated in `new`; owners synchronise their stream before dropping.
            let _ = unsafe { cur::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory (`cuMemHostAlloc`, portable), zeroed.
#[derive(Debug)]
struct PinnedMem {
    ctx: Arc<Context>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: owned memory; access goes through `&self`/`&mut self` like a `Vec<u8>`.
unsafe impl Send for PinnedMem {}

impl PinnedMem {
    fn new(ctx: &Arc<Context>, len: usize) -> Result<Self, GpuError> {
        ctx.bind()?;
        // SAFETY: plain allocation in the bound context; freed once in `Drop`.
        let ptr = unsafe { cur::malloc_host(len.max(1), cu::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver("cuMemHostAlloc"))?
            .cast::<u8>();
        // SAFETY: `ptr` is a fresh allocation of at least `len` bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedMem {
            ctx: ctx.clone(),
            ptr,
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: cuMemHostAlloc returns page-aligned memory (so 8-aligned); `len / 8` whole
        // words lie inside the allocation; any bit pattern is a valid u64.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), self.len / 8) }
    }
}

impl Drop for PinnedMem {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated in `new`; owners synchronise their stream before dropping.
            let _ = unsafe { cur::free_host(self.ptr.cast()) };
        }
    }
}

/// An arena registered with the GPU as pinned, device-mapped host memory.
#[derive(Debug)]
pub struct Registration {
    ctx: Arc<Context>,
    arena: Arc<BufferArena>,
    host: usize,
    len: usize,
    dev: u64,
}

impl Registration {
    /// Registers the arena's whole region (`cuMemHostRegister`, portable + device-mapped)
    /// and looks up its device address.
    pub fn new(ctx: &Arc<Context>, arena: &Arc<BufferArena>) -> Result<Self, GpuError> {
        let (host, len) = arena.region();
        let refused = |reason: String| GpuError::Register {
            addr: host,
            len,
            reason,
        };
        ctx.bind()?;
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `[host, host+len)` is the arena's live allocation, kept alive by the `Arc`
        // stored in the returned value until `Drop` unregisters it.
        unsafe { cu::cuMemHostRegister_v2(host as *mut c_void, len, flags) }
            .result()
            .map_err(|e| refused(format!("cuMemHostRegister: {}", describe(e))))?;
        let mut dev: cu::CUdeviceptr = 0;
        // SAFETY: `host` was just registered with DEVICEMAP; `dev` is a live local.
        let got =
            unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dev, host as *mut c_void, 0) }.result();
        if let Err(e) = got {
            // SAFETY: registered just above and not used by any kernel yet.
            let _ = unsafe { cu::cuMemHostUnregister(host as *mut c_void) };
            return Err(refused(format!(
                "cuMemHostGetDevicePointer: {}",
                describe(e)
            )));
        }
        Ok(Registration {
            ctx: ctx.clone(),
            arena: arena.clone(),
            host,
            len,
            dev,
        })
    }

    /// The registered arena.
    pub fn arena(&self) -> &Arc<BufferArena> {
        &self.arena
    }

    /// Device address of `[ptr, ptr+len)` when it lies wholly inside the region.
    fn translate(&self, ptr: usize, len: usize) -> Option<u64> {
        let off = ptr.checked_sub(self.host)?;
        (off <= self.len && len <= self.len - off).then(|| self.dev + off as u64)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: registered in `new`; the engine drops a registration only under its
            // write lock (no lane running) or when it is dropped itself.
            let _ = unsafe { cu::cuMemHostUnregister(self.host as *mut c_void) };
        }
    }
}

fn translate(maps: &[Registration], s: &[u8]) -> Option<u64> {
    let ptr = s.as_ptr() as usize;
    maps.iter().find_map(|m| m.translate(ptr, s.len()))
}

/// A launch that could not complete.
#[derive(Debug)]
pub struct Fault {
    /// What failed.
    pub error: GpuError,
    /// Whether a kernel may have written destinations before failing (`false`: the
    /// failure came before the launch, destinations are untouched).
    pub outputs_touched: bool,
}

/// What a lane did with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// The GPU computed every job; source bytes read.
    Done(u64),
    /// Some buffer lies outside every registered region: nothing was launched.
    NotMapped,
}

/// One stream with its job-table buffers; used by one thread at a time.
#[derive(Debug)]
pub struct Lane {
    ctx: Arc<Context>,
    stream: cu::CUstream,
    done: cu::CUevent,
    table_dev: DeviceMem,
    table_host: PinnedMem,
}

// SAFETY: stream and event handles may be used from any thread with the context current; the
// engine keeps each lane behind a mutex, so one thread uses it at a time.
unsafe impl Send for Lane {}

/// What a written table holds: its launch needs these.
#[derive(Debug, Clone, Copy)]
struct TableShape {
    jobs: usize,
    words: usize,
    bytes: u64,
    max_len: u64,
}

/// Writes job records and translated source pointers straight into a lane's pinned table
/// (records first, then the pointer area), with no allocation per job.
struct TableWriter<'t> {
    recs: &'t mut [u64],
    ptrs: &'t mut [u64],
    maps: &'t [Registration],
    jobs: usize,
    next: usize,
    bytes: u64,
    max_len: u64,
}

impl<'t> TableWriter<'t> {
    /// A writer for `jobs` records and `srcs` source pointers over `words` (which must
    /// hold at least `jobs * JOB_WORDS + srcs` words).
    fn new(words: &'t mut [u64], maps: &'t [Registration], jobs: usize, srcs: usize) -> Self {
        let (recs, rest) = words.split_at_mut(jobs * JOB_WORDS);
        TableWriter {
            recs,
            ptrs: &mut rest[..srcs],
            maps,
            jobs: 0,
            next: 0,
            bytes: 0,
            max_len: 0,
        }
    }

    /// Appends a job; `false` (the table is then unusable) when a buffer lies outside
    /// every registered region.
    fn push(&mut self, dst: &[u8], q: Option<&[u8]>, srcs: &[&[u8]], flags: u64) -> bool {
        let Some(d) = translate(self.maps, dst) else {
            return false;
        };
        let q = match q.map(|q| translate(self.maps, q)) {
            None => 0,
            Some(Some(q)) => q,
            Some(None) => return false,
        };
        let mut aligned = d.is_multiple_of(16) && q.is_multiple_of(16);
        let first = self.next;
        for (slot, s) in self.ptrs[first..first + srcs.len()].iter_mut().zip(srcs) {
            let Some(a) = translate(self.maps, s) else {
                return false;
            };
            aligned &= a.is_multiple_of(16);
            *slot = a;
        }
        let len = dst.len() as u64;
        let flags = flags | if aligned { FLAG_VEC } else { 0 };
        self.recs[self.jobs * JOB_WORDS..(self.jobs + 1) * JOB_WORDS].copy_from_slice(&[
            d,
            q,
            len,
            kernels::meta(srcs.len(), flags, first),
        ]);
        self.jobs += 1;
        self.next += srcs.len();
        self.bytes += len * srcs.len() as u64;
        self.max_len = self.max_len.max(len);
        true
    }

    fn shape(&self) -> TableShape {
        TableShape {
            jobs: self.jobs,
            words: self.jobs * JOB_WORDS + self.next,
            bytes: self.bytes,
            max_len: self.max_len,
        }
    }
}

impl Lane {
    /// A new stream, a blocking-sync event and a table of `words` 64-bit words.
    pub fn new(ctx: &Arc<Context>, words: usize) -> Result<Lane, GpuError> {
        ctx.bind()?;
        let stream = cur::stream::create(cur::stream::StreamKind::NonBlocking)
            .map_err(driver("cuStreamCreate"))?;
        let mut done: cu::CUevent = std::ptr::null_mut();
        let flags = cu::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32
            | cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: the out-pointer is a live local; the context is bound.
        if let Err(e) = unsafe { cu::cuEventCreate(&mut done, flags) }.result() {
            // SAFETY: created above, never used.
            let _ = unsafe { cur::stream::destroy(stream) };
            return Err(driver("cuEventCreate")(e));
        }
        let (table_dev, table_host) = match (
            DeviceMem::new(ctx, words * 8),
            PinnedMem::new(ctx, words * 8),
        ) {
            (Ok(d), Ok(h)) => (d, h),
            (Err(e), _) | (_, Err(e)) => {
                // SAFETY: created above, never used.
                unsafe {
                    let _ = cur::event::destroy(done);
                    let _ = cur::stream::destroy(stream);
                }
                return Err(e);
            }
        };
        Ok(Lane {
            ctx: ctx.clone(),
            stream,
            done,
            table_dev,
            table_host,
        })
    }

    fn reserve(&mut self, words: usize) -> Result<(), GpuError> {
        if self.table_host.len / 8 >= words {
            return Ok(());
        }
        let words = words.next_power_of_two();
        // Nothing is in flight on this lane between calls (each call synchronises).
        self.table_dev = DeviceMem::new(&self.ctx, words * 8)?;
        self.table_host = PinnedMem::new(&self.ctx, words * 8)?;
        Ok(())
    }

    /// Runs `dst (^)= XOR(srcs)` for every job on the GPU through mapped pointers, or
    /// returns [`Ran::NotMapped`] (launching nothing) when a buffer lies outside `maps`.
    /// Jobs must already be validated (sources as long as the destination, at least one,
    /// at most `kernels::MAX_SOURCES`). Returns only once the GPU is done.
    pub fn run_xor(
        &mut self,
        kernels: &Kernels,
        maps: &[Registration],
        jobs: &mut [XorJob<'_>],
        acc: bool,
    ) -> Result<Ran, Fault> {
        let live = || jobs.iter().filter(|j| !j.dst.is_empty());
        let n_jobs = live().count();
        let n_srcs = live().map(|j| j.srcs.len()).sum();
        let flags = if acc { FLAG_ACC } else { 0 };
        let shape = {
            let Some(words) = self.table(n_jobs, n_srcs)? else {
                return Ok(Ran::Done(0));
            };
            let mut t = TableWriter::new(words, maps, n_jobs, n_srcs);
            for job in live() {
                if !t.push(job.dst, None, &job.srcs, flags) {
                    return Ok(Ran::NotMapped);
                }
            }
            t.shape()
        };
        // `jobs` stays mutably borrowed until `launch` has synchronised.
        self.launch(kernels.xor, shape)
    }

    /// Runs P+Q for every job on the GPU through mapped pointers (see [`Lane::run_xor`]).
    pub fn run_pq(
        &mut self,
        kernels: &Kernels,
        maps: &[Registration],
        jobs: &mut [PqJob<'_>],
    ) -> Result<Ran, Fault> {
        let live = || jobs.iter().filter(|j| !j.p.is_empty());
        let n_jobs = live().count();
        let n_srcs = live().map(|j| j.srcs.len()).sum();
        let shape = {
            let Some(words) = self.table(n_jobs, n_srcs)? else {
                return Ok(Ran::Done(0));
            };
            let mut t = TableWriter::new(words, maps, n_jobs, n_srcs);
            for job in live() {
                if !t.push(job.p, Some(job.q), &job.srcs, 0) {
                    return Ok(Ran::NotMapped);
                }
            }
            t.shape()
        };
        self.launch(kernels.pq, shape)
    }

    /// The pinned table, large enough for `jobs` records and `srcs` pointers; `None` when
    /// there is nothing to do.
    fn table(&mut self, jobs: usize, srcs: usize) -> Result<Option<&mut [u64]>, Fault> {
        if jobs == 0 {
            return Ok(None);
        }
        let before = |error| Fault {
            error,
            outputs_touched: false,
        };
        let words = jobs
            .checked_mul(JOB_WORDS)
            .and_then(|w| w.checked_add(srcs))
            .filter(|&w| w <= kernels::MAX_TABLE_WORDS && u32::try_from(jobs).is_ok())
            .ok_or_else(|| {
                before(GpuError::Cuda {
                    call: "cuLaunchKernel",
                    code: "too many jobs for one launch".into(),
                })
            })?;
        self.reserve(words).map_err(before)?;
        Ok(Some(self.table_host.words_mut()))
    }

    /// Copies the table written for `shape` to the device, launches `f` over it and waits.
    /// The device addresses in the table must all be live for the duration (the callers'
    /// borrows guarantee it).
    fn launch(&mut self, f: cu::CUfunction, shape: TableShape) -> Result<Ran, Fault> {
        let before = |error| Fault {
            error,
            outputs_touched: false,
        };
        let too_big = || {
            before(GpuError::Cuda {
                call: "cuLaunchKernel",
                code: "too many jobs for one launch".into(),
            })
        };
        let n_jobs = u32::try_from(shape.jobs).map_err(|_| too_big())?;
        let grid = kernels::grid(shape.max_len, shape.jobs).ok_or_else(too_big)?;
        self.ctx.bind().map_err(before)?;
        let table_bytes = &self.table_host.bytes()[..shape.words * 8];
        // SAFETY: copies from pinned memory owned by this lane into its device table (both at
        // least `words * 8` bytes); the lane is not touched again before the stream is
        // synchronised below.
        let copied =
            unsafe { cur::memcpy_htod_async(self.table_dev.ptr, table_bytes, self.stream) };
        if let Err(e) = copied {
            self.quiesce();
            return Err(before(driver("cuMemcpyHtoDAsync")(e)));
        }
        let srcs = self.table_dev.ptr + (shape.jobs * JOB_WORDS * 8) as u64;
        // SAFETY: `f` belongs to the loaded module (alive while `kernels` is borrowed by the
        // caller); the table was copied in stream order before the launch; every address in
        // it is a registered, mapped range of a slice the caller keeps borrowed until we
        // return, and we return only after synchronising (module invariants).
        let launched =
            unsafe { launch_parity(f, grid, self.table_dev.ptr, srcs, n_jobs, self.stream) };
        if let Err(e) = launched {
            self.quiesce();
            return Err(before(driver("cuLaunchKernel")(e)));
        }
        self.wait(shape.bytes).map_err(|error| Fault {
            error,
            outputs_touched: true,
        })?;
        Ok(Ran::Done(shape.bytes))
    }

    /// Waits for the stream: sleeping on the blocking event for big batches, spinning on
    /// the stream for small ones.
    fn wait(&mut self, bytes: u64) -> Result<(), GpuError> {
        let r = if bytes >= BLOCKING_SYNC_BYTES {
            // SAFETY: event and stream belong to this lane and the bound context.
            unsafe { cur::event::record(self.done, self.stream) }
                .map_err(driver("cuEventRecord"))
                .and_then(|()| {
                    // SAFETY: the event was just recorded on our stream.
                    unsafe { cur::event::synchronize(self.done) }
                        .map_err(driver("cuEventSynchronize"))
                })
        } else {
            // SAFETY: the stream belongs to this lane.
            unsafe { cur::stream::synchronize(self.stream) }.map_err(driver("cuStreamSynchronize"))
        };
        if r.is_err() {
            self.quiesce();
        }
        r
    }

    /// Best effort after an error: wait for whatever the stream still holds, then for the
    /// whole context (a sticky error stops all of its work).
    fn quiesce(&mut self) {
        // SAFETY: the stream belongs to this lane; waiting has no other effect.
        let r = unsafe { cur::stream::synchronize(self.stream) };
        if r.is_err() {
            let _ = cur::ctx::synchronize();
        }
    }
}

/// Launches a parity kernel (`(const Job*, const u64*, u32 n_jobs, u32 tiles_per_job)`)
/// with `grid` on `stream`.
///
/// # Safety
/// `f` must be a live parity kernel of the bound context; `jobs` and `srcs` must be a job
/// table in device memory, copied in stream order before this launch, whose addresses
/// stay valid and borrowed as the table says until the stream is synchronised.
unsafe fn launch_parity(
    f: cu::CUfunction,
    grid: Grid,
    jobs: u64,
    srcs: u64,
    n_jobs: u32,
    stream: cu::CUstream,
) -> Result<(), cur::DriverError> {
    let (mut jobs, mut srcs, mut n_jobs, mut tiles) = (jobs, srcs, n_jobs, grid.tiles_per_job);
    let mut params = [
        (&mut jobs as *mut u64).cast::<c_void>(),
        (&mut srcs as *mut u64).cast::<c_void>(),
        (&mut n_jobs as *mut u32).cast::<c_void>(),
        (&mut tiles as *mut u32).cast::<c_void>(),
    ];
    // SAFETY: the parameters match the kernel signature and outlive the call (the driver
    // copies them at launch); the rest is the caller's contract.
    unsafe {
        cur::launch_kernel(
            f,
            (grid.blocks, 1, 1),
            (kernels::BLOCK_THREADS, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            self.quiesce();
            // SAFETY: nothing is in flight (quiesced); each handle is destroyed once.
            unsafe {
                let _ = cur::event::destroy(self.done);
                let _ = cur::stream::destroy(self.stream);
            }
        }
    }
}

/// Benchmark comparison only: the staged way — sources copied host→device, the same XOR
/// kernel over device memory, parity copied back. The engine never does this.
#[derive(Debug)]
pub struct StagedRig {
    lane: Lane,
    kernels: Arc<Kernels>,
    src_dev: DeviceMem,
    dst_dev: DeviceMem,
    src_host: PinnedMem,
    dst_host: PinnedMem,
    jobs: usize,
    k: usize,
    len: usize,
}

impl StagedRig {
    /// Preallocates `jobs` stripes of `k` sources × `len` bytes (pinned on the host,
    /// plain on the device) and writes the job table once.
    pub fn new(
        ctx: &Arc<Context>,
        kernels: Arc<Kernels>,
        jobs: usize,
        k: usize,
        len: usize,
    ) -> Result<Self, GpuError> {
        let too_big = || GpuError::Cuda {
            call: "cuMemAlloc",
            code: "staged rig size overflows".into(),
        };
        let src_bytes = jobs
            .checked_mul(k)
            .and_then(|n| n.checked_mul(len))
            .ok_or_else(too_big)?;
        let dst_bytes = jobs.checked_mul(len).ok_or_else(too_big)?;
        let mut lane = Lane::new(ctx, jobs * (JOB_WORDS + k))?;
        let src_dev = DeviceMem::new(ctx, src_bytes)?;
        let dst_dev = DeviceMem::new(ctx, dst_bytes)?;
        let src_host = PinnedMem::new(ctx, src_bytes)?;
        let dst_host = PinnedMem::new(ctx, dst_bytes)?;
        {
            let w = lane.table_host.words_mut();
            let (recs, ptrs) = w.split_at_mut(jobs * JOB_WORDS);
            let aligned = len.is_multiple_of(16);
            for j in 0..jobs {
                recs[j * JOB_WORDS..(j + 1) * JOB_WORDS].copy_from_slice(&[
                    dst_dev.ptr + (j * len) as u64,
                    0,
                    len as u64,
                    kernels::meta(k, if aligned { FLAG_VEC } else { 0 }, j * k),
                ]);
                for s in 0..k {
                    ptrs[j * k + s] = src_dev.ptr + ((j * k + s) * len) as u64;
                }
            }
        }
        ctx.bind()?;
        let words = jobs * (JOB_WORDS + k);
        let table = &lane.table_host.bytes()[..words * 8];
        // SAFETY: pinned source and device table owned by the lane, both `words * 8` bytes;
        // synchronised right after.
        unsafe { cur::memcpy_htod_async(lane.table_dev.ptr, table, lane.stream) }
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        lane.wait(0)?;
        Ok(StagedRig {
            lane,
            kernels,
            src_dev,
            dst_dev,
            src_host,
            dst_host,
            jobs,
            k,
            len,
        })
    }

    /// Host sources: job-major, `k` chunks of `len` bytes per job.
    pub fn sources_mut(&mut self) -> &mut [u8] {
        self.src_host.bytes_mut()
    }

    /// Host parity: `len` bytes per job (valid after [`StagedRig::run`]).
    pub fn parity(&self) -> &[u8] {
        self.dst_host.bytes()
    }

    /// Copy in, compute, copy out; returns when the parity is on the host.
    pub fn run(&mut self) -> Result<(), GpuError> {
        self.lane.ctx.bind()?;
        let stream = self.lane.stream;
        let too_big = || GpuError::Cuda {
            call: "cuLaunchKernel",
            code: "staged rig too large for one launch".into(),
        };
        let grid = kernels::grid(self.len as u64, self.jobs).ok_or_else(too_big)?;
        let n_jobs = u32::try_from(self.jobs).map_err(|_| too_big())?;
        // SAFETY: pinned host buffers and device buffers owned by the rig with matching
        // sizes; the rig is exclusively borrowed until the stream is synchronised below.
        unsafe { cur::memcpy_htod_async(self.src_dev.ptr, self.src_host.bytes(), stream) }
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        let jobs = self.lane.table_dev.ptr;
        let srcs = jobs + (self.jobs * JOB_WORDS * 8) as u64;
        // SAFETY: the table (written in `new`) points only into `src_dev`/`dst_dev`, owned
        // by the rig and exclusively borrowed until the stream is synchronised below.
        unsafe { launch_parity(self.kernels.xor, grid, jobs, srcs, n_jobs, stream) }
            .map_err(driver("cuLaunchKernel"))?;
        // SAFETY: as for the copy in.
        unsafe { cur::memcpy_dtoh_async(self.dst_host.bytes_mut(), self.dst_dev.ptr, stream) }
            .map_err(driver("cuMemcpyDtoHAsync"))?;
        // Same waiting rule as the engine (spin below 1 MiB of data, sleep above).
        self.lane.wait((self.jobs * self.k * self.len) as u64)
    }
}

/// Host→device copy bandwidth in bytes per second from pinned memory: the best of `reps`
/// copies of `bytes` (after one warm-up copy), each timed from its enqueue to its
/// completion — the way the benchmark times a parity call.
pub fn h2d_bandwidth(ctx: &Arc<Context>, bytes: usize, reps: usize) -> Result<f64, GpuError> {
    let mut lane = Lane::new(ctx, 1)?;
    let dev = DeviceMem::new(ctx, bytes)?;
    let host = PinnedMem::new(ctx, bytes)?;
    let once = |lane: &mut Lane| -> Result<std::time::Duration, GpuError> {
        let t = std::time::Instant::now();
        // SAFETY: pinned source and device destination owned here, equal sizes; the lane
        // is synchronised before either is dropped or reused.
        unsafe { cur::memcpy_htod_async(dev.ptr, host.bytes(), lane.stream) }
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        lane.wait(u64::MAX)?;
        Ok(t.elapsed())
    };
    ctx.bind()?;
    once(&mut lane)?;
    let mut best = std::time::Duration::MAX;
    for _ in 0..reps.max(1) {
        best = best.min(once(&mut lane)?);
    }
    Ok(bytes as f64 / best.as_secs_f64().max(1e-9))
}

/// CPU time (user + system) the whole process has used so far, every thread included
/// (`getrusage(RUSAGE_SELF)`): the benchmark's CPU-cost measure. `None` if the call fails.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a live, writable `rusage`; RUSAGE_SELF is a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: getrusage succeeded, so it filled the struct (and zeroed() made it valid anyway).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        std::time::Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
        )
    };
    Some(tv(ru.ru_utime) + tv(ru.ru_stime))
}
