//! Why an import was refused or stopped.

use crate::archive::{ArchiveError, Ladder, ReadError};
use arrow::error::ArrowError;
use std::path::{Path, PathBuf};

/// Why an import was refused or stopped. Each says what and where; the message says whether
/// anything was imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The database path names no file.
    #[error("{}: no such file", .0.display())]
    NoDatabase(PathBuf),
    /// Refused before anything was written: the database (or the archive beside it) holds
    /// something the import cannot take.
    #[error("{}: {what}; nothing was imported", database.display())]
    Refused {
        /// The database.
        database: PathBuf,
        /// What was found, and where.
        what: String,
    },
    /// Stopped under way: what is durable stays, and a run again resumes after it.
    #[error("{}: {what}; the import stopped after its last durable barrier (run it again to resume)", database.display())]
    Stopped {
        /// The database.
        database: PathBuf,
        /// What was found, and where.
        what: String,
    },
    /// The ladder asked for is not the one the archive records for the stream.
    #[error("stream {stream} is recorded with ladder {recorded:?}; --ladder asked for {asked:?} (a stream's ladder cannot change)")]
    Ladder {
        /// The stream.
        stream: &'static str,
        /// The ladder the manifest records for it.
        recorded: Option<Ladder>,
        /// The ladder asked for.
        asked: Ladder,
    },
    /// The archive refused (opening, staging, sealing).
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// A read of what an earlier run recorded (the ledger stream) was refused.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A batch could not be built.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// The ledger stream `eventd_imports` lacks its `max_sample_id` column.
    #[error("the ledger has no max_sample_id column")]
    Ledger,
    /// The thread reading the database panicked.
    #[error("the database reader panicked")]
    Panicked,
    /// The staging side stopped taking batches (its own error is the one answered).
    #[error("the import stopped")]
    Hangup,
}

/// Stops an import already under way, naming the database: what is durable stays, and a run
/// again resumes after it.
pub(super) fn stopped(db: &Path, what: impl std::fmt::Display) -> ImportError {
    ImportError::Stopped {
        database: db.to_path_buf(),
        what: what.to_string(),
    }
}

/// Refuses naming the database, saying nothing was imported.
pub(super) fn refuse(db: &Path, what: impl std::fmt::Display) -> ImportError {
    ImportError::Refused {
        database: db.to_path_buf(),
        what: what.to_string(),
    }
}
