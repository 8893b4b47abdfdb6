//! On a host without RDMA (this project's build machines: no RDMA in the kernel) the verbs
//! backend must start and say clearly what is missing, and so must the conformance binary.
//! On a host with an RDMA device these checks report a skip instead.
#![cfg(feature = "verbs")]

use raidline_fabric::verbs::VerbsFabric;
use raidline_fabric::FabricError;

#[test]
fn opening_without_rdma_is_a_clear_error() {
    match VerbsFabric::open(None) {
        Ok(_) => eprintln!("skipped: this host has an RDMA device"),
        Err(e) => {
            assert!(
                matches!(
                    e,
                    FabricError::LibraryMissing(_)
                        | FabricError::NoKernelSupport
                        | FabricError::NoDevice(_)
                ),
                "unexpected error kind: {e:?}"
            );
            assert!(e.to_string().contains("RDMA"), "unclear message: {e}");
        }
    }
    // A named device that does not exist is never found.
    let e = VerbsFabric::open(Some("no-such-rdma-device"))
        .err()
        .expect("no such device");
    assert!(
        matches!(
            e,
            FabricError::LibraryMissing(_)
                | FabricError::NoKernelSupport
                | FabricError::NoDevice(_)
        ),
        "{e:?}"
    );
}

#[test]
fn the_conformance_binary_starts_and_reports_missing_rdma() {
    let exe = env!("CARGO_BIN_EXE_fabric-conformance");
    let out = std::process::Command::new(exe)
        .args(["--ip", "127.0.0.1", "--device", "no-such-rdma-device"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    assert!(stderr.contains("RDMA"), "{stderr}");
    let usage = std::process::Command::new(exe).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
}
