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
    Array, ArrayBlock, ArrayConfig, AssembleOptions, BlockSize, ChunkSize, CpuXor, Executor, Fault,
    FaultyMember, MemMember, Member, MemberIdx, MemberOp, OpBuf, PowerSwitch, RaidError, StripeIdx,
    SyncExecutor, WriteHolePolicy,
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

/// An array of 4 KiB chunks and blocks over `members` (assumed clean), optionally with a
/// chosen UUID, filled with `pattern(seed)`.
fn filled_array(
    members: Vec<Arc<dyn Member>>,
    uuid: Option<raidline_raid::Uuid>,
    seed: u64,
) -> Array {
    filled_with_policy(members, uuid, seed, WriteHolePolicy::Degraded).0
}

/// [`filled_array`] under a write-hole policy; also returns what it was filled with.
fn filled_with_policy(
    members: Vec<Arc<dyn Member>>,
    uuid: Option<raidline_raid::Uuid>,
    seed: u64,
    write_hole: WriteHolePolicy,
) -> (Array, Vec<u8>) {
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        block: BlockSize::new(4096).unwrap(),
        assume_clean: true,
        uuid,
        write_hole,
        ..ArrayConfig::default()
    };
    let array = Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let fill = pattern(seed, array.geometry().capacity_bytes() as usize);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &fill)
        .unwrap();
    (array, fill)
}

/// Bytes of each member of the issue-15 tests' arrays (64 stripes of 4 KiB chunks).
const SMALL: usize = MIB + 64 * 4096;

/// `N` write-through in-memory disks of [`SMALL`] bytes.
fn small_disks() -> Vec<MemMember> {
    (0..N)
        .map(|i| MemMember::new(&format!("d{i}"), SMALL))
        .collect()
}

fn arcs(disks: &[MemMember]) -> Vec<Arc<dyn Member>> {
    disks
        .iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect()
}

/// A filled array of write-through members with the role holding data index 0 of stripe 0
/// taken out; returns the disks, the array and that role.
fn degraded() -> (Vec<MemMember>, Array, usize) {
    let size = MIB + (SHARED as usize + 8) * 4096;
    let disks: Vec<MemMember> = (0..N)
        .map(|i| MemMember::new(&format!("d{i}"), size))
        .collect();
    let array = filled_array(arcs(&disks), None, 1);
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

/// The disks (all but `failed`) as assembly candidates.
fn survivors(disks: &[MemMember], failed: usize) -> Vec<Arc<dyn Member>> {
    disks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != failed)
        .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect()
}

fn read_block(array: &Array, stripe: u64, d: usize) -> Vec<u8> {
    let at = array.geometry().logical_block(StripeIdx(stripe), d, 0);
    let mut got = vec![0u8; 4096];
    array.read(&mut SyncExecutor, at, &mut got).unwrap();
    got
}

