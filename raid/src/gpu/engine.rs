//! [`GpuParity`]: the GPU [`ParityEngine`] over mapped host memory.
//!
//! Invariants:
//! - the GPU only ever sees memory of registered arenas (`sys::gpu::Registration`); a call
//!   touching anything else runs on the CPU engine, counted as a fallback;
//! - registrations (and the kernels, [`GpuParity::set_access`]) change only under the write
//!   lock, launches run under the read lock and wait for the GPU before releasing it, so no
//!   arena is unregistered and no module unloaded under a kernel;
//! - a device fault is sticky: the first one is kept ([`GpuParity::fault`]) and every later
//!   call runs on the CPU engine.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use super::pq::{check_pq, pq_gen_cpu, PqJob};
use super::{check_batch, GpuError};
use crate::error::ParityError;
use crate::gpu::kernels::{Access, MAX_SOURCES};
use crate::parity::{CpuXor, ParityEngine, XorJob};
use crate::sys::buf::BufferArena;
use crate::sys::gpu::{self as dev, Context, DeviceInfo, Fault, Kernels, Lane, Ran, Registration};

/// Streams per engine: that many threads can have a batch on the GPU at once.
const LANES: usize = 4;
/// Initial job-table size per lane in 64-bit words (grows on demand).
const TABLE_WORDS: usize = 4096;
/// Engine name.
const NAME: &str = "gpu-cuda";

/// What the engine did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Kernel launches (one per call that ran on the GPU).
    pub gpu_calls: u64,
    /// Jobs (stripes) computed on the GPU.
    pub gpu_jobs: u64,
    /// Source bytes read by the GPU.
    pub gpu_bytes: u64,
    /// Calls that ran on the CPU engine because a buffer lay outside every registered
    /// arena (or, after a fault, because the GPU is no longer used).
    pub cpu_fallback_calls: u64,
    /// Source bytes of those calls.
    pub cpu_fallback_bytes: u64,
    /// Device faults (at most one stops the GPU for good; later ones come from other
    /// threads that were already on it).
    pub faults: u64,
}

#[derive(Debug, Default)]
struct Counters {
    gpu_calls: AtomicU64,
    gpu_jobs: AtomicU64,
    gpu_bytes: AtomicU64,
    cpu_calls: AtomicU64,
    cpu_bytes: AtomicU64,
    faults: AtomicU64,
}

/// What launches read and registration changes write.
#[derive(Debug)]
struct State {
    // Field order is drop order: registrations before the kernels.
    regions: Vec<Registration>,
    kernels: Arc<Kernels>,
}

/// Parity on an NVIDIA GPU, reading and writing registered host memory in place.
///
/// Threads share it: each call takes one of a few streams ("lanes") and returns once the
/// GPU is done. Register every arena parity runs over first
/// ([`ParityEngine::register_memory`] / [`GpuParity::register`]).
#[derive(Debug)]
pub struct GpuParity {
    // Field order is drop order: streams first, then registrations, kernels, context.
    lanes: Vec<Mutex<Lane>>,
    state: RwLock<State>,
    ctx: Arc<Context>,
    cpu: CpuXor,
    next_lane: AtomicUsize,
    counters: Counters,
    fault: OnceLock<String>,
}

impl GpuParity {
    /// Whether the CUDA driver library and NVRTC can be loaded here (no device access).
    pub fn probe() -> Result<(), GpuError> {
        dev::libraries()
    }

    /// Opens GPU 0 (see [`GpuParity::on_device`]).
    pub fn new() -> Result<Self, GpuError> {
        Self::on_device(0)
    }

    /// Opens GPU `ordinal`: loads the libraries, retains the device's primary context,
    /// compiles the kernels with NVRTC and creates the streams. Without a usable GPU this is
    /// [`GpuError::Unavailable`], never a panic.
    pub fn on_device(ordinal: usize) -> Result<Self, GpuError> {
        let ctx = Context::open(ordinal)?;
        let kernels = Arc::new(Kernels::load(&ctx, Access::DEFAULT)?);
        let lanes = (0..LANES)
            .map(|_| Lane::new(&ctx, TABLE_WORDS).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GpuParity {
            lanes,
            state: RwLock::new(State {
                regions: Vec::new(),
                kernels,
            }),
            ctx,
            cpu: CpuXor::detect(),
            next_lane: AtomicUsize::new(0),
            counters: Counters::default(),
            fault: OnceLock::new(),
        })
    }

