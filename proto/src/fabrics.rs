//! Fabrics commands (NVMe over Fabrics 1.1 §3; Linux `struct nvmf_*_command`): Connect and its
//! 1024-byte data, Property Get/Set and the controller properties they reach (CAP, VS, CC,
//! CSTS), Disconnect, Authentication Send/Receive envelopes.
//!
//! Every fabrics command has opcode 0x7F and its command type in SQE byte 4. Parsers here check
//! structure (opcode, command type, reserved encodings, SGL form) and keep semantic values
//! (RECFMT, QID, SQSIZE) for the controller, which answers them with the exact fabrics status.

use crate::bytes::{is_zero, le16, le32, le64, put_le16, put_le32, put_le64};
use crate::error::{exact, room, ParseError};
use crate::opcode::FabricsCommandType;
use crate::sgl::SglDescriptor;
use crate::sqe::Sqe;
use crate::text::{emit_nqn, parse_nqn, Nqn};

/// Opcode of every fabrics command.
pub const FABRICS_OPCODE: u8 = 0x7F;

/// Checks that `sqe` is the fabrics command `ty`.
fn expect(sqe: &Sqe, ty: FabricsCommandType, what: &'static str) -> Result<(), ParseError> {
    if sqe.opcode() != FABRICS_OPCODE {
        return Err(ParseError::WrongOpcode {
            what,
            opcode: sqe.opcode(),
        });
    }
    if sqe.fctype() != ty.0 {
        return Err(ParseError::InvalidField {
            what,
            field: "fctype",
            offset: 4,
            value: u64::from(sqe.fctype()),
        });
    }
    Ok(())
}

fn fabrics_sqe(ty: FabricsCommandType, cid: u16) -> Sqe {
    let mut s = Sqe::new(FABRICS_OPCODE, cid);
    s.as_bytes_mut()[4] = ty.0;
    s
}

/// The fabrics command type of an SQE whose opcode is 0x7F.
pub fn command_type(sqe: &Sqe) -> Option<FabricsCommandType> {
    (sqe.opcode() == FABRICS_OPCODE).then(|| FabricsCommandType(sqe.fctype()))
}

mod connect_field {
    use crate::bytes::Field;
    pub const RECFMT: Field = 40..42;
    pub const QID: Field = 42..44;
    pub const SQSIZE: Field = 44..46;
    pub const CATTR: usize = 46;
    pub const KATO: Field = 48..52;
}

/// Connect command (Fabrics §3.3, Figure 19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connect {
    /// Command identifier.
    pub cid: u16,
    /// Where the 1024-byte Connect data is: keyed SGL (read by RDMA READ) or in-capsule.
    pub sgl: SglDescriptor,
    /// Record format (0 is the only one defined).
    pub recfmt: u16,
    /// Queue id: 0 for the admin queue.
    pub qid: u16,
    /// Submission queue size, 0-based.
    pub sqsize: u16,
    /// Connect attributes (bit 2: disable SQ flow control; bits 1:0 priority class).
    pub cattr: u8,
    /// Keep-alive timeout in milliseconds (admin queue only; 0 disables).
    pub kato: u32,
}

/// Connect attributes bit 2: the host asks for SQ flow control to be disabled (SQ head not
/// reported).
pub const CATTR_DISABLE_SQ_FLOW: u8 = 1 << 2;

impl Connect {
    const WHAT: &'static str = "Connect";

