//! The library's own figures beside the floor (criterion): rows/s staged and sealed against
//! `ArrowWriter` on the same batches, `rows` rows/s on the Arrow and the typed path, and
//! open time by number of barriers and tracks.
//!
//! ```sh
//! cargo bench --bench archive                       # a few minutes on 2 cores
//! cargo bench --bench archive -- seal               # one group
//! SERIES_ARCHIVE_BENCH_SEAL=2000000 SERIES_ARCHIVE_BENCH_CADENCE=500000 cargo bench --bench archive -- seal
//! ```
//!
//! Knobs (environment):
//!
//! - `SERIES_ARCHIVE_BENCH_SEAL` (default `400000`): rows per measured ingest, and
//!   `SERIES_ARCHIVE_BENCH_CADENCE` (default `100000`): rows per barrier; both multiples of
//!   16 (the capture workload of `benches/common/mod.rs`: 4 runs × 4 probes);
//! - `SERIES_ARCHIVE_BENCH_READ_ROWS` (default `1000000`): the archive the `rows` group reads,
//!   the same `target/bench-data/survey-<rows>/` that `benches/survey.rs` builds (shared);
//! - `SERIES_ARCHIVE_BENCH_OPEN` (default `100x16,1000x16,100x256,1000x256`): archives of
//!   `<barriers>x<tracks>` (16 = 4 runs × 4 probes, 256 = 16 × 16; one tick per barrier),
//!   built once under `target/bench-data/open-<barriers>x<tracks>/` and reused.
//!
//! Groups:
//!
//! - `seal/archive/<rows>`: a fresh archive directory, `stage_batch` of the in-memory
//!   batches and `seal_all` every cadence rows (per barrier: a data file with one row group
//!   per track and a level file, each synced and renamed, the directory synced, a synced
//!   manifest record), levels included; creating and removing the directory is not timed.
//!   `seal/arrow_writer/<rows>`: `ArrowWriter` with the archive's writer properties writes
//!   the same batches (plus the position column), one file per barrier, each file and the
//!   directory synced — the floor of any Parquet writer that makes a barrier durable.
//!   `seal/archive_without_delta_log/<rows>`: the archive with `Config::delta(false)`, so
//!   the ratio of the two is what keeping the Delta logs costs a barrier.
//!   Throughput in rows (elements);
//! - `rows/arrow/<rows>` reads the middle 10% of the positions of track (`run_0`,
//!   `probe.00`) with `read_rows` (an Arrow batch); `rows/typed/<rows>` the same rows through
//!   the `Series` contract (`Series::rows`, serde into the `#[stream]` type `Capture`).
//!   Throughput in rows read;
//! - `open/read_only/<barriers>x<tracks>`: `Archive::open` read-only (manifest replay and
//!   state), dropping not timed.
//!
//! Survey, level-fold and percentile latency by archive size live in `benches/survey.rs`;
//! `scripts/compare.py` puts all of it beside DuckDB, Polars, SQLite and `ArrowWriter` on
//! one dataset.

use arrow::array::RecordBatch;
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use series_archive::archive::{Archive, Config};
use series_archive::{Application, Position, Series, Stream};
use std::hint::black_box;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{Capture, Workload, STREAM};

const RUNS: usize = 4;
const PROBES: usize = 4;
const TRACKS: u64 = (RUNS * PROBES) as u64;

fn env_rows(name: &str, default: u64) -> u64 {
    let rows = match std::env::var(name) {
        Ok(text) => text
            .replace('_', "")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {text:?} is not a row count")),
        Err(_) => default,
    };
    assert!(
        rows > 0 && rows.is_multiple_of(TRACKS),
        "{name}: {rows} is not a positive multiple of {TRACKS}"
    );
    rows
}

/// `<barriers>x<tracks>` pairs from `SERIES_ARCHIVE_BENCH_OPEN`.
fn open_shapes() -> Vec<(u64, usize)> {
    let text = std::env::var("SERIES_ARCHIVE_BENCH_OPEN")
        .unwrap_or_else(|_| "100x16,1000x16,100x256,1000x256".to_owned());
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let bad = format!("SERIES_ARCHIVE_BENCH_OPEN: {s:?} is not <barriers>x<tracks>");
            let (b, t) = s.split_once('x').expect(&bad);
            let (b, t): (u64, usize) = (b.parse().expect(&bad), t.parse().expect(&bad));
            let side = (t as f64).sqrt() as usize;
            assert!(
                b > 0 && side * side == t,
                "SERIES_ARCHIVE_BENCH_OPEN: {s:?}: tracks must be a square (runs × probes)"
            );
            (b, t)
        })
        .collect()
}

/// A scratch directory for one measured ingest (emptied).
fn scratch(name: &str) -> PathBuf {
    let dir = common::data_root().join("tmp").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("empty the scratch directory");
    }
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

type Barriers = Vec<(RecordBatch, Vec<u64>)>;

