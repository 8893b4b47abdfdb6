//! ISA-L (Debian `libisal`) declarations for the parity benchmark's reference column.
//! Linked only with the `isal` cargo feature (see `build.rs`).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

extern "C" {
    /// `int xor_gen(int vects, int len, void **array)`: `array[vects-1]` = XOR of the
    /// first `vects - 1` buffers. ISA-L wants `len` a multiple of 32 and `vects >= 3`.
    fn xor_gen(vects: c_int, len: c_int, array: *mut *mut c_void) -> c_int;
}

/// Error from ISA-L's `xor_gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsalError(pub i32);

/// Calls ISA-L's `xor_gen`: `dst = XOR(srcs)`.
/// Needs at least two sources, equal lengths, and a length that is a multiple of 32 and
/// fits in `c_int`; anything else is refused before calling C.
pub fn isal_xor_gen(srcs: &[&[u8]], dst: &mut [u8]) -> Result<(), IsalError> {
    let len = dst.len();
    if srcs.len() < 2 || !len.is_multiple_of(32) || srcs.iter().any(|s| s.len() != len) {
        return Err(IsalError(-1));
    }
    let len_c = c_int::try_from(len).map_err(|_| IsalError(-1))?;
    let vects = c_int::try_from(srcs.len() + 1).map_err(|_| IsalError(-1))?;
    let mut ptrs: Vec<*mut c_void> = srcs.iter().map(|s| s.as_ptr() as *mut c_void).collect();
    ptrs.push(dst.as_mut_ptr().cast());
    // SAFETY: `ptrs` holds `vects` pointers, each to `len` bytes that live for this call
    // (borrowed slices); ISA-L only reads the first `vects - 1` and writes the last, which is
    // `dst`, borrowed mutably, so the write aliases nothing.
    let rc = unsafe { xor_gen(vects, len_c, ptrs.as_mut_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(IsalError(rc))
    }
}
