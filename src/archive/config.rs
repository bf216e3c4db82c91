//! How an archive is assembled: its streams, clock, lifetimes, compaction, cold tier and (for
//! tests) injected faults. The pieces live in their own modules (`clock`, `faults`, `spec`);
//! this one only gathers them, so the lifecycle depends on it and not the reverse.

use crate::archive::clock::{Clock, SystemClock};
use crate::archive::error::Result;
use crate::archive::format::spec::StreamSpec;
use crate::archive::io::faults::Faults;
use crate::archive::plan::retention::{Compaction, Retention};
use crate::contract::Stream;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How an archive is assembled.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) streams: Vec<StreamSpec>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) faults: Faults,
    pub(crate) storage: Option<crate::archive::io::storage::Disk>,
    pub(crate) requests: crate::archive::io::store::RequestLog,
    pub(crate) read_only: bool,
    pub(crate) retention: BTreeMap<String, Retention>,
    pub(crate) compaction: Compaction,
    pub(crate) checkpoint_bytes: u64,
    pub(crate) repair: bool,
    pub(crate) cold: Option<Arc<crate::archive::io::cold::ColdTier>>,
    pub(crate) offload: BTreeMap<String, crate::archive::plan::offload::OffloadPolicy>,
    pub(crate) delta: bool,
    pub(crate) level_cache_cells: usize,
    pub(crate) raw_cache_bytes: usize,
    pub(crate) scope: Option<crate::archive::format::manifest::Scope>,
    pub(crate) replica_cache: Option<std::path::PathBuf>,
    pub(crate) cache_size: Option<u64>,
    pub(crate) replica: Option<Arc<crate::archive::io::cold::ColdTier>>,
    pub(crate) replication: bool,
    pub(crate) max_lag: Option<(u64, std::time::Duration)>,
    /// For an open of a replica (`replicate::open_url`): the bucket every file the manifest
    /// names locally is read from, and the cache of its ranges. Set before the open, since
    /// the replay reads the rows of files recorded by their row groups (format version 11).
    pub(crate) files_in: Option<(
        Arc<crate::archive::io::cold::ColdTier>,
        Option<Arc<crate::archive::io::cache::RangeCache>>,
    )>,
}

/// The bytes appended to a manifest generation past which a new one starts with a snapshot (the
/// default; see [`Config::checkpoint_bytes`]).
pub const CHECKPOINT_BYTES: u64 = 8 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            streams: Vec::new(),
            clock: Arc::new(SystemClock),
            faults: Faults::default(),
            storage: None,
            requests: crate::archive::io::store::RequestLog::default(),
            read_only: false,
            retention: BTreeMap::new(),
            compaction: Compaction::default(),
            checkpoint_bytes: CHECKPOINT_BYTES,
            repair: false,
            cold: None,
            offload: BTreeMap::new(),
            delta: true,
            level_cache_cells: crate::archive::format::levels::LEVEL_CACHE_CELLS,
            raw_cache_bytes: crate::archive::io::decoded::RAW_CACHE_BYTES,
            scope: None,
            replica_cache: None,
            files_in: None,
            cache_size: None,
            replica: None,
            replication: true,
            max_lag: None,
        }
    }
}

impl Config {
    /// An empty configuration: no streams, the system clock, writable.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where a read-only open of a replica by its URL ([`crate::archive::reader::open`] of
    /// `s3://bucket/prefix`) keeps what it fetched from the bucket: a directory of its own per
    /// URL beneath `dir`, holding the bucket's manifest (a later open fetches only the parts
    /// replicated since) and a bounded cache of the footers and row groups its reads fetched
    /// ([`Config::cache_size`]). Without it, beneath the system's temporary directory.
    pub fn replica_cache(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.replica_cache = Some(dir.into());
        self
    }

    /// The most bytes of footers and row groups a read-only open of a replica by its URL
    /// keeps in its cache directory ([`Config::replica_cache`]), least recently used removed
    /// first; a range larger than a sixteenth of it is never kept. 0 keeps none (every read
    /// goes to the bucket). 256 MiB when not set.
    pub fn cache_size(mut self, bytes: u64) -> Self {
        self.cache_size = Some(bytes);
        self
    }

    /// Selects a stream by its row type.
    pub fn select<T: Stream>(mut self) -> Result<Self> {
        self.streams.push(StreamSpec::typed::<T>()?);
        Ok(self)
    }

    /// Selects a stream declared at run time.
    pub fn stream(mut self, spec: StreamSpec) -> Self {
        self.streams.push(spec);
        self
    }

    /// Uses `clock` for barrier timestamps.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Installs a fault hook (crash and failure tests): the storage backend is wrapped in
    /// the backends the hooks describe (see [`Faults::over`]).
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Keeps the archive's files through `storage` (the local directory,
    /// [`LocalDisk`](crate::archive::LocalDisk), when not set). Every durable operation and
    /// every read of a stored file goes through it.
    pub fn storage(mut self, storage: crate::archive::io::storage::Disk) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Adds the requests of every handle opened with this configuration (and its clones) to
    /// `log` when the handle is dropped (the CLI's `--requests`).
    pub fn requests(mut self, log: crate::archive::io::store::RequestLog) -> Self {
        self.requests = log;
        self
    }

    /// The backend this archive's files go through: the configured one (or the local
    /// directory) with the configured faults on it.
    pub(crate) fn disk(&self) -> crate::archive::io::storage::Disk {
        let base = self
            .storage
            .clone()
            .unwrap_or_else(|| Arc::new(crate::archive::io::storage::LocalDisk));
        self.faults.over(base)
    }

