//! The slices of a file recorded by its row groups (format version 11), read from its rows:
//! what a replay catalogs such a file by ([`crate::archive::format::manifest::log::SliceReader`]).

use crate::archive::error::{ArchiveError, Result, StoredError};
use crate::archive::format::levels::rendered_labels;
use crate::archive::format::manifest::log::SliceReader;
use crate::archive::format::manifest::{GroupEntry, SegmentFile, Slice, StreamDecl};
use crate::archive::format::spec::{slice_schema, POSITION_COLUMN, SEQ_COLUMN};
use crate::archive::io::cold::ColdTier;
use crate::archive::io::segment::Opened;
use crate::archive::io::store::Store;
use crate::contract::Labels;
use arrow::array::{Array, RecordBatch, StringArray, UInt64Array};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Reads slices from the files where a store finds them (locally, or in the cold tier).
pub struct RowsIn<'a> {
    store: &'a Store,
    /// The bucket a replica's local files are read from (an open of a replica).
    files_in: Option<Arc<ColdTier>>,
    /// Per stream, the labels a whole read met in the file before.
    interned: Mutex<HashMap<String, Interner>>,
}

/// The labels of the tracks a whole read met in the stream's file before, in key order, so
/// that a track's labels are one allocation however many files name it. A fleet's barrier
/// files name the same tracks in the same order: each run of rows finds its labels by a
/// comparison or two, allocates nothing, and hands the catalog the labels it already holds
/// (so the catalog's walk finds them by address). Only sharing depends on it: a track not
/// found (a new one, or files in another order) gets labels of its own.
#[derive(Debug, Default)]
struct Interner {
    /// The file before's labels, in the order met, and how far this file's walk got.
    before: Vec<Labels>,
    at: usize,
    /// This file's labels, in the order met.
    now: Vec<Labels>,
}

impl Interner {
    /// The labels of row `row` of `columns`: the file before's, when it named the track.
    fn labels(&mut self, columns: &[StringArray], row: usize) -> Labels {
        let order = |known: &Labels| {
            known
                .iter()
                .map(String::as_str)
                .cmp(columns.iter().map(|c| c.value(row)))
        };
        let mut found = None;
        while let Some(known) = self.before.get(self.at) {
            match order(known) {
                std::cmp::Ordering::Less => self.at += 1,
                std::cmp::Ordering::Equal => {
                    found = Some(known.clone());
                    self.at += 1;
                    break;
                }
                std::cmp::Ordering::Greater => break,
            }
        }
        let labels = found.unwrap_or_else(|| {
            columns
                .iter()
                .map(|c| c.value(row).to_string())
                .collect::<Vec<_>>()
                .into()
        });
        self.now.push(labels.clone());
        labels
    }

    /// The walk of the next file begins.
    fn next_file(&mut self) {
        if !self.now.is_empty() {
            self.before = std::mem::take(&mut self.now);
        }
        self.at = 0;
    }
}

impl<'a> RowsIn<'a> {
    /// Slices read from the files `store` reads.
    pub fn new(store: &'a Store) -> RowsIn<'a> {
        RowsIn {
            store,
            files_in: None,
            interned: Mutex::default(),
        }
    }

    /// Reads every file the manifest names locally from `tier` instead (an open of a
    /// replica: the bucket holds them, under the same paths).
    pub fn files_in(self, tier: Option<Arc<ColdTier>>) -> RowsIn<'a> {
        RowsIn {
            files_in: tier,
            ..self
        }
    }
}

impl SliceReader for RowsIn<'_> {
    fn slices(
        &self,
        decl: &StreamDecl,
        file: &SegmentFile,
        groups: &[usize],
        within: Option<&[String]>,
    ) -> Result<Vec<Result<Vec<GroupEntry>>>> {
        let named = |e: StoredError| {
            ArchiveError::Unreadable {
            stream: decl.id.clone(),
            message: format!(
                "file {} records its row groups, and its slices could not be read from its rows: {}",
                file.path, e.what
            ),
            kind: e.kind,
        }
        };
        let damaged = |what: String| named(StoredError::corrupt(what));
        let schema = slice_schema(decl).map_err(ArchiveError::Internal)?;
        let in_bucket = match (&self.files_in, &file.cold) {
            (Some(tier), None) => Some(SegmentFile {
                cold: Some(tier.object_url(&file.path)),
                groups: Default::default(),
                ..file.clone()
            }),
            _ => None,
        };
        let file = in_bucket.as_ref().unwrap_or(file);
        let row_groups = file.row_groups();
        let within = within.filter(|p| !p.is_empty());
        // A scoped read first decodes the track columns alone, to find the selection's rows.
        let label_schema = match within {
            Some(_) => {
                let only: Vec<usize> = (0..schema.fields().len())
                    .filter(|&i| decl.track.contains(schema.field(i).name()))
                    .collect();
                Some(Arc::new(
                    schema
                        .project(&only)
                        .map_err(|e| ArchiveError::Internal(e.to_string()))?,
                ))
            }
            None => None,
        };
        let mut labels_open = label_schema.map(|s| Opened::projected(self.store, s));
        let mut open = Opened::projected(self.store, schema);
        // A whole read shares labels with the stream's file before (a scoped one reads few).
        let mut interned = self.interned.lock().unwrap_or_else(|e| e.into_inner());
        let mut interner = match within {
            None => Some(interned.entry(decl.id.clone()).or_default()),
            Some(_) => None,
        };
        if let Some(interner) = interner.as_mut() {
            interner.next_file();
        }
        // One row group's slices; a row group that cannot be read fails alone.
        let mut one = |g: usize| -> Result<Vec<GroupEntry>> {
            // A whole read finds as many slices as the record says the row group holds tracks
            // (no more than the rows decoded: a record that lies costs no allocation).
            let expected = match within {
                None => file.elided.as_ref().and_then(|e| e.tracks_of(g)),
                Some(_) => None,
            };
            let &(physical, span, rows) = row_groups
                .get(g)
                .ok_or_else(|| damaged(format!("no row group {g}")))?;
            let (batch, first_row) = match (within, labels_open.as_mut()) {
                (Some(prefix), Some(labels_open)) => {
                    let labels = labels_open
                        .physical_group(file.name, file, physical, span, rows)
                        .map_err(named)?;
                    let rendered = rendered_labels(decl, &labels, "data file")
                        .map_err(|why| damaged(format!("row group {physical}: {why}")))?;
                    let held = beneath(&rendered, prefix);
                    if held.is_empty() {
                        return Ok(Vec::new());
                    }
                    let range = held.start as u64..held.end as u64;
                    let batch = open
                        .selected_rows(file.name, file, physical, span, range)
                        .map_err(named)?;
                    (batch, held.start as u64)
                }
                _ => (
                    open.physical_group(file.name, file, physical, span, rows)
                        .map_err(named)?,
                    0,
                ),
            };
            let mut out = Vec::with_capacity(expected.map_or(0, |e| e.min(batch.num_rows())));
            let found = SliceAt {
                group: physical,
                span,
                first_row,
            };
            slices_of(decl, &batch, found, interner.as_deref_mut(), &mut out)
                .map_err(|why| damaged(format!("row group {physical}: {why}")))?;
            if within.is_some()
                && out
                    .iter()
                    .any(|e| !e.track.starts_with(within.unwrap_or_default()))
            {
                return Err(damaged(format!(
                    "row group {physical}: its rows are not in track-key order"
                )));
            }
            Ok(out)
        };
        Ok(groups.iter().map(|&g| one(g)).collect())
    }
}

