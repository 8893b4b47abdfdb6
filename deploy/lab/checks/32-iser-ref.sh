#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 600
# The kernel's iSER reference end to end (issue 18): LIO with ib_isert serving md RAID-5 over 4
# emulated NVMe drives as LUN 0 of an iSCSI target, used by open-iscsi's iSER host (ib_iser) in
# the same guest. Passes when SendTargets discovery over iSER lists the target, the login
# attaches a SCSI disk whose session runs over the iser transport, a crc32c write+verify of
# FIO_VERIFY_SIZE passes, the shared 4 KiB jobs run (their rows join the stage's fio table)
# and the logout removes the disk again. raidline's iSER target is measured against this one.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

iqn=iqn.2026-12.io.raidline:ref-md5
label=kernel-md5-iser

lab_rxe_up eth0
"$LAB_DIR/ref-target.sh" start --proto iser --addr "$LAB_IP" --nqn "$iqn"

dev=$(lab_iser_login "$LAB_IP" "$iqn" 60)
transport=$(iscsiadm -m session 2>/dev/null | awk '{ print $1 }' | head -n1)
[ "$transport" = "iser:" ] || lab_fail "the session's transport is '$transport', not iser"
lab_log "logged in: $dev ($(($(blockdev --getsize64 "$dev") / 1048576)) MiB, $(cat "/sys/block/${dev#/dev/}/device/model" 2>/dev/null | xargs))"

lab_fio "$label" "$dev" verify-crc32c randread-4k randwrite-4k

lab_iser_logout "$iqn"
for _ in $(seq 50); do [ -b "$dev" ] || break; sleep 0.1; done
[ ! -b "$dev" ] || lab_fail "$dev still present after logout"
"$LAB_DIR/ref-target.sh" stop --proto iser --nqn "$iqn"
lab_rxe_counters | tr '\n' ' '; echo
lab_log "iSER reference target: PASS"
