//! The initiator's one error type: every failure a host operation can report, typed so callers
//! (the CLI, tests, the target's end-to-end tests) can tell an NVMe status from a transport
//! failure from a timeout.
//!
//! Layering: [`Error::Nvme`] is a well-formed answer from the controller that says no (status,
//! DNR, command); [`Error::Protocol`] is a controller that broke the protocol (a malformed or
//! unexpected response); [`Error::Timeout`], [`Error::Disconnected`], [`Error::Transport`] and
//! [`Error::QueueDown`] are the connection failing; [`Error::Fabric`] is a local resource failure;
//! [`Error::InvalidArgument`] is the caller's mistake, caught before anything was sent.

use std::time::Duration;

use raidline_fabric::{ConnectFailure, FabricError, PostError, WcStatus};
use raidline_proto::rdma_cm::CmRejectStatus;
use raidline_proto::{ParseError, Status, StatusCodeType};
use thiserror::Error;

use crate::types::Qid;

/// Every failure of the initiator library.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A local fabric call failed (device, memory registration, queue creation).
    #[error("fabric: {0}")]
    Fabric(#[from] FabricError),
    /// Posting a work request failed.
    #[error("queue {qid}: post failed: {error}")]
    Post {
        /// The queue.
        qid: Qid,
        /// What the fabric said.
        error: PostError,
    },
    /// The controller completed the command with an error status.
    #[error("queue {qid}: {command} (cid {cid}) failed: {}", describe(command, status, *dw0))]
    Nvme {
        /// The queue the command ran on.
        qid: Qid,
        /// Its command identifier.
        cid: u16,
        /// What the command was (e.g. "Connect", "Read").
        command: &'static str,
        /// The status, with DNR and More.
        status: Status,
        /// Completion DW0 (Connect "invalid parameters" puts IATTR/IPO here).
        dw0: u32,
    },
    /// A command got no answer within its timeout. The queue is failed afterwards.
    #[error("queue {qid}: {command} (cid {cid}) timed out after {after:?}")]
    Timeout {
        /// The queue.
        qid: Qid,
        /// The command identifier (0xFFFF for a connection step that is not a command).
        cid: u16,
        /// What timed out.
        command: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The connection went down (RDMA CM disconnect or device removal).
    #[error("queue {qid}: disconnected by the peer or the device")]
    Disconnected {
        /// The queue.
        qid: Qid,
    },
    /// A work request completed with an error status (the QP is in the error state).
    #[error("queue {qid}: transport error {status:?}")]
    Transport {
        /// The queue.
        qid: Qid,
        /// The completion status.
        status: WcStatus,
    },
    /// The queue failed earlier (timeout, disconnect, transport error) and takes no commands.
    #[error("queue {qid} is down: {cause}")]
    QueueDown {
        /// The queue.
        qid: Qid,
        /// The failure that took it down.
        cause: String,
    },
    /// The target rejected the RDMA CM connection.
    #[error("queue {qid}: connection rejected (CM reason {reason}{})", match .status { Some(s) => format!(", NVMe/RDMA status {s:?}"), None => String::new() })]
    Rejected {
        /// The queue.
        qid: Qid,
        /// IB CM reject reason (28: by the target; 8: nothing listens there).
        reason: i32,
        /// The NVMe/RDMA reject status, when the target sent one.
        status: Option<CmRejectStatus>,
    },
    /// The RDMA CM connect failed before the target answered (address or route resolution,
    /// unreachable).
    #[error("queue {qid}: connect failed: {reason:?}")]
    ConnectFailed {
        /// The queue.
        qid: Qid,
        /// Why.
        reason: ConnectFailure,
    },
    /// The controller broke the protocol: a response that cannot be parsed or does not match
    /// what was asked.
    #[error("protocol violation by the controller: {0}")]
    Protocol(String),
    /// A structure the controller returned did not parse.
    #[error("malformed data from the controller: {0}")]
    Malformed(#[from] ParseError),
    /// The controller did not become ready (or reported a fatal status) within CAP.TO.
    #[error("controller not ready: {0}")]
    NotReady(String),
    /// The caller asked for something impossible (checked before anything was sent).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// A status in words, read in the context of the command that got it: command-specific codes
/// mean different things for Fabrics commands (Connect) and NVM commands, and a Connect's
/// "invalid parameters" names the offending field's location from DW0 (IATTR/IPO).
pub fn describe(command: &str, status: &Status, dw0: u32) -> String {
    let fabrics = matches!(command, "Connect" | "Property Get" | "Property Set");
    let named = match (status.code.sct, status.code.sc) {
        (StatusCodeType::COMMAND_SPECIFIC, sc) if fabrics => match sc {
            0x80 => Some("connect incompatible format".to_string()),
            0x81 => Some("controller busy".to_string()),
            0x82 => Some(format!(
                "connect invalid parameters (at {} byte {})",
                if (dw0 >> 16) & 1 == 1 {
                    "Connect data"
                } else {
                    "command"
                },
                dw0 & 0xFFFF
            )),
            0x83 => Some("connect restart discovery".to_string()),
            0x84 => Some("connect invalid host".to_string()),
            0x85 => Some("invalid queue type".to_string()),
            0x90 => Some("discover restart".to_string()),
            0x91 => Some("authentication required".to_string()),
            _ => None,
        },
        _ => None,
    };
    let mut s = named.unwrap_or_else(|| match status.code.name() {
        Some(n) => n.to_lowercase().replace('_', " "),
        None => format!("sct {:#x} sc {:#04x}", status.code.sct.0, status.code.sc),
    });
    if status.more {
        s.push_str(" (more in the error log)");
    }
    if status.dnr {
        s.push_str(" (DNR)");
    }
    s
}

impl Error {
    /// The NVMe status, when the controller answered with one.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Nvme { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the connection is unusable after this error (everything but a plain NVMe status
    /// and a caller's mistake).
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Error::Nvme { .. } | Error::InvalidArgument(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidline_proto::StatusCode;

    #[test]
    fn statuses_read_in_the_command_s_context() {
        let st = Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr();
        let e = Error::Nvme {
            qid: Qid(0),
            cid: 3,
            command: "Connect",
            status: st,
            dw0: (1 << 16) | 256,
        };
        assert_eq!(
            e.to_string(),
            "queue 0: Connect (cid 3) failed: connect invalid parameters (at Connect data byte 256) (DNR)"
        );
        // The same (SCT, SC) on a Write is the NVM command set's meaning.
        assert_eq!(describe("Write", &st, 0), "write to read only (DNR)");
        let media = Status::new(StatusCode::UNRECOVERED_READ_ERROR);
        assert_eq!(describe("Read", &media, 0), "unrecovered read error");
        let odd = Status::from_field(0x07FF);
        assert_eq!(describe("Read", &odd, 0), "sct 0x7 sc 0xff");
    }
}
