//! What the daemon serves over iSER (issue 18): the iSCSI targets, their LUNs as the namespaces'
//! logical units, and each connection's state on its poller.
//!
//! The iSCSI protocol itself is [`crate::iser::IserConn`] (sans-IO); the poller moves its
//! bytes (`poller/iser.rs`). A LUN is a namespace of a configured subsystem: the same storage,
//! the same poller data path and metrics as NVMe-oF.

use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::Arc;

use raidline_scsi::iscsi::negotiate::{InitiatorAcl, LoginConfig, Portal, TargetConfig};
use raidline_scsi::sbc::LogicalUnit;

use super::NsEntry;
use crate::config::IscsiConfig;
use crate::iser::{IserConn, Units};
use crate::subsystem::Subsystem;

/// The relative target port identifier every LUN reports (one portal group).
const RELATIVE_PORT: u16 = 1;

/// One LUN of a target.
#[derive(Clone, Debug)]
pub(crate) struct ServedLun {
    pub lun: u16,
    /// Index in [`super::Shared::namespaces`].
    pub ns: usize,
    pub unit: LogicalUnit,
}

/// One iSCSI target.
#[derive(Clone, Debug)]
pub(crate) struct ServedTarget {
    pub name: String,
    pub luns: Vec<ServedLun>,
}

/// Everything served over iSER.
#[derive(Debug)]
pub(crate) struct IscsiServed {
    /// The login configuration (portals are filled in per connection).
    pub config: LoginConfig,
    /// Each connection's keep-alive times.
    keepalive: crate::iser::Keepalive,
    /// The bound listen addresses.
    pub listen: Vec<SocketAddr>,
    pub targets: Vec<ServedTarget>,
}

impl IscsiServed {
    /// The targets of `config` over `namespaces`; `subsystems` give each LUN's product name.
    pub(crate) fn new(
        config: &IscsiConfig,
        listen: Vec<SocketAddr>,
        namespaces: &[Arc<NsEntry>],
        subsystems: &[Subsystem],
        max_transfer: u32,
    ) -> Result<IscsiServed, String> {
        let mut targets = Vec::new();
        let mut login = Vec::new();
        for t in &config.targets {
            let mut luns = Vec::new();
            for l in &t.luns {
                let ns = namespaces
                    .iter()
                    .position(|n| n.subnqn == l.subsystem && n.info.nsid == l.nsid)
                    .ok_or_else(|| {
                        format!(
                            "iSCSI target {} LUN {}: namespace {} of {} is not served",
                            t.name, l.lun, l.nsid, l.subsystem
                        )
                    })?;
                let sub = subsystems
                    .iter()
                    .find(|s| s.nqn == l.subsystem)
                    .ok_or_else(|| format!("no subsystem {}", l.subsystem))?;
                let port = format!("{},t,0x{:04x}", t.name, 1);
                let unit = crate::scsi::logical_unit(
                    sub,
                    &namespaces[ns].info,
                    max_transfer,
                    Some((port, RELATIVE_PORT)),
                );
                luns.push(ServedLun {
                    lun: l.lun,
                    ns,
                    unit,
                });
            }
            targets.push(ServedTarget {
                name: t.name.clone(),
                luns,
            });
            let mut tc = TargetConfig::new(t.name.clone());
            tc.alias = t.alias.clone();
            tc.chap = t.chap.clone();
            if let Some(i) = &t.initiators {
                tc.initiators = InitiatorAcl::Only(i.clone());
            }
            login.push(tc);
        }
        let discovery_chap = config.discovery_chap.clone();
        let iscsi_keepalive = config.keepalive;
        let immediate_data = config.immediate_data;
        let mut config = LoginConfig::new(login, true);
        config.portal_group_tag = 1;
        config.discovery_chap = discovery_chap;
        // ImmediateData Yes (the default): a write of up to TargetRecvDataSegmentLength (8 KiB)
        // comes whole in its command's SEND and is written from the receive buffer, with no
        // RDMA READ round trip (LIO's isert does the same); a larger one brings its first
        // 8 KiB that way, copied into the pool buffer the rest is fetched into. No
        // (`immediate_data = false`): every write is fetched whole, with no copy. InitialR2T
        // stays Yes: no unsolicited Data-Out PDUs.
        config.prefs.immediate_data = immediate_data;
        Ok(IscsiServed {
            keepalive: iscsi_keepalive,
            config,
            listen,
            targets,
        })
    }

