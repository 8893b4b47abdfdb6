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
use super::ppl::{align_up, Entry, PplLayout, HEADER};
use super::ppl_batch;
use super::ppl_ring::Grant;
use super::{Array, View};

/// Stripes per lock/read/write round.
pub const ROUND_STRIPES: usize = 8;

/// New data for one chunk of a stripe.
#[derive(Debug, Clone, Copy)]
struct ChunkWrite<'d> {
    data_index: usize,
    /// First row (block within the chunk).
    start: u64,
    /// One past the last row.
    end: u64,
    data: &'d [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Rcw,
    Rmw,
    DataOnly,
    /// Missing data chunk `f` is written: rebuild its old rows first.
    Reconstruct {
        failed: usize,
    },
}

#[derive(Debug)]
struct Plan<'d> {
    stripe: StripeIdx,
    writes: Vec<ChunkWrite<'d>>,
    lo: u64,
    hi: u64,
    mode: Mode,
    full: bool,
    /// Old rows `[lo, hi)` per data index (only those the mode reads or rebuilds).
    old: Vec<Option<super::Scratch>>,
    parity: Option<super::Scratch>,
    /// Log buffer (4 KiB header, then the partial parity over `[lo, hi)`), and the missing
    /// role's data index in this stripe, when this stripe's write is logged (degraded,
    /// parity member usable).
    log: Option<(AlignedBuf, Option<usize>)>,
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
        let bs = self.geo.block_bytes();
        // Group per stripe (segments come in logical order, so stripes are consecutive).
        let mut stripes: Vec<(StripeIdx, Vec<ChunkWrite<'_>>)> = Vec::new();
        for seg in segs {
            let off = seg.request_offset as usize * bs;
            let cw = ChunkWrite {
                data_index: seg.at.data_index,
                start: seg.at.offset_in_chunk,
                end: seg.at.offset_in_chunk + seg.blocks,
                data: &data[off..off + seg.blocks as usize * bs],
            };
            match stripes.last_mut() {
                Some((s, v)) if *s == seg.at.stripe => v.push(cw),
                _ => stripes.push((seg.at.stripe, vec![cw])),
            }
        }
        for round in stripes.chunks(ROUND_STRIPES) {
            self.write_round(exec, round)?;
        }
        Ok(())
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
        round: &[(StripeIdx, Vec<ChunkWrite<'_>>)],
    ) -> Result<(), RaidError> {
        let (first, last) = match (round.first(), round.last()) {
            (Some(f), Some(l)) => (f.0 .0, l.0 .0),
            _ => return Ok(()),
        };
        let _guard = self.locks.lock(round.iter().map(|(s, _)| *s));
        self.bitmap.begin(self, first, last)?;
        let result = self.write_round_locked(exec, round);
        self.bitmap.end(first, last);
        result
    }

    fn write_round_locked<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        round: &[(StripeIdx, Vec<ChunkWrite<'_>>)],
    ) -> Result<(), RaidError> {
        let force_rcw = self.read_state().resync.is_some();
        for _ in 0..=self.geo.members() {
            let view = self.view()?;
            let epoch = self.read_state().ppl_epoch;
            let missing = (0..self.geo.members()).find(|&r| view.states[r] != SlotState::Active);
            let rings = self
                .ppl_rings
                .as_ref()
                .filter(|_| missing.is_some() && self.write_hole_protected());
            let mut plans = Vec::with_capacity(round.len());
            for (stripe, writes) in round {
                let log = rings
                    .map(|_| missing.and_then(|m| self.geo.data_index_of(*stripe, MemberIdx(m))));
                plans.push(self.plan(&view, *stripe, writes, force_rcw, log)?);
            }
            let reads_ok = self.read_phase(exec, &view, &mut plans)?;
            if !reads_ok {
                self.release(plans);
                continue;
            }
            let result = match rings {
                Some(_) => {
                    // The log needs the partial parity before any data write starts.
                    self.compute_all(&mut plans)?;
                    let Some(mut grant) = self.log_phase(exec, &view, &mut plans, epoch)? else {
                        self.release(plans);
                        continue;
                    };
                    let r = self.write_phase(exec, &view, &plans);
                    self.keep_tickets(&view, &plans, &mut grant);
                    r
                }
                None => self.write_overlapped(exec, &view, &mut plans),
            };
            let result = result.and_then(|()| self.settle_epoch(&view, &plans, epoch));
            for p in &plans {
                let c = &self.counters;
                let counter = match (p.full, p.mode) {
                    (true, Mode::Rcw) => &c.full_stripe,
                    (_, Mode::Rcw) => &c.rcw,
                    (_, Mode::Rmw) => &c.rmw,
                    (_, Mode::DataOnly) => &c.data_only,
                    (_, Mode::Reconstruct { .. }) => &c.reconstruct_write,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            self.release(plans);
            return result;
        }
        Err(RaidError::State("write kept failing on changing members"))
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
    fn written_roles(&self, view: &View, p: &Plan<'_>) -> Vec<usize> {
        let mut roles: Vec<usize> = p
            .writes
            .iter()
            .map(|w| self.geo.data_member(p.stripe, w.data_index).0)
            .collect();
        if p.parity.is_some() {
            roles.push(self.geo.parity_member(p.stripe).0);
        }
        roles.retain(|&r| {
            view.usable(r, p.stripe) && view.member(r).is_some_and(|m| m.volatile_write_cache())
        });
        roles
    }

    /// After a logged round's writes completed: keeps with each member's log span the flush
    /// tickets of the roles the round's entries there wrote, so the span is reused only once
    /// they are durable.
    fn keep_tickets(&self, view: &View, plans: &[Plan<'_>], grant: &mut Grant<'_>) {
        let roles: Vec<usize> = grant.members.iter().map(|g| g.role).collect();
        for pm in roles {
            let mut written: Vec<usize> = plans
                .iter()
                .filter(|p| p.log.is_some() && self.geo.parity_member(p.stripe).0 == pm)
                .flat_map(|p| self.written_roles(view, p))
                .collect();
            written.sort_unstable();
            written.dedup();
            let tickets = written
                .into_iter()
                .map(|role| Ticket {
                    role,
                    number: self.flush_gates[role].ticket(),
                })
                .collect();
            grant.finish(pm, tickets);
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

    /// Before log entries overwrite space of finished rounds: those rounds' writes must be
    /// durable (md's `ppl_do_flush`), or a power cut could lose them with no entry left to
    /// repair their stripes' parity; and a new entry's partial parity, computed from what the
    /// members returned, must not rest on data still in a cache (every earlier write to a
    /// stripe within an epoch was logged, so this covers them all). Free when flushes since
    /// covered them. `Ok(false)` when a member failed.
    fn settle_reused(&self, view: &View, due: Vec<Ticket>) -> Result<bool, RaidError> {
        let mut latest: Vec<Ticket> = Vec::new();
        for t in due {
            if self.flush_gates[t.role].covered(t.number) {
                continue;
            }
            match latest.iter_mut().find(|d| d.role == t.role) {
                Some(d) => d.number = d.number.max(t.number),
                None => latest.push(t),
            }
        }
        for t in latest {
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

    /// Writes and flushes the partial-parity-log entries of every logged plan, in log space
    /// taken for the whole round at once: per entry one write of header and partial parity
    /// (its slot in the header ring) when the payload fits inline, else one of the header and
    /// one of the partial parity (payload ring); and, if the missing chunk is written, one of
    /// its new rows straight from the caller's buffer. `Ok(None)` when a member failed.
    fn log_phase<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &mut [Plan<'_>],
        epoch: u64,
    ) -> Result<Option<Grant<'_>>, RaidError> {
        let (Some(rings), Some(layout)) = (self.ppl_rings.as_ref(), self.ppl) else {
            return Err(RaidError::State("log phase without a log"));
        };
        let bs = self.geo.block_bytes() as u64;
        let f_rows = |p: &Plan<'_>, f: Option<usize>| {
            f.and_then(|f| p.writes.iter().find(|w| w.data_index == f))
                .map(|w| (w.start, w.end))
        };
        // Per parity member, its entries in plan order: (stripe, payload bytes).
        let mut needs: Vec<(usize, Vec<(u64, u64)>)> = Vec::new();
        for p in plans.iter() {
            let Some((_, f)) = &p.log else { continue };
            let pm = self.geo.parity_member(p.stripe).0;
            let flen = f_rows(p, *f).map_or(0, |(s, e)| (e - s) * bs);
            let len = (p.hi - p.lo) * bs;
            let bytes = if PplLayout::fits_inline(len, flen) {
                0
            } else {
                align_up(len) + align_up(flen)
            };
            match needs.iter_mut().find(|(r, _)| *r == pm) {
                Some((_, v)) => v.push((p.stripe.0, bytes)),
                None => needs.push((pm, vec![(p.stripe.0, bytes)])),
            }
        }
        let (grant, due) = rings
            .reserve(&needs)
            .ok_or(RaidError::State("log entries larger than the log"))?;
        if !self.settle_reused(view, due)? {
            return Ok(None);
        }
        // Where each entry goes: (header offset, payload offset), in plan order.
        let mut places = Vec::new();
        let mut next: Vec<(usize, u64, u64)> = grant
            .members
            .iter()
            .map(|g| (g.role, g.seq, g.at))
            .collect();
        for p in plans.iter_mut() {
            let len = (p.hi - p.lo) * bs;
            let (stripe, lo, hi) = (p.stripe.0, p.lo, p.hi);
            let pm = self.geo.parity_member(p.stripe).0;
            let fr = p.log.as_ref().and_then(|(_, f)| f_rows(p, *f));
            let Some((buf, f)) = p.log.as_mut() else {
                continue;
            };
            let Some(slot) = next.iter_mut().find(|(r, _, _)| *r == pm) else {
                return Err(RaidError::State("log grant misses a member"));
            };
            let flen = fr.map_or(0, |(s, e)| (e - s) * bs);
            let seq = slot.1;
            slot.1 += 1;
            let at = if PplLayout::fits_inline(len, flen) {
                layout.header_offset(seq) + HEADER as u64
            } else {
                slot.2 += align_up(len) + align_up(flen);
                slot.2 - align_up(len) - align_up(flen)
            };
            let fw = f.and_then(|f| p.writes.iter().find(|w| w.data_index == f));
            let entry = Entry {
                epoch,
                seq,
                stripe,
                lo,
                hi,
                f: f.zip(fr).map(|(f, (s, e))| (f, s, e)),
                writes: p
                    .writes
                    .iter()
                    .map(|w| (w.data_index, w.start, w.end))
                    .collect(),
                pp_at: at,
                f_at: at + align_up(len),
                pp_crc: crc32c(&buf[HEADER..HEADER + len as usize]),
                f_crc: fw.map_or(0, |w| crc32c(w.data)),
            };
            entry
                .encode_into(&mut buf[..HEADER])
                .ok_or(RaidError::State("log entry with too many writes"))?;
            places.push((layout.header_offset(seq), at, at + align_up(len)));
        }
        let mut flush: Vec<usize> = Vec::new();
        for p in plans.iter().filter(|p| p.log.is_some()) {
            let pm = self.geo.parity_member(p.stripe).0;
            if view.member(pm).is_some_and(|m| m.volatile_write_cache()) && !flush.contains(&pm) {
                flush.push(pm);
            }
        }
        // Every entry one write from its own buffer (inline, no rows of the missing chunk):
        // hand them to the group commit, which submits them with other rounds' entries.
        let batchable = plans.iter().filter(|p| p.log.is_some()).zip(&places).all(
            |(p, &(head_at, pp_at, _))| {
                pp_at == head_at + HEADER as u64
                    && p.log.as_ref().is_some_and(|(_, f)| f_rows(p, *f).is_none())
            },
        );
        if batchable {
            if !self.log_batched(exec, view, plans, &places)? {
                return Ok(None);
            }
        } else if !self.log_direct(exec, view, plans, &places)? {
            return Ok(None);
        }
        // One cache flush per member that got entries (shared with concurrent requests
        // through the member's flush gate): the log is on media before any data or parity
        // write of the round starts. (Per-write RWF_DSYNC measured ~7x slower on a
        // virtio disk without FUA: every such write costs its own flush.)
        for role in flush {
            if let Some(m) = view.member(role) {
                if let Err(e) = self.flush_gates[role].flush(m) {
                    self.fail_member(MemberIdx(role), m, &e)?;
                    return Ok(None);
                }
            }
        }
        Ok(Some(grant))
    }

    /// The log writes of a round through the group commit ([`super::ppl_batch`]): each
    /// entry's buffer goes in and comes back. `Ok(false)` when a member failed.
    fn log_batched<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &mut [Plan<'_>],
        places: &[(u64, u64, u64)],
    ) -> Result<bool, RaidError> {
        let bs = self.geo.block_bytes();
        let mut writes = Vec::with_capacity(places.len());
        let mut owners = Vec::with_capacity(places.len());
        for (i, p) in plans.iter_mut().enumerate() {
            let pm = self.geo.parity_member(p.stripe);
            let Some(member) = view.members[pm.0].clone() else {
                continue;
            };
            let Some((buf, f)) = p.log.take() else {
                continue;
            };
            let Some(&(head_at, _, _)) = places.get(owners.len()) else {
                p.log = Some((buf, f));
                return Err(RaidError::State("log entry without a place"));
            };
            owners.push((i, f));
            writes.push(ppl_batch::LogWrite {
                role: pm,
                member,
                at: head_at,
                len: HEADER + (p.hi - p.lo) as usize * bs,
                buf,
            });
        }
        let roles: Vec<(MemberIdx, Arc<dyn Member>)> =
            writes.iter().map(|w| (w.role, w.member.clone())).collect();
        let done = self.ppl_batch.write(exec, writes);
        let mut failed = Vec::new();
        for (((i, f), w), (role, member)) in owners.into_iter().zip(done).zip(roles) {
            if let Some(p) = plans.get_mut(i) {
                p.log = Some((w.buf, f));
            }
            if let Err(e) = w.result {
                failed.push((role, member, e));
            }
        }
        let any = !failed.is_empty();
        for (role, member, e) in failed {
            self.fail_member(role, &*member, &e)?;
        }
        Ok(!any)
    }

    /// The log writes of a round, submitted by this caller. `Ok(false)` when a member failed.
    fn log_direct<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        plans: &[Plan<'_>],
        places: &[(u64, u64, u64)],
    ) -> Result<bool, RaidError> {
        let bs = self.geo.block_bytes() as u64;
        let mut ops = Vec::new();
        for (p, &(head_at, pp_at, f_at)) in plans.iter().filter(|p| p.log.is_some()).zip(places) {
            let Some((buf, f)) = &p.log else { continue };
            let pm = self.geo.parity_member(p.stripe);
            let Some(m) = view.member(pm.0) else { continue };
            let len = (p.hi - p.lo) as usize * bs as usize;
            if pp_at == head_at + HEADER as u64 {
                // Inline: header and partial parity in one write.
                ops.push(MemberOp::write(pm, m, head_at, &buf[..HEADER + len]));
            } else {
                ops.push(MemberOp::write(pm, m, head_at, &buf[..HEADER]));
                ops.push(MemberOp::write(pm, m, pp_at, &buf[HEADER..HEADER + len]));
            }
            if let Some(fw) = f.and_then(|f| p.writes.iter().find(|w| w.data_index == f)) {
                ops.push(MemberOp::write(pm, m, f_at, fw.data));
            }
        }
        exec.execute(&mut ops);
        Ok(!self.fail_from(&mut ops)?)
    }

    fn plan<'d>(
        &self,
        view: &View,
        stripe: StripeIdx,
        writes: &[ChunkWrite<'d>],
        force_rcw: bool,
        log: Option<Option<usize>>,
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
        let missing: Vec<usize> = (0..geo.members())
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
        // corrupt what the write did not touch — no entry needed. Unless a surviving header
        // may hold an earlier entry for this stripe: replaying that one after this write would
        // bring the missing chunk's rows back to before it; a newer entry replays after it.
        let parity_only = !missing.is_empty()
            && writes
                .iter()
                .all(|w| !view.usable(geo.data_member(stripe, w.data_index).0, stripe));
        let may_hold = || {
            self.ppl_rings
                .as_ref()
                .is_none_or(|r| r.may_hold(pm, stripe.0))
        };
        let log = log
            .filter(|_| mode != Mode::DataOnly && (!parity_only || may_hold()))
            .map(|f| (self.take_log_scratch(), f));
        Ok(Plan {
            stripe,
            writes: writes.to_vec(),
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
                // Row ranges to read, relative to `lo`.
                let ranges: [(u64, u64); 2] = match (p.mode, w) {
                    (Mode::Rmw, Some(w)) => [(w.start, w.end), (0, 0)],
                    (Mode::Rcw, Some(w)) => [(lo, w.start), (w.end, hi)],
                    _ => [(lo, hi), (0, 0)],
                };
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
        let mut cuts: Vec<u64> = vec![lo, hi];
        for w in &p.writes {
            cuts.push(w.start);
            cuts.push(w.end);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let rmw = p.mode == Mode::Rmw;
        let mut srcs: Vec<&[u8]> = Vec::with_capacity(2 * self.geo.data_members());
        if let Some((pp, _)) = p.log.as_mut() {
            // Partial parity per interval: XOR of the chunks the write does not modify.
            // RMW: old parity ^ old modified chunks; otherwise the old unmodified chunks.
            let mut srcs: Vec<&[u8]> = Vec::with_capacity(self.geo.data_members() + 1);
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
    fn compute_all(&self, plans: &mut [Plan<'_>]) -> Result<(), RaidError> {
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
