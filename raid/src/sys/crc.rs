//! CRC-32C (Castagnoli): SSE4.2 `crc32` instruction when the CPU has it, a table otherwise.
//! Both give identical results (tested). Invariant for the `unsafe` block: the SSE4.2 path
//! runs only after `is_x86_feature_detected!("sse4.2")` returned true.
#![allow(unsafe_code)]

/// CRC-32C of `data` (reflected, init and final XOR `0xFFFF_FFFF`).
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 support was just checked.
            return unsafe { hw(data) };
        }
    }
    table(data)
}

/// Table-driven CRC-32C (portable reference).
pub fn table(data: &[u8]) -> u32 {
    const POLY: u32 = 0x82F6_3B78;
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn hw(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(!0u32);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(b));
    }
    let mut c = crc as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_and_table_agree() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(table(b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [0, 1, 7, 8, 9, 4096, 9999] {
            assert_eq!(crc32c(&data[..len]), table(&data[..len]), "len {len}");
        }
    }
}
