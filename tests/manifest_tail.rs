//! The manifest's tail, damaged every way an adversary or a bad sector can: only a record that
//! can never have been acknowledged is dropped as torn; every other damage is refused by reads
//! (`Unreadable`), reported by `verify`, and refused by a writable open, which changes
//! nothing. See `docs/format.md`, "Replay".
//!
//! The matrix: every header field of the last record flipped (two bits per byte), its
//! payload flipped at the start, the middle, 100 bytes before the end and its last byte, a
//! zeroed range (what a power cut before the sync leaves), the generation cut at four
//! places inside every record and at every record boundary (the last records removed), with
//! the Delta logs on and off; and a checkpoint's older generation restored in place of the
//! newer. Each variant is counted as served exact, torn (allowed only where no evidence of
//! acknowledgement exists), refused, or wrong; wrong must be zero.
//!
//! CI runs it as it is (about 150 variants); nothing here is sampled.

mod common;
#[path = "common/http.rs"]
mod http;
#[path = "common/process.rs"]
mod process;

use common::ops::{served, stage};
use common::tree::{copy_tree, listing, tree, Tree};
use common::*;
use series_archive::archive::{Archive, ArchiveError};
use std::path::{Path, PathBuf};

const BARRIERS: u64 = 8;

/// An archive of `BARRIERS` barriers, and what it served after each (index = barriers).
fn base(root: &Path, delta: bool) -> Vec<Vec<String>> {
    let mut archive = Archive::open(root, capture_config().delta(delta)).expect("open");
    let mut after = vec![served(&archive)];
    for b in 0..BARRIERS {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
        after.push(served(&archive));
    }
    after
}

fn generation(root: &Path) -> PathBuf {
    let mut gens: Vec<PathBuf> = std::fs::read_dir(root.join("manifest"))
        .expect("manifest dir")
        .map(|e| e.expect("entry").path())
        .collect();
    gens.sort();
    gens.pop().expect("a generation")
}

/// The byte spans of the generation's records, from the documented frame.
fn spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        out.push((at, at + 16 + len));
        at += 16 + len;
    }
    out
}

fn data(root: &Path) -> Tree {
    let mut files = tree(root);
    files.remove("LOCK");
    files
}

/// How one damaged archive answered.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Everything the archive holds.
    Exact,
    /// The prefix without the last barrier, as after a torn append.
    Torn,
    /// Every read refused; a writable open refused and changed nothing.
    Refused,
}

/// Opens the damaged archive at `root` read-only and writable, and says how it answered;
/// panics on a wrong answer (a short answer that looks whole, a read that answers while
/// the writable open refuses, or a writable open that changed the archive and refused).
fn outcome(root: &Path, delta: bool, after: &[Vec<String>], what: &str) -> Outcome {
    let full = &after[BARRIERS as usize];
    let torn = &after[BARRIERS as usize - 1];
    let read = match Archive::open(root, capture_config().delta(delta).read_only(true)) {
        Ok(archive) => {
            let answer = served(&archive);
            let damaged = archive.recovery().unrepaired_damage().is_some();
            if damaged {
                // Every read refuses; the damage names itself.
                for line in &answer[..5] {
                    assert!(
                        line.contains("refused") || line.starts_with("Err("),
                        "{what}: a read answered past damage: {line:.300}"
                    );
                }
                assert!(
                    !archive.verify(|_, _| {}).is_empty(),
                    "{what}: verify found nothing"
                );
                Outcome::Refused
            } else if answer == *full {
                Outcome::Exact
            } else if answer == *torn {
                Outcome::Torn
            } else {
                panic!(
                    "{what}: a WRONG answer (neither whole, torn nor refused): {}",
                    common::ops::first_difference(&answer, full)
                );
            }
        }
        Err(ArchiveError::CorruptManifest { .. }) => Outcome::Refused,
        Err(e) => panic!("{what}: read-only open failed: {e}"),
    };
    let before = data(root);
    match Archive::open(root, capture_config().delta(delta)) {
        Ok(archive) => {
            assert_ne!(
                read,
                Outcome::Refused,
                "{what}: reads refused but a writable open claimed the archive"
            );
            let answer = served(&archive);
            let expected = if read == Outcome::Exact { full } else { torn };
            assert!(
                answer == *expected,
                "{what}: the writable open serves {}",
                common::ops::first_difference(&answer, expected)
            );
        }
        Err(e) => {
            assert_eq!(read, Outcome::Refused, "{what}: writable open failed: {e}");
            assert!(
                matches!(
                    e,
                    ArchiveError::DamagedManifest { .. }
                        | ArchiveError::DamagedTail { .. }
                        | ArchiveError::CorruptManifest { .. }
                ),
                "{what}: {e}"
            );
            let after = data(root);
            assert!(
                after == before,
                "{what}: a refused writable open changed the archive:\n{}\nwas\n{}",
                listing(&after),
                listing(&before)
            );
        }
    }
    read
}

