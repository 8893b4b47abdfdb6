//! The DH-HMAC-CHAP responses (Linux `nvme_auth_augmented_challenge`, `nvmet_auth_host_hash`,
//! `nvmet_auth_ctrl_hash`).
//!
//! - augmented challenge: Ca = HMAC_H(H(shared secret), C), or C itself with the null group;
//! - R1 = HMAC_H(Kh', Ca1 ‖ le32 S1 ‖ le16 T_ID ‖ SC_C ‖ "HostHost" ‖ NQNh ‖ 0x00 ‖ NQNc);
//! - R2 = HMAC_H(Kc', Ca2 ‖ le32 S2 ‖ le16 T_ID ‖ SC_C ‖ "Controller" ‖ NQNc ‖ 0x00 ‖ NQNh).
//!
//! H is the negotiated hash; Kh' and Kc' are the transformed secrets ([`crate::Secret::transformed`]).
//! SC_C is 0: secure channel concatenation is not offered.

use zeroize::Zeroizing;

use crate::HashFn;

/// Ca = HMAC_H(H(session key), challenge); the challenge itself when there is no session key
/// (the null group).
pub fn augmented_challenge(
    h: HashFn,
    session: Option<&[u8]>,
    challenge: &[u8],
) -> Zeroizing<Vec<u8>> {
    match session {
        None => Zeroizing::new(challenge.to_vec()),
        Some(s) => h.hmac(&h.digest(s), &[challenge]),
    }
}

#[allow(clippy::too_many_arguments)]
fn response(
    h: HashFn,
    key: &[u8],
    challenge: &[u8],
    seqnum: u32,
    t_id: u16,
    role: &[u8],
    first: &str,
    second: &str,
) -> Zeroizing<Vec<u8>> {
    h.hmac(
        key,
        &[
            challenge,
            &seqnum.to_le_bytes(),
            &t_id.to_le_bytes(),
            &[0u8],
            role,
            first.as_bytes(),
            &[0u8],
            second.as_bytes(),
        ],
    )
}

/// R1, the host's response to the controller's (augmented) challenge C1 with sequence number S1.
pub fn host_response(
    h: HashFn,
    host_key: &[u8],
    challenge: &[u8],
    s1: u32,
    t_id: u16,
    hostnqn: &str,
    subnqn: &str,
) -> Zeroizing<Vec<u8>> {
    response(
        h,
        host_key,
        challenge,
        s1,
        t_id,
        b"HostHost",
        hostnqn,
        subnqn,
    )
}

/// R2, the controller's response to the host's (augmented) challenge C2 with sequence number S2.
pub fn controller_response(
    h: HashFn,
    ctrl_key: &[u8],
    challenge: &[u8],
    s2: u32,
    t_id: u16,
    subnqn: &str,
    hostnqn: &str,
) -> Zeroizing<Vec<u8>> {
    response(
        h,
        ctrl_key,
        challenge,
        s2,
        t_id,
        b"Controller",
        subnqn,
        hostnqn,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r1_is_the_hmac_of_the_fields_in_linux_order() {
        // Written out byte by byte as drivers/nvme/host/auth.c feeds its shash.
        let mut msg = vec![0xC1; 32];
        msg.extend_from_slice(&[0x78, 0x56, 0x34, 0x12, 0x02, 0x01, 0x00]);
        msg.extend_from_slice(b"HostHostnqn.h\0nqn.s");
        let r = host_response(
            HashFn::Sha256,
            b"k",
            &[0xC1; 32],
            0x12345678,
            0x0102,
            "nqn.h",
            "nqn.s",
        );
        assert_eq!(*r, *HashFn::Sha256.hmac(b"k", &[&msg]));
        let r2 = controller_response(
            HashFn::Sha256,
            b"k",
            &[0xC1; 32],
            0x12345678,
            0x0102,
            "nqn.s",
            "nqn.h",
        );
        let mut msg2 = msg[..39].to_vec();
        msg2.extend_from_slice(b"Controllernqn.s\0nqn.h");
        assert_eq!(*r2, *HashFn::Sha256.hmac(b"k", &[&msg2]));
        assert_eq!(
            *augmented_challenge(HashFn::Sha256, None, &[5; 32]),
            vec![5; 32]
        );
        let a = augmented_challenge(HashFn::Sha256, Some(&[9; 256]), &[5; 32]);
        assert_eq!(
            *a,
            *HashFn::Sha256.hmac(&HashFn::Sha256.digest(&[9; 256]), &[&[5; 32]])
        );
    }
}
