//! One iSER connection, target side, without I/O (issue 18): what each received SEND asks
//! for, and what the connection sends back.
//!
//! The poller that will own an iSER connection hands every received SEND payload to
//! [`IserConn::on_recv`] and runs the [`Action`]s it gets, in order: SENDs of iSER header +
//! iSCSI PDU, RDMA WRITEs of data-in ahead of the response that follows them on the same queue
//! pair, storage [`Task`]s, the switch to full-feature receive buffers, and closing. When a
//! task's storage work ends, [`IserConn::complete`] gives its SCSI Response.
//!
//! - **Login** ([`raidline_scsi::iscsi::login`]): every Login Request is answered; at the last
//!   one the full-feature receives are posted *before* the final response goes, since the
//!   initiator may send commands as soon as it has it (ISER.md, LIO's isert).
//! - **Commands** (RFC 7143 §3.2.2.1): a non-immediate command must carry ExpCmdSN; one
//!   outside the window is dropped, as the RFC says. The window is the configured depth less
//!   the commands in flight, so MaxCmdSN advances as tasks complete (as LIO does).
//! - **SCSI commands**: the LUN's unit parses and runs the CDB ([`LogicalUnit::execute`]);
//!   data-in goes by RDMA WRITE to the initiator's read STag, data-out arrives as immediate
//!   data and the rest is fetched by RDMA READ from its write STag (there are no Data-In,
//!   Data-Out or R2T PDUs on iSER). The Expected Data Transfer Length and the CDB must agree
//!   for data-out (as LIO refuses a mismatched WRITE); for data-in the residual is reported.
//! - **Task management**: ABORT TASK and the LUN-wide functions wait for the tasks they abort
//!   to end, whose responses are then not sent, and answer after them.
//! - **Unit attentions** (SAM-5 §5.14): what the target announces to this I_T nexus (a
//!   namespace enabled again, a capacity or LUN inventory change) is queued per LUN by
//!   [`IserConn::unit_attention`] and reported once, as CHECK CONDITION to the LUN's next
//!   command other than INQUIRY and REPORT LUNS, or as REQUEST SENSE's data; Linux then
//!   rescans (REPORTED LUNS DATA HAS CHANGED) or revalidates the disk.
//! - A PDU that does not parse gets a Reject carrying its header; a discovery session takes
//!   only Text, NOP-Out and Logout.
//! - **Keep-alive** ([`IserConn::tick`], RFC 7143 §11.19): a connection the initiator has
//!   sent nothing on for [`NOP_IN_INTERVAL`] gets a NOP-In ping, which the initiator must
//!   echo with a NOP-Out; one that answers nothing within [`NOP_IN_TIMEOUT`] more, or that
//!   has not finished its login after [`LOGIN_TIMEOUT`], is closed (LIO's `nopin_timeout`,
//!   `nopin_response_timeout` and `login_timeout` do the same). A vanished host otherwise keeps
//!   its queue pair, receive buffers and tasks' CmdSN window for ever.

use std::collections::HashMap;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::Duration;

use raidline_scsi::cdb::Command;
use raidline_scsi::iscsi::bhs::{decode_lun, Bhs, BHS_LEN};
use raidline_scsi::iscsi::discovery::text_response;
use raidline_scsi::iscsi::login::{Login, LoginOutcome, LoginSession};
use raidline_scsi::iscsi::negotiate::{LoginConfig, SessionType};
use raidline_scsi::iscsi::pdu::{
    scsi_response_data, LogoutRequest, LogoutResponse, LogoutResponseCode, NopIn, NopOut, Pdu,
    Reject, ScsiCommand, ScsiResponse, ScsiResponseCode, TaskMgmtRequest, TaskMgmtResponse,
    TextRequest, TextResponse, TmFunction, TmResponse,
};
use raidline_scsi::iscsi::text::TextAssembler;
use raidline_scsi::iscsi::RejectReason;
use raidline_scsi::iser::{build_send, IserHeader, IserPdu, RemoteBuffer, ISER_HDR_LEN};
use raidline_scsi::sbc::{inquiry_no_lun, report_luns, Io, LogicalUnit, Outcome};
use raidline_scsi::sense::{Asc, Sense, SenseKey, Status};

/// The logical units the connection's target offers, as they are now (a disabled namespace's
/// unit is not ready).
pub trait Units {
    /// Unit `lun` of target `target`, if configured.
    fn unit(&self, target: &str, lun: u16) -> Option<&LogicalUnit>;
    /// The LUNs of `target`, ascending.
    fn luns(&self, target: &str) -> Vec<u16>;
}

