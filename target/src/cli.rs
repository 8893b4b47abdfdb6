//! The `raidline` command line: the daemon (`run`), a configuration check, and the operator
//! commands that talk to a running daemon over the management socket (`crate::mgmt`).
//!
//! The grammar is clap's ([`Cli`], derive): help for every command (`raidline status --help`),
//! `--version`, shell completions (`raidline completions bash|zsh|fish`) and a man page
//! (`raidline man`) from the same definitions. [`parse`] turns the arguments into a
//! [`Command`] or a clap error (usage errors exit 2, `--help` and `--version` print and exit 0:
//! `clap::Error::exit`); it never reads files or the environment. [`run_client`] executes
//! every command except `run` (which the binary's `main` hands to the daemon) and returns the
//! process exit status: [`EXIT_OK`], [`EXIT_FAILED`] (the daemon refused, or the configuration
//! is invalid), [`EXIT_UNREACHABLE`] (no daemon answered properly).
//!
//! Options take their value as `--opt VALUE` or `--opt=VALUE`; `--socket` may come anywhere,
//! a command's own options after its name; `--` ends options (for a device path that starts
//! with `-`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Backing, Config};
use crate::mgmt::{self, Request};

/// Where the daemon reads its configuration unless `--config` says otherwise.
pub const DEFAULT_CONFIG: &str = "/etc/raidline/raidline.toml";

/// Where the client finds the daemon unless `--socket` says otherwise (the systemd unit's
/// `RuntimeDirectory=raidline`).
pub const DEFAULT_SOCKET: &str = "/run/raidline/raidline.sock";

/// How long the client waits for the daemon's answer. Array operations write superblocks on
/// every member before they answer, so this is generous.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Exit status: done.
pub const EXIT_OK: i32 = 0;
/// Exit status: the daemon refused the operation, or the configuration is invalid.
pub const EXIT_FAILED: i32 = 1;
/// Exit status: the command line is wrong (clap's, for usage errors).
pub const EXIT_USAGE: i32 = 2;
/// Exit status: no daemon answered on the socket (or its answer was unusable).
pub const EXIT_UNREACHABLE: i32 = 3;
/// Exit status: `run_client` was handed `run`, which only the daemon executes (EX_SOFTWARE).
pub const EXIT_INTERNAL: i32 = 70;

/// A parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Run the daemon.
    Run {
        /// Configuration file.
        config: PathBuf,
    },
    /// Validate a configuration file and print a summary.
    CheckConfig {
        /// Configuration file.
        config: PathBuf,
    },
    /// Print the running daemon's status.
    Status {
        /// Management socket.
        socket: PathBuf,
        /// JSON instead of text.
        json: bool,
    },
    /// An array operation on the running daemon.
    Array {
        /// Management socket.
        socket: PathBuf,
        /// What to do.
        op: ArrayOp,
    },
    /// A namespace operation on the running daemon.
    Ns {
        /// Management socket.
        socket: PathBuf,
        /// Enable (`true`) or disable.
        enable: bool,
        /// Subsystem NQN.
        subsystem: String,
        /// Namespace id.
        nsid: u32,
    },
    /// A congestion-control operation on the running daemon.
    Cc {
        /// Management socket.
        socket: PathBuf,
        /// What to do.
        op: CcOp,
    },
    /// Follow the running daemon's long jobs until none runs.
    Watch {
        /// Management socket.
        socket: PathBuf,
        /// Time between two looks.
        interval: Duration,
    },
    /// Print a shell completion script.
    Completions {
        /// For this shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
}

/// An array operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayOp {
    /// `array fail ARRAY MEMBER`.
    Fail {
        /// Array name.
        array: String,
        /// Member path.
        member: String,
    },
    /// `array add-spare ARRAY PATH`.
    AddSpare {
        /// Array name.
        array: String,
        /// Device path.
        path: String,
    },
    /// `array replace ARRAY OLD NEW`.
    Replace {
        /// Array name.
        array: String,
        /// Member to replace.
        old: String,
        /// Replacement device.
        new: String,
    },
    /// `array scrub ARRAY`.
    Scrub {
        /// Array name.
        array: String,
    },
    /// `array start [--accept-dirty-degraded] ARRAY`.
    Start {
        /// Array name.
        array: String,
        /// Start even over an unclean stop with a member missing that no log covers.
        accept_dirty_degraded: bool,
    },
}

/// A congestion-control operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CcOp {
    /// `cc show`.
    Show,
    /// `cc set PARAM VALUE` (VALUE checked to be a finite number when parsed).
    Set {
        /// Parameter name.
        param: String,
        /// The value as typed.
        value: String,
    },
}

impl CcOp {
    /// The management request for this operation.
    pub fn request(&self) -> Request {
        match self {
            CcOp::Show => Request::CcShow,
            CcOp::Set { param, value } => Request::CcSet {
                param: param.clone(),
                // Checked by `parse`; NaN would be refused by the daemon's range check.
                value: value.parse().unwrap_or(f64::NAN),
            },
        }
    }
}

