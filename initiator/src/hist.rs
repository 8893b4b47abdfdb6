//! A log-linear latency histogram (HdrHistogram's layout at 5 significant bits): values are
//! nanoseconds, each power of two is split into 32 linear sub-buckets, so any percentile is
//! within about 3 % of the true value, with fixed memory and O(1) recording.
//!
//! Invariants: `count` equals the sum of the buckets; `min ≤ every value ≤ max`; a percentile
//! never exceeds `max`.

const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Indices run to shift 59 (msb 63) × 16 + 31.
const BUCKETS: usize = (64 - SUB_BITS as usize + 2) * (SUB / 2);

/// Latency histogram in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

fn index(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - (SUB_BITS - 1);
    let sub = ((v >> shift) as usize & (SUB / 2 - 1)) | (SUB / 2);
    shift as usize * (SUB / 2) + sub
}

fn lower_bound(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let shift = (i / (SUB / 2)) as u32 - 1;
    let sub = (i % (SUB / 2) + SUB / 2) as u64;
    sub << shift
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
    /// Records one value.
    pub fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.count += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }
    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Mean (0 when empty).
    pub fn mean(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            (self.sum / u128::from(self.count)) as u64
        }
    }
    /// Smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }
    /// Largest value.
    pub fn max(&self) -> u64 {
        self.max
    }
    /// The value at percentile `p` (0–100): the upper edge of the bucket holding it, capped at
    /// the maximum (0 when empty).
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = if i + 1 < BUCKETS {
                    lower_bound(i + 1).saturating_sub(1)
                } else {
                    u64::MAX
                };
                return upper.min(self.max).max(lower_bound(i));
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_contain_their_values() {
        let mut prev = 0;
        for v in (0..100_000u64).chain([1 << 40, u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS);
            assert!(i >= prev, "monotonic at {v}");
            prev = i;
            assert!(
                lower_bound(i) <= v,
                "{v} in bucket {i} from {}",
                lower_bound(i)
            );
            if i + 1 < BUCKETS {
                assert!(v < lower_bound(i + 1), "{v} below next bucket");
            }
        }
    }

    #[test]
    fn percentiles_within_three_percent() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        assert_eq!(h.count(), 100_000);
        assert_eq!(h.min(), 10);
        assert_eq!(h.max(), 1_000_000);
        for (p, want) in [(50.0, 500_000f64), (99.0, 990_000.0), (99.9, 999_000.0)] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.035, "p{p}: {got} vs {want}");
        }
        assert_eq!(h.percentile(100.0), 1_000_000);
        let mut other = Histogram::new();
        other.record(5);
        h.merge(&other);
        assert_eq!(h.min(), 5);
        assert_eq!(h.count(), 100_001);
        assert_eq!(Histogram::new().percentile(50.0), 0);
    }
}
