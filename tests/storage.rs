//! The storage seam's conformance suite: the same archive behaviour (five barriers, then each
//! of seal, compaction, retirement and checkpoint, reopened and served) run over every
//! backend that plugs in through `archive::Storage` — the local directory, a backend written
//! here against the public trait alone, the failing and crashing wrappers with hooks that
//! never fire, and `Faults` stacked on a custom backend. Every backend must serve exactly
//! what the local directory serves. The custom backend also shows that every file of the
//! archive's own (all but the `LOCK` file and the Delta logs, which the Delta kernel writes
//! through its object store) was created, synced and put in place through the trait.

mod common;

use common::ops::{first_difference, operations, served, stage, BASE_BARRIERS};
use common::tree::copy_tree;
use common::*;
use series_archive::archive::{
    Archive, Config, Crashing, Disk, Failing, FaultPoint, Faults, LocalDisk, ReadFile, Storage,
    WriteFile,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a recording backend saw, by operation.
#[derive(Debug, Default)]
struct Seen {
    created: BTreeSet<PathBuf>,
    synced: BTreeSet<PathBuf>,
    renamed_to: BTreeSet<PathBuf>,
    opened: usize,
    dirs_synced: usize,
}

/// A backend written against the public trait only: the local directory, recording every
/// operation.
#[derive(Debug, Default)]
struct Recording {
    seen: Arc<Mutex<Seen>>,
}

struct RecordedFile {
    inner: Box<dyn WriteFile>,
    path: PathBuf,
    seen: Arc<Mutex<Seen>>,
}

impl WriteFile for RecordedFile {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.inner.sync()?;
        self.seen
            .lock()
            .expect("lock")
            .synced
            .insert(self.path.clone());
        Ok(())
    }
}

impl Storage for Recording {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let inner = LocalDisk.create(path)?;
        self.seen
            .lock()
            .expect("lock")
            .created
            .insert(path.to_path_buf());
        Ok(Box::new(RecordedFile {
            inner,
            path: path.to_path_buf(),
            seen: self.seen.clone(),
        }))
    }

    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(RecordedFile {
            inner: LocalDisk.append(path)?,
            path: path.to_path_buf(),
            seen: self.seen.clone(),
        }))
    }

    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>> {
        self.seen.lock().expect("lock").opened += 1;
        LocalDisk.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        LocalDisk.rename(from, to)?;
        self.seen
            .lock()
            .expect("lock")
            .renamed_to
            .insert(to.to_path_buf());
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.seen.lock().expect("lock").dirs_synced += 1;
        LocalDisk.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        LocalDisk.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        LocalDisk.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        LocalDisk.remove_dir_all(path)
    }
}

/// Makes a fresh configuration over one backend.
type Configure = Box<dyn Fn() -> Config>;

/// The backends under test, by name, each fresh.
fn backends() -> Vec<(&'static str, Configure)> {
    vec![
        (
            "local",
            Box::new(|| capture_config().storage(Arc::new(LocalDisk))),
        ),
        (
            "custom",
            Box::new(|| capture_config().storage(Arc::new(Recording::default()))),
        ),
        (
            "failing, never",
            Box::new(|| {
                let inner: Disk = Arc::new(LocalDisk);
                capture_config().storage(Arc::new(Failing::new(inner, Arc::new(|_, _| None))))
            }),
        ),
        (
            "crashing, never",
            Box::new(|| {
                let inner: Disk = Arc::new(LocalDisk);
                capture_config().storage(Arc::new(Crashing::new(inner, Arc::new(|_| {}))))
            }),
        ),
        (
            "faults over custom",
            Box::new(|| {
                capture_config()
                    .storage(Arc::new(Recording::default()))
                    .faults(Faults::failing(|_, _| None))
            }),
        ),
    ]
}

fn base(root: &Path, config: Config) {
    let mut archive = Archive::open(root, config).expect("open");
    for b in 0..BASE_BARRIERS {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
}

#[test]
fn every_backend_serves_what_the_local_directory_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The reference: the default configuration (no backend named).
    let reference = dir.path().join("reference");
    base(&reference, capture_config());
    let mut expected = Vec::new();
    for (name, operation) in operations() {
        let copy = dir.path().join(format!("reference-{name}"));
        copy_tree(&reference, &copy);
        let mut archive = Archive::open(&copy, capture_config()).expect("open");
        operation(&mut archive).expect("operation");
        drop(archive);
        expected.push(served(
            &Archive::open(&copy, capture_config()).expect("reopen"),
        ));
    }
    for (backend, config) in backends() {
        let root = dir.path().join(backend.replace([' ', ','], "_"));
        base(&root, config());
        for ((name, operation), want) in operations().into_iter().zip(&expected) {
            let copy = PathBuf::from(format!("{}-{name}", root.display()));
            copy_tree(&root, &copy);
            let mut archive = Archive::open(&copy, config()).expect("open");
            operation(&mut archive).unwrap_or_else(|e| panic!("{backend}: {name}: {e}"));
            drop(archive);
            let got = served(&Archive::open(&copy, config()).expect("reopen"));
            assert!(
                &got == want,
                "{backend}: {name} serves differently from the local directory: {}",
                first_difference(&got, want)
            );
        }
    }
}

