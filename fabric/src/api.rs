//! The backend boundary: one trait family that the verbs backend, the in-memory fabric and the
//! fault-injecting wrapper implement, so the target, the initiator and the congestion
//! controller are written once against it.
//!
//! Ownership model (what makes lock-free pollers possible):
//! - [`Fabric`] is one device; it hands out protection domains, regions, CQs, SRQs and the
//!   connection manager. It is `Sync`: any thread may create resources.
//! - A [`CompletionQueue`] and a [`QueuePair`] are `Send` but take `&mut self` to poll and post:
//!   a poller thread owns them outright and needs no lock. QP creation only needs a CQ's
//!   [`CompletionQueue::Handle`] (a cheap clone that keeps the CQ alive).
//! - A [`MemoryRegion`] is registered once over caller memory ([`crate::RegionMemory`], e.g. the
//!   target's buffer pool) and shared (`Sync`) by every thread that builds SGEs from it.
//! - The [`ConnectionManager`] belongs to the control plane: its `AsRawFd` is readable when
//!   [`ConnectionManager::poll_event`] has something, so it goes straight into tokio's
//!   `AsyncFd` or an epoll set on every backend.
//!
//! Resources are freed in `Drop`. A QP, CQ or SRQ keeps alive what it was built from (its PD,
//! CQs, SRQ, RDMA CM id), so drop order never matters for memory safety.

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use crate::error::{FabricError, PostError};
use crate::sys_mem::RegionMemory;
use crate::types::{
    AcceptParams, Access, Capabilities, CmEvent, Completion, ConnId, ConnectParams, DeviceAttrs,
    QpInit, QpNum, RecvWr, RemoteBuf, RequestInfo, SendWr, Sge,
};

/// One RDMA device and everything it creates.
pub trait Fabric: Send + Sync + Sized + 'static {
    /// Protection domain (cheap to clone; the last clone frees it).
    type Pd: Clone + Send + Sync + 'static;
    /// Registered memory region.
    type Mr: MemoryRegion + 'static;
    /// Completion queue, owned by one poller.
    type Cq: CompletionQueue<Handle = Self::CqHandle> + 'static;
    /// What QP creation needs of a CQ.
    type CqHandle: Clone + Send + Sync + 'static;
    /// Shared receive queue.
    type Srq: SharedReceiveQueue<Handle = Self::SrqHandle> + 'static;
    /// What QP creation needs of an SRQ.
    type SrqHandle: Clone + Send + Sync + 'static;
    /// Connected RC queue pair.
    type Qp: QueuePair + 'static;
    /// An incoming connect request, to accept or reject.
    type Request: IncomingRequest + Send + 'static;
    /// The RDMA CM event channel with its listeners and connections.
    type Cm: ConnectionManager<Self> + 'static;

    /// The attributes queues and pools are sized by.
    fn attrs(&self) -> &DeviceAttrs;
    /// Backend differences the conformance suite needs.
    fn capabilities(&self) -> Capabilities;
    /// A new protection domain.
    fn alloc_pd(&self) -> Result<Self::Pd, FabricError>;
    /// Registers all of `memory` in `pd`. The region keeps `memory` alive.
    fn register(
        &self,
        pd: &Self::Pd,
        memory: Arc<dyn RegionMemory>,
        access: Access,
    ) -> Result<Self::Mr, FabricError>;
    /// A completion queue of at least `depth` entries with a completion channel.
    fn create_cq(&self, depth: u32) -> Result<Self::Cq, FabricError>;
    /// A shared receive queue.
    fn create_srq(
        &self,
        pd: &Self::Pd,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<Self::Srq, FabricError>;
    /// A connection manager (event channel) on this device.
    fn create_cm(&self) -> Result<Self::Cm, FabricError>;
}

/// A registered memory region.
pub trait MemoryRegion: Send + Sync {
    /// Device address of the first byte (the memory's virtual address).
    fn addr(&self) -> u64;
    /// Bytes.
    fn len(&self) -> u64;
    /// Local key.
    fn lkey(&self) -> u32;
    /// Remote key.
    fn rkey(&self) -> u32;
    /// The memory it covers.
    fn memory(&self) -> &Arc<dyn RegionMemory>;

