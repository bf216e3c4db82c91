//! Hardening, as a user runs the real binary: a manifest damaged mid-log is never a quiet
//! short answer, bad names and inputs are refused before anything is written, and output
//! never lands on the archive or on a file that exists; repair restores what the manifest lost,
//! level partials, deferred barriers and all.

#[path = "common/process.rs"]
mod process;
#[path = "common/tree.rs"]
mod tree;

use process::{run, scratch, Out};
use series_archive::archive::MAX_STORED;
use std::path::{Path, PathBuf};
use tree::{copy_tree, listing, tree};

/// A CSV of `ticks` rows per track over 2 runs × 2 probes.
fn csv(dir: &Path, ticks: u64) -> PathBuf {
    let mut text = String::from("run,probe,ordinal,value\n");
    for t in 0..ticks {
        for r in 0..2 {
            for p in 0..2 {
                text.push_str(&format!("run_{r},p{p},{t},{}\n", t as i64 * 3 - r * 7 + p));
            }
        }
    }
    let path = dir.join("rows.csv");
    std::fs::write(&path, text).expect("write csv");
    path
}

/// An archive of several barriers, ingested by the binary.
fn archive(dir: &Path) -> PathBuf {
    let root = dir.join("archive");
    let input = csv(dir, 200);
    let out = run(
        "ingest",
        &root,
        &[
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
            "--seal-rows",
            "100",
            // Barrier records only: the tests below count records, and the automatic
            // compaction would add its own.
            "--no-compact",
            input.to_str().expect("utf-8 path"),
        ],
    );
    let out = out.expect(0, "ingest");
    assert!(out.stdout.contains("barrier 8"), "{}", out.stdout);
    root
}

/// The current manifest generation and the byte spans of its records, read from the
/// documented frame (`docs/format.md`: 16-byte header, payload length at bytes 8..12).
fn records(root: &Path) -> (PathBuf, Vec<(usize, usize)>) {
    let dir = root.join("manifest");
    let mut gens: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("manifest dir")
        .map(|e| e.expect("entry").path())
        .collect();
    gens.sort();
    let path = gens.pop().expect("a generation");
    let bytes = std::fs::read(&path).expect("read manifest");
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        assert_eq!(&bytes[at..at + 4], b"SAmr", "a record starts at {at}");
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        spans.push((at, at + 16 + len));
        at += 16 + len;
    }
    (path, spans)
}

/// The archive's files, without the writable open's `LOCK` (which holds no data).
fn data(root: &Path) -> tree::Tree {
    let mut files = tree(root);
    files.remove("LOCK");
    files
}

/// Asserts that `what` left every file of the archive byte for byte as `before` holds it.
fn unchanged(before: &tree::Tree, root: &Path, what: &str) {
    let after = data(root);
    assert_eq!(
        listing(before),
        listing(&after),
        "{what} changed the archive"
    );
    assert!(*before == after, "{what} changed a byte of the archive");
}

fn flip(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= 0x10;
    std::fs::write(path, bytes).expect("write");
}

