//! Read path. Healthy chunks are read straight into the caller's buffer in one batch, with
//! no lock. Chunks on a missing member are rebuilt under their stripe's lock: the same rows
//! are read from every other member into scratch and XORed into the caller's buffer.
//!
//! A member error marks that member failed and the request is replanned (at most once per
//! member), so a read returns the right bytes or an error — never unreconstructed data.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::error::{MemberError, RaidError};
use crate::geometry::{ArrayBlock, MemberIdx, Segment};
use crate::io::{Executor, MemberOp};
use crate::member::Member;

use super::{Array, View};

enum Outcome {
    Done,
    Retry,
}

/// One member read of [`Array::direct_reads`].
#[derive(Debug)]
pub struct DirectRead {
    /// The member's role.
    pub role: MemberIdx,
    /// The member.
    pub member: Arc<dyn Member>,
    /// Byte offset on the member.
    pub offset: u64,
    /// Where the bytes go in the caller's buffer.
    pub range: std::ops::Range<usize>,
}

impl Array {
    /// Reads `buf.len()` bytes (whole blocks) starting at block `start`.
    pub fn read<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        start: ArrayBlock,
        buf: &mut [u8],
    ) -> Result<(), RaidError> {
        let blocks = self.blocks_of(buf.len())?;
        self.check_alignment(buf.as_ptr() as usize)?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let segs: Vec<Segment> = self.geo.segments(start, blocks)?.collect();
        for _ in 0..=self.geo.members() {
            let view = self.view()?;
            if let Outcome::Done = self.read_once(exec, &view, &segs, buf)? {
                return Ok(());
            }
        }
        Err(RaidError::State("read kept failing on changing members"))
    }

    /// The member reads that serve `blocks` blocks from `start` straight from the members,
    /// with no lock and nothing to reconstruct, for a caller that issues them on its own ring
    /// ([`crate::OwnedRing`]): `Ok(None)` when some block lies on a member that cannot serve
    /// it now (missing, not rebuilt that far, the array stopped) or has no descriptor for
    /// direct I/O (in-memory members) — then use [`Array::read`],
    /// which reconstructs. Ranges are byte ranges of the caller's buffer. If one of these
    /// reads fails, redo the request with [`Array::read`]: it marks the member failed and
    /// reconstructs (a poller must not: that writes superblocks).
    pub fn direct_reads(
        &self,
        start: ArrayBlock,
        blocks: u64,
    ) -> Result<Option<SmallVec<[DirectRead; 4]>>, RaidError> {
        let bs = self.geo.block_bytes();
        let segs = self.geo.segments(start, blocks)?;
        let Ok(view) = self.view() else {
            return Ok(None);
        };
        // Inline: no allocation per read (a read over more than four chunks spills).
        let mut out = SmallVec::new();
        let mut at = 0usize;
        for seg in segs {
            let role = seg.at.member.0;
            let len = seg.blocks as usize * bs;
            match &view.members[role] {
                Some(m) if view.usable(role, seg.at.stripe) && m.direct_fd().is_some() => {
                    out.push(DirectRead {
                        role: seg.at.member,
                        member: m.clone(),
                        offset: self.member_offset(seg.at.member_block.0),
                        range: at..at + len,
                    })
                }
                _ => return Ok(None),
            }
            at += len;
        }
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        Ok(Some(out))
    }

    /// Checks that a request buffer's address suits every member (O_DIRECT members need
    /// their logical block alignment). Checked up front so a caller's mistake never looks
    /// like a member failure.
    pub(crate) fn check_alignment(&self, addr: usize) -> Result<(), RaidError> {
        let st = self.read_state();
        let align = st
            .slots
            .iter()
            .filter_map(|s| s.member.as_ref())
            .chain(st.replace.as_ref().map(|r| &r.member))
            .map(|m| m.alignment())
            .max()
            .unwrap_or(1)
            .max(1);
        if !addr.is_multiple_of(align) {
            return Err(RaidError::Misaligned { addr, align });
        }
        Ok(())
    }

    /// Checks a request buffer: a non-zero whole number of blocks. Returns the block count.
    pub(crate) fn blocks_of(&self, len: usize) -> Result<u64, RaidError> {
        let bs = self.geo.block_bytes();
        if len == 0 || !len.is_multiple_of(bs) {
            return Err(RaidError::BufferSize { len, block: bs });
        }
        Ok((len / bs) as u64)
    }

    fn read_once<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        segs: &[Segment],
        buf: &mut [u8],
    ) -> Result<Outcome, RaidError> {
        let bs = self.geo.block_bytes();
        let mut rest = &mut buf[..];
        let mut direct = Vec::with_capacity(segs.len());
        let mut degraded = Vec::new();
        for seg in segs {
            let (slice, tail) = rest.split_at_mut(seg.blocks as usize * bs);
            rest = tail;
            let role = seg.at.member.0;
            match view.member(role) {
                Some(m) if view.usable(role, seg.at.stripe) => direct.push(MemberOp::read(
                    seg.at.member,
                    m,
                    self.member_offset(seg.at.member_block.0),
                    slice,
                )),
                _ => degraded.push((*seg, slice)),
            }
        }
        exec.execute(&mut direct);
        if self.fail_from(&mut direct)? {
            return Ok(Outcome::Retry);
        }
        drop(direct);
        if degraded.is_empty() {
            return Ok(Outcome::Done);
        }
        self.reconstruct(exec, &mut degraded)
    }

    /// Marks every member whose operation failed; `Ok(true)` when any did.
    pub(crate) fn fail_from(&self, ops: &mut [MemberOp<'_>]) -> Result<bool, RaidError> {
        let mut any = false;
        for op in ops.iter_mut() {
            match op.result.take() {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    any = true;
                    self.fail_member(op.role, op.member, &e)?;
                }
                // An executor that left an operation unanswered did not do it: never
                // count that as success.
                None => {
                    any = true;
                    let e = MemberError::Io {
                        member: op.member.name().to_string(),
                        offset: op.offset,
                        source: std::io::Error::other("executor returned without running it"),
                    };
                    self.fail_member(op.role, op.member, &e)?;
                }
            }
        }
        Ok(any)
    }

    fn reconstruct<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        segs: &mut [(Segment, &mut [u8])],
    ) -> Result<Outcome, RaidError> {
        let _guard = self.locks.lock(segs.iter().map(|(s, _)| s.at.stripe));
        // Re-check under the lock: the state may have moved on (a rebuild finished, another
        // member failed). If a segment's own member is usable now, replan from scratch.
        let view = self.view()?;
        if segs
            .iter()
            .any(|(s, _)| view.usable(s.at.member.0, s.at.stripe))
        {
            return Ok(Outcome::Retry);
        }
        let n = self.geo.members();
        let mut scratch: Vec<Vec<super::Scratch>> = Vec::with_capacity(segs.len());
        let mut ok = true;
        {
            let mut ops = Vec::new();
            let mut bufs_per_seg = Vec::with_capacity(segs.len());
            for (seg, _) in segs.iter() {
                let mut bufs = Vec::with_capacity(n - 1);
                for role in 0..n {
                    if role == seg.at.member.0 {
                        continue;
                    }
                    if !view.usable(role, seg.at.stripe) {
                        ok = false;
                    }
                    bufs.push(self.take_scratch());
                }
                bufs_per_seg.push(bufs);
            }
            if !ok {
                let back: Vec<super::Scratch> = bufs_per_seg.into_iter().flatten().collect();
                self.give_scratch(back);
                return self.two_holes(&view);
            }
            let bs = self.geo.block_bytes();
            for ((seg, _), bufs) in segs.iter().zip(bufs_per_seg.iter_mut()) {
                let len = seg.blocks as usize * bs;
                let others = (0..n).filter(|&r| r != seg.at.member.0);
                for (role, b) in others.zip(bufs.iter_mut()) {
                    let m = view
                        .member(role)
                        .ok_or(RaidError::State("usable member missing"))?;
                    ops.push(MemberOp::read(
                        MemberIdx(role),
                        m,
                        self.member_offset(seg.at.member_block.0),
                        &mut b[..len],
                    ));
                }
            }
            exec.execute(&mut ops);
            if self.fail_from(&mut ops)? {
                drop(ops);
                self.give_scratch(bufs_per_seg.into_iter().flatten());
                return Ok(Outcome::Retry);
            }
            drop(ops);
            scratch.extend(bufs_per_seg);
        }
        for ((_, dst), bufs) in segs.iter_mut().zip(scratch.iter()) {
            let len = dst.len();
            let srcs: Vec<&[u8]> = bufs.iter().map(|b| &b[..len]).collect();
            self.parity.xor_gen(&srcs, dst)?;
            self.counters
                .degraded_read_segments
                .fetch_add(1, Ordering::Relaxed);
        }
        self.give_scratch(scratch.into_iter().flatten());
        Ok(Outcome::Done)
    }

    /// The error for "two members missing" seen from a view (the array state says why).
    pub(crate) fn two_holes<T>(&self, view: &View) -> Result<T, RaidError> {
        let failed: Vec<usize> = (0..self.geo.members())
            .filter(|&r| view.states[r] != crate::superblock::SlotState::Active)
            .collect();
        Err(RaidError::ArrayFailed {
            failed,
            cause: "two members unavailable for one stripe".into(),
        })
    }
}
