//! The running target: a control thread (RDMA CM, connection life cycle, keep-alive, array
//! health), N poller threads (the data path, one completion queue each), per-array
//! maintenance threads (resync, rebuild, scrub), all generic over the [`Fabric`] so the same
//! code serves soft-RoCE/verbs in the daemon and the in-memory fabric in the tests.
//!
//! Shared state is small and off the I/O path: the registry and the controller table behind
//! locks taken on connect, disconnect and keep-alive checks; the namespace and array tables
//! are fixed after start. An array that did not assemble at start-up ([`RefusedArray`]) has an
//! empty [`ArraySlot`] and inactive namespaces until `raidline array start` sets the slot
//! ([`Shared::attach_array`]); a slot is set once and never emptied. Pollers own their queues
//! outright.
//!
//! Shutdown ([`Target::shutdown`]): stop accepting connections, let every poller finish the
//! commands it has started (new capsules are left unanswered, so hosts retry them after
//! reconnecting), close the queues, then flush and stop the arrays, which marks them clean.

mod backend;
mod control;
mod iscsi;
pub mod pacing;
mod poller;
mod pool;
mod queue;
mod slot;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use raidline_fabric::{ConnId, ConnectionManager, Fabric, FabricError};
use raidline_proto::aen::{AsyncEvent, NoticeEvent};
use raidline_proto::text::Nqn;
use raidline_raid::{Array, BufferArena, Throttle};

pub use backend::{open_member, AnyExecutor, Backend, BufferedFile};
pub use pacing::{CcSpec, CcState, QueueStats};
pub use slot::{ArraySlot, Refusal, RefusedArray, StoredArray};

use crate::config::PollMode;
use crate::controller::Controller;
use crate::discovery::Port;
use crate::metrics::{DataPathMetrics, NamespaceMetrics};
use crate::queue::QueueRole;
use crate::registry::Registry;
use crate::subsystem::{Limits, NamespaceInfo, Subsystem};

/// A served namespace.
#[derive(Debug)]
pub struct NsEntry {
    /// Its subsystem.
    pub subnqn: Nqn,
    /// What controllers report about it.
    pub info: NamespaceInfo,
    /// Where its blocks are.
    pub backend: Backend,
    /// The array's name, for array namespaces.
    pub array: Option<String>,
    /// I/O counters and latency histograms.
    pub metrics: NamespaceMetrics,
}

/// A configured array: running, or refused at start-up until `raidline array start`.
#[derive(Debug)]
pub struct ArrayEntry {
    /// Configured name.
    pub name: String,
    /// The array once it runs (see [`ArrayEntry::array`]).
    pub slot: Arc<ArraySlot>,
    /// Why it is not running (`None` once it runs).
    pub refused: Mutex<Option<Refusal>>,
    /// Its configuration, where the daemon has one (to assemble a refused array again).
    pub config: Option<crate::config::ArrayConfig>,
    /// Held while `raidline array start` assembles it (one start at a time).
    pub starting: Mutex<()>,
    /// Rebuild/resync/scrub throttle, bytes per second.
    pub rebuild_bytes_per_sec: u64,
    /// A scrub was asked for (management socket).
    pub scrub_requested: AtomicBool,
    /// The running scrub's progress (`None` when none runs).
    pub scrub: Mutex<Option<raidline_raid::SyncProgress>>,
    /// The running resync's progress (`None` when none runs).
    pub resync: Mutex<Option<raidline_raid::SyncProgress>>,
    /// Where its current members are remembered, if anywhere.
    pub state_file: Option<std::path::PathBuf>,
    /// How often its write-intent bitmap is aged.
    pub bitmap_aging: Duration,
    /// Requests the pollers' ring path hands back, for the maintenance thread's blocking
    /// engine ([`backend::NsQueue::Maint`]).
    pub(crate) jobs: std::sync::mpsc::Sender<backend::MaintJob>,
    /// Their receiving end, taken by the maintenance thread when it starts.
    pub(crate) jobs_rx: Mutex<Option<std::sync::mpsc::Receiver<backend::MaintJob>>>,
}

impl ArrayEntry {
    /// The running array; `None` while it is refused (not assembled).
    pub fn array(&self) -> Option<&Arc<Array>> {
        self.slot.get()
    }

    /// Why it is not running; `None` once it runs.
    pub fn refusal(&self) -> Option<Refusal> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The array's member and spare paths now, members in role order (empty while it is
    /// not running).
    pub fn device_paths(&self) -> Vec<String> {
        let Some(array) = self.array() else {
            return Vec::new();
        };
        let mut v: Vec<String> = array.member_names().into_iter().flatten().collect();
        if let Some(r) = array.replace_status() {
            v.push(r.new);
        }
        v.extend(array.spare_names());
        v
    }

