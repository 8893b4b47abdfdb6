//! [`RaidQueue`]: a non-blocking front end to the synchronous array, for poller threads.
//!
//! A poller must not block on member I/O (it also polls its RDMA completion queue). It hands
//! requests to a `RaidQueue` — `submit` never blocks — and collects finished requests with
//! `poll`, which never blocks either. Behind the queue, worker threads, each with its own
//! executor (its own io_uring), run requests through [`Array`]; so one poller gets as many
//! requests in flight as the queue has workers.
//!
//! Buffers stay zero-copy: a request owns an [`IoBuf`] cut from the target's registered pool;
//! the worker hands its bytes straight to the array, and the completion gives the same
//! `IoBuf` back. Invariants: every submitted request completes exactly once (also when the
//! array fails: with the error); dropping the queue stops accepting work, lets the workers
//! finish what was submitted, and joins them.

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::array::Array;
use crate::error::RaidError;
use crate::geometry::ArrayBlock;
use crate::io::Executor;
use crate::sys::buf::IoBuf;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Read `len` bytes at `lba` into the buffer.
    Read,
    /// Write the buffer's first `len` bytes at `lba`.
    Write,
    /// Make completed writes durable (`len` and `lba` ignored; no buffer needed).
    Flush,
}

/// One request.
#[derive(Debug)]
pub struct Request {
    /// Caller's tag, returned in the completion (e.g. the NVMe command id).
    pub tag: u64,
    /// Kind.
    pub kind: RequestKind,
    /// First block.
    pub lba: ArrayBlock,
    /// Bytes (a whole number of blocks, at most the buffer's length).
    pub len: usize,
    /// The buffer (from the registered pool); `None` only for `Flush`.
    pub buf: Option<IoBuf>,
}

/// A finished request: its tag, its buffer back, and the result.
#[derive(Debug)]
pub struct Completion {
    /// The request's tag.
    pub tag: u64,
    /// The request's buffer, returned.
    pub buf: Option<IoBuf>,
    /// Outcome.
    pub result: Result<(), RaidError>,
}

/// Non-blocking request queue over an [`Array`], served by worker threads.
pub struct RaidQueue {
    jobs: Option<Sender<Request>>,
    done: Receiver<Completion>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RaidQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaidQueue")
            .field("workers", &self.workers.len())
            .finish()
    }
}

impl RaidQueue {
    /// Starts `workers` threads; `make_executor` builds each worker's executor (e.g. a
    /// `UringExecutor` with the pool registered) on that worker's thread.
    pub fn new<F, E>(array: Arc<Array>, workers: usize, make_executor: F) -> std::io::Result<Self>
    where
        F: Fn() -> std::io::Result<E> + Send + Sync + 'static,
        E: Executor + 'static,
    {
        Self::with_notify(array, workers, make_executor, Arc::new(|| {}))
    }

