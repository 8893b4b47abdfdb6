//! Group commit for cache flushes: concurrent requests that each need "my completed writes
//! to this member are durable" share one flush.
//!
//! Invariant: a caller takes a ticket after its writes completed; any flush that *starts*
//! after the ticket was taken covers those writes. The gate runs at most one flush per
//! member at a time; a caller whose ticket is newer than the running flush's start waits for
//! the next one (which it or another waiter starts), so it never returns uncovered.
//!
//! A ticket can also be kept and redeemed later ([`FlushGate::ticket`],
//! [`FlushGate::covered`], [`FlushGate::flush_to`]): the partial-parity log keeps one per
//! member a logged round wrote and, before the round's log slot is reused, flushes only
//! those members whose tickets no flush has covered since (often none: other requests'
//! flushes already did).
//!
//! Each role's gate also holds, per partial-parity-log slot on that role's member, what the
//! round that last logged an entry there did ([`FlushGate::slot_writes`],
//! [`FlushGate::slot_stripe`]): the stripe it logged, and which roles it wrote, with their
//! tickets (md's `disk_flush_bitmap` / `ppl_do_flush`). Unknown (nothing logged since the
//! array started) until the first entry.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::MemberError;
use crate::member::Member;

#[derive(Debug, Default)]
struct State {
    /// Highest ticket issued.
    issued: u64,
    /// Every ticket up to this one is covered by a completed flush.
    covered: u64,
    running: bool,
}

/// A kept flush ticket: writes to one role that completed before it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The role written.
    pub role: usize,
    /// Its gate's ticket number.
    pub number: u64,
}

/// The last entry logged in one slot since the array started.
#[derive(Debug, Clone, Default)]
struct SlotRecord {
    /// Its stripe; `None` until this array logs an entry there (the slot may still hold an
    /// entry from before).
    stripe: Option<u64>,
    /// Flush tickets of the roles its round wrote.
    writes: Vec<Ticket>,
}

/// One member's flush gate.
#[derive(Debug, Default)]
pub struct FlushGate {
    state: Mutex<State>,
    done: Condvar,
    /// Per log slot on this role's member: what the last logged round did.
    slots: Mutex<Vec<SlotRecord>>,
}

