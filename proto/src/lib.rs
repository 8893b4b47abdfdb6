//! NVMe and NVMe-over-Fabrics wire formats: parse and build, nothing else.
//!
//! This crate is the protocol vocabulary shared by the target, the initiator and the fabric. It
//! does no I/O, holds no state and is `#![forbid(unsafe_code)]`. Every structure follows the same shape
//! (after smoltcp's `wire` module):
//!
//! - a `mod field` with the byte ranges of each field, cited to the specification section;
//! - `parse(&[u8]) -> Result<Self, ParseError>` that checks the length **exactly** (trailing
//!   bytes are an error, not ignored) and checks every reserved encoding it must reject;
//! - `emit(&self, &mut [u8])` / `to_bytes()` that writes every byte (reserved bytes are zeroed).
//!
//! Parsers are total: any byte string yields a value or a typed [`ParseError`], never a panic.
//! Codes that a peer chooses (opcodes, status codes, log page and feature identifiers) are
//! newtypes with named constants that keep unknown values, so an unknown code can be answered
//! precisely instead of being lost in parsing.
//!
//! References: NVM Express Base Specification 2.0 ("Base"), NVM Command Set Specification 1.0
//! ("NVM"), NVM Express over Fabrics 1.1 ("Fabrics"), NVMe over RDMA transport binding
//! (TP 8011 / Fabrics 1.1 §7.3, "RDMA"), and Linux `include/linux/nvme.h` /
//! `include/linux/nvme-rdma.h`, which every host in the field follows.
#![forbid(unsafe_code)]

#[macro_use]
mod codes;
mod bytes;

pub mod admin;
pub mod aen;
pub mod auth;
pub mod cqe;
pub mod error;
pub mod fabrics;
pub mod features;
pub mod identify;
pub mod io;
pub mod log;
pub mod opcode;
pub mod rdma_cm;
pub mod sgl;
pub mod sqe;
pub mod status;
pub mod text;

pub use cqe::Cqe;
pub use error::ParseError;
pub use opcode::{AdminOpcode, FabricsCommandType, IoOpcode};
pub use sgl::SglDescriptor;
pub use sqe::Sqe;
pub use status::{Status, StatusCode, StatusCodeType};
