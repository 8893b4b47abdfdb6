//! Tests of every key class of the login negotiation.

use super::*;
use crate::iscsi::pdu::LoginStatus;
use proptest::prelude::*;

fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect()
}

fn normal(iser: bool) -> Negotiation {
    Negotiation::new(
        SessionParams::target_defaults(iser),
        iser,
        SessionType::Normal,
    )
}

#[test]
fn open_iscsi_tcp_operational_keys() {
    let mut n = normal(false);
    let offer = kv(&[
        ("HeaderDigest", "None"),
        ("DataDigest", "None"),
        ("MaxConnections", "1"),
        ("InitialR2T", "No"),
        ("ImmediateData", "Yes"),
        ("MaxRecvDataSegmentLength", "262144"),
        ("MaxBurstLength", "16776192"),
        ("FirstBurstLength", "262144"),
        ("DefaultTime2Wait", "0"),
        ("DefaultTime2Retain", "0"),
        ("MaxOutstandingR2T", "1"),
        ("DataPDUInOrder", "Yes"),
        ("DataSequenceInOrder", "Yes"),
        ("ErrorRecoveryLevel", "0"),
        ("IFMarker", "No"),
        ("OFMarker", "No"),
    ]);
    let a = n.answer(&offer).unwrap();
    let want = kv(&[
        ("HeaderDigest", "None"),
        ("DataDigest", "None"),
        ("MaxConnections", "1"),
        ("InitialR2T", "Yes"),
        ("ImmediateData", "Yes"),
        ("MaxBurstLength", "262144"),
        ("FirstBurstLength", "65536"),
        ("DefaultTime2Wait", "2"),
        ("DefaultTime2Retain", "0"),
        ("MaxOutstandingR2T", "1"),
        ("DataPDUInOrder", "Yes"),
        ("DataSequenceInOrder", "Yes"),
        ("ErrorRecoveryLevel", "0"),
        ("IFMarker", "No"),
        ("OFMarker", "No"),
    ]);
    assert_eq!(a, want);
    assert_eq!(
        n.declarations(),
        kv(&[("MaxRecvDataSegmentLength", "8192")])
    );
    assert!(n.declarations().is_empty(), "declared once");
    let p = n.finish().unwrap();
    assert_eq!(p.initiator_max_recv_data_segment_length, 262_144);
    assert_eq!(p.max_send_data_segment_length(), 262_144);
    assert_eq!(p.max_recv_data_segment_length(), 8192);
    assert_eq!(p.default_time2retain, 0);
    assert!(!p.rdma_extensions);
}

#[test]
fn iser_keys() {
    let mut n = normal(true);
    let a = n
        .answer(&kv(&[
            ("RDMAExtensions", "Yes"),
            ("InitiatorRecvDataSegmentLength", "262144"),
            ("TargetRecvDataSegmentLength", "4096"),
            ("MaxOutstandingUnexpectedPDUs", "0"),
            ("MaxRecvDataSegmentLength", "262144"),
        ]))
        .unwrap();
    assert_eq!(
        a,
        kv(&[
            ("RDMAExtensions", "Yes"),
            ("InitiatorRecvDataSegmentLength", "8192"),
            ("TargetRecvDataSegmentLength", "4096"),
            ("MaxOutstandingUnexpectedPDUs", "0"),
        ])
    );
    // TargetRecvDataSegmentLength was answered: nothing more to declare.
    assert!(n.declarations().is_empty());
    let p = n.finish().unwrap();
    assert!(p.rdma_extensions);
    assert_eq!(p.max_send_data_segment_length(), 8192);
    assert_eq!(p.max_recv_data_segment_length(), 4096);
}

#[test]
fn iser_declares_target_recv_length_and_takes_the_answer() {
    let mut n = normal(true);
    n.answer(&kv(&[("RDMAExtensions", "Yes")])).unwrap();
    assert_eq!(
        n.declarations(),
        kv(&[("TargetRecvDataSegmentLength", "8192")])
    );
    // The initiator answers our declaration: taken (the smaller), not answered back.
    assert!(n
        .answer(&kv(&[("TargetRecvDataSegmentLength", "1024")]))
        .unwrap()
        .is_empty());
    assert_eq!(n.finish().unwrap().target_recv_data_segment_length, 1024);
}

