//! The supervised runtime over the archive: the adapter lives on the supervisor's thread,
//! `publish` does no adapter work on the caller's thread, a dead supervisor answers
//! `Unserved` and never hangs, the cadence seals and runs the lifecycle unasked, and
//! eviction racing queries never duplicates or drops a boundary row.

use serde::{Deserialize, Serialize};
use series_archive::archive::{Archive, ArchiveError, Config};
use series_archive::host::{ReadFailure, StopError, Streams};
use series_archive::{
    Aggregate, Aggregated, Application, At, BeneathWindow, Bucket, Cursor, Definition, ErasedRow,
    Position, Run, Series, Stream, StreamConsumer,
};
use std::collections::HashSet;
use std::ops::Bound::{self, Unbounded};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

#[series_archive::stream(id = "capture", window = 16, track = (run), axis = ordinal)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Capture {
    run: String,
    ordinal: u64,
    value: i64,
}

struct App;
impl Application for App {}

fn row(i: u64) -> Capture {
    Capture {
        run: format!("run_{}", i % 3),
        ordinal: i,
        value: i as i64,
    }
}

fn open(dir: &std::path::Path) -> Archive {
    Archive::open(dir, Config::new().select::<Capture>().expect("select")).expect("open")
}

/// The archive, watched: which threads delivered to it, and switches that make `rows`
/// panic (the supervisor dies mid-read) or `seal` (it dies at boot, asked the watermark).
struct Spy {
    inner: Archive,
    delivered_on: Arc<Mutex<HashSet<ThreadId>>>,
    die_on_rows: Arc<AtomicBool>,
    die_on_seal: bool,
}

impl StreamConsumer<App> for Spy {
    type Error = ArchiveError;

    fn deliver(&mut self, run: Run<'_>) -> Result<(), Self::Error> {
        self.delivered_on
            .lock()
            .expect("lock")
            .insert(std::thread::current().id());
        <Archive as StreamConsumer<App>>::deliver(&mut self.inner, run)
    }

    fn cursor(&self) -> Cursor {
        <Archive as StreamConsumer<App>>::cursor(&self.inner)
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        <Archive as StreamConsumer<App>>::flush(&mut self.inner).await
    }
}

impl Series<App> for Spy {
    async fn rows(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> Result<Vec<At<ErasedRow>>, BeneathWindow> {
        if self.die_on_rows.load(Ordering::SeqCst) {
            panic!("the supervisor dies mid-read (on purpose)");
        }
        <Archive as Series<App>>::rows(&mut self.inner, stream, track, start, end).await
    }

    async fn buckets(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
    ) -> Result<Vec<Bucket>, BeneathWindow> {
        <Archive as Series<App>>::buckets(&mut self.inner, stream, track, start, end, budget).await
    }

    async fn aggregate(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
    ) -> Result<Vec<Aggregated>, BeneathWindow> {
        <Archive as Series<App>>::aggregate(&mut self.inner, stream, track, start, end, kind).await
    }

    async fn seal(&mut self, stream: Definition, track: &[String]) -> Position {
        if self.die_on_seal {
            panic!("the supervisor dies at boot (on purpose)");
        }
        <Archive as Series<App>>::seal(&mut self.inner, stream, track).await
    }
}

/// A runtime over the archive at `dir`, `Capture` declared, no cadence.
async fn attached(dir: &std::path::Path) -> Streams<App> {
    Streams::assemble()
        .stream::<Capture>()
        .series(open(dir))
        .boot()
        .await
}

/// Publishes rows `range` at positions one past their index.
fn publish(streams: &Streams<App>, range: std::ops::Range<u64>) {
    for i in range {
        streams.publish(Position(i + 1), row(i)).expect("publish");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

fn ordinals(rows: &[At<Arc<Capture>>]) -> Vec<u64> {
    rows.iter().map(|at| at.row.ordinal).collect()
}

#[test]
fn publish_does_no_adapter_work_on_the_publishing_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let delivered_on = Arc::new(Mutex::new(HashSet::new()));
    let spy = Spy {
        inner: open(dir.path()),
        delivered_on: delivered_on.clone(),
        die_on_rows: Arc::new(AtomicBool::new(false)),
        die_on_seal: false,
    };
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(spy)
            .boot()
            .await;
        publish(&streams, 0..100);
        // A read drains the feed first, so every row has been delivered once it answers.
        let all = streams.query::<Capture>(..).await.expect("spliced");
        assert_eq!(ordinals(&all), (0..100).collect::<Vec<_>>());
        streams.stop().await.expect("stop");
    });
    let threads = delivered_on.lock().expect("lock").clone();
    assert_eq!(
        threads.len(),
        1,
        "one supervisor thread delivered everything"
    );
    assert!(
        !threads.contains(&std::thread::current().id()),
        "the publishing thread never ran the adapter's drain"
    );
    assert_eq!(open(dir.path()).watermark("capture"), Position(100));
}

