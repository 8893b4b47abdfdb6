#!/usr/bin/env bash
# lab-run: --pair --drives 4 --drive-size 1G --timeout 600
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# Pacing at a real bottleneck (issue 17 item 3), two guests: the target's egress limited by a
# tbf (40 Mbit/s, a 4 MB queue, well under what rxe moves in the lab), 4 I/O queue pairs (one
# host under two host NQNs, 2 queues each) reading 128 KiB at QD16 for 20 s a phase, with
# pacing off and with rtt-aimd at its host-clock defaults (the candidate default law) in
# alternating rounds (off, rtt-aimd, off, rtt-aimd: the lab's figures are ratios in the same
# guests). Passes when, over the rounds, off's queue fills (ping p50 >= 10x unloaded) and the law
# holds throughput >= 0.9x off,
# Jain >= 0.9, no loss and at most 3 of rxe's timer retries a phase, the queue's median within
# 3x its target, and p99 below off's; prints the off/on table with rxe's retransmit and
# sequence-error counters. The steps are deploy/lab/bottleneck.sh (also runnable alone, with
# other laws and parameters).
set -euo pipefail
export BN_CHECK=1 BN_ALGOS="off rtt-aimd off rtt-aimd"
exec bash "$LAB_DIR/bottleneck.sh"
