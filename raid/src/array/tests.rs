//! Array unit tests over in-memory and fault-injecting members.

use std::sync::{Arc, Mutex};

use super::sync::REBUILD_ROUND;
use super::*;
use crate::error::RefuseReason;
use crate::geometry::ArrayBlock;
use crate::io::SyncExecutor;
use crate::member::{Fault, FaultHandle, FaultyMember, MemMember};
use crate::parity::CpuXor;

const MIB: usize = 1 << 20;

struct Rig {
    mems: Vec<MemMember>,
    faults: Vec<FaultHandle>,
    array: Array,
}

fn members(n: usize, size: usize) -> (Vec<MemMember>, Vec<FaultHandle>, Vec<Arc<dyn Member>>) {
    let mems: Vec<MemMember> = (0..n)
        .map(|i| MemMember::new(&format!("m{i}"), size))
        .collect();
    let wrapped: Vec<FaultyMember> = mems
        .iter()
        .enumerate()
        .map(|(i, m)| FaultyMember::new(Arc::new(m.clone()), i as u64 + 1))
        .collect();
    let faults = wrapped.iter().map(FaultyMember::handle).collect();
    let arcs = wrapped
        .into_iter()
        .map(|w| Arc::new(w) as Arc<dyn Member>)
        .collect();
    (mems, faults, arcs)
}

fn rig(n: usize, chunk: u32, block: u32) -> Rig {
    let (mems, faults, arcs) = members(n, MIB + 16 * chunk as usize);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(chunk).unwrap(),
        block: BlockSize::new(block).unwrap(),
        assume_clean: true,
        bitmap_region_stripes: Some(2),
        ..ArrayConfig::default()
    };
    let array = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    Rig {
        mems,
        faults,
        array,
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn read_all(a: &Array) -> Result<Vec<u8>, RaidError> {
    let mut buf = vec![0u8; a.geometry().capacity_bytes() as usize];
    a.read(&mut SyncExecutor, ArrayBlock(0), &mut buf)?;
    Ok(buf)
}

fn scrub_mismatches(a: &Array) -> u64 {
    let p = a
        .scrub_step(&mut SyncExecutor, a.geometry().stripes(), false)
        .unwrap();
    assert!(p.finished);
    p.mismatches
}

/// Random writes of every shape against a byte model; parity stays consistent.
fn exercise(r: &Rig, seed: u64, ops: usize, model: &mut [u8]) {
    let a = &r.array;
    let bs = a.geometry().block_bytes();
    let cap = a.geometry().capacity_blocks();
    let mut x = seed | 1;
    let mut rnd = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for i in 0..ops {
        let start = rnd(cap);
        let len = 1 + rnd((cap - start).min(3 * a.geometry().stripe_data_blocks()));
        let data = pattern(seed * 1000 + i as u64, len as usize * bs);
        a.write(&mut SyncExecutor, ArrayBlock(start), &data)
            .unwrap();
        model[start as usize * bs..][..data.len()].copy_from_slice(&data);
        let rs = rnd(cap);
        let rl = 1 + rnd((cap - rs).min(40));
        let mut got = vec![0u8; rl as usize * bs];
        a.read(&mut SyncExecutor, ArrayBlock(rs), &mut got).unwrap();
        assert_eq!(
            got,
            model[rs as usize * bs..][..got.len()],
            "read after op {i}"
        );
    }
}

#[test]
fn writes_of_any_shape_read_back_and_keep_parity() {
    for (n, chunk, block) in [
        (3, 4096, 512),
        (4, 8192, 4096),
        (5, 16384, 512),
        (6, 4096, 4096),
    ] {
        let r = rig(n, chunk, block);
        let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
        exercise(&r, n as u64, 60, &mut model);
        assert_eq!(read_all(&r.array).unwrap(), model);
        assert_eq!(scrub_mismatches(&r.array), 0, "n={n} chunk={chunk}");
        let s = r.array.stats();
        assert!(s.full_stripe > 0 && s.rmw + s.rcw > 0, "{s:?}");
    }
}

#[test]
fn mode_choice_reads_less() {
    // 6 members (5 data): one block → RMW (2 reads) beats RCW (4 reads).
    let r = rig(6, 4096, 4096);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &[1u8; 4096])
        .unwrap();
    assert_eq!(r.array.stats().rmw, 1);
    // 3 members (2 data): one block → RCW (1 read) beats RMW (2 reads).
    let r = rig(3, 4096, 4096);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &[1u8; 4096])
        .unwrap();
    assert_eq!(r.array.stats().rcw, 1);
    // A whole stripe → full-stripe path.
    let r = rig(4, 4096, 4096);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(3), &[7u8; 3 * 4096])
        .unwrap();
    assert_eq!(r.array.stats().full_stripe, 1);
    assert_eq!(scrub_mismatches(&r.array), 0);
}

#[test]
fn bad_requests_are_errors() {
    let r = rig(3, 4096, 4096);
    let cap = r.array.geometry().capacity_blocks();
    let mut b = vec![0u8; 4096];
    assert!(matches!(
        r.array.read(&mut SyncExecutor, ArrayBlock(cap), &mut b),
        Err(RaidError::Geometry(_))
    ));
    assert!(matches!(
        r.array.write(&mut SyncExecutor, ArrayBlock(0), &b[..100]),
        Err(RaidError::BufferSize { .. })
    ));
    assert!(matches!(
        r.array.write(&mut SyncExecutor, ArrayBlock(0), &[]),
        Err(RaidError::BufferSize { .. })
    ));
}

#[test]
fn degraded_reads_and_writes_then_rebuild_onto_spare() {
    for victim in 0..4 {
        let r = rig(4, 8192, 512);
        let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
        exercise(&r, 11, 20, &mut model);
        r.faults[victim].inject(Fault::Vanished);
        // Reads hit the dead member, mark it failed, and reconstruct.
        assert_eq!(read_all(&r.array).unwrap(), model);
        assert_eq!(r.array.degraded_roles(), vec![victim]);
        assert!(r.array.stats().degraded_read_segments > 0);
        // The failure is persisted in the survivors' superblocks.
        for (i, m) in r.mems.iter().enumerate() {
            let sb = crate::superblock::Superblock::decode(&m.snapshot()[..4096]).unwrap();
            if i != victim {
                assert_eq!(sb.role_states[victim], SlotState::Failed);
            }
        }
        exercise(&r, 12, 30, &mut model);
        assert_eq!(read_all(&r.array).unwrap(), model);
        // A spare arrives: it is taken at once and rebuilt online.
        let spare = MemMember::new("spare", MIB + 16 * 8192);
        r.array.add_spare(Arc::new(spare.clone())).unwrap();
        assert_eq!(r.array.member_states()[victim], SlotState::Rebuilding);
        let p = r.array.rebuild_step(&mut SyncExecutor, 3).unwrap().unwrap();
        assert!(!p.finished && p.fraction > 0.0 && p.fraction < 1.0);
        assert_eq!(p.done, 3);
        if let Some(eta) = p.eta {
            // 13 stripes left at the measured rate of chunk-sized writes.
            let expect = 13.0 * 8192.0 / p.bytes_per_sec;
            assert!(
                (eta.as_secs_f64() - expect).abs() <= expect * 0.01 + 1e-6,
                "{eta:?} vs {expect}"
            );
        }
        // Writes during the rebuild, on both sides of the checkpoint.
        exercise(&r, 13, 10, &mut model);
        let mut t = Throttle::new(None);
        let p = r
            .array
            .run_rebuild(&mut SyncExecutor, &mut t)
            .unwrap()
            .unwrap();
        assert!(p.finished, "{p:?}");
        assert!(r.array.degraded_roles().is_empty());
        assert_eq!(read_all(&r.array).unwrap(), model);
        assert_eq!(scrub_mismatches(&r.array), 0);
        // The spare now really holds the role's data: fail another member and read.
        r.faults[(victim + 1) % 4].inject(Fault::Vanished);
        assert_eq!(read_all(&r.array).unwrap(), model);
    }
}

#[test]
fn write_error_marks_member_failed_and_data_survives() {
    let r = rig(5, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 3, 10, &mut model);
    r.faults[2].inject(Fault::FailAfter { ops: 0 });
    exercise(&r, 4, 30, &mut model);
    assert_eq!(r.array.degraded_roles(), vec![2]);
    assert_eq!(read_all(&r.array).unwrap(), model);
}

#[test]
fn second_failure_stops_the_array_instead_of_returning_wrong_data() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 5, 10, &mut model);
    r.faults[0].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
    r.faults[3].inject(Fault::Vanished);
    let err = read_all(&r.array).unwrap_err();
    assert!(
        matches!(&err, RaidError::ArrayFailed { failed, .. } if failed.len() == 2),
        "{err}"
    );
    assert!(r.array.is_failed());
    assert!(matches!(
        r.array
            .write(&mut SyncExecutor, ArrayBlock(0), &[0u8; 4096]),
        Err(RaidError::ArrayFailed { .. })
    ));
}

