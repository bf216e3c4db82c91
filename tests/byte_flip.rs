//! Damage to a sealed data file is refused, never served: every byte of a small file is
//! flipped in turn, and every read through a freshly opened read-only archive answers either
//! exactly the original rows or `Unreadable` — `Unreadable` exactly when the read needs a
//! digest that covers the flipped byte. A deleted or truncated file is `Unreadable` naming
//! the file, and `verify()` names it.

mod common;

use common::*;
use series_archive::archive::manifest::SegmentFile;
use series_archive::archive::{Archive, Config, ReadError, StoredErrorKind};
use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const RUNS: usize = 3;
const PROBES: usize = 1;
const TICKS: u64 = 2;
const BARRIERS: u64 = 2;

/// A selection of tracks (labels, outermost first; empty selects all).
type Selection = Vec<String>;

/// The unnarrowed stream and every track.
fn selections() -> Vec<Selection> {
    let mut out = vec![vec![]];
    for r in 0..RUNS {
        for p in 0..PROBES {
            out.push(vec![format!("run_{r}"), format!("probe.{p}")]);
        }
    }
    out
}

/// Whether `selection` reads the track `labels`.
fn covers(selection: &Selection, labels: &[String]) -> bool {
    labels.starts_with(selection)
}

struct Sealed {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// The original rows each selection answers.
    expected: BTreeMap<Selection, Vec<(u64, Row)>>,
    /// Every committed file's manifest entry.
    files: Vec<SegmentFile>,
}

fn seal() -> Sealed {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let mut archive = Archive::open(&root, capture_config()).expect("open");
    for b in 0..BARRIERS {
        let (rows, positions) = workload(RUNS, PROBES, TICKS, b * TICKS);
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
    let (rows, positions) = workload(RUNS, PROBES, TICKS * BARRIERS, 0);
    let all: Vec<(u64, Row)> = positions.into_iter().zip(rows).collect();
    let expected: BTreeMap<Selection, Vec<(u64, Row)>> = selections()
        .into_iter()
        .map(|s| {
            let want: Vec<_> = all
                .iter()
                .filter(|(_, r)| covers(&s, &[r.run.clone(), r.probe.clone()]))
                .cloned()
                .collect();
            assert!(!want.is_empty());
            let got = rows_of(
                &archive
                    .read_rows("capture", &s, Unbounded, Unbounded)
                    .expect("rows"),
            );
            assert_eq!(got, want, "selection {s:?} before any damage");
            (s, want)
        })
        .collect();
    let files = archive.state().streams["capture"].files.clone();
    assert_eq!(files.len() as u64, BARRIERS);
    for f in &files {
        assert_eq!(
            f.groups.len(),
            RUNS * PROBES,
            "one row group per track in {}",
            f.path
        );
    }
    Sealed {
        _dir: dir,
        root,
        expected,
        files,
    }
}

/// How one read answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Original,
    /// Refused, with the kind of wall the read hit and what it says.
    Unreadable(StoredErrorKind, String),
}

/// Reads `selection` through `archive`: the original rows or `Unreadable`, anything else fails.
fn read(
    archive: &Archive,
    selection: &Selection,
    expected: &[(u64, Row)],
    context: &str,
) -> Answer {
    let answer = catch_unwind(AssertUnwindSafe(|| {
        archive.read_rows("capture", selection, Unbounded, Unbounded)
    }))
    .unwrap_or_else(|_| panic!("{context}: reading {selection:?} panicked"));
    match answer {
        Ok(batch) => {
            let got = rows_of(&batch);
            assert!(
                got == expected,
                "{context}: {selection:?} answered different rows ({} rows, {} expected)",
                got.len(),
                expected.len()
            );
            Answer::Original
        }
        Err(ReadError::Stored(e)) => Answer::Unreadable(e.kind, e.what),
        Err(other) => {
            panic!("{context}: {selection:?} answered neither the rows nor Unreadable: {other:?}")
        }
    }
}

fn read_only(root: &Path) -> Archive {
    Archive::open(root, Config::new().read_only(true)).expect("read-only open")
}

