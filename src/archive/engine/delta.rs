//! The Delta Lake log beside each stream's files: a table that DuckDB, Polars, Spark and
//! `deltalake` read *exactly*, derived from the manifest.
//!
//! Every stream has two tables, `streams/<id>/rows/` (its data files) and
//! `streams/<id>/levels/` (its level files), each with its own `_delta_log/`. The manifest
//! stays the one commit point: after every record that changes a stream's live files, the
//! archive appends one Delta commit per table whose files changed, adding and removing
//! exactly the difference between what the log shows and what the manifest holds. A crash
//! between the two leaves the log one step behind; the next writable open brings it level
//! (`Publisher::level` is the same code either way). The log is written through
//! delta-kernel-rs, the Delta project's own kernel (see `docs/format.md`, "The Delta log").

use crate::archive::error::ArchiveError;
use crate::archive::error::Result;
use crate::archive::format::manifest::{SegmentFile, StreamState};
use crate::archive::io::faults::FaultPoint;
use crate::archive::io::storage::Disk;
use arrow::array::{
    Array, BooleanArray, Int64Array, MapBuilder, MapFieldNames, RecordBatch, StringArray,
    StringBuilder, StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_conversion::TryFromArrow;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::engine_data::FilteredEngineData;
use delta_kernel::schema::StructType;
use delta_kernel::snapshot::{Snapshot, SnapshotRef};
use delta_kernel::transaction::create_table::create_table;
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};
use delta_kernel::EngineData;
use delta_kernel_default_engine::executor::TaskExecutor;
use delta_kernel_default_engine::DefaultEngine;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use url::Url;

pub use crate::archive::layout::LOG_DIR;

/// What the archive writes as the commits' `engineInfo`.
const ENGINE_INFO: &str = concat!("series-archive/", env!("CARGO_PKG_VERSION"));

/// One of a stream's two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// `streams/<id>/rows/`: the data files.
    Rows,
    /// `streams/<id>/levels/`: the level files (partials, one-file runs and level tables).
    Levels,
}

impl Table {
    /// Both tables.
    pub const BOTH: [Table; 2] = [Table::Rows, Table::Levels];

    /// The table's directory under `streams/<id>/`.
    pub fn dir(self) -> &'static str {
        match self {
            Table::Rows => "rows",
            Table::Levels => "levels",
        }
    }

    /// The stream's live files of this table, in the manifest's order.
    fn live(self, stream: &StreamState) -> &[SegmentFile] {
        match self {
            Table::Rows => &stream.files,
            Table::Levels => &stream.levels,
        }
    }
}

/// The directory of a stream's table under the archive root.
pub fn table_dir(root: &Path, stream: &str, table: Table) -> PathBuf {
    root.join(crate::archive::layout::STREAMS_DIR)
        .join(stream)
        .join(table.dir())
}

type Engine = DefaultEngine<Executor>;

/// Runs the kernel's futures on the log's own runtime and blocks the calling thread for
/// them, whatever runtime that thread belongs to: the archive is synchronous, and a
/// caller's current-thread runtime (the host's supervisor, a `#[tokio::main]` CLI) must not
/// meet `block_in_place`, which the kernel's own executors use.
#[derive(Debug)]
struct Executor {
    handle: tokio::runtime::Handle,
}

impl TaskExecutor for Executor {
    type Guard<'a> = tokio::runtime::EnterGuard<'a>;

    fn block_on<T>(&self, task: T) -> T::Output
    where
        T: std::future::Future + Send + 'static,
        T::Output: Send + 'static,
    {
        let handle = self.handle.spawn(task);
        let wait = || futures::executor::block_on(handle);
        // On a worker of a multi-threaded runtime (the log's own, when the kernel blocks
        // inside one of its tasks, as its checkpoint writer does), hand the worker's other
        // tasks on first, or the task waited for may wait behind this one. A current-thread
        // runtime's thread (a caller's) cannot, and simply blocks, as for any durable write.
        let outcome = match tokio::runtime::Handle::try_current() {
            Ok(current)
                if current.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        };
        match outcome {
            Ok(output) => output,
            // The task panicked: the panic goes on in the caller, as if it had run there.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only a runtime shut down under a live `Kernel`, which owns it.
            Err(e) => {
                std::panic::resume_unwind(Box::new(format!("the Delta log's runtime stopped: {e}")))
            }
        }
    }

    fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(task);
    }

    fn spawn_blocking<T, R>(
        &self,
        task: T,
    ) -> futures::future::BoxFuture<'_, delta_kernel::KernelResult<R>>
    where
        T: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let handle = self.handle.spawn_blocking(task);
        Box::pin(async move {
            handle.await.map_err(|e| {
                delta_kernel::KernelError::generic(format!("a blocking task failed: {e}"))
            })
        })
    }

    fn enter(&self) -> Self::Guard<'_> {
        self.handle.enter()
    }
}

