//! Tests of the iSER connection core: open-iscsi's login and full-feature sequences, each
//! answer byte-checked through the PDU parsers, and the ways a host can get things wrong.

use super::*;
use raidline_scsi::cdb::opcode;
use raidline_scsi::iscsi::bhs::encode_lun;
use raidline_scsi::iscsi::negotiate::{Portal, TargetConfig};
use raidline_scsi::iscsi::pdu::{LoginRequest, LoginResponse, LoginStage, TaskAttr};
use raidline_scsi::iscsi::text::parse_text;
use raidline_scsi::iser::split_send;
use raidline_scsi::sbc::UnmapLimits;

const TARGET: &str = "iqn.2026-12.io.raidline:t1";
const INITIATOR: &str = "iqn.1993-08.org.debian:01:host1";
const READ_VA: RemoteBuffer = RemoteBuffer {
    stag: 0x1234,
    va: 0x7f00_0000_0000,
};
const WRITE_VA: RemoteBuffer = RemoteBuffer {
    stag: 0x5678,
    va: 0x7f00_1000_0000,
};

struct OneLun(LogicalUnit);

impl Units for OneLun {
    fn unit(&self, target: &str, lun: u16) -> Option<&LogicalUnit> {
        (target.eq_ignore_ascii_case(TARGET) && lun == 0).then_some(&self.0)
    }
    fn luns(&self, target: &str) -> Vec<u16> {
        if target.eq_ignore_ascii_case(TARGET) {
            vec![0]
        } else {
            vec![]
        }
    }
}

fn units() -> OneLun {
    OneLun(LogicalUnit {
        block_size: 512,
        blocks: 1 << 20,
        blocks_per_physical_exp: 0,
        vendor: *b"RAIDLINE",
        product: *b"test            ",
        revision: *b"0.1 ",
        serial: "S1".into(),
        eui128: [7; 16],
        target_port: None,
        write_cache: true,
        read_only: false,
        max_transfer_blocks: 2048,
        optimal_transfer_blocks: 0,
        optimal_granularity_blocks: 0,
        unmap: Some(UnmapLimits {
            max_blocks: 1 << 16,
            max_descriptors: 16,
            granularity: 8,
            reads_zero: true,
        }),
        ready: true,
    })
}

fn config() -> Arc<LoginConfig> {
    let mut t = TargetConfig::new(TARGET);
    t.portals.push(Portal {
        addr: "10.0.2.15".parse().unwrap(),
        port: 3260,
        tpgt: 1,
    });
    Arc::new(LoginConfig::new(vec![t], true))
}

fn text(pairs: &[(&str, &str)]) -> Vec<u8> {
    pairs
        .iter()
        .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
        .collect()
}

fn login_send(csg: LoginStage, nsg: LoginStage, data: &[u8], cmd_sn: u32) -> Vec<u8> {
    let r = LoginRequest {
        transit: true,
        cont: false,
        csg,
        nsg,
        isid: [0x80, 0, 0x23, 0x3d, 0, 0],
        itt: 0,
        cmd_sn,
        data_segment_len: data.len() as u32,
        ..Default::default()
    };
    build_send(&IserHeader::default(), &r.to_bytes(), &[], data)
}

/// Hands a whole SEND to the connection as the receive buffers scatter it.
fn recv(c: &mut IserConn, payload: &[u8], u: &dyn Units, out: &mut Vec<Action>) {
    let cut = payload.len().min(HEAD_LEN);
    c.on_recv(&payload[..cut], &payload[cut..], u, out);
}

/// The answers' PDUs, parsed from the SENDs (and the data-in of write-then-send).
fn sent(actions: &[Action]) -> Vec<(Pdu, Vec<u8>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(p) | Action::WriteThenSend { send: p, .. } => Some(p),
            _ => None,
        })
        .map(|p| {
            let s = split_send(p, 1 << 20).unwrap();
            assert_eq!(
                s.header,
                IserHeader::default(),
                "target SENDs carry no STags"
            );
            (Pdu::parse(s.bhs.as_bytes()).unwrap(), s.data.to_vec())
        })
        .collect()
}

