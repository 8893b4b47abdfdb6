//! The daemon's configuration: TOML, typed, parsed once, unknown keys rejected, every error with
//! its line and column.
//!
//! Only the binary's `main` reads the file; everything else takes the validated [`Config`].
//! `deploy/raidline.toml` is the commented example. Defaults are tuned for the Linux nvme-rdma
//! host on a storage node with a few NVMe drives; each says why where it is set.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use raidline_auth::{DhGroup, HashFn, Policy, Secret};

use raidline_proto::text::Nqn;
use raidline_raid::WriteHolePolicy;
use serde::Deserialize;
use toml::Spanned;

use crate::subsystem::Limits;

/// A configuration error, with the position it refers to.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax, an unknown key, or a value of the wrong type.
    #[error("{origin}: {message}")]
    Syntax {
        /// File name (or "<config>").
        origin: String,
        /// The parser's message, which names line and column.
        message: String,
    },
    /// A value that parses but is not acceptable.
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        /// File name (or "<config>").
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what is allowed.
        message: String,
    },
}

/// How poller threads wait for work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PollMode {
    /// Spin always: lowest latency, one full core per poller.
    Busy,
    /// Spin briefly after work, then sleep on the completion channels: ≈ 0 % CPU when idle.
    #[default]
    Adaptive,
    /// Always sleep on the completion channels.
    Event,
}

/// Where a poller's storage requests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IoPath {
    /// On the poller's own io_uring, polled in its loop with no thread hop: reads, writes and
    /// flushes of file namespaces; array reads that need no reconstruction, array flushes, and
    /// array writes on a healthy array (the RAID engine's completion-driven write, bitmap
    /// updates included). The rest (degraded I/O, writes the partial-parity log records,
    /// redos after a member error) still goes to the storage workers, started at their
    /// first request.
    #[default]
    Ring,
    /// Every request on the namespace's storage worker threads (the earlier path; kept for
    /// comparison and for kernels without io_uring, where `ring` falls back to it by itself).
    Workers,
}

/// How member reads and writes on the pollers' io_uring complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IoPoll {
    /// By interrupt (deferred to the poller's next pass).
    #[default]
    Off,
    /// By polling, for members whose block device has poll queues (`queue/io_poll` is 1:
    /// NVMe with `nvme.poll_queues` > 0): each poller has a second, polled io_uring
    /// (`IORING_SETUP_IOPOLL`) for them and polls the drives' queues in its loop, never
    /// sleeping while any of them is in flight (it yields its CPU between polls, or spins
    /// with `poll_mode = "busy"`), with no interrupt per completion, as SPDK polls its drives.
    /// Other members, and every flush, complete by interrupt. Not the default: in the lab
    /// (two emulated vCPUs shared by host, target and fio) it served fewer I/Os than
    /// interrupts (README, "Polled member I/O").
    On,
}

/// Which engine computes parity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ParityChoice {
    /// CPU SIMD.
    #[default]
    Cpu,
    /// GPU (needs the `gpu` build feature and a GPU; falls back to CPU with a log line).
    Gpu,
    /// Large batches on the GPU, small ones on the CPU.
    Auto,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    target: RawTarget,
    #[serde(default)]
    transport: RawTransport,
    #[serde(default)]
    cc: RawCc,
    #[serde(default, rename = "array")]
    arrays: Vec<RawArray>,
    #[serde(default, rename = "subsystem")]
    subsystems: Vec<RawSubsystem>,
    #[serde(default)]
    iscsi: RawIscsi,
}

/// `[iscsi]`: the iSER target (issue 18).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawIscsi {
    #[serde(default)]
    listen: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default, rename = "target")]
    targets: Vec<RawIscsiTarget>,
    /// `[iscsi.discovery_chap]`: CHAP required of SendTargets discovery sessions.
    #[serde(default)]
    discovery_chap: Option<RawChap>,
    /// Seconds of silence before an initiator is pinged (NOP-In).
    #[serde(default)]
    nop_in_interval: Option<Spanned<u64>>,
    /// Seconds a ping may stay unanswered before the connection is closed.
    #[serde(default)]
    nop_in_timeout: Option<Spanned<u64>>,
    /// ImmediateData offered in the login (default yes).
    #[serde(default)]
    immediate_data: Option<bool>,
}

/// `[[iscsi.target]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIscsiTarget {
    name: Spanned<String>,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    initiators: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default, rename = "lun")]
    luns: Vec<RawLun>,
    #[serde(default)]
    chap: Option<RawChap>,
}

/// `[iscsi.target.chap]`: the secret normal sessions must prove, and the target's own for
/// mutual CHAP.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChap {
    user: Spanned<String>,
    secret: Option<Spanned<String>>,
    secret_file: Option<Spanned<PathBuf>>,
    mutual_user: Option<Spanned<String>>,
    mutual_secret: Option<Spanned<String>>,
    mutual_secret_file: Option<Spanned<PathBuf>>,
}