/// The kernel's engine over the local file system, on a runtime of its own.
struct Kernel {
    engine: Engine,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Kernel {
    fn new() -> Result<Kernel> {
        // The kernel's checkpoint writer needs a multi-threaded runtime (it blocks inside
        // its own tasks). Two workers: the log's own work is small.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(4)
            // At most 15 characters: the part of a name `top -H` and perf show.
            .thread_name("archive-delta")
            .enable_all()
            .build()
            .map_err(|e| ArchiveError::Internal(format!("no runtime for the Delta log: {e}")))?;
        let executor = Executor {
            handle: runtime.handle().clone(),
        };
        let store = local::local_object_store();
        Ok(Kernel {
            engine: DefaultEngine::builder(store)
                .with_task_executor(Arc::new(executor))
                .build(),
            runtime: Some(runtime),
        })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside a caller's async context.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn delta_error(stream: &str, table: Table, what: &str) -> impl Fn(String) -> ArchiveError {
    let (stream, what) = (stream.to_owned(), what.to_owned());
    move |m| ArchiveError::Delta {
        stream: stream.clone(),
        table: table.dir(),
        message: format!("{what}: {m}"),
    }
}

fn table_url(root: &Path, stream: &str, table: Table) -> Result<Url> {
    let dir = std::path::absolute(table_dir(root, stream, table))
        .map_err(ArchiveError::io("resolve", root))?;
    Url::from_directory_path(&dir).map_err(|()| ArchiveError::Delta {
        stream: stream.to_owned(),
        table: table.dir(),
        message: format!("{} is not a usable table location", dir.display()),
    })
}

/// One live file as the log names it: its path relative to the table directory (or the
/// cold tier's URL), its bytes, its rows (cells for a level file) and when it was sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Wanted {
    bytes: u64,
    rows: u64,
    sealed_ms: i64,
}

/// The path a live file has in its table's log.
pub fn log_path(file: &SegmentFile, table: Table) -> String {
    log_path_beside(file, table, None)
}

/// The path a live file has in its table's log, when the archive's replica is `replica` (its
/// URL): a file evicted into the replica keeps the path it had locally, so the replica's
/// copy of the log (its paths relative to the table) still names it there.
fn log_path_beside(file: &SegmentFile, table: Table, replica: Option<&str>) -> String {
    if let Some(url) = &file.cold {
        let evicted = replica.is_some_and(|r| {
            url.strip_prefix(r)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|rest| rest == file.path)
        });
        if !evicted {
            return url.clone();
        }
    }
    // `streams/<id>/<rows|levels>/` is the table's root; what follows is the file's path in
    // it (`NNN.parquet`, `level=K/NNN.parquet`). The prefix is taken whole: a stream may be
    // called `rows` or `levels`.
    let mut parts = file.path.splitn(4, '/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(crate::archive::layout::STREAMS_DIR), Some(_), Some(dir), Some(rest))
            if dir == table.dir() =>
        {
            rest.to_owned()
        }
        _ => file.path.clone(),
    }
}

/// The files `table` of `stream` holds live, each with the path its log names it by. Only
/// the paths: a file's [`Wanted`] (its rows a sum over its entries, one per track in a packed
/// file) is worked out for the files a commit adds, never for the ones the log already shows,
/// so a barrier's commit costs its own files, not the history's entries.
fn live_paths<'s>(
    stream: &'s StreamState,
    table: Table,
    replica: Option<&str>,
) -> BTreeMap<String, &'s SegmentFile> {
    table
        .live(stream)
        .iter()
        .map(|f| (log_path_beside(f, table, replica), f))
        .collect()
}

impl Wanted {
    /// What the log records of `file` when a commit adds it.
    fn of(file: &SegmentFile) -> Wanted {
        Wanted {
            bytes: file.bytes,
            rows: file.rows(),
            sealed_ms: i64::try_from(file.sealed_at_ns / 1_000_000).unwrap_or(i64::MAX),
        }
    }
}

/// Commits between Delta checkpoints taken without the manifest's (a long run of barriers
/// between manifest checkpoints would otherwise make every reader replay every commit).
pub const CHECKPOINT_INTERVAL: u64 = 100;

/// How many versions before a new checkpoint a log keeps, at least, when it expires what lies
/// before its previous checkpoint (`docs/format.md`, "The Delta logs": expiry).
pub const KEPT_VERSIONS: u64 = CHECKPOINT_INTERVAL;

/// The version a Delta log object's name carries (`NNNNNNNNNNNNNNNNNNNN.json`, `.crc`,
/// `.checkpoint.parquet`, `.checkpoint.K.N.parquet`), and whether it is a checkpoint; `None`
/// for any other name (`_last_checkpoint`, a file the object store is still writing).
pub(crate) fn log_version(name: &str) -> Option<(u64, bool)> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !rest.starts_with('.') || rest.contains('#') {
        return None;
    }
    Some((digits.parse().ok()?, rest.starts_with(".checkpoint.")))
}

/// Expires what the log at `log` holds before its previous checkpoint, once a checkpoint at
/// `version` was written and `_last_checkpoint` names it: every object of a version below
/// both that previous checkpoint and `version - KEPT_VERSIONS`, oldest first. A reader that
/// started from the previous checkpoint still finds every commit after it; the newest commits
/// stay as evidence of acknowledged barriers (`beyond.rs` reads the newest 8). Without an
/// earlier checkpoint nothing goes. So a log holds about two checkpoint intervals, however
/// long the history (as Delta's own log retention does, here without its 30-day window:
/// reading an expired version is refused by the reader, never answered short). Answers how
/// many objects went.
fn expire_log(log: &Path, version: u64) -> Result<usize> {
    let objects: Vec<(u64, bool, PathBuf)> = crate::archive::io::durable::list_files(log)?
        .into_iter()
        .filter_map(|path| {
            let (v, checkpoint) = log_version(path.file_name()?.to_str()?)?;
            Some((v, checkpoint, path))
        })
        .collect();
    let previous = objects
        .iter()
        .filter(|(v, checkpoint, _)| *checkpoint && *v < version)
        .map(|(v, _, _)| *v)
        .max();
    let Some(previous) = previous else {
        return Ok(0);
    };
    let below = previous.min(version.saturating_sub(KEPT_VERSIONS));
    // Listed sorted by name, which begins with the zero-padded version: oldest first.
    let expired = objects
        .iter()
        .filter(|(v, _, _)| *v < below)
        .map(|(_, _, path)| path.as_path());
    let removed = local::remove_files(expired)
        .map_err(ArchiveError::io("remove an expired version of", log))?;
    if removed > 0 {
        sync_path(log)?;
    }
    Ok(removed)
}

