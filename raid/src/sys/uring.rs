//! Real member I/O: [`FileMember`] (a block device or regular file opened with `O_DIRECT`)
//! and [`UringExecutor`] (one io_uring; a batch of member operations goes out in one
//! submission and the call returns when all completed).
//!
//! Buffers are never copied. An operation whose buffer lies inside memory registered with
//! [`UringExecutor::register_buffers`] goes out as `READ_FIXED`/`WRITE_FIXED` with that
//! buffer's index; any other (aligned) buffer goes out as plain `READ`/`WRITE`. The target's
//! pool registers its memory once per poller ring and then just passes slices of it.
//!
//! Invariants the `unsafe` code relies on:
//! - **buffer lifetime**: `execute` borrows every operation's buffer for the whole call and
//!   does not return while any submitted entry is still in flight (it keeps waiting; if the
//!   kernel refuses to let it wait, the process aborts rather than free memory the kernel may
//!   still write; if the call unwinds from a panic, the `InFlight` guard waits for every
//!   submitted entry first). So each SQE's pointer stays valid until its CQE is reaped;
//! - **registered memory**: `register_buffers` is `unsafe`; its caller promises the regions
//!   stay allocated until the executor is dropped or `unregister_buffers` is called. A fixed
//!   operation is only issued when its whole buffer lies inside one registered region;
//! - **fds**: an SQE uses the raw fd of a [`Member`] borrowed for the whole call.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use std::sync::Arc;

use io_uring::{opcode, types, IoUring};

use super::buf::BufferArena;

use crate::error::MemberError;
use crate::io::{Executor, MemberOp, OpBuf};
use crate::member::{check_range, Member};

/// A block device or regular file opened with `O_DIRECT`.
#[derive(Debug)]
pub struct FileMember {
    name: String,
    file: File,
    size: u64,
    align: usize,
    volatile_cache: bool,
    /// A block device whose queue polls (see [`Member::polled_io`]).
    polled: bool,
}

impl FileMember {
    /// Opens `path` read-write with `O_DIRECT`. `align` is the device's logical block size
    /// (512 or 4096): buffers, offsets and lengths must be multiples of it. Filesystems
    /// without `O_DIRECT` (tmpfs) fail here with `EINVAL`.
    ///
    /// A block device is opened with `O_EXCL`, as mdadm does: one owner at a time. A device
    /// that is mounted, part of an md or device-mapper device, or opened exclusively by
    /// another program (another raidline) is refused (`EBUSY`), naming the holders and mount
    /// points Linux lists for it and its partitions.
    pub fn open(path: &Path, align: usize) -> Result<Self, MemberError> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let name = path.display().to_string();
        let open_err = |source| MemberError::Open {
            member: name.clone(),
            source,
        };
        let block = std::fs::metadata(path)
            .ok()
            .filter(|m| m.file_type().is_block_device())
            .map(|m| m.rdev());
        let excl = if block.is_some() { libc::O_EXCL } else { 0 };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT | excl)
            .open(path)
            .map_err(|e| match (e.raw_os_error(), block) {
                (Some(libc::EBUSY), Some(rdev)) => {
                    let why = match users_of(rdev) {
                        u if u.is_empty() => "opened exclusively by another program \
                                              (another raidline?)"
                            .to_string(),
                        u => u.join(", "),
                    };
                    std::io::Error::new(e.kind(), format!("the device is in use: {why}"))
                }
                _ => e,
            })
            .map_err(open_err)?;
        // Works for regular files and block devices alike.
        let size = file.seek(SeekFrom::End(0)).map_err(open_err)?;
        let volatile_cache = write_cache_is_volatile(&file);
        let polled = block.is_some_and(queue_polls);
        Ok(FileMember {
            name,
            file,
            size,
            align: align.max(512),
            volatile_cache,
            polled,
        })
    }

    fn check(&self, offset: u64, ptr: usize, len: usize) -> Result<(), MemberError> {
        check_range(self, offset, len)?;
        let a = self.align;
        if !offset.is_multiple_of(a as u64) || !ptr.is_multiple_of(a) || !len.is_multiple_of(a) {
            return Err(MemberError::Misaligned {
                member: self.name.clone(),
                align: a,
                offset,
                len,
            });
        }
        Ok(())
    }

    fn io_err(&self, offset: u64, source: std::io::Error) -> MemberError {
        MemberError::Io {
            member: self.name.clone(),
            offset,
            source,
        }
    }
}

