//! End-to-end: the operator's way out of a refused array (issue 15).
//!
//! An array over member files is served and written by a host; then, with the RAID engine
//! directly on the same files, the partial-parity log is switched off, a member is failed,
//! more is written and the array is dropped without a clean stop: an unclean degraded stop
//! that no log covers. The daemon started over that still comes up: it serves its other
//! namespace, reports the array refused with the engine's reason, keeps the array's
//! namespace inactive (I/O gets Internal Path Error, `ns enable` is refused); a plain
//! `array start` is refused again; `array start --accept-dirty-degraded` assembles it, the
//! host is told and sees the same identifiers and its data outside the exposed ranges, and
//! the status report shows the array exposed with those ranges.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use raidline_fabric::mem::MemNetwork;
use raidline_initiator::{Controller, Lba, Nsid};
use raidline_proto::aen::{AsyncEvent, NoticeEvent};
use raidline_proto::log::ChangedNsList;
use raidline_proto::StatusCode;
use raidline_raid::{
    AlignedBuf, Array, ArrayBlock, ArrayConfig, ChunkSize, CpuXor, Executor, Fault, FaultyMember,
    Member, MemberIdx, MemberOp, OpBuf, PowerSwitch, StripeIdx,
};
use raidline_target::config::Config;
use raidline_target::daemon::{open_member, Target};
use raidline_target::mgmt::Management;
use raidline_target::service::{build_spec, Api};

const BS: usize = 4096;
const MEMBER_BYTES: u64 = 9 << 20;

/// One array over `members` as namespace 1, a plain file as namespace 2.
fn config(dir: &Path, members: &[PathBuf], listen: &str) -> Config {
    let list: Vec<String> = members
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect();
    let text = format!(
        r#"
[target]
listen = ["{listen}"]
management_socket = "{sock}"
state_dir = "{state}"

[[array]]
name = "array0"
members = [{members}]
chunk_kib = 64
parity = "cpu"
rebuild_mb_s = 100

[[subsystem]]
nqn = "{SUBNQN}"
model = "Raidline RAID-5"
allow_any_host = true

[[subsystem.namespace]]
nsid = 1
array = "array0"

[[subsystem.namespace]]
nsid = 2
file = "{file}"
size_mib = 4
"#,
        sock = dir.join("raidline.sock").display(),
        state = dir.join("state").display(),
        file = dir.join("plain.img").display(),
        members = list.join(", "),
    );
    Config::parse(&text, "e2e_refused.toml").expect("config parses")
}

/// Runs a write round and, at its first write batch, fails role `fail` (the round was planned
/// with it present); cuts the power just before the round's parity write to the data area.
struct FailThenCut {
    array: Arc<Array>,
    fail: Option<usize>,
    parity_role: usize,
    switch: PowerSwitch,
}

impl Executor for FailThenCut {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        if ops.iter().any(|op| matches!(op.buf, OpBuf::Write(_))) {
            if let Some(r) = self.fail.take() {
                self.array.set_faulty(MemberIdx(r)).unwrap();
            }
        }
        for op in ops.iter_mut() {
            if op.role.0 == self.parity_role
                && op.offset >= 1 << 20
                && matches!(op.buf, OpBuf::Write(_))
            {
                self.switch.cut();
            }
            op.run_sync();
        }
    }
}

fn members_of_files(paths: &[PathBuf]) -> Vec<Arc<dyn Member>> {
    paths
        .iter()
        .map(|p| open_member(p, None).expect("open member"))
        .collect()
}

