#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 256M --timeout 600
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# Whose devices raidline takes, in one guest (issue 19):
#  1. a member that is mounted, and two held by an md array, are refused (O_EXCL): the array is
#     not created, the log names "mounted at" and the md device, and `raidline status` says why;
#  2. once unmounted and stopped, the ext4 filesystem and the md superblocks are still there:
#     creating the array over them is refused, naming each device and what it holds, and not
#     one byte of the devices' first and last MiB changed;
#  3. with `overwrite` naming those devices the array is created over them and served;
#  4. a member behind a device-mapper table that turns into `error` fails under a scrub:
#     `raidline status` names that device (/dev/mapper/…) with the I/O error, and the metrics
#     carry raidline_array_member_lost{device=…,reason="io_error"}.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

out=$LAB_RUN/ownership
mkdir -p "$out"
rl() { "$LAB_DIR/raidline.sh" "$@"; }
log=$LAB_RUN/raidline.log

lab_modules raid1 dm-mod
lab_rxe_up eth0
mapfile -t d < <(lab_nvme_drives)
[ "${#d[@]}" -ge 4 ] || lab_fail "needs 4 drives"
for x in "${d[@]}"; do dd if=/dev/zero of="$x" bs=1M count=2 oflag=direct status=none; done

# Only what the latest start wrote to the log.
mark() { stat -c %s "$log" 2>/dev/null || echo 0; }
since() { tail -c +"$(($1 + 1))" "$log"; }

lab_log "1. a mounted device and an md array's devices are refused"
mkfs.ext4 -q -F "${d[3]}" || lab_fail "mkfs.ext4"
mkdir -p /mnt/own
mount "${d[3]}" /mnt/own || lab_fail "mount"
mkdir -p /dev/md
mdadm --create /dev/md/own --run --quiet --level=1 --raid-devices=2 --metadata=1.2 \
  "${d[1]}" "${d[2]}" || lab_fail "mdadm --create"
md=$(basename "$(readlink -f /dev/md/own)")
m=$(mark)
rl start --addr "$LAB_IP" --expect-refused
since "$m" > "$out/start1.log"
grep -q "${d[3]}: the device is in use: mounted at /mnt/own" "$out/start1.log" ||
  { cat "$out/start1.log"; lab_fail "the mounted device's mount point is not named"; }
grep -q "${d[1]}: the device is in use: held by $md" "$out/start1.log" ||
  { cat "$out/start1.log"; lab_fail "the md array holding ${d[1]} is not named"; }
rl status > "$out/status1.txt" 2>&1 || true
grep -q "not every configured device can be used" "$out/status1.txt" ||
  { cat "$out/status1.txt"; lab_fail "status does not say why the array did not start"; }
rl stop
umount /mnt/own
mdadm --stop /dev/md/own > /dev/null || lab_fail "mdadm --stop"

lab_log "2. foreign data: creation refused, nothing written"
ends() {
  local x s
  for x in "${d[@]}"; do
    s=$(blockdev --getsize64 "$x")
    { dd if="$x" bs=1M count=1 iflag=direct status=none
      dd if="$x" bs=1M skip=$((s / 1048576 - 1)) count=1 iflag=direct status=none; } | sha256sum
  done
}
ends > "$out/before.sha"
m=$(mark)
rl start --addr "$LAB_IP" --expect-refused
since "$m" > "$out/start2.log"
rl status > "$out/status2.txt" 2>&1 || true
rl stop
ends > "$out/after.sha"
cmp -s "$out/before.sha" "$out/after.sha" || lab_fail "a device was written although the array was refused"
for want in "${d[3]} holds an ext2/3/4 filesystem" "${d[1]} holds an md RAID member (superblock 1.2)" \
  "${d[2]} holds an md RAID member (superblock 1.2)" "overwrite = [...]"; do
  grep -qF "$want" "$out/status2.txt" || { cat "$out/status2.txt"; lab_fail "status does not say: $want"; }
done

lab_log "3. overwrite names them: created and served"
# The fourth member behind device mapper (a linear table for now).
sectors=$(blockdev --getsz "${d[3]}")
# No udev in the guest: dmsetup makes the /dev/mapper node itself.
dmsetup create --noudevsync own --table "0 $sectors linear ${d[3]} 0" || lab_fail "dmsetup create"
dmsetup mknodes own
[ -b /dev/mapper/own ] || lab_fail "no /dev/mapper/own"
members="${d[0]} ${d[1]} ${d[2]} /dev/mapper/own"
rl start --addr "$LAB_IP" --members "$members" --overwrite "${d[1]} ${d[2]} /dev/mapper/own"
rl status > "$out/status3.txt"
grep -q "array0 \[clean\]" "$out/status3.txt" || { cat "$out/status3.txt"; lab_fail "array0 is not clean"; }

lab_log "4. a member failing I/O is named in status with the error"
dmsetup suspend --noudevsync own && dmsetup reload own --table "0 $sectors error" &&
  dmsetup resume --noudevsync own ||
  lab_fail "dmsetup error table"
rl cli array scrub array0 > /dev/null 2>&1 || true
for _ in $(seq 300); do
  rl cli status --json > "$out/status4.json" 2>/dev/null || true
  jq -e '.arrays[0].members[3].state == "failed"' "$out/status4.json" > /dev/null 2>&1 && break
  sleep 0.2
done
jq -e '.arrays[0].members[3] | .state == "failed" and .path == "/dev/mapper/own"
  and (.reason | test("I/O error")) and .reason_class == "io_error"' "$out/status4.json" > /dev/null ||
  { jq '.arrays[0].members' "$out/status4.json"; lab_fail "status does not name the failed device and its I/O error"; }
rl status | tee "$out/status4.txt"
exec 3<>/dev/tcp/127.0.0.1/9420
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 > "$out/metrics.txt"
exec 3<&-
grep -q 'raidline_array_member_lost{array="array0",role="3",device="/dev/mapper/own",reason="io_error"} 1' \
  "$out/metrics.txt" || { grep member_lost "$out/metrics.txt"; lab_fail "metrics do not name the lost member"; }
rl stop
dmsetup remove --noudevsync own
lab_log "ownership: PASS"
