//! Array writes on the poller's own ring: the RAID engine's completion-driven write
//! ([`raidline_raid::WriteTask`]) driven from the poller loop, with no thread hop.
//!
//! A write the path takes runs as batches on the ring; each completion advances its task.
//! A write whose stripe is held (by another write or by maintenance) is parked and tried
//! again at every pass (a held log slot likewise); one the path declines (two holes in a
//! stripe, a torn write waiting for its redo, a log-cover record due...) or hands back after
//! a member error goes to the blocking engine, which may block and mark members failed: on
//! the array's maintenance thread (the namespace queue's [`super::super::backend::NsQueue::Maint`]),
//! with no storage worker thread. A torn write (a member write failed part-way) keeps the
//! array in reconstruct-write mode until its redo returns.
//!
//! Reads the direct path cannot take (a chunk on a missing member) run the same way as a
//! [`raidline_raid::ReadTask`]: one batch of member reads, the missing chunks rebuilt when it
//! completes; parked while a stripe they rebuild is held; redone by the blocking engine after
//! a member error.
//!
//! **Streams are gathered into whole stripes.** A write that ends inside a stripe, while the
//! write that continues it is already here with its data on the way (an RDMA READ), is held
//! until that data arrives; writes in flight that follow one another then go to the engine as
//! one task, and the stripes they cover together are written whole: no reads, parity from the
//! new data only (md's stripe cache does the same). A sequential 128 KiB stream on 4 members
//! with 64 KiB chunks (192 KiB stripes) becomes tasks of three writes and two whole stripes,
//! where each write alone was a reconstruct-write. Nothing is acknowledged before its task
//! completed, so the durability point is that of a single write.
//!
//! A write is held only while something it waits for is sure to come: a neighbour's RDMA
//! READ posted (its completion comes, with data or an error) or queued to be posted (behind
//! the initiator depth or the pacer's bucket, which both release it), or the task it
//! continues still running (its end brings the host's next command). How long that takes is
//! the fabric's and the drives' business, so no clock ends the wait early: a 2 ms limit wrote
//! two stripes in five of the lab's seqwrite-128k by reconstruct-write, where one RDMA READ
//! queued behind others takes tens of milliseconds. [`HOLD_MAX`] is a guard (a task or a flush
//! that takes that long); the poller sleeps while writes are held, until a completion or that
//! guard.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_fabric::Fabric;
use raidline_raid::{
    Array, ArrayBlock, Completion as Done, IoBuf, RaidError, ReadNext, ReadStart, ReadTask,
    Request, RequestKind, RingCompletion, WriteNext, WriteStart, WriteTask,
};

use super::super::backend::Backend;
use super::Poller;

/// Why [`Poller::start_task`] did not start a write task.
enum NotStarted {
    /// A stripe (or bitmap bit) it needs is held: try again later.
    Busy,
    /// Not for the ring path now (a torn write waits for its redo...): the workers' engine.
    Declined,
    /// The ring refused the request.
    Refused,
}

/// What [`Poller::start_array_write`] did with a request.
pub(super) enum Taken {
    /// On the ring, or parked: it completes through the poller.
    Yes,
    /// For the storage workers.
    No(Request),
}

/// The longest a write is held (a guard: each wait ends with a completion, see the module
/// documentation). Longer than an RDMA READ queued behind a window of others on a slow
/// fabric (the lab's rxe: about 2.6 ms per 128 KiB, so 40 ms for sixteen) and shorter than
/// any host's command timeout.
pub(super) const HOLD_MAX: Duration = Duration::from_millis(100);

/// The most writes gathered into one task.
const GATHER_MAX: usize = 16;

/// A write task on the ring: its namespace, and the requests in it (tag, first block,
/// bytes): the first, whose tag the task carries, then the gathered ones.
pub(super) struct Running {
    ns: usize,
    first: (u64, ArrayBlock, usize),
    more: Vec<(u64, ArrayBlock, usize)>,
    task: WriteTask,
}

