#!/usr/bin/env bash
# The soft-RoCE lab stage of deploy/test.sh. First two self-tests of deploy/lab/run (a command's
# exit status and output come back; a hung guest is killed by the hard timeout and reported as
# such), then every check in deploy/lab/checks/*.sh in name order, each in fresh guest(s), then a
# summary and the fio table of every check that ran the shared fio jobs.
#
# Adding a check: drop an executable deploy/lab/checks/NN-name.sh. It runs inside the guest as root
# from the repository root and passes by exiting 0. Header lines it may carry:
#   # lab-run: OPTIONS      deploy/lab/run options (--drives 4, --pair, --mtu 4200, --timeout 600...)
#   # lab-before: COMMAND   run on the host first, from the repository root (e.g. a cargo build);
#                           repeatable; a failure fails the check
# Its fio rows (guest/lib.sh lab_fio LABEL DEVICE JOB...) join the stage's table.
#
#   --only GLOB       run only the checks whose name matches GLOB (e.g. '30-*')
#   --no-selftest     skip the self-tests of deploy/lab/run
# Environment: FIO_RUNTIME (seconds per timed fio job, default 15), FIO_VERIFY_SIZE (default
# 128m), LAB_STAGE_BUDGET (seconds for the whole stage, default 3600; no check may run past
# it): about 25 min on an unloaded machine of ours, 39-41 min on the loaded one of 2026-12-07
# (2333 s with 60-systemd cut by the 2250 s budget then: its `dpkg -i` alone took 290 s), and
# about 48 min in CI's run of 2026-12-07 19:30 (its checks 2874 s of the 3000 s budget then;
# that whole CI run took 3783 s of its 90 minutes).
usage="usage: deploy/lab/ci-stage.sh [--only GLOB] [--no-selftest]"
set -euo pipefail

lab=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$lab/../.." && pwd)
# shellcheck source=deploy/lab/lib.sh
. "$lab/lib.sh"
cd "$root"

only='*' selftest=1
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || die "$usage"; only=$2; shift 2 ;;
    --no-selftest) selftest=0; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) die "unknown option $1
$usage" ;;
  esac
done
budget=${LAB_STAGE_BUDGET:-3600}
fio_env=(--env "FIO_RUNTIME=${FIO_RUNTIME:-15}" --env "FIO_VERIFY_SIZE=${FIO_VERIFY_SIZE:-128m}")

