//! Shared rig of the end-to-end tests: a RAID-5 array over in-memory members (optionally
//! behind fault-injecting wrappers), a [`Target`] serving it over the in-memory fabric, the
//! user-space initiator connected to it, and [`RawQueue`], a bare NVMe/RDMA queue that sends
//! SQEs exactly as built (any SGL, any opcode) so malformed capsules can reach the target.
//!
//! Invariants: every wait here is bounded (a few seconds), so a target that does not answer
//! fails the test instead of hanging it; namespace identifiers and the serial are derived the
//! way `service::build_spec` derives them (from the array UUID stored on the members).

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_fabric::mem::{MemFabric, MemNetwork};
use raidline_fabric::{
    Access, CmEvent, Completion, CompletionQueue, ConnId, ConnectParams, ConnectionManager,
    DmaMemory, Fabric, MemoryRegion, Payload, QpCaps, QpInit, QueuePair, RecvWr, SendOp, SendWr,
    Sge, WcStatus, WrId,
};
use raidline_initiator::{Controller, ControllerOptions, HostIdentity, Namespace};
use raidline_proto::cqe::CQE_LEN;
use raidline_proto::fabrics::{Connect, ConnectData};
use raidline_proto::rdma_cm::{CmReject, CmRequest};
use raidline_proto::sqe::SQE_LEN;
use raidline_proto::text::Nqn;
use raidline_proto::{Cqe, SglDescriptor, Sqe};
use raidline_raid::{
    Array, ArrayConfig, ChunkSize, CpuXor, FaultHandle, FaultyMember, MemMember, Member,
};
use raidline_target::daemon::{Backend, NamespaceSpec, SubsystemSpec, Target, TargetSpec};
use raidline_target::subsystem::{HostAccess, Limits, NamespaceInfo, Subsystem};

/// The subsystem every rig serves.
pub const SUBNQN: &str = "nqn.2026-11.io.raidline:test";
/// Where the first target listens.
pub const ADDR: &str = "10.0.0.1:4420";
/// Chunk size of the rig's arrays.
pub const CHUNK: usize = 64 << 10;

/// A running target over an array of in-memory members.
pub struct Rig {
    /// The fabric network (hosts make devices on it).
    pub net: MemNetwork,
    /// The target.
    pub target: Target,
    /// The members' shared bytes (clones see the same media).
    pub disks: Vec<MemMember>,
    /// The array served as namespace 1.
    pub array: Arc<Array>,
    /// Fault handles, one per member, when the rig was built with [`RigOptions::faulty`].
    pub faults: Vec<FaultHandle>,
}

/// How to build a rig.
#[derive(Clone, Debug)]
pub struct RigOptions {
    /// Array members.
    pub members: usize,
    /// Bytes per member.
    pub member_bytes: usize,
    /// Which hosts may connect.
    pub hosts: HostAccess,
    /// Transport limits.
    pub limits: Limits,
    /// Wrap each member in a [`FaultyMember`].
    pub faulty: bool,
    /// Poller threads.
    pub pollers: usize,
    /// Hosts that must authenticate (DH-HMAC-CHAP).
    pub auth: std::collections::BTreeMap<Nqn, Arc<raidline_auth::Policy>>,
}

impl Default for RigOptions {
    fn default() -> Self {
        RigOptions {
            members: 4,
            member_bytes: (8 << 20) + (1 << 20),
            hosts: HostAccess::Any,
            limits: Limits::default(),
            faulty: false,
            pollers: 1,
            auth: Default::default(),
        }
    }
}

/// `n` zeroed in-memory members named d0, d1, ...
pub fn mem_disks(n: usize, bytes: usize) -> Vec<MemMember> {
    (0..n)
        .map(|i| MemMember::new(&format!("d{i}"), bytes))
        .collect()
}

/// The members as the array takes them, each optionally behind a fault injector.
pub fn members_of(disks: &[MemMember], faulty: bool) -> (Vec<Arc<dyn Member>>, Vec<FaultHandle>) {
    let mut handles = Vec::new();
    let members = disks
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let m: Arc<dyn Member> = Arc::new(d.clone());
            if faulty {
                let f = FaultyMember::new(m, 0x5EED + i as u64);
                handles.push(f.handle());
                Arc::new(f) as Arc<dyn Member>
            } else {
                m
            }
        })
        .collect();
    (members, handles)
}