/// What the publisher knows of one table's log: its snapshot, and the files it shows
/// (read from the log once, then kept in step with the commits this publisher makes, so a
/// barrier's commit costs its own files, not a replay of the log).
struct Known {
    snapshot: SnapshotRef,
    shown: BTreeSet<String>,
}

/// Keeps the Delta logs of an archive's streams level with its manifest.
pub(crate) struct Publisher {
    kernel: Kernel,
    root: PathBuf,
    disk: Disk,
    tables: BTreeMap<(String, Table), Known>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("root", &self.root)
            .field("tables", &self.tables.len())
            .finish()
    }
}

impl Publisher {
    /// A publisher for the archive at `root`.
    pub fn new(root: &Path, disk: Disk) -> Result<Publisher> {
        Ok(Publisher {
            kernel: Kernel::new()?,
            root: root.to_path_buf(),
            disk,
            tables: BTreeMap::new(),
        })
    }

    /// What is known of the table: cached, or read from its log; `None` when it has none.
    fn known(&mut self, stream: &str, table: Table) -> Result<Option<&Known>> {
        let key = (stream.to_owned(), table);
        if !self.tables.contains_key(&key) {
            let Some(snapshot) = load(&self.kernel.engine, &self.root, stream, table)? else {
                return Ok(None);
            };
            let shown = published(&self.kernel.engine, &snapshot).map_err(delta_error(
                stream,
                table,
                "read the log",
            ))?;
            self.tables.insert(key.clone(), Known { snapshot, shown });
        }
        Ok(self.tables.get(&key))
    }

    /// Forgets what is cached of `stream`'s tables (after a failed commit, or a rebuild).
    fn forget(&mut self, stream: &str) {
        self.tables.retain(|(s, _), _| s != stream);
    }

    /// Brings both of `stream`'s tables level with the manifest: per table, one commit adding
    /// every live file the log does not show and removing every file it shows that is no
    /// longer live (creating the table, with its schema from `schema`, asked only then, on
    /// its first file).
    /// Answers the version each commit wrote.
    /// When both tables change, the two commits are written at once, on two threads: a
    /// commit is mostly waiting on the file system.
    pub fn level(
        &mut self,
        state: &StreamState,
        schema: &dyn Fn(Table) -> Result<SchemaRef>,
    ) -> Result<Vec<(Table, u64)>> {
        let stream = state.decl.id.as_str();
        let result = self.level_inner(state, schema);
        if result.is_err() {
            self.forget(stream);
        }
        result
    }

    fn level_inner(
        &mut self,
        state: &StreamState,
        schema: &dyn Fn(Table) -> Result<SchemaRef>,
    ) -> Result<Vec<(Table, u64)>> {
        let stream = state.decl.id.as_str();
        let mut jobs = Vec::new();
        let replica = super::replicate::recorded(&self.root)?;
        for table in Table::BOTH {
            let diff = Diff::of(
                state,
                table,
                self.known(stream, table)?.map(|k| &k.shown),
                replica.as_deref(),
            );
            if let Some(diff) = diff {
                // Taken out, not copied: it goes back in once the commit is written (or is
                // read from the log again after a failure).
                let log = match self.tables.remove(&(stream.to_owned(), table)) {
                    Some(known) => Log::Known(known),
                    None => Log::Create(schema(table)?),
                };
                jobs.push(Job {
                    stream,
                    table,
                    log,
                    diff,
                });
            }
        }
        let (engine, root, disk) = (&self.kernel.engine, self.root.as_path(), &self.disk);
        let done: Vec<Result<Done>> = match jobs.as_mut_slice() {
            [] => Vec::new(),
            [one] => vec![one.commit(engine, root, disk)],
            [first, second, ..] => std::thread::scope(|scope| {
                let other = scope.spawn(|| second.commit(engine, root, disk));
                let here = first.commit(engine, root, disk);
                let there = other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                vec![here, there]
            }),
        };
        let mut out = Vec::new();
        for done in done {
            let done = done?;
            let version = done.version;
            match done.known {
                Some(known) => {
                    self.tables.insert((stream.to_owned(), done.table), known);
                }
                None => self.forget(stream),
            }
            if version > 0 && version % CHECKPOINT_INTERVAL == 0 {
                if let Err(e) = self.checkpoint_table(stream, done.table) {
                    tracing::warn!(stream, table = done.table.dir(), error = %e, "no Delta checkpoint");
                }
            }
            out.push((done.table, version));
        }
        Ok(out)
    }

