//! The poller's side of NVMe in-band authentication (DH-HMAC-CHAP, issue 19).
//!
//! A Connect from a host that has an `[[subsystem.auth]]` entry sets ATR in its response, on the
//! admin queue and on every I/O queue, and the queue gets an [`Authenticator`]; until it reports
//! the host authenticated, the queue answers every command but the fabrics ones with
//! Authentication Required (`crate::queue`). Authentication Send brings its payload like any
//! host data (in the capsule or by RDMA READ) and feeds it to the authenticator; Authentication
//! Receive sends the authenticator's next message with an RDMA WRITE. As in nvmet, a refused
//! host gets its Failure1 in the next Receive and the Send itself completes successfully; its
//! queue stays closed to commands.
//!
//! The exchange's two modular exponentiations (the controller's key pair at the Challenge, the
//! shared secret at the Reply) run on this thread: once per queue at connect, measured in
//! `raidline-auth`'s tests.

use raidline_auth::{Authenticator, Event, Outcome};
use raidline_fabric::{Fabric, RemoteBuf};
use raidline_proto::auth::{SECP_INBAND, SPSP_DHCHAP};
use raidline_proto::fabrics::{AuthDirection, Authentication};
use raidline_proto::text::Nqn;
use raidline_proto::{SglDescriptor, Status, StatusCode};

use super::super::queue::{Queue, Req, Step};
use super::{location, AfterBuf, Poller};
use crate::registry::Served;

/// The largest Authentication Send or Receive accepted (an ffdhe8192 Challenge with SHA-512 is
/// 1,104 bytes; Linux sends and asks for at most 4,096).
const MAX_AUTH_LEN: u32 = 64 << 10;

/// How a controller's admin queue stands, for `raidline status`.
pub(crate) fn describe(outcome: Option<Outcome>, pending: bool) -> String {
    match (outcome, pending) {
        (Some(o), _) => format!(
            "{} {}{}",
            o.hash,
            o.group,
            if o.bidirectional {
                " bidirectional"
            } else {
                ""
            }
        ),
        (None, true) => "required, not yet authenticated".to_string(),
        (None, false) => "none".to_string(),
    }
}

impl<F: Fabric> Poller<F> {
    /// After an accepted Connect: gives the queue an authenticator when its host must
    /// authenticate. True when the Connect response must set ATR.
    pub(super) fn auth_on_connect(
        &mut self,
        q: &mut Queue<F>,
        hostnqn: &Nqn,
        served: &Served,
    ) -> bool {
        let Served::Nvm(sub) = served else {
            return false;
        };
        let Some(policy) = sub.auth.get(hostnqn) else {
            return false;
        };
        q.auth = Some(Box::new(Authenticator::new(
            policy.clone(),
            hostnqn.as_str(),
            sub.nqn.as_str(),
        )));
        q.proto.require_auth();
        true
    }

