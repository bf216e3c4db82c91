//! Format version 8: deferred level partials (`docs/format.md`, "Version 8").
//!
//! - `tests/golden/deferred-v8.{bin,jsonl}`: a barrier that defers its partials and the
//!   `compact` record that summarises the deferred rows, framed byte for byte as
//!   `manifest::log::encode` writes them, as frame version 8.
//! - Replay applies them and refuses what breaks the rules: partials written while rows are
//!   deferred, a barrier both deferring and writing partials, a summary that does not start at
//!   the first deferred `_seq` or reaches past the stream, a snapshot deferring from past it.
//! - What this build writes: a fleet of small tracks whose barriers' cells would hold a few
//!   rows each defers its partials; survey and fold answers are those of an archive that
//!   stores every level, before the summary, after it, after a reopen and after a forced
//!   compaction. A retirement that would take deferred rows summarises them first, so their
//!   levels outlive them. A summary of more rows than it gathers at once, read from shared
//!   row groups that also hold rows before the deferral, answers the same.
//! - A real crash (SIGABRT in a child process) inside the summary's write path leaves the
//!   archive serving exactly the state before it or the state after it.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v8` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::scrape::{self, STEP_NS, T0};
use golden_files::{golden, span};
use series_archive::archive::lifecycle::{Compaction, Lifetime, Retention};
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Barrier, BarrierStream, Compact, GroupEntry, Record, SegmentFile, Slice, State,
};
use series_archive::archive::{Archive, Config, FaultPoint, Faults};
use series_archive::Aggregate;
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;

fn file(name: u64, kind: &str, groups: Vec<GroupEntry>, format: u16) -> SegmentFile {
    SegmentFile {
        name,
        path: format!("streams/metrics/{kind}/{name:012}.parquet"),
        bytes: 4096,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer: span(3000, 1096, 0x1122_3344 + name as u32),
        groups: groups.into(),
        cold: None,
        run: None,
        format: Some(format),
        first_level: None,
        elided: None,
    }
}

fn entry(host: &str, seqs: [u64; 2], row: u64) -> GroupEntry {
    GroupEntry {
        track: [host].map(String::from).into(),
        rows: seqs[1] - seqs[0] + 1,
        position: [seqs[0] + 1, seqs[1] + 1],
        axis: Some([T0 + seqs[0] * STEP_NS, T0 + seqs[1] * STEP_NS]),
        seq: seqs,
        span: span(4, 900, 0x0A0A_0A0A),
        last_track: None,
        slice: Some(Slice { group: 0, row }),
    }
}

/// A barrier of two hosts, two rows each (`_seq` 0..=3), that defers its partials.
fn deferring_barrier() -> Record {
    Record::Barrier(Barrier {
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        next_name: 2,
        streams: vec![BarrierStream {
            stream: "metrics".into(),
            watermark: 4,
            next_seq: 4,
            file: file(
                1,
                "rows",
                vec![entry("h00", [0, 1], 0), entry("h01", [2, 3], 2)],
                6,
            ),
            levels: None,
            levels_from: None,
            levels_deferred: true,
        }],
    })
}

/// The summary of the deferred rows `_seq` 0..4: one partial level file of all 8 levels.
fn summary() -> Compact {
    let level = |k: u64| GroupEntry {
        track: Default::default(),
        rows: 2,
        position: [1, 4],
        axis: Some([T0, T0 + 3 * STEP_NS]),
        seq: [0, 3],
        span: span(4 + k * 500, 500, 0x0B00_0000 + k as u32),
        last_track: None,
        slice: None,
    };
    Compact {
        stream: "metrics".into(),
        next_name: 3,
        added: Vec::new(),
        removed: Vec::new(),
        added_levels: vec![file(2, "levels", (0..8).map(level).collect(), 5)],
        removed_levels: Vec::new(),
        levels_summary: Some([0, 4]),
    }
}

