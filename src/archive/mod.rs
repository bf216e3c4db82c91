//! The Parquet series adapter: the product.
//!
//! ```text
//! deliver ──► stage (memory, per stream × track, publish order, _seq assigned)
//! seal    ──► encode Parquet ─► fsync ─► rename ─► fsync dir ─► ONE manifest record ─► fsync
//! open    ──► replay trusted prefix ─► quarantine leftovers ─► repair ─► claim
//! rows    ──► catalog key-range scan ─► row groups ─► verify digests ─► decode ─► merge by _seq
//! ```

pub mod beyond;
pub mod clock;
pub mod cold;
mod commit;
pub mod config;
pub mod delta;
mod describe;
mod durable;
pub mod error;
pub mod faults;
pub mod levels;
pub mod lifecycle;
pub mod manifest;
pub(crate) mod read;
pub mod reader;
mod repair;
pub mod restore;
mod segment;
mod series;
pub mod spec;
mod stage;
mod store;
pub use store::{requests_of_closed_handles, StoredError, StoredErrorKind, TierRequests};
mod survey;

pub use clock::{Clock, FixedClock, SystemClock};
pub use config::Config;
pub use describe::{
    DeltaDescription, Description, QuarantinedFile, StreamDescription, TrackDescription,
};
pub use error::{ArchiveError, Result};
pub use faults::{FaultPoint, Faults, Op};
pub use levels::{Ladder, Plan};
pub use repair::{Evidence, LostRecord, RepairPlan};
pub use segment::{data_file_name, digest};
pub use spec::{StreamSpec, MAX_STREAM_ID, POSITION_COLUMN, SEQ_COLUMN};
pub use survey::{Floors, Folded, Survey};

use crate::contract::{BeneathWindow, Position, TrackKey};
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use commit::CommitPoint;
use manifest::log::{self, LogWriter, Tail};
use manifest::{Barrier, BarrierStream, Record, SegmentFile, State, StreamDecl, StreamState};
use serde::Serialize;
use stage::Staged;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

pub(crate) const MANIFEST_DIR: &str = "manifest";
/// How many times a read-only open replays again when it found evidence past the trusted
/// prefix and the manifest moved meanwhile (a writer committing beside it).
const READ_ONLY_ATTEMPTS: usize = 8;
/// A barrier of at least this many rows encodes its data file and its level partials on two
/// threads; a smaller one is not worth the thread.
const PARALLEL_SEAL_ROWS: usize = 16 * 1024;
pub(crate) const STREAMS_DIR: &str = "streams";
pub(crate) const TMP_DIR: &str = ".tmp";
pub(crate) const QUARANTINE_DIR: &str = ".quarantine";
const LOCK_FILE: &str = "LOCK";
/// The token that claims a cold tier's prefix: kept at the root, and as an object at the
/// prefix (see `docs/format.md`, "Who owns a cold prefix").
pub(crate) const OWNER_FILE: &str = "OWNER";

/// A stream selected at assembly, resolved against what the manifest records.
#[derive(Debug)]
struct Selected {
    spec: StreamSpec,
    full_schema: SchemaRef,
}

/// What open found and did to recover.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recovery {
    /// Files moved into quarantine by this open, relative to the archive root.
    pub quarantined: Vec<String>,
    /// The byte offset at which the manifest's torn tail started, if it had one.
    pub torn_tail_at: Option<u64>,
    /// A damaged (not torn) manifest: a read-only open holds the trusted prefix for
    /// `inspect` and refuses every read (`Unreadable`), since valid records follow the damage.
    pub damaged_at: Option<u64>,
    /// The damaged generation file, relative to the root, when `damaged_at` is set.
    pub damaged_path: Option<String>,
    /// What shows the manifest damaged, in words, when `damaged_at` is set.
    pub damage: Option<String>,
    /// The evidence of acknowledged records past the trusted prefix, when the tail alone
    /// looked torn or clean (see `docs/format.md`, "Replay").
    pub beyond: Option<beyond::Beyond>,
    /// The generation started by the repair, if one was.
    pub repaired_generation: Option<u64>,
    /// Barriers the repair restored from their files (see `restore.rs`), as
    /// `(barrier, files)`.
    pub restored: Vec<(u64, Vec<String>)>,
    /// Objects under the cold tier that no record named (an upload cut off before its
    /// record), removed by this open.
    pub cold_orphans_removed: Vec<String>,
    /// Delta logs this open brought level with the manifest (a crash came between a record
    /// and its Delta commit), as `<stream>/<rows|levels>@<version>`.
    pub delta_leveled: Vec<String>,
    /// Delta logs this open could not read and wrote anew from the manifest (the old ones
    /// kept as evidence), as `<stream>/<rows|levels>`.
    pub delta_rebuilt: Vec<String>,
    /// Delta logs this open could not bring level, with why: reads through them are behind
    /// the manifest (`files` refuses them) until the next commit or `publish` succeeds.
    pub delta_behind: Vec<String>,
    /// Data files still holding retired row groups (a crash came between a retirement and
    /// its rewrite) that this open rewrote without them.
    pub retired_rewritten: usize,
}

impl Recovery {
    /// Where the manifest is damaged mid-log, unless this open repaired it: while this is
    /// `Some`, every read refuses and `verify` reports the manifest.
    pub fn unrepaired_damage(&self) -> Option<u64> {
        self.damaged_at
            .filter(|_| self.repaired_generation.is_none())
    }
}

