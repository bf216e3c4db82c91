//! Every durable operation of seal, compaction, retirement and checkpoint made to fail, one
//! at a time, as a disk fails: EIO, ENOSPC or a timeout on a create, write, fsync, rename,
//! directory sync, directory creation or delete. For every point the archive either
//! completes, or refuses further writes (poisoned) and, reopened, serves exactly the state
//! before the operation or exactly the state after it — nothing else, nothing lost, every
//! digest verified, and it takes the next barrier. A failed fsync is never retried on the
//! same file.

mod common;

use common::ops::*;
use common::tree::copy_tree;
use common::*;
use series_archive::archive::{Archive, ArchiveError, Faults, Op, ReadError, StoredErrorKind};
use series_archive::Aggregate;
use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The capture stream without the Delta log: this suite's operations are one manifest record
/// each, and with the log on a retirement also rewrites the files that still hold retired
/// groups (a second record). The log's failures and crashes are tests/delta_log.rs's.
fn config() -> series_archive::archive::Config {
    capture_config().delta(false)
}

/// Counts durable operations and fails the `fail_at`-th one; logs every one.
#[derive(Default)]
struct Injector {
    seen: AtomicUsize,
    fail_at: AtomicUsize,
    error: Mutex<Option<MakeError>>,
    log: Mutex<Vec<(Op, PathBuf, bool)>>,
}

impl Injector {
    fn new(fail_at: usize, error: MakeError) -> Arc<Injector> {
        let i = Injector::default();
        i.fail_at.store(fail_at, Ordering::SeqCst);
        *i.error.lock().expect("lock") = Some(error);
        Arc::new(i)
    }

    fn faults(self: &Arc<Self>) -> Faults {
        let me = self.clone();
        Faults::failing(move |op, path| {
            let n = me.seen.fetch_add(1, Ordering::SeqCst);
            let fail = n == me.fail_at.load(Ordering::SeqCst);
            me.log
                .lock()
                .expect("lock")
                .push((op, path.to_path_buf(), fail));
            if fail {
                me.error.lock().expect("lock").map(|e| e())
            } else {
                None
            }
        })
    }

    /// Starts counting from here (the open's own operations are not the operation's).
    fn arm(&self, fail_at: usize) {
        self.log.lock().expect("lock").clear();
        self.seen.store(0, Ordering::SeqCst);
        self.fail_at.store(fail_at, Ordering::SeqCst);
    }
}

/// Makes the error an injected failure answers.
type MakeError = fn() -> std::io::Error;

const ERRORS: [(&str, MakeError); 3] = [
    ("EIO", || std::io::Error::from_raw_os_error(5)),
    ("ENOSPC", || std::io::Error::from_raw_os_error(28)),
    ("timeout", || {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "injected timeout")
    }),
];

#[test]

fn every_durable_operation_fails_cleanly_and_reopens_to_before_or_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pristine = dir.path().join("base");
    base(&pristine);
    let before = served(&Archive::open(&pristine, config()).expect("open"));
    let mut cases = 0;
    for (name, operation) in operations() {
        // A clean run: how many durable operations it takes, and what it leaves.
        let clean = dir.path().join(format!("{name}-clean"));
        copy_tree(&pristine, &clean);
        let counter = Injector::new(usize::MAX, ERRORS[0].1);
        let mut archive = Archive::open(&clean, config().faults(counter.faults())).expect("open");
        counter.arm(usize::MAX);
        operation(&mut archive).expect("the clean run completes");
        let steps = counter.seen.load(Ordering::SeqCst);
        assert!(steps > 0, "{name} does durable work");
        let after = served(&archive);
        assert!(
            before != after || name == "checkpoint",
            "{name} changes what is served or the files that hold it"
        );
        drop(archive);
        let reopened = served(&Archive::open(&clean, config()).expect("reopen"));
        assert!(
            reopened == after,
            "{name}: a clean run reopens to its own state: {}",
            first_difference(&reopened, &after)
        );

        for at in 0..steps {
            let (error_name, error) = ERRORS[at % ERRORS.len()];
            let what = format!("{name}: {error_name} at durable operation {at} of {steps}");
            let root = dir.path().join(format!("{name}-{at}"));
            copy_tree(&pristine, &root);
            let injector = Injector::new(usize::MAX, error);
            let mut archive = Archive::open(&root, config().faults(injector.faults()))
                .unwrap_or_else(|e| panic!("{what}: open: {e}"));
            injector.arm(at);
            let outcome = operation(&mut archive);
            let log = injector.log.lock().expect("lock").clone();
            let failed = log
                .iter()
                .position(|(_, _, f)| *f)
                .unwrap_or_else(|| panic!("{what}: the injected failure was reached"));
            let err = outcome.expect_err(&format!("{what}: the failure is reported"));
            // Poisoned: no further write is attempted until it is reopened.
            stage(&mut archive, BASE_BARRIERS + 1);
            assert!(
                matches!(archive.seal_all(), Err(ArchiveError::Poisoned(_))),
                "{what}: refuses further barriers after {err}"
            );
            // A poisoned handle serves no rows: what it lost of its staged rows would make
            // any answer short.
            match archive.read_rows("capture", &[], Unbounded, Unbounded) {
                Err(ReadError::Stored(e)) => {
                    assert_eq!(e.kind, StoredErrorKind::Poisoned, "{what}: {e}")
                }
                other => panic!(
                    "{what}: a poisoned handle answered {:?}",
                    other.map(|b| b.num_rows())
                ),
            }
            // A failed fsync is never retried on the same file.
            if let (Op::Sync, path, _) = &log[failed] {
                assert!(
                    !log[failed + 1..]
                        .iter()
                        .any(|(op, p, _)| *op == Op::Sync && p == path),
                    "{what}: the failed fsync of {} was retried",
                    path.display()
                );
            }
            drop(archive);
            // Reopened: exactly before or exactly after, verified, and writable.
            let mut archive =
                Archive::open(&root, config()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            let now = served(&archive);
            assert!(
                now == before || now == after,
                "{what}: reopened to neither the state before nor after: before {}; after {}",
                first_difference(&now, &before),
                first_difference(&now, &after)
            );
            assert!(
                archive.verify(|_, _| {}).is_empty(),
                "{what}: every digest verifies"
            );
            stage(&mut archive, BASE_BARRIERS + 2);
            archive
                .seal_all()
                .unwrap_or_else(|e| panic!("{what}: the next barrier: {e}"));
            cases += 1;
        }
    }
    eprintln!("{cases} injected failures, each reopened to before or after");
    assert!(cases >= 40, "{cases} cases");
}

