//! Format version 6: packed row groups (`docs/format.md`, "Version 6").
//!
//! - `tests/golden/barrier-v6.{bin,jsonl}`: a barrier naming a packed file (two slices of
//!   row group 0, one of row group 1), framed byte for byte as `manifest::log::encode` writes
//!   it, as frame version 6.
//! - A packed file this build writes: consecutive tracks share row groups of at most
//!   `group_rows` rows, a track larger than that spans several, each entry a slice whose
//!   span and digest are its row group's (recomputed from the file's own metadata); every
//!   track and prefix reads back exactly what was delivered.
//! - Entries that break the slice rules are refused when the manifest is replayed.
//! - Sparse levels: a barrier large enough to judge records the stream's first stored level
//!   (`levels_from`); its partials hold only the levels from there up (`first_level`), and
//!   surveys and folds that pick a finer level compute it from the raw rows, answering
//!   exactly what an archive storing every level answers, before and after a reopen and a
//!   compaction.
//! - Property: random track sets of 1 to 2,000 tracks over several barriers and row-group
//!   sizes, every prefix depth and position ranges across group and file boundaries, read in
//!   publish order, before and after a reopen; and one barrier of 100,000 tracks.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v6` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::delivered::{expected, interleaved, labels, row, Delivered};
use common::{batch, capture_config, rows_of, Row};
use golden_files::{golden, span};
use parquet::file::reader::{FileReader, SerializedFileReader};
use proptest::prelude::*;
use series_archive::archive::lifecycle::Compaction;
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Barrier, BarrierStream, GroupEntry, Record, SegmentFile, Slice, Span, State,
};
use series_archive::archive::{Archive, Config};
use series_archive::{Aggregate, Position};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::path::Path;

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;

fn entry(track: &str, rows: u64, first: u64, span: Span, slice: (u32, u64)) -> GroupEntry {
    GroupEntry {
        track: ["run_0", track].map(String::from).into(),
        rows,
        position: [first + 1, first + rows],
        axis: Some([first * 10, (first + rows - 1) * 10]),
        seq: [first, first + rows - 1],
        span,
        last_track: None,
        slice: Some(Slice {
            group: slice.0,
            row: slice.1,
        }),
    }
}

fn packed_file() -> SegmentFile {
    let (g0, g1) = (span(4, 700, 0x0A0B_0C0D), span(704, 300, 0x0102_0304));
    SegmentFile {
        name: 1,
        path: "streams/capture/rows/000000000001.parquet".into(),
        bytes: 2048,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer: span(1004, 1044, 0x1122_3344),
        groups: vec![
            entry("p1", 3, 0, g0, (0, 0)),
            entry("p2", 2, 3, g0, (0, 3)),
            entry("p3", 4, 5, g1, (1, 0)),
        ]
        .into(),
        cold: None,
        run: None,
        format: Some(6),
        first_level: None,
        elided: None,
    }
}

/// A barrier's partials holding levels 3 to 7 (a stream whose first stored level is 3).
fn sparse_partials() -> SegmentFile {
    let group = |i: u64| GroupEntry {
        track: Default::default(),
        rows: 5 - i,
        position: [1, 9],
        axis: Some([0, 80]),
        seq: [0, 8],
        span: span(4 + 100 * i, 100, 0x0500_0000 + i as u32),
        last_track: None,
        slice: None,
    };
    SegmentFile {
        name: 2,
        path: "streams/capture/levels/000000000002.parquet".into(),
        bytes: 1000,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer: span(504, 496, 0x0600_0000),
        groups: (0..5).map(group).collect::<Vec<_>>().into(),
        cold: None,
        run: None,
        format: Some(5),
        first_level: Some(3),
        elided: None,
    }
}

fn barrier(file: SegmentFile, levels: Option<SegmentFile>, levels_from: Option<u8>) -> Record {
    Record::Barrier(Barrier {
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        next_name: 3,
        streams: vec![BarrierStream {
            stream: "capture".into(),
            watermark: 9,
            next_seq: 9,
            file,
            levels,
            levels_from,
            levels_deferred: false,
        }],
    })
}

