#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 600
# raidline's iSER target with open-iscsi's iser host (issue 18): raidline serves its RAID-5
# namespace both over NVMe/RDMA and as LUN 0 of an iSCSI target on an iSER portal. Passes when
# SendTargets discovery over iSER lists the target, the login attaches a SCSI disk over the
# iser transport with raidline's identity and the array's size, a crc32c write+verify of
# FIO_VERIFY_SIZE passes, the shared 4 KiB jobs run (rows labelled raidline-iser join the
# stage's fio table), the logout removes the disk and raidline stops cleanly.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

iqn=iqn.2026-12.io.raidline:array0
lab_rxe_up eth0
"$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --iscsi "$iqn"
trap '"$LAB_DIR/raidline.sh" kill 2>/dev/null || true' EXIT

dev=$(lab_iser_login "$LAB_IP" "$iqn" 60)
transport=$(iscsiadm -m session 2>/dev/null | awk '{ print $1 }' | head -n1)
[ "$transport" = "iser:" ] || lab_fail "the session's transport is '$transport', not iser"
sysdev=/sys/block/${dev#/dev/}/device
vendor=$(xargs < "$sysdev/vendor") model=$(xargs < "$sysdev/model")
size=$(blockdev --getsize64 "$dev")
lab_log "logged in: $dev ($((size / 1048576)) MiB, $vendor $model, $(cat "/sys/block/${dev#/dev/}/queue/logical_block_size")-byte blocks, write cache: $(cat "/sys/block/${dev#/dev/}/device/scsi_disk/"*/cache_type 2>/dev/null))"
[ "$vendor" = RAIDLINE ] || lab_fail "vendor is '$vendor', not RAIDLINE"
[ "$size" -gt 0 ] || lab_fail "$dev has no capacity"
sg_vpd -p di "$dev" 2>/dev/null | head -12 || true

lab_fio raidline-iser "$dev" verify-crc32c randread-4k randwrite-4k

lab_iser_logout "$iqn"
for _ in $(seq 50); do [ -b "$dev" ] || break; sleep 0.1; done
[ ! -b "$dev" ] || lab_fail "$dev still present after logout"
trap - EXIT
"$LAB_DIR/raidline.sh" stop
grep -E "iSER|iSCSI" "$LAB_RUN/raidline.log" | tail -5 >&2 || true
lab_log "raidline over iSER: PASS"