    /// The device.
    pub fn device(&self) -> &DeviceInfo {
        self.ctx.info()
    }

    /// How the kernels were loaded: `"cubin"` (compiled for this GPU) or `"ptx"` (JIT).
    pub fn kernel_image(&self) -> &'static str {
        self.read().kernels.image_kind()
    }

    /// How the kernels access memory ([`Access::DEFAULT`] unless [`GpuParity::set_access`]
    /// changed it).
    pub fn access(&self) -> Access {
        self.read().kernels.access()
    }

    /// Recompiles the kernels with another memory-access variant and uses them from the
    /// next call on (after the calls running now have finished). For benchmarking the
    /// variants on a real GPU; every variant computes the same bytes.
    pub fn set_access(&self, access: Access) -> Result<(), GpuError> {
        let kernels = Arc::new(Kernels::load(&self.ctx, access)?);
        let old = std::mem::replace(&mut self.write().kernels, kernels);
        drop(old);
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The CPU engine used for fallbacks.
    pub fn cpu(&self) -> &CpuXor {
        &self.cpu
    }

    /// Registers `arena` with the GPU (pinned, device-mapped) and keeps it alive until it is
    /// unregistered or the engine drops. Registering the same arena again does nothing.
    pub fn register(&self, arena: &Arc<BufferArena>) -> Result<(), GpuError> {
        let mut state = self.write();
        if state.regions.iter().any(|r| Arc::ptr_eq(r.arena(), arena)) {
            return Ok(());
        }
        state.regions.push(Registration::new(&self.ctx, arena)?);
        Ok(())
    }

    /// Unregisters `arena` (after every running call on it has finished); `false` if it
    /// was not registered.
    pub fn unregister(&self, arena: &Arc<BufferArena>) -> bool {
        let regions = &mut self.write().regions;
        let before = regions.len();
        regions.retain(|r| !Arc::ptr_eq(r.arena(), arena));
        regions.len() != before
    }

    /// Number of registered arenas.
    pub fn registered(&self) -> usize {
        self.read().regions.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> GpuStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        GpuStats {
            gpu_calls: get(&c.gpu_calls),
            gpu_jobs: get(&c.gpu_jobs),
            gpu_bytes: get(&c.gpu_bytes),
            cpu_fallback_calls: get(&c.cpu_calls),
            cpu_fallback_bytes: get(&c.cpu_bytes),
            faults: get(&c.faults),
        }
    }

    /// The first device fault, if any (the GPU has not been used since).
    pub fn fault(&self) -> Option<&str> {
        self.fault.get().map(String::as_str)
    }

    /// RAID-6 P+Q for every job, in one launch when every buffer is registered (else on the
    /// CPU, [`pq_gen_cpu`]).
    pub fn pq_gen_batch(&self, jobs: &mut [PqJob<'_>]) -> Result<(), ParityError> {
        for j in jobs.iter() {
            check_pq(&j.srcs, j.p, j.q)?;
        }
        let bytes = jobs.iter().map(|j| (j.srcs.len() * j.p.len()) as u64).sum();
        let cpu = |jobs: &mut [PqJob<'_>]| {
            jobs.iter_mut()
                .try_for_each(|j| pq_gen_cpu(&j.srcs, j.p, j.q))
        };
        if !self.gpu_usable(jobs.iter().map(|j| j.srcs.len())) {
            self.count_fallback(bytes);
            return cpu(jobs);
        }
        let ran = self.with_lane(|lane, kernels, maps| lane.run_pq(kernels, maps, jobs));
        match ran {
            Ok(Ran::Done(b)) => {
                self.count_gpu(jobs.len(), b);
                Ok(())
            }
            Ok(Ran::NotMapped) => {
                self.count_fallback(bytes);
                cpu(jobs)
            }
            // P and Q are written, never read: recomputing them on the CPU is exact.
            Err(fault) => {
                self.record_fault(&fault);
                cpu(jobs)
            }
        }
    }

    /// Benchmark comparison only: a staged rig (copy in, compute, copy out) on this GPU.
    pub fn staged_rig(
        &self,
        jobs: usize,
        k: usize,
        len: usize,
    ) -> Result<dev::StagedRig, GpuError> {
        let kernels = self.read().kernels.clone();
        dev::StagedRig::new(&self.ctx, kernels, jobs, k, len)
    }

    /// Host→device copy bandwidth (bytes/s) of this GPU from pinned memory, for comparison.
    pub fn h2d_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, GpuError> {
        dev::h2d_bandwidth(&self.ctx, bytes, reps)
    }

    fn gpu_usable(&self, mut src_counts: impl Iterator<Item = usize>) -> bool {
        self.fault.get().is_none() && src_counts.all(|n| n <= MAX_SOURCES)
    }

    fn with_lane<R>(&self, f: impl FnOnce(&mut Lane, &Kernels, &[Registration]) -> R) -> R {
        let state = self.read();
        let start = self.next_lane.fetch_add(1, Ordering::Relaxed);
        let n = self.lanes.len();
        let mut lane = (0..n)
            .find_map(|i| self.lanes[(start + i) % n].try_lock().ok())
            .unwrap_or_else(|| {
                self.lanes[start % n]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            });
        f(&mut lane, &state.kernels, &state.regions)
    }

    fn count_gpu(&self, jobs: usize, bytes: u64) {
        let c = &self.counters;
        c.gpu_calls.fetch_add(1, Ordering::Relaxed);
        c.gpu_jobs.fetch_add(jobs as u64, Ordering::Relaxed);
        c.gpu_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn count_fallback(&self, bytes: u64) {
        let c = &self.counters;
        c.cpu_calls.fetch_add(1, Ordering::Relaxed);
        c.cpu_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn record_fault(&self, fault: &Fault) {
        self.counters.faults.fetch_add(1, Ordering::Relaxed);
        let _ = self.fault.set(fault.error.to_string());
    }

    /// `dst (^)= XOR(srcs)` for each job: on the GPU when every buffer is registered.
    fn run(&self, jobs: &mut [XorJob<'_>], acc: bool) -> Result<(), ParityError> {
        check_batch(jobs)?;
        let bytes = jobs
            .iter()
            .map(|j| (j.srcs.len() * j.dst.len()) as u64)
            .sum();
        let cpu = |jobs: &mut [XorJob<'_>]| {
            jobs.iter_mut().try_for_each(|j| {
                if acc {
                    self.cpu.xor_acc(&j.srcs, j.dst)
                } else {
                    self.cpu.xor_gen(&j.srcs, j.dst)
                }
            })
        };
        if !self.gpu_usable(jobs.iter().map(|j| j.srcs.len())) {
            self.count_fallback(bytes);
            return cpu(jobs);
        }
        let ran = self.with_lane(|lane, kernels, maps| lane.run_xor(kernels, maps, jobs, acc));
        match ran {
            Ok(Ran::Done(b)) => {
                self.count_gpu(jobs.len(), b);
                Ok(())
            }
            Ok(Ran::NotMapped) => {
                self.count_fallback(bytes);
                cpu(jobs)
            }
            Err(fault) => {
                self.record_fault(&fault);
                if acc && fault.outputs_touched {
                    Err(ParityError::Device {
                        engine: NAME,
                        reason: fault.error.to_string(),
                    })
                } else {
                    // Generation overwrites every destination byte, and an accumulate that
                    // never launched left its destination untouched: the CPU result is exact.
                    cpu(jobs)
                }
            }
        }
    }
}

impl ParityEngine for GpuParity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn xor_gen(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        let mut job = [XorJob {
            srcs: srcs.to_vec(),
            dst,
        }];
        self.run(&mut job, false)
    }

    fn xor_acc(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        let mut job = [XorJob {
            srcs: srcs.to_vec(),
            dst,
        }];
        self.run(&mut job, true)
    }

    fn xor_batch(&self, jobs: &mut [XorJob<'_>]) -> Result<(), ParityError> {
        self.run(jobs, false)
    }

    fn register_memory(&self, arena: &Arc<BufferArena>) -> Result<(), ParityError> {
        self.register(arena).map_err(|e| ParityError::Device {
            engine: NAME,
            reason: e.to_string(),
        })
    }
}
