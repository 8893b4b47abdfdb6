#!/usr/bin/env bash
# lab-run: --drives 4 --drive-size 1G --timeout 360
# lab-before: cargo build --release --locked -p raidline-target --bin raidline
# Live per-QP pacing on rxe (issue 7, item 5: "a lab run on rxe shows a configured per-QP rate
# held"): raidline serves the RAID-5 with every I/O queue pair paced by the `fixed` algorithm at
# PACING_MB_S (default 2 MB/s, well below the ~6-12 MB/s one QP moves in the TCG guest; see
# pacing.sh); the kernel host connects with one I/O queue, fio streams 128 KiB reads at QD16 and
# must get the set rate within ±PACING_TOL_PCT (5 %); `raidline cc set rate_mbps` then halves the
# rate at run time and the next fio run must follow. `raidline status` (per-QP rate and RTT) is
# printed after each run. The steps themselves are deploy/lab/pacing.sh (also runnable alone).
set -euo pipefail
exec bash "$LAB_DIR/pacing.sh"
