//! The daemon as a service: configuration → arrays and namespaces → a running [`Target`], with
//! the management socket, the metrics endpoint, systemd notification and signal handling.
//!
//! Array bring-up: the members of each configured array are assembled from their superblocks
//! (any order; the array's UUID and layout are on the media). Only when *no* member carries a
//! superblock — brand-new drives — is a new array created, and that is logged loudly. A
//! member set that has superblocks but does not assemble is never overwritten by guesswork:
//! the array is refused with the engine's reason and the daemon serves everything else (the
//! refused array's namespaces stay inactive) until the operator's `raidline array start`
//! assembles it ([`Api`]'s `array_start`; `--accept-dirty-degraded` to start over an unclean
//! degraded stop that no log covers).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use raidline_raid::superblock::{SlotState, Superblock};
use raidline_raid::{
    Array, ArrayConfig as RaidArrayConfig, AssembleOptions, ChunkSize, Exposure, Member,
    ParityEngine, WriteHolePolicy,
};

use crate::config::{ArrayConfig, Backing, Config, ParityChoice};
use crate::daemon::pacing::PACING_OFF;
use crate::daemon::{
    open_member, ArrayEntry, ArraySlot, Backend, CcSpec, NamespaceSpec, QueueStats, Refusal,
    RefusedArray, Shared, StoredArray, SubsystemSpec, TargetSpec,
};
use crate::identity;
use crate::metrics::{render_all, Snapshot};
use crate::mgmt::{
    ArrayStatus, ByteRange, ControllerStatus, ExposureStatus, Management, MemberStatus,
    NamespaceStatus, Progress, QueueStatus, StatusReport, SubsystemStatus,
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
    Superblock(Box<Superblock>),
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
        Ok(sb) => Probe::Superblock(Box::new(sb)),
        Err(raidline_raid::SuperblockError::NoMagic) => Probe::Blank,
        Err(e) => Probe::Damaged(e.to_string()),
    }
}

/// What makes two configured paths the same device: a block device's number (any node or
/// `/dev/disk/by-*` link to it), or a file's filesystem and inode (symlinks and hard links).
/// `None` for a path that does not exist (a missing member is assembly's business).
fn device_identity(path: &Path) -> Option<(bool, u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = std::fs::metadata(path).ok()?;
    Some(if md.file_type().is_block_device() {
        (true, md.rdev(), 0)
    } else {
        (false, md.dev(), md.ino())
    })
}

/// Refuses a device configured twice, by device number and inode, not by path: as two
/// members or spares of one array or of two, or as an array member and a file namespace.
/// Paths that do not exist are skipped. `raidline check-config` and the daemon's start run
/// it.
pub fn check_devices(config: &Config) -> Result<(), ServiceError> {
    let mut seen: Vec<((bool, u64, u64), String)> = Vec::new();
    let arrays = config.arrays.iter().flat_map(|a| {
        a.members
            .iter()
            .chain(&a.spares)
            .map(move |p| (p, format!("a device of array {}", a.name)))
    });
    let files = config.subsystems.iter().flat_map(|s| {
        s.namespaces.iter().filter_map(move |n| match &n.backing {
            Backing::File { path, .. } => {
                Some((path, format!("namespace {} of {}", n.nsid, s.nqn)))
            }
            Backing::Array(_) => None,
        })
    });
    for (path, role) in arrays.chain(files) {
        let Some(id) = device_identity(path) else {
            continue;
        };
        if let Some((_, other)) = seen.iter().find(|(i, _)| *i == id) {
            return Err(ServiceError::Config(format!(
                "{} ({role}) is the same device as {other}: each device may be used once",
                path.display()
            )));
        }
        seen.push((id, format!("{} ({role})", path.display())));
    }
    Ok(())
}

