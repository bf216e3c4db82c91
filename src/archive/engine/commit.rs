//! The commit point: the manifest log, the state its records prove, the file-name counter,
//! and whether this handle may still write. Every claim the archive makes changes here and
//! only here:
//!
//! - [`CommitPoint::commit`] appends one record, syncs it, then applies it;
//! - [`CommitPoint::reserve`] hands out file names no record or file has used;
//! - [`CommitPoint::checkpoint`] starts a new generation holding a snapshot of the state;
//! - [`CommitPoint::poison`] is the one place a failed write stops further writes until a
//!   reopen lets recovery decide what is durable (a failed fsync is never retried).
//!
//! Recovery builds it ([`CommitPoint::recovered`]); barriers, retirements, compactions and
//! offloads go through it. Nothing else writes a record.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{Record, State};
use crate::archive::io::faults::FaultPoint;
use crate::archive::io::log::LogWriter;
use crate::archive::io::storage::Disk;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The archive's single commit point; see the module documentation.
#[derive(Debug)]
pub(crate) struct CommitPoint {
    state: State,
    /// `None` for a read-only open.
    log: Option<LogWriter>,
    /// The lowest name above every name reserved, recorded, live or kept as evidence.
    next_name: u64,
    /// Why this handle refuses further writes, once a write failed.
    poisoned: Option<String>,
    /// The highest generation the archive ever held (live or evidence).
    highest_generation: u64,
    /// Records this handle committed that can leave the live state smaller (retirements,
    /// compactions, offloads): what the checkpoint rule asks before it measures the state.
    replacing: u64,
    disk: Disk,
    root: PathBuf,
}

impl CommitPoint {
    /// What recovery proved: the replayed state, the log to append to (`None` read-only),
    /// the name floor and the highest generation ever held.
    pub fn recovered(
        root: &Path,
        disk: Disk,
        state: State,
        log: Option<LogWriter>,
        next_name: u64,
        highest_generation: u64,
    ) -> CommitPoint {
        CommitPoint {
            state,
            log,
            next_name,
            poisoned: None,
            highest_generation,
            replacing: 0,
            disk,
            root: root.to_path_buf(),
        }
    }

    /// The durable state: what the records committed so far prove.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The state, to change outside a record: only a read-only open of a replica does, to
    /// read the files it names from the bucket ([`crate::archive::replicate::open_url`]).
    pub(crate) fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    /// Refuses when this handle cannot write a record: poisoned by an earlier failure, or
    /// opened read-only (`what` names the operation for the message).
    pub fn writable(&self, what: &'static str) -> Result<()> {
        if let Some(reason) = &self.poisoned {
            return Err(ArchiveError::Poisoned(reason.clone()));
        }
        if self.log.is_none() {
            return Err(ArchiveError::ReadOnly(what));
        }
        Ok(())
    }

    /// Why this handle refuses writes, once poisoned.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// The one place a handle is poisoned: after a write, sync, rename or delete failed (or
    /// a job writing files did), no further barrier or record is attempted until a reopen.
    /// The first failure is the reason kept; answers the error.
    pub fn poison(&mut self, e: ArchiveError) -> ArchiveError {
        if self.poisoned.is_none() {
            tracing::error!(error = %e, archive = %self.root.display(), "the archive refuses further writes until it is reopened");
            self.poisoned = Some(e.to_string());
        }
        e
    }

