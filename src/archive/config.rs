//! What an archive is built with: its streams, its clock, and (for tests) its fault points.

use super::error::{ArchiveError, Result};
use super::levels::Ladder;
use super::lifecycle::{Compaction, Retention};
use super::manifest::{ColumnDecl, StreamDecl};
use crate::contract::{At, ErasedRow, Stream};
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use serde_arrow::schema::{SchemaLike, TracingOptions};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The longest stream id, in bytes: the id names a directory, and common file systems
/// (ext4, xfs, btrfs, APFS, NTFS) allow 255 bytes per path component.
pub const MAX_STREAM_ID: usize = 255;

/// Names of the two columns the archive adds to every stored row.
pub const POSITION_COLUMN: &str = "_position";
/// The publish-order column: a stream-wide counter assigned at staging.
pub const SEQ_COLUMN: &str = "_seq";

/// A source of wall-clock time, injected so tests can run days of cadence in seconds.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// A clock that always answers the same instant (tests, golden files).
#[derive(Clone, Copy, Debug)]
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now_ns(&self) -> u64 {
        self.0
    }
}

/// The named points of the write path at which a test may crash the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// A data file is written and synced under `.tmp/` but not renamed into place.
    AfterDataWrite,
    /// Every data file of the barrier is renamed into place; no record names them yet.
    AfterDataRename,
    /// The first half of the barrier's manifest record is written.
    MidRecord,
    /// The barrier's record is written and synced.
    AfterRecord,
    /// A checkpoint's new generation is written and synced under `.tmp/`, not yet in place.
    AfterSnapshotWrite,
    /// A checkpoint's new generation is in place; the old one is not yet removed.
    AfterSnapshotRename,
    /// An offload's objects are uploaded and confirmed whole; no record names them yet.
    AfterUpload,
}

impl FaultPoint {
    /// Every point, in write-path order.
    pub const ALL: [FaultPoint; 7] = [
        FaultPoint::AfterDataWrite,
        FaultPoint::AfterDataRename,
        FaultPoint::MidRecord,
        FaultPoint::AfterRecord,
        FaultPoint::AfterSnapshotWrite,
        FaultPoint::AfterSnapshotRename,
        FaultPoint::AfterUpload,
    ];

    /// The points a barrier (or a compaction swap) passes, in write-path order.
    pub const COMMIT: [FaultPoint; 4] = [
        FaultPoint::AfterDataWrite,
        FaultPoint::AfterDataRename,
        FaultPoint::MidRecord,
        FaultPoint::AfterRecord,
    ];

    /// A stable kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterDataWrite => "after-data-write",
            FaultPoint::AfterDataRename => "after-data-rename",
            FaultPoint::MidRecord => "mid-record",
            FaultPoint::AfterRecord => "after-record",
            FaultPoint::AfterSnapshotWrite => "after-snapshot-write",
            FaultPoint::AfterSnapshotRename => "after-snapshot-rename",
            FaultPoint::AfterUpload => "after-upload",
        }
    }

    /// The point named `name`.
    pub fn parse(name: &str) -> Option<FaultPoint> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One durable operation on the storage seam (`durable.rs`), where an injected failure
/// can make it fail as a disk would.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Creating a new file.
    Create,
    /// Writing a file's bytes (a data, level or generation file, or a manifest append).
    Write,
    /// Syncing a file (`fsync`).
    Sync,
    /// Renaming a file into place (or into quarantine).
    Rename,
    /// Syncing a directory.
    SyncDir,
    /// Creating a directory.
    CreateDir,
    /// Removing a file.
    Remove,
    /// Opening or reading a stored file (a segment's footer or row group).
    Read,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [
        Op::Create,
        Op::Write,
        Op::Sync,
        Op::Rename,
        Op::SyncDir,
        Op::CreateDir,
        Op::Remove,
        Op::Read,
    ];
}

