#!/usr/bin/env bash
# The lab benchmark (not part of CI's pass/fail): raidline against the kernel's target in one
# soft-RoCE guest, same 4 drives, same fio jobs, in alternating rounds.
#
#   deploy/lab/bench.sh [--rounds N] [--runtime SECS] [--io-paths "ring workers"] [--results DIR]
#                       [--jobs "seqwrite-128k ..."]   (a subset of the jobs below; default all)
#                       [--degraded] [--compare REV] [--proto nvme|iser]
#
# Per round, in alternating order (round 1 raidline first, round 2 the kernel first, ...):
#   - raidline (one poller, `io_path` from --io-paths; each listed path is its own phase; a path
#     is written PATH[:MODE][~POLL][+ALGO], e.g. `ring:event` for poll_mode "event", `ring~on`
#     for io_poll "on" (members' completions polled on the guest's NVMe poll queues), or `ring+rtt-aimd`
#     for every I/O queue pair paced by rtt-aimd with its defaults, `ring+fixed,rate_mbps=10000`
#     with parameters, `ring+off` without pacing; a path without +ALGO runs the daemon's default,
#     `off`) serving
#     RAID-5 over the drives (re-created, assume_clean) and a brd RAM disk (/dev/ram0) as a file
#     namespace;
#   - nvmet-rdma over md RAID-5 (internal bitmap, --assume-clean) on the same drives, and over
#     another RAM disk (/dev/ram1).
# Jobs (fio, libaio, direct): randread-4k, randwrite-4k, seqwrite-128k, seqread-128k (QD16) and
# fullstripe-192k (aligned whole-stripe writes, QD16) on the RAID-5 namespaces; the four first on
# the RAM disks (the target path alone). Guest CPU busy % (all vCPUs, /proc/stat) is sampled over
# each job. Output: per job and raidline variant one line
#   RATIO <job> raidline=<median IOPS> kernel=<median IOPS> ratio=<r> cpu_raidline=<%> cpu_kernel=<%>
# (RAM-disk jobs as `ram-<job>`; a variant other than the first as `raidline-<path>=`), after
# the per-round table. Lab figures are ratios only: absolute numbers follow the host's load.
#
# --compare REV: a data-path change measured before and after in the same run. raidline as
# built at REV (a git revision, built in a worktree under build/bench/) runs as one more
# variant in every round, beside the working tree's; its lines read `raidline@<rev>-<path>=`,
# and one more line per job gives the change:
#   CHANGE <job> <path> now=<median IOPS> at_<rev>=<median IOPS> change=<now/then> cpu_now=<%> cpu_then=<%>
#
# --proto iser: the same RAID-5 jobs over iSCSI/iSER instead (issue 18): raidline serves the
# array as LUN 0 of an iSCSI target on an iSER portal, the kernel's side is LIO with ib_isert
# over the md array (`ref-target.sh --proto iser`), and open-iscsi's iser host logs in to each.
# The RAM-disk jobs run over iSER too: raidline's RAM namespace is LUN 0 of a second target,
# LIO serves /dev/ram1 through an iblock backstore. `kernel=` in the output is then LIO.
#
# --degraded: both RAID-5 arrays run with their last drive failed before the jobs
# (`raidline array fail`, `mdadm --fail`): writes reconstruct or skip the missing chunk, reads
# rebuild it. raidline records its degraded writes in its partial-parity log (its default
# `write_hole = "degraded"`), so md runs with its own partial parity log
# (`--consistency-policy=ppl`, which logs every write; md keeps it instead of a bitmap). The
# RAM-disk jobs are unchanged.
#
# The fabric's own floor, each round: perftest's ib_read_bw and ib_write_bw, 128 KiB messages,
# 16 in flight, one thread, client and server in this guest (the path a target's RDMA READ of
# a host write, and RDMA WRITE of a read's data, take; rxe does its work, both ends included,
# on the posting thread's CPU). Output, for the 128 KiB jobs:
#   FLOOR <rdma-read-128k|rdma-write-128k> ops=<median ops/s> cpu=<%> <job>: raidline=<x of ops> kernel=<x>
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ "${LAB_ROLE:-}" = "" ]; then
  # On the host: build, then run this script inside one guest with 4 drives.
  rounds=3 runtime=10 paths="ring workers" results="" only="" degraded="" compare="" proto=nvme
  while [ $# -gt 0 ]; do
    case "$1" in
      --degraded) degraded=1; shift ;;
      --compare) compare=$2; shift 2 ;;
      --rounds) rounds=$2; shift 2 ;;
      --runtime) runtime=$2; shift 2 ;;
      --io-paths) paths=$2; shift 2 ;;
      --results) results=$2; shift 2 ;;
      --jobs) only=$2; shift 2 ;;
      --proto) proto=$2; shift 2 ;;
      *) echo "usage: bench.sh [--rounds N] [--runtime SECS] [--io-paths \"ring workers\"] [--results DIR] [--jobs \"JOB ...\"] [--degraded] [--compare REV] [--proto nvme|iser]" >&2; exit 2 ;;
    esac
  done
  case "$proto" in nvme|iser) ;; *) echo "bench.sh: --proto is nvme or iser, not $proto" >&2; exit 2 ;; esac
  cd "$root"
  cargo build --release --locked -p raidline-target --bin raidline
  then_rev=""
  if [ -n "$compare" ]; then
    then_rev=$(git rev-parse --short "$compare^{commit}") || { echo "bench.sh: no revision $compare" >&2; exit 2; }
    if [ ! -x "$root/build/bench/raidline-$then_rev" ]; then
      tree=$root/build/bench/tree-$then_rev
      rm -rf "$tree"
      git worktree prune
      git worktree add --detach "$tree" "$then_rev" > /dev/null
      # Its own build directory: the working tree's stays as it is.
      (cd "$tree" && CARGO_TARGET_DIR=$root/build/bench/target cargo build --release --locked -p raidline-target --bin raidline)
      cp "$root/build/bench/target/release/raidline" "$root/build/bench/raidline-$then_rev"
      git worktree remove --force "$tree"
    fi
  fi
  builds=1
  [ -z "$then_rev" ] || builds=2
  nvariants=$(( $(wc -w <<< "$paths") * builds + 1 ))
  nphases=$(( nvariants * rounds ))
  timeout=$(( nphases * 9 * (runtime + 12) + 600 ))
  args=(--drives 4 --drive-size 2G --mem 3072 --timeout "$timeout"
        --env "BENCH_ROUNDS=$rounds" --env "FIO_RUNTIME=$runtime" --env "BENCH_PATHS=$paths"
        --env "BENCH_JOBS=$only" --env "BENCH_DEGRADED=$degraded" --env "BENCH_THEN=$then_rev"
        --env "BENCH_PROTO=$proto")
  [ -z "$results" ] || args+=(--results "$results")
  # A polled variant (PATH~on) needs the drives' poll queues; otherwise the guest has none, as
  # in every other lab run.
  [[ " $paths " != *"~on"* ]] || args+=(--poll-queues 1)
  exec "$here/run" "${args[@]}" -- "$here/bench.sh"
