//! Hot replace (md's `want_replacement`): copy a role onto a new member while the old one
//! keeps serving it, then hand the role over — the array never loses its redundancy.
//!
//! Life cycle: [`Array::replace`] records the copy in every superblock (role, checkpoint 0,
//! the new member as [`Role::Replacement`]) → [`Array::rebuild_step`] /
//! [`Array::run_rebuild`] copy stripes in rounds of [`REBUILD_ROUND`] under their stripe
//! locks, reading the old member's chunks (where it returns an error, rebuilding them from
//! the other members) and writing them to the new member → after the last stripe, under the
//! state lock, the new member takes the role (superblocks updated, event counter bumped), the
//! old member's last superblock says [`Role::Former`] and the array lets go of it.
//!
//! Invariants:
//! - a copy runs only while every role is Active and no rebuild runs; the old member stays
//!   Active throughout, so the array never reports degraded because of a replace;
//! - the new member holds valid data for every stripe below `next`: a round writes its
//!   stripes, then advances `next` under their locks; every later write to the role below
//!   `next` (data, parity, resync and repair parity) is mirrored to it ([`super::View::mirror`]),
//!   and stripes at or above `next` are copied after any write to them;
//! - `next` is persisted every [`CHECKPOINT_STRIPES`] and each persist flushes the new
//!   member, so a persisted `next` never counts copies still in its cache; [`Array::flush`]
//!   flushes it too (mirrored writes). After a clean stop the copy resumes from the persisted
//!   `next`; after an unclean one from the first dirty bitmap region below it;
//! - the old member fails mid-copy: the new member becomes the role's rebuild target with
//!   the rebuild checkpoint at `next` (a normal rebuild goes on); the new member fails: the
//!   copy is dropped and the array is as before; another role fails: the copy is dropped and
//!   the new member becomes a spare, rebuilt into the failed role at once.
//!
//! [`REBUILD_ROUND`]: super::sync::REBUILD_ROUND
//! [`CHECKPOINT_STRIPES`]: super::sync::CHECKPOINT_STRIPES

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::{MemberError, RaidError};
use crate::geometry::{MemberIdx, StripeIdx};
use crate::io::{Executor, MemberOp};
use crate::member::{AlignedBuf, Member};
use crate::parity::XorJob;
use crate::superblock::{Role, SlotState, Uuid, SB_BYTES};

use super::sync::{SyncKind, SyncProgress, CHECKPOINT_STRIPES, REBUILD_ROUND};
use super::{Array, Inner, Replacing, Scratch, View};

/// A hot replace in progress, for status displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaceStatus {
    /// Role being copied.
    pub role: MemberIdx,
    /// Name of the member that holds the role (and keeps serving it) until the copy ends.
    pub old: Option<String>,
    /// Name of the member being filled.
    pub new: String,
    /// Stripes already copied (the new member holds them).
    pub copied_stripes: u64,
}