type PointHook = Arc<dyn Fn(FaultPoint) + Send + Sync>;
type FailHook = Arc<dyn Fn(Op, &std::path::Path) -> Option<std::io::Error> + Send + Sync>;

/// Injected faults. Production archives have none. Crash tests install a hook called at each
/// [`FaultPoint`] of the real write path (which aborts the process there); failure tests
/// install one consulted before every durable [`Op`], which answers an error (EIO, ENOSPC, a
/// timeout) to make that operation fail as a disk would.
#[derive(Clone, Default)]
pub struct Faults {
    point: Option<PointHook>,
    fail: Option<FailHook>,
}

impl Faults {
    /// A hook called at each fault point.
    pub fn new(hook: impl Fn(FaultPoint) + Send + Sync + 'static) -> Self {
        Faults {
            point: Some(Arc::new(hook)),
            fail: None,
        }
    }

    /// A hook that aborts the process (no unwinding, no destructors) at `point`.
    pub fn abort_at(point: FaultPoint) -> Self {
        Faults::new(move |at| {
            if at == point {
                std::process::abort();
            }
        })
    }

    /// A hook consulted before every durable operation: an error it answers is what the
    /// operation fails with.
    pub fn failing(
        hook: impl Fn(Op, &std::path::Path) -> Option<std::io::Error> + Send + Sync + 'static,
    ) -> Self {
        Faults {
            point: None,
            fail: Some(Arc::new(hook)),
        }
    }

    pub(crate) fn hit(&self, point: FaultPoint) {
        if let Some(hook) = &self.point {
            hook(point);
        }
    }

    /// Whether `op` on `path` may proceed; the injected error otherwise.
    pub(crate) fn check(&self, op: Op, path: &std::path::Path) -> std::io::Result<()> {
        match self.fail.as_ref().and_then(|hook| hook(op, path)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("points", &self.point.is_some())
            .field("failures", &self.fail.is_some())
            .finish()
    }
}

/// Converts erased typed rows to Arrow and back; present for streams selected by type.
/// Erased typed rows to an Arrow batch of the given fields.
pub(crate) type ToBatch =
    fn(&[At<ErasedRow>], &[FieldRef]) -> std::result::Result<RecordBatch, String>;
/// An Arrow batch back to erased typed rows.
pub(crate) type FromBatch = fn(&RecordBatch) -> std::result::Result<Vec<ErasedRow>, String>;

#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub type_name: &'static str,
    pub to_batch: ToBatch,
    pub from_batch: FromBatch,
}

impl fmt::Debug for Typed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Typed({})", self.type_name)
    }
}

fn to_batch<T: Stream>(
    rows: &[At<ErasedRow>],
    fields: &[FieldRef],
) -> std::result::Result<RecordBatch, String> {
    let mut typed: Vec<&T> = Vec::with_capacity(rows.len());
    for (i, at) in rows.iter().enumerate() {
        typed.push(at.row.downcast_ref::<T>().ok_or_else(|| {
            format!(
                "row {i} is not a {} (the type this stream was selected with)",
                std::any::type_name::<T>()
            )
        })?);
    }
    serde_arrow::to_record_batch(fields, &typed).map_err(|e| e.to_string())
}

fn from_batch<T: Stream>(batch: &RecordBatch) -> std::result::Result<Vec<ErasedRow>, String> {
    let rows: Vec<T> = serde_arrow::from_record_batch(batch).map_err(|e| e.to_string())?;
    Ok(rows.into_iter().map(|r| Arc::new(r) as ErasedRow).collect())
}

/// A stream selected at assembly: its schema, track columns and axis column.
///
/// Two ways reach the same core: [`StreamSpec::typed`] traces the Arrow schema from a
/// `#[stream]` row type, [`StreamSpec::dynamic`] takes a schema and column names at run time.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub(crate) id: String,
    pub(crate) schema: SchemaRef,
    pub(crate) track: Vec<String>,
    pub(crate) axis: Option<String>,
    pub(crate) ladder: Option<Ladder>,
    pub(crate) typed: Option<Typed>,
}

