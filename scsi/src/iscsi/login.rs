//! The target's login phase as a sans-IO state machine (RFC 7143 §6.3, §11.12, §11.13).
//!
//! The connection hands every Login Request to [`Login::on_request`] (or the raw header to
//! [`Login::on_pdu`]) and sends back the [`LoginStep`]'s response header and data. The step
//! says whether the login goes on, reached full-feature phase (with the negotiated
//! [`SessionParams`] and who logged in to what), or failed, in which case the connection
//! closes after sending the response.
//!
//! Rules:
//! - the first complete text must carry InitiatorName, and TargetName in a normal session
//!   (missing: 0x0207); SessionType defaults to Normal (another word: 0x0209); an unknown
//!   target is 0x0203, an initiator outside the target's list 0x0202;
//! - Version-min above 0 is 0x0205;
//! - CSG must be the current stage (the first request may start in the security or the
//!   operational stage), NSG must lie ahead of it when T is set, T and C together, a changed
//!   ISID, TSIH or CID, or an AuthMethod outside the security stage are 0x0200;
//! - a non-zero TSIH in the first request (adding a connection to a session) is 0x020a: one
//!   connection per session (MaxConnections=1);
//! - a normal session to a target with [`TargetConfig::chap`](super::negotiate::TargetConfig),
//!   and a discovery session when [`LoginConfig::discovery_chap`] is set, must offer `AuthMethod=CHAP` and prove its secret: `CHAP_A` from its list (the strongest
//!   of SHA3-256, SHA-256, SHA-1, MD5) with the target's `CHAP_I` and `CHAP_C`, then its
//!   `CHAP_N` and `CHAP_R`; with its own `CHAP_I`/`CHAP_C` the target proves its secret back
//!   (mutual CHAP, refused when the target has no secret of its own or the initiator returns
//!   the target's own challenge). Until then the target agrees to no transition out of the
//!   security stage; any failure is 0x0201. Other sessions must offer AuthMethod None (else
//!   0x0201);
//! - a PDU with C gets an empty response until the text is complete;
//! - the target always agrees to a transition the initiator asks for (it never needs another
//!   round), including security straight to full feature (RFC 7143 §6.3 allows it);
//! - TargetPortalGroupTag (and TargetAlias when configured) go in the first response that
//!   answers a complete text of a normal session; the target's receive length is declared
//!   in the operational stage or with the move to full feature, whichever comes first;
//! - StatSN starts at the first request's ExpStatSN and advances with every response;
//!   ExpCmdSN echoes the request's CmdSN (login is immediate) and MaxCmdSN opens a window of
//!   [`LoginConfig::queue_depth`].

use std::num::NonZeroU16;

use crate::bytes::{be16, be32};

use super::bhs::{Bhs, Opcode};
use super::chap::{decode_binary, encode_hex, ChapAlg, ChapConfig, NONCE_LEN};
use super::negotiate::{
    is_login_key, LoginConfig, Negotiation, SessionParams, SessionType, NOT_UNDERSTOOD,
};
use super::pdu::{Isid, LoginRequest, LoginResponse, LoginStage, LoginStatus};
use super::text::{emit_text, get, parse_text, KeyValue, TextAssembler, DEFAULT_MAX_VALUE_LEN};

/// What the connection does after sending a login response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoginOutcome {
    /// Wait for the next Login Request.
    Continue,
    /// The login is complete: the connection is in full-feature phase.
    FullFeature(Box<LoginSession>),
    /// The login failed: close the connection after the response.
    Close,
}

/// A response to send and what follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginStep {
    /// The Login Response header (DataSegmentLength is `data.len()`).
    pub response: LoginResponse,
    /// The response's data segment: `key=value` text.
    pub data: Vec<u8>,
    /// What the connection does next.
    pub outcome: LoginOutcome,
}

