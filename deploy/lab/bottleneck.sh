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
# across the bottleneck. One phase per algorithm in BN_ALGOS (default "off default"; "off"
# first): raidline restarts with that [cc] section ("default": none, the law a configuration
# naming no algorithm gets; BN_PARAMS_<algo with - as _> adds "name = value" lines to its
# [cc.params]). An entry "algo:label" runs that algorithm with the binary BN_BIN_<label> and
# the parameters BN_PARAMS_<label> where they are set (a change measured before and after in
# the same run).
#
# Per phase it prints: throughput, ping p50/p99 unloaded and under load, how many pings went above
# 30 ms and the largest of each second, the bytes each I/O queue pair moved (raidline status) and
# their Jain index, rxe's retransmit and sequence-error counters on both sides, and the tbf's drops
# and backlog; then an off/on table. Its host_dup column (duplicates the host received) tells
# retries of what had arrived from losses (host_oos: requests after a gap): rxe never cancels a QP's
# retransmit timer, so it fires one ACK timeout after it was armed and retries whatever is
# outstanding, lost or not. With BN_CHECK=1 (deploy/lab/checks/56-bottleneck.sh) it exits 1 when off
# does not fill the tbf (its queue's median under 15 ms: no bottleneck to judge), or a law's
# throughput falls under 0.8 x off, a queue pair starves (Jain < 0.8), the tbf drops or the law
# leaves its queue's median above 0.85 x off's; and it prints, PASS or NOT MET, issue 17 item 3's
# bounds: throughput >= 0.9 x off, Jain >= 0.9, retransmits ~ 0 (no gap at the host, no sequence
# error, at most 3 retries of rxe's never-cancelled retransmit timer a phase), the queue's median
# within 3x the law's target (its `target` column: ms above the base RTT at the mean per-QP rate,
# from `raidline cc show`), and its p99 below off's. BN_CHECK=issue17 exits 1 on those as well.
# The queue is the tbf's own (tbf50, tbf99: its backlog / rate, sampled about 10 times a second
# by the serving side while fio runs): a ping's RTT also carries both TCG guests' scheduling,
# which on a loaded host adds tens of ms with the tbf all but empty.
# BN_PCAP=1 captures the RoCE and ICMP headers on the serving side (tcpdump, after the tbf) in
# $LAB_RUN/bottleneck/target.pcap: where a probe waited (before the qdisc, in it, or for its
# acknowledgement) and which packets rxe sent twice.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

nqn=nqn.2026-11.io.raidline:array0
rate=${BN_RATE:-40mbit}
limit=${BN_LIMIT:-4000000}
secs=${BN_SECS:-20}
algos=${BN_ALGOS:-off default}
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
  # The bottleneck's own queue while the host loads it: the tbf's backlog (bytes) about 10
  # times a second from one `tc -batch` process, between the host's "go-N" (fio starts) and
  # "loaded-N" (fio ended). Its delay is backlog / rate: the queueing delay at the bottleneck
  # itself, where a ping's RTT also carries both TCG guests' scheduling (a loaded host adds
  # tens of ms to it with no queue at the tbf).
  sample_backlog() {
    local tick tick_pid
    lab_wait "go-$1" 900
    # `read -t` on a pipe nobody writes is the 100 ms pause: no process per sample (a forked
    # sleep each time held a loaded TCG guest to 2 samples a second).
    exec {tick}< <(exec sleep 3600)
    tick_pid=$!
    while [ ! -e "$LAB_RUN/sync/loaded-$1" ]; do
      echo "qdisc show dev eth0"
      read -r -t 0.1 -u "$tick" _ || true
    done | tc -s -batch - | grep -o 'backlog [0-9.]*[KM]\?b' > "$out/backlog-$1.txt" || true
    exec {tick}<&-
    kill "$tick_pid" 2> /dev/null || true
    cp "$out/backlog-$1.txt" "$LAB_RUN/sync/"
  }
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
    # "default": no [cc] section, what a configuration naming no algorithm gets.
    if [ "$algo" = off ]; then
      printf '[cc]\nalgorithm = "off"\n' > "$extra"
    elif [ "$algo" != default ]; then
      printf '[cc]\nalgorithm = "%s"\n[cc.params]\n%s\n' "$algo" "$(printf '%s' "${!params:-}" | tr ';' '\n')" > "$extra"
    fi
    "$LAB_DIR/raidline.sh" start --addr "$LAB_IP" --nqn "$nqn" --bin "$pbin" --append "$extra"
    echo "target-rxe-before-$i $(counters)" > "$out/target-$i.txt"
    tc -s qdisc show dev eth0 >> "$out/target-$i.txt"
    lab_signal "ready-$i"
    sample_backlog "$i"
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

