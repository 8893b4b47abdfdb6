#!/usr/bin/env bash
# Pacing at a real bottleneck (issue 17), both guests of a --pair run:
#
#   deploy/lab/run --pair --drives 4 --timeout 1500 -- bash deploy/lab/bottleneck.sh
#
# or in one guest, without a bottleneck (the cost of a law where nothing is congested):
#
#   deploy/lab/run --drives 4 --timeout 900 --env BN_RATE=none -- bash deploy/lab/bottleneck.sh
#
# The target guest limits its egress with tc (a tbf: BN_RATE, a deep queue of BN_LIMIT bytes),
# so the RoCEv2 frames carrying read data queue there, then serves the RAID-5 with raidline. The
# initiator connects twice to the same subsystem under two host NQNs (native multipath,
# round-robin: with 2 vCPUs each controller has 2 I/O queues, so 4 queue pairs carry the data)
# and streams 128 KiB reads at QD16 from 2 fio jobs for BN_SECS, while ping measures the RTT
# across the bottleneck. One phase per algorithm in BN_ALGOS ("off" first): raidline restarts
# with that [cc] section (BN_PARAMS_<algo with - as _> adds "name = value" lines to its
# [cc.params]). An entry "algo:label" runs that algorithm with the binary BN_BIN_<label> and
# the parameters BN_PARAMS_<label> where they are set (a change measured before and after in
# the same run).
#
# Per phase it prints: throughput, ping p50/p99 unloaded and under load, how many pings went
# above 30 ms and the largest of each second, the bytes each I/O queue pair moved (raidline
# status) and their Jain index, rxe's retransmit and sequence-error counters on both sides, and
# the tbf's drops and backlog; then an off/on table. Its host_dup
# column (duplicates the host received) tells retries of what had arrived from losses
# (host_oos: requests after a gap): rxe never cancels a QP's retransmit timer, so it fires one
# ACK timeout after it was armed and retries whatever is outstanding, lost or not. With
# BN_CHECK=1 it exits 1 when the bounds of issue 17 item 3 fail (off: ping rises >= 10x; with a
# law: retransmits 0, throughput >= 0.9 x off, Jain >= 0.9, ping p99 below off's p50).
# BN_PCAP=1 captures the RoCE and ICMP headers on the serving side (tcpdump, after the tbf) in
# $LAB_RUN/bottleneck/target.pcap: where a probe waited (before the qdisc, in it, or for its
# acknowledgement) and which packets rxe sent twice.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:array0
rate=${BN_RATE:-40mbit}
limit=${BN_LIMIT:-4000000}
secs=${BN_SECS:-20}
algos=${BN_ALGOS:-off rtt-aimd}
bin=${RAIDLINE_BIN:-$LAB_DIR/../../build/release/raidline}
sock=/run/raidline/raidline.sock
out=$LAB_RUN/bottleneck
mkdir -p "$out"

# Every counter rxe keeps (retries, RNR NAKs, duplicates, ...), one "name value" pair each.
counters() {
  local d=/sys/class/infiniband/$LAB_RXE/ports/1/hw_counters f
  for f in "$d"/*; do printf '%s %s ' "${f##*/}" "$(cat "$f")"; done
}

