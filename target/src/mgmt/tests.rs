//! Management socket tests: a fake daemon behind a real Unix socket in a temporary directory.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

const T: Duration = Duration::from_secs(5);

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("rl-mgmt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn sock(&self) -> PathBuf {
        self.0.join("raidline.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A daemon stand-in: array0 exists, everything else is refused; member "panic" panics.
#[derive(Default)]
pub(crate) struct Fake {
    log: Mutex<Vec<String>>,
}

impl Fake {
    fn check(&self, array: &str, what: String) -> Result<String, String> {
        self.log.lock().unwrap().push(what.clone());
        if array == "array0" {
            Ok(what)
        } else {
            Err(format!("no array named {array}"))
        }
    }
}

impl Management for Fake {
    fn status(&self) -> StatusReport {
        sample()
    }
    fn array_fail(&self, array: &str, member: &str) -> Result<String, String> {
        if member == "panic" {
            panic!("handler bug");
        }
        self.check(array, format!("failed {member} in {array}"))
    }
    fn array_add_spare(&self, array: &str, path: &str) -> Result<String, String> {
        self.check(array, format!("spare {path} added to {array}"))
    }
    fn array_replace(&self, array: &str, old: &str, new: &str) -> Result<String, String> {
        self.check(array, format!("replacing {old} with {new} in {array}"))
    }
    fn array_scrub(&self, array: &str) -> Result<String, String> {
        self.check(array, format!("scrub of {array} started"))
    }
    fn array_start(&self, array: &str, accept_dirty_degraded: bool) -> Result<String, String> {
        self.check(
            array,
            format!("started {array} (accept dirty degraded: {accept_dirty_degraded})"),
        )
    }
    fn cc_set(&self, param: &str, value: f64) -> Result<String, String> {
        self.log.lock().unwrap().push(format!("cc {param}"));
        if param == "rate_mbps" {
            Ok(format!("fixed {param}: 1000 -> {value}"))
        } else {
            Err(format!("unknown parameter `{param}` for algorithm `fixed`"))
        }
    }
    fn cc_show(&self) -> Result<String, String> {
        Ok("algorithm: fixed".into())
    }
    fn ns_set_active(&self, subsystem: &str, nsid: u32, active: bool) -> Result<String, String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("ns {subsystem} {nsid} {active}"));
        if nsid == 1 {
            Ok(format!("namespace {nsid} of {subsystem} changed"))
        } else {
            Err(format!("no namespace {nsid} in subsystem {subsystem}"))
        }
    }
}

