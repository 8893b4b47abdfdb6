//! Simulator invariants on small scenarios (milliseconds of simulated time, fast in debug builds):
//! determinism, packet conservation, capacity, PFC losslessness, ECN/CNP and probe plumbing.

use raidline_cc::algo::{Dcqcn, FixedRate, RttAimd, Swift};
use raidline_cc::sim::{self, Scenario, Sim};
use raidline_cc::Nanos;

fn scenario(extra_network: &str, runs: &str, hosts: u32, flows: u32) -> Scenario {
    let text = format!(
        r#"
name = "t"
seed = 9
duration_ms = 3.0
measure_from_ms = 1.5
sample_us = 50.0
[network]
buffer_mb = 1.0
{extra_network}
[[groups]]
name = "bulk"
hosts = {hosts}
flows_per_host = {flows}
spread_ms = 0.2
traffic = "long"
fairness = true
[[groups]]
name = "small"
hosts = 1
traffic = "messages"
message_bytes = 1024
interval_us = 20.0
{runs}
"#
    );
    Scenario::parse(&text).unwrap()
}

const ALL_RUNS: &str = r#"
[[runs]]
algorithm = "rtt-aimd"
[[runs]]
algorithm = "ctcc"
[[runs]]
algorithm = "swift"
[[runs]]
algorithm = "timely"
[[runs]]
algorithm = "dcqcn"
[[runs]]
algorithm = "dcqcn"
pfc = true
[[runs]]
algorithm = "fixed"
"#;

#[test]
fn same_seed_same_result_and_every_algorithm_conserves_packets() {
    let sc = scenario("", ALL_RUNS, 4, 8);
    for spec in &sc.runs {
        let a = sim::run(&sc, spec).unwrap();
        let b = sim::run(&sc, spec).unwrap();
        // Debug text, because NaN marks inactive flows in the samples and NaN != NaN
        assert!(
            format!("{a:?}") == format!("{b:?}"),
            "{}: not deterministic",
            spec.label()
        );
        assert!(a.conserved, "{}: packets unaccounted", spec.label());
        assert!(
            a.counters.data_delivered > 0,
            "{}: nothing delivered",
            spec.label()
        );
        assert!(
            a.goodput_gbps > 0.0,
            "{}: goodput {}",
            spec.label(),
            a.goodput_gbps
        );
    }
}

/// 4 hosts x 60 Gb/s fixed into 100 G with a 1 MB buffer: the switch must drop. Every data
/// packet stays accounted for, checked every 100 us.
fn audited_overload(extra_network: &str) -> Sim<FixedRate> {
    let sc = scenario(extra_network, "[[runs]]\nalgorithm = \"fixed\"", 4, 2);
    let mut algo = FixedRate::new();
    use raidline_cc::algo::CongestionControl;
    algo.params_mut().set("rate_mbps", 30_000.0).unwrap();
    let mut sim = Sim::new(&sc, false, algo, "fixed".into());
    for step in 1..=30u64 {
        sim.run_until(Nanos::from_us(100 * step));
        let audit = sim.audit();
        assert_eq!(audit.sent, audit.accounted, "at {} us", 100 * step);
        assert_eq!(
            audit.buffer_bytes.0, audit.buffer_bytes.1,
            "buffer accounting"
        );
        assert!(audit.buffer_bytes.0 <= 1_000_000);
    }
    let c = sim.counters();
    assert!(c.data_dropped > 0, "overload must drop without PFC");
    assert!(c.nacks > 0, "gaps are NACKed");
    sim
}

#[test]
fn conservation_holds_mid_run_under_heavy_loss_with_pacer_dither() {
    // the default pacer dither spreads every flow's packets over random phases: losses hit
    // every flow, and go-back-N all but stops (measured: < 0.1 Gb/s), but nothing is lost track of
    let r = audited_overload("").run();
    assert!(r.conserved && r.goodput_gbps < 98.5);
}

#[test]
fn conservation_holds_mid_run_under_heavy_loss() {
    // without dither (regular pacing, the flows keep their phases)
    let sim = audited_overload("pace_jitter = 0.0");
    let r = sim.run();
    // go-back-N under a 2.4x overload collapses: the switch is busy, but mostly with
    // packets the receiver discards; still, progress is made and nothing exceeds the line
    assert!(
        r.goodput_gbps > 1.0 && r.goodput_gbps < 98.5,
        "{}",
        r.goodput_gbps
    );
    assert!(r.counters.data_discarded > r.counters.data_delivered / 10);
    assert!(r.peak_queue > 900_000);
}

#[test]
fn pfc_makes_the_same_overload_lossless() {
    let sc = scenario("", "[[runs]]\nalgorithm = \"fixed\"", 4, 2);
    let mut algo = FixedRate::new();
    use raidline_cc::algo::CongestionControl;
    algo.params_mut().set("rate_mbps", 30_000.0).unwrap();
    let r = Sim::new(&sc, true, algo, "fixed+pfc".into()).run();
    assert_eq!(r.drops, 0);
    assert!(r.pfc_pause > Nanos::ZERO);
    assert!(r.goodput_gbps > 97.0, "{}", r.goodput_gbps);
    assert!(r.conserved);
}

