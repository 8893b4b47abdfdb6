//! Discovery log page (LID 70h; Base 2.0 §5.16.1.23, Figures 262–264; Fabrics 1.1 §5.3; Linux
//! `struct nvmf_disc_rsp_page_hdr` and `struct nvmf_disc_rsp_page_entry`).
//!
//! A 1024-byte header (generation counter, number of records, record format) followed by
//! `numrec` 1024-byte entries. Hosts read the header first and then the whole page, so a read
//! may stop anywhere: [`DiscoveryLog::parse`] wants exactly the whole page, while
//! [`DiscoveryLog::parse_partial`] accepts any prefix of at least the header and returns the
//! whole entries present (never more than `numrec`), with `numrec` for the caller to re-read.
//! No count from the page is trusted for allocation: only entries actually present are read.
//!
//! TRSVCID and TRADDR are space-padded ASCII, SUBNQN a NUL-padded NQN. The transport specific
//! address subtype (TSAS) is typed for RDMA and TCP and kept raw for other transports.

use crate::error::{at_least, exact, room, ParseError};
use crate::identify::{emit_ascii_field, get, parse_ascii_field, put, Opaque};
use crate::text::{emit_nqn, parse_nqn, Nqn};

/// Size of the discovery log page header.
pub const DISCOVERY_HEADER_LEN: usize = 1024;
/// Size of one discovery log page entry.
pub const DISCOVERY_ENTRY_LEN: usize = 1024;

mod field {
    use crate::bytes::Field;
    // Header (Base Figure 262).
    pub const GENCTR: Field = 0..8;
    pub const NUMREC: Field = 8..16;
    pub const RECFMT: Field = 16..18;
    // Entry (Base Figure 264).
    pub const TRTYPE: Field = 0..1;
    pub const ADRFAM: Field = 1..2;
    pub const SUBTYPE: Field = 2..3;
    pub const TREQ: Field = 3..4;
    pub const PORTID: Field = 4..6;
    pub const CNTLID: Field = 6..8;
    pub const ASQSZ: Field = 8..10;
    pub const EFLAGS: Field = 10..12;
    pub const TRSVCID: Field = 32..64;
    pub const SUBNQN: Field = 256..512;
    pub const TRADDR: Field = 512..768;
    pub const TSAS: Field = 768..1024;
    // TSAS for RDMA (Base Figure 265), relative to TSAS.
    pub const RDMA_QPTYPE: usize = 0;
    pub const RDMA_PRTYPE: usize = 1;
    pub const RDMA_CMS: usize = 2;
    pub const RDMA_PKEY: Field = 8..10;
    // TSAS for TCP (NVMe/TCP Figure 7), relative to TSAS.
    pub const TCP_SECTYPE: usize = 0;
    #[cfg(test)]
    pub const ENTRY_RESERVED: &[Field] = &[12..32, 64..256];
}

code_newtype! {
    /// Transport Type (TRTYPE; Base Figure 264, Linux `NVMF_TRTYPE_*`).
    pub struct TransportType(u8) {
        /// RDMA transport.
        RDMA = 0x01,
        /// Fibre Channel.
        FC = 0x02,
        /// TCP.
        TCP = 0x03,
        /// Intra-host transport (loopback; reserved for host use).
        INTRA_HOST = 0xFE,
    }
}

code_newtype! {
    /// Address Family (ADRFAM; Base Figure 264, Linux `NVMF_ADDR_FAMILY_*`).
    pub struct AddressFamily(u8) {
        /// PCI Express.
        PCI = 0x00,
        /// IPv4.
        IPV4 = 0x01,
        /// IPv6.
        IPV6 = 0x02,
        /// InfiniBand.
        IB = 0x03,
        /// Fibre Channel.
        FC = 0x04,
        /// Intra-host.
        INTRA_HOST = 0xFE,
    }
}

code_newtype! {
    /// Subsystem Type of an entry (SUBTYPE; Base Figure 264, Linux `enum nvme_subsys_type`).
    pub struct DiscoverySubtype(u8) {
        /// Referral to another discovery subsystem.
        REFERRAL = 0x01,
        /// An NVM subsystem with I/O controllers.
        NVME = 0x02,
        /// The discovery subsystem being queried (current discovery subsystem).
        CURRENT_DISCOVERY = 0x03,
    }
}

code_newtype! {
    /// RDMA QP service type (TSAS byte 0 for RDMA).
    pub struct RdmaQpType(u8) {
        /// Reliable Connected.
        CONNECTED = 0x01,
        /// Reliable Datagram.
        DATAGRAM = 0x02,
    }
}

