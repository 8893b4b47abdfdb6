//! Tests of the login state machine: open-iscsi's sequences over TCP and iSER, discovery,
//! every failure status, continuation.

use super::*;
use crate::iscsi::negotiate::{InitiatorAcl, Portal, TargetConfig};
use crate::iscsi::pdu::LoginResponse;
use crate::iscsi::text::parse_text;

const TARGET: &str = "iqn.2024-01.org.raidline:disk0";
const INITIATOR: &str = "iqn.2004-10.com.ubuntu:01:abc";
const ISID: Isid = [0x02, 0x3d, 0, 0, 0, 1];

fn config(iser: bool) -> LoginConfig {
    let mut t = TargetConfig::new(TARGET);
    t.alias = Some("disk0".into());
    t.portals.push(Portal {
        addr: "192.0.2.10".parse().unwrap(),
        port: 3260,
        tpgt: 1,
    });
    let mut locked = TargetConfig::new("iqn.2024-01.org.raidline:locked");
    locked.initiators = InitiatorAcl::Only(vec!["iqn.someone-else".into()]);
    LoginConfig::new(vec![t, locked], iser)
}

fn login(iser: bool) -> Login {
    Login::new(config(iser), NonZeroU16::new(7).unwrap(), [9; 17])
}

fn req(csg: LoginStage, nsg: LoginStage, transit: bool, cont: bool) -> LoginRequest {
    LoginRequest {
        transit,
        cont,
        csg,
        nsg: if transit { nsg } else { LoginStage::Security },
        isid: ISID,
        itt: 0x11,
        cmd_sn: 1,
        exp_stat_sn: 0x100,
        ..Default::default()
    }
}

fn text(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(format!("{k}={v}\0").as_bytes());
    }
    out
}

fn answers(step: &LoginStep) -> Vec<(String, String)> {
    parse_text(&step.data, 8192)
        .unwrap()
        .into_iter()
        .map(|kv| (kv.key, kv.value))
        .collect()
}

