//! Where the archive's stored files are read from: the local directory, or a cold tier.
//!
//! Every read of a data or level file goes through a `Store`: it knows the root, the injected
//! storage backend, the configured cold tier (and opens others from the URLs the manifest records),
//! and caches the verified footer of each file (one cache for rows, surveys, folds and
//! compaction), so a cold read costs one ranged GET per row group once a file has been
//! opened.

use crate::archive::error::ColdError;
use crate::archive::io::cache::RangeCache;
use crate::archive::io::cold::ColdTier;
use crate::archive::io::storage::Disk;
use bytes::Bytes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
    /// Ranges of the tier's objects answered from the local cache instead of a GET (only a
    /// read of an archive by its URL keeps one); 0 locally.
    pub cached: u64,
}

/// Where archive handles add up the requests they made, summed per tier (the local
/// directory, then cold tiers, in the order first seen), for a caller that wants the totals
/// of several handles: the CLI's `--requests` prints the log every handle of its command
/// shared ([`Config::requests`](crate::archive::Config::requests)). A handle adds its
/// requests when it is dropped; [`Archive::requests`](crate::archive::Archive::requests)
/// answers one open handle's. Each configuration has a log of its own unless one is shared.
#[derive(Clone, Debug, Default)]
pub struct RequestLog(Arc<Mutex<Vec<TierRequests>>>);

impl RequestLog {
    /// An empty log.
    pub fn new() -> RequestLog {
        RequestLog::default()
    }

    /// The requests of every handle dropped so far, summed per tier.
    pub fn totals(&self) -> Vec<TierRequests> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn add(&self, mine: Vec<TierRequests>) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for r in mine {
            match all.iter_mut().find(|a| a.tier == r.tier) {
                Some(a) => {
                    a.reads += r.reads;
                    a.writes += r.writes;
                    a.deletes += r.deletes;
                    a.lists += r.lists;
                    a.cached += r.cached;
                }
                None => all.push(r),
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.log.add(self.requests());
    }
}

/// The read side of the storage seam.
#[derive(Debug)]
pub(crate) struct Store {
    root: PathBuf,
    disk: Disk,
    /// The tier configured at assembly: the only one offload writes to and the orphan sweep
    /// lists.
    configured: Option<Arc<ColdTier>>,
    /// Tiers opened from the URLs the manifest records, only to read from.
    opened: Mutex<Vec<Arc<ColdTier>>>,
    /// Reads of local files (ranged reads, each one `pread`).
    local_reads: std::sync::atomic::AtomicU64,
    /// Verified `(leading magic, footer)` of opened files, by name.
    footers: Mutex<HashMap<u64, (Bytes, Bytes)>>,
    /// Where this store's requests are added when it is dropped.
    log: RequestLog,
    /// The on-disk cache of cold ranges, when one is set ([`Store::set_cache`]).
    cache: std::sync::OnceLock<Arc<RangeCache>>,
}

impl Store {
    pub fn new(root: &Path, disk: Disk, cold: Option<Arc<ColdTier>>, log: RequestLog) -> Store {
        Store {
            root: root.to_path_buf(),
            disk,
            configured: cold,
            opened: Mutex::new(Vec::new()),
            local_reads: std::sync::atomic::AtomicU64::new(0),
            footers: Mutex::new(HashMap::new()),
            log,
            cache: std::sync::OnceLock::new(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// Keeps the ranges read from cold tiers in `cache` from now on (a store's cache is set
    /// once; a later call is ignored).
    pub fn set_cache(&self, cache: Arc<RangeCache>) {
        let _ = self.cache.set(cache);
    }

    /// The cache of cold ranges, if one is set.
    pub fn cache(&self) -> Option<&Arc<RangeCache>> {
        self.cache.get()
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

    /// Reads through `tier` (already open: a replica's, whose manifest it fetched) the files
    /// the manifest records beneath its URL, and counts its requests with this store's.
    pub fn adopt(&self, tier: Arc<ColdTier>) {
        self.opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tier);
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
                cached: tier
                    .requests()
                    .cached
                    .load(std::sync::atomic::Ordering::Relaxed),
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
