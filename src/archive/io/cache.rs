//! A bounded cache, on local disk, of byte ranges of objects that never change: the footers
//! and row groups a read of an archive by its URL fetches from the bucket.
//!
//! Sound because every object it caches is immutable under the key it is cached by: a data
//! or level file's name is never reused within an archive, and the key also holds the file's
//! length and footer digest as the manifest records them, so a prefix taken over by another
//! archive (whose names start again at 1) cannot answer from an old entry. Each entry also
//! carries its own CRC-32C over key and bytes: a damaged or torn entry is a miss (and is
//! removed), never an answer, and every row group read from the cache is still checked
//! against the manifest's digest, like one read from the bucket.
//!
//! The cache never fails a read: an entry it cannot read or write is logged and skipped.
//! Its size is kept under its bound by removing the least recently used entries (by
//! modification time, which a hit renews), so several processes may share one directory:
//! an entry is written whole under a name of the writer's and renamed into place.

use bytes::Bytes;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// The cache's size when none is configured (`--cache-size`).
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// An entry's first bytes: the layout's name and version.
const MAGIC: &[u8; 4] = b"SAC1";
/// Files that are entries end with it; anything else in the directory is left alone.
const SUFFIX: &str = ".range";

/// Hashes an entry's key into its file name (fixed seeds: the name must be the same in every
/// process sharing the directory; a collision only costs a miss, since the key is stored).
static KEY_HASH: ahash::RandomState = ahash::RandomState::with_seeds(
    0x6A09_E667_F3BC_C908,
    0xBB67_AE85_84CA_A73B,
    0x3C6E_F372_FE94_F82B,
    0xA54F_F53A_5F1D_36F1,
);

/// A bounded directory of immutable byte ranges (see the module's documentation).
#[derive(Debug)]
pub struct RangeCache {
    dir: PathBuf,
    max_bytes: u64,
    /// The bytes this process believes the directory holds: counted once at the first write,
    /// then kept up by this process's writes and removals (other processes' writes are
    /// found at the next trim, which lists the directory).
    held: Mutex<Option<u64>>,
}

