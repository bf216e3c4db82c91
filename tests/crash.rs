//! Crashes that really crash: the test re-executes its own binary as a child that seals a
//! few barriers through the real write path and then aborts (SIGABRT, no unwinding, no
//! destructors) at a named fault point of the next barrier. The parent then reopens the
//! archive and checks what recovery proves: evidence quarantined and never deleted, every
//! committed barrier served whole, nothing claimed beyond them, the next barrier fine, and a
//! second reopen with nothing left to heal.
//!
//! Also here: a read-only open of a torn archive (serves the trusted prefix, touches
//! nothing), damage in the middle of the manifest (refused for writing, served read-only up
//! to the damage) and an unknown record format version (refused, nothing modified).

mod common;

use common::tree::{listing, recorded_paths, tree, Tree};
use common::*;
use series_archive::archive::manifest::log::parse_generation;
use series_archive::archive::{
    Archive, ArchiveError, Config, FaultPoint, Faults, ReadError, StoredErrorKind,
};
use series_archive::Position;
use std::collections::BTreeSet;
use std::ops::Bound::Unbounded;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const DIR_VAR: &str = "SERIES_ARCHIVE_CRASH_DIR";
const AT_VAR: &str = "SERIES_ARCHIVE_CRASH_AT";
/// Set: the child stages the wide workload ([`WIDE`]).
const WIDE_VAR: &str = "SERIES_ARCHIVE_CRASH_WIDE";
/// Runs × probes of the wide workload: 600 tracks, so each barrier's file entry holds more
/// entries than a manifest page and its record is paged (format version 10).
const WIDE: (usize, usize) = (30, 20);
/// The test the parent re-executes; a no-op unless both variables are set.
const CHILD: &str = "crash_child";
/// Barriers the child commits (without faults) before the one it crashes in.
const COMMITTED: usize = 3;
/// Ticks per barrier (positions advance by one per tick).
const TICKS: u64 = 4;
const RUNS: usize = 2;
const PROBES: usize = 3;
const SIGABRT: i32 = 6;

/// The rows of barrier `b` (0-based): ticks `b*TICKS ..`, every track once per tick.
fn barrier_rows(b: usize) -> (Vec<Row>, Vec<u64>) {
    if std::env::var_os(WIDE_VAR).is_some() {
        return wide_rows(b);
    }
    workload(RUNS, PROBES, TICKS, b as u64 * TICKS)
}

/// Ticks per barrier of the wide workload: 16 rows a track, so its files are recorded as
/// columns (paged), not by their row groups (format 11, for slices of fewer rows; the
/// default workload's barriers are, and `crash_mid_record` tears one of them).
const WIDE_TICKS: u64 = 16;

/// The rows of barrier `b` of the wide workload.
fn wide_rows(b: usize) -> (Vec<Row>, Vec<u64>) {
    workload(WIDE.0, WIDE.1, WIDE_TICKS, b as u64 * WIDE_TICKS)
}

/// The rows of barriers `0..n`, in publish order, as `rows_of` answers them.
fn rows_through(n: usize) -> Vec<(u64, Row)> {
    (0..n)
        .flat_map(|b| {
            let (rows, positions) = barrier_rows(b);
            positions.into_iter().zip(rows)
        })
        .collect()
}

/// The watermark after barriers `0..n`.
fn watermark_after(n: usize) -> Position {
    match std::env::var_os(WIDE_VAR).is_some() {
        true => Position(n as u64 * WIDE_TICKS),
        false => Position(n as u64 * TICKS),
    }
}

fn stage_barrier(archive: &mut Archive, b: usize) {
    let (rows, positions) = barrier_rows(b);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
}

fn seal_barrier(archive: &mut Archive, b: usize) {
    stage_barrier(archive, b);
    let report = archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(report.streams[0].watermark, watermark_after(b + 1));
}

fn all_rows(archive: &Archive) -> Vec<(u64, Row)> {
    rows_of(
        &archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("rows"),
    )
}

