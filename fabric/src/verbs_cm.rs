//! The verbs backend's RDMA CM half: event channel, listeners, active connects (address and
//! route resolution handled inside), accept/reject with private data, disconnect, and the
//! events with every pointer copied out and acknowledged before they reach the caller.
//!
//! Invariants: each `rdma_cm_id` is owned by one `IdInner` and destroyed in its `Drop`, after
//! its QP; a QP is created on its id (`rdma_create_qp`) and destroyed by the `VerbsQp` that
//! owns it, under the id's lock, which `rdma_disconnect` also takes (both touch `id->qp`);
//! every event is acknowledged right after its data is copied, so `rdma_destroy_id` never
//! waits; an id's `context` holds our connection number (0 for listeners).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use rdma_mummy_sys as sys;

use crate::api::{ConnectionManager, IncomingRequest};
use crate::error::FabricError;
use crate::types::{
    AcceptParams, CmEvent, ConnId, ConnectFailure, ConnectParams, QpInit, RequestInfo,
    MAX_ACCEPT_PRIVATE_DATA, MAX_CONNECT_PRIVATE_DATA, MAX_REJECT_PRIVATE_DATA,
};
use crate::verbs::{nonblocking, os, qp_init_attr, VerbsFabric, VerbsQp};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(crate) struct ChannelInner {
    ch: *mut sys::rdma_event_channel,
}
// SAFETY: the channel is only passed to librdmacm calls, which are thread-safe.
unsafe impl Send for ChannelInner {}
// SAFETY: as for Send.
unsafe impl Sync for ChannelInner {}
impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: every id on the channel holds an Arc to it, so none is left.
        unsafe { sys::rdma_destroy_event_channel(self.ch) };
    }
}

pub(crate) struct IdInner {
    id: *mut sys::rdma_cm_id,
    lock: Mutex<()>,
    _channel: Arc<ChannelInner>,
}
// SAFETY: librdmacm calls on an id are thread-safe; the calls that touch `id->qp`
// (rdma_destroy_qp, rdma_disconnect) are serialized by `lock`.
unsafe impl Send for IdInner {}
// SAFETY: as for Send.
unsafe impl Sync for IdInner {}

impl IdInner {
    pub(crate) fn destroy_qp(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: id is live; under the lock nobody else reads id->qp; rdma_destroy_qp clears it.
        unsafe {
            if !(*self.id).qp.is_null() {
                sys::rdma_destroy_qp(self.id);
            }
        }
    }
    fn disconnect(&self) -> i32 {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: id is live; the lock keeps its QP from being destroyed meanwhile.
        unsafe { sys::rdma_disconnect(self.id) }
    }
}

impl Drop for IdInner {
    fn drop(&mut self) {
        // SAFETY: this is the last reference: any VerbsQp on the id is gone (it holds an Arc),
        // and a QP never handed out is destroyed here first; all events were acknowledged.
        unsafe {
            if !(*self.id).qp.is_null() {
                sys::rdma_destroy_qp(self.id);
            }
            sys::rdma_destroy_id(self.id);
        }
    }
}

/// An incoming connect request. Dropping it unanswered rejects it.
pub struct VerbsRequest {
    id: Option<Arc<IdInner>>,
    conn: u64,
    info: RequestInfo,
}

impl IncomingRequest for VerbsRequest {
    fn info(&self) -> &RequestInfo {
        &self.info
    }
}

impl Drop for VerbsRequest {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // SAFETY: id is live; a null/0 private data reject is valid.
            unsafe { sys::rdma_reject(id.id, std::ptr::null(), 0) };
        }
    }
}

struct Active {
    init: Option<QpInit<VerbsFabric>>,
    params: ConnectParams,
    qp: Option<VerbsQp>,
}

struct Conn {
    id: Arc<IdInner>,
    active: Option<Active>,
}

/// The RDMA CM event channel of one device, with its listeners and connections.
pub struct VerbsCm {
    fabric: VerbsFabric,
    channel: Arc<ChannelInner>,
    next_conn: u64,
    listeners: Vec<Arc<IdInner>>,
    conns: HashMap<u64, Conn>,
}

impl AsRawFd for VerbsCm {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: the channel is live while self is.
        unsafe { (*self.channel.ch).fd }
    }
}

