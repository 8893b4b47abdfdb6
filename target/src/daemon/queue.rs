//! One NVMe/RDMA queue pair on a poller: the endpoint, the protocol state, the receive slots,
//! and the requests of this queue that wait for something (a buffer, an RDMA READ slot, an
//! asynchronous event).
//!
//! A request ([`Req`]) is owned by exactly one place at a time: a posted work request's
//! context ([`Wr`]), a storage request (the poller's in-flight table), or a wait list here.
//! The receive slot it arrived in travels with it and is reposted right before its response
//! is sent, as Linux nvmet-rdma does, so the host's submission-queue credit and our receives
//! stay in step.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use raidline_fabric::slab::Endpoint;
use raidline_fabric::{ConnId, Fabric, QpNum, QueuePair, RemoteBuf};
use raidline_proto::fabrics::Connect;
use raidline_proto::{Sqe, Status};
use raidline_raid::IoBuf;

use raidline_cc::probe::ProbeSeq;
use raidline_cc::Nanos;

use super::pacing::{QpPacer, QueueStats};
use super::pool::RecvBuffers;
use crate::cm::QueueSetup;
use crate::controller::{Controller, IoCounters};
use crate::queue::QueueState;
use crate::registry::Served;

/// A receive slot: the 64-byte command buffer and the in-capsule data buffer.
pub(crate) struct Slot {
    pub cmd: IoBuf,
    pub icd: Option<IoBuf>,
    /// It belongs to the poller's shared receive queue (reposted there, whichever queue pair
    /// it served), not to one queue pair.
    pub shared: bool,
}

/// Where a request's data buffer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataSrc {
    /// None attached.
    None,
    /// The poller's pool.
    Pool,
    /// The receive slot's in-capsule buffer (taken out of the slot while attached).
    Icd,
}

/// What a request does next once its data is in place.
#[derive(Debug)]
pub(crate) enum Step {
    /// Decide the Connect once its 1024 bytes are here.
    Connect(Connect),
    /// Run an admin command once its host-to-controller data is here.
    AdminIn,
    /// Feed an Authentication Send's payload to the queue's authenticator once it is here.
    AuthIn,
    /// Read `len` bytes at `lba` of namespace `ns` into the buffer, then RDMA WRITE them.
    Read { ns: usize, lba: u64, len: usize },
    /// Write the buffer's `len` bytes at `lba` (after the RDMA READ, for keyed data).
    Write {
        ns: usize,
        lba: u64,
        len: usize,
        fua: bool,
    },
    /// Check a fetched Dataset Management range list, then zero the ranges if deallocating.
    Dsm {
        ns: usize,
        count: u16,
        deallocate: bool,
    },
    /// Write zeroes over these (lba, blocks) pieces, one buffer-full at a time.
    Zero {
        ns: usize,
        pieces: VecDeque<(u64, u64)>,
    },
    /// Flush the namespaces of [`Req::flush_nss`] one after another.
    Flush,
    /// An iSCSI command's data-out (UNMAP's parameter list, WRITE SAME's block) is here:
    /// the logical unit reads it (issue 18).
    ScsiOut {
        ns: usize,
        lun: u16,
        io: raidline_scsi::sbc::Io,
    },
    /// Nothing left but the response.
    Respond,
}

/// One command in flight.
pub(crate) struct Req {
    pub slot: Option<Slot>,
    pub sqe: Sqe,
    pub cid: u16,
    /// In-capsule data bytes that arrived with the command.
    pub icd_len: usize,
    pub started: Instant,
    pub data: Option<IoBuf>,
    pub data_src: DataSrc,
    /// Bytes of `data` that matter.
    pub data_len: usize,
    pub step: Step,
    /// Send the first `.1` bytes of `data` to the host with RDMA WRITE before the response.
    pub write_back: Option<(RemoteBuf, usize)>,
    pub status: Status,
    pub result: u64,
    /// Close the queue once the response is sent (a Disconnect).
    pub close_after: bool,
    /// Namespace, read (true) or write, and byte count for the metrics when it completes.
    pub account: Option<(usize, bool, u64)>,
    /// Host memory to fetch from (RDMA READ) once a buffer is attached.
    pub remote: Option<RemoteBuf>,
    /// The zero buffer of a Write Zeroes has been cleared.
    pub zeroed: bool,
    /// Bytes charged to the pacer when its RDMA READ or WRITE was posted (acknowledged back
    /// when that work request completes).
    pub paced_len: u64,
    /// Bytes of `write_back` already posted as paced chunks ahead of the response's last
    /// RDMA WRITE (see `poller::pace`).
    pub chunked: usize,
    /// The namespaces a Flush (or a FUA write's flush) has still to flush, in order. Kept with
    /// its capacity when the request's box serves the next command: no allocation per flush.
    pub flush_nss: VecDeque<usize>,
    /// The Initiator Task Tag of an iSCSI command (iSER queues only).
    pub itt: u32,
    /// An iSCSI write whose first bytes came as immediate data and whose rest is fetched:
    /// where they lie in `slot`'s in-capsule buffer and how many (they are copied to the front
    /// of the pool buffer, and the RDMA READ lands after them). (0, 0) otherwise.
    pub immediate: (usize, usize),
    /// An iSCSI read's SCSI Response, sent after its data (held with the request while the
    /// pacer holds the data back).
    pub iser_resp: Vec<u8>,
}

