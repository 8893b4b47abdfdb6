//! RTT-probe bookkeeping for one flow: at most one probe in flight, timeout with back-off, retry.
//!
//! The algorithm only asks ([`Decision::probe`](crate::algo::Decision)); the runtime calls
//! [`Prober::request`], sends whatever [`Prober::poll_send`] hands out (a zero-length RDMA WRITE in
//! the target, a small packet in the simulator), feeds answers to [`Prober::on_response`] and calls
//! [`Prober::poll_timeout`] at or after [`Prober::deadline`]. Invariants: at most one probe is
//! outstanding; an answer counts only if its sequence number is the outstanding one (late answers
//! to a timed-out probe are ignored); the timeout starts at `base_timeout`, doubles on each loss up
//! to `max_timeout`, and returns to the base after an answer; a lost probe is retried.
//!
//! **On a reliable connection** ([`Prober::reliable`], an RC queue pair) a probe is never lost
//! short of the connection breaking: it is only late, queued behind the QP's own transfers or
//! in a congested switch. A timeout then tells the algorithm that the RTT is at least the time
//! waited ([`Event::ProbeLost`] carries it), backs off and keeps the probe outstanding; no
//! second probe goes, and the answer, however late, is the RTT sample. Retrying instead (the
//! lossy-fabric rule) stacks probes behind one another, and once the RTT exceeds the timeout
//! every answer is for a probe already given up: the algorithm never sees an RTT again. The
//! lab's bottleneck run did exactly that, at 0.7–1 s of RTT with a 100 ms maximum timeout.

use crate::algo::{Event, RemoteStamps};
use crate::units::Nanos;

/// Identifies one probe on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeSeq(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Outstanding {
    seq: ProbeSeq,
    sent_at: Nanos,
    deadline: Nanos,
}

/// Probe state of one flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prober {
    base_timeout: Nanos,
    max_timeout: Nanos,
    timeout: Nanos,
    next_seq: u32,
    wanted: bool,
    outstanding: Option<Outstanding>,
    min_rtt: Option<Nanos>,
    lost: u64,
    reliable: bool,
}

impl Prober {
    /// Reference values: 300 us, backed off to at most 64 times that.
    pub fn new(base_timeout: Nanos, max_timeout: Nanos) -> Prober {
        Prober {
            base_timeout,
            max_timeout: max_timeout.max(base_timeout),
            timeout: base_timeout,
            next_seq: 0,
            wanted: false,
            outstanding: None,
            min_rtt: None,
            lost: 0,
            reliable: false,
        }
    }

    /// A prober for probes on a reliable connection (see the module header): a timeout does
    /// not give the probe up, only reports that it is late.
    pub fn reliable(base_timeout: Nanos, max_timeout: Nanos) -> Prober {
        Prober {
            reliable: true,
            ..Prober::new(base_timeout, max_timeout)
        }
    }

    /// The algorithm asked for a probe: one goes as soon as none is in flight.
    pub fn request(&mut self) {
        self.wanted = true;
    }

    /// A probe to send now, if one is wanted and none is in flight.
    pub fn poll_send(&mut self, now: Nanos) -> Option<ProbeSeq> {
        if !self.wanted || self.outstanding.is_some() {
            return None;
        }
        self.wanted = false;
        let seq = ProbeSeq(self.next_seq);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.outstanding = Some(Outstanding {
            seq,
            sent_at: now,
            deadline: now + self.timeout,
        });
        Some(seq)
    }

    /// The probe `seq` handed out by [`Prober::poll_send`] never left (the runtime could not
    /// post it): it is given back, wanted again, and neither lost nor late.
    pub fn unsent(&mut self, seq: ProbeSeq) {
        if self.outstanding.is_some_and(|o| o.seq == seq) {
            self.outstanding = None;
            self.wanted = true;
        }
    }

    /// Whether [`Prober::poll_send`] would hand out a probe now.
    pub fn ready_to_send(&self) -> bool {
        self.wanted && self.outstanding.is_none()
    }

    /// When the outstanding probe times out.
    pub fn deadline(&self) -> Option<Nanos> {
        self.outstanding.map(|o| o.deadline)
    }

    /// An answer arrived: the RTT event for the algorithm, or `None` when it is stale.
    pub fn on_response(
        &mut self,
        now: Nanos,
        seq: ProbeSeq,
        remote: Option<RemoteStamps>,
    ) -> Option<Event> {
        let o = self.outstanding.filter(|o| o.seq == seq)?;
        self.outstanding = None;
        self.timeout = self.base_timeout;
        let rtt = now - o.sent_at;
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        Some(Event::Rtt { rtt, remote })
    }