/// One damage: a name and what it does to the generation's bytes.
type Damage = (String, Box<dyn Fn(&mut Vec<u8>)>);

fn damages(bytes: &[u8]) -> Vec<(Damage, bool)> {
    let spans = spans(bytes);
    let (a, b) = *spans.last().expect("records");
    let mut out: Vec<(Damage, bool)> = Vec::new();
    // (damage, whether it is the last record's own: a torn append may explain it)
    for byte in 0..16 {
        for bit in [0x01u8, 0x80] {
            let at = a + byte;
            out.push((
                (
                    format!("last record header byte {byte} ^ {bit:#04x}"),
                    Box::new(move |v: &mut Vec<u8>| v[at] ^= bit),
                ),
                false,
            ));
        }
    }
    for (name, at) in [
        ("first payload byte", a + 16),
        ("middle payload byte", (a + 16 + b) / 2),
        ("100 bytes before the end", b - 100),
        ("last byte", b - 1),
    ] {
        out.push((
            (
                format!("last record {name} ^ 0x10"),
                Box::new(move |v: &mut Vec<u8>| v[at] ^= 0x10),
            ),
            false,
        ));
    }
    out.push((
        (
            "last record payload zeroed (a power cut before its sync)".into(),
            Box::new(move |v: &mut Vec<u8>| v[(a + b) / 2..b].iter_mut().for_each(|x| *x = 0)),
        ),
        true,
    ));
    for (i, &(start, end)) in spans.iter().enumerate() {
        let last = i == spans.len() - 1;
        for (name, cut) in [
            ("after its magic", start + 4),
            ("inside its header", start + 10),
            ("inside its payload", (start + 16 + end) / 2),
            ("before its last byte", end - 1),
        ] {
            out.push((
                (
                    format!("cut inside record {i} ({name})"),
                    Box::new(move |v: &mut Vec<u8>| v.truncate(cut)),
                ),
                last,
            ));
        }
        if i > 0 {
            let removed = spans.len() - i;
            out.push((
                (
                    format!("the last {removed} record(s) removed"),
                    Box::new(move |v: &mut Vec<u8>| v.truncate(start)),
                ),
                removed == 1,
            ));
        }
    }
    out
}

