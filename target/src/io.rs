//! I/O command validation: from a parsed command to a request the namespace can execute, or
//! the exact status that refuses it.
//!
//! Checks, in the order Linux nvmet applies them: namespace exists (Invalid Namespace), LBA
//! range inside the namespace (LBA Out of Range), transfer within MDTS (Invalid Field), SGL form
//! (keyed for reads; keyed or in-capsule at offset 0 for writes; no segments — SGL Descriptor
//! Type Invalid / SGL Offset Invalid), SGL length equal to the transfer (Data SGL Length
//! Invalid), no protection information (Invalid Field). All carry DNR: the same command fails
//! the same way again. Execution never re-validates.

use raidline_proto::io::{DsmRange, IoCommand, ReadWrite};
use raidline_proto::sqe::Psdt;
use raidline_proto::{SglDescriptor, Sqe, Status, StatusCode};

use crate::status::for_parse_error;
use crate::subsystem::{Limits, NamespaceInfo};

/// Where a command's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLocation {
    /// Host memory reached by RDMA READ/WRITE.
    Remote {
        /// Remote address.
        address: u64,
        /// Length in bytes.
        length: u32,
        /// Remote key.
        key: u32,
        /// The host asked for the key to be invalidated with the response.
        invalidate: bool,
    },
    /// In the command capsule, right after the SQE.
    InCapsule {
        /// Length in bytes.
        length: u32,
    },
}

impl DataLocation {
    /// Length in bytes.
    pub fn len(&self) -> u32 {
        match *self {
            DataLocation::Remote { length, .. } | DataLocation::InCapsule { length } => length,
        }
    }

    /// Whether there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A validated I/O request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoRequest {
    /// Read `blocks` blocks at `lba` into the host's buffer.
    Read {
        /// Namespace.
        nsid: u32,
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// Host buffer.
        data: DataLocation,
    },
    /// Write `blocks` blocks at `lba` from the host's buffer or the capsule.
    Write {
        /// Namespace.
        nsid: u32,
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// Host buffer or in-capsule data.
        data: DataLocation,
        /// Force unit access.
        fua: bool,
    },
    /// Flush one namespace, or all (0xFFFFFFFF).
    Flush {
        /// Namespace.
        nsid: u32,
    },
    /// Write zeroes (optionally deallocating).
    WriteZeroes {
        /// Namespace.
        nsid: u32,
        /// First block.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
    },
    /// Dataset Management: fetch `ranges` range descriptors, then [`validate_dsm_ranges`].
    DatasetManagement {
        /// Namespace.
        nsid: u32,
        /// Number of ranges.
        ranges: u16,
        /// Deallocate attribute (without it the command is a hint and completes at once).
        deallocate: bool,
        /// Where the range list is.
        data: DataLocation,
    },
}

fn dnr(code: StatusCode) -> Status {
    Status::new(code).dnr()
}

