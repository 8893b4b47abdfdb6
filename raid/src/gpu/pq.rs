//! RAID-6 P+Q on the CPU: the reference the GPU's `pq_gen_batch` is tested against, and
//! its fallback for memory outside registered arenas.
//!
//! Arithmetic in GF(2^8) with the polynomial x^8+x^4+x^3+x^2+1 (0x11D) and generator 2, as
//! Linux md's RAID-6 and ISA-L: `P = D_0 ^ ... ^ D_{n-1}`, `Q = g^0·D_0 ^ g^1·D_1 ^ ... ^
//! g^{n-1}·D_{n-1}`, evaluated by Horner's rule from the last source down
//! (`Q = (((D_{n-1})·g ^ D_{n-2})·g ^ ...)·g ^ D_0`), so only multiplication by 2 is needed.
//! The same rules as [`crate::parity::ParityEngine`] apply: at least one source, every
//! buffer as long as `p`.

use crate::error::ParityError;

/// One P+Q computation of a batch.
#[derive(Debug)]
pub struct PqJob<'a> {
    /// Data sources `D_0 .. D_{n-1}`, each as long as `p`.
    pub srcs: Vec<&'a [u8]>,
    /// P (XOR) destination.
    pub p: &'a mut [u8],
    /// Q destination, as long as `p`.
    pub q: &'a mut [u8],
}

/// Multiplication by the generator 2 in GF(2^8) mod 0x11D.
pub fn gf_mul2(x: u8) -> u8 {
    (x << 1) ^ if x & 0x80 != 0 { 0x1D } else { 0 }
}

/// `gf_mul2` on each byte of a word.
fn mul2_word(x: u64) -> u64 {
    ((x & 0x7F7F_7F7F_7F7F_7F7F) << 1) ^ (((x >> 7) & 0x0101_0101_0101_0101) * 0x1D)
}

/// Checks a P+Q job's buffers: a `q` of the wrong length is reported as source index
/// `srcs.len()`.
pub(crate) fn check_pq(srcs: &[&[u8]], p: &[u8], q: &[u8]) -> Result<(), ParityError> {
    crate::parity::check(srcs, p)?;
    if q.len() != p.len() {
        return Err(ParityError::LengthMismatch {
            index: srcs.len(),
            len: q.len(),
            expected: p.len(),
        });
    }
    Ok(())
}

/// Computes P and Q of `srcs` on the CPU (64-bit words, then a byte tail).
pub fn pq_gen_cpu(srcs: &[&[u8]], p: &mut [u8], q: &mut [u8]) -> Result<(), ParityError> {
    check_pq(srcs, p, q)?;
    let n = srcs.len();
    let len = p.len();
    let words = len / 8 * 8;
    let word = |s: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&s[i..i + 8]);
        u64::from_ne_bytes(b)
    };
    for i in (0..words).step_by(8) {
        let mut pw = word(srcs[n - 1], i);
        let mut qw = pw;
        for s in srcs[..n - 1].iter().rev() {
            let d = word(s, i);
            pw ^= d;
            qw = mul2_word(qw) ^ d;
        }
        p[i..i + 8].copy_from_slice(&pw.to_ne_bytes());
        q[i..i + 8].copy_from_slice(&qw.to_ne_bytes());
    }
    for i in words..len {
        let mut pb = srcs[n - 1][i];
        let mut qb = pb;
        for s in srcs[..n - 1].iter().rev() {
            pb ^= s[i];
            qb = gf_mul2(qb) ^ s[i];
        }
        p[i] = pb;
        q[i] = qb;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Full GF(2^8) multiplication mod 0x11D, bit by bit (independent of `gf_mul2`'s trick).
    fn gf_mul(mut a: u8, mut b: u8) -> u8 {
        let mut r = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                r ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= 0x1D;
            }
            b >>= 1;
        }
        r
    }

    fn gf_pow2(i: usize) -> u8 {
        (0..i).fold(1u8, |acc, _| gf_mul(acc, 2))
    }

    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn generator_has_order_255() {
        assert_eq!(gf_pow2(255), 1);
        assert!((1..255).all(|i| gf_pow2(i) != 1));
        assert_eq!(gf_mul2(0x80), 0x1D);
        assert!((0..=255u8).all(|x| gf_mul2(x) == gf_mul(x, 2)));
        let w = u64::from_ne_bytes([0x80, 0x01, 0xFF, 0x00, 0x40, 0xC3, 0x7F, 0x8E]);
        let expect: Vec<u8> = w.to_ne_bytes().iter().map(|&b| gf_mul2(b)).collect();
        assert_eq!(mul2_word(w).to_ne_bytes().to_vec(), expect);
    }

    #[test]
    fn pq_matches_the_definition() {
        for n in 1..=12usize {
            for len in [0usize, 1, 7, 8, 9, 64, 1000, 4099] {
                let srcs: Vec<Vec<u8>> =
                    (0..n).map(|k| pattern((k * 7 + len) as u64, len)).collect();
                let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
                let mut p = vec![0xAA; len];
                let mut q = vec![0x55; len];
                pq_gen_cpu(&refs, &mut p, &mut q).unwrap();
                for j in 0..len {
                    let pe = srcs.iter().fold(0u8, |a, s| a ^ s[j]);
                    let qe = srcs
                        .iter()
                        .enumerate()
                        .fold(0u8, |a, (i, s)| a ^ gf_mul(gf_pow2(i), s[j]));
                    assert_eq!((p[j], q[j]), (pe, qe), "n={n} len={len} byte {j}");
                }
            }
        }
    }

    #[test]
    fn pq_known_values_and_errors() {
        // Q = 1·D0 ^ 2·D1: D0 = 0x01, D1 = 0x80 → 0x01 ^ 0x1D.
        let (mut p, mut q) = ([0u8; 1], [0u8; 1]);
        pq_gen_cpu(&[&[0x01], &[0x80]], &mut p, &mut q).unwrap();
        assert_eq!((p[0], q[0]), (0x81, 0x1C));
        assert_eq!(pq_gen_cpu(&[], &mut p, &mut q), Err(ParityError::NoSources));
        let mut short = [0u8; 0];
        assert_eq!(
            pq_gen_cpu(&[&[1]], &mut p, &mut short),
            Err(ParityError::LengthMismatch {
                index: 1,
                len: 0,
                expected: 1
            })
        );
    }
}