#[test]
fn rebuild_target_failure_drops_rebuild_and_takes_next_spare() {
    let r = rig(3, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 8, 10, &mut model);
    r.faults[1].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
    let bad = FaultyMember::new(Arc::new(MemMember::new("bad-spare", MIB + 16 * 4096)), 9);
    bad.handle().inject(Fault::ErrorRange {
        kind: crate::member::OpKind::Write,
        start: MIB as u64,
        end: u64::MAX,
    });
    r.array.add_spare(Arc::new(bad)).unwrap();
    r.array
        .add_spare(Arc::new(MemMember::new("good-spare", MIB + 16 * 4096)))
        .unwrap();
    // The last spare added is taken first; make sure both get exercised whatever the order.
    let mut t = Throttle::new(None);
    for _ in 0..3 {
        r.array.run_rebuild(&mut SyncExecutor, &mut t).unwrap();
    }
    assert!(
        r.array.degraded_roles().is_empty(),
        "{:?}",
        r.array.member_states()
    );
    assert_eq!(read_all(&r.array).unwrap(), model);
}

fn clones(r: &Rig) -> Vec<Arc<dyn Member>> {
    r.mems
        .iter()
        .map(|m| Arc::new(m.clone()) as Arc<dyn Member>)
        .collect()
}

#[test]
fn assembles_in_any_order_and_refuses_foreign_and_stale_members() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 21, 20, &mut model);
    r.array.stop().unwrap();
    let mut shuffled = clones(&r);
    shuffled.reverse();
    shuffled.swap(0, 2);
    // A member of another array.
    let other = rig(4, 4096, 4096);
    shuffled.push(Arc::new(other.mems[1].clone()));
    // A blank disk.
    shuffled.push(Arc::new(MemMember::new("blank", MIB + 65536)));
    let asm = Array::assemble(shuffled, Some(r.array.uuid()), Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.resync_pending);
    assert_eq!(asm.refused.len(), 2);
    assert!(asm
        .refused
        .iter()
        .any(|f| matches!(f.reason, RefuseReason::Foreign { .. })));
    assert!(asm.refused.iter().any(|f| f.member == "blank"));
    assert_eq!(read_all(&asm.array).unwrap(), model);
    drop(asm);

    // Member 1 fails; the survivors move on; it comes back stale and is refused.
    let r2 = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect()))
        .unwrap()
        .array;
    let stale_copy = r.mems[1].snapshot();
    let failing = FaultyMember::new(Arc::new(r.mems[1].clone()), 1);
    failing.handle().inject(Fault::Vanished);
    let mut set = clones(&r);
    set[1] = Arc::new(failing);
    drop(r2);
    let asm = Array::assemble(set, None, Arc::new(CpuXor::detect())).unwrap();
    assert!(asm
        .refused
        .iter()
        .any(|f| matches!(f.reason, RefuseReason::Unreadable(_))));
    assert_eq!(asm.array.degraded_roles(), vec![1]);
    assert_eq!(read_all(&asm.array).unwrap(), model);
    asm.array.stop().unwrap();
    drop(asm);
    r.mems[1].poke(0, &stale_copy[..4096]);
    let asm = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect())).unwrap();
    let why: Vec<String> = asm.refused.iter().map(ToString::to_string).collect();
    assert!(
        asm.refused.iter().any(|f| f.member == "m1"
            && matches!(
                f.reason,
                RefuseReason::Stale { .. } | RefuseReason::MarkedFailed { .. }
            )),
        "{why:?}"
    );
    assert!(why.iter().any(|w| w.contains("m1")), "{why:?}");
    assert_eq!(read_all(&asm.array).unwrap(), model);

    // Two members missing: refused with every reason listed.
    let only_two: Vec<Arc<dyn Member>> = clones(&r).into_iter().take(2).collect();
    let err = Array::assemble(only_two, None, Arc::new(CpuXor::detect())).unwrap_err();
    assert!(err.to_string().contains("missing or failed"), "{err}");
}

#[test]
fn unclean_stop_resyncs_only_dirty_regions() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 31, 5, &mut model);
    r.array.stop().unwrap();
    let a = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect()))
        .unwrap()
        .array;
    // One small write (region 0 only), then "power loss": no stop().
    a.write(&mut SyncExecutor, ArrayBlock(0), &[9u8; 4096])
        .unwrap();
    model[..4096].fill(9);
    assert_eq!(a.dirty_regions(), vec![0]);
    assert_eq!(a.bitmap_region_stripes(), 2);
    // Corrupt parity of stripe 0 as a torn write would leave it.
    let pm = a.geometry().parity_member(StripeIdx(0)).0;
    drop(a);
    r.mems[pm].poke(MIB, &[0xAA; 4096]);
    let asm = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect())).unwrap();
    assert!(asm.resync_pending && !asm.write_hole_exposed);
    let p = asm
        .array
        .resync_step(&mut SyncExecutor, 1000)
        .unwrap()
        .unwrap();
    assert!(p.finished);
    assert_eq!(p.mismatches, 1, "only the torn stripe differed");
    assert!(!asm.array.resync_pending());
    assert_eq!(scrub_mismatches(&asm.array), 0);
    assert_eq!(read_all(&asm.array).unwrap(), model);
}

#[test]
fn new_array_without_assume_clean_resyncs_everything() {
    let (mems, _f, arcs) = members(3, MIB + 8 * 4096);
    mems[0].poke(MIB, &[1u8; 4096]);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        ..ArrayConfig::default()
    };
    let a = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    assert!(a.resync_pending());
    let p = a
        .run_resync(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap()
        .unwrap();
    assert!(p.finished && p.mismatches >= 1);
    assert_eq!(scrub_mismatches(&a), 0);
}

#[test]
fn scrub_finds_and_repairs_silent_corruption() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 41, 20, &mut model);
    r.mems[2].poke(MIB + 3 * 4096, &[0x5A; 100]);
    r.mems[0].poke(MIB + 9 * 4096, &[0x5A; 100]);
    assert_eq!(scrub_mismatches(&r.array), 2);
    let p = r
        .array
        .run_scrub(&mut SyncExecutor, true, &mut Throttle::new(Some(1 << 40)))
        .unwrap();
    assert_eq!(p.mismatches, 2);
    assert_eq!(scrub_mismatches(&r.array), 0);
}

/// Records the address of every buffer written, to prove the payload is not copied.
#[derive(Debug)]
struct Recorder {
    inner: MemMember,
    writes: Arc<Mutex<Vec<(usize, usize)>>>,
}

impl Member for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        if offset >= MIB as u64 {
            self.writes
                .lock()
                .unwrap()
                .push((buf.as_ptr() as usize, buf.len()));
        }
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), MemberError> {
        Ok(())
    }
}

#[test]
fn payload_goes_to_members_from_the_callers_buffer() {
    let writes = Arc::new(Mutex::new(Vec::new()));
    let arcs: Vec<Arc<dyn Member>> = (0..4)
        .map(|i| {
            Arc::new(Recorder {
                inner: MemMember::new(&format!("r{i}"), MIB + 8 * 4096),
                writes: writes.clone(),
            }) as Arc<dyn Member>
        })
        .collect();
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let a = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let data = pattern(1, 5 * 4096);
    a.write(&mut SyncExecutor, ArrayBlock(1), &data).unwrap();
    let w = writes.lock().unwrap();
    let (lo, hi) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
    let from_caller: usize = w
        .iter()
        .filter(|(p, l)| *p >= lo && p + l <= hi)
        .map(|(_, l)| l)
        .sum();
    assert_eq!(
        from_caller,
        data.len(),
        "every payload byte written from the caller's buffer"
    );
    // Blocks 1..=5 touch stripes 0 and 1: one parity write each are the only other writes.
    assert_eq!(
        w.len() - w.iter().filter(|(p, _)| *p >= lo && *p < hi).count(),
        2
    );
}

