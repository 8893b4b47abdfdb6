//! A poller's own io_uring: completion-driven member I/O with owned buffers.
//!
//! [`UringExecutor`](super::uring::UringExecutor) runs a batch and returns when all of it
//! completed: the calling thread waits. An [`OwnedRing`] never waits: a poller hands it
//! [`RingRequest`]s (a buffer plus the member operations that fill or drain it), and every pass
//! of its loop calls [`OwnedRing::pump`] once, which submits what was queued and reaps what
//! completed in one `io_uring_enter` (none when there is nothing to submit and no completion
//! work pending: completions are read from the shared ring). A request comes back as one
//! [`RingCompletion`] with its buffer when every operation of it completed. The ring's eventfd
//! becomes readable when completions arrive, so an idle poller sleeps on it beside its RDMA
//! completion channel. Where the kernel offers it, completions run as deferred task work, in a
//! batch at the next pump, not as a signal to the owner's thread per completion
//! ([`OwnedRing::new`]).
//!
//! **Flushes are shared** (group commit, as the RAID engine's flush gates do for blocking
//! callers): a flush operation completes once a flush of its member that was handed to the
//! kernel after the operation was submitted has completed, which makes every write that
//! completed before the submission durable. So the ring keeps at most one flush per member
//! in the kernel: a flush operation joins the member's flush that has not reached the
//! kernel yet, or waits for the running one and goes with the next, one for all who wait.
//! Many tasks that each need a member flushed (the partial-parity log's entries, bitmap
//! blocks) cost one flush per round trip, not one each.
//!
//! Invariants the `unsafe` code relies on:
//! - **buffer lifetime**: the ring owns each request (and so its [`IoBuf`]) from
//!   [`OwnedRing::submit`] until the completion of its last operation has been reaped; only
//!   then is the buffer handed back. Dropping the ring waits for every submitted operation.
//!   So the memory an SQE points to stays allocated while the kernel may use it, and no Rust
//!   reference reads or writes it meanwhile (the request is not reachable from outside);
//! - **registered memory**: [`OwnedRing::register_arenas`] keeps each arena's `Arc` until
//!   every ring (the main one and the polled one) has dropped its registration or the rings
//!   drop (they are dropped before `arenas`); a fixed operation is issued only when its whole
//!   range lies inside one region that every ring holds, at the same index;
//! - **fds**: an SQE uses the raw fd of a member whose `Arc` the request holds, so the file
//!   stays open until the operation completed.

#![allow(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};
use smallvec::SmallVec;

use super::buf::{BufferArena, IoBuf};
use crate::array::EngineBuf;
use crate::error::MemberError;
use crate::member::{check_range, Member};

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingOpKind {
    /// Read into the range of the request's buffer.
    Read,
    /// Write the range of the request's buffer.
    Write,
    /// Flush the member's volatile write cache (`fdatasync`); no buffer.
    Flush,
}

/// Which of a [`RingRequest`]'s buffers an operation uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingBuf {
    /// The request's buffer ([`RingRequest::buf`]).
    Main,
    /// One of the engine's scratch buffers ([`RingRequest::scratch`]).
    Scratch(u16),
    /// One of the caller's further buffers ([`RingRequest::more`]): a write gathered from
    /// several requests.
    More(u16),
}

/// One member operation of a [`RingRequest`].
pub struct RingSeg {
    /// The member (it must offer [`Member::direct_fd`]).
    pub member: Arc<dyn Member>,
    /// What to do.
    pub kind: RingOpKind,
    /// Byte offset on the member.
    pub offset: u64,
    /// The buffer the range lies in.
    pub buf: RingBuf,
    /// The part of that buffer (empty for a flush).
    pub range: Range<usize>,
}

impl std::fmt::Debug for RingSeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSeg")
            .field("member", &self.member.name())
            .field("kind", &self.kind)
            .field("offset", &self.offset)
            .field("buf", &self.buf)
            .field("range", &self.range)
            .finish()
    }
}

/// A request's operations (inline up to four: a small write's reads, or its data and parity
/// writes, need no allocation).
pub type RingSegs = SmallVec<[RingSeg; 4]>;

/// A request's engine scratch buffers (inline up to four).
pub type RingScratch = SmallVec<[EngineBuf; 4]>;

/// A buffer and the member operations on it, completed as one.
#[derive(Debug)]
pub struct RingRequest {
    /// The caller's tag, given back in the completion.
    pub tag: u64,
    /// The buffer the operations read into or write from.
    pub buf: Option<IoBuf>,
    /// Further caller buffers ([`RingBuf::More`]; empty, with no allocation, for most).
    pub more: Vec<IoBuf>,
    /// The RAID engine's scratch buffers (old data, parity) its operations use too.
    pub scratch: RingScratch,
    /// The operations (they may run in any order and in parallel; their ranges must not
    /// overlap where one reads).
    pub segs: RingSegs,
}

impl RingRequest {
    /// The bytes of buffer `which` (empty when the request has no such buffer).
    fn bytes(&self, which: RingBuf) -> &[u8] {
        match which {
            RingBuf::Main => self.buf.as_deref(),
            RingBuf::Scratch(k) => self.scratch.get(usize::from(k)).map(|b| &b[..]),
            RingBuf::More(k) => self.more.get(usize::from(k)).map(|b| &b[..]),
        }
        .unwrap_or_default()
    }

    /// [`RingRequest::bytes`], writable.
    fn bytes_mut(&mut self, which: RingBuf) -> &mut [u8] {
        match which {
            RingBuf::Main => self.buf.as_deref_mut(),
            RingBuf::Scratch(k) => self.scratch.get_mut(usize::from(k)).map(|b| &mut b[..]),
            RingBuf::More(k) => self.more.get_mut(usize::from(k)).map(|b| &mut b[..]),
        }
        .unwrap_or_default()
    }

