//! The controller's side of one queue's DH-HMAC-CHAP transactions.
//!
//! The queue feeds every Authentication Send payload to [`Authenticator::send`] and answers every
//! Authentication Receive with [`Authenticator::receive`]. As in Linux's nvmet
//! (`fabrics-cmd-auth.c`), a protocol error is not a command error: the Send completes
//! successfully and the next Receive carries a Failure1 with the reason; the queue then stays
//! unauthenticated. A Negotiate starts a new transaction at any time (re-authentication).
//!
//! ```text
//! Negotiate ──send──▶ Challenge ──receive──▶ Reply ──send──▶ Success1 ──receive──▶ done
//!                                                                     └─(bidirectional)─▶ Success2 ──send──▶ done
//! any error ──▶ Failure1 ──receive──▶ failed
//! ```

use std::sync::Arc;

use raidline_proto::auth::{explanation, Message, AUTH_ID_DHCHAP, REASON_FAILED};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::{
    augmented_challenge, controller_response, host_response, DhGroup, HashFn, KeyPair, Secret,
};

/// What a host must prove, and what the controller may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The host's secret.
    pub secret: Secret,
    /// The controller's secret, for hosts that ask the controller to authenticate too.
    pub ctrl_secret: Option<Secret>,
    /// Hashes allowed, in the controller's order of preference.
    pub hashes: Vec<HashFn>,
    /// Diffie-Hellman groups allowed, in the controller's order of preference.
    pub groups: Vec<DhGroup>,
}

/// Where a transaction stands: the message expected next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Waiting for a Negotiate (Send).
    Negotiate,
    /// A Challenge is to be sent (Receive).
    Challenge,
    /// Waiting for the host's Reply (Send).
    Reply,
    /// A Success1 is to be sent (Receive).
    Success1,
    /// Waiting for the host's Success2 (Send), bidirectional only.
    Success2,
    /// A Failure1 is to be sent (Receive).
    Failure1,
    /// The transaction ended (successfully or not); a Negotiate starts another.
    Done,
}

/// How a queue authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The hash used.
    pub hash: HashFn,
    /// The group used.
    pub group: DhGroup,
    /// Whether the controller proved itself to the host too.
    pub bidirectional: bool,
}

/// What a Send or Receive changed, for the caller's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The transaction moved on.
    Progress,
    /// The queue is authenticated.
    Authenticated(Outcome),
    /// The controller refused the host; a Failure1 with `explanation` is (or was) sent.
    Refused {
        /// Reason code explanation.
        explanation: u8,
        /// Why, in words (never a secret).
        why: String,
    },
    /// The host gave up with a Failure2.
    HostFailed {
        /// The host's reason code explanation.
        explanation: u8,
    },
}

/// One queue's authentication state.
pub struct Authenticator {
    policy: Arc<Policy>,
    hostnqn: String,
    subnqn: String,
    rng: fn(&mut [u8]),
    step: Step,
    t_id: u16,
    hash: HashFn,
    group: DhGroup,
    s1: u32,
    c1: Zeroizing<Vec<u8>>,
    keys: Option<KeyPair>,
    c2: Option<crate::HostChallenge>,
    failure: u8,
    authenticated: Option<Outcome>,
    pending: Option<Outcome>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("step", &self.step)
            .field("authenticated", &self.authenticated)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// A queue of host `hostnqn` connected to subsystem `subnqn`, not yet authenticated.
    pub fn new(policy: Arc<Policy>, hostnqn: &str, subnqn: &str) -> Authenticator {
        Authenticator {
            policy,
            hostnqn: hostnqn.to_string(),
            subnqn: subnqn.to_string(),
            rng: crate::random,
            step: Step::Negotiate,
            t_id: 0,
            hash: HashFn::Sha256,
            group: DhGroup::Null,
            s1: 0,
            c1: Zeroizing::new(Vec::new()),
            keys: None,
            c2: None,
            failure: 0,
            authenticated: None,
            pending: None,
        }
    }

    /// The same with another random source (deterministic tests and fuzzing).
    pub fn with_rng(mut self, rng: fn(&mut [u8])) -> Authenticator {
        self.rng = rng;
        self
    }

    /// How the queue authenticated, once it has.
    pub fn authenticated(&self) -> Option<Outcome> {
        self.authenticated
    }

    /// The host NQN this queue was connected with.
    pub fn hostnqn(&self) -> &str {
        &self.hostnqn
    }

    /// The message expected next.
    pub fn step(&self) -> Step {
        self.step
    }