/// Before a new array is created over `devices` (configured path, opened member): refuses
/// when any of them holds foreign data ([`crate::foreign`]) that the array's `overwrite` does
/// not name, naming each device and what it holds. Nothing has been written to any of them.
fn refuse_foreign<'m>(
    a: &ArrayConfig,
    devices: impl Iterator<Item = (&'m PathBuf, &'m Arc<dyn Member>)>,
) -> Result<(), raidline_raid::RaidError> {
    let mut refused = Vec::new();
    for (path, m) in devices {
        let found = match crate::foreign::scan(&**m) {
            Ok(f) => f,
            Err(e) => {
                refused.push(format!(
                    "{}: cannot be read to look for existing data ({e})",
                    path.display()
                ));
                continue;
            }
        };
        if found.is_empty() {
            continue;
        }
        let what: Vec<String> = found.iter().map(ToString::to_string).collect();
        if a.overwrite.contains(path) {
            tracing::warn!(
                "array {}: {} holds {}; overwriting it, as `overwrite` says",
                a.name,
                path.display(),
                what.join(", ")
            );
        } else {
            refused.push(format!("{} holds {}", path.display(), what.join(", ")));
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(raidline_raid::RaidError::Assemble {
        reason: format!(
            "not creating a new array over data that is not Raidline's: {}; nothing was written. \
             If these devices are meant for array {}, add them to its `overwrite = [...]` in the \
             configuration and restart",
            refused.join("; "),
            a.name
        ),
        refused: Vec::new(),
    })
}

/// Assembles (or, on blank members, creates) one configured array. `remembered` are further
/// candidates (the daemon's record of the array's current members, [`crate::remember`]): they
/// are offered to assembly beside the configured members and spares, skipped with a warning
/// when they cannot be opened, and a superblock on any of them forbids creating a new array.
pub fn bring_up_array(a: &ArrayConfig, remembered: &[PathBuf]) -> Result<Arc<Array>, ServiceError> {
    bring_up_array_with(a, remembered, &AssembleOptions::default())
}

/// [`bring_up_array`] with assembly options: `expect` assembles only that array (and never
/// creates one: `raidline array start` of a refused array), `start_dirty_degraded` starts it
/// even over an unclean stop with a member missing that no log covers (logged as a warning
/// naming the ranges that may read back wrong). After assembly the configured write-hole
/// policy replaces the recorded one (logged when it changes).
pub fn bring_up_array_with(
    a: &ArrayConfig,
    remembered: &[PathBuf],
    options: &AssembleOptions,
) -> Result<Arc<Array>, ServiceError> {
    let err = |source| ServiceError::Array {
        array: a.name.clone(),
        source,
    };
    // A configured device that cannot be opened (its node is gone, the drive is dead) is a
    // missing member, not a reason to stop the daemon: assembly decides whether the array
    // can run without it. It forbids creating a new array (that needs every member).
    let mut absent: Vec<String> = Vec::new();
    let mut open_or_absent = |paths: &[PathBuf]| -> Vec<Arc<dyn Member>> {
        paths
            .iter()
            .filter_map(|p| match open(p, None) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::error!(
                        "array {}: cannot open {e}; assembling without it (a missing member)",
                        a.name
                    );
                    // The error names the path (and, for a busy device, what holds it).
                    absent.push(e.to_string());
                    None
                }
            })
            .collect()
    };
    let members = open_or_absent(&a.members);
    let spares = open_or_absent(&a.spares);
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
            // Never mistaken for a blank device; assembly reads it again and refuses it
            // with the reason if it still cannot.
            tracing::error!(
                "array {}: cannot read the superblock area of {name}: {e}; it cannot help \
                 create an array",
                a.name
            );
            absent.push(format!("{name}: {e}"));
        }
        if let Probe::Damaged(e) = p {
            tracing::warn!("array {}: {name}: damaged superblock ({e})", a.name);
        }
    }
    let blank = probes
        .iter()
        .all(|(_, p)| matches!(p, Probe::Blank | Probe::Unreadable(_)));
    if blank && !absent.is_empty() {
        return Err(err(raidline_raid::RaidError::Assemble {
            reason: format!(
                "no readable member carries a superblock, and not every configured device can be \
                 used ({}): a new array is created only over every configured device",
                absent.join("; ")
            ),
            refused: Vec::new(),
        }));
    }
    if blank {
        if options.expect.is_some() {
            return Err(err(raidline_raid::RaidError::Assemble {
                reason: "no member carries a superblock any more; a new array is created only \
                         when the daemon starts"
                    .into(),
                refused: Vec::new(),
            }));
        }
        // Every configured device opened (`absent` is empty): configured and opened in order.
        let paths = a.members.iter().chain(&a.spares);
        refuse_foreign(a, paths.zip(members.iter().chain(&spares))).map_err(err)?;
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
            write_hole: a.write_hole,
            ..RaidArrayConfig::default()
        };
        let array = Array::create(members, spares, &cfg, parity).map_err(err)?;
        return Ok(Arc::new(array));
    }
    let candidates: Vec<Arc<dyn Member>> = members.into_iter().chain(spares).chain(extra).collect();
    let asm = Array::assemble_with(candidates, options, parity).map_err(err)?;
    for r in &asm.refused {
        tracing::warn!("array {}: member not taken: {r}", a.name);
    }
    if asm.replayed > 0 {
        tracing::info!(
            "array {}: {} partial-parity log entries replayed after an unclean stop",
            a.name,
            asm.replayed
        );
    }
    if asm.unrestorable_rows > 0 {
        tracing::warn!(
            "array {}: {} row(s) of the missing member that an interrupted write was changing \
             may read back as neither the old nor the new data",
            a.name,
            asm.unrestorable_rows
        );
    }
    if let Some(e) = &asm.exposure {
        warn_exposure(&a.name, &asm.array, e);
    }
    if asm.resync_pending {
        tracing::warn!(
            "array {}: was not stopped cleanly; resyncing the regions written at the time",
            a.name
        );
    }
    let array = asm.array;
    let recorded = array.write_hole_policy();
    if recorded != a.write_hole {
        match array.set_write_hole_policy(a.write_hole) {
            Ok(()) => tracing::info!(
                "array {}: write-hole policy {} (the superblocks said {}; the configuration wins)",
                a.name,
                a.write_hole.as_str(),
                recorded.as_str()
            ),
            Err(e) => tracing::warn!(
                "array {}: cannot change the write-hole policy to {}: {e}; it stays {}",
                a.name,
                a.write_hole.as_str(),
                recorded.as_str()
            ),
        }
    }
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

