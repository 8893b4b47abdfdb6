//! The in-memory fabric: the [`crate::Fabric`] API with RC semantics and no hardware, for
//! `cargo test` on any machine. Several devices on one [`MemNetwork`] reach each other by
//! socket address, like hosts on one RoCE subnet.
//!
//! The execution model (when work runs, what each error does) is documented in `world.rs`
//! and summarised here: work executes synchronously in the post call that makes it possible,
//! so a test that posts on one side and polls the other needs no waiting; notification fds
//! (CQ arm, CM events) are real sockets, readable exactly when the verbs equivalents would be.
//!
//! Invariants: every handle holds the network `Arc`; a resource's state is removed from the
//! world when its last handle drops; completions and events are never produced by polling.

mod world;

use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};

use world::{conn_id, request_data, CqState, MrEntry, RawEvent, SrqState, World};

use crate::api::{
    CompletionQueue, ConnectionManager, Fabric, IncomingRequest, MemoryRegion, QueuePair,
    SharedReceiveQueue,
};
use crate::error::{FabricError, OsErrno, PostError};
use crate::sys_mem::RegionMemory;
use crate::types::{
    AcceptParams, Access, Capabilities, CmEvent, Completion, ConnId, ConnectParams, DeviceAttrs,
    QpInit, QpNum, RecvWr, RequestInfo, SendWr, MAX_ACCEPT_PRIVATE_DATA, MAX_CONNECT_PRIVATE_DATA,
    MAX_REJECT_PRIVATE_DATA, REJECT_REASON_CONSUMER,
};

type Shared = Arc<Mutex<World>>;

fn lock(w: &Shared) -> MutexGuard<'_, World> {
    // A panic while holding the lock leaves the world as consistent as the panicking step did;
    // tests that panic are failing anyway, so keep going rather than cascading.
    w.lock().unwrap_or_else(|e| e.into_inner())
}

fn notifier() -> Result<(UnixStream, UnixStream), FabricError> {
    let os = |e: std::io::Error| FabricError::Os {
        call: "socketpair",
        source_errno: OsErrno(e.raw_os_error().unwrap_or(0)),
    };
    let (a, b) = UnixStream::pair().map_err(os)?;
    a.set_nonblocking(true).map_err(os)?;
    b.set_nonblocking(true).map_err(os)?;
    Ok((a, b))
}

fn drain(rx: &mut UnixStream) -> u32 {
    let mut n = 0u32;
    let mut buf = [0u8; 64];
    while let Ok(k) = rx.read(&mut buf) {
        if k == 0 {
            break;
        }
        n += k as u32;
    }
    n
}

/// One in-memory network: devices made from it reach each other.
#[derive(Clone)]
pub struct MemNetwork {
    world: Shared,
}

impl Default for MemNetwork {
    fn default() -> Self {
        Self::new()
    }
}

impl MemNetwork {
    /// An empty network.
    pub fn new() -> Self {
        Self {
            world: Arc::new(Mutex::new(World::new())),
        }
    }

    /// A device on this network with generous, rxe-like limits.
    pub fn device(&self, name: &str) -> MemFabric {
        let id = lock(&self.world).id();
        MemFabric {
            world: Arc::clone(&self.world),
            device: id,
            attrs: DeviceAttrs {
                name: name.to_string(),
                max_qp_wr: 16_384,
                max_sge: 32,
                max_qp_rd_atom: 128,
                max_qp_init_rd_atom: 128,
                max_srq_wr: 16_384,
                max_cqe: 65_536,
                max_mr_size: u64::MAX,
                completion_timestamps: false,
                hca_core_clock_khz: 0,
            },
        }
    }
}

/// An in-memory device.
#[derive(Clone)]
pub struct MemFabric {
    world: Shared,
    device: u64,
    attrs: DeviceAttrs,
}

struct Key {
    world: Shared,
    id: u64,
    kind: KeyKind,
}

enum KeyKind {
    Pd,
    Cq,
    Srq,
}

impl Drop for Key {
    fn drop(&mut self) {
        let mut w = lock(&self.world);
        match self.kind {
            KeyKind::Pd => {
                w.pds.remove(&self.id);
            }
            KeyKind::Cq => {
                w.cqs.remove(&self.id);
            }
            KeyKind::Srq => {
                w.srqs.remove(&self.id);
            }
        }
    }
}

/// Protection domain.
#[derive(Clone)]
pub struct MemPd(Arc<Key>);

/// Registered region.
pub struct MemMr {
    world: Shared,
    _pd: MemPd,
    key: u32,
    addr: u64,
    len: u64,
    memory: Arc<dyn RegionMemory>,
}

impl Drop for MemMr {
    fn drop(&mut self) {
        lock(&self.world).mrs.remove(&self.key);
    }
}

