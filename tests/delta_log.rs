//! The Delta log beside each stream: every engine's default reader — DuckDB (delta
//! extension), Polars' `scan_delta`, `deltalake`, DataFusion over deltalake's table provider,
//! Daft on its native runner, and Spark over the files `files` lists — reads exactly what
//! `rows` serves, with the types the log declares (a `long` as a signed 64-bit integer, never
//! a decimal or an unsigned type), through crash leftovers, retirements, sweeps, compactions
//! and checkpoints, and values at and past 2^62 exactly; a real crash at every point between
//! a manifest commit and its Delta actions is brought level by the next writable open; a
//! damaged log is kept as evidence and written anew; `files` refuses a log that is behind,
//! and `publish` writes it anew.
//!
//! The readers run in `tests/interop/delta_check.py` (SERIES_ARCHIVE_PYTHON, set up by
//! `scripts/test`), against `series-archive rows --format parquet` (what the archive serves)
//! and the manifest's own level files. Spark (the slowest to start: one session, in one
//! test) needs Java 17 or newer, which `scripts/test` installs.

mod common;
#[path = "common/golden.rs"]
mod golden_files;
#[path = "common/process.rs"]
mod process;

use common::hand::Hand;
use common::ops::{self, BASE_BARRIERS};
use common::*;
use process::{cli, python, run_checker, scratch, show, BIN};
use series_archive::archive::delta::Table;
use series_archive::archive::lifecycle::{Lifetime, Retention};
use series_archive::archive::{Archive, Config, FaultPoint, Faults};
use series_archive::Position;
use std::ffi::OsStr;
use std::ops::Bound;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

const DIR_VAR: &str = "SERIES_ARCHIVE_DELTA_CRASH_DIR";
const OP_VAR: &str = "SERIES_ARCHIVE_DELTA_CRASH_OP";
const AT_VAR: &str = "SERIES_ARCHIVE_DELTA_CRASH_AT";
const CHILD: &str = "delta_crash_child";
const SIGABRT: i32 = 6;

/// The child: reopens the archive at `DIR_VAR` with `Faults::abort_at(AT_VAR)` and runs the
/// operation `OP_VAR` (see `common::ops::operations`), which must crash. A no-op otherwise.
#[test]
fn delta_crash_child() {
    let (Ok(dir), Ok(op), Ok(at)) = (
        std::env::var(DIR_VAR),
        std::env::var(OP_VAR),
        std::env::var(AT_VAR),
    ) else {
        return;
    };
    let point = FaultPoint::parse(&at).unwrap_or_else(|| panic!("unknown fault point {at:?}"));
    let (_, run) = ops::operations()
        .into_iter()
        .find(|(name, _)| *name == op)
        .unwrap_or_else(|| panic!("unknown operation {op:?}"));
    let mut archive =
        Archive::open(&dir, capture_config().faults(Faults::abort_at(point))).expect("open");
    let outcome = run(&mut archive);
    eprintln!("{op} returned instead of crashing at {at}: {outcome:?}");
    std::process::exit(3);
}

