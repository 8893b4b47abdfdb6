//! What stores a namespace's blocks, and the per-poller queues that execute requests on it.
//!
//! A namespace is backed by a RAID-5 [`Array`] or by one plain file or block device (tests and
//! labs). A poller never blocks on storage: it submits [`Request`]s to its own [`NsQueue`] for
//! the namespace and collects [`Completion`]s. An array queue is the RAID engine's
//! [`RaidQueue`] (worker threads, each with its own io_uring when the kernel has one); a file
//! queue is the same shape over [`Member`] calls. Buffers travel by value: the request owns
//! the pool [`IoBuf`] while the storage works on it, and the completion hands it back.
//!
//! Invariant: every submitted request completes exactly once, with its buffer.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::ArraySlot;
use raidline_raid::{
    Array, BufferArena, Completion, Executor, FileMember, Member, MemberError, MemberOp, OwnedRing,
    RaidError, RaidQueue, Request, RequestKind, RingBuf, RingOpKind, RingRequest, RingScratch,
    RingSeg, RingSegs, SyncExecutor, UringExecutor,
};

/// What stores a namespace.
#[derive(Clone, Debug)]
pub enum Backend {
    /// A RAID-5 array.
    Array(Arc<Array>),
    /// One file or block device.
    File(Arc<dyn Member>),
    /// A null device of this many bytes: every request succeeds at once, reads return whatever
    /// the buffer held, writes are dropped. For measuring the target's own cost per I/O.
    Null(u64),
    /// A RAID-5 array that did not assemble at start-up (its namespace starts inactive and
    /// serves nothing) until `raidline array start` puts it in the slot; sized from the
    /// layout its superblocks record.
    Pending(Arc<ArraySlot>),
}

impl Backend {
    /// Usable bytes.
    pub fn capacity_bytes(&self) -> u64 {
        match self {
            Backend::Array(a) => a.geometry().capacity_bytes(),
            Backend::File(m) => m.size_bytes(),
            Backend::Null(bytes) => *bytes,
            Backend::Pending(slot) => slot.geometry().map_or(0, |g| g.capacity_bytes()),
        }
    }

    /// Preferred write size in bytes: a full stripe for an array, one block otherwise.
    pub fn preferred_write_bytes(&self) -> u64 {
        match self {
            Backend::Array(a) => {
                a.geometry().stripe_data_blocks() * a.geometry().block_bytes() as u64
            }
            Backend::Pending(slot) => slot
                .geometry()
                .map_or(0, |g| g.stripe_data_blocks() * g.block_bytes() as u64),
            Backend::File(_) | Backend::Null(_) => 0,
        }
    }
}

/// An executor chosen at run time: io_uring when the kernel offers it, else synchronous calls.
pub enum AnyExecutor {
    /// One io_uring per worker.
    Uring(Box<UringExecutor>),
    /// Member calls on the worker thread.
    Sync(SyncExecutor),
}

impl AnyExecutor {
    /// An io_uring executor with `arenas` registered as fixed buffers, or the synchronous one
    /// when the kernel refuses io_uring (containers often do).
    pub fn best(arenas: &[Arc<BufferArena>]) -> AnyExecutor {
        match UringExecutor::new(256) {
            Ok(mut u) => {
                if arenas.is_empty() {
                    return AnyExecutor::Uring(Box::new(u));
                }
                if let Err(e) = u.register_arenas(arenas) {
                    tracing::debug!("io_uring fixed buffers not registered: {e}");
                }
                AnyExecutor::Uring(Box::new(u))
            }
            Err(e) => {
                tracing::debug!("io_uring unavailable ({e}); member I/O runs synchronously");
                AnyExecutor::Sync(SyncExecutor)
            }
        }
    }
}

impl Executor for AnyExecutor {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        match self {
            AnyExecutor::Uring(u) => u.execute(ops),
            AnyExecutor::Sync(s) => s.execute(ops),
        }
    }

    fn execute_then<'a>(
        &mut self,
        first: &mut [MemberOp<'a>],
        then: &mut dyn FnMut() -> Vec<MemberOp<'a>>,
    ) -> Vec<MemberOp<'a>> {
        match self {
            AnyExecutor::Uring(u) => u.execute_then(first, then),
            AnyExecutor::Sync(s) => s.execute_then(first, then),
        }
    }
}

