//! A power-loss model on the storage seam. The failure hook of `Faults` sees every durable
//! operation before it happens; the power goes at one of them (that operation and everything
//! after it never happen). What was not made durable is then damaged the way a power cut may
//! damage it:
//!
//! - bytes written to a file and not yet fsynced are kept, dropped, torn (cut at a random
//!   length) or zeroed (a random range of them);
//! - a directory entry created, renamed in, or removed since that directory's last sync is
//!   kept or lost (a lost create takes the file, a lost rename puts it back under `.tmp/`, a
//!   lost remove brings the file back).
//!
//! Every crash point of seal, compaction, retirement and checkpoint × `VARIANTS` damage
//! variants (a seeded random choice per endangered item; variant 0 keeps everything) is
//! reopened, and must: open; serve exactly the acknowledged state or the state the
//! operation in flight would have made (nothing that was not committed); verify every
//! digest; and take the next barrier under a name above every numbered file in the tree.
//!
//! CI runs `SERIES_ARCHIVE_POWER_VARIANTS` (default 12) variants per point; the full form is
//! `SERIES_ARCHIVE_POWER_VARIANTS=100 cargo test --release --test power_loss -- --nocapture`.

mod common;

use common::ops::*;
use common::tree::copy_tree;
use common::*;
use series_archive::archive::{Archive, Faults, Op};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The capture stream without the Delta log: this suite's operations are one manifest record
/// each, and with the log on a retirement also rewrites the files that still hold retired
/// groups (a second record). The log's failures and crashes are tests/delta_log.rs's.
fn config() -> series_archive::archive::Config {
    capture_config().delta(false)
}

fn variants() -> u64 {
    std::env::var("SERIES_ARCHIVE_POWER_VARIANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// One durable operation as the hook saw it, before it happened.
#[derive(Clone, Debug)]
struct Event {
    op: Op,
    path: PathBuf,
    /// A file's length before a write to it.
    len_before: u64,
    /// A file's bytes before its removal.
    bytes_before: Option<Vec<u8>>,
}

/// Records every durable operation and cuts the power at the `cut`-th.
struct Recorder {
    events: Mutex<Vec<Event>>,
    cut: Mutex<Option<usize>>,
}

impl Recorder {
    fn new() -> Arc<Recorder> {
        Arc::new(Recorder {
            events: Mutex::new(Vec::new()),
            cut: Mutex::new(None),
        })
    }

    fn faults(self: &Arc<Self>) -> Faults {
        let me = self.clone();
        Faults::failing(move |op, path| {
            let mut events = me.events.lock().expect("lock");
            if *me.cut.lock().expect("lock") == Some(events.len()) || events.len() > 100_000 {
                // The power is gone: this operation and every later one never happen.
                return Some(std::io::Error::other("power cut"));
            }
            events.push(Event {
                op,
                path: path.to_path_buf(),
                len_before: std::fs::metadata(path).map_or(0, |m| m.len()),
                bytes_before: (op == Op::Remove)
                    .then(|| std::fs::read(path).ok())
                    .flatten(),
            });
            None
        })
    }

    fn arm(&self, cut: Option<usize>) {
        self.events.lock().expect("lock").clear();
        *self.cut.lock().expect("lock") = cut;
    }
}

/// A small deterministic generator (SplitMix64), so every variant can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// What `events` (everything that happened before the cut) left endangered, damaged as
/// variant `seed` chooses. Answers how many items were endangered.
fn damage(root: &Path, events: &[Event], seed: u64) -> usize {
    let mut rng = Rng(seed);
    let keep_all = seed == 0;
    let mut endangered = 0;
    // File data: bytes written after the file's last fsync.
    let mut synced_len: std::collections::BTreeMap<&Path, Option<u64>> = Default::default();
    for e in events {
        match e.op {
            Op::Create => {
                synced_len.insert(&e.path, Some(0));
            }
            Op::Write => {
                // The first write since the last fsync sets where the endangered bytes start.
                let slot = synced_len.entry(&e.path).or_insert(None);
                if slot.is_none() {
                    *slot = Some(e.len_before);
                }
            }
            Op::Sync => {
                synced_len.insert(&e.path, None);
            }
            _ => {}
        }
    }
    // Directory entries: created, renamed in or removed after the directory's last sync.
    let mut unsynced_entries: Vec<&Event> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let parent = match e.op {
            Op::Create | Op::Rename | Op::Remove | Op::CreateDir => e.path.parent(),
            _ => None,
        };
        if let Some(parent) = parent {
            let synced_later = events[i + 1..]
                .iter()
                .any(|later| later.op == Op::SyncDir && later.path == parent);
            if !synced_later {
                unsynced_entries.push(e);
            }
        }
    }
    for (path, synced) in synced_len {
        let Some(synced) = synced else { continue };
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        if bytes.len() as u64 <= synced {
            continue;
        }
        endangered += 1;
        if keep_all {
            continue;
        }
        let (lo, hi) = (synced as usize, bytes.len());
        let mut out = bytes.clone();
        match rng.below(4) {
            0 => {}
            1 => out.truncate(lo),
            2 => out.truncate(lo + rng.below((hi - lo) as u64) as usize),
            _ => {
                let a = lo + rng.below((hi - lo) as u64) as usize;
                let b = a + 1 + rng.below((hi - a) as u64) as usize;
                out[a..b.min(hi)].iter_mut().for_each(|x| *x = 0);
            }
        }
        std::fs::write(path, out).expect("damage a file");
    }
    // Undo lost directory operations, newest first.
    for e in unsynced_entries.into_iter().rev() {
        endangered += 1;
        if keep_all || rng.below(2) == 0 {
            continue;
        }
        match e.op {
            Op::Create => {
                let _ = std::fs::remove_file(&e.path);
            }
            Op::Rename => {
                // Every rename in these operations is `.tmp/NAME` → its place.
                if let (Some(name), true) = (e.path.file_name(), e.path.exists()) {
                    let back = root.join(".tmp").join(name);
                    std::fs::create_dir_all(root.join(".tmp")).expect("mkdir .tmp");
                    std::fs::rename(&e.path, back).expect("undo a rename");
                }
            }
            Op::Remove => {
                if let Some(bytes) = &e.bytes_before {
                    std::fs::write(&e.path, bytes).expect("undo a remove");
                }
            }
            Op::CreateDir => {
                let _ = std::fs::remove_dir_all(&e.path);
            }
            _ => {}
        }
    }
    endangered
}

/// Every 12-digit numbered file name anywhere under `root`.
fn names(root: &Path) -> BTreeSet<u64> {
    common::tree::tree(root)
        .keys()
        .filter_map(|p| {
            let file = p.rsplit('/').next()?;
            let digits = file.strip_suffix(".parquet")?;
            (digits.len() == 12).then(|| digits.parse().ok()).flatten()
        })
        .collect()
}

// One test per operation, so the harness's threads share the crash points.
#[test]
fn every_crash_point_of_a_seal_reopens_to_a_committed_state() {
    every_crash_point_under_every_damage_variant("seal", 0, 1);
}

#[test]
fn every_even_crash_point_of_a_compaction_reopens_to_a_committed_state() {
    // A compaction has the most crash points: its even and odd ones are two tests.
    every_crash_point_under_every_damage_variant("compact", 0, 2);
}

#[test]
fn every_odd_crash_point_of_a_compaction_reopens_to_a_committed_state() {
    every_crash_point_under_every_damage_variant("compact", 1, 2);
}

#[test]
fn every_crash_point_of_a_retirement_reopens_to_a_committed_state() {
    every_crash_point_under_every_damage_variant("retire", 0, 1);
}

#[test]
fn every_crash_point_of_a_checkpoint_reopens_to_a_committed_state() {
    every_crash_point_under_every_damage_variant("checkpoint", 0, 1);
}

#[test]
fn every_operation_has_its_crash_test() {
    let names: Vec<&str> = operations().iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["seal", "compact", "retire", "checkpoint"]);
}

