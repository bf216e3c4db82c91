//! Golden files lock the on-disk format, version 1 (`docs/format.md`).
//!
//! - `tests/golden/manifest-v1.{bin,jsonl}`: a fixed snapshot, two declarations (one with a
//!   level ladder, one without) and a barrier (with a level file for the stream that has
//!   levels), framed byte for byte as `manifest::log::encode` writes them;
//!   `snapshot-v1.{bin,json}`: the snapshot that starts a later generation holding that state.
//! - `tests/golden/rows-schema-v1.txt`, `rows-arrow-schema-v1.txt`: the Parquet schema of a
//!   data file as version 1 wrote it (the fixture's), and the Arrow schema a reader recovers
//!   from it; `levels-schema-v1.txt`, `levels-arrow-schema-v1.txt`: the same for a level file.
//!   Frozen: no build writes them any more. `rows-schema-v5.txt` and its siblings are what
//!   this build writes (format version 5: integers stored signed).
//! - `tests/fixtures/archive-v1/`: a whole archive written by version 1 (fixed clock), data
//!   files and level files, which every later build must open, read, survey and verify
//!   exactly as recorded here. Frozen too: `UPDATE_GOLDEN=1` leaves it alone.
//! - The Python reader in `docs/format.md` is run against that fixture, so the page's recipe
//!   stays true.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden` writes every golden file and
//! the fixture archive instead of comparing against them. Once a version is released, do that
//! only for a deliberate format change, which also bumps the frame version and
//! `docs/format.md`; keep a copy of the old fixture so the new build still proves what it does
//! with archives already on disk. A golden file that differs without a version bump means
//! archives written before the change no longer read the same.

use arrow::array::{
    Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::json;
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Barrier, GroupEntry, Record, SegmentFile, Snapshot, Span, StreamDecl,
};
use series_archive::archive::{Archive, Config, FixedClock, Ladder, Plan, StreamSpec};
use series_archive::{Aggregate, Bucket, Placed, Position};
use std::collections::BTreeMap;
use std::ops::Bound::{self, Included, Unbounded};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

#[path = "common/golden.rs"]
mod golden_files;
#[path = "common/tree.rs"]
mod tree;
use tree::copy_tree;

/// The barrier clock of every archive written here: 2025-11-29T19:00:00Z.
const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;
const STREAM: &str = "capture";
/// The fixture's level ladder: cells 2, 4 and 8 axis units wide. Small, so the fixture's axis
/// span (10..=20) covers several cells on every level, cells hold partials from both barriers,
/// and a small budget surveys past the coarsest level.
const LADDER: Ladder = Ladder {
    base: 2,
    factor: 2,
    levels: 3,
};
/// The measured fields, in declared order (the `field` column's order within a track).
const MEASURED: [&str; 2] = ["value", "noise"];

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

fn crate_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Compares `actual` with the golden file, or (with `UPDATE_GOLDEN=1`) writes it.
fn golden(relative: &str, actual: &[u8]) {
    let path = crate_path(relative);
    if updating() {
        std::fs::create_dir_all(path.parent().expect("golden files live in a directory"))
            .expect("create the golden directory");
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with UPDATE_GOLDEN=1 (only with a format version bump)",
            path.display()
        )
    });
    if expected != actual {
        let at = expected
            .iter()
            .zip(actual)
            .position(|(a, b)| a != b)
            .unwrap_or(expected.len().min(actual.len()));
        panic!(
            "{} differs from what this build writes, first at byte {at} ({} golden bytes, {} written).\n\
             The version-1 format changed: bump the frame version and docs/format.md instead.\n\
             golden:  {}\nwritten: {}",
            path.display(),
            expected.len(),
            actual.len(),
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual),
        );
    }
}

/// Compares `actual` with a golden file that no build writes any more (a version 1-4 file's
/// layout, read from the frozen fixture): never regenerated.
fn golden_frozen(relative: &str, actual: &[u8]) {
    let path = crate_path(relative);
    let expected = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        expected == actual,
        "{}: the frozen version-1 fixture no longer reads as it was written:\ngolden:  {}\nread:    {}",
        path.display(),
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual)
    );
}

// ---------------------------------------------------------------------------------------
// The stream every test here writes: two track components, a u64 axis, two measured fields.
// ---------------------------------------------------------------------------------------

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::Utf8, false),
        Field::new("probe", DataType::Utf8, false),
        Field::new("ordinal", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
        Field::new("noise", DataType::Float64, false),
        Field::new("note", DataType::Utf8, true),
    ]))
}

fn config() -> Config {
    let ladder = Ladder::new(LADDER.base, LADDER.factor, LADDER.levels).expect("a valid ladder");
    let spec = StreamSpec::dynamic(
        STREAM,
        schema(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("a valid declaration")
    .with_ladder(Some(ladder));
    Config::new()
        .stream(spec)
        .clock(Arc::new(FixedClock(SEALED_AT_NS)))
}

/// Builds a manifest type from exactly the fields version 1 writes, through serde. A field
/// added later with a serde default takes that default here; whether the encoding is still
/// version 1 is for the golden bytes to decide.
fn from_v1<T: serde::de::DeserializeOwned>(fields: serde_json::Value) -> T {
    serde_json::from_value(fields).expect("version-1 fields decode")
}

fn column(name: &str, data_type: &str, nullable: bool) -> serde_json::Value {
    json!({"name": name, "data_type": data_type, "nullable": nullable})
}

/// The declaration the manifest records for [`config`], spelled out.
fn declaration() -> StreamDecl {
    from_v1(json!({
        "id": STREAM,
        "columns": [
            column("run", "Utf8", false),
            column("probe", "Utf8", false),
            column("ordinal", "UInt64", false),
            column("value", "Int64", false),
            column("noise", "Float64", false),
            column("note", "Utf8", true),
        ],
        "track": ["run", "probe"],
        "axis": "ordinal",
        "measured": MEASURED,
        "ladder": {"base": LADDER.base, "factor": LADDER.factor, "levels": LADDER.levels},
    }))
}

/// A stream without an axis, so without a ladder: its declaration and barrier entries omit
/// `ladder` and `levels`.
fn plain_declaration() -> StreamDecl {
    from_v1(json!({
        "id": "events",
        "columns": [column("message", "Utf8", false)],
        "track": [],
        "axis": null,
        "measured": [],
    }))
}

/// One row as published: position, run, probe, ordinal, value, noise, note.
type Row = (
    u64,
    &'static str,
    &'static str,
    u64,
    i64,
    f64,
    Option<&'static str>,
);

/// Barrier 1 (staged as two deliveries) and barrier 2: two runs × two probes. `run_7` and
/// `run_70` share a text prefix but neither is beneath the other.
const BARRIER_1A: &[Row] = &[
    (1, "run_7", "p1", 10, 100, 0.5, Some("start")),
    (1, "run_7", "p2", 10, 200, 0.25, None),
    (2, "run_70", "p1", 10, -5, 1.5, None),
];
const BARRIER_1B: &[Row] = &[
    (3, "run_7", "p1", 11, 101, 0.75, None),
    (3, "run_70", "p2", 12, 7, -0.5, Some("x")),
    (4, "run_7", "p2", 12, 201, 0.0, None),
];
const BARRIER_2: &[Row] = &[
    (5, "run_7", "p1", 13, 102, 1.0, None),
    (5, "run_70", "p1", 14, -6, 2.0, Some("end")),
    (6, "run_70", "p2", 15, 8, -1.0, None),
    (7, "run_7", "p1", 20, 103, 1.25, None),
];
/// Rows of barrier 1 in `all_rows()`; the rest are barrier 2's.
const BARRIER_1_ROWS: usize = BARRIER_1A.len() + BARRIER_1B.len();

fn batch(rows: &[Row]) -> (RecordBatch, Vec<u64>) {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.3))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.5))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.6))),
    ];
    let batch = RecordBatch::try_new(schema(), columns).expect("a valid batch");
    (batch, rows.iter().map(|r| r.0).collect())
}

