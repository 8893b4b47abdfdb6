//! Typed ownership of in-flight work: `wr_id` indexes a slab of the caller's per-request state,
//! a failed post hands that state back, and a completion hands it out again exactly once.
//!
//! [`WrSlab`] encodes `kind (2 bits) | generation (30 bits) | index (32 bits)` in the 64-bit
//! `wr_id`, so a stale or foreign id (another queue, an untracked work request, a completion
//! seen twice) resolves to nothing instead of to someone else's state. [`Endpoint`] wraps a
//! QP with a send slab and a receive slab and keeps its own count of send-queue slots the way
//! verbs frees them: an unsignaled work request's slot is released by the next signaled
//! completion after it. [`SrqEndpoint`] does the same for a shared receive queue.
//!
//! Invariants: every id the slabs hand out is resolved at most once; a post either leaves the
//! state in the slab (in flight) or returns it to the caller, never both and never neither.

use crate::api::{QueuePair, SharedReceiveQueue};
use crate::error::{FabricError, PostError};
use crate::types::{Completion, RecvWr, SendWr, Sge, WrId};

/// Which queue an id belongs to (the top two bits of a `wr_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrKind {
    /// No caller state: resolves to nothing.
    Untracked = 0,
    /// A QP's send queue.
    Send = 1,
    /// A QP's own receive queue.
    Recv = 2,
    /// A shared receive queue.
    SrqRecv = 3,
}

impl WrKind {
    /// The kind a completion's id carries.
    pub fn of(id: WrId) -> WrKind {
        match id.0 >> 62 {
            1 => WrKind::Send,
            2 => WrKind::Recv,
            3 => WrKind::SrqRecv,
            _ => WrKind::Untracked,
        }
    }
}

const GEN_MASK: u64 = (1 << 30) - 1;

enum Entry<T> {
    Free { gen: u64, next: Option<u32> },
    Used { gen: u64, value: T, slots: u32 },
}

/// A slab of caller state indexed by `wr_id`.
pub struct WrSlab<T> {
    kind: WrKind,
    entries: Vec<Entry<T>>,
    free: Option<u32>,
    used: usize,
}

impl<T> WrSlab<T> {
    /// An empty slab whose ids carry `kind`.
    pub fn new(kind: WrKind) -> Self {
        Self {
            kind,
            entries: Vec::new(),
            free: None,
            used: 0,
        }
    }

    /// Stores `value` (owning `slots` queue slots) and returns its id.
    pub fn insert(&mut self, value: T, slots: u32) -> WrId {
        let (idx, gen) = match self.free {
            Some(i) => {
                let gen = match &self.entries[i as usize] {
                    Entry::Free { gen, next } => {
                        self.free = *next;
                        (*gen + 1) & GEN_MASK
                    }
                    Entry::Used { .. } => unreachable_free(),
                };
                (i, gen)
            }
            None => {
                self.entries.push(Entry::Free { gen: 0, next: None });
                ((self.entries.len() - 1) as u32, 0)
            }
        };
        self.entries[idx as usize] = Entry::Used { gen, value, slots };
        self.used += 1;
        WrId(((self.kind as u64) << 62) | (gen << 32) | u64::from(idx))
    }

    /// Takes the state of `id` out, with its slot count; `None` for ids it does not hold.
    pub fn remove(&mut self, id: WrId) -> Option<(T, u32)> {
        if WrKind::of(id) != self.kind || self.kind == WrKind::Untracked {
            return None;
        }
        let idx = (id.0 & 0xFFFF_FFFF) as usize;
        let gen = (id.0 >> 32) & GEN_MASK;
        match self.entries.get(idx) {
            Some(Entry::Used { gen: g, .. }) if *g == gen => {}
            _ => return None,
        }
        let old = std::mem::replace(
            &mut self.entries[idx],
            Entry::Free {
                gen,
                next: self.free,
            },
        );
        self.free = Some(idx as u32);
        self.used -= 1;
        match old {
            Entry::Used { value, slots, .. } => Some((value, slots)),
            Entry::Free { .. } => None,
        }
    }

    /// Entries in flight.
    pub fn len(&self) -> usize {
        self.used
    }
    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }
}

// The free list only links Free entries; reaching a Used one would mean the list is corrupt,
// which `insert`/`remove` never produce. Kept out of line so the hot path stays small.
#[cold]
fn unreachable_free() -> u64 {
    // A corrupt free list cannot be recovered from; no input can cause it.
    panic!("WrSlab free list points at a used entry")
}

