//! Crashes inside the lifecycle's commits over files recorded by their row groups (format
//! version 11), really crashed: the test re-executes its own binary as a child that builds a
//! fleet archive (20 tracks of one or two rows a barrier, so every data file is format 11),
//! reopens it with `Faults::abort_at(point)` and runs one operation that removes format-11
//! files, so that the first hit of `point` is inside it. The process dies of SIGABRT there.
//!
//! What is particular to format 11: a replay reads such a file's slices from its rows, so
//! what the file says of its tracks' history (where each started, when it was sealed, its age
//! marks) is lost with the file unless a checkpoint wrote it down first. The writer
//! checkpoints before it deletes one, and recovery deletes what a crash left of one only
//! after a checkpoint. This matrix crashes at every point of those operations, the
//! checkpoint's own included:
//!
//! - a compaction (after a whole retirement of a run), at the data write, the rename, mid
//!   record, after the record, after the checkpoint's snapshot is written and after it is
//!   renamed into place;
//! - a retirement that drops a whole file, mid record, after it, and at both points of its
//!   checkpoint.
//!
//! The parent builds the same archive beside it with the same hand-moved clock and runs the
//! operation to completion, so it knows the catalog before and after exactly (history
//! included). It checks that the crash left what its point says (outputs staged or placed, a
//! torn record, removed files still in place, a snapshot staged or renamed), that the
//! recovering open keeps as evidence exactly what no durable state names, that a read-only
//! open serves one of the two and changes nothing,
//! that the recovering open serves the old one for a point before the record is durable and
//! the new one from the record on, with exactly the live files in place, that every later
//! open holds the same catalog, and that the archive takes a barrier, a compaction and a
//! checkpoint afterwards.

mod common;

use common::delivered::{labels, row};
use common::hand::Hand;
use common::tree::{listing, recorded_paths, tree};
use common::{batch, capture_config, rows_of, Row};
use series_archive::archive::manifest::{StreamState, ROWS_FORMAT};
use series_archive::archive::{Archive, Config, FaultPoint, Faults};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The child's variables: `{CHILD_VARS}_DIR`, `_OP` and `_AT` (see `common::child`).
const CHILD_VARS: &str = "SERIES_ARCHIVE_F11_CRASH";
const CHILD: &str = "format11_crash_child";
const HOUR: u64 = 3_600_000_000_000;
const RUNS: usize = 4;
const PROBES: usize = 5;
const TICKS: u64 = 3;

