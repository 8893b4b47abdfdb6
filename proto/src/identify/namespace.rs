//! Identify Namespace data structure for the NVM command set (CNS 00h; NVM Command Set 1.0
//! §4.1.5.1, Figure 97; Linux `struct nvme_id_ns`).
//!
//! All 64 LBA format descriptors are kept (NLBAF says how many are valid, 0-based); the vendor
//! area is kept raw. Reserved bytes are ignored and zeroed (see the parent module).

use super::{get, put, Opaque, IDENTIFY_DATA_LEN as LEN};
use crate::error::{exact, room, ParseError};

pub(crate) mod field {
    //! Byte ranges of Identify Namespace (NVM Figure 97).
    use crate::bytes::Field;
    pub const NSZE: Field = 0..8;
    pub const NCAP: Field = 8..16;
    pub const NUSE: Field = 16..24;
    pub const NSFEAT: Field = 24..25;
    pub const NLBAF: Field = 25..26;
    pub const FLBAS: Field = 26..27;
    pub const MC: Field = 27..28;
    pub const DPC: Field = 28..29;
    pub const DPS: Field = 29..30;
    pub const NMIC: Field = 30..31;
    pub const RESCAP: Field = 31..32;
    pub const FPI: Field = 32..33;
    pub const DLFEAT: Field = 33..34;
    pub const NAWUN: Field = 34..36;
    pub const NAWUPF: Field = 36..38;
    pub const NACWU: Field = 38..40;
    pub const NABSN: Field = 40..42;
    pub const NABO: Field = 42..44;
    pub const NABSPF: Field = 44..46;
    pub const NOIOB: Field = 46..48;
    pub const NVMCAP: Field = 48..64;
    pub const NPWG: Field = 64..66;
    pub const NPWA: Field = 66..68;
    pub const NPDG: Field = 68..70;
    pub const NPDA: Field = 70..72;
    pub const NOWS: Field = 72..74;
    pub const MSSRL: Field = 74..76;
    pub const MCL: Field = 76..80;
    pub const MSRC: Field = 80..81;
    pub const ANAGRPID: Field = 92..96;
    pub const NSATTR: Field = 99..100;
    pub const NVMSETID: Field = 100..102;
    pub const ENDGID: Field = 102..104;
    pub const NGUID: Field = 104..120;
    pub const EUI64: Field = 120..128;
    /// 64 LBA format descriptors of 4 bytes.
    pub const LBAF: Field = 128..384;
    pub const VS: Field = 384..4096;

    /// Every reserved range (ignored on parse, zeroed on emit); the layout tests use it to
    /// check that the named fields and these ranges cover all 4096 bytes.
    #[cfg(test)]
    pub const RESERVED: &[Field] = &[81..92, 96..99];
}

/// One LBA format (NVM Figure 98): metadata size, LBA data size, relative performance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LbaFormat {
    /// Metadata Size in bytes per LBA (bits 15:0).
    pub ms: u16,
    /// LBA Data Size as a power of two (bits 23:16): 9 = 512 B, 12 = 4 KiB; 0 = format unused.
    pub lbads: u8,
    /// Relative Performance (bits 25:24): 0 best … 3 degraded. Bits 31:26 are reserved.
    pub rp: u8,
}

impl LbaFormat {
    /// A format with `1 << lbads` byte blocks, no metadata, best performance.
    pub const fn new(lbads: u8) -> LbaFormat {
        LbaFormat {
            ms: 0,
            lbads,
            rp: 0,
        }
    }

    fn parse(b: &[u8]) -> LbaFormat {
        LbaFormat {
            ms: get(b, 0..2),
            lbads: b[2],
            rp: b[3] & 0x3,
        }
    }

    fn emit(&self, b: &mut [u8]) {
        put(b, 0..2, self.ms);
        b[2] = self.lbads;
        b[3] = self.rp & 0x3;
    }

    /// Block size in bytes, or `None` if LBADS is 0 (unused) or too large for a `u64`.
    pub fn block_size(&self) -> Option<u64> {
        if self.lbads == 0 {
            None
        } else {
            1u64.checked_shl(u32::from(self.lbads))
        }
    }
}

