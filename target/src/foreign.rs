//! Foreign data on a device about to become a member of a new array: the on-disk signatures
//! of partition tables, filesystems, volume managers, encryption and other RAID layers (what
//! `blkid -p` and mdadm look for before they write), so that creating an array never
//! overwrites them without the operator's word.
//!
//! [`signatures`] is pure: it looks at a device's first and last bytes ([`HEAD`] and
//! [`TAIL`], where every format below keeps its magic) and names what it finds. [`scan`]
//! reads those bytes from a member.

use raidline_raid::{AlignedBuf, Member, MemberError};

/// Bytes read from the start of a device: Btrfs's superblock (64 KiB + 64), the swap magic
/// for pages up to 64 KiB, and ZFS's first two labels (each 256 KiB, uberblocks from 128 KiB).
pub const HEAD: u64 = 512 * 1024;
/// Bytes read from the end: md 0.90 and 1.0 superblocks, ZFS's last two labels.
pub const TAIL: u64 = 1024 * 1024;

/// One signature found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// What it is, in words ("an ext2/3/4 filesystem").
    pub what: &'static str,
    /// Byte offset of its magic on the device.
    pub offset: u64,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (magic at byte {})", self.what, self.offset)
    }
}

const MD_MAGIC: u32 = 0xa92b_4efc;
const ZFS_UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
const BCACHE_MAGIC: [u8; 16] = [
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];
const KIB: u64 = 1024;

/// The device's bytes at hand: `head` from offset 0, `tail` from `tail_at`.
struct Bytes<'a> {
    head: &'a [u8],
    tail: &'a [u8],
    tail_at: u64,
}

