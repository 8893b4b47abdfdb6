//! `raidline-initiator`: a user-space NVMe-oF/RDMA host — discovery, identify, read/write
//! to and from files, pattern verify, and an SPDK-perf-like load generator — over verbs + RDMA
//! CM, without the kernel's nvme-rdma.
//!
//! This file is the only place that reads the command line, the environment and files
//! (/etc/nvme/hostnqn, /etc/nvme/hostid, /etc/machine-id, /proc/self/stat, the data files);
//! everything else is `raidline_initiator::commands`.
//!
//! Exit status: 0 success; 1 the command failed (an error, or verify found mismatches);
//! 2 usage error; 3 no usable RDMA (library, kernel support or device missing).

use std::io::IsTerminal as _;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use raidline_fabric::verbs::VerbsFabric;
use raidline_fabric::FabricError;
use raidline_initiator::commands::{self, Target};
use raidline_initiator::perf::{Live, PerfConfig};
#[cfg(test)]
use raidline_initiator::types::format_uuid;
use raidline_initiator::types::parse_uuid;
use raidline_initiator::{Error, HostIdentity, Lba, Nsid};
use raidline_proto::text::Nqn;

const USAGE: &str = "\
usage: raidline-initiator COMMAND -a ADDR [options]

commands:
  discover                     read the discovery log page
  identify  -n NQN             Identify Controller and every active namespace
  read      -n NQN --lba N --size BYTES -o FILE
                               read BYTES from LBA N into FILE
  write     -n NQN --lba N -i FILE
                               write FILE at LBA N (last block zero-padded)
  verify    -n NQN [--lba N] [--size BYTES | --blocks N] [--seed S]
                               write a seeded pattern, flush, read it back, list bad LBAs
  write-zeroes -n NQN --lba N --blocks N
                               Write Zeroes over the range
  trim      -n NQN --lba N --blocks N
                               Dataset Management, deallocate the range
  perf      -n NQN [--qd 32] [--bs 4k] [--rw randread] [--mix 70] [--time 10]
            [--queues 1] [--range BYTES] [--seed S]
                               load generator; --rw read|write|randread|randwrite|rw|randrw,
                               --mix = read percentage for rw/randrw; asynchronous
                               events received meanwhile are printed

options:
  -a, --addr IP          target address (required)
  -s, --port PORT        RDMA service id (default 4420)
  -d, --device NAME      RDMA device (default: the first one)
  -n, --nqn NQN          subsystem NQN
      --nsid N           namespace (default 1)
      --hostnqn NQN      host NQN (default /etc/nvme/hostnqn, else from the host id)
      --hostid UUID      host id (default /etc/nvme/hostid, else from /etc/machine-id)
      --timeout MS       command timeout (default 30000)
      --kato MS          keep-alive timeout (default 5000; 0 = none)
sizes take k, m, g suffixes (powers of 1024)";

