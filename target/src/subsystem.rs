//! What the target serves: subsystems, their namespaces, who may reach them, and the transport
//! limits every controller advertises.
//!
//! These are plain values built once from the configuration (the binary's `main` parses files;
//! this library takes structs) and shared read-only by every controller. The one thing that
//! changes at run time is whether a configured namespace is active ([`NsActive`]): the operator
//! disables and re-enables it (as nvmet's configfs `enable` does), and every clone of its
//! [`NamespaceInfo`] sees the change at once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use raidline_proto::text::Nqn;

/// Block size the target serves (4 KiB: what the RAID engine and O_DIRECT members use).
pub const DEFAULT_BLOCK_SIZE: u32 = 4096;

/// Identifiers of a namespace. They are stored with the array and must be identical after every
/// restart: a Linux host drops a namespace whose identifiers changed across a reconnect
/// ("identifiers changed for nsid 1") and fails its I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamespaceIds {
    /// Namespace Globally Unique Identifier.
    pub nguid: [u8; 16],
    /// IEEE Extended Unique Identifier.
    pub eui64: [u8; 8],
    /// Namespace UUID (RFC 4122 bytes).
    pub uuid: [u8; 16],
}

/// Whether a configured namespace is active. Clones share the flag: the registry's subsystem,
/// the daemon's namespace table and every controller see one value. A namespace starts active.
#[derive(Clone, Debug)]
pub struct NsActive(Arc<AtomicBool>);

impl Default for NsActive {
    fn default() -> Self {
        NsActive(Arc::new(AtomicBool::new(true)))
    }
}

impl NsActive {
    /// Whether the namespace is active now.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Activates or deactivates it; returns the previous state.
    pub fn set(&self, active: bool) -> bool {
        self.0.swap(active, Ordering::AcqRel)
    }
}

impl PartialEq for NsActive {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for NsActive {}

/// One namespace as controllers describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceInfo {
    /// Namespace id (1-based).
    pub nsid: u32,
    /// Logical block size in bytes (a power of two, 512–65536).
    pub block_size: u32,
    /// Capacity in logical blocks.
    pub blocks: u64,
    /// Stable identifiers.
    pub ids: NamespaceIds,
    /// Preferred write granularity and alignment in blocks (a RAID stripe's data blocks for an
    /// array namespace; 1 when there is no preference). Advertised as NPWG/NPWA and NOWS.
    pub preferred_write_blocks: u32,
    /// Whether Dataset Management deallocate and Write Zeroes with deallocate are supported.
    pub deallocate: bool,
    /// Whether it is active (served); an inactive namespace keeps its nsid and identifiers.
    pub active: NsActive,
}

impl NamespaceInfo {
    /// log2 of the block size (LBADS).
    pub fn lbads(&self) -> u8 {
        self.block_size.trailing_zeros() as u8
    }
}

/// Which hosts may connect to a subsystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAccess {
    /// Any host NQN.
    Any,
    /// Only these host NQNs.
    Only(BTreeSet<Nqn>),
}

impl HostAccess {
    /// Whether `host` may connect.
    pub fn allows(&self, host: &Nqn) -> bool {
        match self {
            HostAccess::Any => true,
            HostAccess::Only(set) => set.contains(host),
        }
    }
}

/// An NVM subsystem: one NQN, its namespaces, its host list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subsystem {
    /// Subsystem NQN.
    pub nqn: Nqn,
    /// Serial number (≤ 20 ASCII characters), stable across restarts.
    pub serial: String,
    /// Model number (≤ 40 ASCII characters).
    pub model: String,
    /// Hosts allowed to connect.
    pub hosts: HostAccess,
    /// Hosts that must authenticate (DH-HMAC-CHAP) before their queues run commands.
    pub auth: std::collections::BTreeMap<
        raidline_proto::text::Nqn,
        std::sync::Arc<raidline_auth::Policy>,
    >,
    /// Namespaces, in nsid order.
    pub namespaces: Vec<NamespaceInfo>,
}

impl Subsystem {
    /// The active namespace with id `nsid`.
    pub fn namespace(&self, nsid: u32) -> Option<&NamespaceInfo> {
        self.configured(nsid).filter(|n| n.active.get())
    }

    /// The configured namespace with id `nsid`, active or not.
    pub fn configured(&self, nsid: u32) -> Option<&NamespaceInfo> {
        self.namespaces.iter().find(|n| n.nsid == nsid)
    }

    /// The active namespaces, in nsid order.
    pub fn active_namespaces(&self) -> impl Iterator<Item = &NamespaceInfo> {
        self.namespaces.iter().filter(|n| n.active.get())
    }

    /// The highest configured nsid (Identify Controller's NN); 0 without namespaces.
    pub fn max_nsid(&self) -> u32 {
        self.namespaces.iter().map(|n| n.nsid).max().unwrap_or(0)
    }
}

/// Transport and controller limits, the same for every controller of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest I/O queue a host may ask for (entries; CAP.MQES + 1).
    pub max_queue_depth: u16,
    /// Admin queue depth the target accepts at most (the Linux host asks for 32).
    pub max_admin_queue_depth: u16,
    /// I/O queues a controller may have.
    pub max_io_queues: u16,
    /// In-capsule data the target accepts per command, in bytes (a multiple of 16, ≥ 8 KiB).
    pub in_capsule_data: u32,
    /// Largest data transfer of one command in bytes (a power-of-two multiple of 4 KiB).
    pub max_transfer: u32,
    /// Controllers the whole target may have at once.
    pub max_controllers: u16,
    /// Keep-alive timeout granularity the target enforces with (KAS, in 100 ms units).
    pub kas_100ms: u16,
    /// Number of Asynchronous Event Requests a controller keeps outstanding (AERL + 1).
    pub aer_limit: u8,
    /// Receives of each poller's shared receive queue, which all its I/O queue pairs use
    /// (where the device offers SRQs); 0: every I/O queue posts its own ring of queue-depth
    /// receives. Receive memory is then per poller, not per connected queue.
    pub srq_depth: u32,
}

impl Default for Limits {
    /// Tuned for the Linux nvme-rdma host: queue depth 128 (its default), 32-entry admin queue,
    /// 8 KiB in-capsule data (a 4 KiB write plus headroom), 1 MiB transfers (the host's own
    /// fast-registration limit), keep-alive checked with 100 ms granularity.
    fn default() -> Self {
        Limits {
            max_queue_depth: 128,
            max_admin_queue_depth: 32,
            max_io_queues: 16,
            in_capsule_data: 8192,
            max_transfer: 1 << 20,
            max_controllers: 1024,
            srq_depth: 512,
            kas_100ms: 1,
            aer_limit: 4,
        }
    }
}

impl Limits {
    /// MDTS as Identify Controller encodes it: log2(max_transfer / 4 KiB).
    pub fn mdts(&self) -> u8 {
        (self.max_transfer / 4096).max(1).trailing_zeros() as u8
    }

    /// IOCCSZ: command capsule size in 16-byte units (64-byte SQE + in-capsule data).
    pub fn ioccsz(&self) -> u32 {
        (64 + self.in_capsule_data) / 16
    }
}
