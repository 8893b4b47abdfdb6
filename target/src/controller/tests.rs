//! The controller state machine: enable sequence, identify, logs, features, keep-alive, AER.

use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_proto::admin::{
    AsyncEventRequest, GetFeatures, GetLogPage, Identify, KeepAlive, SetFeatures,
};
use raidline_proto::aen::{AsyncEvent, NoticeEvent};
use raidline_proto::fabrics::property::{self, Cc, Csts};
use raidline_proto::fabrics::{PropertyGet, PropertySet, PropertySize};
use raidline_proto::features::FeatureId;
use raidline_proto::identify::{
    ActiveNsList, Cns, IdentifyController, IdentifyNamespace, NsIdDescriptor, NsIdDescriptorList,
    NsIdType,
};
use raidline_proto::log::{ChangedNsList, LogPageId, SmartLog};
use raidline_proto::text::Nqn;
use raidline_proto::{SglDescriptor, Sqe, Status, StatusCode};

use super::*;
use crate::subsystem::{HostAccess, NamespaceIds, NamespaceInfo, Subsystem};

fn sub() -> Arc<Subsystem> {
    Arc::new(Subsystem {
        nqn: Nqn::new("nqn.2026-11.io.raidline:a").unwrap(),
        serial: "RL-SERIAL-1".into(),
        model: "Raidline RAID-5".into(),
        hosts: HostAccess::Any,
        auth: Default::default(),
        namespaces: vec![NamespaceInfo {
            nsid: 1,
            block_size: 4096,
            blocks: 1 << 20,
            ids: NamespaceIds {
                nguid: [0x11; 16],
                eui64: [0x22; 8],
                uuid: [0x33; 16],
            },
            preferred_write_blocks: 48,
            deallocate: true,
            active: Default::default(),
        }],
    })
}

fn keyed(len: u32) -> SglDescriptor {
    SglDescriptor::Keyed {
        address: 0,
        length: len,
        key: 1,
        invalidate: false,
    }
}

fn ctrl(now: Instant) -> Controller {
    Controller::new(
        7,
        Served::Nvm(sub()),
        Nqn::new("nqn.host:1").unwrap(),
        Limits::default(),
        5000,
        now,
    )
}

fn set_cc(c: &mut Controller, cc: Cc) {
    c.handle_property_set(&PropertySet {
        cid: 1,
        size: PropertySize::Four,
        offset: property::CC,
        value: u64::from(cc.to_u32()),
    })
    .unwrap();
}

fn enable(c: &mut Controller) {
    set_cc(
        c,
        Cc {
            en: true,
            iosqes: 6,
            iocqes: 4,
            ..Cc::default()
        },
    );
}

fn run(c: &mut Controller, now: Instant, sqe: Sqe) -> Completion {
    match c.handle_admin(now, &sqe, &[], &AdminEnv::default()) {
        AdminOutcome::Complete(done) => done,
        AdminOutcome::Parked => panic!("parked"),
    }
}

/// Identify with `cns`/`nsid` and an SGL of `len` bytes.
fn identify(c: &mut Controller, now: Instant, cns: Cns, nsid: u32, len: u32) -> Completion {
    run(
        c,
        now,
        Identify::new(1, cns, nsid, keyed(len)).to_sqe().unwrap(),
    )
}

fn get(c: &Controller, offset: u32, size: PropertySize) -> Result<u64, Status> {
    c.handle_property_get(&PropertyGet {
        cid: 1,
        size,
        offset,
    })
}

#[test]
fn enable_sequence_as_the_linux_host_runs_it() {
    let now = Instant::now();
    let mut c = ctrl(now);
    let cap = property::Cap::from_u64(get(&c, property::CAP, PropertySize::Eight).unwrap());
    assert_eq!((cap.mpsmin, cap.mqes, cap.css), (0, 127, 1));
    assert_eq!(
        get(&c, property::VS, PropertySize::Four).unwrap(),
        0x0001_0400
    );
    // Commands before enable: sequence error.
    assert_eq!(
        identify(&mut c, now, Cns::CONTROLLER, 0, 4096).status.code,
        StatusCode::COMMAND_SEQUENCE_ERROR
    );
    enable(&mut c);
    let csts = Csts::from_u32(get(&c, property::CSTS, PropertySize::Four).unwrap() as u32);
    assert!(csts.rdy && !csts.cfs);
    // Wrong size or read-only property.
    assert!(get(&c, property::CAP, PropertySize::Four).is_err());
    assert!(get(&c, 0x0C, PropertySize::Four).is_err());
    assert!(c
        .handle_property_set(&PropertySet {
            cid: 1,
            size: PropertySize::Four,
            offset: property::CSTS,
            value: 0
        })
        .is_err());
    // Shutdown: SHST complete.
    set_cc(
        &mut c,
        Cc {
            en: true,
            shn: 1,
            iosqes: 6,
            iocqes: 4,
            ..Cc::default()
        },
    );
    let csts = Csts::from_u32(get(&c, property::CSTS, PropertySize::Four).unwrap() as u32);
    assert_eq!(csts.shst, 2);
    assert!(c.is_shut_down());
}