# Delays (ms) sampled in file $1: ping's RTTs ($2 = ping), or the tbf's queueing delay, its
# backlog x 8 / rate, sampled while loaded ($2 = backlog). Prints their p50 and p99, how many
# were above 30 ms and how many there were; "nan nan 0 0" with none (or no tbf's rate).
delay_stats() {
  python3 - "$1" "$2" "$rate" <<'EOF'
import re, sys
try:
    text = open(sys.argv[1]).read()
except OSError:
    text = ""
if sys.argv[2] == "ping":
    v = [float(m) for m in re.findall(r"time=([0-9.]+)", text)]
else:
    m = re.fullmatch(r"([0-9.]+)(bit|kbit|mbit|gbit)", sys.argv[3])
    bps = m and float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)]
    unit = {"b": 1, "Kb": 1024, "Mb": 1024 * 1024}
    v = [float(n) * unit[u] * 8 / bps * 1e3
         for n, u in re.findall(r"backlog ([0-9.]+)(b|Kb|Mb)", text)] if bps else []
if not v:
    print("nan nan 0 0"); sys.exit()
v.sort()
q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
print(f"{q(0.5):.2f} {q(0.99):.2f} {sum(1 for x in v if x > 30)} {len(v)}")
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
printf '%-10s %9s %9s %9s %9s %9s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n' algo MB/s ping50 ping99 idle50 idle99 jain retrans seq_err host_dup host_oos ping_30 tbf_drop target tbf50 tbf99 > "$table"
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
  lab_signal "go-$i"
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
  [ ! -e "$LAB_RUN/sync/backlog-$i.txt" ] || cp "$LAB_RUN/sync/backlog-$i.txt" "$out/"
  read -r p50 p99 over30 _ < <(delay_stats "$out/ping-load-$i.txt" ping)
  read -r i50 i99 _ < <(delay_stats "$out/ping-idle-$i.txt" ping)
  read -r b50 b99 _ bn < <(delay_stats "$out/backlog-$i.txt" backlog)
  row=$(python3 - "$out/fio-$i.json" "$out/status-$i.json" "$out/target-$i.txt" "$rx_before" "$rx_after" "$out/cc-show-$i.txt" <<'EOF'
import json, math, re, sys
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
# the tbf's drops in the phase (the qdisc's totals after it less those before it)
def drops(text):
    m = re.search(r"dropped (\d+)", text)
    return int(m.group(1)) if m else 0
dropped = drops(ta) - drops(tb)
# The law's target queueing delay (ms above its base RTT) at the mean per-QP rate, from the
# parameters `raidline cc show` printed: offset_us + min(scale_us / sqrt(rate in Gb/s),
# the same at min_rate_mbps, scale_cap_us) (cc/src/algo/rtt_aimd.rs, target_ns). "-" for a law
# without one (off, fixed, ...).
p = {}
try:
    for l in open(sys.argv[6]):
        f = l.split()
        if len(f) >= 2 and re.fullmatch(r"[a-z_]+", f[0]):
            try:
                p[f[0]] = float(f[1])
            except ValueError:
                pass
except OSError:
    pass
target = "-"
if x and all(k in p for k in ("offset_us", "scale_us", "scale_cap_us", "min_rate_mbps")):
    per_qp = max(mbs * 8e6 / len(x), 1.0)
    term = min(p["scale_us"] / math.sqrt(per_qp / 1e9),
               p["scale_us"] / math.sqrt(p["min_rate_mbps"] * 1e6 / 1e9), p["scale_cap_us"])
    target = f"{(p['offset_us'] + term) / 1e3:.2f}"
print(f"{mbs:.2f} {jain:.3f} {change('completer_retry_err', tb, ta)} "
      f"{change('rcvd_seq_err', tb, ta)} {change('duplicate_request', hb, ha)} "
      f"{change('out_of_seq_request', hb, ha)} {len(x)} {dropped} {target}")
EOF
)
  read -r mbs jain retr seqe hdup hoos nq drop target <<< "$row"
  printf '%-10s %9s %9s %9s %9s %9s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n' "$algo" "$mbs" "$p50" "$p99" "$i50" "$i99" "$jain" "$retr" "$seqe" "$hdup" "$hoos" "$over30" "$drop" "$target" "$b50" "$b99" >> "$table"
  lab_log "phase $i ($algo): $mbs MB/s over $nq queue pairs, ping p50/p99 $p50/$p99 ms (idle $i50/$i99), $over30 pings above 30 ms, the tbf's queue p50/p99 $b50/$b99 ms ($bn samples), Jain $jain, target retransmits $retr, seq errors $seqe, host duplicates $hdup, host out-of-sequence $hoos"
  echo "largest ping of each second (ms): $(ping_seconds "$out/ping-load-$i.txt")"
  echo "initiator rxe: before $rx_before / after $rx_after"
  cat "$out/target-$i.txt"
  [ ! -s "$out/cc-show-$i.txt" ] || cat "$out/cc-show-$i.txt" 2>/dev/null || true
