//! The RAID-5 array: shared state, member failure handling, superblock persistence.
//!
//! Invariants:
//! - at most one role is not `Active` (Failed, or Rebuilding above its checkpoint) while the
//!   array runs; a second loss stops the array (`failed` is set) and every later request
//!   returns [`RaidError::ArrayFailed`] — it never returns reconstructed data from two holes;
//! - writes hold the locks of every stripe they touch (acquired all at once, so no deadlock)
//!   from planning until their member writes complete; degraded reads, rebuild, resync and
//!   scrub hold the lock of the stripe they reconstruct; healthy reads take no lock;
//! - the rebuild checkpoint only advances while its stripe's lock is held, so a request that
//!   holds a stripe lock sees a consistent "is this member valid here" answer;
//! - superblock updates happen under the state write lock, each one bumps the event counter
//!   and goes to every present member (failed members are not written, so they go stale);
//! - a write-intent bitmap bit is durable on every member before any write to its region
//!   starts (see [`bitmap`]);
//! - a hot replace ([`replace`]) runs only while every role is Active: its new member gets
//!   every write to the role in stripes already copied ([`View::mirror`]), so the role keeps
//!   its redundancy until the new member takes it over.
//!
//! Sub-modules: [`read`] and [`write`] (the I/O paths), [`assemble`] (create and assemble),
//! [`sync`] (rebuild, resync, scrub), [`replace`] (hot replace), [`bitmap`], [`locks`].

pub mod assemble;
pub mod bitmap;
pub mod flush;
pub mod locks;
pub mod ppl;
pub mod read;
pub mod read_task;
pub mod replace;
pub mod sync;
pub mod task;
pub mod write;

use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{MemberError, RaidError};
use crate::geometry::{BlockSize, ChunkSize, Geometry, MemberIdx, StripeIdx};
use crate::member::{AlignedBuf, Member};
use crate::parity::ParityEngine;
use crate::superblock::{
    ReplaceRecord, Role, SlotState, Superblock, Uuid, DEFAULT_DATA_OFFSET, SB_BYTES,
};
use crate::sys::buf::{BufferArena, IoBuf};

pub use assemble::{AssembleOptions, Assembled};
pub use read::DirectRead;
pub use read_task::{ReadNext, ReadStart, ReadTask};
pub use replace::ReplaceStatus;
pub use sync::{SyncKind, SyncProgress, Throttle};
pub use task::{WriteNext, WriteStart, WriteTask};
pub use write::ROUND_STRIPES;

/// An engine scratch buffer (one chunk): from the registered arena while it lasts, else
/// from the heap.
#[derive(Debug)]
pub(crate) enum Scratch {
    Arena(IoBuf),
    Heap(AlignedBuf),
}

impl std::ops::Deref for Scratch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Scratch::Arena(b) => b,
            Scratch::Heap(b) => b,
        }
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Scratch::Arena(b) => b,
            Scratch::Heap(b) => b,
        }
    }
}

/// A RAID engine scratch buffer lent to a caller's ring with the operations that use it
/// ([`crate::RingRequest::scratch`]); opaque outside the engine.
#[derive(Debug)]
pub struct EngineBuf(pub(crate) Scratch);

impl std::ops::Deref for EngineBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for EngineBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// Scratch buffers kept in the arena: about 16 MiB worth, 8 to 256 of them.
pub(crate) fn scratch_count(chunk: usize) -> usize {
    ((16usize << 20) / chunk.max(1)).clamp(8, 256)
}

/// Parameters for creating an array.
#[derive(Debug, Clone)]
pub struct ArrayConfig {
    /// Chunk size (default 64 KiB).
    pub chunk: ChunkSize,
    /// Block size (default 4096).
    pub block: BlockSize,
    /// Array UUID; random when `None`.
    pub uuid: Option<Uuid>,
    /// Stripes per write-intent bitmap bit; `None` picks about 64 MiB of array data per bit
    /// (md's default bitmap chunk), more if the bitmap area would overflow.
    pub bitmap_region_stripes: Option<u64>,
    /// The members' data areas are known to be zero (new files, trimmed drives), so parity is
    /// already consistent. Otherwise the array starts with a full resync pending.
    pub assume_clean: bool,
    /// When writes carry partial-parity-log entries (see [`WriteHolePolicy`]).
    pub write_hole: WriteHolePolicy,
}

/// When the partial-parity log records writes (md's `consistency-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteHolePolicy {
    /// Only while the array is degraded (the default): no cost while healthy. A crash while
    /// healthy together with a member lost at the restart, or a member failing while writes
    /// planned healthy are still in flight and then a crash, leaves the dirty regions exposed
    /// (assembly refuses unless told to accept).
    #[default]
    Degraded,
    /// Every write that does not cover a whole stripe, healthy or degraded: after any single
    /// crash plus one missing member, every completed write reads back.
    Always,
}

impl WriteHolePolicy {
    /// The configuration word: `"degraded"` or `"always"`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteHolePolicy::Degraded => "degraded",
            WriteHolePolicy::Always => "always",
        }
    }

    /// Parses the configuration word.
    pub fn parse(word: &str) -> Option<WriteHolePolicy> {
        match word {
            "degraded" => Some(WriteHolePolicy::Degraded),
            "always" => Some(WriteHolePolicy::Always),
            _ => None,
        }
    }
}

/// Regions of an array started with [`crate::AssembleOptions::start_dirty_degraded`] whose
/// parity may be torn: the missing member's data there may read back wrong until a rebuild
/// has rewritten them from the survivors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// Why the log did not cover the stop.
    pub reason: String,
    /// The missing role(s) at the start.
    pub missing: Vec<usize>,
    /// Stripe ranges (merged write-intent regions) that may be torn.
    pub stripes: Vec<std::ops::Range<u64>>,
    /// The same as ranges of array blocks.
    pub blocks: Vec<std::ops::Range<u64>>,
}

