//! End-to-end: the target over the in-memory fabric, driven by the user-space initiator.

use std::sync::Arc;
use std::time::Duration;

use raidline_fabric::mem::MemNetwork;
use raidline_initiator::{Controller, ControllerOptions, HostIdentity, Lba, Nsid};
use raidline_proto::text::Nqn;
use raidline_raid::{Array, ArrayConfig, ChunkSize, CpuXor, MemMember, Member};
use raidline_target::daemon::{Backend, NamespaceSpec, SubsystemSpec, Target, TargetSpec};
use raidline_target::subsystem::{HostAccess, Limits, NamespaceInfo, Subsystem};

const SUBNQN: &str = "nqn.2026-11.io.raidline:test";

struct Rig {
    net: MemNetwork,
    target: Target,
    disks: Vec<MemMember>,
}

fn array_rig(members: usize, member_bytes: usize) -> Rig {
    let disks: Vec<MemMember> = (0..members)
        .map(|i| MemMember::new(&format!("d{i}"), member_bytes))
        .collect();
    let arcs: Vec<Arc<dyn Member>> = disks
        .iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect();
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(64 << 10).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Arc::new(Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap());
    let net = MemNetwork::new();
    let target = start(&net, array, HostAccess::Any);
    Rig { net, target, disks }
}

fn start(net: &MemNetwork, array: Arc<Array>, hosts: HostAccess) -> Target {
    let geo = *array.geometry();
    let info = NamespaceInfo {
        nsid: 1,
        block_size: 4096,
        blocks: geo.capacity_blocks(),
        ids: raidline_target::identity::for_array(array.uuid().0, 1),
        preferred_write_blocks: geo.stripe_data_blocks() as u32,
        deallocate: true,
    };
    let mut spec = TargetSpec::new(Limits::default());
    spec.listen = vec!["10.0.0.1:4420".parse().unwrap()];
    spec.pool_small = (64, 128 << 10);
    spec.pool_large = (4, 1 << 20);
    spec.workers_per_namespace = 2;
    spec.subsystems.push(SubsystemSpec {
        subsystem: Subsystem {
            nqn: Nqn::new(SUBNQN).unwrap(),
            serial: raidline_target::identity::serial_for(&array.uuid().0),
            model: "Raidline RAID-5".into(),
            hosts,
            namespaces: vec![],
        },
        namespaces: vec![NamespaceSpec {
            info,
            backend: Backend::Array(array.clone()),
            array: Some("array0".into()),
        }],
    });
    spec.arrays.push(("array0".into(), array, 100 << 20));
    Target::start(net.device("target0"), spec).unwrap()
}

fn host(n: u8) -> HostIdentity {
    HostIdentity::from_uuid([n; 16])
}

fn connect(rig: &Rig, h: u8) -> Controller<raidline_fabric::mem::MemFabric> {
    let mut o = ControllerOptions::new(host(h), Nqn::new(SUBNQN).unwrap());
    o.max_io_bytes = 1 << 20;
    o.admin_timeout = Duration::from_secs(10);
    o.io_timeout = Duration::from_secs(10);
    Controller::connect(
        rig.net.device(&format!("host{h}")),
        rig.target.local_addrs()[0],
        o,
    )
    .unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn write_read_verify_many_sizes_zero_copy() {
    let rig = array_rig(4, (8 << 20) + (1 << 20));
    let mut c = connect(&rig, 1);
    let id = c.identify_controller().unwrap();
    assert_eq!(id.subnqn.as_ref().map(|n| n.as_str()), Some(SUBNQN));
    let ns = c.namespace(Nsid(1)).unwrap();
    assert_eq!(ns.block_size, 4096);
    let sizes = [1usize, 2, 3, 8, 16, 31, 32, 64, 255, 256];
    let mut lba = 0u64;
    for (i, blocks) in sizes.iter().enumerate() {
        let data = pattern(i as u64 + 1, blocks * 4096);
        c.write(0, &ns, Lba(lba), &data).unwrap();
        let mut back = vec![0u8; data.len()];
        c.read(0, &ns, Lba(lba), &mut back).unwrap();
        assert!(back == data, "{blocks} blocks at {lba}");
        lba += *blocks as u64 + 7;
    }
    c.flush(0, Nsid(1)).unwrap();
    let copied = rig
        .target
        .shared()
        .data_path
        .payload_bytes_copied
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(copied, 0);
    c.shutdown().unwrap();
    drop(rig.disks);
    let errs = rig.target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}
