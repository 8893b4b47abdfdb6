//! The discrete-event, packet-level engine: sender NICs, one shared-buffer switch, the receiver.
//!
//! Model (stated in `cc/README.md` too):
//! - Forward path: sender NIC (serialises at line rate, paces each flow with its
//!   [`QpController`], probes first) → link (propagation delay) → switch ingress → the receiver's egress FIFO (ECN marking
//!   on enqueue, drop when the shared buffer is full, PFC by dynamic threshold per ingress port)
//!   → link → receiver NIC. Serialisation is tracked in picoseconds so rates are exact.
//! - Reverse path (ACK per packet, NACK, CNP, probe answer, PFC frames): a fixed delay of two
//!   link delays plus two 64-byte serialisations, plus a uniform `[0, reverse_jitter_us)` per
//!   answer when set (RTT measurement noise; default 0); it never queues (the incast's reverse
//!   direction carries about 1.5 % of the load).
//! - Reliability: go-back-N. The receiver keeps only in-order data and NACKs the first gap once;
//!   the sender rewinds on a NACK or after `rto_us` without progress; both are reported to the
//!   algorithm as an out-of-sequence NACK.
//! - Probes: `probe_bytes` on the wire, through the same queues as data; the receiver answers at
//!   once with its receive/send timestamps and, unless `np_window_us` is 0, its port's receive
//!   utilisation over the last `np_window_us` (what a DOCA PCC notification point can put in the
//!   answer's custom data); the flow's [`QpController`] keeps one in flight.
//!
//! Invariant (checked by [`Sim::audit`]): every data packet created is, at any time, exactly one
//! of delivered in order, discarded by the receiver (out of order or duplicate), dropped by the
//! switch, or still in the network (a NIC-to-switch link, the switch buffer, the last link).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::metrics::{Recorder, RunResult};
use super::queue::EventQueue;
use super::rng::SimRng;
use super::scenario::{Scenario, Traffic};
use crate::algo::{CongestionControl, Event, NackKind, RemoteStamps, RxUtil};
use crate::pacer::Readiness;
use crate::probe::ProbeSeq;
use crate::qp::{Changes, QpConfig, QpController};
use crate::units::{Nanos, Rate};

const NO_LIMIT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data { seq: u32, payload: u32 },
    Probe(ProbeSeq),
}

#[derive(Clone, Copy, Debug)]
struct Packet {
    flow: u32,
    kind: Kind,
    wire: u32,
    sent_at: Nanos,
    ecn: bool,
}

#[derive(Clone, Copy, Debug)]
enum Ctrl {
    Ack { cum: u32, rtt: Nanos },
    Nack { expected: u32 },
    Cnp,
    ProbeAnswer { seq: ProbeSeq, remote: RemoteStamps },
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    HostWake(u32),
    AtSwitch(Packet),
    PortDone,
    AtReceiver(Packet),
    AtSender { flow: u32, ctrl: Ctrl },
    Pfc { host: u32, pause: bool },
    FlowTimer { flow: u32, gen: u32 },
    ProbeDeadline(u32),
    FlowStart(u32),
    GroupStop(u16),
    Message(u32),
    Arrival { group: u16, host: u32 },
    Sample,
    RtoSweep,
}

struct Host {
    free_at_ps: u64,
    paused: bool,
    paused_since: Nanos,
    paused_total: Nanos,
    ready: BinaryHeap<Reverse<(Nanos, u32)>>,
    wake_at: Option<Nanos>,
    probes: VecDeque<(u32, ProbeSeq)>,
    // switch side of this host's port
    ingress_bytes: u64,
    pause_sent: bool,
}

struct Flow<S> {
    host: u32,
    group: u16,
    /// The flow's controller; built at construction and rebuilt when the flow starts.
    cc: QpController<S>,
    timer_gen: u32,
    sched_at: Option<Nanos>,
    active: bool,
    payload: u32,
    limit: u32,
    next_seq: u32,
    acked: u32,
    last_progress: Nanos,
    messages: VecDeque<(u32, Nanos)>,
    size_bytes: u64,
    // receiver side
    expected: u32,
    nacked: bool,
    last_cnp: Option<Nanos>,
}