/// What Linux says holds block device `rdev` or one of its partitions: the md/dm devices
/// stacked on it (`/sys/dev/block/M:m/holders`) and where they are mounted
/// (`/proc/self/mountinfo`). Empty when it says nothing (an exclusive open by a program).
fn users_of(rdev: u64) -> Vec<String> {
    let dev = |major: u32, minor: u32| format!("{major}:{minor}");
    let me = dev(libc::major(rdev), libc::minor(rdev));
    let sys = std::path::PathBuf::from(format!("/sys/dev/block/{me}"));
    // The device and its partitions: (sysfs directory, "major:minor").
    let mut nodes = vec![(sys.clone(), me.clone())];
    if let Ok(dir) = std::fs::read_dir(&sys) {
        for e in dir.flatten() {
            let p = e.path();
            if p.join("partition").exists() {
                if let Ok(d) = std::fs::read_to_string(p.join("dev")) {
                    nodes.push((p, d.trim().to_string()));
                }
            }
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut users = Vec::new();
    for (p, d) in &nodes {
        if let Ok(h) = std::fs::read_dir(p.join("holders")) {
            for e in h.flatten() {
                users.push(format!("held by {}", e.file_name().to_string_lossy()));
            }
        }
        // mountinfo: id parent major:minor root mount-point ...
        for line in mounts.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.get(2) == Some(&d.as_str()) {
                if let Some(at) = f.get(4) {
                    users.push(format!("mounted at {at}"));
                }
            }
        }
    }
    users.sort();
    users.dedup();
    users
}

impl Member for FileMember {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        self.check(offset, buf.as_ptr() as usize, buf.len())?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| self.io_err(offset, e))
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        self.check(offset, buf.as_ptr() as usize, buf.len())?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| self.io_err(offset, e))
    }

    fn flush(&self) -> Result<(), MemberError> {
        self.file.sync_data().map_err(|e| self.io_err(0, e))
    }

    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    fn alignment(&self) -> usize {
        self.align
    }

    fn volatile_write_cache(&self) -> bool {
        self.volatile_cache
    }

    fn polled_io(&self) -> bool {
        self.polled
    }
}

/// Whether block device `rdev` has poll queues: its `queue/io_poll` reads 1 (NVMe with
/// `nvme.poll_queues` > 0).
fn queue_polls(rdev: u64) -> bool {
    queue_attr(rdev, "io_poll").is_some_and(|s| s.trim() == "1")
}

/// Block device `dev`'s `queue/NAME` in sysfs, or its disk's for a partition (which has no
/// queue of its own).
fn queue_attr(dev: u64, name: &str) -> Option<String> {
    let base = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    [
        format!("{base}/queue/{name}"),
        format!("{base}/../queue/{name}"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
}

/// Reads the block device's `queue/write_cache` in sysfs ("write back" = volatile, "write
/// through" = not) for a block device or the device under a regular file. Unknown → volatile.
fn write_cache_is_volatile(file: &File) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(meta) = file.metadata() else {
        return true;
    };
    let dev = if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    };
    queue_attr(dev, "write_cache").is_none_or(|s| s.trim() != "write through")
}

/// A registered memory region (address range and its fixed-buffer index).
#[derive(Debug, Clone, Copy)]
struct Region {
    start: usize,
    len: usize,
}

/// io_uring executor: one ring, owned by one thread.
///
/// Field order matters: `ring` drops (and the kernel drops its registration) before
/// `arenas` release the memory. No operation is ever in flight when it drops (`execute`
/// returns only after reaping everything it submitted).
pub struct UringExecutor {
    ring: IoUring,
    regions: Vec<Region>,
    /// Arenas registered through the safe path, kept alive while registered.
    arenas: Vec<Arc<BufferArena>>,
    /// Operations that went out as fixed-buffer operations (counts, for tests and metrics).
    fixed_ops: u64,
    plain_ops: u64,
}

impl std::fmt::Debug for UringExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringExecutor")
            .field("regions", &self.regions.len())
            .field("fixed_ops", &self.fixed_ops)
            .field("plain_ops", &self.plain_ops)
            .finish()
    }
}

/// Per-operation progress inside one `execute` call.
#[derive(Debug, Clone, Copy)]
struct Progress {
    done: usize,
    fixed: Option<u16>,
}

