//! Seal and read back: publish order within and across partitions, prefix selection,
//! watermarks across reopen, declaration drift, the lock, and a drain that touches no file.

mod common;

use common::*;
use series_archive::archive::{Archive, ArchiveError, Config, ReadError, StreamSpec};
use series_archive::Position;
use std::ops::Bound::{Excluded, Included, Unbounded};

fn labels(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| s.to_string()).collect()
}

#[test]
fn rows_come_back_in_publish_order_within_and_across_partitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config()).expect("open");
    assert_eq!(
        archive.seal_all().expect("nothing staged"),
        None,
        "an empty seal is no barrier"
    );
    let (rows, positions) = workload(3, 4, 40, 0);
    // Three barriers of uneven size.
    for (a, b) in [(0, 100), (100, 101), (101, rows.len())] {
        archive
            .stage_batch("capture", &batch(&rows[a..b]), &positions[a..b])
            .expect("stage");
        let report = archive.seal_all().expect("seal").expect("a barrier");
        assert_eq!(report.streams[0].watermark, Position(positions[b - 1]));
    }
    // Unnarrowed: every row, exactly in publish order.
    let all = archive
        .read_rows("capture", &[], Unbounded, Unbounded)
        .expect("rows");
    let expected: Vec<(u64, Row)> = positions
        .iter()
        .copied()
        .zip(rows.iter().cloned())
        .collect();
    assert_eq!(rows_of(&all), expected);
    // One partition.
    let one = archive
        .read_rows(
            "capture",
            &labels(&["run_1", "probe.2"]),
            Unbounded,
            Unbounded,
        )
        .expect("rows");
    let want: Vec<_> = expected
        .iter()
        .filter(|(_, r)| r.run == "run_1" && r.probe == "probe.2")
        .cloned()
        .collect();
    assert_eq!(rows_of(&one), want);
    // A prefix: every partition beneath it, merged in publish order.
    let run = archive
        .read_rows("capture", &labels(&["run_2"]), Unbounded, Unbounded)
        .expect("rows");
    let want: Vec<_> = expected
        .iter()
        .filter(|(_, r)| r.run == "run_2")
        .cloned()
        .collect();
    assert_eq!(rows_of(&run), want);
    // A position range, both bound kinds.
    let mid = archive
        .read_rows(
            "capture",
            &[],
            Included(Position(10)),
            Excluded(Position(20)),
        )
        .expect("rows");
    let want: Vec<_> = expected
        .iter()
        .filter(|(p, _)| (10..20).contains(p))
        .cloned()
        .collect();
    assert_eq!(rows_of(&mid), want);
    // Reopen: the same answers, the watermark from the record.
    drop(archive);
    let archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    assert_eq!(archive.watermark("capture"), Position(40));
    let again = archive
        .read_rows("capture", &[], Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(rows_of(&again), expected);
}

#[test]
fn a_prefix_is_a_key_range_not_a_string_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config()).expect("open");
    let mk = |run: &str, ordinal| Row {
        run: run.into(),
        probe: "p".into(),
        ordinal,
        value: 1,
        noise: 0.0,
    };
    let rows = vec![
        mk("run_7", 1),
        mk("run_70", 1),
        mk("run_7", 2),
        mk("run_7x", 1),
    ];
    archive
        .stage_batch("capture", &batch(&rows), &[1, 1, 2, 2])
        .expect("stage");
    archive.seal_all().expect("seal");
    let got = archive
        .read_rows("capture", &labels(&["run_7"]), Unbounded, Unbounded)
        .expect("rows");
    assert_eq!(
        rows_of(&got)
            .iter()
            .map(|(_, r)| r.ordinal)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!(rows_of(&got).iter().all(|(_, r)| r.run == "run_7"));
}