/// Puts `req` on the poller's own ring instead of the storage workers when that path serves
/// it: reads, writes and flushes of a file namespace whose device offers a descriptor, array
/// reads whose blocks all lie on members that can serve them (no reconstruction), and array
/// flushes (one per present member).
/// Anything else is handed back, untouched, for the workers. The completion comes out of
/// [`OwnedRing::pump`] with the request's tag and buffer.
pub(crate) fn try_direct(
    backend: &Backend,
    mut req: Request,
    ring: &mut OwnedRing,
) -> Result<(), Request> {
    let buf_ok = |req: &Request| req.buf.as_ref().is_some_and(|b| b.len() >= req.len);
    let array = match backend {
        Backend::Array(a) => Some(a),
        Backend::Pending(slot) => slot.get(),
        Backend::File(_) | Backend::Null(_) => None,
    };
    let segs: RingSegs = match (backend, req.kind) {
        (Backend::File(m), RequestKind::Flush) => std::iter::once(RingSeg {
            buf: RingBuf::Main,
            member: m.clone(),
            kind: RingOpKind::Flush,
            offset: 0,
            range: 0..0,
        })
        .collect(),
        (Backend::File(m), kind) if buf_ok(&req) => std::iter::once(RingSeg {
            buf: RingBuf::Main,
            member: m.clone(),
            kind: if kind == RequestKind::Read {
                RingOpKind::Read
            } else {
                RingOpKind::Write
            },
            offset: req.lba.0 * 4096,
            range: 0..req.len,
        })
        .collect(),
        (_, RequestKind::Flush) => {
            let Some(a) = array else { return Err(req) };
            match a.flush_targets() {
                Ok(Some(targets)) if !targets.is_empty() => targets
                    .into_iter()
                    .map(|member| RingSeg {
                        buf: RingBuf::Main,
                        member,
                        kind: RingOpKind::Flush,
                        offset: 0,
                        range: 0..0,
                    })
                    .collect(),
                _ => return Err(req),
            }
        }
        (_, RequestKind::Read) if buf_ok(&req) => {
            let Some(a) = array else { return Err(req) };
            let bs = a.geometry().block_bytes();
            if req.len == 0 || req.len % bs != 0 {
                return Err(req);
            }
            match a.direct_reads(req.lba, (req.len / bs) as u64) {
                Ok(Some(reads)) => reads
                    .into_iter()
                    .map(|d| RingSeg {
                        buf: RingBuf::Main,
                        member: d.member,
                        kind: RingOpKind::Read,
                        offset: d.offset,
                        range: d.range,
                    })
                    .collect(),
                _ => return Err(req),
            }
        }
        _ => return Err(req),
    };
    let direct = RingRequest {
        scratch: RingScratch::new(),
        more: Vec::new(),
        tag: req.tag,
        buf: req.buf.take(),
        segs,
    };
    match ring.submit(direct) {
        Ok(()) => Ok(()),
        Err((back, _)) => {
            req.buf = back.buf;
            Err(req)
        }
    }
}

/// A request the blocking engine runs for a poller on the array's maintenance thread (see
/// [`NsQueue::Maint`]), with where its completion goes.
pub(crate) struct MaintJob {
    pub req: Request,
    pub done: Sender<Completion>,
    pub notify: Arc<dyn Fn() + Send + Sync>,
}

impl MaintJob {
    /// Runs the request through the blocking engine on the calling thread (an error when the
    /// array does not run) and hands the completion back to its poller (gone pollers drop
    /// it).
    pub(crate) fn serve<E: Executor + ?Sized>(self, array: Option<&Array>, exec: &mut E) {
        let done = match array {
            Some(array) => raidline_raid::serve_request(array, exec, self.req),
            None => Completion {
                tag: self.req.tag,
                buf: self.req.buf,
                result: Err(RaidError::State("the array is not running")),
            },
        };
        if self.done.send(done).is_ok() {
            (self.notify)();
        }
    }
}