#[test]
fn switching_the_log_off_voids_its_entries_and_an_unclean_stop_is_reported_exposed() {
    let (disks, array, failed) = degraded();
    let uuid = array.uuid();
    let old_missing = read_block(&array, 0, 0);
    // A logged write: stripe 0's slot holds an entry whose partial parity has data index 2's
    // current rows.
    write_chunk(&array, 0, 1, 30);
    array.set_write_hole_protection(false).unwrap();
    assert!(!array.write_hole_protected() && !array.write_hole_covered());
    // An unlogged write to data index 2: replaying the old entry now would put parity out of
    // step with it, and the missing chunk would read back wrong.
    write_chunk(&array, 0, 2, 31);
    drop(array);
    let err = Array::assemble(
        survivors(&disks, failed),
        Some(uuid),
        Arc::new(CpuXor::detect()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("switched off") && err.contains("start_dirty_degraded"),
        "{err}"
    );
    let opts = AssembleOptions {
        expect: Some(uuid),
        start_dirty_degraded: true,
    };
    let asm =
        Array::assemble_with(survivors(&disks, failed), &opts, Arc::new(CpuXor::detect())).unwrap();
    assert!(asm.write_hole_exposed);
    // The setting is kept across the restart.
    assert!(!asm.array.write_hole_protected());
    assert!(
        read_block(&asm.array, 0, 0) == old_missing,
        "a void entry was replayed"
    );
}

#[test]
fn switching_the_log_back_on_covers_an_unclean_stop_again() {
    let (disks, array, failed) = degraded();
    let uuid = array.uuid();
    let old_missing = read_block(&array, 0, 0);
    array.set_write_hole_protection(false).unwrap();
    let d2 = write_chunk(&array, 0, 2, 40);
    array.set_write_hole_protection(true).unwrap();
    // Nothing was in flight: it covers at once.
    assert!(array.write_hole_protected() && array.write_hole_covered());
    let d1 = write_chunk(&array, 0, 1, 41);
    drop(array);
    let asm = Array::assemble(
        survivors(&disks, failed),
        Some(uuid),
        Arc::new(CpuXor::detect()),
    )
    .unwrap();
    assert!(!asm.write_hole_exposed && asm.array.write_hole_protected());
    assert!(read_block(&asm.array, 0, 0) == old_missing);
    assert!(read_block(&asm.array, 0, 1) == d1 && read_block(&asm.array, 0, 2) == d2);
}

#[test]
fn an_array_created_again_with_the_same_uuid_replays_nothing_of_the_old_one() {
    let (disks, array, failed) = degraded();
    let uuid = array.uuid();
    // Entries of the old array, epoch 1, in the slots of stripes 0..8.
    for stripe in 0..8 {
        write_chunk(&array, stripe, 1, 50 + stripe);
    }
    drop(array);
    // The same disks, the same UUID, other data, the same role missing: epoch 1 again.
    let array = filled_array(arcs(&disks), Some(uuid), 2);
    array.set_faulty(MemberIdx(failed)).unwrap();
    let blocks = |a: &Array| -> Vec<Vec<u8>> {
        (0..8)
            .flat_map(|s| (0..N - 1).map(move |d| (s, d)))
            .map(|(s, d)| read_block(a, s, d))
            .collect()
    };
    let want = blocks(&array);
    drop(array);
    let asm = Array::assemble(
        survivors(&disks, failed),
        Some(uuid),
        Arc::new(CpuXor::detect()),
    )
    .unwrap();
    assert!(!asm.write_hole_exposed);
    let got = blocks(&asm.array);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "stripe {}, data index {}: an entry of the earlier array was replayed",
            i / (N - 1),
            i % (N - 1)
        );
    }
}

// ---- Epoch changes on members with volatile caches; the log switched off and on; upgrade ----

struct CacheRig {
    disks: Vec<MemMember>,
    faulty: Vec<Arc<FaultyMember>>,
    array: Array,
}

/// 4 members with volatile write caches behind fault injectors, filled and flushed.
fn cache_rig() -> CacheRig {
    let size = MIB + 64 * 4096;
    let disks: Vec<MemMember> = (0..N)
        .map(|i| MemMember::with_volatile_cache(&format!("d{i}"), size))
        .collect();
    let faulty: Vec<Arc<FaultyMember>> = disks
        .iter()
        .map(|d| Arc::new(FaultyMember::new(Arc::new(d.clone()) as Arc<dyn Member>, 1)))
        .collect();
    let array = filled_array(
        faulty
            .iter()
            .map(|f| f.clone() as Arc<dyn Member>)
            .collect(),
        None,
        1,
    );
    array.flush().unwrap();
    CacheRig {
        disks,
        faulty,
        array,
    }
}

/// (data index written, data index failed) such that the first surviving role (in role
/// order, the first superblock persist writes and flushes) is the written data role or the
/// parity role, and the other one comes later.
fn pick(a: &Array) -> (usize, usize) {
    let g = a.geometry();
    let p = g.parity_member(StripeIdx(0)).0;
    for dw in 0..N - 1 {
        for df in 0..N - 1 {
            if dw == df {
                continue;
            }
            let (rw, rf) = (
                g.data_member(StripeIdx(0), dw).0,
                g.data_member(StripeIdx(0), df).0,
            );
            let first = (0..N).find(|&r| r != rf).unwrap();
            if first == rw.min(p) {
                return (dw, df);
            }
        }
    }
    panic!("no pick");
}

