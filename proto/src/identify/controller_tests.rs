//! Byte-exact tests of Identify Controller against Base 2.0 Figure 275 offsets.

use super::field;
use super::*;
use crate::identify::testutil;
use proptest::prelude::*;

const NQN: &str = "nqn.2026-11.dev.raidline:raid5";

/// A 4096-byte Identify Controller written byte by byte at the specification's offsets: what a
/// fabrics I/O controller like ours reports.
fn hand_built() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..2].copy_from_slice(&0x1B96u16.to_le_bytes()); // vid
    b[2..4].copy_from_slice(&0x1B97u16.to_le_bytes()); // ssvid
    b[4..24].copy_from_slice(b"RL0001              "); // sn
    let mut mn = [b' '; 40];
    mn[..14].copy_from_slice(b"Raidline RAID5");
    b[24..64].copy_from_slice(&mn);
    b[64..72].copy_from_slice(b"0.1.0   "); // fr
    b[72] = 6; // rab
    b[73..76].copy_from_slice(&[0x11, 0x22, 0x33]); // ieee
    b[76] = 0x0B; // cmic: multi-port, multi-controller, ANA
    b[77] = 8; // mdts: 2^8 pages
    b[78..80].copy_from_slice(&0x0005u16.to_le_bytes()); // cntlid
    b[80..84].copy_from_slice(&0x0002_0000u32.to_le_bytes()); // ver 2.0
    b[84..88].copy_from_slice(&1000u32.to_le_bytes()); // rtd3r
    b[88..92].copy_from_slice(&2000u32.to_le_bytes()); // rtd3e
    b[92..96].copy_from_slice(&0x8000_0900u32.to_le_bytes()); // oaes
    b[96..100].copy_from_slice(&0x0000_0041u32.to_le_bytes()); // ctratt
    b[100..102].copy_from_slice(&0x0003u16.to_le_bytes()); // rrls
    b[111] = 1; // cntrltype I/O
    b[112..128].copy_from_slice(&[0xF0; 16]); // fguid
    b[128..130].copy_from_slice(&1u16.to_le_bytes()); // crdt1
    b[130..132].copy_from_slice(&2u16.to_le_bytes()); // crdt2
    b[132..134].copy_from_slice(&3u16.to_le_bytes()); // crdt3
    b[253] = 0x01; // nvmsr
    b[254] = 0x02; // vwci
    b[255] = 0x03; // mec
    b[256..258].copy_from_slice(&0x0008u16.to_le_bytes()); // oacs
    b[258] = 3; // acl
    b[259] = 3; // aerl
    b[260] = 0x03; // frmw
    b[261] = 0x06; // lpa
    b[262] = 127; // elpe
    b[263] = 0; // npss
    b[264] = 1; // avscc
    b[265] = 0; // apsta
    b[266..268].copy_from_slice(&343u16.to_le_bytes()); // wctemp
    b[268..270].copy_from_slice(&353u16.to_le_bytes()); // cctemp
    b[270..272].copy_from_slice(&7u16.to_le_bytes()); // mtfa
    b[272..276].copy_from_slice(&0x10u32.to_le_bytes()); // hmpre
    b[276..280].copy_from_slice(&0x20u32.to_le_bytes()); // hmmin
    b[280..296].copy_from_slice(&(3u128 << 40).to_le_bytes()); // tnvmcap
    b[296..312].copy_from_slice(&(1u128 << 40).to_le_bytes()); // unvmcap
    b[312..316].copy_from_slice(&0x0102_0304u32.to_le_bytes()); // rpmbs
    b[316..318].copy_from_slice(&11u16.to_le_bytes()); // edstt
    b[318] = 1; // dsto
    b[319] = 2; // fwug
    b[320..322].copy_from_slice(&1u16.to_le_bytes()); // kas: 100 ms
    b[322..324].copy_from_slice(&1u16.to_le_bytes()); // hctma
    b[324..326].copy_from_slice(&273u16.to_le_bytes()); // mntmt
    b[326..328].copy_from_slice(&373u16.to_le_bytes()); // mxtmt
    b[328..332].copy_from_slice(&0x6000_0007u32.to_le_bytes()); // sanicap
    b[332..336].copy_from_slice(&4u32.to_le_bytes()); // hmminds
    b[336..338].copy_from_slice(&5u16.to_le_bytes()); // hmmaxd
    b[338..340].copy_from_slice(&6u16.to_le_bytes()); // nsetidmax
    b[340..342].copy_from_slice(&7u16.to_le_bytes()); // endgidmax
    b[342] = 10; // anatt
    b[343] = 0x47; // anacap
    b[344..348].copy_from_slice(&32u32.to_le_bytes()); // anagrpmax
    b[348..352].copy_from_slice(&1u32.to_le_bytes()); // nanagrpid
    b[352..356].copy_from_slice(&9u32.to_le_bytes()); // pels
    b[356..358].copy_from_slice(&0x0A0Bu16.to_le_bytes()); // domainid
    b[368..384].copy_from_slice(&(5u128 << 60).to_le_bytes()); // megcap
    b[512] = 0x66; // sqes
    b[513] = 0x44; // cqes
    b[514..516].copy_from_slice(&128u16.to_le_bytes()); // maxcmd
    b[516..520].copy_from_slice(&1024u32.to_le_bytes()); // nn
    b[520..522].copy_from_slice(&0x004Du16.to_le_bytes()); // oncs
    b[522..524].copy_from_slice(&0x0001u16.to_le_bytes()); // fuses
    b[524] = 0x04; // fna
    b[525] = 0x07; // vwc
    b[526..528].copy_from_slice(&15u16.to_le_bytes()); // awun
    b[528..530].copy_from_slice(&0u16.to_le_bytes()); // awupf
    b[530] = 1; // nvscc
    b[531] = 0; // nwpc
    b[532..534].copy_from_slice(&1u16.to_le_bytes()); // acwu
    b[534..536].copy_from_slice(&0x0001u16.to_le_bytes()); // ocfs
    b[536..540].copy_from_slice(&0x0010_0005u32.to_le_bytes()); // sgls: supported, keyed, offset
    b[540..544].copy_from_slice(&1024u32.to_le_bytes()); // mnan
    b[544..560].copy_from_slice(&77u128.to_le_bytes()); // maxdna
    b[560..564].copy_from_slice(&88u32.to_le_bytes()); // maxcna
    b[768..768 + NQN.len()].copy_from_slice(NQN.as_bytes()); // subnqn, NUL padded
    b[1792..1796].copy_from_slice(&516u32.to_le_bytes()); // ioccsz: 64 + 8192 bytes
    b[1796..1800].copy_from_slice(&1u32.to_le_bytes()); // iorcsz
    b[1800..1802].copy_from_slice(&0u16.to_le_bytes()); // icdoff
    b[1802] = 0x01; // fcatt
    b[1803] = 1; // msdbd
    b[1804..1806].copy_from_slice(&0x0001u16.to_le_bytes()); // ofcs
    b[1806] = 0; // dctype
    b[2048..2050].copy_from_slice(&2500u16.to_le_bytes()); // psd0 max power 25 W
    b[2052..2056].copy_from_slice(&5u32.to_le_bytes()); // psd0 entry latency
    b[2056..2060].copy_from_slice(&6u32.to_le_bytes()); // psd0 exit latency
    b[3072] = 0xAB; // vendor specific
    b[4095] = 0xCD;
    b
}