#[test]
fn a_dead_supervisor_answers_unserved_and_never_hangs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let die = Arc::new(AtomicBool::new(false));
    let spy = Spy {
        inner: open(dir.path()),
        delivered_on: Arc::default(),
        die_on_rows: die.clone(),
        die_on_seal: false,
    };
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(spy)
            .boot()
            .await;
        publish(&streams, 0..40);
        let other = streams.clone();
        die.store(true, Ordering::SeqCst);
        // Never a hang: everything below must finish, or the timeout fails the test.
        let after_death = async {
            // The supervisor panics while answering: the reply is dropped, the read is Unserved.
            assert_eq!(
                streams.query::<Capture>(..).await,
                Err(ReadFailure::Refused(BeneathWindow::Unserved))
            );
            // Everything after: publishing still never fails or waits; reads beneath the window
            // are Unserved (the lane's send fails), reads above it still answer from the window.
            for i in 40..50 {
                other.publish(Position(i + 1), row(i)).expect("publish");
            }
            assert_eq!(
                other.query::<Capture>(..).await,
                Err(ReadFailure::Refused(BeneathWindow::Unserved))
            );
            let floor = other.floor::<Capture>();
            let recent = other
                .query::<Capture>((Bound::Excluded(floor), Unbounded))
                .await
                .expect("the window alone");
            assert_eq!(ordinals(&recent), (34..50).collect::<Vec<_>>());
            assert_eq!(other.seal::<Capture>().await, Position::ORIGIN);
            assert_eq!(other.stop().await, Err(StopError::Gone));
        };
        tokio::time::timeout(Duration::from_secs(30), after_death)
            .await
            .expect("never a hang");
    });
}

#[test]
fn the_cadence_seals_unasked_runs_the_lifecycle_and_stop_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ticks = Arc::new(AtomicUsize::new(0));
    let counted = ticks.clone();
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(open(dir.path()))
            .cadence(Duration::from_millis(10))
            .lifecycle(move |archive: &mut Archive| {
                counted.fetch_add(1, Ordering::SeqCst);
                archive.maintain(0).expect("maintain");
            })
            .boot()
            .await;
        publish(&streams, 0..50);
        // Nobody seals: the cadence makes the rows durable. A reader beside the writer sees
        // the barrier once it is committed.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let reader = Archive::open(dir.path(), Config::new().read_only(true)).expect("read");
            // The lifecycle runs right after the tick's barrier: wait for both.
            if reader.watermark("capture") == Position(50) && ticks.load(Ordering::SeqCst) > 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cadence never sealed, or never ran the lifecycle"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Rows published after the last tick are made durable by the stop's flush.
        publish(&streams, 50..60);
        streams.stop().await.expect("stop");
    });
    assert_eq!(open(dir.path()).watermark("capture"), Position(60));
}

