//! Tests of SendTargets and full-feature text requests.

use super::*;
use crate::iscsi::negotiate::{InitiatorAcl, Portal, SessionParams, TargetConfig};

fn config() -> LoginConfig {
    let mut a = TargetConfig::new("iqn.2024-01.org.raidline:a");
    a.portals = vec![
        Portal {
            addr: "192.0.2.10".parse().unwrap(),
            port: 3260,
            tpgt: 1,
        },
        Portal {
            addr: "fe80::1".parse().unwrap(),
            port: 3261,
            tpgt: 2,
        },
    ];
    let b = TargetConfig::new("iqn.2024-01.org.raidline:b");
    let mut hidden = TargetConfig::new("iqn.2024-01.org.raidline:hidden");
    hidden.initiators = InitiatorAcl::Only(vec!["iqn.other".into()]);
    LoginConfig::new(vec![a, b, hidden], false)
}

fn session(session_type: SessionType, target: Option<&str>) -> LoginSession {
    LoginSession {
        session_type,
        initiator_name: "iqn.me".into(),
        initiator_alias: None,
        target_name: target.map(str::to_owned),
        isid: [0; 6],
        tsih: 1,
        cid: 0,
        params: SessionParams::default(),
        exp_cmd_sn: 0,
        max_cmd_sn: 0,
        next_stat_sn: 0,
    }
}

#[test]
fn send_targets_all() {
    let r = text_response(
        &config(),
        &session(SessionType::Discovery, None),
        b"SendTargets=All\0",
    )
    .unwrap();
    let want = "TargetName=iqn.2024-01.org.raidline:a\0\
TargetAddress=192.0.2.10:3260,1\0\
TargetAddress=[fe80::1]:3261,2\0\
TargetName=iqn.2024-01.org.raidline:b\0";
    assert_eq!(String::from_utf8(r).unwrap(), want);
}

#[test]
fn send_targets_one_and_empty() {
    let c = config();
    let d = session(SessionType::Discovery, None);
    let r = text_response(&c, &d, b"SendTargets=iqn.2024-01.org.raidline:b\0").unwrap();
    assert_eq!(r, b"TargetName=iqn.2024-01.org.raidline:b\0");
    // Hidden and unknown targets: nothing.
    assert!(
        text_response(&c, &d, b"SendTargets=iqn.2024-01.org.raidline:hidden\0")
            .unwrap()
            .is_empty()
    );
    assert!(text_response(&c, &d, b"SendTargets=iqn.none\0")
        .unwrap()
        .is_empty());
    // Empty value: the session's target, normal sessions only.
    assert_eq!(
        text_response(&c, &d, b"SendTargets=\0").unwrap(),
        b"SendTargets=Reject\0"
    );
    let n = session(SessionType::Normal, Some("iqn.2024-01.org.raidline:b"));
    assert_eq!(
        text_response(&c, &n, b"SendTargets=\0").unwrap(),
        b"TargetName=iqn.2024-01.org.raidline:b\0"
    );
    assert_eq!(
        text_response(&c, &n, b"SendTargets=All\0").unwrap(),
        b"SendTargets=Reject\0"
    );
}

#[test]
fn other_keys_and_errors() {
    let c = config();
    let d = session(SessionType::Discovery, None);
    assert_eq!(
        text_response(&c, &d, b"MaxRecvDataSegmentLength=4096\0X-foo=1\0").unwrap(),
        b"MaxRecvDataSegmentLength=Reject\0X-foo=NotUnderstood\0"
    );
    assert!(text_response(&c, &d, b"SendTargets=All").is_err());
}
