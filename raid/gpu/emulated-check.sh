#!/usr/bin/env bash
# Checks the GPU parity engine on a machine WITHOUT a GPU: builds a fake libcuda.so.1
# (raid/gpu/emulator/fake_cuda.cpp: the driver calls the engine makes, with the parity
# kernels compiled for the CPU from the same source NVRTC compiles, run thread by thread over
# the launch grid) and runs raid's GPU unit tests and the benchmark's correctness pass and
# quick tables against it. NVRTC is real: the kernels are compiled for sm_90 as on the GPU.
#
# This checks the host side end to end (probing, registration, job tables, device-address
# translation — the fake maps registered memory at addresses different from the host's —,
# launch parameters, fallbacks) and the kernels' logic. It says nothing about speed or the
# real driver: the figures it prints are the emulator's, not a GPU's.
#
# NVRTC: $NVRTC_DIR (a directory with libnvrtc.so.13), else pip's nvidia-cuda-nvrtc 13.0 wheel,
# downloaded once into $TMPDIR/raidline-gpu-emu (needs PyPI, ~90 MB).
# Usage: raid/gpu/emulated-check.sh        (needs g++, python3, pip)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${TMPDIR:-/tmp}/raidline-gpu-emu
mkdir -p "$work"

python3 - "$work/kernels.cu" <<'PY'
import sys
s = open("raid/src/gpu/kernels.rs").read()
src = s.split('pub const SOURCE: &str = r#"', 1)[1].split('"#;', 1)[0]
open(sys.argv[1], "w").write(src)
PY
g++ -O2 -std=c++17 -shared -fPIC -Wall -Wno-unknown-pragmas -I"$work" \
  raid/gpu/emulator/fake_cuda.cpp -o "$work/libcuda.so.1"

if [ -z "${NVRTC_DIR:-}" ]; then
  NVRTC_DIR=$work/nvrtc/nvidia/cu13/lib
  if [ ! -e "$NVRTC_DIR/libnvrtc.so.13" ]; then
    pip download --quiet --no-deps 'nvidia-cuda-nvrtc>=13.0,<13.1' -d "$work/wheel"
    for whl in "$work"/wheel/nvidia_cuda_nvrtc-*.whl; do
      python3 -m zipfile -e "$whl" "$work/nvrtc"
    done
  fi
fi
export LD_LIBRARY_PATH="$work:$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/build/gpu}

echo "=== GPU unit tests against the emulator ==="
RAIDLINE_REQUIRE_GPU=1 cargo test -p raidline-raid --features gpu --release --lib -- gpu:: --test-threads=2
echo "=== benchmark (--quick) against the emulator: correctness pass; figures are the emulator's ==="
cargo bench -p raidline-raid --features gpu --bench gpu -- --require-gpu --quick
echo "emulated check passed"