impl Req {
    /// The attached data as bytes (the first `data_len`).
    pub fn data_bytes(&self) -> &[u8] {
        match &self.data {
            Some(b) => &b[..self.data_len.min(b.len())],
            None => &[],
        }
    }
}

/// The context a posted work request carries.
pub(crate) enum Wr {
    /// A receive in slot.
    Recv(Slot),
    /// An RDMA READ fetching a request's data.
    Read(Box<Req>),
    /// A response SEND (and the RDMA WRITE of its data before it).
    Resp(Box<Req>),
    /// A paced chunk of a response's read data (an RDMA WRITE of `PACE_CHUNK` bytes, see
    /// `poller::pace`), signaled so the pacer and the RTT estimator see it leave. Its buffer
    /// stays with the response, which completes after it.
    Chunk,
    /// An RTT probe: a signaled zero-length RDMA WRITE, posted at `sent_ns` on the poller clock.
    Probe {
        /// The prober's sequence number.
        seq: ProbeSeq,
        /// When it was posted.
        sent_ns: u64,
    },
    /// An iSCSI PDU SEND of an iSER queue: the pool buffer its payload went from, if it was
    /// too long to go inline; whether the connection closes once it is sent (the answer to a
    /// Logout or a failed login must reach the host before the QP goes to the error state).
    IserSend { buf: Option<IoBuf>, close: bool },
}

/// A queue's pacing: its pacer (I/O queues when pacing is on), the responses whose RDMA WRITE
/// waits for tokens, when the poller must look at it next, and what it publishes.
#[derive(Default)]
pub(crate) struct QueuePacing {
    pub pacer: Option<QpPacer>,
    /// Responses with data waiting for the bucket, in order: (request, status, result).
    pub waiting: VecDeque<(Box<Req>, Status, u64)>,
    /// Visit at or after this time (poller clock).
    pub due: Option<Nanos>,
    pub stats: Arc<QueueStats>,
    /// Receives posted when the queue arrived (its depth), for the in-flight count.
    pub recvs: usize,
    /// Payload bytes posted as RDMA READ or WRITE since the queue arrived.
    pub bytes: u64,
    /// Read data chunks posted ahead of their response (see `poller::pace`).
    pub chunks: u64,
    /// Of those, the ones not completed yet (their send-queue slots are not
    /// back yet).
    pub chunks_in_flight: u32,
    /// Responses of a closing queue whose data was partly posted in chunks: recycled only
    /// once the queue's QP is destroyed (the device may still read their buffers).
    #[allow(clippy::vec_box)] // boxed as everywhere: recycled boxes serve the next commands
    pub late: Vec<Box<Req>>,
}

impl QueuePacing {
    /// Asks for a visit at `t` (the earlier of this and any earlier request).
    pub fn wake_at(&mut self, t: Nanos) {
        self.due = Some(self.due.map_or(t, |d| d.min(t)));
    }
}

