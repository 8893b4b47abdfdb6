//! Completion-driven writes: a write as a state machine with no I/O of its own (sans-IO, as
//! quinn-proto is for QUIC), for a caller that must never wait (a poller with its own
//! io_uring).
//!
//! [`Array::start_write`] plans the write and hands back the first batch of member
//! operations as a [`RingRequest`] (the caller's buffer and the engine's scratch travel with
//! it); the caller submits it to its ring and feeds the [`RingCompletion`] to
//! [`WriteTask::complete`], which answers with the next batch, or with the end. A write goes:
//! - **reads** (read-modify-write: old data and old parity of the written rows;
//!   reconstruct-write: the unwritten rows), skipped for a whole stripe; with them, when the
//!   write's write-intent bitmap bits were clear, the changed bitmap blocks to every present
//!   member, then a **flush** of every member: no write starts before its bits are durable
//!   (writes to a region whose bit another task is persisting are `Busy` meanwhile);
//! - when the write is **logged** (a role is missing or being rebuilt, or policy `always`;
//!   see [`super::ppl`]): parity and partial parity are computed when the reads are in,
//!   then the **flushes** a log slot's reuse needs (members whose writes of the slot's
//!   previous round no flush covered yet, as the blocking engine's `settle_slots`), the
//!   **log entries** to the parity members, and a **flush** of those members; these
//!   flushes count in the members' flush gates, shared with the blocking engine;
//! - **writes**: parity is computed when the reads are in, then the new data (straight from
//!   the caller's buffer) and the parity go out in one batch, to the roles that hold the
//!   stripe (a missing chunk's new rows live on through parity), and to a hot-replace
//!   member too where it holds the stripe;
//! - **flushes**, only when the partial-parity-log epoch changed while the write was in
//!   flight (the synchronous engine's `settle_epoch`): the roles written, before the stripes
//!   are unlocked.
//!
//! Planning, parity and counters are the synchronous engine's ([`super::write`]); this path
//! only orders the same steps around completions. It takes only what it can take without
//! waiting, and declines what it cannot serve ([`WriteStart::Declined`]: use
//! [`Array::write`] on a thread that may block):
//! - the stripes, then the log slots they use, are taken with
//!   [`super::locks::StripeLocks::try_lock`]; a held one gives [`WriteStart::Busy`]
//!   (nothing taken; try again when something completed);
//! - the bitmap mutex must be free (a blocking thread may hold it while it writes bitmap
//!   blocks: `Busy`), and no needed bit may have failed to persist earlier (the blocking path
//!   writes it again);
//! - the array must not have failed (two holes in a stripe are declined), have no
//!   log-cover record due, and no torn write waiting for its redo;
//! - the array must be marked dirty already: if not, `Busy`, and
//!   [`Array::mark_dirty_if_wanted`] (the owner's background thread) writes the superblocks;
//! - at most [`TASK_STRIPES`] stripes (any host write), [`super::write::ROUND_STRIPES`] when
//!   logged.
//!
//! Failures: the path never marks a member failed (that writes superblocks). A failed read
//! (or bitmap write or flush: its bits then count as not durable until the blocking path
//! wrote them again; or log write or flush: its slots' content counts as unknown) ends the
//! task with nothing of the data written: redo it with [`Array::write`], which marks the
//! member failed and replans. A failed write leaves the stripes torn (new data beside old parity, or
//! the reverse): the task counts the array torn before it unlocks them, and every write
//! reconstructs parity from the data (never from old parity) until the redo, which rewrites
//! the whole request and then calls [`Array::end_torn`].

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::geometry::{ArrayBlock, StripeIdx};
use crate::member::Member;
use crate::superblock::SlotState;
use crate::sys::buf::IoBuf;
use crate::sys::ring::{
    RingBuf, RingCompletion, RingOpKind, RingRequest, RingScratch, RingSeg, RingSegs,
};

use super::bitmap::TryBegin;
use super::ppl::{PplLayout, HEADER};
use super::write::{old_rows, Mode, PerStripe, Plan, ROUND_STRIPES};
use super::{Array, EngineBuf, Scratch, View, INLINE_MEMBERS};

/// The most stripes one task writes: any host write (the target's transfer limit is at most
/// 16 MiB) on the smallest stripes (3 members, 4 KiB chunks: 8 KiB of data), so that no
/// write is left to a blocking thread for its size. The stripes are locked together, and
/// whole stripes need only a parity chunk of scratch each. A logged write stays within
/// [`ROUND_STRIPES`] (its log slots are taken together).
pub const TASK_STRIPES: usize = 4096;

/// What [`Array::start_write`] did.
// By value on purpose: one per write, no allocation; it moves once, into the ring.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum WriteStart {
    /// Submit the request; feed its completion to [`WriteTask::complete`].
    Started(WriteTask, RingRequest),
    /// A stripe it needs is held by another write or by maintenance, a bitmap bit it needs
    /// is being written, or the array must be marked dirty first (a superblock write: the
    /// owner's background thread does it, [`Array::mark_dirty_if_wanted`]): nothing was
    /// taken; try again later. The buffers, back (the first, then the gathered ones).
    Busy(IoBuf, Vec<IoBuf>),
    /// Not for this path now: write it with [`Array::write`] on a thread that may block
    /// (each gathered request on its own).
    Declined(IoBuf, Vec<IoBuf>),
}

/// What a [`WriteTask`] wants after a completion.
#[derive(Debug)]
// The request is held inline (its operations and scratch too, for small writes): moved once
// per phase rather than boxed, which would be an allocation per command.
#[allow(clippy::large_enum_variant)]
pub enum WriteNext {
    /// Submit this request next (same tag).
    Submit(RingRequest),
    /// Every member write completed (durable after a flush, as with [`Array::write`]); the
    /// request's buffer, and the gathered ones, back.
    Done(Option<IoBuf>, Vec<IoBuf>),
    /// A member operation failed: write each request again with [`Array::write`] (it marks
    /// the member failed). With `torn`, call [`Array::end_torn`] once each of those redos
    /// has returned (the array counts one torn write per request of the task).
    Redo {
        /// The request's buffer, back.
        buf: Option<IoBuf>,
        /// The gathered requests' buffers, back, in order.
        more: Vec<IoBuf>,
        /// Writes may have landed in part.
        torn: bool,
    },
}

/// A task's scratch between its requests, by index (inline up to four: old data and parity of
/// a small write).
type TaskScratch = SmallVec<[Option<Scratch>; 4]>;

/// The caller's buffers of one task: the first request's, then those gathered with it.
type Bufs = (IoBuf, Vec<IoBuf>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The reads, and the write-intent bitmap blocks when bits had to be set.
    Reads,
    /// Flushing every member after its bitmap blocks were written.
    BitmapFlush,
    /// Flushing the members whose writes the log slots about to be overwritten still cover.
    LogSettle,
    /// Writing the partial-parity-log entries.
    Log,
    /// Flushing the members the entries went to.
    LogFlush,
    Writes,
    Flushes,
}

/// New data of one chunk: rows `[start, end)` of data index `data_index`, from byte `at` of
/// the caller's buffer `src`.
#[derive(Debug)]
struct TaskWrite {
    data_index: usize,
    start: u64,
    end: u64,
    src: RingBuf,
    at: usize,
}

/// A stripe's plan while its buffers travel with the requests: scratch by index.
#[derive(Debug)]
struct TaskPlan {
    stripe: StripeIdx,
    writes: SmallVec<[TaskWrite; 2]>,
    lo: u64,
    hi: u64,
    mode: Mode,
    full: bool,
    old: SmallVec<[Option<u16>; INLINE_MEMBERS]>,
    parity: Option<u16>,
    /// The log entry's buffer (scratch index), and the missing role's data index.
    log: Option<(u16, Option<usize>)>,
    /// Its entry's header is filled: it is written.
    logged: bool,
}

