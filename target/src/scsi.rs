//! The SCSI view of a served namespace, for the iSER target (issue 18): the logical unit a
//! namespace is to an iSCSI host, and the sense data that answers a storage failure.
//!
//! It describes the same thing NVMe's Identify Namespace does (`controller/identify.rs`), from
//! the same [`NamespaceInfo`], so a namespace served both ways looks alike: the same
//! capacity, the NGUID as the EUI-64 based 16-byte designator, a volatile write cache (VWC 1
//! there, WCE here: the host flushes), deallocation that reads back zeroes (DLFEAT there,
//! LBPRZ here), and the full stripe as the optimal transfer (NOWS there).

use raidline_scsi::sbc::{LogicalUnit, UnmapLimits};
use raidline_scsi::sense::{Asc, Sense, SenseKey};

use crate::status::StorageError;
use crate::subsystem::{NamespaceInfo, Subsystem};

/// The T10 vendor identification every Raidline logical unit reports.
pub const VENDOR: [u8; 8] = *b"RAIDLINE";

/// Most blocks one UNMAP (all its descriptors together) may name: 4 GiB of 512-byte blocks, as
/// NVMe's Dataset Management ranges are cut by the daemon anyway.
const UNMAP_MAX_BLOCKS: u32 = 1 << 23;
/// Most block descriptors in one UNMAP, as NVMe's 256 Dataset Management ranges.
const UNMAP_MAX_DESCRIPTORS: u32 = 256;

/// The logical unit namespace `ns` of `sub` is to a SCSI host. `max_transfer` is the largest
/// transfer in bytes (`[transport] max_transfer`); `target_port` the iSCSI target port's name
/// (`iqn…,t,0x0001`) and relative port identifier.
pub fn logical_unit(
    sub: &Subsystem,
    ns: &NamespaceInfo,
    max_transfer: u32,
    target_port: Option<(String, u16)>,
) -> LogicalUnit {
    let bs = ns.block_size.max(1);
    let stripe = ns.preferred_write_blocks;
    LogicalUnit {
        block_size: ns.block_size,
        blocks: ns.blocks,
        blocks_per_physical_exp: 0,
        vendor: VENDOR,
        product: padded(&sub.model),
        // Four characters hold "major.minor" (0.1), not the patch level.
        revision: padded(&format!(
            "{}.{}",
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR")
        )),
        // Unique per namespace and stable across restarts: the NGUID in hex.
        serial: ns.ids.nguid.iter().map(|b| format!("{b:02x}")).collect(),
        eui128: ns.ids.nguid,
        target_port,
        write_cache: true,
        read_only: false,
        // At least one block: 0 would say "no limit" in VPD B0 while every transfer failed.
        max_transfer_blocks: (max_transfer / bs).max(1),
        // The full stripe, where it fits one transfer (sd ignores a larger one).
        optimal_transfer_blocks: if stripe > 1 && stripe <= (max_transfer / bs).max(1) {
            stripe
        } else {
            0
        },
        optimal_granularity_blocks: 0,
        unmap: ns.deallocate.then_some(UnmapLimits {
            max_blocks: UNMAP_MAX_BLOCKS,
            max_descriptors: UNMAP_MAX_DESCRIPTORS,
            granularity: stripe.max(1),
            reads_zero: true,
        }),
        ready: ns.active.get(),
    }
}

/// The sense that answers a storage failure of a command starting at `lba`, as
/// [`crate::status::for_storage_error`] answers it for NVMe, and acted on by Linux alike:
/// - an unrecovered read: MEDIUM ERROR 11/00 with the LBA, not retried;
/// - a failed write: MEDIUM ERROR 0C/00 with the LBA. Linux retries it up to five times
///   (`scsi_check_sense` retries medium errors other than 11/13/14), where NVMe's Write Fault
///   carries DNR; a write the array could not do fails the same way each time;
/// - an array that is not serving: NOT READY 04/01 (becoming ready), which Linux retries
///   with a delay, as NVMe's Namespace Not Ready without DNR;
/// - anything else: ABORTED COMMAND 44/00, retried.
pub fn sense_for_storage_error(e: StorageError, lba: u64) -> Sense {
    match e {
        StorageError::Unrecovered => Sense::read_error(lba),
        StorageError::WriteFault => Sense::write_error(lba),
        StorageError::NotReady => Sense::new(SenseKey::NOT_READY, Asc::NOT_READY_BECOMING_READY),
        StorageError::Internal => Sense::internal_failure(),
    }
}

