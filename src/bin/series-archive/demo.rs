//! The demo: a typed capture workload published through the runtime (`Streams`: windows, a
//! supervisor owning the archive, the splice), with a restart in the middle, then reads.

use serde::{Deserialize, Serialize};
use series_archive::archive::Archive;
use series_archive::host::Streams;
use series_archive::{Application, Definition, Position, Series, Stream, StreamConsumer};
use std::ops::Bound;
use std::time::{Duration, Instant};

/// One captured sample: a run, a probe within it, an ordinal axis and two measures.
#[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Capture {
    pub run: String,
    pub probe: String,
    pub ordinal: u64,
    /// An integer random walk.
    pub value: i64,
    /// A noisy float.
    pub noise: f64,
}

struct Demo;
impl Application for Demo {}

/// A small deterministic generator (SplitMix64), so the demo is reproducible.
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

fn rate(rows: usize, took: Duration) -> String {
    format!(
        "{:.2} M rows/s",
        rows as f64 / took.as_secs_f64().max(1e-9) / 1e6
    )
}

/// Publishes ticks `from..to` of the workload through `streams`, sealing every `cadence`
/// ticks (and at the end); prints the first three barriers and the last.
#[allow(clippy::too_many_arguments)]
fn publish_ticks(
    runtime: &tokio::runtime::Runtime,
    streams: &Streams<Demo>,
    shape: (usize, usize),
    (from, to, last): (u64, u64, u64),
    cadence: u64,
    mix: &mut Mix,
    walk: &mut [i64],
    tally: &mut Tally,
) {
    let (runs, probes) = shape;
    let mut tick = from;
    while tick < to {
        let end = (tick + cadence).min(to);
        let began = Instant::now();
        for t in tick..end {
            for r in 0..runs {
                for p in 0..probes {
                    let i = r * probes + p;
                    let m = mix.next();
                    walk[i] += (m % 7) as i64 - 3;
                    let row = Capture {
                        run: format!("run_{r}"),
                        probe: format!("probe.{p:02}"),
                        // An ordinal axis with gaps: some ticks skip ahead.
                        ordinal: t * 4 + (m >> 60) % 4,
                        value: walk[i],
                        noise: ((m >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0
                            + (t as f64 / 500.0).sin(),
                    };
                    // Every row of a tick shares its position: positions are not unique.
                    if let Err(e) = streams.publish(Position(t + 1), row) {
                        out!("publish refused: {e}");
                        return;
                    }
                    tally.rows += 1;
                }
            }
        }
        tally.publish += began.elapsed();
        let began = Instant::now();
        let durable = runtime.block_on(async { streams.seal::<Capture>().await });
        tally.seal += began.elapsed();
        tally.barriers += 1;
        tally.sealed += 1;
        if tally.sealed <= 3 || end == last {
            out!(
                "  barrier {:>4}: durable through position {durable}",
                tally.barriers
            );
        } else if tally.sealed == 4 {
            out!("  ...");
        }
        tick = end;
    }
}

/// What publishing cost.
#[derive(Default)]
struct Tally {
    rows: usize,
    publish: Duration,
    seal: Duration,
    /// The archive's barrier count.
    barriers: u64,
    /// Barriers this demo closed.
    sealed: u64,
}

pub fn run(
    dir: &std::path::Path,
    runs: usize,
    probes: usize,
    ticks: u64,
    cadence: u64,
    compact: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if runs == 0 || probes == 0 || ticks == 0 || cadence == 0 {
        return Err("--runs, --probes, --ticks and --cadence must all be at least 1".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let open = || Archive::open(dir, crate::config().select::<Capture>()?);
    let archive = open()?;
    let start_tick = archive.watermark(Capture::ID).0;
    let mut tally = Tally {
        barriers: archive.state().barriers,
        ..Tally::default()
    };
    out!(
        "demo: {runs} runs × {probes} probes, {ticks} ticks ({} rows), a barrier every {cadence} ticks, into {}",
        runs as u64 * probes as u64 * ticks,
        dir.display()
    );
    out!(
        "      published through the runtime: a window of {} rows, a supervisor owning the archive",
        Capture::WINDOW
    );
    if start_tick > 0 {
        out!("      (appending after watermark {start_tick})");
    }
    let mut mix = Mix(0x5eed ^ start_tick);
    let mut walk = vec![0i64; runs * probes];
    let last = start_tick + ticks;
    // Half the ticks, a restart in the middle (the new windows stand on the watermark, the
    // first query splices there), then the rest.
    let middle = start_tick + (ticks / cadence / 2).max(1).min(ticks / cadence) * cadence;
    let middle = if middle > start_tick && middle < last {
        middle
    } else {
        last
    };
    let streams: Streams<Demo> =
        runtime.block_on(Streams::boot(Some(archive), &[Capture::definition()]));
    publish_ticks(
        &runtime,
        &streams,
        (runs, probes),
        (start_tick, middle, last),
        cadence,
        &mut mix,
        &mut walk,
        &mut tally,
    );
    runtime.block_on(streams.stop())?;
    if middle < last {
        let streams: Streams<Demo> =
            runtime.block_on(Streams::boot(Some(open()?), &[Capture::definition()]));
        let floor = streams.floor::<Capture>();
        let track = ("run_0".to_owned(), "probe.00".to_owned());
        let spliced =
            runtime.block_on(async { streams.query::<Capture>(..).track(track.clone()).await })?;
        out!(
            "  restart: the window stands on watermark {floor}; the first query of ({}, {}) splices {} rows from the archive",
            track.0,
            track.1,
            spliced.len()
        );
        publish_ticks(
            &runtime,
            &streams,
            (runs, probes),
            (middle, last, last),
            cadence,
            &mut mix,
            &mut walk,
            &mut tally,
        );
        // A query while the window holds the newest rows: the window above its floor, the
        // archive beneath, each boundary row once.
        let window_floor = streams.floor::<Capture>();
        let spliced =
            runtime.block_on(async { streams.query::<Capture>(..).track(track.clone()).await })?;
        out!(
            "  live query of ({}, {}): {} rows (window floor {window_floor}: the newest from the window, the rest from the archive)",
            track.0,
            track.1,
            spliced.len()
        );
        // A survey while the runtime is live: buckets come from what a barrier made durable.
        let began = Instant::now();
        let buckets = runtime.block_on(async {
            streams
                .survey::<Capture>(..)
                .track(track.clone())
                .budget(400)
                .await
        })?;
        out!(
            "  live survey of ({}, {}) at budget 400: {} buckets in {:.2?}, across the lane",
            track.0,
            track.1,
            buckets.len(),
            began.elapsed()
        );
        runtime.block_on(streams.stop())?;
    }
    let rows_total = tally.rows;
    let (stage_time, seal_time, barriers) = (tally.publish, tally.seal, tally.sealed);
    let mut archive = open()?;
    let definition: Definition = Capture::definition();
    let d = archive.describe()?;
    let s = d
        .streams
        .iter()
        .find(|s| s.id == Capture::ID)
        .ok_or("the capture stream is recorded")?;
    out!();
    out!(
        "published {rows_total} rows in {:.2?} ({} on the publishing thread), sealed in {:.2?} ({}, {} barriers with syncs)",
        stage_time,
        rate(rows_total, stage_time),
        seal_time,
        rate(rows_total, seal_time),
        barriers
    );
    out!(
        "archive: {} rows in {} tracks, {} files, {} bytes ({:.1} bytes/row)",
        s.rows,
        s.tracks.len(),
        s.files,
        s.bytes,
        s.bytes as f64 / s.rows.max(1) as f64
    );
    out!(
        "levels: {} files, {} bytes ({:.1}% on top of the raw rows)",
        s.level_files,
        s.level_bytes,
        100.0 * s.level_bytes as f64 / s.bytes.max(1) as f64
    );

    // The lifecycle: barrier files (every track, small row groups) become per-track
    // segments, level partials merge size-tiered into runs of whole cells; each step swaps in
    // one manifest record.
    let began = Instant::now();
    let compacted = if compact {
        archive.compact(false, |_, _, _| {})?
    } else {
        Vec::new()
    };
    if !compacted.is_empty() {
        let t = series_archive::archive::lifecycle::CompactReport::total(&compacted);
        out!(
            "compaction ({} step(s), automatic): {} barrier files ({} bytes) → {} segments ({} bytes); {} level files merged size-tiered ({} bytes → {} bytes), in {:.2?}",
            compacted.len(),
            t.files_in,
            t.bytes_in,
            t.files_out,
            t.bytes_out,
            t.level_files_in,
            t.level_bytes_in,
            t.level_bytes_out,
            began.elapsed()
        );
    }
    if !compacted.is_empty() {
        let d = archive.describe()?;
        if let Some(s) = d.streams.iter().find(|s| s.id == Capture::ID) {
            out!(
                "after compaction: {} files, {:.1} bytes/row; levels {:.1}% on top of the raw rows",
                s.files + s.level_files,
                s.bytes as f64 / s.rows.max(1) as f64,
                100.0 * s.level_bytes as f64 / s.bytes.max(1) as f64
            );
        }
    }

    // Reads, through the contract (typed rows back) and the Arrow path.
    out!();
    let wm = archive.watermark(Capture::ID).0;
    let (lo, hi) = (wm * 45 / 100, wm * 55 / 100);
    let track = vec!["run_1".to_owned(), format!("probe.{:02}", 3 % probes)];
    let began = Instant::now();
    let typed = runtime.block_on(Series::<Demo>::rows(
        &mut archive,
        definition.clone(),
        &track,
        Bound::Included(Position(lo)),
        Bound::Excluded(Position(hi)),
    ));
    match typed {
        Ok(rows) => {
            out!(
                "rows of track ({}) over positions [{lo}, {hi}): {} rows in {:.2?}",
                track.join(", "),
                rows.len(),
                began.elapsed()
            );
            for at in rows.iter().take(3) {
                let c = at.row.downcast_ref::<Capture>().ok_or("a Capture row")?;
                out!(
                    "  @{:<8} run={} probe={} ordinal={} value={} noise={:.4}",
                    at.position,
                    c.run,
                    c.probe,
                    c.ordinal,
                    c.value,
                    c.noise
                );
            }
        }
        Err(refusal) => out!("rows refused: {refusal}"),
    }
    let began = Instant::now();
    let run = format!("run_{}", runs - 1);
    let prefix = archive.read_rows(
        Capture::ID,
        std::slice::from_ref(&run),
        Bound::Unbounded,
        Bound::Unbounded,
    );
    match prefix {
        Ok(b) => out!("rows beneath the prefix ({run}): {} rows, publish order across {probes} probes, in {:.2?}", b.num_rows(), began.elapsed()),
        Err(e) => out!("prefix read refused: {e}"),
    }
    let began = Instant::now();
    let all = archive.read_rows(Capture::ID, &[], Bound::Unbounded, Bound::Unbounded)?;
    let took = began.elapsed();
    out!(
        "every row, unnarrowed: {} rows in {:.2?} ({}, digests verified, merged by publish order)",
        all.num_rows(),
        took,
        rate(all.num_rows(), took)
    );
    // Display reads and statistics, answered from the M4 levels sealed with the rows.
    out!();
    let began = Instant::now();
    let survey = archive.survey(Capture::ID, &track, Bound::Unbounded, Bound::Unbounded, 400)?;
    let took = began.elapsed();
    if let Some(plan) = survey.plan {
        out!(
            "survey of track ({}) at budget 400: {} buckets from level {} (cell width {}) in {:.2?} (the first survey reads its level row groups)",
            track.join(", "),
            survey.buckets.len(),
            plan.level,
            plan.cell_width,
            took
        );
    }
    let began = Instant::now();
    let again = archive.survey(Capture::ID, &track, Bound::Unbounded, Bound::Unbounded, 400)?;
    out!(
        "  again: {} buckets in {:.2?}",
        again.buckets.len(),
        began.elapsed()
    );
    for kind in [
        series_archive::Aggregate::Mean,
        series_archive::Aggregate::percentile(95),
    ] {
        let began = Instant::now();
        let folded = archive.fold(
            Capture::ID,
            &track,
            Bound::Unbounded,
            Bound::Unbounded,
            kind,
        )?;
        let took = began.elapsed();
        let answers: Vec<String> = folded
            .answers
            .iter()
            .map(|a| {
                format!(
                    "{} = {}",
                    folded.fields[a.field as usize],
                    a.value.map_or("-".into(), |v| format!("{v:.4}"))
                )
            })
            .collect();
        out!(
            "{kind} of track ({}) from {}: {} in {:.2?}",
            track.join(", "),
            folded.source,
            answers.join(", "),
            took
        );
    }
    out!();
    let damaged = archive.verify(|_, _| {});
    out!(
        "verify: {}",
        if damaged.is_empty() {
            "every digest and entry ok".to_owned()
        } else {
            format!("DAMAGED: {damaged:?}")
        }
    );
    runtime.block_on(StreamConsumer::<Demo>::flush(&mut archive))?;
    out!();
    out!("open it elsewhere:  duckdb -c \"load delta; select run, probe, count(*) from delta_scan('{}/streams/capture/rows') group by all order by all\"", dir.display());
    out!(
        "in a notebook:      SERIES_ARCHIVE_DIR={} jupyter lab notebooks/   (Delta tables: streams/capture/rows, streams/capture/levels)",
        dir.display()
    );
    out!(
        "inspect it:         series-archive inspect {}",
        dir.display()
    );
    out!(
        "look at it:         series-archive survey {} --stream capture --track run_1 --budget 800 --plot survey.png",
        dir.display()
    );
    Ok(())
}