/// What one barrier made durable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BarrierReport {
    /// The barrier's number.
    pub barrier: u64,
    /// Per stream written: the position it is durable through and the rows written.
    pub streams: Vec<SealedStream>,
}

/// One stream's part of a barrier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealedStream {
    /// The stream id.
    pub stream: String,
    /// The position through which it is durable.
    pub watermark: Position,
    /// Rows the barrier wrote for it.
    pub rows: u64,
    /// Tracks it wrote.
    pub tracks: usize,
    /// The file, relative to the root.
    pub file: String,
}

/// A Parquet archive of stream history in one directory.
///
/// One process writes (the `LOCK` file is held while open for writing); any number may
/// open it read-only. See the crate docs for the model and `docs/format.md` for the bytes.
pub struct Archive {
    root: PathBuf,
    config: Config,
    /// The manifest log, the state it proves, the name counter, the poisoned flag.
    commit: CommitPoint,
    _lock: Option<File>,
    selected: BTreeMap<String, Selected>,
    staged: BTreeMap<String, Staged>,
    cursor: Position,
    recovery: Recovery,
    /// Decoded level row groups, bounded: surveys and folds read only the groups they need.
    /// Shared with a later open of the same archive by [`Archive::share_level_cache`].
    level_cache: Arc<std::sync::Mutex<levels::LevelCache>>,
    /// The generation this open replayed and the length of its trusted prefix.
    replayed: Option<(u64, u64)>,
    /// Where stored files are read from: the root, or a cold tier.
    store: Arc<store::Store>,
    /// Keeps the streams' Delta logs level with the manifest (writable, unless turned off).
    delta: Option<delta::Publisher>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("root", &self.root)
            .field("generation", &self.commit.state().generation)
            .finish_non_exhaustive()
    }
}

/// `stream` as selected at assembly, with its durable state; borrowing the two fields only,
/// so a caller may hold the staged map mutably beside them.
fn selected_in<'a>(
    selected: &'a BTreeMap<String, Selected>,
    state: &'a State,
    stream: &str,
) -> Result<(&'a Selected, &'a StreamState)> {
    let unknown = || ArchiveError::UnknownStream(stream.to_owned());
    let chosen = selected.get(stream).ok_or_else(unknown)?;
    let durable = state.streams.get(stream).ok_or_else(unknown)?;
    Ok((chosen, durable))
}

fn numbered(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    segment::parse_data_file_name(name)
}

fn generation_of(path: &Path) -> Option<u64> {
    log::parse_generation(path.file_name()?.to_str()?)
}

pub(crate) fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Rebuilds the stored Arrow schema (row columns + `_position` + `_seq`) from a declaration.
pub(crate) fn stored_schema(decl: &StreamDecl) -> std::result::Result<SchemaRef, String> {
    let mut fields = Vec::with_capacity(decl.columns.len() + 2);
    for c in &decl.columns {
        let t = DataType::from_str(&c.data_type)
            .map_err(|e| format!("column {:?}: unknown type {:?}: {e}", c.name, c.data_type))?;
        fields.push(Field::new(&c.name, t, c.nullable));
    }
    fields.push(Field::new(POSITION_COLUMN, DataType::UInt64, false));
    fields.push(Field::new(SEQ_COLUMN, DataType::UInt64, false));
    Ok(Arc::new(Schema::new(fields)))
}

