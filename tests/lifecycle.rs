//! The lifecycle end to end: retention floors, levels outliving raw rows, whole-track
//! retirement, compaction equal row for row and cell for cell, background compaction beside
//! sealing, and checkpoints.

mod common;

use common::hand::Hand;
use common::{batch, capture_config, rows_of, workload, Row};
use series_archive::archive::lifecycle::{Compaction, Lifetime, Retention};
use series_archive::archive::{Archive, Config, ReadError};
use series_archive::{Aggregate, BeneathWindow, Position};
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const HOUR: u64 = 3_600_000_000_000;

fn config(clock: &Arc<Hand>, retention: Retention) -> Config {
    capture_config()
        .clock(clock.clone())
        .retention("capture", retention)
}

/// Seals `barriers` barriers of `ticks` ticks each, one an hour of the hand clock, starting
/// at tick 0 and hour 0. Answers every row published, with its position.
fn fill(archive: &mut Archive, clock: &Hand, barriers: u64, ticks: u64) -> Vec<(u64, Row)> {
    let mut all = Vec::new();
    for b in 0..barriers {
        clock.set(b * HOUR);
        let (rows, positions) = workload(2, 2, ticks, b * ticks);
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
        all.extend(positions.into_iter().zip(rows));
    }
    all
}

fn track(run: &str, probe: &str) -> Vec<String> {
    vec![run.to_owned(), probe.to_owned()]
}

fn all_rows(archive: &Archive, from: Option<u64>) -> Vec<(u64, Row)> {
    let start = from.map_or(Unbounded, |p| Included(Position(p)));
    rows_of(
        &archive
            .read_rows("capture", &[], start, Unbounded)
            .expect("rows"),
    )
}

fn survey_text(archive: &Archive, from: u64, budget: usize) -> String {
    let s = archive
        .survey(
            "capture",
            &track("run_0", "probe.0"),
            Included(from),
            Unbounded,
            budget,
        )
        .expect("survey");
    let buckets: Vec<_> = s
        .buckets
        .iter()
        .map(|b| series_archive::contract::Bucket {
            sum: sig(b.sum),
            sum_sq: sig(b.sum_sq),
            ..*b
        })
        .collect();
    format!("{:?} {:?}", s.plan, buckets)
}

/// `x` to 12 significant digits: sums may round differently in the last bits when cells
/// merge in another grouping (`docs/format.md`, the merge rule), everything else is exact.
fn sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(11 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// Every row of one run, read back from its origin.
fn run_rows(archive: &Archive, run: &str) -> Vec<(u64, Row)> {
    let batch = archive
        .read_rows("capture", &[run.to_owned()], Unbounded, Unbounded)
        .expect("the run's rows");
    rows_of(&batch)
}

/// What was published of one run, in publish order.
fn of_run(published: &[(u64, Row)], run: &str) -> Vec<(u64, Row)> {
    published
        .iter()
        .filter(|(_, r)| r.run == run)
        .cloned()
        .collect()
}

fn data_files(root: &Path) -> usize {
    walk(&root.join("streams/capture/rows"))
}

/// Entries of `dir`, its Delta log aside (tests/delta_log.rs checks the logs).
fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| e.as_ref().map_or(true, |e| e.file_name() != "_delta_log"))
            .count()
    })
}

/// Every live level table sits at `streams/<id>/levels/level=K/NAME.parquet` with its level
/// in the path and in its entry, a run's tables are adjacent in level order, and no other
/// file is under `levels/`.
fn check_levels_layout(root: &Path, archive: &Archive) {
    let stream = &archive.state().streams["capture"];
    let mut on_disk = Vec::new();
    for entry in std::fs::read_dir(root.join("streams/capture/levels")).expect("levels dir") {
        let entry = entry.expect("entry");
        if entry.file_name() == "_delta_log" {
            continue;
        }
        if entry.path().is_dir() {
            for file in std::fs::read_dir(entry.path()).expect("level dir") {
                on_disk.push(file.expect("file").path());
            }
        } else {
            on_disk.push(entry.path());
        }
    }
    on_disk.sort();
    let mut live: Vec<std::path::PathBuf> =
        stream.levels.iter().map(|f| root.join(&f.path)).collect();
    live.sort();
    assert_eq!(on_disk, live, "exactly the live level files are on disk");
    for f in &stream.levels {
        match f.run {
            Some(run) => {
                let dir = match run.level {
                    Some(level) => format!("streams/capture/levels/level={level}/"),
                    None => "streams/capture/levels/".to_owned(),
                };
                assert_eq!(f.path, format!("{dir}{:012}.parquet", f.name));
                assert!(f.groups.iter().all(|g| g.last_track.is_some()));
            }
            None => assert_eq!(
                f.path,
                format!("streams/capture/levels/{:012}.parquet", f.name)
            ),
        }
    }
}

