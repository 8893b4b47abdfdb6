//! The verbs backend: safe owners over libibverbs (this file) and librdmacm (`verbs_cm.rs`),
//! through `rdma-mummy-sys`.
//!
//! Why `rdma-mummy-sys` and not `rdma-sys`: it has the same API but links a small static shim
//! that `dlopen`s `libibverbs.so.1` / `librdmacm.so.1` at run time, so `raidline` starts on a
//! host without rdma-core and reports [`FabricError::LibraryMissing`] instead of failing in the
//! dynamic loader. (Building it needs cmake and libclang; `deploy/setup.sh`.)
//!
//! Ownership (every owner frees its resource in `Drop`, after everything built on it):
//! `Ctx` (the device list from `rdma_get_devices` and the chosen context) ← PD ← {MR, SRQ};
//! `Ctx` ← CQ (with its completion channel); QP → {RDMA CM id, PD, CQs, SRQ}. Each holds an
//! `Arc` to what it was built from, so drop order cannot free a resource still in use, and
//! an MR holds the memory it covers, so the device never writes freed memory.
//!
//! Invariants of the unsafe code: every raw pointer stored here came from a successful create
//! call and is destroyed exactly once, in the owner's `Drop`; work-request structures handed to
//! `ibv_post_*` live on the caller's stack or in the QP's scratch buffers for the duration of
//! the call (the provider copies them, and inline data, before returning).
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use rdma_mummy_sys as sys;

use crate::api::{CompletionQueue, Fabric, MemoryRegion, QueuePair, SharedReceiveQueue};
use crate::error::{FabricError, OsErrno, PostError};
use crate::sys_mem::RegionMemory;
use crate::types::{
    Access, Capabilities, Completion, ConnId, DeviceAttrs, Payload, QpCaps, QpNum, RecvWr, SendOp,
    SendWr, WcOpcode, WcStatus, WrId,
};

pub use crate::verbs_cm::{VerbsCm, VerbsRequest};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(crate) fn os(call: &'static str, e: i32) -> FabricError {
    FabricError::Os {
        call,
        source_errno: OsErrno(e),
    }
}

/// What a failed device enumeration means. `rdma-mummy-sys` answers `EOPNOTSUPP` when the
/// library could not be loaded; rdma-core answers `ENOSYS` when the kernel has no uverbs and
/// `ENODEV` when there is no device.
pub fn classify_open_failure(library: &'static str, errno: i32) -> FabricError {
    match errno {
        libc::EOPNOTSUPP => FabricError::LibraryMissing(library),
        libc::ENOSYS => FabricError::NoKernelSupport,
        libc::ENODEV | libc::ENOENT => FabricError::NoDevice(None),
        e => os(
            if library.starts_with("librdmacm") {
                "rdma_get_devices"
            } else {
                "ibv_get_device_list"
            },
            e,
        ),
    }
}

/// The device list librdmacm uses (its contexts are the ones CM ids report), and our device.
pub(crate) struct Ctx {
    list: *mut *mut sys::ibv_context,
    pub(crate) ctx: *mut sys::ibv_context,
}

// SAFETY: the context pointer is only used through libibverbs calls, which are thread-safe;
// the list is freed once, in Drop.
unsafe impl Send for Ctx {}
// SAFETY: as for Send; no field is mutated after construction.
unsafe impl Sync for Ctx {}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: `list` came from rdma_get_devices and is freed only here; every resource built
        // on `ctx` holds an Arc<Ctx> and is therefore already destroyed.
        unsafe { sys::rdma_free_devices(self.list) }
    }
}

/// An RDMA device opened through librdmacm.
#[derive(Clone)]
pub struct VerbsFabric {
    pub(crate) ctx: Arc<Ctx>,
    attrs: Arc<DeviceAttrs>,
}

