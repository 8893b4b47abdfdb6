//! End-to-end NVMe in-band authentication (DH-HMAC-CHAP, issue 19) over the in-memory fabric,
//! with the user-space host running the Linux host's side of the exchange
//! (`raidline_initiator::controller::authenticate`):
//! - one-way and bidirectional, each hash, the null group and ffdhe2048, on the admin queue and
//!   on every I/O queue, then I/O;
//! - a wrong host secret, a wrong controller secret and a missing secret are refused, and the
//!   controller's status says so;
//! - before it authenticated, a queue answers commands with Authentication Required (DNR), and
//!   malformed Authentication Send / Receive commands get Invalid Field.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use raidline_auth::{DhGroup, HashFn, Policy, Secret};
use raidline_initiator::controller::HostSecrets;
use raidline_initiator::{Error, Lba, Nsid};
use raidline_proto::auth::{Message, SECP_INBAND, SPSP_DHCHAP};
use raidline_proto::fabrics::{AuthDirection, Authentication, ConnectData};
use raidline_proto::text::Nqn;
use raidline_proto::{AdminOpcode, Sqe, Status, StatusCode};

fn secret(b: u8) -> Secret {
    Secret::from_key(&[b; 32], Some(HashFn::Sha256)).unwrap()
}

fn auth_rig(hashes: &[HashFn], groups: &[DhGroup], ctrl: Option<Secret>) -> Rig {
    let mut auth = BTreeMap::new();
    auth.insert(
        host(1).hostnqn,
        Arc::new(Policy {
            secret: secret(1),
            ctrl_secret: ctrl,
            hashes: hashes.to_vec(),
            groups: groups.to_vec(),
        }),
    );
    rig(&RigOptions {
        auth,
        ..RigOptions::default()
    })
}

fn with_secrets(secret: Secret, ctrl: Option<Secret>) -> raidline_initiator::ControllerOptions {
    let mut o = options(1);
    o.io_queues = 2;
    o.auth = Some(HostSecrets {
        secret,
        ctrl_secret: ctrl,
    });
    o
}

/// raidline_auth_total: (authenticated, refused, host_failed).
fn auth_counts(rig: &Rig) -> (u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let m = &rig.target.shared().data_path;
    (
        m.auth_authenticated.load(Relaxed),
        m.auth_refused.load(Relaxed),
        m.auth_host_failed.load(Relaxed),
    )
}

fn auth_status(rig: &Rig) -> Vec<String> {
    let c = rig.target.shared().controllers.lock().unwrap();
    c.values().map(|e| e.auth.clone()).collect()
}

#[test]
fn authenticated_hosts_do_io_on_every_queue() {
    for (hash, group, bidi) in [
        (HashFn::Sha256, DhGroup::Null, false),
        (HashFn::Sha256, DhGroup::Ffdhe2048, true),
        (HashFn::Sha384, DhGroup::Ffdhe2048, false),
        (HashFn::Sha512, DhGroup::Null, true),
    ] {
        let ctrl = bidi.then(|| secret(2));
        let rig = auth_rig(&[hash], &[group], ctrl.clone());
        let mut c = connect_with(&rig, 1, with_secrets(secret(1), ctrl)).unwrap();
        let ns = c.namespace(Nsid(1)).unwrap();
        let data = pattern(7, 8 * 4096);
        for q in 0..2 {
            c.write(q, &ns, Lba(64 * q as u64), &data).unwrap();
            let mut back = vec![0u8; data.len()];
            c.read(q, &ns, Lba(64 * q as u64), &mut back).unwrap();
            assert!(back == data, "queue {q}");
        }
        let want = format!(
            "{} {}{}",
            hash,
            group,
            if bidi { " bidirectional" } else { "" }
        );
        assert_eq!(auth_status(&rig), vec![want]);
        // The steps ran on the authentication thread, not on a poller or the control thread.
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|n| n.trim().to_string())
            .collect();
        assert!(names.iter().any(|n| n == "raidline-auth"), "{names:?}");
        assert_eq!(
            auth_counts(&rig),
            (3, 0, 0),
            "the admin queue and both I/O queues"
        );
        // Hosts without an [[subsystem.auth]] entry connect as before.
        let mut other = connect(&rig, 2);
        assert!(other.namespace(Nsid(1)).is_ok());
        other.shutdown().unwrap();
        c.shutdown().unwrap();
    }
}

fn protocol_error(r: Result<impl Sized, Error>) -> String {
    match r {
        Err(Error::Protocol(m)) => m,
        Err(e) => panic!("refused with another error: {e}"),
        Ok(_) => panic!("connected"),
    }
}