impl std::os::fd::AsFd for VerbsCm {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the event channel's descriptor stays open while `self.channel` lives (it is
        // closed by rdma_destroy_event_channel in its Drop), so for as long as `self` is
        // borrowed.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

fn to_sockaddr(a: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain bytes; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
        }
    }
    ss
}

/// Reads a socket address librdmacm filled in.
///
/// # Safety
/// `sa` must point to a sockaddr of the size its family implies.
unsafe fn from_sockaddr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller guarantees the family's struct is readable at sa.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let sin = &*(sa.cast::<libc::sockaddr_in>());
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let s = &*(sa.cast::<libc::sockaddr_in6>());
                let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// What an event carried, copied before the acknowledgement.
struct Copied {
    kind: u32,
    status: i32,
    id: *mut sys::rdma_cm_id,
    private_data: Vec<u8>,
    responder_resources: u8,
    initiator_depth: u8,
}

impl VerbsCm {
    pub(crate) fn new(fabric: VerbsFabric) -> Result<Self, FabricError> {
        // SAFETY: plain constructor call.
        let ch = unsafe { sys::rdma_create_event_channel() };
        if ch.is_null() {
            return Err(os("rdma_create_event_channel", errno()));
        }
        let channel = Arc::new(ChannelInner { ch });
        // SAFETY: ch is live (owned by channel).
        nonblocking(unsafe { (*ch).fd })?;
        Ok(Self {
            fabric,
            channel,
            next_conn: 1,
            listeners: Vec::new(),
            conns: HashMap::new(),
        })
    }

    fn create_id(&mut self, context: u64) -> Result<Arc<IdInner>, FabricError> {
        let mut id = std::ptr::null_mut();
        // SAFETY: channel is live; id is a valid out-pointer; the context is an integer tag
        // we never dereference.
        let r = unsafe {
            sys::rdma_create_id(
                self.channel.ch,
                &mut id,
                context as usize as *mut libc::c_void,
                sys::rdma_port_space::RDMA_PS_TCP,
            )
        };
        if r != 0 {
            return Err(os("rdma_create_id", errno()));
        }
        Ok(Arc::new(IdInner {
            id,
            lock: Mutex::new(()),
            _channel: Arc::clone(&self.channel),
        }))
    }

    fn conn_of(id: *mut sys::rdma_cm_id) -> u64 {
        // SAFETY: id is a live id named by an event we hold.
        unsafe { (*id).context as usize as u64 }
    }

    /// Creates the QP for `id` from `init`; the id must be on our device.
    fn make_qp(
        &self,
        id: &Arc<IdInner>,
        conn: u64,
        init: &QpInit<VerbsFabric>,
    ) -> Result<VerbsQp, FabricError> {
        // SAFETY: id is live.
        if unsafe { (*id.id).verbs } != self.fabric.ctx.ctx {
            return Err(FabricError::WrongDomain(
                "the connection arrived on another RDMA device",
            ));
        }
        let mut attr = qp_init_attr(init.caps, &init.send_cq, &init.recv_cq, init.srq.as_ref());
        // SAFETY: id, PD and CQs are live (init holds them, and the VerbsQp built below keeps
        // them); attr is a valid in/out struct.
        let r = unsafe { sys::rdma_create_qp(id.id, init.pd.0.pd, &mut attr) };
        if r != 0 {
            return Err(os("rdma_create_qp", errno()));
        }
        let mut caps = init.caps;
        caps.max_inline_data = caps.max_inline_data.min(attr.cap.max_inline_data);
        Ok(VerbsQp {
            // SAFETY: rdma_create_qp succeeded, so id->qp is the new QP.
            qp: unsafe { (*id.id).qp },
            id: Arc::clone(id),
            conn: ConnId(conn),
            caps,
            has_srq: init.srq.is_some(),
            scratch_sges: Vec::with_capacity(16),
            scratch_wrs: Vec::with_capacity(4),
            _keep: (
                init.pd.clone(),
                init.send_cq.clone(),
                init.recv_cq.clone(),
                init.srq.clone(),
            ),
        })
    }

