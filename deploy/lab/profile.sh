#!/usr/bin/env bash
# Where the time goes (not part of CI): one fio job against raidline or the kernel's target in
# a soft-RoCE guest, with `perf record -a -g` over the whole guest while it runs.
#
#   deploy/lab/profile.sh [--job JOB] [--target raidline|kernel] [--io-path ring|workers]
#                         [--cores N] [--runtime SECS] [--tool perf|strace|callgrind|none]
#                         [--results DIR] [--bin PATH]
#                         [--pin "FIO_CPUS TARGET_CPUS"]
#
# JOB: one of bench.sh's jobs (randread-4k, randwrite-4k, seqwrite-128k, seqread-128k,
# fullstripe-192k; default randwrite-4k), on RAID-5 over 4 emulated drives (raidline's, or md
# with an internal bitmap under nvmet-rdma). Output in the results directory (default
# deploy/lab/runs/<run>/profile): fio's JSON, `perf report` by command and thread, by shared
# object and by symbol (no children: self time), the call graph of the top symbols, and the
# guest's CPU busy % over the job; for raidline, CPU time per thread from /proc (schedstat).
# `--tool strace` counts raidline's system calls per thread instead (`strace -c -f`; it slows
# the daemon, so its IOPS are not comparable): what each I/O costs in calls and wake-ups.
# `--tool none` runs no profiler. `--tool callgrind` runs raidline under valgrind's callgrind
# (one file per thread): instructions per host I/O on the poller thread by function and by
# object (raidline, rdma-core's provider, libc, ...), exact where TCG's sampling is not; the
# daemon runs several times slower, so its IOPS mean nothing, only the counts per I/O.
# `--pin "0 1"` runs fio on CPU 0 and raidline's threads on CPU 1 (taskset). Every run also
# reports, per block device, the operations over the job from /proc/diskstats (`disks.txt`):
# reads, writes and flushes per host I/O, their mean latency and the mean number in flight
# (what the drives saw, whoever drove them).
# `--bin PATH`: profile that raidline binary (for example a worktree's build at an earlier
# commit, `bench.sh --compare` leaves one in build/bench/target/release/) instead of building
# build/release/raidline.
# Under TCG perf samples the guest's clock: read its shares as rough, and prefer the thread
# CPU times and call counts for comparisons.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ "${LAB_ROLE:-}" = "" ]; then
  job=randwrite-4k target=raidline io_path=ring cores=1 runtime=20 results="" tool=perf pin="" bin=""
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { echo "profile.sh: $1 needs a value" >&2; exit 2; }
    case "$1" in
      --job) job=$2 ;; --target) target=$2 ;; --io-path) io_path=$2 ;; --cores) cores=$2 ;;
      --runtime) runtime=$2 ;; --results) results=$2 ;; --tool) tool=$2 ;; --pin) pin=$2 ;;
      --bin) bin=$(realpath "$2") ;;
      *) echo "usage: profile.sh [--job JOB] [--target raidline|kernel] [--io-path ring|workers] [--cores N] [--runtime SECS] [--tool perf|strace|callgrind|none] [--results DIR] [--bin PATH]" >&2; exit 2 ;;
    esac
    shift 2
  done
  cd "$root"
  [ -n "$bin" ] || cargo build --release --locked -p raidline-target --bin raidline
  # Under valgrind the daemon starts and stops in minutes, not seconds.
  extra=0; [ "$tool" != callgrind ] || extra=1800
  args=(--drives 4 --drive-size 2G --mem 3072 --timeout $((runtime * 3 + 600 + extra))
        --env "PROF_JOB=$job" --env "PROF_TARGET=$target" --env "PROF_IO_PATH=$io_path"
        --env "PROF_CORES=$cores" --env "FIO_RUNTIME=$runtime" --env "PROF_TOOL=$tool"
        --env "PROF_PIN=$pin" --env "PROF_BIN=$bin")
  [ -z "$results" ] || args+=(--results "$results")
  exec "$here/run" "${args[@]}" -- "$here/profile.sh"
fi

# In the guest.
. "$LAB_DIR/guest/lib.sh"
job=${PROF_JOB:-randwrite-4k}
target=${PROF_TARGET:-raidline}
runtime=${FIO_RUNTIME:-20}
out=$LAB_RUN/profile
mkdir -p "$out"
nqn=nqn.2026-11.io.raidline:array0
knqn=nqn.2026-11.io.raidline:ref-md5

