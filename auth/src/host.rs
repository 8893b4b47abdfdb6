//! The host's side of a DH-HMAC-CHAP transaction, as the Linux host runs it
//! (`drivers/nvme/host/auth.c`): for in-process hosts (`raidline-initiator`) and tests.

use raidline_proto::auth::{dhgroup_id, explanation, Message, Protocol, AUTH_ID_DHCHAP};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::{augmented_challenge, controller_response, host_response, DhGroup, HashFn, Secret};

/// Why the host gives up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The controller sent a Failure1.
    #[error("the controller refused authentication (reason explanation {0:#04x})")]
    Refused(u8),
    /// The controller's message is not what the host expected.
    #[error("unexpected or malformed message from the controller: {0}")]
    Protocol(String),
    /// The controller's response R2 does not match the controller secret.
    #[error("the controller's response does not match the controller secret")]
    ControllerNotAuthenticated,
}

impl HostError {
    /// The reason explanation of the Failure2 the host sends for this error, if it sends one.
    pub fn failure2(&self) -> Option<u8> {
        match self {
            HostError::Refused(_) => None,
            HostError::Protocol(_) => Some(explanation::INCORRECT_PAYLOAD),
            HostError::ControllerNotAuthenticated => Some(explanation::FAILED),
        }
    }
}

/// One host queue's transaction.
pub struct HostAuth {
    secret: Secret,
    ctrl_secret: Option<Secret>,
    hostnqn: String,
    subnqn: String,
    t_id: u16,
    hash: HashFn,
    c2: Option<crate::HostChallenge>,
}

impl HostAuth {
    /// A transaction `t_id` of host `hostnqn` with subsystem `subnqn`; with a controller secret
    /// the host asks the controller to authenticate too.
    pub fn new(
        secret: Secret,
        ctrl_secret: Option<Secret>,
        hostnqn: &str,
        subnqn: &str,
        t_id: u16,
    ) -> HostAuth {
        HostAuth {
            secret,
            ctrl_secret,
            hostnqn: hostnqn.to_string(),
            subnqn: subnqn.to_string(),
            t_id,
            hash: HashFn::Sha256,
            c2: None,
        }
    }

    /// The Negotiate, offering every hash and group as Linux does.
    pub fn negotiate(&self) -> Vec<u8> {
        Message::Negotiate {
            t_id: self.t_id,
            sc_c: 0,
            protocols: vec![Protocol {
                auth_id: AUTH_ID_DHCHAP,
                hashes: HashFn::ALL.iter().map(|h| h.id()).collect(),
                dhgroups: [
                    dhgroup_id::NULL,
                    dhgroup_id::FFDHE2048,
                    dhgroup_id::FFDHE3072,
                    dhgroup_id::FFDHE4096,
                    dhgroup_id::FFDHE6144,
                    dhgroup_id::FFDHE8192,
                ]
                .to_vec(),
            }],
        }
        .to_bytes()
    }

    /// Takes the Challenge and gives the Reply.
    pub fn reply(&mut self, challenge: &[u8]) -> Result<Vec<u8>, HostError> {
        let (hash_id, group_id, s1, c1, dh) = match Message::parse(challenge) {
            Ok(Message::Challenge {
                t_id,
                hash_id,
                dhgroup_id,
                seqnum,
                challenge,
                dh_value,
            }) if t_id == self.t_id => (hash_id, dhgroup_id, seqnum, challenge, dh_value),
            Ok(Message::Failure { explanation, .. }) => {
                return Err(HostError::Refused(explanation))
            }
            Ok(m) => {
                return Err(HostError::Protocol(format!(
                    "{} instead of Challenge",
                    m.name()
                )))
            }
            Err(e) => return Err(HostError::Protocol(e.to_string())),
        };
        let h = HashFn::from_id(hash_id)
            .ok_or_else(|| HostError::Protocol(format!("hash id {hash_id}")))?;
        let g = DhGroup::from_id(group_id)
            .ok_or_else(|| HostError::Protocol(format!("DH group id {group_id}")))?;
        if c1.len() != h.len() {
            return Err(HostError::Protocol(format!(
                "challenge of {} bytes",
                c1.len()
            )));
        }
        self.hash = h;
        let (public, session) = if g == DhGroup::Null {
            (Vec::new(), None)
        } else {
            let mut r = Zeroizing::new(vec![0u8; 64]);
            crate::random(&mut r);
            let k = g
                .keypair(&r)
                .ok_or_else(|| HostError::Protocol("no key pair".into()))?;
            let s = k
                .shared(&dh)
                .map_err(|e| HostError::Protocol(e.to_string()))?;
            (k.public.clone(), Some(s))
        };
        let key = self.secret.transformed(&self.hostnqn);
        let ca = augmented_challenge(h, session.as_deref().map(|v| &v[..]), &c1);
        let r1 = host_response(h, &key, &ca, s1, self.t_id, &self.hostnqn, &self.subnqn);
        let c2 = self.ctrl_secret.as_ref().map(|_| {
            let mut c = Zeroizing::new(vec![0u8; h.len()]);
            crate::random(&mut c);
            let mut s = [0u8; 4];
            crate::random(&mut s);
            (u32::from_le_bytes(s).max(1), c)
        });
        let msg = Message::Reply {
            t_id: self.t_id,
            response: r1.to_vec(),
            challenge: c2.as_ref().map(|(_, c)| c.to_vec()),
            seqnum: c2.as_ref().map_or(0, |(s, _)| *s),
            dh_value: public,
        };
        self.c2 = c2.map(|(s2, c2)| crate::HostChallenge { s2, c2, session });
        Ok(msg.to_bytes())
    }

    /// Takes the Success1; gives the Success2 to send when the controller authenticated too.
    pub fn success1(&mut self, success1: &[u8]) -> Result<Option<Vec<u8>>, HostError> {
        let r2 = match Message::parse(success1) {
            Ok(Message::Success1 { t_id, response, .. }) if t_id == self.t_id => response,
            Ok(Message::Failure { explanation, .. }) => {
                return Err(HostError::Refused(explanation))
            }
            Ok(m) => {
                return Err(HostError::Protocol(format!(
                    "{} instead of Success1",
                    m.name()
                )))
            }
            Err(e) => return Err(HostError::Protocol(e.to_string())),
        };
        let Some(crate::HostChallenge { s2, c2, session }) = self.c2.take() else {
            return Ok(None);
        };
        let Some(cs) = &self.ctrl_secret else {
            return Ok(None);
        };
        let h = self.hash;
        let key = cs.transformed(&self.subnqn);
        let ca = augmented_challenge(h, session.as_deref().map(|v| &v[..]), &c2);
        let want = controller_response(h, &key, &ca, s2, self.t_id, &self.subnqn, &self.hostnqn);
        match r2 {
            Some(r) if bool::from(want.ct_eq(&r)) => {
                Ok(Some(Message::Success2 { t_id: self.t_id }.to_bytes()))
            }
            _ => Err(HostError::ControllerNotAuthenticated),
        }
    }

    /// The Failure2 for `err`, when the host sends one.
    pub fn failure2(&self, err: &HostError) -> Option<Vec<u8>> {
        err.failure2().map(|x| {
            Message::Failure {
                t_id: self.t_id,
                from_controller: false,
                reason: raidline_proto::auth::REASON_FAILED,
                explanation: x,
            }
            .to_bytes()
        })
    }
}