    fn refuse(&mut self, explanation: u8, why: impl Into<String>) -> Event {
        self.step = Step::Failure1;
        self.failure = explanation;
        self.keys = None;
        self.c2 = None;
        // A refused re-authentication takes the earlier one away at once.
        self.authenticated = None;
        self.pending = None;
        Event::Refused {
            explanation,
            why: why.into(),
        }
    }

    /// Takes the payload of an Authentication Send.
    pub fn send(&mut self, payload: &[u8]) -> Event {
        let msg = match Message::parse(payload) {
            Ok(m) => m,
            Err(e) => {
                let x = if matches!(payload.first(), Some(0 | 1)) {
                    explanation::INCORRECT_PAYLOAD
                } else {
                    explanation::INCORRECT_PROTOCOL
                };
                return self.refuse(x, format!("unreadable message: {e}"));
            }
        };
        match msg {
            Message::Negotiate {
                t_id,
                sc_c,
                protocols,
            } => {
                self.t_id = t_id;
                self.keys = None;
                self.c2 = None;
                self.pending = None;
                if sc_c != 0 {
                    return self.refuse(
                        explanation::CONCAT_MISMATCH,
                        format!("the host asked for secure channel concatenation ({sc_c}), which is not offered"),
                    );
                }
                let Some(p) = protocols.iter().find(|p| p.auth_id == AUTH_ID_DHCHAP) else {
                    return self.refuse(
                        explanation::PROTOCOL_UNUSABLE,
                        "the host offers no DH-HMAC-CHAP protocol descriptor",
                    );
                };
                let Some(h) = self
                    .policy
                    .hashes
                    .iter()
                    .copied()
                    .find(|h| p.hashes.contains(&h.id()))
                else {
                    return self.refuse(
                        explanation::HASH_UNUSABLE,
                        format!("no hash in common: the host offers ids {:?}, the configuration allows {}", p.hashes, names(&self.policy.hashes)),
                    );
                };
                let Some(g) = self
                    .policy
                    .groups
                    .iter()
                    .copied()
                    .find(|g| p.dhgroups.contains(&g.id()))
                else {
                    return self.refuse(
                        explanation::DHGROUP_UNUSABLE,
                        format!("no DH group in common: the host offers ids {:?}, the configuration allows {}", p.dhgroups, names(&self.policy.groups)),
                    );
                };
                self.hash = h;
                self.group = g;
                self.step = Step::Challenge;
                Event::Progress
            }
            Message::Failure {
                from_controller: false,
                explanation,
                ..
            } => {
                self.step = Step::Done;
                self.keys = None;
                self.authenticated = None;
                Event::HostFailed { explanation }
            }
            m if m.t_id() != self.t_id && self.step != Step::Done => self.refuse(
                explanation::INCORRECT_PAYLOAD,
                format!(
                    "{} with transaction id {}, expected {}",
                    m.name(),
                    m.t_id(),
                    self.t_id
                ),
            ),
            Message::Reply {
                response,
                challenge,
                seqnum,
                dh_value,
                ..
            } if self.step == Step::Reply => self.reply(&response, challenge, seqnum, &dh_value),
            Message::Success2 { .. } if self.step == Step::Success2 => {
                self.step = Step::Done;
                self.authenticated = self.pending.take();
                self.authenticated
                    .map_or(Event::Progress, Event::Authenticated)
            }
            // Older Linux hosts send a Success2 after a one-way exchange with a DH group too.
            Message::Success2 { .. } if self.step == Step::Done && self.authenticated.is_some() => {
                Event::Progress
            }
            m => {
                let want = match self.step {
                    Step::Negotiate | Step::Done => "Negotiate",
                    Step::Reply => "Reply",
                    Step::Success2 => "Success2",
                    Step::Challenge | Step::Success1 | Step::Failure1 => "Authentication Receive",
                };
                self.refuse(
                    explanation::INCORRECT_PROTOCOL,
                    format!("{} where {want} was expected", m.name()),
                )
            }
        }
    }

