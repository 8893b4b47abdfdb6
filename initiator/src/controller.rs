//! An NVMe-oF controller seen from the host: the admin queue's bring-up (Fabrics Connect,
//! Property Get CAP/VS, Property Set CC.EN, CSTS.RDY, Identify Controller), keep-alive and
//! Asynchronous Event Requests, Number of Queues, and the I/O queues' connects — the sequence
//! the Linux nvme-rdma host runs (see HOST.md), in the same order.
//!
//! Keep-alive and AER completions are serviced by [`Controller::service`] (called from every
//! synchronous helper here and, in `perf`, by the thread that owns the controller while workers
//! own the I/O queues). Admin commands run one at a time; the Keep Alive and the AER may be in
//! flight meanwhile and are picked up by the next service call.
//!
//! Invariants: the controller id from the admin Connect is the one every I/O queue connects
//! with; Identify Controller must report that id and, for an I/O controller, the subsystem NQN
//! connected to; an I/O queue's size never exceeds CAP.MQES + 1 nor MAXCMD.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use raidline_fabric::Fabric;
use raidline_proto::admin::{AsyncEventRequest, GetLogPage, Identify, KeepAlive, SetFeatures};
use raidline_proto::aen::AsyncEvent;
use raidline_proto::fabrics::property::{self, shutdown, Cap, Cc, Csts, Version};
use raidline_proto::fabrics::{
    AuthDirection, Authentication, Connect, ConnectData, ConnectResponse, PropertyGet, PropertySet,
    PropertySize, CNTLID_DYNAMIC,
};
use raidline_proto::features::{AsyncEventConfig, FeatureId, NumberOfQueues};
use raidline_proto::identify::{
    sgls, ActiveNsList, Cns, ControllerType, IdentifyController, IdentifyNamespace,
    IDENTIFY_DATA_LEN,
};
use raidline_proto::io::DsmRange;
use raidline_proto::log::{ChangedNsList, LogPageId};
use raidline_proto::text::Nqn;
use raidline_proto::{SglDescriptor, Sqe, StatusCode};

use crate::error::Error;
use crate::io;
use crate::queue::{backoff, Queue, QueueParams, Xfer};
use crate::types::{HostIdentity, Lba, Nsid, Qid, Tag};

/// Admin queue size (the Fabrics minimum, as Linux uses: hrqsize 32, hsqsize 31).
pub const ADMIN_DEPTH: u16 = 32;
/// Data buffer per admin command: room for Identify and multi-entry log reads.
pub const ADMIN_DATA_SLOT: u32 = 16 * 1024;

/// How to connect to a controller. Defaults follow the Linux host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerOptions {
    /// Who we are.
    pub host: HostIdentity,
    /// The subsystem to connect to (the discovery NQN for a discovery controller).
    pub subnqn: Nqn,
    /// Keep-alive timeout asked for in the Connect (zero: none). Keep Alive goes out every half.
    pub kato: Duration,
    /// Deadline of admin commands and connection setup.
    pub admin_timeout: Duration,
    /// Deadline of I/O commands.
    pub io_timeout: Duration,
    /// I/O queues wanted (0 for discovery).
    pub io_queues: u16,
    /// Size of each I/O queue (cut to CAP.MQES + 1 and MAXCMD).
    pub io_depth: u16,
    /// Largest data transfer per I/O command (cut to MDTS): each I/O slot has this buffer.
    pub max_io_bytes: u32,
    /// Keep an Asynchronous Event Request posted.
    pub aer: bool,
    /// DH-HMAC-CHAP secrets, for controllers that require in-band authentication.
    pub auth: Option<HostSecrets>,
}

/// A host's DH-HMAC-CHAP secrets (`nvme connect --dhchap-secret … [--dhchap-ctrl-secret …]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSecrets {
    /// The host's secret.
    pub secret: raidline_auth::Secret,
    /// The controller's secret: the host then authenticates the controller too.
    pub ctrl_secret: Option<raidline_auth::Secret>,
}

