//! # series-archive
//!
//! Durable, queryable history beneath a stream runtime's in-memory window.
#![warn(missing_docs)]

extern crate self as series_archive;

pub mod contract;

pub use contract::*;
pub use series_archive_macros::stream;
pub mod archive;

pub use archive::{Archive, ArchiveError, Config, ReadError, StreamSpec};
