//! The daemon as a service: configuration → arrays and namespaces → a running [`Target`], with
//! the management socket, the metrics endpoint, systemd notification and signal handling.
//!
//! Array bring-up: the members of each configured array are assembled from their superblocks
//! (any order; the array's UUID and layout are on the media). Only when *no* member carries a
//! superblock — brand-new drives — is a new array created, and that is logged loudly. A
//! member set that has superblocks but does not assemble is an error: nothing is ever
//! overwritten by guesswork.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use raidline_raid::superblock::{SlotState, Superblock};
use raidline_raid::{Array, ArrayConfig as RaidArrayConfig, ChunkSize, Member, ParityEngine};

use crate::config::{ArrayConfig, Backing, Config, ParityChoice};
use crate::daemon::pacing::PACING_OFF;
use crate::daemon::{
    open_member, ArrayEntry, Backend, CcSpec, NamespaceSpec, QueueStats, Shared, SubsystemSpec,
    TargetSpec,
};
use crate::identity;
use crate::metrics::{render_all, Snapshot};
use crate::mgmt::{
    ArrayStatus, ControllerStatus, Management, MemberStatus, NamespaceStatus, Progress,
    QueueStatus, StatusReport, SubsystemStatus,
};
use crate::subsystem::{HostAccess, NamespaceInfo, Subsystem, DEFAULT_BLOCK_SIZE};

/// Why the service could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A member or file could not be opened.
    #[error("{path}: {source}")]
    Open {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The array engine refused.
    #[error("array {array}: {source}")]
    Array {
        /// Array name.
        array: String,
        /// Cause.
        source: raidline_raid::RaidError,
    },
    /// Something else about the configuration.
    #[error("{0}")]
    Config(String),
}

/// The parity engine for a configured choice, and why it fell back (to be logged).
pub fn parity_engine(choice: ParityChoice) -> (Arc<dyn ParityEngine>, Option<String>) {
    let raid_choice = match choice {
        ParityChoice::Cpu => raidline_raid::gpu::ParityChoice::Cpu,
        ParityChoice::Gpu => raidline_raid::gpu::ParityChoice::Gpu,
        ParityChoice::Auto => raidline_raid::gpu::ParityChoice::Auto,
    };
    raidline_raid::gpu::engine_for(raid_choice)
}

fn open(path: &Path, create: Option<u64>) -> Result<Arc<dyn Member>, ServiceError> {
    open_member(path, create).map_err(|source| ServiceError::Open {
        path: path.to_owned(),
        source,
    })
}

/// What the first block of a member holds.
#[derive(Debug)]
enum Probe {
    /// No superblock magic: a blank (or foreign) device.
    Blank,
    /// A valid array superblock.
    Superblock,
    /// Magic present but the superblock does not decode (torn, damaged, newer version).
    Damaged(String),
    /// The block could not be read.
    Unreadable(String),
}

fn probe(m: &dyn Member) -> Probe {
    // O_DIRECT members need an aligned buffer: a plain Vec would fail the read, and a failed
    // read must never be mistaken for a blank device.
    let Some(mut bufs) = raidline_raid::BufferArena::with_buffers(1, 4096, 4096) else {
        return Probe::Unreadable("cannot allocate a 4 KiB buffer".into());
    };
    let Some(mut b) = bufs.pop() else {
        return Probe::Unreadable("cannot allocate a 4 KiB buffer".into());
    };
    if let Err(e) = m.read_at(0, &mut b) {
        return Probe::Unreadable(e.to_string());
    }
    match Superblock::decode(&b) {
        Ok(_) => Probe::Superblock,
        Err(raidline_raid::SuperblockError::NoMagic) => Probe::Blank,
        Err(e) => Probe::Damaged(e.to_string()),
    }
}

