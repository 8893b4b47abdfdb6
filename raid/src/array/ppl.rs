//! Partial-parity log (PPL): closes the RAID-5 write hole while the array is degraded.
//!
//! While one role `f` is missing, `f`'s data exists only as `parity ^ other data`. A crash
//! between a stripe's data and parity writes would leave parity matching neither old nor new
//! data, and `f`'s unwritten blocks — data the crashed write never touched — would read back
//! wrong. Before a degraded write touches a stripe, the engine writes an entry to the
//! stripe's parity member (and flushes it there, if the member has a volatile cache):
//! - a header: epoch, sequence number, stripe, rows `[lo, hi)`, which data chunks the write
//!   modifies and where, and where its payload lies;
//! - the **partial parity** over `[lo, hi)`: per row, the XOR of the chunks the write does not
//!   modify (`f`'s old contents included, implied by parity);
//! - `f`'s new rows when the write modifies `f` (they live on only through parity);
//!   written from the caller's buffer, no copy.
//!
//! **On-disk format 2** (the superblock's `ppl_format`): the area of each member is a ring of
//! `headers` 8 KiB slots, then a payload ring. Entry `seq` (numbered per member) has its
//! 4 KiB header at the start of slot `seq mod headers`; its payload (partial parity, then
//! `f`'s rows, each rounded up to 4 KiB) follows the header inside the slot when it fits in
//! 4 KiB (a 4 KiB write's entry: one 8 KiB log write), else lies contiguously in the payload
//! ring, where every round's entries for one member take one span that never wraps. Headers
//! are read only at slot starts, where payload (user data, or XORs of it) never lies, so no
//! user write can forge one. Space is handed out
//! in order ([`super::ppl_ring`]): a header slot or payload span is reused only once the
//! round that logged the entry there completed — so entries of rounds in flight are never
//! overwritten, and the surviving headers are always the newest ones ever written (a suffix
//! in `seq` order), whatever the mix of requests. Many entries per member are in flight at
//! once (64 slots at 64 KiB chunks); no lock beyond the stripe locks is held across a round.
//!
//! Log writes of concurrent rounds go out together when they can ([`super::ppl_batch`]: a
//! group commit, md's io_unit idea): a round whose entries are all inline hands them to
//! whichever round is submitting, and returns once they completed.
//!
//! The header's CRC-32C covers its fields in use; the payload parts have their own.
//! **Recovery** (assembly after an unclean stop while degraded, epoch matching): per stripe,
//! its newest valid header of the epoch (highest `seq` on the stripe's parity member); if its
//! payload CRCs match, `parity = PP ^ current modified chunks ^ new f rows`, written back. Afterwards `f` reads
//! back its old rows where the writes did not modify it and some version of an interrupted
//! write elsewhere; all other blocks untouched.
//!
//! Why the newest entry alone is enough, and safe: within one epoch every write to a stripe
//! with a usable parity member is logged (but for the parity-only writes below), and a
//! stripe's writes are serialized by its stripe lock, so the newest entry belongs to the last
//! write to the stripe, and every earlier write to it had completed (and, with volatile
//! caches, was flushed: rule below) before that entry was written — older entries describe
//! nothing that may be torn, and replaying them could undo later writes. If the newest
//! entry's payload fails its CRC, either its log write was torn (its round never started
//! writing) or its payload was overwritten (its round had finished, and was flushed): either
//! way the stripe is consistent, and nothing is replayed for it. A newer entry whose header
//! is gone was overwritten, and then every older one was too (headers are reclaimed in order).
//! The epoch changes whenever the set of missing roles changes (failure, rebuild done,
//! assembly finding a role missing), so entries from another degradation are void. Stripes
//! the rebuild already passed are resynced from all members instead.
//!
//! Members with a volatile write cache (a completed write may still be lost at a power cut
//! until the member is flushed) need three more rules, as md's `ppl_do_flush`:
//! - the entry is flushed on the parity member before any data or parity write of its round;
//! - before a header slot or payload span is reused, the roles the earlier round wrote are
//!   flushed (their flush tickets are kept with the span, so this is free when another flush
//!   covered them since — with ~64 entries per member between reuses it nearly always is).
//!   Otherwise the log could lose an entry while its round's writes were still cached;
//! - before a stripe is logged again, the roles its previous logged round wrote are flushed
//!   (tickets kept per stripe, free when covered since): the new entry's partial parity is
//!   computed from what that round wrote, and the new entry supersedes the old one, so that
//!   data must not be lost from a cache (format 1's fixed slots got this from slot reuse);
//! - the epoch change flushes every member (the superblock update does), and a write round
//!   that was in flight across the change flushes the roles it wrote before it unlocks its
//!   stripes, so the first logged writes of an epoch find no unlogged data in a cache.
//!
//! A write that modifies only the missing chunk writes parity alone; each parity block lands
//! old or new and matches the untouched chunks either way, so it is not logged — unless a
//! surviving header may hold an entry for the same stripe (the ring remembers the stripes of
//! its surviving headers, seeded at assembly from what is on disk), whose replay would undo
//! it: then it is logged as usual.
//!
//! Format 1 (fixed slots, arrays created before format 2) is still read: assembly replays its
//! entries if needed, clears the header ring, and records format 2 ([`v1`]).
//!
//! Needs room for one round's largest entries on one member (`ceil(8 / members)` entries of
//! two chunks each, e.g. `chunk <= 128 KiB` with 3 members and the default 960 KiB area);
//! otherwise the array runs without the log and says so ([`super::Array::write_hole_protected`]).