/// The child: commits `COMMITTED` barriers through a plain archive, reopens it with the
/// fault hook installed and crashes in the next barrier. Returns at once in a normal run.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(at)) = (std::env::var(DIR_VAR), std::env::var(AT_VAR)) else {
        return;
    };
    let point = FaultPoint::parse(&at).unwrap_or_else(|| panic!("unknown fault point {at:?}"));
    {
        let mut archive = Archive::open(&dir, capture_config()).expect("open");
        for b in 0..COMMITTED {
            seal_barrier(&mut archive, b);
        }
    }
    let mut archive = Archive::open(&dir, capture_config().faults(Faults::abort_at(point)))
        .expect("open with faults");
    stage_barrier(&mut archive, COMMITTED);
    let outcome = archive.seal_all();
    eprintln!("seal_all returned instead of crashing at {at}: {outcome:?}");
    std::process::exit(3);
}

/// Runs the child against `root` and asserts it died of SIGABRT.
fn crash_at(root: &Path, point: FaultPoint) {
    crash_child_at(root, point, false)
}

/// Runs the child (on the wide workload when `wide`) and asserts it died of SIGABRT.
fn crash_child_at(root: &Path, point: FaultPoint, wide: bool) {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe);
    child
        .args(["--exact", CHILD, "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, root)
        .env(AT_VAR, point.name());
    if wide {
        child.env(WIDE_VAR, "1");
    }
    let out = child.output().expect("run the child");
    let log = format!(
        "child at {}: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        point.name(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{log}");
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "the child must die of abort: {log}"
    );
}

fn files_under<'a>(tree: &'a Tree, dir: &str) -> Vec<&'a str> {
    tree.iter()
        .filter(|(p, b)| b.is_some() && p.starts_with(dir))
        .map(|(p, _)| p.as_str())
        .collect()
}

