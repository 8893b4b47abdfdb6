//! Per-queue-pair command dispatch and completion bookkeeping, without I/O.
//!
//! Every NVMe/RDMA queue starts unconnected: its first command must be a Fabrics Connect. After
//! it the queue is the admin queue of a controller (QID 0) or one of its I/O queues. What may
//! arrive on each (Fabrics 1.1 §3 and Linux nvmet's `nvmet_parse_*_cmd`):
//!
//! | queue | allowed | anything else |
//! | --- | --- | --- |
//! | not connected | Connect | Command Sequence Error |
//! | admin | Property Get/Set, admin commands | fabrics Connect again: Controller Busy; Disconnect and others: Invalid Opcode |
//! | I/O | NVM I/O commands, Disconnect | other fabrics commands: Invalid Opcode; Connect again: Controller Busy |
//!
//! Authentication Send/Receive go to the queue's owner on any connected queue
//! ([`Dispatch::Auth`]). A queue whose host must authenticate (DH-HMAC-CHAP: the Connect
//! response set ATR) answers every other command but the fabrics ones with Authentication
//! Required (DNR) until [`QueueState::authenticated`] is called, as Linux's nvmet does
//! (`nvmet_check_auth_status`). The SQ head advances by one for every capsule received and is
//! reported in every completion, which is the host's flow control.

use raidline_proto::fabrics::{
    self, Authentication, Connect, Disconnect, PropertyGet, PropertySet,
};
use raidline_proto::{Cqe, FabricsCommandType, Sqe, Status, StatusCode};

use crate::status::for_parse_error;

/// What a queue pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueRole {
    /// No Connect yet.
    Unconnected,
    /// The admin queue of controller `cntlid`.
    Admin {
        /// Controller id.
        cntlid: u16,
    },
    /// I/O queue `qid` of controller `cntlid`.
    Io {
        /// Controller id.
        cntlid: u16,
        /// Queue id (≥ 1).
        qid: u16,
    },
}

/// Where a received command goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// A Connect: fetch its 1024 bytes of data, then decide with the registry.
    Connect(Connect),
    /// Property Get on the admin queue.
    PropertyGet(PropertyGet),
    /// Property Set on the admin queue.
    PropertySet(PropertySet),
    /// Disconnect of this I/O queue: complete it, then tear the queue down.
    Disconnect(Disconnect),
    /// Authentication Send or Receive (any connected queue).
    Auth(Authentication),
    /// An admin command for the controller.
    Admin,
    /// An NVM I/O command for validation and execution.
    Io,
    /// Answer at once with this status.
    Reject(Status),
}

/// One queue's protocol state: its role and its SQ head.
#[derive(Clone, Copy, Debug)]
pub struct QueueState {
    role: QueueRole,
    /// Entries in the submission queue (HSQSIZE + 1 from the CM request).
    depth: u16,
    sq_head: u16,
    /// The host asked for SQ flow control to be disabled (Connect CATTR bit 2): report 0xFFFF.
    sq_flow_disabled: bool,
    /// The host must authenticate before anything but fabrics commands.
    auth_pending: bool,
}

impl QueueState {
    /// A queue of `depth` entries, not yet connected.
    pub fn new(depth: u16) -> QueueState {
        QueueState {
            role: QueueRole::Unconnected,
            depth: depth.max(1),
            sq_head: 0,
            sq_flow_disabled: false,
            auth_pending: false,
        }
    }

    /// The host must authenticate this queue (DH-HMAC-CHAP) before its other commands run.
    pub fn require_auth(&mut self) {
        self.auth_pending = true;
    }

    /// The host authenticated this queue (or lost it again: `false`).
    pub fn authenticated(&mut self, yes: bool) {
        self.auth_pending = !yes;
    }

    /// Whether the queue still waits for its host to authenticate.
    pub fn auth_pending(&self) -> bool {
        self.auth_pending
    }

    /// The queue's role.
    pub fn role(&self) -> QueueRole {
        self.role
    }

    /// The queue id completions carry.
    pub fn qid(&self) -> u16 {
        match self.role {
            QueueRole::Io { qid, .. } => qid,
            _ => 0,
        }
    }

