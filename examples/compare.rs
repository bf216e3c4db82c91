//! The in-process half of `scripts/compare.py`: the archive's own figures on the comparison
//! dataset, timed in the same run as DuckDB, Polars, SQLite and `ArrowWriter`.
//!
//! ```sh
//! cargo build --release --example compare
//! target/release/examples/compare seal DATA.parquet --scratch DIR [--seal-rows 500000] [--runs 3]
//! target/release/examples/compare probe ARCHIVE --track run_0 probe.00 --from P --to P [--runs 5]
//! ```
//!
//! `seal` reads the dataset (`run, probe, ordinal, value, noise, position`, as
//! `scripts/compare.py` writes it) into memory once, then per run, on identical in-memory
//! batches:
//!
//! - the archive: a fresh directory, the stream declared as `ingest` declares it (default
//!   ladder, levels included), rows staged with `stage_batch` in slices that fill the cadence
//!   and `seal_all` every `--seal-rows` rows (each barrier: data file and level file written,
//!   synced, renamed, directory synced, manifest record synced);
//! - the floor: `parquet::arrow::ArrowWriter` with the archive's writer properties (zstd
//!   level 1, page statistics, one row group per flush, the position column delta-encoded)
//!   writing the same batches (row columns + position) to one file per barrier, each
//!   `sync_all`ed and the directory synced — the least any writer making each barrier
//!   durable as Parquet does.
//!
//! One untimed warm-up of each, then `--runs` timed runs, alternating. Prints JSON.
//!
//! `probe` opens an archive (as `ingest` built it) and times, per call, the median of
//! `--runs` after a warm-up: read-only open; open + first survey; a warm survey at the
//! budget; the level folds (min, max, mean, sum, count) and p95 over the whole track;
//! `read_rows` over `[from, to)` (Arrow path) and `typed_rows` through the `Series`
//! contract's row type (serde decoding into `Capture`). Prints JSON with the answers, so the
//! script checks them against DuckDB before it reports a time.

use arrow::array::{Array, Float64Array, Int64Array, RecordBatch, RecordBatchReader, UInt64Array};
use arrow::datatypes::{Field, Schema, SchemaRef};
use clap::{Parser, Subcommand};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::json;
use series_archive::archive::{Archive, Config};
use series_archive::{Aggregate, Position};
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../benches/common/mod.rs"]
mod common;
use common::Capture;

use common::STREAM;
const POSITION: &str = "position";

#[derive(Parser)]
#[command(about = "In-process figures for scripts/compare.py")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Archive stage + seal against ArrowWriter + fsync on the same in-memory batches.
    Seal {
        data: PathBuf,
        /// A scratch directory (emptied and reused).
        #[arg(long)]
        scratch: PathBuf,
        #[arg(long, default_value_t = 500_000)]
        seal_rows: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Open, survey, fold and row-read figures of an archive.
    Probe {
        archive: PathBuf,
        #[arg(long, num_args = 1..)]
        track: Vec<String>,
        /// First position of the row range (inclusive).
        #[arg(long)]
        from: u64,
        /// End position of the row range (exclusive).
        #[arg(long)]
        to: u64,
        #[arg(long, default_value_t = 400)]
        budget: usize,
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One untimed warm-up, then the median of `runs` timed calls (seconds) and the last answer.
fn timed<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut last = f();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let began = Instant::now();
        last = std::hint::black_box(f());
        times.push(began.elapsed().as_secs_f64());
    }
    (median(times), last)
}

/// For calls of microseconds: the median over `runs` of the mean of as many calls as fit in
/// 200 ms (at least 10).
fn timed_fast<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut last = f();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let began = Instant::now();
        let mut n = 0u32;
        while n < 10 || began.elapsed() < Duration::from_millis(200) {
            last = std::hint::black_box(f());
            n += 1;
        }
        times.push(began.elapsed().as_secs_f64() / f64::from(n));
    }
    (median(times), last)
}

type Fail = Box<dyn std::error::Error>;

/// The declared schema, the row batches shaped as `ingest` declares them, their positions.
type Loaded = (SchemaRef, Vec<RecordBatch>, Vec<Vec<u64>>);

/// The dataset as deliveries.
fn load(data: &Path) -> Result<Loaded, Fail> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(data)?)?
        .with_batch_size(64 * 1024)
        .build()?;
    let file_schema = reader.schema();
    let keep: Vec<usize> = (0..file_schema.fields().len())
        .filter(|&i| file_schema.field(i).name() != POSITION)
        .collect();
    let pos_index = file_schema.index_of(POSITION)?;
    // `ingest` declares every column but the position, coordinates not nullable.
    let declared: SchemaRef = Arc::new(Schema::new(
        keep.iter()
            .map(|&i| {
                let f = file_schema.field(i);
                Field::new(f.name(), f.data_type().clone(), false)
            })
            .collect::<Vec<_>>(),
    ));
    let (mut batches, mut positions) = (Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch?;
        let p = batch
            .column(pos_index)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or("the position column is UInt64")?;
        positions.push(p.values().to_vec());
        batches.push(RecordBatch::try_new(
            declared.clone(),
            batch.project(&keep)?.columns().to_vec(),
        )?);
    }
    Ok((declared, batches, positions))
}

