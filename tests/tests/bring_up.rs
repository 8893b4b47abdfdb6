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
        overwrite: vec![],
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

/// Writes `bytes` at `offset` of `path`.
fn poke(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

/// A device's bytes: what nothing may have changed.
fn contents(files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Each known signature (partition tables, filesystems, md, LVM2, swap, bcache, ZFS, LUKS),
/// written on the middle of three members: the new array is
/// refused with the device and what it holds named, and not one byte of any member changed.
#[test]
fn creation_over_foreign_data_is_refused_and_writes_nothing() {
    const SIZE: u64 = 16 << 20;
    let cases = raidline_target::foreign::samples(SIZE);
    for (k, (what, writes)) in cases.iter().enumerate() {
        let (dir, files) = scratch(&format!("foreign{k}"), 3, SIZE);
        for (off, bytes) in writes {
            poke(&files[1], *off, bytes);
        }
        let before = contents(&files);
        let err = bring_up_array(&config(files.clone()), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&files[1].display().to_string()),
            "{what}: {err}"
        );
        assert!(err.contains(what), "{what}: {err}");
        assert!(err.contains("overwrite"), "the way out is named: {err}");
        assert!(
            contents(&files) == before,
            "{what}: a member was written although the array was refused"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `overwrite` naming the device is the operator's word: the array is created over it.
#[test]
fn foreign_data_is_overwritten_only_on_the_devices_overwrite_names() {
    let (dir, files) = scratch("overwrite", 3, 16 << 20);
    poke(&files[0], 0, b"XFSB");
    poke(&files[2], 1080, &[0x53, 0xEF]);
    let mut cfg = config(files.clone());
    cfg.overwrite = vec![files[0].clone()];
    let err = bring_up_array(&cfg, &[]).unwrap_err().to_string();
    assert!(err.contains(&files[2].display().to_string()), "{err}");
    assert!(!err.contains(&files[0].display().to_string()), "{err}");
    cfg.overwrite.push(files[2].clone());
    let a = bring_up_array(&cfg, &[]).expect("created over both, as told");
    a.stop().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// A configuration of one array over `members` (and a file namespace at `file`, if any).
fn config_text(members: &[PathBuf], file: Option<&std::path::Path>) -> String {
    let list: Vec<String> = members
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let mut t = format!(
        "[target]\nlisten = [\"127.0.0.1:4420\"]\n\n[[array]]\nname = \"a0\"\nmembers = [{}]\n\n\
         [[subsystem]]\nnqn = \"nqn.2026-11.io.raidline:a0\"\nallow_any_host = true\n\n\
         [[subsystem.namespace]]\nnsid = 1\narray = \"a0\"\n",
        list.join(", ")
    );
    if let Some(f) = file {
        t.push_str(&format!(
            "\n[[subsystem.namespace]]\nnsid = 2\nfile = {:?}\n",
            f.display().to_string()
        ));
    }
    t
}

/// One device listed twice, by the same path, through a symlink, a hard link, or as a file
/// namespace too, is refused by the configuration check (`check-config` and the daemon's
/// start) before anything is opened; distinct devices pass.
#[test]
fn a_device_listed_twice_or_through_an_alias_is_refused() {
    use raidline_target::config::Config;
    use raidline_target::service::check_devices;
    let (dir, files) = scratch("twice", 3, 1 << 20);
    let ok = Config::parse(&config_text(&files, None), "t.toml").unwrap();
    check_devices(&ok).expect("three distinct files");
    // The same path twice: the parser says which.
    let same = vec![files[0].clone(), files[0].clone(), files[2].clone()];
    let e = Config::parse(&config_text(&same, None), "t.toml").unwrap_err();
    assert!(e.to_string().contains("listed twice"), "{e}");
    // Aliases: a symlink and a hard link to the first member.
    let sym = dir.join("alias-sym");
    std::os::unix::fs::symlink(&files[0], &sym).unwrap();
    let hard = dir.join("alias-hard");
    std::fs::hard_link(&files[0], &hard).unwrap();
    for alias in [&sym, &hard] {
        let set = vec![files[0].clone(), files[1].clone(), alias.clone()];
        let c = Config::parse(&config_text(&set, None), "t.toml").unwrap();
        let e = check_devices(&c).unwrap_err().to_string();
        assert!(e.contains("same device"), "{e}");
        assert!(e.contains(&alias.display().to_string()), "{e}");
        // The daemon's start refuses it the same way, before any device is opened.
        let e = raidline_target::service::build_spec(&c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same device"), "{e}");
    }
    // A member served as a file namespace as well.
    let c = Config::parse(&config_text(&files, Some(&sym)), "t.toml").unwrap();
    let e = check_devices(&c).unwrap_err().to_string();
    assert!(e.contains("namespace 2"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn listen_addresses_must_belong_to_this_host() {
    use raidline_target::service::check_listen;
    check_listen(&[
        "127.0.0.1:4420".parse().unwrap(),
        "0.0.0.0:4420".parse().unwrap(),
    ])
    .expect("loopback and the wildcard are this host's");
    // TEST-NET-1 (RFC 5737) is nobody's address.
    let e = check_listen(&["192.0.2.1:4420".parse().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("192.0.2.1"), "{e}");
}