/// A poller's queue to an array it serves on its own ring: what the ring path hands back
/// (a redo after a member error, which marks the member failed; a write while a torn write
/// waits for its redo or a log-cover record is due; what comes while the poller drains) goes
/// to the array's maintenance thread, which runs it through the blocking engine and sends
/// the completion back. No storage worker thread.
pub(crate) struct MaintQueue {
    jobs: Sender<MaintJob>,
    done_tx: Sender<Completion>,
    done_rx: Receiver<Completion>,
    notify: Arc<dyn Fn() + Send + Sync>,
}

impl MaintQueue {
    pub(crate) fn new(jobs: Sender<MaintJob>, notify: Arc<dyn Fn() + Send + Sync>) -> MaintQueue {
        let (done_tx, done_rx) = channel();
        MaintQueue {
            jobs,
            done_tx,
            done_rx,
            notify,
        }
    }
}

/// A poller's queue to one namespace's storage.
pub(crate) enum NsQueue {
    Array(RaidQueue),
    /// An array served on the poller's ring: the rest on its maintenance thread.
    Maint(MaintQueue),
    File(FileQueue),
    /// Completions of a null namespace, ready at the next poll.
    Null(Vec<Completion>),
    /// An array queue whose storage workers have not started: they start with the first
    /// request handed to them (with the poller's own ring, a healthy array may never need
    /// them), once the array runs (a namespace of an array that did not assemble at start-up
    /// waits here until `raidline array start` puts it in its slot).
    Pending(PendingQueue),
}

/// What it takes to start a poller's queue to an array later.
pub(crate) struct PendingQueue {
    /// The array, when it runs already.
    array: Option<Arc<Array>>,
    /// Else the slot it will be put in.
    slot: Option<Arc<ArraySlot>>,
    workers: usize,
    arenas: Vec<Arc<BufferArena>>,
    notify: Arc<dyn Fn() + Send + Sync>,
    /// Starting the queue failed once (logged); it is not tried again.
    gave_up: bool,
}

impl NsQueue {
    /// A poller's queue to `backend`, served by up to `workers` worker threads, started with
    /// the first request handed to them; `arenas` are the poller's pool arenas (registered
    /// with each worker's io_uring as fixed buffers).
    ///
    /// `maint`: the array's maintenance thread's job queue, for a poller that serves the
    /// array on its own ring ([`NsQueue::Maint`]: no worker threads then).
    pub(crate) fn start(
        backend: &Backend,
        workers: usize,
        arenas: Vec<Arc<BufferArena>>,
        notify: Arc<dyn Fn() + Send + Sync>,
        maint: Option<Sender<MaintJob>>,
    ) -> std::io::Result<NsQueue> {
        // The maintenance thread only where the ring serves the array: without a member that
        // offers a descriptor for direct I/O (in-memory ones), every request is the blocking
        // engine's, on the workers.
        let maint = match backend {
            Backend::Array(a) if !a.has_direct_io_member() => None,
            _ => maint,
        };
        match (backend, maint) {
            (Backend::Array(_) | Backend::Pending(_), Some(jobs)) => {
                Ok(NsQueue::Maint(MaintQueue::new(jobs, notify)))
            }
            (Backend::Array(a), None) => Ok(NsQueue::Pending(PendingQueue {
                array: Some(a.clone()),
                slot: None,
                workers,
                arenas,
                notify,
                gave_up: false,
            })),
            (Backend::File(m), _) => Ok(NsQueue::File(FileQueue::new(m.clone(), workers, notify)?)),
            (Backend::Null(_), _) => Ok(NsQueue::Null(Vec::new())),
            (Backend::Pending(slot), None) => Ok(NsQueue::Pending(PendingQueue {
                array: None,
                slot: Some(slot.clone()),
                workers,
                arenas,
                notify,
                gave_up: false,
            })),
        }
    }

    /// A pending queue whose array runs starts its workers and becomes that array's queue
    /// (called when a request is handed to it).
    fn attach(&mut self) {
        let NsQueue::Pending(p) = self else { return };
        if p.gave_up {
            return;
        }
        let running = p.slot.as_ref().and_then(|s| s.get());
        let Some(array) = p.array.as_ref().or(running) else {
            return;
        };
        let arenas = p.arenas.clone();
        match RaidQueue::with_notify(
            array.clone(),
            p.workers,
            move || Ok(AnyExecutor::best(&arenas)),
            p.notify.clone(),
        ) {
            Ok(q) => *self = NsQueue::Array(q),
            Err(e) => {
                tracing::error!(
                    "cannot start the storage workers of an array: {e}; its namespace \
                     answers Namespace Not Ready on this poller for what they would serve \
                     until a restart"
                );
                p.gave_up = true;
            }
        }
    }