    fn take_event(&mut self) -> Result<Option<Copied>, FabricError> {
        let mut ev: *mut sys::rdma_cm_event = std::ptr::null_mut();
        // SAFETY: the channel fd is non-blocking: -1/EAGAIN when empty; ev is a valid out-ptr.
        let r = unsafe { sys::rdma_get_cm_event(self.channel.ch, &mut ev) };
        if r != 0 {
            let e = errno();
            if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                return Ok(None);
            }
            return Err(os("rdma_get_cm_event", e));
        }
        // SAFETY: ev is a live event until acknowledged below; for connection events the union
        // holds rdma_conn_param, whose private data is valid until the acknowledgement.
        let c = unsafe {
            let e = &*ev;
            let p = &e.param.conn;
            let data = if p.private_data.is_null() || p.private_data_len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    p.private_data.cast::<u8>(),
                    usize::from(p.private_data_len),
                )
                .to_vec()
            };
            Copied {
                kind: e.event,
                status: e.status,
                id: e.id,
                private_data: data,
                responder_resources: p.responder_resources,
                initiator_depth: p.initiator_depth,
            }
        };
        // SAFETY: ev came from rdma_get_cm_event and is acknowledged exactly once; nothing
        // reads it afterwards.
        unsafe { sys::rdma_ack_cm_event(ev) };
        Ok(Some(c))
    }

    fn fail(&mut self, conn: u64, reason: ConnectFailure) -> CmEvent<VerbsFabric> {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.active = None;
        }
        CmEvent::ConnectFailed {
            conn: ConnId(conn),
            reason,
        }
    }

    /// Route resolved: build the QP and send the connect request.
    fn route_resolved(&mut self, conn: u64) -> Option<CmEvent<VerbsFabric>> {
        let (id, init, params) = {
            let c = self.conns.get_mut(&conn)?;
            let a = c.active.as_mut()?;
            (Arc::clone(&c.id), a.init.take()?, a.params.clone())
        };
        let qp = match self.make_qp(&id, conn, &init) {
            Ok(q) => q,
            Err(_) => return Some(self.fail(conn, ConnectFailure::ConnectError)),
        };
        let mut p = sys::rdma_conn_param {
            private_data: params.private_data.as_ptr().cast(),
            private_data_len: params.private_data.len() as u8,
            responder_resources: params.responder_resources,
            initiator_depth: params.initiator_depth,
            flow_control: 1,
            retry_count: params.retry_count.min(7),
            rnr_retry_count: params.rnr_retry_count.min(7),
            srq: 0,
            qp_num: 0,
        };
        // SAFETY: id is live with its QP; p and the private data it points to outlive the call.
        let r = unsafe { sys::rdma_connect(id.id, &mut p) };
        if r != 0 {
            drop(qp);
            return Some(self.fail(conn, ConnectFailure::ConnectError));
        }
        if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.active.as_mut()) {
            a.qp = Some(qp);
        }
        None
    }

    fn handle(&mut self, c: Copied) -> Result<Option<CmEvent<VerbsFabric>>, FabricError> {
        use sys::rdma_cm_event_type as t;
        let conn = Self::conn_of(c.id);
        Ok(match c.kind {
            t::RDMA_CM_EVENT_CONNECT_REQUEST => {
                let n = self.next_conn;
                self.next_conn += 1;
                // SAFETY: c.id is the new id the request created; we own it from here on and
                // tag it with our number.
                unsafe { (*c.id).context = n as usize as *mut libc::c_void };
                // SAFETY: the route's destination address is filled in for a request.
                let remote = unsafe { from_sockaddr(sys::rdma_get_peer_addr(&*c.id)) };
                // SAFETY: as above, the route's source address (ours, with the listener's
                // port) is filled in for a request.
                let local = unsafe { from_sockaddr(sys::rdma_get_local_addr(&*c.id)) };
                let id = Arc::new(IdInner {
                    id: c.id,
                    lock: Mutex::new(()),
                    _channel: Arc::clone(&self.channel),
                });
                Some(CmEvent::ConnectRequest(VerbsRequest {
                    id: Some(id),
                    conn: n,
                    info: RequestInfo {
                        conn: ConnId(n),
                        private_data: c.private_data,
                        responder_resources: c.responder_resources,
                        initiator_depth: c.initiator_depth,
                        remote_addr: remote,
                        local_addr: local,
                    },
                }))
            }
            t::RDMA_CM_EVENT_ADDR_RESOLVED => {
                let timeout = self
                    .conns
                    .get(&conn)
                    .and_then(|x| x.active.as_ref())
                    .map(|a| a.params.resolve_timeout_ms);
                let Some(timeout) = timeout else {
                    return Ok(None);
                };
                // SAFETY: c.id is our live active id.
                let r =
                    unsafe { sys::rdma_resolve_route(c.id, timeout.min(i32::MAX as u32) as i32) };
                if r != 0 {
                    Some(self.fail(conn, ConnectFailure::RouteError))
                } else {
                    None
                }
            }
            t::RDMA_CM_EVENT_ROUTE_RESOLVED => self.route_resolved(conn),
            t::RDMA_CM_EVENT_ADDR_ERROR => Some(self.fail(conn, ConnectFailure::AddressError)),
            t::RDMA_CM_EVENT_ROUTE_ERROR => Some(self.fail(conn, ConnectFailure::RouteError)),
            t::RDMA_CM_EVENT_UNREACHABLE => Some(self.fail(conn, ConnectFailure::Unreachable)),
            t::RDMA_CM_EVENT_CONNECT_ERROR => Some(self.fail(conn, ConnectFailure::ConnectError)),
            t::RDMA_CM_EVENT_REJECTED => {
                if let Some(x) = self.conns.get_mut(&conn) {
                    x.active = None;
                }
                Some(CmEvent::Rejected {
                    conn: ConnId(conn),
                    reason: c.status,
                    private_data: c.private_data,
                })
            }
            t::RDMA_CM_EVENT_ESTABLISHED => {
                let qp = self
                    .conns
                    .get_mut(&conn)
                    .and_then(|x| x.active.as_mut())
                    .and_then(|a| a.qp.take());
                let private_data = if qp.is_some() {
                    c.private_data
                } else {
                    Vec::new()
                };
                Some(CmEvent::Established {
                    conn: ConnId(conn),
                    qp,
                    private_data,
                })
            }
            t::RDMA_CM_EVENT_DISCONNECTED => Some(CmEvent::Disconnected { conn: ConnId(conn) }),
            t::RDMA_CM_EVENT_TIMEWAIT_EXIT => Some(CmEvent::TimewaitExit { conn: ConnId(conn) }),
            t::RDMA_CM_EVENT_DEVICE_REMOVAL => Some(CmEvent::DeviceRemoval {
                conn: (conn != 0).then_some(ConnId(conn)),
            }),
            _ => None,
        })
    }
}