    /// Parses a Connect command.
    pub fn parse(sqe: &Sqe) -> Result<Connect, ParseError> {
        expect(sqe, FabricsCommandType::CONNECT, Self::WHAT)?;
        let b = sqe.as_bytes();
        Ok(Connect {
            cid: sqe.cid(),
            sgl: sqe.sgl1()?,
            recfmt: le16(b, connect_field::RECFMT),
            qid: le16(b, connect_field::QID),
            sqsize: le16(b, connect_field::SQSIZE),
            cattr: b[connect_field::CATTR],
            kato: le32(b, connect_field::KATO),
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let mut s = fabrics_sqe(FabricsCommandType::CONNECT, self.cid);
        s.set_sgl1(&self.sgl)?;
        let b = s.as_bytes_mut();
        put_le16(b, connect_field::RECFMT, self.recfmt);
        put_le16(b, connect_field::QID, self.qid);
        put_le16(b, connect_field::SQSIZE, self.sqsize);
        b[connect_field::CATTR] = self.cattr;
        put_le32(b, connect_field::KATO, self.kato);
        Ok(s)
    }

    /// SQE byte offset of a Connect field, for the IPO of a "connect invalid parameters" answer.
    pub const OFFSET_QID: u16 = connect_field::QID.start as u16;
    /// SQE byte offset of SQSIZE.
    pub const OFFSET_SQSIZE: u16 = connect_field::SQSIZE.start as u16;
    /// SQE byte offset of CATTR.
    pub const OFFSET_CATTR: u16 = connect_field::CATTR as u16;
    /// SQE byte offset of KATO.
    pub const OFFSET_KATO: u16 = connect_field::KATO.start as u16;
}

/// Size of the Connect command's data.
pub const CONNECT_DATA_LEN: usize = 1024;

mod connect_data_field {
    use crate::bytes::Field;
    pub const HOSTID: Field = 0..16;
    pub const CNTLID: Field = 16..18;
    pub const SUBNQN: Field = 256..512;
    pub const HOSTNQN: Field = 512..768;
}

/// Connect data (Fabrics Figure 20): what the host says about itself and what it wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectData {
    /// Host identifier (a UUID, little endian as sent).
    pub hostid: [u8; 16],
    /// Controller id: 0xFFFF asks for any (dynamic model); I/O queues carry the admin's cntlid.
    pub cntlid: u16,
    /// The subsystem the host connects to.
    pub subnqn: Nqn,
    /// The host's NQN.
    pub hostnqn: Nqn,
}

/// Connect data's "any controller" id for the dynamic controller model.
pub const CNTLID_DYNAMIC: u16 = 0xFFFF;

impl ConnectData {
    const WHAT: &'static str = "Connect data";

    /// Data byte offset of CNTLID (IATTR = 1 answers).
    pub const OFFSET_CNTLID: u16 = connect_data_field::CNTLID.start as u16;
    /// Data byte offset of SUBNQN.
    pub const OFFSET_SUBNQN: u16 = connect_data_field::SUBNQN.start as u16;
    /// Data byte offset of HOSTNQN.
    pub const OFFSET_HOSTNQN: u16 = connect_data_field::HOSTNQN.start as u16;

    /// Parses exactly 1024 bytes. Reserved bytes are not checked (later revisions define some;
    /// the Linux target does not check them either).
    pub fn parse(b: &[u8]) -> Result<ConnectData, ParseError> {
        exact(Self::WHAT, b, CONNECT_DATA_LEN)?;
        let mut hostid = [0u8; 16];
        hostid.copy_from_slice(&b[connect_data_field::HOSTID]);
        Ok(ConnectData {
            hostid,
            cntlid: le16(b, connect_data_field::CNTLID),
            subnqn: parse_nqn(
                Self::WHAT,
                "subnqn",
                connect_data_field::SUBNQN.start,
                &b[connect_data_field::SUBNQN],
            )?,
            hostnqn: parse_nqn(
                Self::WHAT,
                "hostnqn",
                connect_data_field::HOSTNQN.start,
                &b[connect_data_field::HOSTNQN],
            )?,
        })
    }

    /// Writes exactly 1024 bytes, reserved bytes zero.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, CONNECT_DATA_LEN)?;
        b.fill(0);
        b[connect_data_field::HOSTID].copy_from_slice(&self.hostid);
        put_le16(b, connect_data_field::CNTLID, self.cntlid);
        emit_nqn(&mut b[connect_data_field::SUBNQN], &self.subnqn);
        emit_nqn(&mut b[connect_data_field::HOSTNQN], &self.hostnqn);
        Ok(())
    }

    /// The data as 1024 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; CONNECT_DATA_LEN];
        // Cannot fail: exact size.
        let _ = self.emit(&mut b);
        b
    }
}