/// One write on the completion-driven path (see the module documentation). It holds its
/// stripes, bitmap regions and log-epoch registration until it ends: drive it to
/// [`WriteNext::Done`] or [`WriteNext::Redo`], or [`WriteTask::abort`] it.
#[derive(Debug)]
pub struct WriteTask {
    tag: u64,
    /// Inline up to 4 stripes (a small write has one or two).
    stripes: SmallVec<[u64; 4]>,
    first: u64,
    last: u64,
    epoch: u64,
    view: Arc<View>,
    plans: SmallVec<[TaskPlan; 2]>,
    phase: Phase,
    /// Bits this task set are being made durable (the write waits for them).
    bitmap_pending: bool,
    /// Requests gathered in it (each is redone on its own after a failure).
    requests: usize,
    /// The partial-parity log, when its stripes are logged (degraded, or policy `always`).
    layout: Option<PplLayout>,
    /// The log-slot locks it holds (sorted keys).
    slot_keys: Vec<u64>,
    /// Flushes in flight that count in the flush gates: (role, the ticket they cover).
    gate_flushes: Vec<(usize, u64)>,
    ended: bool,
}

impl Array {
    /// Starts writing `len` bytes of `buf` (whole blocks) at block `start` on the
    /// completion-driven path (see [`WriteTask`]). `more` gathers further requests into the
    /// same task: each `(buffer, bytes)` continues where the previous one ended, so that
    /// writes in flight that together cover a stripe write it whole, with no reads. A chunk
    /// must not straddle two buffers (declined). With `need_fds`, declines unless every
    /// member involved offers a descriptor for direct I/O (what an [`crate::OwnedRing`]
    /// needs).
    pub fn start_write(
        &self,
        tag: u64,
        start: ArrayBlock,
        len: usize,
        buf: IoBuf,
        more: Vec<(IoBuf, usize)>,
        need_fds: bool,
    ) -> WriteStart {
        let (more, lens): (Vec<IoBuf>, Vec<usize>) = more.into_iter().unzip();
        if !self.dirty_flag.load(Ordering::Acquire) {
            if self.dirty_refused.load(Ordering::Acquire) {
                return WriteStart::Declined(buf, more);
            }
            self.dirty_wanted.store(true, Ordering::Release);
            return WriteStart::Busy(buf, more);
        }
        let Some(stripes) = self.task_stripes(start, (&buf, len), &more, &lens) else {
            return WriteStart::Declined(buf, more);
        };
        let ids: SmallVec<[u64; 4]> = stripes.iter().map(|(s, _)| s.0).collect();
        if !self.locks.try_lock(&ids) {
            // `stripes` borrows `buf` and `more` until dropped (a SmallVec's drop is not known
            // to leave its borrows alone), so each early return drops it first.
            drop(stripes);
            return WriteStart::Busy(buf, more);
        }
        let (first, last) = (ids[0], ids[ids.len() - 1]);
        let entered = {
            let st = self.read_state();
            self.shared_view(&st).ok().map(|view| {
                let force_rcw = st.resync.is_some();
                // As the blocking engine's round: logged while a role is not active, or
                // always with that policy.
                let missing =
                    (0..self.geo.members()).find(|&r| view.states[r] != SlotState::Active);
                let log_on = !st.ppl_off && (missing.is_some() || st.ppl_always);
                let layout = self.ppl.filter(|_| log_on);
                // Under the state lock, as `enter_writes`: an epoch change sees it.
                let epoch = self.inflight.enter(st.ppl_epoch).keep();
                (view, force_rcw, missing, layout, epoch)
            })
        };
        let Some((view, force_rcw, missing, layout, epoch)) = entered else {
            self.locks.unlock(&ids);
            drop(stripes);
            return WriteStart::Declined(buf, more);
        };
        // A logged write takes the log slots of its stripes at once, as the blocking engine
        // does per round: no more stripes than a round, so no two share a slot.
        if layout.is_some() && ids.len() > ROUND_STRIPES {
            self.inflight.leave(epoch);
            self.locks.unlock(&ids);
            drop(stripes);
            return WriteStart::Declined(buf, more);
        }
        // Slot locks after stripe locks, as the blocking engine takes them.
        let mut slot_keys: Vec<u64> = layout
            .iter()
            .flat_map(|l| ids.iter().map(|&s| l.lock_key(&self.geo, StripeIdx(s)).0))
            .collect();
        slot_keys.sort_unstable();
        slot_keys.dedup();
        if !self.ppl_locks.try_lock(&slot_keys) {
            self.inflight.leave(epoch);
            self.locks.unlock(&ids);
            drop(stripes);
            return WriteStart::Busy(buf, more);
        }
        let fds_ok = || {
            let present = view.members.iter().flatten();
            let mirror = view.replacement.iter().map(|(_, m, _)| m);
            present.chain(mirror).all(|m| m.direct_fd().is_some())
        };
        let bitmap = if need_fds && !fds_ok() {
            TryBegin::Declined
        } else {
            self.bitmap.try_begin(first, last)
        };
        let images = match bitmap {
            TryBegin::Ready => Vec::new(),
            TryBegin::Persist(images) => images,
            TryBegin::Busy | TryBegin::Declined => {
                self.inflight.leave(epoch);
                self.ppl_locks.unlock(&slot_keys);
                self.locks.unlock(&ids);
                drop(stripes);
                return match bitmap {
                    TryBegin::Busy => WriteStart::Busy(buf, more),
                    _ => WriteStart::Declined(buf, more),
                };
            }
        };
        let mut task = WriteTask {
            tag,
            stripes: ids,
            first,
            last,
            epoch,
            view,
            plans: SmallVec::with_capacity(stripes.len()),
            phase: Phase::Reads,
            bitmap_pending: !images.is_empty(),
            requests: 1 + more.len(),
            layout,
            slot_keys,
            gate_flushes: Vec::new(),
            ended: false,
        };
        let mut scratch = TaskScratch::new();
        let bases: SmallVec<[(usize, usize); 4]> = std::iter::once(&buf)
            .chain(&more)
            .map(|b| (b.as_ptr() as usize, b.len()))
            .collect();
        let mut planned = true;
        for (stripe, writes) in &stripes {
            let log = layout.map(|l| self.log_want(&l, missing, *stripe));
            match self.plan(&task.view, *stripe, writes, force_rcw, log) {
                Ok(plan) => task.plans.push(TaskPlan::keep(plan, &bases, &mut scratch)),
                Err(_) => {
                    planned = false;
                    break;
                }
            }
        }
        // The plans hold the buffers by index now: the borrows of `buf` and `more` end here.
        drop(stripes);
        if !planned {
            self.end_task(&mut task, scratch);
            return WriteStart::Declined(buf, more);
        }
        let mut reads = self.read_segs(&task);
        // The bitmap blocks go out with the reads (a read needs no bit); the writes wait
        // until they are flushed on every member.
        for (offset, image) in images {
            let mut b = self.take_scratch();
            b[..image.len()].copy_from_slice(&image);
            scratch.push(Some(b));
            let i = (scratch.len() - 1) as u16;
            for m in task.view.members.iter().flatten() {
                reads.push(seg(m, RingOpKind::Write, offset, i, 0..image.len()));
            }
        }
        if !reads.is_empty() {
            let req = task.request(reads, (buf, more), scratch);
            return WriteStart::Started(task, req);
        }
        // Nothing to read (whole stripes): the log, or the writes, at once.
        match self.after_reads(&mut task, (buf, more), scratch) {
            Ok(req) => WriteStart::Started(task, req),
            Err((buf, more)) => WriteStart::Declined(buf, more),
        }
    }