/// The exposure of an array started over an uncovered unclean stop, for the status report:
/// block ranges as byte ranges of the array.
pub fn exposure_status(e: &Exposure, block_bytes: u64) -> ExposureStatus {
    ExposureStatus {
        reason: e.reason.clone(),
        missing: e.missing.iter().map(|&r| r as u32).collect(),
        ranges: e
            .blocks
            .iter()
            .map(|r| ByteRange {
                start: r.start.saturating_mul(block_bytes),
                end: r.end.saturating_mul(block_bytes),
            })
            .collect(),
    }
}

/// Logs, as a warning, that array `name` started over an uncovered unclean stop and where its
/// data may be wrong (every range: the operator needs the whole list once).
fn warn_exposure(name: &str, array: &Array, e: &Exposure) {
    let st = exposure_status(e, array.geometry().block_bytes() as u64);
    let ranges = crate::mgmt::exposed_ranges_text(&st.ranges, usize::MAX);
    tracing::warn!(
        "array {name}: STARTED OVER AN UNCLEAN STOP THAT NO LOG COVERS ({}), role(s) {:?} \
         missing: the missing member's data in {} range(s) may read back wrong until a rebuild \
         rewrites them (everything else is intact): {}",
        e.reason,
        e.missing,
        ranges.len(),
        ranges.join("; ")
    );
}

