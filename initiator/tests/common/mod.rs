//! TEST DOUBLE: a scripted NVMe-oF/RDMA responder over the in-memory fabric, standing in for a
//! target in the initiator's tests (the real target lives in `target/`).
//!
//! It runs on its own thread: accepts RDMA CM requests (recording their private data), posts
//! receives, and answers Connect, Property Get/Set, Identify (CNS 0/1/2), Get Log Page
//! (discovery), Set Features, Keep Alive, AER, Read, Write (keyed and in-capsule), Flush, Write
//! Zeroes and Dataset Management against an in-memory disk. [`Script`] makes it misbehave on
//! purpose: reject the CM request, never answer an opcode, fail an opcode with a status,
//! disconnect, bump the discovery generation mid-read.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use raidline_fabric::mem::{MemFabric, MemNetwork};
use raidline_fabric::{
    AcceptParams, Access, CmEvent, Completion, CompletionQueue, ConnId, ConnectionManager,
    DmaMemory, Fabric, IncomingRequest, MemoryRegion, Payload, QpCaps, QpInit, QueuePair, RecvWr,
    RemoteBuf, SendOp, SendWr, WcStatus, WrId,
};
use raidline_proto::admin::{GetLogPage, Identify};
use raidline_proto::fabrics::property::{self, Cap, Cc, Csts};
use raidline_proto::fabrics::{Connect, ConnectData};
use raidline_proto::identify::{
    sgls, ActiveNsList, Cns, ControllerType, IdentifyController, IdentifyNamespace, LbaFormat,
};
use raidline_proto::io::{DsmRange, IoCommand};
use raidline_proto::log::{
    AddressFamily, ChangedNsList, DiscoveryEntry, DiscoveryLog, DiscoverySubtype, LogPageId,
    TransportType, Tsas,
};
use raidline_proto::rdma_cm::{CmAccept, CmReject, CmRejectStatus, CmRequest};
use raidline_proto::text::Nqn;
use raidline_proto::{Cqe, SglDescriptor, Sqe, Status, StatusCode};

/// Subsystem the responder serves.
pub const SUBNQN: &str = "nqn.2026-11.io.raidline:test0";
/// Controller id it hands out.
pub const CNTLID: u16 = 0x21;
/// Block size of its namespace.
pub const BLOCK: usize = 512;

/// How the responder (mis)behaves.
#[derive(Clone, Default)]
pub struct Script {
    /// Reject every CM request with this NVMe/RDMA status.
    pub reject_cm: Option<CmRejectStatus>,
    /// Never answer commands with this opcode (admin or I/O, fabrics: 0x7F).
    pub mute_opcode: Option<u8>,
    /// Answer this opcode with this status.
    pub fail: Option<(u8, Status)>,
    /// After this many I/O commands, disconnect the connection instead of answering.
    pub disconnect_after_io: Option<u64>,
    /// In-capsule data size offered (IOCCSZ·16 − 64); 0 = none.
    pub in_capsule: u32,
    /// MDTS (in 4 KiB units as a power of two; 0 = none).
    pub mdts: u8,
    /// Namespace size in blocks.
    pub blocks: u64,
    /// Bump the discovery generation counter after this many discovery log reads.
    pub bump_genctr_after: Option<u64>,
    /// Serve as a discovery controller.
    pub discovery: bool,
    /// Flip a byte of this LBA in every read that covers it (a lying disk).
    pub corrupt_lba: Option<u64>,
}