#[test]
fn a_barrier_naming_a_packed_file_is_locked_and_framed_as_version_6() {
    let record = barrier(packed_file(), Some(sparse_partials()), Some(3));
    let framed = log::encode(&record);
    golden(6, "tests/golden/barrier-v6.bin", &framed);
    let payload = serde_json::to_string(&record).expect("json");
    golden(
        6,
        "tests/golden/barrier-v6.jsonl",
        format!("{payload}\n").as_bytes(),
    );
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 6);
    assert!(
        payload.contains(r#""slice":{"group":1,"row":0}"#),
        "{payload}"
    );
    assert!(payload.contains(r#""format":6"#), "{payload}");
    assert!(payload.contains(r#""first_level":3"#), "{payload}");
    assert!(payload.contains(r#""levels_from":3"#), "{payload}");
    // Either part alone is version 6 too.
    assert_eq!(log::encode(&barrier(packed_file(), None, None))[4], 6);
    let mut unpacked = packed_file();
    unpacked.format = Some(5);
    std::sync::Arc::make_mut(&mut unpacked.groups)
        .iter_mut()
        .for_each(|g| g.slice = None);
    assert_eq!(log::encode(&barrier(unpacked, None, Some(0)))[4], 6);
    match frame::decode(&framed, 0) {
        Decoded::Record { payload, .. } => {
            assert_eq!(Record::decode(payload).expect("decodes"), record)
        }
        other => panic!("the golden frame does not decode: {other:?}"),
    }
    // What the entries attribute: each row group once, shared out among its slices by rows.
    let file = packed_file();
    assert_eq!(
        file.row_groups(),
        vec![(0, file.groups[0].span, 5), (1, file.groups[2].span, 4)]
    );
    assert_eq!(file.entry_sizes(), vec![420, 280, 300]);
}

/// A state that has the capture stream declared, to replay records onto.
fn declared() -> State {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), capture_config()).expect("open");
    let decl = archive.state().streams["capture"].decl.clone();
    let mut state = State::default();
    state.apply(&Record::Declare(decl)).expect("declare");
    state
}

#[test]
fn entries_that_break_the_slice_rules_are_refused_on_replay() {
    assert!(declared()
        .apply(&barrier(packed_file(), None, None))
        .is_ok());
    // The partials' levels and the first stored level agree with the ladder (8 levels).
    assert!(declared()
        .apply(&barrier(packed_file(), Some(sparse_partials()), Some(3)))
        .is_ok());
    let mut short = sparse_partials();
    std::sync::Arc::make_mut(&mut short.groups).pop();
    assert!(declared()
        .apply(&barrier(packed_file(), Some(short), Some(3)))
        .is_err());
    assert!(declared()
        .apply(&barrier(packed_file(), None, Some(8)))
        .is_err());
    type Damage = fn(&mut SegmentFile);
    let broken: Vec<(&str, Damage)> = vec![
        (
            "a slice that does not start where the one before ends",
            |f| std::sync::Arc::make_mut(&mut f.groups)[1].slice = Some(Slice { group: 0, row: 2 }),
        ),
        ("a row group's second slice with another span", |f| {
            std::sync::Arc::make_mut(&mut f.groups)[1].span.crc32c ^= 1
        }),
        ("a skipped row group", |f| {
            std::sync::Arc::make_mut(&mut f.groups)[2].slice = Some(Slice { group: 2, row: 0 })
        }),
        ("a row group starting inside the one before", |f| {
            std::sync::Arc::make_mut(&mut f.groups)[2].span.offset = 600
        }),
        ("an entry of a packed file without a slice", |f| {
            std::sync::Arc::make_mut(&mut f.groups)[2].slice = None
        }),
        ("a slice in a file that is not packed", |f| {
            f.format = Some(5)
        }),
    ];
    for (what, damage) in broken {
        let mut file = packed_file();
        damage(&mut file);
        let refused = declared().apply(&barrier(file, None, None));
        assert!(refused.is_err(), "{what} was accepted");
    }
}

/// Seals `barriers` (each a run of deliveries) into a new archive at `root`.
fn seal(root: &Path, group_rows: usize, barriers: &[Delivered]) -> Archive {
    let config = capture_config().delta(false).compaction(Compaction {
        group_rows,
        ..Compaction::default()
    });
    let mut archive = Archive::open(root, config).expect("open");
    for delivered in barriers {
        let rows: Vec<Row> = delivered.iter().map(|(_, r)| r.clone()).collect();
        let positions: Vec<u64> = delivered.iter().map(|(p, _)| *p).collect();
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
    archive
}

#[test]
fn a_barrier_packs_small_tracks_and_spans_big_ones_and_reads_back_exactly() {
    // Track (run_0, p0) has 300 rows, the rest 1 to 9 each; row groups of at most 64 rows.
    let mut delivered = Vec::new();
    let mut position = 0;
    for tick in 0..300u64 {
        for probe in 0..12 {
            if probe == 0 || tick < (probe as u64 % 9) + 1 {
                position += 1;
                delivered.push((position, row(0, probe, tick)));
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = seal(dir.path(), 64, std::slice::from_ref(&delivered));
    let file = &archive.state().streams["capture"].files[0];
    // The layout of version 6; the entry says 9, its entries recorded as columns.
    assert_eq!(file.format, Some(9));
    let groups = file.row_groups();
    let total: u64 = groups.iter().map(|g| g.2).sum();
    assert_eq!(total, delivered.len() as u64);
    assert!(groups.iter().all(|g| g.2 <= 64), "{groups:?}");
    assert!(
        groups.len() < file.groups.len(),
        "small tracks share row groups: {} groups for {} entries",
        groups.len(),
        file.groups.len()
    );
    let big: Vec<&GroupEntry> = file.groups.iter().filter(|g| g.track[1] == "p0").collect();
    assert_eq!(big.len(), 5, "300 rows in pieces of 64");
    // The file's own metadata: one row group per packed group, the rows and spans recorded.
    let path = dir.path().join(&file.path);
    let reader = SerializedFileReader::new(std::fs::File::open(&path).expect("open"))
        .expect("a Parquet file");
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), groups.len());
    for (i, (index, span, rows)) in groups.iter().enumerate() {
        assert_eq!(*index, i);
        assert_eq!(metadata.row_group(i).num_rows() as u64, *rows);
        let start = metadata
            .row_group(i)
            .columns()
            .iter()
            .map(|c| c.dictionary_page_offset().unwrap_or(c.data_page_offset()) as u64)
            .min()
            .expect("columns");
        assert_eq!(span.offset, start, "row group {i}");
        let bytes = std::fs::read(&path).expect("read");
        let body = &bytes[span.offset as usize..(span.offset + span.len) as usize];
        assert_eq!(
            span.crc32c,
            series_archive::archive::digest(file.name, i as u32, &[body])
        );
    }
    for prefix in [
        &[][..],
        &["run_0"][..],
        &["run_0", "p0"][..],
        &["run_0", "p7"][..],
    ] {
        let prefix = labels(prefix);
        for (start, end) in [
            (Unbounded, Unbounded),
            (Included(Position(100)), Excluded(Position(700))),
        ] {
            let read = archive
                .read_rows("capture", &prefix, start, end)
                .expect("read");
            assert_eq!(rows_of(&read), expected(&delivered, &prefix, start, end));
        }
    }
    assert!(archive.verify(|_, _| {}).is_empty());
}

#[derive(Debug, Clone)]
struct Case {
    runs: usize,
    probes: usize,
    ticks: u64,
    /// Which tracks take part, and from which tick (a track may start late).
    starts: Vec<Option<u64>>,
    group_rows: usize,
    /// Where the deliveries are cut into barriers (fractions of the rows).
    cuts: Vec<u8>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=40, 1usize..=50, 1u64..=6, 1usize..=96)
        .prop_flat_map(|(runs, probes, ticks, group_rows)| {
            let tracks = runs * probes;
            (
                Just((runs, probes, ticks, group_rows)),
                proptest::collection::vec(proptest::option::weighted(0.8, 0..ticks), tracks),
                proptest::collection::vec(any::<u8>(), 0..3),
            )
        })
        .prop_map(|((runs, probes, ticks, group_rows), starts, cuts)| Case {
            runs,
            probes,
            ticks,
            starts,
            group_rows,
            cuts,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Packed row groups read back exactly: every prefix depth, ranges across row-group and
    /// file boundaries, in publish order, before and after a reopen.
    #[test]
    fn packed_reads_answer_every_prefix_and_range_in_publish_order(case in case()) {
        let delivered = interleaved(case.runs, case.probes, case.ticks, &case.starts);
        prop_assume!(!delivered.is_empty());
        let mut cuts: Vec<usize> = case
            .cuts
            .iter()
            .map(|c| *c as usize * delivered.len() / 256)
            .filter(|c| *c > 0)
            .collect();
        cuts.sort();
        cuts.dedup();
        let mut barriers = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([delivered.len()]) {
            barriers.push(delivered[from..cut].to_vec());
            from = cut;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = seal(dir.path(), case.group_rows, &barriers);
        let last = delivered.len() as u64;
        let ranges = [
            (Unbounded, Unbounded),
            (Included(Position(last / 3)), Unbounded),
            (Excluded(Position(last / 4)), Included(Position(last * 3 / 4))),
        ];
        let prefixes = [
            labels(&[]),
            labels(&["run_0"]),
            vec![format!("run_{}", case.runs - 1)],
            vec![format!("run_{}", case.runs / 2), format!("p{}", case.probes / 2)],
            labels(&["run_0", "p0"]),
        ];
        let reopened = Archive::open(dir.path(), capture_config().delta(false).read_only(true))
            .expect("reopen");
        for archive in [&archive, &reopened] {
            for prefix in &prefixes {
                for (start, end) in ranges {
                    let read = archive.read_rows("capture", prefix, start, end).expect("read");
                    prop_assert_eq!(rows_of(&read), expected(&delivered, prefix, start, end));
                }
            }
        }
        let damaged = reopened.verify(|_, _| {});
        prop_assert!(damaged.is_empty(), "verify: {:?}", damaged);
    }
}

#[test]
fn one_barrier_of_100000_tracks_is_one_row_group_and_every_track_reads_back() {
    // 1,000 runs × 100 probes, one row each.
    let delivered: Delivered = (0..100_000usize)
        .map(|i| ((i + 1) as u64, row(i / 100, i % 100, 1)))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = seal(
        dir.path(),
        Compaction::default().group_rows,
        std::slice::from_ref(&delivered),
    );
    let file = &archive.state().streams["capture"].files[0];
    assert_eq!(file.groups.len(), 100_000, "one entry per track");
    assert_eq!(file.row_groups().len(), 1, "one row group holds them all");
    let reopened =
        Archive::open(dir.path(), capture_config().delta(false).read_only(true)).expect("reopen");
    assert_eq!(reopened.state().streams["capture"].tracks.len(), 100_000);
    for prefix in [
        labels(&[]),
        labels(&["run_500"]),
        labels(&["run_999", "p99"]),
        labels(&["run_0", "p0"]),
    ] {
        let read = reopened
            .read_rows("capture", &prefix, Unbounded, Unbounded)
            .expect("read");
        assert_eq!(
            rows_of(&read),
            expected(&delivered, &prefix, Unbounded, Unbounded)
        );
    }
    assert!(reopened.verify(|_, _| {}).is_empty());
}

// ---------------------------------------------------------------------------------------
// Sparse levels
// ---------------------------------------------------------------------------------------

const HOSTS: usize = 50;
const PER_HOST: usize = 400;
use common::scrape::{self, STEP_NS, T0};

fn metrics_config() -> Config {
    scrape::config()
}

fn scraped(from: usize, to: usize) -> arrow::array::RecordBatch {
    scrape::rows(HOSTS, from, to)
}

/// Seals the scraped rows `0..HOSTS × PER_HOST` in barriers of `per_barrier` rows.
fn scrape_archive(root: &Path, per_barrier: usize) -> Archive {
    let mut archive = Archive::open(root, metrics_config()).expect("open");
    scrape::seal(&mut archive, HOSTS, 0, HOSTS * PER_HOST, per_barrier);
    archive
}

/// Every survey and fold answer over a set of ranges, budgets and selections, as text.
fn answers(archive: &Archive) -> Vec<String> {
    let end = T0 + PER_HOST as u64 * STEP_NS;
    let ranges = [
        (Unbounded, Unbounded),
        (
            Included(T0 + 95 * STEP_NS / 10),
            Excluded(T0 + 300 * STEP_NS / 10),
        ),
        (Included(T0 + 17 * STEP_NS), Included(end - 33 * STEP_NS)),
    ];
    let mut out = Vec::new();
    for track in [labels(&[]), labels(&["h07"])] {
        for (start, end) in ranges {
            for budget in [8, 40, 400, 4000, 40_000] {
                let s = archive
                    .survey("metrics", &track, start, end, budget)
                    .expect("survey");
                out.push(format!(
                    "{track:?} {start:?} {end:?} @{budget}: {:?} {:?} {:?}",
                    s.plan, s.span, s.buckets
                ));
            }
            for kind in [
                Aggregate::Count,
                Aggregate::Sum,
                Aggregate::Min,
                Aggregate::Max,
                Aggregate::Mean,
            ] {
                let f = archive
                    .fold("metrics", &track, start, end, kind)
                    .expect("fold");
                out.push(format!(
                    "{track:?} {start:?} {end:?} {kind:?}: {:?} {:?}",
                    f.span, f.answers
                ));
            }
        }
    }
    out
}

#[test]
fn a_sparse_level_is_not_stored_and_reads_answer_as_if_it_were() {
    // One barrier of 20,000 rows decides; the reference seals the same rows in barriers too
    // small to judge (2,500 rows), so it stores every level. Each track's 400 rows make
    // cells dense enough to be worth their bytes, so the barrier writes its partials rather
    // than deferring them (format version 8).
    let (sparse_dir, full_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let sparse = scrape_archive(sparse_dir.path(), HOSTS * PER_HOST);
    let full = scrape_archive(full_dir.path(), 2_500);
    let state = &sparse.state().streams["metrics"];
    // Rows 10 s apart: 1 s and 8 s cells hold one row, 64 s cells about six, 512 s cells
    // about fifty, 4,096 s cells about 410. Levels 3 up would hold a cell per 45 rows;
    // levels 4 up, the first to hold at most one per 64 rows, are stored.
    assert_eq!(state.levels_from, Some(4));
    assert_eq!(state.levels[0].first_level, Some(4));
    assert_eq!(state.levels[0].groups.len(), 4, "levels 4 to 7");
    assert_eq!(full.state().streams["metrics"].levels_from, None);
    assert!(full.state().streams["metrics"]
        .levels
        .iter()
        .all(|f| f.first_level.is_none() && f.groups.len() == 8));
    let bytes = |a: &Archive| -> u64 {
        a.state().streams["metrics"]
            .levels
            .iter()
            .map(|f| f.bytes)
            .sum()
    };
    assert!(
        bytes(&sparse) * 4 < bytes(&full),
        "levels 4 up cost a fraction of all eight: {} vs {} bytes",
        bytes(&sparse),
        bytes(&full)
    );
    let want = answers(&full);
    assert!(
        want.iter().any(|a| a.contains("level: 0")),
        "some survey picks level 0: {want:?}"
    );
    assert_eq!(answers(&sparse), want);
    // The fold says where a computed level came from.
    let f = sparse
        .fold(
            "metrics",
            &labels(&["h07"]),
            Unbounded,
            Unbounded,
            Aggregate::Count,
        )
        .expect("fold");
    assert!(f.source.contains("raw rows"), "{}", f.source);
    // The decision is recorded: a reopen answers the same, and so does a compaction (which
    // writes no level beneath it).
    drop(sparse);
    let mut reopened = Archive::open(sparse_dir.path(), metrics_config()).expect("reopen");
    assert_eq!(reopened.state().streams["metrics"].levels_from, Some(4));
    assert_eq!(answers(&reopened), want);
    reopened.compact(true, |_, _, _| {}).expect("compact");
    assert!(reopened.state().streams["metrics"].levels.iter().all(|f| {
        f.first_level == Some(4) || f.run.and_then(|r| r.level).is_some_and(|l| l >= 4)
    }));
    assert_eq!(answers(&reopened), want);
    // Barriers after the decision store levels 4 up, whatever their size.
    let positions: Vec<u64> = (1..=10).map(|p| (HOSTS * PER_HOST) as u64 + p).collect();
    let more = scraped(HOSTS * PER_HOST, HOSTS * PER_HOST + 10);
    reopened
        .stage_batch("metrics", &more, &positions)
        .expect("stage");
    reopened.seal_all().expect("seal");
    let last = reopened.state().streams["metrics"]
        .levels
        .last()
        .cloned()
        .expect("partials");
    assert_eq!((last.first_level, last.groups.len()), (Some(4), 4));
    assert!(reopened.verify(|_, _| {}).is_empty());
}
