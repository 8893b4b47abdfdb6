//! End-to-end restart: the target stops, the array is reassembled from the same members, a new
//! target serves it on another address, and the host sees the same NGUID, EUI-64, UUID and
//! serial (so Linux keeps the namespace on reconnect) and the data it wrote. Once over
//! in-memory members (clean and unclean stop), once through the daemon's own bring-up from a
//! configuration file over member files (create, then assemble; members listed in another
//! order the third time; a member blanked the fourth). And an operator's hot replace through
//! the management API while a host writes: never degraded, and the next start finds the new
//! member although the configuration still names the old one.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use raidline_fabric::mem::MemNetwork;
use raidline_initiator::{Controller, Lba, Nsid};
use raidline_raid::array::Assembled;
use raidline_raid::{Array, CpuXor, MemMember, Member};
use raidline_target::config::Config;
use raidline_target::daemon::Target;
use raidline_target::service::build_spec;
use raidline_target::subsystem::{HostAccess, Limits};

const BS: usize = 4096;

/// Connects host 1 to `target` on `net`, writes `write` (if any) at LBA 77, reads `read_len`
/// bytes back from there, and returns the identifiers it saw with those bytes.
fn visit(
    net: &MemNetwork,
    target: &Target,
    write: Option<&[u8]>,
    read_len: usize,
) -> (SeenIds, Vec<u8>) {
    let mut c = Controller::connect(net.device("host1"), target.local_addrs()[0], options(1))
        .expect("connect");
    let ids = seen_ids(&mut c, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    if let Some(d) = write {
        c.write(0, &ns, Lba(77), d).unwrap();
        c.flush(0, Nsid(1)).unwrap();
    }
    let mut back = vec![0u8; read_len];
    c.read(0, &ns, Lba(77), &mut back).unwrap();
    c.shutdown().unwrap();
    (ids, back)
}

fn nonzero(ids: &SeenIds) {
    assert_ne!(ids.nguid, [0; 16]);
    assert_ne!(ids.eui64, [0; 8]);
    assert!(ids.desc_uuid.is_some_and(|u| u != [0; 16]), "{ids:?}");
    assert!(!ids.serial.trim().is_empty());
}

fn reassemble(disks: &[MemMember]) -> Assembled {
    let (members, _) = members_of(disks, false);
    // Any order: the roles are in the superblocks.
    let members: Vec<Arc<dyn Member>> = members.into_iter().rev().collect();
    Array::assemble(members, None, Arc::new(CpuXor::detect())).expect("assemble")
}

#[test]
fn clean_restart_over_mem_members_keeps_ids_and_data() {
    let rig = default_rig();
    let uuid = rig.array.uuid();
    let data = pattern(0x5157, 100 * BS);
    let (before, back) = visit(&rig.net, &rig.target, Some(&data), data.len());
    assert!(back == data);
    nonzero(&before);
    let Rig {
        target,
        disks,
        array,
        ..
    } = rig;
    let errs = target.shutdown();
    assert!(errs.is_empty(), "{errs:?}");
    drop(array);

    let asm = reassemble(&disks);
    assert!(asm.refused.is_empty(), "{:?}", asm.refused);
    assert!(
        !asm.resync_pending,
        "a clean shutdown leaves the array clean"
    );
    let array = Arc::new(asm.array);
    assert_eq!(array.uuid(), uuid);
    assert!(array.degraded_roles().is_empty());
    let net2 = MemNetwork::new();
    let t2 = start(
        &net2,
        "target-restarted",
        "10.0.0.2:4420".parse().unwrap(),
        array,
        HostAccess::Any,
        Limits::default(),
    );
    let (after, back) = visit(&net2, &t2, None, data.len());
    assert_eq!(after, before, "identifiers changed across a restart");
    assert!(back == data, "data changed across a restart");
    assert!(t2.shutdown().is_empty());
}

#[test]
fn unclean_stop_keeps_ids_and_acknowledged_data() {
    let rig = default_rig();
    let data = pattern(0xDEAD, 64 * BS);
    let (before, _) = visit(&rig.net, &rig.target, Some(&data), data.len());
    let Rig {
        target,
        disks,
        array,
        ..
    } = rig;
    // No shutdown: the threads stop, the array is never marked clean.
    drop(target);
    drop(array);
    let asm = reassemble(&disks);
    let array = Arc::new(asm.array);
    let net2 = MemNetwork::new();
    let t2 = start(
        &net2,
        "target-restarted",
        "10.0.0.3:4420".parse().unwrap(),
        array,
        HostAccess::Any,
        Limits::default(),
    );
    let (after, back) = visit(&net2, &t2, None, data.len());
    assert_eq!(
        after, before,
        "identifiers changed across an unclean restart"
    );
    assert!(
        back == data,
        "acknowledged data lost across an unclean restart"
    );
    assert!(t2.shutdown().is_empty());
}

fn config(dir: &Path, members: &[PathBuf], listen: &str) -> Config {
    config_with(dir, members, listen, 100)
}

fn config_with(dir: &Path, members: &[PathBuf], listen: &str, rebuild_mb_s: u32) -> Config {
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
rebuild_mb_s = {rebuild_mb_s}
assume_clean = true

[[subsystem]]
nqn = "{SUBNQN}"
model = "Raidline RAID-5"
allow_any_host = true

[[subsystem.namespace]]
nsid = 1
array = "array0"
"#,
        sock = dir.join("raidline.sock").display(),
        state = dir.join("state").display(),
        members = list.join(", "),
    );
    Config::parse(&text, "e2e_restart.toml").expect("config parses")
}

