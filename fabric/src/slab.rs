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

/// One chain of a batch ([`Endpoint::post_send_batch`]).
#[derive(Debug)]
pub struct Chain<T> {
    len: u32,
    ctx: Option<T>,
    id: Option<WrId>,
}

impl<T> Chain<T> {
    /// `len` work requests, consecutive in the batch's list. With a state, the chain's last
    /// work request carries it and is signaled, the others untracked (as with
    /// [`Endpoint::post_send`]); without, every work request of the chain is unsignaled (as
    /// with [`Endpoint::post_send_unsignaled`]).
    pub fn new(len: u32, ctx: Option<T>) -> Self {
        Chain { len, ctx, id: None }
    }
}

/// The chains of a batch the queue did not take, in order, with why.
#[derive(Debug)]
pub struct BatchRejected<T> {
    /// Why, and how many work requests of the whole batch were posted anyway.
    pub error: PostError,
    /// The states of the chains not (or not wholly) posted, in order.
    pub ctxs: Vec<T>,
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

    /// Posts several chains with one call to the device (one doorbell): `wrs` holds the
    /// chains' work requests in order, `chains` says how long each is and what it carries
    /// (drained). Each chain is what [`Self::post_send`] (with a state) or
    /// [`Self::post_send_unsignaled`] (without) would post; the ids and signaled flags in
    /// `wrs` are overwritten. On failure the chains wholly posted stay in flight and the
    /// others' states come back; a chain posted in part kills the QP, as a torn chain does.
    pub fn post_send_batch(
        &mut self,
        chains: &mut Vec<Chain<T>>,
        wrs: &mut [SendWr<'_>],
    ) -> Result<(), BatchRejected<T>> {
        let total: u32 = chains.iter().map(|c| c.len).sum();
        let bad = if total as usize != wrs.len() {
            Some("the chains' lengths do not add up to the work requests")
        } else if chains.iter().any(|c| c.len == 0) {
            Some("empty chain")
        } else {
            None
        };
        let refused = |chains: &mut Vec<Chain<T>>, e: FabricError| BatchRejected {
            error: PostError::nothing_posted(e),
            ctxs: chains.drain(..).filter_map(|c| c.ctx).collect(),
        };
        if let Some(why) = bad {
            return Err(refused(chains, FabricError::InvalidArgument(why.into())));
        }
        if total == 0 {
            return Ok(());
        }
        if let Err(e) = self.room(total) {
            return Err(refused(chains, e));
        }
        // Ids first (the states move into the slab); undone below for what is not posted.
        let mut pending = self.unsignaled_pending;
        let mut at = 0usize;
        for c in chains.iter_mut() {
            let end = at + c.len as usize;
            let chain = &mut wrs[at..end];
            for wr in chain.iter_mut() {
                wr.wr_id = WrId(0);
                wr.signaled = false;
            }
            c.id = c.ctx.take().map(|ctx| {
                let id = self.sends.insert(ctx, c.len + pending);
                pending = 0;
                if let Some(last) = chain.last_mut() {
                    last.wr_id = id;
                    last.signaled = true;
                }
                id
            });
            if c.id.is_none() {
                pending += c.len;
            }
            at = end;
        }
        match self.qp.post_send(wrs) {
            Ok(()) => {
                self.sq_in_use += total;
                self.unsignaled_pending = pending;
                chains.clear();
                Ok(())
            }
            Err(error) => {
                let posted = error.posted.min(wrs.len()) as u32;
                self.sq_in_use += posted;
                // Chains wholly posted stay; the rest come back. The unsignaled count is
                // what follows the last signaled work request that was posted.
                let mut back = Vec::new();
                let mut start = 0u32;
                let mut unsignaled = self.unsignaled_pending;
                let mut torn = false;
                for c in chains.drain(..) {
                    let (len, id) = (c.len, c.id);
                    let end = start + len;
                    if end <= posted {
                        match id {
                            Some(_) => unsignaled = 0,
                            None => unsignaled += len,
                        }
                    } else {
                        if start < posted {
                            torn = true;
                            unsignaled += posted - start;
                        }
                        if let Some((ctx, _)) = id.and_then(|id| self.sends.remove(id)) {
                            back.push(ctx);
                        }
                    }
                    start = end;
                }
                self.unsignaled_pending = unsignaled;
                if torn {
                    // Its prefix is in flight with nothing signaled after it: kill the QP so
                    // the prefix flushes instead of lingering.
                    let _ = self.qp.set_error();
                }
                Err(BatchRejected { error, ctxs: back })
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
    use crate::types::{ConnId, Payload, QpNum, SendOp, WcStatus};

    /// A QP that records what is posted and may take only the first `take` work requests.
    #[derive(Default)]
    struct Recording {
        posted: Vec<(WrId, bool)>,
        calls: usize,
        take: Option<usize>,
        broken: bool,
    }

    impl QueuePair for Recording {
        fn qp_num(&self) -> QpNum {
            QpNum(7)
        }
        fn conn(&self) -> ConnId {
            ConnId(1)
        }
        fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
            self.calls += 1;
            let n = self.take.map_or(wrs.len(), |k| k.min(wrs.len()));
            self.posted
                .extend(wrs[..n].iter().map(|w| (w.wr_id, w.signaled)));
            if n < wrs.len() {
                return Err(PostError {
                    posted: n,
                    error: FabricError::InvalidArgument("send queue full".into()),
                });
            }
            Ok(())
        }
        fn post_recv(&mut self, _: &[RecvWr<'_>]) -> Result<(), PostError> {
            Ok(())
        }
        fn set_error(&mut self) -> Result<(), FabricError> {
            self.broken = true;
            Ok(())
        }
    }

    fn send() -> SendWr<'static> {
        SendWr {
            wr_id: WrId(0),
            op: SendOp::Send,
            payload: Payload::Inline(&[0; 16]),
            signaled: true,
        }
    }

    fn done(id: WrId) -> Completion {
        Completion {
            wr_id: id,
            status: WcStatus::Success,
            opcode: None,
            byte_len: 0,
            qp_num: QpNum(7),
            invalidated_rkey: None,
        }
    }

    #[test]
    fn a_batch_is_one_post_and_each_chain_is_tracked_as_if_posted_alone() {
        let mut ep: Endpoint<Recording, &str> = Endpoint::new(Recording::default(), 8);
        let mut chains = vec![
            Chain::new(2, Some("a")),
            Chain::new(1, None),
            Chain::new(1, Some("b")),
        ];
        let mut wrs = [send(); 4];
        ep.post_send_batch(&mut chains, &mut wrs).unwrap();
        assert!(chains.is_empty());
        let posted = &ep.qp().posted;
        assert_eq!(ep.qp().calls, 1, "one doorbell");
        assert_eq!(posted[0], (WrId(0), false), "a chain's head is untracked");
        assert!(
            posted[1].1 && posted[1].0 != WrId(0),
            "its last is signaled"
        );
        assert_eq!(
            posted[2],
            (WrId(0), false),
            "a chain without state is unsignaled"
        );
        assert!(posted[3].1);
        let (a, b) = (posted[1].0, posted[3].0);
        assert_eq!(ep.sq_in_use(), 4);
        assert_eq!(ep.unsignaled_pending(), 0);
        // b's completion gives back its own slot and the unsignaled one before it.
        assert_eq!(ep.complete(&done(b)).map(|d| d.ctx), Some("b"));
        assert_eq!(ep.sq_in_use(), 2);
        assert_eq!(ep.complete(&done(a)).map(|d| d.ctx), Some("a"));
        assert_eq!(ep.sq_in_use(), 0);
        assert_eq!(ep.in_flight(), 0);
    }

    #[test]
    fn a_batch_cut_short_keeps_whole_chains_and_hands_back_the_rest() {
        let qp = Recording {
            take: Some(3),
            ..Recording::default()
        };
        let mut ep: Endpoint<Recording, &str> = Endpoint::new(qp, 8);
        let mut chains = vec![
            Chain::new(2, Some("a")),
            Chain::new(1, None),
            Chain::new(1, Some("b")),
        ];
        let mut wrs = [send(); 4];
        let rej = ep.post_send_batch(&mut chains, &mut wrs).unwrap_err();
        assert_eq!(rej.ctxs, vec!["b"]);
        assert_eq!(rej.error.posted, 3);
        assert!(!ep.qp().broken, "no chain was torn");
        assert_eq!(ep.sq_in_use(), 3);
        assert_eq!(ep.unsignaled_pending(), 1);
        assert_eq!(ep.in_flight(), 1, "a stays in flight");

        // Cut inside a chain: that chain is torn, the QP is killed, both states come back.
        let qp = Recording {
            take: Some(1),
            ..Recording::default()
        };
        let mut ep: Endpoint<Recording, &str> = Endpoint::new(qp, 8);
        let mut chains = vec![Chain::new(2, Some("a")), Chain::new(1, Some("b"))];
        let mut wrs = [send(); 3];
        let rej = ep.post_send_batch(&mut chains, &mut wrs).unwrap_err();
        assert_eq!(rej.ctxs, vec!["a", "b"]);
        assert!(ep.qp().broken);
        assert_eq!(ep.in_flight(), 0);
    }

    #[test]
    fn a_batch_without_room_or_with_wrong_lengths_posts_nothing() {
        let mut ep: Endpoint<Recording, &str> = Endpoint::new(Recording::default(), 2);
        let mut chains = vec![Chain::new(2, Some("a")), Chain::new(1, Some("b"))];
        let mut wrs = [send(); 3];
        let rej = ep.post_send_batch(&mut chains, &mut wrs).unwrap_err();
        assert_eq!(rej.ctxs, vec!["a", "b"]);
        assert!(matches!(rej.error.error, FabricError::QueueFull { .. }));
        let mut chains = vec![Chain::new(2, Some("c"))];
        let mut wrs = [send(); 1];
        let rej = ep.post_send_batch(&mut chains, &mut wrs).unwrap_err();
        assert_eq!(rej.ctxs, vec!["c"]);
        assert_eq!(ep.qp().calls, 0);
        assert_eq!((ep.sq_in_use(), ep.in_flight()), (0, 0));
    }

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
