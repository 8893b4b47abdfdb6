//! End-to-end: the target over the in-memory fabric, driven by the user-space initiator
//! (the smoke test; the themed suites are the `e2e_*.rs` files, helpers in `common/`).

mod common;

use common::*;
use raidline_initiator::{Lba, Nsid};

#[test]
fn write_read_verify_many_sizes_zero_copy() {
    let rig = default_rig();
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
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
    let errs = rig.target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}