/// Creates a new clean RAID-5 array (64 KiB chunks) over `members`.
pub fn create_array(members: Vec<Arc<dyn Member>>) -> Arc<Array> {
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(CHUNK as u32).expect("chunk"),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    Arc::new(Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).expect("create"))
}

/// A rig as `o` describes it, listening on [`ADDR`].
pub fn rig(o: &RigOptions) -> Rig {
    let disks = mem_disks(o.members, o.member_bytes);
    let (members, faults) = members_of(&disks, o.faulty);
    let array = create_array(members);
    let net = MemNetwork::new();
    let mut spec = spec_for(
        ADDR.parse().expect("addr"),
        array.clone(),
        o.hosts.clone(),
        o.limits,
    );
    spec.pollers = o.pollers;
    spec.subsystems[0].subsystem.auth = o.auth.clone();
    let target = Target::start(net.device("target0"), spec).expect("target start");
    Rig {
        net,
        target,
        disks,
        array,
        faults,
    }
}

/// The default rig: 4 members of 9 MiB, any host.
pub fn default_rig() -> Rig {
    rig(&RigOptions::default())
}

/// The target specification serving `array` as namespace 1 of [`SUBNQN`], identifiers and
/// serial derived from the array UUID as `service::build_spec` does.
pub fn spec_for(
    addr: SocketAddr,
    array: Arc<Array>,
    hosts: HostAccess,
    limits: Limits,
) -> TargetSpec {
    let geo = *array.geometry();
    let info = NamespaceInfo {
        nsid: 1,
        block_size: 4096,
        blocks: geo.capacity_blocks(),
        ids: raidline_target::identity::for_array(array.uuid().0, 1),
        preferred_write_blocks: geo.stripe_data_blocks() as u32,
        deallocate: true,
        active: Default::default(),
    };
    let mut spec = TargetSpec::new(limits);
    spec.listen = vec![addr];
    spec.pool_small = (64, 128 << 10);
    spec.pool_large = (8, limits.max_transfer as usize);
    spec.workers_per_namespace = 2;
    spec.subsystems.push(SubsystemSpec {
        subsystem: Subsystem {
            nqn: Nqn::new(SUBNQN).expect("nqn"),
            serial: raidline_target::identity::serial_for(&array.uuid().0),
            model: "Raidline RAID-5".into(),
            hosts,
            auth: Default::default(),
            namespaces: vec![],
        },
        namespaces: vec![NamespaceSpec {
            info,
            backend: Backend::Array(array.clone()),
            array: Some("array0".into()),
        }],
    });
    spec.arrays.push(("array0".into(), array, 100 << 20));
    spec
}

/// Starts a target on device `dev` of `net`.
pub fn start(
    net: &MemNetwork,
    dev: &str,
    addr: SocketAddr,
    array: Arc<Array>,
    hosts: HostAccess,
    limits: Limits,
) -> Target {
    Target::start(net.device(dev), spec_for(addr, array, hosts, limits)).expect("target start")
}

/// Host number `n`'s identity (its NQN is the UUID form of `[n; 16]`).
pub fn host(n: u8) -> HostIdentity {
    HostIdentity::from_uuid([n; 16])
}

/// Options for host `h` to [`SUBNQN`]: 1 MiB transfers, 10 s deadlines, KATO 30 s (a test
/// thread that is not scheduled for a few seconds on a loaded machine must not lose its
/// controller; the keep-alive tests set their own KATO).
pub fn options(h: u8) -> ControllerOptions {
    let mut o = ControllerOptions::new(host(h), Nqn::new(SUBNQN).expect("nqn"));
    o.kato = Duration::from_secs(30);
    o.max_io_bytes = 1 << 20;
    o.admin_timeout = Duration::from_secs(10);
    o.io_timeout = Duration::from_secs(10);
    o
}

/// Connects host `h` with `o` to the rig's first address.
pub fn connect_with(
    rig: &Rig,
    h: u8,
    o: ControllerOptions,
) -> Result<Controller<MemFabric>, raidline_initiator::Error> {
    Controller::connect(
        rig.net.device(&format!("host{h}")),
        rig.target.local_addrs()[0],
        o,
    )
}

/// Connects host `h` with [`options`].
pub fn connect(rig: &Rig, h: u8) -> Controller<MemFabric> {
    connect_with(rig, h, options(h)).expect("connect")
}

