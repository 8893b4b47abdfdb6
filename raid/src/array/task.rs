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
//! - **writes**: parity is computed when the reads are in, then the new data (straight from
//!   the caller's buffer) and the parity go out in one batch, and to a hot-replace member
//!   too where it holds the stripe;
//! - **flushes**, only when the partial-parity-log epoch changed while the write was in
//!   flight (the synchronous engine's `settle_epoch`): the roles written, before the stripes
//!   are unlocked.
//!
//! Planning, parity and counters are the synchronous engine's ([`super::write`]); this path
//! only orders the same steps around completions. It takes only what it can take without
//! waiting, and declines what it cannot serve ([`WriteStart::Declined`]: use
//! [`Array::write`] on a thread that may block):
//! - the stripes are taken with [`super::locks::StripeLocks::try_lock`]; a held one gives
//!   [`WriteStart::Busy`] (nothing taken; try again when something completed);
//! - the bitmap mutex must be free (a blocking thread may hold it while it writes bitmap
//!   blocks: `Busy`), and no needed bit may have failed to persist earlier (the blocking path
//!   writes it again);
//! - the array must be healthy and need no partial-parity-log entry (policy `always` logs
//!   every write that is not a whole stripe: declined), have no log-cover record due, and
//!   no torn write waiting for its redo;
//! - the array must be marked dirty already: if not, `Busy`, and
//!   [`Array::mark_dirty_if_wanted`] (the owner's background thread) writes the superblocks;
//! - at most [`super::write::ROUND_STRIPES`] stripes.
//!
//! Failures: the path never marks a member failed (that writes superblocks). A failed read
//! (or bitmap write or flush: its bits then count as not durable until the blocking path
//! wrote them again) ends the task with nothing written: redo it with [`Array::write`], which marks the member
//! failed and replans. A failed write leaves the stripes torn (new data beside old parity, or
//! the reverse): the task counts the array torn before it unlocks them, and every write
//! reconstructs parity from the data (never from old parity) until the redo, which rewrites
//! the whole request and then calls [`Array::end_torn`].

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::geometry::{ArrayBlock, StripeIdx};
use crate::member::Member;
use crate::superblock::SlotState;
use crate::sys::buf::IoBuf;
use crate::sys::ring::{RingBuf, RingCompletion, RingOpKind, RingRequest, RingSeg};

use super::bitmap::TryBegin;
use super::write::{old_rows, ChunkWrite, Mode, Plan, ROUND_STRIPES};
use super::{Array, EngineBuf, Scratch, View};

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

/// The caller's buffers of one task: the first request's, then those gathered with it.
type Bufs = (IoBuf, Vec<IoBuf>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The reads, and the write-intent bitmap blocks when bits had to be set.
    Reads,
    /// Flushing every member after its bitmap blocks were written.
    BitmapFlush,
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
    writes: Vec<TaskWrite>,
    lo: u64,
    hi: u64,
    mode: Mode,
    full: bool,
    old: Vec<Option<u16>>,
    parity: Option<u16>,
}

