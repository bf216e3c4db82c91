//! What an import tells whoever runs it.

use crate::archive::{Archive, BarrierReport};
use std::path::Path;

/// What an import tells whoever runs it, as it goes. Every method does nothing unless
/// implemented; `()` is a [`Progress`] that hears nothing. All are called on the thread that
/// called [`import`](super::import).
pub trait Progress {
    /// The checks began: every sample is read once before anything is written.
    fn checking(&mut self, _database: &Path) {}
    /// The checks ended, passed or not.
    fn checked(&mut self) {}
    /// The archive is open for writing: its [`Archive::recovery`] says what the open found
    /// and moved into quarantine.
    fn opened(&mut self, _archive: &Archive) {}
    /// A line for whoever runs the import: what the database holds, a warning, the totals.
    fn note(&mut self, _line: &str) {}
    /// The rows are imported from here: `rows` in all, `already` of which (at most `rows`)
    /// the archive holds.
    fn importing(&mut self, _rows: u64, _already: u64) {}
    /// `rows` more rows were staged.
    fn staged(&mut self, _rows: u64) {}
    /// A barrier became durable.
    fn sealed(&mut self, _barrier: &BarrierReport) {}
    /// Every row was staged and sealed; the closing notes follow.
    fn imported(&mut self) {}
}

impl Progress for () {}