/// Data segment length a login PDU may carry (RFC 7143's default receive length; open-iscsi's
/// login buffers hold 8 KiB).
pub const LOGIN_RECV_DATA: u32 = 8192;
/// Bytes of a SEND that precede any AHS and the data segment: the iSER header and the BHS.
pub const HEAD_LEN: usize = ISER_HDR_LEN + BHS_LEN;
/// Tasks beyond the CmdSN window a connection may have (immediate commands); more are
/// answered TASK SET FULL.
pub const MAX_IMMEDIATE_TASKS: usize = 8;
/// The Initiator Task Tag that marks "no task" (RFC 7143 §11.2.1.8).
const NO_TASK: u32 = 0xffff_ffff;
/// Silence from the initiator after which a full-feature connection is pinged (LIO's
/// `nopin_timeout` default). open-iscsi pings every 5 s by itself (`noop_out_interval`), so a
/// live Linux host is never pinged.
pub const NOP_IN_INTERVAL: Duration = Duration::from_secs(15);
/// How long a ping may go unanswered before the connection is closed (LIO's
/// `nopin_response_timeout` default).
pub const NOP_IN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may take to reach full-feature phase (LIO's `login_timeout` is 15 s;
/// CHAP's secrets come from iscsid, so a little more).
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection's keep-alive times ([`IserConn::tick`]); the defaults are LIO's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence after which the initiator is pinged ([`NOP_IN_INTERVAL`]).
    pub nop_in_interval: Duration,
    /// How long a ping may stay unanswered ([`NOP_IN_TIMEOUT`]).
    pub nop_in_timeout: Duration,
    /// How long the login may take ([`LOGIN_TIMEOUT`]).
    pub login_timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive {
            nop_in_interval: NOP_IN_INTERVAL,
            nop_in_timeout: NOP_IN_TIMEOUT,
            login_timeout: LOGIN_TIMEOUT,
        }
    }
}

/// What the poller does for the connection, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// SEND this payload (iSER header + BHS + data segment).
    Send(Vec<u8>),
    /// RDMA WRITE `data` to the initiator's buffer, then SEND `send` (its response).
    WriteThenSend {
        /// Where the data goes.
        remote: RemoteBuffer,
        /// The data-in.
        data: Vec<u8>,
        /// The response that follows it.
        send: Vec<u8>,
    },
    /// The login ended in full-feature phase: replace the login receive buffers by
    /// full-feature ones of `recv_len` bytes (iSER header, BHS and `recv_data` of data
    /// segment) before the SEND that follows.
    FullFeature {
        /// Bytes each full-feature receive must hold.
        recv_len: usize,
    },
    /// Run a storage task; then [`IserConn::complete`].
    Task(Task),
    /// Close the connection once what went before is sent.
    Close(String),
}

/// A SCSI command for storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Initiator Task Tag: what [`IserConn::complete`] takes.
    pub itt: u32,
    /// The logical unit.
    pub lun: u16,
    /// The storage operation (range-checked).
    pub io: Io,
    /// Bytes of data-out that came as immediate data: the received SEND's body (what follows
    /// its [`HEAD_LEN`] bytes), `immediate.0 .. immediate.0 + immediate.1`.
    pub immediate: (usize, usize),
    /// The rest of the data-out, to fetch by RDMA READ: where, and how many bytes.
    pub fetch: Option<(RemoteBuffer, u32)>,
    /// Read data to RDMA WRITE before the response: where, and how many bytes (the first
    /// bytes of what the read returns; fewer than it when the initiator expects less).
    pub deliver: Option<(RemoteBuffer, u32)>,
}

#[derive(Debug, Clone, Copy)]
struct Residual {
    overflow: bool,
    count: u32,
}

#[derive(Debug)]
struct TaskEntry {
    lun: u16,
    residual: Residual,
    /// Aborted by task management: its response is not sent.
    aborted: bool,
    /// It counts against the command window (non-immediate).
    counted: bool,
}

/// A task management function waiting for the tasks it aborted.
#[derive(Debug)]
struct PendingTmf {
    itt: u32,
    waits_for: Vec<u32>,
}

#[derive(Debug)]
enum Phase {
    Login(Box<Login>),
    FullFeature(Box<LoginSession>),
    Closed,
}

/// One iSER connection's protocol state.
#[derive(Debug)]
pub struct IserConn {
    config: Arc<LoginConfig>,
    phase: Phase,
    stat_sn: u32,
    exp_cmd_sn: u32,
    depth: u32,
    /// Non-immediate commands whose response is not sent yet.
    in_flight: u32,
    tasks: HashMap<u32, TaskEntry>,
    tmfs: Vec<PendingTmf>,
    text: TextAssembler,
    /// Unit attentions not yet reported, by LUN, oldest first.
    attentions: Vec<(u16, Asc)>,
    /// Keep-alive: what [`IserConn::tick`] knows of the initiator's liveness, and its times.
    alive: Liveness,
    keep: Keepalive,
}

