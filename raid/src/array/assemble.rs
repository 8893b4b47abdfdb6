//! Creating an array and assembling one from its members' superblocks.
//!
//! Assembly takes members in any order. It reads every superblock and refuses, each with a
//! [`Refused`] naming the member and the reason: unreadable or invalid superblocks, members
//! of another array (foreign), members more than one event behind the newest (stale —
//! they missed updates; exactly one behind is a torn last update, accepted unless the
//! table says otherwise), members the newest member table marks failed or
//! whose identity does not match the table (replaced), duplicates, and geometry mismatches.
//! The newest superblock's member table is the truth; roles it lists as active but that no
//! acceptable member holds become failed. Two or more missing roles: the array does not
//! start, and the error lists every refusal.
//!
//! Hot replace: a member whose superblock says it is the replacement the newest table
//! records resumes its copy — from the recorded checkpoint after a clean stop, from the first
//! dirty bitmap region below it after an unclean one (a mirrored write there may have reached
//! only one of the two). If the replaced member is missing, the replacement becomes the
//! role's rebuild target from that point instead; if any other role is missing, it becomes a
//! spare. A member whose superblock says [`Role::Former`] (it handed its role over), or a
//! replacement the table no longer records, is refused as replaced.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{RaidError, RefuseReason, Refused};
use crate::geometry::Geometry;
use crate::member::{AlignedBuf, Member};
use crate::parity::ParityEngine;
use crate::superblock::{Role, SlotState, Superblock, Uuid, SB_BYTES};

use super::{bitmap, locks, Array, ArrayConfig, Counters, Inner, MetaLayout, Slot};

/// Options for [`Array::assemble_with`].
#[derive(Debug, Clone, Default)]
pub struct AssembleOptions {
    /// Assemble only this array (otherwise the one most candidates belong to).
    pub expect: Option<Uuid>,
    /// Start even when the array stopped uncleanly and is now missing a member that no
    /// partial-parity log covers (md's `start_dirty_degraded`): blocks of the missing member
    /// in dirty regions may then reconstruct wrong. Off by default: assembly refuses.
    pub start_dirty_degraded: bool,
}

/// Result of [`Array::assemble`].
#[derive(Debug)]
pub struct Assembled {
    /// The running array.
    pub array: Array,
    /// Members not taken, and why.
    pub refused: Vec<Refused>,
    /// The array stopped uncleanly; [`Array::resync_step`] must run over the dirty regions.
    pub resync_pending: bool,
    /// It stopped uncleanly and a member is missing that no log covers: stripes written at
    /// the time may have torn parity (the RAID-5 write hole; see README). Only possible with
    /// [`AssembleOptions::start_dirty_degraded`] — or when an earlier start accepted such a
    /// stop and no rebuild has run since (its regions stay exposed, kept in the bitmap).
    pub write_hole_exposed: bool,
    /// With `write_hole_exposed`: why, and the regions that may be torn (also
    /// [`Array::exposure`] until a rebuild rewrote them).
    pub exposure: Option<super::Exposure>,
    /// Log entries replayed (stripes whose parity was recomputed from the log).
    pub replayed: u64,
    /// Rows of the missing member that an interrupted write was changing together with
    /// another chunk of the same rows, logged while that member was present (policy
    /// "always"): no entry holds their new contents, so they may read back as neither
    /// version (md's partial-parity log has the same limit). Completed writes are whole.
    pub unrestorable_rows: u64,
}

