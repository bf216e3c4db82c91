//! A committed file's entry ([`SegmentFile`]) and how it is written in a record: a packed data
//! file's entries as columns (format version 9), one entry per Parquet row group plus one
//! column value per slice, instead of an object per slice repeating its row group's span; and
//! a big file's columns cut into pages after the record's JSON (format version 10), so a
//! scoped replay reads only the pages of its selection.
//!
//! The entries in memory are the same [`GroupEntry`] values every way; only their JSON
//! differs. A file entry carries either `groups` (an object per entry, every version) or,
//! when its `format` is 9 or more, `pieces` (the columns, or the pages' index): see
//! `docs/format.md`, "Version 9" and "Version 10".

use crate::contract::Labels;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::fmt;

/// The first file `format` whose entries a record may write as columns (`manifest::columns`).
pub const COLUMNAR_FORMAT: u16 = 9;

/// The file `format` whose entry records its row groups, not its slices (format version 11):
/// a packed data file (its bytes are version 6's) whose slices a reader takes from the rows.
/// A writer chooses it for a file whose slices hold few rows each ([`ROWS_FORM_BELOW`]).
pub const ROWS_FORMAT: u16 = 11;

/// A packed data file whose slices hold fewer rows than this on average is recorded by its
/// row groups (format 11): decoding a slice's track, `_position`, axis and `_seq` values from
/// the rows (about 25 ns a row) then costs less than an entry per slice in the manifest
/// (about 35 bytes written, 450 ns replayed, 150 bytes held). Part of the format's rule: see
/// `docs/format.md`, "Version 11".
pub const ROWS_FORM_BELOW: u64 = 16;

/// The `format` a packed data file of `rows` rows in `slices` slices is recorded with:
/// [`ROWS_FORMAT`] when its slices average fewer than [`ROWS_FORM_BELOW`] rows, else `columnar`
/// (the writer's format for packed files whose entries are recorded as columns).
pub fn packed_format(rows: u64, slices: u64, columnar: u16) -> u16 {
    if slices > 0 && rows < slices.saturating_mul(ROWS_FORM_BELOW) {
        ROWS_FORMAT
    } else {
        columnar
    }
}

/// A committed data file. Its JSON is written and read here (a packed file of format 9
/// records its entries as columns, paged when a record names many).
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentFile {
    /// The file's name number (unique across the archive, never reused).
    pub name: u64,
    /// Path relative to the archive root, `/`-separated.
    pub path: String,
    /// File length in bytes.
    pub bytes: u64,
    /// The barrier that wrote it.
    pub barrier: u64,
    /// When that barrier was sealed, ns since the Unix epoch.
    pub sealed_at_ns: u64,
    /// The footer region (from the end of the last row group to the end of the file), whose
    /// digest also covers the leading magic `PAR1`.
    pub footer: Span,
    /// Row groups in file order; all of one track are adjacent, tracks in key order. Shared:
    /// a copy of the entry (a compaction's inputs, a compaction's record applied) copies no
    /// entry, and a fleet's file holds one per track (`Arc::make_mut` changes them).
    pub groups: std::sync::Arc<Vec<GroupEntry>>,
    /// Where the file lives once it moved to the cold tier: the object's URL
    /// (`s3://bucket/prefix/streams/<id>/rows/NNNNNNNNNNNN.parquet`). Absent while it is
    /// local, at `path` under the root. Format version 3.
    pub cold: Option<String>,
    /// For a level file written by compaction (format version 4): the run of barriers whose
    /// whole cells it holds. Absent for data files and for a barrier's own partials.
    pub run: Option<LevelRun>,
    /// The file's own layout version, for files written since format version 5: `5` means
    /// its integer columns are stored signed (unsigned ones as the signed type that holds
    /// them, see `docs/format.md`, "Version 5"), `6` that it packs tracks into shared row
    /// groups, `9` a packed file whose entries are recorded as columns (its bytes are
    /// version 6's). Absent for files of versions 1-4, which stored them unsigned.
    pub format: Option<u16>,
    /// For a level file holding one row group per level (a barrier's partials, a run kept
    /// in one file): the level its row group 0 holds, the next group the next level (format
    /// version 6, once the stream stores no level beneath it). Absent: level 0.
    pub first_level: Option<u8>,
    /// For a file whose entries were recorded paged (format version 10) and decoded by a
    /// scoped replay: the pages it did not read, in sum. `groups` then holds only the entries
    /// of the pages it read. For a file recorded by its row groups (format version 11): its
    /// row groups, until its slices are read from its rows ([`take_rows`]), and then, in a
    /// scoped replay, what the row groups it did not read hold. `None` whenever `groups`
    /// holds every entry (always, outside a scoped replay, once a replay is done); a file
    /// holding one is never written.
    pub elided: Option<Box<Elided>>,
}

impl SegmentFile {
    /// Whether the file stores its integers signed (format version 5 and later).
    pub fn is_signed(&self) -> bool {
        self.format.is_some_and(|f| f >= 5)
    }

    /// The first `_seq` the file holds (live data files are kept in this order);
    /// `u64::MAX` for a file of no entries.
    pub fn first_seq(&self) -> u64 {
        let decoded = self.groups.iter().map(|g| g.seq[0]).min();
        let elided = self.elided.as_ref().map(|e| e.first_seq());
        decoded.into_iter().chain(elided).min().unwrap_or(u64::MAX)
    }

    /// Whether the file's entries name more than one track.
    pub fn holds_several_tracks(&self) -> bool {
        let first = self.groups.first().map(|g| &g.track);
        self.groups.iter().any(|g| Some(&g.track) != first)
    }

    /// Whether the file packs consecutive tracks into shared row groups (format version 6):
    /// its entries are slices ([`GroupEntry::slice`]).
    pub fn is_packed(&self) -> bool {
        self.format.is_some_and(|f| f >= 6)
    }

    /// The bytes attributed to each entry, in entry order: its row group's bytes, shared out
    /// among the entries of a packed group by their rows.
    pub fn entry_sizes(&self) -> Vec<u64> {
        let groups = self.row_groups();
        let mut at = 0;
        self.groups
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let physical = entry.physical(index);
                while groups.get(at).is_some_and(|g| g.0 != physical) {
                    at += 1;
                }
                match (entry.slice, groups.get(at)) {
                    (Some(_), Some(&(_, span, rows))) => {
                        (span.len as u128 * entry.rows as u128 / rows.max(1) as u128) as u64
                    }
                    _ => entry.span.len,
                }
            })
            .collect()
    }

    /// Checks that the file's entries and its layout agree: a packed file's entries are all
    /// slices, row group by row group from 0, each group's slices contiguous from row 0 and
    /// sharing its span; an unpacked file's entries name no slice.
    pub fn check_slices(&self) -> Result<(), String> {
        let bad = |why: String| Err(format!("file {}: {why}", self.path));
        if let Some(elided) = &self.elided {
            // A scoped replay's entries: checked against the index, the rest were not read.
            return match self.is_packed() {
                true => elided.check(&self.groups).or_else(bad),
                false => bad("its entries are paged, and the file is not packed".into()),
            };
        }
        if !self.is_packed() {
            return match self.groups.iter().position(|g| g.slice.is_some()) {
                Some(i) => bad(format!(
                    "entry {i} names a slice, and the file is not packed"
                )),
                None => Ok(()),
            };
        }
        let mut at: Option<(u32, u64, Span)> = None;
        for (i, entry) in self.groups.iter().enumerate() {
            let Some(slice) = entry.slice else {
                return bad(format!("entry {i} of a packed file names no slice"));
            };
            let expected = match at {
                Some((group, next, span)) if slice.group == group => {
                    if entry.span != span {
                        return bad(format!("entry {i} gives row group {group} another span"));
                    }
                    next
                }
                Some((group, _, span)) if slice.group == group + 1 => {
                    if entry.span.offset < span.offset + span.len {
                        return bad(format!("entry {i}'s row group overlaps the one before"));
                    }
                    0
                }
                None if slice.group == 0 => 0,
                _ => return bad(format!("entry {i} skips to row group {}", slice.group)),
            };
            if slice.row != expected || entry.rows == 0 {
                return bad(format!(
                    "entry {i} starts at row {} of row group {}, not {expected}",
                    slice.row, slice.group
                ));
            }
            at = Some((slice.group, expected + entry.rows, entry.span));
        }
        Ok(())
    }

    /// The rows the file holds (every row group's, whichever of its entries a replay holds).
    pub fn rows(&self) -> u64 {
        self.row_groups().iter().map(|(_, _, rows)| rows).sum()
    }

    /// The bytes of the file's Parquet row groups, each counted once (what
    /// [`SegmentFile::row_groups`] lists, summed without listing them).
    pub fn row_bytes(&self) -> u64 {
        if let Some(elided) = &self.elided {
            return elided.row_groups().iter().map(|g| g.1.len).sum();
        }
        let mut total = 0u64;
        let mut last = None;
        for (index, entry) in self.groups.iter().enumerate() {
            let physical = entry.physical(index);
            if entry.slice.is_some() && last == Some(physical) {
                continue;
            }
            total = total.saturating_add(entry.span.len);
            last = Some(physical);
        }
        total
    }

    /// The file's Parquet row groups, each once: `(row group index, its span, its rows)`, in
    /// file order (one per entry unless the file is packed).
    pub fn row_groups(&self) -> Vec<(usize, Span, u64)> {
        if let Some(elided) = &self.elided {
            return elided.row_groups();
        }
        let mut out: Vec<(usize, Span, u64)> = Vec::with_capacity(self.groups.len());
        for (index, entry) in self.groups.iter().enumerate() {
            let physical = entry.physical(index);
            match out.last_mut() {
                Some(last) if entry.slice.is_some() && last.0 == physical => last.2 += entry.rows,
                _ => out.push((physical, entry.span, entry.rows)),
            }
        }
        out
    }
}