code_newtype! {
    /// RDMA provider type (TSAS byte 1 for RDMA).
    pub struct RdmaProviderType(u8) {
        /// No provider specified.
        NOT_SPECIFIED = 0x01,
        /// InfiniBand.
        IB = 0x02,
        /// RoCE v1.
        ROCE = 0x03,
        /// RoCE v2.
        ROCEV2 = 0x04,
        /// iWARP.
        IWARP = 0x05,
    }
}

code_newtype! {
    /// RDMA connection management service (TSAS byte 2 for RDMA).
    pub struct RdmaCms(u8) {
        /// Sockets-based addressing through the RDMA connection manager.
        RDMA_CM = 0x01,
    }
}

/// Transport Specific Address Subtype (entry bytes 1023:768).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tsas {
    /// RDMA (TRTYPE 1); reserved bytes ignored.
    Rdma {
        /// QP service type.
        qptype: RdmaQpType,
        /// Provider type.
        prtype: RdmaProviderType,
        /// Connection management service.
        cms: RdmaCms,
        /// Partition key (InfiniBand).
        pkey: u16,
    },
    /// TCP (TRTYPE 3): security type (0 none, 1 TLS 1.2, 2 TLS 1.3); other bytes reserved.
    Tcp {
        /// Security type.
        sectype: u8,
    },
    /// Any other transport, kept verbatim.
    Other(Box<Opaque<256>>),
}

impl Tsas {
    /// What Linux nvmet advertises for an RDMA port: connected QPs, no provider specified,
    /// RDMA CM, pkey 0.
    pub const RDMA_CM: Tsas = Tsas::Rdma {
        qptype: RdmaQpType::CONNECTED,
        prtype: RdmaProviderType::NOT_SPECIFIED,
        cms: RdmaCms::RDMA_CM,
        pkey: 0,
    };

    fn parse(trtype: TransportType, b: &[u8]) -> Tsas {
        match trtype {
            TransportType::RDMA => Tsas::Rdma {
                qptype: RdmaQpType(b[field::RDMA_QPTYPE]),
                prtype: RdmaProviderType(b[field::RDMA_PRTYPE]),
                cms: RdmaCms(b[field::RDMA_CMS]),
                pkey: get(b, field::RDMA_PKEY),
            },
            TransportType::TCP => Tsas::Tcp {
                sectype: b[field::TCP_SECTYPE],
            },
            _ => Tsas::Other(Box::new(Opaque::read(b, 0..256))),
        }
    }

    /// Writes 256 bytes; fails if this subtype does not belong to `trtype`.
    fn emit(&self, trtype: TransportType, b: &mut [u8]) -> Result<(), ParseError> {
        b.fill(0);
        match (self, trtype) {
            (
                Tsas::Rdma {
                    qptype,
                    prtype,
                    cms,
                    pkey,
                },
                TransportType::RDMA,
            ) => {
                b[field::RDMA_QPTYPE] = qptype.0;
                b[field::RDMA_PRTYPE] = prtype.0;
                b[field::RDMA_CMS] = cms.0;
                put(b, field::RDMA_PKEY, *pkey);
            }
            (Tsas::Tcp { sectype }, TransportType::TCP) => b[field::TCP_SECTYPE] = *sectype,
            (Tsas::Other(raw), t) if t != TransportType::RDMA && t != TransportType::TCP => {
                raw.write(b, 0..256)
            }
            _ => {
                return Err(ParseError::InvalidField {
                    what: "Discovery log entry",
                    field: "tsas does not match trtype",
                    offset: field::TSAS.start,
                    value: u64::from(trtype.0),
                })
            }
        }
        Ok(())
    }
}

/// One discovery log page entry: how to reach one subsystem through one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryEntry {
    /// Transport Type (byte 0).
    pub trtype: TransportType,
    /// Address Family (byte 1).
    pub adrfam: AddressFamily,
    /// Subsystem Type (byte 2).
    pub subtype: DiscoverySubtype,
    /// Transport Requirements (byte 3): bits 1:0 secure channel (0 not specified, 1 required,
    /// 2 not required), bit 2 SQ flow control disable supported.
    pub treq: u8,
    /// Port ID (bytes 5:4).
    pub portid: u16,
    /// Controller ID (bytes 7:6): FFFFh = dynamic controller model.
    pub cntlid: u16,
    /// Admin Max SQ Size (bytes 9:8), at least 32.
    pub asqsz: u16,
    /// Entry Flags (bytes 11:10): bit 0 duplicate returned information, bit 1 explicit
    /// persistent connection support for discovery, bit 2 no CDC connectivity.
    pub eflags: u16,
    /// Transport Service Identifier (bytes 63:32): the port, e.g. "4420".
    pub trsvcid: String,
    /// Subsystem NQN (bytes 511:256).
    pub subnqn: Nqn,
    /// Transport Address (bytes 767:512), e.g. "192.168.1.10".
    pub traddr: String,
    /// Transport Specific Address Subtype (bytes 1023:768).
    pub tsas: Tsas,
}