/// A published row with the `_seq` it was assigned.
type Stored = (Row, u64);

/// A row read back: position, run, probe, ordinal, value, noise, note, `_seq`.
type Owned = (u64, String, String, u64, i64, f64, Option<String>, u64);

fn column_of<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("column {name} has another type"))
}

fn stored_rows(batch: &RecordBatch) -> Vec<Owned> {
    let s = |name: &str| column_of::<StringArray>(batch, name);
    let u = |name: &str| column_of::<UInt64Array>(batch, name);
    let (run, probe, note) = (s("run"), s("probe"), s("note"));
    let (ordinal, position, seq) = (u("ordinal"), u("_position"), u("_seq"));
    let value = column_of::<Int64Array>(batch, "value");
    let noise = column_of::<Float64Array>(batch, "noise");
    (0..batch.num_rows())
        .map(|i| {
            (
                position.value(i),
                run.value(i).to_owned(),
                probe.value(i).to_owned(),
                ordinal.value(i),
                value.value(i),
                noise.value(i),
                note.is_valid(i).then(|| note.value(i).to_owned()),
                seq.value(i),
            )
        })
        .collect()
}

fn owned(rows: &[Stored]) -> Vec<Owned> {
    rows.iter()
        .map(|&((p, run, probe, ordinal, value, noise, note), seq)| {
            (
                p,
                run.into(),
                probe.into(),
                ordinal,
                value,
                noise,
                note.map(Into::into),
                seq,
            )
        })
        .collect()
}

/// Every row of the fixture in publish order, each with the `_seq` it was assigned.
fn all_rows() -> Vec<Stored> {
    BARRIER_1A
        .iter()
        .chain(BARRIER_1B)
        .chain(BARRIER_2)
        .copied()
        .zip(0u64..)
        .collect()
}

/// Writes the fixture's two barriers into a fresh archive at `root`.
fn write_archive(root: &Path) {
    let mut archive = Archive::open(root, config()).expect("open a new archive");
    for (rows, seal) in [(BARRIER_1A, false), (BARRIER_1B, true), (BARRIER_2, true)] {
        let (batch, positions) = batch(rows);
        archive
            .stage_batch(STREAM, &batch, &positions)
            .expect("stage");
        if seal {
            archive.seal_all().expect("seal").expect("a barrier");
        }
    }
}

fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("list directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("beneath the root");
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// The committed fixture archive, written by a version-1 build. It is frozen: a build of
/// format version 5 writes signed files, so it can no longer write this fixture, and
/// `UPDATE_GOLDEN=1` leaves it as it is (`SERIES_ARCHIVE_REWRITE_V1_FIXTURE=1` would rewrite
/// it with this build, which is never wanted: it is what proves old archives still read).
fn fixture() -> &'static Path {
    static FIXTURE: OnceLock<PathBuf> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = crate_path("tests/fixtures/archive-v1");
        if std::env::var_os("SERIES_ARCHIVE_REWRITE_V1_FIXTURE").is_some_and(|v| v == "1") {
            let scratch = tempfile::tempdir().expect("tempdir");
            write_archive(scratch.path());
            if path.exists() {
                std::fs::remove_dir_all(&path).expect("remove the old fixture");
            }
            // The manifest, the data files and the level files; never LOCK, and .tmp/ and
            // .quarantine/ are empty.
            copy_tree(&scratch.path().join("manifest"), &path.join("manifest"));
            copy_tree(&scratch.path().join("streams"), &path.join("streams"));
        }
        path
    })
}

/// A private, writable copy of the fixture.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(fixture(), dir.path());
    dir
}

fn labels(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------
// Raw folds: what docs/format.md says the level tables hold, computed from the rows alone.
// ---------------------------------------------------------------------------------------

/// A track's labels; tuple order is track-key order (`run_7` < `run_70`).
type Track = (String, String);

/// Per track (key order): per (field in declared order, cell of `width`), the fold of the
/// track's rows in that cell in publish order. `rows` are in publish order.
fn raw_cells<'a>(
    rows: impl IntoIterator<Item = &'a Stored>,
    width: u64,
) -> BTreeMap<Track, BTreeMap<(u32, u64), Bucket>> {
    let mut out: BTreeMap<Track, BTreeMap<(u32, u64), Bucket>> = BTreeMap::new();
    for &((_, run, probe, ordinal, value, noise, _), _) in rows {
        let cells = out.entry((run.into(), probe.into())).or_default();
        for (field, v) in [(0u32, value as f64), (1, noise)] {
            cells
                .entry((field, ordinal / width))
                .and_modify(|b| b.push(ordinal, v))
                .or_insert(Bucket::of(field, ordinal, v));
        }
    }
    out
}

/// Whether `row` is beneath the selection `prefix`.
fn beneath(row: &Stored, prefix: &[&str]) -> bool {
    [row.0 .1, row.0 .2].starts_with(prefix)
}

/// The buckets a survey answers with cells `width` wide, answer cells `cells[0]..=cells[1]`,
/// for the tracks beneath `prefix`: per track the raw fold of each whole cell, then merged
/// cell by cell across tracks in key order; grouped by field, cells ascending.
fn raw_survey(rows: &[Stored], prefix: &[&str], width: u64, cells: [u64; 2]) -> Vec<Bucket> {
    let selected = rows.iter().filter(|r| beneath(r, prefix));
    let mut merged: BTreeMap<(u32, u64), Bucket> = BTreeMap::new();
    for (_, track) in raw_cells(selected, width) {
        for ((field, cell), b) in track {
            if (cells[0]..=cells[1]).contains(&cell) {
                merged
                    .entry((field, cell))
                    .and_modify(|m| *m = m.merge(b))
                    .or_insert(b);
            }
        }
    }
    merged.into_values().collect()
}

/// Per field, the fold of every row beneath `prefix` whose axis lies in `[from, to)`, tracks
/// in key order and each track's rows in publish order.
fn raw_fold(rows: &[Stored], prefix: &[&str], [from, to]: [u64; 2]) -> Vec<Bucket> {
    let selected = rows
        .iter()
        .filter(|r| beneath(r, prefix) && (from..to).contains(&r.0 .3));
    let mut per_field: BTreeMap<u32, Bucket> = BTreeMap::new();
    for (_, track) in raw_cells(selected, u64::MAX) {
        for ((field, _), b) in track {
            per_field
                .entry(field)
                .and_modify(|m| *m = m.merge(b))
                .or_insert(b);
        }
    }
    per_field.into_values().collect()
}

/// One row of a level table: track labels, `level`, `field`, `cell`, and the bucket it holds.
type LevelRow = (Track, u8, String, u64, Bucket);

fn level_rows(batch: &RecordBatch) -> Vec<LevelRow> {
    let u = |name: &str| column_of::<UInt64Array>(batch, name);
    let x = |name: &str| column_of::<Float64Array>(batch, name);
    let (run, probe) = (
        column_of::<StringArray>(batch, "run"),
        column_of::<StringArray>(batch, "probe"),
    );
    let level = column_of::<UInt8Array>(batch, "level");
    let field = column_of::<StringArray>(batch, "field");
    (0..batch.num_rows())
        .map(|i| {
            let name = field.value(i);
            let index = MEASURED
                .iter()
                .position(|m| *m == name)
                .unwrap_or_else(|| panic!("row {i} names unknown field {name:?}"));
            let placed = |axis: &str, value: &str| Placed::new(u(axis).value(i), x(value).value(i));
            let bucket = Bucket {
                field: index as u32,
                first: placed("first_axis", "first"),
                last: placed("last_axis", "last"),
                min: placed("min_axis", "min"),
                max: placed("max_axis", "max"),
                count: u("count").value(i),
                sum: x("sum").value(i),
                sum_sq: x("sum_sq").value(i),
            };
            (
                (run.value(i).to_owned(), probe.value(i).to_owned()),
                level.value(i),
                name.to_owned(),
                u("cell").value(i),
                bucket,
            )
        })
        .collect()
}

