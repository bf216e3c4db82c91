//! The manifest: an append-only log of checksummed records, the archive's only commit point.

pub mod columns;
pub mod frame;
pub mod log;
pub mod record;
pub mod state;

pub use record::{
    packed_format, Barrier, BarrierStream, ColumnDecl, Compact, GroupEntry, LevelFloor, LevelRun,
    Offload, Offloaded, RawFloor, Record, Retire, SegmentFile, Slice, Snapshot, Span, StreamDecl,
    StreamSnapshot, TrackRetire, TrackSnapshot, COLUMNAR_FORMAT, ROWS_FORMAT,
};
pub use state::{Catalog, FileFacts, GroupRef, Leftover, Scope, State, StreamState, TrackState};
