//! End-to-end namespace changes at run time: the operator disables and re-enables a namespace
//! through the management API (`raidline ns disable|enable`). Every controller of the subsystem
//! gets a Namespace Attribute Changed notice naming the nsid in its Changed Namespace List; a
//! disabled namespace leaves the active list, reads as zeroes in Identify and answers I/O with
//! Internal Path Error (no DNR, as nvmet); re-enabled, it comes back with the same identifiers
//! and the same data.

mod common;

use common::*;
use raidline_initiator::{Lba, Nsid};
use raidline_proto::aen::{AsyncEvent, NoticeEvent};
use raidline_proto::identify::{Cns, IdentifyNamespace};
use raidline_proto::log::{ChangedNsList, LogPageId};
use raidline_proto::StatusCode;
use raidline_target::mgmt::Management;
use raidline_target::service::Api;

const BS: usize = 4096;

#[test]
fn disabling_and_enabling_a_namespace_tells_every_host() {
    let rig = default_rig();
    let api = Api::new(rig.target.shared().clone());
    let mut a = connect(&rig, 1);
    let mut b = connect(&rig, 2);
    let ns = a.namespace(Nsid(1)).unwrap();
    let before = a.identify_raw(Cns::NAMESPACE, 1).unwrap();
    let data = pattern(0x5EED, 64 * BS);
    a.write(0, &ns, Lba(128), &data).unwrap();
    assert_eq!(a.active_namespaces().unwrap(), vec![Nsid(1)]);

    // Wrong names are refused with what exists.
    let e = api.ns_set_active(SUBNQN, 2, false).unwrap_err();
    assert!(e.contains("no namespace 2") && e.contains("nsid 1"), "{e}");
    assert!(api
        .ns_set_active("nqn.2026-11.io.raidline:nosuch", 1, false)
        .is_err());

    let m = api.ns_set_active(SUBNQN, 1, false).unwrap();
    assert!(
        m.contains("disabled") && m.contains("2 controller(s)"),
        "{m}"
    );
    for (who, c) in [("host 1", &mut a), ("host 2", &mut b)] {
        let (events, lists) = await_ns_notice(c);
        assert!(
            events.contains(&AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED)),
            "{who}: {events:?}"
        );
        assert_eq!(events[0].log_page, LogPageId::CHANGED_NS_LIST, "{who}");
        assert_eq!(lists, vec![ChangedNsList::from_ids([1])], "{who}");
        assert!(c.active_namespaces().unwrap().is_empty(), "{who}");
        // NN still counts it; Identify Namespace of an inactive nsid is all zeroes.
        assert_eq!(c.identify_controller().unwrap().nn, 1, "{who}");
        let z = c.identify_raw(Cns::NAMESPACE, 1).unwrap();
        assert!(
            z.iter().all(|&x| x == 0),
            "{who}: identify of a disabled namespace"
        );
    }
    // I/O to it: Internal Path Error, retryable (no DNR).
    let mut back = vec![0u8; 8 * BS];
    let st = a
        .read(0, &ns, Lba(128), &mut back)
        .unwrap_err()
        .status()
        .expect("an NVMe status");
    assert_eq!(st.code, StatusCode::INTERNAL_PATH_ERROR);
    assert!(!st.dnr, "a disabled namespace may come back: {st:?}");
    // An nsid that was never configured stays Invalid Namespace with DNR.
    let st = a.flush(0, Nsid(9)).unwrap_err().status().unwrap();
    assert_eq!((st.code, st.dnr), (StatusCode::INVALID_NAMESPACE, true));
    // Flush of all namespaces has nothing to do and succeeds.
    a.flush(0, Nsid(0xFFFF_FFFF)).unwrap();
    // The status report shows it; disabling again changes nothing and tells nobody.
    assert!(!api.status().subsystems[0].namespaces[0].active);
    let m = api.ns_set_active(SUBNQN, 1, false).unwrap();
    assert!(m.contains("already disabled"), "{m}");
    // A host connecting now does not see it either.
    let mut c = connect(&rig, 3);
    assert!(c.active_namespaces().unwrap().is_empty());

    // Back: every host hears of it, identifiers and data are unchanged.
    api.ns_set_active(SUBNQN, 1, true).unwrap();
    for (who, c) in [("host 1", &mut a), ("host 2", &mut b), ("host 3", &mut c)] {
        let (_, lists) = await_ns_notice(c);
        assert_eq!(lists, vec![ChangedNsList::from_ids([1])], "{who}");
        assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)], "{who}");
        let id = c.identify_raw(Cns::NAMESPACE, 1).unwrap();
        assert_eq!(id, before, "{who}: identify namespace changed");
        let parsed = IdentifyNamespace::parse(&id).unwrap();
        assert_ne!(parsed.nguid, [0; 16], "{who}");
    }
    a.read(0, &ns, Lba(128), &mut back).unwrap();
    assert!(back == data[..8 * BS], "data after re-enable");
    assert!(api.status().subsystems[0].namespaces[0].active);
    for c in [a, b, c] {
        c.shutdown().unwrap();
    }
}
