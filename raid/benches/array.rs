//! Array benchmark on O_DIRECT file members through io_uring, each figure beside the raw
//! members' figure for the same I/O pattern in the same run.
//!
//!     cargo bench -p raidline-raid --bench array [-- --quick] [-- --log-cost] [-- --ring-limit]
//!
//! The row "4 KiB random write, QD16 (poller ring) against the physical limit" (alone with
//! `--ring-limit`) sets the completion-driven write path, as a target poller drives it,
//! against what the members sustain of the same operations with no engine: their 4 KiB
//! operations per second (half reads, half writes, on one ring at the depth the writes put on
//! them, and at twice that) over the 4 operations a small write needs. It prints
//! `RATIO ring-randwrite-4k raidline=<IOPS> limit=<IOPS> ratio=<r> limit_depth64=<IOPS>
//! ratio_depth64=<r> (rounds: ...)` (issue 16's bar: 0.85).
//!
//! `--log-cost` runs only the write-hole protection cost rows (the healthy array's 4 KiB
//! random writes under `write_hole = always` and `degraded`; the degraded array's with the
//! partial-parity log on and off, with and without the flush) and the
//! floor rows: the same member operations issued raw (reads → [8 KiB log write →] writes, at
//! QD1, as a lockstep batch of 16 requests with the log writes per request or merged per
//! member, and from 16 threads; RMW only and the degraded array's request mix), which is
//! what the log costs on these members before any engine overhead. The batch of 16 also
//! runs the leanest log layouts (one shared header per member write, partial parity with no
//! header) and a write-back journal's extra 4 KiB per request with no dependent step.
//!
//! Members are files in cargo's bench tmp dir (under the build dir; must not be tmpfs).
//! One thread, one ring, one request at a time (queue depth 1 per request; a request's
//! member operations go out together). Raw figures use the same executor with the member
//! operations a request would need without RAID: for a full stripe, one chunk per member
//! in one batch; for 4 KiB random I/O, one 4 KiB operation on a random member.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_raid::{
    Array, ArrayBlock, ArrayConfig, BufferArena, ChunkSize, CpuXor, Executor, FileMember, IoBuf,
    Member, MemberIdx, MemberOp, OwnedRing, RaidQueue, Request, RequestKind, Throttle,
    UringExecutor,
};

/// Queue depth of the RaidQueue rows (= worker threads, each with its own ring).
const QD: usize = 16;

/// 4 KiB random requests at queue depth `QD` through a `RaidQueue`; returns (ops, seconds).
fn queue_iops(array: &Arc<Array>, write: bool, budget: Duration, seed: u64) -> (u64, f64) {
    let cap = array.geometry().capacity_blocks();
    let bufs = BufferArena::with_buffers(QD, 4096, 4096).expect("arena");
    let arenas = [bufs[0].arena().clone(), array.scratch_arena().clone()];
    let q = RaidQueue::new(array.clone(), QD, move || {
        let mut e = UringExecutor::new(16)?;
        e.register_arenas(&arenas)?;
        Ok(e)
    })
    .expect("queue");
    let mut rng = Rng(seed | 1);
    let kind = if write {
        RequestKind::Write
    } else {
        RequestKind::Read
    };
    for (i, b) in bufs.into_iter().enumerate() {
        let lba = ArrayBlock(rng.next(cap));
        let req = Request {
            tag: i as u64,
            kind,
            lba,
            len: 4096,
            buf: Some(b),
        };
        q.submit(req).expect("submit");
    }
    let t = Instant::now();
    let mut n = 0u64;
    let mut outstanding = QD;
    while outstanding > 0 {
        let c = q.wait().expect("completion");
        c.result.expect("request");
        n += 1;
        if t.elapsed() < budget {
            let lba = ArrayBlock(rng.next(cap));
            let req = Request {
                tag: c.tag,
                kind,
                lba,
                len: 4096,
                buf: c.buf,
            };
            q.submit(req).expect("submit");
        } else {
            outstanding -= 1;
        }
    }
    (n, t.elapsed().as_secs_f64())
}