/// What row group `level` of a barrier's level file holds: the raw fold of that barrier's
/// rows on the level's grid, ordered by track key, then field (declared order), then cell.
fn expected_level(barrier_rows: &[Stored], level: u8) -> Vec<LevelRow> {
    let width = LADDER.base * LADDER.factor.pow(u32::from(level));
    raw_cells(barrier_rows, width)
        .into_iter()
        .flat_map(|(track, cells)| {
            cells.into_iter().map(move |((field, cell), b)| {
                (
                    track.clone(),
                    level,
                    MEASURED[field as usize].to_owned(),
                    cell,
                    b,
                )
            })
        })
        .collect()
}

/// Reads row group `group` of the Parquet file at `path`.
fn read_group(path: &Path, group: usize) -> RecordBatch {
    let batches: Vec<RecordBatch> =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).expect("open"))
            .expect("arrow reader")
            .with_row_groups(vec![group])
            .build()
            .expect("reader")
            .collect::<Result<_, _>>()
            .expect("decode");
    let schema = batches
        .first()
        .map(|b| b.schema())
        .expect("a row group decodes to a batch");
    logical(arrow::compute::concat_batches(&schema, &batches).expect("one batch"))
}

/// The fixture's unsigned columns (data and level files), which a version-5 file stores
/// signed (`level` as Int8, the rest as Int64) and a version 1-4 file unsigned.
const UNSIGNED: [(&str, DataType); 10] = [
    ("ordinal", DataType::UInt64),
    ("_position", DataType::UInt64),
    ("_seq", DataType::UInt64),
    ("cell", DataType::UInt64),
    ("first_axis", DataType::UInt64),
    ("last_axis", DataType::UInt64),
    ("min_axis", DataType::UInt64),
    ("max_axis", DataType::UInt64),
    ("count", DataType::UInt64),
    ("level", DataType::UInt8),
];

/// A decoded row group with its unsigned columns as their declared types, whichever version
/// wrote it (a negative stored value fails the cast).
fn logical(batch: RecordBatch) -> RecordBatch {
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match UNSIGNED.iter().find(|(n, _)| n == field.name()) {
            Some((_, t)) if column.data_type() != t => {
                let options = arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                };
                columns.push(
                    arrow::compute::cast_with_options(column, t, &options)
                        .unwrap_or_else(|e| panic!("{}: {e}", field.name())),
                );
                fields.push(field.as_ref().clone().with_data_type(t.clone()));
            }
            _ => {
                columns.push(column.clone());
                fields.push(field.as_ref().clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("a batch")
}

fn parquet_reader(path: &Path) -> SerializedFileReader<std::fs::File> {
    SerializedFileReader::new(std::fs::File::open(path).expect("open")).expect("parquet")
}

// ---------------------------------------------------------------------------------------
// a. Manifest encoding
// ---------------------------------------------------------------------------------------

/// A fixed snapshot, two declarations and a barrier: generation 1 as a writer starts it, the
/// 2-track axial stream declared with a ladder and a plain stream without one, one barrier
/// writing for the first a data file of two row groups and a level file of three levels, and
/// for the second a data file only.
fn golden_records() -> Vec<Record> {
    let span = |offset, len, crc32c| Span {
        offset,
        len,
        crc32c,
    };
    let group = |probe: &str, rows, position, axis, seq, span| GroupEntry {
        track: ["run_7", probe].map(String::from).into(),
        rows,
        position,
        axis: Some(axis),
        seq,
        span,
        last_track: None,
        slice: None,
    };
    let file = |name: u64, path: &str, bytes, footer, groups| SegmentFile {
        name,
        path: path.into(),
        bytes,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer,
        groups: std::sync::Arc::new(groups),
        cold: None,
        run: None,
        format: None,
        first_level: None,
        elided: None,
    };
    let rows = file(
        1,
        "streams/capture/rows/000000000001.parquet",
        4242,
        span(1500, 2742, 0x0BAD_F00D),
        vec![
            group("p1", 2, [1, 3], [10, 11], [0, 2], span(4, 700, 0xDEAD_BEEF)),
            group(
                "p2",
                2,
                [1, 4],
                [10, 12],
                [1, 3],
                span(704, 796, 4_000_000_000),
            ),
        ],
    );
    // Row group k holds level k of every track: no labels; the ranges are the barrier's
    // (both tracks together); `rows` counts cells (track × field × cell).
    let level = |rows, span| GroupEntry {
        track: Default::default(),
        rows,
        position: [1, 4],
        axis: Some([10, 12]),
        seq: [0, 3],
        span,
        last_track: None,
        slice: None,
    };
    let levels = file(
        2,
        "streams/capture/levels/000000000002.parquet",
        9000,
        span(3000, 6000, 0x1234_5678),
        vec![
            level(6, span(4, 1000, 1)),
            level(6, span(1004, 998, 22)),
            level(4, span(2002, 998, 333)),
        ],
    );
    let events = file(
        3,
        "streams/events/rows/000000000003.parquet",
        600,
        span(120, 480, 77),
        vec![GroupEntry {
            track: Default::default(),
            rows: 1,
            position: [2, 2],
            axis: None,
            seq: [0, 0],
            span: span(4, 116, 0xFFFF_FFFF),
            last_track: None,
            slice: None,
        }],
    );
    let to_json = |f: SegmentFile| serde_json::to_value(f).expect("a file entry serializes");
    vec![
        Record::Snapshot(Snapshot {
            generation: 1,
            next_name: 1,
            barriers: 0,
            streams: vec![],
        }),
        Record::Declare(declaration()),
        Record::Declare(plain_declaration()),
        Record::Barrier(Barrier {
            barrier: 1,
            sealed_at_ns: SEALED_AT_NS,
            next_name: 4,
            streams: vec![
                from_v1(json!({
                    "stream": STREAM,
                    "watermark": 4,
                    "next_seq": 4,
                    "file": to_json(rows),
                    "levels": to_json(levels),
                })),
                from_v1(json!({
                    "stream": "events",
                    "watermark": 2,
                    "next_seq": 1,
                    "file": to_json(events),
                })),
            ],
        }),
    ]
}

/// Decodes a whole generation's bytes into records; every record must pass its check.
fn decode_all(bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        match frame::decode(bytes, offset) {
            Decoded::End => return records,
            Decoded::Record { payload, next } => {
                records.push(serde_json::from_slice(payload).expect("a golden record decodes"));
                offset = next;
            }
            other => panic!("golden bytes fail at {offset}: {other:?}"),
        }
    }
}

/// Reads a frame header the way `docs/format.md` spells it, without the crate's decoder.
fn split_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut payloads = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let header = &bytes[at..at + 16];
        assert_eq!(&header[0..4], b"SAmr", "magic at {at}");
        assert_eq!(
            u16::from_le_bytes([header[4], header[5]]),
            1,
            "version at {at}"
        );
        assert_eq!(
            u16::from_le_bytes([header[6], header[7]]),
            0,
            "reserved at {at}"
        );
        let len = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
        let payload = &bytes[at + 16..at + 16 + len];
        let mut covered = header[4..12].to_vec();
        covered.extend_from_slice(payload);
        assert_eq!(
            crc32c::crc32c(&covered),
            crc,
            "CRC-32C of bytes 4..12 + payload at {at}"
        );
        payloads.push(payload);
        at += 16 + len;
    }
    payloads
}

