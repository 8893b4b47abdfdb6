//! Members: the [`Member`] trait (one block device or file under the array), the in-memory
//! member for tests, the seeded fault-injecting wrapper, and [`AlignedBuf`].
//!
//! Contract every implementation keeps:
//! - `read_at`/`write_at` transfer exactly `buf.len()` bytes at byte `offset` or fail; an
//!   access past `size_bytes()` is [`MemberError::OutOfRange`], never a short transfer;
//! - a successful `write_at` followed by `flush` is durable;
//! - members never keep the caller's buffer after returning (zero-copy: the array hands the
//!   caller's pool buffers straight to members).
//!
//! Members are synchronous. Batching and overlap across members is the job of an
//! [`crate::io::Executor`]: the io_uring executor uses [`Member::direct_fd`] to put many
//! members' operations into one submission; members without a descriptor (in-memory,
//! fault-injecting) run through `read_at`/`write_at`.

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::MemberError;

/// One member device of an array.
pub trait Member: Send + Sync + fmt::Debug {
    /// Human-readable name (path or label) used in errors.
    fn name(&self) -> &str;

    /// Size in bytes.
    fn size_bytes(&self) -> u64;

    /// Reads `buf.len()` bytes at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError>;

    /// Writes `buf` at `offset`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError>;

    /// Makes completed writes durable.
    fn flush(&self) -> Result<(), MemberError>;

    /// An O_DIRECT file descriptor an io_uring executor may use instead of
    /// `read_at`/`write_at`, or `None` (the default) when operations must go through them.
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Alignment (bytes) that buffers, offsets and lengths need; 1 when any will do.
    fn alignment(&self) -> usize {
        1
    }

    /// Whether reads and writes on [`Member::direct_fd`] can complete by polling (a block
    /// device with poll queues: NVMe with `nvme.poll_queues` > 0), so that a ring may reap them
    /// without an interrupt (`IORING_SETUP_IOPOLL`). False (the default) when unknown.
    fn polled_io(&self) -> bool {
        false
    }

    /// Whether completed writes can sit in a volatile cache until `flush` (true unless the
    /// member knows better). Ordering-critical writes (the partial-parity log) are flushed
    /// only on members where this is true, as md does.
    fn volatile_write_cache(&self) -> bool {
        true
    }
}

