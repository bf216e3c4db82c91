//! Level bytes written by compaction over a long history, against the level bytes that stay.
//!
//! For N = 10, 100 and 1 000 barriers (16 tracks, 1 024 rows each, the capture workload of
//! `benches/common`), an archive is sealed one barrier at a time with the automatic
//! compaction after each (what `maintain` and `ingest` run), and the level cells and bytes
//! every compaction wrote (`CompactReport::level_bytes_out`) are summed and divided by what is
//! live at the end. Cells are the merge policy's own measure (each barrier's cells rewritten
//! at most once a tier); bytes add each file's fixed cost (footer, page index), which weighs
//! on tiny barriers like these (1 024 rows). The same history is then
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

/// What a history cost: level bytes and cells written by compaction, and what is live at the
/// end.
struct Cost {
    bytes_written: u64,
    bytes_live: u64,
    cells_written: u64,
    cells_live: u64,
    compactions: usize,
}

fn history(barriers: u64, force: bool) -> Cost {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive =
        Archive::open(dir.path(), Config::new().stream(common::spec())).expect("open");
    let mut workload = common::Workload::new(4, 4);
    let cells = |f: &series_archive::archive::manifest::SegmentFile| -> u64 {
        f.groups.iter().map(|g| g.rows).sum()
    };
    let mut cost = Cost {
        bytes_written: 0,
        bytes_live: 0,
        cells_written: 0,
        cells_live: 0,
        compactions: 0,
    };
    for _ in 0..barriers {
        let (batch, positions) = workload.next(64);
        archive
            .stage_batch(common::STREAM, &batch, &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        let before: std::collections::BTreeSet<u64> = archive.state().streams[common::STREAM]
            .levels
            .iter()
            .map(|f| f.name)
            .collect();
        let reports = archive.compact(force, |_, _, _| {}).expect("compact");
        cost.compactions += reports.len();
        cost.bytes_written += reports.iter().map(|r| r.level_bytes_out).sum::<u64>();
        // Files of every round of this call are new: rounds only add files a later round may
        // replace, and a replaced one was counted when it was written.
        if !reports.is_empty() {
            cost.cells_written += archive.state().streams[common::STREAM]
                .levels
                .iter()
                .filter(|f| !before.contains(&f.name))
                .map(cells)
                .sum::<u64>();
        }
    }
    let live = &archive.state().streams[common::STREAM].levels;
    cost.bytes_live = live.iter().map(|f| f.bytes).sum();
    cost.cells_live = live.iter().map(cells).sum();
    cost
}
fn main() {
    println!("| barriers | tiered: compactions | cells written ÷ live | bytes written ÷ live | log₄ N | merge-all: cells written ÷ live | bytes written ÷ live |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in [10u64, 100, 1000] {
        let tiered = history(n, false);
        let all = history(n, true);
        let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        println!(
            "| {n} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |",
            tiered.compactions,
            ratio(tiered.cells_written, tiered.cells_live),
            ratio(tiered.bytes_written, tiered.bytes_live),
            (n as f64).log(4.0),
            ratio(all.cells_written, all.cells_live),
            ratio(all.bytes_written, all.bytes_live),
        );
    }
}
