//! The manifest's generation files: read one whole to replay it, append records to the
//! current one, write a new one from a snapshot.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::log::{
    generation_name, replay_scoped, try_encode, Replayed, SliceReader,
};
use crate::archive::format::manifest::Scope;
use crate::archive::format::manifest::{Record, State};
use crate::archive::io::durable;
use crate::archive::io::faults::FaultPoint;
use crate::archive::io::storage::{Disk, WriteFile};
use std::path::{Path, PathBuf};

/// Replays the generation file at `path` (`manifest/gen-….log` under an archive's root): the
/// slices of a file recorded by its row groups (format version 11) are read from the local
/// files under that root.
pub fn replay(path: &Path, generation: u64) -> Result<Replayed> {
    let root = path
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| Path::new("."));
    let disk: crate::archive::io::storage::Disk =
        std::sync::Arc::new(crate::archive::io::storage::LocalDisk);
    let store = crate::archive::io::store::Store::new(
        root,
        disk,
        None,
        crate::archive::io::store::RequestLog::new(),
    );
    replay_within(
        path,
        generation,
        None,
        &crate::archive::io::rows::RowsIn::new(&store),
    )
}

/// Replays the generation file at `path`, cataloging only the tracks within `scope`.
pub fn replay_within(
    path: &Path,
    generation: u64,
    scope: Option<Scope>,
    rows: &dyn SliceReader,
) -> Result<Replayed> {
    let bytes = std::fs::read(path).map_err(ArchiveError::io("read manifest", path))?;
    replay_scoped(path, &bytes, generation, scope, rows)
}

/// A record framed for the log; a record that cannot be written (it names a file a scoped
/// replay decoded) is an error, and nothing is written.
fn framed(record: &Record) -> Result<Vec<u8>> {
    try_encode(record)
        .map_err(|e| ArchiveError::Internal(format!("a manifest record cannot be written: {e}")))
}

/// The open, appendable current generation.
pub struct LogWriter {
    file: Box<dyn WriteFile>,
    disk: Disk,
    path: PathBuf,
    len: u64,
    /// Bytes of the generation's first record, its snapshot of the state it started from.
    snapshot: u64,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl LogWriter {
    /// Opens an existing generation whose trusted prefix is all of it (`len` bytes, the first
    /// `snapshot` of them its snapshot record).
    pub fn append_to(disk: &Disk, path: &Path, len: u64, snapshot: u64) -> Result<LogWriter> {
        let file = disk
            .append(path)
            .map_err(ArchiveError::io("open manifest", path))?;
        Ok(LogWriter {
            file,
            disk: disk.clone(),
            path: path.to_path_buf(),
            len,
            snapshot,
        })
    }

    /// Writes a new generation holding `state` as its snapshot: written under `tmp`, synced,
    /// renamed into `manifest_dir`, the directory synced.
    pub fn create(
        tmp: &Path,
        manifest_dir: &Path,
        generation: u64,
        state: &State,
        disk: &Disk,
    ) -> Result<LogWriter> {
        let name = generation_name(generation);
        let staged = tmp.join(&name);
        let framed = framed(&Record::Snapshot(state.snapshot(generation)))?;
        durable::write_synced(disk, &staged, &framed)?;
        durable::sync_dir(disk, tmp)?;
        disk.reached(FaultPoint::AfterSnapshotWrite);
        let path = manifest_dir.join(&name);
        durable::rename(disk, &staged, &path)?;
        durable::sync_dir(disk, manifest_dir)?;
        disk.reached(FaultPoint::AfterSnapshotRename);
        Self::append_to(disk, &path, framed.len() as u64, framed.len() as u64)
    }

    /// Appends one record and syncs it. The record is written in two parts so a fault
    /// injected between them leaves a real torn record.
    pub fn append(&mut self, record: &Record) -> Result<()> {
        let framed = framed(record)?;
        let half = framed.len() / 2;
        self.file
            .write_all(&framed[..half])
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        self.disk.reached(FaultPoint::MidRecord);
        self.file
            .write_all(&framed[half..])
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        self.file
            .sync()
            .map_err(ArchiveError::io("sync manifest", &self.path))?;
        self.len += framed.len() as u64;
        Ok(())
    }

    /// The generation file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the generation.
    pub fn bytes(&self) -> u64 {
        self.len
    }

    /// Bytes of the generation's snapshot record (its first).
    pub fn snapshot_bytes(&self) -> u64 {
        self.snapshot
    }
}
