//! Staging keeps deliveries whole (`engine::stage`): a stream's deliveries stay in memory as
//! delivered, each row marked with its track, and a barrier orders them by track once.
//!
//! Property: random track sets of 1 to 2,000 tracks, rows interleaved as a scraper delivers
//! them, cut into deliveries and barriers at random. Reads of every prefix depth and of
//! position ranges answer exactly the deliveries, in publish order: while the last rows are
//! still staged (they are served too), after they are sealed, and after a reopen.

mod common;

use common::delivered::{expected, interleaved, labels, row, Delivered};
use common::{batch, capture_config, rows_of, Row};
use proptest::prelude::*;
use series_archive::archive::Archive;
use series_archive::Position;
use std::ops::Bound::{Excluded, Included, Unbounded};

#[derive(Debug, Clone)]
struct Case {
    runs: usize,
    probes: usize,
    ticks: u64,
    /// Which tracks take part, and from which tick.
    starts: Vec<Option<u64>>,
    /// Where the rows are cut into deliveries, and which of those cuts also seal (fractions
    /// of the rows, out of 256).
    cuts: Vec<(u8, bool)>,
    /// Ticks whose tracks arrive in another order than the first tick's: bit `t % 8` set
    /// reverses tick `t`, so staging's guess of the next track (the slot made after the
    /// previous row's) misses, and the track must be found by its labels.
    reversed: u8,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=40, 1usize..=50, 1u64..=5)
        .prop_flat_map(|(runs, probes, ticks)| {
            (
                Just((runs, probes, ticks)),
                proptest::collection::vec(proptest::option::weighted(0.8, 0..ticks), runs * probes),
                proptest::collection::vec((any::<u8>(), any::<bool>()), 0..8),
                any::<u8>(),
            )
        })
        .prop_map(|((runs, probes, ticks), starts, cuts, reversed)| Case {
            runs,
            probes,
            ticks,
            starts,
            cuts,
            reversed,
        })
}

/// The case's rows: interleaved as a scraper delivers them, the ticks `reversed` names in
/// reverse track order, positions renumbered from 1 in delivery order.
fn deliveries(case: &Case) -> Delivered {
    let mut rows: Vec<Row> = interleaved(case.runs, case.probes, case.ticks, &case.starts)
        .into_iter()
        .map(|(_, row)| row)
        .collect();
    for chunk in rows.chunk_by_mut(|a, b| a.ordinal == b.ordinal) {
        let tick = chunk[0].ordinal / 10;
        if case.reversed & (1 << (tick % 8)) != 0 {
            chunk.reverse();
        }
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| (i as u64 + 1, row))
        .collect()
}