/// What the superblocks on `a`'s candidate devices say about the array most of them belong to
/// (its newest superblock), for an array that did not assemble; `None` when no candidate has
/// a readable superblock.
pub fn stored_array(a: &ArrayConfig, remembered: &[PathBuf]) -> Option<StoredArray> {
    let mut found: Vec<(String, Superblock)> = Vec::new();
    for p in a.members.iter().chain(&a.spares).chain(remembered) {
        if found.iter().any(|(n, _)| Path::new(n) == p) {
            continue;
        }
        let Ok(m) = open_member(p, None) else {
            continue;
        };
        if let Probe::Superblock(sb) = probe(&*m) {
            found.push((p.display().to_string(), *sb));
        }
    }
    let mut counts: Vec<(raidline_raid::Uuid, usize)> = Vec::new();
    for (_, sb) in &found {
        match counts.iter_mut().find(|(u, _)| *u == sb.array_uuid) {
            Some((_, c)) => *c += 1,
            None => counts.push((sb.array_uuid, 1)),
        }
    }
    let uuid = counts.iter().max_by_key(|(_, c)| *c)?.0;
    let mine: Vec<&(String, Superblock)> = found
        .iter()
        .filter(|(_, sb)| sb.array_uuid == uuid)
        .collect();
    let newest = &mine.iter().max_by_key(|(_, sb)| sb.events)?.1;
    let geometry = raidline_raid::Geometry::new(
        newest.members,
        newest.chunk,
        newest.block,
        newest.member_data_bytes,
    )
    .ok()?;
    let roles = (0..newest.members)
        .map(|r| {
            let holder = newest.role_uuids.get(r).and_then(|u| {
                mine.iter()
                    .find(|(_, sb)| sb.member_uuid == *u)
                    .map(|(n, _)| n.clone())
            });
            let state = newest
                .role_states
                .get(r)
                .copied()
                .unwrap_or(SlotState::Failed);
            (holder, state)
        })
        .collect();
    Some(StoredArray {
        uuid,
        geometry,
        roles,
        write_hole_policy: if newest.ppl_always {
            WriteHolePolicy::Always
        } else {
            WriteHolePolicy::Degraded
        },
        write_hole_protection: !newest.ppl_off,
    })
}