    /// [`RaidQueue::new`], and `notify` is called after every completion is queued, so a poller
    /// that sleeps on a file descriptor can be woken (e.g. by a byte written to a socket).
    pub fn with_notify<F, E>(
        array: Arc<Array>,
        workers: usize,
        make_executor: F,
        notify: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self>
    where
        F: Fn() -> std::io::Result<E> + Send + Sync + 'static,
        E: Executor + 'static,
    {
        let (jobs_tx, jobs_rx) = channel::<Request>();
        let (done_tx, done_rx) = channel::<Completion>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let make = Arc::new(make_executor);
        let mut handles = Vec::with_capacity(workers.max(1));
        for i in 0..workers.max(1) {
            let (array, jobs_rx, done_tx, make, notify) = (
                array.clone(),
                jobs_rx.clone(),
                done_tx.clone(),
                make.clone(),
                notify.clone(),
            );
            let (ready_tx, ready_rx) = channel::<std::io::Result<()>>();
            let h = std::thread::Builder::new()
                .name(format!("raid-worker-{i}"))
                .spawn(move || {
                    let mut exec = match make() {
                        Ok(e) => {
                            let _ = ready_tx.send(Ok(()));
                            e
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    loop {
                        let next = jobs_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(req) = next else { return };
                        let done = serve_request(&array, &mut exec, req);
                        if done_tx.send(done).is_err() {
                            return;
                        }
                        notify();
                    }
                })?;
            ready_rx
                .recv()
                .map_err(|_| std::io::Error::other("raid worker died during start"))??;
            handles.push(h);
        }
        Ok(RaidQueue {
            jobs: Some(jobs_tx),
            done: done_rx,
            workers: handles,
        })
    }

    /// Queues a request; never blocks. Hands it back if the workers are gone.
    pub fn submit(&self, req: Request) -> Result<(), Request> {
        match &self.jobs {
            Some(tx) => tx.send(req).map_err(|e| e.0),
            None => Err(req),
        }
    }

    /// Moves finished requests into `out`; never blocks. Returns how many.
    pub fn poll(&self, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        loop {
            match self.done.try_recv() {
                Ok(c) => {
                    out.push(c);
                    n += 1;
                }
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return n,
            }
        }
    }

    /// Waits for the next completion (for tests and shutdown paths, not pollers).
    pub fn wait(&self) -> Option<Completion> {
        self.done.recv().ok()
    }
}

impl Drop for RaidQueue {
    fn drop(&mut self) {
        // Closing the job channel lets each worker finish queued work and exit.
        self.jobs = None;
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs one request through the blocking engine with `exec`, on the calling thread (a
/// worker's, or whichever thread serves requests a poller hands back).
pub fn serve_request<E: Executor + ?Sized>(
    array: &Array,
    exec: &mut E,
    mut req: Request,
) -> Completion {
    let result = match (req.kind, req.buf.as_mut()) {
        (RequestKind::Flush, _) => array.flush(),
        (_, None) => Err(RaidError::BufferSize {
            len: req.len,
            block: array.geometry().block_bytes(),
        }),
        (_, Some(buf)) if req.len > buf.len() => Err(RaidError::BufferSize {
            len: req.len,
            block: array.geometry().block_bytes(),
        }),
        (RequestKind::Read, Some(buf)) => array.read(exec, req.lba, &mut buf[..req.len]),
        (RequestKind::Write, Some(buf)) => array.write(exec, req.lba, &buf[..req.len]),
    };
    Completion {
        tag: req.tag,
        buf: req.buf,
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::ArrayConfig;
    use crate::geometry::ChunkSize;
    use crate::io::SyncExecutor;
    use crate::member::{MemMember, Member};
    use crate::parity::CpuXor;
    use crate::sys::buf::BufferArena;

    #[test]
    fn many_requests_in_flight_complete_once_with_their_buffers() {
        let members: Vec<Arc<dyn Member>> = (0..4)
            .map(|i| {
                Arc::new(MemMember::new(&format!("q{i}"), (1 << 20) + 64 * 4096)) as Arc<dyn Member>
            })
            .collect();
        let cfg = ArrayConfig {
            chunk: ChunkSize::new(4096).unwrap(),
            assume_clean: true,
            ..ArrayConfig::default()
        };
        let array =
            Arc::new(Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap());
        let q = RaidQueue::new(array.clone(), 4, || Ok(SyncExecutor)).unwrap();
        let bufs = BufferArena::with_buffers(64, 8192, 4096).unwrap();
        // 64 writes of 2 blocks each to disjoint places, all in flight together.
        for (i, mut b) in bufs.into_iter().enumerate() {
            b.fill(i as u8 + 1);
            let req = Request {
                tag: i as u64,
                kind: RequestKind::Write,
                lba: ArrayBlock(i as u64 * 2),
                len: 8192,
                buf: Some(b),
            };
            q.submit(req).unwrap();
        }
        let mut got = Vec::new();
        while got.len() < 64 {
            match q.wait() {
                Some(c) => got.push(c),
                None => panic!("workers gone"),
            }
        }
        got.sort_by_key(|c| c.tag);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, c)| c.tag == i as u64 && c.result.is_ok()));
        // Read everything back through the queue with the returned buffers.
        for c in got {
            let req = Request {
                tag: c.tag,
                kind: RequestKind::Read,
                lba: ArrayBlock(c.tag * 2),
                len: 8192,
                buf: c.buf,
            };
            q.submit(req).unwrap();
        }
        q.submit(Request {
            tag: 999,
            kind: RequestKind::Flush,
            lba: ArrayBlock(0),
            len: 0,
            buf: None,
        })
        .unwrap();
        let mut seen = 0;
        while seen < 65 {
            let c = q.wait().unwrap();
            assert!(c.result.is_ok(), "{:?}", c.result);
            if c.tag != 999 {
                let b = c.buf.unwrap();
                assert!(b.iter().all(|&x| x == c.tag as u8 + 1), "tag {}", c.tag);
            }
            seen += 1;
        }
        let mut none = Vec::new();
        assert_eq!(q.poll(&mut none), 0);
        // A request too long for its buffer is an error, not a panic.
        let small = BufferArena::with_buffers(1, 4096, 4096)
            .unwrap()
            .pop()
            .unwrap();
        q.submit(Request {
            tag: 1,
            kind: RequestKind::Read,
            lba: ArrayBlock(0),
            len: 8192,
            buf: Some(small),
        })
        .unwrap();
        assert!(q.wait().unwrap().result.is_err());
    }
}