#[test]
fn bad_input_is_refused_whole_and_names_row_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config()).expect("open");
    let mk = |probe: &str, ordinal| Row {
        run: "r".into(),
        probe: probe.into(),
        ordinal,
        value: 1,
        noise: 0.0,
    };
    // Axis backwards in one partition (row 2), fine in another.
    let err = archive
        .stage_batch(
            "capture",
            &batch(&[mk("a", 5), mk("b", 1), mk("a", 4)]),
            &[1, 1, 1],
        )
        .expect_err("axis backwards");
    let msg = err.to_string();
    assert!(
        msg.contains("row 2") && msg.contains("\"ordinal\"") && msg.contains("backwards"),
        "{msg}"
    );
    // A control character in a label.
    let err = archive
        .stage_batch(
            "capture",
            &batch(&[mk("ok", 1), mk("bad\u{7}", 2)]),
            &[1, 1],
        )
        .expect_err("label");
    let msg = err.to_string();
    assert!(
        msg.contains("row 1") && msg.contains("\"probe\"") && msg.contains("control character"),
        "{msg}"
    );
    // Positions going backwards.
    let err = archive
        .stage_batch("capture", &batch(&[mk("a", 1), mk("a", 2)]), &[5, 4])
        .expect_err("position");
    assert!(err.to_string().contains("row 1"), "{err}");
    assert_eq!(
        archive.staged_rows(),
        0,
        "nothing of a refused delivery is staged"
    );
    assert_eq!(archive.seal_all().expect("seal"), None);
    // Across a barrier, the durable last axis still binds.
    archive
        .stage_batch("capture", &batch(&[mk("a", 10)]), &[1])
        .expect("stage");
    archive.seal_all().expect("seal");
    drop(archive);
    let mut archive = Archive::open(dir.path(), capture_config()).expect("reopen");
    let err = archive
        .stage_batch("capture", &batch(&[mk("a", 9)]), &[2])
        .expect_err("axis below durable");
    assert!(err.to_string().contains("backwards"), "{err}");
    let err = archive
        .stage_batch("capture", &batch(&[mk("b", 9)]), &[0])
        .expect_err("position below watermark");
    assert!(err.to_string().contains("position 0"), "{err}");
}

#[test]
fn reopening_with_another_declaration_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(Archive::open(dir.path(), capture_config()).expect("open"));
    let other = StreamSpec::dynamic(
        "capture",
        capture_schema(),
        vec!["run".into()],
        Some("ordinal".into()),
    )
    .expect("valid");
    let err = Archive::open(dir.path(), Config::new().stream(other)).expect_err("drift");
    let msg = err.to_string();
    assert!(matches!(err, ArchiveError::Declaration { .. }), "{msg}");
    assert!(
        msg.contains("track: recorded [\"run\", \"probe\"], declared [\"run\"]"),
        "{msg}"
    );
    // Unchanged: the original declaration still opens.
    Archive::open(dir.path(), capture_config()).expect("reopen as recorded");
}

#[test]
fn one_writer_at_a_time_and_readers_alongside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer = Archive::open(dir.path(), capture_config()).expect("open");
    let (rows, positions) = workload(1, 2, 5, 0);
    writer
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
    writer.seal_all().expect("seal");
    let err = Archive::open(dir.path(), capture_config()).expect_err("second writer");
    assert!(matches!(err, ArchiveError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("another process"), "{err}");
    let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("reader");
    assert_eq!(
        reader
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("rows")
            .num_rows(),
        rows.len()
    );
    assert!(matches!(
        reader.read_rows("nope", &[], Unbounded, Unbounded),
        Err(ReadError::UnknownStream(_))
    ));
}

#[test]
fn staging_touches_no_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let mut archive = Archive::open(&root, capture_config()).expect("open");
    // Take the directory away entirely: any file operation would now fail.
    std::fs::remove_dir_all(&root).expect("remove");
    let (rows, positions) = workload(4, 8, 500, 0);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("staging needs no file");
    assert_eq!(archive.staged_rows(), rows.len());
    let err = archive.seal_all().expect_err("a barrier does need files");
    assert!(err.to_string().contains(".tmp"), "{err}");
    // A failed barrier poisons the archive: no retry until reopened.
    archive
        .stage_batch("capture", &batch(&rows[..1]), &positions[..1])
        .expect("stage");
    assert!(matches!(archive.seal_all(), Err(ArchiveError::Poisoned(_))));
}

