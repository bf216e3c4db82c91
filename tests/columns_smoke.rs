//! The columns benchmark stays honest: `scripts/bench_columns.py` runs end to end at tiny
//! sizes (4 and 40 fields, 40,000 values, one run of everything, the debug CLI), checks every
//! answer against DuckDB and writes its report with every figure present; and with one DuckDB
//! answer tampered with, it refuses to report and exits 1.
//!
//! Needs the Python of `SERIES_ARCHIVE_PYTHON` with duckdb, pyarrow and numpy (as
//! `tests/compare_smoke.rs`: `scripts/test` creates `.venv`; without it this fails, never skips).

#[path = "common/process.rs"]
mod process;

use process::{python, scratch, script, show, table_rows, BIN};

#[test]
fn columns_bench_checks_its_answers_and_reports_every_figure() {
    let dir = scratch("columns-smoke");
    let data = dir.path().join("data");
    let out_file = dir.path().join("report.md");
    let python = python("duckdb, pyarrow, numpy");
    let run = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "scripts/bench_columns.py",
            "--fields",
            "4,40",
            "--values",
            "40000",
            "--runs",
            "1",
            "--bin",
            BIN,
            "--data",
            data.to_str().expect("a UTF-8 path"),
            "--out",
            out.to_str().expect("a UTF-8 path"),
        ];
        args.extend_from_slice(extra);
        script(&python, &args)
    };

    let out = run(&out_file, &[]);
    let report = show("scripts/bench_columns.py --fields 4,40", &out);
    assert!(out.status.success(), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("answers agree at 2 field count(s)"),
        "{report}"
    );
    let written = std::fs::read_to_string(&out_file).expect("the report");
    let table = table_rows(&written, "| | 4 fields | 40 fields |", 3);
    assert_eq!(table.len(), 12, "every figure has its row:\n{written}");
    assert!(
        table.iter().flatten().all(|c| !c.contains("n/a")),
        "no missing figure:\n{written}"
    );
    for needle in [
        "| rows | 10,000 | 1,000 |",
        "`survey` of one track, 100 buckets a field",
        "DuckDB M4 of the track (same cells)",
        "`rows` of one track (`--format parquet`)",
    ] {
        assert!(written.contains(needle), "{needle:?} in:\n{written}");
    }

    // A DuckDB answer off by one: no report, exit 1, and the reason.
    let tampered = dir.path().join("tampered.md");
    let out = run(&tampered, &["--tamper"]);
    let report = show("scripts/bench_columns.py --tamper", &out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("survey ≠ DuckDB M4"),
        "{report}"
    );
    assert!(!tampered.exists(), "no report is written: {report}");
}
