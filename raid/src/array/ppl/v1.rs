//! Format 1 of the partial-parity log (arrays created before format 2): one fixed slot per
//! (parity member, `(stripe / N) mod slots`), each a 4 KiB header then two chunks (partial
//! parity, then the missing chunk's new rows). Only read now: assembly replays the entries
//! of an array that stopped uncleanly while degraded under format 1, then converts the area
//! to format 2 (see [`super`]).
//!
//! Why the latest entry in a slot was safe to apply: within one epoch every write to a stripe
//! with a usable parity member was logged in that stripe's slot, with the slot locked for the
//! whole round, so an entry present for a stripe is the last write to it.

use crate::error::RaidError;
use crate::geometry::{Geometry, MemberIdx, StripeIdx};
use crate::member::{AlignedBuf, Member};
use crate::superblock::crc32c;

use super::super::MetaLayout;

const MAGIC: [u8; 8] = *b"RLPPL\0\0\x01";
const HEADER: usize = 4096;
/// Most modified chunks per entry (one per data member); 88 + 24 × 64 bytes fit the header.
const MAX_WRITES: usize = crate::MAX_MEMBERS;
const _: () = assert!(88 + 24 * MAX_WRITES <= HEADER - 4);
const NO_F: u32 = u32::MAX;

/// Where the log slots are.
#[derive(Debug, Clone, Copy)]
struct PplLayout {
    offset: u64,
    slot_bytes: u64,
    slots: u64,
}

impl PplLayout {
    /// `None` when the area holds fewer than 3 slots (then there is no log).
    fn new(meta: &MetaLayout, geo: &Geometry) -> Option<Self> {
        let slot_bytes = HEADER as u64 + 2 * geo.chunk_bytes() as u64;
        let slots = u64::from(meta.ppl_bytes) / slot_bytes;
        (slots >= 3).then_some(PplLayout {
            offset: meta.ppl_offset,
            slot_bytes,
            slots,
        })
    }

    fn slot(&self, geo: &Geometry, stripe: StripeIdx) -> u64 {
        (stripe.0 / geo.members() as u64) % self.slots
    }
}

/// One log entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    epoch: u64,
    stripe: u64,
    lo: u64,
    hi: u64,
    /// Data index of the missing chunk and the rows of it the write modifies.
    f: Option<(usize, u64, u64)>,
    /// (data index, first row, end row) of every modified chunk.
    writes: Vec<(usize, u64, u64)>,
    pp_crc: u32,
    f_crc: u32,
}

impl Entry {
    #[cfg(test)]
    fn encode(&self) -> Option<AlignedBuf> {
        if self.writes.len() > MAX_WRITES {
            return None;
        }
        let mut b = AlignedBuf::new(HEADER, 4096);
        b[..8].copy_from_slice(&MAGIC);
        let mut o = 8;
        let mut put = |b: &mut AlignedBuf, v: u64| {
            b[o..o + 8].copy_from_slice(&v.to_le_bytes());
            o += 8;
        };
        put(&mut b, self.epoch);
        put(&mut b, self.stripe);
        put(&mut b, self.lo);
        put(&mut b, self.hi);
        let (fi, fs, fe) = self
            .f
            .map_or((u64::from(NO_F), 0, 0), |(i, s, e)| (i as u64, s, e));
        put(&mut b, fi);
        put(&mut b, fs);
        put(&mut b, fe);
        put(&mut b, u64::from(self.pp_crc));
        put(&mut b, u64::from(self.f_crc));
        put(&mut b, self.writes.len() as u64);
        for &(d, s, e) in &self.writes {
            put(&mut b, d as u64);
            put(&mut b, s);
            put(&mut b, e);
        }
        let crc = crc32c(&b[..HEADER - 4]);
        b[HEADER - 4..].copy_from_slice(&crc.to_le_bytes());
        Some(b)
    }

    fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < HEADER || b[..8] != MAGIC {
            return None;
        }
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&b[HEADER - 4..HEADER]);
        if u32::from_le_bytes(crc) != crc32c(&b[..HEADER - 4]) {
            return None;
        }
        let mut o = 8;
        let mut get = || {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            o += 8;
            u64::from_le_bytes(x)
        };
        let (epoch, stripe, lo, hi) = (get(), get(), get(), get());
        let (fi, fs, fe) = (get(), get(), get());
        let (pp_crc, f_crc) = (get() as u32, get() as u32);
        let n = get() as usize;
        if n > MAX_WRITES || lo > hi {
            return None;
        }
        let writes = (0..n).map(|_| (get() as usize, get(), get())).collect();
        let f = (fi != u64::from(NO_F)).then_some((fi as usize, fs, fe));
        Some(Entry {
            epoch,
            stripe,
            lo,
            hi,
            f,
            writes,
            pp_crc,
            f_crc,
        })
    }
}

