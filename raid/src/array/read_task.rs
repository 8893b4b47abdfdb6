//! Completion-driven reads, for a caller that must never wait (a poller with its own
//! io_uring), degraded ones included: a read as a state machine with no I/O of its own.
//!
//! [`Array::start_read`] plans the read and hands back one batch of member reads as a
//! [`RingRequest`]: chunks on usable members straight into the caller's buffer, and for each
//! chunk on a missing member the same rows of every other member into the engine's scratch.
//! The caller submits it to its ring and feeds the [`RingCompletion`] to
//! [`ReadTask::complete`], which XORs the missing chunks into the buffer. The rules are
//! [`Array::read`]'s:
//! - a chunk is rebuilt under its stripe's lock (taken with
//!   [`super::locks::StripeLocks::try_lock`]: a held one gives [`ReadStart::Busy`], nothing
//!   taken), so no write of that stripe lands between the reads of its members;
//! - the view of the members is taken once the locks are held;
//! - the path never marks a member failed (that writes superblocks): a failed member read
//!   ends the task with [`ReadNext::Redo`], and the caller reads again with [`Array::read`],
//!   which fails the member and replans;
//! - two holes in one stripe (or a member without a descriptor for direct I/O, when asked)
//!   are [`ReadStart::Declined`]: the blocking path gives the array's error.

use std::ops::Range;
use std::sync::atomic::Ordering;

use std::sync::Arc;

use crate::geometry::{ArrayBlock, Segment};
use crate::member::Member;
use crate::sys::buf::IoBuf;
use crate::sys::ring::{
    RingBuf, RingCompletion, RingOpKind, RingRequest, RingScratch, RingSeg, RingSegs,
};

use super::{Array, EngineBuf, Scratch, View};

/// What [`Array::start_read`] did.
// By value on purpose: one per read, no allocation; it moves once, into the ring.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ReadStart {
    /// Submit the request; feed its completion to [`ReadTask::complete`].
    Started(ReadTask, RingRequest),
    /// A stripe it must rebuild is held by a write or by maintenance: nothing was taken; try
    /// again later.
    Busy(IoBuf),
    /// Not for this path: read it with [`Array::read`] on a thread that may block.
    Declined(IoBuf),
}

/// What a [`ReadTask`] gives after its completion.
#[derive(Debug)]
pub enum ReadNext {
    /// The bytes are in the buffer.
    Done(Option<IoBuf>),
    /// A member read failed: read again with [`Array::read`] (it marks the member failed).
    Redo(Option<IoBuf>),
}

/// One read on the completion-driven path (see the module documentation). It holds the
/// stripes it rebuilds until it ends: feed it its completion, or [`ReadTask::abort`] it.
#[derive(Debug)]
pub struct ReadTask {
    stripes: Vec<u64>,
    /// Per rebuilt chunk: its bytes in the caller's buffer, and the scratch buffers holding
    /// the same rows of every other member.
    rebuilt: Vec<(Range<usize>, Vec<u16>)>,
    ended: bool,
}

impl Array {
    /// Starts reading `len` bytes (whole blocks) at block `start` into `buf` on the
    /// completion-driven path (see [`ReadTask`]). With `need_fds`, declines unless every
    /// member it reads offers a descriptor for direct I/O (what an [`crate::OwnedRing`]
    /// needs).
    pub fn start_read(
        &self,
        tag: u64,
        start: ArrayBlock,
        len: usize,
        buf: IoBuf,
        need_fds: bool,
    ) -> ReadStart {
        let bs = self.geo.block_bytes();
        if len == 0 || !len.is_multiple_of(bs) || len > buf.len() {
            return ReadStart::Declined(buf);
        }
        if self.check_alignment(buf.as_ptr() as usize).is_err() {
            return ReadStart::Declined(buf);
        }
        let Ok(segs) = self.geo.segments(start, (len / bs) as u64) else {
            return ReadStart::Declined(buf);
        };
        let segs: Vec<_> = segs.collect();
        let Ok(view) = self.view() else {
            return ReadStart::Declined(buf);
        };
        let mut stripes: Vec<u64> = segs
            .iter()
            .filter(|s| !view.usable(s.at.member.0, s.at.stripe))
            .map(|s| s.at.stripe.0)
            .collect();
        stripes.dedup();
        if !self.locks.try_lock(&stripes) {
            return ReadStart::Busy(buf);
        }
        let mut task = ReadTask {
            stripes,
            rebuilt: Vec::new(),
            ended: false,
        };
        // The view again, under the locks (as `reconstruct`): a member may have failed or
        // come back meanwhile.
        let mut scratch: Vec<Scratch> = Vec::new();
        let planned = self
            .view()
            .ok()
            .and_then(|view| self.read_batch(&view, &segs, need_fds, &mut task, &mut scratch));
        let Some(segs) = planned else {
            self.give_scratch(scratch);
            self.end_read(&mut task, RingScratch::new());
            return ReadStart::Declined(buf);
        };
        let req = RingRequest {
            tag,
            buf: Some(buf),
            more: Vec::new(),
            scratch: scratch.into_iter().map(EngineBuf).collect(),
            segs,
        };
        ReadStart::Started(task, req)
    }

