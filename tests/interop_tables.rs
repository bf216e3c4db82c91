//! Level tables as an analyst reads them: the queries `docs/format.md` documents ("Reading a
//! level with DuckDB or Polars") answer exactly what `survey --json` answers.
//!
//! An archive is ingested with the real CLI in many small barriers, so the automatic
//! compaction leaves several merged runs (size-tiered; small, so one file of every level
//! each) and the newest barriers' partials beside them. For every track and several budgets, `survey --json`
//! answers at some level; `tests/interop/tables_check.py` recomputes each single-level answer
//! with the documented general query (DuckDB, the files `files --level K` prints, merged in
//! that order). Then a forced `compact` leaves one table per level, the surveys must answer
//! exactly as before, and the documented whole-table queries (DuckDB over
//! `levels/level=*/*.parquet` with Hive partitioning, Polars `scan_parquet`) must equal them.
//!
//! Values are quarters, so every sum is exact and the comparison is exact. The Python side
//! needs duckdb and polars (`scripts/test` installs them); without them the test fails.

use serde_json::{json, Value};
use std::path::Path;

#[path = "common/process.rs"]
mod process;

use process::{cli, python, run_checker, scratch};

const TRACKS: [(&str, &str); 4] = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")];
const LEVELS: usize = 4;

fn text(args: &[&str]) -> String {
    String::from_utf8(cli(args).stdout).expect("UTF-8")
}

/// Every track's survey at each budget, and each level's files in merge order.
fn collect(archive: &str) -> Value {
    let mut surveys = Vec::new();
    for (host, node) in TRACKS {
        for budget in ["8", "40", "140", "400", "600", "4000"] {
            let out = text(&[
                "survey", archive, "--stream", "plant", "--track", host, node, "--budget", budget,
                "--json",
            ]);
            let survey: Value = serde_json::from_str(&out).expect("survey JSON");
            surveys.push(json!({"track": [host, node], "survey": survey}));
        }
    }
    let files: Vec<Vec<String>> = (0..LEVELS)
        .map(|k| {
            text(&[
                "files",
                archive,
                "--stream",
                "plant",
                "--level",
                &k.to_string(),
            ])
            .lines()
            .map(str::to_owned)
            .collect()
        })
        .collect();
    json!({"surveys": surveys, "files": files})
}

fn check(dir: &Path, mode: &str, answers: &Value) -> String {
    let path = dir.join(format!("{mode}.json"));
    std::fs::write(&path, answers.to_string()).expect("write answers");
    run_checker(
        &python("duckdb, polars"),
        "tests/interop/tables_check.py",
        &[mode.as_ref(), path.as_os_str()],
        "tables_check",
    )
}

#[test]
fn the_documented_level_queries_answer_what_survey_answers() {
    let dir = scratch("interop-tables");
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("UTF-8 path");
    // 4 tracks × 600 rows, axis steps of 0 to 3 (repeats split across barriers decide the
    // merge's tie rules), quarters in [-4, 4].
    let mut csv = String::from("host,node,t,reading\n");
    let mut state = 0x5eed_u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let mut axis = [0u64; 4];
    for _ in 0..2400 {
        let i = next(4) as usize;
        axis[i] += next(4);
        let reading = (next(33) as f64 - 16.0) / 4.0;
        csv.push_str(&format!(
            "{},{},{},{reading}\n",
            TRACKS[i].0, TRACKS[i].1, axis[i]
        ));
    }
    let input = dir.path().join("plant.csv");
    std::fs::write(&input, csv).expect("write CSV");
    let input = input.to_str().expect("UTF-8 path");
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
        "4,2,4",
        // 43 barriers = 2·16 + 2·4 + 3 in base 4: four runs of tables and three partials.
        "--seal-rows",
        "57",
        input,
    ]);
    let state: Value =
        serde_json::from_str(&text(&["inspect", a, "--json"])).expect("inspect JSON");
    let tiered = collect(a);
    // The automatic compaction left four merged runs (small: one file of every level each)
    // and three barriers' partials: the general query is needed.
    let files = tiered["files"][0].as_array().expect("level 0 files");
    assert_eq!(files.len(), 7, "4 runs and 3 partials: {files:?}\n{state}");
    let out = check(dir.path(), "general", &tiered);
    assert!(out.contains("surveys checked"), "{out}");

    let compacted = cli(&["compact", a]);
    assert!(compacted.status.success());
    let whole = collect(a);
    assert_eq!(
        whole["surveys"], tiered["surveys"],
        "a forced compaction changed a survey"
    );
    for (k, files) in whole["files"].as_array().expect("files").iter().enumerate() {
        let files = files.as_array().expect("level files");
        assert_eq!(
            files.len(),
            1,
            "level {k}: one table after compact: {files:?}"
        );
        assert!(
            files[0]
                .as_str()
                .is_some_and(|f| f.contains(&format!("/levels/level={k}/"))),
            "{files:?}"
        );
    }
    let mut whole = whole;
    whole["archive"] = json!(std::fs::canonicalize(&archive).expect("archive"));
    check(dir.path(), "whole", &whole);
}