/// What a flip at `offset` of `file` damages: `None` for the magic and footer (every read of
/// the file), the labels of every track a row group holds for its bytes (a packed row group
/// holds several). Panics for a byte no digest covers.
fn region(file: &SegmentFile, offset: u64) -> Option<Vec<Vec<String>>> {
    if offset < 4 || (file.footer.offset..file.footer.offset + file.footer.len).contains(&offset) {
        return None;
    }
    let tracks: Vec<Vec<String>> = file
        .groups
        .iter()
        .filter(|g| (g.span.offset..g.span.offset + g.span.len).contains(&offset))
        .map(|g| g.track.to_vec())
        .collect();
    assert!(
        !tracks.is_empty(),
        "byte {offset} of {} is covered by no digest",
        file.path
    );
    Some(tracks)
}

#[test]
fn every_digest_range_and_the_footer_tile_the_file() {
    let sealed = seal();
    for file in &sealed.files {
        let mut spans: Vec<(u64, u64)> = file
            .row_groups()
            .iter()
            .map(|(_, span, _)| (span.offset, span.len))
            .collect();
        spans.push((file.footer.offset, file.footer.len));
        let mut at = 4; // the leading magic is under the footer's digest
        for (offset, len) in spans {
            assert_eq!(offset, at, "{}: a gap or overlap at byte {at}", file.path);
            at = offset + len;
        }
        assert_eq!(
            at, file.bytes,
            "{}: the spans end before the file does",
            file.path
        );
    }
}

/// Copies the directory tree at `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Flips each of `offsets` in turn in `file` of the archive at `root` and checks every
/// selection and `verify()`; answers (refusals, reads).
fn flip_each(
    root: &Path,
    file: &SegmentFile,
    expected: &BTreeMap<Selection, Vec<(u64, Row)>>,
    offsets: impl Iterator<Item = u64>,
) -> (usize, usize) {
    let path = root.join(&file.path);
    let name = Path::new(&file.path)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open data file");
    let original = std::fs::read(&path).expect("read");
    let (mut unreadable, mut answers) = (0usize, 0usize);
    for offset in offsets {
        let context = format!("{name} byte {offset}");
        let at = offset as usize;
        handle
            .write_all_at(&[original[at] ^ 0xFF], offset)
            .expect("flip");
        let damaged = region(file, offset);
        let archive = read_only(root);
        for (selection, rows) in expected {
            let must_refuse = damaged
                .as_ref()
                .is_none_or(|tracks| tracks.iter().any(|labels| covers(selection, labels)));
            match read(&archive, selection, rows, &context) {
                Answer::Unreadable(kind, what) => {
                    assert_eq!(
                        kind,
                        StoredErrorKind::Corrupt,
                        "{context}: a flipped byte is damage"
                    );
                    assert!(
                        must_refuse,
                        "{context}: {selection:?} was refused but reads nothing damaged: {what}"
                    );
                    assert!(
                        what.contains(&name),
                        "{context}: the refusal does not name the file: {what}"
                    );
                    unreadable += 1;
                }
                Answer::Original => {
                    assert!(!must_refuse, "{context}: {selection:?} was served though it reads the damaged bytes ({damaged:?})")
                }
            }
            answers += 1;
        }
        let report = archive.verify(|_, _| {});
        assert_eq!(report.len(), 1, "{context}: verify answered {report:?}");
        assert!(
            report[0].contains(&name),
            "{context}: verify does not name the file: {report:?}"
        );
        handle
            .write_all_at(&original[at..at + 1], offset)
            .expect("restore");
    }
    (unreadable, answers)
}

