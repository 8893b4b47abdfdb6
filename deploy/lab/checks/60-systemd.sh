#!/usr/bin/env bash
# lab-run: --systemd --drives 4 --drive-size 1G --timeout 480
# lab-before: deploy/package.sh
# The Debian package under a real systemd: the host's systemd is PID 1 of the guest
# (deploy/lab/run --systemd, guest/systemd-pid1.sh); `dpkg -i` installs raidline_*.deb
# (deploy/package.sh: the binaries, raidline.service and rxe-setup@.service, the conffile, man
# pages and completions; `man raidline` and the bash completion work, and nothing starts by
# itself), on 4 emulated NVMe drives served over rxe to the kernel's nvme-rdma host:
#  0. the rxe device comes from deploy/rxe-setup@.service (udev running, for its BindsTo= on
#     eth0's device unit), pulled in and ordered first by the drop-in the unit's header shows:
#     no RDMA link before, rxe-setup@eth0 active (exited) and ready before raidline's exec;
#  1. `systemctl start raidline` returns only once the daemon sent READY=1: right after it the
#     unit is active/running, StatusText is the READY message's "serving on ...", and an
#     immediate `nvme discover` (no retry) lists the subsystem; the process runs with the unit's
#     hardening (NoNewPrivs, seccomp, umask, bounding set, read-only /etc /usr /proc/sys /sys
#     /sys/fs/cgroup, private /tmp, no /root, memlock, OOM adjust) and still holds its io_uring
#     instances, its verbs devices and O_DIRECT members; `raidline status`
#     answers on /run/raidline/raidline.sock (RuntimeDirectory, 0750), the metrics endpoint on
#     127.0.0.1:9420 (AF_INET under RestrictAddressFamilies); the host connects and
#     writes 8 MiB (O_DIRECT), which reads back equal; a scrub shows its progress in the
#     unit's StatusText (STATUS=), as a rebuild or replace would;
#  2. SIGKILL of the main PID: systemd restarts it (Restart=on-failure), NRestarts 0 → 1, a new
#     MainPID is active, the journal has "code=killed, status=9/KILL" and the daemon's unclean-stop
#     notice; the host reconnects by itself and the 8 MiB read back equal;
#  3. SIGSTOP of the main PID: after WatchdogSec (10 s, asserted ≥ 9 s) systemd logs a watchdog
#     timeout, kills it with SIGABRT (result 'watchdog') and restarts it: NRestarts 2, active
#     again, the data still equal;
#  4. `systemctl stop` with the host still connected: SIGTERM, the daemon drains and marks the
#     array clean ("array array0: stopped clean", "stopped cleanly"), exits by itself with status
#     0 (systemd's own log line), Result=success, no SIGKILL, well within TimeoutStopSec;
#     /run/raidline is gone;
#  5. `systemctl stop rxe-setup@eth0` removes the rxe device.
# Each step prints a row: its time and the `systemctl show` fields and journal lines it asserted
# (also in $LAB_RUN/systemd/summary.txt; the unit's journal in $LAB_RUN/systemd/raidline.journal,
# the whole boot's in $LAB_RUN/solo.journal).
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