/// A connection in full-feature phase of a normal session, as open-iscsi's iser logs in.
fn logged_in(session_type: &str) -> (IserConn, OneLun) {
    let u = units();
    let mut c = IserConn::new(config(), NonZeroU16::new(3).unwrap(), [5; 17]);
    assert_eq!(c.recv_len(), 28 + 48 + 8192);
    let mut out = Vec::new();
    let mut first = vec![
        ("InitiatorName", INITIATOR),
        ("SessionType", session_type),
        ("AuthMethod", "None"),
    ];
    if session_type == "Normal" {
        first.push(("TargetName", TARGET));
    }
    recv(
        &mut c,
        &login_send(
            LoginStage::Security,
            LoginStage::Operational,
            &text(&first),
            1,
        ),
        &u,
        &mut out,
    );
    let r = sent(&out);
    let Pdu::LoginResponse(lr) = r[0].0 else {
        panic!("{r:?}")
    };
    assert!(lr.status.is_success() && lr.transit);
    out.clear();
    let op = text(&[
        ("HeaderDigest", "None"),
        ("DataDigest", "None"),
        ("RDMAExtensions", "Yes"),
        ("InitiatorRecvDataSegmentLength", "262144"),
        ("TargetRecvDataSegmentLength", "8192"),
        ("ImmediateData", "Yes"),
        ("InitialR2T", "Yes"),
        ("FirstBurstLength", "65536"),
        ("MaxBurstLength", "262144"),
        ("MaxOutstandingUnexpectedPDUs", "0"),
        ("ErrorRecoveryLevel", "0"),
    ]);
    recv(
        &mut c,
        &login_send(LoginStage::Operational, LoginStage::FullFeature, &op, 2),
        &u,
        &mut out,
    );
    // The full-feature receives are posted before the final login response goes.
    assert_eq!(
        out[0],
        Action::FullFeature {
            recv_len: 28 + 48 + 8192
        }
    );
    let r = sent(&out);
    let Pdu::LoginResponse(lr) = r[0].0 else {
        panic!("{r:?}")
    };
    assert!(lr.status.is_success());
    assert_eq!((lr.tsih, lr.nsg), (3, LoginStage::FullFeature));
    assert!(c.session().is_some());
    (c, u)
}

#[allow(clippy::too_many_arguments)]
fn command(
    itt: u32,
    cmd_sn: u32,
    lun: u16,
    cdb: &[u8],
    edtl: u32,
    read: Option<RemoteBuffer>,
    write: Option<RemoteBuffer>,
    immediate: &[u8],
) -> Vec<u8> {
    let mut c16 = [0u8; 16];
    c16[..cdb.len()].copy_from_slice(cdb);
    let cmd = ScsiCommand {
        immediate: false,
        final_pdu: true,
        read: read.is_some(),
        write: write.is_some() || !immediate.is_empty(),
        attr: TaskAttr::SIMPLE,
        total_ahs_words: 0,
        data_segment_len: immediate.len() as u32,
        lun: encode_lun(lun).unwrap(),
        itt,
        expected_data_len: edtl,
        cmd_sn,
        exp_stat_sn: 0,
        cdb: c16,
    };
    build_send(&IserHeader { write, read }, &cmd.to_bytes(), &[], immediate)
}

fn response(p: &(Pdu, Vec<u8>)) -> ScsiResponse {
    match p.0 {
        Pdu::ScsiResponse(r) => r,
        ref other => panic!("not a SCSI Response: {other:?}"),
    }
}

fn sense_of(p: &(Pdu, Vec<u8>)) -> Sense {
    let data = &p.1;
    assert_eq!(
        usize::from(u16::from_be_bytes([data[0], data[1]])),
        data.len() - 2
    );
    Sense::parse(&data[2..]).unwrap()
}