impl FlushGate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns once writes to `member` that completed before this call are durable.
    pub fn flush(&self, member: &dyn Member) -> Result<(), MemberError> {
        let mut st = self.lock();
        st.issued += 1;
        let mine = st.issued;
        self.wait_covered(st, member, mine)
    }

    /// A ticket for writes that completed before this call, to redeem later.
    pub fn ticket(&self) -> u64 {
        let mut st = self.lock();
        st.issued += 1;
        st.issued
    }

    /// A flush of this role's member that a caller's ring is about to issue (the gate does
    /// not run it): the ticket it will cover, for [`FlushGate::ring_flush_done`].
    pub fn ring_flush_start(&self) -> u64 {
        self.ticket()
    }

    /// The ring flush that started at `upto` completed: every ticket up to it is covered.
    /// No wake-up: a caller waits only while a gate flush runs, whose end wakes it.
    pub fn ring_flush_done(&self, upto: u64) {
        let mut st = self.lock();
        st.covered = st.covered.max(upto);
    }

    /// Whether a flush that started after `ticket` was taken has completed.
    pub fn covered(&self, ticket: u64) -> bool {
        self.lock().covered >= ticket
    }

    /// Returns once writes covered by `ticket` are durable: at once when a flush already
    /// covered it, else after the next flush of `member` (shared with concurrent callers).
    pub fn flush_to(&self, member: &dyn Member, ticket: u64) -> Result<(), MemberError> {
        let st = self.lock();
        let mine = ticket.min(st.issued);
        self.wait_covered(st, member, mine)
    }

    fn wait_covered<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        member: &dyn Member,
        mine: u64,
    ) -> Result<(), MemberError> {
        loop {
            if st.covered >= mine {
                return Ok(());
            }
            if !st.running {
                st.running = true;
                let upto = st.issued;
                drop(st);
                let r = member.flush();
                st = self.lock();
                st.running = false;
                if r.is_ok() {
                    st.covered = st.covered.max(upto);
                }
                self.done.notify_all();
                r?;
                continue;
            }
            st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Tickets of the writes of the round that last logged an entry in `slot` of this
    /// role's member (empty when none, or when they were known durable).
    pub fn slot_writes(&self, slot: u64) -> Vec<Ticket> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .get(slot as usize)
            .map(|r| r.writes.clone())
            .unwrap_or_default()
    }

    /// The stripe of the last entry this array logged in `slot`; `None` when it logged none
    /// there yet (the slot's content is then unknown).
    pub fn slot_stripe(&self, slot: u64) -> Option<u64> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(slot as usize).and_then(|r| r.stripe)
    }

    /// Marks what `slot` holds as unknown (its entry write may or may not have landed); the
    /// tickets stay.
    pub fn forget_slot(&self, slot: u64) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = slots.get_mut(slot as usize) {
            r.stripe = None;
        }
    }

    /// Records the round that just logged an entry for `stripe` in `slot`, and its writes.
    pub fn set_slot_writes(&self, slot: u64, stripe: u64, writes: Vec<Ticket>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let i = slot as usize;
        if slots.len() <= i {
            slots.resize_with(i + 1, SlotRecord::default);
        }
        slots[i] = SlotRecord {
            stripe: Some(stripe),
            writes,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::MemMember;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Counts flushes, each taking a while.
    #[derive(Debug)]
    struct SlowFlush(MemMember, AtomicU64);

    impl Member for SlowFlush {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }
        fn read_at(&self, o: u64, b: &mut [u8]) -> Result<(), MemberError> {
            self.0.read_at(o, b)
        }
        fn write_at(&self, o: u64, b: &[u8]) -> Result<(), MemberError> {
            self.0.write_at(o, b)
        }
        fn flush(&self) -> Result<(), MemberError> {
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.1.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn kept_tickets_are_covered_by_later_flushes_only() {
        let m = SlowFlush(MemMember::new("m", 4096), AtomicU64::new(0));
        let gate = FlushGate::default();
        let t = gate.ticket();
        assert!(!gate.covered(t));
        gate.flush_to(&m, t).unwrap();
        assert!(gate.covered(t));
        assert_eq!(m.1.load(Ordering::SeqCst), 1);
        // Covered: redeeming it again costs nothing.
        gate.flush_to(&m, t).unwrap();
        assert_eq!(m.1.load(Ordering::SeqCst), 1);
        // A ticket taken later needs a later flush; any flush covers it.
        let t2 = gate.ticket();
        assert!(!gate.covered(t2));
        gate.flush(&m).unwrap();
        assert!(gate.covered(t2));
        assert_eq!(m.1.load(Ordering::SeqCst), 2);
        // Slot records.
        assert!(gate.slot_writes(3).is_empty());
        assert_eq!(gate.slot_stripe(3), None);
        let w = vec![Ticket { role: 1, number: 9 }];
        gate.set_slot_writes(3, 77, w.clone());
        assert_eq!(gate.slot_writes(3), w);
        assert_eq!(gate.slot_stripe(3), Some(77));
        gate.forget_slot(3);
        assert_eq!(gate.slot_stripe(3), None);
        assert_eq!(gate.slot_writes(3), w);
        assert!(gate.slot_writes(0).is_empty());
        assert_eq!(gate.slot_stripe(0), None);
    }

    #[test]
    fn concurrent_callers_share_flushes() {
        let m = Arc::new(SlowFlush(MemMember::new("m", 4096), AtomicU64::new(0)));
        let gate = Arc::new(FlushGate::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (m, gate) = (m.clone(), gate.clone());
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        gate.flush(&*m).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let flushes = m.1.load(Ordering::SeqCst);
        assert!(
            flushes < 80,
            "80 requests should share flushes, took {flushes}"
        );
        assert!(
            flushes >= 10,
            "each thread's 10 sequential calls need 10 distinct flushes"
        );
    }
}
