//! Positions: the coordinate that orders, resumes and accounts for gaps.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A stream position: the delivery coordinate a row was published at.
///
/// Positions are monotone non-decreasing in publish order within a stream and are **not**
/// unique per row: several rows may share one. They are never an axis (a domain coordinate)
/// and nothing orders by anything but a position and, within one, publish order.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Position(pub u64);

impl Position {
    /// The origin: nothing is durable, nothing has been delivered.
    pub const ORIGIN: Position = Position(0);

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<u64> for Position {
    fn from(value: u64) -> Self {
        Position(value)
    }
}

/// A row placed at the position it was published at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At<T> {
    /// Where the row was published.
    pub position: Position,
    /// The row itself.
    pub row: T,
}

impl<T> At<T> {
    /// Places `row` at `position`.
    pub fn new(position: Position, row: T) -> Self {
        At { position, row }
    }

    /// Maps the row, keeping its position.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> At<U> {
        At {
            position: self.position,
            row: f(self.row),
        }
    }
}