fn answer(step: &LoginStep, key: &str) -> Option<String> {
    answers(step)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

const SEC: LoginStage = LoginStage::Security;
const OP: LoginStage = LoginStage::Operational;
const FFP: LoginStage = LoginStage::FullFeature;

fn first_text() -> Vec<u8> {
    text(&[
        ("InitiatorName", INITIATOR),
        ("InitiatorAlias", "host1"),
        ("SessionType", "Normal"),
        ("TargetName", TARGET),
        ("AuthMethod", "None"),
    ])
}

fn iser_op_text() -> Vec<u8> {
    text(&[
        ("HeaderDigest", "None"),
        ("DataDigest", "None"),
        ("MaxConnections", "1"),
        ("InitialR2T", "Yes"),
        ("ImmediateData", "Yes"),
        ("MaxBurstLength", "16776192"),
        ("FirstBurstLength", "262144"),
        ("DefaultTime2Wait", "2"),
        ("DefaultTime2Retain", "0"),
        ("MaxOutstandingR2T", "1"),
        ("DataPDUInOrder", "Yes"),
        ("DataSequenceInOrder", "Yes"),
        ("ErrorRecoveryLevel", "0"),
        ("RDMAExtensions", "Yes"),
        ("InitiatorRecvDataSegmentLength", "262144"),
        ("TargetRecvDataSegmentLength", "262144"),
        ("MaxOutstandingUnexpectedPDUs", "0"),
    ])
}

#[test]
fn open_iscsi_iser_login() {
    let mut l = login(true);
    // Security stage: AuthMethod=None, T to operational.
    let s1 = l.on_request(&req(SEC, OP, true, false), &first_text());
    assert_eq!(s1.outcome, LoginOutcome::Continue);
    assert_eq!(
        s1.response,
        LoginResponse {
            transit: true,
            cont: false,
            csg: SEC,
            nsg: OP,
            version_max: 0,
            version_active: 0,
            data_segment_len: s1.data.len() as u32,
            isid: ISID,
            tsih: 0,
            itt: 0x11,
            stat_sn: 0x100,
            exp_cmd_sn: 1,
            max_cmd_sn: 128,
            status: LoginStatus::SUCCESS,
        }
    );
    assert_eq!(
        answers(&s1),
        vec![
            ("AuthMethod".into(), "None".into()),
            ("TargetPortalGroupTag".into(), "1".into()),
            ("TargetAlias".into(), "disk0".into()),
        ]
    );
    assert_eq!(l.stage(), Some(OP));

    // Operational stage with the iSER keys, T to full feature.
    let s2 = l.on_request(&req(OP, FFP, true, false), &iser_op_text());
    assert!(s2.response.transit);
    assert_eq!((s2.response.csg, s2.response.nsg), (OP, FFP));
    assert_eq!(s2.response.tsih, 7);
    assert_eq!(s2.response.stat_sn, 0x101);
    assert_eq!(answer(&s2, "RDMAExtensions").as_deref(), Some("Yes"));
    assert_eq!(
        answer(&s2, "TargetRecvDataSegmentLength").as_deref(),
        Some("8192")
    );
    assert_eq!(
        answer(&s2, "InitiatorRecvDataSegmentLength").as_deref(),
        Some("8192")
    );
    assert_eq!(answer(&s2, "MaxRecvDataSegmentLength"), None);
    assert_eq!(
        answer(&s2, "TargetPortalGroupTag"),
        None,
        "only in the first response"
    );
    let LoginOutcome::FullFeature(s) = s2.outcome else {
        panic!("not full feature: {:?}", s2.outcome)
    };
    assert_eq!(s.session_type, SessionType::Normal);
    assert_eq!(s.initiator_name, INITIATOR);
    assert_eq!(s.initiator_alias.as_deref(), Some("host1"));
    assert_eq!(s.target_name.as_deref(), Some(TARGET));
    assert_eq!(s.isid, ISID);
    assert_eq!(s.tsih, 7);
    assert_eq!(
        (s.exp_cmd_sn, s.max_cmd_sn, s.next_stat_sn),
        (1, 128, 0x102)
    );
    assert!(s.params.rdma_extensions);
    assert_eq!(s.params.max_burst_length, 262_144);
    assert_eq!(s.params.first_burst_length, 65_536);
    assert_eq!(s.params.target_recv_data_segment_length, 8192);
    assert_eq!(l.stage(), Some(FFP));

    // Anything after full feature fails.
    let s3 = l.on_request(&req(OP, FFP, true, false), &[]);
    assert_eq!(s3.outcome, LoginOutcome::Close);
}

#[test]
fn tcp_login_declares_max_recv_data_segment_length() {
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(
        &req(OP, FFP, true, false),
        &text(&[
            ("MaxRecvDataSegmentLength", "262144"),
            ("HeaderDigest", "None"),
        ]),
    );
    assert_eq!(
        answers(&s),
        vec![
            ("HeaderDigest".into(), "None".into()),
            ("MaxRecvDataSegmentLength".into(), "8192".into()),
        ]
    );
    let LoginOutcome::FullFeature(s) = s.outcome else {
        panic!()
    };
    assert_eq!(s.params.initiator_max_recv_data_segment_length, 262_144);
    assert!(!s.params.rdma_extensions);
}

#[test]
fn operational_stage_without_transit_then_transit() {
    let mut l = login(false);
    // Start directly in the operational stage, no security stage.
    let s1 = l.on_request(
        &req(OP, OP, false, false),
        &first_text()[..first_text().len() - 16],
    );
    assert_eq!(s1.outcome, LoginOutcome::Continue);
    assert!(!s1.response.transit);
    assert_eq!(
        answer(&s1, "MaxRecvDataSegmentLength").as_deref(),
        Some("8192")
    );
    let s2 = l.on_request(&req(OP, FFP, true, false), &[]);
    assert!(matches!(s2.outcome, LoginOutcome::FullFeature(_)));
    assert!(s2.data.is_empty(), "declared already: {:?}", answers(&s2));
}

#[test]
fn security_straight_to_full_feature() {
    let mut l = login(false);
    let s = l.on_request(&req(SEC, FFP, true, false), &first_text());
    // No operational key in a security-stage response (open-iscsi refuses one): the receive
    // length is not declared, and the default, 8192, holds.
    assert_eq!(answer(&s, "MaxRecvDataSegmentLength"), None);
    let LoginOutcome::FullFeature(sess) = s.outcome else {
        panic!("{:?}", s.outcome)
    };
    assert_eq!(sess.params.max_recv_data_segment_length(), 8192);
    // But not on iSER without RDMAExtensions: 0x0207.
    let mut l = login(true);
    let s = l.on_request(&req(SEC, FFP, true, false), &first_text());
    assert_eq!(s.response.status, LoginStatus::MISSING_PARAMETER);
    assert_eq!(s.outcome, LoginOutcome::Close);
}

#[test]
fn iser_rdma_extensions_no_fails() {
    let mut l = login(true);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(
        &req(OP, FFP, true, false),
        &text(&[("RDMAExtensions", "No")]),
    );
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
    assert_eq!(s.outcome, LoginOutcome::Close);
}

#[test]
fn discovery_session() {
    let mut l = login(false);
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[
            ("InitiatorName", INITIATOR),
            ("SessionType", "Discovery"),
            ("AuthMethod", "None"),
        ]),
    );
    assert_eq!(answers(&s), vec![("AuthMethod".into(), "None".into())]);
    let s = l.on_request(
        &req(OP, FFP, true, false),
        &text(&[("HeaderDigest", "None"), ("MaxBurstLength", "4096")]),
    );
    assert_eq!(answer(&s, "MaxBurstLength").as_deref(), Some("Irrelevant"));
    let LoginOutcome::FullFeature(sess) = s.outcome else {
        panic!()
    };
    assert_eq!(sess.session_type, SessionType::Discovery);
    assert_eq!(sess.target_name, None);
    let resp = crate::iscsi::discovery::text_response(&config(false), &sess, b"SendTargets=All\0")
        .unwrap();
    assert_eq!(
        resp,
        b"TargetName=iqn.2024-01.org.raidline:disk0\0TargetAddress=192.0.2.10:3260,1\0".to_vec()
    );
}

