//! One NVMe controller as a state machine without I/O.
//!
//! A controller is created by an accepted admin-queue Connect and lives until its admin queue
//! goes away or its keep-alive timer expires. The admin queue's owner drives it:
//!
//! 1. [`Controller::handle_property_get`] / [`Controller::handle_property_set`] for the fabrics
//!    property commands (allowed in any state, as CC.EN is set through them);
//! 2. [`Controller::handle_admin`] for every admin command once CSTS.RDY is 1;
//! 3. [`Controller::poll_timeout`] for the next deadline, and [`Controller::handle_timeout`]
//!    when it passes; [`Controller::poll_event`] for Asynchronous Event Request completions that
//!    became ready (after [`Controller::post_event`]).
//!
//! Time is always passed in (`now`); nothing here reads a clock or touches a socket.

mod admin;
mod identify;
mod properties;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raidline_proto::aen::AsyncEvent;
use raidline_proto::fabrics::property::{Cc, Csts};
use raidline_proto::features::{AsyncEventConfig, NumberOfQueues};
use raidline_proto::text::Nqn;
use raidline_proto::{Status, StatusCode};

use crate::registry::Served;
use crate::subsystem::Limits;

pub use admin::{AdminEnv, AdminOutcome, Completion};

/// Why a controller ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// No command reset the keep-alive timer within KATO.
    KeepAlive {
        /// The KATO the host asked for.
        kato: Duration,
    },
}

/// One controller's state.
#[derive(Debug)]
pub struct Controller {
    cntlid: u16,
    served: Served,
    limits: Limits,
    cc: Cc,
    csts: Csts,
    kato: Duration,
    keep_alive_deadline: Option<Instant>,
    hostnqn: Nqn,
    /// I/O queues granted by Set Features Number of Queues.
    io_queues_granted: Option<NumberOfQueues>,
    aec: AsyncEventConfig,
    aer_slots: VecDeque<u16>,
    events: VecDeque<AsyncEvent>,
    ready_events: VecDeque<(u16, Completion)>,
    changed_ns: Vec<u32>,
    timestamp: Option<(u64, Instant)>,
    stats: Stats,
    io: Arc<IoCounters>,
}

/// The I/O path's share of the SMART counters: updated by the pollers' queues without the
/// controller's lock (one relaxed atomic add each per command), read when the log is built.
#[derive(Debug, Default)]
pub struct IoCounters {
    /// Bytes read by hosts.
    pub bytes_read: AtomicU64,
    /// Bytes written by hosts.
    pub bytes_written: AtomicU64,
    /// Read commands completed.
    pub read_commands: AtomicU64,
    /// Write commands completed.
    pub write_commands: AtomicU64,
}

impl IoCounters {
    /// Counts one completed read (`read`) or write of `bytes`.
    pub fn count(&self, read: bool, bytes: u64) {
        let (b, c) = if read {
            (&self.bytes_read, &self.read_commands)
        } else {
            (&self.bytes_written, &self.write_commands)
        };
        b.fetch_add(bytes, Ordering::Relaxed);
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counters the SMART / Health log reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes read by hosts.
    pub bytes_read: u128,
    /// Bytes written by hosts.
    pub bytes_written: u128,
    /// Read commands completed.
    pub read_commands: u128,
    /// Write commands completed.
    pub write_commands: u128,
    /// Media errors (unrecovered reads, failed writes) reported to hosts.
    pub media_errors: u128,
    /// Critical warning bits (bit 2: reliability degraded — an array is degraded).
    pub critical_warning: u8,
}

impl Controller {
    /// A new controller after an accepted admin Connect with keep-alive timeout `kato_ms`
    /// (0 disables the timer, as for non-persistent discovery controllers).
    pub fn new(
        cntlid: u16,
        served: Served,
        hostnqn: Nqn,
        limits: Limits,
        kato_ms: u32,
        now: Instant,
    ) -> Self {
        let kato = Duration::from_millis(u64::from(kato_ms));
        Controller {
            cntlid,
            served,
            hostnqn,
            limits,
            cc: Cc::default(),
            csts: Csts::default(),
            kato,
            keep_alive_deadline: (!kato.is_zero()).then(|| now + kato),
            io_queues_granted: None,
            aec: AsyncEventConfig::default(),
            aer_slots: VecDeque::new(),
            events: VecDeque::new(),
            ready_events: VecDeque::new(),
            changed_ns: Vec::new(),
            timestamp: None,
            stats: Stats::default(),
            io: Arc::default(),
        }
    }

    /// The controller id.
    pub fn cntlid(&self) -> u16 {
        self.cntlid
    }

    /// Whether the host has enabled the controller and it is ready (CSTS.RDY).
    pub fn is_ready(&self) -> bool {
        self.csts.rdy
    }

    /// The host's NQN.
    pub fn hostnqn(&self) -> &Nqn {
        &self.hostnqn
    }

    /// What the controller serves.
    pub fn served(&self) -> &Served {
        &self.served
    }

    /// Counters for the SMART log, updated by the I/O path's owner.
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// The counters the I/O path updates without this controller's lock (added to
    /// [`Controller::stats_mut`]'s in the SMART log).
    pub fn io_counters(&self) -> &Arc<IoCounters> {
        &self.io
    }

    /// The next instant at which [`Controller::handle_timeout`] must be called, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.keep_alive_deadline
    }

    /// Checks the keep-alive timer. `Some` means the controller has expired: the caller tears
    /// it down and disconnects all its queues.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Expiry> {
        match self.keep_alive_deadline {
            Some(d) if now >= d => Some(Expiry::KeepAlive { kato: self.kato }),
            _ => None,
        }
    }

    fn keep_alive(&mut self, now: Instant) {
        if !self.kato.is_zero() {
            // Granularity: the host sends Keep Alive every KATO/2; we allow KATO plus the
            // advertised KAS granularity before declaring the host gone.
            let slack = Duration::from_millis(100 * u64::from(self.limits.kas_100ms));
            self.keep_alive_deadline = Some(now + self.kato + slack);
        }
    }

    /// Queues an asynchronous event; it completes a parked Asynchronous Event Request now or
    /// when the host next posts one. Events the host has not enabled (AEC) are dropped, and an
    /// event of the same kind already waiting is not queued twice.
    pub fn post_event(&mut self, ev: AsyncEvent, changed_nsids: &[u32]) {
        for &n in changed_nsids {
            if !self.changed_ns.contains(&n) {
                self.changed_ns.push(n);
            }
        }
        if !ev.enabled_by(self.aec) || self.events.contains(&ev) {
            return;
        }
        self.events.push_back(ev);
        self.match_events();
    }

    fn match_events(&mut self) {
        while !self.events.is_empty() && !self.aer_slots.is_empty() {
            let (Some(ev), Some(cid)) = (self.events.pop_front(), self.aer_slots.pop_front())
            else {
                break;
            };
            self.ready_events
                .push_back((cid, Completion::with_result(u64::from(ev.to_dw0()))));
        }
    }

    /// An Asynchronous Event Request completion that became ready: (command id, completion).
    pub fn poll_event(&mut self) -> Option<(u16, Completion)> {
        self.ready_events.pop_front()
    }

    /// Parked Asynchronous Event Requests, to be completed with "aborted by SQ deletion"
    /// when the controller goes away.
    pub fn take_parked_aers(&mut self) -> Vec<u16> {
        self.aer_slots.drain(..).collect()
    }
}

/// A completion status with DNR for a command whose retry cannot succeed.
pub(crate) fn dnr(code: StatusCode) -> Status {
    Status::new(code).dnr()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
