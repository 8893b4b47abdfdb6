//! The daemon's iSER target end to end over the in-memory fabric (issue 18): a bare iSER host
//! (what open-iscsi's iser transport sends, PDU by PDU) logs in, runs SCSI commands whose data
//! moves by RDMA READ and WRITE against its registered buffer, and gets exact sense for its
//! mistakes. The same array is served over NVMe/RDMA at the same time.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use raidline_fabric::mem::{MemFabric, MemNetwork};
use raidline_fabric::{
    Access, CmEvent, Completion, CompletionQueue, ConnId, ConnectParams, ConnectionManager,
    DmaMemory, Fabric, MemoryRegion, Payload, QpCaps, QpInit, QueuePair, RecvWr, SendOp, SendWr,
    WcStatus, WrId,
};
use raidline_initiator::{Lba, Nsid};
use raidline_proto::text::Nqn;
use raidline_scsi::cdb::opcode;
use raidline_scsi::iscsi::bhs::encode_lun;
use raidline_scsi::iscsi::pdu::{
    LoginRequest, LoginStage, LogoutReason, LogoutRequest, Pdu, ScsiCommand, ScsiResponse, TaskAttr,
};
use raidline_scsi::iser::{build_send, split_send, IserHeader, RemoteBuffer};
use raidline_scsi::sense::{Sense, Status};
use raidline_target::config::{IscsiConfig, IscsiLun, IscsiTarget};
use raidline_target::daemon::Target;
use raidline_target::subsystem::{HostAccess, Limits};

const IQN: &str = "iqn.2026-12.io.raidline:array0";
const PORTAL: &str = "10.0.0.1:3260";
const RECVS: usize = 8;
const RECV_LEN: usize = 28 + 48 + 8192;
const SEND_OFF: usize = 0;
const RECV_OFF: usize = 16 << 10;
const DATA_OFF: usize = RECV_OFF + RECVS * RECV_LEN;
const DATA_LEN: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

/// A bare iSER host: one command at a time.
struct IserHost {
    cm: <MemFabric as Fabric>::Cm,
    conn: ConnId,
    qp: <MemFabric as Fabric>::Qp,
    cq: <MemFabric as Fabric>::Cq,
    mr: <MemFabric as Fabric>::Mr,
    mem: Arc<DmaMemory>,
    cmd_sn: u32,
    itt: u32,
    _fabric: MemFabric,
}

