//! The conformance suite against the in-memory fabric: two devices on one network, and the
//! same suite again through the fault wrapper with every fault off (it must be transparent).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use raidline_fabric::conformance::Env;
use raidline_fabric::fault::{FaultConfig, Faulty};
use raidline_fabric::mem::{MemFabric, MemNetwork};

fn mem_env(run: &mut dyn FnMut(&Env<'_, MemFabric>)) {
    let net = MemNetwork::new();
    let (a, b) = (net.device("mem0"), net.device("mem1"));
    run(&Env {
        server: &a,
        client: &b,
        ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        timeout: Duration::from_secs(2),
    });
}

mod mem {
    use super::*;
    raidline_fabric::conformance_tests!(
        MemFabric,
        mem_env,
        send_recv_two_sges,
        inline_send,
        rdma_write_then_read,
        write_send_chain_order,
        zero_length_write,
        access_violation,
        bad_key_and_bounds,
        rnr_retry_exceeded,
        rnr_wait_then_deliver,
        disconnect_mid_flight,
        private_data_both_ways,
        reject_with_private_data,
        shared_receive_queue,
        cq_notification,
        send_with_invalidate,
        typed_endpoint,
    );
}

#[test]
fn every_case_is_listed_and_passes_through_a_transparent_fault_wrapper() {
    let net = MemNetwork::new();
    let a = Faulty::new(
        net.device("mem0"),
        FaultConfig {
            seed: 1,
            ..FaultConfig::default()
        },
    );
    let b = Faulty::new(
        net.device("mem1"),
        FaultConfig {
            seed: 2,
            ..FaultConfig::default()
        },
    );
    let env = Env {
        server: &a,
        client: &b,
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        timeout: Duration::from_secs(2),
    };
    let report = raidline_fabric::conformance::run_all(&env, "", |_, _| {});
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        report.passed.len(),
        16,
        "a case was added without a #[test] above: {:?}",
        report.passed
    );
    assert_eq!(a.control().counters(), Default::default());
}