impl Archive {
    /// Opens (creating when absent) the archive at `root` with `config`.
    ///
    /// A writable open takes the lock, replays the manifest's trusted prefix, moves every
    /// leftover (a torn tail, `.tmp/` files, files no record names) into `.quarantine/`,
    /// repairs with a fresh generation if the tail was torn, records new stream declarations,
    /// and only then claims anything. A declaration that differs from the recorded one is an
    /// error; nothing is modified by a failed open beyond quarantining evidence.
    pub fn open(root: impl AsRef<Path>, config: Config) -> Result<Archive> {
        let root = root.as_ref().to_path_buf();
        let read_only = config.read_only;
        let lock = if read_only {
            if !root.join(MANIFEST_DIR).is_dir() {
                return Err(ArchiveError::io("open archive", root.join(MANIFEST_DIR))(
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no manifest directory: not an archive",
                    ),
                ));
            }
            None
        } else {
            durable::create_dir(&config.faults, &root)?;
            let path = root.join(LOCK_FILE);
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(ArchiveError::io("open lock file", &path))?;
            // A lock is held by an open file description, which a child process forked by
            // any thread of this process shares until it execs: an archive just closed can
            // look locked for that instant. A writer that really holds it holds it far longer
            // than the quarter second given here.
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
            loop {
                match file.try_lock() {
                    Ok(()) => break,
                    Err(std::fs::TryLockError::WouldBlock)
                        if std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    Err(std::fs::TryLockError::WouldBlock) => {
                        return Err(ArchiveError::Locked { path: root.clone() })
                    }
                    Err(std::fs::TryLockError::Error(e)) => {
                        return Err(ArchiveError::io("lock", &path)(e))
                    }
                }
            }
            for dir in [MANIFEST_DIR, STREAMS_DIR, TMP_DIR, QUARANTINE_DIR] {
                durable::create_dir(&config.faults, &root.join(dir))?;
            }
            Some(file)
        };
        let store = Arc::new(store::Store::new(
            &root,
            config.faults.clone(),
            config.cold.clone(),
        ));
        let commit =
            CommitPoint::recovered(&root, config.faults.clone(), State::default(), None, 1, 0);
        let level_cache = Arc::new(std::sync::Mutex::new(levels::LevelCache::new(
            config.level_cache_cells,
        )));
        let mut archive = Archive {
            root,
            config,
            commit,
            _lock: lock,
            selected: BTreeMap::new(),
            staged: BTreeMap::new(),
            cursor: Position::ORIGIN,
            recovery: Recovery::default(),
            level_cache,
            replayed: None,
            store,
            delta: None,
        };
        archive.recover()?;
        archive.declare()?;
        archive.check_retention()?;
        // Last: a declaration or a lifetime refused above leaves the cold tier untouched.
        if !archive.config.read_only {
            archive.recovery.cold_orphans_removed = archive.sweep_cold_orphans()?;
            if archive.config.delta {
                archive.delta = Some(delta::Publisher::new(
                    &archive.root,
                    archive.config.faults.clone(),
                )?);
                archive.level_delta_logs()?;
            }
        }
        Ok(archive)
    }

    fn recover(&mut self) -> Result<()> {
        let (state, log, highest) = self.replay_and_heal()?;
        let evidence = durable::walk_files(&self.root.join(QUARANTINE_DIR))?;
        let next_name = self.name_floor(&state, &evidence)?;
        self.commit = CommitPoint::recovered(
            &self.root,
            self.config.faults.clone(),
            state,
            log,
            next_name,
            highest,
        );
        Ok(())
    }

    /// Replays the current generation's trusted prefix and (writable) moves every leftover
    /// into quarantine, starting a new generation after a torn tail. Answers the state, the
    /// log to append to, and the highest generation ever held.
    fn replay_and_heal(&mut self) -> Result<(State, Option<LogWriter>, u64)> {
        let manifest_dir = self.root.join(MANIFEST_DIR);
        let quarantine_root = self.root.join(QUARANTINE_DIR);
        let read_only = self.config.read_only;
        // Heal before claim: whatever a crash left in `.tmp/` (a data file, or a generation
        // that never claimed its name) is evidence, moved aside before anything is decided.
        let mut moved = Vec::new();
        let quarantine = self.quarantine_dir()?;
        if !read_only {
            for path in durable::walk_files(&self.root.join(TMP_DIR))? {
                moved.push(self.keep_as_evidence(&quarantine, &path)?);
            }
        }
        // A read-only open beside a writer can list the directory after the writer committed
        // past what it replayed: evidence counts only when the manifest did not move meanwhile.
        let mut attempt = 0;
        let (generations, highest_generation_ever, current, current_path, replayed, beyond) = loop {
            attempt += 1;
            let generations: Vec<(u64, PathBuf)> = durable::list_files(&manifest_dir)?
                .into_iter()
                .filter_map(|p| generation_of(&p).map(|g| (g, p)))
                .collect();
            let evidence = durable::walk_files(&quarantine_root)?;
            let highest_generation_ever = generations
                .iter()
                .map(|(g, _)| *g)
                .chain(evidence.iter().filter_map(|p| generation_of(p)))
                .max()
                .unwrap_or(0);
            let Some((current, current_path)) = generations.last().cloned() else {
                let data = durable::walk_files(&self.root.join(STREAMS_DIR))?;
                if !data.is_empty() {
                    return Err(ArchiveError::NoManifest {
                        path: self.root.clone(),
                    });
                }
                let mut state = State::default();
                let mut log = None;
                if !read_only {
                    let generation = highest_generation_ever + 1;
                    state.generation = generation;
                    state.next_name = 1;
                    log = Some(LogWriter::create(
                        &self.root.join(TMP_DIR),
                        &manifest_dir,
                        generation,
                        &state,
                        &self.config.faults,
                    )?);
                }
                self.recovery.quarantined = moved.iter().map(|p| relative(&self.root, p)).collect();
                return Ok((state, log, highest_generation_ever));
            };
            let replayed = log::replay(&current_path, current)?;
            // Read for every tail: past damage it is what `repair` shows.
            let beyond = beyond::beyond(&self.root, &replayed.state, current, &evidence)?;
            let moved_on = || {
                let newest = durable::list_files(&manifest_dir)
                    .ok()
                    .and_then(|files| files.iter().filter_map(|p| generation_of(p)).max());
                newest != Some(current)
                    || std::fs::metadata(&current_path)
                        .map_or(true, |m| m.len() != replayed.file_len)
            };
            let mut beyond = beyond;
            if beyond.is_some() && read_only && moved_on() {
                if attempt < READ_ONLY_ATTEMPTS {
                    continue;
                }
                // A writer kept committing through every attempt: the files past this
                // replay are its new barriers. A live writer holds an archive whose open
                // refused damage, so the evidence is not evidence of loss.
                tracing::debug!(
                    attempt,
                    "the manifest kept moving; evidence past the prefix is a live writer's"
                );
                beyond = None;
            }
            break (
                generations,
                highest_generation_ever,
                current,
                current_path,
                replayed,
                beyond,
            );
        };
        let mut state = replayed.state;
        self.replayed = Some((current, replayed.trusted_len));
        // The damage, if any: where the trusted prefix ends, why, and how many valid records
        // follow.
        let shown = beyond.as_ref().map(|b| b.why.join("; "));
        self.recovery.beyond = beyond;
        let damage = match (&replayed.tail, shown) {
            (Tail::Damaged { offset, following }, _) => Some((
                *offset,
                format!("a record fails its check and {following} valid record(s) follow it"),
                Some(*following),
            )),
            (Tail::Broken { offset, why }, _) => Some((*offset, why.clone(), None)),
            (tail, Some(why)) => Some((tail.offset().unwrap_or(replayed.trusted_len), why, None)),
            (Tail::Torn { offset }, None) => {
                self.recovery.torn_tail_at = Some(*offset);
                None
            }
            (_, None) => None,
        };
        if let Some((offset, why, following)) = damage {
            if !read_only && self.config.repair {
                // `repair`: the damaged tail is handled as a torn one — a new generation from
                // the trusted prefix, the damaged generation kept whole as evidence.
                tracing::warn!(manifest = %current_path.display(), offset, "repair: starting a new generation from the trusted prefix");
                self.recovery.torn_tail_at = Some(offset);
                // The lost barriers whose files prove themselves come back; the rest stays
                // evidence.
                let (restored, stopped) =
                    restore::restorable(&self.root, &state, self.config.compaction.group_rows)?;
                for barrier in restored {
                    state
                        .apply(&Record::Barrier(barrier.record.clone()))
                        .map_err(|e| {
                            ArchiveError::Internal(format!(
                                "a restored barrier does not apply: {e}"
                            ))
                        })?;
                    self.recovery
                        .restored
                        .push((barrier.record.barrier, barrier.files));
                }
                for why in stopped {
                    tracing::warn!(%why, "repair: not restored");
                }
            } else if !read_only {
                return Err(match following {
                    Some(following) => ArchiveError::DamagedManifest {
                        path: current_path,
                        offset,
                        following,
                    },
                    None => ArchiveError::DamagedTail {
                        path: current_path,
                        offset,
                        why,
                    },
                });
            }
            self.recovery.damaged_at = Some(offset);
            self.recovery.damaged_path = Some(relative(&self.root, &current_path));
            self.recovery.damage = Some(why);
        }
        if read_only {
            return Ok((state, None, highest_generation_ever));
        }
        // Every other leftover becomes evidence, then repair, then claim.
        {
            let leftover = state.leftovers();
            for path in durable::walk_files(&self.root.join(STREAMS_DIR))? {
                match leftover(&relative(&self.root, &path)) {
                    manifest::Leftover::Live => {}
                    manifest::Leftover::Gone => durable::remove(&self.config.faults, &path)?,
                    manifest::Leftover::Evidence => {
                        moved.push(self.keep_as_evidence(&quarantine, &path)?)
                    }
                }
            }
        }
        for (_, path) in &generations[..generations.len() - 1] {
            moved.push(self.keep_as_evidence(&quarantine, path)?);
        }
        let log = if self.recovery.torn_tail_at.is_some() {
            let generation = highest_generation_ever + 1;
            let log = LogWriter::create(
                &self.root.join(TMP_DIR),
                &manifest_dir,
                generation,
                &state,
                &self.config.faults,
            )?;
            state.generation = generation;
            self.recovery.repaired_generation = Some(generation);
            moved.push(self.keep_as_evidence(&quarantine, &current_path)?);
            log
        } else {
            LogWriter::append_to(&current_path, replayed.trusted_len)?
        };
        self.recovery.quarantined = moved.iter().map(|p| relative(&self.root, p)).collect();
        if !moved.is_empty() {
            tracing::warn!(archive = %self.root.display(), files = moved.len(), "recovery moved leftovers into quarantine");
        }
        Ok((state, Some(log), highest_generation_ever))
    }

    /// Moves `path` into this open's evidence directory, keeping its relative path.
    fn keep_as_evidence(&self, quarantine: &Path, path: &Path) -> Result<PathBuf> {
        durable::quarantine(&self.config.faults, &self.root, quarantine, path)
    }

    /// A fresh directory under `.quarantine/` for this open's evidence.
    fn quarantine_dir(&self) -> Result<PathBuf> {
        let base = self.root.join(QUARANTINE_DIR);
        let stamp = self.config.clock.now_ns();
        let mut n = 0u32;
        loop {
            let dir = base.join(format!("open-{stamp}-{n}"));
            if !dir.exists() {
                return Ok(dir);
            }
            n += 1;
        }
    }

    /// The lowest name above every name the archive ever held: recorded, live, or evidence.
    fn name_floor(&self, state: &State, evidence: &[PathBuf]) -> Result<u64> {
        let live = durable::walk_files(&self.root.join(STREAMS_DIR))?;
        let tmp = durable::walk_files(&self.root.join(TMP_DIR))?;
        let seen = live
            .iter()
            .chain(&tmp)
            .chain(evidence)
            .filter_map(|p| numbered(p))
            .max();
        Ok(state.next_name.max(seen.map_or(1, |n| n + 1)))
    }

    fn declare(&mut self) -> Result<()> {
        let specs = self.config.streams.clone();
        for spec in specs {
            let decl = spec.decl()?;
            match self.commit.state().streams.get(&decl.id) {
                Some(existing) if existing.decl != decl => {
                    return Err(ArchiveError::declaration(
                        &decl.id,
                        describe_drift(&existing.decl, &decl),
                    ));
                }
                Some(_) => {}
                None if self.config.read_only => {}
                None => {
                    let record = Record::Declare(decl.clone());
                    self.commit(&record)?;
                }
            }
            if self.selected.contains_key(&decl.id) {
                return Err(ArchiveError::declaration(
                    &decl.id,
                    "selected twice at assembly",
                ));
            }
            let full_schema =
                stored_schema(&decl).map_err(|m| ArchiveError::declaration(&decl.id, m))?;
            self.selected
                .insert(decl.id.clone(), Selected { spec, full_schema });
        }
        Ok(())
    }

    /// Poisons this handle (see [`CommitPoint::poison`], the one place it happens).
    pub(crate) fn poison(&mut self, e: ArchiveError) -> ArchiveError {
        self.commit.poison(e)
    }

    /// Appends and syncs one record, then applies it (see [`CommitPoint::commit`]), then
    /// brings the Delta logs of the streams it changed level with it.
    fn commit(&mut self, record: &Record) -> Result<()> {
        self.commit.commit(record)?;
        let streams: Vec<String> = match record {
            Record::Barrier(b) => b.streams.iter().map(|s| s.stream.clone()).collect(),
            Record::Retire(r) => vec![r.stream.clone()],
            Record::Compact(c) => vec![c.stream.clone()],
            Record::Offload(o) => vec![o.stream.clone()],
            _ => Vec::new(),
        };
        for stream in streams {
            self.publish_after_commit(&stream);
        }
        Ok(())
    }

    /// Whether a writer has committed since this (read-only) open replayed the manifest: a
    /// new generation, or records appended past what was replayed. A reader refused as
    /// `Unreadable` because a file its snapshot named is gone (a compaction or retirement
    /// deleted it after its record) opens again and retries when this is true; see
    /// `docs/format.md`, "Readers beside a writer".
    pub fn manifest_moved(&self) -> bool {
        let Some((generation, len)) = self.replayed else {
            return false;
        };
        let dir = self.root.join(MANIFEST_DIR);
        let newest = durable::list_files(&dir).ok().and_then(|files| {
            files
                .iter()
                .filter_map(|p| generation_of(p).map(|g| (g, p.clone())))
                .max_by_key(|(g, _)| *g)
        });
        match newest {
            Some((g, path)) if g == generation => {
                std::fs::metadata(&path).map_or(true, |m| m.len() > len)
            }
            _ => true,
        }
    }

    /// Keeps the decoded level row groups `earlier` (an open of the same archive) holds, and
    /// shares its cache from now on: a reader that reopens on every commit does not start
    /// cold. Sound because a file's name is never reused and a committed file never changes:
    /// a group decoded under a name is that group for good. Both must be opens of the same
    /// root.
    pub fn share_level_cache(&mut self, earlier: &Archive) {
        if earlier.root == self.root {
            self.level_cache = earlier.level_cache.clone();
        }
    }

    /// The archive's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What open found and did.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The durable state (recorded streams, files, catalog).
    pub fn state(&self) -> &State {
        self.commit.state()
    }

    /// Whether `stream` was selected at assembly (this handle writes and serves it).
    pub fn selects(&self, stream: &str) -> bool {
        self.selected.contains_key(stream)
    }

    /// A stream selected at assembly, with its durable state.
    fn selected_stream(&self, stream: &str) -> Result<(&Selected, &StreamState)> {
        selected_in(&self.selected, self.commit.state(), stream)
    }

    /// Stages a batch of rows (the stream's own columns, in declared order) published at
    /// `positions`. Touches no file. All or nothing: an invalid row stages none of them.
    pub fn stage_batch(
        &mut self,
        stream: &str,
        batch: &RecordBatch,
        positions: &[u64],
    ) -> Result<usize> {
        // Field by field, so the staged map can be borrowed mutably beside them.
        let (selected, durable) = selected_in(&self.selected, self.commit.state(), stream)?;
        let staged = self.staged.entry(stream.to_owned()).or_default();
        let n = stage::stage(
            &durable.decl,
            &selected.full_schema,
            durable,
            staged,
            batch,
            positions,
        )?;
        if let Some(&p) = positions.last() {
            self.cursor = self.cursor.max(Position(p));
        }
        Ok(n)
    }

    /// A dry run of staging for `stream`: checks deliveries exactly as [`Archive::stage_batch`]
    /// would (against what is durable and what the dry run has seen), keeping no rows. Used
    /// to refuse a bad input file before any of it is staged or sealed.
    pub fn validator(&self, stream: &str) -> Result<Validator> {
        let (selected, durable) = self.selected_stream(stream)?;
        Ok(Validator {
            full_schema: selected.full_schema.clone(),
            durable: durable.clone(),
            staged: Staged::default(),
        })
    }

    /// Rows staged and not yet sealed.
    pub fn staged_rows(&self) -> usize {
        self.staged.values().map(|s| s.rows).sum()
    }

    /// The position through which `stream` is durable (the last recorded barrier's).
    pub fn watermark(&self, stream: &str) -> Position {
        self.commit
            .state()
            .streams
            .get(stream)
            .map_or(Position::ORIGIN, |s| s.watermark)
    }

    /// One barrier for everything staged, across all streams: per stream one Parquet file,
    /// one row group per track in key order; each written under `.tmp/`, synced, renamed
    /// into place, the directory synced; then one manifest record, synced. With nothing
    /// staged it does no I/O and answers `None`.
    ///
    /// A failed write or sync poisons the archive: no retry, no further barrier until it is
    /// reopened and recovery decides what is durable.
    pub fn seal_all(&mut self) -> Result<Option<BarrierReport>> {
        self.commit.writable("seal")?;
        if self.staged.values().all(Staged::is_empty) {
            return Ok(None);
        }
        match self.write_barrier() {
            Ok(report) => Ok(Some(report)),
            Err(e) => {
                self.staged.clear();
                Err(self.poison(e))
            }
        }
    }

    fn write_barrier(&mut self) -> Result<BarrierReport> {
        let barrier_no = self.commit.state().barriers + 1;
        let sealed_at_ns = self.config.clock.now_ns();
        let tmp = self.root.join(TMP_DIR);
        let mut written: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut streams = Vec::new();
        let mut report = Vec::new();
        let mut next_name = self.commit.next_name();
        let staged = std::mem::take(&mut self.staged);
        for (id, mut staged) in staged {
            if staged.is_empty() {
                continue;
            }
            let selected = &self.selected[&id];
            let decl = &self.commit.state().streams[&id].decl;
            let (tracks, watermark, next_seq) =
                staged
                    .drain(&selected.full_schema)
                    .map_err(|e| ArchiveError::Encode {
                        stream: id.clone(),
                        message: e.to_string(),
                    })?;
            let mut place = |relative_dir: String, bytes: &[u8], name: u64| -> Result<String> {
                let file_name = data_file_name(name);
                let staged_path = tmp.join(&file_name);
                durable::write_synced(&self.config.faults, &staged_path, bytes)?;
                let dir = self.root.join(&relative_dir);
                durable::create_dir(&self.config.faults, &dir)?;
                written.push((staged_path, dir.join(&file_name)));
                Ok(format!("{relative_dir}/{file_name}"))
            };
            let segment_file =
                |name: u64, path: String, bytes: &[u8], footer, groups| SegmentFile {
                    name,
                    path,
                    bytes: bytes.len() as u64,
                    barrier: barrier_no,
                    sealed_at_ns,
                    footer,
                    groups,
                    cold: None,
                    run: None,
                };
            // The data file and the level partials these rows make (in the same commit) encode
            // at once, on two cores; the level file, when there is one, is named right after.
            let name = next_name;
            // Row groups of at most the configured rows: a track's rows of one barrier may
            // span several (the level partials are folded per track, whole).
            let cap = self.config.compaction.group_rows;
            let groups: Vec<segment::TrackRows> = tracks
                .iter()
                .flat_map(|t| segment::bounded(&t.labels, &t.batch, cap, decl.axis.as_deref()))
                .collect();
            let tracks_written = tracks.len();
            let data = || segment::encode(&id, &selected.full_schema, name, &groups);
            let partials = || levels::barrier_partials(decl, &tracks, name + 1);
            let rows: usize = tracks.iter().map(|t| t.batch.num_rows()).sum();
            let (data, partials) = if rows >= PARALLEL_SEAL_ROWS {
                std::thread::scope(|scope| {
                    let partials = scope.spawn(partials);
                    let data = data();
                    let partials = partials.join().unwrap_or_else(|_| {
                        Err(ArchiveError::Internal(format!(
                            "stream {id:?}: encoding the level partials panicked"
                        )))
                    });
                    (data, partials)
                })
            } else {
                (data(), partials())
            };
            let ((bytes, footer, groups), partials) = (data?, partials?);
            next_name += 1;
            let path = place(format!("{STREAMS_DIR}/{id}/rows"), &bytes, name)?;
            let rows: u64 = groups.iter().map(|g| g.rows).sum();
            report.push(SealedStream {
                stream: id.clone(),
                watermark: Position(watermark),
                rows,
                tracks: tracks_written,
                file: path.clone(),
            });
            let file = segment_file(name, path, &bytes, footer, groups);
            let mut level_file = None;
            if let Some((bytes, footer, groups)) = partials {
                let name = next_name;
                next_name += 1;
                let path = place(format!("{STREAMS_DIR}/{id}/levels"), &bytes, name)?;
                level_file = Some(segment_file(name, path, &bytes, footer, groups));
            }
            streams.push(BarrierStream {
                stream: id.clone(),
                watermark,
                next_seq,
                file,
                levels: level_file,
            });
        }
        // Each file is synced; `.tmp/`'s own entries need no sync (whatever a crash leaves
        // there is quarantined), only the directories the files are renamed into.
        self.config.faults.hit(FaultPoint::AfterDataWrite);
        let mut dirs = std::collections::BTreeSet::new();
        for (from, to) in &written {
            durable::rename(&self.config.faults, from, to)?;
            if let Some(parent) = to.parent() {
                dirs.insert(parent.to_path_buf());
            }
        }
        for dir in &dirs {
            durable::sync_dir(&self.config.faults, dir)?;
        }
        self.config.faults.hit(FaultPoint::AfterDataRename);
        let record = Record::Barrier(Barrier {
            barrier: barrier_no,
            sealed_at_ns,
            next_name,
            streams,
        });
        // The record carries the name counter past every name this barrier used.
        self.commit(&record)?;
        tracing::debug!(
            barrier = barrier_no,
            streams = report.len(),
            "barrier committed"
        );
        Ok(BarrierReport {
            barrier: barrier_no,
            streams: report,
        })
    }

    /// A clean stop: closes the last barrier.
    pub fn flush_all(&mut self) -> Result<Option<BarrierReport>> {
        self.seal_all()
    }

    /// Refuses every read of an archive whose manifest is damaged mid-log (a read-only open
    /// past the damage holds only the trusted prefix, which may be less than the archive
    /// holds: answering from it would be a quiet short answer).
    fn trusted(&self) -> std::result::Result<(), ReadError> {
        match self.recovery.unrepaired_damage() {
            None => Ok(()),
            Some(offset) => Err(StoredError::corrupt(format!(
                "the manifest is damaged at byte {offset} ({}), so the archive may hold more than its trusted prefix names; nothing is served from it (`series-archive repair` shows what the evidence holds and starts a new generation, keeping it)",
                self.recovery.damage.as_deref().unwrap_or("valid records follow the damage")
            ))
            .into()),
        }
    }

    fn recorded(&self, stream: &str) -> std::result::Result<(&StreamState, SchemaRef), ReadError> {
        self.trusted()?;
        let state = self
            .commit
            .state()
            .streams
            .get(stream)
            .ok_or_else(|| ReadError::UnknownStream(stream.to_owned()))?;
        let schema = match self.selected.get(stream) {
            Some(s) => s.full_schema.clone(),
            None => stored_schema(&state.decl).map_err(StoredError::corrupt)?,
        };
        Ok((state, schema))
    }

    /// Raw rows of `stream` beneath the selection `track` (labels, outermost first; empty
    /// selects every track) within the position range, in publish order, as one Arrow batch
    /// of the stream's columns followed by `_position` and `_seq`. Rows staged by this
    /// process and not yet sealed are part of the answer (after the sealed rows of their
    /// track, merged by publish order); surveys and folds answer from sealed rows only.
    pub fn read_rows(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> std::result::Result<RecordBatch, ReadError> {
        let (state, schema) = self.recorded(stream)?;
        if track.len() > state.decl.track.len() {
            return Err(ReadError::BadSelection(format!(
                "stream {stream:?} is tracked by {} component(s) ({}); {} label(s) were given",
                state.decl.track.len(),
                state.decl.track.join(", "),
                track.len()
            )));
        }
        let prefix = TrackKey::encode(track).map_err(|e| ReadError::BadSelection(e.to_string()))?;
        if let Some(reason) = self.commit.poisoned() {
            // A failed barrier discarded what was staged: the rows it held are neither
            // durable nor here, so an answer now could be short.
            return Err(StoredError::new(
                StoredErrorKind::Poisoned,
                format!(
                    "an earlier barrier failed ({reason}); the rows it was sealing are not served by this handle — reopen the archive to serve what is durable"
                ),
            )
            .into());
        }
        let tracks = read::select(state, &prefix);
        // Rows staged and not yet sealed are served too: a window that evicted them has
        // handed them to this tier, and leaving them out would be a quiet short answer.
        let staged: Vec<(&TrackKey, &[RecordBatch])> = self
            .staged
            .get(stream)
            .map(|s| {
                read::beneath(&s.tracks, &prefix)
                    .into_iter()
                    .map(|(k, t)| (k, t.batches.as_slice()))
                    .collect()
            })
            .unwrap_or_default();
        read::rows(&self.store, state, &schema, &tracks, &staged, start, end)
    }

    /// The committed data files of `stream`: exactly what the manifest holds, no more and no
    /// less. A local file as its path under the root, a cold one as its object URL.
    pub fn files(&self, stream: &str) -> std::result::Result<Vec<String>, ReadError> {
        let (state, _) = self.recorded(stream)?;
        Ok(state.files.iter().map(|f| self.location(f)).collect())
    }

    /// The committed level files of `stream`, as [`Archive::files`] names them, in the order
    /// their cells merge (publish order). With `level`, only the files holding that level:
    /// every barrier's partials and the level tables of that level.
    pub fn level_files(
        &self,
        stream: &str,
        level: Option<usize>,
    ) -> std::result::Result<Vec<String>, ReadError> {
        let (state, _) = self.recorded(stream)?;
        let Some(k) = level else {
            return Ok(state.levels.iter().map(|f| self.location(f)).collect());
        };
        let levels = state.decl.ladder.map_or(0, |l| l.levels as usize);
        if k >= levels {
            return Err(ReadError::BadSelection(format!(
                "stream {stream:?} has {levels} level(s) (0 to {}); there is no level {k}",
                levels.saturating_sub(1)
            )));
        }
        Ok(state
            .levels
            .iter()
            .filter(|f| f.run.and_then(|r| r.level).is_none_or(|l| l as usize == k))
            .map(|f| self.location(f))
            .collect())
    }

    /// Where a committed file lives: its local path, or its object URL.
    fn location(&self, file: &SegmentFile) -> String {
        match &file.cold {
            Some(url) => url.clone(),
            None => self.root.join(&file.path).display().to_string(),
        }
    }

    /// The requests this handle made so far, per tier: the local directory (reads), then
    /// each cold tier it wrote to or read from (reads, writes, deletes, lists).
    pub fn requests(&self) -> Vec<TierRequests> {
        self.store.requests()
    }

    /// The configured cold tier's request counters `(puts, gets, deletes, lists)`, when one
    /// is configured.
    pub fn cold_requests(&self) -> Option<[u64; 4]> {
        self.store.configured().map(|t| t.requests().snapshot())
    }

    /// Verifies every digest of every committed file; `progress(done, total)` after each
    /// file. Answers what is damaged (empty when everything verifies), and, each beginning
    /// [`cold::UNVERIFIED`], the cold files whose tier did not answer (`cold::verify_file`).
    pub fn verify(&self, mut progress: impl FnMut(usize, usize)) -> Vec<String> {
        let files: Vec<&SegmentFile> = self.commit.state().live_files().collect();
        let mut damaged = Vec::new();
        if let Some(offset) = self.recovery.unrepaired_damage() {
            damaged.push(format!(
                "manifest {}: damaged at byte {offset}: {} (what follows is not served; see `series-archive repair`)",
                self.recovery.damaged_path.as_deref().unwrap_or("(current generation)"),
                self.recovery.damage.as_deref().unwrap_or("a record fails its check and valid records follow it")
            ));
        }
        let mut reach = cold::Reach::default();
        for (i, file) in files.iter().enumerate() {
            // `verify` reads every byte again: no cached footer stands in for the file's.
            self.store.forget(file.name);
            let check = cold::verify_file(&self.store, file, &mut reach);
            if let Err(e) = check {
                damaged.push(e.what);
            }
            progress(i + 1, files.len());
        }
        damaged
    }

    /// Files under `.quarantine/`, relative to the root, with their sizes.
    pub fn quarantine(&self) -> Result<Vec<(String, u64)>> {
        Ok(self.evidence()?.into_iter().flat_map(|e| e.files).collect())
    }
}