/// Deterministic bytes for `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Payload bytes the target copied (the zero-copy proof: must stay 0).
pub fn copied(t: &Target) -> u64 {
    t.shared()
        .data_path
        .payload_bytes_copied
        .load(Ordering::Relaxed)
}

/// Polls `cond` every 10 ms until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Offset of the data area in a [`RawQueue`]'s region.
const RAW_DATA_OFF: usize = 8192;
/// Bytes of a [`RawQueue`]'s data area.
pub const RAW_DATA_LEN: usize = (1 << 20) + 16384;
/// Deadline of every [`RawQueue`] step.
const RAW_TIMEOUT: Duration = Duration::from_secs(5);

/// A bare NVMe/RDMA queue over the in-memory fabric: one command at a time, sent exactly as
/// the caller built it (the SGL is not touched), in-capsule data as a second SGE.
pub struct RawQueue {
    cm: <MemFabric as Fabric>::Cm,
    conn: ConnId,
    qp: <MemFabric as Fabric>::Qp,
    cq: <MemFabric as Fabric>::Cq,
    mr: <MemFabric as Fabric>::Mr,
    mem: Arc<DmaMemory>,
    depth: u16,
    next_cid: u16,
    qid: u16,
    sent: u32,
    _fabric: MemFabric,
}

impl RawQueue {
    /// RDMA CM connect of queue `qid` (`depth` entries) to `addr`, as controller `cntlid`.
    /// A reject comes back as `"rejected: reason R, NVMe/RDMA status S"` (S decimal, 0 when
    /// the reject carried none).
    pub fn connect(
        net: &MemNetwork,
        dev: &str,
        addr: SocketAddr,
        qid: u16,
        depth: u16,
        cntlid: u16,
    ) -> Result<RawQueue, String> {
        let fabric = net.device(dev);
        let pd = fabric.alloc_pd().map_err(|e| e.to_string())?;
        let mem = Arc::new(
            DmaMemory::new(RAW_DATA_OFF + RAW_DATA_LEN, false).map_err(|e| e.to_string())?,
        );
        let mr = fabric
            .register(&pd, mem.clone(), Access::ALL)
            .map_err(|e| e.to_string())?;
        let cq = fabric
            .create_cq(2 * u32::from(depth) + 4)
            .map_err(|e| e.to_string())?;
        let mut cm = fabric.create_cm().map_err(|e| e.to_string())?;
        let req = CmRequest {
            recfmt: 0,
            qid,
            hrqsize: depth,
            hsqsize: depth - 1,
            cntlid,
        };
        let params = ConnectParams {
            private_data: req.to_bytes().to_vec(),
            responder_resources: 16,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            resolve_timeout_ms: 2000,
        };
        let init = QpInit::<MemFabric> {
            pd: pd.clone(),
            send_cq: cq.handle(),
            recv_cq: cq.handle(),
            srq: None,
            caps: QpCaps {
                max_send_wr: u32::from(depth) + 1,
                max_recv_wr: u32::from(depth),
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        };
        let conn = cm.connect(addr, params, init).map_err(|e| e.to_string())?;
        let end = Instant::now() + RAW_TIMEOUT;
        let qp = loop {
            match cm.poll_event().map_err(|e| e.to_string())? {
                Some(CmEvent::Established {
                    conn: c,
                    qp: Some(qp),
                    ..
                }) if c == conn => break qp,
                Some(CmEvent::Rejected {
                    reason,
                    private_data,
                    ..
                }) => {
                    let status = CmReject::parse(&private_data).map_or(0, |r| r.status.0);
                    return Err(format!(
                        "rejected: reason {reason}, NVMe/RDMA status {status}"
                    ));
                }
                Some(CmEvent::ConnectFailed { reason, .. }) => {
                    return Err(format!("connect failed ({reason:?})"));
                }
                Some(_) => {}
                None if Instant::now() > end => return Err("CM connect timed out".into()),
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        };
        let mut q = RawQueue {
            cm,
            conn,
            qp,
            cq,
            mr,
            mem,
            depth,
            next_cid: 1,
            qid,
            sent: 0,
            _fabric: fabric,
        };
        for i in 0..depth {
            q.post_recv(i)?;
        }
        Ok(q)
    }

    fn cqe_off(&self, i: u16) -> u64 {
        (SQE_LEN + usize::from(i) * CQE_LEN) as u64
    }

    fn post_recv(&mut self, i: u16) -> Result<(), String> {
        let sge = self
            .mr
            .sge(self.cqe_off(i), CQE_LEN as u32)
            .map_err(|e| e.to_string())?;
        self.qp
            .post_recv(&[RecvWr {
                wr_id: WrId(1000 + u64::from(i)),
                sges: &[sge],
            }])
            .map_err(|e| format!("post recv: {e:?}"))
    }

    /// The queue id.
    pub fn qid(&self) -> u16 {
        self.qid
    }

    /// The queue size (HSQSIZE + 1).
    pub fn depth(&self) -> u16 {
        self.depth
    }

    /// Capsules sent so far (the target's SQ head is this modulo the depth).
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// A keyed SGL over `len` bytes of the data area at `offset`.
    pub fn keyed(&self, offset: usize, len: u32) -> SglDescriptor {
        SglDescriptor::Keyed {
            address: self.mr.addr() + (RAW_DATA_OFF + offset) as u64,
            length: len,
            key: self.mr.rkey(),
            invalidate: false,
        }
    }

    /// Copies `src` into the data area at `offset`.
    pub fn write_data(&self, offset: usize, src: &[u8]) {
        self.mem
            .write(RAW_DATA_OFF + offset, src)
            .expect("data area");
    }

    /// `len` bytes of the data area at `offset`.
    pub fn read_data(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.mem
            .read(RAW_DATA_OFF + offset, &mut b)
            .expect("data area");
        b
    }

    /// Sends `sqe` (its command id replaced) with `icd` as in-capsule data, and waits for its
    /// response. Errors: a transport failure, a disconnect, or no answer within 5 s.
    pub fn exec(&mut self, mut sqe: Sqe, icd: &[u8]) -> Result<Cqe, String> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1).max(1);
        sqe.set_cid(cid);
        self.mem
            .write(0, sqe.as_bytes())
            .map_err(|e| e.to_string())?;
        let sqe_sge = self.mr.sge(0, SQE_LEN as u32).map_err(|e| e.to_string())?;
        let mut sges: Vec<Sge> = vec![sqe_sge];
        if !icd.is_empty() {
            self.write_data(0, icd);
            sges.push(
                self.mr
                    .sge(RAW_DATA_OFF as u64, icd.len() as u32)
                    .map_err(|e| e.to_string())?,
            );
        }
        self.post_and_wait(&sges, cid)
    }