#[test]
fn manifest_records_encode_to_the_golden_bytes() {
    let records = golden_records();
    let bin: Vec<u8> = records.iter().flat_map(log::encode).collect();
    let payloads = split_frames(&bin);
    let jsonl: String = payloads
        .iter()
        .map(|p| format!("{}\n", std::str::from_utf8(p).expect("payloads are UTF-8")))
        .collect();
    golden("tests/golden/manifest-v1.bin", &bin);
    golden("tests/golden/manifest-v1.jsonl", jsonl.as_bytes());

    // `ladder` and `levels` are written where present and omitted (never null) where absent.
    let payload = |i: usize| -> serde_json::Value {
        serde_json::from_slice(payloads[i]).expect("a payload is JSON")
    };
    assert_eq!(
        payload(1)["ladder"],
        json!({"base": 2, "factor": 2, "levels": 3})
    );
    assert!(payload(2).get("ladder").is_none(), "{}", payload(2));
    let barrier = payload(3);
    assert_eq!(
        barrier["streams"][0]["levels"]["path"],
        "streams/capture/levels/000000000002.parquet"
    );
    assert_eq!(
        barrier["streams"][0]["levels"]["groups"][0]["track"],
        json!([])
    );
    assert!(barrier["streams"][1].get("levels").is_none(), "{barrier}");

    // Decoding the committed bytes gives the same records back.
    let committed = std::fs::read(crate_path("tests/golden/manifest-v1.bin")).expect("golden bin");
    assert_eq!(decode_all(&committed), records);
    // The readable file is exactly the payloads, one per line, and each parses alone.
    let lines = std::fs::read_to_string(crate_path("tests/golden/manifest-v1.jsonl"))
        .expect("golden jsonl");
    let from_lines: Vec<Record> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a line is a record"))
        .collect();
    assert_eq!(from_lines, records);

    // The bytes are a valid generation 1: replay proves the barrier's state.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(log::generation_name(1));
    assert_eq!(log::generation_name(1), "gen-000000000001.log");
    std::fs::write(&path, &committed).expect("write generation");
    let replayed = log::replay(&path, 1).expect("replay");
    assert_eq!(replayed.records, 4);
    assert_eq!(replayed.tail, log::Tail::Clean);
    assert_eq!(replayed.trusted_len, committed.len() as u64);
    assert_eq!(replayed.state.next_name, 4);
    let stream = &replayed.state.streams[STREAM];
    assert_eq!((stream.watermark, stream.next_seq), (Position(4), 4));
    assert_eq!(stream.tracks.len(), 2);
    assert_eq!(stream.files.len(), 1);
    assert_eq!(stream.levels.len(), 1);
    assert_eq!(stream.levels[0].groups.len(), usize::from(LADDER.levels));
    let events = &replayed.state.streams["events"];
    assert_eq!((events.watermark, events.next_seq), (Position(2), 1));
    assert_eq!((events.files.len(), events.levels.len()), (1, 0));
    // A writer starts generation 1 of a new archive with exactly the golden snapshot.
    let fixture_log =
        std::fs::read(fixture().join("manifest/gen-000000000001.log")).expect("fixture");
    assert!(fixture_log.starts_with(&log::encode(&records[0])));

    // The snapshot a later generation starts with, holding that state.
    let snapshot = Record::Snapshot(replayed.state.snapshot(2));
    let snapshot_bin = log::encode(&snapshot);
    golden("tests/golden/snapshot-v1.bin", &snapshot_bin);
    let payload = split_frames(&snapshot_bin)[0];
    golden("tests/golden/snapshot-v1.json", &[payload, b"\n"].concat());
    let committed = std::fs::read(crate_path("tests/golden/snapshot-v1.bin")).expect("golden bin");
    assert_eq!(decode_all(&committed), vec![snapshot]);
    let json: serde_json::Value = serde_json::from_slice(payload).expect("JSON");
    assert_eq!(
        json["streams"][0]["levels"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(json["streams"][1].get("levels").is_none(), "{json}");
}

#[test]
fn a_torn_tail_and_damage_are_told_apart() {
    let bin: Vec<u8> = golden_records().iter().flat_map(log::encode).collect();
    let second = split_frames(&bin)[0].len() + 16;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(log::generation_name(1));
    // Torn: the last record cut short. The trusted prefix is the first three records.
    std::fs::write(&path, &bin[..bin.len() - 3]).expect("write");
    let replayed = log::replay(&path, 1).expect("replay");
    assert_eq!(replayed.records, 3);
    assert!(
        matches!(replayed.tail, log::Tail::Torn { .. }),
        "{:?}",
        replayed.tail
    );
    // Damaged: a payload byte of the second record flipped; two valid records follow it.
    let mut damaged = bin.clone();
    damaged[second + 20] ^= 0x01;
    std::fs::write(&path, &damaged).expect("write");
    let replayed = log::replay(&path, 1).expect("replay");
    assert_eq!(replayed.records, 1);
    assert_eq!(
        replayed.tail,
        log::Tail::Damaged {
            offset: second as u64,
            following: 2
        }
    );
}

// ---------------------------------------------------------------------------------------
// b. The Parquet layout of data files and level files
// ---------------------------------------------------------------------------------------

/// The Parquet schema as parquet-rs prints it, and the Arrow schema a reader recovers.
fn printed_schemas(path: &Path) -> (Vec<u8>, String) {
    let reader = parquet_reader(path);
    let mut printed = Vec::new();
    parquet::schema::printer::print_schema(
        &mut printed,
        reader.metadata().file_metadata().schema(),
    );
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).expect("open"))
            .expect("arrow reader");
    let arrow: String = builder
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let null = if f.is_nullable() {
                "nullable"
            } else {
                "not null"
            };
            format!("{}: {} {null}\n", f.name(), f.data_type())
        })
        .collect();
    (printed, arrow)
}

