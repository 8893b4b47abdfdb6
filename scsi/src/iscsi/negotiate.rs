//! Login key negotiation (RFC 7143 §6.2, §13; RFC 7145 §6.3 for iSER): the target's
//! configuration ([`LoginConfig`]), the negotiated [`SessionParams`], and [`Negotiation`],
//! which answers the initiator's operational keys one exchange at a time.
//!
//! Key classes and their answers:
//!
//! | class | keys | answer |
//! |---|---|---|
//! | declarative (initiator) | MaxRecvDataSegmentLength | none; the value is recorded |
//! | list | HeaderDigest, DataDigest | `None` when offered, else `Reject` |
//! | boolean AND | ImmediateData, RDMAExtensions, OFMarker, IFMarker | offer AND target's |
//! | boolean OR | InitialR2T, DataPDUInOrder, DataSequenceInOrder | offer OR target's |
//! | numeric min | MaxConnections, MaxBurstLength, FirstBurstLength, MaxOutstandingR2T, ErrorRecoveryLevel, DefaultTime2Retain, InitiatorRecvDataSegmentLength, TargetRecvDataSegmentLength, MaxOutstandingUnexpectedPDUs (0 = unlimited) | min(offer, target's) |
//! | numeric max | DefaultTime2Wait | max(offer, target's) |
//! | marker intervals | OFMarkInt, IFMarkInt | `Irrelevant` (markers are always No) |
//! | irrelevant to the session | operational keys in a discovery session; iSER keys on TCP | `Irrelevant` |
//! | target-only | TargetAlias, TargetAddress, TargetPortalGroupTag, SendTargets | `Reject` |
//! | unknown, private (`X-…`, `X#…`) | | `NotUnderstood` |
//!
//! A value out of its range or of the wrong form is answered `Reject` and the key keeps its
//! default. FirstBurstLength is clamped to MaxBurstLength (RFC 7143 §13: it "MUST NOT exceed" it). Keys the
//! initiator does not offer keep the RFC default, not the target's preference: the target
//! never opens a negotiation itself, it only declares its own receive length
//! ([`Negotiation::declarations`]).

use std::net::IpAddr;

use super::text::KeyValue;

/// The kind of session (the `SessionType` key, RFC 7143 §13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SessionType {
    /// A normal session: SCSI commands to one target.
    #[default]
    Normal,
    /// A discovery session: SendTargets text requests only.
    Discovery,
}

impl SessionType {
    /// The key's value, or `None` for another word (answered 0x0209).
    pub fn from_value(v: &str) -> Option<SessionType> {
        match v {
            "Normal" => Some(SessionType::Normal),
            "Discovery" => Some(SessionType::Discovery),
            _ => None,
        }
    }
}

/// Which initiators may log in to a target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum InitiatorAcl {
    /// Any initiator.
    #[default]
    Any,
    /// Only these initiator names (compared ignoring ASCII case: iSCSI names are
    /// case-insensitive, RFC 3722).
    Only(Vec<String>),
}

impl InitiatorAcl {
    /// Whether `initiator` may log in.
    pub fn allows(&self, initiator: &str) -> bool {
        match self {
            InitiatorAcl::Any => true,
            InitiatorAcl::Only(names) => names.iter().any(|n| n.eq_ignore_ascii_case(initiator)),
        }
    }
}

/// A network portal of a target: address, TCP port and portal group tag, as SendTargets
/// reports it (`TargetAddress=<ip>:<port>,<tpgt>`; IPv6 in brackets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Portal {
    /// The address.
    pub addr: IpAddr,
    /// The port (3260 for iSCSI and iSER).
    pub port: u16,
    /// The target portal group tag.
    pub tpgt: u16,
}

impl core::fmt::Display for Portal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{}:{},{}", a, self.port, self.tpgt),
            IpAddr::V6(a) => write!(f, "[{}]:{},{}", a, self.port, self.tpgt),
        }
    }
}

/// One target this portal serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetConfig {
    /// The target's iSCSI name (IQN).
    pub name: String,
    /// TargetAlias, sent in the first login response of a normal session when set.
    pub alias: Option<String>,
    /// The initiators allowed to log in (and to see the target in SendTargets).
    pub initiators: InitiatorAcl,
    /// The portals SendTargets reports for it.
    pub portals: Vec<Portal>,
    /// CHAP required of its normal sessions (`None`: AuthMethod=None).
    pub chap: Option<super::chap::ChapConfig>,
}

