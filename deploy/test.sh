#!/usr/bin/env bash
# The one test command (README, .ci/run): installs what it needs, then runs every stage.
#   format check → clippy (warnings are errors) → all workspace tests → fuzz smoke → lab stage
# Environment:
#   RAIDLINE_FUZZ_SECS   seconds per fuzz target (default 10)
#   RAIDLINE_SKIP_LAB=1  skip the soft-RoCE lab stage (for quick local iterations only; CI runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Each stage header says how much disk is left, so a run that dies of a full disk says so early.
stage() {
  printf '\n=== %s ===\n' "$*"
  df -h --output=avail,target "$root" 2>/dev/null | awk 'NR==2 {print "disk: " $1 " free on " $2}' || true
}

stage setup
if [ "${RAIDLINE_SKIP_LAB:-0}" = 1 ]; then deploy/setup.sh; else deploy/setup.sh --lab; fi

stage "format check"
cargo fmt --all -- --check

stage "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The RAID benchmark's ISA-L comparison is behind a feature: keep it compiling too.
cargo clippy -p raidline-raid --all-targets --features isal --locked -- -D warnings
# The GPU parity engine (run-time loaded CUDA: builds and runs without one).
cargo clippy -p raidline-raid --all-targets --features gpu --locked -- -D warnings

stage "workspace tests"
cargo test --workspace --locked
# The GPU engine's tests run where a GPU is present and report themselves skipped elsewhere.
cargo test -p raidline-raid --features gpu --locked --lib -- gpu::
# The RAID model test again at 3000 cases per write-hole policy (about 30 s here; the
# workspace run above does 256): a regression of the crash-safety rules shows up in the run
# that causes it, not one run in twenty.
PROPTEST_CASES=3000 cargo test -p raidline-raid --locked --test model

stage "fuzz smoke"
for crate in proto scsi; do
  "$root/proto/fuzz/smoke.sh" "${RAIDLINE_FUZZ_SECS:-10}" "$root/$crate/fuzz"
done

if [ "${RAIDLINE_SKIP_LAB:-0}" = 1 ]; then
  stage "lab stage skipped (RAIDLINE_SKIP_LAB=1)"
else
  stage "soft-RoCE lab"
  if [ -x deploy/lab/ci-stage.sh ]; then
    deploy/lab/ci-stage.sh
  else
    echo "lab: deploy/lab/ci-stage.sh does not exist yet (issue 4)"
  fi
fi
stage "all stages passed"
