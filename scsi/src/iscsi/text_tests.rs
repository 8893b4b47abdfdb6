//! Tests of `key=value` text parsing, emitting and continuation.

use super::*;
use crate::iscsi::error::RejectReason;
use crate::iscsi::pdu::LoginStatus;
use proptest::prelude::*;

#[test]
fn parses_open_iscsi_first_login_text() {
    let data = b"InitiatorName=iqn.2004-10.com.ubuntu:01:abc\0InitiatorAlias=host1\0\
TargetName=iqn.2024-01.org.raidline:disk0\0SessionType=Normal\0AuthMethod=None\0";
    let pairs = parse_text(data, DEFAULT_MAX_VALUE_LEN).unwrap();
    assert_eq!(pairs.len(), 5);
    assert_eq!(
        pairs[0],
        KeyValue::new("InitiatorName", "iqn.2004-10.com.ubuntu:01:abc")
    );
    assert_eq!(get(&pairs, "AuthMethod"), Some("None"));
    assert_eq!(get(&pairs, "Nope"), None);
    assert_eq!(emit_text(&pairs), data.to_vec());
}

#[test]
fn empty_values_and_entries() {
    let pairs = parse_text(b"SendTargets=\0", 255).unwrap();
    assert_eq!(pairs, vec![KeyValue::new("SendTargets", "")]);
    // Extra NULs (padding inside the data segment) are skipped.
    let pairs = parse_text(b"A=1\0\0\0B=2\0\0", 255).unwrap();
    assert_eq!(pairs.len(), 2);
    assert!(parse_text(b"", 255).unwrap().is_empty());
    // A value may hold '=' and any UTF-8.
    let pairs = parse_text("X-a=b=c é\0".as_bytes(), 255).unwrap();
    assert_eq!(pairs[0].value, "b=c é");
}

#[test]
fn syntax_errors() {
    assert_eq!(
        parse_text(b"A=1\0Bad\0", 255),
        Err(TextError::MissingEquals { offset: 4 })
    );
    assert_eq!(
        parse_text(b"=x\0", 255),
        Err(TextError::EmptyKey { offset: 0 })
    );
    let long = format!("K{}=1\0", "a".repeat(63));
    assert_eq!(
        parse_text(long.as_bytes(), 255),
        Err(TextError::KeyTooLong { offset: 0, len: 64 })
    );
    let ok = format!("K{}=1\0", "a".repeat(62));
    assert!(parse_text(ok.as_bytes(), 255).is_ok());
    assert_eq!(
        parse_text(b"Ke y=1\0", 255),
        Err(TextError::InvalidKeyChar {
            offset: 2,
            byte: b' '
        })
    );
    assert_eq!(
        parse_text(b"lower=1\0", 255),
        Err(TextError::InvalidKeyChar {
            offset: 0,
            byte: b'l'
        })
    );
    assert!(parse_text(b"X#com.example.k=1\0", 255).is_ok());
    assert_eq!(
        parse_text(b"A=\xff\0", 255),
        Err(TextError::NotUtf8 { offset: 2 })
    );
    assert_eq!(
        parse_text(b"A=1\0A=2\0", 255),
        Err(TextError::DuplicateKey { key: "A".into() })
    );
    assert_eq!(
        parse_text(b"A=1\0B=2", 255),
        Err(TextError::Unterminated { offset: 4 })
    );
    let v = format!("A={}\0", "v".repeat(256));
    assert_eq!(
        parse_text(v.as_bytes(), MAX_SHORT_VALUE_LEN),
        Err(TextError::ValueTooLong {
            key: "A".into(),
            len: 256,
            max: 255
        })
    );
    assert!(parse_text(v.as_bytes(), DEFAULT_MAX_VALUE_LEN).is_ok());
    let e = TextError::EmptyKey { offset: 0 };
    assert_eq!(e.login_status(), LoginStatus::INITIATOR_ERROR);
    assert_eq!(e.reject_reason(), RejectReason::PROTOCOL_ERROR);
}

#[test]
fn assembler_joins_continued_pdus() {
    let mut a = TextAssembler::default();
    // A pair split in the middle of its key.
    assert_eq!(a.push(b"InitiatorName=iqn.x\0Targ", true), Ok(None));
    assert!(a.is_pending());
    let full = a.push(b"etName=iqn.y\0", false).unwrap().unwrap();
    assert!(!a.is_pending());
    let pairs = parse_text(&full, 255).unwrap();
    assert_eq!(get(&pairs, "TargetName"), Some("iqn.y"));
    // The assembler is empty again.
    assert_eq!(a.push(b"A=1\0", false), Ok(Some(b"A=1\0".to_vec())));
}

#[test]
fn assembler_limit() {
    let mut a = TextAssembler::new(8);
    assert_eq!(a.push(b"A=1234\0", true), Ok(None));
    assert_eq!(
        a.push(b"B=1\0", false),
        Err(TextError::TooLong { len: 11, max: 8 })
    );
    assert!(!a.is_pending());
    assert_eq!(a.push(b"B=1\0", false), Ok(Some(b"B=1\0".to_vec())));
}

fn key() -> impl Strategy<Value = String> {
    "[A-Z][A-Za-z0-9.+@_-]{0,62}"
}

proptest! {
    #[test]
    fn pairs_round_trip(pairs in proptest::collection::btree_map(key(), "[^\u{0}]{0,40}", 0..12)) {
        let pairs: Vec<KeyValue> = pairs.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
        let text = emit_text(&pairs);
        prop_assert_eq!(parse_text(&text, DEFAULT_MAX_VALUE_LEN).unwrap(), pairs);
    }

    #[test]
    fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..300),
                             cuts in proptest::collection::vec(any::<usize>(), 0..4)) {
        if let Ok(pairs) = parse_text(&raw, 64) {
            // Canonical form re-parses equal.
            prop_assert_eq!(parse_text(&emit_text(&pairs), 64).unwrap(), pairs);
        }
        // Any split into continued PDUs assembles back to the whole.
        let mut a = TextAssembler::new(1 << 20);
        let mut at = 0;
        for c in cuts {
            let end = at + c % (raw.len() - at + 1);
            prop_assert_eq!(a.push(&raw[at..end], true), Ok(None));
            at = end;
        }
        prop_assert_eq!(a.push(&raw[at..], false), Ok(Some(raw.clone())));
    }
}
