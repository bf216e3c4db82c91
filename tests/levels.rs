//! Levels, survey and statistics against a raw fold of the same rows: every answer the
//! archive gives from its levels equals the bucket a scan of the raw rows computes.

mod common;

use common::*;
use proptest::prelude::*;
use series_archive::archive::{Archive, Config, Ladder, ReadError, StreamSpec};
use series_archive::{Aggregate, Bucket};
use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

fn spec(ladder: Ladder) -> StreamSpec {
    capture_spec().with_ladder(Some(ladder))
}

/// Seals `rows` in barriers cut at `cuts`.
fn archive_with(
    dir: &std::path::Path,
    ladder: Ladder,
    rows: &[Row],
    positions: &[u64],
    cuts: &[usize],
) -> Archive {
    let mut archive = Archive::open(dir, Config::new().stream(spec(ladder))).expect("open");
    let mut points: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|&c| c > 0 && c < rows.len())
        .collect();
    points.push(0);
    points.push(rows.len());
    points.sort_unstable();
    points.dedup();
    for w in points.windows(2) {
        archive
            .stage_batch("capture", &batch(&rows[w[0]..w[1]]), &positions[w[0]..w[1]])
            .expect("stage");
        archive.seal_all().expect("seal");
    }
    archive
}

fn selected<'a>(rows: &'a [Row], track: &[&str]) -> Vec<&'a Row> {
    rows.iter()
        .filter(|r| {
            track.first().is_none_or(|run| r.run == *run)
                && track.get(1).is_none_or(|p| r.probe == *p)
        })
        .collect()
}

/// The buckets a raw scan computes on a grid of `width`, cells `[c0, c1]`, merged cell by
/// cell across tracks in key order, grouped by field then cell.
fn raw_buckets(rows: &[&Row], width: u64, c0: u64, c1: u64) -> Vec<Bucket> {
    // Per track (key order), per field, per cell: fold in publish order.
    let mut tracks: BTreeMap<(String, String), BTreeMap<(u32, u64), Bucket>> = BTreeMap::new();
    for r in rows {
        let cell = r.ordinal / width;
        if cell < c0 || cell > c1 {
            continue;
        }
        let cells = tracks.entry((r.run.clone(), r.probe.clone())).or_default();
        for (f, v) in [(0u32, r.value as f64), (1, r.noise)] {
            cells
                .entry((f, cell))
                .and_modify(|b| b.push(r.ordinal, v))
                .or_insert(Bucket::of(f, r.ordinal, v));
        }
    }
    let mut merged: BTreeMap<(u32, u64), Bucket> = BTreeMap::new();
    for cells in tracks.values() {
        for (&k, &b) in cells {
            merged.entry(k).and_modify(|m| *m = m.merge(b)).or_insert(b);
        }
    }
    merged.into_values().collect()
}

