//! Byte-exact tests of every PDU against the layouts of RFC 7143 §11 and Linux
//! `include/scsi/iscsi_proto.h`, and property tests of parse/emit.

use super::*;
use crate::iscsi::bhs::{
    decode_lun, encode_lun, pad4, parse_ahs, pdu_len, split_pdu, AhsType, CommandAhs,
};
use proptest::prelude::*;

/// Checks both directions: `raw` parses to `want` (via the typed parser and via [`Pdu`]),
/// and `want` emits exactly `raw`.
fn both_ways(raw: [u8; 48], want: Pdu) {
    assert_eq!(Pdu::parse(&raw).unwrap(), want);
    assert_eq!(want.to_bytes(), raw, "emit of {want:?}");
}

#[test]
fn login_request_open_iscsi_first() {
    // open-iscsi's first Login Request: I, T, CSG=0 NSG=1, version 0-0, ISID 0x023d00000001
    // (random qualifier form), TSIH 0, ITT 0, CID 0, CmdSN 1, 0x4b bytes of text.
    #[rustfmt::skip]
    let raw = [
        0x43, 0x81, 0x00, 0x00,  0x00, 0x00, 0x00, 0x4b,
        0x02, 0x3d, 0x00, 0x00,  0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = LoginRequest {
        transit: true,
        cont: false,
        csg: LoginStage::Security,
        nsg: LoginStage::Operational,
        version_max: 0,
        version_min: 0,
        data_segment_len: 0x4b,
        isid: [0x02, 0x3d, 0, 0, 0, 1],
        tsih: 0,
        itt: 0,
        cid: 0,
        cmd_sn: 1,
        exp_stat_sn: 0,
    };
    assert_eq!(LoginRequest::parse(&raw).unwrap(), want);
    both_ways(raw, Pdu::LoginRequest(want));
}

#[test]
fn login_request_rejects_stage_2_and_t_with_c() {
    let mut raw = LoginRequest::default().to_bytes();
    raw[1] = 0x08; // CSG = 2
    assert!(matches!(
        LoginRequest::parse(&raw),
        Err(PduError::InvalidField {
            field: "CSG/NSG",
            offset: 1,
            value: 0x08,
            ..
        })
    ));
    raw[1] = 0x82; // T, NSG = 2
    assert_eq!(
        LoginRequest::parse(&raw).unwrap_err().reject_reason(),
        RejectReason::INVALID_PDU_FIELD
    );
    raw[1] = 0xc1; // T and C
    let e = LoginRequest::parse(&raw).unwrap_err();
    assert!(matches!(e, PduError::ProtocolError { .. }));
    assert_eq!(e.reject_reason(), RejectReason::PROTOCOL_ERROR);
}

#[test]
fn login_response_final() {
    #[rustfmt::skip]
    let raw = [
        0x23, 0x87, 0x00, 0x00,  0x00, 0x00, 0x01, 0x00,
        0x02, 0x3d, 0x00, 0x00,  0x00, 0x01, 0x00, 0x05,
        0x00, 0x00, 0x00, 0x07,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x10,  0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x40,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = LoginResponse {
        transit: true,
        cont: false,
        csg: LoginStage::Operational,
        nsg: LoginStage::FullFeature,
        version_max: 0,
        version_active: 0,
        data_segment_len: 256,
        isid: [0x02, 0x3d, 0, 0, 0, 1],
        tsih: 5,
        itt: 7,
        stat_sn: 0x10,
        exp_cmd_sn: 1,
        max_cmd_sn: 0x40,
        status: LoginStatus::SUCCESS,
    };
    both_ways(raw, Pdu::LoginResponse(want));
}

#[test]
fn login_response_failure_status_bytes() {
    let r = LoginResponse {
        status: LoginStatus::NOT_FOUND,
        ..Default::default()
    };
    let b = r.to_bytes();
    assert_eq!((b[36], b[37]), (0x02, 0x03));
    assert_eq!(r.status.class(), 2);
    assert_eq!(r.status.detail(), 3);
    assert!(!r.status.is_success());
    assert_eq!(
        format!("{:?}", LoginStatus(0x0203)),
        "LoginStatus::NOT_FOUND(0x203)"
    );
}

#[test]
fn scsi_command_read10() {
    // READ(10) of 8 blocks at LBA 0x1234 on LUN 1, simple attribute, 4096 bytes expected.
    #[rustfmt::skip]
    let raw = [
        0x01, 0xc1, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2a,  0x00, 0x00, 0x10, 0x00,
        0x00, 0x00, 0x00, 0x05,  0x00, 0x00, 0x00, 0x03,
        0x28, 0x00, 0x00, 0x00,  0x12, 0x34, 0x00, 0x00,
        0x08, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
    ];
    let mut cdb = [0u8; 16];
    cdb[..10].copy_from_slice(&[0x28, 0, 0, 0, 0x12, 0x34, 0, 0, 0x08, 0]);
    let want = ScsiCommand {
        immediate: false,
        final_pdu: true,
        read: true,
        write: false,
        attr: TaskAttr::SIMPLE,
        total_ahs_words: 0,
        data_segment_len: 0,
        lun: 0x0001_0000_0000_0000,
        itt: 0x2a,
        expected_data_len: 4096,
        cmd_sn: 5,
        exp_stat_sn: 3,
        cdb,
    };
    both_ways(raw, Pdu::ScsiCommand(want));
    assert_eq!(decode_lun(want.lun), Some(1));
}

#[test]
fn scsi_command_write_with_immediate_data_and_ahs() {
    let cmd = ScsiCommand {
        immediate: true,
        final_pdu: false,
        write: true,
        attr: TaskAttr::ORDERED,
        total_ahs_words: 5,
        data_segment_len: 0x1000,
        ..Default::default()
    };
    let b = cmd.to_bytes();
    assert_eq!(&b[..8], &[0x41, 0x22, 0, 0, 5, 0x00, 0x10, 0x00]);
    // Reserved bits 4-3 of byte 1 are tolerated and dropped.
    let mut r = b;
    r[1] |= 0x18;
    assert_eq!(ScsiCommand::parse(&r).unwrap(), cmd);
}

#[test]
fn task_mgmt_request_abort_task() {
    #[rustfmt::skip]
    let raw = [
        0x42, 0x81, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x30,  0x00, 0x00, 0x00, 0x2a,
        0x00, 0x00, 0x00, 0x09,  0x00, 0x00, 0x00, 0x04,
        0x00, 0x00, 0x00, 0x05,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = TaskMgmtRequest {
        immediate: true,
        function: TmFunction::ABORT_TASK,
        lun: 0,
        itt: 0x30,
        referenced_task_tag: 0x2a,
        cmd_sn: 9,
        exp_stat_sn: 4,
        ref_cmd_sn: 5,
        exp_data_sn: 0,
    };
    both_ways(raw, Pdu::TaskMgmtRequest(want));
}

#[test]
fn task_mgmt_response() {
    #[rustfmt::skip]
    let raw = [
        0x22, 0x80, 0x05, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x30,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x04,  0x00, 0x00, 0x00, 0x0a,
        0x00, 0x00, 0x00, 0x49,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = TaskMgmtResponse {
        response: TmResponse::FUNCTION_NOT_SUPPORTED,
        itt: 0x30,
        stat_sn: 4,
        exp_cmd_sn: 10,
        max_cmd_sn: 0x49,
    };
    both_ways(raw, Pdu::TaskMgmtResponse(want));
}

#[test]
fn text_request_and_response() {
    #[rustfmt::skip]
    let raw = [
        0x04, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x10,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01,  0xff, 0xff, 0xff, 0xff,
        0x00, 0x00, 0x00, 0x02,  0x00, 0x00, 0x00, 0x02,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let req = TextRequest {
        immediate: false,
        final_pdu: true,
        cont: false,
        data_segment_len: 16,
        lun: 0,
        itt: 1,
        ttt: 0xffff_ffff,
        cmd_sn: 2,
        exp_stat_sn: 2,
    };
    both_ways(raw, Pdu::TextRequest(req));

    #[rustfmt::skip]
    let raw = [
        0x24, 0x40, 0x00, 0x00,  0x00, 0x00, 0x20, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01,  0x00, 0x00, 0x00, 0x07,
        0x00, 0x00, 0x00, 0x02,  0x00, 0x00, 0x00, 0x03,
        0x00, 0x00, 0x00, 0x42,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let rsp = TextResponse {
        final_pdu: false,
        cont: true,
        data_segment_len: 0x2000,
        lun: 0,
        itt: 1,
        ttt: 7,
        stat_sn: 2,
        exp_cmd_sn: 3,
        max_cmd_sn: 0x42,
    };
    both_ways(raw, Pdu::TextResponse(rsp));

    let mut bad = req.to_bytes();
    bad[1] = 0xc0;
    assert!(matches!(
        TextRequest::parse(&bad),
        Err(PduError::ProtocolError { .. })
    ));
}

#[test]
fn data_out() {
    #[rustfmt::skip]
    let raw = [
        0x05, 0x80, 0x00, 0x00,  0x00, 0x00, 0x20, 0x00,
        0x00, 0x01, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2b,  0x00, 0x00, 0x00, 0x11,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x06,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x03,
        0x00, 0x00, 0x60, 0x00,  0x00, 0x00, 0x00, 0x00,
    ];
    let want = DataOut {
        final_pdu: true,
        data_segment_len: 0x2000,
        lun: 0x0001_0000_0000_0000,
        itt: 0x2b,
        ttt: 0x11,
        exp_stat_sn: 6,
        data_sn: 3,
        buffer_offset: 0x6000,
    };
    both_ways(raw, Pdu::DataOut(want));
}

#[test]
fn data_in_with_status() {
    #[rustfmt::skip]
    let raw = [
        0x25, 0x83, 0x00, 0x00,  0x00, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2a,  0xff, 0xff, 0xff, 0xff,
        0x00, 0x00, 0x00, 0x08,  0x00, 0x00, 0x00, 0x06,
        0x00, 0x00, 0x00, 0x45,  0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x02, 0x00,  0x00, 0x00, 0x0e, 0x00,
    ];
    let want = DataIn {
        final_pdu: true,
        ack: false,
        overflow: false,
        underflow: true,
        status_present: true,
        status: Status::GOOD,
        data_segment_len: 512,
        lun: 0,
        itt: 0x2a,
        ttt: 0xffff_ffff,
        stat_sn: 8,
        exp_cmd_sn: 6,
        max_cmd_sn: 0x45,
        data_sn: 1,
        buffer_offset: 512,
        residual_count: 0xe00,
    };
    both_ways(raw, Pdu::DataIn(want));
}

#[test]
fn scsi_response_check_condition() {
    #[rustfmt::skip]
    let raw = [
        0x21, 0x80, 0x00, 0x02,  0x00, 0x00, 0x00, 0x14,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2a,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x09,  0x00, 0x00, 0x00, 0x06,
        0x00, 0x00, 0x00, 0x45,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
    ];
    let want = ScsiResponse {
        response: ScsiResponseCode::COMMAND_COMPLETED,
        status: Status::CHECK_CONDITION,
        data_segment_len: 20,
        itt: 0x2a,
        stat_sn: 9,
        exp_cmd_sn: 6,
        max_cmd_sn: 0x45,
        ..Default::default()
    };
    both_ways(raw, Pdu::ScsiResponse(want));

    let sense = [
        0x70, 0, 0x05, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x24, 0, 0, 0, 0, 0,
    ];
    let data = scsi_response_data(&sense);
    assert_eq!(&data[..2], &[0x00, 18]);
    assert_eq!(&data[2..], &sense);
    assert_eq!(data.len() as u32, want.data_segment_len);
    assert_eq!(parse_scsi_response_data(&data).unwrap(), &sense);
    assert_eq!(parse_scsi_response_data(&[]).unwrap(), &[] as &[u8]);
    assert!(parse_scsi_response_data(&[0]).is_err());
    assert!(parse_scsi_response_data(&[0, 4, 1]).is_err());
}

#[test]
fn scsi_response_residual_flags() {
    let r = ScsiResponse {
        bidi_overflow: true,
        bidi_underflow: false,
        overflow: false,
        underflow: true,
        residual_count: 0x200,
        bidi_read_residual: 0x100,
        exp_data_sn: 3,
        snack_tag: 0x77,
        ..Default::default()
    };
    let b = r.to_bytes();
    assert_eq!(b[1], 0x80 | 0x10 | 0x02);
    assert_eq!(&b[20..24], &[0, 0, 0, 0x77]);
    assert_eq!(&b[36..48], &[0, 0, 0, 3, 0, 0, 1, 0, 0, 0, 2, 0]);
    assert_eq!(ScsiResponse::parse(&b).unwrap(), r);
}

#[test]
fn r2t() {
    #[rustfmt::skip]
    let raw = [
        0x31, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2b,  0x00, 0x00, 0x00, 0x11,
        0x00, 0x00, 0x00, 0x07,  0x00, 0x00, 0x00, 0x06,
        0x00, 0x00, 0x00, 0x45,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00,  0x00, 0x04, 0x00, 0x00,
    ];
    let want = R2t {
        lun: 0x0001_0000_0000_0000,
        itt: 0x2b,
        ttt: 0x11,
        stat_sn: 7,
        exp_cmd_sn: 6,
        max_cmd_sn: 0x45,
        r2t_sn: 0,
        buffer_offset: 0x10000,
        desired_len: 0x40000,
    };
    both_ways(raw, Pdu::R2t(want));
}

#[test]
fn logout_request_and_response() {
    #[rustfmt::skip]
    let raw = [
        0x46, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x50,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x0c,  0x00, 0x00, 0x00, 0x0b,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = LogoutRequest {
        immediate: true,
        reason: LogoutReason::CLOSE_SESSION,
        itt: 0x50,
        cid: 0,
        cmd_sn: 12,
        exp_stat_sn: 11,
    };
    both_ways(raw, Pdu::LogoutRequest(want));

    #[rustfmt::skip]
    let raw = [
        0x26, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x50,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x0b,  0x00, 0x00, 0x00, 0x0c,
        0x00, 0x00, 0x00, 0x4b,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x02, 0x00, 0x14,  0x00, 0x00, 0x00, 0x00,
    ];
    let want = LogoutResponse {
        response: LogoutResponseCode::CLOSED_SUCCESSFULLY,
        itt: 0x50,
        stat_sn: 11,
        exp_cmd_sn: 12,
        max_cmd_sn: 0x4b,
        time2wait: 2,
        time2retain: 20,
    };
    both_ways(raw, Pdu::LogoutResponse(want));
}

#[test]
fn nop_out_and_in() {
    // A NOP-Out answering a target's NOP-In: ITT 0xffffffff, the NOP-In's TTT.
    #[rustfmt::skip]
    let raw = [
        0x40, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff,  0x00, 0x00, 0x00, 0x99,
        0x00, 0x00, 0x00, 0x0d,  0x00, 0x00, 0x00, 0x0e,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = NopOut {
        immediate: true,
        data_segment_len: 0,
        lun: 0,
        itt: 0xffff_ffff,
        ttt: 0x99,
        cmd_sn: 13,
        exp_stat_sn: 14,
    };
    both_ways(raw, Pdu::NopOut(want));

    #[rustfmt::skip]
    let raw = [
        0x20, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x04,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x61,  0xff, 0xff, 0xff, 0xff,
        0x00, 0x00, 0x00, 0x0e,  0x00, 0x00, 0x00, 0x0d,
        0x00, 0x00, 0x00, 0x4c,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let want = NopIn {
        data_segment_len: 4,
        lun: 0,
        itt: 0x61,
        ttt: 0xffff_ffff,
        stat_sn: 14,
        exp_cmd_sn: 13,
        max_cmd_sn: 0x4c,
    };
    both_ways(raw, Pdu::NopIn(want));
}

#[test]
fn async_message() {
    #[rustfmt::skip]
    let raw = [
        0x32, 0x80, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x21,  0x00, 0x00, 0x00, 0x10,
        0x00, 0x00, 0x00, 0x4f,  0x01, 0x00, 0x00, 0x00,
        0x00, 0x03, 0x00, 0x0a,  0x00, 0x00, 0x00, 0x00,
    ];
    let want = AsyncMessage {
        data_segment_len: 0,
        lun: 0,
        stat_sn: 0x21,
        exp_cmd_sn: 0x10,
        max_cmd_sn: 0x4f,
        event: AsyncEvent::LOGOUT_REQUEST,
        vcode: 0,
        parameter1: 0,
        parameter2: 3,
        parameter3: 10,
    };
    both_ways(raw, Pdu::AsyncMessage(want));
}

#[test]
fn reject_answering_an_unknown_opcode() {
    // A vendor opcode 0x1c from the initiator: unknown, answered with reason 0x05.
    let mut bad = [0u8; 48];
    bad[0] = 0x1c;
    bad[16..20].copy_from_slice(&[0, 0, 0, 9]);
    let e = Pdu::parse(&bad).unwrap_err();
    assert_eq!(e, PduError::UnknownOpcode(0x1c));
    assert_eq!(e.reject_reason(), RejectReason::COMMAND_NOT_SUPPORTED);
    let rej = Reject::new(e.reject_reason(), 0x22, 0x11, 0x50);
    #[rustfmt::skip]
    let raw = [
        0x3f, 0x80, 0x05, 0x00,  0x00, 0x00, 0x00, 0x30,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x22,  0x00, 0x00, 0x00, 0x11,
        0x00, 0x00, 0x00, 0x50,  0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    both_ways(raw, Pdu::Reject(rej));
}

#[test]
fn snack_is_parsed_to_be_rejected() {
    #[rustfmt::skip]
    let raw = [
        0x10, 0x81, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0xff, 0xff,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x05,
        0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x03,  0x00, 0x00, 0x00, 0x02,
    ];
    let want = SnackRequest {
        snack_type: SnackType::STATUS,
        lun: 0,
        itt: 0xffff_ffff,
        ttt: 0,
        exp_stat_sn: 5,
        beg_run: 3,
        run_length: 2,
    };
    both_ways(raw, Pdu::SnackRequest(want));
    assert_eq!(
        SnackRequest::REJECT_REASON_ERL0,
        RejectReason::PROTOCOL_ERROR
    );
}

#[test]
fn wrong_opcode_and_lengths() {
    let nop = NopIn::default().to_bytes();
    assert_eq!(
        NopOut::parse(&nop),
        Err(PduError::WrongOpcode {
            what: "NOP-Out",
            opcode: 0x20
        })
    );
    assert!(matches!(
        Pdu::parse(&nop[..47]),
        Err(PduError::Truncated {
            need: 48,
            got: 47,
            ..
        })
    ));
    let mut long = nop.to_vec();
    long.push(0);
    assert!(matches!(
        Pdu::parse(&long),
        Err(PduError::TrailingBytes { .. })
    ));
}

#[test]
fn bhs_common_fields() {
    let b = LoginRequest {
        data_segment_len: 0x12345,
        itt: 0xdead_beef,
        ..Default::default()
    }
    .to_bytes();
    let h = Bhs::parse(&b).unwrap();
    assert_eq!(h.opcode(), Opcode::LOGIN_REQUEST);
    assert!(h.immediate());
    assert_eq!(h.data_segment_len(), 0x12345);
    assert_eq!(h.itt(), 0xdead_beef);
    assert_eq!(h.pdu_len(), 48 + 0x12348);
    assert!(h.check_data_segment_len(8192).is_err());
    assert!(Opcode::LOGIN_REQUEST.is_initiator());
    assert!(!Opcode::LOGIN_RESPONSE.is_initiator());
}

#[test]
fn lengths_and_split() {
    assert_eq!(pad4(0), 0);
    assert_eq!(pad4(1), 4);
    assert_eq!(pad4(4), 4);
    assert_eq!(pad4(0x4b), 0x4c);
    assert_eq!(pdu_len(1, 5), 48 + 4 + 8);

    let mut pdu = NopOut {
        data_segment_len: 5,
        ..Default::default()
    }
    .to_bytes()
    .to_vec();
    pdu.extend_from_slice(b"hello\0\0\0");
    let p = split_pdu(&pdu, 8192).unwrap();
    assert_eq!(p.data, b"hello");
    assert!(p.ahs.is_empty());
    // Padding may be missing (iSER) or partial.
    assert_eq!(split_pdu(&pdu[..53], 8192).unwrap().data, b"hello");
    assert_eq!(split_pdu(&pdu[..55], 8192).unwrap().data, b"hello");
    // Shorter than declared.
    assert!(matches!(
        split_pdu(&pdu[..52], 8192),
        Err(PduError::Truncated { need: 53, .. })
    ));
    // Beyond padding.
    pdu.push(0);
    assert!(matches!(
        split_pdu(&pdu, 8192),
        Err(PduError::TrailingBytes {
            expected: 56,
            got: 57,
            ..
        })
    ));
    pdu.pop();
    // Over the caller's limit.
    assert_eq!(
        split_pdu(&pdu, 4),
        Err(PduError::DataSegmentTooLong {
            what: "BHS",
            len: 5,
            max: 4
        })
    );
    assert!(split_pdu(&pdu[..10], 8192).is_err());
}

#[test]
fn extended_cdb_ahs() {
    // A 32-byte CDB: 16 bytes in the BHS, 16 in an AHS of length 17 (CDB length - 15).
    let tail: Vec<u8> = (16u8..32).collect();
    let ahs = CommandAhs {
        extended_cdb: Some(tail.clone()),
        bidi_read_length: Some(0x1000),
    };
    let bytes = ahs.to_bytes();
    #[rustfmt::skip]
    let want = [
        0x00, 0x11, 0x01, 0x00,  16, 17, 18, 19,  20, 21, 22, 23,  24, 25, 26, 27,
        28, 29, 30, 31,
        0x00, 0x05, 0x02, 0x00,  0x00, 0x00, 0x10, 0x00,
    ];
    assert_eq!(bytes, want);
    assert_eq!(CommandAhs::parse(&bytes).unwrap(), ahs);
    let list = parse_ahs(&bytes).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].ahs_type, AhsType::EXTENDED_CDB);

    // Whole PDU: BHS + AHS + no data.
    let cmd = ScsiCommand {
        total_ahs_words: (bytes.len() / 4) as u8,
        ..Default::default()
    };
    let mut pdu = cmd.to_bytes().to_vec();
    pdu.extend_from_slice(&bytes);
    let p = split_pdu(&pdu, 0).unwrap();
    assert_eq!(p.ahs, &bytes[..]);
    assert!(p.data.is_empty());

    // Errors: unknown type, short bidi AHS, truncated list.
    assert!(matches!(
        CommandAhs::parse(&[0, 1, 7, 0]),
        Err(PduError::InvalidField {
            field: "AHSType",
            offset: 2,
            value: 7,
            ..
        })
    ));
    assert!(matches!(
        CommandAhs::parse(&[0, 1, 2, 0]),
        Err(PduError::InvalidField {
            field: "AHSLength",
            ..
        })
    ));
    assert!(matches!(
        parse_ahs(&[0, 9, 1, 0]),
        Err(PduError::Truncated { .. })
    ));
    assert!(matches!(
        parse_ahs(&[0, 9]),
        Err(PduError::Truncated { .. })
    ));
}

#[test]
fn lun_encoding() {
    assert_eq!(encode_lun(0), Some(0));
    assert_eq!(encode_lun(5), Some(0x0005_0000_0000_0000));
    assert_eq!(encode_lun(0x100), Some(0x4100_0000_0000_0000));
    assert_eq!(encode_lun(0x3fff), Some(0x7fff_0000_0000_0000));
    assert_eq!(encode_lun(0x4000), None);
    assert_eq!(decode_lun(0x0005_0000_0000_0000), Some(5));
    assert_eq!(decode_lun(0x4100_0000_0000_0000), Some(0x100));
    assert_eq!(decode_lun(0x0105_0000_0000_0000), None, "bus 1");
    assert_eq!(
        decode_lun(0x8005_0000_0000_0000),
        None,
        "logical unit addressing"
    );
    assert_eq!(decode_lun(0x0005_0001_0000_0000), None, "second level");
    for n in 0..=0x3fffu16 {
        assert_eq!(decode_lun(encode_lun(n).unwrap()), Some(n));
    }
}

#[test]
fn codes_keep_unknown_values() {
    assert_eq!(TmFunction(0x7f).name(), None);
    assert_eq!(format!("{:?}", TmFunction(0x7f)), "TmFunction(0x7f)");
    assert_eq!(format!("{}", Opcode::R2T), "R2T");
    assert!(RejectReason::KNOWN.contains(&RejectReason::WAITING_FOR_LOGOUT));
    let t = TaskMgmtRequest {
        function: TmFunction(0x55),
        ..Default::default()
    };
    assert_eq!(
        TaskMgmtRequest::parse(&t.to_bytes()).unwrap().function,
        TmFunction(0x55)
    );
}

fn any_bhs() -> impl Strategy<Value = [u8; 48]> {
    let opcodes = vec![
        0x00u8, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26,
        0x31, 0x32, 0x3f, 0x1c, 0x3c,
    ];
    (
        proptest::collection::vec(any::<u8>(), 48),
        prop::sample::select(opcodes),
        any::<bool>(),
    )
        .prop_map(|(v, op, imm)| {
            let mut a = [0u8; 48];
            a.copy_from_slice(&v);
            a[0] = op | if imm { 0x40 } else { 0 };
            a
        })
}

proptest! {
    #[test]
    fn any_bhs_parses_and_round_trips(raw in any_bhs()) {
        if let Ok(p) = Pdu::parse(&raw) {
            let b = p.to_bytes();
            let q = Pdu::parse(&b).unwrap();
            prop_assert_eq!(q, p);
            // Emitting is canonical: the emitted bytes re-emit identically.
            prop_assert_eq!(q.to_bytes(), b);
            prop_assert_eq!(Bhs::parse(&b).unwrap().opcode(), p.opcode());
        }
    }

    #[test]
    fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..200), max in any::<u32>()) {
        let _ = Pdu::parse(&raw);
        if let Ok(parts) = split_pdu(&raw, max) {
            prop_assert_eq!(parts.data.len() as u32, parts.bhs.data_segment_len());
            let _ = CommandAhs::parse(parts.ahs);
        }
        let _ = parse_ahs(&raw);
        let _ = CommandAhs::parse(&raw);
        let _ = parse_scsi_response_data(&raw);
    }

    #[test]
    fn login_request_struct_round_trips(
        transit in any::<bool>(), cont in any::<bool>(),
        csg in prop::sample::select(vec![LoginStage::Security, LoginStage::Operational, LoginStage::FullFeature]),
        nsg in prop::sample::select(vec![LoginStage::Security, LoginStage::Operational, LoginStage::FullFeature]),
        vmax in any::<u8>(), vmin in any::<u8>(), dsl in 0u32..(1 << 24),
        isid in any::<[u8; 6]>(), tsih in any::<u16>(), itt in any::<u32>(), cid in any::<u16>(),
        cmd_sn in any::<u32>(), exp_stat_sn in any::<u32>(),
    ) {
        let r = LoginRequest { transit, cont: cont && !transit, csg, nsg, version_max: vmax, version_min: vmin,
            data_segment_len: dsl, isid, tsih, itt, cid, cmd_sn, exp_stat_sn };
        prop_assert_eq!(LoginRequest::parse(&r.to_bytes()).unwrap(), r);
    }

    #[test]
    fn scsi_command_struct_round_trips(
        imm in any::<bool>(), f in any::<bool>(), r in any::<bool>(), w in any::<bool>(), attr in 0u8..8,
        ahs in any::<u8>(), dsl in 0u32..(1 << 24), lun in any::<u64>(), itt in any::<u32>(),
        edtl in any::<u32>(), cmd_sn in any::<u32>(), esn in any::<u32>(), cdb in any::<[u8; 16]>(),
    ) {
        let c = ScsiCommand { immediate: imm, final_pdu: f, read: r, write: w, attr: TaskAttr(attr),
            total_ahs_words: ahs, data_segment_len: dsl, lun, itt, expected_data_len: edtl,
            cmd_sn, exp_stat_sn: esn, cdb };
        prop_assert_eq!(ScsiCommand::parse(&c.to_bytes()).unwrap(), c);
    }

    #[test]
    fn data_in_struct_round_trips(
        flags in any::<[bool; 5]>(), status in any::<u8>(), dsl in 0u32..(1 << 24),
        words in any::<[u32; 8]>(), lun in any::<u64>(),
    ) {
        let d = DataIn { final_pdu: flags[0], ack: flags[1], overflow: flags[2], underflow: flags[3],
            status_present: flags[4], status: Status(status), data_segment_len: dsl, lun, itt: words[0], ttt: words[1],
            stat_sn: words[2], exp_cmd_sn: words[3], max_cmd_sn: words[4], data_sn: words[5],
            buffer_offset: words[6], residual_count: words[7] };
        prop_assert_eq!(DataIn::parse(&d.to_bytes()).unwrap(), d);
    }

    #[test]
    fn command_ahs_round_trips(tail in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                               bidi in proptest::option::of(any::<u32>())) {
        let a = CommandAhs { extended_cdb: tail, bidi_read_length: bidi };
        let b = a.to_bytes();
        prop_assert_eq!(b.len() % 4, 0);
        prop_assert_eq!(CommandAhs::parse(&b).unwrap(), a);
    }
}
