//! End-to-end: a healthy array served on the pollers' own io_uring starts no storage worker
//! thread (its own test binary: the thread list of the process is this test's alone).

mod common;

use std::sync::atomic::Ordering;

use common::*;
use raidline_initiator::{Lba, Nsid};

/// A freshly created array (clean, every bitmap bit clear): the host's writes are served on
/// the poller's ring, marking the array dirty (by its maintenance thread) and setting the
/// bitmap bits included, so no storage worker thread ever starts.
#[test]
fn a_fresh_healthy_array_never_starts_storage_workers() {
    let array = create_array(file_members("ring-fresh", None));
    let (net, addr, target) = serve(&array);
    let mut c =
        raidline_initiator::Controller::connect(net.device("host1"), addr, options(1)).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let cap = array.geometry().capacity_bytes() as usize;
    let data = pattern(0xF2E5, cap);
    for (i, piece) in data.chunks(160 << 10).enumerate() {
        c.write(0, &ns, Lba((i * (160 << 10) / 4096) as u64), piece)
            .unwrap();
    }
    let all = read_whole(&mut c, &ns, cap);
    assert!(all == data, "the array differs from what was written");
    let dp = &target.shared().data_path;
    assert_eq!(dp.worker_requests.load(Ordering::Relaxed), 0);
    assert!(dp.ring_requests.load(Ordering::Relaxed) > 0);
    let workers = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("raid-worker"))
        .count();
    assert_eq!(workers, 0, "storage worker threads were started");
    assert!(
        !array.dirty_regions().is_empty(),
        "the bitmap recorded the writes"
    );
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}