impl ArrayOp {
    /// The management request for this operation.
    pub fn request(&self) -> Request {
        match self.clone() {
            ArrayOp::Fail { array, member } => Request::ArrayFail { array, member },
            ArrayOp::AddSpare { array, path } => Request::ArrayAddSpare { array, path },
            ArrayOp::Replace { array, old, new } => Request::ArrayReplace { array, old, new },
            ArrayOp::Scrub { array } => Request::ArrayScrub { array },
            ArrayOp::Start {
                array,
                accept_dirty_degraded,
            } => Request::ArrayStart {
                array,
                accept_dirty_degraded,
            },
        }
    }
}

const AFTER_HELP: &str =
    "exit status: 0 done, 1 refused or invalid, 2 usage error, 3 daemon not reachable";

/// `raidline`: the NVMe-oF/RDMA RAID-5 target and its management client.
#[derive(Debug, clap::Parser)]
#[command(
    name = "raidline",
    version,
    about = "Raidline: a RAID-5 of local NVMe drives served as one NVMe-oF namespace over RDMA",
    after_help = AFTER_HELP,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Configuration file, for `run` (the default command) [default: /etc/raidline/raidline.toml]
    #[arg(long, value_name = "PATH", value_parser = nonempty_path)]
    config: Option<PathBuf>,
    /// The daemon's management socket [default: /run/raidline/raidline.sock]
    #[arg(long, global = true, value_name = "PATH", value_parser = nonempty_path)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Serve NVMe-oF over RDMA (the default; under systemd, see raidline.service)
    Run {
        /// Configuration file [default: /etc/raidline/raidline.toml]
        #[arg(long, value_name = "PATH", value_parser = nonempty_path)]
        config: Option<PathBuf>,
    },
    /// Validate a configuration file and print what it sets up
    CheckConfig {
        /// Configuration file
        #[arg(value_name = "PATH", default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Arrays, members, rebuild/scrub progress, subsystems, controllers and their queue pairs
    /// with rate and RTT, from the running daemon
    Status {
        /// Print the status report as JSON
        #[arg(long)]
        json: bool,
        /// Follow rebuild, resync, replace and scrub progress (rate and time left) until none
        /// runs: bars on a terminal, a line per interval otherwise
        #[arg(long, conflicts_with = "json")]
        watch: bool,
        /// Seconds between two looks with --watch
        #[arg(long, default_value_t = 2.0, value_parser = interval, requires = "watch")]
        interval: f64,
    },
    /// Operate on an array of the running daemon
    #[command(subcommand)]
    Array(ArraySub),
    /// Take a namespace offline or serve it again
    #[command(subcommand)]
    Ns(NsSub),
    /// Show or change the congestion-control parameters of every queue pair
    #[command(subcommand)]
    Cc(CcSub),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff: `raidline man | man -l -`)
    Man,
}

#[derive(Debug, clap::Subcommand)]
enum ArraySub {
    /// Mark a member failed (the array runs degraded, a spare takes over)
    Fail {
        /// Array name
        #[arg(value_parser = nonempty)]
        array: String,
        /// The member's device path
        #[arg(value_parser = nonempty)]
        member: String,
    },
    /// Add a hot spare
    AddSpare {
        /// Array name
        #[arg(value_parser = nonempty)]
        array: String,
        /// The spare's device path
        #[arg(value_parser = nonempty)]
        path: String,
    },
    /// Copy OLD onto NEW while OLD keeps serving (the array stays redundant), then retire OLD
    Replace {
        /// Array name
        #[arg(value_parser = nonempty)]
        array: String,
        /// The member to replace
        #[arg(value_parser = nonempty)]
        old: String,
        /// The replacement device
        #[arg(value_parser = nonempty)]
        new: String,
    },
    /// Read every stripe and check parity
    Scrub {
        /// Array name
        #[arg(value_parser = nonempty)]
        array: String,
    },
    /// Assemble an array that did not start (state refused in `raidline status`) and serve its
    /// namespaces
    Start {
        /// Array name
        #[arg(value_parser = nonempty)]
        array: String,
        /// Start even over an unclean stop with a member missing that no log covers (the
        /// missing member's data written at the time may read back wrong: status lists where)
        #[arg(long)]
        accept_dirty_degraded: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
enum NsSub {
    /// Serve the namespace again (same identifiers); hosts rescan and re-add it
    Enable {
        /// Subsystem NQN
        #[arg(value_parser = nonempty)]
        subsystem: String,
        /// Namespace id
        #[arg(value_parser = nsid)]
        nsid: u32,
    },
    /// Take the namespace offline: hosts get a namespace-change notice and drop it; I/O
    /// already accepted finishes, new I/O gets Internal Path Error (neither survives a
    /// restart: every configured namespace starts enabled)
    Disable {
        /// Subsystem NQN
        #[arg(value_parser = nonempty)]
        subsystem: String,
        /// Namespace id
        #[arg(value_parser = nsid)]
        nsid: u32,
    },
}

#[derive(Debug, clap::Subcommand)]
enum CcSub {
    /// The algorithm and its parameters (value, range, meaning)
    Show,
    /// Change one parameter on every queue pair (range-checked; the algorithm itself is
    /// chosen in the configuration)
    Set {
        /// Parameter name (see `raidline cc show`)
        #[arg(value_parser = nonempty)]
        param: String,
        /// New value
        #[arg(value_parser = finite, allow_hyphen_values = true)]
        value: String,
    },
}

fn nonempty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("must not be empty".into())
    } else {
        Ok(s.to_owned())
    }
}