/// The keep-alive state ([`IserConn::tick`]); times are the caller's clock.
#[derive(Debug, Default)]
struct Liveness {
    /// SENDs received so far, and how many the last tick saw.
    recvs: u64,
    recvs_seen: u64,
    /// When the connection was first ticked (the login's start, near enough).
    born: Option<Duration>,
    /// When the last tick saw a new SEND (or the first tick).
    heard: Duration,
    /// The ping in flight: its Target Transfer Tag and when it went.
    ping: Option<(u32, Duration)>,
    /// The next ping's Target Transfer Tag.
    next_ttt: u32,
}

impl IserConn {
    /// A new connection; `tsih` is what its session is called if the login succeeds; `nonce`
    /// is random (the CHAP identifier and challenge, from a CSPRNG).
    pub fn new(
        config: Arc<LoginConfig>,
        tsih: NonZeroU16,
        nonce: [u8; raidline_scsi::iscsi::chap::NONCE_LEN],
    ) -> IserConn {
        let login = Login::new((*config).clone(), tsih, nonce);
        let text = TextAssembler::new(config.max_text_len);
        IserConn {
            config,
            phase: Phase::Login(Box::new(login)),
            stat_sn: 0,
            exp_cmd_sn: 0,
            depth: 0,
            in_flight: 0,
            tasks: HashMap::new(),
            tmfs: Vec::new(),
            text,
            attentions: Vec::new(),
            alive: Liveness::default(),
            keep: Keepalive::default(),
        }
    }

    /// The connection with keep-alive times other than the defaults.
    pub fn with_keepalive(mut self, keep: Keepalive) -> IserConn {
        self.keep = keep;
        self
    }

    /// Keep-alive, called now and then (about once a second) with the caller's monotonic
    /// clock: pings an initiator silent for [`Keepalive::nop_in_interval`] with a NOP-In that
    /// asks for an answer, and closes the connection when a ping stays unanswered for
    /// [`Keepalive::nop_in_timeout`] or the login has not ended after
    /// [`Keepalive::login_timeout`]. Any SEND received counts as an
    /// answer. The actions go into `out`.
    pub fn tick(&mut self, now: Duration, out: &mut Vec<Action>) {
        let keep = self.keep;
        let a = &mut self.alive;
        let first = a.born.is_none();
        let born = *a.born.get_or_insert(now);
        if first || a.recvs != a.recvs_seen {
            a.recvs_seen = a.recvs;
            a.heard = now;
            a.ping = None;
        }
        match self.phase {
            Phase::Closed => {}
            Phase::Login(_) => {
                if now.saturating_sub(born) >= keep.login_timeout {
                    self.close(
                        format!(
                            "login not finished after {} s",
                            keep.login_timeout.as_secs()
                        ),
                        out,
                    );
                }
            }
            Phase::FullFeature(_) => match a.ping {
                Some((_, sent)) if now.saturating_sub(sent) >= keep.nop_in_timeout => {
                    let silent = now.saturating_sub(a.heard).as_secs();
                    self.close(
                        format!(
                            "the initiator answered no NOP-In ping for {} s (silent {silent} s)",
                            keep.nop_in_timeout.as_secs()
                        ),
                        out,
                    );
                }
                Some(_) => {}
                None if now.saturating_sub(a.heard) >= keep.nop_in_interval => {
                    // A Target Transfer Tag other than 0xffffffff asks for an echo; StatSN is
                    // the next one but does not advance (RFC 7143 §11.19.6).
                    let ttt = a.next_ttt % NO_TASK;
                    a.next_ttt = a.next_ttt.wrapping_add(1);
                    a.ping = Some((ttt, now));
                    let nop = NopIn {
                        data_segment_len: 0,
                        lun: 0,
                        itt: NO_TASK,
                        ttt,
                        stat_sn: self.stat_sn,
                        exp_cmd_sn: self.exp_cmd_sn,
                        max_cmd_sn: self.max_cmd_sn(),
                    };
                    out.push(Action::Send(send_pdu(&nop.to_bytes(), &[])));
                }
                None => {}
            },
        }
    }

    /// Bytes a receive buffer needs now: the login's, or full feature's negotiated length.
    pub fn recv_len(&self) -> usize {
        let data = match &self.phase {
            Phase::FullFeature(s) => s.params.max_recv_data_segment_length(),
            _ => LOGIN_RECV_DATA,
        };
        ISER_HDR_LEN + BHS_LEN + data as usize
    }

    /// The session, once in full-feature phase.
    pub fn session(&self) -> Option<&LoginSession> {
        match &self.phase {
            Phase::FullFeature(s) => Some(s),
            _ => None,
        }
    }

    /// Queues a unit attention with `asc` for each of `luns` (one per LUN and code).
    pub fn unit_attention(&mut self, luns: &[u16], asc: Asc) {
        for &l in luns {
            if !self.attentions.contains(&(l, asc)) {
                self.attentions.push((l, asc));
            }
        }
    }

    /// Takes the oldest unit attention of `lun`.
    fn take_attention(&mut self, lun: u16) -> Option<Sense> {
        let i = self.attentions.iter().position(|&(l, _)| l == lun)?;
        let (_, asc) = self.attentions.remove(i);
        Some(Sense::new(SenseKey::UNIT_ATTENTION, asc))
    }