impl Bytes<'_> {
    /// `len` bytes at `offset`, when read.
    fn at(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end <= self.head.len() as u64 {
            return self.head.get(offset as usize..end as usize);
        }
        let rel = offset.checked_sub(self.tail_at)?;
        self.tail.get(rel as usize..rel as usize + len)
    }

    fn is(&self, offset: u64, magic: &[u8]) -> bool {
        self.at(offset, magic.len()) == Some(magic)
    }

    fn u16_le(&self, offset: u64) -> Option<u16> {
        let b = self.at(offset, 2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32_le(&self, offset: u64) -> Option<u32> {
        let b = self.at(offset, 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u32_be(&self, offset: u64) -> Option<u32> {
        self.u32_le(offset).map(u32::swap_bytes)
    }

    fn u64_either(&self, offset: u64, want: u64) -> bool {
        self.at(offset, 8).is_some_and(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a) == want || u64::from_be_bytes(a) == want
        })
    }
}

/// Every known signature in a device of `size` bytes whose first bytes are `head` and whose
/// bytes from `tail_at` on are `tail` (see [`HEAD`], [`TAIL`]); empty when none.
pub fn signatures(head: &[u8], tail: &[u8], tail_at: u64, size: u64) -> Vec<Found> {
    let b = Bytes {
        head,
        tail,
        tail_at,
    };
    let mut found = Vec::new();
    let mut hit = |what: &'static str, offset: u64| found.push(Found { what, offset });
    // Partition tables. A GPT disk also carries a protective MBR: both are named.
    for at in [512, 4096] {
        if b.is(at, b"EFI PART") {
            hit("a GPT partition table", at);
            break;
        }
    }
    if b.is(510, &[0x55, 0xAA]) {
        hit("a DOS/MBR partition table or boot sector", 510);
    }
    // Filesystems.
    if b.u16_le(1024 + 56) == Some(0xEF53) {
        // s_magic; a revision level of 0 or 1 and a sane block size rule out most noise.
        let rev = b.u32_le(1024 + 76).unwrap_or(u32::MAX);
        let log_bs = b.u32_le(1024 + 24).unwrap_or(u32::MAX);
        if rev <= 1 && log_bs <= 6 {
            hit("an ext2/3/4 filesystem", 1024 + 56);
        }
    }
    if b.is(0, b"XFSB") {
        hit("an XFS filesystem", 0);
    }
    if b.is(64 * KIB + 64, b"_BHRfS_M") {
        hit("a Btrfs filesystem", 64 * KIB + 64);
    }
    if b.is(3, b"NTFS    ") {
        hit("an NTFS filesystem", 3);
    }
    for page in [4 * KIB, 8 * KIB, 16 * KIB, 64 * KIB] {
        let at = page - 10;
        if b.is(at, b"SWAPSPACE2") || b.is(at, b"SWAP-SPACE") {
            hit("Linux swap space", at);
            break;
        }
    }
    // Volume managers, caches, encryption.
    for at in [0, 512, 1024, 1536] {
        if b.is(at, b"LABELONE") && b.is(at + 24, b"LVM2 001") {
            hit("an LVM2 physical volume", at);
            break;
        }
    }
    if b.is(4096 + 24, &BCACHE_MAGIC) {
        hit("a bcache device", 4096 + 24);
    }
    if b.is(0, b"LUKS\xba\xbe") {
        hit("a LUKS encrypted volume", 0);
    }
    // md RAID: 1.1 at the start, 1.2 at 4 KiB, 1.0 8 KiB from the end (4 KiB aligned), 0.90
    // in the last 64 KiB-aligned 64 KiB (in the writer's byte order).
    if b.u32_le(0) == Some(MD_MAGIC) {
        hit("an md RAID member (superblock 1.1)", 0);
    }
    if b.u32_le(4096) == Some(MD_MAGIC) {
        hit("an md RAID member (superblock 1.2)", 4096);
    }
    if size >= 12 * KIB {
        let at = (size - 8 * KIB) & !(4 * KIB - 1);
        if b.u32_le(at) == Some(MD_MAGIC) {
            hit("an md RAID member (superblock 1.0)", at);
        }
    }
    if size >= 128 * KIB {
        let at = (size & !(64 * KIB - 1)) - 64 * KIB;
        if b.u32_le(at) == Some(MD_MAGIC) || b.u32_be(at) == Some(MD_MAGIC) {
            hit("an md RAID member (superblock 0.90)", at);
        }
    }
    // ZFS: four 256 KiB labels, two at the start and two at the (256 KiB aligned) end, each
    // with a ring of 1 KiB uberblocks in its second half.
    let label = 256 * KIB;
    let mut labels = vec![0, label];
    if size >= 4 * label {
        let end = size & !(label - 1);
        labels.extend([end - 2 * label, end - label]);
    }
    'zfs: for l in labels {
        for k in 0..128 {
            let at = l + 128 * KIB + k * KIB;
            if b.u64_either(at, ZFS_UBERBLOCK_MAGIC) {
                hit("a ZFS pool member", at);
                break 'zfs;
            }
        }
    }
    found
}

/// Writes that make a blank device look like one format: (offset, bytes).
pub type Sample = Vec<(u64, Vec<u8>)>;

