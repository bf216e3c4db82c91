//! Wall-clock time, injected so tests can run days of cadence in seconds.

use std::fmt;

/// A source of wall-clock time, injected so tests can run days of cadence in seconds.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// A clock that always answers the same instant (tests, golden files).
#[derive(Clone, Copy, Debug)]
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now_ns(&self) -> u64 {
        self.0
    }
}