#[test]
fn raw_rows_retire_by_age_while_levels_still_answer_a_mean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let retention = Retention::forever().raw(Lifetime::Age(Duration::from_secs(2 * 3600)));
    let mut archive = Archive::open(dir.path(), config(&clock, retention)).expect("open");
    let published = fill(&mut archive, &clock, 6, 300);
    let whole = track("run_0", "probe.0");
    let mean_before = archive
        .fold("capture", &whole, Unbounded, Unbounded, Aggregate::Mean)
        .expect("mean");
    let survey_before = survey_text(&archive, 0, 400);
    let files_before = data_files(dir.path());

    // At hour 7, barriers sealed before hour 5 are past two hours.
    let reports = archive.sweep(7 * HOUR).expect("sweep");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].files_deleted, 5, "{reports:?}");
    assert_eq!(data_files(dir.path()), files_before - 5);

    // The raw floor is the first position of the sixth barrier; rows beneath it are refused.
    let floor = 5 * 300 + 1;
    for t in archive.state().streams["capture"].tracks.values() {
        assert_eq!(t.floor(), Position(floor), "{:?}", t.labels);
        assert_eq!(t.groups, 1, "the newest group stays");
    }
    let err = archive
        .read_rows("capture", &[], Unbounded, Unbounded)
        .expect_err("beneath the floor");
    assert!(
        matches!(err, ReadError::Refused(BeneathWindow::Floor { floor: f, axis: None }) if f == Position(floor)),
        "{err:?}"
    );
    let kept: Vec<_> = published
        .iter()
        .filter(|(p, _)| *p >= floor)
        .cloned()
        .collect();
    assert_eq!(all_rows(&archive, Some(floor)), kept);

    // Levels still answer the whole range; a percentile over it is refused at the raw floor.
    let mean_after = archive
        .fold("capture", &whole, Unbounded, Unbounded, Aggregate::Mean)
        .expect("a mean from levels outlives the raw rows");
    assert_eq!(
        format!("{:?}", mean_after.answers),
        format!("{:?}", mean_before.answers)
    );
    assert_eq!(survey_text(&archive, 0, 400), survey_before);
    let p95 = archive
        .fold(
            "capture",
            &whole,
            Unbounded,
            Unbounded,
            Aggregate::parse("p95").expect("p95"),
        )
        .expect_err("a percentile needs the raw rows");
    assert!(
        matches!(p95, ReadError::Floor { tier: "raw", floor: Position(f), .. } if f == floor),
        "{p95:?}"
    );
    // Through the contract the floor keeps its axis, the value an axis range narrows to
    // (before, it carried the position alone); narrowing to it answers.
    struct App;
    impl series_archive::Application for App {}
    let definition = series_archive::Definition::dynamic(
        "capture",
        8,
        ["run".to_owned(), "probe".to_owned()],
        Some("ordinal".to_owned()),
    );
    let p95_kind = Aggregate::parse("p95").expect("p95");
    let refused = futures::executor::block_on(<Archive as series_archive::Series<App>>::aggregate(
        &mut archive,
        definition,
        &whole,
        Unbounded,
        Unbounded,
        p95_kind,
    ));
    let axis = match refused {
        Err(BeneathWindow::Floor {
            floor: f,
            axis: Some(axis),
        }) if f == Position(floor) => axis,
        other => panic!("a fold beneath the raw floor answered {other:?}"),
    };
    archive
        .fold("capture", &whole, Included(axis), Unbounded, p95_kind)
        .expect("narrowed to the axis floor, the percentile answers");

    // Floors only move forward, and survive a reopen.
    assert!(archive.sweep(7 * HOUR).expect("again").is_empty());
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert_eq!(all_rows(&archive, Some(floor)), kept);
    assert!(archive
        .read_rows("capture", &[], Unbounded, Unbounded)
        .is_err());
}

