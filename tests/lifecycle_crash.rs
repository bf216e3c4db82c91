//! Crashes inside the lifecycle's commits, really crashed: the test re-executes its own
//! binary as a child that builds an archive (barriers over 2×2 tracks, and for some cases a
//! retirement, a sweep and a compaction first), closes it, reopens it with
//! `Faults::abort_at(point)` and runs one lifecycle operation (a compaction, a sweep, an
//! explicit track retirement or a checkpoint) so that the first hit of `point` is inside that
//! operation. The process dies of SIGABRT there: no unwinding, no destructors.
//!
//! The parent builds the same archive beside it without faults and runs the operation to
//! completion, so it knows the old set (before) and the new set (after) exactly. Then it
//! checks what the crash left, that a read-only open modifies nothing, and that recovery
//! serves exactly one of the two sets: the old set for a point before the record is durable
//! (new files quarantined, a torn record's generation repaired), the new set from the record
//! on (replaced files deleted, not kept as evidence); for a checkpoint, the old generation
//! until the new one is in place and the new one from then on. Rows, floors, surveys and a
//! mean are compared with what was published, retained and computed before the operation;
//! afterwards a barrier, a compaction and a checkpoint run, every new name lies above every
//! name the archive ever held, and a reopen serves everything with nothing left to heal.

mod common;

use common::hand::Hand;
use common::tree::{listing, recorded_paths, tree, Tree};
use common::*;
use series_archive::archive::lifecycle::{Lifetime, Retention};
use series_archive::archive::manifest::log::{generation_name, parse_generation};
use series_archive::archive::manifest::StreamState;
use series_archive::archive::{Archive, Config, FaultPoint, Faults, ReadError};
use series_archive::{Aggregate, BeneathWindow, Position};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The child's variables: `{CHILD_VARS}_DIR`, `_OP` and `_AT` (see `common::child`).
const CHILD_VARS: &str = "SERIES_ARCHIVE_LIFECYCLE_CRASH";
/// The test the parent re-executes; a no-op unless every variable is set.
const CHILD: &str = "lifecycle_crash_child";

const HOUR: u64 = 3_600_000_000_000;
/// Barriers built before the operation; barrier `b` is sealed at hour `b`.
const BARRIERS: usize = 5;
/// Ticks per barrier (positions advance by one per tick, the axis by ten): enough for the
/// axis to span several level-0 cells.
const TICKS: u64 = 100;
/// The barrier that holds run_0's rows only, so retiring run_0 drops a whole file.
const RUN0_ONLY: usize = 1;
/// When the operation (and every sweep) runs.
const OP_AT: u64 = BARRIERS as u64 * HOUR;
/// The raw lifetime: at `OP_AT` barriers sealed before hour 2 are past it.
const RAW_AGE: Duration = Duration::from_secs(3 * 3600);
/// When the barrier after recovery is sealed.
const AFTER_AT: u64 = OP_AT + HOUR;

/// The Delta log is off here: with it on, a retirement also rewrites the files that still
/// hold retired groups (a second record), and this suite's cases are one record each. The
/// log's own crash cases, the rewrite among them, are in tests/delta_log.rs.
fn config(clock: &Arc<Hand>) -> Config {
    capture_config()
        .delta(false)
        .clock(clock.clone())
        .retention("capture", Retention::forever().raw(Lifetime::Age(RAW_AGE)))
}

/// The lifecycle operation a case crashes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `compact(true, ..)` after run_0 was retired whole and a sweep moved run_1's floor.
    Compact,
    /// `sweep(OP_AT)` with the raw age lifetime: drops barriers 0 and 1 whole.
    Sweep,
    /// `retire_track(["run_0"])`: drops the run_0-only barrier's file.
    RetireTrack,
    /// `checkpoint()` after a retirement, a sweep and a compaction.
    Checkpoint,
}

impl Op {
    const ALL: [Op; 4] = [Op::Compact, Op::Sweep, Op::RetireTrack, Op::Checkpoint];

    fn name(self) -> &'static str {
        match self {
            Op::Compact => "compact",
            Op::Sweep => "sweep",
            Op::RetireTrack => "retire-track",
            Op::Checkpoint => "checkpoint",
        }
    }

    fn parse(name: &str) -> Option<Op> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// The rows of barrier `b`: ticks `b*TICKS ..`, every track once per tick (run_0's tracks
