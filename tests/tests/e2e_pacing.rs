//! End-to-end live pacing over the in-memory fabric: the `fixed` algorithm holds the configured
//! per-QP rate within ±5 % while reads stream from a null namespace, a run-time `cc set`
//! changes the rate and the achieved throughput follows, `raidline status` (the management
//! API), `raidline cc show` and the metrics show each I/O queue's rate and its raw, net and base
//! probe RTTs, and `rtt-aimd` slows down when the fault-injecting fabric delays the target's
//! completions (a delay in the path, which the net RTT keeps).

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{options, SUBNQN};
use raidline_fabric::fault::{FaultConfig, Faulty};
use raidline_fabric::mem::{MemFabric, MemNetwork};
use raidline_fabric::Fabric;
use raidline_initiator::io::{self as hio, IoOp};
use raidline_initiator::{Controller, Lba, Nsid, Queue, Tag};
use raidline_proto::text::Nqn;
use raidline_target::daemon::{Backend, CcSpec, NamespaceSpec, SubsystemSpec, Target, TargetSpec};
use raidline_target::mgmt::{render_status, Management};
use raidline_target::service::Api;
use raidline_target::subsystem::{HostAccess, Limits, NamespaceInfo, Subsystem};

const ADDR: &str = "10.0.0.9:4420";
const NULL_BYTES: u64 = 1 << 30;
/// The fixed rate tested, MB/s. The in-memory fabric of a debug build tops out near 10 MB/s
/// for 16 KiB reads on a loaded 2-core machine, so the setting stays well below that.
const RATE_MB: f64 = 2.0;
/// Blocks per read (16 KiB) and reads in flight.
const BLOCKS: u32 = 4;
const DEPTH: usize = 8;

/// The two tests measure time: they take turns rather than share the CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A target serving one null namespace, paced by `cc`.
fn start<F: Fabric>(fabric: F, cc: CcSpec) -> Target {
    start_with(fabric, cc, Backend::Null(NULL_BYTES))
}

fn start_with<F: Fabric>(fabric: F, cc: CcSpec, backend: Backend) -> Target {
    let limits = Limits::default();
    let mut spec = TargetSpec::new(limits);
    spec.listen = vec![ADDR.parse::<SocketAddr>().expect("addr")];
    spec.pool_small = (64, 128 << 10);
    spec.pool_large = (8, limits.max_transfer as usize);
    spec.workers_per_namespace = 1;
    spec.cc = Some(cc);
    spec.subsystems.push(SubsystemSpec {
        subsystem: Subsystem {
            nqn: Nqn::new(SUBNQN).expect("nqn"),
            serial: "PACING0001".into(),
            model: "Raidline null".into(),
            hosts: HostAccess::Any,
            auth: Default::default(),
            namespaces: vec![],
        },
        namespaces: vec![NamespaceSpec {
            info: NamespaceInfo {
                nsid: 1,
                block_size: 4096,
                blocks: NULL_BYTES / 4096,
                ids: raidline_target::identity::for_file(SUBNQN, 1, "null"),
                preferred_write_blocks: 1,
                deallocate: true,
                active: Default::default(),
            },
            backend,
            array: None,
        }],
    });
    Target::start(fabric, spec).expect("target start")
}

fn connect(net: &MemNetwork, target: &Target) -> Controller<MemFabric> {
    let mut o = options(1);
    o.io_queues = 1;
    o.io_depth = 32;
    Controller::connect(net.device("host1"), target.local_addrs()[0], o).expect("connect")
}