#[test]
fn concurrent_writers_on_shared_stripes_keep_parity_consistent() {
    let r = rig(4, 4096, 4096);
    let a = Arc::new(r.array);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 0..200u64 {
                    let start = (i * 7 + t * 3) % 20;
                    let data = pattern(t * 1000 + i, ((i % 5) + 1) as usize * 4096);
                    a.write(&mut SyncExecutor, ArrayBlock(start), &data)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(scrub_mismatches(&a), 0);
}

#[test]
fn bitmap_bits_are_durable_before_writes_and_cleared_when_idle() {
    let r = rig(4, 4096, 4096);
    // Stripe 5 lies in region 2 (2 stripes per bit).
    let block = r.array.geometry().logical_block(StripeIdx(5), 0, 0);
    r.array
        .write(&mut SyncExecutor, block, &[3u8; 4096])
        .unwrap();
    assert_eq!(r.array.dirty_regions(), vec![2]);
    for m in &r.mems {
        let bits = m.snapshot()[4096];
        assert_eq!(bits, 0b100, "bit 2 on every member's copy");
    }
    r.array.clear_bitmap().unwrap();
    assert!(r.array.dirty_regions().is_empty());
    assert!(r.mems.iter().all(|m| m.snapshot()[4096] == 0));
}

#[test]
fn bitmap_aging_clears_a_region_only_after_a_whole_idle_period() {
    let r = rig(4, 4096, 4096);
    let g = *r.array.geometry();
    let write = |stripe: u64| {
        let block = g.logical_block(StripeIdx(stripe), 0, 0);
        r.array
            .write(&mut SyncExecutor, block, &[7u8; 4096])
            .unwrap();
    };
    write(1); // region 0
    write(5); // region 2
    assert_eq!(r.array.dirty_regions(), vec![0, 2]);
    // First pass: both were written since the (imaginary) previous pass: kept.
    assert_eq!(r.array.age_bitmap().unwrap(), 0);
    assert_eq!(r.array.dirty_regions(), vec![0, 2]);
    write(4); // region 2 again, between the passes
    assert_eq!(
        r.array.age_bitmap().unwrap(),
        1,
        "region 0 idle for a whole period"
    );
    assert_eq!(r.array.dirty_regions(), vec![2]);
    assert!(
        r.mems.iter().all(|m| m.snapshot()[4096] == 0b100),
        "persisted"
    );
    assert_eq!(r.array.age_bitmap().unwrap(), 1);
    assert!(r.array.dirty_regions().is_empty());
    assert!(r.mems.iter().all(|m| m.snapshot()[4096] == 0));
    // A region set again after being cleared is persisted again before the write.
    write(1);
    assert!(r.mems.iter().all(|m| m.snapshot()[4096] == 0b1));
}

#[test]
fn rebuild_runs_online_while_threads_write_and_read() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 51, 10, &mut model);
    r.faults[2].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
    r.array
        .add_spare(Arc::new(MemMember::new("spare", MIB + 16 * 4096)))
        .unwrap();
    let a = &r.array;
    let cap = a.geometry().capacity_blocks();
    let bs = 4096;
    // Each writer owns a third of the array, so the final contents are known.
    let thirds: Vec<(u64, u64)> = (0..3).map(|t| (t * cap / 3, (t + 1) * cap / 3)).collect();
    let finals: Vec<Vec<u8>> = std::thread::scope(|sc| {
        let rebuild = sc.spawn(|| {
            let mut steps = 0;
            while let Some(p) = a.rebuild_step(&mut SyncExecutor, 1).unwrap() {
                steps += 1;
                if p.finished {
                    break;
                }
                std::thread::yield_now();
            }
            steps
        });
        let writers: Vec<_> = thirds
            .iter()
            .enumerate()
            .map(|(t, &(lo, hi))| {
                let model = &model;
                sc.spawn(move || {
                    let mut mine = model[lo as usize * bs..hi as usize * bs].to_vec();
                    for i in 0..60u64 {
                        let start = lo + (i * 7 + t as u64) % (hi - lo);
                        let len = ((i % 5) + 1).min(hi - start);
                        let data = pattern(t as u64 * 100 + i, len as usize * bs);
                        a.write(&mut SyncExecutor, ArrayBlock(start), &data)
                            .unwrap();
                        let o = (start - lo) as usize * bs;
                        mine[o..o + data.len()].copy_from_slice(&data);
                        let mut back = vec![0u8; data.len()];
                        a.read(&mut SyncExecutor, ArrayBlock(start), &mut back)
                            .unwrap();
                        assert!(back == data, "read-your-write during rebuild");
                    }
                    mine
                })
            })
            .collect();
        assert!(rebuild.join().unwrap() > 1);
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for ((lo, hi), f) in thirds.iter().zip(finals) {
        model[*lo as usize * bs..*hi as usize * bs].copy_from_slice(&f);
    }
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(scrub_mismatches(&r.array), 0);
    // And the rebuilt member really holds its data: lose another one.
    r.faults[0].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
}

#[test]
fn throttle_paces_to_the_configured_rate() {
    let t0 = std::time::Instant::now();
    let mut t = Throttle::new(Some(1_000_000));
    assert_eq!(t.account(0, t0), std::time::Duration::ZERO);
    let pause = t.account(500_000, t0);
    assert!(
        pause >= std::time::Duration::from_millis(499)
            && pause <= std::time::Duration::from_millis(501)
    );
    let later = t0 + std::time::Duration::from_secs(2);
    assert_eq!(
        t.account(100_000, later),
        std::time::Duration::ZERO,
        "behind schedule: no pause"
    );
    let mut free = Throttle::new(None);
    assert_eq!(free.account(u64::MAX / 2, t0), std::time::Duration::ZERO);
}

#[test]
fn rebuild_resumes_from_its_checkpoint_after_restart() {
    let stripes = 200;
    let (mems, _f, arcs) = members(3, MIB + stripes * 4096);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let a = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let cap = a.geometry().capacity_bytes() as usize;
    let data = pattern(9, cap);
    a.write(&mut SyncExecutor, ArrayBlock(0), &data).unwrap();
    a.stop().unwrap();
    drop(a);
    // Member 1 is gone; a blank replacement is rebuilt part of the way.
    let spare = MemMember::new("spare", MIB + stripes * 4096);
    let set = |with: &MemMember| -> Vec<Arc<dyn Member>> {
        vec![
            Arc::new(mems[0].clone()),
            Arc::new(mems[2].clone()),
            Arc::new(with.clone()),
        ]
    };
    let a = Array::assemble(
        set(&MemMember::new("none", 1)),
        None,
        Arc::new(CpuXor::detect()),
    )
    .unwrap()
    .array;
    a.add_spare(Arc::new(spare.clone())).unwrap();
    let p = a.rebuild_step(&mut SyncExecutor, 100).unwrap().unwrap();
    assert_eq!(p.done, 100);
    // Crash (no stop): the persisted checkpoint is the last multiple of 64.
    drop(a);
    let a = Array::assemble(set(&spare), None, Arc::new(CpuXor::detect()))
        .unwrap()
        .array;
    assert_eq!(a.rebuild_progress().unwrap().done, 64);
    a.rebuild_step(&mut SyncExecutor, 10).unwrap();
    // Clean stop keeps the exact position.
    a.stop().unwrap();
    drop(a);
    let a = Array::assemble(set(&spare), None, Arc::new(CpuXor::detect()))
        .unwrap()
        .array;
    assert_eq!(a.rebuild_progress().unwrap().done, 74);
    let mut t = Throttle::new(None);
    assert!(
        a.run_rebuild(&mut SyncExecutor, &mut t)
            .unwrap()
            .unwrap()
            .finished
    );
    assert!(a.degraded_roles().is_empty());
    assert_eq!(read_all(&a).unwrap(), data);
    assert_eq!(scrub_mismatches(&a), 0);
}

#[test]
fn dirty_degraded_without_log_is_refused_unless_forced() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 61, 10, &mut model);
    // Power is cut in the middle of a healthy write...
    let switch = crate::member::PowerSwitch::after(2);
    for f in &r.faults {
        f.inject(Fault::PowerLoss(switch.clone()));
    }
    let _ = r
        .array
        .write(&mut SyncExecutor, ArrayBlock(0), &[7u8; 3 * 4096]);
    // ...and member 3 does not come back.
    let three: Vec<Arc<dyn Member>> = r.mems[..3]
        .iter()
        .map(|m| Arc::new(m.clone()) as Arc<dyn Member>)
        .collect();
    let err = Array::assemble(three.clone(), None, Arc::new(CpuXor::detect())).unwrap_err();
    assert!(err.to_string().contains("start_dirty_degraded"), "{err}");
    let opts = AssembleOptions {
        expect: None,
        start_dirty_degraded: true,
    };
    let asm = Array::assemble_with(three, &opts, Arc::new(CpuXor::detect())).unwrap();
    assert!(asm.write_hole_exposed);
    // Blocks outside the interrupted write's stripe are still right.
    let stripe_blocks = asm.array.geometry().stripe_data_blocks() as usize;
    let all = read_all(&asm.array).unwrap();
    assert!(all[stripe_blocks * 4096..] == model[stripe_blocks * 4096..]);
}

#[test]
fn administrator_replaces_a_healthy_member_with_a_spare() {
    let r = rig(4, 4096, 4096);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 71, 10, &mut model);
    r.array
        .add_spare(Arc::new(MemMember::new("spare", MIB + 16 * 4096)))
        .unwrap();
    assert!(r.array.set_faulty(MemberIdx(9)).is_err());
    r.array.set_faulty(MemberIdx(2)).unwrap();
    // The spare took the role at once.
    assert_eq!(r.array.member_states()[2], SlotState::Rebuilding);
    assert_eq!(r.array.spares(), 0);
    assert!(
        r.array.set_faulty(MemberIdx(1)).is_err(),
        "a second one would stop the array"
    );
    exercise(&r, 72, 10, &mut model);
    r.array
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap();
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(read_all(&r.array).unwrap(), model);
    // The replaced disk is refused by a later assembly: its role belongs to the spare now.
    r.array.stop().unwrap();
    let old = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect()));
    let refused: Vec<String> = match &old {
        Ok(a) => a.refused.iter().map(ToString::to_string).collect(),
        Err(e) => vec![e.to_string()],
    };
    assert!(refused.iter().any(|w| w.contains("m2")), "{refused:?}");
}

