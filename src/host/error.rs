//! What the runtime answers when a publish, a read or a stop fails.

use crate::contract::BeneathWindow;

/// Why a row was not published.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The stream was not declared at boot: the stream table is frozen there, and a window
    /// made up on the spot would stand on origin over history it knows nothing of.
    #[error("stream {0:?} was not declared at boot; declare it in the assembly")]
    Undeclared(&'static str),
}

/// Why a read through the runtime was not answered: a wall beneath the window, or a read
/// that is itself wrong. The two are kept apart because their next moves differ: a refusal
/// says attach, narrow, or report and retry; an invalid read will never be answered as it
/// stands, so retrying it would loop forever.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadFailure {
    /// A wall beneath the window: `Unserved`, `Floor { floor, axis }` or `Unreadable`.
    #[error(transparent)]
    Refused(#[from] BeneathWindow),
    /// The read itself is wrong (a label with a control character, a budget that buys no
    /// bucket, a survey of a stream kept without levels): fix it. The types already rule out
    /// a selection of the wrong depth or component type.
    #[error("invalid read: {0}")]
    Invalid(String),
}

/// Why `stop` could not close the last barrier.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StopError {
    /// The adapter's `flush` failed: what was staged is not durable.
    #[error("the last barrier failed: {0}")]
    Flush(String),
    /// The supervisor was already gone (stopped before, or it panicked): nothing staged
    /// since it went was made durable.
    #[error("the supervisor is gone; nothing staged since could be made durable")]
    Gone,
}