#[derive(Debug)]
struct Args {
    command: String,
    addr: Option<IpAddr>,
    port: u16,
    device: Option<String>,
    nqn: Option<String>,
    nsid: u32,
    hostnqn: Option<String>,
    hostid: Option<String>,
    timeout_ms: u64,
    kato_ms: u64,
    lba: u64,
    size: Option<u64>,
    blocks: Option<u64>,
    input: Option<String>,
    output: Option<String>,
    seed: u64,
    qd: u16,
    bs: u64,
    rw: String,
    mix: u8,
    time: f64,
    queues: u16,
    range: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_lowercase() {
                'k' => 1u64 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                _ => return Err(format!("bad size suffix in {s:?}")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|e| format!("{s:?}: {e}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let command = it.next().ok_or("no command")?;
    if command == "-h" || command == "--help" || command == "help" {
        return Err(String::new());
    }
    let mut a = Args {
        command,
        addr: None,
        port: 4420,
        device: None,
        nqn: None,
        nsid: 1,
        hostnqn: None,
        hostid: None,
        timeout_ms: 30_000,
        kato_ms: 5_000,
        lba: 0,
        size: None,
        blocks: None,
        input: None,
        output: None,
        seed: 1,
        qd: 32,
        bs: 4096,
        rw: "randread".into(),
        mix: 70,
        time: 10.0,
        queues: 1,
        range: 0,
    };
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "-a" | "--addr" => a.addr = Some(val()?.parse().map_err(|e| format!("{flag}: {e}"))?),
            "-s" | "--port" => a.port = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "-d" | "--device" => a.device = Some(val()?),
            "-n" | "--nqn" => a.nqn = Some(val()?),
            "--nsid" => a.nsid = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--hostnqn" => a.hostnqn = Some(val()?),
            "--hostid" => a.hostid = Some(val()?),
            "--timeout" => a.timeout_ms = num(val()?)?,
            "--kato" => a.kato_ms = num(val()?)?,
            "--lba" => a.lba = num(val()?)?,
            "--size" => a.size = Some(parse_size(&val()?)?),
            "--blocks" => a.blocks = Some(num(val()?)?),
            "-i" | "--input" => a.input = Some(val()?),
            "-o" | "--output" => a.output = Some(val()?),
            "--seed" => a.seed = num(val()?)?,
            "--qd" => a.qd = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--bs" => a.bs = parse_size(&val()?)?,
            "--rw" => a.rw = val()?,
            "--mix" => a.mix = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--time" => a.time = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--queues" => a.queues = val()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--range" => a.range = parse_size(&val()?)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(a)
}

/// The host identity nvme-cli would use: /etc/nvme/hostid and /etc/nvme/hostnqn when present,
/// else an id derived from /etc/machine-id (stable across runs) and the UUID-form NQN.
fn host_identity(a: &Args) -> Result<HostIdentity, String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let hostid = match a.hostid.clone().or_else(|| read("/etc/nvme/hostid")) {
        Some(s) => parse_uuid(&s).ok_or_else(|| format!("host id {s:?} is not a UUID"))?,
        None => {
            let m = read("/etc/machine-id").unwrap_or_default();
            let mut id = parse_uuid(&m).unwrap_or([0x5a; 16]);
            // Make it an RFC 4122 version 4 / variant 1 UUID, as nvme gen-hostnqn does.
            id[6] = (id[6] & 0x0F) | 0x40;
            id[8] = (id[8] & 0x3F) | 0x80;
            id
        }
    };
    let mut host = HostIdentity::from_uuid(hostid);
    if let Some(n) = a.hostnqn.clone().or_else(|| read("/etc/nvme/hostnqn")) {
        host.hostnqn = Nqn::new(&n).map_err(|e| format!("host NQN {n:?}: {e}"))?;
    }
    Ok(host)
}

/// User + system CPU time of this process so far, every thread included (`getrusage`, in
/// microseconds, whatever the kernel's tick).
fn cpu_time() -> Option<Duration> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let us = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().max(0) as u64)
            + Duration::from_micros(t.tv_usec().clamp(0, 999_999) as u64)
    };
    Some(us(u.user_time()) + us(u.system_time()))
}

enum Failure {
    Usage(String),
    NoRdma(String),
    Failed(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::Fabric(
                f @ (FabricError::LibraryMissing(_)
                | FabricError::NoKernelSupport
                | FabricError::NoDevice(_)),
            ) => Failure::NoRdma(f.to_string()),
            e => Failure::Failed(e.to_string()),
        }
    }
}

fn nqn(a: &Args) -> Result<Nqn, Failure> {
    let n = a
        .nqn
        .as_deref()
        .ok_or_else(|| Failure::Usage(format!("{} needs -n NQN", a.command)))?;
    Nqn::new(n).map_err(|e| Failure::Usage(format!("NQN {n:?}: {e}")))
}

