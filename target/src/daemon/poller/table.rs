//! The poller's queue pairs, by index.
//!
//! A queue is taken out of its slot while one of its completions is handled (the handlers
//! need `&mut Poller` and `&mut Queue` at once) and put back into the same slot after: the
//! slot index travels in the queue ([`Queue::table_idx`]), so putting back is a store, and
//! taking out is one look-up of the QP number (the key a work completion carries) and a
//! `take`. The map from QP number to slot changes only when a queue comes or goes, never per
//! command.

use rustc_hash::FxHashMap;

use raidline_fabric::Fabric;

use crate::daemon::queue::Queue;

pub(super) struct QueueTable<F: Fabric> {
    /// `None`: free, or taken out right now.
    slots: Vec<Option<Box<Queue<F>>>>,
    by_qpn: FxHashMap<u32, u32>,
    free: Vec<u32>,
}

impl<F: Fabric> Default for QueueTable<F> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            by_qpn: FxHashMap::default(),
            free: Vec::new(),
        }
    }
}

impl<F: Fabric> QueueTable<F> {
    /// A new queue pair comes to the poller.
    pub(super) fn add(&mut self, mut q: Box<Queue<F>>) {
        let qpn = q.qp_num().0;
        if let Some(&i) = self.by_qpn.get(&qpn) {
            // The same QP number again (a queue pair that went and whose number came back):
            // its slot is the one to use.
            q.table_idx = i;
            self.slots[i as usize] = Some(q);
            return;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        q.table_idx = i;
        self.slots[i as usize] = Some(q);
        self.by_qpn.insert(qpn, i);
    }

    /// Takes the queue of QP `qpn` out of its slot (to be put back with [`Self::put`]);
    /// `None` if the poller has no such queue or it is already out.
    pub(super) fn take(&mut self, qpn: u32) -> Option<Box<Queue<F>>> {
        let i = *self.by_qpn.get(&qpn)?;
        self.slots[i as usize].take()
    }

    /// Puts a taken queue back.
    pub(super) fn put(&mut self, q: Box<Queue<F>>) {
        let i = q.table_idx as usize;
        debug_assert!(self.slots[i].is_none(), "queue slot {i} taken twice");
        self.slots[i] = Some(q);
    }

    /// Removes the queue of QP `qpn` for good.
    pub(super) fn retire(&mut self, qpn: u32) -> Option<Box<Queue<F>>> {
        let i = self.by_qpn.remove(&qpn)?;
        self.free.push(i);
        self.slots[i as usize].take()
    }

    /// Whether the poller has no queue pair.
    pub(super) fn is_empty(&self) -> bool {
        self.by_qpn.is_empty()
    }

    /// The queues in their slots, with their QP numbers.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &Queue<F>)> {
        self.values().map(|q| (q.qp_num().0, q))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Queue<F>> {
        self.slots.iter().filter_map(|s| s.as_deref())
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Queue<F>> {
        self.slots.iter_mut().filter_map(|s| s.as_deref_mut())
    }
}
