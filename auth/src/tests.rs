//! Whole transactions between [`HostAuth`] and [`Authenticator`], and every refusal.

use std::sync::Arc;

use proptest::prelude::*;
use raidline_proto::auth::{explanation, Message};

use crate::*;

const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:0c468c4d-a385-47e0-8299-6e95051277db";
const SUB: &str = "nqn.2026-12.io.raidline:array0";

fn secret(b: u8) -> Secret {
    Secret::from_key(&[b; 32], Some(HashFn::Sha256)).unwrap()
}

fn policy(hashes: &[HashFn], groups: &[DhGroup], ctrl: Option<Secret>) -> Arc<Policy> {
    Arc::new(Policy {
        secret: secret(1),
        ctrl_secret: ctrl,
        hashes: hashes.to_vec(),
        groups: groups.to_vec(),
    })
}

fn failure1(v: &[u8]) -> u8 {
    match Message::parse(v).unwrap() {
        Message::Failure {
            from_controller: true,
            explanation,
            ..
        } => explanation,
        m => panic!("expected Failure1, got {m:?}"),
    }
}

/// Runs a whole transaction; the controller's events and the host's result.
fn run(c: &mut Authenticator, mut h: HostAuth) -> (Vec<Event>, Result<(), HostError>) {
    let mut ev = vec![c.send(&h.negotiate())];
    let ch = c.receive(4096).unwrap();
    assert_eq!(ch.len(), 4096, "padded to the allocation length");
    let reply = match h.reply(&ch) {
        Ok(r) => r,
        Err(e) => return (ev, Err(e)),
    };
    ev.push(c.send(&reply));
    let s1 = c.receive(4096).unwrap();
    match h.success1(&s1) {
        Ok(Some(s2)) => {
            ev.push(c.send(&s2));
            (ev, Ok(()))
        }
        Ok(None) => (ev, Ok(())),
        Err(e) => {
            if let Some(f) = h.failure2(&e) {
                ev.push(c.send(&f));
            }
            (ev, Err(e))
        }
    }
}

#[test]
fn one_way_and_bidirectional_with_every_hash_and_the_smaller_groups() {
    for hash in HashFn::ALL {
        for group in [DhGroup::Null, DhGroup::Ffdhe2048] {
            for ctrl in [None, Some(secret(2))] {
                let p = policy(&[hash], &[group], ctrl.clone());
                let mut c = Authenticator::new(p, HOST, SUB);
                let h = HostAuth::new(secret(1), ctrl.clone(), HOST, SUB, 3);
                let (ev, r) = run(&mut c, h);
                r.unwrap();
                let want = Outcome {
                    hash,
                    group,
                    bidirectional: ctrl.is_some(),
                };
                assert_eq!(
                    ev.last(),
                    Some(&Event::Authenticated(want)),
                    "{hash} {group}"
                );
                assert_eq!(c.authenticated(), Some(want));
                assert_eq!(c.step(), Step::Done);
            }
        }
    }
}

#[test]
fn the_largest_group_works_too() {
    let p = policy(&[HashFn::Sha512], &[DhGroup::Ffdhe8192], Some(secret(2)));
    let mut c = Authenticator::new(p, HOST, SUB);
    let (_, r) = run(
        &mut c,
        HostAuth::new(secret(1), Some(secret(2)), HOST, SUB, 0),
    );
    r.unwrap();
    assert_eq!(c.authenticated().map(|o| o.group), Some(DhGroup::Ffdhe8192));
}

#[test]
fn wrong_host_secret_is_refused_with_failure1() {
    let p = policy(&[HashFn::Sha256], &[DhGroup::Ffdhe2048], None);
    let mut c = Authenticator::new(p, HOST, SUB);
    let (ev, r) = run(&mut c, HostAuth::new(secret(9), None, HOST, SUB, 1));
    assert_eq!(r, Err(HostError::Refused(explanation::FAILED)));
    assert!(
        matches!(&ev[1], Event::Refused { explanation: 1, why } if why.contains("does not match"))
    );
    assert_eq!(c.authenticated(), None);
    // The same secret presented for another host NQN is another transformed key.
    let p = policy(&[HashFn::Sha256], &[DhGroup::Null], None);
    let mut c = Authenticator::new(p, HOST, SUB);
    let (_, r) = run(&mut c, HostAuth::new(secret(1), None, "nqn.other", SUB, 1));
    assert_eq!(r, Err(HostError::Refused(explanation::FAILED)));
}

#[test]
fn wrong_controller_secret_fails_on_the_host_and_the_controller_hears_failure2() {
    let p = policy(&[HashFn::Sha384], &[DhGroup::Null], Some(secret(2)));
    let mut c = Authenticator::new(p, HOST, SUB);
    let (ev, r) = run(
        &mut c,
        HostAuth::new(secret(1), Some(secret(3)), HOST, SUB, 1),
    );
    assert_eq!(r, Err(HostError::ControllerNotAuthenticated));
    assert_eq!(
        ev.last(),
        Some(&Event::HostFailed {
            explanation: explanation::FAILED
        })
    );
    assert_eq!(c.authenticated(), None);
    // Bidirectional asked of a controller without a controller secret.
    let p = policy(&[HashFn::Sha256], &[DhGroup::Null], None);
    let mut c = Authenticator::new(p, HOST, SUB);
    let (_, r) = run(
        &mut c,
        HostAuth::new(secret(1), Some(secret(2)), HOST, SUB, 1),
    );
    assert_eq!(r, Err(HostError::Refused(explanation::FAILED)));
}

