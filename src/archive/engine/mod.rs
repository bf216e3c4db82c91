//! The executors around [`Archive`]: one file per verb, each adding methods to it.
//!
//! ```text
//! deliver ──► stage (memory, per stream × track, publish order, _seq assigned)
//! seal    ──► encode Parquet ─► fsync ─► rename ─► fsync dir ─► ONE manifest record ─► fsync
//! open    ──► replay trusted prefix ─► quarantine leftovers ─► repair ─► claim
//! rows    ──► catalog key-range scan ─► row groups ─► verify digests ─► decode ─► merge by _seq
//! ```
//!
//! The star of this folder (`mod.rs` and the files that add methods to `Archive`) is the only
//! place modules may name each other both ways; everything they call lies in the layers
//! beneath (`plan`, `io`, `format`, `error`, `layout`).

pub mod beyond;
mod commit;
pub mod delta;
mod describe;
pub mod lifecycle;
pub mod offload;
mod open;
pub(crate) mod read;
pub mod reader;
mod repair;
pub mod replicate;
mod replicator;
pub mod restore;
mod seal;
mod series;
mod stage;
mod survey;

pub use describe::{
    DeltaDescription, Description, QuarantinedFile, StreamDescription, TrackDescription,
};
pub use open::Recovery;
pub use repair::{Evidence, LostRecord, RepairPlan};
pub use replicator::Replication;
pub use seal::{BarrierReport, SealedStream, Validator};
pub use survey::{Floors, Folded, Survey};

use crate::archive::config::Config;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::levels;
use crate::archive::format::manifest::{Record, State, StreamState};
use crate::archive::format::spec::StreamSpec;
use crate::archive::io::store::{self};
use crate::archive::io::{durable, local, lock};
use crate::archive::layout::{generation_of, MANIFEST_DIR};
use crate::contract::Position;
use arrow::datatypes::SchemaRef;
use commit::CommitPoint;
use stage::Staged;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many times a read-only open replays again when it found evidence past the trusted
/// prefix and the manifest moved meanwhile (a writer committing beside it).
const READ_ONLY_ATTEMPTS: usize = 8;
/// A barrier of at least this many rows encodes its data file and its level partials on two
/// threads; a smaller one is not worth the thread.
const PARALLEL_SEAL_ROWS: usize = 16 * 1024;

/// A stream selected at assembly, resolved against what the manifest records.
#[derive(Debug)]
struct Selected {
    spec: StreamSpec,
    full_schema: SchemaRef,
}

/// A Parquet archive of stream history in one directory.
///
/// One process writes (the `LOCK` file is held while open for writing); any number may
/// open it read-only. See the crate docs for the model and `docs/format.md` for the bytes.
pub struct Archive {
    /// Replicates every commit to the declared replica (writable opens); first, so that it
    /// stops before the writer's lock is released.
    replicator: Option<replicator::Replicator>,
    root: PathBuf,
    config: Config,
    /// The manifest log, the state it proves, the name counter, the poisoned flag.
    commit: CommitPoint,
    _lock: Option<lock::Lock>,
    selected: BTreeMap<String, Selected>,
    staged: BTreeMap<String, Staged>,
    cursor: Position,
    recovery: Recovery,
    /// Decoded level row groups, bounded: surveys and folds read only the groups they need.
    /// Shared with a later open of the same archive by [`Archive::share_level_cache`].
    level_cache: Arc<std::sync::Mutex<levels::LevelCache>>,
    /// Decoded data row groups kept for surveys and folds from raw rows
    /// ([`crate::archive::io::decoded`]); shared like the level cache.
    raw_cache: Arc<std::sync::Mutex<crate::archive::io::decoded::DecodedCache>>,
    /// The generation this open replayed and the length of its trusted prefix.
    replayed: Option<(u64, u64)>,
    /// The backend every durable operation and every read of a local file goes through.
    disk: crate::archive::io::storage::Disk,
    /// Where stored files are read from: the root, or a cold tier.
    store: Arc<store::Store>,
    /// Keeps the streams' Delta logs level with the manifest (writable, unless turned off).
    delta: Option<delta::Publisher>,
    /// The bucket a read-only open by URL replayed the manifest of
    /// ([`replicate::open_url`]): whether the manifest moved is asked of it, not of the
    /// local copy.
    origin: Option<Arc<crate::archive::io::cold::ColdTier>>,
    /// The live state's size as the checkpoint rule last measured it.
    live_measured: std::sync::Mutex<Option<lifecycle::LiveMeasured>>,
    /// Per stream, where its deferred levels were last judged not worth summarising: the
    /// first deferred `_seq` and the deferred rows then ([`Archive::plan_summary`]).
    summary_judged: BTreeMap<String, (u64, u64)>,
    /// Files a record took out of the live set that a crash left behind, found by this
    /// writable open: deleted once a checkpoint has put that record behind the replay (a
    /// replay reads a removed file of format 11 for its tracks' history while it is there).
    gone: Vec<std::path::PathBuf>,
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

impl Archive {
    /// Poisons this handle (see [`CommitPoint::poison`], the one place it happens).
    pub(crate) fn poison(&mut self, e: ArchiveError) -> ArchiveError {
        self.commit.poison(e)
    }

