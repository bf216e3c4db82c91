//! The page `serve` serves, in real headless Chromium (Debian's chromium and chromium-driver,
//! driven by selenium): `tests/browser/page_check.py` loads it, picks a track, zooms in twice,
//! and checks after every draw that the buckets drawn equal the API's survey for the same URL,
//! that no survey the browser sent asked for more than the plot's pixel width buys, and that
//! the band is on the canvas. No Chromium is a failure, never a skip.

#[path = "common/http.rs"]
mod http;
#[path = "common/process.rs"]
mod process;

use http::Server;
use process::{cli, python, run_checker, scratch, BIN};
use std::ffi::OsStr;

#[test]
fn the_page_draws_what_the_api_answers_within_the_budget() {
    let py = python("selenium");
    let dir = scratch("browser");
    let archive = dir.path().join("a");
    cli(&["demo", archive.to_str().expect("utf-8"), "--ticks", "20000"]);
    let server = Server::start(BIN, &archive, &[]);
    let base = format!("http://{}", server.addr);
    let shots = dir.path().join("shots");
    let report = run_checker(
        &py,
        "tests/browser/page_check.py",
        &[
            OsStr::new(&base),
            shots.as_os_str(),
            OsStr::new(r#"["run_1","probe.03"]"#),
        ],
        "PAGE",
    );
    assert!(report.contains("\"ok\": true"), "{report}");
    assert!(shots.join("page.png").is_file());
}

#[test]
fn the_page_works_behind_a_token() {
    let py = python("selenium");
    let dir = scratch("browser-token");
    let archive = dir.path().join("a");
    cli(&["demo", archive.to_str().expect("utf-8"), "--ticks", "4000"]);
    let token = "a-token-for-the-page-check";
    let server = Server::start(BIN, &archive, &["--token", token]);
    let base = format!("http://{}", server.addr);
    let shots = dir.path().join("shots");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(&py)
        .current_dir(root)
        .arg(root.join("tests/browser/page_check.py"))
        .args([OsStr::new(&base), shots.as_os_str()])
        .env("SERIES_ARCHIVE_TOKEN", token)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let shown = process::show("page_check.py with a token", &out);
    assert!(out.status.success(), "{shown}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("PAGE: ok:"),
        "{shown}"
    );
}

#[test]
fn the_page_follows_a_writer_live_and_draws_a_floor_as_a_boundary() {
    let py = python("selenium");
    let dir = scratch("browser-live");
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    cli(&["demo", a, "--ticks", "4000"]);
    cli(&[
        "retire", a, "--stream", "capture", "--track", "run_0", "probe.00",
    ]);
    // What the writer appends while the page is live: 1000 newer rows of run_1/probe.03.
    let csv = dir.path().join("newer.csv");
    let rows: String = (0..1000u64)
        .map(|i| {
            format!(
                "run_1,probe.03,{},{},{}\n",
                16_000 + 4 * i,
                i % 97,
                (i as f64 / 50.0).sin()
            )
        })
        .collect();
    std::fs::write(&csv, format!("run,probe,ordinal,value,noise\n{rows}")).expect("csv");
    let server = Server::start(BIN, &archive, &[]);
    let base = format!("http://{}", server.addr);
    let shots = dir.path().join("shots");
    run_checker(
        &py,
        "tests/browser/live_floor_check.py",
        &[
            OsStr::new(&base),
            shots.as_os_str(),
            archive.as_os_str(),
            OsStr::new(BIN),
            csv.as_os_str(),
        ],
        "LIVE_FLOOR",
    );
}

/// `scripts/bench_serve.py` (the figures of docs/bench-serve.md) in a bounded form, so it
/// cannot rot: a small archive, a few clients and requests, DuckDB on three of them, two
/// zooms of the page. It exits 1 on any failed or over-budget answer or a DuckDB
/// disagreement.
#[test]
fn the_serve_benchmark_runs_in_its_bounded_form() {
    let py = python("selenium, duckdb");
    let dir = scratch("bench-serve");
    let archive = dir.path().join("a");
    cli(&["demo", archive.to_str().expect("utf-8"), "--ticks", "3000"]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(&py)
        .current_dir(root)
        .arg(root.join("scripts/bench_serve.py"))
        .arg("--archive")
        .arg(&archive)
        .args([
            "--cli",
            BIN,
            "--clients",
            "5",
            "--requests",
            "4",
            "--single",
            "10",
        ])
        .args([
            "--warm", "2", "--duck", "3", "--zooms", "2", "--run", "run_1",
        ])
        .args(["--seconds", "60"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let shown = process::show("bench_serve.py (bounded)", &out);
    assert!(out.status.success(), "{shown}");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("| 5, concurrent"), "{shown}");
    assert!(
        report.contains("None: every answer was a 200 within its budget"),
        "{shown}"
    );
}

/// A stream whose axis is nanoseconds since the epoch (past 2^53, where JavaScript numbers
/// round): the page's whole view must still ask for every row, to the newest.
#[test]
fn the_page_leaves_no_row_out_of_a_nanosecond_axis() {
    let py = python("selenium");
    let dir = scratch("browser-ns");
    let archive = dir.path().join("a");
    // Timestamps that are not doubles: the first rounds up (to 124 ns past it) and the
    // newest down (to 53 ns before it), so a range built from rounded numbers leaves both out.
    let csv = dir.path().join("ns.csv");
    let rows: String = (0..5000u64)
        .map(|i| {
            let t = 1_767_225_600_123_456_900u64 + i * 1_000_000_007;
            format!("host-{},{t},{}\n", i % 3, (i as f64 / 40.0).sin())
        })
        .collect();
    std::fs::write(&csv, format!("host,ts,value\n{rows}")).expect("csv");
    let a = archive.to_str().expect("utf-8");
    cli(&[
        "ingest",
        a,
        "--stream",
        "ns",
        "--track",
        "host",
        "--axis",
        "ts",
        "--ladder",
        "1000000000,8,8",
        "--seal-rows",
        "1000",
        csv.to_str().expect("utf-8"),
    ]);
    let server = Server::start(BIN, &archive, &[]);
    let base = format!("http://{}", server.addr);
    run_checker(
        &py,
        "tests/browser/exact_check.py",
        &[OsStr::new(&base), OsStr::new("ns")],
        "EXACT",
    );
}