pub(crate) fn check_range(m: &dyn Member, offset: u64, len: usize) -> Result<(), MemberError> {
    let end = offset.checked_add(len as u64);
    if end.is_none_or(|e| e > m.size_bytes()) {
        return Err(MemberError::OutOfRange {
            member: m.name().to_string(),
            offset,
            len,
            size: m.size_bytes(),
        });
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a panic elsewhere; the data (bytes, counters) stays usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Heap buffer whose start is aligned (for O_DIRECT), built from safe code only: it
/// over-allocates and exposes the aligned window.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> Self {
        let align = align.max(1).next_power_of_two();
        let raw = vec![0u8; len + align];
        let start = raw.as_ptr().align_offset(align).min(align);
        AlignedBuf { raw, start, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// In-memory member. Clones share the same bytes, so a test can "reboot" an array by
/// assembling it again from clones of the members it had.
///
/// Two modes:
/// - write-through ([`MemMember::new`]): a completed write is on the media at once;
///   `volatile_write_cache()` is false;
/// - volatile write cache ([`MemMember::with_volatile_cache`]): a completed write is held in
///   a cache (reads see it) and reaches the media only at [`Member::flush`];
///   [`MemMember::power_cut`] drops what the cache still holds, as a drive without power-loss
///   protection does. `volatile_write_cache()` is true.
#[derive(Clone)]
pub struct MemMember {
    name: Arc<str>,
    state: Arc<Mutex<MemState>>,
}

#[derive(Debug)]
struct MemState {
    /// What reads return: the media with every cached write applied.
    view: Vec<u8>,
    /// Volatile-cache mode only.
    cache: Option<WriteCache>,
}

/// A volatile write cache: the media and the writes not yet flushed.
#[derive(Debug)]
struct WriteCache {
    media: Vec<u8>,
    /// (offset, bytes), oldest first.
    pending: Vec<(usize, Vec<u8>)>,
}

impl MemMember {
    /// A zero-filled write-through member of `size` bytes.
    pub fn new(name: &str, size: usize) -> Self {
        MemMember {
            name: name.into(),
            state: Arc::new(Mutex::new(MemState {
                view: vec![0; size],
                cache: None,
            })),
        }
    }

    /// A zero-filled member of `size` bytes with a volatile write cache: writes reach the
    /// media only when flushed; [`MemMember::power_cut`] loses the rest.
    pub fn with_volatile_cache(name: &str, size: usize) -> Self {
        MemMember {
            name: name.into(),
            state: Arc::new(Mutex::new(MemState {
                view: vec![0; size],
                cache: Some(WriteCache {
                    media: vec![0; size],
                    pending: Vec::new(),
                }),
            })),
        }
    }

    /// A copy of the member's bytes as reads see them (cached writes included).
    pub fn snapshot(&self) -> Vec<u8> {
        lock(&self.state).view.clone()
    }

    /// Overwrites bytes directly, on the media and in the cache, bypassing everything
    /// (tests use it to corrupt media).
    pub fn poke(&self, offset: usize, data: &[u8]) {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let end = (offset + data.len()).min(st.view.len());
        if offset < end {
            let d = &data[..end - offset];
            st.view[offset..end].copy_from_slice(d);
            if let Some(c) = &mut st.cache {
                c.media[offset..end].copy_from_slice(d);
                for (o, w) in c.pending.iter_mut() {
                    // Keep the cached writes consistent with the poked bytes.
                    let (a, b) = ((*o).max(offset), (*o + w.len()).min(end));
                    if a < b {
                        w[a - *o..b - *o].copy_from_slice(&d[a - offset..b - offset]);
                    }
                }
            }
        }
    }

    /// Writes completed but not yet flushed (0 for a write-through member).
    pub fn cached_writes(&self) -> usize {
        lock(&self.state)
            .cache
            .as_ref()
            .map_or(0, |c| c.pending.len())
    }

    /// Power loss: the cache's unflushed writes are lost — all of them when `keep_seed` is
    /// `None`; with a seed, each one independently reaches the media or not (a cache writes
    /// back in any order), chosen by a seeded generator. Reads then return the media. No
    /// effect on a write-through member.
    pub fn power_cut(&self, keep_seed: Option<u64>) {
        let mut st = lock(&self.state);
        let st = &mut *st;
        let Some(c) = &mut st.cache else {
            return;
        };
        if let Some(seed) = keep_seed {
            let mut x = seed | 1;
            for (o, w) in &c.pending {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x & 1 == 1 {
                    c.media[*o..*o + w.len()].copy_from_slice(w);
                }
            }
        }
        c.pending.clear();
        st.view.copy_from_slice(&c.media);
    }
}

impl fmt::Debug for MemMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemMember({})", self.name)
    }
}

impl Member for MemMember {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        lock(&self.state).view.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        check_range(self, offset, buf.len())?;
        let st = lock(&self.state);
        let o = offset as usize;
        buf.copy_from_slice(&st.view[o..o + buf.len()]);
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        check_range(self, offset, buf.len())?;
        let mut st = lock(&self.state);
        let o = offset as usize;
        st.view[o..o + buf.len()].copy_from_slice(buf);
        if let Some(c) = &mut st.cache {
            c.pending.push((o, buf.to_vec()));
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), MemberError> {
        let mut st = lock(&self.state);
        let st = &mut *st;
        if let Some(c) = &mut st.cache {
            for (o, w) in c.pending.drain(..) {
                c.media[o..o + w.len()].copy_from_slice(&w);
            }
        }
        Ok(())
    }

    fn volatile_write_cache(&self) -> bool {
        lock(&self.state).cache.is_some()
    }
}

/// Which operations a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Reads only.
    Read,
    /// Writes (and flushes) only.
    Write,
    /// Both.
    Any,
}

impl OpKind {
    fn matches(self, is_write: bool) -> bool {
        match self {
            OpKind::Read => !is_write,
            OpKind::Write => is_write,
            OpKind::Any => true,
        }
    }
}