    /// Runs the operations with the members' own blocking calls on the calling thread, in
    /// `order` (indices into `segs`), and completes the request as a ring would (the first
    /// failure is its result): for tests and tools that drive ring requests without a ring.
    pub fn run_sync(mut self, order: impl IntoIterator<Item = usize>) -> RingCompletion {
        let mut result = Ok(());
        for i in order {
            let Some(seg) = self.segs.get(i) else {
                continue;
            };
            let (which, kind, offset, range) = (seg.buf, seg.kind, seg.offset, seg.range.clone());
            let member = seg.member.clone();
            let buf = self.bytes_mut(which);
            let r = match kind {
                RingOpKind::Read => buf
                    .get_mut(range)
                    .ok_or(MemberError::Unsupported("operation range"))
                    .and_then(|b| member.read_at(offset, b)),
                RingOpKind::Write => buf
                    .get(range)
                    .ok_or(MemberError::Unsupported("operation range"))
                    .and_then(|b| member.write_at(offset, b)),
                RingOpKind::Flush => member.flush(),
            };
            if let (Err(e), Ok(())) = (r, &result) {
                result = Err((i, e));
            }
        }
        RingCompletion {
            tag: self.tag,
            buf: self.buf,
            more: self.more,
            scratch: self.scratch,
            segs: self.segs,
            result,
        }
    }
}

/// A request whose operations all completed.
#[derive(Debug)]
pub struct RingCompletion {
    /// The request's tag.
    pub tag: u64,
    /// Its buffer, back.
    pub buf: Option<IoBuf>,
    /// Its further buffers, back.
    pub more: Vec<IoBuf>,
    /// Its scratch buffers, back.
    pub scratch: RingScratch,
    /// Its operations, for the caller's bookkeeping (which member failed).
    pub segs: RingSegs,
    /// The first failure: the operation's index and the error.
    pub result: Result<(), (usize, MemberError)>,
}

/// An operation's bookkeeping while its request is in the ring.
struct SegState {
    fd: RawFd,
    fixed: Option<u16>,
    done: usize,
    /// It goes to the polled ring ([`OwnedRing::enable_polling`]).
    polled: bool,
}

struct Flight {
    req: RingRequest,
    segs: SmallVec<[SegState; 4]>,
    /// Operations not completed yet.
    left: usize,
    error: Option<(usize, MemberError)>,
}

/// Bits of `user_data` for the operation index (the rest is the flight's slot).
const SEG_BITS: u32 = 16;
const MAX_SEGS: usize = 1 << SEG_BITS;
/// `user_data` of a member's shared flush: this bit, and the descriptor.
const FLUSH_TAG: u64 = 1 << 63;

/// One member's shared flush (by descriptor). A flush is in the backlog or the kernel
/// exactly while `current` is not empty.
#[derive(Debug, Default)]
struct SharedFlush {
    /// It has been handed to the kernel: new operations wait for the next one.
    started: bool,
    /// Operations (slot, index) the flush in progress completes.
    current: Vec<(usize, usize)>,
    /// Operations for the next flush.
    next: Vec<(usize, usize)>,
}

/// One poller's io_uring (see the module documentation).
///
/// Field order matters: the rings (`main`, `polled`) drop, and with them the kernel's
/// registrations, before `arenas` release the memory; [`Drop`] first waits for every submitted operation.
pub struct OwnedRing {
    /// The ring every operation goes to but polled ones; its eventfd wakes the owner.
    main: Lane,
    /// The polled ring, when enabled: reads and writes of members whose queues poll.
    polled: Option<Lane>,
    flights: Vec<Option<Flight>>,
    free: Vec<usize>,
    regions: Vec<(usize, usize)>,
    arenas: Vec<Arc<BufferArena>>,
    eventfd: nix::sys::eventfd::EventFd,
    /// Read and write operations issued: (fixed, plain).
    rw_ops: (u64, u64),
    /// Reaped completions (kept to spare an allocation per pass).
    cqes: Vec<(u64, i32)>,
    /// Completions run as deferred task work (see [`OwnedRing::new`]).
    deferred: bool,
    /// Read and write operations that went to the polled ring.
    polled_ops: u64,
    /// Of those, how many the kernel refused as not pollable (`EOPNOTSUPP`) and went again
    /// to the main ring.
    polled_fallbacks: u64,
    /// Descriptors whose polled operations were refused: theirs go to the main ring (a
    /// descriptor number reused by a later member keeps it there: slower, not wrong).
    unpolled: Vec<RawFd>,
    /// The member of the last refusal.
    last_unpolled: Option<String>,
    /// Shared flushes per member descriptor.
    flushes: HashMap<RawFd, SharedFlush>,
    /// Flush operations requested, and flushes issued to the kernel.
    flush_ops: (u64, u64),
}

/// One io_uring of an [`OwnedRing`], and what waits to enter it.
struct Lane {
    ring: IoUring,
    /// Entries that did not fit the submission queue yet.
    backlog: VecDeque<squeue::Entry>,
    /// Entries handed to the kernel whose completion was not reaped yet.
    submitted: usize,
    /// Entries pushed to the submission queue and not yet submitted.
    queued: usize,
    /// Created disabled and not yet enabled by its owner thread.
    disabled: bool,
}

impl Lane {
    fn new(ring: IoUring, disabled: bool) -> Lane {
        Lane {
            ring,
            backlog: VecDeque::new(),
            submitted: 0,
            queued: 0,
            disabled,
        }
    }