/// 4 KiB random writes, `QD` in flight, the way a target poller drives them: each a write
/// task ([`Array::start_write`]) on one [`OwnedRing`] (the pool and the engine's scratch
/// registered), its completions fed back as they come, partial-parity log included. A write
/// whose stripe another holds waits for the next completion. What the path declines or hands
/// back goes through [`Array::write`] (counted in [`RING_FALLBACKS`]; none is expected).
/// Returns (writes, seconds); the ring's shared flushes are added to [`FLUSHES`].
fn ring_iops(array: &Arc<Array>, budget: Duration, seed: u64) -> (u64, f64) {
    use raidline_raid::{WriteNext, WriteStart};
    let mut ring = OwnedRing::new(256).expect("io_uring");
    let mut idle = BufferArena::with_buffers(QD, 4096, 4096).expect("arena");
    ring.register_arenas(&[idle[0].arena().clone(), array.scratch_arena().clone()])
        .expect("register");
    let mut sync = UringExecutor::new(16).expect("io_uring");
    let cap = array.geometry().capacity_blocks();
    let mut rng = Rng(seed | 1);
    let mut tasks = std::collections::HashMap::new();
    let (mut tag, mut done, mut out) = (0u64, 0u64, Vec::new());
    let fallback = |b: &IoBuf, lba: ArrayBlock, sync: &mut UringExecutor| {
        array.write(sync, lba, &b[..4096]).expect("write");
        RING_FALLBACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let t0 = Instant::now();
    let flushes0 = ring.flush_counts().1;
    loop {
        let running = t0.elapsed() < budget;
        while running && !idle.is_empty() {
            let Some(b) = idle.pop() else { break };
            let lba = ArrayBlock(rng.next(cap));
            tag += 1;
            match array.start_write(tag, lba, 4096, b, Vec::new(), true) {
                WriteStart::Started(t, req) => {
                    ring.submit(req).map_err(|(_, e)| e).expect("ring submit");
                    tasks.insert(tag, (t, lba));
                }
                WriteStart::Busy(b, _) => {
                    idle.push(b);
                    if tasks.is_empty() {
                        // Nothing in flight to wait for: the owner marks the array dirty.
                        array.mark_dirty_if_wanted().expect("mark dirty");
                        continue;
                    }
                    break;
                }
                WriteStart::Declined(b, _) => {
                    fallback(&b, lba, &mut sync);
                    done += 1;
                    idle.push(b);
                }
            }
        }
        if tasks.is_empty() && !running {
            break;
        }
        pump_or_yield(&mut ring, &mut out);
        for c in out.drain(..) {
            let Some((mut t, lba)) = tasks.remove(&c.tag) else {
                panic!("a completion of no task");
            };
            match t.complete(array, c) {
                WriteNext::Submit(r) => {
                    ring.submit(r).map_err(|(_, e)| e).expect("ring submit");
                    tasks.insert(t.tag(), (t, lba));
                }
                WriteNext::Done(Some(b), _) => {
                    done += 1;
                    idle.push(b);
                }
                WriteNext::Redo {
                    buf: Some(b), torn, ..
                } => {
                    fallback(&b, lba, &mut sync);
                    if torn {
                        array.end_torn();
                    }
                    done += 1;
                    idle.push(b);
                }
                other => panic!("a task lost its buffer: {other:?}"),
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    FLUSHES.fetch_add(
        ring.flush_counts().1 - flushes0,
        std::sync::atomic::Ordering::Relaxed,
    );
    (done, secs)
}

/// What the members sustain, the physical limit under the ring rows: random 4 KiB
/// operations on random members, every other one a read (a small write's reads and writes
/// in equal numbers), `depth` in flight on one [`OwnedRing`] with registered buffers (the
/// path [`ring_iops`] takes, with no engine and no dependency between operations). Returns
/// (operations, seconds).
fn raw_ring_iops(
    members: &[Arc<dyn Member>],
    depth: usize,
    blocks: u64,
    budget: Duration,
    seed: u64,
) -> (u64, f64) {
    use raidline_raid::{RingBuf, RingOpKind, RingRequest, RingScratch, RingSeg, RingSegs};
    let mut ring = OwnedRing::new(256).expect("io_uring");
    let mut idle = BufferArena::with_buffers(depth, 4096, 4096).expect("arena");
    ring.register_arenas(&[idle[0].arena().clone()])
        .expect("register");
    let mut rng = Rng(seed | 1);
    let (mut tag, mut done, mut in_flight, mut out) = (0u64, 0u64, 0usize, Vec::new());
    let t0 = Instant::now();
    loop {
        let running = t0.elapsed() < budget;
        if running {
            loop {
                let Some(b) = idle.pop() else { break };
                tag += 1;
                let m = rng.next(members.len() as u64) as usize;
                let mut segs = RingSegs::new();
                segs.push(RingSeg {
                    member: members[m].clone(),
                    kind: if tag % 2 == 0 {
                        RingOpKind::Read
                    } else {
                        RingOpKind::Write
                    },
                    offset: MIB + rng.next(blocks) * 4096,
                    buf: RingBuf::Main,
                    range: 0..4096,
                });
                let req = RingRequest {
                    tag,
                    buf: Some(b),
                    more: Vec::new(),
                    scratch: RingScratch::new(),
                    segs,
                };
                ring.submit(req).map_err(|(_, e)| e).expect("ring submit");
                in_flight += 1;
            }
        }
        if in_flight == 0 && !running {
            break;
        }
        pump_or_yield(&mut ring, &mut out);
        for c in out.drain(..) {
            c.result.map_err(|(_, e)| e).expect("member operation");
            done += 1;
            in_flight -= 1;
            idle.push(c.buf.expect("the buffer comes back"));
        }
    }
    (done, t0.elapsed().as_secs_f64())
}

/// 4 KiB random writes on the ring ([`ring_iops`]) against the members' physical limit: what
/// they sustain of the same operations ([`raw_ring_iops`]) divided by the 4 operations a small
/// write needs (2 reads, 2 writes). The limit is taken at the depth QD16 small writes can put
/// on the members (2 operations each: 32), and at twice that, which no QD16 workload of
/// small writes can use but which shows how much more the members have. Three rounds in
/// alternating order; returns the row and prints a `RATIO` line with the medians.
fn ring_vs_limit_row(
    array: &Arc<Array>,
    members: &[Arc<dyn Member>],
    blocks: u64,
    budget: Duration,
) -> (String, String, String) {
    let (mut ring, mut at_qd, mut deep) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..3u64 {
        let mut measure_ring = || {
            let (n, s) = ring_iops(array, budget, 11 + round);
            ring.push(n as f64 / s);
        };
        let mut measure_raw = || {
            let seed = 0x5eed_0000 + 2 * round;
            let at = |depth: usize, seed: u64| {
                let (n, s) = raw_ring_iops(members, depth, blocks, budget, seed);
                n as f64 / s / 4.0
            };
            // Alternating which depth goes first, as the ring and the members alternate.
            if round % 2 == 0 {
                at_qd.push(at(2 * QD, seed));
                deep.push(at(4 * QD, seed + 1));
            } else {
                deep.push(at(4 * QD, seed + 1));
                at_qd.push(at(2 * QD, seed));
            }
        };
        if round % 2 == 0 {
            measure_ring();
            measure_raw();
        } else {
            measure_raw();
            measure_ring();
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let rounded = |v: &[f64]| v.iter().map(|x| x.round() as u64).collect::<Vec<_>>();
    let (r, l, d) = (median(&ring), median(&at_qd), median(&deep));
    println!(
        "RATIO ring-randwrite-4k raidline={r:.0} limit={l:.0} ratio={:.2} limit_depth{}={d:.0} ratio_depth{}={:.2} (rounds: ring {:?}, limit at depth {} {:?}, at depth {} {:?})",
        r / l,
        4 * QD,
        4 * QD,
        r / d,
        rounded(&ring),
        2 * QD,
        rounded(&at_qd),
        4 * QD,
        rounded(&deep)
    );
    (
        format!("4 KiB random write, QD{QD} (poller ring) against the physical limit"),
        format!("{r:.0} IOPS"),
        format!(
            "member ops / 4: {l:.0} IOPS at depth {} ({:.2}x), {d:.0} at depth {} ({:.2}x)",
            2 * QD,
            r / l,
            4 * QD,
            r / d
        ),
    )
}

/// One pass of `ring`: what completed goes to `out` (emptied first); the thread yields when
/// nothing did.
fn pump_or_yield(ring: &mut OwnedRing, out: &mut Vec<raidline_raid::RingCompletion>) {
    out.clear();
    ring.pump(out).expect("pump");
    if out.is_empty() {
        std::thread::yield_now();
    }
}

/// Writes [`ring_iops`] handed to the blocking engine (declined or redone).
static RING_FALLBACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Member cache flushes so far (every bench member counts its flushes here).
static FLUSHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `run(log_on)` in `pairs` back-to-back pairs (alternating which goes first) and
/// returns (median of per-pair cost `1 - on/off`, mean on rate, mean off rate, all costs,
/// member flushes per request with the log on).
fn paired_cost(
    array: &Array,
    what: Cost,
    pairs: usize,
    mut run: impl FnMut(bool) -> (u64, f64),
) -> (f64, f64, f64, Vec<String>, f64) {
    let mut costs = Vec::with_capacity(pairs);
    let (mut on, mut off) = ((0u64, 0f64), (0u64, 0f64));
    let mut on_flushes = 0u64;
    for i in 0..pairs {
        let order = if i % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        let mut rate = [0f64; 2];
        for enabled in order {
            what.switch(array, enabled);
            let f0 = FLUSHES.load(std::sync::atomic::Ordering::Relaxed);
            let (n, s) = run(enabled);
            if enabled {
                on_flushes += FLUSHES.load(std::sync::atomic::Ordering::Relaxed) - f0;
            }
            rate[usize::from(!enabled)] = n as f64 / s;
            let acc = if enabled { &mut on } else { &mut off };
            acc.0 += n;
            acc.1 += s;
        }
        costs.push(1.0 - rate[0] / rate[1]);
    }
    what.switch(array, true);
    let shown = costs.iter().map(|c| format!("{:.0}%", c * 100.0)).collect();
    costs.sort_by(f64::total_cmp);
    (
        costs[costs.len() / 2],
        on.0 as f64 / on.1,
        off.0 as f64 / off.1,
        shown,
        on_flushes as f64 / on.0.max(1) as f64,
    )
}

/// Raw members: batches of `QD` random 4 KiB operations on random members.
fn raw_qd_iops(
    exec: &mut UringExecutor,
    members: &[Arc<dyn Member>],
    buf: &mut [u8],
    write: bool,
    blocks: u64,
    budget: Duration,
) -> (u64, f64) {
    let mut rng = Rng(77);
    timed(budget, || {
        let mut ops = Vec::with_capacity(QD);
        let mut rest = &mut buf[..QD * 4096];
        for _ in 0..QD {
            let (b, r) = std::mem::take(&mut rest).split_at_mut(4096);
            rest = r;
            let m = rng.next(members.len() as u64) as usize;
            let off = MIB + rng.next(blocks) * 4096;
            ops.push(if write {
                MemberOp::write(MemberIdx(m), &*members[m], off, b)
            } else {
                MemberOp::read(MemberIdx(m), &*members[m], off, b)
            });
        }
        exec.execute(&mut ops);
        QD as u64
    })
}

const MIB: u64 = 1 << 20;
const N: usize = 4;
const CHUNK: usize = 64 * 1024;

struct Rng(u64);
impl Rng {
    fn next(&mut self, m: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % m
    }
}

fn open_members(
    dir: &std::path::Path,
    names: &[String],
    size: u64,
    create: bool,
) -> Vec<Arc<dyn Member>> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            if create {
                // Fully written (not sparse), so no figure pays for ext4 block allocation.
                use std::io::Write;
                let mut f = std::fs::File::create(&p).expect("create member file");
                let zeros = vec![0u8; MIB as usize];
                for _ in 0..size / MIB {
                    f.write_all(&zeros).expect("fill member file");
                }
                f.sync_all().expect("sync member file");
            }
            Arc::new(FileMember::open(&p, 4096).expect("O_DIRECT open")) as Arc<dyn Member>
        })
        .collect()
}

/// Runs `f` repeatedly for `budget`; returns (operations, seconds).
fn timed(budget: Duration, mut f: impl FnMut() -> u64) -> (u64, f64) {
    let t = Instant::now();
    let mut ops = 0;
    while t.elapsed() < budget {
        ops += f();
    }
    (ops, t.elapsed().as_secs_f64())
}

/// A bench member: counts its flushes in [`FLUSHES`]; with `volatile: Some(false)` it
/// reports no volatile write cache (what enterprise NVMe with power-loss protection, or a
/// write-through cache, reports), so the log's flushes are skipped. Everything else (the
/// `O_DIRECT` file, io_uring through `direct_fd`) is the wrapped member's.
#[derive(Debug)]
struct Counted(Arc<dyn Member>, Option<bool>);

impl Member for Counted {
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
        FLUSHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.flush()
    }
    fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.0.direct_fd()
    }
    fn alignment(&self) -> usize {
        self.0.alignment()
    }
    fn volatile_write_cache(&self) -> bool {
        self.1.unwrap_or_else(|| self.0.volatile_write_cache())
    }
}

/// What a cost row pair switches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cost {
    /// The partial-parity log on (`true`) or off, on a degraded array.
    Log,
    /// Write-hole policy "always" (`true`) or "degraded", on a healthy array: the cost of
    /// logging healthy writes.
    Policy,
}

