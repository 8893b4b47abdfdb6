//! Connect decisions: every refusal with its exact status and IPO.

use super::*;
use crate::subsystem::{HostAccess, NamespaceIds, NamespaceInfo};
use raidline_proto::SglDescriptor;

const SUB: &str = "nqn.2026-11.io.raidline:array0";
const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";

fn nqn(s: &str) -> Nqn {
    Nqn::new(s).unwrap()
}

fn registry(hosts: HostAccess) -> Registry {
    let sub = Subsystem {
        nqn: nqn(SUB),
        serial: "RL0001".into(),
        model: "Raidline RAID-5".into(),
        hosts,
        auth: Default::default(),
        namespaces: vec![NamespaceInfo {
            nsid: 1,
            block_size: 4096,
            blocks: 1 << 20,
            ids: NamespaceIds {
                nguid: [1; 16],
                eui64: [2; 8],
                uuid: [3; 16],
            },
            preferred_write_blocks: 48,
            deallocate: true,
            active: Default::default(),
        }],
    };
    Registry::new(Limits::default(), vec![sub])
}

fn connect(qid: u16, sqsize: u16) -> Connect {
    Connect {
        cid: 1,
        sgl: SglDescriptor::Keyed {
            address: 0,
            length: 1024,
            key: 1,
            invalidate: true,
        },
        recfmt: 0,
        qid,
        sqsize,
        cattr: 0,
        kato: 5000,
    }
}

fn data(sub: &str, cntlid: u16) -> ConnectData {
    ConnectData {
        hostid: [9; 16],
        cntlid,
        subnqn: nqn(sub),
        hostnqn: nqn(HOST),
    }
}

#[test]
fn admin_then_io_queues() {
    let mut r = registry(HostAccess::Any);
    let a = r.connect(&connect(0, 31), &data(SUB, 0xFFFF)).unwrap();
    assert!(a.new_controller);
    assert_eq!(a.cntlid, 1);
    let b = r.connect(&connect(0, 31), &data(SUB, 0xFFFF)).unwrap();
    assert_eq!(
        b.cntlid, 2,
        "a second controller of the same host gets a unique id"
    );
    let io = r.connect(&connect(1, 127), &data(SUB, 1)).unwrap();
    assert!(!io.new_controller);
    assert_eq!(io.cntlid, 1);
    let busy = r.connect(&connect(1, 127), &data(SUB, 1)).unwrap_err();
    assert_eq!(
        busy.status,
        Status::new(StatusCode::CONNECT_CONTROLLER_BUSY).dnr()
    );
    assert_eq!(r.remove_controller(1), vec![1]);
    let gone = r.connect(&connect(2, 127), &data(SUB, 1)).unwrap_err();
    assert_eq!(
        gone.dw0,
        1 << 16 | 16,
        "IATTR data, IPO = cntlid at byte 16"
    );
}

#[test]
fn refusals_carry_exact_status_and_ipo() {
    let mut r = registry(HostAccess::Only(
        [nqn("nqn.other:host")].into_iter().collect(),
    ));
    let mut bad = connect(0, 31);
    bad.recfmt = 1;
    let e = r.connect(&bad, &data(SUB, 0xFFFF)).unwrap_err();
    assert_eq!(e.status.to_field(), 0x4180);

    let e = r.connect(&connect(0, 31), &data(SUB, 5)).unwrap_err();
    assert_eq!(e.status.to_field(), 0x4182);
    assert_eq!(e.dw0, 0x0001_0010);

    let e = r.connect(&connect(0, 0), &data(SUB, 0xFFFF)).unwrap_err();
    assert_eq!(e.dw0, 44, "IATTR command, IPO = sqsize at byte 44");
    let e = r.connect(&connect(0, 32), &data(SUB, 0xFFFF)).unwrap_err();
    assert_eq!(e.dw0, 44);

    let e = r
        .connect(&connect(0, 31), &data("nqn.nope:x", 0xFFFF))
        .unwrap_err();
    assert_eq!(e.dw0, 0x0001_0100, "IPO = subnqn at byte 256");

    let e = r.connect(&connect(0, 31), &data(SUB, 0xFFFF)).unwrap_err();
    assert_eq!(
        e.status,
        Status::new(StatusCode::CONNECT_INVALID_HOST).dnr()
    );
    assert_eq!(e.dw0, 0x0001_0200, "IPO = hostnqn at byte 512");

    // Discovery is open to every host.
    let d = r
        .connect(
            &connect(0, 31),
            &data(raidline_proto::text::DISCOVERY_NQN, 0xFFFF),
        )
        .unwrap();
    assert!(matches!(d.served, Served::Discovery));
    // ... and has no I/O queues.
    assert!(r
        .connect(
            &connect(1, 31),
            &data(raidline_proto::text::DISCOVERY_NQN, d.cntlid)
        )
        .is_err());
}

#[test]
fn io_connect_checks_host_and_qid() {
    let mut r = registry(HostAccess::Any);
    let a = r.connect(&connect(0, 31), &data(SUB, 0xFFFF)).unwrap();
    let mut other_host = data(SUB, a.cntlid);
    other_host.hostnqn = nqn("nqn.evil:host");
    assert!(r.connect(&connect(1, 127), &other_host).is_err());
    let mut other_id = data(SUB, a.cntlid);
    other_id.hostid = [0; 16];
    assert!(r.connect(&connect(1, 127), &other_id).is_err());
    let e = r
        .connect(
            &connect(Limits::default().max_io_queues + 1, 127),
            &data(SUB, a.cntlid),
        )
        .unwrap_err();
    assert_eq!(e.dw0, 42, "IPO = qid at byte 42");
    let e = r
        .connect(&connect(1, 128), &data(SUB, a.cntlid))
        .unwrap_err();
    assert_eq!(e.dw0, 44);
    r.connect(&connect(1, 127), &data(SUB, a.cntlid)).unwrap();
    r.io_queue_gone(a.cntlid, 1);
    r.connect(&connect(1, 127), &data(SUB, a.cntlid)).unwrap();
}