    /// Enables a ring created disabled; the calling thread becomes its only issuer.
    fn enable(&mut self) -> std::io::Result<()> {
        if self.disabled {
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        Ok(())
    }

    fn has_queued(&self) -> bool {
        self.queued > 0 || !self.backlog.is_empty()
    }

    /// Entries handed to the kernel, or pushed to it, whose completion was not reaped yet.
    fn in_kernel(&self) -> bool {
        self.submitted > 0 || self.queued > 0
    }

    /// Entries in the kernel or on their way there.
    fn busy(&self) -> bool {
        self.in_kernel() || !self.backlog.is_empty()
    }

    /// Moves backlog entries into the submission queue while it has room, and no more than
    /// the completion queue holds: completions beyond it would wait in the kernel's overflow
    /// list, which only an `io_uring_enter` flushes, and a pass with nothing to submit makes
    /// none. A shared flush handed over is marked started in `flushes`.
    fn fill(&mut self, flushes: &mut HashMap<RawFd, SharedFlush>) {
        let cq = self.ring.params().cq_entries() as usize;
        while let Some(e) = self.backlog.front() {
            if self.submitted + self.queued >= cq {
                break;
            }
            // SAFETY: every entry's buffer and descriptor are owned by its flight, which
            // stays in `flights` until the entry's completion is reaped (module invariants);
            // a shared flush's descriptor, by the flights of the operations it completes.
            let pushed = unsafe { self.ring.submission().push(e).is_ok() };
            if !pushed {
                break;
            }
            let user = e.get_user_data();
            self.backlog.pop_front();
            self.queued += 1;
            if user & FLUSH_TAG != 0 {
                // Submitted before any new operation can join: the ones that join from now
                // on wait for the next flush.
                if let Some(f) = flushes.get_mut(&((user & !FLUSH_TAG) as RawFd)) {
                    f.started = true;
                }
            }
        }
    }

    /// One `io_uring_enter`: submits what is queued (and runs deferred completions, or on a
    /// polled ring polls the drives' queues once).
    fn enter(&mut self) -> std::io::Result<()> {
        match self.ring.submit() {
            Ok(n) => {
                self.submitted += n;
                self.queued -= n.min(self.queued);
                Ok(())
            }
            // The completion queue is full or the kernel is short of memory: reap first,
            // submit at the next pass.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Appends every available completion to `cqes`; returns how many.
    fn reap_into(&mut self, cqes: &mut Vec<(u64, i32)>) -> usize {
        let before = cqes.len();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        let n = cqes.len() - before;
        self.submitted -= n.min(self.submitted);
        n
    }

    /// Submits what is queued and waits for one completion (the ring is being dropped);
    /// aborts the process when the kernel refuses, rather than free memory it may still
    /// write.
    fn wait_one(&mut self) {
        match self.ring.submit_and_wait(1) {
            Ok(n) => {
                self.submitted += n;
                self.queued -= n.min(self.queued);
            }
            Err(e) if e.raw_os_error().is_some_and(is_retry) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(_) => std::process::abort(),
        }
    }
}

impl std::fmt::Debug for OwnedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedRing")
            .field("in_flight", &self.in_flight())
            .field("submitted", &self.main.submitted)
            .field(
                "polled_submitted",
                &self.polled.as_ref().map(|p| p.submitted),
            )
            .field("rw_ops", &self.rw_ops)
            .finish()
    }
}

fn is_retry(errno: i32) -> bool {
    errno == libc::EAGAIN || errno == libc::EINTR
}

impl OwnedRing {
    /// A ring with `entries` submission slots, and an eventfd that becomes readable at each
    /// completion. Fails where the kernel offers no io_uring (the caller then keeps its
    /// worker threads).
    ///
    /// Where the kernel offers it (Linux 6.1+), the ring has one issuer and runs completions as
    /// deferred task work (`IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG`): a
    /// drive's completion interrupt only queues its work and flags it (and makes the eventfd
    /// readable), and the work runs in a batch at the owner's next [`OwnedRing::pump`],
    /// instead of each completion interrupting the owner's thread (a task-work signal) to
    /// post its entry. The ring is created disabled and enabled by the first thread that
    /// pumps it, which becomes its only issuer: create it anywhere, register buffers, then
    /// hand it to the thread that drives it (and drops it). Elsewhere, a plain ring.
    pub fn new(entries: u32) -> std::io::Result<OwnedRing> {
        let entries = entries.max(8);
        let (ring, deferred) = match IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled()
            .build(entries)
        {
            Ok(r) => (r, true),
            Err(_) => (IoUring::new(entries)?, false),
        };
        use nix::sys::eventfd::{EfdFlags, EventFd};
        let eventfd =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        Ok(OwnedRing {
            main: Lane::new(ring, deferred),
            polled: None,
            flights: Vec::new(),
            free: Vec::new(),
            regions: Vec::new(),
            arenas: Vec::new(),
            eventfd,
            rw_ops: (0, 0),
            cqes: Vec::with_capacity(64),
            deferred,
            polled_ops: 0,
            polled_fallbacks: 0,
            unpolled: Vec::new(),
            last_unpolled: None,
            flushes: HashMap::new(),
            flush_ops: (0, 0),
        })
    }

    /// Whether completions run as deferred task work (see [`OwnedRing::new`]).
    pub fn deferred_completions(&self) -> bool {
        self.deferred
    }

    /// Adds a polled ring (`IORING_SETUP_IOPOLL`) for the reads and writes of members whose
    /// queues poll ([`Member::polled_io`]: NVMe with poll queues). Their completions come
    /// with no interrupt: each [`OwnedRing::pump`] polls the drives' queues, and while any of
    /// them is in flight ([`OwnedRing::polling`]) the owner must pump again rather than sleep
    /// on the eventfd, which they never make readable. Flushes stay on the first ring (a
    /// polled ring takes no fsync), and so does everything when this fails. Arenas
    /// registered already are registered with it too. Refused while requests are in the
    /// ring.
    pub fn enable_polling(&mut self, entries: u32) -> std::io::Result<()> {
        if self.polled.is_some() {
            return Ok(());
        }
        self.refuse_in_flight()?;
        let entries = entries.max(8);
        let (ring, disabled) = match IoUring::builder()
            .setup_iopoll()
            .setup_single_issuer()
            .setup_r_disabled()
            .build(entries)
        {
            Ok(r) => (r, true),
            Err(_) => (IoUring::builder().setup_iopoll().build(entries)?, false),
        };
        if !self.regions.is_empty() {
            let iovecs = iovecs(&self.regions);
            // SAFETY: the regions are those of `self.arenas`, kept until this ring's
            // registration is dropped (`register_arenas`, or the ring's drop: `polled` is
            // dropped before `arenas`).
            unsafe { ring.submitter().register_buffers(&iovecs)? };
        }
        self.polled = Some(Lane::new(ring, disabled));
        Ok(())
    }

    /// Whether a polled ring is enabled ([`OwnedRing::enable_polling`]).
    pub fn polls(&self) -> bool {
        self.polled.is_some()
    }

    /// Whether operations are on the polled ring: their completions come only by polling,
    /// so the owner must keep pumping instead of sleeping.
    pub fn polling(&self) -> bool {
        self.polled.as_ref().is_some_and(Lane::busy)
    }

    /// Drops every entry that has not reached the kernel (the ring is being dropped).
    fn clear_backlogs(&mut self) {
        self.main.backlog.clear();
        if let Some(p) = self.polled.as_mut() {
            p.backlog.clear();
        }
    }

