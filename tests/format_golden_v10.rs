//! Format version 10: a file entry of many entries is recorded paged (`docs/format.md`,
//! "Version 10"), so a scoped replay reads the pages of its selection and skips the others.
//!
//! - `tests/golden/barrier-v10.{bin,jsonl}`: the version-9 docs' file paged two entries a
//!   page, framed byte for byte as `manifest::log::encode_paged` writes it, as frame version
//!   10; its index is the docs' example, and it decodes back into exactly the entries.
//! - `log::encode` pages exactly the entries of more than `PAGE_ENTRIES`.
//! - A scoped decode reads only the pages that meet its selection, and keeps every entry
//!   beneath it; a whole decode reads them all.
//! - An index or a page that lies is refused, naming the file and the page.
//! - Every prefix of a paged record at the tail is a torn append, never damage.
//! - An archive of 2,000 tracks a barrier: barriers and the checkpoint framed as version 10,
//!   scoped opens answer exactly as whole ones, and the docs' Python reader lists the slices.
//! - `tests/fixtures/archive-v10/`: an archive this version wrote (600 tracks; barriers and a
//!   compaction paged), frozen, which every later build must open and serve exactly.
//!   Rewritten only for a deliberate format change:
//!   `SERIES_ARCHIVE_REWRITE_V10_FIXTURE=1 cargo test --test format_golden_v10`.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v10` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

mod common;
#[path = "common/golden.rs"]
mod golden_files;

use common::delivered::{expected, interleaved, labels, seal_fleet};
use common::{capture_config, rows_of};
use golden_files::{
    capture_barrier, docs_block, generation_records, golden, python_reader_lists, span,
};
use series_archive::archive::manifest::columns::decoding_within;
use series_archive::archive::manifest::frame::{self, Decoded, TailShape, FORMAT_VERSION};
use series_archive::archive::manifest::{log, GroupEntry, Record, SegmentFile, Slice, Span};
use series_archive::archive::{Archive, Config};
use series_archive::Position;
use std::ops::Bound::Unbounded;

const SEALED_AT_NS: u64 = 1_764_442_800_000_000_000;
const PATH: &str = "streams/capture/rows/000000000001.parquet";

/// Entry `probe` of run `run`: `rows` rows from position `first`, axis from `axis`.
fn entry(run: &str, probe: &str, rows: u64, first: u64, axis: u64, span: Span) -> GroupEntry {
    golden_files::example_entry((run, probe), rows, (first, axis), span, None)
}

/// A packed file of `entries`, their slices laid out over row groups of `per_group` entries.
fn packed(mut entries: Vec<GroupEntry>, per_group: usize) -> SegmentFile {
    let groups = entries.len().div_ceil(per_group);
    let spans: Vec<Span> = (0..groups as u64)
        .map(|g| span(4 + 100 * g, 100, 0x0A0B_0C0D ^ g as u32))
        .collect();
    for (chunk, span) in entries.chunks_mut(per_group).zip(&spans) {
        let mut row = 0;
        for e in chunk {
            e.span = *span;
            e.slice = Some(Slice {
                group: ((e.span.offset - 4) / 100) as u32,
                row,
            });
            row += e.rows;
        }
    }
    SegmentFile {
        name: 1,
        path: PATH.into(),
        bytes: 4 + 100 * groups as u64 + 1044,
        barrier: 1,
        sealed_at_ns: SEALED_AT_NS,
        footer: span(4 + 100 * groups as u64, 1044, 0x1122_3344),
        groups: entries.into(),
        cold: None,
        run: None,
        format: Some(9),
        first_level: None,
        elided: None,
    }
}

/// The version-9 docs' file: three slices of row group 0, one of row group 1.
fn docs_file() -> SegmentFile {
    let (g0, g1) = (span(4, 700, 0x0A0B_0C0D), span(704, 300, 0x0102_0304));
    let mut groups = vec![
        entry("run_0", "p1", 3, 1, 0, g0),
        entry("run_0", "p2", 2, 4, 30, g0),
        entry("run_0", "p3", 4, 6, 50, g0),
        entry("run_0", "p4", 6, 10, 90, g1),
    ];
    for (e, (group, row)) in groups.iter_mut().zip([(0, 0), (0, 3), (0, 5), (1, 0)]) {
        e.slice = Some(Slice { group, row });
    }
    let mut file = packed(groups.clone(), 4);
    file.groups = groups.into();
    file.bytes = 2048;
    file.footer = span(1004, 1044, 0x1122_3344);
    file
}

