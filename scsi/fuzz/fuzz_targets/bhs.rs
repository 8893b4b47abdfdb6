//! iSCSI BHS and PDU framing: any bytes parse or fail, never panic; whatever parses re-emits
//! to a BHS that parses equal (and re-emits identically).
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_scsi::iscsi::bhs::{parse_ahs, split_pdu, Bhs, CommandAhs};
use raidline_scsi::iscsi::pdu::{parse_scsi_response_data, Pdu};

fuzz_target!(|data: &[u8]| {
    if let Some(head) = data.get(..48) {
        let bhs = Bhs::parse(head).unwrap();
        let _ = bhs.pdu_len();
        if let Ok(p) = Pdu::parse(head) {
            let b = p.to_bytes();
            let q = Pdu::parse(&b).unwrap();
            assert_eq!(q, p);
            assert_eq!(q.to_bytes(), b);
            assert_eq!(Bhs::parse(&b).unwrap().opcode(), bhs.opcode());
        }
    }
    let _ = Pdu::parse(data);
    if let Ok(parts) = split_pdu(data, 1 << 24) {
        assert_eq!(parts.data.len() as u32, parts.bhs.data_segment_len());
        if let Ok(a) = CommandAhs::parse(parts.ahs) {
            assert_eq!(CommandAhs::parse(&a.to_bytes()).unwrap(), a);
        }
    }
    let _ = parse_ahs(data);
    let _ = parse_scsi_response_data(data);
});