#[test]
fn bad_configuration_sets_cfs() {
    let now = Instant::now();
    let mut c = ctrl(now);
    set_cc(
        &mut c,
        Cc {
            en: true,
            iosqes: 7,
            iocqes: 4,
            ..Cc::default()
        },
    );
    let csts = Csts::from_u32(get(&c, property::CSTS, PropertySize::Four).unwrap() as u32);
    assert!(csts.cfs && !csts.rdy);
}

#[test]
fn identify_controller_namespace_lists() {
    let now = Instant::now();
    let mut c = ctrl(now);
    enable(&mut c);
    let d = identify(&mut c, now, Cns::CONTROLLER, 0, 4096);
    assert!(d.status.is_success());
    let id = IdentifyController::parse(&d.data).unwrap();
    assert_eq!(id.cntlid, 7);
    assert_eq!(id.subnqn.unwrap().as_str(), "nqn.2026-11.io.raidline:a");
    assert_eq!(id.sn, "RL-SERIAL-1");
    assert!(id.kas != 0 && id.icdoff == 0 && id.iorcsz == 1);
    assert_eq!(id.ioccsz, (64 + 8192) / 16);
    assert_eq!(id.sgls & 0x10_0005, 0x10_0005);
    assert_eq!(id.cmic & 2, 2);
    assert!(id.maxcmd >= 128);
    assert_eq!(id.nn, 1);
    assert_eq!(id.mdts, 8);

    let d = identify(&mut c, now, Cns::NAMESPACE, 1, 4096);
    let ns = IdentifyNamespace::parse(&d.data).unwrap();
    assert_eq!(
        (ns.nsze, ns.nguid, ns.eui64),
        (1 << 20, [0x11; 16], [0x22; 8])
    );
    assert_eq!((ns.npwg, ns.nows), (47, 47));
    assert_eq!(ns.lbaf[0].lbads, 12);
    assert_eq!(ns.nmic & 1, 1);

    let d = identify(&mut c, now, Cns::ACTIVE_NS_LIST, 0, 4096);
    assert_eq!(ActiveNsList::parse(&d.data).unwrap().ids, vec![1]);
    let d = identify(&mut c, now, Cns::ACTIVE_NS_LIST, 1, 4096);
    assert!(ActiveNsList::parse(&d.data).unwrap().ids.is_empty());

    let d = identify(&mut c, now, Cns::NS_ID_DESCRIPTORS, 1, 4096);
    let list = NsIdDescriptorList::parse(&d.data).unwrap();
    assert_eq!(
        list.find(NsIdType::UUID),
        Some(&NsIdDescriptor::Uuid([0x33; 16]))
    );

    let bad = |c: &mut Controller, cns, nsid, len| identify(c, now, cns, nsid, len).status;
    assert_eq!(
        bad(&mut c, Cns::NAMESPACE, 2, 4096),
        Status::new(StatusCode::INVALID_NAMESPACE).dnr()
    );
    assert_eq!(
        bad(&mut c, Cns::NAMESPACE, 0, 4096),
        Status::new(StatusCode::INVALID_NAMESPACE).dnr()
    );
    assert_eq!(
        bad(&mut c, Cns::NS_ID_DESCRIPTORS, 9, 4096),
        Status::new(StatusCode::INVALID_NAMESPACE).dnr()
    );
    assert_eq!(
        bad(&mut c, Cns(0x1F), 0, 4096),
        Status::new(StatusCode::INVALID_FIELD).dnr()
    );
    assert_eq!(
        bad(&mut c, Cns::CONTROLLER, 0, 512),
        Status::new(StatusCode::DATA_SGL_LENGTH_INVALID).dnr()
    );
}