/// One write on the completion-driven path (see the module documentation). It holds its
/// stripes, bitmap regions and log-epoch registration until it ends: drive it to
/// [`WriteNext::Done`] or [`WriteNext::Redo`], or [`WriteTask::abort`] it.
#[derive(Debug)]
pub struct WriteTask {
    tag: u64,
    stripes: Vec<u64>,
    first: u64,
    last: u64,
    epoch: u64,
    view: View,
    plans: Vec<TaskPlan>,
    phase: Phase,
    /// Bits this task set are being made durable (the write waits for them).
    bitmap_pending: bool,
    /// Requests gathered in it (each is redone on its own after a failure).
    requests: usize,
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
        let ids: Vec<u64> = stripes.iter().map(|(s, _)| s.0).collect();
        if !self.locks.try_lock(&ids) {
            return WriteStart::Busy(buf, more);
        }
        let (first, last) = (ids[0], ids[ids.len() - 1]);
        let entered = {
            let st = self.read_state();
            let healthy = st.failed.is_none()
                && st
                    .slots
                    .iter()
                    .all(|s| s.state == SlotState::Active && s.member.is_some());
            let logged = !st.ppl_off && st.ppl_always;
            match (healthy && !logged, Self::view_of(&st)) {
                (true, Ok(view)) => {
                    let force_rcw = st.resync.is_some();
                    let epoch = st.ppl_epoch;
                    // Under the state lock, as `enter_writes`: an epoch change sees it.
                    Some((view, force_rcw, self.inflight.enter(epoch).keep()))
                }
                _ => None,
            }
        };
        let Some((view, force_rcw, epoch)) = entered else {
            self.locks.unlock(&ids);
            return WriteStart::Declined(buf, more);
        };
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
                self.locks.unlock(&ids);
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
            plans: Vec::with_capacity(stripes.len()),
            phase: Phase::Reads,
            bitmap_pending: !images.is_empty(),
            requests: 1 + more.len(),
            ended: false,
        };
        let mut scratch: Vec<Option<Scratch>> = Vec::new();
        let bases: Vec<(usize, usize)> = std::iter::once(&buf)
            .chain(&more)
            .map(|b| (b.as_ptr() as usize, b.len()))
            .collect();
        for (stripe, writes) in &stripes {
            let plan = match self.plan(&task.view, *stripe, writes, force_rcw, None) {
                Ok(p) => p,
                Err(_) => {
                    self.end_task(&mut task, scratch);
                    return WriteStart::Declined(buf, more);
                }
            };
            task.plans.push(TaskPlan::keep(plan, &bases, &mut scratch));
        }
        drop(stripes);
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
            let req = RingRequest {
                tag,
                buf: Some(buf),
                more,
                scratch: lend(scratch),
                segs: reads,
            };
            return WriteStart::Started(task, req);
        }
        match self.write_request(&mut task, (buf, more), scratch) {
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
    ) -> Option<Vec<(StripeIdx, Vec<ChunkWrite<'d>>)>> {
        let bs = self.geo.block_bytes();
        // Each buffer's bytes, with where it starts in the request.
        let mut pieces: Vec<(usize, &'d [u8])> = Vec::with_capacity(1 + more.len());
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
        (stripes.len() <= ROUND_STRIPES).then_some(stripes)
    }

    /// The reads of every plan (into scratch), as the synchronous engine's read phase.
    fn read_segs(&self, task: &WriteTask) -> Vec<RingSeg> {
        let bs = self.geo.block_bytes();
        let mut segs = Vec::new();
        for p in &task.plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            let (lo, hi) = (p.lo, p.hi);
            if p.mode == Mode::Rmw {
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

    /// Computes parity (the synchronous engine's code, over the plans rebuilt around the
    /// buffers) and returns the write batch: new data from `buf`, parity from scratch, and
    /// the hot-replace copies. `Err` (the task ended) if the engine failed: nothing written.
    fn write_request(
        &self,
        task: &mut WriteTask,
        (buf, more): Bufs,
        mut scratch: Vec<Option<Scratch>>,
    ) -> Result<RingRequest, Bufs> {
        let computed = {
            let bufs: Vec<&[u8]> = std::iter::once(&buf).chain(&more).map(|b| &b[..]).collect();
            let mut plans: Vec<Plan<'_>> = task
                .plans
                .iter()
                .map(|p| p.lend(&bufs, &mut scratch, self.geo.block_bytes()))
                .collect();
            let r = self.compute_all(&mut plans);
            for (tp, p) in task.plans.iter().zip(plans) {
                tp.take_back(p, &mut scratch);
            }
            r
        };
        if computed.is_err() {
            self.end_task(task, scratch);
            return Err((buf, more));
        }
        let bs = self.geo.block_bytes();
        let mut segs = Vec::new();
        let view = &task.view;
        for p in &task.plans {
            let base = self.geo.stripe_member_block(p.stripe).0;
            for w in &p.writes {
                let role = self.geo.data_member(p.stripe, w.data_index).0;
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
            if let (Some(i), Some(m)) = (p.parity, &view.members[pm]) {
                let off = self.member_offset(base + p.lo);
                let range = 0..(p.hi - p.lo) as usize * bs;
                for m in std::iter::once(m).chain(mirror(view, pm, p.stripe)) {
                    segs.push(seg(m, RingOpKind::Write, off, i, range.clone()));
                }
            }
        }
        task.phase = Phase::Writes;
        Ok(RingRequest {
            tag: task.tag,
            buf: Some(buf),
            more,
            scratch: lend(scratch),
            segs,
        })
    }

    /// Releases what a task holds: stripes, bitmap regions, its epoch registration, scratch.
    fn end_task(&self, task: &mut WriteTask, scratch: Vec<Option<Scratch>>) {
        if std::mem::replace(&mut task.ended, true) {
            return;
        }
        self.give_scratch(scratch.into_iter().flatten());
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
        let scratch: Vec<Option<Scratch>> = c.scratch.into_iter().map(|b| Some(b.0)).collect();
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
                self.flushes(members, buf, scratch)
            }
            (Phase::BitmapFlush, Err(_)) => {
                array.end_task(self, scratch);
                redo(buf, false)
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
                match array.write_request(self, buf, scratch) {
                    Ok(req) => WriteNext::Submit(req),
                    Err(buf) => redo(buf, false),
                }
            }
            (Phase::Writes, Err(_)) => {
                // Counted before the stripes unlock: a write that locks them next sees it.
                // One per request: each redo ends one.
                array.torn.fetch_add(self.requests, Ordering::SeqCst);
                array.end_task(self, scratch);
                redo(buf, true)
            }
            (Phase::Writes, Ok(())) => {
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
                self.flushes(members, buf, scratch)
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

    /// The next request: a flush of each of `members`, the buffers travelling with it.
    fn flushes(
        &self,
        members: Vec<Arc<dyn Member>>,
        (buf, more): Bufs,
        scratch: Vec<Option<Scratch>>,
    ) -> WriteNext {
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
        WriteNext::Submit(RingRequest {
            tag: self.tag,
            buf: Some(buf),
            more,
            scratch: lend(scratch),
            segs,
        })
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
        let geo = array.geometry();
        let mut roles: Vec<usize> = Vec::new();
        for p in &self.plans {
            let data = p
                .writes
                .iter()
                .map(|w| geo.data_member(p.stripe, w.data_index).0);
            let parity = p.parity.map(|_| geo.parity_member(p.stripe).0);
            roles.extend(data.chain(parity));
        }
        roles.sort_unstable();
        roles.dedup();
        roles.retain(|&r| {
            self.view
                .member(r)
                .is_some_and(|m| m.volatile_write_cache())
        });
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
    fn keep(p: Plan<'_>, bases: &[(usize, usize)], scratch: &mut Vec<Option<Scratch>>) -> TaskPlan {
        let mut put = |b: Option<Scratch>| {
            b.map(|b| {
                scratch.push(Some(b));
                (scratch.len() - 1) as u16
            })
        };
        let old = p.old.into_iter().map(&mut put).collect();
        let parity = put(p.parity);
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
        }
    }

    /// The engine's plan again, over the caller's buffers `bufs` (the first, then the
    /// gathered ones) and the scratch (moved out of `scratch`).
    fn lend<'d>(&self, bufs: &[&'d [u8]], scratch: &mut [Option<Scratch>], bs: usize) -> Plan<'d> {
        let mut take = |i: Option<u16>| i.and_then(|i| scratch[usize::from(i)].take());
        Plan {
            stripe: self.stripe,
            writes: self
                .writes
                .iter()
                .map(|w| ChunkWrite {
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
            log: None,
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
    }
}

/// The scratch of a task, lent to a ring request. Every slot is filled between phases
/// (the plans hold indices into it).
fn lend(scratch: Vec<Option<Scratch>>) -> Vec<EngineBuf> {
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
    use crate::array::{ArrayConfig, MetaLayout};
    use crate::geometry::{BlockSize, ChunkSize};
    use crate::member::{Fault, FaultHandle, FaultyMember, MemMember, OpKind};
    use crate::parity::CpuXor;
    use crate::sys::buf::BufferArena;
    use crate::SyncExecutor;

    const CHUNK: usize = 4096;

    /// Four in-memory members behind fault injectors, 4 KiB chunks, a bitmap region of two
    /// stripes.
    pub(in crate::array) fn rig() -> (Array, Vec<FaultHandle>) {
        let (arcs, faults): (Vec<Arc<dyn Member>>, Vec<FaultHandle>) = (0..4)
            .map(|i| {
                let f = FaultyMember::new(Arc::new(MemMember::new(&format!("m{i}"), 2 << 20)), i);
                let h = f.handle();
                (Arc::new(f) as Arc<dyn Member>, h)
            })
            .unzip();
        let cfg = ArrayConfig {
            chunk: ChunkSize::new(CHUNK as u32).unwrap(),
            block: BlockSize::new(4096).unwrap(),
            assume_clean: true,
            bitmap_region_stripes: Some(2),
            ..ArrayConfig::default()
        };
        let a = Array::create(arcs, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
        (a, faults)
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
        // Parity matches the data: a check of the whole array finds no mismatch.
        let p = a
            .scrub_step(&mut SyncExecutor, a.geometry().stripes(), false)
            .unwrap();
        assert_eq!(p.mismatches, 0);
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
}
