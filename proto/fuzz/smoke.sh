#!/usr/bin/env bash
# Runs every fuzz target of a crate for N seconds (default 10) and prints executions per target:
# proto's (this directory) unless another crate's fuzz directory is given (scsi/fuzz).
# Uses the nightly toolchain when it is installed; otherwise the stable one with
# RUSTC_BOOTSTRAP=1 and no sanitizer (proto has no unsafe code: libFuzzer's coverage and the
# asserts in the targets are what find bugs here).
#   proto/fuzz/smoke.sh [SECONDS] [FUZZ_DIR]
set -euo pipefail
secs=${1:-10}
cd "${2:-$(dirname "$0")}"
here=$(basename "$(dirname "$PWD")")/fuzz
if rustup run nightly rustc --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
  san=(--sanitizer address)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  san=(--sanitizer none)
fi
"${fuzz[@]}" build -O "${san[@]}" 2>&1 | grep -vE '^\s+(Compiling|Downloaded|Downloading)' || true
mapfile -t targets < <("${fuzz[@]}" list)
[ "${#targets[@]}" -gt 0 ] || { echo "fuzz: no targets found" >&2; exit 1; }
printf '%-16s %12s %8s\n' target executions seconds
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log=$(mktemp)
  if ! "${fuzz[@]}" run -O "${san[@]}" "$t" "corpus/$t" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: target $t FAILED (crash input saved under $here/artifacts/$t)" >&2
    rm -f "$log"
    exit 1
  fi
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  rm -f "$log"
  printf '%-16s %12s %8s\n' "$t" "${execs:-?}" "$secs"
done
