//! The storage seam: one small trait every durable operation and every read of a stored file
//! goes through, in the spirit of `object_store::ObjectStore` and redb's `StorageBackend`.
//!
//! - [`LocalDisk`] is the archive's directory on a local file system (the default).
//! - [`Failing`] wraps a backend and asks a hook before each operation whether it fails, as
//!   a disk would (EIO, ENOSPC, a timeout, a power cut): what `Faults::failing` builds.
//! - [`Crashing`] wraps a backend and calls a hook at each named point of the write path
//!   ([`FaultPoint`]), where a crash test aborts the process: what `Faults::new` and
//!   `Faults::abort_at` build.
//!
//! A backend is handed to an archive with `Config::storage`; `Config::faults` wraps the
//! configured one. Each operation is one call, so a wrapper sees exactly the sequence the
//! write path performs: a file's creation (the `Create` and the first `Write`), each append
//! to the manifest, each sync, rename, directory sync, directory creation and removal, and
//! each read of a stored file's bytes. Listings and whole-file reads made while recovering
//! are not operations a disk fails in a way the archive could tell apart, and stay local.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The named points of the write path at which a test may crash the process. Deliberately
/// exhaustive (unlike the error kinds): tests/crash.rs matches every point, so a new one
/// cannot land without saying what a crash there leaves.
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
    /// A replication pass uploaded one data or level file (and confirmed it whole); more
    /// may follow, and no manifest part names it yet.
    AfterReplicaFile,
    /// A replication pass uploaded its files and the Delta logs' new objects; the manifest
    /// part naming them is not written.
    AfterReplicaDelta,
    /// A replication pass wrote its manifest part (the bucket's commit); the objects the
    /// part proves unnamed are not deleted yet.
    AfterReplicaPart,
}

impl FaultPoint {
    /// Every point, in write-path order.
    pub const ALL: [FaultPoint; 12] = [
        FaultPoint::AfterDataWrite,
        FaultPoint::AfterDataRename,
        FaultPoint::MidRecord,
        FaultPoint::AfterRecord,
        FaultPoint::AfterSnapshotWrite,
        FaultPoint::AfterSnapshotRename,
        FaultPoint::AfterUpload,
        FaultPoint::AfterDeltaCommit,
        FaultPoint::AfterDeltaCheckpoint,
        FaultPoint::AfterReplicaFile,
        FaultPoint::AfterReplicaDelta,
        FaultPoint::AfterReplicaPart,
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
            FaultPoint::AfterReplicaFile => "after-replica-file",
            FaultPoint::AfterReplicaDelta => "after-replica-delta",
            FaultPoint::AfterReplicaPart => "after-replica-part",
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
#[non_exhaustive]
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

/// A backend shared by everything one archive opens.
pub type Disk = Arc<dyn Storage>;

/// A file being written: bytes in order, then a sync that makes them durable.
pub trait WriteFile: Send + Sync {
    /// Writes all of `bytes` at the end of the file.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Flushes the file's bytes and metadata to stable storage.
    fn sync(&mut self) -> std::io::Result<()>;
}

/// A stored file open for ranged reads.
pub trait ReadFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// The file's length in bytes.
    fn len(&self) -> std::io::Result<u64>;
    /// Whether the file holds no bytes.
    fn is_empty(&self) -> std::io::Result<bool> {
        self.len().map(|n| n == 0)
    }
}

/// Where an archive's files live. Paths are the archive's own (under its root).
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates a new file at `path` (it must not exist) to be written and synced.
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>>;
    /// Opens the existing file at `path` to append to it (the manifest's current generation).
    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>>;
    /// Opens the stored file at `path` for ranged reads.
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>>;
    /// Renames `from` to `to` atomically (the same directory tree).
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()>;
    /// Makes the entries of directory `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()>;
    /// Creates `dir` and its missing parents.
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()>;
    /// Removes the file at `path`.
    fn remove_file(&self, path: &Path) -> std::io::Result<()>;
    /// Removes the directory at `path` and everything beneath it.
    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()>;
    /// Called before a read from a cold tier (`what` is the object's URL): a wrapper may fail
    /// it. The object store is asked by the tier itself.
    fn before_cold_read(&self, _what: &Path) -> std::io::Result<()> {
        Ok(())
    }
    /// Called when the write path reaches `point` (between two operations). A crash test's
    /// backend aborts the process here; every other backend does nothing.
    fn reached(&self, _point: FaultPoint) {}
}

/// The archive's directory on a local file system: `std::fs`, with `fsync` for syncs.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalDisk;