/// Counters the audit and the results use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Data packets put on a wire by a sender (retransmissions included).
    pub data_sent: u64,
    /// Data packets the receiver accepted in order.
    pub data_delivered: u64,
    /// Data packets the receiver discarded (out of order or duplicate).
    pub data_discarded: u64,
    /// Data packets the switch dropped (buffer full).
    pub data_dropped: u64,
    /// Probes put on a wire.
    pub probes_sent: u64,
    /// Probes answered by the receiver.
    pub probes_answered: u64,
    /// Probes dropped by the switch.
    pub probes_dropped: u64,
    /// Retransmission timeouts.
    pub rto_fired: u64,
    /// NACKs the receiver sent.
    pub nacks: u64,
    /// CNPs the receiver sent.
    pub cnps: u64,
    /// Events processed.
    pub events: u64,
}

/// Result of [`Sim::audit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Audit {
    /// Data packets sent.
    pub sent: u64,
    /// Delivered + discarded + dropped + in the network now.
    pub accounted: u64,
    /// Bytes the switch believes it holds vs. bytes of the packets in its queue.
    pub buffer_bytes: (u64, u64),
}

/// One simulation of one scenario with one algorithm.
pub struct Sim<A: CongestionControl> {
    algo: A,
    sc: Scenario,
    pfc: bool,
    now: Nanos,
    q: EventQueue<Ev>,
    rng: SimRng,
    hosts: Vec<Host>,
    flows: Vec<Flow<A::State>>,
    port: VecDeque<Packet>,
    port_busy: bool,
    port_free_at_ps: u64,
    buffer_used: u64,
    // derived constants
    line: Rate,
    ps_per_byte: f64,
    link: Nanos,
    reverse: Nanos,
    wire_data: u32,
    buffer: u64,
    /// The receiver's arrivals inside the NP utilisation window (time, wire bytes), and their sum.
    rx_log: VecDeque<(Nanos, u32)>,
    rx_window_bytes: u64,
    np_window: Nanos,
    counters: Counters,
    rec: Recorder,
    end: Nanos,
}

fn ps_to_ns_ceil(ps: u64) -> Nanos {
    Nanos(ps.div_ceil(1000))
}