/// A post the queue did not take, with the caller's state handed back.
#[derive(Debug)]
pub struct Rejected<T> {
    /// Why, and how much of a chain was posted anyway.
    pub error: PostError,
    /// The state that was to travel with the work request.
    pub ctx: T,
}

/// A completion resolved to its caller state.
#[derive(Debug)]
pub struct Done<T> {
    /// The caller state posted with the work request.
    pub ctx: T,
    /// The raw completion.
    pub completion: Completion,
}

/// A QP together with the state of everything in flight on it.
pub struct Endpoint<Q, T> {
    qp: Q,
    sends: WrSlab<T>,
    recvs: WrSlab<T>,
    sq_depth: u32,
    sq_in_use: u32,
    unsignaled_pending: u32,
}

impl<Q: QueuePair, T> Endpoint<Q, T> {
    /// Wraps `qp`, whose send queue holds `sq_depth` work requests.
    pub fn new(qp: Q, sq_depth: u32) -> Self {
        Self {
            qp,
            sends: WrSlab::new(WrKind::Send),
            recvs: WrSlab::new(WrKind::Recv),
            sq_depth,
            sq_in_use: 0,
            unsignaled_pending: 0,
        }
    }

    /// The QP.
    pub fn qp(&self) -> &Q {
        &self.qp
    }
    /// The QP, mutably (e.g. to move it to the error state).
    pub fn qp_mut(&mut self) -> &mut Q {
        &mut self.qp
    }
    /// Send-queue slots in use.
    pub fn sq_in_use(&self) -> u32 {
        self.sq_in_use
    }
    /// Send-queue slots the queue holds.
    pub fn sq_depth(&self) -> u32 {
        self.sq_depth
    }
    /// Unsignaled work requests posted since the last signaled one (their slots come back
    /// when a later signaled one completes).
    pub fn unsignaled_pending(&self) -> u32 {
        self.unsignaled_pending
    }
    /// Work requests with caller state in flight (sends + receives).
    pub fn in_flight(&self) -> usize {
        self.sends.len() + self.recvs.len()
    }