    /// Rewrites the remembered members when they differ from `last` (updated on success).
    /// Nothing while the array is not running: what is remembered stays as it was.
    pub fn remember(&self, last: &mut Vec<String>) {
        let Some(file) = &self.state_file else { return };
        if self.array().is_none() {
            return;
        }
        let now = self.device_paths();
        if now == *last {
            return;
        }
        match crate::remember::save(file, &self.name, &now) {
            Ok(()) => {
                tracing::info!(
                    "array {}: members remembered in {}: {}",
                    self.name,
                    file.display(),
                    now.join(", ")
                );
                *last = now;
            }
            Err(e) => tracing::warn!(
                "array {}: cannot remember its members in {}: {e} (a restart opens only the configured paths)",
                self.name,
                file.display()
            ),
        }
    }
}

/// A live controller, as the control thread and the management socket see it.
#[derive(Debug)]
pub struct CtrlEntry {
    /// The controller state machine (driven by its admin queue's poller).
    pub ctrl: Arc<Mutex<Controller>>,
    /// Its queues: (qid, connection, poller).
    pub conns: Vec<(u16, ConnId, usize)>,
    /// Host NQN.
    pub hostnqn: String,
    /// Subsystem NQN.
    pub subnqn: String,
    /// Host address.
    pub host_addr: String,
    /// Keep-alive timeout asked for.
    pub kato_ms: u32,
    /// Keep-alive expired; teardown under way.
    pub expired: bool,
    /// In-band authentication of its admin queue: "none", "required, not yet authenticated",
    /// "hmac(sha256) ffdhe2048 [bidirectional]" or "failed: …".
    pub auth: String,
}

/// Messages to the control thread.
pub(crate) enum ControlMsg {
    /// A poller closed a queue and dropped its QP.
    QueueClosed {
        conn: ConnId,
        role: QueueRole,
        reason: String,
    },
    /// One step of a queue's DH-HMAC-CHAP exchange, for the authentication thread (its modular
    /// exponentiations, 2 ms for ffdhe2048 … 53 ms for ffdhe8192, stall neither a poller nor
    /// the control thread).
    Auth(AuthJob),
    /// The authentication thread ran a step: back to the queue's poller.
    AuthDone(AuthJob, AuthResult),
    /// Close this connection, wherever its queue lives (an iSCSI session reinstated by a new
    /// login of the same initiator and ISID).
    CloseConn { conn: ConnId, reason: String },
}

/// An Authentication Send's payload or an Authentication Receive, for the control thread.
pub(crate) struct AuthJob {
    /// The poller to answer.
    pub poller: usize,
    /// The queue's connection.
    pub conn: ConnId,
    /// The queue's authenticator, handed over for the step.
    pub auth: Box<raidline_auth::Authenticator>,
    /// What to do.
    pub op: AuthOp,
}

/// One authentication step.
pub(crate) enum AuthOp {
    /// Authentication Send: this payload.
    Send(Vec<u8>),
    /// Authentication Receive with this allocation length.
    Receive(usize),
}

/// What a step gave, back to the queue's poller with its authenticator.
pub(crate) enum AuthResult {
    /// What the Send changed.
    Sent(raidline_auth::Event),
    /// The Receive's payload, or the allocation length the message needs.
    Received(Result<Vec<u8>, usize>),
}

impl AuthJob {
    /// Runs the step.
    pub(crate) fn run(&mut self) -> AuthResult {
        match &self.op {
            AuthOp::Send(payload) => AuthResult::Sent(self.auth.send(payload)),
            AuthOp::Receive(al) => AuthResult::Received(self.auth.receive(*al)),
        }
    }
}

/// State shared by the control thread, the pollers and the management interface.
pub struct Shared {
    /// Subsystems and live controllers (control path only).
    pub registry: Mutex<Registry>,
    /// Live controllers by id.
    pub controllers: Mutex<BTreeMap<u16, CtrlEntry>>,
    /// Served namespaces (fixed after start).
    pub namespaces: Vec<Arc<NsEntry>>,
    /// Running arrays.
    pub arrays: Vec<Arc<ArrayEntry>>,
    /// Listen ports, for the discovery log.
    pub ports: Vec<Port>,
    /// Discovery log generation counter.
    pub genctr: AtomicU64,
    /// Transport limits.
    pub limits: Limits,
    /// Data-path counters.
    pub data_path: DataPathMetrics,
    /// Shutdown requested: pollers drain.
    pub stopping: AtomicBool,
    /// The control thread exits.
    pub exit: AtomicBool,
    /// When the target started.
    pub started: Instant,
    /// Congestion control: the algorithm, its current parameters, the change counter.
    pub cc: CcState,
    /// What each poller publishes about its queues, by connection (removed when one closes).
    pub queue_stats: Mutex<HashMap<ConnId, Arc<QueueStats>>>,
    pub(crate) to_control: Sender<ControlMsg>,
    /// Wakes the control thread (after a message or a stop request).
    pub(crate) wake_control: Notifier,
    /// Wake each poller (after an admin event was posted to a controller).
    pub(crate) poller_wakers: Mutex<Vec<Notifier>>,
    /// Every poller's pool arenas (registered with the parity engine of an array that starts
    /// after the pollers did).
    pub(crate) pool_arenas: Mutex<Vec<Arc<BufferArena>>>,
    /// What is served over iSER, if anything.
    pub(crate) iscsi: Option<Arc<iscsi::IscsiServed>>,
    /// iSCSI sessions in full-feature phase, by connection (for `raidline status`).
    pub iscsi_sessions: Mutex<HashMap<ConnId, crate::mgmt::IscsiSessionStatus>>,
}

