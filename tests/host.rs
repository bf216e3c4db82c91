//! The host's splice over the archive: window first, the tier beneath capped at the window's
//! floor, and a restarted host standing its empty window on the archive's watermark.

use serde::{Deserialize, Serialize};
use series_archive::archive::{Archive, Config};
use series_archive::host::{PublishError, ReadFailure, Streams};
use series_archive::{Application, BeneathWindow, Position, Stream};
use std::ops::Bound::{Excluded, Included, Unbounded};

#[series_archive::stream(id = "capture", window = 8, track = (run, probe), axis = ordinal)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Capture {
    run: String,
    probe: String,
    ordinal: u64,
    value: i64,
}

struct App;
impl Application for App {}

fn row(i: u64) -> Capture {
    Capture {
        run: format!("run_{}", i % 2),
        probe: "p".into(),
        ordinal: i,
        value: i as i64,
    }
}

fn positions(rows: &[series_archive::At<std::sync::Arc<Capture>>]) -> Vec<u64> {
    rows.iter().map(|at| at.position.0).collect()
}

#[test]
fn the_splice_owns_the_boundary_once_and_survives_a_restart() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || {
        Archive::open(
            dir.path(),
            Config::new().select::<Capture>().expect("traces"),
        )
        .expect("open")
    };
    rt.block_on(async {
        let host: Streams<App> = Streams::boot(Some(open()), &[Capture::definition()]).await;
        // 30 rows, two per position (positions are not unique), window of 8 rows.
        for i in 0..30u64 {
            host.publish(Position(i / 2 + 1), row(i)).expect("publish");
            if i % 10 == 9 {
                host.seal::<Capture>().await;
            }
        }
        let floor = host.floor::<Capture>();
        assert!(floor > Position::ORIGIN, "eviction raised the floor");
        let all = host.query::<Capture>(..).await.expect("spliced");
        assert_eq!(
            all.len(),
            30,
            "every row once: the boundary position is owned by one tier"
        );
        assert_eq!(
            all.iter().map(|at| at.row.ordinal).collect::<Vec<_>>(),
            (0..30).collect::<Vec<_>>()
        );
        let around = host
            .query::<Capture>((Included(floor), Excluded(Position(floor.0 + 2))))
            .await
            .expect("spliced");
        assert_eq!(
            positions(&around),
            vec![floor.0, floor.0, floor.0 + 1, floor.0 + 1]
        );
        let one_run = host
            .query::<Capture>(..)
            .track(("run_1".to_owned(),))
            .await
            .expect("track");
        assert_eq!(one_run.len(), 15);
        assert!(one_run.iter().all(|at| at.row.run == "run_1"));
        host.stop().await.expect("flush");
    });
    // A restarted host has an empty ring standing on the watermark: a full query splices.
    rt.block_on(async {
        let host: Streams<App> = Streams::boot(Some(open()), &[Capture::definition()]).await;
        assert_eq!(host.floor::<Capture>(), Position(15));
        let all = host.query::<Capture>(..).await.expect("spliced");
        assert_eq!(all.len(), 30);
    });
    // With no adapter attached, a read beneath the window's floor is Unserved.
    rt.block_on(async {
        let host: Streams<App> = Streams::boot::<Archive>(None, &[Capture::definition()]).await;
        for i in 0..30u64 {
            host.publish(Position(i / 2 + 1), row(i)).expect("publish");
        }
        assert_eq!(
            host.query::<Capture>(..).await,
            Err(ReadFailure::Refused(BeneathWindow::Unserved))
        );
        let recent = host
            .query::<Capture>((Excluded(host.floor::<Capture>()), Unbounded))
            .await
            .expect("window");
        assert!(!recent.is_empty() && recent.len() <= 8);
    });
}

/// Eviction running ahead of sealing: the rows between the watermark and the window's floor
/// are staged in the adapter, not yet sealed, and a full query must still answer every row
/// (a complete-looking answer of the window alone would be the splice's lie).
#[test]
fn a_splice_serves_rows_evicted_before_any_seal() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(
        dir.path(),
        Config::new().select::<Capture>().expect("traces"),
    )
    .expect("open");
    rt.block_on(async {
        let host: Streams<App> = Streams::boot(Some(archive), &[Capture::definition()]).await;
        for i in 0..100u64 {
            host.publish(Position(i + 1), row(i)).expect("publish");
        }
        assert_eq!(host.floor::<Capture>(), Position(92), "window of 8 rows");
        let all = host.query::<Capture>(..).await.expect("spliced");
        assert_eq!(
            all.iter().map(|at| at.row.ordinal).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>(),
            "every published row, in publish order, with nothing sealed"
        );
        // Narrowed to one run, and a range straddling the floor.
        let run_0 = host
            .query::<Capture>(..)
            .track(("run_0".to_owned(),))
            .await
            .expect("track");
        assert_eq!(run_0.len(), 50);
        let around = host
            .query::<Capture>((Included(Position(90)), Excluded(Position(95))))
            .await
            .expect("spliced");
        assert_eq!(positions(&around), vec![90, 91, 92, 93, 94]);
        // Half sealed, half staged: the answer is still whole and in publish order.
        host.seal::<Capture>().await;
        for i in 100..150u64 {
            host.publish(Position(i + 1), row(i)).expect("publish");
        }
        let all = host.query::<Capture>(..).await.expect("spliced");
        assert_eq!(
            all.iter().map(|at| at.row.ordinal).collect::<Vec<_>>(),
            (0..150).collect::<Vec<_>>()
        );
    });
}

