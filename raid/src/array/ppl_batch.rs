//! Group commit for partial-parity-log writes: concurrent write rounds (threads) hand their
//! log writes to one leader, which submits them together — one submission (and one device
//! notification) for several requests' entries, md's io_unit idea without a single log
//! thread.
//!
//! Invariants: a caller returns only once each of its writes completed (with its own
//! result), so its data and parity writes still start after its entries are on the member;
//! at most one leader runs at a time; a caller whose writes are pending when no leader runs
//! becomes the leader, so nothing waits for a leader that never comes. The writes own their
//! buffers (moved in and handed back), so no borrow crosses threads.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::MemberError;
use crate::geometry::MemberIdx;
use crate::io::{Executor, MemberOp};
use crate::member::{AlignedBuf, Member};

/// One log write: `buf[..len]` at byte `at` of `member`.
#[derive(Debug)]
pub(crate) struct LogWrite {
    pub role: MemberIdx,
    pub member: Arc<dyn Member>,
    pub at: u64,
    pub len: usize,
    pub buf: AlignedBuf,
}

/// A finished log write: its buffer back, and the result.
#[derive(Debug)]
pub(crate) struct Written {
    pub buf: AlignedBuf,
    pub result: Result<(), MemberError>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    pending: Vec<(u64, LogWrite)>,
    done: HashMap<u64, Written>,
    leading: bool,
}

/// The group-commit point for log writes (one per array).
#[derive(Debug, Default)]
pub(crate) struct LogBatcher {
    state: Mutex<State>,
    changed: Condvar,
}

impl LogBatcher {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `writes` (with whatever other callers have pending) and returns them finished,
    /// in order, once every one of them completed.
    pub(crate) fn write<E: Executor + ?Sized>(
        &self,
        exec: &mut E,
        writes: Vec<LogWrite>,
    ) -> Vec<Written> {
        let mut st = self.lock();
        let first = st.next;
        st.next += writes.len() as u64;
        let ids = first..st.next;
        st.pending.extend(ids.clone().zip(writes));
        loop {
            if ids.clone().all(|id| st.done.contains_key(&id)) {
                return ids.filter_map(|id| st.done.remove(&id)).collect();
            }
            if st.leading {
                st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            st.leading = true;
            let batch = std::mem::take(&mut st.pending);
            drop(st);
            let mut ops: Vec<MemberOp<'_>> = batch
                .iter()
                .map(|(_, w)| MemberOp::write(w.role, &*w.member, w.at, &w.buf[..w.len]))
                .collect();
            exec.execute(&mut ops);
            let results: Vec<Result<(), MemberError>> = ops
                .into_iter()
                .map(|op| {
                    op.result.unwrap_or_else(|| {
                        Err(MemberError::Io {
                            member: op.member.name().to_string(),
                            offset: op.offset,
                            source: std::io::Error::other("executor returned without running it"),
                        })
                    })
                })
                .collect();
            let others = batch.iter().any(|(id, _)| !ids.contains(id));
            st = self.lock();
            for ((id, w), result) in batch.into_iter().zip(results) {
                st.done.insert(id, Written { buf: w.buf, result });
            }
            st.leading = false;
            // Wake the callers whose writes were in the batch, and any that queued meanwhile
            // (one of them leads next).
            if others || !st.pending.is_empty() {
                self.changed.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::MemMember;
    use crate::SyncExecutor;

    #[test]
    fn concurrent_callers_get_their_own_writes_back_completed() {
        let m: Arc<dyn Member> = Arc::new(MemMember::new("m", 1 << 20));
        let batcher = Arc::new(LogBatcher::default());
        let threads: Vec<_> = (0..6u8)
            .map(|t| {
                let (m, batcher) = (m.clone(), batcher.clone());
                std::thread::spawn(move || {
                    for i in 0..20u8 {
                        let writes = (0..2u8)
                            .map(|k| {
                                let mut buf = AlignedBuf::new(4096, 4096);
                                buf.fill(t * 40 + i * 2 + k);
                                let slot =
                                    (u64::from(t) * 40 + u64::from(i) * 2 + u64::from(k)) % 256;
                                LogWrite {
                                    role: MemberIdx(0),
                                    member: m.clone(),
                                    at: slot * 4096,
                                    len: 4096,
                                    buf,
                                }
                            })
                            .collect();
                        let done = batcher.write(&mut SyncExecutor, writes);
                        assert_eq!(done.len(), 2);
                        for (k, d) in done.iter().enumerate() {
                            assert!(d.result.is_ok());
                            // Its own buffer, in order.
                            assert!(d.buf.iter().all(|&b| b == t * 40 + i * 2 + k as u8));
                            // Completed: the member holds it now.
                            let slot = (u64::from(t) * 40 + u64::from(i) * 2 + k as u64) % 256;
                            let mut back = vec![0u8; 4096];
                            m.read_at(slot * 4096, &mut back).unwrap();
                            assert!(back.iter().all(|&b| b == t * 40 + i * 2 + k as u8));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = batcher.lock();
        assert!(st.pending.is_empty() && st.done.is_empty() && !st.leading);
    }
}