fn device_name(ctx: *mut sys::ibv_context) -> String {
    // SAFETY: ctx is a live context from rdma_get_devices; ibv_get_device_name returns a
    // NUL-terminated string owned by the device, valid while the list is.
    unsafe {
        let p = sys::ibv_get_device_name((*ctx).device);
        if p.is_null() {
            return String::new();
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

impl VerbsFabric {
    /// Opens the device named `name` (any device with `None`). Fails with
    /// [`FabricError::LibraryMissing`], [`FabricError::NoKernelSupport`] or
    /// [`FabricError::NoDevice`] on hosts without RDMA.
    pub fn open(name: Option<&str>) -> Result<Self, FabricError> {
        // Probe libibverbs first: it tells the missing library and the missing kernel apart.
        let mut n: libc::c_int = 0;
        // SAFETY: n is a valid out-pointer; the returned list is freed right below.
        let vlist = unsafe { sys::ibv_get_device_list(&mut n) };
        if vlist.is_null() {
            return Err(classify_open_failure("libibverbs.so.1", errno()));
        }
        // SAFETY: vlist came from ibv_get_device_list and is not used after this.
        unsafe { sys::ibv_free_device_list(vlist) };
        if n == 0 {
            return Err(FabricError::NoDevice(None));
        }
        let mut n: libc::c_int = 0;
        // SAFETY: n is a valid out-pointer; the list is owned by Ctx from here on.
        let list = unsafe { sys::rdma_get_devices(&mut n) };
        if list.is_null() {
            return Err(classify_open_failure("librdmacm.so.1", errno()));
        }
        let mut chosen = std::ptr::null_mut();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: list holds n valid context pointers.
            let c = unsafe { *list.add(i) };
            if c.is_null() {
                continue;
            }
            if name.map_or(true, |want| device_name(c) == want) {
                chosen = c;
                break;
            }
        }
        let ctx = Arc::new(Ctx { list, ctx: chosen });
        if chosen.is_null() {
            return Err(FabricError::NoDevice(name.map(str::to_string)));
        }
        let attrs = query_attrs(chosen)?;
        Ok(Self {
            ctx,
            attrs: Arc::new(attrs),
        })
    }
}

fn query_attrs(ctx: *mut sys::ibv_context) -> Result<DeviceAttrs, FabricError> {
    // SAFETY: ibv_device_attr_ex is a plain C struct of integers; all-zero is valid, and it is
    // what rdma-core expects as input (comp_mask 0).
    let mut a: sys::ibv_device_attr_ex = unsafe { std::mem::zeroed() };
    // SAFETY: ctx is live; a is a valid out-struct of the size the call is told.
    let r = unsafe { sys::ibv_query_device_ex(ctx, std::ptr::null(), &mut a) };
    if r != 0 {
        return Err(os("ibv_query_device_ex", r));
    }
    let o = &a.orig_attr;
    let u = |v: libc::c_int| u32::try_from(v).unwrap_or(0);
    Ok(DeviceAttrs {
        name: device_name(ctx),
        max_qp_wr: u(o.max_qp_wr),
        max_sge: u(o.max_sge),
        max_qp_rd_atom: u(o.max_qp_rd_atom),
        max_qp_init_rd_atom: u(o.max_qp_init_rd_atom),
        max_srq_wr: u(o.max_srq_wr),
        max_cqe: u(o.max_cqe),
        max_mr_size: o.max_mr_size,
        completion_timestamps: a.completion_timestamp_mask != 0,
        hca_core_clock_khz: a.hca_core_clock,
    })
}

pub(crate) struct PdInner {
    pub(crate) pd: *mut sys::ibv_pd,
    _ctx: Arc<Ctx>,
}
// SAFETY: a PD is only passed to libibverbs calls, which are thread-safe.
unsafe impl Send for PdInner {}
// SAFETY: as for Send; the pointer is never mutated.
unsafe impl Sync for PdInner {}
impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: every MR, SRQ and QP on this PD holds an Arc to it, so none is left.
        unsafe { sys::ibv_dealloc_pd(self.pd) };
    }
}