/// Connect completion DW0 (Fabrics Figure 21/22).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectResponse {
    /// Success: the controller id, and the authentication requirements: ATR in bit 17 and
    /// ASCR in bit 18, as Linux reads them (`NVME_CONNECT_AUTHREQ_ATR` / `_ASCR`).
    Success {
        /// Controller id allocated (admin queue) or confirmed (I/O queue).
        cntlid: u16,
        /// AUTHREQ: bit 0 in-band authentication (ATR), bit 1 ASCR. 0 = none required.
        authreq: u8,
    },
    /// "Connect invalid parameters": which field was wrong.
    InvalidParameter {
        /// Where the field is: the SQE or the Connect data.
        attribute: InvalidParameterIn,
        /// Byte offset of the field.
        offset: u16,
    },
}

/// IATTR: which structure an invalid parameter offset refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidParameterIn {
    /// The Connect SQE (IATTR bit 0 = 0).
    Command,
    /// The Connect data (IATTR bit 0 = 1).
    Data,
}

impl ConnectResponse {
    /// DW0 of the completion.
    pub fn to_dw0(&self) -> u32 {
        match *self {
            ConnectResponse::Success { cntlid, authreq } => {
                u32::from(cntlid) | u32::from(authreq & 0x3) << 17
            }
            ConnectResponse::InvalidParameter { attribute, offset } => {
                let iattr = match attribute {
                    InvalidParameterIn::Command => 0,
                    InvalidParameterIn::Data => 1,
                };
                u32::from(offset) | iattr << 16
            }
        }
    }

    /// Decodes DW0 of a successful Connect.
    pub fn success_from_dw0(dw0: u32) -> ConnectResponse {
        ConnectResponse::Success {
            cntlid: dw0 as u16,
            authreq: ((dw0 >> 17) & 0x3) as u8,
        }
    }

    /// Decodes DW0 of a "connect invalid parameters" completion.
    pub fn invalid_from_dw0(dw0: u32) -> ConnectResponse {
        ConnectResponse::InvalidParameter {
            attribute: if (dw0 >> 16) & 1 == 0 {
                InvalidParameterIn::Command
            } else {
                InvalidParameterIn::Data
            },
            offset: dw0 as u16,
        }
    }
}

mod property_field {
    use crate::bytes::Field;
    pub const ATTRIB: usize = 40;
    pub const RESERVED_ATTRIB: Field = 41..44;
    pub const OFFSET: Field = 44..48;
    pub const VALUE: Field = 48..56;
    pub const RESERVED_GET_TAIL: Field = 48..64;
    pub const RESERVED_SET_TAIL: Field = 56..64;
}

/// Size of a property access (ATTRIB bits 2:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertySize {
    /// 4 bytes (ATTRIB 0).
    Four,
    /// 8 bytes (ATTRIB 1).
    Eight,
}

impl PropertySize {
    fn parse(what: &'static str, attrib: u8) -> Result<PropertySize, ParseError> {
        match attrib {
            0 => Ok(PropertySize::Four),
            1 => Ok(PropertySize::Eight),
            v => Err(ParseError::InvalidField {
                what,
                field: "attrib",
                offset: property_field::ATTRIB,
                value: u64::from(v),
            }),
        }
    }

    fn attrib(self) -> u8 {
        match self {
            PropertySize::Four => 0,
            PropertySize::Eight => 1,
        }
    }

    /// Size in bytes.
    pub fn bytes(self) -> usize {
        match self {
            PropertySize::Four => 4,
            PropertySize::Eight => 8,
        }
    }
}

fn check_zero(sqe: &Sqe, what: &'static str, f: crate::bytes::Field) -> Result<(), ParseError> {
    if is_zero(sqe.as_bytes(), f.clone()) {
        Ok(())
    } else {
        let at = f
            .clone()
            .find(|&i| sqe.as_bytes()[i] != 0)
            .unwrap_or(f.start);
        Err(ParseError::InvalidField {
            what,
            field: "reserved",
            offset: at,
            value: u64::from(sqe.as_bytes()[at]),
        })
    }
}

