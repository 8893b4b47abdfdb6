#!/usr/bin/env bash
# raidline inside a lab guest: RAID-5 over the emulated NVMe drives, served over the guest's
# soft-RoCE device, driven like the reference target (deploy/lab/ref-target.sh).
#
#   raidline.sh start [--addr IP] [--nqn NQN] [--chunk KiB] [--bin PATH] [--cores N] [--cc-rate MBPS]
#                     [--cc ALGO] [--io-path ring|workers[:MODE][~POLL]] [--ram-dev DEV --ram-nqn NQN]
#                     [--members "DEV ..."] [--overwrite "DEV ..."] [--hosts "NQN ..."]
#                     [--append FILE] [--iscsi IQN] [--iscsi-chap "USER SECRET [MUSER MSECRET]"]
#                     [--iscsi-discovery-chap "USER SECRET"] [--iscsi-ram IQN]
#                     [--expect-refused]
#       write $LAB_RUN/raidline.toml (array over all $LAB_DRIVES drives or --members, assume_clean at
#       creation, allow any host; --cc-rate: every I/O queue pair paced by the `fixed`
#       algorithm at MBPS megabits per second (--cc fixed,rate_mbps=MBPS); --cc: every I/O queue pair paced by ALGO
#       (e.g. rtt-aimd; ALGO,NAME=VALUE,... sets parameters, e.g. fixed,rate_mbps=10000);
#       --io-path: the daemon's io_path, with :MODE its poll_mode (busy, adaptive or event;
#       default adaptive), with ~POLL its io_poll (on or off; unset: the daemon's default, off,
#       which a build before io_poll needs), e.g. ring~on; --ram-dev: a second subsystem
#       RAM-NQN serving DEV (a brd RAM disk) as
#       a file namespace, for the target path alone; --overwrite: the array's `overwrite`,
#       devices whose foreign data a new array may overwrite; --hosts: only these host NQNs,
#       instead of any host; --append: a TOML fragment added to the main subsystem, e.g. its
#       [[subsystem.auth]] entries; --iscsi:
#       the same namespace also as LUN 0 of iSCSI target IQN on an iSER portal at $addr:3260;
#       --iscsi-chap: its sessions must prove USER's SECRET, and MUSER/MSECRET answer mutual
#       CHAP; --iscsi-discovery-chap: SendTargets discovery sessions must prove USER's SECRET;
#       --iscsi-ram: --ram-dev's namespace also as LUN 0 of a second iSCSI target IQN),
#       start
#       `raidline run` in the background (log:
#       $LAB_RUN/raidline.log, appended across restarts) and wait until it logs "ready"
#       (with --expect-refused: ready with the array NOT STARTED), at most $RAIDLINE_LAB_READY_S
#       seconds (default 120; more for a daemon under valgrind; `stop` waits as long, default 60)
#   raidline.sh config [--out PATH] [--addr IP] [--nqn NQN] [--chunk KiB] [--cores N] [--cc-rate MBPS]
#       only write that configuration to PATH (default $LAB_RUN/raidline.toml) and check it with
#       `raidline check-config`: for a daemon started otherwise (checks/60-systemd.sh: systemd)
#   raidline.sh stop      SIGTERM; wait for a clean exit (status 0, "stopped cleanly")
#   raidline.sh kill      SIGKILL, no goodbye (crash test)
#   raidline.sh status    `raidline status` over the management socket
#   raidline.sh cli ARGS… `raidline ARGS… --socket <the lab's socket>` (e.g. `cli ns disable NQN 1`)
usage="usage: raidline.sh start [--addr IP] [--nqn NQN] [--chunk KiB] [--bin PATH] [--cores N] [--cc-rate MBPS] [--cc ALGO] [--io-path ring|workers[:busy|adaptive|event][~on|off]] [--ram-dev DEV --ram-nqn NQN] [--members \"DEV ...\"] [--overwrite \"DEV ...\"] [--hosts \"NQN ...\"] [--append FILE] [--expect-refused] | config [--out PATH] [same options] | stop | kill | status | cli ARGS..."
set -euo pipefail

