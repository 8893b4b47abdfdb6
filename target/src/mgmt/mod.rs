//! The management protocol: `raidline status` and `raidline array …` talk to the running daemon
//! over a Unix stream socket (default `/run/raidline/raidline.sock`).
//!
//! Wire format: the client sends one JSON [`Request`] terminated by `\n`, the daemon answers with
//! one JSON [`Response`] line and closes the connection (one request per connection). A request
//! line is at most [`MAX_REQUEST_BYTES`]; a client that sends nothing complete within
//! [`CLIENT_TIMEOUT`] is dropped, so a slow or hostile client cannot wedge the server.
//!
//! The daemon implements [`Management`]; [`MgmtServer`] owns the socket and a thread that
//! serves it; [`call`] is the client; [`render_status`] turns a [`StatusReport`] into the text
//! `raidline status` prints. Nothing a client sends can panic the server: malformed input is
//! answered with `ok: false` and a `bad request: …` message.

mod render;
mod server;
#[cfg(test)]
pub(crate) mod tests;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use render::{exposed_ranges_text, jobs, jobs_line, paced_queues, progress, render_status};
pub use server::{call, MgmtServer};

/// The longest request line the server reads, newline excluded.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// How long the server waits for a client's complete request line.
pub const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The array states [`ArrayStatus::state`] takes. `refused`: the array did not assemble at
/// start-up and serves nothing until `raidline array start` ([`ArrayStatus::refused`] says
/// why).
pub const ARRAY_STATES: [&str; 7] = [
    "clean",
    "degraded",
    "rebuilding",
    "replacing",
    "resyncing",
    "failed",
    "refused",
];

/// Everything `raidline status` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Daemon version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// RDMA CM listen addresses.
    pub listen: Vec<String>,
    /// RAID arrays.
    pub arrays: Vec<ArrayStatus>,
    /// NVMe subsystems.
    pub subsystems: Vec<SubsystemStatus>,
    /// Connected controllers.
    pub controllers: Vec<ControllerStatus>,
    /// iSCSI sessions over iSER (absent from daemons without iSER).
    #[serde(default)]
    pub iscsi_sessions: Vec<IscsiSessionStatus>,
}

/// One iSCSI session (one connection: MaxConnections is 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IscsiSessionStatus {
    /// "Normal" or "Discovery".
    pub session_type: String,
    /// The initiator's iSCSI name.
    pub initiator: String,
    /// The target's name (normal sessions).
    pub target: String,
    /// ISID, hex.
    pub isid: String,
    /// TSIH.
    pub tsih: u16,
    /// The initiator's address (IP:port).
    pub peer: String,
    /// Poller thread serving it.
    pub poller: u32,
}

/// The session as the log names it: `iSCSI Normal session 00023d000001 (TSIH 1) of
/// iqn.… from 10.0.0.2:41234 to iqn.…` (a discovery session's target reads `(discovery)`).
impl std::fmt::Display for IscsiSessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "iSCSI {} session {} (TSIH {}) of {} from {} to {}",
            self.session_type,
            self.isid,
            self.tsih,
            self.initiator,
            self.peer,
            if self.target.is_empty() {
                "(discovery)"
            } else {
                &self.target
            }
        )
    }
}

impl IscsiSessionStatus {
    /// Whether `other` is the same session (RFC 7143 §4.4.1: the initiator name and the ISID,
    /// towards the same target): a login of it reinstates this one.
    pub fn same_session(&self, other: &IscsiSessionStatus) -> bool {
        self.session_type == "Normal"
            && other.session_type == "Normal"
            && self.isid == other.isid
            && self.initiator.eq_ignore_ascii_case(&other.initiator)
            && self.target.eq_ignore_ascii_case(&other.target)
    }
}

