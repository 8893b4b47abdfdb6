#!/usr/bin/env bash
# lab-run: --pair --mtu 4200 --timeout 400
# Real RoCEv2 frames on an emulated wire: a target guest and an initiator guest, each with its
# own rxe device, joined by a qemu socket netdev. The initiator runs perftest clients against
# the target's servers; the packet counters prove the frames crossed (there is no loopback
# between two guests). At netdev MTU 4200 rxe's active MTU must be 4096.
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"

lab_rxe_up eth0
ibv_devinfo -d "$LAB_RXE" | grep -q 'active_mtu:.*4096 ' || lab_fail "active_mtu is not 4096 at netdev MTU $LAB_MTU"
case "$LAB_ROLE" in
  target)
    lab_signal target-up
    lab_perftest_server ib_send_lat -s 64 -n 500
    wait "$LAB_PERF_PID" || lab_fail "ib_send_lat server failed"
    lab_perftest_server ib_write_bw -s 65536 -n 200 -t 16 --report_gbits
    lab_signal bw-server
    wait "$LAB_PERF_PID" || lab_fail "ib_write_bw server failed"
    lab_wait initiator-done 120
    ;;
  initiator)
    lab_wait target-up 120
    busybox ping -c 3 -W 5 "$LAB_PEER_IP" > /dev/null || lab_fail "no IP connectivity to $LAB_PEER_IP"
    lab_perftest_client ib_send_lat "$LAB_PEER_IP" -s 64 -n 500
    lab_wait bw-server 120
    lab_perftest_client ib_write_bw "$LAB_PEER_IP" -s 65536 -n 200 -t 16 --report_gbits
    lab_signal initiator-done
    ;;
  *) lab_fail "run this check with deploy/lab/run --pair" ;;
esac
counters=$(lab_rxe_counters)
echo "$counters" | tr '\n' ' '; echo
rcvd=$(awk '$1 == "rcvd_pkts" { print $2 }' <<< "$counters")
[ "${rcvd:-0}" -ge 500 ] || lab_fail "only ${rcvd:-0} RoCE packets received from the peer"
lab_log "rxe over the wire: PASS"
