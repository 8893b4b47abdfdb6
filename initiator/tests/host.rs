//! The whole host path against the scripted responder (tests/common) over the in-memory fabric:
//! bring-up exactly as Linux does it, I/O with keyed SGLs and in-capsule data, typed NVMe
//! statuses, CM rejects, timeouts, disconnects, discovery with a moving generation counter,
//! keep-alive, AER, and a short perf run.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Script, BLOCK, CNTLID, SUBNQN};
use raidline_fabric::mem::MemFabric;
use raidline_initiator::controller::{Controller, ControllerOptions};
use raidline_initiator::discovery::discover;
use raidline_initiator::io::{self, IoOp};
use raidline_initiator::pattern;
use raidline_initiator::perf::{run_worker, Live, PerfConfig};
use raidline_initiator::{Error, HostIdentity, Lba, Nsid};
use raidline_proto::aen::{AsyncEventType, NoticeEvent};
use raidline_proto::io::DsmRange;
use raidline_proto::rdma_cm::CmRejectStatus;
use raidline_proto::text::Nqn;
use raidline_proto::{Status, StatusCode};

const HOSTID: [u8; 16] = [
    0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00,
];

fn opts() -> ControllerOptions {
    let mut o = ControllerOptions::new(HostIdentity::from_uuid(HOSTID), Nqn::new(SUBNQN).unwrap());
    o.kato = Duration::ZERO;
    o.admin_timeout = Duration::from_secs(3);
    o.io_timeout = Duration::from_secs(3);
    o.io_depth = 16;
    o.max_io_bytes = 16 * 1024;
    o
}

fn connect(r: &common::Responder, o: ControllerOptions) -> Controller<MemFabric> {
    Controller::connect(r.host.clone(), r.addr, o).expect("connect")
}

#[test]
fn admin_bring_up_follows_the_linux_sequence() {
    let r = common::start(Script::default());
    let mut o = opts();
    o.kato = Duration::from_secs(5);
    o.io_queues = 0;
    let c = connect(&r, o);
    assert_eq!(c.cntlid(), CNTLID);
    assert_eq!(c.identity().sn, "RESPONDER0001");
    assert_eq!(c.version().minor, 3);
    let cm = r.seen.cm_requests.lock().unwrap().clone();
    assert_eq!(
        (cm[0].qid, cm[0].hrqsize, cm[0].hsqsize, cm[0].cntlid),
        (0, 32, 31, 0)
    );
    let connects = r.seen.connects.lock().unwrap().clone();
    let (cmd, data) = &connects[0];
    assert_eq!(
        (cmd.qid, cmd.sqsize, cmd.kato, cmd.recfmt),
        (0, 31, 5000, 0)
    );
    assert!(matches!(
        cmd.sgl,
        raidline_proto::SglDescriptor::Keyed { length: 1024, .. }
    ));
    assert_eq!(data.cntlid, 0xFFFF);
    assert_eq!(data.hostid, HOSTID);
    assert_eq!(data.subnqn.as_str(), SUBNQN);
    assert!(data
        .hostnqn
        .as_str()
        .starts_with("nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c"));
    // CC: EN, IOSQES 6, IOCQES 4, NVM command set, 4 KiB pages.
    assert_eq!(r.seen.cc_writes.lock().unwrap()[0], 0x0046_0001);
    // An AER is posted (the responder's thread sees it shortly) and the supported events
    // enabled.
    let end = Instant::now() + Duration::from_secs(2);
    while r.seen.aers.load(Ordering::Relaxed) == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(r.seen.aers.load(Ordering::Relaxed), 1);
    assert!(r.seen.features.lock().unwrap().contains(&(0x0B, 1 << 8)));
    c.shutdown().unwrap();
    let cc = r.seen.cc_writes.lock().unwrap().clone();
    assert_eq!(cc.last().map(|v| (v >> 14) & 3), Some(1), "CC.SHN normal");
}

