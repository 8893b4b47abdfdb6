//! Array bring-up from the configuration: blank members make a new array, members with
//! superblocks are assembled (never re-created), unreadable members refuse both.

use std::path::PathBuf;

use raidline_raid::WriteHolePolicy;
use raidline_target::config::{ArrayConfig, ParityChoice};
use raidline_target::service::bring_up_array;

fn scratch(name: &str, n: usize, bytes: u64) -> (PathBuf, Vec<PathBuf>) {
    let dir = std::env::temp_dir().join(format!("raidline-bringup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let files = (0..n)
        .map(|i| {
            let p = dir.join(format!("m{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
            p
        })
        .collect();
    (dir, files)
}

fn config(members: Vec<PathBuf>) -> ArrayConfig {
    ArrayConfig {
        name: "a0".into(),
        members,
        spares: vec![],
        chunk_bytes: 64 << 10,
        parity: ParityChoice::Cpu,
        rebuild_mb_s: 100,
        assume_clean: true,
        write_hole: WriteHolePolicy::Degraded,
    }
}

#[test]
fn blank_members_create_then_restart_assembles_the_same_array() {
    let (dir, files) = scratch("same", 4, 64 << 20);
    let cfg = config(files.clone());
    let first = bring_up_array(&cfg, &[]).unwrap();
    let uuid = first.uuid();
    first.stop().unwrap();
    drop(first);
    // Same members, another order: assembled by UUID, not created anew.
    let mut shuffled = cfg.clone();
    shuffled.members.reverse();
    let second = bring_up_array(&shuffled, &[]).unwrap();
    assert_eq!(
        second.uuid(),
        uuid,
        "restart created a new array over existing members"
    );
    assert!(second.degraded_roles().is_empty());
    second.stop().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_member_is_an_error_not_a_new_array() {
    let (dir, mut files) = scratch("missing", 3, 64 << 20);
    files.push(dir.join("does-not-exist.img"));
    let err = bring_up_array(&config(files), &[]).unwrap_err();
    assert!(err.to_string().contains("does-not-exist"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_configured_write_hole_policy_wins_at_every_start() {
    let (dir, files) = scratch("policy", 4, 64 << 20);
    let mut cfg = config(files);
    cfg.write_hole = WriteHolePolicy::Always;
    // Created with it.
    let a = bring_up_array(&cfg, &[]).unwrap();
    assert_eq!(a.write_hole_policy(), WriteHolePolicy::Always);
    a.stop().unwrap();
    drop(a);
    // The superblocks keep it: assembled under the same configuration, unchanged.
    let a = bring_up_array(&cfg, &[]).unwrap();
    assert_eq!(a.write_hole_policy(), WriteHolePolicy::Always);
    a.stop().unwrap();
    drop(a);
    // The configuration changed: it replaces the recorded policy, and that is kept.
    cfg.write_hole = WriteHolePolicy::Degraded;
    let a = bring_up_array(&cfg, &[]).unwrap();
    assert_eq!(a.write_hole_policy(), WriteHolePolicy::Degraded);
    a.stop().unwrap();
    drop(a);
    let asm = raidline_raid::Array::assemble(
        cfg.members
            .iter()
            .map(|p| raidline_target::daemon::open_member(p, None).unwrap())
            .collect(),
        None,
        std::sync::Arc::new(raidline_raid::CpuXor::detect()),
    )
    .unwrap();
    assert_eq!(asm.array.write_hole_policy(), WriteHolePolicy::Degraded);
    asm.array.stop().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
