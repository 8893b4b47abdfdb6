//! Write path: any size and alignment of whole blocks.
//!
//! A request is cut per stripe. Each stripe gets a plan over its parity rows `[lo, hi)` (the
//! hull of the rows it writes, in blocks within the chunk):
//! - **full stripe** — every data row written: parity from the caller's buffers, no reads;
//! - **read-modify-write** — read old data of the written rows and old parity:
//!   `P' = P ^ D_old ^ D_new`;
//! - **reconstruct-write** — read the unwritten data rows: `P' = XOR(all data, new or old)`;
//!   RMW or RCW is chosen per stripe by which reads fewer blocks (ties go to RCW);
//! - **degraded**: parity member missing → write data only; a missing data member that the
//!   request does not touch → RMW; one it touches → read every survivor over `[lo, hi)`,
//!   rebuild its old rows, then RCW (its new rows live on only through parity).
//!
//! Stripes are processed in rounds of up to [`ROUND_STRIPES`]: lock the round's stripes, mark
//! the bitmap, one batch of reads, then the writes: the data writes go out first and parity
//! is computed while they run (`Executor::execute_then`), its writes joining the batch — or,
//! when the round is logged (degraded), parity and partial parity first, the log, then all
//! writes. New data is written from the caller's buffer and XORed in place; only parity and
//! old rows use scratch.
//!
//! Which degraded rounds are logged, and the flushes volatile write caches need around the
//! log (slot reuse, epoch changes), are described in [`super::ppl`].
//!
//! Failures: a failed read marks the member failed and replans the round (the stripes stay
//! locked). A failed write marks the member failed and the write still succeeds: parity was
//! computed over the new data, so the lost member's rows are implied by it — after the
//! members the round's other writes went to were flushed, so no superblock says the member
//! is gone while those writes could still be lost from a cache. A second loss stops the
//! array with [`RaidError::ArrayFailed`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::RaidError;
use crate::geometry::{ArrayBlock, MemberIdx, StripeIdx};
use crate::io::{Executor, MemberOp};
use crate::member::{AlignedBuf, Member};
use crate::parity::XorJob;
use crate::superblock::{crc32c, SlotState};

use super::flush::Ticket;
use super::ppl::{Entry, PplLayout, HEADER};
use super::{Array, View, INLINE_MEMBERS};

use smallvec::{smallvec, SmallVec};

/// One stripe's chunk writes of a request (inline: a small write touches one or two).
pub(super) type StripeWrites<'d> = SmallVec<[ChunkWrite<'d>; 2]>;

/// A request's chunk writes per stripe, in order (inline up to two stripes).
pub(super) type PerStripe<'d> = SmallVec<[(StripeIdx, StripeWrites<'d>); 2]>;

/// Stripes per lock/read/write round.
pub const ROUND_STRIPES: usize = 8;

/// New data for one chunk of a stripe.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChunkWrite<'d> {
    pub data_index: usize,
    /// First row (block within the chunk).
    pub start: u64,
    /// One past the last row.
    pub end: u64,
    pub data: &'d [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Rcw,
    Rmw,
    DataOnly,
    /// Missing data chunk `f` is written: rebuild its old rows first.
    Reconstruct {
        failed: usize,
    },
}

#[derive(Debug)]
pub(super) struct Plan<'d> {
    pub stripe: StripeIdx,
    pub writes: StripeWrites<'d>,
    pub lo: u64,
    pub hi: u64,
    pub mode: Mode,
    pub full: bool,
    /// Old rows `[lo, hi)` per data index (only those the mode reads or rebuilds).
    pub old: SmallVec<[Option<super::Scratch>; INLINE_MEMBERS]>,
    pub parity: Option<super::Scratch>,
    /// Log buffer (4 KiB header, then the partial parity over `[lo, hi)`), and the missing
    /// role's data index in this stripe, when this stripe's write is logged (degraded,
    /// parity member usable).
    pub log: Option<(AlignedBuf, Option<usize>)>,
}

/// The rows of data chunk to read for a plan in `mode` over `[lo, hi)`, given the rows
/// `written` there (if any): up to two row ranges (empty ones are `(x, x)`).
pub(super) fn old_rows(
    mode: Mode,
    written: Option<(u64, u64)>,
    lo: u64,
    hi: u64,
) -> [(u64, u64); 2] {
    match (mode, written) {
        (Mode::Rmw, Some((s, e))) => [(s, e), (0, 0)],
        (Mode::Rcw, Some((s, e))) => [(lo, s), (e, hi)],
        _ => [(lo, hi), (0, 0)],
    }
}

