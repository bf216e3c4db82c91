//! Refusals: which wall a read beneath the window hit, and the caller's next move.

use super::Position;
use std::fmt;

/// Why a read beneath the window was not answered. Each variant is a different next move.
///
/// | Variant | Meaning | The caller's move |
/// |---|---|---|
/// | `Unserved` | No series adapter is attached | Attach one at assembly |
/// | `Floor { floor, axis }` | Nothing is retained beneath `floor` (on the axis: `axis`) | Narrow the range |
/// | `Unreadable(_)` | The adapter could not read what it holds | Report, retry |
///
/// A refusal is never an I/O error in disguise and never a short answer: an adapter that does
/// not hold the whole range reports its floor, one that cannot read what it holds says so.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BeneathWindow {
    /// No series adapter is attached; the window is the whole served history.
    #[error("unserved: no series adapter is attached to this stream; attach one at assembly")]
    Unserved,
    /// Nothing is retained beneath `floor`.
    #[error(
        "floor: nothing is retained beneath {floor}{}; narrow the range to start above the floor",
        axis.map(|a| format!(" (axis {a})")).unwrap_or_default()
    )]
    Floor {
        /// The lowest coordinate still answered whole.
        floor: Position,
        /// For an axis read (buckets, a statistic), the same floor on the axis: where the
        /// caller narrows an axis range to. `None` for a read of positions.
        axis: Option<u64>,
    },
    /// The adapter holds the range but could not read it.
    #[error("unreadable: {0}; report it and retry")]
    Unreadable(Unreadable),
}

impl BeneathWindow {
    /// The refusal's kind as one lowercase word: `unserved`, `floor` or `unreadable`.
    pub fn kind(&self) -> &'static str {
        match self {
            BeneathWindow::Unserved => "unserved",
            BeneathWindow::Floor { .. } => "floor",
            BeneathWindow::Unreadable(_) => "unreadable",
        }
    }

    /// Builds an `Unreadable` refusal from a description of what could not be read.
    pub fn unreadable(what: impl Into<String>) -> Self {
        BeneathWindow::Unreadable(Unreadable::new(what))
    }
}

/// What an adapter could not read, described for the operator who will be told about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    what: String,
    transient: bool,
}

impl Unreadable {
    /// Describes what could not be read (a file, a row group, a digest that did not match).
    /// Nothing suggests that trying again will help.
    pub fn new(what: impl Into<String>) -> Self {
        Unreadable {
            what: what.into(),
            transient: false,
        }
    }

    /// A failure that may pass (a timeout, a throttled or reset request to a cold tier):
    /// the same read, tried again later, may answer.
    pub fn transient(what: impl Into<String>) -> Self {
        Unreadable {
            what: what.into(),
            transient: true,
        }
    }

    /// Whether trying again later may help.
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The description.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_tell_the_next_move() {
        assert!(BeneathWindow::Unserved.to_string().contains("attach one"));
        let floor = BeneathWindow::Floor {
            floor: Position(42),
            axis: None,
        };
        assert!(floor.to_string().contains("42"));
        let on_axis = BeneathWindow::Floor {
            floor: Position(42),
            axis: Some(4096),
        };
        assert!(on_axis.to_string().contains("(axis 4096)"));
        assert!(floor.to_string().contains("narrow the range"));
        let bad = BeneathWindow::unreadable("rows/000001.parquet row group 3: digest mismatch");
        assert!(bad.to_string().contains("digest mismatch"));
        assert!(bad.to_string().contains("report it and retry"));
        assert_eq!(bad.kind(), "unreadable");
    }
}