/// Property Get (Fabrics §3.5, Figure 29). The value returns in CQE DW0 (and DW1 for 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PropertyGet {
    /// Command identifier.
    pub cid: u16,
    /// Access size.
    pub size: PropertySize,
    /// Property offset (e.g. [`property::CAP`]).
    pub offset: u32,
}

impl PropertyGet {
    const WHAT: &'static str = "Property Get";

    /// Parses a Property Get command.
    pub fn parse(sqe: &Sqe) -> Result<PropertyGet, ParseError> {
        expect(sqe, FabricsCommandType::PROPERTY_GET, Self::WHAT)?;
        let b = sqe.as_bytes();
        check_zero(sqe, Self::WHAT, property_field::RESERVED_ATTRIB)?;
        check_zero(sqe, Self::WHAT, property_field::RESERVED_GET_TAIL)?;
        Ok(PropertyGet {
            cid: sqe.cid(),
            size: PropertySize::parse(Self::WHAT, b[property_field::ATTRIB])?,
            offset: le32(b, property_field::OFFSET),
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        let mut s = fabrics_sqe(FabricsCommandType::PROPERTY_GET, self.cid);
        let b = s.as_bytes_mut();
        b[property_field::ATTRIB] = self.size.attrib();
        put_le32(b, property_field::OFFSET, self.offset);
        s
    }
}

/// Property Set (Fabrics §3.6, Figure 31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PropertySet {
    /// Command identifier.
    pub cid: u16,
    /// Access size.
    pub size: PropertySize,
    /// Property offset (e.g. [`property::CC`]).
    pub offset: u32,
    /// Value (the low 4 bytes for a 4-byte property).
    pub value: u64,
}

impl PropertySet {
    const WHAT: &'static str = "Property Set";

    /// Parses a Property Set command.
    pub fn parse(sqe: &Sqe) -> Result<PropertySet, ParseError> {
        expect(sqe, FabricsCommandType::PROPERTY_SET, Self::WHAT)?;
        let b = sqe.as_bytes();
        check_zero(sqe, Self::WHAT, property_field::RESERVED_ATTRIB)?;
        check_zero(sqe, Self::WHAT, property_field::RESERVED_SET_TAIL)?;
        Ok(PropertySet {
            cid: sqe.cid(),
            size: PropertySize::parse(Self::WHAT, b[property_field::ATTRIB])?,
            offset: le32(b, property_field::OFFSET),
            value: le64(b, property_field::VALUE),
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        let mut s = fabrics_sqe(FabricsCommandType::PROPERTY_SET, self.cid);
        let b = s.as_bytes_mut();
        b[property_field::ATTRIB] = self.size.attrib();
        put_le32(b, property_field::OFFSET, self.offset);
        put_le64(b, property_field::VALUE, self.value);
        s
    }
}

/// Disconnect (Fabrics §3.4): tears down the I/O queue it arrives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disconnect {
    /// Command identifier.
    pub cid: u16,
    /// Record format (0).
    pub recfmt: u16,
}

impl Disconnect {
    const WHAT: &'static str = "Disconnect";

    /// Parses a Disconnect command.
    pub fn parse(sqe: &Sqe) -> Result<Disconnect, ParseError> {
        expect(sqe, FabricsCommandType::DISCONNECT, Self::WHAT)?;
        Ok(Disconnect {
            cid: sqe.cid(),
            recfmt: le16(sqe.as_bytes(), 40..42),
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Sqe {
        let mut s = fabrics_sqe(FabricsCommandType::DISCONNECT, self.cid);
        put_le16(s.as_bytes_mut(), 40..42, self.recfmt);
        s
    }
}

mod auth_field {
    use crate::bytes::Field;
    pub const SPSP0: usize = 41;
    pub const SPSP1: usize = 42;
    pub const SECP: usize = 43;
    pub const LEN: Field = 44..48;
}

/// Authentication Send or Receive envelope (Fabrics §3.1/§3.2, Figures 14 and 16).
///
/// The payload (DH-HMAC-CHAP messages) travels in the data buffer; this is only the envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Authentication {
    /// Command identifier.
    pub cid: u16,
    /// Send (host → controller) or Receive (controller → host).
    pub direction: AuthDirection,
    /// Where the payload is.
    pub sgl: SglDescriptor,
    /// Security protocol (0xE9 = NVMe in-band authentication).
    pub secp: u8,
    /// SP specific 0.
    pub spsp0: u8,
    /// SP specific 1.
    pub spsp1: u8,
    /// Transfer length (Send) or allocation length (Receive) in bytes.
    pub length: u32,
}

/// Direction of an authentication command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthDirection {
    /// Authentication Send.
    Send,
    /// Authentication Receive.
    Receive,
}

impl Authentication {
    const WHAT: &'static str = "Authentication";