impl TargetConfig {
    /// A target open to any initiator, without alias or portals.
    pub fn new(name: impl Into<String>) -> TargetConfig {
        TargetConfig {
            name: name.into(),
            alias: None,
            initiators: InitiatorAcl::Any,
            portals: Vec::new(),
            chap: None,
        }
    }
}

/// How discovery sessions authenticate: `None` (normal sessions follow their target's
/// [`TargetConfig::chap`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AuthPolicy {
    /// No authentication (`AuthMethod=None`).
    #[default]
    None,
}

/// The target side's configuration of a login: what it serves and what it prefers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginConfig {
    /// The targets of this portal group.
    pub targets: Vec<TargetConfig>,
    /// TargetPortalGroupTag of the portal the connection came in on.
    pub portal_group_tag: u16,
    /// Whether the connection is iSER (RDMA): RDMAExtensions=Yes is then required of normal
    /// sessions, and the iSER receive lengths replace MaxRecvDataSegmentLength.
    pub iser: bool,
    /// The target's preferences, the second operand of every result function.
    pub prefs: SessionParams,
    /// Authentication required.
    pub auth: AuthPolicy,
    /// Command window granted at the end of login: MaxCmdSN = ExpCmdSN + depth - 1.
    pub queue_depth: u32,
    /// Longest login text accepted across continued PDUs.
    pub max_text_len: usize,
    /// CHAP required of discovery sessions (`None`: none, as LIO's default).
    pub discovery_chap: Option<super::chap::ChapConfig>,
}

impl LoginConfig {
    /// A configuration with the default preferences ([`SessionParams::target_defaults`]),
    /// portal group tag 1, queue depth 128 and 64 KiB of login text.
    pub fn new(targets: Vec<TargetConfig>, iser: bool) -> LoginConfig {
        LoginConfig {
            targets,
            portal_group_tag: 1,
            iser,
            prefs: SessionParams::target_defaults(iser),
            auth: AuthPolicy::None,
            queue_depth: 128,
            max_text_len: super::text::DEFAULT_MAX_TEXT_LEN,
            discovery_chap: None,
        }
    }

    /// The target named `name` (names compared ignoring ASCII case).
    pub fn target(&self, name: &str) -> Option<&TargetConfig> {
        self.targets
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }
}

/// Operational parameters of a session and connection (RFC 7143 §13, RFC 7145 §6.3). As a
/// [`LoginConfig::prefs`] it holds the target's preferences; out of a login, the negotiated
/// values. HeaderDigest and DataDigest are always None and OFMarker/IFMarker always No, so
/// they have no field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionParams {
    /// MaxConnections (1..65535).
    pub max_connections: u16,
    /// InitialR2T.
    pub initial_r2t: bool,
    /// ImmediateData.
    pub immediate_data: bool,
    /// MaxBurstLength (512..2^24-1).
    pub max_burst_length: u32,
    /// FirstBurstLength (512..2^24-1, at most MaxBurstLength).
    pub first_burst_length: u32,
    /// DefaultTime2Wait in seconds (0..3600).
    pub default_time2wait: u16,
    /// DefaultTime2Retain in seconds (0..3600).
    pub default_time2retain: u16,
    /// MaxOutstandingR2T (1..65535).
    pub max_outstanding_r2t: u16,
    /// DataPDUInOrder.
    pub data_pdu_in_order: bool,
    /// DataSequenceInOrder.
    pub data_sequence_in_order: bool,
    /// ErrorRecoveryLevel (0..2).
    pub error_recovery_level: u8,
    /// The target's MaxRecvDataSegmentLength: the longest data segment it receives (TCP).
    pub target_max_recv_data_segment_length: u32,
    /// The initiator's MaxRecvDataSegmentLength: the longest the target may send (TCP).
    pub initiator_max_recv_data_segment_length: u32,
    /// RDMAExtensions (iSER).
    pub rdma_extensions: bool,
    /// InitiatorRecvDataSegmentLength (iSER): the longest control-PDU data segment the target
    /// may send.
    pub initiator_recv_data_segment_length: u32,
    /// TargetRecvDataSegmentLength (iSER): the longest control-PDU data segment the target
    /// receives.
    pub target_recv_data_segment_length: u32,
    /// MaxOutstandingUnexpectedPDUs (iSER; 0 = unlimited, else 2..2^32-1).
    pub max_outstanding_unexpected_pdus: u32,
}