impl Array {
    /// Creates a new array over `members` (roles in the given order) with hot `spares`,
    /// writing a superblock to each. Existing data on them is ignored.
    pub fn create(
        members: Vec<Arc<dyn Member>>,
        spares: Vec<Arc<dyn Member>>,
        config: &ArrayConfig,
        parity: Arc<dyn ParityEngine>,
    ) -> Result<Array, RaidError> {
        let meta0 = MetaLayout::new(
            &Geometry::new(
                members.len(),
                config.chunk,
                config.block,
                u64::from(config.chunk.bytes()),
            )?,
            config.bitmap_region_stripes,
        );
        let mut smallest = u64::MAX;
        for m in members.iter().chain(&spares) {
            if m.size_bytes() < meta0.data_offset + u64::from(config.chunk.bytes()) {
                return Err(RaidError::MemberTooSmall {
                    member: m.name().into(),
                    size: m.size_bytes(),
                });
            }
        }
        for m in &members {
            smallest = smallest.min(m.size_bytes() - meta0.data_offset);
        }
        let geo = Geometry::new(members.len(), config.chunk, config.block, smallest)?;
        let meta = MetaLayout::new(&geo, config.bitmap_region_stripes);
        for s in &spares {
            if s.size_bytes() < meta.data_offset + geo.member_data_bytes() {
                return Err(RaidError::MemberTooSmall {
                    member: s.name().into(),
                    size: s.size_bytes(),
                });
            }
        }
        let uuid = match config.uuid {
            Some(u) => u,
            None => Uuid::random()?,
        };
        let mut slots = Vec::with_capacity(members.len());
        for m in members {
            slots.push(Slot {
                member: Some(m),
                uuid: Uuid::random()?,
                state: SlotState::Active,
                gone: None,
            });
        }
        let mut spare_list = Vec::with_capacity(spares.len());
        for s in spares {
            spare_list.push((s, Uuid::random()?));
        }
        let resync = (!config.assume_clean).then_some(0);
        let regions = geo.stripes().div_ceil(meta.bitmap_region_stripes);
        let bits = if config.assume_clean {
            vec![0u8; regions.div_ceil(8) as usize]
        } else {
            let mut b = vec![0xFFu8; regions.div_ceil(8) as usize];
            if regions % 8 != 0 {
                if let Some(last) = b.last_mut() {
                    *last = (1u8 << (regions % 8)) - 1;
                }
            }
            b
        };
        // Zero the log area of every device: nothing an earlier array (even one created
        // with the same UUID) left there may be replayed as this array's.
        for (i, s) in slots.iter().enumerate() {
            if let Some(m) = &s.member {
                super::ppl::clear_area(&meta, &**m).map_err(|e| RaidError::Member {
                    role: crate::geometry::MemberIdx(i),
                    source: e,
                })?;
            }
        }
        for (m, _) in &spare_list {
            super::ppl::clear_area(&meta, &**m).map_err(RaidError::NewMember)?;
        }
        // Lay down the bitmap area on every member.
        let mut area = AlignedBuf::new(meta.bitmap_bytes as usize, 4096);
        area[..bits.len()].copy_from_slice(&bits);
        for m in slots
            .iter()
            .filter_map(|s| s.member.as_ref())
            .chain(spare_list.iter().map(|(m, _)| m))
        {
            m.write_at(meta.bitmap_offset, &area)
                .map_err(|e| RaidError::Member {
                    role: crate::geometry::MemberIdx(0),
                    source: e,
                })?;
        }
        let inner = Inner {
            slots,
            spares: spare_list,
            events: 0,
            dirty: resync.is_some(),
            failed: None,
            rebuild: None,
            resync,
            ppl_epoch: 0,
            ppl_off: false,
            ppl_uncovered: false,
            ppl_always: config.write_hole == super::WriteHolePolicy::Always,
            ppl_replay_from: 0,
            ppl_always_since: 0,
            exposure: None,
            replace: None,
        };
        let array = Array::from_parts(geo, meta, uuid, parity, inner, Some(bits));
        {
            let mut st = array.write_state();
            array.persist(&mut st)?;
        }
        Ok(array)
    }

    fn from_parts(
        geo: Geometry,
        meta: MetaLayout,
        uuid: Uuid,
        parity: Arc<dyn ParityEngine>,
        inner: Inner,
        bits: Option<Vec<u8>>,
    ) -> Array {
        let dirty = inner.dirty;
        let count = super::scratch_count(geo.chunk_bytes());
        let bufs = crate::sys::buf::BufferArena::with_buffers(count, geo.chunk_bytes(), 4096)
            .unwrap_or_default();
        let scratch_arena = match bufs.first() {
            Some(b) => b.arena().clone(),
            None => crate::sys::buf::BufferArena::empty(),
        };
        let pool: Vec<super::Scratch> = bufs.into_iter().map(super::Scratch::Arena).collect();
        Array {
            ppl: super::ppl::PplLayout::new(&meta, &geo),
            ppl_locks: locks::StripeLocks::default(),
            inflight: Default::default(),
            cover_due: AtomicBool::new(false),
            flush_gates: (0..geo.members()).map(|_| Default::default()).collect(),
            resync_gaps: AtomicBool::new(false),
            torn: std::sync::atomic::AtomicUsize::new(0),
            bitmap: bitmap::Bitmap::new(&meta, geo.stripes(), bits),
            geo,
            meta,
            uuid,
            parity,
            state: RwLock::new(inner),
            shared_view: Mutex::new(None),
            locks: locks::StripeLocks::default(),
            dirty_flag: AtomicBool::new(dirty),
            dirty_wanted: AtomicBool::new(false),
            dirty_refused: AtomicBool::new(false),
            scratch: Mutex::new(pool),
            scratch_arena,
            log_scratch: Mutex::new(Vec::new()),
            counters: Counters::default(),
            tracker: Default::default(),
        }
    }