impl UringExecutor {
    /// A ring with `entries` submission slots (rounded up to a power of two by the kernel).
    pub fn new(entries: u32) -> std::io::Result<Self> {
        Ok(UringExecutor {
            ring: IoUring::new(entries.max(8))?,
            regions: Vec::new(),
            arenas: Vec::new(),
            fixed_ops: 0,
            plain_ops: 0,
        })
    }

    /// Registers memory regions as fixed buffers (index = position in `regions`), replacing
    /// any earlier registration.
    ///
    /// # Safety
    /// Every region must stay allocated (not freed or unmapped) until this executor is
    /// dropped or [`UringExecutor::unregister_buffers`] returns. The kernel pins the pages;
    /// reading and writing the memory from Rust meanwhile is fine.
    pub unsafe fn register_buffers(&mut self, regions: &[&[u8]]) -> std::io::Result<()> {
        self.unregister_buffers()?;
        let iovecs: Vec<libc::iovec> = regions
            .iter()
            .map(|r| libc::iovec {
                iov_base: r.as_ptr() as *mut libc::c_void,
                iov_len: r.len(),
            })
            .collect();
        // SAFETY: the caller guarantees each region outlives the registration (this
        // function's contract); the iovec array itself is only read during the call.
        unsafe { self.ring.submitter().register_buffers(&iovecs)? };
        self.regions = regions
            .iter()
            .map(|r| Region {
                start: r.as_ptr() as usize,
                len: r.len(),
            })
            .collect();
        Ok(())
    }

    /// Drops the fixed-buffer registration.
    pub fn unregister_buffers(&mut self) -> std::io::Result<()> {
        if !self.regions.is_empty() {
            self.ring.submitter().unregister_buffers()?;
            self.regions.clear();
        }
        self.arenas.clear();
        Ok(())
    }

    /// Registers arenas as fixed buffers (safe: the executor keeps each arena alive until it
    /// is unregistered or the executor drops).
    pub fn register_arenas(&mut self, arenas: &[Arc<BufferArena>]) -> std::io::Result<()> {
        let regions: Vec<(usize, usize)> = arenas.iter().map(|a| a.region()).collect();
        let iovecs: Vec<libc::iovec> = regions
            .iter()
            .map(|&(p, l)| libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: l,
            })
            .collect();
        self.unregister_buffers()?;
        // SAFETY: every region belongs to an arena whose `Arc` is stored in `self.arenas`
        // right after this call and dropped only after unregistering, so the memory stays
        // allocated while registered.
        unsafe { self.ring.submitter().register_buffers(&iovecs)? };
        self.regions = regions
            .into_iter()
            .map(|(start, len)| Region { start, len })
            .collect();
        self.arenas = arenas.to_vec();
        Ok(())
    }

    /// (fixed, plain) operation counts so far.
    pub fn op_counts(&self) -> (u64, u64) {
        (self.fixed_ops, self.plain_ops)
    }

    /// Builds the SQE for the remaining part of operation `i`.
    fn entry(op: &mut MemberOp<'_>, fd: i32, user: u64, p: Progress) -> io_uring::squeue::Entry {
        let off = op.offset + p.done as u64;
        let fd = types::Fd(fd);
        let e = match (&mut op.buf, p.fixed) {
            (OpBuf::Read(b), Some(idx)) => {
                let rest = &mut b[p.done..];
                opcode::ReadFixed::new(fd, rest.as_mut_ptr(), rest.len() as u32, idx)
                    .offset(off)
                    .build()
            }
            (OpBuf::Read(b), None) => {
                let rest = &mut b[p.done..];
                opcode::Read::new(fd, rest.as_mut_ptr(), rest.len() as u32)
                    .offset(off)
                    .build()
            }
            (OpBuf::Write(b), Some(idx)) => {
                let rest = &b[p.done..];
                opcode::WriteFixed::new(fd, rest.as_ptr(), rest.len() as u32, idx)
                    .offset(off)
                    .build()
            }
            (OpBuf::Write(b), None) => {
                let rest = &b[p.done..];
                opcode::Write::new(fd, rest.as_ptr(), rest.len() as u32)
                    .offset(off)
                    .build()
            }
        };
        e.user_data(user)
    }
}

/// Submits pending entries and waits for at least `want` completions, retrying interrupted
/// waits. Aborts the process if the kernel refuses to wait: returning would let the caller
/// free buffers still in flight.
fn wait_for(ring: &mut IoUring, want: usize) {
    loop {
        match ring.submit_and_wait(want) {
            Ok(_) => return,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                ) =>
            {
                continue
            }
            Err(e) => {
                eprintln!("raidline-raid: io_uring wait failed with I/O in flight: {e}; aborting");
                std::process::abort();
            }
        }
    }
}

