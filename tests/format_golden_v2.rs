//! Golden files lock the lifecycle records, format version 2 (`docs/format.md`, "Version 2:
//! the lifecycle records").
//!
//! - `tests/golden/lifecycle-v2.{bin,jsonl}`: a `retire` and a `compact` record, framed byte for
//!   byte as `manifest::log::encode` writes them (frame version 2);
//!   `snapshot-v2.{bin,json}`: a snapshot carrying track floors (version 2).
//! - `tests/fixtures/archive-v2/`: a whole archive that retired, retired a track whole and
//!   compacted (fixed clock), which every later build must open and answer exactly as here.
//! - Records version 1 knew are still written as version 1: an archive that never retires
//!   or compacts stays readable by a version-1 build.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v2` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::tree::copy_tree;
use common::{batch, capture_schema, rows_of, workload, Row};
use golden_files::{crate_path, golden, updating};
use serde_json::json;
use series_archive::archive::lifecycle::{Lifetime, Retention};
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{log, Record, Snapshot};
use series_archive::archive::{Archive, Config, FixedClock, Ladder, ReadError, StreamSpec};
use series_archive::{Aggregate, BeneathWindow, Position};
use std::ops::Bound::{Included, Unbounded};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// 2025-11-29T19:00:00Z.
const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;
const LADDER: Ladder = Ladder {
    base: 4,
    factor: 2,
    levels: 3,
};

fn config(retention: Option<Retention>) -> Config {
    let spec = StreamSpec::dynamic(
        "capture",
        capture_schema(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("valid")
    .with_ladder(Some(LADDER));
    let config = Config::new()
        .stream(spec)
        .clock(Arc::new(FixedClock(SEALED_AT_NS)));
    match retention {
        Some(r) => config.retention("capture", r),
        None => config,
    }
}

/// The rows every barrier publishes: 2 runs × 2 probes, ten ticks a barrier.
fn published(barriers: u64) -> Vec<(u64, Row)> {
    (0..barriers)
        .flat_map(|b| {
            let (rows, positions) = workload(2, 2, 10, b * 10);
            positions.into_iter().zip(rows)
        })
        .collect()
}

fn seal(archive: &mut Archive, b: u64) {
    let (rows, positions) = workload(2, 2, 10, b * 10);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal");
}

/// Four barriers; a sweep (raw rows more than 150 axis units behind, level 0 more than 200);
/// `run_1/probe.1` retired whole; a compaction; a fifth barrier.
fn write_archive(root: &Path) {
    let retention = Retention::forever()
        .raw(Lifetime::Behind(150))
        .level(0, Lifetime::Behind(200));
    let mut archive = Archive::open(root, config(Some(retention))).expect("open");
    for b in 0..4 {
        seal(&mut archive, b);
    }
    archive.sweep(SEALED_AT_NS).expect("sweep");
    archive
        .retire_track("capture", &["run_1".into(), "probe.1".into()])
        .expect("retire")
        .expect("retired");
    archive.compact(true, |_, _, _| {}).expect("compact");
    seal(&mut archive, 4);
}

fn fixture() -> &'static Path {
    static FIXTURE: OnceLock<PathBuf> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = crate_path("tests/fixtures/archive-v2");
        if updating() {
            let scratch = tempfile::tempdir().expect("tempdir");
            write_archive(scratch.path());
            if path.exists() {
                std::fs::remove_dir_all(&path).expect("remove the old fixture");
            }
            copy_tree(&scratch.path().join("manifest"), &path.join("manifest"));
            copy_tree(&scratch.path().join("streams"), &path.join("streams"));
        }
        path
    })
}

/// The frames of a generation file: (version, record).
fn frames(path: &Path) -> Vec<(u16, Record)> {
    let bytes = std::fs::read(path).expect("read manifest");
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        match frame::decode(&bytes, offset) {
            Decoded::End => return out,
            Decoded::Record { payload, next } => {
                let version = u16::from_le_bytes([bytes[offset + 4], bytes[offset + 5]]);
                out.push((version, serde_json::from_slice(payload).expect("a record")));
                offset = next;
            }
            other => panic!("{}: {other:?} at {offset}", path.display()),
        }
    }
}