impl<A: CongestionControl> Sim<A> {
    /// Build the network and schedule the traffic.
    pub fn new(sc: &Scenario, pfc: bool, algo: A, label: String) -> Sim<A> {
        let n = &sc.network;
        let line = Rate::from_gbps(n.line_rate_gbps);
        let ps_per_byte = 8e12 / line.bps();
        let link = Nanos::from_us_f64(n.link_delay_us);
        let small = (64.0 * ps_per_byte / 1000.0).ceil() as u64;
        let reverse = Nanos(2 * link.0 + 2 * small);
        let end = Nanos::from_secs_f64(sc.duration_ms * 1e-3);
        let mut rng = SimRng::new(sc.seed);
        let mut hosts = Vec::new();
        let mut flows = Vec::new();
        let mut q = EventQueue::new();
        let mut fair = Vec::new();
        for (gi, g) in sc.groups.iter().enumerate() {
            let gi = gi as u16;
            for _ in 0..g.hosts {
                let h = hosts.len() as u32;
                hosts.push(Host {
                    free_at_ps: 0,
                    paused: false,
                    paused_since: Nanos::ZERO,
                    paused_total: Nanos::ZERO,
                    ready: BinaryHeap::new(),
                    wake_at: None,
                    probes: VecDeque::new(),
                    ingress_bytes: 0,
                    pause_sent: false,
                });
                let start = |rng: &mut SimRng| {
                    Nanos::from_secs_f64((g.start_ms + rng.unit() * g.spread_ms) * 1e-3)
                };
                match g.traffic {
                    Traffic::Long | Traffic::Messages => {
                        let count = if g.traffic == Traffic::Long {
                            g.flows_per_host
                        } else {
                            1
                        };
                        for _ in 0..count {
                            let f = flows.len() as u32;
                            let (payload, limit) = match g.traffic {
                                Traffic::Long => (n.mtu, NO_LIMIT),
                                _ => (g.message_bytes.min(n.mtu), 0),
                            };
                            flows.push(Self::flow(&algo, h, gi, payload, limit, 0, n, line));
                            if g.fairness {
                                fair.push(f);
                            }
                            let at = start(&mut rng);
                            q.push(at, Ev::FlowStart(f));
                            if g.traffic == Traffic::Messages {
                                q.push(at, Ev::Message(f));
                            }
                        }
                    }
                    Traffic::Poisson => {
                        let at = start(&mut rng);
                        q.push(at, Ev::Arrival { group: gi, host: h });
                    }
                }
            }
            if let Some(stop) = g.stop_ms {
                q.push(Nanos::from_secs_f64(stop * 1e-3), Ev::GroupStop(gi));
            }
        }
        q.push(Nanos::ZERO, Ev::Sample);
        q.push(Nanos::ZERO, Ev::RtoSweep);
        // convergence is measured from the moment the last flow of a fairness group has started
        // (start + spread), and from the moment such a group stops
        let steps = sc
            .groups
            .iter()
            .filter(|g| g.fairness)
            .flat_map(|g| {
                let mut v = vec![Nanos::from_secs_f64((g.start_ms + g.spread_ms) * 1e-3)];
                if let Some(s) = g.stop_ms {
                    v.push(Nanos::from_secs_f64(s * 1e-3));
                }
                v
            })
            .collect();
        let mut tracked = Vec::new();
        let mut first = 0u32;
        for g in &sc.groups {
            let count = match g.traffic {
                Traffic::Long => g.hosts * g.flows_per_host,
                Traffic::Messages => g.hosts,
                Traffic::Poisson => 0,
            };
            if g.fairness && count > 0 {
                tracked.push(first);
                if count > 2 {
                    tracked.push(first + count / 2);
                }
                if count > 1 {
                    tracked.push(first + count - 1);
                }
            }
            first += count;
        }
        let rec = Recorder::new(sc, label, algo.name(), pfc, fair, tracked, steps);
        Sim {
            algo,
            pfc,
            now: Nanos::ZERO,
            q,
            rng,
            hosts,
            flows,
            port: VecDeque::new(),
            port_busy: false,
            port_free_at_ps: 0,
            buffer_used: 0,
            line,
            ps_per_byte,
            link,
            reverse,
            wire_data: n.mtu + n.header_bytes,
            buffer: (n.buffer_mb * 1e6) as u64,
            rx_log: VecDeque::new(),
            rx_window_bytes: 0,
            np_window: Nanos::from_us_f64(n.np_window_us),
            counters: Counters::default(),
            rec,
            end,
            sc: sc.clone(),
        }
    }

    fn qp_config(n: &super::scenario::Network, line: Rate, payload: u32, seed: u64) -> QpConfig {
        let packet = u64::from(payload + n.header_bytes);
        let burst = u64::from(n.burst_bytes).max(packet);
        QpConfig {
            line_rate: line,
            burst,
            initial: packet,
            // the simulated senders' buckets are two packets deep: no idle rule
            idle_burst: burst,
            idle_time: Nanos::ZERO,
            burst_time: Nanos::ZERO,
            probe_timeout: Nanos::from_us_f64(n.probe_timeout_us),
            max_probe_timeout: Nanos::from_us_f64(n.probe_timeout_us * 64.0),
            jitter: n.pace_jitter,
            seed,
            // the simulated fabric drops packets, probes included
            reliable: false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn flow(
        algo: &A,
        host: u32,
        group: u16,
        payload: u32,
        limit: u32,
        size: u64,
        n: &super::scenario::Network,
        line: Rate,
    ) -> Flow<A::State> {
        Flow {
            host,
            group,
            cc: QpController::start(algo, Nanos::ZERO, &Self::qp_config(n, line, payload, 0)),
            timer_gen: 0,
            sched_at: None,
            active: false,
            payload,
            limit,
            next_seq: 0,
            acked: 0,
            last_progress: Nanos::ZERO,
            messages: VecDeque::new(),
            size_bytes: size,
            expected: 0,
            nacked: false,
            last_cnp: None,
        }
    }

    /// Run to the scenario's end and collect the results.
    pub fn run(mut self) -> RunResult {
        self.run_until(self.end);
        let audit = self.audit();
        let paused: Nanos = self
            .hosts
            .iter()
            .map(|h| {
                h.paused_total
                    + if h.paused {
                        self.end - h.paused_since
                    } else {
                        Nanos::ZERO
                    }
            })
            .fold(Nanos::ZERO, |a, b| a + b);
        self.rec
            .finish(self.counters, paused, audit.sent == audit.accounted)
    }

    /// Process events up to (and including) `until`.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some((at, ev)) = self.q.pop() {
            if at > until {
                self.q.push(at, ev);
                break;
            }
            self.now = at;
            self.counters.events += 1;
            self.handle(ev);
        }
        self.now = until;
    }