    pub(crate) fn submit(&mut self, req: Request) -> Result<(), Request> {
        self.attach();
        match self {
            // The array does not run (not reached through validation: the namespace is
            // inactive until it does), or its workers could not start: the poller answers
            // Namespace Not Ready.
            NsQueue::Pending(_) => Err(req),
            NsQueue::Array(q) => q.submit(req),
            NsQueue::Maint(q) => q
                .jobs
                .send(MaintJob {
                    req,
                    done: q.done_tx.clone(),
                    notify: q.notify.clone(),
                })
                .map_err(|e| e.0.req),
            NsQueue::File(q) => q.submit(req),
            NsQueue::Null(done) => {
                done.push(Completion {
                    tag: req.tag,
                    buf: req.buf,
                    result: Ok(()),
                });
                Ok(())
            }
        }
    }

    pub(crate) fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        match self {
            NsQueue::Pending(_) => 0,
            NsQueue::Array(q) => q.poll(out),
            NsQueue::Maint(q) => {
                let n0 = out.len();
                out.extend(q.done_rx.try_iter());
                out.len() - n0
            }
            NsQueue::File(q) => q.poll(out),
            NsQueue::Null(done) => {
                let n = done.len();
                out.append(done);
                n
            }
        }
    }
}

/// Wakes a sleeping poller when storage completes or the control thread sends it a message:
/// the notifier writes a byte to one end of a socket pair, the poller sleeps in `poll(2)` on
/// the other end (and its CQ's channel) and drains it.
///
/// The byte is written only while the poller says it is going to sleep ([`Waker::sleeping`]),
/// so a busy poller costs its workers no system call per completion. No wake-up is lost: the
/// poller raises its flag, then (after a `SeqCst` fence) looks for work once more before it
/// sleeps; a notifier publishes its work, then (after a `SeqCst` fence) takes the flag. Of two
/// such fences one comes first in their single total order, so either the poller's last look
/// sees the work or the notifier sees the flag and writes.
pub(crate) struct Waker {
    rx: UnixStream,
    tx: Arc<UnixStream>,
    asleep: Arc<AtomicBool>,
}

impl Waker {
    pub(crate) fn new() -> std::io::Result<Waker> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Waker {
            rx,
            tx: Arc::new(tx),
            asleep: Arc::new(AtomicBool::new(false)),
        })
    }

    /// What workers and the control thread call after handing the poller something (never
    /// blocks: a full socket already wakes).
    pub(crate) fn notifier(&self) -> Arc<dyn Fn() + Send + Sync> {
        let (tx, asleep) = (self.tx.clone(), self.asleep.clone());
        Arc::new(move || {
            fence(Ordering::SeqCst);
            if asleep.swap(false, Ordering::SeqCst) {
                let _ = (&*tx).write(&[1]);
            }
        })
    }

    /// The poller is about to sleep: from now on notifiers write. It must look for work once
    /// more after this call and sleep only if it finds none.
    pub(crate) fn sleeping(&self) {
        self.asleep.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The poller is awake (it found work, or `poll(2)` returned): notifiers stop writing.
    pub(crate) fn awake(&self) {
        self.asleep.store(false, Ordering::SeqCst);
    }

    /// Consumes pending wake-ups.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 256];
        while matches!((&self.rx).read(&mut buf), Ok(n) if n == buf.len()) {}
    }
}

impl std::os::fd::AsRawFd for Waker {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.rx.as_raw_fd()
    }
}

