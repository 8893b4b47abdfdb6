#!/usr/bin/env bash
# The reference target, run inside a lab guest: md RAID-5 over the emulated NVMe drives, served by
# the kernel's own NVMe-oF target (nvmet + nvmet-rdma, configured through configfs) on the guest's
# soft-RoCE device. Every lab measurement of raidline runs the same fio jobs against this target.
# With `--proto iser` the same array is served instead by the kernel's iSCSI target (LIO) over
# iSER (ib_isert), the reference for raidline's iSER target (issue 18).
#
#   ref-target.sh start [--proto nvme|iser] [--addr IP] [--port PORT] [--nqn NQN] [--chunk KiB]
#                       [--consistency bitmap|ppl]
#       create /dev/md/ref (RAID-5, --assume-clean) over all $LAB_DRIVES drives (at least 3),
#       export it as namespace 1 of NQN on an RDMA port at IP:PORT (default $LAB_IP:4420);
#       with an internal write-intent bitmap (the default) or, with `ppl`, md's partial
#       parity log instead (md keeps one or the other, not both).
#       --proto iser: export it as LUN 0 of the iSCSI target NQN (an IQN, default
#       iqn.2026-12.io.raidline:ref-md5) on an iSER portal at IP:PORT (default port 3260), any
#       initiator, no CHAP; with --ram-dev DEV --ram-iqn IQN also DEV (a brd RAM disk, for the
#       target path alone) as LUN 0 of a second target IQN on the same portal
#   ref-target.sh stop [--proto nvme|iser] [--nqn NQN] [--ram-iqn IQN]
#       remove the port, subsystem (or iSCSI target) and array again
usage="usage: ref-target.sh start [--proto nvme|iser] [--addr IP] [--port PORT] [--nqn NQN] [--chunk KiB] [--consistency bitmap|ppl] [--ram-dev DEV --ram-iqn IQN] | stop [--proto nvme|iser] [--nqn NQN] [--ram-iqn IQN]"
set -euo pipefail

lab=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/lab/guest/lib.sh
. "$lab/guest/lib.sh"
die() { echo "ref-target: error: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "$usage"
action=$1; shift
addr=${LAB_IP:-} port= nqn= chunk=64 consistency=bitmap proto=nvme ram_dev= ram_iqn=
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value
$usage"
  case "$1" in
    --addr) addr=$2 ;; --port) port=$2 ;; --nqn) nqn=$2 ;; --chunk) chunk=$2 ;;
    --consistency) consistency=$2 ;; --proto) proto=$2 ;; --ram-dev) ram_dev=$2 ;; --ram-iqn) ram_iqn=$2 ;;
    *) die "unknown option $1
$usage" ;;
  esac
  shift 2
done

[ "$action" != start ] || [ -z "$ram_dev$ram_iqn" ] || { [ -n "$ram_dev" ] && [ -n "$ram_iqn" ]; } ||
  die "--ram-dev and --ram-iqn go together"
[ -z "$ram_iqn" ] || [ "$proto" = iser ] || die "--ram-iqn is for --proto iser"
case "$proto" in
  nvme) port=${port:-4420} nqn=${nqn:-nqn.2026-11.io.raidline:ref-md5} ;;
  iser) port=${port:-3260} nqn=${nqn:-iqn.2026-12.io.raidline:ref-md5} ;;
  *) die "--proto is nvme or iser, not $proto" ;;
esac
cfg=/sys/kernel/config/nvmet
sub=$cfg/subsystems/$nqn
md=/dev/md/ref
# One port per address and service id; its configfs name is a number.
portdir=$cfg/ports/$port
# LIO: iblock backstores (the array's `ref`), each target's portal group 1.
lio=/sys/kernel/config/target

# lio_target DEV BACKSTORE IQN: LIO serves DEV (through the iblock backstore BACKSTORE) as
# LUN 0 of IQN on an iSER portal $addr:$port. Demo mode: any initiator, no CHAP, writable (the
# lab's reference, not a deployment).
lio_target() {
  local dev=$1 bs=$lio/core/iblock_0/$2 iqn=$3
  local t=$lio/iscsi/$iqn/tpgt_1
  mkdir -p "$bs" || die "cannot create the iblock backstore $2"
  echo "udev_path=$(readlink -f "$dev")" > "$bs/control"
  echo 1 > "$bs/enable" || die "cannot enable the iblock backstore on $dev"
  mkdir -p "$t/lun/lun_0" || die "cannot create iSCSI target $iqn"
  ln -s "$bs" "$t/lun/lun_0/ref"
  # The portal is a TCP one first; `iser` 1 adds the iSER listener on the same address.
  mkdir "$t/np/$addr:$port" || die "cannot create portal $addr:$port"
  echo 1 > "$t/np/$addr:$port/iser" || die "cannot enable iSER on $addr:$port (see dmesg)"
  echo 1 > "$t/attrib/generate_node_acls"
  echo 1 > "$t/attrib/cache_dynamic_acls"
  echo 0 > "$t/attrib/authentication"
  echo 0 > "$t/attrib/demo_mode_write_protect"
  echo 1 > "$t/enable"
  lab_log "kernel target: $iqn LUN 0 ($dev) on iser $addr:$port via ${LAB_RXE}"
}

iser_start() {
  lab_modules target_core_mod target_core_iblock iscsi_target_mod ib_isert
  lio_target "$md" ref "$nqn"
  [ -z "$ram_dev" ] || lio_target "$ram_dev" ram "$ram_iqn"
}

