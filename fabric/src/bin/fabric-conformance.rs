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

const USAGE: &str =
    "usage: fabric-conformance --ip ADDR [--device NAME] [--filter NAME] [--timeout-ms MS]";

struct Args {
    ip: IpAddr,
    device: Option<String>,
    filter: String,
    timeout: Duration,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut ip, mut device, mut filter, mut timeout) = (None, None, String::new(), 5000u64);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ip" => ip = Some(val()?.parse::<IpAddr>().map_err(|e| format!("--ip: {e}"))?),
            "--device" => device = Some(val()?),
            "--filter" => filter = val()?,
            "--timeout-ms" => timeout = val()?.parse().map_err(|e| format!("--timeout-ms: {e}"))?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        ip: ip.ok_or("--ip is required")?,
        device,
        filter,
        timeout: Duration::from_millis(timeout),
    })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("fabric-conformance: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
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
        timeout: args.timeout,
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