/// The 12-digit number of a `*.parquet` name.
fn parquet_number(path: &Path) -> Option<u64> {
    let digits = path.file_name()?.to_str()?.strip_suffix(".parquet")?;
    (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Every data-file number under `.quarantine/`.
fn quarantined_numbers(root: &Path) -> Vec<u64> {
    tree(&root.join(".quarantine"))
        .keys()
        .filter_map(|p| parquet_number(Path::new(p)))
        .collect()
}

/// The single manifest generation file.
fn generation_file(root: &Path) -> PathBuf {
    let gens: Vec<PathBuf> = std::fs::read_dir(root.join("manifest"))
        .expect("manifest dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_generation)
                .is_some()
        })
        .collect();
    assert_eq!(gens.len(), 1, "one generation expected: {gens:?}");
    gens.into_iter().next().expect("one")
}

fn numbers(paths: &BTreeSet<String>) -> BTreeSet<u64> {
    paths
        .iter()
        .map(|p| {
            parquet_number(Path::new(p))
                .unwrap_or_else(|| panic!("{p} is not a numbered data file"))
        })
        .collect()
}

fn file_name_of(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .expect("a file name")
}

/// Crashes at `point`, then checks everything recovery must prove.
fn crash_and_recover(point: FaultPoint) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    crash_at(&root, point);
    let before = tree(&root);
    let gen_before = generation_file(&root);
    let gen_rel = format!("manifest/{}", file_name_of(&gen_before));
    let committed = if point == FaultPoint::AfterRecord {
        COMMITTED + 1
    } else {
        COMMITTED
    };

    // What the trusted prefix names, as a read-only open (which touches nothing) sees it.
    let recorded = {
        let reader = Archive::open(&root, Config::new().read_only(true)).expect("read-only open");
        assert_eq!(reader.files("capture").expect("files").len(), committed);
        recorded_paths(&reader)
    };
    assert!(
        tree(&root) == before,
        "a read-only open modified the archive"
    );
    assert_eq!(
        recorded.len() % committed,
        0,
        "every barrier writes as many files: {recorded:?}"
    );
    let per_barrier = recorded.len() / committed;

    // What the crash left, before anything heals it.
    let tmp: Vec<String> = files_under(&before, ".tmp/")
        .into_iter()
        .map(str::to_owned)
        .collect();
    let unrecorded: Vec<String> = files_under(&before, "streams/")
        .into_iter()
        .filter(|p| !recorded.contains(*p))
        .map(str::to_owned)
        .collect();
    let numbered_under =
        |p: &String, dir: &str| p.starts_with(dir) && parquet_number(Path::new(p)).is_some();
    let mut left: Vec<String> = match point {
        FaultPoint::AfterDataWrite => {
            assert_eq!(
                tmp.len(),
                per_barrier,
                "the barrier's files, synced under .tmp/:\n{}",
                listing(&before)
            );
            assert!(tmp.iter().all(|p| numbered_under(p, ".tmp/")), "{tmp:?}");
            assert!(unrecorded.is_empty(), "{unrecorded:?}");
            tmp.clone()
        }
        FaultPoint::AfterDataRename | FaultPoint::MidRecord => {
            assert!(tmp.is_empty(), "{}", listing(&before));
            assert_eq!(
                unrecorded.len(),
                per_barrier,
                "the barrier's files, renamed into place:\n{}",
                listing(&before)
            );
            assert!(
                unrecorded
                    .iter()
                    .any(|p| numbered_under(p, "streams/capture/rows/")),
                "{unrecorded:?}"
            );
            unrecorded.clone()
        }
        FaultPoint::AfterRecord => {
            assert!(
                tmp.is_empty() && unrecorded.is_empty(),
                "{}",
                listing(&before)
            );
            vec![]
        }
        FaultPoint::AfterSnapshotWrite
        | FaultPoint::AfterSnapshotRename
        | FaultPoint::AfterUpload
        | FaultPoint::AfterDeltaCommit
        | FaultPoint::AfterDeltaCheckpoint
        | FaultPoint::AfterReplicaFile
        | FaultPoint::AfterReplicaDelta
        | FaultPoint::AfterReplicaPart => {
            unreachable!(
                "a barrier does not pass the checkpoint's, the offload's or a replication's \
                 points (tests/lifecycle_crash.rs, tests/tiers.rs, tests/replicate.rs)"
            )
        }
    };
    let crashed: BTreeSet<u64> = left
        .iter()
        .map(|p| parquet_number(Path::new(p)).expect("numbered"))
        .collect();
    if point == FaultPoint::MidRecord {
        left.push(gen_rel.clone());
    }
    left.sort();
    // The child's reopen (between its clean barriers and the crash) had nothing to heal.
    assert!(
        before.contains_key(".quarantine/") && files_under(&before, ".quarantine/").is_empty(),
        "a clean reopen quarantined files (recorded: {recorded:?}):\n{}",
        listing(&before)
    );

    let archive = Archive::open(&root, capture_config()).expect("reopen after the crash");
    let recovery = archive.recovery().clone();

    // Evidence: exactly the leftovers moved into quarantine, keeping their relative paths.
    let quarantined = recovery.quarantined.clone();
    let moved: Vec<String> = quarantined
        .iter()
        .map(|q| {
            let rest = q
                .strip_prefix(".quarantine/")
                .unwrap_or_else(|| panic!("{q} is not under .quarantine/"));
            let (_open_dir, original) = rest
                .split_once('/')
                .unwrap_or_else(|| panic!("{q} has no per-open directory"));
            original.to_owned()
        })
        .collect();
    let mut moved_sorted = moved.clone();
    moved_sorted.sort();
    assert_eq!(moved_sorted, left, "quarantined: {quarantined:?}");

    // Nothing deleted: every file that was there is still there or in quarantine, unchanged.
    let after = tree(&root);
    for (path, bytes) in before
        .iter()
        .filter_map(|(p, b)| b.as_ref().map(|b| (p, b)))
    {
        let now = match after.get(path) {
            Some(Some(now)) => now,
            _ => {
                let q = quarantined
                    .iter()
                    .zip(&moved)
                    .find(|(_, m)| *m == path)
                    .map(|(q, _)| q)
                    .unwrap_or_else(|| {
                        panic!(
                            "{path} vanished and is not in quarantine:\n{}",
                            listing(&after)
                        )
                    });
                after[q].as_ref().expect("a file")
            }
        };
        assert!(
            now == bytes,
            "{path} changed ({} bytes, was {})",
            now.len(),
            bytes.len()
        );
    }
    assert!(
        !left.iter().any(|l| after.contains_key(l)),
        "leftovers still in place:\n{}",
        listing(&after)
    );

    // The manifest: repaired with a new generation only when its tail was torn.
    match point {
        FaultPoint::MidRecord => {
            let torn = recovery.torn_tail_at.expect("a torn tail");
            let old_len = before[&gen_rel].as_ref().expect("file").len() as u64;
            assert!(
                torn < old_len,
                "torn at {torn}, generation was {old_len} bytes"
            );
            let repaired = recovery.repaired_generation.expect("a repair");
            let old_gen = parse_generation(file_name_of(&gen_before)).expect("a generation");
            assert!(
                repaired > old_gen,
                "repaired {repaired}, torn generation {old_gen}"
            );
            assert_eq!(
                parse_generation(file_name_of(&generation_file(&root))),
                Some(repaired)
            );
        }
        _ => {
            assert_eq!(recovery.torn_tail_at, None);
            assert_eq!(recovery.repaired_generation, None);
            assert_eq!(generation_file(&root), gen_before);
        }
    }
    assert_eq!(recovery.damaged_at, None);

    // Every committed barrier served whole, nothing beyond; no quarantined file is named.
    assert_eq!(recorded_paths(&archive), recorded);
    assert_eq!(
        all_rows(&archive),
        rows_through(committed),
        "at {}",
        point.name()
    );
    assert_eq!(archive.watermark("capture"), watermark_after(committed));
    let files = archive.files("capture").expect("files");
    assert_eq!(files.len(), committed);
    for f in &files {
        let n = parquet_number(Path::new(f)).expect("numbered");
        assert!(!crashed.contains(&n), "{f} was quarantined yet is served");
    }
    assert!(archive.verify(|_, _| {}).is_empty());

    // The next barrier succeeds, names above every quarantined name, and reads back.
    let mut archive = archive;
    seal_barrier(&mut archive, committed);
    let evidence = quarantined_numbers(&root);
    assert_eq!(evidence.iter().copied().collect::<BTreeSet<u64>>(), crashed);
    let now = recorded_paths(&archive);
    let new: BTreeSet<String> = now.difference(&recorded).cloned().collect();
    assert_eq!(new.len(), per_barrier, "{new:?}");
    assert!(
        recorded.iter().all(|p| now.contains(p)),
        "a barrier dropped a file"
    );
    let (lowest_new, highest_old) = (
        numbers(&new).first().copied(),
        numbers(&recorded).last().copied(),
    );
    assert!(
        lowest_new > highest_old,
        "new files {new:?} not above the recorded ones"
    );
    assert!(
        evidence.iter().all(|&q| Some(q) < lowest_new),
        "new files {new:?} not above quarantined {evidence:?}"
    );
    assert_eq!(
        archive.files("capture").expect("files").len(),
        committed + 1
    );
    assert_eq!(all_rows(&archive), rows_through(committed + 1));
    assert_eq!(archive.watermark("capture"), watermark_after(committed + 1));
    drop(archive);

    // Once more: nothing left to heal, the same answers.
    let quarantine_before = tree(&root.join(".quarantine"));
    let archive = Archive::open(&root, capture_config()).expect("second reopen");
    assert!(
        archive.recovery().quarantined.is_empty(),
        "{:?}",
        archive.recovery()
    );
    assert_eq!(archive.recovery().torn_tail_at, None);
    assert_eq!(archive.recovery().repaired_generation, None);
    assert_eq!(tree(&root.join(".quarantine")), quarantine_before);
    assert_eq!(recorded_paths(&archive), now);
    assert_eq!(all_rows(&archive), rows_through(committed + 1));
    assert_eq!(archive.watermark("capture"), watermark_after(committed + 1));
    assert!(archive.verify(|_, _| {}).is_empty());
}