    /// Refuses a change of rings or registrations while requests are in them.
    fn refuse_in_flight(&self) -> std::io::Result<()> {
        if self.in_flight() > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "requests in flight",
            ));
        }
        Ok(())
    }

    /// The lane an operation goes to.
    fn lane(&mut self, polled: bool) -> &mut Lane {
        match (polled, self.polled.as_mut()) {
            (true, Some(p)) => p,
            _ => &mut self.main,
        }
    }

    /// Registers arenas as fixed buffers (replacing any earlier registration); operations
    /// whose range lies inside one go out as `READ_FIXED`/`WRITE_FIXED`. Refused while
    /// requests are in the ring.
    pub fn register_arenas(&mut self, arenas: &[Arc<BufferArena>]) -> std::io::Result<()> {
        self.refuse_in_flight()?;
        // No fixed operation until every ring holds the new registration.
        self.regions.clear();
        if !self.arenas.is_empty() {
            for lane in std::iter::once(&mut self.main).chain(self.polled.as_mut()) {
                match lane.ring.submitter().unregister_buffers() {
                    // ENXIO: this ring holds none (a registration that failed part-way).
                    Err(e) if e.raw_os_error() != Some(libc::ENXIO) => return Err(e),
                    _ => {}
                }
            }
            self.arenas.clear();
        }
        let regions: Vec<(usize, usize)> = arenas.iter().map(|a| a.region()).collect();
        let iovecs = iovecs(&regions);
        // Kept from before the first ring registers: a failure part-way leaves the rings that
        // registered holding the memory, which stays allocated until the next call drops
        // their registrations (or the rings drop).
        self.arenas = arenas.to_vec();
        for lane in std::iter::once(&mut self.main).chain(self.polled.as_mut()) {
            // SAFETY: every region belongs to an arena whose `Arc` is in `self.arenas`, which
            // is released only after every ring's registration is dropped (above, or with the
            // rings), so the memory stays allocated while registered.
            unsafe { lane.ring.submitter().register_buffers(&iovecs)? };
        }
        self.regions = regions;
        Ok(())
    }

    /// Whether operations wait to be handed to the kernel (at the next [`Self::pump`]).
    pub fn has_queued(&self) -> bool {
        self.main.has_queued() || self.polled.as_ref().is_some_and(Lane::has_queued)
    }

    /// Requests in the ring (submitted or queued).
    pub fn in_flight(&self) -> usize {
        self.flights.len() - self.free.len()
    }

    /// (fixed, plain) read and write operations issued so far.
    pub fn op_counts(&self) -> (u64, u64) {
        self.rw_ops
    }

    /// Read and write operations that went to the polled ring so far (counted in
    /// [`OwnedRing::op_counts`] too).
    pub fn polled_ops(&self) -> u64 {
        self.polled_ops
    }

    /// Polled operations the kernel refused as not pollable (`EOPNOTSUPP`: a filesystem
    /// without polled reads, say), which went again to the main ring, as every later
    /// operation of their member does: not counted as member errors.
    pub fn polled_fallbacks(&self) -> u64 {
        self.polled_fallbacks
    }

    /// The member whose polled operation was refused last ([`OwnedRing::polled_fallbacks`]).
    pub fn last_refused_member(&self) -> Option<&str> {
        self.last_unpolled.as_deref()
    }

    /// (flush operations requested, flushes issued to the kernel) so far: the difference is
    /// what sharing saved.
    pub fn flush_counts(&self) -> (u64, u64) {
        self.flush_ops
    }

    /// Readable after completions arrived; [`OwnedRing::clear_event`] resets it.
    pub fn event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.eventfd)
    }

    /// Resets the eventfd (one `read`): call after a wake-up that it caused.
    pub fn clear_event(&self) {
        // EAGAIN when it was not signalled is fine.
        let _ = self.eventfd.read();
    }

    /// Takes a request into the ring; its operations go to the kernel at the next
    /// [`OwnedRing::pump`]. Refused (the request is handed back untouched, with the reason)
    /// when a member has no descriptor for direct I/O, or an operation's range, offset or
    /// alignment is wrong for its member.
    // The request comes back by value (no allocation per refusal); its size is its fields'.
    #[allow(clippy::result_large_err)]
    pub fn submit(&mut self, req: RingRequest) -> Result<(), (RingRequest, MemberError)> {
        if req.segs.is_empty() || req.segs.len() >= MAX_SEGS {
            let e = MemberError::Unsupported("a request of no operations or too many");
            return Err((req, e));
        }
        let mut states = SmallVec::with_capacity(req.segs.len());
        for seg in &req.segs {
            let (base, buf_len) = {
                let b = req.bytes(seg.buf);
                (b.as_ptr() as usize, b.len())
            };
            let Some(fd) = seg.member.direct_fd().map(|f| f.as_raw_fd()) else {
                let e = MemberError::Unsupported("the member has no descriptor for direct I/O");
                return Err((req, e));
            };
            let mut fixed = None;
            let polled = self.polled.is_some()
                && seg.kind != RingOpKind::Flush
                && seg.member.polled_io()
                && !self.unpolled.contains(&fd);
            if seg.kind != RingOpKind::Flush {
                let (r, a) = (&seg.range, seg.member.alignment().max(1));
                let fits = r.start < r.end && r.end <= buf_len;
                let aligned = (base + r.start).is_multiple_of(a)
                    && r.len().is_multiple_of(a)
                    && seg.offset.is_multiple_of(a as u64);
                if !fits || !aligned {
                    let e = MemberError::Unsupported("operation range or alignment");
                    return Err((req, e));
                }
                if let Err(e) = check_range(&*seg.member, seg.offset, r.len()) {
                    return Err((req, e));
                }
                let start = base + r.start;
                fixed = self
                    .regions
                    .iter()
                    .position(|&(p, l)| start >= p && start + r.len() <= p + l)
                    .and_then(|i| u16::try_from(i).ok());
            }
            states.push(SegState {
                fd,
                fixed,
                done: 0,
                polled,
            });
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.flights.push(None);
                self.flights.len() - 1
            }
        };
        let n = req.segs.len();
        // Built in its slot, where it stays until its last operation completed (a flight is
        // large: no further move).
        self.flights[slot] = Some(Flight {
            req,
            segs: states,
            left: n,
            error: None,
        });
        for i in 0..n {
            let Some(flight) = self.flights[slot].as_mut() else {
                break;
            };
            if flight.req.segs[i].kind == RingOpKind::Flush {
                let fd = flight.segs[i].fd;
                self.join_flush(fd, slot, i);
            } else {
                let polled = flight.segs[i].polled;
                let e = Self::entry(&mut self.rw_ops, flight, slot, i);
                self.polled_ops += u64::from(polled);
                self.lane(polled).backlog.push_back(e);
            }
        }
        Ok(())
    }

    /// Flush operation `i` of the flight in `slot` goes with its member's next flush that
    /// has not reached the kernel (see the module documentation).
    fn join_flush(&mut self, fd: RawFd, slot: usize, i: usize) {
        self.flush_ops.0 += 1;
        let f = self.flushes.entry(fd).or_default();
        if f.current.is_empty() {
            f.started = false;
            f.current.push((slot, i));
            self.flush_ops.1 += 1;
            self.main.backlog.push_back(flush_entry(fd));
        } else if !f.started {
            f.current.push((slot, i));
        } else {
            f.next.push((slot, i));
        }
    }

    /// The SQE for what remains of operation `i` of `flight` (in slot `slot`), counted in
    /// `ops` (fixed, plain) when it reads or writes.
    fn entry(ops: &mut (u64, u64), flight: &mut Flight, slot: usize, i: usize) -> squeue::Entry {
        let user = ((slot as u64) << SEG_BITS) | i as u64;
        let st = &flight.segs[i];
        let seg = &flight.req.segs[i];
        let fd = types::Fd(st.fd);
        let off = seg.offset + st.done as u64;
        let e = match seg.kind {
            RingOpKind::Flush => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            kind => {
                // The request owns the buffer until this entry's completion is reaped.
                let which = seg.buf;
                let (start, done) = (seg.range.start, st.done);
                let buf = flight.req.bytes_mut(which).as_mut_ptr();
                // SAFETY: `submit` checked `range` lies inside the buffer; `done` < its
                // length, so the pointer stays inside the same allocation.
                let ptr = unsafe { buf.add(start + done) };
                let seg = &flight.req.segs[i];
                let st = &flight.segs[i];
                let len = (seg.range.len() - st.done) as u32;
                match (kind, st.fixed) {
                    (RingOpKind::Read, Some(idx)) => {
                        ops.0 += 1;
                        opcode::ReadFixed::new(fd, ptr, len, idx)
                            .offset(off)
                            .build()
                    }
                    (RingOpKind::Read, None) => {
                        ops.1 += 1;
                        opcode::Read::new(fd, ptr, len).offset(off).build()
                    }
                    (_, Some(idx)) => {
                        ops.0 += 1;
                        opcode::WriteFixed::new(fd, ptr, len, idx)
                            .offset(off)
                            .build()
                    }
                    (_, None) => {
                        ops.1 += 1;
                        opcode::Write::new(fd, ptr, len).offset(off).build()
                    }
                }
            }
        };
        e.user_data(user)
    }

    /// One pass: submits what is queued and runs the completions' deferred work (one
    /// `io_uring_enter`, none when nothing is queued or pending), polls the drives' queues
    /// for what is on the polled ring (one more `io_uring_enter`, while anything is there),
    /// and reaps every completion that arrived; finished requests go to `out`. Never waits.
    pub fn pump(&mut self, out: &mut Vec<RingCompletion>) -> std::io::Result<usize> {
        self.main.enable()?;
        if let Some(p) = self.polled.as_mut() {
            p.enable()?;
        }
        let mut finished = 0;
        for _ in 0..4 {
            self.main.fill(&mut self.flushes);
            // Deferred completions wait for an enter with GETEVENTS, which `submit` adds while
            // the kernel flags task work as pending.
            // A failing enter on one ring does not keep the other's completions (or those
            // that arrived) from being reaped: the first error is returned after the reap.
            let mut failed = None;
            if self.main.queued > 0 || (self.deferred && self.main.ring.submission().taskrun()) {
                failed = self.main.enter().err();
            }
            if let Some(p) = self.polled.as_mut() {
                p.fill(&mut self.flushes);
                // On a polled ring an enter (always with GETEVENTS) also polls the queues of
                // what was submitted before: the only way its completions arrive.
                if p.queued > 0 || p.submitted > 0 {
                    let e = p.enter().err();
                    failed = failed.or(e);
                }
            }
            let reaped = self.reap(out, &mut finished);
            if let Some(e) = failed {
                return Err(e);
            }
            // Short transfers re-queued entries: go round again, a few times at most.
            let backlog = !self.main.backlog.is_empty()
                || self.polled.as_ref().is_some_and(|p| !p.backlog.is_empty());
            if reaped == 0 || !backlog {
                break;
            }
        }
        Ok(finished)
    }

    /// Reaps every available completion; returns how many entries completed.
    fn reap(&mut self, out: &mut Vec<RingCompletion>, finished: &mut usize) -> usize {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        let mut n = self.main.reap_into(&mut cqes);
        if let Some(p) = self.polled.as_mut() {
            n += p.reap_into(&mut cqes);
        }
        for &(user, res) in &cqes {
            if user & FLUSH_TAG != 0 {
                self.flush_done((user & !FLUSH_TAG) as RawFd, res, out, finished);
                continue;
            }
            let slot = (user >> SEG_BITS) as usize;
            let i = (user as usize) & (MAX_SEGS - 1);
            self.seg_done(slot, i, res, out, finished);
        }
        self.cqes = cqes;
        n
    }

    /// A member's shared flush completed with `res`: so does every operation it carried;
    /// the next one goes out for those that wait.
    fn flush_done(
        &mut self,
        fd: RawFd,
        res: i32,
        out: &mut Vec<RingCompletion>,
        finished: &mut usize,
    ) {
        let Some(f) = self.flushes.get_mut(&fd) else {
            return;
        };
        if res < 0 && is_retry(-res) {
            f.started = false;
            self.main.backlog.push_back(flush_entry(fd));
            return;
        }
        let done = std::mem::take(&mut f.current);
        if !f.next.is_empty() {
            f.current = std::mem::take(&mut f.next);
            f.started = false;
            self.flush_ops.1 += 1;
            self.main.backlog.push_back(flush_entry(fd));
        }
        for (slot, i) in done {
            self.seg_done(slot, i, res, out, finished);
        }
    }

    /// Operation `i` of the flight in `slot` completed with `res`: retried (short or
    /// interrupted), failed, or done; a flight whose last operation is done goes to `out`.
    fn seg_done(
        &mut self,
        slot: usize,
        i: usize,
        res: i32,
        out: &mut Vec<RingCompletion>,
        finished: &mut usize,
    ) {
        // The flight stays in its slot (it is large: no move out and back per operation);
        // it leaves when its last operation completed.
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        // (A shared flush retries itself: `flush_done`.)
        let mut retry = false;
        let mut unpolled = None;
        if res < 0 && is_retry(-res) {
            retry = true;
        } else if res == -libc::EOPNOTSUPP && flight.segs[i].polled {
            // The member's file does not take polled I/O after all (a filesystem's reads, say):
            // not the member's failure. This operation, and the member's from now on, go to
            // the main ring.
            flight.segs[i].polled = false;
            unpolled = Some((
                flight.segs[i].fd,
                flight.req.segs[i].member.name().to_string(),
            ));
            retry = true;
        } else if res < 0 {
            let seg = &flight.req.segs[i];
            let e = MemberError::Io {
                member: seg.member.name().to_string(),
                offset: seg.offset,
                source: std::io::Error::from_raw_os_error(-res),
            };
            flight.error.get_or_insert((i, e));
            flight.left -= 1;
        } else {
            let want = flight.req.segs[i].range.len();
            let st = &mut flight.segs[i];
            st.done += res as usize;
            if flight.req.segs[i].kind == RingOpKind::Flush || st.done >= want {
                flight.left -= 1;
            } else if res == 0 {
                let seg = &flight.req.segs[i];
                let e = MemberError::Io {
                    member: seg.member.name().to_string(),
                    offset: seg.offset + st.done as u64,
                    source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                };
                flight.error.get_or_insert((i, e));
                flight.left -= 1;
            } else {
                retry = true;
            }
        }
        let left = flight.left;
        if retry {
            let polled = flight.segs[i].polled;
            let e = Self::entry(&mut self.rw_ops, flight, slot, i);
            self.lane(polled).backlog.push_back(e);
        }
        if let Some((fd, name)) = unpolled {
            self.polled_fallbacks += 1;
            self.last_unpolled = Some(name);
            if !self.unpolled.contains(&fd) {
                self.unpolled.push(fd);
            }
        }
        if left == 0 {
            let Some(flight) = self.flights[slot].take() else {
                return;
            };
            *finished += 1;
            self.free.push(slot);
            out.push(RingCompletion {
                tag: flight.req.tag,
                buf: flight.req.buf,
                more: flight.req.more,
                scratch: flight.req.scratch,
                segs: flight.req.segs,
                result: flight.error.map_or(Ok(()), Err),
            });
        }
    }
}

