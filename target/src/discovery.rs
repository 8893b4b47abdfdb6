//! The discovery log page a discovery controller returns: one entry per listening port and NVM
//! subsystem the connecting host may reach, plus one "current discovery subsystem" entry per
//! port (as Linux nvmet does since 5.16). A host never learns of subsystems it may not use.
//!
//! The generation counter changes whenever the set of entries could change (subsystems, hosts,
//! ports): the daemon bumps it and posts a discovery-change event to discovery controllers.

use std::net::SocketAddr;

use raidline_proto::log::{
    AddressFamily, DiscoveryEntry, DiscoveryLog, DiscoverySubtype, TransportType, Tsas,
};
use raidline_proto::text::Nqn;

use crate::registry::Registry;

/// A listening port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port {
    /// Port id reported in the log (stable; the index in the configuration's listen list).
    pub id: u16,
    /// Listen address.
    pub addr: SocketAddr,
}

/// TREQ: secure channel not required (bits 1:0 = 10b).
const TREQ_NO_SECURE_CHANNEL: u8 = 0b10;
/// Discovery log entry CNTLID: the dynamic controller model.
const CNTLID_DYNAMIC: u16 = 0xFFFF;

fn entry(port: &Port, subtype: DiscoverySubtype, subnqn: Nqn, asqsz: u16) -> DiscoveryEntry {
    DiscoveryEntry {
        trtype: TransportType::RDMA,
        adrfam: if port.addr.is_ipv4() {
            AddressFamily::IPV4
        } else {
            AddressFamily::IPV6
        },
        subtype,
        treq: TREQ_NO_SECURE_CHANNEL,
        portid: port.id,
        cntlid: CNTLID_DYNAMIC,
        asqsz,
        eflags: 0,
        trsvcid: port.addr.port().to_string(),
        subnqn,
        traddr: port.addr.ip().to_string(),
        tsas: Tsas::RDMA_CM,
    }
}

/// The discovery log for `host`.
pub fn log_for_host(registry: &Registry, ports: &[Port], host: &Nqn, genctr: u64) -> DiscoveryLog {
    let asqsz = registry.limits().max_admin_queue_depth;
    let mut entries = Vec::new();
    for port in ports {
        entries.push(entry(
            port,
            DiscoverySubtype::CURRENT_DISCOVERY,
            Nqn::discovery(),
            asqsz,
        ));
        for sub in registry.subsystems().filter(|s| s.hosts.allows(host)) {
            entries.push(entry(port, DiscoverySubtype::NVME, sub.nqn.clone(), asqsz));
        }
    }
    DiscoveryLog { genctr, entries }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystem::{HostAccess, Limits, Subsystem};

    fn sub(nqn: &str, hosts: HostAccess) -> Subsystem {
        Subsystem {
            nqn: Nqn::new(nqn).unwrap(),
            serial: "S".into(),
            model: "M".into(),
            hosts,
            auth: Default::default(),
            namespaces: vec![],
        }
    }

    #[test]
    fn lists_only_reachable_subsystems_per_port() {
        let h1 = Nqn::new("nqn.host:1").unwrap();
        let h2 = Nqn::new("nqn.host:2").unwrap();
        let r = Registry::new(
            Limits::default(),
            vec![
                sub("nqn.a:open", HostAccess::Any),
                sub("nqn.a:h1", HostAccess::Only([h1.clone()].into())),
            ],
        );
        let ports = [
            Port {
                id: 0,
                addr: "10.0.0.1:4420".parse().unwrap(),
            },
            Port {
                id: 1,
                addr: "[fd00::1]:4421".parse().unwrap(),
            },
        ];
        let l1 = log_for_host(&r, &ports, &h1, 3);
        assert_eq!(l1.genctr, 3);
        assert_eq!(l1.entries.len(), 6);
        let l2 = log_for_host(&r, &ports, &h2, 3);
        assert_eq!(l2.entries.len(), 4);
        assert!(l2.entries.iter().all(|e| e.subnqn.as_str() != "nqn.a:h1"));
        let e = &l1.entries[1];
        assert_eq!(
            (e.traddr.as_str(), e.trsvcid.as_str()),
            ("10.0.0.1", "4420")
        );
        assert_eq!(
            (e.trtype, e.adrfam, e.subtype),
            (
                TransportType::RDMA,
                AddressFamily::IPV4,
                DiscoverySubtype::NVME
            )
        );
        assert_eq!(l1.entries[3].adrfam, AddressFamily::IPV6);
        assert_eq!(l1.entries[3].traddr, "fd00::1");
        assert_eq!(l1.entries[0].subtype, DiscoverySubtype::CURRENT_DISCOVERY);
        // It encodes: header + 1024 bytes per entry.
        assert_eq!(l1.to_bytes().unwrap().len(), 1024 * 7);
    }
}