fn cut_and_assemble(r: CacheRig, failed_role: usize, df: usize, want: &[u8]) {
    drop(r.array);
    for d in &r.disks {
        d.power_cut(None);
    }
    let cands: Vec<Arc<dyn Member>> = r
        .disks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != failed_role)
        .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn Member>)
        .collect();
    match Array::assemble(cands, None, Arc::new(CpuXor::detect())) {
        // Refusing is safe; assembling with wrong data is not.
        Err(e) => assert!(e.to_string().contains("start_dirty_degraded"), "{e}"),
        Ok(asm) => {
            let got = read_block(&asm.array, 0, df);
            assert!(
                got == want,
                "missing member's untouched block changed after the cut (exposed={})",
                asm.write_hole_exposed
            );
        }
    }
}

/// Completed healthy writes still in the caches, then an administrator's fail and a power
/// cut during its superblock update.
#[test]
fn set_faulty_makes_completed_writes_durable_before_the_superblock_says_degraded() {
    let r = cache_rig();
    let (dw, df) = pick(&r.array);
    let rf = r.array.geometry().data_member(StripeIdx(0), df).0;
    let want = read_block(&r.array, 0, df);
    // A healthy (unlogged) write, completed, still in the caches.
    let at = r.array.geometry().logical_block(StripeIdx(0), dw, 0);
    r.array
        .write(&mut SyncExecutor, at, &pattern(7, 4096))
        .unwrap();
    let sw = PowerSwitch::after(1);
    for f in &r.faulty {
        f.handle().inject(Fault::PowerLoss(sw.clone()));
    }
    let _ = r.array.set_faulty(MemberIdx(rf));
    cut_and_assemble(r, rf, df, &want);
}

/// Unlogged writes (log off) still in the caches, then the log switched on and a power cut
/// during that superblock update.
#[test]
fn switching_the_log_on_makes_unlogged_writes_durable_before_it_covers() {
    let r = cache_rig();
    let (dw, df) = pick(&r.array);
    let rf = r.array.geometry().data_member(StripeIdx(0), df).0;
    r.array.set_faulty(MemberIdx(rf)).unwrap();
    r.array.set_write_hole_protection(false).unwrap();
    let want = read_block(&r.array, 0, df);
    let at = r.array.geometry().logical_block(StripeIdx(0), dw, 0);
    r.array
        .write(&mut SyncExecutor, at, &pattern(7, 4096))
        .unwrap();
    let sw = PowerSwitch::after(1);
    for f in &r.faulty {
        f.handle().inject(Fault::PowerLoss(sw.clone()));
    }
    let _ = r.array.set_write_hole_protection(true);
    cut_and_assemble(r, rf, df, &want);
}

/// Off then on again with an entry of the old epoch in stripe 0's slot and an unlogged write
/// to stripe 0 in between: the old entry must be void.
#[test]
fn entries_from_before_the_log_was_switched_off_stay_void_after_it_is_on_again() {
    let (disks, array, failed) = degraded();
    let want = read_block(&array, 0, 0);
    let w = |d: usize, seed: u64| {
        let at = array.geometry().logical_block(StripeIdx(0), d, 0);
        array
            .write(&mut SyncExecutor, at, &pattern(seed, 4096))
            .unwrap();
    };
    w(1, 30); // logged
    array.set_write_hole_protection(false).unwrap();
    w(2, 31); // unlogged
    array.set_write_hole_protection(true).unwrap();
    drop(array);
    let asm = Array::assemble(survivors(&disks, failed), None, Arc::new(CpuXor::detect())).unwrap();
    assert!(
        read_block(&asm.array, 0, 0) == want,
        "a void entry was replayed"
    );
}

