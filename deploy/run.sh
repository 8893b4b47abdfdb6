#!/usr/bin/env bash
# The main job: serve a RAID-5 namespace to a Linux host over RDMA.
#
#   deploy/run.sh                 on any machine (no RDMA needed): installs what it needs, builds
#                                 raidline, boots the soft-RoCE lab guest with 4 emulated NVMe
#                                 drives, starts raidline on a RAID-5 of them, connects the
#                                 kernel's nvme-rdma host, runs a short fio and prints each step
#   deploy/run.sh --node CONFIG   on a storage node with RDMA: run the daemon in the foreground
#                                 with CONFIG (systemd runs it the same way: deploy/raidline.service)
# Environment: DEMO_FIO_SECS (fio seconds in the lab, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --node)
    [ $# -eq 2 ] || { echo "usage: deploy/run.sh [--node CONFIG]" >&2; exit 2; }
    deploy/setup.sh
    cargo build --release --locked -p raidline-target --bin raidline
    exec build/release/raidline run --config "$2"
    ;;
  "") ;;
  *) echo "usage: deploy/run.sh [--node CONFIG]" >&2; exit 2 ;;
esac
deploy/setup.sh --lab
cargo build --release --locked -p raidline-target --bin raidline
exec deploy/lab/run --drives 4 --drive-size 1G --timeout 900 --name demo \
  --env "DEMO_FIO_SECS=${DEMO_FIO_SECS:-10}" -- deploy/lab/demo.sh
