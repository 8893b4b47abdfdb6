#!/usr/bin/env bash
# lab-run: --pair --drives 4 --drive-size 1G --timeout 600
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# Pacing at a real bottleneck (issue 17 item 3), two guests: the target's egress limited by a tbf
# (40 Mbit/s, a 4 MB queue, well under what rxe moves in the lab), 4 I/O queue pairs (one host under
# two host NQNs, 2 queues each) reading 128 KiB at QD16 for 20 s a phase, with pacing off and with
# rtt-aimd at its host-clock defaults (the candidate default law) in alternating rounds (off,
# rtt-aimd, off, rtt-aimd: the lab's figures are ratios in the same guests). Fails when off does not
# fill the tbf (its queue's median under 15 ms: nothing to judge), or the law's throughput falls
# under 0.8x off, a queue pair starves (Jain < 0.8), the tbf drops, or the law leaves the tbf's
# queue (its backlog / rate) at a median above 0.85x off's. Prints the off/on table (ping, the
# tbf's queue, rxe's retransmit and sequence-error counters) and, PASS or NOT MET, issue 17 item
# 3's bounds, which do not gate while the issue is open: throughput >= 0.9x off and Jain >= 0.9
# (the law's 2-round mean ran 0.89-1.03x off, stop 49's CI failing on 0.89), retransmits ~ 0, the
# queue's median within 3x the law's target (14-26 ms against 3x 6.3 ms until 0f22932, 6-17 ms
# since), its p99 below off's (within 0.1-4 ms of it), and off's ping rising >= 10x its idle one
# (an idle ping across two TCG guests is their scheduling, 2-6 ms). BN_CHECK=issue17 makes those
# fail the check too.
# The steps are deploy/lab/bottleneck.sh (also runnable alone, with other laws and parameters).
set -euo pipefail
export BN_CHECK=1 BN_ALGOS="off rtt-aimd off rtt-aimd"
exec bash "$LAB_DIR/bottleneck.sh"