/// What the responder saw (read by the test).
#[derive(Default)]
pub struct Seen {
    /// CM request private data, per connection, in order.
    pub cm_requests: Mutex<Vec<CmRequest>>,
    /// Connect commands and their data.
    pub connects: Mutex<Vec<(Connect, ConnectData)>>,
    /// Values written to CC.
    pub cc_writes: Mutex<Vec<u32>>,
    /// Keep Alives answered.
    pub keep_alives: AtomicU64,
    /// AERs received.
    pub aers: AtomicU64,
    /// Writes whose data came in the capsule.
    pub in_capsule_writes: AtomicU64,
    /// Writes whose data was fetched by RDMA READ.
    pub keyed_writes: AtomicU64,
    /// I/O commands seen.
    pub io_commands: AtomicU64,
    /// Discovery log reads.
    pub log_reads: AtomicU64,
    /// DSM deallocated ranges.
    pub dsm_ranges: Mutex<Vec<DsmRange>>,
    /// Set Features (fid, cdw11).
    pub features: Mutex<Vec<(u8, u32)>>,
    /// Changed Namespace List reads (nsid, RAE).
    pub changed_log_reads: Mutex<Vec<(u32, bool)>>,
}

/// A running responder.
pub struct Responder {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The host's device (on the same in-memory network).
    pub host: MemFabric,
    /// What it saw.
    pub seen: Arc<Seen>,
    /// Its disk.
    pub disk: Arc<Mutex<Vec<u8>>>,
    /// Set to complete the posted AER with this DW0.
    pub aen: Arc<Mutex<Option<u32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a responder with `script`.
pub fn start(script: Script) -> Responder {
    let net = MemNetwork::new();
    let dev = net.device("target0");
    let host = net.device("host0");
    let mut cm = dev.create_cm().unwrap();
    let addr = cm.listen("10.0.0.1:4420".parse().unwrap(), 16).unwrap();
    let seen = Arc::new(Seen::default());
    let blocks = if script.blocks == 0 {
        2048
    } else {
        script.blocks
    };
    let disk = Arc::new(Mutex::new(vec![0u8; blocks as usize * BLOCK]));
    let aen = Arc::new(Mutex::new(None));
    let stop = Arc::new(AtomicBool::new(false));
    let mut st = State {
        dev,
        cm,
        pd: None,
        conns: Vec::new(),
        script: Script { blocks, ..script },
        seen: seen.clone(),
        disk: disk.clone(),
        aen: aen.clone(),
        cc: 0,
        genctr: 1,
    };
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            if !st.step() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    Responder {
        addr,
        host,
        seen,
        disk,
        aen,
        stop,
        thread: Some(thread),
    }
}

const DATA: usize = 256 * 1024;

struct Conn {
    conn: ConnId,
    qid: u16,
    qp: <MemFabric as Fabric>::Qp,
    cq: <MemFabric as Fabric>::Cq,
    mr: <MemFabric as Fabric>::Mr,
    mem: Arc<DmaMemory>,
    depth: usize,
    recv_len: usize,
    pending: VecDeque<Completion>,
    next_resp: usize,
    aer_cid: Option<u16>,
    dead: bool,
    sq_head: u16,
}

impl Conn {
    fn recv_off(&self, i: usize) -> usize {
        i * self.recv_len
    }
    fn resp_off(&self, i: usize) -> usize {
        self.depth * self.recv_len + i * 16
    }
    fn data_off(&self) -> usize {
        (self.depth * self.recv_len + 2 * self.depth * 16).next_multiple_of(4096)
    }
    fn post_recv(&mut self, i: usize) {
        let sge = self
            .mr
            .sge(self.recv_off(i) as u64, self.recv_len as u32)
            .unwrap();
        let _ = self.qp.post_recv(&[RecvWr {
            wr_id: WrId(i as u64),
            sges: &[sge],
        }]);
    }
    /// Runs one RDMA READ/WRITE to completion (other completions are kept for later).
    fn rdma(&mut self, op: SendOp, local: usize, len: usize) -> bool {
        let sge = self.mr.sge(local as u64, len as u32).unwrap();
        let id = WrId(1 << 40);
        if self
            .qp
            .post_send(&[SendWr {
                wr_id: id,
                op,
                payload: Payload::Sges(&[sge]),
                signaled: true,
            }])
            .is_err()
        {
            return false;
        }
        for _ in 0..100_000 {
            let mut v = Vec::new();
            let _ = self.cq.poll(&mut v, 16);
            let mut ok = None;
            for c in v {
                if c.wr_id == id {
                    ok = Some(c.status == WcStatus::Success);
                } else {
                    self.pending.push_back(c);
                }
            }
            if let Some(ok) = ok {
                return ok;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
        false
    }
    fn respond(&mut self, cid: u16, status: Status, result: u64) {
        let cqe = Cqe {
            result,
            sq_head: self.sq_head,
            sq_id: self.qid,
            cid,
            phase: false,
            status,
        };
        let slot = self.next_resp % (2 * self.depth);
        self.next_resp += 1;
        let off = self.resp_off(slot);
        self.mem.write(off, &cqe.to_bytes()).unwrap();
        let sge = self.mr.sge(off as u64, 16).unwrap();
        let _ = self.qp.post_send(&[SendWr {
            wr_id: WrId(2 << 40),
            op: SendOp::Send,
            payload: Payload::Sges(&[sge]),
            signaled: true,
        }]);
    }
}

struct State {
    dev: MemFabric,
    cm: <MemFabric as Fabric>::Cm,
    pd: Option<<MemFabric as Fabric>::Pd>,
    conns: Vec<Conn>,
    script: Script,
    seen: Arc<Seen>,
    disk: Arc<Mutex<Vec<u8>>>,
    aen: Arc<Mutex<Option<u32>>>,
    cc: u32,
    genctr: u64,
}

fn ok() -> Status {
    Status::SUCCESS
}

impl State {
    fn step(&mut self) -> bool {
        let mut busy = false;
        while let Ok(Some(ev)) = self.cm.poll_event() {
            busy = true;
            match ev {
                CmEvent::ConnectRequest(req) => self.accept(req),
                CmEvent::Disconnected { conn } => {
                    let _ = self.cm.disconnect(conn);
                    for c in &mut self.conns {
                        if c.conn == conn {
                            c.dead = true;
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(dw0) = self.aen.lock().unwrap().take() {
            if let Some(c) = self.conns.iter_mut().find(|c| c.qid == 0 && !c.dead) {
                if let Some(cid) = c.aer_cid.take() {
                    c.respond(cid, ok(), u64::from(dw0));
                }
            }
        }
        for i in 0..self.conns.len() {
            if self.conns[i].dead {
                continue;
            }
            let mut comps: Vec<Completion> = self.conns[i].pending.drain(..).collect();
            let _ = self.conns[i].cq.poll(&mut comps, 32);
            for c in comps {
                if c.wr_id.0 >= 1 << 40 || c.status != WcStatus::Success {
                    continue;
                }
                busy = true;
                self.handle(i, c.wr_id.0 as usize, c.byte_len as usize);
                if self.conns[i].dead {
                    break;
                }
            }
        }
        busy
    }

    fn accept(&mut self, req: <MemFabric as Fabric>::Request) {
        let r = CmRequest::parse(&req.info().private_data).unwrap();
        self.seen.cm_requests.lock().unwrap().push(r);
        if let Some(sts) = self.script.reject_cm {
            let rej = CmReject {
                recfmt: 0,
                status: sts,
            };
            let _ = self.cm.reject(req, &rej.to_bytes());
            return;
        }
        let pd = self
            .pd
            .get_or_insert_with(|| self.dev.alloc_pd().unwrap())
            .clone();
        let depth = usize::from(r.hsqsize) + 1;
        let recv_len = 64 + self.script.in_capsule.max(1024) as usize;
        let total = (depth * recv_len + 2 * depth * 16).next_multiple_of(4096) + DATA;
        let mem = Arc::new(DmaMemory::new(total, false).unwrap());
        let mr = self.dev.register(&pd, mem.clone(), Access::ALL).unwrap();
        let cq = self.dev.create_cq(4 * depth as u32 + 8).unwrap();
        let init = QpInit::<MemFabric> {
            pd,
            send_cq: cq.handle(),
            recv_cq: cq.handle(),
            srq: None,
            caps: QpCaps {
                max_send_wr: 4 * depth as u32,
                max_recv_wr: depth as u32,
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        };
        let conn = req.info().conn;
        let acc = CmAccept {
            recfmt: 0,
            crqsize: depth as u16,
        };
        let qp = match self.cm.accept(
            req,
            init,
            AcceptParams {
                private_data: acc.to_bytes().to_vec(),
                responder_resources: 16,
                initiator_depth: 16,
                rnr_retry_count: 7,
            },
        ) {
            Ok(qp) => qp,
            Err(_) => return,
        };
        let mut c = Conn {
            conn,
            qid: r.qid,
            qp,
            cq,
            mr,
            mem,
            depth,
            recv_len,
            pending: VecDeque::new(),
            next_resp: 0,
            aer_cid: None,
            dead: false,
            sq_head: 0,
        };
        for i in 0..depth {
            c.post_recv(i);
        }
        self.conns.push(c);
    }

    fn handle(&mut self, ci: usize, slot: usize, len: usize) {
        let c = &mut self.conns[ci];
        let mut raw = vec![0u8; len];
        c.mem.read(c.recv_off(slot), &mut raw).unwrap();
        c.post_recv(slot);
        c.sq_head = (c.sq_head + 1) % c.depth as u16;
        let sqe = Sqe::parse(&raw[..64]).unwrap();
        let capsule = raw[64..].to_vec();
        let op = sqe.opcode();
        let cid = sqe.cid();
        if self.script.mute_opcode == Some(op) {
            return;
        }
        if let Some((fop, st)) = self.script.fail {
            if fop == op && !(op == 0x7F && sqe.fctype() != 0x01) {
                self.conns[ci].respond(cid, st, 0);
                return;
            }
        }
        if op == 0x7F {
            return self.fabrics(ci, &sqe, &capsule);
        }
        if self.conns[ci].qid == 0 {
            self.admin(ci, &sqe)
        } else {
            self.io(ci, &sqe, &capsule)
        }
    }

    /// Fetches a command's host data (in-capsule or keyed) into the data area; returns its length.
    fn fetch(&mut self, ci: usize, sgl: SglDescriptor, capsule: &[u8]) -> Option<Vec<u8>> {
        let c = &mut self.conns[ci];
        match sgl {
            SglDescriptor::InCapsule { offset: 0, length } => {
                self.seen.in_capsule_writes.fetch_add(1, Ordering::Relaxed);
                capsule.get(..length as usize).map(|d| d.to_vec())
            }
            SglDescriptor::Keyed {
                address,
                length,
                key,
                ..
            } => {
                let off = c.data_off();
                let l = length as usize;
                if !c.rdma(
                    SendOp::RdmaRead(RemoteBuf {
                        addr: address,
                        rkey: key,
                    }),
                    off,
                    l,
                ) {
                    return None;
                }
                let mut d = vec![0u8; l];
                c.mem.read(off, &mut d).unwrap();
                Some(d)
            }
            _ => None,
        }
    }

    /// RDMA WRITEs `data` to the host buffer of a keyed SGL.
    fn deliver(&mut self, ci: usize, sgl: SglDescriptor, data: &[u8]) -> bool {
        let SglDescriptor::Keyed {
            address,
            length,
            key,
            ..
        } = sgl
        else {
            return false;
        };
        let n = data.len().min(length as usize);
        let c = &mut self.conns[ci];
        let off = c.data_off();
        c.mem.write(off, &data[..n]).unwrap();
        c.rdma(
            SendOp::RdmaWrite(RemoteBuf {
                addr: address,
                rkey: key,
            }),
            off,
            n,
        )
    }

    fn fabrics(&mut self, ci: usize, sqe: &Sqe, capsule: &[u8]) {
        let cid = sqe.cid();
        match sqe.fctype() {
            0x01 => {
                let cmd = Connect::parse(sqe).unwrap();
                let Some(data) = self.fetch(ci, cmd.sgl, capsule) else {
                    return self.conns[ci].respond(
                        cid,
                        Status::new(StatusCode::DATA_TRANSFER_ERROR),
                        0,
                    );
                };
                let cd = ConnectData::parse(&data).unwrap();
                self.seen.connects.lock().unwrap().push((cmd, cd.clone()));
                let want = if self.script.discovery {
                    Nqn::discovery()
                } else {
                    Nqn::new(SUBNQN).unwrap()
                };
                if cd.subnqn != want {
                    // IATTR 1, IPO = subnqn's offset in the Connect data.
                    return self.conns[ci].respond(
                        cid,
                        Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr(),
                        (1 << 16) | 256,
                    );
                }
                self.conns[ci].respond(cid, ok(), u64::from(CNTLID));
            }
            0x04 => {
                let off = u32::from_le_bytes(sqe.as_bytes()[44..48].try_into().unwrap());
                let v: u64 = match off {
                    property::CAP => Cap {
                        mqes: 127,
                        to: 2,
                        css: 1,
                        ..Cap::default()
                    }
                    .to_u64(),
                    property::VS => 0x0001_0300,
                    property::CC => u64::from(self.cc),
                    property::CSTS => {
                        let cc = Cc::from_u32(self.cc);
                        Csts {
                            rdy: cc.en,
                            shst: if cc.shn != 0 { 2 } else { 0 },
                            ..Csts::default()
                        }
                        .to_u32()
                        .into()
                    }
                    _ => {
                        return self.conns[ci].respond(
                            cid,
                            Status::new(StatusCode::INVALID_FIELD).dnr(),
                            0,
                        )
                    }
                };
                self.conns[ci].respond(cid, ok(), v);
            }
            0x00 => {
                let b = sqe.as_bytes();
                let off = u32::from_le_bytes(b[44..48].try_into().unwrap());
                let v = u64::from_le_bytes(b[48..56].try_into().unwrap());
                if off == property::CC {
                    self.cc = v as u32;
                    self.seen.cc_writes.lock().unwrap().push(v as u32);
                }
                self.conns[ci].respond(cid, ok(), 0);
            }
            _ => self.conns[ci].respond(cid, Status::new(StatusCode::INVALID_OPCODE).dnr(), 0),
        }
    }

    fn identify_controller(&self) -> IdentifyController {
        let disc = self.script.discovery;
        let icd = self.script.in_capsule;
        IdentifyController {
            vid: 0x1b96,
            sn: "RESPONDER0001".into(),
            mn: "raidline test responder".into(),
            fr: "1.0".into(),
            cntlid: CNTLID,
            ver: 0x0001_0300,
            mdts: self.script.mdts,
            oaes: if disc { 0 } else { 1 << 8 },
            cntrltype: if disc {
                ControllerType::DISCOVERY
            } else {
                ControllerType::IO
            },
            aerl: 3,
            lpa: 1 << 2,
            kas: 10,
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: 128,
            nn: 1,
            sgls: sgls::SUPPORTED | sgls::KEYED | if icd > 0 { sgls::OFFSET } else { 0 },
            subnqn: Some(if disc {
                Nqn::discovery()
            } else {
                Nqn::new(SUBNQN).unwrap()
            }),
            ioccsz: (icd + 64) / 16,
            iorcsz: 1,
            ..IdentifyController::default()
        }
    }

    fn discovery_log(&self) -> DiscoveryLog {
        let entry = |n: &str, port: u16| DiscoveryEntry {
            trtype: TransportType::RDMA,
            adrfam: AddressFamily::IPV4,
            subtype: DiscoverySubtype::NVME,
            treq: 0,
            portid: port,
            cntlid: 0xFFFF,
            asqsz: 32,
            eflags: 0,
            trsvcid: "4420".into(),
            subnqn: Nqn::new(n).unwrap(),
            traddr: "10.0.0.1".into(),
            tsas: Tsas::RDMA_CM,
        };
        let mut entries = vec![entry(SUBNQN, 1)];
        if self.genctr > 1 {
            entries.push(entry("nqn.2026-11.io.raidline:test1", 2));
        }
        DiscoveryLog {
            genctr: self.genctr,
            entries,
        }
    }

    fn admin(&mut self, ci: usize, sqe: &Sqe) {
        let cid = sqe.cid();
        match sqe.opcode() {
            0x06 => {
                let id = Identify::parse(sqe).unwrap();
                let data = match id.cns {
                    Cns::CONTROLLER => self.identify_controller().to_bytes().unwrap(),
                    Cns::NAMESPACE if id.nsid == 1 => {
                        let mut ns = IdentifyNamespace {
                            nsze: self.script.blocks,
                            ncap: self.script.blocks,
                            nuse: self.script.blocks,
                            ..IdentifyNamespace::default()
                        };
                        ns.lbaf[0] = LbaFormat::new(9);
                        ns.to_bytes()
                    }
                    Cns::ACTIVE_NS_LIST => ActiveNsList::after(id.nsid, [1]).to_bytes().unwrap(),
                    _ => {
                        return self.conns[ci].respond(
                            cid,
                            Status::new(StatusCode::INVALID_NAMESPACE).dnr(),
                            0,
                        )
                    }
                };
                if self.deliver(ci, id.sgl, &data) {
                    self.conns[ci].respond(cid, ok(), 0);
                }
            }
            0x02 => {
                let g = GetLogPage::parse(sqe).unwrap();
                if g.lid == LogPageId::CHANGED_NS_LIST {
                    self.seen
                        .changed_log_reads
                        .lock()
                        .unwrap()
                        .push((g.nsid, g.rae));
                    let page = ChangedNsList::from_ids([2]).to_bytes().unwrap();
                    let mut out = vec![0u8; g.byte_len() as usize];
                    let part = g.slice(&page).unwrap();
                    out[..part.len()].copy_from_slice(part);
                    if self.deliver(ci, g.sgl, &out) {
                        self.conns[ci].respond(cid, ok(), 0);
                    }
                    return;
                }
                if g.lid != LogPageId::DISCOVERY {
                    return self.conns[ci].respond(
                        cid,
                        Status::new(StatusCode::INVALID_LOG_PAGE).dnr(),
                        0,
                    );
                }
                let n = self.seen.log_reads.fetch_add(1, Ordering::Relaxed) + 1;
                if self.script.bump_genctr_after == Some(n) {
                    self.genctr += 1;
                }
                let page = self.discovery_log().to_bytes().unwrap();
                let mut out = vec![0u8; g.byte_len() as usize];
                let part = g.slice(&page).unwrap();
                out[..part.len()].copy_from_slice(part);
                if self.deliver(ci, g.sgl, &out) {
                    self.conns[ci].respond(cid, ok(), 0);
                }
            }
            0x09 => {
                let fid = sqe.cdw(10) as u8;
                self.seen.features.lock().unwrap().push((fid, sqe.cdw(11)));
                // Number of Queues: grant at most 2 of each.
                let dw0 = if fid == 0x07 {
                    let v = sqe.cdw(11);
                    u64::from((v & 0xFFFF).min(1) | ((v >> 16).min(1) << 16))
                } else {
                    0
                };
                self.conns[ci].respond(cid, ok(), dw0);
            }
            0x18 => {
                self.seen.keep_alives.fetch_add(1, Ordering::Relaxed);
                self.conns[ci].respond(cid, ok(), 0);
            }
            0x0C => {
                self.seen.aers.fetch_add(1, Ordering::Relaxed);
                self.conns[ci].aer_cid = Some(cid);
            }
            _ => self.conns[ci].respond(cid, Status::new(StatusCode::INVALID_OPCODE).dnr(), 0),
        }
    }

    fn io(&mut self, ci: usize, sqe: &Sqe, capsule: &[u8]) {
        let cid = sqe.cid();
        let n = self.seen.io_commands.fetch_add(1, Ordering::Relaxed) + 1;
        if self.script.disconnect_after_io.is_some_and(|k| n > k) {
            let conn = self.conns[ci].conn;
            let _ = self.cm.disconnect(conn);
            self.conns[ci].dead = true;
            return;
        }
        let blocks = self.script.blocks;
        let range_ok = |slba: u64, nlb: u32| slba + u64::from(nlb) <= blocks;
        let oor = Status::new(StatusCode::LBA_OUT_OF_RANGE).dnr();
        match IoCommand::parse(sqe) {
            Ok(IoCommand::Read(rw)) => {
                if !range_ok(rw.slba, rw.nlb) {
                    return self.conns[ci].respond(cid, oor, 0);
                }
                let lo = rw.slba as usize * BLOCK;
                let mut data = self.disk.lock().unwrap()[lo..lo + rw.nlb as usize * BLOCK].to_vec();
                if let Some(bad) = self.script.corrupt_lba {
                    if (rw.slba..rw.slba + u64::from(rw.nlb)).contains(&bad) {
                        data[(bad - rw.slba) as usize * BLOCK + 100] ^= 0x40;
                    }
                }
                if self.deliver(ci, rw.sgl, &data) {
                    self.conns[ci].respond(cid, ok(), 0);
                }
            }
            Ok(IoCommand::Write(rw)) => {
                if !range_ok(rw.slba, rw.nlb) {
                    return self.conns[ci].respond(cid, oor, 0);
                }
                if matches!(rw.sgl, SglDescriptor::Keyed { .. }) {
                    self.seen.keyed_writes.fetch_add(1, Ordering::Relaxed);
                }
                let Some(data) = self.fetch(ci, rw.sgl, capsule) else {
                    return self.conns[ci].respond(
                        cid,
                        Status::new(StatusCode::DATA_TRANSFER_ERROR),
                        0,
                    );
                };
                let lo = rw.slba as usize * BLOCK;
                self.disk.lock().unwrap()[lo..lo + data.len()].copy_from_slice(&data);
                self.conns[ci].respond(cid, ok(), 0);
            }
            Ok(IoCommand::Flush { .. }) => self.conns[ci].respond(cid, ok(), 0),
            Ok(IoCommand::WriteZeroes(w)) => {
                if !range_ok(w.slba, w.nlb) {
                    return self.conns[ci].respond(cid, oor, 0);
                }
                let lo = w.slba as usize * BLOCK;
                self.disk.lock().unwrap()[lo..lo + w.nlb as usize * BLOCK].fill(0);
                self.conns[ci].respond(cid, ok(), 0);
            }
            Ok(IoCommand::DatasetManagement(d)) => {
                let Some(data) = self.fetch(ci, d.sgl, capsule) else {
                    return self.conns[ci].respond(
                        cid,
                        Status::new(StatusCode::DATA_TRANSFER_ERROR),
                        0,
                    );
                };
                let ranges = DsmRange::parse_list(&data[..d.data_len()], d.ranges).unwrap();
                for r in &ranges {
                    if d.deallocate && range_ok(r.slba, r.nlb) {
                        let lo = r.slba as usize * BLOCK;
                        self.disk.lock().unwrap()[lo..lo + r.nlb as usize * BLOCK].fill(0);
                    }
                }
                self.seen.dsm_ranges.lock().unwrap().extend(ranges);
                self.conns[ci].respond(cid, ok(), 0);
            }
            _ => self.conns[ci].respond(cid, Status::new(StatusCode::INVALID_OPCODE).dnr(), 0),
        }
    }
}
