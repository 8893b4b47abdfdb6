//! Background work over whole stripes: rebuild onto a spare, resync after an unclean stop,
//! and scrub (check or repair).
//!
//! The owner drives each job in steps (`*_step(exec, max_stripes)`) from whatever thread it
//! likes, while requests keep flowing; every stripe is processed under its stripe lock, so a
//! step never races a write to the same stripe. [`Throttle`] turns a configured rate into
//! the pause before the next step; [`SyncProgress`] reports fraction, rate and ETA.
//!
//! - **Rebuild**: stripe `s` of the rebuilding role = XOR of the other members' chunks.
//!   The checkpoint (first stripe not rebuilt) advances under the stripe lock and is
//!   persisted every [`CHECKPOINT_STRIPES`] stripes and at the end, so a restart resumes
//!   from the last persisted checkpoint. When done the role becomes Active.
//! - **Replace**: hot replace copies a role onto a new member while the old one serves (see
//!   [`super::replace`]); it runs through the same steps ([`Array::rebuild_step`],
//!   [`Array::run_rebuild`]) and reports as [`SyncKind::Replace`].
//! - **Resync**: visits stripes of regions whose bitmap bit is set, recomputes parity where
//!   it mismatches, and clears the bits of finished regions. Writes during a resync use
//!   reconstruct-write, which makes their stripes consistent by itself.
//! - **Scrub**: check counts stripes whose parity mismatches; repair also rewrites parity.
//!   Stripes with a member missing are skipped (counted in `skipped`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::RaidError;
use crate::geometry::{MemberIdx, StripeIdx};
use crate::io::{Executor, MemberOp};
use crate::parity::XorJob;
use crate::superblock::SlotState;

use super::{Array, Inner};

/// Rebuild checkpoints are persisted each time the checkpoint crosses a multiple of this
/// (in stripes), and when the rebuild ends; a restart redoes at most this many stripes.
pub const CHECKPOINT_STRIPES: u64 = 64;

/// Stripes rebuilt per read batch and write batch.
pub const REBUILD_ROUND: u64 = 8;

/// Kind of background job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// Rebuilding a role onto a spare or replacement.
    Rebuild {
        /// Role being rebuilt.
        role: usize,
    },
    /// Hot replace: copying a role onto its replacement while the old member serves.
    Replace {
        /// Role being copied.
        role: usize,
    },
    /// Resync of dirty regions.
    Resync,
    /// Scrub that only counts mismatches.
    Check,
    /// Scrub that rewrites mismatched parity.
    Repair,
}

/// Progress of a background job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncProgress {
    /// Which job.
    pub kind: SyncKind,
    /// Stripes done (or position reached).
    pub done: u64,
    /// Total stripes.
    pub total: u64,
    /// `done / total`.
    pub fraction: f64,
    /// Rate since the job started, bytes per second: bytes written to the new member
    /// (rebuild) or read from all members (resync, scrub).
    pub bytes_per_sec: f64,
    /// Estimated time left at that rate.
    pub eta: Option<Duration>,
    /// Stripes whose parity mismatched (resync, scrub).
    pub mismatches: u64,
    /// Stripes skipped because a member was missing (scrub).
    pub skipped: u64,
    /// Whether the job has finished.
    pub finished: bool,
}

/// Turns a rate limit into pauses. `None` rate means unthrottled.
#[derive(Debug, Clone)]
pub struct Throttle {
    bytes_per_sec: Option<u64>,
    started: Option<Instant>,
    bytes: u64,
}

impl Throttle {
    /// A throttle at `bytes_per_sec` (`None`: no limit).
    pub fn new(bytes_per_sec: Option<u64>) -> Self {
        Throttle {
            bytes_per_sec,
            started: None,
            bytes: 0,
        }
    }

    /// Records `bytes` done at `now` and returns how long to pause before the next step.
    pub fn account(&mut self, bytes: u64, now: Instant) -> Duration {
        let started = *self.started.get_or_insert(now);
        self.bytes += bytes;
        let Some(rate) = self.bytes_per_sec.filter(|&r| r > 0) else {
            return Duration::ZERO;
        };
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        due.saturating_sub(now.saturating_duration_since(started))
    }
}

/// Rate bookkeeping for the job in progress.
#[derive(Debug)]
pub(crate) struct Tracker {
    kind: Option<SyncKind>,
    started: Instant,
    bytes: u64,
    mismatches: u64,
    skipped: u64,
    /// Scrub position.
    scrub_next: u64,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            kind: None,
            started: Instant::now(),
            bytes: 0,
            mismatches: 0,
            skipped: 0,
            scrub_next: 0,
        }
    }
}