/// Every prefix depth and three position ranges, read from `archive`, equal `delivered`.
fn reads_equal(archive: &Archive, case: &Case, delivered: &Delivered) -> Result<(), TestCaseError> {
    let last = delivered.last().map_or(0, |(p, _)| *p);
    let ranges = [
        (Unbounded, Unbounded),
        (Included(Position(last / 3)), Unbounded),
        (
            Excluded(Position(last / 4)),
            Included(Position(last * 3 / 4)),
        ),
    ];
    let prefixes = [
        labels(&[]),
        labels(&["run_0"]),
        vec![format!("run_{}", case.runs - 1)],
        vec![
            format!("run_{}", case.runs / 2),
            format!("p{}", case.probes / 2),
        ],
    ];
    for prefix in &prefixes {
        for (start, end) in ranges {
            let read = archive
                .read_rows("capture", prefix, start, end)
                .map_err(|e| TestCaseError::fail(format!("read {prefix:?}: {e}")))?;
            prop_assert_eq!(rows_of(&read), expected(delivered, prefix, start, end));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn staged_and_sealed_reads_answer_every_delivery_in_publish_order(case in case()) {
        let delivered = deliveries(&case);
        prop_assume!(!delivered.is_empty());
        let mut cuts: Vec<(usize, bool)> = case
            .cuts
            .iter()
            .map(|(c, seal)| (*c as usize * delivered.len() / 256, *seal))
            .filter(|(c, _)| *c > 0)
            .collect();
        cuts.sort();
        cuts.dedup_by_key(|(c, _)| *c);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
        let mut from = 0;
        for (cut, seal) in cuts.into_iter().chain([(delivered.len(), false)]) {
            let part = &delivered[from..cut];
            let rows: Vec<Row> = part.iter().map(|(_, r)| r.clone()).collect();
            let positions: Vec<u64> = part.iter().map(|(p, _)| *p).collect();
            archive.stage_batch("capture", &batch(&rows), &positions).expect("stage");
            if seal {
                archive.seal_all().expect("seal").expect("a barrier");
            }
            from = cut;
        }
        // The last deliveries are staged, not sealed: reads serve them beside the sealed rows.
        prop_assert!(archive.staged_rows() > 0);
        reads_equal(&archive, &case, &delivered)?;
        archive.seal_all().expect("seal").expect("a barrier");
        prop_assert_eq!(archive.staged_rows(), 0);
        reads_equal(&archive, &case, &delivered)?;
        drop(archive);
        let reopened = Archive::open(dir.path(), capture_config().delta(false).read_only(true))
            .expect("reopen");
        reads_equal(&reopened, &case, &delivered)?;
        let damaged = reopened.verify(|_, _| {});
        prop_assert!(damaged.is_empty(), "verify: {:?}", damaged);
    }
}

/// Every row the archive serves, staged or sealed, in publish order.
fn read_all(archive: &Archive) -> Delivered {
    rows_of(
        &archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("read"),
    )
}

/// A delivery whose track goes backwards on the axis is refused whole, even when other
/// deliveries of that track are staged: nothing of it is staged, and what was staged reads
/// back unchanged.
#[test]
fn a_refused_delivery_leaves_the_staged_rows_as_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    let first: Delivered = (0..6).map(|i| (i + 1, row(i as usize % 3, 0, 5))).collect();
    let rows: Vec<Row> = first.iter().map(|(_, r)| r.clone()).collect();
    archive
        .stage_batch("capture", &batch(&rows), &[1, 2, 3, 4, 5, 6])
        .expect("stage");
    // Track run_1/p0 at tick 4 goes back from tick 5; run_2/p0 at tick 6 would be fine.
    let bad = [row(2, 0, 6), row(1, 0, 4)];
    let refused = archive.stage_batch("capture", &batch(&bad), &[7, 8]);
    let message = refused.expect_err("refused").to_string();
    assert!(message.contains("goes backwards"), "{message}");
    assert_eq!(archive.staged_rows(), 6);
    let read = archive
        .read_rows("capture", &[], Unbounded, Unbounded)
        .expect("read");
    assert_eq!(rows_of(&read), first);
}

/// A refused delivery that had found new tracks leaves none of them behind: a bad label or an
/// axis going backwards after them, and the same tracks delivered again afterwards are new
/// tracks, checked and read exactly; tracks staged before keep their place.
#[test]
fn a_refused_delivery_forgets_the_tracks_it_found_and_keeps_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    let stage = |archive: &mut Archive, rows: &[Row], from: u64| {
        let positions: Vec<u64> = (from..from + rows.len() as u64).collect();
        archive.stage_batch("capture", &batch(rows), &positions)
    };
    let kept: Vec<Row> = (0..50).map(|p| row(0, p, 5)).collect();
    stage(&mut archive, &kept, 1).expect("stage");
    // New tracks run_1/p0..p9 at tick 9, then a label no track key may hold.
    let mut bad: Vec<Row> = (0..10).map(|p| row(1, p, 9)).collect();
    let mut broken = row(2, 0, 9);
    broken.probe = "p\u{1f}0".into();
    bad.push(broken);
    let refused = stage(&mut archive, &bad, 51).expect_err("a bad label");
    assert!(refused.to_string().contains("probe"), "{refused}");
    // New tracks again, then a kept track going backwards.
    let mut backwards: Vec<Row> = (0..10).map(|p| row(1, p, 9)).collect();
    backwards.push(row(0, 3, 4));
    let refused = stage(&mut archive, &backwards, 51).expect_err("axis backwards");
    assert!(refused.to_string().contains("goes backwards"), "{refused}");
    assert_eq!(archive.staged_rows(), 50);
    // The refused rows were never staged: the same tracks from an earlier tick are fine.
    let again: Vec<Row> = (0..10).map(|p| row(1, p, 2)).collect();
    stage(&mut archive, &again, 51).expect("stage");
    let more: Vec<Row> = (0..50).map(|p| row(0, p, 6)).collect();
    stage(&mut archive, &more, 61).expect("stage");
    let mut delivered: Delivered = Vec::new();
    for (rows, from) in [(&kept, 1), (&again, 51), (&more, 61)] {
        delivered.extend(
            rows.iter()
                .enumerate()
                .map(|(i, r)| (from + i as u64, r.clone())),
        );
    }
    delivered.sort_by_key(|(p, _)| *p);
    assert_eq!(read_all(&archive), delivered);
    archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(read_all(&archive), delivered);
    // After the barrier a track is checked against what is durable.
    let refused = stage(&mut archive, &[row(1, 4, 1)], 111).expect_err("behind the sealed axis");
    assert!(refused.to_string().contains("goes backwards"), "{refused}");
    stage(&mut archive, &[row(1, 4, 2)], 111).expect("at the sealed axis");
}

