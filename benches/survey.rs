//! Survey latency at a budget of 400 points (and others) over archives of a given size (criterion).
//!
//! ```sh
//! cargo bench --bench survey                                            # 1 000 000 rows
//! SERIES_ARCHIVE_BENCH_ROWS=1000000,10000000,50000000 cargo bench --bench survey
//! ```
//!
//! For each size in `SERIES_ARCHIVE_BENCH_ROWS` (a comma list of row counts, multiples of 16;
//! default `1000000`), an archive is built under `target/bench-data/survey-<rows>/` through the
//! library (`benches/common/mod.rs`, shared with `benches/archive.rs`), or reused when it
//! already holds exactly that many rows in 16 tracks: the demo's capture workload with 4 runs
//! × 4 probes, one row per track per tick, an ordinal axis `tick × 4 + jitter`, an i64 random walk `value` and a float `noise`, staged with
//! `stage_batch` on a dynamic stream and sealed every 500 000 rows, default ladder
//! (`1024, 8, 8`).
//!
//! Then, for one whole track (`run_0`, `probe.00`, unbounded range):
//!
//! - `survey_warm/budget_<B>/<rows>_rows`: the archive opened read-only once, one survey to
//!   build the level view, then surveys at budget B, for each B in
//!   `SERIES_ARCHIVE_BENCH_BUDGETS` (a comma list; default `100,400,1600`);
//! - `survey_cold/open_and_first_survey/<rows>_rows`: a fresh read-only `Archive::open` and its
//!   first survey (which builds the level view from every level file, digests verified) per
//!   iteration; dropping the archive is not timed. The OS page cache is warm: this is a cold
//!   process-side state, not a cold disk;
//! - `fold_warm/mean/<rows>_rows`: `fold` Mean from level-0 cells, level view built;
//! - `fold_warm/p95/<rows>_rows`: `fold` p95, which scans the raw values of the track.
//!
//! `scripts/bench_survey.py` puts these figures beside DuckDB's M4 over the same files.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use series_archive::archive::{Archive, Config};
use series_archive::Aggregate;
use std::hint::black_box;
use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;
use common::STREAM;

const RUNS: usize = 4;
const PROBES: usize = 4;
const TRACKS: usize = RUNS * PROBES;
/// Rows per barrier (a whole number of ticks: 31 250 ticks × 16 tracks).
const SEAL_ROWS: u64 = 500_000;
/// The budget of the survey figures `scripts/bench_survey.py` reads.
const BUDGET: usize = 400;

/// The surveyed track: the first run's first probe.
fn track() -> Vec<String> {
    vec!["run_0".to_owned(), "probe.00".to_owned()]
}

/// The archive sizes to measure, from `SERIES_ARCHIVE_BENCH_ROWS`.
fn sizes() -> Vec<u64> {
    let text = std::env::var("SERIES_ARCHIVE_BENCH_ROWS").unwrap_or_else(|_| "1000000".to_owned());
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let rows: u64 = s.replace('_', "").parse().unwrap_or_else(|_| {
                panic!("SERIES_ARCHIVE_BENCH_ROWS: {s:?} is not a row count (e.g. 1000000,10000000)")
            });
            assert!(
                rows > 0 && rows.is_multiple_of(TRACKS as u64),
                "SERIES_ARCHIVE_BENCH_ROWS: {rows} is not a positive multiple of {TRACKS} (one row per track per tick)"
            );
            rows
        })
        .collect()
}

/// The surveyed budgets, from `SERIES_ARCHIVE_BENCH_BUDGETS` (default `100,400,1600`).
fn budgets() -> Vec<usize> {
    let text =
        std::env::var("SERIES_ARCHIVE_BENCH_BUDGETS").unwrap_or_else(|_| "100,400,1600".to_owned());
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("SERIES_ARCHIVE_BENCH_BUDGETS: {s:?} is not a budget"))
        })
        .collect()
}

/// Builds (or reuses) the archive of `rows` rows.
fn ensure(rows: u64) -> PathBuf {
    common::ensure(
        &common::data_root().join(format!("survey-{rows}")),
        RUNS,
        PROBES,
        rows / TRACKS as u64,
        SEAL_ROWS / TRACKS as u64,
    )
}

fn open(dir: &Path) -> Archive {
    Archive::open(dir, Config::new().read_only(true)).expect("open read-only")
}

fn benches(c: &mut Criterion) {
    let archives: Vec<(u64, PathBuf)> = sizes().into_iter().map(|r| (r, ensure(r))).collect();
    let track = track();

    let mut warm = c.benchmark_group("survey_warm");
    for (rows, dir) in &archives {
        let archive = open(dir);
        for budget in budgets() {
            let first = archive
                .survey(STREAM, &track, Unbounded, Unbounded, budget)
                .expect("survey");
            let plan = first.plan.expect("the track holds rows");
            eprintln!(
                "bench: {rows} rows: survey of ({}) at budget {budget}: level {}, cell width {}, cells {:?}, {} buckets",
                track.join(", "),
                plan.level,
                plan.cell_width,
                plan.cells,
                first.buckets.len()
            );
            warm.bench_function(
                BenchmarkId::new(format!("budget_{budget}"), format!("{rows}_rows")),
                |b| {
                    b.iter(|| {
                        archive
                            .survey(STREAM, black_box(&track), Unbounded, Unbounded, budget)
                            .expect("survey")
                    })
                },
            );
        }
    }
    warm.finish();

    let mut cold = c.benchmark_group("survey_cold");
    cold.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    for (rows, dir) in &archives {
        cold.bench_function(
            BenchmarkId::new("open_and_first_survey", format!("{rows}_rows")),
            |b| {
                b.iter_with_large_drop(|| {
                    let archive = open(black_box(dir));
                    let survey = archive
                        .survey(STREAM, &track, Unbounded, Unbounded, BUDGET)
                        .expect("survey");
                    (archive, survey)
                })
            },
        );
    }
    cold.finish();

    let mut fold = c.benchmark_group("fold_warm");
    for (rows, dir) in &archives {
        let archive = open(dir);
        for (name, kind) in [
            ("mean", Aggregate::Mean),
            ("p95", Aggregate::percentile(95)),
        ] {
            let first = archive
                .fold(STREAM, &track, Unbounded, Unbounded, kind)
                .expect("fold");
            eprintln!(
                "bench: {rows} rows: {kind} of ({}) from {}: {:?}",
                track.join(", "),
                first.source,
                first.answers.iter().map(|a| a.value).collect::<Vec<_>>()
            );
            if kind.folds_levels() {
                // About a millisecond at 50M rows: 100 linear samples need ~6 s.
                fold.sample_size(100)
                    .sampling_mode(SamplingMode::Auto)
                    .measurement_time(Duration::from_secs(8));
            } else {
                // A raw scan of the whole track: tens to hundreds of milliseconds.
                fold.sample_size(10)
                    .sampling_mode(SamplingMode::Flat)
                    .measurement_time(Duration::from_secs(10));
            }
            fold.bench_function(BenchmarkId::new(name, format!("{rows}_rows")), |b| {
                b.iter(|| {
                    archive
                        .fold(STREAM, black_box(&track), Unbounded, Unbounded, kind)
                        .expect("fold")
                })
            });
        }
    }
    fold.finish();
}

criterion_group!(survey, benches);
criterion_main!(survey);