# lio_target_stop BACKSTORE IQN: undoes lio_target.
lio_target_stop() {
  local bs=$lio/core/iblock_0/$1 iqn=$2
  local t=$lio/iscsi/$iqn/tpgt_1
  if [ -d "$t" ]; then
    echo 0 > "$t/enable" 2>/dev/null || true
    for np in "$t"/np/*; do
      [ -d "$np" ] || continue
      echo 0 > "$np/iser" 2>/dev/null || true
      rmdir "$np"
    done
    [ ! -L "$t/lun/lun_0/ref" ] || rm "$t/lun/lun_0/ref"
    [ ! -d "$t/lun/lun_0" ] || rmdir "$t/lun/lun_0"
    rmdir "$t" "$lio/iscsi/$iqn"
  fi
  [ ! -d "$bs" ] || rmdir "$bs"
}

iser_stop() {
  [ -z "$ram_iqn" ] || lio_target_stop ram "$ram_iqn"
  lio_target_stop ref "$nqn"
  # Only once no backstore is left (a RAM target of an aborted run may be).
  [ ! -d "$lio/core/iblock_0" ] || [ -n "$(find "$lio/core/iblock_0" -mindepth 1 -maxdepth 1 -type d)" ] ||
    rmdir "$lio/core/iblock_0"
}

case "$action" in
  start)
    [ -n "$addr" ] || die "no --addr and no \$LAB_IP"
    mapfile -t drives < <(lab_nvme_drives)
    [ "${#drives[@]}" -ge 3 ] || die "RAID-5 needs at least 3 drives, have ${#drives[@]} (deploy/lab/run --drives N)"
    lab_modules raid456
    [ -n "${LAB_RXE:-}" ] || lab_rxe_up

    # No udev: mdadm makes the device node itself. --assume-clean skips the initial resync,
    # which would take minutes under TCG (parity is brought up to date by the first writes).
    # --bitmap=internal: raidline always keeps a write-intent bitmap (an unclean stop resyncs
    # only dirty regions), so the reference keeps one too (mdadm's default for arrays of
    # 100 GB and more); without it md would skip the bitmap writes raidline does.
    # --consistency ppl: md's partial parity log (every write logged on its stripe's parity
    # drive) instead, the reference for raidline's degraded writes, which it logs.
    case "$consistency" in
      bitmap) keep=(--bitmap=internal) ;;
      ppl) keep=(--consistency-policy=ppl) ;;
      *) die "--consistency is bitmap or ppl, not $consistency" ;;
    esac
    mkdir -p /dev/md
    mdadm --create "$md" --run --quiet --level=5 --raid-devices="${#drives[@]}" --chunk="$chunk" \
      --assume-clean --metadata=1.2 "${keep[@]}" "${drives[@]}" ||
      die "mdadm --create over ${drives[*]} failed"
    lab_log "$md: RAID-5 over ${drives[*]}, chunk ${chunk} KiB, $(($(blockdev --getsize64 "$md") / 1048576)) MiB, bitmap $(cat "/sys/block/$(basename "$(readlink -f "$md")")/md/bitmap/location" 2>/dev/null || echo '?'), consistency policy $(cat "/sys/block/$(basename "$(readlink -f "$md")")/md/consistency_policy" 2>/dev/null || echo '?')"

    if [ "$proto" = iser ]; then
      iser_start
      exit 0
    fi
    lab_modules nvmet nvmet-rdma
    mkdir "$sub" || die "cannot create subsystem $nqn (already started?)"
    echo 1 > "$sub/attr_allow_any_host"
    echo "raidline-ref-md5" > "$sub/attr_serial" 2>/dev/null || true
    mkdir "$sub/namespaces/1"
    readlink -f "$md" > "$sub/namespaces/1/device_path"
    # A fixed UUID: the host drops a namespace whose identifiers change across reconnects.
    echo 5f0c8d1e-6a2b-4c3d-9e4f-0a1b2c3d4e5f > "$sub/namespaces/1/device_uuid"
    echo 1 > "$sub/namespaces/1/enable" || die "cannot enable namespace 1 on $(readlink -f "$md")"

    mkdir -p "$portdir"
    echo rdma > "$portdir/addr_trtype"
    echo ipv4 > "$portdir/addr_adrfam"
    echo "$addr" > "$portdir/addr_traddr"
    echo "$port" > "$portdir/addr_trsvcid"
    ln -s "$sub" "$portdir/subsystems/$nqn" || die "cannot bind $nqn to rdma $addr:$port (see dmesg)"
    lab_log "kernel target: $nqn on rdma $addr:$port via ${LAB_RXE}"
    ;;
  stop)
    [ "$proto" != iser ] || iser_stop
    [ ! -L "$portdir/subsystems/$nqn" ] || rm "$portdir/subsystems/$nqn"
    [ ! -d "$portdir" ] || [ -n "$(ls -A "$portdir/subsystems")" ] || rmdir "$portdir"
    if [ -d "$sub" ]; then
      [ ! -d "$sub/namespaces/1" ] || { echo 0 > "$sub/namespaces/1/enable"; rmdir "$sub/namespaces/1"; }
      rmdir "$sub"
    fi
    [ ! -e "$md" ] || mdadm --stop --quiet "$md" || die "mdadm --stop $md failed"
    lab_log "kernel target stopped"
    ;;
  *) die "unknown action $action
$usage" ;;
esac
