//! A simulated day of an archive: barriers every 250 ms of a hand-moved clock over a few
//! hundred tracks (runs that start and end through the day, four probes each, plus an
//! always-on `host` run), with and without the lifecycle.
//!
//! ```sh
//! cargo run --release --example soak_day -- [--hours 24] [--dir PATH]
//! ```
//!
//! Two archives are built from the same rows, each on its own thread: `lifecycle` (raw rows
//! by age, level 0 by age, higher levels forever, finished runs retired whole after an idle
//! time, `maintain(now)` every simulated minute with a small compaction target and
//! checkpoint size) and `none` (no retention, no maintenance). Then a markdown report:
//! barriers, rows, tracks, live files and bytes per tier, manifest bytes and generation,
//! wall time, open time (median of fresh read-only and writable opens), and survey
//! (budget 400) and `read_rows` latencies over one host probe — for `none`, for `lifecycle`
//! as maintenance left it, and for `lifecycle` after a forced `compact(true, ..)`.
//!
//! The day is compressed with its span: lifetimes, run lengths and the idle time are
//! fractions of it (at 24 h: raw 6 h, level 0 12 h, idle 1 h, runs of 30 min to 3 h); the
//! barrier cadence, the maintenance cadence, the compaction target and the checkpoint size
//! are absolute.
//!
//! The workload generator (`mod day`) mirrors the one in `tests/soak.rs` (an example cannot
//! import a test): keep the two equal.

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use series_archive::archive::{Archive, Clock, Config, StreamSpec};
use series_archive::Position;
use std::ops::Bound::{Included, Unbounded};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The simulated day's workload, shared with `tests/soak.rs`.
#[path = "../tests/common/day.rs"]
mod day;

#[path = "../tests/common/hand.rs"]
mod hand;
use hand::Hand;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::Utf8, false),
        Field::new("probe", DataType::Utf8, false),
        Field::new("ordinal", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
        Field::new("noise", DataType::Float64, false),
    ]))
}

fn spec() -> StreamSpec {
    StreamSpec::dynamic(
        "capture",
        schema(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("valid declaration")
}

fn config(lifecycle: bool, barriers: u64, clock: Arc<dyn Clock>) -> Config {
    let config = Config::new().stream(spec()).clock(clock);
    if !lifecycle {
        return config;
    }
    day::lifecycle(config, barriers)
}

fn batch_of(tracks: &[day::Track], rows: &[(usize, u64, u64)]) -> (RecordBatch, Vec<u64>) {
    let mut ordinal = Vec::with_capacity(rows.len());
    let mut value = Vec::with_capacity(rows.len());
    let mut noise = Vec::with_capacity(rows.len());
    for &(t, i, _) in rows {
        let (o, v, n) = day::row(&tracks[t], i);
        ordinal.push(o);
        value.push(v);
        noise.push(n);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| tracks[r.0].run.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| tracks[r.0].probe.as_str()),
        )),
        Arc::new(UInt64Array::from(ordinal)),
        Arc::new(Int64Array::from(value)),
        Arc::new(Float64Array::from(noise)),
    ];
    let batch = RecordBatch::try_new(schema(), columns).expect("valid batch");
    (batch, rows.iter().map(|r| r.2).collect())
}

/// What building one variant did.
#[derive(Debug, Default)]
struct Built {
    wall: Duration,
    rows: u64,
    manifest_bytes: u64,
    retirements: usize,
    whole: usize,
    compactions: usize,
    checkpoints: usize,
    maintain: Duration,
}