fn generation(root: &Path) -> PathBuf {
    let mut gens: Vec<PathBuf> = std::fs::read_dir(root.join("manifest"))
        .expect("manifest")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(gens.len(), 1, "{gens:?}");
    gens.remove(0)
}

fn records() -> Vec<Record> {
    let span = |offset: u64, len: u64, crc32c: u32| json!({"offset": offset, "len": len, "crc32c": crc32c});
    let retire = json!({
        "record": "retire",
        "stream": "capture",
        "retired_at_ns": SEALED_AT_NS,
        "reason": "sweep",
        "tracks": [
            {"track": ["run_0", "probe.0"], "raw": {"position": 21, "axis": 201, "seq": 80},
             "levels": [{"axis": 196, "position": 1}]},
            {"track": ["run_0", "probe.1"], "whole": true,
             "raw": {"position": 41, "axis": 402, "seq": 160},
             "levels": [{"axis": 404, "position": 41}, {"axis": 408, "position": 41}, {"axis": 416, "position": 41}]}
        ],
        "dropped": [1, 3]
    });
    let compact = json!({
        "record": "compact",
        "stream": "capture",
        "next_name": 12,
        "added": [{
            "name": 10,
            "path": "streams/capture/rows/000000000010.parquet",
            "bytes": 2048,
            "barrier": 4,
            "sealed_at_ns": SEALED_AT_NS,
            "footer": span(1500, 548, 7),
            "groups": [{"track": ["run_0", "probe.0"], "rows": 20, "position": [21, 40],
                        "axis": [201, 402], "seq": [80, 159], "span": span(4, 1496, 9)}]
        }],
        "removed": [5, 7],
        "added_levels": [{
            "name": 11,
            "path": "streams/capture/levels/000000000011.parquet",
            "bytes": 4096,
            "barrier": 4,
            "sealed_at_ns": SEALED_AT_NS,
            "footer": span(3000, 1096, 11),
            "groups": [
                {"track": [], "rows": 10, "position": [1, 40], "axis": [0, 402], "seq": [0, 159], "span": span(4, 1000, 1)},
                {"track": [], "rows": 5, "position": [1, 40], "axis": [0, 402], "seq": [0, 159], "span": span(1004, 1000, 2)},
                {"track": [], "rows": 3, "position": [1, 40], "axis": [0, 402], "seq": [0, 159], "span": span(2004, 996, 3)}
            ]
        }],
        "removed_levels": [6, 8]
    });
    [retire, compact]
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("version-2 fields decode"))
        .collect()
}

#[test]
fn lifecycle_records_encode_to_the_golden_bytes_as_version_2() {
    let records = records();
    let bin: Vec<u8> = records.iter().flat_map(log::encode).collect();
    let jsonl: String = records
        .iter()
        .map(|r| serde_json::to_string(r).expect("json") + "\n")
        .collect();
    golden(2, "tests/golden/lifecycle-v2.bin", &bin);
    golden(2, "tests/golden/lifecycle-v2.jsonl", jsonl.as_bytes());
    for r in &records {
        assert_eq!(r.version(), 2);
        assert_eq!(
            u16::from_le_bytes([log::encode(r)[4], log::encode(r)[5]]),
            2
        );
    }
    // A snapshot with track floors is version 2 as well; the same state without is version 1.
    let fixture = fixture();
    let archive = Archive::open(fixture, Config::new().read_only(true)).expect("open");
    let snapshot = archive.state().snapshot(7);
    let record = Record::Snapshot(snapshot.clone());
    assert_eq!(record.version(), 2);
    golden(2, "tests/golden/snapshot-v2.bin", &log::encode(&record));
    golden(
        2,
        "tests/golden/snapshot-v2.json",
        serde_json::to_string_pretty(&record)
            .expect("json")
            .as_bytes(),
    );
    let without = Record::Snapshot(Snapshot {
        streams: snapshot
            .streams
            .into_iter()
            .map(|mut s| {
                s.tracks.clear();
                s
            })
            .collect(),
        ..snapshot
    });
    assert_eq!(without.version(), 1);
}

