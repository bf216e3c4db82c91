//! The decoders fuzzed: the manifest frame, records and replay, the snapshot, the track key,
//! and a read-only open, over arbitrary bytes and over real manifests damaged at random.
//! Each property must never panic: a decoder answers a value or an error, nothing else.
//!
//! CI runs a bounded form. The full form (at least 10⁶ cases in all) is
//! `SERIES_ARCHIVE_FUZZ_CASES=200000 cargo test --release --test fuzz_decoders -- --nocapture`:
//! five properties × 200 000 cases.

mod common;

use common::{batch, capture_config, workload};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{log, Record, State};
use series_archive::archive::{Archive, Config};
use series_archive::TrackKey;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Cases per property: `SERIES_ARCHIVE_FUZZ_CASES`, or a bound that keeps CI short.
fn cases() -> u32 {
    std::env::var("SERIES_ARCHIVE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000)
}

fn runner() -> TestRunner {
    TestRunner::new(RunnerConfig {
        cases: cases(),
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

/// A real archive's current generation: a snapshot, a declaration and barrier records,
/// including lifecycle (version 2) records.
struct Real {
    _dir: tempfile::TempDir,
    generation: u64,
    bytes: Vec<u8>,
    /// Each record's version and payload.
    records: Vec<(u16, Vec<u8>)>,
}

fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("archive");
        let mut archive = Archive::open(&root, capture_config()).expect("open");
        // Sixteen rows a track a barrier: files recorded as columns (format 9), whose
        // compaction below needs no checkpoint, so the generation keeps its lifecycle records.
        for b in 0..6 {
            let (rows, positions) = workload(2, 2, 16, b * 16);
            archive
                .stage_batch("capture", &batch(&rows), &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
        }
        archive
            .retire_track("capture", &["run_0".to_owned()])
            .expect("retire");
        archive.compact(true, |_, _, _| {}).expect("compact");
        // Two barriers of a few rows a track: files recorded by their row groups (format 11).
        for b in 6..8 {
            let (rows, positions) = workload(2, 2, 3, 96 + (b - 6) * 3);
            archive
                .stage_batch("capture", &batch(&rows), &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
        }
        let generation = archive.state().generation;
        drop(archive);
        let path = root.join("manifest").join(log::generation_name(generation));
        let bytes = std::fs::read(&path).expect("read manifest");
        let mut records = Vec::new();
        let mut at = 0;
        while let Decoded::Record { payload, next } = frame::decode(&bytes, at) {
            let version = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
            records.push((version, payload.to_vec()));
            at = next;
        }
        assert_eq!(at, bytes.len(), "the real manifest replays whole");
        assert!(records.len() >= 8, "{} records", records.len());
        Real {
            _dir: dir,
            generation,
            bytes,
            records,
        }
    })
}

/// A scratch file per thread, rewritten for each case.
fn scratch_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write scratch");
    path
}

/// Applies `(offset, xor)` flips, then cuts at `cut` (a fraction of the length).
fn damage(bytes: &[u8], flips: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if !out.is_empty() {
        for &(at, x) in flips {
            let i = at % out.len();
            out[i] ^= x;
        }
    }
    if let Some(cut) = cut {
        out.truncate(cut % (out.len() + 1));
    }
    out
}

#[test]
fn frames_decode_arbitrary_bytes_without_panicking() {
    runner()
        .run(
            &(prop::collection::vec(any::<u8>(), 0..256), any::<usize>()),
            |(bytes, at)| {
                let at = at % (bytes.len() + 1);
                match frame::decode(&bytes, at) {
                    Decoded::Record { payload, next } => {
                        prop_assert!(next <= bytes.len() && payload.len() <= next - at);
                    }
                    Decoded::UnknownVersion(_) | Decoded::Failed | Decoded::End => {}
                }
                let found = frame::valid_records_after(&bytes, at);
                prop_assert!(found.iter().all(|&p| p > at && p < bytes.len()));
                // A framed payload always decodes back to itself.
                let framed = frame::encode(&bytes);
                prop_assert_eq!(
                    frame::decode(&framed, 0),
                    Decoded::Record {
                        payload: &bytes[..],
                        next: framed.len()
                    }
                );
                Ok(())
            },
        )
        .expect("no panic, and framing round-trips");
}

#[test]
fn replay_survives_a_real_manifest_damaged_at_random() {
    let real = real();
    let dir = tempfile::tempdir().expect("tempdir");
    let len = real.bytes.len();
    runner()
        .run(
            &(
                prop::collection::vec((0..len, 1u8..=255), 0..4),
                prop::option::of(0..len + 1),
            ),
            |(flips, cut)| {
                let damaged = damage(&real.bytes, &flips, cut);
                let path = scratch_file(dir.path(), "gen.log", &damaged);
                // Either a trusted prefix with how the log ended, or a clear error.
                if let Ok(replayed) = log::replay(&path, real.generation) {
                    prop_assert!(replayed.trusted_len as usize <= damaged.len());
                    prop_assert!(replayed.records >= 1);
                }
                Ok(())
            },
        )
        .expect("replay never panics");
}

#[test]
fn records_that_pass_their_check_but_lie_are_refused_not_panicked_on() {
    let real = real();
    let dir = tempfile::tempdir().expect("tempdir");
    let n = real.records.len();
    runner()
        .run(
            &(
                0..n,
                prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
                any::<bool>(),
            ),
            |(which, flips, digits_only)| {
                // Re-frame one mutated payload with a valid checksum: the JSON decoder and
                // the state's invariants, not the CRC, must stand.
                let mut log_bytes = Vec::new();
                for (i, (version, payload)) in real.records.iter().enumerate() {
                    let payload = if i == which {
                        let mut p = payload.clone();
                        for &(at, x) in &flips {
                            let k = at % p.len();
                            if digits_only && p[k].is_ascii_digit() {
                                // Keep the JSON well-formed, change a number.
                                p[k] = b'0' + (p[k] - b'0' + x % 10) % 10;
                            } else if !digits_only {
                                p[k] ^= x;
                            }
                        }
                        p
                    } else {
                        payload.clone()
                    };
                    log_bytes.extend(frame::encode_version(*version, &payload));
                }
                let path = scratch_file(dir.path(), "gen.log", &log_bytes);
                let _ = log::replay(&path, real.generation);
                // And the decoded record on a fresh state and on the trusted state.
                if let Decoded::Record { payload, .. } = frame::decode(&log_bytes, 0) {
                    if let Ok(record) = serde_json::from_slice::<Record>(payload) {
                        let _ = State::default().apply(&record);
                    }
                }
                Ok(())
            },
        )
        .expect("a lying record is an error, never a panic");
}

#[test]
fn track_keys_encode_or_refuse_and_round_trip() {
    runner()
        .run(&prop::collection::vec(any::<String>(), 0..6), |labels| {
            match TrackKey::encode(&labels) {
                Ok(key) => {
                    prop_assert!(labels.len() <= 4);
                    prop_assert_eq!(
                        key.labels(),
                        labels.iter().map(String::as_str).collect::<Vec<_>>()
                    );
                    prop_assert_eq!(key.depth(), labels.len());
                    if let Some(upper) = key.upper() {
                        prop_assert!(key < upper);
                    }
                }
                Err(_) => prop_assert!(
                    labels.len() > 4 || labels.iter().any(|l| l.chars().any(char::is_control))
                ),
            }
            Ok(())
        })
        .expect("encode never panics");
}

#[test]
fn a_read_only_open_over_arbitrary_manifest_bytes_never_panics() {
    let real = real();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    std::fs::create_dir_all(root.join("manifest")).expect("mkdir");
    let name = log::generation_name(real.generation);
    let len = real.bytes.len();
    runner()
        .run(
            &prop_oneof![
                prop::collection::vec(any::<u8>(), 0..512).prop_map(Err),
                (prop::collection::vec((0..len, 1u8..=255), 1..3)).prop_map(Ok),
            ],
            |input| {
                let bytes = match input {
                    Err(random) => random,
                    Ok(flips) => damage(&real.bytes, &flips, None),
                };
                scratch_file(&root.join("manifest"), &name, &bytes);
                if let Ok(archive) = Archive::open(&root, Config::new().read_only(true)) {
                    // Whatever it holds, a read answers or refuses.
                    for stream in archive.state().streams.keys() {
                        let _ = archive.read_rows(
                            stream,
                            &[],
                            std::ops::Bound::Unbounded,
                            std::ops::Bound::Unbounded,
                        );
                    }
                }
                Ok(())
            },
        )
        .expect("open never panics");
}