    /// Appends and syncs one record, then applies it (see [`CommitPoint::commit`]), then
    /// brings the Delta logs of the streams it changed level with it.
    fn commit(&mut self, record: Record) -> Result<()> {
        let streams: Vec<String> = match &record {
            Record::Barrier(b) => b.streams.iter().map(|s| s.stream.clone()).collect(),
            Record::Retire(r) => vec![r.stream.clone()],
            Record::Compact(c) => vec![c.stream.clone()],
            Record::Offload(o) => vec![o.stream.clone()],
            _ => Vec::new(),
        };
        let barrier = matches!(record, Record::Barrier(_));
        self.commit.commit(record)?;
        if !barrier {
            // Staging knows where its sealed tracks stand from the barriers it wrote, and
            // trusts that only across barriers: any other record for the stream (a
            // retirement above all) sends it back to the catalog, whatever the record moved.
            for stream in &streams {
                if let Some(staged) = self.staged.get_mut(stream) {
                    staged.forget_sealed();
                }
            }
        }
        for stream in streams {
            self.publish_after_commit(&stream);
        }
        self.hand_to_replicator();
        Ok(())
    }

    /// Hands the replicator what the last commit proves, once its Delta commits are written
    /// too (one pass carries both).
    fn hand_to_replicator(&self) {
        if let Some(r) = &self.replicator {
            r.committed(replicate::Committed::of(
                self.commit.state(),
                self.commit.manifest_bytes(),
            ));
        }
    }

    /// Under a lag bound ([`Config::max_lag`]), waits for the bucket to hold every commit but
    /// the newest `max_lag`; refuses (without poisoning: the commits are durable) when it does
    /// not in time.
    fn wait_for_replica(&self) -> Result<()> {
        match (&self.replicator, self.config.max_lag) {
            (Some(r), Some((lag, wait))) => r.wait_for(lag, wait),
            _ => Ok(()),
        }
    }

    /// Where this handle's replication stands: `None` when it does not replicate (read-only,
    /// no replica declared, or [`Config::replication`] off).
    pub fn replication(&self) -> Option<Replication> {
        self.replicator
            .as_ref()
            .map(replicator::Replicator::progress)
    }

    /// Stops this handle's replicator as closing the handle does (a commit not yet replicated
    /// gets one last pass, waited for at most 10 s) and answers where it left the bucket
    /// ([`Replication::running`] when a pass was still running then); later commits of the
    /// handle are not replicated by it. `None` when the handle does not replicate. A command
    /// that seals many barriers ends with it, to say where its replica stands without another
    /// pass.
    pub fn stop_replication(&mut self) -> Option<Replication> {
        let mut replicator = self.replicator.take()?;
        Some(replicator.stop())
    }

    /// Whether a writer has committed since this (read-only) open replayed the manifest: a
    /// new generation, or records appended past what was replayed. A reader refused as
    /// `Unreadable` because a file its snapshot named is gone (a compaction or retirement
    /// deleted it after its record) opens again and retries when this is true; see
    /// `docs/format.md`, "Readers beside a writer". An open of a replica by its URL asks
    /// the bucket (one listing of its manifest parts): a part past what was replayed, or a
    /// newer generation, is a move; a bucket that does not answer proves none.
    pub fn manifest_moved(&self) -> bool {
        let Some((generation, len)) = self.replayed else {
            return false;
        };
        if let Some(tier) = &self.origin {
            return replicate::bucket_moved(tier, generation, len);
        }
        let dir = self.root.join(MANIFEST_DIR);
        let newest = durable::list_files(&dir).ok().and_then(|files| {
            files
                .iter()
                .filter_map(|p| generation_of(p).map(|g| (g, p.clone())))
                .max_by_key(|(g, _)| *g)
        });
        match newest {
            Some((g, path)) if g == generation => local::len(&path).map_or(true, |now| now > len),
            _ => true,
        }
    }

    /// Keeps the decoded level row groups and data row groups `earlier` (an open of the same
    /// archive) holds, and shares its caches from now on: a reader that reopens on every commit does not start
    /// cold. Sound because a file's name is never reused and a committed file never changes:
    /// a group decoded under a name is that group for good. Both must be opens of the same
    /// root.
    pub fn share_level_cache(&mut self, earlier: &Archive) {
        if earlier.root == self.root {
            self.level_cache = earlier.level_cache.clone();
            self.raw_cache = earlier.raw_cache.clone();
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

    /// The durable state (recorded streams, files, catalog). After a scoped open
    /// ([`crate::archive::Config::scope`]) the catalog holds only the scope's tracks.
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
}

/// What the engine's unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::Archive;
    use crate::archive::{Config, StreamSpec};
    use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use std::sync::Arc;

    /// An archive in `dir` with one stream `s`: a text track column `t` and a UInt64 axis
    /// `x`; answers the rows' schema and the writer.
    pub(crate) fn one_label_stream(
        dir: &std::path::Path,
    ) -> Result<(SchemaRef, Archive), Box<dyn std::error::Error>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Utf8, false),
            Field::new("x", DataType::UInt64, false),
        ]));
        let spec = StreamSpec::dynamic("s", schema.clone(), vec!["t".into()], Some("x".into()))?;
        Ok((schema, Archive::open(dir, Config::new().stream(spec))?))
    }
}