impl std::os::fd::AsFd for Waker {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

/// [`RaidQueue`]'s shape over one member: worker threads run `read_at`/`write_at`/`flush`.
pub(crate) struct FileQueue {
    member: Arc<dyn Member>,
    want_workers: usize,
    notify: Arc<dyn Fn() + Send + Sync>,
    jobs: Option<Sender<Request>>,
    done: Option<Receiver<Completion>>,
    workers: Vec<JoinHandle<()>>,
}

impl FileQueue {
    /// A queue whose worker threads start with its first request: with the poller's own ring
    /// (`io_path = "ring"`) a file namespace on a device with a descriptor never needs them.
    fn new(
        member: Arc<dyn Member>,
        workers: usize,
        notify: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<FileQueue> {
        Ok(FileQueue {
            member,
            want_workers: workers.max(1),
            notify,
            jobs: None,
            done: None,
            workers: Vec::new(),
        })
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let (jobs_tx, jobs_rx) = channel::<Request>();
        let (done_tx, done_rx) = channel::<Completion>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        for i in 0..self.want_workers {
            let (member, jobs_rx, done_tx, notify) = (
                self.member.clone(),
                jobs_rx.clone(),
                done_tx.clone(),
                self.notify.clone(),
            );
            self.workers.push(
                std::thread::Builder::new()
                    .name(format!("file-worker-{i}"))
                    .spawn(move || loop {
                        let next = jobs_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(mut req) = next else { return };
                        let result = serve_file(&*member, &mut req);
                        let done = Completion {
                            tag: req.tag,
                            buf: req.buf,
                            result,
                        };
                        if done_tx.send(done).is_err() {
                            return;
                        }
                        notify();
                    })?,
            );
        }
        self.jobs = Some(jobs_tx);
        self.done = Some(done_rx);
        Ok(())
    }

    fn submit(&mut self, req: Request) -> Result<(), Request> {
        if self.jobs.is_none() && self.workers.is_empty() {
            if let Err(e) = self.spawn() {
                tracing::error!("cannot start file storage workers: {e}");
                return Err(req);
            }
        }
        match &self.jobs {
            Some(tx) => tx.send(req).map_err(|e| e.0),
            None => Err(req),
        }
    }

    fn poll(&self, out: &mut Vec<Completion>) -> usize {
        let Some(done) = &self.done else { return 0 };
        let mut n = 0;
        loop {
            match done.try_recv() {
                Ok(c) => {
                    out.push(c);
                    n += 1;
                }
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return n,
            }
        }
    }
}

impl Drop for FileQueue {
    fn drop(&mut self) {
        self.jobs = None;
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

fn serve_file(member: &dyn Member, req: &mut Request) -> Result<(), RaidError> {
    let offset = req.lba.0 * 4096;
    let member_err = |source| RaidError::Member {
        role: raidline_raid::MemberIdx(0),
        source,
    };
    match (req.kind, req.buf.as_mut()) {
        (RequestKind::Flush, _) => member.flush().map_err(member_err),
        (_, Some(buf)) if req.len <= buf.len() => match req.kind {
            RequestKind::Read => member.read_at(offset, &mut buf[..req.len]),
            _ => member.write_at(offset, &buf[..req.len]),
        }
        .map_err(member_err),
        _ => Err(RaidError::BufferSize {
            len: req.len,
            block: 4096,
        }),
    }
}

/// A file or block device used through the page cache (`pread`/`pwrite`), for filesystems
/// without `O_DIRECT` (tmpfs) and for test files. `flush` is `fdatasync`.
#[derive(Debug)]
pub struct BufferedFile {
    name: String,
    file: File,
    size: u64,
}

impl BufferedFile {
    /// Opens `path` read-write; with `create_size`, creates it (sparse) when missing.
    pub fn open(path: &Path, create_size: Option<u64>) -> std::io::Result<BufferedFile> {
        let file = match create_size {
            Some(size) if !path.exists() => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(path)?;
                f.set_len(size)?;
                f
            }
            _ => OpenOptions::new().read(true).write(true).open(path)?,
        };
        let size = device_size(&file)?;
        Ok(BufferedFile {
            name: path.display().to_string(),
            file,
            size,
        })
    }
}

/// Size of a regular file or a block device (seek to the end: works for both).
fn device_size(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    let end = f.seek(SeekFrom::End(0))?;
    f.seek(SeekFrom::Start(0))?;
    Ok(end)
}

impl Member for BufferedFile {
    fn name(&self) -> &str {
        &self.name
    }
    fn size_bytes(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        self.check(offset, buf.len())?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| self.io(offset, source))
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        self.check(offset, buf.len())?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|source| self.io(offset, source))
    }
    fn flush(&self) -> Result<(), MemberError> {
        self.file.sync_data().map_err(|source| self.io(0, source))
    }
}

impl BufferedFile {
    fn check(&self, offset: u64, len: usize) -> Result<(), MemberError> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(MemberError::OutOfRange {
                member: self.name.clone(),
                offset,
                len,
                size: self.size,
            }),
        }
    }
    fn io(&self, offset: u64, source: std::io::Error) -> MemberError {
        MemberError::Io {
            member: self.name.clone(),
            offset,
            source,
        }
    }
}