/// Wakes a thread sleeping on a [`backend::Waker`].
pub(crate) type Notifier = Arc<dyn Fn() + Send + Sync>;

impl Shared {
    /// Sends `msg` to the control thread and wakes it.
    pub(crate) fn tell_control(&self, msg: ControlMsg) {
        let _ = self.to_control.send(msg);
        (self.wake_control)();
    }

    /// Wakes every poller, so the admin events just posted reach parked Asynchronous Event
    /// Requests now rather than at an idle poller's backstop timeout.
    pub(crate) fn wake_pollers(&self) {
        for w in self
            .poller_wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            w();
        }
    }

    /// Activates or deactivates namespace `nsid` of subsystem `subnqn` at run time (the
    /// operator's `raidline ns enable|disable`, like nvmet's configfs `enable`). A deactivated
    /// namespace leaves the active list, reads as zeroes in Identify and answers I/O with
    /// *Internal Path Error*; commands already accepted finish normally. Every controller of
    /// the subsystem gets a Namespace Attribute Changed notice with `nsid` in its Changed
    /// Namespace List, so a Linux host rescans and removes or re-adds the block device. The
    /// state is not persisted: a restart serves every configured namespace.
    pub fn set_namespace_active(
        &self,
        subnqn: &str,
        nsid: u32,
        active: bool,
    ) -> Result<String, String> {
        let what = if active { "enabled" } else { "disabled" };
        let Some(ns) = self
            .namespaces
            .iter()
            .find(|n| n.subnqn.as_str() == subnqn && n.info.nsid == nsid)
        else {
            let known: Vec<String> = self
                .namespaces
                .iter()
                .map(|n| format!("{} nsid {}", n.subnqn, n.info.nsid))
                .collect();
            return Err(format!(
                "no namespace {nsid} in subsystem {subnqn} (configured: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        if let (true, Backend::Pending(slot)) = (active, &ns.backend) {
            if slot.get().is_none() {
                let array = ns.array.as_deref().unwrap_or("?");
                return Err(format!(
                    "namespace {nsid} of {subnqn} is backed by array {array}, which is not \
                     running (see raidline status); start it with raidline array start {array}"
                ));
            }
        }
        if ns.info.active.set(active) == active {
            return Ok(format!("namespace {nsid} of {subnqn} is already {what}"));
        }
        let told = self.announce_ns_change(subnqn, &[nsid]);
        tracing::info!(
            "namespace {nsid} of {subnqn} {what} by the operator; {told} controller(s) sent a namespace-change notice"
        );
        Ok(format!(
            "namespace {nsid} of {subnqn} {what}; {told} controller(s) notified"
        ))
    }

    /// Posts a Namespace Attribute Changed notice naming `nsids` to every controller of
    /// `subnqn` and wakes the pollers (so parked Asynchronous Event Requests complete now);
    /// returns how many controllers were told.
    fn announce_ns_change(&self, subnqn: &str, nsids: &[u32]) -> usize {
        let notice = AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED);
        let mut told = 0usize;
        let ctrls = self.controllers.lock().unwrap_or_else(|p| p.into_inner());
        for e in ctrls.values().filter(|e| e.subnqn == subnqn) {
            let mut c = e.ctrl.lock().unwrap_or_else(|p| p.into_inner());
            c.post_event(notice, nsids);
            told += 1;
        }
        drop(ctrls);
        self.wake_pollers();
        told
    }

    /// Puts `array`, just assembled by the operator's `raidline array start`, in the slot of
    /// the refused array `entry`: its parity engine gets the pools' memory, the refusal is
    /// cleared, its namespaces become active and every controller of their subsystems gets a
    /// namespace-change notice (as `raidline ns enable` does). From then on the pollers serve
    /// it (each starts its queue to the array at its next pass) and its maintenance thread
    /// runs it like any other array. Returns one line per subsystem told.
    ///
    /// Refused (and `array` is handed back, not stopped: its superblocks keep saying what they
    /// said) when the slot is already set or `array`'s layout is not the one the namespaces
    /// were sized from.
    pub fn attach_array(
        &self,
        entry: &ArrayEntry,
        array: Arc<Array>,
    ) -> Result<Vec<String>, (String, Arc<Array>)> {
        if let Some(want) = entry.slot.geometry() {
            let got = array.geometry();
            if want.capacity_bytes() != got.capacity_bytes()
                || want.stripe_data_blocks() != got.stripe_data_blocks()
            {
                return Err((
                    format!(
                        "array {} assembled with capacity {} B, {} data blocks per stripe; its \
                         namespaces were configured from superblocks saying {} B, {}: not \
                         attached (restart the daemon to serve it)",
                        entry.name,
                        got.capacity_bytes(),
                        got.stripe_data_blocks(),
                        want.capacity_bytes(),
                        want.stripe_data_blocks()
                    ),
                    array,
                ));
            }
        }
        let engine = array.parity_engine();
        if let Err(e) = engine.register_memory(array.scratch_arena()) {
            tracing::warn!(
                "array {}: parity engine cannot map its scratch memory: {e}",
                entry.name
            );
        }
        for arena in self
            .pool_arenas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            if let Err(e) = engine.register_memory(arena) {
                tracing::warn!(
                    "array {}: parity engine cannot map the pool: {e}",
                    entry.name
                );
            }
        }
        if let Err(array) = entry.slot.set(array) {
            return Err((format!("array {} is already running", entry.name), array));
        }
        *entry.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let mut changed: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for n in &self.namespaces {
            if let Backend::Pending(slot) = &n.backend {
                if Arc::ptr_eq(slot, &entry.slot) {
                    n.info.active.set(true);
                    changed
                        .entry(n.subnqn.to_string())
                        .or_default()
                        .push(n.info.nsid);
                }
            }
        }
        let mut lines = Vec::new();
        for (subnqn, nsids) in changed {
            let told = self.announce_ns_change(&subnqn, &nsids);
            tracing::info!(
                "array {}: namespace(s) {nsids:?} of {subnqn} active; {told} controller(s) sent a namespace-change notice",
                entry.name
            );
            lines.push(format!(
                "namespace(s) {} of {subnqn} active, {told} controller(s) notified",
                nsids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(lines)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("namespaces", &self.namespaces.len())
            .field("arrays", &self.arrays.len())
            .finish()
    }
}

/// One namespace to serve.
#[derive(Debug)]
pub struct NamespaceSpec {
    /// What controllers report (nsid, size, identifiers).
    pub info: NamespaceInfo,
    /// Where its blocks are.
    pub backend: Backend,
    /// The array's name, for array namespaces.
    pub array: Option<String>,
}

/// One subsystem to serve.
#[derive(Debug)]
pub struct SubsystemSpec {
    /// NQN, serial, model, hosts (its `namespaces` field is filled from `namespaces` below).
    pub subsystem: Subsystem,
    /// Namespaces.
    pub namespaces: Vec<NamespaceSpec>,
}

/// Everything a target needs to start.
#[derive(Debug)]
pub struct TargetSpec {
    /// Listen addresses (port 0: any free port; see [`Target::local_addrs`]).
    pub listen: Vec<SocketAddr>,
    /// Poller threads.
    pub pollers: usize,
    /// How pollers wait.
    pub poll_mode: PollMode,
    /// Transport limits.
    pub limits: Limits,
    /// Storage worker threads per namespace per poller.
    pub workers_per_namespace: usize,
    /// Where pollers run storage requests.
    pub io_path: crate::config::IoPath,
    /// Whether members with poll queues complete by polling (a second, polled ring).
    pub io_poll: crate::config::IoPoll,
    /// Payload pool per poller: (count, bytes) of small buffers and of large buffers.
    pub pool_small: (usize, usize),
    /// Large buffers (max transfer size).
    pub pool_large: (usize, usize),
    /// Subsystems.
    pub subsystems: Vec<SubsystemSpec>,
    /// Arrays (the namespaces refer to them by name).
    pub arrays: Vec<(String, Arc<Array>, u64)>,
    /// Configured arrays that did not assemble: served once `raidline array start` assembles
    /// them (their namespaces use [`Backend::Pending`] and start inactive).
    pub refused: Vec<RefusedArray>,
    /// Per-QP pacing of I/O queues; `None`: not paced (the default here; the daemon takes it
    /// from the configuration's `[cc]`).
    pub cc: Option<CcSpec>,
    /// Where each array's current members are remembered (`crate::remember`); `None`: nowhere.
    pub state_dir: Option<std::path::PathBuf>,
    /// How often the arrays' write-intent bitmaps are aged ([`BITMAP_AGING`] by default).
    pub bitmap_aging: Duration,
    /// The iSER target: portals and iSCSI targets (none configured: not served).
    pub iscsi: crate::config::IscsiConfig,
}

impl TargetSpec {
    /// Defaults for `limits`: one poller, adaptive polling, a pool of 256 × 128 KiB and
    /// 16 × max-transfer buffers, 16 storage workers per namespace.
    pub fn new(limits: Limits) -> TargetSpec {
        TargetSpec {
            listen: Vec::new(),
            pollers: 1,
            poll_mode: PollMode::Adaptive,
            limits,
            workers_per_namespace: crate::config::DEFAULT_STORAGE_WORKERS as usize,
            io_path: crate::config::IoPath::default(),
            io_poll: crate::config::IoPoll::default(),
            pool_small: (256, 128 << 10),
            pool_large: (16, limits.max_transfer as usize),
            subsystems: Vec::new(),
            arrays: Vec::new(),
            refused: Vec::new(),
            cc: None,
            state_dir: None,
            bitmap_aging: BITMAP_AGING,
            iscsi: Default::default(),
        }
    }
}

/// Why the target did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The RDMA device refused a resource.
    #[error("RDMA: {0}")]
    Fabric(#[from] FabricError),
    /// Listening failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: FabricError,
    },
    /// A thread or worker could not start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The specification is inconsistent.
    #[error("{0}")]
    Spec(String),
}

/// A running target.
pub struct Target {
    shared: Arc<Shared>,
    control: Option<JoinHandle<()>>,
    pollers: Vec<JoinHandle<()>>,
    maintenance: Vec<JoinHandle<()>>,
    bound: Vec<SocketAddr>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("bound", &self.bound)
            .finish()
    }
}