/// Validates an I/O command SQE. `lookup` finds a configured namespace of the controller's
/// subsystem, active or not; `in_capsule_len` is the number of data bytes that arrived with the
/// capsule. An nsid that is not configured is *Invalid Namespace or Format* (DNR); a configured
/// namespace the operator disabled answers *Internal Path Error* without DNR, as nvmet does
/// (`nvmet_req_find_ns`): a multipath host fails over, and the I/O may succeed once the
/// namespace is enabled again.
pub fn validate<'a>(
    sqe: &Sqe,
    limits: &Limits,
    in_capsule_len: usize,
    lookup: impl Fn(u32) -> Option<&'a NamespaceInfo>,
) -> Result<IoRequest, Status> {
    let cmd = IoCommand::parse(sqe).map_err(|e| for_parse_error(&e))?;
    let ns = |nsid: u32| match lookup(nsid) {
        Some(n) if n.active.get() => Ok(n),
        Some(_) => Err(Status::new(StatusCode::INTERNAL_PATH_ERROR)),
        None => Err(dnr(StatusCode::INVALID_NAMESPACE)),
    };
    match cmd {
        IoCommand::Read(rw) | IoCommand::Write(rw) => {
            let write = matches!(cmd, IoCommand::Write(_));
            let n = ns(rw.nsid)?;
            check_range(n, rw.slba, rw.nlb)?;
            let bytes = u64::from(rw.nlb) * u64::from(n.block_size);
            if bytes > u64::from(limits.max_transfer) {
                return Err(dnr(StatusCode::INVALID_FIELD));
            }
            if rw.prinfo != 0 {
                return Err(dnr(StatusCode::INVALID_FIELD));
            }
            let data = data_location(sqe, &rw.sgl, write, bytes, limits, in_capsule_len)?;
            Ok(if write {
                IoRequest::Write {
                    nsid: rw.nsid,
                    lba: rw.slba,
                    blocks: rw.nlb,
                    data,
                    fua: rw.fua,
                }
            } else {
                IoRequest::Read {
                    nsid: rw.nsid,
                    lba: rw.slba,
                    blocks: rw.nlb,
                    data,
                }
            })
        }
        IoCommand::Flush { nsid, .. } => {
            if nsid != 0xFFFF_FFFF {
                ns(nsid)?;
            }
            Ok(IoRequest::Flush { nsid })
        }
        IoCommand::WriteZeroes(w) => {
            let n = ns(w.nsid)?;
            check_range(n, w.slba, w.nlb)?;
            if w.prinfo != 0 {
                return Err(dnr(StatusCode::INVALID_FIELD));
            }
            Ok(IoRequest::WriteZeroes {
                nsid: w.nsid,
                lba: w.slba,
                blocks: w.nlb,
            })
        }
        IoCommand::DatasetManagement(d) => {
            let n = ns(d.nsid)?;
            if !n.deallocate && d.deallocate {
                return Err(dnr(StatusCode::INVALID_FIELD));
            }
            // The range list may come in a larger buffer: the Linux host sends a whole 4 KiB
            // page for one range (seen in the lab). As nvmet's `nvmet_check_data_len_lte`,
            // only a transfer shorter than the ranges is refused; the rest is ignored.
            let transfer = u64::from(d.sgl.length());
            if transfer < d.data_len() as u64 || transfer > 4096 {
                return Err(dnr(StatusCode::DATA_SGL_LENGTH_INVALID));
            }
            let data = data_location(sqe, &d.sgl, true, transfer, limits, in_capsule_len)?;
            Ok(IoRequest::DatasetManagement {
                nsid: d.nsid,
                ranges: d.ranges,
                deallocate: d.deallocate,
                data,
            })
        }
        IoCommand::Compare(ReadWrite { .. }) | IoCommand::Unsupported { .. } => {
            Err(dnr(StatusCode::INVALID_OPCODE))
        }
    }
}

fn check_range(ns: &NamespaceInfo, slba: u64, nlb: u32) -> Result<(), Status> {
    match slba.checked_add(u64::from(nlb)) {
        Some(end) if end <= ns.blocks => Ok(()),
        _ => Err(dnr(StatusCode::LBA_OUT_OF_RANGE)),
    }
}

fn data_location(
    sqe: &Sqe,
    sgl: &SglDescriptor,
    host_to_controller: bool,
    expected: u64,
    limits: &Limits,
    in_capsule_len: usize,
) -> Result<DataLocation, Status> {
    if sqe.psdt() != Psdt::SGL_MPTR_CONTIGUOUS && sqe.psdt() != Psdt::SGL_MPTR_SGL {
        return Err(dnr(StatusCode::INVALID_FIELD));
    }
    let loc = match *sgl {
        SglDescriptor::Keyed {
            address,
            length,
            key,
            invalidate,
        } => DataLocation::Remote {
            address,
            length,
            key,
            invalidate,
        },
        SglDescriptor::InCapsule { offset, length } if host_to_controller => {
            if offset != 0 {
                return Err(dnr(StatusCode::SGL_OFFSET_INVALID));
            }
            if length > limits.in_capsule_data || length as usize > in_capsule_len {
                return Err(dnr(StatusCode::DATA_SGL_LENGTH_INVALID));
            }
            DataLocation::InCapsule { length }
        }
        _ => return Err(dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID)),
    };
    if u64::from(loc.len()) != expected {
        return Err(dnr(StatusCode::DATA_SGL_LENGTH_INVALID));
    }
    Ok(loc)
}

/// Validates a fetched DSM range list: every range inside the namespace.
pub fn validate_dsm_ranges(
    ns: &NamespaceInfo,
    data: &[u8],
    count: u16,
) -> Result<Vec<DsmRange>, Status> {
    let ranges = DsmRange::parse_list(data, count).map_err(|e| for_parse_error(&e))?;
    for r in &ranges {
        match r.slba.checked_add(u64::from(r.nlb)) {
            Some(end) if end <= ns.blocks => {}
            _ => return Err(dnr(StatusCode::LBA_OUT_OF_RANGE)),
        }
    }
    Ok(ranges)
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
