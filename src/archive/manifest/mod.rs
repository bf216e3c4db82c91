//! The manifest: an append-only log of checksummed records, the archive's only commit point.

pub mod frame;
pub mod log;
pub mod record;
pub mod state;

pub use record::{
    Barrier, BarrierStream, ColumnDecl, GroupEntry, Record, SegmentFile, Snapshot, Span,
    StreamDecl, StreamSnapshot,
};
pub use state::{GroupRef, State, StreamState, TrackState};