/// Runs the child on `root` and requires it to die of SIGABRT.
fn crash(root: &Path, op: &str, point: FaultPoint) {
    let out = Command::new(std::env::current_exe().expect("current exe"))
        .args(["--exact", CHILD, "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, root)
        .env(OP_VAR, op)
        .env(AT_VAR, point.name())
        .output()
        .expect("run the child");
    let log = show(&format!("child {op} at {}", point.name()), &out);
    assert_eq!(out.status.signal(), Some(SIGABRT), "{log}");
}

/// The modules `delta_check.py` reads with; Spark's (`pyspark`) only where it runs.
const READERS: &str = "duckdb, polars, deltalake, pyarrow, datafusion, daft";

/// Every reader against what the archive serves now (and, with `glob_differs`, proof that
/// the plain glob does not).
fn check(root: &Path, glob_differs: bool) -> String {
    let py = python(READERS);
    let dir = root.parent().expect("a parent");
    let served = dir.join(format!(
        "{}-served.parquet",
        root.file_name().unwrap().to_string_lossy()
    ));
    let root_s = root.to_str().expect("utf-8 path");
    write_served(root, &served);
    let levels = cli(&[
        "files",
        root_s,
        "--stream",
        "capture",
        "--levels",
        "--manifest",
    ]);
    let level_list = dir.join(format!(
        "{}-levels.txt",
        root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&level_list, &levels.stdout).expect("write the level list");
    let mut args: Vec<&OsStr> = vec![
        root.as_os_str(),
        OsStr::new("capture"),
        served.as_os_str(),
        OsStr::new("--levels"),
        level_list.as_os_str(),
    ];
    if glob_differs {
        args.push(OsStr::new("--glob-differs"));
    }
    let out = run_checker(&py, "tests/interop/delta_check.py", &args, "DELTA");
    // Every engine's default reader answered (a reader the script stopped running would
    // otherwise pass unnoticed).
    for reader in DEFAULT_READERS {
        let line = format!("rows, {reader}: ");
        assert!(out.contains(&line), "no line {line:?}:\n{out}");
    }
    out
}

/// The readers `delta_check.py` runs over every Delta table, each one's line prefix.
const DEFAULT_READERS: [&str; 6] = [
    "deltalake to_pyarrow_dataset",
    "duckdb delta_scan",
    "polars scan_delta",
    "datafusion deltalake provider",
    "daft read_deltalake (native runner)",
    "polars scan_parquet(file_uris)",
];

/// Every row the archive serves, as a Parquet file: each live track read from its raw floor
/// (an unnarrowed read of the whole stream is refused once floors differ between tracks).
fn write_served(root: &Path, out: &Path) {
    let archive = Archive::open(root, Config::new().read_only(true)).expect("read-only open");
    let stream = &archive.state().streams["capture"];
    let mut batches = Vec::new();
    for track in stream.tracks.values().filter(|t| t.groups > 0) {
        let from = Bound::Included(Position(track.raw.position));
        batches.push(
            archive
                .read_rows("capture", &track.labels, from, Bound::Unbounded)
                .expect("the track's retained rows"),
        );
    }
    let schema = batches[0].schema();
    let file = std::fs::File::create(out).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).expect("writer");
    for b in &batches {
        writer.write(b).expect("write");
    }
    writer.close().expect("close");
}

/// `files` through the log: its paths, or the failure.
fn files(root: &Path, levels: bool) -> std::process::Output {
    let mut args = vec!["files", root.to_str().unwrap(), "--stream", "capture"];
    if levels {
        args.push("--levels");
    }
    Command::new(BIN).args(&args).output().expect("files runs")
}

const HOUR: u64 = 3_600_000_000_000;

#[test]
fn every_reader_reads_exactly_what_rows_serves_through_the_lifecycle() {
    let dir = scratch("delta-lifecycle-");
    let root = dir.path().join("archive");
    ops::base(&root);
    check(&root, false);
    // A real crash after the data file is renamed into place, before its record: the file
    // sits in rows/ where the glob sees it, and the log does not name it.
    crash(&root, "seal", FaultPoint::AfterDataRename);
    let before_recovery = check(&root, true);
    assert!(before_recovery.contains("NOT equal"), "{before_recovery}");
    // Recovery quarantines it; then an explicit retirement of run_0 (whose groups share the
    // barrier files with run_1's), a sweep under a raw lifetime, a forced compaction and a
    // checkpoint, each checked.
    let hand = Hand::at(10 * HOUR);
    let config = || {
        capture_config()
            .clock(hand.clone())
            .retention("capture", Retention::forever().raw(Lifetime::Behind(30)))
    };
    {
        let mut archive = Archive::open(&root, config()).expect("recover");
        let quarantined = archive.recovery().quarantined.clone();
        assert!(
            quarantined
                .iter()
                .any(|q| q.contains("streams/capture/rows/")),
            "the crash's data file is evidence now: {quarantined:?}"
        );
        for b in BASE_BARRIERS..BASE_BARRIERS + 3 {
            hand.set((b + 5) * HOUR);
            ops::stage(&mut archive, b);
            archive.seal_all().expect("seal");
        }
        let retired = archive
            .retire_track("capture", &["run_0".to_owned()])
            .expect("retire")
            .expect("something to retire");
        assert!(
            retired.files_rewritten > 0,
            "run_0 shares barrier files with run_1, so they are rewritten: {retired:?}"
        );
        let files = archive.state().streams["capture"].files.clone();
        for f in &files {
            assert!(
                f.groups.iter().all(|g| g.track[0] != "run_0"),
                "{} still holds run_0's retired rows",
                f.path
            );
        }
    }
    check(&root, false);
    {
        let mut archive = Archive::open(&root, config()).expect("open");
        hand.set(14 * HOUR);
        let swept = archive.sweep(14 * HOUR).expect("sweep");
        assert!(!swept.is_empty(), "the lifetime retires something");
        let stream = &archive.state().streams["capture"];
        assert!(
            stream
                .files
                .iter()
                .all(|f| !series_archive::archive::lifecycle::holds_retired(stream, f)),
            "no live file holds a retired group after the sweep: {swept:?}"
        );
    }
    check(&root, false);
    {
        let mut archive = Archive::open(&root, config()).expect("open");
        ops::stage(&mut archive, 20);
        archive.seal_all().expect("seal");
        let compacted = archive.compact(true, |_, _, _| {}).expect("compact");
        assert!(!compacted.is_empty());
        archive.checkpoint().expect("checkpoint");
    }
    check(&root, false);
    // The checkpoint followed the manifest's.
    for table in ["rows", "levels"] {
        let log = root.join("streams/capture").join(table).join("_delta_log");
        assert!(
            log.join("_last_checkpoint").is_file(),
            "{table}: no Delta checkpoint in {}",
            log.display()
        );
    }
}

/// A stream written through the CLI whose axis (`--types ts:uint`) and unsigned column
/// `hits` hold values at and past 2^62, up to 2^63 − 2^12 (the axis) and 2^63 − 1 (`hits`),
/// beside the extremes of a signed column, a float, a bool and a text track. 2^62 + 1 and
/// 2^63 − 2^12 + 1 are not floats: a reader that goes through a double changes them.
const LARGE_CSV: &str = "\
host,ts,value,reading,hits,ok
a,1,-5,0.5,0,true
a,2,3,0.25,7,false
a,4611686018427387904,7,1.25,4611686018427387905,false
a,4611686018427387905,-9223372036854775808,-2.5,9223372036854775807,true
b,3,11,-0.0,9223372036854775806,true
b,9223372036854771712,9223372036854775807,3.0,1,false
b,9223372036854771713,0,1e300,4611686018427387904,true
";

/// Java 17 or newer, which Spark 4 needs (`scripts/test` installs Debian's
/// openjdk-17-jre-headless when it is missing): fails the test, never skips, without it.
fn require_java() {
    let java = std::env::var_os("JAVA_HOME")
        .filter(|h| !h.is_empty())
        .map_or_else(|| "java".into(), |h| Path::new(&h).join("bin/java"));
    let todo = "run the suite with `scripts/test`, which installs openjdk-17-jre-headless";
    let out = Command::new(&java)
        .arg("-version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "Spark needs Java 17+, and {} cannot run ({e}): {todo}",
                java.display()
            )
        });
    // `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_412" for Java 8).
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let version = said.split('"').nth(1).unwrap_or("");
    let major = version
        .strip_prefix("1.")
        .unwrap_or(version)
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        out.status.success() && major.is_some_and(|m| m >= 17),
        "Spark needs Java 17 or newer; `{} -version` says:\n{said}\n{todo}",
        java.display()
    );
}