use std::sync::Arc;

use crate::error::RaidError;
use crate::geometry::{Geometry, MemberIdx, StripeIdx};
use crate::member::{AlignedBuf, Member};
use crate::superblock::crc32c;

use super::MetaLayout;

mod v1;

/// The log format this version writes.
pub(crate) const FORMAT: u32 = 2;
const MAGIC: [u8; 8] = *b"RLPPL\0\0\x02";
/// Header size.
pub(crate) const HEADER: usize = 4096;
/// Payload bytes that fit in the header slot after the header.
pub(crate) const INLINE: u64 = 4096;
/// Header slot size.
const SLOT: u64 = HEADER as u64 + INLINE;
/// Most modified chunks per entry (one per data member); 112 + 24 × 64 bytes fit the header.
/// The header's CRC-32C (its last 4 bytes) covers those 112 + 24 × n bytes in use.
const MAX_WRITES: usize = crate::MAX_MEMBERS;
const FIXED: usize = 112;
const _: () = assert!(FIXED + 24 * MAX_WRITES <= HEADER - 4);
const NO_F: u32 = u32::MAX;
/// Payload parts are laid out on this granularity.
const ALIGN: u64 = 4096;

/// `x` rounded up to [`ALIGN`].
pub(crate) fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// Where the header ring and the payload ring are on each member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PplLayout {
    /// Absolute byte offset of the header ring (the area's start).
    pub offset: u64,
    /// Header slots.
    pub headers: u64,
    /// Absolute byte offset of the payload ring.
    pub payload_offset: u64,
    /// Payload ring size in bytes (a multiple of 4 KiB).
    pub payload_bytes: u64,
}

impl PplLayout {
    /// `None` when the area cannot hold one round's largest entries for one member (then
    /// there is no log).
    pub(crate) fn new(meta: &MetaLayout, geo: &Geometry) -> Option<Self> {
        if !meta.ppl_offset.is_multiple_of(ALIGN) {
            return None;
        }
        let area = u64::from(meta.ppl_bytes) / ALIGN * ALIGN;
        let per_round = Self::entries_per_round(geo);
        let need = per_round * 2 * align_up(geo.chunk_bytes() as u64);
        [64u64, 32, 16, 8]
            .into_iter()
            .filter(|&h| h >= per_round)
            .find(|&h| area >= h * SLOT + need)
            .map(|headers| PplLayout {
                offset: meta.ppl_offset,
                headers,
                payload_offset: meta.ppl_offset + headers * SLOT,
                payload_bytes: area - headers * SLOT,
            })
    }

    /// Most entries one write round logs on one member: parity rotates over consecutive
    /// stripes, and a round is at most [`super::write::ROUND_STRIPES`] consecutive stripes.
    pub(crate) fn entries_per_round(geo: &Geometry) -> u64 {
        super::write::ROUND_STRIPES.div_ceil(geo.members()) as u64
    }