    /// Counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Account for every data packet ever sent (see the module invariant).
    pub fn audit(&self) -> Audit {
        let mut in_network = 0u64;
        for ev in self.q.pending() {
            if let Ev::AtSwitch(p) | Ev::AtReceiver(p) = ev {
                if matches!(p.kind, Kind::Data { .. }) {
                    in_network += 1;
                }
            }
        }
        let queued_bytes: u64 = self.port.iter().map(|p| u64::from(p.wire)).sum();
        in_network += self
            .port
            .iter()
            .filter(|p| matches!(p.kind, Kind::Data { .. }))
            .count() as u64;
        let c = &self.counters;
        Audit {
            sent: c.data_sent,
            accounted: c.data_delivered + c.data_discarded + c.data_dropped + in_network,
            buffer_bytes: (self.buffer_used, queued_bytes),
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::HostWake(h) => self.host_wake(h),
            Ev::AtSwitch(p) => self.at_switch(p),
            Ev::PortDone => self.port_done(),
            Ev::AtReceiver(p) => self.at_receiver(p),
            Ev::AtSender { flow, ctrl } => self.at_sender(flow, ctrl),
            Ev::Pfc { host, pause } => self.pfc_frame(host, pause),
            Ev::FlowTimer { flow, gen } => {
                if self.flows[flow as usize].timer_gen == gen {
                    let changes = self.flows[flow as usize]
                        .cc
                        .poll_timers(&self.algo, self.now);
                    self.apply(flow, changes);
                }
            }
            Ev::ProbeDeadline(flow) => {
                let changes = self.flows[flow as usize]
                    .cc
                    .poll_timers(&self.algo, self.now);
                self.apply(flow, changes);
            }
            Ev::FlowStart(flow) => self.start_flow(flow),
            Ev::GroupStop(g) => {
                for f in 0..self.flows.len() {
                    if self.flows[f].group == g && self.flows[f].active {
                        self.flows[f].active = false;
                        self.flows[f].sched_at = None;
                    }
                }
            }
            Ev::Message(flow) => self.message(flow),
            Ev::Arrival { group, host } => self.arrival(group, host),
            Ev::Sample => self.sample(),
            Ev::RtoSweep => self.rto_sweep(),
        }
    }

    fn start_flow(&mut self, flow: u32) {
        let now = self.now;
        let line = self.line;
        let f = &mut self.flows[flow as usize];
        f.active = true;
        f.last_progress = now;
        // each flow's dither differs, and so does each scenario seed's
        let seed = (self.sc.seed << 32) ^ u64::from(flow);
        let cfg = Self::qp_config(&self.sc.network, line, f.payload, seed);
        f.cc = QpController::start(&self.algo, now, &cfg);
        self.apply(
            flow,
            Changes {
                schedule: false,
                timer: true,
                probe: true,
            },
        );
        self.reschedule(flow);
    }

    fn message(&mut self, flow: u32) {
        let g = &self.sc.groups[self.flows[flow as usize].group as usize];
        let pkts = g.message_bytes.div_ceil(self.sc.network.mtu);
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        if !f.active {
            return;
        }
        f.limit = f.limit.saturating_add(pkts);
        f.messages.push_back((f.limit, now));
        self.reschedule(flow);
    }