#[test]
fn deferred_partials_and_their_summary_are_locked_and_framed_as_version_8() {
    let records = [deferring_barrier(), Record::Compact(summary())];
    let mut framed = Vec::new();
    let mut lines = String::new();
    for record in &records {
        let one = log::encode(record);
        assert_eq!(u16::from_le_bytes([one[4], one[5]]), 8, "{record:?}");
        match frame::decode(&one, 0) {
            Decoded::Record { payload, .. } => {
                assert_eq!(&Record::decode(payload).expect("decodes"), record)
            }
            other => panic!("the frame does not decode: {other:?}"),
        }
        framed.extend_from_slice(&one);
        lines.push_str(&serde_json::to_string(record).expect("json"));
        lines.push('\n');
    }
    golden(8, "tests/golden/deferred-v8.bin", &framed);
    golden(8, "tests/golden/deferred-v8.jsonl", lines.as_bytes());
    assert!(lines.contains(r#""levels_deferred":true"#), "{lines}");
    assert!(lines.contains(r#""levels_summary":[0,4]"#), "{lines}");
    const { assert!(frame::FORMAT_VERSION >= 8) };
    // A barrier that writes its partials keeps its earlier version.
    let Record::Barrier(mut plain) = deferring_barrier() else {
        unreachable!()
    };
    plain.streams[0].levels_deferred = false;
    assert_eq!(log::encode(&Record::Barrier(plain))[4], 6);
}

/// A state with the metrics stream declared.
fn declared() -> State {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), metrics_config()).expect("open");
    let decl = archive.state().streams["metrics"].decl.clone();
    let mut state = State::default();
    state.apply(&Record::Declare(decl)).expect("declare");
    state
}

#[test]
fn replay_applies_deferral_and_its_summary_and_refuses_what_breaks_the_rules() {
    let mut state = declared();
    state
        .apply(&deferring_barrier())
        .expect("a deferring barrier");
    assert_eq!(state.streams["metrics"].levels_deferred_from, Some(0));
    // A snapshot carries the deferral.
    let snapshot = state.snapshot(1);
    assert_eq!(snapshot.streams[0].levels_deferred_from, Some(0));
    assert_eq!(log::encode(&Record::Snapshot(snapshot.clone()))[4], 8);
    let mut again = State::default();
    again
        .apply(&Record::Snapshot(snapshot.clone()))
        .expect("snapshot");
    assert_eq!(again.streams["metrics"].levels_deferred_from, Some(0));
    let mut past = snapshot;
    past.streams[0].levels_deferred_from = Some(4);
    assert!(State::default().apply(&Record::Snapshot(past)).is_err());

    // Partials while rows are deferred would sort before rows they follow: refused.
    let Record::Barrier(mut second) = deferring_barrier() else {
        unreachable!()
    };
    second.barrier = 2;
    second.next_name = 4;
    let s = &mut second.streams[0];
    (s.watermark, s.next_seq, s.levels_deferred) = (8, 8, false);
    s.file = file(
        2,
        "rows",
        vec![entry("h00", [4, 5], 0), entry("h01", [6, 7], 2)],
        6,
    );
    s.levels = Some(file(3, "levels", Vec::new(), 5));
    assert!(state
        .clone()
        .apply(&Record::Barrier(second.clone()))
        .is_err());
    // Deferring and writing partials at once is refused.
    second.streams[0].levels_deferred = true;
    assert!(declared().apply(&Record::Barrier(second)).is_err());

    // The summary must start at the first deferred `_seq` and stay within the stream.
    for bad in [[1, 4], [0, 5], [0, 0]] {
        let mut wrong = summary();
        wrong.levels_summary = Some(bad);
        assert!(
            state.clone().apply(&Record::Compact(wrong)).is_err(),
            "{bad:?}"
        );
    }
    let mut removes = summary();
    removes.removed = vec![1];
    assert!(state.clone().apply(&Record::Compact(removes)).is_err());
    state
        .apply(&Record::Compact(summary()))
        .expect("the summary applies");
    let stream = &state.streams["metrics"];
    assert_eq!(stream.levels_deferred_from, None);
    assert_eq!(stream.levels.len(), 1);
    // Nothing is deferred any more: a second summary is refused.
    assert!(state.apply(&Record::Compact(summary())).is_err());
}

const HOSTS: usize = 100;
/// Rows a barrier of the fleet: 100 rows a host, 1,000 s of each host's axis. Its cells at
/// the first stored level (4,096 s) and above, four a host, hold fewer than 64 rows each
/// until three barriers' rows are summarised together.
const BARRIER_ROWS: usize = HOSTS * 100;

fn metrics_config() -> Config {
    scrape::config()
}

fn seal(archive: &mut Archive, from: usize, to: usize, per_barrier: usize) {
    scrape::seal(archive, HOSTS, from, to, per_barrier);
}

/// Every survey and fold answer over ranges, budgets and selections, as text.
fn answers(archive: &Archive, rows: usize) -> Vec<String> {
    let end = T0 + (rows / HOSTS) as u64 * STEP_NS;
    let ranges: [(Bound<u64>, Bound<u64>); 3] = [
        (Unbounded, Unbounded),
        (Included(T0 + 95 * STEP_NS / 10), Excluded(end / 2 + T0 / 2)),
        (Included(T0 + 170 * STEP_NS), Included(end - 33 * STEP_NS)),
    ];
    let mut out = Vec::new();
    for track in [vec![], vec!["h07".to_string()]] {
        for (start, end) in ranges {
            for budget in [4, 8, 40, 400, 4000] {
                let s = archive
                    .survey("metrics", &track, start, end, budget)
                    .expect("survey");
                out.push(format!(
                    "{track:?} {start:?} {end:?} @{budget}: {:?} {:?} {:?}",
                    s.plan, s.span, s.buckets
                ));
            }
            for kind in [Aggregate::Count, Aggregate::Sum, Aggregate::Max] {
                let f = archive
                    .fold("metrics", &track, start, end, kind)
                    .expect("fold");
                out.push(format!(
                    "{track:?} {start:?} {end:?} {kind:?}: {:?} {:?}",
                    f.span, f.answers
                ));
            }
        }
    }
    out
}

/// The same rows in barriers too small to judge (2,000 rows), so every level is stored.
fn reference(rows: usize) -> (tempfile::TempDir, Archive) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), metrics_config()).expect("open");
    seal(&mut archive, 0, rows, 2_000);
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, None);
    assert_eq!(stream.levels_from, None);
    (dir, archive)
}