/// Protection domain.
#[derive(Clone)]
pub struct VerbsPd(pub(crate) Arc<PdInner>);

/// Registered memory region.
pub struct VerbsMr {
    mr: *mut sys::ibv_mr,
    _pd: VerbsPd,
    memory: Arc<dyn RegionMemory>,
    addr: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
}
// SAFETY: the MR pointer is only handed to ibv_dereg_mr in Drop; keys are plain values.
unsafe impl Send for VerbsMr {}
// SAFETY: as for Send.
unsafe impl Sync for VerbsMr {}
impl Drop for VerbsMr {
    fn drop(&mut self) {
        // SAFETY: mr came from ibv_reg_mr and is deregistered once; `memory` is dropped after
        // this, so the pages stay mapped until the device can no longer reach them.
        unsafe { sys::ibv_dereg_mr(self.mr) };
    }
}

impl MemoryRegion for VerbsMr {
    fn addr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.lkey
    }
    fn rkey(&self) -> u32 {
        self.rkey
    }
    fn memory(&self) -> &Arc<dyn RegionMemory> {
        &self.memory
    }
}

pub(crate) struct CqInner {
    pub(crate) cq: *mut sys::ibv_cq,
    channel: *mut sys::ibv_comp_channel,
    _ctx: Arc<Ctx>,
}
// SAFETY: the CQ is polled only by the VerbsCq owner (&mut); QPs only pass the pointer to
// rdma_create_qp. libibverbs allows both from any thread.
unsafe impl Send for CqInner {}
// SAFETY: as for Send.
unsafe impl Sync for CqInner {}
impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Arc to it, so none is left; all CQ events were
        // acknowledged in ack_events (the only place they are taken).
        unsafe {
            sys::ibv_destroy_cq(self.cq);
            sys::ibv_destroy_comp_channel(self.channel);
        }
    }
}

/// What a QP keeps of its CQ.
#[derive(Clone)]
pub struct VerbsCqHandle(pub(crate) Arc<CqInner>);

/// Completion queue with a non-blocking completion channel.
pub struct VerbsCq {
    inner: Arc<CqInner>,
    wc: Vec<sys::ibv_wc>,
}
// SAFETY: `wc` is scratch space written by ibv_poll_cq during a &mut call only.
unsafe impl Send for VerbsCq {}

impl AsRawFd for VerbsCq {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: channel is live for as long as inner is.
        unsafe { (*self.inner.channel).fd }
    }
}

impl std::os::fd::AsFd for VerbsCq {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the completion channel's descriptor stays open while `inner` lives (it is
        // closed by ibv_destroy_comp_channel in inner's Drop), so for as long as `self` is
        // borrowed.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

fn set_nonblocking(fd: RawFd) -> Result<(), FabricError> {
    // SAFETY: fcntl on an fd we own (a completion or CM channel); no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(os("fcntl", errno()));
    }
    Ok(())
}

fn status(s: u32) -> WcStatus {
    use sys::ibv_wc_status as w;
    match s {
        w::IBV_WC_SUCCESS => WcStatus::Success,
        w::IBV_WC_LOC_LEN_ERR => WcStatus::LocalLengthError,
        w::IBV_WC_LOC_QP_OP_ERR => WcStatus::LocalQpOperationError,
        w::IBV_WC_LOC_PROT_ERR => WcStatus::LocalProtectionError,
        w::IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushError,
        w::IBV_WC_REM_INV_REQ_ERR => WcStatus::RemoteInvalidRequest,
        w::IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccessError,
        w::IBV_WC_REM_OP_ERR => WcStatus::RemoteOperationError,
        w::IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
        w::IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
        other => WcStatus::Other(other),
    }
}

fn opcode(o: u32) -> WcOpcode {
    use sys::ibv_wc_opcode as w;
    match o {
        w::IBV_WC_SEND => WcOpcode::Send,
        w::IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        w::IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
        w::IBV_WC_RECV => WcOpcode::Recv,
        other => WcOpcode::Other(other),
    }
}

