//! The one-writer lock: `LOCK` at the root, held by an open file description while a
//! writable archive is open.

use crate::archive::error::{ArchiveError, Result};
use crate::archive::layout::{LOCK_FILE, MANIFEST_DIR};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

/// Takes the archive's write lock at `root`, or says who holds it.
pub(crate) fn acquire(root: &Path) -> Result<Lock> {
    let path = root.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(ArchiveError::io("open lock file", &path))?;
    // A lock is held by an open file description, which a child process forked by any
    // thread of this process shares until it execs: an archive just closed can look locked
    // for that instant. A writer that really holds it holds it far longer than the quarter
    // second given here.
    let deadline = Instant::now() + Duration::from_millis(250);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Lock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ArchiveError::Locked {
                    path: root.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(ArchiveError::io("lock", &path)(e)),
        }
    }
}

/// Refuses a read-only open of a directory that is not an archive (no manifest directory).
pub(crate) fn is_archive(root: &Path) -> Result<()> {
    if root.join(MANIFEST_DIR).is_dir() {
        return Ok(());
    }
    Err(ArchiveError::io("open archive", root.join(MANIFEST_DIR))(
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no manifest directory: not an archive",
        ),
    ))
}
