//! Format version 9: a packed data file's entries recorded as columns (`docs/format.md`,
//! "Version 9").
//!
//! - `tests/golden/barrier-v9.{bin,jsonl}`: a barrier naming a format-9 packed file (three
//!   slices of row group 0, one of row group 1), framed byte for byte as
//!   `manifest::log::encode` writes it, as frame version 9; its `pieces` are the docs'
//!   example, and they decode back into exactly the entries.
//! - A file of an earlier format keeps its `groups` form, in any record.
//! - Columns that lie (lengths, counts, steps out of range, both forms, columns on an older
//!   file) are refused when decoded, naming the file and the column.
//! - An archive this build writes (500 tracks, not more than a page): every data file is
//!   format 9, every barrier frame version 9, its entries read back after a reopen exactly as
//!   they were sealed, the manifest costs well under 60 bytes per entry, and the docs' Python
//!   reader lists the same slices.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v9` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::capture_config;
use common::delivered::seal_fleet;
use golden_files::{
    capture_barrier, docs_block, example_packed_file, generation_records, golden,
    python_reader_lists,
};
use series_archive::archive::manifest::frame::{self, Decoded, FORMAT_VERSION};
use series_archive::archive::manifest::{log, Record, SegmentFile, Slice};
use series_archive::archive::Archive;

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;

fn columnar_file() -> SegmentFile {
    example_packed_file(9)
}

fn barrier(file: SegmentFile) -> Record {
    capture_barrier(file, SEALED_AT_NS)
}

fn payload_of(record: &Record) -> String {
    serde_json::to_string(record).expect("json")
}

#[test]
fn a_barrier_naming_a_columnar_file_is_locked_and_framed_as_version_9() {
    const { assert!(FORMAT_VERSION >= 9) };
    let record = barrier(columnar_file());
    let framed = log::encode(&record);
    golden(9, "tests/golden/barrier-v9.bin", &framed);
    let payload = payload_of(&record);
    golden(
        9,
        "tests/golden/barrier-v9.jsonl",
        format!("{payload}\n").as_bytes(),
    );
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 9);
    assert!(payload.contains(r#""pieces":{"row_groups":"#), "{payload}");
    assert!(!payload.contains(r#""groups""#), "{payload}");
    assert!(payload.contains(r#""format":9"#), "{payload}");
    match frame::decode(&framed, 0) {
        Decoded::Record { payload, .. } => {
            assert_eq!(Record::decode(payload).expect("decodes"), record)
        }
        other => panic!("the golden frame does not decode: {other:?}"),
    }
    // The docs' example is exactly what this build writes for the file.
    let example = docs_block("## Version 9: columnar entries", "json");
    let documented: serde_json::Value =
        serde_json::from_str(&format!("{{{example}}}")).expect("the docs' example is JSON");
    let written: serde_json::Value = serde_json::from_str(&payload).expect("json");
    assert_eq!(
        documented["pieces"], written["streams"][0]["file"]["pieces"],
        "docs/format.md's example differs from what this build writes"
    );
}

#[test]
fn files_of_earlier_formats_keep_their_groups() {
    for format in [None, Some(5), Some(6)] {
        let mut file = columnar_file();
        file.format = format;
        if format != Some(6) {
            std::sync::Arc::make_mut(&mut file.groups)
                .iter_mut()
                .for_each(|g| g.slice = None);
        }
        let record = barrier(file);
        let payload = payload_of(&record);
        assert!(payload.contains(r#""groups":[{"track""#), "{payload}");
        assert!(!payload.contains("pieces"), "{payload}");
        assert!(log::encode(&record)[4] < 9, "{format:?} is framed below 9");
        assert_eq!(Record::decode(payload.as_bytes()).expect("decodes"), record);
    }
    // Entries that break the slice rules are written as groups even in a format-9 file (no
    // writer makes one; replay refuses it, as for version 6).
    let mut odd = columnar_file();
    std::sync::Arc::make_mut(&mut odd.groups)[1].slice = Some(Slice { group: 0, row: 7 });
    let payload = payload_of(&barrier(odd.clone()));
    assert!(payload.contains(r#""groups":["#), "{payload}");
    assert_eq!(
        Record::decode(payload.as_bytes()).expect("decodes"),
        barrier(odd)
    );
}

/// `payload` with its first `from` replaced by `to`.
fn tampered(payload: &str, from: &str, to: &str) -> String {
    assert!(payload.contains(from), "{from} is not in {payload}");
    payload.replacen(from, to, 1)
}

#[test]
fn columns_that_lie_are_refused_naming_the_file_and_the_column() {
    let payload = payload_of(&barrier(columnar_file()));
    let cases = [
        (
            tampered(&payload, r#""rows":[3,2,4,6]"#, r#""rows":[3,2,4]"#),
            "pieces.rows has 3 values, pieces.track 4",
        ),
        (
            tampered(&payload, r#"{"slices":3,"#, r#"{"slices":2,"#),
            "pieces.row_groups hold 3 slices, pieces.track has 4 entries",
        ),
        (
            tampered(&payload, r#"{"slices":1,"#, r#"{"slices":0,"#),
            "pieces.row_groups hold 3 slices",
        ),
        (
            tampered(&payload, r#""seq":[[0,2],"#, r#""seq":[[-1,2],"#),
            "pieces.seq[0] = [-1, 2] leaves the range",
        ),
        (
            tampered(&payload, r#""position":[[1,2],"#, r#""position":[[1,-2],"#),
            "pieces.position[0] = [1, -2] leaves the range",
        ),
        (
            tampered(&payload, r#""format":9"#, r#""format":6"#),
            "pieces in a file of format Some(6)",
        ),
        (
            tampered(&payload, r#","pieces":"#, r#","groups":[],"pieces":"#),
            "both groups and pieces",
        ),
    ];
    for (bad, why) in cases {
        let error = Record::decode(bad.as_bytes()).expect_err(why).to_string();
        assert!(
            error.contains(why) && error.contains("streams/capture/rows/000000000001.parquet"),
            "{why}: {error}"
        );
    }
}

#[test]
fn an_archive_this_build_writes_records_columns_and_reads_them_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 runs × 25 probes, 32 rows each (16 a slice), over two barriers: 500 entries a file, not
    // more than a page (`tests/format_golden_v10.rs` has the paged kind).
    let sealed = seal_fleet(dir.path(), 20, 25, 32);
    assert!(sealed
        .iter()
        .all(|f| f.format == Some(9) && f.groups.len() == 500));
    // Every record of the generation is framed as version 9 or lower, the barriers as 9.
    let (bytes, records) = generation_records(dir.path());
    let barriers: Vec<u16> = records
        .into_iter()
        .filter(|(kind, _)| kind == "barrier")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(barriers, [9, 9]);
    // About 25 bytes per entry: labels, rows and three pairs of small numbers.
    let per_entry = bytes.len() as f64 / 1_000.0;
    assert!(per_entry < 60.0, "{per_entry:.1} manifest bytes per entry");
    let reopened =
        Archive::open(dir.path(), capture_config().delta(false).read_only(true)).expect("reopen");
    assert_eq!(reopened.state().streams["capture"].files, sealed);
    assert!(reopened.verify(|_, _| {}).is_empty());
    // The docs' Python reader rebuilds the same slices from the columns.
    python_reader_lists(dir.path(), &sealed, ["run_7", "p3"]);
}
