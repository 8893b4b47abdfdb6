//! The conformance suite: one set of cases, written once against [`Fabric`], run against every
//! backend — in `cargo test` against the in-memory fabric (see [`conformance_tests!`]) and in
//! the soft-RoCE lab against rxe (`fabric-conformance` binary).
//!
//! Each case builds a fresh connected pair (server listens, client connects, private data both
//! ways), does one thing, and checks what an RC QP must do: SEND/RECV into a two-SGE receive,
//! inline SEND, RDMA WRITE and READ, the WRITE+SEND chain's ordering, the zero-length WRITE
//! probe, access violations and bad keys, receiver-not-ready, disconnect with work in flight,
//! connect/accept/reject private data, SRQ, CQ notification, and the typed slab layer.
//!
//! Waiting is a bounded busy poll against a deadline (the in-memory fabric completes inside the
//! post, so it never spins there); nothing sleeps. A case a backend cannot run is reported as
//! skipped with its reason, never as passed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::{
    CompletionQueue, ConnectionManager, Fabric, IncomingRequest, MemoryRegion, QueuePair,
    SharedReceiveQueue,
};
use crate::slab::Endpoint;
use crate::sys_mem::DmaMemory;
use crate::types::{
    AcceptParams, Access, CmEvent, Completion, ConnId, ConnectParams, Payload, QpCaps, QpInit,
    RecvWr, RemoteBuf, RequestInfo, SendOp, SendWr, WcOpcode, WcStatus, WrId,
    REJECT_REASON_CONSUMER,
};

/// Where the suite runs: the two devices (the same one for loopback) and the address the
/// server listens on.
pub struct Env<'a, F: Fabric> {
    /// The listening side's device.
    pub server: &'a F,
    /// The connecting side's device.
    pub client: &'a F,
    /// The server's IP address (on rxe: the IP of the netdev under the rxe device).
    pub ip: IpAddr,
    /// How long to wait for any one completion or event.
    pub timeout: Duration,
}

/// How a case ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// The backend cannot run it; why.
    Skipped(&'static str),
}

/// A case's failure: what did not hold.
pub type CaseResult = Result<Outcome, String>;

/// One case.
pub struct Case<F: Fabric> {
    /// Its name.
    pub name: &'static str,
    /// Runs it.
    pub run: fn(&Env<'_, F>) -> CaseResult,
}

/// Every case, in order.
pub fn cases<F: Fabric>() -> Vec<Case<F>> {
    vec![
        Case {
            name: "send_recv_two_sges",
            run: send_recv_two_sges,
        },
        Case {
            name: "inline_send",
            run: inline_send,
        },
        Case {
            name: "rdma_write_then_read",
            run: rdma_write_then_read,
        },
        Case {
            name: "write_send_chain_order",
            run: write_send_chain_order,
        },
        Case {
            name: "zero_length_write",
            run: zero_length_write,
        },
        Case {
            name: "access_violation",
            run: access_violation,
        },
        Case {
            name: "bad_key_and_bounds",
            run: bad_key_and_bounds,
        },
        Case {
            name: "rnr_retry_exceeded",
            run: rnr_retry_exceeded,
        },
        Case {
            name: "rnr_wait_then_deliver",
            run: rnr_wait_then_deliver,
        },
        Case {
            name: "disconnect_mid_flight",
            run: disconnect_mid_flight,
        },
        Case {
            name: "private_data_both_ways",
            run: private_data_both_ways,
        },
        Case {
            name: "reject_with_private_data",
            run: reject_with_private_data,
        },
        Case {
            name: "shared_receive_queue",
            run: shared_receive_queue,
        },
        Case {
            name: "cq_notification",
            run: cq_notification,
        },
        Case {
            name: "send_with_invalidate",
            run: send_with_invalidate,
        },
        Case {
            name: "typed_endpoint",
            run: typed_endpoint,
        },
    ]
}

/// The tally of a whole run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Names of the cases that passed.
    pub passed: Vec<&'static str>,
    /// Names and reasons of the skipped ones.
    pub skipped: Vec<(&'static str, &'static str)>,
    /// Names and failures of the failed ones.
    pub failed: Vec<(&'static str, String)>,
}

/// Runs every case whose name contains `filter` (all with `""`), in order.
pub fn run_all<F: Fabric>(
    env: &Env<'_, F>,
    filter: &str,
    mut log: impl FnMut(&str, &CaseResult),
) -> Report {
    let mut r = Report::default();
    for c in cases::<F>().into_iter().filter(|c| c.name.contains(filter)) {
        let res = (c.run)(env);
        log(c.name, &res);
        match res {
            Ok(Outcome::Passed) => r.passed.push(c.name),
            Ok(Outcome::Skipped(why)) => r.skipped.push((c.name, why)),
            Err(e) => r.failed.push((c.name, e)),
        }
    }
    r
}

/// Generates one `#[test]` per named conformance case against a backend:
/// `conformance_tests!(Backend, with_env, case_a, case_b, ...)`, where `with_env` is a
/// function or closure taking `&mut dyn FnMut(&Env<'_, Backend>)` that builds the devices and
/// calls it once (see `fabric/tests/conformance_mem.rs`). A skipped case prints why.
#[macro_export]
macro_rules! conformance_tests {
    ($fabric:ty, $with_env:expr, $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let case = $crate::conformance::cases::<$fabric>()
                    .into_iter()
                    .find(|c| c.name == stringify!($name))
                    .expect("case exists");
                let with_env = $with_env;
                with_env(&mut |env: &$crate::conformance::Env<'_, $fabric>| {
                    match (case.run)(env) {
                        Ok($crate::conformance::Outcome::Passed) => {}
                        Ok($crate::conformance::Outcome::Skipped(why)) => {
                            eprintln!("{} skipped: {why}", stringify!($name))
                        }
                        Err(e) => panic!("{} failed: {e}", stringify!($name)),
                    }
                });
            }
        )*
    };
}

