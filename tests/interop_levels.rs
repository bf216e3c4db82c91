//! Differential: what `survey` and `fold` answer from the M4 levels equals what DuckDB computes
//! from the raw Parquet rows alone.
//!
//! Archives are built with the real CLI: the demo (`capture`, ladder 1024,8,8, an integer and
//! a float field) and an `ingest` of a generated CSV (`plant`, ladder 8,2,4 so small budgets
//! merge past the coarsest level; repeated axis values within a track and repeated values, so
//! the first/last/min/max tie rules decide answers; quarters and small integers, so every sum
//! is exact; an integer track component, so track-key order is byte order, not numeric; a
//! measured column declared before the axis, a text column that is not measured, and empty
//! values). For a table of requests — one track, a prefix, the whole stream and a prefix that
//! holds nothing; ranges unbounded, aligned, starting and ending mid-cell, a single axis value,
//! beyond the data — `survey --json` (budgets 8, 40, 400, 4000) and `fold --json` (min, max,
//! mean, sum, count, p0, p50, p95, p100) are collected into one JSON file, and
//! `tests/interop/levels_check.py` recomputes every answer with DuckDB over
//! `read_parquet('<archive>/streams/<id>/rows/*.parquet')`: the M4 buckets on the grid the
//! answer states (merged across tracks in key order by the documented merge rule), the level
//! folds over the cell-expanded range, `quantile_disc` over exactly the range.
//!
//! The Python side needs duckdb: `scripts/test` creates `.venv` with `requirements-test.txt`
//! and sets `SERIES_ARCHIVE_PYTHON`. Without it these tests fail — they never skip silently.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

#[path = "common/process.rs"]
mod process;

use process::{cli, python, run_checker, scratch, show};

const BUDGETS: [usize; 4] = [8, 40, 400, 4000];
const AGGREGATES: [&str; 9] = [
    "min", "max", "mean", "sum", "count", "p0", "p50", "p95", "p100",
];

/// An axis range `[from, to)`; `None` is unbounded.
type Range = (Option<u64>, Option<u64>);

/// Runs the CLI and parses its JSON answer; answers it parsed and as printed.
fn cli_json(args: &[&str]) -> (Value, String) {
    let out = cli(args);
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            show(&format!("series-archive {}", args.join(" ")), &out)
        )
    });
    let text = String::from_utf8(out.stdout).expect("UTF-8 JSON");
    (value, text)
}

/// A small deterministic generator (SplitMix64).
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Checks what the brief promises of every survey before DuckDB sees it: four points per
/// bucket within the budget, buckets ordered by field then `first.axis`.
fn assert_survey_shape(what: &str, survey: &Value, budget: usize) {
    let buckets = survey["buckets"].as_array().expect("buckets");
    assert!(
        4 * buckets.len() <= budget,
        "{what}: {} buckets exceed the budget {budget}",
        buckets.len()
    );
    let order: Vec<(u64, u64)> = buckets
        .iter()
        .map(|b| {
            (
                b["field"].as_u64().expect("field"),
                b["first"]["axis"].as_u64().expect("first.axis"),
            )
        })
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "{what}: buckets are not ordered by field then first.axis: {order:?}"
    );
}