/// only in barrier `RUN0_ONLY`).
fn barrier_rows(b: usize) -> (Vec<Row>, Vec<u64>) {
    let (rows, positions) = workload(2, 2, TICKS, b as u64 * TICKS);
    rows.into_iter()
        .zip(positions)
        .filter(|(r, _)| b != RUN0_ONLY || r.run == "run_0")
        .unzip()
}

/// Every row of barriers `0..n`, in publish order, as `rows_of` answers them.
fn published(n: usize) -> Vec<(u64, Row)> {
    (0..n)
        .flat_map(|b| {
            let (rows, positions) = barrier_rows(b);
            positions.into_iter().zip(rows)
        })
        .collect()
}

fn seal_barrier(archive: &mut Archive, b: usize) {
    let (rows, positions) = barrier_rows(b);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    let report = archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(
        report.streams[0].watermark,
        Position((b as u64 + 1) * TICKS)
    );
}

fn retire_run0(archive: &mut Archive) {
    let report = archive
        .retire_track("capture", &["run_0".into()])
        .expect("retire")
        .expect("something retired");
    assert_eq!((report.tracks, report.whole), (2, 2), "{report:?}");
}

fn sweep(archive: &mut Archive) {
    let reports = archive.sweep(OP_AT).expect("sweep");
    assert_eq!(reports.len(), 1, "{reports:?}");
}

/// Builds the archive a case crashes in and closes it: `BARRIERS` barriers, one an hour, and
/// for the compaction and checkpoint cases run_0 retired whole and a sweep past barrier 0 (so
/// compaction has retired groups and cells to drop), for the checkpoint case a compaction too.
fn prepare(root: &Path, op: Op) {
    let clock = Hand::at(0);
    let mut archive = open_writable(root, config(&clock), "open");
    for b in 0..BARRIERS {
        clock.set(b as u64 * HOUR);
        seal_barrier(&mut archive, b);
    }
    clock.set(OP_AT);
    if matches!(op, Op::Compact | Op::Checkpoint) {
        retire_run0(&mut archive);
        sweep(&mut archive);
    }
    if op == Op::Checkpoint {
        let reports = archive.compact(true, |_, _, _| {}).expect("compact");
        assert_eq!(reports.len(), 1, "{reports:?}");
    }
}

/// Runs the case's operation on an archive prepared for it.
fn run_op(archive: &mut Archive, op: Op) -> String {
    match op {
        Op::Compact => format!("{:?}", archive.compact(true, |_, _, _| {})),
        Op::Sweep => format!("{:?}", archive.sweep(OP_AT)),
        Op::RetireTrack => format!("{:?}", archive.retire_track("capture", &["run_0".into()])),
        Op::Checkpoint => format!("{:?}", archive.checkpoint()),
    }
}

/// The child: prepares the archive, reopens it with the fault hook installed and runs the
/// operation, which must crash. Returns at once in a normal run.
#[test]
fn lifecycle_crash_child() {
    let Some((dir, op, at)) = common::child::told(CHILD_VARS) else {
        return;
    };
    let op = Op::parse(&op).unwrap_or_else(|| panic!("unknown operation {op:?}"));
    let point = FaultPoint::parse(&at).unwrap_or_else(|| panic!("unknown fault point {at:?}"));
    prepare(Path::new(&dir), op);
    let clock = Hand::at(OP_AT);
    let mut archive = open_writable(
        Path::new(&dir),
        config(&clock).faults(Faults::abort_at(point)),
        "open with faults",
    );
    let outcome = run_op(&mut archive, op);
    eprintln!(
        "{} returned instead of crashing at {at}: {outcome}",
        op.name()
    );
    std::process::exit(3);
}

/// Spawning a child forks the whole test process: until the child execs, it holds a copy of
/// every descriptor, among them the `LOCK` file of an archive another test thread has open,
/// and a writable open of that archive in this window finds it locked. Spawns and writable
/// opens take turns (a spawn returns once the child has exec'd, its copies closed).
static FORK: Mutex<()> = Mutex::new(());

