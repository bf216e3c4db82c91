//! Shared by the benchmarks (`benches/survey.rs`, `benches/archive.rs`) and
//! `examples/compare.rs`: the capture workload, the archives built from it under
//! `target/bench-data/`, and the `ArrowWriter` floor a barrier is compared with.
#![allow(dead_code)]

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use series_archive::archive::{Archive, Config, StreamSpec};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub const STREAM: &str = "capture";

/// The comparison stream's row type: the typed path decodes into it through serde.
#[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Capture {
    pub run: String,
    pub probe: String,
    pub ordinal: u64,
    /// An integer random walk.
    pub value: i64,
    /// A noisy float.
    pub noise: f64,
}

/// `target/bench-data`, under `CARGO_TARGET_DIR` when it is set.
pub fn data_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("bench-data")
}

/// The capture schema: run, probe, ordinal (axis), value, noise.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::Utf8, false),
        Field::new("probe", DataType::Utf8, false),
        Field::new("ordinal", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
        Field::new("noise", DataType::Float64, false),
    ]))
}

/// The capture stream, declared at run time (as `ingest` declares it), default ladder.
pub fn spec_of(schema: SchemaRef) -> StreamSpec {
    StreamSpec::dynamic(
        STREAM,
        schema,
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("a valid declaration")
}

pub fn spec() -> StreamSpec {
    spec_of(schema())
}

/// SplitMix64, as in the demo: reproducible workloads.
pub struct Mix(pub u64);
impl Mix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The capture workload: `runs × probes` tracks, one row per track per tick, in tick order.
pub struct Workload {
    runs: Vec<String>,
    probes: Vec<String>,
    mix: Mix,
    walk: Vec<i64>,
    tick: u64,
}

impl Workload {
    pub fn new(runs: usize, probes: usize) -> Workload {
        Workload {
            runs: (0..runs).map(|r| format!("run_{r}")).collect(),
            probes: (0..probes).map(|p| format!("probe.{p:02}")).collect(),
            mix: Mix(0x5eed),
            walk: vec![0; runs * probes],
            tick: 0,
        }
    }

    pub fn tracks(&self) -> usize {
        self.runs.len() * self.probes.len()
    }

    /// The next `ticks` ticks: a batch and its positions (`tick + 1`, shared within a tick).
    /// The axis `ordinal = tick × 4 + jitter` has gaps; `value` is an i64 random walk per
    /// track, `noise` a noisy float.
    pub fn next(&mut self, ticks: u64) -> (RecordBatch, Vec<u64>) {
        let n = ticks as usize * self.tracks();
        let (mut run, mut probe) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut ordinal, mut value, mut noise) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut positions = Vec::with_capacity(n);
        for t in self.tick..self.tick + ticks {
            for (r, run_label) in self.runs.iter().enumerate() {
                for (p, probe_label) in self.probes.iter().enumerate() {
                    let i = r * self.probes.len() + p;
                    let m = self.mix.next();
                    self.walk[i] += (m % 7) as i64 - 3;
                    run.push(run_label.as_str());
                    probe.push(probe_label.as_str());
                    // An ordinal axis with gaps: some ticks skip ahead.
                    ordinal.push(t * 4 + (m >> 60) % 4);
                    value.push(self.walk[i]);
                    noise.push(
                        ((m >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0
                            + (t as f64 / 500.0).sin(),
                    );
                    // Every row of a tick shares its position.
                    positions.push(t + 1);
                }
            }
        }
        self.tick += ticks;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(run)),
            Arc::new(StringArray::from(probe)),
            Arc::new(UInt64Array::from(ordinal)),
            Arc::new(Int64Array::from(value)),
            Arc::new(Float64Array::from(noise)),
        ];
        (
            RecordBatch::try_new(schema(), columns).expect("a valid batch"),
            positions,
        )
    }
}