#[test]
fn a_sweep_never_retires_a_tracks_newest_group_and_idle_tracks_retire_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let retention = Retention::forever()
        .raw(Lifetime::Age(Duration::from_secs(1)))
        .idle(Duration::from_secs(10 * 3600));
    let mut archive = Archive::open(dir.path(), config(&clock, retention)).expect("open");
    fill(&mut archive, &clock, 3, 50);
    // Only run_1 keeps publishing.
    for b in 3..6u64 {
        clock.set(b * HOUR);
        let (rows, positions) = workload(2, 2, 50, b * 50);
        let (rows, positions): (Vec<Row>, Vec<u64>) = rows
            .into_iter()
            .zip(positions)
            .filter(|(r, _)| r.run == "run_1")
            .unzip();
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
    }
    archive.sweep(6 * HOUR).expect("sweep");
    let tracks = &archive.state().streams["capture"].tracks;
    for t in tracks.values() {
        assert_eq!(t.groups, 1, "{:?} keeps its newest group", t.labels);
        assert!(!t.whole);
    }
    // Twelve hours after run_0 went quiet (its last barrier at hour 2), it retires whole.
    let reports = archive.sweep(13 * HOUR).expect("sweep");
    assert_eq!(
        reports.iter().map(|r| r.whole).sum::<usize>(),
        2,
        "{reports:?}"
    );
    let run0 = archive
        .read_rows("capture", &["run_0".into()], Unbounded, Unbounded)
        .expect_err("retired");
    assert!(
        matches!(run0, ReadError::Refused(BeneathWindow::Floor { .. })),
        "{run0:?}"
    );
    let run1 = archive
        .read_rows(
            "capture",
            &["run_1".into()],
            Included(Position(5 * 50 + 1)),
            Unbounded,
        )
        .expect("run_1 lives");
    assert_eq!(run1.num_rows(), 2 * 50);
}

#[test]
fn retire_track_is_explicit_and_leaves_other_tracks_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let mut archive =
        Archive::open(dir.path(), config(&clock, Retention::forever())).expect("open");
    let published = fill(&mut archive, &clock, 3, 100);
    let report = archive
        .retire_track("capture", &["run_0".into()])
        .expect("retire")
        .expect("something retired");
    assert_eq!((report.tracks, report.whole), (2, 2));
    assert!(archive
        .retire_track("capture", &["run_0".into()])
        .expect("again")
        .is_none());
    // Survey and rows of run_0 are refused at its floor; run_1 reads whole from the origin.
    let s = archive.survey(
        "capture",
        &track("run_0", "probe.0"),
        Unbounded,
        Unbounded,
        400,
    );
    assert!(
        matches!(s, Err(ReadError::Floor { tier: "levels", .. })),
        "{s:?}"
    );
    assert_eq!(run_rows(&archive, "run_1"), of_run(&published, "run_1"));
    // Compaction drops run_0's groups for good; the floors hold across a reopen.
    archive.compact(true, |_, _, _| {}).expect("compact");
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    let t = &archive.state().streams["capture"].tracks;
    assert!(t
        .values()
        .filter(|t| t.labels[0] == "run_0")
        .all(|t| t.whole && t.groups == 0));
    assert_eq!(
        data_files(dir.path()),
        1,
        "one packed file of the live tracks"
    );
    assert!(archive.state().streams["capture"].files[0].holds_several_tracks());
    // A retired track may come back: its new rows are served above its floor.
    drop(archive);
    let mut archive =
        Archive::open(dir.path(), config(&clock, Retention::forever())).expect("reopen");
    let (rows, positions) = workload(2, 2, 10, 1000);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal");
    let back = archive
        .read_rows(
            "capture",
            &["run_0".into()],
            Included(Position(1001)),
            Unbounded,
        )
        .expect("back");
    assert_eq!(back.num_rows(), 20);
}