lab=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/lab/guest/lib.sh
. "$lab/guest/lib.sh"
die() { echo "raidline.sh: error: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "$usage"
action=$1; shift
addr=${LAB_IP:-} nqn=nqn.2026-11.io.raidline:array0 chunk=64 cores=1 cc_algo="" out=$LAB_RUN/raidline.toml
io_path=ring ram_dev="" ram_nqn=nqn.2026-11.io.raidline:ram members="" overwrite="" refused=0
hosts="" append="" iscsi="" iscsi_chap="" iscsi_dchap="" iscsi_ram=""
bin=${RAIDLINE_BIN:-$lab/../../build/release/raidline}
if [ "$action" = cli ]; then
  exec "$bin" "$@" --socket /run/raidline/raidline.sock
fi
while [ $# -gt 0 ]; do
  if [ "$1" = --expect-refused ]; then refused=1; shift; continue; fi
  [ $# -ge 2 ] || die "$1 needs a value
$usage"
  case "$1" in
    --addr) addr=$2 ;; --nqn) nqn=$2 ;; --chunk) chunk=$2 ;; --bin) bin=$2 ;; --cores) cores=$2 ;; --cc-rate) cc_algo=fixed,rate_mbps=$2 ;; --cc) cc_algo=$2 ;; --out) out=$2 ;;
    --io-path) io_path=$2 ;; --ram-dev) ram_dev=$2 ;; --ram-nqn) ram_nqn=$2 ;;
    --members) members=$2 ;; --overwrite) overwrite=$2 ;;
    --hosts) hosts=$2 ;; --append) append=$2 ;; --iscsi) iscsi=$2 ;; --iscsi-chap) iscsi_chap=$2 ;;
    --iscsi-discovery-chap) iscsi_dchap=$2 ;; --iscsi-ram) iscsi_ram=$2 ;;
    *) die "unknown option $1
$usage" ;;
  esac
  shift 2
done
poll_mode=adaptive
io_poll=""
case "$io_path" in
  *~*) io_poll="io_poll = \"${io_path#*~}\"" io_path=${io_path%%~*} ;;
