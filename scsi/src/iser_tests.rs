//! Byte-exact tests of the iSER header and CM private data against RFC 7145 §9 and Linux
//! `include/scsi/iser.h`.

use super::*;
use crate::iscsi::pdu::{LoginRequest, ScsiCommand};
use proptest::prelude::*;

#[test]
fn header_of_a_write_command() {
    // ib_iser's header of a WRITE: ISCSI_CTRL | ISER_WSV, write stag/va.
    #[rustfmt::skip]
    let raw = [
        0x18, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x23, 0x45,
        0xff, 0xff, 0x88, 0x80, 0x12, 0x34, 0x50, 0x00,
        0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    let want = IserHeader {
        write: Some(RemoteBuffer {
            stag: 0x12345,
            va: 0xffff_8880_1234_5000,
        }),
        read: None,
    };
    assert_eq!(IserHeader::parse(&raw).unwrap(), want);
    assert_eq!(want.to_bytes(), raw);
}

#[test]
fn header_of_a_read_command_and_control_pdu() {
    #[rustfmt::skip]
    let raw = [
        0x14, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xab, 0xcd, 0xef, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
    ];
    let want = IserHeader {
        write: None,
        read: Some(RemoteBuffer {
            stag: 0xabcd_ef01,
            va: 0x10_0000,
        }),
    };
    assert_eq!(IserHeader::parse(&raw).unwrap(), want);
    assert_eq!(want.to_bytes(), raw);
    // A plain control PDU (login, NOP, response): 0x10 and zeroes.
    let plain = IserHeader::default().to_bytes();
    assert_eq!(plain[0], 0x10);
    assert!(plain[1..].iter().all(|&b| b == 0));
}

#[test]
fn header_errors() {
    let mut raw = IserHeader::default().to_bytes();
    raw[0] = 0x20;
    assert_eq!(
        IserHeader::parse(&raw),
        Err(IserError::UnsupportedOpcode(IserOpcode::HELLO))
    );
    raw[0] = 0x30;
    assert_eq!(
        IserHeader::parse(&raw),
        Err(IserError::UnsupportedOpcode(IserOpcode::HELLO_REPLY))
    );
    raw[0] = 0x00;
    assert!(IserHeader::parse(&raw).is_err());
    assert!(matches!(
        IserHeader::parse(&raw[..27]),
        Err(IserError::Truncated {
            need: 28,
            got: 27,
            ..
        })
    ));
    assert!(matches!(
        IserHeader::parse(&[0x10; 29]),
        Err(IserError::TrailingBytes { .. })
    ));
    // Stale STags without their valid bit are ignored; reserved bits too.
    let mut stale = [0u8; 28];
    stale[0] = 0x13;
    stale[4..8].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(IserHeader::parse(&stale).unwrap(), IserHeader::default());
}

#[test]
fn cm_private_data() {
    // Linux ib_iser without remote invalidation sends ZBVA_NOT_SUP | SEND_W_INV_NOT_SUP.
    let p = CmPrivateData::parse(&[0xc0, 0, 0, 0]);
    assert!(p.zbva_not_supported());
    assert!(p.send_with_invalidate_not_supported());
    // CM pads private data to 56 bytes or more.
    let mut padded = vec![0u8; 56];
    padded[0] = 0x80;
    let p = CmPrivateData::parse(&padded);
    assert!(p.zbva_not_supported());
    assert!(!p.send_with_invalidate_not_supported());
    // Empty: no flags.
    assert_eq!(CmPrivateData::parse(&[]), CmPrivateData { flags: 0 });
    assert_eq!(CmPrivateData::target_answer().to_bytes(), [0xc0, 0, 0, 0]);
}

#[test]
fn split_a_login_send() {
    let text = b"InitiatorName=iqn.x\0";
    let req = LoginRequest {
        data_segment_len: text.len() as u32,
        ..Default::default()
    };
    let send = build_send(&IserHeader::default(), &req.to_bytes(), &[], text);
    assert_eq!(send.len(), 28 + 48 + text.len());
    let p = split_send(&send, 8192).unwrap();
    assert_eq!(p.header, IserHeader::default());
    assert_eq!(LoginRequest::parse(p.bhs.as_bytes()).unwrap(), req);
    assert_eq!(p.data, text);
    assert!(p.ahs.is_empty());

    // Errors, precisely.
    assert!(matches!(
        split_send(&send[..20], 8192),
        Err(IserError::Truncated { .. })
    ));
    assert!(matches!(
        split_send(&send[..28 + 40], 8192),
        Err(IserError::Pdu(PduError::Truncated {
            need: 48,
            got: 40,
            ..
        }))
    ));
    assert!(matches!(
        split_send(&send[..send.len() - 1], 8192),
        Err(IserError::Pdu(PduError::Truncated { .. }))
    ));
    assert!(matches!(
        split_send(&send, 8),
        Err(IserError::Pdu(PduError::DataSegmentTooLong { .. }))
    ));
    let mut long = send.clone();
    long.extend_from_slice(&[0; 4]);
    assert!(matches!(
        split_send(&long, 8192),
        Err(IserError::Pdu(PduError::TrailingBytes { .. }))
    ));
    let mut hello = send;
    hello[0] = 0x20;
    assert!(matches!(
        split_send(&hello, 8192),
        Err(IserError::UnsupportedOpcode(_))
    ));
}

#[test]
fn split_a_command_with_ahs() {
    let ahs = [0x00, 0x05, 0x02, 0x00, 0x00, 0x00, 0x10, 0x00];
    let cmd = ScsiCommand {
        total_ahs_words: 2,
        ..Default::default()
    };
    let hdr = IserHeader {
        write: None,
        read: Some(RemoteBuffer { stag: 1, va: 2 }),
    };
    let send = build_send(&hdr, &cmd.to_bytes(), &ahs, &[]);
    let p = split_send(&send, 0).unwrap();
    assert_eq!(p.header, hdr);
    assert_eq!(p.ahs, &ahs);
}

proptest! {
    #[test]
    fn header_round_trips(w in proptest::option::of((any::<u32>(), any::<u64>())),
                          r in proptest::option::of((any::<u32>(), any::<u64>()))) {
        let h = IserHeader {
            write: w.map(|(stag, va)| RemoteBuffer { stag, va }),
            read: r.map(|(stag, va)| RemoteBuffer { stag, va }),
        };
        prop_assert_eq!(IserHeader::parse(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..160), max in any::<u32>()) {
        if let Ok(h) = IserHeader::parse(&raw) {
            // Canonical: what parses re-emits to bytes that parse equal.
            prop_assert_eq!(IserHeader::parse(&h.to_bytes()).unwrap(), h);
        }
        let p = CmPrivateData::parse(&raw);
        prop_assert_eq!(CmPrivateData::parse(&p.to_bytes()), p);
        if let Ok(s) = split_send(&raw, max) {
            prop_assert_eq!(s.data.len() as u32, s.bhs.data_segment_len());
        }
    }
}