fn workload_rows() -> impl Strategy<Value = (Vec<Row>, Vec<u64>, Vec<usize>)> {
    (
        prop::collection::vec(
            (0usize..2, 0usize..3, 0u64..40, -100i64..100, -8i32..8),
            1..250,
        ),
        prop::collection::vec(0usize..250, 0..6),
    )
        .prop_map(|(spec, cuts)| {
            let mut last: BTreeMap<(usize, usize), u64> = BTreeMap::new();
            let mut rows = Vec::new();
            for (run, probe, step, value, noise) in spec {
                let axis = last.entry((run, probe)).or_insert(0);
                *axis += step;
                rows.push(Row {
                    run: format!("run_{run}"),
                    probe: format!("p{probe}"),
                    ordinal: *axis,
                    value,
                    noise: f64::from(noise) / 4.0,
                });
            }
            let positions = (1..=rows.len() as u64).collect();
            (rows, positions, cuts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x1e7e1), ..ProptestConfig::default() })]

    /// A survey equals the raw M4 on the grid it answered with, never exceeds its budget,
    /// is the finest level that fits, and orders by field then first.axis — for one track,
    /// a prefix and the whole stream, in any barrier split, warm and after reopening, before
    /// and after a compaction.
    #[test]
    fn survey_equals_the_raw_fold_on_its_grid(
        (rows, positions, cuts) in workload_rows(),
        budget in 8usize..120,
        from in 0u64..30, len in 1u64..400,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ladder = Ladder::new(4, 2, 4).expect("valid");
        let mut archive = archive_with(dir.path(), ladder, &rows, &positions, &cuts);
        let reopened = || Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
        // The barriers' partials first, then the level tables a compaction merges them into
        // (many tracks a row group, each track's rows found by a search).
        for compacted in [false, true] {
            if compacted {
                archive.compact(true, |_, _, _| {}).expect("compact");
            }
            for track in [vec![], vec!["run_1"], vec!["run_0", "p2"]] {
                let labels: Vec<String> = track.iter().map(|s| s.to_string()).collect();
                let chosen = selected(&rows, &track);
                for (start, end) in [(Included(from), Excluded(from + len)), (Unbounded, Unbounded)] {
                    let s = archive.survey("capture", &labels, start, end, budget).expect("survey");
                    let cold = reopened().survey("capture", &labels, start, end, budget).expect("survey");
                    prop_assert_eq!(&s.buckets, &cold.buckets, "cold and warm views agree");
                    // A reader that keeps no level group (a one-shot command) decodes only
                    // the selected tracks' rows of a group holding many more.
                    let once = Archive::open(dir.path(), Config::new().read_only(true).level_cache_cells(0).raw_cache_bytes(0))
                        .expect("reopen")
                        .survey("capture", &labels, start, end, budget)
                        .expect("survey");
                    prop_assert_eq!(&s.buckets, &once.buckets, "a one-shot read agrees");
                    prop_assert!(s.buckets.len() * 4 <= budget, "{} buckets over budget {}", s.buckets.len(), budget);
                    let Some(plan) = s.plan else {
                        prop_assert!(chosen.is_empty() || matches!(start, Included(_)));
                        continue;
                    };
                    // Within the budget per field (the finest-level choice is proven in levels.rs).
                    let cpf = (budget / 8) as u64;
                    prop_assert!(plan.cells[1] - plan.cells[0] < cpf);
                    let expected = raw_buckets(&chosen, plan.cell_width, plan.cells[0], plan.cells[1]);
                    prop_assert_eq!(&s.buckets, &expected, "compacted: {}", compacted);
                    // Grouped by field in declared order, ascending first.axis within a field.
                    for pair in s.buckets.windows(2) {
                        prop_assert!(pair[0].field < pair[1].field || (pair[0].field == pair[1].field && pair[0].first.axis < pair[1].first.axis));
                    }
                }
            }
        }
    }

    /// Level folds equal the raw fold over the whole level-0 cells the range touches;
    /// percentiles equal a scan of exactly the range.
    #[test]
    fn statistics_equal_raw_scans((rows, positions, cuts) in workload_rows(), from in 0u64..30, len in 1u64..300, rank in 0u8..=100) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ladder = Ladder::new(4, 2, 3).expect("valid");
        let archive = archive_with(dir.path(), ladder, &rows, &positions, &cuts);
        let (lo, hi) = (from, from + len - 1);
        for track in [vec![], vec!["run_0"]] {
            let labels: Vec<String> = track.iter().map(|s| s.to_string()).collect();
            let chosen = selected(&rows, &track);
            for kind in Aggregate::LEVEL_FOLDS {
                let f = archive.fold("capture", &labels, Included(from), Excluded(from + len), kind).expect("fold");
                let cells = raw_buckets(&chosen, ladder.base, lo / ladder.base, hi / ladder.base);
                for (field, answer) in f.answers.iter().enumerate() {
                    let b = cells.iter().filter(|b| b.field as usize == field).copied().reduce(Bucket::merge);
                    prop_assert_eq!(answer.count, b.map_or(0, |b| b.count));
                    prop_assert_eq!(answer.value, b.map_or(kind.scanned(&mut []), |b| kind.folded(&b)), "{} field {}", kind, field);
                }
            }
            let p = Aggregate::percentile(rank);
            let f = archive.fold("capture", &labels, Included(from), Excluded(from + len), p).expect("fold");
            let inside: Vec<&&Row> = chosen.iter().filter(|r| (lo..=hi).contains(&r.ordinal)).collect();
            let mut values: Vec<f64> = inside.iter().map(|r| r.value as f64).collect();
            prop_assert_eq!(f.answers[0].value, p.scanned(&mut values));
            prop_assert_eq!(f.answers[0].count, inside.len() as u64);
        }
    }
}

