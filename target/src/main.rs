//! `raidline`: the NVMe-oF/RDMA RAID-5 target daemon and its management client.

use raidline_target::cli::{self, Command};
use raidline_target::config::Config;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Usage errors exit 2 with clap's message; --help and --version print and exit 0.
    let cmd = cli::parse(args).unwrap_or_else(|e| e.exit());
    let code = match cmd {
        Command::Run { config } => {
            init_logging();
            match Config::load(&config) {
                Ok(c) => raidline_target::service::run(c, &config),
                Err(e) => {
                    tracing::error!("{e}");
                    1
                }
            }
        }
        other => cli::run_client(&other),
    };
    std::process::exit(code);
}

/// Logs to stderr (journald takes it under systemd); `RUST_LOG` filters, default `info`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("JOURNAL_STREAM").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .init();
}