impl Target {
    /// Starts serving `spec` on `fabric`. Returns once every listener is bound.
    pub fn start<F: Fabric>(fabric: F, spec: TargetSpec) -> Result<Target, StartError> {
        let cc = CcState::new(spec.cc.as_ref())
            .map_err(|e| StartError::Spec(format!("congestion control: {e}")))?;
        let fabric = Arc::new(fabric);
        let pd = fabric.alloc_pd()?;
        let mut cm = fabric.create_cm()?;
        let mut bound = Vec::new();
        for addr in &spec.listen {
            let b = cm.listen(*addr, 128).map_err(|source| StartError::Listen {
                addr: *addr,
                source,
            })?;
            tracing::info!("listening on {b} (NVMe/RDMA)");
            bound.push(b);
        }
        let mut iser_bound = Vec::new();
        for addr in &spec.iscsi.listen {
            let b = cm.listen(*addr, 128).map_err(|source| StartError::Listen {
                addr: *addr,
                source,
            })?;
            tracing::info!("listening on {b} (iSCSI/iSER)");
            iser_bound.push(b);
        }
        let mut namespaces = Vec::new();
        let mut subsystems = Vec::new();
        for s in spec.subsystems {
            let mut sub = s.subsystem;
            sub.namespaces = s.namespaces.iter().map(|n| n.info.clone()).collect();
            for n in s.namespaces {
                namespaces.push(Arc::new(NsEntry {
                    subnqn: sub.nqn.clone(),
                    info: n.info,
                    backend: n.backend,
                    array: n.array,
                    metrics: NamespaceMetrics::default(),
                }));
            }
            subsystems.push(sub);
        }
        let entry = |name: String, slot, refused, config, rate| {
            let (jobs, jobs_rx) = std::sync::mpsc::channel();
            Arc::new(ArrayEntry {
                jobs,
                jobs_rx: Mutex::new(Some(jobs_rx)),
                state_file: spec
                    .state_dir
                    .as_deref()
                    .map(|d| crate::remember::file_for(d, &name)),
                bitmap_aging: spec.bitmap_aging,
                name,
                slot,
                refused: Mutex::new(refused),
                config,
                starting: Mutex::new(()),
                rebuild_bytes_per_sec: rate,
                scrub_requested: AtomicBool::new(false),
                scrub: Mutex::new(None),
                resync: Mutex::new(None),
            })
        };
        let mut arrays: Vec<Arc<ArrayEntry>> = Vec::new();
        for (name, array, rate) in spec.arrays {
            let slot = Arc::new(ArraySlot::running(array));
            arrays.push(entry(name, slot, None, None, rate));
        }
        for r in spec.refused {
            tracing::warn!(
                "array {}: not running; its namespaces are inactive until `raidline array start {}`",
                r.name,
                r.name
            );
            arrays.push(entry(
                r.name,
                r.slot,
                Some(r.refusal),
                Some(r.config),
                r.rebuild_bytes_per_sec,
            ));
        }
        let ports = bound
            .iter()
            .enumerate()
            .map(|(i, a)| Port {
                id: i as u16 + 1,
                addr: *a,
            })
            .collect();
        let iscsi = if spec.iscsi.targets.is_empty() {
            None
        } else {
            let served = iscsi::IscsiServed::new(
                &spec.iscsi,
                iser_bound,
                &namespaces,
                &subsystems,
                spec.limits.max_transfer,
            )
            .map_err(StartError::Spec)?;
            for t in &served.targets {
                tracing::info!(
                    "iSCSI target {}: {}",
                    t.name,
                    t.luns
                        .iter()
                        .map(|l| format!(
                            "LUN {} = {} nsid {}",
                            l.lun, namespaces[l.ns].subnqn, namespaces[l.ns].info.nsid
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Some(Arc::new(served))
        };
        let (to_control, control_rx) = channel();
        let control_waker = backend::Waker::new()?;
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry::new(spec.limits, subsystems)),
            controllers: Mutex::new(BTreeMap::new()),
            namespaces,
            arrays,
            ports,
            genctr: AtomicU64::new(1),
            limits: spec.limits,
            data_path: DataPathMetrics::default(),
            stopping: AtomicBool::new(false),
            exit: AtomicBool::new(false),
            started: Instant::now(),
            cc,
            queue_stats: Mutex::new(HashMap::new()),
            to_control,
            wake_control: control_waker.notifier(),
            poller_wakers: Mutex::new(Vec::new()),
            pool_arenas: Mutex::new(Vec::new()),
            iscsi,
            iscsi_sessions: Mutex::new(HashMap::new()),
        });
        for a in &shared.arrays {
            let Some(array) = a.array() else { continue };
            let scratch = array.scratch_arena().clone();
            if let Err(e) = array.parity_engine().register_memory(&scratch) {
                tracing::warn!(
                    "array {}: parity engine cannot map its scratch memory: {e}",
                    a.name
                );
            }
        }
        let mut links = Vec::new();
        let mut pollers = Vec::new();
        // Every work request a poller's queue pairs have posted may complete at once (a
        // closing queue pair flushes all of its own), so the control thread places queue
        // pairs only while they fit (`PollerLink::cq_used`): as large as the device allows.
        let cq_depth = fabric.attrs().max_cqe.clamp(256, 65_536);
        for id in 0..spec.pollers.max(1) {
            let cq = fabric.create_cq(cq_depth)?;
            let pool = pool::Pool::new(&*fabric, &pd, spec.pool_small, spec.pool_large)?;
            let arenas = pool.arenas();
            shared
                .pool_arenas
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(arenas.iter().cloned());
            // Parity engines that compute in place (the GPU's mapped host memory) need the
            // pool's memory registered; CPU engines ignore this.
            for a in &shared.arrays {
                let Some(array) = a.array() else { continue };
                for arena in &arenas {
                    if let Err(e) = array.parity_engine().register_memory(arena) {
                        tracing::warn!("array {}: parity engine cannot map the pool: {e}", a.name);
                    }
                }
            }
            let waker = backend::Waker::new()?;
            // One shared receive queue per poller for all its I/O queue pairs (SPDK's poll
            // groups, nvmet's use_srq), where the device offers one: receive memory then stays
            // the same however many hosts and queues connect.
            let srq = match spec.limits.srq_depth {
                0 => None,
                depth if fabric.attrs().max_srq_wr < depth => {
                    tracing::info!(
                        "poller {id}: the device offers shared receive queues of {} at most \
                         (configured {depth}); every queue pair posts its own receives",
                        fabric.attrs().max_srq_wr
                    );
                    None
                }
                depth => {
                    let icd = spec.limits.in_capsule_data as usize;
                    let made = fabric.create_srq(&pd, depth, 2).and_then(|q| {
                        let account = &shared.data_path.receive_bytes;
                        let (bufs, slots) = pool::RecvBuffers::new(
                            &*fabric,
                            &pd,
                            depth as usize,
                            icd,
                            true,
                            account,
                        )?;
                        Ok((q, bufs, slots))
                    });
                    match made {
                        Ok(x) => Some(x),
                        Err(e) => {
                            tracing::warn!(
                                "poller {id}: no shared receive queue ({e}); every queue pair \
                                 posts its own receives"
                            );
                            None
                        }
                    }
                }
            };
            // The ring's fixed buffers: the pool, the shared receive queue's in-capsule data
            // buffers (a small write's data goes to the drives from there) and every running
            // array's scratch (old data and parity): operations within them go out as
            // READ_FIXED / WRITE_FIXED, with no page pinning per operation. Receive rings of
            // queue pairs without a shared queue come and go with their queue pairs and are not
            // registered (their data goes out as plain writes), nor is the scratch of an array
            // assembled after start (`raidline array start`).
            let mut fixed = arenas.clone();
            if let Some((_, _, slots)) = &srq {
                fixed.extend(
                    slots
                        .iter()
                        .find_map(|s| s.icd.as_ref())
                        .map(|b| b.arena().clone()),
                );
            }
            fixed.extend(
                shared
                    .arrays
                    .iter()
                    .filter_map(|a| a.array())
                    .map(|a| a.scratch_arena().clone()),
            );
            let ring = match spec.io_path {
                crate::config::IoPath::Workers => None,
                crate::config::IoPath::Ring => match raidline_raid::OwnedRing::new(256) {
                    Ok(mut r) => {
                        match r.register_arenas(&fixed) {
                            Ok(()) => tracing::info!(
                                "poller {id}: io_uring with {} fixed-buffer regions, completions \
                                 {}",
                                fixed.len(),
                                if r.deferred_completions() {
                                    "run at the poller's pass (deferred task work)"
                                } else {
                                    "signalled to the poller"
                                }
                            ),
                            Err(e) => tracing::warn!(
                                "poller {id}: pool, receive buffers and scratch not registered \
                                 with its io_uring ({e}); plain reads and writes"
                            ),
                        }
                        if spec.io_poll == crate::config::IoPoll::On {
                            match r.enable_polling(256) {
                                Ok(()) => tracing::info!(
                                    "poller {id}: a polled io_uring for the reads and writes of \
                                     members with poll queues (io_poll = \"on\")"
                                ),
                                Err(e) => tracing::warn!(
                                    "poller {id}: no polled io_uring ({e}); member I/O completes \
                                     by interrupt"
                                ),
                            }
                        }
                        Some(r)
                    }
                    Err(e) => {
                        tracing::warn!(
                            "poller {id}: no io_uring ({e}); storage requests go to worker threads"
                        );
                        None
                    }
                },
            };
            // With the ring, an array namespace's queue hands what the ring path gives back
            // to the array's maintenance thread: no storage worker threads.
            let mut nsq = Vec::new();
            for n in &shared.namespaces {
                let maint = ring.as_ref().and_then(|_| {
                    let name = n.array.as_deref()?;
                    let a = shared.arrays.iter().find(|a| a.name == name)?;
                    Some(a.jobs.clone())
                });
                nsq.push(backend::NsQueue::start(
                    &n.backend,
                    spec.workers_per_namespace,
                    arenas.clone(),
                    waker.notifier(),
                    maint,
                )?);
            }
            let srq_handle = srq
                .as_ref()
                .map(|(q, _, _)| raidline_fabric::SharedReceiveQueue::handle(q));
            let (tx, rx) = channel();
            shared
                .poller_wakers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(waker.notifier());
            links.push(control::PollerLink {
                tx,
                wake: waker.notifier(),
                cq: raidline_fabric::CompletionQueue::handle(&cq),
                cq_used: if srq_handle.is_some() {
                    spec.limits.srq_depth
                } else {
                    0
                },
                srq: srq_handle,
                cq_entries: cq_depth,
            });
            let io = poller::PollerIo {
                cq,
                rx,
                pool,
                nsq,
                waker,
                ring,
                srq,
            };
            let p = poller::Poller::new(id, shared.clone(), io, spec.poll_mode);
            pollers.push(
                std::thread::Builder::new()
                    .name(format!("poller-{id}"))
                    .spawn(move || p.run())?,
            );
        }
        let ctl = control::Control::new(
            fabric,
            pd,
            cm,
            shared.clone(),
            (control_rx, control_waker),
            links,
        );
        let control = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || ctl.run())?;
        let mut maintenance = Vec::new();
        for a in &shared.arrays {
            let (a, shared) = (a.clone(), shared.clone());
            maintenance.push(
                std::thread::Builder::new()
                    .name(format!("maint-{}", a.name))
                    .spawn(move || maintain(&a, &shared))?,
            );
        }
        Ok(Target {
            shared,
            control: Some(control),
            pollers,
            maintenance,
            bound,
        })
    }