#[test]
fn inquiry_read_and_write_as_open_iscsi_sends_them() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();

    // INQUIRY: answered at once, the data RDMA-written ahead of the response.
    recv(
        &mut c,
        &command(
            1,
            2,
            0,
            &[opcode::INQUIRY, 0, 0, 0, 36, 0],
            36,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Action::WriteThenSend { remote, data, .. } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (*remote, data.len(), &data[8..16]),
        (READ_VA, 36, &b"RAIDLINE"[..])
    );
    let r = response(&sent(&out)[0]);
    assert_eq!((r.status, r.itt, r.residual_count), (Status::GOOD, 1, 0));
    assert_eq!(r.max_cmd_sn.wrapping_sub(r.exp_cmd_sn), 127);
    out.clear();

    // READ(10) of 8 blocks: a task whose data goes to the read STag.
    recv(
        &mut c,
        &command(
            2,
            3,
            0,
            &[opcode::READ_10, 0, 0, 0, 0, 16, 0, 0, 8, 0],
            4096,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    assert_eq!(
        out,
        [Action::Task(Task {
            itt: 2,
            lun: 0,
            io: Io::Read {
                lba: 16,
                blocks: 8,
                fua: false
            },
            immediate: (0, 0),
            fetch: None,
            deliver: Some((READ_VA, 4096)),
        })]
    );
    out.clear();

    // WRITE(10) of 16 blocks: 4 KiB immediate, the rest fetched from the write STag.
    let payload = command(
        3,
        4,
        0,
        &[opcode::WRITE_10, 0x08, 0, 0, 0, 32, 0, 0, 16, 0],
        8192,
        None,
        Some(WRITE_VA),
        &[0xa5; 4096],
    );
    recv(&mut c, &payload, &u, &mut out);
    let Action::Task(t) = out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        t.io,
        Io::Write {
            lba: 32,
            blocks: 16,
            fua: true
        }
    );
    assert_eq!(t.immediate, (0, 4096));
    assert!(payload[HEAD_LEN + t.immediate.0..]
        .iter()
        .all(|&b| b == 0xa5));
    assert_eq!(t.fetch, Some((WRITE_VA, 4096)));
    assert_eq!(c.tasks_in_flight(), 2);
    out.clear();

    // The window shrinks with what is in flight and opens as tasks complete.
    c.complete(2, Ok(()), false, &mut out);
    let r = response(&sent(&out)[0]);
    assert_eq!((r.status, r.itt), (Status::GOOD, 2));
    let window = r.max_cmd_sn.wrapping_sub(r.exp_cmd_sn).wrapping_add(1);
    assert_eq!((r.exp_cmd_sn, window), (5, 127));
    out.clear();
    c.complete(3, Err(Sense::write_error(32)), false, &mut out);
    let p = &sent(&out)[0];
    assert_eq!(response(p).status, Status::CHECK_CONDITION);
    assert_eq!(sense_of(p), Sense::write_error(32));
    // Sense data fits open-iscsi's 128-byte full-feature receive buffers.
    assert!(p.1.len() <= 128);
    assert_eq!(c.tasks_in_flight(), 0);
}

#[test]
fn residuals_and_transfer_length_mismatches() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    // INQUIRY for 255 bytes: 96 come back, underflow 159.
    recv(
        &mut c,
        &command(
            1,
            2,
            0,
            &[opcode::INQUIRY, 0, 0, 0, 255, 0],
            255,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let r = response(&sent(&out)[0]);
    assert!(r.underflow && !r.overflow);
    assert_eq!(r.residual_count, 255 - 96);
    out.clear();
    // A READ of 4 KiB with room for 1 KiB: 1 KiB is written, overflow 3 KiB.
    recv(
        &mut c,
        &command(
            2,
            3,
            0,
            &[opcode::READ_10, 0, 0, 0, 0, 0, 0, 0, 8, 0],
            1024,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Action::Task(t) = out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(t.deliver, Some((READ_VA, 1024)));
    out.clear();
    c.complete(2, Ok(()), false, &mut out);
    let r = response(&sent(&out)[0]);
    assert!(r.overflow && !r.underflow);
    assert_eq!(r.residual_count, 3072);
    out.clear();
    // A WRITE whose expected length is not its CDB's: refused, nothing written.
    recv(
        &mut c,
        &command(
            3,
            4,
            0,
            &[opcode::WRITE_10, 0, 0, 0, 0, 0, 0, 0, 8, 0],
            512,
            None,
            Some(WRITE_VA),
            &[],
        ),
        &u,
        &mut out,
    );
    let p = &sent(&out)[0];
    assert_eq!(response(p).status, Status::CHECK_CONDITION);
    assert_eq!(sense_of(p).asc, Asc::INVALID_FIELD_IN_COMMAND_IU);
    out.clear();
    // A WRITE whose rest has no write STag to fetch it from.
    recv(
        &mut c,
        &command(
            4,
            5,
            0,
            &[opcode::WRITE_10, 0, 0, 0, 0, 0, 0, 0, 8, 0],
            4096,
            None,
            None,
            &[1; 512],
        ),
        &u,
        &mut out,
    );
    assert_eq!(
        sense_of(&sent(&out)[0]).asc,
        Asc::INVALID_FIELD_IN_COMMAND_IU
    );
}

#[test]
fn bad_luns_cdbs_ranges_and_pdus_get_precise_answers() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    let read_past_end = [opcode::READ_10, 0, 0, 0x10, 0, 0, 0, 0, 1, 0];
    recv(
        &mut c,
        &command(1, 2, 0, &read_past_end, 512, Some(READ_VA), None, &[]),
        &u,
        &mut out,
    );
    assert_eq!(sense_of(&sent(&out)[0]), Sense::lba_out_of_range());
    out.clear();
    // A LUN the target does not have: INQUIRY says so in its data, the rest is refused.
    recv(
        &mut c,
        &command(
            2,
            3,
            5,
            &[opcode::INQUIRY, 0, 0, 0, 36, 0],
            36,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Action::WriteThenSend { data, .. } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(data[0], 0x7f);
    out.clear();
    recv(
        &mut c,
        &command(
            3,
            4,
            5,
            &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0],
            0,
            None,
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    assert_eq!(sense_of(&sent(&out)[0]), Sense::lun_not_supported());
    out.clear();
    // REPORT LUNS to any LUN lists the target's.
    recv(
        &mut c,
        &command(
            4,
            5,
            9,
            &[opcode::REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            256,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Action::WriteThenSend { data, .. } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(data, &[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.clear();
    // An unknown opcode.
    recv(
        &mut c,
        &command(
            5,
            6,
            0,
            &[0x5e, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            0,
            None,
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    assert_eq!(sense_of(&sent(&out)[0]), Sense::invalid_opcode());
    out.clear();
    // A PDU whose opcode iSCSI does not have: a Reject carrying its header.
    let mut bad = command(6, 7, 0, &[0; 10], 0, None, None, &[]);
    bad[28] = 0x1f;
    recv(&mut c, &bad, &u, &mut out);
    let s = sent(&out);
    let Pdu::Reject(r) = s[0].0 else {
        panic!("{s:?}")
    };
    assert_eq!(r.reason, RejectReason::COMMAND_NOT_SUPPORTED);
    assert_eq!(s[0].1, bad[28..76]);
    out.clear();
    // Unsolicited Data-Out (InitialR2T is Yes, and iSER has no R2T): protocol error.
    let mut data_out = [0u8; 48];
    data_out[0] = 0x05;
    data_out[1] = 0x80;
    recv(
        &mut c,
        &build_send(&IserHeader::default(), &data_out, &[], &[]),
        &u,
        &mut out,
    );
    let Pdu::Reject(r) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(r.reason, RejectReason::PROTOCOL_ERROR);
    out.clear();
    // A command outside the window (CmdSN already used) is dropped without an answer.
    recv(
        &mut c,
        &command(
            7,
            2,
            0,
            &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0],
            0,
            None,
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    assert!(out.is_empty());
    // Truncated SENDs end the connection.
    recv(&mut c, &[0x10, 0, 0], &u, &mut out);
    assert!(matches!(out[0], Action::Close(_)));
}

#[test]
fn task_management_waits_for_the_tasks_it_aborts() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    for (itt, sn) in [(10, 2), (11, 3)] {
        recv(
            &mut c,
            &command(
                itt,
                sn,
                0,
                &[opcode::READ_10, 0, 0, 0, 0, 0, 0, 0, 1, 0],
                512,
                Some(READ_VA),
                None,
                &[],
            ),
            &u,
            &mut out,
        );
    }
    out.clear();
    let tmf = |itt: u32, f: TmFunction, reference: u32, lun: u16| {
        let t = TaskMgmtRequest {
            immediate: true,
            function: f,
            lun: encode_lun(lun).unwrap(),
            itt,
            referenced_task_tag: reference,
            cmd_sn: 4,
            exp_stat_sn: 0,
            ref_cmd_sn: 2,
            exp_data_sn: 0,
        };
        build_send(&IserHeader::default(), &t.to_bytes(), &[], &[])
    };
    // ABORT TASK of task 10: no answer until its storage work ends, then only the TMF's.
    recv(
        &mut c,
        &tmf(20, TmFunction::ABORT_TASK, 10, 0),
        &u,
        &mut out,
    );
    assert!(out.is_empty());
    // Aborted: no response of its own (so its read data goes nowhere).
    assert!(!c.complete(10, Ok(()), false, &mut out));
    let s = sent(&out);
    assert_eq!(s.len(), 1);
    let Pdu::TaskMgmtResponse(r) = s[0].0 else {
        panic!("{s:?}")
    };
    assert_eq!((r.itt, r.response), (20, TmResponse::FUNCTION_COMPLETE));
    out.clear();
    // A task that is not here.
    recv(
        &mut c,
        &tmf(21, TmFunction::ABORT_TASK, 99, 0),
        &u,
        &mut out,
    );
    let Pdu::TaskMgmtResponse(r) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(r.response, TmResponse::TASK_DOES_NOT_EXIST);
    out.clear();
    // LUN RESET of a LUN that does not exist, then of LUN 0 with task 11 running.
    recv(
        &mut c,
        &tmf(22, TmFunction::LOGICAL_UNIT_RESET, 0, 3),
        &u,
        &mut out,
    );
    let Pdu::TaskMgmtResponse(r) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(r.response, TmResponse::LUN_DOES_NOT_EXIST);
    out.clear();
    recv(
        &mut c,
        &tmf(23, TmFunction::LOGICAL_UNIT_RESET, 0, 0),
        &u,
        &mut out,
    );
    assert!(out.is_empty());
    c.complete(11, Err(Sense::read_error(0)), false, &mut out);
    let s = sent(&out);
    assert_eq!(s.len(), 1, "the aborted task's response is not sent");
    let Pdu::TaskMgmtResponse(r) = s[0].0 else {
        panic!("{s:?}")
    };
    assert_eq!((r.itt, r.response), (23, TmResponse::FUNCTION_COMPLETE));
    out.clear();
    recv(
        &mut c,
        &tmf(24, TmFunction::TARGET_COLD_RESET, 0, 0),
        &u,
        &mut out,
    );
    let Pdu::TaskMgmtResponse(r) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(r.response, TmResponse::FUNCTION_NOT_SUPPORTED);
}

#[test]
fn nop_logout_and_discovery() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    let nop = NopOut {
        immediate: true,
        data_segment_len: 4,
        lun: 0,
        itt: 0x42,
        ttt: NO_TASK,
        cmd_sn: 2,
        exp_stat_sn: 0,
    };
    recv(
        &mut c,
        &build_send(&IserHeader::default(), &nop.to_bytes(), &[], b"ping"),
        &u,
        &mut out,
    );
    let s = sent(&out);
    let Pdu::NopIn(n) = s[0].0 else {
        panic!("{s:?}")
    };
    assert_eq!(
        (n.itt, n.ttt, s[0].1.as_slice()),
        (0x42, NO_TASK, &b"ping"[..])
    );
    out.clear();
    let logout = LogoutRequest {
        immediate: true,
        reason: raidline_scsi::iscsi::pdu::LogoutReason::CLOSE_SESSION,
        itt: 0x43,
        cid: 0,
        cmd_sn: 2,
        exp_stat_sn: 0,
    };
    recv(
        &mut c,
        &build_send(&IserHeader::default(), &logout.to_bytes(), &[], &[]),
        &u,
        &mut out,
    );
    let Pdu::LogoutResponse(l) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(l.response, LogoutResponseCode::CLOSED_SUCCESSFULLY);
    assert!(matches!(out[1], Action::Close(_)));

    // Discovery: SendTargets=All lists the target and its portal; SCSI is refused.
    let (mut d, u) = logged_in("Discovery");
    out.clear();
    let body = text(&[("SendTargets", "All")]);
    let t = TextRequest {
        immediate: true,
        final_pdu: true,
        cont: false,
        data_segment_len: body.len() as u32,
        lun: 0,
        itt: 5,
        ttt: NO_TASK,
        cmd_sn: 2,
        exp_stat_sn: 0,
    };
    recv(
        &mut d,
        &build_send(&IserHeader::default(), &t.to_bytes(), &[], &body),
        &u,
        &mut out,
    );
    let s = sent(&out);
    let Pdu::TextResponse(r) = s[0].0 else {
        panic!("{s:?}")
    };
    assert!(r.final_pdu);
    let pairs = parse_text(&s[0].1, 8192).unwrap();
    assert_eq!(pairs[0].value, TARGET);
    assert_eq!(pairs[1].value, "10.0.2.15:3260,1");
    out.clear();
    recv(
        &mut d,
        &command(
            1,
            2,
            0,
            &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0],
            0,
            None,
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Pdu::Reject(r) = sent(&out)[0].0 else {
        panic!()
    };
    assert_eq!(r.reason, RejectReason::PROTOCOL_ERROR);
}

#[test]
fn a_failed_login_closes_and_a_closed_connection_is_silent() {
    let u = units();
    let mut c = IserConn::new(config(), NonZeroU16::new(3).unwrap(), [5; 17]);
    let mut out = Vec::new();
    let first = text(&[
        ("InitiatorName", INITIATOR),
        ("SessionType", "Normal"),
        ("TargetName", "iqn.2026-12.io.raidline:nope"),
        ("AuthMethod", "None"),
    ]);
    recv(
        &mut c,
        &login_send(LoginStage::Security, LoginStage::Operational, &first, 1),
        &u,
        &mut out,
    );
    let s = sent(&out);
    let Pdu::LoginResponse(LoginResponse { status, .. }) = s[0].0 else {
        panic!("{s:?}")
    };
    assert!(!status.is_success());
    assert!(matches!(out[1], Action::Close(_)));
    out.clear();
    recv(
        &mut c,
        &login_send(LoginStage::Security, LoginStage::Operational, &first, 1),
        &u,
        &mut out,
    );
    assert!(out.is_empty());
}

#[test]
fn a_unit_attention_is_reported_once_and_not_to_inquiry() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    c.unit_attention(&[0], Asc::REPORTED_LUNS_DATA_CHANGED);
    c.unit_attention(&[0], Asc::REPORTED_LUNS_DATA_CHANGED);
    c.unit_attention(&[0], Asc::CAPACITY_DATA_CHANGED);
    let tur = [opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0];
    // INQUIRY is answered and leaves the attention pending.
    recv(
        &mut c,
        &command(
            1,
            2,
            0,
            &[opcode::INQUIRY, 0, 0, 0, 36, 0],
            36,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    assert_eq!(response(&sent(&out)[0]).status, Status::GOOD);
    out.clear();
    // The next command gets the oldest, once (the repeated one was queued once).
    recv(
        &mut c,
        &command(2, 3, 0, &tur, 0, None, None, &[]),
        &u,
        &mut out,
    );
    assert_eq!(
        sense_of(&sent(&out)[0]),
        Sense::new(SenseKey::UNIT_ATTENTION, Asc::REPORTED_LUNS_DATA_CHANGED)
    );
    out.clear();
    // REQUEST SENSE returns the next as its data, with GOOD status.
    recv(
        &mut c,
        &command(
            3,
            4,
            0,
            &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0],
            18,
            Some(READ_VA),
            None,
            &[],
        ),
        &u,
        &mut out,
    );
    let Action::WriteThenSend { data, .. } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        Sense::parse(data),
        Some(Sense::new(
            SenseKey::UNIT_ATTENTION,
            Asc::CAPACITY_DATA_CHANGED
        ))
    );
    out.clear();
    recv(
        &mut c,
        &command(4, 5, 0, &tur, 0, None, None, &[]),
        &u,
        &mut out,
    );
    assert_eq!(response(&sent(&out)[0]).status, Status::GOOD);
}

#[test]
fn immediate_commands_beyond_the_window_get_task_set_full() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    let read = [opcode::READ_10, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    let limit = 128 + MAX_IMMEDIATE_TASKS;
    for itt in 0..=limit as u32 {
        let mut p = command(itt + 1, 2, 0, &read, 512, Some(READ_VA), None, &[]);
        p[28] |= 0x40; // immediate: outside the CmdSN window
        recv(&mut c, &p, &u, &mut out);
    }
    assert_eq!(c.tasks_in_flight(), limit);
    let last = sent(&out);
    assert_eq!(last.len(), 1);
    assert_eq!(response(&last[0]).status, Status::TASK_SET_FULL);
    // One completes: the next is taken again.
    out.clear();
    assert!(c.complete(1, Ok(()), false, &mut out));
    out.clear();
    let mut p = command(9999, 2, 0, &read, 512, Some(READ_VA), None, &[]);
    p[28] |= 0x40;
    recv(&mut c, &p, &u, &mut out);
    assert!(matches!(out[0], Action::Task(_)));
}

#[test]
fn a_silent_initiator_is_pinged_and_closed_when_it_does_not_answer() {
    let s = Duration::from_secs;
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    c.tick(s(100), &mut out);
    c.tick(
        s(100) + NOP_IN_INTERVAL - Duration::from_millis(1),
        &mut out,
    );
    assert!(out.is_empty(), "no ping before the interval: {out:?}");
    // Silent for the interval: a NOP-In that asks for an echo (a real Target Transfer Tag,
    // no task), StatSN not advanced.
    c.tick(s(100) + NOP_IN_INTERVAL, &mut out);
    let p = sent(&out);
    let Pdu::NopIn(ping) = p[0].0 else {
        panic!("{p:?}")
    };
    assert_eq!(ping.itt, NO_TASK);
    assert_ne!(ping.ttt, NO_TASK);
    out.clear();
    // The echo: a NOP-Out with the ping's tag and no task gets no answer, and is heard.
    let echo = NopOut {
        immediate: true,
        data_segment_len: 0,
        lun: 0,
        itt: NO_TASK,
        ttt: ping.ttt,
        cmd_sn: 2,
        exp_stat_sn: ping.stat_sn,
    };
    recv(
        &mut c,
        &build_send(&IserHeader::default(), &echo.to_bytes(), &[], &[]),
        &u,
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    let heard = s(120);
    c.tick(heard, &mut out);
    c.tick(heard + NOP_IN_TIMEOUT, &mut out);
    // Heard at 120 s: the next ping is due 15 s later, and the connection lives on.
    let p = sent(&out);
    assert_eq!(p.len(), 1, "{out:?}");
    let Pdu::NopIn(second) = p[0].0 else {
        panic!("{p:?}")
    };
    assert_ne!(second.ttt, ping.ttt);
    assert_eq!(second.stat_sn, ping.stat_sn, "a ping takes no StatSN");
    out.clear();
    // Unanswered for the timeout: closed, with the reason.
    c.tick(
        heard + NOP_IN_TIMEOUT + NOP_IN_TIMEOUT - Duration::from_millis(1),
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    c.tick(heard + NOP_IN_TIMEOUT + NOP_IN_TIMEOUT, &mut out);
    let [Action::Close(why)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert!(why.contains("NOP-In"), "{why}");
    out.clear();
    c.tick(s(1000), &mut out);
    assert!(out.is_empty(), "a closed connection is silent: {out:?}");

    // A login that does not end is closed after LOGIN_TIMEOUT.
    let mut l = IserConn::new(config(), NonZeroU16::new(4).unwrap(), [5; 17]);
    l.tick(s(5), &mut out);
    l.tick(s(5) + LOGIN_TIMEOUT - Duration::from_millis(1), &mut out);
    assert!(out.is_empty(), "{out:?}");
    l.tick(s(5) + LOGIN_TIMEOUT, &mut out);
    assert!(
        matches!(out.as_slice(), [Action::Close(w)] if w.contains("login")),
        "{out:?}"
    );
}

#[test]
fn a_response_sent_after_its_read_data_is_numbered_when_it_goes() {
    let (mut c, u) = logged_in("Normal");
    let mut out = Vec::new();
    let read = |itt, cmd_sn| {
        command(
            itt,
            cmd_sn,
            0,
            &[opcode::READ_10, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            512,
            Some(READ_VA),
            None,
            &[],
        )
    };
    for (itt, cmd_sn) in [(1, 2), (2, 3), (3, 4)] {
        recv(&mut c, &read(itt, cmd_sn), &u, &mut out);
    }
    assert_eq!(c.tasks_in_flight(), 3);
    out.clear();
    // Task 1 answers at once; task 2's data waits for the pacer, and task 3 answers before
    // it goes: the StatSNs follow the order on the wire (1, 3, 2), none skipped.
    assert!(c.complete(1, Ok(()), false, &mut out));
    let first = response(&sent(&out)[0]);
    out.clear();
    assert!(c.complete(2, Ok(()), true, &mut out));
    let Some(Action::Send(mut held)) = out.pop() else {
        panic!("{out:?}")
    };
    assert!(c.complete(3, Ok(()), false, &mut out));
    let second = response(&sent(&out)[0]);
    assert!(c.number(&mut held));
    let third = response(&sent(&[Action::Send(held)])[0]);
    assert_eq!((first.itt, second.itt, third.itt), (1, 3, 2));
    assert_eq!(second.stat_sn, first.stat_sn.wrapping_add(1));
    assert_eq!(third.stat_sn, first.stat_sn.wrapping_add(2));
    // The window as it is when the response goes: all three tasks done.
    let window = third
        .max_cmd_sn
        .wrapping_sub(third.exp_cmd_sn)
        .wrapping_add(1);
    assert_eq!((third.exp_cmd_sn, window), (5, 128));
    assert_eq!(third.status, Status::GOOD);
    // Anything but a SCSI Response is left as it is.
    let mut other = vec![0u8; 12];
    assert!(!c.number(&mut other));
}
