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
use std::path::PathBuf;

use clap::{CommandFactory as _, Parser};
use raidline_auth::Secret;
use raidline_initiator::controller::HostSecrets;
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

const AFTER_HELP: &str = "sizes take k, m, g, t suffixes (powers of 1024)
exit status: 0 success, 1 the command failed (or verify found mismatches), 2 usage error, 3 no usable RDMA";

/// A user-space NVMe-oF/RDMA host: discovery, identify, read/write, verify and a load generator
/// over verbs and RDMA CM, without the kernel's nvme-rdma.
#[derive(Debug, Parser)]
#[command(name = "raidline-initiator", version, after_help = AFTER_HELP, disable_help_subcommand = true)]
struct Cli {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: Cmd,
}

/// Where and who: options every command takes, before or after its name.
#[derive(Debug, clap::Args)]
struct Conn {
    /// Target address (required)
    #[arg(short = 'a', long, global = true, value_name = "IP")]
    addr: Option<IpAddr>,
    /// RDMA service id
    #[arg(short = 's', long, global = true, default_value_t = 4420)]
    port: u16,
    /// RDMA device [default: the first one]
    #[arg(short = 'd', long, global = true, value_name = "NAME")]
    device: Option<String>,
    /// Host NQN [default: /etc/nvme/hostnqn, else from the host id]
    #[arg(long, global = true, value_name = "NQN")]
    hostnqn: Option<String>,
    /// Host id [default: /etc/nvme/hostid, else from /etc/machine-id]
    #[arg(long, global = true, value_name = "UUID", value_parser = uuid)]
    hostid: Option<[u8; 16]>,
    /// Command timeout in milliseconds
    #[arg(
        long = "timeout",
        global = true,
        value_name = "MS",
        default_value_t = 30_000
    )]
    timeout_ms: u64,
    /// Keep-alive timeout in milliseconds (0: none)
    #[arg(
        long = "kato",
        global = true,
        value_name = "MS",
        default_value_t = 5_000
    )]
    kato_ms: u64,
    /// DH-HMAC-CHAP secret (DHHC-1:…, as `nvme connect --dhchap-secret`), for targets that
    /// require in-band authentication
    #[arg(long, global = true, value_name = "SECRET", value_parser = secret)]
    dhchap_secret: Option<Secret>,
    /// The controller's DH-HMAC-CHAP secret: authenticate the target too
    #[arg(long, global = true, value_name = "SECRET", value_parser = secret)]
    dhchap_ctrl_secret: Option<Secret>,
}