impl ControllerOptions {
    /// Options for `subnqn` with the Linux host's defaults: KATO 5 s, admin timeout 60 s, I/O
    /// timeout 30 s, one I/O queue of 128, 128 KiB transfers, an AER posted.
    pub fn new(host: HostIdentity, subnqn: Nqn) -> ControllerOptions {
        ControllerOptions {
            host,
            subnqn,
            kato: Duration::from_secs(5),
            admin_timeout: Duration::from_secs(60),
            io_timeout: Duration::from_secs(30),
            io_queues: 1,
            io_depth: 128,
            max_io_bytes: 128 * 1024,
            aer: true,
            auth: None,
        }
    }

    /// Options for a discovery controller: no keep-alive, no I/O queues, no AER.
    pub fn discovery(host: HostIdentity) -> ControllerOptions {
        ControllerOptions {
            kato: Duration::ZERO,
            io_queues: 0,
            aer: false,
            ..ControllerOptions::new(host, Nqn::discovery())
        }
    }
}

/// A namespace as the host uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Its id.
    pub nsid: Nsid,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// The whole Identify Namespace structure.
    pub id: IdentifyNamespace,
}

/// The admin queue and its timers.
pub struct Admin<F: Fabric> {
    /// The queue.
    pub q: Queue<F>,
    kato: Duration,
    next_ka: Option<Instant>,
    ka_tag: Option<Tag>,
    aer_tag: Option<Tag>,
    events: Vec<AsyncEvent>,
    logs_to_read: Vec<LogPageId>,
    malformed_events: u64,
    keep_alives: u64,
}