#[test]
fn continuation_across_two_pdus() {
    let mut l = login(false);
    let t = first_text();
    let (a, b) = t.split_at(20);
    let s1 = l.on_request(&req(SEC, OP, false, true), a);
    assert_eq!(s1.outcome, LoginOutcome::Continue);
    assert!(s1.data.is_empty());
    assert!(!s1.response.transit && !s1.response.cont);
    assert_eq!(s1.response.status, LoginStatus::SUCCESS);
    let s2 = l.on_request(&req(SEC, OP, true, false), b);
    assert_eq!(answer(&s2, "AuthMethod").as_deref(), Some("None"));
    assert_eq!(answer(&s2, "TargetPortalGroupTag").as_deref(), Some("1"));
    assert_eq!(s2.response.stat_sn, s1.response.stat_sn + 1);
    assert!(s2.response.transit);
}

fn first_fails(iser: bool, r: LoginRequest, data: &[u8]) -> LoginStatus {
    let mut l = login(iser);
    let s = l.on_request(&r, data);
    assert_eq!(s.outcome, LoginOutcome::Close);
    assert!(s.data.is_empty());
    assert!(!s.response.transit);
    assert_eq!(s.response.itt, r.itt);
    assert_eq!(s.response.isid, r.isid);
    assert_eq!(l.stage(), None);
    // A failed login stays failed.
    assert_eq!(l.on_request(&r, data).outcome, LoginOutcome::Close);
    s.response.status
}

#[test]
fn failure_statuses() {
    let ok = req(SEC, OP, true, false);
    let t = |pairs: &[(&str, &str)]| text(pairs);
    assert_eq!(
        first_fails(
            false,
            ok,
            &t(&[("InitiatorName", INITIATOR), ("TargetName", "iqn.nope")])
        ),
        LoginStatus::NOT_FOUND
    );
    assert_eq!(
        first_fails(
            false,
            ok,
            &t(&[
                ("InitiatorName", INITIATOR),
                ("TargetName", "iqn.2024-01.org.raidline:locked")
            ])
        ),
        LoginStatus::AUTHORIZATION_FAILURE
    );
    assert_eq!(
        first_fails(false, ok, &t(&[("TargetName", TARGET)])),
        LoginStatus::MISSING_PARAMETER
    );
    assert_eq!(
        first_fails(false, ok, &t(&[("InitiatorName", INITIATOR)])),
        LoginStatus::MISSING_PARAMETER,
        "normal session without TargetName"
    );
    assert_eq!(
        first_fails(
            false,
            ok,
            &t(&[("InitiatorName", INITIATOR), ("SessionType", "Bogus")])
        ),
        LoginStatus::SESSION_TYPE_NOT_SUPPORTED
    );
    assert_eq!(
        first_fails(
            false,
            ok,
            &t(&[
                ("InitiatorName", INITIATOR),
                ("TargetName", TARGET),
                ("AuthMethod", "CHAP")
            ])
        ),
        LoginStatus::AUTHENTICATION_FAILURE
    );
    let mut v = ok;
    v.version_min = 1;
    v.version_max = 2;
    assert_eq!(
        first_fails(false, v, &first_text()),
        LoginStatus::UNSUPPORTED_VERSION
    );
    let mut tc = ok;
    tc.cont = true;
    assert_eq!(
        first_fails(false, tc, &first_text()),
        LoginStatus::INITIATOR_ERROR
    );
    let mut back = ok;
    back.nsg = SEC;
    assert_eq!(
        first_fails(false, back, &first_text()),
        LoginStatus::INITIATOR_ERROR
    );
    let ffp = req(FFP, FFP, false, false);
    assert_eq!(
        first_fails(false, ffp, &first_text()),
        LoginStatus::INITIATOR_ERROR
    );
    let mut join = ok;
    join.tsih = 3;
    assert_eq!(
        first_fails(false, join, &first_text()),
        LoginStatus::SESSION_DOES_NOT_EXIST
    );
    assert_eq!(
        first_fails(false, ok, b"garbage"),
        LoginStatus::INITIATOR_ERROR
    );
}

