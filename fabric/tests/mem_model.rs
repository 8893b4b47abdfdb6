//! The in-memory fabric's own model (what the shared suite cannot ask of real hardware) and
//! the fault wrapper's faults.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use raidline_fabric::fault::{FaultConfig, Faulty};
use raidline_fabric::mem::MemNetwork;
use raidline_fabric::*;

const IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

struct Side<F: Fabric> {
    cm: F::Cm,
    scq: F::Cq,
    rcq: F::Cq,
    mem: Arc<DmaMemory>,
    mr: F::Mr,
    qp: F::Qp,
}

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    }
}

fn params(data: &[u8]) -> ConnectParams {
    ConnectParams {
        private_data: data.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        resolve_timeout_ms: 100,
    }
}

/// A connected pair over `server` and `client` (whose events are all synchronous).
fn pair<F: Fabric>(server: &F, client: &F) -> (Side<F>, Side<F>) {
    let mk = |d: &F| {
        let pd = d.alloc_pd().unwrap();
        let mem = Arc::new(DmaMemory::new(16384, false).unwrap());
        let mr = d.register(&pd, mem.clone(), Access::ALL).unwrap();
        (
            d.create_cm().unwrap(),
            pd,
            d.create_cq(4).unwrap(),
            d.create_cq(4).unwrap(),
            mem,
            mr,
        )
    };
    let (mut scm, spd, sscq, srcq, smem, smr) = mk(server);
    let (mut ccm, cpd, cscq, crcq, cmem, cmr) = mk(client);
    let addr = scm.listen(SocketAddr::new(IP, 0), 1).unwrap();
    let cinit = QpInit {
        pd: cpd,
        send_cq: cscq.handle(),
        recv_cq: crcq.handle(),
        srq: None,
        caps: caps(),
    };
    let conn = ccm.connect(addr, params(b"hi"), cinit).unwrap();
    let Some(CmEvent::ConnectRequest(req)) = scm.poll_event().unwrap() else {
        panic!("no request")
    };
    let sinit = QpInit {
        pd: spd,
        send_cq: sscq.handle(),
        recv_cq: srcq.handle(),
        srq: None,
        caps: caps(),
    };
    let accept = AcceptParams {
        private_data: vec![],
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
    };
    let sqp = scm.accept(req, sinit, accept).map_err(|(e, _)| e).unwrap();
    let Some(CmEvent::Established {
        conn: got,
        qp: Some(cqp),
        ..
    }) = ccm.poll_event().unwrap()
    else {
        panic!("no establish")
    };
    assert_eq!(got, conn);
    assert!(matches!(
        scm.poll_event().unwrap(),
        Some(CmEvent::Established { qp: None, .. })
    ));
    (
        Side {
            cm: scm,
            scq: sscq,
            rcq: srcq,
            mem: smem,
            mr: smr,
            qp: sqp,
        },
        Side {
            cm: ccm,
            scq: cscq,
            rcq: crcq,
            mem: cmem,
            mr: cmr,
            qp: cqp,
        },
    )
}

fn poll<C: CompletionQueue>(cq: &mut C) -> Vec<Completion> {
    let mut v = Vec::new();
    cq.poll(&mut v, 64).unwrap();
    v
}

fn recv<F: Fabric>(s: &mut Side<F>, id: u64, len: u32) {
    let sge = s.mr.sge(0, len).unwrap();
    s.qp.post_recv(&[RecvWr {
        wr_id: WrId(id),
        sges: &[sge],
    }])
    .unwrap();
}

fn send<F: Fabric>(s: &mut Side<F>, id: u64, data: &[u8]) -> Result<(), PostError> {
    s.qp.post_send(&[SendWr {
        wr_id: WrId(id),
        op: SendOp::Send,
        payload: Payload::Inline(data),
        signaled: true,
    }])
}

#[test]
fn a_receive_too_small_fails_both_sides_and_kills_both_qps() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (mut s, mut c) = pair(&a, &b);
    recv(&mut s, 1, 8);
    recv(&mut s, 2, 64);
    send(&mut c, 10, &[7; 32]).unwrap();
    let r = poll(&mut s.rcq);
    assert_eq!(r[0].status, WcStatus::LocalLengthError);
    assert_eq!(
        (r[1].wr_id, r[1].status),
        (WrId(2), WcStatus::WrFlushError),
        "the responder QP is in error"
    );
    assert_eq!(poll(&mut c.scq)[0].status, WcStatus::RemoteInvalidRequest);
    send(&mut c, 11, b"x").unwrap();
    assert_eq!(poll(&mut c.scq)[0].status, WcStatus::WrFlushError);
}

#[test]
fn sends_to_a_peer_in_error_time_out() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (mut s, mut c) = pair(&a, &b);
    s.qp.set_error().unwrap();
    send(&mut c, 1, b"x").unwrap();
    assert_eq!(poll(&mut c.scq)[0].status, WcStatus::RetryExceeded);
}