#[test]
fn compaction_is_equal_row_for_row_and_cell_for_cell_and_bounds_the_file_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let mut archive =
        Archive::open(dir.path(), config(&clock, Retention::forever())).expect("open");
    let published = fill(&mut archive, &clock, 40, 64);
    // Every survey budget and every statistic of one track, as text: what compaction keeps.
    let answers = |archive: &Archive| -> Vec<String> {
        let surveys = [16, 64, 400, 4000]
            .into_iter()
            .map(|b| survey_text(archive, 0, b));
        let stats = ["mean", "min", "max", "sum", "count", "p50", "p95"].map(|a| {
            let kind = Aggregate::parse(a).expect(a);
            let whole = track("run_1", "probe.1");
            let f = archive
                .fold("capture", &whole, Unbounded, Unbounded, kind)
                .expect("fold");
            let answers: Vec<_> = f
                .answers
                .iter()
                .map(|a| (a.field, a.count, a.value.map(sig)))
                .collect();
            format!("{answers:?}")
        });
        surveys.chain(stats).collect()
    };
    let before = answers(&archive);
    assert_eq!(data_files(dir.path()), 40);
    assert_eq!(walk(&dir.path().join("streams/capture/levels")), 40);

    // The automatic compaction: every barrier file into one packed file at once; the
    // 40 barriers' level partials merged size-tiered, four runs at a time, as a base-4 counter
    // counts 40 (= 2·16 + 2·4): two runs of tier 2 and two of tier 1 stay.
    let reports = archive.compact(false, |_, _, _| {}).expect("compact");
    let sum = |f: fn(&series_archive::archive::lifecycle::CompactReport) -> usize| {
        reports.iter().map(f).sum::<usize>()
    };
    assert_eq!((sum(|r| r.files_in), sum(|r| r.files_out)), (40, 1));
    // Ten jobs: eight carries of four partials, and two that cascade into tier 2.
    assert_eq!(reports.len(), 10, "{reports:?}");
    assert!(reports.iter().all(|r| r.level_bytes_out < r.level_bytes_in));
    assert_eq!(
        data_files(dir.path()),
        1,
        "one packed file of the four tracks"
    );
    let tiers = |archive: &Archive| -> Vec<u8> {
        series_archive::archive::lifecycle::plan::level_runs(
            &archive.state().streams["capture"].levels,
        )
        .iter()
        .map(|r| r.tier)
        .collect()
    };
    assert_eq!(tiers(&archive), [2, 2, 1, 1]);
    check_levels_layout(dir.path(), &archive);
    // A forced compaction merges every run into one: a table per level.
    archive.compact(true, |_, _, _| {}).expect("compact");
    assert_eq!(tiers(&archive), [3]);
    let ladder = archive.state().streams["capture"]
        .decl
        .ladder
        .expect("ladder");
    assert_eq!(
        archive.state().streams["capture"].levels.len(),
        ladder.levels as usize
    );
    check_levels_layout(dir.path(), &archive);

    let check = |archive: &Archive| {
        assert_eq!(all_rows(archive, None), published, "rows, in publish order");
        assert_eq!(answers(archive), before);
        assert!(archive.verify(|_, _| {}).is_empty());
    };
    check(&archive);
    // New rows of less than a quarter of a file's bytes: compaction leaves the packed file
    // alone and writes the new rows beside it (size-tiered); more, and they merge.
    let more = fill_from(&mut archive, &clock, 640, 1, 4);
    let mut published = published;
    published.extend(more);
    archive.compact(true, |_, _, _| {}).expect("compact");
    assert_eq!(data_files(dir.path()), 2);
    assert_eq!(all_rows(&archive, None), published);
    let more = fill_from(&mut archive, &clock, 641, 40, 64);
    published.extend(more);
    archive.compact(true, |_, _, _| {}).expect("compact");
    assert_eq!(data_files(dir.path()), 1);
    assert_eq!(all_rows(&archive, None), published);
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert_eq!(all_rows(&archive, None), published);
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
}

fn fill_from(
    archive: &mut Archive,
    clock: &Hand,
    first: u64,
    barriers: u64,
    ticks: u64,
) -> Vec<(u64, Row)> {
    let mut all = Vec::new();
    for b in first..first + barriers {
        clock.set(b * HOUR);
        let (rows, positions) = workload(2, 2, ticks, b * ticks);
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        all.extend(positions.into_iter().zip(rows));
    }
    all
}

