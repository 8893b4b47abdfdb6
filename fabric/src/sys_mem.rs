//! Registrable memory: the contract a memory region's backing store must meet, an mmap-backed
//! implementation (hugepages when available) for buffer pools, and the only code that touches
//! such memory through raw pointers.
//!
//! Invariants:
//! - A [`RegionMemory`] stays allocated at a fixed address for as long as the value lives.
//!   Regions hold an `Arc` to it, so registered memory cannot be freed while registered.
//! - Such memory is DMA memory: a device (or the in-memory fabric, from another thread) may
//!   write it whenever a posted work request covers it. Every access made here is therefore a
//!   relaxed atomic byte access, which is sound under concurrent access (torn *contents* are
//!   possible if the caller reads bytes a posted request covers, as with real hardware, but
//!   never undefined behaviour). Code that wants plain slices over pool memory (io_uring,
//!   parity) takes [`RegionMemory::base`] into its own `unsafe` under the rule that no posted
//!   work request covers those bytes.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{FabricError, OsErrno};

/// Memory that can back a registered region.
///
/// # Safety
/// Implementors guarantee that `base()..base() + len()` is readable and writable memory that
/// stays allocated, at the same address, until the value is dropped, and that `len() > 0`.
pub unsafe trait RegionMemory: Send + Sync {
    /// First byte.
    fn base(&self) -> NonNull<u8>;
    /// Bytes.
    fn len(&self) -> usize;
    /// Whether it is empty (never, by the trait's contract).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Page-aligned anonymous memory (2 MiB hugepages when asked for and available), unmapped on
/// drop. The target's buffer pool and the tests' buffers.
pub struct DmaMemory {
    base: NonNull<u8>,
    len: usize,
    huge: bool,
}

// SAFETY: DmaMemory is a plain owned mapping; every access to its bytes goes through atomic
// byte operations or through the caller's own unsafe, so sharing it between threads is sound.
unsafe impl Send for DmaMemory {}
// SAFETY: as for Send: &DmaMemory only allows atomic byte access to the mapping.
unsafe impl Sync for DmaMemory {}

const HUGE_PAGE: usize = 2 << 20;

impl DmaMemory {
    /// Maps `len` bytes (rounded up to a page), trying hugepages first when `try_huge` and
    /// `len` is a multiple of 2 MiB. Zero-filled.
    pub fn new(len: usize, try_huge: bool) -> Result<Self, FabricError> {
        if len == 0 {
            return Err(FabricError::InvalidArgument("zero-length memory".into()));
        }
        if try_huge && len % HUGE_PAGE == 0 {
            if let Some(base) = map(len, libc::MAP_HUGETLB) {
                return Ok(Self {
                    base,
                    len,
                    huge: true,
                });
            }
        }
        let page = 4096usize;
        let rounded = len.div_ceil(page) * page;
        match map(rounded, 0) {
            Some(base) => Ok(Self {
                base,
                len: rounded,
                huge: false,
            }),
            None => Err(FabricError::Os {
                call: "mmap",
                source_errno: OsErrno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)),
            }),
        }
    }

    /// Whether hugepages back it.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// Copies `dst.len()` bytes at `offset` out of the memory.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), FabricError> {
        read_bytes(self, offset, dst)
    }

    /// Copies `src` into the memory at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), FabricError> {
        write_bytes(self, offset, src)
    }

    /// Sets `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), FabricError> {
        check(self, offset, len)?;
        for i in 0..len {
            store(self, offset + i, byte);
        }
        Ok(())
    }
}

fn map(len: usize, extra_flags: libc::c_int) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping with a null hint touches no existing memory; the
    // result is checked against MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(p.cast::<u8>())
}

impl Drop for DmaMemory {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; no region can still be registered
        // over it because regions hold an Arc to this value, so it is dropped last.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: base/len describe the live mapping owned by self, unmapped only in Drop.
unsafe impl RegionMemory for DmaMemory {
    fn base(&self) -> NonNull<u8> {
        self.base
    }
    fn len(&self) -> usize {
        self.len
    }
}

fn check(mem: &dyn RegionMemory, offset: usize, len: usize) -> Result<(), FabricError> {
    match offset.checked_add(len) {
        Some(end) if end <= mem.len() => Ok(()),
        _ => Err(FabricError::OutOfBounds {
            offset: offset as u64,
            len: len as u64,
            region_len: mem.len() as u64,
        }),
    }
}

fn load(mem: &dyn RegionMemory, i: usize) -> u8 {
    // SAFETY: callers checked i < mem.len(); RegionMemory guarantees the byte is allocated for
    // as long as `mem` is borrowed, and u8 and AtomicU8 have the same layout; every access to
    // this memory made by this crate is atomic, so concurrent writers are not a data race.
    unsafe { AtomicU8::from_ptr(mem.base().as_ptr().add(i)).load(Ordering::Relaxed) }
}

fn store(mem: &dyn RegionMemory, i: usize, v: u8) {
    // SAFETY: as in `load`: i < mem.len() is checked by callers, the byte stays allocated while
    // `mem` is borrowed, and the access is atomic.
    unsafe { AtomicU8::from_ptr(mem.base().as_ptr().add(i)).store(v, Ordering::Relaxed) }
}

/// Copies bytes out of any region memory (bounds-checked).
pub fn read_bytes(
    mem: &dyn RegionMemory,
    offset: usize,
    dst: &mut [u8],
) -> Result<(), FabricError> {
    check(mem, offset, dst.len())?;
    for (i, d) in dst.iter_mut().enumerate() {
        *d = load(mem, offset + i);
    }
    Ok(())
}

/// Copies bytes into any region memory (bounds-checked).
pub fn write_bytes(mem: &dyn RegionMemory, offset: usize, src: &[u8]) -> Result<(), FabricError> {
    check(mem, offset, src.len())?;
    for (i, s) in src.iter().enumerate() {
        store(mem, offset + i, *s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_memory_round_trips_and_checks_bounds() {
        let m = DmaMemory::new(10_000, false).unwrap();
        assert_eq!(m.len(), 12_288);
        assert_eq!(m.base().as_ptr() as usize % 4096, 0);
        m.write(4090, b"hello world").unwrap();
        let mut b = [0u8; 11];
        m.read(4090, &mut b).unwrap();
        assert_eq!(&b, b"hello world");
        assert!(matches!(
            m.read(12_280, &mut b),
            Err(FabricError::OutOfBounds { .. })
        ));
        assert!(m.write(usize::MAX, b"x").is_err());
        assert!(DmaMemory::new(0, false).is_err());
    }

    #[test]
    fn huge_request_falls_back_when_no_hugepages() {
        let m = DmaMemory::new(HUGE_PAGE, true).unwrap();
        assert_eq!(m.len(), HUGE_PAGE);
        m.fill(HUGE_PAGE - 1, 1, 0xAB).unwrap();
        let mut b = [0u8; 1];
        m.read(HUGE_PAGE - 1, &mut b).unwrap();
        assert_eq!(b[0], 0xAB);
    }
}
