//! The `raidline` command line: the daemon (`run`), a configuration check, and the operator
//! commands that talk to a running daemon over the management socket (`crate::mgmt`).
//!
//! [`parse`] turns the arguments (without the program name) into a [`Command`] or a
//! [`UsageError`] whose message names the offending argument; it never reads files or the
//! environment. [`run_client`] executes every command except `run` (which the binary's `main`
//! hands to the daemon) and returns the process exit status: [`EXIT_OK`], [`EXIT_FAILED`] (the
//! daemon refused, or the configuration is invalid), [`EXIT_USAGE`] (for `main` to use on a
//! `UsageError`), [`EXIT_UNREACHABLE`] (no daemon answered properly).
//!
//! Options take their value as `--opt VALUE` or `--opt=VALUE`, may come before or after the
//! command's words, and `--` ends options (for a device path that starts with `-`).

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
/// Exit status: the command line is wrong.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: no daemon answered on the socket (or its answer was unusable).
pub const EXIT_UNREACHABLE: i32 = 3;
/// Exit status: `run_client` was handed `run`, which only the daemon executes (EX_SOFTWARE).
pub const EXIT_INTERNAL: i32 = 70;

/// The help text.
pub const USAGE: &str = "\
usage: raidline [run] [--config PATH]
       raidline check-config [PATH]
       raidline status [--socket PATH] [--json]
       raidline array fail ARRAY MEMBER [--socket PATH]
       raidline array add-spare ARRAY PATH [--socket PATH]
       raidline array replace ARRAY OLD NEW [--socket PATH]
       raidline array scrub ARRAY [--socket PATH]
       raidline array start [--accept-dirty-degraded] ARRAY [--socket PATH]
       raidline ns enable|disable SUBSYSTEM NSID [--socket PATH]
       raidline cc show [--socket PATH]
       raidline cc set PARAM VALUE [--socket PATH]
       raidline --help | --version

commands:
  run             serve NVMe-oF over RDMA (the default; under systemd, see raidline.service)
  check-config    validate a configuration file and print what it sets up
  status          arrays, members, rebuild/scrub progress, subsystems, controllers and
                  their queue pairs with rate and RTT, from the running daemon
  array fail      mark a member failed (the array runs degraded, a spare takes over)
  array add-spare add a hot spare
  array replace   copy OLD onto NEW while OLD keeps serving (the array stays redundant),
                  then retire OLD
  array scrub     read every stripe and check parity
  array start     assemble an array that did not start (state refused in raidline status)
                  and serve its namespaces; with --accept-dirty-degraded even over an
                  unclean stop with a member missing that no log covers (the missing
                  member's data written at the time may read back wrong: status lists where)
  ns disable      take a namespace offline: hosts get a namespace-change notice and drop
                  it; I/O already accepted finishes, new I/O gets Internal Path Error
  ns enable       serve it again (same identifiers); hosts rescan and re-add it
                  (neither survives a restart: every configured namespace starts enabled)
  cc show         the congestion-control algorithm and its parameters (value, range, meaning)
  cc set          change one parameter on every queue pair (range-checked; the algorithm
                  itself is chosen in the configuration)

options:
  --config PATH   configuration file (default /etc/raidline/raidline.toml)
  --socket PATH   the daemon's management socket (default /run/raidline/raidline.sock)
  --json          print the status report as JSON
  --accept-dirty-degraded
                  array start: accept an unclean degraded stop that no log covers
  -h, --help      this text
  -V, --version   the version

exit status: 0 done, 1 refused or invalid, 2 usage error, 3 daemon not reachable
";

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
    /// Print the usage text.
    Help,
    /// Print the version.
    Version,
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

/// A command line that does not parse; the message names what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    message: String,
}

impl UsageError {
    fn new(message: impl Into<String>) -> UsageError {
        UsageError {
            message: message.into(),
        }
    }
}

