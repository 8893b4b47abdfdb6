#!/usr/bin/env bash
# The main job: serve a RAID-5 namespace to a Linux host over RDMA.
#
# The `raidline` target daemon does not exist yet (issue 9). Until it does, this command says
# so and exits non-zero instead of pretending. What runs today: the soft-RoCE lab with the
# kernel's own NVMe-oF target on md RAID-5 (the reference every raidline figure will stand
# beside): deploy/lab/ci-stage.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x build/release/raidline ] || grep -q '\[\[bin\]\]' target/Cargo.toml 2>/dev/null; then
  echo "run.sh: a raidline binary exists but this script has not been taught to start it yet" >&2
  exit 2
fi
cat >&2 <<'MSG'
raidline: the target daemon is not implemented yet (issue 9), so there is no RAID-5 namespace
to serve. To see the lab and the kernel's reference target (md RAID-5 over emulated NVMe,
served by nvmet-rdma on soft-RoCE, used by the Linux nvme-rdma host and fio), run:
    deploy/setup.sh --lab && deploy/lab/ci-stage.sh
MSG
exit 2