/// A compaction's level output: the whole cells of a run of barriers, either as one file
/// holding every level (row group k = level k, like a barrier's partials) or as one level
/// table per level. Format version 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelRun {
    /// The run: the files one compaction wrote share it (the first name it claimed for
    /// them); they stand together in the live list, in level order.
    pub id: u64,
    /// The run's tier for the merge policy: a barrier's partials are tier 0, and merging
    /// `LEVEL_FANOUT` runs of tier t makes one of tier t + 1.
    pub tier: u8,
    /// For a level table, the one level it holds (every row's `level`), its row groups
    /// packing whole tracks; absent for a run kept in one file of every level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
}

/// A row group of one track.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEntry {
    /// The track's labels, outermost first (a list in the manifest; shared in memory with
    /// every other entry of the track the catalog has met).
    #[serde(serialize_with = "labels_out", deserialize_with = "shared_labels")]
    pub track: Labels,
    /// Rows in the group.
    pub rows: u64,
    /// Lowest and highest `_position`.
    pub position: [u64; 2],
    /// Lowest and highest axis value, for an axial stream.
    pub axis: Option<[u64; 2]>,
    /// First and last `_seq`.
    pub seq: [u64; 2],
    /// The group's bytes.
    pub span: Span,
    /// In a level table, the last track the group holds: it holds `track` through this one,
    /// in key order (a group packs whole tracks; a long track spans several groups). Absent
    /// elsewhere. Format version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_track: Option<Vec<String>>,
    /// In a packed data file (format version 6), where this track's rows lie: rows
    /// `row .. row + rows` of Parquet row group `group`, which packs the rows of consecutive
    /// tracks in key order. `span` is then that row group's bytes and digest (bound to
    /// `group`, shared by every entry it holds). Absent in files of versions 1-5, where each
    /// entry is a row group of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<Slice>,
}

/// Writes shared labels as the list they hold (serde's own `Arc` support is behind a
/// feature that would rebuild every crate depending on serde).
fn labels_out<S: Serializer>(labels: &Labels, serializer: S) -> Result<S::Ok, S::Error> {
    labels[..].serialize(serializer)
}

/// Reads a list of labels into the shared form.
fn shared_labels<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Labels, D::Error> {
    Vec::<String>::deserialize(deserializer).map(Labels::from)
}

/// Where a track's rows lie in a packed row group (format version 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slice {
    /// The Parquet row group's index in the file.
    pub group: u32,
    /// The first of the track's rows within that row group.
    pub row: u64,
}

impl GroupEntry {
    /// The index of the Parquet row group holding this entry's rows, given the entry's own
    /// index in its file: the same index unless the entry is a slice of a packed group.
    pub fn physical(&self, index: usize) -> usize {
        self.slice.map_or(index, |s| s.group as usize)
    }
}

/// A byte range of a file and the digest of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// CRC-32C bound to the file and group identity (see `docs/format.md`).
    pub crc32c: u32,
}

thread_local! {
    /// The selection a scoped replay decodes for (see [`decoding_within`]); `None` outside
    /// one.
    static WITHIN: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    /// While a record is framed (see [`paging`]): the most entries a page holds, and the
    /// record's pages written so far. `None` outside one: entries are written as columns.
    static PAGING: RefCell<Option<(usize, Vec<u8>)>> = const { RefCell::new(None) };
}

/// The most entries one page holds (format version 10): a file entry of more entries is
/// written paged when its record is framed.
pub const PAGE_ENTRIES: usize = 512;

/// Runs `encode` (a record's serialization) so that every columnar file entry of more than
/// `page_entries` entries is written paged: its columns cut into pages of `page_entries`
/// entries, each page's JSON appended to the returned bytes (the record's *pages*), and the
/// entry holding only the pages' index. See `docs/format.md`, "Version 10". Answers what
/// `encode` answered and the pages (empty when nothing was paged).
pub fn paging<T>(page_entries: usize, encode: impl FnOnce() -> T) -> (T, Vec<u8>) {
    /// Ends the paging however the encode ends.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            PAGING.with(|p| p.replace(None));
        }
    }
    let _restore = Restore;
    PAGING.with(|p| p.replace(Some((page_entries.max(1), Vec::new()))));
    let out = encode();
    let pages = PAGING
        .with(|p| p.replace(None))
        .map(|(_, pages)| pages)
        .unwrap_or_default();
    (out, pages)
}

/// Runs `decode` (a record's decode) so that the columnar entries of tracks not beneath
/// `prefix` are read without their labels: such an entry keeps its rows, ranges and span,
/// and its `track` is left empty. A scoped replay catalogs only the tracks beneath its
/// selection, so the labels of every other track would be allocated, copied and dropped for
/// nothing (most of what opening one track of 100,000 spends). `None` or an empty prefix
/// reads every label. Only a scoped replay may use it: the entries it decodes must never be
/// written back.
pub fn decoding_within<T>(prefix: Option<&[String]>, decode: impl FnOnce() -> T) -> T {
    /// Puts back the selection that was set before, however the decode ends.
    struct Restore(Option<Vec<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let had = self.0.take();
            WITHIN.with(|w| w.replace(had));
        }
    }
    let prefix = prefix.filter(|p| !p.is_empty()).map(<[String]>::to_vec);
    let _restore = Restore(WITHIN.with(|w| w.replace(prefix)));
    decode()
}

/// One label as the decoder hands it: borrowed from the payload when it holds no escape.
enum Label<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Label<'_> {
    fn as_str(&self) -> &str {
        match self {
            Label::Borrowed(s) => s,
            Label::Owned(s) => s,
        }
    }

    fn into_owned(self) -> String {
        match self {
            Label::Borrowed(s) => s.to_owned(),
            Label::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Label<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelVisitor;
        impl<'de> Visitor<'de> for LabelVisitor {
            type Value = Label<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a track label")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Label<'de>, E> {
                Ok(Label::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Label<'de>, E> {
                Ok(Label::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Label<'de>, E> {
                Ok(Label::Owned(v))
            }
        }
        deserializer.deserialize_str(LabelVisitor)
    }
}

/// One entry's labels, kept only when they are beneath `prefix` (all of them when `None`).
struct LabelsIn<'p>(Option<&'p [String]>);

impl<'de> DeserializeSeed<'de> for LabelsIn<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<String>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for LabelsIn<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a track's labels")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::new();
        let mut keep = true;
        let mut at = 0;
        while let Some(label) = seq.next_element::<Label<'de>>()? {
            if keep {
                match self.0.and_then(|p| p.get(at)) {
                    Some(wanted) if wanted != label.as_str() => {
                        keep = false;
                        out = Vec::new();
                    }
                    _ => out.push(label.into_owned()),
                }
            }
            at += 1;
        }
        if self.0.is_some_and(|p| at < p.len()) {
            out = Vec::new();
        }
        Ok(out)
    }
}

/// The `track` column, each entry's labels read through [`Labels`] under the selection
/// [`decoding_within`] set.
fn track_column<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<String>>, D::Error> {
    struct Column<'p>(Option<&'p [String]>);
    impl<'de> Visitor<'de> for Column<'_> {
        type Value = Vec<Vec<String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a column of track labels")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(labels) = seq.next_element_seed(LabelsIn(self.0))? {
                out.push(labels);
            }
            Ok(out)
        }
    }
    WITHIN.with_borrow(|prefix| deserializer.deserialize_seq(Column(prefix.as_deref())))
}