/// `[[iscsi.target.lun]]`: a namespace of a configured subsystem as a LUN.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLun {
    lun: Spanned<u16>,
    subsystem: Spanned<String>,
    nsid: Spanned<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    #[serde(default = "default_listen")]
    listen: Spanned<Vec<Spanned<String>>>,
    #[serde(default = "default_cores")]
    cores: Spanned<u32>,
    #[serde(default = "default_storage_workers")]
    storage_workers: Spanned<u32>,
    #[serde(default)]
    poll_mode: PollMode,
    #[serde(default)]
    io_path: IoPath,
    #[serde(default)]
    io_poll: IoPoll,
    #[serde(default = "default_socket")]
    management_socket: PathBuf,
    #[serde(default = "default_state_dir")]
    state_dir: PathBuf,
    #[serde(default)]
    metrics: Option<Spanned<String>>,
    #[serde(default)]
    rdma_device: Option<String>,
}

impl Default for RawTarget {
    fn default() -> Self {
        RawTarget {
            listen: default_listen(),
            cores: default_cores(),
            storage_workers: default_storage_workers(),
            poll_mode: PollMode::default(),
            io_path: IoPath::default(),
            io_poll: IoPoll::default(),
            management_socket: default_socket(),
            state_dir: default_state_dir(),
            rdma_device: None,
            metrics: None,
        }
    }
}

fn default_listen() -> Spanned<Vec<Spanned<String>>> {
    // 4420 is the IANA port for NVMe-oF; all addresses.
    Spanned::new(0..0, vec![Spanned::new(0..0, "0.0.0.0:4420".to_owned())])
}
/// Array requests one poller keeps in flight per namespace: each worker thread runs one request
/// (read, read-modify-write, reconstruct-write) at a time on its own io_uring. 16 matches the
/// queue depth a host typically drives per queue (fio QD16, the kernel's md stripe cache
/// concurrency at that depth); fewer workers cap a deeper host queue at that many.
pub const DEFAULT_STORAGE_WORKERS: u32 = 16;

fn default_storage_workers() -> Spanned<u32> {
    Spanned::new(0..0, DEFAULT_STORAGE_WORKERS)
}

fn default_cores() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}
fn default_socket() -> PathBuf {
    PathBuf::from("/run/raidline/raidline.sock")
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/raidline")
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTransport {
    queue_depth: Option<Spanned<u16>>,
    admin_queue_depth: Option<Spanned<u16>>,
    max_io_queues: Option<Spanned<u16>>,
    in_capsule_data: Option<Spanned<u32>>,
    max_transfer: Option<Spanned<u32>>,
    max_controllers: Option<Spanned<u16>>,
    shared_receive_queue: Option<Spanned<u32>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCc {
    algorithm: Option<Spanned<String>>,
    #[serde(default)]
    params: std::collections::BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArray {
    name: Spanned<String>,
    members: Spanned<Vec<PathBuf>>,
    #[serde(default)]
    spares: Vec<PathBuf>,
    #[serde(default = "default_chunk")]
    chunk_kib: Spanned<u32>,
    #[serde(default)]
    parity: ParityChoice,
    #[serde(default = "default_rebuild")]
    rebuild_mb_s: Spanned<u32>,
    #[serde(default)]
    assume_clean: bool,
    #[serde(default)]
    write_hole: Option<Spanned<String>>,
    #[serde(default)]
    overwrite: Option<Spanned<Vec<PathBuf>>>,
}

fn default_chunk() -> Spanned<u32> {
    // md's default: large enough for sequential throughput, small enough for 4 KiB RMW.
    Spanned::new(0..0, 64)
}
fn default_rebuild() -> Spanned<u32> {
    // Leaves most of an NVMe drive's bandwidth to hosts while a rebuild runs.
    Spanned::new(0..0, 200)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubsystem {
    nqn: Spanned<String>,
    serial: Option<Spanned<String>>,
    #[serde(default = "default_model")]
    model: Spanned<String>,
    #[serde(default)]
    allow_any_host: bool,
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
    #[serde(default, rename = "namespace")]
    namespaces: Vec<RawNamespace>,
    #[serde(default)]
    auth: Vec<RawHostAuth>,
}

/// `[[subsystem.auth]]`: a host that must authenticate (DH-HMAC-CHAP).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostAuth {
    host: Spanned<String>,
    secret: Option<Spanned<String>>,
    secret_file: Option<Spanned<PathBuf>>,
    ctrl_secret: Option<Spanned<String>>,
    ctrl_secret_file: Option<Spanned<PathBuf>>,
    hashes: Option<Spanned<Vec<String>>>,
    dhgroups: Option<Spanned<Vec<String>>>,
}

fn default_model() -> Spanned<String> {
    Spanned::new(0..0, "Raidline RAID-5".to_owned())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNamespace {
    nsid: Spanned<u32>,
    array: Option<Spanned<String>>,
    file: Option<Spanned<PathBuf>>,
    /// Size for a file namespace that does not exist yet (created sparse).
    size_mib: Option<u64>,
}

/// The validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// RDMA CM listen addresses.
    pub listen: Vec<SocketAddr>,
    /// Poller threads.
    pub cores: u32,
    /// Storage worker threads per namespace per poller (array requests in flight).
    pub storage_workers: u32,
    /// How pollers wait.
    pub poll_mode: PollMode,
    /// Where pollers run storage requests.
    pub io_path: IoPath,
    /// How member I/O on the pollers' rings completes.
    pub io_poll: IoPoll,
    /// Management socket path.
    pub management_socket: PathBuf,
    /// Where the daemon remembers each array's current members (see [`crate::remember`]).
    pub state_dir: PathBuf,
    /// RDMA device to serve on (e.g. `rxe_eth0`); `None` = the first one.
    pub rdma_device: Option<String>,
    /// Prometheus metrics address, if any.
    pub metrics: Option<SocketAddr>,
    /// Transport limits.
    pub limits: Limits,
    /// Congestion control algorithm name and parameters.
    pub cc: CcConfig,
    /// Arrays.
    pub arrays: Vec<ArrayConfig>,
    /// Subsystems.
    pub subsystems: Vec<SubsystemConfig>,
    /// The iSER target: its portals and iSCSI targets (none: not served).
    pub iscsi: IscsiConfig,
}

/// `[iscsi]`: namespaces served to iSCSI hosts over iSER (RDMA), beside NVMe-oF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiConfig {
    /// RDMA CM listen addresses of the iSER portals (3260 is iSCSI's port).
    pub listen: Vec<SocketAddr>,
    /// The iSCSI targets.
    pub targets: Vec<IscsiTarget>,
    /// CHAP required of discovery sessions (`[iscsi.discovery_chap]`; `None`: none).
    pub discovery_chap: Option<raidline_scsi::iscsi::chap::ChapConfig>,
    /// Keep-alive times (`nop_in_interval`, `nop_in_timeout`; LIO's defaults, 15 s and 30 s).
    pub keepalive: crate::iser::Keepalive,
    /// `immediate_data`: ImmediateData=Yes offered (the default, as LIO). Writes of up to
    /// 8 KiB then come whole in their command's SEND, with no RDMA READ; a larger write's
    /// first 8 KiB are copied into its pool buffer. `false`: every write's data is fetched
    /// by RDMA READ, and no payload byte is copied.
    pub immediate_data: bool,
}

impl Default for IscsiConfig {
    fn default() -> IscsiConfig {
        IscsiConfig {
            listen: Vec::new(),
            targets: Vec::new(),
            discovery_chap: None,
            keepalive: crate::iser::Keepalive::default(),
            immediate_data: true,
        }
    }
}

/// One iSCSI target (`[[iscsi.target]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiTarget {
    /// Its iSCSI name (`iqn.…`, `eui.…` or `naa.…`), lower case.
    pub name: String,
    /// TargetAlias, if any.
    pub alias: Option<String>,
    /// Initiators allowed to log in and to see it in SendTargets; `None`: any.
    pub initiators: Option<Vec<String>>,
    /// Its LUNs, ascending.
    pub luns: Vec<IscsiLun>,
    /// CHAP required of its sessions (`None`: none).
    pub chap: Option<raidline_scsi::iscsi::chap::ChapConfig>,
}

/// A LUN: a namespace of a configured subsystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiLun {
    /// LUN number (0–16383: flat space addressing).
    pub lun: u16,
    /// The subsystem holding the namespace.
    pub subsystem: Nqn,
    /// Its namespace id.
    pub nsid: u32,
}