    /// The outstanding probe is declared lost at or after its deadline: the event for the
    /// algorithm; the probe will be sent again. On a reliable connection it is declared late
    /// instead: it stays outstanding with a backed-off deadline, and its answer still counts.
    pub fn poll_timeout(&mut self, now: Nanos) -> Option<Event> {
        self.poll_timeout_excused(now, Nanos::ZERO)
    }

    /// [`Prober::poll_timeout`] where `excused` of the time since the probe went is known not
    /// to be the path's (on a reliable connection; ignored otherwise): the transfers the
    /// probe waits behind, or the runtime's own time before it could look (see
    /// [`crate::netrtt`]). A probe late by no more than that gets its deadline moved by it and
    /// is not late; one later than that tells the algorithm it waited the rest. With the
    /// daemon's 5 ms first timeout on the host clock, a probe behind 1 MiB of RDMA READs (26
    /// ms at rxe's 40 MB/s in the lab) or a few 128 KiB read posts was declared late, and each
    /// such event cut rtt-aimd's rate: in the lab's uncongested seqwrite-128k, from 135 to 30
    /// MB/s within 4 s while every answer was under its target.
    pub fn poll_timeout_excused(&mut self, now: Nanos, excused: Nanos) -> Option<Event> {
        let o = self.outstanding.filter(|o| now >= o.deadline)?;
        let mut waited = now - o.sent_at;
        if self.reliable && excused > Nanos::ZERO {
            waited = waited.saturating_sub(excused);
            if waited < self.timeout {
                self.outstanding = Some(Outstanding {
                    deadline: o.sent_at + excused + self.timeout,
                    ..o
                });
                return None;
            }
        }
        self.lost += 1;
        self.timeout = Nanos(self.timeout.0.saturating_mul(2)).min(self.max_timeout);
        if self.reliable {
            self.outstanding = Some(Outstanding {
                deadline: now + self.timeout,
                ..o
            });
        } else {
            self.outstanding = None;
            self.wanted = true;
        }
        Some(Event::ProbeLost { waited })
    }

    /// Lowest RTT seen (the live pacer subtracts it to cancel constant host overhead).
    pub fn min_rtt(&self) -> Option<Nanos> {
        self.min_rtt
    }