impl Array {
    /// Starts a hot replace of `role` by `member`: `member` is filled with the role's data
    /// while the current member keeps serving it (reads, parity), then takes the role over;
    /// drive the copy with [`Array::rebuild_step`] or [`Array::run_rebuild`] (progress:
    /// [`Array::rebuild_progress`], kind [`SyncKind::Replace`]). Refused while a role is
    /// failed or rebuilding (add a spare instead), while another replace runs, or when
    /// `member` is too small or already part of the array.
    pub fn replace(&self, role: MemberIdx, member: Arc<dyn Member>) -> Result<(), RaidError> {
        let need = self.meta.data_offset + self.geo.member_data_bytes();
        if member.size_bytes() < need {
            return Err(RaidError::MemberTooSmall {
                member: member.name().into(),
                size: member.size_bytes(),
            });
        }
        let uuid = Uuid::random()?;
        // Checked again under the lock below; checked first so that nothing is written to a
        // device the array already uses.
        if Self::holds_device(&self.read_state(), &member) {
            return Err(RaidError::State("the new member is already in the array"));
        }
        // Its bitmap area is read if it ever holds the role: start it from the current bits
        // (before the state lock: the bitmap's lock comes first).
        self.write_bitmap_copy(&*member)
            .map_err(|source| RaidError::Member { role, source })?;
        let mut st = self.write_state();
        if st.failed.is_some() {
            return Err(RaidError::State("array has failed"));
        }
        if role.0 >= st.slots.len() {
            return Err(RaidError::State("no such role"));
        }
        if st.replace.is_some() {
            return Err(RaidError::State("a replace is already running"));
        }
        if st.rebuild.is_some() || st.slots.iter().any(|s| s.state != SlotState::Active) {
            return Err(RaidError::State(
                "array is degraded: add a spare to rebuild the missing role first",
            ));
        }
        if Self::holds_device(&st, &member) {
            return Err(RaidError::State("the new member is already in the array"));
        }
        // Nothing in its log area may be replayed once it holds the role. Under the state
        // lock, after the check, so a concurrent use of the same device is refused first.
        super::ppl::clear_area(&self.meta, &*member).map_err(RaidError::NewMember)?;
        st.replace = Some(Replacing {
            role: role.0,
            member,
            uuid,
            next: 0,
        });
        self.persist(&mut st)?;
        if st.replace.is_none() {
            return Err(RaidError::State(
                "the new member failed its superblock write; replace abandoned",
            ));
        }
        Ok(())
    }

    /// Abandons the running hot replace (the old member keeps the role; the new member's
    /// superblock no longer matches the table, so assembly refuses it). `Ok(false)` when
    /// none was running.
    pub fn cancel_replace(&self) -> Result<bool, RaidError> {
        let mut st = self.write_state();
        if st.replace.take().is_none() {
            return Ok(false);
        }
        self.persist(&mut st)?;
        Ok(true)
    }

    /// The running hot replace, if any.
    pub fn replace_status(&self) -> Option<ReplaceStatus> {
        let st = self.read_state();
        let r = st.replace.as_ref()?;
        Some(ReplaceStatus {
            role: MemberIdx(r.role),
            old: st.slots[r.role]
                .member
                .as_ref()
                .map(|m| m.name().to_string()),
            new: r.member.name().to_string(),
            copied_stripes: r.next,
        })
    }

    /// Role held by the member named `name` (its path), if any.
    pub fn role_of(&self, name: &str) -> Option<MemberIdx> {
        self.read_state()
            .slots
            .iter()
            .position(|s| s.member.as_ref().is_some_and(|m| m.name() == name))
            .map(MemberIdx)
    }

