//! SCSI block commands, iSCSI PDUs and iSER headers: parse, build and answer; no I/O.
//!
//! This crate is the vocabulary of Raidline's iSER target (issue 18), as `raidline-proto` is
//! NVMe-oF's. It does no I/O, holds no connection state and is `#![forbid(unsafe_code)]`:
//!
//! - [`cdb`]: command descriptor blocks of the SCSI block commands Linux `sd` and other hosts
//!   use, parsed into typed commands ([`cdb::Command`]), each rejection carrying the sense data
//!   that answers it;
//! - [`sense`]: fixed-format sense data (SPC-4 §4.5.3), the keys and the additional sense codes
//!   the target answers with;
//! - [`sbc`]: the sans-IO block-command core: given a logical unit's description and a parsed
//!   command, it either answers at once (INQUIRY, READ CAPACITY, MODE SENSE, REPORT LUNS, …) or
//!   names the storage operation the caller must run (read, write, flush, unmap, write zeroes);
//! - [`iscsi`]: the iSCSI basic header segment of every opcode (RFC 7143 §11), login and text
//!   key=value data and the login key negotiation;
//! - [`iser`]: the iSER header in front of every iSCSI PDU and the RDMA CM private data
//!   (RFC 7145, Linux `include/scsi/iser.h`).
//!
//! Parsers are total: any byte string yields a value or a typed error, never a panic. The fuzz
//! targets under `scsi/fuzz` hold every parser to that, and to "whatever parses rebuilds equal".
//!
//! References: SPC-4 (SCSI Primary Commands), SBC-3 (SCSI Block Commands), RFC 7143 (iSCSI),
//! RFC 7145 (iSER), and the implementations every host in the field talks to: Linux `sd`,
//! `ib_iser` and `isert`, open-iscsi, tgt.
#![forbid(unsafe_code)]

mod bytes;

pub mod cdb;
pub mod iscsi;
pub mod iser;
pub mod sbc;
pub mod sense;
