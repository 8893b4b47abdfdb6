//! Raidline's RDMA transport: the one crate with RDMA FFI, and its in-memory twin.
//!
//! - [`api`]: the backend traits ([`Fabric`], [`CompletionQueue`], [`QueuePair`], ...). The
//!   target's pollers own CQs and QPs (`&mut self`, no locks); the control plane drives the
//!   RDMA CM through a pollable fd; regions are registered once over caller memory.
//! - [`slab`]: typed ownership of in-flight work (`wr_id` indexes a slab; failed posts hand
//!   the work back).
//! - [`mem`]: the in-memory fabric, deterministic, with the semantics of an RC QP.
//! - [`fault`]: a seeded fault-injecting wrapper over any backend.
//! - [`conformance`]: one suite run against every backend.
//! - `verbs` (feature `verbs`, on by default): libibverbs + librdmacm through
//!   `rdma-mummy-sys`, which loads the libraries at run time, so binaries start on hosts without
//!   rdma-core and report [`FabricError::LibraryMissing`] or [`FabricError::NoDevice`].
//!
//! The `unsafe_code` lint is allowed only in the `verbs*` and `sys_*` modules (the FFI room);
//! everything else is denied it.

pub mod api;
pub mod conformance;

pub mod error;
pub mod fault;

pub mod mem;
pub mod slab;
pub mod sys_mem;
pub mod sys_poll;
pub mod types;
#[cfg(feature = "verbs")]
pub mod verbs;
#[cfg(feature = "verbs")]
mod verbs_cm;

pub use api::{
    CompletionQueue, ConnectionManager, Fabric, IncomingRequest, MemoryRegion, QueuePair,
    SharedReceiveQueue,
};
pub use error::{FabricError, OsErrno, PostError};
pub use sys_mem::{DmaMemory, RegionMemory};
pub use types::*;