    /// Tasks whose storage work has not completed.
    pub fn tasks_in_flight(&self) -> usize {
        self.tasks.len()
    }

    /// Handles one received SEND: `head` holds its first [`HEAD_LEN`] bytes (iSER header and
    /// BHS), `body` the rest (any AHS, then the data segment): the receive buffers scatter a
    /// SEND that way so immediate data lands in its own aligned buffer. The actions go into
    /// `out`.
    pub fn on_recv(&mut self, head: &[u8], body: &[u8], units: &dyn Units, out: &mut Vec<Action>) {
        self.alive.recvs += 1;
        let max_data = match &self.phase {
            Phase::Login(_) => LOGIN_RECV_DATA,
            Phase::FullFeature(s) => s.params.max_recv_data_segment_length(),
            Phase::Closed => return,
        };
        let (Some(iser), Some(bhs_bytes)) =
            (head.get(..ISER_HDR_LEN), head.get(ISER_HDR_LEN..HEAD_LEN))
        else {
            return self.close(
                format!("a SEND of {} bytes is shorter than its headers", head.len()),
                out,
            );
        };
        let parsed = IserHeader::parse(iser)
            .map_err(|e| (RejectReason::PROTOCOL_ERROR, e.to_string()))
            .and_then(|h| {
                Bhs::parse(bhs_bytes)
                    .map(|b| (h, b))
                    .map_err(|e| (e.reject_reason(), e.to_string()))
            });
        let (header, bhs) = match parsed {
            Ok(x) => x,
            Err((reason, why)) => {
                return match self.phase {
                    Phase::FullFeature(_) => self.reject(reason, bhs_bytes, out),
                    _ => self.close(format!("malformed SEND: {why}"), out),
                };
            }
        };
        // The data segment follows any AHS (which no command here uses: CDBs of 16 bytes).
        let ahs = bhs.total_ahs_len();
        let dsl = bhs.data_segment_len() as usize;
        let data = match body.get(ahs..ahs + dsl) {
            Some(d) if dsl <= max_data as usize => d,
            _ => {
                return match self.phase {
                    Phase::FullFeature(_) => {
                        self.reject(RejectReason::PROTOCOL_ERROR, bhs_bytes, out)
                    }
                    _ => self.close(
                        format!("a SEND's data segment of {dsl} bytes does not fit"),
                        out,
                    ),
                };
            }
        };
        let pdu = IserPdu {
            header,
            bhs,
            ahs: &body[..ahs],
            data,
        };
        // Where the data segment lies in `body` (immediate data is used in place).
        let data_at = ahs;
        match &mut self.phase {
            Phase::Login(login) => {
                let step = login.on_pdu(&pdu.bhs, pdu.data);
                let send = send_pdu(&step.response.to_bytes(), &step.data);
                match step.outcome {
                    LoginOutcome::Continue => out.push(Action::Send(send)),
                    LoginOutcome::Close => {
                        out.push(Action::Send(send));
                        self.close("login failed".into(), out);
                    }
                    LoginOutcome::FullFeature(session) => {
                        self.stat_sn = session.next_stat_sn;
                        self.exp_cmd_sn = session.exp_cmd_sn;
                        self.depth = session
                            .max_cmd_sn
                            .wrapping_sub(session.exp_cmd_sn)
                            .wrapping_add(1);
                        self.phase = Phase::FullFeature(session);
                        out.push(Action::FullFeature {
                            recv_len: self.recv_len(),
                        });
                        out.push(Action::Send(send));
                    }
                }
            }
            Phase::FullFeature(_) => {
                self.full_feature(&pdu.bhs, pdu.data, data_at, &pdu.header, units, out)
            }
            Phase::Closed => {}
        }
    }

    fn full_feature(
        &mut self,
        bhs: &Bhs,
        data: &[u8],
        data_at: usize,
        iser: &IserHeader,
        units: &dyn Units,
        out: &mut Vec<Action>,
    ) {
        let pdu = match Pdu::parse(bhs.as_bytes()) {
            Ok(p) => p,
            Err(e) => return self.reject(e.reject_reason(), bhs.as_bytes(), out),
        };
        let discovery = self
            .session()
            .is_some_and(|s| s.session_type == SessionType::Discovery);
        match pdu {
            Pdu::NopOut(n) => {
                if self.admit(n.immediate, n.cmd_sn) {
                    self.nop_out(&n, data, out);
                }
            }
            Pdu::TextRequest(t) => {
                if self.admit(t.immediate, t.cmd_sn) {
                    self.text(&t, data, bhs, out);
                }
            }
            Pdu::LogoutRequest(l) => {
                if self.admit(l.immediate, l.cmd_sn) {
                    self.logout(&l, out);
                }
            }
            Pdu::ScsiCommand(c) if !discovery => {
                if self.admit(c.immediate, c.cmd_sn) {
                    self.scsi(&c, data, data_at, iser, units, out);
                }
            }
            Pdu::TaskMgmtRequest(t) if !discovery => {
                if self.admit(t.immediate, t.cmd_sn) {
                    self.task_mgmt(&t, units, out);
                }
            }
            // Data-Out would be unsolicited data: InitialR2T is Yes and iSER has no R2T.
            // SNACK needs ErrorRecoveryLevel > 0. Login in full feature: a protocol error.
            _ => self.reject(RejectReason::PROTOCOL_ERROR, bhs.as_bytes(), out),
        }
    }

