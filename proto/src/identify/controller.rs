//! Identify Controller data structure (CNS 01h; Base §5.17.2.1, Figure 275; Linux
//! `struct nvme_id_ctrl`; fabrics fields from Fabrics 1.1 Figure 27 / Base 2.0 bytes 2047:1792).
//!
//! Every field the Linux host or `nvme-cli` reads is typed. The power state descriptors and the
//! vendor-specific area are kept raw; reserved bytes are ignored and zeroed (see the parent
//! module). `subnqn` is `None` when the field is all zero (controllers older than 1.2.1).

use super::{emit_ascii_field, get, parse_ascii_field, put, Opaque, IDENTIFY_DATA_LEN as LEN};
use crate::error::{exact, room, ParseError};
use crate::text::{emit_nqn, parse_nqn, Nqn};

pub(crate) mod field {
    //! Byte ranges of Identify Controller (Base 2.0 Figure 275).
    use crate::bytes::Field;
    pub const VID: Field = 0..2;
    pub const SSVID: Field = 2..4;
    pub const SN: Field = 4..24;
    pub const MN: Field = 24..64;
    pub const FR: Field = 64..72;
    pub const RAB: Field = 72..73;
    pub const IEEE: Field = 73..76;
    pub const CMIC: Field = 76..77;
    pub const MDTS: Field = 77..78;
    pub const CNTLID: Field = 78..80;
    pub const VER: Field = 80..84;
    pub const RTD3R: Field = 84..88;
    pub const RTD3E: Field = 88..92;
    pub const OAES: Field = 92..96;
    pub const CTRATT: Field = 96..100;
    pub const RRLS: Field = 100..102;
    pub const CNTRLTYPE: Field = 111..112;
    pub const FGUID: Field = 112..128;
    pub const CRDT1: Field = 128..130;
    pub const CRDT2: Field = 130..132;
    pub const CRDT3: Field = 132..134;
    /// NVMe-MI: NVM Subsystem Report, VPD Write Cycle Information, Management Endpoint Caps.
    pub const NVMSR: Field = 253..254;
    pub const VWCI: Field = 254..255;
    pub const MEC: Field = 255..256;
    pub const OACS: Field = 256..258;
    pub const ACL: Field = 258..259;
    pub const AERL: Field = 259..260;
    pub const FRMW: Field = 260..261;
    pub const LPA: Field = 261..262;
    pub const ELPE: Field = 262..263;
    pub const NPSS: Field = 263..264;
    pub const AVSCC: Field = 264..265;
    pub const APSTA: Field = 265..266;
    pub const WCTEMP: Field = 266..268;
    pub const CCTEMP: Field = 268..270;
    pub const MTFA: Field = 270..272;
    pub const HMPRE: Field = 272..276;
    pub const HMMIN: Field = 276..280;
    pub const TNVMCAP: Field = 280..296;
    pub const UNVMCAP: Field = 296..312;
    pub const RPMBS: Field = 312..316;
    pub const EDSTT: Field = 316..318;
    pub const DSTO: Field = 318..319;
    pub const FWUG: Field = 319..320;
    pub const KAS: Field = 320..322;
    pub const HCTMA: Field = 322..324;
    pub const MNTMT: Field = 324..326;
    pub const MXTMT: Field = 326..328;
    pub const SANICAP: Field = 328..332;
    pub const HMMINDS: Field = 332..336;
    pub const HMMAXD: Field = 336..338;
    pub const NSETIDMAX: Field = 338..340;
    pub const ENDGIDMAX: Field = 340..342;
    pub const ANATT: Field = 342..343;
    pub const ANACAP: Field = 343..344;
    pub const ANAGRPMAX: Field = 344..348;
    pub const NANAGRPID: Field = 348..352;
    pub const PELS: Field = 352..356;
    pub const DOMAINID: Field = 356..358;
    pub const MEGCAP: Field = 368..384;
    pub const SQES: Field = 512..513;
    pub const CQES: Field = 513..514;
    pub const MAXCMD: Field = 514..516;
    pub const NN: Field = 516..520;
    pub const ONCS: Field = 520..522;
    pub const FUSES: Field = 522..524;
    pub const FNA: Field = 524..525;
    pub const VWC: Field = 525..526;
    pub const AWUN: Field = 526..528;
    pub const AWUPF: Field = 528..530;
    pub const NVSCC: Field = 530..531;
    pub const NWPC: Field = 531..532;
    pub const ACWU: Field = 532..534;
    pub const OCFS: Field = 534..536;
    pub const SGLS: Field = 536..540;
    pub const MNAN: Field = 540..544;
    pub const MAXDNA: Field = 544..560;
    pub const MAXCNA: Field = 560..564;
    pub const SUBNQN: Field = 768..1024;
    // Fabrics (Base 2.0 Figure 275 bytes 2047:1792; Fabrics 1.1 Figure 27).
    pub const IOCCSZ: Field = 1792..1796;
    pub const IORCSZ: Field = 1796..1800;
    pub const ICDOFF: Field = 1800..1802;
    pub const FCATT: Field = 1802..1803;
    pub const MSDBD: Field = 1803..1804;
    pub const OFCS: Field = 1804..1806;
    pub const DCTYPE: Field = 1806..1807;
    /// 32 power state descriptors of 32 bytes each.
    pub const PSD: Field = 2048..3072;
    pub const VS: Field = 3072..4096;