/// Every read of an archive whose manifest is damaged mid-log refuses (exit 3) or reports
/// damage (`verify`, exit 4); none answers from the trusted prefix as if it were whole, and
/// none modifies the archive. Before the fix, `verify` printed "ok: 0 file(s)" and `rows`
/// printed a header only, both exiting 0.
#[test]
fn a_manifest_damaged_mid_log_is_refused_never_served_short() {
    let dir = scratch("hardening-damaged");
    let pristine = archive(dir.path());
    let (_, spans) = records(&pristine);
    // Record 0 is the snapshot, 1 the declaration, then one barrier record each.
    assert!(spans.len() >= 10, "{} records", spans.len());
    let cases = [
        ("the declaration", 1),
        ("a middle barrier", spans.len() / 2),
        ("the second-to-last barrier", spans.len() - 2),
    ];
    for (what, record) in cases {
        let root = dir.path().join(format!("case-{record}"));
        copy_tree(&pristine, &root);
        let (path, spans) = records(&root);
        let (start, end) = spans[record];
        flip(&path, (start + end) / 2);
        let before = data(&root);

        let inspect = run("inspect", &root, &[]).expect(0, "inspect");
        assert!(
            inspect.stdout.contains("DAMAGED at byte"),
            "{what}: inspect names the damage:\n{}",
            inspect.stdout
        );
        let verify = run("verify", &root, &[]).expect(4, what);
        assert!(
            verify.stdout.contains("DAMAGED manifest"),
            "{what}: verify names the manifest:\n{}",
            verify.stdout
        );
        let rows = run("rows", &root, &["--stream", "capture"]).expect(3, what);
        assert!(
            rows.stderr.contains("manifest is damaged at byte")
                && !rows.stderr.contains("records no stream"),
            "{what}: rows says why, not that the stream is missing:\n{}",
            rows.stderr
        );
        assert!(rows.stdout.is_empty(), "{what}: no header, no rows");
        for args in [
            vec!["--stream", "capture", "--aggregate", "count"],
            vec!["--stream", "capture", "--aggregate", "p95"],
        ] {
            run("fold", &root, &args).expect(3, what);
        }
        run("survey", &root, &["--stream", "capture", "--budget", "400"]).expect(3, what);
        run("files", &root, &["--stream", "capture"]).expect(3, what);
        // A writable open refuses too (it would have to drop committed barriers).
        let ingest = run(
            "ingest",
            &root,
            &[
                "--stream",
                "capture",
                "--track",
                "run,probe",
                "--axis",
                "ordinal",
                csv(dir.path(), 1).to_str().expect("utf-8"),
            ],
        );
        assert_eq!(ingest.code, 1, "{what}: {}", ingest.stderr);
        assert!(ingest.stderr.contains("damaged"), "{}", ingest.stderr);
        unchanged(&before, &root, &format!("{what}: the refusals"));
    }
    // The pristine archive verifies and reads whole: the refusals above are the damage's.
    let ok = run("verify", &pristine, &[]).expect(0, "pristine verify");
    assert!(ok.stdout.contains("ok: "), "{}", ok.stdout);
    let rows = run("rows", &pristine, &["--stream", "capture"]).expect(0, "pristine rows");
    assert_eq!(rows.stdout.lines().count(), 1 + 800);
}

/// A manifest that cannot be read at all is damage for `verify` (exit 4), not an error.
#[test]
fn verify_reports_an_unreadable_manifest_as_damage() {
    let dir = scratch("hardening-unreadable");
    let root = archive(dir.path());
    let (path, spans) = records(&root);
    // Damage the snapshot: the generation holds no valid start.
    flip(&path, spans[0].0 + 20);
    let verify = run("verify", &root, &[]).expect(4, "verify");
    assert!(verify.stdout.contains("DAMAGED"), "{}", verify.stdout);
}

/// `ingest` into ARCHIVE with `extra` flags and one input file.
fn ingest(root: &Path, stream: &str, extra: &[&str], input: &Path) -> Out {
    let mut args = vec![
        "--stream",
        stream,
        "--track",
        "run,probe",
        "--axis",
        "ordinal",
    ];
    args.extend_from_slice(extra);
    args.push(input.to_str().expect("utf-8 path"));
    run("ingest", root, &args)
}

/// A stream id longer than a file name may be is refused before anything is written: no
/// declaration is recorded, no `.tmp/` file is left, and a retry fails the same way.
#[test]
fn an_overlong_stream_id_is_refused_before_anything_is_written() {
    let dir = scratch("hardening-long-id");
    let root = archive(dir.path());
    let before = data(&root);
    let input = csv(dir.path(), 3);
    let long = "a".repeat(256);
    for attempt in 0..2 {
        let out = ingest(&root, &long, &[], &input).expect(1, "an overlong id");
        assert!(
            out.stderr.contains("at most 255 bytes") && out.stderr.contains("256 bytes"),
            "attempt {attempt}: {}",
            out.stderr
        );
        unchanged(&before, &root, &format!("attempt {attempt}"));
    }
    // 255 bytes is a valid id: it ingests and reads back.
    let longest = "b".repeat(255);
    ingest(&root, &longest, &[], &input).expect(0, "a 255-byte id");
    let rows = run("rows", &root, &["--stream", &longest]).expect(0, "rows");
    assert_eq!(rows.stdout.lines().count(), 1 + 12);
}

