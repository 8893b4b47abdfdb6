//! Units shared by the algorithms, the pacer and the simulator.
//!
//! Time is integer nanoseconds ([`Nanos`]) on one monotonic clock that the runtime owns; rates are
//! bits per second ([`Rate`]). Both are newtypes so that a rate is never added to a time.

use std::fmt;
use std::ops::{Add, Sub};

/// A point in time or a duration in nanoseconds, on the runtime's monotonic clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable time; used as "never".
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// From microseconds (saturating).
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }

    /// From milliseconds (saturating).
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }

    /// From a floating-point number of microseconds (negative and NaN become zero).
    pub fn from_us_f64(us: f64) -> Nanos {
        Nanos::from_secs_f64(us * 1e-6)
    }

    /// From a floating-point number of seconds (negative and NaN become zero, saturating).
    pub fn from_secs_f64(s: f64) -> Nanos {
        let ns = s * 1e9;
        if ns.is_nan() || ns <= 0.0 {
            Nanos::ZERO
        } else if ns >= u64::MAX as f64 {
            Nanos::MAX
        } else {
            Nanos(ns.round() as u64)
        }
    }

    /// As microseconds.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// As seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self − other`, or zero when `other` is later.
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    /// Saturating: a duration is never negative.
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} us", self.as_us_f64())
    }
}

/// A rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// From gigabits per second.
    pub fn from_gbps(g: f64) -> Rate {
        Rate::from_bps_f64(g * 1e9)
    }

    /// From megabits per second.
    pub fn from_mbps(m: f64) -> Rate {
        Rate::from_bps_f64(m * 1e6)
    }

    /// From a floating-point number of bits per second (negative and NaN become zero).
    pub fn from_bps_f64(bps: f64) -> Rate {
        if bps.is_nan() || bps <= 0.0 {
            Rate(0)
        } else if bps >= u64::MAX as f64 {
            Rate(u64::MAX)
        } else {
            Rate(bps.round() as u64)
        }
    }

    /// As bits per second.
    pub fn bps(self) -> f64 {
        self.0 as f64
    }

    /// As gigabits per second.
    pub fn gbps(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time to serialise `bytes` at this rate (zero rate: [`Nanos::MAX`]).
    pub fn time_for(self, bytes: u64) -> Nanos {
        if self.0 == 0 {
            return Nanos::MAX;
        }
        Nanos::from_secs_f64(bytes as f64 * 8.0 / self.0 as f64)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} Gb/s", self.gbps())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        assert_eq!(Nanos::from_us(3), Nanos(3_000));
        assert_eq!(Nanos::from_us_f64(1.5), Nanos(1_500));
        assert_eq!(Nanos::from_secs_f64(-1.0), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(f64::NAN), Nanos::ZERO);
        assert_eq!(Nanos(5) - Nanos(9), Nanos::ZERO);
        assert_eq!(Rate::from_gbps(100.0), Rate(100_000_000_000));
        // 4160 bytes at 100 Gb/s = 332.8 ns
        assert_eq!(Rate::from_gbps(100.0).time_for(4160), Nanos(333));
        assert_eq!(Rate(0).time_for(1), Nanos::MAX);
    }
}