fn nonempty_path(s: &str) -> Result<PathBuf, String> {
    nonempty(s).map(PathBuf::from)
}

fn nsid(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n != 0 && n < 0xFFFF_FFF0 => Ok(n),
        _ => Err(format!("'{s}' is not a namespace id (1..4294967279)")),
    }
}

fn interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds in 0.1..=3600")),
    }
}

fn finite(s: &str) -> Result<String, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(s.to_owned()),
        _ => Err(format!("'{s}' is not a number")),
    }
}

/// The command line's definition, for completions and the man page.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, clap::Error> {
    use clap::Parser;
    let cli = Cli::try_parse_from(std::iter::once("raidline".to_owned()).chain(args))?;
    let socket = cli
        .socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    let misplaced = |what: &str, cmd: &str| {
        let mut c = command();
        c.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{what} does not apply to 'raidline {cmd}'"),
        )
    };
    if cli.socket.is_some()
        && matches!(
            cli.command,
            None | Some(
                Sub::Run { .. } | Sub::CheckConfig { .. } | Sub::Completions { .. } | Sub::Man
            )
        )
    {
        let name = match &cli.command {
            None | Some(Sub::Run { .. }) => "run",
            Some(Sub::CheckConfig { .. }) => "check-config",
            Some(Sub::Completions { .. }) => "completions",
            _ => "man",
        };
        return Err(misplaced("option '--socket'", name));
    }
    let config = match (&cli.command, cli.config) {
        (None, c) => c,
        (Some(Sub::Run { config: Some(_) }), Some(_)) => {
            return Err(command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "option '--config' given twice",
            ))
        }
        (Some(Sub::Run { config }), c) => config.clone().or(c),
        (Some(_), Some(_)) => {
            return Err(command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "option '--config' applies to 'raidline run' only",
            ))
        }
        (Some(_), None) => None,
    };
    let config = config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    Ok(match cli.command {
        None | Some(Sub::Run { .. }) => Command::Run { config },
        Some(Sub::CheckConfig { config }) => Command::CheckConfig { config },
        Some(Sub::Status {
            watch: true,
            interval,
            ..
        }) => Command::Watch {
            socket,
            interval: Duration::from_secs_f64(interval),
        },
        Some(Sub::Status { json, .. }) => Command::Status { socket, json },
        Some(Sub::Array(a)) => Command::Array {
            socket,
            op: match a {
                ArraySub::Fail { array, member } => ArrayOp::Fail { array, member },
                ArraySub::AddSpare { array, path } => ArrayOp::AddSpare { array, path },
                ArraySub::Replace { array, old, new } => ArrayOp::Replace { array, old, new },
                ArraySub::Scrub { array } => ArrayOp::Scrub { array },
                ArraySub::Start {
                    array,
                    accept_dirty_degraded,
                } => ArrayOp::Start {
                    array,
                    accept_dirty_degraded,
                },
            },
        },
        Some(Sub::Ns(n)) => {
            let (enable, subsystem, nsid) = match n {
                NsSub::Enable { subsystem, nsid } => (true, subsystem, nsid),
                NsSub::Disable { subsystem, nsid } => (false, subsystem, nsid),
            };
            Command::Ns {
                socket,
                enable,
                subsystem,
                nsid,
            }
        }
        Some(Sub::Cc(c)) => Command::Cc {
            socket,
            op: match c {
                CcSub::Show => CcOp::Show,
                CcSub::Set { param, value } => CcOp::Set { param, value },
            },
        },
        Some(Sub::Completions { shell }) => Command::Completions { shell },
        Some(Sub::Man) => Command::Man,
    })
}