/// One RAID-5 array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayStatus {
    /// Name from the configuration.
    pub name: String,
    /// Array UUID stored in the superblocks.
    pub uuid: String,
    /// One of [`ARRAY_STATES`].
    pub state: String,
    /// Usable capacity.
    pub capacity_bytes: u64,
    /// Chunk size.
    pub chunk_bytes: u32,
    /// Members by role.
    pub members: Vec<MemberStatus>,
    /// Hot spares not yet in use.
    pub spares: Vec<String>,
    /// Rebuild, hot-replace copy or resync in progress, if any (`state` says which).
    pub rebuild: Option<Progress>,
    /// Scrub in progress, if any.
    pub scrub: Option<Progress>,
    /// Parity engine in use ("cpu", "gpu", …).
    pub parity_engine: String,
    /// Whether the partial-parity log closes the write hole.
    pub write_hole_protection: bool,
    /// The write-hole policy: "degraded" (log writes only while a member is missing) or
    /// "always".
    #[serde(default = "degraded")]
    pub write_hole_policy: String,
    /// Why the array is not running (state "refused"): the engine's refusal at assembly.
    #[serde(default)]
    pub refused: Option<String>,
    /// The array was started over an unclean stop that no log covered
    /// (`raidline array start --accept-dirty-degraded`): where data may read back wrong,
    /// until a rebuild has rewritten those stripes.
    #[serde(default)]
    pub exposure: Option<ExposureStatus>,
    /// Stripes written since start-up, by how (absent for an array that is not running).
    #[serde(default)]
    pub stripe_writes: Option<StripeWrites>,
}

/// Stripes an array wrote, by how: whole (no reads), read-modify-write, reconstruct-write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeWrites {
    /// Written whole: parity from the new data only.
    pub full: u64,
    /// Read-modify-write: old data and old parity read first.
    pub rmw: u64,
    /// Reconstruct-write: the unwritten data read first.
    pub rcw: u64,
}

/// Regions of an array started over an uncovered unclean degraded stop whose parity may be
/// torn: the missing member's data there may read back wrong.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExposureStatus {
    /// Why the log did not cover the stop.
    pub reason: String,
    /// The roles that were missing when it started.
    pub missing: Vec<u32>,
    /// The ranges, in bytes of the array (= of its namespace).
    pub ranges: Vec<ByteRange>,
}

/// A range of bytes, `start` included, `end` excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// One member slot of an array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Role (slot index in the layout).
    pub role: u32,
    /// Device or file path: the member's, or for a failed role the device that failed when
    /// the daemon knows it; "(missing)" when it does not.
    pub path: String,
    /// "active", "failed", "rebuilding", "missing", …
    pub state: String,
    /// Why a failed or missing role has no member (an I/O error with its text, the
    /// administrator, not found at assembly…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The same as a short class: `io_error`, `administrator`, `failed_before_stop`,
    /// `missing_at_assembly` (the metrics' `reason` label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_class: Option<String>,
}

/// Progress of a rebuild or scrub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Bytes done.
    pub done_bytes: u64,
    /// Bytes in all.
    pub total_bytes: u64,
    /// Current rate.
    pub rate_bytes_per_s: u64,
}

impl Progress {
    /// Fraction done in `0.0..=1.0`; `1.0` for an empty job.
    pub fn ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        (self.done_bytes as f64 / self.total_bytes as f64).clamp(0.0, 1.0)
    }
}

/// One NVMe subsystem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsystemStatus {
    /// Subsystem NQN.
    pub nqn: String,
    /// Serial number.
    pub serial: String,
    /// Model number.
    pub model: String,
    /// Whether any host may connect.
    pub allow_any_host: bool,
    /// Allowed host NQNs (when not `allow_any_host`).
    pub hosts: Vec<String>,
    /// Hosts that must authenticate (DH-HMAC-CHAP), each with what it may use, e.g.
    /// "nqn… (sha256, sha384; ffdhe2048, null; bidirectional possible)".
    #[serde(default)]
    pub auth_hosts: Vec<String>,
    /// Namespaces.
    pub namespaces: Vec<NamespaceStatus>,
}

/// One namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamespaceStatus {
    /// Namespace id.
    pub nsid: u32,
    /// What backs it ("array array0", a file path, …).
    pub backing: String,
    /// Logical block size.
    pub block_size: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// Whether it is active (`raidline ns enable|disable`).
    #[serde(default = "yes")]
    pub active: bool,
    /// Read commands completed.
    pub read_ops: u64,
    /// Write commands completed.
    pub write_ops: u64,
    /// Bytes read by hosts.
    pub read_bytes: u64,
    /// Bytes written by hosts.
    pub write_bytes: u64,
}