impl IserHost {
    fn connect(net: &MemNetwork, dev: &str, addr: SocketAddr) -> IserHost {
        let fabric = net.device(dev);
        let pd = fabric.alloc_pd().unwrap();
        let mem = Arc::new(DmaMemory::new(DATA_OFF + DATA_LEN, false).unwrap());
        let mr = fabric.register(&pd, mem.clone(), Access::ALL).unwrap();
        let cq = fabric.create_cq(64).unwrap();
        let mut cm = fabric.create_cm().unwrap();
        let params = ConnectParams {
            // Linux's iser: ZBVA not supported (byte 0), nothing else.
            private_data: vec![0x80, 0, 0, 0],
            responder_resources: 16,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            resolve_timeout_ms: 2000,
        };
        let init = QpInit::<MemFabric> {
            pd,
            send_cq: cq.handle(),
            recv_cq: cq.handle(),
            srq: None,
            caps: QpCaps {
                max_send_wr: 16,
                max_recv_wr: RECVS as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        };
        let conn = cm.connect(addr, params, init).unwrap();
        let end = Instant::now() + TIMEOUT;
        let qp = loop {
            match cm.poll_event().unwrap() {
                Some(CmEvent::Established {
                    conn: c,
                    qp: Some(qp),
                    ..
                }) if c == conn => break qp,
                Some(CmEvent::Rejected { reason, .. }) => panic!("rejected: {reason}"),
                Some(_) => {}
                None if Instant::now() > end => panic!("CM connect timed out"),
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        };
        let mut h = IserHost {
            cm,
            conn,
            qp,
            cq,
            mr,
            mem,
            cmd_sn: 1,
            itt: 1,
            _fabric: fabric,
        };
        for i in 0..RECVS {
            h.post_recv(i);
        }
        h
    }

    fn post_recv(&mut self, i: usize) {
        let sge = self
            .mr
            .sge((RECV_OFF + i * RECV_LEN) as u64, RECV_LEN as u32)
            .unwrap();
        self.qp
            .post_recv(&[RecvWr {
                wr_id: WrId(1000 + i as u64),
                sges: &[sge],
            }])
            .unwrap();
    }

    /// The host's buffer at `off` of the data area, as an iSER STag and VA.
    fn buffer(&self, off: usize) -> RemoteBuffer {
        RemoteBuffer {
            stag: self.mr.rkey(),
            va: self.mr.addr() + (DATA_OFF + off) as u64,
        }
    }

    fn write_data(&self, off: usize, b: &[u8]) {
        self.mem.write(DATA_OFF + off, b).unwrap();
    }

    fn read_data(&self, off: usize, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.mem.read(DATA_OFF + off, &mut b).unwrap();
        b
    }

    /// Sends `payload` and returns the next PDU the target sends (its header and data).
    fn exchange(&mut self, payload: &[u8]) -> Result<(Pdu, Vec<u8>), String> {
        self.send(SEND_OFF, payload)?;
        self.receive(TIMEOUT)
    }

    /// SENDs `payload` from offset `at` of the send area (a SEND still in flight keeps its
    /// own bytes when the next goes from another offset).
    fn send(&mut self, at: usize, payload: &[u8]) -> Result<(), String> {
        assert!(at + payload.len() <= RECV_OFF, "past the send area");
        self.mem.write(at, payload).unwrap();
        let sge = self.mr.sge(at as u64, payload.len() as u32).unwrap();
        self.qp
            .post_send(&[SendWr {
                wr_id: WrId(1),
                op: SendOp::Send,
                payload: Payload::Sges(&[sge]),
                signaled: true,
            }])
            .map_err(|e| format!("{e:?}"))
    }

    /// The next PDU the target sends, within `timeout`.
    fn receive(&mut self, timeout: Duration) -> Result<(Pdu, Vec<u8>), String> {
        let end = Instant::now() + timeout;
        let mut comps: Vec<Completion> = Vec::new();
        loop {
            comps.clear();
            self.cq.poll(&mut comps, 16).unwrap();
            for c in &comps {
                if c.status != WcStatus::Success {
                    return Err(format!("completion {:?}: {:?}", c.wr_id, c.status));
                }
                if c.wr_id == WrId(1) {
                    continue;
                }
                let i = (c.wr_id.0 - 1000) as usize;
                let mut b = vec![0u8; c.byte_len as usize];
                self.mem.read(RECV_OFF + i * RECV_LEN, &mut b).unwrap();
                self.post_recv(i);
                let s = split_send(&b, 1 << 20).map_err(|e| e.to_string())?;
                let pdu = Pdu::parse(s.bhs.as_bytes()).map_err(|e| e.to_string())?;
                return Ok((pdu, s.data.to_vec()));
            }
            if let Ok(Some(CmEvent::Disconnected { conn })) = self.cm.poll_event() {
                if conn == self.conn {
                    return Err("disconnected by the target".into());
                }
            }
            if Instant::now() > end {
                return Err("no answer".into());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn login(&mut self, csg: LoginStage, nsg: LoginStage, text: &[(&str, &str)]) -> Pdu {
        self.login_with_answer(csg, nsg, text).0
    }

    /// A Login Request; the response and its key=value answers.
    fn login_with_answer(
        &mut self,
        csg: LoginStage,
        nsg: LoginStage,
        text: &[(&str, &str)],
    ) -> (Pdu, Vec<(String, String)>) {
        let data: Vec<u8> = text
            .iter()
            .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
            .collect();
        let r = LoginRequest {
            transit: true,
            cont: false,
            csg,
            nsg,
            isid: [0x80, 0, 0x23, 0x3d, 0, 1],
            itt: 0,
            cmd_sn: self.cmd_sn,
            data_segment_len: data.len() as u32,
            ..Default::default()
        };
        let send = build_send(&IserHeader::default(), &r.to_bytes(), &[], &data);
        let (pdu, data) = self.exchange(&send).expect("login answer");
        let answers = raidline_scsi::iscsi::text::parse_text(&data, 8192)
            .expect("login text")
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        (pdu, answers)
    }

    fn log_in(&mut self) {
        let Pdu::LoginResponse(r) = self.login(
            LoginStage::Security,
            LoginStage::Operational,
            &[
                ("InitiatorName", "iqn.1993-08.org.debian:01:e2e"),
                ("SessionType", "Normal"),
                ("TargetName", IQN),
                ("AuthMethod", "None"),
            ],
        ) else {
            panic!("not a login response")
        };
        assert!(r.status.is_success(), "{r:?}");
        let Pdu::LoginResponse(r) = self.login(
            LoginStage::Operational,
            LoginStage::FullFeature,
            &[
                ("HeaderDigest", "None"),
                ("DataDigest", "None"),
                ("RDMAExtensions", "Yes"),
                ("InitiatorRecvDataSegmentLength", "262144"),
                ("TargetRecvDataSegmentLength", "8192"),
                ("ImmediateData", "Yes"),
                ("MaxBurstLength", "262144"),
            ],
        ) else {
            panic!("not a login response")
        };
        assert!(r.status.is_success(), "{r:?}");
        assert_eq!(r.nsg, LoginStage::FullFeature);
    }

    /// Runs `cdb` on LUN 0: data-in to `read` (offset, bytes), data-out from `write`.
    fn scsi(
        &mut self,
        cdb: &[u8],
        edtl: u32,
        read: Option<usize>,
        write: Option<usize>,
    ) -> (ScsiResponse, Vec<u8>) {
        self.scsi_imm(cdb, edtl, read, write, &[])
    }

    /// WRITE(10) of `data` at `lba`, fetched by RDMA READ from the start of the data area.
    fn write10(&mut self, lba: u32, data: &[u8]) -> ScsiResponse {
        self.write_data(0, data);
        let cdb = cdb10(opcode::WRITE_10, lba, data.len() / 4096);
        self.scsi(&cdb, data.len() as u32, None, Some(0)).0
    }

    /// READ(10) of `len` bytes at `lba` into the start of the data area (zeroed first): the
    /// response and the data.
    fn read10(&mut self, lba: u32, len: usize) -> (ScsiResponse, Vec<u8>) {
        self.write_data(0, &vec![0u8; len]);
        let cdb = cdb10(opcode::READ_10, lba, len / 4096);
        let (r, _) = self.scsi(&cdb, len as u32, Some(0), None);
        (r, self.read_data(0, len))
    }

    /// [`Self::scsi`] with `imm` as immediate data in the command's SEND; `write` (if any)
    /// is where the rest of the data-out lies, as open-iscsi's iser sets its write VA past
    /// the immediate bytes.
    fn scsi_imm(
        &mut self,
        cdb: &[u8],
        edtl: u32,
        read: Option<usize>,
        write: Option<usize>,
        imm: &[u8],
    ) -> (ScsiResponse, Vec<u8>) {
        let (itt, send) = self.command(cdb, edtl, read, write, imm);
        let (pdu, data) = self.exchange(&send).expect("SCSI answer");
        let Pdu::ScsiResponse(r) = pdu else {
            panic!("not a SCSI Response: {pdu:?}")
        };
        assert_eq!(r.itt, itt);
        (r, data)
    }

    /// A SCSI Command's SEND (see [`Self::scsi_imm`]) and its task tag; it takes the next
    /// CmdSN.
    fn command(
        &mut self,
        cdb: &[u8],
        edtl: u32,
        read: Option<usize>,
        write: Option<usize>,
        imm: &[u8],
    ) -> (u32, Vec<u8>) {
        let mut c16 = [0u8; 16];
        c16[..cdb.len()].copy_from_slice(cdb);
        let itt = self.itt;
        self.itt += 1;
        let cmd = ScsiCommand {
            immediate: false,
            final_pdu: true,
            read: read.is_some(),
            write: write.is_some() || !imm.is_empty(),
            attr: TaskAttr::SIMPLE,
            total_ahs_words: 0,
            data_segment_len: imm.len() as u32,
            lun: encode_lun(0).unwrap(),
            itt,
            expected_data_len: edtl,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            cdb: c16,
        };
        self.cmd_sn += 1;
        let hdr = IserHeader {
            write: write.map(|o| self.buffer(o)),
            read: read.map(|o| self.buffer(o)),
        };
        (itt, build_send(&hdr, &cmd.to_bytes(), &[], imm))
    }
}

/// A READ(10) or WRITE(10) CDB of `blocks` 4 KiB blocks at `lba`.
fn cdb10(op: u8, lba: u32, blocks: usize) -> [u8; 10] {
    let [a, b, c, d] = lba.to_be_bytes();
    let [m, l] = u16::try_from(blocks).expect("blocks").to_be_bytes();
    [op, 0, a, b, c, d, 0, m, l, 0]
}

fn sense(data: &[u8]) -> Sense {
    Sense::parse(&data[2..]).expect("sense")
}

fn iser_rig() -> (MemNetwork, Target) {
    iser_rig_with(None)
}

fn iser_rig_with(chap: Option<raidline_scsi::iscsi::chap::ChapConfig>) -> (MemNetwork, Target) {
    iser_rig_full(chap, None, None)
}

fn iser_rig_full(
    chap: Option<raidline_scsi::iscsi::chap::ChapConfig>,
    cc: Option<raidline_target::daemon::CcSpec>,
    keepalive: Option<raidline_target::iser::Keepalive>,
) -> (MemNetwork, Target) {
    iser_rig_edit(chap, cc, keepalive, |_| ())
}

/// [`iser_rig_full`] with `edit` applied to the `[iscsi]` configuration.
fn iser_rig_edit(
    chap: Option<raidline_scsi::iscsi::chap::ChapConfig>,
    cc: Option<raidline_target::daemon::CcSpec>,
    keepalive: Option<raidline_target::iser::Keepalive>,
    edit: impl FnOnce(&mut IscsiConfig),
) -> (MemNetwork, Target) {
    let disks = mem_disks(4, 9 << 20);
    let (members, _) = members_of(&disks, false);
    let array = create_array(members);
    let net = MemNetwork::new();
    let mut spec = spec_for(
        ADDR.parse().unwrap(),
        array,
        HostAccess::Any,
        Limits::default(),
    );
    spec.iscsi = IscsiConfig {
        listen: vec![PORTAL.parse().unwrap()],
        targets: vec![IscsiTarget {
            name: IQN.into(),
            alias: None,
            initiators: None,
            luns: vec![IscsiLun {
                lun: 0,
                subsystem: Nqn::new(SUBNQN).unwrap(),
                nsid: 1,
            }],
            chap,
        }],
        discovery_chap: None,
        keepalive: keepalive.unwrap_or_default(),
        immediate_data: true,
    };
    edit(&mut spec.iscsi);
    spec.cc = cc;
    let target = Target::start(net.device("target0"), spec).expect("target start");
    (net, target)
}

#[test]
fn an_iser_host_logs_in_writes_reads_and_logs_out() {
    let (net, target) = iser_rig();
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    h.log_in();

    // INQUIRY: raidline's identity, RDMA-written into the host's buffer.
    let (r, _) = h.scsi(&[opcode::INQUIRY, 0, 0, 0, 96, 0], 96, Some(0), None);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(&h.read_data(8, 8), b"RAIDLINE");
    // READ CAPACITY(16): the array's capacity in 4 KiB blocks.
    let mut rc16 = [0u8; 16];
    rc16[0] = opcode::SERVICE_ACTION_IN_16;
    rc16[1] = 0x10;
    rc16[13] = 32;
    let (r, _) = h.scsi(&rc16, 32, Some(0), None);
    assert_eq!(r.status, Status::GOOD);
    let d = h.read_data(0, 32);
    let last = u64::from_be_bytes(d[..8].try_into().unwrap());
    let bs = u32::from_be_bytes(d[8..12].try_into().unwrap());
    assert_eq!(bs, 4096);
    assert!(last > 1000, "{last}");

    // WRITE(10) of 64 KiB at LBA 100: fetched by RDMA READ; READ(10) it back.
    let data = pattern(7, 64 << 10);
    h.write_data(0, &data);
    let (r, _) = h.scsi(
        &[opcode::WRITE_10, 0x08, 0, 0, 0, 100, 0, 0, 16, 0],
        64 << 10,
        None,
        Some(0),
    );
    assert_eq!(r.status, Status::GOOD, "{r:?}");
    h.write_data(128 << 10, &[0u8; 64 << 10]);
    let (r, _) = h.scsi(
        &[opcode::READ_10, 0, 0, 0, 0, 100, 0, 0, 16, 0],
        64 << 10,
        Some(128 << 10),
        None,
    );
    assert_eq!((r.status, r.residual_count), (Status::GOOD, 0));
    assert_eq!(h.read_data(128 << 10, 64 << 10), data);
    // The same data over NVMe/RDMA.
    let mut c = raidline_initiator::Controller::connect(
        net.device("host9"),
        target.local_addrs()[0],
        options(9),
    )
    .expect("nvme connect");
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut back = vec![0u8; 64 << 10];
    c.read(0, &ns, Lba(100), &mut back).expect("nvme read");
    assert_eq!(back, data);

    // SYNCHRONIZE CACHE, then UNMAP 8 blocks: they read back as zeroes.
    let (r, _) = h.scsi(
        &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        0,
        None,
        None,
    );
    assert_eq!(r.status, Status::GOOD);
    let mut list = vec![0u8; 24];
    list[1] = 22;
    list[3] = 16;
    list[8..16].copy_from_slice(&100u64.to_be_bytes());
    list[16..20].copy_from_slice(&8u32.to_be_bytes());
    h.write_data(256 << 10, &list);
    let (r, _) = h.scsi(
        &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, 0, 24, 0],
        24,
        None,
        Some(256 << 10),
    );
    assert_eq!(r.status, Status::GOOD, "{r:?}");
    let (r, _) = h.scsi(
        &[opcode::READ_10, 0, 0, 0, 0, 100, 0, 0, 16, 0],
        64 << 10,
        Some(128 << 10),
        None,
    );
    assert_eq!(r.status, Status::GOOD);
    let got = h.read_data(128 << 10, 64 << 10);
    assert!(got[..32 << 10].iter().all(|&b| b == 0));
    assert_eq!(got[32 << 10..], data[32 << 10..]);

    // Past the end: LBA OUT OF RANGE, nothing moved.
    let (r, d) = h.scsi(
        &[opcode::READ_10, 0, 0x7f, 0, 0, 0, 0, 0, 1, 0],
        4096,
        Some(0),
        None,
    );
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(sense(&d), Sense::lba_out_of_range());
    // Zero-copy: the payload went from the host's buffer to the drives and back in pool
    // buffers.
    assert_eq!(copied(&target), 0);

    // Immediate data. A 4 KiB write that comes whole in its SEND is written from the receive
    // buffer: no RDMA READ, no copy.
    let small = pattern(11, 4096);
    let (r, _) = h.scsi_imm(
        &[opcode::WRITE_10, 0, 0, 0, 0, 200, 0, 0, 1, 0],
        4096,
        None,
        None,
        &small,
    );
    assert_eq!(r.status, Status::GOOD, "{r:?}");
    assert_eq!(copied(&target), 0);
    // 64 KiB whose first 8 KiB come immediate (open-iscsi's TargetRecvDataSegmentLength) and
    // the rest from the host's buffer past them: the 8 KiB are copied in front of what the
    // RDMA READ fetches, and counted.
    let big = pattern(12, 64 << 10);
    h.write_data(0, &big);
    let (r, _) = h.scsi_imm(
        &[opcode::WRITE_10, 0, 0, 0, 0, 201, 0, 0, 16, 0],
        64 << 10,
        None,
        Some(8 << 10),
        &big[..8 << 10],
    );
    assert_eq!(r.status, Status::GOOD, "{r:?}");
    assert_eq!(copied(&target), 8 << 10);
    h.write_data(128 << 10, &[0u8; 68 << 10]);
    let (r, _) = h.scsi(
        &[opcode::READ_10, 0, 0, 0, 0, 200, 0, 0, 17, 0],
        68 << 10,
        Some(128 << 10),
        None,
    );
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(h.read_data(128 << 10, 4096), small);
    assert_eq!(h.read_data((128 << 10) + 4096, 64 << 10), big);
    // More immediate data than the command moves: refused, and nothing written.
    let (r, d) = h.scsi_imm(
        &[opcode::WRITE_10, 0, 0, 0, 0, 200, 0, 0, 1, 0],
        4096,
        None,
        None,
        &[9u8; 8192],
    );
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(
        sense(&d).key,
        raidline_scsi::sense::SenseKey::ILLEGAL_REQUEST
    );
    // WRITE SAME(16) whose immediate block is not zeroes: refused (INVALID FIELD IN
    // PARAMETER LIST), and its receive goes back: more of them than the target has receives,
    // then a write that must still find one.
    let mut ws = [0u8; 16];
    ws[0] = opcode::WRITE_SAME_16;
    ws[1] = 0x08; // UNMAP
    ws[13] = 1; // one block at LBA 0
    for i in 0..200 {
        let (r, d) = h.scsi_imm(&ws, 4096, None, None, &[0x55; 4096]);
        assert_eq!(r.status, Status::CHECK_CONDITION, "WRITE SAME {i}");
        assert_eq!(
            sense(&d).key,
            raidline_scsi::sense::SenseKey::ILLEGAL_REQUEST
        );
    }
    // The receives the immediate writes held went back: a long run of them still goes.
    for i in 0..300u32 {
        let lba = 200 + (i % 50) as u8;
        let (r, _) = h.scsi_imm(
            &[opcode::WRITE_10, 0, 0, 0, 0, lba, 0, 0, 1, 0],
            4096,
            None,
            None,
            &small,
        );
        assert_eq!(r.status, Status::GOOD, "write {i}: {r:?}");
    }

    // `raidline status` sees the session.
    let sessions = target.shared().iscsi_sessions.lock().unwrap().len();
    assert_eq!(sessions, 1);

    // Logout: answered, then the target closes the connection.
    let l = LogoutRequest {
        immediate: true,
        reason: LogoutReason::CLOSE_SESSION,
        itt: 99,
        cid: 0,
        cmd_sn: h.cmd_sn,
        exp_stat_sn: 0,
    };
    let (pdu, _) = h
        .exchange(&build_send(&IserHeader::default(), &l.to_bytes(), &[], &[]))
        .expect("logout answer");
    assert!(matches!(pdu, Pdu::LogoutResponse(_)), "{pdu:?}");
    assert!(eventually(Duration::from_secs(5), || target
        .shared()
        .iscsi_sessions
        .lock()
        .unwrap()
        .is_empty()));
}

#[test]
fn a_login_to_an_unknown_target_is_refused_and_closed() {
    let (net, _target) = iser_rig();
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    let Pdu::LoginResponse(r) = h.login(
        LoginStage::Security,
        LoginStage::Operational,
        &[
            ("InitiatorName", "iqn.1993-08.org.debian:01:e2e"),
            ("SessionType", "Normal"),
            ("TargetName", "iqn.2026-12.io.raidline:nope"),
            ("AuthMethod", "None"),
        ],
    ) else {
        panic!("not a login response")
    };
    assert_eq!((r.status.class(), r.status.detail()), (2, 3), "not found");
    // The connection closes after the answer.
    let end = Instant::now() + TIMEOUT;
    loop {
        if let Ok(Some(CmEvent::Disconnected { .. })) = h.cm.poll_event() {
            break;
        }
        assert!(
            Instant::now() < end,
            "the target kept a failed login's connection"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn chap_is_required_and_checked_both_ways() {
    use raidline_scsi::iscsi::chap::{decode_binary, encode_hex, ChapAccount, ChapAlg, ChapConfig};
    let account = |u: &str, s: &[u8]| ChapAccount {
        user: u.into(),
        secret: zeroize::Zeroizing::new(s.to_vec()),
    };
    let (net, _target) = iser_rig_with(Some(ChapConfig {
        initiator: account("host1", b"initiator-secret"),
        target: Some(account("array0", b"target-secret-12")),
    }));
    let first = [
        ("InitiatorName", "iqn.1993-08.org.debian:01:e2e"),
        ("SessionType", "Normal"),
        ("TargetName", IQN),
        ("AuthMethod", "CHAP,None"),
    ];
    let get = |a: &[(String, String)], k: &str| {
        a.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    for (secret, ok) in [
        (&b"wrong-secret-12"[..], false),
        (&b"initiator-secret"[..], true),
    ] {
        let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
        let (_, a) = h.login_with_answer(LoginStage::Security, LoginStage::Operational, &first);
        assert_eq!(get(&a, "AuthMethod"), "CHAP");
        let (_, a) = h.login_with_answer(
            LoginStage::Security,
            LoginStage::Operational,
            &[("CHAP_A", "5")],
        );
        assert_eq!(get(&a, "CHAP_A"), "5");
        let id: u8 = get(&a, "CHAP_I").parse().unwrap();
        let c = decode_binary(&get(&a, "CHAP_C")).unwrap();
        let r = encode_hex(&ChapAlg::Md5.response(id, secret, &c));
        let mine = [0x5au8; 16];
        let (pdu, a) = h.login_with_answer(
            LoginStage::Security,
            LoginStage::Operational,
            &[
                ("CHAP_N", "host1"),
                ("CHAP_R", &r),
                ("CHAP_I", "9"),
                ("CHAP_C", &encode_hex(&mine)),
            ],
        );
        let Pdu::LoginResponse(resp) = pdu else {
            panic!("not a login response")
        };
        if ok {
            assert!(resp.status.is_success() && resp.transit, "{resp:?}");
            // Mutual: the target knows its own secret.
            assert_eq!(get(&a, "CHAP_N"), "array0");
            let want = ChapAlg::Md5.response(9, b"target-secret-12", &mine);
            assert_eq!(decode_binary(&get(&a, "CHAP_R")).unwrap(), want);
        } else {
            assert_eq!(
                (resp.status.class(), resp.status.detail()),
                (2, 1),
                "authentication failure"
            );
        }
    }
}

#[test]
fn a_namespace_disabled_and_enabled_again_is_not_ready_then_a_unit_attention() {
    use raidline_scsi::sense::{Asc, SenseKey};
    let (net, target) = iser_rig();
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    h.log_in();
    let tur = [opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0];
    let (r, _) = h.scsi(&tur, 0, None, None);
    assert_eq!(r.status, Status::GOOD);
    // `raidline ns disable`: NOT READY, manual intervention required.
    target
        .shared()
        .set_namespace_active(SUBNQN, 1, false)
        .expect("disable");
    let (r, d) = h.scsi(&tur, 0, None, None);
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(
        (sense(&d).key, sense(&d).asc),
        (SenseKey::NOT_READY, Asc::NOT_READY_MANUAL_INTERVENTION)
    );
    // Enabled again: the next command gets UNIT ATTENTION, NOT READY TO READY CHANGE, once;
    // then the unit is ready.
    target
        .shared()
        .set_namespace_active(SUBNQN, 1, true)
        .expect("enable");
    let (r, d) = h.scsi(&tur, 0, None, None);
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(
        (sense(&d).key, sense(&d).asc),
        (SenseKey::UNIT_ATTENTION, Asc::NOT_READY_TO_READY_CHANGE)
    );
    let (r, _) = h.scsi(&tur, 0, None, None);
    assert_eq!(r.status, Status::GOOD);
}

#[test]
fn a_login_with_the_isid_of_a_live_session_reinstates_it() {
    let (net, target) = iser_rig();
    let mut old = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    old.log_in();
    let data = pattern(21, 4096);
    let (r, _) = old.scsi_imm(
        &[opcode::WRITE_10, 0, 0, 0, 0, 50, 0, 0, 1, 0],
        4096,
        None,
        None,
        &data,
    );
    assert_eq!(r.status, Status::GOOD);
    // The initiator lost its connection (the target did not see it go) and logs in again
    // with the same name and ISID: the new login is answered once the old session is closed.
    let mut new = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    new.log_in();
    // Answered only once the old session was gone: one session from the login's end on.
    let sessions = target.shared().iscsi_sessions.lock().unwrap().len();
    assert_eq!(sessions, 1);
    let nop = raidline_scsi::iscsi::pdu::NopOut {
        immediate: true,
        data_segment_len: 0,
        lun: 0,
        itt: 7,
        ttt: 0xffff_ffff,
        cmd_sn: old.cmd_sn,
        exp_stat_sn: 0,
    };
    let got = old.exchange(&build_send(
        &IserHeader::default(),
        &nop.to_bytes(),
        &[],
        &[],
    ));
    assert!(got.is_err(), "the old connection still answers: {got:?}");
    // The new session serves the same data.
    new.write_data(0, &[0u8; 4096]);
    let (r, _) = new.scsi(
        &[opcode::READ_10, 0, 0, 0, 0, 50, 0, 0, 1, 0],
        4096,
        Some(0),
        None,
    );
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(new.read_data(0, 4096), data);
}

#[test]
fn with_immediate_data_off_every_write_is_fetched_and_nothing_copied() {
    let (net, target) = iser_rig_edit(None, None, None, |c| c.immediate_data = false);
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    h.log_in();
    // The host offered ImmediateData=Yes; the target's No wins: writes of any size come by
    // RDMA READ, straight into pool buffers.
    let written: Vec<(u32, Vec<u8>)> = [(286, 4096), (296, 64 << 10)]
        .into_iter()
        .map(|(lba, len)| (lba, pattern(u64::from(lba), len)))
        .collect();
    for (lba, data) in &written {
        let r = h.write10(*lba, data);
        assert_eq!(r.status, Status::GOOD, "{r:?}");
    }
    assert_eq!(copied(&target), 0);
    // Immediate data where none was negotiated: refused, nothing written.
    let stray = pattern(99, 4096);
    let (r, d) = h.scsi_imm(&cdb10(opcode::WRITE_10, 506, 1), 4096, None, None, &stray);
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(
        sense(&d).asc,
        raidline_scsi::sense::Asc::INVALID_FIELD_IN_COMMAND_IU
    );
    for (lba, data) in written {
        let (r, got) = h.read10(lba, data.len());
        assert_eq!(r.status, Status::GOOD);
        assert!(got == data, "LBA {lba}: read data differs");
    }
    let (r, got) = h.read10(506, 4096);
    assert_eq!(r.status, Status::GOOD);
    assert!(got != stray, "the refused write landed");
    assert_eq!(copied(&target), 0);
}

#[test]
fn paced_iser_reads_leave_in_chunks_and_arrive_whole() {
    // `fixed` at 2 MB/s: a 512 KiB read cannot go at once, so it leaves in paced chunks
    // ahead of its response, as NVMe/RDMA's read data does.
    const RATE: f64 = 2e6;
    let (net, target) = iser_rig_full(
        None,
        Some(raidline_target::daemon::CcSpec {
            algorithm: "fixed".into(),
            params: vec![("rate_mbps".into(), RATE * 8.0 / 1e6)],
        }),
        None,
    );
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    h.log_in();
    let data = pattern(31, 512 << 10);
    h.write_data(0, &data);
    // Written with its first 8 KiB immediate and the rest by (paced) RDMA READ.
    let (r, _) = h.scsi_imm(
        &[opcode::WRITE_10, 0, 0, 0, 4, 0, 0, 0, 128, 0],
        512 << 10,
        None,
        Some(8 << 10),
        &data[..8 << 10],
    );
    assert_eq!(r.status, Status::GOOD, "{r:?}");
    // The write's READ went as one dithered transfer larger than the bucket, which can leave
    // up to a bucket in tokens (the pacer keeps a surplus above the idle bank): an untimed
    // read spends them, so the timed one starts from at most the idle bank.
    let (r, _) = h.read10(1024, 512 << 10);
    assert_eq!(r.status, Status::GOOD);
    h.write_data(0, &vec![0u8; 512 << 10]);
    let t0 = Instant::now();
    let (r, _) = h.scsi(
        &[opcode::READ_10, 0, 0, 0, 4, 0, 0, 0, 128, 0],
        512 << 10,
        Some(0),
        None,
    );
    let took = t0.elapsed().as_secs_f64();
    assert_eq!((r.status, r.residual_count), (Status::GOOD, 0));
    assert!(h.read_data(0, 512 << 10) == data, "read data differs");
    let chunks: u64 = target
        .shared()
        .queue_stats
        .lock()
        .unwrap()
        .values()
        .map(|s| s.paced_chunks.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    eprintln!("paced iSER read of 512 KiB: {took:.3} s, {chunks} chunks");
    assert!(chunks > 0, "the read went unpaced");
    // The bucket lends at most 256 KiB: the rest waits for its tokens.
    assert!(took >= 0.8 * (256 << 10) as f64 / RATE, "{took:.3} s");

    // A command answered while a read's data waits for its tokens: its response goes first,
    // and the StatSNs follow the order the responses go in, not the order the tasks ended.
    let read = [opcode::READ_10, 0, 0, 0, 4, 0, 0, 0, 128, 0];
    let (read_itt, send) = h.command(&read, 512 << 10, Some(0), None, &[]);
    h.send(SEND_OFF, &send).unwrap();
    // The read's storage is done long before its data may go (0.1 s and more at this rate).
    std::thread::sleep(Duration::from_millis(30));
    let tur = [opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0];
    let (tur_itt, send) = h.command(&tur, 0, None, None, &[]);
    h.send(SEND_OFF + 4096, &send).unwrap();
    let answers: Vec<ScsiResponse> = (0..2)
        .map(|_| match h.receive(TIMEOUT).expect("an answer").0 {
            Pdu::ScsiResponse(r) => r,
            other => panic!("not a SCSI Response: {other:?}"),
        })
        .collect();
    assert_eq!(
        (answers[0].itt, answers[1].itt),
        (tur_itt, read_itt),
        "the read's response went first"
    );
    assert_eq!(answers[1].status, Status::GOOD);
    assert_eq!(
        answers[1].stat_sn,
        answers[0].stat_sn.wrapping_add(1),
        "StatSNs out of order: {answers:?}"
    );
    assert!(h.read_data(0, 512 << 10) == data, "read data differs");
}

#[test]
fn a_host_that_stops_answering_is_pinged_then_closed() {
    // Keep-alive at 1 s / 1 s (the defaults are LIO's 15 s / 30 s).
    let keep = raidline_target::iser::Keepalive {
        nop_in_interval: Duration::from_secs(1),
        nop_in_timeout: Duration::from_secs(1),
        login_timeout: Duration::from_secs(30),
    };
    let (net, target) = iser_rig_full(None, None, Some(keep));
    let mut h = IserHost::connect(&net, "host1", PORTAL.parse().unwrap());
    h.log_in();
    let sessions = || target.shared().iscsi_sessions.lock().unwrap().len();
    assert_eq!(sessions(), 1);
    // Silent: a NOP-In that asks for an echo comes within a few seconds...
    let ping = h.receive(Duration::from_secs(5)).expect("a NOP-In ping");
    let Pdu::NopIn(n) = ping.0 else {
        panic!("not a NOP-In: {:?}", ping.0)
    };
    assert_eq!(n.itt, 0xffff_ffff);
    assert_ne!(n.ttt, 0xffff_ffff);
    // ... and, unanswered, the connection is closed and the session gone.
    assert!(
        eventually(Duration::from_secs(10), || sessions() == 0),
        "the silent session was not closed"
    );
}