impl Cost {
    fn switch(self, array: &Array, on: bool) {
        match self {
            Cost::Log => array.set_write_hole_protection(on).expect("switch the log"),
            Cost::Policy => array
                .set_write_hole_policy(if on {
                    raidline_raid::WriteHolePolicy::Always
                } else {
                    raidline_raid::WriteHolePolicy::Degraded
                })
                .expect("set the policy"),
        }
    }

    fn labels(self) -> [&'static str; 4] {
        match self {
            Cost::Log => [
                "degraded 4 KiB random write",
                "log on",
                "log off",
                "write-hole protection cost",
            ],
            Cost::Policy => [
                "healthy 4 KiB random write",
                "write_hole = always",
                "write_hole = degraded",
                "write_hole = always cost while healthy",
            ],
        }
    }
}

/// Write-hole protection cost: 4 KiB random writes with the protection on and off (see
/// [`Cost`]), in back-to-back pairs (alternating order) so drifting background load hits
/// both alike; the cost is the median over pairs. Rows at QD1, 8 threads and QD`QD`; each run
/// lasts `slice`, and `pairs` sets the number of pairs (see `main`).
#[allow(clippy::too_many_arguments)]
fn log_cost_rows(
    array: &Arc<Array>,
    cost: Cost,
    exec: &mut UringExecutor,
    wbuf: &[u8],
    (slice, pairs): (Duration, usize),
    rng: &mut Rng,
    what: &str,
    rows: &mut Vec<(String, String, String)>,
) {
    let cap_blocks = array.geometry().capacity_blocks();
    let [kind, on, off, name] = cost.labels();
    let qd1 = paired_cost(array, cost, 3 * pairs, |_| {
        timed(slice, || {
            array
                .write(exec, ArrayBlock(rng.next(cap_blocks)), &wbuf[..4096])
                .expect("write");
            1
        })
    });
    // 8 threads, each its own ring (like target pollers): log flushes of concurrent
    // requests are shared (group commit).
    let threads = 8;
    let mt = |_: bool| {
        let total = std::sync::atomic::AtomicU64::new(0);
        let t0 = Instant::now();
        std::thread::scope(|sc| {
            for t in 0..threads {
                let total = &total;
                sc.spawn(move || {
                    let mut ex = UringExecutor::new(64).expect("io_uring");
                    let mut buf = raidline_raid::AlignedBuf::new(4096, 4096);
                    buf.fill(t as u8);
                    let mut rng = Rng(0x9E37 + t as u64);
                    let (n, _) = timed(slice, || {
                        array
                            .write(&mut ex, ArrayBlock(rng.next(cap_blocks)), &buf)
                            .expect("write");
                        1
                    });
                    total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        (total.into_inner(), t0.elapsed().as_secs_f64())
    };
    let t8 = paired_cost(array, cost, 2 * pairs, mt);
    let mut seed = 40;
    let qdq = paired_cost(array, cost, 2 * pairs, |_| {
        seed += 1;
        queue_iops(array, true, slice, seed)
    });
    let ring = paired_cost(array, cost, 2 * pairs, |_| {
        seed += 1;
        ring_iops(array, slice, seed)
    });
    for (label, c) in [
        ("QD1".to_string(), qd1),
        ("8 threads".to_string(), t8),
        (format!("QD{QD} (RaidQueue)"), qdq),
        (format!("QD{QD} (poller ring)"), ring),
    ] {
        rows.push((
            format!("{kind}{what}, {label}, {on}"),
            format!("{:.0} IOPS", c.1),
            "-".into(),
        ));
        rows.push((
            format!("{kind}{what}, {label}, {off}"),
            format!("{:.0} IOPS", c.2),
            "-".into(),
        ));
        rows.push((
            format!("{name}{what}, {label} (median of pairs)"),
            format!("{:.1} %", c.0 * 100.0),
            "-".into(),
        ));
        // Flushes are counted on the degraded arrays' members (`Counted`) only.
        let flushes = match cost {
            Cost::Log => format!("; {:.2} member flushes per request, {on}", c.4),
            Cost::Policy => String::new(),
        };
        eprintln!(
            "{name}{what}, {label}: {:.1} % (pairs: {:?}{flushes})",
            c.0 * 100.0,
            c.3,
        );
    }
}

/// Where the floor rows put their log entries: the array's own log area (`[64 KiB, 1 MiB)` of
/// every member, free once the array is gone), in slots spaced as the array's (a 4 KiB header
/// and two 64 KiB chunks: 7 slots).
const FLOOR_LOG: u64 = 64 * 1024;
const FLOOR_LOG_BYTES: u64 = MIB - FLOOR_LOG;
const FLOOR_SLOT: u64 = 4096 + 2 * CHUNK as u64;
const FLOOR_SLOTS: u64 = FLOOR_LOG_BYTES / FLOOR_SLOT;
/// One log entry: 4 KiB header + 4 KiB partial parity.
const ENTRY: usize = 8192;

/// The log phase of a floor pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FloorLog {
    /// No log: reads, then writes.
    Off,
    /// One 8 KiB write per request to its "parity" member's slot.
    PerRequest,
    /// The entries of a batch's requests that go to one member merged into one contiguous
    /// write there (a ring per member): what group commit of log writes could buy.
    Batched,
    /// Per member one write of one shared 4 KiB header + 4 KiB partial parity per entry
    /// (headers amortised over the batch): the leanest log format with a header.
    SharedHeader,
    /// Per member one write of 4 KiB partial parity per entry, no header at all: a lower
    /// bound on any partial-parity log that lands between the reads and the writes.
    PpOnly,
    /// No log between the reads and the writes; instead one extra 4 KiB write per request
    /// (its new data appended to a per-member ring) issued with the data writes: the extra
    /// bytes of a write-back journal that acknowledges after one write, without its later
    /// write in place or any dependent step.
    Journal,
}

impl FloorLog {
    /// Bytes of the one log write a member gets for `k` entries of a batch (merged layouts).
    fn merged_bytes(self, k: usize) -> usize {
        match self {
            FloorLog::Batched => k * ENTRY,
            FloorLog::SharedHeader => 4096 + k * 4096,
            FloorLog::PpOnly => k * 4096,
            FloorLog::Off | FloorLog::PerRequest | FloorLog::Journal => 0,
        }
    }
}

/// Panics unless every operation of an executed batch succeeded (a bench cannot go on).
fn check_ops(ops: &[MemberOp<'_>]) {
    for op in ops {
        assert!(
            matches!(op.result, Some(Ok(()))),
            "raw member op at {} failed: {:?}",
            op.offset,
            op.result
        );
    }
}

/// One floor pattern: the log phase, a flush after it, and the request mix.
#[derive(Debug, Clone, Copy)]
struct FloorPattern {
    log: FloorLog,
    /// fdatasync each member that got a log entry, after the log writes (write-back cache).
    flush: bool,
    /// The degraded array's request mix instead of RMW only: with 4 roles and one missing, a
    /// random 4 KiB write lands on a stripe whose parity is the missing role 1/4 of the time
    /// (data write only, never logged), on the missing role's chunk 1/4 of the time (2 reads,
    /// then the parity write alone; not logged while its slot holds another stripe's entry)
    /// and is a logged RMW the other half.
    mix: bool,
}

/// What one floor request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FloorReq {
    /// 2 reads, [log entry,] 2 writes.
    Rmw,
    /// 2 reads, 1 write (of the "parity" member), never logged.
    ParityOnly,
    /// 1 write (of the "data" member), never logged.
    DataOnly,
}

/// One round of the floor pattern, raw on `members` (no array, no parity math, no locks):
/// `batch` requests, each (an RMW) 2 reads of 4 KiB (a random "data" and a different
/// "parity" member, one random data-area offset) in one submission, wait; then per the
/// pattern's log the log writes, wait, and with `flush` an fdatasync of each member that got
/// an entry; then the 2 writes of every request, wait. Returns `batch` (requests done).
#[allow(clippy::too_many_arguments)]
fn floor_round(
    exec: &mut UringExecutor,
    members: &[Arc<dyn Member>],
    (rbuf, wbuf): (&mut [u8], &[u8]),
    pat: FloorPattern,
    batch: usize,
    blocks: u64,
    rng: &mut Rng,
    ring: &mut [u64; N],
) -> u64 {
    let mut reqs = [(FloorReq::Rmw, 0usize, 0usize, 0u64); QD];
    for r in &mut reqs[..batch] {
        let kind = match rng.next(4) {
            0 if pat.mix => FloorReq::DataOnly,
            1 if pat.mix => FloorReq::ParityOnly,
            _ => FloorReq::Rmw,
        };
        let d = rng.next(N as u64) as usize;
        let p = (d + 1 + rng.next(N as u64 - 1) as usize) % N;
        *r = (kind, d, p, MIB + rng.next(blocks) * 4096);
    }
    let reqs = &reqs[..batch];
    let mut ops = Vec::with_capacity(2 * batch);
    let mut rest = &mut rbuf[..2 * batch * 4096];
    for &(_, d, p, off) in reqs.iter().filter(|r| r.0 != FloorReq::DataOnly) {
        for m in [d, p] {
            let (b, r) = std::mem::take(&mut rest).split_at_mut(4096);
            rest = r;
            ops.push(MemberOp::read(MemberIdx(m), &*members[m], off, b));
        }
    }
    if !ops.is_empty() {
        exec.execute(&mut ops);
        check_ops(&ops);
    }
    let logged = || reqs.iter().filter(|r| r.0 == FloorReq::Rmw);
    let mut entries = [0usize; N];
    for &(_, _, p, _) in logged() {
        entries[p] += 1;
    }
    let mut ops = Vec::with_capacity(batch);
    match pat.log {
        FloorLog::Off => {}
        FloorLog::PerRequest => {
            for &(_, _, p, _) in logged() {
                let off = FLOOR_LOG + rng.next(FLOOR_SLOTS) * FLOOR_SLOT;
                ops.push(MemberOp::write(
                    MemberIdx(p),
                    &*members[p],
                    off,
                    &wbuf[..ENTRY],
                ));
            }
        }
        FloorLog::Batched | FloorLog::SharedHeader | FloorLog::PpOnly => {
            for (m, &k) in entries.iter().enumerate().filter(|e| *e.1 > 0) {
                let bytes = pat.log.merged_bytes(k);
                let len = bytes as u64;
                if ring[m] + len > FLOOR_LOG_BYTES {
                    ring[m] = 0;
                }
                ops.push(MemberOp::write(
                    MemberIdx(m),
                    &*members[m],
                    FLOOR_LOG + ring[m],
                    &wbuf[..bytes],
                ));
                ring[m] += len;
            }
        }
        FloorLog::Journal => {}
    }
    if !ops.is_empty() {
        exec.execute(&mut ops);
        check_ops(&ops);
        if pat.flush {
            for (m, _) in entries.iter().enumerate().filter(|e| *e.1 > 0) {
                members[m].flush().expect("fdatasync");
            }
        }
    }
    let mut ops = Vec::with_capacity(3 * batch);
    for &(kind, d, p, off) in reqs {
        if pat.log == FloorLog::Journal {
            if ring[p] + 4096 > FLOOR_LOG_BYTES {
                ring[p] = 0;
            }
            let b = &wbuf[..4096];
            ops.push(MemberOp::write(
                MemberIdx(p),
                &*members[p],
                FLOOR_LOG + ring[p],
                b,
            ));
            ring[p] += 4096;
        }
        if kind != FloorReq::ParityOnly {
            let b = &wbuf[..4096];
            ops.push(MemberOp::write(MemberIdx(d), &*members[d], off, b));
        }
        if kind != FloorReq::DataOnly {
            let b = &wbuf[4096..8192];
            ops.push(MemberOp::write(MemberIdx(p), &*members[p], off, b));
        }
    }
    exec.execute(&mut ops);
    check_ops(&ops);
    batch as u64
}

/// Runs `k` variants once per round for `rounds` rounds, rotating which goes first (for two,
/// alternating), so drifting background load hits all alike. Returns per variant (median over
/// rounds of the cost `1 - rate / rate of variant 0` in the same round, mean rate, the costs).
fn rotated_costs(
    k: usize,
    rounds: usize,
    mut run: impl FnMut(usize) -> (u64, f64),
) -> Vec<(f64, f64, Vec<String>)> {
    let mut costs = vec![Vec::with_capacity(rounds); k];
    let mut totals = vec![(0u64, 0f64); k];
    for r in 0..rounds {
        let mut rate = vec![0f64; k];
        for j in 0..k {
            let v = (r + j) % k;
            let (n, s) = run(v);
            rate[v] = n as f64 / s;
            totals[v].0 += n;
            totals[v].1 += s;
        }
        for v in 0..k {
            costs[v].push(1.0 - rate[v] / rate[0]);
        }
    }
    costs
        .into_iter()
        .zip(totals)
        .map(|(mut c, (n, s))| {
            let shown = c.iter().map(|c| format!("{:.0}%", c * 100.0)).collect();
            c.sort_by(f64::total_cmp);
            (c[c.len() / 2], n as f64 / s, shown)
        })
        .collect()
}

/// The floor under the write-hole protection cost: the member operations of degraded 4 KiB
/// writes with and without the log, issued raw through the same executor on the bench's
/// `members` (no array: it must be gone, the log area is reused), members treated as having
/// no volatile cache (no flush) unless a row says fdatasync. Blocks of rows: at QD1 one
/// request per round; at depth `QD` requests in lockstep in one thread (each phase of all
/// `QD` requests in one submission), with the log writes per request or merged per member
/// (8 KiB per entry, a shared header, no header; see [`FloorLog`]), RMW only and the mix;
/// `QD` threads, each its own ring, running the QD1 pattern; and QD1 and `QD` threads with
/// the degraded array's request mix (see [`FloorPattern::mix`]). Each variant runs `slice`
/// per round; `rounds` rounds per block, variants rotating (see [`rotated_costs`]).
fn log_floor_rows(
    exec: &mut UringExecutor,
    members: &[Arc<dyn Member>],
    (rbuf, wbuf): (&mut [u8], &[u8]),
    (slice, rounds): (Duration, usize),
    blocks: u64,
    rows: &mut Vec<(String, String, String)>,
) {
    let mut rng = Rng(0xF1_0040);
    let mut ring = [0u64; N];
    let pat = |log, flush, mix| FloorPattern { log, flush, mix };
    let rmw = [
        (
            "2 reads → 2 writes".to_string(),
            pat(FloorLog::Off, false, false),
        ),
        (
            "2 reads → 8 KiB log write → 2 writes".to_string(),
            pat(FloorLog::PerRequest, false, false),
        ),
        (
            "2 reads → 8 KiB log write → fdatasync → 2 writes".to_string(),
            pat(FloorLog::PerRequest, true, false),
        ),
    ];
    let depth = [
        ("32 reads → 32 writes".to_string(), rmw[0].1),
        (
            format!("32 reads → {QD} log writes of 8 KiB → 32 writes"),
            rmw[1].1,
        ),
        (
            "32 reads → 1 log write per member (its entries contiguous) → 32 writes".to_string(),
            pat(FloorLog::Batched, false, false),
        ),
        (
            "32 reads → 1 log write per member → fdatasync of each → 32 writes".to_string(),
            pat(FloorLog::Batched, true, false),
        ),
        (
            "32 reads → 1 log write per member (shared 4 KiB header + 4 KiB PP per entry) → 32 writes"
                .to_string(),
            pat(FloorLog::SharedHeader, false, false),
        ),
        (
            "32 reads → 1 log write per member (4 KiB PP per entry, no header) → 32 writes"
                .to_string(),
            pat(FloorLog::PpOnly, false, false),
        ),
        (
            format!("32 reads → 32 writes + {QD} journal writes of 4 KiB (no dependent log)"),
            pat(FloorLog::Journal, false, false),
        ),
    ];
    // The same merged layouts on the degraded array's request mix (only the RMWs logged; the
    // journal takes every request).
    let mix_depth = [
        ("unlogged".to_string(), pat(FloorLog::Off, false, true)),
        (
            "RMWs logged, 1 log write per member (8 KiB per entry)".to_string(),
            pat(FloorLog::Batched, false, true),
        ),
        (
            "RMWs logged, 1 log write per member (shared 4 KiB header + 4 KiB PP per entry)"
                .to_string(),
            pat(FloorLog::SharedHeader, false, true),
        ),
        (
            "RMWs logged, 1 log write per member (4 KiB PP per entry, no header)".to_string(),
            pat(FloorLog::PpOnly, false, true),
        ),
        (
            "no dependent log, 1 journal write of 4 KiB per request with the data writes"
                .to_string(),
            pat(FloorLog::Journal, false, true),
        ),
    ];
    let mix = [
        (
            "degraded mix (1/2 RMW, 1/4 parity-only, 1/4 data-only), unlogged".to_string(),
            pat(FloorLog::Off, false, true),
        ),
        (
            "degraded mix, the RMWs logged (8 KiB log write)".to_string(),
            pat(FloorLog::PerRequest, false, true),
        ),
    ];
    for (batch, variants, label) in [
        (1, &rmw[..], "QD1".to_string()),
        (QD, &depth[..], format!("batch of {QD}")),
        (QD, &mix_depth[..], format!("batch of {QD}, degraded mix")),
        (1, &mix[..], "QD1".to_string()),
    ] {
        let res = rotated_costs(variants.len(), rounds, |v| {
            timed(slice, || {
                floor_round(
                    exec,
                    members,
                    (&mut *rbuf, wbuf),
                    variants[v].1,
                    batch,
                    blocks,
                    &mut rng,
                    &mut ring,
                )
            })
        });
        push_floor_rows(rows, &label, variants.iter().map(|v| v.0.as_str()), &res);
    }
    // `QD` threads, each its own ring running the QD1 pattern (as `RaidQueue`'s workers do):
    // requests are independent, so one request's log round trip overlaps others' I/O.
    let threaded = |pat: FloorPattern| {
        let total = std::sync::atomic::AtomicU64::new(0);
        let t0 = Instant::now();
        std::thread::scope(|sc| {
            for t in 0..QD {
                let total = &total;
                sc.spawn(move || {
                    let mut ex = UringExecutor::new(8).expect("io_uring");
                    let mut rb = raidline_raid::AlignedBuf::new(2 * 4096, 4096);
                    let mut wb = raidline_raid::AlignedBuf::new(ENTRY, 4096);
                    wb.fill(t as u8);
                    let mut rng = Rng(0xF1 + t as u64);
                    let mut ring = [0u64; N];
                    let (n, _) = timed(slice, || {
                        floor_round(
                            &mut ex,
                            members,
                            (&mut rb, &wb),
                            pat,
                            1,
                            blocks,
                            &mut rng,
                            &mut ring,
                        )
                    });
                    total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        (total.into_inner(), t0.elapsed().as_secs_f64())
    };
    for variants in [&rmw[..2], &mix[..]] {
        let res = rotated_costs(2, rounds, |v| threaded(variants[v].1));
        push_floor_rows(
            rows,
            &format!("{QD} threads"),
            variants.iter().map(|v| v.0.as_str()),
            &res,
        );
    }
}

/// Pushes (and prints the per-round costs of) one floor block's rows: the rate of each
/// variant and, for every variant but the first, its cost against the first.
fn push_floor_rows<'a>(
    rows: &mut Vec<(String, String, String)>,
    label: &str,
    names: impl Iterator<Item = &'a str>,
    res: &[(f64, f64, Vec<String>)],
) {
    for (i, (name, (cost, rate, shown))) in names.zip(res).enumerate() {
        rows.push((
            format!("floor, raw {label}: {name}"),
            "-".into(),
            format!("{rate:.0} IOPS"),
        ));
        if i > 0 {
            rows.push((
                format!("floor cost, raw {label}: {name} (median of rounds)"),
                "-".into(),
                format!("{:.1} %", cost * 100.0),
            ));
            eprintln!(
                "floor cost, raw {label}: {name}: {:.1} % (rounds: {shown:?})",
                cost * 100.0
            );
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // Only the write-hole protection cost rows (degraded array, both cache modes).
    let log_only = std::env::args().any(|a| a == "--log-cost");
    // On/off pairs per cost row, in units (QD1 runs 3 units, the others 2); more when only
    // the cost rows run.
    let pairs = if log_only { 4 } else { 2 };
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let member_data = if quick { 32 * MIB } else { 128 * MIB };
    let size = MIB + member_data;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("array-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let names: Vec<String> = (0..=N).map(|i| format!("m{i}.img")).collect();
    let members = open_members(&dir, &names[..N], size, true);
    let mut exec = UringExecutor::new(256).expect("io_uring");
    let stripe_bytes = (N - 1) * CHUNK;
    let mut bufs = BufferArena::with_buffers(2, 8 * N * CHUNK, 4096).expect("arena");
    for (i, b) in bufs.iter_mut().enumerate() {
        for (j, x) in b.iter_mut().enumerate() {
            *x = (i * 7 + j * 13) as u8;
        }
    }
    let pool_arena = bufs[0].arena().clone();
    let (wb, rb) = bufs.split_at_mut(1);
    let (wbuf, rbuf) = (&mut wb[0], &mut rb[0]);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(CHUNK as u32).expect("chunk"),
        assume_clean: true,
        ..Default::default()
    };
    let array = Arc::new(
        Array::create(members.clone(), vec![], &cfg, Arc::new(CpuXor::detect())).expect("create"),
    );
    exec.register_arenas(&[pool_arena.clone(), array.scratch_arena().clone()])
        .expect("register buffers");
    let geo = *array.geometry();
    let cap_blocks = geo.capacity_blocks();
    let stripes = geo.stripes();
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mb = |bytes: u64, s: f64| format!("{:.0} MB/s", bytes as f64 / s / 1e6);
    let iops = |ops: u64, s: f64| format!("{:.0} IOPS", ops as f64 / s);

    if std::env::args().any(|a| a == "--ring-limit") {
        rows.push(ring_vs_limit_row(
            &array,
            &members,
            member_data / 4096,
            budget,
        ));
        eprintln!(
            "poller-ring rows: {} writes handed to the blocking engine (declined or redone)",
            RING_FALLBACKS.load(std::sync::atomic::Ordering::Relaxed)
        );
        print_rows(&rows, member_data);
        array.stop().expect("stop");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let mut rng = Rng(0x1234_5678);
    let req = 8 * stripe_bytes;
    let req_blocks = (req / 4096) as u64;
    let raw_member_off = |stripe: u64| MIB + stripe * CHUNK as u64;
    if !log_only {
        // --- Full-stripe sequential write: 8 stripes (1.5 MiB) per request.
        let mut pos = 0u64;
        let (n, s) = timed(budget, || {
            if pos + req_blocks > cap_blocks {
                pos = 0;
            }
            array
                .write(&mut exec, ArrayBlock(pos), &wbuf[..req])
                .expect("write");
            pos += req_blocks;
            req as u64
        });
        let mut st = 0u64;
        let (rn, rs) = timed(budget, || {
            // Same member traffic without RAID: 8 chunks per member, all in one batch.
            let mut ops = Vec::new();
            let mut rest: &[u8] = &wbuf[..8 * N * CHUNK];
            for k in 0..8 {
                for (m, mem) in members.iter().enumerate() {
                    let (c, r) = rest.split_at(CHUNK);
                    rest = r;
                    ops.push(MemberOp::write(
                        MemberIdx(m),
                        &**mem,
                        raw_member_off((st + k) % stripes),
                        c,
                    ));
                }
            }
            exec.execute(&mut ops);
            st = (st + 8) % stripes;
            (8 * (N - 1) * CHUNK) as u64
        });
        rows.push((
            "full-stripe sequential write (data)".into(),
            mb(n, s),
            mb(rn, rs),
        ));

        // --- Sequential read, same request size.
        let mut pos = 0u64;
        let (n, s) = timed(budget, || {
            if pos + req_blocks > cap_blocks {
                pos = 0;
            }
            array
                .read(&mut exec, ArrayBlock(pos), &mut rbuf[..req])
                .expect("read");
            pos += req_blocks;
            req as u64
        });
        let mut st = 0u64;
        let (rn, rs) = timed(budget, || {
            let mut ops = Vec::new();
            let mut rest: &mut [u8] = &mut rbuf[..];
            for k in 0..8 {
                for (m, mem) in members.iter().enumerate().take(N - 1) {
                    let (c, r) = std::mem::take(&mut rest).split_at_mut(CHUNK);
                    rest = r;
                    ops.push(MemberOp::read(
                        MemberIdx(m),
                        &**mem,
                        raw_member_off((st + k) % stripes),
                        c,
                    ));
                }
            }
            exec.execute(&mut ops);
            st = (st + 8) % stripes;
            (8 * (N - 1) * CHUNK) as u64
        });
        rows.push(("sequential read".into(), mb(n, s), mb(rn, rs)));

        // --- 4 KiB random read and write.
        let (n, s) = timed(budget, || {
            array
                .read(
                    &mut exec,
                    ArrayBlock(rng.next(cap_blocks)),
                    &mut rbuf[..4096],
                )
                .expect("read");
            1
        });
        let raw_blocks = member_data / 4096;
        let (rn, rs) = timed(budget, || {
            let m = rng.next(N as u64) as usize;
            let mut ops = [MemberOp::read(
                MemberIdx(m),
                &*members[m],
                MIB + rng.next(raw_blocks) * 4096,
                &mut rbuf[..4096],
            )];
            exec.execute(&mut ops);
            1
        });
        rows.push(("4 KiB random read, QD1".into(), iops(n, s), iops(rn, rs)));
        let (n, s) = timed(budget, || {
            array
                .write(&mut exec, ArrayBlock(rng.next(cap_blocks)), &wbuf[..4096])
                .expect("write");
            1
        });
        let (rn, rs) = timed(budget, || {
            let m = rng.next(N as u64) as usize;
            let mut ops = [MemberOp::write(
                MemberIdx(m),
                &*members[m],
                MIB + rng.next(raw_blocks) * 4096,
                &wbuf[..4096],
            )];
            exec.execute(&mut ops);
            1
        });
        rows.push((
            "4 KiB random write, QD1 (RMW: 2 reads + 2 writes)".into(),
            iops(n, s),
            iops(rn, rs),
        ));
        // Queue depth 16 through RaidQueue (16 workers, each its own ring) vs raw batches of 16.
        let (n, s) = queue_iops(&array, false, budget, 5);
        let (rn, rs) = raw_qd_iops(&mut exec, &members, rbuf, false, raw_blocks, budget);
        rows.push((
            format!("4 KiB random read, QD{QD} (RaidQueue)"),
            iops(n, s),
            iops(rn, rs),
        ));
        let (n, s) = queue_iops(&array, true, budget, 6);
        let (rn, rs) = raw_qd_iops(&mut exec, &members, wbuf, true, raw_blocks, budget);
        rows.push((
            format!("4 KiB random write, QD{QD} (RaidQueue)"),
            iops(n, s),
            iops(rn, rs),
        ));
        rows.push(ring_vs_limit_row(&array, &members, raw_blocks, budget));
        let st = array.stats();
        eprintln!(
            "modes: {} full-stripe, {} rmw, {} rcw",
            st.full_stripe, st.rmw, st.rcw
        );
    }
    // --- Policy "always" on the healthy array: every small write logged (issue 15).
    log_cost_rows(
        &array,
        Cost::Policy,
        &mut exec,
        &wbuf[..],
        (budget / 4, pairs),
        &mut rng,
        "",
        &mut rows,
    );
    array.stop().expect("stop");
    drop(array);
    // The same on members reporting no volatile write cache (the entry's flush skipped).
    let all: Vec<Arc<dyn Member>> = open_members(&dir, &names[..N], size, false)
        .into_iter()
        .map(|m| Arc::new(Counted(m, Some(false))) as Arc<dyn Member>)
        .collect();
    let asm = Array::assemble(all, None, Arc::new(CpuXor::detect())).expect("assemble");
    let array = Arc::new(asm.array);
    exec.register_arenas(&[pool_arena.clone(), array.scratch_arena().clone()])
        .expect("register buffers");
    log_cost_rows(
        &array,
        Cost::Policy,
        &mut exec,
        &wbuf[..],
        (budget / 4, pairs),
        &mut rng,
        " (no volatile cache)",
        &mut rows,
    );
    array.stop().expect("stop");
    drop(array);

    // --- Degraded: assemble without member 0.
    let survivors: Vec<Arc<dyn Member>> = open_members(&dir, &names[1..N], size, false)
        .into_iter()
        .map(|m| Arc::new(Counted(m, None)) as Arc<dyn Member>)
        .collect();
    let asm =
        Array::assemble(survivors, None, Arc::new(CpuXor::detect())).expect("assemble degraded");
    let array = Arc::new(asm.array);
    exec.register_arenas(&[pool_arena.clone(), array.scratch_arena().clone()])
        .expect("register buffers");
    if !log_only {
        let mut pos = 0u64;
        let (n, s) = timed(budget, || {
            if pos + req_blocks > cap_blocks {
                pos = 0;
            }
            array
                .read(&mut exec, ArrayBlock(pos), &mut rbuf[..req])
                .expect("degraded read");
            pos += req_blocks;
            req as u64
        });
        rows.push((
            "degraded sequential read (1 of 4 missing)".into(),
            mb(n, s),
            "see sequential read".into(),
        ));
        let (n, s) = timed(budget, || {
            array
                .read(
                    &mut exec,
                    ArrayBlock(rng.next(cap_blocks)),
                    &mut rbuf[..4096],
                )
                .expect("read");
            1
        });
        rows.push((
            "degraded 4 KiB random read, QD1".into(),
            iops(n, s),
            "see 4 KiB random read".into(),
        ));
    }
    log_cost_rows(
        &array,
        Cost::Log,
        &mut exec,
        &wbuf[..],
        (budget / 4, pairs),
        &mut rng,
        "",
        &mut rows,
    );

    if !log_only {
        // --- Rebuild onto a new member, unthrottled.
        let spare = open_members(&dir, &names[N..], size, true).remove(0);
        array.add_spare(spare.clone()).expect("spare");
        let t = Instant::now();
        let p = array
            .run_rebuild(&mut exec, &mut Throttle::new(None))
            .expect("rebuild");
        let secs = t.elapsed().as_secs_f64();
        assert!(p.is_some_and(|p| p.finished));
        let rebuilt = geo.member_data_bytes();
        // Raw: read a chunk from each of 3 members and write one chunk, per stripe.
        let survivors = open_members(&dir, &names[1..N], size, false);
        let t = Instant::now();
        for s in 0..stripes {
            let mut ops = Vec::new();
            let mut rest: &mut [u8] = &mut rbuf[..];
            for (m, mem) in survivors.iter().enumerate() {
                let (c, r) = std::mem::take(&mut rest).split_at_mut(CHUNK);
                rest = r;
                ops.push(MemberOp::read(MemberIdx(m), &**mem, raw_member_off(s), c));
            }
            exec.execute(&mut ops);
            let mut w = [MemberOp::write(
                MemberIdx(N),
                &*spare,
                raw_member_off(s),
                &wbuf[..CHUNK],
            )];
            exec.execute(&mut w);
        }
        let raw_secs = t.elapsed().as_secs_f64();
        rows.push((
            "rebuild (written to the new member)".into(),
            mb(rebuilt, secs),
            mb(rebuilt, raw_secs),
        ));
    }
    // --- The degraded cost again, on the same files reporting no volatile write cache: the
    // log's flush is skipped, what remains is the log write ahead of the data writes.
    array.stop().expect("stop");
    drop(array);
    let survivors: Vec<Arc<dyn Member>> = open_members(&dir, &names[1..N], size, false)
        .into_iter()
        .map(|m| Arc::new(Counted(m, Some(false))) as Arc<dyn Member>)
        .collect();
    let asm =
        Array::assemble(survivors, None, Arc::new(CpuXor::detect())).expect("assemble degraded");
    let array = Arc::new(asm.array);
    assert!(array.write_hole_protected(), "the log must be on");
    exec.register_arenas(&[pool_arena.clone(), array.scratch_arena().clone()])
        .expect("register buffers");
    log_cost_rows(
        &array,
        Cost::Log,
        &mut exec,
        &wbuf[..],
        (budget / 4, pairs),
        &mut rng,
        " (no volatile cache)",
        &mut rows,
    );

    // --- The floor: the same member operations raw, on all 4 files (the array is gone).
    array.stop().expect("stop");
    drop(array);
    let raw_members = open_members(&dir, &names[..N], size, false);
    log_floor_rows(
        &mut exec,
        &raw_members,
        (&mut rbuf[..], &wbuf[..]),
        (budget / 4, 2 * pairs),
        member_data / 4096,
        &mut rows,
    );

    eprintln!(
        "poller-ring rows: {} writes handed to the blocking engine (declined or redone)",
        RING_FALLBACKS.load(std::sync::atomic::Ordering::Relaxed)
    );
    print_rows(&rows, member_data);
    let _ = std::fs::remove_dir_all(&dir);
}

fn print_rows(rows: &[(String, String, String)], member_data: u64) {
    println!("| workload ({N} members, {} KiB chunk, {} MiB per member) | raidline | raw members, same pattern |", CHUNK / 1024, member_data / MIB);
    println!("| --- | ---: | ---: |");
    for (a, b, c) in rows {
        println!("| {a} | {b} | {c} |");
    }
}