fn upgrade_probe(as_v1: bool) -> (bool, bool) {
    let (disks, array, failed) = degraded();
    let p = array.geometry().parity_member(StripeIdx(0)).0;
    let want = read_block(&array, 0, 0);
    let old_parity = disks[p].snapshot()[MIB..MIB + 4096].to_vec();
    let at = array.geometry().logical_block(StripeIdx(0), 1, 0);
    array
        .write(&mut SyncExecutor, at, &pattern(9, 4096))
        .unwrap();
    drop(array);
    // Torn: the parity write never landed.
    disks[p].poke(MIB, &old_parity);
    let hdr_at = 64 * 1024;
    let mut h = disks[p].snapshot()[hdr_at..hdr_at + 4096].to_vec();
    assert_eq!(&h[..7], b"RLPPL\0\0", "slot 0 header not where expected");
    if as_v1 {
        // As the previous build wrote it: superblock version 1 without the log flags, and
        // a format-1 entry (no array UUID).
        for (i, d) in disks.iter().enumerate() {
            if i == failed {
                continue;
            }
            let mut sb = d.snapshot()[..4096].to_vec();
            sb[8..12].copy_from_slice(&1u32.to_le_bytes());
            sb[0xC0..0xC4].copy_from_slice(&[0; 4]);
            let crc = raidline_raid::superblock::crc32c(&sb[..0xFFC]);
            sb[0xFFC..].copy_from_slice(&crc.to_le_bytes());
            d.poke(0, &sb);
        }
        h[7] = 1;
        for b in &mut h[4096 - 20..4096 - 4] {
            *b = 0;
        }
        let crc = raidline_raid::superblock::crc32c(&h[..4096 - 4]);
        h[4096 - 4..].copy_from_slice(&crc.to_le_bytes());
        disks[p].poke(hdr_at, &h);
    }
    let asm = Array::assemble(survivors(&disks, failed), None, Arc::new(CpuXor::detect())).unwrap();
    (asm.write_hole_exposed, read_block(&asm.array, 0, 0) == want)
}

#[test]
fn an_unclean_degraded_stop_by_the_previous_format_is_replayed_after_upgrade() {
    // (exposed, missing block intact) after a torn degraded write and an unclean stop.
    assert_eq!(upgrade_probe(false), (false, true), "format 2");
    assert_eq!(
        upgrade_probe(true),
        (false, true),
        "format 1 under version-1 superblocks"
    );
}

/// Runs a batch but leaves out `role`'s writes to the data area, reporting them done: the
/// power went out after the data writes of a round reached the media and before its parity
/// write did (an unclean stop follows when the array is dropped).
struct ParityLost {
    role: usize,
}

impl Executor for ParityLost {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        for op in ops.iter_mut() {
            let lost = op.role.0 == self.role
                && op.offset >= MIB as u64
                && matches!(op.buf, OpBuf::Write(_));
            if lost {
                op.result = Some(Ok(()));
            } else {
                op.run_sync();
            }
        }
    }
}