/// A column named twice is refused naming it (CSV header, and a key repeated inside one JSON
/// object), and nothing is written.
#[test]
fn a_duplicate_column_is_refused_naming_it() {
    let dir = scratch("hardening-dup");
    let root = dir.path().join("archive");
    let csv_path = dir.path().join("dup.csv");
    std::fs::write(
        &csv_path,
        "run,probe,ordinal,value,value\nrun_0,p0,1,5,6\nrun_0,p0,2,7,8\n",
    )
    .expect("write");
    let out = ingest(&root, "capture", &[], &csv_path).expect(1, "duplicate CSV column");
    assert!(
        out.stderr.contains("column \"value\" appears twice"),
        "{}",
        out.stderr
    );
    assert!(!root.exists(), "a refused first file creates no archive");
    let json_path = dir.path().join("dup.jsonl");
    std::fs::write(
        &json_path,
        "{\"run\":\"run_0\",\"probe\":\"p0\",\"ordinal\":1,\"value\":1}\n{\"run\":\"run_0\",\"probe\":\"p0\",\"ordinal\":2,\"value\":1,\"value\":2}\n",
    )
    .expect("write");
    let out = ingest(&root, "capture", &[], &json_path).expect(1, "duplicate JSON key");
    assert!(
        out.stderr.contains("column \"value\" appears twice")
            && out.stderr.contains("row 1 (line 2)"),
        "{}",
        out.stderr
    );
    assert!(!root.exists(), "a refused first file creates no archive");
}

/// `rows --out` never writes inside the archive and never replaces a file without --force.
#[test]
fn rows_out_refuses_the_archive_and_existing_files() {
    let dir = scratch("hardening-out");
    let root = archive(dir.path());
    let before = tree(&root);
    let (generation, _) = records(&root);
    for target in [
        generation.clone(),
        root.join("streams/capture/rows/new.csv"),
        root.join("manifest/../streams/x.csv"),
    ] {
        let out = run(
            "rows",
            &root,
            &[
                "--stream",
                "capture",
                "--out",
                target.to_str().expect("utf-8"),
                "--force",
            ],
        )
        .expect(1, "output inside the archive");
        assert!(out.stderr.contains("inside the archive"), "{}", out.stderr);
    }
    assert!(before == tree(&root), "nothing inside the archive changed");
    let existing = dir.path().join("existing.csv");
    std::fs::write(&existing, "keep me").expect("write");
    let out = run(
        "rows",
        &root,
        &[
            "--stream",
            "capture",
            "--out",
            existing.to_str().expect("utf-8"),
        ],
    )
    .expect(1, "existing file");
    assert!(out.stderr.contains("--force"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&existing).expect("read"), "keep me");
    run(
        "rows",
        &root,
        &[
            "--stream",
            "capture",
            "--out",
            existing.to_str().expect("utf-8"),
            "--force",
        ],
    )
    .expect(0, "--force replaces");
    assert_eq!(
        std::fs::read_to_string(&existing)
            .expect("read")
            .lines()
            .count(),
        1 + 800
    );
}

/// The highest storable position, 2^63 - 1 (files store positions as Int64 since format
/// version 5), is reserved (automatic positions after it could never be appended), a larger
/// one is refused as unstorable, and automatic positions that would reach the reserved one
/// are refused too; the archive stays appendable.
#[test]
fn the_last_position_is_reserved_and_automatic_positions_never_wrap() {
    let dir = scratch("hardening-max");
    let root = dir.path().join("archive");
    let path = dir.path().join("max.csv");
    let max = MAX_STORED.to_string();
    std::fs::write(
        &path,
        format!("run,probe,ordinal,value,pos\nrun_0,p0,1,5,7\nrun_0,p0,2,6,{max}\n"),
    )
    .expect("write");
    let out = ingest(&root, "capture", &["--position", "pos"], &path).expect(1, "2^63 - 1");
    assert!(out.stderr.contains("reserved"), "{}", out.stderr);
    std::fs::write(
        &path,
        format!(
            "run,probe,ordinal,value,pos\nrun_0,p0,1,5,7\nrun_0,p0,2,6,{}\n",
            u64::MAX
        ),
    )
    .expect("write");
    let out = ingest(&root, "capture", &["--position", "pos"], &path).expect(1, "u64::MAX");
    assert!(
        out.stderr.contains("line 3") && out.stderr.contains("largest integer the archive stores"),
        "{}",
        out.stderr
    );
    let near = MAX_STORED - 2;
    std::fs::write(
        &path,
        format!("run,probe,ordinal,value,pos\nrun_0,p0,1,5,{near}\n"),
    )
    .expect("write");
    ingest(&root, "capture", &["--position", "pos"], &path).expect(0, "the last but two");
    // Two more automatic positions would end on the reserved one: refused, nothing written.
    let before = data(&root);
    std::fs::write(
        &path,
        "run,probe,ordinal,value\nrun_0,p0,2,5\nrun_0,p0,3,6\n",
    )
    .expect("write");
    let out = ingest(&root, "capture", &[], &path).expect(1, "wrapping automatic positions");
    assert!(
        out.stderr.contains("automatic positions would pass"),
        "{}",
        out.stderr
    );
    unchanged(&before, &root, "wrapping automatic positions");
    // One more fits, and the stream is still appendable with explicit positions.
    std::fs::write(&path, "run,probe,ordinal,value\nrun_0,p0,2,5\n").expect("write");
    ingest(&root, "capture", &[], &path).expect(0, "the last automatic position");
    let rows = run("rows", &root, &["--stream", "capture"]).expect(0, "rows");
    assert!(
        rows.stdout.contains(&(MAX_STORED - 1).to_string()),
        "{}",
        rows.stdout
    );
}