    /// The request cut per stripe, when this path may take it: `first` (a buffer and its
    /// bytes), then each of `more` with its bytes in `lens`, one after the other.
    #[allow(clippy::type_complexity)]
    fn task_stripes<'d>(
        &self,
        start: ArrayBlock,
        first: (&'d IoBuf, usize),
        more: &'d [IoBuf],
        lens: &[usize],
    ) -> Option<PerStripe<'d>> {
        let bs = self.geo.block_bytes();
        // Each buffer's bytes, with where it starts in the request.
        let mut pieces: SmallVec<[(usize, &'d [u8]); 4]> = SmallVec::new();
        let mut len = 0;
        for (b, n) in std::iter::once(first).chain(more.iter().zip(lens.iter().copied())) {
            if n == 0 || !n.is_multiple_of(bs) {
                return None;
            }
            pieces.push((len, b.get(..n)?));
            len += n;
        }
        for (_, b) in &pieces {
            self.check_alignment(b.as_ptr() as usize).ok()?;
        }
        if self.torn.load(Ordering::SeqCst) > 0 || self.cover_due.load(Ordering::SeqCst) {
            return None;
        }
        let segs = self.geo.segments(start, (len / bs) as u64).ok()?;
        // A range inside one buffer (a chunk straddling two is not for this path).
        let slice = |r: Range<usize>| {
            let k = pieces
                .partition_point(|(at, _)| *at <= r.start)
                .checked_sub(1)?;
            let (at, b) = pieces[k];
            b.get(r.start - at..r.end - at)
        };
        let stripes = self.per_stripe(segs, slice)?;
        (stripes.len() <= TASK_STRIPES).then_some(stripes)
    }

    /// The reads of every plan (into scratch), as the synchronous engine's read phase: old
    /// parity for read-modify-write and reconstruct-write, the old rows each mode needs
    /// (never the missing chunk's: it is rebuilt from the others).
    fn read_segs(&self, task: &WriteTask) -> RingSegs {
        let bs = self.geo.block_bytes();
        let mut segs = RingSegs::new();
        for p in &task.plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            let (lo, hi) = (p.lo, p.hi);
            let failed = match p.mode {
                Mode::Reconstruct { failed } => Some(failed),
                _ => None,
            };
            if matches!(p.mode, Mode::Rmw | Mode::Reconstruct { .. }) {
                let pm = self.geo.parity_member(p.stripe).0;
                if let (Some(i), Some(m)) = (p.parity, &task.view.members[pm]) {
                    segs.push(seg(
                        m,
                        RingOpKind::Read,
                        self.member_offset(base + lo),
                        i,
                        0..(hi - lo) as usize * bs,
                    ));
                }
            }
            for (d, old) in p.old.iter().enumerate() {
                let Some(i) = *old else { continue };
                if Some(d) == failed {
                    continue;
                }
                let role = self.geo.data_member(p.stripe, d).0;
                let Some(m) = &task.view.members[role] else {
                    continue;
                };
                let w = p.writes.iter().find(|w| w.data_index == d);
                for (a, b) in old_rows(p.mode, w.map(|w| (w.start, w.end)), lo, hi) {
                    if b > a {
                        let rel = (a - lo) as usize * bs..(b - lo) as usize * bs;
                        segs.push(seg(
                            m,
                            RingOpKind::Read,
                            self.member_offset(base + a),
                            i,
                            rel,
                        ));
                    }
                }
            }
        }
        segs
    }

    /// Once the reads are in (and the bitmap is durable): computes parity and partial parity
    /// (the synchronous engine's code, over the plans rebuilt around the buffers) and fills
    /// the log entries' headers, then returns the next request: the flushes a log slot's
    /// reuse needs, the log, or the writes. `Err` (the task ended) if the engine failed:
    /// nothing written.
    fn after_reads(
        &self,
        task: &mut WriteTask,
        (buf, more): Bufs,
        mut scratch: TaskScratch,
    ) -> Result<RingRequest, Bufs> {
        let computed = {
            let bufs: SmallVec<[&[u8]; 4]> =
                std::iter::once(&buf).chain(&more).map(|b| &b[..]).collect();
            let mut plans: SmallVec<[Plan<'_>; 2]> = task
                .plans
                .iter()
                .map(|p| p.lend(&bufs, &mut scratch, self.geo.block_bytes()))
                .collect();
            let r = self.compute_all(&mut plans);
            if r.is_ok() && task.layout.is_some() {
                let logged = self.log_heads(&mut plans, task.epoch);
                for tp in task.plans.iter_mut() {
                    tp.logged = logged.contains(&tp.stripe);
                }
            }
            for (tp, p) in task.plans.iter().zip(plans) {
                tp.take_back(p, &mut scratch);
            }
            r
        };
        if computed.is_err() {
            self.end_task(task, scratch);
            return Err((buf, more));
        }
        let Some(layout) = task.layout else {
            return Ok(self.write_request(task, (buf, more), scratch));
        };
        let logged = task.plans.iter().filter(|p| p.logged).map(|p| p.stripe);
        let due: Vec<usize> = self
            .due_tickets(&layout, logged)
            .iter()
            .map(|t| t.role)
            .collect();
        if due.is_empty() {
            return Ok(self.log_request(task, (buf, more), scratch));
        }
        Ok(task.gate_flushes(self, Phase::LogSettle, due, (buf, more), scratch))
    }

    /// The log entries of the plans that have one: per stripe, header and partial parity
    /// (one buffer) to its slot on the parity member and, when the missing chunk is
    /// written, its new rows straight from the caller's buffer. The writes when none.
    fn log_request(
        &self,
        task: &mut WriteTask,
        (buf, more): Bufs,
        scratch: TaskScratch,
    ) -> RingRequest {
        let bs = self.geo.block_bytes();
        let cb = self.geo.chunk_bytes() as u64;
        let mut segs = RingSegs::new();
        if let Some(layout) = task.layout {
            for p in task.plans.iter().filter(|p| p.logged) {
                let (Some((i, f)), Some(m)) = (p.log, p.parity_member(self, &task.view)) else {
                    continue;
                };
                let off = layout.slot_offset(&self.geo, p.stripe);
                let len = (p.hi - p.lo) as usize * bs;
                segs.push(seg(m, RingOpKind::Write, off, i, 0..HEADER + len));
                if let Some(w) = f.and_then(|f| p.writes.iter().find(|w| w.data_index == f)) {
                    segs.push(RingSeg {
                        member: m.clone(),
                        kind: RingOpKind::Write,
                        offset: off + HEADER as u64 + cb,
                        buf: w.src,
                        range: w.at..w.at + (w.end - w.start) as usize * bs,
                    });
                }
            }
        }
        if segs.is_empty() {
            return self.write_request(task, (buf, more), scratch);
        }
        task.phase = Phase::Log;
        task.request(segs, (buf, more), scratch)
    }

    /// The write batch (parity computed): new data from the caller's buffers, parity from
    /// scratch, and the hot-replace copies, to the roles that hold the stripe.
    fn write_request(
        &self,
        task: &mut WriteTask,
        (buf, more): Bufs,
        scratch: TaskScratch,
    ) -> RingRequest {
        let bs = self.geo.block_bytes();
        let mut segs = RingSegs::new();
        let view = &task.view;
        for p in &task.plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            for w in &p.writes {
                let role = self.geo.data_member(p.stripe, w.data_index).0;
                if !view.usable(role, p.stripe) {
                    continue;
                }
                let Some(m) = &view.members[role] else {
                    continue;
                };
                let off = self.member_offset(base + w.start);
                let range = w.at..w.at + (w.end - w.start) as usize * bs;
                for m in std::iter::once(m).chain(mirror(view, role, p.stripe)) {
                    segs.push(RingSeg {
                        member: m.clone(),
                        kind: RingOpKind::Write,
                        offset: off,
                        buf: w.src,
                        range: range.clone(),
                    });
                }
            }
            let pm = self.geo.parity_member(p.stripe).0;
            if let (Some(i), Some(m)) = (p.parity, p.parity_member(self, view)) {
                let off = self.member_offset(base + p.lo);
                let range = 0..(p.hi - p.lo) as usize * bs;
                for m in std::iter::once(m).chain(mirror(view, pm, p.stripe)) {
                    segs.push(seg(m, RingOpKind::Write, off, i, range.clone()));
                }
            }
        }
        task.phase = Phase::Writes;
        task.request(segs, (buf, more), scratch)
    }

