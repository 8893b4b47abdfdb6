//! A poller's payload buffer pool: arenas registered once with the RDMA device (and with each
//! storage worker's io_uring), cut into fixed-size buffers in two size classes.
//!
//! Payload moves wire → pool buffer → drive and back with no copy: an RDMA READ lands in a
//! buffer, the same buffer goes to the array, and reads come back the other way.
//!
//! Invariants: a buffer is in exactly one place at a time — the free list, a request, a posted
//! work request's context, or a storage request — because [`IoBuf`] is moved, never cloned;
//! SGEs are built only for buffers the caller owns (and then moves into the work request's
//! context), so the device never writes bytes a Rust reference is reading.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use raidline_fabric::{Access, Fabric, FabricError, MemoryRegion, RegionMemory, Sge};
use raidline_raid::{BufferArena, IoBuf};

use super::queue::Slot;

/// Buffer alignment: the drives' logical block size for `O_DIRECT`.
const ALIGN: usize = 4096;

struct Class<F: Fabric> {
    size: usize,
    free: Vec<IoBuf>,
    total: usize,
    arena: Arc<BufferArena>,
    mr: F::Mr,
}

/// Registered payload buffers.
pub(crate) struct Pool<F: Fabric> {
    classes: Vec<Class<F>>,
}

/// Where an [`IoBuf`] sits in registered memory.
fn sge_of<F: Fabric>(mr: &F::Mr, buf: &IoBuf, at: usize, len: usize) -> Result<Sge, FabricError> {
    let at = at.min(buf.len());
    let len = u32::try_from(len.min(buf.len() - at)).unwrap_or(u32::MAX);
    mr.sge((buf.offset() + at) as u64, len)
}

impl<F: Fabric> Pool<F> {
    /// `small` buffers of `small_size` bytes and `large` of `large_size`, registered in `pd`
    /// with local write access only (the host never reaches them directly: the target moves
    /// data with RDMA READ/WRITE of its own).
    pub(crate) fn new(
        fabric: &F,
        pd: &F::Pd,
        small: (usize, usize),
        large: (usize, usize),
    ) -> Result<Pool<F>, FabricError> {
        let mut classes = Vec::new();
        for (count, size) in [small, large] {
            if count == 0 {
                continue;
            }
            let bufs = BufferArena::with_buffers(count, size, ALIGN).ok_or_else(|| {
                FabricError::InvalidArgument(format!("cannot allocate {count} × {size} bytes"))
            })?;
            let arena = bufs[0].arena().clone();
            let memory: Arc<dyn RegionMemory> = arena.clone();
            let mr = fabric.register(pd, memory, Access::LOCAL_WRITE)?;
            classes.push(Class {
                size,
                total: bufs.len(),
                free: bufs,
                arena,
                mr,
            });
        }
        classes.sort_by_key(|c| c.size);
        Ok(Pool { classes })
    }

    /// The arenas (for io_uring fixed-buffer registration).
    pub(crate) fn arenas(&self) -> Vec<Arc<BufferArena>> {
        self.classes.iter().map(|c| c.arena.clone()).collect()
    }

    /// The largest buffer.
    pub(crate) fn max_len(&self) -> usize {
        self.classes.last().map_or(0, |c| c.size)
    }

    /// A free buffer of at least `len` bytes (the smallest class that fits), or `None` when
    /// that class is exhausted (the caller waits for one to come back).
    pub(crate) fn get(&mut self, len: usize) -> Option<IoBuf> {
        self.classes
            .iter_mut()
            .find(|c| c.size >= len)
            .and_then(|c| c.free.pop())
    }

    /// The class `buf` was cut from.
    fn class_of(&mut self, buf: &IoBuf) -> Option<&mut Class<F>> {
        let arena = Arc::as_ptr(buf.arena());
        self.classes
            .iter_mut()
            .find(|c| Arc::as_ptr(&c.arena) == arena)
    }

    /// Gives a buffer back.
    pub(crate) fn put(&mut self, buf: IoBuf) {
        if let Some(c) = self.class_of(&buf) {
            c.free.push(buf);
        }
    }

    /// An SGE over the first `len` bytes of `buf` (a buffer of this pool).
    pub(crate) fn sge(&mut self, buf: &IoBuf, len: usize) -> Result<Sge, FabricError> {
        self.sge_at(buf, 0, len)
    }

    /// The scatter/gather entry of `len` bytes of a pool buffer from byte `at` on.
    pub(crate) fn sge_at(
        &mut self,
        buf: &IoBuf,
        at: usize,
        len: usize,
    ) -> Result<Sge, FabricError> {
        match self.class_of(buf) {
            Some(c) => sge_of::<F>(&c.mr, buf, at, len),
            None => Err(FabricError::InvalidArgument(
                "buffer is not from this pool".into(),
            )),
        }
    }