    /// Probes declared lost so far (on a reliable connection: timeouts of a late probe).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Whether a probe is in flight.
    pub fn in_flight(&self) -> bool {
        self.outstanding.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_flight_and_rtt_measured() {
        let mut p = Prober::new(Nanos::from_us(300), Nanos::from_ms(20));
        assert_eq!(p.poll_send(Nanos::ZERO), None, "nothing asked");
        p.request();
        let s = p.poll_send(Nanos(100)).unwrap();
        p.request();
        assert_eq!(p.poll_send(Nanos(150)), None, "one in flight");
        assert_eq!(
            p.on_response(Nanos(5_100), s, None),
            Some(Event::Rtt {
                rtt: Nanos(5_000),
                remote: None
            })
        );
        assert_eq!(p.min_rtt(), Some(Nanos(5_000)));
        let s2 = p.poll_send(Nanos(6_000)).unwrap();
        assert_ne!(s, s2);
        assert_eq!(
            p.on_response(Nanos(7_000), s, None),
            None,
            "stale answer ignored"
        );
        assert!(p.in_flight());
    }

    #[test]
    fn timeout_backs_off_retries_and_resets() {
        let mut p = Prober::new(Nanos::from_us(300), Nanos::from_us(1000));
        p.request();
        let s = p.poll_send(Nanos::ZERO).unwrap();
        assert_eq!(p.deadline(), Some(Nanos::from_us(300)));
        assert_eq!(p.poll_timeout(Nanos::from_us(299)), None);
        assert_eq!(
            p.poll_timeout(Nanos::from_us(300)),
            Some(Event::ProbeLost {
                waited: Nanos::from_us(300)
            })
        );
        assert_eq!(
            p.on_response(Nanos::from_us(301), s, None),
            None,
            "late answer ignored"
        );
        let _ = p.poll_send(Nanos::from_us(300)).unwrap(); // retried without a new request
        assert_eq!(p.deadline(), Some(Nanos::from_us(900)));
        p.poll_timeout(Nanos::from_us(900)).unwrap();
        p.poll_send(Nanos::from_us(900)).unwrap();
        assert_eq!(p.deadline(), Some(Nanos::from_us(1900)), "capped at max");
        p.poll_timeout(Nanos::from_us(1900)).unwrap();
        let s = p.poll_send(Nanos::from_us(2000)).unwrap();
        assert!(p.on_response(Nanos::from_us(2010), s, None).is_some());
        p.request();
        p.poll_send(Nanos::from_us(3000)).unwrap();
        assert_eq!(p.deadline(), Some(Nanos::from_us(3300)), "back to base");
        assert_eq!(p.lost(), 3);
    }

    #[test]
    fn a_probe_that_was_not_posted_is_wanted_again() {
        let mut p = Prober::reliable(Nanos::from_ms(5), Nanos::from_ms(100));
        p.request();
        let s = p.poll_send(Nanos::ZERO).unwrap();
        p.unsent(ProbeSeq(s.0.wrapping_add(1)));
        assert!(p.in_flight(), "another probe's failure changes nothing");
        p.unsent(s);
        assert!(!p.in_flight());
        assert_eq!(p.deadline(), None, "no timeout will fire for it");
        let s2 = p.poll_send(Nanos::from_ms(1)).expect("sent again, unasked");
        assert_ne!(s, s2);
        assert_eq!(p.lost(), 0);
    }

    #[test]
    fn a_late_probe_on_a_reliable_connection_is_kept_and_its_answer_counts() {
        let mut p = Prober::reliable(Nanos::from_ms(5), Nanos::from_ms(100));
        p.request();
        let s = p.poll_send(Nanos::ZERO).unwrap();
        assert_eq!(
            p.poll_timeout(Nanos::from_ms(5)),
            Some(Event::ProbeLost {
                waited: Nanos::from_ms(5)
            }),
            "the algorithm learns the RTT is at least 5 ms"
        );
        assert!(p.in_flight(), "the probe is late, not lost");
        assert_eq!(p.deadline(), Some(Nanos::from_ms(15)), "backed off");
        p.request();
        assert_eq!(p.poll_send(Nanos::from_ms(6)), None, "no second probe");
        for _ in 0..6 {
            let d = p.deadline().unwrap();
            assert!(matches!(p.poll_timeout(d), Some(Event::ProbeLost { .. })));
        }
        // 15, 35, 75, 155, then capped: 255, 355 and 455
        assert_eq!(p.deadline(), Some(Nanos::from_ms(455)), "capped at max");
        assert_eq!(
            p.on_response(Nanos::from_ms(900), s, None),
            Some(Event::Rtt {
                rtt: Nanos::from_ms(900),
                remote: None
            }),
            "the late answer is the sample"
        );
        assert!(!p.in_flight());
        assert_eq!(p.lost(), 7);
        let s2 = p.poll_send(Nanos::from_ms(901)).unwrap();
        assert_ne!(s, s2);
        assert_eq!(p.deadline(), Some(Nanos::from_ms(906)), "back to base");
    }

    #[test]
    fn a_probe_is_not_late_for_the_time_excused() {
        let mut p = Prober::reliable(Nanos::from_ms(5), Nanos::from_ms(100));
        p.request();
        let s = p.poll_send(Nanos::ZERO).unwrap();
        // 3 ms of the 5 were the transfers ahead or the runtime's own: not late yet, and the
        // deadline moves by what was excused.
        assert_eq!(
            p.poll_timeout_excused(Nanos::from_ms(5), Nanos::from_ms(3)),
            None
        );
        assert_eq!(p.deadline(), Some(Nanos::from_ms(8)));
        assert_eq!(p.lost(), 0);
        // More excused by then (the runtime posted again): moved again.
        assert_eq!(
            p.poll_timeout_excused(Nanos::from_ms(8), Nanos::from_ms(4)),
            None
        );
        assert_eq!(p.deadline(), Some(Nanos::from_ms(9)));
        // Late beyond the excuse: the algorithm learns only the rest.
        assert_eq!(
            p.poll_timeout_excused(Nanos::from_ms(10), Nanos::from_ms(4)),
            Some(Event::ProbeLost {
                waited: Nanos::from_ms(6)
            })
        );
        assert_eq!(p.lost(), 1);
        assert!(p.in_flight(), "still late, not lost");
        assert_eq!(
            p.deadline(),
            Some(Nanos::from_ms(20)),
            "backed off from now"
        );
        // The answer is the raw sample; the estimator takes off what was not the path.
        assert_eq!(
            p.on_response(Nanos::from_ms(12), s, None),
            Some(Event::Rtt {
                rtt: Nanos::from_ms(12),
                remote: None
            })
        );
        // An unreliable connection resends on time whatever is excused: its probe may be gone.
        let mut u = Prober::new(Nanos::from_ms(5), Nanos::from_ms(100));
        u.request();
        u.poll_send(Nanos::ZERO).unwrap();
        assert_eq!(
            u.poll_timeout_excused(Nanos::from_ms(5), Nanos::from_ms(3)),
            Some(Event::ProbeLost {
                waited: Nanos::from_ms(5)
            })
        );
        assert!(!u.in_flight());
    }
}