    /// Whether it is empty (never, for a registered region).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A local SGE over `len` bytes at `offset`, bounds-checked.
    fn sge(&self, offset: u64, len: u32) -> Result<Sge, FabricError> {
        let end = offset.checked_add(u64::from(len));
        match end {
            Some(end) if end <= self.len() => Ok(Sge {
                addr: self.addr() + offset,
                length: len,
                lkey: self.lkey(),
            }),
            _ => Err(FabricError::OutOfBounds {
                offset,
                len: u64::from(len),
                region_len: self.len(),
            }),
        }
    }
    /// The address and key a peer uses for the byte at `offset` (not bounds-checked: the peer's
    /// device checks, as it must for anything a peer sends).
    fn remote(&self, offset: u64) -> RemoteBuf {
        RemoteBuf {
            addr: self.addr().wrapping_add(offset),
            rkey: self.rkey(),
        }
    }
}

/// A completion queue with a pollable notification fd.
///
/// Event mode: `poll` until empty, [`CompletionQueue::arm`], `poll` once more (a completion may
/// have slipped in), then wait for the fd to be readable, [`CompletionQueue::ack_events`], and
/// start over.
pub trait CompletionQueue: Send + AsRawFd + AsFd {
    /// What QP creation needs; keeps the CQ alive.
    type Handle: Clone + Send + Sync;
    /// A handle for QP creation.
    fn handle(&self) -> Self::Handle;
    /// Appends up to `max` completions to `out`, returns how many.
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, FabricError>;
    /// Requests a notification (fd readable) for the next completion.
    fn arm(&mut self) -> Result<(), FabricError>;
    /// Consumes pending notifications without blocking; returns how many there were.
    fn ack_events(&mut self) -> Result<u32, FabricError>;
    /// Whether completions that already arrived are held back from [`Self::poll`] without a
    /// notification to come for them (a software CQ that releases them only to later polls,
    /// such as the fault-injecting wrapper's delays). A caller that would sleep on the
    /// descriptor polls again soon instead. Hardware and rxe CQs hold nothing: `false`.
    fn holds_completions(&self) -> bool {
        false
    }
}

/// A shared receive queue.
pub trait SharedReceiveQueue: Send + Sync {
    /// What QP creation needs; keeps the SRQ alive.
    type Handle: Clone + Send + Sync;
    /// A handle for QP creation.
    fn handle(&self) -> Self::Handle;
    /// Posts receives, in order.
    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError>;
}

/// A connected RC queue pair.
pub trait QueuePair: Send {
    /// Its number (completions name it).
    fn qp_num(&self) -> QpNum;
    /// The connection it belongs to.
    fn conn(&self) -> ConnId;
    /// Posts a chain of send work requests in one call: they execute in order (RC).
    fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError>;
    /// Posts receives (not allowed on a QP with an SRQ).
    fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError>;
    /// Moves the QP to the error state: everything outstanding completes with a flush error.
    /// Used to drain before teardown.
    fn set_error(&mut self) -> Result<(), FabricError>;
}

/// An incoming connect request.
pub trait IncomingRequest {
    /// What the peer asked for.
    fn info(&self) -> &RequestInfo;
}

/// The RDMA CM: listeners, active connects, accept/reject, disconnect, and the event stream.
/// The fd is readable when [`ConnectionManager::poll_event`] may return an event.
pub trait ConnectionManager<F: Fabric>: Send + AsRawFd + AsFd {
    /// Listens on `addr` (port 0: any free port); returns the bound address.
    fn listen(&mut self, addr: SocketAddr, backlog: u32) -> Result<SocketAddr, FabricError>;
    /// Starts an active connect; its QP is built from `init` and comes in the `Established`
    /// event; failure comes as `Rejected` or `ConnectFailed`.
    fn connect(
        &mut self,
        addr: SocketAddr,
        params: ConnectParams,
        init: QpInit<F>,
    ) -> Result<ConnId, FabricError>;
    /// Accepts a request with a QP built from `init`; the QP may be used at once (receives
    /// should be posted before the peer can send). On failure the request comes back.
    fn accept(
        &mut self,
        req: F::Request,
        init: QpInit<F>,
        params: AcceptParams,
    ) -> Result<F::Qp, (FabricError, F::Request)>;
    /// Rejects a request with private data.
    fn reject(&mut self, req: F::Request, private_data: &[u8]) -> Result<(), FabricError>;
    /// Disconnects; both sides then get `Disconnected` and later `TimewaitExit`. Our QP moves
    /// to the error state (outstanding work flushes).
    fn disconnect(&mut self, conn: ConnId) -> Result<(), FabricError>;
    /// Forgets a connection (after `TimewaitExit`, a reject or a failure). Its QP, if still
    /// alive, keeps the underlying id until dropped.
    fn release(&mut self, conn: ConnId);
    /// The next event, without blocking.
    fn poll_event(&mut self) -> Result<Option<CmEvent<F>>, FabricError>;
}