#[test]
fn a_refused_array_leaves_the_daemon_up_and_starts_on_the_operators_word() {
    let dir = TempDir::new("refused");
    let members: Vec<PathBuf> = (0..4).map(|i| dir.0.join(format!("m{i}.img"))).collect();
    for m in &members {
        std::fs::File::create(m)
            .unwrap()
            .set_len(MEMBER_BYTES)
            .unwrap();
    }
    // The array, with small write-intent regions (4 stripes, 768 KiB) so that an unclean stop
    // exposes a small part of it, not all of it.
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(64 << 10).unwrap(),
        assume_clean: true,
        bitmap_region_stripes: Some(4),
        ..ArrayConfig::default()
    };
    let array = Array::create(
        members_of_files(&members),
        vec![],
        &cfg,
        Arc::new(CpuXor::detect()),
    )
    .unwrap();
    let capacity = array.geometry().capacity_bytes() as usize;
    array.stop().unwrap();
    drop(array);

    // 1: the daemon assembles it; a host fills it and the plain namespace.
    let net = MemNetwork::new();
    let spec = build_spec(&config(&dir.0, &members, "10.0.3.1:4420")).expect("bring-up");
    assert!(spec.refused.is_empty());
    let t1 = Target::start(net.device("t1"), spec).unwrap();
    let mut c =
        Controller::connect(net.device("host1"), t1.local_addrs()[0], options(1)).expect("connect");
    let first_ids = seen_ids(&mut c, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    assert_eq!(ns.blocks * BS as u64, capacity as u64);
    let data = pattern(0xD1F7, capacity);
    for (i, piece) in data.chunks(1 << 20).enumerate() {
        c.write(0, &ns, Lba((i * (1 << 20) / BS) as u64), piece)
            .unwrap();
    }
    let plain_ns = c.namespace(Nsid(2)).unwrap();
    let plain = pattern(0x91A1, 16 * BS);
    c.write(0, &plain_ns, Lba(3), &plain).unwrap();
    c.flush(0, Nsid(0xFFFF_FFFF)).unwrap();
    c.shutdown().unwrap();
    assert!(t1.shutdown().is_empty());

    // 2: the engine on the same files, the window of issue 15: role 1 fails while a write
    // planned healthy (block 0: role 0's chunk of stripe 0, parity on role 3) is writing, and
    // the power goes out after its data reached the media and before its parity did.
    let switch = PowerSwitch::after(u64::MAX);
    let wrapped: Vec<Arc<dyn Member>> = members_of_files(&members)
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let f = FaultyMember::new(m, i as u64);
            f.handle().inject(Fault::PowerLoss(switch.clone()));
            Arc::new(f) as Arc<dyn Member>
        })
        .collect();
    let asm = Array::assemble(wrapped, None, Arc::new(CpuXor::detect())).expect("assemble");
    assert!(!asm.resync_pending, "the daemon stopped it clean");
    let array = Arc::new(asm.array);
    let geo = *array.geometry();
    assert_eq!(geo.data_member(StripeIdx(0), 0).0, 0);
    assert_eq!(geo.parity_member(StripeIdx(0)).0, 3);
    let late = pattern(0x1A7E, BS);
    let mut buf = AlignedBuf::new(late.len(), 4096);
    buf.copy_from_slice(&late);
    let mut exec = FailThenCut {
        array: array.clone(),
        fail: Some(1),
        parity_role: 3,
        switch: switch.clone(),
    };
    let _ = array.write(&mut exec, ArrayBlock(0), &buf);
    assert!(switch.is_cut() && exec.fail.is_none());
    drop(exec);
    drop(array); // the power is out: nothing more reaches the files

    // 3: the daemon starts anyway: the array is refused, the rest is served.
    let spec = build_spec(&config(&dir.0, &members, "10.0.3.2:4420"))
        .expect("a refused array must not fail the bring-up");
    assert!(spec.arrays.is_empty());
    assert_eq!(spec.refused.len(), 1);
    assert_eq!(spec.refused[0].name, "array0");
    let t2 = Target::start(net.device("t2"), spec).unwrap();
    let api = Api::new(t2.shared().clone());
    let st = api.status();
    let a = &st.arrays[0];
    assert_eq!(a.state, "refused", "{a:?}");
    let why = a.refused.as_deref().unwrap_or_default();
    assert!(
        why.contains("planned before the log covered them")
            && why.contains("accept-dirty-degraded"),
        "{why}"
    );
    assert_eq!(
        a.capacity_bytes, capacity as u64,
        "size from the superblocks"
    );
    assert_ne!(a.members[1].state, "active", "{:?}", a.members);
    assert!(a.write_hole_protection);
    assert!(a.exposure.is_none());
    let ns_st = &st.subsystems[0].namespaces;
    assert_eq!((ns_st[0].nsid, ns_st[0].active), (1, false));
    assert_eq!(ns_st[0].blocks * BS as u64, capacity as u64);
    assert_eq!((ns_st[1].nsid, ns_st[1].active), (2, true));
    let text = raidline_target::mgmt::render_status(&st);
    assert!(text.contains("array0 [refused]"), "{text}");
    let metrics = api.metrics();
    for want in [
        "raidline_array_state{array=\"array0\",state=\"refused\"} 1",
        "raidline_array_refused{array=\"array0\"} 1",
        "raidline_array_write_hole_exposed{array=\"array0\"} 0",
    ] {
        assert!(metrics.contains(want), "{want} missing in\n{metrics}");
    }

    let mut c = Controller::connect(net.device("host1"), t2.local_addrs()[0], options(1))
        .expect("connect to a daemon with a refused array");
    // The array's namespace exists (NN counts it) but is inactive; the plain one serves.
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(2)]);
    assert_eq!(c.identify_controller().unwrap().nn, 2);
    assert!(c.namespace(Nsid(1)).is_err());
    let mut back = vec![0u8; plain.len()];
    c.read(0, &plain_ns, Lba(3), &mut back).unwrap();
    assert!(back == plain, "the plain namespace lost its data");
    let mut back = vec![0u8; 8 * BS];
    let st = c
        .read(0, &ns, Lba(1000), &mut back)
        .unwrap_err()
        .status()
        .expect("an NVMe status");
    assert_eq!(st.code, StatusCode::INTERNAL_PATH_ERROR);
    assert!(!st.dnr, "the namespace may come back: {st:?}");
    let st = c
        .write(0, &ns, Lba(1000), &back)
        .unwrap_err()
        .status()
        .unwrap();
    assert_eq!(st.code, StatusCode::INTERNAL_PATH_ERROR);
    // Nothing but `array start` brings it: not `ns enable`, not array operations.
    let e = api.ns_set_active(SUBNQN, 1, true).unwrap_err();
    assert!(
        e.contains("not running") && e.contains("array start"),
        "{e}"
    );
    let e = api.array_scrub("array0").unwrap_err();
    assert!(e.contains("not running"), "{e}");
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(2)]);

    // A plain start retries assembly and is refused the same way.
    let e = api.array_start("array0", false).unwrap_err();
    assert!(
        e.contains("did not start") && e.contains("start_dirty_degraded"),
        "{e}"
    );
    assert_eq!(api.status().arrays[0].state, "refused");
    assert_eq!(
        api.array_start("nosuch", true).unwrap_err(),
        "no array named nosuch"
    );

    // 4: the operator accepts: the array starts, the host hears of its namespace.
    let m = api.array_start("array0", true).unwrap();
    assert!(
        m.contains("started") && m.contains("EXPOSED") && m.contains("1 controller(s)"),
        "{m}"
    );
    let (events, lists) = await_ns_notice(&mut c);
    assert!(
        events.contains(&AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED)),
        "{events:?}"
    );
    assert_eq!(lists, vec![ChangedNsList::from_ids([1])]);
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    assert_eq!(
        seen_ids(&mut c, 1),
        first_ids,
        "identifiers differ from the running array's"
    );
    let again = c.namespace(Nsid(1)).unwrap();
    assert_eq!(again.blocks, ns.blocks);

    let st = api.status();
    let a = &st.arrays[0];
    assert_eq!(a.state, "degraded", "{a:?}");
    assert!(a.refused.is_none());
    let exposure = a.exposure.as_ref().expect("the array is exposed");
    assert_eq!(
        exposure.reason,
        "writes planned before the log covered them were in flight"
    );
    assert_eq!(exposure.missing, vec![1]);
    let exposed = |at: u64| exposure.ranges.iter().any(|r| r.start <= at && at < r.end);
    assert!(exposed(0), "the late write's region: {exposure:?}");
    let covered: u64 = exposure.ranges.iter().map(|r| r.end - r.start).sum();
    assert!(
        covered > 0 && covered < capacity as u64 / 2,
        "{covered} of {capacity} exposed"
    );
    let text = raidline_target::mgmt::render_status(&st);
    assert!(
        text.contains("array0 [degraded, EXPOSED]") && text.contains("WRITE HOLE EXPOSED"),
        "{text}"
    );
    let metrics = api.metrics();
    for want in [
        "raidline_array_refused{array=\"array0\"} 0",
        "raidline_array_write_hole_exposed{array=\"array0\"} 1",
        "raidline_array_state{array=\"array0\",state=\"degraded\"} 1",
    ] {
        assert!(metrics.contains(want), "{want} missing in\n{metrics}");
    }

    // Every block outside the exposed ranges reads back what the host wrote (the missing
    // member's included: rebuilt from the survivors).
    let mut back = vec![0u8; capacity];
    for (i, piece) in back.chunks_mut(1 << 20).enumerate() {
        c.read(0, &again, Lba((i * (1 << 20) / BS) as u64), piece)
            .unwrap();
    }
    let mut checked = 0u64;
    for (b, (got, want)) in back.chunks(BS).zip(data.chunks(BS)).enumerate() {
        let at = (b * BS) as u64;
        if exposed(at) {
            continue;
        }
        assert!(
            got == want,
            "block {b} (byte {at}) outside the exposure differs"
        );
        checked += 1;
    }
    assert!(checked * BS as u64 + covered >= capacity as u64);
    // Every read went on the poller's own ring: blocks on present members directly, the
    // missing member's chunks rebuilt by read tasks; no storage worker was needed.
    let dp = &t2.shared().data_path;
    let (ring, workers) = (
        dp.ring_requests.load(std::sync::atomic::Ordering::Relaxed),
        dp.worker_requests
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(ring > 0 && workers == 0, "ring {ring}, workers {workers}");
    // Writes are served again.
    let fresh = pattern(0xF4E5, 8 * BS);
    c.write(0, &again, Lba(2000), &fresh).unwrap();
    let mut back = vec![0u8; fresh.len()];
    c.read(0, &again, Lba(2000), &mut back).unwrap();
    assert!(back == fresh);

    // Starting it again is refused: it runs.
    let e = api.array_start("array0", true).unwrap_err();
    assert!(e.contains("already running"), "{e}");
    c.shutdown().unwrap();
    assert!(t2.shutdown().is_empty());

    // 5: stopped clean, it assembles at the next start without being asked, and is still
    // reported exposed (until a rebuild rewrote it).
    let spec = build_spec(&config(&dir.0, &members, "10.0.3.3:4420")).expect("bring-up");
    assert!(spec.refused.is_empty(), "{:?}", spec.refused);
    assert_eq!(spec.arrays.len(), 1);
    let x = spec.arrays[0]
        .1
        .exposure()
        .expect("still exposed after a clean restart");
    assert!(x.blocks.iter().any(|r| r.contains(&0)), "{x:?}");
    spec.arrays[0].1.stop().unwrap();
}

