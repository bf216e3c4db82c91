//! A soak: a simulated day of 250 ms barriers over a few hundred tracks (runs that start and
//! end through the day, four probes each, plus an always-on `host` run) with the clock passed
//! in, raw rows retired by age, level 0 by a longer age, higher levels kept forever, finished
//! runs retired whole after an idle time, and `maintain(now)` on a cadence with a small
//! compaction target and checkpoint size. Throughout:
//!
//! - live data and level files stay under a bound derived from the live tracks and their
//!   bytes (never from the number of barriers), and the files on disk are exactly those;
//! - the manifest stays under its checkpoint size (plus one cadence of records);
//! - every track's floors (raw position, axis, `_seq`; each level's axis) only move forward,
//!   no retirement comes before its lifetime, and idle tracks are retired whole;
//! - rows read back for a sample of tracks equal exactly the rows published at or above the
//!   track's floor, in publish order; level folds and surveys equal folds of the published
//!   rows (levels outlive raw rows), percentiles equal those of the rows still raw;
//! - a reopen (and a read-only open beside the writer) mid-run serves the same.
//!
//! Scale: every barrier really syncs, so a whole day is far too long for CI.
//! `SERIES_ARCHIVE_SOAK_HOURS` (a float, default [`DEFAULT_HOURS`]) is the simulated span;
//! lifetimes, run lengths and the idle time are fractions of it (at 24 h: raw 6 h, level 0
//! 12 h, idle 1 h), so every check runs at any span. The figures are printed at the end.
//!
//! The workload generator (`mod day`) mirrors the one in `examples/soak_day.rs`, which builds
//! the same day in release and reports open time, file counts and latencies: keep the two
//! equal.

mod common;

use common::{batch, capture_config, rows_of, Row};
use series_archive::archive::manifest::TrackState;
use series_archive::archive::{Archive, Config, ReadError};
use series_archive::{Aggregate, BeneathWindow, Bucket, TrackKey};
use std::collections::BTreeMap;
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The simulated span when `SERIES_ARCHIVE_SOAK_HOURS` is not set (about a minute of a
/// debug test run on two cores).
const DEFAULT_HOURS: f64 = 0.05;
/// Deep checks (rows, folds, surveys) every this many `maintain` calls.
const DEEP_EVERY: u64 = 4;
/// A barrier's manifest record is at most this many bytes in this workload.
const RECORD_BOUND: u64 = 16 << 10;
/// Relative tolerance for sums and means (levels sum cell by cell, the check row by row).
const TOLERANCE: f64 = 1e-9;

/// The simulated day's workload, shared with `examples/soak_day.rs`.
#[path = "common/day.rs"]
mod day;

use common::hand::Hand;

fn config(clock: &Arc<Hand>, barriers: u64) -> Config {
    day::lifecycle(capture_config().clock(clock.clone()), barriers)
}

/// The simulated day and what has been published of it.
struct Sim {
    barriers: u64,
    tracks: Vec<day::Track>,
    /// Barriers sealed so far.
    sealed: u64,
}

impl Sim {
    /// Barriers of `track` sealed so far: `start..end`.
    fn published(&self, t: usize) -> std::ops::Range<u64> {
        let track = &self.tracks[t];
        track.start.min(self.sealed)..track.end.min(self.sealed)
    }

    /// Every row of `track` published so far, with its position, in publish order.
    fn rows(&self, t: usize) -> Vec<(u64, Row)> {
        let track = &self.tracks[t];
        let range = self.published(t);
        let n = (range.end - range.start) * day::ROWS_PER_BARRIER;
        (0..n)
            .map(|i| {
                let (ordinal, value, noise) = day::row(track, i);
                let b = track.start + i / day::ROWS_PER_BARRIER;
                let position = b * day::ROWS_PER_BARRIER + i % day::ROWS_PER_BARRIER + 1;
                (
                    position,
                    Row {
                        run: track.run.clone(),
                        probe: track.probe.clone(),
                        ordinal,
                        value,
                        noise,
                    },
                )
            })
            .collect()
    }

    fn labels(&self, t: usize) -> Vec<String> {
        vec![self.tracks[t].run.clone(), self.tracks[t].probe.clone()]
    }
}

fn state_of<'a>(archive: &'a Archive, labels: &[String]) -> &'a TrackState {
    let key = TrackKey::encode(labels).expect("labels");
    archive.state().streams["capture"]
        .tracks
        .get(&key)
        .unwrap_or_else(|| panic!("track {labels:?} is not in the catalog"))
}