/// One queue pair.
pub(crate) struct Queue<F: Fabric> {
    pub conn: ConnId,
    pub ep: Endpoint<F::Qp, Wr>,
    pub proto: QueueState,
    pub setup: QueueSetup,
    /// Its own receive buffers; `None` when it uses the poller's shared receive queue.
    pub recv_bufs: Option<RecvBuffers<F>>,
    pub peer: Option<SocketAddr>,
    pub reads_in_flight: u32,
    pub read_wait: VecDeque<Box<Req>>,
    /// The controller, once connected.
    pub ctrl: Option<Arc<Mutex<Controller>>>,
    /// Its I/O counters (updated per command without the controller's lock).
    pub io: Option<Arc<IoCounters>>,
    pub served: Option<Served>,
    /// The last namespace the queue's I/O named: (nsid, index in the target's namespaces).
    /// The namespace list is fixed once the target runs and a queue serves one subsystem, so
    /// the pair stays true for the queue's life.
    pub ns_cache: Option<(u32, usize)>,
    /// The queue's slot in its poller's table (set when the poller adopts it).
    pub table_idx: u32,
    pub cntlid: u16,
    /// DH-HMAC-CHAP state, when the host must authenticate this queue (away on the control
    /// thread while a step runs there).
    pub auth: Option<Box<raidline_auth::Authenticator>>,
    /// The Authentication Send or Receive whose step runs on the authentication thread.
    pub auth_req: Option<Box<Req>>,
    /// An Authentication Send or Receive is under way (from its arrival to its step's end).
    pub auth_busy: bool,
    /// Asynchronous Event Requests waiting for an event, by command id.
    pub parked: HashMap<u16, Box<Req>>,
    /// Requests of this queue in storage or waiting for a pool buffer.
    pub elsewhere: usize,
    pub closing: bool,
    /// Why it is closing (first reason wins), for the log.
    pub close_reason: Option<String>,
    pub posted_recvs: usize,
    /// Shared-receive-queue slots holding this queue's commands now.
    pub srq_held: usize,
    pub pacing: QueuePacing,
    /// An iSER connection's iSCSI state: the queue pair carries iSCSI, not NVMe/RDMA.
    pub iser: Option<Box<super::iscsi::IserQueue>>,
}

impl<F: Fabric> Queue<F> {
    /// A queue pair just accepted: nothing connected, nothing in flight.
    pub fn new(
        conn: ConnId,
        ep: Endpoint<F::Qp, Wr>,
        setup: QueueSetup,
        recv_bufs: Option<RecvBuffers<F>>,
        peer: Option<SocketAddr>,
        iser: Option<Box<super::iscsi::IserQueue>>,
    ) -> Queue<F> {
        Queue {
            conn,
            ep,
            proto: QueueState::new(setup.depth),
            setup,
            recv_bufs,
            peer,
            reads_in_flight: 0,
            read_wait: VecDeque::new(),
            ctrl: None,
            io: None,
            served: None,
            ns_cache: None,
            table_idx: 0,
            auth: None,
            auth_req: None,
            auth_busy: false,
            cntlid: 0,
            parked: HashMap::new(),
            elsewhere: 0,
            closing: false,
            close_reason: None,
            posted_recvs: 0,
            srq_held: 0,
            pacing: QueuePacing::default(),
            iser,
        }
    }

    /// Posts the receives of its own buffers' `slots` (before the host may send); a failure
    /// closes the queue.
    pub fn post_receives(&mut self, slots: Vec<Slot>) {
        for slot in slots {
            let Some(rb) = self.recv_bufs.as_ref() else {
                break;
            };
            let posted = rb
                .sges(&slot.cmd, slot.icd.as_ref())
                .map_err(|e| format!("receive buffers: {e}"))
                .and_then(|sges| {
                    self.ep
                        .post_recv(Wr::Recv(slot), &sges)
                        .map_err(|rej| format!("receive not posted: {}", rej.error))
                });
            match posted {
                Ok(()) => self.posted_recvs += 1,
                Err(e) => {
                    self.close(e);
                    break;
                }
            }
        }
    }

    /// Starts closing: the QP goes to the error state, so everything posted flushes back.
    pub fn close(&mut self, reason: impl Into<String>) {
        if !self.closing {
            self.closing = true;
            self.close_reason = Some(reason.into());
            let _ = self.ep.qp_mut().set_error();
        }
    }

    /// Whether nothing of this queue is outstanding any more.
    pub fn drained(&self) -> bool {
        self.closing && self.ep.in_flight() == 0 && self.elsewhere == 0
    }

    /// The QP number completions carry.
    pub fn qp_num(&self) -> QpNum {
        self.ep.qp().qp_num()
    }
}
