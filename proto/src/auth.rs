//! DH-HMAC-CHAP messages of NVMe in-band authentication (NVMe Base 2.0 §8.13, TP 8006), the
//! payloads of Authentication Send and Receive (SECP 0xE9, SPSP0 0x01, SPSP1 0x01).
//!
//! Layouts as Linux has them (`include/linux/nvme.h`, `struct nvmf_auth_*`). Every message starts
//! with the same 6 bytes: message type, message id, 2 reserved, transaction id (LE).
//!
//! | message | type | id | size |
//! | --- | --- | --- | --- |
//! | Negotiate | 0x00 | 0x00 | 8 + 64 × NAPD |
//! | Challenge | 0x01 | 0x01 | 16 + HL + DHVLEN |
//! | Reply | 0x01 | 0x02 | 16 + 2 × HL + DHVLEN |
//! | Success1 | 0x01 | 0x03 | 16 + HL |
//! | Success2 | 0x01 | 0x04 | 16 |
//! | Failure2 (host) / Failure1 (controller) | 0x00 | 0xF0 / 0xF1 | 8 |
//!
//! Parsers are total: any byte string gives a message or a [`ParseError`] naming the field.
//! Hosts may pad a Send's payload, so trailing bytes after a message are allowed and ignored.

use crate::bytes::{le16, le32, put_le16, put_le32};
use crate::ParseError;

/// The security protocol of NVMe in-band authentication.
pub const SECP_INBAND: u8 = 0xE9;
/// SPSP0 and SPSP1 of DH-HMAC-CHAP messages.
pub const SPSP_DHCHAP: u8 = 0x01;
/// Authentication protocol id of DH-HMAC-CHAP in a Negotiate descriptor.
pub const AUTH_ID_DHCHAP: u8 = 0x01;
/// Message type of Negotiate and Failure messages.
pub const TYPE_COMMON: u8 = 0x00;
/// Message type of the DH-HMAC-CHAP messages proper.
pub const TYPE_DHCHAP: u8 = 0x01;

/// Message ids.
pub mod id {
    /// AUTH_Negotiate.
    pub const NEGOTIATE: u8 = 0x00;
    /// DH-HMAC-CHAP_Challenge.
    pub const CHALLENGE: u8 = 0x01;
    /// DH-HMAC-CHAP_Reply.
    pub const REPLY: u8 = 0x02;
    /// DH-HMAC-CHAP_Success1.
    pub const SUCCESS1: u8 = 0x03;
    /// DH-HMAC-CHAP_Success2.
    pub const SUCCESS2: u8 = 0x04;
    /// AUTH_Failure2 (host to controller).
    pub const FAILURE2: u8 = 0xF0;
    /// AUTH_Failure1 (controller to host).
    pub const FAILURE1: u8 = 0xF1;
}

/// Hash function identifiers (Base Figure 194).
pub mod hash_id {
    /// SHA-256.
    pub const SHA256: u8 = 0x01;
    /// SHA-384.
    pub const SHA384: u8 = 0x02;
    /// SHA-512.
    pub const SHA512: u8 = 0x03;
}

/// Diffie-Hellman group identifiers (Base Figure 195).
pub mod dhgroup_id {
    /// No Diffie-Hellman exchange.
    pub const NULL: u8 = 0x00;
    /// ffdhe2048 (RFC 7919).
    pub const FFDHE2048: u8 = 0x01;
    /// ffdhe3072.
    pub const FFDHE3072: u8 = 0x02;
    /// ffdhe4096.
    pub const FFDHE4096: u8 = 0x03;
    /// ffdhe6144.
    pub const FFDHE6144: u8 = 0x04;
    /// ffdhe8192.
    pub const FFDHE8192: u8 = 0x05;
}

/// Failure reason code: authentication failed (the only one defined).
pub const REASON_FAILED: u8 = 0x01;

