//! End-to-end: the poller's own io_uring (`io_path = "ring"`) when a member fails there.
//!
//! One member of the array hands out a directory as its descriptor for direct I/O, so every
//! io_uring read on it fails (EISDIR) while nothing else about it is wrong. A host read of a
//! block on that member goes to the poller's ring (the member has a descriptor, the block
//! needs no reconstruction), fails there, and is redone by the blocking engine on the array's
//! maintenance thread (no storage worker thread starts), which fails the member (its io_uring
//! executor uses the same descriptor) and reconstructs the block from the others: the host
//! gets its data, the array runs degraded, and both paths are counted.

mod common;

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::*;
use raidline_initiator::{Lba, Nsid};
use raidline_raid::{ArrayBlock, MemMember, Member, MemberError, MemberIdx, SyncExecutor};

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
    let data = fill(&array, 0x51AB);
    let cap = data.len();
    let geo = *array.geometry();
    let on_bad = (0..geo.capacity_blocks())
        .find(|&b| geo.locate(ArrayBlock(b)).unwrap().member.0 == bad)
        .unwrap();

    let (net, addr, target) = serve(&array);
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
    assert_eq!(
        storage_worker_threads(),
        0,
        "the redo ran on a storage worker, not on the array's maintenance thread"
    );
    // The whole array still reads back (degraded: the missing member's blocks rebuilt).
    let all = read_whole(&mut c, &ns, cap);
    assert!(all == data, "the degraded array differs");
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}

/// Threads of this process named as the blocking engine's storage workers.
fn storage_worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("raid-worker"))
        .count()
}

/// A degraded array (one member set faulty) read whole by the host: every chunk on the
/// missing member is rebuilt by a read task on the poller's ring, with no storage worker.
#[test]
fn degraded_reads_are_rebuilt_on_the_ring_without_workers() {
    let array = create_array(file_members("ring-degraded-read", None));
    let data = fill(&array, 0xDE6A);
    let cap = data.len();
    array.set_faulty(MemberIdx(1)).expect("set faulty");
    assert_eq!(array.degraded_roles(), vec![1]);
    let before = array.stats().degraded_read_segments;
    let (net, addr, target) = serve(&array);
    let mut c = raidline_initiator::Controller::connect(net.device("host1"), addr, options(1))
        .expect("connect");
    let ns = c.namespace(Nsid(1)).unwrap();
    let all = read_whole(&mut c, &ns, cap);
    assert!(all == data, "the degraded array differs");
    let rebuilt = array.stats().degraded_read_segments - before;
    assert!(rebuilt > 0, "no chunk was rebuilt");
    let dp = &target.shared().data_path;
    assert!(dp.ring_requests.load(Ordering::Relaxed) > 0);
    assert_eq!(
        dp.worker_requests.load(Ordering::Relaxed),
        0,
        "a degraded read went to a storage worker"
    );
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}

/// What [`filled_at_qd16`] sets up.
type Filled = (
    Arc<raidline_raid::Array>,
    Vec<u8>,
    raidline_fabric::mem::MemNetwork,
    raidline_target::daemon::Target,
    raidline_initiator::Controller<raidline_fabric::mem::MemFabric>,
    raidline_initiator::Namespace,
);

/// An array of 4 file members (`name`) filled with `seed`'s pattern, served, and a host
/// connected with 16 commands in flight per queue: (array, its bytes, network, target, host,
/// namespace 1).
fn filled_at_qd16(name: &str, seed: u64) -> Filled {
    filled_at_qd16_paced(name, seed, None)
}