#[test]
fn errors_complete_even_when_unsignaled_and_cq_overflow_is_reported() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (_s, mut c) = pair(&a, &b);
    c.qp.set_error().unwrap();
    let wr = SendWr {
        wr_id: WrId(5),
        op: SendOp::Send,
        payload: Payload::Inline(b"x"),
        signaled: false,
    };
    c.qp.post_send(&[wr, wr, wr, wr]).unwrap();
    assert_eq!(poll(&mut c.scq).len(), 4);
    c.qp.post_send(&[wr, wr, wr, wr, wr]).unwrap();
    let mut v = Vec::new();
    assert_eq!(c.scq.poll(&mut v, 64), Err(FabricError::CqOverflow));
}

#[test]
fn post_validation_rejects_before_anything_is_posted() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (mut s, mut c) = pair(&a, &b);
    let big = [0u8; 65];
    let e = send(&mut c, 1, &big).unwrap_err();
    assert_eq!(e.posted, 0);
    let sge = c.mr.sge(0, 8).unwrap();
    let three = [sge, sge, sge];
    let wr = SendWr {
        wr_id: WrId(1),
        op: SendOp::Send,
        payload: Payload::Sges(&three),
        signaled: true,
    };
    assert!(matches!(
        c.qp.post_send(&[wr]).unwrap_err().error,
        FabricError::InvalidArgument(_)
    ));
    for i in 0..8 {
        recv(&mut s, i, 8);
    }
    let sg = s.mr.sge(0, 8).unwrap();
    let full =
        s.qp.post_recv(&[RecvWr {
            wr_id: WrId(9),
            sges: &[sg],
        }])
        .unwrap_err();
    assert!(matches!(
        full.error,
        FabricError::QueueFull { capacity: 8, .. }
    ));
    assert!(s.mr.sge(16384 - 4, 8).is_err());
    assert!(poll(&mut c.scq).is_empty() && poll(&mut s.rcq).is_empty());
}

#[test]
fn cm_errors_unknown_listener_address_in_use_and_dropped_requests() {
    let net = MemNetwork::new();
    let d = net.device("a");
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(8).unwrap();
    let init = || QpInit::<_> {
        pd: pd.clone(),
        send_cq: cq.handle(),
        recv_cq: cq.handle(),
        srq: None,
        caps: caps(),
    };
    let mut cm = d.create_cm().unwrap();
    let addr = cm.listen(SocketAddr::new(IP, 4420), 1).unwrap();
    assert_eq!(cm.listen(addr, 1), Err(FabricError::AddressInUse(addr)));
    // Nobody listens there.
    let conn = cm
        .connect(SocketAddr::new(IP, 4421), params(b""), init())
        .unwrap();
    match cm.poll_event().unwrap() {
        Some(CmEvent::Rejected {
            conn: c, reason, ..
        }) => {
            assert_eq!((c, reason), (conn, REJECT_REASON_INVALID_SERVICE_ID))
        }
        other => panic!("{other:?}"),
    }
    // Too much private data.
    assert!(cm.connect(addr, params(&[0; 57]), init()).is_err());
    // A request dropped unanswered is rejected.
    let conn = cm.connect(addr, params(b"x"), init()).unwrap();
    let Some(CmEvent::ConnectRequest(req)) = cm.poll_event().unwrap() else {
        panic!()
    };
    assert_eq!(req.info().private_data.len(), MAX_CONNECT_PRIVATE_DATA);
    drop(req);
    assert!(
        matches!(cm.poll_event().unwrap(), Some(CmEvent::Rejected { conn: c, reason: REJECT_REASON_CONSUMER, .. }) if c == conn)
    );
    assert!(cm.poll_event().unwrap().is_none());
    // Regions must be writable locally to be writable remotely.
    let mem = Arc::new(DmaMemory::new(4096, false).unwrap());
    assert!(d.register(&pd, mem, Access::REMOTE_WRITE).is_err());
    // Resources of another network are refused.
    let other = MemNetwork::new().device("x");
    let opd = other.alloc_pd().unwrap();
    let init2 = QpInit::<_> {
        pd: opd,
        send_cq: cq.handle(),
        recv_cq: cq.handle(),
        srq: None,
        caps: caps(),
    };
    assert!(cm.connect(addr, params(b""), init2).is_err());
}

#[test]
fn dropping_a_connected_cm_disconnects_the_peer() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (mut s, c) = pair(&a, &b);
    recv(&mut s, 1, 8);
    drop(c);
    assert!(matches!(
        s.cm.poll_event().unwrap(),
        Some(CmEvent::Disconnected { .. })
    ));
    assert!(
        poll(&mut s.rcq).is_empty(),
        "the survivor's QP stays up until it disconnects"
    );
}

