//! Byte-exact tests of the fabrics commands against the layouts of Fabrics 1.1 and Linux
//! `struct nvmf_*_command`.

use super::property::{shutdown, Cap, Cc, Csts, Version};
use super::*;
use proptest::prelude::*;

/// The admin-queue Connect the Linux host sends (nvmf_connect_admin_queue): qid 0, sqsize 31,
/// kato 5000 ms, 1024 bytes of data behind a keyed SGL with invalidate.
fn linux_admin_connect() -> [u8; 64] {
    let mut raw = [0u8; 64];
    raw[0] = 0x7F;
    raw[1] = 0x40; // PSDT = SGL
    raw[2..4].copy_from_slice(&0x0007u16.to_le_bytes());
    raw[4] = 0x01; // fctype connect
    raw[24..32].copy_from_slice(&0xFFFF_8880_1234_0000u64.to_le_bytes());
    raw[32..35].copy_from_slice(&[0x00, 0x04, 0x00]); // 1024
    raw[35..39].copy_from_slice(&0x0012_3456u32.to_le_bytes());
    raw[39] = 0x4F;
    raw[40..42].copy_from_slice(&0u16.to_le_bytes()); // recfmt
    raw[42..44].copy_from_slice(&0u16.to_le_bytes()); // qid
    raw[44..46].copy_from_slice(&31u16.to_le_bytes()); // sqsize
    raw[46] = 0;
    raw[48..52].copy_from_slice(&5000u32.to_le_bytes());
    raw
}

#[test]
fn connect_command_layout() {
    let raw = linux_admin_connect();
    let c = Connect::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(
        c,
        Connect {
            cid: 7,
            sgl: SglDescriptor::Keyed {
                address: 0xFFFF_8880_1234_0000,
                length: 1024,
                key: 0x0012_3456,
                invalidate: true
            },
            recfmt: 0,
            qid: 0,
            sqsize: 31,
            cattr: 0,
            kato: 5000,
        }
    );
    assert_eq!(c.to_sqe().unwrap().as_bytes(), &raw);
    assert_eq!(Connect::OFFSET_SQSIZE, 44);
    assert_eq!(Connect::OFFSET_QID, 42);
}

#[test]
fn connect_rejects_other_commands() {
    let mut raw = linux_admin_connect();
    raw[4] = 0x04;
    assert!(matches!(
        Connect::parse(&Sqe::parse(&raw).unwrap()),
        Err(ParseError::InvalidField { offset: 4, .. })
    ));
    raw[0] = 0x06;
    assert!(matches!(
        Connect::parse(&Sqe::parse(&raw).unwrap()),
        Err(ParseError::WrongOpcode { opcode: 6, .. })
    ));
    let mut raw = linux_admin_connect();
    raw[39] = 0x7F; // reserved SGL type
    assert!(Connect::parse(&Sqe::parse(&raw).unwrap()).is_err());
}

#[test]
fn connect_data_layout() {
    let mut raw = vec![0u8; 1024];
    raw[0..16].copy_from_slice(&[0xAB; 16]);
    raw[16..18].copy_from_slice(&0xFFFFu16.to_le_bytes());
    let sub = b"nqn.2026-11.io.raidline:array0";
    raw[256..256 + sub.len()].copy_from_slice(sub);
    let host = b"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";
    raw[512..512 + host.len()].copy_from_slice(host);
    let d = ConnectData::parse(&raw).unwrap();
    assert_eq!(d.hostid, [0xAB; 16]);
    assert_eq!(d.cntlid, CNTLID_DYNAMIC);
    assert_eq!(d.subnqn.as_str(), "nqn.2026-11.io.raidline:array0");
    assert_eq!(d.hostnqn.as_bytes_len(), host.len());
    assert_eq!(d.to_bytes(), raw);
    assert!(ConnectData::parse(&raw[..1023]).is_err());
    let mut bad = raw.clone();
    bad[256..512].fill(b'x'); // not NUL-terminated
    assert!(matches!(
        ConnectData::parse(&bad),
        Err(ParseError::InvalidText { offset: 256, .. })
    ));
}

trait LenExt {
    fn as_bytes_len(&self) -> usize;
}
impl LenExt for Nqn {
    fn as_bytes_len(&self) -> usize {
        self.as_str().len()
    }
}