    /// Every reserved range (ignored on parse, zeroed on emit); the layout tests use it to
    /// check that the named fields and these ranges cover all 4096 bytes.
    #[cfg(test)]
    pub const RESERVED: &[Field] = &[
        102..111,
        134..253,
        358..368,
        384..512,
        564..768,
        1024..1792,
        1807..2048,
    ];
}

code_newtype! {
    /// Controller type (CNTRLTYPE, byte 111; Base Figure 275).
    pub struct ControllerType(u8) {
        /// Not reported (controllers before NVMe 1.4).
        NOT_REPORTED = 0x00,
        /// I/O controller.
        IO = 0x01,
        /// Discovery controller.
        DISCOVERY = 0x02,
        /// Administrative controller.
        ADMINISTRATIVE = 0x03,
    }
}

/// One power state descriptor (Base Figure 276), kept as its 32 raw bytes with typed readers for
/// the fields hosts print.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PowerStateDescriptor(pub [u8; 32]);

impl core::fmt::Debug for PowerStateDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PowerStateDescriptor")
            .field("max_power", &self.max_power())
            .field("entry_latency_us", &self.entry_latency_us())
            .field("exit_latency_us", &self.exit_latency_us())
            .finish()
    }
}

impl PowerStateDescriptor {
    /// Maximum power (bytes 1:0), in units of 0.01 W or 0.0001 W per [`Self::max_power_scale`].
    pub fn max_power(&self) -> u16 {
        get(&self.0, 0..2)
    }

    /// Max Power Scale (byte 3 bit 0): `true` when [`Self::max_power`] is in 0.0001 W units.
    pub fn max_power_scale(&self) -> bool {
        self.0[3] & 1 != 0
    }

    /// Non-Operational State (byte 3 bit 1).
    pub fn non_operational(&self) -> bool {
        self.0[3] & 2 != 0
    }

    /// Entry latency in microseconds (bytes 7:4).
    pub fn entry_latency_us(&self) -> u32 {
        get(&self.0, 4..8)
    }

    /// Exit latency in microseconds (bytes 11:8).
    pub fn exit_latency_us(&self) -> u32 {
        get(&self.0, 8..12)
    }

    /// A descriptor with the given maximum power (0.01 W units) and latencies, relative
    /// throughput/latency 0 (the best), everything else zero.
    pub fn new(max_power_cw: u16, entry_latency_us: u32, exit_latency_us: u32) -> Self {
        let mut d = [0u8; 32];
        put(&mut d, 0..2, max_power_cw);
        put(&mut d, 4..8, entry_latency_us);
        put(&mut d, 8..12, exit_latency_us);
        PowerStateDescriptor(d)
    }
}