/// Tracks keep their staging slots from barrier to barrier, and a handle that has seen many
/// tracks forgets the slots once its barriers hold few: either way every delivery is checked
/// against what is durable and read back exactly.
#[test]
fn slots_kept_or_forgotten_across_barriers_check_against_what_is_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    let mut delivered: Delivered = Vec::new();
    let stage = |archive: &mut Archive, rows: Vec<Row>, delivered: &mut Delivered| {
        let from = delivered.len() as u64 + 1;
        let positions: Vec<u64> = (from..from + rows.len() as u64).collect();
        archive.stage_batch("capture", &batch(&rows), &positions)?;
        delivered.extend(positions.into_iter().zip(rows));
        Ok::<_, series_archive::archive::ArchiveError>(())
    };
    // 100 runs × 60 probes (6,000 tracks) in one barrier, then barriers of ten tracks.
    let many: Vec<Row> = (0..6_000).map(|i| row(i / 60, i % 60, 5)).collect();
    stage(&mut archive, many, &mut delivered).expect("stage");
    archive.seal_all().expect("seal").expect("a barrier");
    for tick in 6..9 {
        let few: Vec<Row> = (0..10).map(|p| row(0, p, tick)).collect();
        stage(&mut archive, few, &mut delivered).expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
    }
    // A track of the first barrier only, behind its sealed axis: refused; at it: staged.
    let refused = stage(&mut archive, vec![row(99, 59, 4)], &mut delivered).expect_err("behind");
    assert!(refused.to_string().contains("goes backwards"), "{refused}");
    stage(&mut archive, vec![row(99, 59, 5)], &mut delivered).expect("at the sealed axis");
    // A track sealed three times since: behind its last barrier is refused too.
    let refused = stage(&mut archive, vec![row(0, 3, 7)], &mut delivered).expect_err("behind");
    assert!(refused.to_string().contains("goes backwards"), "{refused}");
    // A delivery naming every track with one of them behind where this handle sealed it:
    // refused, naming it; then every track at tick 9: staged.
    let every = |tick: u64| -> Vec<Row> { (0..6_000).map(|i| row(i / 60, i % 60, tick)).collect() };
    let mut all = every(9);
    all[50 * 60 + 7] = row(50, 7, 4);
    let refused = stage(&mut archive, all, &mut delivered).expect_err("behind");
    assert!(refused.to_string().contains("it is at 50"), "{refused}");
    stage(&mut archive, every(9), &mut delivered).expect("every track ahead");
    assert_eq!(read_all(&archive), delivered);
    archive.seal_all().expect("seal").expect("a barrier");
    // Reopened, the handle has sealed nothing: the same delivery finds every track's durable
    // state in one walk of the staged tracks and the catalog, and refuses the track behind.
    drop(archive);
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("reopen");
    let mut all = every(10);
    all[50 * 60 + 7] = row(50, 7, 8);
    let refused = stage(&mut archive, all, &mut delivered).expect_err("behind");
    assert!(refused.to_string().contains("it is at 90"), "{refused}");
    stage(&mut archive, every(10), &mut delivered).expect("every track ahead");
    archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(read_all(&archive), delivered);
}

