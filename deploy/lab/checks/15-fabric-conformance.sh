#!/usr/bin/env bash
# The fabric conformance suite (fabric/src/conformance.rs) against a real rxe device: the same
# cases `cargo test` runs against the in-memory fabric. Client and server loop back inside one
# rxe device. send_with_invalidate is reported as skipped on rxe (it needs fast-registered
# memory, which user space cannot create).
# lab-run: --timeout 300
# lab-before: cargo build --locked -p raidline-fabric --bin fabric-conformance
set -euo pipefail
. "$LAB_DIR/guest/lib.sh"
bin=$LAB_DIR/../../build/debug/fabric-conformance
[ -x "$bin" ] || { echo "missing $bin" >&2; exit 1; }
lab_rxe_up eth0
"$bin" --ip "$LAB_IP" --device "$LAB_RXE" --timeout-ms 10000