// ----- scaffolding ---------------------------------------------------------------------------

const BUF: usize = 64 * 1024;

struct Side<F: Fabric> {
    cm: F::Cm,
    pd: F::Pd,
    scq: F::Cq,
    rcq: F::Cq,
    mem: Arc<DmaMemory>,
    mr: F::Mr,
    qp: Option<F::Qp>,
    conn: Option<ConnId>,
}

struct Pair<F: Fabric> {
    s: Side<F>,
    c: Side<F>,
    timeout: Duration,
    /// What the server saw in the request.
    request: RequestInfo,
    /// The accept data the client saw.
    accept_data: Vec<u8>,
}

struct Opts {
    /// RNR retries of the client's QP (set by the server's accept).
    client_rnr: u8,
    /// Receives the server posts (64 + 4096 bytes each) right after accept.
    server_recvs: usize,
    /// Whether the server's QP uses an SRQ.
    srq: bool,
    connect_data: Vec<u8>,
    accept_data: Vec<u8>,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            client_rnr: 7,
            server_recvs: 4,
            srq: false,
            connect_data: b"hello".to_vec(),
            accept_data: b"welcome".to_vec(),
        }
    }
}

fn e<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |err| format!("{what}: {err}")
}

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    }
}

fn side<F: Fabric>(dev: &F) -> Result<Side<F>, String> {
    let cm = dev.create_cm().map_err(e("create_cm"))?;
    let pd = dev.alloc_pd().map_err(e("alloc_pd"))?;
    let scq = dev.create_cq(256).map_err(e("create_cq"))?;
    let rcq = dev.create_cq(256).map_err(e("create_cq"))?;
    let mem = Arc::new(DmaMemory::new(BUF, false).map_err(e("memory"))?);
    let mr = dev
        .register(&pd, mem.clone(), Access::ALL)
        .map_err(e("register"))?;
    Ok(Side {
        cm,
        pd,
        scq,
        rcq,
        mem,
        mr,
        qp: None,
        conn: None,
    })
}

fn init<F: Fabric>(s: &Side<F>, srq: Option<F::SrqHandle>) -> QpInit<F> {
    QpInit {
        pd: s.pd.clone(),
        send_cq: s.scq.handle(),
        recv_cq: s.rcq.handle(),
        srq,
        caps: caps(),
    }
}

fn deadline(t: Duration) -> Instant {
    Instant::now() + t
}