impl DiscoveryEntry {
    const WHAT: &'static str = "Discovery log entry";

    /// Parses exactly 1024 bytes.
    pub fn parse(b: &[u8]) -> Result<DiscoveryEntry, ParseError> {
        exact(Self::WHAT, b, DISCOVERY_ENTRY_LEN)?;
        use field::*;
        let trtype = TransportType(get(b, TRTYPE));
        Ok(DiscoveryEntry {
            trtype,
            adrfam: AddressFamily(get(b, ADRFAM)),
            subtype: DiscoverySubtype(get(b, SUBTYPE)),
            treq: get(b, TREQ),
            portid: get(b, PORTID),
            cntlid: get(b, CNTLID),
            asqsz: get(b, ASQSZ),
            eflags: get(b, EFLAGS),
            trsvcid: parse_ascii_field(Self::WHAT, "trsvcid", b, TRSVCID)?,
            subnqn: parse_nqn(Self::WHAT, "subnqn", SUBNQN.start, &b[SUBNQN])?,
            traddr: parse_ascii_field(Self::WHAT, "traddr", b, TRADDR)?,
            tsas: Tsas::parse(trtype, &b[TSAS]),
        })
    }

    /// Writes exactly 1024 bytes. Text that does not fit or is not printable ASCII, or a TSAS
    /// of another transport than `trtype`, is an error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, DISCOVERY_ENTRY_LEN)?;
        use field::*;
        b.fill(0);
        put(b, TRTYPE, self.trtype.0);
        put(b, ADRFAM, self.adrfam.0);
        put(b, SUBTYPE, self.subtype.0);
        put(b, TREQ, self.treq);
        put(b, PORTID, self.portid);
        put(b, CNTLID, self.cntlid);
        put(b, ASQSZ, self.asqsz);
        put(b, EFLAGS, self.eflags);
        emit_ascii_field(Self::WHAT, "trsvcid", b, TRSVCID, &self.trsvcid)?;
        emit_nqn(&mut b[SUBNQN], &self.subnqn);
        emit_ascii_field(Self::WHAT, "traddr", b, TRADDR, &self.traddr)?;
        self.tsas.emit(self.trtype, &mut b[TSAS])
    }

    /// The entry as 1024 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; DISCOVERY_ENTRY_LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// The discovery log page header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DiscoveryLogHeader {
    /// Generation Counter (bytes 7:0): changes whenever the page content changes.
    pub genctr: u64,
    /// Number of Records (bytes 15:8).
    pub numrec: u64,
}

impl DiscoveryLogHeader {
    const WHAT: &'static str = "Discovery log header";

    /// Parses exactly 1024 bytes. A record format other than 0 is [`ParseError::InvalidField`]
    /// at byte 16: its entries could not be read.
    pub fn parse(b: &[u8]) -> Result<DiscoveryLogHeader, ParseError> {
        exact(Self::WHAT, b, DISCOVERY_HEADER_LEN)?;
        let recfmt: u16 = get(b, field::RECFMT);
        if recfmt != 0 {
            return Err(ParseError::InvalidField {
                what: Self::WHAT,
                field: "recfmt",
                offset: field::RECFMT.start,
                value: u64::from(recfmt),
            });
        }
        Ok(DiscoveryLogHeader {
            genctr: get(b, field::GENCTR),
            numrec: get(b, field::NUMREC),
        })
    }

    /// Writes exactly 1024 bytes (record format 0).
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, DISCOVERY_HEADER_LEN)?;
        b.fill(0);
        put(b, field::GENCTR, self.genctr);
        put(b, field::NUMREC, self.numrec);
        Ok(())
    }
}

/// A complete discovery log page.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DiscoveryLog {
    /// Generation counter.
    pub genctr: u64,
    /// The entries (NUMREC is their number).
    pub entries: Vec<DiscoveryEntry>,
}