    /// Whether a connect request to `local` came in on an iSER listener.
    pub(crate) fn is_iser_port(&self, local: Option<SocketAddr>) -> bool {
        local.is_some_and(|l| self.listen.iter().any(|a| a.port() == l.port()))
    }

    /// A new connection's protocol state and LUN view; SendTargets reports the address it
    /// came in on.
    pub(crate) fn connection(
        &self,
        local: Option<SocketAddr>,
        queue_depth: u32,
        tsih: NonZeroU16,
    ) -> Result<IserQueue, String> {
        let mut config = self.config.clone();
        config.queue_depth = queue_depth;
        if let Some(l) = local {
            for t in &mut config.targets {
                t.portals = vec![Portal {
                    addr: l.ip(),
                    port: l.port(),
                    tpgt: config.portal_group_tag,
                }];
            }
        }
        // The CHAP identifier and challenge: from the OS's CSPRNG. Without one, no connection
        // is served with a guessable challenge: the caller refuses it.
        let mut nonce = [0u8; raidline_scsi::iscsi::chap::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| format!("no random bytes for CHAP: {e}"))?;
        Ok(IserQueue {
            conn: IserConn::new(Arc::new(config), tsih, nonce).with_keepalive(self.keepalive),
            units: QueueUnits {
                targets: self.targets.clone(),
                regained: Vec::new(),
            },
        })
    }
}

/// An iSER connection on its poller.
#[derive(Debug)]
pub(crate) struct IserQueue {
    pub conn: IserConn,
    pub units: QueueUnits,
}

/// A connection's copy of the targets' logical units, their readiness refreshed from the
/// namespaces before each command ([`QueueUnits::refresh`]).
#[derive(Debug)]
pub(crate) struct QueueUnits {
    targets: Vec<ServedTarget>,
    /// The LUNs of the session's target that the last [`QueueUnits::refresh`] found ready
    /// again (kept: no allocation per command).
    pub regained: Vec<u16>,
}

impl QueueUnits {
    /// Takes each unit's readiness from its namespace now (a disabled namespace's LUN is not
    /// ready). The LUNs of `target` (the session's) that were not ready and are now go into
    /// [`QueueUnits::regained`]: the connection owes them a unit attention.
    pub(crate) fn refresh(&mut self, namespaces: &[Arc<NsEntry>], target: Option<&str>) {
        self.regained.clear();
        for t in &mut self.targets {
            let ours = target.is_some_and(|n| t.name.eq_ignore_ascii_case(n));
            for l in &mut t.luns {
                let ready = namespaces[l.ns].info.active.get();
                if ours && ready && !l.unit.ready {
                    self.regained.push(l.lun);
                }
                l.unit.ready = ready;
            }
        }
    }

    /// The namespace index of `lun` of `target`.
    pub(crate) fn ns_of(&self, target: &str, lun: u16) -> Option<usize> {
        self.target(target)?
            .luns
            .iter()
            .find(|l| l.lun == lun)
            .map(|l| l.ns)
    }

    fn target(&self, name: &str) -> Option<&ServedTarget> {
        self.targets
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }
}

impl Units for QueueUnits {
    fn unit(&self, target: &str, lun: u16) -> Option<&LogicalUnit> {
        self.target(target)?
            .luns
            .iter()
            .find(|l| l.lun == lun)
            .map(|l| &l.unit)
    }

    fn luns(&self, target: &str) -> Vec<u16> {
        self.target(target)
            .map(|t| t.luns.iter().map(|l| l.lun).collect())
            .unwrap_or_default()
    }
}