/// Assembles (or, on blank members, creates) one configured array. `remembered` are further
/// candidates (the daemon's record of the array's current members, [`crate::remember`]): they
/// are offered to assembly beside the configured members and spares, skipped with a warning
/// when they cannot be opened, and a superblock on any of them forbids creating a new array.
pub fn bring_up_array(a: &ArrayConfig, remembered: &[PathBuf]) -> Result<Arc<Array>, ServiceError> {
    let err = |source| ServiceError::Array {
        array: a.name.clone(),
        source,
    };
    let members: Vec<Arc<dyn Member>> = a
        .members
        .iter()
        .map(|p| open(p, None))
        .collect::<Result<_, _>>()?;
    let spares: Vec<Arc<dyn Member>> = a
        .spares
        .iter()
        .map(|p| open(p, None))
        .collect::<Result<_, _>>()?;
    let mut extra: Vec<Arc<dyn Member>> = Vec::new();
    for p in remembered {
        if a.members.contains(p) || a.spares.contains(p) {
            continue;
        }
        match open(p, None) {
            Ok(m) => {
                tracing::info!(
                    "array {}: {} is a remembered member (not in the configuration); offered to assembly",
                    a.name,
                    p.display()
                );
                extra.push(m);
            }
            Err(e) => tracing::warn!("array {}: remembered member skipped: {e}", a.name),
        }
    }
    let (parity, fallback) = parity_engine(a.parity);
    if let Some(why) = fallback {
        tracing::warn!("array {}: parity on the CPU: {why}", a.name);
    }
    tracing::info!("array {}: parity engine {}", a.name, parity.name());
    let probes: Vec<(String, Probe)> = members
        .iter()
        .chain(&spares)
        .chain(&extra)
        .map(|m| (m.name().to_string(), probe(&**m)))
        .collect();
    for (name, p) in &probes {
        if let Probe::Unreadable(e) = p {
            return Err(ServiceError::Config(format!(
                "array {}: cannot read the superblock area of {name}: {e}; refusing to assemble or create",
                a.name
            )));
        }
        if let Probe::Damaged(e) = p {
            tracing::warn!("array {}: {name}: damaged superblock ({e})", a.name);
        }
    }
    if probes.iter().all(|(_, p)| matches!(p, Probe::Blank)) {
        tracing::warn!(
            "array {}: no member carries a superblock; creating a NEW array over {} members (chunk {} KiB)",
            a.name,
            members.len(),
            a.chunk_bytes / 1024
        );
        let cfg = RaidArrayConfig {
            chunk: ChunkSize::new(a.chunk_bytes)
                .map_err(|e| err(raidline_raid::RaidError::Geometry(e)))?,
            assume_clean: a.assume_clean,
            ..RaidArrayConfig::default()
        };
        let array = Array::create(members, spares, &cfg, parity).map_err(err)?;
        return Ok(Arc::new(array));
    }
    let candidates: Vec<Arc<dyn Member>> = members.into_iter().chain(spares).chain(extra).collect();
    let asm = Array::assemble(candidates, None, parity).map_err(err)?;
    for r in &asm.refused {
        tracing::warn!("array {}: member not taken: {r}", a.name);
    }
    if asm.resync_pending {
        tracing::warn!(
            "array {}: was not stopped cleanly; resyncing the regions written at the time",
            a.name
        );
    }
    let array = asm.array;
    let missing = array.degraded_roles();
    if missing.is_empty() {
        tracing::info!("array {}: assembled, all members present", a.name);
    } else {
        tracing::warn!(
            "array {}: assembled DEGRADED, roles {missing:?} missing",
            a.name
        );
    }
    Ok(Arc::new(array))
}

/// Builds the target specification from a configuration: brings up the arrays, opens the
/// file namespaces, derives stable identifiers.
pub fn build_spec(config: &Config) -> Result<TargetSpec, ServiceError> {
    let mut spec = TargetSpec::new(config.limits);
    spec.listen = config.listen.clone();
    spec.pollers = config.cores.max(1) as usize;
    spec.poll_mode = config.poll_mode;
    spec.state_dir = Some(config.state_dir.clone());
    spec.workers_per_namespace = config.storage_workers as usize;
    if config.cc.algorithm != PACING_OFF {
        let cc = CcSpec {
            algorithm: config.cc.algorithm.clone(),
            params: config.cc.params.clone(),
        };
        cc.build()
            .map_err(|e| ServiceError::Config(format!("[cc]: {e}")))?;
        spec.cc = Some(cc);
    }
    let mut arrays = Vec::new();
    for a in &config.arrays {
        let file = crate::remember::file_for(&config.state_dir, &a.name);
        let remembered = crate::remember::load(&file).unwrap_or_else(|e| {
            tracing::warn!(
                "array {}: cannot read {}: {e}; assembling from the configured paths only",
                a.name,
                file.display()
            );
            Vec::new()
        });
        let array = bring_up_array(a, &remembered)?;
        arrays.push((a.name.clone(), array, u64::from(a.rebuild_mb_s) << 20));
    }
    for s in &config.subsystems {
        let mut namespaces = Vec::new();
        let mut serial_key = s.nqn.to_string().into_bytes();
        for n in &s.namespaces {
            let (backend, array_name, ids) = match &n.backing {
                Backing::Array(name) => {
                    let Some((_, array, _)) = arrays.iter().find(|(a, _, _)| a == name) else {
                        return Err(ServiceError::Config(format!(
                            "subsystem {}: namespace {} names unknown array {name}",
                            s.nqn, n.nsid
                        )));
                    };
                    serial_key = array.uuid().0.to_vec();
                    (
                        Backend::Array(array.clone()),
                        Some(name.clone()),
                        identity::for_array(array.uuid().0, n.nsid),
                    )
                }
                Backing::File { path, create_size } => {
                    let m = open(path, *create_size)?;
                    let ids =
                        identity::for_file(s.nqn.as_str(), n.nsid, &path.display().to_string());
                    (Backend::File(m), None, ids)
                }
            };
            let block = u64::from(DEFAULT_BLOCK_SIZE);
            let preferred = (backend.preferred_write_bytes() / block).max(1);
            namespaces.push(NamespaceSpec {
                info: NamespaceInfo {
                    nsid: n.nsid,
                    block_size: DEFAULT_BLOCK_SIZE,
                    blocks: backend.capacity_bytes() / block,
                    ids,
                    preferred_write_blocks: preferred.min(u64::from(u16::MAX)) as u32,
                    deallocate: true,
                    active: Default::default(),
                },
                backend,
                array: array_name,
            });
        }
        let hosts = match &s.hosts {
            None => HostAccess::Any,
            Some(set) => HostAccess::Only(set.clone()),
        };
        spec.subsystems.push(SubsystemSpec {
            subsystem: Subsystem {
                nqn: s.nqn.clone(),
                serial: s
                    .serial
                    .clone()
                    .unwrap_or_else(|| identity::serial_for(&serial_key)),
                model: s.model.clone(),
                hosts,
                namespaces: Vec::new(),
            },
            namespaces,
        });
    }
    spec.arrays = arrays;
    Ok(spec)
}

