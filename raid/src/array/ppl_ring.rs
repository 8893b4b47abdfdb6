//! Space in the partial-parity log (format 2, see [`super::ppl`]): per member, a ring of
//! header slots and a ring of payload bytes, handed out in order.
//!
//! A write round asks for all its entries at once ([`Rings::reserve`]): per parity member,
//! `k` consecutive sequence numbers (header slots `seq mod headers`) and one payload span
//! that does not wrap. Invariants:
//! - a header slot or payload byte is handed out again only after the round that held it
//!   finished ([`Grant`] drop) — spans are reclaimed oldest first, and a request waits while
//!   the oldest span it would overwrite belongs to a round still in flight;
//! - a round gets all its members' space in one step, or waits holding none, so two rounds
//!   never wait for each other (no deadlock); a round holding space never waits for space;
//! - before reclaimed space is reused, the roles its round wrote (kept flush tickets) must
//!   be flushed: [`Rings::reserve`] returns them, the caller flushes those not covered since;
//! - the ring remembers, per stripe, the sequence number of its newest header (seeded at
//!   assembly from the headers on disk), so a write can ask whether a surviving header may
//!   hold an entry for its stripe ([`Rings::may_hold`]); and the flush tickets of that
//!   entry's round, which [`Rings::reserve`] also returns when the stripe is logged again: a
//!   new entry's partial parity must not be computed from data an earlier write to the
//!   stripe left in a cache (the fixed slots of format 1 got this from slot reuse).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::flush::Ticket;
use super::ppl::{PplLayout, RingScan};

/// One round's space on one member.
#[derive(Debug)]
struct Span {
    round: u64,
    seq: u64,
    /// Logical payload position (grows without bound; physical = `pos % payload_bytes`).
    pos: u64,
    done: bool,
    tickets: Vec<Ticket>,
}

#[derive(Debug, Default)]
struct Ring {
    next_seq: u64,
    head: u64,
    spans: VecDeque<Span>,
    /// Per stripe: newest header sequence number, and the flush tickets of its round
    /// (set when the round finished).
    newest: HashMap<u64, (u64, Vec<Ticket>)>,
}

#[derive(Debug, Default)]
struct State {
    rings: Vec<Ring>,
    rounds: u64,
    /// Callers waiting for space (a finished round wakes them only if there are any).
    waiting: usize,
}

/// The log rings of every member.
#[derive(Debug)]
pub(crate) struct Rings {
    layout: PplLayout,
    state: Mutex<State>,
    freed: Condvar,
}

/// One member's part of a grant: entry `i` has sequence number `seq + i`; the payload span
/// starts at absolute byte offset `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemberGrant {
    pub role: usize,
    pub seq: u64,
    pub at: u64,
}

/// A round's log space; released (and the tickets set with [`Grant::finish`] kept for
/// whoever reuses it) when dropped.
#[derive(Debug)]
pub(crate) struct Grant<'a> {
    rings: &'a Rings,
    round: u64,
    pub members: Vec<MemberGrant>,
    /// Per member role: the stripes of its entries, in order.
    stripes: Vec<(usize, Vec<u64>)>,
    tickets: Vec<(usize, Vec<Ticket>)>,
}

