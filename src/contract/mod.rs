//! The contract every series adapter answers. No I/O and no Parquet live here.

mod aggregate;
mod bucket;
pub mod json_float;
mod position;
mod refusal;
mod series;
mod track;

pub use aggregate::{Aggregate, Aggregated, Rank, UnknownAggregate};
pub use bucket::{Bucket, Placed};
pub use position::{At, Position};
pub use refusal::{BeneathWindow, Unreadable};
pub use series::{
    Application, Asked, Cursor, Definition, ErasedRow, Run, Series, Stream, StreamConsumer,
};
pub use track::{
    check_label, Axial, BadLabel, BadTrack, Label, Labels, Prefix, TrackKey, TrackTuple, Tracked,
    MAX_DEPTH, UNIT_SEPARATOR,
};