/// Keeps `depth` reads of `blocks` blocks in flight for `run`, servicing the admin queue;
/// returns the bytes per second achieved after the first `warm` (not counted).
fn stream(
    c: &mut Controller<MemFabric>,
    q: &mut Queue<MemFabric>,
    blocks: u32,
    depth: usize,
    warm: Duration,
    run: Duration,
) -> f64 {
    let ns = c.namespace(Nsid(1)).expect("namespace");
    let span = ns.blocks - u64::from(blocks);
    let mut tags: VecDeque<Tag> = VecDeque::new();
    let mut lba = 0u64;
    let mut submit = |q: &mut Queue<MemFabric>, tags: &mut VecDeque<Tag>| {
        let tag = q.alloc().expect("a free slot");
        hio::submit_rw(q, tag, IoOp::Read, &ns, Lba(lba), blocks).expect("submit");
        lba = (lba + u64::from(blocks)) % span;
        tags.push_back(tag);
    };
    for _ in 0..depth {
        submit(q, &mut tags);
    }
    let t0 = Instant::now();
    let mut counted_from: Option<Instant> = None;
    let mut bytes = 0u64;
    let mut serviced = Instant::now();
    loop {
        let tag = tags.pop_front().expect("in flight");
        let cqe = q.wait(tag).expect("read completes");
        assert!(cqe.status.is_success(), "{:?}", cqe.status);
        let now = Instant::now();
        match counted_from {
            None if now - t0 >= warm => counted_from = Some(now),
            Some(start) => {
                bytes += u64::from(blocks) * 4096;
                if now - start >= run {
                    let rate = bytes as f64 / (now - start).as_secs_f64();
                    for t in tags {
                        q.wait(t).expect("drain");
                    }
                    return rate;
                }
            }
            None => {}
        }
        if serviced.elapsed() > Duration::from_millis(100) {
            c.service().expect("keep-alive");
            serviced = Instant::now();
        }
        submit(q, &mut tags);
    }
}

fn fixed(mbytes_per_s: f64) -> CcSpec {
    CcSpec {
        algorithm: "fixed".into(),
        params: vec![("rate_mbps".into(), mbytes_per_s * 8.0)],
    }
}

/// The median of three back-to-back windows of `run` after `warm`: one window disturbed by
/// the machine (a test binary shares two cores with builds) does not decide.
fn median_rate(
    c: &mut Controller<MemFabric>,
    q: &mut Queue<MemFabric>,
    warm: Duration,
    run: Duration,
) -> f64 {
    let mut r: Vec<f64> = (0..3)
        .map(|i| {
            let w = if i == 0 { warm } else { Duration::ZERO };
            stream(c, q, BLOCKS, DEPTH, w, run)
        })
        .collect();
    eprintln!(
        "  windows: {:?} MB/s",
        r.iter()
            .map(|x| (x / 1e3).round() / 1e3)
            .collect::<Vec<_>>()
    );
    r.sort_by(f64::total_cmp);
    r[1]
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got / want - 1.0).abs() <= tol
}

