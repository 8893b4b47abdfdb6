#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 900
# The reference target end to end: the kernel's nvmet-rdma serving md RAID-5 over 4 emulated NVMe
# drives, driven by the kernel's nvme-rdma host. Passes when `nvme discover` lists the subsystem,
# `nvme connect` yields a block device, a crc32c write+verify of FIO_VERIFY_SIZE passes, the four
# shared fio jobs run (their rows join the stage's fio table) and `nvme disconnect` removes the
# device again.
# In one guest (the stage's way) rxe loops the traffic back inside the guest; label kernel-md5.
# With deploy/lab/run --pair --drives 4 the target guest serves and the initiator guest connects
# over the emulated wire; label kernel-md5-wire.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:ref-md5
case "$LAB_ROLE" in
  solo) addr=$LAB_IP label=kernel-md5 ;;
  target|initiator) addr=$LAB_PEER_IP label=kernel-md5-wire ;;
  *) lab_fail "unknown role $LAB_ROLE" ;;
esac

lab_rxe_up eth0
if [ "$LAB_ROLE" != initiator ]; then
  "$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$nqn"
fi
if [ "$LAB_ROLE" = target ]; then
  lab_signal target-ready
  lab_wait initiator-done 840
  "$LAB_DIR/ref-target.sh" stop --nqn "$nqn"
  lab_rxe_counters | tr '\n' ' '; echo
  lab_log "reference target (serving side): PASS"
  exit 0
fi

# The host side: solo, or the initiator of a pair.
lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
[ "$LAB_ROLE" = solo ] || lab_wait target-ready 300

lab_log "nvme discover -t rdma -a $addr -s 4420"
out=$(nvme discover -t rdma -a "$addr" -s 4420) || lab_fail "nvme discover -t rdma -a $addr -s 4420"
grep -E 'trtype|subnqn|traddr' <<< "$out"
grep -q "subnqn: *$nqn\$" <<< "$out" || lab_fail "discovery log does not list $nqn"

lab_log "nvme connect -t rdma -a $addr -s 4420 -n $nqn"
nvme connect -t rdma -a "$addr" -s 4420 -n "$nqn" || lab_fail "nvme connect to $nqn"
dev=$(lab_nvme_dev "$nqn" 30)
lab_log "connected: $dev ($(($(blockdev --getsize64 "$dev") / 1048576)) MiB)"
nvme list-subsys "$dev" 2>/dev/null | grep -E 'rdma|NQN' || true

lab_fio "$label" "$dev" verify-crc32c randread-4k randwrite-4k seqwrite-128k seqread-128k

lab_log "nvme disconnect -n $nqn"
out=$(nvme disconnect -n "$nqn") || lab_fail "nvme disconnect -n $nqn"
grep -q 'disconnected 1 controller' <<< "$out" || lab_fail "nvme disconnect: $out"
for _ in $(seq 50); do [ -b "$dev" ] || break; sleep 0.1; done
[ ! -b "$dev" ] || lab_fail "$dev still present after disconnect"
if [ "$LAB_ROLE" = solo ]; then
  "$LAB_DIR/ref-target.sh" stop --nqn "$nqn"
else
  lab_signal initiator-done
fi
lab_rxe_counters | tr '\n' ' '; echo
lab_log "reference target: PASS"
