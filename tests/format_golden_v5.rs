//! Format version 5: integers stored signed (`docs/format.md`, "Version 5").
//!
//! - `tests/golden/barrier-v5.{bin,jsonl}`: a barrier naming version-5 files (`"format":5`),
//!   framed byte for byte as `manifest::log::encode` writes it, as frame version 5; the
//!   same barrier naming version 1-4 files is still framed as version 1.
//! - `tests/fixtures/archive-v5/`: an archive written by this version, holding the largest
//!   values it stores (a `UInt64` column at 2^63 - 1, the axis and positions at 2^63 - 2),
//!   which every later build must open and serve exactly; its files store every integer
//!   signed, its manifest frames say version 5.
//! - The range: a larger value is refused where it enters (staging, `ingest`), and the
//!   archive is left as it was.
//! - Migration: the version-1 fixture is served as it is, and a compaction rewrites its files
//!   into version 5 with the same rows.
//!
//! Regenerating the golden files: `UPDATE_GOLDEN=1 cargo test --test format_golden_v5` (only
//! for a deliberate format change, which also bumps the frame version and `docs/format.md`).
//! The fixture archive is frozen since version 6 (see `fixture`).

#[path = "common/golden.rs"]
mod golden_files;
#[path = "common/process.rs"]
mod process;
#[path = "common/tree.rs"]
mod tree;

use arrow::array::{Array, ArrayRef, Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use golden_files::{crate_path, golden};
use parquet::basic::LogicalType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Barrier, BarrierStream, GroupEntry, Record, SegmentFile, Span,
};
use series_archive::archive::{
    Archive, ArchiveError, Config, FixedClock, Ladder, StreamSpec, MAX_STORED,
};
use series_archive::Position;
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::{Arc, OnceLock};

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;
const STREAM: &str = "wide";

fn span(offset: u64, len: u64, crc32c: u32) -> Span {
    Span {
        offset,
        len,
        crc32c,
    }
}

fn file(name: u64, path: &str, format: Option<u16>) -> SegmentFile {
    SegmentFile {
        name,
        path: path.to_owned(),
        bytes: 2048,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer: span(900, 1148, 0x0102_0304),
        groups: vec![GroupEntry {
            track: ["p1"].map(String::from).into(),
            rows: 3,
            position: [1, 3],
            axis: Some([10, MAX_STORED - 1]),
            seq: [0, 2],
            span: span(4, 896, 0x0A0B_0C0D),
            last_track: None,
            slice: None,
        }]
        .into(),
        cold: None,
        run: None,
        format,
        first_level: None,
        elided: None,
    }
}

fn barrier(format: Option<u16>) -> Record {
    Record::Barrier(Barrier {
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        next_name: 3,
        streams: vec![BarrierStream {
            stream: STREAM.into(),
            watermark: 3,
            next_seq: 3,
            file: file(1, "streams/wide/rows/000000000001.parquet", format),
            levels: Some(file(2, "streams/wide/levels/000000000002.parquet", format)),
            levels_from: None,
            levels_deferred: false,
        }],
    })
}

/// The frame version in a framed record's header.
fn frame_version(framed: &[u8]) -> u16 {
    u16::from_le_bytes([framed[4], framed[5]])
}

#[test]
fn a_barrier_naming_signed_files_is_locked_and_framed_as_version_5() {
    let record = barrier(Some(5));
    let framed = log::encode(&record);
    golden(5, "tests/golden/barrier-v5.bin", &framed);
    let payload = serde_json::to_string(&record).expect("json");
    golden(
        5,
        "tests/golden/barrier-v5.jsonl",
        format!("{payload}\n").as_bytes(),
    );
    assert_eq!(frame_version(&framed), 5);
    assert!(payload.contains(r#""format":5"#), "{payload}");
    match frame::decode(&framed, 0) {
        Decoded::Record { payload, .. } => {
            assert_eq!(Record::decode(payload).expect("decodes"), record)
        }
        other => panic!("the golden frame does not decode: {other:?}"),
    }
    // The same barrier naming files of versions 1-4 is what version 1 wrote: no `format`
    // key, frame version 1.
    let old = log::encode(&barrier(None));
    assert_eq!(frame_version(&old), 1);
    assert!(!String::from_utf8_lossy(&old).contains("format"));
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("probe", DataType::Utf8, false),
        Field::new("ts", DataType::UInt64, false),
        Field::new("counter", DataType::UInt64, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

fn config() -> Config {
    let spec = StreamSpec::dynamic(STREAM, schema(), vec!["probe".into()], Some("ts".into()))
        .expect("a valid stream")
        .with_ladder(Some(Ladder::new(1 << 40, 8, 3).expect("a ladder")));
    Config::new()
        .stream(spec)
        .clock(Arc::new(FixedClock(SEALED_AT_NS)))
        .delta(false)
}

/// The fixture's rows: probe, ts, counter, value (positions 1, 2, ...).
const ROWS: [(&str, u64, u64, f64); 6] = [
    ("p1", 10, 0, 1.5),
    ("p2", 11, 7, -2.0),
    ("p1", 1 << 62, MAX_STORED, 3.25),
    ("p2", 1 << 62, 1 << 63 >> 1, 0.0),
    ("p1", MAX_STORED - 1, MAX_STORED - 1, 4.0),
    ("p2", MAX_STORED - 1, 1, 5.0),
];

fn batch(rows: &[(&str, u64, u64, f64)]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.3))),
    ];
    RecordBatch::try_new(schema(), columns).expect("a batch")
}