/// The management interface over a running target.
pub struct Api {
    shared: Arc<Shared>,
}

impl Api {
    /// Management of the target whose state is `shared`.
    pub fn new(shared: Arc<Shared>) -> Api {
        Api { shared }
    }

    fn array(&self, name: &str) -> Result<&Arc<ArrayEntry>, String> {
        self.shared
            .arrays
            .iter()
            .find(|a| a.name == name)
            .ok_or_else(|| format!("no array named {name}"))
    }

    /// The Prometheus exposition of everything.
    pub fn metrics(&self) -> String {
        let ns: Vec<(String, &crate::metrics::NamespaceMetrics)> = self
            .shared
            .namespaces
            .iter()
            .map(|n| (format!("{}/{}", n.subnqn, n.info.nsid), &n.metrics))
            .collect();
        render_all(
            &ns,
            &self.shared.data_path,
            &Snapshot::from_status(&self.status()),
        )
    }
}

fn progress(p: &raidline_raid::SyncProgress, stripe_bytes: u64) -> Progress {
    Progress {
        done_bytes: p.done * stripe_bytes,
        total_bytes: p.total * stripe_bytes,
        rate_bytes_per_s: p.bytes_per_sec as u64,
    }
}

impl Management for Api {
    fn status(&self) -> StatusReport {
        let arrays = self
            .shared
            .arrays
            .iter()
            .map(|a| {
                let arr = &a.array;
                let geo = arr.geometry();
                let stripe = geo.stripe_data_blocks() * geo.block_bytes() as u64;
                let states = arr.member_states();
                let names = arr.member_names();
                let rebuild = arr.rebuild_progress().filter(|p| !p.finished);
                let resync = *a.resync.lock().unwrap_or_else(|e| e.into_inner());
                let replacing = arr.replace_status();
                let state = if arr.is_failed() {
                    "failed"
                } else if arr.resync_pending() {
                    // Runs first; a rebuild or replace copy continues after it.
                    "resyncing"
                } else if rebuild.is_some() && replacing.is_some() {
                    "replacing"
                } else if rebuild.is_some() {
                    "rebuilding"
                } else if !arr.degraded_roles().is_empty() {
                    "degraded"
                } else {
                    "clean"
                };
                ArrayStatus {
                    name: a.name.clone(),
                    uuid: arr.uuid().to_string(),
                    state: state.into(),
                    capacity_bytes: geo.capacity_bytes(),
                    chunk_bytes: geo.chunk_bytes() as u32,
                    members: states
                        .iter()
                        .zip(names)
                        .enumerate()
                        .map(|(role, (st, name))| MemberStatus {
                            role: role as u32,
                            path: name.unwrap_or_else(|| "(missing)".into()),
                            state: match (st, &replacing) {
                                (SlotState::Active, Some(r)) if r.role.0 == role => {
                                    format!("active, being replaced by {}", r.new)
                                }
                                (SlotState::Active, _) => "active".into(),
                                (SlotState::Failed, _) => "failed".into(),
                                (SlotState::Rebuilding, _) => "rebuilding".into(),
                            },
                        })
                        .collect(),
                    spares: arr.spare_names(),
                    // A resync runs before a rebuild or replace continues: one progress line.
                    rebuild: resync.or(rebuild).map(|p| progress(&p, stripe)),
                    scrub: a
                        .scrub
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .map(|p| progress(&p, stripe)),
                    parity_engine: arr.parity_engine().name().into(),
                    write_hole_protection: arr.write_hole_protected(),
                }
            })
            .collect();
        let reg = self
            .shared
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let subsystems = reg
            .subsystems()
            .map(|s| SubsystemStatus {
                nqn: s.nqn.to_string(),
                serial: s.serial.clone(),
                model: s.model.clone(),
                allow_any_host: matches!(s.hosts, HostAccess::Any),
                hosts: match &s.hosts {
                    HostAccess::Any => Vec::new(),
                    HostAccess::Only(h) => h.iter().map(|n| n.to_string()).collect(),
                },
                namespaces: self
                    .shared
                    .namespaces
                    .iter()
                    .filter(|n| n.subnqn == s.nqn)
                    .map(|n| NamespaceStatus {
                        nsid: n.info.nsid,
                        backing: match &n.backend {
                            Backend::Array(_) => {
                                format!("array {}", n.array.clone().unwrap_or_default())
                            }
                            Backend::File(m) => format!("file {}", m.name()),
                            Backend::Null(_) => "null".to_string(),
                        },
                        block_size: n.info.block_size,
                        blocks: n.info.blocks,
                        active: n.info.active.get(),
                        read_ops: n.metrics.reads.load(Ordering::Relaxed),
                        write_ops: n.metrics.writes.load(Ordering::Relaxed),
                        read_bytes: n.metrics.bytes_read.load(Ordering::Relaxed),
                        write_bytes: n.metrics.bytes_written.load(Ordering::Relaxed),
                    })
                    .collect(),
            })
            .collect();
        drop(reg);
        let stats = self
            .shared
            .queue_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let ctrls = self
            .shared
            .controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let controllers = ctrls
            .iter()
            .map(|(id, e)| ControllerStatus {
                cntlid: *id,
                subnqn: e.subnqn.clone(),
                hostnqn: e.hostnqn.clone(),
                host_addr: e.host_addr.clone(),
                kato_ms: e.kato_ms,
                queues: e
                    .conns
                    .iter()
                    .map(|(qid, conn, poller)| {
                        let st = stats.get(conn);
                        let load = |f: fn(&QueueStats) -> u32| st.map_or(0, |s| f(s));
                        QueueStatus {
                            qid: *qid,
                            depth: load(|s| s.depth.load(Ordering::Relaxed))
                                .min(u32::from(u16::MAX)) as u16,
                            in_flight: load(|s| s.in_flight.load(Ordering::Relaxed)),
                            poller: *poller as u32,
                            rate_bytes_per_s: st.map_or(f64::NAN, |s| s.rate_bytes_per_s()),
                            rtt_us: st.map_or(f64::NAN, |s| s.rtt_us()),
                        }
                    })
                    .collect(),
            })
            .collect();
        StatusReport {
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.shared.started.elapsed().as_secs(),
            listen: self
                .shared
                .ports
                .iter()
                .map(|p| p.addr.to_string())
                .collect(),
            arrays,
            subsystems,
            controllers,
        }
    }