#[test]
fn a_compaction_runs_beside_sealing_and_one_overtaken_by_a_retirement_is_discarded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let mut archive =
        Archive::open(dir.path(), config(&clock, Retention::forever())).expect("open");
    let mut published = fill(&mut archive, &clock, 20, 32);
    let job = archive
        .plan_compaction("capture", true)
        .expect("plan")
        .expect("a job");
    // The job runs on another thread while barriers keep coming.
    let worker = std::thread::spawn(move || job.run(|_, _| {}));
    published.extend(fill_from(&mut archive, &clock, 20, 3, 32));
    let files = worker.join().expect("join").expect("run");
    archive
        .finish_compaction(files)
        .expect("finish")
        .expect("recorded");
    assert_eq!(all_rows(&archive, None), published);
    assert_eq!(
        data_files(dir.path()),
        1 + 3,
        "the packed file plus the barriers sealed meanwhile"
    );

    // A retirement between plan and finish: the swap is refused, its files removed.
    let job = archive
        .plan_compaction("capture", true)
        .expect("plan")
        .expect("job");
    let files = job.run(|_, _| {}).expect("run");
    archive
        .retire_track("capture", &["run_0".into()])
        .expect("retire");
    assert!(archive.finish_compaction(files).expect("finish").is_none());
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
    assert_eq!(run_rows(&archive, "run_1"), of_run(&published, "run_1"));
}

#[test]
fn level_floors_follow_their_own_lifetimes_and_compaction_drops_retired_cells() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    // Ticks advance the axis by 10; 3 000 ticks a barrier = 30 000 axis units (about 29
    // level-0 cells of 1 024).
    let retention = Retention::forever()
        .raw(Lifetime::Age(Duration::from_secs(3600)))
        .level(0, Lifetime::Behind(60_000));
    let mut archive = Archive::open(dir.path(), config(&clock, retention)).expect("open");
    fill(&mut archive, &clock, 5, 3000);
    archive.sweep(5 * HOUR).expect("sweep");
    let t = &archive.state().streams["capture"].tracks;
    let t0 = t.values().next().expect("a track");
    let last = t0.last_axis.expect("axis");
    let floor0 = t0.level_floor(0);
    assert_eq!(floor0.axis, (last - 60_000) / 1024 * 1024);
    assert_eq!(t0.level_floor(1).axis, 0, "level 1 lives forever");
    let whole = track("run_0", "probe.0");
    // A mean over the whole range comes from level 1 (level 0 is retired beneath its floor).
    let mean = archive
        .fold("capture", &whole, Unbounded, Unbounded, Aggregate::Mean)
        .expect("from level 1");
    assert_eq!(mean.source, "level 1");
    // From level 0's floor up, level 0 answers again.
    let mean = archive
        .fold(
            "capture",
            &whole,
            Included(floor0.axis),
            Unbounded,
            Aggregate::Mean,
        )
        .expect("level 0");
    assert_eq!(mean.source, "level 0");
    // A fine survey beneath level 0's floor plans a coarser level instead of refusing.
    let s = archive
        .survey("capture", &whole, Unbounded, Unbounded, 100_000)
        .expect("survey");
    assert!(s.plan.expect("plan").level >= 1, "{:?}", s.plan);
    let before = survey_text(&archive, floor0.axis, 100_000);
    let level_bytes = |a: &Archive| {
        a.state().streams["capture"]
            .levels
            .iter()
            .map(|f| f.bytes)
            .sum::<u64>()
    };
    let bytes_before = level_bytes(&archive);
    archive.compact(true, |_, _, _| {}).expect("compact");
    assert!(level_bytes(&archive) < bytes_before);
    assert_eq!(survey_text(&archive, floor0.axis, 100_000), before);
}