/// A validator keeping what it checks (`Validator::keeping`) hands its rows to the writer
/// (`Archive::adopt`) while the stream stands where it checked them, and they read back and
/// seal exactly as if staged; past its limit, or told to keep only after it checked rows, it
/// keeps none, and once a barrier was committed since its check (or the writer has rows
/// staged) the writer takes none, so its rows are staged the usual way and checked again.
#[test]
fn a_keeping_validator_hands_over_its_rows_only_while_the_stream_stands_where_it_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(dir.path(), capture_config().delta(false)).expect("open");
    let rows: Vec<Row> = (0..40)
        .map(|i| row(i % 4, i / 4 % 2, 3 + i as u64 / 8))
        .collect();
    let positions: Vec<u64> = (1..=40).collect();
    let delivered: Delivered = positions
        .iter()
        .copied()
        .zip(rows.iter().cloned())
        .collect();

    // Kept, then taken whole: the writer reads and seals the rows it never staged itself.
    let mut validator = archive.validator("capture").expect("validator").keeping(40);
    validator
        .check(&batch(&rows[..25]), &positions[..25])
        .expect("checked");
    validator
        .check(&batch(&rows[25..]), &positions[25..])
        .expect("checked");
    assert_eq!(validator.kept_rows(), 40);
    assert_eq!(archive.adopt(&mut validator).expect("adopt"), 40);
    assert_eq!(validator.kept_rows(), 0);
    assert_eq!(archive.staged_rows(), 40);
    assert_eq!(read_all(&archive), delivered);
    archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(read_all(&archive), delivered);

    // Past its limit it keeps nothing.
    let later: Vec<Row> = (0..8).map(|i| row(i % 4, 0, 20)).collect();
    let at: Vec<u64> = (41..=48).collect();
    let mut over = archive.validator("capture").expect("validator").keeping(5);
    over.check(&batch(&later), &at).expect("checked");
    assert_eq!(over.kept_rows(), 0);
    assert_eq!(archive.adopt(&mut over).expect("adopt"), 0);

    // Checked before a barrier the writer then committed: not taken, and staged the usual
    // way the same rows are refused (they would repeat positions the barrier holds).
    let mut stale = archive
        .validator("capture")
        .expect("validator")
        .keeping(100);
    stale.check(&batch(&later), &at).expect("checked");
    archive
        .stage_batch("capture", &batch(&later), &at)
        .expect("staged");
    archive.seal_all().expect("seal").expect("a barrier");
    assert_eq!(stale.kept_rows(), 8);
    assert_eq!(archive.adopt(&mut stale).expect("adopt"), 0);
    assert_eq!(archive.staged_rows(), 0);
    let again = archive.stage_batch("capture", &batch(&later), &at);
    assert!(
        again.is_err(),
        "positions the barrier holds were staged again"
    );

    // A writer with rows of the stream staged takes none either.
    let next: Vec<Row> = (0..4).map(|i| row(i, 1, 30)).collect();
    let mut busy = archive
        .validator("capture")
        .expect("validator")
        .keeping(100);
    busy.check(&batch(&next[2..]), &[51, 52]).expect("checked");
    archive
        .stage_batch("capture", &batch(&next[..2]), &[49, 50])
        .expect("staged");
    assert_eq!(archive.adopt(&mut busy).expect("adopt"), 0);
    assert_eq!(archive.staged_rows(), 2);

    // Told to keep only after it checked (and let go of) rows, it keeps none: its tracks
    // would count rows it no longer holds.
    let late = archive.validator("capture").expect("validator");
    let mut late = {
        let mut v = late;
        v.check(&batch(&next[..1]), &[60]).expect("checked");
        v.keeping(100)
    };
    late.check(&batch(&next[1..]), &[61, 62, 63])
        .expect("checked");
    assert_eq!(late.kept_rows(), 0);
}