#[test]
fn a_fleet_of_small_tracks_defers_its_partials_and_reads_answer_as_if_they_were_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), metrics_config()).expect("open");
    seal(&mut archive, 0, 2 * BARRIER_ROWS, BARRIER_ROWS);
    let stream = &archive.state().streams["metrics"];
    assert_eq!(
        stream.levels_from,
        Some(4),
        "levels from 4,096 s cells up hold a cell per 64 rows or fewer"
    );
    assert_eq!(stream.levels_deferred_from, Some(0));
    assert!(stream.levels.is_empty(), "no partials were written");
    let (_r, two) = reference(2 * BARRIER_ROWS);
    let want = answers(&two, 2 * BARRIER_ROWS);
    assert!(want.iter().any(|a| a.contains("level: 4")), "{want:?}");
    assert_eq!(answers(&archive, 2 * BARRIER_ROWS), want);
    // Two barriers' cells still hold too few rows: an automatic compaction leaves them.
    archive.compact(false, |_, _, _| {}).expect("compact");
    assert_eq!(
        archive.state().streams["metrics"].levels_deferred_from,
        Some(0)
    );

    // A third barrier makes them worth it: the summary covers all three.
    seal(
        &mut archive,
        2 * BARRIER_ROWS,
        3 * BARRIER_ROWS,
        BARRIER_ROWS,
    );
    let (_r, three) = reference(3 * BARRIER_ROWS);
    let want = answers(&three, 3 * BARRIER_ROWS);
    assert_eq!(answers(&archive, 3 * BARRIER_ROWS), want);
    archive.compact(false, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, None);
    assert_eq!(stream.levels.len(), 1);
    assert_eq!(stream.levels[0].first_level, Some(4));
    assert_eq!(
        stream.levels[0].groups[0].seq,
        [0, 3 * BARRIER_ROWS as u64 - 1]
    );
    assert_eq!(answers(&archive, 3 * BARRIER_ROWS), want);

    // The next barrier is judged alone again and defers; its rows merge after the summary.
    seal(
        &mut archive,
        3 * BARRIER_ROWS,
        4 * BARRIER_ROWS,
        BARRIER_ROWS,
    );
    assert_eq!(
        archive.state().streams["metrics"].levels_deferred_from,
        Some(3 * BARRIER_ROWS as u64)
    );
    let (_r, four) = reference(4 * BARRIER_ROWS);
    let want = answers(&four, 4 * BARRIER_ROWS);
    assert_eq!(answers(&archive, 4 * BARRIER_ROWS), want);
    drop(archive);
    let mut reopened = Archive::open(dir.path(), metrics_config()).expect("reopen");
    assert_eq!(
        reopened.state().streams["metrics"].levels_deferred_from,
        Some(3 * BARRIER_ROWS as u64)
    );
    assert_eq!(answers(&reopened, 4 * BARRIER_ROWS), want);
    // A forced compaction rewrites the data files across the deferral's start and merges
    // level runs; the answers hold.
    reopened.compact(true, |_, _, _| {}).expect("compact");
    assert_eq!(answers(&reopened, 4 * BARRIER_ROWS), want);
    reopened.checkpoint().expect("checkpoint");
    drop(reopened);
    let reopened = Archive::open(dir.path(), metrics_config()).expect("reopen");
    assert_eq!(answers(&reopened, 4 * BARRIER_ROWS), want);
    assert!(reopened.verify(|_, _| {}).is_empty());
}