    /// The bound listen addresses, in the order of the spec.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.bound
    }

    /// The shared state (for management and metrics).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Drains and stops: see the module documentation. Returns the arrays' stop errors.
    pub fn shutdown(mut self) -> Vec<String> {
        self.stop_threads();
        let mut errors = Vec::new();
        for a in &self.shared.arrays {
            let Some(array) = a.array() else {
                tracing::info!("array {}: was not running; left as it is", a.name);
                continue;
            };
            match array.stop() {
                Ok(()) => tracing::info!("array {}: stopped clean", a.name),
                Err(e) => {
                    tracing::error!("array {}: stop failed: {e}", a.name);
                    errors.push(format!("{}: {e}", a.name));
                }
            }
        }
        for n in &self.shared.namespaces {
            if let Backend::File(m) = &n.backend {
                if let Err(e) = m.flush() {
                    errors.push(format!("{}: {e}", m.name()));
                }
            }
        }
        errors
    }

    fn stop_threads(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        (self.shared.wake_control)();
        for p in self.pollers.drain(..) {
            let _ = p.join();
        }
        self.shared.exit.store(true, Ordering::Release);
        (self.shared.wake_control)();
        if let Some(c) = self.control.take() {
            let _ = c.join();
        }
        for m in self.maintenance.drain(..) {
            let _ = m.join();
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// How often the write-intent bitmap is aged by default (md's default `daemon_sleep`).
pub const BITMAP_AGING: Duration = Duration::from_secs(5);

/// Per-array background work: resync after an unclean stop, rebuild onto a spare, scrub on
/// request, each throttled, in small steps so a shutdown never waits long. A refused array's
/// thread waits until the array is started.
fn maintain(a: &ArrayEntry, shared: &Shared) {
    let mut exec = AnyExecutor::best(&[]);
    let mut throttle = Throttle::new(Some(a.rebuild_bytes_per_sec.max(1 << 20)));
    let mut scrubbing = false;
    let mut remembered = Vec::new();
    let mut aged = Instant::now();
    let jobs = a.jobs_rx.lock().unwrap_or_else(|p| p.into_inner()).take();
    // Waits up to `d` for requests the pollers' ring path hands back, and serves every one
    // there is (a redo marks a failed member, so it comes before the background steps).
    let serve_jobs = |exec: &mut AnyExecutor, d: Duration| {
        let Some(rx) = &jobs else {
            std::thread::sleep(d);
            return;
        };
        let first = match rx.recv_timeout(d) {
            Ok(j) => j,
            Err(_) => return,
        };
        for job in std::iter::once(first).chain(rx.try_iter()) {
            job.serve(a.array().map(|a| &**a), exec);
        }
    };
    while !shared.stopping.load(Ordering::Acquire) {
        // A refused array has nothing to maintain until `raidline array start` assembles it.
        let Some(array) = a.array() else {
            serve_jobs(&mut exec, Duration::from_millis(100));
            continue;
        };
        serve_jobs(&mut exec, Duration::ZERO);
        a.remember(&mut remembered);
        // A write on a poller's ring found the array clean: marking it dirty writes the
        // superblocks, which a poller must not wait for; the write is parked meanwhile.
        match array.mark_dirty_if_wanted() {
            Ok(true) => tracing::debug!("array {}: marked dirty for its first write", a.name),
            Ok(false) => {}
            Err(e) => tracing::warn!("array {}: cannot mark it dirty: {e}", a.name),
        }
        // md's bitmap daemon: every 5 s a region not written for a whole period loses its
        // write-intent bit, so an unclean stop resyncs what was written lately, not everything
        // written since the start.
        if aged.elapsed() >= a.bitmap_aging {
            aged = Instant::now();
            match array.age_bitmap() {
                Ok(0) => {}
                Ok(n) => tracing::debug!("array {}: {n} idle bitmap region(s) cleared", a.name),
                Err(e) => tracing::warn!("array {}: bitmap aging failed: {e}", a.name),
            }
        }
        let step = if array.resync_pending() {
            array.resync_step(&mut exec, 16).map(|p| {
                *a.resync.lock().unwrap_or_else(|e| e.into_inner()) = p.filter(|p| !p.finished);
                if p.is_some_and(|p| p.finished) {
                    tracing::info!("array {}: resync finished", a.name);
                }
                p.is_some()
            })
        } else if array.rebuild_progress().is_some_and(|p| !p.finished) {
            let replacing = array.replace_status();
            array.rebuild_step(&mut exec, 16).map(|p| {
                if let Some(p) = p {
                    match (&replacing, p.finished) {
                        (Some(r), true) if array.replace_status().is_none() => {
                            tracing::info!(
                                "array {}: replace finished: {} holds role {} (was {})",
                                a.name,
                                r.new,
                                r.role.0,
                                r.old.as_deref().unwrap_or("missing")
                            );
                        }
                        (_, true) => tracing::info!("array {}: rebuild finished", a.name),
                        _ => {}
                    }
                }
                true
            })
        } else if scrubbing || a.scrub_requested.swap(false, Ordering::AcqRel) {
            if !scrubbing {
                tracing::info!("array {}: scrub started", a.name);
            }
            scrubbing = true;
            array.scrub_step(&mut exec, 16, true).map(|p| {
                *a.scrub.lock().unwrap_or_else(|e| e.into_inner()) = (!p.finished).then_some(p);
                if p.finished {
                    scrubbing = false;
                    tracing::info!(
                        "array {}: scrub finished ({} stripes repaired)",
                        a.name,
                        p.mismatches
                    );
                }
                true
            })
        } else {
            Ok(false)
        };
        match step {
            Ok(true) => {
                let bytes =
                    16 * (array.geometry().chunk_bytes() * array.geometry().members()) as u64;
                let wait = throttle.account(bytes, Instant::now());
                serve_jobs(&mut exec, wait);
            }
            Ok(false) => serve_jobs(&mut exec, Duration::from_millis(100)),
            Err(e) => {
                tracing::error!("array {}: background sync failed: {e}", a.name);
                scrubbing = false;
                *a.scrub.lock().unwrap_or_else(|e| e.into_inner()) = None;
                serve_jobs(&mut exec, Duration::from_secs(1));
            }
        }
    }
    // Stopping: the pollers drain, and what they hand back meanwhile is still served here,
    // until they are all gone.
    while !shared.exit.load(Ordering::Acquire) {
        serve_jobs(&mut exec, Duration::from_millis(10));
    }
    serve_jobs(&mut exec, Duration::ZERO);
    a.remember(&mut remembered);
}