/// The result of a successful login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginSession {
    /// Normal or discovery.
    pub session_type: SessionType,
    /// InitiatorName.
    pub initiator_name: String,
    /// InitiatorAlias, when given.
    pub initiator_alias: Option<String>,
    /// The target's name as configured (normal sessions).
    pub target_name: Option<String>,
    /// ISID.
    pub isid: Isid,
    /// The TSIH the target gave the session.
    pub tsih: u16,
    /// The connection's CID.
    pub cid: u16,
    /// Negotiated parameters.
    pub params: SessionParams,
    /// ExpCmdSN at the start of full-feature phase.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN at the start of full-feature phase.
    pub max_cmd_sn: u32,
    /// The StatSN of the next response the target sends.
    pub next_stat_sn: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Initial,
    Stage(LoginStage),
    Done,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    initiator_name: String,
    initiator_alias: Option<String>,
    target_name: Option<String>,
    session_type: SessionType,
}

/// The login of one connection, target side.
#[derive(Clone, Debug)]
pub struct Login {
    config: LoginConfig,
    tsih: NonZeroU16,
    state: State,
    assembler: TextAssembler,
    /// ISID, TSIH and CID of the first request: every later one must repeat them.
    first: Option<(Isid, u16, u16)>,
    identity: Option<Identity>,
    negotiation: Option<Negotiation>,
    stat_sn: Option<u32>,
    tpgt_sent: bool,
    /// The caller's random bytes for a CHAP challenge: identifier, then challenge.
    nonce: [u8; NONCE_LEN],
    chap: Chap,
}

/// Where a CHAP exchange stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Chap {
    /// Not asked for (yet).
    Idle,
    /// AuthMethod=CHAP answered; `CHAP_A` expected.
    Offered,
    /// The challenge went out; the initiator's response is expected.
    Challenged(ChapAlg),
    /// The initiator proved its secret.
    Done,
}

/// The current iSCSI version (RFC 7143 §11.12.4).
pub const ISCSI_VERSION: u8 = 0x00;

impl Login {
    /// A login on a new connection; `tsih` is the TSIH the session gets if the login
    /// creates one; `nonce` is random (the CHAP identifier and challenge, from the caller's
    /// CSPRNG).
    pub fn new(config: LoginConfig, tsih: NonZeroU16, nonce: [u8; NONCE_LEN]) -> Login {
        let assembler = TextAssembler::new(config.max_text_len);
        Login {
            config,
            tsih,
            state: State::Initial,
            assembler,
            first: None,
            identity: None,
            negotiation: None,
            stat_sn: None,
            tpgt_sent: false,
            nonce,
            chap: Chap::Idle,
        }
    }

    /// The stage the login is in (`None` before the first request).
    pub fn stage(&self) -> Option<LoginStage> {
        match self.state {
            State::Initial | State::Failed => None,
            State::Stage(s) => Some(s),
            State::Done => Some(LoginStage::FullFeature),
        }
    }

    /// Handles any PDU received during login: a Login Request goes to [`Login::on_request`];
    /// another opcode fails the login with 0x020b, a malformed Login Request (reserved
    /// stage, T with C) with 0x0200.
    pub fn on_pdu(&mut self, bhs: &Bhs, data: &[u8]) -> LoginStep {
        let raw = raw_request(bhs);
        if self.stat_sn.is_none() {
            self.stat_sn = Some(raw.exp_stat_sn);
        }
        if bhs.opcode() != Opcode::LOGIN_REQUEST {
            return self.fail(&raw, LoginStatus::INVALID_REQUEST_DURING_LOGIN);
        }
        match LoginRequest::parse(bhs.as_bytes()) {
            Ok(req) => self.on_request(&req, data),
            Err(_) => self.fail(&raw, LoginStatus::INITIATOR_ERROR),
        }
    }

    /// Handles one Login Request and its data segment.
    pub fn on_request(&mut self, req: &LoginRequest, data: &[u8]) -> LoginStep {
        if self.stat_sn.is_none() {
            self.stat_sn = Some(req.exp_stat_sn);
        }
        match self.step(req, data) {
            Ok(step) => step,
            Err(status) => self.fail(req, status),
        }
    }

