//! `raidline-ccsim`: run congestion-control scenarios and write a markdown table and SVG plots.
//!
//! Usage: `raidline-ccsim SCENARIO.toml... [--out DIR] [--run LABEL]... [--no-plots] [--series US]
//! [--seed N]` (`--seed` replaces every scenario's seed, to measure how results vary with it)
//! Every run of every scenario is simulated (or only the labels given with `--run`); the table is
//! printed and written to `DIR/<scenario>.md`, the plots to `DIR/<scenario>-<label>-{queue,rates}.svg`.
//! This is the only place that reads files or the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use raidline_cc::sim::{self, markdown_table, plot, RunResult, Scenario};

struct Args {
    scenarios: Vec<PathBuf>,
    out: Option<PathBuf>,
    only: Vec<String>,
    plots: bool,
    series_us: Option<f64>,
    seed: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        scenarios: Vec::new(),
        out: None,
        only: Vec::new(),
        plots: true,
        series_us: None,
        seed: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--out" => a.out = Some(it.next().ok_or("--out needs a directory")?.into()),
            "--run" => a.only.push(it.next().ok_or("--run needs a label")?),
            "--no-plots" => a.plots = false,
            "--series" => {
                let v = it.next().ok_or("--series needs a period in us")?;
                a.series_us = Some(v.parse().map_err(|_| format!("--series: bad period {v}"))?);
            }
            "--seed" => {
                let v = it.next().ok_or("--seed needs a number")?;
                a.seed = Some(v.parse().map_err(|_| format!("--seed: bad seed {v}"))?);
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => a.scenarios.push(s.into()),
        }
    }
    if a.scenarios.is_empty() {
        return Err("no scenario given".into());
    }
    Ok(a)
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
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("raidline-ccsim: {e}");
            }
            eprintln!("usage: raidline-ccsim SCENARIO.toml... [--out DIR] [--run LABEL]... [--no-plots] [--series US] [--seed N]");
            return ExitCode::from(2);
        }
    };
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