/// Builds the target specification from a configuration: brings up the arrays, opens the
/// file namespaces, derives stable identifiers.
///
/// An array the RAID engine refuses to assemble ([`ServiceError::Array`]) does not fail the
/// whole: it goes to [`TargetSpec::refused`] with the reason, and its namespaces are served
/// inactive (identifiers and size from its superblocks) until `raidline array start`; a
/// namespace of a refused array whose superblocks are all unreadable is left out (logged).
/// Every other error (a member that cannot be opened, an unreadable superblock area, a
/// namespace naming an unknown array) still fails.
pub fn build_spec(config: &Config) -> Result<TargetSpec, ServiceError> {
    check_devices(config)?;
    let mut spec = TargetSpec::new(config.limits);
    spec.listen = config.listen.clone();
    spec.pollers = config.cores.max(1) as usize;
    spec.poll_mode = config.poll_mode;
    spec.state_dir = Some(config.state_dir.clone());
    spec.workers_per_namespace = config.storage_workers as usize;
    spec.io_path = config.io_path;
    spec.io_poll = config.io_poll;
    spec.iscsi = config.iscsi.clone();
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
    let mut refused: Vec<RefusedArray> = Vec::new();
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
        let rate = u64::from(a.rebuild_mb_s) << 20;
        match bring_up_array(a, &remembered) {
            Ok(array) => arrays.push((a.name.clone(), array, rate)),
            Err(ServiceError::Array { source, .. }) => {
                let reason = source.to_string();
                tracing::error!(
                    "array {}: not started: {reason}; the daemon serves everything else",
                    a.name
                );
                let stored = stored_array(a, &remembered);
                refused.push(RefusedArray {
                    name: a.name.clone(),
                    slot: Arc::new(ArraySlot::waiting(stored.as_ref().map(|s| s.geometry))),
                    refusal: Refusal { reason, stored },
                    config: a.clone(),
                    rebuild_bytes_per_sec: rate,
                });
            }
            Err(e) => return Err(e),
        }
    }
    for s in &config.subsystems {
        let mut namespaces = Vec::new();
        let mut serial_key = s.nqn.to_string().into_bytes();
        for n in &s.namespaces {
            let (backend, array_name, ids) = match &n.backing {
                Backing::Array(name) => {
                    if let Some((_, array, _)) = arrays.iter().find(|(a, _, _)| a == name) {
                        serial_key = array.uuid().0.to_vec();
                        (
                            Backend::Array(array.clone()),
                            Some(name.clone()),
                            identity::for_array(array.uuid().0, n.nsid),
                        )
                    } else if let Some(r) = refused.iter().find(|r| &r.name == name) {
                        let Some(stored) = &r.refusal.stored else {
                            tracing::error!(
                                "subsystem {}: namespace {} left out: its array {name} did not \
                                 start and no member has a readable superblock to give its \
                                 identifiers and size (restart the daemon once it assembles)",
                                s.nqn,
                                n.nsid
                            );
                            continue;
                        };
                        serial_key = stored.uuid.0.to_vec();
                        (
                            Backend::Pending(r.slot.clone()),
                            Some(name.clone()),
                            identity::for_array(stored.uuid.0, n.nsid),
                        )
                    } else {
                        return Err(ServiceError::Config(format!(
                            "subsystem {}: namespace {} names unknown array {name}",
                            s.nqn, n.nsid
                        )));
                    }
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
            // A namespace of an array that is not running is inactive until it runs.
            let active = crate::subsystem::NsActive::default();
            if matches!(backend, Backend::Pending(_)) {
                active.set(false);
            }
            namespaces.push(NamespaceSpec {
                info: NamespaceInfo {
                    nsid: n.nsid,
                    block_size: DEFAULT_BLOCK_SIZE,
                    blocks: backend.capacity_bytes() / block,
                    ids,
                    preferred_write_blocks: preferred.min(u64::from(u16::MAX)) as u32,
                    deallocate: true,
                    active,
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
                auth: s.auth.clone(),
                namespaces: Vec::new(),
            },
            namespaces,
        });
    }
    spec.arrays = arrays;
    spec.refused = refused;
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

    /// The running array `name`; a refused one is refused with its reason.
    fn running(&self, name: &str) -> Result<&Arc<Array>, String> {
        let a = self.array(name)?;
        a.array().ok_or_else(|| {
            let why = a.refusal().map(|r| r.reason).unwrap_or_default();
            format!(
                "array {name} is not running (refused at start: {why}); see raidline status, \
                 and start it with raidline array start {name}"
            )
        })
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
                let Some(arr) = a.array() else {
                    return refused_status(a);
                };
                let geo = arr.geometry();
                let stripe = geo.stripe_data_blocks() * geo.block_bytes() as u64;
                let states = arr.member_states();
                let names = arr.member_names();
                let gone = arr.gone_members();
                // A role lost at assembly has no device this process opened: the configured
                // or remembered path no member of the array holds, when there is one.
                let unplaced: Vec<String> = a
                    .config
                    .as_ref()
                    .map(|c| {
                        let held: Vec<String> = names
                            .iter()
                            .flatten()
                            .cloned()
                            .chain(arr.spare_names())
                            .collect();
                        c.members
                            .iter()
                            .map(|p| p.display().to_string())
                            .filter(|p| !held.contains(p))
                            .collect()
                    })
                    .unwrap_or_default();
                let lost_at_start = gone.iter().flatten().filter(|g| g.device.is_none()).count();
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
                        .zip(&gone)
                        .enumerate()
                        .map(|(role, ((st, name), gone))| MemberStatus {
                            role: role as u32,
                            path: name
                                .or_else(|| gone.as_ref().and_then(|g| g.device.clone()))
                                .or_else(|| {
                                    (lost_at_start == 1 && unplaced.len() == 1)
                                        .then(|| unplaced[0].clone())
                                })
                                .unwrap_or_else(|| "(missing)".into()),
                            reason: gone.as_ref().map(|g| g.reason.to_string()),
                            reason_class: gone.as_ref().map(|g| g.reason.class().to_string()),
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
                    write_hole_policy: arr.write_hole_policy().as_str().into(),
                    refused: None,
                    exposure: arr
                        .exposure()
                        .map(|e| exposure_status(&e, geo.block_bytes() as u64)),
                    stripe_writes: {
                        let s = arr.stats();
                        Some(crate::mgmt::StripeWrites {
                            full: s.full_stripe,
                            rmw: s.rmw,
                            rcw: s.rcw,
                        })
                    },
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
                auth_hosts: s
                    .auth
                    .iter()
                    .map(|(h, p)| {
                        let hashes: Vec<&str> = p.hashes.iter().map(|x| x.name()).collect();
                        let groups: Vec<&str> = p.groups.iter().map(|x| x.name()).collect();
                        format!(
                            "{h} ({}; {}{})",
                            hashes.join(", "),
                            groups.join(", "),
                            if p.ctrl_secret.is_some() {
                                "; bidirectional possible"
                            } else {
                                ""
                            }
                        )
                    })
                    .collect(),
                namespaces: self
                    .shared
                    .namespaces
                    .iter()
                    .filter(|n| n.subnqn == s.nqn)
                    .map(|n| NamespaceStatus {
                        nsid: n.info.nsid,
                        backing: match &n.backend {
                            Backend::Array(_) | Backend::Pending(_) => {
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
                auth: e.auth.clone(),
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
                            bytes: st.map_or(0, |s| s.bytes.load(Ordering::Relaxed)),
                            poller: *poller as u32,
                            rate_bytes_per_s: st.map_or(f64::NAN, |s| s.rate_bytes_per_s()),
                            rtt_us: st.map_or(f64::NAN, |s| s.rtt_us()),
                            raw_rtt_us: st.map_or(f64::NAN, |s| s.raw_rtt_us()),
                            net_rtt_us: st.map_or(f64::NAN, |s| s.net_rtt_us()),
                            base_rtt_us: st.map_or(f64::NAN, |s| s.base_rtt_us()),
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
            iscsi_sessions: self
                .shared
                .iscsi_sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .cloned()
                .collect(),
        }
    }

    fn array_fail(&self, array: &str, member: &str) -> Result<String, String> {
        let a = self.running(array)?;
        let role = a
            .member_names()
            .iter()
            .position(|n| n.as_deref() == Some(member))
            .ok_or_else(|| format!("{member} is not an active member of {array}"))?;
        a.set_faulty(raidline_raid::MemberIdx(role))
            .map_err(|e| e.to_string())?;
        tracing::warn!(
            "array {array}: member {member} (role {role}) marked failed by the operator"
        );
        Ok(format!("{member} (role {role}) marked failed"))
    }

    fn array_add_spare(&self, array: &str, path: &str) -> Result<String, String> {
        let a = self.running(array)?;
        let m = open_member(Path::new(path), None).map_err(|e| format!("{path}: {e}"))?;
        a.add_spare(m).map_err(|e| e.to_string())?;
        tracing::info!("array {array}: {path} added as a spare");
        Ok(format!("{path} added to {array}"))
    }

    fn array_replace(&self, array: &str, old: &str, new: &str) -> Result<String, String> {
        // Copy before fail (md's `--replace`): NEW is filled while OLD keeps serving its role,
        // so the array stays redundant; OLD is retired only once NEW holds every stripe.
        let a = self.running(array)?;
        let role = a.role_of(old).ok_or_else(|| {
            let names: Vec<String> = a.member_names().into_iter().flatten().collect();
            format!(
                "{old} is not a member of {array} (members: {})",
                names.join(", ")
            )
        })?;
        let m = open_member(Path::new(new), None).map_err(|e| format!("{new}: {e}"))?;
        a.replace(role, m).map_err(|e| e.to_string())?;
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

    /// The algorithm and its parameters, then each paced queue pair's rate and RTTs.
    fn cc_show(&self) -> Result<String, String> {
        let mut s = self.shared.cc.show();
        if self.shared.cc.current().is_some() {
            s.push('\n');
            s.push_str(&crate::mgmt::paced_queues(&self.status()));
        }
        Ok(s)
    }

    fn ns_set_active(&self, subsystem: &str, nsid: u32, active: bool) -> Result<String, String> {
        self.shared.set_namespace_active(subsystem, nsid, active)
    }

    fn array_scrub(&self, array: &str) -> Result<String, String> {
        self.running(array)?;
        let a = self.array(array)?;
        a.scrub_requested.store(true, Ordering::Release);
        Ok(format!("scrub of {array} requested"))
    }

    fn array_start(&self, name: &str, accept_dirty_degraded: bool) -> Result<String, String> {
        let a = self.array(name)?;
        let _one_at_a_time = a.starting.lock().unwrap_or_else(|p| p.into_inner());
        if a.array().is_some() {
            let state = self
                .status()
                .arrays
                .into_iter()
                .find(|s| s.name == name)
                .map_or_else(String::new, |s| s.state);
            return Err(format!(
                "array {name} is already running ({state}); there is nothing to start"
            ));
        }
        let Some(config) = &a.config else {
            return Err(format!(
                "array {name} has no configuration to assemble it from"
            ));
        };
        let remembered = match &a.state_file {
            Some(f) => crate::remember::load(f).unwrap_or_else(|e| {
                tracing::warn!(
                    "array {name}: cannot read {}: {e}; assembling from the configured paths only",
                    f.display()
                );
                Vec::new()
            }),
            None => Vec::new(),
        };
        let before = a.refusal();
        let options = AssembleOptions {
            // The array the namespaces were sized and named from, never another one.
            expect: before
                .as_ref()
                .and_then(|r| r.stored.as_ref())
                .map(|s| s.uuid),
            start_dirty_degraded: accept_dirty_degraded,
        };
        tracing::info!(
            "array {name}: start requested by the operator{}",
            if accept_dirty_degraded {
                ", accepting an unclean degraded stop that no log covers"
            } else {
                ""
            }
        );
        let array = match bring_up_array_with(config, &remembered, &options) {
            Ok(array) => array,
            Err(e) => {
                let reason = match e {
                    ServiceError::Array { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                tracing::warn!("array {name}: still not started: {reason}");
                let mut r = a.refused.lock().unwrap_or_else(|p| p.into_inner());
                let stored = r.as_ref().and_then(|r| r.stored.clone());
                *r = Some(Refusal {
                    reason: reason.clone(),
                    stored,
                });
                return Err(format!("array {name} did not start: {reason}"));
            }
        };
        let exposure = array.exposure();
        let missing = array.degraded_roles();
        let lines = self
            .shared
            .attach_array(a, array)
            .map_err(|(why, _array)| {
                tracing::error!("{why}");
                why
            })?;
        tracing::info!("array {name}: started by the operator; served from now on");
        let mut msg = format!("array {name} started");
        if !missing.is_empty() {
            msg.push_str(&format!(", degraded (role(s) {missing:?} missing)"));
        }
        if let Some(e) = exposure {
            msg.push_str(&format!(
                "; WRITE HOLE EXPOSED ({}): the missing member's data in {} range(s) may read \
                 back wrong until a rebuild rewrites them (raidline status lists them)",
                e.reason,
                e.blocks.len()
            ));
        }
        if lines.is_empty() {
            // Its namespaces were left out at start-up (no superblock gave their identifiers).
            msg.push_str("; no namespace serves it until the daemon restarts");
        }
        for l in lines {
            msg.push_str("; ");
            msg.push_str(&l);
        }
        Ok(msg)
    }
}

/// The status of an array that is not running: what the refusal and its superblocks say.
fn refused_status(a: &ArrayEntry) -> ArrayStatus {
    let refusal = a.refusal();
    let stored = refusal.as_ref().and_then(|r| r.stored.as_ref());
    let policy = stored
        .map(|s| s.write_hole_policy)
        .or(a.config.as_ref().map(|c| c.write_hole))
        .unwrap_or_default();
    ArrayStatus {
        name: a.name.clone(),
        uuid: stored.map_or_else(String::new, |s| s.uuid.to_string()),
        state: "refused".into(),
        capacity_bytes: stored.map_or(0, |s| s.geometry.capacity_bytes()),
        chunk_bytes: stored.map_or_else(
            || a.config.as_ref().map_or(0, |c| c.chunk_bytes),
            |s| s.geometry.chunk_bytes() as u32,
        ),
        members: stored
            .map(|s| {
                s.roles
                    .iter()
                    .enumerate()
                    .map(|(role, (path, st))| MemberStatus {
                        role: role as u32,
                        path: path.clone().unwrap_or_else(|| "(missing)".into()),
                        reason: None,
                        reason_class: None,
                        state: match (path, st) {
                            (None, _) => "missing".into(),
                            (Some(_), SlotState::Active) => "active".into(),
                            (Some(_), SlotState::Failed) => "failed".into(),
                            (Some(_), SlotState::Rebuilding) => "rebuilding".into(),
                        },
                    })
                    .collect()
            })
            .unwrap_or_default(),
        spares: Vec::new(),
        rebuild: None,
        scrub: None,
        parity_engine: String::new(),
        write_hole_protection: stored.is_some_and(|s| s.write_hole_protection),
        write_hole_policy: policy.as_str().into(),
        refused: Some(
            refusal
                .map(|r| r.reason)
                .unwrap_or_else(|| "not running".into()),
        ),
        exposure: None,
        stripe_writes: None,
    }
}

/// Each listen address must be one of this host's (or the wildcard): binding a UDP socket to
/// it (any port) is refused otherwise. Checked before anything is written to a device.
pub fn check_listen(listen: &[std::net::SocketAddr]) -> Result<(), ServiceError> {
    for a in listen {
        if let Err(e) = std::net::UdpSocket::bind((a.ip(), 0)) {
            return Err(ServiceError::Config(format!(
                "listen address {a}: {} is not an address of this host ({e})",
                a.ip()
            )));
        }
    }
    Ok(())
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
    // Nothing is written to any device (a new array's superblocks) before the daemon knows it
    // can serve: the RDMA device first, then the listen addresses.
    let fabric = match raidline_fabric::verbs::VerbsFabric::open(config.rdma_device.as_deref()) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("no RDMA device: {e} (is rdma_rxe loaded and an rxe link added? see deploy/rxe-setup)");
            return 1;
        }
    };
    if let Err(e) = check_listen(&config.listen) {
        tracing::error!("{e}");
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
    // An array that did not assemble does not keep the daemon from serving the rest: it is
    // ready, and says which arrays wait for `raidline array start`.
    let refused: Vec<String> = target
        .shared()
        .arrays
        .iter()
        .filter(|a| a.array().is_none())
        .map(|a| a.name.clone())
        .collect();
    let mut serving = format!("serving on {}", listening.join(", "));
    if !refused.is_empty() {
        serving.push_str(&format!(
            "; array(s) {} NOT STARTED (raidline status)",
            refused.join(", ")
        ));
    }
    if let Some(n) = &notifier {
        let _ = n.ready(&serving);
    }
    tracing::info!("ready: {serving}");
    let tick = notifier
        .as_ref()
        .and_then(|n| n.watchdog_interval())
        .map_or(Duration::from_millis(200), |w| {
            (w / 2).min(Duration::from_millis(200))
        });
    // `systemctl status` shows the long jobs (rebuild, replace copy, resync, scrub) with
    // their percentage, rate and time left beside what is served, updated every 2 s.
    let mut shown = serving.clone();
    let mut last_look = std::time::Instant::now();
    while !term.load(Ordering::Acquire) {
        std::thread::sleep(tick);
        if let Some(n) = &notifier {
            let _ = n.watchdog();
            if last_look.elapsed() >= Duration::from_secs(2) {
                last_look = std::time::Instant::now();
                let jobs = crate::mgmt::jobs_line(&api.status());
                let line = if jobs.is_empty() {
                    serving.clone()
                } else {
                    format!("{serving}; {jobs}")
                };
                if line != shown {
                    let _ = n.status(&line);
                    shown = line;
                }
            }
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