/// The operation a case crashes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `compact(true, ..)` after run_0 was retired whole: every barrier file is an input.
    Compact,
    /// `retire_track(["run_1"])`: drops the barrier file holding run_1's rows alone.
    Retire,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Compact => "compact",
            Op::Retire => "retire",
        }
    }

    fn parse(name: &str) -> Option<Op> {
        [Op::Compact, Op::Retire]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

fn config(clock: &Arc<Hand>) -> Config {
    capture_config().delta(false).clock(clock.clone())
}

/// Spawns and writable opens take turns (a forked child holds a copy of an open archive's
/// `LOCK` descriptor until it execs), as in tests/lifecycle_crash.rs.
static FORK: Mutex<()> = Mutex::new(());

fn open_writable(root: &Path, config: Config) -> Archive {
    let _turn = FORK.lock().unwrap_or_else(|p| p.into_inner());
    Archive::open(root, config).expect("a writable open")
}

/// Seals `rows` at positions from `first` as one barrier at `at_ns`.
fn seal(archive: &mut Archive, clock: &Hand, at_ns: u64, rows: &[Row], first: u64) {
    clock.set(at_ns);
    let positions: Vec<u64> = (first..first + rows.len() as u64).collect();
    archive
        .stage_batch("capture", &batch(rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal").expect("a barrier");
}

/// The rows of ticks `ticks` of every track, a tick's tracks in key order.
fn ticks(ticks: std::ops::Range<u64>) -> Vec<Row> {
    ticks
        .flat_map(|tick| {
            (0..RUNS).flat_map(move |run| (0..PROBES).map(move |probe| row(run, probe, tick)))
        })
        .collect()
}

/// Builds the archive a case crashes in and closes it: three barriers an hour apart (ticks
/// 0-1 of every track, tick 2 of every track, tick 3 of run_1's tracks alone), every data
/// file format 11; for the compaction, run_0 retired whole.
fn prepare(root: &Path, op: Op) {
    let clock = Hand::at(0);
    let mut archive = open_writable(root, config(&clock));
    let first = ticks(0..2);
    let second = ticks(2..TICKS);
    let third: Vec<Row> = (0..PROBES).map(|p| row(1, p, TICKS)).collect();
    seal(&mut archive, &clock, HOUR, &first, 1);
    seal(
        &mut archive,
        &clock,
        2 * HOUR,
        &second,
        1 + first.len() as u64,
    );
    let next = 1 + (first.len() + second.len()) as u64;
    seal(&mut archive, &clock, 3 * HOUR, &third, next);
    let files = &archive.state().streams["capture"].files;
    assert_eq!(files.len(), 3);
    assert!(
        files.iter().all(|f| f.format == Some(ROWS_FORMAT)),
        "every barrier file is recorded by its row groups"
    );
    clock.set(4 * HOUR);
    if op == Op::Compact {
        archive
            .retire_track("capture", &labels(&["run_0"]))
            .expect("retire run_0")
            .expect("something retired");
    }
}

fn run_op(archive: &mut Archive, op: Op) -> String {
    match op {
        Op::Compact => format!("{:?}", archive.compact(true, |_, _, _| {})),
        Op::Retire => format!("{:?}", archive.retire_track("capture", &labels(&["run_1"]))),
    }
}

/// The child: prepares the archive, reopens it with the fault hook installed and runs the
/// operation, which must crash. Returns at once in a normal run.
#[test]
fn format11_crash_child() {
    let Some((dir, op, at)) = common::child::told(CHILD_VARS) else {
        return;
    };
    let op = Op::parse(&op).unwrap_or_else(|| panic!("unknown operation {op:?}"));
    let point = FaultPoint::parse(&at).unwrap_or_else(|| panic!("unknown fault point {at:?}"));
    let root = Path::new(&dir);
    prepare(root, op);
    let clock = Hand::at(4 * HOUR);
    let mut archive = open_writable(root, config(&clock).faults(Faults::abort_at(point)));
    let outcome = run_op(&mut archive, op);
    eprintln!(
        "{} returned instead of crashing at {at}: {outcome}",
        op.name()
    );
    std::process::exit(3);
}

/// What an archive serves: its catalog (every track's history), its live files, and the
/// rows of every run that is not retired whole.
#[derive(Debug, PartialEq)]
struct Served {
    stream: StreamState,
    paths: BTreeSet<String>,
    rows: BTreeMap<String, Vec<(u64, Row)>>,
}

fn served(archive: &Archive) -> Served {
    let stream = archive.state().streams["capture"].clone();
    let mut rows = BTreeMap::new();
    for run in 0..RUNS {
        let run = format!("run_{run}");
        // From the run's floor (a whole retirement puts it past the track's last row).
        let floor = stream
            .tracks
            .values()
            .filter(|t| t.labels[0] == run)
            .map(|t| t.floor())
            .max()
            .unwrap_or_default();
        let from = match floor.0 {
            0 => Unbounded,
            _ => Included(floor),
        };
        let read = archive
            .read_rows("capture", &labels(&[run.as_str()]), from, Unbounded)
            .expect("the rows of a run");
        rows.insert(run, rows_of(&read));
    }
    Served {
        stream,
        paths: recorded_paths(archive),
        rows,
    }
}

/// Asserts `got` is `expected`, saying where they differ.
fn assert_same(got: &Served, expected: &Served, at: &str) {
    assert_eq!(got.paths, expected.paths, "{at}: the live files");
    assert_eq!(got.rows, expected.rows, "{at}: the rows");
    for (key, track) in &expected.stream.tracks {
        assert_eq!(got.stream.tracks.get(key), Some(track), "{at}: track {key}");
    }
    assert_eq!(
        got.stream.tracks.len(),
        expected.stream.tracks.len(),
        "{at}: the tracks"
    );
    assert_eq!(got.stream.files, expected.stream.files, "{at}: the files");
    assert!(got.stream == expected.stream, "{at}: the stream's state");
}

/// The parquet files under the stream's directory.
fn files_in_place(root: &Path) -> BTreeSet<String> {
    tree(root)
        .into_iter()
        .filter(|(p, bytes)| {
            bytes.is_some() && p.starts_with("streams/capture/") && p.ends_with(".parquet")
        })
        .map(|(p, _)| p)
        .collect()
}

/// The same archive built beside the crashed one, the operation run to completion.
fn reference(root: &Path, op: Op) -> (Served, Served) {
    prepare(root, op);
    let mut archive = open_writable(root, config(&Hand::at(4 * HOUR)));
    let before = served(&archive);
    let outcome = run_op(&mut archive, op);
    let after = served(&archive);
    assert_ne!(
        before.paths, after.paths,
        "{op:?} removed no file: {outcome}"
    );
    assert!(
        before.paths.iter().any(|p| !after.paths.contains(p)),
        "{op:?} removed no file: {outcome}"
    );
    (before, after)
}

fn crash_at(root: &Path, op: Op, point: FaultPoint) {
    let told = (root.as_os_str(), op.name(), point.name());
    common::child::crash(CHILD, CHILD_VARS, told, &FORK);
}

fn crash_case(op: Op, point: FaultPoint) {
    let at = format!("{} at {}", op.name(), point.name());
    let dir = tempfile::tempdir().expect("tempdir");
    let (old, new) = reference(&dir.path().join("reference"), op);
    let root = dir.path().join("archive");
    crash_at(&root, op, point);
    let durable = matches!(
        point,
        FaultPoint::AfterRecord | FaultPoint::AfterSnapshotWrite | FaultPoint::AfterSnapshotRename
    );
    let expected = if durable { &new } else { &old };

    // The crash happened where the case says: what it left proves the operation got there.
    let before = tree(&root);
    let names = |dir: &str, ext: &str| -> BTreeSet<String> {
        before
            .iter()
            .filter(|(p, b)| b.is_some() && p.starts_with(dir) && p.ends_with(ext))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let in_streams = names("streams/capture/", ".parquet");
    let removed: BTreeSet<&String> = old.paths.difference(&new.paths).collect();
    let removed_in_place = removed.iter().all(|p| in_streams.contains(*p));
    let left = match point {
        // The outputs written, not yet in place.
        FaultPoint::AfterDataWrite => !names(".tmp/", ".parquet").is_empty(),
        // The outputs in place beside the inputs.
        FaultPoint::AfterDataRename => new
            .paths
            .difference(&old.paths)
            .all(|p| in_streams.contains(p)),
        // The removal's record durable, its files still there (and for the checkpoint's
        // points, its snapshot written, or renamed into place beside the old generation).
        FaultPoint::AfterRecord => removed_in_place,
        FaultPoint::AfterSnapshotWrite => removed_in_place && !names(".tmp/", ".log").is_empty(),
        FaultPoint::AfterSnapshotRename => {
            removed_in_place && names("manifest/", ".log").len() == 2
        }
        _ => true,
    };
    assert!(left, "{at}: the crash left\n{}", listing(&before));

    // A read-only open serves one of the two sets, whole, and changes nothing.
    {
        let reader = Archive::open(&root, Config::new().read_only(true)).expect("read-only");
        // Mid record: the torn tail is what it finds.
        assert_eq!(
            reader.recovery().torn_tail_at.is_some(),
            point == FaultPoint::MidRecord,
            "{at}: {:?}",
            reader.recovery()
        );
        assert_same(&served(&reader), expected, &format!("{at}, read-only"));
    }
    let untouched = tree(&root);
    assert!(
        untouched == before,
        "{at}: a read-only open changed the archive:\nbefore\n{}after\n{}",
        listing(&before),
        listing(&untouched)
    );

    // The recovering open: the same set, exactly its files in place (a durable record's
    // removed files deleted once a checkpoint holds their history).
    let archive = open_writable(&root, config(&Hand::at(5 * HOUR)));
    // What no durable state names is kept as evidence, out of the live tree (by its path
    // under `.quarantine/open-*/`): the outputs no record names, a torn generation, a snapshot
    // never renamed into place; once a snapshot is in place, the generation it supersedes and
    // the files that generation's record removed (the snapshot does not name them). After the
    // record alone, the removed files are deleted once the open's checkpoint holds their
    // history: nothing is kept.
    let evidence: BTreeSet<String> = archive
        .recovery()
        .quarantined
        .iter()
        .filter_map(|q| q.splitn(3, '/').nth(2).map(str::to_owned))
        .collect();
    let generations = names("manifest/", ".log");
    let outputs: BTreeSet<String> = new.paths.difference(&old.paths).cloned().collect();
    let expected_evidence: BTreeSet<String> = match point {
        FaultPoint::AfterDataWrite => names(".tmp/", ".parquet"),
        FaultPoint::AfterDataRename => outputs,
        FaultPoint::MidRecord => generations.into_iter().chain(outputs).collect(),
        FaultPoint::AfterRecord => BTreeSet::new(),
        FaultPoint::AfterSnapshotWrite => names(".tmp/", ".log"),
        FaultPoint::AfterSnapshotRename => generations
            .into_iter()
            .take(1)
            .chain(
                in_streams
                    .iter()
                    .chain(&names("streams/capture/levels/", ".parquet"))
                    .filter(|p| !new.paths.contains(*p))
                    .cloned(),
            )
            .collect(),
        other => panic!("{at}: not a point of this suite: {other:?}"),
    };
    assert_eq!(
        evidence,
        expected_evidence,
        "{at}: {:?}",
        archive.recovery()
    );
    assert_same(&served(&archive), expected, &format!("{at}: recovering"));
    assert_eq!(
        files_in_place(&root),
        expected.paths,
        "{at}: exactly the live files are in place:\n{}",
        listing(&tree(&root))
    );
    let damaged = archive.verify(|_, _| {});
    assert!(damaged.is_empty(), "{at}: {damaged:?}");
    drop(archive);

    // Every later open holds the same catalog, the retired tracks' history included.
    {
        let again = Archive::open(&root, Config::new().read_only(true)).expect("reopen");
        assert_same(&served(&again), expected, &format!("{at}: a second open"));
        let writer = open_writable(&root, config(&Hand::at(5 * HOUR)));
        assert!(writer.recovery().quarantined.is_empty(), "{at}");
        assert_same(
            &served(&writer),
            expected,
            &format!("{at}: a second writer"),
        );
    }

    // Writable afterwards: a barrier, a compaction, a checkpoint; a reopen serves the same.
    let clock = Hand::at(6 * HOUR);
    let mut archive = open_writable(&root, config(&clock));
    let rows = ticks(TICKS + 1..TICKS + 2);
    let next = archive.watermark("capture").0 + 1;
    seal(&mut archive, &clock, 6 * HOUR, &rows, next);
    archive.compact(true, |_, _, _| {}).expect("compact");
    archive.checkpoint().expect("checkpoint");
    let last = served(&archive);
    assert!(archive.verify(|_, _| {}).is_empty(), "{at}");
    drop(archive);
    let reopened = Archive::open(&root, Config::new().read_only(true)).expect("last reopen");
    assert_same(&served(&reopened), &last, &format!("{at}: the last reopen"));
    assert_eq!(files_in_place(&root), last.paths, "{at}");
}

#[test]
fn a_compaction_of_row_group_files_crashed_after_its_data_write_serves_the_old_set() {
    crash_case(Op::Compact, FaultPoint::AfterDataWrite);
}

#[test]
fn a_compaction_of_row_group_files_crashed_after_its_rename_serves_the_old_set() {
    crash_case(Op::Compact, FaultPoint::AfterDataRename);
}

#[test]
fn a_compaction_of_row_group_files_crashed_mid_record_serves_the_old_set() {
    crash_case(Op::Compact, FaultPoint::MidRecord);
}

#[test]
fn a_compaction_of_row_group_files_crashed_after_its_record_serves_the_new_set_and_its_inputs_history(
) {
    crash_case(Op::Compact, FaultPoint::AfterRecord);
}

#[test]
fn a_compaction_of_row_group_files_crashed_in_its_checkpoint_write_serves_the_new_set() {
    crash_case(Op::Compact, FaultPoint::AfterSnapshotWrite);
}

#[test]
fn a_compaction_of_row_group_files_crashed_after_its_checkpoint_rename_serves_the_new_set() {
    crash_case(Op::Compact, FaultPoint::AfterSnapshotRename);
}

#[test]
fn a_retirement_dropping_a_row_group_file_crashed_mid_record_serves_the_old_set() {
    crash_case(Op::Retire, FaultPoint::MidRecord);
}

#[test]
fn a_retirement_dropping_a_row_group_file_crashed_after_its_record_serves_the_new_set() {
    crash_case(Op::Retire, FaultPoint::AfterRecord);
}

#[test]
fn a_retirement_dropping_a_row_group_file_crashed_in_its_checkpoint_write_serves_the_new_set() {
    crash_case(Op::Retire, FaultPoint::AfterSnapshotWrite);
}

#[test]
fn a_retirement_dropping_a_row_group_file_crashed_after_its_checkpoint_rename_serves_the_new_set() {
    crash_case(Op::Retire, FaultPoint::AfterSnapshotRename);
}