    /// Whether a writable archive keeps each stream's Delta log (`_delta_log/` beside its
    /// rows and its levels) level with the manifest (the default). Off, no log is written or
    /// brought level, and one left from before falls behind: `series-archive files` then
    /// refuses to read through it until `series-archive publish` rebuilds it.
    pub fn delta(mut self, on: bool) -> Self {
        self.delta = on;
        self
    }

    /// How many decoded level cells the open keeps for surveys and folds (about 100 bytes
    /// each; the default, [`crate::archive::format::levels::LEVEL_CACHE_CELLS`], is about 25 MiB). A
    /// long-lived reader that surveys a whole stream's finest level over and over (a server)
    /// wants that level held whole.
    pub fn level_cache_cells(mut self, cells: usize) -> Self {
        self.level_cache_cells = cells;
        self
    }

    /// How many bytes of decoded data row groups the open keeps for surveys and folds that
    /// answer from raw rows (the default, `RAW_CACHE_BYTES`,
    /// is 64 MiB; 0 keeps none). A fleet's packed row group holds thousands of tracks' rows:
    /// kept decoded, a long-lived reader's next read of any of them costs no read, digest or
    /// decompression. A one-shot reader wants 0: it decodes only the rows it answers.
    pub fn raw_cache_bytes(mut self, bytes: usize) -> Self {
        self.raw_cache_bytes = bytes;
        self
    }

    /// Opens without the write lock, without repairing and without writing anything.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// A read-only open that catalogs only the tracks of `stream` beneath `track` (labels,
    /// outermost first): what a one-shot reader of one track or prefix of a large fleet
    /// needs. Replay still applies and checks every record, but the catalog entries, floors
    /// and age marks of every other track are left out, so the open costs far less time and
    /// memory than one of the whole archive. A read of another stream, or of a selection
    /// not at or beneath `track`, is refused ([`crate::archive::ReadError::BadSelection`],
    /// never an answer short of the tracks left out); `describe` is refused; and
    /// [`crate::archive::Archive::state`] holds only the scope's tracks. Only a read-only open
    /// takes a scope: a writable one refuses it.
    pub fn scope(mut self, stream: impl Into<String>, track: Vec<String>) -> Self {
        self.scope = Some(crate::archive::format::manifest::Scope {
            stream: stream.into(),
            track,
        });
        self
    }

    /// Lets a writable open get past a manifest damaged mid-log (a record that fails its
    /// check with valid records after it): the open starts a new generation from the trusted
    /// prefix and keeps the whole damaged generation, and every file only its lost records
    /// named, in `.quarantine/` — evidence, never deleted. What that loses is shown first by
    /// [`crate::archive::engine::Archive::repair_plan`]. Without it (the default) such an open refuses.
    pub fn repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Declares the cold tier: segments moved there by [`crate::archive::engine::Archive::offload`]
    /// (under `policy` per stream, see [`Config::offload`]) are read from it transparently. A
    /// writable open removes objects under the tier's `streams/` that no record names (an
    /// upload a crash cut off before its record).
    pub fn cold(mut self, tier: crate::archive::io::cold::ColdTier) -> Self {
        self.cold = Some(Arc::new(tier));
        self
    }

    /// Declares `tier` the archive's replica, the bucket prefix that becomes a whole archive
    /// ([`crate::archive::replicate`]): a writable open claims its prefix and records it in
    /// the archive's `REPLICA` file (once; refused when the archive has another replica, or
    /// the prefix belongs to another archive or overlaps a cold tier), then replicates every
    /// commit to it. An archive whose replica is already recorded needs no declaration: every
    /// writable open replicates to it.
    pub fn replicate(mut self, tier: crate::archive::io::cold::ColdTier) -> Self {
        self.replica = Some(Arc::new(tier));
        self
    }

    /// Whether a writable open replicates to the archive's recorded replica on a thread of its
    /// own, each commit as it is made (the default). Off, nothing replicates until a pass is
    /// run ([`crate::archive::replicate::replicate`], `series-archive replicate`).
    pub fn replication(mut self, on: bool) -> Self {
        self.replication = on;
        self
    }

    /// Bounds the replica's lag: a barrier returns only once the bucket holds every commit
    /// of this handle but the newest `commits` (0: the barrier itself), waiting at most
    /// `wait`; past it the barrier (durable locally) answers a
    /// [`crate::archive::ArchiveError::Replica`] saying where the bucket stands. Without a
    /// bound (the default) replication never holds a barrier up.
    pub fn max_lag(mut self, commits: u64, wait: std::time::Duration) -> Self {
        self.max_lag = Some((commits, wait));
        self
    }

    /// Declares when `stream`'s data files move to the cold tier (level files stay local).
    pub fn offload(
        mut self,
        stream: impl Into<String>,
        policy: crate::archive::plan::offload::OffloadPolicy,
    ) -> Self {
        self.offload.insert(stream.into(), policy);
        self
    }

    /// Declares `stream`'s lifetimes (checked against its declaration at open). A stream
    /// without a declaration keeps everything.
    pub fn retention(mut self, stream: impl Into<String>, retention: Retention) -> Self {
        self.retention.insert(stream.into(), retention);
        self
    }

    /// How compaction shapes files (every stream).
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = compaction;
        self
    }

    /// The bytes appended to a manifest generation past which
    /// [`crate::archive::engine::Archive::maintain`] starts a new generation with a snapshot
    /// ([`CHECKPOINT_BYTES`] unless told), once they are also past the generation's own
    /// snapshot (see [`crate::archive::engine::Archive::checkpoint_due`]).
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = bytes;
        self
    }
}
