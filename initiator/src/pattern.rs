//! Seeded data patterns for `verify`, and the small PRNG `perf` picks offsets with.
//!
//! A block's content is a function of (seed, LBA) only: its first 16 bytes are the LBA and the
//! seed in little endian (so a misplaced block is recognisable in a hex dump), the rest a
//! SplitMix64 stream seeded from both. Any block can be generated or checked alone, so a read
//! back names exactly the LBAs that differ.

/// SplitMix64: tiny, fast, good enough to spread offsets and fill blocks (not cryptographic).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }
    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A value in `0..n` (`n` > 0), by multiply-shift (unbiased enough for offsets).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Fills `block` with the pattern of `lba` under `seed`.
pub fn fill_block(seed: u64, lba: u64, block: &mut [u8]) {
    let mut rng = SplitMix64::new(seed ^ lba.wrapping_mul(0xD6E8_FEB8_6659_FD93));
    let mut chunks = block.chunks_mut(8);
    let head = [lba, seed];
    for (i, c) in chunks.by_ref().enumerate() {
        let v = if i < 2 { head[i] } else { rng.next_u64() };
        let b = v.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
        if i == 1 {
            break;
        }
    }
    for c in chunks {
        let b = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// Fills `buf` (whole blocks of `block_size`) with the patterns of the blocks from `slba` on.
pub fn fill(seed: u64, slba: u64, block_size: usize, buf: &mut [u8]) {
    for (i, b) in buf.chunks_mut(block_size).enumerate() {
        fill_block(seed, slba + i as u64, b);
    }
}

/// The LBAs among the blocks of `buf` (from `slba` on) whose content is not their pattern.
pub fn mismatches(seed: u64, slba: u64, block_size: usize, buf: &[u8]) -> Vec<u64> {
    let mut want = vec![0u8; block_size];
    let mut bad = Vec::new();
    for (i, b) in buf.chunks(block_size).enumerate() {
        let lba = slba + i as u64;
        fill_block(seed, lba, &mut want[..b.len()]);
        if b != &want[..b.len()] {
            bad.push(lba);
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_depend_on_seed_and_lba_and_mismatches_are_named() {
        let mut a = vec![0u8; 4 * 512];
        fill(7, 100, 512, &mut a);
        assert_eq!(&a[0..8], &100u64.to_le_bytes());
        assert_eq!(&a[8..16], &7u64.to_le_bytes());
        assert_eq!(&a[512..520], &101u64.to_le_bytes());
        assert_ne!(a[16..512], a[512 + 16..1024], "blocks differ");
        assert!(mismatches(7, 100, 512, &a).is_empty());
        assert_eq!(mismatches(8, 100, 512, &a), vec![100, 101, 102, 103]);
        a[3 * 512 + 300] ^= 1;
        a[512] ^= 0x80;
        assert_eq!(mismatches(7, 100, 512, &a), vec![101, 103]);
        let mut one = vec![0u8; 512];
        fill_block(7, 102, &mut one);
        assert_eq!(&one[..], &a[1024..1536]);
    }

    #[test]
    fn below_stays_in_range_and_spreads() {
        let mut r = SplitMix64::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }
}