#[test]
fn crash_after_data_write() {
    crash_and_recover(FaultPoint::AfterDataWrite);
}

#[test]
fn crash_after_data_rename() {
    crash_and_recover(FaultPoint::AfterDataRename);
}

#[test]
fn crash_mid_record() {
    crash_and_recover(FaultPoint::MidRecord);
}

#[test]
fn crash_after_record() {
    crash_and_recover(FaultPoint::AfterRecord);
}

/// A crash halfway through appending a paged barrier record (600 tracks: its JSON, then its
/// pages) leaves a torn append, never damage: every committed barrier is served, the torn
/// record is kept as evidence, and the next barrier is fine.
#[test]
fn a_crash_inside_a_paged_record_is_a_torn_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    crash_child_at(&root, FaultPoint::MidRecord, true);
    let committed: Vec<(u64, Row)> = (0..COMMITTED)
        .flat_map(|b| {
            let (rows, positions) = wide_rows(b);
            positions.into_iter().zip(rows)
        })
        .collect();
    // The torn bytes are the start of a paged record: framed as version 10, cut inside its
    // pages (the half written holds more than its JSON).
    let bytes = std::fs::read(generation_file(&root)).expect("read the manifest");
    let torn = {
        let reader = Archive::open(&root, Config::new().read_only(true)).expect("read-only open");
        let recovery = reader.recovery().clone();
        assert!(recovery.unrepaired_damage().is_none(), "{recovery:?}");
        assert_eq!(all_rows(&reader), committed);
        recovery.torn_tail_at.expect("a torn tail") as usize
    };
    assert_eq!(u16::from_le_bytes([bytes[torn + 4], bytes[torn + 5]]), 10);
    let newline = bytes[torn + 16..].iter().position(|b| *b == b'\n');
    assert!(
        newline.is_some(),
        "the torn half holds the record's JSON and some pages"
    );
    let mut archive = Archive::open(&root, capture_config()).expect("reopen after the crash");
    assert_eq!(archive.recovery().torn_tail_at, Some(torn as u64));
    assert!(archive.recovery().unrepaired_damage().is_none());
    assert_eq!(all_rows(&archive), committed);
    let (rows, positions) = wide_rows(COMMITTED);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal").expect("a barrier");
    drop(archive);
    let reopened = Archive::open(&root, capture_config()).expect("reopen");
    assert_eq!(reopened.recovery().torn_tail_at, None);
    let expected: Vec<(u64, Row)> = committed
        .into_iter()
        .chain(positions.into_iter().zip(rows))
        .collect();
    assert_eq!(all_rows(&reopened), expected);
    // A scoped open of one track reads only its pages, and answers as the whole one.
    let track = vec!["run_17".to_string(), "probe.4".to_string()];
    let scoped = Archive::open(
        &root,
        Config::new()
            .read_only(true)
            .scope("capture", track.clone()),
    )
    .expect("a scoped open");
    let read = |a: &Archive| {
        rows_of(
            &a.read_rows("capture", &track, Unbounded, Unbounded)
                .expect("rows"),
        )
    };
    assert_eq!(read(&scoped), read(&reopened));
    assert_eq!(read(&scoped).len(), (COMMITTED + 1) * WIDE_TICKS as usize);
}

