#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 1500
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# raidline end to end against the kernel's own host, then the kernel's target on the same drives
# with the same fio jobs, side by side. In one guest (rxe loops back inside it):
#  1. raidline serves RAID-5 over 4 emulated NVMe drives; `nvme discover` lists it, `nvme connect`
#     gives a block device, `nvme id-ctrl`/`id-ns` fields are sane (model, subnqn, serial, NGUID,
#     size, preferred write granularity = one stripe);
#  2. the shared fio jobs plus a random-write crc32c verify over RAIDLINE_VERIFY_SIZE (256m), no
#     error; a discard reads back as zeroes;
#  3. mkfs.ext4 + mount + files with checksums + umount + fsck clean; disconnect, reconnect, the
#     checksums still equal;
#  4. crash: raidline is SIGKILLed while the host writes files (each fsynced before its checksum is
#     recorded), restarted; the host reconnects by itself, the writer finishes, fsck is clean and
#     every acknowledged file's checksum is equal; the namespace identifiers did not change;
#  5. `raidline status` and the metrics endpoint answer; `raidline ns disable` makes the host drop
#     the namespace (namespace-change notice), `ns enable` brings it back with the same NGUID
#     and the same files; SIGTERM stops it cleanly;
#  6. the kernel's nvmet-rdma over md RAID-5 on the same drives runs the same fio jobs; a table
#     prints both with the ratio raidline/kernel of IOPS and p99 latency.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:array0
refnqn=nqn.2026-11.io.raidline:ref-md5
jobs=(verify-crc32c randrw-verify randread-4k randwrite-4k seqwrite-128k seqread-128k)
verify_size=${RAIDLINE_VERIFY_SIZE:-256m}
out=$LAB_RUN/raidline
mkdir -p "$out"
rl() { "$LAB_DIR/raidline.sh" "$@"; }

lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0
rl start --addr "$LAB_IP" --nqn "$nqn"

lab_log "nvme discover -t rdma -a $LAB_IP -s 4420"
d=$(nvme discover -t rdma -a "$LAB_IP" -s 4420) || lab_fail "nvme discover"
grep -E 'trtype|subnqn|traddr' <<< "$d"
grep -q "subnqn: *$nqn\$" <<< "$d" || lab_fail "discovery log does not list $nqn"

connect() {
  nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120 \
    || lab_fail "nvme connect to $nqn"
  lab_nvme_dev "$nqn" 30
}
lab_log "nvme connect -t rdma -a $LAB_IP -s 4420 -n $nqn"
dev=$(connect)
bytes=$(blockdev --getsize64 "$dev")
lab_log "connected: $dev ($((bytes / 1048576)) MiB)"

lab_log "nvme id-ctrl / id-ns"
nvme id-ctrl "$dev" -o json > "$out/id-ctrl.json"
nvme id-ns "$dev" -o json > "$out/id-ns.json"
jq -r '"mn=\(.mn) sn=\(.sn) subnqn=\(.subnqn) cntlid=\(.cntlid) mdts=\(.mdts) ioccsz=\(.ioccsz) sgls=\(.sgls) cmic=\(.cmic)"' "$out/id-ctrl.json"
jq -r '"nsze=\(.nsze) ncap=\(.ncap) nuse=\(.nuse) flbas=\(.flbas) npwg=\(.npwg) nows=\(.nows) nguid=\(.nguid) eui64=\(.eui64)"' "$out/id-ns.json"
jq -e --arg n "$nqn" '(.mn | test("Raidline")) and .subnqn == $n and (.sn | length) > 0 and .mdts > 0 and .ioccsz >= 516' \
  "$out/id-ctrl.json" > /dev/null || lab_fail "id-ctrl fields"
# 4 drives, 64 KiB chunks: a stripe holds 3 × 16 data blocks (npwg/nows are 0's based).
jq -e --argjson b "$bytes" '.nsze * 4096 == $b and .npwg == 47 and .nows == 47 and .nguid != "00000000000000000000000000000000"' \
  "$out/id-ns.json" > /dev/null || lab_fail "id-ns fields"
nguid=$(jq -r .nguid "$out/id-ns.json")

FIO_VERIFY_SIZE=$verify_size lab_fio raidline "$dev" "${jobs[@]}"

lab_log "discard 8 MiB at 64 MiB: reads back as zeroes"
blkdiscard -o $((64 << 20)) -l $((8 << 20)) "$dev" || lab_fail "blkdiscard"
cmp -n $((8 << 20)) <(dd if="$dev" bs=1M skip=64 count=8 iflag=direct status=none) /dev/zero ||
  lab_fail "discarded range is not zero"

lab_log "mkfs.ext4, files with checksums, fsck"
mkfs.ext4 -q -F -E nodiscard "$dev" || lab_fail "mkfs.ext4"
mkdir -p /mnt/rl
mount "$dev" /mnt/rl
mkdir /mnt/rl/data
for i in $(seq 1 24); do head -c $((i * 97 * 1024)) /dev/urandom > "/mnt/rl/data/f$i"; done
(cd /mnt/rl/data && sha256sum f*) > "$out/files.sha256"
umount /mnt/rl
fsck.ext4 -fn "$dev" > "$out/fsck1.txt" 2>&1 || { cat "$out/fsck1.txt"; lab_fail "fsck after the first umount"; }
lab_log "fsck clean"