    /// Copies up to `max_stripes` stripes of the hot replace of `role` (see
    /// [`Array::rebuild_step`]).
    pub(crate) fn replace_step<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        role: usize,
        max_stripes: u64,
    ) -> Result<SyncProgress, RaidError> {
        let total = self.geo.stripes();
        let mut bytes = 0;
        let mut left = max_stripes.max(1);
        while left > 0 {
            let first = match &self.read_state().replace {
                Some(r) if r.role == role && r.next < total => r.next,
                _ => break,
            };
            let count = left.min(REBUILD_ROUND).min(total - first);
            match self.replace_round(exec, role, first, count)? {
                None => break,
                Some(done) => {
                    bytes += done;
                    left -= count;
                }
            }
        }
        let (kind, pos) = {
            let st = self.read_state();
            match (&st.replace, st.rebuild) {
                (Some(r), _) if r.role == role => (SyncKind::Replace { role }, r.next),
                // The old member failed: the copy goes on as a rebuild.
                (_, Some((r, next))) if r == role => (SyncKind::Rebuild { role }, next),
                _ => (SyncKind::Replace { role }, total),
            }
        };
        Ok(self.track(kind, pos, bytes, 0, 0))
    }

    /// Copies stripes `first..first+count` of `role` onto its replacement. `Ok(None)` when
    /// the copy stopped (a member failed, the replace was dropped or turned into a rebuild);
    /// otherwise the bytes written.
    fn replace_round<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        role: usize,
        first: u64,
        count: u64,
    ) -> Result<Option<u64>, RaidError> {
        let stripes: Vec<StripeIdx> = (first..first + count).map(StripeIdx).collect();
        let _guard = self.locks.lock(stripes.iter().copied());
        let cb = self.geo.chunk_bytes();
        for _ in 0..=self.geo.members() {
            let view = self.view()?;
            let Some((r, target, next)) = view.replacement.clone() else {
                return Ok(None);
            };
            if r != role || next != first {
                return Ok(None);
            }
            let old = view
                .member(role)
                .filter(|_| view.states[role] == SlotState::Active)
                .ok_or(RaidError::State("replaced member missing"))?;
            let mut outs: Vec<Scratch> = stripes.iter().map(|_| self.take_scratch()).collect();
            let (bad, error) = {
                let mut ops: Vec<MemberOp<'_>> = stripes
                    .iter()
                    .zip(outs.iter_mut())
                    .map(|(s, o)| {
                        let off = self.member_offset(self.geo.stripe_member_block(*s).0);
                        MemberOp::read(MemberIdx(role), old, off, &mut o[..cb])
                    })
                    .collect();
                exec.execute(&mut ops);
                let mut bad = Vec::new();
                let mut error = None;
                for (k, op) in ops.iter_mut().enumerate() {
                    let e = match op.result.take() {
                        Some(Ok(())) => continue,
                        Some(Err(e)) => e,
                        None => MemberError::Io {
                            member: op.member.name().to_string(),
                            offset: op.offset,
                            source: std::io::Error::other("executor returned without running it"),
                        },
                    };
                    bad.push(k);
                    error.get_or_insert(e);
                }
                (bad, error)
            };
            if let Some(e) = error {
                // While a resync is pending, parity may be torn in dirty regions: nothing to
                // rebuild from safely here, so the old member's error counts as a failure
                // (the copy goes on as a rebuild).
                if self.read_state().resync.is_some() {
                    self.give_scratch(outs);
                    self.fail_member(MemberIdx(role), old, &e)?;
                    return Ok(None);
                }
                if !self.rebuild_chunks(exec, &view, role, &stripes, &bad, &mut outs)? {
                    // Another member failed (that drops the replace) or changed: replan.
                    self.give_scratch(outs);
                    continue;
                }
                self.counters
                    .replace_reconstructed
                    .fetch_add(bad.len() as u64, Ordering::Relaxed);
            }
            let failed = {
                let mut ops: Vec<MemberOp<'_>> = stripes
                    .iter()
                    .zip(outs.iter())
                    .map(|(s, out)| {
                        let off = self.member_offset(self.geo.stripe_member_block(*s).0);
                        MemberOp::write(MemberIdx(role), &*target, off, &out[..cb])
                    })
                    .collect();
                exec.execute(&mut ops);
                // A failed write to the new member drops the replace (see `fail_member`).
                self.fail_from(&mut ops)?
            };
            self.give_scratch(outs);
            if failed {
                return Ok(None);
            }
            let end = first + count;
            let last = end >= self.geo.stripes();
            if last || end / CHECKPOINT_STRIPES != first / CHECKPOINT_STRIPES {
                // What a persisted checkpoint (or the hand-over) covers must be on the new
                // member's media before any superblock says so: a torn update may miss its
                // own flush. At the end, also the bits set since the copy started (they went
                // to the old members only; bits set from here to the hand-over are still on
                // every other member, and assembly ORs all copies). Before the state lock:
                // the bitmap's lock comes first.
                let done = if last {
                    self.write_bitmap_copy(&*target)
                } else {
                    target.flush()
                };
                if let Err(e) = done {
                    self.fail_member(MemberIdx(role), &*target, &e)?;
                    return Ok(None);
                }
            }
            let mut st = self.write_state();
            let same = st.replace.as_ref().is_some_and(|r| {
                r.role == role && r.next == first && Arc::ptr_eq(&r.member, &target)
            });
            if !same {
                return Ok(None);
            }
            if last {
                self.hand_over(&mut st)?;
            } else {
                if let Some(r) = st.replace.as_mut() {
                    r.next = end;
                }
                if end / CHECKPOINT_STRIPES != first / CHECKPOINT_STRIPES {
                    self.persist(&mut st)?;
                }
            }
            return Ok(Some(count * cb as u64));
        }
        Err(RaidError::State("replace kept failing on changing members"))
    }

    /// Rebuilds the chunks of `role` in `stripes[k]` for every `k` in `which` into `outs[k]`
    /// from the other members. `Ok(false)` when a member failed (the caller replans).
    fn rebuild_chunks<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        view: &View,
        role: usize,
        stripes: &[StripeIdx],
        which: &[usize],
        outs: &mut [Scratch],
    ) -> Result<bool, RaidError> {
        let n = self.geo.members();
        let cb = self.geo.chunk_bytes();
        if which
            .iter()
            .any(|&k| (0..n).any(|o| o != role && !view.usable(o, stripes[k])))
        {
            return self.two_holes(view);
        }
        let mut bufs: Vec<Scratch> = (0..which.len() * (n - 1))
            .map(|_| self.take_scratch())
            .collect();
        let picked: Vec<StripeIdx> = which.iter().map(|&k| stripes[k]).collect();
        let ok = self.read_others(exec, view, role, &picked, &mut bufs)?;
        if ok {
            let mut jobs: Vec<XorJob<'_>> = Vec::with_capacity(which.len());
            let mut rest: &mut [Scratch] = outs;
            let mut base = 0;
            for (chunk, &k) in bufs.chunks(n - 1).zip(which) {
                // `which` is increasing: split off `outs[k]` without aliasing.
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(k - base);
                let (out, tail) = tail.split_at_mut(1);
                rest = tail;
                base = k + 1;
                jobs.push(XorJob {
                    srcs: chunk.iter().map(|b| &b[..cb]).collect(),
                    dst: &mut out[0][..cb],
                });
            }
            self.parity.xor_batch(&mut jobs)?;
        }
        self.give_scratch(bufs);
        Ok(ok)
    }

    /// The copy is complete: the new member takes the role. Called under the state lock
    /// with the last stripes' locks held.
    fn hand_over(&self, st: &mut Inner) -> Result<(), RaidError> {
        let Some(rep) = st.replace.take() else {
            return Ok(());
        };
        let slot = &mut st.slots[rep.role];
        let old = slot.member.replace(rep.member);
        let old_uuid = std::mem::replace(&mut slot.uuid, rep.uuid);
        self.persist(st)?;
        // Tell the old member it no longer holds the role. Best effort: every current
        // member's table already names its successor, so assembly refuses it either way.
        if let Some(old) = old {
            let mut buf = AlignedBuf::new(SB_BYTES, 4096);
            let sb = self.superblock(st, Role::Former(rep.role), old_uuid);
            buf.copy_from_slice(&sb.encode());
            let _ = old.write_at(0, &buf).and_then(|()| old.flush());
        }
        Ok(())
    }

    /// Writes the in-memory write-intent bitmap to `member`'s bitmap area.
    fn write_bitmap_copy(&self, member: &dyn Member) -> Result<(), MemberError> {
        let mut area = AlignedBuf::new(self.meta.bitmap_bytes as usize, 4096);
        for r in self.bitmap.dirty_regions() {
            if let Some(b) = area.get_mut((r / 8) as usize) {
                *b |= 1 << (r % 8);
            }
        }
        member.write_at(self.meta.bitmap_offset, &area)?;
        member.flush()
    }
}