    /// A Delta checkpoint of every table of `stream` that has a log and none at its current
    /// version (the manifest's checkpoint calls it, so the two follow each other).
    pub fn checkpoint(&mut self, stream: &str) -> Result<()> {
        for table in Table::BOTH {
            self.checkpoint_table(stream, table)?;
        }
        Ok(())
    }

    fn checkpoint_table(&mut self, stream: &str, table: Table) -> Result<()> {
        let Some(snapshot) = self.known(stream, table)?.map(|k| k.snapshot.clone()) else {
            return Ok(());
        };
        let (_, after) = snapshot
            .checkpoint(&self.kernel.engine, None)
            .map_err(|e| delta_error(stream, table, "checkpoint")(e.to_string()))?;
        if let Some(known) = self.tables.get_mut(&(stream.to_owned(), table)) {
            known.snapshot = after;
        }
        let log = table_dir(&self.root, stream, table).join(LOG_DIR);
        for file in [log.join("_last_checkpoint"), log.clone()] {
            sync_path(&file)?;
        }
        self.disk.reached(FaultPoint::AfterDeltaCheckpoint);
        // The log is derived: an expiry that fails only leaves it longer (logged).
        if let Err(e) = expire_log(&log, snapshot.version()) {
            tracing::warn!(stream, table = table.dir(), error = %e, "old Delta log versions not expired");
        }
        Ok(())
    }

    /// Throws `stream`'s logs away (into `evidence`, when given) so the next
    /// [`Publisher::level`] writes them anew from the manifest.
    pub fn discard(&mut self, stream: &str, evidence: Option<&Path>) -> Result<()> {
        self.forget(stream);
        for table in Table::BOTH {
            let log = table_dir(&self.root, stream, table).join(LOG_DIR);
            if !log.exists() {
                continue;
            }
            match evidence {
                Some(dir) => {
                    let to = dir.join(crate::archive::layout::relative(&self.root, &log));
                    local::move_to(&self.disk, &log, &to)?;
                }
                None => local::remove_tree(&self.disk, &log)?,
            }
        }
        Ok(())
    }