/// Options that take a value.
const VALUED: [&str; 2] = ["config", "socket"];
/// Options that do not.
const FLAGS: [&str; 4] = ["help", "version", "json", "accept-dirty-degraded"];

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, UsageError> {
    let mut words: Vec<String> = Vec::new();
    let mut opts: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            words.extend(it.by_ref());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            if let Some(&flag) = FLAGS.iter().find(|&&f| f == name) {
                if inline.is_some() {
                    return Err(UsageError::new(format!("option '--{flag}' takes no value")));
                }
                opts.push((flag, None));
            } else if let Some(&opt) = VALUED.iter().find(|&&o| o == name) {
                let value = match inline {
                    Some(v) => Some(v),
                    None => it.next().filter(|v| !v.starts_with("--")),
                };
                match value {
                    Some(v) if !v.is_empty() => opts.push((opt, Some(v))),
                    _ => return Err(UsageError::new(format!("option '--{opt}' needs a value"))),
                }
            } else {
                return Err(UsageError::new(format!("unknown option '--{name}'")));
            }
        } else if arg == "-h" {
            opts.push(("help", None));
        } else if arg == "-V" {
            opts.push(("version", None));
        } else if arg.len() > 1 && arg.starts_with('-') {
            return Err(UsageError::new(format!("unknown option '{arg}'")));
        } else {
            words.push(arg);
        }
    }
    if opts.iter().any(|(o, _)| *o == "help") {
        return Ok(Command::Help);
    }
    if opts.iter().any(|(o, _)| *o == "version") {
        return Ok(Command::Version);
    }

    let mut words = words.into_iter();
    let command = words.next();
    let rest: Vec<String> = words.collect();
    match command.as_deref() {
        None | Some("run") => {
            let mut o = Opts::take(opts, "raidline run", &["config"])?;
            no_words("raidline run", &rest)?;
            Ok(Command::Run {
                config: o.path("config", DEFAULT_CONFIG),
            })
        }
        Some("check-config") => {
            Opts::take(opts, "raidline check-config", &[])?;
            let config = match rest.as_slice() {
                [] => PathBuf::from(DEFAULT_CONFIG),
                [p] => PathBuf::from(p),
                [_, extra, ..] => {
                    return Err(UsageError::new(format!(
                        "unexpected argument '{extra}': 'raidline check-config' takes one PATH"
                    )))
                }
            };
            Ok(Command::CheckConfig { config })
        }
        Some("status") => {
            let mut o = Opts::take(opts, "raidline status", &["socket", "json"])?;
            no_words("raidline status", &rest)?;
            Ok(Command::Status {
                socket: o.path("socket", DEFAULT_SOCKET),
                json: o.flag("json"),
            })
        }
        Some("array") => {
            let mut o = Opts::take(opts, "raidline array", &["socket", "accept-dirty-degraded"])?;
            let mut op = array_op(&rest)?;
            let accept = o.flag("accept-dirty-degraded");
            match &mut op {
                ArrayOp::Start {
                    accept_dirty_degraded,
                    ..
                } => *accept_dirty_degraded = accept,
                _ if accept => {
                    return Err(UsageError::new(
                        "option '--accept-dirty-degraded' applies only to 'raidline array start'",
                    ))
                }
                _ => {}
            }
            Ok(Command::Array {
                socket: o.path("socket", DEFAULT_SOCKET),
                op,
            })
        }
        Some("ns") => {
            let mut o = Opts::take(opts, "raidline ns", &["socket"])?;
            let (enable, subsystem, nsid) = ns_op(&rest)?;
            Ok(Command::Ns {
                socket: o.path("socket", DEFAULT_SOCKET),
                enable,
                subsystem,
                nsid,
            })
        }
        Some("cc") => {
            let mut o = Opts::take(opts, "raidline cc", &["socket"])?;
            Ok(Command::Cc {
                socket: o.path("socket", DEFAULT_SOCKET),
                op: cc_op(&rest)?,
            })
        }
        Some(other) => Err(UsageError::new(format!(
            "unknown command '{other}' (run, check-config, status, array, ns, cc)"
        ))),
    }
}

