#!/usr/bin/env bash
# lab-run: --kernel 6.12 --drives 4 --drive-size 256M --timeout 900
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# NVMe in-band authentication (DH-HMAC-CHAP, issue 19) with the Linux host of Debian 12's 6.12
# kernel (6.1 has no CONFIG_NVME_HOST_AUTH), in one guest. Secrets come from
# `nvme gen-dhchap-key`; four host NQNs carry four [[subsystem.auth]] entries:
#   host 1 sha256 + null, host 2 sha256 + ffdhe2048, host 3 sha512 + null, host 4 sha512 + ffdhe2048,
# all with the same controller secret.
#  1. each host connects one-way (--dhchap-secret) and bidirectionally (plus
#     --dhchap-ctrl-secret): the block device appears, the kernel logs the hash and group it
#     authenticated with, `raidline status` shows the same, and raidline logs the I/O queues
#     authenticated too;
#  2. refused: a wrong host secret (raidline logs the refusal with host NQN and address, and
#     never a secret), no secret at all, a wrong controller secret (the host sends Failure2);
#  3. fio with a crc32c verify over a bidirectional ffdhe2048 connection;
#  4. raidline restarts under a connected host: the host reconnects and authenticates again by
#     itself, and the data written before is read back unchanged;
#  5. the reference: the kernel's own nvmet with the same secrets (configfs dhchap_key,
#     dhchap_ctrl_key, dhchap_hash, dhchap_dhgroup) on a RAM disk, connected the same way, and
#     refusing the same wrong secret.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:array0
refnqn=nqn.2026-12.io.raidline:ref-auth
out=$LAB_RUN/auth
keys=/run/raidline-lab-keys
mkdir -p "$out"
rl() { "$LAB_DIR/raidline.sh" "$@"; }
log=$LAB_RUN/raidline.log
mark() { stat -c %s "$log" 2>/dev/null || echo 0; }
since() { tail -c +"$(($1 + 1))" "$log"; }
kmark() { dmesg | wc -l; }
ksince() { dmesg | tail -n +"$(($1 + 1))"; }

case "$(uname -r)" in 6.12.*) ;; *) lab_fail "needs the 6.12 kernel (lab-run --kernel 6.12), runs $(uname -r)" ;; esac
grep -q '^CONFIG_NVME_HOST_AUTH=y' "/boot/config-$(uname -r)" || lab_fail "kernel $(uname -r) lacks CONFIG_NVME_HOST_AUTH"
lab_modules nvme-rdma
lab_nvme_timeouts 10
lab_hostnqn
lab_rxe_up eth0

hn() { echo "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000$1"; }
hid() { echo "00000000-0000-0000-0000-00000000000$1"; }
hashes=(x sha256 sha256 sha512 sha512)
groups=(x null ffdhe2048 null ffdhe2048)

lab_log "secrets from nvme gen-dhchap-key (nvme-cli $(nvme version | awk '{print $3; exit}'))"
mkdir -p -m 700 "$keys"
frag=$out/auth.toml
: > "$frag"
nvme gen-dhchap-key -m 2 -l 48 -n "$nqn" > "$keys/ctrl.key"
chmod 600 "$keys/ctrl.key"
for i in 1 2 3 4; do
  nvme gen-dhchap-key -m 1 -n "$(hn $i)" > "$keys/host$i.key"
  chmod 600 "$keys/host$i.key"
  grep -q '^DHHC-1:01:' "$keys/host$i.key" || lab_fail "nvme gen-dhchap-key printed $(cut -c1-10 "$keys/host$i.key")…"
  cat >> "$frag" <<EOF
[[subsystem.auth]]
host = "$(hn $i)"
secret_file = "$keys/host$i.key"
ctrl_secret_file = "$keys/ctrl.key"
hashes = ["${hashes[$i]}"]
dhgroups = ["${groups[$i]}"]

EOF
done
hosts="$(hn 1) $(hn 2) $(hn 3) $(hn 4)"
start() { rl start --addr "$LAB_IP" --nqn "$nqn" --hosts "$hosts" --append "$frag"; }
start

# conn PORT SUBNQN I ARGS...: nvme connect as host I.
conn() {
  local port=$1 sub=$2 i=$3
  shift 3
  nvme connect -t rdma -a "$LAB_IP" -s "$port" -n "$sub" --hostnqn="$(hn "$i")" --hostid="$(hid "$i")" "$@"
}
disconnect() {
  nvme disconnect -n "$1" > /dev/null || lab_fail "nvme disconnect $1"
  for _ in $(seq 100); do
    rl status 2>/dev/null | grep -q "^  cntlid" || return 0
    sleep 0.1
  done
  [ "$1" != "$nqn" ] || lab_fail "raidline still lists a controller after the disconnect"
}
results=()