    fn reply(
        &mut self,
        response: &[u8],
        challenge: Option<Vec<u8>>,
        s2: u32,
        dh_value: &[u8],
    ) -> Event {
        let h = self.hash;
        if response.len() != h.len() {
            return self.refuse(
                explanation::INCORRECT_PAYLOAD,
                format!("response of {} bytes for {h}", response.len()),
            );
        }
        let session = match (&self.keys, dh_value.is_empty()) {
            (None, true) => None,
            (Some(k), false) => match k.shared(dh_value) {
                Ok(s) => Some(s),
                Err(e) => {
                    return self.refuse(
                        explanation::DHGROUP_UNUSABLE,
                        format!("{}: {e}", self.group),
                    )
                }
            },
            (None, false) => {
                return self.refuse(
                    explanation::INCORRECT_PAYLOAD,
                    "a DH value with the null group",
                )
            }
            (Some(_), true) => {
                return self.refuse(
                    explanation::INCORRECT_PAYLOAD,
                    format!("no DH value with group {}", self.group),
                )
            }
        };
        let key = self.policy.secret.transformed(&self.hostnqn);
        let ca = augmented_challenge(h, session.as_deref().map(|v| &v[..]), &self.c1);
        let want = host_response(
            h,
            &key,
            &ca,
            self.s1,
            self.t_id,
            &self.hostnqn,
            &self.subnqn,
        );
        if !bool::from(want.ct_eq(response)) {
            return self.refuse(
                explanation::FAILED,
                "the host's response does not match its configured secret",
            );
        }
        let outcome = Outcome {
            hash: h,
            group: self.group,
            bidirectional: false,
        };
        match challenge {
            Some(c2) => {
                if self.policy.ctrl_secret.is_none() {
                    return self.refuse(
                        explanation::FAILED,
                        "the host asks the controller to authenticate, but no controller secret is configured for it",
                    );
                }
                self.c2 = Some(crate::HostChallenge {
                    s2,
                    c2: Zeroizing::new(c2),
                    session,
                });
                self.pending = Some(Outcome {
                    bidirectional: true,
                    ..outcome
                });
                self.step = Step::Success1;
                Event::Progress
            }
            None => {
                self.authenticated = Some(outcome);
                self.step = Step::Success1;
                Event::Authenticated(outcome)
            }
        }
    }

    /// The payload of an Authentication Receive with allocation length `al`, padded with
    /// zeros to `al` as nvmet does. `Err` when `al` cannot hold the message: the command
    /// then fails with Invalid Field and the step does not change.
    pub fn receive(&mut self, al: usize) -> Result<Vec<u8>, usize> {
        let msg = match self.step {
            Step::Challenge => {
                let h = self.hash;
                let need = 16 + h.len() + self.group.value_len();
                if al < need {
                    return Err(need);
                }
                let mut c1 = Zeroizing::new(vec![0u8; h.len()]);
                (self.rng)(&mut c1);
                let mut s = [0u8; 4];
                (self.rng)(&mut s);
                self.s1 = u32::from_le_bytes(s).max(1);
                self.c1 = c1;
                self.keys = if self.group == DhGroup::Null {
                    None
                } else {
                    let mut r = Zeroizing::new(vec![0u8; 64]);
                    (self.rng)(&mut r);
                    self.group.keypair(&r)
                };
                self.step = Step::Reply;
                Message::Challenge {
                    t_id: self.t_id,
                    hash_id: h.id(),
                    dhgroup_id: self.group.id(),
                    seqnum: self.s1,
                    challenge: self.c1.to_vec(),
                    dh_value: self
                        .keys
                        .as_ref()
                        .map(|k| k.public.clone())
                        .unwrap_or_default(),
                }
            }
            Step::Success1 => {
                let h = self.hash;
                let need = 16 + if self.c2.is_some() { h.len() } else { 0 };
                if al < need {
                    return Err(need);
                }
                let response = match (self.c2.take(), &self.policy.ctrl_secret) {
                    (Some(crate::HostChallenge { s2, c2, session }), Some(cs)) => {
                        let key = cs.transformed(&self.subnqn);
                        let ca = augmented_challenge(h, session.as_deref().map(|v| &v[..]), &c2);
                        self.step = Step::Success2;
                        Some(
                            controller_response(
                                h,
                                &key,
                                &ca,
                                s2,
                                self.t_id,
                                &self.subnqn,
                                &self.hostnqn,
                            )
                            .to_vec(),
                        )
                    }
                    _ => {
                        self.step = Step::Done;
                        None
                    }
                };
                self.keys = None;
                Message::Success1 {
                    t_id: self.t_id,
                    hl: h.len() as u8,
                    response,
                }
            }
            Step::Failure1 | Step::Negotiate | Step::Reply | Step::Success2 | Step::Done => {
                if al < 8 {
                    return Err(8);
                }
                let explanation = if self.step == Step::Failure1 {
                    self.failure
                } else {
                    explanation::INCORRECT_PROTOCOL
                };
                self.step = Step::Done;
                self.authenticated = None;
                self.pending = None;
                self.keys = None;
                Message::Failure {
                    t_id: self.t_id,
                    from_controller: true,
                    reason: REASON_FAILED,
                    explanation,
                }
            }
        };
        let mut v = msg.to_bytes();
        v.resize(al.max(v.len()), 0);
        Ok(v)
    }
}

fn names<T: std::fmt::Display>(v: &[T]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    s.join(", ")
}