/// Writes whose data is on its way, by namespace and block: how many, and when the last
/// one arrived.
type Coming = rustc_hash::FxHashMap<(usize, u64), (u32, Instant)>;

/// Write tasks on the ring and parked writes, per poller.
#[derive(Default)]
pub(super) struct Writes {
    /// Tasks with a batch on the ring, by tag.
    pub running: rustc_hash::FxHashMap<u64, Running>,
    /// Reads that rebuild chunks of a missing member, on the ring, by tag: (namespace, first
    /// block, bytes, task).
    pub reads: rustc_hash::FxHashMap<u64, (usize, ArrayBlock, usize, ReadTask)>,
    /// Writes waiting for a stripe: (namespace, request).
    pub parked: std::collections::VecDeque<(usize, Request)>,
    /// Redos of torn writes on the workers, by tag: the namespace (its array's torn count
    /// drops when the redo returns).
    pub torn: rustc_hash::FxHashMap<u64, usize>,
    /// Stream writes held for a neighbour whose data is on its way: (namespace, request,
    /// when it was held).
    pub held: Vec<(usize, Request, Instant)>,
    /// Array writes whose data is on its way, by (namespace, first block) ...
    coming_at: Coming,
    /// ... and by (namespace, block after the last).
    coming_end: Coming,
}

impl Writes {
    /// How long until the first held write reaches [`HOLD_MAX`], if any is held.
    pub(super) fn held_for(&self) -> Option<Duration> {
        let now = Instant::now();
        self.held
            .iter()
            .map(|(_, _, since)| (*since + HOLD_MAX).saturating_duration_since(now))
            .min()
    }
}

/// Counts a write on its way in `map`.
fn note(map: &mut Coming, key: (usize, u64), now: Instant) {
    let e = map.entry(key).or_insert((0, now));
    e.0 += 1;
    e.1 = now;
}

/// Forgets one write on its way.
fn forget(map: &mut Coming, key: (usize, u64)) {
    if let Some(e) = map.get_mut(&key) {
        e.0 -= 1;
        if e.0 == 0 {
            map.remove(&key);
        }
    }
}

/// Whether a write is on its way at `key` (within the guard of [`HOLD_MAX`]).
fn on_its_way(map: &Coming, key: (usize, u64), now: Instant) -> bool {
    map.get(&key)
        .is_some_and(|&(n, at)| n > 0 && now.saturating_duration_since(at) < HOLD_MAX)
}

/// A run of held writes that follow one another: a range of the (sorted) held list, its
/// namespace, its first block and the block after its last.
struct Run {
    held: std::ops::Range<usize>,
    ns: usize,
    start: u64,
    end: u64,
}

fn array_of(backend: &Backend) -> Option<&Arc<Array>> {
    match backend {
        Backend::Array(a) => Some(a),
        Backend::Pending(slot) => slot.get(),
        Backend::File(_) | Backend::Null(_) => None,
    }
}

/// The block after the last of a write of `len` bytes at `lba`.
fn end_block(array: &Array, lba: u64, len: usize) -> u64 {
    lba + (len / array.geometry().block_bytes()) as u64
}

impl Writes {
    /// Takes an ended task out of its entry (it is there: `on_write_task` found it by tag).
    fn end_run(&mut self, tag: u64) -> Running {
        let Some(run) = self.running.remove(&tag) else {
            unreachable!("the task is in its entry")
        };
        run
    }
}