#[test]
fn daemon_bring_up_from_config_keeps_ids_across_restarts() {
    let dir = TempDir::new("restart");
    let members: Vec<PathBuf> = (0..4).map(|i| dir.0.join(format!("m{i}.img"))).collect();
    for m in &members {
        let f = std::fs::File::create(m).unwrap();
        f.set_len(9 << 20).unwrap();
    }
    let net = MemNetwork::new();
    // 1: blank members — the daemon creates the array.
    let spec = build_spec(&config(&dir.0, &members, "10.0.0.1:4420")).expect("bring-up");
    let uuid = spec.arrays[0].1.uuid();
    let t1 = Target::start(net.device("t1"), spec).unwrap();
    let data = pattern(0xF11E, 40 * BS);
    let (first, back) = visit(&net, &t1, Some(&data), data.len());
    assert!(back == data);
    nonzero(&first);
    assert!(t1.shutdown().is_empty());

    // 2: the same files — assembled, not created.
    let spec = build_spec(&config(&dir.0, &members, "10.0.0.2:4420")).expect("bring-up");
    assert_eq!(spec.arrays[0].1.uuid(), uuid, "assembled the same array");
    let t2 = Target::start(net.device("t2"), spec).unwrap();
    let (second, back) = visit(&net, &t2, None, data.len());
    assert_eq!(second, first, "identifiers changed across a daemon restart");
    assert!(back == data);
    assert!(t2.shutdown().is_empty());

    // 3: members listed in another order.
    let shuffled: Vec<PathBuf> = [2, 0, 3, 1].iter().map(|&i| members[i].clone()).collect();
    let spec = build_spec(&config(&dir.0, &shuffled, "10.0.0.3:4420")).expect("bring-up");
    assert_eq!(spec.arrays[0].1.uuid(), uuid);
    let t3 = Target::start(net.device("t3"), spec).unwrap();
    let (third, back) = visit(&net, &t3, None, data.len());
    assert_eq!(third, first, "identifiers depend on the member order");
    assert!(back == data);
    assert!(t3.shutdown().is_empty());

    // 4: member 1's drive was swapped for a blank one: assembled degraded, never re-created.
    std::fs::write(&members[1], vec![0u8; 9 << 20]).unwrap();
    let spec = build_spec(&config(&dir.0, &members, "10.0.0.4:4420")).expect("bring-up");
    let array = spec.arrays[0].1.clone();
    assert_eq!(
        array.uuid(),
        uuid,
        "a blank member made the daemon create a new array"
    );
    assert_eq!(array.degraded_roles(), vec![1]);
    let t4 = Target::start(net.device("t4"), spec).unwrap();
    let (fourth, back) = visit(&net, &t4, None, data.len());
    assert_eq!(fourth, first, "identifiers changed with a member missing");
    assert!(back == data, "data lost with a member missing");
    assert!(t4.shutdown().is_empty());
}

