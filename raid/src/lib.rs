//! Raidline's RAID-5 engine.
//!
//! - [`geometry`]: validated geometry and md's left-symmetric layout;
//! - [`parity`]: the [`ParityEngine`] trait and the SIMD CPU XOR engine;
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
//! `unsafe` lives only in [`sys`] (SIMD kernels, io_uring, ISA-L bindings for the bench).

pub mod array;
pub mod error;
pub mod geometry;
pub mod io;
pub mod member;
pub mod parity;
pub mod queue;
pub mod superblock;
pub mod sys;

pub use array::{
    Array, ArrayConfig, ArrayStats, AssembleOptions, Assembled, SyncKind, SyncProgress, Throttle,
};
pub use error::{
    GeometryError, MemberError, ParityError, RaidError, RefuseReason, Refused, SuperblockError,
};
pub use geometry::{ArrayBlock, BlockSize, ChunkSize, Geometry, MemberBlock, MemberIdx, StripeIdx};
pub use io::{Executor, MemberOp, OpBuf, SyncExecutor};
pub use member::{
    AlignedBuf, Fault, FaultHandle, FaultyMember, MemMember, Member, OpKind, PowerSwitch,
};
pub use parity::{CpuXor, ParityEngine, SimdLevel};
pub use queue::{Completion, RaidQueue, Request, RequestKind};
pub use superblock::Uuid;
pub use sys::buf::{BufferArena, IoBuf};
pub use sys::uring::{FileMember, UringExecutor};

/// Most members an array may have (the superblock's member table size).
pub const MAX_MEMBERS: usize = 64;