/// A status report with every part filled in.
pub(crate) fn sample() -> StatusReport {
    StatusReport {
        version: "0.1.0".into(),
        uptime_s: 3723,
        listen: vec!["0.0.0.0:4420".into()],
        arrays: vec![ArrayStatus {
            name: "array0".into(),
            uuid: "3f1c2a44-9b2e-4c1d-8a55-0e6b7c9d1f20".into(),
            state: "rebuilding".into(),
            capacity_bytes: 3 << 40,
            chunk_bytes: 64 << 10,
            members: vec![
                MemberStatus {
                    role: 0,
                    reason: None,
                    reason_class: None,
                    path: "/dev/nvme0n1".into(),
                    state: "active".into(),
                },
                MemberStatus {
                    role: 1,
                    reason: None,
                    reason_class: None,
                    path: "/dev/nvme4n1".into(),
                    state: "rebuilding".into(),
                },
                MemberStatus {
                    role: 2,
                    reason: None,
                    reason_class: None,
                    path: "/dev/nvme2n1".into(),
                    state: "active".into(),
                },
            ],
            spares: vec![],
            rebuild: Some(Progress {
                done_bytes: 1 << 40,
                total_bytes: 4 << 40,
                rate_bytes_per_s: 200 << 20,
            }),
            scrub: None,
            parity_engine: "cpu-avx2".into(),
            write_hole_protection: true,
            write_hole_policy: "degraded".into(),
            refused: None,
            exposure: None,
            stripe_writes: Some(StripeWrites {
                full: 12,
                rmw: 3,
                rcw: 4,
            }),
        }],
        subsystems: vec![SubsystemStatus {
            nqn: "nqn.2026-11.io.raidline:array0".into(),
            serial: "RL3F1C2A449B2E".into(),
            model: "Raidline RAID-5".into(),
            allow_any_host: false,
            hosts: vec!["nqn.2014-08.org.nvmexpress:uuid:0000".into()],
            auth_hosts: vec!["nqn.2014-08.org.nvmexpress:uuid:0000 (sha256; ffdhe2048)".into()],
            namespaces: vec![NamespaceStatus {
                nsid: 1,
                backing: "array array0".into(),
                block_size: 4096,
                blocks: 805_306_368,
                active: true,
                read_ops: 123_456,
                write_ops: 654_321,
                read_bytes: 505_679_872,
                write_bytes: 2_680_098_816,
            }],
        }],
        controllers: vec![ControllerStatus {
            cntlid: 7,
            subnqn: "nqn.2026-11.io.raidline:array0".into(),
            hostnqn: "nqn.2014-08.org.nvmexpress:uuid:0000".into(),
            host_addr: "192.168.122.1:51234".into(),
            kato_ms: 10_000,
            auth: "hmac(sha256) ffdhe2048 bidirectional".into(),
            queues: vec![
                QueueStatus {
                    qid: 0,
                    depth: 32,
                    in_flight: 1,
                    bytes: 0,
                    poller: 0,
                    rate_bytes_per_s: 0.0,
                    rtt_us: 0.0,
                    raw_rtt_us: 0.0,
                    net_rtt_us: 0.0,
                    base_rtt_us: 0.0,
                },
                QueueStatus {
                    qid: 1,
                    depth: 128,
                    in_flight: 17,
                    bytes: 7 << 30,
                    poller: 1,
                    rate_bytes_per_s: 1.25e9,
                    rtt_us: 18.5,
                    raw_rtt_us: 2400.0,
                    net_rtt_us: 21.0,
                    base_rtt_us: 17.0,
                },
            ],
        }],
        iscsi_sessions: vec![IscsiSessionStatus {
            session_type: "Normal".into(),
            initiator: "iqn.1993-08.org.debian:01:host1".into(),
            target: "iqn.2026-12.io.raidline:array0".into(),
            isid: "80002338d000".into(),
            tsih: 1,
            peer: "10.0.0.2:40000".into(),
            poller: 0,
        }],
    }
}

fn start(dir: &TempDir) -> (MgmtServer, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let server = MgmtServer::start(&dir.sock(), fake.clone()).unwrap();
    (server, fake)
}

/// Sends raw bytes and reads the one answer line.
fn raw(path: &Path, bytes: &[u8]) -> Response {
    let mut s = UnixStream::connect(path).unwrap();
    // The server may stop reading early (oversize); the answer is still there to read.
    let _ = s.write_all(bytes);
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    assert!(line.ends_with('\n'), "{line:?}");
    serde_json::from_str(&line).unwrap()
}