impl Default for ArrayConfig {
    fn default() -> Self {
        ArrayConfig {
            chunk: ChunkSize::DEFAULT,
            block: BlockSize::B4096,
            uuid: None,
            bitmap_region_stripes: None,
            assume_clean: false,
            write_hole: WriteHolePolicy::Degraded,
        }
    }
}

/// Where the metadata lives on each member (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MetaLayout {
    pub data_offset: u64,
    pub bitmap_offset: u64,
    pub bitmap_bytes: u32,
    pub bitmap_region_stripes: u64,
    pub ppl_offset: u64,
    pub ppl_bytes: u32,
}

impl MetaLayout {
    pub(crate) const BITMAP_OFFSET: u64 = SB_BYTES as u64;
    pub(crate) const BITMAP_BYTES: u32 = 60 * 1024;
    pub(crate) const PPL_OFFSET: u64 = 64 * 1024;

    pub(crate) fn new(geo: &Geometry, region_stripes: Option<u64>) -> Self {
        let bits = u64::from(Self::BITMAP_BYTES) * 8;
        let min = geo.stripes().div_ceil(bits).max(1);
        let default =
            ((64u64 << 20) / (geo.stripe_data_blocks() * geo.block_bytes() as u64)).max(1);
        let region = region_stripes.unwrap_or(default).max(min);
        MetaLayout {
            data_offset: DEFAULT_DATA_OFFSET,
            bitmap_offset: Self::BITMAP_OFFSET,
            bitmap_bytes: Self::BITMAP_BYTES,
            bitmap_region_stripes: region,
            ppl_offset: Self::PPL_OFFSET,
            ppl_bytes: (DEFAULT_DATA_OFFSET - Self::PPL_OFFSET) as u32,
        }
    }
}

/// One role of the array.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub member: Option<Arc<dyn Member>>,
    pub uuid: Uuid,
    pub state: SlotState,
    /// The device that held the role until it failed, and why; `None` while a member
    /// holds it.
    pub gone: Option<GoneMember>,
}

/// Why a role has no member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoneReason {
    /// Its member failed an operation (the error, in words).
    IoError(String),
    /// The administrator set it faulty.
    Administrator,
    /// It was already failed or missing when the array last stopped.
    FailedBeforeStop,
    /// No device carrying it was found when the array was assembled.
    MissingAtAssembly,
}

impl GoneReason {
    /// A short name for labels: `io_error`, `administrator`, `failed_before_stop`,
    /// `missing_at_assembly`.
    pub fn class(&self) -> &'static str {
        match self {
            GoneReason::IoError(_) => "io_error",
            GoneReason::Administrator => "administrator",
            GoneReason::FailedBeforeStop => "failed_before_stop",
            GoneReason::MissingAtAssembly => "missing_at_assembly",
        }
    }
}

impl std::fmt::Display for GoneReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GoneReason::IoError(e) => write!(f, "I/O error: {e}"),
            GoneReason::Administrator => f.write_str("set faulty by the administrator"),
            GoneReason::FailedBeforeStop => {
                f.write_str("already failed or missing when the array last stopped")
            }
            GoneReason::MissingAtAssembly => f.write_str("not found when the array was assembled"),
        }
    }
}

/// The cause [`Array::set_faulty`] records.
const ADMIN_CAUSE: &str = "set faulty by the administrator";

/// A role's lost member: its device (when this process knew it) and why it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoneMember {
    /// The device's name (path).
    pub device: Option<String>,
    /// Why.
    pub reason: GoneReason,
}

/// Mutable array state, under [`Array::state`].
#[derive(Debug)]
pub(crate) struct Inner {
    pub slots: Vec<Slot>,
    pub spares: Vec<(Arc<dyn Member>, Uuid)>,
    pub events: u64,
    pub dirty: bool,
    pub failed: Option<(Vec<usize>, String)>,
    /// Role being rebuilt and the first stripe not yet rebuilt.
    pub rebuild: Option<(usize, u64)>,
    /// First stripe not yet resynced (full resync after creation), if one is pending.
    pub resync: Option<u64>,
    /// Partial-parity-log epoch; changes whenever the set of missing roles changes, and
    /// when the log is switched on or off.
    pub ppl_epoch: u64,
    /// The log is switched off (persisted).
    pub ppl_off: bool,
    /// Rounds planned under an older epoch may still be writing: the log does not cover an
    /// unclean stop until they are done (persisted; see [`ppl::Inflight`]).
    pub ppl_uncovered: bool,
    /// Write-hole policy "always": healthy writes are logged too (persisted).
    pub ppl_always: bool,
    /// Policy "always": the oldest epoch whose entries an unclean stop replays, because
    /// rounds planned under it may still be writing (persisted). Kept at or below the epoch
    /// in flight longest; may lag behind (replaying a finished round's entry rewrites the
    /// parity that is already there).
    pub ppl_replay_from: u64,
    /// Policy "always": the first epoch of the current stretch under it (rounds of earlier
    /// epochs were not logged while healthy). Not persisted: an assembly starts a stretch.
    pub ppl_always_since: u64,
    /// Started over a stop the log did not cover: regions whose parity may be torn, until a
    /// rebuild has rewritten them.
    pub exposure: Option<Exposure>,
    /// Hot replace in progress (only while every role is Active and no rebuild runs).
    pub replace: Option<Replacing>,
}