#[test]
fn past_the_coarsest_level_cells_merge_into_what_a_coarser_level_would_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut rows, positions) = workload(2, 2, 400, 0); // ordinals up to ~4000
    for r in &mut rows {
        r.noise = (r.value % 16) as f64 / 4.0; // exact, so sums do not depend on grouping
    }
    let small = Ladder::new(10, 2, 2).expect("valid"); // widths 10, 20
    let archive = archive_with(dir.path(), small, &rows, &positions, &[97, 400, 1100]);
    let s = archive
        .survey("capture", &[], Unbounded, Unbounded, 8 * 5)
        .expect("survey");
    let plan = s.plan.expect("rows");
    assert_eq!(plan.level, 1);
    assert!(
        plan.merge > 1 && plan.cell_width == 20 * plan.merge,
        "{plan:?}"
    );
    assert!(s.buckets.len() <= 10);
    // A ladder whose coarsest level has exactly that width holds the same buckets.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let coarse = Ladder::new(plan.cell_width, 2, 1).expect("valid");
    let archive2 = archive_with(dir2.path(), coarse, &rows, &positions, &[5]);
    let s2 = archive2
        .survey("capture", &[], Unbounded, Unbounded, 8 * 5)
        .expect("survey");
    assert_eq!(s.buckets, s2.buckets);
}

#[test]
fn refusals_and_declarations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rows, positions) = workload(1, 2, 50, 0);
    let archive = archive_with(dir.path(), Ladder::ORDINAL, &rows, &positions, &[]);
    // A budget that buys no bucket is a refusal with the smallest budget that would.
    let err = archive
        .survey("capture", &[], Unbounded, Unbounded, 7)
        .expect_err("budget");
    assert!(matches!(err, ReadError::Budget { needed: 8, .. }), "{err}");
    assert!(err.to_string().contains("at least 8"), "{err}");
    // An empty range answers nothing, not an error.
    let s = archive
        .survey(
            "capture",
            &[],
            Included(10_000_000),
            Excluded(10_000_001),
            400,
        )
        .expect("survey");
    assert!(s.buckets.is_empty());
    let s = archive
        .survey("capture", &["run_9".into()], Unbounded, Unbounded, 400)
        .expect("survey");
    assert!(s.buckets.is_empty() && s.plan.is_none());
    drop(archive);
    // Another ladder on reopen is a declaration error naming both.
    let err = Archive::open(dir.path(), Config::new().stream(spec(Ladder::NANOSECONDS)))
        .expect_err("drift");
    assert!(err.to_string().contains("ladder"), "{err}");
    // A stream without an axis cannot be surveyed.
    let dir = tempfile::tempdir().expect("tempdir");
    let plain =
        StreamSpec::dynamic("plain", capture_schema(), vec!["run".into()], None).expect("valid");
    let archive = Archive::open(dir.path(), Config::new().stream(plain)).expect("open");
    let err = archive
        .survey("plain", &[], Unbounded, Unbounded, 400)
        .expect_err("no axis");
    assert!(matches!(err, ReadError::NotSurveyable { .. }), "{err}");
}