#[test]
fn concurrent_io_with_failures_rebuilds_and_scrubs() {
    for seed in 0..3u64 {
        let r = rig(5, 4096, 512);
        let cap = r.array.geometry().capacity_blocks();
        let bs = 512usize;
        let workers = 4u64;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let a = &r.array;
        let faults = &r.faults;
        let finals: Vec<(u64, Vec<u8>)> = std::thread::scope(|sc| {
            // Chaos: fail a member, bring a spare, rebuild in small steps, scrub, repeat.
            let chaos = sc.spawn(|| {
                let mut rounds = 0;
                for round in 0..2u64 {
                    let victim = ((seed + round) % 5) as usize;
                    // Find the wrapper still serving that role: after a rebuild the spare
                    // serves it, so fail a different original member instead.
                    if round == 0 {
                        faults[victim].inject(Fault::Vanished);
                    } else {
                        // Fails in the middle of whatever the writers are doing.
                        faults[victim].inject(Fault::FailAfter { ops: 5 + seed * 7 });
                    }
                    let mut buf = vec![0u8; 512];
                    let _ = a.read(&mut SyncExecutor, ArrayBlock(0), &mut buf);
                    a.add_spare(Arc::new(MemMember::new(
                        &format!("spare{round}"),
                        MIB + 16 * 4096,
                    )))
                    .unwrap();
                    while let Some(p) = a.rebuild_step(&mut SyncExecutor, 2).unwrap() {
                        if p.finished {
                            break;
                        }
                        std::thread::yield_now();
                    }
                    let _ = a.scrub_step(&mut SyncExecutor, 4, false).unwrap();
                    a.clear_bitmap().unwrap();
                    rounds += 1;
                }
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                rounds
            });
            let writers: Vec<_> = (0..workers)
                .map(|t| {
                    let stop = &stop;
                    sc.spawn(move || {
                        let (lo, hi) = (t * cap / workers, (t + 1) * cap / workers);
                        let mut mine = vec![0u8; (hi - lo) as usize * bs];
                        let mut x = seed * 100 + t + 1;
                        let mut i = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::SeqCst) || i < 20 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let start = lo + x % (hi - lo);
                            let len = (1 + (x >> 20) % 24).min(hi - start);
                            let data = pattern(x, len as usize * bs);
                            a.write(&mut SyncExecutor, ArrayBlock(start), &data)
                                .unwrap();
                            let o = (start - lo) as usize * bs;
                            mine[o..o + data.len()].copy_from_slice(&data);
                            let mut back = vec![0u8; data.len()];
                            a.read(&mut SyncExecutor, ArrayBlock(start), &mut back)
                                .unwrap();
                            assert!(back == data, "read-your-write");
                            i += 1;
                        }
                        (lo, mine)
                    })
                })
                .collect();
            assert_eq!(chaos.join().unwrap(), 2);
            writers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        // The armed member may fail only now (the next reads touch it); finish any rebuild.
        let mut all = read_all(&r.array).unwrap();
        for _ in 0..3 {
            r.array
                .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
                .unwrap();
            all = read_all(&r.array).unwrap();
            if r.array.degraded_roles().is_empty() {
                break;
            }
        }
        for (lo, mine) in finals {
            let o = lo as usize * bs;
            assert!(
                all[o..o + mine.len()] == mine[..],
                "seed {seed}: region at {lo}"
            );
        }
        assert!(r.array.degraded_roles().is_empty(), "seed {seed}");
        assert_eq!(scrub_mismatches(&r.array), 0, "seed {seed}");
    }
}

