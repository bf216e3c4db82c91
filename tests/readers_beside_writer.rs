//! A reader started while a writer compacts, retires or checkpoints sees one committed state
//! to the end: never a spurious `Unreadable` for a file the writer deleted after its record,
//! and never a short answer. Real `series-archive rows` processes read while this process
//! seals, compacts and checkpoints through the library.

mod common;
#[path = "common/process.rs"]
mod process;

use common::{batch, capture_config, workload};
use series_archive::archive::Archive;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn readers_beside_compaction_and_checkpoints_answer_whole() {
    let dir = process::scratch("readers-beside-writer");
    let root = dir.path().join("archive");
    let mut archive = Archive::open(&root, capture_config()).expect("open");
    let mut tick = 0;
    let mut seal = move |archive: &mut Archive, n: u64| {
        for _ in 0..n {
            let (rows, positions) = workload(2, 2, 25, tick);
            archive
                .stage_batch("capture", &batch(&rows), &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
            tick += 25;
        }
    };
    seal(&mut archive, 4);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            for round in 0..30 {
                seal(&mut archive, 3);
                archive.compact(true, |_, _, _| {}).expect("compact");
                if round % 4 == 3 {
                    archive.checkpoint().expect("checkpoint");
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let (mut reads, mut last, mut retried) = (0, 0usize, 0usize);
    while !done.load(Ordering::SeqCst) || reads < 5 {
        let out = Command::new(process::BIN)
            .args(["rows", root.to_str().expect("utf-8"), "--stream", "capture"])
            .env("SERIES_ARCHIVE_LOG", "debug")
            .output()
            .expect("run rows");
        retried += String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("reading again"))
            .count();
        assert!(
            out.status.success(),
            "{}",
            process::show("rows beside a writer", &out)
        );
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let header = text.lines().next().expect("a header");
        let at = header
            .split(',')
            .position(|c| c == "_position")
            .expect("a _position column");
        let positions: Vec<u64> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(at).expect("a field").parse().expect("u64"))
            .collect();
        // workload() publishes 4 rows (2 runs × 2 probes) per tick, all at position tick + 1.
        let n = positions.len();
        assert!(n >= last, "an answer never shrinks: {n} after {last}");
        assert_eq!(n % 4, 0, "whole ticks only");
        let mut sorted = positions.clone();
        sorted.sort_unstable();
        let want: Vec<u64> = (1..=(n / 4) as u64).flat_map(|p| [p; 4]).collect();
        assert_eq!(sorted, want, "whole, each row once");
        last = n;
        reads += 1;
    }
    writer.join().expect("writer");
    // Each retry is a read the writer pulled files from under; without the retry it would
    // have been refused `Unreadable`.
    eprintln!(
        "{reads} reads beside 30 compactions and 7 checkpoints, none refused or short; {retried} read(s) found a file gone and read again"
    );
}