fn matrix(delta: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pristine = dir.path().join("pristine");
    let after = base(&pristine, delta);
    let gen_rel = generation(&pristine)
        .strip_prefix(&pristine)
        .expect("under root")
        .to_path_buf();
    let bytes = std::fs::read(pristine.join(&gen_rel)).expect("read generation");
    let (mut torn, mut refused, mut tried, mut restored_whole) = (0, 0, 0, 0);
    for (n, ((name, damage), own)) in damages(&bytes).into_iter().enumerate() {
        let root = dir.path().join(format!("v{n}"));
        copy_tree(&pristine, &root);
        let mut damaged = bytes.clone();
        damage(&mut damaged);
        std::fs::write(root.join(&gen_rel), &damaged).expect("damage");
        let what = format!("{name} (Delta logs {})", if delta { "on" } else { "off" });
        let got = outcome(&root, delta, &after, &what);
        tried += 1;
        match got {
            Outcome::Exact => panic!("{what}: damage went unnoticed and served whole"),
            Outcome::Torn => {
                // Dropping the last record is allowed only where nothing shows it was
                // acknowledged: without the Delta logs, for the last record's own damage
                // of the shape an interrupted append leaves.
                assert!(
                    !delta && own,
                    "{what}: dropped as torn though the archive shows it acknowledged"
                );
                torn += 1;
            }
            Outcome::Refused => {
                refused += 1;
                // `repair`: a prefix of what was acknowledged, never anything else; whole
                // again wherever the lost barriers' files prove themselves (every damage
                // past the declaration: the files are intact).
                let records = spans(&bytes).len();
                let whole_expected = !(name.starts_with("cut inside record 0 ")
                    || name.starts_with("cut inside record 1 ")
                    || name == format!("the last {} record(s) removed", records - 1));
                match Archive::open(&root, capture_config().delta(delta).repair(true)) {
                    Ok(archive) => {
                        let answer = served(&archive);
                        let k = after.iter().position(|a| *a == answer).unwrap_or_else(|| {
                            panic!(
                                "{what}: repair serves a WRONG answer: {}",
                                common::ops::first_difference(&answer, &after[BARRIERS as usize])
                            )
                        });
                        if k == BARRIERS as usize {
                            restored_whole += 1;
                        } else {
                            assert!(
                                !whole_expected,
                                "{what}: repair restored {k} of {BARRIERS} barriers"
                            );
                        }
                    }
                    Err(e) => assert!(!whole_expected, "{what}: repair failed: {e}"),
                }
            }
        }
        let _ = std::fs::remove_dir_all(&root);
    }
    eprintln!(
        "manifest tail matrix (Delta logs {}): {tried} variants, {refused} refused ({restored_whole} restored whole by repair), {torn} torn, 0 wrong",
        if delta { "on" } else { "off" }
    );
    if delta {
        assert_eq!(torn, 0, "with the Delta logs on, every damage is evidence");
    } else {
        // The zeroed payload, the cuts inside the last record, its removal.
        assert_eq!(torn, 6, "the torn shapes without Delta logs");
    }
}

#[test]
fn every_tail_damage_with_the_delta_logs_on_is_refused() {
    matrix(true);
}

#[test]
fn without_the_delta_logs_only_an_unacknowledgeable_tail_is_torn() {
    matrix(false);
}