/// Replays the valid format-1 entries of epoch `epoch` found on `members` (see
/// [`super::recover`] for the arguments). Returns the number of stripes repaired.
pub(crate) fn recover(
    geo: &Geometry,
    meta: &MetaLayout,
    members: &[Option<std::sync::Arc<dyn Member>>],
    epoch: u64,
    missing: usize,
    valid_below: u64,
    parity: &dyn crate::parity::ParityEngine,
) -> Result<u64, RaidError> {
    let Some(layout) = PplLayout::new(meta, geo) else {
        return Ok(0);
    };
    let cb = geo.chunk_bytes() as u64;
    let mut repaired = 0;
    for (role, m) in members.iter().enumerate() {
        let Some(m) = m else { continue };
        for slot in 0..layout.slots {
            let off = layout.offset + slot * layout.slot_bytes;
            let mut head = AlignedBuf::new(HEADER, 4096);
            m.read_at(off, &mut head).map_err(|e| RaidError::Member {
                role: MemberIdx(role),
                source: e,
            })?;
            let Some(e) = Entry::decode(&head) else {
                continue;
            };
            let stripe = StripeIdx(e.stripe);
            if e.epoch != epoch
                || e.stripe >= geo.stripes()
                || geo.parity_member(stripe).0 != role
                || layout.slot(geo, stripe) != slot
            {
                continue;
            }
            let entry = super::Entry {
                epoch: e.epoch,
                seq: 0,
                stripe: e.stripe,
                lo: e.lo,
                hi: e.hi,
                f: e.f,
                writes: e.writes,
                pp_at: off + HEADER as u64,
                f_at: off + HEADER as u64 + cb,
                pp_crc: e.pp_crc,
                f_crc: e.f_crc,
            };
            if super::apply(
                geo,
                meta,
                members,
                role,
                &entry,
                missing,
                valid_below,
                parity,
            )? {
                repaired += 1;
            }
        }
        m.flush().map_err(|e| RaidError::Member {
            role: MemberIdx(role),
            source: e,
        })?;
    }
    Ok(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any header with a valid magic and CRC decodes to an entry or `None`, never panics.
        #[test]
        fn decode_is_total(mut raw in proptest::collection::vec(proptest::prelude::any::<u8>(), HEADER), n in 0u64..300) {
            raw[..8].copy_from_slice(&MAGIC);
            // Field offsets: epoch 8, stripe 16, lo 24, hi 32, f 40..64, crcs 64..80, count 80.
            raw[24..32].copy_from_slice(&0u64.to_le_bytes());
            raw[80..88].copy_from_slice(&n.to_le_bytes());
            let crc = crc32c(&raw[..HEADER - 4]);
            raw[HEADER - 4..].copy_from_slice(&crc.to_le_bytes());
            match Entry::decode(&raw) {
                Some(e) => {
                    proptest::prop_assert!(e.writes.len() as u64 == n && n as usize <= MAX_WRITES);
                    proptest::prop_assert_eq!(Entry::decode(&e.encode().unwrap()), Some(e));
                }
                None => proptest::prop_assert!(n as usize > MAX_WRITES),
            }
        }
    }

    #[test]
    fn header_round_trip_and_corruption() {
        let e = Entry {
            epoch: 3,
            stripe: 77,
            lo: 1,
            hi: 9,
            f: Some((2, 3, 9)),
            writes: vec![(0, 1, 4), (2, 3, 9)],
            pp_crc: 0xDEAD,
            f_crc: 0xBEEF,
        };
        let b = e.encode().unwrap();
        assert_eq!(Entry::decode(&b), Some(e.clone()));
        let mut bad = AlignedBuf::new(HEADER, 4096);
        bad.copy_from_slice(&b);
        bad[40] ^= 1;
        assert_eq!(Entry::decode(&bad), None);
        assert_eq!(Entry::decode(&[0u8; HEADER]), None);
        assert_eq!(Entry::decode(&b[..100]), None);
    }

    /// An array whose superblocks say format 1 (written before format 2 existed), stopped
    /// uncleanly while degraded with a torn write and its format-1 entry on disk: assembly
    /// replays the entry, clears the header ring (a header-like block planted there is not
    /// read later) and records format 2.
    #[test]
    fn a_format_1_array_is_recovered_and_converted() {
        use crate::array::{Array, ArrayConfig};
        use crate::geometry::{ArrayBlock, BlockSize, ChunkSize};
        use crate::member::MemMember;
        use crate::superblock::Superblock;
        use crate::SyncExecutor;
        use std::sync::Arc;

        let n = 4;
        let disks: Vec<MemMember> = (0..n)
            .map(|i| MemMember::new(&format!("d{i}"), (1 << 20) + 64 * 4096))
            .collect();
        let arcs = || -> Vec<Arc<dyn Member>> {
            disks
                .iter()
                .map(|d| Arc::new(d.clone()) as Arc<dyn Member>)
                .collect()
        };
        let cfg = ArrayConfig {
            chunk: ChunkSize::new(4096).unwrap(),
            block: BlockSize::new(4096).unwrap(),
            assume_clean: true,
            ..ArrayConfig::default()
        };
        let array = Array::create(arcs(), vec![], &cfg, Arc::new(crate::CpuXor::detect())).unwrap();
        let geo = *array.geometry();
        let fill: Vec<u8> = (0..geo.capacity_bytes() as usize)
            .map(|i| (i * 7 + i / 4096) as u8)
            .collect();
        array
            .write(&mut SyncExecutor, ArrayBlock(0), &fill)
            .unwrap();
        let s0 = StripeIdx(0);
        let failed = geo.data_member(s0, 0).0;
        array.set_faulty(MemberIdx(failed)).unwrap();
        let uuid = array.uuid();
        drop(array);
        let (pm, ra, rb) = (
            geo.parity_member(s0).0,
            geo.data_member(s0, 1).0,
            geo.data_member(s0, 2).0,
        );
        let data_at = 1u64 << 20;
        let block =
            |r: usize| disks[r].snapshot()[data_at as usize..data_at as usize + 4096].to_vec();
        let f_old = fill[..4096].to_vec();
        let b_old = block(rb);
        // The torn write: data index 1 got new data, parity did not; its format-1 entry (in
        // stripe 0's slot 0 on the parity member) has partial parity f_old ^ b_old.
        let a_new = vec![0x5Au8; 4096];
        disks[ra].write_at(data_at, &a_new).unwrap();
        let pp: Vec<u8> = f_old.iter().zip(&b_old).map(|(x, y)| x ^ y).collect();
        let sb = Superblock::decode(&disks[pm].snapshot()[..4096]).unwrap();
        let area = sb.ppl_offset;
        let e = Entry {
            epoch: sb.ppl_epoch,
            stripe: 0,
            lo: 0,
            hi: 1,
            f: None,
            writes: vec![(1, 0, 1)],
            pp_crc: crc32c(&pp),
            f_crc: 0,
        };
        disks[pm].write_at(area, &e.encode().unwrap()).unwrap();
        disks[pm].write_at(area + HEADER as u64, &pp).unwrap();
        // A format-2 header (stripe 0, garbage partial parity) where slot 1 of the format-2
        // header ring will be: inside format-1 slot 0's unused second chunk.
        let junk = vec![0xC3u8; 4096];
        let forged = super::super::Entry {
            epoch: sb.ppl_epoch,
            seq: 1,
            stripe: 0,
            lo: 0,
            hi: 1,
            f: None,
            writes: vec![(1, 0, 1)],
            pp_at: area + 8192 + 4096,
            f_at: area + 8192 + 8192,
            pp_crc: crc32c(&junk),
            f_crc: 0,
        };
        let mut h = vec![0u8; HEADER];
        forged.encode_into(&mut h).unwrap();
        disks[pm].write_at(area + 8192, &h).unwrap();
        disks[pm].write_at(area + 8192 + 4096, &junk).unwrap();
        // Every superblock says format 1 (the field reads 0 in old superblocks).
        for d in &disks {
            let mut sb = Superblock::decode(&d.snapshot()[..4096]).unwrap();
            assert!(sb.dirty);
            sb.ppl_format = 1;
            d.write_at(0, &sb.encode()).unwrap();
        }
        let survivors = || -> Vec<Arc<dyn Member>> {
            disks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != failed)
                .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn Member>)
                .collect()
        };
        let read_f = |a: &Array| {
            let mut got = vec![0u8; 4096];
            a.read(&mut SyncExecutor, ArrayBlock(0), &mut got).unwrap();
            got
        };
        let asm =
            Array::assemble(survivors(), Some(uuid), Arc::new(crate::CpuXor::detect())).unwrap();
        assert!(!asm.write_hole_exposed);
        assert!(
            read_f(&asm.array) == f_old,
            "the format-1 entry was not replayed"
        );
        for (i, d) in disks.iter().enumerate().filter(|(i, _)| *i != failed) {
            let sb = Superblock::decode(&d.snapshot()[..4096]).unwrap();
            assert_eq!(sb.ppl_format, super::super::FORMAT, "member {i}");
        }
        // Dirty again (a write elsewhere), then another unclean stop: the planted header must
        // not be replayed.
        let far = geo.logical_block(StripeIdx(5), 1, 0);
        asm.array
            .write(&mut SyncExecutor, far, &[7u8; 4096])
            .unwrap();
        drop(asm);
        let asm =
            Array::assemble(survivors(), Some(uuid), Arc::new(crate::CpuXor::detect())).unwrap();
        assert!(
            read_f(&asm.array) == f_old,
            "a block in the old log area read as an entry"
        );
    }
}