/// The Identify Controller data structure.
///
/// Field names are the specification's mnemonics; each doc gives the byte offset.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IdentifyController {
    /// PCI Vendor ID (bytes 1:0).
    pub vid: u16,
    /// PCI Subsystem Vendor ID (bytes 3:2).
    pub ssvid: u16,
    /// Serial Number (bytes 23:4, ASCII, space padded; at most 20 characters).
    pub sn: String,
    /// Model Number (bytes 63:24, ASCII, at most 40 characters).
    pub mn: String,
    /// Firmware Revision (bytes 71:64, ASCII, at most 8 characters).
    pub fr: String,
    /// Recommended Arbitration Burst (byte 72).
    pub rab: u8,
    /// IEEE OUI Identifier (bytes 75:73, little-endian byte order as on the wire).
    pub ieee: [u8; 3],
    /// Controller Multi-Path I/O and Namespace Sharing Capabilities (byte 76): bit 0 multiple
    /// ports, bit 1 multiple controllers, bit 3 ANA reporting.
    pub cmic: u8,
    /// Maximum Data Transfer Size (byte 77), a power of two in units of CAP.MPSMIN; 0 = no limit.
    pub mdts: u8,
    /// Controller ID (bytes 79:78).
    pub cntlid: u16,
    /// Version (bytes 83:80): major 31:16, minor 15:8, tertiary 7:0 (same format as VS).
    pub ver: u32,
    /// RTD3 Resume Latency in microseconds (bytes 87:84).
    pub rtd3r: u32,
    /// RTD3 Entry Latency in microseconds (bytes 91:88).
    pub rtd3e: u32,
    /// Optional Asynchronous Events Supported (bytes 95:92), same bit positions as the
    /// Asynchronous Event Configuration feature.
    pub oaes: u32,
    /// Controller Attributes (bytes 99:96): bit 0 128-bit host id, bit 6 traffic based keep alive.
    pub ctratt: u32,
    /// Read Recovery Levels Supported (bytes 101:100).
    pub rrls: u16,
    /// Controller Type (byte 111).
    pub cntrltype: ControllerType,
    /// FRU Globally Unique Identifier (bytes 127:112).
    pub fguid: [u8; 16],
    /// Command Retry Delay Times 1–3 in units of 100 ms (bytes 129:128, 131:130, 133:132).
    pub crdt: [u16; 3],
    /// NVM Subsystem Report (byte 253, NVMe-MI).
    pub nvmsr: u8,
    /// VPD Write Cycle Information (byte 254, NVMe-MI).
    pub vwci: u8,
    /// Management Endpoint Capabilities (byte 255, NVMe-MI).
    pub mec: u8,
    /// Optional Admin Command Support (bytes 257:256).
    pub oacs: u16,
    /// Abort Command Limit, 0-based (byte 258).
    pub acl: u8,
    /// Asynchronous Event Request Limit, 0-based (byte 259).
    pub aerl: u8,
    /// Firmware Updates (byte 260).
    pub frmw: u8,
    /// Log Page Attributes (byte 261): bit 1 Commands Supported and Effects, bit 2 extended data
    /// for Get Log Page (NUMDU/LPO), bit 3 telemetry.
    pub lpa: u8,
    /// Error Log Page Entries, 0-based (byte 262).
    pub elpe: u8,
    /// Number of Power States Support, 0-based (byte 263).
    pub npss: u8,
    /// Admin Vendor Specific Command Configuration (byte 264).
    pub avscc: u8,
    /// Autonomous Power State Transition Attributes (byte 265).
    pub apsta: u8,
    /// Warning Composite Temperature Threshold in kelvin (bytes 267:266).
    pub wctemp: u16,
    /// Critical Composite Temperature Threshold in kelvin (bytes 269:268).
    pub cctemp: u16,
    /// Maximum Time for Firmware Activation in 100 ms units (bytes 271:270).
    pub mtfa: u16,
    /// Host Memory Buffer Preferred Size in 4 KiB units (bytes 275:272).
    pub hmpre: u32,
    /// Host Memory Buffer Minimum Size in 4 KiB units (bytes 279:276).
    pub hmmin: u32,
    /// Total NVM Capacity in bytes (bytes 295:280).
    pub tnvmcap: u128,
    /// Unallocated NVM Capacity in bytes (bytes 311:296).
    pub unvmcap: u128,
    /// Replay Protected Memory Block Support (bytes 315:312).
    pub rpmbs: u32,
    /// Extended Device Self-test Time in minutes (bytes 317:316).
    pub edstt: u16,
    /// Device Self-test Options (byte 318).
    pub dsto: u8,
    /// Firmware Update Granularity in 4 KiB units (byte 319).
    pub fwug: u8,
    /// Keep Alive Support: granularity of the keep-alive timer in 100 ms units; 0 = not supported
    /// (bytes 321:320). The Linux host requires it non-zero on I/O controllers.
    pub kas: u16,
    /// Host Controlled Thermal Management Attributes (bytes 323:322).
    pub hctma: u16,
    /// Minimum Thermal Management Temperature in kelvin (bytes 325:324).
    pub mntmt: u16,
    /// Maximum Thermal Management Temperature in kelvin (bytes 327:326).
    pub mxtmt: u16,
    /// Sanitize Capabilities (bytes 331:328).
    pub sanicap: u32,
    /// Host Memory Buffer Minimum Descriptor Entry Size in 4 KiB units (bytes 335:332).
    pub hmminds: u32,
    /// Host Memory Maximum Descriptors Entries (bytes 337:336).
    pub hmmaxd: u16,
    /// NVM Set Identifier Maximum (bytes 339:338).
    pub nsetidmax: u16,
    /// Endurance Group Identifier Maximum (bytes 341:340).
    pub endgidmax: u16,
    /// ANA Transition Time in seconds (byte 342).
    pub anatt: u8,
    /// Asymmetric Namespace Access Capabilities (byte 343).
    pub anacap: u8,
    /// ANA Group Identifier Maximum (bytes 347:344).
    pub anagrpmax: u32,
    /// Number of ANA Group Identifiers (bytes 351:348).
    pub nanagrpid: u32,
    /// Persistent Event Log Size in 64 KiB units (bytes 355:352).
    pub pels: u32,
    /// Domain Identifier (bytes 357:356).
    pub domainid: u16,
    /// Max Endurance Group Capacity in bytes (bytes 383:368).
    pub megcap: u128,
    /// Submission Queue Entry Size (byte 512): bits 3:0 required, 7:4 maximum, as powers of two.
    pub sqes: u8,
    /// Completion Queue Entry Size (byte 513): bits 3:0 required, 7:4 maximum.
    pub cqes: u8,
    /// Maximum Outstanding Commands (bytes 515:514); fabrics controllers must report it.
    pub maxcmd: u16,
    /// Number of Namespaces: the largest NSID the controller supports (bytes 519:516).
    pub nn: u32,
    /// Optional NVM Command Support (bytes 521:520).
    pub oncs: u16,
    /// Fused Operation Support (bytes 523:522).
    pub fuses: u16,
    /// Format NVM Attributes (byte 524).
    pub fna: u8,
    /// Volatile Write Cache (byte 525): bit 0 present, bits 2:1 flush-all behaviour.
    pub vwc: u8,
    /// Atomic Write Unit Normal, 0-based in logical blocks (bytes 527:526).
    pub awun: u16,
    /// Atomic Write Unit Power Fail, 0-based (bytes 529:528).
    pub awupf: u16,
    /// I/O Command Set Vendor Specific Command Configuration (byte 530).
    pub nvscc: u8,
    /// Namespace Write Protection Capabilities (byte 531).
    pub nwpc: u8,
    /// Atomic Compare & Write Unit, 0-based (bytes 533:532).
    pub acwu: u16,
    /// Optional Copy Formats Supported (bytes 535:534).
    pub ocfs: u16,
    /// SGL Support (bytes 539:536): bits 1:0 SGLs supported, bit 2 keyed SGL data block,
    /// bit 20 offset (in-capsule) addressing.
    pub sgls: u32,
    /// Maximum Number of Allowed Namespaces (bytes 543:540).
    pub mnan: u32,
    /// Maximum Domain Namespace Attachments (bytes 559:544).
    pub maxdna: u128,
    /// Maximum I/O Controller Namespace Attachments (bytes 563:560).
    pub maxcna: u32,
    /// NVM Subsystem NVMe Qualified Name (bytes 1023:768); `None` when the field is all zero.
    pub subnqn: Option<Nqn>,
    /// I/O Queue Command Capsule Supported Size in 16-byte units, including the 64-byte SQE
    /// (bytes 1795:1792); at least 4.
    pub ioccsz: u32,
    /// I/O Queue Response Capsule Supported Size in 16-byte units (bytes 1799:1796); 1 on RDMA.
    pub iorcsz: u32,
    /// In Capsule Data Offset in 16-byte units (bytes 1801:1800); the Linux host requires 0.
    pub icdoff: u16,
    /// Fabrics Controller Attributes (byte 1802): bit 0 static controller model (0 = dynamic
    /// controller model, what Linux nvmet and this target use).
    pub fcatt: u8,
    /// Maximum SGL Data Block Descriptors, 0 = no limit (byte 1803).
    pub msdbd: u8,
    /// Optional Fabric Commands Support (bytes 1805:1804): bit 0 Disconnect.
    pub ofcs: u16,
    /// Discovery Controller Type (byte 1806): 0 not reported, 1 direct, 2 central.
    pub dctype: u8,
    /// Power State Descriptors 0–31 (bytes 3071:2048).
    pub psd: [PowerStateDescriptor; 32],
    /// Vendor Specific area (bytes 4095:3072), kept verbatim.
    pub vs: Opaque<1024>,
}

