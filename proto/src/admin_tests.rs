//! Byte-exact tests of the admin command views against Base 2.0 command layouts and what the
//! Linux host builds (`nvme_identify_ctrl`, `nvme_get_log`, `nvme_set_features`, ...).

use super::*;
use crate::log::ANA_LSP_RGO;
use proptest::prelude::*;

/// The keyed SGL with invalidate that nvme-rdma puts in every data-carrying admin command.
const KEYED: SglDescriptor = SglDescriptor::Keyed {
    address: 0xFFFF_8880_0000_1000,
    length: 4096,
    key: 0x0012_3456,
    invalidate: true,
};

/// An SQE of `opcode` with CID 0x0102, NSID `nsid`, PSDT = SGL and [`KEYED`] as DPTR.
fn raw(opcode: u8, nsid: u32) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0] = opcode;
    b[1] = 0x40;
    b[2..4].copy_from_slice(&0x0102u16.to_le_bytes());
    b[4..8].copy_from_slice(&nsid.to_le_bytes());
    b[24..32].copy_from_slice(&0xFFFF_8880_0000_1000u64.to_le_bytes());
    b[32..35].copy_from_slice(&[0x00, 0x10, 0x00]);
    b[35..39].copy_from_slice(&0x0012_3456u32.to_le_bytes());
    b[39] = 0x4F;
    b
}

fn sqe(b: &[u8; 64]) -> Sqe {
    Sqe::parse(b).unwrap()
}

#[test]
fn identify_layout() {
    // NS Identification Descriptor list for NSID 1 (nvme_identify_ns_descs).
    let mut b = raw(0x06, 1);
    b[40] = 0x03; // CNS
    b[42..44].copy_from_slice(&0x0007u16.to_le_bytes()); // CNTID
    b[44..46].copy_from_slice(&0x0009u16.to_le_bytes()); // CNSSID
    b[47] = 0x02; // CSI zoned
    b[56] = 0x05; // UUID index
    let want = Identify {
        cid: 0x0102,
        nsid: 1,
        sgl: KEYED,
        cns: Cns::NS_ID_DESCRIPTORS,
        cntid: 7,
        cnssid: 9,
        csi: Csi::ZONED,
        uuid_index: 5,
    };
    assert_eq!(Identify::parse(&sqe(&b)).unwrap(), want);
    assert_eq!(want.to_sqe().unwrap().as_bytes(), &b);

    // Identify Controller as nvme_identify_ctrl() sends it: CNS 1, everything else zero.
    let mut c = raw(0x06, 0);
    c[40] = 0x01;
    let ctrl = Identify::new(0x0102, Cns::CONTROLLER, 0, KEYED);
    assert_eq!(ctrl.to_sqe().unwrap().as_bytes(), &c);
    assert_eq!(Identify::parse(&sqe(&c)).unwrap(), ctrl);
}

