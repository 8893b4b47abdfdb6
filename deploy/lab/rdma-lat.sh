#!/usr/bin/env bash
# The lab's RDMA latency between the two guests of a --pair run, against ping (issue 17):
#
#   deploy/lab/run --pair --timeout 600 -- bash deploy/lab/rdma-lat.sh
#
# perftest's ib_write_lat (RDMA WRITE ping-pong, busy polling) and ib_send_lat -e (SEND
# ping-pong, completion events) between idle guests; both report half the round trip. Read them
# against ping's round trip printed first: the probe RTTs a congestion law sees in the pair
# cannot be lower than this fabric's own.
set -uo pipefail
. "$LAB_DIR/guest/lib.sh"
lab_rxe_up eth0
lat() { timeout 120 "$@" -d "$LAB_RXE" -x "$LAB_GID_INDEX" 2>&1 | grep -A1 "#bytes"; }
case "$LAB_ROLE" in
  target)
    lab_signal ready
    lat ib_write_lat -n 500
    lab_signal w1
    lat ib_send_lat -n 300 -e
    lab_wait done 200
    ;;
  initiator)
    lab_wait ready 300
    sleep 2
    echo "ping: $(ping -c 20 -i 0.1 "$LAB_PEER_IP" | tail -1)"
    echo "ib_write_lat (half round trip, us):"
    lat ib_write_lat -n 500 "$LAB_PEER_IP"
    lab_wait w1 200
    sleep 2
    echo "ib_send_lat -e (half round trip, us):"
    lat ib_send_lat -n 300 -e "$LAB_PEER_IP"
    lab_signal done
    ;;
  *) lab_fail "rdma-lat.sh needs --pair"; exit 1 ;;
esac
