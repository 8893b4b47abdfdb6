//! `raidline-ccsim`: run congestion-control scenarios and write a markdown table and SVG plots.
//!
//! Usage: `raidline-ccsim SCENARIO.toml... [--out DIR] [--run LABEL]... [--no-plots] [--series US]
//! [--seed N]` (`--seed` replaces every scenario's seed, to measure how results vary with it;
//! `--help` for the rest)
//! Every run of every scenario is simulated (or only the labels given with `--run`); the table is
//! printed and written to `DIR/<scenario>.md`, the plots to `DIR/<scenario>-<label>-{queue,rates}.svg`.
//! This is the only place that reads files or the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use raidline_cc::sim::{self, markdown_table, plot, RunResult, Scenario};

/// Run congestion-control scenarios: print a markdown table per scenario and write it, with SVG
/// plots, to DIR.
#[derive(Debug, clap::Parser)]
#[command(
    name = "raidline-ccsim",
    version,
    after_help = "exit status: 0 done, 1 a scenario failed, 2 usage error"
)]
struct Args {
    /// Scenario files (cc/scenarios/*.toml)
    #[arg(value_name = "SCENARIO.toml", required = true)]
    scenarios: Vec<PathBuf>,
    /// Where the tables and plots go [default: cc/results]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Only the runs with this label (repeatable)
    #[arg(long = "run", value_name = "LABEL")]
    only: Vec<String>,
    /// Write no plots
    #[arg(long = "no-plots", action = clap::ArgAction::SetFalse)]
    plots: bool,
    /// Print a time series every US microseconds of simulated time
    #[arg(long = "series", value_name = "US")]
    series_us: Option<f64>,
    /// Replace every scenario's seed (to see how results vary with it)
    #[arg(long)]
    seed: Option<u64>,
}

fn write_outputs(dir: &Path, name: &str, results: &[RunResult], plots: bool) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let table = dir.join(format!("{name}.md"));
    std::fs::write(&table, markdown_table(results))
        .map_err(|e| format!("{}: {e}", table.display()))?;
    if plots {
        for r in results {
            let base = format!("{}-{}", r.scenario, r.label.replace(['+', ' ', '/'], "_"));
            plot::queue_svg(r, &dir.join(format!("{base}-queue.svg")))
                .map_err(|e| e.to_string())?;
            plot::rates_svg(r, &dir.join(format!("{base}-rates.svg")))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn print_series(r: &RunResult, period_us: f64) {
    let mut next = 0.0;
    eprintln!(
        "# {} / {}: t_ms queue_KB goodput_Gbps jain offered_Gbps rates_Mbps({:?})",
        r.scenario, r.label, r.tracked
    );
    for s in &r.samples {
        let t = s.t.as_us_f64();
        if t + 1e-9 < next {
            continue;
        }
        next = t + period_us;
        let rates: Vec<String> = s.rates_mbps.iter().map(|v| format!("{v:.2}")).collect();
        eprintln!(
            "{:8.3} {:9.1} {:7.2} {:6.3} {:7.2} {}",
            t / 1e3,
            s.queue as f64 / 1e3,
            s.goodput_gbps,
            s.jain.unwrap_or(f64::NAN),
            s.offered_gbps,
            rates.join(" ")
        );
    }
}

fn main() -> ExitCode {
    // Usage errors exit 2 with clap's message; --help and --version print and exit 0.
    let args = <Args as clap::Parser>::parse();
    let mut all = Vec::new();
    for path in &args.scenarios {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("raidline-ccsim: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        let mut sc = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("raidline-ccsim: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        if let Some(seed) = args.seed {
            sc.seed = seed;
        }
        let mut results = Vec::new();
        for spec in &sc.runs {
            if !args.only.is_empty() && !args.only.contains(&spec.label()) {
                continue;
            }
            let t0 = Instant::now();
            match sim::run(&sc, spec) {
                Ok(r) => {
                    eprintln!(
                        "{} / {}: {:.1} s wall, {} events, goodput {:.2} Gb/s, peak queue {:.3} MB, drops {}, rto {}, nacks {}, conserved {}, jain {}, convergence {}",
                        sc.name,
                        r.label,
                        t0.elapsed().as_secs_f64(),
                        r.counters.events,
                        r.goodput_gbps,
                        r.peak_queue as f64 / 1e6,
                        r.drops,
                        r.counters.rto_fired,
                        r.counters.nacks,
                        r.conserved,
                        r.jain.map_or("-".to_owned(), |j| format!("{j:.5}")),
                        r.convergence
                            .map_or("-".to_owned(), |c| format!("{:.2} ms", c.as_secs_f64() * 1e3))
                    );
                    if let Some(period) = args.series_us {
                        print_series(&r, period);
                    }
                    results.push(r);
                }
                Err(e) => {
                    eprintln!("raidline-ccsim: {} / {}: {e}", sc.name, spec.label());
                    return ExitCode::FAILURE;
                }
            }
        }
        if let Some(dir) = &args.out {
            if let Err(e) = write_outputs(dir, &sc.name, &results, args.plots) {
                eprintln!("raidline-ccsim: {e}");
                return ExitCode::FAILURE;
            }
        }
        all.extend(results);
    }
    print!("{}", markdown_table(&all));
    ExitCode::SUCCESS
}