#[test]
fn a_checkpoint_starts_a_generation_from_the_live_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let retention = Retention::forever().raw(Lifetime::Age(Duration::from_secs(3600)));
    let config = || {
        config(&clock, retention.clone())
            .checkpoint_bytes(64 << 10)
            .compaction(Compaction {
                min_inputs: 4,
                ..Compaction::default()
            })
    };
    let mut archive = Archive::open(dir.path(), config()).expect("open");
    let mut published = Vec::new();
    let mut checkpoints = 0;
    for b in 0..60u64 {
        published.extend(fill_from(&mut archive, &clock, b, 1, 16));
        let done = archive.maintain(b * HOUR).expect("maintain");
        checkpoints += usize::from(done.checkpoint.is_some());
        assert!(archive.manifest_bytes() <= 64 << 10 || done.checkpoint.is_none());
    }
    assert!(checkpoints >= 1, "the manifest passed 64 KiB at least once");
    let generations = walk(&dir.path().join("manifest"));
    assert_eq!(generations, 1, "the old generation is removed");
    let floor = archive.state().streams["capture"]
        .tracks
        .values()
        .map(|t| t.floor())
        .max()
        .expect("tracks");
    let expected: Vec<_> = published
        .iter()
        .filter(|(p, _)| *p >= floor.0)
        .cloned()
        .collect();
    let state = archive.state().clone();
    drop(archive);
    let archive = Archive::open(dir.path(), config()).expect("reopen");
    assert_eq!(archive.state().streams, state.streams);
    assert_eq!(all_rows(&archive, Some(floor.0)), expected);
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
}

/// A track nothing was retired of keeps the age marks its live files give, in the writer as
/// in every reopen: a compaction merging barriers of several hours and a checkpoint leave
/// the writer's catalog exactly what an open from that checkpoint rebuilds (before, the
/// writer kept the hourly marks of the compacted barriers and a reopen did not, so the two
/// would have retired the track at different times). Slices of 16 rows: format-9 files.
#[test]
fn a_reopen_after_a_compaction_and_a_checkpoint_holds_the_writers_age_marks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let config = || config(&clock, Retention::forever());
    let mut archive = Archive::open(dir.path(), config()).expect("open");
    fill(&mut archive, &clock, 4, 16);
    let marks = |archive: &Archive| -> Vec<usize> {
        archive.state().streams["capture"]
            .tracks
            .values()
            .map(|t| t.marks.len())
            .collect()
    };
    assert_eq!(
        marks(&archive),
        vec![4; 4],
        "a mark an hour before compacting"
    );
    archive.compact(true, |_, _, _| {}).expect("compact");
    archive.checkpoint().expect("checkpoint");
    assert_eq!(
        marks(&archive),
        vec![1; 4],
        "the output's mark: sealed when its newest input was"
    );
    let state = archive.state().streams.clone();
    drop(archive);
    let reopened = Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
    assert_eq!(reopened.state().streams, state);
}

/// Raw rows kept forever and level 0 retired by age: a forced compaction still cuts its
/// segments at an eighth of the level's lifetime of sealing time, so the level's cells retire
/// on time afterwards. (A segment merging every barrier would be sealed when its newest rows
/// were, and hold the cells back until they are old, for ever under repeated compactions.)
#[test]
fn a_level_age_lifetime_cuts_compaction_by_sealing_time_so_its_cells_still_retire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let retention = Retention::forever().level(0, Lifetime::Age(Duration::from_secs(8 * 3600)));
    let mut archive = Archive::open(dir.path(), config(&clock, retention)).expect("open");
    // Barrier b at hour b, ticks 16b .. 16b + 15 (axis 10 a tick): level-0 cell [0, 1024)
    // holds rows of barriers 0-6.
    let published = fill(&mut archive, &clock, 8, 16);
    archive.compact(true, |_, _, _| {}).expect("compact");
    let files = archive.state().streams["capture"].files.len();
    assert_eq!(
        files, 8,
        "one segment per hour of sealing (an eighth of 8 h)"
    );
    // At 14 h, rows sealed by 6 h are past the level's age: the first cell retires.
    archive.sweep(14 * HOUR).expect("sweep");
    for t in archive.state().streams["capture"].tracks.values() {
        assert_eq!(t.level_floor(0).axis, 1024, "{:?}", t.labels);
        assert_eq!(t.floor(), Position(0), "raw rows live forever");
    }
    assert_eq!(all_rows(&archive, None), published);
}