impl MemoryRegion for MemMr {
    fn addr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn memory(&self) -> &Arc<dyn RegionMemory> {
        &self.memory
    }
}

/// Completion queue.
pub struct MemCq {
    handle: MemCqHandle,
    rx: UnixStream,
}

/// What a QP keeps of its CQ.
#[derive(Clone)]
pub struct MemCqHandle(Arc<Key>);

impl AsRawFd for MemCq {
    fn as_raw_fd(&self) -> RawFd {
        self.rx.as_raw_fd()
    }
}

impl std::os::fd::AsFd for MemCq {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

impl CompletionQueue for MemCq {
    type Handle = MemCqHandle;
    fn handle(&self) -> MemCqHandle {
        self.handle.clone()
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, FabricError> {
        let key = &self.handle.0;
        let mut w = lock(&key.world);
        let Some(cq) = w.cqs.get_mut(&key.id) else {
            return Ok(0);
        };
        if cq.overflow {
            return Err(FabricError::CqOverflow);
        }
        let n = cq.entries.len().min(max);
        out.extend(cq.entries.drain(..n));
        Ok(n)
    }
    fn arm(&mut self) -> Result<(), FabricError> {
        let key = &self.handle.0;
        if let Some(cq) = lock(&key.world).cqs.get_mut(&key.id) {
            cq.armed = true;
        }
        Ok(())
    }
    fn ack_events(&mut self) -> Result<u32, FabricError> {
        Ok(drain(&mut self.rx))
    }
}

/// Shared receive queue.
pub struct MemSrq {
    handle: MemSrqHandle,
}

/// What a QP keeps of its SRQ.
#[derive(Clone)]
pub struct MemSrqHandle(Arc<Key>);

impl SharedReceiveQueue for MemSrq {
    type Handle = MemSrqHandle;
    fn handle(&self) -> MemSrqHandle {
        self.handle.clone()
    }
    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let key = &self.handle.0;
        lock(&key.world).post_srq_recv(key.id, wrs)
    }
}

/// Connected RC queue pair.
pub struct MemQp {
    world: Shared,
    qpn: u32,
    conn: ConnId,
    _init: QpInit<MemFabric>,
}

impl Drop for MemQp {
    fn drop(&mut self) {
        lock(&self.world).destroy_qp(self.qpn);
    }
}

impl QueuePair for MemQp {
    fn qp_num(&self) -> QpNum {
        QpNum(self.qpn)
    }
    fn conn(&self) -> ConnId {
        self.conn
    }
    fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        lock(&self.world).post_send(self.qpn, wrs)
    }
    fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        lock(&self.world).post_recv(self.qpn, wrs)
    }
    fn set_error(&mut self) -> Result<(), FabricError> {
        lock(&self.world).set_error(self.qpn);
        Ok(())
    }
}

/// An incoming connect request. Dropping it unanswered rejects it.
pub struct MemRequest {
    world: Shared,
    conn: u64,
    info: RequestInfo,
    answered: bool,
}

impl IncomingRequest for MemRequest {
    fn info(&self) -> &RequestInfo {
        &self.info
    }
}

impl Drop for MemRequest {
    fn drop(&mut self) {
        if !self.answered {
            lock(&self.world).reject(self.conn, &[], REJECT_REASON_CONSUMER);
        }
    }
}

/// Connection manager (event channel).
pub struct MemCm {
    world: Shared,
    channel: u64,
    rx: UnixStream,
    fabric: MemFabric,
    /// Active-side QPs waiting for `Established`.
    pending_qps: Vec<(u64, MemQp)>,
}

impl AsRawFd for MemCm {
    fn as_raw_fd(&self) -> RawFd {
        self.rx.as_raw_fd()
    }
}

impl std::os::fd::AsFd for MemCm {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

impl Drop for MemCm {
    fn drop(&mut self) {
        // Pending QPs drop after the lock is released (their Drop locks the world).
        let qps = std::mem::take(&mut self.pending_qps);
        lock(&self.world).drop_channel(self.channel);
        drop(qps);
    }
}

impl MemFabric {
    fn check_pd(&self, pd: &MemPd) -> Result<(), FabricError> {
        if !Arc::ptr_eq(&pd.0.world, &self.world) {
            return Err(FabricError::WrongDomain(
                "protection domain of another network",
            ));
        }
        Ok(())
    }

