//! The simulated day of `tests/soak.rs` and `examples/soak_day.rs`: one workload for both.
#![allow(dead_code)]

use series_archive::archive::lifecycle::{Compaction, Lifetime, Retention};
use series_archive::archive::Config;
use std::time::Duration;

/// Simulated time between barriers.
pub const BARRIER_NS: u64 = 250_000_000;
/// Rows each active track publishes per barrier.
pub const ROWS_PER_BARRIER: u64 = 4;
/// Probes per run.
pub const PROBES: usize = 4;
/// Runs started through the day (besides the always-on host).
pub const RUNS: usize = 75;
/// A whole hour (ns since the epoch); the day starts a sixteenth of its span before it,
/// so the archive's hourly age marks split early in the span.
pub const HOUR_NS: u64 = 1_700_002_800 * 1_000_000_000;
/// Compaction: small segments so compaction really shapes files within the span.
pub const TARGET_BYTES: u64 = 64 << 10;
/// Rows per row group in a compacted segment.
pub const GROUP_ROWS: usize = 4096;
/// Compaction starts at this many files to rewrite.
pub const MIN_INPUTS: usize = 16;
/// The manifest size past which `maintain` checkpoints.
pub const CHECKPOINT_BYTES: u64 = 1 << 20;

/// One track: a run's probe, active for barriers `start..end`.
#[derive(Clone, Debug)]
pub struct Track {
    pub id: u64,
    pub run: String,
    pub probe: String,
    pub start: u64,
    pub end: u64,
}

/// splitmix64.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Barriers in `hours` of simulated time.
pub fn barriers(hours: f64) -> u64 {
    ((hours * 3600.0 * 1e9) / BARRIER_NS as f64)
        .round()
        .max(1.0) as u64
}

/// The clock at barrier `b` of a day of `barriers` barriers.
pub fn at(barriers: u64, b: u64) -> u64 {
    HOUR_NS - barriers * BARRIER_NS / 16 + b * BARRIER_NS
}

/// Barriers between `maintain` calls: a simulated minute, or more often in a short span
/// (at least 16 calls a span).
pub fn maintain_every(barriers: u64) -> u64 {
    (barriers / 16).clamp(8, 240)
}

/// The tracks of a day of `barriers` barriers: the host's probes all day, then `RUNS`
/// runs spread over the first 90 %, each lasting 1/48 to 1/8 of the span.
pub fn schedule(barriers: u64) -> Vec<Track> {
    let mut tracks = Vec::new();
    let mut push = |run: String, start: u64, end: u64| {
        for p in 0..PROBES {
            tracks.push(Track {
                id: tracks.len() as u64,
                run: run.clone(),
                probe: format!("probe.{p}"),
                start,
                end,
            });
        }
    };
    push("host".to_owned(), 0, barriers);
    let spacing = (barriers * 9 / 10 / RUNS as u64).max(1);
    let (short, long) = ((barriers / 48).max(1), (barriers / 8).max(2));
    for r in 0..RUNS {
        let h = mix(r as u64 + 1);
        let start = r as u64 * spacing + h % spacing;
        let len = short + (h >> 20) % (long - short).max(1);
        push(
            format!("run_{r:03}"),
            start.min(barriers),
            (start + len).min(barriers),
        );
    }
    tracks
}

/// Row `i` of `track`: (ordinal, value, noise). The ordinal (the axis) strictly increases.
pub fn row(track: &Track, i: u64) -> (u64, i64, f64) {
    let h = mix((track.id << 40) ^ i);
    let ordinal = 1_000 + i * 10 + h % 3;
    let saw = ((i / 64) % 200) as i64 - 100;
    let value = saw * 5 + ((h >> 8) % 41) as i64 - 20;
    let noise = (h >> 11) as f64 / (1u64 << 53) as f64 * 100.0 - 50.0;
    (ordinal, value, noise)
}

/// The rows of barrier `b`, in publish order: sub-tick by sub-tick, every active track
/// in schedule order. Each as (track index, row index in the track, position).
pub fn barrier(tracks: &[Track], b: u64) -> Vec<(usize, u64, u64)> {
    let active: Vec<usize> = (0..tracks.len())
        .filter(|&t| tracks[t].start <= b && b < tracks[t].end)
        .collect();
    let mut out = Vec::with_capacity(active.len() * ROWS_PER_BARRIER as usize);
    for sub in 0..ROWS_PER_BARRIER {
        let position = b * ROWS_PER_BARRIER + sub + 1;
        for &t in &active {
            out.push((t, (b - tracks[t].start) * ROWS_PER_BARRIER + sub, position));
        }
    }
    out
}

/// The declared lifetimes, as fractions of the span (at 24 h: raw 6 h, level 0 12 h,
/// idle 1 h; levels 1 and up forever).
pub fn lifetimes(barriers: u64) -> (Duration, Duration, Duration) {
    let span = barriers * BARRIER_NS;
    (
        Duration::from_nanos(span / 4),
        Duration::from_nanos(span / 2),
        Duration::from_nanos(span / 24),
    )
}

/// `config` with the day's lifecycle: raw rows and level 0 by age, finished runs retired
/// whole after the idle time, small compaction targets and checkpoints.
pub fn lifecycle(config: Config, barriers: u64) -> Config {
    let (raw, level0, idle) = lifetimes(barriers);
    config
        .retention(
            "capture",
            Retention::forever()
                .raw(Lifetime::Age(raw))
                .level(0, Lifetime::Age(level0))
                .idle(idle),
        )
        .compaction(Compaction {
            target_bytes: TARGET_BYTES,
            group_rows: GROUP_ROWS,
            min_inputs: MIN_INPUTS,
        })
        .checkpoint_bytes(CHECKPOINT_BYTES)
}