/// Checks deliveries without keeping them; see [`Archive::validator`].
pub struct Validator {
    full_schema: SchemaRef,
    durable: StreamState,
    staged: Staged,
}

impl Validator {
    /// A dry run for a stream no archive records yet: checks deliveries against the
    /// declaration alone, without opening (or creating) anything.
    pub fn for_new_stream(spec: &StreamSpec) -> Result<Validator> {
        let decl = spec.decl()?;
        let full_schema =
            stored_schema(&decl).map_err(|m| ArchiveError::declaration(&decl.id, m))?;
        Ok(Validator {
            full_schema,
            durable: StreamState::new(decl),
            staged: Staged::default(),
        })
    }

    /// Checks one delivery as staging would; answers its row count.
    pub fn check(&mut self, batch: &RecordBatch, positions: &[u64]) -> Result<usize> {
        let n = stage::stage(
            &self.durable.decl,
            &self.full_schema,
            &self.durable,
            &mut self.staged,
            batch,
            positions,
        )?;
        self.staged.forget_rows();
        Ok(n)
    }
}

/// Why a read through the archive's own API was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A refusal of the serving contract decided by the archive (a raw floor).
    #[error(transparent)]
    Refused(#[from] BeneathWindow),
    /// Stored data could not be read; the kind says which wall it hit. The contract answers
    /// it as `Unreadable` (transient for [`StoredErrorKind::Unavailable`]), and the CLI
    /// exits 3 with its message.
    #[error("unreadable: {0}")]
    Stored(#[from] StoredError),
    /// The archive records no such stream.
    #[error("the archive records no stream {0:?}")]
    UnknownStream(String),
    /// The stream is recorded but this handle did not select it by its row type, so it
    /// cannot hand its rows back typed. The contract answers `Unserved`.
    #[error("stream {0:?} was not selected by row type in this archive's assembly")]
    NotSelected(String),
    /// The track selection cannot name anything stored.
    #[error("bad track selection: {0}")]
    BadSelection(String),
    /// The stream has no axis, or no levels, so it cannot be surveyed or folded.
    #[error("stream {stream:?} {why}")]
    NotSurveyable {
        /// The stream id.
        stream: String,
        /// Why not.
        why: String,
    },
    /// The range reaches beneath a floor: retired, on purpose. Answers the contract's
    /// `Floor { floor, axis }`, the axis being where to narrow to.
    #[error("floor: {tier} retains nothing beneath position {floor} (axis {axis}) for the selected tracks; narrow the range to start at axis {axis} or later")]
    Floor {
        /// Which tier refused (`raw`, or `levels`).
        tier: &'static str,
        /// The contract's floor: no row beneath this position is retained in that tier.
        floor: Position,
        /// The same floor on the axis (for axis reads).
        axis: u64,
    },
    /// The caller stopped wanting the answer (`Archive::fold_while`), and the read stopped
    /// with it. Never an answer: nothing partial is handed back.
    #[error("the read was abandoned: its caller no longer wanted the answer")]
    Abandoned,
    /// The budget buys no bucket.
    #[error("a budget of {budget} points buys no bucket: each of the {fields} measured field(s) needs 4 points per bucket, so the budget must be at least {needed}")]
    Budget {
        /// The budget asked for.
        budget: usize,
        /// Measured fields.
        fields: usize,
        /// The smallest budget that buys one bucket per field.
        needed: usize,
    },
}

fn describe_drift(recorded: &StreamDecl, declared: &StreamDecl) -> String {
    let cols = |d: &StreamDecl| {
        d.columns
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}",
                    c.name,
                    c.data_type,
                    if c.nullable { "?" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut diffs = Vec::new();
    if recorded.columns != declared.columns {
        diffs.push(format!(
            "columns: recorded [{}], declared [{}]",
            cols(recorded),
            cols(declared)
        ));
    }
    if recorded.track != declared.track {
        diffs.push(format!(
            "track: recorded {:?}, declared {:?}",
            recorded.track, declared.track
        ));
    }
    if recorded.axis != declared.axis {
        diffs.push(format!(
            "axis: recorded {:?}, declared {:?}",
            recorded.axis, declared.axis
        ));
    }
    if recorded.ladder != declared.ladder {
        diffs.push(format!(
            "ladder: recorded {:?}, declared {:?}",
            recorded.ladder, declared.ladder
        ));
    }
    if recorded.measured != declared.measured {
        diffs.push(format!(
            "measured fields: recorded {:?}, declared {:?}",
            recorded.measured, declared.measured
        ));
    }
    format!("the declaration differs from the one the manifest records ({}); a stream's shape cannot drift — declare it as recorded or use a new stream id", diffs.join("; "))
}
