//! End-to-end concurrency: four I/O queues with 32 writes in flight on each at once, eight
//! hosts with two queues each on two pollers, racing overlapping writes from two queues that
//! must leave every block whole and the parity consistent (check-only scrub, then reads with a
//! member failed), and four times more large transfers in flight than the target has large
//! pool buffers.

mod common;

use std::time::Duration;

use common::*;
use raidline_initiator::io::{self as hio, IoOp};
use raidline_initiator::{Lba, Nsid, Tag};

const BS: usize = 4096;

#[test]
fn four_queues_with_32_writes_in_flight_each() {
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 4;
    o.io_depth = 32;
    let mut c = connect_with(&rig, 1, o).unwrap();
    assert_eq!(c.io.len(), 4);
    let ns = c.namespace(Nsid(1)).unwrap();
    {
        let ctrls = rig.target.shared().controllers.lock().unwrap();
        let e = ctrls.get(&c.cntlid()).expect("controller listed");
        let mut qids: Vec<u16> = e.conns.iter().map(|(q, _, _)| *q).collect();
        qids.sort_unstable();
        assert_eq!(qids, vec![0, 1, 2, 3, 4]);
    }
    let mut qs = c.take_io_queues();
    const PER: u64 = 32;
    const BLOCKS: u32 = 8; // 32 KiB: keyed
    let peaks: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(qi, q)| {
                let ns = &ns;
                s.spawn(move || {
                    assert!(
                        q.max_in_flight() >= PER as usize,
                        "depth {}",
                        q.max_in_flight()
                    );
                    let mut tags: Vec<Tag> = Vec::new();
                    for k in 0..PER {
                        let lba = (qi as u64 * PER + k) * u64::from(BLOCKS) + 1;
                        let tag = q.alloc().expect("a free slot");
                        q.write_data(tag, 0, &pattern(lba, BLOCKS as usize * BS))
                            .unwrap();
                        hio::submit_rw(q, tag, IoOp::Write, ns, Lba(lba), BLOCKS).unwrap();
                        tags.push(tag);
                    }
                    // Nothing polled yet: all 32 are outstanding on this queue.
                    let peak = q.in_flight();
                    for t in tags {
                        q.wait(t).unwrap();
                    }
                    peak
                })
            })
            .collect();
        while handles.iter().any(|h| !h.is_finished()) {
            c.service().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(peaks, vec![PER as usize; 4]);
    // Each queue reads back what every queue wrote (pipelined reads).
    let total = 4 * PER * u64::from(BLOCKS);
    let mut all = vec![0u8; total as usize * BS];
    hio::transfer(
        &mut qs[3],
        IoOp::Read,
        &ns,
        Lba(1),
        &mut all,
        &mut || Ok(()),
    )
    .unwrap();
    for k in 0..4 * PER {
        let lba = k * u64::from(BLOCKS) + 1;
        let off = (k * u64::from(BLOCKS)) as usize * BS;
        assert!(
            all[off..off + BLOCKS as usize * BS] == pattern(lba, BLOCKS as usize * BS)[..],
            "write {k} at {lba}"
        );
    }
    assert_eq!(copied(&rig.target), 0);
    c.io = qs;
    c.shutdown().unwrap();
}

