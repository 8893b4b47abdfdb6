//! Byte-exact tests of the discovery log page against Base Figures 262–265 and Linux
//! `struct nvmf_disc_rsp_page_hdr` / `nvmf_disc_rsp_page_entry`.

use super::*;
use crate::identify::testutil;
use crate::text::DISCOVERY_NQN;
use proptest::prelude::*;

const SUBNQN: &str = "nqn.2026-11.dev.raidline:raid5";

/// The entry a Linux nvmet RDMA port at 192.168.1.10:4420 reports for an NVM subsystem.
fn hand_built_entry() -> Vec<u8> {
    let mut b = vec![0u8; 1024];
    b[0] = 1; // trtype RDMA
    b[1] = 1; // adrfam IPv4
    b[2] = 2; // subtype NVMe
    b[3] = 0x02 | 0x04; // treq: secure channel not required, SQ flow control disable
    b[4..6].copy_from_slice(&1u16.to_le_bytes()); // portid
    b[6..8].copy_from_slice(&0xFFFFu16.to_le_bytes()); // cntlid dynamic
    b[8..10].copy_from_slice(&32u16.to_le_bytes()); // asqsz
    b[10..12].copy_from_slice(&0x0001u16.to_le_bytes()); // eflags
    let mut trsvcid = [b' '; 32];
    trsvcid[..4].copy_from_slice(b"4420");
    b[32..64].copy_from_slice(&trsvcid);
    b[256..256 + SUBNQN.len()].copy_from_slice(SUBNQN.as_bytes());
    let mut traddr = [b' '; 256];
    traddr[..12].copy_from_slice(b"192.168.1.10");
    b[512..768].copy_from_slice(&traddr);
    b[768] = 1; // qptype connected
    b[769] = 1; // prtype not specified
    b[770] = 1; // cms RDMA CM
    b[776..778].copy_from_slice(&0xFFFFu16.to_le_bytes()); // pkey
    b
}

fn expected_entry() -> DiscoveryEntry {
    DiscoveryEntry {
        trtype: TransportType::RDMA,
        adrfam: AddressFamily::IPV4,
        subtype: DiscoverySubtype::NVME,
        treq: 0x06,
        portid: 1,
        cntlid: 0xFFFF,
        asqsz: 32,
        eflags: 1,
        trsvcid: "4420".into(),
        subnqn: Nqn::new(SUBNQN).unwrap(),
        traddr: "192.168.1.10".into(),
        tsas: Tsas::Rdma {
            qptype: RdmaQpType::CONNECTED,
            prtype: RdmaProviderType::NOT_SPECIFIED,
            cms: RdmaCms::RDMA_CM,
            pkey: 0xFFFF,
        },
    }
}

fn current_discovery_entry() -> DiscoveryEntry {
    DiscoveryEntry {
        subtype: DiscoverySubtype::CURRENT_DISCOVERY,
        subnqn: Nqn::discovery(),
        tsas: Tsas::RDMA_CM,
        eflags: 0x0002,
        ..expected_entry()
    }
}

fn hand_built_page() -> Vec<u8> {
    let mut b = vec![0u8; 1024];
    b[0..8].copy_from_slice(&7u64.to_le_bytes()); // genctr
    b[8..16].copy_from_slice(&2u64.to_le_bytes()); // numrec
    b[16..18].copy_from_slice(&0u16.to_le_bytes()); // recfmt
    b.extend_from_slice(&hand_built_entry());
    let mut e2 = hand_built_entry();
    e2[2] = 3;
    e2[10..12].copy_from_slice(&0x0002u16.to_le_bytes());
    e2[256..512].fill(0);
    e2[256..256 + DISCOVERY_NQN.len()].copy_from_slice(DISCOVERY_NQN.as_bytes());
    e2[776..778].fill(0);
    b.extend_from_slice(&e2);
    b
}

fn expected_page() -> DiscoveryLog {
    DiscoveryLog {
        genctr: 7,
        entries: vec![expected_entry(), current_discovery_entry()],
    }
}

#[test]
fn entry_layout() {
    assert_eq!(
        DiscoveryEntry::parse(&hand_built_entry()).unwrap(),
        expected_entry()
    );
    let b = expected_entry().to_bytes().unwrap();
    assert_eq!(b, hand_built_entry());
    assert_eq!(&b[32..36], b"4420");
    assert_eq!(b[36], b' ');
    assert_eq!(&b[512..524], b"192.168.1.10");
}

#[test]
fn page_layout() {
    let b = hand_built_page();
    assert_eq!(DiscoveryLog::parse(&b).unwrap(), expected_page());
    assert_eq!(expected_page().to_bytes().unwrap(), b);
    assert_eq!(expected_page().encoded_len(), 3072);
}