/// Opens a member device or file: `O_DIRECT` when the filesystem allows it (drives, most
/// filesystems), else through the page cache with a logged warning.
pub fn open_member(path: &Path, create_size: Option<u64>) -> std::io::Result<Arc<dyn Member>> {
    if create_size.is_some() && !path.exists() {
        BufferedFile::open(path, create_size)?;
    }
    match FileMember::open(path, 4096) {
        Ok(m) => {
            if m.polled_io() {
                tracing::info!(
                    "{}: the device has poll queues (with io_poll = \"on\" its reads and \
                     writes on the pollers' rings complete by polling)",
                    path.display()
                );
            }
            Ok(Arc::new(m))
        }
        // Only a filesystem that refuses O_DIRECT (EINVAL: tmpfs on old kernels, some FUSE)
        // falls back; a missing path or a denied open is the real error and is reported as is.
        Err(raidline_raid::MemberError::Open { source, .. })
            if source.kind() != std::io::ErrorKind::InvalidInput =>
        {
            Err(source)
        }
        Err(e) => {
            tracing::warn!(
                "{}: O_DIRECT open failed ({e}); using the page cache (fdatasync on flush)",
                path.display()
            );
            Ok(Arc::new(BufferedFile::open(path, None)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidline_fabric::sys_poll::wait_ready;
    use std::time::Duration;

    #[test]
    fn an_awake_poller_costs_notifiers_no_write() {
        let w = Waker::new().unwrap();
        let notify = w.notifier();
        for _ in 0..1000 {
            notify();
        }
        assert_eq!(
            wait_ready(&[&w], Duration::ZERO).unwrap(),
            0,
            "nothing written"
        );
        w.sleeping();
        notify();
        notify();
        assert_eq!(
            wait_ready(&[&w], Duration::ZERO).unwrap(),
            1,
            "one write wakes"
        );
        w.awake();
        w.drain();
        assert_eq!(wait_ready(&[&w], Duration::ZERO).unwrap(), 0, "drained");
    }

    /// The sleep protocol of [`Waker`] under four producers: a consumer that raises the flag,
    /// looks at its inbox once more and only then sleeps never sleeps through a message. A lost
    /// wake-up shows as a wait that ends by its timeout with messages pending.
    #[test]
    fn no_wake_up_is_lost() {
        const PRODUCERS: usize = 4;
        const EACH: usize = 5000;
        let w = Waker::new().unwrap();
        let (tx, rx) = channel::<usize>();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (tx, notify) = (tx.clone(), w.notifier());
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        tx.send(p * EACH + i).unwrap();
                        notify();
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        let (mut got, mut sleeps, mut lost) = (0usize, 0usize, 0usize);
        while got < PRODUCERS * EACH {
            let mut n = 0;
            while rx.try_recv().is_ok() {
                n += 1;
            }
            got += n;
            if n > 0 {
                continue;
            }
            w.sleeping();
            if rx.try_recv().is_ok() {
                w.awake();
                got += 1;
                continue;
            }
            sleeps += 1;
            let ready = wait_ready(&[&w], Duration::from_secs(2)).unwrap();
            w.awake();
            if ready == 0 {
                // Timed out: only allowed when nothing was sent meanwhile.
                if rx.try_recv().is_ok() {
                    lost += 1;
                    got += 1;
                }
            } else {
                w.drain();
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(lost, 0, "{lost} wake-ups lost in {sleeps} sleeps");
        assert_eq!(got, PRODUCERS * EACH);
    }
}