#[test]
fn later_request_errors() {
    // CSG not the current stage.
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(&req(SEC, OP, true, false), &[]);
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
    // A changed ISID.
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let mut r = req(OP, FFP, true, false);
    r.isid[5] = 9;
    assert_eq!(
        l.on_request(&r, &[]).response.status,
        LoginStatus::INITIATOR_ERROR
    );
    // AuthMethod in the operational stage.
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(&req(OP, FFP, true, false), &text(&[("AuthMethod", "None")]));
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
    // A different TargetName later.
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(
        &req(OP, FFP, true, false),
        &text(&[("TargetName", "iqn.other")]),
    );
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
    // The same TargetName repeated is fine.
    let mut l = login(false);
    l.on_request(&req(SEC, OP, true, false), &first_text());
    let s = l.on_request(&req(OP, FFP, true, false), &text(&[("TargetName", TARGET)]));
    assert!(matches!(s.outcome, LoginOutcome::FullFeature(_)));
}

#[test]
fn on_pdu_handles_raw_headers() {
    let mut l = login(false);
    let r = req(SEC, OP, true, false);
    let s = l.on_pdu(&Bhs::from(r.to_bytes()), &first_text());
    assert_eq!(s.outcome, LoginOutcome::Continue);

    // T and C together in the raw header: 0x0200, echoing the ITT.
    let mut l = login(false);
    let mut raw = r.to_bytes();
    raw[1] |= 0x40;
    let s = l.on_pdu(&Bhs::from(raw), &[]);
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
    assert_eq!(s.response.itt, 0x11);
    assert_eq!(s.response.stat_sn, 0x100);
    assert_eq!(s.outcome, LoginOutcome::Close);

    // Reserved stage 2.
    let mut l = login(false);
    let mut raw = r.to_bytes();
    raw[1] = 0x88;
    assert_eq!(
        l.on_pdu(&Bhs::from(raw), &[]).response.status,
        LoginStatus::INITIATOR_ERROR
    );

    // Another opcode during login: 0x020b.
    let mut l = login(false);
    let nop = crate::iscsi::pdu::NopOut::default().to_bytes();
    let s = l.on_pdu(&Bhs::from(nop), &[]);
    assert_eq!(s.response.status, LoginStatus::INVALID_REQUEST_DURING_LOGIN);
}

#[test]
fn chap_keys_are_not_understood() {
    let mut l = login(false);
    let mut t = first_text();
    t.extend_from_slice(b"CHAP_A=5\0");
    let s = l.on_request(&req(SEC, OP, true, false), &t);
    assert_eq!(answer(&s, "CHAP_A").as_deref(), Some("NotUnderstood"));
}

#[test]
fn text_limit() {
    let mut c = config(false);
    c.max_text_len = 16;
    let mut l = Login::new(c, NonZeroU16::new(1).unwrap(), [9; 17]);
    let s = l.on_request(&req(SEC, OP, false, true), &first_text());
    assert_eq!(s.response.status, LoginStatus::INITIATOR_ERROR);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_pdus_never_panic(pdus in proptest::collection::vec(
            (any::<[u8; 16]>(), proptest::collection::vec(any::<u8>(), 0..80), any::<bool>()), 1..6),
            iser in any::<bool>())
        {
            let mut l = login(iser);
            for (head, mut data, real_text) in pdus {
                // A login request header with fuzzed flags/version/ISID/TSIH, and either
                // fuzzed bytes or plausible text.
                let mut raw = [0u8; 48];
                raw[0] = 0x43;
                raw[1..4].copy_from_slice(&head[..3]);
                raw[8..16].copy_from_slice(&head[8..16]);
                if real_text {
                    data = first_text();
                    data.extend_from_slice(&iser_op_text());
                }
                let s = l.on_pdu(&Bhs::from(raw), &data);
                prop_assert_eq!(s.response.data_segment_len as usize, s.data.len());
                prop_assert!(LoginResponse::parse(&s.response.to_bytes()).is_ok());
                if s.outcome == LoginOutcome::Close {
                    prop_assert!(!s.response.status.is_success());
                }
            }
        }
    }
}

