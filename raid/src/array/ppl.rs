//! Partial-parity log (PPL): closes the RAID-5 write hole while the array is degraded.
//!
//! While one role `f` is missing, `f`'s data exists only as `parity ^ other data`. A crash
//! between a stripe's data and parity writes would leave parity matching neither old nor new
//! data, and `f`'s unwritten blocks — data the crashed write never touched — would read back
//! wrong. Before a degraded write touches a stripe, the engine writes to the stripe's parity
//! member (in the PPL area, slot `(stripe / N) mod slots`) and flushes:
//! - a header: epoch, stripe, rows `[lo, hi)`, which data chunks the write modifies and where;
//! - the **partial parity** over `[lo, hi)`: per row, the XOR of the chunks the write does not
//!   modify (`f`'s old contents included, implied by parity);
//! - `f`'s new rows when the write modifies `f` (they live on only through parity);
//!   written from the caller's buffer, no copy.
//!
//! CRC-32C covers header and payload. Recovery (assembly after an unclean stop while degraded,
//! epoch matching): for every valid entry, `parity = PP ^ current modified chunks ^ new f
//! rows`, written back. Afterwards `f` reads back its old rows where the write did not modify
//! it and some version of the interrupted write elsewhere; all other blocks are untouched.
//!
//! Why the latest entry in a slot is safe to apply: within one epoch every write to a stripe
//! with a usable parity member is logged (but for the parity-only writes below, which are
//! skipped only while the slot holds another stripe's entry), slots are locked for the whole
//! round, and a stripe always maps to the same slot, so an entry present for a stripe is the
//! last write to it — applying it to a completed write recomputes the parity already there. The epoch changes whenever the
//! set of missing roles changes (failure, rebuild done, assembly finding a role missing), so
//! entries from another degradation are void. Stripes the rebuild already passed are resynced
//! from all members instead.
//!
//! Members with a volatile write cache (a completed write may still be lost at a power cut
//! until the member is flushed) need three more rules, as md's `ppl_do_flush`:
//! - the entry is flushed on the parity member before any data or parity write of its round;
//! - before an entry overwrites a slot, the roles the previous entry's round wrote are
//!   flushed (their flush tickets are kept per slot, so this is free when another flush
//!   covered them since). Otherwise the slot could lose its entry while those writes were
//!   still cached; and since every earlier write to a stripe within an epoch went through its
//!   slot, this also makes the data a new entry's partial parity was computed from durable;
//! - the epoch change flushes every member (the superblock update does), and a write round
//!   that was in flight across the change flushes the roles it wrote before it unlocks its
//!   stripes, so the first logged writes of an epoch find no unlogged data in a cache.
//!
//! A write that modifies only the missing chunk writes parity alone; each parity block lands
//! old or new and matches the untouched chunks either way, so it is not logged — unless its
//! slot may still hold an entry for the same stripe (unknown since the array started, or
//! known to be this stripe's), whose replay would undo it: then it is logged as usual.
//!
//! Whose entries: every header carries the array UUID (entries of another array, or of an
//! older format without it, are never replayed), and the log area of a device is zeroed
//! before a superblock first names it (create, spare, hot-replace member), so an earlier life
//! of the same array (re-created with the same UUID) leaves nothing behind either.
//!
//! When the log covers: the superblock records whether the log is switched off and whether
//! writes that were not logged under the current epoch may still be in flight ("uncovered":
//! set by every epoch change, cleared and persisted once the rounds of older epochs are done,
//! see [`Inflight`]). Recovery replays only a covered epoch with the log on; otherwise an
//! unclean degraded stop is reported as exposed, as without a log.
//!
//! Needs at least three slots (`chunk <= 256 KiB` with the default 960 KiB area); otherwise
//! the array runs without the log and says so ([`super::Array::write_hole_protected`]).

use crate::error::{MemberError, RaidError};
use crate::geometry::{Geometry, MemberIdx, StripeIdx};
use crate::member::{AlignedBuf, Member};
use crate::superblock::{crc32c, Uuid};

use super::MetaLayout;

/// Format 2: the header carries the array UUID.
const MAGIC: [u8; 8] = *b"RLPPL\0\0\x02";
/// Format 1, written by builds before superblock version 2: the same header without the
/// UUID. Replayed only for an array whose superblocks are version 1 (an unclean degraded
/// stop by such a build, assembled by this one).
const MAGIC_V1: [u8; 8] = *b"RLPPL\0\0\x01";
pub(crate) const HEADER: usize = 4096;
/// Where the array UUID sits in the header (before the CRC).
const UUID_AT: usize = HEADER - 4 - 16;
/// Most modified chunks per entry (one per data member); 88 + 24 × 64 bytes fit the header.
const MAX_WRITES: usize = crate::MAX_MEMBERS;
const _: () = assert!(88 + 24 * MAX_WRITES <= UUID_AT);
const NO_F: u32 = u32::MAX;