impl Default for SessionParams {
    /// The RFC defaults: what a session uses for a key nobody negotiated.
    fn default() -> Self {
        SessionParams {
            max_connections: 1,
            initial_r2t: true,
            immediate_data: true,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            default_time2wait: 2,
            default_time2retain: 20,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            error_recovery_level: 0,
            target_max_recv_data_segment_length: 8192,
            initiator_max_recv_data_segment_length: 8192,
            rdma_extensions: false,
            initiator_recv_data_segment_length: 8192,
            target_recv_data_segment_length: 8192,
            max_outstanding_unexpected_pdus: 0,
        }
    }
}

impl SessionParams {
    /// The target's default preferences: the RFC defaults, with RDMAExtensions=Yes on iSER.
    pub fn target_defaults(iser: bool) -> SessionParams {
        SessionParams {
            rdma_extensions: iser,
            ..SessionParams::default()
        }
    }

    /// Longest data segment the target may send in a PDU: InitiatorRecvDataSegmentLength on
    /// iSER, the initiator's MaxRecvDataSegmentLength otherwise.
    pub fn max_send_data_segment_length(&self) -> u32 {
        if self.rdma_extensions {
            self.initiator_recv_data_segment_length
        } else {
            self.initiator_max_recv_data_segment_length
        }
    }

    /// Longest data segment the target accepts in a PDU: TargetRecvDataSegmentLength on iSER,
    /// the target's MaxRecvDataSegmentLength otherwise.
    pub fn max_recv_data_segment_length(&self) -> u32 {
        if self.rdma_extensions {
            self.target_recv_data_segment_length
        } else {
            self.target_max_recv_data_segment_length
        }
    }
}

/// Answer value for a key nobody here understands.
pub const NOT_UNDERSTOOD: &str = "NotUnderstood";
/// Answer value for a key irrelevant to this session.
pub const IRRELEVANT: &str = "Irrelevant";
/// Answer value for an invalid offer.
pub const REJECT: &str = "Reject";

/// Largest 24-bit length (RFC 7143's `2**24 - 1` bound).
const MAX_LEN_24: u64 = (1 << 24) - 1;

/// Parses a numerical value (RFC 7143 §6.1): decimal, or hexadecimal with `0x`/`0X`.
pub fn parse_number(v: &str) -> Option<u64> {
    let (digits, radix) = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (v, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Parses a boolean value: exactly `Yes` or `No`.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "Yes"
    } else {
        "No"
    }
}

/// Keys a login handles itself before [`Negotiation`]: identity and security keys.
pub fn is_login_key(key: &str) -> bool {
    matches!(
        key,
        "InitiatorName" | "InitiatorAlias" | "TargetName" | "SessionType" | "AuthMethod"
    ) || key.starts_with("CHAP_")
}

/// Keys irrelevant in a discovery session (RFC 7143 §13: "Irrelevant when:
/// SessionType=Discovery").
fn irrelevant_in_discovery(key: &str) -> bool {
    matches!(
        key,
        "MaxConnections"
            | "InitialR2T"
            | "ImmediateData"
            | "MaxBurstLength"
            | "FirstBurstLength"
            | "MaxOutstandingR2T"
            | "DataPDUInOrder"
            | "DataSequenceInOrder"
    )
}

/// Keys irrelevant without RDMAExtensions (RFC 7145 §6.3).
fn iser_only(key: &str) -> bool {
    matches!(
        key,
        "InitiatorRecvDataSegmentLength"
            | "TargetRecvDataSegmentLength"
            | "MaxOutstandingUnexpectedPDUs"
    )
}

/// Why a negotiation cannot go on: the login fails with this status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NegotiationFailure {
    /// RDMAExtensions was offered as No on an iSER connection (login status 0x0200).
    RdmaExtensionsNo,
    /// RDMAExtensions was never offered on an iSER connection of a normal session
    /// (login status 0x0207).
    RdmaExtensionsMissing,
}

impl NegotiationFailure {
    /// The login status that answers it.
    pub fn login_status(self) -> super::pdu::LoginStatus {
        match self {
            NegotiationFailure::RdmaExtensionsNo => super::pdu::LoginStatus::INITIATOR_ERROR,
            NegotiationFailure::RdmaExtensionsMissing => super::pdu::LoginStatus::MISSING_PARAMETER,
        }
    }
}

/// The operational negotiation of one login: fed the initiator's keys exchange by exchange,
/// it answers them and accumulates the [`SessionParams`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiation {
    prefs: SessionParams,
    iser: bool,
    session_type: SessionType,
    params: SessionParams,
    rdma_offered: bool,
    /// Keys the target declared unsolicited: the initiator's later value for one of them is
    /// its answer, taken without answering back.
    declared: Vec<&'static str>,
    declarations_sent: bool,
    trdsl_answered: bool,
    immediate_offered: bool,
}

