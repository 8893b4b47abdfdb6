//! End-to-end keep-alive: a host that asked for a 1 s KATO and then stays silent loses its
//! controller within a few seconds (the target lists it no more, its queues are disconnected,
//! further commands fail), while a host that sends Keep Alive keeps it; the host can connect
//! again afterwards.

mod common;

use std::time::{Duration, Instant};

use common::*;
use raidline_initiator::{Error, Lba, Nsid};

fn listed(rig: &Rig, cntlid: u16) -> bool {
    rig.target
        .shared()
        .controllers
        .lock()
        .unwrap()
        .contains_key(&cntlid)
}

#[test]
fn silent_host_is_torn_down_after_kato() {
    let rig = default_rig();
    let mut o = options(1);
    o.kato = Duration::from_secs(1);
    let mut c = connect_with(&rig, 1, o).unwrap();
    // A bystander without keep-alive (KATO 0): the expiry must not touch it.
    let mut o = options(3);
    o.kato = Duration::ZERO;
    let mut bystander = connect_with(&rig, 3, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let data = pattern(1, 8 * 4096);
    c.write(0, &ns, Lba(0), &data).unwrap();
    // The last command the target saw: from here on the host sends nothing.
    let quiet = Instant::now();
    let cntlid = c.cntlid();
    {
        let ctrls = rig.target.shared().controllers.lock().unwrap();
        let e = ctrls.get(&cntlid).expect("listed after connect");
        assert_eq!(e.kato_ms, 1000);
        assert_eq!(e.conns.len(), 2, "admin + 1 I/O queue");
    }
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        listed(&rig, cntlid),
        "torn down before KATO (600 ms of 1000)"
    );
    assert!(
        eventually(Duration::from_secs(3), || !listed(&rig, cntlid)),
        "still listed {:?} after the last command with KATO 1 s",
        quiet.elapsed()
    );
    let gone_after = quiet.elapsed();
    assert!(gone_after >= Duration::from_millis(1000), "{gone_after:?}");
    // The queues were disconnected: the next I/O and admin commands fail, none hangs.
    let mut back = vec![0u8; data.len()];
    let t = Instant::now();
    let r = c.read(0, &ns, Lba(0), &mut back);
    assert!(
        matches!(
            r,
            Err(Error::Disconnected { .. }
                | Error::QueueDown { .. }
                | Error::Transport { .. }
                | Error::Post { .. })
        ),
        "read after expiry: {r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "failed fast");
    let a = c.identify_controller();
    assert!(a.is_err(), "admin command after expiry: {a:?}");
    assert!(
        listed(&rig, bystander.cntlid()),
        "the bystander was torn down too"
    );
    let mut b = vec![0u8; data.len()];
    bystander.read(0, &ns, Lba(0), &mut b).unwrap();
    assert!(b == data);
    bystander.shutdown().unwrap();
    // The host starts over and finds its data.
    drop(c);
    let mut c2 = connect(&rig, 1);
    assert_ne!(c2.cntlid(), 0);
    let ns = c2.namespace(Nsid(1)).unwrap();
    c2.read(0, &ns, Lba(0), &mut back).unwrap();
    assert!(back == data);
    c2.shutdown().unwrap();
}

#[test]
fn keep_alive_keeps_the_controller() {
    let rig = default_rig();
    let mut o = options(2);
    // KATO 3 s, Keep Alive every 1.5 s: a test thread stalled for up to ~1.5 s on a loaded
    // machine must not make this flaky.
    o.kato = Duration::from_secs(3);
    let mut c = connect_with(&rig, 2, o).unwrap();
    let cntlid = c.cntlid();
    let start = Instant::now();
    // 2 KATOs of admin-only activity: Keep Alive every 1.5 s, nothing else.
    while start.elapsed() < Duration::from_millis(6000) {
        c.service().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(listed(&rig, cntlid), "expired despite Keep Alive");
    let kas = c.admin.keep_alives();
    assert!(kas >= 3, "{kas} Keep Alives in 6 s with KATO 3 s");
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut b = vec![0u8; 4096];
    c.read(0, &ns, Lba(0), &mut b).unwrap();
    c.shutdown().unwrap();
    assert!(
        eventually(Duration::from_secs(2), || !listed(&rig, cntlid)),
        "a shut-down controller is removed"
    );
}

#[test]
fn kato_set_by_set_features_is_enforced() {
    use raidline_proto::features::FeatureId;
    let rig = default_rig();
    let mut o = options(4);
    o.kato = Duration::ZERO; // no keep-alive asked at connect
    let mut c = connect_with(&rig, 4, o).unwrap();
    let cntlid = c.cntlid();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(listed(&rig, cntlid), "KATO 0 must not expire");
    // Keep-Alive Timer (FID 0Fh): 1000 ms, then silence.
    c.set_features(FeatureId::KEEP_ALIVE_TIMER, 1000).unwrap();
    let quiet = Instant::now();
    assert!(
        eventually(Duration::from_secs(3), || !listed(&rig, cntlid)),
        "KATO set to 1 s by Set Features was not enforced within {:?}",
        quiet.elapsed()
    );
    assert!(quiet.elapsed() >= Duration::from_millis(1000));
    assert!(c.identify_controller().is_err());
}

#[test]
fn host_that_dies_right_after_connect_is_reaped() {
    use raidline_proto::fabrics::ConnectData;
    use raidline_proto::text::Nqn;
    let rig = default_rig();
    // Admin Connect with KATO 1 s, then nothing at all: not even CC.EN.
    let mut q =
        RawQueue::connect(&rig.net, "raw-dead", rig.target.local_addrs()[0], 0, 32, 0).unwrap();
    let h = host(5);
    let cqe = q
        .fabrics_connect(
            1000,
            &ConnectData {
                hostid: h.hostid,
                cntlid: 0xFFFF,
                subnqn: Nqn::new(SUBNQN).unwrap(),
                hostnqn: h.hostnqn,
            },
        )
        .unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let cntlid = cqe.dw0() as u16;
    assert!(listed(&rig, cntlid));
    assert!(
        eventually(Duration::from_secs(3), || !listed(&rig, cntlid)),
        "a controller that never became ready outlived its KATO"
    );
}

#[test]
fn a_dropped_connection_reaps_its_controller_even_without_kato() {
    let rig = default_rig();
    let mut o = options(6);
    o.kato = Duration::ZERO;
    o.io_queues = 2;
    let c = connect_with(&rig, 6, o).unwrap();
    let cntlid = c.cntlid();
    assert!(listed(&rig, cntlid));
    // No shutdown: the host's queues just disconnect (a host reboot).
    drop(c);
    assert!(
        eventually(Duration::from_secs(3), || !listed(&rig, cntlid)),
        "a disconnected controller with KATO 0 stays forever"
    );
    // Its queue ids and controller id are free: the same host connects again.
    let mut o = options(6);
    o.io_queues = 2;
    connect_with(&rig, 6, o).unwrap().shutdown().unwrap();
}