lab_log "1. every hash and group, one-way and bidirectional"
for i in 1 2 3 4; do
  for mode in one-way bidirectional; do
    args=(--dhchap-secret="$(cat "$keys/host$i.key")")
    want="hmac(${hashes[$i]}) ${groups[$i]}"
    if [ "$mode" = bidirectional ]; then
      args+=(--dhchap-ctrl-secret="$(cat "$keys/ctrl.key")")
      want="$want bidirectional"
    fi
    m=$(mark) k=$(kmark)
    conn 4420 "$nqn" "$i" "${args[@]}" > /dev/null || { ksince "$k" | tail -n 20; lab_fail "host $i ($want) could not connect"; }
    dev=$(lab_nvme_dev "$nqn" 30)
    ksince "$k" | grep -q "authenticated with hash hmac(${hashes[$i]}) dhgroup ${groups[$i]}" ||
      { ksince "$k" | tail -n 20; lab_fail "the kernel did not log hmac(${hashes[$i]}) ${groups[$i]}"; }
    if [ "$mode" = bidirectional ]; then
      ksince "$k" | grep -q "qid 0: controller authenticated" ||
        { ksince "$k" | tail -n 20; lab_fail "the kernel did not log the controller authenticated"; }
    fi
    rl status > "$out/status-$i-$mode.txt"
    grep -q "auth $want\$" "$out/status-$i-$mode.txt" ||
      { cat "$out/status-$i-$mode.txt"; lab_fail "raidline status does not show auth $want"; }
    ioq=$(since "$m" | grep -c 'queue [1-9][0-9]*: authenticated' || true)
    [ "$ioq" -ge 1 ] || { since "$m" | tail -n 20; lab_fail "no I/O queue authenticated"; }
    dd if="$dev" of=/dev/null bs=64k count=16 iflag=direct status=none || lab_fail "read through $dev"
    lab_log "host $i $mode: $want, admin queue + $ioq I/O queues authenticated, $dev readable"
    results+=("raidline  ${hashes[$i]}/${groups[$i]} $mode: connected, $ioq I/O queues")
    disconnect "$nqn"
  done
done

lab_log "2. refusals"
m=$(mark) k=$(kmark)
if conn 4420 "$nqn" 1 --dhchap-secret="$(cat "$keys/host2.key")" > /dev/null 2>&1; then
  lab_fail "host 1 connected with host 2's secret"
fi
since "$m" | grep -q "authentication of host $(hn 1) ($LAB_IP:[0-9]*) refused: the host's response does not match" ||
  { since "$m" | tail -n 20; lab_fail "raidline did not log the refusal with host NQN and address"; }
if grep -qF "$(cut -d: -f3 "$keys/host2.key")" "$log"; then lab_fail "a secret is in raidline's log"; fi
results+=("raidline  wrong host secret: refused")
m=$(mark)
if conn 4420 "$nqn" 1 > "$out/nosecret.txt" 2>&1; then
  lab_fail "host 1 connected without a secret"
fi
results+=("raidline  no secret: refused ($(head -c 60 "$out/nosecret.txt" | tr '\n' ' '))")
m=$(mark)
if conn 4420 "$nqn" 2 --dhchap-secret="$(cat "$keys/host2.key")" --dhchap-ctrl-secret="$(cat "$keys/host1.key")" > /dev/null 2>&1; then
  lab_fail "the host accepted the controller with a wrong controller secret"
fi
since "$m" | grep -q "host $(hn 2) ($LAB_IP:[0-9]*) ended authentication with Failure2" ||
  { since "$m" | tail -n 20; lab_fail "raidline did not log the host's Failure2"; }
results+=("raidline  wrong controller secret: the host refused the controller (Failure2)")
nvme disconnect -n "$nqn" > /dev/null 2>&1 || true
exec 3<>/dev/tcp/127.0.0.1/9420
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 > "$out/metrics.txt"
exec 3<&-
grep '^raidline_auth_total' "$out/metrics.txt" >&2 || lab_fail "no raidline_auth_total in the metrics"
for r in refused host_failed; do
  grep -Eq "^raidline_auth_total\{result=\"$r\"\} [1-9]" "$out/metrics.txt" || lab_fail "raidline_auth_total{result=\"$r\"} did not count"
done

lab_log "3. fio with verify over an authenticated connection"
conn 4420 "$nqn" 4 --dhchap-secret="$(cat "$keys/host4.key")" --dhchap-ctrl-secret="$(cat "$keys/ctrl.key")" \
  --reconnect-delay=1 --ctrl-loss-tmo=120 > /dev/null || lab_fail "host 4 could not connect"
dev=$(lab_nvme_dev "$nqn" 30)
FIO_VERIFY_SIZE=64m lab_fio raidline-auth "$dev" verify-crc32c
results+=("raidline  sha512/ffdhe2048 bidirectional: fio verify-crc32c 64 MiB, 0 errors")

lab_log "3b. re-authentication the host asks for (a write to its dhchap_secret)"
ctrl=""
for c in /sys/class/nvme/nvme*; do
  [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] && ctrl=$c && break