#[test]
fn every_engines_default_reader_reads_large_values_exactly_as_the_signed_types_the_log_declares() {
    let dir = scratch("delta-engines-");
    let root = dir.path().join("archive");
    let root_s = root.to_str().expect("utf-8 path");
    let csv = dir.path().join("large.csv");
    std::fs::write(&csv, LARGE_CSV).expect("write the csv");
    // Two barriers, kept as sealed: Spark reads more than one file.
    cli(&[
        "ingest",
        root_s,
        "--stream",
        "metrics",
        "--track",
        "host",
        "--axis",
        "ts",
        "--types",
        "ts:uint,hits:uint",
        "--seal-rows",
        "4",
        "--no-compact",
        csv.to_str().unwrap(),
    ]);
    let served = dir.path().join("served.parquet");
    cli(&[
        "rows",
        root_s,
        "--stream",
        "metrics",
        "--format",
        "parquet",
        "--out",
        served.to_str().unwrap(),
    ]);
    let list = |name: &str, args: &[&str]| {
        let mut all = vec!["files", root_s, "--stream", "metrics"];
        all.extend_from_slice(args);
        let path = dir.path().join(name);
        std::fs::write(&path, cli(&all).stdout).expect("write a file list");
        path
    };
    let level_files = list("levels-manifest.txt", &["--levels", "--manifest"]);
    let row_files = list("rows.txt", &[]);
    let spark_levels = list("levels.txt", &["--levels"]);
    let rows_listed = std::fs::read_to_string(&row_files).expect("read");
    assert!(rows_listed.lines().count() >= 2, "{rows_listed}");
    let py = python(&format!("{READERS}, pyspark"));
    require_java();
    let args: Vec<&OsStr> = vec![
        root.as_os_str(),
        OsStr::new("metrics"),
        served.as_os_str(),
        OsStr::new("--levels"),
        level_files.as_os_str(),
        OsStr::new("--axis"),
        OsStr::new("ts"),
        OsStr::new("--spark"),
        row_files.as_os_str(),
        OsStr::new("--spark-levels"),
        spark_levels.as_os_str(),
    ];
    let out = run_checker(&py, "tests/interop/delta_check.py", &args, "DELTA");
    for reader in DEFAULT_READERS
        .into_iter()
        .chain(["spark read.parquet(files)"])
    {
        for table in ["rows", "levels"] {
            let line = format!("{table}, {reader}: ");
            assert!(out.contains(&line), "no line {line:?}:\n{out}");
        }
        assert!(
            out.contains(&format!(
                "rows, {reader}: 7 rows, every column checksum equal, every type as the log \
                 declares, the 4 ts values >= 2^62 exact"
            )),
            "{reader}:\n{out}"
        );
    }
}