/// `raidline status --watch`: looks at the daemon every `interval` and shows each array's long
/// jobs (rebuild, replace copy, resync, scrub) with rate and time left, until none runs (exit 0),
/// the daemon is gone (exit 3) or `looks` ran out (tests). On a terminal one indicatif bar per
/// job; otherwise one line per look.
fn watch(
    socket: &Path,
    interval: Duration,
    tty: bool,
    looks: usize,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::collections::BTreeMap;
    let multi = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stdout()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{prefix:<22} [{bar:30}] {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let mut bars: BTreeMap<String, ProgressBar> = BTreeMap::new();
    let mut seen_any = false;
    for look in 0..looks {
        let r = match call(socket, &Request::Status, err) {
            Ok(r) => r,
            Err(code) => return code,
        };
        let Some(status) = r.status.filter(|_| r.ok) else {
            let _ = writeln!(err, "raidline: {}", r.message);
            return EXIT_FAILED;
        };
        let mut now = Vec::new();
        for a in &status.arrays {
            for (what, p) in mgmt::jobs(a) {
                now.push((format!("{} {what}", a.name), p));
            }
        }
        if tty {
            for (key, p) in &now {
                let bar = bars.entry(key.clone()).or_insert_with(|| {
                    let b = multi.add(ProgressBar::new(1000));
                    b.set_style(style.clone());
                    b.set_prefix(key.clone());
                    b
                });
                bar.set_position((p.ratio() * 1000.0) as u64);
                bar.set_message(mgmt::progress(p));
            }
            for (key, bar) in bars.iter() {
                if !now.iter().any(|(k, _)| k == key) && !bar.is_finished() {
                    bar.finish_with_message("done");
                }
            }
        } else if !now.is_empty() {
            let _ = writeln!(out, "{}", mgmt::jobs_line(&status));
        }
        if now.is_empty() {
            let _ = if seen_any {
                writeln!(out, "no rebuild, resync, replace or scrub runs any more")
            } else {
                writeln!(out, "no rebuild, resync, replace or scrub is running")
            };
            return EXIT_OK;
        }
        seen_any = true;
        if look + 1 < looks {
            std::thread::sleep(interval);
        }
    }
    EXIT_OK
}

/// Executes a client-side command, printing to stdout/stderr; returns the exit status.
pub fn run_client(cmd: &Command) -> i32 {
    run_client_to(cmd, &mut io::stdout().lock(), &mut io::stderr().lock())
}

fn run_client_to(cmd: &Command, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    // Printing can fail (a closed pipe); the exit status still tells what happened.
    match cmd {
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut command(), "raidline", out);
            EXIT_OK
        }
        Command::Watch { socket, interval } => {
            use std::io::IsTerminal;
            let tty = io::stdout().is_terminal();
            watch(socket, *interval, tty, usize::MAX, out, err)
        }
        Command::Man => match clap_mangen::Man::new(command()).render(out) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                let _ = writeln!(err, "raidline: cannot print the man page: {e}");
                EXIT_FAILED
            }
        },
        Command::Run { .. } => {
            let _ = writeln!(
                err,
                "raidline: internal error: `run` is the daemon's, not a client command"
            );
            EXIT_INTERNAL
        }
        Command::CheckConfig { config } => check_config(config, out, err),
        Command::Status { socket, json } => {
            let r = match call(socket, &Request::Status, err) {
                Ok(r) => r,
                Err(code) => return code,
            };
            match (r.ok, r.status) {
                (true, Some(status)) => {
                    let text = if *json {
                        serde_json::to_string_pretty(&status).map(|mut s| {
                            s.push('\n');
                            s
                        })
                    } else {
                        Ok(mgmt::render_status(&status))
                    };
                    match text {
                        Ok(t) => {
                            let _ = out.write_all(t.as_bytes());
                            EXIT_OK
                        }
                        Err(e) => {
                            let _ = writeln!(err, "raidline: cannot print the status: {e}");
                            EXIT_FAILED
                        }
                    }
                }
                (true, None) => {
                    let _ = writeln!(
                        err,
                        "raidline: the daemon at {} answered without a status report",
                        socket.display()
                    );
                    EXIT_UNREACHABLE
                }
                (false, _) => {
                    let _ = writeln!(err, "raidline: {}", r.message);
                    EXIT_FAILED
                }
            }
        }
        Command::Array { socket, op } => operation(socket, &op.request(), out, err),
        Command::Cc { socket, op } => operation(socket, &op.request(), out, err),
        Command::Ns {
            socket,
            enable,
            subsystem,
            nsid,
        } => {
            let subsystem = subsystem.clone();
            let nsid = *nsid;
            let req = if *enable {
                Request::NsEnable { subsystem, nsid }
            } else {
                Request::NsDisable { subsystem, nsid }
            };
            operation(socket, &req, out, err)
        }
    }
}

/// Sends one operation and prints the daemon's answer.
fn operation(socket: &Path, req: &Request, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let r = match call(socket, req, err) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if r.ok {
        if !r.message.is_empty() {
            let _ = writeln!(out, "{}", r.message);
        }
        EXIT_OK
    } else {
        let _ = writeln!(err, "raidline: refused: {}", r.message);
        EXIT_FAILED
    }
}

fn call(socket: &Path, req: &Request, err: &mut dyn Write) -> Result<mgmt::Response, i32> {
    mgmt::call(socket, req, CALL_TIMEOUT).map_err(|e| {
        let _ = writeln!(err, "raidline: {e}");
        EXIT_UNREACHABLE
    })
}

fn check_config(path: &Path, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match Config::load(path) {
        Ok(c) => {
            if let Err(e) = crate::service::check_devices(&c) {
                let _ = writeln!(err, "raidline: {}: {e}", path.display());
                return EXIT_FAILED;
            }
            let _ = writeln!(out, "{} is valid", path.display());
            let _ = out.write_all(config_summary(&c).as_bytes());
            EXIT_OK
        }
        Err(e) => {
            let _ = writeln!(err, "raidline: {e}");
            EXIT_FAILED
        }
    }
}

