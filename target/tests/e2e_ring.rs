//! End-to-end: the poller's own io_uring (`io_path = "ring"`) when a member fails there.
//!
//! One member of the array hands out a directory as its descriptor for direct I/O, so every
//! io_uring read on it fails (EISDIR) while nothing else about it is wrong. A host read of a
//! block on that member goes to the poller's ring (the member has a descriptor, the block
//! needs no reconstruction), fails there, and is redone by the engine on a storage worker,
//! which fails the member (its io_uring executor uses the same descriptor) and reconstructs
//! the block from the others: the host gets its data, the array runs degraded, and both paths
//! are counted.

mod common;

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::*;
use raidline_initiator::{Lba, Nsid};
use raidline_raid::{ArrayBlock, MemMember, Member, MemberError, SyncExecutor};
use raidline_target::subsystem::{HostAccess, Limits};

/// An in-memory disk whose direct-I/O descriptor is a directory.
#[derive(Debug)]
struct DirFd {
    disk: MemMember,
    dir: std::fs::File,
}

impl Member for DirFd {
    fn name(&self) -> &str {
        self.disk.name()
    }
    fn size_bytes(&self) -> u64 {
        self.disk.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemberError> {
        self.disk.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), MemberError> {
        self.disk.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), MemberError> {
        self.disk.flush()
    }
    fn direct_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.dir.as_fd())
    }
    fn alignment(&self) -> usize {
        4096
    }
}

#[test]
fn a_read_failing_on_the_ring_is_redone_by_the_engine_and_fails_the_member() {
    let disks = mem_disks(4, 9 << 20);
    let bad = 2;
    let members: Vec<Arc<dyn Member>> = disks
        .iter()
        .enumerate()
        .map(|(i, d)| -> Arc<dyn Member> {
            if i == bad {
                Arc::new(DirFd {
                    disk: d.clone(),
                    dir: std::fs::File::open(std::env::temp_dir()).expect("open a directory"),
                })
            } else {
                Arc::new(d.clone())
            }
        })
        .collect();
    let array = create_array(members);
    let cap = array.geometry().capacity_bytes() as usize;
    let data = pattern(0x51AB, cap);
    let mut buf = raidline_raid::AlignedBuf::new(cap, 4096);
    buf.copy_from_slice(&data);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &buf)
        .expect("fill");
    let geo = *array.geometry();
    let on_bad = (0..geo.capacity_blocks())
        .find(|&b| geo.locate(ArrayBlock(b)).unwrap().member.0 == bad)
        .unwrap();

    let net = raidline_fabric::mem::MemNetwork::new();
    let addr = ADDR.parse().unwrap();
    let target = start(
        &net,
        "target0",
        addr,
        array.clone(),
        HostAccess::Any,
        Limits::default(),
    );
    let mut c = raidline_initiator::Controller::connect(net.device("host1"), addr, options(1))
        .expect("connect");
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut back = vec![0u8; 4096];
    c.read(0, &ns, Lba(on_bad), &mut back)
        .expect("the read is redone, not failed");
    let at = on_bad as usize * 4096;
    assert!(back == data[at..at + 4096], "reconstructed data differs");
    assert_eq!(
        array.degraded_roles(),
        vec![bad],
        "the member failing I/O is failed"
    );
    let dp = &target.shared().data_path;
    assert!(dp.ring_requests.load(Ordering::Relaxed) >= 1);
    assert!(dp.worker_requests.load(Ordering::Relaxed) >= 1);
    // The whole array still reads back (degraded: the missing member's blocks rebuilt).
    let mut all = vec![0u8; cap];
    for (i, piece) in all.chunks_mut(1 << 20).enumerate() {
        c.read(0, &ns, Lba((i * (1 << 20) / 4096) as u64), piece)
            .unwrap();
    }
    assert!(all == data, "the degraded array differs");
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}