/// One Parquet row group of a packed file: its bytes and digest, and how many slices (the
/// next entries, in order) it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowGroup {
    slices: u32,
    /// The row group's rows: written in a paged entry (version 10) only, where a reader
    /// that skips pages still knows every row group's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rows: Option<u64>,
    span: Span,
}

/// One Parquet row group of a file recorded by its row groups (format version 11), as the
/// record holds it: what its slices hold in sum. The slices themselves are read from the rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Summary {
    /// How many tracks it holds (one slice each, in key order).
    tracks: u32,
    /// Its rows.
    rows: u64,
    /// Its bytes and digest.
    span: Span,
    /// Its first and last track.
    first: Vec<String>,
    last: Vec<String>,
    /// The lowest and highest `_position` of its rows.
    position: [u64; 2],
    /// The lowest and highest axis value, for an axial stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    axis: Option<[u64; 2]>,
    /// The lowest and highest `_seq`.
    seq: [u64; 2],
}

/// The row groups of `entries` (a packed file's slices, in file order), or `None` when they do
/// not follow the slice rules or mix entries with and without an axis range (the file is then
/// recorded an object per entry).
fn summaries(entries: &[GroupEntry]) -> Option<Vec<Summary>> {
    let groups = sliced_row_groups(entries)?;
    let union = |a: [u64; 2], b: [u64; 2]| [a[0].min(b[0]), a[1].max(b[1])];
    let axial = entries.first()?.axis.is_some();
    let mut out: Vec<Summary> = Vec::with_capacity(groups.len());
    let mut rest = entries;
    for (group, rows) in groups {
        let (these, after) = rest.split_at(group.slices as usize);
        rest = after;
        let (first, last) = (these.first()?, these.last()?);
        // One pass over the slices (a fleet's row group holds one per track).
        let (mut position, mut axis, mut seq) = (first.position, first.axis, first.seq);
        for e in these {
            if e.axis.is_some() != axial {
                return None;
            }
            position = union(position, e.position);
            axis = axis.zip(e.axis).map(|(a, b)| union(a, b));
            seq = union(seq, e.seq);
        }
        out.push(Summary {
            tracks: group.slices,
            rows,
            span: group.span,
            first: first.track.to_vec(),
            last: last.track.to_vec(),
            position,
            axis,
            seq,
        });
    }
    Some(out)
}

/// Checks a format-11 entry's row groups as the record gives them, before any row is read.
fn check_summaries(groups: &[Summary]) -> Result<(), String> {
    if groups.is_empty() {
        return Err("row_groups is empty".into());
    }
    for (g, group) in groups.iter().enumerate() {
        let bad = |why: &str| Err(format!("row_groups[{g}] {why}"));
        if group.tracks == 0 || group.rows < u64::from(group.tracks) {
            return bad("holds no track, or fewer rows than tracks");
        }
        if group.first > group.last || (group.tracks == 1) != (group.first == group.last) {
            return bad("names its first and last track out of key order");
        }
        let ranges = [Some(group.position), group.axis, Some(group.seq)];
        if ranges.iter().flatten().any(|[lo, hi]| lo > hi) {
            return bad("gives a range whose low end is above its high end");
        }
        if let Some(before) = g.checked_sub(1).map(|b| &groups[b]) {
            if before.last > group.first {
                return bad("goes back in key order");
            }
            if before
                .span
                .offset
                .checked_add(before.span.len)
                .is_none_or(|end| group.span.offset < end)
            {
                return bad("overlaps the row group before it");
            }
            if before.axis.is_some() != group.axis.is_some() {
                return bad("gives an axis range where the row group before gives none, or none where it gives one");
            }
        }
    }
    Ok(())
}

/// A packed file's entries as columns, as written (borrowing the entries' labels); see
/// [`Pieces`].
#[derive(Serialize)]
struct PiecesOut<'a> {
    row_groups: Vec<RowGroup>,
    #[serde(flatten)]
    columns: ColumnsOut<'a>,
}

/// Entries' columns as written: a whole file's (version 9) or one page's (version 10).
#[derive(Serialize)]
struct ColumnsOut<'a> {
    track: Vec<&'a [String]>,
    rows: Vec<u64>,
    position: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    axis: Option<Vec<Option<[i64; 2]>>>,
    seq: Vec<[i64; 2]>,
}

/// A paged file entry as written (version 10): the row groups and the pages' index; the
/// pages themselves follow the record's JSON.
#[derive(Serialize)]
struct PagedOut {
    row_groups: Vec<RowGroup>,
    pages: Vec<Page>,
}

/// How a columnar file entry's `pieces` is written.
#[derive(Serialize)]
#[serde(untagged)]
enum PiecesForm<'a> {
    Columns(PiecesOut<'a>),
    Paged(PagedOut),
}

/// One page of a paged file entry (version 10), as its index in the record's JSON holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Page {
    /// Entries the page holds (≥ 1).
    entries: u32,
    /// The labels of its first and last entry: every entry between, in key order.
    first: Vec<String>,
    last: Vec<String>,
    /// The row, within its row group, of the page's first entry.
    row: u64,
    /// The rows of its entries.
    rows: u64,
    /// The lowest first `_seq` and the highest last `_seq` of its entries.
    seq: [u64; 2],
    /// Where its JSON lies in the record's pages: bytes `at .. at + len`.
    at: u64,
    len: u64,
}

/// A packed file's entries as columns, one value per entry (slice) in file order. A range
/// `[lo, hi]` is written `[lo − the previous entry's lo, hi − lo]` (the first entry's
/// previous lo is 0): consecutive tracks of one barrier start close together.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pieces {
    row_groups: Vec<RowGroup>,
    #[serde(default, deserialize_with = "track_column_present")]
    track: Option<Vec<Vec<String>>>,
    #[serde(default)]
    rows: Option<Vec<u64>>,
    #[serde(default)]
    position: Option<Ranges<false>>,
    /// Absent when no entry has an axis range (a stream with no axis).
    #[serde(default)]
    axis: Option<Ranges<true>>,
    #[serde(default)]
    seq: Option<Ranges<false>>,
    /// A paged entry's index (version 10), in place of the columns.
    #[serde(default)]
    pages: Option<Vec<Page>>,
}

/// One page's columns (version 10), or a whole file's (version 9, beside `row_groups`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Columns {
    #[serde(deserialize_with = "track_column")]
    track: Vec<Vec<String>>,
    rows: Vec<u64>,
    position: Ranges<false>,
    #[serde(default)]
    axis: Option<Ranges<true>>,
    seq: Ranges<false>,
}

fn track_column_present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Vec<String>>>, D::Error> {
    track_column(deserializer).map(Some)
}

/// A column of ranges written as deltas, turned back into ranges while it is read (one pass,
/// no column of deltas kept). `NULLABLE`: an entry may be `null` (the axis column), and the
/// next entry's step counts from the last entry that had a range.
#[derive(Clone, Debug, PartialEq, Default)]
struct Ranges<const NULLABLE: bool> {
    values: Vec<Option<[u64; 2]>>,
    /// The first value that leaves the range of a u64: its index and what was written. The
    /// column is still read to its end; [`Ranges::checked`] refuses it, naming the file.
    bad: Option<(usize, [i64; 2])>,
}

impl<const NULLABLE: bool> Ranges<NULLABLE> {
    /// The ranges, or which value leaves the range of a u64.
    fn checked(self, column: &str) -> Result<Vec<Option<[u64; 2]>>, String> {
        match self.bad {
            Some((i, d)) => Err(out_of_range(column, i, d)),
            None => Ok(self.values),
        }
    }
}

impl<'de, const NULLABLE: bool> Deserialize<'de> for Ranges<NULLABLE> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Column<const NULLABLE: bool>;
        impl<'de, const NULLABLE: bool> Visitor<'de> for Column<NULLABLE> {
            type Value = Ranges<NULLABLE>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a column of [step, length] ranges")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Ranges::<NULLABLE>::default();
                let mut previous = 0u64;
                loop {
                    let written = if NULLABLE {
                        match seq.next_element::<Option<[i64; 2]>>()? {
                            Some(value) => value,
                            None => break,
                        }
                    } else {
                        match seq.next_element::<[i64; 2]>()? {
                            Some(value) => Some(value),
                            None => break,
                        }
                    };
                    let value = written.and_then(|d| {
                        let range = undelta(&mut previous, d);
                        if range.is_none() && out.bad.is_none() {
                            out.bad = Some((out.values.len(), d));
                        }
                        range
                    });
                    out.values.push(value);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(Column::<NULLABLE>)
    }
}