const WHAT: &str = "Identify Controller";

impl IdentifyController {
    /// Parses exactly 4096 bytes. Text fields must be printable ASCII (SN, MN, FR) or a valid
    /// NUL-padded NQN (SUBNQN, or all zero).
    pub fn parse(b: &[u8]) -> Result<IdentifyController, ParseError> {
        exact(WHAT, b, LEN)?;
        use field::*;
        let subnqn = if b[SUBNQN].iter().all(|&c| c == 0) {
            None
        } else {
            Some(parse_nqn(WHAT, "subnqn", SUBNQN.start, &b[SUBNQN])?)
        };
        let mut psd = [PowerStateDescriptor::default(); 32];
        for (i, d) in psd.iter_mut().enumerate() {
            let at = PSD.start + 32 * i;
            *d = PowerStateDescriptor(get(b, at..at + 32));
        }
        Ok(IdentifyController {
            vid: get(b, VID),
            ssvid: get(b, SSVID),
            sn: parse_ascii_field(WHAT, "sn", b, SN)?,
            mn: parse_ascii_field(WHAT, "mn", b, MN)?,
            fr: parse_ascii_field(WHAT, "fr", b, FR)?,
            rab: get(b, RAB),
            ieee: get(b, IEEE),
            cmic: get(b, CMIC),
            mdts: get(b, MDTS),
            cntlid: get(b, CNTLID),
            ver: get(b, VER),
            rtd3r: get(b, RTD3R),
            rtd3e: get(b, RTD3E),
            oaes: get(b, OAES),
            ctratt: get(b, CTRATT),
            rrls: get(b, RRLS),
            cntrltype: ControllerType(get(b, CNTRLTYPE)),
            fguid: get(b, FGUID),
            crdt: [get(b, CRDT1), get(b, CRDT2), get(b, CRDT3)],
            nvmsr: get(b, NVMSR),
            vwci: get(b, VWCI),
            mec: get(b, MEC),
            oacs: get(b, OACS),
            acl: get(b, ACL),
            aerl: get(b, AERL),
            frmw: get(b, FRMW),
            lpa: get(b, LPA),
            elpe: get(b, ELPE),
            npss: get(b, NPSS),
            avscc: get(b, AVSCC),
            apsta: get(b, APSTA),
            wctemp: get(b, WCTEMP),
            cctemp: get(b, CCTEMP),
            mtfa: get(b, MTFA),
            hmpre: get(b, HMPRE),
            hmmin: get(b, HMMIN),
            tnvmcap: get(b, TNVMCAP),
            unvmcap: get(b, UNVMCAP),
            rpmbs: get(b, RPMBS),
            edstt: get(b, EDSTT),
            dsto: get(b, DSTO),
            fwug: get(b, FWUG),
            kas: get(b, KAS),
            hctma: get(b, HCTMA),
            mntmt: get(b, MNTMT),
            mxtmt: get(b, MXTMT),
            sanicap: get(b, SANICAP),
            hmminds: get(b, HMMINDS),
            hmmaxd: get(b, HMMAXD),
            nsetidmax: get(b, NSETIDMAX),
            endgidmax: get(b, ENDGIDMAX),
            anatt: get(b, ANATT),
            anacap: get(b, ANACAP),
            anagrpmax: get(b, ANAGRPMAX),
            nanagrpid: get(b, NANAGRPID),
            pels: get(b, PELS),
            domainid: get(b, DOMAINID),
            megcap: get(b, MEGCAP),
            sqes: get(b, SQES),
            cqes: get(b, CQES),
            maxcmd: get(b, MAXCMD),
            nn: get(b, NN),
            oncs: get(b, ONCS),
            fuses: get(b, FUSES),
            fna: get(b, FNA),
            vwc: get(b, VWC),
            awun: get(b, AWUN),
            awupf: get(b, AWUPF),
            nvscc: get(b, NVSCC),
            nwpc: get(b, NWPC),
            acwu: get(b, ACWU),
            ocfs: get(b, OCFS),
            sgls: get(b, SGLS),
            mnan: get(b, MNAN),
            maxdna: get(b, MAXDNA),
            maxcna: get(b, MAXCNA),
            subnqn,
            ioccsz: get(b, IOCCSZ),
            iorcsz: get(b, IORCSZ),
            icdoff: get(b, ICDOFF),
            fcatt: get(b, FCATT),
            msdbd: get(b, MSDBD),
            ofcs: get(b, OFCS),
            dctype: get(b, DCTYPE),
            psd,
            vs: Opaque::read(b, VS),
        })
    }