#[test]
fn the_contract_answers_buckets_and_statistics() {
    use series_archive::{Application, BeneathWindow, Definition, Series};
    struct App;
    impl Application for App {}
    let dir = tempfile::tempdir().expect("tempdir");
    let (rows, positions) = workload(2, 3, 300, 0);
    let mut archive = archive_with(
        dir.path(),
        Ladder::new(16, 4, 3).expect("valid"),
        &rows,
        &positions,
        &[500],
    );
    let def = Definition::dynamic(
        "capture",
        4096,
        ["run".into(), "probe".into()],
        Some("ordinal".into()),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let all: Bound<u64> = Unbounded;
    let buckets = rt
        .block_on(Series::<App>::buckets(
            &mut archive,
            def.clone(),
            &[],
            all,
            all,
            400,
        ))
        .expect("buckets");
    assert!(!buckets.is_empty() && buckets.len() * 4 <= 400);
    let total: u64 = buckets
        .iter()
        .filter(|b| b.field == 0)
        .map(|b| b.count)
        .sum();
    assert_eq!(total, rows.len() as u64);
    let stats = rt
        .block_on(Series::<App>::aggregate(
            &mut archive,
            def.clone(),
            &[],
            all,
            all,
            Aggregate::Count,
        ))
        .expect("count");
    assert_eq!(stats[0].value, Some(rows.len() as f64));
    let refused = rt
        .block_on(Series::<App>::buckets(&mut archive, def, &[], all, all, 3))
        .expect_err("budget");
    assert!(matches!(refused, BeneathWindow::Unreadable(_)), "{refused}");
}

#[test]
fn a_percentile_scan_stops_when_its_caller_stops_wanting_it_and_never_answers_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rows, positions) = workload(2, 2, 400, 0);
    let ladder = Ladder::new(10, 2, 2).expect("valid");
    // Five barriers: each track's rows in several row groups.
    let archive = archive_with(
        dir.path(),
        ladder,
        &rows,
        &positions,
        &[300, 600, 900, 1200],
    );
    let p95 = Aggregate::percentile(95);
    let whole = archive
        .fold("capture", &[], Unbounded, Unbounded, p95)
        .expect("p95");
    let always = archive
        .fold_while("capture", &[], Unbounded, Unbounded, p95, &|| true)
        .expect("p95");
    assert_eq!(format!("{whole:?}"), format!("{always:?}"));
    // Wanted for the first two row groups only: the scan stops, with no answer.
    let asked = std::cell::Cell::new(0);
    let two = || {
        asked.set(asked.get() + 1);
        asked.get() <= 2
    };
    let stopped = archive.fold_while("capture", &[], Unbounded, Unbounded, p95, &two);
    assert!(matches!(stopped, Err(ReadError::Abandoned)), "{stopped:?}");
    assert_eq!(
        asked.get(),
        3,
        "it asked before each row group and stopped at the first no"
    );
    // A level fold reads no raw row group: it never asks.
    let mean = archive
        .fold_while(
            "capture",
            &[],
            Unbounded,
            Unbounded,
            Aggregate::Mean,
            &|| false,
        )
        .expect("a level fold answers");
    assert!(mean.answers[0].count > 0);
}

/// A sparse stream (rows 10 axis units apart on a ladder whose fine cells would hold one row
/// each) stores its levels from a coarse one. A level fold still answers for the whole
/// level-0 cells of its range, exactly as a raw fold of them would, but reads the coarsest
/// stored cells that tile them and the raw rows of its two edges only.
#[test]
fn sparse_level_folds_read_coarse_cells_and_equal_the_raw_fold_of_level_0_cells() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Widths 1, 4, 16, 64, 256, 1024, 4096: the stored levels hold one cell per 64 rows
    // at most first from level 5 (1024 + 4096 units: 102 and 410 rows a cell).
    let ladder = Ladder::new(1, 4, 7).expect("valid");
    let mut rows = Vec::new();
    for i in 0..6000u64 {
        for (run, probe) in [("run_0", "p0"), ("run_0", "p1"), ("run_1", "p0")] {
            rows.push(Row {
                run: run.into(),
                probe: probe.into(),
                ordinal: 10 * i + u64::from(probe == "p1") * 3,
                value: ((i * 7919) % 201) as i64 - 100,
                noise: ((i * 31) % 16) as f64 / 4.0,
            });
        }
    }
    let positions: Vec<u64> = (1..=rows.len() as u64).collect();
    let archive = archive_with(dir.path(), ladder, &rows, &positions, &[9000, 15000]);
    assert_eq!(
        archive.state().streams["capture"].first_stored_level(),
        5,
        "the barriers stored levels from 5"
    );
    let climbed = check_folds(
        &archive,
        &rows,
        &[vec![], vec!["run_0"], vec!["run_1", "p0"]],
        5,
    );
    assert!(climbed > 100, "most folds read stored cells ({climbed})");
}

