//! Fabrics properties: CAP, VS, CC, CSTS (Base §3.1.3) and the CC state transitions.
//!
//! - CC.EN 0 → 1 starts the controller: the configuration must be one we serve (IOSQES 6,
//!   IOCQES 4, MPS 0 = 4 KiB, CSS 0 = NVM, AMS 0 = round robin); otherwise CSTS.CFS is set, as
//!   the Linux target does, and the host reports a fatal controller status.
//! - CC.EN 1 → 0 resets: CSTS.RDY clears, negotiated state (queues, AEC, parked AERs) resets.
//! - CC.SHN normal or abrupt: CSTS.SHST = complete (nothing is cached in the controller; the
//!   array's own flush happens on the namespace's Flush and at daemon shutdown).

use raidline_proto::fabrics::property::{self, shutdown, Cap, Cc, Csts, Version};
use raidline_proto::fabrics::{PropertyGet, PropertySet, PropertySize};
use raidline_proto::{Status, StatusCode};

use super::{dnr, Controller};

/// NVMe version the controllers implement.
pub const VERSION: Version = Version::V1_4;

/// CAP.TO: worst-case time to become ready, in 500 ms units (the controller is ready at once;
/// 15 s leaves room for an array that is still assembling).
const CAP_TIMEOUT_500MS: u8 = 30;

impl Controller {
    /// CAP as this controller reports it.
    pub fn cap(&self) -> Cap {
        Cap {
            mqes: self.limits.max_queue_depth - 1,
            cqr: true,
            to: CAP_TIMEOUT_500MS,
            css: 1, // NVM command set
            mpsmin: 0,
            mpsmax: 0,
            ..Cap::default()
        }
    }

    /// Property Get: the value (CQE result) or an error status.
    pub fn handle_property_get(&self, cmd: &PropertyGet) -> Result<u64, Status> {
        let size = property::size_of(cmd.offset).ok_or(dnr(StatusCode::INVALID_FIELD))?;
        if size != cmd.size {
            return Err(dnr(StatusCode::INVALID_FIELD));
        }
        Ok(match cmd.offset {
            property::CAP => self.cap().to_u64(),
            property::VS => u64::from(VERSION.to_u32()),
            property::CC => u64::from(self.cc.to_u32()),
            property::CSTS => u64::from(self.csts.to_u32()),
            // NSSR reads as 0 (NVM subsystem reset is not supported: CAP.NSSRS = 0).
            _ => 0,
        })
    }

    /// Property Set: only CC is writable.
    pub fn handle_property_set(&mut self, cmd: &PropertySet) -> Result<(), Status> {
        if cmd.offset != property::CC || cmd.size != PropertySize::Four || cmd.value >> 32 != 0 {
            return Err(dnr(StatusCode::INVALID_FIELD));
        }
        let new = Cc::from_u32(cmd.value as u32);
        let old = self.cc;
        self.cc = new;
        if !old.en && new.en {
            self.start();
        } else if old.en && !new.en {
            self.reset();
        }
        if new.shn != shutdown::SHN_NONE {
            self.csts.shst = shutdown::SHST_COMPLETE;
        } else if old.shn != shutdown::SHN_NONE {
            self.csts.shst = shutdown::SHST_NORMAL;
        }
        Ok(())
    }

    fn start(&mut self) {
        let c = self.cc;
        if c.iosqes != 6 || c.iocqes != 4 || c.mps != 0 || c.css != 0 || c.ams != 0 {
            self.csts.cfs = true;
            return;
        }
        self.csts.rdy = true;
    }

    fn reset(&mut self) {
        self.csts = Csts::default();
        self.io_queues_granted = None;
        self.aec = Default::default();
        self.events.clear();
        self.aer_slots.clear();
    }

    /// Whether the controller has been shut down by the host (CSTS.SHST complete).
    pub fn is_shut_down(&self) -> bool {
        self.csts.shst == shutdown::SHST_COMPLETE
    }

    /// A status for commands that need a ready controller.
    pub(crate) fn require_ready(&self) -> Result<(), Status> {
        if self.csts.rdy && !self.csts.cfs {
            Ok(())
        } else {
            Err(Status::new(StatusCode::COMMAND_SEQUENCE_ERROR))
        }
    }
}