/// Polls both CMs until `want` takes an event from the side it names; other events are
/// returned to the caller through `other` (which fails on anything unexpected).
fn next_event<F: Fabric>(
    cm: &mut F::Cm,
    timeout: Duration,
    what: &str,
) -> Result<CmEvent<F>, String> {
    let end = deadline(timeout);
    loop {
        if let Some(ev) = cm.poll_event().map_err(e("poll_event"))? {
            return Ok(ev);
        }
        if Instant::now() > end {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::yield_now();
    }
}

/// Waits for the server's connect request while driving the client's CM, which resolves the
/// address and route and sends the request from inside its `poll_event` (verbs). The client
/// must not surface an event before the server has answered.
fn wait_request<F: Fabric>(
    server: &mut F::Cm,
    client: &mut F::Cm,
    timeout: Duration,
) -> Result<F::Request, String> {
    let end = deadline(timeout);
    loop {
        if let Some(ev) = server.poll_event().map_err(e("server poll_event"))? {
            return match ev {
                CmEvent::ConnectRequest(r) => Ok(r),
                other => Err(format!("server: unexpected {other:?} before the request")),
            };
        }
        if let Some(ev) = client.poll_event().map_err(e("client poll_event"))? {
            return Err(format!(
                "client: unexpected {ev:?} before the server saw the request"
            ));
        }
        if Instant::now() > end {
            return Err("timed out waiting for the connect request".into());
        }
        std::thread::yield_now();
    }
}

fn connect<F: Fabric>(env: &Env<'_, F>, o: Opts, srq: Option<&F::Srq>) -> Result<Pair<F>, String> {
    let mut s = side(env.server)?;
    let mut c = side(env.client)?;
    let addr =
        s.cm.listen(SocketAddr::new(env.ip, 0), 8)
            .map_err(e("listen"))?;
    let params = ConnectParams {
        private_data: o.connect_data.clone(),
        responder_resources: 4,
        initiator_depth: 2,
        retry_count: 7,
        rnr_retry_count: 7,
        resolve_timeout_ms: 2000,
    };
    let cconn =
        c.cm.connect(addr, params, init(&c, None))
            .map_err(e("connect"))?;
    c.conn = Some(cconn);
    // The server's request.
    let req = wait_request::<F>(&mut s.cm, &mut c.cm, env.timeout)?;
    let request = req.info().clone();
    let accept = AcceptParams {
        private_data: o.accept_data.clone(),
        responder_resources: 2,
        initiator_depth: 4,
        rnr_retry_count: o.client_rnr,
    };
    let mut qp =
        s.cm.accept(
            req,
            init(&s, if o.srq { srq.map(|q| q.handle()) } else { None }),
            accept,
        )
        .map_err(|(err, _)| format!("accept: {err}"))?;
    s.conn = Some(request.conn);
    if !o.srq {
        for i in 0..o.server_recvs {
            let off = (i * 8192) as u64;
            let sges = [
                s.mr.sge(off, 64).map_err(e("sge"))?,
                s.mr.sge(off + 64, 4096).map_err(e("sge"))?,
            ];
            qp.post_recv(&[RecvWr {
                wr_id: WrId(1000 + i as u64),
                sges: &sges,
            }])
            .map_err(e("post_recv"))?;
        }
    }
    s.qp = Some(qp);
    // The client's Established carries its QP; the server's comes too.
    let accept_data;
    match next_event::<F>(&mut c.cm, env.timeout, "client established")? {
        CmEvent::Established {
            conn,
            qp,
            private_data,
        } if conn == cconn => {
            c.qp = Some(qp.ok_or("client Established without its QP")?);
            accept_data = private_data;
        }
        CmEvent::Rejected { reason, .. } => return Err(format!("client: rejected ({reason})")),
        CmEvent::ConnectFailed { reason, .. } => {
            return Err(format!("client: connect failed: {reason:?}"))
        }
        other => return Err(format!("client: unexpected {other:?}")),
    }
    match next_event::<F>(&mut s.cm, env.timeout, "server established")? {
        CmEvent::Established { conn, qp: None, .. } if Some(conn) == s.conn => {}
        other => return Err(format!("server: expected Established, got {other:?}")),
    }
    Ok(Pair {
        s,
        c,
        timeout: env.timeout,
        request,
        accept_data,
    })
}

/// Polls `cq` until `n` completions arrived.
fn wait_cq<C: CompletionQueue>(
    cq: &mut C,
    n: usize,
    timeout: Duration,
    what: &str,
) -> Result<Vec<Completion>, String> {
    let end = deadline(timeout);
    let mut out = Vec::new();
    while out.len() < n {
        let want = n - out.len();
        cq.poll(&mut out, want).map_err(e("poll"))?;
        if out.len() >= n {
            break;
        }
        if Instant::now() > end {
            return Err(format!(
                "timed out waiting for {what}: got {} of {n} completions: {out:?}",
                out.len()
            ));
        }
        std::thread::yield_now();
    }
    Ok(out)
}

/// Checks that `cq` stays empty (for the in-memory fabric this is exact; on hardware it is a
/// short look).
fn expect_empty<C: CompletionQueue>(cq: &mut C, what: &str) -> Result<(), String> {
    let mut out = Vec::new();
    cq.poll(&mut out, 16).map_err(e("poll"))?;
    if out.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: unexpected completions {out:?}"))
    }
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn one(c: &[Completion], id: u64, status: WcStatus, what: &str) -> Result<Completion, String> {
    let x = c
        .first()
        .copied()
        .ok_or_else(|| format!("{what}: no completion"))?;
    check(x.wr_id == WrId(id) && x.status == status, || {
        format!("{what}: expected id {id} {status:?}, got {x:?}")
    })?;
    Ok(x)
}

fn read<F: Fabric>(s: &Side<F>, off: usize, len: usize) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; len];
    s.mem.read(off, &mut v).map_err(e("read"))?;
    Ok(v)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn qp<F: Fabric>(s: &mut Side<F>) -> Result<&mut F::Qp, String> {
    s.qp.as_mut().ok_or_else(|| "no QP".to_string())
}

fn send<F: Fabric>(
    s: &mut Side<F>,
    id: u64,
    op: SendOp,
    payload: Payload<'_>,
    signaled: bool,
) -> Result<(), String> {
    qp(s)?
        .post_send(&[SendWr {
            wr_id: WrId(id),
            op,
            payload,
            signaled,
        }])
        .map_err(e("post_send"))
}

// ----- cases -----------------------------------------------------------------------------------

fn send_recv_two_sges<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    let msg = pattern(64 + 1000, 7);
    p.c.mem.write(32768, &msg).map_err(e("write"))?;
    let sge = p.c.mr.sge(32768, msg.len() as u32).map_err(e("sge"))?;
    send(&mut p.c, 1, SendOp::Send, Payload::Sges(&[sge]), true)?;
    let rc = wait_cq(&mut p.s.rcq, 1, p.timeout, "server receive")?;
    let r = one(&rc, 1000, WcStatus::Success, "receive")?;
    check(
        r.opcode == Some(WcOpcode::Recv) && r.byte_len == msg.len() as u32,
        || format!("receive {r:?}"),
    )?;
    check(
        Some(r.qp_num) == p.s.qp.as_ref().map(|q| q.qp_num()),
        || "receive names another QP".into(),
    )?;
    check(read(&p.s, 0, 64)? == msg[..64], || {
        "command slot holds the wrong bytes".into()
    })?;
    check(read(&p.s, 64, 1000)? == msg[64..], || {
        "data buffer holds the wrong bytes".into()
    })?;
    let sc = wait_cq(&mut p.c.scq, 1, p.timeout, "client send")?;
    let x = one(&sc, 1, WcStatus::Success, "send")?;
    check(x.opcode == Some(WcOpcode::Send), || {
        format!("send opcode {x:?}")
    })?;
    Ok(Outcome::Passed)
}