/// Two rows per position, a window of 16, a barrier every 2 ms, and a publisher on its own
/// thread racing a reader: every full read answers exactly the rows published before it took
/// its snapshot, as a contiguous prefix that only grows. A boundary row answered twice (by
/// the window and the tier) or by neither would break the prefix.
#[test]
fn eviction_racing_queries_never_duplicates_or_drops_a_boundary_row() {
    const ROWS: u64 = 3_000;
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(open(dir.path()))
            .cadence(Duration::from_millis(2))
            .boot()
            .await;
        let publisher = {
            let streams = streams.clone();
            std::thread::spawn(move || {
                for i in 0..ROWS {
                    streams
                        .publish(Position(i / 2 + 1), row(i))
                        .expect("publish");
                    if i % 64 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        let mut seen = 0usize;
        let mut reads = 0;
        loop {
            let done = publisher.is_finished();
            let all = streams.query::<Capture>(..).await.expect("spliced");
            let got = ordinals(&all);
            assert_eq!(
                got,
                (0..got.len() as u64).collect::<Vec<_>>(),
                "read {reads}: not a contiguous prefix of what was published"
            );
            assert!(got.len() >= seen, "read {reads}: the answer shrank");
            seen = got.len();
            reads += 1;
            if done {
                break;
            }
        }
        publisher.join().expect("publisher");
        assert_eq!(
            seen as u64, ROWS,
            "the last read, after publishing ended, holds all"
        );
        assert!(reads > 1, "reads raced the publisher");
        streams.stop().await.expect("stop");
    });
}

/// The verbs as the spec spells them: `query(range).track(..).as_of(at)`,
/// `survey(axis).track(..).budget(n)`, `survey(axis).fold(kind)`, `seal().track(..)`. Each
/// answers what the archive's own API answers for the same selection.
#[test]
fn the_typed_verbs_answer_what_the_archive_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams: Streams<App> = attached(dir.path()).await;
        publish(&streams, 0..300);
        let sealed = streams.seal::<Capture>().track(("run_1".to_owned(),)).await;
        assert_eq!(sealed, Position(300));
        let run_1 = streams
            .query::<Capture>(..)
            .track(("run_1".to_owned(),))
            .as_of(Position(30))
            .await
            .expect("rows");
        assert_eq!(
            ordinals(&run_1),
            (0..30).filter(|i| i % 3 == 1).collect::<Vec<_>>(),
            "run_1 as the history stood at position 30"
        );
        let buckets = streams
            .survey::<Capture>(..)
            .track(("run_1".to_owned(),))
            .budget(40)
            .await
            .expect("buckets");
        let mean = streams
            .survey::<Capture>(0..300)
            .fold(Aggregate::Mean)
            .await
            .expect("fold");
        streams.stop().await.expect("stop");
        let archive = open(dir.path());
        let want = archive
            .survey("capture", &["run_1".to_owned()], Unbounded, Unbounded, 40)
            .expect("survey");
        assert_eq!(buckets, want.buckets);
        assert!(buckets.len() * 4 <= 40, "never over budget");
        let want = archive
            .fold(
                "capture",
                &[],
                Bound::Included(0),
                Bound::Excluded(300),
                Aggregate::Mean,
            )
            .expect("fold");
        assert_eq!(mean, want.answers);
    });
}

/// Boot honesty: an adapter durable beyond the frontier the runtime recovered no longer
/// shares a coordinate with it, so the window is served alone, never spliced.
#[test]
fn a_watermark_beyond_the_recovered_frontier_leaves_the_window_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams: Streams<App> =
            Streams::boot(Some(open(dir.path())), &[Capture::definition()]).await;
        publish(&streams, 0..40);
        streams.stop().await.expect("stop");
    });
    runtime().block_on(async {
        // The runtime recovered only through position 25; the archive holds 40.
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(open(dir.path()))
            .frontier(Position(25))
            .boot()
            .await;
        assert_eq!(streams.floor::<Capture>(), Position::ORIGIN);
        publish(&streams, 25..60);
        assert_eq!(
            streams.query::<Capture>(..).await,
            Err(ReadFailure::Refused(BeneathWindow::Unserved)),
            "beneath the window nothing is served"
        );
        let floor = streams.floor::<Capture>();
        let window = streams
            .query::<Capture>((Bound::Excluded(floor), Unbounded))
            .await
            .expect("the window alone");
        assert_eq!(window.len(), 16);
        streams.stop().await.expect("stop");
    });
    // The frontier at (or past) the watermark splices as usual.
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(open(dir.path()))
            .frontier(Position(1_000))
            .boot()
            .await;
        assert!(streams.floor::<Capture>() > Position(25));
        streams.query::<Capture>(..).await.expect("spliced");
    });
}

/// Zero or one designated copy: naming a second demotes the first to a recording copy —
/// still fed and flushed, so it holds every row — while reads are served by the second.
#[test]
fn naming_a_second_series_demotes_the_first_to_a_recording_copy() {
    let (first, second) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(open(first.path()))
            .series(open(second.path()))
            .boot()
            .await;
        publish(&streams, 0..100);
        assert_eq!(streams.seal::<Capture>().await, Position(100));
        streams.stop().await.expect("stop");
    });
    for dir in [&first, &second] {
        let archive = open(dir.path());
        assert_eq!(archive.watermark("capture"), Position(100));
        let rows = archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("rows");
        assert_eq!(rows.num_rows(), 100);
    }
}