    fn arrival(&mut self, group: u16, host: u32) {
        let g = &self.sc.groups[group as usize];
        if g.stop_ms
            .is_some_and(|s| self.now >= Nanos::from_secs_f64(s * 1e-3))
        {
            return;
        }
        let sizes = &g.sizes_kb;
        let size = sizes[(self.rng.unit() * sizes.len() as f64) as usize % sizes.len()] * 1e3;
        let mean_size = sizes.iter().sum::<f64>() / sizes.len() as f64 * 1e3;
        let per_host = g.load_gbps * 1e9 / f64::from(g.hosts);
        let gap = self.rng.exp(mean_size * 8.0 / per_host);
        let n = &self.sc.network;
        let pkts = ((size / f64::from(n.mtu)).ceil() as u32).max(1);
        let f = self.flows.len() as u32;
        let flow = Self::flow(
            &self.algo,
            host,
            group,
            n.mtu,
            pkts,
            size as u64,
            n,
            self.line,
        );
        self.flows.push(flow);
        self.flows[f as usize].messages.push_back((pkts, self.now));
        self.start_flow(f);
        self.q.push(
            self.now + Nanos::from_secs_f64(gap),
            Ev::Arrival { group, host },
        );
    }

    /// Deliver an event to the algorithm and apply its decision.
    fn decide(&mut self, flow: u32, ev: Event) {
        let changes = self.flows[flow as usize]
            .cc
            .handle(&self.algo, self.now, ev);
        self.apply(flow, changes);
    }

    /// React to what moved in a flow's controller: timer, probe, send schedule.
    fn apply(&mut self, flow: u32, changes: Changes) {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        if changes.timer {
            f.timer_gen = f.timer_gen.wrapping_add(1);
            if let Some(t) = f.cc.timer() {
                self.q.push(
                    t.max(now),
                    Ev::FlowTimer {
                        flow,
                        gen: f.timer_gen,
                    },
                );
            }
        }
        if changes.probe {
            if let Some(seq) = f.cc.poll_probe(now) {
                let h = f.host;
                if let Some(dl) = f.cc.probe_deadline() {
                    self.q.push(dl, Ev::ProbeDeadline(flow));
                }
                self.hosts[h as usize].probes.push_back((flow, seq));
                self.wake(h, now);
            }
        }
        if changes.schedule && self.flows[flow as usize].sched_at.is_some() {
            self.reschedule(flow);
        }
    }

    /// Put the flow in its host's ready heap at the time its pacer allows, if it has data.
    fn reschedule(&mut self, flow: u32) {
        let now = self.now;
        let wire = u64::from(self.wire_for(flow));
        let f = &mut self.flows[flow as usize];
        if !f.active || f.next_seq >= f.limit {
            f.sched_at = None;
            return;
        }
        let at = match f.cc.readiness(now, wire) {
            Readiness::Now => now,
            Readiness::At(t) => t,
            Readiness::WindowFull | Readiness::Stopped => {
                f.sched_at = None;
                return;
            }
        };
        if f.sched_at == Some(at) {
            return;
        }
        f.sched_at = Some(at);
        let h = f.host;
        self.hosts[h as usize].ready.push(Reverse((at, flow)));
        self.wake(h, at);
    }

    fn wire_for(&self, flow: u32) -> u32 {
        self.flows[flow as usize].payload + self.sc.network.header_bytes
    }

    fn wake(&mut self, h: u32, at: Nanos) {
        let host = &mut self.hosts[h as usize];
        let at = at.max(ps_to_ns_ceil(host.free_at_ps)).max(self.now);
        if host.wake_at.is_some_and(|w| w <= at) {
            return;
        }
        host.wake_at = Some(at);
        self.q.push(at, Ev::HostWake(h));
    }

