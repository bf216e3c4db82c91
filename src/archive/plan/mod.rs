//! Pure planners: state + declaration + now → a plan. No I/O and no clock: tests run days of
//! cadence in microseconds, and the executors in `engine/` only carry a plan out.
//!
//! - [`lifecycle`]: what retires and what compacts;
//! - [`retention`]: the declared lifetimes the lifecycle plans from;
//! - [`offload`]: which data files move to the cold tier;
//! - `recovery`: what an open does with the tail it replayed and the evidence past it;
//! - [`select`]: which row groups a read of a range touches;
//! - [`levels`]: which level answers a survey under a budget.

pub mod levels;
pub mod lifecycle;
pub mod offload;
pub(crate) mod recovery;
pub mod retention;
pub mod select;