fn completion(wc: &sys::ibv_wc) -> Completion {
    let st = status(wc.status);
    let ok = st == WcStatus::Success;
    let op = ok.then(|| opcode(wc.opcode));
    let inv = if ok && wc.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_INV.0 != 0 {
        // SAFETY: IBV_WC_WITH_INV says the union holds the invalidated rkey.
        Some(unsafe { wc.imm_data_invalidated_rkey_union.invalidated_rkey })
    } else {
        None
    };
    let byte_len = match op {
        Some(WcOpcode::Recv) | Some(WcOpcode::RdmaRead) => wc.byte_len,
        _ => 0,
    };
    Completion {
        wr_id: WrId(wc.wr_id),
        status: st,
        opcode: op,
        byte_len,
        qp_num: QpNum(wc.qp_num),
        invalidated_rkey: inv,
    }
}

impl CompletionQueue for VerbsCq {
    type Handle = VerbsCqHandle;
    fn handle(&self) -> VerbsCqHandle {
        VerbsCqHandle(Arc::clone(&self.inner))
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, FabricError> {
        let n = max.min(self.wc.capacity()).min(i32::MAX as usize);
        // SAFETY: wc has capacity for n entries; ibv_poll_cq writes at most n and returns how
        // many; set_len only covers those.
        let got = unsafe {
            let r = sys::ibv_poll_cq(self.inner.cq, n as i32, self.wc.as_mut_ptr());
            if r < 0 {
                return Err(os("ibv_poll_cq", -r));
            }
            self.wc.set_len(r as usize);
            r as usize
        };
        out.extend(self.wc.iter().map(completion));
        self.wc.clear();
        Ok(got)
    }
    fn arm(&mut self) -> Result<(), FabricError> {
        // SAFETY: cq is live; solicited_only = 0 asks for any completion.
        let r = unsafe { sys::ibv_req_notify_cq(self.inner.cq, 0) };
        if r != 0 {
            return Err(os("ibv_req_notify_cq", r));
        }
        Ok(())
    }
    fn ack_events(&mut self) -> Result<u32, FabricError> {
        let mut n = 0u32;
        loop {
            let mut cq = std::ptr::null_mut();
            let mut ctx = std::ptr::null_mut();
            // SAFETY: the channel's fd is non-blocking, so this returns -1/EAGAIN when empty;
            // out-pointers are valid locals.
            let r = unsafe { sys::ibv_get_cq_event(self.inner.channel, &mut cq, &mut ctx) };
            if r != 0 {
                let e = errno();
                if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                    break;
                }
                return Err(os("ibv_get_cq_event", e));
            }
            n += 1;
        }
        if n > 0 {
            // SAFETY: acknowledges exactly the n events taken above, all for this CQ (the
            // channel serves one CQ).
            unsafe { sys::ibv_ack_cq_events(self.inner.cq, n) };
        }
        Ok(n)
    }
}

pub(crate) struct SrqInner {
    pub(crate) srq: *mut sys::ibv_srq,
    _pd: VerbsPd,
}
// SAFETY: ibv_post_srq_recv is thread-safe in rdma-core providers; the pointer is not mutated.
unsafe impl Send for SrqInner {}
// SAFETY: as for Send.
unsafe impl Sync for SrqInner {}
impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: QPs using the SRQ hold an Arc to it, so none is left.
        unsafe { sys::ibv_destroy_srq(self.srq) };
    }
}

/// What a QP keeps of its SRQ.
#[derive(Clone)]
pub struct VerbsSrqHandle(pub(crate) Arc<SrqInner>);

/// Shared receive queue.
pub struct VerbsSrq {
    inner: Arc<SrqInner>,
    max_sge: u32,
}