    fn host_wake(&mut self, h: u32) {
        let now = self.now;
        if self.hosts[h as usize].wake_at != Some(now) {
            return; // superseded by an earlier wake
        }
        self.hosts[h as usize].wake_at = None;
        if self.hosts[h as usize].paused {
            return; // the resume wakes it
        }
        if self.hosts[h as usize].free_at_ps > now.0 * 1000 {
            let t = ps_to_ns_ceil(self.hosts[h as usize].free_at_ps);
            self.wake(h, t);
            return;
        }
        if let Some((flow, seq)) = self.hosts[h as usize].probes.pop_front() {
            let wire = self.sc.network.probe_bytes;
            self.counters.probes_sent += 1;
            self.transmit(
                h,
                Packet {
                    flow,
                    kind: Kind::Probe(seq),
                    wire,
                    sent_at: now,
                    ecn: false,
                },
            );
        } else {
            while let Some(&Reverse((at, flow))) = self.hosts[h as usize].ready.peek() {
                if at > now {
                    break;
                }
                self.hosts[h as usize].ready.pop();
                if self.flows[flow as usize].sched_at != Some(at) {
                    continue; // stale entry
                }
                self.flows[flow as usize].sched_at = None;
                let wire = self.wire_for(flow);
                let f = &mut self.flows[flow as usize];
                if !f.active || f.next_seq >= f.limit {
                    continue;
                }
                match f.cc.readiness(now, u64::from(wire)) {
                    Readiness::Now => {
                        if f.acked == f.next_seq {
                            f.last_progress = now;
                        }
                        let seq = f.next_seq;
                        f.next_seq += 1;
                        let payload = f.payload;
                        self.counters.data_sent += 1;
                        self.transmit(
                            h,
                            Packet {
                                flow,
                                kind: Kind::Data { seq, payload },
                                wire,
                                sent_at: now,
                                ecn: false,
                            },
                        );
                        let changes =
                            self.flows[flow as usize]
                                .cc
                                .on_sent(&self.algo, now, u64::from(wire));
                        self.apply(flow, changes);
                        self.reschedule(flow);
                        break;
                    }
                    _ => self.reschedule(flow),
                }
            }
        }
        let host = &self.hosts[h as usize];
        let next = if !host.probes.is_empty() {
            Some(now)
        } else {
            host.ready.peek().map(|r| r.0 .0)
        };
        if let Some(t) = next {
            self.wake(h, t);
        }
    }

    fn transmit(&mut self, h: u32, p: Packet) {
        let host = &mut self.hosts[h as usize];
        let start = host.free_at_ps.max(self.now.0 * 1000);
        let end = start + (f64::from(p.wire) * self.ps_per_byte).round() as u64;
        host.free_at_ps = end;
        self.q.push(ps_to_ns_ceil(end) + self.link, Ev::AtSwitch(p));
    }

    fn at_switch(&mut self, mut p: Packet) {
        let n = &self.sc.network;
        let wire = u64::from(p.wire);
        if self.buffer_used + wire > self.buffer {
            match p.kind {
                Kind::Data { .. } => self.counters.data_dropped += 1,
                Kind::Probe(_) => self.counters.probes_dropped += 1,
            }
            self.rec.drop_packet();
            return;
        }
        let qlen = self.rec.queue_bytes();
        if n.ecn && matches!(p.kind, Kind::Data { .. }) {
            let (kmin, kmax) = (n.ecn_kmin_kb * 1e3, n.ecn_kmax_kb * 1e3);
            let q = qlen as f64;
            let prob = if q <= kmin {
                0.0
            } else if q >= kmax {
                1.0
            } else {
                n.ecn_pmax * (q - kmin) / (kmax - kmin)
            };
            p.ecn = prob > 0.0 && self.rng.unit() < prob;
        }
        self.buffer_used += wire;
        let h = self.flows[p.flow as usize].host;
        self.hosts[h as usize].ingress_bytes += wire;
        self.port.push_back(p);
        self.rec.queue_change(self.now, qlen + wire);
        if self.pfc {
            let threshold = self.sc.network.pfc_alpha * (self.buffer - self.buffer_used) as f64;
            let host = &mut self.hosts[h as usize];
            if !host.pause_sent && host.ingress_bytes as f64 > threshold {
                host.pause_sent = true;
                self.q.push(
                    self.now + self.link,
                    Ev::Pfc {
                        host: h,
                        pause: true,
                    },
                );
            }
        }
        if !self.port_busy {
            self.start_port();
        }
    }