/// Every crash point `cut` of operation `only` with `cut % parts == part`.
fn every_crash_point_under_every_damage_variant(only: &str, part: usize, parts: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pristine = dir.path().join("base");
    base(&pristine);
    let before = served(&Archive::open(&pristine, config()).expect("open"));
    let (mut cases, mut endangered_total) = (0u64, 0usize);
    let mut ran = false;
    for (name, operation) in operations() {
        if name != only {
            continue;
        }
        ran = true;
        let clean = dir.path().join(format!("{name}-clean"));
        copy_tree(&pristine, &clean);
        let recorder = Recorder::new();
        let mut archive = Archive::open(&clean, config().faults(recorder.faults())).expect("open");
        recorder.arm(None);
        operation(&mut archive).expect("a clean run completes");
        let points = recorder.events.lock().expect("lock").len();
        let after = served(&archive);
        drop(archive);

        for cut in (0..=points).filter(|cut| cut % parts == part) {
            // The crash tree: everything before the cut happened, nothing after.
            let crashed = dir.path().join(format!("{name}-cut-{cut}"));
            copy_tree(&pristine, &crashed);
            let recorder = Recorder::new();
            let mut archive =
                Archive::open(&crashed, config().faults(recorder.faults())).expect("open");
            recorder.arm(Some(cut));
            let outcome = operation(&mut archive);
            let events = recorder.events.lock().expect("lock").clone();
            drop(archive);
            assert!(
                cut == points || outcome.is_err(),
                "{name}: the cut at {cut} of {points} stops the operation"
            );
            for variant in 0..variants() {
                let what = format!("{name}: power cut at durable operation {cut} of {points}, damage variant {variant}");
                let root = dir.path().join("variant");
                let _ = std::fs::remove_dir_all(&root);
                copy_tree(&crashed, &root);
                // The recorded paths are the crash tree's; damage the copy's.
                let moved: Vec<Event> = events
                    .iter()
                    .map(|e| Event {
                        path: root.join(e.path.strip_prefix(&crashed).unwrap_or(&e.path)),
                        ..e.clone()
                    })
                    .collect();
                endangered_total += damage(&root, &moved, variant * 7919 + cut as u64 + 1);
                let held = names(&root);
                let mut archive = Archive::open(&root, config())
                    .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                let now = served(&archive);
                assert!(
                    now == before || now == after,
                    "{what}: served neither the acknowledged state nor the one in flight"
                );
                assert!(
                    archive.verify(|_, _| {}).is_empty(),
                    "{what}: every digest verifies"
                );
                stage(&mut archive, BASE_BARRIERS + 1);
                let report = archive
                    .seal_all()
                    .unwrap_or_else(|e| panic!("{what}: the next barrier: {e}"))
                    .expect("a barrier");
                let claimed: u64 = report.streams[0]
                    .file
                    .rsplit('/')
                    .next()
                    .and_then(|f| f.strip_suffix(".parquet"))
                    .and_then(|d| d.parse().ok())
                    .expect("a numbered file");
                assert!(
                    held.iter().all(|&n| n < claimed),
                    "{what}: claimed {claimed}, at or below a name the tree held ({held:?})"
                );
                cases += 1;
            }
            let _ = std::fs::remove_dir_all(&crashed);
        }
    }
    assert!(ran, "no operation is named {only:?}");
    eprintln!(
        "{only}: {cases} crash × damage cases ({} variants per point; {endangered_total} endangered writes and directory entries damaged or kept), each reopened to a committed state",
        variants()
    );
}