#[test]
fn writes_acknowledged_before_an_abrupt_stop_survive_it() {
    stop_in_the_middle_of_writes(false);
}

#[test]
fn shutdown_in_the_middle_of_writes_drains_and_leaves_the_array_clean() {
    stop_in_the_middle_of_writes(true);
}

/// 32-deep pipelined writes to distinct 8-block slots; the target stops once 24 are
/// acknowledged (`graceful`: [`Target::shutdown`], else dropped); the array is reassembled and
/// served again, and every write the host saw acknowledged reads back.
fn stop_in_the_middle_of_writes(graceful: bool) {
    use raidline_initiator::io::{submit_rw, IoOp};
    use raidline_initiator::Tag;
    use std::time::Duration;
    const BLOCKS: u32 = 8;
    const K: u64 = 700; // distinct 8-block slots: far more than get done before the stop
    let rig = default_rig();
    let mut o = options(1);
    o.io_depth = 32;
    o.io_timeout = Duration::from_secs(2);
    let mut c = connect_with(&rig, 1, o).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut q = c.take_io_queues().pop().unwrap();
    let Rig {
        target,
        disks,
        array,
        ..
    } = rig;
    let progress = std::sync::atomic::AtomicUsize::new(0);
    let (acked, failed) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut acked = Vec::new();
            let mut failed = 0u64;
            let mut slot_of: Vec<Option<u64>> = vec![None; usize::from(q.depth())];
            let mut next = 0u64;
            let mut done: Vec<Tag> = Vec::new();
            let mut submitting = true;
            loop {
                while submitting && next < K {
                    let Some(tag) = q.alloc() else { break };
                    let data = pattern(next + 1, BLOCKS as usize * BS);
                    let ok = q.write_data(tag, 0, &data).is_ok()
                        && submit_rw(&mut q, tag, IoOp::Write, &ns, Lba(next * 8), BLOCKS).is_ok();
                    if !ok {
                        q.release(tag);
                        submitting = false;
                        break;
                    }
                    slot_of[tag.index()] = Some(next);
                    next += 1;
                }
                done.clear();
                q.poll(&mut done);
                for &t in &done {
                    let (Some(k), Some(f)) = (slot_of[t.index()].take(), q.take(t)) else {
                        continue;
                    };
                    match f.result {
                        Ok(_) => {
                            acked.push(k);
                            progress.store(acked.len(), std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(_) => {
                            failed += 1;
                            submitting = false;
                        }
                    }
                }
                if q.in_flight() == 0 && (!submitting || next >= K) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            (acked, failed)
        });
        assert!(
            eventually(Duration::from_secs(10), || {
                progress.load(std::sync::atomic::Ordering::Relaxed) >= 24
            }),
            "24 writes not acknowledged within 10 s"
        );
        // The target goes away in the middle of the stream.
        if graceful {
            let errs = target.shutdown();
            assert!(errs.is_empty(), "{errs:?}");
        } else {
            drop(target);
        }
        writer.join().unwrap()
    });
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged before the stop"
    );
    assert!(
        (acked.len() as u64) < K,
        "the stop came after the stream ended ({} acknowledged, {failed} failed)",
        acked.len()
    );
    drop(q);
    drop(c);
    drop(array);
    let asm = reassemble(&disks);
    if graceful {
        assert!(
            !asm.resync_pending,
            "a drained shutdown marks the array clean"
        );
    }
    let net2 = MemNetwork::new();
    let t2 = start(
        &net2,
        "target-restarted",
        "10.0.0.4:4420".parse().unwrap(),
        Arc::new(asm.array),
        HostAccess::Any,
        Limits::default(),
    );
    let mut c = Controller::connect(net2.device("host1"), t2.local_addrs()[0], options(1)).unwrap();
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut back = vec![0u8; BLOCKS as usize * BS];
    for &k in &acked {
        c.read(0, &ns, Lba(k * 8), &mut back).unwrap();
        assert!(
            back == pattern(k + 1, back.len()),
            "acknowledged write {k} lost ({} acknowledged, {failed} failed)",
            acked.len()
        );
    }
    c.shutdown().unwrap();
    assert!(t2.shutdown().is_empty());
}