impl Negotiation {
    /// A negotiation against the target's preferences, starting from the RFC defaults.
    pub fn new(prefs: SessionParams, iser: bool, session_type: SessionType) -> Negotiation {
        Negotiation {
            prefs,
            iser,
            session_type,
            params: SessionParams::default(),
            rdma_offered: false,
            declared: Vec::new(),
            declarations_sent: false,
            trdsl_answered: false,
            immediate_offered: false,
        }
    }

    /// The values negotiated so far.
    pub fn params(&self) -> &SessionParams {
        &self.params
    }

    /// Answers one exchange's keys, in order. Identity and security keys
    /// ([`is_login_key`]) are skipped: the login handles them. An error ends the login.
    pub fn answer(&mut self, pairs: &[KeyValue]) -> Result<Vec<KeyValue>, NegotiationFailure> {
        let mut out = Vec::new();
        for kv in pairs.iter().filter(|kv| !is_login_key(&kv.key)) {
            if let Some(v) = self.answer_one(&kv.key, &kv.value)? {
                out.push(KeyValue::new(kv.key.clone(), v));
            }
        }
        if self.params.first_burst_length > self.params.max_burst_length {
            self.params.first_burst_length = self.params.max_burst_length;
            if let Some(a) = out
                .iter_mut()
                .find(|a| a.key == "FirstBurstLength" && parse_number(&a.value).is_some())
            {
                a.value = self.params.first_burst_length.to_string();
            }
        }
        Ok(out)
    }

    fn answer_one(&mut self, key: &str, v: &str) -> Result<Option<String>, NegotiationFailure> {
        let discovery = self.session_type == SessionType::Discovery;
        if discovery && irrelevant_in_discovery(key) || !self.iser && iser_only(key) {
            return Ok(Some(IRRELEVANT.into()));
        }
        if let Some(i) = self.declared.iter().position(|d| *d == key) {
            // The initiator's answer to our declaration: take the smaller, say nothing.
            self.declared.remove(i);
            if let (Some(n), "TargetRecvDataSegmentLength") = (parse_number(v), key) {
                if (512..=MAX_LEN_24).contains(&n) {
                    let p = &mut self.params.target_recv_data_segment_length;
                    *p = (*p).min(n as u32);
                }
            }
            return Ok(None);
        }
        let (p, pr) = (&mut self.params, &self.prefs);
        let reject = || Ok(Some(REJECT.to_string()));
        macro_rules! min_num {
            ($field:ident, $lo:expr, $hi:expr, $t:ty) => {
                match parse_number(v) {
                    Some(n) if ($lo..=$hi).contains(&n) => {
                        p.$field = (n as $t).min(pr.$field);
                        Ok(Some(p.$field.to_string()))
                    }
                    _ => reject(),
                }
            };
        }
        macro_rules! boolean {
            ($field:ident, $op:tt) => {
                match parse_bool(v) {
                    Some(b) => {
                        p.$field = b $op pr.$field;
                        Ok(Some(yes_no(p.$field).into()))
                    }
                    None => reject(),
                }
            };
        }
        match key {
            "HeaderDigest" | "DataDigest" => {
                if v.split(',').any(|d| d == "None") {
                    Ok(Some("None".into()))
                } else {
                    reject()
                }
            }
            "MaxRecvDataSegmentLength" => match parse_number(v) {
                Some(n) if (512..=MAX_LEN_24).contains(&n) => {
                    p.initiator_max_recv_data_segment_length = n as u32;
                    Ok(None)
                }
                _ => reject(),
            },
            "ImmediateData" => {
                self.immediate_offered = true;
                boolean!(immediate_data, &&)
            }
            "InitialR2T" => boolean!(initial_r2t, ||),
            "DataPDUInOrder" => boolean!(data_pdu_in_order, ||),
            "DataSequenceInOrder" => boolean!(data_sequence_in_order, ||),
            "RDMAExtensions" => match parse_bool(v) {
                Some(b) => {
                    self.rdma_offered = true;
                    p.rdma_extensions = b && pr.rdma_extensions;
                    if self.iser && !b {
                        return Err(NegotiationFailure::RdmaExtensionsNo);
                    }
                    Ok(Some(yes_no(p.rdma_extensions).into()))
                }
                None => reject(),
            },
            "OFMarker" | "IFMarker" => match parse_bool(v) {
                Some(_) => Ok(Some("No".into())),
                None => reject(),
            },
            "OFMarkInt" | "IFMarkInt" => Ok(Some(IRRELEVANT.into())),
            "MaxConnections" => min_num!(max_connections, 1, 65535, u16),
            "MaxBurstLength" => min_num!(max_burst_length, 512, MAX_LEN_24, u32),
            "FirstBurstLength" => min_num!(first_burst_length, 512, MAX_LEN_24, u32),
            "MaxOutstandingR2T" => min_num!(max_outstanding_r2t, 1, 65535, u16),
            "ErrorRecoveryLevel" => min_num!(error_recovery_level, 0, 2, u8),
            "DefaultTime2Retain" => min_num!(default_time2retain, 0, 3600, u16),
            "DefaultTime2Wait" => match parse_number(v) {
                Some(n) if n <= 3600 => {
                    p.default_time2wait = (n as u16).max(pr.default_time2wait);
                    Ok(Some(p.default_time2wait.to_string()))
                }
                _ => reject(),
            },
            "InitiatorRecvDataSegmentLength" => {
                min_num!(initiator_recv_data_segment_length, 512, MAX_LEN_24, u32)
            }
            "TargetRecvDataSegmentLength" => {
                self.trdsl_answered = true;
                min_num!(target_recv_data_segment_length, 512, MAX_LEN_24, u32)
            }
            "MaxOutstandingUnexpectedPDUs" => match parse_number(v) {
                Some(n) if n == 0 || (2..=u64::from(u32::MAX)).contains(&n) => {
                    let n = n as u32;
                    let t = pr.max_outstanding_unexpected_pdus;
                    p.max_outstanding_unexpected_pdus = match (n, t) {
                        (0, t) => t,
                        (n, 0) => n,
                        (n, t) => n.min(t),
                    };
                    Ok(Some(p.max_outstanding_unexpected_pdus.to_string()))
                }
                _ => reject(),
            },
            "TargetAlias" | "TargetAddress" | "TargetPortalGroupTag" | "SendTargets" => reject(),
            _ => Ok(Some(NOT_UNDERSTOOD.into())),
        }
    }

