//! Which degraded writes the partial-parity log records, and which entries recovery replays.
//!
//! A write that modifies only the missing member's chunk writes parity alone (each parity
//! block lands old or new, and either matches the untouched chunks), so it needs no entry —
//! unless a surviving header may still hold an earlier entry for the same stripe: replaying
//! that one after an unclean stop would bring the missing chunk's rows back to before the
//! write. Two tests pin both sides: the skip happens (the log area is not written) when no
//! header holds the stripe, and an entry is written when one does.
//!
//! The log is a ring: entries of finished rounds are overwritten, a payload (in its own
//! ring) possibly before an older entry's header. A third test makes a stripe's newest entry
//! lose its payload that way while an older entry of the same stripe survives, and checks
//! that recovery does not replay the older one (which would undo the newer write).

use std::sync::Arc;

use raidline_raid::{
    Array, ArrayBlock, ArrayConfig, BlockSize, ChunkSize, CpuXor, MemMember, Member, MemberIdx,
    StripeIdx, SyncExecutor,
};

const MIB: usize = 1 << 20;
/// 4 members, 4 KiB chunks: 64 header slots and a 448 KiB payload ring per member.
const N: usize = 4;
/// Another stripe with the same parity member as stripe 0.
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
fn a_write_to_the_missing_chunk_alone_is_not_logged_when_no_header_holds_its_stripe() {
    let (disks, array, failed) = degraded();
    let pm = array.geometry().parity_member(StripeIdx(0)).0;
    assert_eq!(array.geometry().parity_member(StripeIdx(SHARED)).0, pm);
    // A logged write to another stripe of the same parity member.
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
fn a_write_to_the_missing_chunk_alone_is_logged_when_a_header_holds_its_stripe() {
    let (disks, array, failed) = degraded();
    let pm = array.geometry().parity_member(StripeIdx(0)).0;
    // A logged write to stripe 0 (a surviving chunk): the log holds stripe 0's entry, whose
    // partial parity has the missing chunk's old rows.
    write_chunk(&array, 0, 1, 20);
    let before = log_area(&disks[pm]);
    let new = write_chunk(&array, 0, 0, 21);
    assert!(
        log_area(&disks[pm]) != before,
        "the earlier entry for this stripe was left as the newest"
    );
    // Replaying the earlier entry would bring the old rows back.
    let got = unclean_restart_and_read(&disks, array, failed, 0, 0);
    assert!(
        got == new,
        "replay brought the missing chunk's old rows back"
    );
}

#[test]
fn recovery_replays_only_a_stripes_newest_entry_when_the_ring_wrapped() {
    let (disks, array, failed) = degraded();
    let geo = *array.geometry();
    let pm = geo.parity_member(StripeIdx(0)).0;
    let f = geo.data_index_of(StripeIdx(0), MemberIdx(failed)).unwrap();
    let a = (f + 1) % 3;
    // Entry 1 (inline in its header slot): chunk `a` of stripe 0; its partial parity holds
    // the missing chunk's old rows.
    write_chunk(&array, 0, a, 30);
    // Entry 2, newer, same stripe: the whole stripe (the missing chunk too): partial parity
    // plus the missing chunk's new rows, 8 KiB, in the payload ring.
    let stripe0 = pattern(31, 3 * 4096);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &stripe0)
        .unwrap();
    let new_f = stripe0[f * 4096..(f + 1) * 4096].to_vec();
    // 60 more whole-stripe writes on the same parity member: the 448 KiB payload ring
    // (56 such entries) wraps over entry 2's payload, while entry 1's header (64 slots)
    // survives.
    for j in 1..=60u64 {
        let s = j * N as u64;
        assert_eq!(geo.parity_member(StripeIdx(s)).0, pm);
        let at = geo.logical_block(StripeIdx(s), 0, 0);
        array
            .write(&mut SyncExecutor, at, &pattern(100 + j, 3 * 4096))
            .unwrap();
    }
    // Replaying entry 1 would set parity from its stale partial parity: the missing chunk
    // would read back its rows from before entry 2.
    let got = unclean_restart_and_read(&disks, array, failed, 0, f);
    assert!(
        got == new_f,
        "recovery replayed a stripe's older entry over its newer write"
    );
}
