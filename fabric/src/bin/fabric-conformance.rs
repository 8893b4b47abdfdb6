//! `fabric-conformance`: runs the fabric conformance suite against a real RDMA device (rxe in
//! the soft-RoCE lab), client and server looping back through the one device.
//!
//! ```text
//! fabric-conformance --ip 10.0.2.15 [--device rxe0] [--filter NAME] [--timeout-ms 5000]
//! ```
//! `--ip` is the IPv4/IPv6 address of the netdev under the RDMA device (the server listens on
//! it, the client connects to it). Exit status: 0 every case passed (skips are listed), 1 a
//! case failed, 2 usage error, 3 no usable RDMA (library, kernel support or device missing).

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use raidline_fabric::conformance::{run_all, Env, Outcome};
use raidline_fabric::verbs::VerbsFabric;
use raidline_fabric::Fabric;

/// Run the fabric conformance suite against a real RDMA device, client and server looping
/// back through it.
#[derive(Debug, clap::Parser)]
#[command(
    name = "fabric-conformance",
    version,
    after_help = "exit status: 0 every case passed (skips are listed), 1 a case failed, 2 usage error, 3 no usable RDMA"
)]
struct Args {
    /// Address of the netdev under the RDMA device (the server listens on it, the client
    /// connects to it)
    #[arg(long, value_name = "ADDR")]
    ip: IpAddr,
    /// RDMA device [default: the first one]
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// Only the cases whose name contains this
    #[arg(long, default_value = "")]
    filter: String,
    /// Deadline of each step
    #[arg(long = "timeout-ms", value_name = "MS", default_value_t = 5000)]
    timeout_ms: u64,
}

fn main() -> ExitCode {
    // Usage errors exit 2 with clap's message; --help and --version print and exit 0.
    let args = <Args as clap::Parser>::parse();
    let dev = match VerbsFabric::open(args.device.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("fabric-conformance: {e}");
            return ExitCode::from(3);
        }
    };
    let a = dev.attrs();
    println!(
        "device {}: max_qp_wr {} max_sge {} max_qp_rd_atom {} max_srq_wr {} max_mr_size {} timestamps {}",
        a.name, a.max_qp_wr, a.max_sge, a.max_qp_rd_atom, a.max_srq_wr, a.max_mr_size, a.completion_timestamps
    );
    let env = Env {
        server: &dev,
        client: &dev,
        ip: args.ip,
        timeout: Duration::from_millis(args.timeout_ms),
    };
    let report = run_all(&env, &args.filter, |name, res| match res {
        Ok(Outcome::Passed) => println!("PASS {name}"),
        Ok(Outcome::Skipped(why)) => println!("SKIP {name}: {why}"),
        Err(e) => println!("FAIL {name}: {e}"),
    });
    println!(
        "fabric conformance on {}: {} passed, {} skipped, {} failed",
        a.name,
        report.passed.len(),
        report.skipped.len(),
        report.failed.len()
    );
    if report.failed.is_empty() && !report.passed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