#[test]
fn power_cut_under_concurrent_writers_healthy_and_degraded() {
    for (seed, degraded) in [(1u64, false), (2, true), (3, false), (4, true)] {
        let r = rig(4, 4096, 512);
        let bs = 512usize;
        let cap = r.array.geometry().capacity_blocks();
        let fill = pattern(seed + 100, cap as usize * bs);
        r.array
            .write(&mut SyncExecutor, ArrayBlock(0), &fill)
            .unwrap();
        let initial = read_all(&r.array).unwrap();
        if degraded {
            r.faults[(seed % 4) as usize].inject(Fault::Vanished);
            assert_eq!(read_all(&r.array).unwrap(), initial);
        }
        let switch = crate::member::PowerSwitch::after(40 + seed * 13);
        for f in &r.faults {
            f.inject(Fault::PowerLoss(switch.clone()));
        }
        let workers = 3u64;
        let a = &r.array;
        // Per thread: every write (start, data, durable), in order.
        let logs: Vec<Vec<(u64, Vec<u8>, bool)>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..workers)
                .map(|t| {
                    let switch = switch.clone();
                    sc.spawn(move || {
                        let (lo, hi) = (t * cap / workers, (t + 1) * cap / workers);
                        let mut log = Vec::new();
                        let mut x = seed * 31 + t + 1;
                        for _ in 0..40 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let start = lo + x % (hi - lo);
                            let len = (1 + (x >> 20) % 20).min(hi - start);
                            let data = pattern(x, len as usize * bs);
                            if a.write(&mut SyncExecutor, ArrayBlock(start), &data)
                                .is_err()
                            {
                                break;
                            }
                            // Returned before the cut: every member write reached the media.
                            let durable = !switch.is_cut();
                            log.push((start, data, durable));
                        }
                        log
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            switch.is_cut(),
            "seed {seed}: the cut happened during the run"
        );
        let asm = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect())).unwrap();
        assert!(!asm.write_hole_exposed);
        let a = asm.array;
        while a
            .resync_step(&mut SyncExecutor, 64)
            .unwrap()
            .is_some_and(|p| !p.finished)
        {}
        let got = read_all(&a).unwrap();
        for log in &logs {
            // For every block: its value after the last durable write, or any later write.
            let mut allowed: std::collections::HashMap<u64, Vec<&[u8]>> = Default::default();
            for (start, data, durable) in log {
                for (k, blk) in data.chunks(bs).enumerate() {
                    let b = start + k as u64;
                    let e = allowed
                        .entry(b)
                        .or_insert_with(|| vec![&initial[b as usize * bs..(b as usize + 1) * bs]]);
                    if *durable {
                        e.clear();
                    }
                    e.push(blk);
                }
            }
            for (b, ok) in allowed {
                let now = &got[b as usize * bs..(b as usize + 1) * bs];
                assert!(
                    ok.contains(&now),
                    "seed {seed} degraded={degraded}: block {b} holds no written version"
                );
            }
        }
        // Blocks nobody wrote kept their contents, including the missing member's.
        let written: std::collections::HashSet<u64> = logs
            .iter()
            .flatten()
            .flat_map(|(s, d, _)| *s..*s + (d.len() / bs) as u64)
            .collect();
        for b in 0..cap {
            if !written.contains(&b) {
                let i = b as usize * bs;
                assert!(
                    got[i..i + bs] == initial[i..i + bs],
                    "seed {seed}: untouched block {b}"
                );
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Assembly never panics on superblocks that pass their checksum but carry arbitrary
    /// field values (a buggy or hostile writer): it assembles or refuses with an error.
    #[test]
    fn assembly_is_total_over_checksummed_garbage(
        edits in proptest::collection::vec((0usize..4, 8usize..0x300, proptest::prelude::any::<u8>()), 1..8),
    ) {
        let r = rig(4, 4096, 4096);
        r.array.stop().unwrap();
        for (m, off, val) in edits {
            let mut sb = r.mems[m].snapshot()[..4096].to_vec();
            sb[off] = val;
            let crc = crate::superblock::crc32c(&sb[..4092]);
            sb[4092..].copy_from_slice(&crc.to_le_bytes());
            r.mems[m].poke(0, &sb);
        }
        if let Ok(asm) = Array::assemble(clones(&r), None, Arc::new(CpuXor::detect())) {
            // Whatever assembled must serve reads without panicking.
            let mut buf = vec![0u8; 4096];
            let _ = asm.array.read(&mut SyncExecutor, ArrayBlock(0), &mut buf);
            let _ = asm.array.write(&mut SyncExecutor, ArrayBlock(0), &buf);
        }
    }
}

// ---- Hot replace ----

/// `n` members, 4 KiB chunks and blocks, `stripes` stripes, bitmap regions of 8 stripes.
fn rig_stripes(n: usize, stripes: usize) -> Rig {
    let (mems, faults, arcs) = members(n, MIB + stripes * 4096);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        bitmap_region_stripes: Some(8),
        ..ArrayConfig::default()
    };
    let array = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    Rig {
        mems,
        faults,
        array,
    }
}

/// A new disk for `stripes` stripes of 4 KiB chunks, behind a fault injector.
fn new_disk(name: &str, stripes: usize) -> (MemMember, FaultHandle, Arc<dyn Member>) {
    let m = MemMember::new(name, MIB + stripes * 4096);
    let f = FaultyMember::new(Arc::new(m.clone()), 77);
    let h = f.handle();
    (m, h, Arc::new(f))
}

fn refusals(asm: &Assembled) -> Vec<(String, String)> {
    asm.refused
        .iter()
        .map(|r| (r.member.clone(), r.reason.to_string()))
        .collect()
}

fn assemble_from(mems: &[MemMember], extra: &[&MemMember]) -> Assembled {
    let cands: Vec<Arc<dyn Member>> = mems
        .iter()
        .chain(extra.iter().copied())
        .map(|m| Arc::new(m.clone()) as Arc<dyn Member>)
        .collect();
    Array::assemble(cands, None, Arc::new(CpuXor::detect())).unwrap()
}

#[test]
fn hot_replace_under_concurrent_writes_keeps_redundancy_and_hands_over() {
    let r = rig_stripes(4, 200);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 81, 20, &mut model);
    let (new, _h, disk) = new_disk("new", 200);
    r.array.replace(MemberIdx(1), disk).unwrap();
    assert_eq!(
        r.array.replace_status(),
        Some(ReplaceStatus {
            role: MemberIdx(1),
            old: Some("m1".into()),
            new: "new".into(),
            copied_stripes: 0,
        })
    );
    let p = r.array.rebuild_progress().unwrap();
    assert_eq!(
        (p.kind, p.done, p.finished),
        (SyncKind::Replace { role: 1 }, 0, false)
    );
    // Part of the copy, then writes on both sides of its checkpoint (the copied side must
    // reach both disks), then the rest while threads write and read.
    r.array.rebuild_step(&mut SyncExecutor, 60).unwrap();
    exercise(&r, 82, 20, &mut model);
    let events = r.array.events();
    let a = &r.array;
    let cap = a.geometry().capacity_blocks();
    let bs = 4096;
    let thirds: Vec<(u64, u64)> = (0..3).map(|t| (t * cap / 3, (t + 1) * cap / 3)).collect();
    let finals: Vec<Vec<u8>> = std::thread::scope(|sc| {
        let copy = sc.spawn(|| {
            let mut steps = 0;
            loop {
                let p = a.rebuild_step(&mut SyncExecutor, 1).unwrap().unwrap();
                steps += 1;
                // Redundancy never lapses: no role is reported missing or rebuilding.
                assert!(a.degraded_roles().is_empty(), "degraded during a replace");
                assert_eq!(p.kind, SyncKind::Replace { role: 1 });
                if p.finished {
                    break;
                }
                std::thread::yield_now();
            }
            steps
        });
        let writers: Vec<_> = thirds
            .iter()
            .enumerate()
            .map(|(t, &(lo, hi))| {
                let model = &model;
                sc.spawn(move || {
                    let mut mine = model[lo as usize * bs..hi as usize * bs].to_vec();
                    for i in 0..60u64 {
                        let start = lo + (i * 13 + t as u64) % (hi - lo);
                        let len = ((i % 7) + 1).min(hi - start);
                        let data = pattern(t as u64 * 1000 + i, len as usize * bs);
                        a.write(&mut SyncExecutor, ArrayBlock(start), &data)
                            .unwrap();
                        let o = (start - lo) as usize * bs;
                        mine[o..o + data.len()].copy_from_slice(&data);
                        let mut back = vec![0u8; data.len()];
                        a.read(&mut SyncExecutor, ArrayBlock(start), &mut back)
                            .unwrap();
                        assert!(back == data, "read-your-write during a replace");
                    }
                    mine
                })
            })
            .collect();
        assert!(copy.join().unwrap() >= 140 / REBUILD_ROUND as usize);
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for ((lo, hi), f) in thirds.iter().zip(finals) {
        model[*lo as usize * bs..*hi as usize * bs].copy_from_slice(&f);
    }
    // The new member holds the role; superblocks were updated.
    assert_eq!(r.array.replace_status(), None);
    assert_eq!(r.array.rebuild_progress(), None);
    assert_eq!(r.array.member_names()[1].as_deref(), Some("new"));
    assert_eq!(r.array.role_of("new"), Some(MemberIdx(1)));
    assert_eq!(r.array.role_of("m1"), None);
    assert!(r.array.events() > events);
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(r.array.stats().member_failures, 0);
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(scrub_mismatches(&r.array), 0);
    // The old disk says it no longer holds the role, and a later assembly refuses it.
    let sb = Superblock::decode(&r.mems[1].snapshot()[..SB_BYTES]).unwrap();
    assert_eq!(sb.role, Role::Former(1));
    r.array.stop().unwrap();
    let asm = assemble_from(&r.mems, &[&new]);
    let refused = refusals(&asm);
    assert!(
        refused.len() == 1 && refused[0].0 == "m1" && refused[0].1.contains("belongs to"),
        "{refused:?}"
    );
    let a = asm.array;
    assert!(a.degraded_roles().is_empty() && !asm.resync_pending);
    assert_eq!(read_all(&a).unwrap(), model);
    // The new member really holds every chunk of the role: lose another member and read.
    a.set_faulty(MemberIdx(0)).unwrap();
    assert_eq!(read_all(&a).unwrap(), model);
}

#[test]
fn old_member_failing_mid_copy_turns_the_replace_into_a_rebuild() {
    let r = rig_stripes(4, 200);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 91, 20, &mut model);
    let (_new, _h, disk) = new_disk("new", 200);
    r.array.replace(MemberIdx(2), disk).unwrap();
    let p = r
        .array
        .rebuild_step(&mut SyncExecutor, 70)
        .unwrap()
        .unwrap();
    assert_eq!((p.kind, p.done), (SyncKind::Replace { role: 2 }, 70));
    // Writes on both sides of the copy checkpoint, then the old member dies.
    exercise(&r, 92, 10, &mut model);
    r.faults[2].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(r.array.replace_status(), None);
    assert_eq!(r.array.member_states()[2], SlotState::Rebuilding);
    assert_eq!(r.array.member_names()[2].as_deref(), Some("new"));
    let p = r.array.rebuild_progress().unwrap();
    assert_eq!((p.kind, p.done), (SyncKind::Rebuild { role: 2 }, 70));
    exercise(&r, 93, 10, &mut model);
    let p = r
        .array
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap()
        .unwrap();
    assert!(p.finished && p.kind == SyncKind::Rebuild { role: 2 });
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(scrub_mismatches(&r.array), 0);
    r.array.set_faulty(MemberIdx(0)).unwrap();
    assert_eq!(read_all(&r.array).unwrap(), model);
}

#[test]
fn old_member_read_errors_are_rebuilt_from_the_others_without_failing_it() {
    let r = rig_stripes(4, 64);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 101, 20, &mut model);
    let (_new, _h, disk) = new_disk("new", 64);
    r.array.replace(MemberIdx(3), disk).unwrap();
    // Two chunks of the old member cannot be read any more.
    r.faults[3].inject(Fault::ErrorRange {
        kind: crate::member::OpKind::Read,
        start: MIB as u64 + 10 * 4096,
        end: MIB as u64 + 12 * 4096,
    });
    let p = r
        .array
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap()
        .unwrap();
    assert!(p.finished && p.kind == SyncKind::Replace { role: 3 });
    let s = r.array.stats();
    assert_eq!((s.replace_reconstructed, s.member_failures), (2, 0));
    assert_eq!(r.array.member_names()[3].as_deref(), Some("new"));
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(scrub_mismatches(&r.array), 0);
}

#[test]
fn replacement_failing_mid_copy_drops_the_replace_and_is_refused_later() {
    let r = rig_stripes(4, 64);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 111, 20, &mut model);
    let (new, h, disk) = new_disk("new", 64);
    r.array.replace(MemberIdx(0), disk).unwrap();
    r.array.rebuild_step(&mut SyncExecutor, 20).unwrap();
    h.inject(Fault::Vanished);
    let p = r.array.rebuild_step(&mut SyncExecutor, 8).unwrap().unwrap();
    assert!(p.finished, "the copy ended");
    assert_eq!(r.array.replace_status(), None);
    assert_eq!(r.array.rebuild_progress(), None);
    assert_eq!(r.array.rebuild_step(&mut SyncExecutor, 8).unwrap(), None);
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(r.array.member_names()[0].as_deref(), Some("m0"));
    exercise(&r, 112, 10, &mut model);
    assert_eq!(read_all(&r.array).unwrap(), model);
    r.array.stop().unwrap();
    let asm = assemble_from(&r.mems, &[&new]);
    let refused = refusals(&asm);
    assert!(refused.len() == 1 && refused[0].0 == "new", "{refused:?}");
    assert!(asm.array.degraded_roles().is_empty());
    assert_eq!(read_all(&asm.array).unwrap(), model);
}