    /// Releases what a task holds: stripes, log slots, bitmap regions, its epoch
    /// registration, scratch (log buffers to their own pool).
    fn end_task(&self, task: &mut WriteTask, scratch: TaskScratch) {
        if std::mem::replace(&mut task.ended, true) {
            return;
        }
        // The plans say which slots hold log buffers (`TaskPlan::keep`).
        let mut scratch = scratch;
        let logs: Vec<_> = task
            .plans
            .iter()
            .filter_map(|p| p.log)
            .filter_map(|(i, _)| match scratch.get_mut(usize::from(i))?.take()? {
                Scratch::Heap(h) => Some(h),
                other => {
                    scratch.push(Some(other));
                    None
                }
            })
            .collect();
        self.give_log_scratch(logs);
        self.give_scratch(scratch.into_iter().flatten());
        self.ppl_locks.unlock(&task.slot_keys);
        if std::mem::take(&mut task.bitmap_pending) {
            // Its bits may not be on every member: the next blocking write writes them.
            self.bitmap.persist_failed(task.first, task.last);
        } else {
            self.bitmap.end(task.first, task.last);
        }
        self.inflight.leave(task.epoch);
        self.locks.unlock(&task.stripes);
    }

    /// A torn completion-driven write was redone (successfully or not): writes may use old
    /// parity again once no other torn write waits (see [`WriteNext::Redo`]).
    pub fn end_torn(&self) {
        let _ = self
            .torn
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Completion-driven writes that failed part-way and wait for their redo.
    pub fn torn_writes(&self) -> usize {
        self.torn.load(Ordering::SeqCst)
    }
}

impl WriteTask {
    /// The caller's tag (every request of the task carries it).
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Feeds the completion of the request the task handed out last.
    pub fn complete(&mut self, array: &Array, c: RingCompletion) -> WriteNext {
        let scratch: TaskScratch = c.scratch.into_iter().map(|b| Some(b.0)).collect();
        let Some(buf) = c.buf else {
            // Not a request of this task (its requests always carry the buffer).
            array.end_task(self, scratch);
            return WriteNext::Redo {
                buf: None,
                more: c.more,
                torn: false,
            };
        };
        let buf = (buf, c.more);
        let done = |(buf, more): Bufs| WriteNext::Done(Some(buf), more);
        let redo = |(buf, more): Bufs, torn: bool| WriteNext::Redo {
            buf: Some(buf),
            more,
            torn,
        };
        match (self.phase, c.result) {
            (Phase::Reads, Err(_)) => {
                array.end_task(self, scratch);
                redo(buf, false)
            }
            (Phase::Reads, Ok(())) if self.bitmap_pending => {
                self.phase = Phase::BitmapFlush;
                let members = self.view.members.iter().flatten().cloned().collect();
                WriteNext::Submit(self.flushes(members, buf, scratch))
            }
            (Phase::BitmapFlush | Phase::LogSettle, Err(_)) => {
                // A gate flush that failed covers nothing.
                self.gate_flushes.clear();
                array.end_task(self, scratch);
                redo(buf, false)
            }
            (Phase::Log | Phase::LogFlush, Err(_)) => {
                // Some entries may be on media, some not: what the slots hold is unknown
                // again. Nothing of the data was written.
                self.gate_flushes.clear();
                if let Some(layout) = self.layout {
                    let logged = self.plans.iter().filter(|p| p.log.is_some());
                    array.forget_slots(&layout, logged.map(|p| p.stripe));
                }
                array.end_task(self, scratch);
                redo(buf, false)
            }
            (Phase::LogSettle, Ok(())) => {
                self.gate_flushes_done(array);
                WriteNext::Submit(array.log_request(self, buf, scratch))
            }
            (Phase::Log, Ok(())) => {
                // The entries are on media before any data or parity write starts: one flush
                // per member that got entries (it counts in the member's flush gate).
                let mut roles: Vec<usize> = self
                    .plans
                    .iter()
                    .filter(|p| p.logged)
                    .map(|p| array.geometry().parity_member(p.stripe).0)
                    .filter(|&r| {
                        self.view
                            .member(r)
                            .is_some_and(|m| m.volatile_write_cache())
                    })
                    .collect();
                roles.sort_unstable();
                roles.dedup();
                if roles.is_empty() {
                    return WriteNext::Submit(array.write_request(self, buf, scratch));
                }
                WriteNext::Submit(self.gate_flushes(array, Phase::LogFlush, roles, buf, scratch))
            }
            (Phase::LogFlush, Ok(())) => {
                self.gate_flushes_done(array);
                WriteNext::Submit(array.write_request(self, buf, scratch))
            }
            (Phase::Reads | Phase::BitmapFlush, Ok(())) => {
                if std::mem::take(&mut self.bitmap_pending) {
                    array.bitmap.persisted(self.first, self.last);
                }
                // A member failed or came back since the plan: plan again (nothing written).
                if array.read_state().ppl_epoch != self.epoch {
                    array.end_task(self, scratch);
                    return redo(buf, false);
                }
                match array.after_reads(self, buf, scratch) {
                    Ok(req) => WriteNext::Submit(req),
                    Err(buf) => redo(buf, false),
                }
            }
            (Phase::Writes, Err(_)) => {
                // The slots hold this task's entries, whatever landed of its writes (as the
                // blocking engine records them).
                self.remember_slots(array);
                // Counted before the stripes unlock: a write that locks them next sees it.
                // One per request: each redo ends one.
                array.torn.fetch_add(self.requests, Ordering::SeqCst);
                array.end_task(self, scratch);
                redo(buf, true)
            }
            (Phase::Writes, Ok(())) => {
                self.remember_slots(array);
                for p in &self.plans {
                    array.count_stripe(p.full, p.mode);
                }
                array
                    .counters
                    .writes
                    .fetch_add(self.requests as u64, Ordering::Relaxed);
                let roles = if array.read_state().ppl_epoch != self.epoch {
                    self.written_roles(array)
                } else {
                    Vec::new()
                };
                if roles.is_empty() {
                    array.end_task(self, scratch);
                    return done(buf);
                }
                self.phase = Phase::Flushes;
                let members = roles
                    .into_iter()
                    .filter_map(|r| self.view.members[r].clone())
                    .collect();
                WriteNext::Submit(self.flushes(members, buf, scratch))
            }
            (Phase::Flushes, r) => {
                array.end_task(self, scratch);
                match r {
                    Ok(()) => done(buf),
                    // Written whole (the stripes are consistent); the redo's engine notices
                    // a member that keeps failing.
                    Err(_) => redo(buf, false),
                }
            }
        }
    }

    /// The next request, in `phase`: a flush of each of `roles` that counts in its flush
    /// gate (it covers every write that completed before it).
    fn gate_flushes(
        &mut self,
        array: &Array,
        phase: Phase,
        roles: Vec<usize>,
        bufs: Bufs,
        scratch: TaskScratch,
    ) -> RingRequest {
        let mut members = Vec::with_capacity(roles.len());
        for role in roles {
            if let Some(m) = &self.view.members[role] {
                let upto = array.flush_gates[role].ring_flush_start();
                self.gate_flushes.push((role, upto));
                members.push(m.clone());
            }
        }
        self.phase = phase;
        self.flushes(members, bufs, scratch)
    }

    /// The gate flushes in flight completed.
    fn gate_flushes_done(&mut self, array: &Array) {
        for (role, upto) in self.gate_flushes.drain(..) {
            array.flush_gates[role].ring_flush_done(upto);
        }
    }

    /// After its writes (or some of them) completed: records in each logged stripe's slot
    /// the roles this task wrote there, with flush tickets, so the slot is reused only once
    /// they are durable.
    fn remember_slots(&self, array: &Array) {
        let Some(layout) = self.layout else { return };
        for p in self.plans.iter().filter(|p| p.log.is_some()) {
            let roles = array.roles_written(
                &self.view,
                p.stripe,
                p.writes.iter().map(|w| w.data_index),
                p.parity.is_some(),
            );
            array.remember_slot(&layout, p.stripe, roles);
        }
    }