esac
case "$io_path" in
  *:*) poll_mode=${io_path#*:} io_path=${io_path%%:*} ;;
esac
conf=$LAB_RUN/raidline.toml
log=$LAB_RUN/raidline.log
pidfile=/run/raidline-lab.pid
sock=/run/raidline/raidline.sock

# write_config PATH: the configuration (see the header) for $addr, $nqn, $chunk, $cores, $cc_algo.
write_config() {
  local path=$1 list drives
  [ -n "$addr" ] || die "no --addr and no \$LAB_IP"
  if [ -n "$members" ]; then
    read -r -a drives <<< "$members"
  else
    mapfile -t drives < <(lab_nvme_drives)
  fi
  [ "${#drives[@]}" -ge 3 ] || die "RAID-5 needs at least 3 drives, have ${#drives[@]}"
  [ -n "${LAB_RXE:-}" ] || lab_rxe_up
  list=$(printf '"%s", ' "${drives[@]}")
  cat > "$path" <<CONF
[target]
listen = ["$addr:4420"]
cores = $cores
poll_mode = "$poll_mode"
io_path = "$io_path"
$io_poll
management_socket = "$sock"
state_dir = "$LAB_RUN/state"
metrics = "127.0.0.1:9420"
rdma_device = "$LAB_RXE"

[[array]]
name = "array0"
members = [${list%, }]
chunk_kib = $chunk
parity = "cpu"
rebuild_mb_s = 200
assume_clean = true

[[subsystem]]
nqn = "$nqn"
model = "Raidline RAID-5"
allow_any_host = true

[[subsystem.namespace]]
nsid = 1
array = "array0"
CONF
  if [ -n "$hosts" ]; then
    local hs
    read -r -a hs <<< "$hosts"
    hs=$(printf '"%s", ' "${hs[@]}")
    sed -i "0,/^allow_any_host = true/s||hosts = [${hs%, }]|" "$path"
  fi
  if [ -n "$append" ]; then
    [ -r "$append" ] || die "--append: cannot read $append"
    { echo; cat "$append"; } >> "$path"
  fi
  if [ -n "$ram_dev" ]; then
    printf '\n[[subsystem]]\nnqn = "%s"\nmodel = "Raidline RAM"\nallow_any_host = true\n\n[[subsystem.namespace]]\nnsid = 1\nfile = "%s"\n' \
      "$ram_nqn" "$ram_dev" >> "$path"
  fi
  if [ -n "$overwrite" ]; then
    local ow
    read -r -a ow <<< "$overwrite"
    ow=$(printf '"%s", ' "${ow[@]}")
    # Into the [[array]] table, before the first [[subsystem]].
    sed -i "0,/^\[\[subsystem\]\]/s||overwrite = [${ow%, }]\n\n[[subsystem]]|" "$path"
  fi
  [ -z "$iscsi_ram" ] || [ -n "$iscsi" ] || die "--iscsi-ram needs --iscsi"
  [ -z "$iscsi_ram" ] || [ -n "$ram_dev" ] || die "--iscsi-ram needs --ram-dev"
  # iscsi_target IQN NQN: an [[iscsi.target]] IQN whose LUN 0 is NQN's namespace 1.
  iscsi_target() {
    printf '\n[[iscsi.target]]\nname = "%s"\n\n[[iscsi.target.lun]]\nlun = 0\nsubsystem = "%s"\nnsid = 1\n' \
      "$1" "$2" >> "$path"
  }
  if [ -n "$iscsi" ]; then
    printf '\n[iscsi]\nlisten = ["%s:3260"]\n' "$addr" >> "$path"
    iscsi_target "$iscsi" "$nqn"
    if [ -n "$iscsi_chap" ]; then
      local c
      read -r -a c <<< "$iscsi_chap"
      printf '\n[iscsi.target.chap]\nuser = "%s"\nsecret = "%s"\n' "${c[0]}" "${c[1]}" >> "$path"
      [ "${#c[@]}" -lt 4 ] ||
        printf 'mutual_user = "%s"\nmutual_secret = "%s"\n' "${c[2]}" "${c[3]}" >> "$path"
    fi
    if [ -n "$iscsi_dchap" ]; then
      local d
      read -r -a d <<< "$iscsi_dchap"
      printf '\n[iscsi.discovery_chap]\nuser = "%s"\nsecret = "%s"\n' "${d[0]}" "${d[1]}" >> "$path"
    fi
    [ -z "$iscsi_ram" ] || iscsi_target "$iscsi_ram" "$ram_nqn"
  fi
  if [ -n "$cc_algo" ]; then
    # ALGO[,NAME=VALUE...]: the algorithm, then its [cc.params].
    local params
    IFS=, read -r -a params <<< "$cc_algo"
    printf '\n[cc]\nalgorithm = "%s"\n' "${params[0]}" >> "$path"
    if [ ${#params[@]} -gt 1 ]; then
      printf '[cc.params]\n' >> "$path"
      printf '%s\n' "${params[@]:1}" | sed 's/=/ = /' >> "$path"
    fi
  fi
}

case "$action" in
  config)
    write_config "$out"
    "$bin" check-config "$out" >&2 || die "check-config refused $out"
    ;;
  start)
    [ -x "$bin" ] || die "no $bin (cargo build --release -p raidline-target --bin raidline)"
    write_config "$conf"
    "$bin" check-config "$conf" >&2 || die "check-config refused $conf"
    # The log is appended across restarts: only what this start writes counts.
    from=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))
    setsid "$bin" run --config "$conf" >> "$log" 2>&1 < /dev/null &
    echo $! > "$pidfile"
    ready_s=${RAIDLINE_LAB_READY_S:-120}
    for _ in $(seq $((ready_s * 10))); do
      if tail -c +"$from" "$log" | grep -q "ready: serving on"; then
        if [ "$refused" = 1 ]; then
          tail -c +"$from" "$log" | grep -q "NOT STARTED" || die "the array started, expected it refused"
          lab_log "raidline (pid $(cat "$pidfile")) ready, array0 not started (as expected)"
        else
          tail -c +"$from" "$log" | grep -q "NOT STARTED" && { tail -c +"$from" "$log" | tail -n 30 >&2; die "array0 was not started"; }
          lab_log "raidline (pid $(cat "$pidfile")) serving $nqn on $addr:4420 via $LAB_RXE"
        fi
        exit 0
      fi
      kill -0 "$(cat "$pidfile")" 2>/dev/null || { tail -c +"$from" "$log" | tail -n 30 >&2; die "raidline exited during start"; }
      sleep 0.1
    done
    tail -n 30 "$log" >&2
    die "raidline not ready after $ready_s s"
    ;;
  stop)
    pid=$(cat "$pidfile" 2>/dev/null) || die "not started"
    kill -TERM "$pid" 2>/dev/null || die "raidline (pid $pid) is not running"
    stop_s=${RAIDLINE_LAB_READY_S:-60}
    for _ in $(seq $((stop_s * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && die "raidline (pid $pid) still running $stop_s s after SIGTERM"
    # setsid'ed, so not our child: its exit status is in the log's last lines.
    # (Under valgrind its own summary follows the daemon's last line.)
    grep -v '^==[0-9]*==' "$log" | tail -n 3 | grep -q "stopped cleanly" ||
      { tail -n 20 "$log" >&2; die "raidline did not stop cleanly"; }
    rm -f "$pidfile"
    lab_log "raidline stopped cleanly"
    ;;
  kill)
    pid=$(cat "$pidfile" 2>/dev/null) || die "not started"
    kill -KILL "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$pidfile"
    lab_log "raidline (pid $pid) killed with SIGKILL"
    ;;
  status)
    "$bin" status --socket "$sock"
    ;;
  *) die "$usage" ;;
esac