/// Whether `dir` already holds a capture archive of `rows` rows in `tracks` equal tracks
/// and `barriers` barriers (any number when `None`).
pub fn holds(dir: &Path, rows: u64, tracks: usize, barriers: Option<u64>) -> bool {
    if !dir.join("manifest").is_dir() {
        return false;
    }
    let Ok(archive) = Archive::open(dir, Config::new().read_only(true)) else {
        return false;
    };
    let Ok(description) = archive.describe() else {
        return false;
    };
    barriers.is_none_or(|b| description.barriers == b)
        && description.streams.iter().any(|s| {
            s.id == STREAM
                && s.rows == rows
                && s.tracks.len() == tracks
                && s.tracks.iter().all(|t| t.rows == rows / tracks as u64)
        })
}

/// Builds (or reuses, when it already holds exactly that) the capture archive at `dir`:
/// `runs × probes` tracks, `ticks` ticks, a barrier every `ticks_per_barrier` ticks (and one
/// for the rest).
pub fn ensure(
    dir: &Path,
    runs: usize,
    probes: usize,
    ticks: u64,
    ticks_per_barrier: u64,
) -> PathBuf {
    let tracks = runs * probes;
    let rows = ticks * tracks as u64;
    let barriers = ticks.div_ceil(ticks_per_barrier);
    if holds(dir, rows, tracks, Some(barriers)) {
        eprintln!("bench: reusing {} ({rows} rows)", dir.display());
        return dir.to_path_buf();
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove a stale bench archive");
    }
    std::fs::create_dir_all(dir).expect("create the bench archive directory");
    eprintln!(
        "bench: building {} ({rows} rows, {tracks} tracks, {barriers} barriers) ...",
        dir.display()
    );
    let began = Instant::now();
    let mut archive =
        Archive::open(dir, Config::new().stream(spec())).expect("open the bench archive");
    let mut workload = Workload::new(runs, probes);
    let mut tick = 0;
    let mut b = 0;
    while tick < ticks {
        let n = ticks_per_barrier.min(ticks - tick);
        let (batch, positions) = workload.next(n);
        archive
            .stage_batch(STREAM, &batch, &positions)
            .expect("stage a barrier's rows");
        archive.seal_all().expect("seal").expect("a barrier");
        tick += n;
        b += 1;
        if b % 20 == 0 && tick < ticks {
            eprintln!(
                "bench:   {} / {rows} rows, {b} / {barriers} barriers durable after {:.1?}",
                tick * tracks as u64,
                began.elapsed()
            );
        }
    }
    drop(archive);
    assert!(
        holds(dir, rows, tracks, Some(barriers)),
        "the archive just built holds {rows} rows"
    );
    eprintln!("bench: built {} in {:.1?}", dir.display(), began.elapsed());
    dir.to_path_buf()
}

/// The archive's writer properties (`src/archive/segment.rs`: zstd level 1, page
/// statistics, one row group per flush, the position column delta-encoded without a
/// dictionary), for `ArrowWriter` writing the same batches.
pub fn floor_properties(position: &str) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1")))
        .set_max_row_group_row_count(None)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_column_dictionary_enabled(ColumnPath::from(position), false)
        .set_column_encoding(ColumnPath::from(position), Encoding::DELTA_BINARY_PACKED)
        .build()
}

/// The floor of a barrier: `ArrowWriter` writes `batch` with its `positions` (as a last
/// column named `position`) to `path`, then the file and its directory are synced.
pub fn floor_write(path: &Path, batches: &[(RecordBatch, &[u64])]) -> parquet::errors::Result<()> {
    let schema = batches[0].0.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| (**f).clone()).collect();
    fields.push(Field::new("position", DataType::UInt64, false));
    let with_position: SchemaRef = Arc::new(Schema::new(fields));
    let file = File::create(path)?;
    let mut writer = ArrowWriter::try_new(
        file,
        with_position.clone(),
        Some(floor_properties("position")),
    )?;
    for (batch, positions) in batches {
        let mut columns = batch.columns().to_vec();
        columns.push(Arc::new(UInt64Array::from(positions.to_vec())));
        writer.write(&RecordBatch::try_new(with_position.clone(), columns)?)?;
    }
    let file = writer.into_inner()?;
    file.sync_all()?;
    File::open(path.parent().expect("a file in a directory"))?.sync_all()?;
    Ok(())
}
