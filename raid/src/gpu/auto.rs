//! [`AutoParity`]: large batches to the GPU, small ones to the CPU.
//!
//! The size that decides is a call's total source bytes (stripes × data chunks × chunk
//! bytes): a full-stripe write round, a rebuild or scrub window is large; a small write's
//! read-modify-write is small and would pay a launch and a PCIe round trip for a few
//! microseconds of CPU work. Results are identical either way; only where they are
//! computed changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::engine::GpuParity;
use super::pq::{pq_gen_cpu, PqJob};
use crate::error::ParityError;
use crate::parity::{CpuXor, ParityEngine, XorJob};
use crate::sys::buf::BufferArena;

/// Routes each call by size between the CPU engine and an optional GPU engine.
#[derive(Debug)]
pub struct AutoParity {
    cpu: CpuXor,
    gpu: Option<GpuParity>,
    threshold: u64,
    to_gpu: AtomicU64,
    to_cpu: AtomicU64,
}

impl AutoParity {
    /// Calls with at least `threshold` source bytes go to `gpu` (when there is one).
    pub fn new(gpu: Option<GpuParity>, threshold: u64) -> Self {
        AutoParity {
            cpu: CpuXor::detect(),
            gpu,
            threshold,
            to_gpu: AtomicU64::new(0),
            to_cpu: AtomicU64::new(0),
        }
    }

    /// The threshold in source bytes.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// The GPU engine, if any (for registration and statistics).
    pub fn gpu(&self) -> Option<&GpuParity> {
        self.gpu.as_ref()
    }

    /// Calls routed so far: `(to the GPU engine, to the CPU engine)`.
    pub fn routed(&self) -> (u64, u64) {
        (
            self.to_gpu.load(Ordering::Relaxed),
            self.to_cpu.load(Ordering::Relaxed),
        )
    }

    /// The GPU engine when a call of `bytes` source bytes should go to it.
    fn pick(&self, bytes: u64) -> Option<&GpuParity> {
        let gpu = self.gpu.as_ref().filter(|_| bytes >= self.threshold);
        let counter = if gpu.is_some() {
            &self.to_gpu
        } else {
            &self.to_cpu
        };
        counter.fetch_add(1, Ordering::Relaxed);
        gpu
    }

    /// RAID-6 P+Q, routed like `xor_batch`.
    pub fn pq_gen_batch(&self, jobs: &mut [PqJob<'_>]) -> Result<(), ParityError> {
        let bytes = jobs.iter().map(|j| (j.srcs.len() * j.p.len()) as u64).sum();
        match self.pick(bytes) {
            Some(gpu) => gpu.pq_gen_batch(jobs),
            None => jobs
                .iter_mut()
                .try_for_each(|j| pq_gen_cpu(&j.srcs, j.p, j.q)),
        }
    }
}

fn single_bytes(srcs: &[&[u8]], dst: &[u8]) -> u64 {
    (srcs.len() * dst.len()) as u64
}

impl ParityEngine for AutoParity {
    fn name(&self) -> &'static str {
        if self.gpu.is_some() {
            "auto-gpu"
        } else {
            "auto-cpu"
        }
    }

    fn xor_gen(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        match self.pick(single_bytes(srcs, dst)) {
            Some(gpu) => gpu.xor_gen(srcs, dst),
            None => self.cpu.xor_gen(srcs, dst),
        }
    }

    fn xor_acc(&self, srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), ParityError> {
        match self.pick(single_bytes(srcs, dst)) {
            Some(gpu) => gpu.xor_acc(srcs, dst),
            None => self.cpu.xor_acc(srcs, dst),
        }
    }

    fn xor_batch(&self, jobs: &mut [XorJob<'_>]) -> Result<(), ParityError> {
        let bytes = jobs.iter().map(|j| single_bytes(&j.srcs, j.dst)).sum();
        match self.pick(bytes) {
            Some(gpu) => gpu.xor_batch(jobs),
            None => self.cpu.xor_batch(jobs),
        }
    }

    fn register_memory(&self, arena: &Arc<BufferArena>) -> Result<(), ParityError> {
        match &self.gpu {
            Some(gpu) => gpu.register_memory(arena),
            None => Ok(()),
        }
    }
}
