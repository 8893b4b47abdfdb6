//! Configuration parsing: the example parses; every class of mistake names its line and column.

use super::*;

const EXAMPLE: &str = include_str!("../../deploy/raidline.toml");

#[test]
fn example_config_parses() {
    let c = Config::parse(EXAMPLE, "raidline.toml").unwrap();
    assert_eq!(c.listen, vec!["0.0.0.0:4420".parse().unwrap()]);
    assert_eq!(c.cores, 2);
    assert_eq!(c.poll_mode, PollMode::Adaptive);
    assert_eq!(c.arrays[0].chunk_bytes, 64 * 1024);
    assert_eq!(c.arrays[0].members.len(), 4);
    assert_eq!(c.arrays[0].write_hole, WriteHolePolicy::Degraded);
    assert_eq!(
        c.subsystems[0].namespaces[0].backing,
        Backing::Array("array0".into())
    );
    assert_eq!(c.limits, Limits::default());
    assert_eq!(c.cc.algorithm, "off");
    assert_eq!(c.metrics, Some("127.0.0.1:9420".parse().unwrap()));
}

#[test]
fn empty_config_gets_defaults() {
    let c = Config::parse("", "x").unwrap();
    assert_eq!(c.listen.len(), 1);
    assert_eq!(c.cores, 1);
    assert!(c.subsystems.is_empty());
}

