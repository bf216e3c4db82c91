//! How a file entry is written in a record (format version 9): a packed data file's entries as
//! columns, one entry per Parquet row group plus one column value per slice, instead of an
//! object per slice repeating its row group's span.
//!
//! The entries in memory are the same [`GroupEntry`] values either way; only their JSON
//! differs. A file entry carries either `groups` (an object per entry, every version) or,
//! when its `format` is 9 or more, `pieces` (the columns): see `docs/format.md`, "Version 9".

pub use super::record::COLUMNAR_FORMAT;
use super::record::{GroupEntry, LevelRun, SegmentFile, Slice, Span};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    track: Vec<Vec<String>>,
    rows: Vec<u64>,
    position: Vec<[i64; 2]>,
    /// Absent when no entry has an axis range (a stream with no axis).
    #[serde(default)]
    axis: Option<Vec<Option<[i64; 2]>>>,
    seq: Vec<[i64; 2]>,
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

/// The column of ranges `deltas` wrote, or which value leaves the range of a u64.
fn ranges(column: &str, deltas: &[[i64; 2]]) -> Result<Vec<[u64; 2]>, String> {
    let mut previous = 0;
    deltas
        .iter()
        .enumerate()
        .map(|(i, &d)| undelta(&mut previous, d).ok_or_else(|| out_of_range(column, i, d)))
        .collect()
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
            ("position", self.position.len()),
            ("seq", self.seq.len()),
            ("axis", self.axis.as_ref().map_or(n, Vec::len)),
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
        let position = ranges("position", &self.position)?;
        let seq = ranges("seq", &self.seq)?;
        let axis: Vec<Option<[u64; 2]>> = match &self.axis {
            None => vec![None; n],
            Some(column) => {
                let mut previous = 0;
                column
                    .iter()
                    .enumerate()
                    .map(|(i, value)| match *value {
                        None => Ok(None),
                        Some(d) => undelta(&mut previous, d)
                            .map(Some)
                            .ok_or_else(|| out_of_range("axis", i, d)),
                    })
                    .collect::<Result<_, String>>()?
            }
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
                    position: position[at],
                    axis: axis[at],
                    seq: seq[at],
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
