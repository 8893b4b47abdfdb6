//! End-to-end member failure: a member of the RAID-5 array vanishes in the middle of a stream
//! of writes and reads; no error reaches the host, every read matches a shadow copy, the whole
//! dataset verifies afterwards (from this host and a fresh one), the array reports the role
//! missing, and the host gets a SMART reliability event with the critical warning set.

mod common;

use std::time::{Duration, Instant};

use common::*;
use raidline_fabric::mem::MemFabric;
use raidline_initiator::io::{self as hio, IoOp};
use raidline_initiator::{Controller, Lba, Nsid, Tag};
use raidline_proto::aen::AsyncEventType;
use raidline_proto::features::{AsyncEventConfig, FeatureId};
use raidline_proto::log::{LogPageId, SmartLog};
use raidline_raid::Fault;

const BS: usize = 4096;
const REGION: usize = 1152; // blocks: 24 stripes of 48

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn verify_all(c: &mut Controller<MemFabric>, shadow: &[u8], who: &str) {
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut all = vec![0u8; shadow.len()];
    c.read(0, &ns, Lba(0), &mut all).unwrap();
    for (b, (got, want)) in all.chunks(BS).zip(shadow.chunks(BS)).enumerate() {
        assert!(got == want, "{who}: block {b} differs");
    }
}