fn array_op(words: &[String]) -> Result<ArrayOp, UsageError> {
    let Some((sub, args)) = words.split_first() else {
        return Err(UsageError::new(
            "'raidline array' needs a command: fail, add-spare, replace, scrub or start",
        ));
    };
    type Build = fn(&[String]) -> ArrayOp;
    let (names, op): (&[&str], Build) = match sub.as_str() {
        "fail" => (&["ARRAY", "MEMBER"], |a| ArrayOp::Fail {
            array: a[0].clone(),
            member: a[1].clone(),
        }),
        "add-spare" => (&["ARRAY", "PATH"], |a| ArrayOp::AddSpare {
            array: a[0].clone(),
            path: a[1].clone(),
        }),
        "replace" => (&["ARRAY", "OLD", "NEW"], |a| ArrayOp::Replace {
            array: a[0].clone(),
            old: a[1].clone(),
            new: a[2].clone(),
        }),
        "scrub" => (&["ARRAY"], |a| ArrayOp::Scrub {
            array: a[0].clone(),
        }),
        // The flag is set by the caller from `--accept-dirty-degraded`.
        "start" => (&["ARRAY"], |a| ArrayOp::Start {
            array: a[0].clone(),
            accept_dirty_degraded: false,
        }),
        other => {
            return Err(UsageError::new(format!(
                "unknown array command '{other}' (fail, add-spare, replace, scrub, start)"
            )))
        }
    };
    let want = names.join(" ");
    if args.len() < names.len() {
        return Err(UsageError::new(format!(
            "'raidline array {sub}' needs {want}; missing {}",
            names[args.len()..].join(" ")
        )));
    }
    if let Some(extra) = args.get(names.len()) {
        return Err(UsageError::new(format!(
            "unexpected argument '{extra}': 'raidline array {sub}' takes {want}"
        )));
    }
    if let Some((i, _)) = args.iter().enumerate().find(|(_, a)| a.is_empty()) {
        return Err(UsageError::new(format!(
            "'raidline array {sub}': {} is empty",
            names[i]
        )));
    }
    Ok(op(args))
}

fn ns_op(words: &[String]) -> Result<(bool, String, u32), UsageError> {
    let (enable, args) = match words.split_first() {
        None => {
            return Err(UsageError::new(
                "'raidline ns' needs a command: enable or disable",
            ))
        }
        Some((w, args)) if w == "enable" => (true, args),
        Some((w, args)) if w == "disable" => (false, args),
        Some((other, _)) => {
            return Err(UsageError::new(format!(
                "unknown ns command '{other}' (enable, disable)"
            )))
        }
    };
    let verb = if enable { "enable" } else { "disable" };
    match args {
        [sub, nsid] if !sub.is_empty() => match nsid.parse::<u32>() {
            Ok(n) if n != 0 && n < 0xFFFF_FFF0 => Ok((enable, sub.clone(), n)),
            _ => Err(UsageError::new(format!(
                "'raidline ns {verb}': NSID '{nsid}' is not a namespace id (1..4294967279)"
            ))),
        },
        _ => Err(UsageError::new(format!(
            "'raidline ns {verb}' takes SUBSYSTEM NSID"
        ))),
    }
}

fn cc_op(words: &[String]) -> Result<CcOp, UsageError> {
    match words {
        [] => Err(UsageError::new(
            "'raidline cc' needs a command: show or set",
        )),
        [show] if show == "show" => Ok(CcOp::Show),
        [show, extra, ..] if show == "show" => Err(UsageError::new(format!(
            "unexpected argument '{extra}' for 'raidline cc show'"
        ))),
        [set, param, value] if set == "set" => {
            if param.is_empty() {
                return Err(UsageError::new("'raidline cc set': PARAM is empty"));
            }
            match value.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(CcOp::Set {
                    param: param.clone(),
                    value: value.clone(),
                }),
                _ => Err(UsageError::new(format!(
                    "'raidline cc set': VALUE '{value}' is not a number"
                ))),
            }
        }
        [set, ..] if set == "set" => Err(UsageError::new(
            "'raidline cc set' takes PARAM VALUE (see 'raidline cc show')",
        )),
        [other, ..] => Err(UsageError::new(format!(
            "unknown cc command '{other}' (show, set)"
        ))),
    }
}