/// Issue 15: a crash while healthy (a small write's data on media, its parity not), and a
/// member the write did not touch lost at the restart. Under "always" the healthy write was
/// logged, so assembly replays it and the lost member's block reads back; under "degraded"
/// the same stop is refused as exposed, and started anyway it does read back wrong — the
/// write hole the policy leaves open, in the region the exposure names.
#[test]
fn a_member_lost_after_a_crash_while_healthy_is_covered_only_under_always() {
    for policy in [WriteHolePolicy::Always, WriteHolePolicy::Degraded] {
        let disks = small_disks();
        let (array, fill) = filled_with_policy(arcs(&disks), None, 1, policy);
        let geo = *array.geometry();
        let stripe = StripeIdx(5);
        let pm = geo.parity_member(stripe).0;
        let (written, untouched) = (
            geo.logical_block(stripe, 0, 0),
            geo.logical_block(stripe, 1, 0),
        );
        let lost = geo.data_member(stripe, 1).0;
        let new = pattern(2, 4096);
        array
            .write(&mut ParityLost { role: pm }, written, &new)
            .unwrap();
        let uuid = array.uuid();
        drop(array);
        let survivors = || -> Vec<Arc<dyn Member>> {
            disks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != lost)
                .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn Member>)
                .collect()
        };
        let want = |b: ArrayBlock| &fill[b.0 as usize * 4096..][..4096];
        let read = |a: &Array, b: ArrayBlock| {
            let mut got = vec![0u8; 4096];
            a.read(&mut SyncExecutor, b, &mut got).unwrap();
            got
        };
        match policy {
            WriteHolePolicy::Always => {
                let asm =
                    Array::assemble(survivors(), Some(uuid), Arc::new(CpuXor::detect())).unwrap();
                assert!(!asm.write_hole_exposed && asm.replayed >= 1);
                assert_eq!(asm.array.degraded_roles(), vec![lost]);
                assert_eq!(read(&asm.array, untouched), want(untouched));
                assert_eq!(read(&asm.array, written), new);
            }
            WriteHolePolicy::Degraded => {
                let err = Array::assemble(survivors(), Some(uuid), Arc::new(CpuXor::detect()))
                    .err()
                    .unwrap();
                assert!(
                    matches!(&err, RaidError::WriteHoleExposed { missing, .. } if *missing == vec![lost]),
                    "{err}"
                );
                assert!(err.to_string().contains("accept-dirty-degraded"), "{err}");
                let opts = AssembleOptions {
                    expect: Some(uuid),
                    start_dirty_degraded: true,
                };
                let asm =
                    Array::assemble_with(survivors(), &opts, Arc::new(CpuXor::detect())).unwrap();
                let x = asm.exposure.clone().unwrap();
                assert_eq!(asm.array.exposure(), Some(x.clone()));
                assert!(x.blocks.iter().any(|r| r.contains(&untouched.0)), "{x:?}");
                assert_ne!(read(&asm.array, untouched), want(untouched));
                // The exposure is persisted: a clean restart (bitmap aging too) still reports
                // the same regions, without asking again.
                asm.array.age_bitmap().unwrap();
                asm.array.age_bitmap().unwrap();
                asm.array.stop().unwrap();
                drop(asm);
                let asm =
                    Array::assemble(survivors(), Some(uuid), Arc::new(CpuXor::detect())).unwrap();
                let again = asm.array.exposure().unwrap();
                assert_eq!(again.blocks, x.blocks);
                // A rebuild rewrites every stripe: the array is whole, and no longer exposed,
                // now or after a restart.
                asm.array
                    .add_spare(Arc::new(MemMember::new("spare", SMALL)))
                    .unwrap();
                asm.array
                    .run_rebuild(&mut SyncExecutor, &mut raidline_raid::Throttle::new(None))
                    .unwrap();
                assert!(asm.array.degraded_roles().is_empty());
                assert_eq!(asm.array.exposure(), None);
                asm.array.stop().unwrap();
            }
        }
    }
}

/// Runs a write round of `array` and, at its first write batch, fails the member of role
/// `fail` (a member the write does not touch), so that the failure is recorded while the
/// round, planned healthy, is writing; then cuts the power just before the round's parity
/// write to the data area.
struct FailThenCut {
    array: Arc<Array>,
    fail: Option<usize>,
    parity_role: usize,
    switch: PowerSwitch,
}

impl Executor for FailThenCut {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        if ops.iter().any(|op| matches!(op.buf, OpBuf::Write(_))) {
            if let Some(r) = self.fail.take() {
                self.array.set_faulty(MemberIdx(r)).unwrap();
            }
        }
        for op in ops.iter_mut() {
            if op.role.0 == self.parity_role
                && op.offset >= MIB as u64
                && matches!(op.buf, OpBuf::Write(_))
            {
                self.switch.cut();
            }
            op.run_sync();
        }
    }
}