/// Every survey and fold of the table for one stream: the requests levels_check.py replays.
fn collect(archive: &Path, stream: &str, selections: &[&[&str]], ranges: &[Range]) -> Vec<String> {
    let a = archive.to_str().expect("a UTF-8 path");
    let mut requests = Vec::new();
    for track in selections {
        for &(from, to) in ranges {
            let mut base: Vec<String> = vec![a.into(), "--stream".into(), stream.into()];
            if !track.is_empty() {
                base.push("--track".into());
                base.extend(track.iter().map(|t| t.to_string()));
            }
            if let Some(f) = from {
                base.extend(["--from".into(), f.to_string()]);
            }
            if let Some(t) = to {
                base.extend(["--to".into(), t.to_string()]);
            }
            let run = |cmd: &str, extra: &[String]| -> (Value, String) {
                let mut args: Vec<&str> = vec![cmd];
                args.extend(base.iter().map(String::as_str));
                args.extend(extra.iter().map(String::as_str));
                args.push("--json");
                cli_json(&args)
            };
            let surveys: Vec<String> = BUDGETS
                .iter()
                .map(|&budget| {
                    let (s, text) = run("survey", &["--budget".into(), budget.to_string()]);
                    let what =
                        format!("survey {stream} {track:?} [{from:?}, {to:?}) --budget {budget}");
                    assert_survey_shape(&what, &s, budget);
                    text
                })
                .collect();
            let folds: Vec<String> = AGGREGATES
                .iter()
                .map(|agg| run("fold", &["--aggregate".into(), agg.to_string()]).1)
                .collect();
            // The answers go to Python as the CLI printed them: parsing and re-printing here
            // could move a float (serde_json's default parser is not correctly rounded).
            let request = json!({ "stream": stream, "track": track, "from": from, "to": to });
            let request = request.to_string();
            requests.push(format!(
                "{},\"surveys\":[{}],\"folds\":[{}]}}",
                request.strip_suffix('}').expect("an object"),
                surveys.join(","),
                folds.join(",")
            ));
        }
    }
    requests
}

/// Hands the answers to levels_check.py (DuckDB over the raw rows); panics on any
/// disagreement. Answers its stdout.
fn check_with_duckdb(dir: &Path, archive: &Path, requests: Vec<String>) -> String {
    let a = archive.to_str().expect("a UTF-8 path");
    let (_, inspect) = cli_json(&["inspect", a, "--json"]);
    let root = json!(std::fs::canonicalize(archive).expect("the archive exists"));
    let answers = format!(
        "{{\"archive\":{root},\"inspect\":{inspect},\"requests\":[{}]}}",
        requests.join(",")
    );
    let path = dir.join("answers.json");
    std::fs::write(&path, answers).expect("write answers");

    run_checker(
        &python("duckdb"),
        "tests/interop/levels_check.py",
        &[path.as_os_str()],
        "levels_check",
    )
}

/// The number right before `suffix` on the verdict line.
fn count_before(stdout: &str, suffix: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("levels_check: ok:"))
        .expect("the verdict line");
    let at = line
        .find(suffix)
        .unwrap_or_else(|| panic!("{suffix:?} is not on the verdict line: {line}"));
    line[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {suffix:?}: {line}"))
}

/// `name=N` pairs of the line starting with `prefix`.
fn ties(stdout: &str, prefix: &str) -> BTreeMap<String, u64> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?}:\n{stdout}"));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.trim_end_matches(';').parse().expect("a count"),
            )
        })
        .collect()
}

#[test]
fn demo_surveys_and_folds_equal_duckdb_over_the_raw_rows() {
    python("duckdb");
    let dir = scratch("interop-levels-demo-");
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("a UTF-8 path");
    cli(&[
        "demo",
        a,
        "--runs",
        "3",
        "--probes",
        "3",
        "--ticks",
        "3000",
        "--cadence",
        "700",
    ]);
    // Ordinals run to about 12000 over level-0 cells of 1024.
    let ranges: [Range; 8] = [
        (None, None),
        (Some(1000), Some(5003)),
        (Some(2048), Some(6144)),
        (Some(5), None),
        (None, Some(777)),
        (Some(7), Some(8)),
        (Some(11_000), Some(40_000)),
        (Some(100_000), Some(200_000)),
    ];
    let mut requests = collect(
        &archive,
        "capture",
        &[&["run_1", "probe.02"], &["run_2"], &[]],
        &ranges,
    );
    requests.extend(collect(
        &archive,
        "capture",
        &[&["run_9"]],
        &[(None, None), (Some(10), Some(3000))],
    ));
    let stdout = check_with_duckdb(dir.path(), &archive, requests);
    let exact = stdout.contains("exact sums: capture.value;");
    let bounded = stdout.contains("bounded sums: capture.noise");
    assert!(
        exact && bounded,
        "the demo's integer field sums exactly, its float field within the rounding bound:\n\
         {stdout}"
    );
    assert!(count_before(&stdout, "buckets") > 0);
}