/// What only moves forward of a track.
#[derive(Clone, Debug, PartialEq)]
struct Floors {
    raw: [u64; 3],
    levels: Vec<u64>,
}

fn floors(t: &TrackState) -> Floors {
    Floors {
        raw: [t.raw.position, t.raw.axis, t.raw.seq],
        levels: (0..8).map(|k| t.level_floor(k).axis).collect(),
    }
}

/// Tallies of what the lifecycle did, for the closing figures and the "it really happened"
/// checks.
#[derive(Debug, Default)]
struct Tally {
    maintains: u64,
    retirements: usize,
    whole: usize,
    compactions: usize,
    checkpoints: usize,
    deep_checks: u64,
    max_data_files: usize,
    max_level_files: usize,
    max_manifest: u64,
    max_data_bound: usize,
    raw_moved: bool,
    level0_moved: bool,
    maintain_time: Duration,
}

fn count_dir(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| e.as_ref().map_or(true, |e| e.file_name() != "_delta_log"))
            .count()
    })
}

/// Files under `dir`, at any depth (level tables sit in `levels/level=K/`), its Delta log
/// aside.
fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.map(|e| {
            let path = e.expect("entry").path();
            if path.file_name().is_some_and(|n| n == "_delta_log") {
                0
            } else if path.is_dir() {
                count_files(&path)
            } else {
                1
            }
        })
        .sum()
    })
}