    /// Writes exactly 4096 bytes, reserved bytes zeroed. Fails if a text field does not fit or is
    /// not printable ASCII.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(WHAT, b, LEN)?;
        use field::*;
        b.fill(0);
        put(b, VID, self.vid);
        put(b, SSVID, self.ssvid);
        emit_ascii_field(WHAT, "sn", b, SN, &self.sn)?;
        emit_ascii_field(WHAT, "mn", b, MN, &self.mn)?;
        emit_ascii_field(WHAT, "fr", b, FR, &self.fr)?;
        put(b, RAB, self.rab);
        put(b, IEEE, self.ieee);
        put(b, CMIC, self.cmic);
        put(b, MDTS, self.mdts);
        put(b, CNTLID, self.cntlid);
        put(b, VER, self.ver);
        put(b, RTD3R, self.rtd3r);
        put(b, RTD3E, self.rtd3e);
        put(b, OAES, self.oaes);
        put(b, CTRATT, self.ctratt);
        put(b, RRLS, self.rrls);
        put(b, CNTRLTYPE, self.cntrltype.0);
        put(b, FGUID, self.fguid);
        put(b, CRDT1, self.crdt[0]);
        put(b, CRDT2, self.crdt[1]);
        put(b, CRDT3, self.crdt[2]);
        put(b, NVMSR, self.nvmsr);
        put(b, VWCI, self.vwci);
        put(b, MEC, self.mec);
        put(b, OACS, self.oacs);
        put(b, ACL, self.acl);
        put(b, AERL, self.aerl);
        put(b, FRMW, self.frmw);
        put(b, LPA, self.lpa);
        put(b, ELPE, self.elpe);
        put(b, NPSS, self.npss);
        put(b, AVSCC, self.avscc);
        put(b, APSTA, self.apsta);
        put(b, WCTEMP, self.wctemp);
        put(b, CCTEMP, self.cctemp);
        put(b, MTFA, self.mtfa);
        put(b, HMPRE, self.hmpre);
        put(b, HMMIN, self.hmmin);
        put(b, TNVMCAP, self.tnvmcap);
        put(b, UNVMCAP, self.unvmcap);
        put(b, RPMBS, self.rpmbs);
        put(b, EDSTT, self.edstt);
        put(b, DSTO, self.dsto);
        put(b, FWUG, self.fwug);
        put(b, KAS, self.kas);
        put(b, HCTMA, self.hctma);
        put(b, MNTMT, self.mntmt);
        put(b, MXTMT, self.mxtmt);
        put(b, SANICAP, self.sanicap);
        put(b, HMMINDS, self.hmminds);
        put(b, HMMAXD, self.hmmaxd);
        put(b, NSETIDMAX, self.nsetidmax);
        put(b, ENDGIDMAX, self.endgidmax);
        put(b, ANATT, self.anatt);
        put(b, ANACAP, self.anacap);
        put(b, ANAGRPMAX, self.anagrpmax);
        put(b, NANAGRPID, self.nanagrpid);
        put(b, PELS, self.pels);
        put(b, DOMAINID, self.domainid);
        put(b, MEGCAP, self.megcap);
        put(b, SQES, self.sqes);
        put(b, CQES, self.cqes);
        put(b, MAXCMD, self.maxcmd);
        put(b, NN, self.nn);
        put(b, ONCS, self.oncs);
        put(b, FUSES, self.fuses);
        put(b, FNA, self.fna);
        put(b, VWC, self.vwc);
        put(b, AWUN, self.awun);
        put(b, AWUPF, self.awupf);
        put(b, NVSCC, self.nvscc);
        put(b, NWPC, self.nwpc);
        put(b, ACWU, self.acwu);
        put(b, OCFS, self.ocfs);
        put(b, SGLS, self.sgls);
        put(b, MNAN, self.mnan);
        put(b, MAXDNA, self.maxdna);
        put(b, MAXCNA, self.maxcna);
        if let Some(n) = &self.subnqn {
            emit_nqn(&mut b[SUBNQN], n);
        }
        put(b, IOCCSZ, self.ioccsz);
        put(b, IORCSZ, self.iorcsz);
        put(b, ICDOFF, self.icdoff);
        put(b, FCATT, self.fcatt);
        put(b, MSDBD, self.msdbd);
        put(b, OFCS, self.ofcs);
        put(b, DCTYPE, self.dctype);
        for (i, d) in self.psd.iter().enumerate() {
            let at = PSD.start + 32 * i;
            put(b, at..at + 32, d.0);
        }
        self.vs.write(b, VS);
        Ok(())
    }

    /// The structure as 4096 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; LEN];
        self.emit(&mut b)?;
        Ok(b)
    }

    /// Maximum data transfer size in bytes for a memory page size of `page_size` bytes
    /// (CAP.MPSMIN), or `None` for "no limit" (MDTS = 0) or a size beyond `u64`.
    pub fn max_transfer_bytes(&self, page_size: u64) -> Option<u64> {
        if self.mdts == 0 {
            return None;
        }
        1u64.checked_shl(u32::from(self.mdts))?
            .checked_mul(page_size)
    }
}

