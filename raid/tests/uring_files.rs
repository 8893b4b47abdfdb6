//! Integration tests on real files with O_DIRECT through io_uring, in a directory on the
//! build disk (cargo's CARGO_TARGET_TMPDIR, under the build dir — ext4 here, not tmpfs,
//! which would not enforce O_DIRECT alignment). Each test probes first and prints a skip
//! reason instead of failing when the kernel or filesystem lacks a capability.
//!
//! Loop devices: `loop_device_members` runs only as root with `losetup` present, and skips
//! (printing why) otherwise.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raidline_raid::{
    Array, ArrayBlock, ArrayConfig, BufferArena, ChunkSize, CpuXor, FileMember, Member,
    SyncExecutor, UringExecutor,
};

const MIB: u64 = 1 << 20;

/// Filesystem type of the mount holding `dir` (longest matching mount point).
fn fs_type(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, mp, ty) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(mp).then(|| (mp.len(), ty.to_string()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, t)| t)
}

fn test_dir(name: &str) -> Result<PathBuf, String> {
    let base =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    match fs_type(&base) {
        Some(t) if t == "tmpfs" => Err(format!(
            "{} is on tmpfs (no O_DIRECT alignment)",
            base.display()
        )),
        Some(t) => {
            eprintln!("test dir {} is on {t}", base.display());
            Ok(base)
        }
        None => Err("cannot determine the filesystem type".into()),
    }
}

fn make_files(dir: &Path, n: usize, size: u64) -> Result<Vec<Arc<dyn Member>>, String> {
    let mut out: Vec<Arc<dyn Member>> = Vec::new();
    for i in 0..n {
        let p = dir.join(format!("m{i}.img"));
        let f = std::fs::File::create(&p).map_err(|e| e.to_string())?;
        f.set_len(size).map_err(|e| e.to_string())?;
        let m =
            FileMember::open(&p, 4096).map_err(|e| format!("O_DIRECT unsupported here: {e}"))?;
        out.push(Arc::new(m));
    }
    Ok(out)
}

fn pattern(seed: u64, buf: &mut [u8]) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 31) as u8;
    }
}