lab_modules nvme-rdma raid456 nvmet nvmet-rdma
lab_nvme_timeouts 30
lab_hostnqn
lab_rxe_up eth0
tool=${PROF_TOOL:-perf}
case "$tool" in
  none) ;;
  callgrind) command -v valgrind > /dev/null || lab_fail "valgrind is not installed on the host (apt-get install valgrind)" ;;
  *) command -v "${tool%-poller}" > /dev/null || lab_fail "$tool is not installed on the host (apt-get install linux-perf strace)" ;;
esac
# Kernel symbols and call graphs of every process.
echo -1 > /proc/sys/kernel/perf_event_paranoid
echo 0 > /proc/sys/kernel/kptr_restrict

case "$job" in
  randread-4k) fio_args="--rw=randread --bs=4k --iodepth=16 --norandommap" ;;
  randwrite-4k) fio_args="--rw=randwrite --bs=4k --iodepth=16 --norandommap" ;;
  seqwrite-128k) fio_args="--rw=write --bs=128k --iodepth=16" ;;
  seqread-128k) fio_args="--rw=read --bs=128k --iodepth=16" ;;
  fullstripe-192k) fio_args="--rw=write --bs=192k --blockalign=192k --iodepth=16" ;;
  *) lab_fail "unknown job $job" ;;
esac

pid=""
if [ "$target" = raidline ]; then
  # The poller's own account of its time by phase, logged when it stops (a clock read per
  # phase: negligible next to a pass's cost here).
  export RAIDLINE_POLLER_PHASES=1
  bin=()
  root_bin=${PROF_BIN:-$(cd "$LAB_DIR/../.." && pwd)/build/release/raidline}
  [ -z "${PROF_BIN:-}" ] || bin=(--bin "$root_bin")
  if [ "$tool" = callgrind ]; then
    # `raidline run` under callgrind, one output file per thread; its other commands as they are.
    cat > "$out/raidline-callgrind" <<EOS
#!/bin/sh
[ "\$1" = run ] || exec "$root_bin" "\$@"
exec valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/callgrind.out" "$root_bin" "\$@"
EOS
    chmod +x "$out/raidline-callgrind"
    bin=(--bin "$out/raidline-callgrind")
    export RAIDLINE_LAB_READY_S=900
  fi
  "$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" --io-path "${PROF_IO_PATH:-ring}" \
    --cores "${PROF_CORES:-1}" "${bin[@]}"
  pid=$(cat /run/raidline-lab.pid)
  sub=$nqn
else
  "$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$knqn"
  sub=$knqn
fi
# --pin "FIO_CPUS TARGET_CPUS": fio on the first set, raidline's threads on the second.
fio_pin=()
if [ -n "${PROF_PIN:-}" ]; then
  read -r fio_cpus target_cpus <<< "$PROF_PIN"
  fio_pin=(taskset -c "$fio_cpus")
  [ -z "$pid" ] || taskset -a -p -c "$target_cpus" "$pid" > /dev/null
fi
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$sub" > /dev/null || lab_fail "connect $sub"
dev=$(lab_nvme_dev "$sub" 30)

# Warm up: every bitmap region written once (raidline's first write to a region marks it).
# shellcheck disable=SC2086
"${fio_pin[@]}" fio --name=warm --filename="$dev" --ioengine=libaio --direct=1 --size=384m --time_based \
  --runtime=5 --randrepeat=0 $fio_args --eta=never --output-format=json --output="$out/warm.json" > /dev/null ||
  lab_fail "fio warm-up"