    /// Whether a command with `cmd_sn` is taken (RFC 7143 §3.2.2.1): an immediate one always,
    /// another only at ExpCmdSN with the window open (which advances ExpCmdSN). One outside
    /// the window is dropped without an answer, as the RFC says.
    fn admit(&mut self, immediate: bool, cmd_sn: u32) -> bool {
        if immediate {
            return true;
        }
        if cmd_sn != self.exp_cmd_sn || self.in_flight >= self.depth {
            return false;
        }
        self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        true
    }

    /// MaxCmdSN: the window's end, the depth less what is in flight.
    fn max_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn
            .wrapping_add(self.depth.saturating_sub(self.in_flight))
            .wrapping_sub(1)
    }

    /// The next StatSN (each status-bearing response takes one).
    fn next_stat_sn(&mut self) -> u32 {
        let s = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        s
    }

    fn nop_out(&mut self, n: &NopOut, data: &[u8], out: &mut Vec<Action>) {
        // A NOP-Out answering a NOP-In of ours (ITT 0xffffffff) gets no answer; it is heard
        // (on_recv counted it), which is what the ping asked for.
        if n.itt == NO_TASK {
            return;
        }
        let max = self
            .session()
            .map_or(0, |s| s.params.max_send_data_segment_length()) as usize;
        let echo = &data[..data.len().min(max)];
        let nop = NopIn {
            data_segment_len: echo.len() as u32,
            lun: n.lun,
            itt: n.itt,
            ttt: NO_TASK,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        out.push(Action::Send(send_pdu(&nop.to_bytes(), echo)));
    }

    fn text(&mut self, t: &TextRequest, data: &[u8], bhs: &Bhs, out: &mut Vec<Action>) {
        let whole = match self.text.push(data, t.cont) {
            Ok(Some(w)) => w,
            Ok(None) => {
                // More to come: acknowledge with an empty response (RFC 7143 §11.10.2).
                let r = self.text_pdu(t, false, 0);
                out.push(Action::Send(send_pdu(&r.to_bytes(), &[])));
                return;
            }
            Err(e) => return self.reject(e.reject_reason(), bhs.as_bytes(), out),
        };
        let answer = match self.session() {
            Some(s) => text_response(&self.config, s, &whole),
            None => return,
        };
        match answer {
            Ok(a) => {
                let r = self.text_pdu(t, true, a.len() as u32);
                out.push(Action::Send(send_pdu(&r.to_bytes(), &a)));
            }
            Err(e) => self.reject(e.reject_reason(), bhs.as_bytes(), out),
        }
    }

    fn text_pdu(&mut self, t: &TextRequest, last: bool, len: u32) -> TextResponse {
        TextResponse {
            final_pdu: last,
            cont: false,
            data_segment_len: len,
            lun: t.lun,
            itt: t.itt,
            ttt: NO_TASK,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        }
    }

    fn logout(&mut self, l: &LogoutRequest, out: &mut Vec<Action>) {
        let cid = self.session().map(|s| s.cid);
        let response = if cid == Some(l.cid) {
            LogoutResponseCode::CLOSED_SUCCESSFULLY
        } else {
            LogoutResponseCode::CID_NOT_FOUND
        };
        let r = LogoutResponse {
            response,
            itt: l.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            // ErrorRecoveryLevel 0: nothing is kept for a reconnecting initiator.
            time2wait: 0,
            time2retain: 0,
        };
        out.push(Action::Send(send_pdu(&r.to_bytes(), &[])));
        if response == LogoutResponseCode::CLOSED_SUCCESSFULLY {
            self.close("logout".into(), out);
        }
    }

    fn scsi(
        &mut self,
        c: &ScsiCommand,
        data: &[u8],
        data_at: usize,
        iser: &IserHeader,
        units: &dyn Units,
        out: &mut Vec<Action>,
    ) {
        if self.tasks.contains_key(&c.itt) || c.itt == NO_TASK {
            // A tag already in use (or the reserved one) would make two tasks one.
            return self.reject(RejectReason::PROTOCOL_ERROR, &c.to_bytes(), out);
        }
        // Immediate commands do not count against the CmdSN window: a bound on every task
        // keeps a host from flooding the send queue and the pool with them.
        if self.tasks.len() >= (self.depth as usize).saturating_add(MAX_IMMEDIATE_TASKS) {
            let send = self.task_set_full(c.itt);
            return out.push(Action::Send(send));
        }
        let Some(session) = self.session() else {
            return;
        };
        let target = session.target_name.clone().unwrap_or_default();
        let immediate_ok = session.params.immediate_data;
        let first_burst = session.params.first_burst_length;
        let edtl = c.expected_data_len;
        let lun = decode_lun(c.lun);
        let cmd = Command::parse(&c.cdb);
        // REPORT LUNS is the target's, whatever LUN it names; INQUIRY of an absent LUN says
        // "no unit here" (peripheral qualifier 3); anything else to it: LUN NOT SUPPORTED.
        let unit = lun.and_then(|l| units.unit(&target, l));
        let attention =
            lun.filter(|&l| unit.is_some() && self.attentions.iter().any(|&(a, _)| a == l));
        let outcome = match (cmd, unit) {
            (Err(s), _) => Outcome::Check(s),
            (Ok(Command::ReportLuns { select, alloc }), _) => {
                report_luns(select, alloc, &units.luns(&target))
            }
            (
                Ok(Command::Inquiry {
                    evpd: false, alloc, ..
                }),
                None,
            ) => inquiry_no_lun(alloc),
            (Ok(_), None) => Outcome::Check(Sense::lun_not_supported()),
            // INQUIRY neither reports nor clears a unit attention (SAM-5 §5.14); REQUEST
            // SENSE returns it as data; any other command gets it as CHECK CONDITION.
            (Ok(cmd @ Command::Inquiry { .. }), Some(u)) => u.execute(&cmd),
            (Ok(Command::RequestSense { desc: false, alloc }), Some(_)) if attention.is_some() => {
                let ua = attention.and_then(|l| self.take_attention(l));
                let mut d = ua.map(|s| s.to_bytes().to_vec()).unwrap_or_default();
                d.truncate(usize::from(alloc));
                Outcome::DataIn(d)
            }
            (Ok(_), Some(_)) if attention.is_some() => Outcome::Check(
                attention
                    .and_then(|l| self.take_attention(l))
                    .unwrap_or_else(Sense::internal_failure),
            ),
            (Ok(cmd), Some(u)) => {
                if !data.is_empty() && cmd.data_out_len(u.block_size) == 0 {
                    // Immediate data for a command that takes none.
                    Outcome::Check(command_iu_invalid())
                } else {
                    u.execute(&cmd)
                }
            }
        };
        let lun = lun.unwrap_or(0);
        match outcome {
            // Immediate data behind an AHS (an extended CDB or a bidirectional command, neither
            // of which is served): the command IU is refused.
            Outcome::Io(_) if data_at != 0 && !data.is_empty() => {
                self.respond_now(c.itt, Err(command_iu_invalid()), None, out)
            }
            Outcome::Io(io) => {
                let bs = unit.map_or(512, |u| u.block_size);
                match plan(io, bs, edtl, data.len(), immediate_ok, first_burst, iser) {
                    Ok((task, residual)) => {
                        let task = Task {
                            itt: c.itt,
                            lun,
                            immediate: match task.immediate.1 {
                                0 => (0, 0),
                                n => (data_at, n),
                            },
                            ..task
                        };
                        self.tasks.insert(
                            c.itt,
                            TaskEntry {
                                lun,
                                residual,
                                aborted: false,
                                counted: !c.immediate,
                            },
                        );
                        if !c.immediate {
                            self.in_flight += 1;
                        }
                        out.push(Action::Task(task));
                    }
                    Err(s) => self.respond_now(c.itt, Err(s), None, out),
                }
            }
            Outcome::DataIn(d) => {
                let len = d.len().min(edtl as usize);
                let residual = residual(d.len() as u64, edtl);
                match (len, iser.read) {
                    (0, _) => self.respond_now(c.itt, Ok(residual), None, out),
                    (_, Some(remote)) => {
                        let mut d = d;
                        d.truncate(len);
                        self.respond_now(c.itt, Ok(residual), Some((remote, d)), out)
                    }
                    // Data to return and no buffer to put it in.
                    (_, None) => self.respond_now(c.itt, Err(command_iu_invalid()), None, out),
                }
            }
            Outcome::Good => self.respond_now(c.itt, Ok(residual(0, edtl)), None, out),
            Outcome::Check(s) => self.respond_now(c.itt, Err(s), None, out),
        }
    }

    /// TASK SET FULL: the host retries the command once tasks have completed.
    fn task_set_full(&mut self, itt: u32) -> Vec<u8> {
        let none = Residual {
            overflow: false,
            count: 0,
        };
        self.response_pdu(itt, Status::TASK_SET_FULL, none, &[], true)
    }

    /// Answers a command that ran no task.
    fn respond_now(
        &mut self,
        itt: u32,
        result: Result<Residual, Sense>,
        data: Option<(RemoteBuffer, Vec<u8>)>,
        out: &mut Vec<Action>,
    ) {
        let send = self.response(itt, result, true);
        out.push(match data {
            Some((remote, data)) => Action::WriteThenSend { remote, data, send },
            None => Action::Send(send),
        });
    }

    /// The SCSI Response SEND; `numbered`: see [`IserConn::response_pdu`].
    fn response(&mut self, itt: u32, result: Result<Residual, Sense>, numbered: bool) -> Vec<u8> {
        let (status, sense, res) = match result {
            Ok(r) => (Status::GOOD, None, r),
            Err(s) => (
                Status::CHECK_CONDITION,
                Some(s),
                Residual {
                    overflow: false,
                    count: 0,
                },
            ),
        };
        let data = sense.map(|s| scsi_response_data(&s.to_bytes()));
        self.response_pdu(itt, status, res, data.as_deref().unwrap_or(&[]), numbered)
    }

    /// A SCSI Response SEND with `status`, the residual `res` and `data` (sense) as its data
    /// segment. `numbered`: it takes the next StatSN now; else [`IserConn::number`] gives it
    /// one when it goes.
    fn response_pdu(
        &mut self,
        itt: u32,
        status: Status,
        res: Residual,
        data: &[u8],
        numbered: bool,
    ) -> Vec<u8> {
        let r = ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            overflow: res.overflow && res.count > 0,
            underflow: !res.overflow && res.count > 0,
            response: ScsiResponseCode::COMMAND_COMPLETED,
            status,
            data_segment_len: data.len() as u32,
            itt,
            snack_tag: 0,
            stat_sn: if numbered { self.next_stat_sn() } else { 0 },
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            exp_data_sn: 0,
            bidi_read_residual: 0,
            residual_count: res.count,
        };
        send_pdu(&r.to_bytes(), data)
    }

    /// Task `itt` finished its storage work with `result`: its SCSI Response (unless task
    /// management aborted it), and the answers of task management functions that waited
    /// for it. Returns whether the task's own response is the first action pushed (its read
    /// data, if any, goes ahead of it; an aborted task's goes nowhere).
    ///
    /// `later`: the caller sends the task's response after the other actions, when its read
    /// data has gone (a paced queue's data waits for its tokens). It then carries no StatSN
    /// until [`IserConn::number`] gives it one as it goes, so StatSNs reach the initiator in
    /// order (RFC 7143 §4.2.2.2) whatever the pacer held.
    pub fn complete(
        &mut self,
        itt: u32,
        result: Result<(), Sense>,
        later: bool,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(t) = self.tasks.remove(&itt) else {
            return false;
        };
        if t.counted {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let responds = !t.aborted;
        if responds {
            let send = self.response(itt, result.map(|()| t.residual), !later);
            out.push(Action::Send(send));
        }
        let mut done = Vec::new();
        self.tmfs.retain_mut(|p| {
            p.waits_for.retain(|&w| w != itt);
            if p.waits_for.is_empty() {
                done.push(p.itt);
                false
            } else {
                true
            }
        });
        for tmf in done {
            self.tmf_response(tmf, TmResponse::FUNCTION_COMPLETE, out);
        }
        responds
    }

    /// Gives a SCSI Response that [`IserConn::complete`] left unnumbered (`later`) its
    /// StatSN, and the command window as it is now, just before it is sent. False (and
    /// nothing changed) when `send` is not a SCSI Response SEND.
    #[must_use]
    pub fn number(&mut self, send: &mut [u8]) -> bool {
        let Some(bhs) = send.get_mut(ISER_HDR_LEN..ISER_HDR_LEN + BHS_LEN) else {
            return false;
        };
        let Ok(mut r) = ScsiResponse::parse(bhs) else {
            return false;
        };
        r.stat_sn = self.next_stat_sn();
        r.exp_cmd_sn = self.exp_cmd_sn;
        r.max_cmd_sn = self.max_cmd_sn();
        bhs.copy_from_slice(&r.to_bytes());
        true
    }

    fn task_mgmt(&mut self, t: &TaskMgmtRequest, units: &dyn Units, out: &mut Vec<Action>) {
        let target = self
            .session()
            .and_then(|s| s.target_name.clone())
            .unwrap_or_default();
        let lun = decode_lun(t.lun);
        let lun_exists = lun.is_some_and(|l| units.unit(&target, l).is_some());
        let victims: Vec<u32> = match t.function {
            TmFunction::ABORT_TASK => match self.tasks.get(&t.referenced_task_tag) {
                Some(_) => vec![t.referenced_task_tag],
                // Already answered, or never here: nothing to abort (RFC 7143 §11.6.1).
                None => return self.tmf_response(t.itt, TmResponse::TASK_DOES_NOT_EXIST, out),
            },
            TmFunction::ABORT_TASK_SET
            | TmFunction::CLEAR_TASK_SET
            | TmFunction::LOGICAL_UNIT_RESET => {
                if !lun_exists {
                    return self.tmf_response(t.itt, TmResponse::LUN_DOES_NOT_EXIST, out);
                }
                self.tasks
                    .iter()
                    .filter(|(_, e)| Some(e.lun) == lun)
                    .map(|(&itt, _)| itt)
                    .collect()
            }
            TmFunction::TARGET_WARM_RESET => self.tasks.keys().copied().collect(),
            TmFunction::TASK_REASSIGN => {
                return self.tmf_response(t.itt, TmResponse::REASSIGNMENT_NOT_SUPPORTED, out)
            }
            _ => return self.tmf_response(t.itt, TmResponse::FUNCTION_NOT_SUPPORTED, out),
        };
        for v in &victims {
            if let Some(e) = self.tasks.get_mut(v) {
                e.aborted = true;
            }
        }
        if victims.is_empty() {
            self.tmf_response(t.itt, TmResponse::FUNCTION_COMPLETE, out);
        } else {
            self.tmfs.push(PendingTmf {
                itt: t.itt,
                waits_for: victims,
            });
        }
    }

    fn tmf_response(&mut self, itt: u32, response: TmResponse, out: &mut Vec<Action>) {
        let r = TaskMgmtResponse {
            response,
            itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        out.push(Action::Send(send_pdu(&r.to_bytes(), &[])));
    }

    /// A Reject carrying the rejected PDU's header (RFC 7143 §11.17).
    fn reject(&mut self, reason: RejectReason, header: &[u8], out: &mut Vec<Action>) {
        let mut bhs = [0u8; BHS_LEN];
        let n = header.len().min(BHS_LEN);
        bhs[..n].copy_from_slice(&header[..n]);
        let r = Reject {
            reason,
            data_segment_len: BHS_LEN as u32,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            data_sn: 0,
        };
        out.push(Action::Send(send_pdu(&r.to_bytes(), &bhs)));
    }

    fn close(&mut self, why: String, out: &mut Vec<Action>) {
        self.phase = Phase::Closed;
        out.push(Action::Close(why));
    }
}

/// INVALID FIELD IN COMMAND INFORMATION UNIT: the iSCSI header contradicts the CDB.
fn command_iu_invalid() -> Sense {
    Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_COMMAND_IU)
}

