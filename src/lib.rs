//! # series-archive
//!
//! Durable, queryable history beneath a stream runtime's in-memory window.
//!
//! A stream runtime keeps each stream's recent rows in a bounded window. This crate is the
//! tier beneath it: it is handed every delivered row, **stages** it in memory (no file is
//! touched on the delivery path), makes it durable at an explicit barrier
//! ([`Archive::seal_all`], or [`Series::seal`] through the contract), and serves it back
//! through one contract ([`Series`]): raw rows, display buckets under a point budget, and
//! statistics. Every refusal is honest: [`BeneathWindow::Unserved`],
//! [`BeneathWindow::Floor`] or [`BeneathWindow::Unreadable`] — never a short answer.
//!
//! ## The model in ten lines
//!
//! - [`contract`] is the port, with no I/O: [`Position`], [`Bucket`] (true M4 plus
//!   `count/sum/sum_sq`, merged associatively), the [`Aggregate`] vocabulary (106 names),
//!   [`BeneathWindow`], the track traits ([`Tracked`], [`Axial`], [`Prefix`], [`Label`]) and
//!   the track key, and the [`Series`] / [`StreamConsumer`] traits.
//! - [`archive`] is the adapter: per barrier and stream one plain Parquet file (zstd), its
//!   row groups packing tracks in track-key order, columns = the row's own + `_position` +
//!   `_seq`; and the stream's M4 levels beside it.
//! - The **manifest** (an append-only log of checksummed records) is the only commit point.
//!   A barrier is durable when its one record is synced; every claim (watermark, file set,
//!   next `_seq`, next name) is derived from records only.
//! - Recovery keeps evidence: a torn tail, `.tmp/` leftovers and unrecorded files are moved
//!   to `.quarantine/`, never deleted; damage in the middle of the log refuses a writable open.
//! - Every row group and footer carries a CRC-32C bound to its file and group, verified on
//!   every read: a flipped byte answers `Unreadable`, never wrong rows.
//! - The files stay plain Parquet: DuckDB, Polars or pyarrow read them without this crate
//!   (`docs/format.md` says how to find exactly the committed ones).
//! - The [`archive::lifecycle`] retires raw rows and each level on declared lifetimes
//!   (floors derived from `retire` records only, moving only forward), retires tracks whole,
//!   compacts small data files into packed files sized by bytes and level partials into whole cells (one
//!   record swaps them), summarises deferred levels, and checkpoints the manifest; its planners are pure functions of
//!   state, declaration and a time passed in.
//! - [`host`] is the runtime side: [`host::Streams`] keeps a bounded window per stream and a
//!   supervisor thread that exclusively owns the adapter (a bounded lane of reads with
//!   single-use replies, an unbounded feed of published rows, a sealing cadence), and
//!   splices every read from the window and the tier beneath; the typed verbs
//!   `query(..).track(..).as_of(..)`, `survey(..).budget(n)` / `.fold(kind)`, `seal()`.
//!
//! ## Where the code is
//!
//! The folders are the architecture, and imports only point down (`scripts/layers.py`
//! checks it): [`contract`] has no I/O; [`archive`] is the adapter, in layers — `layout`
//! (every on-disk name) and `error` (every error, by kind) at the bottom, then `format` (pure
//! bytes ⇄ types), beside each other `io` (the only code touching a file system or an object
//! store, through one trait, [`archive::Storage`]) and `plan` (pure planners), then `config`,
//! and `engine` ([`Archive`] and one file per verb) on top; [`host`] is the runtime's side
//! and depends on the contract only. A change to what is stored goes in `format` (with
//! `docs/format.md` and a golden test), to how bytes reach a disk in `io`, to a decision in
//! `plan`, to a verb in `engine`.
//!
//! ## Features
//!
//! Without default features the crate is the archive, the contract and the host. Each
//! feature adds a part with a stack of its own:
//!
//! - `serve`: `series_archive::serve`, the HTTP API and the history page (axum, hyper).
//! - `eventd`: `series_archive::eventd`, the eventd metric store importer (SQLite).
//! - `cli` (the default): the `series-archive` command line (clap, progress bars, plots),
//!   with `serve` and `eventd`.
//!
//! ## Example
//!
//! ```
//! use series_archive::archive::{Archive, Config};
//! use series_archive::{At, Position, Stream};
//! use serde::{Deserialize, Serialize};
//! use std::ops::Bound;
//! use std::sync::Arc;
//!
//! #[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
//! #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
//! pub struct Capture {
//!     pub run: String,
//!     pub probe: String,
//!     pub ordinal: u64,
//!     pub value: i64,
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let mut archive = Archive::open(dir.path(), Config::new().select::<Capture>()?)?;
//! let rows: Vec<At<series_archive::ErasedRow>> = (0..6u64)
//!     .map(|i| {
//!         let row = Capture { run: "run_7".into(), probe: format!("p{}", i % 2), ordinal: i, value: i as i64 * 10 };
//!         At::new(Position(i + 1), Arc::new(row) as series_archive::ErasedRow)
//!     })
//!     .collect();
//! let definition = Capture::definition();
//! archive.deliver_run(series_archive::Run { stream: &definition, rows: &rows })?; // memory only
//! let barrier = archive.seal_all()?.expect("rows were staged");                   // durable
//! assert_eq!(barrier.streams[0].watermark, Position(6));
//!
//! // One partition, typed rows back at their positions, in publish order.
//! let p1 = archive.typed_rows("capture", &["run_7".into(), "p1".into()], Bound::Unbounded, Bound::Unbounded)?;
//! let ordinals: Vec<u64> = p1.iter().map(|at| at.row.downcast_ref::<Capture>().unwrap().ordinal).collect();
//! assert_eq!(ordinals, [1, 3, 5]);
//! # Ok(()) }
//! ```
//!
//! ## What it is not
//!
//! Not a database: no ad-hoc queries (open the Parquet in DuckDB for that), no general label
//! space (a track is a declared tuple at most four deep), no viewport-dependent reduction
//! such as LTTB (it cannot be merged, so it can never be a stored level).
#![warn(missing_docs)]

extern crate self as series_archive;

pub mod archive;
pub mod contract;
#[cfg(feature = "eventd")]
pub mod eventd;
pub mod host;
pub mod render;
#[cfg(feature = "serve")]
pub mod serve;

pub use archive::{Archive, ArchiveError, Config, ReadError, StreamSpec};
pub use contract::*;
pub use series_archive_macros::stream;