/// A read under test: its answer as text, or why it was refused.
type Read = fn(&Archive) -> Result<String, String>;

/// Every read a `rows`, `survey`, `fold` or `verify` makes, failed in turn: the answer is a
/// refusal (`Unreadable`, which a caller may retry) or named damage — never a shorter
/// answer — and the next read, with the disk well again, answers whole.
#[test]
fn a_failed_read_is_refused_never_short() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    base(&root);
    // Compacted and uncompacted files both: a compaction of two, then fresh barriers.
    {
        let mut archive = Archive::open(&root, config()).expect("open");
        archive.compact(true, |_, _, _| {}).expect("compact");
        for b in BASE_BARRIERS..BASE_BARRIERS + 2 {
            stage(&mut archive, b);
            archive.seal_all().expect("seal");
        }
    }
    let injector = Injector::new(usize::MAX, ERRORS[0].1);
    let reader =
        || Archive::open(&root, config().faults(injector.faults()).read_only(true)).expect("open");
    let archive = reader();
    let whole = served(&archive);
    let reads: Vec<(&str, Read)> = vec![
        ("rows", |a| {
            a.read_rows("capture", &[], Unbounded, Unbounded)
                .map(|b| format!("{:?}", rows_of(&b)))
                .map_err(|e| e.to_string())
        }),
        ("survey", |a| {
            a.survey("capture", &[], Unbounded, Unbounded, 64)
                .map(|s| format!("{:?}", s.buckets))
                .map_err(|e| e.to_string())
        }),
        ("p95", |a| {
            a.fold(
                "capture",
                &[],
                Unbounded,
                Unbounded,
                Aggregate::parse("p95").expect("p95"),
            )
            .map(|f| format!("{:?}", f.answers))
            .map_err(|e| e.to_string())
        }),
        ("verify", |a| {
            let damage = a.verify(|_, _| {});
            if damage.is_empty() {
                Ok("verified".into())
            } else {
                Err(damage.join("; "))
            }
        }),
    ];
    let mut cases = 0;
    for (name, read) in reads {
        // Fresh handles: the level view is built on first use, so every read is reached. The
        // handle is opened before the count starts: an open reads files too (format 11: the
        // slices of a file recorded by its row groups), and those reads are not the read's.
        let fresh = reader();
        injector.arm(usize::MAX);
        let want = read(&fresh).expect("a clean read answers");
        let steps = injector.seen.load(Ordering::SeqCst);
        assert!(steps > 0, "{name} reads stored files");
        for at in 0..steps {
            let archive = reader();
            injector.arm(at);
            match read(&archive) {
                Err(e) => assert!(
                    e.contains("unreadable")
                        || e.contains("EIO")
                        || e.contains("error 5")
                        || name == "verify",
                    "{name}: read {at} of {steps} failed: refused as {e}"
                ),
                Ok(got) => panic!(
                    "{name}: read {at} of {steps} failed and it still answered ({} vs {} chars)",
                    got.len(),
                    want.len()
                ),
            }
            injector.arm(usize::MAX);
            assert_eq!(
                read(&archive).as_ref(),
                Ok(&want),
                "{name}: the retry answers whole"
            );
            cases += 1;
        }
    }
    assert_eq!(served(&archive), whole);
    eprintln!("{cases} failed reads, each refused and answered whole on retry");
}