impl RangeCache {
    /// A cache in `dir` (made at the first write) holding at most `max_bytes`.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> RangeCache {
        RangeCache {
            dir: dir.into(),
            max_bytes,
            held: Mutex::new(None),
        }
    }

    /// The largest range kept: a sixteenth of the bound, so one big read never empties the
    /// cache of everything else.
    pub fn max_entry(&self) -> u64 {
        self.max_bytes / 16
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(format!("{:016x}{SUFFIX}", KEY_HASH.hash_one(key)))
    }

    /// The bytes cached under `key`, if an intact entry holds them (its use renewed).
    pub fn get(&self, key: &str) -> Option<Bytes> {
        let path = self.path(key);
        match std::fs::read(&path) {
            Ok(raw) => match decode(&raw, key) {
                Some(bytes) => {
                    // Renew its place in the eviction order; failing to is harmless.
                    if let Ok(file) = std::fs::File::options().append(true).open(&path) {
                        let _ = file.set_modified(SystemTime::now());
                    }
                    Some(Bytes::copy_from_slice(bytes))
                }
                None => {
                    if raw.len() >= MAGIC.len() && &raw[..MAGIC.len()] == MAGIC {
                        // Another key's entry (a hash collision) is left for its owner.
                        if !holds_other_key(&raw, key) {
                            tracing::warn!(
                                "{}: damaged cache entry removed (read from the bucket again)",
                                path.display()
                            );
                            self.remove(&path, raw.len() as u64);
                        }
                    }
                    None
                }
            },
            Err(_) => None,
        }
    }

    /// Keeps `bytes` under `key` when they fit, removing the least recently used entries to
    /// stay within the bound. Never fails: a write that does not succeed is logged.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        if bytes.len() as u64 > self.max_entry() {
            return;
        }
        if let Err(e) = self.write(key, bytes) {
            tracing::warn!("cache {}: not kept: {e}", self.dir.display());
        }
    }

    fn write(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let encoded = encode(key, bytes);
        let path = self.path(key);
        let staged = self.dir.join(format!(
            ".{:016x}.{}.tmp",
            KEY_HASH.hash_one(key),
            std::process::id()
        ));
        let mut file = std::fs::File::create(&staged)?;
        file.write_all(&encoded)?;
        drop(file);
        std::fs::rename(&staged, &path)?;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let now = match *held {
            Some(n) => n + encoded.len() as u64,
            None => self.list().iter().map(|(_, len, _)| len).sum(),
        };
        *held = Some(now);
        if now > self.max_bytes {
            *held = Some(self.trim());
        }
        Ok(())
    }

    /// The entries in the directory: path, length, last use.
    fn list(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name();
            let name = name.to_str()?;
            if !name.ends_with(SUFFIX) || name.starts_with('.') {
                return None;
            }
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()?))
        })
        .collect()
    }

    /// Removes the least recently used entries until the directory holds at most three
    /// quarters of the bound (so a trim is not paid at every write); answers what is left.
    fn trim(&self) -> u64 {
        let mut entries = self.list();
        entries.sort_by_key(|(_, _, used)| *used);
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        let goal = self.max_bytes / 4 * 3;
        for (path, len, _) in entries {
            if total <= goal {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
        total
    }

    fn remove(&self, path: &Path, len: u64) {
        if std::fs::remove_file(path).is_ok() {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = held.as_mut() {
                *n = n.saturating_sub(len);
            }
        }
    }
}

/// An entry: magic, key length (u32 LE), key, bytes length (u64 LE), CRC-32C of key and bytes
/// (u32 LE), bytes.
fn encode(key: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 16 + key.len() + bytes.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The key an entry was written under, if its header is whole.
fn stored_key(raw: &[u8]) -> Option<&[u8]> {
    let rest = raw.strip_prefix(MAGIC)?;
    let key_len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    rest.get(4..4 + key_len)
}

fn holds_other_key(raw: &[u8], key: &str) -> bool {
    stored_key(raw).is_some_and(|k| k != key.as_bytes())
}

/// The bytes of an intact entry written under `key`.
fn decode<'a>(raw: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let stored = stored_key(raw)?;
    if stored != key.as_bytes() {
        return None;
    }
    let rest = &raw[MAGIC.len() + 4 + stored.len()..];
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let crc = u32::from_le_bytes(rest.get(8..12)?.try_into().ok()?);
    let bytes = rest.get(12..)?;
    (bytes.len() as u64 == len && crc32c::crc32c_append(crc32c::crc32c(stored), bytes) == crc)
        .then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_comes_back_and_a_damaged_entry_is_a_miss() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let cache = RangeCache::new(dir.path().join("c"), 1 << 20);
        assert_eq!(cache.get("k"), None);
        cache.put("k", b"hello");
        assert_eq!(cache.get("k").as_deref(), Some(&b"hello"[..]));
        // Another key never answers from this entry.
        assert_eq!(cache.get("k2"), None);
        // Flip a byte of the cached bytes: a miss, and the entry is gone.
        let path = cache.path("k");
        let mut raw = std::fs::read(&path)?;
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(&path, &raw)?;
        assert_eq!(cache.get("k"), None);
        assert!(!path.exists());
        // A torn entry (cut short) is a miss too.
        cache.put("k", b"hello");
        let raw = std::fs::read(&path)?;
        std::fs::write(&path, &raw[..raw.len() - 2])?;
        assert_eq!(cache.get("k"), None);
        Ok(())
    }

    #[test]
    fn the_directory_stays_within_its_bound_and_keeps_the_recently_used(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let cache = RangeCache::new(dir.path(), 16 * 1024);
        let chunk = vec![7u8; 900];
        cache.put("first", &chunk);
        // Older modification times for everything written after "first" than for "first",
        // renewed by its use below.
        for i in 0..40 {
            cache.put(&format!("k{i}"), &chunk);
            if i % 4 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
                assert!(cache.get("first").is_some(), "used entries stay (at {i})");
            }
            let total: u64 = cache.list().iter().map(|(_, len, _)| len).sum();
            assert!(total <= 16 * 1024, "{total} bytes held at {i}");
        }
        // A range larger than a sixteenth of the bound is not kept.
        cache.put("big", &vec![0u8; 1100]);
        assert_eq!(cache.get("big"), None);
        Ok(())
    }
}