    fn start_port(&mut self) {
        if let Some(p) = self.port.front() {
            self.port_busy = true;
            let start = self.port_free_at_ps.max(self.now.0 * 1000);
            let end = start + (f64::from(p.wire) * self.ps_per_byte).round() as u64;
            self.port_free_at_ps = end;
            self.q.push(ps_to_ns_ceil(end), Ev::PortDone);
        } else {
            self.port_busy = false;
        }
    }

    fn port_done(&mut self) {
        let Some(p) = self.port.pop_front() else {
            self.port_busy = false;
            return;
        };
        let wire = u64::from(p.wire);
        self.buffer_used -= wire;
        let qlen = self.rec.queue_bytes() - wire;
        self.rec.queue_change(self.now, qlen);
        let h = self.flows[p.flow as usize].host;
        self.hosts[h as usize].ingress_bytes -= wire;
        if self.pfc && self.hosts[h as usize].pause_sent {
            let threshold = self.sc.network.pfc_alpha * (self.buffer - self.buffer_used) as f64;
            let xon = threshold - 2.0 * f64::from(self.wire_data);
            if (self.hosts[h as usize].ingress_bytes as f64) <= xon.max(0.0) {
                self.hosts[h as usize].pause_sent = false;
                self.q.push(
                    self.now + self.link,
                    Ev::Pfc {
                        host: h,
                        pause: false,
                    },
                );
            }
        }
        self.q.push(self.now + self.link, Ev::AtReceiver(p));
        self.start_port();
    }

    fn pfc_frame(&mut self, h: u32, pause: bool) {
        let now = self.now;
        let host = &mut self.hosts[h as usize];
        if pause && !host.paused {
            host.paused = true;
            host.paused_since = now;
        } else if !pause && host.paused {
            host.paused = false;
            host.paused_total = host.paused_total + (now - host.paused_since);
            self.wake(h, now);
        }
    }

    /// Record an arrival at the receiver's port and drop arrivals older than the NP window.
    fn np_arrival(&mut self, now: Nanos, wire: u32) {
        if self.np_window.0 == 0 {
            return;
        }
        self.rx_log.push_back((now, wire));
        self.rx_window_bytes += u64::from(wire);
        while let Some(&(t, b)) = self.rx_log.front() {
            if t + self.np_window > now {
                break;
            }
            self.rx_log.pop_front();
            self.rx_window_bytes -= u64::from(b);
        }
    }

    /// The receive utilisation the receiver (the notification point) reports in a probe answer
    /// sent now: wire bytes that reached it over the last `np_window_us` ÷ what its line could
    /// carry in that time (None when `np_window_us` is 0).
    pub fn np_util(&self) -> Option<RxUtil> {
        (self.np_window.0 > 0).then(|| {
            let busy_ps = self.rx_window_bytes as f64 * self.ps_per_byte;
            RxUtil::from_fraction(busy_ps / (self.np_window.0 as f64 * 1000.0))
        })
    }