/// What every file version 1 writes shares (`docs/format.md`, "Data files" and "Digests"):
/// `series_archive.format = "1"`, ZSTD on every column chunk (but the small row groups of a
/// level file this build writes, uncompressed), `_position` and `_seq` (where
/// present) delta-encoded without a dictionary, one row group per recorded group, and spans
/// and digests recomputed from the file's own metadata by the documented rules.
///
/// A file this build writes is version 5 (a level file) or 6 (a barrier's data file, whose
/// row groups pack tracks and whose entries are slices of them): its entry says which (9 for
/// a packed file, whose entries a record writes as columns).
/// `partials`: the file is a barrier's level file (its small row groups are uncompressed when
/// this build wrote it).
fn assert_layout(path: &Path, entry: &SegmentFile, written_now: bool, partials: bool) {
    let packed = entry.is_packed();
    let version = match (written_now, packed) {
        (false, _) => "1",
        (true, false) => "5",
        (true, true) => "6",
    };
    let reader = parquet_reader(path);
    let metadata = reader.metadata();
    let kv = metadata
        .file_metadata()
        .key_value_metadata()
        .expect("key-value metadata");
    let format: Vec<_> = kv
        .iter()
        .filter(|kv| kv.key == "series_archive.format")
        .map(|kv| kv.value.as_deref())
        .collect();
    assert_eq!(format, vec![Some(version)], "{}", entry.path);
    // A packed file's entry says 9 since its entries are recorded as columns (format
    // version 9), or 11 when its slices average fewer than 16 rows and the record gives its
    // row groups alone (format version 11); its bytes, and their key-value metadata, are
    // version 6's.
    let rows: u64 = entry.groups.iter().map(|g| g.rows).sum();
    let recorded: u16 = if packed && rows < 16 * entry.groups.len() as u64 {
        11
    } else if packed {
        9
    } else {
        version.parse().expect("a number")
    };
    assert_eq!(
        entry.format,
        written_now.then_some(recorded),
        "{}: the manifest entry says which version wrote the file",
        entry.path
    );
    // One row group per entry, or (packed) per run of entries naming the same row group,
    // each slice starting where the one before it ends.
    let physical = entry.row_groups();
    assert_eq!(metadata.num_row_groups(), physical.len(), "{}", entry.path);
    if packed {
        let mut next = (0u32, 0u64);
        for (i, g) in entry.groups.iter().enumerate() {
            let slice = g.slice.expect("every entry of a packed file is a slice");
            if slice.group != next.0 {
                assert_eq!(slice.group, next.0 + 1, "{} entry {i}", entry.path);
                next = (slice.group, 0);
            }
            assert_eq!(slice.row, next.1, "{} entry {i} row", entry.path);
            next.1 += g.rows;
        }
    } else {
        assert!(
            entry.groups.iter().all(|g| g.slice.is_none()),
            "{}",
            entry.path
        );
    }
    for (i, group) in metadata.row_groups().iter().enumerate() {
        assert_eq!(
            (physical[i].0, group.num_rows() as u64),
            (i, physical[i].2),
            "{} group {i}",
            entry.path
        );
        // ZSTD on every chunk, but for a level file this build writes: its row groups of
        // fewer than 1,024 rows are stored uncompressed (`docs/format.md`, "Level files").
        let plain = written_now && partials && group.num_rows() < 1024;
        for chunk in group.columns() {
            let name = chunk.column_path().string();
            assert!(
                match chunk.compression() {
                    Compression::ZSTD(_) => !plain,
                    Compression::UNCOMPRESSED => plain,
                    _ => false,
                },
                "{} group {i} of {} rows, {name}: {:?}",
                entry.path,
                group.num_rows(),
                chunk.compression()
            );
            // `_position` and `_seq` delta-encoded without a dictionary in every file; in files
            // this build writes, every integer too, and floats byte-stream-split (encodings are
            // the writer's choice: the version-1 fixture has dictionaries on the others).
            let expected = match name.as_str() {
                "_position" | "_seq" => Some(Encoding::DELTA_BINARY_PACKED),
                "ordinal" | "value" if written_now => Some(Encoding::DELTA_BINARY_PACKED),
                "noise" if written_now => Some(Encoding::BYTE_STREAM_SPLIT),
                _ => None,
            };
            if let Some(expected) = expected {
                let encodings: Vec<Encoding> = chunk.encodings().collect();
                assert!(encodings.contains(&expected), "{name}: {encodings:?}");
                assert!(
                    chunk.dictionary_page_offset().is_none(),
                    "{name} has a dictionary"
                );
            }
        }
    }

    // The digests, recomputed from the rules of docs/format.md and the file's own metadata.
    let bytes = std::fs::read(path).expect("read");
    assert_eq!(bytes.len() as u64, entry.bytes);
    let digest = |index: u32, parts: &[&[u8]]| {
        let mut covered = entry.name.to_le_bytes().to_vec();
        covered.extend_from_slice(&index.to_le_bytes());
        parts.iter().for_each(|p| covered.extend_from_slice(p));
        crc32c::crc32c(&covered)
    };
    let chunk_start = |c: &parquet::file::metadata::ColumnChunkMetaData| {
        c.dictionary_page_offset().unwrap_or(c.data_page_offset()) as u64
    };
    let starts: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|g| g.columns().iter().map(chunk_start).min().expect("columns"))
        .collect();
    let ends: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|g| {
            g.columns()
                .iter()
                .map(|c| chunk_start(c) + c.compressed_size() as u64)
                .max()
                .expect("columns")
        })
        .collect();
    assert_eq!(
        starts[0], 4,
        "the first row group starts right after the leading PAR1"
    );
    for (index, group) in entry.groups.iter().enumerate() {
        let i = group.physical(index);
        let end = starts.get(i + 1).copied().unwrap_or(ends[i]);
        assert_eq!(
            (group.span.offset, group.span.len),
            (starts[i], end - starts[i]),
            "{} group {i} span",
            entry.path
        );
        let slice = &bytes[starts[i] as usize..end as usize];
        assert_eq!(
            group.span.crc32c,
            digest(i as u32, &[slice]),
            "{} group {i} digest",
            entry.path
        );
        assert_eq!(
            group.span.crc32c,
            series_archive::archive::digest(entry.name, i as u32, &[slice])
        );
    }
    let footer = ends[ends.len() - 1];
    assert_eq!(
        (entry.footer.offset, entry.footer.len),
        (footer, entry.bytes - footer)
    );
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(
        entry.footer.crc32c,
        digest(u32::MAX, &[&bytes[..4], &bytes[footer as usize..]]),
        "{} footer digest",
        entry.path
    );
}

#[test]
fn data_files_have_the_golden_parquet_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_archive(dir.path());
    let archive = Archive::open(dir.path(), config().read_only(true)).expect("open");
    let stream = &archive.state().streams[STREAM];
    assert_eq!(
        stream.decl,
        declaration(),
        "the recorded declaration is the golden one"
    );
    let entry = &stream.files[0];
    assert_eq!(entry.path, "streams/capture/rows/000000000001.parquet");
    let path = dir.path().join(&entry.path);

    // Written now: version 5, integers stored signed.
    let (printed, arrow) = printed_schemas(&path);
    golden("tests/golden/rows-schema-v5.txt", &printed);
    golden("tests/golden/rows-arrow-schema-v5.txt", arrow.as_bytes());
    assert_layout(&path, entry, true, false);
    // The version-1 fixture's files keep the version-1 layout, read as they are.
    let old = Archive::open(fixture(), config().read_only(true)).expect("open the fixture");
    let old_entry = &old.state().streams[STREAM].files[0];
    let old_path = fixture().join(&old_entry.path);
    let (printed_v1, arrow_v1) = printed_schemas(&old_path);
    golden_frozen("tests/golden/rows-schema-v1.txt", &printed_v1);
    golden_frozen("tests/golden/rows-arrow-schema-v1.txt", arrow_v1.as_bytes());
    assert_layout(&old_path, old_entry, false, false);

    // One entry per track, in key order: run_7␟p1␟ < run_7␟p2␟ < run_70␟p1␟ < run_70␟p2␟;
    // the barrier's few rows are one packed row group, each track a slice of it.
    let tracks = [
        ["run_7", "p1"],
        ["run_7", "p2"],
        ["run_70", "p1"],
        ["run_70", "p2"],
    ];
    assert_eq!(entry.groups.len(), tracks.len());
    assert_eq!(
        entry.row_groups().len(),
        1,
        "the barrier's tracks share one row group"
    );
    for (i, labels) in tracks.iter().enumerate() {
        assert_eq!(entry.groups[i].track[..], labels[..]);
        let slice = entry.groups[i].slice.expect("a slice");
        let rows: Vec<_> = stored_rows(&read_group(&path, slice.group as usize))
            .into_iter()
            .skip(slice.row as usize)
            .take(entry.groups[i].rows as usize)
            .collect();
        assert_eq!(rows.len() as u64, entry.groups[i].rows);
        assert!(
            rows.iter().all(|r| [r.1.as_str(), r.2.as_str()] == *labels),
            "group {i}: {rows:?}"
        );
        let seqs: Vec<u64> = rows.iter().map(|r| r.7).collect();
        assert!(seqs.is_sorted(), "a group holds its rows in publish order");
        assert_eq!([seqs[0], seqs[seqs.len() - 1]], entry.groups[i].seq);
    }
}

