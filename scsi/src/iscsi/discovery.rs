//! Text requests in full-feature phase, above all `SendTargets` in a discovery session
//! (RFC 7143 §13.3, formerly RFC 3720 §12.3; Appendix C).
//!
//! - `SendTargets=All` (discovery sessions only): every target the initiator may log in to;
//! - `SendTargets=<iSCSI name>`: that target, if it exists and the initiator may use it;
//! - `SendTargets=` (empty; normal sessions only): the session's own target.
//!
//! Each target is reported as `TargetName=<name>` followed by one
//! `TargetAddress=<ip>:<port>,<tpgt>` per portal (IPv6 addresses in brackets). Targets the
//! initiator is not allowed to log in to are left out, so discovery does not reveal them.
//! `All` in a normal session, or an empty value in a discovery session, is answered
//! `SendTargets=Reject`.
//!
//! Any other key in full-feature phase is answered `Reject` when it is an iSCSI key (this
//! target renegotiates nothing after login) and `NotUnderstood` otherwise. A response longer
//! than the initiator's MaxRecvDataSegmentLength is the caller's to cut into Text Responses
//! with the C bit (RFC 7143 §11.11.2).

use super::login::LoginSession;
use super::negotiate::{LoginConfig, SessionType, NOT_UNDERSTOOD, REJECT};
use super::text::{emit_text, parse_text, KeyValue, TextError, DEFAULT_MAX_VALUE_LEN};

/// iSCSI keys (RFC 7143 §13, RFC 7145 §6.3) that are answered `Reject` in full-feature
/// phase.
const KNOWN_KEYS: &[&str] = &[
    "AuthMethod",
    "HeaderDigest",
    "DataDigest",
    "MaxConnections",
    "TargetName",
    "InitiatorName",
    "TargetAlias",
    "InitiatorAlias",
    "TargetAddress",
    "TargetPortalGroupTag",
    "InitialR2T",
    "ImmediateData",
    "MaxRecvDataSegmentLength",
    "MaxBurstLength",
    "FirstBurstLength",
    "DefaultTime2Wait",
    "DefaultTime2Retain",
    "MaxOutstandingR2T",
    "DataPDUInOrder",
    "DataSequenceInOrder",
    "ErrorRecoveryLevel",
    "SessionType",
    "OFMarker",
    "IFMarker",
    "OFMarkInt",
    "IFMarkInt",
    "RDMAExtensions",
    "InitiatorRecvDataSegmentLength",
    "TargetRecvDataSegmentLength",
    "MaxOutstandingUnexpectedPDUs",
];

/// The answer to `SendTargets=<value>` for `initiator` in a session of `session_type` whose
/// target (normal sessions) is `session_target`.
pub fn send_targets(
    config: &LoginConfig,
    initiator: &str,
    session_type: SessionType,
    session_target: Option<&str>,
    value: &str,
) -> Vec<KeyValue> {
    let wanted: Vec<_> = match (value, session_type) {
        ("All", SessionType::Discovery) => config.targets.iter().collect(),
        ("All", SessionType::Normal) | ("", SessionType::Discovery) => {
            return vec![KeyValue::new("SendTargets", REJECT)]
        }
        ("", SessionType::Normal) => session_target
            .and_then(|n| config.target(n))
            .into_iter()
            .collect(),
        (name, _) => config.target(name).into_iter().collect(),
    };
    let mut out = Vec::new();
    for t in wanted
        .into_iter()
        .filter(|t| t.initiators.allows(initiator))
    {
        out.push(KeyValue::new("TargetName", t.name.clone()));
        for p in &t.portals {
            out.push(KeyValue::new("TargetAddress", p.to_string()));
        }
    }
    out
}

/// Answers a full-feature Text Request's complete text (the caller joins continued PDUs with
/// a [`super::text::TextAssembler`]): `SendTargets` as [`send_targets`] does, other keys
/// `Reject` or `NotUnderstood`. A malformed text is a [`TextError`], answered with a Reject
/// PDU (reason [`TextError::reject_reason`]).
pub fn text_response(
    config: &LoginConfig,
    session: &LoginSession,
    request: &[u8],
) -> Result<Vec<u8>, TextError> {
    let pairs = parse_text(request, DEFAULT_MAX_VALUE_LEN)?;
    let mut out = Vec::new();
    for kv in &pairs {
        if kv.key == "SendTargets" {
            out.extend(send_targets(
                config,
                &session.initiator_name,
                session.session_type,
                session.target_name.as_deref(),
                &kv.value,
            ));
        } else if KNOWN_KEYS.contains(&kv.key.as_str()) {
            out.push(KeyValue::new(kv.key.clone(), REJECT));
        } else {
            out.push(KeyValue::new(kv.key.clone(), NOT_UNDERSTOOD));
        }
    }
    Ok(emit_text(&out))
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