impl<F: Fabric> Poller<F> {
    /// Starts an array write on the ring, parks it, or gives it back for the workers.
    /// `retry`: a parked write tried again.
    pub(super) fn start_array_write(&mut self, ns: usize, req: Request, retry: bool) -> Taken {
        // While draining, what may wait goes to the workers, which may block: the maintenance
        // thread that marks an array dirty is on its way out, and a drain must not wait for
        // a parked write.
        if self.draining || req.kind != RequestKind::Write {
            return Taken::No(req);
        }
        match self.start_task(ns, req, Vec::new()) {
            Ok(()) => Taken::Yes,
            Err((NotStarted::Busy, req, _)) => self.park(ns, req, retry),
            Err((_, req, _)) => Taken::No(req),
        }
    }

    /// Starts `first`, and the writes of `more` (each continuing where the one before
    /// ended), as one write task on the ring. Refused: the requests come back, with their
    /// buffers, and why.
    #[allow(clippy::result_large_err, clippy::type_complexity)]
    fn start_task(
        &mut self,
        ns: usize,
        mut first: Request,
        mut more: Vec<Request>,
    ) -> Result<(), (NotStarted, Request, Vec<Request>)> {
        let shared = &self.shared;
        let (Some(ring), Some(array)) =
            (self.ring.as_mut(), array_of(&shared.namespaces[ns].backend))
        else {
            return Err((NotStarted::Declined, first, more));
        };
        if first.buf.is_none() || more.iter().any(|r| r.buf.is_none()) {
            return Err((NotStarted::Declined, first, more));
        }
        let (tag, lba, len) = (first.tag, first.lba, first.len);
        let bufs = more
            .iter_mut()
            .filter_map(|r| r.buf.take().map(|b| (b, r.len)))
            .collect();
        let Some(buf) = first.buf.take() else {
            return Err((NotStarted::Declined, first, more));
        };
        let (why, buf, bufs) = match array.start_write(tag, lba, len, buf, bufs, true) {
            WriteStart::Started(task, rr) => match ring.submit(rr) {
                Ok(()) => {
                    let n = 1 + more.len() as u64;
                    let dp = &shared.data_path;
                    dp.ring_requests.fetch_add(n, Ordering::Relaxed);
                    if n > 1 {
                        dp.gathered_writes.fetch_add(n, Ordering::Relaxed);
                    }
                    let running = Running {
                        ns,
                        first: (tag, lba, len),
                        more: more.iter().map(|r| (r.tag, r.lba, r.len)).collect(),
                        task,
                    };
                    self.writes.running.insert(tag, running);
                    return Ok(());
                }
                Err((rr, e)) => {
                    tracing::debug!("poller {}: ring refused a write: {e}", self.id);
                    let (buf, bufs) = task.abort(array, rr);
                    (NotStarted::Refused, buf, bufs)
                }
            },
            WriteStart::Busy(buf, bufs) => (NotStarted::Busy, Some(buf), bufs),
            WriteStart::Declined(buf, bufs) => (NotStarted::Declined, Some(buf), bufs),
        };
        first.buf = buf;
        for (r, b) in more.iter_mut().zip(bufs) {
            r.buf = Some(b);
        }
        Err((why, first, more))
    }

    /// Parks a request whose stripe is held, to be tried again at every pass (counted once:
    /// not when `retry`).
    fn park(&mut self, ns: usize, req: Request, retry: bool) -> Taken {
        if !retry {
            let dp = &self.shared.data_path;
            dp.parked_writes.fetch_add(1, Ordering::Relaxed);
        }
        self.writes.parked.push_back((ns, req));
        Taken::Yes
    }

