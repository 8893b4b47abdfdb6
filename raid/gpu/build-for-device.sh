#!/usr/bin/env bash
# Builds what the GPU device check runs, here (no GPU needed), into the ignored folder .gpu/:
#   .gpu/raid-gpu-tests   raid's unit-test binary, feature `gpu`, release (run it with `gpu::`)
#   .gpu/raid-gpu-bench   the GPU parity benchmark (raid/benches/gpu.rs), release
#   .gpu/BUILD-INFO       commit, toolchain, glibc of the build
# Both are stripped and together must stay under 60 MiB (the device tool carries 64 MiB).
# CUDA is loaded at run time (cudarc dynamic loading), so nothing CUDA is needed to build.
# Built on Debian 12 (glibc 2.36): they run on any newer glibc (the GPU machine's Ubuntu).
# Usage: raid/gpu/build-for-device.sh        (from anywhere; CARGO_TARGET_DIR defaults to build/gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/build/gpu}"
out=$root/.gpu
mkdir -p "$out"

# Path of the executable cargo reports for the artifact matching a jq filter.
executable() {
  jq -r "select(.reason == \"compiler-artifact\" and .executable != null and ($1)) | .executable" | tail -n 1
}

echo "building the unit-test binary (feature gpu, release)..."
tests=$(cargo test -p raidline-raid --features gpu --release --lib --no-run --message-format=json \
  | executable '.target.kind == ["lib"] and .profile.test')
echo "building the benchmark (feature gpu, release)..."
bench=$(cargo bench -p raidline-raid --features gpu --bench gpu --no-run --message-format=json \
  | executable '.target.name == "gpu"')
[ -x "$tests" ] || { echo "no test executable found" >&2; exit 1; }
[ -x "$bench" ] || { echo "no bench executable found" >&2; exit 1; }

install -m 755 "$tests" "$out/raid-gpu-tests"
install -m 755 "$bench" "$out/raid-gpu-bench"
strip "$out/raid-gpu-tests" "$out/raid-gpu-bench"

{
  echo "commit=$(git rev-parse HEAD)$(git diff --quiet -- raid || echo '+dirty')"
  echo "built=$(date -u +%FT%TZ)"
  echo "rustc=$(rustc --version)"
  echo "glibc=$(ldd --version | head -n 1)"
  echo "tests_from=$tests"
  echo "bench_from=$bench"
} > "$out/BUILD-INFO"

total=$(du -cb "$out/raid-gpu-tests" "$out/raid-gpu-bench" | tail -n 1 | cut -f 1)
ls -la "$out"
echo "total: $((total / 1024 / 1024)) MiB ($total bytes)"
if [ "$total" -gt $((60 * 1024 * 1024)) ]; then
  echo "too large for the device tool (limit 60 MiB)" >&2
  exit 1
fi
# The binaries must run without CUDA (they report 'no GPU' here and exit 0). The whole
# output is read before its first line is shown: a pipe closed early would fail the bench.
probe=$("$out/raid-gpu-bench" 2>&1) || {
  printf '%s\n' "$probe"
  echo "the bench failed on this machine (expected: 'no GPU: ...' and exit 0)" >&2
  exit 1
}
printf '%s\n' "$probe" | sed -n 1p
echo "ready: carry [\".gpu\"] and run raid/gpu/device-check.sh on the GPU machine"