/// One range as `[lo − previous, hi − lo]`, moving `previous` to `lo`; `None` when it does not
/// fit (only values beyond what a signed file stores, which no format-9 file holds).
fn delta(previous: &mut u64, [lo, hi]: [u64; 2]) -> Option<[i64; 2]> {
    let step = i64::try_from(i128::from(lo) - i128::from(*previous)).ok()?;
    let len = i64::try_from(hi.checked_sub(lo)?).ok()?;
    *previous = lo;
    Some([step, len])
}

/// The range [`delta`] wrote, moving `previous` to its `lo`.
fn undelta(previous: &mut u64, [step, len]: [i64; 2]) -> Option<[u64; 2]> {
    let lo = previous.checked_add_signed(step)?;
    let hi = lo.checked_add(u64::try_from(len).ok()?)?;
    *previous = lo;
    Some([lo, hi])
}

/// A column of ranges as deltas (see [`Pieces`]).
fn deltas(ranges: impl Iterator<Item = [u64; 2]>) -> Option<Vec<[i64; 2]>> {
    let mut previous = 0;
    ranges.map(|r| delta(&mut previous, r)).collect()
}

fn out_of_range(column: &str, i: usize, [step, len]: [i64; 2]) -> String {
    format!("pieces.{column}[{i}] = [{step}, {len}] leaves the range of an unsigned 64-bit value")
}

impl<'a> ColumnsOut<'a> {
    /// The columns of `entries`, their ranges as steps from the first entry's; `None` when a
    /// range does not fit.
    fn of(entries: &'a [GroupEntry]) -> Option<ColumnsOut<'a>> {
        let axis = if entries.iter().all(|e| e.axis.is_none()) {
            None
        } else {
            let mut previous = 0;
            let column: Option<Vec<Option<[i64; 2]>>> = entries
                .iter()
                .map(|e| match e.axis {
                    None => Some(None),
                    Some(range) => delta(&mut previous, range).map(Some),
                })
                .collect();
            Some(column?)
        };
        Some(ColumnsOut {
            track: entries.iter().map(|e| &e.track[..]).collect(),
            rows: entries.iter().map(|e| e.rows).collect(),
            position: deltas(entries.iter().map(|e| e.position))?,
            axis,
            seq: deltas(entries.iter().map(|e| e.seq))?,
        })
    }
}

/// The row groups of `entries` with each one's rows, when the entries follow the slice rules
/// exactly (every entry a slice, row groups numbered from 0, each slice starting where the
/// one before it ended, one span per row group, no `last_track`); `None` otherwise.
fn sliced_row_groups(entries: &[GroupEntry]) -> Option<Vec<(RowGroup, u64)>> {
    let mut row_groups: Vec<(RowGroup, u64)> = Vec::new();
    for entry in entries {
        let slice = entry.slice?;
        if entry.last_track.is_some() || entry.rows == 0 {
            return None;
        }
        let current = row_groups.len().checked_sub(1);
        match row_groups.last_mut() {
            Some((group, next_row)) if current == Some(slice.group as usize) => {
                if slice.row != *next_row || group.span != entry.span {
                    return None;
                }
                group.slices = group.slices.checked_add(1)?;
                *next_row = next_row.checked_add(entry.rows)?;
            }
            _ => {
                if slice.group as usize != row_groups.len() || slice.row != 0 {
                    return None;
                }
                let group = RowGroup {
                    slices: 1,
                    rows: None,
                    span: entry.span,
                };
                row_groups.push((group, entry.rows));
            }
        }
    }
    Some(row_groups)
}

impl<'a> PiecesForm<'a> {
    /// How `entries` are written: as columns when they follow the slice rules and every range
    /// fits, and paged when a record is being framed ([`paging`]), they are more than a page
    /// and their labels are in key order; `None` when they are written one object each.
    fn of(entries: &'a [GroupEntry]) -> Option<PiecesForm<'a>> {
        let row_groups = sliced_row_groups(entries)?;
        let page_entries = PAGING.with_borrow(|p| p.as_ref().map(|(n, _)| *n));
        let paged = page_entries
            .filter(|n| entries.len() > *n && entries.windows(2).all(|w| w[0].track <= w[1].track));
        let Some(page_entries) = paged else {
            return Some(PiecesForm::Columns(PiecesOut {
                row_groups: row_groups.into_iter().map(|(g, _)| g).collect(),
                columns: ColumnsOut::of(entries)?,
            }));
        };
        // Every page is written here first and joins the record's pages only once all of them
        // are: an entry that falls back to `groups` leaves no page behind. A big file's pages
        // are written on two cores, each half into its own bytes, joined in order.
        let (mut pages, written) = if entries.len() >= PARALLEL_PAGES * page_entries {
            let half = entries.len().div_ceil(page_entries).div_ceil(2) * page_entries;
            let (front, back) = entries.split_at(half);
            let (front, back) = std::thread::scope(|scope| {
                let back = scope.spawn(|| write_pages(back, page_entries));
                let front = write_pages(front, page_entries);
                // A panic stays a panic: it must not turn the pages into `groups`.
                let back = back.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                (front, back)
            });
            let ((mut pages, mut written), (back_pages, back_written)) = (front?, back?);
            let base = written.len() as u64;
            pages.extend(back_pages.into_iter().map(|page| Page {
                at: page.at + base,
                ..page
            }));
            written.extend_from_slice(&back_written);
            (pages, written)
        } else {
            write_pages(entries, page_entries)?
        };
        let base = PAGING.with_borrow_mut(|p| {
            let (_, record_pages) = p.as_mut()?;
            let base = record_pages.len() as u64;
            record_pages.extend_from_slice(&written);
            Some(base)
        })?;
        pages.iter_mut().for_each(|page| page.at += base);
        Some(PiecesForm::Paged(PagedOut {
            row_groups: row_groups
                .into_iter()
                .map(|(g, rows)| RowGroup {
                    rows: Some(rows),
                    ..g
                })
                .collect(),
            pages,
        }))
    }
}

/// A file entry of at least this many pages has them written on two cores.
const PARALLEL_PAGES: usize = 16;

/// Writes `entries` as pages of `page_entries` entries (format version 10): each page's JSON,
/// one after the other, and the pages' index (`at` counted from the first byte written); `None`
/// when a range does not fit (the entries are then written as `groups`).
fn write_pages(entries: &[GroupEntry], page_entries: usize) -> Option<(Vec<Page>, Vec<u8>)> {
    let mut written = Vec::new();
    let mut pages = Vec::with_capacity(entries.len().div_ceil(page_entries));
    for chunk in entries.chunks(page_entries) {
        let at = written.len() as u64;
        write_columns(chunk, &mut written)?;
        let (first, last) = (chunk.first()?, chunk.last()?);
        pages.push(Page {
            entries: u32::try_from(chunk.len()).ok()?,
            first: first.track.to_vec(),
            last: last.track.to_vec(),
            row: first.slice?.row,
            rows: chunk.iter().map(|e| e.rows).sum(),
            seq: [
                chunk.iter().map(|e| e.seq[0]).min()?,
                chunk.iter().map(|e| e.seq[1]).max()?,
            ],
            at,
            len: written.len() as u64 - at,
        });
    }
    Some((pages, written))
}

/// Writes the JSON `serde_json` writes for [`ColumnsOut::of`]`(entries)`, byte for byte,
/// straight from the entries, without building the columns first or a serde call per value
/// (at 100,000 tracks a barrier's pages were a fifth of an ingest's instructions; written
/// this way they cost about 15% less, and two cores share them). `None` when a range does
/// not fit, as `ColumnsOut::of` answers (what was written by then is the caller's to drop).
fn write_columns(entries: &[GroupEntry], out: &mut Vec<u8>) -> Option<()> {
    let mut number = itoa::Buffer::new();
    out.extend_from_slice(b"{\"track\":[");
    for (i, entry) in entries.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"[" } else { b",[" });
        for (j, label) in entry.track.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            write_string(label, out)?;
        }
        out.push(b']');
    }
    out.extend_from_slice(b"],\"rows\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(number.format(entry.rows).as_bytes());
    }
    let mut pairs = |out: &mut Vec<u8>, ranges: &mut dyn Iterator<Item = Option<[u64; 2]>>| {
        let mut previous = 0;
        for (i, range) in ranges.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match range {
                None => out.extend_from_slice(b"null"),
                Some(range) => {
                    let [step, len] = delta(&mut previous, range)?;
                    out.push(b'[');
                    out.extend_from_slice(number.format(step).as_bytes());
                    out.push(b',');
                    out.extend_from_slice(number.format(len).as_bytes());
                    out.push(b']');
                }
            }
        }
        out.push(b']');
        Some(())
    };
    out.extend_from_slice(b"],\"position\":[");
    pairs(out, &mut entries.iter().map(|e| Some(e.position)))?;
    if entries.iter().any(|e| e.axis.is_some()) {
        out.extend_from_slice(b",\"axis\":[");
        pairs(out, &mut entries.iter().map(|e| e.axis))?;
    }
    out.extend_from_slice(b",\"seq\":[");
    pairs(out, &mut entries.iter().map(|e| Some(e.seq)))?;
    out.push(b'}');
    Some(())
}

