//! The sans-IO block-command core: what a logical unit answers, and what it asks of storage.
//!
//! [`LogicalUnit::execute`] takes a parsed [`Command`] and returns an [`Outcome`]: data-in to
//! send with GOOD status (INQUIRY, READ CAPACITY, MODE SENSE, REQUEST SENSE), GOOD with nothing,
//! CHECK CONDITION with sense, or the storage operation ([`Io`]) the caller runs on its
//! namespace, range-checked. REPORT LUNS belongs to the target, not a logical unit:
//! [`report_luns`]. The data-out of UNMAP and WRITE SAME is read by [`LogicalUnit::unmap_list`]
//! and [`LogicalUnit::write_same`].
//!
//! The formats follow SPC-4 and SBC-3, checked against Linux `sd` (what it reads and when) and
//! the tgt and LIO targets.

use crate::bytes::{be16, be32, be64, put_be16, put_be32, put_be64};
use crate::cdb::{Command, PageControl};
use crate::sense::{Asc, Sense, SenseKey};

/// What a logical unit is, as the host sees it. Built by the target from a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalUnit {
    /// Logical block size in bytes (512 or 4096).
    pub block_size: u32,
    /// Number of logical blocks.
    pub blocks: u64,
    /// log2 of logical blocks per physical block (READ CAPACITY(16)'s LBPPBE).
    pub blocks_per_physical_exp: u8,
    /// T10 vendor identification, 8 ASCII bytes (space padded).
    pub vendor: [u8; 8],
    /// Product identification, 16 ASCII bytes.
    pub product: [u8; 16],
    /// Product revision level, 4 ASCII bytes.
    pub revision: [u8; 4],
    /// Unit serial number (VPD 0x80): printable ASCII.
    pub serial: String,
    /// A 16-byte globally unique identifier (the namespace's NGUID), given as an EUI-64 based
    /// 16-byte designator in VPD 0x83.
    pub eui128: [u8; 16],
    /// The iSCSI target port's name as SCSI name string designator (`iqn…,t,0x0001`), and its
    /// relative port identifier, when served over iSCSI.
    pub target_port: Option<(String, u16)>,
    /// A volatile write cache is on (MODE SENSE caching page WCE): the host sends SYNCHRONIZE
    /// CACHE to make writes durable.
    pub write_cache: bool,
    /// The logical unit refuses writes.
    pub read_only: bool,
    /// Largest transfer in blocks (VPD 0xB0).
    pub max_transfer_blocks: u32,
    /// Transfer size that avoids partial-stripe writes, in blocks (the full stripe; 0: none).
    pub optimal_transfer_blocks: u32,
    /// Granularity below which transfers cost more, in blocks (the chunk; 0: none).
    pub optimal_granularity_blocks: u16,
    /// UNMAP and WRITE SAME with UNMAP are served, with these limits.
    pub unmap: Option<UnmapLimits>,
    /// The namespace behind the LUN is enabled. When not, commands that touch the medium,
    /// TEST UNIT READY and START answer NOT READY, MANUAL INTERVENTION REQUIRED.
    pub ready: bool,
}

/// The unmap limits of a logical unit (VPD 0xB0) and what it reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnmapLimits {
    /// Most blocks one UNMAP command may name, all descriptors together.
    pub max_blocks: u32,
    /// Most block descriptors in one UNMAP parameter list.
    pub max_descriptors: u32,
    /// The optimal unmap granularity, in blocks.
    pub granularity: u32,
    /// Unmapped blocks read back as zeroes (LBPRZ).
    pub reads_zero: bool,
}

/// What the caller does with a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Send this data-in, then status GOOD. Already cut to the allocation length; the transport
    /// reports any residual against the host's expected transfer length.
    DataIn(Vec<u8>),
    /// Status GOOD, no data.
    Good,
    /// CHECK CONDITION with this sense.
    Check(Sense),
    /// Run this storage operation, then status GOOD (or CHECK CONDITION from its failure).
    Io(Io),
}

/// A storage operation, range-checked against the logical unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Read `blocks` blocks from `lba` into the data-in buffer.
    Read {
        /// First block.
        lba: u64,
        /// Number of blocks (at least 1).
        blocks: u32,
        /// Force unit access.
        fua: bool,
    },
    /// Write the data-out buffer to `blocks` blocks from `lba`.
    Write {
        /// First block.
        lba: u64,
        /// Number of blocks (at least 1).
        blocks: u32,
        /// Durable before status (FUA).
        fua: bool,
    },
    /// Make every completed write durable (the range is advisory: the whole cache is flushed).
    Flush,
    /// The data-out buffer is WRITE SAME's one block: hand it to
    /// [`LogicalUnit::write_same`].
    WriteSame {
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// UNMAP was set.
        unmap: bool,
    },
    /// Write zeroes over the range (WRITE SAME with NDOB), deallocating it if `unmap`.
    WriteZeroes {
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// Deallocate where the namespace can (UNMAP).
        unmap: bool,
    },
    /// The data-out buffer is UNMAP's parameter list of `param_len` bytes: hand it to
    /// [`LogicalUnit::unmap_list`].
    Unmap {
        /// Parameter list length.
        param_len: u16,
    },
}

/// A block range to deallocate, from an UNMAP parameter list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRange {
    /// First block.
    pub lba: u64,
    /// Number of blocks (at least 1).
    pub blocks: u32,
}