/// A summary gathers its rows into batches of 65,536 and gives back each decoded row group
/// once no later track reads it. Here it summarises 80,000 deferred rows (several batches),
/// some in a compacted file of many small row groups, some in barrier files; then, after a
/// compaction packed rows from both sides of the next deferral's start into shared groups,
/// a second summary that must take only the deferred ones.
#[test]
fn a_summary_of_more_rows_than_one_batch_answers_as_stored_levels_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = metrics_config().compaction(Compaction {
        group_rows: 1_000,
        ..Compaction::default()
    });
    let mut archive = Archive::open(dir.path(), config.clone()).expect("open");
    seal(&mut archive, 0, 2 * BARRIER_ROWS, BARRIER_ROWS);
    // Two barriers are not worth a summary: a forced compaction packs their data into row
    // groups of 1,000 rows and leaves the rows deferred.
    archive.compact(true, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, Some(0));
    assert_eq!(stream.files.len(), 1);
    assert_eq!(stream.files[0].row_groups().len(), 2 * BARRIER_ROWS / 1_000);
    seal(
        &mut archive,
        2 * BARRIER_ROWS,
        8 * BARRIER_ROWS,
        BARRIER_ROWS,
    );
    assert_eq!(
        archive.state().streams["metrics"].levels_deferred_from,
        Some(0)
    );
    archive.compact(false, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, None, "the summary ran");
    assert_eq!(
        stream.levels[0].groups[0].seq,
        [0, 8 * BARRIER_ROWS as u64 - 1],
        "one summary took every deferred row"
    );
    let (_r, eight) = reference(8 * BARRIER_ROWS);
    let want = answers(&eight, 8 * BARRIER_ROWS);
    assert!(want.iter().any(|a| a.contains("level: 4")), "{want:?}");
    assert_eq!(answers(&archive, 8 * BARRIER_ROWS), want);

    // A barrier defers again; a forced compaction packs its rows into the row groups of the
    // summarised ones, so the next summary reads groups holding rows before the deferral's
    // start, which it must leave out.
    seal(
        &mut archive,
        8 * BARRIER_ROWS,
        9 * BARRIER_ROWS,
        BARRIER_ROWS,
    );
    archive.compact(true, |_, _, _| {}).expect("compact");
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, Some(8 * BARRIER_ROWS as u64));
    assert!(
        stream.files.iter().any(|f| f
            .groups
            .iter()
            .any(|g| g.seq[0] < 8 * BARRIER_ROWS as u64 && g.seq[1] >= 8 * BARRIER_ROWS as u64)),
        "an entry holds rows from both sides of the deferral's start"
    );
    seal(
        &mut archive,
        9 * BARRIER_ROWS,
        11 * BARRIER_ROWS,
        BARRIER_ROWS,
    );
    archive.compact(false, |_, _, _| {}).expect("compact");
    assert_eq!(
        archive.state().streams["metrics"].levels_deferred_from,
        None,
        "the second summary ran"
    );
    let (_r, eleven) = reference(11 * BARRIER_ROWS);
    let want = answers(&eleven, 11 * BARRIER_ROWS);
    assert_eq!(answers(&archive, 11 * BARRIER_ROWS), want);
    drop(archive);
    let reopened = Archive::open(dir.path(), config).expect("reopen");
    assert_eq!(answers(&reopened, 11 * BARRIER_ROWS), want);
    assert!(reopened.verify(|_, _| {}).is_empty());
}

