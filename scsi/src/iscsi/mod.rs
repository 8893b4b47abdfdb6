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

/// Defines `pub struct $name(pub $int)` with associated constants and a name lookup (the
/// shape of `raidline-proto`'s `code_newtype!`).
macro_rules! code_newtype {
    (
        $(#[$meta:meta])*
        pub struct $name:ident($int:ty) {
            $( $(#[$cmeta:meta])* $cname:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $int);

        impl $name {
            $( $(#[$cmeta])* pub const $cname: $name = $name($value); )*

            /// Every named value of this type, in declaration order.
            pub const KNOWN: &'static [$name] = &[ $( $name($value), )* ];

            /// The constant's name, or `None` for a value this crate does not name.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( v if v == $value => Some(stringify!($cname)), )*
                    _ => None,
                }
            }

            /// Whether this value is one of the named constants.
            pub fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> Self {
                v.0
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}::{}({:#x})", stringify!($name), n, self.0),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{:#x}", self.0),
                }
            }
        }
    };
}
pub(crate) use code_newtype;

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
