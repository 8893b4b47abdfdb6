//! The registry of subsystems and live controllers, and the Fabrics Connect decision.
//!
//! Connect is the one place where a queue pair becomes part of a controller. The rules follow
//! the NVMe over Fabrics specification and, where it leaves room, the Linux target
//! (`drivers/nvme/target/fabrics-cmd.c`), because that is what the Linux host is tested against:
//!
//! - RECFMT ≠ 0 → *Connect Incompatible Format* (DNR).
//! - Admin queue: the Connect data's CNTLID must be 0xFFFF (dynamic model); otherwise *Connect
//!   Invalid Parameters* pointing at CNTLID. SQSIZE 0 or over the limit → invalid parameters
//!   pointing at SQSIZE.
//! - Unknown subsystem → invalid parameters pointing at SUBNQN; host not allowed → *Connect
//!   Invalid Host* pointing at HOSTNQN.
//! - I/O queue: the controller must exist for this subsystem and host, the QID must be within
//!   the limit, and not already connected (→ *Controller Busy*).
//!
//! The registry is plain single-threaded state; the daemon keeps it behind one lock on the
//! control path (connects and disconnects), never on the I/O path.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use raidline_proto::fabrics::{
    Connect, ConnectData, ConnectResponse, InvalidParameterIn, CNTLID_DYNAMIC,
};
use raidline_proto::text::Nqn;
use raidline_proto::{Status, StatusCode};

use crate::subsystem::{Limits, Subsystem};

/// Highest controller id the dynamic model hands out (0xFFF0–0xFFFF are reserved).
const MAX_CNTLID: u16 = 0xFFEF;

/// What a refused Connect answers: status (with DNR) and DW0 (IATTR/IPO for invalid parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectRefusal {
    /// The completion status.
    pub status: Status,
    /// Completion DW0.
    pub dw0: u32,
    /// Why, for the log line.
    pub reason: &'static str,
}

impl ConnectRefusal {
    fn invalid(attribute: InvalidParameterIn, offset: u16, reason: &'static str) -> Self {
        ConnectRefusal {
            status: Status::new(StatusCode::CONNECT_INVALID_PARAMETERS).dnr(),
            dw0: ConnectResponse::InvalidParameter { attribute, offset }.to_dw0(),
            reason,
        }
    }

    fn plain(code: StatusCode, reason: &'static str) -> Self {
        ConnectRefusal {
            status: Status::new(code).dnr(),
            dw0: 0,
            reason,
        }
    }
}

/// A subsystem's kind: it decides what its controllers are.
#[derive(Clone, Debug)]
pub enum Served {
    /// The discovery subsystem (`nqn.2014-08.org.nvmexpress.discovery`).
    Discovery,
    /// An NVM subsystem.
    Nvm(Arc<Subsystem>),
}

/// A controller the registry knows.
#[derive(Clone, Debug)]
pub struct ControllerEntry {
    /// What it serves.
    pub served: Served,
    /// The host it belongs to.
    pub hostnqn: Nqn,
    /// The host identifier given at Connect.
    pub hostid: [u8; 16],
    /// Connected I/O queue ids.
    pub io_queues: BTreeSet<u16>,
}

/// The outcome of an accepted Connect.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The controller id (DW0 of the completion).
    pub cntlid: u16,
    /// What the controller serves.
    pub served: Served,
    /// Whether this Connect created the controller (admin queue).
    pub new_controller: bool,
}

/// Subsystems and live controllers.
#[derive(Debug)]
pub struct Registry {
    limits: Limits,
    subsystems: BTreeMap<Nqn, Arc<Subsystem>>,
    controllers: BTreeMap<u16, ControllerEntry>,
    next_cntlid: u16,
}

impl Registry {
    /// A registry serving `subsystems` (plus the discovery subsystem) under `limits`.
    pub fn new(limits: Limits, subsystems: Vec<Subsystem>) -> Registry {
        Registry {
            limits,
            subsystems: subsystems
                .into_iter()
                .map(|s| (s.nqn.clone(), Arc::new(s)))
                .collect(),
            controllers: BTreeMap::new(),
            next_cntlid: 1,
        }
    }

    /// The limits every controller advertises.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The NVM subsystems, in NQN order.
    pub fn subsystems(&self) -> impl Iterator<Item = &Arc<Subsystem>> {
        self.subsystems.values()
    }

    /// A live controller.
    pub fn controller(&self, cntlid: u16) -> Option<&ControllerEntry> {
        self.controllers.get(&cntlid)
    }

    /// Number of live controllers.
    pub fn controller_count(&self) -> usize {
        self.controllers.len()
    }

    /// Decides a Connect: `cmd` and its 1024 bytes of data.
    pub fn connect(
        &mut self,
        cmd: &Connect,
        data: &ConnectData,
    ) -> Result<Accepted, ConnectRefusal> {
        if cmd.recfmt != 0 {
            return Err(ConnectRefusal::plain(
                StatusCode::CONNECT_INCOMPATIBLE_FORMAT,
                "record format is not 0",
            ));
        }
        if cmd.qid == 0 {
            self.connect_admin(cmd, data)
        } else {
            self.connect_io(cmd, data)
        }
    }