done
[ -n "$ctrl" ] || lab_fail "no controller of $nqn in /sys/class/nvme"
m=$(mark) k=$(kmark)
cat "$keys/host4.key" > "$ctrl/dhchap_secret"
ok=0
for _ in $(seq 300); do
  n=$(since "$m" | grep -c "host $(hn 4) ([^)]*) authenticated with hmac(sha512) ffdhe2048 bidirectional" || true)
  [ "$n" -ge 1 ] && ok=1 && break
  sleep 0.1
done
[ "$ok" = 1 ] || { ksince "$k"; since "$m" | tail -n 10; lab_fail "no re-authentication within 30 s"; }
ksince "$k" | grep -q "re-authenticating controller" || lab_fail "the kernel did not say it re-authenticates"
dd if="$dev" of=/dev/null bs=64k count=16 iflag=direct status=none || lab_fail "read after re-authentication"
results+=("raidline  re-authentication on the host's request (sysfs dhchap_secret): authenticated again, I/O continues")

lab_log "4. restart under a connected host: it authenticates again by itself"
head -c 4M /dev/urandom > "$out/block"
dd if="$out/block" of="$dev" bs=1M seek=100 oflag=direct status=none conv=fsync || lab_fail "write before restart"
before=$(sha256sum < "$out/block")
rl stop
m=$(mark)
start
ok=0
for _ in $(seq 600); do
  if rl status 2>/dev/null | grep -q "auth hmac(sha512) ffdhe2048 bidirectional\$"; then ok=1; break; fi
  sleep 0.1
done
[ "$ok" = 1 ] || { rl status || true; lab_fail "the host did not authenticate again within 60 s after the restart"; }
dev=$(lab_nvme_dev "$nqn" 30)
after=$(dd if="$dev" bs=1M skip=100 count=4 iflag=direct status=none | sha256sum)
[ "$before" = "$after" ] || lab_fail "data read back after the restart differs"
results+=("raidline  restart: the host re-authenticated by itself, 4 MiB read back equal")
disconnect "$nqn"
rl stop

lab_log "5. the reference: the kernel's nvmet with the same secrets"
lab_modules nvmet nvmet-rdma
modprobe brd rd_nr=1 rd_size=65536 || lab_fail "modprobe brd"
cfg=/sys/kernel/config/nvmet
h=$cfg/hosts/$(hn 2)
mkdir "$h"
cat "$keys/host2.key" > "$h/dhchap_key"
cat "$keys/ctrl.key" > "$h/dhchap_ctrl_key"
echo "hmac(sha256)" > "$h/dhchap_hash"
echo ffdhe2048 > "$h/dhchap_dhgroup"
sub=$cfg/subsystems/$refnqn
mkdir "$sub"
echo 0 > "$sub/attr_allow_any_host"
ln -s "$h" "$sub/allowed_hosts/$(hn 2)"
mkdir "$sub/namespaces/1"
echo /dev/ram0 > "$sub/namespaces/1/device_path"
echo 1 > "$sub/namespaces/1/enable"
port=$cfg/ports/7
mkdir "$port"
echo rdma > "$port/addr_trtype"; echo ipv4 > "$port/addr_adrfam"
echo "$LAB_IP" > "$port/addr_traddr"; echo 4421 > "$port/addr_trsvcid"
ln -s "$sub" "$port/subsystems/$refnqn"
k=$(kmark)
conn 4421 "$refnqn" 2 --dhchap-secret="$(cat "$keys/host2.key")" --dhchap-ctrl-secret="$(cat "$keys/ctrl.key")" > /dev/null ||
  { ksince "$k" | tail -n 20; lab_fail "the kernel's nvmet refused the same secrets"; }
lab_nvme_dev "$refnqn" 30 > /dev/null
ksince "$k" | grep -q "authenticated with hash hmac(sha256) dhgroup ffdhe2048" || lab_fail "nvmet: no authentication logged"
results+=("nvmet     sha256/ffdhe2048 bidirectional: connected")
nvme disconnect -n "$refnqn" > /dev/null
if conn 4421 "$refnqn" 2 --dhchap-secret="$(cat "$keys/host1.key")" > /dev/null 2>&1; then
  lab_fail "the kernel's nvmet accepted a wrong secret"
fi
results+=("nvmet     wrong host secret: refused")
nvme disconnect -n "$refnqn" > /dev/null 2>&1 || true
rm "$port/subsystems/$refnqn"; rmdir "$port"
echo 0 > "$sub/namespaces/1/enable"; rmdir "$sub/namespaces/1"
rm "$sub/allowed_hosts/$(hn 2)"; rmdir "$sub" "$h"

printf '%s\n' "${results[@]}" | tee "$out/table.txt" >&2
lab_log "PASS: DH-HMAC-CHAP with the Linux 6.12 host, raidline and the kernel's nvmet"