done
echo "== bottleneck $rate, queue limit $limit bytes, 128 KiB random reads QD16 x 2 jobs, $secs s"
cat "$table"
if [ "${BN_CHECK:-0}" != 0 ]; then
  python3 - "$table" "$BN_CHECK" <<'EOF'
import sys
# columns: algo MB/s ping50 ping99 idle50 idle99 jain retrans seq_err host_dup host_oos ping_30
# tbf_drop target tbf50 tbf99 (the tbf's queue, ms). An algorithm named more than once in
# BN_ALGOS (alternating rounds, e.g. "off default off default") is judged on the mean of its
# phases, and on the sums of its counters.
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
names = list(dict.fromkeys(r[0] for r in rows))
def agg(name):
    rs = [r for r in rows if r[0] == name]
    mean = lambda c: sum(float(r[c]) for r in rs) / len(rs)
    total = lambda c: sum(int(r[c]) for r in rs)
    t = [float(r[13]) for r in rs if r[13] != "-"]
    return {"n": len(rs), "mbs": mean(1), "p50": mean(2), "p99": mean(3), "i50": mean(4),
            "jain": mean(6), "retr": total(7), "seq": total(8), "oos": total(10),
            "drop": total(12), "target": sum(t) / len(t) if t else None,
            "q50": mean(14), "q99": mean(15)}
off = agg("off")
print(f"off ({off['n']} phases): ping p50 {off['p50']:.1f} ms vs idle {off['i50']:.2f} ms; the "
      f"tbf's queue p50 / p99 {off['q50']:.1f} / {off['q99']:.1f} ms; rxe retransmits "
      f"{off['retr']}, sequence errors {off['seq']}, host gaps {off['oos']}, tbf drops "
      f"{off['drop']}")
# There is a bottleneck to judge: off fills the tbf's queue. Judged on the tbf's own backlog,
# not the ping's rise: an idle ping across two TCG guests is their scheduling (2-3.7 ms on an
# idle host, 6.3 ms with the host loaded, where off's ping rose 10.0x with the tbf's queue at
# 23.7 ms; CI's run of 2026-12-07 19:30 exited 1 with no gate saying FAIL, the 10x rise then
# being the one gate that printed no verdict). 15 ms is a 75 KB backlog at 40 Mbit/s and 2.4x
# the law's 6.3 ms target.
FILL_MS = 15
# the law's throughput (x off) and Jain: the CI gate's floor, and issue 17 item 3's bound
FLOOR, BOUND = 0.8, 0.9
ok = off["q50"] >= FILL_MS
print(f"off: the tbf's queue fills, p50 {off['q50']:.1f} ms >= {FILL_MS}: "
      f"{'PASS' if ok else 'FAIL'}")
strict = sys.argv[2] == "issue17"
# Issue 17 item 3's "the ping RTT across it rises by >= 10x" with off: printed, gating only
# with BN_CHECK=issue17 (above: the idle ping is the guests' scheduling).
rise = off["p50"] >= 10 * off["i50"]
print(f"off: issue 17 item 3: ping p50 {off['p50']:.1f} ms >= 10 x idle {off['i50']:.2f}: "
      f"{'PASS' if rise else 'NOT MET'}")
