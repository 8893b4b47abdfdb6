//! Layout tests against a transcription of md's `raid5_compute_sector` (level 5,
//! `ALGORITHM_LEFT_SYMMETRIC`), in 512-byte sectors as md computes it.

use super::*;

/// md's arithmetic, kept in md's own terms (sectors, `sector_div`, `pd_idx`, `dd_idx`).
/// Returns (member, sector on member, parity member).
fn md_compute_sector(r_sector: u64, raid_disks: u64, sectors_per_chunk: u64) -> (u64, u64, u64) {
    let data_disks = raid_disks - 1;
    let chunk_offset = r_sector % sectors_per_chunk;
    let chunk_number = r_sector / sectors_per_chunk;
    let mut dd_idx = chunk_number % data_disks;
    let stripe = chunk_number / data_disks;
    let stripe2 = stripe;
    // case ALGORITHM_LEFT_SYMMETRIC:
    let pd_idx = data_disks - stripe2 % raid_disks;
    dd_idx = (pd_idx + 1 + dd_idx) % raid_disks;
    let new_sector = stripe * sectors_per_chunk + chunk_offset;
    (dd_idx, new_sector, pd_idx)
}

fn geo(n: usize, chunk: u32, block: u32, stripes: u64) -> Geometry {
    Geometry::new(
        n,
        ChunkSize::new(chunk).unwrap(),
        BlockSize::new(block).unwrap(),
        stripes * u64::from(chunk),
    )
    .unwrap()
}

#[test]
fn matches_md_exhaustively_for_small_arrays() {
    for n in 3..=10usize {
        for &chunk in &[4096u32, 8192, 65536] {
            for &block in &[512u32, 4096] {
                let stripes = 2 * n as u64 + 3;
                let g = geo(n, chunk, block, stripes);
                let spb = u64::from(block / 512);
                let spc = u64::from(chunk / 512);
                for b in 0..g.capacity_blocks() {
                    let loc = g.locate(ArrayBlock(b)).unwrap();
                    let (disk, sector, pd) = md_compute_sector(b * spb, n as u64, spc);
                    assert_eq!(loc.member.0 as u64, disk, "n={n} chunk={chunk} b={b}");
                    assert_eq!(
                        loc.member_block.0 * spb,
                        sector,
                        "n={n} chunk={chunk} b={b}"
                    );
                    assert_eq!(g.parity_member(loc.stripe).0 as u64, pd);
                    assert_eq!(
                        g.logical_block(loc.stripe, loc.data_index, loc.offset_in_chunk),
                        ArrayBlock(b)
                    );
                    assert_eq!(
                        g.data_index_of(loc.stripe, loc.member),
                        Some(loc.data_index)
                    );
                }
                assert!(g.locate(ArrayBlock(g.capacity_blocks())).is_none());
            }
        }
    }
}

#[test]
fn four_disk_picture_from_md_docs() {
    // Rows are stripes, columns members; numbers are data chunk numbers, P parity.
    let picture: [[Option<u64>; 4]; 4] = [
        [Some(0), Some(1), Some(2), None],
        [Some(4), Some(5), None, Some(3)],
        [Some(8), None, Some(6), Some(7)],
        [None, Some(9), Some(10), Some(11)],
    ];
    let g = geo(4, 4096, 4096, 4);
    for (s, row) in picture.iter().enumerate() {
        for (m, cell) in row.iter().enumerate() {
            let stripe = StripeIdx(s as u64);
            match cell {
                None => assert_eq!(g.parity_member(stripe), MemberIdx(m)),
                Some(chunk) => {
                    let loc = g.locate(ArrayBlock(*chunk)).unwrap();
                    assert_eq!((loc.stripe, loc.member), (stripe, MemberIdx(m)));
                }
            }
        }
    }
}

#[test]
fn every_member_chunk_is_used_exactly_once_per_stripe() {
    let g = geo(5, 4096, 4096, 20);
    for s in 0..g.stripes() {
        let stripe = StripeIdx(s);
        let mut seen = [false; 5];
        seen[g.parity_member(stripe).0] = true;
        for d in 0..g.data_members() {
            let m = g.data_member(stripe, d).0;
            assert!(!seen[m]);
            seen[m] = true;
        }
        assert!(seen.iter().all(|&x| x));
        assert_eq!(g.data_index_of(stripe, g.parity_member(stripe)), None);
    }
}

#[test]
fn segments_cover_the_range_in_chunk_runs() {
    let g = geo(4, 8192, 512, 6);
    for start in 0..g.capacity_blocks() {
        for len in [1, 3, 16, 17, 40, 100] {
            if start + len > g.capacity_blocks() {
                assert!(g.segments(ArrayBlock(start), len).is_err());
                continue;
            }
            let mut covered = 0;
            for seg in g.segments(ArrayBlock(start), len).unwrap() {
                assert_eq!(seg.request_offset, covered);
                assert!(seg.at.offset_in_chunk + seg.blocks <= g.chunk_blocks());
                assert_eq!(seg.at, g.locate(ArrayBlock(start + covered)).unwrap());
                covered += seg.blocks;
            }
            assert_eq!(covered, len);
        }
    }
    assert!(g.segments(ArrayBlock(0), 0).is_err());
    assert!(g.segments(ArrayBlock(u64::MAX), 2).is_err());
}

#[test]
fn capacity_uses_smallest_member_rounded_to_chunks() {
    let g = Geometry::new(3, ChunkSize::DEFAULT, BlockSize::B4096, 1_000_000).unwrap();
    assert_eq!(g.stripes(), 1_000_000 / 65536);
    assert_eq!(g.capacity_bytes(), 2 * 15 * 65536);
}

#[test]
fn rejects_bad_parameters() {
    assert!(ChunkSize::new(2048).is_err());
    assert!(ChunkSize::new(12288).is_err());
    assert!(ChunkSize::new(32 << 20).is_err());
    assert!(BlockSize::new(1024).is_err());
    let c = ChunkSize::DEFAULT;
    let b = BlockSize::B4096;
    assert!(matches!(
        Geometry::new(2, c, b, 1 << 20),
        Err(GeometryError::TooFewMembers(2))
    ));
    assert!(Geometry::new(3, c, b, 1000).is_err());
    assert!(Geometry::new(crate::MAX_MEMBERS + 1, c, b, 1 << 20).is_err());
    assert!(matches!(
        Geometry::new(64, c, b, u64::MAX),
        Err(GeometryError::TooLarge(_))
    ));
}