comm=$(cat /proc/1/comm)
[ "$comm" = systemd ] || { lab_fail "PID 1 is '$comm', not systemd: run this check with deploy/lab/run --systemd"; exit 1; }
repo=$(cd "$LAB_DIR/../.." && pwd)
deb=$(ls -t "$repo"/build/package/raidline_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || { lab_fail "no build/package/raidline_*.deb (deploy/package.sh)"; exit 1; }
bin=/usr/bin/raidline
nqn=nqn.2026-11.io.raidline:array0
u=raidline.service
out=$LAB_RUN/systemd
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"

fail() { lab_fail "$*"; systemctl status --no-pager -l "$u" >&2 || true; exit 1; }
# now: seconds since the epoch, microseconds; dt START: seconds since START, one decimal.
now() { echo "$EPOCHREALTIME"; }
dt() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# props NAME...: `systemctl show` of the unit into the associative array P.
declare -A P
props() {
  local args=() k v
  for k in "$@"; do args+=(-p "$k"); done
  P=()
  while IFS='=' read -r k v; do P[$k]=$v; done < <(systemctl show "${args[@]}" "$u")
}
# expect NAME VALUE: P[NAME] (from the last props) must equal VALUE.
expect() { [ "${P[$1]-}" = "$2" ] || fail "$1=${P[$1]-} (want $2)"; }
# row PHASE SECONDS FIELDS...: a line of the summary table.
row() { printf '%-22s %6s s  %s\n' "$1" "$2" "${*:3}" | tee -a "$summary" >&2; }
# wait_until SECS DESCRIPTION COMMAND...: poll COMMAND every 0.25 s.
wait_until() {
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs * 4; i++)); do
    "$@" && return 0
    sleep 0.25
  done
  fail "after ${secs}s: $what (last: $(for k in "${!P[@]}"; do printf '%s=%s ' "$k" "${P[$k]}"; done))"
}
# The journal of the unit (systemd's messages about it and the daemon's own): mark prints how
# many lines it has now, journal_since MARK what came after. (Not --after-cursor: journalctl 252
# combined with -u skips the first matching entry when the cursor's own entry does not match.)
unit_journal() { journalctl -u "$u" -o cat --no-pager; }
mark() { unit_journal | wc -l; }
journal_since() { unit_journal | tail -n +"$(($1 + 1))"; }
# jcheck MARK SECS REGEX... [!REGEX...]: the unit's journal after MARK has a line matching each
# REGEX within SECS (journald receives the daemon's stdout stream asynchronously), and, once they
# are all there, none matching a !REGEX. One read of the journal per try (slow under TCG).
jcheck() {
  local c=$1 secs=$2 text re missing i
  shift 2
  for ((i = 0; ; i++)); do
    text=$(journal_since "$c")
    missing=""
    for re in "$@"; do
      [[ $re == '!'* ]] && continue
      grep -Eq -- "$re" <<< "$text" || { missing=$re; break; }
    done
    [ -z "$missing" ] && break
    if ((i >= secs * 2)); then
      tail -n 30 <<< "$text" >&2
      fail "the journal of $u has no line matching /$missing/ after ${secs}s"
    fi
    journalctl --sync 2>/dev/null || true
    sleep 0.5
  done
  for re in "$@"; do
    [[ $re == '!'* ]] || continue
    if grep -E -- "${re#!}" <<< "$text" >&2; then fail "the journal of $u has lines matching /${re#!}/"; fi
  done
}

lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_log "systemd $(systemctl --version | head -n1 | cut -d' ' -f2) is PID 1"

# 0. The RDMA device comes from deploy/rxe-setup@.service, installed as deploy/lab/README.md says
# and ordered before raidline by the drop-in deploy/raidline.service's header shows. Its
# BindsTo= needs eth0's device unit, which needs udev (the host's units, as on a real host; a
# "change" event, so udev does not rename the interface that is already up).
for f in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket; do
  cp "/lib/systemd/system/$f" /etc/systemd/system/ || fail "no $f on this host"
done
# The package: installed, nothing started or enabled by it. (man-db's index rebuild is not what
# this checks: `man` finds the page without it. Its dpkg trigger runs `mandb -pq` while
# /var/lib/man-db/auto-update exists, whatever debconf says until man-db itself is configured
# again; over this host's 18,082 pages, 16,631 of them gcloud's, that was 160-170 s of a
# 171 s `dpkg -i` under TCG (strace, 2026-12-07). The guest's overlay keeps the host's file.)
t=$(now)
rm -f /var/lib/man-db/auto-update
dpkg -i "$deb" > "$out/dpkg.txt" 2>&1 || { cat "$out/dpkg.txt" >&2; fail "dpkg -i $(basename "$deb")"; }
for f in /usr/bin/raidline /usr/bin/raidline-initiator /usr/sbin/rxe-setup /lib/systemd/system/raidline.service \
  /lib/systemd/system/rxe-setup@.service /etc/raidline/raidline.toml /usr/share/man/man1/raidline.1.gz \
  /usr/share/man/man1/raidline-initiator.1.gz /usr/share/bash-completion/completions/raidline \
  /usr/share/zsh/vendor-completions/_raidline /usr/share/fish/vendor_completions.d/raidline.fish; do
  dpkg -L raidline | grep -qx "$f" || fail "the package does not hold $f"
