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
}

/// The in-memory copy and the in-flight counts.
#[derive(Debug)]
pub struct Bitmap {
    region_stripes: u64,
    offset: u64,
    state: Mutex<State>,
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
            }),
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
        let mut changed = Vec::new();
        for r in first / self.region_stripes..=last / self.region_stripes {
            st.inflight[r as usize] += 1;
            st.touched[r as usize] = true;
            let (byte, bit) = ((r / 8) as usize, 1u8 << (r % 8));
            if st.bits[byte] & bit == 0 {
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

    /// Registers a write to stripes `first..=last` only if their bits are set already (no
    /// bitmap write is needed): `false`, registering nothing, otherwise. For a caller that
    /// must not block (a poller); it hands the write to one that may.
    pub(crate) fn try_begin(&self, first: u64, last: u64) -> bool {
        let mut st = self.lock();
        let regions = first / self.region_stripes..=last / self.region_stripes;
        let set = |st: &State, r: u64| st.bits[(r / 8) as usize] & (1u8 << (r % 8)) != 0;
        if !regions.clone().all(|r| set(&st, r)) {
            return false;
        }
        for r in regions {
            st.inflight[r as usize] += 1;
            st.touched[r as usize] = true;
        }
        true
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