/// Failure reason code explanations (Base Figure 197).
pub mod explanation {
    /// Authentication failed.
    pub const FAILED: u8 = 0x01;
    /// No usable authentication protocol.
    pub const PROTOCOL_UNUSABLE: u8 = 0x02;
    /// Secure channel concatenation mismatch.
    pub const CONCAT_MISMATCH: u8 = 0x03;
    /// No usable hash function.
    pub const HASH_UNUSABLE: u8 = 0x04;
    /// No usable Diffie-Hellman group.
    pub const DHGROUP_UNUSABLE: u8 = 0x05;
    /// Incorrect payload.
    pub const INCORRECT_PAYLOAD: u8 = 0x06;
    /// Incorrect protocol message.
    pub const INCORRECT_PROTOCOL: u8 = 0x07;
}

/// Most identifiers one list of a protocol descriptor can hold (the 60-byte id list).
pub const MAX_IDS: usize = 30;

/// One DH-HMAC-CHAP protocol descriptor of a Negotiate (64 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// The authentication protocol (1 = DH-HMAC-CHAP).
    pub auth_id: u8,
    /// Hash function ids the host offers, in its order of preference.
    pub hashes: Vec<u8>,
    /// Diffie-Hellman group ids the host offers.
    pub dhgroups: Vec<u8>,
}

/// One authentication message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The host starts a transaction and offers what it can do.
    Negotiate {
        /// Transaction id.
        t_id: u16,
        /// Secure channel concatenation (0: none).
        sc_c: u8,
        /// The protocol descriptors.
        protocols: Vec<Protocol>,
    },
    /// The controller's challenge.
    Challenge {
        /// Transaction id.
        t_id: u16,
        /// The hash chosen.
        hash_id: u8,
        /// The DH group chosen.
        dhgroup_id: u8,
        /// S1, the controller's sequence number.
        seqnum: u32,
        /// C1, the challenge (hash length).
        challenge: Vec<u8>,
        /// The controller's DH public value (empty with the null group).
        dh_value: Vec<u8>,
    },
    /// The host's response.
    Reply {
        /// Transaction id.
        t_id: u16,
        /// R1, the host's response.
        response: Vec<u8>,
        /// C2, the host's challenge to the controller, when it wants the controller
        /// authenticated too (bidirectional).
        challenge: Option<Vec<u8>>,
        /// S2, the host's sequence number (0 when one-way).
        seqnum: u32,
        /// The host's DH public value.
        dh_value: Vec<u8>,
    },
    /// The controller accepted the host: R2 when bidirectional.
    Success1 {
        /// Transaction id.
        t_id: u16,
        /// Hash length (the length of R2, whether or not it is sent).
        hl: u8,
        /// R2, the controller's response.
        response: Option<Vec<u8>>,
    },
    /// The host accepted the controller's R2.
    Success2 {
        /// Transaction id.
        t_id: u16,
    },
    /// Failure2 (from the host) or Failure1 (from the controller).
    Failure {
        /// Transaction id.
        t_id: u16,
        /// True for Failure1 (controller to host).
        from_controller: bool,
        /// Reason code.
        reason: u8,
        /// Reason code explanation.
        explanation: u8,
    },
}

const WHAT: &str = "DH-HMAC-CHAP message";

fn trunc(need: usize, got: usize) -> ParseError {
    ParseError::Truncated {
        what: WHAT,
        need,
        got,
    }
}

fn bad(field: &'static str, offset: usize, value: u64) -> ParseError {
    ParseError::InvalidField {
        what: WHAT,
        field,
        offset,
        value,
    }
}

fn need(b: &[u8], n: usize) -> Result<(), ParseError> {
    if b.len() < n {
        Err(trunc(n, b.len()))
    } else {
        Ok(())
    }
}

fn header(ty: u8, id: u8, t_id: u16, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    v[0] = ty;
    v[1] = id;
    put_le16(&mut v, 4..6, t_id);
    v
}