    /// Parses an Authentication Send or Receive command.
    pub fn parse(sqe: &Sqe) -> Result<Authentication, ParseError> {
        let direction = match command_type(sqe) {
            Some(FabricsCommandType::AUTH_SEND) => AuthDirection::Send,
            Some(FabricsCommandType::AUTH_RECEIVE) => AuthDirection::Receive,
            Some(t) => {
                return Err(ParseError::InvalidField {
                    what: Self::WHAT,
                    field: "fctype",
                    offset: 4,
                    value: u64::from(t.0),
                })
            }
            None => {
                return Err(ParseError::WrongOpcode {
                    what: Self::WHAT,
                    opcode: sqe.opcode(),
                })
            }
        };
        let b = sqe.as_bytes();
        Ok(Authentication {
            cid: sqe.cid(),
            direction,
            sgl: sqe.sgl1()?,
            secp: b[auth_field::SECP],
            spsp0: b[auth_field::SPSP0],
            spsp1: b[auth_field::SPSP1],
            length: le32(b, auth_field::LEN),
        })
    }

    /// Builds the SQE.
    pub fn to_sqe(&self) -> Result<Sqe, ParseError> {
        let ty = match self.direction {
            AuthDirection::Send => FabricsCommandType::AUTH_SEND,
            AuthDirection::Receive => FabricsCommandType::AUTH_RECEIVE,
        };
        let mut s = fabrics_sqe(ty, self.cid);
        s.set_sgl1(&self.sgl)?;
        let b = s.as_bytes_mut();
        b[auth_field::SECP] = self.secp;
        b[auth_field::SPSP0] = self.spsp0;
        b[auth_field::SPSP1] = self.spsp1;
        put_le32(b, auth_field::LEN, self.length);
        Ok(s)
    }
}

pub mod property {
    //! Controller properties reachable by Property Get/Set (Base §3.1.3, Figure 33) and their
    //! fields. Only the properties fabrics controllers implement are modelled.

    /// Controller Capabilities (8 bytes, read only).
    pub const CAP: u32 = 0x00;
    /// Version (4 bytes, read only).
    pub const VS: u32 = 0x08;
    /// Controller Configuration (4 bytes).
    pub const CC: u32 = 0x14;
    /// Controller Status (4 bytes, read only).
    pub const CSTS: u32 = 0x1C;
    /// NVM Subsystem Reset (4 bytes).
    pub const NSSR: u32 = 0x20;

    /// The access size a property requires, or `None` for an offset fabrics does not define.
    pub fn size_of(offset: u32) -> Option<super::PropertySize> {
        match offset {
            CAP => Some(super::PropertySize::Eight),
            VS | CC | CSTS | NSSR => Some(super::PropertySize::Four),
            _ => None,
        }
    }

    fn bits(v: u64, lo: u32, width: u32) -> u64 {
        (v >> lo) & ((1u64 << width) - 1)
    }

