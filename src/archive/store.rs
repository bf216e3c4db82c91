//! Where the archive's stored files are read from: the local directory, or a cold tier.
//!
//! Every read of a data or level file goes through a `Store`: it knows the root, the injected
//! faults, the configured cold tier (and opens others from the URLs the manifest records),
//! and caches the verified footer of each file (one cache for rows, surveys, folds and
//! compaction), so a cold read costs one ranged GET per row group once a file has been
//! opened.

use super::cold::{ColdError, ColdTier};
use super::faults::Faults;
use bytes::Bytes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Which wall a read of a stored file hit. The archive keeps the kind (a reader retries on
/// `Missing` once the manifest moved, an operator retries `Unavailable`, `verify` names
/// `Corrupt` files); the serving contract sees every kind as `Unreadable`, transient only
/// for `Unavailable`, and the conversion happens at the contract boundary alone
/// ([`StoredError`] into [`crate::contract::Unreadable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredErrorKind {
    /// A file the manifest names is not there: deleted under a reader by a compaction or
    /// retirement it has not replayed, or lost.
    Missing,
    /// The operating system or the object store refused the read, and retrying will not help.
    Io,
    /// The bytes are not what the manifest records (length, digest, decoding), or the
    /// manifest itself is damaged past its trusted prefix.
    Corrupt,
    /// A cold tier timed out, throttled or reset: the same read, later, may answer.
    Unavailable,
    /// This handle cannot answer whole: an earlier barrier failed and the rows it was
    /// sealing are gone from it. Reopening serves what is durable.
    Poisoned,
    /// Verified data that could not be processed: a bug.
    Internal,
}

/// A read of stored data that failed, by kind, with what could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct StoredError {
    /// Which wall it hit.
    pub kind: StoredErrorKind,
    /// What could not be read, for the operator (a path or URL, the bytes, the reason).
    pub what: String,
}

impl StoredError {
    /// A failure of `kind`.
    pub fn new(kind: StoredErrorKind, what: impl Into<String>) -> StoredError {
        StoredError {
            kind,
            what: what.into(),
        }
    }

    /// Bytes that are not what the manifest records.
    pub fn corrupt(what: impl Into<String>) -> StoredError {
        StoredError::new(StoredErrorKind::Corrupt, what)
    }

    /// Verified data that could not be processed.
    pub fn internal(what: impl Into<String>) -> StoredError {
        StoredError::new(StoredErrorKind::Internal, what)
    }

    /// Whether the same read, later, may answer.
    pub fn is_transient(&self) -> bool {
        self.kind == StoredErrorKind::Unavailable
    }
}

impl From<StoredError> for crate::contract::Unreadable {
    fn from(e: StoredError) -> Self {
        if e.is_transient() {
            crate::contract::Unreadable::transient(e.what)
        } else {
            crate::contract::Unreadable::new(e.what)
        }
    }
}

impl From<StoredError> for crate::contract::BeneathWindow {
    fn from(e: StoredError) -> Self {
        crate::contract::BeneathWindow::Unreadable(e.into())
    }
}

/// Requests one tier served, for `--requests` and the benchmarks. For the local directory
/// only reads are counted (writes are the barrier's and the lifecycle's, priced in fsyncs).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TierRequests {
    /// The local directory, or the cold tier's URL.
    pub tier: String,
    /// Reads: local `pread`s, or GETs (whole or ranged).
    pub reads: u64,
    /// Objects written (a multipart upload counts once per part); 0 locally.
    pub writes: u64,
    /// Objects deleted; 0 locally.
    pub deletes: u64,
    /// Listings; 0 locally.
    pub lists: u64,
}

/// Requests of every store this process has dropped, summed per tier.
static DROPPED: Mutex<Vec<TierRequests>> = Mutex::new(Vec::new());