/// Checks after a `maintain(now)`: bounds, floors, lifetimes.
fn after_maintain(
    archive: &Archive,
    dir: &Path,
    sim: &Sim,
    now: u64,
    previous: &mut BTreeMap<Vec<String>, Floors>,
    tally: &mut Tally,
) {
    let stream = &archive.state().streams["capture"];
    // Exactly the committed files are on disk.
    assert_eq!(
        count_dir(&dir.join("streams/capture/rows")),
        stream.files.len(),
        "data files on disk vs in the manifest"
    );
    assert_eq!(
        count_files(&dir.join("streams/capture/levels")),
        stream.levels.len(),
        "level files on disk vs in the manifest"
    );
    // File counts: per live track, its bytes over half the target (a compacted segment
    // below half the target is rewritten once more of its slice can join it), plus the
    // retention slices its live rows can span (compaction cuts segments at an eighth of the
    // raw lifetime so retention can retire them: a lifetime, the lag of a file's newest row,
    // and a cadence of maintenance), plus a tail; plus what stays below the compaction
    // threshold. Nothing here grows with the number of barriers.
    let (raw_age, level0_age, idle) = day::lifetimes(sim.barriers);
    let ns = |d: Duration| d.as_nanos() as u64;
    let slice = (ns(raw_age) / 8).max(1);
    let cadence = day::maintain_every(sim.barriers) * day::BARRIER_NS;
    let slices = (ns(raw_age) + 2 * slice + cadence).div_ceil(slice) as usize + 1;
    let mut bound = day::MIN_INPUTS;
    for groups in stream.locate_all() {
        if groups.is_empty() {
            continue;
        }
        let bytes: u64 = groups
            .iter()
            .map(|g| stream.files[g.file].groups[g.group].span.len)
            .sum();
        bound += 2 + slices + (2 * bytes / day::TARGET_BYTES) as usize;
    }
    assert!(
        stream.files.len() <= bound,
        "{} live data files, bound {bound} ({} barriers sealed)",
        stream.files.len(),
        sim.sealed
    );
    // Level runs merge size-tiered: at most FANOUT − 1 runs of each tier stay, and tiers
    // grow with the logarithm of the barriers sealed.
    let runs = series_archive::archive::lifecycle::plan::level_runs(&stream.levels);
    let fanout = series_archive::archive::lifecycle::plan::LEVEL_FANOUT;
    let tiers = (sim.sealed.max(1) as f64).log(fanout as f64).ceil() as usize + 2;
    assert!(
        runs.len() <= (fanout - 1) * tiers,
        "{} live level runs after {} barriers: {:?}",
        runs.len(),
        sim.sealed,
        runs.iter().map(|r| r.tier).collect::<Vec<_>>()
    );
    assert!(
        archive.manifest_bytes() <= day::CHECKPOINT_BYTES,
        "manifest {} bytes after maintain",
        archive.manifest_bytes()
    );
    tally.max_data_files = tally.max_data_files.max(stream.files.len());
    tally.max_level_files = tally.max_level_files.max(stream.levels.len());
    tally.max_data_bound = tally.max_data_bound.max(bound);

    for (t, track) in sim.tracks.iter().enumerate() {
        let published = sim.published(t);
        if published.is_empty() {
            continue;
        }
        let labels = sim.labels(t);
        let state = state_of(archive, &labels);
        // Floors only move forward, and a track never leaves the catalog.
        let now_floors = floors(state);
        if let Some(before) = previous.get(&labels) {
            let forward = now_floors.raw.iter().zip(&before.raw).all(|(a, b)| a >= b)
                && now_floors
                    .levels
                    .iter()
                    .zip(&before.levels)
                    .all(|(a, b)| a >= b);
            assert!(
                forward,
                "{labels:?}: floors moved back: {before:?} -> {now_floors:?}"
            );
        }
        previous.insert(labels.clone(), now_floors);
        // Idle tracks are retired whole by the sweep; others keep what their lifetimes say.
        let last_sealed = day::at(sim.barriers, published.end - 1);
        if last_sealed < now.saturating_sub(ns(idle)) {
            assert!(
                state.whole,
                "{labels:?} idle since {last_sealed}, not retired"
            );
            continue;
        }
        assert!(
            !state.whole,
            "{labels:?} retired whole before its idle time"
        );
        if state.raw.position > 0 && !track.run.starts_with("run") {
            tally.raw_moved = true;
        }
        if state.level_floor(0).axis > 0 {
            tally.level0_moved = true;
        }
        // The first barrier of this track sealed within each lifetime.
        let within = |age: Duration| {
            let cutoff = now.saturating_sub(ns(age));
            published
                .clone()
                .find(|&b| day::at(sim.barriers, b) >= cutoff)
        };
        if let Some(b) = within(raw_age) {
            let position = b * day::ROWS_PER_BARRIER + 1;
            assert!(
                state.floor().0 <= position,
                "{labels:?}: raw floor {} passes position {position}, sealed within the raw lifetime",
                state.floor().0
            );
        }
        if let Some(b) = within(level0_age) {
            let i = (b - track.start) * day::ROWS_PER_BARRIER;
            let axis = day::row(track, i).0 / 1024 * 1024;
            assert!(
                state.level_floor(0).axis <= axis,
                "{labels:?}: level 0 floor {} passes axis {axis}, sealed within its lifetime",
                state.level_floor(0).axis
            );
        }
    }
}

/// The discrete percentile as `Aggregate::scanned` defines it (DuckDB's `quantile_disc`).
fn percentile(values: &[f64], rank: u8) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let below = ((1.0 - f64::from(rank) / 100.0) * n as f64) as usize;
    Some(v[n.saturating_sub(below).max(1) - 1])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

fn fields(rows: &[(u64, Row)]) -> [Vec<(u64, f64)>; 2] {
    [
        rows.iter()
            .map(|(_, r)| (r.ordinal, r.value as f64))
            .collect(),
        rows.iter().map(|(_, r)| (r.ordinal, r.noise)).collect(),
    ]
}