#[test]
fn file_members_through_io_uring_with_fixed_buffers() {
    let dir = match test_dir("uring") {
        Ok(d) => d,
        Err(why) => {
            return eprintln!("SKIP file_members_through_io_uring_with_fixed_buffers: {why}")
        }
    };
    let members = match make_files(&dir, 4, MIB + 64 * 65536) {
        Ok(m) => m,
        Err(why) => {
            return eprintln!("SKIP file_members_through_io_uring_with_fixed_buffers: {why}")
        }
    };
    let mut exec = match UringExecutor::new(64) {
        Ok(e) => e,
        Err(e) => {
            return eprintln!(
                "SKIP file_members_through_io_uring_with_fixed_buffers: io_uring: {e}"
            )
        }
    };
    // The "pool": registered once, then requests just pass its buffers.
    let mut bufs = BufferArena::with_buffers(2, 4 * MIB as usize, 4096).unwrap();
    let arena = bufs[0].arena().clone();
    let cfg = ArrayConfig {
        chunk: ChunkSize::DEFAULT,
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(members.clone(), vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    // The pool and the engine's scratch, registered once per ring.
    if let Err(e) = exec.register_arenas(&[arena, array.scratch_arena().clone()]) {
        return eprintln!(
            "SKIP file_members_through_io_uring_with_fixed_buffers: register_buffers: {e}"
        );
    }
    let cap = array.geometry().capacity_bytes() as usize;
    assert_eq!(cap, 3 * 64 * 65536);
    let (wbuf, rest) = bufs.split_at_mut(1);
    let (wbuf, rbuf) = (&mut wbuf[0], &mut rest[0]);
    // Full stripes, then unaligned partial writes (RMW/RCW) of odd block counts.
    pattern(1, &mut wbuf[..cap.min(4 * MIB as usize)]);
    let mut model = vec![0u8; cap];
    let n = cap.min(4 * MIB as usize);
    array.write(&mut exec, ArrayBlock(0), &wbuf[..n]).unwrap();
    model[..n].copy_from_slice(&wbuf[..n]);
    for (i, (blk, len)) in [(1u64, 1usize), (17, 5), (100, 33), (500, 2), (48, 48)]
        .into_iter()
        .enumerate()
    {
        pattern(10 + i as u64, &mut wbuf[..len * 4096]);
        array
            .write(&mut exec, ArrayBlock(blk), &wbuf[..len * 4096])
            .unwrap();
        model[blk as usize * 4096..][..len * 4096].copy_from_slice(&wbuf[..len * 4096]);
    }
    let s = array.stats();
    assert!(s.full_stripe > 0 && s.rmw + s.rcw > 0, "{s:?}");
    array
        .read(&mut exec, ArrayBlock(0), &mut rbuf[..n])
        .unwrap();
    assert!(
        rbuf[..n] == model[..n],
        "read back through io_uring differs"
    );
    let (fixed, plain) = exec.op_counts();
    eprintln!("io_uring ops: {fixed} fixed-buffer, {plain} plain");
    assert!(
        fixed > 0 && plain == 0,
        "payload, parity and old data all in registered memory"
    );
    // Same bytes through the synchronous path (pread on the same O_DIRECT files).
    let mut again = vec![0u8; 4096 * 40];
    let mut aligned = raidline_raid::AlignedBuf::new(again.len(), 4096);
    array
        .read(&mut SyncExecutor, ArrayBlock(90), &mut aligned)
        .unwrap();
    again.copy_from_slice(&aligned);
    assert!(again[..] == model[90 * 4096..][..again.len()]);
    // Parity is consistent on disk.
    let p = array.scrub_step(&mut exec, u64::MAX, false).unwrap();
    assert_eq!(p.mismatches, 0);
    array.stop().unwrap();
    drop(array);
    // Reassemble from the files, in another order.
    let mut reopened: Vec<Arc<dyn Member>> = Vec::new();
    for i in [2, 0, 3, 1] {
        reopened.push(Arc::new(
            FileMember::open(&dir.join(format!("m{i}.img")), 4096).unwrap(),
        ));
    }
    let asm = Array::assemble(reopened, None, Arc::new(CpuXor::detect())).unwrap();
    assert!(asm.refused.is_empty() && !asm.resync_pending);
    asm.array
        .read(&mut exec, ArrayBlock(0), &mut rbuf[..n])
        .unwrap();
    assert!(rbuf[..n] == model[..n]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn misaligned_buffers_are_refused_not_corrupted() {
    let dir = match test_dir("misaligned") {
        Ok(d) => d,
        Err(why) => return eprintln!("SKIP misaligned_buffers_are_refused_not_corrupted: {why}"),
    };
    let members = match make_files(&dir, 3, MIB + 8 * 65536) {
        Ok(m) => m,
        Err(why) => return eprintln!("SKIP misaligned_buffers_are_refused_not_corrupted: {why}"),
    };
    let cfg = ArrayConfig {
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let raw = vec![0u8; 4096 * 3];
    let unaligned = &raw[1..4097];
    // A misaligned payload cannot go to an O_DIRECT member: the request is refused up front
    // and no member is blamed.
    let err = array
        .write(&mut SyncExecutor, ArrayBlock(0), unaligned)
        .unwrap_err();
    assert!(
        matches!(
            err,
            raidline_raid::RaidError::Misaligned { align: 4096, .. }
        ),
        "{err}"
    );
    let mut out = vec![0u8; 4096 * 2];
    let start = out.as_ptr().align_offset(4096) + 1;
    assert!(array
        .read(
            &mut SyncExecutor,
            ArrayBlock(0),
            &mut out[start..start + 4096]
        )
        .is_err());
    assert!(array.degraded_roles().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loop_device_members() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !is_root {
        return eprintln!("SKIP loop_device_members: needs root for losetup");
    }
    let dir = match test_dir("loop") {
        Ok(d) => d,
        Err(why) => return eprintln!("SKIP loop_device_members: {why}"),
    };
    let mut devs = Vec::new();
    for i in 0..3 {
        let p = dir.join(format!("l{i}.img"));
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MIB + 16 * 65536).unwrap();
        let out = std::process::Command::new("losetup")
            .args([
                "--find",
                "--show",
                "--direct-io=on",
                "--sector-size",
                "4096",
            ])
            .arg(&p)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                devs.push(String::from_utf8_lossy(&o.stdout).trim().to_string())
            }
            Ok(o) => {
                detach(&devs);
                return eprintln!(
                    "SKIP loop_device_members: losetup: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
            Err(e) => {
                detach(&devs);
                return eprintln!("SKIP loop_device_members: losetup: {e}");
            }
        }
    }
    let opened: Result<Vec<Arc<dyn Member>>, String> = devs
        .iter()
        .map(|d| {
            FileMember::open(Path::new(d), 4096)
                .map(|m| Arc::new(m) as Arc<dyn Member>)
                .map_err(|e| e.to_string())
        })
        .collect();
    let ready = opened.and_then(|m| {
        UringExecutor::new(32)
            .map(|e| (m, e))
            .map_err(|e| format!("io_uring: {e}"))
    });
    let (members, mut exec) = match ready {
        Ok(x) => x,
        Err(why) => {
            detach(&devs);
            let _ = std::fs::remove_dir_all(&dir);
            return eprintln!("SKIP loop_device_members: {why}");
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        assert_eq!(members[0].size_bytes(), MIB + 16 * 65536);
        let cfg = ArrayConfig {
            assume_clean: false,
            ..ArrayConfig::default()
        };
        let array = Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
        while array
            .resync_step(&mut exec, 64)
            .unwrap()
            .is_some_and(|p| !p.finished)
        {}
        let mut bufs = BufferArena::with_buffers(2, 2 * 16 * 65536, 4096).unwrap();
        exec.register_arenas(&[bufs[0].arena().clone()]).unwrap();
        pattern(5, &mut bufs[0]);
        let (w, r) = bufs.split_at_mut(1);
        array
            .write(&mut exec, ArrayBlock(3), &w[0][..100 * 4096])
            .unwrap();
        array
            .read(&mut exec, ArrayBlock(3), &mut r[0][..100 * 4096])
            .unwrap();
        assert!(w[0][..100 * 4096] == r[0][..100 * 4096]);
        assert_eq!(
            array
                .scrub_step(&mut exec, u64::MAX, false)
                .unwrap()
                .mismatches,
            0
        );
        array.stop().unwrap();
    }));
    detach(&devs);
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

fn detach(devs: &[String]) {
    for d in devs {
        let _ = std::process::Command::new("losetup")
            .args(["-d", d])
            .status();
    }
}

#[test]
fn raid_queue_over_io_uring_workers() {
    use raidline_raid::{RaidQueue, Request, RequestKind};
    let dir = match test_dir("queue") {
        Ok(d) => d,
        Err(why) => return eprintln!("SKIP raid_queue_over_io_uring_workers: {why}"),
    };
    let members = match make_files(&dir, 3, MIB + 32 * 65536) {
        Ok(m) => m,
        Err(why) => return eprintln!("SKIP raid_queue_over_io_uring_workers: {why}"),
    };
    if let Err(e) = UringExecutor::new(8) {
        return eprintln!("SKIP raid_queue_over_io_uring_workers: io_uring: {e}");
    }
    let cfg = ArrayConfig {
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Arc::new(Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap());
    // The "pool": 32 buffers of 20 KiB, registered with every worker's ring.
    let bufs = BufferArena::with_buffers(32, 5 * 4096, 4096).unwrap();
    let arena = bufs[0].arena().clone();
    let q = RaidQueue::new(array, 4, move || {
        let mut e = UringExecutor::new(64)?;
        e.register_arenas(std::slice::from_ref(&arena))?;
        Ok(e)
    })
    .unwrap();
    for (i, mut b) in bufs.into_iter().enumerate() {
        pattern(100 + i as u64, &mut b);
        let req = Request {
            tag: i as u64,
            kind: RequestKind::Write,
            lba: ArrayBlock(i as u64 * 5),
            len: 5 * 4096,
            buf: Some(b),
        };
        q.submit(req).unwrap();
    }
    let mut done = Vec::new();
    while done.len() < 32 {
        done.push(q.wait().unwrap());
    }
    for c in done {
        assert!(c.result.is_ok(), "{:?}", c.result);
        let mut b = c.buf.unwrap();
        b.fill(0);
        let req = Request {
            tag: c.tag,
            kind: RequestKind::Read,
            lba: ArrayBlock(c.tag * 5),
            len: 5 * 4096,
            buf: Some(b),
        };
        q.submit(req).unwrap();
    }
    for _ in 0..32 {
        let c = q.wait().unwrap();
        assert!(c.result.is_ok());
        let mut want = vec![0u8; 5 * 4096];
        pattern(100 + c.tag, &mut want);
        assert!(c.buf.unwrap()[..] == want[..], "tag {}", c.tag);
    }
    drop(q);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn five_twelve_byte_blocks_on_files() {
    use raidline_raid::{AlignedBuf, BlockSize};
    let dir = match test_dir("b512") {
        Ok(d) => d,
        Err(why) => return eprintln!("SKIP five_twelve_byte_blocks_on_files: {why}"),
    };
    let mut members: Vec<Arc<dyn Member>> = Vec::new();
    for i in 0..3 {
        let p = dir.join(format!("s{i}.img"));
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MIB + 16 * 8192).unwrap();
        match FileMember::open(&p, 512) {
            Ok(m) => members.push(Arc::new(m)),
            Err(e) => return eprintln!("SKIP five_twelve_byte_blocks_on_files: {e}"),
        }
    }
    // Probe: does the device under this filesystem take 512-byte direct I/O?
    let probe = AlignedBuf::new(4096, 4096);
    if let Err(e) = members[0].write_at(512, &probe[..512]) {
        return eprintln!("SKIP five_twelve_byte_blocks_on_files: 512-byte O_DIRECT refused: {e}");
    }
    let mut exec = match UringExecutor::new(32) {
        Ok(e) => e,
        Err(e) => return eprintln!("SKIP five_twelve_byte_blocks_on_files: io_uring: {e}"),
    };
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(8192).unwrap(),
        block: BlockSize::B512,
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let cap = array.geometry().capacity_bytes() as usize;
    let mut model = vec![0u8; cap];
    let mut buf = AlignedBuf::new(cap + 512, 4096);
    for (i, (blk, n)) in [(0u64, 1usize), (3, 5), (15, 17), (40, 33), (7, 64)]
        .into_iter()
        .enumerate()
    {
        // Offset the buffer by 512 bytes: aligned for the device, not for 4 KiB.
        let data = &mut buf[512..512 + n * 512];
        pattern(i as u64 + 1, data);
        array.write(&mut exec, ArrayBlock(blk), data).unwrap();
        model[blk as usize * 512..][..n * 512].copy_from_slice(data);
    }
    let mut back = AlignedBuf::new(cap, 4096);
    array.read(&mut exec, ArrayBlock(0), &mut back).unwrap();
    assert!(back[..] == model[..]);
    assert_eq!(
        array
            .scrub_step(&mut exec, u64::MAX, false)
            .unwrap()
            .mismatches,
        0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file member that reports no volatile write cache (NVMe with power-loss protection):
/// logged degraded writes then skip the log's cache flush.
#[derive(Debug)]
struct NoVolatileCache(Arc<dyn Member>);

impl Member for NoVolatileCache {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn size_bytes(&self) -> u64 {
        self.0.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), raidline_raid::MemberError> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), raidline_raid::MemberError> {
        self.0.write_at(offset, buf)
    }
    fn flush(&self) -> Result<(), raidline_raid::MemberError> {
        self.0.flush()
    }
    fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.0.direct_fd()
    }
    fn alignment(&self) -> usize {
        self.0.alignment()
    }
    fn volatile_write_cache(&self) -> bool {
        false
    }
}

#[test]
fn degraded_logged_writes_on_write_through_file_members() {
    let skip =
        |why: String| eprintln!("SKIP degraded_logged_writes_on_write_through_file_members: {why}");
    let dir = match test_dir("ordered") {
        Ok(d) => d,
        Err(why) => return skip(why),
    };
    let files = match make_files(&dir, 4, MIB + 32 * 65536) {
        Ok(m) => m,
        Err(why) => return skip(why),
    };
    let mut exec = match UringExecutor::new(64) {
        Ok(e) => e,
        Err(e) => return skip(format!("io_uring: {e}")),
    };
    let wrap = |fs: &[Arc<dyn Member>]| -> Vec<Arc<dyn Member>> {
        fs.iter()
            .map(|f| Arc::new(NoVolatileCache(f.clone())) as Arc<dyn Member>)
            .collect()
    };
    let cfg = ArrayConfig {
        chunk: ChunkSize::DEFAULT,
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(wrap(&files), vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let cap = array.geometry().capacity_bytes() as usize;
    let mut model = vec![0u8; cap];
    let mut buf = raidline_raid::AlignedBuf::new(40 * 4096, 4096);
    pattern(1, &mut buf[..]);
    array.write(&mut exec, ArrayBlock(0), &buf[..]).unwrap();
    model[..buf.len()].copy_from_slice(&buf);
    array.set_faulty(raidline_raid::MemberIdx(1)).unwrap();
    assert!(array.write_hole_protected());
    // Writes of every shape across the degraded array, the missing chunk's included.
    let mut x = 7u64;
    for i in 0..60u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let blocks = (cap / 4096) as u64;
        let len = 1 + (x % 24) as usize;
        let start = (x >> 8) % (blocks - len as u64);
        pattern(100 + i, &mut buf[..len * 4096]);
        array
            .write(&mut exec, ArrayBlock(start), &buf[..len * 4096])
            .unwrap();
        model[start as usize * 4096..][..len * 4096].copy_from_slice(&buf[..len * 4096]);
    }
    let mut back = raidline_raid::AlignedBuf::new(cap, 4096);
    array.read(&mut exec, ArrayBlock(0), &mut back).unwrap();
    assert!(back[..] == model[..], "degraded read back differs");
    // Unclean stop (no `stop()`): assembly replays the log entries of the current epoch over
    // the members as they are; every block must still read back.
    let uuid = array.uuid();
    drop(array);
    let survivors: Vec<Arc<dyn Member>> = [0, 2, 3].iter().map(|&i| files[i].clone()).collect();
    let asm = Array::assemble(wrap(&survivors), Some(uuid), Arc::new(CpuXor::detect())).unwrap();
    assert!(!asm.write_hole_exposed);
    assert_eq!(asm.array.degraded_roles(), vec![1]);
    back.fill(0);
    asm.array.read(&mut exec, ArrayBlock(0), &mut back).unwrap();
    assert!(back[..] == model[..], "read back after replay differs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `Array::direct_reads` through a poller's `OwnedRing` reads what `Array::read` reads, over
/// every request shape (within a chunk, across chunks and stripes); a request touching a
/// missing member's chunk is refused (`None`: the engine must reconstruct it) while one that
/// avoids it still goes direct.
#[test]
fn direct_reads_on_an_owned_ring_match_the_engine() {
    let dir = match test_dir("direct") {
        Ok(d) => d,
        Err(why) => return eprintln!("SKIP direct_reads_on_an_owned_ring_match_the_engine: {why}"),
    };
    let members = match make_files(&dir, 4, 4 * MIB) {
        Ok(m) => m,
        Err(why) => return eprintln!("SKIP direct_reads_on_an_owned_ring_match_the_engine: {why}"),
    };
    let mut ring = match raidline_raid::OwnedRing::new(32) {
        Ok(r) => r,
        Err(e) => return eprintln!("SKIP direct_reads_on_an_owned_ring_match_the_engine: {e}"),
    };
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(16 * 1024).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    let cap = array.geometry().capacity_bytes() as usize;
    let mut fill = BufferArena::with_buffers(1, cap, 4096)
        .unwrap()
        .pop()
        .unwrap();
    pattern(11, &mut fill);
    array
        .write(&mut SyncExecutor, ArrayBlock(0), &fill)
        .unwrap();
    let mut bufs = BufferArena::with_buffers(1, 256 * 1024, 4096).unwrap();
    ring.register_arenas(&[bufs[0].arena().clone()]).unwrap();
    let mut buf = bufs.pop();
    let read_direct = |ring: &mut raidline_raid::OwnedRing,
                       buf: &mut Option<raidline_raid::IoBuf>,
                       at: u64,
                       blocks: u64|
     -> Option<Vec<u8>> {
        let reads = array.direct_reads(ArrayBlock(at), blocks).unwrap()?;
        let segs = reads
            .into_iter()
            .map(|d| raidline_raid::RingSeg {
                buf: raidline_raid::RingBuf::Main,
                member: d.member,
                kind: raidline_raid::RingOpKind::Read,
                offset: d.offset,
                range: d.range,
            })
            .collect();
        ring.submit(raidline_raid::RingRequest {
            scratch: Default::default(),
            more: Vec::new(),
            tag: at,
            buf: buf.take(),
            segs,
        })
        .unwrap();
        let mut out = Vec::new();
        let t0 = std::time::Instant::now();
        while out.is_empty() {
            ring.pump(&mut out).unwrap();
            assert!(t0.elapsed().as_secs() < 10);
        }
        let c = out.pop().unwrap();
        assert!(c.result.is_ok(), "{:?}", c.result);
        *buf = c.buf;
        Some(buf.as_ref().unwrap()[..blocks as usize * 4096].to_vec())
    };
    // Within a chunk, across chunks, across stripes (12 data blocks per stripe).
    for (at, blocks) in [(0, 1), (3, 2), (2, 7), (10, 5), (11, 30), (40, 64)] {
        let got = read_direct(&mut ring, &mut buf, at, blocks).unwrap();
        let want = &fill[at as usize * 4096..(at + blocks) as usize * 4096];
        assert!(got == want, "direct read at {at} x {blocks} differs");
    }
    // Role 1 missing: a request on its chunk must take the engine's path, others still go
    // direct.
    array.set_faulty(raidline_raid::MemberIdx(1)).unwrap();
    let geo = *array.geometry();
    let on_missing = (0..geo.capacity_blocks())
        .find(|&b| geo.locate(ArrayBlock(b)).unwrap().member.0 == 1)
        .unwrap();
    let elsewhere = (0..geo.capacity_blocks())
        .find(|&b| geo.locate(ArrayBlock(b)).unwrap().member.0 != 1)
        .unwrap();
    assert!(array
        .direct_reads(ArrayBlock(on_missing), 1)
        .unwrap()
        .is_none());
    let got = read_direct(&mut ring, &mut buf, elsewhere, 1).unwrap();
    assert!(got == fill[elsewhere as usize * 4096..][..4096]);
    array.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
