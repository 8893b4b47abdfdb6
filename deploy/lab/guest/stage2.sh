#!/bin/bash
# PID 1 of a lab guest, started by the initramfs after switch_root onto the overlay of the host's
# root. Mounts the pseudo filesystems, brings up eth0 with the address and MTU the host chose
# (kernel command line lab.*), runs /lab/run/<role>.cmd as root with its output on the second
# serial port (the host streams it), writes the exit status to /lab/run/<role>.status and the
# kernel log to /lab/run/<role>.dmesg, and powers off. With lab.init=systemd (deploy/lab/run
# --systemd) it hands PID 1 to guest/systemd-pid1.sh once the mounts and eth0 are up instead; the
# command then runs as a systemd service that does the same at its end. No `set -e`: PID 1 must
# always reach the power-off, whatever fails.
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8

out=/dev/ttyS1
halt() { sync; busybox poweroff -f; sleep 1000; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# A fresh /tmp, unless the repository itself lives under /tmp (a CI checkout may): then the host's
# /tmp stays visible through the overlay, whose tmpfs upper layer already takes every write.
case "$0" in
  /tmp/*) ;;
  *) mount -t tmpfs -o mode=1777 tmpfs /tmp ;;
esac
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/lock /var/tmp
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd

role=solo ip='' peer='' mtu=1500 drives=0 init=stage2
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    lab.role=*) role=${arg#lab.role=} ;;
    lab.ip=*) ip=${arg#lab.ip=} ;;
    lab.peer=*) peer=${arg#lab.peer=} ;;
    lab.mtu=*) mtu=${arg#lab.mtu=} ;;
    lab.drives=*) drives=${arg#lab.drives=} ;;
    lab.init=*) init=${arg#lab.init=} ;;
  esac
done
stty -F "$out" raw -echo 2>/dev/null
hostname "lab-$role"

say() { echo "lab-guest[$role]: $*" > "$out"; }
status=/lab/run/$role.status
rm -f "$status"
# The host's boot watchdog (deploy/lab/run) waits for this: the kernel booted and PID 1 runs.
: > "/lab/run/$role.booted"

ip link set lo up
if modprobe virtio_net && [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 mtu "$mtu" || say "cannot set MTU $mtu on eth0"
  ip link set eth0 up
  [ -n "$ip" ] && ip addr add "$ip/24" dev eth0
else
  say "no eth0 (virtio_net did not probe)"
fi

export LAB_ROLE=$role LAB_IP=$ip LAB_PEER_IP=$peer LAB_MTU=$mtu LAB_DRIVES=$drives LAB_RUN=/lab/run
export LAB_DIR=${0%/guest/stage2.sh}

if [ ! -r "/lab/run/$role.cmd" ]; then
  say "no command file /lab/run/$role.cmd"
  halt
fi
if [ "$init" = systemd ]; then
  # Still PID 1: systemd takes over this process (execfail: a failed exec returns here).
  shopt -s execfail
  exec "$LAB_DIR/guest/systemd-pid1.sh" "$role"
  say "cannot exec $LAB_DIR/guest/systemd-pid1.sh"
  halt
fi
bash "/lab/run/$role.cmd" < /dev/null > "$out" 2>&1
rc=$?
dmesg > "/lab/run/$role.dmesg" 2>/dev/null
echo "$rc" > "$status.new" && mv "$status.new" "$status"
halt