fn no_words(cmd: &str, rest: &[String]) -> Result<(), UsageError> {
    match rest.first() {
        Some(extra) => Err(UsageError::new(format!(
            "unexpected argument '{extra}' for '{cmd}'"
        ))),
        None => Ok(()),
    }
}

/// The options of one command, checked for applicability and repetition.
struct Opts(Vec<(&'static str, Option<String>)>);

impl Opts {
    fn take(
        opts: Vec<(&'static str, Option<String>)>,
        cmd: &str,
        allowed: &[&str],
    ) -> Result<Opts, UsageError> {
        for (i, (name, _)) in opts.iter().enumerate() {
            if !allowed.contains(name) {
                return Err(UsageError::new(format!(
                    "option '--{name}' does not apply to '{cmd}'"
                )));
            }
            if opts[..i].iter().any(|(n, _)| n == name) {
                return Err(UsageError::new(format!("option '--{name}' given twice")));
            }
        }
        Ok(Opts(opts))
    }

    fn path(&mut self, name: &str, default: &str) -> PathBuf {
        self.0
            .iter_mut()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.take())
            .map_or_else(|| PathBuf::from(default), PathBuf::from)
    }

    fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| *n == name)
    }
}

/// Executes a client-side command, printing to stdout/stderr; returns the exit status.
pub fn run_client(cmd: &Command) -> i32 {
    run_client_to(cmd, &mut io::stdout().lock(), &mut io::stderr().lock())
}

