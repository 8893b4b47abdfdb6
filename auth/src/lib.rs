//! NVMe in-band authentication, DH-HMAC-CHAP (NVMe Base 2.0 §8.13, TP 8006), without I/O: the
//! secrets (`DHHC-1:…`), the key transformation, the RFC 7919 groups, the responses, and the
//! controller's side of a transaction ([`Authenticator`]) a queue feeds with the payloads of
//! Authentication Send and asks for those of Authentication Receive. [`HostAuth`] is the host's
//! side, for in-process hosts and tests.
//!
//! The computations follow the Linux host and nvmet (`drivers/nvme/common/auth.c`,
//! `drivers/nvme/host/auth.c`, `drivers/nvme/target/auth.c`); the wire formats are in
//! `raidline_proto::auth`.

mod chap;
mod controller;
mod dh;
mod hash;
mod host;
mod secret;

pub use chap::{augmented_challenge, controller_response, host_response};
pub use controller::{Authenticator, Event, Outcome, Policy, Step};
pub use dh::{DhError, DhGroup, KeyPair};
pub use hash::HashFn;
pub use host::{HostAuth, HostError};
pub use secret::{Secret, SecretError};

/// The host's challenge to the controller, kept until R2 is computed or checked: S2, C2 and
/// the session key (none with the null group).
pub(crate) struct HostChallenge {
    pub(crate) s2: u32,
    pub(crate) c2: zeroize::Zeroizing<Vec<u8>>,
    pub(crate) session: Option<zeroize::Zeroizing<Vec<u8>>>,
}

/// Fills `buf` from the operating system's random source.
pub fn random(buf: &mut [u8]) {
    if getrandom::fill(buf).is_err() {
        // getrandom fails only where no source exists at all; no key may be made then.
        panic!("the operating system offers no random source (getrandom failed)");
    }
}

#[cfg(test)]
mod tests;
