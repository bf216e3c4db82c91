//! Interop: the archive's files are plain Parquet that DuckDB and Polars read without this
//! crate, and they hold exactly what `series-archive rows` serves.
//!
//! An archive is built with the real CLI (`demo` plus an `ingest` of a CSV into a second
//! stream); then `tests/interop/check.py` (DuckDB + Polars over the documented glob and over
//! `series-archive files`, against `rows --format parquet|csv`) and the analyst notebook
//! `notebooks/explore.py` run against it.
//!
//! The Python side needs duckdb, polars and pyarrow: `scripts/test` creates `.venv` with
//! `requirements-test.txt` and sets `SERIES_ARCHIVE_PYTHON`. Without it these tests fail —
//! they never skip silently.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/process.rs"]
mod process;

use process::{cli, python, scratch, show, BIN};
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

// The demo workload: 3 runs × 4 probes × 2000 ticks, a barrier every 250 ticks.
const RUNS: u64 = 3;
const PROBES: u64 = 4;
const TICKS: u64 = 2000;
const CADENCE: u64 = 250;

/// Runs a Python script from the repository root; prints its output (visible with
/// `--nocapture` or on failure) and panics unless it exits 0.
fn run_python(script: &str, args: &[&str]) -> String {
    let python = python("duckdb, polars, pyarrow");
    let out = Command::new(&python)
        .current_dir(ROOT)
        .arg(Path::new(ROOT).join(script))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let report = show(
        &format!("{} {script} {}", python.display(), args.join(" ")),
        &out,
    );
    println!("{report}");
    assert!(out.status.success(), "{report}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The demo archive at `dir/archive`.
fn demo_archive(dir: &Path) -> PathBuf {
    let archive = dir.join("archive");
    let a = archive.to_str().expect("a UTF-8 path");
    cli(&[
        "demo",
        a,
        "--ticks",
        &TICKS.to_string(),
        "--cadence",
        &CADENCE.to_string(),
        "--runs",
        &RUNS.to_string(),
        "--probes",
        &PROBES.to_string(),
    ]);
    archive
}

/// Ingests two small CSV files into a second stream, `sensors` (track host, metric; axis
/// t), sealing every 40 rows. Answers the number of rows ingested.
fn ingest_sensors(dir: &Path, archive: &Path) -> u64 {
    let mut files = Vec::new();
    let mut rows = 0u64;
    for part in 0..2u64 {
        let mut csv = String::from("host,metric,t,reading,flag\n");
        for i in 0..50u64 {
            let t = part * 50 + i;
            let host = ["alpha", "beta gamma", "délta"][(t % 3) as usize];
            let metric = ["cpu", "mem"][(t % 2) as usize];
            // Negative, fractional and large-magnitude readings; an integer column too.
            let reading = (t as f64 * 0.37).sin() * 1e3 - (t as f64) / 7.0;
            csv.push_str(&format!(
                "{host},{metric},{},{reading},{}\n",
                t * 10 + t % 4,
                (t * 7919) as i64 - 200_000
            ));
            rows += 1;
        }
        let path = dir.join(format!("sensors-{part}.csv"));
        std::fs::write(&path, csv).expect("write the CSV");
        files.push(path);
    }
    let a = archive.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "ingest",
        a,
        "--stream",
        "sensors",
        "--track",
        "host,metric",
        "--axis",
        "t",
        "--seal-rows",
        "40",
    ];
    args.extend(files.iter().map(|f| f.to_str().expect("a UTF-8 path")));
    cli(&args);
    rows
}

#[test]
fn duckdb_and_polars_read_exactly_what_rows_serves() {
    // Fail early (before building anything) when the Python side is missing.
    python("duckdb, polars, pyarrow");
    let dir = scratch("interop-check-");
    let archive = demo_archive(dir.path());
    let sensors = ingest_sensors(dir.path(), &archive);

    let files = cli(&["files", archive.to_str().unwrap(), "--stream", "sensors"]);
    let listed = String::from_utf8_lossy(&files.stdout).lines().count();
    assert!(
        listed >= 2,
        "the CSV ingest should seal at least two files, got {listed}"
    );

    let capture_rows = RUNS * PROBES * TICKS;
    let stdout = run_python(
        "tests/interop/check.py",
        &[
            archive.to_str().unwrap(),
            "--bin",
            BIN,
            "--expect-rows",
            &format!("capture={capture_rows}"),
            "--expect-rows",
            &format!("sensors={sensors}"),
        ],
    );
    assert!(
        stdout.contains("interop: ok"),
        "check.py exited 0 without its verdict line:\n{stdout}"
    );
    // The junk check.py planted is still there and the glob still ignored it.
    assert!(archive.join(".tmp").read_dir().unwrap().next().is_some());
    assert!(archive
        .join(".quarantine")
        .read_dir()
        .unwrap()
        .next()
        .is_some());
}

/// The value after `prefix` on the notebook's line starting with it.
fn line_after<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("the notebook printed no line starting {prefix:?}:\n{stdout}"))
        .trim()
}

#[test]
fn the_notebook_runs_and_its_duckdb_and_polars_m4_agree() {
    python("duckdb, polars, pyarrow");
    let dir = scratch("interop-notebook-");
    let archive = demo_archive(dir.path());
    let a = archive.to_str().unwrap();

    for cell_width in ["256", "1", "100000"] {
        let stdout = run_python("notebooks/explore.py", &[a, "--cell-width", cell_width]);
        let tracks = RUNS * PROBES;
        let rows = RUNS * PROBES * TICKS;
        assert!(
            stdout.contains(&format!("tracks: {tracks}, rows: {rows}")),
            "the notebook should count {tracks} tracks and {rows} rows:\n{stdout}"
        );
        let duck = line_after(&stdout, "M4 duckdb:");
        let polars = line_after(&stdout, "M4 polars:");
        assert_eq!(
            duck, polars,
            "cell width {cell_width}: DuckDB and Polars M4 summaries differ"
        );
        assert!(
            duck.contains(&format!("{rows} rows")),
            "M4 cells cover every row: {duck}"
        );
        assert!(stdout.contains("M4 agree: DuckDB == Polars"));
    }

    // A float field, the other measured column.
    let stdout = run_python(
        "notebooks/explore.py",
        &[a, "--field", "noise", "--cell-width", "37"],
    );
    assert_eq!(
        line_after(&stdout, "M4 duckdb:"),
        line_after(&stdout, "M4 polars:")
    );
}