done
grep -qx /etc/raidline/raidline.toml /var/lib/dpkg/info/raidline.conffiles || fail "raidline.toml is not a conffile"
# This guest's systemd looks for units in /etc/systemd/system and the lab's own directory only
# (guest/systemd-pid1.sh: SYSTEMD_UNIT_PATH), not in /lib/systemd/system where the package put
# them, so they are copied, unchanged, where it looks (as the udev units below are).
cp /lib/systemd/system/raidline.service /lib/systemd/system/rxe-setup@.service /etc/systemd/system/
systemctl daemon-reload
en=$(systemctl is-enabled raidline 2>&1 || true)
[ "$en" = disabled ] || fail "installing the package left raidline '$en', not disabled"
systemctl is-active -q raidline && fail "installing the package started raidline"
MANPAGER=cat man raidline 2>/dev/null | grep -Eq 'raidline +- +Raidline' || fail "man raidline"
bash -c 'source /usr/share/bash-completion/completions/raidline && complete -p raidline' > /dev/null ||
  fail "the bash completion does not load"
raidline --version | grep -qx "raidline $(dpkg-query -W -f '${Version}' raidline)" || fail "raidline --version"
row "0 dpkg -i" "$(dt "$t")" "$(basename "$deb"): $(dpkg -L raidline | grep -vc '/$') files, conffile /etc/raidline/raidline.toml, disabled and inactive, man and bash completion work"
install -d /etc/systemd/system/raidline.service.d
printf '[Unit]\nWants=rxe-setup@eth0.service\nAfter=rxe-setup@eth0.service\n' > /etc/systemd/system/raidline.service.d/rxe.conf
systemctl daemon-reload
systemctl start systemd-udevd || fail "systemctl start systemd-udevd"
udevadm trigger --subsystem-match=net --action=change
udevadm settle -t 30 || true
[ "$(systemctl show -P ActiveState sys-subsystem-net-devices-eth0.device)" = active ] ||
  fail "no device unit for eth0 after udev's trigger"
[ -z "$(rdma link show 2>/dev/null)" ] || fail "an RDMA link exists before rxe-setup@eth0 ran"
export LAB_RXE=rxe_eth0   # rxe-setup's name for it; raidline.sh config then does not create it

# The operator's configuration replaces the example (a conffile the operator edits).
"$LAB_DIR/raidline.sh" config --out "$out/raidline.toml" --addr "$LAB_IP" --nqn "$nqn" --bin "$bin"
install -m 0644 "$out/raidline.toml" /etc/raidline/raidline.toml
# RAIDLINE_DROPIN=FILE (--env): a drop-in for the unit, to try an option here before putting it in
# deploy/raidline.service (e.g. "[Service]\nSystemCallFilter=~@aio" must fail the io_uring check).
if [ -n "${RAIDLINE_DROPIN:-}" ]; then
  install -D -m 0644 "$RAIDLINE_DROPIN" /etc/systemd/system/raidline.service.d/lab.conf
  lab_log "with the drop-in $RAIDLINE_DROPIN: $(grep -v '^\[' "$RAIDLINE_DROPIN" | tr '\n' ' ')"