/// What WRITE SAME's data block asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteSameAction {
    /// The block is all zeroes: write zeroes over the range, deallocating it if `unmap`.
    WriteZeroes {
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// Deallocate where the namespace can.
        unmap: bool,
    },
}

/// Length of standard INQUIRY data returned (with version descriptors).
pub const INQUIRY_LEN: usize = 96;
/// VPD pages served, in ascending order (VPD 0x00 lists them).
pub const VPD_PAGES: [u8; 6] = [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];
/// Mode pages served: caching and control.
const MODE_PAGES: [u8; 2] = [PAGE_CACHING, PAGE_CONTROL];
const PAGE_CACHING: u8 = 0x08;
const PAGE_CONTROL: u8 = 0x0a;
const ALL_PAGES: u8 = 0x3f;

impl LogicalUnit {
    /// Runs `cmd` against this logical unit.
    pub fn execute(&self, cmd: &Command) -> Outcome {
        let needs_ready = cmd.accesses_medium()
            || matches!(
                cmd,
                Command::TestUnitReady | Command::StartStopUnit { start: true, .. }
            );
        if needs_ready && !self.ready {
            // A START cannot make a disabled namespace ready: only its operator can.
            return Outcome::Check(Sense::not_ready_disabled());
        }
        match *cmd {
            Command::TestUnitReady | Command::StartStopUnit { .. } => Outcome::Good,
            Command::RequestSense { desc, alloc } => {
                if desc {
                    // Descriptor format is not offered (the control page's D_SENSE is 0).
                    return Outcome::Check(Sense::invalid_cdb_field(1, Some(0)));
                }
                // No deferred or pending sense is kept per I_T nexus: a disabled unit reports
                // why, otherwise NO SENSE (SPC-4 §6.29).
                let sense = if self.ready {
                    Sense::new(SenseKey::NO_SENSE, Asc::NO_ADDITIONAL_SENSE)
                } else {
                    Sense::not_ready_disabled()
                };
                data_in(sense.to_bytes().to_vec(), u64::from(alloc))
            }
            Command::Inquiry { evpd, page, alloc } => {
                let data = if evpd {
                    match self.vpd(page) {
                        Some(d) => d,
                        None => return Outcome::Check(Sense::invalid_cdb_field(2, None)),
                    }
                } else {
                    self.standard_inquiry()
                };
                data_in(data, u64::from(alloc))
            }
            Command::ModeSense {
                ten,
                dbd,
                llbaa,
                pc,
                page,
                subpage,
                alloc,
            } => match self.mode_sense(ten, dbd, llbaa, pc, page, subpage) {
                Ok(d) => data_in(d, u64::from(alloc)),
                Err(s) => Outcome::Check(s),
            },
            Command::ReadCapacity10 => {
                let mut d = vec![0u8; 8];
                let last = self.blocks.saturating_sub(1);
                // Over 2^32 blocks the host must ask READ CAPACITY(16) (SBC-3 §5.16.2).
                put_be32(&mut d, 0, u32::try_from(last).unwrap_or(u32::MAX));
                put_be32(&mut d, 4, self.block_size);
                Outcome::DataIn(d)
            }
            Command::ReadCapacity16 { alloc } => data_in(self.read_capacity_16(), u64::from(alloc)),
            Command::Read { lba, blocks, fua } => match self.check_range(lba, blocks, true) {
                Err(s) => Outcome::Check(s),
                Ok(()) if blocks == 0 => Outcome::Good,
                Ok(()) => Outcome::Io(Io::Read { lba, blocks, fua }),
            },
            Command::Write { lba, blocks, fua } => {
                if self.read_only {
                    return Outcome::Check(write_protected());
                }
                match self.check_range(lba, blocks, true) {
                    Err(s) => Outcome::Check(s),
                    Ok(()) if blocks == 0 => Outcome::Good,
                    Ok(()) => Outcome::Io(Io::Write { lba, blocks, fua }),
                }
            }
            Command::SynchronizeCache { lba, blocks, .. } => {
                // SBC-3 §5.22: the range must lie inside the medium (0 blocks: to its end).
                match self.check_range(lba, blocks, false) {
                    Err(s) => Outcome::Check(s),
                    Ok(()) => Outcome::Io(Io::Flush),
                }
            }
            Command::WriteSame {
                lba,
                blocks,
                unmap,
                ndob,
            } => {
                if self.read_only {
                    return Outcome::Check(write_protected());
                }
                if unmap && self.unmap.is_none() {
                    return Outcome::Check(Sense::invalid_cdb_field(1, Some(3)));
                }
                if let Err(s) = self.check_range(lba, blocks, false) {
                    return Outcome::Check(s);
                }
                if ndob {
                    Outcome::Io(Io::WriteZeroes { lba, blocks, unmap })
                } else {
                    Outcome::Io(Io::WriteSame { lba, blocks, unmap })
                }
            }
            Command::Unmap { param_len } => {
                if self.unmap.is_none() {
                    return Outcome::Check(Sense::invalid_opcode());
                }
                if self.read_only {
                    return Outcome::Check(write_protected());
                }
                if param_len == 0 {
                    // SBC-3 §5.28: no parameter list is not an error; nothing is unmapped.
                    return Outcome::Good;
                }
                Outcome::Io(Io::Unmap { param_len })
            }
            // REPORT LUNS is answered by the target for all its LUNs: see `report_luns`.
            Command::ReportLuns { .. } => Outcome::Check(Sense::invalid_opcode()),
        }
    }