/// A fault a [`FaultyMember`] injects.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// EIO for operations of `kind` overlapping bytes `[start, end)`.
    ErrorRange {
        /// Which operations fail.
        kind: OpKind,
        /// First failing byte.
        start: u64,
        /// One past the last failing byte.
        end: u64,
    },
    /// Every operation after the first `ops` succeeds fails with EIO.
    FailAfter {
        /// Operations that still succeed.
        ops: u64,
    },
    /// Each operation fails with EIO with probability `per_million / 1e6` (seeded).
    Random {
        /// Failure probability in parts per million.
        per_million: u32,
    },
    /// Each operation first sleeps this long (slow device).
    Slow(Duration),
    /// The device is gone: every operation fails with ENODEV.
    Vanished,
    /// Power loss: after `writes` more writes, writes are silently dropped (they report
    /// success but never reach the media). Used to crash an array at a chosen point.
    DropWritesAfter {
        /// Writes that still reach the media.
        writes: u64,
    },
    /// Power loss shared by several members: every write, on any member sharing the
    /// switch, spends one unit of its budget; once spent, writes are silently dropped.
    PowerLoss(PowerSwitch),
}

/// A write budget shared by members, modelling one power loss across a whole machine:
/// writes before the cut reach the media, writes after it do not.
#[derive(Debug, Clone)]
pub struct PowerSwitch(Arc<std::sync::atomic::AtomicI64>);

impl PowerSwitch {
    /// Power fails after `writes` more writes.
    pub fn after(writes: u64) -> Self {
        PowerSwitch(Arc::new(std::sync::atomic::AtomicI64::new(
            writes.min(i64::MAX as u64) as i64,
        )))
    }

    /// The power fails now: every later write is dropped.
    pub fn cut(&self) {
        self.0.store(-1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the power has failed.
    pub fn is_cut(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) < 0
    }

    /// Spends one write; `false` when it is past the cut.
    fn spend(&self) -> bool {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) > 0
    }
}

impl PartialEq for PowerSwitch {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[derive(Debug)]
struct FaultState {
    faults: Vec<Fault>,
    ops: u64,
    writes: u64,
    rng: u64,
    injected: u64,
}

/// Shared control of a [`FaultyMember`]'s faults; cloneable, usable while the array runs.
#[derive(Debug, Clone)]
pub struct FaultHandle(Arc<Mutex<FaultState>>);

impl FaultHandle {
    /// Adds a fault. Operation counters for `FailAfter`/`DropWritesAfter` start now.
    pub fn inject(&self, fault: Fault) {
        let mut s = lock(&self.0);
        s.ops = 0;
        s.writes = 0;
        s.faults.push(fault);
    }

    /// Removes every fault.
    pub fn clear(&self) {
        lock(&self.0).faults.clear();
    }

    /// How many operations have failed or been dropped by injection.
    pub fn injected(&self) -> u64 {
        lock(&self.0).injected
    }
}

/// Wraps any member and injects [`Fault`]s, deterministically for a given seed.
#[derive(Debug)]
pub struct FaultyMember {
    inner: Arc<dyn Member>,
    state: FaultHandle,
}

enum Verdict {
    Pass,
    Fail(MemberError),
    Drop,
}

impl FaultyMember {
    /// Wraps `inner`; `seed` drives [`Fault::Random`].
    pub fn new(inner: Arc<dyn Member>, seed: u64) -> Self {
        FaultyMember {
            inner,
            state: FaultHandle(Arc::new(Mutex::new(FaultState {
                faults: Vec::new(),
                ops: 0,
                writes: 0,
                rng: seed | 1,
                injected: 0,
            }))),
        }
    }

    /// Handle to change faults later.
    pub fn handle(&self) -> FaultHandle {
        self.state.clone()
    }

