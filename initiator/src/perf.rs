//! The load generator (in the manner of SPDK's `perf`): each worker owns one I/O queue and keeps
//! `queue_depth` Reads/Writes in flight over registered buffers, with no copy of the payload,
//! for a fixed time; latencies go into a per-worker [`Histogram`], merged at the end.
//!
//! Offsets: random (uniform over block-size-aligned positions of the range) or sequential (each
//! worker walks its own slice of the range, wrapping). The read/write mix is decided per I/O.
//!
//! Invariants: a worker stops submitting when told to stop or when its time is up, then drains
//! what is in flight (bounded by the command timeout); counters shared with the progress line
//! are relaxed atomics written only by their worker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use raidline_fabric::Fabric;

use crate::controller::Namespace;
use crate::error::Error;
use crate::hist::Histogram;
use crate::io::{submit_rw, IoOp};
use crate::pattern::SplitMix64;
use crate::queue::{backoff, Queue};
use crate::types::{Lba, Tag};

/// What a perf run does.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfConfig {
    /// I/Os in flight per queue.
    pub queue_depth: u16,
    /// Bytes per I/O (a multiple of the block size).
    pub block_size: u32,
    /// Percentage of reads (0–100).
    pub read_percent: u8,
    /// Random offsets (else sequential).
    pub random: bool,
    /// How long to run.
    pub duration: Duration,
    /// Blocks of the namespace to use, from LBA 0 (0: all).
    pub range_blocks: u64,
    /// Seed of the offset and mix generators.
    pub seed: u64,
}

/// Counters a worker updates while it runs (for the live progress line).
#[derive(Debug, Default)]
pub struct Live {
    /// I/Os completed.
    pub ios: AtomicU64,
    /// Bytes completed.
    pub bytes: AtomicU64,
    /// I/Os failed.
    pub errors: AtomicU64,
}

/// One worker's (or the merged) outcome.
#[derive(Debug, Clone, Default)]
pub struct PerfResult {
    /// Reads completed successfully.
    pub reads: u64,
    /// Writes completed successfully.
    pub writes: u64,
    /// Bytes moved by successful I/Os.
    pub bytes: u64,
    /// I/Os that failed.
    pub errors: u64,
    /// The first error seen.
    pub first_error: Option<Error>,
    /// Latency of successful I/Os, nanoseconds.
    pub latency: Histogram,
    /// Wall time from first submission to the last completion.
    pub elapsed: Duration,
}

impl PerfResult {
    /// Adds another worker's result (elapsed: the longest).
    pub fn merge(&mut self, o: &PerfResult) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.bytes += o.bytes;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error.clone();
        }
        self.latency.merge(&o.latency);
        self.elapsed = self.elapsed.max(o.elapsed);
    }
    /// Successful I/Os.
    pub fn ios(&self) -> u64 {
        self.reads + self.writes
    }
    /// I/Os per second.
    pub fn iops(&self) -> f64 {
        self.ios() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    /// Megabytes (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Checks a configuration against a namespace and queue before the run.
pub fn validate(cfg: &PerfConfig, ns: &Namespace, slot: u32) -> Result<u64, Error> {
    let bs = cfg.block_size;
    if bs == 0 || bs % ns.block_size != 0 {
        return Err(Error::InvalidArgument(format!(
            "I/O size {bs} is not a multiple of the {}-byte block",
            ns.block_size
        )));
    }
    if bs > slot {
        return Err(Error::InvalidArgument(format!(
            "I/O size {bs} exceeds the {slot}-byte transfer limit"
        )));
    }
    if cfg.read_percent > 100 || cfg.queue_depth == 0 {
        return Err(Error::InvalidArgument(format!(
            "read percentage {} and queue depth {}",
            cfg.read_percent, cfg.queue_depth
        )));
    }
    let range = if cfg.range_blocks == 0 {
        ns.blocks
    } else {
        cfg.range_blocks.min(ns.blocks)
    };
    let per_io = u64::from(bs / ns.block_size);
    if range < per_io {
        return Err(Error::InvalidArgument(format!(
            "range of {range} blocks is smaller than one I/O"
        )));
    }
    Ok(range)
}

/// Runs one worker on `q` until `stop` or the configured duration. `index`/`workers` place its
/// sequential slice.
pub fn run_worker<F: Fabric>(
    q: &mut Queue<F>,
    ns: &Namespace,
    cfg: &PerfConfig,
    index: usize,
    workers: usize,
    stop: &AtomicBool,
    live: &Live,
) -> Result<PerfResult, Error> {
    let range = validate(cfg, ns, q.data_slot())?;
    let nlb = cfg.block_size / ns.block_size;
    let positions = range / u64::from(nlb);
    let slice = (positions / workers.max(1) as u64).max(1);
    let mut seq = (slice * index as u64) % positions;
    let mut rng = SplitMix64::new(cfg.seed ^ (index as u64).wrapping_mul(0x9E37_79B9));
    let mut ops: Vec<Option<IoOp>> = vec![None; usize::from(q.depth())];
    let mut res = PerfResult::default();
    let mut done: Vec<Tag> = Vec::with_capacity(64);
    let start = Instant::now();
    let end = start + cfg.duration;
    let mut idle = 0u32;
    let mut submitting = true;
    let mut checks = 0u32;
    loop {
        while submitting && q.in_flight() < usize::from(cfg.queue_depth) {
            let Some(tag) = q.alloc() else { break };
            let pos = if cfg.random {
                rng.below(positions)
            } else {
                let p = seq;
                seq = (seq + 1) % positions;
                p
            };
            let op = if rng.below(100) < u64::from(cfg.read_percent) {
                IoOp::Read
            } else {
                IoOp::Write
            };
            let lba = Lba(pos * u64::from(nlb));
            if let Err(e) = submit_rw(q, tag, op, ns, lba, nlb) {
                q.release(tag);
                res.errors += 1;
                live.errors.fetch_add(1, Ordering::Relaxed);
                res.first_error.get_or_insert(e);
                submitting = false;
                break;
            }
            ops[tag.index()] = Some(op);
        }
        done.clear();
        if q.poll(&mut done) == 0 {
            idle += 1;
            if idle > 1024 {
                // Nothing for a while (a slow target): stop burning the core.
                backoff(idle);
            }
        } else {
            idle = 0;
        }
        for &tag in &done {
            let Some(op) = ops[tag.index()].take() else {
                continue;
            };
            let Some(f) = q.take(tag) else { continue };
            match f.result {
                Ok(_) => {
                    res.latency.record(f.latency.as_nanos() as u64);
                    match op {
                        IoOp::Read => res.reads += 1,
                        IoOp::Write => res.writes += 1,
                    }
                    res.bytes += u64::from(cfg.block_size);
                    live.ios.fetch_add(1, Ordering::Relaxed);
                    live.bytes
                        .fetch_add(u64::from(cfg.block_size), Ordering::Relaxed);
                }
                Err(e) => {
                    res.errors += 1;
                    live.errors.fetch_add(1, Ordering::Relaxed);
                    if e.is_fatal() {
                        submitting = false;
                    }
                    res.first_error.get_or_insert(e);
                }
            }
        }
        checks += 1;
        if submitting && checks >= 64 {
            checks = 0;
            if stop.load(Ordering::Relaxed) || Instant::now() >= end {
                submitting = false;
            }
        }
        if !submitting && q.in_flight() == 0 {
            break;
        }
    }
    res.elapsed = start.elapsed();
    Ok(res)
}