#[test]
fn level_files_have_the_golden_parquet_schema_and_hold_the_fold_of_their_barrier() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_archive(dir.path());
    let archive = Archive::open(dir.path(), config().read_only(true)).expect("open");
    let stream = &archive.state().streams[STREAM];
    // One level file per barrier, named right after the barrier's data file.
    let names: Vec<(u64, u64)> = stream
        .files
        .iter()
        .zip(&stream.levels)
        .map(|(rows, levels)| (rows.name, levels.name))
        .collect();
    assert_eq!(names, [(1, 2), (3, 4)]);
    let paths: Vec<&str> = stream.levels.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "streams/capture/levels/000000000002.parquet",
            "streams/capture/levels/000000000004.parquet"
        ]
    );

    let first = dir.path().join(&stream.levels[0].path);
    let (printed, arrow) = printed_schemas(&first);
    golden("tests/golden/levels-schema-v5.txt", &printed);
    golden("tests/golden/levels-arrow-schema-v5.txt", arrow.as_bytes());
    let old = Archive::open(fixture(), config().read_only(true)).expect("open the fixture");
    let old_entry = &old.state().streams[STREAM].levels[0];
    let old_path = fixture().join(&old_entry.path);
    let (printed_v1, arrow_v1) = printed_schemas(&old_path);
    golden_frozen("tests/golden/levels-schema-v1.txt", &printed_v1);
    golden_frozen(
        "tests/golden/levels-arrow-schema-v1.txt",
        arrow_v1.as_bytes(),
    );
    assert_layout(&old_path, old_entry, false, true);

    let all = all_rows();
    let barriers = [&all[..BARRIER_1_ROWS], &all[BARRIER_1_ROWS..]];
    for ((entry, rows_file), barrier_rows) in stream.levels.iter().zip(&stream.files).zip(barriers)
    {
        let path = dir.path().join(&entry.path);
        assert_layout(&path, entry, true, true);
        assert_eq!(
            printed_schemas(&path).0,
            printed,
            "every level file has one schema"
        );
        assert_eq!(entry.barrier, rows_file.barrier);
        // One row group per level, in level order.
        assert_eq!(
            entry.groups.len(),
            usize::from(LADDER.levels),
            "{}",
            entry.path
        );
        let span = |f: fn(&Stored) -> u64| {
            let values = barrier_rows.iter().map(f);
            [
                values.clone().min().expect("rows"),
                values.max().expect("rows"),
            ]
        };
        for (k, group) in entry.groups.iter().enumerate() {
            let level = u8::try_from(k).expect("a few levels");
            // A level row group covers every track the barrier wrote: no labels, and the
            // ranges of the barrier's rows of the stream.
            assert!(group.track.is_empty(), "{} level {k}", entry.path);
            assert_eq!(group.position, span(|r| r.0 .0), "{} level {k}", entry.path);
            assert_eq!(
                group.axis,
                Some(span(|r| r.0 .3)),
                "{} level {k}",
                entry.path
            );
            assert_eq!(group.seq, span(|r| r.1), "{} level {k}", entry.path);

            let rows = level_rows(&read_group(&path, k));
            assert_eq!(rows.len() as u64, group.rows);
            assert!(
                rows.iter().all(|r| r.1 == level),
                "the level column of row group {k} is {k}: {rows:?}"
            );
            // Ordered by track key, then field (declared order), then cell; one row each.
            let order: Vec<(&Track, usize, u64)> = rows
                .iter()
                .map(|r| {
                    let field = MEASURED.iter().position(|m| *m == r.2).expect("a field");
                    (&r.0, field, r.3)
                })
                .collect();
            assert!(
                order.windows(2).all(|w| w[0] < w[1]),
                "{} level {k} row order: {order:?}",
                entry.path
            );
            // Each row is the fold of exactly the barrier's rows in its cell.
            assert_eq!(
                rows,
                expected_level(barrier_rows, level),
                "{} level {k}",
                entry.path
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// c. An archive written by version 1, opened by this build
// ---------------------------------------------------------------------------------------

/// The files of the fixture: one generation, and per barrier a data file and a level file,
/// named from one counter (data file first).
const FIXTURE_FILES: [&str; 5] = [
    "manifest/gen-000000000001.log",
    "streams/capture/levels/000000000002.parquet",
    "streams/capture/levels/000000000004.parquet",
    "streams/capture/rows/000000000001.parquet",
    "streams/capture/rows/000000000003.parquet",
];

fn expected_files(root: &Path) -> Vec<PathBuf> {
    ["000000000001", "000000000003"]
        .map(|n| root.join(format!("streams/capture/rows/{n}.parquet")))
        .to_vec()
}

/// Survey answers and level folds over `rows` (what the archive holds, in publish order)
/// equal the raw folds of docs/format.md ("How the survey picks a level").
fn assert_surveys_and_folds(archive: &Archive, rows: &[Stored]) {
    struct Case {
        prefix: &'static [&'static str],
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
    }
    let hi = rows.iter().map(|r| r.0 .3).max().expect("rows");
    for case in [
        // 32 points, 2 fields: 4 cells per field. Over 10..=hi, level 0 (width 2) touches 6
        // cells, level 1 (width 4) touches 4 (hi ≤ 23): level 1.
        Case {
            prefix: &[],
            start: Unbounded,
            end: Unbounded,
            budget: 32,
        },
        // 1 cell per field over 11..=13: level 2 (width 8), one whole cell 8..16, which holds
        // the run_7 rows at 10 and 12 too.
        Case {
            prefix: &["run_7"],
            start: Included(11),
            end: Included(13),
            budget: 11,
        },
        // 1 cell per field over 10..=hi: even level 2 touches 2 cells, so cells of level 2
        // merge 3 at a time into one grid-aligned cell 24 wide (0..24).
        Case {
            prefix: &[],
            start: Unbounded,
            end: Unbounded,
            budget: 8,
        },
        Case {
            prefix: &["run_70", "p2"],
            start: Included(12),
            end: Bound::Excluded(16),
            budget: 16,
        },
    ] {
        let survey = archive
            .survey(
                STREAM,
                &labels(case.prefix),
                case.start,
                case.end,
                case.budget,
            )
            .expect("survey");
        let plan = survey.plan.expect("the range holds rows");
        assert_eq!(survey.fields, MEASURED);
        assert_eq!(survey.cells_per_field, case.budget / 8);
        assert_eq!(
            survey.span,
            Some([
                plan.cells[0] * plan.cell_width,
                (plan.cells[1] + 1) * plan.cell_width
            ])
        );
        assert_eq!(
            plan.cell_width,
            LADDER.base * LADDER.factor.pow(plan.level as u32) * plan.merge
        );
        assert_eq!(
            survey.buckets,
            raw_survey(rows, case.prefix, plan.cell_width, plan.cells),
            "{:?} {:?}..{:?} budget {}: {plan:?}",
            case.prefix,
            case.start,
            case.end,
            case.budget
        );
        assert!(survey.buckets.len() * 4 <= case.budget);
    }

    // The plans of the three first cases, spelled out.
    let plan = |prefix: &[&str], start, end, budget| {
        archive
            .survey(STREAM, &labels(prefix), start, end, budget)
            .expect("survey")
            .plan
            .expect("a plan")
    };
    let top = hi / 4;
    assert_eq!(
        plan(&[], Unbounded, Unbounded, 32),
        Plan {
            level: 1,
            merge: 1,
            cell_width: 4,
            cells: [2, top]
        }
    );
    assert_eq!(
        plan(&["run_7"], Included(11), Included(13), 11),
        Plan {
            level: 2,
            merge: 1,
            cell_width: 8,
            cells: [1, 1]
        }
    );
    assert_eq!(
        plan(&[], Unbounded, Unbounded, 8),
        Plan {
            level: 2,
            merge: 3,
            cell_width: 24,
            cells: [0, 0]
        }
    );

    // Level folds: the whole level-0 cells (width 2) the range touches, 11..=13 → 10..14.
    for (prefix, start, end, span) in [
        (&["run_7", "p1"][..], Included(11), Included(13), [10, 14]),
        (&[][..], Unbounded, Unbounded, [10, (hi / 2 + 1) * 2]),
        (&["run_70"][..], Included(13), Included(15), [12, 16]),
    ] {
        let folded = archive
            .fold(STREAM, &labels(prefix), start, end, Aggregate::Mean)
            .expect("fold");
        assert_eq!(folded.source, "level 0");
        assert_eq!(folded.span, Some(span));
        let expected = raw_fold(rows, prefix, span);
        let answers: Vec<(u32, Option<f64>, u64)> = folded
            .answers
            .iter()
            .map(|a| (a.field, a.value, a.count))
            .collect();
        let raw: Vec<(u32, Option<f64>, u64)> = expected
            .iter()
            .map(|b| (b.field, Some(b.mean()), b.count))
            .collect();
        assert_eq!(answers, raw, "mean of {prefix:?} over {span:?}");
    }
}

#[test]
fn the_version_1_fixture_archive_opens_reads_surveys_and_verifies() {
    let fixture = fixture();
    assert_eq!(
        files_under(fixture),
        FIXTURE_FILES,
        "the fixture holds exactly the manifest, two data files and two level files (no LOCK)"
    );
    let expected = owned(&all_rows());
    let run_7 = owned(
        &all_rows()
            .into_iter()
            .filter(|r| r.0 .1 == "run_7")
            .collect::<Vec<_>>(),
    );
    let run_70_p2 = owned(
        &all_rows()
            .into_iter()
            .filter(|r| (r.0 .1, r.0 .2) == ("run_70", "p2"))
            .collect::<Vec<_>>(),
    );

    // Read-only: nothing written, nothing moved.
    let copy = fixture_copy();
    let archive =
        Archive::open(copy.path(), Config::new().read_only(true)).expect("open read-only");
    assert_eq!(archive.watermark(STREAM), Position(7));
    assert_eq!(archive.state().barriers, 2);
    assert_eq!(archive.state().next_name, 5);
    let stream = &archive.state().streams[STREAM];
    assert_eq!(stream.decl, declaration());
    assert_eq!(
        archive.files(STREAM).expect("files"),
        expected_files(copy.path())
    );
    let levels: Vec<(u64, &str, u64)> = stream
        .levels
        .iter()
        .map(|f| (f.name, f.path.as_str(), f.barrier))
        .collect();
    assert_eq!(
        levels,
        [
            (2, "streams/capture/levels/000000000002.parquet", 1),
            (4, "streams/capture/levels/000000000004.parquet", 2)
        ]
    );
    let all = archive
        .read_rows(STREAM, &[], Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(stored_rows(&all), expected);
    let prefix = archive
        .read_rows(STREAM, &labels(&["run_7"]), Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(stored_rows(&prefix), run_7);
    let one = archive
        .read_rows(STREAM, &labels(&["run_70", "p2"]), Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(stored_rows(&one), run_70_p2);
    assert_eq!(archive.verify(|_, _| {}), Vec::<String>::new());
    // Every file the manifest names, data and levels, verifies by the documented rules.
    for entry in stream.files.iter().chain(&stream.levels) {
        assert_layout(&copy.path().join(&entry.path), entry, false, false);
    }

    assert_surveys_and_folds(&archive, &all_rows());
    // Fixed values, worked by hand: the mean of run_7/p1 over the level-0 cells 10..14 is
    // (100 + 101 + 102) / 3 and (0.5 + 0.75 + 1.0) / 3; of everything, 811 / 10 and 5.75 / 10.
    let mean = |prefix: &[&str], start, end| -> Vec<(Option<f64>, u64)> {
        archive
            .fold(STREAM, &labels(prefix), start, end, Aggregate::Mean)
            .expect("fold")
            .answers
            .iter()
            .map(|a| (a.value, a.count))
            .collect()
    };
    assert_eq!(
        mean(&["run_7", "p1"], Included(11), Included(13)),
        [(Some(101.0), 3), (Some(0.75), 3)]
    );
    assert_eq!(
        mean(&[], Unbounded, Unbounded),
        [(Some(81.1), 10), (Some(0.575), 10)]
    );
    // The coarsest survey of everything: one bucket per field, 0..24.
    let survey = archive
        .survey(STREAM, &[], Unbounded, Unbounded, 8)
        .expect("survey");
    let value = survey.buckets[0];
    assert_eq!(
        (
            value.first,
            value.last,
            value.min,
            value.max,
            value.count,
            value.sum
        ),
        (
            Placed::new(10, 100.0),
            Placed::new(20, 103.0),
            Placed::new(14, -6.0),
            Placed::new(12, 201.0),
            10,
            811.0
        )
    );
    drop(archive);
    assert_eq!(
        files_under(copy.path()),
        files_under(fixture),
        "a read-only open writes nothing"
    );

    // verify() covers the level files: one damaged byte in one is reported, and only it.
    let damaged = fixture_copy();
    let level = damaged
        .path()
        .join("streams/capture/levels/000000000004.parquet");
    let mut bytes = std::fs::read(&level).expect("read");
    bytes[10] ^= 0x40;
    std::fs::write(&level, &bytes).expect("damage");
    let archive = Archive::open(damaged.path(), Config::new().read_only(true)).expect("open");
    let report = archive.verify(|_, _| {});
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(report[0].contains("000000000004.parquet"), "{report:?}");
}

#[test]
fn a_writable_open_of_the_fixture_recovers_nothing_and_extends_it() {
    let copy = fixture_copy();
    let mut archive = Archive::open(copy.path(), config()).expect("open writable");
    let recovery = archive.recovery();
    assert!(
        recovery.quarantined.is_empty(),
        "committed data and level files are not leftovers: {recovery:?}"
    );
    assert_eq!(
        (
            recovery.torn_tail_at,
            recovery.damaged_at,
            recovery.repaired_generation
        ),
        (None, None, None)
    );
    assert_eq!(archive.watermark(STREAM), Position(7));
    assert_eq!(
        archive.files(STREAM).expect("files"),
        expected_files(copy.path())
    );
    let all = archive
        .read_rows(STREAM, &[], Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(stored_rows(&all), owned(&all_rows()));
    assert_eq!(archive.verify(|_, _| {}), Vec::<String>::new());
    assert_surveys_and_folds(&archive, &all_rows());

    // One more barrier: its data file and level file take the next two names.
    let next: &[Row] = &[(8, "run_70", "p2", 16, 9, 0.5, None)];
    let (batch, positions) = batch(next);
    archive
        .stage_batch(STREAM, &batch, &positions)
        .expect("stage");
    let report = archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(report.barrier, 3);
    assert_eq!(
        report.streams[0].file,
        "streams/capture/rows/000000000005.parquet"
    );
    let mut extended = all_rows();
    extended.push((next[0], 10));
    // The warm level view takes the new partials in.
    assert_surveys_and_folds(&archive, &extended);
    drop(archive);

    let archive = Archive::open(copy.path(), config()).expect("reopen");
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
    assert_eq!(archive.state().next_name, 7);
    let level_paths: Vec<&str> = archive.state().streams[STREAM]
        .levels
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(
        level_paths,
        [
            "streams/capture/levels/000000000002.parquet",
            "streams/capture/levels/000000000004.parquet",
            "streams/capture/levels/000000000006.parquet"
        ]
    );
    let all = archive
        .read_rows(STREAM, &[], Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(stored_rows(&all), owned(&extended));
    assert_eq!(archive.watermark(STREAM), Position(8));
    assert_eq!(archive.verify(|_, _| {}), Vec::<String>::new());
    assert_surveys_and_folds(&archive, &extended);
    let files = files_under(copy.path());
    assert!(
        files.iter().all(|f| !f.starts_with(".quarantine/")),
        "{files:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The Python reader of docs/format.md
// ---------------------------------------------------------------------------------------

fn python_snippet() -> String {
    golden_files::docs_block("## A Python reader", "python")
}

fn run_python(script: &Path, args: &[&str]) -> Option<String> {
    let output = match std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
    {
        Ok(output) => output,
        Err(e) => panic!("python3 is needed to exercise the docs' reader: {e}"),
    };
    assert!(
        output.status.success(),
        "the docs snippet failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8(output.stdout).expect("UTF-8 output"))
}

#[test]
fn the_python_reader_in_the_docs_lists_the_committed_files() {
    let copy = fixture_copy();
    let root = copy.path().to_str().expect("a UTF-8 temp path");
    let script = copy.path().join("committed_files.py");
    std::fs::write(&script, python_snippet()).expect("write the snippet");

    let archive = Archive::open(copy.path(), Config::new().read_only(true)).expect("open");
    let stream = &archive.state().streams[STREAM];
    // The data files with the groups of the selected tracks, then the level files with every
    // level (a level row group covers every track).
    let expect = |prefix: &[&str]| -> String {
        let mut out = String::new();
        for file in &stream.files {
            out.push_str(&format!("{} ok\n", file.path));
            for (i, g) in file.groups.iter().enumerate() {
                if g.track
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .starts_with(prefix)
                {
                    let [lo, hi] = g.position;
                    out.push_str(&format!(
                        "  group {i} {} rows={} positions={lo}..={hi}\n",
                        g.track.join("/"),
                        g.rows
                    ));
                }
            }
        }
        for file in &stream.levels {
            out.push_str(&format!("{} ok\n", file.path));
            for (k, g) in file.groups.iter().enumerate() {
                let width = LADDER.base * LADDER.factor.pow(k as u32);
                out.push_str(&format!("  level {k} width={width} rows={}\n", g.rows));
            }
        }
        out
    };
    let Some(all) = run_python(&script, &[root, STREAM]) else {
        return;
    };
    assert_eq!(all, expect(&[]));
    assert_eq!(all.matches("/levels/").count(), 2, "{all}");
    let run_7 = run_python(&script, &[root, STREAM, "run_7"]).expect("ran before");
    assert_eq!(run_7, expect(&["run_7"]));
    assert!(!run_7.contains("run_70"), "{run_7}");
    drop(archive);

    // What a crash can leave: a renamed but unrecorded data file and level file, and a torn
    // record. The snippet still lists exactly the committed files.
    let rows_dir = copy.path().join("streams/capture/rows");
    let levels_dir = copy.path().join("streams/capture/levels");
    std::fs::copy(
        rows_dir.join("000000000003.parquet"),
        rows_dir.join("000000000005.parquet"),
    )
    .expect("plant");
    std::fs::copy(
        levels_dir.join("000000000004.parquet"),
        levels_dir.join("000000000006.parquet"),
    )
    .expect("plant");
    let generation = copy.path().join("manifest/gen-000000000001.log");
    let mut bytes = std::fs::read(&generation).expect("read");
    let torn = log::encode(golden_records().last().expect("a barrier"));
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(&generation, &bytes).expect("tear");
    assert_eq!(
        run_python(&script, &[root, STREAM]).expect("ran before"),
        all
    );
    // A writable open repairs: the planted files are quarantined and a new generation starts
    // with a snapshot, whose `files` and `levels` the snippet reads the same way.
    let archive = Archive::open(copy.path(), config()).expect("open writable");
    assert_eq!(archive.recovery().repaired_generation, Some(2));
    assert_eq!(
        archive.recovery().quarantined.len(),
        3,
        "{:?}",
        archive.recovery()
    );
    drop(archive);
    assert!(copy.path().join("manifest/gen-000000000002.log").exists());
    assert_eq!(
        run_python(&script, &[root, STREAM]).expect("ran before"),
        all
    );

    // A damaged data file and a damaged level file are reported.
    for (dir, name) in [
        (&rows_dir, "000000000001.parquet"),
        (&levels_dir, "000000000004.parquet"),
    ] {
        let data = dir.join(name);
        let mut bytes = std::fs::read(&data).expect("read");
        bytes[10] ^= 0x40;
        std::fs::write(&data, &bytes).expect("damage");
    }
    let damaged = run_python(&script, &[root, STREAM]).expect("ran before");
    assert!(
        damaged.starts_with("streams/capture/rows/000000000001.parquet DAMAGED\n"),
        "{damaged}"
    );
    assert!(
        damaged.contains("\nstreams/capture/levels/000000000002.parquet ok\n"),
        "{damaged}"
    );
    assert!(
        damaged.contains("\nstreams/capture/levels/000000000004.parquet DAMAGED\n"),
        "{damaged}"
    );
}

// ---------------------------------------------------------------------------------------
// The DuckDB query of docs/format.md
// ---------------------------------------------------------------------------------------

/// The general level query of docs/format.md (level 2 of the fixture, partials merged).
fn sql_snippet() -> String {
    golden_files::docs_block("### Reading a level with DuckDB or Polars", "sql")
}

#[test]
fn the_duckdb_query_in_the_docs_merges_level_partials_into_whole_cells() {
    // DuckDB comes with the interop environment (`scripts/test` sets SERIES_ARCHIVE_PYTHON).
    let python = std::env::var_os("SERIES_ARCHIVE_PYTHON")
        .filter(|p| !p.is_empty())
        .expect("SERIES_ARCHIVE_PYTHON is not set: run the suite with scripts/test, which creates .venv with DuckDB");
    // FILES: the fixture's level files in the order `files --level 2` prints them.
    let root = fixture();
    let root = root.to_str().expect("a UTF-8 fixture path");
    let files = format!(
        "['{root}/streams/capture/levels/000000000002.parquet', '{root}/streams/capture/levels/000000000004.parquet']"
    );
    let sql = sql_snippet().replace("FILES", &files);
    let mut child = std::process::Command::new(python)
        .args([
            "-c",
            "import duckdb, json, sys; print(json.dumps(duckdb.sql(sys.stdin.read()).fetchall()))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("SERIES_ARCHIVE_PYTHON runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), sql.as_bytes())
        .expect("write the query");
    let output = child.wait_with_output().expect("the query ends");
    assert!(
        output.status.success(),
        "the docs query failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON rows");

    // Whole level-2 cells (width 8) of every track: the raw fold of all the fixture's rows,
    // in the query's order (field names sorted alphabetically).
    let width = LADDER.base * LADDER.factor.pow(2);
    let mut expected: Vec<(Track, &str, u64, Bucket)> = raw_cells(&all_rows(), width)
        .into_iter()
        .flat_map(|(track, cells)| {
            cells
                .into_iter()
                .map(move |((f, c), b)| (track.clone(), MEASURED[f as usize], c, b))
        })
        .collect();
    expected.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
    let expected: Vec<serde_json::Value> = expected
        .into_iter()
        .map(|((run, probe), field, cell, b)| {
            json!([
                run,
                probe,
                field,
                cell,
                b.first.axis,
                b.first.value,
                b.last.axis,
                b.last.value,
                b.min.axis,
                b.min.value,
                b.max.axis,
                b.max.value,
                b.count,
                b.sum,
                b.sum_sq
            ])
        })
        .collect();
    assert_eq!(answer, serde_json::Value::Array(expected));
    // The query really merged partials: some cell was held by both level files.
    let both = raw_cells(&all_rows()[..BARRIER_1_ROWS], width)
        .into_iter()
        .any(|(track, cells)| {
            let later = raw_cells(&all_rows()[BARRIER_1_ROWS..], width);
            cells
                .keys()
                .any(|k| later.get(&track).is_some_and(|l| l.contains_key(k)))
        });
    assert!(both, "the fixture has a level-2 cell split across barriers");
}