#[test]
fn every_request_round_trips() {
    let dir = TempDir::new("roundtrip");
    let (server, fake) = start(&dir);
    assert_eq!(server.path(), dir.sock());
    let mode = std::fs::metadata(dir.sock()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660);

    let r = call(&dir.sock(), &Request::Status, T).unwrap();
    assert!(r.ok);
    assert_eq!(r.status, Some(sample()));

    let cases = [
        (
            Request::ArrayFail {
                array: "array0".into(),
                member: "/dev/nvme1n1".into(),
            },
            "failed /dev/nvme1n1 in array0",
        ),
        (
            Request::ArrayAddSpare {
                array: "array0".into(),
                path: "/dev/nvme5n1".into(),
            },
            "spare /dev/nvme5n1 added to array0",
        ),
        (
            Request::ArrayReplace {
                array: "array0".into(),
                old: "/dev/nvme2n1".into(),
                new: "/dev/nvme6n1".into(),
            },
            "replacing /dev/nvme2n1 with /dev/nvme6n1 in array0",
        ),
        (
            Request::ArrayScrub {
                array: "array0".into(),
            },
            "scrub of array0 started",
        ),
        (
            Request::CcSet {
                param: "rate_mbps".into(),
                value: 1600.0,
            },
            "fixed rate_mbps: 1000 -> 1600",
        ),
        (Request::CcShow, "algorithm: fixed"),
        (
            Request::ArrayStart {
                array: "array0".into(),
                accept_dirty_degraded: true,
            },
            "started array0 (accept dirty degraded: true)",
        ),
    ];
    for (req, want) in &cases {
        let r = call(&dir.sock(), req, T).unwrap();
        assert_eq!(
            r,
            Response {
                ok: true,
                message: (*want).into(),
                status: None
            }
        );
    }
    let r = call(
        &dir.sock(),
        &Request::ArrayScrub {
            array: "nope".into(),
        },
        T,
    )
    .unwrap();
    assert!(!r.ok);
    assert_eq!(r.message, "no array named nope");
    assert_eq!(fake.log.lock().unwrap().len(), 7);
    let r = call(
        &dir.sock(),
        &Request::CcSet {
            param: "speed".into(),
            value: 1.0,
        },
        T,
    )
    .unwrap();
    assert!(!r.ok);
    assert_eq!(r.message, "unknown parameter `speed` for algorithm `fixed`");
}