/// Every file beneath `dir`, relative, except the lock and the Delta logs.
fn archive_files(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "_delta_log") {
                archive_files(root, &path, out);
            }
        } else if path.file_name().is_some_and(|n| n != "LOCK") {
            out.insert(path.strip_prefix(root).expect("under root").to_path_buf());
        }
    }
}

#[test]
fn every_file_of_the_archive_goes_through_the_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("a");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let config = || capture_config().storage(Arc::new(Recording { seen: seen.clone() }) as Disk);
    base(&root, config());
    let mut archive = Archive::open(&root, config()).expect("open");
    archive.compact(true, |_, _, _| {}).expect("compact");
    archive.checkpoint().expect("checkpoint");
    assert!(
        archive.verify(|_, _| {}).is_empty(),
        "the archive verifies through the backend"
    );
    drop(archive);
    let seen = seen.lock().expect("lock");
    let mut files = BTreeSet::new();
    archive_files(&root, &root, &mut files);
    assert!(!files.is_empty());
    for file in &files {
        let placed = root.join(file);
        // A file is created under .tmp/ and renamed into place, or created in place.
        let created = seen.created.contains(&placed) || seen.renamed_to.contains(&placed);
        assert!(
            created,
            "{} was not created or put in place through the backend",
            file.display()
        );
    }
    let unsynced: Vec<&PathBuf> = seen
        .created
        .iter()
        .filter(|p| !seen.synced.contains(*p))
        .collect();
    assert!(
        unsynced.is_empty(),
        "files created through the backend and never synced through it: {unsynced:?}"
    );
    assert!(seen.dirs_synced > 0, "directory syncs went through it");
    assert!(seen.opened > 0, "stored files were read through it");
}

#[test]
fn a_crashing_backend_sees_the_write_paths_points_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("a");
    let points = Arc::new(Mutex::new(Vec::new()));
    let recorder = points.clone();
    let inner: Disk = Arc::new(LocalDisk);
    let crashing: Disk = Arc::new(Crashing::new(
        inner,
        Arc::new(move |p| recorder.lock().expect("lock").push(p)),
    ));
    let mut archive = Archive::open(&root, capture_config().storage(crashing)).expect("open");
    points.lock().expect("lock").clear();
    stage(&mut archive, 0);
    archive.seal_all().expect("seal");
    let seen = points.lock().expect("lock").clone();
    let at = |p: FaultPoint| {
        seen.iter()
            .position(|&q| q == p)
            .unwrap_or_else(|| panic!("{p:?} was not reached: {seen:?}"))
    };
    assert!(at(FaultPoint::AfterDataWrite) < at(FaultPoint::AfterDataRename));
    assert!(at(FaultPoint::AfterDataRename) < at(FaultPoint::MidRecord));
    assert!(at(FaultPoint::MidRecord) < at(FaultPoint::AfterRecord));
}

#[test]
fn a_failing_backend_fails_the_operation_it_names_and_nothing_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("a");
    base(&root, capture_config());
    let before = served(&Archive::open(&root, capture_config()).expect("open"));
    let inner: Disk = Arc::new(LocalDisk);
    let failing: Disk = Arc::new(Failing::new(
        inner,
        Arc::new(|op, path| {
            (op == series_archive::archive::Op::Rename
                && path.extension().is_some_and(|e| e == "parquet"))
            .then(|| std::io::Error::from_raw_os_error(28))
        }),
    ));
    let mut archive = Archive::open(&root, capture_config().storage(failing)).expect("open");
    stage(&mut archive, BASE_BARRIERS);
    let err = archive.seal_all().expect_err("the rename into place fails");
    let text = err.to_string();
    assert!(
        text.contains("rename into place") && text.contains(".parquet"),
        "the error names the step and the file: {text}"
    );
    drop(archive);
    let after = served(&Archive::open(&root, capture_config()).expect("reopen"));
    assert!(
        after == before,
        "a failed barrier leaves what was served: {}",
        first_difference(&after, &before)
    );
}