/// The Identify Namespace data structure (NVM command set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentifyNamespace {
    /// Namespace Size in logical blocks (bytes 7:0).
    pub nsze: u64,
    /// Namespace Capacity in logical blocks (bytes 15:8).
    pub ncap: u64,
    /// Namespace Utilization in logical blocks (bytes 23:16).
    pub nuse: u64,
    /// Namespace Features (byte 24): bit 0 thin provisioning, bit 1 NAWUN/NAWUPF/NACWU valid,
    /// bit 2 deallocated error, bit 3 NGUID/EUI64 never reused, bit 4 NPWG..NOWS valid.
    pub nsfeat: u8,
    /// Number of LBA Formats, 0-based (byte 25).
    pub nlbaf: u8,
    /// Formatted LBA Size (byte 26): bits 3:0 low format index, bit 4 extended metadata,
    /// bits 6:5 high format index.
    pub flbas: u8,
    /// Metadata Capabilities (byte 27).
    pub mc: u8,
    /// End-to-end Data Protection Capabilities (byte 28).
    pub dpc: u8,
    /// End-to-end Data Protection Type Settings (byte 29).
    pub dps: u8,
    /// Namespace Multi-path I/O and Namespace Sharing Capabilities (byte 30): bit 0 shared.
    pub nmic: u8,
    /// Reservation Capabilities (byte 31).
    pub rescap: u8,
    /// Format Progress Indicator (byte 32).
    pub fpi: u8,
    /// Deallocate Logical Block Features (byte 33).
    pub dlfeat: u8,
    /// Namespace Atomic Write Unit Normal, 0-based (bytes 35:34).
    pub nawun: u16,
    /// Namespace Atomic Write Unit Power Fail, 0-based (bytes 37:36).
    pub nawupf: u16,
    /// Namespace Atomic Compare & Write Unit, 0-based (bytes 39:38).
    pub nacwu: u16,
    /// Namespace Atomic Boundary Size Normal (bytes 41:40).
    pub nabsn: u16,
    /// Namespace Atomic Boundary Offset (bytes 43:42).
    pub nabo: u16,
    /// Namespace Atomic Boundary Size Power Fail (bytes 45:44).
    pub nabspf: u16,
    /// Namespace Optimal I/O Boundary in logical blocks (bytes 47:46).
    pub noiob: u16,
    /// NVM Capacity in bytes (bytes 63:48).
    pub nvmcap: u128,
    /// Namespace Preferred Write Granularity, 0-based blocks (bytes 65:64). For a RAID-5
    /// namespace: a full stripe, so writes avoid read-modify-write.
    pub npwg: u16,
    /// Namespace Preferred Write Alignment, 0-based blocks (bytes 67:66).
    pub npwa: u16,
    /// Namespace Preferred Deallocate Granularity, 0-based (bytes 69:68).
    pub npdg: u16,
    /// Namespace Preferred Deallocate Alignment, 0-based (bytes 71:70).
    pub npda: u16,
    /// Namespace Optimal Write Size, 0-based blocks (bytes 73:72).
    pub nows: u16,
    /// Maximum Single Source Range Length for Copy (bytes 75:74).
    pub mssrl: u16,
    /// Maximum Copy Length (bytes 79:76).
    pub mcl: u32,
    /// Maximum Source Range Count for Copy, 0-based (byte 80).
    pub msrc: u8,
    /// ANA Group Identifier (bytes 95:92); 0 when ANA is not reported.
    pub anagrpid: u32,
    /// Namespace Attributes (byte 99): bit 0 write protected.
    pub nsattr: u8,
    /// NVM Set Identifier (bytes 101:100).
    pub nvmsetid: u16,
    /// Endurance Group Identifier (bytes 103:102).
    pub endgid: u16,
    /// Namespace Globally Unique Identifier (bytes 119:104), big-endian as written by the spec.
    pub nguid: [u8; 16],
    /// IEEE Extended Unique Identifier (bytes 127:120).
    pub eui64: [u8; 8],
    /// LBA Format 0–63 Support (bytes 383:128).
    pub lbaf: [LbaFormat; 64],
    /// Vendor Specific area (bytes 4095:384), kept verbatim.
    pub vs: Opaque<3712>,
}