#[test]
fn connect_response_dw0() {
    let ok = ConnectResponse::Success {
        cntlid: 0x0102,
        authreq: 0,
    };
    assert_eq!(ok.to_dw0(), 0x0000_0102);
    assert_eq!(ConnectResponse::success_from_dw0(0x0000_0102), ok);
    // Authentication required: Linux's NVME_CONNECT_AUTHREQ_ATR is bit 17.
    let atr = ConnectResponse::Success {
        cntlid: 7,
        authreq: 1,
    };
    assert_eq!(atr.to_dw0(), 0x0002_0007);
    assert_eq!(ConnectResponse::success_from_dw0(0x0002_0007), atr);
    // Linux nvmet: IPO_IATTR_CONNECT_DATA(subsysnqn) = (1 << 16) | 256.
    let bad = ConnectResponse::InvalidParameter {
        attribute: InvalidParameterIn::Data,
        offset: ConnectData::OFFSET_SUBNQN,
    };
    assert_eq!(bad.to_dw0(), 0x0001_0100);
    assert_eq!(ConnectResponse::invalid_from_dw0(0x0001_0100), bad);
    // IPO_IATTR_CONNECT_SQE(sqsize) = 44.
    let sq = ConnectResponse::InvalidParameter {
        attribute: InvalidParameterIn::Command,
        offset: Connect::OFFSET_SQSIZE,
    };
    assert_eq!(sq.to_dw0(), 44);
}

#[test]
fn property_get_and_set_layout() {
    // nvmf_reg_read64(CAP): attrib 1, offset 0.
    let mut raw = [0u8; 64];
    raw[0] = 0x7F;
    raw[2..4].copy_from_slice(&3u16.to_le_bytes());
    raw[4] = 0x04;
    raw[40] = 1;
    raw[44..48].copy_from_slice(&0u32.to_le_bytes());
    let g = PropertyGet::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(
        g,
        PropertyGet {
            cid: 3,
            size: PropertySize::Eight,
            offset: property::CAP
        }
    );
    assert_eq!(g.to_sqe().as_bytes(), &raw);

    // nvmf_reg_write32(CC = 0x00460001): attrib 0, offset 0x14, value at 48.
    let mut raw = [0u8; 64];
    raw[0] = 0x7F;
    raw[2..4].copy_from_slice(&4u16.to_le_bytes());
    raw[4] = 0x00;
    raw[44..48].copy_from_slice(&0x14u32.to_le_bytes());
    raw[48..56].copy_from_slice(&0x0046_0001u64.to_le_bytes());
    let s = PropertySet::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(s.offset, property::CC);
    assert_eq!(s.size, PropertySize::Four);
    assert_eq!(s.value, 0x0046_0001);
    assert_eq!(s.to_sqe().as_bytes(), &raw);
    let cc = Cc::from_u32(s.value as u32);
    assert!(cc.en);
    assert_eq!((cc.iosqes, cc.iocqes, cc.mps, cc.shn), (6, 4, 0, 0));

    // The Linux host puts a null keyed SGL (identifier 0x40) into every command without data,
    // property commands included (nvme_rdma_set_sg_null): it must be accepted.
    raw[39] = 0x40;
    assert!(PropertySet::parse(&Sqe::parse(&raw).unwrap()).is_ok());
    assert!(PropertyGet::parse(&{
        let mut g = PropertyGet {
            cid: 1,
            size: PropertySize::Eight,
            offset: 0,
        }
        .to_sqe();
        g.as_bytes_mut()[39] = 0x40;
        g
    })
    .is_ok());
    raw[39] = 0;
    raw[40] = 2; // reserved size
    assert!(matches!(
        PropertySet::parse(&Sqe::parse(&raw).unwrap()),
        Err(ParseError::InvalidField { offset: 40, .. })
    ));
    raw[40] = 0;
    raw[60] = 1; // reserved tail
    assert!(matches!(
        PropertySet::parse(&Sqe::parse(&raw).unwrap()),
        Err(ParseError::InvalidField { offset: 60, .. })
    ));
}

