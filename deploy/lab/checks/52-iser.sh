#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 900
# raidline's iSER target with open-iscsi's iser host, then the kernel's reference on the same
# drives (issue 18). raidline serves its RAID-5 namespace as LUN 0 of an iSCSI target on an
# iSER portal (beside NVMe/RDMA). Passes when:
#  1. SendTargets discovery over iSER lists the target; the login attaches a SCSI disk over the
#     iser transport with raidline's identity (vendor RAIDLINE, VPD 0x83's EUI-64 designator)
#     and the array's size; `raidline status` lists the session and the metrics count its I/O
#     under protocol="iscsi";
#  2. a crc32c write+verify of FIO_VERIFY_SIZE and the shared 4 KiB jobs pass (rows
#     raidline-iser in the stage's fio table); a discarded range reads back as zeroes;
#  3. mkfs.ext4, files with checksums, fsck clean; logout, login again: equal checksums;
#  4. crash: raidline is SIGKILLed while the host writes fsynced files and restarted; the
#     session recovers by itself, the writer finishes, fsck is clean and every acknowledged
#     file is intact;
#  5. a member fails (`raidline array fail`) under I/O: the host's reads and writes go on and
#     the files are still equal;
#  6. logout removes the disk; raidline restarted with CHAP refuses a wrong secret and no CHAP,
#     and takes mutual CHAP (open-iscsi's username/password and username_in/password_in);
#     with discovery CHAP too, a SendTargets discovery without it is refused and one with it
#     (a discoverydb record's discovery.sendtargets.auth.*) lists the target;
#     raidline stops cleanly (no ERROR in its log);
#  7. LIO with ib_isert serves md RAID-5 on the same drives to the same host: the same fio jobs,
#     rows kernel-md5-iser, and a side-by-side table.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

iqn=iqn.2026-12.io.raidline:array0
refiqn=iqn.2026-12.io.raidline:ref-md5
jobs=(verify-crc32c randread-4k randwrite-4k)
out=$LAB_RUN/iser
mkdir -p "$out" /mnt/rl
rl() { "$LAB_DIR/raidline.sh" "$@"; }

lab_rxe_up eth0
rl start --addr "$LAB_IP" --iscsi "$iqn"
trap 'rl kill 2>/dev/null || true' EXIT