/// `hosts × metrics` tracks, one entry each, in key order.
fn fleet(hosts: usize, metrics: usize, rows: u64) -> Vec<GroupEntry> {
    let mut out = Vec::new();
    for h in 0..hosts {
        for m in 0..metrics {
            let first = 1 + out.len() as u64 * rows;
            out.push(entry(
                &format!("h{h:02}"),
                &format!("m{m:04}"),
                rows,
                first,
                first * 10,
                span(0, 0, 0),
            ));
        }
    }
    out
}

fn barrier(file: SegmentFile) -> Record {
    capture_barrier(file, SEALED_AT_NS)
}

/// The payload of a framed record.
fn payload(framed: &[u8]) -> &[u8] {
    match frame::decode(framed, 0) {
        Decoded::Record { payload, .. } => payload,
        other => panic!("the frame does not decode: {other:?}"),
    }
}

fn file_of(record: &Record) -> &SegmentFile {
    match record {
        Record::Barrier(b) => &b.streams[0].file,
        other => panic!("not a barrier: {other:?}"),
    }
}

/// A read-only open of the capture stream's tracks beneath `scope` only.
fn scoped_open(root: &std::path::Path, scope: &[String]) -> Archive {
    Archive::open(
        root,
        Config::new()
            .read_only(true)
            .scope("capture", scope.to_vec()),
    )
    .expect("a scoped open")
}

#[test]
fn a_paged_barrier_is_locked_and_framed_as_version_10() {
    const { assert!(FORMAT_VERSION >= 10) };
    let record = barrier(docs_file());
    let framed = log::encode_paged(&record, 2);
    golden(10, "tests/golden/barrier-v10.bin", &framed);
    let payload = payload(&framed);
    golden(10, "tests/golden/barrier-v10.jsonl", payload);
    assert_eq!(u16::from_le_bytes([framed[4], framed[5]]), 10);
    assert_eq!(Record::decode(payload).expect("decodes"), record);
    // The record's JSON, a newline, then the two pages' JSON.
    let text = std::str::from_utf8(payload).expect("utf-8");
    let (json, pages) = text.split_once('\n').expect("pages follow the JSON");
    assert!(!pages.contains('\n'), "{pages}");
    let written: serde_json::Value = serde_json::from_str(json).expect("json");
    let example = docs_block("## Version 10: paged entries", "json");
    let documented: serde_json::Value =
        serde_json::from_str(&format!("{{{example}}}")).expect("the docs' example is JSON");
    assert_eq!(
        documented["pieces"], written["streams"][0]["file"]["pieces"],
        "docs/format.md's example differs from what this build writes"
    );
    let pages_doc = docs_block("## Version 10: paged entries", "text");
    assert_eq!(pages_doc.trim_end(), pages, "the docs' pages differ");
    // Each page is a version-9 entry's columns, its steps counted from 0 again.
    for page in written["streams"][0]["file"]["pieces"]["pages"]
        .as_array()
        .expect("pages")
    {
        let at = page["at"].as_u64().expect("at") as usize;
        let len = page["len"].as_u64().expect("len") as usize;
        let columns: serde_json::Value =
            serde_json::from_str(&pages[at..at + len]).expect("a page is JSON");
        assert_eq!(columns["track"][0], page["first"]);
    }
}

#[test]
fn records_are_paged_beyond_page_entries_and_framed_as_before_otherwise() {
    for (entries, version, paged) in [
        (log::PAGE_ENTRIES, 9, false),
        (log::PAGE_ENTRIES + 1, 10, true),
    ] {
        let record = barrier(packed(fleet(1, entries, 2), 100));
        let framed = log::encode(&record);
        assert_eq!(
            u16::from_le_bytes([framed[4], framed[5]]),
            version,
            "{entries}"
        );
        let payload = payload(&framed);
        assert_eq!(payload.contains(&b'\n'), paged, "{entries}");
        assert_eq!(Record::decode(payload).expect("decodes"), record);
        // Serialized on its own (not framed), an entry is never paged.
        let plain = serde_json::to_vec(&record).expect("json");
        assert!(!plain.contains(&b'\n'));
        assert_eq!(Record::decode(&plain).expect("decodes"), record);
    }
}