    /// Buffers currently lent out (for metrics and the drain at shutdown).
    pub(crate) fn in_use(&self) -> usize {
        self.classes.iter().map(|c| c.total - c.free.len()).sum()
    }
}

/// A queue's receive buffers: per slot one 64-byte command buffer and, on I/O queues, one
/// in-capsule data buffer, in two registered arenas. An iSER connection's slots have a
/// header buffer of the iSER header and BHS instead ([`RecvBuffers::with_head`]), so the data
/// segment (immediate data) lands at the start of the aligned data buffer.
pub(crate) struct RecvBuffers<F: Fabric> {
    /// Bytes the first SGE takes (the command, or the iSER header and BHS).
    head: usize,
    cmd_mr: F::Mr,
    icd_mr: Option<F::Mr>,
    /// Registered bytes, counted in `account` while these buffers live.
    bytes: u64,
    account: Arc<AtomicU64>,
}

impl<F: Fabric> Drop for RecvBuffers<F> {
    fn drop(&mut self) {
        self.account.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl<F: Fabric> RecvBuffers<F> {
    /// Allocates and registers `depth` slots with `icd` bytes of in-capsule data each (0: none),
    /// for one queue pair or (`shared`) a shared receive queue; their registered bytes are
    /// added to `account` while they live.
    pub(crate) fn new(
        fabric: &F,
        pd: &F::Pd,
        depth: usize,
        icd: usize,
        shared: bool,
        account: &Arc<AtomicU64>,
    ) -> Result<(RecvBuffers<F>, Vec<Slot>), FabricError> {
        Self::with_head(fabric, pd, depth, 64, icd, shared, account)
    }

    /// [`Self::new`] with a first SGE of `head` bytes (at most 128).
    pub(crate) fn with_head(
        fabric: &F,
        pd: &F::Pd,
        depth: usize,
        head: usize,
        icd: usize,
        shared: bool,
        account: &Arc<AtomicU64>,
    ) -> Result<(RecvBuffers<F>, Vec<Slot>), FabricError> {
        let oom = || FabricError::InvalidArgument(format!("cannot allocate {depth} receive slots"));
        let cmds =
            BufferArena::with_buffers(depth, head.next_power_of_two(), 64).ok_or_else(oom)?;
        let cmd_mem: Arc<dyn RegionMemory> = cmds[0].arena().clone();
        let cmd_mr = fabric.register(pd, cmd_mem, Access::LOCAL_WRITE)?;
        let (icd_mr, icds): (Option<F::Mr>, Vec<Option<IoBuf>>) = if icd > 0 {
            let bufs = BufferArena::with_buffers(depth, icd, ALIGN).ok_or_else(oom)?;
            let mem: Arc<dyn RegionMemory> = bufs[0].arena().clone();
            (
                Some(fabric.register(pd, mem, Access::LOCAL_WRITE)?),
                bufs.into_iter().map(Some).collect(),
            )
        } else {
            (None, (0..depth).map(|_| None).collect())
        };
        let bytes = (depth * (head + icd)) as u64;
        account.fetch_add(bytes, Ordering::Relaxed);
        Ok((
            RecvBuffers {
                head,
                cmd_mr,
                icd_mr,
                bytes,
                account: account.clone(),
            },
            cmds.into_iter()
                .zip(icds)
                .map(|(cmd, icd)| Slot { cmd, icd, shared })
                .collect(),
        ))
    }

    /// The SGEs of a receive: the command, then the in-capsule data buffer if any (on the
    /// stack: every command's receive is reposted through here).
    pub(crate) fn sges(&self, cmd: &IoBuf, icd: Option<&IoBuf>) -> Result<RecvSges, FabricError> {
        let first = sge_of::<F>(&self.cmd_mr, cmd, 0, self.head)?;
        Ok(match (&self.icd_mr, icd) {
            (Some(mr), Some(b)) => RecvSges {
                sges: [first, sge_of::<F>(mr, b, 0, b.len())?],
                n: 2,
            },
            _ => RecvSges {
                sges: [first; 2],
                n: 1,
            },
        })
    }
}

/// A receive's one or two SGEs ([`RecvBuffers::sges`]).
pub(crate) struct RecvSges {
    sges: [Sge; 2],
    n: usize,
}

impl std::ops::Deref for RecvSges {
    type Target = [Sge];

    fn deref(&self) -> &[Sge] {
        &self.sges[..self.n]
    }
}
