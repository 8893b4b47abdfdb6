//! Array writes on the poller's own ring: the RAID engine's completion-driven write
//! ([`raidline_raid::WriteTask`]) driven from the poller loop, with no thread hop.
//!
//! A write the path takes runs as batches on the ring; each completion advances its task.
//! A write whose stripe is held (by another write or by maintenance) is parked and tried
//! again at every pass; one the path declines (degraded, partial-parity log needed...) or
//! hands back after a member error goes to the namespace's storage workers, whose
//! synchronous engine may block and mark members failed. A torn write (a member write failed
//! part-way) keeps the array in reconstruct-write mode until its redo on the workers returns.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use raidline_fabric::Fabric;
use raidline_raid::{
    Array, ArrayBlock, Completion as Done, IoBuf, RaidError, Request, RequestKind, RingCompletion,
    WriteNext, WriteStart, WriteTask,
};

use super::super::backend::Backend;
use super::Poller;

/// What [`Poller::start_array_write`] did with a request.
pub(super) enum Taken {
    /// On the ring, or parked: it completes through the poller.
    Yes,
    /// For the storage workers.
    No(Request),
}

/// Write tasks on the ring and parked writes, per poller.
#[derive(Default)]
pub(super) struct Writes {
    /// Tasks with a batch on the ring, by tag: (namespace, first block, bytes, task).
    pub running: rustc_hash::FxHashMap<u64, (usize, ArrayBlock, usize, WriteTask)>,
    /// Writes waiting for a stripe: (namespace, request).
    pub parked: std::collections::VecDeque<(usize, Request)>,
    /// Redos of torn writes on the workers, by tag: the namespace (its array's torn count
    /// drops when the redo returns).
    pub torn: rustc_hash::FxHashMap<u64, usize>,
}

fn array_of(backend: &Backend) -> Option<&Arc<Array>> {
    match backend {
        Backend::Array(a) => Some(a),
        Backend::Pending(slot) => slot.get(),
        Backend::File(_) | Backend::Null(_) => None,
    }
}

impl<F: Fabric> Poller<F> {
    /// Starts an array write on the ring, parks it, or gives it back for the workers.
    /// `retry`: a parked write tried again.
    pub(super) fn start_array_write(&mut self, ns: usize, mut req: Request, retry: bool) -> Taken {
        let shared = self.shared.clone();
        // While draining, what may wait goes to the workers, which may block: the maintenance
        // thread that marks an array dirty is on its way out, and a drain must not wait for
        // a parked write.
        if self.draining {
            return Taken::No(req);
        }
        let (Some(ring), Some(array), RequestKind::Write) = (
            self.ring.as_mut(),
            array_of(&shared.namespaces[ns].backend),
            req.kind,
        ) else {
            return Taken::No(req);
        };
        let Some(buf) = req.buf.take() else {
            return Taken::No(req);
        };
        match array.start_write(req.tag, req.lba, req.len, buf, true) {
            WriteStart::Started(task, rr) => match ring.submit(rr) {
                Ok(()) => {
                    self.writes
                        .running
                        .insert(req.tag, (ns, req.lba, req.len, task));
                    shared
                        .data_path
                        .ring_requests
                        .fetch_add(1, Ordering::Relaxed);
                    Taken::Yes
                }
                Err((rr, e)) => {
                    tracing::debug!("poller {}: ring refused a write: {e}", self.id);
                    req.buf = task.abort(array, rr);
                    Taken::No(req)
                }
            },
            WriteStart::Busy(buf) => {
                req.buf = Some(buf);
                if !retry {
                    shared
                        .data_path
                        .parked_writes
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.writes.parked.push_back((ns, req));
                Taken::Yes
            }
            WriteStart::Declined(buf) => {
                req.buf = Some(buf);
                Taken::No(req)
            }
        }
    }

    /// Tries the parked writes again (once each); returns how many left the queue.
    pub(super) fn retry_parked(&mut self) -> usize {
        let mut moved = 0;
        for _ in 0..self.writes.parked.len() {
            let Some((ns, req)) = self.writes.parked.pop_front() else {
                break;
            };
            let before = self.writes.parked.len();
            match self.start_array_write(ns, req, true) {
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
        let shared = self.shared.clone();
        let tag = c.tag;
        let array = match self.writes.running.get(&tag) {
            // An array does not leave its namespace while the daemon runs.
            Some(&(ns, ..)) => array_of(&shared.namespaces[ns].backend),
            None => return Err(c),
        };
        let (Some(array), Some((ns, lba, len, mut task))) =
            (array, self.writes.running.remove(&tag))
        else {
            return Err(c);
        };
        match task.complete(array, c) {
            WriteNext::Submit(rr) => {
                let Some(ring) = self.ring.as_mut() else {
                    unreachable!("a task completed on a ring")
                };
                match ring.submit(rr) {
                    Ok(()) => {
                        self.writes.running.insert(tag, (ns, lba, len, task));
                    }
                    Err((rr, e)) => {
                        tracing::debug!("poller {}: ring refused a write's batch: {e}", self.id);
                        let buf = task.abort(array, rr);
                        self.redo_write(ns, tag, lba, len, buf, false);
                    }
                }
            }
            WriteNext::Done(buf) => {
                self.on_storage(Done {
                    tag,
                    buf,
                    result: Ok(()),
                });
            }
            WriteNext::Redo { buf, torn } => self.redo_write(ns, tag, lba, len, buf, torn),
        }
        Ok(())
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
