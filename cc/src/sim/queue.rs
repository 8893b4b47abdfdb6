//! The simulator's event queue: a binary min-heap ordered by (time, insertion number).
//!
//! Invariant: events pop in non-decreasing time; events at the same nanosecond pop in the order
//! they were pushed, which makes a run a pure function of the scenario and the seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::units::Nanos;

struct Entry<E> {
    at: Nanos,
    n: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.n == other.n
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // reversed: BinaryHeap is a max-heap
        (other.at, other.n).cmp(&(self.at, self.n))
    }
}

/// Time-ordered, FIFO among equal times.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    pushed: u64,
}

impl<E> EventQueue<E> {
    /// Empty.
    pub fn new() -> EventQueue<E> {
        EventQueue {
            heap: BinaryHeap::with_capacity(1 << 16),
            pushed: 0,
        }
    }

    /// Schedule `ev` at `at`.
    pub fn push(&mut self, at: Nanos, ev: E) {
        self.heap.push(Entry {
            at,
            n: self.pushed,
            ev,
        });
        self.pushed += 1;
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }

    /// Events pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Pending events, in no particular order.
    pub fn pending(&self) -> impl Iterator<Item = &E> {
        self.heap.iter().map(|e| &e.ev)
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_fifo() {
        let mut q = EventQueue::new();
        q.push(Nanos(5), 'a');
        q.push(Nanos(1), 'b');
        q.push(Nanos(5), 'c');
        q.push(Nanos(3), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
        assert_eq!(q.pushed(), 4);
    }
}