fn invalid(text: &str) -> (usize, usize, String) {
    match Config::parse(text, "t.toml").unwrap_err() {
        ConfigError::Invalid {
            line,
            column,
            message,
            ..
        } => (line, column, message),
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn io_poll_is_off_unless_asked_for() {
    assert_eq!(Config::parse("", "x").unwrap().io_poll, IoPoll::Off);
    assert_eq!(Config::parse(EXAMPLE, "x").unwrap().io_poll, IoPoll::Off);
    let c = Config::parse("[target]\nio_poll = \"on\"\n", "t.toml").unwrap();
    assert_eq!(c.io_poll, IoPoll::On);
    assert!(crate::cli::config_summary(&c).contains("member I/O: polled"));
    let e = Config::parse("[target]\nio_poll = \"auto\"\n", "t.toml").unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn unknown_keys_and_bad_types_name_the_line() {
    let e = Config::parse("[target]\ncores = 2\nbogus = 1\n", "t.toml").unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("bogus"), "{msg}");
    let e = Config::parse("[target]\ncores = \"two\"\n", "t.toml").unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn semantic_errors_name_line_and_column() {
    let (l, c, m) = invalid("[target]\nlisten = [\"nowhere\"]\n");
    assert_eq!((l, c), (2, 11));
    assert!(m.contains("IP:PORT"), "{m}");

    let (l, _, m) = invalid("[transport]\nqueue_depth = 4\n");
    assert_eq!(l, 2);
    assert!(m.contains("16..=1024"), "{m}");

    let (l, _, m) = invalid("[[array]]\nname = \"a\"\nmembers = [\"/x\", \"/y\"]\n");
    assert_eq!(l, 3);
    assert!(m.contains("at least 3"), "{m}");

    let (l, _, m) =
        invalid("[[array]]\nname = \"a\"\nmembers = [\"/x\", \"/y\", \"/z\"]\nchunk_kib = 48\n");
    assert_eq!(l, 4);
    assert!(m.contains("power of two"), "{m}");

    let (l, _, m) = invalid("[[subsystem]]\nnqn = \"iqn.wrong\"\nallow_any_host = true\n");
    assert_eq!(l, 2);
    assert!(m.contains("nqn."), "{m}");

    let (_, _, m) = invalid("[[subsystem]]\nnqn = \"nqn.a:b\"\n");
    assert!(m.contains("no host could connect"), "{m}");

    let (l, _, m) = invalid(
        "[[subsystem]]\nnqn = \"nqn.a:b\"\nallow_any_host = true\n[[subsystem.namespace]]\nnsid = 1\narray = \"missing\"\n",
    );
    assert_eq!(l, 6);
    assert!(m.contains("no array named"), "{m}");

    let (_, _, m) = invalid(
        "[[subsystem]]\nnqn = \"nqn.a:b\"\nallow_any_host = true\n[[subsystem.namespace]]\nnsid = 1\n",
    );
    assert!(m.contains("exactly one"), "{m}");

    let (l, _, _) = invalid(
        "[[subsystem]]\nnqn = \"nqn.a:b\"\nallow_any_host = true\n[[subsystem.namespace]]\nnsid = 1\nfile = \"/a\"\n[[subsystem.namespace]]\nnsid = 1\nfile = \"/b\"\n",
    );
    assert_eq!(l, 8, "duplicate nsid");
}

#[test]
fn file_namespace_and_host_list() {
    let c = Config::parse(
        "[[subsystem]]\nnqn = \"nqn.a:b\"\nhosts = [\"nqn.h:1\"]\n[[subsystem.namespace]]\nnsid = 3\nfile = \"/var/lib/x.img\"\nsize_mib = 64\n",
        "t",
    )
    .unwrap();
    let s = &c.subsystems[0];
    assert_eq!(s.hosts.as_ref().unwrap().len(), 1);
    assert_eq!(
        s.namespaces[0].backing,
        Backing::File {
            path: "/var/lib/x.img".into(),
            create_size: Some(64 << 20)
        }
    );
}

#[test]
fn cc_algorithm_and_params_are_checked_at_load() {
    // Pacing is off unless asked for (README: rtt-aimd's uncongested cost is not yet within
    // issue 17's 5 % in every run); naming `off` is the same.
    assert_eq!(Config::parse("", "x").unwrap().cc.algorithm, "off");
    let c = Config::parse("[cc]\nalgorithm = \"rtt-aimd\"\n", "x").unwrap();
    assert_eq!(c.cc.algorithm, "rtt-aimd");
    let c = Config::parse("[cc]\nalgorithm = \"off\"\n", "x").unwrap();
    assert_eq!(c.cc.algorithm, "off");
    let c = Config::parse(
        "[cc]\nalgorithm = \"fixed\"\n[cc.params]\nrate_mbps = 8000\n",
        "x",
    )
    .unwrap();
    assert_eq!(c.cc.params, vec![("rate_mbps".to_owned(), 8000.0)]);
    let (l, c, m) = invalid("[cc]\nalgorithm = \"cubic\"\n");
    assert_eq!((l, c), (2, 13));
    assert!(m.contains("unknown algorithm `cubic`"), "{m}");
    // Issue 20 item 7: a parameter's error points at its own line and value.
    let (l, c, m) = invalid("[cc]\nalgorithm = \"fixed\"\n[cc.params]\nspeed = 1\n");
    assert_eq!((l, c), (4, 9));
    assert!(
        m.contains("unknown parameter `speed` for algorithm `fixed`"),
        "{m}"
    );
    let (l, c, m) =
        invalid("[cc]\nalgorithm = \"rtt-aimd\"\n[cc.params]\nai_mbps = 10\nbeta = 2.0\n");
    assert_eq!((l, c), (5, 8));
    assert!(m.contains("`beta` = 2 is outside [0, 1]"), "{m}");
    let (l, c, m) = invalid("[cc]\nalgorithm = \"fixed\"\n[cc.params]\nrate_mbps = \"fast\"\n");
    assert_eq!((l, c), (4, 13));
    assert!(m.contains("cc.params.rate_mbps must be a number"), "{m}");
}

#[test]
fn an_empty_listen_points_at_its_line() {
    let (l, c, m) = invalid("[target]\ncores = 1\nlisten = []\n");
    assert_eq!((l, c), (3, 10));
    assert!(m.contains("target.listen is empty"), "{m}");
}

#[test]
fn write_hole_policy_defaults_to_degraded_and_takes_always() {
    let array = "[[array]]\nname = \"a\"\nmembers = [\"/x\", \"/y\", \"/z\"]\n";
    let c = Config::parse(array, "t").unwrap();
    assert_eq!(c.arrays[0].write_hole, WriteHolePolicy::Degraded);
    let c = Config::parse(&format!("{array}write_hole = \"always\"\n"), "t").unwrap();
    assert_eq!(c.arrays[0].write_hole, WriteHolePolicy::Always);
    let c = Config::parse(&format!("{array}write_hole = \"degraded\"\n"), "t").unwrap();
    assert_eq!(c.arrays[0].write_hole, WriteHolePolicy::Degraded);
    // Any other word names its line and column and both allowed words.
    let (l, col, m) = invalid(&format!("{array}write_hole = \"sometimes\"\n"));
    assert_eq!((l, col), (4, 14));
    assert!(
        m.contains("\"sometimes\"") && m.contains("\"degraded\"") && m.contains("\"always\""),
        "{m}"
    );
    // Case matters, as for every other word of the file.
    let (l, _, _) = invalid(&format!("{array}write_hole = \"Always\"\n"));
    assert_eq!(l, 4);
    // A number is a type error.
    let e = Config::parse(&format!("{array}write_hole = 1\n"), "t").unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
}

#[test]
fn shared_receive_queue_defaults_to_512_and_0_turns_it_off() {
    assert_eq!(Config::parse("", "x").unwrap().limits.srq_depth, 512);
    let c = Config::parse("[transport]\nshared_receive_queue = 0\n", "x").unwrap();
    assert_eq!(c.limits.srq_depth, 0);
    let c = Config::parse("[transport]\nshared_receive_queue = 2048\n", "x").unwrap();
    assert_eq!(c.limits.srq_depth, 2048);
    let (l, _, m) = invalid("[transport]\nshared_receive_queue = 8\n");
    assert_eq!(l, 2);
    assert!(m.contains("16..=16384"), "{m}");
}

#[test]
fn host_authentication_entries() {
    const KEY: &str = "DHHC-1:01:pYVItjmNx+tuaJSeIMEDlEZmepEMhAVABIHKOMjrNR5YOMS9:";
    let head = "[[subsystem]]\nnqn = \"nqn.a:b\"\nhosts = [\"nqn.h:1\", \"nqn.h:2\"]\n";
    let c = Config::parse(
        &format!(
            "{head}[[subsystem.auth]]\nhost = \"nqn.h:1\"\nsecret = \"{KEY}\"\nctrl_secret = \"{KEY}\"\nhashes = [\"sha512\", \"hmac(sha256)\"]\ndhgroups = [\"null\"]\n[[subsystem.auth]]\nhost = \"nqn.h:2\"\nsecret = \"{KEY}\"\n"
        ),
        "t",
    )
    .unwrap();
    let a = &c.subsystems[0].auth;
    let p1 = &a[&Nqn::new("nqn.h:1").unwrap()];
    assert_eq!(p1.hashes, vec![HashFn::Sha512, HashFn::Sha256]);
    assert_eq!(p1.groups, vec![DhGroup::Null]);
    assert!(p1.ctrl_secret.is_some());
    let p2 = &a[&Nqn::new("nqn.h:2").unwrap()];
    assert_eq!(p2.hashes, HashFn::ALL.to_vec());
    assert_eq!(p2.groups, DhGroup::ALL.to_vec());
    assert!(p2.ctrl_secret.is_none());
    // The secret never shows in the configuration's Debug output.
    assert!(!format!("{c:?}").contains("pYVI"));

    let entry = |body: &str| format!("{head}[[subsystem.auth]]\nhost = \"nqn.h:1\"\n{body}");
    for (text, want) in [
        (entry(""), "give secret"),
        (entry("secret = \"DHHC-1:01:pY!I:\"\n"), "not valid base64"),
        (entry("secret = \"DHHC-1:01:pYVI:\"\n"), "the key is 0 bytes"),
        (entry(&format!("secret = \"{}\"\n", KEY.replace("pYVI", "pYVJ"))), "CRC-32"),
        (entry(&format!("secret = \"{KEY}\"\nhashes = [\"md5\"]\n")), "unknown \"md5\""),
        (entry(&format!("secret = \"{KEY}\"\ndhgroups = []\n")), "the list is empty"),
        (entry(&format!("secret = \"{KEY}\"\nsecret_file = \"/x\"\n")), "not both"),
        (
            format!("{head}[[subsystem.auth]]\nhost = \"nqn.h:3\"\nsecret = \"{KEY}\"\n"),
            "is not in hosts",
        ),
        (
            format!("[[subsystem]]\nnqn = \"nqn.a:b\"\nallow_any_host = true\n[[subsystem.auth]]\nhost = \"nqn.h:3\"\nsecret = \"{KEY}\"\n"),
            "allow_any_host = true",
        ),
        (
            format!("{}[[subsystem.auth]]\nhost = \"nqn.h:1\"\nsecret = \"{KEY}\"\n", entry(&format!("secret = \"{KEY}\"\n"))),
            "two [[subsystem.auth]] entries",
        ),
    ] {
        let (_, _, m) = invalid(&text);
        assert!(m.contains(want), "{want:?} not in {m:?}");
        assert!(!m.contains("pYVItjmNx"), "a secret in an error: {m}");
    }
}

#[test]
fn secret_files_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    const KEY: &str = "DHHC-1:00:ZGJjMjM3ZjNjZTA5YjFmYTk4NTZkYmNjYjNkNmM0NzDQo5o/:";
    let dir = std::env::temp_dir().join(format!("raidline-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("host1.key");
    std::fs::write(&f, format!("{KEY}\n")).unwrap();
    let text = format!(
        "[[subsystem]]\nnqn = \"nqn.a:b\"\nhosts = [\"nqn.h:1\"]\n[[subsystem.auth]]\nhost = \"nqn.h:1\"\nsecret_file = \"{}\"\n",
        f.display()
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (l, _, m) = invalid(&text);
    assert_eq!(l, 6);
    assert!(m.contains("mode 0644") && m.contains("chmod 600"), "{m}");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = Config::parse(&text, "t").unwrap();
    assert_eq!(c.subsystems[0].auth.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

const ISCSI_BASE: &str = r#"
[[subsystem]]
nqn = "nqn.2026-11.io.raidline:a"
allow_any_host = true

[[subsystem.namespace]]
nsid = 1
file = "/tmp/ns1"
size_mib = 1
"#;

#[test]
fn iscsi_targets_map_luns_to_namespaces() {
    let text = format!(
        r#"{ISCSI_BASE}
[iscsi]
listen = ["10.0.0.1:3260"]

[[iscsi.target]]
name = "iqn.2026-12.io.raidline:Node1"
alias = "node1"
initiators = ["iqn.1993-08.org.debian:01:host1"]

[[iscsi.target.lun]]
lun = 3
subsystem = "nqn.2026-11.io.raidline:a"
nsid = 1
"#
    );
    let c = Config::parse(&text, "t.toml").unwrap();
    assert_eq!(c.iscsi.listen, vec!["10.0.0.1:3260".parse().unwrap()]);
    let t = &c.iscsi.targets[0];
    // iSCSI names compare case-insensitively; the configured one is kept in lower case.
    assert_eq!(t.name, "iqn.2026-12.io.raidline:node1");
    assert_eq!(t.alias.as_deref(), Some("node1"));
    assert_eq!(
        t.initiators,
        Some(vec!["iqn.1993-08.org.debian:01:host1".to_string()])
    );
    assert_eq!((t.luns[0].lun, t.luns[0].nsid), (3, 1));
    // Immediate data unless turned off.
    assert!(c.iscsi.immediate_data);
    let off = text.replace("[iscsi]\n", "[iscsi]\nimmediate_data = false\n");
    assert!(!Config::parse(&off, "t.toml").unwrap().iscsi.immediate_data);
    // Without [iscsi], nothing is served over iSER.
    assert_eq!(
        Config::parse(ISCSI_BASE, "t").unwrap().iscsi,
        IscsiConfig::default()
    );
}

#[test]
fn iscsi_mistakes_are_named() {
    let target = |name: &str, lun: &str| {
        format!(
            "{ISCSI_BASE}\n[iscsi]\nlisten = [\"0.0.0.0:3260\"]\n\n[[iscsi.target]]\nname = \"{name}\"\n{lun}"
        )
    };
    let lun = |l: u32, sub: &str, nsid: u32| {
        format!("\n[[iscsi.target.lun]]\nlun = {l}\nsubsystem = \"{sub}\"\nnsid = {nsid}\n")
    };
    let ok_lun = lun(0, "nqn.2026-11.io.raidline:a", 1);
    for (text, want) in [
        (target("raidline-node1", &ok_lun), "not an iSCSI name"),
        (target("iqn.26-12.io.x", &ok_lun), "not an iSCSI name"),
        (
            target("iqn.2026-12.io.raidline:t", ""),
            "has no [[iscsi.target.lun]]",
        ),
        (
            target(
                "iqn.2026-12.io.raidline:t",
                &lun(0, "nqn.2026-11.io.raidline:b", 1),
            ),
            "no [[subsystem]]",
        ),
        (
            target(
                "iqn.2026-12.io.raidline:t",
                &lun(0, "nqn.2026-11.io.raidline:a", 2),
            ),
            "has no namespace 2",
        ),
        (
            target(
                "iqn.2026-12.io.raidline:t",
                &lun(16384, "nqn.2026-11.io.raidline:a", 1),
            ),
            "out of range",
        ),
        (
            target("iqn.2026-12.io.raidline:t", &format!("{ok_lun}{ok_lun}")),
            "configured twice",
        ),
        (
            format!("{ISCSI_BASE}\n[iscsi]\nlisten = [\"0.0.0.0:3260\"]\n"),
            "no [[iscsi.target]]",
        ),
        (
            format!("{ISCSI_BASE}\n[iscsi]\nlisten = [\"3260\"]\n"),
            "not IP:PORT",
        ),
        (
            format!("{ISCSI_BASE}\n[iscsi]\nlisten = [\"10.0.0.2:4420\"]\n"),
            "also an NVMe/RDMA listen port",
        ),
        (
            format!(
                "{ISCSI_BASE}\n[[iscsi.target]]\nname = \"iqn.2026-12.io.raidline:t\"\n{ok_lun}"
            ),
            "needs iscsi.listen",
        ),
    ] {
        let (_, _, m) = invalid(&text);
        assert!(m.contains(want), "{m} (want {want})");
    }
    // eui. and naa. names are iSCSI names too.
    assert!(iscsi_name_ok("eui.02004567a425678d"));
    assert!(iscsi_name_ok("naa.52004567ba64678d"));
    assert!(!iscsi_name_ok("eui.0200"));
}

#[test]
fn iscsi_chap_secrets() {
    let with = |chap: &str| {
        format!(
            "{ISCSI_BASE}\n[iscsi]\nlisten = [\"0.0.0.0:3260\"]\n\n[[iscsi.target]]\nname = \"iqn.2026-12.io.raidline:t\"\n\n[[iscsi.target.lun]]\nlun = 0\nsubsystem = \"nqn.2026-11.io.raidline:a\"\nnsid = 1\n\n[iscsi.target.chap]\n{chap}"
        )
    };
    let c = Config::parse(
        &with("user = \"host1\"\nsecret = \"initiator-secret\"\nmutual_user = \"array0\"\nmutual_secret = \"target-secret-12\"\n"),
        "t",
    )
    .unwrap();
    let chap = c.iscsi.targets[0].chap.as_ref().unwrap();
    assert!(c.iscsi.discovery_chap.is_none());
    assert_eq!(chap.initiator.user, "host1");
    assert_eq!(chap.initiator.secret.as_slice(), b"initiator-secret");
    assert_eq!(chap.target.as_ref().unwrap().user, "array0");
    // Secrets stay out of the debug output the daemon might log.
    assert!(!format!("{c:?}").contains("initiator-secret"));
    for (text, want) in [
        ("user = \"h\"\nsecret = \"short\"\n", "12 to 255 bytes"),
        ("user = \"h\"\n", "needs secret"),
        (
            "user = \"h\"\nsecret = \"same-secret-12\"\nmutual_user = \"t\"\nmutual_secret = \"same-secret-12\"\n",
            "must differ",
        ),
        (
            "user = \"h\"\nsecret = \"initiator-secret\"\nmutual_user = \"t\"\n",
            "needs mutual_secret",
        ),
    ] {
        let (_, _, m) = invalid(&with(text));
        assert!(m.contains(want), "{m} (want {want})");
    }
    // A secret file others can read is refused.
    let dir = std::env::temp_dir().join(format!("raidline-chap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("chap.secret");
    std::fs::write(&f, "file-secret-1234\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = with(&format!(
        "user = \"h\"\nsecret_file = \"{}\"\n",
        f.display()
    ));
    let (_, _, m) = invalid(&text);
    assert!(m.contains("chmod 600"), "{m}");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = Config::parse(&text, "t").unwrap();
    assert_eq!(
        c.iscsi.targets[0]
            .chap
            .as_ref()
            .unwrap()
            .initiator
            .secret
            .as_slice(),
        b"file-secret-1234"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // CHAP for discovery sessions: `[iscsi.discovery_chap]`, the same keys and checks.
    let base = with("user = \"host1\"\nsecret = \"initiator-secret\"\n");
    let c = Config::parse(
        &format!(
            "{base}\n[iscsi.discovery_chap]\nuser = \"finder\"\nsecret = \"discovery-secret\"\n"
        ),
        "t",
    )
    .unwrap();
    let d = c.iscsi.discovery_chap.as_ref().unwrap();
    assert_eq!(
        (d.initiator.user.as_str(), d.initiator.secret.as_slice()),
        ("finder", &b"discovery-secret"[..])
    );
    let (_, _, m) = invalid(&format!(
        "{base}\n[iscsi.discovery_chap]\nuser = \"finder\"\nsecret = \"short\"\n"
    ));
    assert!(
        m.contains("iscsi.discovery_chap") && m.contains("12 to 255 bytes"),
        "{m}"
    );
}