    /// Appends and syncs one record, then applies it: the only way a claim changes. A
    /// failed append poisons. The name counter moves past any name the record carries.
    pub fn commit(&mut self, record: Record) -> Result<()> {
        self.writable("recording")?;
        let touched: Vec<&str> = match &record {
            Record::Barrier(b) => b.streams.iter().map(|s| s.stream.as_str()).collect(),
            Record::Compact(c) => vec![c.stream.as_str()],
            Record::Retire(r) => vec![r.stream.as_str()],
            Record::Offload(o) => vec![o.stream.as_str()],
            Record::Declare(_) | Record::Snapshot(_) => Vec::new(),
        };
        for id in touched {
            self.state_known(id)?;
        }
        let Some(log) = self.log.as_mut() else {
            return Err(ArchiveError::ReadOnly("recording"));
        };
        if let Err(e) = log.append(&record) {
            return Err(self.poison(e));
        }
        self.disk.reached(FaultPoint::AfterRecord);
        let path = log.path().to_path_buf();
        if matches!(
            record,
            Record::Retire(_) | Record::Compact(_) | Record::Offload(_)
        ) {
            self.replacing += 1;
        }
        // The record moves into the state: a barrier of 100,000 tracks is not copied again.
        self.state
            .apply_owned(record)
            .map_err(|message| ArchiveError::CorruptManifest {
                path,
                offset: 0,
                message: format!("a record this process wrote breaks an invariant: {message}"),
            })?;
        self.next_name = self.next_name.max(self.state.next_name);
        Ok(())
    }

    /// Refuses a change to stream `id` while a row group of it could not be read when the
    /// archive was opened (format version 11): its catalog lacks that row group's tracks, so
    /// a barrier could not check where they stand, and a compaction, retirement or offload
    /// would leave their rows out. (A snapshot writes such a file as its record gave it.)
    pub fn state_known(&self, id: &str) -> Result<()> {
        let Some(stream) = self.state.streams.get(id) else {
            return Ok(());
        };
        match stream.unreadable().first() {
            Some((file, unread)) => Err(ArchiveError::Unreadable {
                stream: id.to_owned(),
                message: format!(
                    "row group {} of {} could not be read when the archive was opened ({}), so the stream's tracks there are unknown and nothing of the stream is changed (other streams are written as usual; `series-archive verify` names every damaged file; put the file back, from a replica or a backup, and open again)",
                    unread.group, file.path, unread.why
                ),
                kind: unread.kind,
            }),
            None => Ok(()),
        }
    }

    /// The next name a file would get, without reserving it.
    pub fn next_name(&self) -> u64 {
        self.next_name
    }

    /// Reserves `n` names for files about to be written: never handed out again by this
    /// handle, and above every name a reopen could find (the record that commits the files
    /// carries the counter past them).
    pub fn reserve(&mut self, n: u64) -> Range<u64> {
        let first = self.next_name;
        self.next_name += n;
        first..self.next_name
    }

    /// Starts a new manifest generation holding a snapshot of the live state (renamed into
    /// place and synced before it counts). Answers the new generation and the file of the
    /// one it replaces, which the caller deletes. A failure poisons.
    pub fn checkpoint(
        &mut self,
        tmp: &Path,
        manifest_dir: &Path,
    ) -> Result<(u64, Option<PathBuf>)> {
        self.writable("checkpoint")?;
        let old = self.log.as_ref().map(|l| l.path().to_path_buf());
        let generation = self.state.generation.max(self.highest_generation) + 1;
        let mut next = self.state.clone();
        next.next_name = next.next_name.max(self.next_name);
        next.generation = generation;
        next.obsolete.clear();
        let log = match LogWriter::create(tmp, manifest_dir, generation, &next, &self.disk) {
            Ok(log) => log,
            Err(e) => return Err(self.poison(e)),
        };
        self.log = Some(log);
        self.state = next;
        self.highest_generation = generation;
        Ok((generation, old))
    }

    /// The current generation file's size in bytes (0 read-only).
    pub fn manifest_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, LogWriter::bytes)
    }

    /// How many records this handle committed that can leave the live state smaller than the
    /// records that built it (retirements, compactions, offloads).
    pub fn replacing(&self) -> u64 {
        self.replacing
    }

    /// The bytes of the current generation's snapshot record (0 read-only).
    pub fn snapshot_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, LogWriter::snapshot_bytes)
    }
}