/// `repair` shows what it would lose and changes nothing; `repair --yes` starts a new
/// generation from the trusted prefix, keeps the damaged generation and the lost barriers'
/// files in quarantine byte for byte, deletes nothing, and leaves an archive that verifies,
/// serves exactly the trusted barriers and takes new ones. `quarantine` lists and purges.
#[test]
fn repair_keeps_the_evidence_and_starts_from_the_trusted_prefix() {
    let dir = scratch("hardening-repair");
    let root = archive(dir.path());
    let (path, spans) = records(&root);
    // Records: snapshot, declare, barriers 1..8. Damage barrier 5 (record 6).
    let (start, end) = spans[6];
    flip(&path, (start + end) / 2);
    let damaged_manifest = std::fs::read(&path).expect("read");
    let before = tree(&root);

    let plan = run("repair", &root, &[]).expect(0, "repair without --yes");
    assert!(
        plan.stdout.contains("nothing was changed"),
        "{}",
        plan.stdout
    );
    for lost in ["barrier 6:", "barrier 7:", "barrier 8:"] {
        assert!(
            plan.stdout.contains(lost),
            "{lost} listed:\n{}",
            plan.stdout
        );
    }
    assert!(!plan.stdout.contains("barrier 4:"), "{}", plan.stdout);
    assert!(
        plan.stdout.contains("restored into the new generation (4)"),
        "{}",
        plan.stdout
    );
    assert!(before == tree(&root), "a plan changes nothing");

    let done = run("repair", &root, &["--yes"]).expect(0, "repair --yes");
    assert!(
        done.stdout.contains("repaired: manifest generation 2"),
        "{}",
        done.stdout
    );
    // Nothing deleted: every file that was there is there, or kept in quarantine, byte for byte.
    let after = tree(&root);
    for (file, bytes) in before.iter().filter_map(|(f, b)| Some((f, b.as_ref()?))) {
        let kept = after.get(file).cloned().flatten().or_else(|| {
            after
                .iter()
                .find(|(p, _)| p.starts_with(".quarantine/") && p.ends_with(file.as_str()))
                .and_then(|(_, b)| b.clone())
        });
        assert_eq!(kept.as_ref(), Some(bytes), "{file} kept byte for byte");
    }
    assert!(
        after.iter().any(|(p, b)| p.starts_with(".quarantine/")
            && p.ends_with("gen-000000000001.log")
            && b.as_deref() == Some(&damaged_manifest[..])),
        "the damaged generation is kept whole:\n{}",
        listing(&after)
    );
    run("verify", &root, &[]).expect(0, "verify after repair");
    let rows = run("rows", &root, &["--stream", "capture"]).expect(0, "rows after repair");
    // Barriers 5..8 are restored from their files, which prove themselves (encoded again
    // byte for byte): every acknowledged row is back.
    assert!(
        done.stdout.contains("4 restored barrier(s)"),
        "{}",
        done.stdout
    );
    assert_eq!(
        rows.stdout.lines().count(),
        1 + 8 * 100,
        "barriers 1..4 kept, 5..8 restored, of 100 rows each"
    );
    let inspect = run("inspect", &root, &[]).expect(0, "inspect");
    assert!(!inspect.stdout.contains("DAMAGED"), "{}", inspect.stdout);
    // The archive takes new barriers, named above everything quarantined.
    let later = dir.path().join("later.csv");
    std::fs::write(
        &later,
        "run,probe,ordinal,value\nrun_0,p0,1000,1\nrun_1,p1,1000,2\n",
    )
    .expect("write");
    ingest(&root, "capture", &[], &later).expect(0, "ingest after repair");
    let files = run("files", &root, &["--stream", "capture"]).expect(0, "files");
    let newest = files.stdout.lines().last().expect("a file").to_owned();
    assert!(newest.ends_with("000000000017.parquet"), "{newest}");
    run("repair", &root, &[]).expect(0, "nothing left to repair");

    let listed = run("quarantine", &root, &[]).expect(0, "quarantine");
    assert!(
        listed.stdout.contains("gen-000000000001.log"),
        "{}",
        listed.stdout
    );
    let kept = run("quarantine", &root, &["--purge-older-than", "1h"]).expect(0, "purge none");
    assert!(kept.stdout.contains("purged 0"), "{}", kept.stdout);
    assert!(tree(&root)
        .keys()
        .any(|p| p.ends_with("gen-000000000001.log")));
    run("quarantine", &root, &["--purge-older-than", "0s"]).expect(0, "purge all");
    let listed = run("quarantine", &root, &[]).expect(0, "quarantine");
    assert!(
        listed.stdout.contains("quarantine: empty"),
        "{}",
        listed.stdout
    );
    run("verify", &root, &[]).expect(0, "verify after purge");
    run("quarantine", &root, &["--purge-older-than", "soon"]).expect(2, "a bad age");
}