/// `s` as a fixed ASCII field of `N` bytes: printable ASCII kept, the rest as `_`, cut or
/// padded with spaces (SPC-4 §4.3.1).
fn padded<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [b' '; N];
    for (o, c) in out.iter_mut().zip(s.bytes()) {
        *o = if c.is_ascii_graphic() || c == b' ' {
            c
        } else {
            b'_'
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystem::{HostAccess, NamespaceIds, NsActive};
    use raidline_proto::text::Nqn;
    use raidline_scsi::cdb::Command;
    use raidline_scsi::sbc::{Io, Outcome};

    fn ns(active: bool) -> NamespaceInfo {
        NamespaceInfo {
            nsid: 1,
            block_size: 4096,
            blocks: 1 << 20,
            ids: NamespaceIds {
                nguid: [0xab; 16],
                eui64: [2; 8],
                uuid: [3; 16],
            },
            preferred_write_blocks: 48,
            deallocate: true,
            active: {
                let a = NsActive::default();
                a.set(active);
                a
            },
        }
    }

    fn sub(n: NamespaceInfo) -> Subsystem {
        Subsystem {
            nqn: Nqn::new("nqn.2026-12.io.raidline:t").unwrap(),
            serial: "0123456789abcdef0123".into(),
            model: "Raidline RAID-5 array over four drives".into(),
            hosts: HostAccess::Any,
            auth: Default::default(),
            namespaces: vec![n],
        }
    }

    #[test]
    fn a_namespace_is_a_logical_unit_with_its_identity_and_limits() {
        let s = sub(ns(true));
        let lu = logical_unit(&s, &s.namespaces[0], 1 << 20, None);
        assert_eq!(lu.block_size, 4096);
        assert_eq!(lu.blocks, 1 << 20);
        assert_eq!(&lu.product, b"Raidline RAID-5 ");
        assert_eq!(&lu.revision, b"0.1 ");
        assert_eq!(lu.serial, "ab".repeat(16));
        assert_eq!(lu.eui128, [0xab; 16]);
        assert_eq!(lu.max_transfer_blocks, 256);
        assert_eq!(lu.optimal_transfer_blocks, 48);
        assert!(lu.write_cache && lu.ready);
        assert!(lu
            .unmap
            .is_some_and(|u| u.reads_zero && u.granularity == 48));
        // Past the end of the namespace: LBA out of range, as NVMe's LBA Out of Range.
        let read = Command::Read {
            lba: (1 << 20) - 1,
            blocks: 2,
            fua: false,
        };
        assert_eq!(lu.execute(&read), Outcome::Check(Sense::lba_out_of_range()));
        let read = Command::Read {
            lba: 0,
            blocks: 256,
            fua: false,
        };
        assert!(matches!(lu.execute(&read), Outcome::Io(Io::Read { .. })));
    }

    #[test]
    fn a_disabled_namespace_is_not_ready() {
        let s = sub(ns(false));
        let lu = logical_unit(&s, &s.namespaces[0], 1 << 20, None);
        assert_eq!(
            lu.execute(&Command::TestUnitReady),
            Outcome::Check(Sense::not_ready_disabled())
        );
    }

    #[test]
    fn storage_failures_become_sense() {
        let s = sense_for_storage_error(StorageError::Unrecovered, 77);
        assert_eq!(
            (s.key, s.asc, s.information),
            (
                SenseKey::MEDIUM_ERROR,
                Asc::UNRECOVERED_READ_ERROR,
                Some(77)
            )
        );
        let s = sense_for_storage_error(StorageError::WriteFault, 1);
        assert_eq!(s.asc, Asc::WRITE_ERROR);
        assert_eq!(
            sense_for_storage_error(StorageError::NotReady, 0).asc,
            Asc::NOT_READY_BECOMING_READY
        );
        assert_eq!(
            sense_for_storage_error(StorageError::Internal, 0).key,
            SenseKey::ABORTED_COMMAND
        );
    }
}