fn inline_send<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    let cqe = pattern(16, 3);
    send(&mut p.c, 2, SendOp::Send, Payload::Inline(&cqe), true)?;
    let rc = wait_cq(&mut p.s.rcq, 1, p.timeout, "server receive")?;
    let r = one(&rc, 1000, WcStatus::Success, "receive")?;
    check(r.byte_len == 16 && read(&p.s, 0, 16)? == cqe, || {
        "inline payload not delivered".into()
    })?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "client send")?,
        2,
        WcStatus::Success,
        "send",
    )?;
    // Unsignaled success produces nothing; a signaled one after it does.
    send(&mut p.c, 3, SendOp::Send, Payload::Inline(&cqe), false)?;
    send(&mut p.c, 4, SendOp::Send, Payload::Inline(&cqe), true)?;
    let sc = wait_cq(&mut p.c.scq, 1, p.timeout, "client send")?;
    one(
        &sc,
        4,
        WcStatus::Success,
        "signaled send after an unsignaled one",
    )?;
    wait_cq(&mut p.s.rcq, 2, p.timeout, "server receives")?;
    Ok(Outcome::Passed)
}

fn rdma_write_then_read<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    let data = pattern(12_000, 11);
    p.c.mem.write(0, &data).map_err(e("write"))?;
    let src = p.c.mr.sge(0, data.len() as u32).map_err(e("sge"))?;
    let remote = p.s.mr.remote(40_000);
    send(
        &mut p.c,
        5,
        SendOp::RdmaWrite(remote),
        Payload::Sges(&[src]),
        true,
    )?;
    let x = one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "write")?,
        5,
        WcStatus::Success,
        "write",
    )?;
    check(x.opcode == Some(WcOpcode::RdmaWrite), || {
        format!("write opcode {x:?}")
    })?;
    check(read(&p.s, 40_000, data.len())? == data, || {
        "written bytes differ".into()
    })?;
    expect_empty(&mut p.s.rcq, "an RDMA WRITE consumes no receive")?;
    // Read it back into another place, in two SGEs.
    let dst = [
        p.c.mr.sge(20_000, 5000).map_err(e("sge"))?,
        p.c.mr.sge(30_000, 7000).map_err(e("sge"))?,
    ];
    send(
        &mut p.c,
        6,
        SendOp::RdmaRead(remote),
        Payload::Sges(&dst),
        true,
    )?;
    let x = one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "read")?,
        6,
        WcStatus::Success,
        "read",
    )?;
    check(
        x.opcode == Some(WcOpcode::RdmaRead) && x.byte_len == 12_000,
        || format!("read completion {x:?}"),
    )?;
    check(
        read(&p.c, 20_000, 5000)? == data[..5000] && read(&p.c, 30_000, 7000)? == data[5000..],
        || "read bytes differ".into(),
    )?;
    Ok(Outcome::Passed)
}

fn write_send_chain_order<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    for round in 0..8u8 {
        let data = pattern(4096, round);
        let off = 16_384 + usize::from(round) * 4096;
        p.c.mem.write(off, &data).map_err(e("write"))?;
        let src = p.c.mr.sge(off as u64, 4096).map_err(e("sge"))?;
        let resp = [round; 16];
        let remote = p.s.mr.remote(32_768 + u64::from(round) * 4096);
        let chain = [
            SendWr {
                wr_id: WrId(0),
                op: SendOp::RdmaWrite(remote),
                payload: Payload::Sges(&[src]),
                signaled: false,
            },
            SendWr {
                wr_id: WrId(100 + u64::from(round)),
                op: SendOp::Send,
                payload: Payload::Inline(&resp),
                signaled: true,
            },
        ];
        qp(&mut p.c)?
            .post_send(&chain)
            .map_err(e("post_send chain"))?;
        let rc = wait_cq(&mut p.s.rcq, 1, p.timeout, "response receive")?;
        check(rc[0].status == WcStatus::Success, || {
            format!("receive {:?}", rc[0])
        })?;
        // The data of the WRITE is in place when the SEND's receive completes.
        check(
            read(&p.s, 32_768 + usize::from(round) * 4096, 4096)? == data,
            || format!("round {round}: the SEND overtook the WRITE"),
        )?;
        let sc = wait_cq(&mut p.c.scq, 1, p.timeout, "chain completion")?;
        one(
            &sc,
            100 + u64::from(round),
            WcStatus::Success,
            "chain's SEND",
        )?;
        let slot = (rc[0].wr_id.0 - 1000) * 8192;
        let sges = [
            p.s.mr.sge(slot, 64).map_err(e("sge"))?,
            p.s.mr.sge(slot + 64, 4096).map_err(e("sge"))?,
        ];
        qp(&mut p.s)?
            .post_recv(&[RecvWr {
                wr_id: rc[0].wr_id,
                sges: &sges,
            }])
            .map_err(e("repost"))?;
    }
    Ok(Outcome::Passed)
}