    fn build_qp(&self, init: &QpInit<MemFabric>, conn: u64) -> Result<MemQp, FabricError> {
        self.check_pd(&init.pd)?;
        let c = init.caps;
        let a = &self.attrs;
        if c.max_send_wr > a.max_qp_wr
            || c.max_recv_wr > a.max_qp_wr
            || c.max_send_sge > a.max_sge
            || c.max_recv_sge > a.max_sge
            || c.max_inline_data > 256
            || c.max_send_wr == 0
        {
            return Err(FabricError::InvalidArgument(format!(
                "QP caps {c:?} exceed the device's"
            )));
        }
        let qpn = lock(&self.world).create_qp(
            init.pd.0.id,
            init.send_cq.0.id,
            init.recv_cq.0.id,
            init.srq.as_ref().map(|s| s.0.id),
            c,
        )?;
        Ok(MemQp {
            world: Arc::clone(&self.world),
            qpn,
            conn: conn_id(conn),
            _init: init.clone(),
        })
    }
}

impl Fabric for MemFabric {
    type Pd = MemPd;
    type Mr = MemMr;
    type Cq = MemCq;
    type CqHandle = MemCqHandle;
    type Srq = MemSrq;
    type SrqHandle = MemSrqHandle;
    type Qp = MemQp;
    type Request = MemRequest;
    type Cm = MemCm;

    fn attrs(&self) -> &DeviceAttrs {
        &self.attrs
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            invalidate_registered_regions: true,
        }
    }
    fn alloc_pd(&self) -> Result<MemPd, FabricError> {
        let mut w = lock(&self.world);
        let id = w.id();
        w.pds.insert(id, self.device);
        Ok(MemPd(Arc::new(Key {
            world: Arc::clone(&self.world),
            id,
            kind: KeyKind::Pd,
        })))
    }
    fn register(
        &self,
        pd: &MemPd,
        memory: Arc<dyn RegionMemory>,
        access: Access,
    ) -> Result<MemMr, FabricError> {
        self.check_pd(pd)?;
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(FabricError::InvalidArgument(
                "REMOTE_WRITE requires LOCAL_WRITE".into(),
            ));
        }
        let addr = memory.base().as_ptr() as u64;
        let len = memory.len() as u64;
        let mut w = lock(&self.world);
        let key = w.key();
        w.mrs.insert(
            key,
            MrEntry {
                pd: pd.0.id,
                mem: Arc::clone(&memory),
                addr,
                len,
                access,
                valid: true,
            },
        );
        Ok(MemMr {
            world: Arc::clone(&self.world),
            _pd: pd.clone(),
            key,
            addr,
            len,
            memory,
        })
    }
    fn create_cq(&self, depth: u32) -> Result<MemCq, FabricError> {
        if depth == 0 || depth > self.attrs.max_cqe {
            return Err(FabricError::InvalidArgument(format!("CQ depth {depth}")));
        }
        let (rx, tx) = notifier()?;
        let mut w = lock(&self.world);
        let id = w.id();
        w.cqs.insert(
            id,
            CqState {
                device: self.device,
                entries: Default::default(),
                depth,
                overflow: false,
                armed: false,
                notify: tx,
            },
        );
        Ok(MemCq {
            handle: MemCqHandle(Arc::new(Key {
                world: Arc::clone(&self.world),
                id,
                kind: KeyKind::Cq,
            })),
            rx,
        })
    }
    fn create_srq(&self, pd: &MemPd, max_wr: u32, max_sge: u32) -> Result<MemSrq, FabricError> {
        self.check_pd(pd)?;
        if max_wr == 0 || max_wr > self.attrs.max_srq_wr || max_sge > self.attrs.max_sge {
            return Err(FabricError::InvalidArgument(format!(
                "SRQ of {max_wr} x {max_sge}"
            )));
        }
        let mut w = lock(&self.world);
        let id = w.id();
        w.srqs.insert(
            id,
            SrqState {
                pd: pd.0.id,
                recvs: Default::default(),
                max_wr,
                max_sge,
            },
        );
        Ok(MemSrq {
            handle: MemSrqHandle(Arc::new(Key {
                world: Arc::clone(&self.world),
                id,
                kind: KeyKind::Srq,
            })),
        })
    }
    fn create_cm(&self) -> Result<MemCm, FabricError> {
        let (rx, tx) = notifier()?;
        let channel = lock(&self.world).new_channel(tx);
        Ok(MemCm {
            world: Arc::clone(&self.world),
            channel,
            rx,
            fabric: self.clone(),
            pending_qps: Vec::new(),
        })
    }
}

/// Source address a mem connection appears to come from.
const PEER_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

impl ConnectionManager<MemFabric> for MemCm {
    fn listen(&mut self, addr: SocketAddr, _backlog: u32) -> Result<SocketAddr, FabricError> {
        lock(&self.world).listen(self.channel, addr)
    }

