#!/usr/bin/env python3
"""The target's own CPU per I/O in `null_perf`, with the in-memory fabric's work removed.

The in-memory fabric does in the poller thread what a NIC does in hardware: it copies every
transfer byte by byte under the network's mutex (read data into the host's memory, responses
into its receive buffers) and runs the peer's side of each operation. `null_perf`'s
target_us_per_io counts all of it. This script profiles rows of `null_perf` with
`perf record -e cpu-clock --call-graph dwarf` and classes each sample of the `poller-0` thread
by its stack:
  - fabric: a frame in `raidline_fabric::mem` or `raidline_fabric::sys_mem` (the emulated
    NIC; the target's own wrapper `raidline_fabric::slab` stays in `own`);
  - idle: a frame in `Poller::idle` (spinning or going to sleep);
  - own: everything else, i.e. the target's own code and the system calls it makes.
own_us_per_io = target_us_per_io (the bench's own CPU accounting, every target thread) x the
own share of poller-0's samples. The other target threads (control) are counted at full cost
in target_us_per_io, so the figure is an upper bound of the target's own cost. A stack the
unwinder cut short (no fabric frame found) counts as own, which also errs upwards.

Usage: target/benches/null_perf_own.py [--runs N] [--secs S] [--top K] ROW...
(build first: cargo bench -p raidline-target --bench null_perf --no-default-features --no-run).
Output per run: `OWN row=... target_us_per_io=... own_share=... own_us_per_io=...`, then the
median per row, and with --top the leaf functions of the own samples.
"""
import argparse, collections, glob, os, re, statistics, subprocess, sys, tempfile

FABRIC = ("raidline_fabric::mem", "raidline_fabric::sys_mem")


def bench_binary():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cands = [p for p in glob.glob(os.path.join(root, "build/release/deps/null_perf-*"))
             if os.access(p, os.X_OK) and not p.endswith(".d")]
    if not cands:
        sys.exit("null_perf is not built: cargo bench -p raidline-target --bench null_perf "
                 "--no-default-features --no-run")
    return max(cands, key=os.path.getmtime)


def samples(script_out):
    """(comm, [frame symbols, leaf first]) per sample of `perf script -F comm,tid,ip,sym`."""
    comm, frames = None, []
    for line in script_out.splitlines():
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
        elif not line[0].isspace():
            comm, frames = line.split()[0], []
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].split(" (")[0]))
    if comm is not None:
        yield comm, frames


def classify(frames):
    if any(any(m in f for m in FABRIC) for f in frames):
        return "fabric"
    if any("Poller<F>::idle" in f for f in frames):
        return "idle"
    return "own"


def run_row(binary, row, secs, tmp):
    data = os.path.join(tmp, "perf.data")
    rec = subprocess.run(
        ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "--call-graph", "dwarf,16384",
         "-o", data, "--", binary, "--runs", "1", "--secs", str(secs), "--warmup", "1", row],
        capture_output=True, text=True, check=True)
    m = re.search(r"null_perf_median row=(\S+) .*?target_us_per_io=([0-9.]+).*? iops=([0-9]+)",
                  rec.stdout)
    if not m or m.group(1) != row:
        sys.exit(f"no result line for {row}:\n{rec.stdout}\n{rec.stderr}")
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym"],
                            capture_output=True, text=True, check=True).stdout
    counts, leaves = collections.Counter(), collections.Counter()
    for comm, frames in samples(script):
        if comm != "poller-0" or not frames:
            continue
        c = classify(frames)
        counts[c] += 1
        if c == "own":
            leaves[frames[0]] += 1
    total = sum(counts.values())
    if total == 0:
        sys.exit(f"{row}: no poller-0 samples")
    return float(m.group(2)), int(m.group(3)), counts, total, leaves


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=float, default=2)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("rows", nargs="+")
    a = ap.parse_args()
    binary = bench_binary()
    own = collections.defaultdict(list)
    leaves_all = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            for row in a.rows:
                us, iops, counts, total, leaves = run_row(binary, row, a.secs, tmp)
                share = counts["own"] / total
                own[row].append(us * share)
                leaves_all[row].update(leaves)
                print(f"OWN row={row} run={i + 1} iops={iops} target_us_per_io={us:.3f} "
                      f"poller_samples={total} fabric={counts['fabric'] / total:.3f} "
                      f"idle={counts['idle'] / total:.3f} own_share={share:.3f} "
                      f"own_us_per_io={us * share:.3f}", flush=True)
    for row in a.rows:
        v = own[row]
        print(f"OWN_MEDIAN row={row} runs={len(v)} own_us_per_io={statistics.median(v):.3f} "
              f"min={min(v):.3f} max={max(v):.3f}")
        if a.top:
            n = sum(leaves_all[row].values())
            for sym, c in leaves_all[row].most_common(a.top):
                print(f"  {100 * c / n:5.1f}% {sym[:140]}")


if __name__ == "__main__":
    main()