    /// Records an accepted Connect.
    pub fn connected(&mut self, cmd: &Connect, cntlid: u16) {
        self.role = if cmd.qid == 0 {
            QueueRole::Admin { cntlid }
        } else {
            QueueRole::Io {
                cntlid,
                qid: cmd.qid,
            }
        };
        self.sq_flow_disabled = cmd.cattr & fabrics::CATTR_DISABLE_SQ_FLOW != 0;
    }

    /// Takes a received capsule: advances the SQ head and says where the command goes.
    pub fn receive(&mut self, sqe: &Sqe) -> Dispatch {
        self.sq_head = (self.sq_head + 1) % self.depth;
        let seq_error = Dispatch::Reject(Status::new(StatusCode::COMMAND_SEQUENCE_ERROR));
        let invalid_opcode = Dispatch::Reject(Status::new(StatusCode::INVALID_OPCODE).dnr());
        let busy = Dispatch::Reject(Status::new(StatusCode::CONNECT_CONTROLLER_BUSY).dnr());
        let parsed = |r: Result<Dispatch, raidline_proto::ParseError>| {
            r.unwrap_or_else(|e| Dispatch::Reject(for_parse_error(&e)))
        };
        match (self.role, fabrics::command_type(sqe)) {
            (QueueRole::Unconnected, Some(FabricsCommandType::CONNECT)) => {
                parsed(Connect::parse(sqe).map(Dispatch::Connect))
            }
            (QueueRole::Unconnected, _) => seq_error,
            (_, Some(FabricsCommandType::CONNECT)) => busy,
            (QueueRole::Admin { .. }, Some(FabricsCommandType::PROPERTY_GET)) => {
                parsed(PropertyGet::parse(sqe).map(Dispatch::PropertyGet))
            }
            (QueueRole::Admin { .. }, Some(FabricsCommandType::PROPERTY_SET)) => {
                parsed(PropertySet::parse(sqe).map(Dispatch::PropertySet))
            }
            (QueueRole::Io { .. }, Some(FabricsCommandType::DISCONNECT)) => {
                parsed(Disconnect::parse(sqe).map(Dispatch::Disconnect))
            }
            (_, Some(FabricsCommandType::AUTH_SEND | FabricsCommandType::AUTH_RECEIVE)) => {
                parsed(Authentication::parse(sqe).map(Dispatch::Auth))
            }
            (_, Some(_)) => invalid_opcode,
            (_, None) if self.auth_pending => {
                Dispatch::Reject(Status::new(StatusCode::AUTH_REQUIRED).dnr())
            }
            (QueueRole::Admin { .. }, None) => Dispatch::Admin,
            (QueueRole::Io { .. }, None) => Dispatch::Io,
        }
    }