#[test]
fn get_log_page_layout() {
    // ANA log, 4 KiB + 8 bytes at offset 8, RGO, RAE, NUMD spanning NUMDL and NUMDU.
    let mut b = raw(0x02, 0xFFFF_FFFF);
    let numd: u32 = 0x0001_0401; // (0x10402 dwords) - 1
    b[40] = 0x0C;
    b[41] = 0x80 | ANA_LSP_RGO;
    b[42..44].copy_from_slice(&((numd & 0xFFFF) as u16).to_le_bytes());
    b[44..46].copy_from_slice(&((numd >> 16) as u16).to_le_bytes());
    b[46..48].copy_from_slice(&0x0033u16.to_le_bytes()); // LSI
    b[48..52].copy_from_slice(&8u32.to_le_bytes()); // LPOL
    b[52..56].copy_from_slice(&1u32.to_le_bytes()); // LPOU
    b[56] = 0x01; // UUID index
    b[59] = 0x00; // CSI NVM
    let want = GetLogPage {
        cid: 0x0102,
        nsid: 0xFFFF_FFFF,
        sgl: KEYED,
        lid: LogPageId::ANA,
        lsp: ANA_LSP_RGO,
        rae: true,
        numd,
        lsi: 0x33,
        offset: (1 << 32) | 8,
        offset_is_index: false,
        uuid_index: 1,
        csi: Csi::NVM,
    };
    let got = GetLogPage::parse(&sqe(&b)).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.byte_len(), u64::from(numd + 1) * 4);
    assert_eq!(got.byte_range(), Some(((1 << 32) | 8, 0x10402 * 4)));
    assert_eq!(want.to_sqe().unwrap().as_bytes(), &b);

    // The discovery log header read of `nvme discover`: 1024 bytes at offset 0.
    let d = GetLogPage::read(1, LogPageId::DISCOVERY, 0, 0, 1024, KEYED).unwrap();
    let db = d.to_sqe().unwrap();
    assert_eq!(db.as_bytes()[40], 0x70);
    assert_eq!(&db.as_bytes()[42..44], &255u16.to_le_bytes());
    assert_eq!(GetLogPage::read(1, LogPageId::SMART, 0, 0, 6, KEYED), None);
    assert_eq!(GetLogPage::read(1, LogPageId::SMART, 0, 2, 8, KEYED), None);
    assert_eq!(GetLogPage::read(1, LogPageId::SMART, 0, 0, 0, KEYED), None);
    assert_eq!(
        GetLogPage::read(1, LogPageId::SMART, 0, 0, 1 << 34, KEYED)
            .unwrap()
            .numd,
        u32::MAX
    );

    // Index offsets (OT) carry no byte range and need no alignment.
    let mut i = raw(0x02, 0);
    i[48] = 3;
    i[58] = 0x80;
    let idx = GetLogPage::parse(&sqe(&i)).unwrap();
    assert!(idx.offset_is_index);
    assert_eq!(idx.byte_range(), None);
    assert_eq!(idx.to_sqe().unwrap().as_bytes(), &i);
}

#[test]
fn get_log_page_rejections() {
    let mut b = raw(0x02, 0);
    b[48] = 2; // LPO not dword aligned
    assert!(matches!(
        GetLogPage::parse(&sqe(&b)),
        Err(ParseError::InvalidField { offset: 48, .. })
    ));
    let mut b = raw(0x02, 0);
    b[48..56].copy_from_slice(&(u64::MAX - 3).to_le_bytes()); // offset + 4 overflows
    assert!(matches!(
        GetLogPage::parse(&sqe(&b)),
        Err(ParseError::InvalidField { offset: 48, .. })
    ));
    assert!(matches!(
        GetLogPage::parse(&sqe(&raw(0x06, 0))),
        Err(ParseError::WrongOpcode { opcode: 0x06, .. })
    ));
}

#[test]
fn log_slices() {
    let page: Vec<u8> = (0..100u8).collect();
    let read = |offset, len| GetLogPage::read(1, LogPageId::SMART, 0, offset, len, KEYED).unwrap();
    assert_eq!(read(0, 16).slice(&page).unwrap(), &page[..16]);
    assert_eq!(read(96, 16).slice(&page).unwrap(), &page[96..]);
    assert_eq!(read(100, 4).slice(&page).unwrap(), &[] as &[u8]);
    assert!(matches!(
        read(104, 4).slice(&page),
        Err(ParseError::InvalidField { offset: 48, .. })
    ));
    let mut idx = read(0, 4);
    idx.offset_is_index = true;
    assert!(idx.slice(&page).is_err());
}