#[test]
fn negotiation_refusals_carry_their_reason() {
    let h = HostAuth::new(secret(1), None, HOST, SUB, 5);
    // No hash in common: the host offers all three, so build a Negotiate offering only SHA-512.
    let mut n = Message::parse(&h.negotiate()).unwrap();
    if let Message::Negotiate { protocols, .. } = &mut n {
        protocols[0].hashes = vec![3];
        protocols[0].dhgroups = vec![0];
    }
    let mut c = Authenticator::new(policy(&[HashFn::Sha256], &[DhGroup::Null], None), HOST, SUB);
    assert!(matches!(
        c.send(&n.to_bytes()),
        Event::Refused { explanation: 4, .. }
    ));
    assert_eq!(
        failure1(&c.receive(4096).unwrap()),
        explanation::HASH_UNUSABLE
    );
    let mut c = Authenticator::new(
        policy(&[HashFn::Sha512], &[DhGroup::Ffdhe2048], None),
        HOST,
        SUB,
    );
    assert!(matches!(
        c.send(&n.to_bytes()),
        Event::Refused { explanation: 5, .. }
    ));
    // Secure channel concatenation is not offered.
    if let Message::Negotiate { sc_c, .. } = &mut n {
        *sc_c = 2;
    }
    let mut c = Authenticator::new(policy(&[HashFn::Sha512], &[DhGroup::Null], None), HOST, SUB);
    assert!(matches!(
        c.send(&n.to_bytes()),
        Event::Refused { explanation: 3, .. }
    ));
}

#[test]
fn out_of_order_messages_and_foreign_transactions_are_refused() {
    let p = policy(&[HashFn::Sha256], &[DhGroup::Null], None);
    // A Reply before any Negotiate.
    let mut c = Authenticator::new(p.clone(), HOST, SUB);
    let r = Message::Reply {
        t_id: 0,
        response: vec![0; 32],
        challenge: None,
        seqnum: 0,
        dh_value: vec![],
    };
    assert!(matches!(
        c.send(&r.to_bytes()),
        Event::Refused { explanation: 7, .. }
    ));
    assert_eq!(
        failure1(&c.receive(4096).unwrap()),
        explanation::INCORRECT_PROTOCOL
    );
    // A Reply with another transaction id.
    let mut c = Authenticator::new(p.clone(), HOST, SUB);
    let mut h = HostAuth::new(secret(1), None, HOST, SUB, 7);
    c.send(&h.negotiate());
    let mut reply = h.reply(&c.receive(4096).unwrap()).unwrap();
    reply[4] = 8;
    assert!(matches!(
        c.send(&reply),
        Event::Refused { explanation: 6, .. }
    ));
    // A Receive when nothing is to be sent: Failure1.
    let mut c = Authenticator::new(p.clone(), HOST, SUB);
    assert_eq!(
        failure1(&c.receive(4096).unwrap()),
        explanation::INCORRECT_PROTOCOL
    );
    // Too small an allocation length: the step stays, the caller answers Invalid Field.
    let mut c = Authenticator::new(p, HOST, SUB);
    c.send(&HostAuth::new(secret(1), None, HOST, SUB, 0).negotiate());
    assert_eq!(c.receive(20), Err(48));
    assert_eq!(c.step(), Step::Challenge);
}

#[test]
fn a_new_negotiate_reauthenticates() {
    let p = policy(&[HashFn::Sha256], &[DhGroup::Ffdhe2048], None);
    let mut c = Authenticator::new(p, HOST, SUB);
    run(&mut c, HostAuth::new(secret(1), None, HOST, SUB, 0))
        .1
        .unwrap();
    run(&mut c, HostAuth::new(secret(1), None, HOST, SUB, 1))
        .1
        .unwrap();
    assert!(c.authenticated().is_some());
    // A failed re-authentication takes the authentication away.
    let (_, r) = run(&mut c, HostAuth::new(secret(4), None, HOST, SUB, 2));
    assert!(r.is_err());
    assert_eq!(c.authenticated(), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Any sequence of Sends and Receives: no panic, and never authenticated without a
    /// valid response.
    #[test]
    fn hostile_sequences_never_authenticate(
        ops in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..120).prop_map(Some),
                Just(None),
            ],
            0..12,
        ),
        al in 0usize..200,
    ) {
        let p = policy(&HashFn::ALL, &[DhGroup::Null], None);
        let mut c = Authenticator::new(p, HOST, SUB);
        for op in ops {
            match op {
                Some(b) => { c.send(&b); }
                None => { let _ = c.receive(al); }
            }
            prop_assert_eq!(c.authenticated(), None);
        }
    }
}

/// What an exchange costs the controller per queue (its key pair at the Challenge, the shared
/// secret at the Reply): printed for the README (`cargo test --release -p raidline-auth
/// exchange_cost -- --nocapture`); the bound only catches a runaway exponentiation.
#[test]
fn exchange_cost_per_group() {
    for g in [
        DhGroup::Ffdhe2048,
        DhGroup::Ffdhe3072,
        DhGroup::Ffdhe4096,
        DhGroup::Ffdhe6144,
        DhGroup::Ffdhe8192,
    ] {
        let peer = g.keypair(&[0x33; 64]).unwrap();
        let t = std::time::Instant::now();
        let mine = g.keypair(&[0x44; 64]).unwrap();
        let s = mine.shared(&peer.public).unwrap();
        let took = t.elapsed();
        assert_eq!(s.len(), g.value_len());
        eprintln!("{g}: controller's key pair + shared secret {took:?}");
        assert!(took < std::time::Duration::from_secs(60), "{g}: {took:?}");
    }
}