/// The highest storable axis value, 2^63 - 1, is reserved (every reported span is
/// half-open, and its end must exist), so a fold's span always contains every row it counted; integer sums are exact
/// while they stay within ±2^53 (they fold in f64, as documented), and round beyond.
#[test]
fn spans_contain_what_they_count_and_integer_sums_are_exact_within_2_pow_53() {
    let dir = scratch("hardening-span");
    let root = dir.path().join("archive");
    let path = dir.path().join("edge.csv");
    let max = MAX_STORED;
    std::fs::write(
        &path,
        format!("run,probe,ordinal,value\nrun_0,p0,5,1\nrun_0,p0,{max},2\n"),
    )
    .expect("write");
    let out = ingest(&root, "capture", &[], &path).expect(1, "axis 2^63 - 1");
    assert!(
        out.stderr.contains("reserved") && out.stderr.contains("ordinal"),
        "{}",
        out.stderr
    );
    let top = MAX_STORED - 1;
    let two_53 = 1u64 << 53;
    std::fs::write(
        &path,
        format!(
            "run,probe,ordinal,value\nrun_0,p0,5,{}\nrun_0,p0,{top},3\nrun_1,p0,5,{two_53}\nrun_1,p0,6,1\n",
            1u64 << 52
        ),
    )
    .expect("write");
    ingest(&root, "capture", &[], &path).expect(0, "the highest axis");
    for aggregate in ["count", "p100"] {
        let out = run(
            "fold",
            &root,
            &[
                "--stream",
                "capture",
                "--track",
                "run_0",
                "--aggregate",
                aggregate,
                "--json",
            ],
        )
        .expect(0, aggregate);
        let answer: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        let span = answer["span"].as_array().expect("a span");
        let to = span[1].as_u64().expect("u64");
        assert!(
            to > top,
            "{aggregate}: span {span:?} contains the row at {top}"
        );
        assert_eq!(answer["answers"][0]["count"], 2, "{}", out.stdout);
    }
    let sum = |track: &str| -> f64 {
        let out = run(
            "fold",
            &root,
            &[
                "--stream",
                "capture",
                "--track",
                track,
                "--aggregate",
                "sum",
                "--json",
            ],
        )
        .expect(0, "sum");
        let answer: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        answer["answers"][0]["value"].as_f64().expect("a number")
    };
    // 2^52 + 3 is exact; 2^53 + 1 is not representable and rounds to 2^53.
    assert_eq!(sum("run_0"), ((1u64 << 52) + 3) as f64);
    assert_eq!(sum("run_0") as u64, (1u64 << 52) + 3);
    assert_eq!(
        sum("run_1") as u64,
        two_53,
        "documented: beyond 2^53 a sum rounds"
    );
}