    /// Reads WRITE SAME's data-out block. Only a zero block is served: it becomes Write
    /// Zeroes (deallocating with UNMAP), which the namespace runs without a buffer per block.
    /// Any other pattern is refused as an invalid field in the parameter list at its first
    /// nonzero byte, so nothing is half written.
    pub fn write_same(
        &self,
        lba: u64,
        blocks: u32,
        unmap: bool,
        block: &[u8],
    ) -> Result<WriteSameAction, Sense> {
        if block.len() != self.block_size as usize {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        }
        if let Some(at) = block.iter().position(|&b| b != 0) {
            return Err(Sense::invalid_parameter_field(
                u16::try_from(at).unwrap_or(u16::MAX),
            ));
        }
        Ok(WriteSameAction::WriteZeroes { lba, blocks, unmap })
    }

    /// Reads UNMAP's parameter list (SBC-3 §5.28.2): the block ranges to deallocate, each
    /// checked against the medium and the unmap limits.
    pub fn unmap_list(&self, data: &[u8]) -> Result<Vec<BlockRange>, Sense> {
        let limits = self.unmap.ok_or(Sense::invalid_opcode())?;
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data.len() < 8 {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::PARAMETER_LIST_LENGTH_ERROR,
            ));
        }
        // Whole descriptors of what the BLOCK DESCRIPTOR DATA LENGTH claims and was sent; an
        // incomplete last one is ignored (SBC-3 §5.28.2), as LIO's `sbc_execute_unmap` does,
        // which also ignores UNMAP DATA LENGTH.
        let desc_len = usize::from(be16(data, 2)).min(data.len() - 8);
        let n = desc_len / 16;
        if n as u64 > u64::from(limits.max_descriptors) {
            return Err(Sense::invalid_parameter_field(2));
        }
        let mut ranges = Vec::with_capacity(n);
        let mut total = 0u64;
        for i in 0..n {
            let at = 8 + i * 16;
            let lba = be64(data, at);
            let blocks = be32(data, at + 8);
            if blocks == 0 {
                continue;
            }
            if !lba
                .checked_add(u64::from(blocks))
                .is_some_and(|end| end <= self.blocks)
            {
                return Err(Sense::lba_out_of_range());
            }
            total += u64::from(blocks);
            if total > u64::from(limits.max_blocks) {
                return Err(Sense::invalid_parameter_field(at as u16 + 8));
            }
            ranges.push(BlockRange { lba, blocks });
        }
        Ok(ranges)
    }

    /// LBA OUT OF RANGE past the medium; INVALID FIELD IN CDB over the transfer limit.
    fn check_range(&self, lba: u64, blocks: u32, transfer: bool) -> Result<(), Sense> {
        if !lba
            .checked_add(u64::from(blocks))
            .is_some_and(|end| end <= self.blocks)
            || lba >= self.blocks
        {
            return Err(Sense::lba_out_of_range());
        }
        if transfer && blocks > self.max_transfer_blocks {
            // The transfer length's place differs per CDB size; the sense names no byte
            // rather than one the host could misread.
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::INVALID_FIELD_IN_CDB,
            ));
        }
        Ok(())
    }

    /// Standard INQUIRY data (SPC-4 §6.6.2).
    pub fn standard_inquiry(&self) -> Vec<u8> {
        let mut d = vec![0u8; INQUIRY_LEN];
        d[0] = 0x00; // peripheral qualifier 0, direct access block device
        d[2] = 0x06; // SPC-4
        d[3] = 0x12; // HISUP, response data format 2
        d[4] = (INQUIRY_LEN - 5) as u8;
        d[7] = 0x02; // CMDQUE
        d[8..16].copy_from_slice(&self.vendor);
        d[16..32].copy_from_slice(&self.product);
        d[32..36].copy_from_slice(&self.revision);
        // Version descriptors (SPC-4 Table 144): SAM-5, iSCSI, SPC-4, SBC-3.
        for (i, v) in [0x00a0u16, 0x0960, 0x0460, 0x04c0].into_iter().enumerate() {
            put_be16(&mut d, 58 + 2 * i, v);
        }
        d
    }

    /// A vital product data page, `None` for one not served.
    pub fn vpd(&self, page: u8) -> Option<Vec<u8>> {
        let body: Vec<u8> = match page {
            0x00 => VPD_PAGES.to_vec(),
            0x80 => self.serial.as_bytes().to_vec(),
            0x83 => self.device_identification(),
            0xb0 => self.block_limits(),
            0xb1 => {
                // Block device characteristics: non-rotating medium, form factor not reported.
                let mut b = vec![0u8; 0x3c];
                put_be16(&mut b, 0, 1);
                b
            }
            0xb2 => self.provisioning(),
            _ => return None,
        };
        let mut d = vec![0u8; 4];
        d[1] = page;
        put_be16(&mut d, 2, body.len() as u16);
        d.extend_from_slice(&body);
        Some(d)
    }

    /// VPD 0x83 designators: the LU's EUI-64 based 16-byte identifier, a T10 vendor ID based
    /// one, and, over iSCSI, the target port's name and relative port.
    fn device_identification(&self) -> Vec<u8> {
        let mut d = Vec::new();
        // Binary code set, LU association, EUI-64 (type 2), 16 bytes.
        d.extend_from_slice(&[0x01, 0x02, 0x00, 16]);
        d.extend_from_slice(&self.eui128);
        // ASCII, LU association, T10 vendor ID (type 1): vendor then serial.
        let t10_len = 8 + self.serial.len();
        d.extend_from_slice(&[0x02, 0x01, 0x00, t10_len.min(255) as u8]);
        d.extend_from_slice(&self.vendor);
        d.extend_from_slice(&self.serial.as_bytes()[..t10_len.min(255) - 8]);
        if let Some((name, rel)) = &self.target_port {
            // iSCSI protocol (5), UTF-8, PIV, target port association, SCSI name string (8):
            // NUL terminated and padded to a multiple of 4 (SPC-4 §7.8.6.11).
            let n = (name.len() + 1).next_multiple_of(4).min(252);
            d.extend_from_slice(&[0x53, 0x80 | 0x10 | 0x08, 0x00, n as u8]);
            let mut s = name.as_bytes()[..name.len().min(n - 1)].to_vec();
            s.resize(n, 0);
            d.extend_from_slice(&s);
            // iSCSI, binary, PIV, target port, relative target port identifier (4).
            d.extend_from_slice(&[0x51, 0x80 | 0x10 | 0x04, 0x00, 4, 0, 0]);
            d.extend_from_slice(&rel.to_be_bytes());
        }
        d
    }

    /// VPD 0xB0 (SBC-3 §6.5.3).
    fn block_limits(&self) -> Vec<u8> {
        let mut b = vec![0u8; 0x3c];
        b[0] = 0x01; // WSNZ: WRITE SAME of 0 blocks is refused
        put_be16(&mut b, 2, self.optimal_granularity_blocks);
        put_be32(&mut b, 4, self.max_transfer_blocks);
        put_be32(&mut b, 8, self.optimal_transfer_blocks);
        if let Some(u) = self.unmap {
            put_be32(&mut b, 16, u.max_blocks);
            put_be32(&mut b, 20, u.max_descriptors);
            put_be32(&mut b, 24, u.granularity);
        }
        // Maximum WRITE SAME length: what one command's range field can name.
        put_be64(&mut b, 32, u64::from(u32::MAX));
        b
    }

    /// VPD 0xB2 (SBC-3 §6.5.4).
    fn provisioning(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        if let Some(u) = self.unmap {
            // LBPU, LBPWS, LBPWS10; LBPRZ when unmapped blocks read back zeroes.
            b[1] = 0x80 | 0x40 | 0x20 | if u.reads_zero { 0x04 } else { 0 };
            // Resource provisioned: unmapping frees nothing the host could run out of.
            b[2] = 0x01;
        }
        b
    }

    /// READ CAPACITY(16) parameter data (SBC-3 §5.17.2), 32 bytes.
    pub fn read_capacity_16(&self) -> Vec<u8> {
        let mut d = vec![0u8; 32];
        put_be64(&mut d, 0, self.blocks.saturating_sub(1));
        put_be32(&mut d, 8, self.block_size);
        d[13] = self.blocks_per_physical_exp & 0x0f;
        if let Some(u) = self.unmap {
            d[14] = 0x80 | if u.reads_zero { 0x40 } else { 0 }; // LBPME, LBPRZ
        }
        d
    }

    /// MODE SENSE(6/10) parameter data (SPC-4 §7.5): header, block descriptor unless DBD,
    /// then the pages asked for.
    fn mode_sense(
        &self,
        ten: bool,
        dbd: bool,
        llbaa: bool,
        pc: PageControl,
        page: u8,
        subpage: u8,
    ) -> Result<Vec<u8>, Sense> {
        if pc == PageControl::Saved {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::SAVING_PARAMETERS_NOT_SUPPORTED,
            ));
        }
        let pages: &[u8] = match (page, subpage) {
            (ALL_PAGES, 0x00 | 0xff) => &MODE_PAGES,
            (PAGE_CACHING, 0) => &MODE_PAGES[..1],
            (PAGE_CONTROL, 0) => &MODE_PAGES[1..],
            (_, 0) => return Err(Sense::invalid_cdb_field(2, Some(5))),
            _ => return Err(Sense::invalid_cdb_field(3, None)),
        };
        let mut body = Vec::new();
        for &p in pages {
            body.extend_from_slice(&self.mode_page(p, pc));
        }
        // Device-specific parameter: WP, DPOFUA (the host may send FUA and DPO).
        let dsp = 0x10 | if self.read_only { 0x80 } else { 0 };
        let long = ten && llbaa;
        let desc: Vec<u8> = if dbd {
            Vec::new()
        } else if long {
            let mut b = vec![0u8; 16];
            put_be64(&mut b, 0, self.blocks);
            put_be32(&mut b, 12, self.block_size);
            b
        } else {
            // SBC-3's short LBA descriptor: a 32-bit block count, 0xFFFFFFFF when larger
            // (the host asks READ CAPACITY(16)), a reserved byte, a 24-bit block length.
            let mut b = vec![0u8; 8];
            put_be32(&mut b, 0, u32::try_from(self.blocks).unwrap_or(u32::MAX));
            put_be32(&mut b, 4, self.block_size & 0x00ff_ffff);
            b
        };
        let mut d;
        if ten {
            d = vec![0u8; 8];
            put_be16(&mut d, 0, (6 + desc.len() + body.len()) as u16);
            d[3] = dsp;
            d[4] = u8::from(long && !dbd);
            put_be16(&mut d, 6, desc.len() as u16);
        } else {
            d = vec![0u8; 4];
            // MODE SENSE(6)'s data is at most 255 bytes; two pages and a descriptor are 44.
            d[0] = (3 + desc.len() + body.len()) as u8;
            d[2] = dsp;
            d[3] = desc.len() as u8;
        }
        d.extend_from_slice(&desc);
        d.extend_from_slice(&body);
        Ok(d)
    }

    fn mode_page(&self, page: u8, pc: PageControl) -> Vec<u8> {
        // Nothing is changeable (no MODE SELECT): the changeable mask is all zeroes.
        let changeable = pc == PageControl::Changeable;
        match page {
            PAGE_CACHING => {
                let mut p = vec![0u8; 20];
                p[0] = PAGE_CACHING;
                p[1] = 0x12;
                if !changeable && self.write_cache {
                    p[2] = 0x04; // WCE
                }
                p
            }
            _ => {
                let mut p = vec![0u8; 12];
                p[0] = PAGE_CONTROL;
                p[1] = 0x0a;
                if !changeable {
                    // Unrestricted reordering of simple commands (QUEUE ALGORITHM MODIFIER 1);
                    // no busy timeout limit (0xFFFF: unlimited).
                    p[3] = 0x10;
                    put_be16(&mut p, 8, 0xffff);
                }
                p
            }
        }
    }
}