#[test]
fn compaction_cuts_segments_at_retention_slices_so_retention_still_retires_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    // Age 8 h: segments are cut at each hour of sealing time (an eighth of the lifetime).
    let retention = Retention::forever().raw(Lifetime::Age(Duration::from_secs(8 * 3600)));
    let mut archive = Archive::open(dir.path(), config(&clock, retention)).expect("open");
    let mut published = Vec::new();
    for b in 0..16u64 {
        clock.set(b * HOUR / 4);
        let (rows, positions) = workload(2, 2, 25, b * 25);
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        published.extend(positions.into_iter().zip(rows));
    }
    archive.compact(true, |_, _, _| {}).expect("compact");
    assert_eq!(
        data_files(dir.path()),
        4,
        "4 hours of sealing, each one packed file of the 4 tracks"
    );
    assert!(archive.state().streams["capture"]
        .files
        .iter()
        .all(|f| f.holds_several_tracks()));
    // Nothing new to join: a second compaction leaves every file alone.
    assert!(archive
        .compact(true, |_, _, _| {})
        .expect("again")
        .is_empty());
    // At hour 10 the segments of hours 0 and 1 are past eight hours.
    let reports = archive.sweep(10 * HOUR).expect("sweep");
    assert_eq!(reports[0].files_deleted, 2, "{reports:?}");
    let floor = 8 * 25 + 1;
    let kept: Vec<_> = published
        .iter()
        .filter(|(p, _)| *p >= floor)
        .cloned()
        .collect();
    assert_eq!(all_rows(&archive, Some(floor)), kept);
}

#[test]
fn a_maintainer_compacts_on_its_own_threads_while_barriers_keep_sealing() {
    use series_archive::archive::lifecycle::Maintainer;
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let config = config(&clock, Retention::forever()).compaction(Compaction {
        min_inputs: 8,
        ..Compaction::default()
    });
    let mut archive = Archive::open(dir.path(), config).expect("open");
    let mut maintainer = Maintainer::new();
    let mut published = Vec::new();
    let (mut started, mut recorded) = (0, 0);
    for b in 0..64u64 {
        published.extend(fill_from(&mut archive, &clock, b, 1, 32));
        let before = maintainer.running();
        let done = maintainer.step(&mut archive, b * HOUR).expect("step");
        recorded += done.compacted.len();
        started += usize::from(maintainer.running() > before.saturating_sub(done.compacted.len()));
        // Every barrier is readable at once, whatever is in flight.
        assert_eq!(all_rows(&archive, None).len(), published.len());
    }
    recorded += maintainer.finish(&mut archive).expect("finish").len();
    assert!(
        started >= 4 && recorded >= 4,
        "started {started}, recorded {recorded}"
    );
    assert_eq!(all_rows(&archive, None), published);
    let files = data_files(dir.path());
    assert!(files < 64 / 2, "{files} data files after 64 barriers");
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
    assert_eq!(all_rows(&archive, None), published);
}