#[test]
fn iser_requires_rdma_extensions() {
    let n = normal(true);
    assert_eq!(n.finish(), Err(NegotiationFailure::RdmaExtensionsMissing));
    assert_eq!(
        NegotiationFailure::RdmaExtensionsMissing.login_status(),
        LoginStatus::MISSING_PARAMETER
    );
    let mut n = normal(true);
    assert_eq!(
        n.answer(&kv(&[("RDMAExtensions", "No")])),
        Err(NegotiationFailure::RdmaExtensionsNo)
    );
    // A discovery session may leave it out.
    let d = Negotiation::new(
        SessionParams::target_defaults(true),
        true,
        SessionType::Discovery,
    );
    assert!(d.finish().unwrap().rdma_extensions);
    // On TCP, RDMAExtensions=Yes is answered No and the iSER keys are irrelevant.
    let mut t = normal(false);
    assert_eq!(
        t.answer(&kv(&[
            ("RDMAExtensions", "Yes"),
            ("InitiatorRecvDataSegmentLength", "8192"),
            ("MaxOutstandingUnexpectedPDUs", "4"),
        ]))
        .unwrap(),
        kv(&[
            ("RDMAExtensions", "No"),
            ("InitiatorRecvDataSegmentLength", "Irrelevant"),
            ("MaxOutstandingUnexpectedPDUs", "Irrelevant"),
        ])
    );
}

#[test]
fn boolean_and_or() {
    let mut prefs = SessionParams::target_defaults(false);
    prefs.immediate_data = false;
    prefs.initial_r2t = false;
    let mut n = Negotiation::new(prefs, false, SessionType::Normal);
    let a = n
        .answer(&kv(&[
            ("ImmediateData", "Yes"),
            ("InitialR2T", "No"),
            ("DataPDUInOrder", "No"),
            ("DataSequenceInOrder", "maybe"),
        ]))
        .unwrap();
    assert_eq!(
        a,
        kv(&[
            ("ImmediateData", "No"),
            ("InitialR2T", "No"),
            ("DataPDUInOrder", "Yes"),
            ("DataSequenceInOrder", "Reject"),
        ])
    );
    let p = n.finish().unwrap();
    assert!(!p.immediate_data && !p.initial_r2t && p.data_pdu_in_order);
    // Offered and answered: nothing more to declare about it.
    assert!(!n.declarations().iter().any(|d| d.key == "ImmediateData"));
}

#[test]
fn immediate_data_not_wanted_is_declared_when_the_initiator_is_silent() {
    let mut prefs = SessionParams::target_defaults(true);
    prefs.immediate_data = false;
    // The initiator never offers ImmediateData (its default is Yes): the target says No.
    let mut n = Negotiation::new(prefs, true, SessionType::Normal);
    n.answer(&kv(&[("RDMAExtensions", "Yes")])).unwrap();
    let d = n.declarations();
    assert!(d.contains(&KeyValue::new("ImmediateData", "No")), "{d:?}");
    // A later value from the initiator is its answer: not answered, and No stays.
    assert_eq!(n.answer(&kv(&[("ImmediateData", "Yes")])).unwrap(), kv(&[]));
    assert!(!n.finish().unwrap().immediate_data);
    // Wanted (the default): nothing declared, the RFC's Yes holds.
    let mut n = Negotiation::new(
        SessionParams::target_defaults(true),
        true,
        SessionType::Normal,
    );
    n.answer(&kv(&[("RDMAExtensions", "Yes")])).unwrap();
    assert!(!n.declarations().iter().any(|d| d.key == "ImmediateData"));
    assert!(n.finish().unwrap().immediate_data);
    // A discovery session moves no data: nothing declared.
    let mut n = Negotiation::new(prefs, true, SessionType::Discovery);
    assert!(!n.declarations().iter().any(|d| d.key == "ImmediateData"));
}

#[test]
fn numeric_min_max_and_ranges() {
    let mut n = normal(false);
    let a = n
        .answer(&kv(&[
            ("MaxBurstLength", "0x1000"),
            ("FirstBurstLength", "511"),
            ("MaxOutstandingR2T", "0"),
            ("ErrorRecoveryLevel", "3"),
            ("DefaultTime2Wait", "10"),
            ("DefaultTime2Retain", "3601"),
            ("MaxConnections", "8"),
            ("MaxOutstandingUnexpectedPDUs", "1"),
        ]))
        .unwrap();
    assert_eq!(
        a,
        kv(&[
            ("MaxBurstLength", "4096"),
            ("FirstBurstLength", "Reject"),
            ("MaxOutstandingR2T", "Reject"),
            ("ErrorRecoveryLevel", "Reject"),
            ("DefaultTime2Wait", "10"),
            ("DefaultTime2Retain", "Reject"),
            ("MaxConnections", "1"),
            ("MaxOutstandingUnexpectedPDUs", "Irrelevant"),
        ])
    );
    let p = n.finish().unwrap();
    assert_eq!(p.max_burst_length, 4096);
    // FirstBurstLength kept its default but is clamped to MaxBurstLength.
    assert_eq!(p.first_burst_length, 4096);
    assert_eq!(p.default_time2wait, 10);
    assert_eq!(p.default_time2retain, 20);
}

#[test]
fn first_burst_clamped_in_the_answer() {
    let mut n = normal(false);
    let a = n
        .answer(&kv(&[
            ("MaxBurstLength", "4096"),
            ("FirstBurstLength", "65536"),
        ]))
        .unwrap();
    assert_eq!(
        a,
        kv(&[("MaxBurstLength", "4096"), ("FirstBurstLength", "4096")])
    );
}

