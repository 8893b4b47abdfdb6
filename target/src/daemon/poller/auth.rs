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
//! Each step runs on the authentication thread (`raidline-auth`, started by the control thread
//! with the first step), not here, nor on the control thread: the exchange's two modular
//! exponentiations
//! (the controller's key pair at the Challenge, the shared secret at the Reply) take 2.3 ms
//! with ffdhe2048 and 53 ms with ffdhe8192 on this machine, per queue
//! (`cargo test --release -p raidline-auth exchange_cost -- --nocapture`), which would stall
//! every other queue of this poller, and a host looping on ffdhe8192 would hold up RDMA CM
//! events, keep-alive and a stop request on the control thread. The request waits in
//! `Queue::auth_req` (counted in `elsewhere`) and the authenticator travels with the step; the
//! host runs one step at a time (`Queue::auth_busy`: a second one is a Command Sequence Error).

use raidline_auth::{Authenticator, Event, Outcome};
use raidline_fabric::{Fabric, RemoteBuf};
use raidline_proto::auth::{SECP_INBAND, SPSP_DHCHAP};
use raidline_proto::fabrics::{AuthDirection, Authentication};
use raidline_proto::text::Nqn;
use raidline_proto::{SglDescriptor, Status, StatusCode};

use super::super::queue::{Queue, Req, Step};
use super::super::{AuthJob, AuthOp, AuthResult, ControlMsg};
use super::{location, AfterBuf, Poller};
use crate::io::DataLocation;
use crate::registry::Served;

/// The largest Authentication Send or Receive accepted (an ffdhe8192 Challenge with SHA-512 is
/// 1,104 bytes; Linux sends and asks for at most 4,096).
const MAX_AUTH_LEN: u32 = 64 << 10;

fn count(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

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
        if q.auth_busy {
            // The host runs one step at a time; a second one now is out of sequence.
            let st = Status::new(StatusCode::COMMAND_SEQUENCE_ERROR).dnr();
            return self.respond(q, req, st, 0);
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
        // Busy from here until its step is done (a Send's payload may still be on its way),
        // once nothing can refuse the command any more.
        match a.direction {
            AuthDirection::Send => {
                let loc = match location(&a.sgl) {
                    Ok(l) => l,
                    Err(st) => return self.respond(q, req, st, 0),
                };
                if let DataLocation::InCapsule { length } = loc {
                    if length != a.length || req.icd_len < a.length as usize {
                        let st = Status::new(StatusCode::DATA_SGL_LENGTH_INVALID).dnr();
                        return self.respond(q, req, st, 0);
                    }
                }
                q.auth_busy = true;
                req.step = Step::AuthIn;
                self.fetch(q, req, loc, a.length as usize);
            }
            AuthDirection::Receive => {
                let SglDescriptor::Keyed { address, key, .. } = a.sgl else {
                    let st = Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr();
                    return self.respond(q, req, st, 0);
                };
                q.auth_busy = true;
                req.remote = Some(RemoteBuf {
                    addr: address,
                    rkey: key,
                });
                self.auth_step(q, req, AuthOp::Receive(a.length as usize));
            }
        }
    }

    /// An Authentication Send's payload is here.
    pub(super) fn auth_data(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        let payload = req.data_bytes().to_vec();
        self.drop_data(&mut req);
        self.auth_step(q, req, AuthOp::Send(payload));
    }

    /// Hands the step to the authentication thread (through the control thread), the request
    /// parked until it answers.
    fn auth_step(&mut self, q: &mut Queue<F>, req: Box<Req>, op: AuthOp) {
        let Some(auth) = q.auth.take() else {
            q.auth_busy = false;
            let st = Status::new(StatusCode::COMMAND_SEQUENCE_ERROR).dnr();
            return self.respond(q, req, st, 0);
        };
        q.auth_req = Some(req);
        q.elsewhere += 1;
        self.shared.tell_control(ControlMsg::Auth(AuthJob {
            poller: self.id,
            conn: q.conn,
            auth,
            op,
        }));
    }

    /// The control thread ran the step.
    pub(super) fn auth_done(
        &mut self,
        q: &mut Queue<F>,
        auth: Box<Authenticator>,
        result: AuthResult,
    ) {
        q.auth_busy = false;
        let Some(mut req) = q.auth_req.take() else {
            q.auth = Some(auth);
            return;
        };
        q.elsewhere = q.elsewhere.saturating_sub(1);
        // Before this step the queue was authenticated exactly when it no longer waits for it.
        let was = !q.proto.auth_pending();
        let now = auth.authenticated().is_some();
        let host = auth.hostnqn().to_string();
        q.auth = Some(auth);
        if q.closing {
            return self.recycle(req);
        }
        let invalid = Status::new(StatusCode::INVALID_FIELD).dnr();
        match result {
            AuthResult::Received(Err(need)) => {
                tracing::warn!(
                    "controller {} queue {}: Authentication Receive of {} bytes from host {host}, the message needs {need}",
                    q.cntlid,
                    q.proto.qid(),
                    req.sqe.cdw(11)
                );
                self.respond(q, req, invalid, 0)
            }
            AuthResult::Received(Ok(bytes)) => {
                if was && !now {
                    self.auth_lost(q, "a Failure1 was sent");
                }
                let Some(remote) = req.remote.take() else {
                    return self.respond(q, req, Status::new(StatusCode::INTERNAL_ERROR), 0);
                };
                req.status = Status::SUCCESS;
                req.result = 0;
                let len = bytes.len();
                self.with_buffer(q, req, len, AfterBuf::AdminOut(bytes, remote));
            }
            AuthResult::Sent(event) => {
                self.auth_event(q, &host, event);
                self.respond(q, req, Status::SUCCESS, 0);
            }
        }
    }

    fn auth_event(&mut self, q: &mut Queue<F>, host: &str, event: Event) {
        let peer = self.peer_of(q);
        let (cntlid, qid) = (q.cntlid, q.proto.qid());
        match event {
            Event::Progress => {}
            Event::Authenticated(o) => {
                count(&self.shared.data_path.auth_authenticated);
                q.proto.authenticated(true);
                let how = describe(Some(o), false);
                if qid == 0 {
                    tracing::info!(
                        "controller {cntlid}: host {host} ({peer}) authenticated with {how}"
                    );
                    self.set_ctrl_auth(cntlid, how);
                } else {
                    tracing::info!("controller {cntlid} queue {qid}: authenticated with {how}");
                }
            }
            Event::Refused { explanation, why } => {
                count(&self.shared.data_path.auth_refused);
                tracing::warn!(
                    "controller {cntlid} queue {qid}: authentication of host {host} ({peer}) refused: {why} (Failure1, reason explanation {explanation:#04x})"
                );
                self.auth_lost(q, &format!("refused: {why}"));
            }
            Event::HostFailed { explanation } => {
                count(&self.shared.data_path.auth_host_failed);
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

    /// The host's address, for logs.
    pub(super) fn peer_of(&self, q: &Queue<F>) -> String {
        q.peer
            .map_or_else(|| "unknown address".to_string(), |a| a.to_string())
    }
}