    /// The completion for command `cid` with `status` and `result`.
    pub fn completion(&self, cid: u16, status: Status, result: u64) -> Cqe {
        Cqe {
            result,
            sq_head: if self.sq_flow_disabled {
                0xFFFF
            } else {
                self.sq_head
            },
            sq_id: self.qid(),
            cid,
            phase: false,
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidline_proto::fabrics::{PropertySize, CATTR_DISABLE_SQ_FLOW};
    use raidline_proto::SglDescriptor;

    fn connect(qid: u16, cattr: u8) -> Connect {
        Connect {
            cid: 1,
            sgl: SglDescriptor::Keyed {
                address: 0x1000,
                length: 1024,
                key: 7,
                invalidate: true,
            },
            recfmt: 0,
            qid,
            sqsize: 31,
            cattr,
            kato: 5000,
        }
    }

    fn prop_get() -> Sqe {
        PropertyGet {
            cid: 2,
            size: PropertySize::Eight,
            offset: 0,
        }
        .to_sqe()
    }

    #[test]
    fn connect_first_then_admin_commands() {
        let mut q = QueueState::new(32);
        assert_eq!(
            q.receive(&prop_get()),
            Dispatch::Reject(Status::new(StatusCode::COMMAND_SEQUENCE_ERROR))
        );
        let c = connect(0, 0);
        assert_eq!(q.receive(&c.to_sqe().unwrap()), Dispatch::Connect(c));
        q.connected(&c, 9);
        assert_eq!(q.role(), QueueRole::Admin { cntlid: 9 });
        assert!(matches!(q.receive(&prop_get()), Dispatch::PropertyGet(_)));
        assert_eq!(q.receive(&Sqe::new(0x06, 3)), Dispatch::Admin);
        // A second Connect and a Disconnect on the admin queue.
        assert_eq!(
            q.receive(&c.to_sqe().unwrap()),
            Dispatch::Reject(Status::new(StatusCode::CONNECT_CONTROLLER_BUSY).dnr())
        );
        let disc = Disconnect { cid: 4, recfmt: 0 }.to_sqe();
        assert_eq!(
            q.receive(&disc),
            Dispatch::Reject(Status::new(StatusCode::INVALID_OPCODE).dnr())
        );
        // Five capsules so far on a 32-entry queue.
        let done = q.completion(3, Status::SUCCESS, 0);
        assert_eq!((done.sq_head, done.sq_id, done.cid), (6, 0, 3));
    }

    #[test]
    fn io_queue_dispatch_and_head_wraps() {
        let mut q = QueueState::new(4);
        let c = connect(2, 0);
        q.receive(&c.to_sqe().unwrap());
        q.connected(&c, 9);
        assert_eq!(q.qid(), 2);
        assert_eq!(q.receive(&Sqe::new(0x02, 1)), Dispatch::Io);
        assert_eq!(
            q.receive(&prop_get()),
            Dispatch::Reject(Status::new(StatusCode::INVALID_OPCODE).dnr())
        );
        assert!(matches!(
            q.receive(&Disconnect { cid: 5, recfmt: 0 }.to_sqe()),
            Dispatch::Disconnect(_)
        ));
        // 4 capsules on a 4-entry queue: the head wrapped to 0.
        assert_eq!(q.completion(5, Status::SUCCESS, 0).sq_head, 0);
        assert_eq!(q.completion(5, Status::SUCCESS, 0).sq_id, 2);
    }

    #[test]
    fn a_queue_that_must_authenticate_runs_only_fabrics_commands_until_it_has() {
        use raidline_proto::fabrics::{AuthDirection, Authentication};
        for qid in [0, 3] {
            let mut q = QueueState::new(32);
            let c = connect(qid, 0);
            q.receive(&c.to_sqe().unwrap());
            q.connected(&c, 9);
            q.require_auth();
            let auth_required = Dispatch::Reject(Status::new(StatusCode::AUTH_REQUIRED).dnr());
            let cmd = Sqe::new(if qid == 0 { 0x06 } else { 0x02 }, 1);
            assert_eq!(q.receive(&cmd), auth_required);
            let send = Authentication {
                cid: 2,
                direction: AuthDirection::Send,
                sgl: SglDescriptor::Keyed {
                    address: 0,
                    length: 72,
                    key: 1,
                    invalidate: false,
                },
                secp: 0xE9,
                spsp0: 1,
                spsp1: 1,
                length: 72,
            };
            assert_eq!(q.receive(&send.to_sqe().unwrap()), Dispatch::Auth(send));
            if qid == 0 {
                assert!(matches!(q.receive(&prop_get()), Dispatch::PropertyGet(_)));
            }
            q.authenticated(true);
            assert!(matches!(q.receive(&cmd), Dispatch::Admin | Dispatch::Io));
            q.authenticated(false);
            assert_eq!(q.receive(&cmd), auth_required);
        }
    }

    #[test]
    fn malformed_connect_and_disabled_flow_control() {
        let mut q = QueueState::new(32);
        let mut bad = connect(0, 0).to_sqe().unwrap();
        bad.as_bytes_mut()[39] = 0x70; // reserved SGL type
        assert_eq!(
            q.receive(&bad),
            Dispatch::Reject(Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr())
        );
        let c = connect(0, CATTR_DISABLE_SQ_FLOW);
        q.receive(&c.to_sqe().unwrap());
        q.connected(&c, 1);
        assert_eq!(q.completion(1, Status::SUCCESS, 1).sq_head, 0xFFFF);
    }
}