impl Message {
    /// The transaction id.
    pub fn t_id(&self) -> u16 {
        match self {
            Message::Negotiate { t_id, .. }
            | Message::Challenge { t_id, .. }
            | Message::Reply { t_id, .. }
            | Message::Success1 { t_id, .. }
            | Message::Success2 { t_id }
            | Message::Failure { t_id, .. } => *t_id,
        }
    }

    /// The message's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Negotiate { .. } => "Negotiate",
            Message::Challenge { .. } => "Challenge",
            Message::Reply { .. } => "Reply",
            Message::Success1 { .. } => "Success1",
            Message::Success2 { .. } => "Success2",
            Message::Failure {
                from_controller: true,
                ..
            } => "Failure1",
            Message::Failure { .. } => "Failure2",
        }
    }

    /// Parses one message from the start of `b`.
    pub fn parse(b: &[u8]) -> Result<Message, ParseError> {
        need(b, 6)?;
        let (ty, id) = (b[0], b[1]);
        let t_id = le16(b, 4..6);
        match (ty, id) {
            (TYPE_COMMON, id::NEGOTIATE) => {
                need(b, 8)?;
                let napd = usize::from(b[7]);
                if napd == 0 || napd > 4 {
                    return Err(bad("napd", 7, napd as u64));
                }
                need(b, 8 + 64 * napd)?;
                let mut protocols = Vec::with_capacity(napd);
                for i in 0..napd {
                    let at = 8 + 64 * i;
                    let d = &b[at..at + 64];
                    let (halen, dhlen) = (usize::from(d[2]), usize::from(d[3]));
                    if halen > MAX_IDS {
                        return Err(bad("halen", at + 2, halen as u64));
                    }
                    if dhlen > MAX_IDS {
                        return Err(bad("dhlen", at + 3, dhlen as u64));
                    }
                    protocols.push(Protocol {
                        auth_id: d[0],
                        hashes: d[4..4 + halen].to_vec(),
                        dhgroups: d[4 + MAX_IDS..4 + MAX_IDS + dhlen].to_vec(),
                    });
                }
                Ok(Message::Negotiate {
                    t_id,
                    sc_c: b[6],
                    protocols,
                })
            }
            (TYPE_COMMON, id::FAILURE1 | id::FAILURE2) => {
                need(b, 8)?;
                Ok(Message::Failure {
                    t_id,
                    from_controller: id == id::FAILURE1,
                    reason: b[6],
                    explanation: b[7],
                })
            }
            (TYPE_DHCHAP, id::CHALLENGE) => {
                need(b, 16)?;
                let hl = usize::from(b[6]);
                let dhvlen = usize::from(le16(b, 10..12));
                need(b, 16 + hl + dhvlen)?;
                Ok(Message::Challenge {
                    t_id,
                    hash_id: b[8],
                    dhgroup_id: b[9],
                    seqnum: le32(b, 12..16),
                    challenge: b[16..16 + hl].to_vec(),
                    dh_value: b[16 + hl..16 + hl + dhvlen].to_vec(),
                })
            }
            (TYPE_DHCHAP, id::REPLY) => {
                need(b, 16)?;
                let hl = usize::from(b[6]);
                let cvalid = b[8];
                if cvalid > 1 {
                    return Err(bad("cvalid", 8, u64::from(cvalid)));
                }
                let dhvlen = usize::from(le16(b, 10..12));
                need(b, 16 + 2 * hl + dhvlen)?;
                let r = 16;
                let c = r + hl;
                let d = c + hl;
                Ok(Message::Reply {
                    t_id,
                    response: b[r..c].to_vec(),
                    challenge: (cvalid == 1).then(|| b[c..d].to_vec()),
                    seqnum: le32(b, 12..16),
                    dh_value: b[d..d + dhvlen].to_vec(),
                })
            }
            (TYPE_DHCHAP, id::SUCCESS1) => {
                need(b, 16)?;
                let hl = b[6];
                let rvalid = b[8];
                if rvalid > 1 {
                    return Err(bad("rvalid", 8, u64::from(rvalid)));
                }
                let response = if rvalid == 1 {
                    need(b, 16 + usize::from(hl))?;
                    Some(b[16..16 + usize::from(hl)].to_vec())
                } else {
                    None
                };
                Ok(Message::Success1 { t_id, hl, response })
            }
            (TYPE_DHCHAP, id::SUCCESS2) => {
                need(b, 16)?;
                Ok(Message::Success2 { t_id })
            }
            (TYPE_COMMON | TYPE_DHCHAP, _) => Err(bad("auth_id", 1, u64::from(id))),
            _ => Err(bad("auth_type", 0, u64::from(ty))),
        }
    }

    /// The message's bytes. Lengths that do not fit their fields (a hash longer than 255
    /// bytes, more than 30 ids, a DH value over 64 KiB) are cut to the field's limit.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Message::Negotiate {
                t_id,
                sc_c,
                protocols,
            } => {
                let n = protocols.len().min(255);
                let mut v = header(TYPE_COMMON, id::NEGOTIATE, *t_id, 8 + 64 * n);
                v[6] = *sc_c;
                v[7] = n as u8;
                for (i, p) in protocols.iter().take(n).enumerate() {
                    let d = &mut v[8 + 64 * i..8 + 64 * (i + 1)];
                    let h = p.hashes.len().min(MAX_IDS);
                    let g = p.dhgroups.len().min(MAX_IDS);
                    d[0] = p.auth_id;
                    d[2] = h as u8;
                    d[3] = g as u8;
                    d[4..4 + h].copy_from_slice(&p.hashes[..h]);
                    d[4 + MAX_IDS..4 + MAX_IDS + g].copy_from_slice(&p.dhgroups[..g]);
                }
                v
            }
            Message::Challenge {
                t_id,
                hash_id,
                dhgroup_id,
                seqnum,
                challenge,
                dh_value,
            } => {
                let hl = challenge.len().min(255);
                let dl = dh_value.len().min(0xFFFF);
                let mut v = header(TYPE_DHCHAP, id::CHALLENGE, *t_id, 16 + hl + dl);
                v[6] = hl as u8;
                v[8] = *hash_id;
                v[9] = *dhgroup_id;
                put_le16(&mut v, 10..12, dl as u16);
                put_le32(&mut v, 12..16, *seqnum);
                v[16..16 + hl].copy_from_slice(&challenge[..hl]);
                v[16 + hl..].copy_from_slice(&dh_value[..dl]);
                v
            }
            Message::Reply {
                t_id,
                response,
                challenge,
                seqnum,
                dh_value,
            } => {
                let hl = response.len().min(255);
                let dl = dh_value.len().min(0xFFFF);
                let mut v = header(TYPE_DHCHAP, id::REPLY, *t_id, 16 + 2 * hl + dl);
                v[6] = hl as u8;
                v[8] = u8::from(challenge.is_some());
                put_le16(&mut v, 10..12, dl as u16);
                put_le32(&mut v, 12..16, *seqnum);
                v[16..16 + hl].copy_from_slice(&response[..hl]);
                if let Some(c) = challenge {
                    let n = c.len().min(hl);
                    v[16 + hl..16 + hl + n].copy_from_slice(&c[..n]);
                }
                v[16 + 2 * hl..].copy_from_slice(&dh_value[..dl]);
                v
            }
            Message::Success1 { t_id, hl, response } => {
                let r = response.as_deref().unwrap_or(&[]);
                let n = r.len().min(usize::from(*hl));
                let mut v = header(TYPE_DHCHAP, id::SUCCESS1, *t_id, 16 + n);
                v[6] = *hl;
                v[8] = u8::from(response.is_some());
                v[16..].copy_from_slice(&r[..n]);
                v
            }
            Message::Success2 { t_id } => header(TYPE_DHCHAP, id::SUCCESS2, *t_id, 16),
            Message::Failure {
                t_id,
                from_controller,
                reason,
                explanation,
            } => {
                let id = if *from_controller {
                    id::FAILURE1
                } else {
                    id::FAILURE2
                };
                let mut v = header(TYPE_COMMON, id, *t_id, 8);
                v[6] = *reason;
                v[7] = *explanation;
                v
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn negotiate_as_linux_sends_it() {
        // Linux's host (nvme_auth_set_dhchap_negotiate_data): one DH-HMAC-CHAP descriptor,
        // hashes sha256/384/512, groups null and ffdhe2048..8192.
        let mut b = vec![0u8; 72];
        b[4] = 0x07; // t_id 7
        b[7] = 1;
        b[8] = AUTH_ID_DHCHAP;
        b[10] = 3;
        b[11] = 6;
        b[12..15].copy_from_slice(&[1, 2, 3]);
        b[42..48].copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        let m = Message::parse(&b).unwrap();
        assert_eq!(
            m,
            Message::Negotiate {
                t_id: 7,
                sc_c: 0,
                protocols: vec![Protocol {
                    auth_id: 1,
                    hashes: vec![1, 2, 3],
                    dhgroups: vec![0, 1, 2, 3, 4, 5],
                }],
            }
        );
        assert_eq!(m.to_bytes(), b);
    }

    #[test]
    fn challenge_and_reply_layouts() {
        let c = Message::Challenge {
            t_id: 0x0102,
            hash_id: 1,
            dhgroup_id: 1,
            seqnum: 0xAABBCCDD,
            challenge: vec![9; 32],
            dh_value: vec![7; 256],
        };
        let b = c.to_bytes();
        assert_eq!(b.len(), 16 + 32 + 256);
        assert_eq!(
            &b[..16],
            &[1, 1, 0, 0, 2, 1, 32, 0, 1, 1, 0, 1, 0xDD, 0xCC, 0xBB, 0xAA]
        );
        assert_eq!(Message::parse(&b).unwrap(), c);
        let r = Message::Reply {
            t_id: 3,
            response: vec![1; 48],
            challenge: Some(vec![2; 48]),
            seqnum: 5,
            dh_value: vec![],
        };
        let b = r.to_bytes();
        assert_eq!(b.len(), 16 + 96);
        assert_eq!((b[6], b[8]), (48, 1));
        assert_eq!(Message::parse(&b).unwrap(), r);
    }

    #[test]
    fn malformed_messages_name_the_field() {
        assert!(matches!(
            Message::parse(&[1, 2]),
            Err(ParseError::Truncated { need: 6, .. })
        ));
        assert!(matches!(
            Message::parse(&[7, 0, 0, 0, 0, 0, 0, 0]),
            Err(ParseError::InvalidField {
                field: "auth_type",
                ..
            })
        ));
        assert!(matches!(
            Message::parse(&[1, 9, 0, 0, 0, 0, 0, 0]),
            Err(ParseError::InvalidField {
                field: "auth_id",
                ..
            })
        ));
        // A Negotiate that claims two descriptors but carries one.
        let mut b = vec![0u8; 72];
        b[7] = 2;
        assert!(matches!(
            Message::parse(&b),
            Err(ParseError::Truncated { need: 136, .. })
        ));
        b[7] = 1;
        b[10] = 31;
        assert!(matches!(
            Message::parse(&b),
            Err(ParseError::InvalidField { field: "halen", .. })
        ));
        // A Reply whose DH value runs past the buffer.
        let mut r = Message::Reply {
            t_id: 0,
            response: vec![0; 32],
            challenge: None,
            seqnum: 0,
            dh_value: vec![0; 10],
        }
        .to_bytes();
        r.truncate(r.len() - 1);
        assert!(matches!(
            Message::parse(&r),
            Err(ParseError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn parse_is_total_and_round_trips(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(m) = Message::parse(&b) {
                let again = m.to_bytes();
                prop_assert_eq!(Message::parse(&again).unwrap(), m);
            }
        }
    }
}