/// Compaction streams its sources into pieces of exactly `group_rows` rows a track (rows of
/// consecutive barriers join; only a track's last piece is short), packed into row groups of
/// at most `group_rows` rows, and the rows read back unchanged.
#[test]
fn compaction_streams_sources_into_full_row_groups() {
    use series_archive::archive::lifecycle::Compaction;
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let config = config(&clock, Retention::forever()).compaction(Compaction {
        group_rows: 100,
        ..Compaction::default()
    });
    let mut archive = Archive::open(dir.path(), config).expect("open");
    // 10 barriers of 30 ticks: 30 rows a track each, 300 a track in all.
    let published = fill(&mut archive, &clock, 10, 30);
    archive.compact(true, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["capture"];
    assert_eq!(stream.files.len(), 1, "one packed file of the four tracks");
    for file in &stream.files {
        let rows: Vec<u64> = file.groups.iter().map(|g| g.rows).collect();
        assert_eq!(rows, [100; 12], "{}", file.path);
        assert!(file.row_groups().iter().all(|g| g.2 == 100));
        for pair in file.groups.windows(2) {
            assert!(pair[0].track != pair[1].track || pair[0].seq[1] < pair[1].seq[0]);
        }
    }
    assert_eq!(all_rows(&archive, None), published);
    assert!(archive.verify(|_, _| {}).is_empty());
}

/// A level table larger than one row group: level 0 of a fine ladder holds more than 16 384
/// cells, so the forced compaction streams it as several groups, each bounded, each naming
/// its first and last track, covering the cells in key and cell order; every survey and
/// level fold answers as before.
#[test]
fn a_large_level_table_spans_bounded_row_groups_and_answers_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let ladder = series_archive::archive::Ladder::new(1, 4, 2).expect("ladder");
    let config = Config::new()
        .stream(common::capture_spec().with_ladder(Some(ladder)))
        .clock(clock.clone());
    let mut archive = Archive::open(dir.path(), config).expect("open");
    // 4 tracks × 18 000 ticks: 72 000 level-0 cells a field, over 18 barriers of 4 000 rows,
    // each too few to decide a first stored level (docs/format.md, "Sparse levels"), so the
    // stream stores level 0 however sparse its cells are.
    fill(&mut archive, &clock, 18, 1_000);
    assert_eq!(archive.state().streams["capture"].levels_from, None);
    let answers = |archive: &Archive| -> Vec<String> {
        let mut out: Vec<String> = [16, 400, 100_000]
            .into_iter()
            .map(|b| survey_text(archive, 0, b))
            .collect();
        let f = archive
            .fold("capture", &[], Unbounded, Unbounded, Aggregate::Mean)
            .expect("fold");
        out.push(format!("{:?}", f.answers));
        out
    };
    let before = answers(&archive);
    archive.compact(true, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["capture"];
    let table = stream
        .levels
        .iter()
        .find(|f| f.run.and_then(|r| r.level) == Some(0))
        .expect("a level-0 table");
    assert!(table.groups.len() >= 3, "{} groups", table.groups.len());
    assert!(table.groups.iter().all(|g| g.rows <= 16_384));
    let total: u64 = table.groups.iter().map(|g| g.rows).sum();
    assert_eq!(total, 4 * 18_000 * 2, "one row per track, field and cell");
    for pair in table.groups.windows(2) {
        let last = pair[0].last_track.as_ref().expect("last track");
        assert!(last[..] <= pair[1].track[..], "groups in key order");
    }
    assert_eq!(answers(&archive), before);
}

#[test]
fn a_checkpoint_costs_a_share_of_what_was_appended_even_when_the_state_is_past_the_size() {
    // A manifest size (1 KiB) the live state soon outgrows, as a fleet's outgrows the default:
    // a checkpoint after every barrier would write the whole state each time. A generation is
    // checkpointed once the records appended to it pass its snapshot's size (and the
    // configured one), so the snapshots written add up to about what was appended; or, after
    // a compaction, once the log is twice the live state.
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    // Data files are never compacted here (level runs still merge), so the state grows.
    let config = config(&clock, Retention::forever())
        .checkpoint_bytes(1 << 10)
        .compaction(Compaction {
            min_inputs: usize::MAX,
            ..Compaction::default()
        });
    let mut archive = Archive::open(dir.path(), config).expect("open");
    let mut snapshot = archive.manifest_bytes();
    let (mut checkpoints, mut appended_in_all, mut written) = (0, 0, 0);
    for b in 0..80u64 {
        fill_from(&mut archive, &clock, b, 1, 4);
        let before = archive.manifest_bytes();
        let done = archive.maintain(b * HOUR).expect("maintain");
        let appended = before - snapshot;
        if done.checkpoint.is_some() {
            checkpoints += 1;
            appended_in_all += appended;
            snapshot = archive.manifest_bytes();
            written += snapshot;
        } else {
            // Never left longer than the size rule says.
            assert!(
                appended <= snapshot.max(1 << 10),
                "barrier {b}: {appended} bytes appended to a snapshot of {snapshot} and no checkpoint"
            );
        }
    }
    // Past 1 KiB from the first barriers on, and still checkpointed as it grew; the snapshots
    // written add up to no more than twice the records they replaced (a checkpoint after every
    // barrier would write the whole state 80 times over).
    assert!(snapshot > 8 << 10, "the state grew to {snapshot} bytes");
    assert!(checkpoints >= 4, "{checkpoints} checkpoints");
    assert!(
        written <= 2 * appended_in_all,
        "{checkpoints} checkpoints wrote {written} bytes of snapshots for {appended_in_all} bytes appended"
    );
    // And what the checkpoints wrote is still the archive.
    let state = archive.state().clone();
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert_eq!(archive.state().streams, state.streams);
}