fn zero_length_write<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    // No valid key or address is needed: the responder checks neither for zero length.
    let probe = RemoteBuf { addr: 0, rkey: 0 };
    for i in 0..4 {
        send(
            &mut p.c,
            200 + i,
            SendOp::RdmaWrite(probe),
            Payload::Sges(&[]),
            true,
        )?;
        let x = one(
            &wait_cq(&mut p.c.scq, 1, p.timeout, "probe")?,
            200 + i,
            WcStatus::Success,
            "probe",
        )?;
        check(x.opcode == Some(WcOpcode::RdmaWrite), || {
            format!("probe {x:?}")
        })?;
    }
    expect_empty(&mut p.s.rcq, "the probe consumes no receive")?;
    Ok(Outcome::Passed)
}

fn access_violation<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    // A region peers may only read.
    let ro_mem = Arc::new(DmaMemory::new(8192, false).map_err(e("memory"))?);
    let ro = env
        .server
        .register(
            &p.s.pd,
            ro_mem.clone(),
            Access::LOCAL_WRITE | Access::REMOTE_READ,
        )
        .map_err(e("register"))?;
    ro_mem.write(0, &pattern(100, 1)).map_err(e("write"))?;
    let src = p.c.mr.sge(0, 100).map_err(e("sge"))?;
    // Reading is allowed...
    let dst = p.c.mr.sge(1000, 100).map_err(e("sge"))?;
    send(
        &mut p.c,
        7,
        SendOp::RdmaRead(ro.remote(0)),
        Payload::Sges(&[dst]),
        true,
    )?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "read")?,
        7,
        WcStatus::Success,
        "allowed read",
    )?;
    // ...writing is not: remote access error, and the QP is dead afterwards.
    send(
        &mut p.c,
        8,
        SendOp::RdmaWrite(ro.remote(0)),
        Payload::Sges(&[src]),
        true,
    )?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "write")?,
        8,
        WcStatus::RemoteAccessError,
        "forbidden write",
    )?;
    check(read_mem(&ro_mem, 100)? == pattern(100, 1), || {
        "forbidden write changed memory".into()
    })?;
    let after = qp(&mut p.c)?.post_send(&[SendWr {
        wr_id: WrId(9),
        op: SendOp::Send,
        payload: Payload::Inline(b"x"),
        signaled: true,
    }]);
    if after.is_ok() {
        one(
            &wait_cq(&mut p.c.scq, 1, p.timeout, "send after error")?,
            9,
            WcStatus::WrFlushError,
            "send after error",
        )?;
    }
    drop(ro);
    Ok(Outcome::Passed)
}

fn read_mem(m: &DmaMemory, len: usize) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; len];
    m.read(0, &mut v).map_err(e("read"))?;
    Ok(v)
}

fn bad_key_and_bounds<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    // A key that names nothing.
    let mut p = connect(env, Opts::default(), None)?;
    let dst = p.c.mr.sge(0, 64).map_err(e("sge"))?;
    let bad = RemoteBuf {
        addr: p.s.mr.addr(),
        rkey: p.s.mr.rkey() ^ 0x00FF_FF00,
    };
    send(
        &mut p.c,
        10,
        SendOp::RdmaRead(bad),
        Payload::Sges(&[dst]),
        true,
    )?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "bad key")?,
        10,
        WcStatus::RemoteAccessError,
        "bad key",
    )?;
    // The right key past the region's end.
    let mut p = connect(env, Opts::default(), None)?;
    let dst = p.c.mr.sge(0, 128).map_err(e("sge"))?;
    let past = p.s.mr.remote(p.s.mr.len() - 64);
    send(
        &mut p.c,
        11,
        SendOp::RdmaRead(past),
        Payload::Sges(&[dst]),
        true,
    )?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "out of bounds")?,
        11,
        WcStatus::RemoteAccessError,
        "out of bounds",
    )?;
    // A local SGE with a bad key fails locally.
    let mut p = connect(env, Opts::default(), None)?;
    let mut sge = p.c.mr.sge(0, 64).map_err(e("sge"))?;
    sge.lkey ^= 0x00FF_FF00;
    match qp(&mut p.c)?.post_send(&[SendWr {
        wr_id: WrId(12),
        op: SendOp::Send,
        payload: Payload::Sges(&[sge]),
        signaled: true,
    }]) {
        Err(_) => {}
        Ok(()) => {
            let x = wait_cq(&mut p.c.scq, 1, p.timeout, "bad lkey")?;
            // IBTA says local protection error (mlx5, the in-memory fabric); rxe reports a
            // local QP operation error. Either way the work request fails locally.
            let local = matches!(
                x[0].status,
                WcStatus::LocalProtectionError | WcStatus::LocalQpOperationError
            );
            check(x[0].wr_id == WrId(12) && local, || {
                format!("bad lkey: {:?}", x[0])
            })?;
        }
    }
    Ok(Outcome::Passed)
}

fn rnr_retry_exceeded<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(
        env,
        Opts {
            client_rnr: 0,
            server_recvs: 0,
            ..Opts::default()
        },
        None,
    )?;
    send(
        &mut p.c,
        13,
        SendOp::Send,
        Payload::Inline(b"nobody listens"),
        true,
    )?;
    one(
        &wait_cq(&mut p.c.scq, 1, p.timeout, "rnr")?,
        13,
        WcStatus::RnrRetryExceeded,
        "send without a receive",
    )?;
    expect_empty(&mut p.s.rcq, "no receive completes")?;
    Ok(Outcome::Passed)
}

