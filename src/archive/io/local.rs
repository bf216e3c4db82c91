//! Reads, listings and removals of local files that are not a durable write: lengths,
//! whole-file reads, directory listings, a file's Parquet footer, and the local object
//! store the Delta kernel writes through. Durable writes are `durable`'s.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::io::storage::Disk;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The length of the file at `path`.
pub(crate) fn len(path: &Path) -> std::io::Result<u64> {
    std::fs::metadata(path).map(|m| m.len())
}

/// The whole file at `path`.
pub(crate) fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Bytes `[offset, offset + len)` of the file at `path`; `UnexpectedEof` when it is shorter.
pub(crate) fn read_range(path: &Path, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, offset)?;
    Ok(bytes)
}

/// Removes the files at `paths` in order (already absent is fine), outside the storage seam:
/// for derived files whose removal no operation of the archive depends on.
pub(crate) fn remove_files<'p>(
    paths: impl IntoIterator<Item = &'p Path>,
) -> std::io::Result<usize> {
    let mut removed = 0;
    for path in paths {
        match std::fs::remove_file(path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Replaces the file at `path` with `bytes` (written beside it, then renamed over it) without
/// syncing: for advisory files whose loss costs nothing but a worse estimate.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staged = path.with_file_name(format!(".{name}.{}", std::process::id()));
    std::fs::write(&staged, bytes)?;
    std::fs::rename(&staged, path)
}

/// The whole file at `path`, as text.
pub(crate) fn read_to_string(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// The file at `path` as text, or `None` when it is absent.
pub(crate) fn read_if_present(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ArchiveError::io("read", path)(e)),
    }
}

/// When the file at `path` was last modified, in nanoseconds since the epoch (0 when the
/// file system cannot say).
pub(crate) fn modified_ns(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One entry of a directory.
pub(crate) struct Entry {
    /// Its file name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Whether it is a directory.
    pub is_dir: bool,
}

/// The entries directly inside `dir` with UTF-8 names, sorted by name; an absent directory
/// is empty.
pub(crate) fn entries(dir: &Path) -> Result<Vec<Entry>> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArchiveError::io("list", dir)(e)),
    };
    let mut out = Vec::new();
    for entry in listing {
        let entry = entry.map_err(ArchiveError::io("list", dir))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        out.push(Entry {
            name,
            is_dir: path.is_dir(),
            path,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The names of the directories directly inside `dir`, sorted; an absent directory is empty.
pub(crate) fn subdirectories(dir: &Path) -> Result<Vec<String>> {
    Ok(entries(dir)?
        .into_iter()
        .filter(|e| e.is_dir)
        .map(|e| e.name)
        .collect())
}

/// Whether `dir` exists and holds anything.
pub(crate) fn holds_anything(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// The Parquet footer of the file at `path`, or `None` when it cannot be read.
pub(crate) fn footer(path: &Path) -> Option<ParquetMetaData> {
    let file = std::fs::File::open(path).ok()?;
    ParquetMetaDataReader::new().parse_and_finish(&file).ok()
}

/// Removes a file or a whole directory (evidence being purged), through the fault points.
pub(crate) fn remove_tree(disk: &Disk, path: &Path) -> Result<()> {
    if path.is_dir() {
        disk.remove_dir_all(path)
    } else {
        disk.remove_file(path)
    }
    .map_err(ArchiveError::io("remove", path))
}

/// Moves `from` to `to`, creating `to`'s missing parents (a log set aside as evidence).
pub(crate) fn move_to(disk: &Disk, from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        super::durable::create_dir(disk, parent)?;
    }
    disk.rename(from, to)
        .map_err(ArchiveError::io("move aside", from))
}

/// Syncs the file or directory at `path`.
pub(crate) fn sync_path(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(ArchiveError::io("sync", path))
}

/// The local file system as an object store (what the Delta kernel reads and writes
/// through).
pub(crate) fn local_object_store() -> Arc<object_store::local::LocalFileSystem> {
    Arc::new(object_store::local::LocalFileSystem::new())
}