# Per thread: id, name, CPU ns (schedstat), user and system ticks (stat fields 14 and 15).
threads_cpu() {
  [ -n "$pid" ] || return 0
  for t in /proc/"$pid"/task/*; do
    printf '%s %s %s %s\n' "$(basename "$t")" "$(cat "$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")" \
      "$(sed 's/.*) //' "$t/stat" | awk '{ print $12, $13 }')"
  done
}
# raidline's data-path counters (loop passes, sleeps, ring operations, where requests ran).
metrics_snap() {
  [ -n "$pid" ] || return 0
  exec 3<>/dev/tcp/127.0.0.1/9420 || return 0
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  grep -E '^raidline_(poller_|ring_operations|storage_requests|gathered|parked|array_stripe_writes)' <&3 |
    sed 's/ /\t/' | sort || true
  exec 3<&-
}
# Per thread: voluntary and involuntary context switches.
threads_switches() {
  [ -n "$pid" ] || return 0
  for t in /proc/"$pid"/task/*; do
    printf '%s %s %s %s\n' "$(basename "$t")" "$(cat "$t/comm")" \
      "$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")" \
      "$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status")"
  done 2> /dev/null | sort
}
# Every thread of the guest: id, name, CPU ns (schedstat), involuntary switches (what the
# target's work costs wherever it runs: kworkers, softirq threads, fio, md).
guest_threads() {
  for t in /proc/[0-9]*/task/[0-9]*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ < "$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")" \
      "$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status")"
  done 2> /dev/null | sort
}
guest_threads > "$out/guest-before.txt"
threads_cpu > "$out/threads-before.txt"
threads_switches > "$out/switches-before.txt"
metrics_snap > "$out/metrics-before.txt"
cp /proc/diskstats "$out/diskstats-before.txt"
cp /proc/interrupts "$out/interrupts-before.txt"
grep '^cpu[0-9]' /proc/stat > "$out/cpus-before.txt"
a=$(head -n 1 /proc/stat)
t0=$(date +%s%N)
echo "PROFILE-WINDOW start $(date +%s.%N)" >&2
# shellcheck disable=SC2086
"${fio_pin[@]}" fio --name="$job" --filename="$dev" --ioengine=libaio --direct=1 --size=384m --time_based \
  --ramp_time=2 --runtime="$runtime" --randrepeat=0 $fio_args --eta=never \
  --output-format=json --output="$out/fio.json" &
fio_pid=$!
sleep 3
if [ "$tool" = strace ]; then
  [ -n "$pid" ] || lab_fail "--tool strace profiles raidline only"
  timeout -s INT $((runtime - 4)) strace -c -f -p "$pid" -o "$out/strace.txt" 2> /dev/null || true
elif [ "$tool" = none ] || [ "$tool" = callgrind ]; then
  :