dev=$(lab_iser_login "$LAB_IP" "$iqn" 60)
transport=$(iscsiadm -m session 2>/dev/null | awk '{ print $1 }' | head -n1)
[ "$transport" = "iser:" ] || lab_fail "the session's transport is '$transport', not iser"
name=${dev#/dev/}
vendor=$(xargs < "/sys/block/$name/device/vendor")
size=$(blockdev --getsize64 "$dev")
lab_log "logged in: $dev ($((size / 1048576)) MiB, $vendor $(xargs < "/sys/block/$name/device/model"), $(cat "/sys/block/$name/queue/logical_block_size")-byte blocks, cache $(cat /sys/block/"$name"/device/scsi_disk/*/cache_type), discard max $(cat "/sys/block/$name/queue/discard_max_bytes") B)"
[ "$vendor" = RAIDLINE ] || lab_fail "vendor is '$vendor', not RAIDLINE"
[ "$size" -gt $((3000 << 20)) ] || lab_fail "$dev is $size bytes, not the array's 3069 MiB"
wwid=$(cat "/sys/block/$name/device/wwid" 2>/dev/null || true)
lab_log "wwid: $wwid"
[[ "$wwid" == eui.* ]] || lab_fail "wwid '$wwid' is not the namespace's EUI-64 designator"

lab_fio raidline-iser "$dev" "${jobs[@]}"

lab_log "raidline status lists the session; the metrics count iSCSI I/O"
rl status > "$out/status.txt"
grep -A1 "^iSCSI sessions: 1" "$out/status.txt" || { cat "$out/status.txt"; lab_fail "status lists no iSCSI session"; }
exec 3<>/dev/tcp/127.0.0.1/9420
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 > "$out/metrics.txt"
exec 3<&-
grep -E '^raidline_io_commands_total|^raidline_iscsi_logins_total' "$out/metrics.txt"
awk '/^raidline_io_commands_total\{protocol="iscsi"\}/ { n = $2 } END { exit !(n > 0) }' "$out/metrics.txt" ||
  lab_fail "no iSCSI I/O counted"

lab_log "discard 8 MiB at 64 MiB: reads back as zeroes"
blkdiscard -o $((64 << 20)) -l $((8 << 20)) "$dev" || lab_fail "blkdiscard"
cmp -n $((8 << 20)) <(dd if="$dev" bs=1M skip=64 count=8 iflag=direct status=none) /dev/zero ||
  lab_fail "discarded range is not zero"

lab_log "mkfs.ext4, files with checksums, fsck"
mkfs.ext4 -q -F -E nodiscard "$dev" || lab_fail "mkfs.ext4"
mount "$dev" /mnt/rl
mkdir /mnt/rl/data /mnt/rl/crash
for i in $(seq 1 20); do head -c $((256 * 1024 + i * 4096)) /dev/urandom > "/mnt/rl/data/f$i"; done
(cd /mnt/rl/data && sha256sum f*) > "$out/files.sha256"
umount /mnt/rl
fsck.ext4 -fn "$dev" > "$out/fsck1.txt" 2>&1 || { cat "$out/fsck1.txt"; lab_fail "fsck after the first umount"; }

lab_log "logout, login again: the same files"
lab_iser_logout "$iqn"
# The session's end is logged with its reason (its login was).
for _ in $(seq 100); do grep -q "iSCSI Normal session .* ended: " "$LAB_RUN/raidline.log" && break; sleep 0.1; done
grep -E "iSCSI (Normal|Discovery) session .* ended: |closed before its login completed" "$LAB_RUN/raidline.log" | tail -3 >&2 || true
grep -q "iSCSI Normal session .* to $iqn ended: " "$LAB_RUN/raidline.log" ||
  lab_fail "the logged-out session's end is not in raidline's log"
dev=$(lab_iser_login "$LAB_IP" "$iqn" 60)
mount "$dev" /mnt/rl
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "checksums after a new login"

lab_log "crash test: SIGKILL raidline under host writes, restart"
: > "$out/acked.sha256"
lab_fsync_writer /mnt/rl/crash c 40 512 "$out/acked.sha256" & wpid=$!
for _ in $(seq 600); do [ "$(wc -l < "$out/acked.sha256")" -ge 8 ] && break; sleep 0.1; done
rl kill
sleep 2
rl start --addr "$LAB_IP" --iscsi "$iqn"
timeout 600 tail --pid="$wpid" -f /dev/null || lab_fail "writer did not finish after the restart"
wait "$wpid" || lab_fail "writer failed"
lab_log "writer finished: $(wc -l < "$out/acked.sha256") files acknowledged; the session recovered: $(iscsiadm -m session -P 1 2>/dev/null | grep -E 'iSCSI Session State|Internal iscsid' | xargs)"
sync
umount /mnt/rl
fsck.ext4 -fn "$dev" > "$out/fsck2.txt" 2>&1 || { cat "$out/fsck2.txt"; lab_fail "fsck after the crash"; }
mount "$dev" /mnt/rl
(cd /mnt/rl/crash && sha256sum -c --quiet "$out/acked.sha256") || lab_fail "acknowledged data lost"
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "older files damaged"
lab_log "crash test: fsck clean, all acknowledged files intact"

lab_log "member failure under I/O: raidline array fail array0 $(lab_nvme_drives | tail -n 1)"
: > "$out/degraded.sha256"
lab_fsync_writer /mnt/rl/crash d 20 256 "$out/degraded.sha256" & wpid=$!
for _ in $(seq 300); do [ "$(wc -l < "$out/degraded.sha256")" -ge 4 ] && break; sleep 0.1; done
rl cli array fail array0 "$(lab_nvme_drives | tail -n 1)" || lab_fail "raidline array fail"
wait "$wpid" || lab_fail "writes failed while a member failed"
echo 3 > /proc/sys/vm/drop_caches
(cd /mnt/rl/crash && sha256sum -c --quiet "$out/degraded.sha256") || lab_fail "files written across the failure differ"
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "files read degraded differ"
rl status | grep -iE "degraded|failed" | head -3 || lab_fail "status does not show the failed member"
umount /mnt/rl

lab_iser_logout "$iqn"
for _ in $(seq 50); do [ -b "$dev" ] || break; sleep 0.1; done
[ ! -b "$dev" ] || lab_fail "$dev still present after logout"

lab_log "CHAP: raidline restarted with a CHAP secret, its own for mutual CHAP, and one for discovery"
rl stop
rl start --addr "$LAB_IP" --iscsi "$iqn" --iscsi-chap "host1 initiator-secret array0 target-secret-12" \
  --iscsi-discovery-chap "finder discovery-secret"
# Discovery without CHAP is refused now.
if iscsiadm -m discovery -t st -p "$LAB_IP:3260" -I iser > "$out/dchap-none.txt" 2>&1; then
  cat "$out/dchap-none.txt"
  lab_fail "a discovery without CHAP was answered"
fi
grep -qi "failed to authenticate" "$out/dchap-none.txt" ||
  { cat "$out/dchap-none.txt"; lab_fail "a discovery without CHAP failed for another reason"; }
lab_log "discovery without CHAP refused: $(head -n 1 "$out/dchap-none.txt")"
dev=$(LAB_ISER_DISCOVERY_CHAP="finder discovery-secret" \
  LAB_ISER_CHAP="host1 initiator-secret array0 target-secret-12" lab_iser_login "$LAB_IP" "$iqn" 60)
mount -o ro "$dev" /mnt/rl
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "checksums over a CHAP session"
umount /mnt/rl
lab_iser_logout "$iqn"
# The refusals last: open-iscsi may keep retrying a refused node in the background. The
# discovery goes with its CHAP; the login is what is refused.
export LAB_ISER_DISCOVERY_CHAP="finder discovery-secret"
if LAB_ISER_CHAP="host1 wrong-secret-123" lab_iser_login "$LAB_IP" "$iqn" 10 > /dev/null 2> "$out/chap-wrong.txt"; then
  lab_fail "a login with the wrong CHAP secret was let in"
fi
grep -q "authorization failure" "$out/chap-wrong.txt" || { cat "$out/chap-wrong.txt"; lab_fail "a wrong CHAP secret was not refused as an authorization failure"; }
iscsiadm -m node -T "$iqn" -u > /dev/null 2>&1 || true
iscsiadm -m node -T "$iqn" -o delete 2> /dev/null || true
if lab_iser_login "$LAB_IP" "$iqn" 10 > /dev/null 2> "$out/chap-none.txt"; then
  lab_fail "a login without CHAP was let in"
fi
grep -q "authorization failure" "$out/chap-none.txt" || { cat "$out/chap-none.txt"; lab_fail "a login without CHAP was not refused as an authorization failure"; }
iscsiadm -m node -T "$iqn" -u > /dev/null 2>&1 || true
iscsiadm -m node -T "$iqn" -o delete 2> /dev/null || true
unset LAB_ISER_DISCOVERY_CHAP
iscsiadm -m discoverydb -t st -p "$LAB_IP:3260" -I iser -o delete 2> /dev/null || true
lab_log "CHAP: mutual CHAP logged in (the files equal); a wrong secret and no CHAP refused"
trap - EXIT
rl stop
grep -E "iSER|iSCSI" "$LAB_RUN/raidline.log" | tail -4 >&2 || true
if grep -E " ERROR " "$LAB_RUN/raidline.log"; then lab_fail "raidline logged errors"; fi

lab_log "the kernel's iSER target (LIO + ib_isert) on md RAID-5, same drives, same jobs"
"$LAB_DIR/ref-target.sh" start --proto iser --addr "$LAB_IP" --nqn "$refiqn"
kdev=$(lab_iser_login "$LAB_IP" "$refiqn" 60)
lab_fio kernel-md5-iser "$kdev" "${jobs[@]}"
lab_iser_logout "$refiqn"
"$LAB_DIR/ref-target.sh" stop --proto iser --nqn "$refiqn"

lab_log "raidline vs LIO over iSER (same guest, drives and jobs; TCG: function check, not speed)"
{
  printf '%-14s %10s %10s %7s\n' job "rl IOPS" "LIO IOPS" ratio
  for j in "${jobs[@]}"; do
    r=$(lab_fio_row raidline-iser "$j" "$LAB_RUN/fio/raidline-iser-$j.json")
    k=$(lab_fio_row kernel-md5-iser "$j" "$LAB_RUN/fio/kernel-md5-iser-$j.json")
    read -r _ _ ri _ <<< "$r"
    read -r _ _ ki _ <<< "$k"
    awk -v j="$j" -v ri="$ri" -v ki="$ki" 'BEGIN {
      printf "%-14s %10d %10d %7.2f\n", j, ri, ki, (ki > 0 ? ri / ki : 0) }'
  done
} | tee "$out/side-by-side.txt"
lab_rxe_counters | tr '\n' ' '; echo
lab_log "raidline over iSER: PASS"