/// Builds a linked receive chain over `wrs` in `sges`/`out` (scratch owned by the caller) and
/// posts it with `post`.
fn post_recv_chain(
    wrs: &[RecvWr<'_>],
    max_sge: u32,
    post: impl FnOnce(*mut sys::ibv_recv_wr, *mut *mut sys::ibv_recv_wr) -> i32,
) -> Result<(), PostError> {
    if wrs.is_empty() {
        return Ok(());
    }
    if let Some(w) = wrs.iter().find(|w| w.sges.len() > max_sge as usize) {
        return Err(PostError::nothing_posted(FabricError::InvalidArgument(
            format!("{} SGEs > max {max_sge}", w.sges.len()),
        )));
    }
    let mut sges: Vec<sys::ibv_sge> = Vec::with_capacity(wrs.iter().map(|w| w.sges.len()).sum());
    for w in wrs {
        sges.extend(w.sges.iter().map(|s| sys::ibv_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }));
    }
    let mut chain: Vec<sys::ibv_recv_wr> = Vec::with_capacity(wrs.len());
    let mut at = 0usize;
    for w in wrs {
        chain.push(sys::ibv_recv_wr {
            wr_id: w.wr_id.0,
            next: std::ptr::null_mut(),
            // In bounds: at + len <= sges.len(), and sges is not resized.
            sg_list: if w.sges.is_empty() {
                std::ptr::null_mut()
            } else {
                sges.as_mut_ptr().wrapping_add(at)
            },
            num_sge: w.sges.len() as i32,
        });
        at += w.sges.len();
    }
    let base = chain.as_mut_ptr();
    for i in 1..chain.len() {
        // In bounds: i < chain.len(), and chain is not resized after this.
        chain[i - 1].next = base.wrapping_add(i);
    }
    let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
    let r = post(base, &mut bad);
    if r == 0 {
        return Ok(());
    }
    let posted = if bad.is_null() {
        0
    } else {
        (bad as usize - base as usize) / std::mem::size_of::<sys::ibv_recv_wr>()
    };
    Err(PostError {
        posted,
        error: os("ibv_post_recv", r),
    })
}

impl SharedReceiveQueue for VerbsSrq {
    type Handle = VerbsSrqHandle;
    fn handle(&self) -> VerbsSrqHandle {
        VerbsSrqHandle(Arc::clone(&self.inner))
    }
    fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let srq = self.inner.srq;
        post_recv_chain(wrs, self.max_sge, |wr, bad| {
            // SAFETY: srq is live; the chain and its SGEs live in post_recv_chain's locals for
            // the duration of the call, and the provider copies them before returning.
            unsafe { sys::ibv_post_srq_recv(srq, wr, bad) }
        })
    }
}

/// Connected RC queue pair (created on its RDMA CM id).
pub struct VerbsQp {
    pub(crate) qp: *mut sys::ibv_qp,
    pub(crate) id: Arc<crate::verbs_cm::IdInner>,
    pub(crate) conn: ConnId,
    pub(crate) caps: QpCaps,
    pub(crate) has_srq: bool,
    pub(crate) scratch_sges: Vec<sys::ibv_sge>,
    pub(crate) scratch_wrs: Vec<sys::ibv_send_wr>,
    pub(crate) _keep: (
        VerbsPd,
        VerbsCqHandle,
        VerbsCqHandle,
        Option<VerbsSrqHandle>,
    ),
}
// SAFETY: a QP may be used from any thread, one at a time (&mut); teardown is serialized with
// the CM through the id's lock; the scratch buffers' raw pointers are only dereferenced by the
// provider during a post made through &mut self.
unsafe impl Send for VerbsQp {}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        self.id.destroy_qp();
    }
}