fn archive_ingest(dir: &Path, barriers: &Barriers, delta: bool) -> Duration {
    let began = Instant::now();
    let config = Config::new().stream(common::spec()).delta(delta);
    let mut archive = Archive::open(dir, config).expect("open");
    for (batch, positions) in barriers {
        archive
            .stage_batch(STREAM, batch, positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
    let took = began.elapsed();
    drop(archive);
    took
}

fn floor_ingest(dir: &Path, barriers: &Barriers) -> Duration {
    let began = Instant::now();
    for (n, (batch, positions)) in barriers.iter().enumerate() {
        common::floor_write(
            &dir.join(format!("{n:012}.parquet")),
            &[(batch.clone(), positions.as_slice())],
        )
        .expect("ArrowWriter");
    }
    began.elapsed()
}

fn seal(c: &mut Criterion) {
    let rows = env_rows("SERIES_ARCHIVE_BENCH_SEAL", 400_000);
    let cadence = env_rows("SERIES_ARCHIVE_BENCH_CADENCE", 100_000);
    let mut workload = Workload::new(RUNS, PROBES);
    let mut barriers: Barriers = Vec::new();
    let mut left = rows / TRACKS;
    while left > 0 {
        let ticks = (cadence / TRACKS).min(left);
        barriers.push(workload.next(ticks));
        left -= ticks;
    }
    let mut group = c.benchmark_group("seal");
    group
        .throughput(Throughput::Elements(rows))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(8));
    let id = format!("{rows}_rows_{}_barriers", barriers.len());
    group.bench_function(BenchmarkId::new("archive", &id), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| archive_ingest(&scratch("seal-archive"), &barriers, true))
                .sum()
        })
    });
    group.bench_function(BenchmarkId::new("archive_without_delta_log", &id), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| archive_ingest(&scratch("seal-archive"), &barriers, false))
                .sum()
        })
    });
    group.bench_function(BenchmarkId::new("arrow_writer", &id), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| floor_ingest(&scratch("seal-floor"), &barriers))
                .sum()
        })
    });
    group.finish();
    let _ = std::fs::remove_dir_all(common::data_root().join("tmp"));
}

struct Bench;
impl Application for Bench {}

fn rows(c: &mut Criterion) {
    let rows = env_rows("SERIES_ARCHIVE_BENCH_READ_ROWS", 1_000_000);
    let ticks = rows / TRACKS;
    let dir = common::ensure(
        &common::data_root().join(format!("survey-{rows}")),
        RUNS,
        PROBES,
        ticks,
        500_000 / TRACKS,
    );
    let track = vec!["run_0".to_owned(), "probe.00".to_owned()];
    // Positions are tick + 1: the middle 10% of the track's ticks.
    let (from, to) = (ticks * 45 / 100 + 1, ticks * 55 / 100 + 1);
    let (start, end) = (
        Bound::Included(Position(from)),
        Bound::Excluded(Position(to)),
    );
    let archive = Archive::open(&dir, Config::new().read_only(true)).expect("open");
    let n = archive
        .read_rows(STREAM, &track, start, end)
        .expect("read_rows")
        .num_rows() as u64;
    assert_eq!(n, to - from, "one row of the track per tick");
    let mut typed = Archive::open(
        &dir,
        Config::new()
            .read_only(true)
            .select::<Capture>()
            .expect("select Capture"),
    )
    .expect("open typed");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let definition = Capture::definition();

    let mut group = c.benchmark_group("rows");
    group.throughput(Throughput::Elements(n));
    let id = format!("{n}_of_{rows}_rows");
    group.bench_function(BenchmarkId::new("arrow", &id), |b| {
        b.iter(|| {
            archive
                .read_rows(STREAM, black_box(&track), start, end)
                .expect("read_rows")
        })
    });
    group.bench_function(BenchmarkId::new("typed", &id), |b| {
        b.iter(|| {
            let rows = runtime
                .block_on(Series::<Bench>::rows(
                    &mut typed,
                    definition.clone(),
                    black_box(&track),
                    start,
                    end,
                ))
                .expect("rows");
            assert_eq!(rows.len() as u64, n);
            rows
        })
    });
    group.finish();
}

fn open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    group.sample_size(10);
    for (barriers, tracks) in open_shapes() {
        let side = (tracks as f64).sqrt() as usize;
        let dir = common::ensure(
            &common::data_root().join(format!("open-{barriers}x{tracks}")),
            side,
            side,
            barriers,
            1,
        );
        group.bench_function(
            BenchmarkId::new("read_only", format!("{barriers}_barriers_{tracks}_tracks")),
            |b| {
                b.iter_with_large_drop(|| {
                    Archive::open(black_box(&dir), Config::new().read_only(true)).expect("open")
                })
            },
        );
    }
    group.finish();
}

criterion_group!(archive, seal, rows, open);
criterion_main!(archive);
