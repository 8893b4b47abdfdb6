//! Big-endian field access over byte slices whose length the caller has already checked.
//!
//! SCSI and iSCSI are big-endian on the wire. Every structure checks its buffer length once;
//! the helpers then index with ranges inside that length. They are written with
//! `copy_from_slice` on exact ranges, never unchecked indexing.

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_be_bytes(a)
}

/// A big-endian integer of 3 bytes (iSCSI's DataSegmentLength).
pub(crate) fn be24(b: &[u8], at: usize) -> u32 {
    u32::from(b[at]) << 16 | u32::from(b[at + 1]) << 8 | u32::from(b[at + 2])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

pub(crate) fn put_be16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_be24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

pub(crate) fn put_be32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_be64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