impl QueuePair for VerbsQp {
    fn qp_num(&self) -> QpNum {
        // SAFETY: qp is live until Drop.
        QpNum(unsafe { (*self.qp).qp_num })
    }
    fn conn(&self) -> ConnId {
        self.conn
    }
    fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let c = self.caps;
        for w in wrs {
            let bad = match w.payload {
                Payload::Sges(s) => s.len() > c.max_send_sge as usize,
                Payload::Inline(b) => {
                    b.len() > c.max_inline_data as usize || matches!(w.op, SendOp::RdmaRead(_))
                }
            };
            if bad {
                return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                    format!("work request {:?} exceeds the QP's caps {c:?}", w.op),
                )));
            }
        }
        // Scratch buffers kept in the QP: no allocation per post once warm.
        let mut sges = std::mem::take(&mut self.scratch_sges);
        let mut chain = std::mem::take(&mut self.scratch_wrs);
        sges.clear();
        chain.clear();
        for w in wrs {
            match w.payload {
                Payload::Sges(s) => sges.extend(s.iter().map(|s| sys::ibv_sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                })),
                Payload::Inline(b) => sges.push(sys::ibv_sge {
                    addr: b.as_ptr() as u64,
                    length: b.len() as u32,
                    lkey: 0,
                }),
            }
        }
        let mut at = 0usize;
        for w in wrs {
            // SAFETY: ibv_send_wr is a plain C struct (integers, raw pointers, unions of them);
            // all-zero is a valid value and the fields we do not set must be zero.
            let mut x: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            x.wr_id = w.wr_id.0;
            let n = match w.payload {
                Payload::Sges(s) => s.len(),
                Payload::Inline(_) => 1,
            };
            // In bounds: at + n <= sges.len(); sges is not resized.
            x.sg_list = if n == 0 {
                std::ptr::null_mut()
            } else {
                sges.as_mut_ptr().wrapping_add(at)
            };
            x.num_sge = n as i32;
            at += n;
            let mut flags = 0u32;
            if w.signaled {
                flags |= sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            if matches!(w.payload, Payload::Inline(_)) {
                flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
            }
            x.send_flags = flags;
            use sys::ibv_wr_opcode as o;
            match w.op {
                SendOp::Send => x.opcode = o::IBV_WR_SEND,
                SendOp::SendWithInvalidate { rkey } => {
                    x.opcode = o::IBV_WR_SEND_WITH_INV;
                    x.imm_data_invalidated_rkey_union.invalidated_rkey = rkey;
                }
                SendOp::RdmaWrite(r) => {
                    x.opcode = o::IBV_WR_RDMA_WRITE;
                    x.wr.rdma = sys::rdma_t {
                        remote_addr: r.addr,
                        rkey: r.rkey,
                    };
                }
                SendOp::RdmaRead(r) => {
                    x.opcode = o::IBV_WR_RDMA_READ;
                    x.wr.rdma = sys::rdma_t {
                        remote_addr: r.addr,
                        rkey: r.rkey,
                    };
                }
            }
            chain.push(x);
        }
        let base = chain.as_mut_ptr();
        for i in 1..chain.len() {
            // In bounds: i < chain.len(), and chain is not resized after this.
            chain[i - 1].next = base.wrapping_add(i);
        }
        let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: qp is live; the chain, its SGEs and the inline bytes (borrowed from `wrs`)
        // outlive the call, and the provider copies WQEs and inline data before returning.
        // Registered memory named by the SGEs stays registered while a WR may use it: each
        // region holds its memory and is only deregistered when dropped by its owner, which
        // the device then cannot reach (dereg fences the device's access).
        let r = unsafe { sys::ibv_post_send(self.qp, base, &mut bad) };
        let posted = if bad.is_null() {
            0
        } else {
            (bad as usize - base as usize) / std::mem::size_of::<sys::ibv_send_wr>()
        };
        // The provider has copied everything; what the scratch still points at is never read.
        self.scratch_sges = sges;
        self.scratch_wrs = chain;
        if r == 0 {
            return Ok(());
        }
        Err(PostError {
            posted,
            error: os("ibv_post_send", r),
        })
    }
    fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        if self.has_srq {
            return Err(PostError::nothing_posted(FabricError::InvalidArgument(
                "post_recv on a QP with a shared receive queue".into(),
            )));
        }
        let qp = self.qp;
        post_recv_chain(wrs, self.caps.max_recv_sge, |wr, bad| {
            // SAFETY: qp is live; the chain lives in post_recv_chain's locals for the call.
            unsafe { sys::ibv_post_recv(qp, wr, bad) }
        })
    }
    fn set_error(&mut self) -> Result<(), FabricError> {
        // SAFETY: ibv_qp_attr is a plain C struct; all-zero plus the state is what the call
        // reads with IBV_QP_STATE.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        // SAFETY: qp is live; attr is a valid in-struct.
        let r = unsafe {
            sys::ibv_modify_qp(
                self.qp,
                &mut attr,
                sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32,
            )
        };
        if r != 0 {
            return Err(os("ibv_modify_qp", r));
        }
        Ok(())
    }
}

