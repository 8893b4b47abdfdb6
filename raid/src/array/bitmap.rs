//! Write-intent bitmap: one bit per region of `region_stripes` stripes, stored on every
//! member at the bitmap offset.
//!
//! Protocol: before a write touches a region, the region's in-flight count goes up and, if
//! its bit was clear, the bit is set and the changed bitmap blocks are written and flushed to
//! every present member — only then may the stripe writes start. Bits are cleared lazily:
//! [`Bitmap::clear_aged`], called periodically by the owner (the daemon: every 5 s, md's
//! default `daemon_sleep`), clears a region's bit only after one whole period without any new
//! write to it (md clears after two idle periods too), so a region under steady writes never
//! pays a bitmap update per period; [`Bitmap::clear_idle`] clears every idle region at once
//! (at [`super::Array::stop`]). After an unclean stop, assembly ORs every member's
//! copy and resyncs only the regions whose bit is set.
//!
//! Clearing flushes each member before writing its copy of the cleared bits: a completed
//! write may still sit in a volatile cache, and a bit must not be clear on media while a
//! write of its region could still be lost (its stripe's parity would then disagree with
//! its data, unseen by the resync). As assembly ORs the copies, a bit reads clear only if
//! every member's copy was written, each after that member's flush.

use std::sync::{Mutex, MutexGuard};

use crate::error::RaidError;
use crate::member::AlignedBuf;

use super::{Array, MetaLayout};

const BLOCK: usize = 4096;

#[derive(Debug)]
struct State {
    bits: Vec<u8>,
    inflight: Vec<u32>,
    /// Written since the last [`Bitmap::clear_aged`] pass.
    touched: Vec<bool>,
    /// Regions whose bits are kept set (the array was started exposed there: the bits are
    /// the persisted record of where, until a rebuild rewrote them).
    pinned: Vec<bool>,
    /// Regions whose bit a non-blocking caller set and is writing to the members now: set in
    /// memory, not yet durable (writes to them wait).
    persisting: Vec<bool>,
    /// Regions whose bit is set in memory but whose write failed on some member: the next
    /// blocking `begin` writes them again.
    unsynced: Vec<bool>,
    /// A non-blocking caller's bitmap blocks are being written: no other write of bitmap
    /// blocks may start meanwhile, or the older image could land last and drop a bit.
    persist_inflight: bool,
}

/// What [`Bitmap::try_begin`] did.
#[derive(Debug)]
pub(crate) enum TryBegin {
    /// Registered; the bits are durable: the write may start.
    Ready,
    /// Registered, and bits were set: write these blocks (member byte offset, the 4 KiB
    /// image) to every present member and flush each, then call [`Bitmap::persisted`] (or
    /// [`Bitmap::persist_failed`]); only then may the write start.
    Persist(Vec<(u64, Vec<u8>)>),
    /// Another caller is making a needed bit durable: nothing registered; try again later.
    Busy,
    /// A needed bit failed to persist earlier: nothing registered; use the blocking path.
    Declined,
}

/// The in-memory copy and the in-flight counts.
#[derive(Debug)]
pub struct Bitmap {
    region_stripes: u64,
    offset: u64,
    state: Mutex<State>,
    /// Signalled when a non-blocking caller's bitmap write ended.
    persist_done: std::sync::Condvar,
}