    /// An Authentication Send or Receive.
    pub(super) fn auth_command(&mut self, q: &mut Queue<F>, mut req: Box<Req>, a: Authentication) {
        let invalid = Status::new(StatusCode::INVALID_FIELD).dnr();
        if a.secp != SECP_INBAND || a.spsp0 != SPSP_DHCHAP || a.spsp1 != SPSP_DHCHAP {
            return self.respond(q, req, invalid, 0);
        }
        if a.length == 0 || a.length > MAX_AUTH_LEN {
            return self.respond(q, req, invalid, 0);
        }
        if q.auth.is_none() {
            // No secret is configured for this host: nothing to authenticate with.
            tracing::warn!(
                "controller {} queue {}: {} from {}, but no [[subsystem.auth]] entry names this host",
                q.cntlid,
                q.proto.qid(),
                if a.direction == AuthDirection::Send { "Authentication Send" } else { "Authentication Receive" },
                self.peer_of(q)
            );
            return self.respond(
                q,
                req,
                Status::new(StatusCode::COMMAND_SEQUENCE_ERROR).dnr(),
                0,
            );
        }
        if a.sgl.length() != a.length {
            let st = Status::new(StatusCode::DATA_SGL_LENGTH_INVALID).dnr();
            return self.respond(q, req, st, 0);
        }
        match a.direction {
            AuthDirection::Send => {
                let loc = match location(&a.sgl) {
                    Ok(l) => l,
                    Err(st) => return self.respond(q, req, st, 0),
                };
                req.step = Step::AuthIn;
                self.fetch(q, req, loc, a.length as usize);
            }
            AuthDirection::Receive => {
                let SglDescriptor::Keyed { address, key, .. } = a.sgl else {
                    let st = Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr();
                    return self.respond(q, req, st, 0);
                };
                let Some(auth) = q.auth.as_mut() else {
                    return self.respond(q, req, invalid, 0);
                };
                let was = auth.authenticated();
                match auth.receive(a.length as usize) {
                    Err(need) => {
                        tracing::warn!(
                            "controller {} queue {}: Authentication Receive of {} bytes, the message needs {need}",
                            q.cntlid,
                            q.proto.qid(),
                            a.length
                        );
                        self.respond(q, req, invalid, 0)
                    }
                    Ok(bytes) => {
                        let now = auth.authenticated();
                        if was.is_some() && now.is_none() {
                            self.auth_lost(q, "a Failure1 was sent");
                        } else if now.is_some() {
                            // Success1 of a one-way exchange: nothing changes.
                        }
                        req.status = Status::SUCCESS;
                        req.result = 0;
                        let len = bytes.len();
                        let remote = RemoteBuf {
                            addr: address,
                            rkey: key,
                        };
                        self.with_buffer(q, req, len, AfterBuf::AdminOut(bytes, remote));
                    }
                }
            }
        }
    }

    /// An Authentication Send's payload is here.
    pub(super) fn auth_data(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        let event = match q.auth.as_mut() {
            Some(a) => a.send(req.data_bytes()),
            None => {
                self.drop_data(&mut req);
                let st = Status::new(StatusCode::COMMAND_SEQUENCE_ERROR).dnr();
                return self.respond(q, req, st, 0);
            }
        };
        self.drop_data(&mut req);
        let peer = self.peer_of(q);
        let host = q.auth.as_ref().map_or("", |a| a.hostnqn()).to_string();
        let (cntlid, qid) = (q.cntlid, q.proto.qid());
        match event {
            Event::Progress => {}
            Event::Authenticated(o) => {
                q.proto.authenticated(true);
                let how = describe(Some(o), false);
                if qid == 0 {
                    tracing::info!(
                        "controller {cntlid}: host {host} ({peer}) authenticated with {how}"
                    );
                    self.set_ctrl_auth(cntlid, how);
                } else {
                    tracing::debug!("controller {cntlid} queue {qid}: authenticated with {how}");
                }
            }
            Event::Refused { explanation, why } => {
                tracing::warn!(
                    "controller {cntlid} queue {qid}: authentication of host {host} ({peer}) refused: {why} (Failure1, reason explanation {explanation:#04x})"
                );
                self.auth_lost(q, &format!("refused: {why}"));
            }
            Event::HostFailed { explanation } => {
                tracing::warn!(
                    "controller {cntlid} queue {qid}: host {host} ({peer}) ended authentication with Failure2 (reason explanation {explanation:#04x}){}",
                    if explanation == raidline_proto::auth::explanation::FAILED {
                        ": the controller's response did not match the host's controller secret"
                    } else {
                        ""
                    }
                );
                self.auth_lost(q, "the host sent Failure2");
            }
        }
        self.respond(q, req, Status::SUCCESS, 0);
    }

    fn auth_lost(&mut self, q: &mut Queue<F>, why: &str) {
        q.proto.authenticated(false);
        if q.proto.qid() == 0 {
            self.set_ctrl_auth(q.cntlid, format!("failed: {why}"));
        }
    }

    fn set_ctrl_auth(&mut self, cntlid: u16, how: String) {
        let mut ctrls = self
            .shared
            .controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(e) = ctrls.get_mut(&cntlid) {
            e.auth = how;
        }
    }

    fn peer_of(&self, q: &Queue<F>) -> String {
        q.peer
            .map_or_else(|| "unknown address".to_string(), |a| a.to_string())
    }
}
