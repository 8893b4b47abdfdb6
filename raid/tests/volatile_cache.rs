//! The partial-parity log on members with a volatile write cache (writes complete into a
//! cache and reach the media only at a flush; a power cut loses the rest).
//!
//! While degraded, a power cut must not change any block the array did not write since its
//! last flush — the missing member's blocks included, which exist only as parity ^ the other
//! data. Two ways the log used to break that (md closes both in `ppl_do_flush`):
//! - **partial parity from cached data**: a second write to a stripe computes its partial
//!   parity from data an earlier write left in a member's cache; the cut loses that data, and
//!   replaying the log rebuilds parity from data the media never got;
//! - **slot reuse**: a write to another stripe that shares the log slot overwrites the entry
//!   (and flushes the parity member, making the earlier parity durable) while the earlier
//!   write's data still sits in a data member's cache; the cut loses the data and no entry is
//!   left to repair the parity.
//!
//! The two scenario tests fill the array, flush it, take one member out, do two writes that
//! leave the missing member's rows untouched, cut the power (every cache loses what it holds)
//! and reassemble: the missing member's rows must read back as they were. A third test cuts
//! the power under three concurrent writers. All three failed before the fix.

use std::sync::Arc;

use raidline_raid::{
    Array, ArrayBlock, ArrayConfig, BlockSize, ChunkSize, CpuXor, Geometry, MemMember, Member,
    MemberIdx, StripeIdx, SyncExecutor,
};

const MIB: usize = 1 << 20;

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

struct Rig {
    disks: Vec<MemMember>,
    array: Array,
    /// Contents after the fill (flushed).
    before: Vec<u8>,
}

/// `n` volatile-cache members of `stripes` stripes (4 KiB chunk and block), filled and
/// flushed, then `failed` taken out.
fn rig(n: usize, stripes: usize, failed: usize) -> Rig {
    let size = MIB + stripes * 4096;
    let disks: Vec<MemMember> = (0..n)
        .map(|i| MemMember::with_volatile_cache(&format!("d{i}"), size))
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
    let before = pattern(1, array.geometry().capacity_bytes() as usize);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &before)
        .unwrap();
    array.flush().unwrap();
    array.set_faulty(MemberIdx(failed)).unwrap();
    assert!(array.write_hole_protected());
    Rig {
        disks,
        array,
        before,
    }
}

impl Rig {
    fn geo(&self) -> &Geometry {
        self.array.geometry()
    }

    /// Writes one chunk (one block here) at data index `d` of `stripe`.
    fn write_chunk(&self, stripe: u64, d: usize, seed: u64) {
        let at = self.geo().logical_block(StripeIdx(stripe), d, 0);
        self.array
            .write(&mut SyncExecutor, at, &pattern(seed, 4096))
            .unwrap();
    }

    /// Cuts the power (every cache loses its unflushed writes), reassembles, and returns the
    /// failed role's block of `stripe` as the array reads it and as it was.
    fn cut_and_read(self, stripe: u64, failed: usize) -> (Vec<u8>, Vec<u8>) {
        let f = self
            .geo()
            .data_index_of(StripeIdx(stripe), MemberIdx(failed))
            .expect("the failed role holds data in this stripe");
        let at = self.geo().logical_block(StripeIdx(stripe), f, 0).0 as usize * 4096;
        let uuid = self.array.uuid();
        drop(self.array);
        for d in &self.disks {
            d.power_cut(None);
        }
        let arcs: Vec<Arc<dyn Member>> = self
            .disks
            .iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
            .collect();
        let asm = Array::assemble(arcs, Some(uuid), Arc::new(CpuXor::detect())).unwrap();
        assert!(!asm.write_hole_exposed);
        assert_eq!(asm.array.degraded_roles(), vec![failed]);
        let mut got = vec![0u8; 4096];
        asm.array
            .read(&mut SyncExecutor, ArrayBlock(at as u64 / 4096), &mut got)
            .unwrap();
        (got, self.before[at..at + 4096].to_vec())
    }
}

/// The failed role (a data member of stripe 0) and the two surviving data indexes of
/// stripe 0 for a 4-member array.
fn roles(geo: &Geometry) -> (usize, usize, usize) {
    let s = StripeIdx(0);
    let failed = geo.data_member(s, 0).0;
    (failed, 1, 2)
}

#[test]
fn partial_parity_is_never_computed_from_cached_data() {
    let probe = rig(4, 8, 0);
    let (failed, a, b) = roles(probe.geo());
    drop(probe);
    let r = rig(4, 8, failed);
    // First write: data index `a` of stripe 0 (logged; its data stays in the cache).
    r.write_chunk(0, a, 10);
    // Second write to the same stripe, another data member: its partial parity includes
    // the first write's cached data.
    r.write_chunk(0, b, 11);
    let (got, was) = r.cut_and_read(0, failed);
    assert!(
        got == was,
        "the missing member's untouched block changed after a power cut"
    );
}