    /// Byte offset of the header slot of entry `seq`.
    pub(crate) fn header_offset(&self, seq: u64) -> u64 {
        self.offset + (seq % self.headers) * SLOT
    }

    /// Whether an entry's payload (`len` bytes of partial parity, `flen` of `f`'s rows)
    /// fits inline, after its header in the slot.
    pub(crate) fn fits_inline(len: u64, flen: u64) -> bool {
        align_up(len) + align_up(flen) <= INLINE
    }

    /// Whether `e`'s payload lies where the writer puts it: inline in its slot, or in the
    /// payload ring.
    fn payload_ok(&self, e: &Entry, len: u64, flen: u64) -> bool {
        let inline = self.header_offset(e.seq) + HEADER as u64;
        if Self::fits_inline(len, flen) {
            return e.pp_at == inline && e.f_at == inline + align_up(len);
        }
        let ring = |at: u64, n: u64| {
            at >= self.payload_offset
                && at
                    .checked_add(n)
                    .is_some_and(|end| end <= self.payload_offset + self.payload_bytes)
        };
        ring(e.pp_at, len) && ring(e.f_at, flen)
    }

    /// Zeroes the header ring of `member` (a new array, a new spare, a conversion from
    /// format 1): whatever was there before must not read as entries.
    pub(crate) fn clear(&self, member: &dyn Member) -> Result<(), crate::error::MemberError> {
        let zero = AlignedBuf::new((self.headers * SLOT) as usize, 4096);
        member.write_at(self.offset, &zero)?;
        member.flush()
    }
}

/// One log entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub epoch: u64,
    /// Per-member sequence number; the header lives in slot `seq mod headers`.
    pub seq: u64,
    pub stripe: u64,
    pub lo: u64,
    pub hi: u64,
    /// Data index of the missing chunk and the rows of it the write modifies.
    pub f: Option<(usize, u64, u64)>,
    /// (data index, first row, end row) of every modified chunk.
    pub writes: Vec<(usize, u64, u64)>,
    /// Absolute byte offsets of the partial parity and of `f`'s new rows.
    pub pp_at: u64,
    pub f_at: u64,
    pub pp_crc: u32,
    pub f_crc: u32,
}

impl Entry {
    /// Encodes the header into `b[..HEADER]`; `None` when it has too many writes.
    pub(crate) fn encode_into(&self, b: &mut [u8]) -> Option<()> {
        if self.writes.len() > MAX_WRITES || b.len() < HEADER {
            return None;
        }
        b[..HEADER].fill(0);
        b[..8].copy_from_slice(&MAGIC);
        let mut o = 8;
        let mut put = |b: &mut [u8], v: u64| {
            b[o..o + 8].copy_from_slice(&v.to_le_bytes());
            o += 8;
        };
        let (fi, fs, fe) = self
            .f
            .map_or((u64::from(NO_F), 0, 0), |(i, s, e)| (i as u64, s, e));
        for v in [
            self.epoch,
            self.seq,
            self.stripe,
            self.lo,
            self.hi,
            fi,
            fs,
            fe,
            self.pp_at,
            self.f_at,
            u64::from(self.pp_crc),
            u64::from(self.f_crc),
            self.writes.len() as u64,
        ] {
            put(b, v);
        }
        for &(d, s, e) in &self.writes {
            put(b, d as u64);
            put(b, s);
            put(b, e);
        }
        let crc = crc32c(&b[..o]);
        b[HEADER - 4..HEADER].copy_from_slice(&crc.to_le_bytes());
        Some(())
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < HEADER || b[..8] != MAGIC {
            return None;
        }
        // The CRC covers the bytes in use: the fixed fields and `n` writes.
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[FIXED - 8..FIXED]);
        let n = u64::from_le_bytes(n);
        if n > MAX_WRITES as u64 {
            return None;
        }
        let used = FIXED + 24 * n as usize;
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&b[HEADER - 4..HEADER]);
        if u32::from_le_bytes(crc) != crc32c(&b[..used]) {
            return None;
        }
        let mut o = 8;
        let mut get = || {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            o += 8;
            u64::from_le_bytes(x)
        };
        let (epoch, seq, stripe, lo, hi) = (get(), get(), get(), get(), get());
        let (fi, fs, fe) = (get(), get(), get());
        let (pp_at, f_at) = (get(), get());
        let (pp_crc, f_crc) = (get() as u32, get() as u32);
        let n = get() as usize;
        if n > MAX_WRITES || lo > hi {
            return None;
        }
        let writes = (0..n).map(|_| (get() as usize, get(), get())).collect();
        let f = (fi != u64::from(NO_F)).then_some((fi as usize, fs, fe));
        Some(Entry {
            epoch,
            seq,
            stripe,
            lo,
            hi,
            f,
            writes,
            pp_at,
            f_at,
            pp_crc,
            f_crc,
        })
    }
}