#[test]
fn wrong_or_missing_secrets_are_refused() {
    let rig = auth_rig(&[HashFn::Sha256], &[DhGroup::Ffdhe2048], Some(secret(2)));
    let m = protocol_error(connect_with(&rig, 1, with_secrets(secret(9), None)));
    assert!(
        m.contains("refused authentication (reason explanation 0x01)"),
        "{m}"
    );
    assert_eq!(auth_counts(&rig), (0, 1, 0), "refused by the target");
    let m = protocol_error(connect_with(
        &rig,
        1,
        with_secrets(secret(1), Some(secret(3))),
    ));
    assert!(
        m.contains("the controller's response does not match"),
        "{m}"
    );
    assert_eq!(auth_counts(&rig), (0, 1, 1), "ended by the host");
    let m = protocol_error(connect_with(&rig, 1, options(1)));
    assert!(m.contains("requires in-band authentication"), "{m}");
    // The right secrets still work.
    let mut c = connect_with(&rig, 1, with_secrets(secret(1), Some(secret(2)))).unwrap();
    assert!(c.namespace(Nsid(1)).is_ok());
    assert_eq!(
        auth_counts(&rig),
        (3, 1, 1),
        "the admin queue and both I/O queues"
    );
    c.shutdown().unwrap();
}

#[test]
fn an_unauthenticated_queue_answers_authentication_required() {
    let rig = auth_rig(&[HashFn::Sha256], &[DhGroup::Null], None);
    let mut q =
        RawQueue::connect(&rig.net, "raw", rig.target.local_addrs()[0], 0, 32, 0xFFFF).unwrap();
    let data = ConnectData {
        hostid: host(1).hostid,
        cntlid: 0xFFFF,
        subnqn: Nqn::new(SUBNQN).unwrap(),
        hostnqn: host(1).hostnqn,
    };
    let cqe = q.fabrics_connect(0, &data).unwrap();
    assert!(cqe.status.is_success());
    assert_eq!(
        cqe.dw0() >> 17 & 3,
        1,
        "ATR (bit 17, as Linux reads it) set in the Connect response"
    );
    // Identify before authenticating.
    let mut id = Sqe::new(AdminOpcode::IDENTIFY.0, 0);
    id.set_sgl1(&q.keyed(0, 4096)).unwrap();
    let cqe = q.exec(id, &[]).unwrap();
    assert_eq!(cqe.status, Status::new(StatusCode::AUTH_REQUIRED).dnr());
    // Malformed envelopes: wrong SECP, zero length, length other than the SGL's.
    let env = |secp: u8, length: u32, sgl_len: u32, q: &RawQueue| Authentication {
        cid: 0,
        direction: AuthDirection::Send,
        sgl: q.keyed(0, sgl_len),
        secp,
        spsp0: SPSP_DHCHAP,
        spsp1: SPSP_DHCHAP,
        length,
    };
    for (secp, len, sgl_len, want) in [
        (0xEA, 72, 72, StatusCode::INVALID_FIELD),
        (SECP_INBAND, 0, 0, StatusCode::INVALID_FIELD),
        (SECP_INBAND, 72, 64, StatusCode::DATA_SGL_LENGTH_INVALID),
    ] {
        let sqe = env(secp, len, sgl_len, &q).to_sqe().unwrap();
        let cqe = q.exec(sqe, &[]).unwrap();
        assert_eq!(
            cqe.status,
            Status::new(want).dnr(),
            "secp {secp:#x} len {len}/{sgl_len}"
        );
    }
    // A Receive before any Negotiate: a Failure1 (incorrect protocol message), command success.
    let recv = Authentication {
        direction: AuthDirection::Receive,
        sgl: q.keyed(0, 4096),
        length: 4096,
        ..env(SECP_INBAND, 4096, 4096, &q)
    };
    let cqe = q.exec(recv.to_sqe().unwrap(), &[]).unwrap();
    assert!(cqe.status.is_success());
    match Message::parse(&q.read_data(0, 4096)).unwrap() {
        Message::Failure {
            from_controller: true,
            explanation,
            ..
        } => assert_eq!(
            explanation,
            raidline_proto::auth::explanation::INCORRECT_PROTOCOL
        ),
        m => panic!("{m:?}"),
    }
    // Still refused.
    let mut id = Sqe::new(AdminOpcode::IDENTIFY.0, 0);
    id.set_sgl1(&q.keyed(0, 4096)).unwrap();
    assert_eq!(
        q.exec(id, &[]).unwrap().status.code,
        StatusCode::AUTH_REQUIRED
    );
}