    /// The target's own declarations, once per login (empty afterwards): its receive length,
    /// MaxRecvDataSegmentLength on TCP or TargetRecvDataSegmentLength on iSER (unless the
    /// initiator offered that key, which was then answered); and ImmediateData=No when the
    /// target wants none and a normal session's initiator has not offered the key (its
    /// default is Yes; No decides an AND, so no answer is needed, RFC 7143 §6.2.1). Sent
    /// before full-feature phase.
    pub fn declarations(&mut self) -> Vec<KeyValue> {
        if self.declarations_sent {
            return Vec::new();
        }
        self.declarations_sent = true;
        let mut out = Vec::new();
        if self.iser {
            if !self.trdsl_answered {
                let v = self.prefs.target_recv_data_segment_length;
                self.params.target_recv_data_segment_length = v;
                self.declared.push("TargetRecvDataSegmentLength");
                out.push(KeyValue::new("TargetRecvDataSegmentLength", v.to_string()));
            }
        } else {
            let v = self.prefs.target_max_recv_data_segment_length;
            self.params.target_max_recv_data_segment_length = v;
            out.push(KeyValue::new("MaxRecvDataSegmentLength", v.to_string()));
        }
        if self.session_type == SessionType::Normal
            && !self.prefs.immediate_data
            && !self.immediate_offered
        {
            self.params.immediate_data = false;
            self.declared.push("ImmediateData");
            out.push(KeyValue::new("ImmediateData", "No"));
        }
        out
    }

    /// The negotiated parameters at the move to full-feature phase. On iSER, a normal
    /// session whose initiator never offered RDMAExtensions fails with
    /// [`NegotiationFailure::RdmaExtensionsMissing`]; a discovery session may omit it and runs
    /// with the extensions all the same (the connection is RDMA).
    pub fn finish(&self) -> Result<SessionParams, NegotiationFailure> {
        if self.iser && !self.rdma_offered && self.session_type == SessionType::Normal {
            return Err(NegotiationFailure::RdmaExtensionsMissing);
        }
        let mut p = self.params;
        if self.iser {
            p.rdma_extensions = true;
        }
        Ok(p)
    }
}

#[cfg(test)]
#[path = "negotiate_tests.rs"]
mod tests;