/// Congestion control settings, validated when the configuration loads: the algorithm is one of
/// `rtt-aimd`, `ctcc`, `swift`, `timely`, `dcqcn`, `fixed`, or `off` (no pacing, the default
/// when `[cc]` names none), and every parameter exists for it and lies in its range.
#[derive(Clone, Debug, PartialEq)]
pub struct CcConfig {
    /// Algorithm name (`off`: no pacing).
    pub algorithm: String,
    /// Parameter overrides by name.
    pub params: Vec<(String, f64)>,
}

/// One RAID-5 array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayConfig {
    /// Name namespaces refer to.
    pub name: String,
    /// Member devices or files (≥ 3).
    pub members: Vec<PathBuf>,
    /// Hot spares.
    pub spares: Vec<PathBuf>,
    /// Chunk size in bytes.
    pub chunk_bytes: u32,
    /// Parity engine.
    pub parity: ParityChoice,
    /// Rebuild throttle in MB/s.
    pub rebuild_mb_s: u32,
    /// When the array is first created: the members are known to be zero (new drives, a
    /// trimmed device, fresh lab images), so parity is already consistent and no initial
    /// resync runs. Ignored once the array exists.
    pub assume_clean: bool,
    /// When writes carry partial-parity-log entries: `degraded` (the default: only while a
    /// member is missing) or `always` (every write that is not a whole stripe, so a crash
    /// together with a member lost at the restart loses nothing). Applied at every start; the
    /// array keeps it in its superblocks.
    pub write_hole: WriteHolePolicy,
    /// Members and spares whose present content (a filesystem, partition table, other RAID
    /// or volume metadata: [`crate::foreign`]) the operator allows a new array to overwrite.
    /// Without it, creating the array over such a device is refused.
    pub overwrite: Vec<PathBuf>,
}

/// One subsystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubsystemConfig {
    /// NQN.
    pub nqn: Nqn,
    /// Serial number; `None` = derived from the array's stored identity.
    pub serial: Option<String>,
    /// Model number.
    pub model: String,
    /// `None` = any host; otherwise the allowed host NQNs.
    pub hosts: Option<BTreeSet<Nqn>>,
    /// Hosts that must authenticate (DH-HMAC-CHAP), with their secrets and what they may use.
    pub auth: BTreeMap<Nqn, Arc<Policy>>,
    /// Namespaces.
    pub namespaces: Vec<NamespaceConfig>,
}