impl Bitmap {
    pub(crate) fn new(meta: &MetaLayout, stripes: u64, bits: Option<Vec<u8>>) -> Self {
        let regions = stripes.div_ceil(meta.bitmap_region_stripes);
        let nbytes = (regions.div_ceil(8) as usize).min(meta.bitmap_bytes as usize);
        let mut b = bits.unwrap_or_default();
        b.resize(nbytes, 0);
        Bitmap {
            region_stripes: meta.bitmap_region_stripes,
            offset: meta.bitmap_offset,
            state: Mutex::new(State {
                bits: b,
                inflight: vec![0; regions as usize],
                touched: vec![false; regions as usize],
                pinned: vec![false; regions as usize],
                persisting: vec![false; regions as usize],
                unsynced: vec![false; regions as usize],
                persist_inflight: false,
            }),
            persist_done: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stripes per bit.
    pub fn region_stripes(&self) -> u64 {
        self.region_stripes
    }

    /// Regions whose bit is set.
    pub fn dirty_regions(&self) -> Vec<u64> {
        let st = self.lock();
        (0..st.inflight.len() as u64)
            .filter(|r| st.bits[(r / 8) as usize] & (1 << (r % 8)) != 0)
            .collect()
    }

    /// Keeps the bits of `regions` set (they must be set already) until [`Bitmap::unpin_all`].
    pub(crate) fn pin(&self, regions: &[u64]) {
        let mut st = self.lock();
        for &r in regions {
            if let Some(p) = st.pinned.get_mut(r as usize) {
                *p = true;
            }
        }
    }

    /// Lets every pinned bit be cleared again (by the next clearing pass).
    pub(crate) fn unpin_all(&self) {
        self.lock().pinned.fill(false);
    }

    /// Registers a write to stripes `first..=last`; returns once their bits are durable.
    pub(crate) fn begin(&self, array: &Array, first: u64, last: u64) -> Result<(), RaidError> {
        let mut st = self.lock();
        // A non-blocking caller's bitmap write in flight holds an older image of the blocks.
        while st.persist_inflight {
            st = self
                .persist_done
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
        let mut changed = Vec::new();
        for r in first / self.region_stripes..=last / self.region_stripes {
            st.inflight[r as usize] += 1;
            st.touched[r as usize] = true;
            let (byte, bit) = ((r / 8) as usize, 1u8 << (r % 8));
            // A region a non-blocking caller failed to persist is written again, and one it
            // is persisting now is written here too (this caller may not start before).
            if st.bits[byte] & bit == 0
                || std::mem::take(&mut st.unsynced[r as usize])
                || st.persisting[r as usize]
            {
                st.bits[byte] |= bit;
                changed.push(byte / BLOCK);
            }
        }
        changed.dedup();
        let result = self.write_blocks(array, &st.bits, &changed, false);
        if result.is_err() {
            drop(st);
            self.end(first, last);
        }
        result
    }

    /// Registers a write to stripes `first..=last` without waiting, for a caller that must not
    /// block (a poller; see [`TryBegin`]). Bits set by a [`TryBegin::Persist`] stay
    /// "persisting" until [`Bitmap::persisted`] or [`Bitmap::persist_failed`].
    pub(crate) fn try_begin(&self, first: u64, last: u64) -> TryBegin {
        // A thread writing bitmap blocks holds the mutex for that I/O: do not wait for it.
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return TryBegin::Busy,
        };
        let regions = first / self.region_stripes..=last / self.region_stripes;
        let set = |st: &State, r: u64| st.bits[(r / 8) as usize] & (1u8 << (r % 8)) != 0;
        if regions.clone().any(|r| st.unsynced[r as usize]) {
            return TryBegin::Declined;
        }
        if regions.clone().any(|r| st.persisting[r as usize]) {
            return TryBegin::Busy;
        }
        // One bitmap write at a time: a new bit waits while another caller's is in flight.
        if st.persist_inflight && regions.clone().any(|r| !set(&st, r)) {
            return TryBegin::Busy;
        }
        let mut changed = Vec::new();
        for r in regions.clone() {
            if !set(&st, r) {
                st.bits[(r / 8) as usize] |= 1u8 << (r % 8);
                st.persisting[r as usize] = true;
                changed.push(((r / 8) as usize) / BLOCK);
            }
        }
        for r in regions {
            st.inflight[r as usize] += 1;
            st.touched[r as usize] = true;
        }
        if changed.is_empty() {
            return TryBegin::Ready;
        }
        st.persist_inflight = true;
        changed.dedup();
        let blocks = changed
            .into_iter()
            .map(|b| {
                let start = b * BLOCK;
                let end = (start + BLOCK).min(st.bits.len());
                let mut img = vec![0u8; BLOCK];
                img[..end - start].copy_from_slice(&st.bits[start..end]);
                (self.offset + start as u64, img)
            })
            .collect();
        TryBegin::Persist(blocks)
    }

    /// The bits a [`TryBegin::Persist`] of stripes `first..=last` set are on every member.
    pub(crate) fn persisted(&self, first: u64, last: u64) {
        let mut st = self.lock();
        for r in first / self.region_stripes..=last / self.region_stripes {
            st.persisting[r as usize] = false;
        }
        st.persist_inflight = false;
        drop(st);
        self.persist_done.notify_all();
    }

    /// Writing them failed somewhere: the regions stay set in memory but count as not
    /// durable until a blocking [`Bitmap::begin`] has written them again (it does, and
    /// [`Bitmap::try_begin`] declines them until then). Ends the registration too.
    pub(crate) fn persist_failed(&self, first: u64, last: u64) {
        let mut st = self.lock();
        for r in first / self.region_stripes..=last / self.region_stripes {
            if std::mem::take(&mut st.persisting[r as usize]) {
                st.unsynced[r as usize] = true;
            }
            st.inflight[r as usize] = st.inflight[r as usize].saturating_sub(1);
        }
        st.persist_inflight = false;
        drop(st);
        self.persist_done.notify_all();
    }

    /// Ends a write registered by `begin` or `try_begin`.
    pub(crate) fn end(&self, first: u64, last: u64) {
        let mut st = self.lock();
        for r in first / self.region_stripes..=last / self.region_stripes {
            st.inflight[r as usize] = st.inflight[r as usize].saturating_sub(1);
        }
    }

    /// Clears the bits of regions with no write in flight and persists the change.
    pub fn clear_idle(&self, array: &Array) -> Result<(), RaidError> {
        let mut st = self.lock();
        let mut changed = Vec::new();
        for r in 0..st.inflight.len() {
            let (byte, bit) = (r / 8, 1u8 << (r % 8));
            if st.inflight[r] == 0 && !st.pinned[r] && st.bits[byte] & bit != 0 {
                st.bits[byte] &= !bit;
                changed.push(byte / BLOCK);
            }
        }
        changed.dedup();
        self.write_blocks(array, &st.bits, &changed, true)
    }

    /// One aging pass: clears (and persists) the bits of regions with nothing in flight that
    /// were not written since the previous pass; regions written since then only lose their
    /// "touched" mark. Returns how many bits were cleared.
    pub fn clear_aged(&self, array: &Array) -> Result<usize, RaidError> {
        let mut st = self.lock();
        let mut changed = Vec::new();
        let mut cleared = 0;
        for r in 0..st.inflight.len() {
            if std::mem::take(&mut st.touched[r]) || st.inflight[r] != 0 || st.pinned[r] {
                continue;
            }
            let (byte, bit) = (r / 8, 1u8 << (r % 8));
            if st.bits[byte] & bit != 0 {
                st.bits[byte] &= !bit;
                changed.push(byte / BLOCK);
                cleared += 1;
            }
        }
        changed.dedup();
        self.write_blocks(array, &st.bits, &changed, true)?;
        Ok(cleared)
    }

    /// Clears the bits of regions `regions` (after they were resynced).
    pub(crate) fn clear_regions(&self, array: &Array, regions: &[u64]) -> Result<(), RaidError> {
        let mut st = self.lock();
        let mut changed = Vec::new();
        for &r in regions {
            let (byte, bit) = ((r / 8) as usize, 1u8 << (r % 8));
            if st.inflight[r as usize] == 0 && !st.pinned[r as usize] && st.bits[byte] & bit != 0 {
                st.bits[byte] &= !bit;
                changed.push(byte / BLOCK);
            }
        }
        changed.dedup();
        self.write_blocks(array, &st.bits, &changed, true)
    }

    /// Writes bitmap blocks `blocks` to every present member and flushes them; with
    /// `clearing`, flushes each member first (see the module header).
    fn write_blocks(
        &self,
        array: &Array,
        bits: &[u8],
        blocks: &[usize],
        clearing: bool,
    ) -> Result<(), RaidError> {
        if blocks.is_empty() {
            return Ok(());
        }
        let mut buf = AlignedBuf::new(BLOCK, BLOCK);
        loop {
            let view = array.view()?;
            let mut failure = None;
            'members: for (role, m) in view.members.iter().enumerate() {
                let Some(m) = m else { continue };
                if clearing && m.volatile_write_cache() {
                    if let Err(e) = m.flush() {
                        failure = Some((role, m.clone(), e));
                        break 'members;
                    }
                }
                for &blk in blocks {
                    let start = blk * BLOCK;
                    let end = (start + BLOCK).min(bits.len());
                    buf.fill(0);
                    buf[..end - start].copy_from_slice(&bits[start..end]);
                    let off = self.offset + start as u64;
                    if let Err(e) = m.write_at(off, &buf).and_then(|()| m.flush()) {
                        failure = Some((role, m.clone(), e));
                        break 'members;
                    }
                }
            }
            match failure {
                None => return Ok(()),
                Some((role, m, e)) => {
                    array.fail_member(crate::geometry::MemberIdx(role), &*m, &e)?
                }
            }
        }
    }
}

/// Reads one member's copy of the bitmap (`len` bytes).
pub(crate) fn read_bits(
    m: &dyn crate::member::Member,
    meta: &MetaLayout,
    len: usize,
) -> Result<Vec<u8>, crate::error::MemberError> {
    let mut buf = AlignedBuf::new(len.div_ceil(BLOCK).max(1) * BLOCK, BLOCK);
    m.read_at(meta.bitmap_offset, &mut buf)?;
    Ok(buf[..len].to_vec())
}