fn expected() -> IdentifyController {
    let mut psd = [PowerStateDescriptor::default(); 32];
    psd[0] = PowerStateDescriptor::new(2500, 5, 6);
    let mut vs = [0u8; 1024];
    vs[0] = 0xAB;
    vs[1023] = 0xCD;
    IdentifyController {
        vid: 0x1B96,
        ssvid: 0x1B97,
        sn: "RL0001".into(),
        mn: "Raidline RAID5".into(),
        fr: "0.1.0".into(),
        rab: 6,
        ieee: [0x11, 0x22, 0x33],
        cmic: cmic::MULTI_PORT | cmic::MULTI_CONTROLLER | cmic::ANA,
        mdts: 8,
        cntlid: 5,
        ver: 0x0002_0000,
        rtd3r: 1000,
        rtd3e: 2000,
        oaes: 0x8000_0900,
        ctratt: ctratt::HOST_ID_128 | ctratt::TRAFFIC_BASED_KEEP_ALIVE,
        rrls: 3,
        cntrltype: ControllerType::IO,
        fguid: [0xF0; 16],
        crdt: [1, 2, 3],
        nvmsr: 1,
        vwci: 2,
        mec: 3,
        oacs: oacs::NS_MANAGEMENT,
        acl: 3,
        aerl: 3,
        frmw: 3,
        lpa: lpa::COMMAND_EFFECTS | lpa::EXTENDED_DATA,
        elpe: 127,
        npss: 0,
        avscc: 1,
        apsta: 0,
        wctemp: 343,
        cctemp: 353,
        mtfa: 7,
        hmpre: 0x10,
        hmmin: 0x20,
        tnvmcap: 3 << 40,
        unvmcap: 1 << 40,
        rpmbs: 0x0102_0304,
        edstt: 11,
        dsto: 1,
        fwug: 2,
        kas: 1,
        hctma: 1,
        mntmt: 273,
        mxtmt: 373,
        sanicap: 0x6000_0007,
        hmminds: 4,
        hmmaxd: 5,
        nsetidmax: 6,
        endgidmax: 7,
        anatt: 10,
        anacap: 0x47,
        anagrpmax: 32,
        nanagrpid: 1,
        pels: 9,
        domainid: 0x0A0B,
        megcap: 5 << 60,
        sqes: 0x66,
        cqes: 0x44,
        maxcmd: 128,
        nn: 1024,
        oncs: oncs::COMPARE | oncs::DATASET_MANAGEMENT | oncs::WRITE_ZEROES | oncs::TIMESTAMP,
        fuses: 1,
        fna: 4,
        vwc: vwc::PRESENT | vwc::FLUSH_ALL_SUPPORTED,
        awun: 15,
        awupf: 0,
        nvscc: 1,
        nwpc: 0,
        acwu: 1,
        ocfs: 1,
        sgls: sgls::SUPPORTED | sgls::KEYED | sgls::OFFSET,
        mnan: 1024,
        maxdna: 77,
        maxcna: 88,
        subnqn: Some(Nqn::new(NQN).unwrap()),
        ioccsz: 516,
        iorcsz: 1,
        icdoff: 0,
        fcatt: 1,
        msdbd: 1,
        ofcs: 1,
        dctype: 0,
        psd,
        vs: Opaque(vs),
    }
}