/// The QP init attributes for `rdma_create_qp`.
pub(crate) fn qp_init_attr(
    caps: QpCaps,
    send_cq: &VerbsCqHandle,
    recv_cq: &VerbsCqHandle,
    srq: Option<&VerbsSrqHandle>,
) -> sys::ibv_qp_init_attr {
    // SAFETY: ibv_qp_init_attr is a plain C struct; all-zero is valid and means "no context,
    // signal per WR".
    let mut a: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    a.send_cq = send_cq.0.cq;
    a.recv_cq = recv_cq.0.cq;
    a.srq = srq.map_or(std::ptr::null_mut(), |s| s.0.srq);
    a.cap = sys::ibv_qp_cap {
        max_send_wr: caps.max_send_wr,
        max_recv_wr: if srq.is_some() { 0 } else { caps.max_recv_wr },
        max_send_sge: caps.max_send_sge,
        max_recv_sge: if srq.is_some() { 0 } else { caps.max_recv_sge },
        max_inline_data: caps.max_inline_data,
    };
    a.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
    a
}

impl Fabric for VerbsFabric {
    type Pd = VerbsPd;
    type Mr = VerbsMr;
    type Cq = VerbsCq;
    type CqHandle = VerbsCqHandle;
    type Srq = VerbsSrq;
    type SrqHandle = VerbsSrqHandle;
    type Qp = VerbsQp;
    type Request = VerbsRequest;
    type Cm = VerbsCm;

