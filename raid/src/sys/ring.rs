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
//! - **registered memory**: [`OwnedRing::register_arenas`] keeps each arena's `Arc` until the
//!   registration is replaced or the ring drops (`ring` is dropped before `arenas`); a fixed
//!   operation is issued only when its whole range lies inside one registered region;
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
/// Field order matters: `ring` drops (and with it the kernel's registration) before
/// `arenas` release the memory; [`Drop`] first waits for every submitted operation.
pub struct OwnedRing {
    ring: IoUring,
    flights: Vec<Option<Flight>>,
    free: Vec<usize>,
    /// Entries that did not fit the submission queue yet.
    backlog: VecDeque<squeue::Entry>,
    /// Entries handed to the kernel whose completion was not reaped yet.
    submitted: usize,
    /// Entries pushed to the submission queue and not yet submitted.
    queued: usize,
    regions: Vec<(usize, usize)>,
    arenas: Vec<Arc<BufferArena>>,
    eventfd: nix::sys::eventfd::EventFd,
    /// Read and write operations issued: (fixed, plain).
    rw_ops: (u64, u64),
    /// Reaped completions (kept to spare an allocation per pass).
    cqes: Vec<(u64, i32)>,
    /// Completions run as deferred task work (see [`OwnedRing::new`]).
    deferred: bool,
    /// The ring was created disabled and has not been enabled by its owner thread yet.
    disabled: bool,
    /// Shared flushes per member descriptor.
    flushes: HashMap<RawFd, SharedFlush>,
    /// Flush operations requested, and flushes issued to the kernel.
    flush_ops: (u64, u64),
}

impl std::fmt::Debug for OwnedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedRing")
            .field("in_flight", &self.in_flight())
            .field("submitted", &self.submitted)
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
            ring,
            flights: Vec::new(),
            free: Vec::new(),
            backlog: VecDeque::new(),
            submitted: 0,
            queued: 0,
            regions: Vec::new(),
            arenas: Vec::new(),
            eventfd,
            rw_ops: (0, 0),
            cqes: Vec::with_capacity(64),
            deferred,
            disabled: deferred,
            flushes: HashMap::new(),
            flush_ops: (0, 0),
        })
    }

    /// Whether completions run as deferred task work (see [`OwnedRing::new`]).
    pub fn deferred_completions(&self) -> bool {
        self.deferred
    }

    /// Enables a ring created disabled; the calling thread becomes its only issuer.
    fn enable(&mut self) -> std::io::Result<()> {
        if self.disabled {
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        Ok(())
    }

    /// Registers arenas as fixed buffers (replacing any earlier registration); operations
    /// whose range lies inside one go out as `READ_FIXED`/`WRITE_FIXED`. Refused while
    /// requests are in the ring.
    pub fn register_arenas(&mut self, arenas: &[Arc<BufferArena>]) -> std::io::Result<()> {
        if self.in_flight() > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "requests in flight",
            ));
        }
        if !self.regions.is_empty() {
            self.ring.submitter().unregister_buffers()?;
            self.regions.clear();
            self.arenas.clear();
        }
        let regions: Vec<(usize, usize)> = arenas.iter().map(|a| a.region()).collect();
        let iovecs: Vec<libc::iovec> = regions
            .iter()
            .map(|&(p, l)| libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: l,
            })
            .collect();
        // SAFETY: every region belongs to an arena whose `Arc` is stored in `self.arenas`
        // right after this call and released only after unregistering (or after `ring`
        // dropped), so the memory stays allocated while registered.
        unsafe { self.ring.submitter().register_buffers(&iovecs)? };
        self.regions = regions;
        self.arenas = arenas.to_vec();
        Ok(())
    }

    /// Whether operations wait to be handed to the kernel (at the next [`Self::pump`]).
    pub fn has_queued(&self) -> bool {
        self.queued > 0 || !self.backlog.is_empty()
    }

    /// Requests in the ring (submitted or queued).
    pub fn in_flight(&self) -> usize {
        self.flights.len() - self.free.len()
    }

    /// (fixed, plain) read and write operations issued so far.
    pub fn op_counts(&self) -> (u64, u64) {
        self.rw_ops
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
            states.push(SegState { fd, fixed, done: 0 });
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
                let e = Self::entry(&mut self.rw_ops, flight, slot, i);
                self.backlog.push_back(e);
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
            self.backlog.push_back(flush_entry(fd));
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

    /// Moves backlog entries into the submission queue while it has room, and no more than
    /// the completion queue holds: completions beyond it would wait in the kernel's overflow
    /// list, which only an `io_uring_enter` flushes, and a pass with nothing to submit makes
    /// none.
    fn fill(&mut self) {
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
                if let Some(f) = self.flushes.get_mut(&((user & !FLUSH_TAG) as RawFd)) {
                    f.started = true;
                }
            }
        }
    }

    /// One pass: submits what is queued and runs the completions' deferred work (one
    /// `io_uring_enter`, none when nothing is queued or pending), and reaps every completion
    /// that arrived; finished requests go to `out`. Never waits.
    pub fn pump(&mut self, out: &mut Vec<RingCompletion>) -> std::io::Result<usize> {
        self.enable()?;
        let mut finished = 0;
        for _ in 0..4 {
            self.fill();
            // Deferred completions wait for an enter with GETEVENTS, which `submit` adds while
            // the kernel flags task work as pending.
            if self.queued > 0 || (self.deferred && self.ring.submission().taskrun()) {
                match self.ring.submit() {
                    Ok(n) => {
                        self.submitted += n;
                        self.queued -= n.min(self.queued);
                    }
                    // The completion queue is full or the kernel is short of memory: reap
                    // first, submit at the next pass.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
            let reaped = self.reap(out, &mut finished);
            // Short transfers re-queued entries: go round again, a few times at most.
            if reaped == 0 || self.backlog.is_empty() {
                break;
            }
        }
        Ok(finished)
    }

    /// Reaps every available completion; returns how many entries completed.
    fn reap(&mut self, out: &mut Vec<RingCompletion>, finished: &mut usize) -> usize {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        let n = cqes.len();
        self.submitted -= n.min(self.submitted);
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
            self.backlog.push_back(flush_entry(fd));
            return;
        }
        let done = std::mem::take(&mut f.current);
        if !f.next.is_empty() {
            f.current = std::mem::take(&mut f.next);
            f.started = false;
            self.flush_ops.1 += 1;
            self.backlog.push_back(flush_entry(fd));
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
        if res < 0 && is_retry(-res) {
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
            let e = Self::entry(&mut self.rw_ops, flight, slot, i);
            self.backlog.push_back(e);
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
        while self.submitted > 0 || self.queued > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(n) => {
                    self.submitted += n;
                    self.queued -= n.min(self.queued);
                }
                Err(e) if e.raw_os_error().is_some_and(is_retry) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(_) => {
                    // Freeing memory the kernel may still write is worse than stopping.
                    std::process::abort();
                }
            }
            self.backlog.clear();
            let mut finished = 0;
            self.reap(&mut sink, &mut finished);
            self.backlog.clear();
            sink.clear();
        }
    }
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
                r.backlog.len(),
                r.queued,
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
                        assert_eq!(r.ring.completion().len(), 0, "posted before the pump");
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