fn rnr_wait_then_deliver<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(
        env,
        Opts {
            client_rnr: 7,
            server_recvs: 0,
            ..Opts::default()
        },
        None,
    )?;
    send(&mut p.c, 14, SendOp::Send, Payload::Inline(b"first"), true)?;
    send(&mut p.c, 15, SendOp::Send, Payload::Inline(b"second"), true)?;
    expect_empty(&mut p.c.scq, "sends wait for receives")?;
    for i in 0..2u64 {
        let sges = [p.s.mr.sge(i * 8192, 64).map_err(e("sge"))?];
        qp(&mut p.s)?
            .post_recv(&[RecvWr {
                wr_id: WrId(i),
                sges: &sges,
            }])
            .map_err(e("post_recv"))?;
    }
    let rc = wait_cq(&mut p.s.rcq, 2, p.timeout * 4, "delayed receives")?;
    check(rc[0].wr_id == WrId(0) && rc[1].wr_id == WrId(1), || {
        format!("receive order {rc:?}")
    })?;
    check(
        read(&p.s, 0, 5)? == b"first" && read(&p.s, 8192, 6)? == b"second",
        || "RC order broken".into(),
    )?;
    let sc = wait_cq(&mut p.c.scq, 2, p.timeout, "sends")?;
    check(
        sc.iter().all(|c| c.status == WcStatus::Success) && sc[0].wr_id == WrId(14),
        || format!("sends {sc:?}"),
    )?;
    Ok(Outcome::Passed)
}

fn disconnect_mid_flight<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(
        env,
        Opts {
            server_recvs: 4,
            ..Opts::default()
        },
        None,
    )?;
    // The client has receives in flight too.
    for i in 0..3u64 {
        let sges = [p.c.mr.sge(i * 4096, 4096).map_err(e("sge"))?];
        qp(&mut p.c)?
            .post_recv(&[RecvWr {
                wr_id: WrId(50 + i),
                sges: &sges,
            }])
            .map_err(e("post_recv"))?;
    }
    let cconn = p.c.conn.ok_or("no client conn")?;
    let sconn = p.s.conn.ok_or("no server conn")?;
    p.c.cm.disconnect(cconn).map_err(e("disconnect"))?;
    // The disconnecting side's receives flush.
    let fl = wait_cq(&mut p.c.rcq, 3, p.timeout, "client flush")?;
    check(
        fl.iter().all(|c| c.status == WcStatus::WrFlushError),
        || format!("client flush {fl:?}"),
    )?;
    check(
        fl.iter().map(|c| c.wr_id.0).collect::<Vec<_>>() == vec![50, 51, 52],
        || format!("flush order {fl:?}"),
    )?;
    // The server hears of it, disconnects in turn, and its receives flush.
    wait_for::<F>(
        &mut p.s.cm,
        p.timeout,
        "server Disconnected",
        |ev| matches!(ev, CmEvent::Disconnected { conn } if *conn == sconn),
    )?;
    p.s.cm.disconnect(sconn).map_err(e("server disconnect"))?;
    let fl = wait_cq(&mut p.s.rcq, 4, p.timeout, "server flush")?;
    check(
        fl.iter().all(|c| c.status == WcStatus::WrFlushError),
        || format!("server flush {fl:?}"),
    )?;
    wait_for::<F>(
        &mut p.c.cm,
        p.timeout,
        "client Disconnected",
        |ev| matches!(ev, CmEvent::Disconnected { conn } if *conn == cconn),
    )?;
    // A post after the disconnect either fails or flushes.
    let r = qp(&mut p.c)?.post_send(&[SendWr {
        wr_id: WrId(60),
        op: SendOp::Send,
        payload: Payload::Inline(b"late"),
        signaled: true,
    }]);
    if r.is_ok() {
        one(
            &wait_cq(&mut p.c.scq, 1, p.timeout, "late send")?,
            60,
            WcStatus::WrFlushError,
            "late send",
        )?;
    }
    // Both ids leave time-wait (the kernel takes seconds here; allow for it).
    let tw = p.timeout.max(Duration::from_secs(30));
    wait_for::<F>(
        &mut p.c.cm,
        tw,
        "client TimewaitExit",
        |ev| matches!(ev, CmEvent::TimewaitExit { conn } if *conn == cconn),
    )?;
    wait_for::<F>(
        &mut p.s.cm,
        tw,
        "server TimewaitExit",
        |ev| matches!(ev, CmEvent::TimewaitExit { conn } if *conn == sconn),
    )?;
    p.c.cm.release(cconn);
    p.s.cm.release(sconn);
    Ok(Outcome::Passed)
}

/// Takes events from `cm` until one matches; events that only may come in between
/// (Disconnected/TimewaitExit of the same connection) are skipped, anything else fails.
fn wait_for<F: Fabric>(
    cm: &mut F::Cm,
    timeout: Duration,
    what: &str,
    want: impl Fn(&CmEvent<F>) -> bool,
) -> Result<(), String> {
    let end = deadline(timeout);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let ev = next_event::<F>(cm, left, what)?;
        if want(&ev) {
            return Ok(());
        }
        match ev {
            CmEvent::Disconnected { .. } | CmEvent::TimewaitExit { .. } => {}
            other => return Err(format!("{what}: unexpected {other:?}")),
        }
    }
}

