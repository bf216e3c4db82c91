//! The comparison stays honest: `scripts/compare.py` runs end to end on a small dataset
//! (16 000 rows, one run of everything, the debug CLI and helper, no release build) and
//! every answer agrees with DuckDB, Polars and SQLite; and with one peer answer tampered
//! with, it refuses to report and exits 1.
//!
//! Needs the Python of `SERIES_ARCHIVE_PYTHON` with duckdb, polars and pyarrow (as
//! `tests/interop.rs`: `scripts/test` creates `.venv`; without it this fails, never skips),
//! and the helper `examples/compare.rs` built beside the CLI (`cargo test --all-targets`,
//! as `scripts/test` runs it, builds it; on its own: `cargo build --example compare`).

use std::path::{Path, PathBuf};

#[path = "common/process.rs"]
mod process;

use process::{python, scratch, script, show, BIN};

/// The debug build of `examples/compare.rs`, beside the CLI this test was built with.
fn helper() -> PathBuf {
    let helper = Path::new(BIN)
        .parent()
        .expect("the binary's directory")
        .join("examples")
        .join(format!("compare{}", std::env::consts::EXE_SUFFIX));
    assert!(
        helper.is_file(),
        "{} is missing: build it with `cargo build --example compare` (scripts/test builds \
         every target)",
        helper.display()
    );
    helper
}

fn compare(data: &Path, extra: &[&str]) -> std::process::Output {
    let python = python("duckdb, polars, pyarrow");
    let helper = helper();
    let mut args = vec![
        "scripts/compare.py",
        "--rows",
        "16000",
        "--quick",
        "--bin",
        BIN,
        "--helper",
        helper.to_str().expect("a UTF-8 path"),
        "--data",
        data.to_str().expect("a UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    script(&python, &args)
}

#[test]
fn compare_agrees_and_refuses_a_disagreement() {
    let dir = scratch("compare-smoke");
    let data = dir.path().join("data");

    let out = compare(&data, &[]);
    let report = show("scripts/compare.py --rows 16000 --quick", &out);
    println!("{report}");
    assert!(out.status.success(), "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("answers agree at 1 size(s)"),
        "the run says its answers agree:\n{report}"
    );
    let written = std::fs::read_to_string(data.join("BENCHMARKS.md")).expect("the report");
    for needle in [
        "## Targets",
        "DuckDB M4",
        "SQLite",
        "ArrowWriter",
        "16,000 rows",
    ] {
        assert!(written.contains(needle), "the report names {needle:?}");
    }
    assert!(
        data.join("compare-survey.svg").is_file(),
        "the plot is written"
    );
    let results = std::fs::read_to_string(data.join("results.json")).expect("results.json");
    assert!(
        results.contains("\"problems\": []"),
        "no disagreement recorded"
    );

    // A peer answer off by one: the script must not report a time, and must say why.
    let out = compare(&data, &["--tamper"]);
    let report = show("scripts/compare.py --rows 16000 --quick --tamper", &out);
    println!("{report}");
    assert_eq!(out.status.code(), Some(1), "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ANSWERS DISAGREE") && stderr.contains("DuckDB"),
        "a disagreement is named:\n{report}"
    );
}