    fn served(&self, data: &ConnectData) -> Result<Served, ConnectRefusal> {
        if data.subnqn.is_discovery() {
            return Ok(Served::Discovery);
        }
        let sub = self
            .subsystems
            .get(&data.subnqn)
            .ok_or(ConnectRefusal::invalid(
                InvalidParameterIn::Data,
                ConnectData::OFFSET_SUBNQN,
                "no such subsystem",
            ))?;
        if !sub.hosts.allows(&data.hostnqn) {
            return Err(ConnectRefusal {
                status: Status::new(StatusCode::CONNECT_INVALID_HOST).dnr(),
                dw0: ConnectResponse::InvalidParameter {
                    attribute: InvalidParameterIn::Data,
                    offset: ConnectData::OFFSET_HOSTNQN,
                }
                .to_dw0(),
                reason: "host is not allowed to connect to this subsystem",
            });
        }
        Ok(Served::Nvm(sub.clone()))
    }

    fn connect_admin(
        &mut self,
        cmd: &Connect,
        data: &ConnectData,
    ) -> Result<Accepted, ConnectRefusal> {
        if data.cntlid != CNTLID_DYNAMIC {
            return Err(ConnectRefusal::invalid(
                InvalidParameterIn::Data,
                ConnectData::OFFSET_CNTLID,
                "static controller ids are not supported: cntlid must be 0xFFFF",
            ));
        }
        if cmd.sqsize == 0 || cmd.sqsize >= self.limits.max_admin_queue_depth {
            return Err(ConnectRefusal::invalid(
                InvalidParameterIn::Command,
                Connect::OFFSET_SQSIZE,
                "admin queue size out of range",
            ));
        }
        let served = self.served(data)?;
        if self.controllers.len() >= usize::from(self.limits.max_controllers) {
            return Err(ConnectRefusal::plain(
                StatusCode::CONNECT_CONTROLLER_BUSY,
                "controller limit reached",
            ));
        }
        let cntlid = self.allocate_cntlid().ok_or(ConnectRefusal::plain(
            StatusCode::CONNECT_CONTROLLER_BUSY,
            "no free controller id",
        ))?;
        self.controllers.insert(
            cntlid,
            ControllerEntry {
                served: served.clone(),
                hostnqn: data.hostnqn.clone(),
                hostid: data.hostid,
                io_queues: BTreeSet::new(),
            },
        );
        Ok(Accepted {
            cntlid,
            served,
            new_controller: true,
        })
    }

    fn connect_io(
        &mut self,
        cmd: &Connect,
        data: &ConnectData,
    ) -> Result<Accepted, ConnectRefusal> {
        let not_found = ConnectRefusal::invalid(
            InvalidParameterIn::Data,
            ConnectData::OFFSET_CNTLID,
            "no such controller for this subsystem and host",
        );
        let limits = self.limits;
        let entry = self.controllers.get_mut(&data.cntlid).ok_or(not_found)?;
        let same_subsystem = match &entry.served {
            Served::Discovery => false, // discovery controllers have no I/O queues
            Served::Nvm(s) => s.nqn == data.subnqn,
        };
        if !same_subsystem || entry.hostnqn != data.hostnqn || entry.hostid != data.hostid {
            return Err(not_found);
        }
        if cmd.qid > limits.max_io_queues {
            return Err(ConnectRefusal::invalid(
                InvalidParameterIn::Command,
                Connect::OFFSET_QID,
                "queue id over the controller's limit",
            ));
        }
        if cmd.sqsize == 0 || cmd.sqsize >= limits.max_queue_depth {
            return Err(ConnectRefusal::invalid(
                InvalidParameterIn::Command,
                Connect::OFFSET_SQSIZE,
                "I/O queue size out of range",
            ));
        }
        if !entry.io_queues.insert(cmd.qid) {
            return Err(ConnectRefusal::plain(
                StatusCode::CONNECT_CONTROLLER_BUSY,
                "queue id already connected",
            ));
        }
        Ok(Accepted {
            cntlid: data.cntlid,
            served: entry.served.clone(),
            new_controller: false,
        })
    }

    fn allocate_cntlid(&mut self) -> Option<u16> {
        for _ in 0..MAX_CNTLID {
            let id = self.next_cntlid;
            self.next_cntlid = if id >= MAX_CNTLID { 1 } else { id + 1 };
            if !self.controllers.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }

    /// An I/O queue went away (disconnect or error).
    pub fn io_queue_gone(&mut self, cntlid: u16, qid: u16) {
        if let Some(e) = self.controllers.get_mut(&cntlid) {
            e.io_queues.remove(&qid);
        }
    }

    /// The admin queue went away or the controller expired: forget it and return the I/O
    /// queues the caller must disconnect.
    pub fn remove_controller(&mut self, cntlid: u16) -> Vec<u16> {
        self.controllers
            .remove(&cntlid)
            .map(|e| e.io_queues.into_iter().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