#[test]
fn read_only_open_of_a_torn_archive_serves_the_trusted_prefix_and_modifies_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    crash_at(&root, FaultPoint::MidRecord);
    let before = tree(&root);
    let mut archive = Archive::open(&root, Config::new().read_only(true)).expect("read-only open");
    let recovery = archive.recovery().clone();
    assert!(recovery.torn_tail_at.is_some(), "{recovery:?}");
    assert!(recovery.quarantined.is_empty(), "{recovery:?}");
    assert_eq!(recovery.repaired_generation, None);
    assert_eq!(all_rows(&archive), rows_through(COMMITTED));
    assert_eq!(archive.watermark("capture"), watermark_after(COMMITTED));
    assert_eq!(archive.files("capture").expect("files").len(), COMMITTED);
    assert!(archive.verify(|_, _| {}).is_empty());
    assert!(matches!(archive.seal_all(), Err(ArchiveError::ReadOnly(_))));
    drop(archive);
    let after = tree(&root);
    assert!(
        after == before,
        "a read-only open modified the archive:\nbefore\n{}after\n{}",
        listing(&before),
        listing(&after)
    );

    // A writable open afterwards still repairs it.
    let archive = Archive::open(&root, capture_config()).expect("writable open");
    assert!(archive.recovery().repaired_generation.is_some());
    assert_eq!(all_rows(&archive), rows_through(COMMITTED));
}