fn same_bucket(got: &Bucket, want: &Bucket) -> bool {
    got.field == want.field
        && got.count == want.count
        && got.first == want.first
        && got.last == want.last
        && got.min == want.min
        && got.max == want.max
        && close(got.sum, want.sum)
        && close(got.sum_sq, want.sum_sq)
}

/// Rows, folds, percentiles and a survey of `t`, against the rows published.
fn deep_check(archive: &Archive, sim: &Sim, t: usize) {
    let labels = sim.labels(t);
    let state = state_of(archive, &labels);
    let all = sim.rows(t);
    let floor = state.floor();
    let kept: Vec<(u64, Row)> = all.iter().filter(|(p, _)| *p >= floor.0).cloned().collect();
    let got = archive
        .read_rows("capture", &labels, Included(floor), Unbounded)
        .expect("rows at and above the floor");
    assert_eq!(
        rows_of(&got),
        kept,
        "{labels:?}: rows at or above {floor:?}"
    );
    if floor.0 > 0 {
        let refused = archive
            .read_rows("capture", &labels, Unbounded, Unbounded)
            .expect_err("beneath the floor");
        assert!(
            matches!(refused, ReadError::Refused(BeneathWindow::Floor { floor: f, axis: None }) if f == floor),
            "{labels:?}: {refused:?}"
        );
    }
    if state.whole {
        assert!(kept.is_empty(), "{labels:?} retired whole serves rows");
        let s = archive.survey("capture", &labels, Unbounded, Unbounded, 400);
        assert!(
            matches!(s, Err(ReadError::Floor { tier: "levels", .. })),
            "{labels:?}: {s:?}"
        );
        return;
    }
    // Level folds over the whole track equal folds of every row ever published: levels 1
    // and up live forever, so they outlive the raw rows.
    let per_field = fields(&all);
    for kind in Aggregate::LEVEL_FOLDS {
        let folded = archive
            .fold("capture", &labels, Unbounded, Unbounded, kind)
            .unwrap_or_else(|e| panic!("{labels:?} {kind}: {e}"));
        for (f, values) in per_field.iter().enumerate() {
            let answer = folded.answers[f];
            let v: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
            let want = match kind {
                Aggregate::Count => v.len() as f64,
                Aggregate::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
                Aggregate::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Aggregate::Sum => v.iter().sum(),
                _ => v.iter().sum::<f64>() / v.len() as f64,
            };
            let got = answer.value.expect("a value");
            let ok = match kind {
                Aggregate::Sum | Aggregate::Mean => close(got, want),
                _ => got == want,
            };
            assert!(
                ok && answer.count == v.len() as u64,
                "{labels:?} {kind} field {f} from {}: {got} over {}, the rows say {want} over {}",
                folded.source,
                answer.count,
                v.len()
            );
        }
    }
    // Percentiles scan the raw rows still kept: the whole track while none is retired, from
    // the raw floor's axis up otherwise (and refused beneath it).
    let kept_fields = fields(&kept);
    let from = if state.raw.axis == 0 {
        Unbounded
    } else {
        let refused = archive
            .fold(
                "capture",
                &labels,
                Unbounded,
                Unbounded,
                Aggregate::percentile(50),
            )
            .expect_err("a percentile beneath the raw floor");
        assert!(
            matches!(refused, ReadError::Floor { tier: "raw", .. }),
            "{labels:?}: {refused:?}"
        );
        Included(state.raw.axis)
    };
    for rank in [50, 95] {
        let folded = archive
            .fold(
                "capture",
                &labels,
                from,
                Unbounded,
                Aggregate::percentile(rank),
            )
            .unwrap_or_else(|e| panic!("{labels:?} p{rank}: {e}"));
        for (f, values) in kept_fields.iter().enumerate() {
            let v: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
            assert_eq!(
                folded.answers[f].value,
                percentile(&v, rank),
                "{labels:?} p{rank} field {f}"
            );
            assert_eq!(folded.answers[f].count, v.len() as u64);
        }
    }
    // A survey of the whole track: every bucket equals the fold of the published rows in it.
    let survey = archive
        .survey("capture", &labels, Unbounded, Unbounded, 400)
        .unwrap_or_else(|e| panic!("{labels:?} survey: {e}"));
    let plan = survey.plan.expect("a plan");
    let mut want: BTreeMap<(u32, u64), Bucket> = BTreeMap::new();
    for (f, values) in per_field.iter().enumerate() {
        for &(axis, v) in values {
            let cell = axis / plan.cell_width;
            if !(plan.cells[0]..=plan.cells[1]).contains(&cell) {
                continue;
            }
            want.entry((f as u32, cell))
                .and_modify(|b| b.push(axis, v))
                .or_insert_with(|| Bucket::of(f as u32, axis, v));
        }
    }
    let want: Vec<Bucket> = want.into_values().collect();
    assert_eq!(
        survey.buckets.len(),
        want.len(),
        "{labels:?}: buckets of {plan:?}"
    );
    for (got, want) in survey.buckets.iter().zip(&want) {
        assert!(
            same_bucket(got, want),
            "{labels:?} {plan:?}: {got:?} vs the rows' {want:?}"
        );
    }
}

