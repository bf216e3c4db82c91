//! Every durability step in one place: write, sync, rename, sync the directory, quarantine.
//! Each step is one operation of the archive's [`Storage`](super::storage::Storage), so a
//! backend that fails (a test's, or a disk's) fails it as a disk would (EIO, ENOSPC, a
//! timeout), and the error names the step and the path.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::io::storage::{Disk, WriteFile};
use std::fs;
use std::path::{Path, PathBuf};

/// Writes `bytes` to a new file at `path` and syncs it.
pub(crate) fn write_synced(disk: &Disk, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = create(disk, path)?;
    file.write_all(bytes)
        .map_err(ArchiveError::io("write", path))?;
    sync(path, file.as_mut())
}

/// Creates a new file at `path` to be written (the first write is checked here, as one).
pub(crate) fn create(disk: &Disk, path: &Path) -> Result<Box<dyn WriteFile>> {
    disk.create(path).map_err(ArchiveError::io("create", path))
}

/// Syncs a file written through [`create`].
pub(crate) fn sync(path: &Path, file: &mut dyn WriteFile) -> Result<()> {
    file.sync().map_err(ArchiveError::io("sync", path))
}

/// Syncs a directory so renames and creations inside it are durable.
pub(crate) fn sync_dir(disk: &Disk, dir: &Path) -> Result<()> {
    disk.sync_dir(dir)
        .map_err(ArchiveError::io("sync directory", dir))
}

/// Renames `from` to `to` (same filesystem; atomic).
pub(crate) fn rename(disk: &Disk, from: &Path, to: &Path) -> Result<()> {
    disk.rename(from, to)
        .map_err(ArchiveError::io("rename into place", to))
}

/// Removes a file the manifest no longer names (already absent is fine), then syncs its
/// directory.
pub(crate) fn remove(disk: &Disk, path: &Path) -> Result<()> {
    remove_all(disk, std::iter::once(path))
}

/// Removes files the manifest no longer names (already absent is fine), then syncs each
/// directory they were in once.
pub(crate) fn remove_all<'p>(disk: &Disk, paths: impl IntoIterator<Item = &'p Path>) -> Result<()> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in paths {
        match disk.remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ArchiveError::io("remove", path)(e)),
        }
        if let Some(parent) = path.parent() {
            dirs.insert(parent.to_path_buf());
        }
    }
    for dir in &dirs {
        sync_dir(disk, dir)?;
    }
    Ok(())
}

/// Creates a directory and its missing parents, syncing the parent of each one created so
/// the new entries survive a power cut (a file the manifest names must keep its directory).
pub(crate) fn create_dir(disk: &Disk, dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.is_dir()).collect();
    disk.create_dir_all(dir)
        .map_err(ArchiveError::io("create directory", dir))?;
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(disk, parent)?;
        }
    }
    Ok(())
}

/// Moves `path` (relative to `root`) into `quarantine`, keeping its relative path, and syncs
/// both directories. Evidence is moved, never deleted.
pub(crate) fn quarantine(
    disk: &Disk,
    root: &Path,
    quarantine: &Path,
    path: &Path,
) -> Result<PathBuf> {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let target = quarantine.join(relative);
    if let Some(parent) = target.parent() {
        create_dir(disk, parent)?;
    }
    disk.rename(path, &target)
        .map_err(ArchiveError::io("move into quarantine", path))?;
    if let Some(parent) = path.parent() {
        sync_dir(disk, parent)?;
    }
    if let Some(parent) = target.parent() {
        sync_dir(disk, parent)?;
    }
    Ok(target)
}

/// Lists the regular files directly inside `dir`, sorted; an absent directory is empty.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArchiveError::io("list", dir)(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(ArchiveError::io("list", dir))?;
        let kind = entry
            .file_type()
            .map_err(ArchiveError::io("stat", entry.path()))?;
        if kind.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Every regular file beneath `dir`, recursively; an absent directory is empty. A Delta
/// log (`_delta_log/`, see `delta.rs`) is not the archive's own files and is never walked:
/// no record names its files, and recovery must not take them for leftovers.
pub(crate) fn walk_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ArchiveError::io("list", &d)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(ArchiveError::io("list", &d))?;
            let kind = entry
                .file_type()
                .map_err(ArchiveError::io("stat", entry.path()))?;
            if kind.is_dir() {
                if entry.file_name() != crate::archive::layout::LOG_DIR {
                    stack.push(entry.path());
                }
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}
