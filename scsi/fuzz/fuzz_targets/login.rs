//! Login text and the login state machine: text parses or fails and what parses re-emits to
//! text that parses equal; a `Login` driven by arbitrary PDUs cut from the input never
//! panics and always answers with a well-formed Login Response.
#![no_main]
use std::num::NonZeroU16;

use libfuzzer_sys::fuzz_target;
use raidline_scsi::iscsi::bhs::Bhs;
use raidline_scsi::iscsi::login::{Login, LoginOutcome};
use raidline_scsi::iscsi::negotiate::{LoginConfig, TargetConfig};
use raidline_scsi::iscsi::pdu::LoginResponse;
use raidline_scsi::iscsi::text::{emit_text, parse_text, TextAssembler};

fuzz_target!(|data: &[u8]| {
    if let Ok(pairs) = parse_text(data, 8192) {
        assert_eq!(parse_text(&emit_text(&pairs), 8192).unwrap(), pairs);
    }
    let mut asm = TextAssembler::new(4096);
    for chunk in data.chunks(7) {
        let _ = asm.push(chunk, chunk.len() == 7);
    }

    // Input: [config byte] then PDUs, each [48-byte BHS][1-byte data length][data].
    let Some((&cfg, mut rest)) = data.split_first() else {
        return;
    };
    let config = LoginConfig::new(
        vec![TargetConfig::new("iqn.2024-01.org.raidline:t")],
        cfg & 1 != 0,
    );
    let mut login = Login::new(config, NonZeroU16::MIN, [7; 17]);
    while rest.len() >= 49 {
        let (head, tail) = rest.split_at(48);
        let len = usize::from(tail[0]).min(tail.len() - 1);
        let (body, next) = tail[1..].split_at(len);
        let mut bhs = Bhs::parse(head).unwrap();
        if cfg & 2 != 0 {
            // Make Login Requests likely.
            bhs.as_bytes_mut()[0] = 0x43;
        }
        let step = login.on_pdu(&bhs, body);
        assert_eq!(step.response.data_segment_len as usize, step.data.len());
        assert!(LoginResponse::parse(&step.response.to_bytes()).is_ok());
        let _ = parse_text(&step.data, 8192).unwrap();
        if step.outcome == LoginOutcome::Close {
            assert!(!step.response.status.is_success());
        }
        rest = next;
    }
});