impl Array {
    /// Writes `data` (whole blocks) starting at block `start`. Returns once every member
    /// write completed (durability needs [`Array::flush`]).
    pub fn write<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        start: ArrayBlock,
        data: &[u8],
    ) -> Result<(), RaidError> {
        let blocks = self.blocks_of(data.len())?;
        self.check_alignment(data.as_ptr() as usize)?;
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let segs: Vec<_> = self.geo.segments(start, blocks)?.collect();
        self.view()?;
        self.ensure_dirty()?;
        let stripes = self
            .per_stripe(segs, |r| data.get(r))
            .ok_or(RaidError::State("request length"))?;
        for round in stripes.chunks(ROUND_STRIPES) {
            self.write_round(exec, round)?;
        }
        Ok(())
    }

    /// A request's segments grouped per stripe: segments come in logical order, so a
    /// stripe's are consecutive. `data` gives the bytes of a byte range of the request
    /// (`None`: not one piece of memory, and the request is not for this grouping).
    #[allow(clippy::type_complexity)]
    pub(super) fn per_stripe<'d>(
        &self,
        segs: impl IntoIterator<Item = crate::geometry::Segment>,
        data: impl Fn(std::ops::Range<usize>) -> Option<&'d [u8]>,
    ) -> Option<PerStripe<'d>> {
        let bs = self.geo.block_bytes();
        let mut stripes: PerStripe<'d> = SmallVec::new();
        for seg in segs {
            let off = seg.request_offset as usize * bs;
            let cw = ChunkWrite {
                data_index: seg.at.data_index,
                start: seg.at.offset_in_chunk,
                end: seg.at.offset_in_chunk + seg.blocks,
                data: data(off..off + seg.blocks as usize * bs)?,
            };
            match stripes.last_mut() {
                Some((s, v)) if *s == seg.at.stripe => v.push(cw),
                _ => stripes.push((seg.at.stripe, smallvec![cw])),
            }
        }
        Some(stripes)
    }

    /// The members [`Array::flush`] flushes (every present member, and a hot-replace member),
    /// for a caller that flushes them on its own ring ([`crate::OwnedRing`]): `Ok(None)` when
    /// one has no descriptor for direct I/O. If one of those flushes fails, call
    /// [`Array::flush`]: it marks the member failed (a poller must not: that writes
    /// superblocks).
    pub fn flush_targets(&self) -> Result<Option<Vec<Arc<dyn Member>>>, RaidError> {
        let view = self.view()?;
        let mirror = view.replacement.as_ref().map(|(r, m, _)| (*r, m));
        let present = view.members.iter().enumerate();
        let present = present.filter_map(|(role, m)| m.as_ref().map(|m| (role, m)));
        let mut out = Vec::with_capacity(view.members.len() + 1);
        for (_, m) in present.chain(mirror) {
            if m.direct_fd().is_none() {
                return Ok(None);
            }
            out.push(m.clone());
        }
        Ok(Some(out))
    }

    /// Flushes every present member (and a hot-replace member: it has mirrored writes).
    pub fn flush(&self) -> Result<(), RaidError> {
        let view = self.view()?;
        let mirror = view.replacement.as_ref().map(|(r, m, _)| (*r, m));
        let present = view.members.iter().enumerate();
        let present = present.filter_map(|(role, m)| m.as_ref().map(|m| (role, m)));
        for (role, m) in present.chain(mirror) {
            if let Err(e) = m.flush() {
                self.fail_member(MemberIdx(role), &**m, &e)?;
            }
        }
        Ok(())
    }

    fn write_round<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        round: &[(StripeIdx, StripeWrites<'_>)],
    ) -> Result<(), RaidError> {
        let (first, last) = match (round.first(), round.last()) {
            (Some(f), Some(l)) => (f.0 .0, l.0 .0),
            _ => return Ok(()),
        };
        let guard = self.locks.lock(round.iter().map(|(s, _)| *s));
        self.bitmap.begin(self, first, last)?;
        let result = self.write_round_locked(exec, round);
        self.bitmap.end(first, last);
        drop(guard);
        // The last round of an older log epoch records that the log covers again. Not after
        // a failed request: it may have left a stripe torn (the flag then stays until the
        // next write that succeeds, a refusal at worst).
        result.and_then(|()| self.maybe_cover())
    }

    fn write_round_locked<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        round: &[(StripeIdx, StripeWrites<'_>)],
    ) -> Result<(), RaidError> {
        let force_rcw = self.read_state().resync.is_some() || self.torn.load(Ordering::SeqCst) > 0;
        // Every epoch this request wrote under stays registered until it returns: a failed
        // attempt may leave a stripe torn until a later attempt rewrites it.
        let mut inflight = Vec::new();
        for _ in 0..=self.geo.members() {
            let (view, epoch, log_on, always) = self.write_view()?;
            let missing = (0..self.geo.members()).find(|&r| view.states[r] != SlotState::Active);
            let layout = self.ppl.filter(|_| log_on && (missing.is_some() || always));
            // Slot locks after stripe locks; holders never wait for stripe locks, so no cycle.
            let _slots = layout.map(|l| {
                self.ppl_locks
                    .lock(round.iter().map(|(s, _)| l.lock_key(&self.geo, *s)))
            });
            let mut plans = Vec::with_capacity(round.len());
            for (stripe, writes) in round {
                let log = layout.map(|l| self.log_want(&l, missing, *stripe));
                plans.push(self.plan(&view, *stripe, writes, force_rcw, log)?);
            }
            let reads_ok = self.read_phase(exec, &view, &mut plans)?;
            if !reads_ok {
                self.release(plans);
                continue;
            }
            // From here on this round writes what it planned under `epoch`.
            match self.enter_writes(epoch) {
                Some(g) => inflight.push(g),
                None => {
                    self.release(plans);
                    continue;
                }
            }
            let result = match layout {
                Some(l) => {
                    // The log needs the partial parity before any data write starts.
                    self.compute_all(&mut plans)?;
                    if !self.log_phase(exec, &view, &mut plans, &l, epoch)? {
                        self.release(plans);
                        continue;
                    }
                    let r = self.write_phase(exec, &view, &plans);
                    self.remember_slot_writes(&view, &plans, &l);
                    r
                }
                None => self.write_overlapped(exec, &view, &mut plans),
            };
            let result = result.and_then(|()| self.settle_epoch(&view, &plans, epoch));
            for p in &plans {
                self.count_stripe(p.full, p.mode);
            }
            self.release(plans);
            return result;
        }
        Err(RaidError::State("write kept failing on changing members"))
    }

    /// What [`Array::plan`] needs to know to log `stripe`'s write under `layout`, with role
    /// `missing` absent: the missing role's data index there (none when it holds parity), and
    /// whether the stripe's slot is known to hold another stripe's entry (or a void one).
    pub(super) fn log_want(
        &self,
        layout: &PplLayout,
        missing: Option<usize>,
        stripe: StripeIdx,
    ) -> (Option<usize>, bool) {
        let f = missing.and_then(|m| self.geo.data_index_of(stripe, MemberIdx(m)));
        let pm = self.geo.parity_member(stripe).0;
        let slot_elsewhere = self.flush_gates[pm]
            .slot_stripe(layout.slot(&self.geo, stripe))
            .is_some_and(|s| s != stripe.0);
        (f, slot_elsewhere)
    }

    /// Counts one stripe written (by how it was written).
    pub(super) fn count_stripe(&self, full: bool, mode: Mode) {
        let c = &self.counters;
        let counter = match (full, mode) {
            (true, Mode::Rcw) => &c.full_stripe,
            (_, Mode::Rcw) => &c.rcw,
            (_, Mode::Rmw) => &c.rmw,
            (_, Mode::DataOnly) => &c.data_only,
            (_, Mode::Reconstruct { .. }) => &c.reconstruct_write,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn release(&self, plans: Vec<Plan<'_>>) {
        let mut logs = Vec::new();
        let bufs: Vec<super::Scratch> = plans
            .into_iter()
            .flat_map(|p| {
                logs.extend(p.log.map(|l| l.0));
                p.old.into_iter().flatten().chain(p.parity)
            })
            .collect();
        self.give_scratch(bufs);
        self.give_log_scratch(logs);
    }

    /// Roles (with a volatile write cache) a plan writes: its usable data chunks and parity.
    pub(super) fn written_roles(&self, view: &View, p: &Plan<'_>) -> Vec<usize> {
        let data = p.writes.iter().map(|w| w.data_index);
        self.roles_written(view, p.stripe, data, p.parity.is_some())
    }

    /// Roles (with a volatile write cache) a write of data indices `data` (and parity, with
    /// `parity`) reaches in `stripe`.
    pub(super) fn roles_written(
        &self,
        view: &View,
        stripe: StripeIdx,
        data: impl Iterator<Item = usize>,
        parity: bool,
    ) -> Vec<usize> {
        let mut roles: Vec<usize> = data.map(|d| self.geo.data_member(stripe, d).0).collect();
        if parity {
            roles.push(self.geo.parity_member(stripe).0);
        }
        roles.retain(|&r| {
            view.usable(r, stripe) && view.member(r).is_some_and(|m| m.volatile_write_cache())
        });
        roles
    }

    /// After a logged round's writes completed: records in each entry's slot the roles the
    /// round wrote, with flush tickets, so the slot is reused only once they are durable.
    fn remember_slot_writes(&self, view: &View, plans: &[Plan<'_>], layout: &PplLayout) {
        for p in plans.iter().filter(|p| p.log.is_some()) {
            self.remember_slot(layout, p.stripe, self.written_roles(view, p));
        }
    }

    /// Records in `stripe`'s log slot that its entry's round wrote `roles` (completed now).
    pub(super) fn remember_slot(&self, layout: &PplLayout, stripe: StripeIdx, roles: Vec<usize>) {
        let tickets = roles
            .into_iter()
            .map(|role| Ticket {
                role,
                number: self.flush_gates[role].ticket(),
            })
            .collect();
        let pm = self.geo.parity_member(stripe).0;
        self.flush_gates[pm].set_slot_writes(layout.slot(&self.geo, stripe), stripe.0, tickets);
    }

    /// Marks what the log slots of `stripes` hold as unknown (an entry write, or the flush
    /// after it, failed: some may be on media, some not).
    pub(super) fn forget_slots(
        &self,
        layout: &PplLayout,
        stripes: impl Iterator<Item = StripeIdx>,
    ) {
        for stripe in stripes {
            let pm = self.geo.parity_member(stripe).0;
            self.flush_gates[pm].forget_slot(layout.slot(&self.geo, stripe));
        }
    }

    /// A round planned under partial-parity-log epoch `epoch` whose writes completed after
    /// the epoch changed (a member failed or came back meanwhile): the flush of every member
    /// that came with the change may have run before these writes completed, so flush the
    /// roles written now, before the stripes are unlocked. A logged write of the new epoch
    /// computes partial parity from these stripes' data and must not find it only in a cache.
    fn settle_epoch(&self, view: &View, plans: &[Plan<'_>], epoch: u64) -> Result<(), RaidError> {
        if self.read_state().ppl_epoch == epoch {
            return Ok(());
        }
        let mut roles: Vec<usize> = plans
            .iter()
            .flat_map(|p| self.written_roles(view, p))
            .collect();
        roles.sort_unstable();
        roles.dedup();
        for role in roles {
            if let Some(m) = view.member(role) {
                if let Err(e) = self.flush_gates[role].flush(m) {
                    self.fail_member(MemberIdx(role), m, &e)?;
                }
            }
        }
        Ok(())
    }

    /// Before log entries overwrite their slots: the writes of the rounds that logged the
    /// entries being overwritten must be durable (md's `ppl_do_flush`), or a power cut could
    /// lose them with no entry left to repair their stripes' parity; and a new entry's
    /// partial parity, computed from what the members returned, must not rest on data still
    /// in a cache (every earlier write to a stripe within an epoch was logged in its slot, so
    /// this covers them all). Free when flushes since covered them. `Ok(false)` when a member
    /// failed.
    fn settle_slots(
        &self,
        view: &View,
        plans: &[Plan<'_>],
        layout: &PplLayout,
    ) -> Result<bool, RaidError> {
        let logged = plans.iter().filter(|p| p.log.is_some()).map(|p| p.stripe);
        for t in self.due_tickets(layout, logged) {
            let Some(m) = view.member(t.role) else {
                continue;
            };
            if let Err(e) = self.flush_gates[t.role].flush_to(m, t.number) {
                self.fail_member(MemberIdx(t.role), m, &e)?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The flushes (per role, the newest ticket) due before entries for `stripes` overwrite
    /// their slots (see [`Array::settle_slots`]); empty when flushes since covered them.
    pub(super) fn due_tickets(
        &self,
        layout: &PplLayout,
        stripes: impl Iterator<Item = StripeIdx>,
    ) -> Vec<Ticket> {
        let mut due: Vec<Ticket> = Vec::new();
        for stripe in stripes {
            let pm = self.geo.parity_member(stripe).0;
            for t in self.flush_gates[pm].slot_writes(layout.slot(&self.geo, stripe)) {
                if self.flush_gates[t.role].covered(t.number) {
                    continue;
                }
                match due.iter_mut().find(|d| d.role == t.role) {
                    Some(d) => d.number = d.number.max(t.number),
                    None => due.push(t),
                }
            }
        }
        due
    }

    /// Fills the header of every logged plan's entry (written under log epoch `epoch`) in
    /// front of its partial parity, which [`Array::compute_all`] computed. Returns the
    /// stripes whose entry is ready to write.
    pub(super) fn log_heads(&self, plans: &mut [Plan<'_>], epoch: u64) -> Vec<StripeIdx> {
        let bs = self.geo.block_bytes();
        let mut logged = Vec::with_capacity(plans.len());
        for p in plans.iter_mut() {
            let len = (p.hi - p.lo) as usize * bs;
            let (stripe, lo, hi) = (p.stripe.0, p.lo, p.hi);
            let Some((buf, f)) = p.log.as_mut() else {
                continue;
            };
            let fw = f.and_then(|f| p.writes.iter().find(|w| w.data_index == f));
            let entry = Entry {
                array: Some(self.uuid),
                epoch,
                stripe,
                lo,
                hi,
                f: f.zip(fw).map(|(f, w)| (f, w.start, w.end)),
                writes: p
                    .writes
                    .iter()
                    .map(|w| (w.data_index, w.start, w.end))
                    .collect(),
                pp_crc: crc32c(&buf[HEADER..HEADER + len]),
                f_crc: fw.map_or(0, |w| crc32c(w.data)),
            };
            let Some(head) = entry.encode() else { continue };
            buf[..HEADER].copy_from_slice(&head);
            logged.push(p.stripe);
        }
        logged
    }

    /// Writes and flushes the partial-parity-log entries of every logged plan: per stripe one
    /// write of header + partial parity (one buffer) and, if the missing chunk is written, one
    /// of its new rows straight from the caller's buffer. `Ok(false)` when a member failed.
    fn log_phase<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &mut [Plan<'_>],
        layout: &PplLayout,
        epoch: u64,
    ) -> Result<bool, RaidError> {
        if !self.settle_slots(view, plans, layout)? {
            return Ok(false);
        }
        let bs = self.geo.block_bytes();
        let cb = self.geo.chunk_bytes() as u64;
        let logged = self.log_heads(plans, epoch);
        let mut ops = Vec::new();
        let mut flush: Vec<usize> = Vec::new();
        for p in plans.iter() {
            let Some((buf, f)) = &p.log else { continue };
            if !logged.contains(&p.stripe) {
                continue;
            }
            let pm = self.geo.parity_member(p.stripe);
            let Some(m) = view.member(pm.0) else { continue };
            let off = layout.slot_offset(&self.geo, p.stripe);
            let len = (p.hi - p.lo) as usize * bs;
            ops.push(MemberOp::write(pm, m, off, &buf[..HEADER + len]));
            if let Some(fw) = f.and_then(|f| p.writes.iter().find(|w| w.data_index == f)) {
                ops.push(MemberOp::write(pm, m, off + HEADER as u64 + cb, fw.data));
            }
            if m.volatile_write_cache() && !flush.contains(&pm.0) {
                flush.push(pm.0);
            }
        }
        exec.execute(&mut ops);
        let logged_plans = || plans.iter().filter(|p| p.log.is_some()).map(|p| p.stripe);
        if ops.iter().any(|op| !matches!(op.result, Some(Ok(())))) {
            // Some entries may be on media, some not: what the slots hold is unknown again.
            self.forget_slots(layout, logged_plans());
        }
        if self.fail_from(&mut ops)? {
            return Ok(false);
        }
        // One cache flush per member that got entries (shared with concurrent requests
        // through the member's flush gate): the log is on media before any data or parity
        // write of the round starts. (Per-write RWF_DSYNC measured ~7x slower on a
        // virtio disk without FUA: every such write costs its own flush.)
        for role in flush {
            if let Some(m) = view.member(role) {
                if let Err(e) = self.flush_gates[role].flush(m) {
                    self.forget_slots(layout, logged_plans());
                    self.fail_member(MemberIdx(role), m, &e)?;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    pub(super) fn plan<'d>(
        &self,
        view: &View,
        stripe: StripeIdx,
        writes: &[ChunkWrite<'d>],
        force_rcw: bool,
        log: Option<(Option<usize>, bool)>,
    ) -> Result<Plan<'d>, RaidError> {
        let geo = &self.geo;
        let dm = geo.data_members();
        let cb = geo.chunk_blocks();
        let lo = writes.iter().map(|w| w.start).min().unwrap_or(0);
        let hi = writes.iter().map(|w| w.end).max().unwrap_or(0);
        let rows = hi - lo;
        let written: u64 = writes.iter().map(|w| w.end - w.start).sum();
        let full = lo == 0 && hi == cb && written == dm as u64 * cb;
        let pm = geo.parity_member(stripe).0;
        let missing: SmallVec<[usize; 2]> = (0..geo.members())
            .filter(|&r| !view.usable(r, stripe))
            .collect();
        let mode = match missing.as_slice() {
            [] if full || force_rcw => Mode::Rcw,
            [] => {
                let rmw_reads = written + rows;
                let rcw_reads = dm as u64 * rows - written;
                if rmw_reads < rcw_reads {
                    Mode::Rmw
                } else {
                    Mode::Rcw
                }
            }
            [m] if *m == pm => Mode::DataOnly,
            [m] => {
                let f = geo
                    .data_index_of(stripe, MemberIdx(*m))
                    .ok_or(RaidError::State("layout"))?;
                match writes.iter().find(|w| w.data_index == f) {
                    None => Mode::Rmw,
                    Some(w) if w.start == lo && w.end == hi => Mode::Rcw,
                    Some(_) => Mode::Reconstruct { failed: f },
                }
            }
            _ => return self.two_holes(view),
        };
        let needs_old = |d: usize| -> bool {
            let w = writes.iter().find(|w| w.data_index == d);
            match mode {
                Mode::DataOnly => false,
                Mode::Rmw => w.is_some(),
                Mode::Rcw => w.is_none_or(|w| w.start > lo || w.end < hi),
                Mode::Reconstruct { .. } => true,
            }
        };
        let old = (0..dm)
            .map(|d| needs_old(d).then(|| self.take_scratch()))
            .collect();
        let parity = (mode != Mode::DataOnly).then(|| self.take_scratch());
        // A write that modifies only the missing chunk writes parity alone: each parity block
        // lands old or new, and either way matches the untouched chunks, so a crash cannot
        // corrupt what the write did not touch — no entry needed. Unless the slot may hold an
        // earlier entry for this stripe: replaying that one after this write would bring the
        // missing chunk's rows back to before it; writing the new entry replaces it.
        let parity_only = !missing.is_empty()
            && writes
                .iter()
                .all(|w| !view.usable(geo.data_member(stripe, w.data_index).0, stripe));
        // Policy "always", healthy: a whole stripe needs no partial parity (every chunk is
        // new), but an earlier entry for this stripe in its slot would be replayed over it;
        // writing this one voids it. Not needed while the slot holds another stripe's entry.
        let healthy_full = full && missing.is_empty();
        let log = log
            .filter(|&(_, slot_elsewhere)| {
                mode != Mode::DataOnly
                    && !(parity_only && slot_elsewhere)
                    && !(healthy_full && slot_elsewhere)
            })
            .map(|(f, _)| (self.take_log_scratch(), f));
        Ok(Plan {
            stripe,
            writes: writes.iter().cloned().collect(),
            lo,
            hi,
            mode,
            full,
            old,
            parity,
            log,
        })
    }

    /// Issues every plan's reads in one batch. `Ok(false)` when a member failed (replan).
    fn read_phase<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &mut [Plan<'_>],
    ) -> Result<bool, RaidError> {
        let bs = self.geo.block_bytes();
        let mut ops = Vec::new();
        for p in plans.iter_mut() {
            let base = self.geo.stripe_member_block(p.stripe).0;
            let (lo, hi) = (p.lo, p.hi);
            let off = |row: u64| self.member_offset(base + row);
            let pm = self.geo.parity_member(p.stripe);
            let failed = match p.mode {
                Mode::Reconstruct { failed } => Some(failed),
                _ => None,
            };
            if matches!(p.mode, Mode::Rmw | Mode::Reconstruct { .. }) {
                if let (Some(buf), Some(m)) = (p.parity.as_mut(), view.member(pm.0)) {
                    let len = (hi - lo) as usize * bs;
                    ops.push(MemberOp::read(pm, m, off(lo), &mut buf[..len]));
                }
            }
            for (d, old) in p.old.iter_mut().enumerate() {
                let Some(old) = old.as_mut() else { continue };
                if Some(d) == failed {
                    continue;
                }
                let role = self.geo.data_member(p.stripe, d);
                let m = view
                    .member(role.0)
                    .ok_or(RaidError::State("usable member missing"))?;
                let w = p.writes.iter().find(|w| w.data_index == d);
                let ranges = old_rows(p.mode, w.map(|w| (w.start, w.end)), lo, hi);
                let mut rest = &mut old[..(hi - lo) as usize * bs];
                let mut consumed = lo;
                for (a, b) in ranges {
                    if b <= a {
                        continue;
                    }
                    let skip = (a - consumed) as usize * bs;
                    let (_, tail) = rest.split_at_mut(skip);
                    let (slice, tail) = tail.split_at_mut((b - a) as usize * bs);
                    rest = tail;
                    consumed = b;
                    ops.push(MemberOp::read(role, m, off(a), slice));
                }
            }
        }
        exec.execute(&mut ops);
        Ok(!self.fail_from(&mut ops)?)
    }

    /// Parity of every full-stripe plan of the round (no reads, no log) in one engine batch.
    fn compute_full_stripes(&self, plans: &mut [Plan<'_>]) -> Result<(), RaidError> {
        let cb = self.geo.chunk_bytes();
        let mut jobs = Vec::new();
        for p in plans
            .iter_mut()
            .filter(|p| p.full && p.mode == Mode::Rcw && p.log.is_none())
        {
            let Some(parity) = p.parity.as_mut() else {
                continue;
            };
            let mut srcs: Vec<&[u8]> = p.writes.iter().map(|w| w.data).collect();
            srcs.truncate(self.geo.data_members());
            jobs.push(XorJob {
                srcs,
                dst: &mut parity[..cb],
            });
        }
        if !jobs.is_empty() {
            self.parity.xor_batch(&mut jobs)?;
        }
        Ok(())
    }

    /// Computes new parity (and, for `Reconstruct`, the missing chunk's old rows).
    fn compute(&self, p: &mut Plan<'_>) -> Result<(), RaidError> {
        let bs = self.geo.block_bytes();
        let (lo, hi) = (p.lo, p.hi);
        let len = (hi - lo) as usize * bs;
        let Some(parity) = p.parity.as_mut() else {
            return Ok(());
        };
        if let Mode::Reconstruct { failed } = p.mode {
            let mut missing = p.old[failed].take().ok_or(RaidError::State("no buffer"))?;
            {
                let mut srcs: Vec<&[u8]> = vec![&parity[..len]];
                for (d, o) in p.old.iter().enumerate() {
                    if d != failed {
                        srcs.push(&o.as_ref().ok_or(RaidError::State("no buffer"))?[..len]);
                    }
                }
                self.parity.xor_gen(&srcs, &mut missing[..len])?;
            }
            p.old[failed] = Some(missing);
        }
        // Breakpoints: every interval between them has one source per chunk.
        let mut cuts: SmallVec<[u64; 8]> = smallvec![lo, hi];
        for w in &p.writes {
            cuts.push(w.start);
            cuts.push(w.end);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let rmw = p.mode == Mode::Rmw;
        let mut srcs: SmallVec<[&[u8]; 2 * INLINE_MEMBERS]> = SmallVec::new();
        if let Some((pp, _)) = p.log.as_mut() {
            // Partial parity per interval: XOR of the chunks the write does not modify.
            // RMW: old parity ^ old modified chunks; otherwise the old unmodified chunks.
            let mut srcs: SmallVec<[&[u8]; INLINE_MEMBERS]> = SmallVec::new();
            for pair in cuts.windows(2) {
                let (x, y) = (pair[0], pair[1]);
                srcs.clear();
                let rel = (x - lo) as usize * bs..(y - lo) as usize * bs;
                if rmw {
                    srcs.push(&parity[rel.clone()]);
                }
                for d in 0..self.geo.data_members() {
                    let modified = p
                        .writes
                        .iter()
                        .any(|w| w.data_index == d && w.start <= x && y <= w.end);
                    if modified == rmw {
                        let old = p.old[d].as_ref().ok_or(RaidError::State("no old rows"))?;
                        srcs.push(&old[rel.clone()]);
                    }
                }
                // The log buffer holds the header first, then the partial parity.
                let at = HEADER + rel.start..HEADER + rel.end;
                if srcs.is_empty() {
                    pp[at].fill(0);
                } else {
                    self.parity.xor_gen(&srcs, &mut pp[at])?;
                }
            }
        }
        for pair in cuts.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            srcs.clear();
            let rel = (x - lo) as usize * bs..(y - lo) as usize * bs;
            for d in 0..self.geo.data_members() {
                let w = p
                    .writes
                    .iter()
                    .find(|w| w.data_index == d && w.start <= x && y <= w.end);
                let new = w.map(|w| {
                    let o = (x - w.start) as usize * bs;
                    &w.data[o..o + (y - x) as usize * bs]
                });
                match (rmw, new) {
                    (true, Some(n)) => {
                        let old = p.old[d].as_ref().ok_or(RaidError::State("no old rows"))?;
                        srcs.push(&old[rel.clone()]);
                        srcs.push(n);
                    }
                    (true, None) => {}
                    (false, Some(n)) => srcs.push(n),
                    (false, None) => {
                        let old = p.old[d].as_ref().ok_or(RaidError::State("no old rows"))?;
                        srcs.push(&old[rel.clone()]);
                    }
                }
            }
            if rmw {
                if !srcs.is_empty() {
                    self.parity.xor_acc(&srcs, &mut parity[rel])?;
                }
            } else {
                self.parity.xor_gen(&srcs, &mut parity[rel])?;
            }
        }
        Ok(())
    }

    /// Issues every plan's writes (data and parity) in one batch.
    fn write_phase<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &[Plan<'_>],
    ) -> Result<(), RaidError> {
        let mut ops = self.data_ops(view, plans);
        ops.extend(self.parity_ops(view, plans));
        exec.execute(&mut ops);
        self.flush_before_failing(view, &[&ops])?;
        self.fail_from(&mut ops)?;
        Ok(())
    }

    /// When a write of the round failed: flushes the members the round's other writes went
    /// to, before the failure is recorded. The round goes on without the failed member (its
    /// rows implied by the new parity), which is sound only if the other writes are durable
    /// by the time a superblock says the member is gone; otherwise a power cut could leave
    /// that superblock on media with the other writes lost from a cache (new data beside old
    /// parity, the failed member's rows reconstructed from both). If the cut comes first, no
    /// superblock records the failure and the failed member's old rows still count.
    fn flush_before_failing(
        &self,
        view: &View,
        batches: &[&[MemberOp<'_>]],
    ) -> Result<(), RaidError> {
        let ops = || batches.iter().flat_map(|b| b.iter());
        if ops().all(|op| matches!(op.result, Some(Ok(())))) {
            return Ok(());
        }
        let failing: Vec<usize> = ops()
            .filter(|op| !matches!(op.result, Some(Ok(()))))
            .map(|op| op.role.0)
            .collect();
        let mut roles: Vec<usize> = ops()
            .filter(|op| op.member.volatile_write_cache() && !failing.contains(&op.role.0))
            .map(|op| op.role.0)
            .collect();
        roles.sort_unstable();
        roles.dedup();
        // Every flush first, then any new failure: recording one writes superblocks.
        let mut errors = Vec::new();
        for role in roles {
            if let Some(m) = view.member(role) {
                if let Err(e) = self.flush_gates[role].flush(m) {
                    errors.push((role, m, e));
                }
            }
        }
        for (role, m, e) in errors {
            self.fail_member(MemberIdx(role), m, &e)?;
        }
        Ok(())
    }

    /// Without a log to write first: the data writes go out at once, parity is computed
    /// while they run, and the parity writes join the same batch.
    fn write_overlapped<'d, E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &mut [Plan<'d>],
    ) -> Result<(), RaidError> {
        let mut data = self.data_ops(view, plans);
        let mut failure: Option<RaidError> = None;
        let mut slot = Some(plans);
        let mut parity = {
            let mut then = || {
                let Some(plans) = slot.take() else {
                    return Vec::new();
                };
                if let Err(e) = self.compute_all(plans) {
                    // An engine bug: the data writes went out without parity. The stripes'
                    // bitmap regions stay dirty until the next clear; scrub repairs them.
                    failure = Some(e);
                    return Vec::new();
                }
                let plans: &[Plan<'d>] = plans;
                self.parity_ops(view, plans)
            };
            exec.execute_then(&mut data, &mut then)
        };
        self.flush_before_failing(view, &[&data, &parity])?;
        self.fail_from(&mut data)?;
        self.fail_from(&mut parity)?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes of the new data straight from the caller's buffers (no borrow of the plans).
    fn data_ops<'a, 'd: 'a>(&self, view: &'a View, plans: &[Plan<'d>]) -> Vec<MemberOp<'a>> {
        let mut ops = Vec::new();
        for p in plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            for w in &p.writes {
                let role = self.geo.data_member(p.stripe, w.data_index);
                if !view.usable(role.0, p.stripe) {
                    continue;
                }
                if let Some(m) = view.member(role.0) {
                    let data: &'d [u8] = w.data;
                    let off = self.member_offset(base + w.start);
                    ops.push(MemberOp::write(role, m, off, data));
                    // Hot replace: the new member gets the write too where it is copied.
                    if let Some(r) = view.mirror(role.0, p.stripe) {
                        ops.push(MemberOp::write(role, r, off, data));
                    }
                }
            }
        }
        ops
    }

    /// Writes of the computed parity rows.
    fn parity_ops<'a>(&self, view: &'a View, plans: &'a [Plan<'_>]) -> Vec<MemberOp<'a>> {
        let bs = self.geo.block_bytes();
        let mut ops = Vec::new();
        for p in plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            let pm = self.geo.parity_member(p.stripe);
            if let (Some(parity), true) = (p.parity.as_ref(), view.usable(pm.0, p.stripe)) {
                if let Some(m) = view.member(pm.0) {
                    let len = (p.hi - p.lo) as usize * bs;
                    let off = self.member_offset(base + p.lo);
                    ops.push(MemberOp::write(pm, m, off, &parity[..len]));
                    if let Some(r) = view.mirror(pm.0, p.stripe) {
                        ops.push(MemberOp::write(pm, r, off, &parity[..len]));
                    }
                }
            }
        }
        ops
    }

    /// Parity (and partial parity) of every plan.
    pub(super) fn compute_all(&self, plans: &mut [Plan<'_>]) -> Result<(), RaidError> {
        self.compute_full_stripes(plans)?;
        for p in plans
            .iter_mut()
            .filter(|p| !(p.full && p.mode == Mode::Rcw && p.log.is_none()))
        {
            self.compute(p)?;
        }
        Ok(())
    }
}