#[test]
fn another_member_failing_mid_copy_makes_the_new_disk_its_spare() {
    let r = rig_stripes(4, 64);
    let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
    exercise(&r, 121, 20, &mut model);
    let (_new, _h, disk) = new_disk("new", 64);
    r.array.replace(MemberIdx(1), disk).unwrap();
    r.array.rebuild_step(&mut SyncExecutor, 30).unwrap();
    r.faults[3].inject(Fault::Vanished);
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(r.array.replace_status(), None);
    let names = r.array.member_names();
    assert_eq!(names[1].as_deref(), Some("m1"));
    assert_eq!(names[3].as_deref(), Some("new"));
    let p = r.array.rebuild_progress().unwrap();
    assert_eq!((p.kind, p.done), (SyncKind::Rebuild { role: 3 }, 0));
    r.array
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap();
    assert!(r.array.degraded_roles().is_empty());
    assert_eq!(read_all(&r.array).unwrap(), model);
    assert_eq!(scrub_mismatches(&r.array), 0);
}

#[test]
fn hot_replace_resumes_after_restart_and_recopies_dirty_regions() {
    let stripes = 200;
    let r = rig_stripes(3, stripes);
    let cap = r.array.geometry().capacity_bytes() as usize;
    let mut model = pattern(131, cap);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &model)
        .unwrap();
    r.array.stop().unwrap();
    let (new, _h, disk) = new_disk("new", stripes);
    r.array.replace(MemberIdx(1), disk).unwrap();
    let p = r
        .array
        .rebuild_step(&mut SyncExecutor, 100)
        .unwrap()
        .unwrap();
    assert_eq!(p.done, 100);
    drop(r.array);
    // Crash with no write since the stop: the copy resumes from the persisted checkpoint.
    let a = assemble_from(&r.mems, &[&new]).array;
    let st = a.replace_status().unwrap();
    assert_eq!((st.role, st.copied_stripes), (MemberIdx(1), 64));
    assert!(a.degraded_roles().is_empty());
    a.rebuild_step(&mut SyncExecutor, 10).unwrap();
    // A clean stop keeps the exact position.
    a.stop().unwrap();
    drop(a);
    let mut cands: Vec<Arc<dyn Member>> = r
        .mems
        .iter()
        .map(|m| Arc::new(m.clone()) as Arc<dyn Member>)
        .collect();
    let wrapped = FaultyMember::new(Arc::new(new.clone()), 5);
    let power = wrapped.handle();
    cands.push(Arc::new(wrapped));
    let a = Array::assemble(cands, None, Arc::new(CpuXor::detect()))
        .unwrap()
        .array;
    assert_eq!(a.replace_status().unwrap().copied_stripes, 74);
    // A write to stripe 20 (bitmap region 16..24) that reaches the old member but not the
    // new one (its power goes first), then a crash: the copy goes back to the region's start.
    power.inject(Fault::DropWritesAfter { writes: 0 });
    let data = pattern(132, 4096);
    a.write(&mut SyncExecutor, ArrayBlock(40), &data).unwrap();
    model[40 * 4096..41 * 4096].copy_from_slice(&data);
    drop(a);
    let asm = assemble_from(&r.mems, &[&new]);
    assert!(asm.resync_pending);
    let a = asm.array;
    assert_eq!(a.replace_status().unwrap().copied_stripes, 16);
    while a
        .resync_step(&mut SyncExecutor, 64)
        .unwrap()
        .is_some_and(|p| !p.finished)
    {}
    let p = a
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap()
        .unwrap();
    assert!(p.finished && p.kind == SyncKind::Replace { role: 1 });
    assert_eq!(a.member_names()[1].as_deref(), Some("new"));
    assert_eq!(read_all(&a).unwrap(), model);
    assert_eq!(scrub_mismatches(&a), 0);
    a.stop().unwrap();
    drop(a);
    let asm = assemble_from(&r.mems, &[&new]);
    assert_eq!(refusals(&asm).len(), 1);
    assert_eq!(refusals(&asm)[0].0, "m1");
    asm.array.set_faulty(MemberIdx(2)).unwrap();
    assert_eq!(read_all(&asm.array).unwrap(), model);
}

#[test]
fn replace_with_the_old_member_gone_at_assembly_continues_as_a_rebuild() {
    let stripes = 100;
    let r = rig_stripes(3, stripes);
    let cap = r.array.geometry().capacity_bytes() as usize;
    let model = pattern(141, cap);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &model)
        .unwrap();
    r.array.stop().unwrap();
    let (new, _h, disk) = new_disk("new", stripes);
    r.array.replace(MemberIdx(0), disk).unwrap();
    r.array.rebuild_step(&mut SyncExecutor, 70).unwrap();
    r.array.stop().unwrap();
    drop(r.array);
    let asm = assemble_from(&r.mems[1..], &[&new]);
    let a = asm.array;
    assert_eq!(a.replace_status(), None);
    assert_eq!(a.member_states()[0], SlotState::Rebuilding);
    let p = a.rebuild_progress().unwrap();
    assert_eq!((p.kind, p.done), (SyncKind::Rebuild { role: 0 }, 70));
    a.run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap();
    assert!(a.degraded_roles().is_empty());
    assert_eq!(read_all(&a).unwrap(), model);
    assert_eq!(scrub_mismatches(&a), 0);
}

#[test]
fn replace_is_refused_when_it_cannot_keep_redundancy() {
    let r = rig_stripes(4, 16);
    let (_n, _h, disk) = new_disk("new", 16);
    let small: Arc<dyn Member> = Arc::new(MemMember::new("small", MIB));
    assert!(matches!(
        r.array.replace(MemberIdx(0), small),
        Err(RaidError::MemberTooSmall { .. })
    ));
    assert!(r.array.replace(MemberIdx(4), disk.clone()).is_err());
    let again: Arc<dyn Member> = Arc::new(MemMember::new("m2", MIB + 16 * 4096));
    assert!(
        r.array.replace(MemberIdx(0), again).is_err(),
        "a member of the array"
    );
    r.array.replace(MemberIdx(0), disk.clone()).unwrap();
    let (_n2, _h2, other) = new_disk("other", 16);
    assert!(r.array.replace(MemberIdx(1), other.clone()).is_err());
    assert!(r.array.cancel_replace().unwrap());
    assert!(!r.array.cancel_replace().unwrap());
    assert!(r.array.replace_status().is_none());
    r.array.set_faulty(MemberIdx(2)).unwrap();
    let err = r.array.replace(MemberIdx(1), other).unwrap_err();
    assert!(err.to_string().contains("degraded"), "{err}");
}

#[test]
fn torn_hand_over_leaves_the_new_member_holding_the_role() {
    // The last copy round writes chunks and bitmap blocks to the new member, then the
    // hand-over writes superblocks in role order. Find the power cut that leaves m0, m1 and m2
    // with the new table and m3 and the new member without it (the number of writes before
    // the superblocks depends on the write path's bookkeeping, so it is searched, not assumed).
    let mut found = None;
    for k in 0..96u64 {
        let r = rig_stripes(4, 16);
        let mut model = vec![0u8; r.array.geometry().capacity_bytes() as usize];
        exercise(&r, 151, 20, &mut model);
        let (new, h, disk) = new_disk("new", 16);
        r.array.replace(MemberIdx(3), disk).unwrap();
        r.array.rebuild_step(&mut SyncExecutor, 8).unwrap();
        let switch = crate::member::PowerSwitch::after(k);
        for f in r.faults.iter().chain([&h]) {
            f.inject(Fault::PowerLoss(switch.clone()));
        }
        let _ = r.array.rebuild_step(&mut SyncExecutor, 8);
        let events: Vec<u64> = r
            .mems
            .iter()
            .map(|m| {
                Superblock::decode(&m.snapshot()[..SB_BYTES])
                    .unwrap()
                    .events
            })
            .collect();
        let sb_new = Superblock::decode(&new.snapshot()[..SB_BYTES]).unwrap();
        let e = sb_new.events;
        if switch.is_cut()
            && sb_new.role == Role::Replacement(3)
            && events == [e + 1, e + 1, e + 1, e]
        {
            found = Some((r, model, new));
            break;
        }
    }
    let (r, model, new) = found.expect("no power cut leaves m0..m2 updated and m3/new behind");
    let sb_new = Superblock::decode(&new.snapshot()[..SB_BYTES]).unwrap();
    let sb_m0 = Superblock::decode(&r.mems[0].snapshot()[..SB_BYTES]).unwrap();
    assert_eq!(sb_new.role, Role::Replacement(3));
    assert_eq!(sb_m0.role_uuids[3], sb_new.member_uuid);
    assert_eq!(sb_m0.events, sb_new.events + 1);
    let asm = assemble_from(&r.mems, &[&new]);
    let refused = refusals(&asm);
    assert!(refused.len() == 1 && refused[0].0 == "m3", "{refused:?}");
    let a = asm.array;
    assert_eq!(a.member_names()[3].as_deref(), Some("new"));
    assert!(a.degraded_roles().is_empty());
    assert_eq!(read_all(&a).unwrap(), model);
    a.set_faulty(MemberIdx(0)).unwrap();
    assert_eq!(read_all(&a).unwrap(), model);
}