    /// CAP — Controller Capabilities (Base Figure 36).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Cap {
        /// Maximum Queue Entries Supported, 0-based (bits 15:0).
        pub mqes: u16,
        /// Contiguous Queues Required (bit 16).
        pub cqr: bool,
        /// Arbitration Mechanism Supported (bits 18:17).
        pub ams: u8,
        /// Timeout in 500 ms units for CSTS.RDY to change (bits 31:24).
        pub to: u8,
        /// Doorbell Stride (bits 35:32).
        pub dstrd: u8,
        /// NVM Subsystem Reset Supported (bit 36).
        pub nssrs: bool,
        /// Command Sets Supported (bits 44:37; bit 37 = NVM command set).
        pub css: u8,
        /// Boot Partition Support (bit 45).
        pub bps: bool,
        /// Controller Power Scope (bits 47:46).
        pub cps: u8,
        /// Memory Page Size Minimum, 2^(12+n) (bits 51:48); hosts require 0.
        pub mpsmin: u8,
        /// Memory Page Size Maximum (bits 55:52).
        pub mpsmax: u8,
        /// Persistent Memory Region Supported (bit 56).
        pub pmrs: bool,
        /// Controller Memory Buffer Supported (bit 57).
        pub cmbs: bool,
        /// NVM Subsystem Shutdown Supported (bit 58).
        pub nsss: bool,
        /// Controller Ready Modes Supported (bits 60:59).
        pub crms: u8,
    }

    impl Cap {
        /// Decodes the 64-bit value (reserved bits ignored).
        pub fn from_u64(v: u64) -> Cap {
            Cap {
                mqes: bits(v, 0, 16) as u16,
                cqr: bits(v, 16, 1) != 0,
                ams: bits(v, 17, 2) as u8,
                to: bits(v, 24, 8) as u8,
                dstrd: bits(v, 32, 4) as u8,
                nssrs: bits(v, 36, 1) != 0,
                css: bits(v, 37, 8) as u8,
                bps: bits(v, 45, 1) != 0,
                cps: bits(v, 46, 2) as u8,
                mpsmin: bits(v, 48, 4) as u8,
                mpsmax: bits(v, 52, 4) as u8,
                pmrs: bits(v, 56, 1) != 0,
                cmbs: bits(v, 57, 1) != 0,
                nsss: bits(v, 58, 1) != 0,
                crms: bits(v, 59, 2) as u8,
            }
        }

        /// Encodes the 64-bit value (fields truncated to their widths).
        pub fn to_u64(&self) -> u64 {
            u64::from(self.mqes)
                | u64::from(self.cqr) << 16
                | u64::from(self.ams & 0x3) << 17
                | u64::from(self.to) << 24
                | u64::from(self.dstrd & 0xF) << 32
                | u64::from(self.nssrs) << 36
                | u64::from(self.css) << 37
                | u64::from(self.bps) << 45
                | u64::from(self.cps & 0x3) << 46
                | u64::from(self.mpsmin & 0xF) << 48
                | u64::from(self.mpsmax & 0xF) << 52
                | u64::from(self.pmrs) << 56
                | u64::from(self.cmbs) << 57
                | u64::from(self.nsss) << 58
                | u64::from(self.crms & 0x3) << 59
        }
    }

    /// VS — Version (Base Figure 37): major, minor, tertiary.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
    pub struct Version {
        /// Major version (bits 31:16).
        pub major: u16,
        /// Minor version (bits 15:8).
        pub minor: u8,
        /// Tertiary version (bits 7:0).
        pub tertiary: u8,
    }

    impl Version {
        /// NVMe 1.3: the first with NS identification descriptors.
        pub const V1_3: Version = Version::new(1, 3, 0);
        /// NVMe 1.4.
        pub const V1_4: Version = Version::new(1, 4, 0);
        /// NVMe 2.0.
        pub const V2_0: Version = Version::new(2, 0, 0);

        /// A version.
        pub const fn new(major: u16, minor: u8, tertiary: u8) -> Version {
            Version {
                major,
                minor,
                tertiary,
            }
        }

        /// Decodes the 32-bit value.
        pub fn from_u32(v: u32) -> Version {
            Version::new((v >> 16) as u16, (v >> 8) as u8, v as u8)
        }

        /// Encodes the 32-bit value.
        pub fn to_u32(&self) -> u32 {
            u32::from(self.major) << 16 | u32::from(self.minor) << 8 | u32::from(self.tertiary)
        }
    }