fn open_writable(root: &Path, config: Config, what: &str) -> Archive {
    let _turn = FORK.lock().unwrap_or_else(|p| p.into_inner());
    Archive::open(root, config).expect(what)
}

/// Runs the child against `root` and asserts it died of SIGABRT.
fn crash_at(root: &Path, op: Op, point: FaultPoint) {
    let told = (root.as_os_str(), op.name(), point.name());
    common::child::crash(CHILD, CHILD_VARS, told, &FORK);
}

fn files_under(tree: &Tree, dir: &str) -> BTreeSet<String> {
    tree.iter()
        .filter(|(p, b)| b.is_some() && p.starts_with(dir))
        .map(|(p, _)| p.clone())
        .collect()
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The 12-digit number of a `*.parquet` name.
fn parquet_number(path: &str) -> Option<u64> {
    let digits = file_name(path).strip_suffix(".parquet")?;
    (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

fn numbers<'a>(paths: impl IntoIterator<Item = &'a String>) -> BTreeSet<u64> {
    paths
        .into_iter()
        .map(|p| parquet_number(p).unwrap_or_else(|| panic!("{p} is not a numbered data file")))
        .collect()
}

/// Every data-file number anywhere in a tree (live, `.tmp/`, quarantine).
fn all_numbers(tree: &Tree) -> BTreeSet<u64> {
    tree.keys().filter_map(|p| parquet_number(p)).collect()
}

/// Every generation number anywhere in a tree (manifest, `.tmp/`, quarantine).
fn all_generations(tree: &Tree) -> BTreeSet<u64> {
    tree.iter()
        .filter(|(_, b)| b.is_some())
        .filter_map(|(p, _)| parse_generation(file_name(p)))
        .collect()
}

fn gen_path(generation: u64) -> String {
    format!("manifest/{}", generation_name(generation))
}

/// Surveys and means over run_1, which no operation here changes: levels outlive the raw
/// rows a sweep retires, compaction is equal cell for cell, and retiring run_0 leaves run_1.
fn measures(archive: &Archive) -> String {
    let one = vec!["run_1".to_owned(), "probe.0".to_owned()];
    let run = vec!["run_1".to_owned()];
    let mut out = String::new();
    for (track, budget) in [(&one, 16), (&one, 64), (&one, 4000), (&run, 4000)] {
        let s = archive
            .survey("capture", track, Included(0), Unbounded, budget)
            .expect("survey");
        out += &format!("survey {track:?} {budget}: {:?} {:?}\n", s.plan, s.buckets);
    }
    for track in [&one, &run] {
        let f = archive
            .fold("capture", track, Unbounded, Unbounded, Aggregate::Mean)
            .expect("mean");
        out += &format!("mean {track:?}: {} {:?}\n", f.source, f.answers);
    }
    out
}

/// What one archive serves at one moment.
#[derive(Debug)]
struct Side {
    paths: BTreeSet<String>,
    streams: BTreeMap<String, StreamState>,
    generation: u64,
    manifest_bytes: u64,
    measures: String,
}

fn side(archive: &Archive) -> Side {
    Side {
        paths: recorded_paths(archive),
        streams: archive.state().streams.clone(),
        generation: archive.state().generation,
        manifest_bytes: archive.manifest_bytes(),
        measures: measures(archive),
    }
}

/// The raw floors (positions) of run_0's and run_1's tracks.
type Floors = [u64; 2];

/// run_0 retired whole after barrier 4; a sweep at `OP_AT` past barriers 0 and 1.
const WHOLE_RUN0: u64 = BARRIERS as u64 * TICKS + 1;
const SWEPT: Floors = [2 * TICKS + 1, TICKS + 1];

/// The floors before (`after`: after) the case's operation.
fn expected_floors(op: Op, after: bool) -> Floors {
    match (op, after) {
        (Op::Compact | Op::Checkpoint, _) => [WHOLE_RUN0, SWEPT[1]],
        (Op::Sweep, true) => SWEPT,
        (Op::RetireTrack, true) => [WHOLE_RUN0, 0],
        (Op::Sweep | Op::RetireTrack, false) => [0, 0],
    }
}

/// Asserts every track's floor is its run's.
fn assert_floors(streams: &BTreeMap<String, StreamState>, floors: Floors, at: &str) {
    let tracks = &streams["capture"].tracks;
    assert_eq!(tracks.len(), 4, "{at}");
    for t in tracks.values() {
        let run = usize::from(t.labels[0] == "run_1");
        assert_eq!(t.floor(), Position(floors[run]), "{at}: {:?}", t.labels);
    }
}

/// The rows read back equal exactly what was published and retained, in publish order: per
/// run from its floor (a read beneath it refused), and all tracks from the highest floor.
fn assert_rows(archive: &Archive, floors: Floors, published: &[(u64, Row)], at: &str) {
    let read = |prefix: &[String], floor: u64| {
        let start = if floor == 0 {
            Unbounded
        } else {
            Included(Position(floor))
        };
        archive
            .read_rows("capture", prefix, start, Unbounded)
            .map(|b| rows_of(&b))
    };
    for (r, &floor) in floors.iter().enumerate() {
        let run = format!("run_{r}");
        let expected: Vec<(u64, Row)> = published
            .iter()
            .filter(|(p, row)| row.run == run && *p >= floor)
            .cloned()
            .collect();
        let got = read(std::slice::from_ref(&run), floor).expect("rows from the floor");
        assert_eq!(got.len(), expected.len(), "{at}: {run} from {floor}");
        assert!(got == expected, "{at}: {run} from {floor}");
        if floor > 0 {
            let err = archive
                .read_rows("capture", std::slice::from_ref(&run), Unbounded, Unbounded)
                .expect_err("a read beneath the floor is refused");
            assert!(
                matches!(err, ReadError::Refused(BeneathWindow::Floor { floor: f, axis: None }) if f == Position(floor)),
                "{at}: {run}: {err:?}"
            );
        }
    }
    let top = floors.iter().copied().max().unwrap_or(0);
    let expected: Vec<(u64, Row)> = published
        .iter()
        .filter(|(p, _)| *p >= top)
        .cloned()
        .collect();
    let got = read(&[], top).expect("rows of every track");
    assert!(got == expected, "{at}: every track from {top}");
}

/// Asserts `archive` serves exactly `side` with `floors`: the recorded set, the state, the
/// rows published and retained, the measures computed before the operation; and verifies.
fn assert_serves(archive: &Archive, side: &Side, floors: Floors, measured: &str, at: &str) {
    assert_eq!(
        recorded_paths(archive),
        side.paths,
        "{at}: the recorded set"
    );
    assert!(
        archive.state().streams == side.streams,
        "{at}: the served state differs:\n{:#?}\nexpected\n{:#?}",
        archive.state().streams,
        side.streams
    );
    assert_floors(&archive.state().streams, floors, at);
    assert_rows(archive, floors, &published(BARRIERS), at);
    assert_eq!(measures(archive), measured, "{at}: surveys and means");
    let damaged = archive.verify(|_, _| {});
    assert!(damaged.is_empty(), "{at}: {damaged:?}");
}

/// The same archive built beside the crashed one, the operation run to completion without
/// faults: what it served before (the old set) and after (the new set).
fn reference(root: &Path, op: Op) -> (Side, Side) {
    prepare(root, op);
    let clock = Hand::at(OP_AT);
    let mut archive = open_writable(root, config(&clock), "open the reference");
    let old = side(&archive);
    let buckets = archive
        .survey(
            "capture",
            &["run_1".into(), "probe.0".into()],
            Included(0),
            Unbounded,
            4000,
        )
        .expect("survey")
        .buckets
        .len();
    assert!(buckets >= 8, "the survey spans several cells: {buckets}");
    let outcome = run_op(&mut archive, op);
    let new = side(&archive);
    assert_floors(&old.streams, expected_floors(op, false), "reference before");
    assert_floors(&new.streams, expected_floors(op, true), "reference after");
    assert_rows(
        &archive,
        expected_floors(op, true),
        &published(BARRIERS),
        "reference after",
    );
    assert_eq!(
        new.measures, old.measures,
        "{op:?} changed run_1's surveys: {outcome}"
    );
    let count = |paths: &BTreeSet<String>, kind: &str| {
        paths
            .iter()
            .filter(|p| p.starts_with(&format!("streams/capture/{kind}/")))
            .count()
    };
    let added: BTreeSet<String> = new.paths.difference(&old.paths).cloned().collect();
    let removed: BTreeSet<String> = old.paths.difference(&new.paths).cloned().collect();
    let shape = (
        count(&added, "rows").min(1),
        count(&added, "levels"),
        count(&removed, "rows"),
        count(&removed, "levels"),
        new.generation - old.generation,
    );
    let expected = match op {
        // Barriers 2..4 rewritten as packed files of run_1's tracks (at least one; how many
        // depends on the retention cuts); every level file merged into one run of level
        // tables, one per level of the ladder (1024,8,8).
        Op::Compact => (1, 8, 3, BARRIERS, 0),
        // Barrier 0 (every group past the lifetime) and barrier 1 (run_0 only).
        Op::Sweep => (0, 0, 2, 0, 0),
        // Barrier 1 (run_0 only).
        Op::RetireTrack => (0, 0, 1, 0, 0),
        Op::Checkpoint => (0, 0, 0, 0, 1),
    };
    for f in &new.streams["capture"].files {
        if added.contains(&f.path) {
            let tracks: BTreeSet<&[String]> = f.groups.iter().map(|g| &g.track[..]).collect();
            assert!(
                f.is_packed() && tracks.iter().all(|t| t[0] == "run_1"),
                "{}: {tracks:?}",
                f.path
            );
        }
    }
    assert_eq!(shape, expected, "{op:?}: {outcome}");
    (old, new)
}

/// The path a quarantined file had, from `.quarantine/open-*/<path>`.
fn original(quarantined: &str) -> String {
    let rest = quarantined
        .strip_prefix(".quarantine/")
        .unwrap_or_else(|| panic!("{quarantined} is not under .quarantine/"));
    let (_open_dir, original) = rest
        .split_once('/')
        .unwrap_or_else(|| panic!("{quarantined} has no per-open directory"));
    original.to_owned()
}

/// Crashes `op` at `point`, then checks everything recovery must prove.
fn crash_case(op: Op, point: FaultPoint) {
    let at = format!("{} at {}", op.name(), point.name());
    let at = at.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    let (old, new) = reference(&dir.path().join("reference"), op);
    let added: BTreeSet<String> = new.paths.difference(&old.paths).cloned().collect();
    let removed: BTreeSet<String> = old.paths.difference(&new.paths).cloned().collect();

    let root = dir.path().join("archive");
    crash_at(&root, op, point);
    let durable = matches!(
        point,
        FaultPoint::AfterRecord | FaultPoint::AfterSnapshotRename
    );
    let served = if durable { &new } else { &old };
    let floors = expected_floors(op, durable);
    let before = tree(&root);
    let old_gen = gen_path(old.generation);

    // What the crash left, before anything heals it. The child's clean reopen healed nothing.
    assert!(
        files_under(&before, ".quarantine/").is_empty(),
        "{at}: the child's reopen quarantined files:\n{}",
        listing(&before)
    );
    let in_place = if point == FaultPoint::AfterDataWrite {
        old.paths.clone()
    } else {
        old.paths.union(&new.paths).cloned().collect()
    };
    assert_eq!(
        files_under(&before, "streams/"),
        in_place,
        "{at}: files in place:\n{}",
        listing(&before)
    );
    let staged: BTreeSet<String> = match point {
        FaultPoint::AfterDataWrite => added
            .iter()
            .map(|p| format!(".tmp/{}", file_name(p)))
            .collect(),
        FaultPoint::AfterSnapshotWrite => [format!(".tmp/{}", generation_name(new.generation))]
            .into_iter()
            .collect(),
        _ => BTreeSet::new(),
    };
    assert!(
        point != FaultPoint::AfterDataWrite || !staged.is_empty(),
        "{at}: nothing to stage"
    );
    assert_eq!(
        files_under(&before, ".tmp/"),
        staged,
        "{at}: staged files:\n{}",
        listing(&before)
    );
    let mut generations: BTreeSet<String> = [old_gen.clone()].into_iter().collect();
    if point == FaultPoint::AfterSnapshotRename {
        generations.insert(gen_path(new.generation));
    }
    assert_eq!(
        files_under(&before, "manifest/"),
        generations,
        "{at}: generations:\n{}",
        listing(&before)
    );
    let gen_len = |path: &str| before[path].as_ref().expect("a file").len() as u64;
    match point {
        FaultPoint::MidRecord => assert!(
            old.manifest_bytes < gen_len(&old_gen) && gen_len(&old_gen) < new.manifest_bytes,
            "{at}: half a record: {} < {} < {}",
            old.manifest_bytes,
            gen_len(&old_gen),
            new.manifest_bytes
        ),
        FaultPoint::AfterRecord => assert_eq!(gen_len(&old_gen), new.manifest_bytes, "{at}"),
        _ => assert_eq!(gen_len(&old_gen), old.manifest_bytes, "{at}"),
    }
    if point == FaultPoint::AfterSnapshotRename {
        assert_eq!(
            gen_len(&gen_path(new.generation)),
            new.manifest_bytes,
            "{at}"
        );
    }

    // A read-only open serves the same set and modifies nothing.
    {
        let reader = Archive::open(&root, Config::new().read_only(true)).expect("read-only open");
        let recovery = reader.recovery();
        assert!(recovery.quarantined.is_empty(), "{at}: {recovery:?}");
        assert_eq!(recovery.repaired_generation, None, "{at}");
        assert_eq!(
            recovery.torn_tail_at,
            (point == FaultPoint::MidRecord).then_some(old.manifest_bytes),
            "{at}"
        );
        assert_serves(
            &reader,
            served,
            floors,
            &old.measures,
            &format!("{at}, read-only"),
        );
    }
    let untouched = tree(&root);
    assert!(
        untouched == before,
        "{at}: a read-only open modified the archive:\nbefore\n{}after\n{}",
        listing(&before),
        listing(&untouched)
    );

    // The writable open heals.
    let clock = Hand::at(AFTER_AT);
    let archive = open_writable(&root, config(&clock), "reopen after the crash");
    let recovery = archive.recovery().clone();
    let moved: BTreeMap<String, String> = recovery
        .quarantined
        .iter()
        .map(|q| (original(q), q.clone()))
        .collect();
    assert_eq!(moved.len(), recovery.quarantined.len(), "{recovery:?}");
    // Evidence: what no durable record names. Deleted: what the durable record removed.
    let mut evidence = staged.clone();
    let mut deleted = BTreeSet::new();
    match point {
        FaultPoint::AfterDataRename => evidence.extend(added.iter().cloned()),
        FaultPoint::MidRecord => {
            evidence.extend(added.iter().cloned());
            evidence.insert(old_gen.clone());
        }
        FaultPoint::AfterRecord => deleted.extend(removed.iter().cloned()),
        // The superseded generation is moved to quarantine or removed; either is fine.
        FaultPoint::AfterSnapshotRename if moved.contains_key(&old_gen) => {
            evidence.insert(old_gen.clone());
        }
        FaultPoint::AfterSnapshotRename => {
            deleted.insert(old_gen.clone());
        }
        FaultPoint::AfterDataWrite | FaultPoint::AfterSnapshotWrite => {}
        FaultPoint::AfterUpload => unreachable!("no offload here (tests/tiers.rs)"),
        FaultPoint::AfterDeltaCommit | FaultPoint::AfterDeltaCheckpoint => {
            unreachable!("not a point of this suite (tests/delta_log.rs)")
        }
        FaultPoint::AfterReplicaFile
        | FaultPoint::AfterReplicaDelta
        | FaultPoint::AfterReplicaPart => {
            unreachable!("not a point of this suite (tests/replicate.rs)")
        }
    }
    assert!(
        point != FaultPoint::AfterRecord || !deleted.is_empty(),
        "{at}: the record removed nothing"
    );
    assert_eq!(
        moved.keys().cloned().collect::<BTreeSet<String>>(),
        evidence,
        "{at}: quarantined {:?}",
        recovery.quarantined
    );
    let after = tree(&root);
    assert_eq!(
        files_under(&after, ".quarantine/"),
        moved.values().cloned().collect::<BTreeSet<String>>(),
        "{at}: the quarantine holds exactly this open's evidence:\n{}",
        listing(&after)
    );
    for (path, bytes) in before
        .iter()
        .filter_map(|(p, b)| b.as_ref().map(|b| (p, b)))
    {
        if deleted.contains(path) {
            assert!(
                !after.contains_key(path),
                "{at}: {path}, removed by a durable record, is still there:\n{}",
                listing(&after)
            );
            assert!(
                !after
                    .keys()
                    .any(|p| p.starts_with(".quarantine/") && p.ends_with(&format!("/{path}"))),
                "{at}: {path} was quarantined although a durable record removed it:\n{}",
                listing(&after)
            );
            continue;
        }
        let now = match moved.get(path) {
            Some(q) => {
                assert!(!after.contains_key(path), "{at}: {path} still in place");
                &after[q]
            }
            None => after.get(path).unwrap_or_else(|| {
                panic!(
                    "{at}: {path} vanished and is not in quarantine:\n{}",
                    listing(&after)
                )
            }),
        };
        assert!(
            now.as_ref() == Some(bytes),
            "{at}: {path} changed on its way"
        );
    }
    if op == Op::Compact && !durable {
        // The outputs no record names: in quarantine, none under streams/.
        let evidence_numbers: BTreeSet<u64> = files_under(&after, ".quarantine/")
            .iter()
            .filter_map(|p| parquet_number(p))
            .collect();
        assert_eq!(evidence_numbers, numbers(&added), "{at}");
    }
    if durable && op != Op::Checkpoint {
        assert!(
            numbers(&removed).is_disjoint(&all_numbers(&after)),
            "{at}: a removed file survived somewhere:\n{}",
            listing(&after)
        );
    }
    assert_eq!(
        files_under(&after, "streams/"),
        served.paths,
        "{at}: exactly the served set is in place:\n{}",
        listing(&after)
    );
    assert!(files_under(&after, ".tmp/").is_empty(), "{at}");

    // The manifest: repaired with a new generation only when its tail was torn.
    let current = match point {
        FaultPoint::MidRecord => {
            assert_eq!(recovery.torn_tail_at, Some(old.manifest_bytes), "{at}");
            let repaired = recovery.repaired_generation.expect("a repair");
            assert!(repaired > old.generation, "{at}: repaired {repaired}");
            repaired
        }
        _ => {
            assert_eq!(recovery.torn_tail_at, None, "{at}");
            assert_eq!(recovery.repaired_generation, None, "{at}");
            served.generation
        }
    };
    assert_eq!(recovery.damaged_at, None, "{at}");
    assert_eq!(
        files_under(&after, "manifest/"),
        [gen_path(current)]
            .into_iter()
            .collect::<BTreeSet<String>>(),
        "{at}: one generation remains"
    );
    assert_eq!(archive.state().generation, current, "{at}");
    assert_serves(&archive, served, floors, &old.measures, at);

    // Writable afterwards: a barrier, a compaction and a checkpoint, every new name above
    // every name the archive ever held (evidence included); evidence left untouched.
    let mut archive = archive;
    let evidence_tree = tree(&root.join(".quarantine"));
    let held = all_numbers(&before)
        .into_iter()
        .chain(all_numbers(&after))
        .chain(numbers(&old.paths))
        .chain(numbers(&new.paths))
        .max()
        .expect("names");
    let recovered = recorded_paths(&archive);
    seal_barrier(&mut archive, BARRIERS);
    let sealed = recorded_paths(&archive);
    assert!(
        recovered.is_subset(&sealed),
        "{at}: a barrier dropped a file"
    );
    let fresh = numbers(sealed.difference(&recovered));
    assert_eq!(fresh.len(), 2, "{at}: a data file and a level file");
    assert!(
        fresh.iter().all(|&n| n > held),
        "{at}: the barrier's names {fresh:?} are not above {held}"
    );
    let reports = archive
        .compact(true, |_, _, _| {})
        .expect("compact after recovery");
    assert_eq!(reports.len(), 1, "{at}: {reports:?}");
    let compacted = recorded_paths(&archive);
    let outputs = numbers(compacted.difference(&sealed));
    assert!(!outputs.is_empty(), "{at}: {reports:?}");
    assert!(
        outputs
            .iter()
            .all(|&n| n > held && fresh.iter().all(|&f| n > f)),
        "{at}: compaction names {outputs:?} not above {held} and {fresh:?}"
    );
    let generations_held = all_generations(&before)
        .into_iter()
        .chain(all_generations(&after))
        .chain([old.generation, new.generation])
        .max()
        .expect("generations");
    let generation = archive.checkpoint().expect("checkpoint after recovery");
    assert!(
        generation > generations_held,
        "{at}: checkpoint started generation {generation}, not above {generations_held}"
    );
    let now = tree(&root);
    assert_eq!(
        files_under(&now, "manifest/"),
        [gen_path(generation)]
            .into_iter()
            .collect::<BTreeSet<String>>(),
        "{at}"
    );
    assert_eq!(
        files_under(&now, "streams/"),
        compacted,
        "{at}: replaced files deleted"
    );
    assert!(
        tree(&root.join(".quarantine")) == evidence_tree,
        "{at}: evidence changed"
    );
    let everything = published(BARRIERS + 1);
    assert_floors(&archive.state().streams, floors, at);
    assert_rows(&archive, floors, &everything, at);
    assert!(archive.verify(|_, _| {}).is_empty(), "{at}");
    let streams = archive.state().streams.clone();
    let measured = measures(&archive);
    drop(archive);

    // Once more: nothing left to heal, the same answers.
    let archive = open_writable(&root, config(&Hand::at(AFTER_AT + HOUR)), "second reopen");
    let recovery = archive.recovery();
    assert!(recovery.quarantined.is_empty(), "{at}: {recovery:?}");
    assert_eq!(recovery.torn_tail_at, None, "{at}");
    assert_eq!(recovery.repaired_generation, None, "{at}");
    assert!(
        tree(&root.join(".quarantine")) == evidence_tree,
        "{at}: evidence changed"
    );
    assert_eq!(recorded_paths(&archive), compacted, "{at}");
    assert!(
        archive.state().streams == streams,
        "{at}: the reopened state differs"
    );
    assert_rows(&archive, floors, &everything, at);
    assert_eq!(measures(&archive), measured, "{at}");
    assert!(archive.verify(|_, _| {}).is_empty(), "{at}");
}

#[test]
fn compaction_crashed_after_data_write_serves_the_old_set_and_quarantines_the_staged_outputs() {
    crash_case(Op::Compact, FaultPoint::AfterDataWrite);
}

#[test]
fn compaction_crashed_after_data_rename_serves_the_old_set_and_quarantines_the_placed_outputs() {
    crash_case(Op::Compact, FaultPoint::AfterDataRename);
}

#[test]
fn compaction_crashed_mid_record_serves_the_old_set_and_repairs_the_generation() {
    crash_case(Op::Compact, FaultPoint::MidRecord);
}

#[test]
fn compaction_crashed_after_record_serves_the_new_set_and_deletes_the_replaced_files() {
    crash_case(Op::Compact, FaultPoint::AfterRecord);
}

#[test]
fn sweep_crashed_mid_record_keeps_the_old_floors_and_every_file() {
    crash_case(Op::Sweep, FaultPoint::MidRecord);
}

#[test]
fn sweep_crashed_after_record_moves_the_floors_and_deletes_the_dropped_files() {
    crash_case(Op::Sweep, FaultPoint::AfterRecord);
}

#[test]
fn track_retirement_crashed_mid_record_keeps_the_track_and_its_file() {
    crash_case(Op::RetireTrack, FaultPoint::MidRecord);
}

#[test]
fn track_retirement_crashed_after_record_retires_the_track_and_deletes_its_file() {
    crash_case(Op::RetireTrack, FaultPoint::AfterRecord);
}

#[test]
fn checkpoint_crashed_after_snapshot_write_keeps_the_old_generation() {
    crash_case(Op::Checkpoint, FaultPoint::AfterSnapshotWrite);
}

#[test]
fn checkpoint_crashed_after_snapshot_rename_serves_the_new_generation() {
    crash_case(Op::Checkpoint, FaultPoint::AfterSnapshotRename);
}
