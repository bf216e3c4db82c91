//! Builds the archives `scripts/bench_scale.py` measures: the capture workload (16 tracks,
//! `benches/common`) at each row count given, sealed in barriers of 250 000 rows exactly as
//! `series-archive ingest --seal-rows 250000` seals them, then the automatic maintenance
//! `ingest` runs before it exits (`compact --auto`: raw files past the threshold, level runs
//! merged size-tiered, and a checkpoint once the log is mostly history). Each archive is rebuilt from scratch under
//! `target/bench-data/scale-<rows>/`; the paths are printed, one a line.
//!
//! ```text
//! cargo run --release --example scale -- 1000000 10000000 50000000 200000000
//! ```

#[path = "../benches/common/mod.rs"]
mod common;

use series_archive::archive::{Archive, Config};
use std::time::Instant;

/// Rows a barrier seals (`ingest --seal-rows 250000`).
const SEAL_ROWS: u64 = 250_000;
const RUNS: usize = 4;
const PROBES: usize = 4;

fn main() {
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{a:?} is not a row count"))
        })
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000_000]
    } else {
        sizes
    };
    let tracks = (RUNS * PROBES) as u64;
    for rows in sizes {
        assert!(
            rows % tracks == 0,
            "{rows} is not a multiple of {tracks} tracks"
        );
        let dir = common::data_root().join(format!("scale-{rows}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove the old archive");
        }
        std::fs::create_dir_all(&dir).expect("create the archive directory");
        let began = Instant::now();
        let mut archive = Archive::open(&dir, Config::new().stream(common::spec())).expect("open");
        let mut workload = common::Workload::new(RUNS, PROBES);
        let ticks = rows / tracks;
        let per_barrier = SEAL_ROWS / tracks;
        let mut tick = 0;
        while tick < ticks {
            let n = per_barrier.min(ticks - tick);
            let (batch, positions) = workload.next(n);
            archive
                .stage_batch(common::STREAM, &batch, &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
            tick += n;
        }
        let sealed = began.elapsed();
        let reports = archive.compact(false, |_, _, _| {}).expect("maintain");
        let level_written: u64 = reports.iter().map(|r| r.level_bytes_out).sum();
        if archive.checkpoint_due() {
            archive.checkpoint().expect("checkpoint");
        }
        eprintln!(
            "scale: {rows} rows in {:.1?} ({:.1?} sealing), {} automatic compaction(s), {} level bytes written",
            began.elapsed(),
            sealed,
            reports.len(),
            level_written
        );
        println!("{}", dir.display());
    }
}