    /// An array write's data is on its way: its RDMA READ is queued at `now`, to be posted as
    /// soon as the initiator depth and the pacer's bucket let it (both release it: an earlier
    /// read's completion, the bucket's due time). Its completion, whatever its status, ends
    /// that with [`Poller::write_arrived`]; so does a queue that closes before it was posted.
    ///
    /// Counted from the queue, not from the post: a paced queue pair's reads wait in its bucket,
    /// and a write held for a neighbour that was not yet "coming" went alone, by
    /// reconstruct-write (rtt-aimd on the lab's seqwrite-128k: 1,398-1,680 stripes a phase,
    /// against 58-137 unpaced).
    pub(super) fn write_coming(&mut self, ns: usize, lba: u64, len: usize, now: Instant) {
        let Some(end) = self.array_end(ns, lba, len) else {
            return;
        };
        note(&mut self.writes.coming_at, (ns, lba), now);
        note(&mut self.writes.coming_end, (ns, end), now);
        // A guard: every READ's completion forgets its write (see `write_arrived`).
        if self.writes.coming_at.len() > 4096 {
            for map in [&mut self.writes.coming_at, &mut self.writes.coming_end] {
                map.retain(|_, (_, at)| now.saturating_duration_since(*at) < HOLD_MAX);
            }
        }
    }

    /// An array write's RDMA READ was posted at `now`: the [`HOLD_MAX`] guard counts from
    /// here, not from when it was queued (see [`Poller::write_coming`]).
    pub(super) fn write_fetching(&mut self, ns: usize, lba: u64, len: usize, now: Instant) {
        let Some(end) = self.array_end(ns, lba, len) else {
            return;
        };
        for (map, key) in [
            (&mut self.writes.coming_at, (ns, lba)),
            (&mut self.writes.coming_end, (ns, end)),
        ] {
            if let Some(e) = map.get_mut(&key) {
                e.1 = now;
            }
        }
    }

    /// An array write's RDMA READ completed, with its data or an error, or was never posted
    /// (see [`Poller::write_coming`]).
    pub(super) fn write_arrived(&mut self, ns: usize, lba: u64, len: usize) {
        let Some(end) = self.array_end(ns, lba, len) else {
            return;
        };
        forget(&mut self.writes.coming_at, (ns, lba));
        forget(&mut self.writes.coming_end, (ns, end));
    }

    /// The block after an array write of `len` bytes at `lba` on namespace `ns` (`None`: not
    /// an array namespace): the other key of a write on its way.
    fn array_end(&self, ns: usize, lba: u64, len: usize) -> Option<u64> {
        array_of(&self.shared.namespaces[ns].backend).map(|a| end_block(a, lba, len))
    }

    /// A host write whose data is here: held to be gathered with its neighbours into whole
    /// stripes when it ends inside a stripe (see the module documentation), else started.
    pub(super) fn gather_array_write(&mut self, ns: usize, req: Request) -> Taken {
        let gatherable = !self.draining
            && self.ring.is_some()
            && req.kind == RequestKind::Write
            && array_of(&self.shared.namespaces[ns].backend).is_some_and(|a| {
                let geo = a.geometry();
                let (cb, sb) = (geo.chunk_blocks(), geo.stripe_data_blocks());
                let end = end_block(a, req.lba.0, req.len);
                // Whole chunks (a chunk never straddles two buffers), not whole stripes.
                req.len % geo.block_bytes() == 0
                    && req.lba.0 % cb == 0
                    && end % cb == 0
                    && !(req.lba.0 % sb == 0 && end % sb == 0)
            });
        if !gatherable {
            return self.start_array_write(ns, req, false);
        }
        let now = self.clock();
        self.writes.held.push((ns, req, now));
        self.start_held();
        Taken::Yes
    }