#[test]
fn wire_format_is_tagged_json() {
    let req = Request::ArrayAddSpare {
        array: "a".into(),
        path: "/dev/x".into(),
    };
    assert_eq!(
        serde_json::to_string(&req).unwrap(),
        r#"{"op":"array-add-spare","array":"a","path":"/dev/x"}"#
    );
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"op":"status"}"#).unwrap(),
        Request::Status
    );
    assert_eq!(
        serde_json::to_string(&Request::CcSet {
            param: "rate_mbps".into(),
            value: 200.5
        })
        .unwrap(),
        r#"{"op":"cc-set","param":"rate_mbps","value":200.5}"#
    );
    assert_eq!(
        serde_json::to_string(&Request::ArrayStart {
            array: "a".into(),
            accept_dirty_degraded: true
        })
        .unwrap(),
        r#"{"op":"array-start","array":"a","accept_dirty_degraded":true}"#
    );
    // Without the flag: a plain retry of the assembly.
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"op":"array-start","array":"a"}"#).unwrap(),
        Request::ArrayStart {
            array: "a".into(),
            accept_dirty_degraded: false
        }
    );
    // A report from a daemon that predates the write-hole fields still reads.
    let mut old = serde_json::to_value(sample()).unwrap();
    for k in ["write_hole_policy", "refused", "exposure"] {
        old["arrays"][0].as_object_mut().unwrap().remove(k);
    }
    let back: StatusReport = serde_json::from_value(old).unwrap();
    assert_eq!(back, sample());
    // Unknown fields are refused, not ignored.
    assert!(serde_json::from_str::<Request>(r#"{"op":"array-scrub","array":"a","x":1}"#).is_err());
    // A NaN RTT travels as null and comes back as NaN.
    let mut s = sample();
    s.controllers[0].queues[1].rtt_us = f64::NAN;
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains(r#""rtt_us":null"#), "{text}");
    let back: StatusReport = serde_json::from_str(&text).unwrap();
    assert!(back.controllers[0].queues[1].rtt_us.is_nan());
    // A report from a daemon that predates the net-RTT fields reads them as NaN.
    let mut old = serde_json::to_value(sample()).unwrap();
    for k in ["raw_rtt_us", "net_rtt_us", "base_rtt_us"] {
        old["controllers"][0]["queues"][1]
            .as_object_mut()
            .unwrap()
            .remove(k);
    }
    let back: StatusReport = serde_json::from_value(old).unwrap();
    let q = &back.controllers[0].queues[1];
    assert!(q.raw_rtt_us.is_nan() && q.net_rtt_us.is_nan() && q.base_rtt_us.is_nan());
    assert_eq!(q.rtt_us, 18.5);
}

#[test]
fn malformed_requests_are_answered() {
    let dir = TempDir::new("malformed");
    let (_server, fake) = start(&dir);
    for line in [
        &b"{not json\n"[..],
        b"{\"op\":\"format-disk\"}\n",
        b"{\"op\":\"array-fail\",\"array\":\"array0\"}\n",
        b"\xff\xfe\n",
        b"\n",
    ] {
        let r = raw(&dir.sock(), line);
        assert!(!r.ok);
        assert!(r.message.starts_with("bad request: "), "{}", r.message);
    }
    // CRLF and a missing final newline are tolerated.
    assert!(raw(&dir.sock(), b"{\"op\":\"status\"}\r\n").ok);
    let mut s = UnixStream::connect(dir.sock()).unwrap();
    s.write_all(b"{\"op\":\"status\"}").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    assert!(serde_json::from_str::<Response>(&line).unwrap().ok);
    assert!(fake.log.lock().unwrap().is_empty());
}

#[test]
fn oversize_line_is_refused_and_server_survives() {
    let dir = TempDir::new("oversize");
    let (_server, _) = start(&dir);
    let big = vec![b'a'; MAX_REQUEST_BYTES + 10_000];
    let r = raw(&dir.sock(), &big);
    assert!(!r.ok);
    assert_eq!(
        r.message,
        format!("bad request: request line longer than {MAX_REQUEST_BYTES} bytes")
    );
    // Exactly at the limit is read (and is bad JSON, not oversize).
    let mut edge = vec![b' '; MAX_REQUEST_BYTES];
    edge.push(b'\n');
    let r = raw(&dir.sock(), &edge);
    assert!(r.message.starts_with("bad request: EOF"), "{}", r.message);
    assert!(call(&dir.sock(), &Request::Status, T).unwrap().ok);
}

#[test]
fn silent_client_does_not_wedge_the_server() {
    let dir = TempDir::new("silent");
    let fake: Arc<dyn Management> = Arc::new(Fake::default());
    let _server =
        MgmtServer::start_with_timeout(&dir.sock(), fake, Duration::from_millis(300)).unwrap();
    let silent = UnixStream::connect(dir.sock()).unwrap();
    let t0 = Instant::now();
    assert!(call(&dir.sock(), &Request::Status, T).unwrap().ok);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // The silent client was told why it was dropped.
    let mut line = String::new();
    BufReader::new(silent).read_line(&mut line).unwrap();
    let r: Response = serde_json::from_str(&line).unwrap();
    assert_eq!(
        r.message,
        "bad request: no complete request line within 300ms"
    );
}

#[test]
fn drop_stops_promptly_and_removes_the_socket() {
    let dir = TempDir::new("drop");
    let (server, _) = start(&dir);
    let _silent = UnixStream::connect(dir.sock()).unwrap();
    std::thread::sleep(Duration::from_millis(100)); // let the server pick the client up
    let t0 = Instant::now();
    drop(server);
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(!dir.sock().exists());
    let err = call(&dir.sock(), &Request::Status, T).unwrap_err();
    assert!(matches!(err, MgmtError::Unreachable { .. }));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach raidline at {}: ",
            dir.sock().display()
        )),
        "{text}"
    );
    assert!(text.ends_with("— is the daemon running?"), "{text}");
}