    /// A request of a flush of each of `members`, the buffers travelling with it.
    fn flushes(
        &self,
        members: Vec<Arc<dyn Member>>,
        bufs: Bufs,
        scratch: TaskScratch,
    ) -> RingRequest {
        let segs = members
            .into_iter()
            .map(|member| RingSeg {
                member,
                kind: RingOpKind::Flush,
                offset: 0,
                buf: RingBuf::Main,
                range: 0..0,
            })
            .collect();
        self.request(segs, bufs, scratch)
    }

    /// The task's next request: `segs` over the caller's buffers and the task's scratch.
    fn request(&self, segs: RingSegs, (buf, more): Bufs, scratch: TaskScratch) -> RingRequest {
        RingRequest {
            tag: self.tag,
            buf: Some(buf),
            more,
            scratch: lend(scratch),
            segs,
        }
    }

    /// Ends the task when its caller cannot submit `req`, the request it handed out last
    /// (its ring refused it): returns the caller's buffers (the first, then the gathered
    /// ones), to write with [`Array::write`]. Nothing of that request was written.
    pub fn abort(mut self, array: &Array, req: RingRequest) -> (Option<IoBuf>, Vec<IoBuf>) {
        let scratch = req.scratch.into_iter().map(|b| Some(b.0)).collect();
        array.end_task(&mut self, scratch);
        (req.buf, req.more)
    }

    /// Roles with a volatile cache this task wrote (flushed when the epoch changed under it).
    fn written_roles(&self, array: &Array) -> Vec<usize> {
        let mut roles: Vec<usize> = Vec::new();
        for p in &self.plans {
            let data = p.writes.iter().map(|w| w.data_index);
            roles.extend(array.roles_written(&self.view, p.stripe, data, p.parity.is_some()));
        }
        roles.sort_unstable();
        roles.dedup();
        roles
    }
}

impl Drop for WriteTask {
    fn drop(&mut self) {
        debug_assert!(
            self.ended || std::thread::panicking(),
            "a write task was dropped holding its stripes"
        );
    }
}

impl TaskPlan {
    /// Keeps a plan's layout, its scratch moved to `scratch` (by index); data by buffer and
    /// offset, from the caller's buffers' `(address, length)` (the first, then the gathered
    /// ones).
    fn keep(p: Plan<'_>, bases: &[(usize, usize)], scratch: &mut TaskScratch) -> TaskPlan {
        let mut put = |b: Option<Scratch>| {
            b.map(|b| {
                scratch.push(Some(b));
                (scratch.len() - 1) as u16
            })
        };
        let old = p.old.into_iter().map(&mut put).collect();
        let parity = put(p.parity);
        let log = p
            .log
            .map(|(b, f)| (put(Some(Scratch::Heap(b))).unwrap_or_default(), f));
        TaskPlan {
            stripe: p.stripe,
            writes: p
                .writes
                .iter()
                .map(|w| {
                    let ptr = w.data.as_ptr() as usize;
                    // The data was cut from these buffers (`task_stripes`).
                    let k = bases
                        .iter()
                        .position(|&(b, n)| ptr >= b && ptr < b + n)
                        .unwrap_or(0);
                    TaskWrite {
                        data_index: w.data_index,
                        start: w.start,
                        end: w.end,
                        src: match k {
                            0 => RingBuf::Main,
                            k => RingBuf::More((k - 1) as u16),
                        },
                        at: ptr - bases[k].0,
                    }
                })
                .collect(),
            lo: p.lo,
            hi: p.hi,
            mode: p.mode,
            full: p.full,
            old,
            parity,
            log,
            logged: false,
        }
    }

    /// The parity member, when it holds the stripe (a write's parity goes there).
    fn parity_member<'v>(&self, array: &Array, view: &'v View) -> Option<&'v Arc<dyn Member>> {
        let pm = array.geometry().parity_member(self.stripe).0;
        view.members[pm]
            .as_ref()
            .filter(|_| view.usable(pm, self.stripe))
    }

    /// The engine's plan again, over the caller's buffers `bufs` (the first, then the
    /// gathered ones) and the scratch (moved out of `scratch`).
    fn lend<'d>(&self, bufs: &[&'d [u8]], scratch: &mut [Option<Scratch>], bs: usize) -> Plan<'d> {
        let log = self.log.and_then(|(i, f)| {
            let slot = &mut scratch[usize::from(i)];
            match slot.take() {
                Some(Scratch::Heap(b)) => Some((b, f)),
                // Not reached: a log buffer is always a heap one (`keep`).
                other => {
                    *slot = other;
                    None
                }
            }
        });
        let mut take = |i: Option<u16>| i.and_then(|i| scratch[usize::from(i)].take());
        Plan {
            stripe: self.stripe,
            writes: self
                .writes
                .iter()
                .map(|w| super::write::ChunkWrite {
                    data_index: w.data_index,
                    start: w.start,
                    end: w.end,
                    data: {
                        let k = match w.src {
                            RingBuf::More(k) => usize::from(k) + 1,
                            _ => 0,
                        };
                        &bufs[k][w.at..w.at + (w.end - w.start) as usize * bs]
                    },
                })
                .collect(),
            lo: self.lo,
            hi: self.hi,
            mode: self.mode,
            full: self.full,
            old: self.old.iter().map(|&i| take(i)).collect(),
            parity: take(self.parity),
            log,
        }
    }

    /// Moves the scratch of `p` (from [`TaskPlan::lend`]) back to its places.
    fn take_back(&self, p: Plan<'_>, scratch: &mut [Option<Scratch>]) {
        for (i, b) in self.old.iter().zip(p.old) {
            if let (Some(i), Some(b)) = (i, b) {
                scratch[usize::from(*i)] = Some(b);
            }
        }
        if let (Some(i), Some(b)) = (self.parity, p.parity) {
            scratch[usize::from(i)] = Some(b);
        }
        if let (Some((i, _)), Some((b, _))) = (self.log, p.log) {
            scratch[usize::from(i)] = Some(Scratch::Heap(b));
        }
    }
}

/// The scratch of a task, lent to a ring request. Every slot is filled between phases
/// (the plans hold indices into it).
fn lend(scratch: TaskScratch) -> RingScratch {
    debug_assert!(scratch.iter().all(Option::is_some));
    scratch.into_iter().flatten().map(EngineBuf).collect()
}

/// One operation on scratch buffer `i`.
fn seg(m: &Arc<dyn Member>, kind: RingOpKind, offset: u64, i: u16, range: Range<usize>) -> RingSeg {
    RingSeg {
        member: m.clone(),
        kind,
        offset,
        buf: RingBuf::Scratch(i),
        range,
    }
}