#[test]
fn the_version_2_fixture_opens_and_answers_its_floors() {
    let fixture = fixture();
    // Its log: declarations and barriers as version 1, lifecycle records as version 2.
    let frames = frames(&generation(fixture));
    let kinds: Vec<(u16, &str)> = frames
        .iter()
        .map(|(v, r)| {
            (
                *v,
                match r {
                    Record::Snapshot(_) => "snapshot",
                    Record::Declare(_) => "declare",
                    Record::Barrier(_) => "barrier",
                    Record::Retire(_) => "retire",
                    Record::Compact(_) => "compact",
                    Record::Offload(_) => "offload",
                },
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "snapshot"),
            (1, "declare"),
            (1, "barrier"),
            (1, "barrier"),
            (1, "barrier"),
            (1, "barrier"),
            (2, "retire"),
            (2, "retire"),
            (2, "compact"),
            (1, "barrier"),
        ]
    );
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(fixture, dir.path());
    let archive = Archive::open(dir.path(), Config::new().read_only(true)).expect("open");
    let tracks = &archive.state().streams["capture"].tracks;
    let floors: Vec<(String, u64, u64, Vec<u64>, bool)> = tracks
        .values()
        .map(|t| {
            (
                t.labels.join("/"),
                t.floor().0,
                t.raw.axis,
                (0..3).map(|k| t.level_floor(k).axis).collect(),
                t.whole,
            )
        })
        .collect();
    // The sweep at the fourth barrier (newest axis about 392): raw groups wholly more than 150
    // behind (the first two barriers), level-0 cells more than 200 behind; run_1/probe.1 whole.
    let expected_floor = |run: &str, probe: &str| -> (u64, u64) {
        let rows: Vec<(u64, Row)> = published(2)
            .into_iter()
            .filter(|(_, r)| r.run == run && r.probe == probe)
            .collect();
        let last = rows.last().expect("rows");
        (
            last.0 + 1,
            rows.iter().map(|(_, r)| r.ordinal).max().expect("axis") + 1,
        )
    };
    for (labels, floor, axis, levels, whole) in &floors {
        let (run, probe) = labels.split_once('/').expect("two labels");
        if (run, probe) == ("run_1", "probe.1") {
            // Retired whole after the fourth barrier, back with the fifth: served above its
            // floor, which sits past everything the first four held, on every level.
            assert!(!whole, "{labels}: the fifth barrier brought it back");
            let rows: Vec<(u64, Row)> = published(4)
                .into_iter()
                .filter(|(_, r)| r.run == run && r.probe == probe)
                .collect();
            let last = rows.last().expect("rows");
            assert_eq!(
                (*floor, *axis),
                (last.0 + 1, last.1.ordinal + 1),
                "{labels}"
            );
            assert!(
                levels.iter().all(|&l| l > last.1.ordinal),
                "{labels}: {levels:?}"
            );
            continue;
        }
        assert!(!whole, "{labels}");
        assert_eq!((*floor, *axis), expected_floor(run, probe), "{labels}");
        assert!(
            levels[0] > 0 && levels[0] % LADDER.base == 0,
            "{labels}: {levels:?}"
        );
        assert_eq!(&levels[1..], [0, 0], "{labels}");
    }
    // Rows from the floor are exactly what was published there, in publish order.
    let floor = floors.iter().map(|f| f.1).max().expect("floors");
    let run_0: Vec<(u64, Row)> = published(5)
        .into_iter()
        .filter(|(p, r)| *p >= floor && r.run == "run_0")
        .collect();
    let got = rows_of(
        &archive
            .read_rows(
                "capture",
                &["run_0".into()],
                Included(Position(floor)),
                Unbounded,
            )
            .expect("rows"),
    );
    assert_eq!(got, run_0);
    assert!(matches!(
        archive.read_rows("capture", &[], Unbounded, Unbounded),
        Err(ReadError::Refused(BeneathWindow::Floor { .. }))
    ));
    // A mean over the whole of run_0/probe.0 comes from level 1 (level 0 retired beneath
    // its floor), and equals the mean of every row it ever held.
    let all: Vec<f64> = published(5)
        .into_iter()
        .filter(|(_, r)| r.run == "run_0" && r.probe == "probe.0")
        .map(|(_, r)| r.value as f64)
        .collect();
    let mean = archive
        .fold(
            "capture",
            &["run_0".into(), "probe.0".into()],
            Unbounded,
            Unbounded,
            Aggregate::Mean,
        )
        .expect("mean");
    assert_eq!(mean.source, "level 1");
    let want = all.iter().sum::<f64>() / all.len() as f64;
    assert!(
        (mean.answers[0].value.expect("a mean") - want).abs() < 1e-9,
        "{mean:?} vs {want}"
    );
    assert!(archive.verify(|_, _| {}).is_empty());
    // Compacted: segments are cut at an eighth of the raw lifetime (150 / 8 = 18 axis units),
    // so each live track's two remaining barrier groups stay two segments; plus the fifth
    // barrier's file. One merged level file plus the fifth barrier's partials.
    let stream = &archive.state().streams["capture"];
    assert_eq!(stream.files.len(), 3 * 2 + 1);
    assert_eq!(stream.levels.len(), 2);
}