#[test]
fn features_layout() {
    // Set Features Number of Queues, 8 of each (nvme_set_queue_count), saved.
    let mut b = raw(0x09, 0);
    b[40] = 0x07;
    b[43] = 0x80; // SV
    b[44..48].copy_from_slice(&0x0007_0007u32.to_le_bytes());
    b[48..52].copy_from_slice(&0x12u32.to_le_bytes());
    b[52..56].copy_from_slice(&0x13u32.to_le_bytes());
    b[56] = 0x7F;
    b[60..64].copy_from_slice(&0x15u32.to_le_bytes());
    let want = SetFeatures {
        cid: 0x0102,
        nsid: 0,
        sgl: KEYED,
        fid: FeatureId::NUMBER_OF_QUEUES,
        save: true,
        cdw11: 0x0007_0007,
        cdw12: 0x12,
        cdw13: 0x13,
        cdw15: 0x15,
        uuid_index: 0x7F,
    };
    assert_eq!(SetFeatures::parse(&sqe(&b)).unwrap(), want);
    assert_eq!(want.to_sqe().unwrap().as_bytes(), &b);
    let simple = SetFeatures::dword(0x0102, FeatureId::KEEP_ALIVE_TIMER, 5000, KEYED);
    let sb = simple.to_sqe().unwrap();
    assert_eq!(sb.as_bytes()[40], 0x0F);
    assert_eq!(&sb.as_bytes()[44..48], &5000u32.to_le_bytes());

    // Get Features Timestamp, supported capabilities.
    let mut g = raw(0x0A, 1);
    g[40] = 0x0E;
    g[41] = 0x03;
    g[44..48].copy_from_slice(&0xAABBu32.to_le_bytes());
    g[56] = 2;
    let want = GetFeatures {
        cid: 0x0102,
        nsid: 1,
        sgl: KEYED,
        fid: FeatureId::TIMESTAMP,
        sel: FeatureSelect::SupportedCapabilities,
        cdw11: 0xAABB,
        uuid_index: 2,
    };
    assert_eq!(GetFeatures::parse(&sqe(&g)).unwrap(), want);
    assert_eq!(want.to_sqe().unwrap().as_bytes(), &g);
    let cur = GetFeatures::current(0x0102, FeatureId::TIMESTAMP, KEYED)
        .to_sqe()
        .unwrap();
    assert_eq!(cur.as_bytes()[41], 0);
    g[41] = 0x04; // SEL 4: reserved
    assert!(matches!(
        GetFeatures::parse(&sqe(&g)),
        Err(ParseError::InvalidField {
            offset: 41,
            value: 4,
            ..
        })
    ));
}

#[test]
fn parameterless_commands_and_abort() {
    let mut k = [0u8; 64];
    k[0] = 0x18;
    k[2..4].copy_from_slice(&0x0009u16.to_le_bytes());
    assert_eq!(KeepAlive::parse(&sqe(&k)).unwrap(), KeepAlive { cid: 9 });
    assert_eq!(KeepAlive { cid: 9 }.to_sqe().as_bytes(), &k);
    let mut a = [0u8; 64];
    a[0] = 0x0C;
    a[2..4].copy_from_slice(&0x001Fu16.to_le_bytes());
    assert_eq!(
        AsyncEventRequest::parse(&sqe(&a)).unwrap(),
        AsyncEventRequest { cid: 31 }
    );
    assert_eq!(AsyncEventRequest { cid: 31 }.to_sqe().as_bytes(), &a);
    let mut ab = [0u8; 64];
    ab[0] = 0x08;
    ab[2..4].copy_from_slice(&0x0001u16.to_le_bytes());
    ab[40..42].copy_from_slice(&0x0003u16.to_le_bytes()); // SQID
    ab[42..44].copy_from_slice(&0xBEEFu16.to_le_bytes()); // CID
    let want = Abort {
        cid: 1,
        sqid: 3,
        target_cid: 0xBEEF,
    };
    assert_eq!(Abort::parse(&sqe(&ab)).unwrap(), want);
    assert_eq!(want.to_sqe().as_bytes(), &ab);
    for parse in [
        |s: &Sqe| KeepAlive::parse(s).map(|_| ()),
        |s: &Sqe| AsyncEventRequest::parse(s).map(|_| ()),
        |s: &Sqe| Abort::parse(s).map(|_| ()),
        |s: &Sqe| SetFeatures::parse(s).map(|_| ()),
        |s: &Sqe| GetFeatures::parse(s).map(|_| ()),
        |s: &Sqe| Identify::parse(s).map(|_| ()),
    ] {
        assert!(matches!(
            parse(&Sqe::new(0x7F, 0)),
            Err(ParseError::WrongOpcode { opcode: 0x7F, .. })
        ));
    }
}

#[test]
fn dispatch() {
    let mut k = [0u8; 64];
    k[0] = 0x18;
    assert_eq!(
        AdminCommand::parse(&sqe(&k)).unwrap(),
        AdminCommand::KeepAlive(KeepAlive { cid: 0 })
    );
    let other = AdminCommand::parse(&Sqe::new(0x80, 5)).unwrap();
    assert_eq!(
        other,
        AdminCommand::Other {
            cid: 5,
            opcode: AdminOpcode::FORMAT_NVM
        }
    );
    assert_eq!(other.cid(), 5);
    assert!(other.to_sqe().is_none());
    let mut g = raw(0x0A, 0);
    g[41] = 7;
    assert!(AdminCommand::parse(&sqe(&g)).is_err());
    // A data-carrying command whose SGL descriptor is malformed fails at SQE byte 39.
    let mut bad = raw(0x06, 0);
    bad[39] = 0x70;
    assert_eq!(
        AdminCommand::parse(&sqe(&bad)).unwrap_err().offset(),
        Some(39)
    );
}