#[test]
fn a_retirement_summarises_deferred_rows_before_it_takes_them() {
    // Raw rows live 990 s behind each host's newest (the first barrier's rows go); levels forever.
    let retention = || Retention::forever().raw(Lifetime::Behind(99 * STEP_NS));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = || metrics_config().retention("metrics", retention());
    let mut archive = Archive::open(dir.path(), config()).expect("open");
    seal(&mut archive, 0, 2 * BARRIER_ROWS, BARRIER_ROWS);
    assert_eq!(
        archive.state().streams["metrics"].levels_deferred_from,
        Some(0)
    );
    let reports = archive.sweep(SEALED_AT_NS).expect("sweep");
    assert!(!reports.is_empty(), "the first barrier's rows are retired");
    let stream = &archive.state().streams["metrics"];
    assert_eq!(stream.levels_deferred_from, None, "summarised first");
    assert_eq!(stream.levels.len(), 1);
    assert!(stream.tracks.values().all(|t| t.raw.seq > 0));
    // A coarse survey of the whole history (one cell of the first stored level) still
    // answers every row, from the levels.
    let (_r, reference) = reference(2 * BARRIER_ROWS);
    for track in [vec![], vec!["h07".to_string()]] {
        let got = archive
            .survey("metrics", &track, Unbounded, Unbounded, 4)
            .expect("survey");
        let want = reference
            .survey("metrics", &track, Unbounded, Unbounded, 4)
            .expect("survey");
        let count: u64 = got.buckets.iter().map(|b| b.count).sum();
        assert_eq!((got.plan, got.buckets), (want.plan, want.buckets));
        let rows = if track.is_empty() {
            2 * BARRIER_ROWS
        } else {
            2 * BARRIER_ROWS / HOSTS
        };
        assert_eq!(count, rows as u64);
    }
}

const DIR_VAR: &str = "SERIES_ARCHIVE_V8_CRASH_DIR";
const AT_VAR: &str = "SERIES_ARCHIVE_V8_CRASH_AT";
const CHILD: &str = "summary_crash_child";

/// Re-executed by `a_crash_inside_the_summary_leaves_the_state_before_or_after_it`: opens
/// the archive with a fault at the named point and summarises; dies of SIGABRT there.
#[test]
fn summary_crash_child() {
    let (Ok(dir), Ok(at)) = (std::env::var(DIR_VAR), std::env::var(AT_VAR)) else {
        return;
    };
    let point = FaultPoint::parse(&at).expect("a fault point");
    let mut archive = Archive::open(
        Path::new(&dir),
        metrics_config().faults(Faults::abort_at(point)),
    )
    .expect("open with faults");
    let outcome = archive.compact(false, |_, _, _| {});
    eprintln!("the summary returned instead of crashing at {at}: {outcome:?}");
    std::process::exit(3);
}

#[test]
fn a_crash_inside_the_summary_leaves_the_state_before_or_after_it() {
    let rows = 3 * BARRIER_ROWS;
    let (_r, reference) = reference(rows);
    let want = answers(&reference, rows);
    for point in [
        FaultPoint::AfterDataWrite,
        FaultPoint::AfterDataRename,
        FaultPoint::MidRecord,
        FaultPoint::AfterRecord,
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut archive = Archive::open(dir.path(), metrics_config()).expect("open");
            seal(&mut archive, 0, rows, BARRIER_ROWS);
            assert_eq!(
                archive.state().streams["metrics"].levels_deferred_from,
                Some(0)
            );
        }
        let out = Command::new(std::env::current_exe().expect("exe"))
            .args(["--exact", CHILD, "--nocapture", "--test-threads=1"])
            .env(DIR_VAR, dir.path())
            .env(AT_VAR, point.name())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run the child");
        assert_eq!(
            out.status.signal(),
            Some(6),
            "{point:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut archive = Archive::open(dir.path(), metrics_config()).expect("recover");
        let stream = &archive.state().streams["metrics"];
        let after = point == FaultPoint::AfterRecord;
        assert_eq!(
            stream.levels_deferred_from,
            if after { None } else { Some(0) },
            "{point:?}"
        );
        assert_eq!(stream.levels.len(), usize::from(after), "{point:?}");
        assert_eq!(answers(&archive, rows), want, "{point:?}");
        assert!(archive.verify(|_, _| {}).is_empty(), "{point:?}");
        // The summary the crash interrupted runs again and lands.
        archive.compact(false, |_, _, _| {}).expect("compact");
        assert_eq!(
            archive.state().streams["metrics"].levels_deferred_from,
            None
        );
        assert_eq!(answers(&archive, rows), want, "{point:?}");
    }
}