fn write_protected() -> Sense {
    Sense::new(SenseKey::DATA_PROTECT, Asc::WRITE_PROTECTED)
}

fn data_in(mut d: Vec<u8>, alloc: u64) -> Outcome {
    d.truncate(usize::try_from(alloc).unwrap_or(usize::MAX));
    Outcome::DataIn(d)
}

/// Address method of a LUN's first level (SAM-5 §4.7.2, byte 0 bits 7-6): peripheral device.
pub const LUN_METHOD_PERIPHERAL: u8 = 0b00;
/// Address method: flat space (14-bit LUN).
pub const LUN_METHOD_FLAT: u8 = 0b01;
/// Largest LUN number [`encode_lun`] writes (flat space, 14 bits).
pub const MAX_FLAT_LUN: u16 = 0x3fff;

/// Decodes a single-level 8-byte LUN field (bytes 8-15 as a big-endian integer) into a LUN
/// number: peripheral addressing with bus 0 (LUN = byte 1) or flat space (14 bits of bytes
/// 0-1). Another method, a non-zero bus, or a second level (bytes 2-7 non-zero) is `None`:
/// no logical unit answers it.
pub fn decode_lun(raw: u64) -> Option<u16> {
    if raw & 0x0000_ffff_ffff_ffff != 0 {
        return None;
    }
    let b0 = (raw >> 56) as u8;
    let b1 = (raw >> 48) as u8;
    match b0 >> 6 {
        LUN_METHOD_PERIPHERAL if b0 & 0x3f == 0 => Some(u16::from(b1)),
        LUN_METHOD_FLAT => Some(u16::from(b0 & 0x3f) << 8 | u16::from(b1)),
        _ => None,
    }
}