#[test]
fn disconnect_and_auth_layout() {
    let mut raw = [0u8; 64];
    raw[0] = 0x7F;
    raw[2..4].copy_from_slice(&9u16.to_le_bytes());
    raw[4] = 0x08;
    let d = Disconnect::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(d, Disconnect { cid: 9, recfmt: 0 });
    assert_eq!(d.to_sqe().as_bytes(), &raw);

    let mut raw = [0u8; 64];
    raw[0] = 0x7F;
    raw[1] = 0x40;
    raw[4] = 0x05;
    raw[32..35].copy_from_slice(&[0x40, 0x00, 0x00]);
    raw[39] = 0x40;
    raw[41] = 0x01; // spsp0
    raw[42] = 0x02; // spsp1
    raw[43] = 0xE9; // secp
    raw[44..48].copy_from_slice(&64u32.to_le_bytes());
    let a = Authentication::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(a.direction, AuthDirection::Send);
    assert_eq!((a.secp, a.spsp0, a.spsp1, a.length), (0xE9, 1, 2, 64));
    assert_eq!(a.to_sqe().unwrap().as_bytes(), &raw);
    raw[4] = 0x06;
    let r = Authentication::parse(&Sqe::parse(&raw).unwrap()).unwrap();
    assert_eq!(r.direction, AuthDirection::Receive);
}

#[test]
fn registers_at_spec_bits() {
    // What a Linux host requires: MPSMIN 0, MQES, TO, CSS bit 37 (NVM).
    let cap = Cap {
        mqes: 127,
        cqr: true,
        to: 30,
        css: 1,
        ..Cap::default()
    };
    assert_eq!(cap.to_u64(), 127 | 1 << 16 | 30 << 24 | 1 << 37);
    assert_eq!(Cap::from_u64(cap.to_u64()), cap);
    assert_eq!(Version::V1_3.to_u32(), 0x0001_0300);
    assert_eq!(Version::from_u32(0x0002_0000), Version::V2_0);
    let csts = Csts {
        rdy: true,
        shst: shutdown::SHST_COMPLETE,
        ..Csts::default()
    };
    assert_eq!(csts.to_u32(), 0b1001);
    let cc = Cc {
        en: true,
        shn: shutdown::SHN_NORMAL,
        iosqes: 6,
        iocqes: 4,
        ..Cc::default()
    };
    assert_eq!(cc.to_u32(), 0x0046_4001);
    assert_eq!(property::size_of(property::CAP), Some(PropertySize::Eight));
    assert_eq!(property::size_of(0x0C), None);
}

proptest! {
    #[test]
    fn any_sqe_never_panics(
        mut raw in proptest::collection::vec(any::<u8>(), 64),
        fctype in prop::sample::select(vec![0u8, 1, 4, 5, 6, 8, 0x7F]),
        zero_tail in any::<bool>(),
    ) {
        // Make fabrics commands likely: opcode 0x7F, a real command type, and (half of the
        // time) zero reserved bytes so the strict parsers accept.
        raw[0] = 0x7F;
        raw[4] = fctype;
        if zero_tail {
            raw[40..].iter_mut().skip(1).for_each(|b| *b = 0);
            raw[24..40].iter_mut().for_each(|b| *b = 0);
        }
        let sqe = Sqe::parse(&raw).unwrap();
        if let Ok(c) = Connect::parse(&sqe) { prop_assert_eq!(Connect::parse(&c.to_sqe().unwrap()).unwrap(), c); }
        if let Ok(g) = PropertyGet::parse(&sqe) { prop_assert_eq!(PropertyGet::parse(&g.to_sqe()).unwrap(), g); }
        if let Ok(s) = PropertySet::parse(&sqe) { prop_assert_eq!(PropertySet::parse(&s.to_sqe()).unwrap(), s); }
        if let Ok(d) = Disconnect::parse(&sqe) { prop_assert_eq!(Disconnect::parse(&d.to_sqe()).unwrap(), d); }
        if let Ok(a) = Authentication::parse(&sqe) { prop_assert_eq!(Authentication::parse(&a.to_sqe().unwrap()).unwrap(), a); }
    }

    #[test]
    fn connect_data_round_trips(raw in proptest::collection::vec(any::<u8>(), 1024)) {
        if let Ok(d) = ConnectData::parse(&raw) {
            prop_assert_eq!(ConnectData::parse(&d.to_bytes()).unwrap(), d);
        }
    }

    #[test]
    fn registers_round_trip(v in any::<u64>()) {
        let cap = Cap::from_u64(v);
        prop_assert_eq!(Cap::from_u64(cap.to_u64()), cap);
        let cc = Cc::from_u32(v as u32);
        prop_assert_eq!(Cc::from_u32(cc.to_u32()), cc);
        let csts = Csts::from_u32(v as u32);
        prop_assert_eq!(Csts::from_u32(csts.to_u32()), csts);
        prop_assert_eq!(Version::from_u32(v as u32).to_u32(), v as u32);
    }
}