fn build(dir: &Path, lifecycle: bool, barriers: u64) -> Built {
    let clock = Arc::new(Hand::default());
    let tracks = day::schedule(barriers);
    let mut archive =
        Archive::open(dir, config(lifecycle, barriers, clock.clone())).expect("open to build");
    let mut built = Built::default();
    let started = Instant::now();
    let mut reported = Instant::now();
    for b in 0..barriers {
        let now = day::at(barriers, b);
        clock.set(now);
        let rows = day::barrier(&tracks, b);
        if !rows.is_empty() {
            let (batch, positions) = batch_of(&tracks, &rows);
            archive
                .stage_batch("capture", &batch, &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
            built.rows += rows.len() as u64;
        }
        if lifecycle && (b + 1) % day::maintain_every(barriers) == 0 {
            let t = Instant::now();
            let done = archive.maintain(now).expect("maintain");
            built.maintain += t.elapsed();
            built.retirements += done.retired.len();
            built.whole += done.retired.iter().map(|r| r.whole).sum::<usize>();
            built.compactions += done.compacted.len();
            built.checkpoints += usize::from(done.checkpoint.is_some());
        }
        if reported.elapsed() > Duration::from_secs(60) {
            reported = Instant::now();
            let done = (b + 1) as f64 / barriers as f64;
            let elapsed = started.elapsed().as_secs_f64();
            eprintln!(
                "[{}] {:.1} % of {barriers} barriers, {:.0} s, about {:.0} s to go",
                if lifecycle { "lifecycle" } else { "none" },
                done * 100.0,
                elapsed,
                elapsed / done - elapsed
            );
        }
    }
    built.wall = started.elapsed();
    built.manifest_bytes = archive.manifest_bytes();
    built
}

/// Figures of one archive as it stands.
#[derive(Debug, Default)]
struct Measured {
    data_files: usize,
    level_files: usize,
    data_bytes: u64,
    level_bytes: u64,
    manifest_bytes: u64,
    generation: u64,
    open_ro: Duration,
    open_rw: Duration,
    survey_cold: Duration,
    survey_warm: Duration,
    rows: Duration,
    rows_read: usize,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Repeats `f` up to `n` times (at least once, fewer past `budget`), answering the median.
fn timed(n: usize, budget: Duration, mut f: impl FnMut() -> Duration) -> Duration {
    let started = Instant::now();
    let mut v = Vec::new();
    while v.len() < n && (v.is_empty() || started.elapsed() < budget) {
        v.push(f());
    }
    median(v)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

fn measure(dir: &Path, lifecycle: bool, barriers: u64, from: Position) -> Measured {
    let clock: Arc<dyn Clock> = Arc::new(series_archive::archive::FixedClock(day::at(
        barriers, barriers,
    )));
    let ro = || config(lifecycle, barriers, clock.clone()).read_only(true);
    let budget = Duration::from_secs(60);
    let mut m = Measured::default();
    {
        let archive = Archive::open(dir, ro()).expect("open read-only");
        let s = &archive.state().streams["capture"];
        m.data_files = s.files.len();
        m.level_files = s.levels.len();
        m.data_bytes = s.files.iter().map(|f| f.bytes).sum();
        m.level_bytes = s.levels.iter().map(|f| f.bytes).sum();
        m.generation = archive.state().generation;
    }
    m.manifest_bytes = dir_bytes(&dir.join("manifest"));
    m.open_ro = timed(5, budget, || {
        let t = Instant::now();
        let a = Archive::open(dir, ro()).expect("open read-only");
        let e = t.elapsed();
        drop(a);
        e
    });
    m.open_rw = timed(5, budget, || {
        let t = Instant::now();
        let a = Archive::open(dir, config(lifecycle, barriers, clock.clone())).expect("open");
        let e = t.elapsed();
        drop(a);
        e
    });
    let track = vec!["host".to_owned(), "probe.0".to_owned()];
    let mut warm = Vec::new();
    let mut rows = Vec::new();
    m.survey_cold = timed(5, budget, || {
        let archive = Archive::open(dir, ro()).expect("open read-only");
        let t = Instant::now();
        let s = archive
            .survey("capture", &track, Unbounded, Unbounded, 400)
            .expect("survey");
        let cold = t.elapsed();
        assert!(!s.buckets.is_empty());
        let t = Instant::now();
        archive
            .survey("capture", &track, Unbounded, Unbounded, 400)
            .expect("survey");
        warm.push(t.elapsed());
        let t = Instant::now();
        let batch = archive
            .read_rows("capture", &track, Included(from), Unbounded)
            .expect("rows");
        rows.push(t.elapsed());
        m.rows_read = batch.num_rows();
        cold
    });
    m.survey_warm = median(warm);
    m.rows = median(rows);
    m
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

fn main() {
    let mut hours = 24.0f64;
    let mut dir: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--hours" => {
                hours = args
                    .next()
                    .and_then(|h| h.parse().ok())
                    .expect("--hours HOURS (a number)")
            }
            "--dir" => dir = Some(PathBuf::from(args.next().expect("--dir PATH"))),
            other => panic!("unknown argument {other:?}; use [--hours 24] [--dir PATH]"),
        }
    }
    let temp;
    let root = match dir {
        Some(d) => d,
        None => {
            temp = tempfile::tempdir().expect("tempdir");
            temp.path().to_path_buf()
        }
    };
    let (with, without) = (root.join("lifecycle"), root.join("none"));
    for d in [&with, &without] {
        if d.exists() {
            std::fs::remove_dir_all(d).expect("clear a previous run");
        }
    }
    let barriers = day::barriers(hours);
    let tracks = day::schedule(barriers);
    eprintln!(
        "{hours} simulated hours: {barriers} barriers, {} tracks, under {}",
        tracks.len(),
        root.display()
    );
    let (w, n) = (with.clone(), without.clone());
    let lifecycle = std::thread::spawn(move || build(&w, true, barriers));
    let none = std::thread::spawn(move || build(&n, false, barriers));
    let built_with = lifecycle.join().expect("lifecycle build");
    let built_without = none.join().expect("baseline build");

    // Rows are read from the host probe's raw floor in the lifecycle archive, in both.
    let from = {
        let clock: Arc<dyn Clock> = Arc::new(series_archive::archive::FixedClock(0));
        let a = Archive::open(&with, config(true, barriers, clock).read_only(true)).expect("open");
        let s = &a.state().streams["capture"];
        s.tracks
            .values()
            .find(|t| t.labels[..] == ["host", "probe.0"])
            .map_or(Position(0), |t| t.floor())
    };
    let m_none = measure(&without, false, barriers, from);
    let m_before = measure(&with, true, barriers, from);
    let compact_wall = {
        let clock: Arc<dyn Clock> = Arc::new(series_archive::archive::FixedClock(day::at(
            barriers, barriers,
        )));
        let mut a = Archive::open(&with, config(true, barriers, clock)).expect("open");
        let t = Instant::now();
        a.compact(true, |_, _, _| {}).expect("compact");
        t.elapsed()
    };
    let m_after = measure(&with, true, barriers, from);
    // The same rows as the baseline, compacted (default 64 MiB segments) and checkpointed:
    // before/after compaction on identical data, no retention.
    let compact_none_wall = {
        let clock: Arc<dyn Clock> = Arc::new(series_archive::archive::FixedClock(day::at(
            barriers, barriers,
        )));
        let mut a = Archive::open(&without, config(false, barriers, clock)).expect("open");
        let t = Instant::now();
        a.compact(true, |_, _, _| {}).expect("compact");
        a.checkpoint().expect("checkpoint");
        t.elapsed()
    };
    let m_none_after = measure(&without, false, barriers, from);

    let (raw, level0, idle) = day::lifetimes(barriers);
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "## Soak: {hours} simulated hours\n\n`cargo run --release --example soak_day -- --hours {hours}`\n"
    ));
    line(format!(
        "- {barriers} barriers (250 ms apart), {} rows, {} tracks ({} runs × {} probes + {} host probes)",
        built_with.rows,
        tracks.len(),
        day::RUNS,
        day::PROBES,
        day::PROBES
    ));
    line(format!(
        "- lifecycle: raw age {:.2} h, level 0 age {:.2} h, levels 1+ forever, idle {:.2} h; maintain every {} barriers; compaction target {} KiB, {} rows a group, min {} inputs; checkpoint past {} MiB",
        raw.as_secs_f64() / 3600.0,
        level0.as_secs_f64() / 3600.0,
        idle.as_secs_f64() / 3600.0,
        day::maintain_every(barriers),
        day::TARGET_BYTES >> 10,
        day::GROUP_ROWS,
        day::MIN_INPUTS,
        day::CHECKPOINT_BYTES >> 20
    ));
    line(format!(
        "- build wall time: lifecycle {:.0} s ({:.2} ms a barrier; {:.0} s of it in maintain: {} retirements retiring {} tracks whole, {} compactions, {} checkpoints), none {:.0} s ({:.2} ms a barrier); both built at once on two threads",
        built_with.wall.as_secs_f64(),
        built_with.wall.as_secs_f64() * 1e3 / barriers as f64,
        built_with.maintain.as_secs_f64(),
        built_with.retirements,
        built_with.whole,
        built_with.compactions,
        built_with.checkpoints,
        built_without.wall.as_secs_f64(),
        built_without.wall.as_secs_f64() * 1e3 / barriers as f64,
    ));
    line(format!(
        "- manifest at the end of the build (writer's view): lifecycle {} bytes, none {} bytes",
        built_with.manifest_bytes, built_without.manifest_bytes
    ));
    line(format!(
        "- forced `compact(true)` of the lifecycle archive: {:.1} s",
        compact_wall.as_secs_f64()
    ));
    line(format!(
        "- forced `compact(true)` + `checkpoint()` of the baseline (same rows, no retention, 64 MiB segments): {:.1} s",
        compact_none_wall.as_secs_f64()
    ));
    line(format!(
        "- latencies over track `host/probe.0`: survey budget 400 over the whole track (cold = first survey of a fresh read-only open, building the level view; warm = the second); rows = `read_rows` from position {} (the lifecycle raw floor) to the end, {} rows; medians of up to 5\n",
        from.0, m_after.rows_read
    ));
    line(
        "| | no lifecycle | no lifecycle, then `compact(true)` + `checkpoint()` | lifecycle, as maintain left it | lifecycle + `compact(true)` |".into(),
    );
    line("|---|---:|---:|---:|---:|".into());
    let row = |name: &str, f: &dyn Fn(&Measured) -> String| {
        format!(
            "| {name} | {} | {} | {} | {} |",
            f(&m_none),
            f(&m_none_after),
            f(&m_before),
            f(&m_after)
        )
    };
    line(row("live data files", &|m| m.data_files.to_string()));
    line(row("live level files", &|m| m.level_files.to_string()));
    line(row("data MiB", &|m| mib(m.data_bytes)));
    line(row("level MiB", &|m| mib(m.level_bytes)));
    line(row("manifest bytes", &|m| m.manifest_bytes.to_string()));
    line(row("manifest generation", &|m| m.generation.to_string()));
    line(row("open read-only (ms)", &|m| ms(m.open_ro)));
    line(row("open writable (ms)", &|m| ms(m.open_rw)));
    line(row("survey cold (ms)", &|m| ms(m.survey_cold)));
    line(row("survey warm (ms)", &|m| ms(m.survey_warm)));
    line(row("rows (ms)", &|m| ms(m.rows)));
    print!("{out}");
}