/// A fleet's CSV: 20 runs × 25 probes (500 tracks), ticks `from..to` 100,000 axis units
/// apart, every tick's rows in key order as a scraper delivers them.
fn fleet_csv(path: &Path, ticks: std::ops::Range<u64>) {
    let mut text = String::from("run,probe,ordinal,value\n");
    for t in ticks {
        for r in 0..20 {
            for p in 0..25 {
                let value = r as i64 * 100 + p - t as i64;
                text.push_str(&format!("run_{r},p{p},{},{value}\n", t * 100_000));
            }
        }
    }
    std::fs::write(path, text).expect("write csv");
}

/// Repair restores lost barriers of every kind a fleet writes, after a levels summary: ones
/// that wrote level partials and ones that deferred them (format version 8). Each proves
/// itself byte for byte, and the repaired archive serves exactly what the writer
/// acknowledged: every row and the same survey, its deferred rows folded from the raw rows
/// as before the damage.
#[test]
fn repair_restores_partial_and_deferred_barriers_after_a_levels_summary() {
    let dir = scratch("hardening-repair-summary");
    let root = dir.path().join("archive");
    let ingest_ticks = |ticks: std::ops::Range<u64>, seal: &str, name: &str| {
        let input = dir.path().join(name);
        fleet_csv(&input, ticks);
        ingest(
            &root,
            "capture",
            &["--seal-rows", seal, "--no-compact"],
            &input,
        )
        .expect(0, name);
    };
    let deferred = |what: &str| {
        let inspect = run("inspect", &root, &[]).expect(0, "inspect");
        inspect
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("deferred"))
            .map(|l| l.to_owned())
            .unwrap_or_else(|| panic!("{what}: no deferred rows\n{}", inspect.stdout))
    };
    // Twenty barriers of 5,000 rows, ten a track in a barrier: too few a cell, deferred.
    ingest_ticks(0..200, "5000", "a.csv");
    assert!(deferred("after a.csv").contains("from _seq 0 on"));
    // The compaction summarises them (200 rows a track are worth their three cells).
    run("compact", &root, &[]).expect(0, "compact");
    // A new generation from here (the barriers' records are a few hundred bytes each since
    // format 11, so the compaction's own checkpoint rule may find none due).
    run("checkpoint", &root, &[]).expect(0, "checkpoint");
    let inspect = run("inspect", &root, &[]).expect(0, "inspect");
    assert!(!inspect.stdout.contains("deferred"), "{}", inspect.stdout);
    // Then four small barriers, which write their partials, and two that defer again.
    ingest_ticks(200..208, "1000", "b.csv");
    ingest_ticks(208..228, "5000", "c.csv");
    assert!(deferred("after c.csv").contains("from _seq 104000 on"));
    let rows = run("rows", &root, &["--stream", "capture"]).expect(0, "rows");
    assert_eq!(rows.stdout.lines().count(), 1 + 228 * 500);
    let survey_args = ["--stream", "capture", "--budget", "400", "--json"];
    let survey = run("survey", &root, &survey_args).expect(0, "survey");

    // The checkpoint after the compaction started this generation: its snapshot, then
    // barriers 21 to 26. Damage barrier 22's record: barriers 22 to 26 are lost to the manifest.
    let (path, spans) = records(&root);
    assert_eq!(spans.len(), 7, "a snapshot and six barriers");
    let (start, end) = spans[2];
    flip(&path, (start + end) / 2);
    run("rows", &root, &["--stream", "capture"]).expect(3, "rows of the damaged archive");
    let done = run("repair", &root, &["--yes"]).expect(0, "repair --yes");
    assert!(
        done.stdout.contains("5 restored barrier(s)"),
        "{}",
        done.stdout
    );
    for (barrier, partials) in [(22, true), (24, true), (25, false), (26, false)] {
        let line = done
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("barrier {barrier}:")))
            .unwrap_or_else(|| panic!("barrier {barrier} restored:\n{}", done.stdout));
        assert_eq!(line.contains("/levels/"), partials, "{line}");
    }
    run("verify", &root, &[]).expect(0, "verify after repair");
    assert!(deferred("after repair").contains("from _seq 104000 on"));
    let after = run("rows", &root, &["--stream", "capture"]).expect(0, "rows after repair");
    assert!(
        after.stdout == rows.stdout,
        "every acknowledged row is back, in order"
    );
    let again = run("survey", &root, &survey_args).expect(0, "survey after repair");
    assert_eq!(again.stdout, survey.stdout);
}
