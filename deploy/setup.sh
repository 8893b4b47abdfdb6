#!/usr/bin/env bash
# Installs everything Raidline's build, tests and lab need on a fresh Debian 12 machine.
# Idempotent: packages already present are not touched; safe to run on every test run.
#   deploy/setup.sh            build + test tools (fuzzing included)
#   deploy/setup.sh --lab      also the soft-RoCE lab (qemu, Debian kernel, rdma-core, nvme-cli, fio, mdadm, systemd)
set -euo pipefail

want_lab=0
for a in "$@"; do
  case "$a" in
    --lab) want_lab=1 ;;
    *) echo "setup.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Build side: a C compiler for crates that build C, clang + cmake for rdma-mummy-sys (bindgen and
# its run-time loader), pkg-config.
pkgs=(build-essential pkg-config clang libclang-dev cmake)
# Reference libraries the benchmarks compare against (ISA-L).
pkgs+=(libisal-dev)
if [ "$want_lab" = 1 ]; then
  # deploy/lab/README.md says what each is for.
  pkgs+=(qemu-system-x86 linux-image-amd64 rdma-core ibverbs-utils ibverbs-providers rdmacm-utils
         perftest nvme-cli fio mdadm busybox-static cpio xz-utils kmod e2fsprogs iproute2 jq
         systemd udev dmsetup zstd iputils-ping tcpdump open-iscsi)   # open-iscsi: the iSER host (checks/32-iser-ref.sh); iputils-ping, tcpdump: deploy/lab/bottleneck.sh (BN_PCAP); dmsetup: checks/58-ownership.sh; the lab's --systemd guests (checks/60-systemd.sh) boot the host's systemd
  # Debian 12's 6.12 kernel beside the default 6.1: its host and nvmet do NVMe in-band
  # authentication (CONFIG_NVME_*_AUTH), which 6.1 lacks; checks/59-auth.sh boots it
  # (`# lab-run: --kernel 6.12`). Every other check keeps 6.1 (deploy/lab/lib.sh).
  pkgs+=(linux-image-6.12-amd64)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Rust components and cargo tools.
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
echo "setup: ok"