#[test]
fn an_archive_that_never_retires_or_compacts_writes_no_lifecycle_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), config(None)).expect("open");
    for b in 0..3 {
        seal(&mut archive, b);
    }
    drop(archive);
    let frames = frames(&generation(dir.path()));
    // The snapshot and the declaration as version 1 wrote them; each barrier names a packed
    // data file of a few rows a track, recorded by its row groups (docs/format.md, "Version
    // 11"), so it is framed as version 11, which a version-10 build refuses instead of
    // misreading. No version-2 (lifecycle) frame appears.
    let versions: Vec<u16> = frames.iter().map(|f| f.0).collect();
    assert_eq!(versions, [1, 1, 11, 11, 11]);
}

/// The Python reader in `docs/format.md`, run on the version-2 fixture: it lists exactly the
/// live files the Rust reader holds, and only the groups that are not retired.
#[test]
fn the_python_reader_in_the_docs_applies_the_lifecycle_records() {
    let snippet = golden_files::docs_block("## A Python reader", "python");
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(fixture(), dir.path());
    let script = dir.path().join("committed_files.py");
    std::fs::write(&script, snippet).expect("write the snippet");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args([dir.path().to_str().expect("utf-8"), "capture"])
        .output()
        .expect("python3 is needed to exercise the docs' reader");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8(out.stdout).expect("utf-8");

    let archive = Archive::open(dir.path(), Config::new().read_only(true)).expect("open");
    let stream = &archive.state().streams["capture"];
    let mut expected = String::new();
    for file in &stream.files {
        expected.push_str(&format!("{} ok\n", file.path));
        for (i, g) in file.groups.iter().enumerate() {
            let key = series_archive::TrackKey::encode(&g.track).expect("key");
            if !stream.tracks[&key].retires(g.seq[1]) {
                let [lo, hi] = g.position;
                expected.push_str(&format!(
                    "  group {i} {} rows={} positions={lo}..={hi}\n",
                    g.track.join("/"),
                    g.rows
                ));
            }
        }
    }
    for file in &stream.levels {
        expected.push_str(&format!("{} ok\n", file.path));
        for (k, g) in file.groups.iter().enumerate() {
            let width = LADDER.base * LADDER.factor.pow(k as u32);
            expected.push_str(&format!("  level {k} width={width} rows={}\n", g.rows));
        }
    }
    assert_eq!(listed, expected);
}