#[test]
fn underload_is_delivered_in_full_with_a_tiny_queue() {
    // 4 flows x 10 Gb/s = 40 G into 100 G: no queue beyond a few packets, goodput = offered payload.
    let sc = scenario("", "[[runs]]\nalgorithm = \"fixed\"", 4, 1);
    let mut algo = FixedRate::new();
    use raidline_cc::algo::CongestionControl;
    algo.params_mut().set("rate_mbps", 10_000.0).unwrap();
    let r = Sim::new(&sc, false, algo, "fixed".into()).run();
    let offered = 40.0 * 4096.0 / 4160.0;
    assert!(
        (r.goodput_gbps - offered).abs() < 0.03 * offered,
        "{} vs {}",
        r.goodput_gbps,
        offered
    );
    assert!(r.peak_queue < 5 * 4160, "{}", r.peak_queue);
    assert_eq!(r.drops, 0);
    let (mean, _, n) = r.small_latency.unwrap();
    // one 1 KB message: 2 hops of 1 us + serialisation; no queueing to speak of
    assert!(n > 10 && mean > 2.0 && mean < 4.0, "{mean} us over {n}");
}

#[test]
fn ecn_marks_reach_dcqcn_and_probes_reach_rtt_aimd() {
    let sc = scenario(
        "ecn_kmin_kb = 5.0\necn_kmax_kb = 200.0",
        "[[runs]]\nalgorithm = \"dcqcn\"",
        4,
        8,
    );
    let r = Sim::new(&sc, false, Dcqcn::new(), "dcqcn".into()).run();
    assert!(r.counters.cnps > 0);
    let r = Sim::new(&sc, false, RttAimd::new(), "rtt-aimd".into()).run();
    assert!(r.counters.probes_sent > 30, "{}", r.counters.probes_sent);
    assert!(r.counters.probes_answered + r.counters.probes_dropped <= r.counters.probes_sent);
    assert!(r.counters.probes_answered * 10 >= r.counters.probes_sent * 9);
    let r = Sim::new(&sc, false, Swift::new(), "swift".into()).run();
    assert!(r.conserved);
}

#[test]
fn reverse_jitter_delays_every_answer_and_stays_deterministic() {
    // The small flow sends its next message one reverse path after the last completes
    // (20 us later): a uniform [0, 100) us extra on each answer stretches its cycle from ~23 us
    // to ~73 us on average, so about a third as many messages complete.
    let runs = "[[runs]]\nalgorithm = \"fixed\"";
    let count = |net: &str| {
        let sc = scenario(net, runs, 2, 1);
        let r = Sim::new(&sc, false, FixedRate::new(), "fixed".into()).run();
        assert!(r.conserved);
        assert_eq!(r.drops, 0);
        r.small_latency.unwrap().2
    };
    let plain = count("");
    assert_eq!(plain, count("reverse_jitter_us = 0.0"), "0 is off");
    let jittered = count("reverse_jitter_us = 100.0");
    assert!(
        jittered * 2 < plain && jittered * 5 > plain,
        "{jittered} vs {plain}"
    );
    assert_eq!(jittered, count("reverse_jitter_us = 100.0"), "same seed");
    let text = |j: f64| {
        format!(
            "name = \"t\"\nduration_ms = 1.0\nmeasure_from_ms = 0.5\n[network]\n\
             reverse_jitter_us = {j}\n[[groups]]\nname = \"g\"\nhosts = 1\n\
             traffic = \"long\"\n[[runs]]\nalgorithm = \"fixed\"\n"
        )
    };
    assert!(Scenario::parse(&text(20.0)).is_ok());
    assert!(Scenario::parse(&text(2000.0)).is_err(), "at most 1 ms");
}

#[test]
fn the_receiver_reports_its_port_utilisation_over_the_np_window() {
    // 4 fixed flows x 10 Gb/s (paced on the wire, headers included) into 100 G: 40 % busy.
    let runs = "[[runs]]\nalgorithm = \"fixed\"";
    let util = |net: &str| {
        let sc = scenario(net, runs, 4, 1);
        let mut algo = FixedRate::new();
        use raidline_cc::algo::CongestionControl;
        algo.params_mut().set("rate_mbps", 10_000.0).unwrap();
        let mut sim = Sim::new(&sc, false, algo, "fixed".into());
        sim.run_until(Nanos::from_us(2500));
        sim.np_util().map(|u| u.fraction())
    };
    // the small 1 KB message flow adds ~0.5 % on top of the 40 %
    let u = util("np_window_us = 500.0").unwrap();
    assert!((0.39..0.42).contains(&u), "{u}");
    let u = util("").unwrap();
    assert!((0.39..0.42).contains(&u), "default window: {u}");
    assert_eq!(
        util("np_window_us = 0.0"),
        None,
        "0: a responder that reports nothing"
    );
}
