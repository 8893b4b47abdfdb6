//! DH-HMAC-CHAP messages (issue 19): any bytes parse or are refused; whatever parses rebuilds to
//! an equal message; and a controller-side transaction fed the bytes as a sequence of
//! Authentication Sends and Receives never panics and never authenticates a host that has not
//! answered its challenge.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use raidline_auth::{Authenticator, DhGroup, HashFn, Policy, Secret};
use raidline_proto::auth::Message;

fn fixed(buf: &mut [u8]) {
    buf.fill(0x5A);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        assert_eq!(Message::parse(&m.to_bytes()).unwrap(), m);
    }
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let policy = Arc::new(Policy {
        secret: Secret::from_key(&[1; 32], Some(HashFn::Sha256)).unwrap(),
        ctrl_secret: Some(Secret::from_key(&[2; 48], None).unwrap()),
        hashes: HashFn::ALL.to_vec(),
        groups: if first & 1 == 0 {
            vec![DhGroup::Null]
        } else {
            vec![DhGroup::Ffdhe2048, DhGroup::Null]
        },
    });
    let mut c = Authenticator::new(policy, "nqn.host", "nqn.sub").with_rng(fixed);
    // Chunks separated by 0xFF 0xFF; an empty chunk is a Receive.
    for chunk in rest.split(|&b| b == 0xFF) {
        if chunk.is_empty() {
            let _ = c.receive(usize::from(first) * 8);
        } else {
            let _ = c.send(chunk);
        }
        assert!(c.authenticated().is_none());
    }
});