/// What the header ring of one member holds, read at assembly.
#[derive(Debug, Default)]
pub(crate) struct RingScan {
    /// Highest sequence number found (0 when none).
    pub max_seq: u64,
    /// (stripe, seq) of every valid header, any epoch.
    pub headers: Vec<(u64, u64)>,
}

/// Reads and decodes every header slot of `m` (valid headers only).
fn read_headers(
    m: &dyn Member,
    layout: &PplLayout,
) -> Result<Vec<Entry>, crate::error::MemberError> {
    let mut ring = AlignedBuf::new((layout.headers * SLOT) as usize, 4096);
    m.read_at(layout.offset, &mut ring)?;
    Ok((0..layout.headers)
        .filter_map(|slot| {
            let at = (slot * SLOT) as usize;
            Entry::decode(&ring[at..at + HEADER]).filter(|e| e.seq % layout.headers == slot)
        })
        .collect())
}

/// The header ring of every present member, for the running array's ring state.
pub(crate) fn scan(
    layout: &PplLayout,
    members: &[Option<Arc<dyn Member>>],
) -> Result<Vec<RingScan>, RaidError> {
    let mut out = Vec::with_capacity(members.len());
    for (role, m) in members.iter().enumerate() {
        let mut s = RingScan::default();
        if let Some(m) = m {
            let entries = read_headers(&**m, layout).map_err(|e| RaidError::Member {
                role: MemberIdx(role),
                source: e,
            })?;
            for e in entries {
                s.max_seq = s.max_seq.max(e.seq);
                s.headers.push((e.stripe, e.seq));
            }
        }
        out.push(s);
    }
    Ok(out)
}

/// Applies the valid log entries found on `members` (roles in order; `None` = missing)
/// for epoch `epoch`, with `missing` the role that was missing when they were written, in
/// the array's log format. Stripes below `valid_below` (the rebuild checkpoint, for a role
/// being rebuilt) are resynced from all members instead. Returns the stripes repaired.
pub(crate) fn recover(
    geo: &Geometry,
    meta: &MetaLayout,
    members: &[Option<Arc<dyn Member>>],
    epoch: u64,
    missing: usize,
    valid_below: u64,
    parity: &dyn crate::parity::ParityEngine,
) -> Result<u64, RaidError> {
    if meta.ppl_format < FORMAT {
        return v1::recover(geo, meta, members, epoch, missing, valid_below, parity);
    }
    let Some(layout) = PplLayout::new(meta, geo) else {
        return Ok(0);
    };
    let mut repaired = 0;
    for (role, m) in members.iter().enumerate() {
        let Some(m) = m else { continue };
        let io = |e| RaidError::Member {
            role: MemberIdx(role),
            source: e,
        };
        let mut entries = read_headers(&**m, &layout).map_err(io)?;
        entries.retain(|e| e.epoch == epoch);
        // Only each stripe's newest entry counts (see the module header).
        entries.sort_by_key(|e| (e.stripe, std::cmp::Reverse(e.seq)));
        entries.dedup_by_key(|e| e.stripe);
        for e in &entries {
            let len = e.hi.saturating_sub(e.lo) * geo.block_bytes() as u64;
            let flen = e.f.map_or(0, |(_, s, t)| t.saturating_sub(s)) * geo.block_bytes() as u64;
            if !layout.payload_ok(e, len, flen) {
                continue;
            }
            if apply(geo, meta, members, role, e, missing, valid_below, parity)? {
                repaired += 1;
            }
        }
        m.flush().map_err(io)?;
    }
    Ok(repaired)
}

