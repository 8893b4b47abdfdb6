//! iSCSI (RFC 7143): the 48-byte Basic Header Segment of every opcode, the PDU framing around
//! it, login and text `key=value` data, the login key negotiation and the sans-IO login state
//! machine of a target, and the discovery session's SendTargets answer.
//!
//! - [`bhs`]: opcodes, the generic [`Bhs`] view, PDU lengths, splitting a received buffer into
//!   header, AHS and data segment, the AHS list and LUN encoding;
//! - [`pdu`]: one typed structure per opcode with `parse` and `emit`, and [`Pdu`] over all;
//! - [`error`]: [`PduError`] and the [`RejectReason`] that answers it;
//! - [`text`]: `key=value` NUL-separated text (RFC 7143 §6.1) and the continuation assembler;
//! - [`negotiate`]: the target's parameters, the negotiated [`SessionParams`] and the rules of
//!   every key (RFC 7143 §13, RFC 7145 §6.3);
//! - [`login`]: the login phase as a state machine: requests in, responses out;
//! - [`discovery`]: `SendTargets` (RFC 7143 §13.3, Appendix C) and text requests in a
//!   discovery session.
//!
//! Every structure parses from bytes a peer chose, so nothing here panics on input: lengths are
//! checked once, and codes the peer picks are newtypes that keep unknown values, so an unknown
//! opcode or reason can be answered precisely (a Reject carrying reason 0x05, a login status).

pub mod bhs;
pub mod chap;
pub mod discovery;
pub mod error;
pub mod login;
pub mod negotiate;
pub mod pdu;
pub mod text;

pub use bhs::{Bhs, Opcode, BHS_LEN};
pub use error::{PduError, RejectReason};
pub use login::{Login, LoginOutcome, LoginStep};
pub use negotiate::{LoginConfig, SessionParams, SessionType};
pub use pdu::Pdu;
