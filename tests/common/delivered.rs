//! Deliveries of the capture stream as the packed-layout tests make and check them: rows by
//! `(run, probe, tick)`, and what a prefix and position range of them should read back.

use super::Row;
use series_archive::Position;
use std::ops::Bound;

/// The rows delivered, as `(position, row)` in publish order.
pub type Delivered = Vec<(u64, Row)>;

/// The row of track `(run_<run>, p<probe>)` at `tick` (its axis is `tick × 10`).
pub fn row(run: usize, probe: usize, tick: u64) -> Row {
    Row {
        run: format!("run_{run}"),
        probe: format!("p{probe}"),
        ordinal: tick * 10,
        value: (run * 1000 + probe) as i64 - tick as i64,
        noise: tick as f64 / 3.0,
    }
}

/// Rows of `runs × probes` tracks over `ticks`, interleaved as a scraper delivers them (each
/// tick every track in key order), a track taking part from its `starts` tick on (`None`:
/// never), positions from 1.
pub fn interleaved(runs: usize, probes: usize, ticks: u64, starts: &[Option<u64>]) -> Delivered {
    let mut delivered = Vec::new();
    for tick in 0..ticks {
        for run in 0..runs {
            for probe in 0..probes {
                if starts[run * probes + probe].is_some_and(|s| tick >= s) {
                    delivered.push((delivered.len() as u64 + 1, row(run, probe, tick)));
                }
            }
        }
    }
    delivered
}

/// Labels from string slices.
pub fn labels(of: &[&str]) -> Vec<String> {
    of.iter().map(|s| s.to_string()).collect()
}

/// The deliveries of the tracks beneath `prefix` with positions in `start..end`, in
/// publish order: what a read of them answers.
pub fn expected(
    all: &[(u64, Row)],
    prefix: &[String],
    start: Bound<Position>,
    end: Bound<Position>,
) -> Delivered {
    use std::ops::RangeBounds;
    all.iter()
        .filter(|(p, r)| {
            let track = [r.run.clone(), r.probe.clone()];
            track.starts_with(prefix) && (start, end).contains(&Position(*p))
        })
        .cloned()
        .collect()
}

/// Seals `runs × probes` tracks, `ticks` rows each (every track in key order each tick), over
/// two barriers cut at half the rows, into a new archive at `root` (Delta logs off); answers
/// the live data files, one per barrier. A barrier's slices hold `ticks / 2` rows: fewer than
/// 16 and its file is recorded by its row groups (format 11), else as columns (9 or 10).
pub fn seal_fleet(
    root: &std::path::Path,
    runs: usize,
    probes: usize,
    ticks: u64,
) -> Vec<series_archive::archive::manifest::SegmentFile> {
    use series_archive::archive::Archive;
    let mut archive = Archive::open(root, super::capture_config().delta(false)).expect("open");
    let mut delivered: Delivered = Vec::new();
    for tick in 0..ticks {
        for run in 0..runs {
            for probe in 0..probes {
                delivered.push((delivered.len() as u64 + 1, row(run, probe, tick)));
            }
        }
    }
    let half = delivered.len() / 2;
    for part in [&delivered[..half], &delivered[half..]] {
        let rows: Vec<Row> = part.iter().map(|(_, r)| r.clone()).collect();
        let positions: Vec<u64> = part.iter().map(|(p, _)| *p).collect();
        archive
            .stage_batch("capture", &super::batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
    let sealed = archive.state().streams["capture"].files.clone();
    assert_eq!(sealed.len(), 2);
    sealed
}
