//! Format version 11: a packed data file whose slices average fewer than 16 rows is recorded
//! by its row groups, and a replay reads its slices from its rows (`docs/format.md`,
//! "Version 11").
//!
//! - `tests/golden/barrier-v11.{bin,jsonl}`: a barrier naming a format-11 file (the version-9
//!   example's file: three slices of row group 0, one of row group 1), framed byte for byte
//!   as `manifest::log::encode` writes it, as frame version 11; its `row_groups` are the
//!   docs' example.
//! - Row groups that lie (no track, out of key order, overlapping, beside other entries, in
//!   a file of another format) are refused when decoded, naming the file.
//! - An archive this build writes (500 tracks, three rows each, two barriers): every data
//!   file is format 11, every barrier frame version 11, the manifest a few hundred bytes a
//!   barrier; a reopen reads back exactly the slices that were sealed, a scoped open answers
//!   what a whole one answers, and the docs' Python reader lists the row groups.
//! - Rows that disagree with their record, and a file whose rows cannot be read, stop the
//!   open naming the file: a catalog without them would answer less than the archive holds.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v11` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::delivered::{labels, seal_fleet};
use common::{capture_config, rows_of};
use golden_files::{
    capture_barrier, docs_block, example_packed_file, generation_records, golden,
    python_reader_lists,
};
use series_archive::archive::manifest::frame::{self, Decoded, FORMAT_VERSION};
use series_archive::archive::manifest::{log, Record, SegmentFile, ROWS_FORMAT};
use series_archive::archive::{Archive, ArchiveError, Config, ReadError, StoredErrorKind};
use std::ops::Bound::Unbounded;

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;

fn row_group_file() -> SegmentFile {
    example_packed_file(ROWS_FORMAT)
}

fn payload_of(record: &Record) -> String {
    serde_json::to_string(record).expect("json")
}