/// Writes `text` as a JSON string, as `serde_json` does: a label holding nothing it escapes
/// (`"`, `\` or a control character below U+0020) as it is, any other through `serde_json`.
fn write_string(text: &str, out: &mut Vec<u8>) -> Option<()> {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        Some(())
    } else {
        serde_json::to_writer(out, text).ok()
    }
}

impl Columns {
    /// Checks the columns' lengths and ranges: the entries they describe, not yet placed in
    /// their row groups (no span, no slice), or what is wrong with them.
    fn checked(self) -> Result<Vec<GroupEntry>, String> {
        let n = self.track.len();
        for (column, len) in [
            ("rows", self.rows.len()),
            ("position", self.position.values.len()),
            ("seq", self.seq.values.len()),
            ("axis", self.axis.as_ref().map_or(n, |a| a.values.len())),
        ] {
            if len != n {
                return Err(format!(
                    "pieces.{column} has {len} values, pieces.track {n}"
                ));
            }
        }
        let position = self.position.checked("position")?;
        let seq = self.seq.checked("seq")?;
        let axis = match self.axis {
            None => vec![None; n],
            Some(column) => column.checked("axis")?,
        };
        Ok(self
            .track
            .into_iter()
            .zip(self.rows)
            .zip(position.into_iter().zip(axis).zip(seq))
            .map(|((track, rows), ((position, axis), seq))| GroupEntry {
                track: track.into(),
                rows,
                position: position.unwrap_or_default(),
                axis,
                seq: seq.unwrap_or_default(),
                span: Span {
                    offset: 0,
                    len: 0,
                    crc32c: 0,
                },
                last_track: None,
                slice: None,
            })
            .collect())
    }
}

/// Where the entries being laid out lie: which row group, and which row of it, the next
/// entry starts at.
struct Cursor<'r> {
    row_groups: &'r [RowGroup],
    /// The next entry's index in the file.
    entry: u64,
    /// Its row group, and the index of that group's first entry.
    group: usize,
    group_start: u64,
    /// Its row within that group.
    row: u64,
}

impl<'r> Cursor<'r> {
    fn new(row_groups: &'r [RowGroup]) -> Cursor<'r> {
        Cursor {
            row_groups,
            entry: 0,
            group: 0,
            group_start: 0,
            row: 0,
        }
    }

    /// Moves to entry `entry` (not before the current one), into the row group that holds
    /// it; answers whether that entry starts its row group.
    fn seek(&mut self, entry: u64) -> Result<bool, String> {
        self.entry = entry;
        loop {
            let group = self
                .row_groups
                .get(self.group)
                .ok_or_else(|| format!("pieces.row_groups hold fewer slices than entry {entry}"))?;
            if group.slices == 0 {
                return Err(format!("pieces.row_groups[{}] holds no slice", self.group));
            }
            let end = self.group_start + u64::from(group.slices);
            if entry < end {
                return Ok(entry == self.group_start);
            }
            self.group += 1;
            self.group_start = end;
            self.row = 0;
        }
    }

    /// Places the next entries in their row groups (their span and slice), the first at row
    /// `first_row` of its row group (which must be 0 when it starts the group), and appends
    /// them to `out`.
    fn lay_out(
        &mut self,
        first_row: u64,
        entries: Vec<GroupEntry>,
        out: &mut Vec<GroupEntry>,
    ) -> Result<(), String> {
        let mut row = first_row;
        for (i, mut entry) in entries.into_iter().enumerate() {
            let starts_group = self.seek(self.entry)?;
            if starts_group && (i > 0 || first_row != 0) {
                if i == 0 {
                    return Err(format!(
                        "entry {} starts row group {} at row {first_row}, not 0",
                        self.entry, self.group
                    ));
                }
                row = 0;
            }
            if entry.rows == 0 {
                return Err(format!("entry {} holds no rows", self.entry));
            }
            entry.span = self.row_groups[self.group].span;
            entry.slice = Some(Slice {
                group: self.group as u32,
                row,
            });
            row = row
                .checked_add(entry.rows)
                .ok_or_else(|| format!("pieces.rows overflow in row group {}", self.group))?;
            out.push(entry);
            self.entry += 1;
        }
        self.row = row;
        Ok(())
    }
}

impl Pieces {
    /// The entries a version-9 entry's columns describe, or what is wrong with them.
    fn entries(self) -> Result<Vec<GroupEntry>, String> {
        let columns = Columns {
            track: self.track.ok_or("pieces.track is missing")?,
            rows: self.rows.ok_or("pieces.rows is missing")?,
            position: self.position.ok_or("pieces.position is missing")?,
            axis: self.axis,
            seq: self.seq.ok_or("pieces.seq is missing")?,
        }
        .checked()?;
        let n = columns.len() as u64;
        let slices: u64 = self.row_groups.iter().map(|g| u64::from(g.slices)).sum();
        if slices != n {
            return Err(format!(
                "pieces.row_groups hold {slices} slices, pieces.track has {n} entries"
            ));
        }
        if let Some(g) = self.row_groups.iter().position(|g| g.rows.is_some()) {
            return Err(format!(
                "pieces.row_groups[{g}] gives rows outside a paged entry"
            ));
        }
        let mut entries = Vec::with_capacity(columns.len());
        let mut cursor = Cursor::new(&self.row_groups);
        cursor.lay_out(0, columns, &mut entries)?;
        if let Some(g) = self.row_groups.iter().position(|g| g.slices == 0) {
            return Err(format!("pieces.row_groups[{g}] holds no slice"));
        }
        Ok(entries)
    }

    /// A paged entry's index (version 10), its pages still to be read: the pages' entries
    /// must add up to the row groups' slices, and the pages follow each other in key order.
    fn paged(self, pages: Vec<Page>) -> Result<Elided, String> {
        if self.track.is_some() || self.rows.is_some() || self.position.is_some() {
            return Err("pieces has both pages and columns".into());
        }
        if self.axis.is_some() || self.seq.is_some() {
            return Err("pieces has both pages and columns".into());
        }
        let slices: u64 = self.row_groups.iter().map(|g| u64::from(g.slices)).sum();
        let entries: u64 = pages.iter().map(|p| u64::from(p.entries)).sum();
        if slices != entries {
            return Err(format!(
                "pieces.row_groups hold {slices} slices, pieces.pages {entries} entries"
            ));
        }
        for (g, group) in self.row_groups.iter().enumerate() {
            if group.slices == 0 || group.rows.is_none_or(|r| r < u64::from(group.slices)) {
                return Err(format!(
                    "pieces.row_groups[{g}] of a paged entry needs slices and rows"
                ));
            }
        }
        for (i, page) in pages.iter().enumerate() {
            let next = pages.get(i + 1);
            if page.entries == 0
                || page.first > page.last
                || next.is_some_and(|n| page.last > n.first)
            {
                return Err(format!("pieces.pages[{i}] is empty or out of key order"));
            }
        }
        Ok(Elided {
            row_groups: self.row_groups,
            pages,
            read: false,
            summaries: Vec::new(),
            unread: Vec::new(),
        })
    }
}

/// What a decode knows of a paged file entry (format version 10) beyond its `groups`: the
/// row groups and the pages' index. A decode reads every page before it returns, except in
/// a scoped replay ([`decoding_within`]), which reads only the pages whose key range meets
/// its selection: the file's `groups` then hold only those pages' entries, and this says
/// what the others hold in sum. A file holding one is never written back.
#[derive(Clone, Debug, PartialEq)]
pub struct Elided {
    row_groups: Vec<RowGroup>,
    pages: Vec<Page>,
    /// Whether the pages were read (the record's decode reads them after its JSON), or for a
    /// file recorded by its row groups, its rows ([`take_rows`]).
    read: bool,
    /// For a file recorded by its row groups (format version 11), what each holds; empty for
    /// a paged entry.
    summaries: Vec<Summary>,
    /// The row groups whose rows a replay could not read, and why: no track of them is
    /// cataloged, and a read meeting their tracks refuses ([`Elided::unreadable`]).
    unread: Vec<UnreadGroup>,
}

/// A row group of a file recorded by its row groups (format version 11) whose rows a replay
/// could not read.
#[derive(Clone, Debug, PartialEq)]
pub struct UnreadGroup {
    /// Its index in the file.
    pub group: usize,
    /// Which wall the read hit.
    pub kind: crate::archive::error::StoredErrorKind,
    /// What the read said.
    pub why: String,
}

impl Elided {
    /// For a file recorded by its row groups (format version 11), how many tracks row group
    /// `g` holds, as the record says: the slices a read of its rows is to find.
    pub fn tracks_of(&self, g: usize) -> Option<usize> {
        self.summaries.get(g).map(|s| s.tracks as usize)
    }

