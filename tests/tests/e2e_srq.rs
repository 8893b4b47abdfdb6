//! End-to-end: receive memory with a shared receive queue per poller against a receive ring
//! per queue pair, for 1, 4, 16 and 64 connected I/O queues (hosts of 16 queues at most), and
//! I/O through every queue. Prints the figures (`cargo test --test e2e_srq -- --nocapture`):
//! registered receive bytes (`raidline_receive_buffer_bytes`) and the growth of the process's
//! RSS from after the target started (the shared queue's buffers are allocated at start).

mod common;

use std::sync::atomic::Ordering;

use common::*;
use raidline_initiator::{Lba, Nsid};
use raidline_target::subsystem::Limits;

/// Resident set of this process, bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Connects `queues` I/O queues (hosts of up to 16 queues each, QD 128), writes and reads a
/// block through every queue, and returns the registered receive bytes and the RSS growth.
fn measure(srq_depth: u32, queues: u16) -> (u64, u64) {
    let limits = Limits {
        srq_depth,
        ..Limits::default()
    };
    let rig = rig(&RigOptions {
        limits,
        ..RigOptions::default()
    });
    let before = rss();
    let mut hosts = Vec::new();
    let mut left = queues;
    let mut h = 1u8;
    while left > 0 {
        let n = left.min(16);
        let mut o = options(h);
        o.io_queues = n;
        o.io_depth = 128;
        let c = connect_with(&rig, h, o).expect("connect");
        assert_eq!(c.io.len(), usize::from(n), "host {h} got its queues");
        hosts.push(c);
        left -= n;
        h += 1;
    }
    for (k, c) in hosts.iter_mut().enumerate() {
        let ns = c.namespace(Nsid(1)).unwrap();
        for qi in 0..c.io.len() {
            let lba = (k * 16 + qi) as u64;
            let data = pattern(lba + 1, 4096);
            c.write(qi, &ns, Lba(lba), &data).unwrap();
            let mut back = vec![0u8; 4096];
            c.read(qi, &ns, Lba(lba), &mut back).unwrap();
            assert!(back == data, "queue {qi} of host {k}");
        }
    }
    let bytes = rig
        .target
        .shared()
        .data_path
        .receive_bytes
        .load(Ordering::Relaxed);
    let grown = rss().saturating_sub(before);
    for c in hosts {
        c.shutdown().unwrap();
    }
    let errs = rig.target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
    (bytes, grown)
}

#[test]
fn receive_memory_stays_per_poller_with_a_shared_receive_queue() {
    let slot = 64 + u64::from(Limits::default().in_capsule_data);
    let mut rows = Vec::new();
    for queues in [1u16, 4, 16, 64] {
        let (rings, rings_rss) = measure(0, queues);
        let (shared, shared_rss) = measure(Limits::default().srq_depth, queues);
        println!(
            "receive memory, {queues:2} I/O queues: per-queue rings {:7.2} MiB (RSS +{:6.1} MiB), \
             shared receive queue {:5.2} MiB (RSS +{:6.1} MiB)",
            rings as f64 / 1048576.0,
            rings_rss as f64 / 1048576.0,
            shared as f64 / 1048576.0,
            shared_rss as f64 / 1048576.0,
        );
        rows.push((queues, rings, shared));
    }
    for &(queues, rings, _) in &rows {
        // Rings: one of queue depth per I/O queue (plus the admin queues' small ones).
        assert!(rings >= u64::from(queues) * 128 * slot, "{queues}: {rings}");
    }
    // The bar: for their I/O queues, 64 queues on the shared receive queue register no more
    // than 4 queues did with a ring each (each host's admin queue keeps 32 receives of 64 B:
    // 4 hosts for 64 queues, 1 for 4).
    let admin = 32 * 64;
    let four_rings = rows[1].1 - admin;
    let (s1, s64) = (rows[0].2, rows[3].2);
    assert!(
        s64 - 4 * admin <= four_rings,
        "64 queues: {s64} > {four_rings}"
    );
    // It does not grow with queues (admin queues aside: 32 × 64 B per host).
    assert!(s64 - s1 <= 4 * 32 * 64, "{s1} → {s64}");
}