#[test]
fn member_vanishing_mid_stream_is_invisible_to_the_host() {
    let rig = rig(&RigOptions {
        faulty: true,
        ..RigOptions::default()
    });
    assert_eq!(rig.faults.len(), 4);
    let mut c = connect(&rig, 1);
    c.set_features(
        FeatureId::ASYNC_EVENT_CONFIG,
        AsyncEventConfig::SMART_CRITICAL_WARNINGS | AsyncEventConfig::NS_ATTRIBUTE,
    )
    .unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    // The dataset.
    let mut shadow = pattern(0xD5, REGION * BS);
    c.write(0, &ns, Lba(0), &shadow).unwrap();
    assert!(rig.array.degraded_roles().is_empty());

    let mut rng = Lcg(7);
    let victim = 2usize;
    let ops = 64;
    for op in 0..ops {
        if op == ops / 2 {
            rig.faults[victim].inject(Fault::Vanished);
        }
        let n = 1 + rng.below(80) as usize;
        let lba = rng.below((REGION - n) as u64) as usize;
        if op % 2 == 0 {
            let data = pattern(op as u64 + 100, n * BS);
            c.write(0, &ns, Lba(lba as u64), &data)
                .unwrap_or_else(|e| panic!("op {op}: write {n}@{lba}: {e}"));
            shadow[lba * BS..(lba + n) * BS].copy_from_slice(&data);
        } else {
            let mut back = vec![0u8; n * BS];
            c.read(0, &ns, Lba(lba as u64), &mut back)
                .unwrap_or_else(|e| panic!("op {op}: read {n}@{lba}: {e}"));
            assert!(
                back == shadow[lba * BS..(lba + n) * BS],
                "op {op}: read {n}@{lba} differs"
            );
        }
    }
    assert!(rig.faults[victim].injected() > 0, "the fault was hit");
    assert_eq!(rig.array.degraded_roles(), vec![victim]);
    c.flush(0, Nsid(1)).unwrap();
    verify_all(&mut c, &shadow, "same host");
    let mut c2 = connect(&rig, 2);
    verify_all(&mut c2, &shadow, "fresh host");
    c2.shutdown().unwrap();

    // The host hears of it: a SMART reliability event, and the critical warning bit 2.
    let end = Instant::now() + Duration::from_secs(3);
    let mut events = Vec::new();
    while Instant::now() < end && events.is_empty() {
        c.service().unwrap();
        events = c.admin.take_events();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        events
            .iter()
            .any(|e| e.event_type == AsyncEventType::SMART && e.log_page == LogPageId::SMART),
        "events: {events:?}"
    );
    let b = c
        .get_log_page(LogPageId::SMART, 0xFFFF_FFFF, 0, 512)
        .unwrap();
    let smart = SmartLog::parse(&b).unwrap();
    assert_ne!(smart.critical_warning & (1 << 2), 0, "reliability degraded");
    assert!(smart.data_units_written > 0);
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn member_failing_under_pipelined_writes_on_two_queues() {
    let rig = rig(&RigOptions {
        faulty: true,
        ..RigOptions::default()
    });
    let mut o = options(1);
    o.io_queues = 2;
    o.io_depth = 32;
    let mut c = connect_with(&rig, 1, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    // Member 1 fails for good after 150 more operations: in the middle of the rounds below,
    // with up to 64 writes in flight.
    let victim = 1usize;
    rig.faults[victim].inject(Fault::FailAfter { ops: 150 });
    const PER: u64 = 32;
    const BLOCKS: u64 = 8;
    const ROUNDS: u64 = 4;
    let mut qs = c.take_io_queues();
    std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(qi, q)| {
                let ns = &ns;
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let mut tags: Vec<(Tag, u64)> = Vec::new();
                        for k in 0..PER {
                            let lba = (qi as u64 * PER + k) * BLOCKS + 3;
                            let tag = q.alloc().expect("slot");
                            let data = pattern(lba * 10 + round, (BLOCKS as usize) * BS);
                            q.write_data(tag, 0, &data).unwrap();
                            hio::submit_rw(q, tag, IoOp::Write, ns, Lba(lba), BLOCKS as u32)
                                .unwrap();
                            tags.push((tag, lba));
                        }
                        for (t, lba) in tags {
                            q.wait(t)
                                .unwrap_or_else(|e| panic!("round {round}: write at {lba}: {e}"));
                        }
                    }
                })
            })
            .collect();
        while handles.iter().any(|h| !h.is_finished()) {
            c.service().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        for h in handles {
            h.join().unwrap();
        }
    });
    c.io = qs;
    assert!(rig.faults[victim].injected() > 0, "the fault was hit");
    assert_eq!(rig.array.degraded_roles(), vec![victim]);
    let total = 2 * PER * BLOCKS;
    let mut all = vec![0u8; total as usize * BS];
    c.read(1, &ns, Lba(3), &mut all).unwrap();
    for k in 0..2 * PER {
        let lba = k * BLOCKS + 3;
        let off = (k * BLOCKS) as usize * BS;
        assert!(
            all[off..off + BLOCKS as usize * BS]
                == pattern(lba * 10 + ROUNDS - 1, BLOCKS as usize * BS)[..],
            "last round's write at {lba}"
        );
    }
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn rebuild_onto_a_hot_spare_under_host_io_restores_redundancy() {
    use raidline_raid::{ArrayConfig, ChunkSize, CpuXor, MemMember};
    use raidline_target::subsystem::{HostAccess, Limits};
    use std::sync::Arc;
    let disks = mem_disks(4, (8 << 20) + (1 << 20));
    let (members, faults) = members_of(&disks, true);
    let spare = MemMember::new("spare0", (8 << 20) + (1 << 20));
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(CHUNK as u32).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Arc::new(
        raidline_raid::Array::create(
            members,
            vec![Arc::new(spare.clone())],
            &cfg,
            Arc::new(CpuXor::detect()),
        )
        .unwrap(),
    );
    assert_eq!(array.spares(), 1);
    let net = raidline_fabric::mem::MemNetwork::new();
    let target = start(
        &net,
        "target0",
        ADDR.parse().unwrap(),
        array.clone(),
        HostAccess::Any,
        Limits::default(),
    );
    let mut c =
        Controller::connect(net.device("host1"), target.local_addrs()[0], options(1)).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut shadow = pattern(0x5A, REGION * BS);
    c.write(0, &ns, Lba(0), &shadow).unwrap();

    faults[1].inject(Fault::Vanished);
    // Host I/O goes on while the array fails role 1 over to the spare and rebuilds it.
    let mut rng = Lcg(99);
    let end = Instant::now() + Duration::from_secs(10);
    let mut op = 0u64;
    loop {
        let n = 1 + rng.below(48) as usize;
        let lba = rng.below((REGION - n) as u64) as usize;
        let data = pattern(op + 1000, n * BS);
        c.write(0, &ns, Lba(lba as u64), &data)
            .unwrap_or_else(|e| panic!("op {op}: write {n}@{lba}: {e}"));
        shadow[lba * BS..(lba + n) * BS].copy_from_slice(&data);
        let mut back = vec![0u8; n * BS];
        c.read(0, &ns, Lba(lba as u64), &mut back).unwrap();
        assert!(back == shadow[lba * BS..(lba + n) * BS], "op {op}");
        op += 1;
        let rebuilt = array.spares() == 0
            && array.degraded_roles().is_empty()
            && array.rebuild_progress().is_none_or(|p| p.finished);
        if op >= 16 && rebuilt {
            break;
        }
        assert!(
            Instant::now() < end,
            "no rebuild within 10 s: spares {}, degraded {:?}, progress {:?}",
            array.spares(),
            array.degraded_roles(),
            array.rebuild_progress()
        );
    }
    assert!(faults[1].injected() > 0);
    // The spare now holds role 1: lose another member and everything must still read back,
    // which it can only if the rebuild (and the writes during it) put the right bytes there.
    faults[3].inject(Fault::Vanished);
    verify_all(&mut c, &shadow, "after rebuild, with member 3 gone");
    assert_eq!(array.degraded_roles(), vec![3]);
    assert_eq!(copied(&target), 0);
    c.shutdown().unwrap();
}

