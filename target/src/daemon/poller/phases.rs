//! What a poller's loop does: its passes and sleeps, always counted ([`PassCounts`], the
//! `raidline_poller_*` metrics), and where its time goes, phase by phase ([`Phases`]), when
//! `RAIDLINE_POLLER_PHASES=1` is set in the daemon's environment (a diagnosis tool, off by
//! default: each mark reads the clock).
//!
//! Sampling profilers see little under the lab's emulated CPUs (qemu TCG delivers the sampling
//! timer mostly to an idle CPU), so the poller accounts for its own wall time: each
//! [`Phases::mark`] adds the time since the previous mark to the phase just finished. The
//! totals are logged when the poller stops. Wall time, so a preemption counts in the phase it
//! interrupted.

use std::time::Instant;

/// Passes between two additions of a busy poller's loop counts to the metrics.
pub(super) const PASSES_PUBLISHED: u64 = 4096;

/// What a poller's loop did since it last added to the data-path metrics.
#[derive(Default)]
pub(super) struct PassCounts {
    work: u64,
    empty: u64,
    pub(super) sleeps: u64,
    pub(super) sleep_ns: u64,
    pub(super) naps: u64,
}

impl PassCounts {
    pub(super) fn count(&mut self, work: bool, to: &crate::metrics::DataPathMetrics) {
        if work {
            self.work += 1;
        } else {
            self.empty += 1;
        }
        if self.work + self.empty >= PASSES_PUBLISHED {
            self.publish(to);
        }
    }

    pub(super) fn publish(&mut self, to: &crate::metrics::DataPathMetrics) {
        use std::sync::atomic::Ordering::Relaxed;
        let PassCounts {
            work,
            empty,
            sleeps,
            sleep_ns,
            naps,
        } = std::mem::take(self);
        to.poller_work_passes.fetch_add(work, Relaxed);
        to.poller_empty_passes.fetch_add(empty, Relaxed);
        to.poller_sleeps.fetch_add(sleeps, Relaxed);
        to.poller_sleep_ns.fetch_add(sleep_ns, Relaxed);
        to.poller_naps.fetch_add(naps, Relaxed);
    }
}

/// The phases of a pass, in loop order.
#[derive(Clone, Copy)]
pub(super) enum Phase {
    /// Control messages (new queues, closes).
    Intake,
    /// Polling the RDMA completion queue.
    CqPoll,
    /// Handling RDMA completions: commands parsed and started, data transfers done.
    OnWc,
    /// The io_uring's submit and reap (`io_uring_enter` and the completion ring).
    RingPump,
    /// What the ring's completions start: the engine's next steps, parked and held writes.
    OnRing,
    /// The namespace queues of other threads (workers, the maintenance thread).
    NsQueues,
    /// Posting the responses of the pass.
    Responses,
    /// Admin events, buffer waiters, pacing, reaping closed queues.
    Other,
    /// Going to sleep: arming the CQ and the last look.
    Arm,
    /// Asleep (until an event or a timeout).
    Sleep,
    /// Waking: reading the event channels.
    Wake,
    /// Spinning for something due within 20 us, and naps while held or parked writes wait.
    Spin,
}

const PHASES: usize = 12;
const NAMES: [&str; PHASES] = [
    "intake",
    "cq-poll",
    "on-wc",
    "ring-pump",
    "on-ring",
    "ns-queues",
    "responses",
    "other",
    "arm",
    "sleep",
    "wake",
    "spin",
];

pub(super) struct Phases {
    last: Option<Instant>,
    ns: [u64; PHASES],
    count: [u64; PHASES],
}

impl Phases {
    /// On when `RAIDLINE_POLLER_PHASES` is set to 1.
    pub(super) fn from_env() -> Phases {
        let on = std::env::var("RAIDLINE_POLLER_PHASES").is_ok_and(|v| v == "1");
        Phases {
            last: on.then(Instant::now),
            ns: [0; PHASES],
            count: [0; PHASES],
        }
    }

    /// Adds the time since the previous mark to `phase`.
    #[inline]
    pub(super) fn mark(&mut self, phase: Phase) {
        if let Some(last) = self.last.as_mut() {
            let now = Instant::now();
            self.ns[phase as usize] += now.duration_since(*last).as_nanos() as u64;
            self.count[phase as usize] += 1;
            *last = now;
        }
    }

    /// One line: each phase's share of the accounted time, its total and mean.
    pub(super) fn report(&self) -> Option<String> {
        self.last?;
        let total: u64 = self.ns.iter().sum();
        let mut line = format!("{:.3} s accounted:", total as f64 / 1e9);
        for ((name, &ns), &count) in NAMES.iter().zip(&self.ns).zip(&self.count) {
            if count == 0 {
                continue;
            }
            line.push_str(&format!(
                " {name} {:.1}% ({:.3} s, {count} x {:.1} us);",
                100.0 * ns as f64 / total.max(1) as f64,
                ns as f64 / 1e9,
                ns as f64 / 1e3 / count as f64
            ));
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_add_the_time_since_the_previous_mark_to_the_phase_just_finished() {
        let mut p = Phases {
            last: Some(Instant::now()),
            ns: [0; PHASES],
            count: [0; PHASES],
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        p.mark(Phase::Sleep);
        p.mark(Phase::Intake);
        assert!(p.ns[Phase::Sleep as usize] >= 20_000_000);
        assert!(p.ns[Phase::Intake as usize] < 20_000_000);
        assert_eq!(p.count[Phase::Sleep as usize], 1);
        let line = p.report().unwrap();
        assert!(line.contains(" sleep "), "{line}");
        let off = Phases {
            last: None,
            ns: [0; PHASES],
            count: [0; PHASES],
        };
        assert!(off.report().is_none());
    }
}