    fn array_fail(&self, array: &str, member: &str) -> Result<String, String> {
        let a = self.array(array)?;
        let role = a
            .array
            .member_names()
            .iter()
            .position(|n| n.as_deref() == Some(member))
            .ok_or_else(|| format!("{member} is not an active member of {array}"))?;
        a.array
            .set_faulty(raidline_raid::MemberIdx(role))
            .map_err(|e| e.to_string())?;
        tracing::warn!(
            "array {array}: member {member} (role {role}) marked failed by the operator"
        );
        Ok(format!("{member} (role {role}) marked failed"))
    }

    fn array_add_spare(&self, array: &str, path: &str) -> Result<String, String> {
        let a = self.array(array)?;
        let m = open_member(Path::new(path), None).map_err(|e| format!("{path}: {e}"))?;
        a.array.add_spare(m).map_err(|e| e.to_string())?;
        tracing::info!("array {array}: {path} added as a spare");
        Ok(format!("{path} added to {array}"))
    }

    fn array_replace(&self, array: &str, old: &str, new: &str) -> Result<String, String> {
        // Copy before fail (md's `--replace`): NEW is filled while OLD keeps serving its role,
        // so the array stays redundant; OLD is retired only once NEW holds every stripe.
        let a = self.array(array)?;
        let role = a.array.role_of(old).ok_or_else(|| {
            let names: Vec<String> = a.array.member_names().into_iter().flatten().collect();
            format!(
                "{old} is not a member of {array} (members: {})",
                names.join(", ")
            )
        })?;
        let m = open_member(Path::new(new), None).map_err(|e| format!("{new}: {e}"))?;
        a.array.replace(role, m).map_err(|e| e.to_string())?;
        tracing::info!(
            "array {array}: replacing {old} (role {}) with {new}; {old} keeps serving until the copy ends",
            role.0
        );
        Ok(format!(
            "copying {old} (role {}) onto {new}; {old} is retired when the copy ends (progress: raidline status)",
            role.0
        ))
    }