/// The tracks deep-checked: the host's probes, and a spread of runs that have started
/// (active, finished, retired), one probe each.
fn sample(sim: &Sim, round: u64) -> Vec<usize> {
    let mut out: Vec<usize> = (0..day::PROBES).collect();
    let started: Vec<usize> = (day::PROBES..sim.tracks.len())
        .step_by(day::PROBES)
        .filter(|&t| sim.tracks[t].start < sim.sealed)
        .collect();
    let probe = (round as usize) % day::PROBES;
    for &t in started.iter().rev().take(4) {
        out.push(t + probe);
    }
    for &t in started.iter().rev().skip(4).step_by(5).take(4) {
        out.push(t + (probe + 1) % day::PROBES);
    }
    out
}

#[test]
fn a_simulated_day_stays_bounded_and_serves_what_it_keeps() {
    let hours: f64 = std::env::var("SERIES_ARCHIVE_SOAK_HOURS")
        .ok()
        .map(|h| {
            h.parse()
                .expect("SERIES_ARCHIVE_SOAK_HOURS is a number of hours")
        })
        .unwrap_or(DEFAULT_HOURS);
    let barriers = day::barriers(hours);
    let every = day::maintain_every(barriers);
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(Hand::default());
    let mut sim = Sim {
        barriers,
        tracks: day::schedule(barriers),
        sealed: 0,
    };
    let mut archive = Archive::open(dir.path(), config(&clock, barriers)).expect("open");
    let mut previous = BTreeMap::new();
    let mut tally = Tally::default();
    let mut rows = 0u64;
    let mut reopen = Duration::ZERO;
    let started = Instant::now();
    let middle = barriers / every / 2;
    for b in 0..barriers {
        let now = day::at(barriers, b);
        clock.set(now);
        let published: Vec<Row> = day::barrier(&sim.tracks, b)
            .into_iter()
            .map(|(t, i, _)| {
                let (ordinal, value, noise) = day::row(&sim.tracks[t], i);
                Row {
                    run: sim.tracks[t].run.clone(),
                    probe: sim.tracks[t].probe.clone(),
                    ordinal,
                    value,
                    noise,
                }
            })
            .collect();
        let positions: Vec<u64> = day::barrier(&sim.tracks, b)
            .into_iter()
            .map(|r| r.2)
            .collect();
        if !published.is_empty() {
            archive
                .stage_batch("capture", &batch(&published), &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
        }
        rows += published.len() as u64;
        sim.sealed = b + 1;
        let manifest = archive.manifest_bytes();
        tally.max_manifest = tally.max_manifest.max(manifest);
        assert!(
            manifest <= day::CHECKPOINT_BYTES + every * RECORD_BOUND,
            "manifest {manifest} bytes at barrier {b}"
        );
        if (b + 1) % every != 0 {
            continue;
        }
        let t = Instant::now();
        let done = archive.maintain(now).expect("maintain");
        tally.maintain_time += t.elapsed();
        tally.maintains += 1;
        tally.retirements += done.retired.len();
        tally.whole += done.retired.iter().map(|r| r.whole).sum::<usize>();
        tally.compactions += done.compacted.len();
        tally.checkpoints += usize::from(done.checkpoint.is_some());
        after_maintain(&archive, dir.path(), &sim, now, &mut previous, &mut tally);
        let round = tally.maintains;
        if round % DEEP_EVERY == 0 || round == middle {
            tally.deep_checks += 1;
            for t in sample(&sim, round) {
                deep_check(&archive, &sim, t);
            }
        }
        if round == middle {
            // A read-only open beside the writer, then a reopen, serve the same.
            let reader = Archive::open(dir.path(), config(&clock, barriers).read_only(true))
                .expect("read-only open");
            assert_eq!(reader.state().streams, archive.state().streams);
            for t in sample(&sim, round + 1) {
                deep_check(&reader, &sim, t);
            }
            drop(reader);
            let before = archive.state().streams.clone();
            drop(archive);
            let t = Instant::now();
            archive = Archive::open(dir.path(), config(&clock, barriers)).expect("reopen");
            reopen = t.elapsed();
            assert_eq!(archive.state().streams, before, "the reopened state");
            assert!(
                archive.recovery().quarantined.is_empty(),
                "{:?}",
                archive.recovery()
            );
            for t in sample(&sim, round) {
                deep_check(&archive, &sim, t);
            }
        }
    }
    let wall = started.elapsed();
    // The end: everything verifies; every sampled track, and then a fresh open, serve the same.
    assert!(archive.verify(|_, _| {}).is_empty());
    for t in sample(&sim, 0) {
        deep_check(&archive, &sim, t);
    }
    let manifest = archive.manifest_bytes();
    let generation = archive.state().generation;
    drop(archive);
    let t = Instant::now();
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    let open = t.elapsed();
    for t in sample(&sim, 1) {
        deep_check(&archive, &sim, t);
    }
    let stream = &archive.state().streams["capture"];
    let bytes = |files: &[series_archive::archive::manifest::SegmentFile]| {
        files.iter().map(|f| f.bytes).sum::<u64>()
    };
    eprintln!(
        "soak: {hours} simulated hours, {barriers} barriers, {rows} rows, {} tracks, maintain every {every} barriers\n\
         soak: wall {:.1} s ({:.2} ms a barrier, {:.1} s in {} maintains: {} retirements retiring {} tracks whole, {} compactions, {} checkpoints), {} deep checks\n\
         soak: live {} data files ({} bytes; most {} against a bound of at most {}), {} level files ({} bytes; most {}), manifest {manifest} bytes (most {}), generation {generation}\n\
         soak: open {:.1} ms at the end, reopen {:.1} ms mid-run",
        sim.tracks.len(),
        wall.as_secs_f64(),
        wall.as_secs_f64() * 1e3 / barriers as f64,
        tally.maintain_time.as_secs_f64(),
        tally.maintains,
        tally.retirements,
        tally.whole,
        tally.compactions,
        tally.checkpoints,
        tally.deep_checks,
        stream.files.len(),
        bytes(&stream.files),
        tally.max_data_files,
        tally.max_data_bound,
        stream.levels.len(),
        bytes(&stream.levels),
        tally.max_level_files,
        tally.max_manifest,
        open.as_secs_f64() * 1e3,
        reopen.as_secs_f64() * 1e3,
    );
    // The span was long enough for the lifecycle to do everything it does.
    assert!(tally.compactions > 0, "{tally:?}");
    assert!(tally.checkpoints > 0, "{tally:?}");
    assert!(tally.whole > 0, "{tally:?}");
    assert!(
        tally.raw_moved,
        "the host's raw floor never moved: {tally:?}"
    );
    assert!(
        tally.level0_moved,
        "no level 0 floor moved by age: {tally:?}"
    );
    assert!(tally.deep_checks >= 2, "{tally:?}");
}