impl<F: Fabric> Admin<F> {
    /// Sends a Keep Alive when one is due, reaps finished Keep Alives and AERs (reposting the
    /// AER), and polls the queue. Fails when a Keep Alive or the AER failed for a reason other
    /// than a plain status, or the queue is down.
    pub fn service(&mut self) -> Result<(), Error> {
        let mut done = Vec::new();
        self.q.poll(&mut done);
        if let Some(t) = self.ka_tag {
            if let Some(f) = self.q.take(t) {
                self.ka_tag = None;
                f.result?;
                self.keep_alives += 1;
            }
        }
        if let Some(t) = self.aer_tag {
            if let Some(f) = self.q.take(t) {
                self.aer_tag = None;
                match f.result {
                    Ok(cqe) => {
                        // An event with reserved bits set is dropped (and counted), not fatal:
                        // the AER is posted again either way.
                        match AsyncEvent::from_dw0(cqe.dw0()) {
                            Ok(ev) => {
                                // The event stays masked until its log page is read with RAE
                                // clear; the controller's service reads the ones it knows.
                                if ev.log_page == LogPageId::CHANGED_NS_LIST {
                                    self.logs_to_read.push(ev.log_page);
                                }
                                self.events.push(ev);
                            }
                            Err(_) => self.malformed_events += 1,
                        }
                        self.post_aer()?;
                    }
                    // The controller has no more AER slots or aborted it: stop asking.
                    Err(Error::Nvme { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if let Some(cause) = self.q.down_reason() {
            return Err(Error::QueueDown {
                qid: Qid::ADMIN,
                cause: cause.to_string(),
            });
        }
        if let Some(due) = self.next_ka {
            let now = Instant::now();
            if now >= due && self.ka_tag.is_none() {
                if let Some(tag) = self.q.alloc() {
                    let sqe = KeepAlive { cid: 0 }.to_sqe();
                    if let Err(e) = self.q.submit(tag, sqe, Xfer::None, "Keep Alive", true) {
                        self.q.release(tag);
                        return Err(e);
                    }
                    self.ka_tag = Some(tag);
                    self.next_ka = Some(now + self.kato / 2);
                }
            }
        }
        Ok(())
    }

    fn post_aer(&mut self) -> Result<(), Error> {
        let Some(tag) = self.q.alloc() else {
            return Ok(());
        };
        let sqe = AsyncEventRequest { cid: 0 }.to_sqe();
        if let Err(e) = self
            .q
            .submit(tag, sqe, Xfer::None, "Asynchronous Event Request", false)
        {
            self.q.release(tag);
            return Err(e);
        }
        self.aer_tag = Some(tag);
        Ok(())
    }

    /// Runs one admin command to completion (servicing keep-alive while it waits).
    pub fn execute(
        &mut self,
        sqe: Sqe,
        xfer: Xfer,
        command: &'static str,
        data_in: &[u8],
        data_out: &mut [u8],
    ) -> Result<raidline_proto::Cqe, Error> {
        self.q.execute(sqe, xfer, command, data_in, data_out)
    }

    /// Asynchronous events received so far (drained).
    pub fn take_events(&mut self) -> Vec<AsyncEvent> {
        std::mem::take(&mut self.events)
    }

    /// AER completions whose DW0 did not parse (reserved bits or event types).
    pub fn malformed_events(&self) -> u64 {
        self.malformed_events
    }

    /// Keep Alives completed so far.
    pub fn keep_alives(&self) -> u64 {
        self.keep_alives
    }
}

/// A connected, enabled controller with its I/O queues.
pub struct Controller<F: Fabric> {
    fabric: F,
    pd: F::Pd,
    addr: SocketAddr,
    opts: ControllerOptions,
    cntlid: u16,
    cap: Cap,
    vs: Version,
    id: IdentifyController,
    /// The admin queue.
    pub admin: Admin<F>,
    /// The connected I/O queues (index 0 is qid 1).
    pub io: Vec<Queue<F>>,
    changed_ns: Vec<ChangedNsList>,
}

fn null_sgl() -> SglDescriptor {
    SglDescriptor::Keyed {
        address: 0,
        length: 0,
        key: 0,
        invalidate: false,
    }
}

/// Sends the Fabrics Connect on `q` and returns the controller id; authenticates the queue
/// when the controller requires it (ATR) and `auth` holds the secrets.
pub fn fabrics_connect<F: Fabric>(
    q: &mut Queue<F>,
    kato: Duration,
    data: &ConnectData,
    auth: Option<&HostSecrets>,
) -> Result<u16, Error> {
    let kato_ms = u32::try_from(kato.as_millis()).unwrap_or(u32::MAX);
    let sqe = Connect {
        cid: 0,
        sgl: null_sgl(),
        recfmt: 0,
        qid: q.qid().0,
        sqsize: q.depth() - 1,
        cattr: 0,
        kato: if q.qid() == Qid::ADMIN { kato_ms } else { 0 },
    }
    .to_sqe()?;
    let bytes = data.to_bytes();
    let cqe = q.execute(
        sqe,
        Xfer::FromHost(bytes.len() as u32),
        "Connect",
        &bytes,
        &mut [],
    )?;
    match ConnectResponse::success_from_dw0(cqe.dw0()) {
        ConnectResponse::Success { cntlid, authreq } => {
            if authreq & 1 != 0 {
                let Some(s) = auth else {
                    return Err(Error::Protocol(format!(
                        "queue {}: the controller requires in-band authentication (AUTHREQ {authreq:#x}) and no DH-HMAC-CHAP secret is given",
                        q.qid()
                    )));
                };
                authenticate(q, s, data.hostnqn.as_str(), data.subnqn.as_str(), 0)?;
            }
            Ok(cntlid)
        }
        other => Err(Error::Protocol(format!("Connect answered {other:?}"))),
    }
}

fn auth_command(direction: AuthDirection, len: usize) -> Result<Sqe, Error> {
    Ok(Authentication {
        cid: 0,
        direction,
        sgl: null_sgl(),
        secp: raidline_proto::auth::SECP_INBAND,
        spsp0: raidline_proto::auth::SPSP_DHCHAP,
        spsp1: raidline_proto::auth::SPSP_DHCHAP,
        length: len as u32,
    }
    .to_sqe()?)
}

fn auth_send<F: Fabric>(q: &mut Queue<F>, msg: &[u8]) -> Result<(), Error> {
    let sqe = auth_command(AuthDirection::Send, msg.len())?;
    let xfer = Xfer::FromHost(msg.len() as u32);
    q.execute(sqe, xfer, "Authentication Send", msg, &mut [])?;
    Ok(())
}

fn auth_receive<F: Fabric>(q: &mut Queue<F>) -> Result<Vec<u8>, Error> {
    // As the Linux host: a 4 KiB allocation for every message.
    let mut buf = vec![0u8; 4096];
    let sqe = auth_command(AuthDirection::Receive, buf.len())?;
    let xfer = Xfer::ToHost(buf.len() as u32);
    q.execute(sqe, xfer, "Authentication Receive", &[], &mut buf)?;
    Ok(buf)
}

/// Runs one DH-HMAC-CHAP transaction (`t_id`) on `q`, as the Linux host does: Negotiate,
/// Challenge, Reply, Success1 and, when the host checks the controller too, Success2. A failure
/// the host detects is reported to the controller with a Failure2.
pub fn authenticate<F: Fabric>(
    q: &mut Queue<F>,
    s: &HostSecrets,
    hostnqn: &str,
    subnqn: &str,
    t_id: u16,
) -> Result<(), Error> {
    let mut h = raidline_auth::HostAuth::new(
        s.secret.clone(),
        s.ctrl_secret.clone(),
        hostnqn,
        subnqn,
        t_id,
    );
    let qid = q.qid();
    let fail = |q: &mut Queue<F>, h: &raidline_auth::HostAuth, e: raidline_auth::HostError| {
        if let Some(f) = h.failure2(&e) {
            let _ = auth_send(q, &f);
        }
        Error::Protocol(format!("queue {qid}: authentication failed: {e}"))
    };
    auth_send(q, &h.negotiate())?;
    let challenge = auth_receive(q)?;
    let reply = match h.reply(&challenge) {
        Ok(r) => r,
        Err(e) => return Err(fail(q, &h, e)),
    };
    auth_send(q, &reply)?;
    let success1 = auth_receive(q)?;
    match h.success1(&success1) {
        Ok(Some(s2)) => auth_send(q, &s2),
        Ok(None) => Ok(()),
        Err(e) => Err(fail(q, &h, e)),
    }
}

/// Reads a property.
pub fn property_get<F: Fabric>(q: &mut Queue<F>, offset: u32) -> Result<u64, Error> {
    let size = property::size_of(offset).unwrap_or(PropertySize::Four);
    let mut sqe = PropertyGet {
        cid: 0,
        size,
        offset,
    }
    .to_sqe();
    // Linux puts a null keyed SGL into every command without data, Property Get included.
    sqe.set_sgl1(&null_sgl())?;
    let cqe = q.execute(sqe, Xfer::None, "Property Get", &[], &mut [])?;
    Ok(match size {
        PropertySize::Four => u64::from(cqe.dw0()),
        PropertySize::Eight => cqe.result,
    })
}

/// Writes a property.
pub fn property_set<F: Fabric>(q: &mut Queue<F>, offset: u32, value: u64) -> Result<(), Error> {
    let size = property::size_of(offset).unwrap_or(PropertySize::Four);
    let mut sqe = PropertySet {
        cid: 0,
        size,
        offset,
        value,
    }
    .to_sqe();
    sqe.set_sgl1(&null_sgl())?;
    q.execute(sqe, Xfer::None, "Property Set", &[], &mut [])?;
    Ok(())
}

impl<F: Fabric> Controller<F> {
    /// Connects the admin queue, enables the controller, identifies it, and (for an I/O
    /// controller) negotiates and connects the I/O queues.
    pub fn connect(
        fabric: F,
        addr: SocketAddr,
        opts: ControllerOptions,
    ) -> Result<Controller<F>, Error> {
        let pd = fabric.alloc_pd()?;
        let mut q = Queue::connect(
            &fabric,
            &pd,
            addr,
            &QueueParams {
                qid: Qid::ADMIN,
                depth: ADMIN_DEPTH,
                data_slot: ADMIN_DATA_SLOT,
                cntlid: 0,
                timeout: opts.admin_timeout,
            },
        )?;
        let cntlid = fabrics_connect(
            &mut q,
            opts.kato,
            &ConnectData {
                hostid: opts.host.hostid,
                cntlid: CNTLID_DYNAMIC,
                subnqn: opts.subnqn.clone(),
                hostnqn: opts.host.hostnqn.clone(),
            },
            opts.auth.as_ref(),
        )?;
        let cap = Cap::from_u64(property_get(&mut q, property::CAP)?);
        if cap.mpsmin != 0 {
            return Err(Error::Protocol(format!(
                "CAP.MPSMIN {} (pages of {} bytes): hosts use 4 KiB pages",
                cap.mpsmin,
                4096u64 << cap.mpsmin
            )));
        }
        let vs = Version::from_u32(property_get(&mut q, property::VS)? as u32);
        let mut admin = Admin {
            q,
            kato: opts.kato,
            next_ka: None,
            ka_tag: None,
            aer_tag: None,
            events: Vec::new(),
            logs_to_read: Vec::new(),
            malformed_events: 0,
            keep_alives: 0,
        };
        enable(&mut admin.q, &cap)?;
        if !opts.kato.is_zero() {
            admin.next_ka = Some(Instant::now() + opts.kato / 2);
        }
        let mut ctrl = Controller {
            fabric,
            pd,
            addr,
            opts,
            cntlid,
            cap,
            vs,
            id: IdentifyController::default(),
            admin,
            io: Vec::new(),
            changed_ns: Vec::new(),
        };
        ctrl.id = ctrl.identify_controller()?;
        ctrl.check_identity()?;
        if ctrl.is_discovery() {
            return Ok(ctrl);
        }
        if ctrl.opts.aer {
            ctrl.configure_aen()?;
            ctrl.admin.post_aer()?;
        }
        if ctrl.opts.io_queues > 0 {
            ctrl.connect_io_queues()?;
        }
        Ok(ctrl)
    }

    fn check_identity(&self) -> Result<(), Error> {
        if self.id.cntlid != self.cntlid {
            return Err(Error::Protocol(format!(
                "Identify Controller reports cntlid {} but Connect gave {}",
                self.id.cntlid, self.cntlid
            )));
        }
        if self.is_discovery() {
            return Ok(());
        }
        if let Some(sub) = &self.id.subnqn {
            if sub != &self.opts.subnqn {
                return Err(Error::Protocol(format!(
                    "Identify Controller reports subsystem {sub}, connected to {}",
                    self.opts.subnqn
                )));
            }
        }
        if self.id.sgls & sgls::KEYED == 0 {
            return Err(Error::Protocol(
                "the controller does not support keyed SGLs (SGLS bit 2)".into(),
            ));
        }
        Ok(())
    }

    /// Whether this is a discovery controller.
    pub fn is_discovery(&self) -> bool {
        self.id.cntrltype == ControllerType::DISCOVERY || self.opts.subnqn.is_discovery()
    }

    /// The controller id.
    pub fn cntlid(&self) -> u16 {
        self.cntlid
    }
    /// CAP.
    pub fn cap(&self) -> &Cap {
        &self.cap
    }
    /// VS.
    pub fn version(&self) -> Version {
        self.vs
    }
    /// The Identify Controller structure read at connect.
    pub fn identity(&self) -> &IdentifyController {
        &self.id
    }
    /// The options it was connected with.
    pub fn options(&self) -> &ControllerOptions {
        &self.opts
    }
    /// The target address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Largest data transfer per command (MDTS in 4 KiB pages; 0 = no limit), in bytes.
    pub fn mdts_bytes(&self) -> Option<u64> {
        match self.id.mdts {
            0 => None,
            m => 4096u64.checked_shl(u32::from(m)),
        }
    }

    /// Largest write the controller takes in the capsule (IOCCSZ·16 − 64 when SGLS bit 20 is
    /// set; 0 otherwise).
    pub fn in_capsule_max(&self) -> u32 {
        if self.id.sgls & sgls::OFFSET == 0 {
            return 0;
        }
        (self.id.ioccsz.saturating_mul(16)).saturating_sub(64)
    }

    /// Keep-alive and AER servicing; call it at least every KATO/4 while the controller lives.
    /// After a namespace-attribute event it reads the Changed Namespace List (RAE clear, which
    /// unmasks the event, as Linux does); see [`Controller::take_changed_namespaces`].
    pub fn service(&mut self) -> Result<(), Error> {
        self.admin.service()?;
        for lid in std::mem::take(&mut self.admin.logs_to_read) {
            let b = match self.get_log_page(lid, Nsid::ALL.0, 0, ChangedNsList::LEN) {
                Ok(b) => b,
                // A controller that cannot give the page: the event was still reported.
                Err(Error::Nvme { .. }) => continue,
                Err(e) => return Err(e),
            };
            self.changed_ns.push(ChangedNsList::parse(&b)?);
        }
        Ok(())
    }

    /// Changed Namespace Lists read after namespace-attribute events (drained).
    pub fn take_changed_namespaces(&mut self) -> Vec<ChangedNsList> {
        std::mem::take(&mut self.changed_ns)
    }

    /// Identify Controller (CNS 01h).
    pub fn identify_controller(&mut self) -> Result<IdentifyController, Error> {
        let b = self.identify_raw(Cns::CONTROLLER, 0)?;
        Ok(IdentifyController::parse(&b)?)
    }

    /// Any Identify structure, raw (4096 bytes).
    pub fn identify_raw(&mut self, cns: Cns, nsid: u32) -> Result<Vec<u8>, Error> {
        let sqe = Identify::new(0, cns, nsid, null_sgl()).to_sqe()?;
        let mut b = vec![0u8; IDENTIFY_DATA_LEN];
        self.admin.execute(
            sqe,
            Xfer::ToHost(IDENTIFY_DATA_LEN as u32),
            "Identify",
            &[],
            &mut b,
        )?;
        Ok(b)
    }

    /// Active namespace ids (CNS 02h; VS ≥ 1.1), or 1..=NN for older controllers.
    pub fn active_namespaces(&mut self) -> Result<Vec<Nsid>, Error> {
        if self.vs < Version::new(1, 1, 0) {
            return Ok((1..=self.id.nn.min(1024)).map(Nsid).collect());
        }
        let mut out = Vec::new();
        let mut after = 0u32;
        loop {
            let b = self.identify_raw(Cns::ACTIVE_NS_LIST, after)?;
            let list = ActiveNsList::parse(&b)?;
            let full = list.ids.len() == raidline_proto::identify::NS_LIST_MAX;
            let Some(&last) = list.ids.last() else { break };
            out.extend(list.ids.iter().map(|&n| Nsid(n)));
            if !full {
                break;
            }
            after = last;
        }
        Ok(out)
    }

    /// Identify Namespace (CNS 00h) with its block size and size.
    pub fn namespace(&mut self, nsid: Nsid) -> Result<Namespace, Error> {
        let b = self.identify_raw(Cns::NAMESPACE, nsid.0)?;
        let id = IdentifyNamespace::parse(&b)?;
        if id.nsze == 0 {
            return Err(Error::Nvme {
                qid: Qid::ADMIN,
                cid: 0,
                command: "Identify Namespace",
                status: raidline_proto::Status::new(StatusCode::INVALID_NAMESPACE),
                dw0: 0,
            });
        }
        let fmt = id.lba_format();
        let block_size = fmt
            .block_size()
            .and_then(|b| u32::try_from(b).ok())
            .filter(|&b| b >= 512)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "namespace {nsid}: LBA data size 2^{} is not usable",
                    fmt.lbads
                ))
            })?;
        if fmt.ms != 0 && id.flbas & 0x10 != 0 {
            return Err(Error::Protocol(format!(
                "namespace {nsid}: extended-LBA metadata ({} bytes) is not supported",
                fmt.ms
            )));
        }
        Ok(Namespace {
            nsid,
            block_size,
            blocks: id.nsze,
            id,
        })
    }

    /// Reads `len` bytes of log page `lid` at byte `offset` (in chunks of the admin slot).
    pub fn get_log_page(
        &mut self,
        lid: LogPageId,
        nsid: u32,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; len];
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(ADMIN_DATA_SLOT as usize);
            // Lengths are dword multiples on the wire: round up, keep what was asked.
            let wire = n.next_multiple_of(4);
            let cmd = GetLogPage::read(0, lid, nsid, offset + done as u64, wire as u64, null_sgl())
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "log page read of {wire} bytes at offset {}",
                        offset + done as u64
                    ))
                })?;
            let mut chunk = vec![0u8; wire];
            self.admin.execute(
                cmd.to_sqe()?,
                Xfer::ToHost(wire as u32),
                "Get Log Page",
                &[],
                &mut chunk,
            )?;
            out[done..done + n].copy_from_slice(&chunk[..n]);
            done += n;
        }
        Ok(out)
    }

    /// Set Features with a dword value; returns completion DW0.
    pub fn set_features(&mut self, fid: FeatureId, cdw11: u32) -> Result<u32, Error> {
        let sqe = SetFeatures::dword(0, fid, cdw11, null_sgl()).to_sqe()?;
        let cqe = self
            .admin
            .execute(sqe, Xfer::None, "Set Features", &[], &mut [])?;
        Ok(cqe.dw0())
    }

    fn configure_aen(&mut self) -> Result<(), Error> {
        // What Linux enables: namespace attribute, firmware activation, ANA change, discovery
        // log change — where the controller says it supports them (OAES).
        let wanted = AsyncEventConfig::NS_ATTRIBUTE
            | AsyncEventConfig::FIRMWARE_ACTIVATION
            | AsyncEventConfig::ANA_CHANGE
            | AsyncEventConfig::DISCOVERY_LOG_CHANGE;
        let cfg = self.id.oaes & wanted;
        if cfg == 0 {
            return Ok(());
        }
        match self.set_features(FeatureId::ASYNC_EVENT_CONFIG, cfg) {
            Ok(_) => Ok(()),
            // Optional feature: a controller that refuses it still works.
            Err(Error::Nvme { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn connect_io_queues(&mut self) -> Result<(), Error> {
        let want = self.opts.io_queues;
        let req = NumberOfQueues::from_counts(want, want)
            .ok_or_else(|| Error::InvalidArgument(format!("{want} I/O queues")))?;
        let dw0 = self.set_features(FeatureId::NUMBER_OF_QUEUES, req.to_dword())?;
        let got = NumberOfQueues::from_dword(dw0)?;
        let granted = u32::from(want).min(got.sq_count()).min(got.cq_count()) as u16;
        let mut depth = self
            .opts
            .io_depth
            .min(self.cap.mqes.saturating_add(1))
            .max(2);
        if self.id.maxcmd != 0 {
            depth = depth.min(self.id.maxcmd).max(2);
        }
        let mut slot = self.opts.max_io_bytes.max(4096);
        if let Some(m) = self.mdts_bytes() {
            slot = slot.min(u32::try_from(m).unwrap_or(u32::MAX));
        }
        let icm = self.in_capsule_max();
        for qid in 1..=granted {
            let mut q = Queue::connect(
                &self.fabric,
                &self.pd,
                self.addr,
                &QueueParams {
                    qid: Qid(qid),
                    depth,
                    data_slot: slot,
                    cntlid: self.cntlid,
                    timeout: self.opts.admin_timeout,
                },
            )?;
            let got = fabrics_connect(
                &mut q,
                Duration::ZERO,
                &ConnectData {
                    hostid: self.opts.host.hostid,
                    cntlid: self.cntlid,
                    subnqn: self.opts.subnqn.clone(),
                    hostnqn: self.opts.host.hostnqn.clone(),
                },
                self.opts.auth.as_ref(),
            )?;
            if got != self.cntlid {
                return Err(Error::Protocol(format!(
                    "I/O queue {qid} connected to controller {got}, the admin queue to {}",
                    self.cntlid
                )));
            }
            q.set_timeout(self.opts.io_timeout);
            q.set_in_capsule_max(icm);
            self.io.push(q);
            self.service()?;
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes (whole blocks) of `ns` from `lba` through I/O queue `qi`
    /// (index into [`Controller::io`]), servicing keep-alive meanwhile.
    pub fn read(
        &mut self,
        qi: usize,
        ns: &Namespace,
        lba: Lba,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        let (admin, q) = self.split(qi)?;
        io::read(q, ns, lba, buf, &mut || admin.service())
    }

    /// Writes `data` (whole blocks) to `ns` at `lba` through I/O queue `qi`.
    pub fn write(&mut self, qi: usize, ns: &Namespace, lba: Lba, data: &[u8]) -> Result<(), Error> {
        let (admin, q) = self.split(qi)?;
        io::write(q, ns, lba, data, &mut || admin.service())
    }

    /// Flush of `nsid` through I/O queue `qi`.
    pub fn flush(&mut self, qi: usize, nsid: Nsid) -> Result<(), Error> {
        let (admin, q) = self.split(qi)?;
        io::run_one(q, &mut || admin.service(), |q, t| {
            io::submit_flush(q, t, nsid)
        })
        .map(|_| ())
    }

    /// Write Zeroes of `nlb` blocks at `lba` through I/O queue `qi`.
    pub fn write_zeroes(
        &mut self,
        qi: usize,
        ns: &Namespace,
        lba: Lba,
        nlb: u32,
        deallocate: bool,
    ) -> Result<(), Error> {
        let (admin, q) = self.split(qi)?;
        io::run_one(q, &mut || admin.service(), |q, t| {
            io::submit_write_zeroes(q, t, ns, lba, nlb, deallocate)
        })
        .map(|_| ())
    }

    /// Dataset Management with `ranges` through I/O queue `qi`.
    pub fn dataset_management(
        &mut self,
        qi: usize,
        nsid: Nsid,
        ranges: &[DsmRange],
        deallocate: bool,
    ) -> Result<(), Error> {
        let (admin, q) = self.split(qi)?;
        io::run_one(q, &mut || admin.service(), |q, t| {
            io::submit_dsm(q, t, nsid, ranges, deallocate)
        })
        .map(|_| ())
    }

    fn split(&mut self, qi: usize) -> Result<(&mut Admin<F>, &mut Queue<F>), Error> {
        let n = self.io.len();
        let q = self
            .io
            .get_mut(qi)
            .ok_or_else(|| Error::InvalidArgument(format!("I/O queue index {qi} (have {n})")))?;
        Ok((&mut self.admin, q))
    }

    /// Takes the I/O queues out (e.g. one per worker thread); keep calling
    /// [`Controller::service`] meanwhile.
    pub fn take_io_queues(&mut self) -> Vec<Queue<F>> {
        std::mem::take(&mut self.io)
    }

    /// Normal shutdown: CC.SHN = normal, wait for CSTS.SHST = complete (bounded by RTD3E or
    /// 5 s), then disconnect every queue.
    pub fn shutdown(mut self) -> Result<(), Error> {
        let r = self.shutdown_inner();
        for q in &mut self.io {
            q.disconnect();
        }
        self.admin.q.disconnect();
        r
    }

    fn shutdown_inner(&mut self) -> Result<(), Error> {
        let cc = Cc::from_u32(property_get(&mut self.admin.q, property::CC)? as u32);
        let cc = Cc {
            shn: shutdown::SHN_NORMAL,
            ..cc
        };
        property_set(&mut self.admin.q, property::CC, u64::from(cc.to_u32()))?;
        let limit = match self.id.rtd3e {
            0 => Duration::from_secs(5),
            us => Duration::from_micros(u64::from(us)).min(Duration::from_secs(60)),
        };
        let end = Instant::now() + limit;
        let mut idle = 0;
        loop {
            let csts = Csts::from_u32(property_get(&mut self.admin.q, property::CSTS)? as u32);
            if csts.shst == shutdown::SHST_COMPLETE {
                return Ok(());
            }
            if Instant::now() > end {
                return Err(Error::NotReady(format!(
                    "shutdown not complete after {limit:?} (CSTS.SHST {})",
                    csts.shst
                )));
            }
            idle += 1;
            backoff(256 + idle);
        }
    }
}

/// Sets CC.EN (IOSQES 6, IOCQES 4, NVM command set, 4 KiB pages) and waits for CSTS.RDY
/// within CAP.TO.
fn enable<F: Fabric>(q: &mut Queue<F>, cap: &Cap) -> Result<(), Error> {
    let cc = Cc {
        en: true,
        css: 0,
        mps: 0,
        ams: 0,
        shn: 0,
        iosqes: 6,
        iocqes: 4,
        crime: false,
    };
    property_set(q, property::CC, u64::from(cc.to_u32()))?;
    let limit = Duration::from_millis(500 * (u64::from(cap.to) + 1));
    let end = Instant::now() + limit;
    let mut idle = 0;
    loop {
        let csts = Csts::from_u32(property_get(q, property::CSTS)? as u32);
        if csts.cfs {
            return Err(Error::NotReady("CSTS.CFS: controller fatal status".into()));
        }
        if csts.rdy {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(Error::NotReady(format!(
                "CSTS.RDY not set within CAP.TO ({limit:?})"
            )));
        }
        idle += 1;
        backoff(256 + idle);
    }
}
