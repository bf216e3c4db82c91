//! Format version 7: packed compaction (`docs/format.md`, "Version 7").
//!
//! - `tests/golden/compact-v7.{bin,jsonl}`: a compaction whose added data file packs three
//!   tracks, framed byte for byte as `manifest::log::encode` writes it, as frame version 7;
//!   a compaction writing one track per file keeps its earlier version.
//! - Replay applies such a record, refuses a multi-track compacted file that is not packed,
//!   and refuses a swap that would put a track's rows out of `_seq` order.
//! - What this build writes: a compaction of many barriers of many tracks makes a few packed
//!   files of about the target size (a track larger than the target in files of its own),
//!   each laid out as its own Parquet metadata says, and every track and prefix reads back
//!   exactly what was delivered, before and after a reopen.
//! - Property: random histories (tracks, barriers, target sizes, row-group sizes, an age
//!   lifetime or none) sealed and compacted in rounds keep every track's rows whole and in
//!   publish order, and the archive reopens to the same answers.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v7` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::delivered::{expected, labels, row, Delivered};
use common::{batch, capture_config, rows_of, Row};
use golden_files::{golden, span};
use parquet::file::reader::{FileReader, SerializedFileReader};
use proptest::prelude::*;
use series_archive::archive::lifecycle::{Compaction, Lifetime, Retention};
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Barrier, BarrierStream, Compact, GroupEntry, Record, SegmentFile, Slice, Span, State,
};
use series_archive::archive::{Archive, Config};
use series_archive::Position;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::path::Path;
use std::time::Duration;

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;

/// An entry of track `run_0/<track>` holding `_seq` `seqs` (positions one above).
fn entry(track: &str, seqs: [u64; 2], span: Span, slice: Option<(u32, u64)>) -> GroupEntry {
    GroupEntry {
        track: ["run_0", track].map(String::from).into(),
        rows: seqs[1] - seqs[0] + 1,
        position: [seqs[0] + 1, seqs[1] + 1],
        axis: Some([seqs[0] * 10, seqs[1] * 10]),
        seq: seqs,
        span,
        last_track: None,
        slice: slice.map(|(group, row)| Slice { group, row }),
    }
}

fn file(name: u64, barrier: u64, groups: Vec<GroupEntry>, format: u16) -> SegmentFile {
    SegmentFile {
        name,
        path: format!("streams/capture/rows/{name:012}.parquet"),
        bytes: 4096,
        barrier,
        sealed_at_ns: SEALED_AT_NS + barrier,
        footer: span(3000, 1096, 0x1122_3344 + name as u32),
        groups: groups.into(),
        cold: None,
        run: None,
        format: Some(format),
        first_level: None,
        elided: None,
    }
}

/// Two barriers of three tracks each (`_seq` 0..=5 and 6..=11, two rows a track), packed.
fn barriers() -> Vec<Record> {
    (0..2u64)
        .map(|b| {
            let g = span(4, 900, 0x0A00_0000 + b as u32);
            let at = b * 6;
            Record::Barrier(Barrier {
                barrier: b + 1,
                sealed_at_ns: SEALED_AT_NS + b + 1,
                next_name: b + 2,
                streams: vec![BarrierStream {
                    stream: "capture".into(),
                    watermark: at + 6,
                    next_seq: at + 6,
                    file: file(
                        b + 1,
                        b + 1,
                        vec![
                            entry("p1", [at, at + 1], g, Some((0, 0))),
                            entry("p2", [at + 2, at + 3], g, Some((0, 2))),
                            entry("p3", [at + 4, at + 5], g, Some((0, 4))),
                        ],
                        6,
                    ),
                    levels: None,
                    levels_from: None,
                    levels_deferred: false,
                }],
            })
        })
        .collect()
}

/// The compaction of both barriers into one packed file: each track's four rows a slice, p1
/// and p2 sharing row group 0, p3 in row group 1 (`group_rows` 8).
fn packed_compaction() -> Compact {
    let (g0, g1) = (span(4, 1500, 0x0B0B_0B0B), span(1504, 800, 0x0C0C_0C0C));
    let mut p1 = entry("p1", [0, 7], g0, Some((0, 0)));
    let mut p2 = entry("p2", [2, 9], g0, Some((0, 4)));
    let mut p3 = entry("p3", [4, 11], g1, Some((1, 0)));
    for (e, position) in [(&mut p1, [1, 8]), (&mut p2, [3, 10]), (&mut p3, [5, 12])] {
        e.rows = 4;
        e.position = position;
    }
    Compact {
        stream: "capture".into(),
        next_name: 4,
        added: vec![file(3, 2, vec![p1, p2, p3], 6)],
        removed: vec![1, 2],
        added_levels: Vec::new(),
        removed_levels: Vec::new(),
        levels_summary: None,
    }
}