/// Caller errors are distinct from the three refusals (issue 12, defect 4): a budget that
/// buys no bucket and a label holding a control character answer `Invalid`, which says
/// "fix the read", never `Unreadable` ("report, retry": a caller that retried would loop
/// forever). The archive's `check` names what is wrong before anything is read.
#[test]
fn caller_errors_are_invalid_reads_never_refusals() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams: Streams<App> = attached(dir.path()).await;
        publish(&streams, 0..40);
        streams.seal::<Capture>().await;
        match streams.survey::<Capture>(..).budget(3).await {
            Err(ReadFailure::Invalid(why)) => {
                assert!(
                    why.contains("budget of 3") && why.contains("at least 4"),
                    "{why}"
                )
            }
            other => panic!("a budget that buys no bucket answered {other:?}"),
        }
        match streams
            .query::<Capture>(..)
            .track(("run\u{1}".to_owned(),))
            .await
        {
            Err(ReadFailure::Invalid(why)) => assert!(why.contains("control"), "{why}"),
            other => panic!("a control character in a label answered {other:?}"),
        }
        // The smallest budget that buys one bucket answers.
        let buckets = streams
            .survey::<Capture>(..)
            .budget(4)
            .await
            .expect("one bucket");
        assert_eq!(buckets.len(), 1);
        streams.stop().await.expect("stop");
    });
}

/// Only caller errors are `Invalid`: a survey of an archive whose manifest is damaged mid-log
/// is the archive's wall (`Unreadable`, report it), even though the adapter is asked
/// `check` first.
#[test]
fn a_damaged_archive_is_a_refusal_not_an_invalid_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams: Streams<App> =
            Streams::boot(Some(open(dir.path())), &[Capture::definition()]).await;
        for i in 0..200 {
            streams.publish(Position(i + 1), row(i)).expect("publish");
            if i % 20 == 19 {
                streams.seal::<Capture>().await;
            }
        }
        streams.stop().await.expect("stop");
    });
    // Flip a byte in the middle of the manifest: valid records follow the damage.
    let manifest = std::fs::read_dir(dir.path().join("manifest"))
        .expect("manifest dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a generation");
    let mut bytes = std::fs::read(&manifest).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&manifest, &bytes).expect("write");
    let reader = Archive::open(
        dir.path(),
        Config::new()
            .select::<Capture>()
            .expect("select")
            .read_only(true),
    )
    .expect("a read-only open past the damage");
    assert!(reader.recovery().damaged_at.is_some());
    runtime().block_on(async {
        let streams: Streams<App> = Streams::boot(Some(reader), &[Capture::definition()]).await;
        match streams.survey::<Capture>(..).budget(400).await {
            Err(ReadFailure::Refused(BeneathWindow::Unreadable(u))) => {
                assert!(u.what().contains("damaged"), "{u}")
            }
            other => panic!("a damaged manifest answered {other:?}"),
        }
    });
}

/// A supervisor that dies at boot, before it says what the archive holds, leaves the windows
/// over history nobody learnt: a full read is `Unserved`, never the ring alone answered as
/// if it were everything (before, the window stood on origin and a full query answered only
/// the rows published since the boot). A range that starts after the ring's oldest row is
/// still the window's to answer.
#[test]
fn a_supervisor_dead_at_boot_never_answers_the_ring_as_the_whole_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let streams = attached(dir.path()).await;
        publish(&streams, 0..40);
        streams.stop().await.expect("stop");
    });
    let spy = Spy {
        inner: open(dir.path()),
        delivered_on: Arc::default(),
        die_on_rows: Arc::default(),
        die_on_seal: true,
    };
    runtime().block_on(async {
        let streams: Streams<App> = Streams::assemble()
            .stream::<Capture>()
            .series(spy)
            .boot()
            .await;
        publish(&streams, 40..45);
        assert_eq!(
            streams.query::<Capture>(..).await,
            Err(ReadFailure::Refused(BeneathWindow::Unserved))
        );
        assert_eq!(
            streams.query::<Capture>(Position(41)..).await,
            Err(ReadFailure::Refused(BeneathWindow::Unserved)),
            "the oldest row's own position may hold rows from before the boot"
        );
        let recent = streams
            .query::<Capture>(Position(42)..)
            .await
            .expect("after the oldest row, the window answers");
        assert_eq!(ordinals(&recent), vec![41, 42, 43, 44]);
    });
}