    fn judge(&self, offset: u64, len: usize, is_write: bool) -> Verdict {
        let mut sleep = None;
        let verdict = {
            let mut s = lock(&self.state.0);
            s.ops += 1;
            if is_write {
                s.writes += 1;
            }
            let (ops, writes) = (s.ops, s.writes);
            let end = offset.saturating_add(len as u64);
            let mut verdict = Verdict::Pass;
            for f in s.faults.clone() {
                let name = self.inner.name().to_string();
                let eio = || MemberError::Injected {
                    member: name.clone(),
                    offset,
                };
                match f {
                    Fault::ErrorRange {
                        kind,
                        start,
                        end: e,
                    } => {
                        if kind.matches(is_write) && offset < e && start < end {
                            verdict = Verdict::Fail(eio());
                        }
                    }
                    Fault::FailAfter { ops: n } => {
                        if ops > n {
                            verdict = Verdict::Fail(eio());
                        }
                    }
                    Fault::Random { per_million } => {
                        s.rng ^= s.rng << 13;
                        s.rng ^= s.rng >> 7;
                        s.rng ^= s.rng << 17;
                        if s.rng % 1_000_000 < u64::from(per_million) {
                            verdict = Verdict::Fail(eio());
                        }
                    }
                    Fault::Slow(d) => sleep = Some(d),
                    Fault::Vanished => {
                        verdict = Verdict::Fail(MemberError::Vanished {
                            member: name.clone(),
                        })
                    }
                    Fault::DropWritesAfter { writes: n } => {
                        if is_write && writes > n && matches!(verdict, Verdict::Pass) {
                            verdict = Verdict::Drop;
                        }
                    }
                    Fault::PowerLoss(switch) => {
                        // A write spends the budget; a flush (len 0) spends nothing but is
                        // dropped once the power is out.
                        let out = if len > 0 {
                            !switch.spend()
                        } else {
                            switch.is_cut()
                        };
                        if is_write && out && matches!(verdict, Verdict::Pass) {
                            verdict = Verdict::Drop;
                        }
                    }
                }
                if matches!(verdict, Verdict::Fail(_)) {
                    break;
                }
            }
            if !matches!(verdict, Verdict::Pass) {
                s.injected += 1;
            }
            verdict
        };
        if let Some(d) = sleep {
            std::thread::sleep(d);
        }
        verdict
    }
}

impl Member for FaultyMember {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        match self.judge(offset, buf.len(), false) {
            Verdict::Fail(e) => Err(e),
            _ => self.inner.read_at(offset, buf),
        }
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        match self.judge(offset, buf.len(), true) {
            Verdict::Fail(e) => Err(e),
            Verdict::Drop => check_range(self, offset, buf.len()),
            Verdict::Pass => self.inner.write_at(offset, buf),
        }
    }

    fn flush(&self) -> Result<(), MemberError> {
        match self.judge(0, 0, true) {
            Verdict::Fail(e) => Err(e),
            // Past a power loss a flush reports success but reaches nothing.
            Verdict::Drop => Ok(()),
            Verdict::Pass => self.inner.flush(),
        }
    }

    fn alignment(&self) -> usize {
        self.inner.alignment()
    }