    /// The member reads of `segs` under `view`, in one batch: usable chunks into the
    /// caller's buffer, and for a chunk of a missing member the same rows of every other
    /// member into new `scratch` (recorded in `task.rebuilt`). `None` when the path cannot
    /// serve it: a member without a descriptor (with `need_fds`), a chunk to rebuild in a
    /// stripe the task did not lock, or two holes in a stripe (the blocking path says why).
    fn read_batch(
        &self,
        view: &View,
        segs: &[Segment],
        need_fds: bool,
        task: &mut ReadTask,
        scratch: &mut Vec<Scratch>,
    ) -> Option<RingSegs> {
        let bs = self.geo.block_bytes();
        let n = self.geo.members();
        let reader = |role: usize, stripe| {
            view.members[role]
                .as_ref()
                .filter(|m| view.usable(role, stripe) && (!need_fds || m.direct_fd().is_some()))
        };
        let read = |m: &Arc<dyn Member>, offset, buf, range| RingSeg {
            member: m.clone(),
            kind: RingOpKind::Read,
            offset,
            buf,
            range,
        };
        let mut ops = RingSegs::with_capacity(segs.len());
        let mut at = 0;
        for seg in segs {
            let range = at..at + seg.blocks as usize * bs;
            at = range.end;
            let (role, stripe) = (seg.at.member.0, seg.at.stripe);
            let offset = self.member_offset(seg.at.member_block.0);
            if view.usable(role, stripe) {
                ops.push(read(reader(role, stripe)?, offset, RingBuf::Main, range));
                continue;
            }
            // Usable when the locks were chosen, missing now: not locked.
            if !task.stripes.contains(&stripe.0) {
                return None;
            }
            let mut idxs = Vec::with_capacity(n - 1);
            for other in (0..n).filter(|&r| r != role) {
                let m = reader(other, stripe)?;
                scratch.push(self.take_scratch());
                let i = (scratch.len() - 1) as u16;
                idxs.push(i);
                ops.push(read(m, offset, RingBuf::Scratch(i), 0..range.len()));
            }
            task.rebuilt.push((range, idxs));
        }
        Some(ops)
    }

    /// Releases what a read task holds: its stripes and scratch.
    fn end_read(&self, task: &mut ReadTask, scratch: RingScratch) {
        if std::mem::replace(&mut task.ended, true) {
            return;
        }
        self.give_scratch(scratch.into_iter().map(|b| b.0));
        self.locks.unlock(&task.stripes);
    }
}

impl ReadTask {
    /// Feeds the completion of the task's request: rebuilds the missing chunks.
    pub fn complete(&mut self, array: &Array, c: RingCompletion) -> ReadNext {
        let scratch = c.scratch;
        let mut buf = match (c.buf, c.result) {
            (Some(buf), Ok(())) => buf,
            (buf, _) => {
                array.end_read(self, scratch);
                return ReadNext::Redo(buf);
            }
        };
        for (range, idxs) in &self.rebuilt {
            let len = range.len();
            let srcs: Vec<&[u8]> = idxs
                .iter()
                .filter_map(|&i| scratch.get(usize::from(i)).map(|b| &b.0[..len]))
                .collect();
            if srcs.len() != idxs.len()
                || array
                    .parity
                    .xor_gen(&srcs, &mut buf[range.clone()])
                    .is_err()
            {
                array.end_read(self, scratch);
                return ReadNext::Redo(Some(buf));
            }
            array
                .counters
                .degraded_read_segments
                .fetch_add(1, Ordering::Relaxed);
        }
        array.counters.reads.fetch_add(1, Ordering::Relaxed);
        array.end_read(self, scratch);
        ReadNext::Done(Some(buf))
    }