impl StreamSpec {
    /// A stream selected by its row type; rows come back as `Arc<T>` behind `dyn Any`.
    pub fn typed<T: Stream>() -> Result<StreamSpec> {
        let options = TracingOptions::default().strings_as_large_utf8(false);
        let fields = Vec::<FieldRef>::from_type::<T>(options).map_err(|e| {
            ArchiveError::declaration(
                T::ID,
                format!(
                    "cannot trace an Arrow schema from {}: {e}",
                    std::any::type_name::<T>()
                ),
            )
        })?;
        let definition = T::definition();
        Ok(StreamSpec {
            id: T::ID.to_owned(),
            schema: Arc::new(Schema::new(fields)),
            track: definition.track.iter().map(|t| t.to_string()).collect(),
            ladder: definition.axis.as_ref().map(|_| Ladder::ORDINAL),
            axis: definition.axis.map(|a| a.to_string()),
            typed: Some(Typed {
                type_name: std::any::type_name::<T>(),
                to_batch: to_batch::<T>,
                from_batch: from_batch::<T>,
            }),
        })
    }

    /// A stream declared at run time from an Arrow schema and the names of its track
    /// columns (outermost first) and axis column.
    pub fn dynamic(
        id: impl Into<String>,
        schema: SchemaRef,
        track: Vec<String>,
        axis: Option<String>,
    ) -> Result<StreamSpec> {
        let spec = StreamSpec {
            id: id.into(),
            schema,
            track,
            ladder: axis.as_ref().map(|_| Ladder::ORDINAL),
            axis,
            typed: None,
        };
        spec.decl()?;
        Ok(spec)
    }

    /// Declares the level ladder (an axial stream gets [`Ladder::ORDINAL`] unless told
    /// otherwise; `None` builds no levels). Recorded in the manifest: reopening with another
    /// ladder is an error.
    pub fn with_ladder(mut self, ladder: Option<Ladder>) -> Self {
        self.ladder = ladder;
        self
    }

