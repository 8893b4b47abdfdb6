//! The host under injected transport faults (fabric's seeded `Faulty` wrapper around the host's
//! device): failed posts, broken QPs, lost and delayed completions. Whatever happens, every call
//! returns — an error or a correct result — within its deadlines, and data that was reported
//! written reads back unchanged.

mod common;

use std::time::{Duration, Instant};

use common::{Script, BLOCK, SUBNQN};
use raidline_fabric::fault::{FaultConfig, Faulty};
use raidline_initiator::controller::{Controller, ControllerOptions};
use raidline_initiator::{Error, HostIdentity, Lba, Nsid};
use raidline_proto::text::Nqn;

fn opts() -> ControllerOptions {
    let mut o = ControllerOptions::new(HostIdentity::from_uuid([3; 16]), Nqn::new(SUBNQN).unwrap());
    o.kato = Duration::from_millis(500);
    o.admin_timeout = Duration::from_millis(250);
    o.io_timeout = Duration::from_millis(250);
    o.io_depth = 8;
    o.max_io_bytes = 8192;
    o
}

#[test]
fn random_faults_end_in_errors_or_correct_data_never_in_a_hang() {
    let (mut connected, mut failed_ops, mut ok_ops) = (0, 0, 0);
    for seed in 1..=16u64 {
        let r = common::start(Script::default());
        let fab = Faulty::new(
            r.host.clone(),
            FaultConfig {
                seed,
                fail_post: 4,
                break_qp: 2,
                drop_completion: 3,
                delay_completion: 30,
                delay_polls: 5,
                ..FaultConfig::default()
            },
        );
        let control = fab.control();
        let t = Instant::now();
        let mut c = match Controller::connect(fab, r.addr, opts()) {
            Ok(c) => c,
            Err(e) => {
                assert!(e.is_fatal() || matches!(e, Error::Nvme { .. }), "{e}");
                assert!(
                    t.elapsed() < Duration::from_secs(3),
                    "connect took {:?}",
                    t.elapsed()
                );
                continue;
            }
        };
        connected += 1;
        // Harsher during I/O than during the connect (whose many receive posts would otherwise
        // take most of the faults).
        control.set_config(FaultConfig {
            seed,
            fail_post: 15,
            break_qp: 5,
            drop_completion: 10,
            delay_completion: 50,
            delay_polls: 5,
            ..FaultConfig::default()
        });
        let Ok(ns) = c.namespace(Nsid(1)) else {
            continue;
        };
        for round in 0..6u64 {
            let t = Instant::now();
            let lba = Lba(round * 64);
            let data: Vec<u8> = (0..32 * BLOCK)
                .map(|i| (i as u64 * seed + round) as u8)
                .collect();
            let w = c.write(0, &ns, lba, &data);
            let mut back = vec![0u8; data.len()];
            let rd = w.as_ref().ok().map(|_| c.read(0, &ns, lba, &mut back));
            // Both calls are bounded by their deadlines (plus the responder's pace).
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "seed {seed}: {:?}",
                t.elapsed()
            );
            match (w, rd) {
                (Ok(()), Some(Ok(()))) => {
                    assert_eq!(back, data, "seed {seed} round {round}: data differs");
                    assert_eq!(
                        r.disk.lock().unwrap()[lba.0 as usize * BLOCK..][..data.len()],
                        data[..]
                    );
                    ok_ops += 1;
                }
                (Err(e), _) | (_, Some(Err(e))) => {
                    assert!(e.is_fatal() || matches!(e, Error::Nvme { .. }), "{e}");
                    failed_ops += 1;
                    break;
                }
                (Ok(()), None) => unreachable!(),
            }
        }
        // The controller's own teardown is bounded too, whatever state the faults left.
        let t = Instant::now();
        let _ = c.shutdown();
        assert!(t.elapsed() < Duration::from_secs(3));
        let n = control.counters();
        assert!(n.posts_failed + n.qps_broken + n.completions_dropped + n.delays > 0 || ok_ops > 0);
    }
    eprintln!("faults: {connected}/16 connected, {ok_ops} operations ok, {failed_ops} failed");
    // The rates are low enough that some runs get through and high enough that some do not.
    assert!(connected > 0, "no run connected");
    assert!(ok_ops > 0, "no operation succeeded");
    assert!(
        failed_ops > 0,
        "no operation failed: the faults did not bite"
    );
}

#[test]
fn a_broken_qp_fails_the_commands_at_once() {
    let r = common::start(Script::default());
    let fab = Faulty::new(r.host.clone(), FaultConfig::default());
    let control = fab.control();
    let mut o = opts();
    o.io_timeout = Duration::from_secs(10);
    let mut c = Controller::connect(fab, r.addr, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    control.break_next_posts(1);
    let t = Instant::now();
    let mut buf = vec![0u8; 4 * BLOCK];
    let e = c.read(0, &ns, Lba(0), &mut buf).unwrap_err();
    assert!(
        matches!(e, Error::Transport { .. } | Error::Post { .. }),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "not the 10 s timeout: {:?}",
        t.elapsed()
    );
    // A failed post hands the command back untouched; the queue stays usable.
    let mut c2 = {
        let fab = Faulty::new(r.host.clone(), FaultConfig::default());
        let control = fab.control();
        let c2 = Controller::connect(fab, r.addr, opts()).unwrap();
        control.fail_next_posts(1);
        c2
    };
    let e = c2.read(0, &ns, Lba(0), &mut buf).unwrap_err();
    assert!(matches!(e, Error::Post { .. }), "{e}");
    c2.read(0, &ns, Lba(0), &mut buf).unwrap();
}
