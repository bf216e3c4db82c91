//! Golden files lock level tables, format version 4 (`docs/format.md`, "Level tables").
//!
//! - `tests/golden/compact-v4.{bin,jsonl}`: a `compact` record adding a run of level tables,
//!   framed byte for byte as `manifest::log::encode` writes it (frame version 4).
//! - A barrier's partial file serializes exactly as before (no `table`, no `last_track`), so
//!   an archive that never compacts stays a version-1 archive.
//! - Applying the record: the run takes the place of the first file it replaces, tables are
//!   checked against the ladder, and a version-2 `compact` (one file, every level) still
//!   applies.
//! - The Parquet layout of a table written by a real compaction: its path, row order (track,
//!   cell, field), packed row groups, and its schema (the level schema, golden since
//!   version 1).
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v4` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

#[path = "common/golden.rs"]
mod golden_files;

use golden_files::golden;
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Compact, GroupEntry, LevelRun, Record, SegmentFile, Snapshot, Span, State,
};

const DECL: &str = r#"{"id":"capture","columns":[{"name":"probe","data_type":"Utf8","nullable":false},{"name":"ordinal","data_type":"UInt64","nullable":false},{"name":"value","data_type":"Int64","nullable":false}],"track":["probe"],"axis":"ordinal","measured":["value"],"ladder":{"base":2,"factor":2,"levels":2}}"#;

fn span(offset: u64, len: u64, crc32c: u32) -> Span {
    Span {
        offset,
        len,
        crc32c,
    }
}

fn group(track: &str, last: Option<&str>, axis: [u64; 2]) -> GroupEntry {
    GroupEntry {
        track: [track].map(String::from).into(),
        rows: 6,
        position: [1, 40],
        axis: Some(axis),
        seq: [0, 39],
        span: span(4, 900, 0x0A0B_0C0D),
        last_track: last.map(|l| vec![l.into()]),
        slice: None,
    }
}

fn file(name: u64, path: &str, groups: Vec<GroupEntry>, run: Option<LevelRun>) -> SegmentFile {
    SegmentFile {
        name,
        path: path.into(),
        bytes: 2000,
        barrier: 4,
        sealed_at_ns: 1_764_442_800_000_000_000,
        footer: span(904, 1096, 0x1234_5678),
        groups: groups.into(),
        cold: None,
        run,
        format: None,
        first_level: None,
        elided: None,
    }
}

fn partial(name: u64) -> SegmentFile {
    let level = |k: u64| GroupEntry {
        track: Default::default(),
        ..group("", None, [0, 10 + k])
    };
    file(
        name,
        &format!("streams/capture/levels/{name:012}.parquet"),
        vec![level(0), level(1)],
        None,
    )
}

fn compact() -> Record {
    let table = |name: u64, level: u8| {
        file(
            name,
            &format!("streams/capture/levels/level={level}/{name:012}.parquet"),
            vec![group("p0", Some("p1"), [0, 47])],
            Some(LevelRun {
                id: 20,
                tier: 1,
                level: Some(level),
            }),
        )
    };
    Record::Compact(Compact {
        stream: "capture".into(),
        next_name: 22,
        added: Vec::new(),
        removed: Vec::new(),
        added_levels: vec![table(20, 0), table(21, 1)],
        removed_levels: vec![2, 4, 6, 8],
        levels_summary: None,
    })
}

#[test]
fn the_compact_record_with_level_tables_is_locked() {
    let record = compact();
    assert_eq!(record.version(), 4);
    let framed = log::encode(&record);
    golden(4, "tests/golden/compact-v4.bin", &framed);
    let json = serde_json::to_string(&record).expect("serializes");
    golden(
        4,
        "tests/golden/compact-v4.jsonl",
        format!("{json}\n").as_bytes(),
    );
    let Decoded::Record { payload, next } = frame::decode(&framed, 0) else {
        panic!("the golden frame decodes");
    };
    assert_eq!(next, framed.len());
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 4);
    let back: Record = serde_json::from_slice(payload).expect("decodes");
    assert_eq!(back, record);
    // A partial serializes as version 1 wrote it.
    let text = serde_json::to_string(&partial(2)).expect("serializes");
    assert!(
        !text.contains("\"run\"") && !text.contains("last_track"),
        "{text}"
    );
}

fn state_with(levels: &[SegmentFile]) -> State {
    let levels = serde_json::to_string(levels).expect("serializes");
    let snapshot: Snapshot = serde_json::from_str(&format!(
        r#"{{"generation":1,"next_name":20,"barriers":10,"streams":[{{"decl":{DECL},"watermark":40,"next_seq":40,"files":[],"levels":{levels}}}]}}"#
    ))
    .expect("parses");
    let mut state = State::default();
    state.apply(&Record::Snapshot(snapshot)).expect("applies");
    state
}

#[test]
fn a_run_of_tables_takes_the_place_of_the_files_it_replaces() {
    let mut state = state_with(&[2, 4, 6, 8, 10].map(partial));
    state.apply(&compact()).expect("applies");
    let names: Vec<u64> = state.streams["capture"]
        .levels
        .iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, [20, 21, 10], "the run stands where partial 2 stood");
    // A snapshot naming tables is version 4 and reads back the same.
    let snapshot = Record::Snapshot(state.snapshot(2));
    assert_eq!(snapshot.version(), 4);
    let mut again = State::default();
    again.apply(&snapshot).expect("applies");
    assert_eq!(
        again.streams["capture"].levels,
        state.streams["capture"].levels
    );

    // A table of a level the ladder does not have is refused.
    let mut state = state_with(&[2, 4, 6, 8].map(partial));
    let Record::Compact(mut bad) = compact() else {
        unreachable!()
    };
    bad.added_levels[1].run = Some(LevelRun {
        id: 20,
        tier: 1,
        level: Some(2),
    });
    let err = state
        .apply(&Record::Compact(bad))
        .expect_err("level 2 of 2");
    assert!(err.contains("holds level 2"), "{err}");

    // A small run stays one file of every level (group k = level k): `run` without `level`.
    let mut state = state_with(&[2, 4, 6, 8].map(partial));
    let mut one = partial(20);
    one.run = Some(LevelRun {
        id: 20,
        tier: 1,
        level: None,
    });
    let text = serde_json::to_string(&one.run).expect("serializes");
    assert_eq!(text, r#"{"id":20,"tier":1}"#);
    let merge = |added: SegmentFile| {
        Record::Compact(Compact {
            stream: "capture".into(),
            next_name: 21,
            added: Vec::new(),
            removed: Vec::new(),
            added_levels: vec![added],
            removed_levels: vec![2, 4, 6, 8],
            levels_summary: None,
        })
    };
    assert_eq!(merge(one.clone()).version(), 4);
    let mut short = one.clone();
    std::sync::Arc::make_mut(&mut short.groups).pop();
    let err = state
        .apply(&merge(short))
        .expect_err("a run file lacking a level");
    assert!(err.contains("holds 1 levels"), "{err}");
    // (A refused record leaves the state unusable: the open that met it fails whole.)
    let mut state = state_with(&[2, 4, 6, 8].map(partial));
    state.apply(&merge(one)).expect("a one-file run applies");
    assert_eq!(state.streams["capture"].levels.len(), 1);

    // A version-2 compaction (one file, every level, cells whole) still applies.
    let mut state = state_with(&[2, 4].map(partial));
    let v2 = Record::Compact(Compact {
        stream: "capture".into(),
        next_name: 21,
        added: Vec::new(),
        removed: Vec::new(),
        added_levels: vec![partial(20)],
        removed_levels: vec![2, 4],
        levels_summary: None,
    });
    assert_eq!(v2.version(), 2);
    state.apply(&v2).expect("a version-2 compact applies");
    assert_eq!(state.streams["capture"].levels.len(), 1);
}

#[path = "common/process.rs"]
mod process;

/// A real compaction's level table: at `levels/level=K/NAME.parquet`, the level schema of
/// version 1 (golden), rows ordered by track, then cell, then field in declared order, row
/// groups packing whole tracks whose first and last tracks the manifest records.
#[test]
fn a_level_table_is_laid_out_as_documented() {
    use arrow::array::{Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = process::scratch("golden-v4-table");
    let root = dir.path().join("archive");
    let a = root.to_str().expect("UTF-8 path");
    let mut csv = String::from("run,probe,ordinal,value,noise\n");
    for i in 0..400u64 {
        let (run, probe) = (
            ["run_0", "run_1"][(i % 2) as usize],
            ["p1", "p2"][(i / 2 % 2) as usize],
        );
        csv.push_str(&format!("{run},{probe},{},{},{}.5\n", i / 4, i % 7, i % 3));
    }
    let input = dir.path().join("rows.csv");
    std::fs::write(&input, csv).expect("write CSV");
    process::cli(&[
        "ingest",
        a,
        "--stream",
        "capture",
        "--track",
        "run,probe",
        "--axis",
        "ordinal",
        "--ladder",
        "2,2,3",
        "--seal-rows",
        "50",
        input.to_str().expect("UTF-8 path"),
    ]);
    process::cli(&["compact", a]);
    let archive = series_archive::archive::Archive::open(
        &root,
        series_archive::archive::Config::new().read_only(true),
    )
    .expect("open");
    let stream = &archive.state().streams["capture"];
    assert_eq!(stream.levels.len(), 3, "one table per level after compact");
    // The Python reader of docs/format.md lists the tables, verified, in merge order.
    let script = dir.path().join("committed_files.py");
    std::fs::write(
        &script,
        golden_files::docs_block("## A Python reader", "python"),
    )
    .expect("write the reader");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args([a, "capture"])
        .output()
        .expect("python3 runs");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (k, table) in stream.levels.iter().enumerate() {
        assert!(listed.contains(&format!("{} ok\n", table.path)), "{listed}");
        let width = 2 << k;
        assert!(
            listed.contains(&format!(
                "  level {k} width={width} group 0 run_0/p1..run_1/p2 rows="
            )),
            "{listed}"
        );
    }
    for (k, table) in stream.levels.iter().enumerate() {
        let run = table.run.expect("a compaction's run");
        assert_eq!(
            run.level,
            Some(k as u8),
            "a forced compaction writes tables"
        );
        assert_eq!(
            table.path,
            format!(
                "streams/capture/levels/level={k}/{:012}.parquet",
                table.name
            )
        );
        let group = &table.groups[0];
        assert_eq!(group.track[..], ["run_0", "p1"]);
        assert_eq!(
            group.last_track.as_deref(),
            Some(&["run_1".to_owned(), "p2".to_owned()][..])
        );
        let file = std::fs::File::open(root.join(&table.path)).expect("open table");
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a Parquet file");
        let mut printed = Vec::new();
        parquet::schema::printer::print_schema(
            &mut printed,
            builder.metadata().file_metadata().schema(),
        );
        // The level schema a barrier's partials have (format_golden.rs locks it; signed since
        // version 5).
        golden(5, "tests/golden/levels-schema-v5.txt", &printed);
        let mut last: Option<(String, String, u64, usize)> = None;
        for batch in builder.build().expect("reader") {
            let batch = batch.expect("batch");
            let text = |n: &str| {
                batch
                    .column_by_name(n)
                    .expect(n)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect(n)
                    .clone()
            };
            let (run, probe, field) = (text("run"), text("probe"), text("field"));
            let cell = batch
                .column_by_name("cell")
                .expect("cell")
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("stored as Int64 (format version 5)")
                .clone();
            for i in 0..batch.num_rows() {
                let f = ["value", "noise"]
                    .iter()
                    .position(|n| *n == field.value(i))
                    .expect("a measured field");
                let key = (
                    run.value(i).to_owned(),
                    probe.value(i).to_owned(),
                    u64::try_from(cell.value(i)).expect("a cell is never negative"),
                    f,
                );
                if let Some(prev) = &last {
                    assert!(
                        prev < &key,
                        "level {k}: rows out of order: {prev:?} then {key:?}"
                    );
                }
                last = Some(key);
            }
        }
    }
}

/// The fast decode (the tag first, the rest straight into the kind's struct) answers exactly
/// what the general decode answers, for every golden record, and refuses what it refuses.
#[test]
fn the_fast_record_decode_agrees_with_the_general_one() {
    let mut seen = 0;
    for golden in [
        "manifest-v1.jsonl",
        "lifecycle-v2.jsonl",
        "offload-v3.jsonl",
        "compact-v4.jsonl",
        "snapshot-v1.json",
        "snapshot-v2.json",
        "snapshot-v3.json",
    ] {
        let text =
            std::fs::read_to_string(golden_files::crate_path(&format!("tests/golden/{golden}")))
                .expect("golden");
        let records: Vec<serde_json::Value> = if golden.ends_with(".jsonl") {
            text.lines()
                .map(|l| serde_json::from_str(l).expect("JSON"))
                .collect()
        } else {
            vec![serde_json::from_str(&text).expect("JSON")]
        };
        for value in records {
            // As a writer frames it: compact, the tag first.
            let payload =
                serde_json::to_vec(&serde_json::from_value::<Record>(value).expect("a record"))
                    .expect("serializes");
            let general: Record = serde_json::from_slice(&payload).expect("general");
            assert_eq!(Record::decode(&payload).expect("fast"), general, "{golden}");
            seen += 1;
        }
    }
    assert!(seen >= 8, "{seen} records");
    for bad in [
        &br#"{"record":"barrier","barrier":1}"#[..],
        br#"{"record":"snapshot","generation":1,"next_name":1,"barriers":0,"streams":[],"extra":1}"#,
        br#"{"record":"snapshot","record":"barrier"}"#,
        br#"{"record":"compact""#,
    ] {
        assert!(Record::decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        assert!(serde_json::from_slice::<Record>(bad).is_err());
    }
}