    fn step(&mut self, req: &LoginRequest, data: &[u8]) -> Result<LoginStep, LoginStatus> {
        let current = match self.state {
            State::Done | State::Failed => return Err(LoginStatus::INITIATOR_ERROR),
            State::Initial => {
                if req.tsih != 0 {
                    return Err(LoginStatus::SESSION_DOES_NOT_EXIST);
                }
                req.csg
            }
            State::Stage(s) => s,
        };
        if req.transit && req.cont {
            return Err(LoginStatus::INITIATOR_ERROR);
        }
        if req.version_min > ISCSI_VERSION {
            return Err(LoginStatus::UNSUPPORTED_VERSION);
        }
        if req.csg != current || current == LoginStage::FullFeature {
            return Err(LoginStatus::INITIATOR_ERROR);
        }
        if req.transit && req.nsg <= req.csg {
            return Err(LoginStatus::INITIATOR_ERROR);
        }
        let ids = (req.isid, req.tsih, req.cid);
        match self.first {
            None => self.first = Some(ids),
            Some(f) if f != ids => return Err(LoginStatus::INITIATOR_ERROR),
            Some(_) => {}
        }
        self.state = State::Stage(current);

        let Some(text) = self
            .assembler
            .push(data, req.cont)
            .map_err(|e| e.login_status())?
        else {
            // More text to come: an empty answer, same stage, no transit.
            return Ok(self.respond(req, false, LoginStage::Security, Vec::new()));
        };
        let pairs = parse_text(&text, DEFAULT_MAX_VALUE_LEN).map_err(|e| e.login_status())?;

        let identity = match &self.identity {
            None => {
                let id = self.identify(&pairs)?;
                self.negotiation = Some(Negotiation::new(
                    self.config.prefs,
                    self.config.iser,
                    id.session_type,
                ));
                self.identity = Some(id.clone());
                id
            }
            Some(id) => {
                check_same_identity(id, &pairs)?;
                id.clone()
            }
        };
        // Security keys, answered here; the rest by the negotiation. A normal session proves
        // its target's CHAP secret, a discovery session the portal group's discovery one.
        let chap_cfg = match identity.session_type {
            SessionType::Discovery => self.config.discovery_chap.clone(),
            SessionType::Normal => identity
                .target_name
                .as_deref()
                .and_then(|n| self.config.target(n))
                .and_then(|t| t.chap.clone()),
        };
        let mut login_answers = Vec::new();
        for kv in pairs.iter().filter(|kv| is_login_key(&kv.key)) {
            if kv.key == "AuthMethod" {
                if current != LoginStage::Security {
                    return Err(LoginStatus::INITIATOR_ERROR);
                }
                let want = if chap_cfg.is_some() { "CHAP" } else { "None" };
                if !kv.value.split(',').any(|m| m == want) {
                    return Err(LoginStatus::AUTHENTICATION_FAILURE);
                }
                if chap_cfg.is_some() && self.chap == Chap::Idle {
                    self.chap = Chap::Offered;
                }
                login_answers.push(KeyValue::new("AuthMethod", want));
            } else if kv.key.starts_with("CHAP_") && chap_cfg.is_none() {
                login_answers.push(KeyValue::new(kv.key.clone(), NOT_UNDERSTOOD));
            }
        }
        let mut chap_answers = Vec::new();
        if let Some(cfg) = &chap_cfg {
            // CHAP must be done before the security stage is left (or skipped).
            if current != LoginStage::Security && self.chap != Chap::Done {
                return Err(LoginStatus::AUTHENTICATION_FAILURE);
            }
            self.chap_step(cfg, &pairs, &mut chap_answers)?;
        }
        let Some(negotiation) = self.negotiation.as_mut() else {
            return Err(LoginStatus::TARGET_ERROR);
        };
        let negotiated = negotiation.answer(&pairs).map_err(|f| f.login_status())?;
        let mut answers: Vec<KeyValue> = pairs
            .iter()
            .filter_map(|kv| {
                login_answers
                    .iter()
                    .chain(negotiated.iter())
                    .find(|a| a.key == kv.key)
                    .cloned()
            })
            .collect();
        answers.extend(chap_answers);
        // The target agrees to leave the security stage only once CHAP is done.
        let transit = req.transit && (chap_cfg.is_none() || self.chap == Chap::Done);

        if identity.session_type == SessionType::Normal && !self.tpgt_sent {
            self.tpgt_sent = true;
            answers.push(KeyValue::new(
                "TargetPortalGroupTag",
                self.config.portal_group_tag.to_string(),
            ));
            let alias = identity
                .target_name
                .as_deref()
                .and_then(|n| self.config.target(n))
                .and_then(|t| t.alias.clone());
            if let Some(alias) = alias {
                answers.push(KeyValue::new("TargetAlias", alias));
            }
        }
        let to_ffp = transit && req.nsg == LoginStage::FullFeature;
        // The target's receive length is declared in the operational stage only: open-iscsi
        // refuses operational keys in a security-stage response ("can't accept
        // TargetRecvDataSegmentLength=8192 in security stage"), as when a discovery session
        // with CHAP goes from security straight to full feature. The default (8192) holds then.
        if current == LoginStage::Operational {
            answers.extend(negotiation.declarations());
        }
        let data = emit_text(&answers);

        if !transit {
            return Ok(self.respond(req, false, LoginStage::Security, data));
        }
        if !to_ffp {
            self.state = State::Stage(req.nsg);
            return Ok(self.respond(req, true, req.nsg, data));
        }
        let params = negotiation.finish().map_err(|f| f.login_status())?;
        self.state = State::Done;
        let mut step = self.respond(req, true, LoginStage::FullFeature, data);
        step.response.tsih = self.tsih.get();
        step.outcome = LoginOutcome::FullFeature(Box::new(LoginSession {
            session_type: identity.session_type,
            initiator_name: identity.initiator_name,
            initiator_alias: identity.initiator_alias,
            target_name: identity.target_name,
            isid: req.isid,
            tsih: self.tsih.get(),
            cid: req.cid,
            params,
            exp_cmd_sn: step.response.exp_cmd_sn,
            max_cmd_sn: step.response.max_cmd_sn,
            next_stat_sn: step.response.stat_sn.wrapping_add(1),
        }));
        Ok(step)
    }