fn write_fixture(root: &Path) {
    let mut archive = Archive::open(root, config()).expect("open a new archive");
    for (half, positions) in [
        (&ROWS[..3], vec![1u64, 2, 3]),
        (&ROWS[3..], vec![4, 5, MAX_STORED - 1]),
    ] {
        archive
            .stage_batch(STREAM, &batch(half), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
}

/// The committed version-5 fixture. It is frozen: a build of version 6 or later writes
/// packed barrier files, so it cannot write this fixture again (`UPDATE_GOLDEN=1` leaves it
/// alone); `SERIES_ARCHIVE_REWRITE_V5_FIXTURE=1` rewrites it with what this build writes,
/// which only a version-5 build may do.
fn fixture() -> &'static Path {
    static FIXTURE: OnceLock<std::path::PathBuf> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = crate_path("tests/fixtures/archive-v5");
        if std::env::var_os("SERIES_ARCHIVE_REWRITE_V5_FIXTURE").is_some_and(|v| v == "1") {
            let scratch = tempfile::tempdir().expect("tempdir");
            write_fixture(scratch.path());
            if path.exists() {
                std::fs::remove_dir_all(&path).expect("remove the old fixture");
            }
            tree::copy_tree(&scratch.path().join("manifest"), &path.join("manifest"));
            tree::copy_tree(&scratch.path().join("streams"), &path.join("streams"));
        }
        path
    })
}

/// (probe, ts, counter, value, position) of every row a read answers, in publish order.
fn served(archive: &Archive, track: &[&str]) -> Vec<(String, u64, u64, f64, u64)> {
    let labels: Vec<String> = track.iter().map(|s| s.to_string()).collect();
    let b = archive
        .read_rows(STREAM, &labels, Unbounded, Unbounded)
        .expect("read");
    let s = b.column_by_name("probe").expect("probe");
    let s = s.as_any().downcast_ref::<StringArray>().expect("Utf8");
    let u = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>().cloned())
            .unwrap_or_else(|| panic!("{name} comes back as the declared UInt64"))
    };
    let (ts, counter, position) = (u("ts"), u("counter"), u("_position"));
    let value = b.column_by_name("value").expect("value");
    let value = value.as_any().downcast_ref::<Float64Array>().expect("f64");
    (0..b.num_rows())
        .map(|i| {
            (
                s.value(i).to_owned(),
                ts.value(i),
                counter.value(i),
                value.value(i),
                position.value(i),
            )
        })
        .collect()
}

#[test]
fn the_version_5_fixture_serves_the_largest_values_exactly_from_signed_files() {
    let root = fixture();
    let archive = Archive::open(root, config().read_only(true)).expect("open the fixture");
    let positions = [1u64, 2, 3, 4, 5, MAX_STORED - 1];
    let expected: Vec<_> = ROWS
        .iter()
        .zip(positions)
        .map(|(r, p)| (r.0.to_owned(), r.1, r.2, r.3, p))
        .collect();
    assert_eq!(served(&archive, &[]), expected);
    assert_eq!(
        archive.state().streams[STREAM].watermark,
        Position(MAX_STORED - 1)
    );
    let stream = &archive.state().streams[STREAM];
    for f in stream.files.iter().chain(&stream.levels) {
        assert_eq!(f.format, Some(5), "{}", f.path);
        let reader =
            SerializedFileReader::new(std::fs::File::open(root.join(&f.path)).expect("open"))
                .expect("parquet");
        let meta = reader.metadata().file_metadata();
        let kv: Vec<_> = meta
            .key_value_metadata()
            .into_iter()
            .flatten()
            .filter(|kv| kv.key == "series_archive.format")
            .map(|kv| kv.value.clone())
            .collect();
        assert_eq!(kv, vec![Some("5".to_owned())], "{}", f.path);
        for column in meta.schema_descr().columns() {
            assert!(
                !matches!(
                    column.logical_type_ref(),
                    Some(LogicalType::Integer(int)) if !int.is_signed
                ),
                "{} column {} is stored unsigned: {:?}",
                f.path,
                column.name(),
                column.logical_type_ref()
            );
        }
    }
    // Its manifest: the snapshot and the declaration as version 1 wrote them, the two
    // barriers naming signed files as version 5.
    let bytes = std::fs::read(root.join("manifest/gen-000000000001.log")).expect("manifest");
    let mut versions = Vec::new();
    let mut at = 0;
    while let Decoded::Record { next, .. } = frame::decode(&bytes, at) {
        versions.push(frame_version(&bytes[at..]));
        at = next;
    }
    assert_eq!(versions, [1, 1, 5, 5]);
    assert!(archive.verify(|_, _| {}).is_empty());
}