/// What backs a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A RAID-5 array by name.
    Array(String),
    /// A plain file or block device (tests, labs).
    File {
        /// Path.
        path: PathBuf,
        /// Size to create a missing file with, in bytes.
        create_size: Option<u64>,
    },
}

/// One namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceConfig {
    /// Namespace id.
    pub nsid: u32,
    /// Backing store.
    pub backing: Backing,
}

struct Ctx<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err<T>(
        &self,
        span: core::ops::Range<usize>,
        message: impl Into<String>,
    ) -> Result<T, ConfigError> {
        let (line, column) = line_col(self.text, span.start);
        Err(ConfigError::Invalid {
            origin: self.origin.to_owned(),
            line,
            column,
            message: message.into(),
        })
    }

    fn range<T: PartialOrd + Copy + core::fmt::Display>(
        &self,
        v: &Spanned<T>,
        lo: T,
        hi: T,
        what: &str,
    ) -> Result<T, ConfigError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return self.err(
                v.span(),
                format!("{what} = {x} is out of range {lo}..={hi}"),
            );
        }
        Ok(x)
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Parses and validates configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            origin: origin.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let cx = Ctx { origin, text };
        let t = &raw.target;

        let mut listen = Vec::new();
        for l in t.listen.get_ref() {
            match l.get_ref().parse::<SocketAddr>() {
                Ok(a) => listen.push(a),
                Err(_) => {
                    return cx.err(
                        l.span(),
                        format!("listen address {:?} is not IP:PORT", l.get_ref()),
                    )
                }
            }
        }
        if listen.is_empty() {
            return cx.err(
                t.listen.span(),
                "target.listen is empty: nothing to serve on (the NVMe-oF port is 4420, e.g. [\"0.0.0.0:4420\"])",
            );
        }
        let cores = cx.range(&t.cores, 1, 256, "target.cores")?;
        let storage_workers = cx.range(&t.storage_workers, 1, 256, "target.storage_workers")?;
        let metrics = match &t.metrics {
            None => None,
            Some(m) => match m.get_ref().parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    return cx.err(
                        m.span(),
                        format!("metrics address {:?} is not IP:PORT", m.get_ref()),
                    )
                }
            },
        };

        let limits = transport_limits(&cx, &raw.transport)?;
        let cc = cc_config(&cx, &raw.cc)?;

        let mut arrays = Vec::new();
        for a in &raw.arrays {
            let name = a.name.get_ref().clone();
            if name.is_empty() || arrays.iter().any(|x: &ArrayConfig| x.name == name) {
                return cx.err(
                    a.name.span(),
                    format!("array name {name:?} is empty or used twice"),
                );
            }
            if a.members.get_ref().len() < 3 {
                return cx.err(a.members.span(), "a RAID-5 array needs at least 3 members");
            }
            let chunk = *a.chunk_kib.get_ref();
            if chunk < 4 || !chunk.is_power_of_two() || chunk > 4096 {
                return cx.err(
                    a.chunk_kib.span(),
                    format!("chunk_kib = {chunk}: must be a power of two from 4 to 4096"),
                );
            }
            let rebuild = cx.range(&a.rebuild_mb_s, 1, 100_000, "rebuild_mb_s")?;
            let write_hole = match &a.write_hole {
                None => WriteHolePolicy::default(),
                Some(w) => match WriteHolePolicy::parse(w.get_ref()) {
                    Some(p) => p,
                    None => {
                        return cx.err(
                            w.span(),
                            format!(
                                "write_hole = {:?}: must be \"degraded\" (log writes only while \
                                 a member is missing, the default) or \"always\" (log every \
                                 write that is not a whole stripe)",
                                w.get_ref()
                            ),
                        )
                    }
                },
            };
            // The same path twice (aliases are found by device number at start and by
            // `check-config`: `service::check_devices`).
            let all: Vec<&PathBuf> = a.members.get_ref().iter().chain(&a.spares).collect();
            if let Some(dup) = all
                .iter()
                .enumerate()
                .find_map(|(i, p)| all[..i].contains(p).then_some(p))
            {
                return cx.err(
                    a.members.span(),
                    format!(
                        "array {name}: {} is listed twice (members and spares are distinct devices)",
                        dup.display()
                    ),
                );
            }
            let overwrite = match &a.overwrite {
                None => Vec::new(),
                Some(o) => {
                    if let Some(x) = o.get_ref().iter().find(|p| !all.contains(p)) {
                        return cx.err(
                            o.span(),
                            format!(
                                "array {name}: overwrite names {}, which is not one of its members or spares",
                                x.display()
                            ),
                        );
                    }
                    o.get_ref().clone()
                }
            };
            arrays.push(ArrayConfig {
                name,
                members: a.members.get_ref().clone(),
                spares: a.spares.clone(),
                chunk_bytes: chunk * 1024,
                parity: a.parity,
                rebuild_mb_s: rebuild,
                assume_clean: a.assume_clean,
                write_hole,
                overwrite,
            });
        }

        let mut subsystems: Vec<SubsystemConfig> = Vec::new();
        for s in &raw.subsystems {
            let nqn = nqn(&cx, &s.nqn)?;
            if nqn.is_discovery() || subsystems.iter().any(|x| x.nqn == nqn) {
                return cx.err(
                    s.nqn.span(),
                    format!("subsystem NQN {nqn} is the discovery NQN or used twice"),
                );
            }
            let serial = match &s.serial {
                Some(v)
                    if v.get_ref().is_empty()
                        || v.get_ref().len() > 20
                        || !v.get_ref().is_ascii() =>
                {
                    return cx.err(v.span(), "serial must be 1–20 ASCII characters");
                }
                Some(v) => Some(v.get_ref().clone()),
                None => None,
            };
            if s.model.get_ref().is_empty()
                || s.model.get_ref().len() > 40
                || !s.model.get_ref().is_ascii()
            {
                return cx.err(s.model.span(), "model must be 1–40 ASCII characters");
            }
            let hosts = if s.allow_any_host {
                if let Some(h) = s.hosts.first() {
                    return cx.err(
                        h.span(),
                        "hosts are listed but allow_any_host = true: choose one",
                    );
                }
                None
            } else {
                if s.hosts.is_empty() {
                    return cx.err(s.nqn.span(), format!("subsystem {nqn}: no hosts listed and allow_any_host is false, so no host could connect"));
                }
                let mut set = BTreeSet::new();
                for h in &s.hosts {
                    set.insert(nqn_of(&cx, h)?);
                }
                Some(set)
            };
            let mut auth = BTreeMap::new();
            for a in &s.auth {
                let host = nqn_of(&cx, &a.host)?;
                match &hosts {
                    None => {
                        return cx.err(a.host.span(), format!("subsystem {nqn}: [[subsystem.auth]] for {host} with allow_any_host = true: any other host would connect without authenticating; list the hosts instead"));
                    }
                    Some(h) if !h.contains(&host) => {
                        return cx.err(a.host.span(), format!("subsystem {nqn}: {host} has an [[subsystem.auth]] entry but is not in hosts"));
                    }
                    _ => {}
                }
                if auth.contains_key(&host) {
                    return cx.err(
                        a.host.span(),
                        format!("subsystem {nqn}: two [[subsystem.auth]] entries for {host}"),
                    );
                }
                let secret = secret_of(&cx, &host, "secret", &a.secret, &a.secret_file)?
                    .ok_or(())
                    .or_else(|()| cx.err(a.host.span(), format!("subsystem {nqn}: {host}: give secret = \"DHHC-1:…\" or secret_file = \"…\" (`nvme gen-dhchap-key` makes one)")))?;
                let ctrl_secret = secret_of(
                    &cx,
                    &host,
                    "ctrl_secret",
                    &a.ctrl_secret,
                    &a.ctrl_secret_file,
                )?;
                let hashes = match &a.hashes {
                    None => HashFn::ALL.to_vec(),
                    Some(v) => names_of(
                        &cx,
                        v,
                        "hashes",
                        "sha256, sha384, sha512",
                        HashFn::from_name,
                    )?,
                };
                let groups = match &a.dhgroups {
                    None => DhGroup::ALL.to_vec(),
                    Some(v) => names_of(
                        &cx,
                        v,
                        "dhgroups",
                        "null, ffdhe2048, ffdhe3072, ffdhe4096, ffdhe6144, ffdhe8192",
                        DhGroup::from_name,
                    )?,
                };
                auth.insert(
                    host,
                    Arc::new(Policy {
                        secret,
                        ctrl_secret,
                        hashes,
                        groups,
                    }),
                );
            }
            let mut namespaces: Vec<NamespaceConfig> = Vec::new();
            for n in &s.namespaces {
                let nsid = *n.nsid.get_ref();
                if nsid == 0 || nsid >= 0xFFFF_FFF0 || namespaces.iter().any(|x| x.nsid == nsid) {
                    return cx.err(
                        n.nsid.span(),
                        format!("nsid {nsid} is 0, reserved, or used twice"),
                    );
                }
                let backing = match (&n.array, &n.file) {
                    (Some(a), None) => {
                        if !arrays.iter().any(|x| &x.name == a.get_ref()) {
                            return cx.err(a.span(), format!("no array named {:?}", a.get_ref()));
                        }
                        Backing::Array(a.get_ref().clone())
                    }
                    (None, Some(f)) => Backing::File {
                        path: f.get_ref().clone(),
                        create_size: n.size_mib.map(|m| m << 20),
                    },
                    _ => {
                        return cx.err(
                            n.nsid.span(),
                            format!(
                            "namespace {nsid}: give exactly one of array = \"…\" or file = \"…\""
                        ),
                        )
                    }
                };
                namespaces.push(NamespaceConfig { nsid, backing });
            }
            subsystems.push(SubsystemConfig {
                nqn,
                serial,
                model: s.model.get_ref().clone(),
                hosts,
                auth,
                namespaces,
            });
        }

        let iscsi = iscsi_config(&cx, &raw.iscsi, &subsystems, &listen)?;

        Ok(Config {
            iscsi,
            listen,
            cores,
            storage_workers,
            poll_mode: t.poll_mode,
            io_path: t.io_path,
            io_poll: t.io_poll,
            management_socket: t.management_socket.clone(),
            state_dir: t.state_dir.clone(),
            rdma_device: t.rdma_device.clone(),
            metrics,
            limits,
            cc,
            arrays,
            subsystems,
        })
    }
}

