//! Plain values shared by every backend: keys and access flags, scatter/gather entries, work
//! requests, completions, device attributes, connection parameters and CM events.
//!
//! Invariants: these types carry no backend handles except where generic over [`crate::Fabric`]
//! ([`CmEvent`], [`QpInit`]); numeric values of [`Access`] equal the verbs `IBV_ACCESS_*` bits so
//! the verbs backend passes them through unchanged.

use std::net::SocketAddr;

use crate::api::Fabric;

/// Work request id as the hardware carries it. [`crate::slab`] gives it meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WrId(pub u64);

/// Queue pair number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpNum(pub u32);

/// A connection (RDMA CM id) within one connection manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Memory region access rights (bit values of `IBV_ACCESS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// No rights beyond local read (the region can be the source of SEND / RDMA WRITE).
    pub const NONE: Access = Access(0);
    /// The local device may write (receive buffers, RDMA READ sinks).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into it (requires LOCAL_WRITE).
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ from it.
    pub const REMOTE_READ: Access = Access(4);
    /// Everything this crate uses.
    pub const ALL: Access = Access(7);

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }
    /// Whether every right in `other` is in `self`.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// One local scatter/gather entry: `length` bytes at device address `addr` of the region with
/// `lkey`. Build it with [`crate::MemoryRegion::sge`], which checks the bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Device (virtual) address of the first byte.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
}

/// A peer's buffer: address and remote key as a keyed SGL carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteBuf {
    /// The peer's address of the first byte.
    pub addr: u64,
    /// The peer's remote key.
    pub rkey: u32,
}

/// What a send-queue work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: consumes one receive at the peer.
    Send,
    /// SEND with invalidate: the peer's device invalidates `rkey` before the receive completes.
    SendWithInvalidate {
        /// The peer's key to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE of the payload to the peer's memory. Zero length is allowed (an RTT probe):
    /// the peer then checks neither key nor address.
    RdmaWrite(RemoteBuf),
    /// RDMA READ from the peer's memory into the local SGEs.
    RdmaRead(RemoteBuf),
}

/// The bytes a send-queue work request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Gathered from (or, for RDMA READ, scattered to) registered memory.
    Sges(&'a [Sge]),
    /// Copied into the work request at post time (SEND / RDMA WRITE only, at most the QP's
    /// `max_inline_data`): no registration needed and the slice is free when the post returns.
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Total bytes.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Sges(s) => s.iter().map(|s| u64::from(s.length)).sum(),
            Payload::Inline(b) => b.len() as u64,
        }
    }
    /// Whether it carries no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A send-queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: WrId,
    /// The operation.
    pub op: SendOp,
    /// The data.
    pub payload: Payload<'a>,
    /// Whether a successful completion is generated (errors always are).
    pub signaled: bool,
}

/// A receive work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: WrId,
    /// Where an incoming SEND lands, in order (e.g. a 64-byte command slot, then a data buffer).
    pub sges: &'a [Sge],
}

/// Completion status (the `IBV_WC_*` statuses this crate distinguishes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// Done.
    Success,
    /// A receive was too small for the incoming SEND.
    LocalLengthError,
    /// Internal QP consistency error.
    LocalQpOperationError,
    /// A local SGE named a bad key, range or access.
    LocalProtectionError,
    /// Flushed because the QP is in the error state.
    WrFlushError,
    /// The peer found the request invalid (e.g. its receive was too small).
    RemoteInvalidRequest,
    /// The peer refused the key, range or access.
    RemoteAccessError,
    /// The peer failed the operation (e.g. an invalidate it could not do).
    RemoteOperationError,
    /// No acknowledgement after the retries.
    RetryExceeded,
    /// The peer had no receive posted and the RNR retries ran out.
    RnrRetryExceeded,
    /// Another verbs status, raw.
    Other(u32),
}