#[test]
fn a_flipped_byte_anywhere_is_refused_never_served() {
    let sealed = seal();
    let file = &sealed.files[1];
    let len = std::fs::metadata(sealed.root.join(&file.path))
        .expect("stat")
        .len();
    assert_eq!(len, file.bytes);
    assert!(
        len < 20 * 1024,
        "keep the file small enough to flip every byte: {len} bytes"
    );
    // Every byte, spread over workers that each flip in their own copy of the archive.
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4) as u64;
    let copies = tempfile::tempdir().expect("tempdir");
    let (unreadable, answers) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let root = copies.path().join(format!("worker-{w}"));
                copy_tree(&sealed.root, &root);
                let expected = &sealed.expected;
                scope.spawn(move || {
                    flip_each(&root, file, expected, (w..len).step_by(workers as usize))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .fold((0, 0), |(u, a), (du, da)| (u + du, a + da))
    });
    // The unnarrowed read covers every byte: at least one refusal per flipped byte.
    assert!(
        unreadable >= len as usize,
        "{unreadable} refusals for {len} flipped bytes"
    );
    assert_eq!(answers, len as usize * sealed.expected.len());
    eprintln!("{len} bytes flipped, {answers} reads, {unreadable} refused");
    // The original archive was never touched; its copies are restored.
    let archive = read_only(&sealed.root);
    for (selection, expected) in &sealed.expected {
        assert_eq!(
            read(&archive, selection, expected, "untouched"),
            Answer::Original
        );
    }
    assert!(archive.verify(|_, _| {}).is_empty());
}

/// Every selection reads the damaged file (every track has a group in it): all refuse,
/// naming it, and `verify()` names it.
fn assert_all_refused(
    root: &Path,
    expected: &BTreeMap<Selection, Vec<(u64, Row)>>,
    name: &str,
    why: &str,
    kind: StoredErrorKind,
) {
    let archive = read_only(root);
    for (selection, rows) in expected {
        match read(&archive, selection, rows, why) {
            Answer::Unreadable(k, what) => {
                assert!(what.contains(name), "{why}: {what}");
                assert_eq!(k, kind, "{why}: {what}");
            }
            Answer::Original => panic!("{why}: {selection:?} was served"),
        }
    }
    let report = archive.verify(|_, _| {});
    assert_eq!(report.len(), 1, "{why}: {report:?}");
    assert!(report[0].contains(name), "{why}: {report:?}");
}

#[test]
fn a_deleted_or_truncated_file_is_unreadable_and_named() {
    let sealed = seal();
    let file = &sealed.files[1];
    let path = sealed.root.join(&file.path);
    let name = Path::new(&file.path)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    let original = std::fs::read(&path).expect("read");

    std::fs::remove_file(&path).expect("delete");
    assert_all_refused(
        &sealed.root,
        &sealed.expected,
        &name,
        "deleted",
        StoredErrorKind::Missing,
    );

    for keep in [original.len() - 1, original.len() / 2, 3, 0] {
        std::fs::write(&path, &original[..keep]).expect("truncate");
        assert_all_refused(
            &sealed.root,
            &sealed.expected,
            &name,
            &format!("truncated to {keep} bytes"),
            StoredErrorKind::Corrupt,
        );
    }

    let mut longer = original.clone();
    longer.push(0);
    std::fs::write(&path, &longer).expect("extend");
    assert_all_refused(
        &sealed.root,
        &sealed.expected,
        &name,
        "one byte appended",
        StoredErrorKind::Corrupt,
    );

    std::fs::write(&path, &original).expect("restore");
    let archive = read_only(&sealed.root);
    for (selection, rows) in &sealed.expected {
        assert_eq!(
            read(&archive, selection, rows, "restored"),
            Answer::Original
        );
    }
    assert!(archive.verify(|_, _| {}).is_empty());
}

/// Level files are committed data files too: `verify()` must check their digests.
/// (Fails while `Archive::verify` walks `StreamState::files` only, not `levels`.)
#[test]
fn verify_names_a_damaged_level_file() {
    let sealed = seal();
    let levels = sealed.root.join("streams/capture/levels");
    let mut level_files: Vec<PathBuf> = std::fs::read_dir(&levels)
        .expect("level files")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    level_files.sort();
    assert_eq!(level_files.len() as u64, BARRIERS, "{level_files:?}");
    assert!(read_only(&sealed.root).verify(|_, _| {}).is_empty());
    let path = &level_files[1];
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    let mut bytes = std::fs::read(path).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(path, &bytes).expect("write");
    let report = read_only(&sealed.root).verify(|_, _| {});
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(report[0].contains(&name), "{report:?}");
}