fi

# In the guest.
. "$LAB_DIR/guest/lib.sh"
rounds=${BENCH_ROUNDS:-3}
runtime=${FIO_RUNTIME:-10}
read -r -a paths <<< "${BENCH_PATHS:-ring workers}"
nqn=nqn.2026-11.io.raidline:array0
rnqn=nqn.2026-11.io.raidline:ram
knqn=nqn.2026-11.io.raidline:ref-md5
kram=nqn.2026-11.io.raidline:ref-ram
iqn=iqn.2026-12.io.raidline:array0
kiqn=iqn.2026-12.io.raidline:ref-md5
iqn_ram=iqn.2026-12.io.raidline:ram
kiqn_ram=iqn.2026-12.io.raidline:ref-ram
proto=${BENCH_PROTO:-nvme}
jobs=(randread-4k randwrite-4k seqwrite-128k seqread-128k fullstripe-192k)
ramjobs=(randread-4k randwrite-4k seqwrite-128k seqread-128k)
if [ -n "${BENCH_JOBS:-}" ]; then
  # Keep the listed jobs only (on the RAID-5 and the RAM-disk namespaces alike).
  keep() { local j; for j in "$@"; do [[ " $BENCH_JOBS " == *" $j "* ]] && echo "$j"; done; true; }
  mapfile -t jobs < <(keep "${jobs[@]}")
  mapfile -t ramjobs < <(keep "${ramjobs[@]}")
  [ ${#jobs[@]} -gt 0 ] || { lab_fail "--jobs names none of: randread-4k randwrite-4k seqwrite-128k seqread-128k fullstripe-192k"; exit 1; }
fi
out=$LAB_RUN/bench
mkdir -p "$out"
: > "$out/rows.txt"

lab_modules nvme-rdma raid456 nvmet nvmet-rdma
modprobe brd rd_nr=2 rd_size=$((512 * 1024)) || lab_fail "modprobe brd"
lab_nvme_timeouts 30
lab_hostnqn
lab_rxe_up eth0

# busy_pct BEFORE AFTER: guest CPU busy % between two /proc/stat "cpu" lines.
cpu_line() { head -n 1 /proc/stat; }
busy_pct() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); t = 0; idle = 0
    for (i = 2; i <= n; i++) { d = y[i] - x[i]; t += d; if (i == 5 || i == 6) idle += d }
    printf "%.1f", (t > 0 ? 100 * (t - idle) / t : 0) }'
}

