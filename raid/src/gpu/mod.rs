//! GPU parity offload (cargo feature `gpu`) and the engine choice the configuration makes.
//!
//! - [`ParityChoice`] / [`engine_for`]: `parity = "cpu" | "gpu" | "auto"` → an engine, plus
//!   the reason to log when a GPU was asked for and the CPU engine is used instead. The
//!   function exists with and without the feature (without it, GPU choices fall back with
//!   the reason "built without the gpu feature").
//! - `GpuParity` (feature `gpu`): a [`ParityEngine`] on an NVIDIA GPU through CUDA's
//!   driver API and NVRTC, both loaded at run time (`cudarc`): a binary built with the
//!   feature runs on machines without CUDA and reports [`GpuError::Unavailable`] there.
//!   Zero-copy: memory registered with [`ParityEngine::register_memory`] (the target's
//!   buffer pool, each array's scratch arena) is pinned and mapped into the GPU, and the
//!   kernels read data and write parity in place through mapped pointers — one launch per
//!   `xor_batch`, whatever the number of stripes. A call touching memory outside every
//!   registered arena runs on the CPU engine (counted in `GpuStats::cpu_fallback_calls`);
//!   nothing is ever staged through device memory (the staged variant exists only as the
//!   benchmark's comparison, `sys::gpu::StagedRig`).
//! - `AutoParity` (feature `gpu`): batches of at least a threshold of source bytes go to
//!   the GPU (full-stripe write rounds, rebuild, scrub), smaller ones to the CPU.
//! - [`PqJob`] / [`pq_gen_cpu`]: RAID-6 P+Q (GF(2^8), polynomial 0x11D, generator 2), the
//!   CPU reference for the GPU's `pq_gen_batch`.
//!
//! Invariant: whatever happens on the device, a call either returns the exact bytes the CPU
//! engine would have produced or an error. A device fault makes the engine stop using the
//! GPU for good (later calls run on its CPU engine) and is kept for the logs
//! (`GpuParity::fault`); only a fault in the middle of an accumulate (`xor_acc`), whose
//! destination may then hold partial results, is returned as [`crate::error::ParityError::Device`].

use std::sync::Arc;

use thiserror::Error;

use crate::parity::{CpuXor, ParityEngine};

mod pq;
pub use pq::{gf_mul2, pq_gen_cpu, PqJob};

#[cfg(feature = "gpu")]
mod auto;
#[cfg(feature = "gpu")]
mod engine;
#[cfg(feature = "gpu")]
pub mod kernels;
#[cfg(feature = "gpu")]
pub use auto::AutoParity;
#[cfg(feature = "gpu")]
pub use engine::{GpuParity, GpuStats};

#[cfg(all(test, feature = "gpu"))]
mod tests;

/// Source bytes from which `AutoParity` sends a batch to the GPU: 16 MiB (64 stripes of
/// 4+1 × 64 KiB chunks), the measured crossover (`crossover_batch_bytes`) of the first
/// device check (NVIDIA H200, PCIe gen5 x16, 2026-11-29): at 64 stripes the mapped GPU
/// path did 33.7 GB/s against 19.8 GB/s for the CPU engine (AVX-512, one thread); at 8
/// stripes (2 MiB) the CPU engine was still faster (31.0 against 22.7 GB/s).
pub const DEFAULT_AUTO_THRESHOLD: u64 = 16 << 20;

/// Why the GPU engine cannot be used, or what failed on the device.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GpuError {
    /// No usable GPU: no driver library, no NVRTC, no device, or a device that cannot map
    /// host memory. The caller falls back to the CPU engine and logs the reason.
    #[error("no GPU: {reason}")]
    Unavailable {
        /// What is missing.
        reason: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA {call} failed: {code}")]
    Cuda {
        /// The driver function.
        call: &'static str,
        /// The driver's error name and code.
        code: String,
    },
    /// NVRTC could not compile (or the driver could not load) the parity kernels.
    #[error("parity kernels for {arch}: {log}")]
    Compile {
        /// Target architecture (e.g. `sm_90`).
        arch: String,
        /// Compiler log or loader error.
        log: String,
    },
    /// Memory could not be registered with the GPU.
    #[error("cannot register {len} bytes at {addr:#x} with the GPU: {reason}")]
    Register {
        /// Start address.
        addr: usize,
        /// Length.
        len: usize,
        /// What the driver said.
        reason: String,
    },
}

/// The configuration's parity engine choice (`parity = "cpu" | "gpu" | "auto"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParityChoice {
    /// The SIMD CPU engine.
    #[default]
    Cpu,
    /// Every parity computation on the GPU (memory outside registered arenas on the CPU).
    Gpu,
    /// Large batches on the GPU, small ones on the CPU ([`DEFAULT_AUTO_THRESHOLD`]).
    Auto,
}

