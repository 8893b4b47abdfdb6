#!/usr/bin/env bash
# Live pacing in the lab (guest side): raidline serves the RAID-5 with every I/O queue pair paced
# by the `fixed` algorithm; the kernel host connects with ONE I/O queue (so the device's
# throughput is one QP's), fio streams 128 KiB reads, and the achieved rate is compared with the
# setting; then `raidline cc set` halves the rate at run time and the next fio run must follow.
# `raidline status` (rate and RTT per queue pair) is printed after each run.
#
#   deploy/lab/run --drives 4 -- deploy/lab/pacing.sh
#   env: PACING_MB_S (default 2: MB/s, well below what one queue pair moves in the TCG guest,
#        ~9 MB/s with a busy loop on one of the host's 2 cores, ~6-12 MB/s without: at 4 MB/s
#        on that loaded host fio got 3.71 MB/s, and 3.80 in CI's run of 2026-12-07; 2 MB/s got
#        1.99. Why the pacer falls short there is not traced yet; the lead: a guest stalled
#        longer than the bucket holds (256 KiB: 64 ms at 4 MB/s, 128 ms at 2) loses what it
#        would have earned beyond it, by design, and a loaded TCG guest stalls for tens of ms),
#        PACING_SECS (default 10), PACING_TOL_PCT (default 5)
# Exit status 0 when both runs land within the tolerance, 1 otherwise.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"
nqn=nqn.2026-11.io.raidline:array0
mb=${PACING_MB_S:-2}
secs=${PACING_SECS:-10}
tol=${PACING_TOL_PCT:-5}
bin=${RAIDLINE_BIN:-$LAB_DIR/../../build/release/raidline}
lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0
"$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" --bin "$bin" --cc-rate $((mb * 8))
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" --nr-io-queues=1
dev=$(lab_nvme_dev "$nqn" 30)
fail=0

# measure WANT_MB_S: one fio run of sequential 128 KiB reads at QD 16; checks the bandwidth.
measure() {
  local want=$1 out bw
  out=$(fio --name=paced --filename="$dev" --ioengine=libaio --direct=1 --rw=read --bs=128k \
    --iodepth=16 --size=1g --time_based --runtime="$secs" --ramp_time=2 --eta=never \
    --output-format=json)
  # fio's bw_bytes: bytes per second over the run, ramp excluded.
  bw=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"])')
  local got_mb
  got_mb=$(python3 -c "print(f'{$bw/1e6:.2f}')")
  if python3 -c "import sys; sys.exit(0 if abs($bw/1e6/$want - 1) <= $tol/100 else 1)"; then
    echo "== PASS: set $want MB/s per QP, fio read $got_mb MB/s (±$tol %)"
  else
    echo "== FAIL: set $want MB/s per QP, fio read $got_mb MB/s (outside ±$tol %)"
    fail=1
  fi
  "$bin" status --socket /run/raidline/raidline.sock | sed -n '/cntlid/,$p'
}

echo "== fixed rate $mb MB/s per queue pair, one I/O queue, fio 128 KiB reads QD 16, $secs s"
measure "$mb"
half=$((mb / 2))
echo "== raidline cc set rate_mbps $((half * 8))"
"$bin" cc set rate_mbps $((half * 8)) --socket /run/raidline/raidline.sock
sleep 1
measure "$half"
nvme disconnect -n "$nqn"
"$LAB_DIR/raidline.sh" stop
exit $fail