    fn connect(
        &mut self,
        addr: SocketAddr,
        params: ConnectParams,
        init: QpInit<MemFabric>,
    ) -> Result<ConnId, FabricError> {
        if params.private_data.len() > MAX_CONNECT_PRIVATE_DATA {
            return Err(FabricError::InvalidArgument(format!(
                "{} bytes of connect private data (max {MAX_CONNECT_PRIVATE_DATA})",
                params.private_data.len()
            )));
        }
        let qp = self.fabric.build_qp(&init, 0)?;
        let request = (
            params.private_data.clone(),
            params.responder_resources,
            params.initiator_depth,
        );
        let (a, _) = lock(&self.world).connect(
            self.channel,
            addr,
            qp.qpn,
            params.rnr_retry_count.min(7),
            request,
        );
        let mut qp = qp;
        qp.conn = conn_id(a);
        self.pending_qps.push((a, qp));
        Ok(conn_id(a))
    }

    fn accept(
        &mut self,
        mut req: MemRequest,
        init: QpInit<MemFabric>,
        params: AcceptParams,
    ) -> Result<MemQp, (FabricError, MemRequest)> {
        if params.private_data.len() > MAX_ACCEPT_PRIVATE_DATA {
            let e = FabricError::InvalidArgument(format!(
                "{} bytes of accept private data",
                params.private_data.len()
            ));
            return Err((e, req));
        }
        let qp = match self.fabric.build_qp(&init, req.conn) {
            Ok(q) => q,
            Err(e) => return Err((e, req)),
        };
        let r = lock(&self.world).accept(
            req.conn,
            qp.qpn,
            &params.private_data,
            params.rnr_retry_count.min(7),
        );
        match r {
            Ok(()) => {
                req.answered = true;
                Ok(qp)
            }
            Err(e) => {
                drop(qp);
                Err((e, req))
            }
        }
    }

    fn reject(&mut self, mut req: MemRequest, private_data: &[u8]) -> Result<(), FabricError> {
        if private_data.len() > MAX_REJECT_PRIVATE_DATA {
            return Err(FabricError::InvalidArgument(format!(
                "{} bytes of reject private data",
                private_data.len()
            )));
        }
        req.answered = true;
        lock(&self.world).reject(req.conn, private_data, REJECT_REASON_CONSUMER);
        Ok(())
    }

    fn disconnect(&mut self, conn: ConnId) -> Result<(), FabricError> {
        lock(&self.world).disconnect(conn.0)
    }

    fn release(&mut self, conn: ConnId) {
        let qps: Vec<(u64, MemQp)> = {
            let (keep, gone) = std::mem::take(&mut self.pending_qps)
                .into_iter()
                .partition(|(c, _)| *c != conn.0);
            self.pending_qps = keep;
            gone
        };
        lock(&self.world).release(conn.0);
        drop(qps);
    }

    fn poll_event(&mut self) -> Result<Option<CmEvent<MemFabric>>, FabricError> {
        let ev = {
            let mut w = lock(&self.world);
            let ev = w
                .channels
                .get_mut(&self.channel)
                .and_then(|c| c.events.pop_front());
            if w.channels
                .get(&self.channel)
                .is_some_and(|c| c.events.is_empty())
            {
                drain(&mut self.rx);
            }
            ev
        };
        let Some(ev) = ev else { return Ok(None) };
        Ok(Some(match ev {
            RawEvent::Request(b) => {
                let (data, responder_resources, initiator_depth, local) = {
                    let mut w = lock(&self.world);
                    let (d, r, i) = w.take_request(b).unwrap_or_default();
                    (d, r, i, w.local_addr(b))
                };
                CmEvent::ConnectRequest(MemRequest {
                    world: Arc::clone(&self.world),
                    conn: b,
                    info: RequestInfo {
                        conn: conn_id(b),
                        private_data: request_data(&data),
                        // Seen from the listener: the CM swaps the two.
                        responder_resources: initiator_depth,
                        initiator_depth: responder_resources,
                        remote_addr: Some(PEER_ADDR),
                        local_addr: local,
                    },
                    answered: false,
                })
            }
            RawEvent::Established { conn, private_data } => {
                let qp = self
                    .pending_qps
                    .iter()
                    .position(|(c, _)| *c == conn)
                    .map(|i| self.pending_qps.swap_remove(i).1);
                CmEvent::Established {
                    conn: conn_id(conn),
                    qp,
                    private_data,
                }
            }
            RawEvent::Rejected {
                conn,
                reason,
                private_data,
            } => {
                let qps: Vec<(u64, MemQp)> = {
                    let (keep, gone) = std::mem::take(&mut self.pending_qps)
                        .into_iter()
                        .partition(|(c, _)| *c != conn);
                    self.pending_qps = keep;
                    gone
                };
                drop(qps);
                CmEvent::Rejected {
                    conn: conn_id(conn),
                    reason,
                    private_data,
                }
            }
            RawEvent::Disconnected(c) => CmEvent::Disconnected { conn: conn_id(c) },
            RawEvent::TimewaitExit(c) => CmEvent::TimewaitExit { conn: conn_id(c) },
        }))
    }
}