lab_log "disconnect, reconnect, checksums"
nvme disconnect -n "$nqn" | grep -q 'disconnected 1 controller' || lab_fail "nvme disconnect"
dev=$(connect)
mount -o ro "$dev" /mnt/rl
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "checksums after reconnect"
umount /mnt/rl
lab_log "checksums equal after reconnect"

lab_log "crash test: SIGKILL raidline under host writes, restart"
mount "$dev" /mnt/rl
mkdir -p /mnt/rl/crash
: > "$out/acked.sha256"
lab_fsync_writer /mnt/rl/crash c 40 512 "$out/acked.sha256" & wpid=$!
for _ in $(seq 600); do [ "$(wc -l < "$out/acked.sha256")" -ge 8 ] && break; sleep 0.1; done
rl kill
sleep 2
rl start --addr "$LAB_IP" --nqn "$nqn"
grep -q "was not stopped cleanly" "$LAB_RUN/raidline.log" || lab_fail "restart did not notice the unclean stop"
timeout 600 tail --pid="$wpid" -f /dev/null || lab_fail "writer did not finish after the restart"
wait "$wpid" || lab_fail "writer failed"
lab_log "writer finished: $(wc -l < "$out/acked.sha256") files acknowledged"
sync
umount /mnt/rl
fsck.ext4 -fn "$dev" > "$out/fsck2.txt" 2>&1 || { cat "$out/fsck2.txt"; lab_fail "fsck after the crash"; }
mount -o ro "$dev" /mnt/rl
(cd /mnt/rl/crash && sha256sum -c --quiet "$out/acked.sha256") || lab_fail "acknowledged data lost"
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "older files damaged"
umount /mnt/rl
nvme id-ns "$dev" -o json | jq -e --arg g "$nguid" '.nguid == $g' > /dev/null ||
  lab_fail "NGUID changed across the restart"
dmesg | grep -E "identifiers changed" && lab_fail "the host saw changed identifiers"
lab_log "crash test: fsck clean, all acknowledged files intact, identifiers unchanged"

lab_log "raidline status, metrics"
rl status | tee "$out/status.txt"
grep -q "array0" "$out/status.txt" || lab_fail "status lists no array"
exec 3<>/dev/tcp/127.0.0.1/9420
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 > "$out/metrics.txt"
exec 3<&-
grep -q '^raidline_namespace_reads_total' "$out/metrics.txt" || grep -q '^raidline_' "$out/metrics.txt" ||
  lab_fail "metrics endpoint"
grep -E '^raidline_payload_bytes_copied' "$out/metrics.txt" || true

lab_log "namespace change: ns disable → the host drops $dev; ns enable → it is back"
rl cli ns disable "$nqn" 1
for _ in $(seq 300); do [ -b "$dev" ] || break; sleep 0.1; done
[ -b "$dev" ] && lab_fail "the host still has $dev 30 s after ns disable (no namespace-change notice?)"
rl status | grep -q "(inactive)" || lab_fail "status does not show the namespace inactive"
lab_log "host dropped $dev: $(dmesg | grep -E 'rescanning|nvme' | tail -n 2 | tr '\n' ' ')"
rl cli ns enable "$nqn" 1
dev=$(lab_nvme_dev "$nqn" 30)
mount -o ro "$dev" /mnt/rl
(cd /mnt/rl/data && sha256sum -c --quiet "$out/files.sha256") || lab_fail "checksums after ns enable"
umount /mnt/rl
nvme id-ns "$dev" -o json | jq -e --arg g "$nguid" '.nguid == $g' > /dev/null ||
  lab_fail "NGUID changed across ns disable/enable"
lab_log "namespace back as $dev, same NGUID, checksums equal"

nvme disconnect -n "$nqn" | grep -q 'disconnected 1 controller' || lab_fail "nvme disconnect"
rl stop
if grep -E "ERROR" "$LAB_RUN/raidline.log"; then lab_fail "raidline logged errors"; fi

lab_log "the kernel target on the same drives, same jobs"
"$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$refnqn"
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$refnqn" || lab_fail "nvme connect to $refnqn"
kdev=$(lab_nvme_dev "$refnqn" 30)
FIO_VERIFY_SIZE=$verify_size lab_fio kernel-md5 "$kdev" "${jobs[@]}"
nvme disconnect -n "$refnqn" > /dev/null || lab_fail "nvme disconnect $refnqn"
"$LAB_DIR/ref-target.sh" stop --nqn "$refnqn"

lab_log "raidline vs kernel nvmet (same guest, drives and jobs; TCG: function check, not speed)"
{
  printf '%-14s %10s %10s %7s %12s %12s %7s\n' job "rl IOPS" "kern IOPS" ratio "rl p99(us)" "kern p99(us)" ratio
  for j in "${jobs[@]}"; do
    r=$(lab_fio_row raidline "$j" "$LAB_RUN/fio/raidline-$j.json")
    k=$(lab_fio_row kernel-md5 "$j" "$LAB_RUN/fio/kernel-md5-$j.json")
    read -r _ _ ri _ rp _ <<< "$r"
    read -r _ _ ki _ kp _ <<< "$k"
    awk -v j="$j" -v ri="$ri" -v ki="$ki" -v rp="$rp" -v kp="$kp" 'BEGIN {
      printf "%-14s %10d %10d %7.2f %12d %12d %7.2f\n", j, ri, ki, (ki > 0 ? ri / ki : 0), rp, kp, (kp > 0 ? rp / kp : 0) }'
  done
} | tee "$out/side-by-side.txt"
lab_log "raidline end to end: PASS"