/// Where the log slots are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PplLayout {
    offset: u64,
    slot_bytes: u64,
    slots: u64,
}

impl PplLayout {
    /// `None` when the area holds fewer than 3 slots (then there is no log).
    pub(crate) fn new(meta: &MetaLayout, geo: &Geometry) -> Option<Self> {
        let slot_bytes = HEADER as u64 + 2 * geo.chunk_bytes() as u64;
        let slots = u64::from(meta.ppl_bytes) / slot_bytes;
        (slots >= 3).then_some(PplLayout {
            offset: meta.ppl_offset,
            slot_bytes,
            slots,
        })
    }

    pub(crate) fn slot(&self, geo: &Geometry, stripe: StripeIdx) -> u64 {
        (stripe.0 / geo.members() as u64) % self.slots
    }

    /// Byte offset of `stripe`'s slot on its parity member.
    pub(crate) fn slot_offset(&self, geo: &Geometry, stripe: StripeIdx) -> u64 {
        self.offset + self.slot(geo, stripe) * self.slot_bytes
    }

    /// Key for the slot lock of `stripe` (parity member, slot).
    pub(crate) fn lock_key(&self, geo: &Geometry, stripe: StripeIdx) -> StripeIdx {
        StripeIdx(((geo.parity_member(stripe).0 as u64) << 32) | self.slot(geo, stripe))
    }
}

/// One log entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The array the entry belongs to (`None`: a format-1 entry, which does not say).
    pub array: Option<Uuid>,
    pub epoch: u64,
    pub stripe: u64,
    pub lo: u64,
    pub hi: u64,
    /// Data index of the missing chunk and the rows of it the write modifies.
    pub f: Option<(usize, u64, u64)>,
    /// (data index, first row, end row) of every modified chunk.
    pub writes: Vec<(usize, u64, u64)>,
    pub pp_crc: u32,
    pub f_crc: u32,
}

impl Entry {
    pub(crate) fn encode(&self) -> Option<AlignedBuf> {
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
        match self.array {
            Some(u) => b[UUID_AT..UUID_AT + 16].copy_from_slice(&u.0),
            None => b[..8].copy_from_slice(&MAGIC_V1),
        }
        let crc = crc32c(&b[..HEADER - 4]);
        b[HEADER - 4..].copy_from_slice(&crc.to_le_bytes());
        Some(b)
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < HEADER || (b[..8] != MAGIC && b[..8] != MAGIC_V1) {
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
        let mut array = [0u8; 16];
        array.copy_from_slice(&b[UUID_AT..UUID_AT + 16]);
        Some(Entry {
            array: (b[..8] == MAGIC).then_some(Uuid(array)),
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

/// Zeroes `member`'s log area (every slot), then flushes it: done before a superblock first
/// names a device as a member of an array, so nothing from an earlier life is replayed.
pub(crate) fn clear_area(meta: &MetaLayout, member: &dyn Member) -> Result<(), MemberError> {
    if meta.ppl_bytes == 0 {
        return Ok(());
    }
    let zeros = AlignedBuf::new(meta.ppl_bytes as usize, 4096);
    member.write_at(meta.ppl_offset, &zeros)?;
    member.flush()
}

/// Write rounds in flight, counted per partial-parity-log epoch they were planned under.
/// A round enters while it holds the array's state lock (so it plans with the epoch it
/// registers); the superblock may say "covered" only when no round of an older epoch is left:
/// those may have planned without the log and still be writing.
#[derive(Debug, Default)]
pub(crate) struct Inflight(std::sync::Mutex<Vec<(u64, usize)>>);

impl Inflight {
    fn rounds(&self) -> std::sync::MutexGuard<'_, Vec<(u64, usize)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a round planned under `epoch` until the guard drops.
    pub(crate) fn enter(&self, epoch: u64) -> InflightGuard<'_> {
        let mut r = self.rounds();
        match r.iter_mut().find(|(e, _)| *e == epoch) {
            Some((_, n)) => *n += 1,
            None => r.push((epoch, 1)),
        }
        InflightGuard { reg: self, epoch }
    }

    /// Ends a registration whose guard was given up ([`InflightGuard::keep`]).
    pub(crate) fn leave(&self, epoch: u64) {
        let mut r = self.rounds();
        if let Some(i) = r.iter().position(|(e, _)| *e == epoch) {
            r[i].1 -= 1;
            if r[i].1 == 0 {
                r.swap_remove(i);
            }
        }
    }

    /// The oldest epoch with a round in flight.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.rounds()
            .iter()
            .filter(|&&(_, n)| n > 0)
            .map(|&(e, _)| e)
            .min()
    }

    /// Whether a round planned under an epoch older than `epoch` is still in flight.
    pub(crate) fn older_than(&self, epoch: u64) -> bool {
        self.rounds().iter().any(|&(e, n)| e < epoch && n > 0)
    }
}

/// A registered round (see [`Inflight::enter`]).
#[derive(Debug)]
pub(crate) struct InflightGuard<'a> {
    reg: &'a Inflight,
    epoch: u64,
}

impl InflightGuard<'_> {
    /// Keeps the registration past the guard (a request that outlives the call that
    /// planned it); end it with [`Inflight::leave`].
    pub(crate) fn keep(self) -> u64 {
        let epoch = self.epoch;
        std::mem::forget(self);
        epoch
    }
}

impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.reg.leave(self.epoch);
    }
}