fn run(a: Args) -> Result<(), Failure> {
    let ip = a
        .addr
        .ok_or_else(|| Failure::Usage("-a ADDR is required".into()))?;
    let host = host_identity(&a).map_err(Failure::Usage)?;
    let t = Target {
        addr: SocketAddr::new(ip, a.port),
        host,
        admin_timeout: Duration::from_millis(a.timeout_ms),
        io_timeout: Duration::from_millis(a.timeout_ms),
        kato: Duration::from_millis(a.kato_ms),
    };
    let fabric = VerbsFabric::open(a.device.as_deref()).map_err(Error::from)?;
    let nsid = Nsid(a.nsid);
    match a.command.as_str() {
        "discover" => {
            let log = commands::discover(fabric, &t)?;
            print!("{}", commands::format_discovery(&log));
        }
        "identify" => {
            let o = t.options(nqn(&a)?, 1, 32, 128 * 1024);
            let text = commands::with_controller(fabric, t.addr, o, commands::identify)?;
            print!("{text}");
        }
        "read" => {
            let size = a
                .size
                .ok_or_else(|| Failure::Usage("read needs --size".into()))?;
            let out = a
                .output
                .clone()
                .ok_or_else(|| Failure::Usage("read needs -o FILE".into()))?;
            let o = t.options(nqn(&a)?, 1, 32, 128 * 1024);
            let data = commands::with_controller(fabric, t.addr, o, |c| {
                commands::read(c, nsid, Lba(a.lba), size)
            })?;
            std::fs::write(&out, &data).map_err(|e| Failure::Failed(format!("{out}: {e}")))?;
            println!("read {} bytes from LBA {} into {out}", data.len(), a.lba);
        }
        "write" => {
            let inp = a
                .input
                .clone()
                .ok_or_else(|| Failure::Usage("write needs -i FILE".into()))?;
            let data = std::fs::read(&inp).map_err(|e| Failure::Failed(format!("{inp}: {e}")))?;
            let o = t.options(nqn(&a)?, 1, 32, 128 * 1024);
            commands::with_controller(fabric, t.addr, o, |c| {
                commands::write(c, nsid, Lba(a.lba), &data)
            })?;
            println!("wrote {} bytes from {inp} at LBA {}", data.len(), a.lba);
        }
        "verify" => {
            let o = t.options(nqn(&a)?, 1, 32, 128 * 1024);
            let r = commands::with_controller(fabric, t.addr, o, |c| {
                let blocks = match (a.blocks, a.size) {
                    (Some(b), _) => b,
                    (None, Some(s)) => {
                        let bs = u64::from(c.namespace(nsid)?.block_size);
                        s.div_ceil(bs)
                    }
                    (None, None) => 0,
                };
                commands::verify(c, nsid, Lba(a.lba), blocks, a.seed)
            })?;
            let mib = (r.blocks * u64::from(r.block_size)) as f64 / 1048576.0;
            println!(
                "verify: {} blocks of {} bytes from LBA {} (seed {}): write {:.2} s ({:.1} MiB/s), read {:.2} s ({:.1} MiB/s), {} mismatching LBAs",
                r.blocks,
                r.block_size,
                a.lba,
                a.seed,
                r.write_time.as_secs_f64(),
                mib / r.write_time.as_secs_f64().max(1e-9),
                r.read_time.as_secs_f64(),
                mib / r.read_time.as_secs_f64().max(1e-9),
                r.mismatches.len()
            );
            if !r.mismatches.is_empty() {
                let shown: Vec<String> = r.mismatches.iter().take(64).map(u64::to_string).collect();
                println!(
                    "mismatching LBAs: {}{}",
                    shown.join(" "),
                    if r.mismatches.len() > 64 { " ..." } else { "" }
                );
                return Err(Failure::Failed("data mismatch".into()));
            }
        }
        "write-zeroes" | "trim" => {
            let blocks = a
                .blocks
                .ok_or_else(|| Failure::Usage(format!("{} needs --blocks", a.command)))?;
            let o = t.options(nqn(&a)?, 1, 32, 128 * 1024);
            let trim = a.command == "trim";
            commands::with_controller(fabric, t.addr, o, |c| {
                if trim {
                    commands::trim(c, nsid, Lba(a.lba), blocks)
                } else {
                    commands::write_zeroes(c, nsid, Lba(a.lba), blocks, false)
                }
            })?;
            println!("{}: {blocks} blocks from LBA {}", a.command, a.lba);
        }
        "perf" => {
            let (random, read_percent) = match a.rw.as_str() {
                "read" => (false, 100),
                "write" => (false, 0),
                "randread" => (true, 100),
                "randwrite" => (true, 0),
                "rw" => (false, a.mix),
                "randrw" => (true, a.mix),
                other => return Err(Failure::Usage(format!("--rw {other}"))),
            };
            if !(a.time > 0.0 && a.time < 1e6) {
                return Err(Failure::Usage(format!("--time {}", a.time)));
            }
            let bs = u32::try_from(a.bs).map_err(|_| Failure::Usage(format!("--bs {}", a.bs)))?;
            let cfg = PerfConfig {
                queue_depth: a.qd,
                block_size: bs,
                read_percent,
                random,
                duration: Duration::from_secs_f64(a.time),
                range_blocks: 0,
                seed: a.seed,
            };
            let depth = a.qd.saturating_add(1).max(2);
            let o = t.options(nqn(&a)?, a.queues.max(1), depth, bs.max(4096));
            let range = a.range;
            let tty = std::io::stderr().is_terminal();
            let long = a.time >= 3.0;
            let mut progress = |elapsed: Duration, live: &Live| {
                if !long {
                    return;
                }
                use std::sync::atomic::Ordering::Relaxed;
                let s = elapsed.as_secs_f64().max(1e-9);
                let line = format!(
                    "[{:5.1}s] {} ios  {:.0} IOPS  {:.2} MB/s  errors {}",
                    s,
                    live.ios.load(Relaxed),
                    live.ios.load(Relaxed) as f64 / s,
                    live.bytes.load(Relaxed) as f64 / 1e6 / s,
                    live.errors.load(Relaxed)
                );
                if tty {
                    eprint!("\r{line}   ");
                } else {
                    eprintln!("{line}");
                }
            };
            let cpu0 = cpu_time();
            let (r, queues) = commands::with_controller(fabric, t.addr, o, |c| {
                let mut cfg = cfg.clone();
                if range > 0 {
                    let bsz = u64::from(c.namespace(nsid)?.block_size);
                    cfg.range_blocks = range / bsz;
                }
                let r = commands::perf(c, nsid, &cfg, &mut progress)?;
                c.service()?;
                for e in c.admin.take_events() {
                    println!("{}", commands::format_event(&e));
                }
                for l in c.take_changed_namespaces() {
                    println!("{}", commands::format_changed(&l));
                }
                Ok((r, c.io.len()))
            })?;
            let cpu = cpu0.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
            if tty && long {
                eprintln!();
            }
            print!("{}", commands::format_perf(&cfg, queues, &r, cpu));
            if r.errors > 0 {
                return Err(Failure::Failed(format!("{} I/O errors", r.errors)));
            }
        }
        other => return Err(Failure::Usage(format!("unknown command {other}"))),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("raidline-initiator: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("raidline-initiator: {e}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::NoRdma(e)) => {
            eprintln!("raidline-initiator: {e}");
            ExitCode::from(3)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("raidline-initiator: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn sizes_and_flags_parse() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("128M"), Ok(128 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("4x").is_err());
        assert!(parse_size("99999999999999999999g").is_err());
        let a = args(
            "perf -a 10.0.2.15 -n nqn.x --qd 16 --bs 64k --rw randrw --mix 30 --time 2 --queues 2",
        )
        .unwrap();
        assert_eq!(a.command, "perf");
        assert_eq!(a.addr, Some("10.0.2.15".parse().unwrap()));
        assert_eq!((a.qd, a.bs, a.mix, a.queues), (16, 65536, 30, 2));
        assert_eq!(a.rw, "randrw");
        assert!(args("verify -a 1.2.3.4 --bogus").is_err());
        assert!(args("verify -a").is_err());
        assert!(args("verify -a notanip").is_err());
        assert_eq!(args("--help").err(), Some(String::new()));
    }

    #[test]
    fn host_identity_prefers_flags() {
        let a = args("identify -a 1.2.3.4 --hostid 5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f --hostnqn nqn.2014-08.org.nvmexpress:uuid:test").unwrap();
        let h = host_identity(&a).unwrap();
        assert_eq!(
            format_uuid(&h.hostid),
            "5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f"
        );
        assert_eq!(h.hostnqn.as_str(), "nqn.2014-08.org.nvmexpress:uuid:test");
        let bad = args("identify -a 1.2.3.4 --hostid nope").unwrap();
        assert!(host_identity(&bad).is_err());
    }
}