    /// Assembles an array from `candidates` (any order, spares included). With `expect`,
    /// only that array is assembled; otherwise the array most candidates belong to.
    pub fn assemble(
        candidates: Vec<Arc<dyn Member>>,
        expect: Option<Uuid>,
        parity: Arc<dyn ParityEngine>,
    ) -> Result<Assembled, RaidError> {
        let options = AssembleOptions {
            expect,
            start_dirty_degraded: false,
        };
        Self::assemble_with(candidates, &options, parity)
    }

    /// [`Array::assemble`] with every option.
    pub fn assemble_with(
        candidates: Vec<Arc<dyn Member>>,
        options: &AssembleOptions,
        parity: Arc<dyn ParityEngine>,
    ) -> Result<Assembled, RaidError> {
        let expect = options.expect;
        let mut refused = Vec::new();
        let refuse = |refused: &mut Vec<Refused>, m: &Arc<dyn Member>, reason| {
            refused.push(Refused {
                member: m.name().to_string(),
                reason,
            });
        };
        let mut found: Vec<(Arc<dyn Member>, Superblock)> = Vec::new();
        for m in candidates {
            let mut buf = AlignedBuf::new(SB_BYTES, 4096);
            match m.read_at(0, &mut buf) {
                Err(e) => refuse(&mut refused, &m, RefuseReason::Unreadable(e)),
                Ok(()) => match Superblock::decode(&buf) {
                    Err(e) => refuse(&mut refused, &m, RefuseReason::BadSuperblock(e)),
                    Ok(sb) => found.push((m, sb)),
                },
            }
        }
        let uuid = match expect {
            Some(u) => u,
            None => {
                let mut counts: Vec<(Uuid, usize)> = Vec::new();
                for (_, sb) in &found {
                    match counts.iter_mut().find(|(u, _)| *u == sb.array_uuid) {
                        Some((_, c)) => *c += 1,
                        None => counts.push((sb.array_uuid, 1)),
                    }
                }
                counts.sort_by_key(|c| std::cmp::Reverse(c.1));
                match counts.first() {
                    Some((u, _)) => *u,
                    None => {
                        return Err(RaidError::Assemble {
                            reason: "no member has a superblock".into(),
                            refused,
                        })
                    }
                }
            }
        };
        let mut mine = Vec::new();
        for (m, sb) in found {
            if sb.array_uuid == uuid {
                mine.push((m, sb));
            } else {
                refuse(
                    &mut refused,
                    &m,
                    RefuseReason::Foreign {
                        expected: uuid,
                        found: sb.array_uuid,
                    },
                );
            }
        }
        let Some(newest) = mine
            .iter()
            .map(|(_, sb)| sb)
            .max_by_key(|sb| sb.events)
            .cloned()
        else {
            return Err(RaidError::Assemble {
                reason: format!("no member of array {uuid}"),
                refused,
            });
        };
        let geo = Geometry::new(
            newest.members,
            newest.chunk,
            newest.block,
            newest.member_data_bytes,
        )?;
        let meta = MetaLayout {
            data_offset: newest.data_offset,
            bitmap_offset: newest.bitmap_offset,
            bitmap_bytes: newest.bitmap_bytes,
            bitmap_region_stripes: newest.bitmap_region_stripes.max(1),
            ppl_offset: newest.ppl_offset,
            ppl_bytes: newest.ppl_bytes,
        };
        let regions = geo.stripes().div_ceil(meta.bitmap_region_stripes);
        if regions.div_ceil(8) > u64::from(meta.bitmap_bytes) {
            return Err(RaidError::Assemble {
                reason: format!(
                    "superblock's bitmap ({} bytes) cannot cover {regions} regions",
                    meta.bitmap_bytes
                ),
                refused,
            });
        }
        let mut slots: Vec<Slot> = (0..newest.members)
            .map(|r| Slot {
                member: None,
                uuid: newest.role_uuids[r],
                state: newest.role_states[r],
                gone: None,
            })
            .collect();
        let mut spares = Vec::new();
        let mut replacement: Option<Arc<dyn Member>> = None;
        let mut names: Vec<Option<String>> = vec![None; newest.members];
        let mut any_dirty = newest.dirty;
        for (m, sb) in mine {
            let same_geometry = sb.members == newest.members
                && sb.chunk == newest.chunk
                && sb.block == newest.block
                && sb.data_offset == newest.data_offset
                && sb.member_data_bytes == newest.member_data_bytes;
            if !same_geometry {
                refuse(&mut refused, &m, RefuseReason::GeometryMismatch);
                continue;
            }
            // One update behind is a torn update (power lost while superblocks were being
            // written); the member table decides below whether the member missed something
            // that matters (it was marked failed or replaced). Further behind is stale.
            if sb.events + 1 < newest.events {
                refuse(
                    &mut refused,
                    &m,
                    RefuseReason::Stale {
                        events: sb.events,
                        current: newest.events,
                    },
                );
                continue;
            }
            if m.size_bytes() < meta.data_offset + geo.member_data_bytes() {
                refuse(&mut refused, &m, RefuseReason::GeometryMismatch);
                continue;
            }
            let was_dirty = sb.dirty;
            // Torn update: the newest table already gives this member a role that its own
            // superblock (one behind) does not show yet — a replacement handed the role, or
            // a spare or replacement taken to rebuild a failed role. It holds that role. (The
            // update that first names a rebuild target records checkpoint 0, and a hand-over
            // flushes the replacement before any superblock says so, so nothing is trusted
            // that the member may not hold.)
            let owner_of = slots.iter().position(|s| s.uuid == sb.member_uuid);
            let role = match (sb.role, owner_of) {
                (Role::Replacement(_) | Role::Spare, Some(k)) => Role::Active(k),
                (other, _) => other,
            };
            match role {
                Role::Spare => spares.push((m, sb.member_uuid)),
                Role::Replacement(r)
                    if replacement.is_none()
                        && newest
                            .replace
                            .is_some_and(|rec| rec.role == r && rec.member == sb.member_uuid) =>
                {
                    replacement = Some(m);
                }
                Role::Replacement(r) | Role::Former(r) => refuse(
                    &mut refused,
                    &m,
                    RefuseReason::Replaced {
                        role: r,
                        owner: slots[r].uuid,
                        found: sb.member_uuid,
                    },
                ),
                Role::Active(r) => {
                    if slots[r].state == SlotState::Failed {
                        refuse(&mut refused, &m, RefuseReason::MarkedFailed { role: r });
                    } else if slots[r].uuid != sb.member_uuid {
                        refuse(
                            &mut refused,
                            &m,
                            RefuseReason::Replaced {
                                role: r,
                                owner: slots[r].uuid,
                                found: sb.member_uuid,
                            },
                        );
                    } else if let Some(other) = &names[r] {
                        let other = other.clone();
                        refuse(&mut refused, &m, RefuseReason::Duplicate { role: r, other });
                    } else {
                        names[r] = Some(m.name().to_string());
                        slots[r].member = Some(m);
                        any_dirty |= was_dirty;
                    }
                }
            }
        }
        // The hot replace recorded in the newest table, if its new member is here.
        let mut replace = None;
        let mut rebuild = newest.rebuild;
        let mut ppl_epoch = newest.ppl_epoch;
        if let (Some(rec), Some(m)) = (newest.replace, replacement) {
            let others_ok = rebuild.is_none()
                && (0..slots.len()).all(|r| {
                    r == rec.role
                        || (slots[r].member.is_some() && slots[r].state == SlotState::Active)
                });
            let r = rec.role;
            if !others_ok {
                spares.push((m, rec.member));
            } else if slots[r].member.is_some() && slots[r].state == SlotState::Active {
                replace = Some(super::Replacing {
                    role: r,
                    member: m,
                    uuid: rec.member,
                    next: rec.next,
                });
            } else {
                // The replaced member is gone: the copy goes on as a rebuild.
                slots[r].member = Some(m);
                slots[r].uuid = rec.member;
                slots[r].state = SlotState::Rebuilding;
                rebuild = Some((r, rec.next));
                ppl_epoch += 1;
            }
        }
        // Roles no device holds now: why.
        for (r, s) in slots.iter_mut().enumerate() {
            if s.member.is_none() {
                s.gone = Some(super::GoneMember {
                    device: None,
                    reason: if newest.role_states[r] == SlotState::Active {
                        super::GoneReason::MissingAtAssembly
                    } else {
                        super::GoneReason::FailedBeforeStop
                    },
                });
            }
        }
        // The role that was already missing when the array stopped (PPL entries cover it).
        let down_at_stop: Vec<usize> = (0..slots.len())
            .filter(|&r| newest.role_states[r] != SlotState::Active)
            .collect();
        for (r, slot) in slots.iter_mut().enumerate() {
            if slot.member.is_none() && slot.state != SlotState::Failed {
                slot.state = SlotState::Failed;
                ppl_epoch += 1;
                if rebuild.is_some_and(|(rr, _)| rr == r) {
                    rebuild = None;
                }
            }
        }
        let down: Vec<usize> = (0..slots.len())
            .filter(|&r| slots[r].state != SlotState::Active)
            .collect();
        if down.len() >= 2 {
            return Err(RaidError::Assemble {
                reason: format!("roles {down:?} are missing or failed; RAID-5 survives one"),
                refused,
            });
        }
        let degraded = !down.is_empty();
        let mut bits = vec![
            0u8;
            geo.stripes()
                .div_ceil(meta.bitmap_region_stripes)
                .div_ceil(8) as usize
        ];
        for m in slots.iter().filter_map(|s| s.member.as_ref()) {
            if let Ok(b) = bitmap::read_bits(&**m, &meta, bits.len()) {
                for (x, y) in bits.iter_mut().zip(b) {
                    *x |= y;
                }
            }
        }
        let dirty = any_dirty;
        if dirty {
            // A write mirrored to the hot-replace member may have reached only one of the two
            // (or its cache) before the stop: copy again from the first dirty region.
            let first_dirty = (0..bits.len() * 8)
                .find(|&i| bits[i / 8] & (1 << (i % 8)) != 0)
                .map_or(u64::MAX, |i| i as u64 * meta.bitmap_region_stripes);
            if let Some(rep) = replace.as_mut() {
                rep.next = rep.next.min(first_dirty);
            }
            if newest
                .replace
                .is_some_and(|rec| rebuild.is_some_and(|(r, _)| r == rec.role))
            {
                rebuild = rebuild.map(|(r, c)| (r, c.min(first_dirty)));
            }
        }
        let resync_pending = dirty && !degraded;
        let mut write_hole_exposed = dirty && degraded;
        let ppl_layout = super::ppl::PplLayout::new(&meta, &geo);
        // Policy "always" logged healthy writes too: its entries cover a member lost at this
        // assembly, and rounds of older epochs still writing at the stop.
        let always = newest.ppl_always && !newest.legacy;
        let same_loss = ppl_epoch == newest.ppl_epoch && down_at_stop.len() == 1;
        // Why the log cannot repair this stop, if it cannot.
        let uncovered = if ppl_layout.is_none() {
            Some("the chunk is too large for the log")
        } else if newest.ppl_off {
            Some("the log was switched off")
        } else if newest.ppl_uncovered {
            Some("writes planned before the log covered them were in flight")
        } else if !always && !same_loss {
            Some("the set of missing roles changed at this assembly, and healthy writes are not logged under write_hole = \"degraded\"")
        } else {
            None
        };
        let mut replayed = 0;
        let mut torn_rows = 0;
        // Replays the log's entries of `epochs` with role `missing` gone (`usize::MAX`: none).
        let replay = |epochs: std::ops::RangeInclusive<u64>, missing: usize, valid_below: u64| {
            let members: Vec<Option<Arc<dyn Member>>> =
                slots.iter().map(|s| s.member.clone()).collect();
            super::ppl::recover(
                &geo,
                &meta,
                uuid,
                newest.legacy,
                &members,
                epochs,
                missing,
                valid_below,
                &*parity,
            )
        };
        if write_hole_exposed && ppl_layout.is_some() && !newest.ppl_off && (always || same_loss) {
            // Replay every entry that is the last write to its stripe: under "degraded" those
            // of the epoch at the stop (if the same role was missing then), under "always"
            // those since the oldest epoch with a round in flight. Even when the stop is not
            // covered, this repairs the stripes those entries name.
            if let [missing] = down[..] {
                let valid_below = rebuild.filter(|(r, _)| *r == missing).map_or(0, |(_, c)| c);
                let from = if always {
                    newest.ppl_replay_from
                } else {
                    newest.ppl_epoch
                };
                let r = replay(from..=newest.ppl_epoch, missing, valid_below)?;
                replayed = r.repaired;
                torn_rows = r.unrecoverable;
                if uncovered.is_none() {
                    write_hole_exposed = false;
                }
            }
        }
        if resync_pending
            && always
            && ppl_layout.is_some()
            && !newest.ppl_off
            && !newest.ppl_uncovered
        {
            // Every member present, policy "always": the log makes the interrupted writes'
            // stripes consistent now, as md's PPL does, so a member lost before the resync
            // reaches them cannot reconstruct from torn parity. The resync still runs.
            replayed = replay(newest.ppl_replay_from..=newest.ppl_epoch, usize::MAX, 0)?.repaired;
        }
        // A rebuild target's log area may hold entries of stripes above the checkpoint it
        // resumes from (written while the lost checkpoint was higher): later writes there
        // skip its slots (its parity is not usable above the checkpoint), so those entries
        // could go stale, and a later recovery under "always" that looks at older epochs
        // would replay them. Every entry there has served by now: clear the area.
        if let Some((r, _)) = rebuild {
            if let Some(m) = slots[r].member.as_ref() {
                super::ppl::clear_area(&meta, &**m).map_err(|e| RaidError::Member {
                    role: crate::geometry::MemberIdx(r),
                    source: e,
                })?;
            }
        }
        let dirty_regions = bits.iter().map(|b| b.count_ones() as u64).sum::<u64>();
        if write_hole_exposed && dirty_regions == 0 {
            // No region was being written: nothing can be torn.
            write_hole_exposed = false;
        }
        let reason = uncovered
            .unwrap_or("the set of missing roles changed at this assembly")
            .to_string();
        if write_hole_exposed && !options.start_dirty_degraded {
            return Err(RaidError::WriteHoleExposed {
                missing: down,
                dirty_regions,
                reason,
                refused,
            });
        }
        // An earlier start accepted an exposed stop and no rebuild has run since: its regions
        // are still the set bits (kept set while exposed), and still exposed.
        let was_exposed = newest.ppl_exposed && degraded;
        let exposed_regions: Vec<u64> = (0..bits.len() as u64 * 8)
            .filter(|&i| bits[i as usize / 8] & (1 << (i % 8)) != 0)
            .filter(|&i| i * meta.bitmap_region_stripes < geo.stripes())
            .collect();
        let exposure = (write_hole_exposed || was_exposed).then(|| {
            let per = meta.bitmap_region_stripes;
            let mut stripes: Vec<std::ops::Range<u64>> = Vec::new();
            for &i in &exposed_regions {
                let (a, b) = (i * per, ((i + 1) * per).min(geo.stripes()));
                match stripes.last_mut() {
                    Some(r) if r.end == a => r.end = b,
                    _ => stripes.push(a..b),
                }
            }
            let sd = geo.stripe_data_blocks();
            super::Exposure {
                reason: if write_hole_exposed {
                    reason
                } else {
                    "an earlier start accepted an unclean stop no log covered, and no rebuild has \
                     run since"
                        .to_string()
                },
                missing: down.clone(),
                blocks: stripes.iter().map(|r| r.start * sd..r.end * sd).collect(),
                stripes,
            }
        });
        let write_hole_exposed = exposure.is_some();
        let inner = Inner {
            slots,
            spares,
            events: newest.events,
            dirty,
            failed: None,
            rebuild,
            resync: if resync_pending { Some(0) } else { None },
            ppl_epoch,
            ppl_off: newest.ppl_off,
            // Nothing is in flight at assembly.
            ppl_uncovered: false,
            ppl_always: newest.ppl_always,
            ppl_replay_from: ppl_epoch,
            ppl_always_since: ppl_epoch,
            exposure: exposure.clone(),
            replace,
        };
        let array = Array::from_parts(geo, meta, uuid, parity, inner, Some(bits));
        if exposure.is_some() {
            array.bitmap.pin(&exposed_regions);
        }
        {
            let mut st = array.write_state();
            Array::take_spare(&mut st);
            array.persist(&mut st)?;
        }
        Ok(Assembled {
            array,
            refused,
            resync_pending,
            write_hole_exposed,
            exposure,
            replayed,
            unrestorable_rows: torn_rows,
        })
    }
}