impl Default for IdentifyNamespace {
    fn default() -> Self {
        IdentifyNamespace {
            nsze: 0,
            ncap: 0,
            nuse: 0,
            nsfeat: 0,
            nlbaf: 0,
            flbas: 0,
            mc: 0,
            dpc: 0,
            dps: 0,
            nmic: 0,
            rescap: 0,
            fpi: 0,
            dlfeat: 0,
            nawun: 0,
            nawupf: 0,
            nacwu: 0,
            nabsn: 0,
            nabo: 0,
            nabspf: 0,
            noiob: 0,
            nvmcap: 0,
            npwg: 0,
            npwa: 0,
            npdg: 0,
            npda: 0,
            nows: 0,
            mssrl: 0,
            mcl: 0,
            msrc: 0,
            anagrpid: 0,
            nsattr: 0,
            nvmsetid: 0,
            endgid: 0,
            nguid: [0; 16],
            eui64: [0; 8],
            lbaf: [LbaFormat::default(); 64],
            vs: Opaque::default(),
        }
    }
}

const WHAT: &str = "Identify Namespace";

impl IdentifyNamespace {
    /// Parses exactly 4096 bytes. Every such buffer parses (there is no text here); reserved
    /// bytes, and reserved bits 31:26 of each LBA format, are ignored.
    pub fn parse(b: &[u8]) -> Result<IdentifyNamespace, ParseError> {
        exact(WHAT, b, LEN)?;
        use field::*;
        let mut lbaf = [LbaFormat::default(); 64];
        for (i, f) in lbaf.iter_mut().enumerate() {
            let at = LBAF.start + 4 * i;
            *f = LbaFormat::parse(&b[at..at + 4]);
        }
        Ok(IdentifyNamespace {
            nsze: get(b, NSZE),
            ncap: get(b, NCAP),
            nuse: get(b, NUSE),
            nsfeat: get(b, NSFEAT),
            nlbaf: get(b, NLBAF),
            flbas: get(b, FLBAS),
            mc: get(b, MC),
            dpc: get(b, DPC),
            dps: get(b, DPS),
            nmic: get(b, NMIC),
            rescap: get(b, RESCAP),
            fpi: get(b, FPI),
            dlfeat: get(b, DLFEAT),
            nawun: get(b, NAWUN),
            nawupf: get(b, NAWUPF),
            nacwu: get(b, NACWU),
            nabsn: get(b, NABSN),
            nabo: get(b, NABO),
            nabspf: get(b, NABSPF),
            noiob: get(b, NOIOB),
            nvmcap: get(b, NVMCAP),
            npwg: get(b, NPWG),
            npwa: get(b, NPWA),
            npdg: get(b, NPDG),
            npda: get(b, NPDA),
            nows: get(b, NOWS),
            mssrl: get(b, MSSRL),
            mcl: get(b, MCL),
            msrc: get(b, MSRC),
            anagrpid: get(b, ANAGRPID),
            nsattr: get(b, NSATTR),
            nvmsetid: get(b, NVMSETID),
            endgid: get(b, ENDGID),
            nguid: get(b, NGUID),
            eui64: get(b, EUI64),
            lbaf,
            vs: Opaque::read(b, VS),
        })
    }