fn sgl() -> impl Strategy<Value = SglDescriptor> {
    prop_oneof![
        (any::<u64>(), 0u32..1 << 24, any::<u32>(), any::<bool>()).prop_map(
            |(address, length, key, invalidate)| SglDescriptor::Keyed {
                address,
                length,
                key,
                invalidate
            }
        ),
        (any::<u64>(), any::<u32>())
            .prop_map(|(offset, length)| SglDescriptor::InCapsule { offset, length }),
    ]
}

fn command() -> impl Strategy<Value = AdminCommand> {
    prop_oneof![
        (any::<(u16, u32, u8, u16, u16, u8)>(), 0u8..128, sgl()).prop_map(
            |((cid, nsid, cns, cntid, cnssid, csi), uuid_index, sgl)| {
                AdminCommand::Identify(Identify {
                    cid,
                    nsid,
                    sgl,
                    cns: Cns(cns),
                    cntid,
                    cnssid,
                    csi: Csi(csi),
                    uuid_index,
                })
            }
        ),
        (
            any::<(u16, u32, u8, bool, u32, u16)>(),
            (0u8..128, 0u8..128, any::<u8>(), any::<u64>(), any::<bool>()),
            sgl()
        )
            .prop_map(
                |((cid, nsid, lid, rae, numd, lsi), (lsp, uuid_index, csi, offset, ot), sgl)| {
                    let v = GetLogPage {
                        cid,
                        nsid,
                        sgl,
                        lid: LogPageId(lid),
                        lsp,
                        rae,
                        numd,
                        lsi,
                        offset: if ot {
                            offset
                        } else {
                            offset & !3 & (u64::MAX >> 2)
                        },
                        offset_is_index: ot,
                        uuid_index,
                        csi: Csi(csi),
                    };
                    AdminCommand::GetLogPage(v)
                }
            ),
        (any::<(u16, u32, u8, u32)>(), 0u8..4, 0u8..128, sgl()).prop_map(
            |((cid, nsid, fid, cdw11), sel, uuid_index, sgl)| {
                AdminCommand::GetFeatures(GetFeatures {
                    cid,
                    nsid,
                    sgl,
                    fid: FeatureId(fid),
                    sel: FeatureSelect::from_bits(sel).unwrap(),
                    cdw11,
                    uuid_index,
                })
            }
        ),
        (
            any::<(u16, u32, u8, bool)>(),
            any::<(u32, u32, u32, u32)>(),
            0u8..128,
            sgl()
        )
            .prop_map(
                |((cid, nsid, fid, save), (cdw11, cdw12, cdw13, cdw15), uuid_index, sgl)| {
                    AdminCommand::SetFeatures(SetFeatures {
                        cid,
                        nsid,
                        sgl,
                        fid: FeatureId(fid),
                        save,
                        cdw11,
                        cdw12,
                        cdw13,
                        cdw15,
                        uuid_index,
                    })
                }
            ),
        any::<u16>().prop_map(|cid| AdminCommand::KeepAlive(KeepAlive { cid })),
        any::<u16>().prop_map(|cid| AdminCommand::AsyncEventRequest(AsyncEventRequest { cid })),
        any::<(u16, u16, u16)>().prop_map(|(cid, sqid, target_cid)| AdminCommand::Abort(Abort {
            cid,
            sqid,
            target_cid
        })),
    ]
}

proptest! {
    #[test]
    fn values_round_trip(c in command()) {
        let s = c.to_sqe().unwrap().unwrap();
        prop_assert_eq!(AdminCommand::parse(&s).unwrap(), c);
    }

    #[test]
    fn any_sqe_parses_or_errors(b in proptest::collection::vec(any::<u8>(), 64), op in prop_oneof![Just(0x02u8), Just(0x06), Just(0x08), Just(0x09), Just(0x0A), Just(0x0C), Just(0x18), any::<u8>()]) {
        let mut b = b;
        b[0] = op;
        let s = Sqe::parse(&b).unwrap();
        if let Ok(c) = AdminCommand::parse(&s) {
            if let Some(out) = c.to_sqe() {
                prop_assert_eq!(AdminCommand::parse(&out.unwrap()).unwrap(), c);
            }
        }
    }
}