fn fresh(dir: &Path) -> Result<(), Fail> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Every slice of the deliveries, cut so that barriers fall every `seal_rows` rows.
fn barriers(batches: &[RecordBatch], seal_rows: usize) -> Vec<Vec<(usize, usize, usize)>> {
    let mut out = vec![Vec::new()];
    let mut room = seal_rows;
    for (b, batch) in batches.iter().enumerate() {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = (batch.num_rows() - offset).min(room);
            out.last_mut().expect("one barrier").push((b, offset, len));
            offset += len;
            room -= len;
            if room == 0 {
                out.push(Vec::new());
                room = seal_rows;
            }
        }
    }
    out.retain(|b| !b.is_empty());
    out
}

struct SealRun {
    total: f64,
    stage: f64,
    seal: f64,
    bytes: u64,
}

fn archive_run(
    dir: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    positions: &[Vec<u64>],
    plan: &[Vec<(usize, usize, usize)>],
) -> Result<SealRun, Fail> {
    fresh(dir)?;
    let began = Instant::now();
    let mut archive = Archive::open(dir, Config::new().stream(common::spec_of(schema.clone())))?;
    let (mut stage, mut seal) = (Duration::ZERO, Duration::ZERO);
    for barrier in plan {
        let t = Instant::now();
        for &(b, offset, len) in barrier {
            archive.stage_batch(
                STREAM,
                &batches[b].slice(offset, len),
                &positions[b][offset..offset + len],
            )?;
        }
        stage += t.elapsed();
        let t = Instant::now();
        archive.seal_all()?.ok_or("a barrier")?;
        seal += t.elapsed();
    }
    drop(archive);
    let total = began.elapsed().as_secs_f64();
    Ok(SealRun {
        total,
        stage: stage.as_secs_f64(),
        seal: seal.as_secs_f64(),
        bytes: dir_size(dir),
    })
}

fn floor_run(
    dir: &Path,
    batches: &[RecordBatch],
    positions: &[Vec<u64>],
    plan: &[Vec<(usize, usize, usize)>],
) -> Result<SealRun, Fail> {
    fresh(dir)?;
    let began = Instant::now();
    for (n, barrier) in plan.iter().enumerate() {
        let parts: Vec<(RecordBatch, &[u64])> = barrier
            .iter()
            .map(|&(b, offset, len)| {
                (
                    batches[b].slice(offset, len),
                    &positions[b][offset..offset + len],
                )
            })
            .collect();
        common::floor_write(&dir.join(format!("{n:012}.parquet")), &parts)?;
    }
    let total = began.elapsed().as_secs_f64();
    Ok(SealRun {
        total,
        stage: 0.0,
        seal: total,
        bytes: dir_size(dir),
    })
}

fn seal(data: &Path, scratch: &Path, seal_rows: usize, runs: usize) -> Result<(), Fail> {
    let loaded = Instant::now();
    let (schema, batches, positions) = load(data)?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    eprintln!(
        "compare seal: {rows} rows in memory in {:.2?}",
        loaded.elapsed()
    );
    let plan = barriers(&batches, seal_rows);
    let (archive_dir, floor_dir) = (scratch.join("archive"), scratch.join("floor"));
    let mut a_runs = Vec::new();
    let mut f_runs = Vec::new();
    // A warm-up of each, then alternate so drift hits both alike.
    archive_run(&archive_dir, &schema, &batches, &positions, &plan)?;
    floor_run(&floor_dir, &batches, &positions, &plan)?;
    for i in 0..runs.max(1) {
        a_runs.push(archive_run(
            &archive_dir,
            &schema,
            &batches,
            &positions,
            &plan,
        )?);
        f_runs.push(floor_run(&floor_dir, &batches, &positions, &plan)?);
        eprintln!(
            "compare seal: run {}: archive {:.2} s, ArrowWriter {:.2} s",
            i + 1,
            a_runs[i].total,
            f_runs[i].total
        );
    }
    let pick = |runs: &[SealRun], f: fn(&SealRun) -> f64| median(runs.iter().map(f).collect());
    let result = json!({
        "rows": rows,
        "barriers": plan.len(),
        "seal_rows": seal_rows,
        "runs": runs.max(1),
        "archive_secs": pick(&a_runs, |r| r.total),
        "archive_stage_secs": pick(&a_runs, |r| r.stage),
        "archive_seal_secs": pick(&a_runs, |r| r.seal),
        "archive_all_secs": a_runs.iter().map(|r| r.total).collect::<Vec<_>>(),
        "archive_bytes": a_runs.last().map(|r| r.bytes),
        "floor_secs": pick(&f_runs, |r| r.total),
        "floor_all_secs": f_runs.iter().map(|r| r.total).collect::<Vec<_>>(),
        "floor_bytes": f_runs.last().map(|r| r.bytes),
    });
    std::fs::remove_dir_all(&archive_dir)?;
    std::fs::remove_dir_all(&floor_dir)?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(())
}