/// One connected controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerStatus {
    /// Controller id.
    pub cntlid: u16,
    /// Subsystem NQN.
    pub subnqn: String,
    /// Host NQN.
    pub hostnqn: String,
    /// Host address (IP:port).
    pub host_addr: String,
    /// Keep-alive timeout; 0 = none.
    pub kato_ms: u32,
    /// In-band authentication (DH-HMAC-CHAP) of its admin queue: "none",
    /// "required, not yet authenticated", "hmac(sha256) ffdhe2048 [bidirectional]" or
    /// "failed: …".
    #[serde(default)]
    pub auth: String,
    /// Queue pairs, admin queue (qid 0) first.
    pub queues: Vec<QueueStatus>,
}

/// One queue pair of a controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// Queue id (0 = admin).
    pub qid: u16,
    /// Queue depth.
    pub depth: u16,
    /// Commands in flight.
    pub in_flight: u32,
    /// Payload bytes moved with RDMA READ and WRITE since the queue connected (0 from older
    /// daemons).
    #[serde(default)]
    pub bytes: u64,
    /// Poller thread serving it.
    pub poller: u32,
    /// Pacer rate (NaN when unknown; sent as JSON null).
    #[serde(deserialize_with = "f64_or_null")]
    pub rate_bytes_per_s: f64,
    /// Smoothed RTT (NaN before the first sample; sent as JSON null).
    #[serde(deserialize_with = "f64_or_null")]
    pub rtt_us: f64,
    /// Last raw probe RTT, completion − post (NaN: none; absent from older daemons).
    #[serde(default = "nan", deserialize_with = "f64_or_null")]
    pub raw_rtt_us: f64,
    /// Last net RTT: raw less the drain time of the QP's own data queued ahead of the probe,
    /// what the congestion law sees (NaN: none).
    #[serde(default = "nan", deserialize_with = "f64_or_null")]
    pub net_rtt_us: f64,
    /// Windowed minimum of the net RTT (NaN: none).
    #[serde(default = "nan", deserialize_with = "f64_or_null")]
    pub base_rtt_us: f64,
}

fn nan() -> f64 {
    f64::NAN
}

fn yes() -> bool {
    true
}

fn degraded() -> String {
    "degraded".into()
}

/// serde_json writes a non-finite float as `null`; read it back as NaN.
fn f64_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A request from `raidline` (the client) to the daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// The full status report.
    Status,
    /// Mark a member failed.
    ArrayFail {
        /// Array name.
        array: String,
        /// Member path.
        member: String,
    },
    /// Add a hot spare.
    ArrayAddSpare {
        /// Array name.
        array: String,
        /// Device path.
        path: String,
    },
    /// Replace a member: `new` is filled while `old` keeps serving, then `old` is retired.
    ArrayReplace {
        /// Array name.
        array: String,
        /// Member path to replace.
        old: String,
        /// Replacement device path.
        new: String,
    },
    /// Start a scrub.
    ArrayScrub {
        /// Array name.
        array: String,
    },
    /// Assemble an array that did not start (state "refused") and serve its namespaces.
    ArrayStart {
        /// Array name.
        array: String,
        /// Start even over an unclean stop with a member missing that no log covers: the
        /// missing member's data in the regions written at the time may read back wrong.
        #[serde(default)]
        accept_dirty_degraded: bool,
    },
    /// Set a congestion-control parameter on every queue pair.
    CcSet {
        /// Parameter name (see `raidline cc show`).
        param: String,
        /// New value (checked against the parameter's range).
        value: f64,
    },
    /// The congestion-control algorithm and its parameters.
    CcShow,
    /// Activate a namespace (and tell the subsystem's hosts).
    NsEnable {
        /// Subsystem NQN.
        subsystem: String,
        /// Namespace id.
        nsid: u32,
    },
    /// Deactivate a namespace (and tell the subsystem's hosts).
    NsDisable {
        /// Subsystem NQN.
        subsystem: String,
        /// Namespace id.
        nsid: u32,
    },
}