/// The requests every archive handle this process opened and dropped made, summed per tier
/// (the local directory, then cold tiers, in the order first seen). A command-line run
/// prints it with `--requests` after its archives are closed.
pub fn requests_of_closed_handles() -> Vec<TierRequests> {
    DROPPED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl Drop for Store {
    fn drop(&mut self) {
        let mine = self.requests();
        let mut all = DROPPED.lock().unwrap_or_else(|p| p.into_inner());
        for r in mine {
            match all.iter_mut().find(|a| a.tier == r.tier) {
                Some(a) => {
                    a.reads += r.reads;
                    a.writes += r.writes;
                    a.deletes += r.deletes;
                    a.lists += r.lists;
                }
                None => all.push(r),
            }
        }
    }
}

/// The read side of the storage seam.
#[derive(Debug)]
pub(crate) struct Store {
    root: PathBuf,
    faults: Faults,
    /// The tier configured at assembly: the only one offload writes to and the orphan sweep
    /// lists.
    configured: Option<Arc<ColdTier>>,
    /// Tiers opened from the URLs the manifest records, only to read from.
    opened: Mutex<Vec<Arc<ColdTier>>>,
    /// Reads of local files (ranged reads, each one `pread`).
    local_reads: std::sync::atomic::AtomicU64,
    /// Verified `(leading magic, footer)` of opened files, by name.
    footers: Mutex<HashMap<u64, (Bytes, Bytes)>>,
}

impl Store {
    pub fn new(root: &Path, faults: Faults, cold: Option<Arc<ColdTier>>) -> Store {
        Store {
            root: root.to_path_buf(),
            faults,
            configured: cold,
            opened: Mutex::new(Vec::new()),
            local_reads: std::sync::atomic::AtomicU64::new(0),
            footers: Mutex::new(HashMap::new()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The tier configured at assembly, if any.
    pub fn configured(&self) -> Option<Arc<ColdTier>> {
        self.configured.clone()
    }

    /// The tier holding the object at `url`, whose archive-relative path is `relative`: the
    /// configured one when the URL is under it, else one opened from the URL (credentials
    /// and endpoint from the environment) and kept, for reading.
    pub fn tier_for(&self, url: &str, relative: &str) -> Result<Arc<ColdTier>, ColdError> {
        let holds = |t: &Arc<ColdTier>| t.relative(url) == Some(relative);
        if let Some(tier) = self.configured.as_ref().filter(|t| holds(t)) {
            return Ok(tier.clone());
        }
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tier) = opened.iter().find(|t| holds(t)) {
            return Ok(tier.clone());
        }
        let base = url
            .strip_suffix(relative)
            .and_then(|b| b.strip_suffix('/'))
            .ok_or_else(|| ColdError {
                message: format!("cold URL {url:?} does not end with the file's path {relative:?}"),
                transient: false,
                missing: false,
            })?;
        let tier = Arc::new(ColdTier::from_url(base)?);
        opened.push(tier.clone());
        Ok(tier)
    }

    /// Counts one read of a local file.
    pub fn count_local_read(&self) {
        self.local_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The requests this store made so far, per tier: the local directory first, then each
    /// cold tier (the configured one, then those opened from recorded URLs).
    pub fn requests(&self) -> Vec<TierRequests> {
        let mut out = vec![TierRequests {
            tier: self.root.display().to_string(),
            reads: self.local_reads.load(std::sync::atomic::Ordering::Relaxed),
            ..TierRequests::default()
        }];
        let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        for tier in self.configured.iter().chain(opened.iter()) {
            let [puts, gets, deletes, lists] = tier.requests().snapshot();
            out.push(TierRequests {
                tier: tier.url().to_owned(),
                reads: gets,
                writes: puts,
                deletes,
                lists,
            });
        }
        out
    }

    pub fn cached_footer(&self, name: u64) -> Option<(Bytes, Bytes)> {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&name)
            .cloned()
    }

    pub fn cache_footer(&self, name: u64, magic: Bytes, footer: Bytes) {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, (magic, footer));
    }

    /// Forgets a file's verified footer (it was deleted or replaced, or must be read again).
    pub fn forget(&self, name: u64) {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&name);
    }
}