/// A secret given inline or in a file (which only its owner may read: mode 0600 or stricter).
fn secret_of(
    cx: &Ctx<'_>,
    host: &Nqn,
    key: &str,
    inline: &Option<Spanned<String>>,
    file: &Option<Spanned<PathBuf>>,
) -> Result<Option<Secret>, ConfigError> {
    let Some((text, span)) = secret_text(cx, &host.to_string(), key, inline, file)? else {
        return Ok(None);
    };
    match Secret::parse(&text) {
        Ok(s) => Ok(Some(s)),
        Err(e) => cx.err(span, format!("{host}: {key}: {e}")),
    }
}

/// A secret's text, given inline as `key` or in the file `key_file` (not both), and where it
/// was given; `who` names its owner in errors.
#[allow(clippy::type_complexity)]
fn secret_text(
    cx: &Ctx<'_>,
    who: &str,
    key: &str,
    inline: &Option<Spanned<String>>,
    file: &Option<Spanned<PathBuf>>,
) -> Result<Option<(zeroize::Zeroizing<String>, core::ops::Range<usize>)>, ConfigError> {
    match (inline, file) {
        (None, None) => Ok(None),
        (Some(_), Some(f)) => cx.err(
            f.span(),
            format!("{who}: give {key} or {key}_file, not both"),
        ),
        (Some(t), None) => Ok(Some((
            zeroize::Zeroizing::new(t.get_ref().clone()),
            t.span(),
        ))),
        (None, Some(f)) => Ok(Some((
            read_secret_file(cx, f.get_ref(), f.span())?,
            f.span(),
        ))),
    }
}