#[test]
fn injected_post_failures_hand_back_and_reach_nothing() {
    let net = MemNetwork::new();
    let (a, b) = (
        Faulty::new(net.device("a"), FaultConfig::default()),
        Faulty::new(net.device("b"), FaultConfig::default()),
    );
    let (mut s, mut c) = pair(&a, &b);
    recv(&mut s, 1, 64);
    b.control().fail_next_posts(1);
    let e = send(&mut c, 1, b"lost").unwrap_err();
    assert_eq!(
        e,
        PostError::nothing_posted(FabricError::Injected("post failed"))
    );
    assert!(poll(&mut s.rcq).is_empty());
    send(&mut c, 2, b"ok").unwrap();
    assert_eq!(poll(&mut s.rcq)[0].byte_len, 2);
    assert_eq!(b.control().counters().posts_failed, 1);
}

#[test]
fn a_broken_qp_flushes_and_a_dropped_completion_vanishes() {
    let net = MemNetwork::new();
    let (a, b) = (
        Faulty::new(net.device("a"), FaultConfig::default()),
        Faulty::new(net.device("b"), FaultConfig::default()),
    );
    let (mut s, mut c) = pair(&a, &b);
    recv(&mut s, 1, 64);
    recv(&mut s, 2, 64);
    a.control().drop_next_completions(1);
    send(&mut c, 1, b"one").unwrap();
    assert!(poll(&mut s.rcq).is_empty(), "dropped");
    send(&mut c, 2, b"two").unwrap();
    assert_eq!(poll(&mut s.rcq)[0].wr_id, WrId(2));
    b.control().break_next_posts(1);
    send(&mut c, 3, b"three").unwrap();
    let sc = poll(&mut c.scq);
    assert_eq!(
        sc.iter().map(|x| x.status).collect::<Vec<_>>(),
        vec![WcStatus::Success, WcStatus::Success, WcStatus::WrFlushError]
    );
}

#[test]
fn delays_hold_the_whole_cq_in_order_and_are_reproducible_by_seed() {
    let run = |seed: u64| {
        let net = MemNetwork::new();
        let cfg = FaultConfig {
            seed,
            delay_completion: 500,
            delay_polls: 2,
            ..FaultConfig::default()
        };
        let (a, b) = (
            Faulty::new(net.device("a"), cfg.clone()),
            Faulty::new(net.device("b"), cfg),
        );
        let (mut s, mut c) = pair(&a, &b);
        let mut trace = Vec::new();
        for i in 0..4 {
            recv(&mut s, i, 64);
            send(&mut c, i, b"x").unwrap();
            let mut got = Vec::new();
            let mut polls = 0;
            while got.is_empty() {
                got = poll(&mut s.rcq);
                polls += 1;
                assert!(polls < 10, "a delay never ended");
            }
            assert_eq!(got[0].wr_id, WrId(i));
            trace.push(polls);
            poll(&mut c.scq);
        }
        (trace, a.control().counters())
    };
    let (t1, c1) = run(42);
    assert_eq!(run(42), (t1.clone(), c1));
    assert!(c1.delays > 0 && t1.contains(&3), "{t1:?} {c1:?}");
}

#[test]
fn injected_rejects_reach_the_connecting_side() {
    let net = MemNetwork::new();
    let cfg = FaultConfig {
        reject_private_data: vec![0, 0, 6, 0],
        ..FaultConfig::default()
    };
    let server = Faulty::new(net.device("a"), cfg);
    let client = net.device("b");
    server.control().reject_next_connects(1);
    let mut scm = server.create_cm().unwrap();
    let addr = scm.listen(SocketAddr::new(IP, 0), 1).unwrap();
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(4).unwrap();
    let mut ccm = client.create_cm().unwrap();
    let init = QpInit::<_> {
        pd,
        send_cq: cq.handle(),
        recv_cq: cq.handle(),
        srq: None,
        caps: caps(),
    };
    ccm.connect(addr, params(b"x"), init).unwrap();
    assert!(
        scm.poll_event().unwrap().is_none(),
        "the request was consumed by the fault"
    );
    match ccm.poll_event().unwrap() {
        Some(CmEvent::Rejected { private_data, .. }) => {
            assert!(private_data.starts_with(&[0, 0, 6, 0]))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.control().counters().connects_rejected, 1);
}

#[test]
fn memory_written_by_the_fabric_is_what_the_cpu_reads() {
    let net = MemNetwork::new();
    let (a, b) = (net.device("a"), net.device("b"));
    let (s, mut c) = pair(&a, &b);
    c.mem.write(0, b"payload").unwrap();
    let sge = c.mr.sge(0, 7).unwrap();
    let wr = SendWr {
        wr_id: WrId(1),
        op: SendOp::RdmaWrite(s.mr.remote(100)),
        payload: Payload::Sges(&[sge]),
        signaled: true,
    };
    c.qp.post_send(&[wr]).unwrap();
    let mut v = [0u8; 7];
    s.mem.read(100, &mut v).unwrap();
    assert_eq!(&v, b"payload");
}