/// For each format [`signatures`] knows, what it reports and the bytes that make a blank
/// device of `size` bytes (at least 1 MiB, a multiple of 64 KiB) carry it: the tests' vectors
/// (Raidline itself never writes them).
pub fn samples(size: u64) -> Vec<(&'static str, Sample)> {
    let md = MD_MAGIC.to_le_bytes().to_vec();
    let zfs = ZFS_UBERBLOCK_MAGIC.to_le_bytes().to_vec();
    let v = |b: &[u8]| b.to_vec();
    vec![
        (
            "a GPT partition table",
            vec![(512, v(b"EFI PART")), (510, v(&[0x55, 0xAA]))],
        ),
        (
            "a DOS/MBR partition table or boot sector",
            vec![(510, v(&[0x55, 0xAA]))],
        ),
        (
            "an ext2/3/4 filesystem",
            vec![(1080, v(&[0x53, 0xEF])), (1100, v(&[1, 0, 0, 0]))],
        ),
        ("an XFS filesystem", vec![(0, v(b"XFSB"))]),
        ("a Btrfs filesystem", vec![(65600, v(b"_BHRfS_M"))]),
        ("an NTFS filesystem", vec![(3, v(b"NTFS    "))]),
        ("Linux swap space", vec![(4086, v(b"SWAPSPACE2"))]),
        (
            "an LVM2 physical volume",
            vec![(512, v(b"LABELONE")), (536, v(b"LVM2 001"))],
        ),
        ("a bcache device", vec![(4120, v(&BCACHE_MAGIC))]),
        ("a LUKS encrypted volume", vec![(0, v(b"LUKS\xba\xbe"))]),
        ("an md RAID member (superblock 1.1)", vec![(0, md.clone())]),
        (
            "an md RAID member (superblock 1.2)",
            vec![(4096, md.clone())],
        ),
        (
            "an md RAID member (superblock 1.0)",
            vec![(size - 8192, md.clone())],
        ),
        (
            "an md RAID member (superblock 0.90)",
            vec![(size - 65536, MD_MAGIC.to_be_bytes().to_vec())],
        ),
        (
            "a ZFS pool member",
            vec![(128 * KIB + 5 * KIB, zfs.clone())],
        ),
        (
            "a ZFS pool member",
            vec![(size - 256 * KIB + 128 * KIB, zfs)],
        ),
    ]
}

/// Reads `m`'s first [`HEAD`] and last [`TAIL`] bytes and names every signature in them.
pub fn scan(m: &dyn Member) -> Result<Vec<Found>, MemberError> {
    let size = m.size_bytes();
    let align = m.alignment().max(4096) as u64;
    let head_len = HEAD.min(size) & !(align - 1);
    let mut head = AlignedBuf::new(head_len as usize, align as usize);
    if head_len > 0 {
        m.read_at(0, &mut head)?;
    }
    let tail_at = size.saturating_sub(TAIL).div_ceil(align) * align;
    let tail_len = (size - tail_at.min(size)) & !(align - 1);
    let mut tail = AlignedBuf::new(tail_len as usize, align as usize);
    if tail_len > 0 {
        m.read_at(tail_at, &mut tail)?;
    }
    Ok(signatures(&head, &tail, tail_at, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 8 << 20;

    /// A blank device of [`SIZE`] bytes with `magic` written at `offset`: what it finds.
    fn find_with(writes: &[(u64, &[u8])]) -> Vec<&'static str> {
        let mut dev = vec![0u8; SIZE as usize];
        for (off, magic) in writes {
            let o = *off as usize;
            dev[o..o + magic.len()].copy_from_slice(magic);
        }
        let tail_at = SIZE - TAIL;
        signatures(
            &dev[..HEAD as usize],
            &dev[tail_at as usize..],
            tail_at,
            SIZE,
        )
        .into_iter()
        .map(|f| f.what)
        .collect()
    }

    #[test]
    fn a_blank_device_has_no_signature() {
        assert!(find_with(&[]).is_empty());
    }

    #[test]
    fn each_known_signature_is_found_where_its_format_keeps_it() {
        for (what, writes) in samples(SIZE) {
            let w: Vec<(u64, &[u8])> = writes.iter().map(|(o, b)| (*o, &b[..])).collect();
            let found = find_with(&w);
            assert!(found.contains(&what), "{what}: found {found:?}");
        }
    }

    #[test]
    fn a_stray_ext_magic_without_a_plausible_superblock_is_not_a_filesystem() {
        // s_rev_level 7: not an ext superblock (1 in 65536 random blocks has the magic).
        assert!(find_with(&[(1080, &[0x53, 0xEF]), (1100, &[7, 0, 0, 0])]).is_empty());
    }

    #[test]
    fn a_small_device_is_scanned_without_reading_past_its_end() {
        let dev = vec![0u8; 64 * 1024];
        assert!(signatures(&dev, &dev, 0, dev.len() as u64).is_empty());
        let mut x = dev.clone();
        x[..4].copy_from_slice(b"XFSB");
        assert_eq!(signatures(&x, &x, 0, x.len() as u64).len(), 1);
    }
}