    /// Posts a chain whose last work request is signaled and carries `ctx`; earlier ones are
    /// untracked (their errors still complete, and resolve to nothing). The ids in `wrs` are
    /// overwritten.
    pub fn post_send(&mut self, ctx: T, wrs: &mut [SendWr<'_>]) -> Result<(), Rejected<T>> {
        let n = wrs.len() as u32;
        let Some(last) = wrs.last() else {
            return Err(reject(
                FabricError::InvalidArgument("empty chain".into()),
                ctx,
            ));
        };
        if !last.signaled {
            return Err(reject(
                FabricError::InvalidArgument(
                    "the chain's last work request must be signaled".into(),
                ),
                ctx,
            ));
        }
        if let Err(e) = self.room(n) {
            return Err(reject(e, ctx));
        }
        let slots = n + self.unsignaled_pending;
        let id = self.sends.insert(ctx, slots);
        for wr in wrs.iter_mut() {
            wr.wr_id = WrId(0);
        }
        if let Some(last) = wrs.last_mut() {
            last.wr_id = id;
        }
        match self.qp.post_send(wrs) {
            Ok(()) => {
                self.sq_in_use += n;
                self.unsignaled_pending = 0;
                Ok(())
            }
            Err(error) => {
                // The ctx's work request was not posted (it is last), so the state comes back.
                let ctx = match self.sends.remove(id) {
                    Some((ctx, _)) => ctx,
                    None => unreachable!("just inserted"),
                };
                if error.posted > 0 {
                    // A torn chain: its prefix is in flight with nothing signaled after it.
                    // Kill the QP so the prefix flushes instead of lingering.
                    let _ = self.qp.set_error();
                    self.sq_in_use += error.posted as u32;
                }
                Err(Rejected { error, ctx })
            }
        }
    }

    /// Posts unsignaled work requests without caller state; their slots are released by the
    /// next signaled completion.
    pub fn post_send_unsignaled(&mut self, wrs: &mut [SendWr<'_>]) -> Result<(), PostError> {
        let n = wrs.len() as u32;
        self.room(n).map_err(PostError::nothing_posted)?;
        for wr in wrs.iter_mut() {
            wr.wr_id = WrId(0);
            wr.signaled = false;
        }
        let r = self.qp.post_send(wrs);
        let posted = match &r {
            Ok(()) => n,
            Err(e) => e.posted as u32,
        };
        self.sq_in_use += posted;
        self.unsignaled_pending += posted;
        r
    }

    /// Posts one receive over `sges` carrying `ctx`.
    pub fn post_recv(&mut self, ctx: T, sges: &[Sge]) -> Result<(), Rejected<T>> {
        let id = self.recvs.insert(ctx, 1);
        match self.qp.post_recv(&[RecvWr { wr_id: id, sges }]) {
            Ok(()) => Ok(()),
            Err(error) => match self.recvs.remove(id) {
                Some((ctx, _)) => Err(Rejected { error, ctx }),
                None => unreachable!("just inserted"),
            },
        }
    }

    /// Resolves a completion of this QP to its state; `None` for untracked work requests and
    /// ids this endpoint does not hold.
    pub fn complete(&mut self, completion: &Completion) -> Option<Done<T>> {
        if completion.qp_num != self.qp.qp_num() {
            return None;
        }
        match WrKind::of(completion.wr_id) {
            WrKind::Send => {
                let (ctx, slots) = self.sends.remove(completion.wr_id)?;
                self.sq_in_use = self.sq_in_use.saturating_sub(slots);
                Some(Done {
                    ctx,
                    completion: *completion,
                })
            }
            WrKind::Recv => {
                let (ctx, _) = self.recvs.remove(completion.wr_id)?;
                Some(Done {
                    ctx,
                    completion: *completion,
                })
            }
            WrKind::SrqRecv | WrKind::Untracked => None,
        }
    }

    fn room(&self, n: u32) -> Result<(), FabricError> {
        if self.sq_in_use + n > self.sq_depth {
            return Err(FabricError::QueueFull {
                needed: n,
                in_use: self.sq_in_use,
                capacity: self.sq_depth,
            });
        }
        Ok(())
    }
}

fn reject<T>(error: FabricError, ctx: T) -> Rejected<T> {
    Rejected {
        error: PostError::nothing_posted(error),
        ctx,
    }
}

/// A shared receive queue together with the state of its posted receives.
pub struct SrqEndpoint<S, T> {
    srq: S,
    recvs: WrSlab<T>,
}

impl<S: SharedReceiveQueue, T> SrqEndpoint<S, T> {
    /// Wraps `srq`.
    pub fn new(srq: S) -> Self {
        Self {
            srq,
            recvs: WrSlab::new(WrKind::SrqRecv),
        }
    }
    /// The SRQ.
    pub fn srq(&self) -> &S {
        &self.srq
    }
    /// Receives in flight.
    pub fn in_flight(&self) -> usize {
        self.recvs.len()
    }
    /// Posts one receive over `sges` carrying `ctx`.
    pub fn post_recv(&mut self, ctx: T, sges: &[Sge]) -> Result<(), Rejected<T>> {
        let id = self.recvs.insert(ctx, 1);
        match self.srq.post_recv(&[RecvWr { wr_id: id, sges }]) {
            Ok(()) => Ok(()),
            Err(error) => match self.recvs.remove(id) {
                Some((ctx, _)) => Err(Rejected { error, ctx }),
                None => unreachable!("just inserted"),
            },
        }
    }
    /// Resolves a receive completion (from any QP on this SRQ) to its state.
    pub fn complete(&mut self, completion: &Completion) -> Option<Done<T>> {
        let (ctx, _) = self.recvs.remove(completion.wr_id)?;
        Some(Done {
            ctx,
            completion: *completion,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resolve_once_and_stale_ids_do_not_resolve() {
        let mut s = WrSlab::new(WrKind::Send);
        let a = s.insert("a", 1);
        let b = s.insert("b", 2);
        assert_eq!(WrKind::of(a), WrKind::Send);
        assert_eq!(s.remove(a), Some(("a", 1)));
        assert_eq!(s.remove(a), None, "second resolution");
        let c = s.insert("c", 1);
        assert_eq!(c.0 & 0xFFFF_FFFF, a.0 & 0xFFFF_FFFF, "slot reused");
        assert_ne!(c, a, "with a new generation");
        assert_eq!(s.remove(a), None, "stale id");
        assert_eq!(s.remove(WrId(0)), None, "untracked");
        let mut r: WrSlab<&str> = WrSlab::new(WrKind::Recv);
        assert_eq!(r.remove(b), None, "foreign kind");
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(b), Some(("b", 2)));
        assert_eq!(s.remove(c), Some(("c", 1)));
        assert!(s.is_empty());
    }
}