impl Rings {
    pub(crate) fn new(layout: PplLayout, members: usize) -> Self {
        Rings {
            layout,
            state: Mutex::new(State {
                rings: (0..members).map(|_| Ring::default()).collect(),
                rounds: 0,
                waiting: 0,
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Continues each member's sequence after what its header ring holds, and remembers the
    /// stripes of the headers there.
    pub(crate) fn seed(&self, scans: Vec<RingScan>) {
        let mut st = self.lock();
        for (ring, scan) in st.rings.iter_mut().zip(scans) {
            ring.next_seq = scan.max_seq + 1;
            for (stripe, seq) in scan.headers {
                let e = ring.newest.entry(stripe).or_insert((seq, Vec::new()));
                e.0 = e.0.max(seq);
            }
        }
    }

    /// Whether a surviving header on `role`'s member may hold an entry for `stripe`.
    pub(crate) fn may_hold(&self, role: usize, stripe: u64) -> bool {
        let st = self.lock();
        st.rings.get(role).is_none_or(|r| {
            r.newest
                .get(&stripe)
                .is_some_and(|&(seq, _)| seq + self.layout.headers >= r.next_seq)
        })
    }

    /// Space for `needs`: per member role, the payload bytes of each entry (multiples of
    /// 4 KiB, entries in order). Waits while the space is held by rounds in flight. Returns
    /// the grant and the tickets to flush first: of finished rounds whose space it reuses,
    /// and of the last logged round of each of its stripes.
    /// `None` when a request can never fit (it cannot happen with a valid layout).
    pub(crate) fn reserve(
        &self,
        needs: &[(usize, Vec<(u64, u64)>)],
    ) -> Option<(Grant<'_>, Vec<Ticket>)> {
        let l = &self.layout;
        for (_, entries) in needs {
            let bytes: u64 = entries.iter().map(|&(_, b)| b).sum();
            if entries.len() as u64 > l.headers || bytes > l.payload_bytes {
                return None;
            }
        }
        let mut st = self.lock();
        // Where each member's span would go: (role, seq, logical position, bytes, k).
        let place = |st: &State| -> Vec<(usize, u64, u64, u64, u64)> {
            needs
                .iter()
                .map(|(role, entries)| {
                    let r = &st.rings[*role];
                    let bytes: u64 = entries.iter().map(|&(_, b)| b).sum();
                    let mut pos = r.head;
                    if pos % l.payload_bytes + bytes > l.payload_bytes {
                        pos = pos.div_ceil(l.payload_bytes) * l.payload_bytes;
                    }
                    (*role, r.next_seq, pos, bytes, entries.len() as u64)
                })
                .collect()
        };
        // Spans that must be reclaimed first: those whose header slots or payload bytes the
        // new span covers (and everything older).
        let overlaps = |span: &Span, seq: u64, k: u64, pos: u64, bytes: u64| {
            span.seq + l.headers < seq + k || span.pos + l.payload_bytes < pos + bytes
        };
        loop {
            if needs.iter().any(|(role, _)| *role >= st.rings.len()) {
                return None;
            }
            let plan = place(&st);
            let busy = plan.iter().any(|&(role, seq, pos, bytes, k)| {
                st.rings[role]
                    .spans
                    .iter()
                    .take_while(|s| overlaps(s, seq, k, pos, bytes))
                    .any(|s| !s.done)
            });
            if busy {
                st.waiting += 1;
                st = self.freed.wait(st).unwrap_or_else(|p| p.into_inner());
                st.waiting -= 1;
                continue;
            }
            st.rounds += 1;
            let round = st.rounds;
            let mut due = Vec::new();
            let mut members = Vec::with_capacity(plan.len());
            for (&(role, seq, pos, bytes, k), (_, entries)) in plan.iter().zip(needs) {
                let ring = &mut st.rings[role];
                while ring
                    .spans
                    .front()
                    .is_some_and(|s| overlaps(s, seq, k, pos, bytes))
                {
                    if let Some(s) = ring.spans.pop_front() {
                        due.extend(s.tickets);
                    }
                }
                ring.next_seq = seq + k;
                ring.head = pos + bytes;
                ring.spans.push_back(Span {
                    round,
                    seq,
                    pos,
                    done: false,
                    tickets: Vec::new(),
                });
                for (i, &(stripe, _)) in entries.iter().enumerate() {
                    if let Some((_, t)) = ring.newest.insert(stripe, (seq + i as u64, Vec::new())) {
                        due.extend(t);
                    }
                }
                // Entries past the horizon were overwritten: their tickets went with the
                // reclaimed spans.
                let horizon = ring.next_seq.saturating_sub(l.headers);
                if ring.newest.len() as u64 > 4 * l.headers {
                    ring.newest.retain(|_, (s, _)| *s >= horizon);
                }
                members.push(MemberGrant {
                    role,
                    seq,
                    at: l.payload_offset + pos % l.payload_bytes,
                });
            }
            let stripes = needs
                .iter()
                .map(|(role, e)| (*role, e.iter().map(|&(s, _)| s).collect()))
                .collect();
            return Some((
                Grant {
                    rings: self,
                    round,
                    members,
                    stripes,
                    tickets: Vec::new(),
                },
                due,
            ));
        }
    }
}

impl Grant<'_> {
    /// Records the flush tickets of the roles the round wrote, kept with `role`'s span.
    pub(crate) fn finish(&mut self, role: usize, tickets: Vec<Ticket>) {
        self.tickets.push((role, tickets));
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        let mut st = self.rings.lock();
        for g in &self.members {
            let Some(ring) = st.rings.get_mut(g.role) else {
                continue;
            };
            let tickets: Vec<Ticket> = self
                .tickets
                .iter()
                .filter(|(r, _)| *r == g.role)
                .flat_map(|(_, t)| t.iter().copied())
                .collect();
            let stripes = self.stripes.iter().filter(|(r, _)| *r == g.role);
            for (i, &stripe) in stripes.flat_map(|(_, s)| s).enumerate() {
                if let Some((seq, t)) = ring.newest.get_mut(&stripe) {
                    if *seq == g.seq + i as u64 {
                        t.clone_from(&tickets);
                    }
                }
            }
            if let Some(span) = ring.spans.iter_mut().find(|s| s.round == self.round) {
                span.done = true;
                span.tickets = tickets;
            }
        }
        let waiting = st.waiting > 0;
        drop(st);
        if waiting {
            self.rings.freed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn layout(headers: u64, payload: u64) -> PplLayout {
        PplLayout {
            offset: 0,
            headers,
            payload_offset: headers * 4096,
            payload_bytes: payload,
        }
    }

    #[test]
    fn spans_are_handed_out_in_order_and_never_wrap() {
        let rings = Rings::new(layout(8, 40960), 2);
        let (g1, due) = rings.reserve(&[(0, vec![(5, 8192), (6, 8192)])]).unwrap();
        assert!(due.is_empty());
        assert_eq!(
            g1.members,
            vec![MemberGrant {
                role: 0,
                seq: 0,
                at: 32768
            }]
        );
        let (g2, _) = rings
            .reserve(&[(0, vec![(7, 16384)]), (1, vec![(8, 4096)])])
            .unwrap();
        assert_eq!(
            g2.members[0],
            MemberGrant {
                role: 0,
                seq: 2,
                at: 32768 + 16384
            }
        );
        assert_eq!(
            g2.members[1],
            MemberGrant {
                role: 1,
                seq: 0,
                at: 32768
            }
        );
        drop(g1);
        // 8 KiB left before the end: a 12 KiB span starts over at the ring's start, which
        // g1 held (finished now).
        let (g3, _) = rings.reserve(&[(0, vec![(9, 12288)])]).unwrap();
        assert_eq!(
            g3.members[0],
            MemberGrant {
                role: 0,
                seq: 3,
                at: 32768
            }
        );
        assert!(rings.may_hold(0, 9) && rings.may_hold(0, 5) && !rings.may_hold(0, 8));
        assert!(rings.may_hold(1, 8));
        drop((g2, g3));
    }

    #[test]
    fn reuse_waits_for_the_round_in_flight_and_returns_its_tickets() {
        let rings = Arc::new(Rings::new(layout(4, 16384), 1));
        let (mut g1, _) = rings.reserve(&[(0, vec![(1, 8192)])]).unwrap();
        let (g2, _) = rings.reserve(&[(0, vec![(2, 8192)])]).unwrap();
        drop(g2);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t = {
            let (rings, done) = (rings.clone(), done.clone());
            std::thread::spawn(move || {
                // Needs g1's bytes: waits until g1 is dropped.
                let (g, due) = rings.reserve(&[(0, vec![(3, 8192)])]).unwrap();
                assert!(done.load(std::sync::atomic::Ordering::SeqCst));
                (g.members[0], due)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        g1.finish(0, vec![Ticket { role: 2, number: 7 }]);
        drop(g1);
        let (m, due) = t.join().unwrap();
        assert_eq!(m.at, 16384);
        assert_eq!(due, vec![Ticket { role: 2, number: 7 }]);
        // Header slots wrap as well: 4 slots, entries 0..3 used; seq 4 reuses slot 0.
        assert_eq!(m.seq, 2);
        assert!(!rings.may_hold(0, 9));
        // More than the ring can ever hold is refused, not waited for.
        assert!(rings.reserve(&[(0, vec![(1, 20480)])]).is_none());
        assert!(rings.reserve(&[(0, vec![(1, 4096); 5])]).is_none());
    }

    #[test]
    fn header_slots_are_reclaimed_before_reuse() {
        let rings = Rings::new(layout(2, 1 << 20), 1);
        let (g1, _) = rings.reserve(&[(0, vec![(1, 4096), (2, 4096)])]).unwrap();
        // Slots 0 and 1 held by g1: a third header must wait; seeded from a scan, the
        // sequence continues after the highest found.
        drop(g1);
        let (g2, _) = rings.reserve(&[(0, vec![(3, 4096)])]).unwrap();
        assert_eq!(g2.members[0].seq, 2);
        assert!(!rings.may_hold(0, 1) && rings.may_hold(0, 2) && rings.may_hold(0, 3));
        drop(g2);
        let seeded = Rings::new(layout(2, 1 << 20), 1);
        seeded.seed(vec![RingScan {
            max_seq: 41,
            headers: vec![(10, 40), (11, 41)],
        }]);
        assert!(seeded.may_hold(0, 10) && seeded.may_hold(0, 11) && !seeded.may_hold(0, 12));
        let (g, _) = seeded.reserve(&[(0, vec![(12, 4096)])]).unwrap();
        assert_eq!(g.members[0].seq, 42);
        assert!(!seeded.may_hold(0, 10));
    }
}
