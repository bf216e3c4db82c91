//! Survey latency at a budget of 400 points over archives of a given size (criterion).
//!
//! ```sh
//! cargo bench --bench survey                                            # 1 000 000 rows
//! SERIES_ARCHIVE_BENCH_ROWS=1000000,10000000,50000000 cargo bench --bench survey
//! ```
//!
//! For each size in `SERIES_ARCHIVE_BENCH_ROWS` (a comma list of row counts, multiples of 16;
//! default `1000000`), an archive is built under `target/bench-data/survey-<rows>/` through the
//! library (or reused when it already holds exactly that many rows in 16 tracks): the demo's
//! capture workload with 4 runs × 4 probes, one row per track per tick, an ordinal axis
//! `tick × 4 + jitter`, an i64 random walk `value` and a float `noise`, staged with
//! `stage_batch` on a dynamic stream and sealed every 500 000 rows, default ladder
//! (`1024, 8, 8`).
//!
//! Then, for one whole track (`run_0`, `probe.00`, unbounded range):
//!
//! - `survey_warm/budget_400/<rows>_rows`: the archive opened read-only once, one survey to
//!   build the level view, then surveys;
//! - `survey_cold/open_and_first_survey/<rows>_rows`: a fresh read-only `Archive::open` and its
//!   first survey (which builds the level view from every level file, digests verified) per
//!   iteration; dropping the archive is not timed. The OS page cache is warm: this is a cold
//!   process-side state, not a cold disk;
//! - `fold_warm/mean/<rows>_rows`: `fold` Mean from level-0 cells, level view built;
//! - `fold_warm/p95/<rows>_rows`: `fold` p95, which scans the raw values of the track.
//!
//! `scripts/bench_survey.py` puts these figures beside DuckDB's M4 over the same files.

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use series_archive::archive::{Archive, Config, StreamSpec};
use series_archive::Aggregate;
use std::hint::black_box;
use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STREAM: &str = "capture";
const RUNS: usize = 4;
const PROBES: usize = 4;
const TRACKS: usize = RUNS * PROBES;
/// Rows per barrier (a whole number of ticks: 31 250 ticks × 16 tracks).
const SEAL_ROWS: u64 = 500_000;
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

/// `target/bench-data`, under `CARGO_TARGET_DIR` when it is set.
fn data_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("bench-data")
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::Utf8, false),
        Field::new("probe", DataType::Utf8, false),
        Field::new("ordinal", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
        Field::new("noise", DataType::Float64, false),
    ]))
}

/// The capture stream, declared at run time, with the default ladder.
fn spec() -> StreamSpec {
    StreamSpec::dynamic(
        STREAM,
        schema(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("a valid declaration")
}

/// SplitMix64, as in the demo: reproducible workloads.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Whether `dir` already holds the archive this size asks for.
fn holds(dir: &Path, rows: u64) -> bool {
    if !dir.join("manifest").is_dir() {
        return false;
    }
    let Ok(archive) = Archive::open(dir, Config::new().read_only(true)) else {
        return false;
    };
    let Ok(description) = archive.describe() else {
        return false;
    };
    description.streams.iter().any(|s| {
        s.id == STREAM
            && s.rows == rows
            && s.tracks.len() == TRACKS
            && s.tracks.iter().all(|t| t.rows == rows / TRACKS as u64)
    })
}

/// Builds (or reuses) the archive of `rows` rows.
fn ensure(rows: u64) -> PathBuf {
    let dir = data_root().join(format!("survey-{rows}"));
    if holds(&dir, rows) {
        eprintln!("bench: reusing {} ({rows} rows)", dir.display());
        return dir;
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove a stale bench archive");
    }
    std::fs::create_dir_all(&dir).expect("create the bench archive directory");
    eprintln!("bench: building {} ({rows} rows) ...", dir.display());
    let began = Instant::now();
    let mut archive =
        Archive::open(&dir, Config::new().stream(spec())).expect("open the bench archive");
    let runs: Vec<String> = (0..RUNS).map(|r| format!("run_{r}")).collect();
    let probes: Vec<String> = (0..PROBES).map(|p| format!("probe.{p:02}")).collect();
    let ticks = rows / TRACKS as u64;
    let per_barrier = SEAL_ROWS / TRACKS as u64;
    let mut mix = Mix(0x5eed);
    let mut walk = [0i64; TRACKS];
    let mut tick = 0;
    while tick < ticks {
        let end = (tick + per_barrier).min(ticks);
        let n = ((end - tick) as usize) * TRACKS;
        let (mut run, mut probe) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut ordinal, mut value, mut noise) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut positions = Vec::with_capacity(n);
        for t in tick..end {
            for (r, run_label) in runs.iter().enumerate() {
                for (p, probe_label) in probes.iter().enumerate() {
                    let i = r * PROBES + p;
                    let m = mix.next();
                    walk[i] += (m % 7) as i64 - 3;
                    run.push(run_label.as_str());
                    probe.push(probe_label.as_str());
                    // An ordinal axis with gaps: some ticks skip ahead.
                    ordinal.push(t * 4 + (m >> 60) % 4);
                    value.push(walk[i]);
                    noise.push(
                        ((m >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0
                            + (t as f64 / 500.0).sin(),
                    );
                    // Every row of a tick shares its position.
                    positions.push(t + 1);
                }
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(run)),
            Arc::new(StringArray::from(probe)),
            Arc::new(UInt64Array::from(ordinal)),
            Arc::new(Int64Array::from(value)),
            Arc::new(Float64Array::from(noise)),
        ];
        let batch = RecordBatch::try_new(schema(), columns).expect("a valid batch");
        archive
            .stage_batch(STREAM, &batch, &positions)
            .expect("stage a barrier's rows");
        archive.seal_all().expect("seal").expect("a barrier");
        tick = end;
        let done = tick * TRACKS as u64;
        if done.is_multiple_of(10 * SEAL_ROWS) || tick == ticks {
            eprintln!(
                "bench:   {done} / {rows} rows durable after {:.1?}",
                began.elapsed()
            );
        }
    }
    drop(archive);
    assert!(
        holds(&dir, rows),
        "the archive just built holds {rows} rows"
    );
    eprintln!("bench: built {} in {:.1?}", dir.display(), began.elapsed());
    dir
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
        let first = archive
            .survey(STREAM, &track, Unbounded, Unbounded, BUDGET)
            .expect("survey");
        let plan = first.plan.expect("the track holds rows");
        eprintln!(
            "bench: {rows} rows: survey of ({}) at budget {BUDGET}: level {}, cell width {}, cells {:?}, {} buckets",
            track.join(", "),
            plan.level,
            plan.cell_width,
            plan.cells,
            first.buckets.len()
        );
        warm.bench_function(
            BenchmarkId::new("budget_400", format!("{rows}_rows")),
            |b| {
                b.iter(|| {
                    archive
                        .survey(STREAM, black_box(&track), Unbounded, Unbounded, BUDGET)
                        .expect("survey")
                })
            },
        );
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