/// A checkpoint, four more barriers, then the older generation restored in place of the
/// newer (a backup put back, a snapshot of the disk rolled back): the files of the newer
/// barriers show the manifest lost them. The older generation beside the newer is history,
/// and changes nothing.
#[test]
fn an_older_generation_restored_over_a_checkpoint_is_refused() {
    for delta in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("archive");
        let mut archive = Archive::open(&root, capture_config().delta(delta)).expect("open");
        let mut after = vec![served(&archive)];
        for b in 0..BARRIERS / 2 {
            stage(&mut archive, b);
            archive.seal_all().expect("seal");
            after.push(served(&archive));
        }
        let old = generation(&root);
        let old_bytes = std::fs::read(&old).expect("read");
        archive.checkpoint().expect("checkpoint");
        for b in BARRIERS / 2..BARRIERS {
            stage(&mut archive, b);
            archive.seal_all().expect("seal");
            after.push(served(&archive));
        }
        drop(archive);
        let new = generation(&root);
        assert_ne!(new, old);

        let beside = dir.path().join("beside");
        copy_tree(&root, &beside);
        std::fs::write(
            beside.join("manifest").join(old.file_name().expect("name")),
            &old_bytes,
        )
        .expect("restore");
        let what = format!("older generation beside the newer (Delta {delta})");
        assert_eq!(
            outcome(&beside, delta, &after, &what),
            Outcome::Exact,
            "{what}"
        );

        let rolled = dir.path().join("rolled");
        copy_tree(&root, &rolled);
        std::fs::remove_file(rolled.join("manifest").join(new.file_name().expect("name")))
            .expect("remove");
        std::fs::write(
            rolled.join("manifest").join(old.file_name().expect("name")),
            &old_bytes,
        )
        .expect("restore");
        let what = format!("older generation in place of the newer (Delta {delta})");
        assert_eq!(
            outcome(&rolled, delta, &after, &what),
            Outcome::Refused,
            "{what}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The issue's reproductions, through the binary as a user runs it.
// ---------------------------------------------------------------------------------------

use process::{Out as Run, BIN};

/// `series-archive ARGS…` (the shared runner, for a slice of arguments).
fn sa(args: &[&str]) -> Run {
    process::sa(args)
}

/// 4,800 rows in 24 barriers (`--seal-rows 200 --no-compact`), as the issue ingests them.
fn ingested(dir: &Path) -> (PathBuf, PathBuf) {
    let mut text = String::from("run,probe,ordinal,value\n");
    for i in 0..4800u64 {
        text.push_str(&format!("r{},p{},{i},{}\n", i % 2, i % 3, i * 7 % 13));
    }
    let input = dir.join("in.csv");
    std::fs::write(&input, text).expect("write csv");
    let root = dir.join("archive");
    let out = ingest(&root, &input);
    assert_eq!(out.code, 0, "ingest: {}", out.stderr);
    assert!(out.stdout.contains("barrier 24"), "{}", out.stdout);
    (root, input)
}

fn ingest(root: &Path, input: &Path) -> Run {
    sa(&[
        "ingest",
        root.to_str().expect("utf-8"),
        "--stream",
        "capture",
        "--track",
        "run,probe",
        "--axis",
        "ordinal",
        "--seal-rows",
        "200",
        "--no-compact",
        input.to_str().expect("utf-8"),
    ])
}

/// Every read refuses (exit 3), `verify` exits 4 naming the manifest, a routine `ingest`
/// refuses and changes nothing, `serve` answers 503; `repair` shows the evidence.
fn refused_everywhere(root: &Path, input: &Path, what: &str) {
    let r = root.to_str().expect("utf-8");
    let rows = sa(&["rows", r, "--stream", "capture"]);
    assert_eq!(
        rows.code,
        3,
        "{what}: rows answered {} bytes: {}",
        rows.stdout.len(),
        rows.stderr
    );
    assert!(rows.stderr.contains("damaged"), "{what}: {}", rows.stderr);
    let fold = sa(&["fold", r, "--stream", "capture", "--aggregate", "count"]);
    assert_eq!(fold.code, 3, "{what}: fold count answered {}", fold.stdout);
    let verify = sa(&["verify", r]);
    assert_eq!(
        verify.code, 4,
        "{what}: verify: {}{}",
        verify.stdout, verify.stderr
    );
    assert!(
        verify.stdout.contains("manifest"),
        "{what}: {}",
        verify.stdout
    );
    let inspect = sa(&["inspect", r]);
    assert!(
        inspect.stdout.contains("DAMAGED"),
        "{what}: {}",
        inspect.stdout
    );

    let server = http::Server::start(BIN, root, &[]);
    let reply = server.get("/api/fold?stream=capture&aggregate=count");
    assert_eq!(reply.status, 503, "{what}: /api/fold: {}", reply.text());
    drop(server);

    let before = data(root);
    let again = ingest(root, input);
    assert_ne!(
        again.code, 0,
        "{what}: a routine ingest went ahead: {}",
        again.stdout
    );
    assert!(again.stderr.contains("damaged"), "{what}: {}", again.stderr);
    assert!(
        data(root) == before,
        "{what}: the refused ingest changed the archive"
    );

    let plan = sa(&["repair", r]);
    assert_eq!(plan.code, 0, "{what}: repair: {}", plan.stderr);
    assert!(
        plan.stdout.contains("what shows it:"),
        "{what}: {}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("nothing was changed"),
        "{what}: {}",
        plan.stdout
    );
    assert!(
        data(root) == before,
        "{what}: repair without --yes changed the archive"
    );
}

#[test]
fn the_issues_reproductions_are_refused_not_answered_short() {
    let dir = process::scratch("manifest-tail");
    let (pristine, input) = ingested(dir.path());
    let gen = generation(&pristine);
    let gen_name = gen.file_name().expect("name").to_owned();
    let bytes = std::fs::read(&gen).expect("read");
    let spans = spans(&bytes);
    assert_eq!(spans.len(), 26, "snapshot, declaration, 24 barriers");

    // One bit flipped 100 bytes before the end: was 4,600 rows with exit 0.
    let flipped = dir.path().join("flipped");
    copy_tree(&pristine, &flipped);
    let mut damaged = bytes.clone();
    let at = damaged.len() - 100;
    damaged[at] ^= 0x04;
    std::fs::write(flipped.join("manifest").join(&gen_name), &damaged).expect("damage");
    refused_everywhere(&flipped, &input, "a bit flipped 100 bytes before the end");
    let plan = sa(&["repair", flipped.to_str().expect("utf-8")]);
    assert!(plan.stdout.contains("Delta commit"), "{}", plan.stdout);

    // Cut inside barrier 2's record: was barrier 1 only (200 of 4,800 rows), exit 0.
    let cut2 = dir.path().join("cut-barrier-2");
    copy_tree(&pristine, &cut2);
    let (start, end) = spans[3];
    std::fs::write(
        cut2.join("manifest").join(&gen_name),
        &bytes[..(start + end) / 2],
    )
    .expect("cut");
    refused_everywhere(&cut2, &input, "cut inside barrier 2's record");
    let plan = sa(&["repair", cut2.to_str().expect("utf-8")]);
    assert!(
        plan.stdout
            .contains("data files holding rows of acknowledged records"),
        "{}",
        plan.stdout
    );

    // Cut inside the declaration: verify said "ok: 0 file(s)"; the next ingest quarantined
    // every row and declared the stream anew.
    let cut_declare = dir.path().join("cut-declare");
    copy_tree(&pristine, &cut_declare);
    let (start, end) = spans[1];
    std::fs::write(
        cut_declare.join("manifest").join(&gen_name),
        &bytes[..(start + end) / 2],
    )
    .expect("cut");
    let r = cut_declare.to_str().expect("utf-8");
    let verify = sa(&["verify", r]);
    assert_eq!(verify.code, 4, "{}{}", verify.stdout, verify.stderr);
    let before = data(&cut_declare);
    let again = ingest(&cut_declare, &input);
    assert_ne!(again.code, 0, "{}", again.stdout);
    assert!(
        data(&cut_declare) == before,
        "the refused ingest changed the archive"
    );

    // `repair --yes` restores the lost barriers whose files prove themselves (encoded again
    // byte for byte): every acknowledged row is back, `verify` passes, and the damaged
    // generation is kept as evidence.
    let more = dir.path().join("more.csv");
    let mut text = String::from("run,probe,ordinal,value\n");
    for i in 4800..9600u64 {
        text.push_str(&format!("r{},p{},{i},{}\n", i % 2, i % 3, i * 7 % 13));
    }
    std::fs::write(&more, text).expect("write csv");
    let pristine_rows = sa(&[
        "rows",
        pristine.to_str().expect("utf-8"),
        "--stream",
        "capture",
    ]);
    for (root, restored) in [(&flipped, 1), (&cut2, 23)] {
        let r = root.to_str().expect("utf-8");
        let plan = sa(&["repair", r]);
        assert!(
            plan.stdout
                .contains(&format!("restored into the new generation ({restored})")),
            "{}",
            plan.stdout
        );
        let repaired = sa(&["repair", r, "--yes"]);
        assert_eq!(repaired.code, 0, "{}", repaired.stderr);
        assert!(
            repaired
                .stdout
                .contains(&format!("{restored} restored barrier(s)")),
            "{}",
            repaired.stdout
        );
        let verify = sa(&["verify", r]);
        assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
        let count = sa(&["fold", r, "--stream", "capture", "--aggregate", "count"]);
        assert_eq!(count.code, 0, "{}", count.stderr);
        assert!(count.stdout.contains("4800"), "{}", count.stdout);
        let rows = sa(&["rows", r, "--stream", "capture"]);
        assert!(
            rows.stdout == pristine_rows.stdout,
            "the restored archive serves other rows"
        );
        let quarantine = sa(&["quarantine", r]);
        assert!(
            quarantine.stdout.contains("gen-000000000001.log"),
            "{}",
            quarantine.stdout
        );
        // The same input again is refused: the archive knows every row it acknowledged.
        let same = ingest(root, &input);
        assert_ne!(same.code, 0, "{}", same.stdout);
        assert!(same.stderr.contains("goes backwards"), "{}", same.stderr);
        // The next routine ingest appends after every acknowledged row.
        let again = ingest(root, &more);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert!(
            again.stdout.contains("through position 9600"),
            "{}",
            again.stdout
        );
    }
}