/// Points between a manifest commit and its Delta actions, per operation.
fn cases() -> Vec<(&'static str, FaultPoint)> {
    vec![
        ("seal", FaultPoint::AfterRecord),
        ("seal", FaultPoint::AfterDeltaCommit),
        ("compact", FaultPoint::AfterRecord),
        ("compact", FaultPoint::AfterDeltaCommit),
        ("retire", FaultPoint::AfterRecord),
        ("retire", FaultPoint::AfterDeltaCommit),
        // The first rename of a retirement is inside the rewrite of the files still
        // holding retired groups, after the retirement's record.
        ("retire", FaultPoint::AfterDataRename),
        ("checkpoint", FaultPoint::AfterDeltaCheckpoint),
    ]
}

#[test]
fn a_crash_between_a_record_and_its_delta_commit_is_brought_level() {
    for (op, point) in cases() {
        let dir = scratch("delta-crash-");
        let root = dir.path().join("archive");
        ops::base(&root);
        crash(&root, op, point);
        let case = format!("{op} at {}", point.name());
        if point == FaultPoint::AfterRecord
            || (op, point) == ("retire", FaultPoint::AfterDataRename)
        {
            // The manifest moved on and the log did not: `files` refuses rather than list
            // less (or more) than the archive holds, and names the way out.
            let out = files(&root, false);
            let text = show(&case, &out);
            assert_eq!(out.status.code(), Some(1), "{text}");
            let behind = if op == "retire" {
                "still hold retired row groups"
            } else {
                "not level with the manifest"
            };
            assert!(
                text.contains(behind) && text.contains("series-archive publish"),
                "{text}"
            );
        }
        let archive = Archive::open(&root, capture_config()).expect("reopen");
        let recovery = archive.recovery().clone();
        // After a record, the log is behind and the open brings it level. After one table's
        // Delta commit the other table's may or may not be written (the two are written at
        // once); either way the log must end level.
        if point == FaultPoint::AfterRecord && op != "retire" {
            assert!(
                !recovery.delta_leveled.is_empty(),
                "{case}: the open brought no log level: {recovery:?}"
            );
        }
        assert!(recovery.delta_behind.is_empty(), "{case}: {recovery:?}");
        for table in Table::BOTH {
            let listed = archive.delta_files("capture", table).expect("level");
            let live = match table {
                Table::Rows => archive.state().streams["capture"].files.len(),
                Table::Levels => archive.state().streams["capture"].levels.len(),
            };
            assert_eq!(listed.len(), live, "{case}: {table:?}");
        }
        drop(archive);
        check(&root, false);
        assert!(files(&root, true).status.success(), "{case}");
    }
}