    /// The stream id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The row schema (without the archive's own columns).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Validates the declaration and derives what the manifest records of it. Nothing is
    /// written before this passes.
    pub(crate) fn decl(&self) -> Result<StreamDecl> {
        let id = &self.id;
        let bad = |m: String| ArchiveError::declaration(id, m);
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad(
                "a stream id is a plain identifier: letters, digits, '_' and '-'".into(),
            ));
        }
        if id.len() > MAX_STREAM_ID {
            // The id names a directory (`streams/<id>/`): a longer one fails at the first
            // write, after its declaration would already be recorded.
            return Err(bad(format!(
                "a stream id is at most {MAX_STREAM_ID} bytes (it names a directory, and file systems allow {MAX_STREAM_ID}); this one is {} bytes",
                id.len()
            )));
        }
        if self.track.len() > crate::contract::MAX_DEPTH {
            return Err(bad(format!(
                "a track has at most 4 components; {} were declared",
                self.track.len()
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for field in self.schema.fields() {
            let name = field.name();
            if name == POSITION_COLUMN || name == SEQ_COLUMN {
                return Err(bad(format!(
                    "column {name:?} is reserved for the archive's own bookkeeping; rename it"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(bad(format!("column {name:?} appears twice")));
            }
        }
        for (i, t) in self.track.iter().enumerate() {
            let field = self
                .schema
                .field_with_name(t)
                .map_err(|_| bad(format!("track column {t:?} is not a column of the stream")))?;
            if self.track[..i].contains(t) {
                return Err(bad(format!("track column {t:?} is named twice")));
            }
            if !is_label_type(field.data_type()) {
                return Err(bad(format!(
                    "track column {t:?} is {}; a track component is text, an integer or a boolean",
                    field.data_type()
                )));
            }
        }
        if let Some(axis) = &self.axis {
            let field = self.schema.field_with_name(axis).map_err(|_| {
                bad(format!(
                    "axis column {axis:?} is not a column of the stream"
                ))
            })?;
            if self.track.contains(axis) {
                return Err(bad(format!(
                    "axis column {axis:?} is also a track column; a coordinate is one or the other"
                )));
            }
            if field.data_type() != &DataType::UInt64 {
                return Err(bad(format!(
                    "axis column {axis:?} is {}; the axis is a u64 (UInt64) coordinate",
                    field.data_type()
                )));
            }
            if field.is_nullable() {
                return Err(bad(format!(
                    "axis column {axis:?} is nullable; every row needs an axis value"
                )));
            }
        }
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|f| ColumnDecl {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect();
        let measured = self
            .schema
            .fields()
            .iter()
            .filter(|f| f.data_type().is_numeric())
            .map(|f| f.name().clone())
            .filter(|n| Some(n) != self.axis.as_ref() && !self.track.contains(n))
            .collect();
        if self.ladder.is_some() && self.axis.is_none() {
            return Err(bad(
                "levels sit on the axis: a stream without an axis has no ladder".into(),
            ));
        }
        if let Some(l) = self.ladder {
            Ladder::new(l.base, l.factor, l.levels).map_err(bad)?;
        }
        Ok(StreamDecl {
            id: id.clone(),
            columns,
            track: self.track.clone(),
            axis: self.axis.clone(),
            measured,
            ladder: self.ladder,
        })
    }
}

fn is_label_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
    ) || t.is_integer()
}

/// How an archive is assembled.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) streams: Vec<StreamSpec>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) faults: Faults,
    pub(crate) read_only: bool,
    pub(crate) retention: BTreeMap<String, Retention>,
    pub(crate) compaction: Compaction,
    pub(crate) checkpoint_bytes: u64,
    pub(crate) repair: bool,
    pub(crate) cold: Option<Arc<crate::archive::cold::ColdTier>>,
    pub(crate) offload: BTreeMap<String, crate::archive::lifecycle::OffloadPolicy>,
}

/// The manifest size past which a new generation starts with a snapshot (the default).
pub const CHECKPOINT_BYTES: u64 = 8 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            streams: Vec::new(),
            clock: Arc::new(SystemClock),
            faults: Faults::default(),
            read_only: false,
            retention: BTreeMap::new(),
            compaction: Compaction::default(),
            checkpoint_bytes: CHECKPOINT_BYTES,
            repair: false,
            cold: None,
            offload: BTreeMap::new(),
        }
    }
}

impl Config {
    /// An empty configuration: no streams, the system clock, writable.
    pub fn new() -> Self {
        Self::default()
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

    /// Installs a fault hook (crash tests).
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Opens without the write lock, without repairing and without writing anything.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Lets a writable open get past a manifest damaged mid-log (a record that fails its
    /// check with valid records after it): the open starts a new generation from the trusted
    /// prefix and keeps the whole damaged generation, and every file only its lost records
    /// named, in `.quarantine/` — evidence, never deleted. What that loses is shown first by
    /// [`crate::archive::Archive::repair_plan`]. Without it (the default) such an open refuses.
    pub fn repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Declares the cold tier: segments moved there by [`crate::archive::Archive::offload`]
    /// (under `policy` per stream, see [`Config::offload`]) are read from it transparently. A
    /// writable open removes objects under the tier's `streams/` that no record names (an
    /// upload a crash cut off before its record).
    pub fn cold(mut self, tier: crate::archive::cold::ColdTier) -> Self {
        self.cold = Some(Arc::new(tier));
        self
    }

    /// Declares when `stream`'s data files move to the cold tier (level files stay local).
    pub fn offload(
        mut self,
        stream: impl Into<String>,
        policy: crate::archive::lifecycle::OffloadPolicy,
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

    /// The manifest size past which [`crate::archive::Archive::maintain`] starts a new
    /// generation with a snapshot ([`CHECKPOINT_BYTES`] unless told).
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = bytes;
        self
    }
}