fi
raidline check-config /etc/raidline/raidline.toml > /dev/null || fail "check-config"
c=$(journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
systemctl daemon-reload
systemctl enable raidline 2>&1 | sed 's/^/  /' >&2
[ "$(systemctl is-enabled raidline)" = enabled ] || fail "systemctl enable raidline"
props Type NotifyAccess Restart RestartUSec TimeoutStopUSec LimitMEMLOCK UnitFileState
expect Type notify; expect NotifyAccess main; expect Restart on-failure; expect UnitFileState enabled
# systemd warns about every line it does not understand when it loads a unit (loaded by now).
if journalctl --sync; journalctl -o cat --no-pager --after-cursor="$c" | grep -E 'raidline\.service(\.d/[^:]+)?:[0-9]+:|rxe-setup@\.service:[0-9]+:' >&2; then
  fail "systemd did not accept every line of deploy/raidline.service, its drop-ins and deploy/rxe-setup@.service"
fi
row "unit loaded" - "Type=${P[Type]} NotifyAccess=${P[NotifyAccess]} Restart=${P[Restart]} RestartUSec=${P[RestartUSec]} TimeoutStopUSec=${P[TimeoutStopUSec]} LimitMEMLOCK=${P[LimitMEMLOCK]} UnitFileState=${P[UnitFileState]}"

# 1. start: returns after READY=1.
lab_log "1. systemctl start raidline"
c=$(mark) t=$(now)
systemctl start raidline || { journal_since "$c" >&2; fail "systemctl start raidline"; }
took=$(dt "$t")
props ActiveState SubState MainPID StatusText NRestarts ExecMainStartTimestampMonotonic ActiveEnterTimestampMonotonic WatchdogUSec
expect ActiveState active; expect SubState running; expect NRestarts 0; expect WatchdogUSec 10s
[[ ${P[StatusText]} == "serving on $LAB_IP:4420"* ]] ||
  fail "StatusText '${P[StatusText]}' right after start (want the READY message's 'serving on $LAB_IP:4420')"
d=$(nvme discover -t rdma -a "$LAB_IP" -s 4420) || fail "nvme discover right after systemctl start returned"
grep -q "subnqn: *$nqn\$" <<< "$d" || fail "discovery log does not list $nqn"
ready_s=$(awk -v a="${P[ExecMainStartTimestampMonotonic]}" -v b="${P[ActiveEnterTimestampMonotonic]}" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
pid=${P[MainPID]}
row "1 start → READY" "$took" "ActiveState=${P[ActiveState]} SubState=${P[SubState]} MainPID=$pid NRestarts=${P[NRestarts]} WatchdogUSec=${P[WatchdogUSec]} StatusText='${P[StatusText]}' exec→active=${ready_s}s; nvme discover at once: ok"
rxe_props=$(systemctl show -p ActiveState -p SubState -p Result -p ActiveEnterTimestampMonotonic rxe-setup@eth0)
grep -qx 'ActiveState=active' <<< "$rxe_props" && grep -qx 'SubState=exited' <<< "$rxe_props" &&
  grep -qx 'Result=success' <<< "$rxe_props" || fail "rxe-setup@eth0 after raidline's start: $rxe_props"
rxe_at=$(sed -n 's/^ActiveEnterTimestampMonotonic=//p' <<< "$rxe_props")
[ "$rxe_at" -gt 0 ] && [ "$rxe_at" -le "${P[ExecMainStartTimestampMonotonic]}" ] ||
  fail "rxe-setup@eth0 was ready at ${rxe_at} µs, raidline started at ${P[ExecMainStartTimestampMonotonic]} µs"
rdma link show | grep -q "^link $LAB_RXE/1 state ACTIVE" || fail "no active $LAB_RXE"
row "1 rxe-setup@eth0 first" - "pulled in by raidline's drop-in: ActiveState=active SubState=exited Result=success, ready $(awk -v a="$rxe_at" -v b="${P[ExecMainStartTimestampMonotonic]}" 'BEGIN { printf "%.1f", (b - a) / 1e6 }') s before raidline's exec; $LAB_RXE ACTIVE"
jcheck "$c" 10 "ready: serving on $LAB_IP:4420" '!O_DIRECT open failed' '!ERROR'

# The unit's settings as the kernel sees them on the serving process.
st=/proc/$pid/status
grep -q '^NoNewPrivs:[[:space:]]*1' "$st" || fail "NoNewPrivileges not in effect"
grep -q '^Seccomp:[[:space:]]*2' "$st" || fail "no seccomp filter (SystemCallArchitectures/RestrictAddressFamilies)"
grep -Eq '^Max locked memory +unlimited +unlimited' "/proc/$pid/limits" || fail "LimitMEMLOCK not unlimited"
[ "$(cat "/proc/$pid/oom_score_adj")" = -500 ] || fail "OOMScoreAdjust not -500"
ro() { [[ ,$(findmnt -N "$pid" -no OPTIONS "$1"), == *,ro,* ]] || fail "$1 is writable for the daemon ($2)"; }
ro /etc ProtectSystem=full; ro /usr ProtectSystem=full
ro /proc/sys ProtectKernelTunables; ro /sys ProtectKernelTunables; ro /sys/fs/cgroup ProtectControlGroups
[ "$(stat -Lc %d:%i "/proc/$pid/root/tmp")" != "$(stat -Lc %d:%i /tmp)" ] || fail "the daemon shares /tmp (PrivateTmp)"
[ "$(stat -Lc %a "/proc/$pid/root/root")" = 0 ] || fail "/root is accessible to the daemon (ProtectHome)"
grep -q '^Umask:[[:space:]]*0027' "$st" || fail "umask $(awk '/^Umask/ { print $2 }' "$st") (UMask=0027)"
capbnd=$(awk '/^CapBnd:/ { print $2 }' "$st")
(( (16#$capbnd >> 16 & 1) == 0 )) || fail "CAP_SYS_MODULE in the bounding set (ProtectKernelModules)"
(( (16#$capbnd >> 34 & 1) == 0 )) || fail "CAP_SYSLOG in the bounding set (ProtectKernelLogs)"
fds=$(ls -l "/proc/$pid/fd" 2>/dev/null)
uring=$(grep -c 'io_uring' <<< "$fds" || true)
verbs=$(grep -cE '/dev/infiniband/(uverbs|rdma_cm)' <<< "$fds" || true)
[ "$uring" -ge 1 ] || fail "the daemon holds no io_uring instance under the unit (member I/O fell back to synchronous calls)"
[ "$verbs" -ge 2 ] || fail "the daemon holds $verbs verbs/rdma_cm fds (want uverbs and rdma_cm)"
direct=0
for fd in "/proc/$pid"/fd/*; do
  [[ $(readlink "$fd") == /dev/nvme[0-9]n1 ]] || continue
  flags=$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/${fd##*/}")
  if (( 8#$flags & 8#40000 )); then direct=$((direct + 1)); fi
done
[ "$direct" -ge 4 ] || fail "$direct member fds are O_DIRECT (want 4)"
row "1 hardening" - "NoNewPrivs=1 Seccomp=2 Umask=0027 CapBnd=$capbnd memlock=unlimited oom_score_adj=-500; ro /etc /usr /proc/sys /sys /sys/fs/cgroup; private /tmp; /root mode 0; io_uring fds=$uring verbs fds=$verbs O_DIRECT members=$direct"

[ "$(stat -c %a /run/raidline)" = 750 ] || fail "/run/raidline is mode $(stat -c %a /run/raidline) (want 750)"
[ -S /run/raidline/raidline.sock ] || fail "no socket /run/raidline/raidline.sock"
raidline status > "$out/status.txt" || fail "raidline status over /run/raidline/raidline.sock"
grep -q array0 "$out/status.txt" || fail "raidline status lists no array0"
exec 3<>/dev/tcp/127.0.0.1/9420 || fail "the metrics endpoint 127.0.0.1:9420 does not accept"
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 > "$out/metrics.txt"
exec 3<&-
grep -q '^raidline_' "$out/metrics.txt" || fail "the metrics endpoint serves no raidline_ metric"
row "1 raidline status" - "socket /run/raidline/raidline.sock mode $(stat -c %a /run/raidline/raidline.sock), dir 750; lists array0; metrics on 127.0.0.1:9420 answer"

nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120 > /dev/null ||
  fail "nvme connect"
dev=$(lab_nvme_dev "$nqn" 30)
head -c $((8 << 20)) /dev/urandom > /tmp/pattern
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "dd to $dev"
readback() { # PHASE: the 8 MiB read back equal (waits for the host's reconnect)
  timeout 120 dd if="$dev" bs=1M count=8 iflag=direct status=none > /tmp/readback || fail "$1: read from $dev"
  cmp -s /tmp/pattern /tmp/readback || fail "$1: the 8 MiB read back differ"
}
readback "after connect"
row "1 host I/O" - "nvme connect → $dev, 8 MiB O_DIRECT write + read back equal"

# A long job shows in `systemctl status` (STATUS=): a scrub, as a rebuild or replace would.
t=$(now)
raidline array scrub array0 > /dev/null || fail "raidline array scrub array0"
status_shows_scrub() {
  props StatusText
  [[ ${P[StatusText]} =~ array0\ scrub\ [0-9.]+\ % ]]
}
wait_until 30 "StatusText shows the scrub" status_shows_scrub
row "1 STATUS= progress" "$(dt "$t")" "StatusText='${P[StatusText]}'"

# 2. SIGKILL: Restart=on-failure.
lab_log "2. SIGKILL of the main PID $pid"
c=$(mark) t=$(now)
kill -KILL "$pid"
restarted() { # N OLDPID: NRestarts=N and active with another main PID
  props ActiveState SubState MainPID NRestarts
  [ "${P[NRestarts]}" = "$1" ] && [ "${P[ActiveState]}" = active ] && [ "${P[MainPID]}" != "$2" ] && [ "${P[MainPID]}" != 0 ]
}
wait_until 60 "no restart after SIGKILL" restarted 1 "$pid"
took=$(dt "$t")
old=$pid pid=${P[MainPID]}
jcheck "$c" 10 "Main process exited, code=killed, status=9/KILL" "Failed with result 'signal'" \
  "Scheduled restart job, restart counter is at 1" "was not stopped cleanly" "ready: serving on"
readback "after the SIGKILL restart"
row "2 SIGKILL → restart" "$took" "MainPID $old → $pid NRestarts=${P[NRestarts]} ActiveState=${P[ActiveState]} SubState=${P[SubState]}; journal: status=9/KILL, result 'signal', unclean stop noticed; host reconnected, data equal"

# 3. watchdog: a stopped daemon sends no WATCHDOG=1.
lab_log "3. SIGSTOP of the main PID $pid: the watchdog must fire after 10 s"
c=$(mark) t=$(now)
kill -STOP "$pid"
wait_until 60 "no watchdog restart after SIGSTOP" restarted 2 "$pid"
took=$(dt "$t")
old=$pid pid=${P[MainPID]}
jcheck "$c" 10 "Watchdog timeout \(limit 10s\)" "Killing process $old \(raidline\) with signal SIGABRT" \
  "status=6/ABRT" "Failed with result 'watchdog'" "Scheduled restart job, restart counter is at 2" "ready: serving on"
awk -v s="$took" 'BEGIN { exit !(s >= 9) }' || fail "restarted ${took}s after SIGSTOP: before WatchdogSec=10s"
readback "after the watchdog restart"
row "3 SIGSTOP → watchdog" "$took" "MainPID $old → $pid NRestarts=${P[NRestarts]} ActiveState=${P[ActiveState]}; journal: 'Watchdog timeout (limit 10s)', status=6/ABRT, result 'watchdog'; data equal"

# 4. stop: SIGTERM, clean exit, with the host still connected (as at a reboot).
lab_log "4. systemctl stop raidline (the host still connected)"
# systemd logs a main process's clean exit only at debug level: raise PID 1's level for the stop.
systemd-analyze log-level debug
c=$(mark) t=$(now)
systemctl stop raidline || fail "systemctl stop raidline"
took=$(dt "$t")
systemd-analyze log-level info
props ActiveState SubState Result NRestarts
expect ActiveState inactive; expect SubState dead; expect Result success
# The daemon drains and marks the array clean, then exits by itself with status 0 (not killed by
# the SIGTERM, which systemd would also count as success); no SIGKILL, no stop timeout.
jcheck "$c" 10 "stopping: draining in-flight I/O" "array array0: stopped clean" "stopped cleanly" \
  "Main process exited, code=exited, status=0/SUCCESS" "Deactivated successfully" '!SIGKILL|9/KILL|timed out|ERROR'
awk -v s="$took" 'BEGIN { exit !(s < 60) }' || fail "stop took ${took}s (TimeoutStopSec=60)"
[ ! -e /run/raidline ] || fail "/run/raidline still exists after stop (RuntimeDirectory)"
row "4 stop, host connected" "$took" "ActiveState=${P[ActiveState]} SubState=${P[SubState]} Result=${P[Result]} NRestarts=${P[NRestarts]}; journal: 'array array0: stopped clean', 'stopped cleanly', 'code=exited, status=0/SUCCESS', no SIGKILL/timeout; /run/raidline removed"
nvme disconnect -n "$nqn" > /dev/null || fail "nvme disconnect"
systemctl stop rxe-setup@eth0 || fail "systemctl stop rxe-setup@eth0"
[ -z "$(rdma link show 2>/dev/null)" ] || fail "rxe-setup@eth0 stopped but an RDMA link is left"
row "5 rxe-setup@eth0 stop" - "ActiveState=$(systemctl show -P ActiveState rxe-setup@eth0); $LAB_RXE removed"

journalctl -u "$u" -o short-monotonic --no-pager > "$out/raidline.journal"
lab_log "deploy/raidline.service under systemd: PASS (the rows above are in ${summary#"$LAB_RUN"/})"