impl ParityChoice {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ParityChoice::Cpu => "cpu",
            ParityChoice::Gpu => "gpu",
            ParityChoice::Auto => "auto",
        }
    }
}

impl std::fmt::Display for ParityChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parity choice that is not `cpu`, `gpu` or `auto`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("parity engine {0:?} is not one of \"cpu\", \"gpu\", \"auto\"")]
pub struct UnknownParityChoice(pub String);

impl std::str::FromStr for ParityChoice {
    type Err = UnknownParityChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(ParityChoice::Cpu),
            "gpu" => Ok(ParityChoice::Gpu),
            "auto" => Ok(ParityChoice::Auto),
            other => Err(UnknownParityChoice(other.to_string())),
        }
    }
}

/// The engine for `choice`, and when a GPU was asked for but cannot be used, the reason
/// (for the caller to log; the engine is then the CPU engine). Opening the GPU compiles the
/// kernels (NVRTC, well under a second): call this once at start-up. Register the memory
/// parity runs over ([`ParityEngine::register_memory`]) before serving I/O.
pub fn engine_for(choice: ParityChoice) -> (Arc<dyn ParityEngine>, Option<String>) {
    let cpu = || Arc::new(CpuXor::detect()) as Arc<dyn ParityEngine>;
    if choice == ParityChoice::Cpu {
        return (cpu(), None);
    }
    match open_gpu(choice) {
        Ok(engine) => (engine, None),
        Err(reason) => (
            cpu(),
            Some(format!(
                "parity = \"{choice}\": {reason}; using the CPU engine"
            )),
        ),
    }
}

#[cfg(feature = "gpu")]
fn open_gpu(choice: ParityChoice) -> Result<Arc<dyn ParityEngine>, String> {
    let gpu = GpuParity::new().map_err(|e| e.to_string())?;
    Ok(match choice {
        ParityChoice::Auto => Arc::new(AutoParity::new(Some(gpu), DEFAULT_AUTO_THRESHOLD)),
        _ => Arc::new(gpu),
    })
}

#[cfg(not(feature = "gpu"))]
fn open_gpu(_choice: ParityChoice) -> Result<Arc<dyn ParityEngine>, String> {
    Err("built without the gpu feature".into())
}

/// Validates a batch the way [`CpuXor`] does (the first bad job's error).
#[cfg(feature = "gpu")]
fn check_batch(jobs: &[crate::parity::XorJob<'_>]) -> Result<(), crate::error::ParityError> {
    jobs.iter()
        .try_for_each(|j| crate::parity::check(&j.srcs, j.dst))
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    #[test]
    fn choices_parse_and_print() {
        for c in [ParityChoice::Cpu, ParityChoice::Gpu, ParityChoice::Auto] {
            assert_eq!(c.as_str().parse::<ParityChoice>(), Ok(c));
            assert_eq!(c.to_string(), c.as_str());
        }
        assert_eq!(
            "GPU".parse::<ParityChoice>(),
            Err(UnknownParityChoice("GPU".into()))
        );
        assert_eq!(ParityChoice::default(), ParityChoice::Cpu);
    }

    #[test]
    fn cpu_choice_is_the_cpu_engine_without_a_reason() {
        let (engine, reason) = engine_for(ParityChoice::Cpu);
        assert!(engine.name().starts_with("cpu-"), "{}", engine.name());
        assert_eq!(reason, None);
    }

    /// Wherever this runs, a GPU choice yields a working engine; when it is the CPU engine,
    /// a reason comes with it.
    #[test]
    fn gpu_choices_fall_back_with_a_reason() {
        for choice in [ParityChoice::Gpu, ParityChoice::Auto] {
            let (engine, reason) = engine_for(choice);
            if engine.name().starts_with("cpu-") {
                let reason = reason.expect("a fallback says why");
                assert!(
                    reason.starts_with(&format!("parity = \"{choice}\": ")),
                    "{reason}"
                );
                assert!(reason.ends_with("using the CPU engine"), "{reason}");
                if cfg!(not(feature = "gpu")) {
                    assert!(reason.contains("built without the gpu feature"), "{reason}");
                }
            } else {
                assert_eq!(reason, None);
            }
            let a = [1u8, 2, 3];
            let b = [4u8, 5, 6];
            let mut d = [0u8; 3];
            engine.xor_gen(&[&a, &b], &mut d).unwrap();
            assert_eq!(d, [5, 7, 5]);
            engine
                .register_memory(&crate::sys::buf::BufferArena::empty())
                .unwrap();
        }
    }
}
