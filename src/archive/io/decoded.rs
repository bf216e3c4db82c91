//! Decoded data row groups kept across reads by a long-lived handle (a server, a host's
//! archive), bounded by bytes: the raw counterpart of the level cache.
//!
//! A fleet's fine surveys and folds answer from raw rows (its levels beneath the first
//! stored one hold too few rows a cell to be stored), and a packed row group holds the rows
//! of thousands of tracks. Without this cache every such read of one track reads the group's
//! bytes again, checks their digest, parses the file's footer and decompresses the pages
//! around the track's rows; with it, the group is read, checked and decoded once (the columns
//! the read asks for) and every later read of any of its tracks is cut from it.
//!
//! File names are never reused, so an entry can only go stale by its file leaving the live
//! set, and then nothing asks for it again (a discard also forgets it). What is kept was
//! checked against its digest when it was read: a damaged file is refused on its first read,
//! never cached.

use arrow::array::RecordBatch;
use std::collections::HashMap;

/// Decoded bytes the cache holds at most by default (`Config::raw_cache_bytes`): a handful
/// of a fleet's packed row groups in the columns a survey reads.
pub const RAW_CACHE_BYTES: usize = 64 << 20;

/// `(file name, Parquet row group, the columns decoded)`.
pub(crate) type Key = (u64, usize, u64);

/// Decoded row groups by [`Key`]; the least recently used goes first.
#[derive(Debug)]
pub(crate) struct DecodedCache {
    /// Each group with its size in bytes and when it was last used.
    entries: HashMap<Key, (RecordBatch, usize, u64)>,
    /// Groups too large to keep ([`DecodedCache::put`] refused them): reads of them decode
    /// only the rows they want, as a one-shot read does, instead of the whole group each time.
    refused: std::collections::HashSet<Key>,
    bytes: usize,
    capacity: usize,
    tick: u64,
}

impl DecodedCache {
    /// A cache of at most `capacity` decoded bytes (0: keeps nothing).
    pub fn new(capacity: usize) -> Self {
        DecodedCache {
            entries: HashMap::new(),
            refused: std::collections::HashSet::new(),
            bytes: 0,
            capacity,
            tick: 0,
        }
    }

    /// Whether it keeps anything: a one-shot reader's cache of no capacity reads only what
    /// it answers.
    pub fn keeps(&self) -> bool {
        self.capacity > 0
    }

    /// Whether a read of group `key` should decode the group whole and keep it: the cache
    /// keeps something, and did not refuse this group as too large.
    pub fn wants(&self, key: Key) -> bool {
        self.keeps() && !self.refused.contains(&key)
    }

    /// The group, if held (and now the most recently used).
    pub fn get(&mut self, key: Key) -> Option<RecordBatch> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&key).map(|(batch, _, used)| {
            *used = tick;
            batch.clone()
        })
    }

    /// Keeps `batch` as `key`, the least recently used groups leaving to make room. A group
    /// larger than a quarter of the capacity is not kept (it would push out everything a
    /// server reads often for one read), and is remembered as refused ([`DecodedCache::wants`]).
    pub fn put(&mut self, key: Key, batch: RecordBatch) {
        let size = batch.get_array_memory_size().max(1);
        if size > self.capacity / 4 {
            self.refused.insert(key);
            return;
        }
        self.tick += 1;
        if let Some((_, old, _)) = self.entries.insert(key, (batch, size, self.tick)) {
            self.bytes -= old;
        }
        self.bytes += size;
        while self.bytes > self.capacity {
            let Some((&oldest, _)) = self.entries.iter().min_by_key(|(_, (_, _, used))| *used)
            else {
                break;
            };
            if let Some((_, old, _)) = self.entries.remove(&oldest) {
                self.bytes -= old;
            }
        }
    }

    /// Drops the groups of the named files.
    pub fn forget(&mut self, names: &[u64]) {
        self.refused.retain(|(name, _, _)| !names.contains(name));
        let bytes = &mut self.bytes;
        self.entries.retain(|(name, _, _), (_, size, _)| {
            let keep = !names.contains(name);
            if !keep {
                *bytes -= *size;
            }
            keep
        });
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::UInt64Array;
    use std::sync::Arc;

    fn batch(rows: u64) -> RecordBatch {
        let column: arrow::array::ArrayRef = Arc::new(UInt64Array::from_iter_values(0..rows));
        RecordBatch::try_from_iter([("a", column)]).expect("a batch")
    }

    #[test]
    fn keeps_what_fits_and_lets_the_least_recently_used_go() {
        let one = batch(1000).get_array_memory_size();
        let mut cache = DecodedCache::new(one * 4);
        cache.put((1, 0, 7), batch(1000));
        cache.put((1, 1, 7), batch(1000));
        cache.put((2, 0, 7), batch(1000));
        assert!(cache.get((1, 0, 7)).is_some(), "held");
        assert!(
            cache.get((1, 0, 8)).is_none(),
            "other columns are another entry"
        );
        cache.put((2, 1, 7), batch(1000));
        cache.put((3, 0, 7), batch(1000));
        assert!(cache.bytes() <= one * 4);
        assert!(
            cache.get((1, 1, 7)).is_none(),
            "the least recently used went"
        );
        assert!(cache.get((1, 0, 7)).is_some(), "the one read since stayed");
        cache.forget(&[1, 3]);
        assert!(cache.get((1, 0, 7)).is_none() && cache.get((3, 0, 7)).is_none());
        assert_eq!(cache.bytes(), one * 2);
    }

    #[test]
    fn a_group_of_more_than_a_quarter_of_it_is_not_kept() {
        let mut cache = DecodedCache::new(batch(1000).get_array_memory_size() * 3);
        assert!(cache.wants((1, 0, 0)));
        cache.put((1, 0, 0), batch(1000));
        assert!(cache.get((1, 0, 0)).is_none());
        assert_eq!(cache.bytes(), 0);
        assert!(
            !cache.wants((1, 0, 0)),
            "a refused group is read as a one-shot read reads it"
        );
        assert!(cache.wants((1, 1, 0)));
        cache.forget(&[1]);
        assert!(cache.wants((1, 0, 0)));
        assert!(!DecodedCache::new(0).keeps());
    }
}