/// The daemon's answer to one [`Request`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// What was done, or why not.
    pub message: String,
    /// The report, for [`Request::Status`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusReport>,
}

impl Response {
    fn done(message: String) -> Response {
        Response {
            ok: true,
            message,
            status: None,
        }
    }

    fn refused(message: String) -> Response {
        Response {
            ok: false,
            message,
            status: None,
        }
    }
}

/// What the daemon offers the management socket. Calls come from the server's thread, one at
/// a time; an `Err` is a refusal whose text reaches the operator verbatim.
pub trait Management: Send + Sync + 'static {
    /// The current status.
    fn status(&self) -> StatusReport;
    /// Marks `member` of `array` failed.
    fn array_fail(&self, array: &str, member: &str) -> Result<String, String>;
    /// Adds `path` to `array` as a hot spare.
    fn array_add_spare(&self, array: &str, path: &str) -> Result<String, String>;
    /// Replaces member `old` of `array` with `new`.
    fn array_replace(&self, array: &str, old: &str, new: &str) -> Result<String, String>;
    /// Starts a scrub of `array`.
    fn array_scrub(&self, array: &str) -> Result<String, String>;
    /// Assembles `array`, which did not start, and serves its namespaces; with
    /// `accept_dirty_degraded` even over an unclean stop no log covers. Refused when it runs.
    fn array_start(&self, array: &str, accept_dirty_degraded: bool) -> Result<String, String>;
    /// Sets congestion-control parameter `param` to `value` on every queue pair.
    fn cc_set(&self, param: &str, value: f64) -> Result<String, String>;
    /// The algorithm and its parameters (values, ranges, meanings) as text.
    fn cc_show(&self) -> Result<String, String>;
    /// Activates (`true`) or deactivates namespace `nsid` of `subsystem`.
    fn ns_set_active(&self, subsystem: &str, nsid: u32, active: bool) -> Result<String, String>;
}

/// Runs one request against `api`.
pub fn dispatch(api: &dyn Management, req: &Request) -> Response {
    let outcome = match req {
        Request::Status => {
            return Response {
                ok: true,
                message: String::new(),
                status: Some(api.status()),
            };
        }
        Request::ArrayFail { array, member } => api.array_fail(array, member),
        Request::ArrayAddSpare { array, path } => api.array_add_spare(array, path),
        Request::ArrayReplace { array, old, new } => api.array_replace(array, old, new),
        Request::ArrayScrub { array } => api.array_scrub(array),
        Request::ArrayStart {
            array,
            accept_dirty_degraded,
        } => api.array_start(array, *accept_dirty_degraded),
        Request::CcSet { param, value } => api.cc_set(param, *value),
        Request::CcShow => api.cc_show(),
        Request::NsEnable { subsystem, nsid } => api.ns_set_active(subsystem, *nsid, true),
        Request::NsDisable { subsystem, nsid } => api.ns_set_active(subsystem, *nsid, false),
    };
    match outcome {
        Ok(m) => Response::done(m),
        Err(m) => Response::refused(m),
    }
}

/// A management socket error, on either side.
#[derive(Debug, thiserror::Error)]
pub enum MgmtError {
    /// Another daemon answers on the socket.
    #[error("another raidline is running on {}", path.display())]
    AlreadyRunning {
        /// The socket path.
        path: PathBuf,
    },
    /// Something that is not a socket sits where the socket goes; it is left alone.
    #[error("{} exists and is not a socket; remove it or choose another management_socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Creating the directory, binding, setting permissions or starting the thread failed.
    #[error("cannot set up the management socket {}: {source}", path.display())]
    Setup {
        /// The socket path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The client could not connect.
    #[error("cannot reach raidline at {}: {source} — is the daemon running?", path.display())]
    Unreachable {
        /// The socket path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Sending the request or reading the answer failed (timeouts included).
    #[error("lost the exchange with raidline at {}: {source}", path.display())]
    Exchange {
        /// The socket path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The daemon's answer is not a [`Response`].
    #[error("raidline at {} answered something that is not a response: {message}", path.display())]
    BadResponse {
        /// The socket path.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}