    /// The CHAP keys of one request, answered into `out` (RFC 7143 §12.1.3).
    fn chap_step(
        &mut self,
        cfg: &ChapConfig,
        pairs: &[KeyValue],
        out: &mut Vec<KeyValue>,
    ) -> Result<(), LoginStatus> {
        let fail = LoginStatus::AUTHENTICATION_FAILURE;
        let (id, challenge) = (self.nonce[0], &self.nonce[1..]);
        match self.chap.clone() {
            Chap::Offered => {
                let Some(list) = get(pairs, "CHAP_A") else {
                    return Ok(());
                };
                let alg = ChapAlg::choose(list).ok_or(fail)?;
                out.push(KeyValue::new("CHAP_A", alg.code().to_string()));
                out.push(KeyValue::new("CHAP_I", id.to_string()));
                out.push(KeyValue::new("CHAP_C", encode_hex(challenge)));
                self.chap = Chap::Challenged(alg);
            }
            Chap::Challenged(alg) => {
                let (Some(name), Some(r)) = (get(pairs, "CHAP_N"), get(pairs, "CHAP_R")) else {
                    return Err(fail);
                };
                let r = decode_binary(r).ok_or(fail)?;
                if name != cfg.initiator.user
                    || !alg.verify(id, &cfg.initiator.secret, challenge, &r)
                {
                    return Err(fail);
                }
                // Mutual: the initiator's own challenge, answered with the target's secret.
                match (get(pairs, "CHAP_I"), get(pairs, "CHAP_C")) {
                    (None, None) => {}
                    (Some(i), Some(c)) => {
                        let target = cfg.target.as_ref().ok_or(fail)?;
                        let i: u8 = i.parse().map_err(|_| fail)?;
                        let c = decode_binary(c).ok_or(fail)?;
                        // A reflected challenge would make the target answer its own.
                        if c.is_empty() || c == challenge {
                            return Err(fail);
                        }
                        out.push(KeyValue::new("CHAP_N", target.user.clone()));
                        out.push(KeyValue::new(
                            "CHAP_R",
                            encode_hex(&alg.response(i, &target.secret, &c)),
                        ));
                    }
                    _ => return Err(fail),
                }
                self.chap = Chap::Done;
            }
            Chap::Idle | Chap::Done => {
                if pairs.iter().any(|kv| kv.key.starts_with("CHAP_")) {
                    return Err(fail);
                }
            }
        }
        Ok(())
    }