/// The rows of a row group (its track columns `labels`, rows in track-key order) whose track
/// lies beneath `prefix`: found by a binary search.
fn beneath(labels: &[StringArray], prefix: &[String]) -> std::ops::Range<usize> {
    let rows = labels.first().map_or(0, |l| l.len());
    if prefix.len() > labels.len() {
        // Deeper than the stream's tracks: no track is beneath it.
        return 0..0;
    }
    let depth = prefix.len().min(labels.len());
    let order = |r: usize| {
        labels[..depth]
            .iter()
            .map(|l| l.value(r))
            .cmp(prefix[..depth].iter().map(String::as_str))
    };
    let (mut lo, mut hi) = (0, rows);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match order(mid).is_lt() {
            true => lo = mid + 1,
            false => hi = mid,
        }
    }
    let start = lo;
    hi = rows;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match order(mid).is_le() {
            true => lo = mid + 1,
            false => hi = mid,
        }
    }
    start..lo
}

/// Where a decoded batch lies: rows from `first_row` on of row group `group`, bytes `span`.
#[derive(Clone, Copy)]
struct SliceAt {
    group: usize,
    span: crate::archive::format::manifest::Span,
    first_row: u64,
}

/// Appends the slices of `batch` (lying `at`): one per run of rows of one track, its labels
/// shared through `interner` when one is given.
fn slices_of(
    decl: &StreamDecl,
    batch: &RecordBatch,
    at: SliceAt,
    mut interner: Option<&mut Interner>,
    out: &mut Vec<GroupEntry>,
) -> std::result::Result<(), String> {
    let SliceAt {
        group,
        span,
        first_row,
    } = at;
    let labels: Vec<StringArray> = rendered_labels(decl, batch, "data file")?;
    let column = |name: &str| -> std::result::Result<&UInt64Array, String> {
        let values = batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .ok_or_else(|| format!("column {name:?} is not an unsigned integer"))?;
        match values.null_count() {
            0 => Ok(values),
            _ => Err(format!("column {name:?} holds a null")),
        }
    };
    let position = column(POSITION_COLUMN)?;
    let seq = column(SEQ_COLUMN)?;
    let axis = decl.axis.as_deref().map(column).transpose()?;
    let rows = batch.num_rows();
    let group = u32::try_from(group).map_err(|_| "too many row groups".to_string())?;
    let same = |a: usize, b: usize| {
        labels
            .iter()
            .all(|l| l.is_valid(a) && l.is_valid(b) && l.value(a) == l.value(b))
    };
    let range = |values: &UInt64Array, from: usize, to: usize| {
        let slice = &values.values()[from..to];
        let lo = slice.iter().copied().min().unwrap_or_default();
        let hi = slice.iter().copied().max().unwrap_or_default();
        [lo, hi]
    };
    let mut start = 0;
    while start < rows {
        if let Some(k) = labels.iter().position(|l| l.is_null(start)) {
            return Err(format!("row {start} holds no {}", decl.track[k]));
        }
        let mut end = start + 1;
        while end < rows && same(start, end) {
            end += 1;
        }
        let track = match interner.as_deref_mut() {
            Some(interner) => interner.labels(&labels, start),
            None => labels
                .iter()
                .map(|l| l.value(start).to_string())
                .collect::<Vec<_>>()
                .into(),
        };
        out.push(GroupEntry {
            track,
            rows: (end - start) as u64,
            position: range(position, start, end),
            axis: axis.map(|a| range(a, start, end)),
            seq: range(seq, start, end),
            span,
            last_track: None,
            slice: Some(Slice {
                group,
                row: first_row + start as u64,
            }),
        });
        start = end;
    }
    Ok(())
}
