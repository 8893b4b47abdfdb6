#!/usr/bin/env bash
# lab-run: --timeout 300
# Soft-RoCE in one guest: deploy/rxe-setup creates and removes the device idempotently, the verbs
# device is active with the MTU eth0 implies, and perftest's send latency and RDMA WRITE bandwidth
# run over it (client and server in this guest: rxe loops the packets back internally).
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"
rxe=$LAB_DIR/../rxe-setup

lab_log "rxe-setup: absent → add → add again → status → del → del again"
if "$rxe" status eth0; then lab_fail "status reports a device before add"; fi
"$rxe" add eth0
grep -q "already has rxe device rxe_eth0" <<< "$("$rxe" add eth0)" || lab_fail "second add is not a no-op"
[ "$(ls /sys/class/infiniband)" = rxe_eth0 ] || lab_fail "expected exactly rxe_eth0, have: $(ls /sys/class/infiniband)"
"$rxe" status eth0
"$rxe" del eth0
grep -q "has no rxe device" <<< "$("$rxe" del eth0)" || lab_fail "second del is not a no-op"
[ -z "$(ls /sys/class/infiniband)" ] || lab_fail "device left after del"
"$rxe" add no-such-if 2>/dev/null && lab_fail "add on a missing interface succeeded"

lab_rxe_up eth0
info=$(ibv_devinfo -d "$LAB_RXE")
grep -E 'hca_id|state|active_mtu|link_layer' <<< "$info"
grep -q 'PORT_ACTIVE' <<< "$info" || lab_fail "$LAB_RXE port is not active"
grep -q 'link_layer:.*Ethernet' <<< "$info" || lab_fail "$LAB_RXE is not on Ethernet"
# rxe's active MTU is the largest IB MTU that fits eth0's MTU minus the RoCEv2 headers.
want=256
for m in 512 1024 2048 4096; do [ "$LAB_MTU" -ge $((m + 80)) ] && want=$m; done
grep -q "active_mtu:.*$want " <<< "$info" || lab_fail "active_mtu is not $want at netdev MTU $LAB_MTU"

lab_perftest_server ib_send_lat -s 64 -n 500
lab_perftest_client ib_send_lat "$LAB_IP" -s 64 -n 500
wait "$LAB_PERF_PID" || lab_fail "ib_send_lat server failed"
lab_perftest_server ib_write_bw -s 65536 -n 200 -t 16 --report_gbits
lab_perftest_client ib_write_bw "$LAB_IP" -s 65536 -n 200 -t 16 --report_gbits
wait "$LAB_PERF_PID" || lab_fail "ib_write_bw server failed"
lab_rxe_counters
lab_log "rxe verbs: PASS"