    /// Sends `capsule` as it is (any length, from the data area) and waits as
    /// [`RawQueue::exec`] does for a response with command id `cid`.
    pub fn exec_bytes(&mut self, capsule: &[u8], cid: u16) -> Result<Cqe, String> {
        self.write_data(0, capsule);
        let sge = self
            .mr
            .sge(RAW_DATA_OFF as u64, capsule.len() as u32)
            .map_err(|e| e.to_string())?;
        self.post_and_wait(&[sge], cid)
    }

    /// Sends `sqe` (no data in the capsule) without waiting; returns its command id, for
    /// [`RawQueue::wait`]. For commands the target parks (Asynchronous Event Requests).
    pub fn post(&mut self, mut sqe: Sqe) -> Result<u16, String> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1).max(1);
        sqe.set_cid(cid);
        // Each posted SQE gets its own slot past the response buffers' area.
        let off = (RAW_DATA_OFF - SQE_LEN * (1 + usize::from(cid % 16))) as u64;
        self.mem
            .write(off as usize, sqe.as_bytes())
            .map_err(|e| e.to_string())?;
        let sge = self
            .mr
            .sge(off, SQE_LEN as u32)
            .map_err(|e| e.to_string())?;
        self.post_send(&[sge])?;
        Ok(cid)
    }

    /// Waits for the response to `cid` (see [`RawQueue::exec`]).
    pub fn wait(&mut self, cid: u16) -> Result<Cqe, String> {
        self.wait_for(cid)
    }

    fn post_send(&mut self, sges: &[Sge]) -> Result<(), String> {
        self.qp
            .post_send(&[SendWr {
                wr_id: WrId(1),
                op: SendOp::Send,
                payload: Payload::Sges(sges),
                signaled: true,
            }])
            .map_err(|e| format!("post send: {e:?}"))?;
        self.sent += 1;
        Ok(())
    }

    fn post_and_wait(&mut self, sges: &[Sge], cid: u16) -> Result<Cqe, String> {
        self.post_send(sges)?;
        self.wait_for(cid)
    }

    fn wait_for(&mut self, cid: u16) -> Result<Cqe, String> {
        let end = Instant::now() + RAW_TIMEOUT;
        let mut sent = false;
        let mut answer: Option<Cqe> = None;
        let mut comps: Vec<Completion> = Vec::new();
        loop {
            comps.clear();
            self.cq.poll(&mut comps, 16).map_err(|e| e.to_string())?;
            for c in &comps {
                if c.status != WcStatus::Success {
                    return Err(format!("completion {:?}: {:?}", c.wr_id, c.status));
                }
                if c.wr_id == WrId(1) {
                    sent = true;
                    continue;
                }
                let i = (c.wr_id.0 - 1000) as u16;
                let mut b = [0u8; CQE_LEN];
                self.mem
                    .read(self.cqe_off(i) as usize, &mut b)
                    .map_err(|e| e.to_string())?;
                self.post_recv(i)?;
                let cqe = Cqe::parse(&b).map_err(|e| e.to_string())?;
                if cqe.cid != cid {
                    return Err(format!(
                        "response for cid {} while waiting for {cid}",
                        cqe.cid
                    ));
                }
                answer = Some(cqe);
            }
            if let (true, Some(cqe)) = (sent, answer) {
                return Ok(cqe);
            }
            if let Ok(Some(CmEvent::Disconnected { conn })) = self.cm.poll_event() {
                if conn == self.conn {
                    return Err("disconnected by the target".into());
                }
            }
            if Instant::now() > end {
                return Err(format!("no response to cid {cid} within {RAW_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Fabrics Connect of this queue (Connect data by keyed SGL at data offset 0).
    pub fn fabrics_connect(&mut self, kato_ms: u32, data: &ConnectData) -> Result<Cqe, String> {
        let bytes = data.to_bytes();
        self.write_data(0, &bytes);
        let sqe = Connect {
            cid: 0,
            sgl: self.keyed(0, bytes.len() as u32),
            recfmt: 0,
            qid: self.qid,
            sqsize: self.depth - 1,
            cattr: 0,
            kato: kato_ms,
        }
        .to_sqe()
        .map_err(|e| e.to_string())?;
        self.exec(sqe, &[])
    }
}

impl Drop for RawQueue {
    fn drop(&mut self) {
        let _ = self.cm.disconnect(self.conn);
    }
}

/// What a host sees of namespace `nsid`'s identity: NGUID and EUI-64 from Identify Namespace,
/// the descriptor list's NGUID, EUI-64 and UUID, and the controller's serial number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenIds {
    /// Identify Namespace NGUID.
    pub nguid: [u8; 16],
    /// Identify Namespace EUI-64.
    pub eui64: [u8; 8],
    /// Descriptor list NGUID.
    pub desc_nguid: Option<[u8; 16]>,
    /// Descriptor list EUI-64.
    pub desc_eui64: Option<[u8; 8]>,
    /// Descriptor list UUID.
    pub desc_uuid: Option<[u8; 16]>,
    /// Identify Controller serial number.
    pub serial: String,
}

/// Reads [`SeenIds`] of `nsid` through `c`.
pub fn seen_ids(c: &mut Controller<MemFabric>, nsid: u32) -> SeenIds {
    use raidline_proto::identify::{Cns, NsIdDescriptor, NsIdDescriptorList, NsIdType};
    let ns = c
        .namespace(raidline_initiator::Nsid(nsid))
        .expect("identify namespace");
    let raw = c
        .identify_raw(Cns::NS_ID_DESCRIPTORS, nsid)
        .expect("identify descriptors");
    let list = NsIdDescriptorList::parse(&raw).expect("descriptor list parses");
    let desc_nguid = match list.find(NsIdType::NGUID) {
        Some(NsIdDescriptor::Nguid(v)) => Some(*v),
        _ => None,
    };
    let desc_eui64 = match list.find(NsIdType::EUI64) {
        Some(NsIdDescriptor::Eui64(v)) => Some(*v),
        _ => None,
    };
    let desc_uuid = match list.find(NsIdType::UUID) {
        Some(NsIdDescriptor::Uuid(v)) => Some(*v),
        _ => None,
    };
    let serial = c.identify_controller().expect("identify controller").sn;
    SeenIds {
        nguid: ns.id.nguid,
        eui64: ns.id.eui64,
        desc_nguid,
        desc_eui64,
        desc_uuid,
        serial,
    }
}

/// A tiny deterministic generator for offsets and sizes.
pub struct Rng(pub u64);
impl Rng {
    /// The next 64 random bits (SplitMix64).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A scratch directory under the system temp dir, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A new empty directory named after `tag`, the process and the time.
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p =
            std::env::temp_dir().join(format!("raidline-e2e-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Services `c` until it has read a Changed Namespace List after a namespace notice, or 5 s.
pub fn await_ns_notice(
    c: &mut Controller<MemFabric>,
) -> (
    Vec<raidline_proto::aen::AsyncEvent>,
    Vec<raidline_proto::log::ChangedNsList>,
) {
    let mut events = Vec::new();
    let mut lists = Vec::new();
    eventually(Duration::from_secs(5), || {
        c.service().unwrap();
        events.extend(c.admin.take_events());
        lists.extend(c.take_changed_namespaces());
        !lists.is_empty()
    });
    (events, lists)
}

/// Four file members (O_DIRECT, real descriptors) in the build's scratch directory, the
/// member with role `dir_role` (if any) handing out a directory as its descriptor.
pub fn file_members(name: &str, dir_role: Option<usize>) -> Vec<Arc<dyn raidline_raid::Member>> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (0..4)
        .map(|i| -> Arc<dyn raidline_raid::Member> {
            let p = dir.join(format!("m{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(9 << 20).unwrap();
            let f = raidline_raid::FileMember::open(&p, 4096).expect("O_DIRECT file member");
            if Some(i) == dir_role {
                Arc::new(DirFdFile {
                    file: f,
                    dir: std::fs::File::open(&dir).unwrap(),
                })
            } else {
                Arc::new(f)
            }
        })
        .collect()
}

/// A file member whose direct-I/O descriptor is a directory: every io_uring operation on it
/// fails, its plain calls work.
#[derive(Debug)]
pub struct DirFdFile {
    pub file: raidline_raid::FileMember,
    pub dir: std::fs::File,
}

impl raidline_raid::Member for DirFdFile {
    fn name(&self) -> &str {
        self.file.name()
    }
    fn size_bytes(&self) -> u64 {
        self.file.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), raidline_raid::MemberError> {
        self.file.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), raidline_raid::MemberError> {
        self.file.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), raidline_raid::MemberError> {
        self.file.flush()
    }
    fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.dir))
    }
    fn alignment(&self) -> usize {
        4096
    }
}

/// Writes `pattern(seed)` over the whole array with the engine (which also marks it dirty
/// and sets every write-intent bit) and returns what it wrote.
pub fn fill(array: &Array, seed: u64) -> Vec<u8> {
    let cap = array.geometry().capacity_bytes() as usize;
    let data = pattern(seed, cap);
    let mut buf = raidline_raid::AlignedBuf::new(cap, 4096);
    buf.copy_from_slice(&data);
    array
        .write(
            &mut raidline_raid::SyncExecutor,
            raidline_raid::ArrayBlock(0),
            &buf,
        )
        .expect("fill");
    data
}

/// A target serving `array` to any host on a new in-memory network, listening on [`ADDR`].
pub fn serve(array: &Arc<Array>) -> (MemNetwork, SocketAddr, Target) {
    let net = MemNetwork::new();
    let addr = ADDR.parse().expect("addr");
    let target = start(
        &net,
        "target0",
        addr,
        array.clone(),
        HostAccess::Any,
        Limits::default(),
    );
    (net, addr, target)
}

/// Reads the first `bytes` of namespace `ns` through I/O queue 0, 1 MiB at a time.
pub fn read_whole(c: &mut Controller<MemFabric>, ns: &Namespace, bytes: usize) -> Vec<u8> {
    let mut all = vec![0u8; bytes];
    for (i, piece) in all.chunks_mut(1 << 20).enumerate() {
        c.read(
            0,
            ns,
            raidline_initiator::Lba((i * (1 << 20) / 4096) as u64),
            piece,
        )
        .expect("read");
    }
    all
}
