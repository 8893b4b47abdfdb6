//! End-to-end discovery: a discovery controller identifies as one, its log lists the current
//! discovery subsystem and exactly one NVMe subsystem entry with the port's RDMA address,
//! service id and NQN, filtered by the host allow-list; it offers no I/O queues.

mod common;

use std::collections::BTreeSet;

use common::*;
use raidline_fabric::mem::MemFabric;
use raidline_initiator::discovery::read_discovery_log;
use raidline_initiator::{Controller, ControllerOptions};
use raidline_proto::fabrics::{ConnectData, CNTLID_DYNAMIC};
use raidline_proto::identify::ControllerType;
use raidline_proto::log::{AddressFamily, DiscoveryEntry, DiscoverySubtype, TransportType, Tsas};
use raidline_proto::text::Nqn;
use raidline_proto::{Status, StatusCode};
use raidline_target::subsystem::HostAccess;

fn discover(rig: &Rig, h: u8) -> (Controller<MemFabric>, Vec<DiscoveryEntry>) {
    let mut c = Controller::connect(
        rig.net.device(&format!("disc{h}")),
        rig.target.local_addrs()[0],
        ControllerOptions::discovery(host(h)),
    )
    .unwrap();
    let log = read_discovery_log(&mut c).unwrap();
    (c, log.entries)
}

fn check_port(e: &DiscoveryEntry) {
    assert_eq!(e.trtype, TransportType::RDMA);
    assert_eq!(e.adrfam, AddressFamily::IPV4);
    assert_eq!(e.traddr.trim_end(), "10.0.0.1");
    assert_eq!(e.trsvcid.trim_end(), "4420");
    assert_eq!(e.portid, 1);
    assert_eq!(e.cntlid, CNTLID_DYNAMIC);
    assert_eq!(e.tsas, Tsas::RDMA_CM);
}

#[test]
fn discovery_log_lists_the_subsystem() {
    let rig = default_rig();
    let (mut c, entries) = discover(&rig, 1);
    assert!(c.is_discovery());
    assert_eq!(c.identity().cntrltype, ControllerType::DISCOVERY);
    let nvme: Vec<&DiscoveryEntry> = entries
        .iter()
        .filter(|e| e.subtype == DiscoverySubtype::NVME)
        .collect();
    assert_eq!(nvme.len(), 1, "{entries:?}");
    assert_eq!(nvme[0].subnqn.as_str(), SUBNQN);
    check_port(nvme[0]);
    assert!(
        nvme[0].asqsz >= 32,
        "admin queue of 32 must fit: asqsz {}",
        nvme[0].asqsz
    );
    let current: Vec<&DiscoveryEntry> = entries
        .iter()
        .filter(|e| e.subtype == DiscoverySubtype::CURRENT_DISCOVERY)
        .collect();
    assert_eq!(current.len(), 1);
    assert!(current[0].subnqn.is_discovery());
    check_port(current[0]);
    assert_eq!(entries.len(), 2);

    // A discovery controller has no I/O queues.
    let mut q = RawQueue::connect(
        &rig.net,
        "disc1-raw",
        rig.target.local_addrs()[0],
        1,
        8,
        c.cntlid(),
    )
    .unwrap();
    let h = host(1);
    let cqe = q
        .fabrics_connect(
            0,
            &ConnectData {
                hostid: h.hostid,
                cntlid: c.cntlid(),
                subnqn: Nqn::discovery(),
                hostnqn: h.hostnqn,
            },
        )
        .unwrap();
    assert_eq!(
        cqe.status,
        Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr()
    );
    // The log is stable across reads and the controller keeps answering.
    let again = read_discovery_log(&mut c).unwrap();
    assert_eq!(again.entries, entries);
    c.shutdown().unwrap();
}

#[test]
fn discovery_log_follows_the_allow_list() {
    let allowed: BTreeSet<Nqn> = [host(1).hostnqn].into_iter().collect();
    let rig = rig(&RigOptions {
        hosts: HostAccess::Only(allowed),
        ..RigOptions::default()
    });
    let (c1, e1) = discover(&rig, 1);
    let (c2, e2) = discover(&rig, 2);
    let nvme = |es: &[DiscoveryEntry]| {
        es.iter()
            .filter(|e| e.subtype == DiscoverySubtype::NVME)
            .map(|e| e.subnqn.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(nvme(&e1), vec![SUBNQN.to_string()]);
    assert!(nvme(&e2).is_empty(), "host 2 may not reach {:?}", nvme(&e2));
    assert_eq!(e2.len(), 1, "only the current discovery entry");
    c1.shutdown().unwrap();
    c2.shutdown().unwrap();
}

#[test]
fn two_ports_each_listed_and_each_serving() {
    use raidline_fabric::mem::MemNetwork;
    use raidline_target::daemon::Target;
    use raidline_target::subsystem::Limits;
    let disks = mem_disks(4, (8 << 20) + (1 << 20));
    let (members, _) = members_of(&disks, false);
    let array = create_array(members);
    let mut spec = spec_for(
        "10.0.0.1:4420".parse().unwrap(),
        array,
        HostAccess::Any,
        Limits::default(),
    );
    spec.listen.push("10.0.1.1:4421".parse().unwrap());
    let net = MemNetwork::new();
    let target = Target::start(net.device("target0"), spec).unwrap();
    assert_eq!(target.local_addrs().len(), 2);
    let mut d = Controller::connect(
        net.device("disc"),
        target.local_addrs()[1],
        ControllerOptions::discovery(host(1)),
    )
    .unwrap();
    let log = read_discovery_log(&mut d).unwrap();
    let mut nvme: Vec<(u16, String, String)> = log
        .entries
        .iter()
        .filter(|e| e.subtype == DiscoverySubtype::NVME)
        .map(|e| {
            assert_eq!(e.subnqn.as_str(), SUBNQN);
            (
                e.portid,
                e.traddr.trim_end().to_string(),
                e.trsvcid.trim_end().to_string(),
            )
        })
        .collect();
    nvme.sort();
    assert_eq!(
        nvme,
        vec![
            (1, "10.0.0.1".to_string(), "4420".to_string()),
            (2, "10.0.1.1".to_string(), "4421".to_string())
        ]
    );
    d.shutdown().unwrap();
    // Both ports serve the namespace; a write through one is read through the other.
    let mut a = Controller::connect(net.device("h1"), target.local_addrs()[0], options(1)).unwrap();
    let mut b = Controller::connect(net.device("h2"), target.local_addrs()[1], options(2)).unwrap();
    let ns = a.namespace(raidline_initiator::Nsid(1)).unwrap();
    let data = pattern(3, 8 * 4096);
    a.write(0, &ns, raidline_initiator::Lba(9), &data).unwrap();
    let mut back = vec![0u8; data.len()];
    b.read(0, &ns, raidline_initiator::Lba(9), &mut back)
        .unwrap();
    assert!(back == data);
    a.shutdown().unwrap();
    b.shutdown().unwrap();
    assert!(target.shutdown().is_empty());
}