#[test]
fn a_compaction_packing_several_tracks_is_locked_and_framed_as_version_7() {
    let record = Record::Compact(packed_compaction());
    let framed = log::encode(&record);
    golden(7, "tests/golden/compact-v7.bin", &framed);
    let payload = serde_json::to_string(&record).expect("json");
    golden(
        7,
        "tests/golden/compact-v7.jsonl",
        format!("{payload}\n").as_bytes(),
    );
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 7);
    const { assert!(frame::FORMAT_VERSION >= 7) };
    match frame::decode(&framed, 0) {
        Decoded::Record { payload, .. } => {
            assert_eq!(Record::decode(payload).expect("decodes"), record)
        }
        other => panic!("the golden frame does not decode: {other:?}"),
    }
    // One track per added file keeps the version its files call for: 6 for a packed file.
    let mut single = packed_compaction();
    std::sync::Arc::make_mut(&mut single.added[0].groups).truncate(1);
    assert_eq!(log::encode(&Record::Compact(single))[4], 6);
    // The barriers themselves are version 6, as before.
    for barrier in barriers() {
        assert_eq!(log::encode(&barrier)[4], 6);
    }
}

/// A state with the capture stream declared and both barriers applied.
fn with_barriers() -> State {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), capture_config()).expect("open");
    let decl = archive.state().streams["capture"].decl.clone();
    let mut state = State::default();
    state.apply(&Record::Declare(decl)).expect("declare");
    for barrier in barriers() {
        state.apply(&barrier).expect("barrier");
    }
    state
}

#[test]
fn replay_applies_a_packed_compaction_and_refuses_one_that_breaks_the_rules() {
    let mut state = with_barriers();
    let stream = &state.streams["capture"];
    assert!(stream.check_compact_order(&packed_compaction()).is_ok());
    state
        .apply(&Record::Compact(packed_compaction()))
        .expect("a packed compaction applies");
    let stream = &state.streams["capture"];
    assert_eq!(stream.files.len(), 1);
    assert_eq!(stream.tracks.len(), 3);
    assert!(stream.tracks.values().all(|t| t.rows == 4));

    // A multi-track compacted file that is not packed is damage.
    let mut unpacked = packed_compaction();
    unpacked.added[0].format = Some(5);
    std::sync::Arc::make_mut(&mut unpacked.added[0].groups)
        .iter_mut()
        .for_each(|g| g.slice = None);
    assert!(with_barriers().apply(&Record::Compact(unpacked)).is_err());

    // Compacting only the first barrier keeps its place: the new file starts at p1's
    // lowest `_seq`, before barrier 2.
    let g = span(4, 700, 0x0D0D_0D0D);
    let mut first = packed_compaction();
    first.removed = vec![1];
    first.added[0].groups = vec![entry("p1", [0, 1], g, Some((0, 0)))].into();
    assert!(with_barriers().streams["capture"]
        .check_compact_order(&first)
        .is_ok());
    // A file that would sort after barrier 2 while holding p1's rows from before it is
    // refused before it is recorded, and on replay.
    let mut backwards = packed_compaction();
    backwards.removed = vec![1];
    backwards.added[0].groups = vec![entry("p1", [7, 8], g, Some((0, 0)))].into();
    let why = with_barriers().streams["capture"]
        .check_compact_order(&backwards)
        .expect_err("rows 7..=8 of p1 would follow its rows 6..=7");
    assert!(why.contains("p1"), "{why}");
    assert!(with_barriers().apply(&Record::Compact(backwards)).is_err());
}

fn config(compaction: Compaction, age: Option<Duration>) -> Config {
    let config = capture_config().delta(false).compaction(compaction);
    match age {
        Some(age) => config.retention("capture", Retention::forever().raw(Lifetime::Age(age))),
        None => config,
    }
}

fn seal_one(archive: &mut Archive, delivered: &[(u64, Row)]) {
    let rows: Vec<Row> = delivered.iter().map(|(_, r)| r.clone()).collect();
    let positions: Vec<u64> = delivered.iter().map(|(p, _)| *p).collect();
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal").expect("a barrier");
}

/// Every prefix depth and a few ranges read back exactly what was delivered.
fn reads_back(archive: &Archive, delivered: &[(u64, Row)], prefixes: &[Vec<String>]) {
    let last = delivered.len() as u64;
    for prefix in prefixes {
        for (start, end) in [
            (Unbounded, Unbounded),
            (Included(Position(last / 3)), Unbounded),
            (
                Excluded(Position(last / 4)),
                Included(Position(last * 3 / 4)),
            ),
        ] {
            let read = archive
                .read_rows("capture", prefix, start, end)
                .expect("read");
            assert_eq!(
                rows_of(&read),
                expected(delivered, prefix, start, end),
                "prefix {prefix:?} from {start:?} to {end:?}"
            );
        }
    }
}