/// A barrier's row groups are bounded: a track with more rows than the configured group size
/// spans several groups of the same data file, each with its own ranges, and everything
/// reads back exactly as from an archive with whole-track groups (rows, surveys, a range).
#[test]
fn a_barrier_bounds_its_row_groups_and_reads_back_the_same() {
    use series_archive::archive::lifecycle::Compaction;
    let (rows, positions) = workload(2, 2, 300, 0);
    let sealed = |group_rows: usize| {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = capture_config().compaction(Compaction {
            group_rows,
            ..Compaction::default()
        });
        let mut archive = Archive::open(dir.path(), config).expect("open");
        archive
            .stage_batch("capture", &batch(&rows), &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        (dir, archive)
    };
    let (_small_dir, small) = sealed(128);
    let (_whole_dir, whole) = sealed(1 << 20);
    let file = &small.state().streams["capture"].files[0];
    assert_eq!(
        file.groups.len(),
        4 * 3,
        "300 rows a track in groups of 128, 128, 44"
    );
    for pair in file.groups.windows(2) {
        if pair[0].track == pair[1].track {
            assert!(pair[0].position[1] <= pair[1].position[0], "{pair:?}");
            assert!(pair[0].seq[1] < pair[1].seq[0], "{pair:?}");
        }
    }
    assert!(file.groups.iter().all(|g| g.rows <= 128));
    assert_eq!(whole.state().streams["capture"].files[0].groups.len(), 4);
    let read = |a: &Archive, track: &[&str], from| {
        rows_of(
            &a.read_rows("capture", &labels(track), from, Unbounded)
                .expect("rows"),
        )
    };
    for track in [&[][..], &["run_1"][..], &["run_0", "probe.1"][..]] {
        assert_eq!(
            read(&small, track, Unbounded),
            read(&whole, track, Unbounded)
        );
        let from = Included(Position(positions[700]));
        assert_eq!(read(&small, track, from), read(&whole, track, from));
    }
    for budget in [16, 400, 4000] {
        let survey = |a: &Archive| {
            let s = a
                .survey("capture", &labels(&["run_0"]), Unbounded, Unbounded, budget)
                .expect("survey");
            format!("{:?} {:?}", s.plan, s.buckets)
        };
        assert_eq!(survey(&small), survey(&whole));
    }
}

/// What a read answers, for comparing a scoped open with a whole one: rows, a survey, a
/// level fold and a percentile, each `Err` as its refusal's text.
fn answers(archive: &Archive, track: &[String]) -> Vec<String> {
    use series_archive::Aggregate;
    fn shown<T: std::fmt::Debug>(answer: Result<T, ReadError>) -> String {
        format!("{:?}", answer.map_err(|e| e.to_string()))
    }
    let (start, end) = (Included(Position(40)), Excluded(Position(200)));
    vec![
        shown(
            archive
                .read_rows("capture", track, Unbounded, Unbounded)
                .map(|b| rows_of(&b)),
        ),
        shown(
            archive
                .read_rows("capture", track, start, end)
                .map(|b| rows_of(&b)),
        ),
        shown(
            archive
                .survey("capture", track, Unbounded, Unbounded, 64)
                .map(|s| (s.plan, s.buckets)),
        ),
        shown(
            archive
                .fold("capture", track, Included(100), Unbounded, Aggregate::Mean)
                .map(|f| (f.answers, f.pieces)),
        ),
        shown(
            archive
                .fold(
                    "capture",
                    track,
                    Unbounded,
                    Unbounded,
                    Aggregate::percentile(95),
                )
                .map(|f| f.answers),
        ),
        shown(archive.floors("capture", track)),
    ]
}

mod scoped {
    use super::*;
    use proptest::prelude::*;

    /// An archive of `runs × probes` tracks over several barriers, a compaction into
    /// packed files, a retired track and a later barrier: every kind of record a scoped
    /// replay leaves tracks out of (barriers, a snapshot's floors, a retirement, a
    /// compaction).
    fn lived(dir: &std::path::Path, runs: usize, probes: usize, checkpoint: bool) {
        let mut archive = Archive::open(dir, capture_config()).expect("open");
        let (rows, positions) = workload(runs, probes, 30, 0);
        let third = rows.len() / 3;
        for (a, b) in [(0, third), (third, 2 * third)] {
            archive
                .stage_batch("capture", &batch(&rows[a..b]), &positions[a..b])
                .expect("stage");
            archive.seal_all().expect("seal");
        }
        archive.compact(true, |_, _, _| {}).expect("compact");
        archive
            .retire_track("capture", &labels(&["run_0", "probe.1"]))
            .expect("retire");
        let (a, b) = (2 * third, rows.len());
        archive
            .stage_batch("capture", &batch(&rows[a..b]), &positions[a..b])
            .expect("stage");
        archive.seal_all().expect("seal");
        if checkpoint {
            archive.checkpoint().expect("checkpoint");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5c09e), ..ProptestConfig::default() })]

        /// A scoped open answers every read within its scope exactly as a whole open does
        /// (rows, surveys, folds, percentiles, floors), at every depth of the scope and the
        /// read, and catalogs no track outside it.
        #[test]
        fn a_scoped_open_answers_within_its_scope_as_a_whole_open_does(
            runs in 1usize..5,
            probes in 1usize..6,
            checkpoint: bool,
            run in 0usize..5,
            probe in 0usize..6,
            depth in 0usize..3,
            deeper: bool,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            lived(dir.path(), runs, probes, checkpoint);
            let whole = Archive::open(dir.path(), Config::new().read_only(true)).expect("open");
            let full = [format!("run_{run}"), format!("probe.{probe}")];
            let scope: Vec<String> = full[..depth].to_vec();
            let scoped = Archive::open(
                dir.path(),
                Config::new().read_only(true).scope("capture", scope.clone()),
            )
            .expect("scoped open");
            // The read: the scope itself, or one level beneath it.
            let read: Vec<String> = full[..(depth + usize::from(deeper)).min(2)].to_vec();
            prop_assert_eq!(answers(&scoped, &read), answers(&whole, &read));
            // Only the scope's tracks are cataloged; none beneath it is missing.
            let cataloged = &scoped.state().streams["capture"].tracks;
            let beneath = whole.state().streams["capture"]
                .tracks
                .values()
                .filter(|t| t.labels.starts_with(&scope))
                .count();
            prop_assert_eq!(cataloged.len(), beneath);
            prop_assert!(cataloged.values().all(|t| t.labels.starts_with(&scope)));
        }
    }

    #[test]
    fn a_scoped_open_refuses_what_its_catalog_does_not_hold_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        lived(dir.path(), 3, 3, false);
        let scoped = Archive::open(
            dir.path(),
            Config::new()
                .read_only(true)
                .scope("capture", labels(&["run_1"])),
        )
        .expect("scoped open");
        // Wider, beside, or another stream: refused, never a short answer.
        for track in [
            labels(&[]),
            labels(&["run_2"]),
            labels(&["run_2", "probe.0"]),
        ] {
            let err = scoped
                .read_rows("capture", &track, Unbounded, Unbounded)
                .expect_err("outside the scope");
            assert!(matches!(err, ReadError::BadSelection(_)), "{err}");
            assert!(err.to_string().contains("Config::scope"), "{err}");
            let err = scoped
                .survey("capture", &track, Unbounded, Unbounded, 64)
                .expect_err("outside the scope");
            assert!(matches!(err, ReadError::BadSelection(_)), "{err}");
            let err = scoped
                .fold(
                    "capture",
                    &track,
                    Unbounded,
                    Unbounded,
                    series_archive::Aggregate::Count,
                )
                .expect_err("outside the scope");
            assert!(matches!(err, ReadError::BadSelection(_)), "{err}");
            assert!(scoped.floors("capture", &track).is_err());
        }
        let err = scoped
            .read_rows("other", &[], Unbounded, Unbounded)
            .expect_err("another stream");
        assert!(matches!(err, ReadError::BadSelection(_)), "{err}");
        // Within it: answered.
        scoped
            .read_rows(
                "capture",
                &labels(&["run_1", "probe.2"]),
                Unbounded,
                Unbounded,
            )
            .expect("within the scope");
        // `describe` would count tracks it left out.
        let err = scoped.describe().expect_err("describe");
        assert!(matches!(err, ArchiveError::Scoped(_)), "{err}");
        // A writable open takes no scope (it would record a state missing tracks).
        drop(scoped);
        let err = Archive::open(
            dir.path(),
            capture_config().scope("capture", labels(&["run_1"])),
        )
        .expect_err("writable");
        assert!(matches!(err, ArchiveError::Scoped(_)), "{err}");
        assert!(err.to_string().contains("unscoped open"), "{err}");
    }
}