# job_args JOB: fio options of a job (size stays inside the smaller RAM disk).
job_args() {
  case "$1" in
    randread-4k) echo "--rw=randread --bs=4k --iodepth=16 --norandommap" ;;
    randwrite-4k) echo "--rw=randwrite --bs=4k --iodepth=16 --norandommap" ;;
    seqwrite-128k) echo "--rw=write --bs=128k --iodepth=16" ;;
    seqread-128k) echo "--rw=read --bs=128k --iodepth=16" ;;
    fullstripe-192k) echo "--rw=write --bs=192k --blockalign=192k --iodepth=16" ;;
  esac
}

# run_jobs LABEL DEV JOB...: one row per job into rows.txt: LABEL JOB IOPS CPU%.
run_jobs() {
  local label=$1 dev=$2 job a b iops
  shift 2
  for job in "$@"; do
    a=$(cpu_line)
    # shellcheck disable=SC2046
    fio --name="$job" --filename="$dev" --ioengine=libaio --direct=1 --size=384m \
      --time_based --ramp_time=2 --runtime="$runtime" --randrepeat=0 $(job_args "$job") \
      --eta=never --output-format=json --output="$out/$label-$job.json" ||
      lab_fail "fio $job on $dev ($label)"
    b=$(cpu_line)
    iops=$(jq -r '[.jobs[] | .read.iops, .write.iops] | add | floor' "$out/$label-$job.json")
    printf '%s %s %s %s\n' "$label" "$job" "$iops" "$(busy_pct "$a" "$b")" | tee -a "$out/rows.txt" >&2
  done
}