/// Checks a packed file's entries against its own Parquet metadata: row groups, their rows,
/// spans and digests.
fn check_layout(root: &Path, file: &SegmentFile, group_rows: usize) {
    // The layout of version 6; the entry says 9, its entries recorded as columns.
    assert_eq!(file.format, Some(9), "{}", file.path);
    let groups = file.row_groups();
    assert!(
        groups.iter().all(|g| g.2 as usize <= group_rows),
        "{groups:?}"
    );
    let path = root.join(&file.path);
    let bytes = std::fs::read(&path).expect("read");
    let reader = SerializedFileReader::new(std::fs::File::open(&path).expect("open"))
        .expect("a Parquet file");
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), groups.len(), "{}", file.path);
    for (i, (index, span, rows)) in groups.iter().enumerate() {
        assert_eq!(*index, i);
        assert_eq!(metadata.row_group(i).num_rows() as u64, *rows);
        let body = &bytes[span.offset as usize..(span.offset + span.len) as usize];
        assert_eq!(
            span.crc32c,
            series_archive::archive::digest(file.name, i as u32, &[body])
        );
    }
    let kv = metadata
        .file_metadata()
        .key_value_metadata()
        .expect("key-value metadata");
    assert!(kv
        .iter()
        .any(|k| k.key == "series_archive.format" && k.value.as_deref() == Some("6")));
}

#[test]
fn a_compaction_of_many_tracks_writes_a_few_packed_files_of_about_the_target_size() {
    const TARGET: u64 = 12 << 10;
    // 60 barriers of 400 tracks (20 runs × 20 probes), one row a track each; track
    // (run_0, p0) delivers 200 rows a barrier, so it outgrows the target alone.
    let compaction = Compaction {
        target_bytes: TARGET,
        group_rows: 1000,
        min_inputs: 16,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), config(compaction, None)).expect("open");
    let mut delivered: Delivered = Vec::new();
    let mut position = 0;
    for b in 0..60u64 {
        let mut barrier = Vec::new();
        for run in 0..20 {
            for probe in 0..20 {
                let rows = if run == 0 && probe == 0 { 200 } else { 1 };
                for r in 0..rows {
                    position += 1;
                    barrier.push((position, row(run, probe, b * 200 + r)));
                }
            }
        }
        seal_one(&mut archive, &barrier);
        delivered.extend(barrier);
    }
    let before = archive.state().streams["capture"].files.len();
    assert_eq!(before, 60);
    let reports = archive.compact(true, |_, _, _| {}).expect("compact");
    assert!(!reports.is_empty());
    let stream = &archive.state().streams["capture"];
    let files = &stream.files;
    // About bytes / target files, not one per track (400 tracks).
    let bytes_out: u64 = files.iter().map(|f| f.bytes).sum();
    let sizes: Vec<u64> = files.iter().map(|f| f.bytes).collect();
    assert!(
        files.len() >= 3 && files.len() as u64 <= 2 * bytes_out.div_ceil(TARGET) + 2,
        "{} files for {bytes_out} bytes: {sizes:?}",
        files.len()
    );
    let multi = files.iter().filter(|f| f.holds_several_tracks()).count();
    assert!(multi >= 1, "packed files hold many tracks");
    for f in files {
        check_layout(dir.path(), f, 1000);
    }
    // The big track outgrew the target: files of its own (its newest rows may share one).
    let own = files
        .iter()
        .filter(|f| !f.holds_several_tracks() && f.groups[0].track[..] == labels(&["run_0", "p0"]))
        .count();
    let shape: Vec<(usize, u64, u64)> = files
        .iter()
        .map(|f| {
            let p0: u64 = f
                .groups
                .iter()
                .filter(|g| g.track[..] == labels(&["run_0", "p0"]))
                .map(|g| g.rows)
                .sum();
            (f.groups.len(), f.bytes, p0)
        })
        .collect();
    assert!(own >= 1, "the big track has files of its own: {shape:?}");
    let big = files
        .iter()
        .filter(|f| {
            f.groups
                .iter()
                .any(|g| g.track[..] == labels(&["run_0", "p0"]))
        })
        .count();
    assert!(big >= 2, "the big track spans {big} files");
    let prefixes = [
        labels(&[]),
        labels(&["run_0"]),
        labels(&["run_0", "p0"]),
        labels(&["run_19", "p19"]),
        labels(&["run_7"]),
    ];
    reads_back(&archive, &delivered, &prefixes);
    assert!(archive.verify(|_, _| {}).is_empty());
    drop(archive);
    let reopened =
        Archive::open(dir.path(), config(compaction, None).read_only(true)).expect("reopen");
    reads_back(&reopened, &delivered, &prefixes);
    assert!(reopened.verify(|_, _| {}).is_empty());
}

