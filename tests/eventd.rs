//! `import-eventd` end to end: databases made by `scripts/gen_eventd.py` (counters, gauges,
//! histograms, unicode labels, a real FNV-1a collision, duplicate timestamps, samples inserted
//! out of order, boot changes, rollups), imported by the real binary, and checked by
//! `tests/interop/eventd_check.py` from SQLite (Python's sqlite3) against the archive's own
//! answers: every sample per series in (timestamp, id) order, every rollup, and folds equal to
//! the rollups over the same windows.

#[path = "common/process.rs"]
mod process;
#[path = "common/tree.rs"]
mod tree;

use process::{python, run_checker, scratch, show, BIN};
use rusqlite::Connection;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::TempDir;
use tree::{listing, tree};

const PY: &str = "msgpack, pyarrow";

/// A scratch directory named `name` holding `metrics.db` generated with `args`, and the path
/// of an archive (not yet made) beside it.
fn setup(name: &str, args: &[&str]) -> (TempDir, PathBuf, PathBuf) {
    let dir = scratch(name);
    let db = generate(dir.path(), "metrics.db", args);
    let archive = dir.path().join("archive");
    (dir, db, archive)
}

/// Generates an eventd database with `scripts/gen_eventd.py`.
fn generate(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let db = dir.join(name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python(PY))
        .arg(root.join("scripts/gen_eventd.py"))
        .arg(&db)
        .args(args)
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", show("gen_eventd.py", &out));
    db
}

/// A copy of `db` named `name` beside it, edited with `sql`.
fn edited(db: &Path, name: &str, sql: &str) -> PathBuf {
    let copy = db.with_file_name(name);
    std::fs::copy(db, &copy).expect("copy");
    Connection::open(&copy)
        .and_then(|c| c.execute_batch(sql))
        .expect("edit the copy");
    copy
}

fn import_command(db: &Path, archive: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("import-eventd")
        .arg(db)
        .arg(archive)
        .args(extra);
    command
}

fn import(db: &Path, archive: &Path, extra: &[&str]) -> std::process::Output {
    import_command(db, archive, extra)
        .output()
        .expect("series-archive runs")
}

