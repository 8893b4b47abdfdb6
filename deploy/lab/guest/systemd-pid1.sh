#!/bin/bash
# PID 1 of a `deploy/lab/run --systemd` guest, exec'ed by guest/stage2.sh once /proc, /sys, /run,
# /tmp and eth0 are up: writes a minimal unit set to /run/lab-systemd and execs the host's
# systemd (seen through the 9p root) as PID 1, so a check can `systemctl start` a real unit.
#
# Invariants, so that boot stays a few seconds under TCG and nothing of the host's own boot runs:
# - systemd searches only /etc/systemd/system (emptied in this guest's overlay: the host's enabled
#   units and .wants links are gone; a check installs its units there, as an operator would) and
#   /run/lab-systemd (SYSTEMD_UNIT_PATH); no generator runs (SYSTEMD_GENERATOR_PATH is empty), so
#   the host's fstab, getty and sysv units never exist;
# - the default unit is lab.target: journald (copied from the host's units, so services log to
#   the journal and `journalctl` works) and lab-command.service, which runs /lab/run/<role>.cmd
#   through guest/systemd-command.sh; that script writes the status and powers off, as stage2.sh
#   does without systemd;
# - sysinit.target, basic.target, sockets.target, network.target, network-online.target,
#   multi-user.target and shutdown.target exist but pull nothing: a unit's default dependencies
#   resolve without starting anything else. eth0 is already up (stage2.sh) when they are reached.
# No `set -e`: if anything here fails the guest still powers off with a message.
set -uo pipefail
role=${1:-solo}
out=/dev/ttyS1
units=/run/lab-systemd
say() { echo "lab-guest[$role]: $*" > "$out"; }
halt() { sync; busybox poweroff -f; sleep 1000; }

mkdir -p "$units/none" || { say "cannot create $units"; halt; }
# The command's environment: what stage2.sh exported (systemd does not pass PID 1's environment
# on to services).
env_file=$units/lab.env
: > "$env_file"
for v in PATH HOME TERM LANG LAB_ROLE LAB_IP LAB_PEER_IP LAB_MTU LAB_DRIVES LAB_RUN LAB_DIR; do
  printf '%s=%s\n' "$v" "${!v-}" >> "$env_file"
done

# The host's enabled units must not exist in this guest (the overlay keeps the host untouched).
rm -rf /etc/systemd/system && mkdir -p /etc/systemd/system || { say "cannot empty /etc/systemd/system"; halt; }

for u in systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket \
         systemd-journald-audit.socket; do
  cp "/lib/systemd/system/$u" "$units/" || say "no $u on this host: services will not log to a journal"
done

target() { # NAME DESCRIPTION [UNIT-SECTION-LINES...]
  local name=$1 desc=$2
  shift 2
  { echo "[Unit]"; echo "Description=$desc"; printf '%s\n' "$@"; } > "$units/$name"
}
target lab.target "Lab guest" "Wants=systemd-journald.service lab-command.service"
target sysinit.target "System Initialization (lab: nothing)" "DefaultDependencies=no"
target sockets.target "Sockets (lab: nothing)" "DefaultDependencies=no"
target basic.target "Basic System (lab: nothing)" "Requires=sysinit.target" "After=sysinit.target sockets.target"
target network.target "Network (lab: eth0 is up before systemd starts)" "DefaultDependencies=no"
target network-online.target "Network is Online (lab: eth0 is up before systemd starts)" "DefaultDependencies=no" "After=network.target"
target multi-user.target "Multi-User System (lab: nothing)" "Requires=basic.target" "After=basic.target"
target shutdown.target "System Shutdown" "DefaultDependencies=no" "RefuseManualStart=yes"
cat > "$units/lab-command.service" <<UNIT
[Unit]
Description=Lab command /lab/run/$role.cmd
DefaultDependencies=no
After=systemd-journald.service

[Service]
Type=exec
EnvironmentFile=$env_file
ExecStart=/bin/bash $LAB_DIR/guest/systemd-command.sh $role
StandardInput=null
StandardOutput=file:$out
StandardError=inherit
LimitMEMLOCK=infinity
LimitNOFILE=65536
UNIT

export SYSTEMD_UNIT_PATH=/etc/systemd/system:$units
export SYSTEMD_GENERATOR_PATH=$units/none SYSTEMD_ENVIRONMENT_GENERATOR_PATH=$units/none
shopt -s execfail   # a failed exec returns here, so PID 1 still powers off
exec /lib/systemd/systemd --unit=lab.target
say "cannot exec /lib/systemd/systemd"
halt