/// Encodes a LUN number as Linux and every target do: peripheral addressing below 256, flat
/// space up to 16383; above that `None`.
pub fn encode_lun(lun: u16) -> Option<u64> {
    match lun {
        0..=0xff => Some(u64::from(lun) << 48),
        0x100..=MAX_FLAT_LUN => Some((u64::from(LUN_METHOD_FLAT) << 62) | (u64::from(lun) << 48)),
        _ => None,
    }
}

/// REPORT LUNS parameter data (SPC-4 §6.33) for the target's LUNs, cut to `alloc`. The
/// command is answered whatever LUN it was addressed to. There are no well-known LUNs, so
/// SELECT REPORT 1 lists none.
pub fn report_luns(select: u8, alloc: u32, luns: &[u16]) -> Outcome {
    let listed: &[u16] = if select == 1 { &[] } else { luns };
    let mut d = vec![0u8; 8];
    put_be32(
        &mut d,
        0,
        (listed.iter().filter(|&&l| l <= MAX_FLAT_LUN).count() * 8) as u32,
    );
    for &l in listed {
        // A LUN past flat addressing's 16383 has no field; the target configures none.
        if let Some(raw) = encode_lun(l) {
            d.extend_from_slice(&raw.to_be_bytes());
        }
    }
    data_in(d, u64::from(alloc))
}