fn imported(db: &Path, archive: &Path, extra: &[&str]) -> String {
    let out = import(db, archive, extra);
    assert!(out.status.success(), "{}", show("import-eventd", &out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn check(db: &Path, archive: &Path, folds: &str) -> String {
    run_checker(
        &python(PY),
        "tests/interop/eventd_check.py",
        &[
            db.as_os_str(),
            archive.as_os_str(),
            OsStr::new(BIN),
            OsStr::new("--folds"),
            OsStr::new(folds),
        ],
        "VERDICT",
    )
}

/// A whole database in one run: every sample, rollup and fold as eventd has it; then a
/// second run finds nothing new and adds nothing.
#[test]
fn an_eventd_store_is_imported_exactly_and_its_rollups_equal_the_folds() {
    let (_dir, db, archive) = setup("eventd-whole", &["--samples", "60000", "--seed", "3"]);
    let said = imported(&db, &archive, &["--seal-rows", "5000"]);
    assert!(said.contains("imported 60000 samples"), "{said}");
    check(&db, &archive, "60");

    let before = tree(&archive);
    let again = imported(&db, &archive, &[]);
    assert!(
        again.contains("imported 0 samples") && again.contains("already holds 60000"),
        "{again}"
    );
    assert_eq!(
        listing(&tree(&archive)),
        listing(&before),
        "a second run wrote data"
    );
}

/// eventd deletes old samples and keeps their rollups: the rollups still arrive whole, and
/// folds are checked only where the samples are still there.
#[test]
fn rollups_outlive_the_samples_eventd_deleted() {
    let (_dir, db, archive) = setup(
        "eventd-retired",
        &[
            "--samples",
            "40000",
            "--seed",
            "5",
            "--retired-before-fraction",
            "0.5",
        ],
    );
    imported(&db, &archive, &[]);
    check(&db, &archive, "40");
}

/// kill -9 in the middle of an import, twice, at barriers of 2 000 samples: each run again
/// resumes where the archive stands, and the whole is exact, with no sample twice.
#[test]
fn a_killed_import_resumes_where_it_stopped_without_duplicates() {
    let (_dir, db, archive) = setup("eventd-kill", &["--samples", "80000", "--seed", "7"]);
    let mut resumed = Vec::new();
    for kill_after in [3usize, 4] {
        let mut child = import_command(&db, &archive, &["--seal-rows", "2000", "--no-compact"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn import");
        let stdout = child.stdout.take().expect("stdout");
        let mut barriers = 0;
        for line in BufReader::new(stdout).lines() {
            if line.expect("a line").starts_with("barrier ") {
                barriers += 1;
                if barriers == kill_after {
                    // SIGKILL while the next barrier is being staged and written.
                    child.kill().expect("kill -9");
                    break;
                }
            }
        }
        let status = child.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "the import finished before it could be killed"
        );
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
            .expect("stderr");
        resumed.push(err);
    }
    assert!(
        resumed[1].contains("resuming: the archive already holds"),
        "the second run did not resume:\n{}",
        resumed[1]
    );
    let last = imported(&db, &archive, &["--seal-rows", "2000"]);
    assert!(
        last.contains("resuming: the archive already holds"),
        "{last}"
    );
    check(&db, &archive, "30");
}

/// Runs an import that must be refused before anything is touched: exit 1, stderr naming each
/// of `needles` and saying nothing was imported, and the archive byte for byte as it was (or
/// still not there).
fn refused(db: &Path, archive: &Path, needles: &[&str]) {
    let before = archive.exists().then(|| tree(archive));
    let out = import(db, archive, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        show("import-eventd", &out)
    );
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}:\n{err}");
    }
    assert!(err.contains("nothing was imported"), "{err}");
    match before {
        Some(before) => {
            let after = tree(archive);
            assert!(
                after == before,
                "a refused import changed the archive:\n{}\nwas\n{}",
                listing(&after),
                listing(&before)
            );
        }
        None => assert!(!archive.exists(), "a refused import created the archive"),
    }
}

/// Whatever the archive could not hold is refused before anything is touched: an unknown
/// schema version, a missing column, a damaged histogram sample, a sample of no series or with
/// a boot id that is not 16 bytes, a label with a control character, two series of one
/// identity, two series whose rollups would share a track, a sample or rollup older than what
/// the archive already imported of its track, another database. Samples newer than the
/// archive are imported, exactly those.
#[test]
fn bad_databases_are_refused_and_new_samples_are_appended() {
    let (dir, db, archive) = setup("eventd-refuse", &["--samples", "20000", "--seed", "9"]);

    let fresh = dir.path().join("fresh");
    let v2 = edited(
        &db,
        "v2.db",
        "UPDATE metadata SET value = '2' WHERE key = 'schema_version'",
    );
    refused(
        &v2,
        &fresh,
        &["v2.db", "schema version \"2\"", "version \"1\" only"],
    );
    let no_column = edited(
        &db,
        "no_column.db",
        "DROP INDEX idx_rollups_series_function_window; ALTER TABLE rollups DROP COLUMN window_seconds",
    );
    refused(
        &no_column,
        &fresh,
        &[
            "no_column.db",
            "table rollups lacks column(s) window_seconds",
        ],
    );
    let damaged = edited(
        &db,
        "damaged.db",
        "UPDATE samples SET histogram_data = x'81a3666f6f01' WHERE id = (SELECT min(s.id) FROM samples s JOIN series e ON e.id = s.series_id WHERE e.type = 2)",
    );
    refused(
        &damaged,
        &fresh,
        &["damaged.db", "histogram_data", "MessagePack"],
    );
    let orphan = edited(
        &db,
        "orphan.db",
        "PRAGMA foreign_keys = OFF; INSERT INTO samples (series_id, boot_id, timestamp, value) VALUES (99999, zeroblob(16), 5, 1.0)",
    );
    refused(&orphan, &fresh, &["1 sample(s) belong to no series"]);
    let short_boot = edited(
        &db,
        "short_boot.db",
        "UPDATE samples SET boot_id = x'00' WHERE id = (SELECT min(id) FROM samples)",
    );
    refused(
        &short_boot,
        &fresh,
        &["1 sample(s) have a boot_id that is not 16 bytes"],
    );
    let control = edited(
        &db,
        "control.db",
        "UPDATE series SET labels = labels || char(7) WHERE id = (SELECT min(id) FROM series WHERE type = 1)",
    );
    refused(&control, &fresh, &["control.db", "control character"]);
    let twins = edited(
        &db,
        "twins.db",
        "INSERT INTO series (name, labels, type, label_hash) SELECT name, labels, type, label_hash FROM series WHERE type = 1 ORDER BY id LIMIT 1",
    );
    refused(&twins, &fresh, &["twins.db", "has the same identity"]);
    // A gauge of a counter's name and labels, both with rollups: one rollups track.
    let shared = edited(
        &db,
        "shared.db",
        "INSERT INTO series (name, labels, type, label_hash) SELECT name, labels, 1, label_hash FROM series WHERE type = 0 AND id IN (SELECT series_id FROM rollups) ORDER BY id LIMIT 1; \
         INSERT INTO rollups (series_id, function, window_seconds, window_start, value) VALUES (last_insert_rowid(), 'max', 60, 0, 1.0)",
    );
    refused(&shared, &fresh, &["shared.db", "would share one track"]);
    // A database whose value columns were declared without REAL affinity can hold an integer
    // past 2^53, which the archive's float `value` would store rounded.
    let untyped = rollups_rebuilt(
        &db,
        "untyped.db",
        "CREATE TABLE rollups_new (series_id INTEGER NOT NULL, function TEXT NOT NULL, \
         window_seconds INTEGER NOT NULL, window_start INTEGER NOT NULL, value BLOB NOT NULL)",
        "window_start",
    );
    let big_rollup = edited(
        &untyped,
        "big_rollup.db",
        "UPDATE rollups SET value = 9007199254740993 WHERE rowid = (SELECT min(rowid) FROM rollups)",
    );
    refused(
        &big_rollup,
        &fresh,
        &[
            "big_rollup.db",
            "column value holds 9007199254740993",
            "would be stored rounded",
        ],
    );
    // i64::MAX rounds up to 2^63 as a float (a cast back to an integer would clamp it to
    // i64::MAX again and hide the change).
    let max_rollup = edited(
        &untyped,
        "max_rollup.db",
        "UPDATE rollups SET value = 9223372036854775807 WHERE rowid = (SELECT min(rowid) FROM rollups)",
    );
    refused(
        &max_rollup,
        &fresh,
        &["max_rollup.db", "column value holds 9223372036854775807"],
    );
    // 2^53 itself is exact: that database imports.
    let exact = edited(
        &untyped,
        "exact_rollup.db",
        "UPDATE rollups SET value = 9007199254740992 WHERE rowid = (SELECT min(rowid) FROM rollups)",
    );
    imported(&exact, &dir.path().join("exact"), &[]);
    let big_sample = edited(
        &db,
        "big_sample.db",
        "DROP INDEX idx_samples_series_timestamp; ALTER TABLE samples RENAME TO samples_old; \
         CREATE TABLE samples (id INTEGER PRIMARY KEY, series_id INTEGER NOT NULL, boot_id BLOB NOT NULL, \
         timestamp INTEGER NOT NULL, value BLOB NOT NULL, histogram_data BLOB); \
         INSERT INTO samples SELECT * FROM samples_old ORDER BY id; DROP TABLE samples_old; \
         CREATE INDEX idx_samples_series_timestamp ON samples(series_id, timestamp, id); \
         UPDATE samples SET value = -9007199254740995 WHERE id = (SELECT min(s.id) FROM samples s JOIN series e ON e.id = s.series_id WHERE e.type = 1)",
    );
    refused(
        &big_sample,
        &fresh,
        &[
            "big_sample.db",
            "1 sample(s) have an integer value a 64-bit float cannot hold exactly",
        ],
    );

    imported(&db, &archive, &[]);
    // A sample eventd accepted late, older than the archive's newest of its series.
    let late = edited(
        &db,
        "late.db",
        "INSERT INTO samples (series_id, boot_id, timestamp, value) SELECT series_id, boot_id, timestamp - 1, 42.0 FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 1) ORDER BY timestamp DESC LIMIT 1",
    );
    refused(
        &late,
        &archive,
        &["late.db", "1 sample(s) at or before", "gauge"],
    );
    // eventd deleted the older half of a series' samples (its retention) and then took one
    // stamped before the archive's newest: the counts alone would balance, the ledger's
    // sample id does not.
    let masked = edited(
        &db,
        "masked.db",
        "DELETE FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0) AND timestamp < (SELECT avg(timestamp) FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0)); \
         INSERT INTO samples (series_id, boot_id, timestamp, value) SELECT series_id, boot_id, timestamp - 1, 7.0 FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0) ORDER BY timestamp DESC LIMIT 1",
    );
    refused(
        &masked,
        &archive,
        &["masked.db", "after an earlier import began", "counter"],
    );
    // A sample stamped before anything the archive ever held of its series.
    let early = edited(
        &db,
        "early.db",
        "INSERT INTO samples (series_id, boot_id, timestamp, value) SELECT series_id, boot_id, timestamp - 1000, 7.0 FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 1) ORDER BY timestamp LIMIT 1",
    );
    refused(&early, &archive, &["early.db", "at or before", "gauge"]);
    // A second rollup of a window the archive already holds: the import resumes each rollup
    // track after its newest window, so it would be left out.
    let rerolled = edited(
        &db,
        "rerolled.db",
        "INSERT INTO rollups (series_id, function, window_seconds, window_start, value) SELECT series_id, function, window_seconds, window_start, value + 1 FROM rollups ORDER BY id LIMIT 1",
    );
    refused(
        &rerolled,
        &archive,
        &[
            "rerolled.db",
            "1 min rollup(s) over 60 s starting at or before",
        ],
    );
    // Another eventd's database (another seed: the same series, other timestamps) is refused,
    // not merged into these tracks.
    let other = generate(
        dir.path(),
        "other.db",
        &["--samples", "20000", "--seed", "10"],
    );
    refused(&other, &archive, &["other.db", "imported from another one"]);
    // Samples after the archive's newest (ten days on, past every rollup window): exactly
    // those are added.
    let grown = edited(
        &db,
        "grown.db",
        "INSERT INTO samples (series_id, boot_id, timestamp, value, histogram_data) SELECT series_id, boot_id, max(timestamp) + 864000000000000, value, histogram_data FROM samples GROUP BY series_id",
    );
    let series: i64 = Connection::open(&grown)
        .and_then(|c| c.query_row("SELECT count(*) FROM series", [], |r| r.get(0)))
        .expect("count series");
    let said = imported(&grown, &archive, &[]);
    assert!(
        said.contains(&format!("imported {series} samples")),
        "{said}"
    );
    check(&grown, &archive, "20");

    // eventd deleted everything of one counter up to past the archive's newest sample of it,
    // then took one more: the run says the archive has a gap there and appends that sample.
    let gapped = edited(
        &grown,
        "gapped.db",
        "INSERT INTO samples (series_id, boot_id, timestamp, value) SELECT series_id, boot_id, max(timestamp) + 1000, 1.0 FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0); \
         DELETE FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0) AND timestamp < (SELECT max(timestamp) FROM samples WHERE series_id = (SELECT min(id) FROM series WHERE type = 0))",
    );
    let said = imported(&gapped, &archive, &[]);
    assert!(
        said.contains("warning:")
            && said.contains("the archive has a gap")
            && said.contains("imported 1 samples"),
        "{said}"
    );
}

/// `rows --stream STREAM --format csv` of `archive`.
fn rows_csv(archive: &Path, stream: &str) -> String {
    let out = Command::new(BIN)
        .arg("rows")
        .arg(archive)
        .args(["--stream", stream, "--format", "csv"])
        .output()
        .expect("series-archive runs");
    assert!(out.status.success(), "{}", show("rows", &out));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A copy of `db` whose rollups table is rebuilt as `create` (a table named `rollups_new`)
/// from the original's rows, `window_start` as `start` (an SQL expression over the
/// original's columns), in eventd's id order.
fn rollups_rebuilt(db: &Path, name: &str, create: &str, start: &str) -> PathBuf {
    edited(
        db,
        name,
        &format!(
            "{create}; \
             INSERT INTO rollups_new (series_id, function, window_seconds, window_start, value) \
             SELECT series_id, function, window_seconds, {start}, value FROM rollups ORDER BY id; \
             DROP TABLE rollups; ALTER TABLE rollups_new RENAME TO rollups; \
             CREATE INDEX idx_rollups_series_function_window ON rollups(series_id, function, window_seconds, window_start)"
        ),
    )
}

/// The seed names `rollups` without showing it. A rollups table without an `id` column and
/// with `window_start` in seconds, and one declared `WITHOUT ROWID`, import exactly the
/// rollups (and samples) the documented form does; the run says which unit it read and why;
/// a later run resumes per rollup track in that unit (a rollup rewritten beneath the archive
/// is refused, counted in seconds). A table mixing the units is refused, naming both.
#[test]
fn a_rollups_table_without_id_or_in_seconds_imports_the_same_rollups() {
    let (dir, db, reference) = setup("eventd-rollups", &["--samples", "12000", "--seed", "4"]);
    let said = imported(&db, &reference, &[]);
    assert!(
        said.contains("window_start is read as nanoseconds"),
        "{said}"
    );
    let want = rows_csv(&reference, "rollups");
    assert!(
        want.lines().count() > 100,
        "too few rollups to compare:\n{want}"
    );

    let seconds = rollups_rebuilt(
        &db,
        "seconds.db",
        "CREATE TABLE rollups_new (series_id INTEGER NOT NULL, function TEXT NOT NULL, \
         window_seconds INTEGER NOT NULL, window_start INTEGER NOT NULL, value REAL NOT NULL)",
        "window_start / 1000000000",
    );
    let without_rowid = rollups_rebuilt(
        &db,
        "without_rowid.db",
        "CREATE TABLE rollups_new (series_id INTEGER NOT NULL, function TEXT NOT NULL, \
         window_seconds INTEGER NOT NULL, window_start INTEGER NOT NULL, value REAL NOT NULL, \
         PRIMARY KEY (series_id, function, window_seconds, window_start)) WITHOUT ROWID",
        "window_start",
    );
    for (copy, unit) in [(&seconds, "seconds"), (&without_rowid, "nanoseconds")] {
        let archive = dir
            .path()
            .join(copy.file_stem().expect("a name").to_string_lossy().as_ref());
        let said = imported(copy, &archive, &[]);
        assert!(
            said.contains(&format!("window_start is read as {unit}")),
            "{said}"
        );
        assert_eq!(
            rows_csv(&archive, "rollups"),
            want,
            "{}: the rollups differ from the documented form's",
            copy.display()
        );
        for stream in ["counters", "gauges", "histograms"] {
            assert_eq!(
                rows_csv(&archive, stream),
                rows_csv(&reference, stream),
                "{stream}"
            );
        }
    }

    // The seconds archive again: nothing new; then a rollup rewritten at a window it holds.
    let archive = dir.path().join("seconds");
    let again = imported(&seconds, &archive, &[]);
    assert!(again.contains("and 0 rollups"), "{again}");
    let rerolled = edited(
        &seconds,
        "seconds_rerolled.db",
        "INSERT INTO rollups (series_id, function, window_seconds, window_start, value) \
         SELECT series_id, function, window_seconds, window_start, value + 1 FROM rollups \
         WHERE function = 'min' AND window_seconds = 60 ORDER BY rowid LIMIT 1",
    );
    refused(
        &rerolled,
        &archive,
        &["1 min rollup(s) over 60 s starting at or before"],
    );

    let mixed = edited(
        &db,
        "mixed.db",
        "UPDATE rollups SET window_start = window_start / 1000000000 WHERE id = (SELECT min(id) FROM rollups)",
    );
    refused(
        &mixed,
        &dir.path().join("mixed"),
        &[
            "table rollups: column window_start holds",
            "reads as seconds",
            "reads as nanoseconds",
            "one unit",
        ],
    );
}

/// Every refusal of the database's shape names the table, the column, what it holds and
/// what was expected, in the importer's words, never SQLite's: a table that is not there, a
/// column missing, a value of the wrong kind in a rollups table without `id`.
#[test]
fn schema_refusals_name_the_table_the_column_and_what_was_expected() {
    let (dir, db, _) = setup("eventd-words", &["--samples", "3000", "--seed", "2"]);
    let fresh = dir.path().join("fresh");
    let no_rollups = edited(&db, "no_rollups.db", "DROP TABLE rollups");
    refused(
        &no_rollups,
        &fresh,
        &[
            "there is no table rollups",
            "window_start (the window's start since the epoch)",
        ],
    );
    let no_start = edited(
        &db,
        "no_start.db",
        "DROP INDEX idx_rollups_series_function_window; ALTER TABLE rollups DROP COLUMN window_start",
    );
    refused(
        &no_start,
        &fresh,
        &[
            "table rollups lacks column(s) window_start",
            "the importer reads series_id (its series)",
        ],
    );
    let no_metadata = edited(&db, "no_metadata.db", "DROP TABLE metadata");
    refused(&no_metadata, &fresh, &["there is no table metadata"]);
    let no_version = edited(&db, "no_version.db", "DELETE FROM metadata");
    refused(
        &no_version,
        &fresh,
        &["table metadata has no row with key 'schema_version'"],
    );
    // No `id` in rollups, and a value that is text.
    let bad_value = rollups_rebuilt(
        &db,
        "bad_value.db",
        "CREATE TABLE rollups_new (series_id INTEGER NOT NULL, function TEXT NOT NULL, \
         window_seconds INTEGER NOT NULL, window_start INTEGER NOT NULL, value)",
        "window_start",
    );
    let bad_value = edited(
        &bad_value,
        "bad_value2.db",
        "UPDATE rollups SET value = 'n/a' WHERE rowid = (SELECT min(rowid) FROM rollups)",
    );
    let out = import(&bad_value, &fresh, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("no such column"), "SQLite's words: {err}");
    refused(
        &bad_value,
        &fresh,
        &[
            "table rollups: the rollup of series",
            "column value holds 'n/a', expected a number",
        ],
    );
}

/// `inspect` names only Delta tables a reader can open: the rollups stream and the import
/// ledger are kept without levels, so they have no levels table, and every table `inspect`
/// names has its log.
#[test]
fn inspect_names_no_levels_table_for_a_stream_without_levels() {
    let (_dir, db, archive) = setup("eventd-inspect", &["--samples", "3000", "--seed", "6"]);
    imported(&db, &archive, &[]);
    let out = Command::new(BIN)
        .arg("inspect")
        .arg(&archive)
        .arg("--json")
        .output()
        .expect("inspect runs");
    assert!(out.status.success(), "{}", show("inspect --json", &out));
    let described: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let streams = described["streams"].as_array().expect("streams");
    let mut named = 0;
    for s in streams {
        let id = s["id"].as_str().expect("id");
        let tables: Vec<&str> = s["delta"]
            .as_array()
            .expect("delta")
            .iter()
            .map(|d| d["table"].as_str().expect("table"))
            .collect();
        if s["ladder"].is_null() {
            assert_eq!(
                tables,
                ["rows"],
                "stream {id} without levels names {tables:?}"
            );
        } else {
            assert_eq!(tables, ["rows", "levels"], "stream {id}");
        }
        for d in s["delta"].as_array().expect("delta") {
            let path = Path::new(d["path"].as_str().expect("path"));
            assert!(
                path.join("_delta_log").is_dir(),
                "inspect names {} for stream {id}, which has no log",
                path.display()
            );
            named += 1;
        }
    }
    assert!(
        streams
            .iter()
            .any(|s| s["id"] == "rollups" && s["ladder"].is_null()),
        "no rollups stream without levels: {described}"
    );
    assert!(named >= 6, "{named} tables named");
    let text = Command::new(BIN)
        .arg("inspect")
        .arg(&archive)
        .output()
        .expect("inspect runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        !text.contains("rollups/levels") && !text.contains("eventd_imports/levels"),
        "{text}"
    );
}
