//! The CLI's commands (library half) against the scripted responder: discover and identify
//! text, read/write round trip, verify (clean and with a lying disk), perf summary.

mod common;

use std::time::Duration;

use common::{Script, BLOCK, SUBNQN};
use raidline_initiator::commands::{self, Target};
use raidline_initiator::perf::PerfConfig;
use raidline_initiator::{HostIdentity, Lba, Nsid};
use raidline_proto::text::Nqn;

fn target(r: &common::Responder) -> Target {
    Target {
        addr: r.addr,
        host: HostIdentity::from_uuid([7; 16]),
        admin_timeout: Duration::from_secs(3),
        io_timeout: Duration::from_secs(3),
        kato: Duration::from_secs(5),
    }
}

fn nqn() -> Nqn {
    Nqn::new(SUBNQN).unwrap()
}

#[test]
fn discover_and_identify_print_what_the_controller_said() {
    let r = common::start(Script {
        discovery: true,
        ..Script::default()
    });
    let log = commands::discover(r.host.clone(), &target(&r)).unwrap();
    let text = commands::format_discovery(&log);
    assert!(
        text.contains("Discovery Log Number of Records 1, Generation counter 1"),
        "{text}"
    );
    assert!(text.contains(&format!("subnqn:  {SUBNQN}")), "{text}");
    assert!(text.contains("trtype:  rdma"), "{text}");
    assert!(text.contains("traddr:  10.0.0.1"), "{text}");

    let r = common::start(Script {
        in_capsule: 8192,
        mdts: 5,
        ..Script::default()
    });
    let t = target(&r);
    let text = commands::with_controller(
        r.host.clone(),
        t.addr,
        t.options(nqn(), 1, 8, 65536),
        commands::identify,
    )
    .unwrap();
    assert!(text.contains("sn        : RESPONDER0001"), "{text}");
    assert!(text.contains("mdts      : 5 (131072 bytes)"), "{text}");
    assert!(text.contains("in-capsule data up to 8192 bytes"), "{text}");
    assert!(
        text.contains("namespace 1: 2048 blocks of 512 bytes (1 MiB)"),
        "{text}"
    );
}

#[test]
fn write_then_read_round_trips_and_pads_the_last_block() {
    let r = common::start(Script::default());
    let t = target(&r);
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 8192), |c| {
        commands::write(c, Nsid(1), Lba(5), &data)
    })
    .unwrap();
    assert_eq!(
        r.disk.lock().unwrap()[5 * BLOCK..5 * BLOCK + 3000],
        data[..]
    );
    assert!(r.disk.lock().unwrap()[5 * BLOCK + 3000..11 * BLOCK]
        .iter()
        .all(|&b| b == 0));
    let back =
        commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 8192), |c| {
            commands::read(c, Nsid(1), Lba(5), 3000)
        })
        .unwrap();
    assert_eq!(back, data);
}

#[test]
fn verify_passes_on_a_good_disk_and_names_the_bad_lba() {
    let r = common::start(Script::default());
    let t = target(&r);
    let rep =
        commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 16384), |c| {
            commands::verify(c, Nsid(1), Lba(0), 0, 99)
        })
        .unwrap();
    assert_eq!(rep.blocks, 2048);
    assert!(rep.mismatches.is_empty());

    let r = common::start(Script {
        corrupt_lba: Some(1234),
        ..Script::default()
    });
    let t = target(&r);
    let rep =
        commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 16384), |c| {
            commands::verify(c, Nsid(1), Lba(1000), 500, 3)
        })
        .unwrap();
    assert_eq!(rep.blocks, 500);
    assert_eq!(rep.mismatches, vec![1234]);
    let e = commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 16384), |c| {
        commands::verify(c, Nsid(1), Lba(2000), 100, 3)
    })
    .unwrap_err();
    assert!(
        matches!(e, raidline_initiator::Error::InvalidArgument(_)),
        "{e}"
    );
}

#[test]
fn perf_command_reports_throughput_and_latency() {
    let r = common::start(Script::default());
    let t = target(&r);
    let cfg = PerfConfig {
        queue_depth: 4,
        block_size: 4096,
        read_percent: 100,
        random: false,
        duration: Duration::from_millis(200),
        range_blocks: 64,
        seed: 5,
    };
    let mut calls = 0;
    let res =
        commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 2, 5, 4096), |c| {
            commands::perf(c, Nsid(1), &cfg, &mut |_, _| calls += 1)
        })
        .unwrap();
    assert!(res.reads > 0 && res.writes == 0 && res.errors == 0);
    let text = commands::format_perf(&cfg, 2, &res, Some(Duration::from_millis(100)));
    assert!(
        text.contains("2 queue(s) x QD 4, 4096 bytes, 100% reads, sequential"),
        "{text}"
    );
    assert!(text.contains("latency us: avg"), "{text}");
    assert!(text.contains("us per I/O"), "{text}");
    // Too big for the transfer limit: refused before the run.
    let big = PerfConfig {
        block_size: 65536,
        ..cfg
    };
    let e = commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 5, 4096), |c| {
        commands::perf(c, Nsid(1), &big, &mut |_, _| {})
    })
    .unwrap_err();
    assert!(
        matches!(e, raidline_initiator::Error::InvalidArgument(_)),
        "{e}"
    );
    // A refused run leaves the queues with the controller.
    let n = commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 5, 4096), |c| {
        assert!(commands::perf(c, Nsid(1), &big, &mut |_, _| {}).is_err());
        Ok(c.io.len())
    })
    .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn write_zeroes_trim_and_event_text() {
    let r = common::start(Script::default());
    r.disk.lock().unwrap().fill(0xEE);
    let t = target(&r);
    commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 8192), |c| {
        commands::write_zeroes(c, Nsid(1), Lba(10), 20, false)?;
        commands::trim(c, Nsid(1), Lba(100), 5)
    })
    .unwrap();
    let disk = r.disk.lock().unwrap().clone();
    assert!(disk[10 * BLOCK..30 * BLOCK].iter().all(|&b| b == 0));
    assert_eq!(disk[30 * BLOCK], 0xEE);
    assert_eq!(disk[9 * BLOCK + 511], 0xEE);
    assert!(disk[100 * BLOCK..105 * BLOCK].iter().all(|&b| b == 0));
    let ranges = r.seen.dsm_ranges.lock().unwrap().clone();
    assert_eq!((ranges[0].slba, ranges[0].nlb), (100, 5));
    let e = commands::with_controller(r.host.clone(), t.addr, t.options(nqn(), 1, 8, 8192), |c| {
        commands::trim(c, Nsid(1), Lba(2040), 9)
    })
    .unwrap_err();
    assert!(
        matches!(e, raidline_initiator::Error::InvalidArgument(_)),
        "{e}"
    );
    let ev = raidline_proto::aen::AsyncEvent::from_dw0(0x0004_0002).unwrap();
    assert_eq!(
        commands::format_event(&ev),
        "async event: notice info 0x00 ns attribute changed (log page 0x04 changed ns list)"
    );
    use raidline_proto::log::ChangedNsList;
    assert_eq!(
        commands::format_changed(&ChangedNsList::Changed(vec![2, 7])),
        "changed namespaces: 2 7"
    );
    assert_eq!(
        commands::format_changed(&ChangedNsList::TooMany),
        "changed namespaces: more than 1024"
    );
}