/// The residual of a transfer of `want` bytes against an expected `edtl`.
fn residual(want: u64, edtl: u32) -> Residual {
    let edtl = u64::from(edtl);
    Residual {
        overflow: want > edtl,
        count: want.abs_diff(edtl).min(u64::from(u32::MAX)) as u32,
    }
}

/// The data movement of a storage operation: what came as immediate data, what to fetch,
/// where read data goes; and the residual to report.
fn plan(
    io: Io,
    block_size: u32,
    edtl: u32,
    immediate: usize,
    immediate_ok: bool,
    first_burst: u32,
    iser: &IserHeader,
) -> Result<(Task, Residual), Sense> {
    let blank = Task {
        itt: 0,
        lun: 0,
        io,
        immediate: (0, 0),
        fetch: None,
        deliver: None,
    };
    let bytes = |blocks: u32| u64::from(blocks) * u64::from(block_size);
    let data_out = match io {
        Io::Write { blocks, .. } => bytes(blocks),
        Io::WriteSame { .. } => u64::from(block_size),
        Io::Unmap { param_len } => u64::from(param_len),
        _ => 0,
    };
    if let Io::Read { blocks, .. } = io {
        if immediate > 0 {
            return Err(command_iu_invalid());
        }
        let want = bytes(blocks);
        let len = want.min(u64::from(edtl)) as u32;
        let deliver = match (len, iser.read) {
            (0, _) => None,
            (_, Some(r)) => Some((r, len)),
            (_, None) => return Err(command_iu_invalid()),
        };
        return Ok((Task { deliver, ..blank }, residual(want, edtl)));
    }
    if data_out == 0 {
        return Ok((blank, residual(0, edtl)));
    }
    // Data-out must be exactly what the CDB says (LIO refuses a mismatched WRITE too).
    if u64::from(edtl) != data_out {
        return Err(command_iu_invalid());
    }
    if immediate > 0 && (!immediate_ok || immediate as u64 > u64::from(first_burst.min(edtl))) {
        return Err(command_iu_invalid());
    }
    let rest = (data_out - immediate as u64) as u32;
    let fetch = match (rest, iser.write) {
        (0, _) => None,
        (_, Some(w)) => Some((w, rest)),
        (_, None) => return Err(command_iu_invalid()),
    };
    Ok((
        Task {
            immediate: (0, immediate),
            fetch,
            ..blank
        },
        residual(data_out, edtl),
    ))
}

/// A SEND from the target: an iSER header with no STags, the BHS, the data segment.
fn send_pdu(bhs: &[u8; BHS_LEN], data: &[u8]) -> Vec<u8> {
    build_send(&IserHeader::default(), bhs, &[], data)
}

#[cfg(test)]
#[path = "iser_tests.rs"]
mod tests;
