//! End-to-end access control: a host not on the subsystem's allow-list is refused with
//! Connect Invalid Host pointing at HOSTNQN in the Connect data, an allowed host connects and
//! does I/O, an unknown subsystem NQN is Connect Invalid Parameters pointing at SUBNQN, and no
//! host can attach an I/O queue to another host's controller.

mod common;

use std::collections::BTreeSet;

use common::*;
use raidline_initiator::{Error, Lba, Nsid};
use raidline_proto::fabrics::{ConnectData, ConnectResponse, InvalidParameterIn};
use raidline_proto::text::Nqn;
use raidline_proto::{Status, StatusCode};
use raidline_target::subsystem::HostAccess;

fn controllers(rig: &Rig) -> usize {
    rig.target.shared().controllers.lock().unwrap().len()
}

fn refused(r: Result<impl Sized, Error>) -> (Status, ConnectResponse) {
    match r {
        Err(Error::Nvme { status, dw0, .. }) => (status, ConnectResponse::invalid_from_dw0(dw0)),
        Err(e) => panic!("refused with a non-NVMe error: {e}"),
        Ok(_) => panic!("connected"),
    }
}

#[test]
fn host_not_on_the_allow_list_is_refused() {
    let allowed: BTreeSet<Nqn> = [host(1).hostnqn, host(3).hostnqn].into_iter().collect();
    let rig = rig(&RigOptions {
        hosts: HostAccess::Only(allowed),
        ..RigOptions::default()
    });
    let (status, ipo) = refused(connect_with(&rig, 2, options(2)));
    assert_eq!(status, Status::new(StatusCode::CONNECT_INVALID_HOST).dnr());
    assert_eq!(
        ipo,
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Data,
            offset: ConnectData::OFFSET_HOSTNQN,
        }
    );
    assert_eq!(controllers(&rig), 0, "a refused host leaves no controller");

    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let data = pattern(11, 16 * 4096);
    c.write(0, &ns, Lba(100), &data).unwrap();
    let mut c3 = connect(&rig, 3);
    let mut back = vec![0u8; data.len()];
    c3.read(0, &ns, Lba(100), &mut back).unwrap();
    assert!(back == data);
    assert_eq!(controllers(&rig), 2);
    // Refused again while others are connected; the allowed ones are unaffected.
    let (status, _) = refused(connect_with(&rig, 2, options(2)));
    assert_eq!(status.code, StatusCode::CONNECT_INVALID_HOST);
    assert_eq!(controllers(&rig), 2);
    c.read(0, &ns, Lba(100), &mut back).unwrap();
    c3.shutdown().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn unknown_subsystem_is_invalid_parameters() {
    let rig = default_rig();
    let mut o = options(1);
    o.subnqn = Nqn::new("nqn.2026-11.io.raidline:nosuch").unwrap();
    let (status, ipo) = refused(connect_with(&rig, 1, o));
    assert_eq!(
        status,
        Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr()
    );
    assert_eq!(
        ipo,
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Data,
            offset: ConnectData::OFFSET_SUBNQN,
        }
    );
    assert_eq!(controllers(&rig), 0);
    // The right NQN still works.
    connect(&rig, 1).shutdown().unwrap();
}

#[test]
fn no_io_queue_on_another_hosts_controller() {
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 1;
    let c1 = connect_with(&rig, 1, o).unwrap();
    let victim = c1.cntlid();
    // Host 2 names host 1's controller id for an I/O queue (qid 2, which host 1 has not used).
    let mut q = RawQueue::connect(
        &rig.net,
        "host2-raw",
        rig.target.local_addrs()[0],
        2,
        8,
        victim,
    )
    .unwrap();
    let h2 = host(2);
    for (what, hostnqn, hostid) in [
        ("another host NQN", h2.hostnqn.clone(), h2.hostid),
        ("another host id", host(1).hostnqn, h2.hostid),
    ] {
        let cqe = q
            .fabrics_connect(
                0,
                &ConnectData {
                    hostid,
                    cntlid: victim,
                    subnqn: Nqn::new(SUBNQN).unwrap(),
                    hostnqn,
                },
            )
            .unwrap();
        assert_eq!(
            cqe.status,
            Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr(),
            "{what}"
        );
        assert_eq!(
            ConnectResponse::invalid_from_dw0(cqe.dw0()),
            ConnectResponse::InvalidParameter {
                attribute: InvalidParameterIn::Data,
                offset: ConnectData::OFFSET_CNTLID,
            },
            "{what}"
        );
    }
    let ctrls = rig.target.shared().controllers.lock().unwrap();
    assert_eq!(
        ctrls.get(&victim).map(|e| e.conns.len()),
        Some(2),
        "admin + qid 1 only"
    );
    drop(ctrls);
    c1.shutdown().unwrap();
}

#[test]
fn controller_limit_is_busy_until_a_controller_leaves() {
    use raidline_target::subsystem::Limits;
    let rig = rig(&RigOptions {
        limits: Limits {
            max_controllers: 2,
            ..Limits::default()
        },
        ..RigOptions::default()
    });
    let c1 = connect(&rig, 1);
    let c2 = connect(&rig, 2);
    let (status, _) = refused(connect_with(&rig, 3, options(3)));
    assert_eq!(
        status.code,
        StatusCode::CONNECT_CONTROLLER_BUSY,
        "third controller"
    );
    assert_eq!(controllers(&rig), 2);
    // A discovery controller counts too while it lives.
    let d = raidline_initiator::Controller::connect(
        rig.net.device("disc3"),
        rig.target.local_addrs()[0],
        raidline_initiator::ControllerOptions::discovery(host(3)),
    );
    assert!(
        d.is_err(),
        "a discovery controller over the limit was admitted"
    );
    c1.shutdown().unwrap();
    // The freed slot is usable at once (within the time the target takes to reap it).
    assert!(
        eventually(std::time::Duration::from_secs(3), || controllers(&rig) == 1),
        "shut-down controller still counted"
    );
    let c3 = connect(&rig, 3);
    assert_ne!(c3.cntlid(), c2.cntlid());
    c3.shutdown().unwrap();
    c2.shutdown().unwrap();
}