pub(crate) type TrackerCell = Mutex<Tracker>;

impl Array {
    fn tracker(&self) -> std::sync::MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn track(
        &self,
        kind: SyncKind,
        pos: u64,
        bytes: u64,
        mismatches: u64,
        skipped: u64,
    ) -> SyncProgress {
        let mut t = self.tracker();
        if t.kind != Some(kind) {
            *t = Tracker {
                kind: Some(kind),
                started: Instant::now(),
                ..Tracker::default()
            };
        }
        t.bytes += bytes;
        t.mismatches += mismatches;
        t.skipped += skipped;
        self.progress_of(&t, kind, pos)
    }

    fn progress_of(&self, t: &Tracker, kind: SyncKind, pos: u64) -> SyncProgress {
        let total = self.geo.stripes();
        let secs = t.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            t.bytes as f64 / secs
        } else {
            0.0
        };
        // Bytes each job moves per stripe, in the units `bytes_per_sec` counts: rebuild writes
        // one chunk to the new member; resync and scrub read a chunk from every member.
        let per_stripe = match kind {
            SyncKind::Rebuild { .. } | SyncKind::Replace { .. } => self.geo.chunk_bytes(),
            _ => self.geo.chunk_bytes() * self.geo.members(),
        } as f64;
        // (Resync skips clean regions, so its ETA is an upper bound.)
        let left = total.saturating_sub(pos) as f64 * per_stripe;
        let eta = (rate > 0.0).then(|| Duration::from_secs_f64(left / rate));
        SyncProgress {
            kind,
            done: pos,
            total,
            fraction: pos as f64 / total as f64,
            bytes_per_sec: rate,
            eta,
            mismatches: t.mismatches,
            skipped: t.skipped,
            finished: pos >= total,
        }
    }

    /// Progress of the running rebuild or hot replace (`kind` tells which), if any.
    pub fn rebuild_progress(&self) -> Option<SyncProgress> {
        let (kind, next) = {
            let st = self.read_state();
            match (st.rebuild, &st.replace) {
                (Some((role, next)), _) => (SyncKind::Rebuild { role }, next),
                (None, Some(r)) => (SyncKind::Replace { role: r.role }, r.next),
                (None, None) => return None,
            }
        };
        let t = self.tracker();
        if t.kind == Some(kind) {
            Some(self.progress_of(&t, kind, next))
        } else {
            Some(self.progress_of(&Tracker::default(), kind, next))
        }
    }

    /// Whether a resync is pending (unclean stop, or a new array not assumed clean).
    pub fn resync_pending(&self) -> bool {
        self.read_state().resync.is_some()
    }

    /// Adds a hot spare (its superblock is written). If a role is failed, the spare is taken
    /// at once and a rebuild starts.
    pub fn add_spare(
        &self,
        member: std::sync::Arc<dyn crate::member::Member>,
    ) -> Result<(), RaidError> {
        let need = self.meta.data_offset + self.geo.member_data_bytes();
        if member.size_bytes() < need {
            return Err(RaidError::MemberTooSmall {
                member: member.name().into(),
                size: member.size_bytes(),
            });
        }
        let uuid = crate::superblock::Uuid::random()?;
        let mut st = self.write_state();
        if st.failed.is_some() {
            return Err(RaidError::State("array has failed"));
        }
        if Self::holds_device(&st, &member) {
            return Err(RaidError::State("the device is already in the array"));
        }
        // Before any superblock names it: its log area must not hold entries of another
        // array, or of an earlier life of this one. Under the state lock (one zeroing write
        // and a flush, rare), so that a concurrent add of the same device cannot clear it
        // once it serves.
        super::ppl::clear_area(&self.meta, &*member).map_err(RaidError::NewMember)?;
        st.spares.push((member, uuid));
        Self::take_spare(&mut st);
        self.persist(&mut st)
    }

    /// Assigns a spare to a failed role (no persist; the caller persists).
    pub(crate) fn take_spare(st: &mut Inner) {
        if st.rebuild.is_some() || st.failed.is_some() {
            return;
        }
        let Some(role) = st.slots.iter().position(|s| s.state == SlotState::Failed) else {
            return;
        };
        let Some((m, uuid)) = st.spares.pop() else {
            return;
        };
        st.slots[role].member = Some(m);
        st.slots[role].gone = None;
        st.slots[role].uuid = uuid;
        st.slots[role].state = SlotState::Rebuilding;
        st.rebuild = Some((role, 0));
    }

    /// Rebuilds up to `max_stripes` stripes of the running rebuild, [`REBUILD_ROUND`]
    /// stripes per read batch and write batch; with no rebuild, copies that many stripes of
    /// a running hot replace instead. `Ok(None)` when neither is running.
    pub fn rebuild_step<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        max_stripes: u64,
    ) -> Result<Option<SyncProgress>, RaidError> {
        let (rebuild, replacing) = {
            let st = self.read_state();
            (st.rebuild, st.replace.as_ref().map(|r| r.role))
        };
        let role = match (rebuild, replacing) {
            (Some((role, _)), _) => role,
            (None, Some(role)) => return self.replace_step(exec, role, max_stripes).map(Some),
            (None, None) => return Ok(None),
        };
        let kind = SyncKind::Rebuild { role };
        let total = self.geo.stripes();
        let mut bytes = 0;
        let mut left = max_stripes.max(1);
        while left > 0 {
            let Some((r, first)) = self.read_state().rebuild else {
                break;
            };
            if r != role || first >= total {
                break;
            }
            let count = left.min(REBUILD_ROUND).min(total - first);
            match self.rebuild_round(exec, role, first, count)? {
                None => break,
                Some(done) => {
                    bytes += done;
                    left -= count;
                }
            }
        }
        let pos = self.read_state().rebuild.map_or(total, |(_, n)| n);
        Ok(Some(self.track(kind, pos, bytes, 0, 0)))
    }

    /// Reads, for each of `stripes`, the chunks of every member but `role` into `bufs` (n − 1
    /// consecutive buffers per stripe, in member order), as one batch. `Ok(false)` when a
    /// member failed (marked failed; the caller replans).
    pub(super) fn read_others<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &super::View,
        role: usize,
        stripes: &[StripeIdx],
        bufs: &mut [super::Scratch],
    ) -> Result<bool, RaidError> {
        let n = self.geo.members();
        let cb = self.geo.chunk_bytes();
        let mut ops = Vec::with_capacity(bufs.len());
        for (chunk, stripe) in bufs.chunks_mut(n - 1).zip(stripes) {
            let off = self.member_offset(self.geo.stripe_member_block(*stripe).0);
            for (other, b) in (0..n).filter(|&o| o != role).zip(chunk.iter_mut()) {
                let m = view
                    .member(other)
                    .ok_or(RaidError::State("usable member missing"))?;
                ops.push(MemberOp::read(MemberIdx(other), m, off, &mut b[..cb]));
            }
        }
        exec.execute(&mut ops);
        Ok(!self.fail_from(&mut ops)?)
    }

    /// Rebuilds stripes `first..first+count` of `role`. `Ok(None)` when the rebuild stopped
    /// (its target failed); otherwise the bytes written.
    fn rebuild_round<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        role: usize,
        first: u64,
        count: u64,
    ) -> Result<Option<u64>, RaidError> {
        let stripes: Vec<StripeIdx> = (first..first + count).map(StripeIdx).collect();
        let _guard = self.locks.lock(stripes.iter().copied());
        let n = self.geo.members();
        let cb = self.geo.chunk_bytes();
        for _ in 0..=n {
            let view = self.view()?;
            if view.rebuild != Some((role, first)) {
                return Ok(None);
            }
            let target = view
                .member(role)
                .ok_or(RaidError::State("rebuild target missing"))?;
            if stripes
                .iter()
                .any(|&s| (0..n).any(|o| o != role && !view.usable(o, s)))
            {
                return self.two_holes(&view);
            }
            let mut bufs: Vec<super::Scratch> = (0..stripes.len() * (n - 1))
                .map(|_| self.take_scratch())
                .collect();
            let mut outs: Vec<super::Scratch> =
                stripes.iter().map(|_| self.take_scratch()).collect();
            let read_ok = self.read_others(exec, &view, role, &stripes, &mut bufs)?;
            if !read_ok {
                self.give_scratch(bufs.into_iter().chain(outs));
                continue;
            }
            {
                let mut jobs: Vec<XorJob<'_>> = bufs
                    .chunks(n - 1)
                    .zip(outs.iter_mut())
                    .map(|(chunk, out)| XorJob {
                        srcs: chunk.iter().map(|b| &b[..cb]).collect(),
                        dst: &mut out[..cb],
                    })
                    .collect();
                self.parity.xor_batch(&mut jobs)?;
            }
            let failed = {
                let mut ops: Vec<MemberOp<'_>> = stripes
                    .iter()
                    .zip(outs.iter())
                    .map(|(s, out)| {
                        let off = self.member_offset(self.geo.stripe_member_block(*s).0);
                        MemberOp::write(MemberIdx(role), target, off, &out[..cb])
                    })
                    .collect();
                exec.execute(&mut ops);
                self.fail_from(&mut ops)?
            };
            self.give_scratch(bufs.into_iter().chain(outs));
            if failed {
                // The target failed: the rebuild was dropped (another spare may have started).
                return Ok(None);
            }
            let next = first + count;
            if next >= self.geo.stripes() || next / CHECKPOINT_STRIPES != first / CHECKPOINT_STRIPES
            {
                // What a persisted checkpoint covers must be on the target's media before any
                // member's superblock says so (a torn update may miss the target's own flush).
                if let Err(e) = target.flush() {
                    self.fail_member(MemberIdx(role), target, &e)?;
                    return Ok(None);
                }
            }
            let mut st = self.write_state();
            if next >= self.geo.stripes() {
                st.rebuild = None;
                st.slots[role].state = SlotState::Active;
                self.next_epoch(&mut st);
                // Whole again: every stripe was rewritten from the survivors.
                st.exposure = None;
                self.bitmap.unpin_all();
                self.persist(&mut st)?;
            } else {
                st.rebuild = Some((role, next));
                if next / CHECKPOINT_STRIPES != first / CHECKPOINT_STRIPES {
                    self.persist(&mut st)?;
                }
            }
            return Ok(Some(count * cb as u64));
        }
        Err(RaidError::State("rebuild kept failing on changing members"))
    }

    /// Runs the rebuild to the end at the throttle's rate (sleeping between steps).
    pub fn run_rebuild<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        throttle: &mut Throttle,
    ) -> Result<Option<SyncProgress>, RaidError> {
        let mut last = None;
        while let Some(p) = self.rebuild_step(exec, 16)? {
            let stripe_bytes = 16 * self.geo.chunk_bytes() as u64;
            // (The last step may be shorter; the throttle only needs to be approximately right.)
            let pause = throttle.account(stripe_bytes, Instant::now());
            last = Some(p);
            let st = self.read_state();
            if st.rebuild.is_none() && st.replace.is_none() {
                break;
            }
            drop(st);
            std::thread::sleep(pause);
        }
        Ok(last)
    }

    /// Runs a pending resync to the end at the throttle's rate (sleeping between steps).
    pub fn run_resync<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        throttle: &mut Throttle,
    ) -> Result<Option<SyncProgress>, RaidError> {
        let mut last = None;
        let step_bytes = 16 * (self.geo.chunk_bytes() * self.geo.members()) as u64;
        while let Some(p) = self.resync_step(exec, 16)? {
            last = Some(p);
            if p.finished {
                break;
            }
            std::thread::sleep(throttle.account(step_bytes, Instant::now()));
        }
        Ok(last)
    }

    /// Runs one whole scrub pass (check, or repair) at the throttle's rate.
    pub fn run_scrub<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        repair: bool,
        throttle: &mut Throttle,
    ) -> Result<SyncProgress, RaidError> {
        let step_bytes = 16 * (self.geo.chunk_bytes() * self.geo.members()) as u64;
        loop {
            let p = self.scrub_step(exec, 16, repair)?;
            if p.finished {
                return Ok(p);
            }
            std::thread::sleep(throttle.account(step_bytes, Instant::now()));
        }
    }

    /// Resyncs up to `max_stripes` stripes of dirty regions. `Ok(None)` when none is pending.
    pub fn resync_step<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        max_stripes: u64,
    ) -> Result<Option<SyncProgress>, RaidError> {
        let Some(mut next) = self.read_state().resync else {
            return Ok(None);
        };
        let total = self.geo.stripes();
        let region = self.bitmap.region_stripes();
        let dirty = self.bitmap.dirty_regions();
        let mut done = 0;
        let (mut mism, mut bytes) = (0, 0);
        while next < total && done < max_stripes.max(1) {
            let r = next / region;
            if dirty.binary_search(&r).is_err() {
                // Jump to the next dirty region.
                next = dirty.iter().find(|&&d| d > r).map_or(total, |d| d * region);
                continue;
            }
            let (m, skipped) = self.sync_stripe(exec, StripeIdx(next), true)?;
            mism += m;
            bytes += self.geo.chunk_bytes() as u64 * self.geo.members() as u64;
            next += 1;
            done += 1;
            // A stripe skipped because a member went missing was not resynced: its region
            // keeps its bit (it stays on record as possibly torn).
            if skipped > 0 {
                self.resync_gaps
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let gaps = self.resync_gaps.load(std::sync::atomic::Ordering::Relaxed);
            if (next % region == 0 || next == total) && !gaps {
                self.bitmap.clear_regions(self, &[r])?;
            }
        }
        let mut st = self.write_state();
        if next >= total {
            st.resync = None;
        } else {
            st.resync = Some(next);
        }
        self.persist(&mut st)?;
        drop(st);
        Ok(Some(self.track(SyncKind::Resync, next, bytes, mism, 0)))
    }

    /// Scrubs up to `max_stripes` stripes from where the last scrub step stopped.
    /// `repair` rewrites mismatched parity. Wraps to a new pass after the last stripe.
    pub fn scrub_step<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        max_stripes: u64,
        repair: bool,
    ) -> Result<SyncProgress, RaidError> {
        let kind = if repair {
            SyncKind::Repair
        } else {
            SyncKind::Check
        };
        let mut next = {
            let mut t = self.tracker();
            if t.kind != Some(kind) || t.scrub_next >= self.geo.stripes() {
                *t = Tracker {
                    kind: Some(kind),
                    ..Tracker::default()
                };
            }
            t.scrub_next
        };
        let (mut mism, mut skipped, mut bytes) = (0, 0, 0);
        for _ in 0..max_stripes.max(1) {
            if next >= self.geo.stripes() {
                break;
            }
            let (m, s) = self.sync_stripe(exec, StripeIdx(next), repair)?;
            mism += m;
            skipped += s;
            bytes += self.geo.chunk_bytes() as u64 * self.geo.members() as u64;
            next += 1;
        }
        self.tracker().scrub_next = next;
        Ok(self.track(kind, next, bytes, mism, skipped))
    }

    /// Reads a whole stripe, compares parity; rewrites it when `repair`.
    /// Returns (mismatches, skipped) as 0/1 counts.
    fn sync_stripe<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        stripe: StripeIdx,
        repair: bool,
    ) -> Result<(u64, u64), RaidError> {
        let _guard = self.locks.lock([stripe]);
        for _ in 0..=self.geo.members() {
            let view = self.view()?;
            let n = self.geo.members();
            if (0..n).any(|r| !view.usable(r, stripe)) {
                return Ok((0, 1));
            }
            let cb = self.geo.chunk_bytes();
            let off = self.member_offset(self.geo.stripe_member_block(stripe).0);
            let pm = self.geo.parity_member(stripe).0;
            let mut bufs: Vec<super::Scratch> = (0..n).map(|_| self.take_scratch()).collect();
            let ok = {
                let mut ops = Vec::with_capacity(n);
                for (r, b) in bufs.iter_mut().enumerate() {
                    let m = view
                        .member(r)
                        .ok_or(RaidError::State("usable member missing"))?;
                    ops.push(MemberOp::read(MemberIdx(r), m, off, &mut b[..cb]));
                }
                exec.execute(&mut ops);
                !self.fail_from(&mut ops)?
            };
            if !ok {
                self.give_scratch(bufs);
                continue;
            }
            let mut fresh = self.take_scratch();
            {
                let srcs: Vec<&[u8]> = bufs
                    .iter()
                    .enumerate()
                    .filter(|(r, _)| *r != pm)
                    .map(|(_, b)| &b[..cb])
                    .collect();
                self.parity.xor_gen(&srcs, &mut fresh[..cb])?;
            }
            let mismatch = fresh[..cb] != bufs[pm][..cb];
            let mut result = Ok((u64::from(mismatch), 0));
            if mismatch && repair {
                let m = view
                    .member(pm)
                    .ok_or(RaidError::State("usable member missing"))?;
                let mut ops = vec![MemberOp::write(MemberIdx(pm), m, off, &fresh[..cb])];
                if let Some(r) = view.mirror(pm, stripe) {
                    ops.push(MemberOp::write(MemberIdx(pm), r, off, &fresh[..cb]));
                }
                exec.execute(&mut ops);
                if let Err(e) = self.fail_from(&mut ops) {
                    result = Err(e);
                }
            }
            self.give_scratch(bufs.into_iter().chain([fresh]));
            return result;
        }
        Err(RaidError::State("sync kept failing on changing members"))
    }
}