    /// Ends the task when its caller cannot submit `req` (its ring refused it): returns the
    /// caller's buffer, to read with [`Array::read`].
    pub fn abort(mut self, array: &Array, req: RingRequest) -> Option<IoBuf> {
        array.end_read(&mut self, req.scratch);
        req.buf
    }
}

impl Drop for ReadTask {
    fn drop(&mut self) {
        debug_assert!(
            self.ended || std::thread::panicking(),
            "a read task was dropped holding its stripes"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::task::tests::{degraded, rig, run};
    use crate::error::MemberError;
    use crate::geometry::MemberIdx;
    use crate::member::{Fault, OpKind};
    use crate::sys::buf::BufferArena;
    use crate::SyncExecutor;

    #[test]
    fn a_degraded_read_rebuilds_the_missing_chunks_from_one_batch() {
        let (a, _) = rig();
        let data = degraded(&a, 24, 1);
        let mut bufs = BufferArena::with_buffers(1, 24 * 4096, 4096).unwrap();
        let ReadStart::Started(mut t, req) =
            a.start_read(5, ArrayBlock(0), 24 * 4096, bufs.pop().unwrap(), false)
        else {
            panic!("not started");
        };
        assert!(req.segs.iter().all(|s| s.kind == RingOpKind::Read));
        assert!(
            req.segs.iter().all(|s| s.member.name() != "m1"),
            "the failed member is not read"
        );
        let before = a.stats().degraded_read_segments;
        let ReadNext::Done(Some(b)) = t.complete(&a, run(req)) else {
            panic!("not done");
        };
        assert!(b[..24 * 4096] == data[..], "rebuilt data differs");
        // 8 stripes of 3 data chunks: member 1 holds a data chunk in 6 of them.
        assert_eq!(a.stats().degraded_read_segments - before, 6);
        // The stripes are free again.
        assert!(a.locks.try_lock(&[0, 1, 2, 3, 4, 5, 6, 7]));
        a.locks.unlock(&[0, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn a_held_stripe_makes_the_read_wait_and_a_failed_member_read_sends_it_to_the_engine() {
        let (a, faults) = rig();
        let data = degraded(&a, 3, 0);
        let mut bufs = BufferArena::with_buffers(1, 3 * 4096, 4096).unwrap();
        assert!(a.locks.try_lock(&[0]));
        let b = match a.start_read(1, ArrayBlock(0), 3 * 4096, bufs.pop().unwrap(), false) {
            ReadStart::Busy(b) => b,
            other => panic!("expected Busy, got {other:?}"),
        };
        a.locks.unlock(&[0]);
        // A member the rebuild reads fails: the task ends, nothing held, and the blocking
        // path fails the member.
        faults[2].inject(Fault::ErrorRange {
            kind: OpKind::Read,
            start: 0,
            end: u64::MAX,
        });
        let ReadStart::Started(mut t, req) = a.start_read(1, ArrayBlock(0), 3 * 4096, b, false)
        else {
            panic!("not started");
        };
        let ReadNext::Redo(Some(mut b)) = t.complete(&a, run(req)) else {
            panic!("expected a redo");
        };
        assert!(a.locks.try_lock(&[0]));
        a.locks.unlock(&[0]);
        assert!(a
            .read(&mut SyncExecutor, ArrayBlock(0), &mut b[..3 * 4096])
            .is_err());
        faults[2].clear();
        drop(data);
    }

    #[test]
    fn two_holes_are_declined_for_the_blocking_path() {
        let (a, _) = rig();
        degraded(&a, 3, 0);
        let m = a.view().unwrap().members[2].clone().unwrap();
        let e = MemberError::Unsupported("failed by the test");
        // A second failure stops the array; the path declines and the engine answers.
        let _ = a.fail_member(MemberIdx(2), &*m, &e);
        let mut bufs = BufferArena::with_buffers(1, 3 * 4096, 4096).unwrap();
        match a.start_read(1, ArrayBlock(0), 3 * 4096, bufs.pop().unwrap(), false) {
            ReadStart::Declined(_) => {}
            other => panic!("expected Declined, got {other:?}"),
        }
        assert!(a.locks.try_lock(&[0]));
        a.locks.unlock(&[0]);
    }
}
