//! The cardinality benchmark stays honest: `scripts/bench_cardinality.py` runs end to end at
//! tiny sizes (4 and 50 tracks, 2 000 rows, one run of everything, the debug CLI), checks every
//! answer against DuckDB and writes its report with every figure present; and with one DuckDB
//! answer tampered with, it refuses to report and exits 1.
//!
//! Needs the Python of `SERIES_ARCHIVE_PYTHON` with duckdb, pyarrow, numpy and matplotlib (as
//! `tests/compare_smoke.rs`: `scripts/test` creates `.venv`; without it this fails, never skips).

use std::path::Path;

#[path = "common/process.rs"]
mod process;

use process::{python, scratch, script, show, BIN};

fn bench(data: &Path, extra: &[&str]) -> std::process::Output {
    let python = python("duckdb, pyarrow, numpy, matplotlib");
    let mut args = vec![
        "scripts/bench_cardinality.py",
        "--tracks",
        "4,50",
        "--rows",
        "2000",
        "--seal-rows",
        "500",
        "--quick",
        "--bin",
        BIN,
        "--data",
        data.to_str().expect("a UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    script(&python, &args)
}

#[test]
fn cardinality_bench_checks_its_answers_and_reports_every_figure() {
    let dir = scratch("cardinality-smoke");
    let data = dir.path().join("data");

    let out = bench(&data, &[]);
    let report = show(
        "scripts/bench_cardinality.py --tracks 4,50 --rows 2000 --quick",
        &out,
    );
    println!("{report}");
    assert!(out.status.success(), "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("answers agree at 2 track count(s)"),
        "the run says its answers agree:\n{report}"
    );
    let written = std::fs::read_to_string(data.join("bench-cardinality.md")).expect("the report");
    for needle in [
        "## Targets (issue 25)",
        "## Figures by track count",
        "## Machine and versions",
        "| | 4 tracks | 50 tracks |",
        "before",
        "DuckDB `COPY` to zstd Parquet",
        "ingest rows/s",
        "bytes/row after ingest",
        "bytes/row after `compact`",
        "manifest after ingest",
        "`compact`",
        "DuckDB M4 of the track (same cells)",
        "`rows` of one track",
        "`fold count` of the host prefix",
        "`fold sum` of the host prefix",
        "`survey` of the whole stream @4000",
        "its peak RSS",
        "Exact command:",
        "--tracks 4,50 --rows 2000",
    ] {
        assert!(
            written.contains(needle),
            "the report names {needle:?}:\n{written}"
        );
    }
    // Every figure was measured: none is missing, none timed out.
    for absent in ["not measured", "did not finish", "n/a", "NaN"] {
        assert!(
            !written.contains(absent),
            "the report has no {absent:?}:\n{written}"
        );
    }
    // The table has a figure in both columns of every row.
    let table: Vec<&str> = written
        .lines()
        .skip_while(|l| !l.starts_with("| | 4 tracks"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(table.len() >= 30, "the figures table is whole:\n{written}");
    for line in &table {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 3, "a label and two figures: {line}");
        assert!(
            cells.iter().all(|c| !c.trim().is_empty()),
            "no empty cell: {line}"
        );
    }
    assert!(
        data.join("bench-cardinality.svg").is_file(),
        "the plot is written"
    );
    let results = std::fs::read_to_string(data.join("results.json")).expect("results.json");
    assert_eq!(
        results.matches("\"problems\": []").count(),
        2,
        "no disagreement recorded at either count"
    );

    // A DuckDB answer off by one: the script must not report a time, and must say why.
    let tampered = dir.path().join("tampered.md");
    let out = bench(
        &data,
        &[
            "--tamper",
            "--out",
            tampered.to_str().expect("a UTF-8 path"),
        ],
    );
    let report = show(
        "scripts/bench_cardinality.py --tracks 4,50 --rows 2000 --quick --tamper",
        &out,
    );
    println!("{report}");
    assert_eq!(out.status.code(), Some(1), "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ANSWERS DISAGREE") && stderr.contains("DuckDB M4"),
        "a disagreement is named:\n{report}"
    );
    assert!(
        !tampered.exists(),
        "no report is written after a disagreement"
    );
}