    /// Starts the held runs that are ready: whole at both ends, or with no neighbour on its
    /// way, or held too long, or as long as one task takes. Returns how many requests left.
    pub(super) fn start_held(&mut self) -> usize {
        if self.writes.held.is_empty() {
            return 0;
        }
        let now = self.clock();
        let shared = &self.shared;
        let held = &mut self.writes.held;
        held.sort_unstable_by_key(|(ns, r, _)| (*ns, r.lba.0));
        // Runs: consecutive entries of the sorted list that follow one another, each as long
        // as one task takes at most.
        let mut runs: Vec<Run> = Vec::new();
        for (i, (ns, r, _)) in held.iter().enumerate() {
            let Some(array) = array_of(&shared.namespaces[*ns].backend) else {
                continue;
            };
            let sb = array.geometry().stripe_data_blocks();
            let end = end_block(array, r.lba.0, r.len);
            match runs.last_mut() {
                Some(run)
                    if run.ns == *ns
                        && run.held.end == i
                        && run.end == r.lba.0
                        && run.held.len() < GATHER_MAX
                        && (end - 1) / sb - run.start / sb
                            < raidline_raid::ROUND_STRIPES as u64 =>
                {
                    run.held.end = i + 1;
                    run.end = end;
                }
                _ => runs.push(Run {
                    held: i..i + 1,
                    ns: *ns,
                    start: r.lba.0,
                    end,
                }),
            }
        }
        // Where the running tasks end: a run that continues one is the front of a stream,
        // whose next write the host sends when that task completes.
        let fronts: Vec<(usize, u64)> = self
            .writes
            .running
            .values()
            .filter_map(|r| {
                let array = array_of(&shared.namespaces[r.ns].backend)?;
                let (_, lba, len) = r.more.last().unwrap_or(&r.first);
                Some((r.ns, end_block(array, lba.0, *len)))
            })
            .collect();
        runs.retain(|run| {
            let Some(array) = array_of(&shared.namespaces[run.ns].backend) else {
                return false;
            };
            let sb = array.geometry().stripe_data_blocks();
            // Wait at the head for a write whose data is on its way; at the tail for one on
            // its way, or for the next of a stream while the write before it runs.
            let head = run.start % sb == 0
                || !on_its_way(&self.writes.coming_end, (run.ns, run.start), now);
            let tail = run.end % sb == 0
                || !(on_its_way(&self.writes.coming_at, (run.ns, run.end), now)
                    || fronts.contains(&(run.ns, run.start)));
            let long = run.held.len() >= GATHER_MAX
                || (run.end - 1) / sb - run.start / sb + 1 >= raidline_raid::ROUND_STRIPES as u64;
            let old = held[run.held.clone()]
                .iter()
                .any(|(_, _, since)| now.saturating_duration_since(*since) >= HOLD_MAX);
            (head && tail) || long || old || self.draining
        });
        // Out of the held list, the last run first (the earlier ranges stay valid).
        let taken: Vec<(usize, Vec<Request>)> = runs
            .iter()
            .rev()
            .map(|run| {
                (
                    run.ns,
                    held.drain(run.held.clone()).map(|(_, r, _)| r).collect(),
                )
            })
            .collect();
        let mut moved = 0;
        for (ns, reqs) in taken.into_iter().rev() {
            moved += self.start_run(ns, reqs);
        }
        moved
    }

    /// Starts held writes that follow one another as one task. Returns how many requests
    /// left the held list (a run whose stripe is busy goes back to it).
    fn start_run(&mut self, ns: usize, reqs: Vec<Request>) -> usize {
        let n = reqs.len();
        if self.draining || n == 1 {
            return self.start_each(ns, reqs.into_iter());
        }
        let mut reqs = reqs.into_iter();
        let Some(first) = reqs.next() else {
            return 0;
        };
        let (why, first, more) = match self.start_task(ns, first, reqs.collect()) {
            Ok(()) => return n,
            Err(refused) => refused,
        };
        let all = std::iter::once(first).chain(more);
        match why {
            // A stripe is held (a write that started before its neighbour was here, or
            // maintenance): the run waits, whole, and is tried again at the next pass.
            NotStarted::Busy => {
                let now = self.clock();
                self.writes.held.extend(all.map(|r| (ns, r, now)));
                0
            }
            NotStarted::Refused => {
                for req in all {
                    self.hand_to_workers(ns, req);
                }
                n
            }
            // Declined together: each on its own (a run of a degraded array goes to the
            // workers).
            NotStarted::Declined => self.start_each(ns, all),
        }
    }