/// A hot replace in progress: `member` is being filled with the data of `role`.
#[derive(Debug, Clone)]
pub(crate) struct Replacing {
    pub role: usize,
    pub member: Arc<dyn Member>,
    pub uuid: Uuid,
    /// First stripe not yet copied; advances only under that stripe's lock.
    pub next: u64,
}

/// A request's snapshot of which members are usable.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// Inline for arrays of up to [`INLINE_MEMBERS`] members (a view is taken per request).
    pub members: SmallVec<[Option<Arc<dyn Member>>; INLINE_MEMBERS]>,
    pub states: SmallVec<[SlotState; INLINE_MEMBERS]>,
    pub rebuild: Option<(usize, u64)>,
    /// Hot replace: role, new member, first stripe not yet copied.
    pub replacement: Option<(usize, Arc<dyn Member>, u64)>,
}

/// Members of an array whose per-request lists stay off the heap.
pub(crate) const INLINE_MEMBERS: usize = 8;

impl View {
    /// The member that a write to `role` in `stripe` must also reach: the hot-replace
    /// member, in stripes it already holds (later ones are copied after the write, under
    /// the same stripe lock).
    pub fn mirror(&self, role: usize, stripe: StripeIdx) -> Option<&dyn Member> {
        match &self.replacement {
            Some((r, m, next)) if *r == role && stripe.0 < *next => Some(&**m),
            _ => None,
        }
    }

    /// Whether `role` holds valid data for `stripe`.
    pub fn usable(&self, role: usize, stripe: StripeIdx) -> bool {
        self.members[role].is_some()
            && match self.states[role] {
                SlotState::Active => true,
                SlotState::Failed => false,
                SlotState::Rebuilding => self
                    .rebuild
                    .is_some_and(|(r, next)| r == role && stripe.0 < next),
            }
    }

    /// The member of `role`, when present (usable or being rebuilt).
    pub fn member(&self, role: usize) -> Option<&dyn Member> {
        self.members[role].as_deref()
    }
}

/// Operation counters (monotonic).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub full_stripe: AtomicU64,
    pub rmw: AtomicU64,
    pub rcw: AtomicU64,
    pub reconstruct_write: AtomicU64,
    pub data_only: AtomicU64,
    pub degraded_read_segments: AtomicU64,
    pub member_failures: AtomicU64,
    pub replace_reconstructed: AtomicU64,
}

/// Snapshot of the array's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArrayStats {
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Stripes written whole (no reads).
    pub full_stripe: u64,
    /// Stripes written by read-modify-write.
    pub rmw: u64,
    /// Stripes written by reconstruct-write.
    pub rcw: u64,
    /// Degraded stripes written by reconstructing the missing chunk first.
    pub reconstruct_write: u64,
    /// Stripes written without parity (parity member missing).
    pub data_only: u64,
    /// Read segments served by reconstruction.
    pub degraded_read_segments: u64,
    /// Members marked failed.
    pub member_failures: u64,
    /// Stripes a hot replace rebuilt from the other members because the old member
    /// returned an error for them.
    pub replace_reconstructed: u64,
}

/// A RAID-5 array. `Sync`: share it (`Arc`) between threads, each with its own executor.
#[derive(Debug)]
pub struct Array {
    geo: Geometry,
    meta: MetaLayout,
    uuid: Uuid,
    parity: Arc<dyn ParityEngine>,
    state: RwLock<Inner>,
    /// The view write tasks share ([`Array::shared_view`]): built from the state on first
    /// use, dropped whenever the state is taken for writing, so it never outlives a change.
    shared_view: Mutex<Option<Arc<View>>>,
    locks: locks::StripeLocks,
    bitmap: bitmap::Bitmap,
    dirty_flag: AtomicBool,
    /// A completion-driven write found the array clean: [`Array::mark_dirty_if_wanted`] marks it.
    dirty_wanted: AtomicBool,
    /// Marking it that way failed: completion-driven writes decline until it is dirty (the
    /// blocking path marks it, or reports why it cannot).
    dirty_refused: AtomicBool,
    scratch: Mutex<Vec<Scratch>>,
    /// Registered-memory home of the first scratch buffers (see [`Array::scratch_arena`]).
    scratch_arena: Arc<BufferArena>,
    log_scratch: Mutex<Vec<AlignedBuf>>,
    counters: Counters,
    ppl: Option<ppl::PplLayout>,
    ppl_locks: locks::StripeLocks,
    /// Write rounds in flight per log epoch.
    inflight: ppl::Inflight,
    /// `Inner::ppl_uncovered` is set and waits for older rounds to finish.
    cover_due: AtomicBool,
    /// Per role: group commit of the log's cache flushes.
    flush_gates: Vec<flush::FlushGate>,
    /// A resync skipped stripes (a member went missing): stop clearing bitmap bits.
    resync_gaps: AtomicBool,
    /// Completion-driven writes that failed part-way and wait for their redo
    /// ([`Array::end_torn`]): their stripes may hold new data beside old parity, so every
    /// write reconstructs parity from the data (RCW) meanwhile, never from old parity.
    torn: std::sync::atomic::AtomicUsize,
    tracker: sync::TrackerCell,
}

impl Array {
    /// Geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Array UUID.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// Parity engine in use.
    pub fn parity_engine(&self) -> &dyn ParityEngine {
        &*self.parity
    }