/// Offsets of the records of a generation file, by the documented framing.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        assert_eq!(&bytes[at..at + 4], b"SAmr", "a record at {at}");
        offsets.push(at);
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16 + len;
    }
    assert_eq!(at, bytes.len());
    offsets
}

/// An archive with `n` real barriers, closed.
fn sealed_archive(root: &Path, n: usize) {
    let mut archive = Archive::open(root, capture_config()).expect("open");
    for b in 0..n {
        seal_barrier(&mut archive, b);
    }
}

#[test]
fn damage_in_the_middle_of_the_manifest_refuses_writing_and_every_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    sealed_archive(&root, 4);
    let gen = generation_file(&root);
    let mut bytes = std::fs::read(&gen).expect("read manifest");
    let offsets = record_offsets(&bytes);
    // Snapshot, declaration, then one record per barrier.
    assert_eq!(offsets.len(), 2 + 4, "{offsets:?}");
    let damaged = offsets[3]; // barrier 2 of 4
    let len = u32::from_le_bytes(
        bytes[damaged + 8..damaged + 12]
            .try_into()
            .expect("4 bytes"),
    ) as usize;
    bytes[damaged + 16 + len / 2] ^= 0xFF;
    std::fs::write(&gen, &bytes).expect("write manifest");
    let before = tree(&root);

    let err = Archive::open(&root, capture_config())
        .expect_err("a damaged manifest must not open for writing");
    let msg = err.to_string();
    match &err {
        ArchiveError::DamagedManifest {
            path,
            offset,
            following,
        } => {
            assert_eq!(path, &gen);
            assert_eq!(*offset, damaged as u64);
            assert_eq!(*following, 2);
        }
        other => panic!("expected DamagedManifest, got {other:?}"),
    }
    assert!(msg.contains(&format!("at byte {damaged}")), "{msg}");
    assert!(msg.contains("2 valid record(s) follow"), "{msg}");
    assert!(
        tree(&root) == before,
        "a refused open modified the archive:\n{}",
        listing(&tree(&root))
    );

    let archive = Archive::open(&root, Config::new().read_only(true)).expect("read-only open");
    assert_eq!(archive.recovery().damaged_at, Some(damaged as u64));
    assert_eq!(archive.recovery().torn_tail_at, None);
    assert!(archive.recovery().quarantined.is_empty());
    // The trusted prefix is held (for `inspect`), but nothing is served from it: the records
    // after the damage commit barriers it does not name, so an answer would be short.
    assert_eq!(archive.watermark("capture"), watermark_after(1));
    let refused = |r: Result<(), ReadError>| match r {
        Err(ReadError::Stored(e)) => {
            assert_eq!(e.kind, StoredErrorKind::Corrupt, "{e}");
            assert!(e.what.contains("damaged at byte"), "{e}");
        }
        other => panic!("expected an Unreadable refusal, got {other:?}"),
    };
    refused(
        archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .map(|_| ()),
    );
    refused(archive.files("capture").map(|_| ()));
    refused(
        archive
            .survey("capture", &[], Unbounded, Unbounded, 400)
            .map(|_| ()),
    );
    refused(
        archive
            .fold(
                "capture",
                &[],
                Unbounded,
                Unbounded,
                series_archive::Aggregate::Mean,
            )
            .map(|_| ()),
    );
    let damage = archive.verify(|_, _| {});
    assert!(
        damage.iter().any(|d| d.starts_with("manifest ")),
        "{damage:?}"
    );
    drop(archive);
    assert!(
        tree(&root) == before,
        "a read-only open modified the archive:\n{}",
        listing(&tree(&root))
    );
}