/// The archive at `root` opened with an injector of failures (not armed) and compactions due
/// from two barrier files.
fn compacting_with_faults(root: &Path) -> (Arc<Injector>, Archive) {
    let injector = Injector::new(usize::MAX, ERRORS[0].1);
    let archive = Archive::open(
        root,
        config().faults(injector.faults()).compaction(
            series_archive::archive::lifecycle::Compaction {
                min_inputs: 2,
                ..Default::default()
            },
        ),
    )
    .expect("open");
    (injector, archive)
}

/// A compaction that fails on the `Maintainer`'s thread poisons the archive exactly as a
/// failed `compact()` does (it used not to): the next barrier is refused until a reopen,
/// which serves what was acknowledged.
#[test]
fn a_failed_background_compaction_poisons_like_a_foreground_one() {
    use series_archive::archive::lifecycle::Maintainer;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    base(&root);
    let before = served(&Archive::open(&root, config()).expect("open"));
    // Every read fails: the job cannot read its inputs.
    let (injector, mut archive) = compacting_with_faults(&root);
    injector.arm(0);
    let mut maintainer = Maintainer::new();
    let mut outcome = maintainer.step(&mut archive, 0).map(|_| ());
    if outcome.is_ok() {
        outcome = maintainer.finish(&mut archive).map(|_| ());
    }
    assert!(outcome.is_err(), "the failed job is reported");
    stage(&mut archive, BASE_BARRIERS);
    assert!(
        matches!(archive.seal_all(), Err(ArchiveError::Poisoned(_))),
        "poisoned after a failed background job"
    );
    drop(archive);
    assert_eq!(
        served(&Archive::open(&root, config()).expect("reopen")),
        before
    );
}

/// A background compaction that fails after a retirement took its inputs (a later step's
/// sweep deletes files the job still reads) would have been discarded had it finished: it
/// is dropped, not taken for damage, and the archive goes on writing. (One whose inputs are
/// still live poisons, as above.)
#[test]
fn a_background_compaction_whose_inputs_were_retired_meanwhile_is_dropped() {
    use series_archive::archive::lifecycle::Maintainer;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    base(&root);
    let (injector, mut archive) = compacting_with_faults(&root);
    // The job's first durable operation fails (as a read of a deleted input would).
    injector.arm(0);
    let mut maintainer = Maintainer::new();
    maintainer
        .step(&mut archive, 0)
        .expect("the step starts the job");
    assert_eq!(maintainer.running(), 1);
    let began = std::time::Instant::now();
    while injector.seen.load(Ordering::SeqCst) == 0 {
        assert!(began.elapsed().as_secs() < 30, "the job never read");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let failed: Vec<PathBuf> = injector
        .log
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, _, fail)| *fail)
        .map(|(_, path, _)| path.clone())
        .collect();
    // The job's own first durable operation (its output under .tmp/), not the step's.
    assert!(
        failed.len() == 1 && failed[0].to_string_lossy().contains("/.tmp/"),
        "the job's operation failed: {failed:?}"
    );
    // Meanwhile every track is retired: the job's inputs leave the live state.
    archive
        .retire_track("capture", &[])
        .expect("retire")
        .expect("something retired");
    let recorded = maintainer
        .finish(&mut archive)
        .expect("dropped, not an error");
    assert!(recorded.is_empty(), "{recorded:?}");
    archive.checkpoint().expect("the archive goes on writing");
}

/// A data file the manifest names that is gone is refused as `Missing` (the kind a reader
/// beside a writer retries on), never answered without its rows; at the contract boundary it
/// is an `Unreadable` that does not promise a retry will help.
#[test]
fn a_file_the_manifest_names_that_is_gone_is_missing_never_short() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let mut archive = Archive::open(&root, config()).expect("open");
    let (rows, positions) = workload(4, 8, 500, 0);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    archive.seal_all().expect("seal");
    drop(archive);
    let files = Archive::open(&root, config().read_only(true))
        .expect("open")
        .files("capture")
        .expect("files");
    std::fs::remove_file(&files[0]).expect("remove a data file");
    let reader = Archive::open(&root, config().read_only(true)).expect("open");
    match reader.read_rows("capture", &[], Unbounded, Unbounded) {
        Err(ReadError::Stored(e)) => {
            assert_eq!(e.kind, StoredErrorKind::Missing, "{e}");
            assert!(e.what.contains("named by the manifest"), "{e}");
            assert!(!e.is_transient());
            match series_archive::BeneathWindow::from(e) {
                series_archive::BeneathWindow::Unreadable(u) => assert!(!u.is_transient()),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("answered {:?}", other.map(|b| b.num_rows())),
    }
}