/// The namespace a command works on.
#[derive(Debug, clap::Args)]
struct Ns {
    /// Subsystem NQN
    #[arg(short = 'n', long, value_name = "NQN", value_parser = nqn)]
    nqn: Nqn,
    /// Namespace id
    #[arg(long, default_value_t = 1)]
    nsid: u32,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Read the discovery log page
    Discover,
    /// Identify Controller and every active namespace
    Identify {
        #[command(flatten)]
        ns: Ns,
    },
    /// Read BYTES from LBA N into FILE
    Read {
        #[command(flatten)]
        ns: Ns,
        /// First LBA
        #[arg(long, default_value_t = 0)]
        lba: u64,
        /// Bytes to read
        #[arg(long, value_name = "BYTES", value_parser = parse_size)]
        size: u64,
        /// Where to write them
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Write FILE at LBA N (the last block zero-padded)
    Write {
        #[command(flatten)]
        ns: Ns,
        /// First LBA
        #[arg(long, default_value_t = 0)]
        lba: u64,
        /// The data
        #[arg(short = 'i', long = "input", value_name = "FILE")]
        input: PathBuf,
    },
    /// Write a seeded pattern, flush, read it back, list bad LBAs
    Verify {
        #[command(flatten)]
        ns: Ns,
        /// First LBA
        #[arg(long, default_value_t = 0)]
        lba: u64,
        /// Bytes to verify
        #[arg(long, value_name = "BYTES", value_parser = parse_size, conflicts_with = "blocks")]
        size: Option<u64>,
        /// Blocks to verify
        #[arg(long)]
        blocks: Option<u64>,
        /// Pattern seed
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Write Zeroes over the range
    WriteZeroes {
        #[command(flatten)]
        ns: Ns,
        /// First LBA
        #[arg(long, default_value_t = 0)]
        lba: u64,
        /// Blocks
        #[arg(long)]
        blocks: u64,
    },
    /// Dataset Management: deallocate the range
    Trim {
        #[command(flatten)]
        ns: Ns,
        /// First LBA
        #[arg(long, default_value_t = 0)]
        lba: u64,
        /// Blocks
        #[arg(long)]
        blocks: u64,
    },
    /// Load generator (SPDK perf-like); asynchronous events received meanwhile are printed
    Perf {
        #[command(flatten)]
        ns: Ns,
        /// Queue depth per queue
        #[arg(long, default_value_t = 32)]
        qd: u16,
        /// Block size
        #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "4k")]
        bs: u64,
        /// Access pattern
        #[arg(long, value_enum, default_value_t = Pattern::Randread)]
        rw: Pattern,
        /// Read percentage for rw and randrw
        #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u8).range(0..=100))]
        mix: u8,
        /// Seconds to run
        #[arg(long, default_value_t = 10.0, value_parser = seconds)]
        time: f64,
        /// I/O queues
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        queues: u16,
        /// Bytes of the namespace to spread I/O over (0: all of it)
        #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "0")]
        range: u64,
        /// Random seed
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Print a shell completion script
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff)
    Man,
}

/// The access pattern of `perf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Pattern {
    Read,
    Write,
    Randread,
    Randwrite,
    Rw,
    Randrw,
}

fn uuid(s: &str) -> Result<[u8; 16], String> {
    parse_uuid(s).ok_or_else(|| format!("{s:?} is not a UUID"))
}

fn nqn(s: &str) -> Result<Nqn, String> {
    Nqn::new(s).map_err(|e| e.to_string())
}

fn secret(s: &str) -> Result<Secret, String> {
    Secret::parse(s).map_err(|e| e.to_string())
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1e6 => Ok(t),
        _ => Err(format!(
            "{s:?} is not a duration in seconds (0 < T < 1000000)"
        )),
    }
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

/// The host identity nvme-cli would use: /etc/nvme/hostid and /etc/nvme/hostnqn when present,
/// else an id derived from /etc/machine-id (stable across runs) and the UUID-form NQN.
fn host_identity(a: &Conn) -> Result<HostIdentity, String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let from_file = || read("/etc/nvme/hostid").map(|s| parse_uuid(&s).ok_or(s));
    let hostid = match a.hostid.map(Ok).or_else(from_file) {
        Some(Ok(id)) => id,
        Some(Err(s)) => return Err(format!("/etc/nvme/hostid: {s:?} is not a UUID")),
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

/// Progress of read, write and verify: an indicatif bar per phase on stderr when it is a
/// terminal, nothing otherwise (the result lines stay the same either way).
fn progress_bar() -> impl FnMut(&'static str, u64, u64) {
    use indicatif::{ProgressBar, ProgressStyle};
    let tty = std::io::stderr().is_terminal();
    let mut bar: Option<(&'static str, ProgressBar)> = None;
    move |phase, done, total| {
        if !tty {
            return;
        }
        if bar.as_ref().map(|(p, _)| *p) != Some(phase) {
            if let Some((_, b)) = bar.take() {
                b.finish();
            }
            let style = ProgressStyle::with_template(
                "{prefix:>5} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar = Some((
                phase,
                ProgressBar::new(total).with_style(style).with_prefix(phase),
            ));
        }
        if let Some((_, b)) = &bar {
            b.set_position(done);
            if done >= total {
                b.finish();
            }
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let a = &cli.conn;
    let fabric_for = |a: &Conn| -> Result<VerbsFabric, Failure> {
        Ok(VerbsFabric::open(a.device.as_deref()).map_err(Error::from)?)
    };
    // Commands that need no target first: they must work without RDMA.
    match &cli.command {
        Cmd::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "raidline-initiator",
                &mut std::io::stdout(),
            );
            return Ok(());
        }
        Cmd::Man => {
            return clap_mangen::Man::new(Cli::command())
                .render(&mut std::io::stdout())
                .map_err(|e| Failure::Failed(format!("cannot print the man page: {e}")));
        }
        _ => {}
    }
    // Everything the command line says is checked before the RDMA device is opened.
    let ip = a.addr.ok_or_else(|| {
        Failure::Usage(
            Cli::command()
                .error(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    "the target address is required: -a, --addr <IP>",
                )
                .to_string(),
        )
    })?;
    let host = host_identity(a).map_err(Failure::Usage)?;
    let t = Target {
        addr: SocketAddr::new(ip, a.port),
        host,
        admin_timeout: Duration::from_millis(a.timeout_ms),
        io_timeout: Duration::from_millis(a.timeout_ms),
        kato: Duration::from_millis(a.kato_ms),
    };
    if a.dhchap_ctrl_secret.is_some() && a.dhchap_secret.is_none() {
        return Err(Failure::Usage(
            "--dhchap-ctrl-secret needs --dhchap-secret too".into(),
        ));
    }
    let secrets = a.dhchap_secret.clone().map(|secret| HostSecrets {
        secret,
        ctrl_secret: a.dhchap_ctrl_secret.clone(),
    });
    let options = |ns: &Ns, queues: u16, depth: u16, max_io: u32| {
        let mut o = t.options(ns.nqn.clone(), queues, depth, max_io);
        o.auth = secrets.clone();
        o
    };
    let trim = matches!(cli.command, Cmd::Trim { .. });
    match cli.command {
        Cmd::Completions { .. } | Cmd::Man => {}
        Cmd::Discover => {
            let log = commands::discover(fabric_for(a)?, &t)?;
            print!("{}", commands::format_discovery(&log));
        }
        Cmd::Identify { ns } => {
            let o = options(&ns, 1, 32, 128 * 1024);
            let text = commands::with_controller(fabric_for(a)?, t.addr, o, commands::identify)?;
            print!("{text}");
        }
        Cmd::Read {
            ns,
            lba,
            size,
            output,
        } => {
            let o = options(&ns, 1, 32, 128 * 1024);
            let mut bar = progress_bar();
            let data = commands::with_controller(fabric_for(a)?, t.addr, o, |c| {
                commands::read_with(c, Nsid(ns.nsid), Lba(lba), size, &mut bar)
            })?;
            std::fs::write(&output, &data)
                .map_err(|e| Failure::Failed(format!("{}: {e}", output.display())))?;
            println!(
                "read {} bytes from LBA {lba} into {}",
                data.len(),
                output.display()
            );
        }
        Cmd::Write { ns, lba, input } => {
            let data = std::fs::read(&input)
                .map_err(|e| Failure::Failed(format!("{}: {e}", input.display())))?;
            let o = options(&ns, 1, 32, 128 * 1024);
            let mut bar = progress_bar();
            commands::with_controller(fabric_for(a)?, t.addr, o, |c| {
                commands::write_with(c, Nsid(ns.nsid), Lba(lba), &data, &mut bar)
            })?;
            println!(
                "wrote {} bytes from {} at LBA {lba}",
                data.len(),
                input.display()
            );
        }
        Cmd::Verify {
            ns,
            lba,
            size,
            blocks,
            seed,
        } => {
            let nsid = Nsid(ns.nsid);
            let o = options(&ns, 1, 32, 128 * 1024);
            let mut bar = progress_bar();
            let r = commands::with_controller(fabric_for(a)?, t.addr, o, |c| {
                let blocks = match (blocks, size) {
                    (Some(b), _) => b,
                    (None, Some(s)) => {
                        let bs = u64::from(c.namespace(nsid)?.block_size);
                        s.div_ceil(bs)
                    }
                    (None, None) => 0,
                };
                commands::verify_with(c, nsid, Lba(lba), blocks, seed, &mut bar)
            })?;
            let mib = (r.blocks * u64::from(r.block_size)) as f64 / 1048576.0;
            println!(
                "verify: {} blocks of {} bytes from LBA {lba} (seed {seed}): write {:.2} s ({:.1} MiB/s), read {:.2} s ({:.1} MiB/s), {} mismatching LBAs",
                r.blocks,
                r.block_size,
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
        Cmd::WriteZeroes { ns, lba, blocks } | Cmd::Trim { ns, lba, blocks } => {
            let o = options(&ns, 1, 32, 128 * 1024);
            commands::with_controller(fabric_for(a)?, t.addr, o, |c| {
                if trim {
                    commands::trim(c, Nsid(ns.nsid), Lba(lba), blocks)
                } else {
                    commands::write_zeroes(c, Nsid(ns.nsid), Lba(lba), blocks, false)
                }
            })?;
            let what = if trim { "trim" } else { "write-zeroes" };
            println!("{what}: {blocks} blocks from LBA {lba}");
        }
        Cmd::Perf {
            ns,
            qd,
            bs,
            rw,
            mix,
            time,
            queues,
            range,
            seed,
        } => {
            let (random, read_percent) = match rw {
                Pattern::Read => (false, 100),
                Pattern::Write => (false, 0),
                Pattern::Randread => (true, 100),
                Pattern::Randwrite => (true, 0),
                Pattern::Rw => (false, mix),
                Pattern::Randrw => (true, mix),
            };
            let bs =
                u32::try_from(bs).map_err(|_| Failure::Usage(format!("--bs {bs}: too large")))?;
            let cfg = PerfConfig {
                queue_depth: qd,
                block_size: bs,
                read_percent,
                random,
                duration: Duration::from_secs_f64(time),
                range_blocks: 0,
                seed,
            };
            let nsid = Nsid(ns.nsid);
            let depth = qd.saturating_add(1).max(2);
            let o = options(&ns, queues, depth, bs.max(4096));
            let tty = std::io::stderr().is_terminal();
            let long = time >= 3.0;
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
            let (r, nq) = commands::with_controller(fabric_for(a)?, t.addr, o, |c| {
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
            print!("{}", commands::format_perf(&cfg, nq, &r, cpu));
            if r.errors > 0 {
                return Err(Failure::Failed(format!("{} I/O errors", r.errors)));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    // Usage errors exit 2 with clap's message; --help and --version print and exit 0.
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("raidline-initiator: {}", e.trim_start_matches("error: "));
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

    fn args(s: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("raidline-initiator").chain(s.split_whitespace()))
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
        assert_eq!(a.conn.addr, Some("10.0.2.15".parse().unwrap()));
        let Cmd::Perf {
            qd,
            bs,
            mix,
            queues,
            rw,
            ..
        } = a.command
        else {
            panic!("perf")
        };
        assert_eq!(
            (qd, bs, mix, queues, rw),
            (16, 65536, 30, 2, Pattern::Randrw)
        );
        // The options every command takes may come first.
        assert!(args("-a 1.2.3.4 --timeout 20000 discover").is_ok());
    }

    /// Issue 20: usage errors are clap's (exit 2), caught before any device is opened; options
    /// that do not apply to a command are refused; help goes to stdout with exit 0.
    #[test]
    fn usage_errors_and_help() {
        use clap::error::ErrorKind;
        for (line, want) in [
            (
                "verify -a 1.2.3.4 -n nqn.x --bogus",
                "unexpected argument '--bogus'",
            ),
            ("verify -a", "a value is required for '--addr <IP>'"),
            ("verify -a notanip -n nqn.x", "invalid value 'notanip'"),
            ("discover -a 1.2.3.4 --qd 4", "unexpected argument '--qd'"),
            ("identify -a 1.2.3.4", "--nqn <NQN>"),
            ("read -a 1.2.3.4 -n nqn.x -o f", "--size <BYTES>"),
            (
                "perf -a 1.2.3.4 -n nqn.x --rw sideways",
                "invalid value 'sideways'",
            ),
            ("perf -a 1.2.3.4 -n nqn.x --mix 101", "invalid value '101'"),
            ("perf -a 1.2.3.4 -n nqn.x --time 0", "is not a duration"),
            ("perf -a 1.2.3.4 -n nqn.x --bs 4x", "bad size suffix"),
            (
                "verify -a 1.2.3.4 -n nqn.x --size 1m --blocks 2",
                "cannot be used with",
            ),
            (
                "identify -a 1.2.3.4 -n nqn.x --hostid nope",
                "is not a UUID",
            ),
            (
                "identify -a 1.2.3.4 -n nqn.x --dhchap-secret DHHC-1:01:x:",
                "not valid base64",
            ),
            ("frobnicate", "unrecognized subcommand 'frobnicate'"),
        ] {
            let e = args(line).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{line}");
            assert!(
                e.to_string().contains(want),
                "{line}: want {want:?} in\n{e}"
            );
        }
        let e = args("perf --help").unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), (ErrorKind::DisplayHelp, 0));
        assert!(e.to_string().contains("--rw <RW>"), "{e}");
        let e = args("--version").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayVersion);
    }

    #[test]
    fn host_identity_prefers_flags() {
        let a = args("identify -a 1.2.3.4 -n nqn.x --hostid 5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f --hostnqn nqn.2014-08.org.nvmexpress:uuid:test").unwrap();
        let h = host_identity(&a.conn).unwrap();
        assert_eq!(
            format_uuid(&h.hostid),
            "5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f"
        );
        assert_eq!(h.hostnqn.as_str(), "nqn.2014-08.org.nvmexpress:uuid:test");
    }
}