/// Standard INQUIRY data for a LUN the target does not have (SPC-4 §6.6.2: peripheral
/// qualifier 3, device type 0x1F), cut to `alloc`.
pub fn inquiry_no_lun(alloc: u16) -> Outcome {
    let mut d = vec![0u8; 36];
    d[0] = 0x7f;
    d[2] = 0x06;
    d[3] = 0x12;
    d[4] = 31;
    data_in(d, u64::from(alloc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdb::opcode::*;
    use crate::sense::{Asc, SenseKey};

    fn lu() -> LogicalUnit {
        LogicalUnit {
            block_size: 512,
            blocks: 1 << 21, // 1 GiB
            blocks_per_physical_exp: 3,
            vendor: *b"RAIDLINE",
            product: *b"RAID-5 array    ",
            revision: *b"0.1 ",
            serial: "A1B2C3D4".into(),
            eui128: [0x11; 16],
            target_port: Some(("iqn.2026-12.org.raidline:node1,t,0x0001".into(), 1)),
            write_cache: true,
            read_only: false,
            max_transfer_blocks: 2048,
            optimal_transfer_blocks: 384,
            optimal_granularity_blocks: 128,
            unmap: Some(UnmapLimits {
                max_blocks: 1 << 20,
                max_descriptors: 16,
                granularity: 128,
                reads_zero: true,
            }),
            ready: true,
        }
    }

    fn run(lu: &LogicalUnit, cdb: &[u8]) -> Outcome {
        let mut c = [0u8; 16];
        c[..cdb.len()].copy_from_slice(cdb);
        match Command::parse(&c) {
            Ok(cmd) => lu.execute(&cmd),
            Err(s) => Outcome::Check(s),
        }
    }

    fn data(o: Outcome) -> Vec<u8> {
        match o {
            Outcome::DataIn(d) => d,
            other => panic!("expected data-in, got {other:?}"),
        }
    }

    #[test]
    fn standard_inquiry_names_the_unit() {
        let d = data(run(&lu(), &[INQUIRY, 0, 0, 0, 96, 0]));
        assert_eq!(d.len(), 96);
        assert_eq!(&d[..8], &[0x00, 0x00, 0x06, 0x12, 91, 0x00, 0x00, 0x02]);
        assert_eq!(&d[8..16], b"RAIDLINE");
        assert_eq!(
            &d[58..66],
            &[0x00, 0xa0, 0x09, 0x60, 0x04, 0x60, 0x04, 0xc0]
        );
        // Cut to the allocation length: Linux first asks for 36 bytes.
        assert_eq!(data(run(&lu(), &[INQUIRY, 0, 0, 0, 36, 0])).len(), 36);
    }

    #[test]
    fn vpd_pages() {
        let u = lu();
        let p0 = data(run(&u, &[INQUIRY, 1, 0x00, 0, 255, 0]));
        assert_eq!(p0, [0, 0, 0, 6, 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
        let p80 = data(run(&u, &[INQUIRY, 1, 0x80, 0, 255, 0]));
        assert_eq!(&p80[..4], &[0, 0x80, 0, 8]);
        assert_eq!(&p80[4..], b"A1B2C3D4");

        let p83 = data(run(&u, &[INQUIRY, 1, 0x83, 1, 0, 0]));
        assert_eq!(usize::from(be16(&p83, 2)), p83.len() - 4);
        // EUI-64 based 16-byte designator first.
        assert_eq!(&p83[4..8], &[0x01, 0x02, 0x00, 16]);
        assert_eq!(&p83[8..24], &[0x11; 16]);
        // T10 vendor ID: "RAIDLINE" + serial.
        assert_eq!(&p83[24..28], &[0x02, 0x01, 0x00, 16]);
        assert_eq!(&p83[28..44], b"RAIDLINEA1B2C3D4");
        // SCSI name string: 39 characters + NUL, padded to 40.
        assert_eq!(&p83[44..48], &[0x53, 0x98, 0x00, 40]);
        assert_eq!(&p83[48..87], b"iqn.2026-12.org.raidline:node1,t,0x0001");
        assert_eq!(p83[87], 0);
        assert_eq!(&p83[88..], &[0x51, 0x94, 0x00, 4, 0, 0, 0, 1]);

        let b0 = data(run(&u, &[INQUIRY, 1, 0xb0, 0, 255, 0]));
        assert_eq!(&b0[..5], &[0, 0xb0, 0, 0x3c, 0x01]);
        assert_eq!(be16(&b0, 6), 128);
        assert_eq!(be32(&b0, 8), 2048);
        assert_eq!(be32(&b0, 12), 384);
        assert_eq!(be32(&b0, 20), 1 << 20);
        assert_eq!(be32(&b0, 24), 16);
        assert_eq!(be32(&b0, 28), 128);

        let b1 = data(run(&u, &[INQUIRY, 1, 0xb1, 0, 255, 0]));
        assert_eq!(&b1[..6], &[0, 0xb1, 0, 0x3c, 0, 1]);
        let b2 = data(run(&u, &[INQUIRY, 1, 0xb2, 0, 255, 0]));
        assert_eq!(b2, [0, 0xb2, 0, 4, 0, 0xe4, 0x01, 0]);

        assert_eq!(
            run(&u, &[INQUIRY, 1, 0x86, 0, 255, 0]),
            Outcome::Check(Sense::invalid_cdb_field(2, None))
        );
    }

    #[test]
    fn capacity_ten_and_sixteen() {
        let u = lu();
        assert_eq!(
            data(run(&u, &[READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
            [0x00, 0x1f, 0xff, 0xff, 0, 0, 0x02, 0x00]
        );
        let mut rc16 = [0u8; 16];
        rc16[0] = SERVICE_ACTION_IN_16;
        rc16[1] = 0x10;
        rc16[13] = 32;
        let d = data(run(&u, &rc16));
        assert_eq!(be64(&d, 0), (1 << 21) - 1);
        assert_eq!(be32(&d, 8), 512);
        assert_eq!((d[13], d[14]), (3, 0xc0));
        // Past 2^32 blocks, READ CAPACITY(10) says 0xFFFFFFFF.
        let big = LogicalUnit {
            blocks: 1 << 33,
            ..lu()
        };
        let d = data(run(&big, &[READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(&d[..4], &[0xff; 4]);
    }

    #[test]
    fn mode_sense_pages_and_descriptors() {
        let u = lu();
        // MODE SENSE(6), all pages, with the short block descriptor.
        let d = data(run(&u, &[MODE_SENSE_6, 0, 0x3f, 0, 255, 0]));
        assert_eq!(d.len(), 4 + 8 + 20 + 12);
        assert_eq!(&d[..4], &[43, 0, 0x10, 8]);
        assert_eq!(&d[4..12], &[0x00, 0x20, 0x00, 0x00, 0, 0, 0x02, 0x00]);
        assert_eq!(&d[12..15], &[0x08, 0x12, 0x04]);
        assert_eq!(&d[32..34], &[0x0a, 0x0a]);
        // MODE SENSE(10), caching only, DBD, as sd asks it.
        let d = data(run(&u, &[MODE_SENSE_10, 0x08, 0x08, 0, 0, 0, 0, 0, 255, 0]));
        assert_eq!(&d[..8], &[0, 26, 0, 0x10, 0, 0, 0, 0]);
        assert_eq!(d[10], 0x04);
        // Long LBA descriptor with LLBAA.
        let d = data(run(&u, &[MODE_SENSE_10, 0x10, 0x0a, 0, 0, 0, 0, 0, 255, 0]));
        assert_eq!(&d[..8], &[0, 34, 0, 0x10, 1, 0, 0, 16]);
        assert_eq!(be64(&d, 8), 1 << 21);
        // Changeable values: nothing changes.
        let d = data(run(&u, &[MODE_SENSE_6, 0x08, 0x48, 0, 255, 0]));
        assert_eq!(d[6], 0);
        // Saved values and unknown pages are refused precisely.
        assert_eq!(
            run(&u, &[MODE_SENSE_6, 0, 0xc8, 0, 255, 0]),
            Outcome::Check(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::SAVING_PARAMETERS_NOT_SUPPORTED
            ))
        );
        assert_eq!(
            run(&u, &[MODE_SENSE_6, 0, 0x1c, 0, 255, 0]),
            Outcome::Check(Sense::invalid_cdb_field(2, Some(5)))
        );
        assert_eq!(
            run(&u, &[MODE_SENSE_6, 0, 0x08, 0x01, 255, 0]),
            Outcome::Check(Sense::invalid_cdb_field(3, None))
        );
        // Write protection shows in the header.
        let ro = LogicalUnit {
            read_only: true,
            ..lu()
        };
        assert_eq!(data(run(&ro, &[MODE_SENSE_6, 8, 0x08, 0, 255, 0]))[2], 0x90);
    }

    #[test]
    fn reads_and_writes_are_range_checked() {
        let u = lu();
        assert_eq!(
            run(&u, &[READ_10, 0x08, 0, 0x1f, 0xff, 0xf8, 0, 0, 8, 0]),
            Outcome::Io(Io::Read {
                lba: 0x1f_fff8,
                blocks: 8,
                fua: true
            })
        );
        // One block past the end.
        assert_eq!(
            run(&u, &[WRITE_10, 0, 0, 0x1f, 0xff, 0xf9, 0, 0, 8, 0]),
            Outcome::Check(Sense::lba_out_of_range())
        );
        // An LBA past the end with no blocks is still out of range; inside, it is GOOD.
        assert_eq!(
            run(&u, &[READ_10, 0, 0, 0x20, 0, 0, 0, 0, 0, 0]),
            Outcome::Check(Sense::lba_out_of_range())
        );
        assert_eq!(
            run(&u, &[READ_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Outcome::Good
        );
        // LBA + blocks overflowing 64 bits.
        let mut r16 = [0u8; 16];
        r16[0] = READ_16;
        r16[2..10].copy_from_slice(&u64::MAX.to_be_bytes());
        r16[13] = 1;
        assert_eq!(run(&u, &r16), Outcome::Check(Sense::lba_out_of_range()));
        // Over the transfer limit.
        let over = run(&u, &[READ_10, 0, 0, 0, 0, 0, 0, 0x08, 0x01, 0]);
        assert!(matches!(over, Outcome::Check(s) if s.asc == Asc::INVALID_FIELD_IN_CDB));
        // Read-only.
        let ro = LogicalUnit {
            read_only: true,
            ..lu()
        };
        assert!(matches!(
            run(&ro, &[WRITE_10, 0, 0, 0, 0, 0, 0, 0, 1, 0]),
            Outcome::Check(s) if s.key == SenseKey::DATA_PROTECT
        ));
    }

    #[test]
    fn a_disabled_unit_is_not_ready_but_still_answers_inquiry() {
        let off = LogicalUnit {
            ready: false,
            ..lu()
        };
        assert_eq!(
            run(&off, &[TEST_UNIT_READY, 0, 0, 0, 0, 0]),
            Outcome::Check(Sense::not_ready_disabled())
        );
        assert_eq!(
            run(&off, &[READ_10, 0, 0, 0, 0, 0, 0, 0, 1, 0]),
            Outcome::Check(Sense::not_ready_disabled())
        );
        assert!(matches!(
            run(&off, &[INQUIRY, 0, 0, 0, 36, 0]),
            Outcome::DataIn(_)
        ));
        // REQUEST SENSE reports why, as data with GOOD status.
        let d = data(run(&off, &[REQUEST_SENSE, 0, 0, 0, 18, 0]));
        assert_eq!(Sense::parse(&d), Some(Sense::not_ready_disabled()));
        let d = data(run(&lu(), &[REQUEST_SENSE, 0, 0, 0, 252, 0]));
        assert_eq!((d.len(), d[2], d[12]), (18, 0, 0));
        assert_eq!(
            run(&lu(), &[REQUEST_SENSE, 1, 0, 0, 252, 0]),
            Outcome::Check(Sense::invalid_cdb_field(1, Some(0)))
        );
    }

    #[test]
    fn sync_cache_write_same_and_unmap() {
        let u = lu();
        assert_eq!(
            run(&u, &[SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Outcome::Io(Io::Flush)
        );
        let mut ws = [0u8; 16];
        ws[0] = WRITE_SAME_16;
        ws[1] = 0x08;
        ws[13] = 8;
        assert_eq!(
            run(&u, &ws),
            Outcome::Io(Io::WriteSame {
                lba: 0,
                blocks: 8,
                unmap: true
            })
        );
        assert_eq!(
            u.write_same(0, 8, true, &[0u8; 512]),
            Ok(WriteSameAction::WriteZeroes {
                lba: 0,
                blocks: 8,
                unmap: true
            })
        );
        let mut pattern = [0u8; 512];
        pattern[7] = 0xaa;
        assert_eq!(
            u.write_same(0, 8, false, &pattern),
            Err(Sense::invalid_parameter_field(7))
        );
        ws[1] = 0x09; // NDOB: no data block at all
        assert_eq!(
            run(&u, &ws),
            Outcome::Io(Io::WriteZeroes {
                lba: 0,
                blocks: 8,
                unmap: true
            })
        );
        let no_unmap = LogicalUnit {
            unmap: None,
            ..lu()
        };
        assert_eq!(
            run(&no_unmap, &ws),
            Outcome::Check(Sense::invalid_cdb_field(1, Some(3)))
        );
        assert_eq!(
            run(&no_unmap, &[UNMAP, 0, 0, 0, 0, 0, 0, 0, 24, 0]),
            Outcome::Check(Sense::invalid_opcode())
        );
        assert_eq!(
            run(&u, &[UNMAP, 0, 0, 0, 0, 0, 0, 0, 24, 0]),
            Outcome::Io(Io::Unmap { param_len: 24 })
        );
        assert_eq!(run(&u, &[UNMAP, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Outcome::Good);
    }

    fn unmap_list(ranges: &[(u64, u32)]) -> Vec<u8> {
        let mut d = vec![0u8; 8 + 16 * ranges.len()];
        put_be16(&mut d, 0, (6 + 16 * ranges.len()) as u16);
        put_be16(&mut d, 2, (16 * ranges.len()) as u16);
        for (i, &(lba, n)) in ranges.iter().enumerate() {
            put_be64(&mut d, 8 + 16 * i, lba);
            put_be32(&mut d, 16 + 16 * i, n);
        }
        d
    }

    #[test]
    fn unmap_parameter_list() {
        let u = lu();
        assert_eq!(
            u.unmap_list(&unmap_list(&[(0, 8), (100, 0), (1000, 24)])),
            Ok(vec![
                BlockRange { lba: 0, blocks: 8 },
                BlockRange {
                    lba: 1000,
                    blocks: 24
                }
            ])
        );
        assert_eq!(u.unmap_list(&[]), Ok(vec![]));
        assert_eq!(
            u.unmap_list(&[0, 6, 0, 0]).unwrap_err().asc,
            Asc::PARAMETER_LIST_LENGTH_ERROR
        );
        assert_eq!(
            u.unmap_list(&unmap_list(&[((1 << 21) - 4, 8)])),
            Err(Sense::lba_out_of_range())
        );
        // A descriptor length that is not a multiple of 16 (an incomplete last descriptor is
        // ignored), or claims more than was sent (only what was sent counts), as LIO does.
        let mut odd = unmap_list(&[(0, 8), (64, 8)]);
        put_be16(&mut odd, 2, 28);
        assert_eq!(
            u.unmap_list(&odd),
            Ok(vec![BlockRange { lba: 0, blocks: 8 }])
        );
        let mut long = unmap_list(&[(0, 8)]);
        put_be16(&mut long, 2, 32);
        assert_eq!(
            u.unmap_list(&long),
            Ok(vec![BlockRange { lba: 0, blocks: 8 }])
        );
        // Over the descriptor limit, and over the block limit.
        let many: Vec<_> = (0..17).map(|i| (i * 8, 8)).collect();
        assert_eq!(
            u.unmap_list(&unmap_list(&many)),
            Err(Sense::invalid_parameter_field(2))
        );
        assert_eq!(
            u.unmap_list(&unmap_list(&[(0, 1 << 20), (1 << 20, 1)])),
            Err(Sense::invalid_parameter_field(8 + 16 + 8))
        );
    }

    #[test]
    fn report_luns_and_absent_luns() {
        let d = data(report_luns(0, 256, &[0, 1, 300]));
        assert_eq!(&d[..8], &[0, 0, 0, 24, 0, 0, 0, 0]);
        assert_eq!(&d[8..16], &[0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&d[16..24], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&d[24..32], &[0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
        // Cut to the allocation length, the list length still says the whole.
        let d = data(report_luns(0, 16, &[0, 1, 300]));
        assert_eq!((d.len(), be32(&d, 0)), (16, 24));
        assert_eq!(data(report_luns(1, 256, &[0, 1])), [0u8; 8]);
        assert_eq!(data(inquiry_no_lun(36))[0], 0x7f);
    }
}