/// Another row type declaring the same stream id: a query for the first type meets a row it
/// cannot be, and is refused — the row is never silently left out of the answer.
#[test]
fn a_row_of_another_type_is_refused_never_dropped() {
    #[series_archive::stream(id = "capture", window = 8, track = (run, probe), axis = ordinal)]
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Impostor {
        run: String,
        probe: String,
        ordinal: u64,
        value: i64,
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let host: Streams<App> = Streams::boot::<Archive>(None, &[Capture::definition()]).await;
        host.publish(Position(1), row(0)).expect("publish");
        host.publish(
            Position(2),
            Impostor {
                run: "run_0".into(),
                probe: "p".into(),
                ordinal: 1,
                value: 1,
            },
        )
        .expect("publish");
        match host.query::<Capture>(..).await {
            Err(ReadFailure::Refused(BeneathWindow::Unreadable(u))) => {
                assert!(u.what().contains("position 2"), "{u}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    });
}

/// Boot honesty: a stream the archive records but the assembly does not select is not the
/// adapter's to serve, so its window stands on origin, alone (before, the window stood on
/// the recorded watermark and every full read then failed `Unreadable`). And the stream
/// table is frozen at boot: publishing a stream not declared there is refused, nothing
/// delivered (before, a window was made up on origin).
#[test]
fn boot_stands_only_selected_streams_on_the_watermark_and_the_table_is_frozen() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let selecting = || Config::new().select::<Capture>().expect("select");
    rt.block_on(async {
        let host: Streams<App> = Streams::boot(
            Some(Archive::open(dir.path(), selecting()).expect("open")),
            &[Capture::definition()],
        )
        .await;
        for i in 0..20u64 {
            host.publish(Position(i + 1), row(i)).expect("publish");
        }
        host.stop().await.expect("flush");
    });
    rt.block_on(async {
        // The archive records `capture` (watermark 20) but this assembly selects nothing.
        let archive = Archive::open(dir.path(), Config::new()).expect("open");
        assert_eq!(archive.watermark("capture"), Position(20));
        let host: Streams<App> = Streams::boot(Some(archive), &[Capture::definition()]).await;
        assert_eq!(host.floor::<Capture>(), Position::ORIGIN);
        let rows = host
            .query::<Capture>(..)
            .await
            .expect("the window alone answers");
        assert!(rows.is_empty());
        // Its rows are not the archive's to take: the adapter is fed none of them (before,
        // each delivery failed and reads beneath then answered Unreadable, "report, retry").
        // Once the window evicts, beneath it nothing is served: Unserved, never a short answer.
        for i in 20..40u64 {
            host.publish(Position(i + 1), row(i)).expect("publish");
        }
        assert_eq!(
            host.query::<Capture>(..).await,
            Err(ReadFailure::Refused(BeneathWindow::Unserved))
        );
        let floor = host.floor::<Capture>();
        let window = host
            .query::<Capture>((Excluded(floor), Unbounded))
            .await
            .expect("the window alone");
        assert_eq!(window.len(), 8);
        host.stop().await.expect("flush");
    });
    assert_eq!(
        Archive::open(dir.path(), Config::new().read_only(true))
            .expect("open")
            .watermark("capture"),
        Position(20),
        "nothing of the unselected stream was staged or sealed"
    );
    rt.block_on(async {
        let archive = Archive::open(dir.path(), selecting()).expect("open");
        let host: Streams<App> = Streams::boot(Some(archive), &[]).await;
        match host.publish(Position(21), row(21)) {
            Err(PublishError::Undeclared(id)) => assert_eq!(id, "capture"),
            other => panic!("an undeclared stream was published: {other:?}"),
        }
        assert_eq!(
            host.query::<Capture>(..).await,
            Err(ReadFailure::Invalid(
                "stream \"capture\" was not declared at boot; declare it in the assembly".into()
            )),
            "no window was made up for it, and reading it is a caller error, not a refusal"
        );
        host.stop().await.expect("flush");
    });
    let archive = Archive::open(dir.path(), selecting()).expect("open");
    assert_eq!(
        archive.watermark("capture"),
        Position(20),
        "nothing of the refused row was delivered"
    );
}

/// A typed read long enough to decode on every core (in shares, each in chunks) answers
/// every row, in order, at its position, equal to what was delivered.
#[test]
fn a_long_typed_read_decodes_every_row_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut archive = Archive::open(
        dir.path(),
        Config::new().select::<Capture>().expect("traces"),
    )
    .expect("open");
    let n = 150_001u64;
    let rows: Vec<series_archive::At<series_archive::ErasedRow>> = (0..n)
        .map(|i| {
            let capture = Capture {
                run: "run_0".into(),
                probe: format!("p{}", i % 3),
                ordinal: i,
                value: (i as i64) * 7 - 3,
            };
            series_archive::At::new(Position(i + 1), std::sync::Arc::new(capture) as _)
        })
        .collect();
    archive
        .deliver_run(series_archive::Run {
            stream: &Capture::definition(),
            rows: &rows,
        })
        .expect("deliver");
    archive.seal_all().expect("seal");
    let back = archive
        .typed_rows("capture", &["run_0".into()], Unbounded, Unbounded)
        .expect("typed rows");
    assert_eq!(back.len() as u64, n);
    // Publish order across the tracks beneath the prefix.
    let expected: Vec<(u64, Capture)> = (0..n)
        .map(|i| {
            let row = rows[i as usize].row.downcast_ref::<Capture>();
            (i + 1, row.expect("a capture").clone())
        })
        .collect();
    for (at, (position, capture)) in back.iter().zip(&expected) {
        assert_eq!(at.position.0, *position);
        assert_eq!(at.row.downcast_ref::<Capture>(), Some(capture));
    }
}
