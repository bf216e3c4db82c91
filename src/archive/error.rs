//! Errors of the archive: what went wrong, where, and what to do about it.
//!
//! Refusals of the serving contract ([`crate::BeneathWindow`]) are never mixed with these:
//! an `ArchiveError` is about opening, declaring, staging, sealing and the lifecycle
//! (retirement, compaction, offload, the cold tier).

use crate::contract::{BeneathWindow, Position};
use std::fmt;
use std::path::PathBuf;

/// Everything the archive can fail at, with the path or row it failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// An operating-system call failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// To which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the archive's write lock.
    #[error("archive {path} is held by another process (lock file {path}/LOCK); one writer at a time — close the other writer or open read-only")]
    Locked {
        /// The archive directory.
        path: PathBuf,
    },
    /// The manifest was written by a format this build does not know.
    #[error("manifest {path} at byte {offset} is format version {found}; this build reads versions 1 to {supported} only and will not migrate or modify it — use a build that knows version {found}")]
    UnknownVersion {
        /// The manifest generation file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// The version found.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// A record failed its check and valid records follow it: damage, not a torn tail.
    #[error("manifest {path} is damaged at byte {offset} and {following} valid record(s) follow it; truncating there would drop committed barriers, so this archive will not be opened for writing and reads refuse it — restore the manifest from a backup, or run `series-archive repair` to see what starting again from the trusted prefix would lose (it keeps the evidence)")]
    DamagedManifest {
        /// The manifest generation file.
        path: PathBuf,
        /// Where the failing record starts.
        offset: u64,
        /// How many valid records were found after it.
        following: usize,
    },
    /// No valid record follows the manifest's trusted prefix, but the archive holds evidence
    /// that records past it were acknowledged (or the failing bytes are not what an
    /// interrupted append leaves): damage, not a torn tail.
    #[error("manifest {path} is damaged at byte {offset}: {why}; dropping what follows would throw away acknowledged records, so this archive will not be opened for writing and reads refuse it — restore the manifest from a backup, or run `series-archive repair` to see what the evidence holds (it keeps the evidence)")]
    DamagedTail {
        /// The manifest generation file.
        path: PathBuf,
        /// Where the trusted prefix ends.
        offset: u64,
        /// What the evidence shows.
        why: String,
    },
    /// The manifest holds a record that passed its checksum but cannot be understood.
    #[error("manifest {path} at byte {offset}: {message}")]
    CorruptManifest {
        /// The manifest generation file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// What is wrong with it.
        message: String,
    },
    /// The directory holds data but no manifest names any of it.
    #[error("{path} holds stream data but no manifest; refusing to adopt files no record names (restore manifest/ or open an empty directory)")]
    NoManifest {
        /// The archive directory.
        path: PathBuf,
    },
    /// A stream declaration is invalid or differs from the recorded one.
    #[error("stream {stream:?}: {message}")]
    Declaration {
        /// The stream id.
        stream: String,
        /// What is wrong.
        message: String,
    },
    /// Rows handed to the archive are not acceptable; nothing of them was staged.
    #[error("stream {stream:?}, row {row}{column}: {message}", column = column.as_ref().map(|c| format!(", column {c:?}")).unwrap_or_default())]
    Input {
        /// The stream id.
        stream: String,
        /// Zero-based index of the offending row within the delivery.
        row: usize,
        /// The offending column, when one is to blame.
        column: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// No stream of that id was selected at assembly.
    #[error("no stream {0:?} is selected in this archive")]
    UnknownStream(String),
    /// An earlier write or sync failed; the archive refuses further barriers until reopened.
    #[error("an earlier write or sync failed ({0}); this archive refuses further barriers until it is reopened and recovery decides what is durable")]
    Poisoned(String),
    /// The archive was opened read-only.
    #[error("archive was opened read-only; {0} needs a writable open")]
    ReadOnly(&'static str),
    /// The open was scoped to some tracks ([`crate::archive::Config::scope`]).
    #[error("this open catalogs only the tracks of one selection (Config::scope); {0} needs an unscoped open")]
    Scoped(&'static str),
    /// A stored file the archive needed (a compaction's input, a file to offload) could not
    /// be read or failed its digest: the evidence is kept and nothing is recorded.
    #[error("stream {stream:?}: {message}")]
    Unreadable {
        /// The stream id.
        stream: String,
        /// What could not be read.
        message: String,
        /// Which wall the read hit ([`StoredErrorKind::Unavailable`]: trying again later may
        /// help).
        kind: StoredErrorKind,
    },
    /// The bucket replica refused or failed: another archive owns its prefix, this archive
    /// is fenced, the bucket did not answer, a restore target is not empty (see
    /// [`crate::archive::replicate`]). Nothing local was changed by the refusal.
    #[error("replica: {0}")]
    Replica(String),
    /// A bug or an exhausted resource inside the archive (a worker thread that panicked,
    /// reserved names that ran out): nothing is recorded; report it.
    #[error("internal: {0}")]
    Internal(String),
    /// A stream table's Delta log could not be read or written. The manifest, the commit
    /// point, is unaffected: the log is derived from it and the next writable open (or
    /// `series-archive publish`) brings it level.
    #[error("stream {stream:?}, Delta log of {table}/: {message}")]
    Delta {
        /// The stream.
        stream: String,
        /// `rows` or `levels`.
        table: &'static str,
        /// What failed.
        message: String,
    },
    /// The cold tier failed (listing or deleting objects at a writable open).
    #[error("cold tier: {0}")]
    Cold(String),
    /// Arrow or Parquet failed while encoding rows this process staged or a compaction
    /// merged (never a damaged input: that is [`ArchiveError::Unreadable`]).
    #[error("encoding stream {stream:?}: {message}")]
    Encode {
        /// The stream id.
        stream: String,
        /// The encoder's message.
        message: String,
    },
}

impl ArchiveError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> ArchiveError {
        let path = path.into();
        move |source| ArchiveError::Io {
            action,
            path,
            source,
        }
    }

    pub(crate) fn declaration(stream: &str, message: impl Into<String>) -> ArchiveError {
        ArchiveError::Declaration {
            stream: stream.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn input(
        stream: &str,
        row: usize,
        column: Option<&str>,
        message: impl Into<String>,
    ) -> ArchiveError {
        ArchiveError::Input {
            stream: stream.to_owned(),
            row,
            column: column.map(str::to_owned),
            message: message.into(),
        }
    }
}

/// Shorthand for archive results.
pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;

/// Why a read through the archive's own API was not answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A refusal of the serving contract decided by the archive (a raw floor).
    #[error(transparent)]
    Refused(#[from] BeneathWindow),
    /// Stored data could not be read; the kind says which wall it hit. The contract answers
    /// it as `Unreadable` (transient for [`StoredErrorKind::Unavailable`]), and the CLI
    /// exits 3 with its message.
    #[error("unreadable: {0}")]
    Stored(#[from] StoredError),
    /// The archive records no such stream.
    #[error("the archive records no stream {0:?}")]
    UnknownStream(String),
    /// The stream is recorded but this handle did not select it by its row type, so it
    /// cannot hand its rows back typed. The contract answers `Unserved`.
    #[error("stream {0:?} was not selected by row type in this archive's assembly")]
    NotSelected(String),
    /// The track selection cannot name anything stored.
    #[error("bad track selection: {0}")]
    BadSelection(String),
    /// The stream has no axis, or no levels, so it cannot be surveyed or folded.
    #[error("stream {stream:?} {why}")]
    NotSurveyable {
        /// The stream id.
        stream: String,
        /// Why not.
        why: String,
    },
    /// The range reaches beneath a floor: retired, on purpose. Answers the contract's
    /// `Floor { floor, axis }`, the axis being where to narrow to.
    #[error("floor: {tier} retains nothing beneath position {floor} (axis {axis}) for the selected tracks; narrow the range to start at axis {axis} or later")]
    Floor {
        /// Which tier refused (`raw`, or `levels`).
        tier: &'static str,
        /// The contract's floor: no row beneath this position is retained in that tier.
        floor: Position,
        /// The same floor on the axis (for axis reads).
        axis: u64,
    },
    /// The caller stopped wanting the answer (`Archive::fold_while`), and the read stopped
    /// with it. Never an answer: nothing partial is handed back.
    #[error("the read was abandoned: its caller no longer wanted the answer")]
    Abandoned,
    /// The budget buys no bucket.
    #[error("a budget of {budget} points buys no bucket: each of the {fields} measured field(s) needs 4 points per bucket, so the budget must be at least {needed}")]
    Budget {
        /// The budget asked for.
        budget: usize,
        /// Measured fields.
        fields: usize,
        /// The smallest budget that buys one bucket per field.
        needed: usize,
    },
}

/// Which wall a read of a stored file hit. The archive keeps the kind (a reader retries on
/// `Missing` once the manifest moved, an operator retries `Unavailable`, `verify` names
/// `Corrupt` files); the serving contract sees every kind as `Unreadable`, transient only
/// for `Unavailable`, and the conversion happens at the contract boundary alone
/// ([`StoredError`] into [`crate::contract::Unreadable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoredErrorKind {
    /// A file the manifest names is not there: deleted under a reader by a compaction or
    /// retirement it has not replayed, or lost.
    Missing,
    /// The operating system or the object store refused the read, and retrying will not help.
    Io,
    /// The bytes are not what the manifest records (length, digest, decoding), or the
    /// manifest itself is damaged past its trusted prefix.
    Corrupt,
    /// A cold tier timed out, throttled or reset: the same read, later, may answer.
    Unavailable,
    /// This handle cannot answer whole: an earlier barrier failed and the rows it was
    /// sealing are gone from it. Reopening serves what is durable.
    Poisoned,
    /// Verified data that could not be processed: a bug.
    Internal,
}

/// A read of stored data that failed, by kind, with what could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct StoredError {
    /// Which wall it hit.
    pub kind: StoredErrorKind,
    /// What could not be read, for the operator (a path or URL, the bytes, the reason).
    pub what: String,
}

impl StoredError {
    /// A failure of `kind`.
    pub fn new(kind: StoredErrorKind, what: impl Into<String>) -> StoredError {
        StoredError {
            kind,
            what: what.into(),
        }
    }

    /// Bytes that are not what the manifest records.
    pub fn corrupt(what: impl Into<String>) -> StoredError {
        StoredError::new(StoredErrorKind::Corrupt, what)
    }

    /// Verified data that could not be processed.
    pub fn internal(what: impl Into<String>) -> StoredError {
        StoredError::new(StoredErrorKind::Internal, what)
    }

    /// Whether the same read, later, may answer.
    pub fn is_transient(&self) -> bool {
        self.kind == StoredErrorKind::Unavailable
    }
}

impl From<StoredError> for crate::contract::Unreadable {
    fn from(e: StoredError) -> Self {
        if e.is_transient() {
            crate::contract::Unreadable::transient(e.what)
        } else {
            crate::contract::Unreadable::new(e.what)
        }
    }
}

impl From<StoredError> for crate::contract::BeneathWindow {
    fn from(e: StoredError) -> Self {
        crate::contract::BeneathWindow::Unreadable(e.into())
    }
}

/// Why a cold-tier request failed, and whether trying again may help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdError {
    /// What failed, with the object's URL.
    pub message: String,
    /// A timeout, a throttle, a reset connection or a server error: retry later. A missing
    /// object, a refused credential or a bad path is permanent.
    pub transient: bool,
    /// The object is not there (permanent; for a reader beside a writer, a sign that the
    /// manifest moved on).
    pub missing: bool,
}

impl fmt::Display for ColdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            self.message,
            if self.transient {
                "transient: retry later"
            } else {
                "permanent"
            }
        )
    }
}

impl std::error::Error for ColdError {}

/// What the pure layers (`format`, `plan`) answer when bytes or a declaration do not hold: a
/// record that breaks an invariant of the state, a column type this build does not know, a
/// file whose length or digests are not what its entry records. What, in words; the
/// executor that meets it adds where (the file, the offset, the stream) as it turns it into
/// an [`ArchiveError`] or a [`StoredError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(what: String) -> Invalid {
        Invalid(what)
    }
}

impl From<&str> for Invalid {
    fn from(what: &str) -> Invalid {
        Invalid(what.to_owned())
    }
}

/// An `Invalid` reads as its message (`err.contains("not live")`).
impl std::ops::Deref for Invalid {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<Invalid> for String {
    fn from(e: Invalid) -> String {
        e.0
    }
}