fn run_client_to(cmd: &Command, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    // Printing can fail (a closed pipe); the exit status still tells what happened.
    match cmd {
        Command::Help => {
            let _ = out.write_all(USAGE.as_bytes());
            EXIT_OK
        }
        Command::Version => {
            let _ = writeln!(out, "raidline {}", env!("CARGO_PKG_VERSION"));
            EXIT_OK
        }
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

    fn p(line: &str) -> Result<Command, UsageError> {
        parse(line.split_whitespace().map(str::to_owned))
    }

    fn err(line: &str) -> String {
        p(line).unwrap_err().to_string()
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
            "--accept-dirty-degraded array start array0",
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

    #[test]
    fn help_and_version_win() {
        for line in [
            "--help",
            "-h",
            "status --help",
            "array fail -h",
            "run --config x -h",
        ] {
            assert_eq!(p(line), Ok(Command::Help), "{line}");
        }
        for line in ["--version", "-V", "status -V"] {
            assert_eq!(p(line), Ok(Command::Version), "{line}");
        }
    }

    #[test]
    fn cc_commands_parse_to_requests() {
        let p = |line: &str| parse(line.split_whitespace().map(str::to_owned));
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
        let p = |line: &str| parse(line.split_whitespace().map(str::to_owned));
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
        for (line, want) in [
            ("ns", "needs a command"),
            ("ns toggle x 1", "unknown ns command 'toggle'"),
            ("ns enable x", "takes SUBSYSTEM NSID"),
            ("ns enable x 1 2", "takes SUBSYSTEM NSID"),
            ("ns disable x 0", "NSID '0' is not a namespace id"),
            ("ns disable x 4294967295", "is not a namespace id"),
            ("ns disable x one", "NSID 'one'"),
        ] {
            let e = p(line).unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            (
                "frobnicate",
                "unknown command 'frobnicate' (run, check-config, status, array, ns, cc)",
            ),
            ("--frob", "unknown option '--frob'"),
            ("status -x", "unknown option '-x'"),
            ("status --socket", "option '--socket' needs a value"),
            ("status --socket --json", "option '--socket' needs a value"),
            ("status --socket=", "option '--socket' needs a value"),
            ("status --json=yes", "option '--json' takes no value"),
            ("status --json --json", "option '--json' given twice"),
            ("run --config a --config b", "option '--config' given twice"),
            (
                "run --socket /s",
                "option '--socket' does not apply to 'raidline run'",
            ),
            (
                "status --config /c",
                "option '--config' does not apply to 'raidline status'",
            ),
            (
                "array scrub a --json",
                "option '--json' does not apply to 'raidline array'",
            ),
            ("cc", "'raidline cc' needs a command: show or set"),
            (
                "cc show x",
                "unexpected argument 'x' for 'raidline cc show'",
            ),
            (
                "cc set rate_mbps",
                "'raidline cc set' takes PARAM VALUE (see 'raidline cc show')",
            ),
            (
                "cc set rate_mbps fast",
                "'raidline cc set': VALUE 'fast' is not a number",
            ),
            (
                "cc set rate_mbps inf",
                "'raidline cc set': VALUE 'inf' is not a number",
            ),
            ("cc tune", "unknown cc command 'tune' (show, set)"),
            (
                "check-config --socket /s",
                "option '--socket' does not apply to 'raidline check-config'",
            ),
            (
                "status now",
                "unexpected argument 'now' for 'raidline status'",
            ),
            ("run x", "unexpected argument 'x' for 'raidline run'"),
            (
                "check-config a b",
                "unexpected argument 'b': 'raidline check-config' takes one PATH",
            ),
            (
                "array",
                "'raidline array' needs a command: fail, add-spare, replace, scrub or start",
            ),
            (
                "array grow a",
                "unknown array command 'grow' (fail, add-spare, replace, scrub, start)",
            ),
            (
                "array start",
                "'raidline array start' needs ARRAY; missing ARRAY",
            ),
            (
                "array start a b",
                "unexpected argument 'b': 'raidline array start' takes ARRAY",
            ),
            (
                "array scrub a --accept-dirty-degraded",
                "option '--accept-dirty-degraded' applies only to 'raidline array start'",
            ),
            (
                "status --accept-dirty-degraded",
                "option '--accept-dirty-degraded' does not apply to 'raidline status'",
            ),
            (
                "array start --accept-dirty-degraded=yes a",
                "option '--accept-dirty-degraded' takes no value",
            ),
            (
                "array start --accept-dirty-degraded --accept-dirty-degraded a",
                "option '--accept-dirty-degraded' given twice",
            ),
            (
                "array fail",
                "'raidline array fail' needs ARRAY MEMBER; missing ARRAY MEMBER",
            ),
            (
                "array fail a",
                "'raidline array fail' needs ARRAY MEMBER; missing MEMBER",
            ),
            (
                "array replace a b",
                "'raidline array replace' needs ARRAY OLD NEW; missing NEW",
            ),
            (
                "array scrub a b",
                "unexpected argument 'b': 'raidline array scrub' takes ARRAY",
            ),
            (
                "array add-spare a b c",
                "unexpected argument 'c': 'raidline array add-spare' takes ARRAY PATH",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(err(line), want, "{line}");
        }
        let empty = parse(["array", "scrub", ""].map(str::to_owned)).unwrap_err();
        assert_eq!(empty.to_string(), "'raidline array scrub': ARRAY is empty");
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

    #[test]
    fn help_version_and_run() {
        let (code, out, _) = run(&Command::Help);
        assert_eq!((code, out.as_str()), (EXIT_OK, USAGE));
        let (code, out, _) = run(&Command::Version);
        assert_eq!(code, EXIT_OK);
        assert_eq!(out, format!("raidline {}\n", env!("CARGO_PKG_VERSION")));
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
