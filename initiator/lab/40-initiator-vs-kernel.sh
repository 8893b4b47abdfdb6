#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 600
# lab-before: cargo build --release --locked -p raidline-initiator --bin raidline-initiator
# Our user-space host against the kernel's NVMe-oF target (the referee of our host side), in one
# guest (rxe loops back inside it): nvmet-rdma serving md RAID-5 over 4 emulated NVMe drives
# (deploy/lab/ref-target.sh). Passes when raidline-initiator discovers the subsystem, identifies
# the controller and its namespace, gets nvmet's typed Connect status for an unknown subsystem,
# verifies a seeded pattern (no mismatching LBA), round-trips a file with write/read, zeroes a
# range (Write Zeroes) and trims it (DSM), runs perf (randread, randwrite, randrw on 2 queues;
# no I/O error), receives the namespace-attribute AEN when a namespace is added under a running
# perf and reads the Changed Namespace List naming it, when the kernel's own nvme-rdma host reads
# back exactly what raidline-initiator wrote and the other way round, and when the kernel target
# logged no keep-alive expiry or transport error.
#
# RAIDLINE_INITIATOR (passed with --env) overrides the binary (default build/release/...).
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

bin=${RAIDLINE_INITIATOR:-$PWD/build/release/raidline-initiator}
[ -x "$bin" ] || lab_fail "no $bin (cargo build --release -p raidline-initiator)"
nqn=nqn.2026-11.io.raidline:ref-md5
verify_size=${INITIATOR_VERIFY_SIZE:-16m}
perf_time=${INITIATOR_PERF_TIME:-5}
out=$LAB_RUN/initiator
mkdir -p "$out"

lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0
"$LAB_DIR/ref-target.sh" start --addr "$LAB_IP" --nqn "$nqn"
ri() { "$bin" "$1" -a "$LAB_IP" --timeout 20000 "${@:2}"; }

lab_log "raidline-initiator discover"
ri discover | tee "$out/discover.txt"
grep -q "subnqn: *$nqn\$" "$out/discover.txt" || lab_fail "discovery log does not list $nqn"
grep -q "trtype: *rdma" "$out/discover.txt" || lab_fail "discovery entry is not rdma"

lab_log "raidline-initiator identify"
ri identify -n "$nqn" | tee "$out/identify.txt"
grep -q "subnqn *: $nqn\$" "$out/identify.txt" || lab_fail "identify: wrong subnqn"
grep -q "cntrltype : 1 (I/O)" "$out/identify.txt" || lab_fail "identify: not an I/O controller"
grep -q "^namespace 1: " "$out/identify.txt" || lab_fail "identify: namespace 1 missing"

lab_log "raidline-initiator identify of an unknown subsystem: a typed Connect status"
if ri identify -n nqn.2026-11.io.raidline:no-such-subsystem > "$out/unknown-nqn.txt" 2>&1; then
  lab_fail "connect to an unknown subsystem succeeded"
fi
cat "$out/unknown-nqn.txt"
grep -q "Connect (cid [0-9]*) failed: connect invalid parameters (at Connect data byte 256)" \
  "$out/unknown-nqn.txt" || lab_fail "unknown subsystem: not the status nvmet gives (IPO subnqn)"

lab_log "raidline-initiator verify ($verify_size)"
ri verify -n "$nqn" --lba 2048 --size "$verify_size" --seed 7 | tee "$out/verify.txt"
grep -q ", 0 mismatching LBAs" "$out/verify.txt" || lab_fail "verify found mismatches"

lab_log "raidline-initiator write/read of a file"
head -c 1000000 /dev/urandom > /tmp/ri-in
ri write -n "$nqn" --lba 200000 -i /tmp/ri-in
ri read -n "$nqn" --lba 200000 --size 1000000 -o /tmp/ri-back
cmp /tmp/ri-in /tmp/ri-back || lab_fail "file read back differs"

lab_log "raidline-initiator write-zeroes and trim"
head -c 65536 /dev/urandom > /tmp/ri-nz
ri write -n "$nqn" --lba 300000 -i /tmp/ri-nz
ri write-zeroes -n "$nqn" --lba 300000 --blocks 64
ri read -n "$nqn" --lba 300000 --size 32768 -o /tmp/ri-zero
head -c 32768 /dev/zero | cmp - /tmp/ri-zero || lab_fail "write-zeroes left data behind"
ri trim -n "$nqn" --lba 300000 --blocks 64