fn read_secret_file(
    cx: &Ctx<'_>,
    path: &Path,
    span: core::ops::Range<usize>,
) -> Result<zeroize::Zeroizing<String>, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return cx.err(span, format!("cannot read {}: {e}", path.display())),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return cx.err(
            span,
            format!(
                "{} has mode {mode:04o}: a secret file must be readable by its owner only (chmod 600 {})",
                path.display(),
                path.display()
            ),
        );
    }
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(zeroize::Zeroizing::new(t)),
        Err(e) => cx.err(span, format!("cannot read {}: {e}", path.display())),
    }
}

fn names_of<T: PartialEq>(
    cx: &Ctx<'_>,
    v: &Spanned<Vec<String>>,
    key: &str,
    known: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Vec<T>, ConfigError> {
    let mut out: Vec<T> = Vec::new();
    for n in v.get_ref() {
        match parse(n) {
            Some(x) if !out.contains(&x) => out.push(x),
            Some(_) => return cx.err(v.span(), format!("{key}: {n:?} is listed twice")),
            None => return cx.err(v.span(), format!("{key}: unknown {n:?} (known: {known})")),
        }
    }
    if out.is_empty() {
        return cx.err(v.span(), format!("{key}: the list is empty"));
    }
    Ok(out)
}

fn nqn(cx: &Ctx<'_>, s: &Spanned<String>) -> Result<Nqn, ConfigError> {
    nqn_of(cx, s)
}

fn nqn_of(cx: &Ctx<'_>, s: &Spanned<String>) -> Result<Nqn, ConfigError> {
    match Nqn::new(s.get_ref()) {
        Ok(n) if s.get_ref().starts_with("nqn.") => Ok(n),
        Ok(_) => cx.err(
            s.span(),
            format!(
                "{:?} is not an NQN (it must start with \"nqn.\")",
                s.get_ref()
            ),
        ),
        Err(why) => cx.err(s.span(), format!("{:?} is not an NQN: {why}", s.get_ref())),
    }
}

/// Whether `s` is an iSCSI name as RFC 3720 §3.2.6 spells them: `iqn.YYYY-MM.reversed.domain…`,
/// `eui.` + 16 hex digits, or `naa.` + 16 or 32 hex digits; at most 223 bytes, lower case.
fn iscsi_name_ok(s: &str) -> bool {
    let hex = |h: &str, lens: &[usize]| {
        lens.contains(&h.len()) && h.bytes().all(|b| b.is_ascii_hexdigit())
    };
    s.len() <= 223
        && if let Some(rest) = s.strip_prefix("iqn.") {
            let date = rest.get(..7).unwrap_or("");
            date.len() == 7
                && date.as_bytes()[4] == b'-'
                && date[..4].bytes().all(|b| b.is_ascii_digit())
                && date[5..].bytes().all(|b| b.is_ascii_digit())
                && rest[7..].starts_with('.')
                && rest.len() > 8
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-:".contains(&b))
        } else if let Some(h) = s.strip_prefix("eui.") {
            hex(h, &[16])
        } else if let Some(h) = s.strip_prefix("naa.") {
            hex(h, &[16, 32])
        } else {
            false
        }
}

fn iscsi_config(
    cx: &Ctx<'_>,
    raw: &RawIscsi,
    subsystems: &[SubsystemConfig],
    nvme_listen: &[SocketAddr],
) -> Result<IscsiConfig, ConfigError> {
    let mut listen = Vec::new();
    if let Some(l) = &raw.listen {
        for a in l.get_ref() {
            match a.get_ref().parse::<SocketAddr>() {
                // A connection is told NVMe/RDMA from iSER by the port it came in on.
                Ok(x) if nvme_listen.iter().any(|n| n.port() == x.port()) => {
                    return cx.err(
                        a.span(),
                        format!(
                            "iscsi.listen port {} is also an NVMe/RDMA listen port (target.listen): use another port (iSCSI's is 3260)",
                            x.port()
                        ),
                    )
                }
                Ok(x) => listen.push(x),
                Err(_) => {
                    return cx.err(
                        a.span(),
                        format!(
                            "iscsi.listen address {:?} is not IP:PORT (iSCSI's port is 3260)",
                            a.get_ref()
                        ),
                    )
                }
            }
        }
        if raw.targets.is_empty() {
            return cx.err(
                l.span(),
                "iscsi.listen is set but no [[iscsi.target]] is configured: nothing to serve",
            );
        }
    }
    let mut targets: Vec<IscsiTarget> = Vec::new();
    for t in &raw.targets {
        let name = t.name.get_ref().to_ascii_lowercase();
        if !iscsi_name_ok(&name) {
            return cx.err(
                t.name.span(),
                format!(
                    "iSCSI target name {:?} is not an iSCSI name (iqn.YYYY-MM.reversed.domain:id, eui.<16 hex>, naa.<16 or 32 hex>)",
                    t.name.get_ref()
                ),
            );
        }
        if targets.iter().any(|x| x.name == name) {
            return cx.err(
                t.name.span(),
                format!("iSCSI target {name} is configured twice"),
            );
        }
        if listen.is_empty() {
            return cx.err(
                t.name.span(),
                "an [[iscsi.target]] needs iscsi.listen, the iSER portals to serve it on (e.g. [\"0.0.0.0:3260\"])",
            );
        }
        let initiators = match &t.initiators {
            None => None,
            Some(list) => {
                let mut names = Vec::new();
                for i in list.get_ref() {
                    let n = i.get_ref().to_ascii_lowercase();
                    if !iscsi_name_ok(&n) {
                        return cx.err(
                            i.span(),
                            format!("initiator {:?} is not an iSCSI name", i.get_ref()),
                        );
                    }
                    names.push(n);
                }
                if names.is_empty() {
                    return cx.err(
                        list.span(),
                        "initiators = [] lets no host in; leave it out to allow any",
                    );
                }
                Some(names)
            }
        };
        let mut luns: Vec<IscsiLun> = Vec::new();
        for l in &t.luns {
            let lun = cx.range(&l.lun, 0, 16383, "iscsi.target.lun.lun")?;
            if luns.iter().any(|x| x.lun == lun) {
                return cx.err(
                    l.lun.span(),
                    format!("LUN {lun} of {name} is configured twice"),
                );
            }
            let subsystem = nqn(cx, &l.subsystem)?;
            let nsid = *l.nsid.get_ref();
            let Some(sub) = subsystems.iter().find(|s| s.nqn == subsystem) else {
                return cx.err(
                    l.subsystem.span(),
                    format!("LUN {lun} of {name}: no [[subsystem]] {subsystem} is configured"),
                );
            };
            if !sub.namespaces.iter().any(|n| n.nsid == nsid) {
                return cx.err(
                    l.nsid.span(),
                    format!("LUN {lun} of {name}: subsystem {subsystem} has no namespace {nsid}"),
                );
            }
            luns.push(IscsiLun {
                lun,
                subsystem,
                nsid,
            });
        }
        if luns.is_empty() {
            return cx.err(
                t.name.span(),
                format!("iSCSI target {name} has no [[iscsi.target.lun]]"),
            );
        }
        luns.sort_by_key(|l| l.lun);
        let chap = match &t.chap {
            None => None,
            Some(c) => Some(chap_config(cx, &name, c)?),
        };
        targets.push(IscsiTarget {
            name,
            alias: t.alias.clone(),
            initiators,
            luns,
            chap,
        });
    }
    let discovery_chap = match &raw.discovery_chap {
        None => None,
        Some(c) => Some(chap_config(cx, "iscsi.discovery_chap", c)?),
    };
    let mut keepalive = crate::iser::Keepalive::default();
    if let Some(v) = &raw.nop_in_interval {
        keepalive.nop_in_interval =
            std::time::Duration::from_secs(cx.range(v, 1, 3600, "iscsi.nop_in_interval")?);
    }
    if let Some(v) = &raw.nop_in_timeout {
        keepalive.nop_in_timeout =
            std::time::Duration::from_secs(cx.range(v, 1, 3600, "iscsi.nop_in_timeout")?);
    }
    Ok(IscsiConfig {
        listen,
        targets,
        discovery_chap,
        keepalive,
        immediate_data: raw.immediate_data.unwrap_or(true),
    })
}

/// One CHAP secret: inline or from a file readable by its owner only; 12 to 255 bytes.
fn chap_secret(
    cx: &Ctx<'_>,
    target: &str,
    key: &str,
    inline: &Option<Spanned<String>>,
    file: &Option<Spanned<PathBuf>>,
) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, ConfigError> {
    use raidline_scsi::iscsi::chap::{MAX_SECRET_LEN, MIN_SECRET_LEN};
    let Some((text, span)) = secret_text(cx, target, key, inline, file)? else {
        return Ok(None);
    };
    // A file's trailing newline is not part of the secret.
    let s = text.trim_end_matches(['\n', '\r']);
    if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&s.len()) {
        return cx.err(
            span,
            format!(
                "{target}: {key} is {} bytes; CHAP secrets are {MIN_SECRET_LEN} to {MAX_SECRET_LEN} bytes (RFC 7143: at least 96 bits)",
                s.len()
            ),
        );
    }
    Ok(Some(zeroize::Zeroizing::new(s.as_bytes().to_vec())))
}