fn private_data_both_ways<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let req: Vec<u8> = pattern(32, 0x40);
    let acc: Vec<u8> = pattern(32, 0x80);
    let p = connect(
        env,
        Opts {
            connect_data: req.clone(),
            accept_data: acc.clone(),
            ..Opts::default()
        },
        None,
    )?;
    check(
        p.request.private_data.len() >= 32 && p.request.private_data[..32] == req[..],
        || format!("request private data {:?}", p.request.private_data),
    )?;
    check(p.request.private_data[32..].iter().all(|b| *b == 0), || {
        "request padding is not zero".into()
    })?;
    check(
        p.accept_data.len() >= 32 && p.accept_data[..32] == acc[..],
        || format!("accept private data {:?}", p.accept_data),
    )?;
    // The client offered responder resources 4, initiator depth 2; the listener sees them swapped.
    check(
        p.request.responder_resources == 2 && p.request.initiator_depth == 4,
        || {
            format!(
                "request resources rr={} id={}",
                p.request.responder_resources, p.request.initiator_depth
            )
        },
    )?;
    Ok(Outcome::Passed)
}

fn reject_with_private_data<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut s = side(env.server)?;
    let mut c = side(env.client)?;
    let addr =
        s.cm.listen(SocketAddr::new(env.ip, 0), 8)
            .map_err(e("listen"))?;
    let params = ConnectParams {
        private_data: b"let me in".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        resolve_timeout_ms: 2000,
    };
    let conn =
        c.cm.connect(addr, params, init(&c, None))
            .map_err(e("connect"))?;
    let req = wait_request::<F>(&mut s.cm, &mut c.cm, env.timeout)?;
    check(req.info().private_data.starts_with(b"let me in"), || {
        "request data".into()
    })?;
    s.cm.reject(req, &[0, 0, 6, 0]).map_err(e("reject"))?;
    match next_event::<F>(&mut c.cm, env.timeout, "reject")? {
        CmEvent::Rejected {
            conn: got,
            reason,
            private_data,
        } => {
            check(got == conn, || "reject names another connection".into())?;
            check(reason == REJECT_REASON_CONSUMER, || {
                format!("reject reason {reason}")
            })?;
            check(private_data.starts_with(&[0, 0, 6, 0]), || {
                format!("reject data {private_data:?}")
            })?;
        }
        other => return Err(format!("expected Rejected, got {other:?}")),
    }
    c.cm.release(conn);
    Ok(Outcome::Passed)
}

fn shared_receive_queue<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    // The SRQ must exist before accept; make it on the server device with a throwaway PD?
    // No: it must share the server side's PD, so build the pair by hand around it.
    let mut s = side(env.server)?;
    let srq = env
        .server
        .create_srq(&s.pd, 16, 2)
        .map_err(e("create_srq"))?;
    for i in 0..4u64 {
        let sges = [
            s.mr.sge(i * 8192, 64).map_err(e("sge"))?,
            s.mr.sge(i * 8192 + 64, 1024).map_err(e("sge"))?,
        ];
        srq.post_recv(&[RecvWr {
            wr_id: WrId(300 + i),
            sges: &sges,
        }])
        .map_err(e("srq post"))?;
    }
    let mut c = side(env.client)?;
    let addr =
        s.cm.listen(SocketAddr::new(env.ip, 0), 8)
            .map_err(e("listen"))?;
    let params = ConnectParams {
        private_data: vec![],
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        resolve_timeout_ms: 2000,
    };
    let conn =
        c.cm.connect(addr, params, init(&c, None))
            .map_err(e("connect"))?;
    let req = wait_request::<F>(&mut s.cm, &mut c.cm, env.timeout)?;
    let accept = AcceptParams {
        private_data: vec![],
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
    };
    let mut sqp =
        s.cm.accept(req, init(&s, Some(srq.handle())), accept)
            .map_err(|(err, _)| format!("accept: {err}"))?;
    check(
        sqp.post_recv(&[RecvWr {
            wr_id: WrId(1),
            sges: &[],
        }])
        .is_err(),
        || "post_recv on an SRQ QP succeeded".into(),
    )?;
    let mut cqp = match next_event::<F>(&mut c.cm, env.timeout, "established")? {
        CmEvent::Established {
            conn: got,
            qp: Some(q),
            ..
        } if got == conn => q,
        other => return Err(format!("client: unexpected {other:?}")),
    };
    for i in 0..3u8 {
        let msg = pattern(200, i);
        cqp.post_send(&[SendWr {
            wr_id: WrId(u64::from(i)),
            op: SendOp::Send,
            payload: Payload::Inline(&msg[..64]),
            signaled: true,
        }])
        .map_err(e("send"))?;
    }
    let rc = wait_cq(&mut s.rcq, 3, env.timeout, "srq receives")?;
    check(
        rc.iter().map(|c| c.wr_id.0).collect::<Vec<_>>() == vec![300, 301, 302],
        || format!("srq order {rc:?}"),
    )?;
    check(
        rc.iter()
            .all(|c| Some(c.qp_num) == Some(sqp.qp_num()) && c.byte_len == 64),
        || format!("srq completions {rc:?}"),
    )?;
    check(read(&s, 8192, 64)? == pattern(200, 1)[..64], || {
        "srq data".into()
    })?;
    wait_cq(&mut c.scq, 3, env.timeout, "sends")?;
    drop(sqp);
    drop(cqp);
    Ok(Outcome::Passed)
}