struct LocalFile(File);

impl WriteFile for LocalFile {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.0.sync_all()
    }
}

impl ReadFile for LocalFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn len(&self) -> std::io::Result<u64> {
        self.0.metadata().map(|m| m.len())
    }
}

/// The manifest's appends sync data only: its length is known from its records.
struct Appended(File);

impl WriteFile for Appended {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.0.sync_data()
    }
}

impl Storage for LocalDisk {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(LocalFile(file)))
    }

    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(Appended(file)))
    }

    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>> {
        Ok(Box::new(LocalFile(File::open(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        std::fs::remove_dir_all(path)
    }
}

/// What a [`Failing`] backend asks before each operation: an error it answers is what the
/// operation fails with (the operation is not performed).
pub type FailHook = Arc<dyn Fn(Op, &Path) -> Option<std::io::Error> + Send + Sync>;

/// A backend whose operations fail when a hook says so, before they reach `inner`.
pub struct Failing {
    inner: Disk,
    hook: FailHook,
}

impl Failing {
    /// `inner`, failing each operation the hook answers an error for.
    pub fn new(inner: Disk, hook: FailHook) -> Failing {
        Failing { inner, hook }
    }

    fn check(&self, op: Op, path: &Path) -> std::io::Result<()> {
        match (self.hook)(op, path) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Failing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failing")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// A file written through [`Failing`]. A created file's first write is asked once, when it
/// is created (a data file is written in one pass); each append to the manifest is asked
/// on its own (it is written in two halves, so a failure between them tears a record).
struct FailingFile {
    inner: Box<dyn WriteFile>,
    hook: FailHook,
    path: std::path::PathBuf,
    ask_each_write: bool,
}

impl FailingFile {
    fn check(&self, op: Op) -> std::io::Result<()> {
        match (self.hook)(op, &self.path) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl WriteFile for FailingFile {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.ask_each_write {
            self.check(Op::Write)?;
        }
        self.inner.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.check(Op::Sync)?;
        self.inner.sync()
    }
}

struct FailingRead {
    inner: Box<dyn ReadFile>,
    hook: FailHook,
    path: std::path::PathBuf,
}

impl ReadFile for FailingRead {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if let Some(e) = (self.hook)(Op::Read, &self.path) {
            return Err(e);
        }
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
}

impl Storage for Failing {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        self.check(Op::Create, path)?;
        let inner = self.inner.create(path)?;
        self.check(Op::Write, path)?;
        Ok(Box::new(FailingFile {
            inner,
            hook: self.hook.clone(),
            path: path.to_path_buf(),
            ask_each_write: false,
        }))
    }

    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let inner = self.inner.append(path)?;
        Ok(Box::new(FailingFile {
            inner,
            hook: self.hook.clone(),
            path: path.to_path_buf(),
            ask_each_write: true,
        }))
    }

    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>> {
        self.check(Op::Read, path)?;
        let inner = self.inner.open(path)?;
        Ok(Box::new(FailingRead {
            inner,
            hook: self.hook.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.check(Op::Rename, to)?;
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.check(Op::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.check(Op::CreateDir, dir)?;
        self.inner.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.check(Op::Remove, path)?;
        self.inner.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.check(Op::Remove, path)?;
        self.inner.remove_dir_all(path)
    }

    fn before_cold_read(&self, what: &Path) -> std::io::Result<()> {
        self.check(Op::Read, what)?;
        self.inner.before_cold_read(what)
    }

    fn reached(&self, point: FaultPoint) {
        self.inner.reached(point)
    }
}

/// What a [`Crashing`] backend calls at each point of the write path.
pub type PointHook = Arc<dyn Fn(FaultPoint) + Send + Sync>;

/// A backend that calls a hook at each named point of the write path, where a crash test
/// aborts the process (no unwinding, no destructors: what a killed process leaves).
pub struct Crashing {
    inner: Disk,
    hook: PointHook,
}

impl Crashing {
    /// `inner`, calling `hook` at each point reached.
    pub fn new(inner: Disk, hook: PointHook) -> Crashing {
        Crashing { inner, hook }
    }
}

impl fmt::Debug for Crashing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Crashing")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Storage for Crashing {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        self.inner.create(path)
    }

    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        self.inner.append(path)
    }

    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>> {
        self.inner.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_dir_all(path)
    }

    fn before_cold_read(&self, what: &Path) -> std::io::Result<()> {
        self.inner.before_cold_read(what)
    }

    fn reached(&self, point: FaultPoint) {
        (self.hook)(point);
        self.inner.reached(point)
    }
}