fn chap_config(
    cx: &Ctx<'_>,
    target: &str,
    c: &RawChap,
) -> Result<raidline_scsi::iscsi::chap::ChapConfig, ConfigError> {
    use raidline_scsi::iscsi::chap::{ChapAccount, ChapConfig};
    let user = c.user.get_ref().clone();
    if user.is_empty() {
        return cx.err(c.user.span(), format!("{target}: chap.user is empty"));
    }
    let Some(secret) = chap_secret(cx, target, "secret", &c.secret, &c.secret_file)? else {
        return cx.err(
            c.user.span(),
            format!("{target}: chap needs secret or secret_file"),
        );
    };
    let mutual = chap_secret(
        cx,
        target,
        "mutual_secret",
        &c.mutual_secret,
        &c.mutual_secret_file,
    )?;
    let target_account = match (&c.mutual_user, mutual) {
        (None, None) => None,
        (Some(u), Some(s)) => {
            // The same secret both ways would let one side's answer serve as the other's.
            if *s == *secret {
                return cx.err(
                    u.span(),
                    format!("{target}: mutual_secret must differ from secret (RFC 7143 §12.1.3)"),
                );
            }
            Some(ChapAccount {
                user: u.get_ref().clone(),
                secret: s,
            })
        }
        (Some(u), None) => {
            return cx.err(
                u.span(),
                format!("{target}: mutual_user needs mutual_secret or mutual_secret_file"),
            )
        }
        (None, Some(_)) => {
            return cx.err(
                c.user.span(),
                format!("{target}: mutual_secret needs mutual_user"),
            )
        }
    };
    Ok(ChapConfig {
        initiator: ChapAccount { user, secret },
        target: target_account,
    })
}

