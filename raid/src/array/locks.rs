//! Stripe locks: a set of held stripe numbers plus a condition variable.
//!
//! A caller locks all the stripes it needs in one call; the call waits until none of them is
//! held and then takes them together, so two requests can never each hold a stripe the other
//! waits for (no deadlock, whatever the order). Guards release on drop, and wake waiters only
//! when there are any (a condition variable's wake-up is a system call even with no waiter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use crate::geometry::StripeIdx;

/// Held stripes, and how many callers wait for some.
#[derive(Debug, Default)]
struct Held {
    stripes: rustc_hash::FxHashSet<u64>,
    waiters: usize,
}

/// Held stripes.
#[derive(Debug, Default)]
pub struct StripeLocks {
    held: Mutex<Held>,
    freed: Condvar,
    /// Wake-ups sent (for tests: an uncontended release sends none).
    wakeups: AtomicU64,
}

/// Holds a set of stripes until dropped.
#[derive(Debug)]
pub struct StripeGuard<'a> {
    locks: &'a StripeLocks,
    stripes: Vec<u64>,
}

impl StripeLocks {
    /// Locks every stripe in `stripes` (duplicates allowed), waiting while any is held.
    pub fn lock(&self, stripes: impl IntoIterator<Item = StripeIdx>) -> StripeGuard<'_> {
        let mut want: Vec<u64> = stripes.into_iter().map(|s| s.0).collect();
        want.sort_unstable();
        want.dedup();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while want.iter().any(|s| held.stripes.contains(s)) {
            held.waiters += 1;
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
            held.waiters -= 1;
        }
        held.stripes.extend(want.iter().copied());
        StripeGuard {
            locks: self,
            stripes: want,
        }
    }

    /// Takes every stripe of `want` (sorted, no duplicates) if none is held, without waiting:
    /// `false` (nothing taken) when one is. For a caller that cannot wait (a poller): it
    /// parks the request and tries again later; it releases with [`StripeLocks::unlock`].
    pub fn try_lock(&self, want: &[u64]) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if want.iter().any(|s| held.stripes.contains(s)) {
            return false;
        }
        held.stripes.extend(want.iter().copied());
        true
    }

    /// Releases stripes taken by [`StripeLocks::try_lock`] (or a guard's), waking waiters
    /// only when there are any.
    pub fn unlock(&self, stripes: &[u64]) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for s in stripes {
            held.stripes.remove(s);
        }
        // A waiter counts itself under the mutex before it sleeps, so none can be missed.
        let wake = held.waiters > 0;
        drop(held);
        if wake {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            self.freed.notify_all();
        }
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        self.locks.unlock(&self.stripes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn overlapping_lock_sets_exclude_each_other_without_deadlock() {
        let locks = Arc::new(StripeLocks::default());
        let inside = Arc::new([const { AtomicUsize::new(0) }; 8]);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let locks = locks.clone();
                let inside = inside.clone();
                std::thread::spawn(move || {
                    for i in 0..300u64 {
                        // Different orders and overlaps per thread.
                        let a = (i + t) % 8;
                        let b = (i * 3 + t * 5) % 8;
                        let _g = locks.lock([StripeIdx(b), StripeIdx(a)]);
                        for s in [a, b] {
                            let was = inside[s as usize].fetch_add(1, Ordering::SeqCst);
                            assert!(was == 0 || (a == b && was == 1));
                        }
                        for s in [a, b] {
                            inside[s as usize].fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let held = locks.held.lock().unwrap();
        assert!(held.stripes.is_empty() && held.waiters == 0);
    }

    #[test]
    fn try_lock_takes_all_or_nothing_and_never_waits() {
        let locks = StripeLocks::default();
        assert!(locks.try_lock(&[1, 4]));
        assert!(!locks.try_lock(&[2, 4]), "stripe 4 is held");
        assert!(locks.try_lock(&[2, 3]), "a refused try took nothing");
        let g = std::thread::scope(|s| s.spawn(|| locks.try_lock(&[1])).join().unwrap());
        assert!(!g);
        locks.unlock(&[1, 4]);
        assert!(locks.try_lock(&[1, 4]));
        locks.unlock(&[1, 2, 3, 4]);
        assert!(locks.held.lock().unwrap().stripes.is_empty());
        assert_eq!(locks.wakeups.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_release_wakes_only_when_someone_waits() {
        let locks = Arc::new(StripeLocks::default());
        for i in 0..100 {
            drop(locks.lock([StripeIdx(i % 7), StripeIdx(3)]));
        }
        assert_eq!(locks.wakeups.load(Ordering::Relaxed), 0);
        let g = locks.lock([StripeIdx(5)]);
        let l2 = locks.clone();
        let t = std::thread::spawn(move || drop(l2.lock([StripeIdx(5)])));
        while locks.held.lock().unwrap().waiters == 0 {
            std::thread::yield_now();
        }
        drop(g);
        t.join().unwrap();
        assert_eq!(locks.wakeups.load(Ordering::Relaxed), 1);
    }
}