/// What a possibly short read of the discovery log page holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PartialDiscoveryLog {
    /// The header, with the page's full record count.
    pub header: DiscoveryLogHeader,
    /// The whole entries present in the read, at most `header.numrec`.
    pub entries: Vec<DiscoveryEntry>,
}

impl PartialDiscoveryLog {
    /// Whether every record the header announces was present.
    pub fn is_complete(&self) -> bool {
        self.entries.len() as u64 == self.header.numrec
    }

    /// Bytes the host must read for the whole page, or `None` if that overflows `u64`.
    pub fn full_len(&self) -> Option<u64> {
        self.header
            .numrec
            .checked_mul(DISCOVERY_ENTRY_LEN as u64)?
            .checked_add(DISCOVERY_HEADER_LEN as u64)
    }
}

impl DiscoveryLog {
    const WHAT: &'static str = "Discovery log";

    /// Bytes the page takes on the wire.
    pub fn encoded_len(&self) -> usize {
        DISCOVERY_HEADER_LEN + DISCOVERY_ENTRY_LEN * self.entries.len()
    }

    /// Parses a complete page: exactly the header and NUMREC entries.
    pub fn parse(b: &[u8]) -> Result<DiscoveryLog, ParseError> {
        at_least(Self::WHAT, b, DISCOVERY_HEADER_LEN)?;
        let header = DiscoveryLogHeader::parse(&b[..DISCOVERY_HEADER_LEN])?;
        let need = header
            .numrec
            .checked_mul(DISCOVERY_ENTRY_LEN as u64)
            .and_then(|n| n.checked_add(DISCOVERY_HEADER_LEN as u64))
            .unwrap_or(u64::MAX);
        let got = b.len() as u64;
        if need > got {
            return Err(ParseError::Truncated {
                what: Self::WHAT,
                need: usize::try_from(need).unwrap_or(usize::MAX),
                got: b.len(),
            });
        }
        if need < got {
            return Err(ParseError::TrailingBytes {
                what: Self::WHAT,
                expected: need as usize,
                got: b.len(),
            });
        }
        let p = Self::parse_partial(b)?;
        Ok(DiscoveryLog {
            genctr: p.header.genctr,
            entries: p.entries,
        })
    }

    /// Parses a read of the page that may stop early (after the header, or inside an entry) or
    /// run past its end: the whole entries present, up to NUMREC, are parsed; a truncated last
    /// entry and anything after NUMREC entries are ignored.
    pub fn parse_partial(b: &[u8]) -> Result<PartialDiscoveryLog, ParseError> {
        at_least(Self::WHAT, b, DISCOVERY_HEADER_LEN)?;
        let header = DiscoveryLogHeader::parse(&b[..DISCOVERY_HEADER_LEN])?;
        let whole = (b.len() - DISCOVERY_HEADER_LEN) / DISCOVERY_ENTRY_LEN;
        let n = usize::try_from(header.numrec).map_or(whole, |n| n.min(whole));
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let at = DISCOVERY_HEADER_LEN + DISCOVERY_ENTRY_LEN * i;
            entries.push(
                DiscoveryEntry::parse(&b[at..at + DISCOVERY_ENTRY_LEN])
                    .map_err(|e| shift(e, at))?,
            );
        }
        Ok(PartialDiscoveryLog { header, entries })
    }

    /// Writes the page into exactly [`Self::encoded_len`] bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, self.encoded_len())?;
        DiscoveryLogHeader {
            genctr: self.genctr,
            numrec: self.entries.len() as u64,
        }
        .emit(&mut b[..DISCOVERY_HEADER_LEN])?;
        for (i, e) in self.entries.iter().enumerate() {
            let at = DISCOVERY_HEADER_LEN + DISCOVERY_ENTRY_LEN * i;
            e.emit(&mut b[at..at + DISCOVERY_ENTRY_LEN])
                .map_err(|err| shift(err, at))?;
        }
        Ok(())
    }

    /// The page as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ParseError> {
        let mut b = vec![0u8; self.encoded_len()];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// Moves an entry-relative error offset to its offset in the page.
fn shift(e: ParseError, by: usize) -> ParseError {
    match e {
        ParseError::InvalidField {
            what,
            field,
            offset,
            value,
        } => ParseError::InvalidField {
            what,
            field,
            offset: offset + by,
            value,
        },
        ParseError::InvalidText {
            what,
            field,
            offset,
            reason,
        } => ParseError::InvalidText {
            what,
            field,
            offset: offset + by,
            reason,
        },
        other => other,
    }
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