/// CMIC bits (byte 76).
pub mod cmic {
    /// The NVM subsystem may have more than one port.
    pub const MULTI_PORT: u8 = 1 << 0;
    /// The NVM subsystem may have more than one controller (needed when a host connects twice).
    pub const MULTI_CONTROLLER: u8 = 1 << 1;
    /// The controller supports Asymmetric Namespace Access reporting.
    pub const ANA: u8 = 1 << 3;
}

/// OACS bits (bytes 257:256).
pub mod oacs {
    /// Security Send/Receive.
    pub const SECURITY: u16 = 1 << 0;
    /// Format NVM.
    pub const FORMAT: u16 = 1 << 1;
    /// Firmware Commit / Image Download.
    pub const FIRMWARE: u16 = 1 << 2;
    /// Namespace Management.
    pub const NS_MANAGEMENT: u16 = 1 << 3;
    /// Device Self-test.
    pub const SELF_TEST: u16 = 1 << 4;
    /// Directives.
    pub const DIRECTIVES: u16 = 1 << 5;
}

/// LPA bits (byte 261).
pub mod lpa {
    /// SMART / Health log per namespace.
    pub const SMART_PER_NAMESPACE: u8 = 1 << 0;
    /// Commands Supported and Effects log page supported (the Linux host then reads it).
    pub const COMMAND_EFFECTS: u8 = 1 << 1;
    /// Extended data for Get Log Page (NUMDU, LPO): the Linux host needs it to read pages in
    /// pieces.
    pub const EXTENDED_DATA: u8 = 1 << 2;
    /// Telemetry host-initiated and controller-initiated logs.
    pub const TELEMETRY: u8 = 1 << 3;
    /// Persistent Event log.
    pub const PERSISTENT_EVENT: u8 = 1 << 4;
}