lab_log "raidline-initiator perf"
ri perf -n "$nqn" --rw randread --qd 8 --bs 4k --time "$perf_time" | tee "$out/perf-randread.txt"
ri perf -n "$nqn" --rw randwrite --qd 8 --bs 4k --time "$perf_time" --range 64m |
  tee "$out/perf-randwrite.txt"
ri perf -n "$nqn" --rw randrw --mix 50 --qd 4 --bs 64k --time "$perf_time" --queues 2 --range 64m |
  tee "$out/perf-randrw.txt"
for f in "$out"/perf-*.txt; do
  grep -q "errors 0" "$f" || lab_fail "perf errors in $(basename "$f")"
  grep -qE "IOPS [1-9]" "$f" || lab_fail "no I/O completed in $(basename "$f")"
done

lab_log "asynchronous event: a namespace appears while raidline-initiator runs"
lab_modules loop
truncate -s 64M /tmp/ns2.img
loopdev=$(losetup -f --show /tmp/ns2.img)
sub=/sys/kernel/config/nvmet/subsystems/$nqn
ri perf -n "$nqn" --rw randread --qd 2 --bs 4k --time 8 > "$out/perf-aen.txt" 2>&1 &
pid=$!
for _ in $(seq 150); do grep -q '^\[' "$out/perf-aen.txt" && break; sleep 0.2; done
mkdir "$sub/namespaces/2"
echo "$loopdev" > "$sub/namespaces/2/device_path"
echo 1 > "$sub/namespaces/2/enable"
wait "$pid" || { cat "$out/perf-aen.txt"; lab_fail "perf during the namespace change failed"; }
grep -v '^\[' "$out/perf-aen.txt"
grep -q "async event: notice info 0x00 ns attribute changed" "$out/perf-aen.txt" ||
  lab_fail "no namespace-attribute-changed event reached raidline-initiator"
grep -q "^changed namespaces: 2\$" "$out/perf-aen.txt" ||
  lab_fail "the Changed Namespace List read after the event does not name namespace 2"
echo 0 > "$sub/namespaces/2/enable"
rmdir "$sub/namespaces/2"
losetup -d "$loopdev"

lab_log "cross-check with the kernel host: it must read what we wrote, and we what it wrote"
nvme connect -t rdma -a "$LAB_IP" -s 4420 -n "$nqn" || lab_fail "nvme connect to $nqn"
dev=$(lab_nvme_dev "$nqn" 30)
bs=$(blockdev --getss "$dev")
dd if="$dev" of=/tmp/kernel-back bs="$bs" skip=200000 count=$((1000000 / bs + 1)) \
  iflag=direct status=none
head -c 1000000 /tmp/kernel-back | cmp - /tmp/ri-in || lab_fail "kernel host reads other data"
head -c 65536 /dev/urandom > /tmp/kernel-in
klba=409600
dd if=/tmp/kernel-in of="$dev" bs=65536 seek=$((klba * bs / 65536)) oflag=direct conv=fsync \
  status=none
nvme disconnect -n "$nqn" | grep -q 'disconnected 1 controller' || lab_fail "nvme disconnect"
ri read -n "$nqn" --lba "$klba" --size 65536 -o /tmp/ri-kernel
cmp /tmp/kernel-in /tmp/ri-kernel || lab_fail "we read other data than the kernel host wrote"

"$LAB_DIR/ref-target.sh" stop --nqn "$nqn"

# The target's side of the story: controllers created for our host NQN, and no keep-alive
# expiry, transport error or bogus invalidation while we were connected.
dmesg > "$out/dmesg.txt" 2>&1 || true
grep -E 'nvmet' "$out/dmesg.txt" | tail -n 12 || true
grep -q "nvmet: creating nvm controller .* for NQN $(cat /etc/nvme/hostnqn)" "$out/dmesg.txt" ||
  lab_fail "dmesg shows no controller created for our host NQN"
if grep -iE 'keep-alive timer .*expired|nvmet_rdma: .*(error|failed|bogus)' "$out/dmesg.txt"; then
  lab_fail "the kernel target logged errors (above)"
fi
lab_log "raidline-initiator vs kernel target: PASS"