    fn cc_set(&self, param: &str, value: f64) -> Result<String, String> {
        let m = self.shared.cc.set(param, value)?;
        tracing::info!("congestion control changed by the operator: {m}");
        Ok(m)
    }

    fn cc_show(&self) -> Result<String, String> {
        Ok(self.shared.cc.show())
    }

    fn ns_set_active(&self, subsystem: &str, nsid: u32, active: bool) -> Result<String, String> {
        self.shared.set_namespace_active(subsystem, nsid, active)
    }

    fn array_scrub(&self, array: &str) -> Result<String, String> {
        let a = self.array(array)?;
        a.scrub_requested.store(true, Ordering::Release);
        Ok(format!("scrub of {array} requested"))
    }
}

/// Runs the daemon until SIGTERM/SIGINT: returns the process exit code.
#[cfg(feature = "verbs")]
pub fn run(config: Config, config_path: &Path) -> i32 {
    use crate::daemon::Target;
    use crate::systemd::Notifier;
    use std::time::Duration;

    let notifier = Notifier::from_env().ok();
    let status = |s: &str| {
        if let Some(n) = &notifier {
            let _ = n.status(s);
        }
    };
    tracing::info!(
        "raidline {} starting with {}",
        env!("CARGO_PKG_VERSION"),
        config_path.display()
    );
    let term = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, term.clone()) {
            tracing::error!("cannot install the signal handler: {e}");
            return 1;
        }
    }
    // A second daemon must not touch the arrays the first one is serving.
    if std::os::unix::net::UnixStream::connect(&config.management_socket).is_ok() {
        tracing::error!(
            "another raidline is running (it answers on {}); not starting",
            config.management_socket.display()
        );
        return 1;
    }
    status("assembling arrays");
    let spec = match build_spec(&config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let fabric = match raidline_fabric::verbs::VerbsFabric::open(config.rdma_device.as_deref()) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("no RDMA device: {e} (is rdma_rxe loaded and an rxe link added? see deploy/rxe-setup.sh)");
            return 1;
        }
    };
    let target = match Target::start(fabric, spec) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let api = Arc::new(Api::new(target.shared().clone()));
    let _mgmt = match crate::mgmt::MgmtServer::start(&config.management_socket, api.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!("management socket: {e}");
            return 1;
        }
    };
    let _metrics = match config.metrics {
        Some(addr) => {
            let a = api.clone();
            match crate::http::MetricsServer::start(addr, Arc::new(move || a.metrics())) {
                Ok(m) => {
                    tracing::info!("metrics on http://{}/metrics", m.local_addr());
                    Some(m)
                }
                Err(e) => {
                    tracing::error!("metrics endpoint {addr}: {e}");
                    return 1;
                }
            }
        }
        None => None,
    };
    let listening: Vec<String> = target.local_addrs().iter().map(|a| a.to_string()).collect();
    if let Some(n) = &notifier {
        let _ = n.ready(&format!("serving on {}", listening.join(", ")));
    }
    tracing::info!("ready: serving on {}", listening.join(", "));
    let tick = notifier
        .as_ref()
        .and_then(|n| n.watchdog_interval())
        .map_or(Duration::from_millis(200), |w| {
            (w / 2).min(Duration::from_millis(200))
        });
    while !term.load(Ordering::Acquire) {
        std::thread::sleep(tick);
        if let Some(n) = &notifier {
            let _ = n.watchdog();
        }
    }
    tracing::info!("stopping: draining in-flight I/O");
    if let Some(n) = &notifier {
        let _ = n.stopping("draining in-flight I/O");
    }
    let errors = target.shutdown();
    if errors.is_empty() {
        tracing::info!("stopped cleanly");
        0
    } else {
        for e in &errors {
            tracing::error!("{e}");
        }
        1
    }
}
