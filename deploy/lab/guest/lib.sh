# shellcheck shell=bash
# Helpers for commands that run inside a lab guest (deploy/lab/run). Source it:
#     . "$LAB_DIR/guest/lib.sh"
# or call one function directly: deploy/lab/guest/lib.sh lab_rxe_up eth0
# Every function prints what it did on stderr and returns non-zero (with a message) on failure;
# none of them exits the caller's shell.

LAB_DIR=${LAB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
LAB_RUN=${LAB_RUN:-/lab/run}
lab_log() { echo "lab[${LAB_ROLE:-?}]: $*" >&2; }
lab_fail() { echo "lab[${LAB_ROLE:-?}]: FAIL: $*" >&2; return 1; }

# lab_modules MOD...: load kernel modules (there is no udev in the guest to do it).
lab_modules() {
  local m
  for m in "$@"; do modprobe "$m" || { lab_fail "modprobe $m"; return 1; }; done
  # configfs is a module in Debian's kernel: mount it once it is there.
  if [ -d /sys/kernel/config ] && ! mountpoint -q /sys/kernel/config; then
    # Another process of the same guest may mount it first (a script serving and connecting
    # at once): mounted is what counts.
    mount -t configfs configfs /sys/kernel/config 2>/dev/null || mountpoint -q /sys/kernel/config ||
      { lab_fail "cannot mount configfs"; return 1; }
  fi
}

# lab_rxe_up [NETDEV] [WAIT_SECS]: create the soft-RoCE device on NETDEV (default eth0) with
# deploy/rxe-setup and wait for its RoCE v2 GID. Sets LAB_RXE (device name) and LAB_GID_INDEX.
lab_rxe_up() {
  local netdev=${1:-eth0} wait_s=${2:-30} line
  line=$("$LAB_DIR/../rxe-setup" add "$netdev" --wait "$wait_s" | tail -n1) || {
    lab_fail "rxe on $netdev did not come up"; return 1; }
  lab_log "$line"
  LAB_RXE=$(awk '{ print $2 }' <<< "$line")
  LAB_GID_INDEX=$(awk '{ for (i = 1; i < NF; i++) if ($i == "index") print $(i + 1) }' <<< "$line")
  export LAB_RXE LAB_GID_INDEX
  [ -n "$LAB_RXE" ] && [ -n "$LAB_GID_INDEX" ] || { lab_fail "cannot parse: $line"; return 1; }
}

# lab_nvme_timeouts [SECS]: lower nvme_core's admin_timeout (default 60 s, 10 s here) so that a
# target that never answers a Connect fails `nvme connect` quickly instead of blocking it.
lab_nvme_timeouts() {
  local secs=${1:-10} p=/sys/module/nvme_core/parameters/admin_timeout
  lab_modules nvme_core || return 1
  echo "$secs" > "$p" || { lab_fail "cannot write $p"; return 1; }
  lab_log "nvme_core admin_timeout=$(cat "$p")s"
}

# lab_hostnqn: make sure /etc/nvme/hostnqn and /etc/nvme/hostid exist (nvme-cli needs them).
lab_hostnqn() {
  mkdir -p /etc/nvme
  if [ ! -s /etc/nvme/hostnqn ]; then
    nvme gen-hostnqn > /etc/nvme/hostnqn || { lab_fail "nvme gen-hostnqn"; return 1; }
  fi
  if [ ! -s /etc/nvme/hostid ]; then
    sed -n 's/.*uuid:\(.*\)/\1/p' /etc/nvme/hostnqn > /etc/nvme/hostid
    [ -s /etc/nvme/hostid ] || cat /proc/sys/kernel/random/uuid > /etc/nvme/hostid
  fi
  lab_log "host NQN $(cat /etc/nvme/hostnqn)"
}

# lab_nvme_dev NQN [WAIT_SECS]: print the block device (/dev/nvmeXnY) of namespace 1 of the
# subsystem NQN once it exists: a fabrics subsystem after `nvme connect`, or an emulated drive.
lab_nvme_dev() {
  local nqn=$1 wait_s=${2:-30} i b n
  for ((i = 0; i <= wait_s * 10; i++)); do
    for b in /sys/block/nvme*n1; do
      n=${b##*/}
      # nvmeXcYnZ are the hidden per-path disks of native multipath; users see the head nvmeXnZ.
      [[ $n =~ c[0-9]+n ]] && continue
      [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$nqn" ] && [ -b "/dev/$n" ] || continue
      echo "/dev/$n"
      return 0
    done
    sleep 0.1
  done
  lab_fail "no block device for subsystem $nqn after ${wait_s}s"
}

# lab_nvme_drives [COUNT]: load the PCIe NVMe driver and print the emulated drives' devices in
# order (qemu names drive i's subsystem nqn.2019-08.org.qemu:labnvme<i>). COUNT defaults to
# $LAB_DRIVES, the number deploy/lab/run --drives attached.
lab_nvme_drives() {
  local count=${1:-${LAB_DRIVES:-0}} i
  [ "$count" -gt 0 ] || { lab_fail "no emulated NVMe drives in this guest (deploy/lab/run --drives N)"; return 1; }
  lab_modules nvme || return 1
  for ((i = 0; i < count; i++)); do
    lab_nvme_dev "nqn.2019-08.org.qemu:labnvme$i" 30 || return 1
  done
}

# lab_signal NAME / lab_wait NAME [WAIT_SECS]: a flag in the run share, seen by both guests of a
# --pair run (the share is not cached). lab_wait fails when the flag does not appear in time.
lab_signal() { mkdir -p "$LAB_RUN/sync" && : > "$LAB_RUN/sync/$1"; }
lab_wait() {
  local i wait_s=${2:-120}
  for ((i = 0; i <= wait_s * 10; i++)); do
    [ -e "$LAB_RUN/sync/$1" ] && return 0
    sleep 0.1
  done
  lab_fail "waited ${wait_s}s for '$1' from the peer guest"
}

# lab_iser_login ADDR[:PORT] IQN [WAIT_SECS]: open-iscsi's iSER host (ib_iser) discovers the
# targets at ADDR (SendTargets over iSER), checks IQN is listed, logs in to it and prints the
# SCSI disk it attached (/dev/sdX), waiting up to WAIT_SECS (default 30) for it. Starts iscsid
# first when it is not running (the guest has no systemd to start it). With
# LAB_ISER_CHAP="USER SECRET [MUSER MSECRET]" the node logs in with CHAP (mutual with MUSER);
# with LAB_ISER_DISCOVERY_CHAP="USER SECRET" the discovery does (a discoverydb record).
lab_iser_login() {
  local portal=$1 iqn=$2 wait_s=${3:-30} out dev i
  [[ "$portal" == *:* ]] || portal=$portal:3260
  # sd_mod: no udev loads the disk driver when the LUN shows up.
  lab_modules ib_iser sd_mod || return 1
  pgrep -x iscsid > /dev/null || iscsid || { lab_fail "cannot start iscsid"; return 1; }
  if [ -n "${LAB_ISER_DISCOVERY_CHAP:-}" ]; then
    local d kv
    read -r -a d <<< "$LAB_ISER_DISCOVERY_CHAP"
    iscsiadm -m discoverydb -t st -p "$portal" -I iser -o new > /dev/null 2>&1 || true
    for kv in authmethod=CHAP "username=${d[0]}" "password=${d[1]}"; do
      iscsiadm -m discoverydb -t st -p "$portal" -I iser -o update \
        -n "discovery.sendtargets.auth.${kv%%=*}" -v "${kv#*=}" ||
        { lab_fail "iscsiadm: cannot set discovery.sendtargets.auth.${kv%%=*}"; return 1; }
    done
    lab_log "iscsiadm -m discoverydb -t st -p $portal -I iser --discover (CHAP as ${d[0]})"
    out=$(iscsiadm -m discoverydb -t st -p "$portal" -I iser --discover 2>&1) ||
      { lab_fail "iSER discovery with CHAP at $portal: $out"; return 1; }
  else
    lab_log "iscsiadm -m discovery -t st -p $portal -I iser"
    out=$(iscsiadm -m discovery -t st -p "$portal" -I iser 2>&1) ||
      { lab_fail "iSER discovery at $portal: $out"; return 1; }
  fi
  echo "$out" >&2
  grep -q " $iqn\$" <<< "$out" || { lab_fail "discovery at $portal does not list $iqn"; return 1; }
  if [ -n "${LAB_ISER_CHAP:-}" ]; then
    local c k v
    read -r -a c <<< "$LAB_ISER_CHAP"
    for kv in authmethod=CHAP "username=${c[0]}" "password=${c[1]}" ${c[2]:+"username_in=${c[2]}"} \
      ${c[3]:+"password_in=${c[3]}"}; do
      k=${kv%%=*} v=${kv#*=}
      iscsiadm -m node -T "$iqn" -p "$portal" -I iser -o update -n "node.session.auth.$k" -v "$v" ||
        { lab_fail "iscsiadm: cannot set node.session.auth.$k"; return 1; }
    done
    lab_log "CHAP as ${c[0]}${c[2]:+, mutual with ${c[2]}}"
  fi
  lab_log "iscsiadm -m node -T $iqn -p $portal -I iser --login"
  # The host's libiscsi hands a login response to iscsid before it frees the connection's login
  # task; when iscsid answers first (the guest's other vCPU; the target answers in
  # microseconds), the kernel refuses the next login PDU ("Login/Text in progress. Cannot start
  # new task.") and that session's reconnects then fail for as long as iscsiadm waits (CI at
  # f8249c9, 52-iser, after a restart with mutual CHAP; the target accepted each reconnect and
  # the host closed it a second later; open-iscsi issue #424). On that message only, the
  # session is logged out and the login tried once more.
  local races
  races=$(dmesg | grep -c "Login/Text in progress" || true)
  if ! out=$(iscsiadm -m node -T "$iqn" -p "$portal" -I iser --login 2>&1); then
    if [ "$(dmesg | grep -c "Login/Text in progress" || true)" -gt "$races" ]; then
      lab_log "the host's login race (dmesg: $(dmesg | grep "Login/Text in progress" | tail -n1 | xargs)): logging out, and in again once"
      iscsiadm -m node -T "$iqn" -p "$portal" -u > /dev/null 2>&1 || true
      out=$(iscsiadm -m node -T "$iqn" -p "$portal" -I iser --login 2>&1) ||
        { lab_fail "iSER login to $iqn at $portal (tried again after the host's login race): $out"; return 1; }
    else
      lab_fail "iSER login to $iqn at $portal: $out"
      return 1
    fi
  fi
  for ((i = 0; i < wait_s * 10; i++)); do
    dev=$(iscsiadm -m session -P 3 2>/dev/null |
      awk -v t="$iqn" '$1 == "Target:" { on = ($2 == t) } on && /Attached scsi disk/ { print $4; exit }')
    if [ -n "$dev" ] && [ -b "/dev/$dev" ]; then
      lab_log "iSER session to $iqn: /dev/$dev, transport $(iscsiadm -m session 2>/dev/null | awk -v t="$iqn" '$4 == t { sub(":", "", $1); print $1; exit }')"
      echo "/dev/$dev"
      return 0
    fi
    sleep 0.1
  done
  lab_fail "no SCSI disk attached to the iSER session to $iqn after ${wait_s}s"
}

# lab_iser_logout IQN: logs out of IQN's sessions and forgets its node records.
lab_iser_logout() {
  local out
  out=$(iscsiadm -m node -T "$1" --logout 2>&1) || { lab_fail "iSER logout from $1: $out"; return 1; }
  iscsiadm -m node -T "$1" -o delete 2>/dev/null || true
  lab_log "logged out of $1"
}

# lab_fsync_writer DIR PREFIX COUNT KIB LIST: writes COUNT files DIR/PREFIX1.. of random bytes
# (KIB KiB plus 4 KiB per file number), each fsynced before its checksum is appended to LIST:
# a file listed there was acknowledged by the storage (the crash tests' writer).
lab_fsync_writer() {
  local dir=$1 prefix=$2 count=$3 kib=$4 list=$5 i
  for i in $(seq 1 "$count"); do
    head -c $((kib * 1024 + i * 4096)) /dev/urandom > "$dir/$prefix$i"
    sync "$dir/$prefix$i"   # fsync: acknowledged by the target from here on
    (cd "$dir" && sha256sum "$prefix$i") >> "$list"
  done
}

# lab_fio LABEL DEVICE JOB...: run the shared fio jobs (deploy/lab/fio/JOB.fio) on DEVICE, keep
# each JSON result in $LAB_RUN/fio/LABEL-JOB.json and append one table row per job to
# $LAB_RUN/fio-table.txt (see lab_fio_row). The jobs take FIO_RUNTIME (seconds, default 15) and
# FIO_VERIFY_SIZE (default 256m) from the environment.
lab_fio() {
  local label=$1 dev=$2 job json
  shift 2
  mkdir -p "$LAB_RUN/fio"
  for job in "$@"; do
    [ -r "$LAB_DIR/fio/$job.fio" ] || { lab_fail "no fio job $job"; return 1; }
    json=$LAB_RUN/fio/$label-$job.json
    lab_log "fio $job on $dev ($label)"
    FIO_DEV=$dev FIO_RUNTIME=${FIO_RUNTIME:-15} FIO_VERIFY_SIZE=${FIO_VERIFY_SIZE:-256m} \
      fio --eta=never --output-format=json --output="$json" "$LAB_DIR/fio/$job.fio" ||
      { lab_fail "fio $job on $dev"; jq -r '.jobs[]?.error' "$json" 2>/dev/null >&2; return 1; }
    lab_fio_row "$label" "$job" "$json" | tee -a "$LAB_RUN/fio-table.txt" >&2
  done
}

# lab_fio_header: the header of the rows lab_fio_row prints.
lab_fio_header() {
  printf '%-16s %-14s %9s %9s %12s %6s\n' target job IOPS MiB/s "p99 lat(us)" errors
}

# lab_fio_row LABEL JOB JSON: one row: IOPS, MiB/s and p99 completion latency (read and write
# summed / worst of both), from fio's JSON output.
lab_fio_row() {
  jq -r --arg lbl "$1" --arg job "$2" '
    [.jobs[] | .read, .write] as $d
    | ($d | map(.iops) | add) as $iops
    | ($d | map(.bw_bytes) | add) as $bw
    | ($d | map(.clat_ns.percentile["99.000000"] // 0) | max) as $p99
    | ([.jobs[].error] | add) as $err
    | "\($lbl)\t\($job)\t\($iops | floor)\t\($bw / 1048576)\t\($p99 / 1000 | floor)\t\($err)"' "$3" |
  while IFS=$'\t' read -r l j i b p e; do
    printf '%-16s %-14s %9s %9.1f %12s %6s\n' "$l" "$j" "$i" "$b" "$p" "$e"
  done
}

# lab_perftest_server TOOL ARG...: start a perftest server (ib_send_lat, ib_write_bw, ...) on
# $LAB_RXE in the background, its output in $LAB_RUN/perftest/TOOL-server.txt; its pid in
# LAB_PERF_PID. It gives up after 180 s without a client.
lab_perftest_server() {
  local tool=$1
  shift
  mkdir -p "$LAB_RUN/perftest"
  timeout 180 "$tool" -d "$LAB_RXE" -x "$LAB_GID_INDEX" "$@" > "$LAB_RUN/perftest/$tool-server.txt" 2>&1 &
  export LAB_PERF_PID=$!
}

# lab_perftest_client TOOL SERVER_IP ARG...: run the perftest client against SERVER_IP (retrying
# while the server is not listening yet: it starts slowly under TCG) and print its result table.
lab_perftest_client() {
  local tool=$1 server=$2 out
  shift 2
  mkdir -p "$LAB_RUN/perftest"
  out=$LAB_RUN/perftest/$tool-client.txt
  for _ in $(seq 30); do
    if timeout 180 "$tool" -d "$LAB_RXE" -x "$LAB_GID_INDEX" "$@" "$server" > "$out" 2>&1; then
      break
    fi
    grep -q "Couldn't connect" "$out" || { cat "$out" >&2; lab_fail "$tool $* $server"; return 1; }
    sleep 1
  done
  # The result: the line after the " #bytes ..." header.
  awk '/^ *#bytes/ { h = $0; getline; print h; print; found = 1 } END { exit !found }' "$out" ||
    { cat "$out" >&2; lab_fail "$tool printed no result"; return 1; }
  if grep -q 'Correlation coefficient' "$out"; then
    lab_log "note: $tool could not calibrate the CPU clock (host under load), so its times read inf"
  fi
}

# lab_rxe_counters [IBDEV]: the rxe device's packet counters, one "name value" a line.
lab_rxe_counters() {
  local d=/sys/class/infiniband/${1:-$LAB_RXE}/ports/1/hw_counters f
  for f in sent_pkts rcvd_pkts completer_retry_err retry_exceeded_err rcvd_seq_err; do
    [ -r "$d/$f" ] && echo "$f $(cat "$d/$f")"
  done
}

# Called as a program: run the named function.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 1 ] || { echo "usage: guest/lib.sh FUNCTION [ARG...]" >&2; exit 2; }
  declare -F "$1" >/dev/null || { echo "guest/lib.sh: no function $1" >&2; exit 2; }
  "$@"
fi
