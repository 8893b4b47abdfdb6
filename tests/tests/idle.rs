//! Adaptive polling: a target with a connected, idle host burns (almost) no CPU. The poller
//! thread's CPU time is read from /proc (utime + stime, clock ticks of 10 ms) over 2 s of idleness
//! with a host that keeps its keep-alive going.

mod common;

use std::time::Duration;

use common::*;

/// CPU ticks (utime + stime) of this process's threads whose name starts with `prefix`.
fn thread_ticks(prefix: &str) -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let Some(rest) = stat.rsplit(')').next() else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        total += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        total += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    total
}

#[test]
fn an_idle_target_uses_almost_no_cpu() {
    let rig = default_rig();
    let c = connect(&rig, 1);
    // Let connection set-up settle, then measure.
    std::thread::sleep(Duration::from_millis(300));
    let before = thread_ticks("poller");
    let control_before = thread_ticks("control");
    std::thread::sleep(Duration::from_secs(2));
    let pollers = thread_ticks("poller") - before;
    let control = thread_ticks("control") - control_before;
    println!("idle 2 s: pollers {pollers} ticks, control {control} ticks (1 tick = 10 ms)");
    // 2 s is 200 ticks per thread; allow 5 % for the pollers (a busy-polling one would use ~200)
    // and the control thread.
    assert!(
        pollers <= 10,
        "pollers used {pollers} ticks in 2 s of idleness"
    );
    assert!(
        control <= 10,
        "control thread used {control} ticks in 2 s of idleness"
    );
    c.shutdown().unwrap();
    assert!(rig.target.shutdown().is_empty());
}