/// Replays one entry found on `role`'s member: `parity = PP ^ current modified survivors ^
/// new f rows` over its rows (or, below `valid_below`, parity from all data chunks).
/// `Ok(false)` when the entry does not apply (wrong member, bad CRC, inconsistent fields).
#[allow(clippy::too_many_arguments)]
fn apply(
    geo: &Geometry,
    meta: &MetaLayout,
    members: &[Option<Arc<dyn Member>>],
    role: usize,
    entry: &Entry,
    missing: usize,
    valid_below: u64,
    parity: &dyn crate::parity::ParityEngine,
) -> Result<bool, RaidError> {
    let Some(m) = members.get(role).and_then(|m| m.as_ref()) else {
        return Ok(false);
    };
    let stripe = StripeIdx(entry.stripe);
    if entry.stripe >= geo.stripes()
        || geo.parity_member(stripe).0 != role
        || entry.hi > geo.chunk_blocks()
    {
        return Ok(false);
    }
    let bs = geo.block_bytes();
    let cb = geo.chunk_bytes();
    let io = |role: usize, e: crate::error::MemberError| RaidError::Member {
        role: MemberIdx(role),
        source: e,
    };
    let base = geo.stripe_member_block(stripe).0;
    let data_off = |row: u64| meta.data_offset + (base + row) * bs as u64;
    let len = (entry.hi - entry.lo) as usize * bs;
    if entry.stripe < valid_below {
        // The rebuild already passed this stripe, so every member holds valid data:
        // recompute parity from the data chunks.
        let mut acc = AlignedBuf::new(cb, 4096);
        let mut tmp = AlignedBuf::new(cb, 4096);
        for d in 0..geo.data_members() {
            let r = geo.data_member(stripe, d).0;
            let Some(dm) = members[r].as_ref() else {
                return Ok(false);
            };
            dm.read_at(data_off(0), &mut tmp[..cb])
                .map_err(|e| io(r, e))?;
            parity.xor_acc(&[&tmp[..cb]], &mut acc[..cb])?;
        }
        m.write_at(data_off(0), &acc[..cb])
            .map_err(|e| io(role, e))?;
        return Ok(true);
    }
    if role == missing {
        // A role being rebuilt holds no valid parity above the checkpoint.
        return Ok(false);
    }
    let mut pp = AlignedBuf::new(align_up(cb as u64) as usize, 4096);
    let plen = align_up(len as u64) as usize;
    m.read_at(entry.pp_at, &mut pp[..plen])
        .map_err(|e| io(role, e))?;
    if crc32c(&pp[..len]) != entry.pp_crc {
        return Ok(false);
    }
    let mut newf = AlignedBuf::new(align_up(cb as u64) as usize, 4096);
    if let Some((_, fs, fe)) = entry.f {
        if fs > fe || fe > entry.hi || fs < entry.lo {
            return Ok(false);
        }
        let flen = (fe - fs) as usize * bs;
        m.read_at(entry.f_at, &mut newf[..align_up(flen as u64) as usize])
            .map_err(|e| io(role, e))?;
        if crc32c(&newf[..flen]) != entry.f_crc {
            return Ok(false);
        }
    }
    // parity = PP ^ current modified survivors ^ new f rows.
    let mut tmp = AlignedBuf::new(cb, 4096);
    for &(d, s, e) in &entry.writes {
        if d >= geo.data_members() || s > e || s < entry.lo || e > entry.hi {
            return Ok(false);
        }
        let rel = (s - entry.lo) as usize * bs..(e - entry.lo) as usize * bs;
        let r = geo.data_member(stripe, d).0;
        if r == missing {
            match entry.f {
                Some((_, fs, fe)) if fs == s && fe == e => {
                    parity.xor_acc(&[&newf[..rel.len()]], &mut pp[rel])?;
                    continue;
                }
                _ => return Ok(false),
            }
        }
        let Some(dm) = members[r].as_ref() else {
            return Ok(false);
        };
        dm.read_at(data_off(s), &mut tmp[..rel.len()])
            .map_err(|e| io(r, e))?;
        parity.xor_acc(&[&tmp[..rel.len()]], &mut pp[rel])?;
    }
    m.write_at(data_off(entry.lo), &pp[..len])
        .map_err(|e| io(role, e))?;
    Ok(true)
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
            // Field offsets: epoch 8, seq 16, stripe 24, lo 32, hi 40, f 48..72, payload
            // 72..88, crcs 88..104, count 104.
            raw[32..40].copy_from_slice(&0u64.to_le_bytes());
            raw[104..112].copy_from_slice(&n.to_le_bytes());
            let used = if n as usize <= MAX_WRITES { FIXED + 24 * n as usize } else { HEADER - 4 };
            let crc = crc32c(&raw[..used]);
            raw[HEADER - 4..].copy_from_slice(&crc.to_le_bytes());
            match Entry::decode(&raw) {
                Some(e) => {
                    proptest::prop_assert!(e.writes.len() as u64 == n && n as usize <= MAX_WRITES);
                    let mut b = vec![0u8; HEADER];
                    e.encode_into(&mut b).unwrap();
                    proptest::prop_assert_eq!(Entry::decode(&b), Some(e));
                }
                None => proptest::prop_assert!(n as usize > MAX_WRITES),
            }
        }
    }

    #[test]
    fn header_round_trip_and_corruption() {
        let e = Entry {
            epoch: 3,
            seq: 700,
            stripe: 77,
            lo: 1,
            hi: 9,
            f: Some((2, 3, 9)),
            writes: vec![(0, 1, 4), (2, 3, 9)],
            pp_at: 1 << 20,
            f_at: (1 << 20) + 8192,
            pp_crc: 0xDEAD,
            f_crc: 0xBEEF,
        };
        let mut b = vec![0u8; HEADER];
        e.encode_into(&mut b).unwrap();
        assert_eq!(Entry::decode(&b), Some(e.clone()));
        let mut bad = b.clone();
        bad[40] ^= 1;
        assert_eq!(Entry::decode(&bad), None);
        assert_eq!(Entry::decode(&[0u8; HEADER]), None);
        assert_eq!(Entry::decode(&b[..100]), None);
        // A format-1 header (other magic) is not a format-2 entry.
        let mut old = b.clone();
        old[7] = 1;
        let crc = crc32c(&old[..FIXED + 48]);
        old[HEADER - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Entry::decode(&old), None);
    }

    #[test]
    fn layout_fits_a_round_and_keeps_headers_apart_from_payload() {
        let geo = |n: usize, chunk: u32| {
            Geometry::new(
                n,
                crate::geometry::ChunkSize::new(chunk).unwrap(),
                crate::geometry::BlockSize::B4096,
                64 << 20,
            )
            .unwrap()
        };
        let g = geo(4, 64 << 10);
        let meta = MetaLayout::new(&g, None);
        let l = PplLayout::new(&meta, &g).unwrap();
        assert_eq!(l.headers, 64);
        assert_eq!(l.payload_offset, meta.ppl_offset + 64 * 8192);
        assert_eq!(
            l.payload_offset + l.payload_bytes,
            meta.ppl_offset + u64::from(meta.ppl_bytes)
        );
        assert!(l.payload_bytes >= PplLayout::entries_per_round(&g) * 2 * (64 << 10));
        assert_eq!(l.header_offset(65), meta.ppl_offset + 8192);
        assert!(PplLayout::fits_inline(4096, 0) && !PplLayout::fits_inline(4096, 4096));
        // 3 members, 128 KiB chunks: 3 entries of 256 KiB per round still fit.
        let g = geo(3, 128 << 10);
        let l = PplLayout::new(&MetaLayout::new(&g, None), &g).unwrap();
        assert!(l.payload_bytes >= 3 * 256 * 1024);
        // 256 KiB chunks: no room, no log.
        let g = geo(3, 256 << 10);
        assert_eq!(PplLayout::new(&MetaLayout::new(&g, None), &g), None);
    }
}