    /// Who logs in to what, from the first complete text.
    fn identify(&self, pairs: &[KeyValue]) -> Result<Identity, LoginStatus> {
        let initiator = get(pairs, "InitiatorName")
            .filter(|n| !n.is_empty())
            .ok_or(LoginStatus::MISSING_PARAMETER)?;
        let session_type = match get(pairs, "SessionType") {
            None => SessionType::Normal,
            Some(v) => SessionType::from_value(v).ok_or(LoginStatus::SESSION_TYPE_NOT_SUPPORTED)?,
        };
        let target_name = match session_type {
            SessionType::Discovery => None,
            SessionType::Normal => {
                let name = get(pairs, "TargetName")
                    .filter(|n| !n.is_empty())
                    .ok_or(LoginStatus::MISSING_PARAMETER)?;
                let t = self.config.target(name).ok_or(LoginStatus::NOT_FOUND)?;
                if !t.initiators.allows(initiator) {
                    return Err(LoginStatus::AUTHORIZATION_FAILURE);
                }
                Some(t.name.clone())
            }
        };
        Ok(Identity {
            initiator_name: initiator.to_owned(),
            initiator_alias: get(pairs, "InitiatorAlias").map(str::to_owned),
            target_name,
            session_type,
        })
    }

    fn next_stat_sn(&mut self) -> u32 {
        let sn = self.stat_sn.unwrap_or(0);
        self.stat_sn = Some(sn.wrapping_add(1));
        sn
    }

    fn respond(
        &mut self,
        req: &LoginRequest,
        transit: bool,
        nsg: LoginStage,
        data: Vec<u8>,
    ) -> LoginStep {
        let response = LoginResponse {
            transit,
            cont: false,
            csg: req.csg,
            nsg,
            version_max: ISCSI_VERSION,
            version_active: ISCSI_VERSION,
            data_segment_len: data.len() as u32,
            isid: req.isid,
            tsih: req.tsih,
            itt: req.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: req.cmd_sn,
            max_cmd_sn: req
                .cmd_sn
                .wrapping_add(self.config.queue_depth.max(1))
                .wrapping_sub(1),
            status: LoginStatus::SUCCESS,
        };
        LoginStep {
            response,
            data,
            outcome: LoginOutcome::Continue,
        }
    }

    fn fail(&mut self, req: &LoginRequest, status: LoginStatus) -> LoginStep {
        self.state = State::Failed;
        self.assembler.reset();
        let mut step = self.respond(req, false, LoginStage::Security, Vec::new());
        step.response.status = status;
        step.outcome = LoginOutcome::Close;
        step
    }
}

/// Identity keys repeated after the first text must not change.
fn check_same_identity(id: &Identity, pairs: &[KeyValue]) -> Result<(), LoginStatus> {
    let same = |key, want: Option<&str>| match get(pairs, key) {
        None => true,
        Some(v) => want.is_some_and(|w| w.eq_ignore_ascii_case(v)),
    };
    let st = match id.session_type {
        SessionType::Normal => "Normal",
        SessionType::Discovery => "Discovery",
    };
    let target_ok =
        id.session_type == SessionType::Discovery || same("TargetName", id.target_name.as_deref());
    if same("InitiatorName", Some(&id.initiator_name)) && target_ok && same("SessionType", Some(st))
    {
        Ok(())
    } else {
        Err(LoginStatus::INITIATOR_ERROR)
    }
}

/// The fields a failure response echoes, read from a header that may not parse.
fn raw_request(bhs: &Bhs) -> LoginRequest {
    let b = bhs.as_bytes();
    let mut isid = [0u8; 6];
    isid.copy_from_slice(&b[8..14]);
    LoginRequest {
        csg: LoginStage::from_bits(bhs.flags() >> 2).unwrap_or_default(),
        isid,
        tsih: be16(b, 14),
        itt: bhs.itt(),
        cid: be16(b, 20),
        cmd_sn: be32(b, 24),
        exp_stat_sn: be32(b, 28),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "login_tests.rs"]
mod tests;