#[test]
fn a_damaged_log_is_kept_as_evidence_and_written_anew() {
    let dir = scratch("delta-damaged-");
    let root = dir.path().join("archive");
    ops::base(&root);
    let log = root.join("streams/capture/rows/_delta_log");
    let newest = std::fs::read_dir(&log)
        .expect("a log")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .max()
        .expect("a commit");
    let bytes = std::fs::read(&newest).expect("read");
    std::fs::write(&newest, &bytes[..bytes.len() / 2]).expect("damage");
    let refused = files(&root, false);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        show("files", &refused)
    );
    let archive = Archive::open(&root, capture_config()).expect("reopen");
    let recovery = archive.recovery().clone();
    assert!(
        recovery.delta_rebuilt.contains(&"capture/rows".to_owned()),
        "{recovery:?}"
    );
    drop(archive);
    let evidence: Vec<_> = walk(&root.join(".quarantine"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("_delta_log"))
        .collect();
    assert!(
        evidence.iter().any(|p| p.file_name() == newest.file_name()),
        "the damaged commit is kept as evidence: {evidence:?}"
    );
    check(&root, false);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn files_refuses_a_missing_log_and_publish_writes_it_anew() {
    let dir = scratch("delta-publish-");
    let root = dir.path().join("archive");
    ops::base(&root);
    let root_s = root.to_str().unwrap();
    let through_log = cli(&["files", root_s, "--stream", "capture"]).stdout;
    let from_manifest = cli(&["files", root_s, "--stream", "capture", "--manifest"]).stdout;
    assert_eq!(
        String::from_utf8_lossy(&through_log),
        String::from_utf8_lossy(&from_manifest)
    );
    std::fs::remove_dir_all(root.join("streams/capture/rows/_delta_log")).expect("remove");
    let refused = files(&root, false);
    let text = show("files", &refused);
    assert_eq!(refused.status.code(), Some(1), "{text}");
    assert!(
        text.contains("there is no log") && text.contains("publish"),
        "{text}"
    );
    // inspect says which log is behind, and why.
    let inspected = String::from_utf8(cli(&["inspect", root_s]).stdout).expect("utf-8");
    assert!(
        inspected.contains("delta     rows: NOT level: ")
            && inspected.contains("delta     levels: level with the manifest"),
        "{inspected}"
    );
    let published = cli(&["publish", root_s, "--stream", "capture"]);
    let said = String::from_utf8_lossy(&published.stdout);
    assert!(said.contains("capture/rows: Delta version 0"), "{said}");
    assert_eq!(
        cli(&["files", root_s, "--stream", "capture"]).stdout,
        from_manifest
    );
    let json: serde_json::Value =
        serde_json::from_slice(&cli(&["inspect", root_s, "--json"]).stdout).expect("json");
    let delta = &json["streams"][0]["delta"];
    assert_eq!(delta[0]["table"], "rows");
    assert_eq!(delta[0]["level"], true, "{delta}");
    assert_eq!(
        delta[0]["files"].as_u64(),
        Some(String::from_utf8_lossy(&from_manifest).lines().count() as u64)
    );
    check(&root, false);
    let unknown = Command::new(BIN)
        .args(["publish", root_s, "--stream", "nope"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nope"));
}

#[test]
fn with_the_log_turned_off_nothing_is_written_and_files_says_so() {
    let dir = scratch("delta-off-");
    let root = dir.path().join("archive");
    {
        let mut archive = Archive::open(&root, capture_config().delta(false)).expect("open");
        ops::stage(&mut archive, 0);
        archive.seal_all().expect("seal");
    }
    assert!(!root.join("streams/capture/rows/_delta_log").exists());
    assert_eq!(files(&root, false).status.code(), Some(1));
    // A later writable open with the log on brings it level.
    let archive = Archive::open(&root, capture_config()).expect("open");
    assert!(!archive.recovery().delta_leveled.is_empty());
    assert_eq!(
        archive.delta_files("capture", Table::Rows).unwrap().len(),
        1
    );
}

/// A log's commit with what varies from run to run (timestamps, identifiers, the kernel's
/// version) replaced, for a golden comparison.
fn normalized(commit: &str) -> String {
    let mut out = String::new();
    for line in commit.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a JSON action");
        if let Some(info) = v.get_mut("commitInfo").and_then(|i| i.as_object_mut()) {
            for key in ["timestamp", "txnId", "kernelVersion", "engineInfo"] {
                if info.contains_key(key) {
                    info.insert(key.into(), "…".into());
                }
            }
        }
        if let Some(meta) = v.get_mut("metaData").and_then(|m| m.as_object_mut()) {
            for key in ["id", "createdTime"] {
                meta.insert(key.into(), "…".into());
            }
        }
        out.push_str(&serde_json::to_string(&v).expect("json"));
        out.push('\n');
    }
    out
}

#[test]
fn the_logs_first_commits_are_locked_and_the_documented_reader_runs() {
    let dir = scratch("delta-golden-");
    let root = dir.path().join("archive");
    {
        let clock = Arc::new(series_archive::archive::FixedClock(
            1_764_442_800_000_000_000,
        ));
        let mut archive = Archive::open(&root, capture_config().clock(clock)).expect("open");
        ops::stage(&mut archive, 0);
        archive.seal_all().expect("seal");
    }
    for table in ["rows", "levels"] {
        let commit = std::fs::read_to_string(
            root.join("streams/capture")
                .join(table)
                .join("_delta_log/00000000000000000000.json"),
        )
        .expect("the first commit");
        golden_files::golden(
            4,
            &format!("tests/golden/delta-{table}-commit-0.json"),
            normalized(&commit).as_bytes(),
        );
    }
    let script = dir.path().join("reader.py");
    std::fs::write(
        &script,
        golden_files::docs_block("## The Delta logs", "python"),
    )
    .expect("write");
    let py = python("duckdb, polars, deltalake");
    let out = Command::new(&py)
        .arg(&script)
        .arg(&root)
        .output()
        .expect("python runs");
    let text = show("the documented reader", &out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("24 rows through the Delta log"), "{text}");
}

#[test]
fn a_long_run_of_barriers_checkpoints_the_log_every_hundred_versions() {
    let dir = scratch("delta-interval-");
    let root = dir.path().join("archive");
    {
        let mut archive = Archive::open(&root, capture_config()).expect("open");
        for b in 0..=series_archive::archive::delta::CHECKPOINT_INTERVAL {
            ops::stage(&mut archive, b);
            archive.seal_all().expect("seal");
        }
    }
    // Versions 0..=100 of each table: the 100th is checkpointed without a manifest
    // checkpoint, so a reader replays at most 99 commits.
    for table in ["rows", "levels"] {
        let log = root.join("streams/capture").join(table).join("_delta_log");
        assert!(
            log.join("00000000000000000100.checkpoint.parquet")
                .is_file(),
            "{table}: no checkpoint at version 100 in {}",
            log.display()
        );
        let hint = std::fs::read_to_string(log.join("_last_checkpoint")).expect("a hint");
        assert!(hint.contains("\"version\":100"), "{table}: {hint}");
    }
    check(&root, false);
}