#[test]
fn a_barrier_naming_a_row_group_file_is_locked_and_framed_as_version_11() {
    const { assert!(FORMAT_VERSION >= 11) };
    let file = row_group_file();
    let record = capture_barrier(file.clone(), SEALED_AT_NS);
    let framed = log::encode(&record);
    golden(11, "tests/golden/barrier-v11.bin", &framed);
    let payload = payload_of(&record);
    golden(
        11,
        "tests/golden/barrier-v11.jsonl",
        format!("{payload}\n").as_bytes(),
    );
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 11);
    assert!(
        payload.contains(r#""row_groups":[{"tracks":3,"#),
        "{payload}"
    );
    assert!(!payload.contains(r#""groups""#), "{payload}");
    assert!(!payload.contains(r#""pieces""#), "{payload}");
    assert!(payload.contains(r#""format":11"#), "{payload}");
    // Decoded, the file holds its row groups and awaits its rows: no slice yet.
    let decoded = match frame::decode(&framed, 0) {
        Decoded::Record { payload, .. } => Record::decode(payload).expect("decodes"),
        other => panic!("the golden frame does not decode: {other:?}"),
    };
    let Record::Barrier(barrier) = decoded else {
        panic!("a barrier")
    };
    let read = &barrier.streams[0].file;
    assert!(read.groups.is_empty());
    assert!(read.elided.as_ref().is_some_and(|e| e.is_rows_form()));
    assert_eq!(read.row_groups(), file.row_groups());
    assert_eq!(read.rows(), 15);
    assert_eq!(read.first_seq(), 0);
    // Encoding the decoded record writes the row groups it was given: the same bytes.
    assert_eq!(
        log::try_encode(&Record::Barrier(barrier)).expect("encodes"),
        framed
    );
    // The docs' example is exactly what this build writes for the file.
    let example = docs_block("## Version 11: row-group entries", "json");
    let documented: serde_json::Value =
        serde_json::from_str(&format!("{{{example}}}")).expect("the docs' example is JSON");
    let written: serde_json::Value = serde_json::from_str(&payload).expect("json");
    assert_eq!(
        documented["row_groups"], written["streams"][0]["file"]["row_groups"],
        "docs/format.md's example differs from what this build writes"
    );
}

#[test]
fn the_rule_records_few_rows_a_slice_by_row_groups_and_the_rest_as_columns() {
    use series_archive::archive::manifest::packed_format;
    assert_eq!(packed_format(15, 1, 9), ROWS_FORMAT);
    assert_eq!(packed_format(16, 1, 9), 9);
    assert_eq!(packed_format(100_000, 100_000, 9), ROWS_FORMAT);
    assert_eq!(packed_format(1_600_000, 100_000, 9), 9);
    assert_eq!(packed_format(0, 0, 9), 9);
}

/// `payload` with its first `from` replaced by `to`.
fn tampered(payload: &str, from: &str, to: &str) -> String {
    assert!(payload.contains(from), "{from} is not in {payload}");
    payload.replacen(from, to, 1)
}

#[test]
fn row_groups_that_lie_are_refused_naming_the_file() {
    let payload = payload_of(&capture_barrier(row_group_file(), SEALED_AT_NS));
    let cases = [
        (
            tampered(&payload, r#"{"tracks":3,"#, r#"{"tracks":0,"#),
            "row_groups[0] holds no track",
        ),
        (
            tampered(&payload, r#""rows":9,"#, r#""rows":2,"#),
            "row_groups[0] holds no track, or fewer rows than tracks",
        ),
        (
            tampered(
                &payload,
                r#""last":["run_0","p3"]"#,
                r#""last":["run_0","p0"]"#,
            ),
            "row_groups[0] names its first and last track out of key order",
        ),
        (
            tampered(
                &payload,
                r#""first":["run_0","p4"],"last":["run_0","p4"]"#,
                r#""first":["run_0","p2"],"last":["run_0","p2"]"#,
            ),
            "row_groups[1] goes back in key order",
        ),
        (
            tampered(&payload, r#""offset":704,"#, r#""offset":700,"#),
            "row_groups[1] overlaps the row group before it",
        ),
        (
            tampered(&payload, r#""seq":[9,14]"#, r#""seq":[14,9]"#),
            "row_groups[1] gives a range whose low end is above its high end",
        ),
        (
            tampered(&payload, r#""format":11"#, r#""format":9"#),
            "row_groups in a file of format Some(9)",
        ),
        (
            tampered(
                &payload,
                r#","row_groups":"#,
                r#","groups":[],"row_groups":"#,
            ),
            "row_groups in a file of format Some(11) beside other entries",
        ),
        (
            tampered(&payload, r#","row_groups":[{"#, r#","row_groups":[{"x":1,"#),
            "unknown field `x`",
        ),
    ];
    for (bad, why) in cases {
        let error = Record::decode(bad.as_bytes()).expect_err(why).to_string();
        assert!(error.contains(why), "{why}: {error}");
        if !why.starts_with("unknown") {
            assert!(
                error.contains("streams/capture/rows/000000000001.parquet"),
                "{why}: {error}"
            );
        }
    }
    let no_rows = tampered(
        &payload,
        r#","row_groups":[{"#,
        r#","pieces":{"row_groups":[]},"x":[{"#,
    );
    assert!(Record::decode(no_rows.as_bytes()).is_err());
}

/// The rows a read of the tracks beneath `scope` answers, and its survey, from the archive at
/// `root` opened whole or scoped.
fn read_beneath(root: &std::path::Path, scope: &[String], scoped: bool) -> String {
    let mut config = Config::new().read_only(true);
    if scoped {
        config = config.scope("capture", scope.to_vec());
    }
    let archive = Archive::open(root, config).expect("open");
    let rows = archive
        .read_rows("capture", scope, Unbounded, Unbounded)
        .map(|b| rows_of(&b))
        .expect("rows");
    assert!(!rows.is_empty(), "{scope:?} holds rows");
    let survey = archive
        .survey("capture", scope, Unbounded, Unbounded, 64)
        .map(|s| format!("{:?}", s.buckets))
        .expect("survey");
    format!("{rows:?}\n{survey}")
}

#[test]
fn an_archive_this_build_writes_records_row_groups_and_reads_them_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 runs × 25 probes, three rows each, over two barriers: 500 slices of one or two
    // rows a file.
    let sealed = seal_fleet(dir.path(), 20, 25, 3);
    assert!(sealed
        .iter()
        .all(|f| f.format == Some(ROWS_FORMAT) && f.groups.len() == 500));
    let (bytes, records) = generation_records(dir.path());
    let barriers: Vec<u16> = records
        .into_iter()
        .filter(|(kind, _)| kind == "barrier")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(barriers, [11, 11]);
    // A row group each: the manifest (its snapshot, the declaration and two barriers) no
    // longer grows with the tracks, where version 9 records about 25 bytes for each of the
    // 1,000 slices.
    assert!(bytes.len() < 5_000, "{} manifest bytes", bytes.len());
    let whole =
        Archive::open(dir.path(), capture_config().delta(false).read_only(true)).expect("reopen");
    assert_eq!(whole.state().streams["capture"].files, sealed);
    assert!(whole.verify(|_, _| {}).is_empty());
    drop(whole);
    // A scoped open reads only its selection's rows, and answers what a whole one does.
    for scope in [
        labels(&["run_7"]),
        labels(&["run_7", "p3"]),
        labels(&["run_19", "p24"]),
        labels(&["run_0", "p0"]),
    ] {
        let scoped = Archive::open(
            dir.path(),
            Config::new()
                .read_only(true)
                .scope("capture", scope.clone()),
        )
        .expect("a scoped open");
        for file in &scoped.state().streams["capture"].files {
            assert!(file.groups.iter().all(|g| g.track.starts_with(&scope)));
            assert!(!file.groups.is_empty(), "{scope:?}");
        }
        drop(scoped);
        assert_eq!(
            read_beneath(dir.path(), &scope, true),
            read_beneath(dir.path(), &scope, false),
            "{scope:?}"
        );
    }
    // A writable reopen reads the rows, checks them, and goes on sealing.
    let reopened = Archive::open(dir.path(), capture_config().delta(false)).expect("writable");
    assert_eq!(reopened.state().streams["capture"].files, sealed);
    drop(reopened);
    python_reader_lists(dir.path(), &sealed, ["run_7", "p3"]);
}

#[test]
fn rows_that_disagree_with_their_record_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sealed = seal_fleet(dir.path(), 4, 5, 3);
    let path = std::fs::read_dir(dir.path().join("manifest"))
        .expect("manifest")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .max()
        .expect("a generation");
    let bytes = std::fs::read(&path).expect("read");
    // The second barrier's record, said again with one row group's rows off by one and framed
    // whole (what a writer's bug would leave: the frame's checksum holds).
    let mut at = 0;
    let mut rewritten = Vec::new();
    let mut barriers = 0;
    while let Decoded::Record { payload, next } = frame::decode(&bytes, at) {
        let version = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
        let text = String::from_utf8(payload.to_vec()).expect("utf-8");
        if text.starts_with(r#"{"record":"barrier""#) {
            barriers += 1;
        }
        let text = match barriers == 2 && text.starts_with(r#"{"record":"barrier""#) {
            true => {
                let rows = sealed[1].rows();
                tampered(
                    &text,
                    &format!(r#""rows":{rows},"#),
                    &format!(r#""rows":{},"#, rows + 1),
                )
            }
            false => text,
        };
        rewritten.extend_from_slice(&frame::encode_version(version, text.as_bytes()));
        at = next;
    }
    std::fs::write(&path, &rewritten).expect("write");
    // A reader opens, and every read meeting the row group refuses it as damage, as do a
    // description and a writer: nothing answers as if the row group held what the record says.
    let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("read-only");
    let error = reader
        .read_rows("capture", &labels(&["run_1"]), Unbounded, Unbounded)
        .expect_err("refused");
    let ReadError::Stored(stored) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(stored.kind, StoredErrorKind::Corrupt, "{error}");
    assert!(
        stored.what.contains(&sealed[1].path) && stored.what.contains("row group 0"),
        "{error}"
    );
    // A description says its counts leave the row group out.
    let described = reader.describe().expect("describe");
    let unreadable = &described.streams[0].unreadable;
    assert!(
        unreadable.len() == 1 && unreadable[0].contains(&sealed[1].path),
        "{unreadable:?}"
    );
    drop(reader);
    let mut writer = Archive::open(dir.path(), capture_config().delta(false)).expect("writable");
    let error = writer
        .compact(true, |_, _, _| {})
        .expect_err("no compaction")
        .to_string();
    assert!(error.contains(&sealed[1].path), "{error}");
}

#[test]
fn a_row_group_whose_rows_cannot_be_read_refuses_every_read_meeting_it_and_every_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sealed = seal_fleet(dir.path(), 4, 5, 3);
    let gone = dir.path().join(&sealed[0].path);
    let moved = dir.path().join("moved.parquet");
    std::fs::rename(&gone, &moved).expect("move the file away");
    // A reader opens: the row group's tracks are not cataloged, and every read that may meet
    // them refuses, naming the file and its tracks, never a short answer.
    let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("read-only");
    for selection in [labels(&[]), labels(&["run_0"]), labels(&["run_3", "p4"])] {
        let error = reader
            .read_rows("capture", &selection, Unbounded, Unbounded)
            .expect_err("a read meeting the row group refuses");
        let ReadError::Stored(stored) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(stored.kind, StoredErrorKind::Missing, "{error}");
        assert!(
            stored.what.contains(&sealed[0].path) && stored.what.contains("run_0/p0 to run_3/p4"),
            "{error}"
        );
        assert!(reader
            .survey("capture", &selection, Unbounded, Unbounded, 64)
            .is_err());
    }
    assert!(reader
        .verify(|_, _| {})
        .iter()
        .any(|e| e.contains(&sealed[0].path)));
    drop(reader);
    // A writer opens, and changes nothing of the stream: it cannot know where the row
    // group's tracks stand, and a compaction would leave their rows out.
    let mut writer = Archive::open(dir.path(), capture_config().delta(false)).expect("writable");
    let row = common::delivered::row(0, 0, 9);
    let refusals = [
        writer
            .stage_batch("capture", &common::batch(&[row]), &[1_000])
            .expect_err("no rows are taken"),
        writer
            .compact(true, |_, _, _| {})
            .expect_err("no compaction"),
    ];
    for error in refusals {
        assert!(
            matches!(error, ArchiveError::Unreadable { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains(&sealed[0].path), "{error}");
    }
    // A checkpoint writes the file as its record gave it: the row group is still named, and
    // still unread, by the next open.
    writer
        .checkpoint()
        .expect("a checkpoint keeps the file's record");
    drop(writer);
    let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("read-only");
    assert!(reader
        .read_rows("capture", &labels(&["run_2"]), Unbounded, Unbounded)
        .is_err());
    drop(reader);
    // Put back, the archive opens and verifies as before: nothing was changed.
    std::fs::rename(&moved, &gone).expect("put it back");
    let archive = Archive::open(dir.path(), Config::new().read_only(true)).expect("open");
    assert_eq!(archive.state().streams["capture"].files, sealed);
    assert!(archive.verify(|_, _| {}).is_empty());
}

/// A version-10 archive (`tests/fixtures/archive-v10/`: 600 tracks, paged records) taken over
/// by this build: its records are read as before, a barrier of one row a track and a
/// compaction of everything are recorded by their row groups (version 11), and every open,
/// whole or scoped, answers every row.
#[test]
fn a_version_10_archive_takes_version_11_records_and_serves_every_row() {
    use common::delivered::{expected, interleaved};
    let dir = tempfile::tempdir().expect("tempdir");
    common::tree::copy_tree(
        &golden_files::crate_path("tests/fixtures/archive-v10"),
        dir.path(),
    );
    let all = interleaved(2, 300, 5, &[Some(0); 600]);
    let tick4: Vec<(u64, common::Row)> = all[2_400..].to_vec();
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    let rows: Vec<common::Row> = tick4.iter().map(|(_, r)| r.clone()).collect();
    let positions: Vec<u64> = tick4.iter().map(|(p, _)| *p).collect();
    archive
        .stage_batch("capture", &common::batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal").expect("a barrier");
    archive.compact(true, |_, _, _| {}).expect("compact");
    let files = archive.state().streams["capture"].files.clone();
    assert!(
        files.iter().all(|f| f.format == Some(ROWS_FORMAT)),
        "five rows a track: recorded by row groups"
    );
    drop(archive);
    // The compaction removed format-11 files, so it checkpointed first: the generation
    // starts with a snapshot naming format-11 files, framed as version 11.
    let (_, records) = generation_records(dir.path());
    assert_eq!(records[0], ("snapshot".to_string(), 11), "{records:?}");
    let whole =
        Archive::open(dir.path(), capture_config().delta(false).read_only(true)).expect("reopen");
    assert_eq!(whole.state().streams["capture"].files, files);
    assert!(whole.verify(|_, _| {}).is_empty());
    for scope in [labels(&[]), labels(&["run_1"]), labels(&["run_0", "p7"])] {
        let want = expected(&all, &scope, Unbounded, Unbounded);
        let got = whole
            .read_rows("capture", &scope, Unbounded, Unbounded)
            .map(|b| rows_of(&b))
            .expect("rows");
        assert_eq!(got, want, "{scope:?}");
        assert_eq!(
            read_beneath(dir.path(), &scope, true),
            read_beneath(dir.path(), &scope, false),
            "{scope:?}"
        );
    }
}

/// What a file recorded by its row groups says of its tracks (where each started, when it was
/// sealed) outlives the file: a compaction or retirement that removes it checkpoints first, so
/// a reopen holds exactly the catalog the writer held.
#[test]
fn a_reopen_holds_the_writers_catalog_after_row_group_files_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    seal_fleet(dir.path(), 4, 5, 3);
    let mut writer = Archive::open(dir.path(), capture_config().delta(false)).expect("writable");
    writer.compact(true, |_, _, _| {}).expect("compact");
    writer
        .retire_track("capture", &labels(&["run_1"]))
        .expect("retire");
    // Tick 3 for the other runs, then a compaction that leaves the retired rows behind.
    let rows: Vec<common::Row> = [0, 2, 3]
        .into_iter()
        .flat_map(|run| (0..5).map(move |probe| common::delivered::row(run, probe, 3)))
        .collect();
    let positions: Vec<u64> = (61..61 + rows.len() as u64).collect();
    writer
        .stage_batch("capture", &common::batch(&rows), &positions)
        .expect("stage");
    writer.seal_all().expect("seal").expect("a barrier");
    writer.compact(true, |_, _, _| {}).expect("compact again");
    let held = writer.state().streams["capture"].tracks.clone();
    let files = writer.state().streams["capture"].files.clone();
    assert!(files.iter().all(|f| f.format == Some(ROWS_FORMAT)));
    drop(writer);
    let reopened = Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
    let stream = &reopened.state().streams["capture"];
    assert_eq!(stream.files, files);
    assert_eq!(
        stream.tracks, held,
        "the catalog a reopen rebuilds is the writer's"
    );
    assert!(
        stream.tracks.values().any(|t| t.whole),
        "the retired run is kept"
    );
}

/// The child of [`a_crash_after_a_compaction_record_keeps_the_history_of_its_inputs`]: seals a
/// fleet, retires a run, and compacts with the process aborted right after the compaction's
/// record is durable (before its checkpoint and before its inputs are deleted).
#[test]
fn v11_crash_child() {
    let Ok(dir) = std::env::var("SERIES_ARCHIVE_V11_CRASH_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    seal_fleet(dir, 4, 5, 3);
    {
        let mut archive = Archive::open(dir, capture_config().delta(false)).expect("open");
        archive
            .retire_track("capture", &labels(&["run_1"]))
            .expect("retire");
        let held = archive.state().streams["capture"].tracks.clone();
        std::fs::write(dir.join("held.txt"), format!("{held:?}")).expect("write the catalog");
    }
    let faults =
        series_archive::archive::Faults::abort_at(series_archive::archive::FaultPoint::AfterRecord);
    let mut archive =
        Archive::open(dir, capture_config().delta(false).faults(faults)).expect("open");
    let outcome = archive.compact(true, |_, _, _| {});
    eprintln!("compact returned instead of crashing: {outcome:?}");
    std::process::exit(3);
}

/// A real process killed after a compaction's record of format-11 inputs is durable: the
/// recovering open reads the inputs (still there) for their tracks' history, checkpoints, and
/// only then deletes them, so every later open holds the writer's catalog.
#[test]
fn a_crash_after_a_compaction_record_keeps_the_history_of_its_inputs() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "v11_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SERIES_ARCHIVE_V11_CRASH_DIR", dir.path())
        .output()
        .expect("run the child");
    assert_eq!(
        out.status.signal(),
        Some(6),
        "the child dies of abort: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let held = std::fs::read_to_string(dir.path().join("held.txt")).expect("the catalog");
    let inputs: Vec<std::path::PathBuf> =
        std::fs::read_dir(dir.path().join("streams/capture/rows"))
            .expect("rows")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
    assert!(inputs.len() >= 3, "the inputs and the output: {inputs:?}");
    // The recovering writer: the compaction is durable, its inputs are gone once it opened.
    let archive = Archive::open(dir.path(), capture_config().delta(false)).expect("recover");
    let stream = &archive.state().streams["capture"];
    assert_eq!(stream.files.len(), 1, "the compaction's output alone");
    for path in &inputs {
        let relative = path.strip_prefix(dir.path()).expect("under the root");
        let live = stream
            .files
            .iter()
            .any(|f| std::path::Path::new(&f.path) == relative);
        assert_eq!(path.exists(), live, "{}", path.display());
    }
    drop(archive);
    // The retired run's history survives in every later open: origin, seal time, marks.
    let reopened = Archive::open(dir.path(), Config::new().read_only(true)).expect("reopen");
    let retired: Vec<_> = reopened.state().streams["capture"]
        .tracks
        .values()
        .filter(|t| t.whole)
        .collect();
    assert_eq!(retired.len(), 5);
    for t in retired {
        assert!(t.origin_axis.is_some() && t.last_sealed_ns > 0, "{t:?}");
        assert!(held.contains(&format!("{:?}", t.marks)), "{t:?}");
    }
}
