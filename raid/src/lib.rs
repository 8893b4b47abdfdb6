//! Raidline's RAID-5 engine.
//!
//! - [`geometry`]: validated geometry and md's left-symmetric layout;
//! - [`parity`]: the [`ParityEngine`] trait and the SIMD CPU XOR engine;
//! - [`gpu`]: the engine choice (`cpu`/`gpu`/`auto`) and, with cargo feature `gpu`, the GPU
//!   parity engine over mapped host memory;
//! - [`member`]: the [`Member`] trait, in-memory and fault-injecting members;
//! - [`io`]: member operations and executors ([`SyncExecutor`], [`UringExecutor`]);
//! - [`superblock`]: the on-member superblock;
//! - [`array`]: the array itself — reads, writes of any size, degraded mode, failures,
//!   assembly, write-intent bitmap, partial-parity log, rebuild, resync and scrub;
//! - [`queue`]: a non-blocking submit/poll front end for poller threads (worker threads,
//!   each with its own executor, run the synchronous core).
//!
//! The core is synchronous over an [`Executor`]: a request plans one batch of member reads,
//! then one batch of member writes; the executor runs each batch (the io_uring one as a
//! single submission across all members) and returns when it is complete. The array is
//! `Sync` and shared by the target's poller threads; each poller passes its own executor.
//! Payload is never copied: member writes go straight from the caller's buffers, reads of
//! healthy chunks land straight in them, and parity math reads them in place.
//!
//! The `unsafe_code` lint is allowed only in [`sys`] (SIMD kernels, io_uring, ISA-L bindings
//! for the bench, CUDA for the GPU engine), the crate's FFI room.
//!
//! ```
//! use std::sync::Arc;
//! use raidline_raid::*;
//!
//! # fn main() -> Result<(), RaidError> {
//! // Four 1 MiB + 16-chunk members (in memory here; `FileMember::open` for real drives).
//! let disks: Vec<MemMember> = (0..4).map(|i| MemMember::new(&format!("d{i}"), (1 << 20) + 16 * 65536)).collect();
//! let members: Vec<Arc<dyn Member>> = disks.iter().map(|d| Arc::new(d.clone()) as Arc<dyn Member>).collect();
//! let config = ArrayConfig { assume_clean: true, ..ArrayConfig::default() };
//! let array = Array::create(members, vec![], &config, Arc::new(CpuXor::detect()))?;
//! assert_eq!(array.geometry().capacity_bytes(), 3 * 16 * 65536);
//!
//! let mut exec = SyncExecutor; // a poller would use its own `UringExecutor`
//! let data = vec![0xA5u8; 3 * 4096];
//! array.write(&mut exec, ArrayBlock(5), &data)?;
//! let mut back = vec![0u8; data.len()];
//! array.read(&mut exec, ArrayBlock(5), &mut back)?;
//! assert_eq!(back, data);
//!
//! // A spare arrives after a failure: it is taken and rebuilt online.
//! array.stop()?;
//! let survivors: Vec<Arc<dyn Member>> = disks[1..].iter().map(|d| Arc::new(d.clone()) as Arc<dyn Member>).collect();
//! let array = Array::assemble(survivors, None, Arc::new(CpuXor::detect()))?.array;
//! assert_eq!(array.degraded_roles(), vec![0]);
//! array.add_spare(Arc::new(MemMember::new("spare", (1 << 20) + 16 * 65536)))?;
//! let done = array.run_rebuild(&mut exec, &mut Throttle::new(Some(500 << 20)))?;
//! assert!(done.is_some_and(|p| p.finished));
//! array.read(&mut exec, ArrayBlock(5), &mut back)?;
//! assert_eq!(back, data);
//! # Ok(())
//! # }
//! ```

pub mod array;
pub mod error;
pub mod geometry;
pub mod gpu;
pub mod io;
pub mod member;
pub mod parity;
pub mod queue;
pub mod superblock;
pub mod sys;

pub use array::{
    Array, ArrayConfig, ArrayStats, AssembleOptions, Assembled, DirectRead, EngineBuf, Exposure,
    GoneMember, GoneReason, ReadNext, ReadStart, ReadTask, ReplaceStatus, SyncKind, SyncProgress,
    Throttle, WriteHolePolicy, WriteNext, WriteStart, WriteTask, ROUND_STRIPES,
};
pub use error::{
    ErrorClass, GeometryError, MemberError, ParityError, RaidError, RefuseReason, Refused,
    SuperblockError,
};
pub use geometry::{ArrayBlock, BlockSize, ChunkSize, Geometry, MemberBlock, MemberIdx, StripeIdx};
pub use io::{Executor, MemberOp, OpBuf, SyncExecutor};
pub use member::{
    AlignedBuf, Fault, FaultHandle, FaultyMember, MemMember, Member, OpKind, PowerSwitch,
};
pub use parity::{CpuXor, ParityEngine, SimdLevel, XorJob};
pub use queue::{serve_request, Completion, RaidQueue, Request, RequestKind};
pub use superblock::Uuid;
pub use sys::buf::{BufferArena, IoBuf};
pub use sys::ring::{
    OwnedRing, RingBuf, RingCompletion, RingOpKind, RingRequest, RingScratch, RingSeg, RingSegs,
};
pub use sys::uring::{FileMember, UringExecutor};

/// Most members an array may have (the superblock's member table size).
pub const MAX_MEMBERS: usize = 64;