#[test]
fn a_log_slot_is_reused_only_after_its_writes_are_durable() {
    // 4 KiB chunks: 960 KiB / (4 KiB header + 2 x 4 KiB) = 80 slots per member, and stripes
    // `s` and `s + members * 80` share one slot on the same parity member.
    let n = 4;
    let other = (n * 80) as u64;
    let probe = rig(n, other as usize + 1, 0);
    let (failed, a, b) = roles(probe.geo());
    assert_eq!(
        probe.geo().parity_member(StripeIdx(0)),
        probe.geo().parity_member(StripeIdx(other))
    );
    drop(probe);
    let r = rig(n, other as usize + 1, failed);
    r.write_chunk(0, a, 20);
    // Overwrites stripe 0's entry; stripe 0's data write is still cached on its member.
    r.write_chunk(other, b, 21);
    let (got, was) = r.cut_and_read(0, failed);
    assert!(
        got == was,
        "the missing member's untouched block changed after a power cut"
    );
}

/// Three writers on their own regions of a degraded array of volatile-cache members, each
/// flushing the array now and then, while the power is cut at a random write; the caches
/// then lose all (even seeds) or a random part (odd seeds) of what they hold. After
/// reassembly every block holds the version of its writer's last write made durable by a
/// completed flush, or a later one; blocks nobody wrote — the missing member's included —
/// are unchanged.
#[test]
fn power_cut_under_concurrent_writers_with_volatile_caches() {
    use raidline_raid::{Fault, FaultyMember, PowerSwitch};
    for seed in 1..=8u64 {
        let n = 4;
        // 400 stripes: more than members x 80 slots, so stripes share log slots.
        let size = MIB + 400 * 4096;
        let disks: Vec<MemMember> = (0..n)
            .map(|i| MemMember::with_volatile_cache(&format!("d{i}"), size))
            .collect();
        let faulty: Vec<Arc<FaultyMember>> = disks
            .iter()
            .enumerate()
            .map(|(i, d)| Arc::new(FaultyMember::new(Arc::new(d.clone()), i as u64)))
            .collect();
        let cfg = ArrayConfig {
            chunk: ChunkSize::new(4096).unwrap(),
            block: BlockSize::new(512).unwrap(),
            assume_clean: true,
            ..ArrayConfig::default()
        };
        let arcs: Vec<Arc<dyn Member>> = faulty
            .iter()
            .map(|f| f.clone() as Arc<dyn Member>)
            .collect();
        let array = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
        let bs = 512usize;
        let cap = array.geometry().capacity_blocks();
        let initial = pattern(seed + 100, cap as usize * bs);
        array
            .write(&mut SyncExecutor, ArrayBlock(0), &initial)
            .unwrap();
        array.flush().unwrap();
        array.set_faulty(MemberIdx((seed % 4) as usize)).unwrap();
        let switch = PowerSwitch::after(150 + seed * 37);
        for f in &faulty {
            f.handle().inject(Fault::PowerLoss(switch.clone()));
        }
        let workers = 3u64;
        let a = &array;
        // Per thread: every write (start, data, durable), in order.
        let logs: Vec<Vec<(u64, Vec<u8>, bool)>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..workers)
                .map(|t| {
                    let switch = switch.clone();
                    sc.spawn(move || {
                        let (lo, hi) = (t * cap / workers, (t + 1) * cap / workers);
                        let mut log: Vec<(u64, Vec<u8>, bool)> = Vec::new();
                        let mut x = seed * 31 + t + 1;
                        for i in 0..60 {
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
                            log.push((start, data, false));
                            if i % 5 == 4 && a.flush().is_ok() && !switch.is_cut() {
                                // Every member flush ran before the cut: this thread's
                                // writes so far are durable.
                                for w in log.iter_mut() {
                                    w.2 = true;
                                }
                            }
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
        let uuid = array.uuid();
        drop(array);
        for (i, d) in disks.iter().enumerate() {
            d.power_cut((seed % 2 == 1).then_some(seed * 7 + i as u64));
        }
        let arcs: Vec<Arc<dyn Member>> = disks
            .iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
            .collect();
        let asm = Array::assemble(arcs, Some(uuid), Arc::new(CpuXor::detect())).unwrap();
        assert!(!asm.write_hole_exposed);
        let mut got = vec![0u8; cap as usize * bs];
        asm.array
            .read(&mut SyncExecutor, ArrayBlock(0), &mut got)
            .unwrap();
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
                    "seed {seed}: block {b} holds no version written since its last flush"
                );
            }
        }
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
                    "seed {seed}: untouched block {b} changed"
                );
            }
        }
    }
}
