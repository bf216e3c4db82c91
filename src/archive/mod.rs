//! The Parquet series adapter: the product.
//!
//! The folders are the layers, and imports only point down (`scripts/layers.py` checks it):
//!
//! ```text
//! engine/   the executors around `Archive`, one file per verb: open and recovery, seal,
//!           read, survey, lifecycle, offload, repair and restore, the Delta logs, describe
//!   │       (the only folder whose files may name each other both ways: they add methods
//!   │        to one struct)
//!   ├──► config.rs   what an archive is assembled with (streams, lifetimes, faults, tiers)
//!   ├──► plan/       pure: state + declaration + now → a plan (lifecycle, retention,
//!   │                offload, which row groups a read touches, which level answers a survey)
//!   ├──► io/         the only code that names `std::fs` or `object_store`: durable writes,
//!   │                the lock, the manifest's files, ranged reads, the footer cache,
//!   │                cold tiers, fault points
//!   └──► format/     pure bytes ⇄ types: manifest frames, records and state; data and
//!                    level file encoding and digests; declarations and schemas
//!        error.rs    every error the archive answers, by kind
//!        layout.rs   every on-disk name, once
//! ```
//!
//! ```text
//! deliver ──► stage (memory, per stream × track, publish order, _seq assigned)
//! seal    ──► encode Parquet ─► fsync ─► rename ─► fsync dir ─► ONE manifest record ─► fsync
//! open    ──► replay trusted prefix ─► quarantine leftovers ─► repair ─► claim
//! rows    ──► catalog key-range scan ─► row groups ─► verify digests ─► decode ─► merge by _seq
//! ```
//!
//! The paths below this module's name (`archive::manifest`, `archive::lifecycle`, …) are the
//! public ones; they are re-exported from where the code lives.

pub mod clock;
pub mod config;
pub(crate) mod engine;
pub mod error;
pub(crate) mod format;
pub(crate) mod io;
pub mod layout;
pub(crate) mod plan;

pub use clock::{Clock, FixedClock, SystemClock};
pub use config::Config;
pub use engine::{
    beyond, delta, reader, replicate, restore, Archive, BarrierReport, DeltaDescription,
    Description, Evidence, Floors, Folded, LostRecord, QuarantinedFile, Recovery, RepairPlan,
    Replication, SealedStream, StreamDescription, Survey, TrackDescription, Validator,
};
pub use error::{
    ArchiveError, ColdError, Invalid, ReadError, Result, StoredError, StoredErrorKind,
};
pub use format::ladder::Ladder;
pub use format::physical::{first_unstorable, first_unstorable_anywhere, MAX_STORED};
pub use format::segment::digest;
pub use format::spec::{StreamSpec, MAX_STREAM_ID, POSITION_COLUMN, SEQ_COLUMN};
pub use format::{levels, spec};
pub use io::faults::{FaultPoint, Faults, Op};
pub use io::storage::{Crashing, Disk, Failing, LocalDisk, ReadFile, Storage, WriteFile};
pub use io::store::{RequestLog, TierRequests};
pub use io::{cold, faults};
pub use layout::data_file_name;
pub use plan::levels::{Piece, Plan};

/// Retention, whole-track retirement, compaction, checkpoints and offload: the planners
/// (`plan`) and the executors, under one public name.
pub mod lifecycle {
    pub use super::engine::lifecycle::*;
    pub use super::engine::offload::OffloadReport;
    pub use super::plan::lifecycle as plan;
    pub use super::plan::lifecycle::{
        holds_retired, plan_compaction, plan_retirement, plan_track_retirement, CompactPlan,
        PlannedFile, PlannedSegment, Rewrite, Split,
    };
    pub use super::plan::offload::{plan_offload, OffloadPolicy};
    pub use super::plan::retention::{parse_duration, parse_size, Compaction, Lifetime, Retention};
}

/// The manifest: an append-only log of checksummed records, the archive's only commit point
/// (the records and state are `format`'s; reading and appending the files is `io`'s).
pub mod manifest {
    pub use super::format::manifest::*;

    /// Log generations: replay the trusted prefix, append records, start a new generation.
    pub mod log {
        pub use crate::archive::format::manifest::log::*;
        pub use crate::archive::io::log::{replay, LogWriter};
    }
}
