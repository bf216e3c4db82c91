//! The manifest's generation files: read one whole to replay it, append records to the
//! current one, write a new one from a snapshot.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::log::{encode, generation_name, replay_bytes, Replayed};
use crate::archive::format::manifest::{Record, State};
use crate::archive::io::durable;
use crate::archive::io::faults::{FaultPoint, Faults, Op};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Replays the generation file at `path`.
pub fn replay(path: &Path, generation: u64) -> Result<Replayed> {
    let bytes = std::fs::read(path).map_err(ArchiveError::io("read manifest", path))?;
    replay_bytes(path, &bytes, generation)
}

/// The open, appendable current generation.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    path: PathBuf,
    len: u64,
}

impl LogWriter {
    /// Opens an existing generation whose trusted prefix is all of it.
    pub fn append_to(path: &Path, len: u64) -> Result<LogWriter> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(ArchiveError::io("open manifest", path))?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// Writes a new generation holding `state` as its snapshot: written under `tmp`, synced,
    /// renamed into `manifest_dir`, the directory synced.
    pub fn create(
        tmp: &Path,
        manifest_dir: &Path,
        generation: u64,
        state: &State,
        faults: &Faults,
    ) -> Result<LogWriter> {
        let name = generation_name(generation);
        let staged = tmp.join(&name);
        let framed = encode(&Record::Snapshot(state.snapshot(generation)));
        durable::write_synced(faults, &staged, &framed)?;
        durable::sync_dir(faults, tmp)?;
        faults.hit(FaultPoint::AfterSnapshotWrite);
        let path = manifest_dir.join(&name);
        durable::rename(faults, &staged, &path)?;
        durable::sync_dir(faults, manifest_dir)?;
        faults.hit(FaultPoint::AfterSnapshotRename);
        Self::append_to(&path, framed.len() as u64)
    }

    /// Appends one record and syncs it. The record is written in two parts so a fault
    /// injected between them leaves a real torn record.
    pub fn append(&mut self, record: &Record, faults: &Faults) -> Result<()> {
        let framed = encode(record);
        let half = framed.len() / 2;
        faults
            .check(Op::Write, &self.path)
            .and_then(|()| self.file.write_all(&framed[..half]))
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        faults.hit(FaultPoint::MidRecord);
        faults
            .check(Op::Write, &self.path)
            .and_then(|()| self.file.write_all(&framed[half..]))
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        faults
            .check(Op::Sync, &self.path)
            .and_then(|()| self.file.sync_data())
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
}