/// The hot-replace member that also gets `role`'s writes in `stripe`.
fn mirror(view: &View, role: usize, stripe: StripeIdx) -> Option<&Arc<dyn Member>> {
    match &view.replacement {
        Some((r, m, next)) if *r == role && stripe.0 < *next => Some(m),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::array::ppl::Entry;
    use crate::array::{ArrayConfig, MetaLayout, WriteHolePolicy};
    use crate::error::MemberError;
    use crate::geometry::MemberIdx;
    use crate::geometry::{BlockSize, ChunkSize};
    use crate::member::{Fault, FaultHandle, FaultyMember, MemMember, OpKind};
    use crate::parity::CpuXor;
    use crate::sys::buf::BufferArena;
    use crate::SyncExecutor;

    const CHUNK: usize = 4096;

    /// Four in-memory members behind fault injectors, 4 KiB chunks, a bitmap region of two
    /// stripes.
    pub(in crate::array) fn rig() -> (Array, Vec<FaultHandle>) {
        let (a, faults, _) = rig_with(CHUNK, false, WriteHolePolicy::Degraded);
        (a, faults)
    }

    /// Four in-memory members of 2 MiB behind fault injectors (with a volatile write cache
    /// when `cache`), chunks of `chunk` bytes, a bitmap region of two stripes, policy
    /// `write_hole`; the members' handles too.
    fn rig_with(
        chunk: usize,
        cache: bool,
        write_hole: WriteHolePolicy,
    ) -> (Array, Vec<FaultHandle>, Vec<MemMember>) {
        let mems: Vec<MemMember> = (0..4)
            .map(|i| match cache {
                true => MemMember::with_volatile_cache(&format!("m{i}"), 2 << 20),
                false => MemMember::new(&format!("m{i}"), 2 << 20),
            })
            .collect();
        let (arcs, faults): (Vec<Arc<dyn Member>>, Vec<FaultHandle>) = mems
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let f = FaultyMember::new(Arc::new(m.clone()), i as u64);
                let h = f.handle();
                (Arc::new(f) as Arc<dyn Member>, h)
            })
            .unzip();
        let cfg = ArrayConfig {
            chunk: ChunkSize::new(chunk as u32).unwrap(),
            block: BlockSize::new(4096).unwrap(),
            assume_clean: true,
            bitmap_region_stripes: Some(2),
            write_hole,
            ..ArrayConfig::default()
        };
        let a = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
        (a, faults, mems)
    }

    /// Runs every operation of `req` in order.
    pub(in crate::array) fn run(req: RingRequest) -> RingCompletion {
        let n = req.segs.len();
        req.run_sync(0..n)
    }

    /// Drives `t` from its request `req` to its end (every request run in order).
    fn finish(a: &Array, t: &mut WriteTask, req: RingRequest) -> WriteNext {
        let mut next = t.complete(a, run(req));
        while let WriteNext::Submit(r) = next {
            next = t.complete(a, run(r));
        }
        next
    }

    /// Parity matches the data: a check of the whole array finds no mismatch.
    fn parity_consistent(a: &Array) {
        let p = a
            .scrub_step(&mut SyncExecutor, a.geometry().stripes(), false)
            .unwrap();
        assert_eq!(p.mismatches, 0);
    }

    fn bits_on(a: &Array, role: usize) -> Vec<u8> {
        let st = a.read_state();
        let m = st.slots[role].member.clone().unwrap();
        drop(st);
        super::super::bitmap::read_bits(&*m, &a.meta, 4).unwrap()
    }

    fn meta_of(a: &Array) -> &MetaLayout {
        &a.meta
    }

    #[test]
    fn a_write_to_a_clear_region_makes_its_bit_durable_before_any_data_write() {
        let (a, _) = rig();
        let mut bufs = BufferArena::with_buffers(2, 2 * CHUNK, 4096).unwrap();
        // Region 0 written the blocking way (marks the array dirty).
        a.write(&mut SyncExecutor, ArrayBlock(0), &vec![1u8; 4096])
            .unwrap();
        assert_eq!(a.dirty_regions(), vec![0]);
        // Stripes 6 and 7 (3 data chunks each) lie in region 3.
        let lba = |stripe: u64| ArrayBlock(stripe * 3);
        let (mut b1, mut b2) = (bufs.pop().unwrap(), bufs.pop().unwrap());
        b1[..4096].fill(0xA1);
        b2[..4096].fill(0xB2);
        let WriteStart::Started(mut t1, req) =
            a.start_write(1, lba(6), 4096, b1, Vec::new(), false)
        else {
            panic!("not started");
        };
        let bitmap_off = meta_of(&a).bitmap_offset;
        let bitmap_writes = req
            .segs
            .iter()
            .filter(|s| s.kind == RingOpKind::Write && s.offset == bitmap_off)
            .count();
        assert_eq!(bitmap_writes, 4, "the bitmap block goes to every member");
        assert!(
            req.segs
                .iter()
                .all(|s| s.kind == RingOpKind::Read || s.offset == bitmap_off),
            "no data or parity write before the bit is durable: {:?}",
            req.segs
        );
        // Another write in the same region waits while the bit is being persisted.
        let b2 = match a.start_write(2, lba(7), 4096, b2, Vec::new(), false) {
            WriteStart::Busy(b, _) => b,
            other => panic!("expected Busy, got {other:?}"),
        };
        let WriteNext::Submit(flush) = t1.complete(&a, run(req)) else {
            panic!("no flush");
        };
        assert_eq!(flush.segs.len(), 4);
        assert!(flush.segs.iter().all(|s| s.kind == RingOpKind::Flush));
        let WriteNext::Submit(writes) = t1.complete(&a, run(flush)) else {
            panic!("no writes");
        };
        for role in 0..4 {
            assert_eq!(bits_on(&a, role)[0] & 0b1001, 0b1001, "role {role}");
        }
        // Now the neighbour goes (its bit is durable; its stripe is free).
        let WriteStart::Started(mut t2, req2) =
            a.start_write(2, lba(7), 4096, b2, Vec::new(), false)
        else {
            panic!("the neighbour did not start");
        };
        let WriteNext::Done(Some(b1), _) = t1.complete(&a, run(writes)) else {
            panic!("t1 not done");
        };
        let next = finish(&a, &mut t2, req2);
        let WriteNext::Done(Some(b2), _) = next else {
            panic!("t2 not done");
        };
        let mut back = vec![0u8; 4096];
        a.read(&mut SyncExecutor, lba(6), &mut back).unwrap();
        assert!(back.iter().all(|&x| x == 0xA1));
        a.read(&mut SyncExecutor, lba(7), &mut back).unwrap();
        assert!(back.iter().all(|&x| x == 0xB2));
        assert_eq!(a.dirty_regions(), vec![0, 3]);
        drop((b1, b2));
    }

    #[test]
    fn a_clean_array_is_marked_dirty_by_its_owner_before_the_first_write() {
        let (a, _) = rig();
        let mut bufs = BufferArena::with_buffers(1, CHUNK, 4096).unwrap();
        assert!(!a.mark_dirty_if_wanted().unwrap(), "nobody asked");
        let b = match a.start_write(
            1,
            ArrayBlock(0),
            4096,
            bufs.pop().unwrap(),
            Vec::new(),
            false,
        ) {
            WriteStart::Busy(b, _) => b,
            other => panic!("a clean array must be marked dirty first: {other:?}"),
        };
        assert!(!a.dirty_flag.load(Ordering::Acquire));
        assert!(a.mark_dirty_if_wanted().unwrap());
        assert!(a.dirty_flag.load(Ordering::Acquire));
        let WriteStart::Started(mut t, req) =
            a.start_write(1, ArrayBlock(0), 4096, b, Vec::new(), false)
        else {
            panic!("not started once dirty");
        };
        let next = finish(&a, &mut t, req);
        assert!(matches!(next, WriteNext::Done(Some(_), _)));
    }

    #[test]
    fn a_bit_that_failed_to_persist_is_written_again_by_the_blocking_path() {
        let (a, faults) = rig();
        let mut bufs = BufferArena::with_buffers(1, CHUNK, 4096).unwrap();
        a.write(&mut SyncExecutor, ArrayBlock(0), &vec![1u8; 4096])
            .unwrap();
        let bitmap_off = meta_of(&a).bitmap_offset;
        // Member 2's bitmap block write fails once.
        faults[2].inject(Fault::ErrorRange {
            kind: OpKind::Write,
            start: bitmap_off,
            end: bitmap_off + 4096,
        });
        let b = bufs.pop().unwrap();
        let WriteStart::Started(mut t, req) =
            a.start_write(1, ArrayBlock(18), 4096, b, Vec::new(), false)
        else {
            panic!("not started");
        };
        let WriteNext::Redo {
            buf: Some(b),
            torn: false,
            ..
        } = t.complete(&a, run(req))
        else {
            panic!("expected a redo, nothing written");
        };
        faults[2].clear();
        // Until the blocking path wrote it again, the path declines the region.
        let b = match a.start_write(1, ArrayBlock(18), 4096, b, Vec::new(), false) {
            WriteStart::Declined(b, _) => b,
            other => panic!("expected Declined, got {other:?}"),
        };
        a.write(&mut SyncExecutor, ArrayBlock(18), &b[..4096])
            .unwrap();
        assert_eq!(bits_on(&a, 2)[0] & 0b1000, 0b1000, "rewritten on member 2");
        let WriteStart::Started(mut t, req) =
            a.start_write(1, ArrayBlock(18), 4096, b, Vec::new(), false)
        else {
            panic!("the region is durable again");
        };
        let next = finish(&a, &mut t, req);
        assert!(matches!(next, WriteNext::Done(Some(_), _)));
        assert!(a.degraded_roles().is_empty());
    }

    #[test]
    fn writes_gathered_over_a_whole_stripe_read_nothing_and_write_parity_from_the_new_data() {
        let (a, _) = rig();
        a.write(&mut SyncExecutor, ArrayBlock(0), &vec![7u8; 4096])
            .unwrap();
        // Stripe 2 (3 data chunks of one block each) from three requests, a bitmap bit
        // already set by the blocking write in region 0.
        let mut bufs = BufferArena::with_buffers(3, CHUNK, 4096).unwrap();
        let mut parts: Vec<IoBuf> = (0..3).map(|_| bufs.pop().unwrap()).collect();
        for (k, b) in parts.iter_mut().enumerate() {
            b[..4096].fill(0x10 + k as u8);
        }
        let first = parts.remove(0);
        let more = parts.into_iter().map(|b| (b, 4096)).collect();
        let WriteStart::Started(mut t, req) =
            a.start_write(9, ArrayBlock(6), 4096, first, more, false)
        else {
            panic!("not started");
        };
        assert!(
            req.segs.iter().all(|s| s.kind == RingOpKind::Write),
            "a whole stripe reads nothing: {:?}",
            req.segs
        );
        assert_eq!(req.segs.len(), 4, "three data chunks and the parity");
        assert_eq!(req.more.len(), 2);
        let full = a.stats().full_stripe;
        let next = finish(&a, &mut t, req);
        let WriteNext::Done(Some(_), more) = next else {
            panic!("not done: {next:?}");
        };
        assert_eq!(more.len(), 2, "every buffer comes back");
        assert_eq!(a.stats().full_stripe, full + 1);
        let mut back = vec![0u8; 3 * 4096];
        a.read(&mut SyncExecutor, ArrayBlock(6), &mut back).unwrap();
        for k in 0..3 {
            assert!(back[k * 4096..(k + 1) * 4096]
                .iter()
                .all(|&x| x == 0x10 + k as u8));
        }
        parity_consistent(&a);
    }

    #[test]
    fn a_gathered_part_of_no_whole_blocks_is_declined_with_every_buffer() {
        let (a, _) = rig();
        a.write(&mut SyncExecutor, ArrayBlock(0), &vec![7u8; 4096])
            .unwrap();
        let mut bufs = BufferArena::with_buffers(2, 2 * CHUNK, 4096).unwrap();
        let (b1, b2) = (bufs.pop().unwrap(), bufs.pop().unwrap());
        match a.start_write(3, ArrayBlock(6), 4096, b1, vec![(b2, 4096 + 512)], false) {
            WriteStart::Declined(_, more) => assert_eq!(more.len(), 1),
            other => panic!("expected Declined, got {other:?}"),
        }
        assert_eq!(a.torn_writes(), 0);
    }

    // ---- Logged writes (degraded, or policy `always`) ----

    /// Writes a pattern over the first `blocks` blocks, then fails role `role` (as the engine
    /// does after an I/O error); the pattern.
    pub(in crate::array) fn degraded(a: &Array, blocks: usize, role: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..blocks * 4096).map(|i| (i * 7 % 251) as u8).collect();
        a.write(&mut SyncExecutor, ArrayBlock(0), &data).unwrap();
        let m = a.view().unwrap().members[role].clone().unwrap();
        let e = MemberError::Unsupported("failed by the test");
        a.fail_member(MemberIdx(role), &*m, &e).unwrap();
        assert_eq!(a.degraded_roles(), vec![role]);
        data
    }

    /// A stripe among the first four where `role` holds data, and that data index.
    fn data_stripe(a: &Array, role: usize) -> (StripeIdx, usize) {
        let g = a.geometry();
        (0..4)
            .map(StripeIdx)
            .find_map(|s| g.data_index_of(s, MemberIdx(role)).map(|d| (s, d)))
            .unwrap()
    }

    /// A 16 KiB-chunk rig (members with a volatile cache when `cache`) with role 1 failed
    /// after a pattern was written, and a stripe where role 1 holds data with that data index.
    #[allow(clippy::type_complexity)]
    fn degraded_rig(cache: bool) -> (Array, Vec<FaultHandle>, Vec<MemMember>, StripeIdx, usize) {
        let (a, faults, mems) = rig_with(4 * CHUNK, cache, WriteHolePolicy::Degraded);
        degraded(&a, 64, 1);
        let (stripe, d) = data_stripe(&a, 1);
        (a, faults, mems, stripe, d)
    }

    /// The log entry in `stripe`'s slot, as its parity member holds it.
    fn entry_of(a: &Array, stripe: StripeIdx) -> Option<Entry> {
        let layout = a.ppl.unwrap();
        let pm = a.geometry().parity_member(stripe).0;
        let m = a.view().unwrap().members[pm].clone()?;
        let mut head = vec![0u8; HEADER];
        m.read_at(layout.slot_offset(a.geometry(), stripe), &mut head)
            .unwrap();
        Entry::decode(&head)
    }

    /// Starts a write of `data` at `lba` on the ring, or panics.
    fn start(a: &Array, lba: ArrayBlock, data: &[u8]) -> (WriteTask, RingRequest) {
        let mut bufs = BufferArena::with_buffers(1, data.len(), 4096).unwrap();
        let mut b = bufs.pop().unwrap();
        b[..data.len()].copy_from_slice(data);
        match a.start_write(1, lba, data.len(), b, Vec::new(), false) {
            WriteStart::Started(t, req) => (t, req),
            other => panic!("not started: {other:?}"),
        }
    }

    #[test]
    fn a_degraded_write_puts_its_log_entry_on_media_before_any_data_write() {
        let (a, _, mems, stripe, d) = degraded_rig(true);
        let g = a.geometry();
        // Rows 1..3 of the missing role's chunk: a reconstruct-write, logged with the new rows.
        let lba = g.logical_block(stripe, d, 1);
        let (mut t, req) = start(&a, lba, &[0x5A; 2 * 4096]);
        assert!(req.segs.iter().all(|s| s.kind == RingOpKind::Read));
        assert!(req.segs.iter().all(|s| s.member.name() != "m1"));
        let WriteNext::Submit(log) = t.complete(&a, run(req)) else {
            panic!("no log");
        };
        let pm = g.parity_member(stripe).0;
        let slot = a.ppl.unwrap().slot_offset(g, stripe);
        assert_eq!(
            log.segs.len(),
            2,
            "the entry, then the missing chunk's new rows"
        );
        assert!(
            log.segs.iter().all(|s| s.kind == RingOpKind::Write
                && s.member.name() == format!("m{pm}")
                && s.offset >= slot
                && s.offset < a.meta.data_offset),
            "only the log before the data: {:?}",
            log.segs
        );
        let WriteNext::Submit(flush) = t.complete(&a, run(log)) else {
            panic!("no flush of the log");
        };
        assert_eq!(flush.segs.len(), 1);
        assert_eq!(flush.segs[0].kind, RingOpKind::Flush);
        assert_eq!(flush.segs[0].member.name(), format!("m{pm}"));
        let WriteNext::Submit(writes) = t.complete(&a, run(flush)) else {
            panic!("no writes");
        };
        assert_eq!(mems[pm].cached_writes(), 0, "the entry is on media");
        assert!(writes
            .segs
            .iter()
            .all(|s| s.kind == RingOpKind::Write && s.offset >= a.meta.data_offset));
        assert!(writes.segs.iter().all(|s| s.member.name() != "m1"));
        let next = t.complete(&a, run(writes));
        assert!(matches!(next, WriteNext::Done(Some(_), _)), "{next:?}");
        let mut back = vec![0u8; 2 * 4096];
        a.read(&mut SyncExecutor, lba, &mut back).unwrap();
        assert!(back.iter().all(|&x| x == 0x5A));
        let e = entry_of(&a, stripe).expect("an entry");
        assert_eq!((e.stripe, e.f), (stripe.0, Some((d, 1, 3))));
        assert_eq!(e.epoch, a.read_state().ppl_epoch);
        // Everything is released: the stripe and its slot are free.
        let key = a.ppl.unwrap().lock_key(g, stripe).0;
        assert!(a.ppl_locks.try_lock(&[key]));
        assert!(a.locks.try_lock(&[stripe.0]));
    }

    #[test]
    fn degraded_writes_on_the_ring_leave_the_members_as_the_blocking_engine_does() {
        let twins = [
            rig_with(4 * CHUNK, true, WriteHolePolicy::Degraded),
            rig_with(4 * CHUNK, true, WriteHolePolicy::Degraded),
        ];
        for (a, _, _) in &twins {
            degraded(a, 64, 1);
        }
        let (sync, ring) = (&twins[0].0, &twins[1].0);
        let g = sync.geometry();
        let (s1, d1) = data_stripe(sync, 1);
        let other = |s: StripeIdx| (0..3).find(|&d| g.data_member(s, d).0 != 1).unwrap();
        let parity_stripe = (0..8)
            .map(StripeIdx)
            .find(|&s| g.parity_member(s).0 == 1)
            .unwrap();
        // (first block, blocks): every degraded mode, twice over some slots.
        let writes = [
            (g.logical_block(s1, d1, 1), 2),           // reconstruct-write
            (g.logical_block(s1, other(s1), 0), 2),    // read-modify-write, logged
            (g.logical_block(StripeIdx(2), 0, 0), 4),  // one whole chunk
            (g.logical_block(parity_stripe, 1, 1), 3), // parity missing: data only
            (g.logical_block(StripeIdx(0), 2, 2), 8),  // across two stripes
            (g.logical_block(s1, d1, 0), 4),           // the missing chunk whole
            (g.logical_block(StripeIdx(4), 0, 0), 12), // a whole stripe
            (g.logical_block(s1, d1, 3), 1),           // the slot again
        ];
        for (k, &(lba, blocks)) in writes.iter().enumerate() {
            let data: Vec<u8> = (0..blocks * 4096)
                .map(|i| (i * 13 + k * 29) as u8)
                .collect();
            sync.write(&mut SyncExecutor, lba, &data).unwrap();
            let (mut t, req) = start(ring, lba, &data);
            let next = finish(ring, &mut t, req);
            assert!(
                matches!(next, WriteNext::Done(Some(_), _)),
                "write {k}: {next:?}"
            );
        }
        assert_eq!(
            sync.stats().reconstruct_write,
            ring.stats().reconstruct_write
        );
        let data_area = sync.meta.data_offset as usize..;
        let (ms, mr) = (&twins[0].2, &twins[1].2);
        let stripes: Vec<StripeIdx> = (0..8).map(StripeIdx).collect();
        for cut in [false, true] {
            for role in [0, 2, 3] {
                if cut {
                    // What a power cut leaves: only what the flushes made durable.
                    ms[role].power_cut(None);
                    mr[role].power_cut(None);
                }
                let (a, b) = (ms[role].snapshot(), mr[role].snapshot());
                assert!(
                    a[data_area.clone()] == b[data_area.clone()],
                    "role {role}, cut {cut}"
                );
            }
            let logged = stripes
                .iter()
                .filter(|&&s| entry_of(ring, s).is_some())
                .count();
            assert!(logged >= 3, "{logged} entries");
            for &s in &stripes {
                let mut e = entry_of(sync, s);
                let f = entry_of(ring, s);
                if let (Some(e), Some(f)) = (&mut e, &f) {
                    e.array = f.array;
                }
                assert_eq!(e, f, "log entry of stripe {}, cut {cut}", s.0);
            }
        }
    }

    #[test]
    fn with_policy_always_a_healthy_partial_write_is_logged_on_the_ring() {
        let (a, _, _) = rig_with(4 * CHUNK, true, WriteHolePolicy::Always);
        a.write(&mut SyncExecutor, ArrayBlock(0), &[3u8; 4096])
            .unwrap();
        let (mut t, mut req) = start(&a, ArrayBlock(1), &[9u8; 4096]);
        // What each request of the task does, in order.
        let log_area = a.meta.ppl_offset..a.meta.data_offset;
        let mut steps = Vec::new();
        let next = loop {
            let kinds: Vec<RingOpKind> = req.segs.iter().map(|s| s.kind).collect();
            steps.push(match kinds[0] {
                RingOpKind::Flush => "flush",
                RingOpKind::Read => "read",
                RingOpKind::Write if log_area.contains(&req.segs[0].offset) => "log",
                RingOpKind::Write => "write",
            });
            assert!(kinds.iter().all(|&k| k == kinds[0]), "{:?}", req.segs);
            match t.complete(&a, run(req)) {
                WriteNext::Submit(r) => req = r,
                next => break next,
            }
        };
        assert!(matches!(next, WriteNext::Done(Some(_), _)), "{next:?}");
        // The slot's previous round (the blocking write) is flushed before its entry is
        // overwritten, and the new entry before the data.
        assert_eq!(steps, ["read", "flush", "log", "flush", "write"]);
        let e = entry_of(&a, StripeIdx(0)).expect("an entry");
        assert_eq!((e.stripe, e.f), (0, None));
        parity_consistent(&a);
    }

    #[test]
    fn a_failed_log_write_writes_no_data_and_the_blocking_redo_completes_it() {
        let (a, faults, _, stripe, d) = degraded_rig(false);
        let g = a.geometry();
        let lba = g.logical_block(stripe, d, 0);
        let mut old = vec![0u8; 4 * 4096];
        a.read(&mut SyncExecutor, lba, &mut old).unwrap();
        let pm = g.parity_member(stripe).0;
        faults[pm].inject(Fault::ErrorRange {
            kind: OpKind::Write,
            start: a.meta.ppl_offset,
            end: a.meta.data_offset,
        });
        let (mut t, req) = start(&a, lba, &[0xC3; 4 * 4096]);
        let next = finish(&a, &mut t, req);
        let WriteNext::Redo {
            buf: Some(b),
            torn: false,
            ..
        } = next
        else {
            panic!("expected a redo with nothing written: {next:?}");
        };
        faults[pm].clear();
        let slot = a.ppl.unwrap().slot(g, stripe);
        assert_eq!(
            a.flush_gates[pm].slot_stripe(slot),
            None,
            "the slot is unknown"
        );
        let mut now = vec![0u8; 4 * 4096];
        a.read(&mut SyncExecutor, lba, &mut now).unwrap();
        assert!(now == old, "no data written before the log");
        assert_eq!(a.torn_writes(), 0);
        a.write(&mut SyncExecutor, lba, &b[..4 * 4096]).unwrap();
        a.read(&mut SyncExecutor, lba, &mut now).unwrap();
        assert!(now.iter().all(|&x| x == 0xC3));
    }

    #[test]
    fn a_held_log_slot_makes_a_logged_write_wait() {
        let (a, _, _, stripe, d) = degraded_rig(false);
        let g = a.geometry();
        let key = a.ppl.unwrap().lock_key(g, stripe).0;
        assert!(a.ppl_locks.try_lock(&[key]));
        let mut bufs = BufferArena::with_buffers(1, 4096, 4096).unwrap();
        let lba = g.logical_block(stripe, d, 0);
        let b = match a.start_write(1, lba, 4096, bufs.pop().unwrap(), Vec::new(), false) {
            WriteStart::Busy(b, _) => b,
            other => panic!("expected Busy, got {other:?}"),
        };
        assert!(a.locks.try_lock(&[stripe.0]), "nothing kept");
        a.locks.unlock(&[stripe.0]);
        a.ppl_locks.unlock(&[key]);
        let WriteStart::Started(mut t, req) = a.start_write(1, lba, 4096, b, Vec::new(), false)
        else {
            panic!("not started once the slot is free");
        };
        let next = finish(&a, &mut t, req);
        assert!(matches!(next, WriteNext::Done(Some(_), _)), "{next:?}");
    }
}
