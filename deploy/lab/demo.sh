#!/usr/bin/env bash
# The main job's guest side (deploy/run.sh): raidline serves a RAID-5 of the guest's emulated NVMe
# drives over soft-RoCE; the kernel's nvme-rdma host discovers, connects and runs a short fio; the
# script prints what each step did, then disconnects and stops raidline cleanly.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"
nqn=nqn.2026-11.io.raidline:array0
secs=${DEMO_FIO_SECS:-10}
lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0
mapfile -t drives < <(lab_nvme_drives)
echo "== drives: ${drives[*]}"
"$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn"
echo "== nvme discover -t rdma -a $LAB_IP -s 4420"
nvme discover -t rdma -a "$LAB_IP" -s 4420 | grep -E 'trtype|subnqn|traddr|trsvcid'
echo "== nvme connect -t rdma -a $LAB_IP -s 4420 -n $nqn"
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn"
dev=$(lab_nvme_dev "$nqn" 30)
echo "== $dev: $(($(blockdev --getsize64 "$dev") / 1048576)) MiB"
nvme list-subsys "$dev" 2>/dev/null | grep -E 'NQN|rdma' || true
nvme id-ctrl "$dev" | grep -E '^(mn|sn|subnqn|mdts|cntlid) '
echo "== fio: 4 KiB random 70/30 read/write, QD 16, ${secs} s, crc32c verify of what it wrote"
fio --name=demo --filename="$dev" --ioengine=libaio --direct=1 --rw=randrw --rwmixread=70 \
  --bs=4k --iodepth=16 --size=256m --time_based --runtime="$secs" --group_reporting \
  --eta=never | grep -E 'read:|write:|lat \(usec\)|clat percentiles|99.00th|err='
fio --name=demo-verify --filename="$dev" --ioengine=libaio --direct=1 --rw=randwrite --bs=16k \
  --iodepth=8 --size=32m --verify=crc32c --verify_fatal=1 --eta=never | grep -E 'write:|err='
echo "== raidline status"
"$LAB_DIR/raidline.sh" status
nvme disconnect -n "$nqn"
"$LAB_DIR/raidline.sh" stop
echo "== done: raidline served $nqn to the kernel host; log: $LAB_RUN/raidline.log"