impl ConnectionManager<VerbsFabric> for VerbsCm {
    fn listen(&mut self, addr: SocketAddr, backlog: u32) -> Result<SocketAddr, FabricError> {
        let id = self.create_id(0)?;
        let mut sa = to_sockaddr(addr);
        // SAFETY: id is live; sa is a valid sockaddr for its family.
        if unsafe { sys::rdma_bind_addr(id.id, (&mut sa as *mut libc::sockaddr_storage).cast()) }
            != 0
        {
            let e = errno();
            if e == libc::EADDRINUSE {
                return Err(FabricError::AddressInUse(addr));
            }
            return Err(os("rdma_bind_addr", e));
        }
        // SAFETY: id is live and bound.
        if unsafe { sys::rdma_listen(id.id, backlog.min(i32::MAX as u32) as i32) } != 0 {
            return Err(os("rdma_listen", errno()));
        }
        // SAFETY: id is live and bound, so its route's source address is filled in (the shim
        // does not export rdma_get_src_port, which reads the same field).
        let bound = unsafe { from_sockaddr(sys::rdma_get_local_addr(&*id.id)) };
        let port = bound.map_or(addr.port(), |b| b.port());
        self.listeners.push(id);
        Ok(SocketAddr::new(addr.ip(), port))
    }