fn cq_notification<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    let mut p = connect(env, Opts::default(), None)?;
    let _ = p.s.rcq.ack_events().map_err(e("ack"))?;
    p.s.rcq.arm().map_err(e("arm"))?;
    send(
        &mut p.c,
        16,
        SendOp::Send,
        Payload::Inline(b"wake up"),
        true,
    )?;
    let end = deadline(p.timeout);
    let mut got = 0;
    while got == 0 {
        got = p.s.rcq.ack_events().map_err(e("ack"))?;
        if got == 0 && Instant::now() > end {
            return Err("the armed CQ's fd never became readable".into());
        }
        std::thread::yield_now();
    }
    wait_cq(&mut p.s.rcq, 1, p.timeout, "receive")?;
    // Not re-armed: a second completion does not notify.
    send(&mut p.c, 17, SendOp::Send, Payload::Inline(b"quiet"), true)?;
    wait_cq(&mut p.s.rcq, 1, p.timeout, "receive")?;
    check(p.s.rcq.ack_events().map_err(e("ack"))? == 0, || {
        "an unarmed CQ notified".into()
    })?;
    Ok(Outcome::Passed)
}

fn send_with_invalidate<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    if !env.server.capabilities().invalidate_registered_regions {
        return Ok(Outcome::Skipped(
            "the device only invalidates fast-registered regions",
        ));
    }
    let mut p = connect(env, Opts::default(), None)?;
    // The server holds the client's key (as after a keyed SGL with invalidate) and invalidates it.
    let key = p.c.mr.rkey();
    // The client receives.
    let sges = [p.c.mr.sge(0, 64).map_err(e("sge"))?];
    qp(&mut p.c)?
        .post_recv(&[RecvWr {
            wr_id: WrId(70),
            sges: &sges,
        }])
        .map_err(e("post_recv"))?;
    send(
        &mut p.s,
        18,
        SendOp::SendWithInvalidate { rkey: key },
        Payload::Inline(&[1; 16]),
        true,
    )?;
    let rc = wait_cq(&mut p.c.rcq, 1, p.timeout, "receive")?;
    let r = one(&rc, 70, WcStatus::Success, "receive with invalidate")?;
    check(r.invalidated_rkey == Some(key), || {
        format!("invalidated key {r:?}")
    })?;
    // The key no longer works remotely.
    let dst = p.s.mr.sge(0, 64).map_err(e("sge"))?;
    send(
        &mut p.s,
        19,
        SendOp::RdmaRead(p.c.mr.remote(0)),
        Payload::Sges(&[dst]),
        true,
    )?;
    let sc = wait_cq(&mut p.s.scq, 2, p.timeout, "send + read")?;
    one(&sc, 18, WcStatus::Success, "send with invalidate")?;
    one(
        &sc[1..],
        19,
        WcStatus::RemoteAccessError,
        "read with an invalidated key",
    )?;
    Ok(Outcome::Passed)
}

fn typed_endpoint<F: Fabric>(env: &Env<'_, F>) -> CaseResult {
    #[derive(Debug, PartialEq)]
    struct Req(&'static str);
    let mut p = connect(env, Opts::default(), None)?;
    let cqp = p.c.qp.take().ok_or("no QP")?;
    let mut ep: Endpoint<F::Qp, Req> = Endpoint::new(cqp, 2);
    let src = p.c.mr.sge(0, 64).map_err(e("sge"))?;
    let remote = p.s.mr.remote(0);
    // A chain: unsignaled WRITE + signaled SEND, its state on the SEND.
    let mut chain = [
        SendWr {
            wr_id: WrId(0),
            op: SendOp::RdmaWrite(remote),
            payload: Payload::Sges(&[src]),
            signaled: false,
        },
        SendWr {
            wr_id: WrId(0),
            op: SendOp::Send,
            payload: Payload::Inline(b"cqe"),
            signaled: true,
        },
    ];
    ep.post_send(Req("read-data"), &mut chain)
        .map_err(|r| format!("post: {}", r.error))?;
    check(ep.sq_in_use() == 2, || format!("in use {}", ep.sq_in_use()))?;
    // The queue is full: the state comes back whole.
    let mut more = [SendWr {
        wr_id: WrId(0),
        op: SendOp::Send,
        payload: Payload::Inline(b"x"),
        signaled: true,
    }];
    match ep.post_send(Req("overflow"), &mut more) {
        Err(r) => check(r.ctx == Req("overflow") && r.error.posted == 0, || {
            format!("rejected {r:?}")
        })?,
        Ok(()) => return Err("a post past the queue depth succeeded".into()),
    }
    let sc = wait_cq(&mut p.c.scq, 1, p.timeout, "chain")?;
    let done = ep.complete(&sc[0]).ok_or("completion did not resolve")?;
    check(done.ctx == Req("read-data"), || {
        format!("resolved {:?}", done.ctx)
    })?;
    check(ep.complete(&sc[0]).is_none(), || {
        "a completion resolved twice".into()
    })?;
    check(ep.sq_in_use() == 0 && ep.in_flight() == 0, || {
        "slots not released".into()
    })?;
    wait_cq(&mut p.s.rcq, 1, p.timeout, "server receive")?;
    Ok(Outcome::Passed)
}