/// What a configuration sets up, one item per line (`raidline check-config`).
pub fn config_summary(c: &Config) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let listen: Vec<String> = c.listen.iter().map(ToString::to_string).collect();
    let _ = writeln!(s, "  listen: {}", listen.join(", "));
    // The variants are single words; lower case is how the file spells them.
    let poll_mode = format!("{:?}", c.poll_mode).to_lowercase();
    let _ = writeln!(
        s,
        "  pollers: {} ({poll_mode} polling), {} storage workers per namespace each",
        c.cores, c.storage_workers
    );
    if c.io_poll == crate::config::IoPoll::On {
        let _ = writeln!(
            s,
            "  member I/O: polled on devices with poll queues (io_poll = \"on\"), else by \
             interrupt"
        );
    }
    let _ = writeln!(s, "  management socket: {}", c.management_socket.display());
    let _ = writeln!(
        s,
        "  state directory: {} (remembered members)",
        c.state_dir.display()
    );
    match c.metrics {
        Some(a) => {
            let _ = writeln!(s, "  metrics: http://{a}/metrics");
        }
        None => {
            let _ = writeln!(s, "  metrics: off");
        }
    }
    let l = &c.limits;
    let _ = writeln!(
        s,
        "  transport: queue depth {}, admin queue depth {}, {} I/O queues, in-capsule {} B, \
         max transfer {} B, {} controllers, {}",
        l.max_queue_depth,
        l.max_admin_queue_depth,
        l.max_io_queues,
        l.in_capsule_data,
        l.max_transfer,
        l.max_controllers,
        if l.srq_depth == 0 {
            "receives per queue pair".to_string()
        } else {
            format!("shared receive queue of {} per poller", l.srq_depth)
        }
    );
    let params: Vec<String> =
        c.cc.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
    let _ = writeln!(
        s,
        "  congestion control: {}{}",
        if c.cc.algorithm == crate::daemon::pacing::PACING_OFF {
            "off (no pacing)"
        } else {
            c.cc.algorithm.as_str()
        },
        if params.is_empty() {
            String::new()
        } else {
            format!(" ({})", params.join(", "))
        }
    );
    for a in &c.arrays {
        let _ = writeln!(
            s,
            "  array {}: RAID-5 over {} members, {} spares, chunk {} KiB, parity {}, \
             rebuild {} MB/s, write hole: {}",
            a.name,
            a.members.len(),
            a.spares.len(),
            a.chunk_bytes / 1024,
            format!("{:?}", a.parity).to_lowercase(),
            a.rebuild_mb_s,
            a.write_hole.as_str()
        );
        for m in &a.members {
            let _ = writeln!(s, "    member {}", m.display());
        }
        for m in &a.spares {
            let _ = writeln!(s, "    spare {}", m.display());
        }
    }
    for sub in &c.subsystems {
        let hosts = match &sub.hosts {
            None => "any host".to_owned(),
            Some(h) => format!("{} allowed host(s)", h.len()),
        };
        let serial = sub.serial.as_deref().unwrap_or("derived from the array");
        let _ = writeln!(
            s,
            "  subsystem {}: model \"{}\", serial {}, {}",
            sub.nqn, sub.model, serial, hosts
        );
        for ns in &sub.namespaces {
            let backing = match &ns.backing {
                Backing::Array(a) => format!("array {a}"),
                Backing::File { path, .. } => format!("file {}", path.display()),
            };
            let _ = writeln!(s, "    namespace {} on {backing}", ns.nsid);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mgmt::tests::{sample, Fake, TempDir};
    use crate::mgmt::MgmtServer;
    use std::sync::Arc;

    fn p(line: &str) -> Result<Command, String> {
        parse(line.split_whitespace().map(str::to_owned)).map_err(|e| e.to_string())
    }

    /// The error a line gives, and that it exits 2 like every usage error.
    fn err(line: &str) -> String {
        let e = parse(line.split_whitespace().map(str::to_owned)).unwrap_err();
        assert_eq!(e.exit_code(), EXIT_USAGE, "{line}: {e}");
        e.to_string()
    }

    fn sock() -> PathBuf {
        PathBuf::from(DEFAULT_SOCKET)
    }

    fn array(op: ArrayOp) -> Command {
        Command::Array { socket: sock(), op }
    }

    #[test]
    fn run_forms() {
        let default = Command::Run {
            config: PathBuf::from(DEFAULT_CONFIG),
        };
        assert_eq!(p(""), Ok(default.clone()));
        assert_eq!(p("run"), Ok(default));
        let custom = Command::Run {
            config: PathBuf::from("/x.toml"),
        };
        assert_eq!(p("--config /x.toml"), Ok(custom.clone()));
        assert_eq!(p("run --config /x.toml"), Ok(custom.clone()));
        assert_eq!(p("run --config=/x.toml"), Ok(custom.clone()));
        assert_eq!(p("--config /x.toml run"), Ok(custom));
    }

    #[test]
    fn check_config_forms() {
        assert_eq!(
            p("check-config /a.toml"),
            Ok(Command::CheckConfig {
                config: "/a.toml".into()
            })
        );
        assert_eq!(
            p("check-config"),
            Ok(Command::CheckConfig {
                config: DEFAULT_CONFIG.into()
            })
        );
    }

    #[test]
    fn status_forms() {
        assert_eq!(
            p("status"),
            Ok(Command::Status {
                socket: sock(),
                json: false
            })
        );
        assert_eq!(
            p("status --json --socket /tmp/s"),
            Ok(Command::Status {
                socket: "/tmp/s".into(),
                json: true
            })
        );
        assert_eq!(
            p("--socket=/tmp/s status"),
            Ok(Command::Status {
                socket: "/tmp/s".into(),
                json: false
            })
        );
    }

    #[test]
    fn array_forms() {
        assert_eq!(
            p("array fail array0 /dev/nvme1n1"),
            Ok(array(ArrayOp::Fail {
                array: "array0".into(),
                member: "/dev/nvme1n1".into()
            }))
        );
        assert_eq!(
            p("array add-spare array0 /dev/nvme5n1"),
            Ok(array(ArrayOp::AddSpare {
                array: "array0".into(),
                path: "/dev/nvme5n1".into()
            }))
        );
        assert_eq!(
            p("array replace array0 /dev/a /dev/b --socket /s"),
            Ok(Command::Array {
                socket: "/s".into(),
                op: ArrayOp::Replace {
                    array: "array0".into(),
                    old: "/dev/a".into(),
                    new: "/dev/b".into()
                }
            })
        );
        assert_eq!(
            p("array scrub array0"),
            Ok(array(ArrayOp::Scrub {
                array: "array0".into()
            }))
        );
        // `--` lets a name start with a dash.
        assert_eq!(
            p("array fail array0 -- -odd"),
            Ok(array(ArrayOp::Fail {
                array: "array0".into(),
                member: "-odd".into()
            }))
        );
        assert_eq!(
            ArrayOp::Scrub { array: "a".into() }.request(),
            Request::ArrayScrub { array: "a".into() }
        );
        // `array start`: the flag anywhere on the line; without it a plain retry.
        for line in [
            "array start --accept-dirty-degraded array0",
            "array start array0 --accept-dirty-degraded",
            "array --socket /run/raidline/raidline.sock start array0 --accept-dirty-degraded",
        ] {
            assert_eq!(
                p(line),
                Ok(array(ArrayOp::Start {
                    array: "array0".into(),
                    accept_dirty_degraded: true
                })),
                "{line}"
            );
        }
        let plain = ArrayOp::Start {
            array: "array0".into(),
            accept_dirty_degraded: false,
        };
        assert_eq!(p("array start array0"), Ok(array(plain.clone())));
        assert_eq!(
            plain.request(),
            Request::ArrayStart {
                array: "array0".into(),
                accept_dirty_degraded: false
            }
        );
    }

    /// Issue 20: help for every command (its own text, exit 0), --version everywhere.
    #[test]
    fn help_per_command_and_version() {
        use clap::error::ErrorKind;
        let help = |line: &str| {
            let e = parse(line.split_whitespace().map(str::to_owned)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{line}");
            assert_eq!(e.exit_code(), EXIT_OK, "{line}");
            e.to_string()
        };
        let top = help("--help");
        for cmd in [
            "run",
            "check-config",
            "status",
            "array",
            "ns",
            "cc",
            "completions",
            "man",
        ] {
            assert!(top.contains(cmd), "{cmd} missing from:\n{top}");
        }
        assert!(top.contains("exit status: 0 done"), "{top}");
        let status = help("status --help");
        assert!(
            status.contains("Usage: raidline status") && status.contains("--json"),
            "{status}"
        );
        assert!(!status.contains("check-config"), "{status}");
        let start = help("array start -h");
        assert!(
            start.contains("--accept-dirty-degraded") && start.contains("<ARRAY>"),
            "{start}"
        );
        assert!(help("cc set --help").contains("<PARAM> <VALUE>"));
        for line in ["--version", "-V"] {
            let e = parse(line.split_whitespace().map(str::to_owned)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DisplayVersion);
            assert_eq!(
                e.to_string(),
                format!("raidline {}\n", env!("CARGO_PKG_VERSION"))
            );
        }
    }

    #[test]
    fn completions_and_man_page() {
        for (shell, want) in [
            ("bash", "complete -F _raidline"),
            ("zsh", "#compdef raidline"),
            ("fish", "complete -c raidline"),
        ] {
            let Ok(cmd @ Command::Completions { .. }) = p(&format!("completions {shell}")) else {
                panic!("completions {shell}")
            };
            let (code, out, _) = run(&cmd);
            assert_eq!(code, EXIT_OK);
            assert!(
                out.contains(want),
                "{shell}: {}",
                &out[..out.len().min(300)]
            );
            assert!(
                out.contains("add-spare"),
                "{shell}: the array commands are completed"
            );
        }
        let (code, man, _) = run(&Command::Man);
        assert_eq!(code, EXIT_OK);
        assert!(
            man.starts_with(".ie") || man.contains(".TH raidline"),
            "{}",
            &man[..200]
        );
        assert!(man.contains("check\\-config") || man.contains("check-config"));
        assert!(err("completions tcsh").contains("invalid value 'tcsh'"));
    }

    #[test]
    fn cc_commands_parse_to_requests() {
        let Ok(Command::Cc { socket, op }) = p("cc set rate_mbps 1600 --socket /s") else {
            panic!("cc set")
        };
        assert_eq!(socket, PathBuf::from("/s"));
        assert_eq!(
            op.request(),
            Request::CcSet {
                param: "rate_mbps".into(),
                value: 1600.0
            }
        );
        assert_eq!(
            p("cc show"),
            Ok(Command::Cc {
                socket: PathBuf::from(DEFAULT_SOCKET),
                op: CcOp::Show
            })
        );
    }

    #[test]
    fn ns_commands_parse() {
        assert_eq!(
            p("ns disable nqn.2026-11.io.raidline:a 1 --socket /s"),
            Ok(Command::Ns {
                socket: PathBuf::from("/s"),
                enable: false,
                subsystem: "nqn.2026-11.io.raidline:a".into(),
                nsid: 1
            })
        );
        assert!(matches!(
            p("ns enable x 7"),
            Ok(Command::Ns {
                enable: true,
                nsid: 7,
                ..
            })
        ));
    }

    #[test]
    fn errors_name_the_problem() {
        for (line, want) in [
            ("frobnicate", "unrecognized subcommand 'frobnicate'"),
            ("--frob", "unexpected argument '--frob'"),
            ("status -x", "unexpected argument '-x'"),
            (
                "status --socket",
                "a value is required for '--socket <PATH>'",
            ),
            ("status --socket=", "invalid value '' for '--socket <PATH>'"),
            ("status --json=yes", "unexpected value 'yes' for '--json'"),
            ("status --json --json", "cannot be used multiple times"),
            ("run --config a --config b", "cannot be used multiple times"),
            ("--config a run --config b", "option '--config' given twice"),
            (
                "--socket /s run",
                "option '--socket' does not apply to 'raidline run'",
            ),
            ("status --config /c", "unexpected argument '--config'"),
            (
                "--config /c status",
                "option '--config' applies to 'raidline run' only",
            ),
            ("array scrub a --json", "unexpected argument '--json'"),
            ("cc", "Usage: raidline cc [OPTIONS] <COMMAND>"),
            ("cc show x", "unexpected argument 'x'"),
            ("cc set rate_mbps", "required arguments were not provided"),
            ("cc set rate_mbps fast", "'fast' is not a number"),
            ("cc set rate_mbps inf", "'inf' is not a number"),
            ("cc tune", "unrecognized subcommand 'tune'"),
            (
                "check-config --socket /s",
                "option '--socket' does not apply to 'raidline check-config'",
            ),
            ("status now", "unexpected argument 'now'"),
            ("run x", "unexpected argument 'x'"),
            ("check-config a b", "unexpected argument 'b'"),
            ("array", "Usage: raidline array [OPTIONS] <COMMAND>"),
            ("array grow a", "unrecognized subcommand 'grow'"),
            ("array fail", "<ARRAY>"),
            ("array fail a", "<MEMBER>"),
            ("array replace a b", "<NEW>"),
            ("array scrub a b", "unexpected argument 'b'"),
            (
                "array scrub a --accept-dirty-degraded",
                "unexpected argument '--accept-dirty-degraded'",
            ),
            ("ns", "Usage: raidline ns [OPTIONS] <COMMAND>"),
            ("ns toggle x 1", "unrecognized subcommand 'toggle'"),
            ("ns enable x", "<NSID>"),
            ("ns enable x 1 2", "unexpected argument '2'"),
            ("ns disable x 0", "'0' is not a namespace id"),
            ("ns disable x 4294967295", "is not a namespace id"),
            ("ns disable x one", "'one' is not a namespace id"),
        ] {
            let e = err(line);
            assert!(e.contains(want), "{line}: want {want:?} in:\n{e}");
        }
        let empty = parse(["array", "scrub", ""].map(str::to_owned)).unwrap_err();
        assert!(empty.to_string().contains("must not be empty"), "{empty}");
    }

    fn run(cmd: &Command) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_client_to(cmd, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn client_commands_against_a_daemon() {
        let dir = TempDir::new("cli");
        let _server = MgmtServer::start(&dir.sock(), Arc::new(Fake::default())).unwrap();
        let socket = dir.sock();

        let (code, out, _) = run(&Command::Status {
            socket: socket.clone(),
            json: false,
        });
        assert_eq!(code, EXIT_OK);
        assert_eq!(out, mgmt::render_status(&sample()));

        let (code, out, _) = run(&Command::Status {
            socket: socket.clone(),
            json: true,
        });
        assert_eq!(code, EXIT_OK);
        assert_eq!(
            serde_json::from_str::<mgmt::StatusReport>(&out).unwrap(),
            sample()
        );

        let (code, out, err) = run(&Command::Array {
            socket: socket.clone(),
            op: ArrayOp::Fail {
                array: "array0".into(),
                member: "/dev/nvme1n1".into(),
            },
        });
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (EXIT_OK, "failed /dev/nvme1n1 in array0\n", "")
        );

        let (code, out, err) = run(&Command::Array {
            socket: socket.clone(),
            op: ArrayOp::Start {
                array: "array0".into(),
                accept_dirty_degraded: true,
            },
        });
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (
                EXIT_OK,
                "started array0 (accept dirty degraded: true)\n",
                ""
            )
        );

        let (code, out, err) = run(&Command::Array {
            socket,
            op: ArrayOp::Scrub {
                array: "nope".into(),
            },
        });
        assert_eq!((code, out.as_str()), (EXIT_FAILED, ""));
        assert_eq!(err, "raidline: refused: no array named nope\n");
    }

    #[test]
    fn no_daemon_is_exit_3_with_a_hint() {
        let dir = TempDir::new("cli-none");
        let (code, out, err) = run(&Command::Status {
            socket: dir.sock(),
            json: false,
        });
        assert_eq!((code, out.as_str()), (EXIT_UNREACHABLE, ""));
        assert!(
            err.starts_with("raidline: cannot reach raidline at "),
            "{err}"
        );
        assert!(err.ends_with("is the daemon running?\n"), "{err}");
    }

    /// Issue 20 item 4: `raidline status --watch` follows a rebuild (the fake daemon's array0
    /// rebuild at 25 %) with rate and time left, a line per look without a terminal.
    #[test]
    fn status_watch_follows_the_jobs() {
        let dir = TempDir::new("cli-watch");
        let _server = MgmtServer::start(&dir.sock(), Arc::new(Fake::default())).unwrap();
        assert_eq!(
            p("status --watch --interval 0.5 --socket /s"),
            Ok(Command::Watch {
                socket: "/s".into(),
                interval: Duration::from_millis(500)
            })
        );
        assert!(err("status --json --watch").contains("cannot be used with"));
        assert!(err("status --interval 1").contains("--watch"));
        assert!(err("status --watch --interval 0").contains("not a number of seconds"));
        let (mut out, mut e) = (Vec::new(), Vec::new());
        let code = watch(
            &dir.sock(),
            Duration::from_millis(10),
            false,
            2,
            &mut out,
            &mut e,
        );
        let out = String::from_utf8(out).unwrap();
        assert_eq!(code, EXIT_OK);
        let line = "array0 rebuild 25.0 % (1.00 TiB of 4.00 TiB) at 200.00 MiB/s, 04:22:09 left\n";
        assert_eq!(out, format!("{line}{line}"));
        assert_eq!(mgmt::jobs_line(&sample()), line.trim_end());
        // No job: says so and ends.
        let mut idle = sample();
        for a in &mut idle.arrays {
            a.rebuild = None;
            a.scrub = None;
        }
        assert_eq!(mgmt::jobs_line(&idle), "");
        // Gone daemon: exit 3.
        let (mut out, mut e) = (Vec::new(), Vec::new());
        let code = watch(
            &dir.0.join("nope.sock"),
            Duration::from_millis(10),
            false,
            2,
            &mut out,
            &mut e,
        );
        assert_eq!(code, EXIT_UNREACHABLE);
    }

    #[test]
    fn run_is_not_a_client_command() {
        let (code, _, err) = run(&Command::Run {
            config: DEFAULT_CONFIG.into(),
        });
        assert_eq!(code, EXIT_INTERNAL);
        assert!(err.contains("internal error"));
    }

    #[test]
    fn check_config_validates_and_summarises() {
        let dir = TempDir::new("cli-config");
        let good = dir.0.join("good.toml");
        std::fs::write(&good, include_str!("../../deploy/raidline.toml")).unwrap();
        let (code, out, err) = run(&Command::CheckConfig {
            config: good.clone(),
        });
        assert_eq!((code, err.as_str()), (EXIT_OK, ""));
        assert!(
            out.starts_with(&format!("{} is valid\n", good.display())),
            "{out}"
        );
        for want in [
            "  listen: 0.0.0.0:4420\n",
            "  pollers: 2 (adaptive polling), 16 storage workers per namespace each\n",
            "  management socket: /run/raidline/raidline.sock\n",
            "  state directory: /var/lib/raidline (remembered members)\n",
            "  metrics: http://127.0.0.1:9420/metrics\n",
            "  congestion control: off (no pacing)\n",
            "  array array0: RAID-5 over 4 members, 0 spares, chunk 64 KiB, parity cpu, rebuild 200 MB/s, write hole: degraded\n",
            "    member /dev/nvme3n1\n",
            "  subsystem nqn.2026-11.io.raidline:array0: model \"Raidline RAID-5\", serial derived from the array, 1 allowed host(s)\n",
            "    namespace 1 on array array0\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }

        let bad = dir.0.join("bad.toml");
        std::fs::write(&bad, "[target]\ncores = 0\n").unwrap();
        let (code, out, err) = run(&Command::CheckConfig { config: bad });
        assert_eq!((code, out.as_str()), (EXIT_FAILED, ""));
        assert!(err.contains("bad.toml:2:"), "{err}");

        let (code, _, err) = run(&Command::CheckConfig {
            config: dir.0.join("missing.toml"),
        });
        assert_eq!(code, EXIT_FAILED);
        assert!(err.contains("cannot read"), "{err}");
    }
}
