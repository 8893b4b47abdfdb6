//! Little-endian field access over byte slices whose length the caller has already checked.
//!
//! Every structure checks its buffer length once in `parse`/`emit`; the helpers here then index
//! with constant ranges that lie inside that length, so they cannot go out of bounds. They are
//! still written with `get`/`copy_from_slice` on exact ranges, never unchecked indexing.

use core::ops::Range;

/// A byte range inside a structure.
pub(crate) type Field = Range<usize>;

pub(crate) fn u8_at(b: &[u8], at: usize) -> u8 {
    b[at]
}

pub(crate) fn le16(b: &[u8], f: Field) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[f]);
    u16::from_le_bytes(a)
}

pub(crate) fn le32(b: &[u8], f: Field) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_le_bytes(a)
}

pub(crate) fn le64(b: &[u8], f: Field) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_le_bytes(a)
}

/// A little-endian integer of 3 bytes (e.g. the keyed SGL length).
pub(crate) fn le24(b: &[u8], f: Field) -> u32 {
    let s = &b[f];
    u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16
}

pub(crate) fn le128(b: &[u8], f: Field) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[f]);
    u128::from_le_bytes(a)
}

pub(crate) fn put_le16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_le32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_le64(b: &mut [u8], f: Field, v: u64) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_le24(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_le_bytes()[..3]);
}

pub(crate) fn put_le128(b: &mut [u8], f: Field, v: u128) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

/// Whether every byte of `f` is zero (reserved fields a parser insists on).
pub(crate) fn is_zero(b: &[u8], f: Field) -> bool {
    b[f].iter().all(|&x| x == 0)
}