# A labelled entry must name a binary or parameters (a typo would run the defaults unseen).
for entry in $algos; do
  vb=BN_BIN_${entry#*:} vp=BN_PARAMS_${entry#*:}
  [ "$entry" = "${entry%%:*}" ] || [ -n "${!vb:-}${!vp:-}" ] ||
    lab_fail "BN_ALGOS entry $entry: set $vb or $vp"
done

lab_rxe_up eth0
serve() {
  if [ "${BN_PCAP:-0}" = 1 ]; then
    # RoCE and ICMP headers as they leave (after the qdisc) and arrive, for matching probes
    # to their acknowledgements and to the per-probe traces (raidline::cc=trace).
    tcpdump -i eth0 -n -s 90 -w "$out/target.pcap" udp port 4791 or icmp 2> "$out/tcpdump.err" &
  fi
  if [ "$rate" != none ]; then
    tc qdisc replace dev eth0 root tbf rate "$rate" burst 16kb limit "$limit"
    lab_log "egress bottleneck: $(tc qdisc show dev eth0)"
  fi
  local i=0 entry algo extra var params pbin
  for entry in $algos; do
    i=$((i + 1))
    algo=${entry%%:*} pbin=$bin params=BN_PARAMS_${algo//-/_}
    if [ "$entry" != "$algo" ]; then
      # "algo:label": the binary BN_BIN_<label> and the parameters BN_PARAMS_<label>, where
      # set (a before/after pair in one run).
      var=BN_BIN_${entry#*:}
      pbin=${!var:-$bin}
      var=BN_PARAMS_${entry#*:}
      [ -z "${!var:-}" ] || params=$var
    fi
    extra=$out/cc-$i.toml
    : > "$extra"
    if [ "$algo" != off ]; then
      printf '[cc]\nalgorithm = "%s"\n[cc.params]\n%s\n' "$algo" "$(printf '%s' "${!params:-}" | tr ';' '\n')" > "$extra"
    fi
    "$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" --bin "$pbin" --append "$extra"
    echo "target-rxe-before-$i $(counters)" > "$out/target-$i.txt"
    tc -s qdisc show dev eth0 > "$out/tc-before-$i.txt"
    lab_signal "ready-$i"
    lab_wait "loaded-$i" 900
    "$pbin" status --json --socket "$sock" > "$LAB_RUN/sync/status-$i.json"
    "$pbin" cc show --socket "$sock" > "$out/cc-show-$i.txt" 2>&1 || true
    lab_signal "status-$i"
    lab_wait "done-$i" 300
    echo "target-rxe-after-$i $(counters)" >> "$out/target-$i.txt"
    tc -s qdisc show dev eth0 >> "$out/target-$i.txt"
    cp "$out/target-$i.txt" "$LAB_RUN/sync/target-$i.txt"
    "$LAB_DIR/raidline.sh" stop
    lab_signal "stopped-$i"
  done
  lab_log "bottleneck (serving side): done"
}

case "$LAB_ROLE" in
  target) serve; exit 0 ;;
  initiator) peer=$LAB_PEER_IP ;;
  # One guest: rxe loops back, no wire and no tbf in the path (BN_RATE=none): the cost of a
  # law where nothing is congested.
  solo) peer=$LAB_IP; lab_modules nvme-rdma; serve > "$out/serve.log" 2>&1 & ;;
esac
lab_modules nvme-rdma
lab_nvme_timeouts 30
lab_hostnqn

# p50 and p99 of ping's RTTs (ms) in file $1, and how many were above 30 ms.
ping_stats() {
  python3 - "$1" <<'EOF'
import re, sys
v = sorted(float(m) for m in re.findall(r"time=([0-9.]+)", open(sys.argv[1]).read()))
if not v:
    print("nan nan 0"); sys.exit()
q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
print(f"{q(0.5):.2f} {q(0.99):.2f} {sum(1 for x in v if x > 30)}")
EOF
}

# The largest ping (ms) of each second of the load in file $1 (20 pings a second): where the
# p99 comes from, a spell or a swing that repeats.
ping_seconds() {
  python3 - "$1" <<'EOF'
import re, sys
top = {}
for s, t in re.findall(r"icmp_seq=(\d+) .*time=([0-9.]+)", open(sys.argv[1]).read()):
    k = (int(s) - 1) // 20
    top[k] = max(top.get(k, 0.0), float(t))
print(" ".join(f"{top.get(k, 0):.0f}" for k in range(max(top, default=-1) + 1)))
EOF
}

i=0
table=$out/table.txt
printf '%-10s %9s %9s %9s %9s %9s %6s %8s %8s %8s %8s %8s\n' algo MB/s ping50 ping99 idle50 idle99 jain retrans seq_err host_dup host_oos ping_30 > "$table"
for algo in $algos; do
  i=$((i + 1))
  lab_wait "ready-$i" 600
  # Straight to the kernel: nvme-cli refuses a second controller to the same address and
  # subsystem ("already connected"), whatever the host NQN.
  # A fresh pair of host identities per phase: the UUID's first group is the phase number, in
  # the 8 hex digits a UUID has there (phase 10 on too).
  for h in a b; do
    uuid=$(printf '%08x-bbbb-4000-8000-00000000000%s' "$i" "$h")
    echo "transport=rdma,traddr=$peer,trsvcid=4420,nqn=$nqn,duplicate_connect,hostnqn=nqn.2014-08.org.nvmexpress:uuid:$uuid,hostid=$uuid" \
      > /dev/nvme-fabrics
  done
  dev=$(lab_nvme_dev "$nqn" 30)
  for p in /sys/class/nvme-subsystem/*/iopolicy; do
    grep -q "$nqn" "$(dirname "$p")/subsysnqn" && echo round-robin > "$p"
  done
  ping -c 20 -i 0.1 "$peer" > "$out/ping-idle-$i.txt" || true
  rx_before=$(counters)
  # 20 pings a second: with 100 samples (5 a second) the p99 was the largest ping alone.
  ping -c $((secs * 20)) -i 0.05 "$peer" > "$out/ping-load-$i.txt" &
  pp=$!
  fio --name=bn --filename="$dev" --ioengine=libaio --direct=1 --rw=randread --bs=128k \
    --iodepth=16 --numjobs=2 --cpus_allowed_policy=split --cpus_allowed=0-1 --size=2g \
    --time_based --runtime="$secs" --eta=never --output-format=json > "$out/fio-$i.json" &
  fp=$!
  wait "$fp"
  wait "$pp" || true
  # The serving side reads `raidline status` and `cc show` only now, with the host connected
  # and idle: run in the loaded TCG guest, the two commands stalled the poller for about a
  # second, and its catch-up burst put a 30-70 ms spike into the pings (seen with `fixed`).
  lab_signal "loaded-$i"
  lab_wait "status-$i" 120
  rx_after=$(counters)
  lab_signal "done-$i"
  nvme disconnect -n "$nqn" >/dev/null
  lab_wait "stopped-$i" 300
  cp "$LAB_RUN/sync/status-$i.json" "$LAB_RUN/sync/target-$i.txt" "$out/"
  read -r p50 p99 over30 < <(ping_stats "$out/ping-load-$i.txt")
  read -r i50 i99 _ < <(ping_stats "$out/ping-idle-$i.txt")
  row=$(python3 - "$out/fio-$i.json" "$out/status-$i.json" "$out/target-$i.txt" "$rx_before" "$rx_after" <<'EOF'
import json, re, sys
fio = json.load(open(sys.argv[1]))
mbs = sum(j["read"]["bw_bytes"] for j in fio["jobs"]) / 1e6
st = json.load(open(sys.argv[2]))
# bytes moved by each I/O queue pair while loaded (RDMA READ + WRITE payload)
x = [q.get("bytes", 0) for c in st["controllers"] for q in c["queues"] if q["qid"] != 0]
x = [v for v in x if v is not None]
jain = (sum(x) ** 2 / (len(x) * sum(v * v for v in x))) if x and sum(x) else float("nan")
def change(name, before, after):
    b = re.search(r"\b" + name + r" (\d+)", before)
    a = re.search(r"\b" + name + r" (\d+)", after)
    return int(a.group(1)) - int(b.group(1)) if a and b else -1
tb, _, ta = open(sys.argv[3]).read().partition("target-rxe-after")
hb, ha = sys.argv[4], sys.argv[5]
# the host's side: duplicates it received (a retry of what had arrived: rxe's retransmit timer
# is never cancelled, so it also fires with nothing lost) and requests after a gap (a loss)
print(f"{mbs:.2f} {jain:.3f} {change('completer_retry_err', tb, ta)} "
      f"{change('rcvd_seq_err', tb, ta)} {change('duplicate_request', hb, ha)} "
      f"{change('out_of_seq_request', hb, ha)} {len(x)}")
EOF
)
  read -r mbs jain retr seqe hdup hoos nq <<< "$row"
  printf '%-10s %9s %9s %9s %9s %9s %6s %8s %8s %8s %8s %8s\n' "$algo" "$mbs" "$p50" "$p99" "$i50" "$i99" "$jain" "$retr" "$seqe" "$hdup" "$hoos" "$over30" >> "$table"
  lab_log "phase $i ($algo): $mbs MB/s over $nq queue pairs, ping p50/p99 $p50/$p99 ms (idle $i50/$i99), $over30 pings above 30 ms, Jain $jain, target retransmits $retr, seq errors $seqe, host duplicates $hdup, host out-of-sequence $hoos"
  echo "largest ping of each second (ms): $(ping_seconds "$out/ping-load-$i.txt")"
  echo "initiator rxe: before $rx_before / after $rx_after"
  cat "$out/target-$i.txt"
  [ ! -s "$out/cc-show-$i.txt" ] || cat "$out/cc-show-$i.txt" 2>/dev/null || true
done
echo "== bottleneck $rate, queue limit $limit bytes, 128 KiB random reads QD16 x 2 jobs, $secs s"
cat "$table"
if [ "${BN_CHECK:-0}" = 1 ]; then
  python3 - "$table" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
off = next(r for r in rows if r[0] == "off")
ok = float(off[2]) >= 10 * float(off[4])
print(f"off: ping p50 {off[2]} ms vs idle {off[4]} ms: {'rises >= 10x' if ok else 'does NOT rise 10x'}")
for r in rows:
    if r[0] == "off":
        continue
    checks = {
        "throughput >= 0.9 x off": float(r[1]) >= 0.9 * float(off[1]),
        "Jain >= 0.9": float(r[6]) >= 0.9,
        "retransmits 0": int(r[7]) == 0,
        "ping p99 below off's p50": float(r[3]) < float(off[2]),
    }
    for k, v in checks.items():
        print(f"{r[0]}: {k}: {'PASS' if v else 'FAIL'}")
        ok = ok and v
sys.exit(0 if ok else 1)
EOF
fi