    fn at_receiver(&mut self, p: Packet) {
        let now = self.now;
        self.np_arrival(now, p.wire);
        let jitter_us = self.sc.network.reverse_jitter_us;
        let back = if jitter_us > 0.0 {
            now + self.reverse + Nanos::from_us_f64(jitter_us * self.rng.unit())
        } else {
            now + self.reverse
        };
        let cnp_gap = Nanos::from_us_f64(self.sc.network.cnp_interval_us);
        let f = &mut self.flows[p.flow as usize];
        match p.kind {
            Kind::Probe(seq) => {
                self.counters.probes_answered += 1;
                let remote = RemoteStamps {
                    received: now,
                    sent: now,
                    rx_util: self.np_util(),
                };
                self.q.push(
                    back,
                    Ev::AtSender {
                        flow: p.flow,
                        ctrl: Ctrl::ProbeAnswer { seq, remote },
                    },
                );
                return;
            }
            Kind::Data { seq, payload } => {
                if seq == f.expected {
                    f.expected += 1;
                    f.nacked = false;
                    self.counters.data_delivered += 1;
                    self.rec.delivered(now, u64::from(payload));
                    while f.messages.front().is_some_and(|m| m.0 <= f.expected) {
                        if let Some((_, at)) = f.messages.pop_front() {
                            let bytes = if f.size_bytes > 0 {
                                f.size_bytes
                            } else {
                                u64::from(f.payload)
                            };
                            self.rec.completion(now, now - at, bytes);
                            if f.size_bytes == 0 {
                                // closed loop: the sender learns of the completion one reverse
                                // delay later and submits the next message after its think time
                                let g = &self.sc.groups[f.group as usize];
                                let next = back + Nanos::from_us_f64(g.interval_us);
                                if g.stop_ms
                                    .map_or(true, |s| next < Nanos::from_secs_f64(s * 1e-3))
                                {
                                    self.q.push(next, Ev::Message(p.flow));
                                }
                            }
                        }
                    }
                } else {
                    self.counters.data_discarded += 1;
                    if seq > f.expected && !f.nacked {
                        f.nacked = true;
                        self.counters.nacks += 1;
                        let expected = f.expected;
                        self.q.push(
                            back,
                            Ev::AtSender {
                                flow: p.flow,
                                ctrl: Ctrl::Nack { expected },
                            },
                        );
                    }
                }
            }
        }
        let cum = f.expected;
        self.q.push(
            back,
            Ev::AtSender {
                flow: p.flow,
                ctrl: Ctrl::Ack {
                    cum,
                    rtt: back - p.sent_at,
                },
            },
        );
        if p.ecn && f.last_cnp.map_or(true, |t| now - t >= cnp_gap) {
            f.last_cnp = Some(now);
            self.counters.cnps += 1;
            self.q.push(
                back,
                Ev::AtSender {
                    flow: p.flow,
                    ctrl: Ctrl::Cnp,
                },
            );
        }
    }

    fn at_sender(&mut self, flow: u32, ctrl: Ctrl) {
        let now = self.now;
        let wire = u64::from(self.wire_for(flow));
        match ctrl {
            Ctrl::Ack { cum, rtt } => {
                let f = &mut self.flows[flow as usize];
                if cum <= f.acked {
                    return;
                }
                let newly = cum - f.acked;
                f.acked = cum;
                f.next_seq = f.next_seq.max(cum);
                f.last_progress = now;
                f.cc.on_acked(u64::from(newly) * wire);
                if self.algo.wants_acks() {
                    let bytes = u64::from(newly) * u64::from(f.payload);
                    self.decide(
                        flow,
                        Event::Ack {
                            bytes,
                            rtt: Some(rtt),
                        },
                    );
                }
                self.reschedule(flow);
            }
            Ctrl::Nack { expected } => {
                let f = &mut self.flows[flow as usize];
                if expected < f.acked {
                    return;
                }
                f.acked = expected;
                f.next_seq = expected;
                f.last_progress = now;
                f.cc.on_rewind();
                self.decide(flow, Event::Nack(NackKind::OutOfSequence));
                self.reschedule(flow);
            }
            Ctrl::Cnp => self.decide(flow, Event::Cnp),
            Ctrl::ProbeAnswer { seq, remote } => {
                let changes = self.flows[flow as usize].cc.on_probe_answer(
                    &self.algo,
                    now,
                    seq,
                    Some(remote),
                );
                self.apply(flow, changes);
            }
        }
    }

    fn rto_sweep(&mut self) {
        let rto = Nanos::from_us_f64(self.sc.network.rto_us);
        let now = self.now;
        for flow in 0..self.flows.len() as u32 {
            let f = &mut self.flows[flow as usize];
            if f.acked < f.next_seq && now - f.last_progress >= rto {
                f.next_seq = f.acked;
                f.last_progress = now;
                f.cc.on_rewind();
                self.counters.rto_fired += 1;
                self.decide(flow, Event::Nack(NackKind::OutOfSequence));
                self.reschedule(flow);
            }
        }
        self.q
            .push(now + Nanos(rto.0 / 2).max(Nanos(1)), Ev::RtoSweep);
    }

    fn sample(&mut self) {
        let now = self.now;
        let algo = &self.algo;
        let flows = &self.flows;
        self.rec.sample(now, |i| {
            let f = &flows[i as usize];
            f.active.then(|| f.cc.rate(algo).bps())
        });
        let step = Nanos::from_us_f64(self.sc.sample_us).max(Nanos(1));
        self.q.push(now + step, Ev::Sample);
    }
}