# raidline_phase PATH [REV]: the working tree's raidline, or the one built at REV (--compare).
raidline_phase() {
  local path=$1 rev=${2:-} dev rdev label=raidline-$1 variant
  # PATH[:MODE][~POLL][+ALGO]: the io_path, poll mode and io_poll, and the congestion control
  # of every I/O QP.
  variant=(--io-path "${path%%+*}")
  [[ "$path" != *+* ]] || variant+=(--cc "${path#*+}")
  if [ -n "$rev" ]; then
    label=raidline@$rev-$path
    export RAIDLINE_BIN=$LAB_DIR/../../build/bench/raidline-$rev
  else
    unset RAIDLINE_BIN
  fi
  if [ "$proto" = iser ]; then
    "$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" "${variant[@]}" --iscsi "$iqn" \
      --ram-dev /dev/ram0 --ram-nqn "$rnqn" --iscsi-ram "$iqn_ram"
    dev=$(lab_iser_login "$LAB_IP" "$iqn" 60) || lab_fail "iSER login to $iqn"
    rdev=no
    [ ${#ramjobs[@]} -eq 0 ] || rdev=$(lab_iser_login "$LAB_IP" "$iqn_ram" 60) ||
      lab_fail "iSER login to $iqn_ram"
  else
    "$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" "${variant[@]}" \
      --ram-dev /dev/ram0 --ram-nqn "$rnqn"
    nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" > /dev/null || lab_fail "connect $nqn"
    nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$rnqn" > /dev/null || lab_fail "connect $rnqn"
    dev=$(lab_nvme_dev "$nqn" 30)
    rdev=$(lab_nvme_dev "$rnqn" 30)
  fi
  if [ -n "${BENCH_DEGRADED:-}" ]; then
    "$LAB_DIR/raidline.sh" cli array fail array0 "$(lab_nvme_drives | tail -n 1)" > /dev/null ||
      lab_fail "raidline array fail"
  fi
  lab_log "$label: $dev (RAID-5${BENCH_DEGRADED:+, degraded}, $proto), $rdev (RAM disk); threads: $(ls /proc/"$(cat /run/raidline-lab.pid)"/task | wc -l)"
  run_jobs "$label" "$dev" "${jobs[@]}"
  [ ${#ramjobs[@]} -eq 0 ] || run_jobs "$label-ram" "$rdev" "${ramjobs[@]}"
  # By name: io_uring's own workers (iou-wrk-*) count here too.
  lab_log "raidline ($path): threads after the jobs: $(cat /proc/"$(cat /run/raidline-lab.pid)"/task/*/comm | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')"
  "$LAB_DIR/raidline.sh" cli status > "$out/status-$path.txt" 2>&1 || true
  # How the array's stripes were written (whole, read-modify-write, reconstruct-write).
  grep "stripes written" "$out/status-$path.txt" | sed "s/^ */raidline ($path) /" >&2 || true
  if [ "$proto" = iser ]; then
    lab_iser_logout "$iqn"
    [ ${#ramjobs[@]} -eq 0 ] || lab_iser_logout "$iqn_ram"
  else
    nvme disconnect -n "$nqn" > /dev/null
    nvme disconnect -n "$rnqn" > /dev/null
  fi
  "$LAB_DIR/raidline.sh" stop
  unset RAIDLINE_BIN
  # The next phase re-creates arrays over the drives: no superblock of this one may remain.
  for d in $(lab_nvme_drives); do dd if=/dev/zero of="$d" bs=1M count=2 oflag=direct status=none; done
}

# kernel_phase_iser: LIO + ib_isert over md RAID-5 and over a RAM disk, the jobs over
# open-iscsi's iser host.
kernel_phase_iser() {
  local dev rdev
  "$LAB_DIR/ref-target.sh" start --proto iser --addr "$LAB_IP" --nqn "$kiqn" \
    --consistency "$([ -n "${BENCH_DEGRADED:-}" ] && echo ppl || echo bitmap)" \
    --ram-dev /dev/ram1 --ram-iqn "$kiqn_ram"
  if [ -n "${BENCH_DEGRADED:-}" ]; then
    mdadm /dev/md/ref --fail "$(lab_nvme_drives | tail -n 1)" > /dev/null 2>&1 ||
      lab_fail "mdadm --fail"
  fi
  dev=$(lab_iser_login "$LAB_IP" "$kiqn" 60) || lab_fail "iSER login to $kiqn"
  run_jobs kernel "$dev" "${jobs[@]}"
  lab_iser_logout "$kiqn"
  if [ ${#ramjobs[@]} -gt 0 ]; then
    rdev=$(lab_iser_login "$LAB_IP" "$kiqn_ram" 60) || lab_fail "iSER login to $kiqn_ram"
    run_jobs kernel-ram "$rdev" "${ramjobs[@]}"
    lab_iser_logout "$kiqn_ram"
  fi
  "$LAB_DIR/ref-target.sh" stop --proto iser --nqn "$kiqn" --ram-iqn "$kiqn_ram"
  mdadm --zero-superblock $(lab_nvme_drives) 2> /dev/null || true
  for d in $(lab_nvme_drives); do dd if=/dev/zero of="$d" bs=1M count=2 oflag=direct status=none; done
}

kernel_phase() {
  [ "$proto" = nvme ] || { kernel_phase_iser; return; }
  local dev rdev sub cfg=/sys/kernel/config/nvmet
  local port=$cfg/ports/4420
  "$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$knqn" \
    --consistency "$([ -n "${BENCH_DEGRADED:-}" ] && echo ppl || echo bitmap)"
  if [ -n "${BENCH_DEGRADED:-}" ]; then
    mdadm /dev/md/ref --fail "$(lab_nvme_drives | tail -n 1)" > /dev/null 2>&1 ||
      lab_fail "mdadm --fail"
  fi
  sub=$cfg/subsystems/$kram
  mkdir "$sub"
  echo 1 > "$sub/attr_allow_any_host"
  mkdir "$sub/namespaces/1"
  echo /dev/ram1 > "$sub/namespaces/1/device_path"
  echo 1 > "$sub/namespaces/1/enable"
  ln -s "$sub" "$port/subsystems/$kram"
  nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$knqn" > /dev/null || lab_fail "connect $knqn"
  nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$kram" > /dev/null || lab_fail "connect $kram"
  dev=$(lab_nvme_dev "$knqn" 30)
  rdev=$(lab_nvme_dev "$kram" 30)
  run_jobs kernel "$dev" "${jobs[@]}"
  run_jobs kernel-ram "$rdev" "${ramjobs[@]}"
  nvme disconnect -n "$knqn" > /dev/null
  nvme disconnect -n "$kram" > /dev/null
  rm "$port/subsystems/$kram"
  echo 0 > "$sub/namespaces/1/enable"
  rmdir "$sub/namespaces/1" "$sub"
  "$LAB_DIR/ref-target.sh" stop --nqn "$knqn"
  mdadm --zero-superblock $(lab_nvme_drives) 2> /dev/null || true
  for d in $(lab_nvme_drives); do dd if=/dev/zero of="$d" bs=1M count=2 oflag=direct status=none; done
}

# floor_phase: one row per perftest tool, 128 KiB messages (ops/s from its average MiB/s).
floor_phase() {
  local tool job a b line mib
  for tool in ib_read_bw ib_write_bw; do
    job=rdma-${tool#ib_}
    job=${job%_bw}-128k
    a=$(cpu_line)
    lab_perftest_server "$tool" -s 131072 -t 16 -D "$runtime"
    line=$(lab_perftest_client "$tool" "$LAB_IP" -s 131072 -t 16 -D "$runtime" | tail -n 1) ||
      { lab_log "floor: $tool failed"; continue; }
    wait "$LAB_PERF_PID" || true
    b=$(cpu_line)
    # "#bytes #iterations BW-peak BW-average MsgRate": BW in MiB/s.
    mib=$(awk '{ print $4 }' <<< "$line")
    printf '%s %s %s %s\n' floor "$job" "$(awk -v m="$mib" 'BEGIN { printf "%d", m * 8 }')" \
      "$(busy_pct "$a" "$b")" | tee -a "$out/rows.txt" >&2
  done
}

for r in $(seq "$rounds"); do
  lab_log "round $r of $rounds"
  floor_phase
  # With --compare, the revision's build goes first in odd rounds and last in even ones.
  if [ $((r % 2)) -eq 1 ]; then
    if [ -n "${BENCH_THEN:-}" ]; then for p in "${paths[@]}"; do raidline_phase "$p" "$BENCH_THEN"; done; fi
    for p in "${paths[@]}"; do raidline_phase "$p"; done
    kernel_phase
  else
    kernel_phase
    for p in "${paths[@]}"; do raidline_phase "$p"; done
    if [ -n "${BENCH_THEN:-}" ]; then for p in "${paths[@]}"; do raidline_phase "$p" "$BENCH_THEN"; done; fi
  fi
done

# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v l="$1" -v j="$2" -v c="$3" '$1 == l && $2 == j { print $c }' "$out/rows.txt" | median; }

{
  echo "rows (label job IOPS guest-busy-%):"
  cat "$out/rows.txt"
  for p in "${paths[@]}"; do
    name=raidline
    [ "$p" = "${paths[0]}" ] || name=raidline-$p
    for set in main ram; do
      if [ "$set" = main ]; then js=("${jobs[@]}") rl=raidline-$p kl=kernel pre=""; else js=("${ramjobs[@]}") rl=raidline-$p-ram kl=kernel-ram pre=ram-; fi
      for j in "${js[@]}"; do
        ri=$(col "$rl" "$j" 3) ki=$(col "$kl" "$j" 3) rc=$(col "$rl" "$j" 4) kc=$(col "$kl" "$j" 4)
        awk -v j="$pre$j" -v n="$name" -v ri="$ri" -v ki="$ki" -v rc="$rc" -v kc="$kc" 'BEGIN {
          printf "RATIO %s %s=%d kernel=%d ratio=%.2f cpu_raidline=%.1f cpu_kernel=%.1f\n", j, n, ri, ki, (ki > 0 ? ri / ki : 0), rc, kc }'
      done
    done
  done
  # --compare: the same jobs at the revision, and the change (now / then).
  if [ -n "${BENCH_THEN:-}" ]; then
    t=$BENCH_THEN
    for p in "${paths[@]}"; do
      for set in main ram; do
        if [ "$set" = main ]; then js=("${jobs[@]}") nl=raidline-$p tl=raidline@$t-$p kl=kernel pre=""; else js=("${ramjobs[@]}") nl=raidline-$p-ram tl=raidline@$t-$p-ram kl=kernel-ram pre=ram-; fi
        for j in "${js[@]}"; do
          ni=$(col "$nl" "$j" 3) ti=$(col "$tl" "$j" 3) ki=$(col "$kl" "$j" 3) nc=$(col "$nl" "$j" 4) tc=$(col "$tl" "$j" 4)
          awk -v j="$pre$j" -v p="$p" -v t="$t" -v ni="$ni" -v ti="$ti" -v ki="$ki" -v nc="$nc" -v tc="$tc" 'BEGIN {
            printf "RATIO %s raidline@%s-%s=%d kernel=%d ratio=%.2f cpu_raidline=%.1f\n", j, t, p, ti, ki, (ki > 0 ? ti / ki : 0), tc
            printf "CHANGE %s %s now=%d at_%s=%d change=%.2f cpu_now=%.1f cpu_then=%.1f\n", j, p, ni, t, ti, (ti > 0 ? ni / ti : 0), nc, tc }'
        done
      done
    done
  fi
  # The fabric's floor beside the 128 KiB jobs that move their data the same way.
  for f in "rdma-read-128k seqwrite-128k" "rdma-write-128k seqread-128k"; do
    read -r fj j <<< "$f"
    fo=$(col floor "$fj" 3) fc=$(col floor "$fj" 4)
    ri=$(col "raidline-${paths[0]}" "$j" 3) ki=$(col kernel "$j" 3)
    awk -v fj="$fj" -v j="$j" -v fo="$fo" -v fc="$fc" -v ri="$ri" -v ki="$ki" 'BEGIN {
      if (fo > 0) printf "FLOOR %s ops=%d cpu=%.1f %s: raidline=%.2f kernel=%.2f\n", fj, fo, fc, j, ri / fo, ki / fo }'
  done
} | tee "$out/summary.txt"