#[test]
fn an_unknown_record_version_is_refused_and_nothing_is_modified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    sealed_archive(&root, 2);
    let gen = generation_file(&root);
    let mut bytes = std::fs::read(&gen).expect("read manifest");
    let at = bytes.len();
    // A record of the version after this build's, framed exactly as frame.rs documents it.
    let this_build = series_archive::archive::manifest::frame::FORMAT_VERSION;
    let future = this_build + 1;
    let payload = br#"{"record":"from_the_future"}"#;
    let mut frame = Vec::new();
    frame.extend_from_slice(b"SAmr");
    frame.extend_from_slice(&future.to_le_bytes());
    frame.extend_from_slice(&0u16.to_le_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[4..12]), payload);
    frame.extend_from_slice(&crc.to_le_bytes());
    frame.extend_from_slice(payload);
    bytes.extend_from_slice(&frame);
    std::fs::write(&gen, &bytes).expect("write manifest");
    let before = tree(&root);

    for (config, read_only) in [
        (capture_config(), false),
        (Config::new().read_only(true), true),
    ] {
        let err = Archive::open(&root, config).expect_err("an unknown version must be refused");
        let msg = err.to_string();
        match &err {
            ArchiveError::UnknownVersion {
                path,
                offset,
                found,
                supported,
            } => {
                assert_eq!(path, &gen);
                assert_eq!(*offset, at as u64);
                assert_eq!((*found, *supported), (future, this_build));
            }
            other => panic!("expected UnknownVersion (read_only {read_only}), got {other:?}"),
        }
        assert!(msg.contains(&format!("version {future}")), "{msg}");
        assert!(
            tree(&root) == before,
            "a refused open modified the archive:\n{}",
            listing(&tree(&root))
        );
    }
}

/// After a real crash between a barrier's rename and its record, the command line's next
/// writable open says which file it moved into quarantine and where it kept it (it used to
/// print the destination as if it were the file moved).
#[test]
fn the_cli_names_what_recovery_moved_and_where_it_kept_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    crash_at(&root, FaultPoint::AfterDataRename);
    // The orphans are the crashed barrier's data and level files (no record names them).
    let live = recorded_paths(&Archive::open(&root, Config::new().read_only(true)).expect("open"));
    let orphans: Vec<String> = tree(&root)
        .keys()
        .filter(|p| p.starts_with("streams/") && p.ends_with(".parquet") && !live.contains(*p))
        .cloned()
        .collect();
    assert!(!orphans.is_empty(), "the crash left unrecorded files");
    let csv = dir.path().join("more.csv");
    std::fs::write(
        &csv,
        "run,probe,ordinal,value,noise\nrun_0,probe.0,100000,1,0.5\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_series-archive"))
        .args(["ingest"])
        .arg(&root)
        .args([
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
        ])
        .arg(&csv)
        .output()
        .expect("run ingest");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for file in &orphans {
        let line = stderr
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "recovery: moved {file} into quarantine (kept as .quarantine/"
                ))
            })
            .unwrap_or_else(|| panic!("a line naming {file}:\n{stderr}"));
        assert!(line.ends_with(&format!("/{file})")), "{line}");
    }
}