/// [`filled_at_qd16`] with every I/O queue pair paced by `cc` (`None`: pacing off).
fn filled_at_qd16_paced(
    name: &str,
    seed: u64,
    cc: Option<raidline_target::daemon::CcSpec>,
) -> Filled {
    let array = create_array(file_members(name, None));
    let data = fill(&array, seed);
    let net = raidline_fabric::mem::MemNetwork::new();
    let addr: std::net::SocketAddr = ADDR.parse().unwrap();
    let mut spec = spec_for(
        addr,
        array.clone(),
        raidline_target::subsystem::HostAccess::Any,
        raidline_target::subsystem::Limits::default(),
    );
    spec.cc = cc;
    let target = raidline_target::daemon::Target::start(net.device("target0"), spec).unwrap();
    let mut o = options(1);
    o.io_depth = 16;
    let mut c = raidline_initiator::Controller::connect(net.device("host1"), addr, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    (array, data, net, target, c, ns)
}

/// The namespace reads back as `model`; then, the target shut down, parity agrees with the
/// data everywhere.
fn reads_back_consistent(
    array: &raidline_raid::Array,
    model: &[u8],
    target: raidline_target::daemon::Target,
    mut c: raidline_initiator::Controller<raidline_fabric::mem::MemFabric>,
    ns: &raidline_initiator::Namespace,
) {
    let all = read_whole(&mut c, ns, model.len());
    assert!(all == model, "the array differs from what was written");
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
    let scrub = array
        .scrub_step(&mut SyncExecutor, u64::MAX, false)
        .unwrap();
    assert_eq!(scrub.mismatches, 0, "parity disagrees with the data");
}

/// Writes `(lba, blocks, seed)` pipelined on one queue (16 in flight) and waits for all.
fn pipelined_writes(
    c: &mut raidline_initiator::Controller<raidline_fabric::mem::MemFabric>,
    ns: &raidline_initiator::Namespace,
    writes: &[(u64, u32, u64)],
) {
    use raidline_initiator::io::{submit_rw, IoOp};
    let mut q = c.take_io_queues().pop().unwrap();
    let mut next = 0;
    let mut done = Vec::new();
    while next < writes.len() || q.in_flight() > 0 {
        while next < writes.len() {
            let Some(tag) = q.alloc() else { break };
            let (lba, blocks, seed) = writes[next];
            q.write_data(tag, 0, &pattern(seed, blocks as usize * 4096))
                .unwrap();
            submit_rw(&mut q, tag, IoOp::Write, ns, Lba(lba), blocks).unwrap();
            next += 1;
        }
        done.clear();
        q.poll(&mut done);
        for &t in &done {
            let f = q.take(t).expect("finished");
            f.result.expect("write acknowledged");
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    c.io.push(q);
}

/// `count` writes `(lba, blocks, seed)` of 4 KiB to 160 KiB within `bytes`: runs of
/// neighbouring small writes (same stripes) and some large ones; seeds from `seed`.
fn random_writes(bytes: usize, count: u64, seed: u64) -> Vec<(u64, u32, u64)> {
    let blocks = (bytes / 4096) as u64;
    let mut writes = Vec::new();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut lba = 0u64;
    for i in 0..count {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = [1u32, 1, 2, 3, 8, 16, 40][(x % 7) as usize];
        if lba + u64::from(n) > blocks || x % 11 == 0 {
            lba = (x >> 20) % (blocks - 40);
        }
        writes.push((lba, n, seed + i));
        lba += u64::from(n);
    }
    writes
}

/// Issues `writes` 16 in flight, in waves of writes that do not overlap (the order of writes
/// in flight together is the target's), and applies them to `model`.
fn write_in_waves(
    c: &mut raidline_initiator::Controller<raidline_fabric::mem::MemFabric>,
    ns: &raidline_initiator::Namespace,
    writes: &[(u64, u32, u64)],
    model: &mut [u8],
) {
    let mut wave: Vec<(u64, u32, u64)> = Vec::new();
    for &w in writes {
        if wave
            .iter()
            .any(|&(l, n, _)| w.0 < l + u64::from(n) && l < w.0 + u64::from(w.1))
        {
            pipelined_writes(c, ns, &wave);
            wave.clear();
        }
        wave.push(w);
        let at = w.0 as usize * 4096;
        model[at..at + w.1 as usize * 4096].copy_from_slice(&pattern(w.2, w.1 as usize * 4096));
    }
    pipelined_writes(c, ns, &wave);
}

/// A degraded array (one member set faulty) written by the host, small writes and large, 16
/// in flight: every write, logged in the partial-parity log, runs on the poller's ring with
/// no storage worker, and the host reads back what it wrote (the missing member's chunks
/// rebuilt).
#[test]
fn degraded_writes_are_logged_on_the_ring_without_workers() {
    let (array, mut model, _net, target, mut c, ns) = filled_at_qd16("ring-degraded-write", 0xDE6B);
    array.set_faulty(MemberIdx(1)).expect("set faulty");
    assert_eq!(array.degraded_roles(), vec![1]);
    let before = array.stats();
    write_in_waves(
        &mut c,
        &ns,
        &random_writes(model.len(), 200, 0xCD00),
        &mut model,
    );
    let after = array.stats();
    let dp = &target.shared().data_path;
    let on_ring = dp.ring_requests.load(Ordering::Relaxed);
    assert!(on_ring >= 200, "{on_ring} of 200 writes on the ring");
    assert_eq!(
        dp.worker_requests.load(Ordering::Relaxed),
        0,
        "a degraded write went to a storage worker"
    );
    assert!(
        after.reconstruct_write > before.reconstruct_write,
        "no write reconstructed the missing chunk"
    );
    assert_eq!(after.writes - before.writes, 200);
    let all = read_whole(&mut c, &ns, model.len());
    assert!(
        all == model,
        "the degraded array differs from what was written"
    );
    assert_eq!(array.torn_writes(), 0);
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}

/// Host writes of 4 KiB to 160 KiB, 16 in flight, many sharing stripes (64 KiB chunks, 192
/// KiB stripes): the array's writes run on the poller's ring (counted), parked while a
/// neighbour holds the stripe; everything reads back and parity is consistent.
#[test]
fn array_writes_run_on_the_ring_and_park_on_busy_stripes() {
    // Filled: marks the array dirty and every bitmap region written.
    let (array, mut model, _net, target, mut c, ns) = filled_at_qd16("ring-writes", 0xF111);
    write_in_waves(
        &mut c,
        &ns,
        &random_writes(model.len(), 300, 0xAB00),
        &mut model,
    );
    let dp = &target.shared().data_path;
    let on_ring = dp.ring_requests.load(Ordering::Relaxed);
    assert!(on_ring >= 250, "{on_ring} of 300 writes on the ring");
    let parked = dp.parked_writes.load(Ordering::Relaxed);
    assert!(parked > 0, "no write waited for a neighbour's stripe");
    // The poller's loop counts reach the metrics (added before each sleep): it worked, and
    // between the waves it slept.
    let work = dp.poller_work_passes.load(Ordering::Relaxed);
    assert!(work >= 100, "{work} poller passes with work for 300 writes");
    let slept = dp.poller_sleeps.load(Ordering::Relaxed);
    assert!(slept > 0, "the poller never slept");
    assert!(dp.poller_sleep_ns.load(Ordering::Relaxed) > 0);
    reads_back_consistent(&array, &model, target, c, &ns);
    assert_eq!(array.torn_writes(), 0);
}

/// Small host writes (their data in the command capsule, i.e. in the shared receive queue's
/// buffers) and reads on the array: every member read and write the ring issues for them is
/// on registered memory (the receive buffers, the pool, the array's scratch for old data and
/// parity), none pins its pages per operation.
#[test]
fn small_writes_and_reads_use_only_fixed_buffers_on_the_ring() {
    let (array, mut model, _net, target, mut c, ns) = filled_at_qd16("ring-fixed", 0xF1C5);
    let blocks = (model.len() / 4096) as u64;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let writes: Vec<(u64, u32, u64)> = (0..200u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % blocks, 1, 0xF000 + i)
        })
        .collect();
    let before = array.stats();
    write_in_waves(&mut c, &ns, &writes, &mut model);
    let after = array.stats();
    let small = (after.rmw - before.rmw) + (after.rcw - before.rcw);
    assert!(small >= 150, "{small} of 200 writes read before writing");
    let dp = &target.shared().data_path;
    let fixed = dp.ring_fixed_ops.load(Ordering::Relaxed);
    let plain = dp.ring_plain_ops.load(Ordering::Relaxed);
    assert!(
        fixed >= 4 * small,
        "{fixed} fixed-buffer operations for {small} small writes"
    );
    assert_eq!(
        plain, 0,
        "{plain} operations on unregistered memory ({fixed} fixed)"
    );
    // Reads through the ring land in pool buffers: fixed too.
    let all = read_whole(&mut c, &ns, model.len());
    assert!(all == model, "the array differs from what was written");
    assert_eq!(dp.ring_plain_ops.load(Ordering::Relaxed), 0);
    assert!(dp.ring_fixed_ops.load(Ordering::Relaxed) > fixed);
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}

/// Writes of more stripes than the blocking engine's round (4 KiB chunks on 4 members: 12 KiB
/// stripes; 256 KiB host writes cover 22 or 23 of them), 16 in flight: each runs on the
/// poller's ring as one task, none goes to a storage worker; everything reads back and
/// parity is consistent.
#[test]
fn writes_of_many_stripes_run_on_the_ring() {
    let cfg = raidline_raid::ArrayConfig {
        chunk: raidline_raid::ChunkSize::new(4096).unwrap(),
        assume_clean: true,
        ..raidline_raid::ArrayConfig::default()
    };
    let array = Arc::new(
        raidline_raid::Array::create(
            file_members("ring-many-stripes", None),
            vec![],
            &cfg,
            Arc::new(raidline_raid::CpuXor::detect()),
        )
        .unwrap(),
    );
    let mut model = fill(&array, 0x3A11);
    let (_net, addr, target) = serve(&array);
    let mut o = options(1);
    o.io_depth = 16;
    let mut c = raidline_initiator::Controller::connect(_net.device("host1"), addr, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let stripe_blocks = 3u64;
    let blocks = (model.len() / 4096) as u64;
    // 64-block writes from odd starts, so that most begin and end inside a stripe.
    let writes: Vec<(u64, u32, u64)> = (0..48u64)
        .map(|i| ((i * 67 + 1) % (blocks - 64), 64, 0x7700 + i))
        .collect();
    assert!(64 / stripe_blocks as usize > raidline_raid::ROUND_STRIPES);
    write_in_waves(&mut c, &ns, &writes, &mut model);
    let dp = &target.shared().data_path;
    assert_eq!(
        dp.worker_requests.load(Ordering::Relaxed),
        0,
        "a write of many stripes went to a storage worker"
    );
    assert!(dp.ring_requests.load(Ordering::Relaxed) >= 48);
    reads_back_consistent(&array, &model, target, c, &ns);
    assert_eq!(array.torn_writes(), 0);
}

/// A sequential stream of 128 KiB writes, 16 in flight, on 4 members with 64 KiB chunks (192
/// KiB stripes): no write covers a stripe alone, yet the poller gathers the writes in flight
/// into whole stripes (no reads, parity from the new data). Everything reads back, parity is
/// consistent, and every write was acknowledged only once its task completed.
#[test]
fn a_stream_of_writes_is_gathered_into_whole_stripes() {
    stream_is_gathered("ring-stream", None);
}

/// The same stream with every queue pair paced at 40 MB/s (`fixed`): the RDMA READs of a burst
/// of 16 writes (2 MiB, 50 ms of tokens) wait in the bucket, and a write held for its
/// neighbour counts a neighbour whose READ waits there as coming. Before it did, a held write
/// whose neighbour's READ was not yet posted went alone, by reconstruct-write (in the lab,
/// rtt-aimd on seqwrite-128k wrote 1,398-1,680 stripes a phase so, against 58-137 unpaced).
#[test]
fn a_paced_stream_of_writes_is_gathered_into_whole_stripes() {
    stream_is_gathered(
        "ring-stream-paced",
        Some(raidline_target::daemon::CcSpec {
            algorithm: "fixed".into(),
            params: vec![("rate_mbps".into(), 320.0)],
        }),
    );
}

fn stream_is_gathered(name: &str, cc: Option<raidline_target::daemon::CcSpec>) {
    // The pacing rate, bytes per second.
    let paced = cc.as_ref().map(|c| c.params[0].1 * 1e6 / 8.0);
    let (array, mut model, _net, target, mut c, ns) = filled_at_qd16_paced(name, 0x57E4, cc);
    let cap = model.len();
    let geo = *array.geometry();
    let stripe_blocks = geo.chunk_blocks() * geo.data_members() as u64;
    assert_eq!(stripe_blocks, 48, "192 KiB stripes of 4 KiB blocks");
    let before = array.stats();
    // Whole stripes' worth of 128 KiB writes, from block 0.
    let stripes = (cap as u64 / 4096) / stripe_blocks / 2 * 2;
    let writes: Vec<(u64, u32, u64)> = (0..stripes * stripe_blocks / 32)
        .map(|i| (i * 32, 32, 0x5000 + i))
        .collect();
    for &(lba, n, seed) in &writes {
        let at = lba as usize * 4096;
        model[at..at + n as usize * 4096].copy_from_slice(&pattern(seed, n as usize * 4096));
    }
    // In bursts of 16, their data ready before the first is sent (a debug build makes
    // 128 KiB of pattern slower than the target writes it).
    use raidline_initiator::io::{submit_rw, IoOp};
    let mut q = c.take_io_queues().pop().unwrap();
    let mut done = Vec::new();
    let started = std::time::Instant::now();
    for burst in writes.chunks(16) {
        let tags: Vec<_> = burst
            .iter()
            .map(|&(_, n, seed)| {
                let tag = q.alloc().expect("a free slot");
                q.write_data(tag, 0, &pattern(seed, n as usize * 4096))
                    .unwrap();
                tag
            })
            .collect();
        for (&tag, &(lba, n, _)) in tags.iter().zip(burst) {
            submit_rw(&mut q, tag, IoOp::Write, &ns, Lba(lba), n).unwrap();
        }
        while q.in_flight() > 0 {
            done.clear();
            q.poll(&mut done);
            for &t in &done {
                q.take(t)
                    .expect("finished")
                    .result
                    .expect("write acknowledged");
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
    let took = started.elapsed();
    c.io.push(q);
    let after = array.stats();
    let full = after.full_stripe - before.full_stripe;
    let partial = (after.rcw + after.rmw) - (before.rcw + before.rmw);
    let dp = &target.shared().data_path;
    let gathered = dp.gathered_writes.load(Ordering::Relaxed);
    eprintln!(
        "{} writes over {stripes} stripes: {full} whole-stripe writes, {partial} partial, \
         {gathered} writes gathered",
        writes.len()
    );
    assert!(
        full * 2 >= stripes,
        "{full} of {stripes} stripes written whole ({partial} partial)"
    );
    assert!(
        gathered * 2 >= writes.len() as u64,
        "{gathered} writes gathered"
    );
    if let Some(rate) = paced {
        // The bucket held the reads back: the stream took (nearly) its bytes' tokens.
        let bytes = writes.len() as f64 * (128 << 10) as f64;
        let floor = bytes / rate * 0.8;
        assert!(
            took.as_secs_f64() >= floor,
            "{:.3} s for {bytes} bytes at {rate} B/s: not paced",
            took.as_secs_f64()
        );
    }
    reads_back_consistent(&array, &model, target, c, &ns);
}

/// A member whose io_uring writes fail: a write on the ring is torn (some member writes
/// landed), redone by the engine on the workers, which fails the member and completes the
/// write degraded: the host sees success, every block reads back, and no torn write is left.
#[test]
fn a_write_failing_on_the_ring_is_redone_by_the_engine_and_fails_the_member() {
    let bad = 1;
    let array = create_array(file_members("ring-torn", Some(bad)));
    let mut model = fill(&array, 0x7042);
    let cap = model.len();
    let (net, addr, target) = serve(&array);
    let mut c =
        raidline_initiator::Controller::connect(net.device("host1"), addr, options(1)).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    // A whole stripe: no reads, so its writes reach the ring (the bad member's fails).
    let data = pattern(0x99, 3 * 65536);
    c.write(0, &ns, Lba(48), &data)
        .expect("the write is redone, not failed");
    model[48 * 4096..48 * 4096 + data.len()].copy_from_slice(&data);
    assert_eq!(
        array.degraded_roles(),
        vec![bad],
        "the failing member is failed"
    );
    assert_eq!(array.torn_writes(), 0, "the redo ended the torn state");
    let dp = &target.shared().data_path;
    assert!(dp.ring_requests.load(Ordering::Relaxed) >= 1);
    assert!(dp.worker_requests.load(Ordering::Relaxed) >= 1);
    assert_eq!(
        storage_worker_threads(),
        0,
        "the redo ran on a storage worker, not on the array's maintenance thread"
    );
    let all = read_whole(&mut c, &ns, cap);
    assert!(all == model, "the degraded array differs");
    c.shutdown().unwrap();
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
}
