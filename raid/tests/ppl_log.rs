//! Which degraded writes the partial-parity log records.
//!
//! A write that modifies only the missing member's chunk writes parity alone (each parity
//! block lands old or new, and either matches the untouched chunks), so it needs no entry —
//! unless its stripe's slot may still hold an earlier entry for the same stripe: replaying
//! that one after an unclean stop would bring the missing chunk's rows back to before the
//! write. These tests pin both sides: the skip happens (the log area is not written) when
//! the slot is known to hold another stripe's entry, and an entry is written when the slot
//! holds the stripe's own.

use std::sync::Arc;

use raidline_raid::{
    Array, ArrayBlock, ArrayConfig, BlockSize, ChunkSize, CpuXor, MemMember, Member, MemberIdx,
    StripeIdx, SyncExecutor,
};

const MIB: usize = 1 << 20;
/// 4 members, 4 KiB chunks: 80 log slots per member, stripes `s` and `s + 320` share one.
const N: usize = 4;
const SHARED: u64 = (N * 80) as u64;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 29) as u8
        })
        .collect()
}

/// A filled array of write-through members with the role holding data index 0 of stripe 0
/// taken out; returns the disks, the array and that role.
fn degraded() -> (Vec<MemMember>, Array, usize) {
    let size = MIB + (SHARED as usize + 8) * 4096;
    let disks: Vec<MemMember> = (0..N)
        .map(|i| MemMember::new(&format!("d{i}"), size))
        .collect();
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        block: BlockSize::new(4096).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let arcs: Vec<Arc<dyn Member>> = disks
        .iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect();
    let array = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let fill = pattern(1, array.geometry().capacity_bytes() as usize);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &fill)
        .unwrap();
    let failed = array.geometry().data_member(StripeIdx(0), 0).0;
    array.set_faulty(MemberIdx(failed)).unwrap();
    (disks, array, failed)
}

/// Writes one chunk (one block) at data index `d` of `stripe`; returns the data.
fn write_chunk(array: &Array, stripe: u64, d: usize, seed: u64) -> Vec<u8> {
    let at = array.geometry().logical_block(StripeIdx(stripe), d, 0);
    let data = pattern(seed, 4096);
    array.write(&mut SyncExecutor, at, &data).unwrap();
    data
}

/// The log area (64 KiB to 1 MiB) of `disk`.
fn log_area(disk: &MemMember) -> Vec<u8> {
    disk.snapshot()[64 * 1024..MIB].to_vec()
}

/// Drops the array without a clean stop and assembles the survivors again (the log is
/// replayed); returns the block at data index `d` of `stripe`.
fn unclean_restart_and_read(
    disks: &[MemMember],
    array: Array,
    failed: usize,
    stripe: u64,
    d: usize,
) -> Vec<u8> {
    let uuid = array.uuid();
    let at = array.geometry().logical_block(StripeIdx(stripe), d, 0);
    drop(array);
    let arcs: Vec<Arc<dyn Member>> = disks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != failed)
        .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect();
    let asm = Array::assemble(arcs, Some(uuid), Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.write_hole_exposed);
    let mut got = vec![0u8; 4096];
    asm.array.read(&mut SyncExecutor, at, &mut got).unwrap();
    got
}

#[test]
fn a_write_to_the_missing_chunk_alone_is_not_logged_when_its_slot_holds_another_stripe() {
    let (disks, array, failed) = degraded();
    let pm = array.geometry().parity_member(StripeIdx(0)).0;
    assert_eq!(array.geometry().parity_member(StripeIdx(SHARED)).0, pm);
    // A logged write to the other stripe of the slot: the slot now holds its entry.
    write_chunk(&array, SHARED, 1, 10);
    let before = log_area(&disks[pm]);
    // Only the missing chunk of stripe 0: parity alone, no entry.
    let new = write_chunk(&array, 0, 0, 11);
    assert!(
        log_area(&disks[pm]) == before,
        "the parity-only write wrote the log"
    );
    let got = unclean_restart_and_read(&disks, array, failed, 0, 0);
    assert!(got == new, "the missing chunk's new rows were lost");
}

#[test]
fn a_write_to_the_missing_chunk_alone_is_logged_when_its_slot_holds_its_own_stripe() {
    let (disks, array, failed) = degraded();
    let pm = array.geometry().parity_member(StripeIdx(0)).0;
    // A logged write to stripe 0 (a surviving chunk): the slot holds stripe 0's entry, whose
    // partial parity has the missing chunk's old rows.
    write_chunk(&array, 0, 1, 20);
    let before = log_area(&disks[pm]);
    let new = write_chunk(&array, 0, 0, 21);
    assert!(
        log_area(&disks[pm]) != before,
        "the slot's entry for this stripe was left in place"
    );
    // Replaying the earlier entry would bring the old rows back.
    let got = unclean_restart_and_read(&disks, array, failed, 0, 0);
    assert!(
        got == new,
        "replay brought the missing chunk's old rows back"
    );
}