/// A long-lived reader (the default configuration: a server's, a host's) keeps a fleet's
/// packed row groups decoded: a survey answered from raw rows reads a group once, and every
/// later survey of any of its tracks is cut from it, answering exactly what a one-shot read
/// (which keeps nothing) and the raw fold answer. A reader reopened on a later commit, sharing
/// the caches, still reads the new barrier's rows: nothing kept stands in for a file it did
/// not hold.
#[test]
fn a_long_lived_reader_reads_a_packed_row_group_once_and_answers_as_a_one_shot_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Widths 1, 4, 16, 64, 256, 1024, 4096; rows 10 apart: stored from level 5.
    let ladder = Ladder::new(1, 4, 7).expect("valid");
    let fleet_rows = |from: u64, to: u64| -> Vec<Row> {
        let mut rows = Vec::new();
        for i in from..to {
            for run in 0..300u64 {
                rows.push(Row {
                    run: format!("run_{run:03}"),
                    probe: "p0".into(),
                    ordinal: 10 * i,
                    value: ((i * 7919 + run) % 201) as i64 - 100,
                    noise: (run % 16) as f64 / 4.0,
                });
            }
        }
        rows
    };
    let mut rows = fleet_rows(0, 30);
    let positions: Vec<u64> = (1..=rows.len() as u64).collect();
    let mut writer = archive_with(dir.path(), ladder, &rows, &positions, &[4500]);
    assert_eq!(writer.state().streams["capture"].first_stored_level(), 5);
    let once = || {
        Archive::open(
            dir.path(),
            Config::new()
                .read_only(true)
                .level_cache_cells(0)
                .raw_cache_bytes(0),
        )
        .expect("reopen")
    };
    let reads = |a: &Archive| a.requests()[0].reads;
    let check = |reader: &Archive, rows: &[Row], run: &str| {
        let labels = vec![run.to_string(), "p0".to_string()];
        let s = reader
            .survey("capture", &labels, Unbounded, Unbounded, 400)
            .expect("survey");
        let plan = s.plan.expect("a plan");
        assert!(plan.level < 4, "answered from raw rows: {plan:?}");
        let chosen = selected(rows, &[run, "p0"]);
        assert_eq!(
            s.buckets,
            raw_buckets(&chosen, plan.cell_width, plan.cells[0], plan.cells[1]),
            "{run}"
        );
        let one_shot = once()
            .survey("capture", &labels, Unbounded, Unbounded, 400)
            .expect("survey");
        assert_eq!(s.buckets, one_shot.buckets, "{run}: a one-shot read agrees");
    };
    let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
    check(&reader, &rows, "run_000");
    let warm = reads(&reader);
    assert!(warm > 0, "the first survey read the groups");
    for run in ["run_000", "run_150", "run_299", "run_007"] {
        check(&reader, &rows, run);
    }
    assert_eq!(
        reads(&reader),
        warm,
        "later surveys were cut from the kept groups"
    );
    // A cache too small for a group refuses it, and its reads decode what they want, as a
    // one-shot read does: the same answers, never a group decoded whole for nothing.
    let small = Archive::open(
        dir.path(),
        Config::new().read_only(true).raw_cache_bytes(1024),
    )
    .expect("reopen");
    for run in ["run_000", "run_150"] {
        check(&small, &rows, run);
    }
    // A later barrier: a reader reopened on it and sharing the caches reads its rows too.
    let more = fleet_rows(30, 45);
    let next: Vec<u64> = (rows.len() as u64 + 1..=(rows.len() + more.len()) as u64).collect();
    writer
        .stage_batch("capture", &batch(&more), &next)
        .expect("stage");
    writer.seal_all().expect("seal");
    rows.extend(more);
    let mut reopened = Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
    reopened.share_level_cache(&reader);
    for run in ["run_000", "run_150"] {
        check(&reopened, &rows, run);
    }
}