/// Count, sum of `value`, sum of `noise`, first and last ordinal of a row batch.
fn checksum(batch: &RecordBatch) -> Result<serde_json::Value, Fail> {
    let col = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or(format!("no column {name}"))
    };
    let value = col("value")?
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or("value is Int64")?;
    let noise = col("noise")?
        .as_any()
        .downcast_ref::<Float64Array>()
        .ok_or("noise is Float64")?;
    let ordinal = col("ordinal")?
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or("ordinal is UInt64")?;
    let n = batch.num_rows();
    Ok(json!({
        "rows": n,
        "value_sum": value.values().iter().map(|&v| i128::from(v)).sum::<i128>().to_string(),
        "noise_sum": noise.values().iter().sum::<f64>(),
        "first_ordinal": (n > 0).then(|| ordinal.value(0)),
        "last_ordinal": (n > 0).then(|| ordinal.value(n - 1)),
    }))
}

#[allow(clippy::too_many_lines)]
fn probe(
    dir: &Path,
    track: &[String],
    from: u64,
    to: u64,
    budget: usize,
    runs: usize,
) -> Result<(), Fail> {
    let open = || Archive::open(dir, Config::new().read_only(true));
    let (open_secs, _) = timed(runs, || open().expect("open"));
    let (cold_secs, _) = timed(runs, || {
        let archive = open().expect("open");
        let survey = archive
            .survey(STREAM, track, Bound::Unbounded, Bound::Unbounded, budget)
            .expect("survey");
        (archive, survey)
    });
    let archive = open()?;
    let (survey_secs, survey) = timed_fast(runs, || {
        archive
            .survey(STREAM, track, Bound::Unbounded, Bound::Unbounded, budget)
            .expect("survey")
    });
    let mut folds = serde_json::Map::new();
    for (name, kind) in [
        ("min", Aggregate::Min),
        ("max", Aggregate::Max),
        ("mean", Aggregate::Mean),
        ("sum", Aggregate::Sum),
        ("count", Aggregate::Count),
        ("p95", Aggregate::percentile(95)),
    ] {
        let call = || {
            archive
                .fold(STREAM, track, Bound::Unbounded, Bound::Unbounded, kind)
                .expect("fold")
        };
        let (secs, folded) = if kind.folds_levels() {
            timed_fast(runs, call)
        } else {
            timed(runs, call)
        };
        folds.insert(
            name.to_owned(),
            json!({
                "secs": secs,
                "source": folded.source,
                "values": folded.answers.iter().map(|a| a.value).collect::<Vec<_>>(),
                "counts": folded.answers.iter().map(|a| a.count).collect::<Vec<_>>(),
            }),
        );
    }
    let (start, end) = (
        Bound::Included(Position(from)),
        Bound::Excluded(Position(to)),
    );
    let (rows_secs, batch) = timed(runs, || {
        archive
            .read_rows(STREAM, track, start, end)
            .expect("read_rows")
    });
    let arrow_sum = checksum(&batch)?;
    drop(archive);
    // The typed path: the same rows decoded into `Capture` through serde.
    let typed = Archive::open(dir, Config::new().read_only(true).select::<Capture>()?)?;
    let (typed_secs, rows) = timed(runs, || {
        typed
            .typed_rows(STREAM, track, start, end)
            .expect("typed_rows")
    });
    let mut value_sum = 0i128;
    let mut noise_sum = 0f64;
    for at in &rows {
        let c = at.row.downcast_ref::<Capture>().ok_or("a Capture row")?;
        value_sum += i128::from(c.value);
        noise_sum += c.noise;
    }
    let state = typed.state();
    let stream = state.streams.get(STREAM).ok_or("the capture stream")?;
    let result = json!({
        "barriers": state.barriers,
        "files": stream.files.len(),
        "open_secs": open_secs,
        "cold_survey_secs": cold_secs,
        "survey_secs": survey_secs,
        "survey": survey,
        "folds": folds,
        "rows_secs": rows_secs,
        "rows": arrow_sum,
        "typed_secs": typed_secs,
        "typed": {
            "rows": rows.len(),
            "value_sum": value_sum.to_string(),
            "noise_sum": noise_sum,
        },
    });
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(())
}

fn main() -> Result<(), Fail> {
    match Cli::parse().command {
        Command::Seal {
            data,
            scratch,
            seal_rows,
            runs,
        } => seal(&data, &scratch, seal_rows, runs),
        Command::Probe {
            archive,
            track,
            from,
            to,
            budget,
            runs,
        } => probe(&archive, &track, from, to, budget, runs),
    }
}
