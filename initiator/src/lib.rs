//! Raidline's user-space NVMe-over-Fabrics host: the host side of every in-process end-to-end
//! test, and the engine of the `raidline-initiator` CLI (discover, identify, read/write,
//! verify, perf), speaking NVMe/RDMA over any [`raidline_fabric::Fabric`] — the in-memory
//! fabric in `cargo test`, verbs + RDMA CM on real or soft-RoCE devices.
//!
//! Layers, bottom up:
//! - [`queue`]: one NVMe/RDMA queue (CM connect with the NVMe/RDMA private data, registered
//!   SQE/response/data slots, the life cycle of each command, deadlines, failure handling);
//! - [`controller`]: the admin queue bring-up (Connect, Property Get/Set enable sequence,
//!   Identify), keep-alive, AER, Number of Queues and the I/O queues;
//! - [`discovery`]: the discovery log with the generation-counter re-read;
//! - [`io`]: Read/Write/Flush/Write Zeroes/Dataset Management and pipelined transfers;
//! - [`pattern`], [`perf`], [`hist`]: what `verify` and `perf` are made of.
//!
//! Nothing here blocks without a deadline: every command but the AER times out, and a
//! disconnect or a transport error fails every command in flight at once.
//!
//! An end-to-end test connects, writes and reads back like this (any fabric; here the
//! in-memory one, with a target listening at `addr` on the same network):
//!
//! ```no_run
//! use raidline_fabric::mem::MemNetwork;
//! use raidline_initiator::{Controller, ControllerOptions, HostIdentity, Lba, Nsid};
//! use raidline_proto::text::Nqn;
//!
//! # fn main() -> Result<(), raidline_initiator::Error> {
//! let net = MemNetwork::new();
//! let addr = "10.0.0.1:4420".parse().unwrap();
//! let host = HostIdentity::from_uuid([7; 16]);
//! let nqn = Nqn::new("nqn.2026-11.io.raidline:array0").unwrap();
//! let mut c = Controller::connect(net.device("host0"), addr, ControllerOptions::new(host, nqn))?;
//! let ns = c.namespace(Nsid(1))?;
//! let data = vec![0xA5u8; 8 * ns.block_size as usize];
//! c.write(0, &ns, Lba(0), &data)?;
//! let mut back = vec![0u8; data.len()];
//! c.read(0, &ns, Lba(0), &mut back)?;
//! assert_eq!(back, data);
//! c.shutdown()?;
//! # Ok(())
//! # }
//! ```

pub mod commands;
pub mod controller;
pub mod discovery;
pub mod error;
pub mod hist;
pub mod io;
pub mod pattern;
pub mod perf;
pub mod queue;
pub mod types;

pub use controller::{Controller, ControllerOptions, Namespace};
pub use error::Error;
pub use queue::{Queue, QueueParams, Xfer};
pub use types::{HostIdentity, Lba, Nsid, Qid, Tag};