#[test]
fn a_value_the_signed_types_cannot_hold_is_refused_where_it_enters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), config()).expect("open");
    let refused =
        |archive: &mut Archive, rows: &[(&str, u64, u64, f64)], positions: &[u64]| match archive
            .stage_batch(STREAM, &batch(rows), positions)
        {
            Err(ArchiveError::Input { message, .. }) => message,
            other => panic!("not refused as bad input: {other:?}"),
        };
    let above = refused(
        &mut archive,
        &[("p1", 1, 0, 0.0), ("p1", 2, MAX_STORED + 1, 0.0)],
        &[1, 2],
    );
    assert!(above.contains("9223372036854775808"), "{above}");
    let axis = refused(&mut archive, &[("p1", MAX_STORED, 0, 0.0)], &[1]);
    assert!(axis.contains("axis"), "{axis}");
    let position = refused(&mut archive, &[("p1", 1, 0, 0.0)], &[MAX_STORED]);
    assert!(position.contains("position"), "{position}");
    // Nothing was staged: the first barrier holds only what came after.
    archive
        .stage_batch(STREAM, &batch(&ROWS[..1]), &[1])
        .expect("a storable row");
    archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(served(&archive, &[]).len(), 1);
    drop(archive);
    let error = match Archive::open(dir.path(), config()) {
        Ok(mut a) => a
            .stage_batch(STREAM, &batch(&[("p1", 20, u64::MAX, 0.0)]), &[2])
            .expect_err("refused"),
        Err(e) => panic!("reopen: {e}"),
    };
    let ArchiveError::Input { row, column, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!((*row, column.as_deref()), (0, Some("counter")), "{error}");
}

#[test]
fn ingest_names_the_file_line_and_column_of_a_value_above_the_range_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("big.csv");
    std::fs::write(
        &csv,
        "probe,ts,counter\np1,1,5\np1,2,9223372036854775807\np1,3,9223372036854775808\n",
    )
    .expect("write the csv");
    let root = dir.path().join("archive");
    let csv_s = csv.to_str().expect("utf-8");
    let ingest = || {
        process::run(
            "ingest",
            &root,
            &[
                csv_s,
                "--stream",
                "s",
                "--track",
                "probe",
                "--axis",
                "ts",
                "--types",
                "counter:uint",
            ],
        )
    };
    let out = ingest();
    assert_ne!(out.code, 0, "{}", out.stderr);
    for part in ["big.csv", "line 4", "\"counter\"", "9223372036854775808"] {
        assert!(out.stderr.contains(part), "no {part:?} in: {}", out.stderr);
    }
    let manifest = root.join("manifest");
    let generations = std::fs::read_dir(&manifest).map_or(0, |d| d.count());
    assert_eq!(generations, 0, "nothing was committed: {}", out.stderr);
    // The largest storable value goes in and comes back exactly.
    std::fs::write(&csv, "probe,ts,counter\np1,1,5\np1,2,9223372036854775807\n").expect("csv");
    ingest().expect(0, "ingest of the largest storable value");
    let rows = process::run("rows", &root, &["--stream", "s", "--format", "csv"]).expect(0, "rows");
    assert!(
        rows.stdout.contains("9223372036854775807"),
        "{}",
        rows.stdout
    );
}

#[test]
fn a_version_1_archive_is_served_as_it_is_and_compaction_rewrites_it_into_version_5() {
    let copy = tempfile::tempdir().expect("tempdir");
    tree::copy_tree(&crate_path("tests/fixtures/archive-v1"), copy.path());
    let labels: Vec<String> = Vec::new();
    let read_all = |archive: &Archive| {
        archive
            .read_rows("capture", &labels, Unbounded, Unbounded)
            .expect("every row")
    };
    let before = {
        let archive = Archive::open(copy.path(), Config::new().read_only(true)).expect("open");
        let stream = &archive.state().streams["capture"];
        assert!(
            stream
                .files
                .iter()
                .chain(&stream.levels)
                .all(|f| f.format.is_none()),
            "the version-1 fixture names no version-5 file"
        );
        read_all(&archive)
    };
    assert_eq!(
        before
            .schema()
            .field_with_name("_seq")
            .expect("_seq")
            .data_type(),
        &DataType::UInt64
    );
    let mut archive = Archive::open(copy.path(), Config::new()).expect("writable open");
    let compacted = archive.compact(true, |_, _, _| {}).expect("compact");
    assert!(
        !compacted.is_empty(),
        "a version-1 archive is due for a rewrite"
    );
    let stream = &archive.state().streams["capture"];
    assert!(
        stream
            .files
            .iter()
            .chain(&stream.levels)
            .all(|f| f.is_signed()),
        "every live file is version 5 after a forced compaction: {:?}",
        stream
            .files
            .iter()
            .chain(&stream.levels)
            .map(|f| (&f.path, f.format))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        read_all(&archive),
        before,
        "the same rows, from signed files"
    );
    drop(archive);
    let reopened = Archive::open(copy.path(), Config::new().read_only(true)).expect("reopen");
    assert_eq!(read_all(&reopened), before);
    assert!(reopened.verify(|_, _| {}).is_empty());
}