/// Counts submitted-but-unreaped entries; if dropped with any left (only when unwinding from
/// a panic inside `execute`), waits for all of them before the borrowed buffers can be freed.
struct InFlight<'r> {
    ring: &'r mut IoUring,
    count: usize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        while self.count > 0 {
            wait_for(self.ring, 1);
            let reaped = self.ring.completion().count();
            self.count = self.count.saturating_sub(reaped);
        }
    }
}

/// One batch's bookkeeping inside a call.
struct Set {
    progress: Vec<Progress>,
    queue: Vec<usize>,
    next: usize,
}

impl Set {
    fn done(&self) -> bool {
        self.next >= self.queue.len()
    }
}

/// Validates `ops`, runs those whose member has no descriptor synchronously, answers the
/// ones that cannot be submitted, and returns the bookkeeping for the rest.
fn prepare(regions: &[Region], counts: &mut (u64, u64), ops: &mut [MemberOp<'_>]) -> Set {
    let mut progress = vec![
        Progress {
            done: 0,
            fixed: None
        };
        ops.len()
    ];
    let mut queue: Vec<usize> = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter_mut().enumerate() {
        if op.member.direct_fd().is_none() {
            op.run_sync();
            continue;
        }
        let (ptr, len) = match &op.buf {
            OpBuf::Read(b) => (b.as_ptr() as usize, b.len()),
            OpBuf::Write(b) => (b.as_ptr() as usize, b.len()),
        };
        if let Err(e) = check_range(op.member, op.offset, len) {
            op.result = Some(Err(e));
            continue;
        }
        let a = op.member.alignment().max(1) as u64;
        if op.offset % a != 0
            || !(ptr as u64).is_multiple_of(a)
            || !(len as u64).is_multiple_of(a)
            || len > u32::MAX as usize
        {
            op.result = Some(Err(MemberError::Misaligned {
                member: op.member.name().to_string(),
                align: a as usize,
                offset: op.offset,
                len,
            }));
            continue;
        }
        if len == 0 {
            op.result = Some(Ok(()));
            continue;
        }
        progress[i].fixed = regions
            .iter()
            .position(|r| ptr >= r.start && ptr + len <= r.start + r.len)
            .and_then(|i| u16::try_from(i).ok());
        if progress[i].fixed.is_some() {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
        queue.push(i);
    }
    Set {
        progress,
        queue,
        next: 0,
    }
}

/// Pushes as many of `set`'s queued operations as the submission queue takes; `tag` (0 or 1)
/// goes into the top bit of the user data. Returns false when the queue is full.
fn fill(flight: &mut InFlight<'_>, ops: &mut [MemberOp<'_>], set: &mut Set, tag: u64) -> bool {
    while set.next < set.queue.len() {
        let i = set.queue[set.next];
        let Some(fd) = ops[i].member.direct_fd().map(|f| f.as_raw_fd()) else {
            ops[i].result = Some(Err(MemberError::Vanished {
                member: ops[i].member.name().to_string(),
            }));
            set.next += 1;
            continue;
        };
        let entry = UringExecutor::entry(&mut ops[i], fd, (tag << 63) | i as u64, set.progress[i]);
        // SAFETY: the entry's buffer is a sub-slice of `ops[i].buf` and its fd belongs to
        // `ops[i].member`; both are borrowed by the `execute*` call that owns `flight`, which
        // does not return until the entry's completion is reaped (`drive` loops while
        // `flight.count > 0`, `wait_for` never gives up, and on a panic `InFlight`'s drop waits
        // for it), so both outlive the operation.
        let pushed = unsafe { flight.ring.submission().push(&entry) };
        if pushed.is_err() {
            return false;
        }
        flight.count += 1;
        set.next += 1;
    }
    true
}

/// Records the completion `res` of operation `i`; a short transfer is queued again.
fn complete(ops: &mut [MemberOp<'_>], set: &mut Set, i: usize, res: i32) {
    let Some(op) = ops.get_mut(i) else { return };
    let len = op.buf.len();
    let at = op.offset + set.progress[i].done as u64;
    if res < 0 {
        let source = std::io::Error::from_raw_os_error(-res);
        op.result = Some(Err(MemberError::Io {
            member: op.member.name().to_string(),
            offset: at,
            source,
        }));
    } else if res == 0 {
        let source = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        op.result = Some(Err(MemberError::Io {
            member: op.member.name().to_string(),
            offset: at,
            source,
        }));
    } else {
        set.progress[i].done += res as usize;
        if set.progress[i].done >= len {
            op.result = Some(Ok(()));
        } else {
            // Short transfer: queue the rest again.
            set.queue.push(i);
        }
    }
}

/// Submits everything left in both sets and reaps until nothing is in flight.
fn drive<'a>(
    flight: &mut InFlight<'_>,
    first: (&mut [MemberOp<'a>], &mut Set),
    mut second: Option<(&mut [MemberOp<'a>], &mut Set)>,
) {
    let (ops0, set0) = first;
    loop {
        if fill(flight, ops0, set0, 0) {
            if let Some((ops1, set1)) = second.as_mut() {
                fill(flight, ops1, set1, 1);
            }
        }
        let left = !set0.done() || second.as_ref().is_some_and(|(_, s)| !s.done());
        if flight.count == 0 {
            if left {
                continue;
            }
            return;
        }
        wait_for(flight.ring, 1);
        let cqes: Vec<(u64, i32)> = flight
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        // Reaped: no longer in flight, whatever happens while handling them.
        flight.count -= cqes.len();
        for (user, res) in cqes {
            let i = (user & !(1 << 63)) as usize;
            if user >> 63 == 0 {
                complete(ops0, set0, i, res);
            } else if let Some((ops1, set1)) = second.as_mut() {
                complete(ops1, set1, i, res);
            }
        }
    }
}

impl Executor for UringExecutor {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        let UringExecutor {
            ring,
            regions,
            fixed_ops,
            plain_ops,
            ..
        } = self;
        let mut counts = (*fixed_ops, *plain_ops);
        let mut set = prepare(regions, &mut counts, ops);
        (*fixed_ops, *plain_ops) = counts;
        let mut flight = InFlight { ring, count: 0 };
        drive(&mut flight, (ops, &mut set), None);
    }

    fn execute_then<'a>(
        &mut self,
        first: &mut [MemberOp<'a>],
        then: &mut dyn FnMut() -> Vec<MemberOp<'a>>,
    ) -> Vec<MemberOp<'a>> {
        let UringExecutor {
            ring,
            regions,
            fixed_ops,
            plain_ops,
            ..
        } = self;
        let mut counts = (*fixed_ops, *plain_ops);
        let mut set0 = prepare(regions, &mut counts, first);
        let mut flight = InFlight { ring, count: 0 };
        // Start the first batch, then do the caller's work while it is in flight.
        fill(&mut flight, first, &mut set0, 0);
        if flight.count > 0 {
            // Submit without waiting; `drive` below waits. A failed submit leaves the
            // entries queued for `drive`'s `submit_and_wait`.
            let _ = flight.ring.submit();
        }
        let mut more = then();
        let mut set1 = prepare(regions, &mut counts, &mut more);
        (*fixed_ops, *plain_ops) = counts;
        drive(
            &mut flight,
            (first, &mut set0),
            Some((&mut more, &mut set1)),
        );
        more
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::AlignedBuf;
    use crate::MemberIdx;

    /// A scratch file in the build directory (ext4 here, unlike a tmpfs /tmp), removed on drop.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A zeroed `bytes`-long file member and an 8-entry ring, or `None` (with the reason
    /// printed) where O_DIRECT or io_uring is unavailable.
    fn scratch_member(name: &str, bytes: usize) -> Option<(Scratch, FileMember, UringExecutor)> {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build");
        let dir = if dir.is_dir() {
            dir
        } else {
            std::env::temp_dir()
        };
        let file = Scratch(dir.join(format!("raidline-uring-{name}-{}", std::process::id())));
        std::fs::write(&file.0, vec![0u8; bytes]).unwrap();
        let Ok(m) = FileMember::open(&file.0, 4096) else {
            eprintln!("skip: O_DIRECT unsupported in {}", dir.display());
            return None;
        };
        let Ok(ex) = UringExecutor::new(8) else {
            eprintln!("skip: io_uring unavailable");
            return None;
        };
        Some((file, m, ex))
    }

    #[test]
    fn batches_larger_than_the_ring_complete() {
        let Some((_file, m, mut ex)) = scratch_member("ring", 64 * 4096) else {
            return;
        };
        let mut out = AlignedBuf::new(64 * 4096, 4096);
        for (i, b) in out.chunks_mut(4096).enumerate() {
            b.fill(i as u8 + 1);
        }
        // 64 writes through an 8-entry ring, then 64 reads.
        let mut ops: Vec<MemberOp<'_>> = out
            .chunks(4096)
            .enumerate()
            .map(|(i, b)| MemberOp::write(MemberIdx(0), &m, i as u64 * 4096, b))
            .collect();
        ex.execute(&mut ops);
        assert!(ops.iter().all(|o| matches!(o.result, Some(Ok(())))));
        drop(ops);
        let mut back = AlignedBuf::new(64 * 4096, 4096);
        let mut ops: Vec<MemberOp<'_>> = back
            .chunks_mut(4096)
            .enumerate()
            .map(|(i, b)| MemberOp::read(MemberIdx(0), &m, i as u64 * 4096, b))
            .collect();
        ex.execute(&mut ops);
        assert!(ops.iter().all(|o| matches!(o.result, Some(Ok(())))));
        drop(ops);
        assert!(back[..] == out[..]);
        assert_eq!(ex.op_counts(), (0, 128));
    }

    #[test]
    fn execute_then_runs_both_batches_and_drains_on_panic() {
        let Some((_file, m, mut ex)) = scratch_member("then", 64 * 4096) else {
            return;
        };
        let mut a = AlignedBuf::new(32 * 4096, 4096);
        let mut b = AlignedBuf::new(32 * 4096, 4096);
        a.fill(1);
        let mut first: Vec<MemberOp<'_>> = a
            .chunks(4096)
            .enumerate()
            .map(|(i, c)| MemberOp::write(MemberIdx(0), &m, i as u64 * 4096, c))
            .collect();
        let mut slot = Some(&mut b);
        let m_ref = &m;
        let mut then = || {
            let Some(b) = slot.take() else {
                return Vec::new();
            };
            b.fill(2); // CPU work while `first` is in flight
            let b: &AlignedBuf = b;
            b.chunks(4096)
                .enumerate()
                .map(|(i, c)| MemberOp::write(MemberIdx(0), m_ref, (32 + i as u64) * 4096, c))
                .collect()
        };
        let more = ex.execute_then(&mut first, &mut then);
        assert_eq!(more.len(), 32);
        assert!(first
            .iter()
            .chain(&more)
            .all(|o| matches!(o.result, Some(Ok(())))));
        drop((first, more));
        let mut back = AlignedBuf::new(64 * 4096, 4096);
        m.read_at(0, &mut back).unwrap();
        assert!(back[..32 * 4096].iter().all(|&x| x == 1));
        assert!(back[32 * 4096..].iter().all(|&x| x == 2));
        // A panic in `then` while `first` is in flight: the executor waits for `first`
        // before the unwinding frees its buffers, and stays usable.
        let c = AlignedBuf::new(8 * 4096, 4096);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ops: Vec<MemberOp<'_>> = c
                .chunks(4096)
                .enumerate()
                .map(|(i, x)| MemberOp::write(MemberIdx(0), &m, i as u64 * 4096, x))
                .collect();
            let mut boom = || -> Vec<MemberOp<'_>> { panic!("work failed") };
            ex.execute_then(&mut ops, &mut boom)
        }));
        assert!(r.is_err());
        let mut ops = [MemberOp::read(MemberIdx(0), &m, 0, &mut back[..4096])];
        ex.execute(&mut ops);
        assert!(matches!(ops[0].result, Some(Ok(()))));
    }

    #[test]
    fn misaligned_and_out_of_range_ops_fail_without_reaching_the_kernel() {
        let Some((_file, m, mut ex)) = scratch_member("unit", 65536) else {
            return;
        };
        let mut buf = AlignedBuf::new(8192, 4096);
        let mut ops = [MemberOp::read(MemberIdx(0), &m, 100, &mut buf[..4096])];
        ex.execute(&mut ops);
        assert!(matches!(
            ops[0].result,
            Some(Err(MemberError::Misaligned { .. }))
        ));
        let mut ops = [MemberOp::read(MemberIdx(0), &m, 65536, &mut buf[..4096])];
        ex.execute(&mut ops);
        assert!(matches!(
            ops[0].result,
            Some(Err(MemberError::OutOfRange { .. }))
        ));
    }
}