    /// Whether `stream`'s logs can be read (absent logs can).
    pub fn readable(&mut self, stream: &str) -> std::result::Result<(), String> {
        for table in Table::BOTH {
            self.known(stream, table).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// What one table's commit changes: the live files the log does not show, and the files it
/// shows that are no longer live.
struct Diff {
    adds: Vec<(String, Wanted)>,
    removes: BTreeSet<String>,
}

impl Diff {
    /// The difference between the manifest's live files of `table` and what the log shows
    /// (`None`: it has no log); `None` when there is none.
    fn of(
        state: &StreamState,
        table: Table,
        shown: Option<&BTreeSet<String>>,
        replica: Option<&str>,
    ) -> Option<Diff> {
        let live = live_paths(state, table, replica);
        let removes: BTreeSet<String> = shown
            .into_iter()
            .flatten()
            .filter(|p| !live.contains_key(*p))
            .cloned()
            .collect();
        let adds: Vec<(String, Wanted)> = live
            .into_iter()
            .filter(|(p, _)| !shown.is_some_and(|s| s.contains(p)))
            .map(|(p, f)| (p, Wanted::of(f)))
            .collect();
        (!adds.is_empty() || !removes.is_empty()).then_some(Diff { adds, removes })
    }
}

/// One table's pending commit.
struct Job<'a> {
    stream: &'a str,
    table: Table,
    log: Log,
    diff: Diff,
}

/// A pending commit's table: its log as known, or none yet (the commit creates the table).
enum Log {
    Known(Known),
    Create(SchemaRef),
}

/// A table's commit, written.
struct Done {
    table: Table,
    version: u64,
    /// What is known of the table now (`None`: the kernel answered no snapshot; read the
    /// log again next time).
    known: Option<Known>,
}

impl Job<'_> {
    /// Writes the commit (creating the table when it has no log), syncs it, and answers
    /// what the log shows after it.
    fn commit(&mut self, engine: &Engine, root: &Path, disk: &Disk) -> Result<Done> {
        let (stream, table) = (self.stream, self.table);
        let err = |what: &str| delta_error(stream, table, what);
        let (adds, removes) = (&self.diff.adds, &self.diff.removes);
        let add_batch = add_files(adds).map_err(err("describe the added files"))?;
        let result = match &self.log {
            Log::Create(schema) => {
                let kernel_schema = Arc::new(
                    StructType::try_from_arrow(schema.as_ref())
                        .map_err(|e| err("convert the schema")(e.to_string()))?,
                );
                let url = table_url(root, stream, table)?;
                let mut txn = create_table(url.as_str(), kernel_schema, ENGINE_INFO, true)
                    .build(engine, Box::new(FileSystemCommitter::new()))
                    .map_err(|e| err("create the table")(e.to_string()))?;
                txn.add_files(add_batch);
                txn.commit(engine).map(|r| match r {
                    CommitResult::Committed(c) => Ok(c),
                    CommitResult::Conflicted(c) => Err(c.conflict_version()),
                    CommitResult::Retryable(_) => Err(u64::MAX),
                })
            }
            Log::Known(Known { snapshot: s, .. }) => {
                let operation = if removes.is_empty() {
                    UpdateTableOperation::Write
                } else {
                    UpdateTableOperation::Optimize
                };
                let mut txn = s
                    .clone()
                    .update_table(operation, ENGINE_INFO, true)
                    .build(engine, Box::new(FileSystemCommitter::new()))
                    .map_err(|e| err("start a commit")(e.to_string()))?;
                if !adds.is_empty() {
                    txn.add_files(add_batch);
                }
                if !removes.is_empty() {
                    for data in removals(engine, s, removes).map_err(err("find removed files"))? {
                        txn.remove_files(data);
                    }
                }
                txn.commit(engine).map(|r| match r {
                    CommitResult::Committed(c) => Ok(c),
                    CommitResult::Conflicted(c) => Err(c.conflict_version()),
                    CommitResult::Retryable(_) => Err(u64::MAX),
                })
            }
        };
        let committed = match result.map_err(|e| err("commit")(e.to_string()))? {
            Ok(c) => c,
            Err(u64::MAX) => return Err(err("commit")("the log could not be written".into())),
            Err(version) => {
                return Err(err("commit")(format!(
                    "another writer committed version {version} first"
                )))
            }
        };
        let version = committed.commit_version();
        sync_commit(root, stream, table, version)?;
        disk.reached(FaultPoint::AfterDeltaCommit);
        let mut shown = match &mut self.log {
            Log::Known(known) => std::mem::take(&mut known.shown),
            Log::Create(_) => BTreeSet::new(),
        };
        for p in removes {
            shown.remove(p);
        }
        shown.extend(adds.iter().map(|(p, _)| p.clone()));
        Ok(Done {
            table,
            version,
            known: committed.post_commit_snapshot().map(|s| Known {
                snapshot: s.clone(),
                shown,
            }),
        })
    }
}

/// The table's snapshot read from its log; `None` when it has no log.
fn load(engine: &Engine, root: &Path, stream: &str, table: Table) -> Result<Option<SnapshotRef>> {
    let dir = table_dir(root, stream, table).join(LOG_DIR);
    let has_commits = local::holds_anything(&dir);
    if !has_commits {
        return Ok(None);
    }
    let url = table_url(root, stream, table)?;
    Snapshot::builder_for(url.as_str())
        .build(engine)
        .map(Some)
        .map_err(|e| delta_error(stream, table, "read the log")(e.to_string()))
}

/// Each batch of the log's scan rows at `snapshot` (one row a file it shows, where the
/// selection, extended with `true`, says so), with its `path` column.
fn scan_rows(
    engine: &Engine,
    snapshot: &SnapshotRef,
    mut each: impl FnMut(Box<ArrowEngineData>, Vec<bool>) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    let scan = snapshot
        .clone()
        .scan_builder()
        .build()
        .map_err(|e| e.to_string())?;
    for meta in scan.scan_metadata(engine).map_err(|e| e.to_string())? {
        let meta = meta.map_err(|e| e.to_string())?;
        let (data, selection) = meta.scan_files.into_parts();
        let arrow = ArrowEngineData::try_from_engine_data(data).map_err(|e| e.to_string())?;
        let rows = arrow.record_batch().num_rows();
        let paths = paths_of(arrow.record_batch())?;
        let shown: Vec<bool> = (0..rows)
            .map(|i| selection.get(i).copied().unwrap_or(true) && !paths.is_null(i))
            .collect();
        each(arrow, shown)?;
    }
    Ok(())
}

fn paths_of(batch: &RecordBatch) -> std::result::Result<&StringArray, String> {
    batch
        .column_by_name("path")
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| "the log's scan rows have no path column".to_owned())
}

/// The paths of the files the log shows at `snapshot`.
fn published(
    engine: &Engine,
    snapshot: &SnapshotRef,
) -> std::result::Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    scan_rows(engine, snapshot, |arrow, shown| {
        let paths = paths_of(arrow.record_batch())?;
        out.extend(
            (0..shown.len())
                .filter(|&i| shown[i])
                .map(|i| paths.value(i).to_owned()),
        );
        Ok(())
    })?;
    Ok(out)
}

/// The log's rows for the files in `removes`, selected for a `remove_files`.
fn removals(
    engine: &Engine,
    snapshot: &SnapshotRef,
    removes: &BTreeSet<String>,
) -> std::result::Result<Vec<FilteredEngineData>, String> {
    let mut out = Vec::new();
    scan_rows(engine, snapshot, |arrow, shown| {
        let paths = paths_of(arrow.record_batch())?;
        let picked: Vec<bool> = (0..shown.len())
            .map(|i| shown[i] && removes.contains(paths.value(i)))
            .collect();
        if picked.iter().any(|p| *p) {
            let data: Box<dyn EngineData> = arrow;
            out.push(FilteredEngineData::try_new(data, picked).map_err(|e| e.to_string())?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The kernel's add-files batch: path, partitionValues (none), size, modificationTime and
/// stats (`numRecords`, from the manifest's group entries).
fn add_files(adds: &[(String, Wanted)]) -> std::result::Result<Box<dyn EngineData>, String> {
    let names = MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut partitions = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new());
    for _ in adds {
        partitions.append(true).map_err(|e| e.to_string())?;
    }
    let partitions = partitions.finish();
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let stats_fields = Fields::from(vec![
        Field::new("numRecords", DataType::Int64, true),
        Field::new("tightBounds", DataType::Boolean, true),
    ]);
    let stats = StructArray::try_new(
        stats_fields.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(
                adds.iter().map(|(_, w)| int(w.rows)),
            )),
            Arc::new(BooleanArray::from(vec![true; adds.len()])),
        ],
        None,
    )
    .map_err(|e| e.to_string())?;
    let schema = Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("partitionValues", partitions.data_type().clone(), false),
        Field::new("size", DataType::Int64, false),
        Field::new("modificationTime", DataType::Int64, false),
        Field::new("stats", DataType::Struct(stats_fields), true),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(StringArray::from_iter_values(
                adds.iter().map(|(p, _)| p.as_str()),
            )),
            Arc::new(partitions),
            Arc::new(Int64Array::from_iter_values(
                adds.iter().map(|(_, w)| int(w.bytes)),
            )),
            Arc::new(Int64Array::from_iter_values(
                adds.iter().map(|(_, w)| w.sealed_ms),
            )),
            Arc::new(stats),
        ],
    )
    .map_err(|e| e.to_string())?;
    Ok(Box::new(ArrowEngineData::new(batch)))
}