#[test]
fn fixed_rate_is_held_changed_at_run_time_and_reported() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let net = MemNetwork::new();
    let target = start(net.device("target0"), fixed(RATE_MB));
    let mut c = connect(&net, &target);
    let mut qs = c.take_io_queues();
    let q = &mut qs[0];
    let warm = Duration::from_millis(300);
    let run = Duration::from_millis(800);
    let r1 = median_rate(&mut c, q, warm, run);
    eprintln!("fixed {RATE_MB} MB/s: achieved {:.3} MB/s", r1 / 1e6);
    assert!(within(r1, RATE_MB * 1e6, 0.05), "{:.3} MB/s", r1 / 1e6);

    // `raidline status`: the I/O queue shows the pacer's rate and a probe RTT; the admin
    // queue is not paced.
    let api = Api::new(target.shared().clone());
    let st = api.status();
    let queues = &st.controllers[0].queues;
    let io = queues.iter().find(|q| q.qid == 1).expect("io queue listed");
    assert_eq!(io.rate_bytes_per_s, RATE_MB * 1e6);
    assert!(io.rtt_us.is_finite() && io.rtt_us > 0.0, "{}", io.rtt_us);
    // The last probe's raw RTT and its net RTT (a paced QP's is the raw one; a window law's is
    // less its own reads queued ahead): never more than the raw one; the base is the least.
    assert!(io.raw_rtt_us > 0.0, "{io:?}");
    assert!(
        io.net_rtt_us > 0.0 && io.net_rtt_us <= io.raw_rtt_us,
        "{io:?}"
    );
    assert!(
        io.base_rtt_us > 0.0 && io.base_rtt_us <= io.net_rtt_us,
        "{io:?}"
    );
    assert_eq!(io.depth, 32);
    // Every read moved its 16 KiB with RDMA WRITE, counted on the queue pair.
    assert!(io.bytes >= 100 * 16384, "{io:?}");
    let admin = queues
        .iter()
        .find(|q| q.qid == 0)
        .expect("admin queue listed");
    assert!(admin.rate_bytes_per_s.is_nan() && admin.rtt_us.is_nan());
    assert!(admin.raw_rtt_us.is_nan() && admin.net_rtt_us.is_nan());
    // The text `raidline status` prints: the I/O queue's row ends with a rate and an RTT.
    let text = render_status(&st);
    let row: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<&str>>())
        .find(|w| w.first() == Some(&"1") && w.get(1) == Some(&"32"))
        .unwrap_or_else(|| panic!("queue 1 row in\n{text}"));
    assert!(row.iter().any(|w| w.ends_with("/s")), "{row:?}");
    assert!(
        row.last().is_some_and(|w| *w == "us" || *w == "ms"),
        "{row:?}"
    );
    assert!(
        text.contains("raw-rtt") && text.contains("net-rtt"),
        "{text}"
    );
    let metrics = api.metrics();
    let gauge = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name) && l.contains("qid=\"1\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} of queue 1 in the metrics:\n{metrics}"))
    };
    assert_eq!(gauge("raidline_qp_rate_bytes_per_second{"), RATE_MB * 1e6);
    assert!(gauge("raidline_qp_rtt_seconds{") > 0.0);
    assert!(gauge("raidline_qp_raw_rtt_seconds{") > 0.0);
    assert!(gauge("raidline_qp_net_rtt_seconds{") > 0.0);
    assert!(gauge("raidline_qp_base_rtt_seconds{") > 0.0);
    // `raidline cc show`: the parameters, then the paced queue (qid 1, not the admin queue)
    // with its rate and RTTs.
    let show = api.cc_show().expect("cc show");
    let paced: Vec<&str> = show
        .lines()
        .skip_while(|l| !l.starts_with("paced queue pairs:"))
        .skip(2)
        .collect();
    assert_eq!(paced.len(), 1, "{show}");
    let w: Vec<&str> = paced[0].split_whitespace().collect();
    assert_eq!(w[1], "1", "{show}");
    // cntlid, qid, the rate and three RTTs, each a number and a unit.
    assert!(w[3].ends_with("/s") && w.len() == 10, "{show}");

    // A run-time change reaches the poller and the achieved rate follows it.
    let m = api.cc_set("rate_mbps", RATE_MB * 4.0).expect("cc set");
    assert_eq!(
        m,
        format!("fixed rate_mbps: {} -> {}", RATE_MB * 8.0, RATE_MB * 4.0)
    );
    assert!(api
        .cc_set("rate_mbps", 0.0)
        .unwrap_err()
        .contains("outside"));
    assert!(api
        .cc_set("beta", 0.5)
        .unwrap_err()
        .contains("unknown parameter `beta` for algorithm `fixed`"));
    let r2 = median_rate(&mut c, q, warm, run);
    eprintln!(
        "after cc set {} MB/s: achieved {:.3} MB/s",
        RATE_MB / 2.0,
        r2 / 1e6
    );
    assert!(
        within(r2, RATE_MB / 2.0 * 1e6, 0.05),
        "{:.3} MB/s",
        r2 / 1e6
    );
    let io = api.status().controllers[0].queues[1].clone();
    assert_eq!(io.rate_bytes_per_s, RATE_MB / 2.0 * 1e6);
    assert!(api.cc_show().unwrap().contains("rate_mbps"));

    c.io = qs;
    c.shutdown().expect("shutdown");
    assert!(target.shutdown().is_empty());
}