fn chap_login(mutual: bool) -> Login {
    use crate::iscsi::chap::{ChapAccount, ChapConfig};
    let mut c = config(true);
    c.targets[0].chap = Some(ChapConfig {
        initiator: ChapAccount {
            user: "host1".into(),
            secret: zeroize::Zeroizing::new(b"initiator-secret".to_vec()),
        },
        target: mutual.then(|| ChapAccount {
            user: "array0".into(),
            secret: zeroize::Zeroizing::new(b"target-secret-12".to_vec()),
        }),
    });
    let mut nonce = [0u8; 17];
    nonce[0] = 42;
    for (i, b) in nonce[1..].iter_mut().enumerate() {
        *b = i as u8 * 3;
    }
    Login::new(c, NonZeroU16::new(7).unwrap(), nonce)
}

fn chap_first_text() -> Vec<u8> {
    text(&[
        ("InitiatorName", INITIATOR),
        ("SessionType", "Normal"),
        ("TargetName", TARGET),
        ("AuthMethod", "CHAP,None"),
    ])
}

/// Drives open-iscsi's CHAP sequence up to the target's challenge; returns (id, challenge).
fn chap_challenge(l: &mut Login) -> (u8, Vec<u8>) {
    use crate::iscsi::chap::decode_binary;
    // open-iscsi asks to move on at once; the target stays in the security stage.
    let s1 = l.on_request(&req(SEC, OP, true, false), &chap_first_text());
    assert_eq!(answer(&s1, "AuthMethod").as_deref(), Some("CHAP"));
    assert!(!s1.response.transit, "no transition before CHAP is done");
    let s2 = l.on_request(&req(SEC, OP, true, false), &text(&[("CHAP_A", "5,7")]));
    assert!(!s2.response.transit);
    assert_eq!(answer(&s2, "CHAP_A").as_deref(), Some("7"));
    let id: u8 = answer(&s2, "CHAP_I").unwrap().parse().unwrap();
    let c = decode_binary(&answer(&s2, "CHAP_C").unwrap()).unwrap();
    assert_eq!((id, c.len()), (42, 16));
    (id, c)
}

#[test]
fn chap_one_way_and_mutual() {
    use crate::iscsi::chap::{decode_binary, encode_hex, ChapAlg};
    // One way: the right response moves the login on.
    let mut l = chap_login(false);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"initiator-secret", &c));
    let s3 = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[("CHAP_N", "host1"), ("CHAP_R", &r)]),
    );
    assert!(s3.response.status.is_success());
    assert!(s3.response.transit);
    assert_eq!(l.stage(), Some(OP));

    // Mutual: the target answers the initiator's challenge with its own secret.
    let mut l = chap_login(true);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"initiator-secret", &c));
    let s3 = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[
            ("CHAP_N", "host1"),
            ("CHAP_R", &r),
            ("CHAP_I", "7"),
            ("CHAP_C", "0x00112233445566778899aabbccddeeff"),
        ]),
    );
    assert!(s3.response.transit);
    assert_eq!(answer(&s3, "CHAP_N").as_deref(), Some("array0"));
    let want = ChapAlg::Sha256.response(
        7,
        b"target-secret-12",
        &decode_binary("0x00112233445566778899aabbccddeeff").unwrap(),
    );
    assert_eq!(
        decode_binary(&answer(&s3, "CHAP_R").unwrap()).unwrap(),
        want
    );
}