#[test]
fn parses_hand_built_layout() {
    let id = IdentifyController::parse(&hand_built()).unwrap();
    assert_eq!(id, expected());
    assert_eq!(id.psd[0].max_power(), 2500);
    assert_eq!(id.psd[0].entry_latency_us(), 5);
    assert_eq!(id.psd[0].exit_latency_us(), 6);
    assert_eq!(id.max_transfer_bytes(4096), Some(1 << 20));
}

#[test]
fn emits_hand_built_layout() {
    let b = expected().to_bytes().unwrap();
    let want = hand_built();
    for (i, (got, want)) in b.iter().zip(want.iter()).enumerate() {
        assert_eq!(got, want, "byte {i}");
    }
    // Spot checks of the fields the Linux host enforces, at their absolute offsets.
    assert_eq!(&b[78..80], &5u16.to_le_bytes());
    assert_eq!(&b[536..540], &0x0010_0005u32.to_le_bytes());
    assert_eq!(&b[768..768 + NQN.len()], NQN.as_bytes());
    assert_eq!(b[768 + NQN.len()], 0);
    assert_eq!(&b[1792..1796], &516u32.to_le_bytes());
    assert_eq!(&b[1796..1800], &1u32.to_le_bytes());
}

#[test]
fn reserved_bytes_are_ignored_and_zeroed() {
    let mut b = hand_built();
    b[105] = 0xEE; // reserved 110:102
    b[1900] = 0xEE; // reserved 2047:1807
    let id = IdentifyController::parse(&b).unwrap();
    assert_eq!(id, expected());
    assert_eq!(id.to_bytes().unwrap(), hand_built());
}

#[test]
fn rejects_lengths_and_bad_text() {
    let b = hand_built();
    assert!(matches!(
        IdentifyController::parse(&b[..4095]),
        Err(ParseError::Truncated { need: 4096, .. })
    ));
    let mut long = b.clone();
    long.push(0);
    assert!(matches!(
        IdentifyController::parse(&long),
        Err(ParseError::TrailingBytes { .. })
    ));
    let mut bad = b.clone();
    bad[30] = 0xC3; // non-ASCII in the model number
    assert_eq!(
        IdentifyController::parse(&bad).unwrap_err().offset(),
        Some(24)
    );
    let mut nul = b.clone();
    nul[5] = 0; // NUL inside the serial number "R\0001"
    assert_eq!(
        IdentifyController::parse(&nul).unwrap_err().offset(),
        Some(4)
    );
    let mut nqn = b.clone();
    nqn[1023] = b'x'; // not NUL terminated / bytes after the NUL
    assert_eq!(
        IdentifyController::parse(&nqn).unwrap_err().offset(),
        Some(768)
    );
    let mut empty = b;
    empty[768..1024].fill(0);
    assert_eq!(IdentifyController::parse(&empty).unwrap().subnqn, None);
}

#[test]
fn emit_refuses_text_that_would_not_read_back() {
    let mut id = expected();
    id.sn = "X".repeat(21);
    assert!(matches!(
        id.to_bytes(),
        Err(ParseError::InvalidText { offset: 4, .. })
    ));
    id.sn = "é".into();
    assert!(id.to_bytes().is_err());
    id.sn = "trailing ".into();
    assert!(id.to_bytes().is_err());
    let mut short = [0u8; 100];
    assert!(expected().emit(&mut short).is_err());
}

/// A random buffer made canonical: reserved bytes zero, text fields valid.
fn canonical(mut b: Vec<u8>) -> Vec<u8> {
    testutil::zero(&mut b, field::RESERVED);
    testutil::ascii(&mut b, field::SN);
    testutil::ascii(&mut b, field::MN);
    testutil::ascii(&mut b, field::FR);
    testutil::nqn(&mut b, field::SUBNQN);
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn canonical_buffers_round_trip_byte_for_byte(
        b in proptest::collection::vec(any::<u8>(), 4096)
    ) {
        let b = canonical(b);
        let id = IdentifyController::parse(&b).unwrap();
        let out = id.to_bytes().unwrap();
        prop_assert_eq!(&out, &b);
        prop_assert_eq!(IdentifyController::parse(&out).unwrap(), id);
    }

    #[test]
    fn any_bytes_parse_without_panic(b in proptest::collection::vec(any::<u8>(), 4090..4100)) {
        if let Ok(id) = IdentifyController::parse(&b) {
            prop_assert_eq!(IdentifyController::parse(&id.to_bytes().unwrap()).unwrap(), id);
        }
    }
}