    /// Writes exactly 4096 bytes, reserved bytes zeroed.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(WHAT, b, LEN)?;
        use field::*;
        b.fill(0);
        put(b, NSZE, self.nsze);
        put(b, NCAP, self.ncap);
        put(b, NUSE, self.nuse);
        put(b, NSFEAT, self.nsfeat);
        put(b, NLBAF, self.nlbaf);
        put(b, FLBAS, self.flbas);
        put(b, MC, self.mc);
        put(b, DPC, self.dpc);
        put(b, DPS, self.dps);
        put(b, NMIC, self.nmic);
        put(b, RESCAP, self.rescap);
        put(b, FPI, self.fpi);
        put(b, DLFEAT, self.dlfeat);
        put(b, NAWUN, self.nawun);
        put(b, NAWUPF, self.nawupf);
        put(b, NACWU, self.nacwu);
        put(b, NABSN, self.nabsn);
        put(b, NABO, self.nabo);
        put(b, NABSPF, self.nabspf);
        put(b, NOIOB, self.noiob);
        put(b, NVMCAP, self.nvmcap);
        put(b, NPWG, self.npwg);
        put(b, NPWA, self.npwa);
        put(b, NPDG, self.npdg);
        put(b, NPDA, self.npda);
        put(b, NOWS, self.nows);
        put(b, MSSRL, self.mssrl);
        put(b, MCL, self.mcl);
        put(b, MSRC, self.msrc);
        put(b, ANAGRPID, self.anagrpid);
        put(b, NSATTR, self.nsattr);
        put(b, NVMSETID, self.nvmsetid);
        put(b, ENDGID, self.endgid);
        put(b, NGUID, self.nguid);
        put(b, EUI64, self.eui64);
        for (i, f) in self.lbaf.iter().enumerate() {
            let at = LBAF.start + 4 * i;
            f.emit(&mut b[at..at + 4]);
        }
        self.vs.write(b, VS);
        Ok(())
    }

    /// The structure as 4096 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; LEN];
        // Cannot fail: the buffer has the exact size and there is no text to check.
        let _ = self.emit(&mut b);
        b
    }

    /// Index of the LBA format in use (FLBAS bits 3:0 and 6:5, Linux `nvme_lbaf_index`).
    pub fn lba_format_index(&self) -> usize {
        usize::from((self.flbas & 0xF) | ((self.flbas & 0x60) >> 1))
    }

    /// The LBA format in use.
    pub fn lba_format(&self) -> LbaFormat {
        // The index is at most 0x3F, always inside the 64-entry array.
        self.lbaf[self.lba_format_index() & 0x3F]
    }

    /// Sets FLBAS to format `index` (0..=63), keeping the extended-metadata bit.
    pub fn set_lba_format_index(&mut self, index: u8) {
        let i = index & 0x3F;
        self.flbas = (self.flbas & 0x10) | (i & 0xF) | ((i & 0x30) << 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identify::testutil;
    use proptest::prelude::*;

    fn hand_built() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..8].copy_from_slice(&0x0000_0001_0000_0000u64.to_le_bytes()); // nsze
        b[8..16].copy_from_slice(&0x0000_0000_FFFF_0000u64.to_le_bytes()); // ncap
        b[16..24].copy_from_slice(&0x1234u64.to_le_bytes()); // nuse
        b[24] = 0x1A; // nsfeat
        b[25] = 1; // nlbaf: two formats
        b[26] = 0x21; // flbas: low index 1, high bits 01 → index 17
        b[27] = 0x02; // mc
        b[28] = 0x1F; // dpc
        b[29] = 0x09; // dps
        b[30] = 0x01; // nmic shared
        b[31] = 0xFF; // rescap
        b[32] = 0x80; // fpi
        b[33] = 0x09; // dlfeat
        for (i, at) in (34..48).step_by(2).enumerate() {
            // nawun, nawupf, nacwu, nabsn, nabo, nabspf, noiob = 1..=7
            b[at..at + 2].copy_from_slice(&(i as u16 + 1).to_le_bytes());
        }
        b[48..64].copy_from_slice(&(1u128 << 42).to_le_bytes()); // nvmcap
        for (i, at) in (64..76).step_by(2).enumerate() {
            // npwg, npwa, npdg, npda, nows, mssrl = 11..=16
            b[at..at + 2].copy_from_slice(&(i as u16 + 11).to_le_bytes());
        }
        b[76..80].copy_from_slice(&4096u32.to_le_bytes()); // mcl
        b[80] = 3; // msrc
        b[92..96].copy_from_slice(&7u32.to_le_bytes()); // anagrpid
        b[99] = 1; // nsattr
        b[100..102].copy_from_slice(&2u16.to_le_bytes()); // nvmsetid
        b[102..104].copy_from_slice(&3u16.to_le_bytes()); // endgid
        b[104..120].copy_from_slice(&[0x5A; 16]); // nguid
        b[120..128].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // eui64
        b[128..132].copy_from_slice(&[0x00, 0x00, 9, 0x02]); // lbaf0: 512 B, rp 2
        b[132..136].copy_from_slice(&[0x08, 0x00, 12, 0x00]); // lbaf1: 4 KiB + 8 B metadata
        b[128 + 4 * 17 + 2] = 12; // lbaf17: 4 KiB
        b[128 + 4 * 63..128 + 4 * 64].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0x03]); // lbaf63
        b[384] = 0x77; // vendor specific
        b
    }

    fn expected() -> IdentifyNamespace {
        let mut lbaf = [LbaFormat::default(); 64];
        lbaf[0] = LbaFormat {
            ms: 0,
            lbads: 9,
            rp: 2,
        };
        lbaf[1] = LbaFormat {
            ms: 8,
            lbads: 12,
            rp: 0,
        };
        lbaf[17] = LbaFormat::new(12);
        lbaf[63] = LbaFormat {
            ms: 0xFFFF,
            lbads: 0xFF,
            rp: 3,
        };
        let mut vs = Opaque::<3712>::default();
        vs.0[0] = 0x77;
        IdentifyNamespace {
            nsze: 1 << 32,
            ncap: 0xFFFF_0000,
            nuse: 0x1234,
            nsfeat: 0x1A,
            nlbaf: 1,
            flbas: 0x21,
            mc: 2,
            dpc: 0x1F,
            dps: 9,
            nmic: 1,
            rescap: 0xFF,
            fpi: 0x80,
            dlfeat: 9,
            nawun: 1,
            nawupf: 2,
            nacwu: 3,
            nabsn: 4,
            nabo: 5,
            nabspf: 6,
            noiob: 7,
            nvmcap: 1 << 42,
            npwg: 11,
            npwa: 12,
            npdg: 13,
            npda: 14,
            nows: 15,
            mssrl: 16,
            mcl: 4096,
            msrc: 3,
            anagrpid: 7,
            nsattr: 1,
            nvmsetid: 2,
            endgid: 3,
            nguid: [0x5A; 16],
            eui64: [1, 2, 3, 4, 5, 6, 7, 8],
            lbaf,
            vs,
        }
    }

    #[test]
    fn parses_hand_built_layout() {
        let ns = IdentifyNamespace::parse(&hand_built()).unwrap();
        assert_eq!(ns, expected());
        assert_eq!(ns.lba_format_index(), 17);
        assert_eq!(ns.lba_format().block_size(), Some(4096));
        assert_eq!(ns.lbaf[0].block_size(), Some(512));
        assert_eq!(ns.lbaf[2].block_size(), None);
    }

    #[test]
    fn emits_hand_built_layout() {
        let b = expected().to_bytes();
        assert_eq!(b, hand_built());
        assert_eq!(&b[0..8], &(1u64 << 32).to_le_bytes());
        assert_eq!(&b[92..96], &7u32.to_le_bytes());
        assert_eq!(&b[104..120], &[0x5A; 16]);
        assert_eq!(&b[132..136], &[0x08, 0x00, 12, 0x00]);
    }

    #[test]
    fn reserved_bits_are_ignored_and_lengths_exact() {
        let mut b = hand_built();
        b[85] = 0xEE; // reserved 91:81
        b[97] = 0xEE; // reserved 98:96
        b[131] |= 0xFC; // reserved bits 31:26 of lbaf0
        assert_eq!(IdentifyNamespace::parse(&b).unwrap(), expected());
        assert!(matches!(
            IdentifyNamespace::parse(&b[..4095]),
            Err(ParseError::Truncated { .. })
        ));
        b.push(0);
        assert!(matches!(
            IdentifyNamespace::parse(&b),
            Err(ParseError::TrailingBytes { .. })
        ));
        assert!(expected().emit(&mut [0u8; 4095]).is_err());
    }

    #[test]
    fn format_index_setter_uses_both_fields() {
        let mut ns = IdentifyNamespace {
            flbas: 0x10,
            ..Default::default()
        };
        ns.set_lba_format_index(33);
        assert_eq!(ns.flbas, 0x10 | 0x01 | 0x40);
        assert_eq!(ns.lba_format_index(), 33);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn canonical_buffers_round_trip_byte_for_byte(
            b in proptest::collection::vec(any::<u8>(), 4096)
        ) {
            let mut b = b;
            testutil::zero(&mut b, field::RESERVED);
            for i in 0..64 {
                b[field::LBAF.start + 4 * i + 3] &= 0x3;
            }
            let ns = IdentifyNamespace::parse(&b).unwrap();
            prop_assert_eq!(ns.to_bytes(), b);
        }

        #[test]
        fn any_bytes_parse_and_reparse(b in proptest::collection::vec(any::<u8>(), 4094..4098)) {
            if let Ok(ns) = IdentifyNamespace::parse(&b) {
                prop_assert_eq!(IdentifyNamespace::parse(&ns.to_bytes()).unwrap(), ns);
            }
        }
    }
}