    /// Counters.
    pub fn stats(&self) -> ArrayStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ArrayStats {
            reads: g(&c.reads),
            writes: g(&c.writes),
            full_stripe: g(&c.full_stripe),
            rmw: g(&c.rmw),
            rcw: g(&c.rcw),
            reconstruct_write: g(&c.reconstruct_write),
            data_only: g(&c.data_only),
            degraded_read_segments: g(&c.degraded_read_segments),
            member_failures: g(&c.member_failures),
            replace_reconstructed: g(&c.replace_reconstructed),
        }
    }

    /// State of every role.
    pub fn member_states(&self) -> Vec<SlotState> {
        self.read_state().slots.iter().map(|s| s.state).collect()
    }

    /// Name (path) of the member in every role; `None` for a role with no member (missing or
    /// failed and detached).
    pub fn member_names(&self) -> Vec<Option<String>> {
        self.read_state()
            .slots
            .iter()
            .map(|s| s.member.as_ref().map(|m| m.name().to_string()))
            .collect()
    }

    /// Per role, the member it lost and why (`None` while a member holds the role).
    pub fn gone_members(&self) -> Vec<Option<GoneMember>> {
        self.read_state()
            .slots
            .iter()
            .map(|s| s.gone.clone())
            .collect()
    }

    /// Names (paths) of the hot spares.
    pub fn spare_names(&self) -> Vec<String> {
        self.read_state()
            .spares
            .iter()
            .map(|(m, _)| m.name().to_string())
            .collect()
    }

    /// Roles not fully in sync (failed, or being rebuilt).
    pub fn degraded_roles(&self) -> Vec<usize> {
        let st = self.read_state();
        st.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state != SlotState::Active)
            .map(|(i, _)| i)
            .collect()
    }

    /// Number of hot spares.
    pub fn spares(&self) -> usize {
        self.read_state().spares.len()
    }

    /// Superblock event counter.
    pub fn events(&self) -> u64 {
        self.read_state().events
    }

    /// Whether degraded writes are logged (partial-parity log) so that a crash while degraded
    /// cannot corrupt blocks the interrupted write did not touch. False when switched off or
    /// when the chunk is too large for the log area (more than 256 KiB).
    pub fn write_hole_protected(&self) -> bool {
        self.ppl.is_some() && !self.read_state().ppl_off
    }

    /// Switches the partial-parity log on or off (on by default; off only to measure its cost
    /// or when the risk is accepted). The setting is persisted in the superblocks and kept
    /// across restarts. Either way the log epoch advances, so entries written before are
    /// void. Switching off: an unclean stop while degraded is then reported as exposed (no
    /// replay). Switching on: the superblocks say the log covers an unclean stop only once
    /// the writes planned before the switch are done (they were not logged).
    pub fn set_write_hole_protection(&self, on: bool) -> Result<(), RaidError> {
        {
            let mut st = self.write_state();
            if st.ppl_off != on {
                return Ok(());
            }
            // Writes done under the old setting are durable before the epoch changes.
            for (r, cause) in Self::flush_members(&st, None) {
                self.fail_locked(&mut st, r, &cause)?;
            }
            st.ppl_off = !on;
            st.ppl_epoch += 1;
            st.ppl_always_since = st.ppl_epoch;
            st.ppl_replay_from = st.ppl_epoch;
            // Rounds already writing were planned under the old setting.
            self.cover_due.store(true, Ordering::SeqCst);
            st.ppl_uncovered = self.inflight.older_than(st.ppl_epoch);
            self.persist(&mut st)?;
        }
        self.maybe_cover()
    }

    /// Whether the log currently covers an unclean stop: switched on, and no write planned
    /// without it (or under an older epoch) may still be in flight.
    pub fn write_hole_covered(&self) -> bool {
        let st = self.read_state();
        self.ppl.is_some() && !st.ppl_off && !st.ppl_uncovered
    }

    /// Once no write round of an older log epoch is in flight, records (persisted) that the
    /// log covers an unclean stop again. Cheap when nothing is due.
    pub(crate) fn maybe_cover(&self) -> Result<(), RaidError> {
        if !self.cover_due.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut st = self.write_state();
        // Rounds enter the registry under the state lock, so none can appear with an older
        // epoch while this write lock is held.
        let older = self.inflight.older_than(st.ppl_epoch);
        if !older && st.ppl_replay_from < st.ppl_epoch && st.failed.is_none() {
            // Policy "always": no round of an older epoch is left, so recovery need not look
            // at older entries; recorded at once (rare: after a failure or a rebuild's end).
            let from = st.ppl_replay_from;
            st.ppl_replay_from = st.ppl_epoch;
            if st.ppl_always {
                if let Err(e) = self.persist(&mut st) {
                    st.ppl_replay_from = from;
                    return Err(e);
                }
            }
        }
        if !st.ppl_uncovered || st.ppl_off {
            if !older {
                self.cover_due.store(false, Ordering::SeqCst);
            }
            return Ok(());
        }
        if st.failed.is_some() || older {
            return Ok(());
        }
        st.ppl_uncovered = false;
        if let Err(e) = self.persist(&mut st) {
            st.ppl_uncovered = true;
            return Err(e);
        }
        if !st.ppl_uncovered {
            self.cover_due.store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Advances the log epoch (the set of missing roles changed). Rounds writing now were
    /// planned under the old epoch: under policy "degraded" they were not logged (if planned
    /// healthy) or logged under entries the change voids, so until they are done an unclean
    /// stop is not covered; under "always" they were logged under their epoch, and recovery
    /// replays from the oldest of them. `cover_due` goes up first, so a round that leaves
    /// the registry after the check still sees it.
    pub(crate) fn next_epoch(&self, st: &mut Inner) {
        st.ppl_epoch += 1;
        self.cover_due.store(true, Ordering::SeqCst);
        let oldest = self.inflight.oldest().filter(|&e| e < st.ppl_epoch);
        if st.ppl_always {
            // Rounds from before the policy's stretch were not logged while healthy: they
            // keep (or set) the uncovered flag; the replay starts no earlier than the stretch.
            if oldest.is_some_and(|e| e < st.ppl_always_since) {
                st.ppl_uncovered = true;
            }
            let from = oldest.map_or(st.ppl_epoch, |e| e.max(st.ppl_always_since));
            st.ppl_replay_from = from;
        } else if oldest.is_some() {
            st.ppl_uncovered = true;
        }
    }

    /// The write-hole policy in force.
    pub fn write_hole_policy(&self) -> WriteHolePolicy {
        if self.read_state().ppl_always {
            WriteHolePolicy::Always
        } else {
            WriteHolePolicy::Degraded
        }
    }

    /// Sets the write-hole policy (persisted in the superblocks, kept across restarts).
    /// Either way the log epoch advances; writes already in flight were planned under the
    /// old policy, so an unclean stop is covered only once they are done (as when the log
    /// is switched on).
    pub fn set_write_hole_policy(&self, policy: WriteHolePolicy) -> Result<(), RaidError> {
        let always = policy == WriteHolePolicy::Always;
        {
            let mut st = self.write_state();
            if st.ppl_always == always {
                return Ok(());
            }
            // Writes done under the old policy are durable before the epoch changes.
            for (r, cause) in Self::flush_members(&st, None) {
                self.fail_locked(&mut st, r, &cause)?;
            }
            st.ppl_always = always;
            st.ppl_epoch += 1;
            st.ppl_always_since = st.ppl_epoch;
            st.ppl_replay_from = st.ppl_epoch;
            self.cover_due.store(true, Ordering::SeqCst);
            if self.inflight.older_than(st.ppl_epoch) {
                st.ppl_uncovered = true;
            }
            self.persist(&mut st)?;
        }
        self.maybe_cover()
    }

    /// The array was started over an unclean stop that the log did not cover
    /// ([`crate::AssembleOptions::start_dirty_degraded`]): the regions whose parity may be
    /// torn, so that the missing member's data there may read back wrong. `None` once the
    /// array is whole again (a rebuild rewrote every stripe from the survivors).
    pub fn exposure(&self) -> Option<Exposure> {
        self.read_state().exposure.clone()
    }

    /// Whether the array stopped after losing two members.
    pub fn is_failed(&self) -> bool {
        self.read_state().failed.is_some()
    }

    /// Clears write-intent bits of regions with no write in flight (persisted). Call it now
    /// and then (md clears bits a few seconds after a region goes idle); fewer set bits means
    /// a shorter resync after an unclean stop, at the cost of a bitmap write when a region
    /// is written again.
    pub fn clear_bitmap(&self) -> Result<(), RaidError> {
        self.bitmap.clear_idle(self)
    }

    /// One periodic aging pass over the write-intent bitmap: bits of regions not written since
    /// the previous pass (and with nothing in flight) are cleared and persisted; returns how
    /// many. Does nothing while a resync is pending (its regions are the bits) or after the
    /// array failed. Call it every few seconds (the daemon: 5 s).
    pub fn age_bitmap(&self) -> Result<usize, RaidError> {
        if self.resync_pending() || self.is_failed() {
            return Ok(0);
        }
        self.bitmap.clear_aged(self)
    }

    /// Regions (of [`Array::bitmap_region_stripes`] stripes) whose write-intent bit is set.
    pub fn dirty_regions(&self) -> Vec<u64> {
        self.bitmap.dirty_regions()
    }

    /// Stripes covered by one write-intent bit.
    pub fn bitmap_region_stripes(&self) -> u64 {
        self.bitmap.region_stripes()
    }

    /// Marks the array clean on every member after clearing the bitmap. Call when no
    /// request is in flight (shutdown); a later assembly then needs no resync.
    pub fn stop(&self) -> Result<(), RaidError> {
        // Data first, then the bitmap and the clean flag, so "clean" never precedes data.
        self.flush()?;
        self.bitmap.clear_idle(self)?;
        let mut st = self.write_state();
        if st.failed.is_some() {
            return Ok(());
        }
        if st.resync.is_none() {
            st.dirty = false;
        }
        self.dirty_flag.store(false, Ordering::Release);
        self.persist(&mut st)
    }

    fn read_state(&self) -> RwLockReadGuard<'_, Inner> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, Inner> {
        let st = self.state.write().unwrap_or_else(|p| p.into_inner());
        // Under the write lock: no reader can build the view again until the change is done
        // (readers build it under the read lock; lock order: state, then the view).
        *self.shared_view.lock().unwrap_or_else(|p| p.into_inner()) = None;
        st
    }

    /// Whether `member` (the same object, or a device of the same name) already serves the
    /// array: a role, a spare, or the hot-replace member.
    pub(crate) fn holds_device(st: &Inner, member: &Arc<dyn Member>) -> bool {
        st.slots
            .iter()
            .filter_map(|s| s.member.as_ref())
            .chain(st.spares.iter().map(|(m, _)| m))
            .chain(st.replace.as_ref().map(|r| &r.member))
            .any(|m| Arc::ptr_eq(m, member) || m.name() == member.name())
    }

    /// Snapshot for one request; fails when the array has stopped.
    pub(crate) fn view(&self) -> Result<View, RaidError> {
        Self::view_of(&self.read_state())
    }

    /// Snapshot for one write round, with the log epoch, whether the log is on and whether
    /// healthy writes are logged too (policy "always"), taken together under one state lock.
    pub(crate) fn write_view(&self) -> Result<(View, u64, bool, bool), RaidError> {
        let st = self.read_state();
        Ok((
            Self::view_of(&st)?,
            st.ppl_epoch,
            !st.ppl_off,
            st.ppl_always,
        ))
    }

    /// Before a round planned under log epoch `epoch` writes anything: registers it in
    /// flight under that epoch (until the guard drops), or `None` when the epoch changed since
    /// the round was planned (then it must plan again). Under the state lock, so a change of
    /// epoch sees every round that may write under the old one.
    pub(crate) fn enter_writes(&self, epoch: u64) -> Option<ppl::InflightGuard<'_>> {
        let st = self.read_state();
        (st.ppl_epoch == epoch).then(|| self.inflight.enter(epoch))
    }

    /// [`Array::view_of`], shared: one `Arc` clone per request instead of a view of its own
    /// (a member handle clone per role, and a 216-byte value in every write task). `st` is the
    /// caller's read guard of this array's state.
    pub(crate) fn shared_view(&self, st: &Inner) -> Result<Arc<View>, RaidError> {
        let mut cached = self.shared_view.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = cached.as_ref() {
            return Ok(v.clone());
        }
        let v = Arc::new(Self::view_of(st)?);
        *cached = Some(v.clone());
        Ok(v)
    }

    fn view_of(st: &Inner) -> Result<View, RaidError> {
        if let Some((failed, cause)) = &st.failed {
            return Err(RaidError::ArrayFailed {
                failed: failed.clone(),
                cause: cause.clone(),
            });
        }
        Ok(View {
            members: st.slots.iter().map(|s| s.member.clone()).collect(),
            states: st.slots.iter().map(|s| s.state).collect(),
            rebuild: st.rebuild,
            replacement: st
                .replace
                .as_ref()
                .map(|r| (r.role, r.member.clone(), r.next)),
        })
    }

    /// Byte offset on a member of block `block` of its data area.
    pub(crate) fn member_offset(&self, member_block: u64) -> u64 {
        self.meta.data_offset + member_block * self.geo.block_bytes() as u64
    }

    pub(crate) fn take_scratch(&self) -> Scratch {
        let mut pool = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        pool.pop()
            .unwrap_or_else(|| Scratch::Heap(AlignedBuf::new(self.geo.chunk_bytes(), 4096)))
    }

    /// The memory the engine's scratch buffers (parity, old data) come from, as far as it
    /// lasts. Register it with each executor next to the pool
    /// (`exec.register_arenas(&[pool, array.scratch_arena().clone()])`) so those operations
    /// go out as fixed-buffer operations too; unregistered, they still work.
    pub fn scratch_arena(&self) -> &Arc<BufferArena> {
        &self.scratch_arena
    }

    /// A buffer for one log entry: header plus one chunk of partial parity.
    pub(crate) fn take_log_scratch(&self) -> AlignedBuf {
        let mut pool = self.log_scratch.lock().unwrap_or_else(|p| p.into_inner());
        pool.pop()
            .unwrap_or_else(|| AlignedBuf::new(ppl::HEADER + self.geo.chunk_bytes(), 4096))
    }

    pub(crate) fn give_log_scratch(&self, bufs: impl IntoIterator<Item = AlignedBuf>) {
        let mut pool = self.log_scratch.lock().unwrap_or_else(|p| p.into_inner());
        for b in bufs {
            if pool.len() < 64 {
                pool.push(b);
            }
        }
    }

    pub(crate) fn give_scratch(&self, bufs: impl IntoIterator<Item = Scratch>) {
        let mut pool = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        for b in bufs {
            // Arena buffers always go back; heap ones only while the pool is small.
            if matches!(b, Scratch::Arena(_)) || pool.len() < 256 {
                pool.push(b);
            }
        }
    }

    /// Whether any present member offers a descriptor for direct I/O, which a poller's own
    /// io_uring needs to serve the array's I/O on it ([`Array::start_write`] with
    /// `need_fds`); in-memory members, for instance, do not.
    pub fn has_direct_io_member(&self) -> bool {
        let st = self.read_state();
        Self::view_of(&st)
            .is_ok_and(|v| v.members.iter().flatten().any(|m| m.direct_fd().is_some()))
    }

    /// Marks the array dirty on disk if a completion-driven write asked for it (it cannot
    /// write superblocks itself: [`WriteStart::Busy`] until this ran). For the owner's
    /// background thread (the daemon's maintenance thread calls it at every pass). Returns
    /// whether it marked the array.
    pub fn mark_dirty_if_wanted(&self) -> Result<bool, RaidError> {
        if !self.dirty_wanted.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        let r = self.view().and_then(|_| self.ensure_dirty());
        if r.is_err() {
            self.dirty_refused.store(true, Ordering::Release);
        }
        r.map(|()| true)
    }

    /// Marks the array dirty on disk before its first write since it was clean.
    pub(crate) fn ensure_dirty(&self) -> Result<(), RaidError> {
        if self.dirty_flag.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut st = self.write_state();
        if !st.dirty {
            st.dirty = true;
            self.persist(&mut st)?;
        }
        self.dirty_flag.store(true, Ordering::Release);
        Ok(())
    }

    /// Takes `role` out of service on the administrator's request (say, a drive reporting
    /// SMART errors before it fails): marks it failed in the survivors' superblocks, after
    /// which a hot spare (present or added later) is rebuilt in its place. Refused if another
    /// role is already missing (that would stop the array).
    pub fn set_faulty(&self, role: MemberIdx) -> Result<(), RaidError> {
        let mut st = self.write_state();
        if role.0 >= st.slots.len() {
            return Err(RaidError::State("no such role"));
        }
        if st.slots[role.0].state != SlotState::Active {
            return Err(RaidError::State("role is not active"));
        }
        if st.slots.iter().any(|s| s.state != SlotState::Active) {
            return Err(RaidError::State(
                "another role is already missing; RAID-5 survives one",
            ));
        }
        // As in `fail_member`: completed writes are durable before the superblock says the
        // role is gone (they were planned with it present, so not logged). A member that
        // cannot flush may have lost writes: it fails instead, and the healthy role the
        // administrator named stays in service (failing both would stop the array).
        if let Some((r, cause)) = Self::flush_members(&st, Some(role.0)).into_iter().next() {
            self.fail_locked(&mut st, r, &cause)?;
            self.persist(&mut st)?;
            return Err(RaidError::State(
                "another member failed its cache flush and was failed instead; the named role \
                 stays in service",
            ));
        }
        self.fail_locked(&mut st, role.0, ADMIN_CAUSE)?;
        self.persist(&mut st)?;
        drop(st);
        self.maybe_cover()
    }

    /// Marks `role` failed after `cause` on `member`, persisting that in the survivors'
    /// superblocks. Only acts if `member` still holds the role: an error reported late by a
    /// member that was already replaced (say, by a spare) must not fail its replacement.
    /// Returns `ArrayFailed` when this leaves the array with two holes.
    pub(crate) fn fail_member(
        &self,
        role: MemberIdx,
        member: &dyn Member,
        cause: &MemberError,
    ) -> Result<(), RaidError> {
        let mut st = self.write_state();
        let holds = st.slots[role.0]
            .member
            .as_ref()
            .is_some_and(|m| std::ptr::addr_eq(Arc::as_ptr(m), member as *const dyn Member));
        let is_replacement = st.replace.as_ref().is_some_and(|r| {
            r.role == role.0
                && std::ptr::addr_eq(Arc::as_ptr(&r.member), member as *const dyn Member)
        });
        if is_replacement {
            // The new member of a hot replace failed: drop the copy; the old member still
            // holds the role, so the array is as it was before the replace started.
            self.counters
                .member_failures
                .fetch_add(1, Ordering::Relaxed);
            st.replace = None;
            return self.persist(&mut st);
        }
        if !holds {
            if let Some((failed, c)) = &st.failed {
                return Err(RaidError::ArrayFailed {
                    failed: failed.clone(),
                    cause: c.clone(),
                });
            }
            return Ok(());
        }
        // Writes that completed before this point were planned with `role` present (not
        // logged, or logged under the old epoch): make them durable on the other members
        // before a superblock says `role` is gone. Otherwise a power cut could keep that
        // superblock while a cache lost part of a stripe's write (data without parity), and
        // `role`'s rows there would reconstruct wrong (found by the model test: a failed
        // read, then a cut during the flushes of the superblock update).
        let unflushed = Self::flush_members(&st, Some(role.0));
        self.fail_locked(&mut st, role.0, &cause.to_string())?;
        // A member that cannot flush may have lost writes: it is gone too.
        for (r, c) in unflushed {
            self.fail_locked(&mut st, r, &c)?;
        }
        self.persist(&mut st)?;
        drop(st);
        // Covers at once when no write round is in flight (an administrator's fail); else
        // the last round of the old epoch does it when it ends.
        self.maybe_cover()
    }

    /// Flushes every present member with a volatile write cache but `except`; returns the
    /// roles that could not flush, with the error. Done before a superblock update that
    /// changes the log epoch: a write that completed under the old epoch (unlogged, or logged
    /// under entries the change voids) must be durable before a superblock says the log
    /// covers the new one; `persist` flushes members one at a time, after their superblock.
    fn flush_members(st: &Inner, except: Option<usize>) -> Vec<(usize, String)> {
        let mut unflushed = Vec::new();
        for (r, slot) in st.slots.iter().enumerate() {
            if Some(r) == except {
                continue;
            }
            let Some(m) = slot.member.as_ref().filter(|m| m.volatile_write_cache()) else {
                continue;
            };
            if let Err(e) = m.flush() {
                unflushed.push((r, e.to_string()));
            }
        }
        unflushed
    }

    fn fail_locked(&self, st: &mut Inner, role: usize, cause: &str) -> Result<(), RaidError> {
        if let Some((failed, c)) = &st.failed {
            return Err(RaidError::ArrayFailed {
                failed: failed.clone(),
                cause: c.clone(),
            });
        }
        if st.slots[role].state == SlotState::Failed && st.slots[role].member.is_none() {
            return Ok(());
        }
        self.counters
            .member_failures
            .fetch_add(1, Ordering::Relaxed);
        if st.rebuild.is_some_and(|(r, _)| r == role) {
            st.rebuild = None;
        }
        st.slots[role].state = SlotState::Failed;
        let device = st.slots[role].member.take().map(|m| m.name().to_string());
        st.slots[role].gone = Some(GoneMember {
            device,
            reason: match cause {
                ADMIN_CAUSE => GoneReason::Administrator,
                c => GoneReason::IoError(c.to_string()),
            },
        });
        self.next_epoch(st);
        match st.replace.take() {
            // The replaced member failed mid-copy: the new member holds every stripe below
            // the copy checkpoint (once flushed), so it becomes the role's rebuild target
            // from there.
            Some(r) if r.role == role && st.rebuild.is_none() && r.member.flush().is_ok() => {
                st.slots[role].member = Some(r.member);
                st.slots[role].gone = None;
                st.slots[role].uuid = r.uuid;
                st.slots[role].state = SlotState::Rebuilding;
                st.rebuild = Some((role, r.next));
            }
            // The new member failed its flush: it is dropped too.
            Some(r) if r.role == role => {}
            // Another role failed: the new member is more use as a spare for it.
            Some(r) => st.spares.push((r.member, r.uuid)),
            None => {}
        }
        let down: Vec<usize> = st
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state != SlotState::Active)
            .map(|(i, _)| i)
            .collect();
        if down.len() < 2 {
            Self::take_spare(st);
        }
        if down.len() >= 2 {
            st.failed = Some((down.clone(), cause.to_string()));
            // Record it where we still can; the array is stopped either way.
            let _ = self.persist(st);
            return Err(RaidError::ArrayFailed {
                failed: down,
                cause: cause.to_string(),
            });
        }
        Ok(())
    }

    /// The superblock this array would write for a member with `role` and `uuid`.
    pub(crate) fn superblock(&self, st: &Inner, role: Role, member_uuid: Uuid) -> Superblock {
        Superblock {
            array_uuid: self.uuid,
            member_uuid,
            role,
            members: self.geo.members(),
            chunk: self.geo.chunk(),
            block: self.geo.block(),
            data_offset: self.meta.data_offset,
            member_data_bytes: self.geo.member_data_bytes(),
            events: st.events,
            dirty: st.dirty,
            bitmap_offset: self.meta.bitmap_offset,
            bitmap_bytes: self.meta.bitmap_bytes,
            bitmap_region_stripes: self.meta.bitmap_region_stripes,
            ppl_offset: self.meta.ppl_offset,
            ppl_bytes: self.meta.ppl_bytes,
            rebuild: st.rebuild,
            resync_checkpoint: st.resync,
            ppl_epoch: st.ppl_epoch,
            legacy: false,
            ppl_off: st.ppl_off,
            ppl_uncovered: st.ppl_uncovered,
            ppl_always: st.ppl_always,
            ppl_exposed: st.exposure.is_some(),
            ppl_replay_from: if st.ppl_always {
                st.ppl_replay_from.min(st.ppl_epoch)
            } else {
                st.ppl_epoch
            },
            replace: st.replace.as_ref().map(|r| ReplaceRecord {
                role: r.role,
                next: r.next,
                member: r.uuid,
            }),
            role_states: st.slots.iter().map(|s| s.state).collect(),
            role_uuids: st.slots.iter().map(|s| s.uuid).collect(),
        }
    }

    /// Bumps the event counter and writes the superblock to every present member, spare and
    /// hot-replace member. A member whose superblock write fails is marked failed (a spare
    /// is dropped, a hot replace abandoned) and the update repeated.
    ///
    /// Every attempt is written to *all* other members even after one fails, so that the
    /// members that work never fall more than one event behind each other: a power cut during
    /// the repeated update then leaves a torn update (one behind), which assembly accepts, not
    /// members two events behind, which it must refuse as stale.
    pub(crate) fn persist(&self, st: &mut Inner) -> Result<(), RaidError> {
        for _ in 0..=self.geo.members() + st.spares.len() + 1 {
            st.events += 1;
            let mut buf = AlignedBuf::new(SB_BYTES, 4096);
            let mut bad_role = None;
            let mut bad_spare = None;
            let mut bad_replacement = false;
            // The superblock records the rebuild and hot-replace checkpoints: what lies below
            // them must be durable on the target first, or a power cut leaves a checkpoint
            // above chunks the target's write cache lost (found by the model test: a dirty
            // flag written during a replace carried the in-memory copy position).
            if let Some((role, _)) = st.rebuild {
                if let Some(m) = &st.slots[role].member {
                    if m.volatile_write_cache() {
                        if let Err(e) = m.flush() {
                            bad_role = Some((role, e));
                        }
                    }
                }
            }
            if let Some(r) = &st.replace {
                if r.member.volatile_write_cache() && r.member.flush().is_err() {
                    bad_replacement = true;
                }
            }
            // A target that cannot flush is dropped before any superblock is written.
            let targets_ok = bad_role.is_none() && !bad_replacement;
            for (role, slot) in st.slots.iter().enumerate().filter(|_| targets_ok) {
                let Some(m) = &slot.member else { continue };
                buf.copy_from_slice(&self.superblock(st, Role::Active(role), slot.uuid).encode());
                if let Err(e) = m.write_at(0, &buf).and_then(|()| m.flush()) {
                    if bad_role.is_none() {
                        bad_role = Some((role, e));
                    }
                }
            }
            for (i, (m, uuid)) in st.spares.iter().enumerate().filter(|_| targets_ok) {
                buf.copy_from_slice(&self.superblock(st, Role::Spare, *uuid).encode());
                if m.write_at(0, &buf).and_then(|()| m.flush()).is_err() && bad_spare.is_none() {
                    bad_spare = Some(i);
                }
            }
            if let Some(r) = st.replace.as_ref().filter(|_| targets_ok) {
                buf.copy_from_slice(
                    &self
                        .superblock(st, Role::Replacement(r.role), r.uuid)
                        .encode(),
                );
                bad_replacement = r
                    .member
                    .write_at(0, &buf)
                    .and_then(|()| r.member.flush())
                    .is_err();
            }
            match (bad_role, bad_spare, bad_replacement) {
                (Some((role, e)), _, _) => self.fail_locked(st, role, &e.to_string())?,
                (None, Some(i), _) => {
                    st.spares.remove(i);
                }
                (None, None, true) => {
                    self.counters
                        .member_failures
                        .fetch_add(1, Ordering::Relaxed);
                    st.replace = None;
                }
                (None, None, false) => return Ok(()),
            }
        }
        Err(RaidError::State("superblock update kept failing"))
    }
}

#[cfg(test)]
mod tests;