fn transport_limits(cx: &Ctx<'_>, t: &RawTransport) -> Result<Limits, ConfigError> {
    let mut l = Limits::default();
    if let Some(v) = &t.queue_depth {
        l.max_queue_depth = cx.range(v, 16, 1024, "transport.queue_depth")?;
    }
    if let Some(v) = &t.admin_queue_depth {
        l.max_admin_queue_depth = cx.range(v, 32, 4096, "transport.admin_queue_depth")?;
    }
    if let Some(v) = &t.max_io_queues {
        l.max_io_queues = cx.range(v, 1, 1024, "transport.max_io_queues")?;
    }
    if let Some(v) = &t.in_capsule_data {
        let x = cx.range(v, 8192, 1 << 20, "transport.in_capsule_data")?;
        if x % 16 != 0 {
            return cx.err(
                v.span(),
                "transport.in_capsule_data must be a multiple of 16 bytes",
            );
        }
        l.in_capsule_data = x;
    }
    if let Some(v) = &t.max_transfer {
        let x = cx.range(v, 4096, 16 << 20, "transport.max_transfer")?;
        if !x.is_power_of_two() {
            return cx.err(v.span(), "transport.max_transfer must be a power of two");
        }
        l.max_transfer = x;
    }
    if let Some(v) = &t.max_controllers {
        l.max_controllers = cx.range(v, 1, 0xFFEF, "transport.max_controllers")?;
    }
    if let Some(v) = &t.shared_receive_queue {
        let x = *v.get_ref();
        if x != 0 {
            l.srq_depth = cx.range(v, 16, 16384, "transport.shared_receive_queue")?;
        } else {
            l.srq_depth = 0;
        }
    }
    Ok(l)
}

fn cc_config(cx: &Ctx<'_>, c: &RawCc) -> Result<CcConfig, ConfigError> {
    let algorithm = c.algorithm.as_ref().map_or_else(
        || crate::daemon::pacing::DEFAULT_ALGORITHM.to_owned(),
        |a| a.get_ref().clone(),
    );
    // The algorithm is checked at its line, and each parameter at its own.
    let mut checked = if algorithm == crate::daemon::pacing::PACING_OFF {
        None
    } else {
        match crate::daemon::pacing::Algorithm::by_name(&algorithm) {
            Ok(a) => Some(a),
            Err(e) => {
                let span = c.algorithm.as_ref().map_or(0..0, |a| a.span());
                return cx.err(span, format!("[cc]: {e}"));
            }
        }
    };
    let mut params = Vec::new();
    for (k, v) in &c.params {
        let x = match v.get_ref() {
            toml::Value::Integer(i) => *i as f64,
            toml::Value::Float(f) => *f,
            _ => return cx.err(v.span(), format!("cc.params.{k} must be a number")),
        };
        if let Some(a) = checked.as_mut() {
            if let Err(e) = a.set(k, x) {
                return cx.err(v.span(), format!("[cc.params]: {e}"));
            }
        }
        params.push((k.clone(), x));
    }
    Ok(CcConfig { algorithm, params })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