    fn volatile_write_cache(&self) -> bool {
        self.inner.volatile_write_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_member_round_trip_and_bounds() {
        let m = MemMember::new("m0", 8192);
        m.write_at(100, b"hello").unwrap();
        let mut b = [0u8; 5];
        m.read_at(100, &mut b).unwrap();
        assert_eq!(&b, b"hello");
        assert!(matches!(
            m.write_at(8190, b"abc"),
            Err(MemberError::OutOfRange { .. })
        ));
        assert!(m.read_at(u64::MAX, &mut b).is_err());
        let f = FaultyMember::new(Arc::new(m.clone()), 1);
        f.handle().inject(Fault::ErrorRange {
            kind: OpKind::Any,
            start: 0,
            end: 10,
        });
        assert!(f.read_at(u64::MAX, &mut b).is_err(), "no overflow panic");
        let clone = m.clone();
        clone.write_at(0, b"x").unwrap();
        assert_eq!(m.snapshot()[0], b'x');
    }

    #[test]
    fn volatile_cache_holds_writes_until_flush() {
        let m = MemMember::with_volatile_cache("m", 8192);
        assert!(m.volatile_write_cache());
        assert!(!MemMember::new("w", 8192).volatile_write_cache());
        let mut b = [0u8; 4];
        m.write_at(0, b"aaaa").unwrap();
        m.flush().unwrap();
        m.write_at(0, b"bbbb").unwrap();
        m.write_at(100, b"cccc").unwrap();
        m.read_at(0, &mut b).unwrap();
        assert_eq!(&b, b"bbbb", "reads see cached writes");
        assert_eq!(m.cached_writes(), 2);
        m.clone().power_cut(None);
        m.read_at(0, &mut b).unwrap();
        assert_eq!(
            &b, b"aaaa",
            "the unflushed write is lost, the flushed one stays"
        );
        m.read_at(100, &mut b).unwrap();
        assert_eq!(b, [0; 4]);
        assert_eq!(m.cached_writes(), 0);
        // A seeded cut keeps some writes, the same ones for the same seed.
        let run = |seed| {
            let m = MemMember::with_volatile_cache("m", 4096);
            for i in 0..64u8 {
                m.write_at(u64::from(i) * 8, &[i + 1; 8]).unwrap();
            }
            m.power_cut(Some(seed));
            m.snapshot()
        };
        assert_eq!(run(5), run(5));
        let kept = run(5).chunks(8).take(64).filter(|c| c[0] != 0).count();
        assert!((10..54).contains(&kept), "about half kept: {kept}");
        // A flush after a power loss (through the fault wrapper) reaches nothing.
        let inner = MemMember::with_volatile_cache("m", 4096);
        let f = FaultyMember::new(Arc::new(inner.clone()), 1);
        let switch = PowerSwitch::after(1);
        f.handle().inject(Fault::PowerLoss(switch.clone()));
        f.write_at(0, b"dddd").unwrap();
        f.write_at(8, b"eeee").unwrap();
        assert!(switch.is_cut());
        f.flush().unwrap();
        assert_eq!(inner.cached_writes(), 1, "the flush was dropped");
        inner.power_cut(None);
        inner.read_at(0, &mut b).unwrap();
        assert_eq!(b, [0; 4]);
    }

    #[test]
    fn faults_inject_as_configured() {
        let inner: Arc<dyn Member> = Arc::new(MemMember::new("m", 1 << 16));
        let f = FaultyMember::new(inner.clone(), 7);
        let h = f.handle();
        let mut b = [0u8; 512];
        h.inject(Fault::ErrorRange {
            kind: OpKind::Read,
            start: 4096,
            end: 8192,
        });
        assert!(f.read_at(4000, &mut b).is_err(), "overlaps the range");
        assert!(f.read_at(8192, &mut b).is_ok());
        assert!(f.write_at(4096, &b).is_ok(), "writes not affected");
        h.clear();
        h.inject(Fault::FailAfter { ops: 2 });
        assert!(f.read_at(0, &mut b).is_ok());
        assert!(f.read_at(0, &mut b).is_ok());
        assert!(f.read_at(0, &mut b).is_err());
        h.clear();
        h.inject(Fault::Vanished);
        assert!(matches!(f.flush(), Err(MemberError::Vanished { .. })));
        h.clear();
        h.inject(Fault::DropWritesAfter { writes: 1 });
        f.write_at(0, &[1; 512]).unwrap();
        f.write_at(512, &[2; 512]).unwrap();
        inner.read_at(0, &mut b).unwrap();
        assert_eq!(b, [1; 512]);
        inner.read_at(512, &mut b).unwrap();
        assert_eq!(b, [0; 512], "second write was dropped");
        assert!(h.injected() >= 4);
    }

    #[test]
    fn random_faults_are_seeded() {
        let run = |seed| {
            let f = FaultyMember::new(Arc::new(MemMember::new("m", 4096)), seed);
            f.handle().inject(Fault::Random {
                per_million: 300_000,
            });
            let mut b = [0u8; 8];
            (0..200)
                .map(|_| f.read_at(0, &mut b).is_ok())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let fails = run(3).iter().filter(|ok| !**ok).count();
        assert!((20..120).contains(&fails), "about 30% fail: {fails}");
    }

    #[test]
    fn aligned_buf_is_aligned() {
        for len in [0, 1, 4096, 10000] {
            let b = AlignedBuf::new(len, 4096);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % 4096, 0);
        }
    }
}
