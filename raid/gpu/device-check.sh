#!/usr/bin/env bash
# GPU device check for the GPU parity engine (issue 8). Runs ON the GPU machine, from the
# repository root, with the prebuilt binaries in .gpu/ (raid/gpu/build-for-device.sh, run
# beforehand on a build machine; carry [".gpu"]). Needs no network, no Rust toolchain, no
# CUDA toolkit beyond the driver's libcuda and an NVRTC library (CUDA 13 preferred).
#
# Steps (each under its own `timeout`; the whole script ends within 5 minutes):
#   1. machine: nvidia-smi, PCIe link, CPU;
#   2. libraries: finds libcuda and libnvrtc (ldconfig, /usr/local/cuda*, /usr/lib, /opt,
#      pip's nvidia packages), makes one loadable under a name cudarc tries
#      (libnvrtc.so / libnvrtc.so.13) and exports LD_LIBRARY_PATH;
#   3. the GPU unit tests (`gpu::`, one thread, RAIDLINE_REQUIRE_GPU=1: a missing GPU fails
#      instead of skipping);
#   4. the benchmark (--require-gpu): correctness, then the tables and key=value summary.
# Everything goes to stdout and $OUT/gpu-check.log; the bench's key=value lines also to
# $OUT/gpu-summary.txt. Exit status: 0 when tests and bench passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/raidline-gpu-check}
mkdir -p "$OUT"
log=$OUT/gpu-check.log
: > "$log"
exec > >(tee -a "$log") 2>&1
tee_pid=$!
start=$(date +%s)
step() { printf '\n=== %s (t=%ss) ===\n' "$*" "$(( $(date +%s) - start ))"; }
fail=0

step "machine"
date -u
uname -a
[ "$(uname -m)" = x86_64 ] || echo "WARNING: the binaries are x86_64; this machine is $(uname -m)"
grep -E '^(PRETTY_NAME)=' /etc/os-release 2>/dev/null
ldd --version 2>/dev/null | head -n 1
lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Socket\(s\)|NUMA node\(s\))'
free -g 2>/dev/null | head -n 2
timeout 15 nvidia-smi || echo "nvidia-smi failed or is missing"
timeout 10 nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,memory.total --format=csv 2>/dev/null
cat .gpu/BUILD-INFO 2>/dev/null || echo "no .gpu/BUILD-INFO: were the binaries carried?"
ls -la .gpu/ 2>/dev/null

step "libraries"
libcuda=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}')
if [ -z "$libcuda" ]; then
  libcuda=$(timeout 15 find /usr/lib /usr/lib64 /usr/local /lib -name 'libcuda.so.1' 2>/dev/null | head -n 1)
fi
echo "libcuda: ${libcuda:-NOT FOUND}"
libdirs=""
[ -n "$libcuda" ] && libdirs=$(dirname "$libcuda")

pyroots=$(timeout 15 python3 - 2>/dev/null <<'PY'
import importlib
roots = set()
for name in ("nvidia", "nvidia.cuda_nvrtc", "nvidia.cu13"):
    try:
        roots.update(getattr(importlib.import_module(name), "__path__", []))
    except Exception:
        pass
print("\n".join(sorted(roots)))
PY
)
candidates=$(
  {
    ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}'
    timeout 20 find /usr/local /usr/lib /usr/lib64 /opt -name 'libnvrtc.so*' 2>/dev/null
    for r in $pyroots; do timeout 10 find "$r" -name 'libnvrtc.so*' 2>/dev/null; done
  } | grep -v builtins | grep -v '\.alt\.' | sort -u
)
echo "libnvrtc candidates:"
printf '%s\n' "$candidates" | sed 's/^/  /'
# Prefer CUDA 13 (the driver's own major), then anything else.
nvrtc=""
for pat in '^libnvrtc\.so\.13' '^libnvrtc\.so$' '^libnvrtc\.so\.'; do
  for c in $candidates; do
    if basename "$c" | grep -qE "$pat"; then nvrtc=$c; break 2; fi
  done
done
if [ -n "$nvrtc" ]; then
  real=$(readlink -f "$nvrtc")
  echo "libnvrtc: $nvrtc -> $real"
  shim=/tmp/raidline-nvrtc
  rm -rf "$shim" && mkdir -p "$shim"
  # cudarc tries libnvrtc.so first, then libnvrtc.so.<CUDA major>; provide both names.
  ln -sf "$real" "$shim/libnvrtc.so"
  ln -sf "$real" "$shim/libnvrtc.so.13"
  for b in "$(dirname "$real")"/libnvrtc-builtins*.so*; do [ -e "$b" ] && ln -sf "$b" "$shim/"; done
  libdirs="$shim:$(dirname "$real")${libdirs:+:$libdirs}"
else
  echo "libnvrtc: NOT FOUND (the engine will report 'no GPU: NVRTC ... is not loadable')"
fi
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
timeout 15 python3 - <<'PY' || true
import ctypes
for name in ("libcuda.so.1", "libnvrtc.so"):
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        print(f"{name}: not loadable: {e}")
        continue
    if name.startswith("libnvrtc"):
        a, b = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
        print(f"{name}: NVRTC {a.value}.{b.value}")
    else:
        v = ctypes.c_int()
        lib.cuDriverGetVersion(ctypes.byref(v))
        print(f"{name}: driver API {v.value}")
PY
if command -v cargo >/dev/null 2>&1; then
  echo "cargo present ($(cargo --version)); not building here: the prebuilt binaries are what is checked"
fi

step "GPU unit tests (raid gpu::, release)"
if [ -x .gpu/raid-gpu-tests ]; then
  RAIDLINE_REQUIRE_GPU=1 timeout 90 .gpu/raid-gpu-tests gpu:: --test-threads=1
  rc=$?
  echo "tests rc=$rc"
  [ "$rc" = 0 ] || fail=1
else
  echo "missing .gpu/raid-gpu-tests"; fail=1
fi

step "GPU parity benchmark"
if [ -x .gpu/raid-gpu-bench ]; then
  timeout 100 .gpu/raid-gpu-bench --require-gpu | tee "$OUT/bench.out"
  rc=${PIPESTATUS[0]}
  echo "bench rc=$rc"
  if [ "$rc" = 124 ] && [ $(( $(date +%s) - start )) -lt 200 ]; then
    echo "the full bench timed out; quick variant:"
    timeout 45 .gpu/raid-gpu-bench --require-gpu --quick | tee "$OUT/bench.out"
    rc=${PIPESTATUS[0]}
    echo "bench --quick rc=$rc"
  fi
  [ "$rc" = 0 ] || fail=1
  grep -E '^[a-z0-9_]+=' "$OUT/bench.out" > "$OUT/gpu-summary.txt" || true
else
  echo "missing .gpu/raid-gpu-bench"; fail=1
fi

step "done"
echo "result: $([ "$fail" = 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - start )) s; log $log"
# Let tee write the last lines before the device tool collects $OUT.
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null
exit "$fail"