    /// Starts each of `reqs` as a write of its own, or hands it to the workers. Returns how
    /// many there were.
    fn start_each(&mut self, ns: usize, reqs: impl Iterator<Item = Request>) -> usize {
        let mut n = 0;
        for req in reqs {
            n += 1;
            if let Taken::No(req) = self.start_array_write(ns, req, false) {
                self.hand_to_workers(ns, req);
            }
        }
        n
    }

    /// Starts an array read the direct path could not take (a chunk to rebuild from the
    /// other members) on the ring, parks it while a stripe it rebuilds is held, or gives it
    /// back for the workers. `retry`: a parked read tried again.
    pub(super) fn start_array_read(&mut self, ns: usize, mut req: Request, retry: bool) -> Taken {
        let shared = &self.shared;
        if self.draining || req.kind != RequestKind::Read {
            return Taken::No(req);
        }
        let (Some(ring), Some(array)) =
            (self.ring.as_mut(), array_of(&shared.namespaces[ns].backend))
        else {
            return Taken::No(req);
        };
        let Some(buf) = req.buf.take() else {
            return Taken::No(req);
        };
        match array.start_read(req.tag, req.lba, req.len, buf, true) {
            ReadStart::Started(task, rr) => match ring.submit(rr) {
                Ok(()) => {
                    self.writes
                        .reads
                        .insert(req.tag, (ns, req.lba, req.len, task));
                    shared
                        .data_path
                        .ring_requests
                        .fetch_add(1, Ordering::Relaxed);
                    Taken::Yes
                }
                Err((rr, e)) => {
                    tracing::debug!("poller {}: ring refused a read: {e}", self.id);
                    req.buf = task.abort(array, rr);
                    Taken::No(req)
                }
            },
            ReadStart::Busy(buf) => {
                req.buf = Some(buf);
                self.park(ns, req, retry)
            }
            ReadStart::Declined(buf) => {
                req.buf = Some(buf);
                Taken::No(req)
            }
        }
    }

    /// A read task's request completed on the ring: `Err` gives it back when the tag is not
    /// a read task's.
    #[allow(clippy::result_large_err)]
    pub(super) fn on_read_task(&mut self, c: RingCompletion) -> Result<(), RingCompletion> {
        let Some((ns, lba, len, mut task)) = self.writes.reads.remove(&c.tag) else {
            return Err(c);
        };
        let shared = &self.shared;
        let Some(array) = array_of(&shared.namespaces[ns].backend) else {
            unreachable!("a read task's namespace serves its array")
        };
        let tag = c.tag;
        match task.complete(array, c) {
            ReadNext::Done(buf) => self.on_storage(Done {
                tag,
                buf,
                result: Ok(()),
            }),
            ReadNext::Redo(buf) => {
                tracing::debug!(
                    "poller {}: array read failed on the ring; the engine redoes it",
                    self.id
                );
                let req = Request {
                    tag,
                    kind: RequestKind::Read,
                    lba,
                    len,
                    buf,
                };
                self.hand_to_workers(ns, req);
            }
        }
        Ok(())
    }

    /// Tries the parked writes again (once each); returns how many left the queue.
    pub(super) fn retry_parked(&mut self) -> usize {
        let mut moved = 0;
        for _ in 0..self.writes.parked.len() {
            let Some((ns, req)) = self.writes.parked.pop_front() else {
                break;
            };
            let before = self.writes.parked.len();
            let taken = match req.kind {
                RequestKind::Read => self.start_array_read(ns, req, true),
                _ => self.start_array_write(ns, req, true),
            };
            match taken {
                Taken::Yes if self.writes.parked.len() > before => {}
                Taken::Yes => moved += 1,
                Taken::No(req) => {
                    moved += 1;
                    self.hand_to_workers(ns, req);
                }
            }
        }
        moved
    }