elif [ "$tool" = perf-poller ]; then
  # Only raidline's first poller thread: its samples, not the idle loop's.
  tid=$(grep -l '^poller-0$' /proc/"$pid"/task/*/comm | head -n 1 | cut -d/ -f5)
  perf record -g -F 999 -t "$tid" -o "$out/perf.data" -- sleep $((runtime - 4)) 2> "$out/perf-record.log" ||
    lab_fail "perf record"
else
  perf record -a -g -F 499 -o "$out/perf.data" -- sleep $((runtime - 4)) 2> "$out/perf-record.log" ||
    lab_fail "perf record"
fi
wait "$fio_pid" || lab_fail "fio $job"
b=$(head -n 1 /proc/stat)
t1=$(date +%s%N)
echo "PROFILE-WINDOW end $(date +%s.%N)" >&2
cp /proc/diskstats "$out/diskstats-after.txt"
cp /proc/interrupts "$out/interrupts-after.txt"
grep '^cpu[0-9]' /proc/stat > "$out/cpus-after.txt"
threads_cpu > "$out/threads-after.txt"
guest_threads > "$out/guest-after.txt"
threads_switches > "$out/switches-after.txt"
metrics_snap > "$out/metrics-after.txt"
iops=$(jq -r '[.jobs[] | .read.iops, .write.iops] | add | floor' "$out/fio.json")
ios_total=$(jq -r '[.jobs[] | .read.total_ios, .write.total_ios] | add' "$out/fio.json")
# Per device over the whole fio run (ramp included, so per-I/O counts are slightly high):
# operations per host I/O, mean latency (ms) and mean in flight (weighted ms / elapsed ms).
join <(awk '$3 ~ /^(nvme[0-9]+n[0-9]+|md[0-9]+)$/ { print $3, $4, $7, $8, $11, $13, $14, $19, $20 }' \
        "$out/diskstats-before.txt" | sort) \
     <(awk '$3 ~ /^(nvme[0-9]+n[0-9]+|md[0-9]+)$/ { print $3, $4, $7, $8, $11, $13, $14, $19, $20 }' \
        "$out/diskstats-after.txt" | sort) |
  awk -v ios="$ios_total" -v ms="$(( (t1 - t0) / 1000000 ))" '
    function per(n) { return ios > 0 ? n / ios : 0 }
    function lat(t, n) { return n > 0 ? t / n : 0 }
    { r = $10 - $2; rt = $11 - $3; w = $12 - $4; wt = $13 - $5; io = $14 - $6; q = $15 - $7
      f = $16 - $8; ft = $17 - $9
      if (r + w + f == 0) next
      printf "%-10s reads %7.3f/io %6.2f ms  writes %7.3f/io %6.2f ms  flushes %7.4f/io %6.2f ms  in flight %5.2f  busy %3.0f%%\n",
        $1, per(r), lat(rt, r), per(w), lat(wt, w), per(f), lat(ft, f), (ms > 0 ? q / ms : 0), (ms > 0 ? 100 * io / ms : 0) }' \
  > "$out/disks.txt"
busy=$(awk -v a="$a" -v b="$b" 'BEGIN {
  n = split(a, x, " "); split(b, y, " "); t = 0; idle = 0
  for (i = 2; i <= n; i++) { d = y[i] - x[i]; t += d; if (i == 5 || i == 6) idle += d }
  printf "%.1f", (t > 0 ? 100 * (t - idle) / t : 0) }')
echo "PROFILE $target $job iops=$iops guest_busy=$busy" | tee "$out/summary.txt" >&2

if [ -n "$pid" ]; then
  # CPU ns per thread over the job (schedstat), busiest first, and per I/O.
  join <(sort "$out/threads-before.txt") <(sort "$out/threads-after.txt") |
    awk -v ios="$(jq -r '[.jobs[] | .read.total_ios, .write.total_ios] | add' "$out/fio.json")" \
      -v hz="$(getconf CLK_TCK)" \
      '{ d = $7 - $3; u = ($8 - $4) / hz; k = ($9 - $5) / hz
         if (d > 0) printf "%-8s %-16s %8.1f ms %8.2f us/io  user %6.2f s  system %6.2f s\n", $1, $2, d / 1e6, (ios > 0 ? d / 1e3 / ios : 0), u, k }' |
    sort -k3 -n -r > "$out/threads.txt"
  cat "$out/threads.txt" >&2
fi

if [ -n "$pid" ]; then
  echo "== context switches per I/O (voluntary, involuntary)" >&2
  join <(sort "$out/switches-before.txt") <(sort "$out/switches-after.txt") |
    awk -v ios="$ios_total" '{ v = $6 - $3; n = $7 - $4
      if (v + n > 0) printf "%-8s %-16s %8.3f %8.3f\n", $1, $2, v / ios, n / ios }' >&2
  echo "== metrics over the job (change, per I/O)" >&2
  join -t "$(printf '\t')" "$out/metrics-before.txt" "$out/metrics-after.txt" |
    awk -F '\t' -v ios="$ios_total" '{ d = $3 - $2; if (d != 0) printf "%-70s %14.3f %10.4f\n", $1, d, d / ios }' >&2
fi
echo "== the guest's busiest threads (CPU us per I/O, involuntary switches per I/O)" >&2
join "$out/guest-before.txt" "$out/guest-after.txt" |
  awk -v ios="$ios_total" '{ d = $6 - $3; if (d > 0 && $2 == $5) printf "%-8s %-20s %9.1f %7.3f\n", $1, $2, d / 1e3 / ios, ($7 - $4) / ios }' |
  sort -k3 -n -r | head -n 20 >&2
echo "== disks (per host I/O; latency; mean in flight)" >&2
cat "$out/disks.txt" >&2
# Where the interrupts land: per source and CPU over the job, per host I/O (the sources with
# at least 0.01 an I/O), and each CPU's time by kind (user, system, hard and soft interrupts,
# idle) in ms, from /proc/stat.
echo "== interrupts per host I/O, by CPU" >&2
ncpu=$(grep -c '^cpu[0-9]' /proc/stat)
join <(awk -v n="$ncpu" 'NR > 1 { k = $1; l = k; for (i = 2; i <= n + 1; i++) l = l " " $i
        d = ""; for (i = n + 2; i <= NF; i++) d = d $i "_"; print l, d }' "$out/interrupts-before.txt" | sort) \
     <(awk -v n="$ncpu" 'NR > 1 { k = $1; l = k; for (i = 2; i <= n + 1; i++) l = l " " $i; print l }' \
        "$out/interrupts-after.txt" | sort) |
  awk -v n="$ncpu" -v ios="$ios_total" '{ line = sprintf("%-6s", $1); s = 0
      for (c = 0; c < n; c++) { d = $(n + 3 + c) - $(2 + c); s += d; line = line sprintf("  cpu%d %7.3f", c, d / ios) }
      if (s / ios >= 0.01) print line "  " $(n + 2) }' | tee "$out/interrupts.txt" >&2
echo "== CPU time by kind over the job (ms): user nice system idle iowait irq softirq" >&2
join "$out/cpus-before.txt" "$out/cpus-after.txt" |
  awk -v hz="$(getconf CLK_TCK)" '{ n = (NF - 1) / 2; line = $1
      for (i = 2; i <= 8; i++) line = line sprintf(" %7.0f", ($(i + n) - $i) * 1000 / hz); print line }' |
  tee "$out/cpus.txt" >&2
if [ "$tool" = strace ]; then
  cat "$out/strace.txt" >&2
elif [ "$tool" = none ] || [ "$tool" = callgrind ]; then
  :
else
report() { perf report -i "$out/perf.data" --stdio --no-children "$@" 2> /dev/null; }
report --sort comm > "$out/by-comm.txt"
report --sort dso > "$out/by-dso.txt"
report --sort sym -g none --percent-limit 0.5 > "$out/by-sym.txt"
report --sort sym -g caller,0.5,callee --percent-limit 2 > "$out/callgraph.txt"
# TCG's sampling puts most samples in the idle loop: the same by thread and symbol without it.
report --sort comm,sym -g none --percent-limit 0.2 | grep -v -e swapper -e '^#' -e '^$' > "$out/by-comm-sym.txt" || true
for f in by-comm by-dso by-sym by-comm-sym; do
  echo "== $f" >&2
  grep -v '^#' "$out/$f.txt" | grep -v '^$' | head -n 40 >&2
done
fi
nvme disconnect -n "$sub" > /dev/null
if [ "$target" = raidline ]; then
  "$LAB_DIR/raidline.sh" stop
  # Warm-up and job together (the idle time before and after is sleep).
  grep -h 'time by phase' "$LAB_RUN/raidline.log" | sed 's/; /;\n   /g' | tee "$out/phases.txt" >&2 || true
  if [ "$tool" = callgrind ]; then
    # Every host I/O the daemon served: the warm-up's and the job's.
    all_ios=$(jq -s '[.[].jobs[] | .read.total_ios, .write.total_ios] | add' "$out/warm.json" "$out/fio.json")
    # The poller's file: the thread whose costs include the poller's loop, the largest.
    best="" most=0
    for f in "$out"/callgrind.out-*; do
      grep -q 'Poller.*::run' "$f" || continue
      n=$(awk '/^summary:/ { print $2; exit }' "$f")
      [ "${n:-0}" -gt "$most" ] && { most=$n; best=$f; }
    done
    [ -n "$best" ] || lab_fail "no poller thread in the callgrind output"
    callgrind_annotate --auto=no --threshold=99 "$best" > "$out/callgrind-poller.txt" 2> /dev/null
    echo "== callgrind: poller thread ($(basename "$best")), $most instructions, $all_ios host I/Os: $((most / all_ios)) per I/O" >&2
    # By object: the part of each function line in brackets (the binary or library).
    echo "== instructions per host I/O by object" >&2
    awk -v ios="$all_ios" '/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ { n = $1; gsub(",", "", n); o = "raidline";
        if (match($0, /\[[^]]*\]$/)) o = substr($0, RSTART + 1, RLENGTH - 2); sub(".*/", "", o); s[o] += n }
      END { for (o in s) if (s[o] / ios >= 10) printf "%10.0f  %s\n", s[o] / ios, o }' "$out/callgrind-poller.txt" |
      sort -n -r | tee "$out/callgrind-objects.txt" >&2
    echo "== instructions per host I/O by function (self), top 40" >&2
    awk -v ios="$all_ios" '/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ { n = $1; gsub(",", "", n); $1 = ""; $2 = ""; if (++k <= 40) printf "%8.0f %s\n", n / ios, substr($0, 3, 170) }' \
      "$out/callgrind-poller.txt" >&2
  fi
else
  "$LAB_DIR/ref-target.sh" stop --nqn "$knqn"
fi