stage=$lab/runs/ci/$(date +%Y%m%d-%H%M%S)
mkdir -p "$stage"
# Keep the newest 10 stage results.
ls -1d "$lab"/runs/ci/*/ | sort | head -n -10 | while read -r old; do rm -rf "$old"; done
start=$SECONDS
names=() verdicts=() times=()
failed=0

banner() { printf '\n--- lab: %s ---\n' "$*"; }
# record NAME VERDICT SECONDS
record() {
  names+=("$1") verdicts+=("$2") times+=("$3")
  [ "$2" = PASS ] || failed=1
  printf -- '--- lab: %s: %s (%s s)\n' "$1" "$2" "$3"
}

# Boot files first, so the first check's time is its own.
"$lab/build-boot" > /dev/null

if [ "$selftest" = 1 ]; then
  banner "self-test: exit status and output come back"
  t=$SECONDS rc=0
  "$lab/run" --name selftest-status --timeout 180 -- bash -c 'echo "lab self-test: $(uname -r) $LAB_ROLE"; exit 7' \
    > "$stage/selftest-status.out" 2>&1 || rc=$?
  cat "$stage/selftest-status.out"
  if [ "$rc" = 7 ] && grep -q '^lab self-test: .* solo$' "$stage/selftest-status.out"; then
    record selftest-status PASS $((SECONDS - t))
  else
    record selftest-status "FAIL (exit $rc, want 7 and the guest's line)" $((SECONDS - t))
  fi

  banner "self-test: a hung guest is killed by --timeout 20"
  t=$SECONDS rc=0
  # The boot watchdog (LAB_BOOT_LIMIT, a third of the timeout: 6 s here) would end a boot that is
  # merely slow on a loaded host (5-35 s) with exit 2 before the timeout under test could fire;
  # past the timeout it cannot get in the way.
  LAB_BOOT_LIMIT=30 "$lab/run" --name selftest-timeout --timeout 20 -- sleep 1000 \
    > "$stage/selftest-timeout.out" 2>&1 || rc=$?
  cat "$stage/selftest-timeout.out"
  took=$((SECONDS - t))
  if [ "$rc" = 124 ] && grep -q 'TIMED OUT after 20s' "$stage/selftest-timeout.out" && [ "$took" -le 40 ]; then
    record selftest-timeout PASS "$took"
  else
    record selftest-timeout "FAIL (exit $rc after $took s, want 124 within 40 s)" "$took"
  fi
fi

for f in "$lab"/checks/*.sh; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .sh)
  # shellcheck disable=SC2254
  case "$name" in $only) ;; *) continue ;; esac
  read -ra header <<< "$(sed -n 's/^# lab-run: *//p' "$f" | head -n1)"
  # The check's --timeout (default 600), cut to what is left of the stage's budget.
  opts=() limit=600
  for ((i = 0; i < ${#header[@]}; i++)); do
    if [ "${header[$i]}" = --timeout ]; then limit=${header[$((i + 1))]:-600}; i=$((i + 1))
    else opts+=("${header[$i]}"); fi
  done
  t=$SECONDS
  left=$((budget - (SECONDS - start)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$left" -lt 60 ]; then
    record "$name" "FAIL (not run: the stage's ${budget}s budget is spent)" 0
    continue
  fi
  banner "$name: deploy/lab/run ${opts[*]}${opts[*]:+ }--timeout $limit"
  before_ok=1
  while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    echo "lab: host: $cmd"
    bash -c "$cmd" || { before_ok=0; break; }
  done < <(sed -n 's/^# lab-before: *//p' "$f")
  if [ "$before_ok" = 0 ]; then
    record "$name" "FAIL (lab-before command failed)" $((SECONDS - t))
    continue
  fi
  # The check's output goes to the log as it runs and to $stage/$name.out, from which the
  # summary quotes a failed check's verdict lines (CI keeps only the log's tail).
  rc=0
  "$lab/run" --name "$name" --results "$stage/$name" "${fio_env[@]}" --timeout "$limit" "${opts[@]}" \
    -- bash "${f#"$root"/}" 2>&1 | tee "$stage/$name.out" || rc=${PIPESTATUS[0]}
  case "$rc" in
    0) record "$name" PASS $((SECONDS - t)) ;;
    124) record "$name" "FAIL (timed out)" $((SECONDS - t)) ;;
    *) record "$name" "FAIL (exit $rc)" $((SECONDS - t)) ;;
  esac
done

banner "summary (stage took $((SECONDS - start)) s; results in ${stage#"$root"/})"
for i in "${!names[@]}"; do
  printf '  %-20s %6s s  %s\n' "${names[$i]}" "${times[$i]}" "${verdicts[$i]}"
done
if compgen -G "$stage/*/fio-table.txt" > /dev/null; then
  echo
  echo "fio (TCG guest, soft-RoCE: function checks, not performance claims):"
  bash -c '. "$1/guest/lib.sh"; lab_fio_header' _ "$lab" | sed 's/^/  /'
  cat "$stage"/*/fio-table.txt | sed 's/^/  /'
fi
# Why each failed check failed, last, where CI's tail shows it: its lines that say FAIL, NOT MET,
# error or timed out (the check's own verdicts and the lab's), the last 12 of them.
for i in "${!names[@]}"; do
  [ "${verdicts[$i]}" = PASS ] && continue
  out=$stage/${names[$i]}.out
  [ -f "$out" ] || continue
  echo
  echo "why ${names[$i]} failed (from ${out#"$root"/}):"
  grep -a -E 'FAIL|NOT MET|[Ee]rror:|syntax error|TIMED OUT|timed out|panicked' "$out" | grep -v -- '--- lab: ' | tail -n 12 | cut -c1-300 | sed 's/^/  /' || true
done
if [ "$failed" = 0 ]; then echo "lab stage: PASS"; else echo "lab stage: FAIL"; exit 1; fi