#[derive(Debug, Clone)]
struct Case {
    runs: usize,
    probes: usize,
    /// Per barrier: which tracks deliver (a bit per track, cycled) and how many rows each.
    barriers: Vec<(u64, u8)>,
    target: u64,
    group_rows: usize,
    /// Compact (not forced) after these barriers.
    compact_every: usize,
    aged: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=12,
        1usize..=12,
        proptest::collection::vec((any::<u64>(), 1u8..=6), 4..40),
        1u64..=40,
        4usize..=64,
        1usize..=8,
        any::<bool>(),
    )
        .prop_map(
            |(runs, probes, barriers, target, group_rows, compact_every, aged)| Case {
                runs,
                probes,
                barriers,
                target: target << 10,
                group_rows,
                compact_every,
                aged,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Sealing and compacting in rounds keeps every track's rows whole and in publish order:
    /// reads equal the deliveries after every round and after a reopen.
    #[test]
    fn compaction_in_rounds_keeps_every_track_whole_and_in_order(case in case()) {
        let compaction = Compaction {
            target_bytes: case.target,
            group_rows: case.group_rows,
            min_inputs: 2,
        };
        // An age lifetime far longer than the test: slices by sealing time, nothing retired.
        let age = case.aged.then(|| Duration::from_secs(8 * 3600));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut archive = Archive::open(dir.path(), config(compaction, age)).expect("open");
        let tracks = case.runs * case.probes;
        let mut delivered: Delivered = Vec::new();
        let mut position = 0;
        let mut tick = 0;
        let prefixes = [
            labels(&[]),
            labels(&["run_0"]),
            vec![format!("run_{}", case.runs - 1)],
            vec![format!("run_{}", case.runs / 2), format!("p{}", case.probes / 2)],
        ];
        for (b, &(mask, rows)) in case.barriers.iter().enumerate() {
            let mut barrier = Vec::new();
            for r in 0..u64::from(rows) {
                for t in 0..tracks {
                    if mask.rotate_left(t as u32) & 1 == 1 || t == b % tracks {
                        position += 1;
                        barrier.push((position, row(t / case.probes, t % case.probes, tick + r)));
                    }
                }
            }
            tick += u64::from(rows);
            seal_one(&mut archive, &barrier);
            delivered.extend(barrier);
            if (b + 1) % case.compact_every == 0 {
                archive.compact(false, |_, _, _| {}).expect("compact");
                reads_back(&archive, &delivered, &prefixes);
            }
        }
        archive.compact(true, |_, _, _| {}).expect("compact --force");
        reads_back(&archive, &delivered, &prefixes);
        for f in &archive.state().streams["capture"].files {
            prop_assert!(f.is_packed(), "{} is not packed", f.path);
        }
        let damaged = archive.verify(|_, _| {});
        prop_assert!(damaged.is_empty(), "verify: {:?}", damaged);
        drop(archive);
        let reopened = Archive::open(dir.path(), config(compaction, age).read_only(true))
            .expect("reopen");
        reads_back(&reopened, &delivered, &prefixes);
    }
}

#[test]
fn a_compaction_reads_at_most_its_fan_in_and_a_forced_one_goes_on_in_rounds() {
    use series_archive::archive::lifecycle::plan::MAX_FAN_IN;
    // More barrier files than one round may open: 300 barriers of 6 tracks, a row each.
    let compaction = Compaction {
        min_inputs: 16,
        ..Compaction::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), config(compaction, None)).expect("open");
    let mut delivered: Delivered = Vec::new();
    let mut position = 0;
    for b in 0..(MAX_FAN_IN as u64 + 44) {
        let barrier: Delivered = (0..6)
            .map(|t| {
                position += 1;
                (position, row(t / 3, t % 3, b))
            })
            .collect();
        seal_one(&mut archive, &barrier);
        delivered.extend(barrier);
    }
    let job = archive
        .plan_compaction("capture", true)
        .expect("plan")
        .expect("a job");
    assert!(job.plan().inputs.len() <= MAX_FAN_IN, "{:?}", job);
    assert!(job.plan().more, "the rest is left for another round");
    drop(job);
    let reports = archive
        .compact(true, |_, _, _| {})
        .expect("compact --force");
    assert!(reports.len() >= 2, "{reports:?}");
    let files = &archive.state().streams["capture"].files;
    assert!(files.len() <= 2, "{} files after the rounds", files.len());
    reads_back(
        &archive,
        &delivered,
        &[labels(&[]), labels(&["run_1", "p2"])],
    );
}
