//! A clock a test (or the soak example) moves by hand: days of cadence in seconds.
#![allow(dead_code)]

use series_archive::archive::Clock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A clock moved by hand.
#[derive(Debug, Default)]
pub struct Hand(AtomicU64);

impl Clock for Hand {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl Hand {
    /// A clock standing at `ns`.
    pub fn at(ns: u64) -> Arc<Hand> {
        Arc::new(Hand(AtomicU64::new(ns)))
    }

    /// Moves it to `ns`.
    pub fn set(&self, ns: u64) {
        self.0.store(ns, Ordering::SeqCst);
    }
}