    /// CC.SHN / CSTS.SHST shutdown encodings.
    pub mod shutdown {
        /// CC.SHN: no notification.
        pub const SHN_NONE: u8 = 0;
        /// CC.SHN: normal shutdown.
        pub const SHN_NORMAL: u8 = 1;
        /// CC.SHN: abrupt shutdown.
        pub const SHN_ABRUPT: u8 = 2;
        /// CSTS.SHST: normal operation.
        pub const SHST_NORMAL: u8 = 0;
        /// CSTS.SHST: shutdown processing occurring.
        pub const SHST_OCCURRING: u8 = 1;
        /// CSTS.SHST: shutdown processing complete.
        pub const SHST_COMPLETE: u8 = 2;
    }

    /// CC — Controller Configuration (Base Figure 41).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Cc {
        /// Enable (bit 0).
        pub en: bool,
        /// I/O Command Set Selected (bits 6:4).
        pub css: u8,
        /// Memory Page Size, 2^(12+n) (bits 10:7).
        pub mps: u8,
        /// Arbitration Mechanism Selected (bits 13:11).
        pub ams: u8,
        /// Shutdown Notification (bits 15:14).
        pub shn: u8,
        /// I/O Submission Queue Entry Size, 2^n (bits 19:16); 6 = 64 bytes.
        pub iosqes: u8,
        /// I/O Completion Queue Entry Size, 2^n (bits 23:20); 4 = 16 bytes.
        pub iocqes: u8,
        /// Controller Ready Independent of Media Enable (bit 24).
        pub crime: bool,
    }

    impl Cc {
        /// Decodes the 32-bit value (reserved bits ignored).
        pub fn from_u32(v: u32) -> Cc {
            let v = u64::from(v);
            Cc {
                en: bits(v, 0, 1) != 0,
                css: bits(v, 4, 3) as u8,
                mps: bits(v, 7, 4) as u8,
                ams: bits(v, 11, 3) as u8,
                shn: bits(v, 14, 2) as u8,
                iosqes: bits(v, 16, 4) as u8,
                iocqes: bits(v, 20, 4) as u8,
                crime: bits(v, 24, 1) != 0,
            }
        }

        /// Encodes the 32-bit value.
        pub fn to_u32(&self) -> u32 {
            u32::from(self.en)
                | u32::from(self.css & 0x7) << 4
                | u32::from(self.mps & 0xF) << 7
                | u32::from(self.ams & 0x7) << 11
                | u32::from(self.shn & 0x3) << 14
                | u32::from(self.iosqes & 0xF) << 16
                | u32::from(self.iocqes & 0xF) << 20
                | u32::from(self.crime) << 24
        }
    }

    /// CSTS — Controller Status (Base Figure 42).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Csts {
        /// Ready (bit 0).
        pub rdy: bool,
        /// Controller Fatal Status (bit 1).
        pub cfs: bool,
        /// Shutdown Status (bits 3:2).
        pub shst: u8,
        /// NVM Subsystem Reset Occurred (bit 4).
        pub nssro: bool,
        /// Processing Paused (bit 5).
        pub pp: bool,
        /// Shutdown Type (bit 6).
        pub st: bool,
    }

    impl Csts {
        /// Decodes the 32-bit value (reserved bits ignored).
        pub fn from_u32(v: u32) -> Csts {
            let v = u64::from(v);
            Csts {
                rdy: bits(v, 0, 1) != 0,
                cfs: bits(v, 1, 1) != 0,
                shst: bits(v, 2, 2) as u8,
                nssro: bits(v, 4, 1) != 0,
                pp: bits(v, 5, 1) != 0,
                st: bits(v, 6, 1) != 0,
            }
        }

        /// Encodes the 32-bit value.
        pub fn to_u32(&self) -> u32 {
            u32::from(self.rdy)
                | u32::from(self.cfs) << 1
                | u32::from(self.shst & 0x3) << 2
                | u32::from(self.nssro) << 4
                | u32::from(self.pp) << 5
                | u32::from(self.st) << 6
        }
    }
}

#[cfg(test)]
#[path = "fabrics_tests.rs"]
mod tests;