/// What a replay did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Recovered {
    /// Entries applied.
    pub repaired: u64,
    /// Rows left as they were: the missing role was modified there together with another
    /// chunk, and the entry does not hold its new rows (written while it was present).
    pub unrecoverable: u64,
}

/// Applies the valid log entries of array `array` found on `members` (roles in order;
/// `None` = missing) whose epoch lies in `epochs`, with `missing` the role missing now
/// (`usize::MAX`: none, every member present).
/// Format-1 entries count only when `legacy` (the superblocks are version 1). Stripes below
/// `valid_below` (the rebuild checkpoint, for a role being rebuilt) are resynced from all
/// members instead.
///
/// Per row interval of an entry (the cuts of its modified ranges):
/// `parity = PP ^ modified chunks' current rows`, where the missing role's rows come from
/// the entry when it logged them (written while that role was missing); a modified chunk
/// of the missing role without logged rows leaves the interval as it is. That interval
/// belongs to the entry's own write, and only to it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recover(
    geo: &Geometry,
    meta: &MetaLayout,
    array: Uuid,
    legacy: bool,
    members: &[Option<std::sync::Arc<dyn Member>>],
    epochs: std::ops::RangeInclusive<u64>,
    missing: usize,
    valid_below: u64,
    parity: &dyn crate::parity::ParityEngine,
) -> Result<Recovered, RaidError> {
    let Some(layout) = PplLayout::new(meta, geo) else {
        return Ok(Recovered::default());
    };
    let bs = geo.block_bytes();
    let cb = geo.chunk_bytes();
    let mut done = Recovered::default();
    let io = |role: usize, e: crate::error::MemberError| RaidError::Member {
        role: MemberIdx(role),
        source: e,
    };
    for (role, m) in members.iter().enumerate() {
        let Some(m) = m else { continue };
        for slot in 0..layout.slots {
            let off = layout.offset + slot * layout.slot_bytes;
            let mut head = AlignedBuf::new(HEADER, 4096);
            m.read_at(off, &mut head).map_err(|e| io(role, e))?;
            let Some(entry) = Entry::decode(&head) else {
                continue;
            };
            let stripe = StripeIdx(entry.stripe);
            if entry.array.map_or(!legacy, |a| a != array)
                || !epochs.contains(&entry.epoch)
                || entry.stripe >= geo.stripes()
                || geo.parity_member(stripe).0 != role
                || layout.slot(geo, stripe) != slot
                || entry.hi > geo.chunk_blocks()
            {
                continue;
            }
            let base = geo.stripe_member_block(stripe).0;
            let data_off = |row: u64| meta.data_offset + (base + row) * bs as u64;
            let len = (entry.hi - entry.lo) as usize * bs;
            if entry.stripe < valid_below {
                // The rebuild already passed this stripe, so every member holds valid data:
                // recompute parity from the data chunks.
                let mut acc = AlignedBuf::new(cb, 4096);
                let mut tmp = AlignedBuf::new(cb, 4096);
                let mut complete = true;
                for d in 0..geo.data_members() {
                    let r = geo.data_member(stripe, d).0;
                    let Some(dm) = members[r].as_ref() else {
                        complete = false;
                        break;
                    };
                    dm.read_at(data_off(0), &mut tmp[..cb])
                        .map_err(|e| io(r, e))?;
                    parity.xor_acc(&[&tmp[..cb]], &mut acc[..cb])?;
                }
                if complete {
                    m.write_at(data_off(0), &acc[..cb])
                        .map_err(|e| io(role, e))?;
                    done.repaired += 1;
                }
                continue;
            }
            if role == missing {
                // A role being rebuilt holds no valid parity above the checkpoint.
                continue;
            }
            let mut pp = AlignedBuf::new(cb, 4096);
            m.read_at(off + HEADER as u64, &mut pp[..len])
                .map_err(|e| io(role, e))?;
            if crc32c(&pp[..len]) != entry.pp_crc {
                continue;
            }
            let mut newf = AlignedBuf::new(cb, 4096);
            if let Some((_, fs, fe)) = entry.f {
                if fs > fe || fe > entry.hi || fs < entry.lo {
                    continue;
                }
                let flen = (fe - fs) as usize * bs;
                m.read_at(off + HEADER as u64 + cb as u64, &mut newf[..flen])
                    .map_err(|e| io(role, e))?;
                if crc32c(&newf[..flen]) != entry.f_crc {
                    continue;
                }
            }
            let valid = entry.writes.iter().enumerate().all(|(i, &(d, s, e))| {
                d < geo.data_members()
                    && s <= e
                    && s >= entry.lo
                    && e <= entry.hi
                    && entry.writes[..i].iter().all(|w| w.0 != d)
            });
            if !valid {
                continue;
            }
            let missing_index = geo.data_index_of(stripe, MemberIdx(missing));
            let mut cuts: Vec<u64> = vec![entry.lo, entry.hi];
            for &(_, s, e) in &entry.writes {
                cuts.push(s);
                cuts.push(e);
            }
            cuts.sort_unstable();
            cuts.dedup();
            let mut tmp = AlignedBuf::new(cb, 4096);
            let mut applied = false;
            for pair in cuts.windows(2) {
                let (x, y) = (pair[0], pair[1]);
                let rel = (x - entry.lo) as usize * bs..(y - entry.lo) as usize * bs;
                let modified = entry
                    .writes
                    .iter()
                    .filter(|&&(_, s, e)| s <= x && y <= e)
                    .map(|&(d, _, _)| d);
                // parity = PP ^ current modified chunks (the missing one's from the entry).
                let mut ok = true;
                for d in modified.clone() {
                    if Some(d) == missing_index {
                        match entry.f {
                            Some((fi, fs, fe)) if fi == d && fs <= x && y <= fe => {
                                let o = (x - fs) as usize * bs;
                                parity.xor_acc(&[&newf[o..o + rel.len()]], &mut pp[rel.clone()])?;
                            }
                            _ => {
                                ok = false;
                                break;
                            }
                        }
                        continue;
                    }
                    let r = geo.data_member(stripe, d).0;
                    let Some(dm) = members[r].as_ref() else {
                        ok = false;
                        break;
                    };
                    dm.read_at(data_off(x), &mut tmp[..rel.len()])
                        .map_err(|e| io(r, e))?;
                    parity.xor_acc(&[&tmp[..rel.len()]], &mut pp[rel.clone()])?;
                }
                if !ok {
                    // Only the missing chunk changed here: the parity on media is its old or
                    // new rows (each block lands whole), so it stays. With another chunk
                    // changed beside it, nothing tells which version each one holds.
                    if modified.count() > 1 {
                        done.unrecoverable += y - x;
                    }
                    continue;
                }
                m.write_at(data_off(x), &pp[rel]).map_err(|e| io(role, e))?;
                applied = true;
            }
            if applied {
                done.repaired += 1;
            }
        }
        m.flush().map_err(|e| io(role, e))?;
    }
    Ok(done)
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
            array: Some(Uuid([7; 16])),
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
        // Format 1 (no array UUID) reads as an entry of no stated array.
        let v1 = Entry {
            array: None,
            ..e.clone()
        };
        assert_eq!(Entry::decode(&v1.encode().unwrap()), Some(v1));
    }

    #[test]
    fn inflight_counts_rounds_per_epoch() {
        let reg = Inflight::default();
        let a = reg.enter(3);
        let b = reg.enter(3);
        let c = reg.enter(5);
        assert!(reg.older_than(5) && !reg.older_than(3));
        drop(a);
        assert!(reg.older_than(4));
        drop(b);
        assert!(!reg.older_than(5) && reg.older_than(6));
        drop(c);
        assert!(!reg.older_than(u64::MAX));
    }
}