    /// A format-11 entry's row groups, their slices still to be read from the rows.
    fn from_rows(summaries: Vec<Summary>) -> Result<Elided, String> {
        check_summaries(&summaries)?;
        Ok(Elided {
            row_groups: summaries
                .iter()
                .map(|g| RowGroup {
                    slices: g.tracks,
                    rows: Some(g.rows),
                    span: g.span,
                })
                .collect(),
            pages: Vec::new(),
            read: false,
            summaries,
            unread: Vec::new(),
        })
    }

    /// The row groups whose rows a replay could not read, each with the first and last track
    /// its record names (every track between may be in it): a read of any of them refuses.
    pub fn unreadable(&self) -> impl Iterator<Item = (&UnreadGroup, &[String], &[String])> {
        self.unread.iter().filter_map(|u| {
            let s = self.summaries.get(u.group)?;
            Some((u, s.first.as_slice(), s.last.as_slice()))
        })
    }

    /// Whether the file is recorded by its row groups (format version 11): its slices are
    /// read from its rows, not from the record.
    pub fn is_rows_form(&self) -> bool {
        !self.summaries.is_empty()
    }

    /// For a file recorded by its row groups whose rows are not read yet: the row groups
    /// holding a track beneath `within` (every one for `None` or an empty selection), whose
    /// slices a replay reads from the rows ([`take_rows`]). Empty otherwise.
    pub fn rows_to_read(&self, within: Option<&[String]>) -> Vec<usize> {
        if self.read {
            return Vec::new();
        }
        let within = within.filter(|p| !p.is_empty());
        (0..self.summaries.len())
            .filter(|&g| {
                let s = &self.summaries[g];
                within.is_none_or(|prefix| meets(prefix, &s.first, &s.last))
            })
            .collect()
    }

    /// The lowest `_seq` of every entry of the file, read or not.
    pub fn first_seq(&self) -> u64 {
        self.pages
            .iter()
            .map(|p| p.seq[0])
            .chain(self.summaries.iter().map(|g| g.seq[0]))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The file's Parquet row groups: `(index, span, rows)`, in file order.
    pub fn row_groups(&self) -> Vec<(usize, Span, u64)> {
        self.row_groups
            .iter()
            .enumerate()
            .map(|(i, g)| (i, g.span, g.rows.unwrap_or_default()))
            .collect()
    }

    /// Checks the entries a scoped decode kept against the index: each a slice of a row
    /// group the index names, with its span, within its rows.
    pub fn check(&self, groups: &[GroupEntry]) -> Result<(), String> {
        if !self.read {
            return Err("its pages were never read".into());
        }
        for (i, entry) in groups.iter().enumerate() {
            let slice = entry
                .slice
                .ok_or_else(|| format!("entry {i} names no slice"))?;
            let group = self.row_groups.get(slice.group as usize);
            let fits = group.is_some_and(|g| {
                g.span == entry.span
                    && slice
                        .row
                        .checked_add(entry.rows)
                        .is_some_and(|end| end <= g.rows.unwrap_or_default())
            });
            if !fits {
                return Err(format!(
                    "entry {i} lies outside row group {} of the index",
                    slice.group
                ));
            }
        }
        Ok(())
    }
}

/// Whether labels `[first, last]` (in key order) reach a track beneath `prefix`.
pub(crate) fn meets(prefix: &[String], first: &[String], last: &[String]) -> bool {
    use std::cmp::Ordering;
    let place = |labels: &[String]| {
        if labels.starts_with(prefix) {
            Ordering::Equal
        } else {
            labels.cmp(prefix)
        }
    };
    place(first) != Ordering::Greater && place(last) != Ordering::Less
}

/// Places the slices read from the rows of a file recorded by its row groups (format version
/// 11): `slices` are those of the row groups `groups` ([`Elided::rows_to_read`]), in file
/// order, each naming its row group and first row, with the group's span.
///
/// With `whole` (every slice of those groups was read, as for an open that catalogs every
/// track), each row group's slices are checked against what the record says it holds (how
/// many, their rows, first and last track, key order, the unions of their ranges): rows that
/// do not match are damage, named. Once every row group is read the file holds every entry
/// (`elided` is `None`). Otherwise (a scoped open's, the slices of its selection; or row
/// groups left `unread`) each slice is checked to lie within its row group, and the file
/// keeps its row groups' summary.
pub(crate) fn take_rows(
    file: &mut SegmentFile,
    groups: &[usize],
    slices: Vec<GroupEntry>,
    whole: bool,
    unread: Vec<UnreadGroup>,
) -> Result<(), String> {
    let Some(mut elided) = file.elided.take().filter(|e| e.is_rows_form() && !e.read) else {
        return Err("its slices are not awaiting its rows".into());
    };
    elided.unread = unread;
    if !whole {
        elided.read = true;
        elided.check(&slices)?;
        file.groups = slices.into();
        file.elided = Some(elided);
        return Ok(());
    }
    let union = |a: [u64; 2], b: [u64; 2]| [a[0].min(b[0]), a[1].max(b[1])];
    let mut at = 0;
    for &g in groups {
        let summary = elided.summaries.get(g).ok_or_else(|| {
            format!("its rows were read for row group {g}, which it does not have")
        })?;
        let (from, all, said) = (at, &slices, summary.tracks);
        let miscounted = move || {
            let found = all[from.min(all.len())..]
                .iter()
                .take_while(|e| e.slice.is_some_and(|s| s.group as usize == g))
                .count();
            format!("row group {g} holds {found} tracks, the manifest says {said}")
        };
        // Every one of these is of row group `g` (checked in the pass below), the next not.
        let these = slices
            .get(at..at + summary.tracks as usize)
            .filter(|these| {
                slices
                    .get(at + these.len())
                    .is_none_or(|next| next.slice.is_none_or(|s| s.group as usize != g))
            })
            .ok_or_else(miscounted)?;
        at += these.len();
        let bad = |why: String| Err(format!("row group {g}: {why}"));
        // One pass over the slices (a fleet's file holds one per track).
        let mut row = 0u64;
        let (mut position, mut axis, mut seq): (Option<[u64; 2]>, _, _) = (None, None, None);
        let widen = |range: &mut Option<[u64; 2]>, by: [u64; 2]| {
            *range = Some(range.map_or(by, |r| union(r, by)));
        };
        for (i, e) in these.iter().enumerate() {
            if e.slice.is_none_or(|s| s.group as usize != g) {
                return Err(miscounted());
            }
            if e.slice.map(|s| s.row) != Some(row) || e.rows == 0 || e.span != summary.span {
                return bad(format!("slice {i} is not where the one before it ended"));
            }
            if i > 0 && these[i - 1].track[..] >= e.track[..] {
                return bad(format!(
                    "its rows go back in key order at track {:?}",
                    e.track
                ));
            }
            if e.axis.is_some() != summary.axis.is_some() {
                return bad(format!("track {:?} has an axis range where the manifest has none, or none where it has one", e.track));
            }
            row += e.rows;
            widen(&mut position, e.position);
            if let Some(range) = e.axis {
                widen(&mut axis, range);
            }
            widen(&mut seq, e.seq);
        }
        let ranges = (position, axis, seq);
        let (first, last) = (&these[0].track, &these[these.len() - 1].track);
        let said = (summary.rows, &summary.first[..], &summary.last[..]);
        if (row, &first[..], &last[..]) != said {
            return bad(format!(
                "its rows hold {row} rows of tracks {first:?}..{last:?}, the manifest says {} rows of {:?}..{:?}",
                summary.rows, summary.first, summary.last
            ));
        }
        if ranges != (Some(summary.position), summary.axis, Some(summary.seq)) {
            return bad(format!(
                "its rows span _position, axis and _seq {ranges:?}, the manifest says {:?}",
                (summary.position, summary.axis, summary.seq)
            ));
        }
    }
    if at != slices.len() {
        return Err(format!(
            "{} slices were read beyond the row groups asked for",
            slices.len() - at
        ));
    }
    if groups.len() == elided.summaries.len() {
        file.groups = slices.into();
        return Ok(());
    }
    elided.read = true;
    elided.check(&slices)?;
    file.groups = slices.into();
    file.elided = Some(elided);
    Ok(())
}

/// Reads the pages of `file`'s paged entry (format version 10) from `pages` (the bytes that
/// follow its record's JSON) into its `groups`: every page, checked against the index, or in
/// a scoped replay ([`decoding_within`]) the pages that meet the selection. A file entry
/// that is not paged is left as it is.
pub(crate) fn read_pages(file: &mut SegmentFile, pages: Option<&[u8]>) -> Result<(), String> {
    let Some(mut elided) = file.elided.take() else {
        return Ok(());
    };
    if elided.read || elided.is_rows_form() {
        file.elided = Some(elided);
        return Ok(());
    }
    let pages = pages.ok_or("its entries are paged, and its record holds no pages")?;
    let within = WITHIN.with_borrow(|w| w.clone());
    // A whole decode keeps every entry: one allocation, not a vector copied as it doubles
    // (at 100,000 entries a file, the copies were a tenth of an open).
    let mut groups = match within {
        None => Vec::with_capacity(elided.pages.iter().map(|p| p.entries as usize).sum()),
        Some(_) => Vec::new(),
    };
    let mut cursor = Cursor::new(&elided.row_groups);
    let mut group_rows = vec![0u64; elided.row_groups.len()];
    let mut entry = 0u64;
    let mut previous_last: Option<Vec<String>> = None;
    for (i, page) in elided.pages.iter().enumerate() {
        let wanted = within
            .as_deref()
            .is_none_or(|prefix| meets(prefix, &page.first, &page.last));
        if !wanted {
            entry += u64::from(page.entries);
            continue;
        }
        let bytes = usize::try_from(page.at)
            .ok()
            .zip(usize::try_from(page.len).ok())
            .and_then(|(at, len)| pages.get(at..at.checked_add(len)?))
            .ok_or_else(|| {
                format!(
                    "pieces.pages[{i}] lies at bytes {}..+{}, past the record's {} bytes of pages",
                    page.at,
                    page.len,
                    pages.len()
                )
            })?;
        let columns: Columns = serde_json::from_slice(bytes)
            .map_err(|e| format!("pieces.pages[{i}] does not decode: {e}"))?;
        let columns = columns
            .checked()
            .map_err(|why| format!("pieces.pages[{i}]: {why}"))?;
        let bad = |why: String| Err(format!("pieces.pages[{i}] {why}"));
        if columns.len() as u64 != u64::from(page.entries) {
            return bad(format!(
                "holds {} entries, its index says {}",
                columns.len(),
                page.entries
            ));
        }
        let rows: u64 = columns.iter().map(|c| c.rows).sum();
        let seq = [
            columns.iter().map(|c| c.seq[0]).min().unwrap_or_default(),
            columns.iter().map(|c| c.seq[1]).max().unwrap_or_default(),
        ];
        if rows != page.rows || seq != page.seq {
            return bad(format!(
                "holds {rows} rows and _seq {seq:?}, its index says {} and {:?}",
                page.rows, page.seq
            ));
        }
        let starts_group = cursor.seek(entry)?;
        if within.is_none() {
            // A whole decode sees every label: the entries are in key order, within the
            // index's range, and each page starts where the one before it ended.
            let labels: Vec<&[String]> = columns.iter().map(|c| &c.track[..]).collect();
            if labels.first() != Some(&page.first.as_slice())
                || labels.last() != Some(&page.last.as_slice())
                || labels.windows(2).any(|w| w[0] > w[1])
            {
                return bad("does not hold its index's tracks in key order".into());
            }
            if previous_last
                .as_ref()
                .is_some_and(|last| last > &page.first)
            {
                return bad("goes back in key order".into());
            }
            previous_last = Some(page.last.clone());
            let expected = if starts_group { 0 } else { cursor.row };
            if page.row != expected {
                return bad(format!("starts at row {}, not {expected}", page.row));
            }
        }
        let from = groups.len();
        cursor.lay_out(page.row, columns, &mut groups)?;
        for g in &groups[from..] {
            if let Some(slice) = g.slice {
                group_rows[slice.group as usize] += g.rows;
            }
        }
        entry += u64::from(page.entries);
    }
    if within.is_none() {
        for (g, (group, rows)) in elided.row_groups.iter().zip(&group_rows).enumerate() {
            if group.rows != Some(*rows) {
                return Err(format!(
                    "pieces.row_groups[{g}] says {:?} rows, its slices hold {rows}",
                    group.rows
                ));
            }
        }
        file.groups = groups.into();
        return Ok(());
    }
    elided.read = true;
    elided.check(&groups)?;
    file.groups = groups.into();
    file.elided = Some(elided);
    Ok(())
}

/// A file entry as written: `groups` or `pieces`, then the optional fields.
#[derive(Serialize)]
struct FileOut<'a> {
    name: u64,
    path: &'a str,
    bytes: u64,
    barrier: u64,
    sealed_at_ns: u64,
    footer: Span,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<&'a [GroupEntry]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pieces: Option<PiecesForm<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    row_groups: Option<Vec<Summary>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cold: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<LevelRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_level: Option<u8>,
}

/// A file entry as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIn {
    name: u64,
    path: String,
    bytes: u64,
    barrier: u64,
    sealed_at_ns: u64,
    footer: Span,
    #[serde(default)]
    groups: Option<Vec<GroupEntry>>,
    #[serde(default)]
    pieces: Option<Pieces>,
    #[serde(default)]
    row_groups: Option<Vec<Summary>>,
    #[serde(default)]
    cold: Option<String>,
    #[serde(default)]
    run: Option<LevelRun>,
    #[serde(default)]
    format: Option<u16>,
    #[serde(default)]
    first_level: Option<u8>,
}

