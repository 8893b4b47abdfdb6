#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 900
# The reference target end to end in one guest (rxe loops back inside the guest): the kernel's
# nvmet-rdma serving md RAID-5 over 4 emulated NVMe drives, driven by the kernel's nvme-rdma host.
# Passes when `nvme discover` lists the subsystem, `nvme connect` yields a block device, a crc32c
# write+verify of FIO_VERIFY_SIZE passes, the four shared fio jobs run (their rows land in the
# stage's fio table, label "kernel-md5"), and `nvme disconnect` removes the device again.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:ref-md5
lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0
"$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$nqn"

lab_log "nvme discover"
out=$(nvme discover -t rdma -a "$LAB_IP" -s 4420) || lab_fail "nvme discover -t rdma -a $LAB_IP -s 4420"
echo "$out" | grep -E 'trtype|subnqn|traddr'
grep -q "subnqn: *$nqn\$" <<< "$out" || lab_fail "discovery log does not list $nqn"

lab_log "nvme connect"
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" || lab_fail "nvme connect to $nqn"
dev=$(lab_nvme_dev "$nqn" 30)
lab_log "connected: $dev ($(($(blockdev --getsize64 "$dev") / 1048576)) MiB)"
nvme list-subsys "$dev" 2>/dev/null | grep -E 'rdma|nqn' || true

lab_fio kernel-md5 "$dev" verify-crc32c randread-4k randwrite-4k seqwrite-128k seqread-128k

lab_log "nvme disconnect"
nvme disconnect -n "$nqn" | grep -q 'disconnected 1 controller' || lab_fail "nvme disconnect -n $nqn"
for _ in $(seq 50); do [ -b "$dev" ] || break; sleep 0.1; done
[ ! -b "$dev" ] || lab_fail "$dev still present after disconnect"
"$LAB_DIR/ref-target.sh" stop --nqn "$nqn"
lab_log "reference target: PASS"