/// Syncs a commit the kernel wrote (it does not sync: its object store renames a written
/// file into place), and its directory, so a commit the archive went on from survives a
/// power loss. Not through the storage seam's fault hooks: the log is derived, and a failure
/// here fails no operation of the archive (the next commit or open brings the log level).
fn sync_commit(root: &Path, stream: &str, table: Table, version: u64) -> Result<()> {
    let dir = table_dir(root, stream, table).join(LOG_DIR);
    let path = dir.join(format!("{version:020}.json"));
    sync_path(&path)?;
    sync_path(&dir)
}

use crate::archive::io::local::{self, sync_path};

/// The paths `stream`'s `table` log shows now, as the log names them (relative to the
/// table's root, or the cold tier's URLs), read from the log itself; `None` without a log.
fn shown_by_log(
    engine: &Engine,
    root: &Path,
    stream: &str,
    table: Table,
) -> Result<Option<BTreeSet<String>>> {
    let Some(snapshot) = load(engine, root, stream, table)? else {
        return Ok(None);
    };
    published(engine, &snapshot)
        .map(Some)
        .map_err(delta_error(stream, table, "read the log"))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What [`Archive::publish`](super::Archive::publish) wrote for one table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PublishReport {
    /// The stream.
    pub stream: String,
    /// `rows` or `levels`.
    pub table: &'static str,
    /// The table's directory (its `_delta_log/` is inside).
    pub path: String,
    /// The Delta version written, if the table has files.
    pub version: Option<u64>,
    /// Files the log now shows.
    pub files: usize,
}

/// The Arrow schema a new log of `stream`'s `table` declares: the types its files store
/// (format version 5: unsigned columns as signed ones), not the declared ones (`selected`:
/// the streams this handle selected, whose schema is already built).
fn table_schema(
    selected: &BTreeMap<String, super::Selected>,
    stream: &StreamState,
    table: Table,
) -> Result<SchemaRef> {
    let id = &stream.decl.id;
    let declared = match table {
        Table::Rows => match selected.get(id) {
            Some(s) => Ok(s.full_schema.clone()),
            None => crate::archive::format::spec::stored_schema(&stream.decl)
                .map_err(|m| ArchiveError::declaration(id, m)),
        },
        Table::Levels => crate::archive::format::levels::level_schema(&stream.decl)
            .map_err(|m| ArchiveError::declaration(id, m)),
    }?;
    Ok(crate::archive::format::physical::disk_schema(&declared))
}

impl super::Archive {
    /// Brings both of `stream`'s tables level; answers what each committed.
    fn level_stream(&mut self, stream: &str) -> Result<Vec<(Table, u64)>> {
        let Some(state) = self.commit.state().streams.get(stream) else {
            return Ok(Vec::new());
        };
        let selected = &self.selected;
        let Some(publisher) = self.delta.as_mut() else {
            return Ok(Vec::new());
        };
        publisher.level(state, &|table| table_schema(selected, state, table))
    }

    /// After a committed record: the Delta commits that follow it. A failure here does not
    /// undo the record (the manifest is the commit point); it is logged, and the next commit
    /// or open brings the log level, since each commit publishes the whole difference.
    pub(crate) fn publish_after_commit(&mut self, stream: &str) {
        if let Err(e) = self.level_stream(stream) {
            tracing::warn!(stream, error = %e, "the Delta log is behind the manifest until the next commit brings it level");
        }
    }

    /// At a writable open: rewrites files still holding retired row groups, then brings
    /// every stream's Delta logs level with the manifest. A log that cannot be read is kept
    /// as evidence and written anew.
    pub(crate) fn level_delta_logs(&mut self) -> Result<()> {
        let ids: Vec<String> = self.commit.state().streams.keys().cloned().collect();
        for id in ids {
            if let Some(report) = self.purge_retired(&id)? {
                self.recovery.retired_rewritten += report.files_in;
            }
            let readable = self.delta.as_mut().map(|p| p.readable(&id));
            if let Some(Err(why)) = readable {
                tracing::warn!(stream = %id, error = %why, "the Delta log cannot be read; writing it anew from the manifest");
                let evidence = self.quarantine_dir()?;
                if let Some(p) = self.delta.as_mut() {
                    p.discard(&id, Some(&evidence))?;
                }
                for table in Table::BOTH {
                    self.recovery
                        .delta_rebuilt
                        .push(format!("{id}/{}", table.dir()));
                }
            }
            match self.level_stream(&id) {
                Ok(done) => {
                    for (table, v) in done {
                        self.recovery
                            .delta_leveled
                            .push(format!("{id}/{}@{v}", table.dir()));
                    }
                }
                Err(e) => {
                    tracing::warn!(stream = %id, error = %e, "the Delta log could not be brought level");
                    self.recovery.delta_behind.push(e.to_string());
                }
            }
        }
        Ok(())
    }

    /// Writes the Delta logs of `stream` (every stream when `None`) anew from the manifest:
    /// the old logs are removed, then one commit per table adds every live file. For a log
    /// that was deleted, damaged, or kept while [`Config::delta`](crate::archive::config::Config::delta) was
    /// off.
    pub fn publish(&mut self, stream: Option<&str>) -> Result<Vec<PublishReport>> {
        self.writable()?;
        let ids: Vec<String> = match stream {
            Some(s) if self.commit.state().streams.contains_key(s) => vec![s.to_owned()],
            Some(s) => return Err(ArchiveError::UnknownStream(s.to_owned())),
            None => self.commit.state().streams.keys().cloned().collect(),
        };
        if self.delta.is_none() {
            self.delta = Some(Publisher::new(&self.root, self.disk.clone())?);
        }
        let mut out = Vec::new();
        for id in ids {
            if let Some(report) = self.purge_retired(&id)? {
                tracing::info!(stream = %id, files = report.files_in, "rewrote files holding retired row groups");
            }
            if let Some(p) = self.delta.as_mut() {
                p.discard(&id, None)?;
            }
            let done = self.level_stream(&id)?;
            let state = &self.commit.state().streams[&id];
            for table in Table::BOTH {
                out.push(PublishReport {
                    stream: id.clone(),
                    table: table.dir(),
                    path: table_dir(&self.root, &id, table)
                        .to_string_lossy()
                        .into_owned(),
                    version: done.iter().find(|(t, _)| *t == table).map(|(_, v)| *v),
                    files: table.live(state).len(),
                });
            }
        }
        Ok(out)
    }

    /// A Delta checkpoint of every stream's tables (after the manifest's own checkpoint). A
    /// failure is logged: a log without a checkpoint is still exact, only slower to open.
    pub(crate) fn checkpoint_delta_logs(&mut self) {
        let ids: Vec<String> = self.commit.state().streams.keys().cloned().collect();
        if let Some(p) = self.delta.as_mut() {
            for id in ids {
                if let Err(e) = p.checkpoint(&id) {
                    tracing::warn!(stream = %id, error = %e, "no Delta checkpoint");
                }
            }
        }
    }

    /// The files `stream`'s `table` log shows (absolute paths, or the cold tier's URLs), in
    /// name order: what a Delta reader reads. Refused when the log is missing or is not level
    /// with the manifest (a crash or a failed write left it behind, or the archive was
    /// written with the log turned off), naming the command that brings it level.
    pub fn delta_files(&self, stream: &str, table: Table) -> Result<Vec<String>> {
        match &self.delta {
            Some(p) => self.delta_files_with(&p.kernel.engine, stream, table),
            None => self.delta_files_with(&Kernel::new()?.engine, stream, table),
        }
    }

    /// Every stream's Delta tables as `inspect` shows them, read on one engine.
    pub(crate) fn describe_delta(
        &self,
    ) -> Result<BTreeMap<String, Vec<crate::archive::engine::describe::DeltaDescription>>> {
        let own = match &self.delta {
            Some(_) => None,
            None => Some(Kernel::new()?),
        };
        let engine = match (&self.delta, &own) {
            (Some(p), _) => &p.kernel.engine,
            (None, Some(k)) => &k.engine,
            (None, None) => return Ok(BTreeMap::new()),
        };
        let mut out = BTreeMap::new();
        for id in self.commit.state().streams.keys() {
            let tables = Table::BOTH
                .into_iter()
                .map(|table| {
                    let (level, files, note) = match self.delta_files_with(engine, id, table) {
                        Ok(files) => (true, files.len(), None),
                        Err(e) => (false, 0, Some(e.to_string())),
                    };
                    crate::archive::engine::describe::DeltaDescription {
                        table: table.dir().to_owned(),
                        path: table_dir(&self.root, id, table).display().to_string(),
                        level,
                        files,
                        note,
                    }
                })
                .collect();
            out.insert(id.clone(), tables);
        }
        Ok(out)
    }

    /// [`Archive::delta_files`] on `engine` (the publisher's, or one made for the call).
    fn delta_files_with(&self, engine: &Engine, stream: &str, table: Table) -> Result<Vec<String>> {
        let state = self
            .commit
            .state()
            .streams
            .get(stream)
            .ok_or_else(|| ArchiveError::UnknownStream(stream.to_owned()))?;
        let behind = |why: String| {
            ArchiveError::Delta {
            stream: stream.to_owned(),
            table: table.dir(),
            message: format!(
                "{why}; run `series-archive publish {} --stream {stream}` to write it anew from the manifest",
                self.root.display()
            ),
        }
        };
        let Some(shown) = shown_by_log(engine, &self.root, stream, table)? else {
            let live = table.live(state).len();
            if live == 0 {
                return Ok(Vec::new());
            }
            return Err(behind(format!(
                "there is no log, and the manifest holds {live} file(s)"
            )));
        };
        if table == Table::Rows {
            let stale = crate::archive::plan::lifecycle::files_holding_retired(state)
                .into_iter()
                .filter(|&r| r)
                .count();
            if stale > 0 {
                return Err(behind(format!(
                    "{stale} live file(s) still hold retired row groups beside live ones (a retirement's rewrite did not finish), which a Delta reader would read"
                )));
            }
        }
        let replica = super::replicate::recorded(&self.root)?;
        if let Some(diff) = Diff::of(state, table, Some(&shown), replica.as_deref()) {
            return Err(behind(format!(
                "the log is not level with the manifest: it lacks {} live file(s) and shows {} that are not live",
                diff.adds.len(),
                diff.removes.len()
            )));
        }
        let dir = table_dir(&self.root, stream, table);
        // A file evicted into the replica is read from there.
        let evicted: BTreeMap<String, &str> = table
            .live(state)
            .iter()
            .filter_map(|f| {
                let path = log_path_beside(f, table, replica.as_deref());
                Some((path, f.cold.as_deref()?))
            })
            .filter(|(path, _)| !path.contains("://"))
            .collect();
        let mut out: Vec<String> = shown
            .into_iter()
            .map(|p| {
                if p.contains("://") {
                    p
                } else if let Some(url) = evicted.get(&p) {
                    (*url).to_owned()
                } else {
                    dir.join(&p).to_string_lossy().into_owned()
                }
            })
            .collect();
        out.sort_by(|a, b| file_name(a).cmp(file_name(b)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_expires_what_lies_before_its_previous_checkpoint_and_no_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path();
        let touch = |name: String| std::fs::write(log.join(name), b"{}").expect("write");
        for v in 0..=350u64 {
            touch(format!("{v:020}.json"));
            touch(format!("{v:020}.crc"));
        }
        for v in [100u64, 200, 300] {
            touch(format!("{v:020}.checkpoint.parquet"));
        }
        touch("_last_checkpoint".to_owned());
        touch("00000000000000000351.json#1".to_owned());
        let left = || -> BTreeSet<String> {
            std::fs::read_dir(log)
                .expect("list")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        };
        // A first checkpoint has no earlier one: nothing goes.
        assert_eq!(expire_log(log, 100).expect("expire"), 0);
        // After the one at 300: every version below the previous (200) goes, oldest first.
        assert_eq!(expire_log(log, 300).expect("expire"), 200 * 2 + 1);
        let names = left();
        assert!(!names.contains(&format!("{:020}.json", 199)));
        assert!(!names.contains(&format!("{:020}.checkpoint.parquet", 100)));
        for kept in [
            format!("{:020}.json", 200),
            format!("{:020}.crc", 200),
            format!("{:020}.checkpoint.parquet", 200),
            format!("{:020}.checkpoint.parquet", 300),
            format!("{:020}.json", 350),
            "_last_checkpoint".to_owned(),
            "00000000000000000351.json#1".to_owned(),
        ] {
            assert!(names.contains(&kept), "{kept} kept");
        }
        assert_eq!(names.len(), 151 * 2 + 2 + 2);
        // Two checkpoints close together keep the newest KEPT_VERSIONS versions at least:
        // after one at 301, below 201 (not below 300).
        touch(format!("{:020}.checkpoint.parquet", 301));
        assert_eq!(expire_log(log, 301).expect("expire"), 3);
        let names = left();
        assert!(!names.contains(&format!("{:020}.json", 200)));
        assert!(names.contains(&format!("{:020}.json", 201)));
        assert_eq!(
            log_version("00000000000000000007.checkpoint.0000000001.0000000002.parquet"),
            Some((7, true))
        );
        assert_eq!(log_version("00000000000000000007.json"), Some((7, false)));
        assert_eq!(log_version("00000000000000000007.json#3"), None);
        assert_eq!(log_version("_last_checkpoint"), None);
    }

    fn file(path: &str, cold: Option<&str>) -> SegmentFile {
        let span = crate::archive::format::manifest::Span {
            offset: 0,
            len: 0,
            crc32c: 0,
        };
        SegmentFile {
            name: 1,
            path: path.into(),
            bytes: 0,
            barrier: 1,
            sealed_at_ns: 0,
            footer: span,
            groups: Vec::new().into(),
            cold: cold.map(str::to_owned),
            run: None,
            format: None,
            first_level: None,
            elided: None,
        }
    }

    #[test]
    fn a_files_log_path_is_its_path_under_the_table_root() {
        let cases = [
            (
                "streams/capture/rows/000000000003.parquet",
                Table::Rows,
                "000000000003.parquet",
            ),
            (
                "streams/capture/levels/level=2/000000000010.parquet",
                Table::Levels,
                "level=2/000000000010.parquet",
            ),
            // A stream may be called after a table: the root is taken whole, not searched.
            (
                "streams/rows/rows/000000000005.parquet",
                Table::Rows,
                "000000000005.parquet",
            ),
            (
                "streams/levels/levels/level=0/000000000006.parquet",
                Table::Levels,
                "level=0/000000000006.parquet",
            ),
        ];
        for (path, table, want) in cases {
            assert_eq!(log_path(&file(path, None), table), want, "{path}");
        }
        let url = "s3://bucket/site/streams/rows/rows/000000000005.parquet";
        assert_eq!(
            log_path(
                &file("streams/rows/rows/000000000005.parquet", Some(url)),
                Table::Rows
            ),
            url
        );
    }
}
