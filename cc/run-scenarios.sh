#!/usr/bin/env bash
# Run every simulator scenario (release build) and write tables and SVG plots to cc/results/.
# Not part of `cargo test`: S1-S5 take tens of seconds in all on two cores.
#   cc/run-scenarios.sh [scenario.toml...]
set -euo pipefail
cd "$(dirname "$0")/.."
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(cc/scenarios/s1.toml cc/scenarios/s1-nodither.toml cc/scenarios/s1-ctcc-ns3.toml cc/scenarios/s1-ctcc-ns3-mtu9000.toml cc/scenarios/s1-ctcc-hostagg.toml cc/scenarios/s1-ctcc-hostagg-roce.toml cc/scenarios/s1-ctcc-hostagg-mtu1024.toml cc/scenarios/s1-roce82.toml cc/scenarios/s1-ctcc-long.toml cc/scenarios/s2.toml cc/scenarios/s3.toml cc/scenarios/s5.toml)
cargo build --release -p raidline-cc --bin raidline-ccsim
exe="${CARGO_TARGET_DIR:-build}/release/raidline-ccsim"
"$exe" "${scenarios[@]}" --out cc/results