/// Large reads on a paced queue leave in 16 KiB RDMA WRITEs, each waiting for its tokens (a
/// whole transfer is one burst on the wire): the data arrives whole and in place, and the
/// achieved rate is the configured one.
#[test]
fn paced_reads_leave_in_chunks_and_arrive_whole() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const BYTES: usize = 8 << 20;
    let mem = raidline_raid::member::MemMember::new("m0", BYTES);
    let net = MemNetwork::new();
    let target = start_with(
        net.device("target0"),
        fixed(RATE_MB),
        Backend::File(std::sync::Arc::new(mem)),
    );
    let mut c = connect(&net, &target);
    let ns = c.namespace(Nsid(1)).expect("namespace");
    let mut qs = c.take_io_queues();
    let q = &mut qs[0];
    // A pattern written in 64 KiB commands (RDMA READs, 4 chunks' worth each).
    let data: Vec<u8> = (0..4 << 20)
        .map(|i: usize| (i * 7 + i / 4096) as u8)
        .collect();
    hio::write(q, &ns, Lba(0), &data, &mut || Ok(())).expect("write");
    // Read back in commands of the queue's data slot, all in flight at once: far more demand
    // than the 2 MB/s the pacer allows.
    let slot = q.data_slot() as u64;
    assert!(slot >= 128 << 10, "data slot {slot}");
    let mut back = vec![0u8; data.len()];
    let mut service = || c.service().map(|_| ());
    // A first read, not timed: the first one after the writes starts 0-250 ms late here
    // (seen on the queue's byte counter, chunks or not), which is not the pacer's doing.
    hio::read(q, &ns, Lba(0), &mut back[..256 << 10], &mut service).expect("read");
    let t0 = Instant::now();
    hio::read(q, &ns, Lba(0), &mut back, &mut service).expect("read");
    let took = t0.elapsed().as_secs_f64();
    assert!(back == data, "read data differs from what was written");
    let rate = data.len() as f64 / took;
    eprintln!("paced reads of {slot} B: {:.3} MB/s", rate / 1e6);
    // The bucket holds at most 256 KiB of credit: over 4 MiB at most 6 % above the setting.
    assert!(within(rate, RATE_MB * 1e6, 0.15), "{:.3} MB/s", rate / 1e6);
    // Each read goes as paced 16 KiB chunks and a last one with its response, except what the
    // bucket lets go whole (since 6aebc6b): the untimed first read when the paced writes left
    // the bucket full, and the last part of a command, at most the bucket's 256 KiB, when the
    // poller came late and credit built up. So between all-but-16 chunks of each timed command
    // and every chunk of every read. The counters are published every 20 ms: wait for them.
    let chunks_now = || {
        let stats = target.shared().queue_stats.lock().unwrap();
        stats
            .values()
            .find(|s| s.qid.load(std::sync::atomic::Ordering::Relaxed) == 1)
            .expect("io queue stats")
            .paced_chunks
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    // Commands of at most `slot` bytes: each is len/16 KiB - 1 chunks and its last piece.
    let expect = |len: u64| {
        (0..len.div_ceil(slot))
            .map(|i| (len - i * slot).min(slot) / (16 << 10) - 1)
            .sum::<u64>()
    };
    let whole_at_most = (256 << 10) / (16 << 10);
    let lo = expect(data.len() as u64) - data.len() as u64 / slot * whole_at_most;
    let hi = expect(256 << 10) + expect(data.len() as u64);
    let deadline = Instant::now() + Duration::from_secs(2);
    let chunks = loop {
        let c = chunks_now();
        if c >= hi || Instant::now() >= deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("paced chunks: {chunks} (bounds {lo}..={hi})");
    assert!(
        (lo..=hi).contains(&chunks),
        "paced chunks {chunks}, not in {lo}..={hi} (data slot {slot})"
    );
    // The poller publishes its queues' counters every 20 ms and before it sleeps, so the
    // status may trail the last response the host saw by one publication.
    let want = 2 * data.len() as u64 + (256 << 10);
    let api = Api::new(target.shared().clone());
    let deadline = Instant::now() + Duration::from_secs(2);
    let io = loop {
        let st = api.status();
        let io = st.controllers[0]
            .queues
            .iter()
            .find(|q| q.qid == 1)
            .expect("io queue")
            .clone();
        if io.bytes >= want || Instant::now() >= deadline {
            break io;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(io.bytes >= want, "{io:?}");
    // Each chunk's completion reaches the RTT estimator: the bytes ahead of a probe are the
    // ones not yet gone, so the net RTT is not reduced to nothing (it was, 1 ns, while chunks
    // were unsignaled and counted ahead until their response completed).
    assert!(io.net_rtt_us >= 1.0, "{io:?}");
    c.io = qs;
    c.shutdown().expect("shutdown");
    assert!(target.shutdown().is_empty());
}

/// A window-limited law (swift, whose window starts at 4 KiB) gets no chunks (it limits the
/// bytes in flight by acknowledgements already), and 128 KiB reads complete: with chunks
/// acknowledged only with their response they hung.
#[test]
fn a_window_limited_law_still_serves_large_reads() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let net = MemNetwork::new();
    let cc = CcSpec {
        algorithm: "swift".into(),
        params: vec![],
    };
    let target = start(net.device("target0"), cc);
    let mut c = connect(&net, &target);
    let mut qs = c.take_io_queues();
    let q = &mut qs[0];
    let rate = stream(&mut c, q, 32, 4, Duration::ZERO, Duration::from_millis(300));
    assert!(rate > 0.0);
    c.io = qs;
    c.shutdown().expect("shutdown");
    assert!(target.shutdown().is_empty());
}

#[test]
fn rtt_aimd_slows_down_under_injected_delay() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let net = MemNetwork::new();
    let faulty = Faulty::new(net.device("target0"), FaultConfig::default());
    let control = faulty.control();
    // The daemon's rtt-aimd (host-clock defaults) started at 1 Gb/s rather than 8 Mb/s, so
    // the test sees a cut from a rate the in-memory fabric carries, aiming 1 ms + 1 ms/sqrt(Gb/s)
    // above the base: above the host-clock jitter of a loaded 2-core machine (its smoothed RTT
    // reaches ~0.7 ms here), so undelayed the rate holds.
    let cc = CcSpec {
        algorithm: "rtt-aimd".into(),
        params: vec![
            ("init_rate_mbps".into(), 1000.0),
            ("base_cap_us".into(), 100_000.0),
            ("offset_us".into(), 1000.0),
            ("scale_us".into(), 1000.0),
            // Cut harder per sample: with one probe in flight and a 10 ms RTT, the delayed
            // phase gives the algorithm only a few dozen samples.
            ("beta".into(), 0.2),
        ],
    };
    let target = start(faulty, cc);
    let mut c = connect(&net, &target);
    let mut qs = c.take_io_queues();
    let q = &mut qs[0];
    let rate = || {
        let stats = target.shared().queue_stats.lock().unwrap();
        let s = stats
            .values()
            .find(|s| s.qid.load(std::sync::atomic::Ordering::Relaxed) == 1)
            .expect("io queue stats");
        (s.rate_bytes_per_s(), s.rtt_us(), s.net_rtt_us())
    };
    let zero = Duration::ZERO;
    let tput = stream(&mut c, q, 4, 8, zero, Duration::from_millis(600));
    std::thread::sleep(Duration::from_millis(50));
    let (before, rtt_before, net_before) = rate();
    eprintln!(
        "rtt-aimd undelayed: pacer {:.1} MB/s, srtt {rtt_before:.1} us, net {net_before:.1} us, achieved {:.1} MB/s",
        before / 1e6,
        tput / 1e6
    );
    // Every completion of the target is now held back for 200 polls of its CQ (~10 ms).
    control.set_config(FaultConfig {
        delay_completion: 1000,
        delay_polls: 200,
        ..FaultConfig::default()
    });
    let tput = stream(&mut c, q, 4, 8, zero, Duration::from_millis(600));
    std::thread::sleep(Duration::from_millis(50));
    let (after, rtt_after, net_after) = rate();
    eprintln!(
        "rtt-aimd delayed: pacer {:.1} MB/s, srtt {rtt_after:.1} us, net {net_after:.1} us, achieved {:.1} MB/s",
        after / 1e6,
        tput / 1e6
    );
    assert!(control.counters().delays > 0);
    assert!(before >= 0.75 * 125e6, "undelayed: {before} B/s");
    assert!(
        rtt_after > 2.0 * rtt_before,
        "{rtt_before} -> {rtt_after} us"
    );
    // The delay is in the path (every completion held), not this QP's own queue: the net
    // RTT, what the law sees, shows it too.
    assert!(
        net_after > 2.0 * net_before,
        "{net_before} -> {net_after} us"
    );
    assert!(after < before / 2.0, "{before} -> {after} B/s");
    control.set_config(FaultConfig::default());
    c.io = qs;
    c.shutdown().expect("shutdown");
    assert!(target.shutdown().is_empty());
}