impl Serialize for SegmentFile {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A file recorded by its row groups is written as its record gave them, whichever of
        // its slices this replay read (a scoped one, or one that could not read a row group).
        let recorded = self
            .elided
            .as_ref()
            .filter(|e| e.is_rows_form())
            .map(|e| e.summaries.clone());
        if self.elided.is_some() && recorded.is_none() {
            return Err(serde::ser::Error::custom(format!(
                "file {}: a scoped replay's entries are never written",
                self.path
            )));
        }
        let rows_form = self.format == Some(ROWS_FORMAT);
        let row_groups = recorded.or_else(|| rows_form.then(|| summaries(&self.groups)).flatten());
        // Entries that break the slice rules (no writer makes them) are written an object
        // each, in any format: never as columns in a format-11 file, which replay refuses.
        let pieces = self
            .format
            .filter(|f| *f >= COLUMNAR_FORMAT && !rows_form)
            .and_then(|_| PiecesForm::of(&self.groups));
        FileOut {
            name: self.name,
            path: &self.path,
            bytes: self.bytes,
            barrier: self.barrier,
            sealed_at_ns: self.sealed_at_ns,
            footer: self.footer,
            groups: (pieces.is_none() && row_groups.is_none()).then_some(self.groups.as_slice()),
            pieces,
            row_groups,
            cold: self.cold.as_deref(),
            run: self.run,
            format: self.format,
            first_level: self.first_level,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SegmentFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let file = FileIn::deserialize(deserializer)?;
        let mut elided = None;
        let rows_form = file.format == Some(ROWS_FORMAT);
        let groups = match (file.groups, file.pieces, file.row_groups) {
            (None, None, Some(summaries)) if rows_form => {
                let elided_rows = Elided::from_rows(summaries)
                    .map_err(|why| D::Error::custom(format!("file {}: {why}", file.path)))?;
                elided = Some(Box::new(elided_rows));
                Vec::new()
            }
            (_, _, Some(_)) => {
                return Err(D::Error::custom(format!(
                    "file {}: row_groups in a file of format {:?} beside other entries (a file records its row groups alone, in format {ROWS_FORMAT})",
                    file.path, file.format
                )))
            }
            (Some(_), Some(_), None) => {
                return Err(D::Error::custom(format!(
                    "file {}: both groups and pieces",
                    file.path
                )))
            }
            (None, Some(_), None) if rows_form => {
                return Err(D::Error::custom(format!(
                    "file {}: pieces in a file of format {ROWS_FORMAT}, which records its row groups",
                    file.path
                )))
            }
            (Some(groups), None, None) => groups,
            (None, Some(mut pieces), None) => {
                if file.format.is_none_or(|f| f < COLUMNAR_FORMAT) {
                    return Err(D::Error::custom(format!(
                        "file {}: pieces in a file of format {:?} (columns are format {COLUMNAR_FORMAT})",
                        file.path, file.format
                    )));
                }
                let bad = |why: String| D::Error::custom(format!("file {}: {why}", file.path));
                match pieces.pages.take() {
                    Some(pages) => {
                        elided = Some(Box::new(pieces.paged(pages).map_err(bad)?));
                        Vec::new()
                    }
                    None => pieces.entries().map_err(bad)?,
                }
            }
            (None, None, None) => return Err(D::Error::missing_field("groups")),
        };
        Ok(SegmentFile {
            name: file.name,
            path: file.path,
            bytes: file.bytes,
            barrier: file.barrier,
            sealed_at_ns: file.sealed_at_ns,
            footer: file.footer,
            groups: groups.into(),
            cold: file.cold,
            run: file.run,
            format: file.format,
            first_level: file.first_level,
            elided,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A packed file of `hosts` × 3 tracks, one row group per host, one row per track (the
    /// axis `null` for the third metric, as a column with gaps is written).
    fn packed(hosts: usize) -> SegmentFile {
        let mut groups = Vec::new();
        for h in 0..hosts {
            let span = Span {
                offset: 4 + 100 * h as u64,
                len: 100,
                crc32c: h as u32,
            };
            for m in 0..3u64 {
                let at = 3 * h as u64 + m;
                groups.push(GroupEntry {
                    track: vec![format!("h{h}"), format!("m\"{m}")].into(),
                    rows: 1,
                    position: [at + 1, at + 1],
                    axis: (m != 2).then_some([10 * at, 10 * at]),
                    seq: [at, at],
                    span,
                    last_track: None,
                    slice: Some(Slice {
                        group: h as u32,
                        row: m,
                    }),
                });
            }
        }
        SegmentFile {
            name: 1,
            path: "streams/s/rows/000000000001.parquet".into(),
            bytes: 4 + 100 * hosts as u64 + 8,
            barrier: 1,
            sealed_at_ns: 1,
            footer: Span {
                offset: 4 + 100 * hosts as u64,
                len: 8,
                crc32c: 7,
            },
            groups: groups.into(),
            cold: None,
            run: None,
            format: Some(COLUMNAR_FORMAT),
            first_level: None,
            elided: None,
        }
    }

    #[test]
    fn a_scoped_decode_keeps_every_entry_and_only_the_scopes_labels() {
        let file = packed(4);
        let json = serde_json::to_vec(&file).expect("serializes");
        assert!(String::from_utf8_lossy(&json).contains("\"pieces\""));
        let whole: SegmentFile = serde_json::from_slice(&json).expect("decodes");
        assert_eq!(whole, file);
        for prefix in [
            vec!["h2".to_string()],
            vec!["h1".to_string(), "m\"0".to_string()],
            vec!["h9".to_string()],
            vec!["h1".to_string(), "m\"0".to_string(), "x".to_string()],
        ] {
            let scoped: SegmentFile =
                decoding_within(Some(&prefix), || serde_json::from_slice(&json)).expect("decodes");
            assert_eq!(scoped.groups.len(), file.groups.len());
            for (got, want) in scoped.groups.iter().zip(file.groups.iter()) {
                if want.track.starts_with(&prefix) {
                    assert_eq!(got, want);
                } else {
                    // Everything but the labels, which no read of the scope asks for.
                    let mut want = want.clone();
                    want.track = Default::default();
                    assert_eq!(got, &want, "outside {prefix:?}");
                }
            }
        }
        // The scope ends with the decode: the next one reads every label again.
        let after: SegmentFile = serde_json::from_slice(&json).expect("decodes");
        assert_eq!(after, file);
        let empty: SegmentFile =
            decoding_within(Some(&[]), || serde_json::from_slice(&json)).expect("decodes");
        assert_eq!(empty, file);
    }

    #[test]
    fn a_range_out_of_u64_is_refused_naming_the_column_in_a_scoped_decode_too() {
        let file = packed(2);
        let mut value: serde_json::Value = serde_json::to_value(&file).expect("serializes");
        value["pieces"]["axis"][1] = serde_json::json!([-100, 0]);
        let json = serde_json::to_vec(&value).expect("serializes");
        for prefix in [None, Some(vec!["h0".to_string()])] {
            let err = decoding_within(prefix.as_deref(), || {
                serde_json::from_slice::<SegmentFile>(&json)
            })
            .expect_err("refused");
            let text = err.to_string();
            assert!(
                text.contains("streams/s/rows/000000000001.parquet")
                    && text.contains("pieces.axis[1] = [-100, 0] leaves the range"),
                "{text}"
            );
        }
    }

    /// Any entries: labels with characters JSON escapes, non-ASCII and empty ones; ranges
    /// with any steps, axes present or not, and sometimes one bound far away (beyond what the
    /// columns hold, or at the edge of what they do).
    fn any_entries() -> impl Strategy<Value = Vec<GroupEntry>> {
        let label = prop_oneof![
            "[a-z0-9]{0,6}",
            "[\\x00-\\x7f]{0,4}",
            "[\"\\\\é€😀\\x1f\\x7f]{0,3}",
        ];
        let range = (0u64..1_000_000, 0u64..1_000).prop_map(|(lo, len)| [lo, lo + len]);
        let entry = (
            prop::collection::vec(label, 0..3),
            1u64..5_000,
            range.clone(),
            prop::option::of(range.clone()),
            range,
        )
            .prop_map(|(track, rows, position, axis, seq)| GroupEntry {
                track: track.into(),
                rows,
                position,
                axis,
                seq,
                span: Span {
                    offset: 4,
                    len: 1,
                    crc32c: 0,
                },
                last_track: None,
                slice: Some(Slice { group: 0, row: 0 }),
            });
        let far = prop_oneof![
            any::<u64>(),
            Just(u64::MAX),
            Just(i64::MAX as u64),
            Just(1u64 << 63)
        ];
        let moved = (any::<prop::sample::Index>(), 0..6usize, far);
        (
            prop::collection::vec(entry, 1..40),
            prop::option::weighted(0.3, moved),
        )
            .prop_map(|(mut entries, moved)| {
                if let Some((at, bound, value)) = moved {
                    let entry = at.get_mut(&mut entries);
                    let range = match bound / 2 {
                        0 => &mut entry.position,
                        1 => entry.axis.get_or_insert([0, 0]),
                        _ => &mut entry.seq,
                    };
                    range[bound % 2] = value;
                    if bound % 2 == 0 {
                        range[1] = range[1].max(value);
                    }
                }
                entries
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, rng_seed: proptest::test_runner::RngSeed::Fixed(0xc01), ..ProptestConfig::default() })]

        /// The page writer writes what serde_json writes for the same columns, byte for byte,
        /// and refuses exactly the entries whose ranges the columns cannot hold.
        #[test]
        fn pages_are_written_as_serde_json_writes_their_columns(entries in any_entries()) {
            let mut direct = Vec::new();
            let written = write_columns(&entries, &mut direct);
            match ColumnsOut::of(&entries) {
                Some(columns) => {
                    prop_assert!(written.is_some());
                    let via_serde = serde_json::to_vec(&columns).expect("serializes");
                    prop_assert_eq!(String::from_utf8_lossy(&direct), String::from_utf8_lossy(&via_serde));
                }
                None => prop_assert!(written.is_none()),
            }
        }
    }

    /// A file entry of many pages is written on two cores exactly as on one: the record's
    /// pages and the entry's JSON are the same bytes, and it decodes to the same entries.
    #[test]
    fn pages_written_on_two_cores_are_the_pages_written_on_one() {
        let mut file = packed(PARALLEL_PAGES * 8 + 5);
        // Labels that sort as the hosts are numbered: only entries in key order are paged.
        for (i, entry) in std::sync::Arc::make_mut(&mut file.groups)
            .iter_mut()
            .enumerate()
        {
            entry.track = vec![format!("h{:04}", i / 3), format!("m\"{}", i % 3)].into();
        }
        let page_entries = 4;
        assert!(file.groups.len() >= PARALLEL_PAGES * page_entries);
        let (json, pages) = paging(page_entries, || {
            serde_json::to_vec(&file).expect("serializes")
        });
        let (index, one_core) = write_pages(&file.groups, page_entries).expect("pages");
        assert_eq!(
            String::from_utf8_lossy(&pages),
            String::from_utf8_lossy(&one_core)
        );
        let written: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(
            written["pieces"]["pages"],
            serde_json::to_value(&index).expect("index")
        );
        assert_eq!(index.len(), file.groups.len().div_ceil(page_entries));
        let mut decoded: SegmentFile = serde_json::from_slice(&json).expect("decodes");
        read_pages(&mut decoded, Some(&pages)).expect("reads its pages");
        assert_eq!(decoded, file);
    }
}