#[test]
fn unlimited_unexpected_pdus() {
    let mut prefs = SessionParams::target_defaults(true);
    prefs.max_outstanding_unexpected_pdus = 16;
    let mut n = Negotiation::new(prefs, true, SessionType::Normal);
    let a = n
        .answer(&kv(&[("MaxOutstandingUnexpectedPDUs", "0")]))
        .unwrap();
    assert_eq!(a, kv(&[("MaxOutstandingUnexpectedPDUs", "16")]));
    let a = n
        .answer(&kv(&[("MaxOutstandingUnexpectedPDUs", "8")]))
        .unwrap();
    assert_eq!(a, kv(&[("MaxOutstandingUnexpectedPDUs", "8")]));
}

#[test]
fn lists_unknown_private_and_irrelevant() {
    let mut n = Negotiation::new(
        SessionParams::target_defaults(false),
        false,
        SessionType::Discovery,
    );
    let a = n
        .answer(&kv(&[
            ("HeaderDigest", "CRC32C,None"),
            ("DataDigest", "CRC32C"),
            ("X-com.example.Foo", "1"),
            ("X#org.example.bar", "1"),
            ("Frobnicate", "Yes"),
            ("MaxBurstLength", "4096"),
            ("ImmediateData", "Yes"),
            ("OFMarkInt", "2048~8192"),
            ("TargetAlias", "me"),
            ("InitiatorName", "iqn.x"),
            ("AuthMethod", "None"),
        ]))
        .unwrap();
    assert_eq!(
        a,
        kv(&[
            ("HeaderDigest", "None"),
            ("DataDigest", "Reject"),
            ("X-com.example.Foo", "NotUnderstood"),
            ("X#org.example.bar", "NotUnderstood"),
            ("Frobnicate", "NotUnderstood"),
            ("MaxBurstLength", "Irrelevant"),
            ("ImmediateData", "Irrelevant"),
            ("OFMarkInt", "Irrelevant"),
            ("TargetAlias", "Reject"),
        ])
    );
}

#[test]
fn numbers_and_booleans() {
    assert_eq!(parse_number("8192"), Some(8192));
    assert_eq!(parse_number("0x2000"), Some(8192));
    assert_eq!(parse_number("0X2000"), Some(8192));
    assert_eq!(parse_number(""), None);
    assert_eq!(parse_number("0x"), None);
    assert_eq!(parse_number("-1"), None);
    assert_eq!(parse_number("+1"), None);
    assert_eq!(parse_number("12a"), None);
    assert_eq!(parse_number("99999999999999999999999"), None);
    assert_eq!(parse_bool("Yes"), Some(true));
    assert_eq!(parse_bool("yes"), None);
}

#[test]
fn portals_and_acl() {
    let v4 = Portal {
        addr: "192.0.2.10".parse().unwrap(),
        port: 3260,
        tpgt: 1,
    };
    assert_eq!(v4.to_string(), "192.0.2.10:3260,1");
    let v6 = Portal {
        addr: "2001:db8::1".parse().unwrap(),
        port: 3260,
        tpgt: 2,
    };
    assert_eq!(v6.to_string(), "[2001:db8::1]:3260,2");
    let acl = InitiatorAcl::Only(vec!["iqn.2004-10.com.ubuntu:01:abc".into()]);
    assert!(acl.allows("IQN.2004-10.com.ubuntu:01:ABC"));
    assert!(!acl.allows("iqn.other"));
    assert!(InitiatorAcl::Any.allows("anything"));
}

proptest! {
    #[test]
    fn any_offer_never_panics(pairs in proptest::collection::vec(
        (prop::sample::select(vec![
            "MaxBurstLength", "FirstBurstLength", "ImmediateData", "InitialR2T", "RDMAExtensions",
            "DefaultTime2Wait", "MaxOutstandingUnexpectedPDUs", "TargetRecvDataSegmentLength",
            "HeaderDigest", "ErrorRecoveryLevel", "X-y", "MaxRecvDataSegmentLength",
        ]), "[0-9a-zA-Z,x]{0,12}"), 0..12),
        iser in any::<bool>(), discovery in any::<bool>(),
    ) {
        let st = if discovery { SessionType::Discovery } else { SessionType::Normal };
        let mut n = Negotiation::new(SessionParams::target_defaults(iser), iser, st);
        let offer: Vec<KeyValue> = pairs.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
        if n.answer(&offer).is_ok() {
            let _ = n.declarations();
            if let Ok(p) = n.finish() {
                prop_assert!(p.first_burst_length <= p.max_burst_length);
                prop_assert!(p.max_burst_length <= SessionParams::default().max_burst_length);
            }
        }
    }
}