#[test]
fn partial_reads_parse_whole_entries_only() {
    let b = hand_built_page();
    // Header only: what `nvme discover` reads first.
    let p = DiscoveryLog::parse_partial(&b[..1024]).unwrap();
    assert_eq!(
        p.header,
        DiscoveryLogHeader {
            genctr: 7,
            numrec: 2
        }
    );
    assert!(p.entries.is_empty());
    assert!(!p.is_complete());
    assert_eq!(p.full_len(), Some(3072));
    // One whole entry and half of the second.
    let p = DiscoveryLog::parse_partial(&b[..2048 + 512]).unwrap();
    assert_eq!(p.entries, vec![expected_entry()]);
    // Everything, plus padding the host's buffer had beyond the page.
    let mut padded = b.clone();
    padded.extend_from_slice(&[0xEE; 1024]);
    let p = DiscoveryLog::parse_partial(&padded).unwrap();
    assert!(p.is_complete());
    assert_eq!(p.entries, expected_page().entries);
    // The strict parser refuses the short and the long reads.
    assert!(matches!(
        DiscoveryLog::parse(&b[..2048 + 512]),
        Err(ParseError::Truncated { need: 3072, .. })
    ));
    assert!(matches!(
        DiscoveryLog::parse(&padded),
        Err(ParseError::TrailingBytes { expected: 3072, .. })
    ));
    // A hostile record count does not allocate.
    let mut huge = b[..1024].to_vec();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let p = DiscoveryLog::parse_partial(&huge).unwrap();
    assert_eq!(p.header.numrec, u64::MAX);
    assert_eq!(p.full_len(), None);
    assert!(DiscoveryLog::parse(&huge).is_err());
}

#[test]
fn rejections() {
    let b = hand_built_page();
    assert!(DiscoveryLog::parse_partial(&b[..1023]).is_err());
    let mut recfmt = b.clone();
    recfmt[16] = 1;
    assert_eq!(DiscoveryLog::parse(&recfmt).unwrap_err().offset(), Some(16));
    // Errors inside an entry are reported at their page offset.
    let mut text = b.clone();
    text[2048 + 512 + 3] = 0x80; // non-ASCII in the second entry's traddr
    assert_eq!(
        DiscoveryLog::parse(&text).unwrap_err().offset(),
        Some(2048 + 512)
    );
    let mut nqn = b;
    nqn[1024 + 256..1024 + 512].fill(0); // empty subnqn
    assert_eq!(
        DiscoveryLog::parse(&nqn).unwrap_err().offset(),
        Some(1024 + 256)
    );
    let mut e = expected_entry();
    e.tsas = Tsas::Tcp { sectype: 0 };
    assert!(matches!(
        e.to_bytes(),
        Err(ParseError::InvalidField { offset: 768, .. })
    ));
    let mut e = expected_entry();
    e.traddr = "x".repeat(257);
    assert!(e.to_bytes().is_err());
    assert!(DiscoveryEntry::parse(&[0u8; 1025]).is_err());
}

#[test]
fn tcp_and_other_transports() {
    let mut e = expected_entry();
    e.trtype = TransportType::TCP;
    e.tsas = Tsas::Tcp { sectype: 2 };
    let b = e.to_bytes().unwrap();
    assert_eq!(b[768], 2);
    assert!(b[769..].iter().all(|&c| c == 0));
    assert_eq!(DiscoveryEntry::parse(&b).unwrap(), e);
    let mut raw = [0u8; 256];
    raw[100] = 9;
    e.trtype = TransportType::FC;
    e.tsas = Tsas::Other(Box::new(Opaque(raw)));
    let b = e.to_bytes().unwrap();
    assert_eq!(b[868], 9);
    assert_eq!(DiscoveryEntry::parse(&b).unwrap(), e);
}

fn canonical_entry(mut b: Vec<u8>) -> Vec<u8> {
    testutil::zero(&mut b, field::ENTRY_RESERVED);
    testutil::ascii(&mut b, field::TRSVCID);
    testutil::ascii(&mut b, field::TRADDR);
    testutil::nqn(&mut b, field::SUBNQN);
    match TransportType(b[0]) {
        TransportType::RDMA => {
            b[771..776].fill(0);
            b[778..1024].fill(0);
        }
        TransportType::TCP => b[769..1024].fill(0),
        _ => {}
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn canonical_entries_round_trip(b in proptest::collection::vec(any::<u8>(), 1024), t in 0u8..5) {
        let mut b = b;
        b[0] = t; // cover RDMA and TCP often
        let b = canonical_entry(b);
        let e = DiscoveryEntry::parse(&b).unwrap();
        let out = e.to_bytes().unwrap();
        prop_assert_eq!(&out, &b);
        prop_assert_eq!(DiscoveryEntry::parse(&out).unwrap(), e);
    }

    #[test]
    fn pages_round_trip(genctr: u64, n in 0usize..4, cut in 0usize..5000) {
        let log = DiscoveryLog { genctr, entries: vec![expected_entry(); n] };
        let b = log.to_bytes().unwrap();
        prop_assert_eq!(&DiscoveryLog::parse(&b).unwrap(), &log);
        let cut = cut.min(b.len());
        if cut >= 1024 {
            let p = DiscoveryLog::parse_partial(&b[..cut]).unwrap();
            prop_assert_eq!(p.entries.len(), ((cut - 1024) / 1024).min(n));
            prop_assert_eq!(p.header.numrec, n as u64);
        } else {
            prop_assert!(DiscoveryLog::parse_partial(&b[..cut]).is_err());
        }
    }

    #[test]
    fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 1000..3100)) {
        if let Ok(p) = DiscoveryLog::parse_partial(&b) {
            prop_assert!(p.entries.len() as u64 <= p.header.numrec);
        }
        let _ = DiscoveryLog::parse(&b);
    }
}