#[test]
fn a_second_server_on_a_live_socket_is_refused() {
    let dir = TempDir::new("second");
    let (_first, _) = start(&dir);
    let err = MgmtServer::start(&dir.sock(), Arc::new(Fake::default())).unwrap_err();
    assert!(matches!(err, MgmtError::AlreadyRunning { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("another raidline is running on {}", dir.sock().display())
    );
    // The first still serves.
    assert!(call(&dir.sock(), &Request::Status, T).unwrap().ok);
}

#[test]
fn stale_socket_is_replaced_and_other_files_are_not() {
    let dir = TempDir::new("stale");
    drop(UnixListener::bind(dir.sock()).unwrap()); // a crashed daemon's leftover
    assert!(dir.sock().exists());
    let (server, _) = start(&dir);
    assert!(call(&dir.sock(), &Request::Status, T).unwrap().ok);
    drop(server);

    std::fs::write(dir.sock(), b"not a socket").unwrap();
    let err = MgmtServer::start(&dir.sock(), Arc::new(Fake::default())).unwrap_err();
    assert!(matches!(err, MgmtError::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read(dir.sock()).unwrap(), b"not a socket");
}

#[test]
fn missing_parent_directory_is_created() {
    let dir = TempDir::new("parent");
    let path = dir.0.join("run/raidline/raidline.sock");
    let server = MgmtServer::start(&path, Arc::new(Fake::default())).unwrap();
    assert!(call(&path, &Request::Status, T).unwrap().ok);
    drop(server);
    assert!(!path.exists());
}

#[test]
fn a_panicking_handler_is_an_error_not_an_outage() {
    let dir = TempDir::new("panic");
    let (_server, _) = start(&dir);
    let r = call(
        &dir.sock(),
        &Request::ArrayFail {
            array: "array0".into(),
            member: "panic".into(),
        },
        T,
    )
    .unwrap();
    assert!(!r.ok);
    assert!(r.message.starts_with("internal error"), "{}", r.message);
    assert!(call(&dir.sock(), &Request::Status, T).unwrap().ok);
}

#[test]
fn client_reports_a_garbage_answer() {
    let dir = TempDir::new("garbage");
    let listener = UnixListener::bind(dir.sock()).unwrap();
    let peer = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut line = String::new();
        let mut r = BufReader::new(s);
        r.read_line(&mut line).unwrap();
        r.get_mut().write_all(b"hello\n").unwrap();
        line
    });
    let err = call(&dir.sock(), &Request::Status, T).unwrap_err();
    assert!(matches!(err, MgmtError::BadResponse { .. }), "{err}");
    assert_eq!(peer.join().unwrap(), "{\"op\":\"status\"}\n");
}

#[test]
fn client_times_out_on_a_silent_daemon() {
    let dir = TempDir::new("timeout");
    let _listener = UnixListener::bind(dir.sock()).unwrap(); // accepts into the backlog, never answers
    let t0 = Instant::now();
    let err = call(&dir.sock(), &Request::Status, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(err, MgmtError::Exchange { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn rendered_status_names_the_key_fields() {
    let text = render_status(&sample());
    for want in [
        "raidline 0.1.0, up 01:02:03",
        "listening on 0.0.0.0:4420",
        "iSCSI sessions: 1",
        "iqn.1993-08.org.debian:01:host1 -> iqn.2026-12.io.raidline:array0  Normal session, \
         ISID 80002338d000 TSIH 1, from 10.0.0.2:40000, poller 0",
        "array0 [rebuilding]  uuid 3f1c2a44-9b2e-4c1d-8a55-0e6b7c9d1f20",
        "capacity 3.00 TiB, chunk 64.00 KiB, parity cpu-avx2, write-hole protection on, \
         write hole: degraded",
        "role  state       device",
        "1     rebuilding  /dev/nvme4n1",
        "spares: none",
        "stripes written: 12 whole, 3 read-modify-write, 4 reconstruct-write",
        "rebuild: 25.0 % (1.00 TiB of 4.00 TiB) at 200.00 MiB/s, 04:22:09 left",
        "nqn.2026-11.io.raidline:array0",
        "serial RL3F1C2A449B2E, model Raidline RAID-5",
        "hosts: nqn.2014-08.org.nvmexpress:uuid:0000",
        "must authenticate: nqn.2014-08.org.nvmexpress:uuid:0000 (sha256; ffdhe2048)",
        "1     array array0  4096   3.00 TiB  123456  654321  482.25 MiB  2.50 GiB",
        "cntlid 7  nqn.2014-08.org.nvmexpress:uuid:0000 from 192.168.122.1:51234  \
         to nqn.2026-11.io.raidline:array0  kato 10000 ms  auth hmac(sha256) ffdhe2048 bidirectional",
        "qid  depth  in-flight  poller  rate        rtt",
        "1    128    17         1       1.16 GiB/s  18.5 us",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("scrub:"));
}

/// A refused array (with what its superblocks say) and an array started over an exposed stop.
pub(crate) fn refused_and_exposed() -> StatusReport {
    let mut r = sample();
    let mut refused = r.arrays[0].clone();
    refused.name = "array1".into();
    refused.state = "refused".into();
    refused.refused = Some(
        "unclean stop and role(s) [1] missing with no log covering it (the log was switched off)"
            .into(),
    );
    refused.members[1] = MemberStatus {
        role: 1,
        reason: None,
        reason_class: None,
        path: "(missing)".into(),
        state: "missing".into(),
    };
    refused.rebuild = None;
    refused.parity_engine = String::new();
    refused.write_hole_policy = "always".into();
    let exposed = &mut r.arrays[0];
    exposed.state = "degraded".into();
    exposed.rebuild = None;
    exposed.exposure = Some(ExposureStatus {
        reason: "the log was switched off".into(),
        missing: vec![1],
        ranges: (0..20)
            .map(|i| ByteRange {
                start: i * (128 << 20),
                end: i * (128 << 20) + (64 << 20),
            })
            .collect(),
    });
    r.arrays.push(refused);
    r.subsystems[0].namespaces.push(NamespaceStatus {
        nsid: 2,
        backing: "array array1".into(),
        block_size: 4096,
        blocks: 1 << 20,
        active: false,
        read_ops: 0,
        write_ops: 0,
        read_bytes: 0,
        write_bytes: 0,
    });
    r
}

#[test]
fn rendered_status_shows_refused_and_exposed_arrays() {
    let text = render_status(&refused_and_exposed());
    for want in [
        "array0 [degraded, EXPOSED]  uuid 3f1c2a44-9b2e-4c1d-8a55-0e6b7c9d1f20",
        "    WRITE HOLE EXPOSED: started over an unclean stop with role(s) 1 missing that no log \
         covered (the log was switched off); the missing member's data in 20 range(s) may read \
         back wrong until a rebuild rewrites them:",
        "      bytes 0..67108864 (64.00 MiB), LBA 0..16384\n",
        "      bytes 134217728..201326592 (64.00 MiB), LBA 32768..49152\n",
        "      … and 4 more (raidline status --json lists them all)\n",
        "array1 [refused]  uuid 3f1c2a44",
        "    refused at start: unclean stop and role(s) [1] missing with no log covering it (the \
         log was switched off)\n",
        "    not running: its namespaces serve no I/O until `raidline array start array1` \
         assembles it\n",
        "capacity 3.00 TiB, chunk 64.00 KiB, parity -, write-hole protection on, write hole: \
         always\n",
        "1     missing  (missing)",
        "2     array array1 (inactive)  4096",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // The 16th range is listed, the 17th is not.
    assert!(text.contains("LBA 491520..507904\n"), "{text}");
    assert!(!text.contains("LBA 524288..540672"), "{text}");
    // The JSON report carries every range, and reads back.
    let json = serde_json::to_string(&refused_and_exposed()).unwrap();
    assert!(json.contains(r#""state":"refused""#), "{json}");
    assert!(
        json.contains(r#""start":2550136832,"end":2617245696"#),
        "{json}"
    );
    let back: StatusReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, refused_and_exposed());
    // A healthy array has no exposure line.
    assert!(!render_status(&sample()).contains("EXPOSED"));
}

#[test]
fn an_iscsi_session_reads_the_same_in_its_login_and_end_lines() {
    let mut s = IscsiSessionStatus {
        session_type: "Normal".into(),
        initiator: "iqn.2026-12.host:a".into(),
        target: "iqn.2026-12.io.raidline:array0".into(),
        isid: "00023d000001".into(),
        tsih: 3,
        peer: "10.0.0.2:41234".into(),
        poller: 0,
    };
    assert_eq!(
        s.to_string(),
        "iSCSI Normal session 00023d000001 (TSIH 3) of iqn.2026-12.host:a from 10.0.0.2:41234 \
         to iqn.2026-12.io.raidline:array0"
    );
    s.session_type = "Discovery".into();
    s.target.clear();
    assert!(s.to_string().ends_with(" to (discovery)"), "{s}");
}