/// The SQE of a member's shared flush (descriptor `fd`).
fn flush_entry(fd: RawFd) -> squeue::Entry {
    opcode::Fsync::new(types::Fd(fd))
        .flags(types::FsyncFlags::DATASYNC)
        .build()
        .user_data(FLUSH_TAG | fd as u64)
}

impl Drop for OwnedRing {
    fn drop(&mut self) {
        // Entries in the backlog never reached the kernel. Every submitted one must complete
        // before the buffers (and the registered arenas) go: wait for them.
        let mut sink = Vec::new();
        loop {
            // The polled ring first: its waits poll, so its completions arrive whatever else
            // is pending, where a wait on the main ring would leave them unpolled meanwhile
            // (only the driver's timeout would poll them).
            if let Some(p) = self.polled.as_mut().filter(|p| p.in_kernel()) {
                p.wait_one();
            } else if self.main.in_kernel() {
                self.main.wait_one();
            } else {
                break;
            }
            // Entries in a backlog never go (retries of what completed short included).
            let mut finished = 0;
            self.clear_backlogs();
            self.reap(&mut sink, &mut finished);
            self.clear_backlogs();
            sink.clear();
        }
    }
}

/// The iovecs of registered regions (address, length).
fn iovecs(regions: &[(usize, usize)]) -> Vec<libc::iovec> {
    regions
        .iter()
        .map(|&(p, l)| libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: l,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::uring::FileMember;

    struct Scratch(std::path::PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A 1 MiB O_DIRECT file member beside the build output (tmpfs has no O_DIRECT), and a
    /// ring; `None` (the test then reports itself skipped) where either is not available.
    fn rig(name: &str) -> Option<(Scratch, Arc<dyn Member>, OwnedRing)> {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("ring-{name}-{}.img", std::process::id()));
        std::fs::File::create(&path).ok()?.set_len(1 << 20).ok()?;
        let s = Scratch(path.clone());
        let m = FileMember::open(&path, 4096).ok()?;
        let r = match OwnedRing::new(8) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipped: no io_uring here ({e})");
                return None;
            }
        };
        Some((s, Arc::new(m), r))
    }

    fn run_all(r: &mut OwnedRing, want: usize) -> Vec<RingCompletion> {
        let mut out = Vec::new();
        let t0 = std::time::Instant::now();
        while out.len() < want {
            r.pump(&mut out).unwrap();
            assert!(
                t0.elapsed().as_secs() < 10,
                "completions did not arrive: {r:?} backlog {} queued {} got {}",
                r.main.backlog.len(),
                r.main.queued,
                out.len()
            );
            std::thread::yield_now();
        }
        out
    }

    /// A ring made on one thread (buffers registered there) and driven by another, as a
    /// poller's is: the driving thread becomes its issuer, the eventfd turns readable when a
    /// completion arrives, and the completion is reaped by the pump (with deferred task
    /// work, only by the pump: nothing reaches the completion queue before it).
    #[test]
    fn a_ring_made_on_one_thread_is_driven_by_another() {
        let Some((_s, m, mut r)) = rig("handoff") else {
            return;
        };
        let mut bufs = BufferArena::with_buffers(1, 4096, 4096).unwrap();
        r.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        let b = bufs.pop().unwrap();
        let deferred = r.deferred_completions();
        eprintln!("deferred completions: {deferred}");
        std::thread::spawn(move || {
            r.submit(RingRequest {
                tag: 7,
                buf: Some(b),
                more: Vec::new(),
                scratch: RingScratch::new(),
                segs: smallvec::smallvec![RingSeg {
                    member: m.clone(),
                    kind: RingOpKind::Write,
                    offset: 4096,
                    buf: RingBuf::Main,
                    range: 0..4096,
                }],
            })
            .unwrap();
            let mut out = Vec::new();
            r.pump(&mut out).unwrap();
            let t0 = std::time::Instant::now();
            while out.is_empty() {
                if wait_readable(&r.event_fd()) {
                    if deferred {
                        assert_eq!(r.main.ring.completion().len(), 0, "posted before the pump");
                    }
                    r.clear_event();
                    r.pump(&mut out).unwrap();
                }
                assert!(t0.elapsed().as_secs() < 10, "no completion: {r:?}");
            }
            assert_eq!(out.len(), 1);
            assert!(out[0].result.is_ok(), "{:?}", out[0].result);
            assert_eq!(r.op_counts(), (1, 0), "a write on registered memory");
        })
        .join()
        .unwrap();
    }

    /// A file member that says its queue polls (a regular file on ext4 or xfs completes a
    /// polled ring's operations too, by interrupt, which the ring's polling then finds).
    #[derive(Debug)]
    struct Polled(Arc<dyn Member>);

    impl Member for Polled {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
            self.0.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
            self.0.write_at(offset, buf)
        }
        fn flush(&self) -> Result<(), MemberError> {
            self.0.flush()
        }
        fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            self.0.direct_fd()
        }
        fn alignment(&self) -> usize {
            self.0.alignment()
        }
        fn polled_io(&self) -> bool {
            true
        }
    }

    /// Reads and writes of a member whose queue polls go to the polled ring (registered
    /// buffers too), its flushes to the main one; `polling` says so while they are in
    /// flight; a request mixing both completes once, with the data written and read back.
    #[test]
    fn a_polling_members_reads_and_writes_go_to_the_polled_ring() {
        let Some((_s, m, mut r)) = rig("polled") else {
            return;
        };
        let mut bufs = BufferArena::with_buffers(2, 8192, 4096).unwrap();
        r.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        if let Err(e) = r.enable_polling(8) {
            eprintln!("skipped: no polled io_uring here ({e})");
            return;
        }
        assert!(r.polls() && !r.polling());
        let p: Arc<dyn Member> = Arc::new(Polled(m.clone()));
        let seg = |member: &Arc<dyn Member>, kind, offset, range| RingSeg {
            member: member.clone(),
            kind,
            offset,
            buf: RingBuf::Main,
            range,
        };
        let mut w = bufs.pop().unwrap();
        for (j, x) in w.iter_mut().enumerate() {
            *x = (j % 251) as u8;
        }
        let write = RingRequest {
            tag: 1,
            buf: Some(w),
            more: Vec::new(),
            scratch: RingScratch::new(),
            segs: smallvec::smallvec![
                seg(&p, RingOpKind::Write, 0, 0..4096),
                seg(&p, RingOpKind::Write, 65536, 4096..8192),
                seg(&p, RingOpKind::Flush, 0, 0..0),
            ],
        };
        r.submit(write).unwrap();
        assert!(r.polling(), "two writes wait for the polled ring");
        let done = run_all(&mut r, 1);
        assert!(done[0].result.is_ok(), "{:?}", done[0].result);
        assert_eq!(r.polled_ops(), 2);
        assert_eq!(r.op_counts(), (2, 0), "on registered memory");
        assert_eq!(r.flush_counts(), (1, 1), "the flush went to the main ring");
        assert!(!r.polling());
        let read = RingRequest {
            tag: 2,
            buf: bufs.pop(),
            more: Vec::new(),
            scratch: RingScratch::new(),
            segs: smallvec::smallvec![
                seg(&p, RingOpKind::Read, 65536, 0..4096),
                // Not polled: the main ring, in the same request.
                seg(&m, RingOpKind::Read, 0, 4096..8192),
            ],
        };
        r.submit(read).unwrap();
        let done = run_all(&mut r, 1);
        // Some filesystems refuse polled reads (ext4 on Linux 6.18 here): the read goes again
        // to the main ring, and is no member error.
        assert!(done[0].result.is_ok(), "{:?}", done[0].result);
        assert_eq!(r.polled_ops(), 3);
        eprintln!(
            "polled operations refused and sent again: {}",
            r.polled_fallbacks()
        );
        assert!(r.polled_fallbacks() <= 1);
        let b = done[0].buf.as_ref().unwrap();
        let want: Vec<u8> = (4096..8192)
            .chain(0..4096)
            .map(|j| (j % 251) as u8)
            .collect();
        assert!(b[..] == want[..], "read back what was written");
        assert!(!r.polling());
        assert_eq!(r.in_flight(), 0);
    }

    /// Registering arenas after the polled ring exists registers them with both rings, at
    /// the same indices: a polled write on registered memory goes out fixed.
    #[test]
    fn arenas_registered_after_polling_is_enabled_serve_both_rings() {
        let Some((_s, m, mut r)) = rig("polled-late") else {
            return;
        };
        if let Err(e) = r.enable_polling(8) {
            eprintln!("skipped: no polled io_uring here ({e})");
            return;
        }
        let mut bufs = BufferArena::with_buffers(1, 4096, 4096).unwrap();
        r.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        // Again: the rings drop the first registration and take the new one.
        r.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        let p: Arc<dyn Member> = Arc::new(Polled(m));
        r.submit(RingRequest {
            tag: 1,
            buf: bufs.pop(),
            more: Vec::new(),
            scratch: RingScratch::new(),
            segs: smallvec::smallvec![RingSeg {
                member: p,
                kind: RingOpKind::Write,
                offset: 8192,
                buf: RingBuf::Main,
                range: 0..4096,
            }],
        })
        .unwrap();
        let done = run_all(&mut r, 1);
        assert!(done[0].result.is_ok(), "{:?}", done[0].result);
        assert_eq!((r.polled_ops(), r.op_counts()), (1, (1, 0)));
    }

    /// Whether `fd` turns readable within 100 ms.
    fn wait_readable(fd: &impl std::os::fd::AsFd) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(100u16)).unwrap_or(0) > 0
    }

    #[test]
    fn flushes_of_one_member_are_shared_by_the_requests_that_wait_for_them() {
        let Some((_s, m, mut r)) = rig("flush") else {
            return;
        };
        let flush = |tag| RingRequest {
            tag,
            buf: None,
            more: Vec::new(),
            scratch: RingScratch::new(),
            segs: smallvec::smallvec![RingSeg {
                member: m.clone(),
                kind: RingOpKind::Flush,
                offset: 0,
                buf: RingBuf::Main,
                range: 0..0,
            }],
        };
        for t in 0..3 {
            r.submit(flush(t)).unwrap();
        }
        let done = run_all(&mut r, 3);
        assert!(done.iter().all(|c| c.result.is_ok()));
        assert_eq!(r.flush_counts(), (3, 1), "three requests, one flush");
        // One handed to the kernel: the requests that come meanwhile share the next one
        // (or, when it already completed, one of their own).
        r.submit(flush(3)).unwrap();
        let mut out = Vec::new();
        r.pump(&mut out).unwrap();
        r.submit(flush(4)).unwrap();
        r.submit(flush(5)).unwrap();
        let rest = run_all(&mut r, 3 - out.len());
        assert!(out.iter().chain(&rest).all(|c| c.result.is_ok()));
        assert_eq!(r.flush_counts(), (6, 3));
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn requests_of_many_operations_complete_once_with_their_buffers() {
        let Some((_s, m, mut r)) = rig("many") else {
            return;
        };
        let mut bufs = BufferArena::with_buffers(40, 16384, 4096).unwrap();
        r.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        // 20 writes of 4 operations each: more entries than the ring has slots (8).
        for t in 0..20u64 {
            let mut b = bufs.pop().unwrap();
            for (j, x) in b.iter_mut().enumerate() {
                *x = (t as usize * 7 + j / 4096) as u8;
            }
            let segs = (0..4)
                .map(|k| RingSeg {
                    buf: RingBuf::Main,
                    member: m.clone(),
                    kind: RingOpKind::Write,
                    offset: t * 16384 + k * 4096,
                    range: (k as usize * 4096)..(k as usize + 1) * 4096,
                })
                .collect();
            r.submit(RingRequest {
                scratch: RingScratch::new(),
                more: Vec::new(),
                tag: t,
                buf: Some(b),
                segs,
            })
            .unwrap();
        }
        let done = run_all(&mut r, 20);
        let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..20).collect::<Vec<_>>());
        assert!(done.iter().all(|c| c.result.is_ok() && c.buf.is_some()));
        assert_eq!(r.in_flight(), 0);
        bufs.extend(done.into_iter().filter_map(|c| c.buf));
        // Read everything back through the ring (one request of 20 operations), then flush.
        let mut big = BufferArena::with_buffers(1, 20 * 16384, 4096).unwrap();
        let b = big.pop().unwrap();
        let segs = (0..20u64)
            .map(|t| RingSeg {
                buf: RingBuf::Main,
                member: m.clone(),
                kind: RingOpKind::Read,
                offset: t * 16384,
                range: (t as usize * 16384)..(t as usize + 1) * 16384,
            })
            .collect();
        r.submit(RingRequest {
            scratch: RingScratch::new(),
            more: Vec::new(),
            tag: 99,
            buf: Some(b),
            segs,
        })
        .unwrap();
        let done = run_all(&mut r, 1);
        assert!(done[0].result.is_ok());
        let b = done[0].buf.as_ref().unwrap();
        for t in 0..20usize {
            for k in 0..4usize {
                let at = t * 16384 + k * 4096;
                assert!(b[at..at + 4096].iter().all(|&x| x == (t * 7 + k) as u8));
            }
        }
        r.submit(RingRequest {
            scratch: RingScratch::new(),
            more: Vec::new(),
            tag: 7,
            buf: None,
            segs: smallvec::smallvec![RingSeg {
                buf: RingBuf::Main,
                member: m.clone(),
                kind: RingOpKind::Flush,
                offset: 0,
                range: 0..0,
            }],
        })
        .unwrap();
        assert!(run_all(&mut r, 1)[0].result.is_ok());
        // The writes used the registered arena, the big read did not.
        let (fixed, plain) = r.op_counts();
        assert_eq!((fixed, plain), (80, 20));
    }

    #[test]
    fn bad_operations_are_refused_before_the_kernel_and_errors_name_the_operation() {
        let Some((_s, m, mut r)) = rig("bad") else {
            return;
        };
        let mut bufs = BufferArena::with_buffers(1, 8192, 4096).unwrap();
        let b = bufs.pop().unwrap();
        let seg = |offset: u64, range: Range<usize>| RingSeg {
            buf: RingBuf::Main,
            member: m.clone(),
            kind: RingOpKind::Read,
            offset,
            range,
        };
        // Misaligned range, range past the buffer, past the member's end: handed back.
        let mut req = RingRequest {
            scratch: RingScratch::new(),
            more: Vec::new(),
            tag: 1,
            buf: Some(b),
            segs: smallvec::smallvec![seg(0, 512..4096)],
        };
        for bad in [
            seg(0, 512..4096),
            seg(0, 4096..12288),
            seg(1 << 20, 0..4096),
        ] {
            req.segs = smallvec::smallvec![bad];
            let (back, _) = r.submit(req).unwrap_err();
            req = back;
        }
        assert_eq!(r.in_flight(), 0);
        // A member without a descriptor.
        let mem: Arc<dyn Member> = Arc::new(crate::member::MemMember::new("mem", 1 << 20));
        req.segs = smallvec::smallvec![RingSeg {
            buf: RingBuf::Main,
            member: mem,
            kind: RingOpKind::Read,
            offset: 0,
            range: 0..4096,
        }];
        let (back, e) = r.submit(req).unwrap_err();
        assert!(e.to_string().contains("descriptor"), "{e}");
        assert!(back.buf.is_some());
    }

    #[test]
    fn dropping_the_ring_waits_for_what_it_submitted() {
        let Some((_s, m, mut r)) = rig("drop") else {
            return;
        };
        let mut bufs = BufferArena::with_buffers(8, 65536, 4096).unwrap();
        for t in 0..8u64 {
            let b = bufs.pop().unwrap();
            r.submit(RingRequest {
                scratch: RingScratch::new(),
                more: Vec::new(),
                tag: t,
                buf: Some(b),
                segs: smallvec::smallvec![RingSeg {
                    buf: RingBuf::Main,
                    member: m.clone(),
                    kind: RingOpKind::Write,
                    offset: t * 65536,
                    range: 0..65536,
                }],
            })
            .unwrap();
        }
        let mut out = Vec::new();
        r.pump(&mut out).unwrap();
        // Buffers still inside; the drop must not return before the kernel is done.
        drop(r);
    }
}