#[test]
fn a_member_that_cannot_be_opened_is_missing_not_fatal() {
    let dir = TempDir::new("refused-open");
    let mut members: Vec<PathBuf> = (0..3).map(|i| dir.0.join(format!("m{i}.img"))).collect();
    for m in &members {
        std::fs::File::create(m)
            .unwrap()
            .set_len(MEMBER_BYTES)
            .unwrap();
    }
    // Blank devices and one that cannot be opened: no new array over a missing device, but
    // the daemon stays up with the array refused and the reason named.
    members.push(dir.0.join("does-not-exist.img"));
    let spec = build_spec(&config(&dir.0, &members, "10.0.3.9:4420"))
        .expect("a missing device must not fail the bring-up");
    assert!(spec.arrays.is_empty());
    assert_eq!(spec.refused.len(), 1);
    let why = &spec.refused[0].refusal.reason;
    assert!(
        why.contains("does-not-exist.img: No such file")
            && why.contains("not every configured device can be used"),
        "{why}"
    );
    // Created over the four, then one of them gone: assembled degraded, served.
    let arcs = members_of_files(&members[..3]);
    let extra = open_member(&members[3], Some(MEMBER_BYTES)).unwrap();
    let mut all = arcs;
    all.push(extra);
    let cfg = ArrayConfig {
        chunk: ChunkSize::new(64 << 10).unwrap(),
        assume_clean: true,
        ..ArrayConfig::default()
    };
    let array = Array::create(all, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap();
    array.stop().unwrap();
    drop(array);
    std::fs::remove_file(&members[1]).unwrap();
    let spec = build_spec(&config(&dir.0, &members, "10.0.3.10:4420"))
        .expect("one missing member of four");
    assert!(spec.refused.is_empty());
    assert_eq!(spec.arrays.len(), 1);
    assert_eq!(spec.arrays[0].1.degraded_roles(), vec![1]);
}

#[test]
fn configuration_errors_still_fail_the_start() {
    use raidline_target::service::ServiceError;
    let dir = TempDir::new("refused-config");
    let members: Vec<PathBuf> = (0..3).map(|i| dir.0.join(format!("m{i}.img"))).collect();
    for m in &members {
        std::fs::File::create(m)
            .unwrap()
            .set_len(MEMBER_BYTES)
            .unwrap();
    }
    let mut cfg = config(&dir.0, &members, "10.0.3.11:4420");
    cfg.arrays[0].name = "renamed".into();
    let e = build_spec(&cfg).unwrap_err();
    assert!(matches!(e, ServiceError::Config(_)), "{e}");
    assert!(e.to_string().contains("array0"), "{e}");
}