/// Level folds of `archive` over 41 ranges (SplitMix64, and the unbounded one) for each of
/// `selections` equal the raw fold of the whole level-0 cells of the range, on a ladder of
/// base 1 whose levels are stored from `stored`; raw pieces only at the edges, each less than
/// one stored cell wide. Answers how many folds read stored cells.
fn check_folds(archive: &Archive, rows: &[Row], selections: &[Vec<&str>], stored: usize) -> usize {
    let stored_width = 4u64.pow(stored as u32);
    let top = rows.iter().map(|r| r.ordinal).max().expect("rows");
    // SplitMix64 ranges, plus the unbounded one.
    let mut seed = 0x5eed_u64;
    let mut next = move || {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut ranges: Vec<(Bound<u64>, Bound<u64>)> = vec![(Unbounded, Unbounded)];
    for _ in 0..40 {
        let from = next() % (top + top / 30);
        let len = 1 + next() % (top / 2);
        ranges.push((Included(from), Excluded(from + len)));
    }
    let mut climbed = 0;
    for track in selections {
        let labels: Vec<String> = track.iter().map(|s| s.to_string()).collect();
        let chosen = selected(rows, track);
        let (first_axis, last_axis) = (
            chosen.iter().map(|r| r.ordinal).min().expect("rows"),
            chosen.iter().map(|r| r.ordinal).max().expect("rows"),
        );
        for &(start, end) in &ranges {
            let (lo, hi) = match (start, end) {
                (Included(a), Excluded(b)) => (a, b - 1),
                _ => (first_axis, last_axis),
            };
            let cells = raw_buckets(&chosen, 1, lo, hi);
            for kind in Aggregate::LEVEL_FOLDS {
                let f = archive
                    .fold("capture", &labels, start, end, kind)
                    .expect("fold");
                assert_eq!(f.span, Some([lo, hi + 1]), "{start:?}..{end:?}");
                for (field, answer) in f.answers.iter().enumerate() {
                    let b = cells
                        .iter()
                        .filter(|b| b.field as usize == field)
                        .copied()
                        .reduce(Bucket::merge);
                    assert_eq!(
                        answer.count,
                        b.map_or(0, |b| b.count),
                        "{kind} {start:?}..{end:?}"
                    );
                    assert_eq!(
                        answer.value,
                        b.map_or(kind.scanned(&mut []), |b| kind.folded(&b)),
                        "{kind} field {field} over {start:?}..{end:?} of {track:?}: {:?}",
                        f.pieces
                    );
                }
                // Raw pieces only at the edges.
                for (i, p) in f.pieces.iter().enumerate() {
                    assert!(p.level == 0 || p.level >= stored, "{:?}", f.pieces);
                    if p.level == 0 {
                        assert!(i == 0 || i + 1 == f.pieces.len(), "{:?}", f.pieces);
                        // An edge is less than a stored cell; a range that holds no whole
                        // stored cell, less than two.
                        let most = if f.pieces.len() == 1 {
                            2 * stored_width
                        } else {
                            stored_width
                        };
                        assert!(p.cells[1] - p.cells[0] < most, "{:?}", f.pieces);
                    }
                }
                if f.pieces.iter().any(|p| p.level >= stored) {
                    climbed += 1;
                    assert!(f.source.starts_with("level 0 ("), "{}", f.source);
                }
            }
        }
    }
    climbed
}

/// A fleet too sparse for its barriers to summarise (format version 8: every barrier defers
/// its partials): a level fold still tiles its range, and the deferred rows of its stored
/// pieces, folded from the raw rows in one scan, give exactly the raw fold.
#[test]
fn level_folds_of_deferred_rows_equal_the_raw_fold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ladder = Ladder::new(1, 4, 7).expect("valid");
    let mut rows = Vec::new();
    for i in 0..30u64 {
        for run in 0..20 {
            for probe in 0..20 {
                rows.push(Row {
                    run: format!("run_{run}"),
                    probe: format!("p{probe}"),
                    ordinal: 10 * i + probe,
                    value: ((i * 7919 + run * 31 + probe) % 201) as i64 - 100,
                    noise: ((i * 31 + run) % 16) as f64 / 4.0,
                });
            }
        }
    }
    let positions: Vec<u64> = (1..=rows.len() as u64).collect();
    let archive = archive_with(dir.path(), ladder, &rows, &positions, &[]);
    let stream = &archive.state().streams["capture"];
    assert_eq!(
        stream.levels_deferred_from,
        Some(0),
        "the barrier deferred its partials"
    );
    assert_eq!(stream.first_stored_level(), 5);
    check_folds(
        &archive,
        &rows,
        &[vec![], vec!["run_3"], vec!["run_7", "p9"]],
        5,
    );
}