/// Issue 15's window, deterministically: a member fails while a write planned healthy is
/// still writing, and the power fails before that write's parity lands. Under "degraded"
/// the write was not logged: assembly refuses (exposed, "planned before the log covered
/// them"), and started anyway the lost member's block in that stripe reads back wrong.
/// Under "always" it was logged under the healthy epoch, which recovery replays.
#[test]
fn a_member_failing_under_a_healthy_write_then_a_power_cut() {
    for policy in [WriteHolePolicy::Always, WriteHolePolicy::Degraded] {
        let switch = PowerSwitch::after(u64::MAX);
        let disks = small_disks();
        let wrapped: Vec<Arc<dyn Member>> = disks
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let f = FaultyMember::new(Arc::new(d.clone()), i as u64);
                f.handle().inject(Fault::PowerLoss(switch.clone()));
                Arc::new(f) as Arc<dyn Member>
            })
            .collect();
        let (array, fill) = filled_with_policy(wrapped, None, 1, policy);
        let array = Arc::new(array);
        let geo = *array.geometry();
        let stripe = StripeIdx(5);
        let (written, untouched) = (
            geo.logical_block(stripe, 0, 0),
            geo.logical_block(stripe, 1, 0),
        );
        let lost = geo.data_member(stripe, 1).0;
        let mut exec = FailThenCut {
            array: array.clone(),
            fail: Some(lost),
            parity_role: geo.parity_member(stripe).0,
            switch: switch.clone(),
        };
        let _ = array.write(&mut exec, written, &pattern(2, 4096));
        assert!(switch.is_cut() && exec.fail.is_none());
        let uuid = array.uuid();
        drop(exec);
        drop(array);
        let all: Vec<Arc<dyn Member>> = arcs(&disks);
        let want = &fill[untouched.0 as usize * 4096..][..4096];
        let read = |a: &Array| {
            let mut got = vec![0u8; 4096];
            a.read(&mut SyncExecutor, untouched, &mut got).unwrap();
            got
        };
        match policy {
            WriteHolePolicy::Always => {
                let asm = Array::assemble(all, Some(uuid), Arc::new(CpuXor::detect())).unwrap();
                assert!(!asm.write_hole_exposed && asm.replayed >= 1);
                assert_eq!(asm.array.degraded_roles(), vec![lost]);
                assert_eq!(read(&asm.array), want);
            }
            WriteHolePolicy::Degraded => {
                let err = Array::assemble(all.clone(), Some(uuid), Arc::new(CpuXor::detect()))
                    .err()
                    .unwrap();
                assert!(
                    err.to_string().contains("planned before the log covered"),
                    "{err}"
                );
                let opts = AssembleOptions {
                    expect: Some(uuid),
                    start_dirty_degraded: true,
                };
                let asm = Array::assemble_with(all, &opts, Arc::new(CpuXor::detect())).unwrap();
                let x = asm.exposure.clone().unwrap();
                assert!(x.blocks.iter().any(|r| r.contains(&untouched.0)), "{x:?}");
                assert_ne!(read(&asm.array), want);
            }
        }
    }
}

/// A crash while healthy with every member back at the restart, then a member lost before
/// the resync reached the torn stripe: under "always" assembly already replayed the log
/// (as md's PPL does instead of a resync), so the lost member's block reads back; under
/// "degraded" parity there is still torn until the resync, and the block reads back wrong.
#[test]
fn under_always_a_member_lost_before_the_resync_finds_no_torn_parity() {
    for policy in [WriteHolePolicy::Always, WriteHolePolicy::Degraded] {
        let disks = small_disks();
        let (array, fill) = filled_with_policy(arcs(&disks), None, 1, policy);
        let geo = *array.geometry();
        let stripe = StripeIdx(5);
        let untouched = geo.logical_block(stripe, 1, 0);
        let lost = geo.data_member(stripe, 1).0;
        array
            .write(
                &mut ParityLost {
                    role: geo.parity_member(stripe).0,
                },
                geo.logical_block(stripe, 0, 0),
                &pattern(2, 4096),
            )
            .unwrap();
        let uuid = array.uuid();
        drop(array);
        let asm = Array::assemble(arcs(&disks), Some(uuid), Arc::new(CpuXor::detect())).unwrap();
        assert!(asm.resync_pending);
        assert_eq!(asm.replayed >= 1, policy == WriteHolePolicy::Always);
        asm.array.set_faulty(MemberIdx(lost)).unwrap();
        let mut got = vec![0u8; 4096];
        asm.array
            .read(&mut SyncExecutor, untouched, &mut got)
            .unwrap();
        let want = &fill[untouched.0 as usize * 4096..][..4096];
        assert_eq!(got == want, policy == WriteHolePolicy::Always, "{policy:?}");
    }
}
