//! Level bytes written by compaction over a long history, against the level bytes that stay.
//!
//! For N = 10, 100 and 1 000 barriers (16 tracks, 1 024 rows each, the capture workload of
//! `benches/common`), an archive is sealed one barrier at a time with the automatic
//! compaction after each (what `maintain` and `ingest` run), and the level bytes every
//! compaction wrote (`CompactReport::level_bytes_out`) are summed. The same history is then
//! replayed with a forced compaction after each barrier, which merges every run into one: the
//! policy before level tables (every level file rewritten whenever there were two). Prints a
//! markdown table:
//!
//! ```text
//! cargo run --release --example level_tiering
//! ```

#[path = "../benches/common/mod.rs"]
mod common;

use series_archive::archive::{Archive, Config};

/// `(level bytes written by compaction, live level bytes at the end, compactions)`.
fn history(barriers: u64, force: bool) -> (u64, u64, usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive =
        Archive::open(dir.path(), Config::new().stream(common::spec())).expect("open");
    let mut workload = common::Workload::new(4, 4);
    let (mut written, mut compactions) = (0u64, 0usize);
    for _ in 0..barriers {
        let (batch, positions) = workload.next(64);
        archive
            .stage_batch(common::STREAM, &batch, &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        let reports = archive.compact(force, |_, _, _| {}).expect("compact");
        compactions += reports.len();
        written += reports.iter().map(|r| r.level_bytes_out).sum::<u64>();
    }
    let live = archive.state().streams[common::STREAM]
        .levels
        .iter()
        .map(|f| f.bytes)
        .sum();
    (written, live, compactions)
}

fn main() {
    println!("| barriers | tiered: compactions | level bytes written ÷ live | log₄ N | merge-all: level bytes written ÷ live |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [10u64, 100, 1000] {
        let (written, live, compactions) = history(n, false);
        let (all_written, all_live, _) = history(n, true);
        println!(
            "| {n} | {compactions} | {:.2} | {:.2} | {:.1} |",
            written as f64 / live as f64,
            (n as f64).log(4.0),
            all_written as f64 / all_live as f64
        );
    }
}
