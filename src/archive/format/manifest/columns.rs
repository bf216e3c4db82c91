//! How a file entry is written in a record (format version 9): a packed data file's entries as
//! columns, one entry per Parquet row group plus one column value per slice, instead of an
//! object per slice repeating its row group's span.
//!
//! The entries in memory are the same [`GroupEntry`] values either way; only their JSON
//! differs. A file entry carries either `groups` (an object per entry, every version) or,
//! when its `format` is 9 or more, `pieces` (the columns): see `docs/format.md`, "Version 9".

pub use super::record::COLUMNAR_FORMAT;
use super::record::{GroupEntry, LevelRun, SegmentFile, Slice, Span};
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::fmt;

thread_local! {
    /// The selection a scoped replay decodes for (see [`decoding_within`]); `None` outside
    /// one.
    static WITHIN: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
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
struct Labels<'p>(Option<&'p [String]>);

impl<'de> DeserializeSeed<'de> for Labels<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<String>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Labels<'_> {
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
            while let Some(labels) = seq.next_element_seed(Labels(self.0))? {
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
    span: Span,
}

/// A packed file's entries as columns, as written (borrowing the entries' labels); see
/// [`Pieces`].
#[derive(Serialize)]
struct PiecesOut<'a> {
    row_groups: Vec<RowGroup>,
    track: Vec<&'a [String]>,
    rows: Vec<u64>,
    position: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    axis: Option<Vec<Option<[i64; 2]>>>,
    seq: Vec<[i64; 2]>,
}

/// A packed file's entries as columns, one value per entry (slice) in file order. A range
/// `[lo, hi]` is written `[lo − the previous entry's lo, hi − lo]` (the first entry's
/// previous lo is 0): consecutive tracks of one barrier start close together.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pieces {
    row_groups: Vec<RowGroup>,
    #[serde(deserialize_with = "track_column")]
    track: Vec<Vec<String>>,
    rows: Vec<u64>,
    position: Ranges<false>,
    /// Absent when no entry has an axis range (a stream with no axis).
    #[serde(default)]
    axis: Option<Ranges<true>>,
    seq: Ranges<false>,
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

impl PiecesOut<'_> {
    /// The columns of `entries`, when they follow the slice rules exactly (every entry a
    /// slice, row groups numbered from 0, each slice starting where the one before it ended,
    /// one span per row group, no `last_track`) and every range fits; `None` otherwise, and
    /// the entries are written one object each.
    fn of(entries: &[GroupEntry]) -> Option<PiecesOut<'_>> {
        let mut row_groups: Vec<RowGroup> = Vec::new();
        let mut next_row = 0u64;
        for entry in entries {
            let slice = entry.slice?;
            if entry.last_track.is_some() || entry.rows == 0 {
                return None;
            }
            let current = row_groups.len().checked_sub(1);
            match row_groups.last_mut() {
                Some(group) if current == Some(slice.group as usize) => {
                    if slice.row != next_row || group.span != entry.span {
                        return None;
                    }
                    group.slices = group.slices.checked_add(1)?;
                }
                _ => {
                    if slice.group as usize != row_groups.len() || slice.row != 0 {
                        return None;
                    }
                    row_groups.push(RowGroup {
                        slices: 1,
                        span: entry.span,
                    });
                    next_row = 0;
                }
            }
            next_row = next_row.checked_add(entry.rows)?;
        }
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
        Some(PiecesOut {
            row_groups,
            track: entries.iter().map(|e| e.track.as_slice()).collect(),
            rows: entries.iter().map(|e| e.rows).collect(),
            position: deltas(entries.iter().map(|e| e.position))?,
            axis,
            seq: deltas(entries.iter().map(|e| e.seq))?,
        })
    }
}

impl Pieces {
    /// The entries the columns describe, or what is wrong with them.
    fn entries(self) -> Result<Vec<GroupEntry>, String> {
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
        let slices: u64 = self.row_groups.iter().map(|g| u64::from(g.slices)).sum();
        if slices != n as u64 {
            return Err(format!(
                "pieces.row_groups hold {slices} slices, pieces.track has {n} entries"
            ));
        }
        let position = self.position.checked("position")?;
        let seq = self.seq.checked("seq")?;
        let axis = match self.axis {
            None => vec![None; n],
            Some(column) => column.checked("axis")?,
        };
        let mut entries = Vec::with_capacity(n);
        let mut tracks = self.track.into_iter();
        let mut at = 0usize;
        for (g, group) in self.row_groups.iter().enumerate() {
            if group.slices == 0 {
                return Err(format!("pieces.row_groups[{g}] holds no slice"));
            }
            let mut row = 0u64;
            for _ in 0..group.slices {
                entries.push(GroupEntry {
                    track: tracks.next().unwrap_or_default(),
                    rows: self.rows[at],
                    position: position[at].unwrap_or_default(),
                    axis: axis[at],
                    seq: seq[at].unwrap_or_default(),
                    span: group.span,
                    last_track: None,
                    slice: Some(Slice {
                        group: g as u32,
                        row,
                    }),
                });
                row = row
                    .checked_add(self.rows[at])
                    .ok_or_else(|| format!("pieces.rows overflow in row group {g}"))?;
                at += 1;
            }
        }
        Ok(entries)
    }
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
    pieces: Option<PiecesOut<'a>>,
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
        let pieces = self
            .format
            .filter(|f| *f >= COLUMNAR_FORMAT)
            .and_then(|_| PiecesOut::of(&self.groups));
        FileOut {
            name: self.name,
            path: &self.path,
            bytes: self.bytes,
            barrier: self.barrier,
            sealed_at_ns: self.sealed_at_ns,
            footer: self.footer,
            groups: pieces.is_none().then_some(self.groups.as_slice()),
            pieces,
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
        let groups = match (file.groups, file.pieces) {
            (Some(groups), None) => groups,
            (None, Some(pieces)) => {
                if file.format.is_none_or(|f| f < COLUMNAR_FORMAT) {
                    return Err(D::Error::custom(format!(
                        "file {}: pieces in a file of format {:?} (columns are format {COLUMNAR_FORMAT})",
                        file.path, file.format
                    )));
                }
                pieces
                    .entries()
                    .map_err(|why| D::Error::custom(format!("file {}: {why}", file.path)))?
            }
            (Some(_), Some(_)) => {
                return Err(D::Error::custom(format!(
                    "file {}: both groups and pieces",
                    file.path
                )))
            }
            (None, None) => return Err(D::Error::missing_field("groups")),
        };
        Ok(SegmentFile {
            name: file.name,
            path: file.path,
            bytes: file.bytes,
            barrier: file.barrier,
            sealed_at_ns: file.sealed_at_ns,
            footer: file.footer,
            groups,
            cold: file.cold,
            run: file.run,
            format: file.format,
            first_level: file.first_level,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    track: vec![format!("h{h}"), format!("m\"{m}")],
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
            groups,
            cold: None,
            run: None,
            format: Some(COLUMNAR_FORMAT),
            first_level: None,
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
            for (got, want) in scoped.groups.iter().zip(&file.groups) {
                if want.track.starts_with(&prefix) {
                    assert_eq!(got, want);
                } else {
                    // Everything but the labels, which no read of the scope asks for.
                    let mut want = want.clone();
                    want.track.clear();
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
}