bars_met = rise
for name in names:
    if name == "off":
        continue
    a = agg(name)
    thr = a["mbs"] / off["mbs"]
    # What the law must never do, whatever the host's speed: collapse its throughput, starve a
    # queue pair, or overflow the bottleneck. Failing one fails the check. The floors are below
    # item 3's own 0.9 (a bound, below): the law's 2-round mean ran 0.89-1.03 x off in the lab
    # (its queue's sawtooth empties the tbf for spells), and stop 49's CI failed on 0.89 with
    # every other gate met; a law gone to its floor rate (0.09 x off before issue 17) or one QP
    # starved (Jain 0.75 with 4 QPs) is what these catch.
    gate = {
        f"throughput {thr:.2f} x off >= {FLOOR}": thr >= FLOOR,
        f"Jain {a['jain']:.3f} >= {FLOOR}": a["jain"] >= FLOOR,
        f"no drop at the tbf ({a['drop']})": a["drop"] == 0,
        # the law does act on the queue: a pacer gone quiet would leave off's queue (the law
        # held it at 0.49-0.70 x off's median in three runs on 2026-12-07; off's phases of a
        # run agree within 2-8 %)
        f"queue p50 {a['q50']:.1f} ms <= 0.85 x off's {off['q50']:.1f}":
            a["q50"] <= 0.85 * off["q50"],
    }
    # Issue 17 item 3's control bounds (open): printed every run; they fail the check only
    # with BN_CHECK=issue17. On the lab's host of 2026-12-07 the law held the tbf's queue at a
    # median of 14-26 ms against 3 x its 6.3 ms target until 0f22932 (6-12 ms since), and its
    # p99 stays within 1-4 ms of off's (README), so they do not gate CI yet.
    bars = {
        f"throughput {thr:.2f} x off >= {BOUND}": thr >= BOUND,
        f"Jain {a['jain']:.3f} >= {BOUND}": a["jain"] >= BOUND,
        # "retransmits ~ 0": nothing lost (no gap at the host, no sequence error), and at most
        # 3 retries a phase by rxe's retransmit timer, which is never cancelled and so fires
        # one ACK timeout after it was armed whether anything was lost or not (README; a phase
        # sends about 95,000 packets).
        f"retransmits ~ 0: {a['retr']} timer retries (<= 3 a phase), {a['oos']} host gaps, "
        f"{a['seq']} sequence errors (off: {off['retr']}, {off['oos']}, {off['seq']})":
            a["retr"] <= 3 * a["n"] and a["oos"] == 0 and a["seq"] == 0,
        # The queueing delay is the tbf's own backlog / rate (sampled about 10 times a second
        # while loaded): the ping's RTT carries both TCG guests' scheduling as well, tens of
        # ms of it on a loaded host with the tbf all but empty.
        f"queue p99 {a['q99']:.1f} ms below off's {off['q99']:.1f}": a["q99"] < off["q99"],
    }
    if a["target"] is not None:
        # the queue's median within 3x the law's target: the law acts on the lowest RTT of a
        # 50-100 ms window, so the median sits above it
        bars[f"queue p50 {a['q50']:.1f} ms <= 3 x target {a['target']:.2f} ms"] = \
            a["q50"] <= 3 * a["target"]
    print(f"{name} ({a['n']} phases): the tbf's queue p50 {a['q50']:.1f} ms, p99 {a['q99']:.1f} "
          f"ms (off: {off['q50']:.1f} / {off['q99']:.1f} ms); ping p50 / p99 {a['p50']:.1f} / "
          f"{a['p99']:.1f} ms (off: {off['p50']:.1f} / {off['p99']:.1f}, idle {a['i50']:.2f}); "
          f"the law's target {'-' if a['target'] is None else format(a['target'], '.2f')} ms "
          f"above its base RTT")
    for k, v in gate.items():
        print(f"{name}: {k}: {'PASS' if v else 'FAIL'}")
        ok = ok and v
    for k, v in bars.items():
        print(f"{name}: issue 17 item 3: {k}: {'PASS' if v else 'NOT MET'}")
        bars_met = bars_met and v
print(f"issue 17 item 3's bounds: {'all met' if bars_met else 'NOT all met'}"
      f"{'' if strict else ' (reported; BN_CHECK=issue17 makes them fail the check)'}")
ok = ok and (bars_met or not strict)
sys.exit(0 if ok else 1)
EOF
fi