#[test]
fn eight_hosts_two_queues_each_on_two_pollers() {
    let rig = rig(&RigOptions {
        pollers: 2,
        ..RigOptions::default()
    });
    const HOSTS: u8 = 8;
    const BLOCKS: usize = 48; // one stripe per write
    let results: Vec<(u16, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=HOSTS)
            .map(|h| {
                let rig = &rig;
                s.spawn(move || {
                    let mut o = options(h);
                    o.io_queues = 2;
                    o.io_depth = 16;
                    let mut c = connect_with(rig, h, o).unwrap();
                    let ns = c.namespace(Nsid(1)).unwrap();
                    let base = u64::from(h) * 400;
                    for qi in 0..2usize {
                        for k in 0..2u64 {
                            let lba = base + (qi as u64 * 2 + k) * BLOCKS as u64;
                            let data = pattern(lba, BLOCKS * BS);
                            c.write(qi, &ns, Lba(lba), &data).unwrap();
                        }
                    }
                    for qi in 0..2usize {
                        let mut back = vec![0u8; 4 * BLOCKS * BS];
                        c.read(1 - qi, &ns, Lba(base), &mut back).unwrap();
                        for (i, chunk) in back.chunks(BLOCKS * BS).enumerate() {
                            let lba = base + (i * BLOCKS) as u64;
                            assert!(chunk == pattern(lba, BLOCKS * BS), "host {h} lba {lba}");
                        }
                    }
                    let granted = c.io.len() as u16;
                    let id = c.cntlid();
                    c.shutdown().unwrap();
                    (id, granted)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ids: std::collections::BTreeSet<u16> = results.iter().map(|r| r.0).collect();
    assert_eq!(
        ids.len(),
        usize::from(HOSTS),
        "controller ids unique: {results:?}"
    );
    assert!(results.iter().all(|r| r.1 == 2), "{results:?}");
    assert_eq!(copied(&rig.target), 0);
    assert!(
        eventually(Duration::from_secs(3), || rig
            .target
            .shared()
            .controllers
            .lock()
            .unwrap()
            .is_empty()),
        "controllers left after every host shut down"
    );
}

#[test]
fn racing_overlapping_writes_keep_blocks_whole_and_parity_consistent() {
    use raidline_raid::{MemberIdx, SyncExecutor, Throttle};
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 2;
    o.io_depth = 32;
    let mut c = connect_with(&rig, 1, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    const BASE: u64 = 96; // 4 stripes of 48 blocks from a stripe boundary
    const SPAN: u64 = 192;
    let mut qs = c.take_io_queues();
    // Every block written carries (queue, round, command, block) in its first bytes.
    let block = |qi: u64, round: u64, k: u64, lba: u64| {
        let mut b = pattern(qi << 40 | round << 32 | k << 16 | lba, BS);
        b[..8].copy_from_slice(&(qi << 40 | round << 32 | k << 16 | lba).to_le_bytes());
        b
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .iter_mut()
            .enumerate()
            .map(|(qi, q)| {
                let ns = &ns;
                s.spawn(move || {
                    let mut rng = Rng(qi as u64 + 5);
                    for round in 0..3u64 {
                        let mut tags = Vec::new();
                        for k in 0..32u64 {
                            let n = 1 + rng.below(48);
                            let lba = BASE + rng.below(SPAN - n + 1);
                            let tag = q.alloc().expect("slot");
                            for i in 0..n {
                                let b = block(qi as u64, round, k, lba + i);
                                q.write_data(tag, (i as usize * BS) as u32, &b).unwrap();
                            }
                            hio::submit_rw(q, tag, IoOp::Write, ns, Lba(lba), n as u32).unwrap();
                            tags.push(tag);
                        }
                        for t in tags {
                            q.wait(t).unwrap();
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
    let mut snap = vec![0u8; SPAN as usize * BS];
    c.read(0, &ns, Lba(BASE), &mut snap).unwrap();
    let mut written = 0;
    for (i, got) in snap.chunks(BS).enumerate() {
        let lba = BASE + i as u64;
        let tag = u64::from_le_bytes(got[..8].try_into().unwrap());
        if tag == 0 && got.iter().all(|&b| b == 0) {
            continue; // never written
        }
        written += 1;
        assert_eq!(
            tag & 0xFFFF,
            lba,
            "block {lba} carries another block's data"
        );
        let (qi, round, k) = (tag >> 40, (tag >> 32) & 0xFF, (tag >> 16) & 0xFFFF);
        assert!(got == block(qi, round, k, lba), "block {lba} is torn");
    }
    assert!(
        written > SPAN / 2,
        "only {written} of {SPAN} blocks written"
    );
    // Parity matches the data everywhere (a check-only scrub finds nothing)...
    let p = rig
        .array
        .run_scrub(&mut SyncExecutor, false, &mut Throttle::new(None))
        .unwrap();
    assert_eq!(p.mismatches, 0, "parity mismatches after racing writes");
    // ...and the data reconstructed without member 0 is what was read before.
    rig.array.set_faulty(MemberIdx(0)).unwrap();
    let mut again = vec![0u8; snap.len()];
    c.read(0, &ns, Lba(BASE), &mut again).unwrap();
    assert!(again == snap, "degraded reads differ from the healthy ones");
    c.shutdown().unwrap();
}

#[test]
fn more_large_transfers_in_flight_than_pool_buffers() {
    // Transfers over 128 KiB take one of the poller's 8 large pool buffers; the host keeps
    // 32 transfers of 256 KiB in flight (2 queues × 16): most must wait for a buffer, none
    // may be lost, reordered into the wrong place, or copied.
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 2;
    o.io_depth = 16;
    let mut c = connect_with(&rig, 1, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    const N: u64 = 64; // blocks per transfer: 256 KiB
    const DEPTH: u64 = 16;
    let slot_data = |s: u64| pattern(0xB16 + s, N as usize * BS);
    let mut qs = c.take_io_queues();
    // 2 queues × 16 × 256 KiB = 8 MiB each way.
    for op in [IoOp::Write, IoOp::Read] {
        std::thread::scope(|sc| {
            let handles: Vec<_> = qs
                .iter_mut()
                .enumerate()
                .map(|(qi, q)| {
                    let ns = &ns;
                    sc.spawn(move || {
                        let mut tags: Vec<(Tag, u64)> = Vec::new();
                        for k in 0..DEPTH {
                            let s = qi as u64 * DEPTH + k;
                            let tag = q.alloc().expect("slot");
                            if op == IoOp::Write {
                                q.write_data(tag, 0, &slot_data(s)).unwrap();
                            }
                            hio::submit_rw(q, tag, op, ns, Lba(s * N), N as u32).unwrap();
                            tags.push((tag, s));
                        }
                        assert_eq!(q.in_flight(), DEPTH as usize);
                        // Wait for all, then look at the data: this thread owns the queue,
                        // so a finished slot is not reused before it is read.
                        let mut got = Vec::new();
                        for (t, s) in tags {
                            q.wait(t)
                                .unwrap_or_else(|e| panic!("{op:?} of slot {s}: {e}"));
                            if op == IoOp::Read {
                                let mut b = vec![0u8; N as usize * BS];
                                q.read_data(t, 0, &mut b).unwrap();
                                got.push((s, b));
                            }
                        }
                        for (s, b) in got {
                            assert!(b == slot_data(s), "slot {s} read back wrong");
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
    }
    c.io = qs;
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}