// ---- Whose log entries are replayed, and when the log covers ----

/// Writes a CRC-valid log entry for `stripe` (data index `d` modified, the whole chunk, a
/// partial parity of noise) into `disk`'s slot for it, as array `owner` at `epoch` would.
fn poke_entry(disk: &MemMember, a: &Array, owner: Uuid, epoch: u64, stripe: u64, d: usize) {
    let layout = ppl::PplLayout::new(&a.meta, &a.geo).unwrap();
    let rows = a.geo.chunk_blocks();
    let pp = pattern(999, rows as usize * a.geo.block_bytes());
    let entry = ppl::Entry {
        array: Some(owner),
        epoch,
        stripe,
        lo: 0,
        hi: rows,
        f: None,
        writes: vec![(d, 0, rows)],
        pp_crc: crate::superblock::crc32c(&pp),
        f_crc: 0,
    };
    let off = layout.slot_offset(&a.geo, StripeIdx(stripe)) as usize;
    disk.poke(off, &entry.encode().unwrap());
    disk.poke(off + ppl::HEADER, &pp);
}

/// Every data block of stripes `0..8`.
fn first_stripes(a: &Array) -> Vec<u8> {
    let bytes = 8 * a.geometry().stripe_data_blocks() as usize * a.geometry().block_bytes();
    let mut buf = vec![0u8; bytes];
    a.read(&mut SyncExecutor, ArrayBlock(0), &mut buf).unwrap();
    buf
}

/// A write in bitmap region 0 away from stripe 0's slots (so an unclean stop is dirty there).
fn dirty_region_zero(a: &Array) {
    let at = a.geometry().logical_block(StripeIdx(5), 0, 0);
    a.write(&mut SyncExecutor, at, &pattern(5, 4096)).unwrap();
}

/// Drops `r`'s array uncleanly and assembles `disks`; returns stripes `0..8` afterwards.
fn restart(array: Array, disks: &[&MemMember]) -> Vec<u8> {
    drop(array);
    let cands = disks
        .iter()
        .map(|m| Arc::new((*m).clone()) as Arc<dyn Member>)
        .collect();
    let asm = Array::assemble(cands, None, Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.write_hole_exposed);
    first_stripes(&asm.array)
}

#[test]
fn entries_of_another_array_are_not_replayed() {
    let r = rig_stripes(4, 64);
    let g = *r.array.geometry();
    let f = g.data_member(StripeIdx(0), 0).0;
    let p = g.parity_member(StripeIdx(0)).0;
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &pattern(1, 64 * 3 * 4096))
        .unwrap();
    r.array.set_faulty(MemberIdx(f)).unwrap();
    // A device that was in another array at the same epoch holds an entry for stripe 0.
    poke_entry(&r.mems[p], &r.array, Uuid([0xAB; 16]), 1, 0, 1);
    dirty_region_zero(&r.array);
    let want = first_stripes(&r.array);
    let disks: Vec<&MemMember> = r
        .mems
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != f)
        .map(|(_, m)| m)
        .collect();
    assert!(
        restart(r.array, &disks) == want,
        "another array's entry was replayed"
    );
}

/// A device carrying an entry of this very array's UUID for the epoch the array will reach
/// (an earlier life of the array, re-created with the same UUID) joins as a spare (rebuilt
/// into the role holding stripe 0's parity) or as the hot-replace member of that role; then
/// another role fails and the array stops uncleanly: the entry must not be replayed.
fn new_device_brings_no_log_entries(as_spare: bool) {
    let r = rig_stripes(4, 64);
    let g = *r.array.geometry();
    let q = g.data_member(StripeIdx(0), 0).0;
    let p = g.parity_member(StripeIdx(0)).0;
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &pattern(1, 64 * 3 * 4096))
        .unwrap();
    let (dev, _, arc) = new_disk("new", 64);
    if as_spare {
        // Epochs: 1 at this fail, 2 when the rebuild ends, 3 at `q`'s fail.
        r.array.set_faulty(MemberIdx(p)).unwrap();
        poke_entry(&dev, &r.array, r.array.uuid(), 3, 0, 1);
        r.array.add_spare(arc).unwrap();
    } else {
        // A hand-over keeps the epoch: 1 at `q`'s fail.
        poke_entry(&dev, &r.array, r.array.uuid(), 1, 0, 1);
        r.array.replace(MemberIdx(p), arc).unwrap();
    }
    r.array
        .run_rebuild(&mut SyncExecutor, &mut Throttle::new(None))
        .unwrap();
    assert!(r.array.replace_status().is_none() && r.array.degraded_roles().is_empty());
    r.array.set_faulty(MemberIdx(q)).unwrap();
    dirty_region_zero(&r.array);
    let want = first_stripes(&r.array);
    let disks: Vec<&MemMember> = r
        .mems
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != q && *i != p)
        .map(|(_, m)| m)
        .chain([&dev])
        .collect();
    assert!(
        restart(r.array, &disks) == want,
        "the new device's old entry was replayed"
    );
}

#[test]
fn a_spare_brings_no_log_entries_into_the_array() {
    new_device_brings_no_log_entries(true);
}

#[test]
fn a_hot_replace_member_brings_no_log_entries_into_the_array() {
    new_device_brings_no_log_entries(false);
}

/// Where a [`GateMember`] holds the next operation at or past its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Read,
    BeforeWrite,
    AfterWrite,
}

/// (armed at, inside, released) and its condition variable.
type Gate = (Mutex<(Option<Hold>, bool, bool)>, std::sync::Condvar);

/// A member that, once armed, stops its next read or write at or past `from` (before or
/// after the write reaches the media) until released: holds a write round at a known point,
/// without timing.
#[derive(Debug)]
struct GateMember {
    inner: MemMember,
    from: u64,
    gate: Arc<Gate>,
}

impl GateMember {
    /// Waits for `what`; panics after a minute (the other side died: fail, do not hang).
    fn wait(&self, what: impl Fn(&(Option<Hold>, bool, bool)) -> bool) {
        let (m, cv) = &*self.gate;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut g = m.lock().unwrap();
        while !what(&g) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "gate: the awaited state never came");
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    }

    fn set(&self, f: impl FnOnce(&mut (Option<Hold>, bool, bool))) {
        let (m, cv) = &*self.gate;
        f(&mut m.lock().unwrap());
        cv.notify_all();
    }

    fn arm(&self, at: Hold) {
        self.set(|g| g.0 = Some(at));
    }

    /// Lets the held operation go on.
    fn release(&self) {
        self.set(|g| g.2 = true);
    }

    /// Takes the gate if it is armed for `at` and `offset` is in range.
    fn take(&self, at: Hold, offset: u64) -> bool {
        let (m, _) = &*self.gate;
        let mut g = m.lock().unwrap();
        if offset >= self.from && g.0 == Some(at) {
            g.0 = None;
            true
        } else {
            false
        }
    }

    fn hold(&self) {
        self.set(|g| g.1 = true);
        self.wait(|g| g.2);
        self.set(|g| *g = (g.0, false, false));
    }
}

impl Member for GateMember {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), crate::error::MemberError> {
        if self.take(Hold::Read, offset) {
            self.hold();
        }
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), crate::error::MemberError> {
        if self.take(Hold::BeforeWrite, offset) {
            self.hold();
        }
        let after = self.take(Hold::AfterWrite, offset);
        let r = self.inner.write_at(offset, buf);
        if after {
            self.hold();
        }
        r
    }
    fn flush(&self) -> Result<(), crate::error::MemberError> {
        self.inner.flush()
    }
}

/// 4 write-through members behind gates (from the data area on), 4 KiB chunks, 64 stripes
/// filled with pattern 1.
fn gated_rig() -> (Vec<MemMember>, Vec<Arc<GateMember>>, Arc<Array>) {
    let stripes = 64;
    let mems: Vec<MemMember> = (0..4)
        .map(|i| MemMember::new(&format!("m{i}"), MIB + stripes * 4096))
        .collect();
    let gates: Vec<Arc<GateMember>> = mems
        .iter()
        .map(|m| {
            Arc::new(GateMember {
                inner: m.clone(),
                from: MIB as u64,
                gate: Default::default(),
            })
        })
        .collect();
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        bitmap_region_stripes: Some(8),
        ..ArrayConfig::default()
    };
    let arcs = gates.iter().map(|g| g.clone() as Arc<dyn Member>).collect();
    let array = Arc::new(Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap());
    assert_eq!(array.meta.data_offset, MIB as u64);
    array
        .write(
            &mut SyncExecutor,
            ArrayBlock(0),
            &pattern(1, stripes * 3 * 4096),
        )
        .unwrap();
    (mems, gates, array)
}