    /// A request of a write task completed on the ring: `Err` gives it back when the tag is
    /// not a task's.
    // The completion comes back by value when it is not a task's (no allocation).
    #[allow(clippy::result_large_err)]
    pub(super) fn on_write_task(&mut self, c: RingCompletion) -> Result<(), RingCompletion> {
        let shared = &self.shared;
        // The task stays in its entry while it runs (a task is large: moving it out and back
        // per completion cost more than the rest of the step); it leaves when it ends.
        let Some(run) = self.writes.running.get_mut(&c.tag) else {
            return Err(c);
        };
        // An array does not leave its namespace while the daemon runs.
        let Some(array) = array_of(&shared.namespaces[run.ns].backend) else {
            unreachable!("a write task's namespace serves its array")
        };
        let tag = run.first.0;
        match run.task.complete(array, c) {
            WriteNext::Submit(rr) => {
                let Some(ring) = self.ring.as_mut() else {
                    unreachable!("a task completed on a ring")
                };
                if let Err((rr, e)) = ring.submit(rr) {
                    tracing::debug!("poller {}: ring refused a write's batch: {e}", self.id);
                    let run = self.writes.end_run(tag);
                    let (buf, more) = run.task.abort(array, rr);
                    self.redo_run(run.ns, run.first, buf, run.more, more, false);
                }
            }
            WriteNext::Done(buf, more) => {
                let run = self.writes.end_run(tag);
                self.on_storage(Done {
                    tag,
                    buf,
                    result: Ok(()),
                });
                for ((tag, ..), buf) in run.more.into_iter().zip(more) {
                    self.on_storage(Done {
                        tag,
                        buf: Some(buf),
                        result: Ok(()),
                    });
                }
            }
            WriteNext::Redo { buf, more, torn } => {
                let run = self.writes.end_run(tag);
                self.redo_run(run.ns, run.first, buf, run.more, more, torn)
            }
        }
        Ok(())
    }

    /// Hands each write of a task the ring could not finish to the workers' engine.
    fn redo_run(
        &mut self,
        ns: usize,
        (tag, lba, len): (u64, ArrayBlock, usize),
        buf: Option<IoBuf>,
        reqs: Vec<(u64, ArrayBlock, usize)>,
        bufs: Vec<IoBuf>,
        torn: bool,
    ) {
        self.redo_write(ns, tag, lba, len, buf, torn);
        let mut bufs = bufs.into_iter();
        for (tag, lba, len) in reqs {
            self.redo_write(ns, tag, lba, len, bufs.next(), torn);
        }
    }

    /// Hands a write the ring could not finish to the workers' engine.
    fn redo_write(
        &mut self,
        ns: usize,
        tag: u64,
        lba: ArrayBlock,
        len: usize,
        buf: Option<IoBuf>,
        torn: bool,
    ) {
        tracing::debug!(
            "poller {}: array write failed on the ring (torn: {torn}); the engine redoes it",
            self.id
        );
        if torn {
            self.writes.torn.insert(tag, ns);
        }
        let req = Request {
            tag,
            kind: RequestKind::Write,
            lba,
            len,
            buf,
        };
        self.hand_to_workers(ns, req);
    }

    /// Submits to the workers; if they are gone, the request fails.
    fn hand_to_workers(&mut self, ns: usize, req: Request) {
        let tag = req.tag;
        if let Err(back) = self.submit_to_workers(ns, req) {
            tracing::error!("namespace storage workers are gone");
            self.on_storage(Done {
                tag,
                buf: back.buf,
                result: Err(RaidError::State("storage workers are gone")),
            });
        }
    }

    /// A worker completion: the end of a torn write's redo lets the array use old parity
    /// again.
    pub(super) fn note_worker_done(&mut self, tag: u64) {
        if let Some(ns) = self.writes.torn.remove(&tag) {
            if let Some(a) = array_of(&self.shared.namespaces[ns].backend) {
                a.end_torn();
            }
        }
    }
}
