//! Injected faults: the named crash points of the write path, and failures of any durable
//! operation on the storage seam.

use std::fmt;
use std::sync::Arc;

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
    /// A stream table's Delta commit for a manifest record is in place and synced; the
    /// stream's other table (written at the same time, on another thread), or the other
    /// streams, may not have theirs yet.
    AfterDeltaCommit,
    /// A Delta checkpoint that follows the manifest's is written and synced.
    AfterDeltaCheckpoint,
}

impl FaultPoint {
    /// Every point, in write-path order.
    pub const ALL: [FaultPoint; 9] = [
        FaultPoint::AfterDataWrite,
        FaultPoint::AfterDataRename,
        FaultPoint::MidRecord,
        FaultPoint::AfterRecord,
        FaultPoint::AfterSnapshotWrite,
        FaultPoint::AfterSnapshotRename,
        FaultPoint::AfterUpload,
        FaultPoint::AfterDeltaCommit,
        FaultPoint::AfterDeltaCheckpoint,
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
            FaultPoint::AfterDeltaCommit => "after-delta-commit",
            FaultPoint::AfterDeltaCheckpoint => "after-delta-checkpoint",
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