    fn connect(
        &mut self,
        addr: SocketAddr,
        params: ConnectParams,
        init: QpInit<VerbsFabric>,
    ) -> Result<ConnId, FabricError> {
        if params.private_data.len() > MAX_CONNECT_PRIVATE_DATA {
            return Err(FabricError::InvalidArgument(format!(
                "{} bytes of connect private data (max {MAX_CONNECT_PRIVATE_DATA})",
                params.private_data.len()
            )));
        }
        let n = self.next_conn;
        self.next_conn += 1;
        let id = self.create_id(n)?;
        let mut dst = to_sockaddr(addr);
        let timeout = params.resolve_timeout_ms.min(i32::MAX as u32) as i32;
        // SAFETY: id is live; dst is a valid sockaddr; no source address.
        let r = unsafe {
            sys::rdma_resolve_addr(
                id.id,
                std::ptr::null_mut(),
                (&mut dst as *mut libc::sockaddr_storage).cast(),
                timeout,
            )
        };
        if r != 0 {
            return Err(os("rdma_resolve_addr", errno()));
        }
        self.conns.insert(
            n,
            Conn {
                id,
                active: Some(Active {
                    init: Some(init),
                    params,
                    qp: None,
                }),
            },
        );
        Ok(ConnId(n))
    }

    fn accept(
        &mut self,
        mut req: VerbsRequest,
        init: QpInit<VerbsFabric>,
        params: AcceptParams,
    ) -> Result<VerbsQp, (FabricError, VerbsRequest)> {
        if params.private_data.len() > MAX_ACCEPT_PRIVATE_DATA {
            let e = FabricError::InvalidArgument(format!(
                "{} bytes of accept private data",
                params.private_data.len()
            ));
            return Err((e, req));
        }
        let Some(id) = req.id.clone() else {
            return Err((
                FabricError::InvalidArgument("request already answered".into()),
                req,
            ));
        };
        let qp = match self.make_qp(&id, req.conn, &init) {
            Ok(q) => q,
            Err(e) => return Err((e, req)),
        };
        let mut p = sys::rdma_conn_param {
            private_data: params.private_data.as_ptr().cast(),
            private_data_len: params.private_data.len() as u8,
            responder_resources: params.responder_resources,
            initiator_depth: params.initiator_depth,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: params.rnr_retry_count.min(7),
            srq: u8::from(init.srq.is_some()),
            qp_num: 0,
        };
        // SAFETY: id is live with its QP; p and its private data outlive the call.
        let r = unsafe { sys::rdma_accept(id.id, &mut p) };
        if r != 0 {
            let e = os("rdma_accept", errno());
            drop(qp);
            return Err((e, req));
        }
        req.id = None;
        self.conns.insert(req.conn, Conn { id, active: None });
        Ok(qp)
    }

    fn reject(&mut self, mut req: VerbsRequest, private_data: &[u8]) -> Result<(), FabricError> {
        if private_data.len() > MAX_REJECT_PRIVATE_DATA {
            return Err(FabricError::InvalidArgument(format!(
                "{} bytes of reject private data",
                private_data.len()
            )));
        }
        let Some(id) = req.id.take() else {
            return Ok(());
        };
        // SAFETY: id is live; the private data outlives the call.
        let r = unsafe {
            sys::rdma_reject(
                id.id,
                private_data.as_ptr().cast(),
                private_data.len() as u8,
            )
        };
        if r != 0 {
            return Err(os("rdma_reject", errno()));
        }
        Ok(())
    }

    fn disconnect(&mut self, conn: ConnId) -> Result<(), FabricError> {
        let c = self
            .conns
            .get(&conn.0)
            .ok_or(FabricError::UnknownConnection(conn.0))?;
        if c.id.disconnect() != 0 {
            return Err(os("rdma_disconnect", errno()));
        }
        Ok(())
    }

    fn release(&mut self, conn: ConnId) {
        self.conns.remove(&conn.0);
    }

    fn poll_event(&mut self) -> Result<Option<CmEvent<VerbsFabric>>, FabricError> {
        while let Some(c) = self.take_event()? {
            if let Some(ev) = self.handle(c)? {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for a in ["10.0.2.15:4420", "[fe80::1]:4420", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            let ss = to_sockaddr(a);
            // SAFETY: ss was filled for a's family just above.
            let back = unsafe { from_sockaddr((&ss as *const libc::sockaddr_storage).cast()) };
            assert_eq!(back, Some(a));
        }
    }
}
