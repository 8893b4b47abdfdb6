//! The Identify data this target returns (CNS 00h–03h), built from the subsystem and limits.
//!
//! Every field the Linux host enforces (../shared/HOST.md) is set here, with the reason:
//! cntlid equal to the Connect's, subnqn equal to the one connected to, kas ≠ 0, icdoff 0,
//! SGL bits for keyed and in-capsule data, ioccsz/iorcsz, maxcmd ≥ queue depth, stable sn/mn,
//! CMIC bit 1 with NMIC bit 0 (several controllers may share the namespace), and stable
//! NGUID/EUI64/UUID.

use raidline_proto::identify::{
    sgls, ControllerType, Csi, IdentifyController, IdentifyNamespace, LbaFormat, NsIdDescriptor,
    NsIdDescriptorList,
};
use raidline_proto::text::Nqn;

use crate::subsystem::{Limits, NamespaceInfo, Subsystem};

use super::properties::VERSION;

/// Firmware revision reported (8 ASCII characters at most).
pub const FIRMWARE_REVISION: &str = concat!("rl", env!("CARGO_PKG_VERSION"));

/// OAES bit 8: namespace attribute notices.
pub const OAES_NS_ATTRIBUTE: u32 = 1 << 8;
/// OAES bit 31: discovery log page change notices.
pub const OAES_DISCOVERY_CHANGE: u32 = 1 << 31;
/// CTRATT bit 0: 128-bit host identifier (what fabrics hosts send).
const CTRATT_HOSTID_128: u32 = 1 << 0;
/// LPA bit 1: commands supported and effects log; bit 2: extended data for Get Log Page
/// (NUMDU, LPO).
const LPA: u8 = 1 << 1 | 1 << 2;
/// ONCS bit 2: Dataset Management; bit 3: Write Zeroes.
const ONCS_DSM_WRITE_ZEROES: u16 = 1 << 2 | 1 << 3;
/// NSFEAT bit 4: NPWG/NPWA/NPDG/NPDA/NOWS are valid.
const NSFEAT_OPTPERF: u8 = 1 << 4;
/// DLFEAT: deallocated blocks read as zeroes (001b) and Write Zeroes may deallocate (bit 3).
const DLFEAT_ZEROES: u8 = 0b1 | 1 << 3;

fn common(cntlid: u16, limits: &Limits, serial: &str, model: &str) -> IdentifyController {
    IdentifyController {
        sn: serial.to_owned(),
        mn: model.to_owned(),
        fr: FIRMWARE_REVISION.to_owned(),
        rab: 6,
        mdts: limits.mdts(),
        cntlid,
        ver: VERSION.to_u32(),
        ctratt: CTRATT_HOSTID_128,
        acl: 3,
        aerl: limits.aer_limit.saturating_sub(1),
        lpa: LPA,
        elpe: 0,
        sqes: 0x66,
        cqes: 0x44,
        maxcmd: limits.max_queue_depth,
        kas: limits.kas_100ms,
        sgls: sgls::SUPPORTED | sgls::KEYED | sgls::OFFSET,
        ioccsz: limits.ioccsz(),
        iorcsz: 1,
        icdoff: 0,
        msdbd: 1,
        ..IdentifyController::default()
    }
}

/// Identify Controller of an I/O controller of `sub`.
pub fn nvm_controller(cntlid: u16, limits: &Limits, sub: &Subsystem) -> IdentifyController {
    let nn = sub.namespaces.iter().map(|n| n.nsid).max().unwrap_or(0);
    IdentifyController {
        cmic: 1 << 1,
        oaes: OAES_NS_ATTRIBUTE,
        cntrltype: ControllerType::IO,
        nn,
        mnan: 0,
        oncs: ONCS_DSM_WRITE_ZEROES,
        // A volatile write cache is reported: members have caches, and Flush is what makes
        // acknowledged writes durable on them.
        vwc: 1,
        subnqn: Some(sub.nqn.clone()),
        ..common(cntlid, limits, &sub.serial, &sub.model)
    }
}

/// Identify Controller of a discovery controller.
pub fn discovery_controller(cntlid: u16, limits: &Limits, serial: &str) -> IdentifyController {
    IdentifyController {
        oaes: OAES_DISCOVERY_CHANGE,
        cntrltype: ControllerType::DISCOVERY,
        subnqn: Some(Nqn::discovery()),
        ..common(cntlid, limits, serial, "Raidline discovery")
    }
}

/// Identify Namespace for an active namespace.
pub fn namespace(ns: &NamespaceInfo) -> IdentifyNamespace {
    let pw = ns.preferred_write_blocks.clamp(1, 0x1_0000) - 1;
    let mut lbaf = [LbaFormat::default(); 64];
    lbaf[0] = LbaFormat::new(ns.lbads());
    IdentifyNamespace {
        nsze: ns.blocks,
        ncap: ns.blocks,
        nuse: ns.blocks,
        nsfeat: NSFEAT_OPTPERF,
        nlbaf: 0,
        flbas: 0,
        nmic: 1,
        dlfeat: if ns.deallocate { DLFEAT_ZEROES } else { 0 },
        npwg: pw as u16,
        npwa: pw as u16,
        npdg: pw as u16,
        npda: pw as u16,
        nows: pw as u16,
        nvmcap: u128::from(ns.blocks) * u128::from(ns.block_size),
        nguid: ns.ids.nguid,
        eui64: ns.ids.eui64,
        lbaf,
        ..IdentifyNamespace::default()
    }
}

/// Namespace Identification Descriptor list: EUI-64, NGUID, UUID, CSI.
pub fn ns_descriptors(ns: &NamespaceInfo) -> NsIdDescriptorList {
    NsIdDescriptorList {
        descriptors: vec![
            NsIdDescriptor::Eui64(ns.ids.eui64),
            NsIdDescriptor::Nguid(ns.ids.nguid),
            NsIdDescriptor::Uuid(ns.ids.uuid),
            NsIdDescriptor::Csi(Csi::NVM),
        ],
    }
}