#[test]
fn an_entry_that_cannot_be_paged_leaves_no_page_behind() {
    // The last entry's range is beyond what a step can say (no file this build writes holds
    // one): the entry is written one object per entry, and the record carries no page of the
    // chunks written before the one that failed.
    let mut entries = fleet(1, log::PAGE_ENTRIES * 3, 2);
    let last = entries.last_mut().expect("an entry");
    last.seq = [u64::MAX - 1, u64::MAX];
    let record = barrier(packed(entries, 100));
    let framed = log::encode(&record);
    assert!(u16::from_le_bytes([framed[4], framed[5]]) < 10);
    let payload = payload(&framed);
    assert!(!payload.contains(&b'\n'));
    assert!(std::str::from_utf8(payload)
        .expect("utf-8")
        .contains(r#""groups":[{"#));
    assert_eq!(Record::decode(payload).expect("decodes"), record);
}

#[test]
fn a_scoped_decode_reads_the_pages_of_its_selection_and_keeps_every_entry_beneath_it() {
    // 6 hosts × 7 metrics, 3 entries a page (14 pages), 5 entries a row group: pages and row
    // groups cut each other, and hosts straddle pages.
    let file = packed(fleet(6, 7, 3), 5);
    let record = barrier(file.clone());
    let framed = log::encode_paged(&record, 3);
    let payload = payload(&framed);
    let whole = Record::decode(payload).expect("decodes");
    assert_eq!(whole, record);
    assert!(file_of(&whole).elided.is_none());
    let mut prefixes = vec![vec![], vec!["h".to_string()], vec!["h09".to_string()]];
    for h in 0..6 {
        prefixes.push(vec![format!("h{h:02}")]);
        for m in [0, 3, 6, 7] {
            prefixes.push(vec![format!("h{h:02}"), format!("m{m:04}")]);
            prefixes.push(vec![format!("h{h:02}"), format!("m{m:04}"), "x".into()]);
        }
    }
    for prefix in prefixes {
        let scoped = decoding_within(Some(&prefix), || Record::decode(payload)).expect("decodes");
        let got = file_of(&scoped);
        let beneath = |groups: &[GroupEntry]| -> Vec<GroupEntry> {
            groups
                .iter()
                .filter(|g| !g.track.is_empty() && g.track.starts_with(&prefix))
                .cloned()
                .collect()
        };
        assert_eq!(beneath(&got.groups), beneath(&file.groups), "{prefix:?}");
        assert_eq!(got.first_seq(), file.first_seq(), "{prefix:?}");
        assert_eq!(got.row_groups(), file.row_groups(), "{prefix:?}");
        got.check_slices().expect("the kept entries fit the index");
        if prefix.is_empty() {
            assert_eq!(got, &file);
        } else {
            // Only the pages meeting the selection were read: at most three for one host
            // (7 metrics over 3-entry pages), one or two for one track, none for a stranger.
            let read = got.groups.len().div_ceil(3);
            assert!(read <= 3, "{prefix:?}: {read} pages read");
            assert!(got.elided.is_some());
            // A file a scoped replay decoded is never written back.
            assert!(serde_json::to_vec(got).is_err());
        }
    }
}

/// `payload` with its first `from` replaced by `to`.
fn tampered(payload: &str, from: &str, to: &str) -> Vec<u8> {
    assert!(payload.contains(from), "{from} is not in {payload}");
    payload.replacen(from, to, 1).into_bytes()
}

#[test]
fn an_index_or_a_page_that_lies_is_refused_naming_the_file_and_the_page() {
    let framed = log::encode_paged(&barrier(docs_file()), 2);
    let text = std::str::from_utf8(payload(&framed))
        .expect("utf-8")
        .to_owned();
    let (json, _) = text.split_once('\n').expect("pages");
    let cases = [
        (
            tampered(
                &text,
                r#"{"entries":2,"first":["run_0","p3"]"#,
                r#"{"entries":1,"first":["run_0","p3"]"#,
            ),
            "pieces.row_groups hold 4 slices, pieces.pages 3 entries",
        ),
        (
            tampered(
                &text,
                r#""first":["run_0","p3"]"#,
                r#""first":["run_0","p0"]"#,
            ),
            "pieces.pages[0] is empty or out of key order",
        ),
        (
            tampered(&text, r#""row":5,"rows":10"#, r#""row":4,"rows":10"#),
            "pieces.pages[1] starts at row 4, not 5",
        ),
        (
            tampered(&text, r#""row":5,"rows":10"#, r#""row":5,"rows":11"#),
            "pieces.pages[1] holds 10 rows",
        ),
        (
            tampered(&text, r#""rows":[4,6]"#, r#""rows":[466]"#),
            "pieces.pages[1]: pieces.rows has 1 values, pieces.track 2",
        ),
        (
            tampered(
                &text,
                r#"{"slices":3,"rows":9,"#,
                r#"{"slices":3,"rows":8,"#,
            ),
            "pieces.row_groups[0] says Some(8) rows, its slices hold 9",
        ),
        (
            tampered(
                &text,
                r#""track":[["run_0","p3"]"#,
                r#""track":[["run_0","p9"]"#,
            ),
            "pieces.pages[1] does not hold its index's tracks in key order",
        ),
        (
            format!("{json}\n").into_bytes(),
            "pieces.pages[0] lies at bytes",
        ),
        (json.as_bytes().to_vec(), "its record holds no pages"),
        (
            tampered(&text, r#""pages":[{"#, r#""track":[],"pages":[{"#),
            "pieces has both pages and columns",
        ),
    ];
    for (bad, why) in cases {
        let error = Record::decode(&bad).expect_err(why).to_string();
        assert!(
            error.contains(why) && error.contains(PATH),
            "{why}: {error}"
        );
    }
    // A record with pages and no paged entry is refused too.
    let plain = serde_json::to_string(&barrier(docs_file())).expect("json");
    let error = Record::decode(format!("{plain}\n{{}}").as_bytes())
        .expect_err("stray pages")
        .to_string();
    assert!(error.contains("no file entry of it is paged"), "{error}");
}

#[test]
fn every_prefix_of_a_paged_record_at_the_tail_is_a_torn_append() {
    let framed = log::encode_paged(&barrier(packed(fleet(4, 5, 2), 3)), 4);
    let json_end = frame::HEADER_LEN
        + framed[frame::HEADER_LEN..]
            .iter()
            .position(|b| *b == b'\n')
            .expect("pages");
    for cut in 1..framed.len() {
        assert_eq!(
            frame::classify_tail(&framed[..cut]),
            TailShape::Torn,
            "cut at {cut} of {} (the JSON ends at {json_end})",
            framed.len()
        );
    }
    // A whole paged record that fails its checksum is damage, as any record is.
    let mut flipped = framed.clone();
    let last = flipped.len() - 2;
    flipped[last] ^= 1;
    assert!(matches!(
        frame::classify_tail(&flipped),
        TailShape::Damaged(_)
    ));
}

#[test]
fn an_archive_of_many_tracks_pages_its_records_and_scoped_opens_answer_as_whole_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 40 runs × 50 probes, 32 rows each, over two barriers (16 rows a slice: columns, not row
    // groups; `tests/format_golden_v11.rs` has the row-group kind).
    let sealed = seal_fleet(dir.path(), 40, 50, 32);
    assert!(sealed.iter().all(|f| f.groups.len() == 2_000));
    let barriers: Vec<u16> = generation_records(dir.path())
        .1
        .into_iter()
        .filter(|(kind, _)| kind == "barrier")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(barriers, [10, 10]);
    let check = |sealed: &[SegmentFile]| {
        let whole = Archive::open(dir.path(), capture_config().delta(false).read_only(true))
            .expect("reopen");
        assert_eq!(whole.state().streams["capture"].files, sealed);
        assert!(whole.verify(|_, _| {}).is_empty());
        for scope in [
            labels(&["run_7"]),
            labels(&["run_7", "p3"]),
            labels(&["run_39", "p49"]),
            labels(&["run_0"]),
        ] {
            let scoped = scoped_open(dir.path(), &scope);
            // Each file of 2,000 entries: only the pages of the scope were read.
            for file in &scoped.state().streams["capture"].files {
                assert!(
                    file.groups.len() <= 2 * log::PAGE_ENTRIES,
                    "{}",
                    file.groups.len()
                );
            }
            let mut reads = vec![scope.clone()];
            if scope.len() == 1 {
                reads.push([scope.clone(), labels(&["p3"])].concat());
            }
            for read in reads {
                let want = whole
                    .read_rows("capture", &read, Unbounded, Unbounded)
                    .map(|b| rows_of(&b))
                    .expect("rows");
                let got = scoped
                    .read_rows("capture", &read, Unbounded, Unbounded)
                    .map(|b| rows_of(&b))
                    .expect("rows");
                assert_eq!(got, want, "{scope:?} reading {read:?}");
                assert!(!want.is_empty());
                let at = |p| std::ops::Bound::Included(Position(p));
                assert_eq!(
                    scoped
                        .read_rows("capture", &read, at(1_000), Unbounded)
                        .map(|b| rows_of(&b))
                        .expect("rows"),
                    whole
                        .read_rows("capture", &read, at(1_000), Unbounded)
                        .map(|b| rows_of(&b))
                        .expect("rows"),
                );
                assert_eq!(
                    format!(
                        "{:?}",
                        scoped
                            .survey("capture", &read, Unbounded, Unbounded, 64)
                            .map(|s| s.buckets)
                    ),
                    format!(
                        "{:?}",
                        whole
                            .survey("capture", &read, Unbounded, Unbounded, 64)
                            .map(|s| s.buckets)
                    ),
                );
            }
        }
    };
    check(&sealed);
    // Compacted into one packed file and checkpointed: the snapshot is paged too.
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    archive.compact(true, |_, _, _| {}).expect("compact");
    archive.checkpoint().expect("checkpoint");
    let compacted = archive.state().streams["capture"].files.clone();
    assert!(compacted.len() < sealed.len(), "{}", compacted.len());
    drop(archive);
    let (_, records) = generation_records(dir.path());
    assert_eq!(records[0].0, "snapshot");
    assert_eq!(records[0].1, 10, "{records:?}");
    check(&compacted);
    // The docs' Python reader rebuilds the same slices from the pages.
    python_reader_lists(dir.path(), &compacted, ["run_7", "p3"]);
}

/// The frozen version-10 archive, `tests/fixtures/archive-v10/`: 2 runs × 300 probes (600
/// tracks, more than a page), ticks 0–2 in two barriers, compacted into one packed file,
/// then tick 3 in a third barrier. Its barriers and its compaction are paged records.
fn fixture_v10() -> std::path::PathBuf {
    let path = golden_files::crate_path("tests/fixtures/archive-v10");
    if std::env::var_os("SERIES_ARCHIVE_REWRITE_V10_FIXTURE").is_some_and(|v| v == "1") {
        let scratch = tempfile::tempdir().expect("tempdir");
        seal_fleet(scratch.path(), 2, 300, 3);
        let mut archive =
            Archive::open(scratch.path(), capture_config().delta(false)).expect("open");
        archive.compact(true, |_, _, _| {}).expect("compact");
        let tick3: Vec<(u64, common::Row)> = fixture_deliveries().split_off(1_800);
        let rows: Vec<common::Row> = tick3.iter().map(|(_, r)| r.clone()).collect();
        let positions: Vec<u64> = tick3.iter().map(|(p, _)| *p).collect();
        archive
            .stage_batch("capture", &common::batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
        drop(archive);
        if path.exists() {
            std::fs::remove_dir_all(&path).expect("remove the old fixture");
        }
        for dir in ["manifest", "streams"] {
            common::tree::copy_tree(&scratch.path().join(dir), &path.join(dir));
        }
    }
    path
}

/// Every row the version-10 fixture holds, `(position, row)` in publish order.
fn fixture_deliveries() -> common::delivered::Delivered {
    interleaved(2, 300, 4, &[Some(0); 600])
}

#[test]
fn the_version_10_fixture_is_served_exactly_by_this_build() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::tree::copy_tree(&fixture_v10(), dir.path());
    let (_, records) = generation_records(dir.path());
    let kinds: Vec<(&str, u16)> = records
        .iter()
        .map(|(kind, version)| (kind.as_str(), *version))
        .filter(|(kind, _)| *kind != "snapshot" && *kind != "declare")
        .collect();
    assert_eq!(
        kinds,
        [
            ("barrier", 10),
            ("barrier", 10),
            ("compact", 10),
            ("barrier", 10)
        ],
        "{records:?}"
    );
    let all = fixture_deliveries();
    let whole = Archive::open(dir.path(), capture_config().delta(false).read_only(true))
        .expect("open the fixture");
    assert!(whole.verify(|_, _| {}).is_empty());
    for scope in [labels(&[]), labels(&["run_1"]), labels(&["run_1", "p150"])] {
        let want = expected(&all, &scope, Unbounded, Unbounded);
        let read = |archive: &Archive| {
            archive
                .read_rows("capture", &scope, Unbounded, Unbounded)
                .map(|b| rows_of(&b))
                .expect("rows")
        };
        assert_eq!(read(&whole), want, "{scope:?}");
        let scoped = scoped_open(dir.path(), &scope);
        assert_eq!(read(&scoped), want, "{scope:?}, a scoped open");
        let survey = |archive: &Archive| {
            archive
                .survey("capture", &scope, Unbounded, Unbounded, 64)
                .map(|s| format!("{:?}", s.buckets))
                .expect("survey")
        };
        assert_eq!(survey(&scoped), survey(&whole), "{scope:?}");
    }
}
