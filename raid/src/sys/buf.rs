//! Registered-memory arena: one aligned allocation cut into fixed-size [`IoBuf`]s that can be
//! registered with an io_uring as fixed buffers without any `unsafe` at the call site.
//!
//! Invariants the `unsafe` code relies on:
//! - the allocation is made once with a known `Layout` and freed only when the last
//!   `Arc<BufferArena>` drops; every [`IoBuf`] and every executor that registered the arena
//!   holds such an `Arc`, so memory registered with a ring outlives the registration;
//! - [`BufferArena::with_buffers`] is the only way to obtain `IoBuf`s and hands out
//!   disjoint, in-bounds ranges exactly once, so no two `IoBuf`s alias and `&mut` access
//!   through one never overlaps another;
//! - the arena itself never reads or writes the memory after zeroing it at allocation.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

/// An aligned, zeroed allocation shared by the [`IoBuf`]s cut from it.
#[derive(Debug)]
pub struct BufferArena {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the arena is only an owner of raw memory; all access goes through `IoBuf`s, which
// are disjoint, so sharing the owner between threads creates no data race.
unsafe impl Send for BufferArena {}
// SAFETY: as above; `&BufferArena` exposes only the address range, never the bytes.
unsafe impl Sync for BufferArena {}

impl BufferArena {
    /// Allocates `count` buffers of `size` bytes, each aligned to `align` (a power of two,
    /// at least 4096 is typical for O_DIRECT). `None` if the sizes overflow or allocation fails.
    pub fn with_buffers(count: usize, size: usize, align: usize) -> Option<Vec<IoBuf>> {
        let align = align.max(1).next_power_of_two();
        let stride = size.checked_next_multiple_of(align)?;
        let total = stride.checked_mul(count)?.max(align);
        let layout = Layout::from_size_align(total, align).ok()?;
        // SAFETY: `layout` has non-zero size (`max(align)` above).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        let arena = Arc::new(BufferArena { ptr, layout });
        Some(
            (0..count)
                .map(|i| IoBuf {
                    arena: arena.clone(),
                    off: i * stride,
                    len: size,
                })
                .collect(),
        )
    }

    /// An arena with no buffers (one page, never handed out).
    pub fn empty() -> Arc<BufferArena> {
        let layout = Layout::from_size_align(4096, 4096).unwrap_or(Layout::new::<u8>());
        // SAFETY: `layout` has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        match NonNull::new(raw) {
            Some(ptr) => Arc::new(BufferArena { ptr, layout }),
            None => std::alloc::handle_alloc_error(layout),
        }
    }

    /// Start address and length (for registration with a ring or an RDMA device).
    pub fn region(&self) -> (usize, usize) {
        (self.ptr.as_ptr() as usize, self.layout.size())
    }
}

// SAFETY: `ptr..ptr+layout.size()` is one live allocation owned by this value and freed only
// in `Drop`, so it stays readable, writable and at the same address while the value lives
// (a registered region holds an `Arc` to it); `layout.size() > 0` by construction. While a
// work request covers an `IoBuf`'s bytes, the request context owns that `IoBuf` (the target's
// rule), so no Rust reference reads or writes bytes the device may be writing.
unsafe impl raidline_fabric::RegionMemory for BufferArena {
    fn base(&self) -> NonNull<u8> {
        self.ptr
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for BufferArena {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed(self.layout)` and is freed exactly once, here,
        // when the last owner (every IoBuf and registering executor holds one) is gone.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One buffer of a [`BufferArena`]; dereferences to its bytes.
#[derive(Debug)]
pub struct IoBuf {
    arena: Arc<BufferArena>,
    off: usize,
    len: usize,
}

impl IoBuf {
    /// The arena it was cut from (register it once with each executor).
    pub fn arena(&self) -> &Arc<BufferArena> {
        &self.arena
    }

    /// Byte offset of the buffer inside its arena (for building RDMA SGEs from the arena's
    /// registered region).
    pub fn offset(&self) -> usize {
        self.off
    }
}

impl std::ops::Deref for IoBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `[off, off+len)` lies inside the live allocation (checked at carving), and
        // no other IoBuf covers it; shared access is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.arena.ptr.as_ptr().add(self.off), self.len) }
    }
}

impl std::ops::DerefMut for IoBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access to the range.
        unsafe { std::slice::from_raw_parts_mut(self.arena.ptr.as_ptr().add(self.off), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_disjoint_aligned_and_writable() {
        let mut bufs = BufferArena::with_buffers(4, 5000, 4096).unwrap();
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.len(), 5000);
            assert_eq!(b.as_ptr() as usize % 4096, 0);
            b.fill(i as u8);
        }
        for (i, b) in bufs.iter().enumerate() {
            assert!(b.iter().all(|&x| x == i as u8));
        }
        let (start, len) = bufs[0].arena().region();
        assert!(bufs
            .iter()
            .all(|b| b.as_ptr() as usize >= start && b.as_ptr() as usize + 5000 <= start + len));
        assert!(BufferArena::with_buffers(usize::MAX, 2, 4096).is_none());
    }
}
