//! The raidline NVMe-oF target: subsystems, controllers and the I/O path.
//!
//! The protocol core here is sans-IO (after quinn-proto): the registry decides Connects, each
//! controller is a state machine that takes parsed commands and `now` and hands back what to
//! do, and I/O commands are validated into requests before anything touches storage. The
//! daemon around it (fabric, pollers, RAID, management) is not written yet (issue 9).

pub mod cli;
pub mod cm;
pub mod config;
pub mod controller;
pub mod daemon;
pub mod discovery;
pub mod foreign;
pub mod http;
pub mod identity;
pub mod io;
pub mod iser;
pub mod metrics;
pub mod mgmt;
pub mod queue;
pub mod registry;
pub mod remember;
pub mod scsi;
pub mod service;
pub mod status;
pub mod subsystem;
pub mod systemd;