    fn attrs(&self) -> &DeviceAttrs {
        &self.attrs
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            invalidate_registered_regions: false,
        }
    }
    fn alloc_pd(&self) -> Result<VerbsPd, FabricError> {
        // SAFETY: ctx is live while self is.
        let pd = unsafe { sys::ibv_alloc_pd(self.ctx.ctx) };
        if pd.is_null() {
            return Err(os("ibv_alloc_pd", errno()));
        }
        Ok(VerbsPd(Arc::new(PdInner {
            pd,
            _ctx: Arc::clone(&self.ctx),
        })))
    }
    fn register(
        &self,
        pd: &VerbsPd,
        memory: Arc<dyn RegionMemory>,
        access: Access,
    ) -> Result<VerbsMr, FabricError> {
        // SAFETY: the memory is valid for len bytes and stays allocated while the returned MR
        // (which holds `memory`) lives; pd is live.
        let mr = unsafe {
            sys::ibv_reg_mr(
                pd.0.pd,
                memory.base().as_ptr().cast(),
                memory.len(),
                access.bits() as i32,
            )
        };
        if mr.is_null() {
            return Err(os("ibv_reg_mr", errno()));
        }
        // SAFETY: mr is a live MR just returned by ibv_reg_mr.
        let (lkey, rkey, addr, len) = unsafe {
            (
                (*mr).lkey,
                (*mr).rkey,
                (*mr).addr as u64,
                (*mr).length as u64,
            )
        };
        Ok(VerbsMr {
            mr,
            _pd: pd.clone(),
            memory,
            addr,
            len,
            lkey,
            rkey,
        })
    }
    fn create_cq(&self, depth: u32) -> Result<VerbsCq, FabricError> {
        // SAFETY: ctx is live.
        let channel = unsafe { sys::ibv_create_comp_channel(self.ctx.ctx) };
        if channel.is_null() {
            return Err(os("ibv_create_comp_channel", errno()));
        }
        // SAFETY: ctx and channel are live; no cq_context.
        let cq = unsafe {
            sys::ibv_create_cq(
                self.ctx.ctx,
                depth.min(i32::MAX as u32) as i32,
                std::ptr::null_mut(),
                channel,
                0,
            )
        };
        if cq.is_null() {
            let e = errno();
            // SAFETY: channel was created above and has no CQ.
            unsafe { sys::ibv_destroy_comp_channel(channel) };
            return Err(os("ibv_create_cq", e));
        }
        let inner = Arc::new(CqInner {
            cq,
            channel,
            _ctx: Arc::clone(&self.ctx),
        });
        // SAFETY: channel is live (owned by inner).
        set_nonblocking(unsafe { (*channel).fd })?;
        Ok(VerbsCq {
            inner,
            wc: Vec::with_capacity(64),
        })
    }
    fn create_srq(&self, pd: &VerbsPd, max_wr: u32, max_sge: u32) -> Result<VerbsSrq, FabricError> {
        let mut a = sys::ibv_srq_init_attr {
            srq_context: std::ptr::null_mut(),
            attr: sys::ibv_srq_attr {
                max_wr,
                max_sge,
                srq_limit: 0,
            },
        };
        // SAFETY: pd is live; a is a valid in/out struct.
        let srq = unsafe { sys::ibv_create_srq(pd.0.pd, &mut a) };
        if srq.is_null() {
            return Err(os("ibv_create_srq", errno()));
        }
        Ok(VerbsSrq {
            inner: Arc::new(SrqInner {
                srq,
                _pd: pd.clone(),
            }),
            max_sge,
        })
    }
    fn create_cm(&self) -> Result<VerbsCm, FabricError> {
        VerbsCm::new(self.clone())
    }
}

pub(crate) fn nonblocking(fd: RawFd) -> Result<(), FabricError> {
    set_nonblocking(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_failures_are_told_apart() {
        assert_eq!(
            classify_open_failure("libibverbs.so.1", libc::EOPNOTSUPP),
            FabricError::LibraryMissing("libibverbs.so.1")
        );
        assert_eq!(
            classify_open_failure("libibverbs.so.1", libc::ENOSYS),
            FabricError::NoKernelSupport
        );
        assert_eq!(
            classify_open_failure("librdmacm.so.1", libc::ENODEV),
            FabricError::NoDevice(None)
        );
        assert!(matches!(
            classify_open_failure("librdmacm.so.1", libc::EPERM),
            FabricError::Os {
                call: "rdma_get_devices",
                ..
            }
        ));
        let msg = FabricError::LibraryMissing("libibverbs.so.1").to_string();
        assert!(
            msg.contains("libibverbs.so.1") && msg.contains("rdma-core"),
            "{msg}"
        );
    }

    #[test]
    fn completions_convert_like_verbs_reports_them() {
        // SAFETY: ibv_wc is a plain C struct; all-zero is valid.
        let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
        wc.wr_id = 7;
        wc.status = sys::ibv_wc_status::IBV_WC_SUCCESS;
        wc.opcode = sys::ibv_wc_opcode::IBV_WC_RECV;
        wc.byte_len = 100;
        wc.qp_num = 0x11;
        wc.wc_flags = sys::ibv_wc_flags::IBV_WC_WITH_INV.0;
        wc.imm_data_invalidated_rkey_union.invalidated_rkey = 0xABCD;
        let c = completion(&wc);
        assert_eq!(
            (c.wr_id, c.opcode, c.byte_len, c.invalidated_rkey),
            (WrId(7), Some(WcOpcode::Recv), 100, Some(0xABCD))
        );
        wc.status = sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
        let c = completion(&wc);
        assert_eq!(
            (c.status, c.opcode, c.invalidated_rkey),
            (WcStatus::WrFlushError, None, None)
        );
    }
}
