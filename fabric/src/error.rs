//! The crate's error types: one enum for every fallible fabric call, and the post error that
//! says how much of a work-request chain reached the queue.
//!
//! Invariants: nothing here panics; every variant names the failing resource or argument so the
//! caller can log it without context. Completion statuses are not errors here: a completed work
//! request with a bad status is a [`crate::Completion`] with a [`crate::WcStatus`].

use thiserror::Error;

/// Every failure a fabric call can report.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FabricError {
    /// libibverbs.so.1 / librdmacm.so.1 could not be loaded: rdma-core is not installed.
    #[error("RDMA libraries not found: {0} could not be loaded (install rdma-core / libibverbs1 and librdmacm1)")]
    LibraryMissing(&'static str),
    /// The kernel has no RDMA subsystem (no /sys/class/infiniband_verbs).
    #[error("the kernel has no RDMA support (ib_uverbs not loaded?)")]
    NoKernelSupport,
    /// No RDMA device exists, or none with the requested name.
    #[error("no RDMA device{}", match .0 { Some(n) => format!(" named {n:?}"), None => String::new() })]
    NoDevice(Option<String>),
    /// A verbs or RDMA CM call failed with an errno.
    #[error("{call} failed: {source_errno}")]
    Os {
        /// The library call that failed.
        call: &'static str,
        /// The errno it reported, rendered.
        source_errno: OsErrno,
    },
    /// An argument is outside what the device or the API allows.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A local buffer lies outside its memory region.
    #[error("buffer {offset}+{len} outside memory region of {region_len} bytes")]
    OutOfBounds {
        /// Offset asked for.
        offset: u64,
        /// Length asked for.
        len: u64,
        /// Length of the region.
        region_len: u64,
    },
    /// The send or receive queue has no room for the work requests.
    #[error("queue full: {needed} work requests do not fit ({in_use} of {capacity} in use)")]
    QueueFull {
        /// Work requests in the post.
        needed: u32,
        /// Slots already taken.
        in_use: u32,
        /// Queue depth.
        capacity: u32,
    },
    /// The queue pair is in the error state or not connected.
    #[error("queue pair {0} is not usable (error state or not connected)")]
    QpNotReady(u32),
    /// The completion queue overflowed: completions were lost and the CQ is unusable.
    #[error("completion queue overflow")]
    CqOverflow,
    /// The connection id is unknown to this connection manager.
    #[error("unknown connection {0}")]
    UnknownConnection(u64),
    /// The address is already bound by a listener.
    #[error("address {0} already in use")]
    AddressInUse(std::net::SocketAddr),
    /// The resource belongs to another device or protection domain.
    #[error("resource belongs to another device or protection domain: {0}")]
    WrongDomain(&'static str),
    /// A fault injected on purpose by [`crate::fault::Faulty`].
    #[error("injected fault: {0}")]
    Injected(&'static str),
}

/// An errno value, printed with its description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsErrno(pub i32);

impl std::fmt::Display for OsErrno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (errno {})",
            std::io::Error::from_raw_os_error(self.0),
            self.0
        )
    }
}

/// A post that did not (entirely) reach the queue.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("post failed after {posted} work request(s): {error}")]
pub struct PostError {
    /// How many work requests of the chain were posted before the failure. They are in flight
    /// and will complete (possibly with a flush error).
    pub posted: usize,
    /// Why the rest was not posted.
    pub error: FabricError,
}

impl PostError {
    /// A post that failed before anything reached the queue.
    pub fn nothing_posted(error: FabricError) -> Self {
        Self { posted: 0, error }
    }
}