/// What completed (only meaningful for successful completions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    /// A SEND (with or without invalidate).
    Send,
    /// An RDMA WRITE.
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A receive.
    Recv,
    /// Another verbs opcode, raw.
    Other(u32),
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: WrId,
    /// Its status.
    pub status: WcStatus,
    /// Its operation; `None` when the status is an error (verbs leaves it undefined then).
    pub opcode: Option<WcOpcode>,
    /// Bytes received (receives) or read (RDMA READ); 0 otherwise.
    pub byte_len: u32,
    /// The QP the work request was posted on.
    pub qp_num: QpNum,
    /// For a receive of SEND with invalidate: the key the device invalidated.
    pub invalidated_rkey: Option<u32>,
}

/// Device attributes Raidline sizes its queues and pools by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// Device name (e.g. `rxe0`).
    pub name: String,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// Outstanding RDMA READs a QP can answer (responder resources).
    pub max_qp_rd_atom: u32,
    /// Outstanding RDMA READs a QP can issue (initiator depth).
    pub max_qp_init_rd_atom: u32,
    /// Receives per shared receive queue (0: no SRQ support).
    pub max_srq_wr: u32,
    /// Completion queue entries.
    pub max_cqe: u32,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Whether completions can carry device timestamps (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`).
    pub completion_timestamps: bool,
    /// The device clock for those timestamps, kHz (0 when unknown).
    pub hca_core_clock_khz: u64,
}

/// Behaviour that differs between backends in ways the conformance suite must know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// SEND with invalidate can invalidate a region registered with [`crate::Fabric::register`]
    /// (real devices only invalidate fast-registered regions, which only kernel consumers make).
    pub invalidate_registered_regions: bool,
}

/// Queue sizes of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Largest inline payload.
    pub max_inline_data: u32,
}

/// What a new QP is built from: its protection domain, CQs, optional SRQ and sizes.
pub struct QpInit<F: Fabric> {
    /// Protection domain of every region its work requests name.
    pub pd: F::Pd,
    /// CQ for send completions.
    pub send_cq: F::CqHandle,
    /// CQ for receive completions.
    pub recv_cq: F::CqHandle,
    /// Shared receive queue; `None` for a private one.
    pub srq: Option<F::SrqHandle>,
    /// Queue sizes.
    pub caps: QpCaps,
}

impl<F: Fabric> Clone for QpInit<F> {
    fn clone(&self) -> Self {
        Self {
            pd: self.pd.clone(),
            send_cq: self.send_cq.clone(),
            recv_cq: self.recv_cq.clone(),
            srq: self.srq.clone(),
            caps: self.caps,
        }
    }
}

/// Largest private data in a connect request on RoCE (IB CM REQ 92 bytes less the RDMA CM
/// header); received request data is padded to this length, as the kernel delivers it.
pub const MAX_CONNECT_PRIVATE_DATA: usize = 56;
/// Largest private data in an accept (IB CM REP); received accept data is padded to this.
pub const MAX_ACCEPT_PRIVATE_DATA: usize = 196;
/// Largest private data in a reject (IB CM REJ); received reject data is padded to this.
pub const MAX_REJECT_PRIVATE_DATA: usize = 148;
/// IB CM reject reason of a reject by the peer's application.
pub const REJECT_REASON_CONSUMER: i32 = 28;
/// IB CM reject reason when nothing listens on the address.
pub const REJECT_REASON_INVALID_SERVICE_ID: i32 = 8;

/// Active-side connection parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// Private data for the request (at most [`MAX_CONNECT_PRIVATE_DATA`] bytes).
    pub private_data: Vec<u8>,
    /// RDMA READs we let the peer have outstanding against us.
    pub responder_resources: u8,
    /// RDMA READs we want to have outstanding against the peer.
    pub initiator_depth: u8,
    /// Transport retries (0..=7).
    pub retry_count: u8,
    /// How often the *peer* retries sends we answer with receiver-not-ready (0..=7, 7 =
    /// forever): IB CM carries this in the REQ for the passive side's QP.
    pub rnr_retry_count: u8,
    /// Address and route resolution timeout, milliseconds.
    pub resolve_timeout_ms: u32,
}

/// Passive-side accept parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptParams {
    /// Private data for the accept (at most [`MAX_ACCEPT_PRIVATE_DATA`] bytes).
    pub private_data: Vec<u8>,
    /// RDMA READs we let the peer have outstanding against us.
    pub responder_resources: u8,
    /// RDMA READs we will have outstanding against the peer.
    pub initiator_depth: u8,
    /// How often the *peer* retries sends we answer with receiver-not-ready (0..=7, 7 =
    /// forever): IB CM carries this in the REP for the active side's QP.
    pub rnr_retry_count: u8,
}

/// Why an active connect failed before any answer from the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// Address resolution failed.
    AddressError,
    /// Route resolution failed.
    RouteError,
    /// The peer did not answer.
    Unreachable,
    /// The connect itself failed locally.
    ConnectError,
}

/// A connection-manager event, with every pointer already copied out and acknowledged.
pub enum CmEvent<F: Fabric> {
    /// A peer asks to connect: answer with `accept` or `reject`.
    ConnectRequest(F::Request),
    /// The connection is up. On the active side `qp` is the connected QP and `private_data`
    /// the peer's accept data (padded to [`MAX_ACCEPT_PRIVATE_DATA`]); on the passive side
    /// `qp` is `None` (accept returned it) and `private_data` is empty.
    Established {
        /// The connection.
        conn: ConnId,
        /// The active side's QP.
        qp: Option<F::Qp>,
        /// The peer's accept private data.
        private_data: Vec<u8>,
    },
    /// The peer (or, with [`REJECT_REASON_INVALID_SERVICE_ID`], its CM) rejected our connect.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// IB CM reject reason.
        reason: i32,
        /// The peer's reject private data (padded to [`MAX_REJECT_PRIVATE_DATA`]).
        private_data: Vec<u8>,
    },
    /// An active connect failed without an answer.
    ConnectFailed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: ConnectFailure,
    },
    /// The connection is down (either side disconnected). Call `disconnect` too if we did not.
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// The connection left time-wait: its id can be released and its QP number reused.
    TimewaitExit {
        /// The connection.
        conn: ConnId,
    },
    /// The device under the connection went away: destroy everything on it.
    DeviceRemoval {
        /// The connection, when the event names one.
        conn: Option<ConnId>,
    },
}

impl<F: Fabric> std::fmt::Debug for CmEvent<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmEvent::ConnectRequest(_) => write!(f, "ConnectRequest"),
            CmEvent::Established {
                conn,
                qp,
                private_data,
            } => write!(
                f,
                "Established({conn:?}, qp: {}, {} bytes)",
                qp.is_some(),
                private_data.len()
            ),
            CmEvent::Rejected { conn, reason, .. } => write!(f, "Rejected({conn:?}, {reason})"),
            CmEvent::ConnectFailed { conn, reason } => {
                write!(f, "ConnectFailed({conn:?}, {reason:?})")
            }
            CmEvent::Disconnected { conn } => write!(f, "Disconnected({conn:?})"),
            CmEvent::TimewaitExit { conn } => write!(f, "TimewaitExit({conn:?})"),
            CmEvent::DeviceRemoval { conn } => write!(f, "DeviceRemoval({conn:?})"),
        }
    }
}

/// A connect request's facts, as the listener sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The connection it would become.
    pub conn: ConnId,
    /// The request's private data (padded to [`MAX_CONNECT_PRIVATE_DATA`]).
    pub private_data: Vec<u8>,
    /// From our side (the CM swaps the peer's values): RDMA READs the peer will have
    /// outstanding against us (its initiator depth), which we must be able to answer.
    pub responder_resources: u8,
    /// From our side: RDMA READs we may have outstanding against the peer (its responder
    /// resources). Our RDMA READ depth must not exceed it.
    pub initiator_depth: u8,
    /// The peer's address, when known.
    pub remote_addr: Option<SocketAddr>,
    /// The address the peer connected to (its port names the listener: NVMe/RDMA or iSER),
    /// when known.
    pub local_addr: Option<SocketAddr>,
}