#[test]
fn chap_failures_are_authentication_failures() {
    use crate::iscsi::chap::{encode_hex, ChapAlg};
    let fail = LoginStatus::AUTHENTICATION_FAILURE;
    // A wrong secret.
    let mut l = chap_login(false);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"wrong-secret!!", &c));
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[("CHAP_N", "host1"), ("CHAP_R", &r)]),
    );
    assert_eq!((s.response.status, s.outcome), (fail, LoginOutcome::Close));
    // The right secret under another name.
    let mut l = chap_login(false);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"initiator-secret", &c));
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[("CHAP_N", "host2"), ("CHAP_R", &r)]),
    );
    assert_eq!(s.response.status, fail);
    // Mutual asked of a target without a secret of its own, and a reflected challenge.
    let mut l = chap_login(false);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"initiator-secret", &c));
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[
            ("CHAP_N", "host1"),
            ("CHAP_R", &r),
            ("CHAP_I", "1"),
            ("CHAP_C", "0x0102"),
        ]),
    );
    assert_eq!(s.response.status, fail);
    let mut l = chap_login(true);
    let (id, c) = chap_challenge(&mut l);
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"initiator-secret", &c));
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[
            ("CHAP_N", "host1"),
            ("CHAP_R", &r),
            ("CHAP_I", "1"),
            ("CHAP_C", &encode_hex(&c)),
        ]),
    );
    assert_eq!(s.response.status, fail);
    // AuthMethod=None only, and skipping the security stage.
    let mut l = chap_login(false);
    let s = l.on_request(&req(SEC, OP, true, false), &first_text());
    assert_eq!(s.response.status, fail);
    let mut l = chap_login(false);
    let mut t = text(&[
        ("InitiatorName", INITIATOR),
        ("SessionType", "Normal"),
        ("TargetName", TARGET),
    ]);
    t.extend_from_slice(&iser_op_text());
    let s = l.on_request(&req(OP, FFP, true, false), &t);
    assert_eq!(s.response.status, fail);
    // No algorithm in common.
    let mut l = chap_login(false);
    l.on_request(&req(SEC, OP, true, false), &chap_first_text());
    let s = l.on_request(&req(SEC, OP, true, false), &text(&[("CHAP_A", "1,2")]));
    assert_eq!(s.response.status, fail);
}

#[test]
fn discovery_chap_when_configured() {
    use crate::iscsi::chap::{decode_binary, encode_hex, ChapAccount, ChapAlg, ChapConfig};
    let discovery_text = |auth: &str| {
        text(&[
            ("InitiatorName", INITIATOR),
            ("SessionType", "Discovery"),
            ("AuthMethod", auth),
        ])
    };
    let mut c = config(true);
    c.discovery_chap = Some(ChapConfig {
        initiator: ChapAccount {
            user: "finder".into(),
            secret: zeroize::Zeroizing::new(b"discovery-secret".to_vec()),
        },
        target: None,
    });
    // Without CHAP: refused.
    let mut l = Login::new(c.clone(), NonZeroU16::new(7).unwrap(), [9; 17]);
    let s = l.on_request(&req(SEC, OP, true, false), &discovery_text("None"));
    assert_eq!(s.response.status, LoginStatus::AUTHENTICATION_FAILURE);
    // With the discovery secret: in.
    let mut l = Login::new(c.clone(), NonZeroU16::new(7).unwrap(), [9; 17]);
    let s = l.on_request(&req(SEC, OP, true, false), &discovery_text("CHAP,None"));
    assert_eq!(answer(&s, "AuthMethod").as_deref(), Some("CHAP"));
    let s = l.on_request(&req(SEC, OP, true, false), &text(&[("CHAP_A", "7")]));
    let id: u8 = answer(&s, "CHAP_I").unwrap().parse().unwrap();
    let ch = decode_binary(&answer(&s, "CHAP_C").unwrap()).unwrap();
    let r = encode_hex(&ChapAlg::Sha256.response(id, b"discovery-secret", &ch));
    // open-iscsi's discovery goes from security straight to full feature once CHAP is done:
    // the answer carries no operational key (open-iscsi refuses one in the security stage).
    let s = l.on_request(
        &req(SEC, FFP, true, false),
        &text(&[("CHAP_N", "finder"), ("CHAP_R", &r)]),
    );
    assert!(s.response.status.is_success() && s.response.transit);
    assert_eq!(answer(&s, "TargetRecvDataSegmentLength"), None);
    assert!(
        matches!(s.outcome, LoginOutcome::FullFeature(_)),
        "{:?}",
        s.outcome
    );
    // A normal session to a target without CHAP is not asked for the discovery secret.
    let mut l = Login::new(c, NonZeroU16::new(7).unwrap(), [9; 17]);
    let s = l.on_request(
        &req(SEC, OP, true, false),
        &text(&[
            ("InitiatorName", INITIATOR),
            ("SessionType", "Normal"),
            ("TargetName", TARGET),
            ("AuthMethod", "None"),
        ]),
    );
    assert!(s.response.status.is_success(), "{:?}", s.response.status);
}