/// The generated CSV ingested as stream `plant`: track (host, node), axis t, measured
/// `reading` (quarters, declared before the axis) and `level` (small integers, some empty).
/// Answers an axis value that repeats within track ("beta gamma", 10).
fn ingest_plant(dir: &Path, archive: &Path) -> u64 {
    const HOSTS: [&str; 4] = ["alpha", "beta gamma", "délta", "Zulu"];
    const NODES: [u64; 3] = [9, 10, 100];
    const STEPS: [u64; 8] = [0, 0, 0, 1, 2, 3, 8, 21];
    let mut mix = Mix(0x1e7e15);
    let mut axis: Vec<u64> = (0..12).map(|i| (i * 37) % 200).collect();
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut files = Vec::new();
    for part in 0..3 {
        let mut csv = String::from("host,reading,node,t,note,level\n");
        for _ in 0..800 {
            let i = mix.below(12) as usize;
            axis[i] += STEPS[mix.below(8) as usize];
            let (host, node) = (HOSTS[i / 3], NODES[i % 3]);
            if (host, node) == ("beta gamma", 10) {
                *seen.entry(axis[i]).or_default() += 1;
            }
            // Quarters in [-4, 4]: many repeats, every sum exact, never -0.
            let reading = (mix.below(33) as i64 - 16) as f64 / 4.0;
            let level = match mix.below(10) {
                0 => String::new(),
                _ => (mix.below(7) as i64 - 3).to_string(),
            };
            let note = mix.below(5);
            csv.push_str(&format!(
                "{host},{reading},{node},{},n{note},{level}\n",
                axis[i]
            ));
        }
        let path = dir.join(format!("plant-{part}.csv"));
        std::fs::write(&path, csv).expect("write the CSV");
        files.push(path);
    }
    let a = archive.to_str().expect("a UTF-8 path");
    let f = |i: usize| files[i].to_str().expect("a UTF-8 path");
    // Two ingests: the second appends to the recorded stream (and its recorded ladder).
    cli(&[
        "ingest",
        a,
        "--stream",
        "plant",
        "--track",
        "host,node",
        "--axis",
        "t",
        "--ladder",
        "8,2,4",
        "--seal-rows",
        "150",
        f(0),
        f(1),
    ]);
    cli(&[
        "ingest",
        a,
        "--stream",
        "plant",
        "--track",
        "host,node",
        "--axis",
        "t",
        "--seal-rows",
        "170",
        f(2),
    ]);
    let (&tie, _) = seen
        .iter()
        .find(|(_, &n)| n >= 3)
        .expect("the generator repeats an axis value within a track");
    tie
}

#[test]
fn ingested_surveys_and_folds_equal_duckdb_over_the_raw_rows() {
    python("duckdb");
    let dir = scratch("interop-levels-plant-");
    let archive = dir.path().join("archive");
    let tie = ingest_plant(dir.path(), &archive);
    // t runs to about 1100 over level-0 cells of 8 (levels 8, 16, 32, 64).
    let ranges: [Range; 9] = [
        (None, None),
        (Some(37), Some(515)),
        (Some(64), Some(128)),
        (Some(3), None),
        (None, Some(333)),
        (Some(tie), Some(tie + 1)),
        (Some(0), Some(1)),
        (Some(250), Some(1003)),
        (Some(5000), Some(6000)),
    ];
    let requests = collect(
        &archive,
        "plant",
        &[&["beta gamma", "10"], &["délta"], &[], &["alpha", "9"]],
        &ranges,
    );
    let stdout = check_with_duckdb(dir.path(), &archive, requests);
    assert!(
        stdout.contains("exact sums: plant.level plant.reading;"),
        "the generated fields sum exactly:\n{stdout}"
    );
    assert!(
        count_before(&stdout, "merged past the coarsest level") > 0,
        "some surveys merge past the coarsest level:\n{stdout}"
    );
    // Every tie rule decided some answer, within a track and across tracks.
    for prefix in [
        "ties decided within a track:",
        "ties decided across tracks:",
    ] {
        let counts = ties(&stdout, prefix);
        for rule in ["first", "last", "min", "max"] {
            assert!(
                counts.get(rule).copied().unwrap_or(0) > 0,
                "{prefix} the {rule} rule never decided an answer: {counts:?}\n{stdout}"
            );
        }
    }
}