/// ONCS bits (bytes 521:520).
pub mod oncs {
    /// Compare.
    pub const COMPARE: u16 = 1 << 0;
    /// Write Uncorrectable.
    pub const WRITE_UNCORRECTABLE: u16 = 1 << 1;
    /// Dataset Management (deallocate).
    pub const DATASET_MANAGEMENT: u16 = 1 << 2;
    /// Write Zeroes.
    pub const WRITE_ZEROES: u16 = 1 << 3;
    /// Save field in Set Features and Select field in Get Features.
    pub const SAVE_SELECT: u16 = 1 << 4;
    /// Reservations.
    pub const RESERVATIONS: u16 = 1 << 5;
    /// Timestamp feature.
    pub const TIMESTAMP: u16 = 1 << 6;
    /// Verify.
    pub const VERIFY: u16 = 1 << 7;
    /// Copy.
    pub const COPY: u16 = 1 << 8;
}

/// VWC bits (byte 525).
pub mod vwc {
    /// A volatile write cache is present (Flush is meaningful).
    pub const PRESENT: u8 = 1 << 0;
    /// Bits 2:1 = 11b: Flush with NSID FFFFFFFFh flushes every namespace.
    pub const FLUSH_ALL_SUPPORTED: u8 = 0b11 << 1;
}

/// CTRATT bits (bytes 99:96).
pub mod ctratt {
    /// 128-bit host identifier supported (required over fabrics).
    pub const HOST_ID_128: u32 = 1 << 0;
    /// Traffic based keep alive: commands reset the keep-alive timer.
    pub const TRAFFIC_BASED_KEEP_ALIVE: u32 = 1 << 6;
}

/// SGLS bits the fabrics host checks (Base Figure 275, bytes 539:536).
pub mod sgls {
    /// Bits 1:0 = 01b: SGLs supported, no alignment requirement.
    pub const SUPPORTED: u32 = 0x1;
    /// Bit 2: Keyed SGL Data Block descriptor supported.
    pub const KEYED: u32 = 1 << 2;
    /// Bit 20: Address field may be an offset (in-capsule data).
    pub const OFFSET: u32 = 1 << 20;
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