#[test]
fn logs_and_features() {
    let now = Instant::now();
    let mut c = ctrl(now);
    enable(&mut c);
    c.stats_mut().bytes_written = 1_024_000;
    c.stats_mut().write_commands = 250;
    // The I/O path's lock-free counters add to them.
    let io = c.io_counters().clone();
    io.count(false, 512_000);
    io.count(true, 4096);
    let log = |c: &mut Controller, lid, len| {
        let cmd = GetLogPage::read(1, lid, 0xFFFF_FFFF, 0, len, keyed(len as u32)).unwrap();
        run(c, now, cmd.to_sqe().unwrap())
    };
    let d = log(&mut c, LogPageId::SMART, 512);
    let smart = SmartLog::parse(&d.data).unwrap();
    assert_eq!(
        (smart.data_units_written, smart.host_write_commands),
        (3, 251)
    );
    assert_eq!((smart.data_units_read, smart.host_read_commands), (1, 1));
    // A partial read of the SMART log: the first 8 bytes.
    assert_eq!(log(&mut c, LogPageId::SMART, 8).data.len(), 8);
    assert!(log(&mut c, LogPageId::COMMAND_EFFECTS, 4096)
        .status
        .is_success());
    assert!(log(&mut c, LogPageId::FIRMWARE_SLOT, 512)
        .status
        .is_success());
    assert_eq!(
        log(&mut c, LogPageId::ANA, 4096).status,
        Status::new(StatusCode::INVALID_FIELD).dnr()
    );
    assert_eq!(
        log(&mut c, LogPageId::DISCOVERY, 1024).status,
        Status::new(StatusCode::INVALID_FIELD).dnr()
    );

    // Number of queues: granted once, capped at the limit.
    let nq = SetFeatures::dword(2, FeatureId::NUMBER_OF_QUEUES, 0x003F_003F, keyed(0));
    let d = run(&mut c, now, nq.to_sqe().unwrap());
    assert_eq!(d.result, 0x000F_000F);
    assert_eq!(c.io_queue_count(), 16);
    assert_eq!(
        run(&mut c, now, nq.to_sqe().unwrap()).status,
        Status::new(StatusCode::COMMAND_SEQUENCE_ERROR).dnr()
    );
    let d = run(
        &mut c,
        now,
        GetFeatures::current(3, FeatureId::NUMBER_OF_QUEUES, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    assert_eq!(d.result, 0x000F_000F);
    // KATO round trip, rounded to KAS (100 ms).
    run(
        &mut c,
        now,
        SetFeatures::dword(4, FeatureId::KEEP_ALIVE_TIMER, 12_345, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    let d = run(
        &mut c,
        now,
        GetFeatures::current(5, FeatureId::KEEP_ALIVE_TIMER, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    assert_eq!(d.result, 12_400);
    // Unsupported feature.
    let d = run(
        &mut c,
        now,
        GetFeatures::current(6, FeatureId::ARBITRATION, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    assert_eq!(d.status, Status::new(StatusCode::INVALID_FIELD).dnr());
    // Timestamp set by the host then read back.
    let ts = raidline_proto::features::Timestamp {
        millis: 1_000_000,
        synch: false,
        origin: Default::default(),
    };
    let set = SetFeatures::dword(7, FeatureId::TIMESTAMP, 0, keyed(8));
    let done = c.handle_admin(
        now,
        &set.to_sqe().unwrap(),
        &ts.to_bytes().unwrap(),
        &AdminEnv::default(),
    );
    assert_eq!(done, AdminOutcome::Complete(Completion::ok()));
    let d = run(
        &mut c,
        now,
        GetFeatures::current(8, FeatureId::TIMESTAMP, keyed(8))
            .to_sqe()
            .unwrap(),
    );
    assert!(
        raidline_proto::features::Timestamp::parse(&d.data)
            .unwrap()
            .millis
            >= 1_000_000
    );
    // Unknown opcode.
    let d = run(&mut c, now, Sqe::new(0xC5, 9));
    assert_eq!(d.status, Status::new(StatusCode::INVALID_OPCODE).dnr());
}

#[test]
fn keep_alive_expiry() {
    let t0 = Instant::now();
    let mut c = ctrl(t0);
    enable(&mut c);
    assert!(c.handle_timeout(t0 + Duration::from_millis(4000)).is_none());
    run(
        &mut c,
        t0 + Duration::from_millis(4000),
        KeepAlive { cid: 1 }.to_sqe(),
    );
    assert!(c.handle_timeout(t0 + Duration::from_millis(8000)).is_none());
    let deadline = c.poll_timeout().unwrap();
    assert_eq!(deadline, t0 + Duration::from_millis(4000 + 5000 + 100));
    assert_eq!(
        c.handle_timeout(deadline),
        Some(Expiry::KeepAlive {
            kato: Duration::from_secs(5)
        })
    );
    // KATO 0 disables the timer.
    let d = Controller::new(
        1,
        Served::Discovery,
        Nqn::new("nqn.h:2").unwrap(),
        Limits::default(),
        0,
        t0,
    );
    assert!(d.poll_timeout().is_none());
}

#[test]
fn async_events() {
    let now = Instant::now();
    let mut c = ctrl(now);
    enable(&mut c);
    // Enable namespace attribute notices.
    run(
        &mut c,
        now,
        SetFeatures::dword(1, FeatureId::ASYNC_EVENT_CONFIG, 1 << 8, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    for cid in 10..14 {
        assert_eq!(
            c.handle_admin(
                now,
                &AsyncEventRequest { cid }.to_sqe(),
                &[],
                &AdminEnv::default()
            ),
            AdminOutcome::Parked
        );
    }
    let d = run(&mut c, now, AsyncEventRequest { cid: 14 }.to_sqe());
    assert_eq!(d.status, Status::new(StatusCode::AER_LIMIT_EXCEEDED).dnr());
    let ev = AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED);
    c.post_event(ev, &[1]);
    let (cid, done) = c.poll_event().unwrap();
    assert_eq!(cid, 10);
    assert_eq!(done.result, u64::from(ev.to_dw0()));
    assert_eq!(done.result & 0xFF_FF07, 0x04_0002);
    assert!(c.poll_event().is_none());
    let cmd = GetLogPage::read(
        1,
        LogPageId::CHANGED_NS_LIST,
        0xFFFF_FFFF,
        0,
        4096,
        keyed(4096),
    )
    .unwrap();
    let d = run(&mut c, now, cmd.to_sqe().unwrap());
    assert_eq!(
        ChangedNsList::parse(&d.data).unwrap(),
        ChangedNsList::from_ids([1])
    );
    // Disabled events are not reported.
    c.post_event(AsyncEvent::notice(NoticeEvent::ANA_CHANGE), &[]);
    assert!(c.poll_event().is_none());
    assert_eq!(c.take_parked_aers(), vec![11, 12, 13]);
}

#[test]
fn discovery_controller_refuses_io_admin() {
    let now = Instant::now();
    let mut c = Controller::new(
        3,
        Served::Discovery,
        Nqn::new("nqn.h:1").unwrap(),
        Limits::default(),
        0,
        now,
    );
    enable(&mut c);
    let d = identify(&mut c, now, Cns::CONTROLLER, 0, 4096);
    let id = IdentifyController::parse(&d.data).unwrap();
    assert_eq!(id.cntrltype.0, 2);
    assert!(id.subnqn.unwrap().is_discovery());
    let d = identify(&mut c, now, Cns::NAMESPACE, 1, 4096);
    assert_eq!(d.status, Status::new(StatusCode::INVALID_FIELD).dnr());
    let d = run(
        &mut c,
        now,
        SetFeatures::dword(2, FeatureId::NUMBER_OF_QUEUES, 0, keyed(0))
            .to_sqe()
            .unwrap(),
    );
    assert_eq!(d.status, Status::new(StatusCode::INVALID_FIELD).dnr());
    // The discovery log comes from the environment.
    let log = raidline_proto::log::DiscoveryLog {
        genctr: 5,
        entries: vec![],
    };
    let env = AdminEnv {
        discovery: Some(&log),
        wall_clock_ms: 0,
    };
    let cmd = GetLogPage::read(1, LogPageId::DISCOVERY, 0, 0, 1024, keyed(1024)).unwrap();
    let AdminOutcome::Complete(d) = c.handle_admin(now, &cmd.to_sqe().unwrap(), &[], &env) else {
        panic!()
    };
    assert!(d.status.is_success());
    assert_eq!(&d.data[..8], &5u64.to_le_bytes());
}