#[test]
fn hot_replace_keeps_redundancy_and_the_next_start_finds_the_new_member() {
    use raidline_target::mgmt::Management;
    use raidline_target::service::Api;
    let dir = TempDir::new("replace");
    let members: Vec<PathBuf> = (0..4).map(|i| dir.0.join(format!("m{i}.img"))).collect();
    let new = dir.0.join("new.img");
    for m in members.iter().chain([&new]) {
        let f = std::fs::File::create(m).unwrap();
        f.set_len(9 << 20).unwrap();
    }
    let net = MemNetwork::new();
    // 2 MB/s: the copy (8 MiB) runs for seconds, long enough to be seen running.
    let spec = build_spec(&config_with(&dir.0, &members, "10.0.1.1:4420", 2)).expect("bring-up");
    let array = spec.arrays[0].1.clone();
    let t1 = Target::start(net.device("t1"), spec).unwrap();
    let api = Api::new(t1.shared().clone());
    let data = pattern(0x4E91, 256 * BS);
    let (first, _) = visit(&net, &t1, Some(&data), BS);

    let old = members[1].display().to_string();
    let e = api
        .array_replace("array0", "/dev/nosuch", &new.display().to_string())
        .unwrap_err();
    assert!(e.contains("not a member") && e.contains(&old), "{e}");
    let m = api
        .array_replace("array0", &old, &new.display().to_string())
        .unwrap();
    assert!(m.contains("copying"), "{m}");
    let st = api.status();
    assert_eq!(st.arrays[0].state, "replacing", "{st:?}");
    assert!(
        st.arrays[0].members[1].state.contains("being replaced by"),
        "{:?}",
        st.arrays[0].members[1]
    );
    let metrics = api.metrics();
    assert!(
        metrics.contains("raidline_array_state{array=\"array0\",state=\"replacing\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("raidline_array_degraded_members{array=\"array0\"} 0"),
        "a replace is not degraded: {metrics}"
    );
    // A host keeps writing while the copy runs; the array is never degraded.
    let mut c =
        Controller::connect(net.device("host1"), t1.local_addrs()[0], options(1)).expect("connect");
    let ns = c.namespace(Nsid(1)).unwrap();
    let mut shadow = data.clone();
    let mut round = 0u64;
    let done = eventually(std::time::Duration::from_secs(60), || {
        assert!(
            array.degraded_roles().is_empty(),
            "degraded during a replace"
        );
        let at = (round as usize * 37) % 200;
        let chunk = pattern(0x9000 + round, 24 * BS);
        c.write(0, &ns, Lba(77 + at as u64), &chunk).unwrap();
        shadow[at * BS..(at + 24) * BS].copy_from_slice(&chunk);
        round += 1;
        array.replace_status().is_none()
    });
    assert!(done, "the replace did not finish in 60 s");
    assert_eq!(
        array.member_names()[1].as_deref(),
        Some(new.to_str().unwrap())
    );
    assert!(array.degraded_roles().is_empty());
    let mut back = vec![0u8; shadow.len()];
    c.read(0, &ns, Lba(77), &mut back).unwrap();
    assert!(
        back == shadow,
        "data differs after the replace ({round} write rounds)"
    );
    c.shutdown().unwrap();
    assert!(t1.shutdown().is_empty());
    let remembered = std::fs::read_to_string(dir.0.join("state/array0.members")).unwrap();
    assert!(remembered.contains(new.to_str().unwrap()), "{remembered}");
    assert!(!remembered.lines().any(|l| l == old), "{remembered}");

    // The configuration still lists the old disk: the remembered members bring the new one,
    // the old one is refused by its superblock, and nothing is degraded.
    let spec = build_spec(&config(&dir.0, &members, "10.0.1.2:4420")).expect("bring-up");
    let array = spec.arrays[0].1.clone();
    assert!(
        array.degraded_roles().is_empty(),
        "restart came up degraded"
    );
    assert_eq!(
        array.member_names()[1].as_deref(),
        Some(new.to_str().unwrap())
    );
    let t2 = Target::start(net.device("t2"), spec).unwrap();
    let (second, back) = visit(&net, &t2, None, shadow.len());
    assert_eq!(second, first, "identifiers changed across the replace");
    assert!(back == shadow, "data differs after the restart");
    assert!(t2.shutdown().is_empty());
}

#[test]
fn the_daemon_ages_the_write_intent_bitmap_so_a_crash_resyncs_only_recent_writes() {
    let disks = mem_disks(4, (8 << 20) + (1 << 20));
    let (members, _) = members_of(&disks, false);
    let cfg = raidline_raid::ArrayConfig {
        chunk: raidline_raid::ChunkSize::new(64 << 10).unwrap(),
        assume_clean: true,
        bitmap_region_stripes: Some(4),
        ..raidline_raid::ArrayConfig::default()
    };
    let array = Arc::new(Array::create(members, vec![], &cfg, Arc::new(CpuXor::detect())).unwrap());
    let region_bytes = array.bitmap_region_stripes()
        * array.geometry().stripe_data_blocks()
        * array.geometry().block_bytes() as u64;
    let net = MemNetwork::new();
    let mut spec = spec_for(
        "10.0.2.1:4420".parse().unwrap(),
        array.clone(),
        HostAccess::Any,
        Limits::default(),
    );
    spec.bitmap_aging = std::time::Duration::from_millis(100);
    let target = Target::start(net.device("t-aging"), spec).unwrap();
    let mut c = Controller::connect(net.device("host1"), target.local_addrs()[0], options(1))
        .expect("connect");
    let ns = c.namespace(Nsid(1)).unwrap();
    let old = pattern(0xA6E, 8 * BS);
    c.write(0, &ns, Lba(0), &old).unwrap();
    assert!(!array.dirty_regions().is_empty());
    // Idle for a few aging periods: the region's bit goes.
    assert!(
        eventually(std::time::Duration::from_secs(5), || array
            .dirty_regions()
            .is_empty()),
        "bits still set after idling: {:?}",
        array.dirty_regions()
    );
    // A write in another region, then a crash (no shutdown): only that region resyncs.
    let lba = Lba(region_bytes * 2 / BS as u64);
    let new = pattern(0xA6F, 8 * BS);
    c.write(0, &ns, lba, &new).unwrap();
    c.flush(0, Nsid(1)).unwrap();
    let dirty = array.dirty_regions();
    assert_eq!(dirty, vec![2], "one region written lately");
    drop(c);
    drop(target);
    drop(array);
    let asm = reassemble(&disks);
    assert!(asm.resync_pending, "an unclean stop");
    assert_eq!(
        asm.array.dirty_regions(),
        vec![2],
        "only the recent region resyncs"
    );
    let a = Arc::new(asm.array);
    let mut back = vec![0u8; old.len()];
    a.read(
        &mut raidline_raid::SyncExecutor,
        raidline_raid::ArrayBlock(0),
        &mut back,
    )
    .unwrap();
    assert!(back == old);
}