/// Copies of `mems` but `skip` as they are now (a power cut at this instant).
fn cut_copies(mems: &[MemMember], skip: usize) -> Vec<Arc<dyn Member>> {
    mems.iter()
        .enumerate()
        .filter(|(i, _)| *i != skip)
        .map(|(i, m)| {
            let copy = MemMember::new(&format!("m{i}"), m.snapshot().len());
            copy.poke(0, &m.snapshot());
            Arc::new(copy) as Arc<dyn Member>
        })
        .collect()
}

#[test]
fn a_round_that_planned_before_a_failure_plans_again_before_writing() {
    let (mems, gates, array) = gated_rig();
    let g = *array.geometry();
    let held = g.data_member(StripeIdx(0), 1).0;
    let fail = g.data_member(StripeIdx(0), 0).0;
    let want = first_stripes(&array);
    // A healthy write of data indices 1 and 2 of stripe 0: reconstruct-write, which reads
    // only data index 0 (`fail`'s); held in that read.
    gates[fail].arm(Hold::Read);
    let new = pattern(2, 2 * 4096);
    let writer = {
        let (array, new) = (array.clone(), new.clone());
        std::thread::spawn(move || {
            let at = array.geometry().logical_block(StripeIdx(0), 1, 0);
            array.write(&mut SyncExecutor, at, &new).unwrap();
        })
    };
    gates[fail].wait(|g| g.1);
    // The failure finds no round writing: the log covers at once.
    array.set_faulty(MemberIdx(fail)).unwrap();
    assert!(array.write_hole_covered());
    // The round must plan again, degraded and logged: hold it once data index 1 landed.
    gates[held].arm(Hold::AfterWrite);
    gates[fail].release();
    gates[held].wait(|g| g.1);
    // A power cut now: data index 1 is new, the rest maybe not; the log entry repairs parity.
    let asm = Array::assemble(cut_copies(&mems, fail), None, Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.write_hole_exposed);
    let mut got = first_stripes(&asm.array);
    let at = g.logical_block(StripeIdx(0), 1, 0).0 as usize * 4096;
    // The interrupted write's own blocks hold old or new; every other block is intact.
    for b in [at, at + 4096] {
        let (o, n) = (&want[b..b + 4096], &new[b - at..b - at + 4096]);
        assert!(
            got[b..b + 4096] == *o || got[b..b + 4096] == *n,
            "block at {b}"
        );
    }
    got[at..at + 8192].copy_from_slice(&want[at..at + 8192]);
    assert!(
        got == want,
        "a block the interrupted write did not touch changed"
    );
    gates[held].release();
    writer.join().unwrap();
}

#[test]
fn a_write_in_flight_when_a_member_fails_keeps_the_log_uncovered_until_it_ends() {
    let (mems, gates, array) = gated_rig();
    let g = *array.geometry();
    let held = g.data_member(StripeIdx(0), 1).0;
    let fail = g.data_member(StripeIdx(0), 0).0;
    assert!(array.write_hole_covered());
    gates[held].arm(Hold::BeforeWrite);
    // A healthy (unlogged) write to stripe 0, held inside its data write on `held`.
    let writer = {
        let array = array.clone();
        std::thread::spawn(move || {
            let at = array.geometry().logical_block(StripeIdx(0), 1, 0);
            array
                .write(&mut SyncExecutor, at, &pattern(2, 4096))
                .unwrap();
        })
    };
    gates[held].wait(|g| g.1);
    array.set_faulty(MemberIdx(fail)).unwrap();
    assert!(!array.write_hole_covered());
    // A power cut now: the superblocks say the log does not cover this stop.
    let err = Array::assemble(cut_copies(&mems, fail), None, Arc::new(CpuXor::detect()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("were in flight"), "{err}");
    gates[held].release();
    writer.join().unwrap();
    // The last round of the old epoch ended: covered again, and persisted.
    assert!(array.write_hole_covered());
    let now: Vec<Arc<dyn Member>> = mems
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != fail)
        .map(|(_, m)| Arc::new(m.clone()) as Arc<dyn Member>)
        .collect();
    let want = first_stripes(&array);
    drop(array);
    let asm = Array::assemble(now, None, Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.write_hole_exposed);
    assert!(first_stripes(&asm.array) == want);
}

#[test]
fn a_device_already_in_the_array_is_refused_as_spare_or_replacement_untouched() {
    let r = rig_stripes(4, 64);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &pattern(1, 64 * 3 * 4096))
        .unwrap();
    // Something in its log area that clearing would wipe.
    r.mems[2].poke(r.array.meta.ppl_offset as usize, &pattern(3, 4096));
    let before = r.mems[2].snapshot();
    // The same device opened again (same name), as an administrator's typo would.
    let again: Arc<dyn Member> = Arc::new(r.mems[2].clone());
    let err = r.array.add_spare(again.clone()).unwrap_err();
    assert!(err.to_string().contains("already in the array"), "{err}");
    let err = r.array.replace(MemberIdx(1), again).unwrap_err();
    assert!(err.to_string().contains("already in the array"), "{err}");
    assert!(r.mems[2].snapshot() == before, "the member was written");
}

#[test]
fn an_administrators_fail_that_finds_another_member_unable_to_flush_fails_that_one_only() {
    let mems: Vec<MemMember> = (0..4)
        .map(|i| MemMember::with_volatile_cache(&format!("v{i}"), MIB + 64 * 4096))
        .collect();
    let wrapped: Vec<FaultyMember> = mems
        .iter()
        .map(|m| FaultyMember::new(Arc::new(m.clone()), 3))
        .collect();
    let faults: Vec<FaultHandle> = wrapped.iter().map(FaultyMember::handle).collect();
    let arcs = wrapped
        .into_iter()
        .map(|w| Arc::new(w) as Arc<dyn Member>)
        .collect();
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &pattern(1, 64 * 3 * 4096))
        .unwrap();
    faults[2].inject(Fault::FailAfter { ops: 0 });
    let err = array.set_faulty(MemberIdx(1)).unwrap_err();
    assert!(err.to_string().contains("stays in service"), "{err}");
    assert!(!array.is_failed());
    let states = array.member_states();
    assert_eq!(states[1], SlotState::Active);
    assert_eq!(states[2], SlotState::Failed);
}

/// A role that lost its member keeps the device's name and why: an I/O error, the
/// administrator, not found at assembly, or failed before the array last stopped.
#[test]
fn a_lost_member_keeps_its_device_name_and_why() {
    let r = rig(4, 4096, 4096);
    r.array
        .write(&mut SyncExecutor, ArrayBlock(0), &pattern(1, 8 * 4096))
        .unwrap();
    assert_eq!(r.array.gone_members(), vec![None; 4]);
    // Member 2 fails a write: failed with the error's text.
    r.faults[2].inject(Fault::ErrorRange {
        kind: crate::member::OpKind::Write,
        start: 0,
        end: u64::MAX,
    });
    let lba = (0..24)
        .map(ArrayBlock)
        .find(|&b| r.array.geometry().locate(b).unwrap().member.0 == 2)
        .unwrap();
    r.array
        .write(&mut SyncExecutor, lba, &pattern(2, 4096))
        .unwrap();
    let gone = r.array.gone_members();
    let g = gone[2].as_ref().expect("role 2 lost its member");
    assert_eq!(g.device.as_deref(), Some("m2"));
    assert!(
        matches!(&g.reason, GoneReason::IoError(e) if e.contains("m2")),
        "{g:?}"
    );
    assert_eq!(g.reason.class(), "io_error");
    r.array.stop().unwrap();
    // Assembled again without role 2's device: it was already failed at the stop.
    let set: Vec<Arc<dyn Member>> = clones(&r)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, m)| m)
        .collect();
    let asm = Array::assemble(set.clone(), None, Arc::new(CpuXor::detect())).unwrap();
    let gone = asm.array.gone_members();
    assert_eq!(
        gone[2].as_ref().map(|g| (&g.device, &g.reason)),
        Some((&None, &GoneReason::FailedBeforeStop))
    );
    asm.array.stop().unwrap();
    drop(asm);

    // A healthy array: the administrator fails role 0; at the next assembly role 1's
    // device is not there.
    let r = rig(4, 4096, 4096);
    r.array.set_faulty(MemberIdx(0)).unwrap();
    let g = r.array.gone_members()[0].clone().unwrap();
    assert_eq!(
        (g.device.as_deref(), g.reason),
        (Some("m0"), GoneReason::Administrator)
    );
    let r = rig(4, 4096, 4096);
    r.array.stop().unwrap();
    let set: Vec<Arc<dyn Member>> = clones(&r)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, m)| m)
        .collect();
    let asm = Array::assemble(set, None, Arc::new(CpuXor::detect())).unwrap();
    assert_eq!(
        asm.array.gone_members()[1].as_ref().map(|g| &g.reason),
        Some(&GoneReason::MissingAtAssembly)
    );
}