#[test]
fn operator_fails_a_member_through_the_management_api() {
    use raidline_target::mgmt::Management;
    use raidline_target::service::Api;
    let rig = default_rig();
    let api = Api::new(rig.target.shared().clone());
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let shadow = pattern(0x0FA1, REGION * BS);
    c.write(0, &ns, Lba(0), &shadow).unwrap();
    let st = api.status();
    assert_eq!(st.arrays.len(), 1);
    assert_eq!(st.arrays[0].state, "clean");
    let me = st
        .controllers
        .iter()
        .find(|k| k.cntlid == c.cntlid())
        .expect("the controller is in the status report");
    assert_eq!(me.hostnqn, host(1).hostnqn.to_string());
    assert_eq!(me.subnqn, SUBNQN);
    let mut qids: Vec<u16> = me.queues.iter().map(|q| q.qid).collect();
    qids.sort_unstable();
    assert_eq!(qids, vec![0, 1]);

    assert!(api.array_fail("array0", "nosuch").is_err());
    assert!(api.array_fail("nosuch", "d2").is_err());
    api.array_fail("array0", "d2").unwrap();
    assert_eq!(rig.array.degraded_roles(), vec![2]);
    let st = api.status();
    assert_eq!(st.arrays[0].state, "degraded");
    assert_eq!(st.arrays[0].members[2].state, "failed");
    // The host keeps going: writes over the failed role's chunks, then a full verify.
    let mut shadow = shadow;
    let data = pattern(0x0FA2, 200 * BS);
    c.write(0, &ns, Lba(301), &data).unwrap();
    shadow[301 * BS..501 * BS].copy_from_slice(&data);
    verify_all(&mut c, &shadow, "after the operator failed d2");
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn two_members_lost_fails_io_with_exact_statuses_and_no_wrong_data() {
    use raidline_initiator::Error;
    use raidline_proto::{Status, StatusCode};
    let rig = rig(&RigOptions {
        faulty: true,
        ..RigOptions::default()
    });
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let data = pattern(0x2F, 96 * BS);
    c.write(0, &ns, Lba(0), &data).unwrap();
    rig.faults[0].inject(Fault::Vanished);
    rig.faults[3].inject(Fault::Vanished);
    let status = |r: Result<(), Error>| match r {
        Err(Error::Nvme { status, .. }) => status,
        other => panic!("expected an NVMe status, got {other:?}"),
    };
    // Two stripes' worth of reads: at least one touches a lost chunk; none returns data.
    let mut back = vec![0u8; data.len()];
    assert_eq!(
        status(c.read(0, &ns, Lba(0), &mut back)),
        Status::new(StatusCode::UNRECOVERED_READ_ERROR).dnr()
    );
    assert_eq!(
        status(c.write(0, &ns, Lba(0), &data)),
        Status::new(StatusCode::WRITE_FAULT).dnr()
    );
    assert!(rig.array.is_failed() || rig.array.degraded_roles().len() >= 2);
    // Any single block either reads back right or fails: never wrong bytes.
    let mut one = vec![0u8; BS];
    for lba in 0..96usize {
        match c.read(0, &ns, Lba(lba as u64), &mut one) {
            Ok(()) => assert!(
                one == data[lba * BS..(lba + 1) * BS],
                "block {lba}: wrong data"
            ),
            Err(e) => assert_eq!(
                e.status(),
                Some(Status::new(StatusCode::UNRECOVERED_READ_ERROR).dnr()),
                "block {lba}"
            ),
        }
    }
    // The target itself is fine: admin commands, other hosts, the status report.
    c.identify_controller().unwrap();
    let mut c2 = connect(&rig, 2);
    c2.namespace(Nsid(1)).unwrap();
    let st = raidline_target::mgmt::Management::status(&raidline_target::service::Api::new(
        rig.target.shared().clone(),
    ));
    assert_eq!(st.arrays[0].state, "failed");
    c2.shutdown().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn read_errors_on_one_member_are_invisible_to_the_host() {
    use raidline_raid::OpKind;
    let rig = rig(&RigOptions {
        faulty: true,
        ..RigOptions::default()
    });
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let shadow = pattern(0xEE, 384 * BS); // 8 stripes
    c.write(0, &ns, Lba(0), &shadow).unwrap();
    // Member 1 now fails every read (writes still land): latent sector errors everywhere.
    rig.faults[1].inject(Fault::ErrorRange {
        kind: OpKind::Read,
        start: 0,
        end: u64::MAX,
    });
    verify_all(&mut c, &shadow, "with member 1 failing reads");
    assert!(rig.faults[1].injected() > 0, "no read reached member 1");
    // Writes that need member 1's old data (read-modify-write) work too.
    let mut shadow = shadow;
    let data = pattern(0xEF, 5 * BS);
    c.write(0, &ns, Lba(17), &data).unwrap();
    shadow[17 * BS..22 * BS].copy_from_slice(&data);
    verify_all(&mut c, &shadow, "after a partial-stripe write");
    c.shutdown().unwrap();
}

#[test]
fn a_requested_scrub_shows_its_progress_in_status_and_metrics() {
    use raidline_target::mgmt::Management;
    use raidline_target::service::Api;
    let disks = mem_disks(4, (8 << 20) + (1 << 20));
    let (members, _) = members_of(&disks, false);
    let array = create_array(members);
    let net = raidline_fabric::mem::MemNetwork::new();
    let mut spec = spec_for(
        ADDR.parse().unwrap(),
        array.clone(),
        raidline_target::subsystem::HostAccess::Any,
        raidline_target::subsystem::Limits::default(),
    );
    // 1 MiB/s (the floor): a scrub of this array takes long enough to be seen running.
    spec.arrays[0].2 = 1 << 20;
    let target = raidline_target::daemon::Target::start(net.device("t-scrub"), spec).unwrap();
    let api = Api::new(target.shared().clone());
    assert_eq!(api.status().arrays[0].scrub, None);
    assert!(api.array_scrub("nosuch").is_err());
    api.array_scrub("array0").unwrap();
    let mut seen = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            seen = api.status().arrays[0].scrub;
            seen.is_some_and(|p| p.done_bytes > 0)
        }),
        "no scrub progress in the status report"
    );
    let p = seen.unwrap();
    assert!(p.done_bytes < p.total_bytes, "{p:?}");
    assert_eq!(p.total_bytes, array.geometry().capacity_bytes(), "{p:?}");
    let text = raidline_target::mgmt::render_status(&api.status());
    assert!(text.contains("scrub:"), "{text}");
    assert!(
        api.metrics()
            .contains("raidline_array_scrub_progress_ratio{array=\"array0\"}"),
        "metrics"
    );
    drop(api);
    assert!(target.shutdown().is_empty());
}