#[test]
fn io_queues_connect_with_the_admin_cntlid_and_move_data_both_ways() {
    let r = common::start(Script {
        in_capsule: 4096,
        ..Script::default()
    });
    let mut o = opts();
    o.io_queues = 4;
    let mut c = connect(&r, o);
    assert_eq!(c.io.len(), 2, "the responder grants two queues");
    assert_eq!(c.in_capsule_max(), 4096);
    let cm = r.seen.cm_requests.lock().unwrap().clone();
    for (i, q) in cm[1..].iter().enumerate() {
        assert_eq!(
            (q.qid, q.hrqsize, q.hsqsize, q.cntlid),
            (i as u16 + 1, 16, 15, CNTLID)
        );
    }
    let connects = r.seen.connects.lock().unwrap().clone();
    assert_eq!(
        (connects[1].0.qid, connects[1].0.sqsize, connects[1].0.kato),
        (1, 15, 0)
    );
    assert_eq!(connects[1].1.cntlid, CNTLID);
    let nsids = c.active_namespaces().unwrap();
    assert_eq!(nsids, vec![Nsid(1)]);
    let ns = c.namespace(Nsid(1)).unwrap();
    assert_eq!((ns.block_size, ns.blocks), (512, 2048));

    // 100 KiB spread over 16 KiB commands: several in flight, keyed (too big for the capsule).
    let mut buf = vec![0u8; 200 * BLOCK];
    pattern::fill(42, 10, BLOCK, &mut buf);
    let Controller { admin, io: qs, .. } = &mut c;
    io::transfer(&mut qs[0], IoOp::Write, &ns, Lba(10), &mut buf, &mut || {
        admin.service()
    })
    .unwrap();
    assert!(r.seen.keyed_writes.load(Ordering::Relaxed) >= 6);
    let disk = r.disk.lock().unwrap()[10 * BLOCK..210 * BLOCK].to_vec();
    assert_eq!(disk, buf);
    let mut back = vec![0u8; 200 * BLOCK];
    io::transfer(&mut qs[1], IoOp::Read, &ns, Lba(10), &mut back, &mut || {
        admin.service()
    })
    .unwrap();
    assert!(pattern::mismatches(42, 10, BLOCK, &back).is_empty());

    // A small write goes in the capsule.
    let before = r.seen.in_capsule_writes.load(Ordering::Relaxed);
    let mut small = vec![0xA5u8; 4 * BLOCK];
    io::transfer(
        &mut qs[0],
        IoOp::Write,
        &ns,
        Lba(0),
        &mut small,
        &mut || admin.service(),
    )
    .unwrap();
    assert_eq!(r.seen.in_capsule_writes.load(Ordering::Relaxed), before + 1);
    assert_eq!(r.disk.lock().unwrap()[..4 * BLOCK], small[..]);

    // Flush, Write Zeroes, Dataset Management, and the controller's own read/write helpers.
    c.flush(0, Nsid(1)).unwrap();
    c.write_zeroes(1, &ns, Lba(10), 8, false).unwrap();
    assert!(r.disk.lock().unwrap()[10 * BLOCK..18 * BLOCK]
        .iter()
        .all(|&b| b == 0));
    let ranges = [
        DsmRange {
            attributes: 0,
            nlb: 4,
            slba: 100,
        },
        DsmRange {
            attributes: 0,
            nlb: 2,
            slba: 150,
        },
    ];
    c.dataset_management(1, Nsid(1), &ranges, true).unwrap();
    assert_eq!(r.seen.dsm_ranges.lock().unwrap().clone(), ranges.to_vec());
    assert!(r.disk.lock().unwrap()[100 * BLOCK..104 * BLOCK]
        .iter()
        .all(|&b| b == 0));
    let data = vec![0x3Cu8; 3 * BLOCK];
    c.write(1, &ns, Lba(300), &data).unwrap();
    let mut back = vec![0u8; 3 * BLOCK];
    c.read(0, &ns, Lba(300), &mut back).unwrap();
    assert_eq!(back, data);
    assert!(matches!(
        c.read(2, &ns, Lba(0), &mut back),
        Err(Error::InvalidArgument(_))
    ));
    let Controller { io: qs, .. } = &mut c;

    // Out of the namespace: refused before anything is sent.
    let mut one = vec![0u8; BLOCK];
    let e = io::transfer(
        &mut qs[0],
        IoOp::Read,
        &ns,
        Lba(2048),
        &mut one,
        &mut || Ok(()),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    c.shutdown().unwrap();
}

#[test]
fn nvme_statuses_come_back_typed() {
    let r = common::start(Script {
        fail: Some((0x02, Status::new(StatusCode::UNRECOVERED_READ_ERROR).dnr())),
        ..Script::default()
    });
    let mut c = connect(&r, opts());
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut buf = vec![0u8; BLOCK];
    let Controller { admin, io: qs, .. } = &mut c;
    let e = io::transfer(&mut qs[0], IoOp::Read, &ns, Lba(0), &mut buf, &mut || {
        admin.service()
    })
    .unwrap_err();
    let st = e.status().expect("an NVMe status");
    assert_eq!(st.code, StatusCode::UNRECOVERED_READ_ERROR);
    assert!(st.dnr);
    assert!(!e.is_fatal());
    assert!(
        matches!(
            e,
            Error::Nvme {
                command: "Read",
                ..
            }
        ),
        "{e}"
    );
    // The queue still works after a status.
    io::transfer(&mut qs[0], IoOp::Write, &ns, Lba(0), &mut buf, &mut || {
        admin.service()
    })
    .unwrap();
    // Unknown namespace: Identify answers Invalid Namespace.
    let e = c.namespace(Nsid(7)).unwrap_err();
    assert_eq!(
        e.status().map(|s| s.code),
        Some(StatusCode::INVALID_NAMESPACE)
    );
}

#[test]
fn connect_to_an_unknown_subsystem_reports_invalid_parameters() {
    let r = common::start(Script::default());
    let mut o = opts();
    o.subnqn = Nqn::new("nqn.2026-11.io.raidline:nope").unwrap();
    let e = Controller::connect(r.host.clone(), r.addr, o)
        .err()
        .unwrap();
    match e {
        Error::Nvme {
            command,
            status,
            dw0,
            ..
        } => {
            assert_eq!(command, "Connect");
            assert_eq!(status.code, StatusCode::CONNECT_INVALID_PARAMETERS);
            assert_eq!(dw0, (1 << 16) | 256, "IATTR data, IPO subnqn");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn cm_reject_and_no_listener_are_reported() {
    let r = common::start(Script {
        reject_cm: Some(CmRejectStatus::NO_RESOURCES),
        ..Script::default()
    });
    let e = Controller::connect(r.host.clone(), r.addr, opts())
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            Error::Rejected {
                status: Some(CmRejectStatus::NO_RESOURCES),
                reason: 28,
                ..
            }
        ),
        "{e}"
    );
    let nowhere = "10.0.0.9:4420".parse().unwrap();
    let e = Controller::connect(r.host.clone(), nowhere, opts())
        .err()
        .unwrap();
    assert!(matches!(e, Error::Rejected { status: None, .. }), "{e}");
}

#[test]
fn a_silent_controller_times_out_instead_of_hanging() {
    let r = common::start(Script {
        mute_opcode: Some(0x06), // Identify
        ..Script::default()
    });
    let mut o = opts();
    o.admin_timeout = Duration::from_millis(300);
    let t = Instant::now();
    let e = Controller::connect(r.host.clone(), r.addr, o)
        .err()
        .unwrap();
    let took = t.elapsed();
    assert!(
        matches!(
            e,
            Error::Timeout {
                command: "Identify",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // An I/O command that is never answered fails the queue within the I/O timeout.
    let r = common::start(Script {
        mute_opcode: Some(0x01), // Write
        ..Script::default()
    });
    let mut o = opts();
    o.io_timeout = Duration::from_millis(200);
    let mut c = connect(&r, o);
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut buf = vec![1u8; 4 * BLOCK];
    let Controller { admin, io: qs, .. } = &mut c;
    let t = Instant::now();
    let e = io::transfer(&mut qs[0], IoOp::Write, &ns, Lba(0), &mut buf, &mut || {
        admin.service()
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Timeout {
                command: "Write",
                ..
            }
        ),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    // The queue is down now and says so at once.
    let e = io::transfer(
        &mut qs[0],
        IoOp::Read,
        &ns,
        Lba(0),
        &mut buf,
        &mut || Ok(()),
    )
    .unwrap_err();
    assert!(matches!(e, Error::QueueDown { .. }), "{e}");
}

#[test]
fn a_disconnect_fails_commands_in_flight() {
    let r = common::start(Script {
        disconnect_after_io: Some(2),
        ..Script::default()
    });
    let mut o = opts();
    o.io_timeout = Duration::from_secs(10);
    let mut c = connect(&r, o);
    let ns = c.namespace(Nsid(1)).unwrap();
    // 100 KiB in 16 KiB commands: the third one is never answered, the link goes down.
    let mut buf = vec![0u8; 200 * BLOCK];
    let Controller { admin, io: qs, .. } = &mut c;
    let t = Instant::now();
    let e = io::transfer(&mut qs[0], IoOp::Read, &ns, Lba(0), &mut buf, &mut || {
        admin.service()
    })
    .unwrap_err();
    assert!(
        matches!(e, Error::Disconnected { .. } | Error::Transport { .. }),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "long before the 10 s timeout"
    );
}

#[test]
fn discovery_rereads_when_the_generation_changes() {
    let r = common::start(Script {
        discovery: true,
        // The full-page read (second read) sees a new generation.
        bump_genctr_after: Some(2),
        ..Script::default()
    });
    let o = ControllerOptions::discovery(HostIdentity::from_uuid(HOSTID));
    let log = discover(r.host.clone(), r.addr, o).unwrap();
    assert_eq!(log.genctr, 2);
    assert_eq!(log.entries.len(), 2);
    assert_eq!(log.entries[0].subnqn.as_str(), SUBNQN);
    assert_eq!(log.entries[0].traddr, "10.0.0.1");
    assert!(
        r.seen.log_reads.load(Ordering::Relaxed) >= 6,
        "header, page, header, again"
    );
    let (cmd, data) = r.seen.connects.lock().unwrap()[0].clone();
    assert_eq!(cmd.kato, 0);
    assert!(data.subnqn.is_discovery());
    assert_eq!(r.seen.aers.load(Ordering::Relaxed), 0);
}

#[test]
fn keep_alive_goes_out_every_half_kato_and_aer_is_reposted() {
    let r = common::start(Script::default());
    let mut o = opts();
    o.kato = Duration::from_millis(100);
    let mut c = connect(&r, o);
    let end = Instant::now() + Duration::from_millis(400);
    while Instant::now() < end {
        c.service().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let kas = r.seen.keep_alives.load(Ordering::Relaxed);
    assert!(
        (3..=10).contains(&kas),
        "{kas} keep-alives in 400 ms at 50 ms"
    );
    assert!(c.admin.keep_alives() >= 3);

    // A namespace-attribute notice: reported, and the AER posted again.
    *r.aen.lock().unwrap() = Some(0x0004_0002);
    let end = Instant::now() + Duration::from_secs(2);
    let mut events = Vec::new();
    while events.is_empty() && Instant::now() < end {
        c.service().unwrap();
        events = c.admin.take_events();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(events.len(), 1);
    // The Changed Namespace List was read with RAE clear (unmasking the event), as Linux does.
    assert_eq!(
        c.take_changed_namespaces(),
        vec![raidline_proto::log::ChangedNsList::Changed(vec![2])]
    );
    assert_eq!(
        r.seen.changed_log_reads.lock().unwrap().clone(),
        vec![(0xFFFF_FFFF, false)]
    );
    assert_eq!(events[0].event_type, AsyncEventType::NOTICE);
    assert_eq!(
        events[0].as_notice(),
        Some(NoticeEvent::NS_ATTRIBUTE_CHANGED)
    );
    let end = Instant::now() + Duration::from_secs(2);
    while r.seen.aers.load(Ordering::Relaxed) < 2 && Instant::now() < end {
        c.service().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(r.seen.aers.load(Ordering::Relaxed), 2);

    // A malformed event (reserved type 3) is counted and dropped; the AER is posted again.
    *r.aen.lock().unwrap() = Some(0x0000_0003);
    let end = Instant::now() + Duration::from_secs(2);
    while r.seen.aers.load(Ordering::Relaxed) < 3 && Instant::now() < end {
        c.service().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(r.seen.aers.load(Ordering::Relaxed), 3);
    assert_eq!(c.admin.malformed_events(), 1);
    assert!(c.admin.take_events().is_empty());
}

#[test]
fn perf_keeps_the_queue_full_and_counts_every_io() {
    let r = common::start(Script {
        in_capsule: 4096,
        ..Script::default()
    });
    let mut o = opts();
    o.io_queues = 2;
    let mut c = connect(&r, o);
    let ns = c.namespace(Nsid(1)).unwrap();
    let cfg = PerfConfig {
        queue_depth: 8,
        block_size: 4096,
        read_percent: 50,
        random: true,
        duration: Duration::from_millis(300),
        range_blocks: 0,
        seed: 1,
    };
    let stop = AtomicBool::new(false);
    let live = Live::default();
    let mut qs = c.take_io_queues();
    let n = qs.len();
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(i, q)| {
                let (ns, cfg, stop, live) = (&ns, &cfg, &stop, &live);
                s.spawn(move || run_worker(q, ns, cfg, i, n, stop, live))
            })
            .collect();
        let end = Instant::now() + Duration::from_millis(350);
        while Instant::now() < end {
            c.service().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    let mut total = raidline_initiator::perf::PerfResult::default();
    for r in &results {
        assert!(r.ios() > 0);
        total.merge(r);
    }
    assert_eq!(total.errors, 0, "{:?}", total.first_error);
    assert!(total.reads > 0 && total.writes > 0);
    assert_eq!(total.ios(), total.latency.count());
    assert_eq!(total.ios(), live.ios.load(Ordering::Relaxed));
    assert_eq!(total.bytes, total.ios() * 4096);
    assert!(total.latency.percentile(50.0) <= total.latency.percentile(99.9));
    assert_eq!(r.seen.io_commands.load(Ordering::Relaxed), total.ios());
}

/// Issue 20 item 4: read, write and verify report their progress (phase, bytes done, bytes in
/// all) after every step, ending at the whole; the CLI draws it as bars on a terminal.
#[test]
fn long_commands_report_progress() {
    use raidline_initiator::commands;
    let r = common::start(Script::default());
    let mut o = opts();
    o.io_queues = 1;
    let mut c = connect(&r, o);
    let mut seen: Vec<(&'static str, u64, u64)> = Vec::new();
    let data = vec![0x5Au8; 300 * BLOCK];
    commands::write_with(&mut c, Nsid(1), Lba(0), &data, &mut |p, d, t| {
        seen.push((p, d, t))
    })
    .unwrap();
    assert_eq!(
        seen,
        vec![("write", 300 * BLOCK as u64, 300 * BLOCK as u64)]
    );
    seen.clear();
    let back = commands::read_with(
        &mut c,
        Nsid(1),
        Lba(0),
        300 * BLOCK as u64,
        &mut |p, d, t| seen.push((p, d, t)),
    )
    .unwrap();
    assert!(back == data);
    assert_eq!(seen, vec![("read", 300 * BLOCK as u64, 300 * BLOCK as u64)]);
    seen.clear();
    let rep = commands::verify_with(&mut c, Nsid(1), Lba(0), 0, 9, &mut |p, d, t| {
        seen.push((p, d, t))
    })
    .unwrap();
    assert!(rep.mismatches.is_empty());
    let whole = 2048 * BLOCK as u64;
    assert_eq!(seen.first(), Some(&("write", whole, whole)));
    assert_eq!(seen.last(), Some(&("read", whole, whole)));
    c.shutdown().unwrap();
}
