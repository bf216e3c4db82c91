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
            })?;
        let tier = Arc::new(ColdTier::from_url(base)?);
        opened.push(tier.clone());
        Ok(tier)
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

    /// Forgets a cold file's footer (it was deleted, or replaced).
    pub fn forget(&self, name: u64) {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&name);
    }
}
