//! The archive's own replicator (issue 26): a writable handle whose archive has a replica
//! replicates every commit on a thread of its own, never failing a barrier for the bucket's
//! sake unless a lag bound says so; a bound makes each barrier wait until the bucket holds it.
//! Buckets here are `file://` prefixes in a scratch directory; one is made to fail by putting a
//! plain file where its directory was (every request then fails), and comes back by moving
//! the directory back.

use arrow::array::{RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use series_archive::archive::cold::ColdTier;
use series_archive::archive::replicate;
use series_archive::archive::{
    reader, Archive, ArchiveError, Clock, Config, StreamSpec, SystemClock,
};
use series_archive::Position;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Failed = Box<dyn std::error::Error>;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new("v", DataType::UInt64, false)]))
}

fn config() -> Result<Config, Failed> {
    Ok(Config::new().stream(StreamSpec::dynamic("s", schema(), Vec::new(), None)?))
}

/// Stages rows at positions `from..to` and seals them as one barrier.
fn barrier(archive: &mut Archive, from: u64, to: u64) -> Result<(), ArchiveError> {
    let positions: Vec<u64> = (from..to).collect();
    let batch = RecordBatch::try_new(
        schema(),
        vec![Arc::new(UInt64Array::from(positions.clone()))],
    )
    .map_err(|e| ArchiveError::Replica(e.to_string()))?;
    archive.stage_batch("s", &batch, &positions)?;
    archive.seal_all()?;
    Ok(())
}

/// The watermark a reader of `root` (a directory or a replica's URL) is served.
fn watermark(root: &str, cache: &Path) -> Result<Position, Failed> {
    let archive = reader::open(root, &Config::new().replica_cache(cache))?;
    Ok(archive.watermark("s"))
}

/// The archive at `root`, replicating to `url` under a lag bound of 0 (each barrier returns
/// once the bucket holds it).
fn bound_to_zero(root: &Path, url: &str) -> Result<Archive, Failed> {
    Ok(Archive::open(
        root,
        config()?
            .replicate(ColdTier::from_url(url)?)
            .max_lag(0, Duration::from_secs(60)),
    )?)
}

/// Polls `done` every 50 ms for at most `within`.
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let began = Instant::now();
    while began.elapsed() < within {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn under_a_lag_bound_of_zero_every_barrier_returns_once_the_bucket_holds_it() -> Result<(), Failed>
{
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("a");
    let url = format!("file://{}", dir.path().join("bucket").display());
    let cache = dir.path().join("cache");
    let mut archive = bound_to_zero(&root, &url)?;
    assert_eq!(
        std::fs::read_to_string(root.join("REPLICA"))?,
        format!("{url}\n"),
        "declared once, recorded"
    );
    for i in 0..5 {
        barrier(&mut archive, i * 10 + 1, i * 10 + 11)?;
        // No waiting here: the barrier returned, so the bucket holds it.
        assert_eq!(
            watermark(&url, &cache)?,
            Position(i * 10 + 10),
            "barrier {i}"
        );
    }
    let progress = archive.replication().ok_or("the handle replicates")?;
    assert_eq!((progress.url.as_str(), progress.behind), (url.as_str(), 0));
    assert!(progress.passes >= 5, "{progress:?}");
    // Stopped: where it left the bucket, no pass running; the handle replicates no more.
    let stopped = archive.stop_replication().ok_or("it was replicating")?;
    assert_eq!((stopped.behind, stopped.running), (0, false), "{stopped:?}");
    assert!(archive.replication().is_none());
    assert!(archive.stop_replication().is_none());
    // Its passes rewrite the record of where they left the bucket at most once a second; the
    // last one's is written when it stops: caught up, not where an earlier pass was.
    let seen = replicate::last_seen(&root, &url, SystemClock.now_ns())?
        .ok_or("a completed pass is recorded")?;
    assert_eq!((seen.records_behind, seen.bytes_behind), (0, 0), "{seen:?}");
    Ok(())
}

/// A busy writer's commits go up several to a pass (a pass starts at most every 250 ms while
/// no barrier waits for the bucket), and the bucket still ends up holding the last one.
#[test]
fn commits_in_quick_succession_share_passes_and_all_reach_the_bucket() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("a");
    let url = format!("file://{}", dir.path().join("bucket").display());
    let cache = dir.path().join("cache");
    let mut archive = Archive::open(&root, config()?.replicate(ColdTier::from_url(&url)?))?;
    for i in 0..30 {
        barrier(&mut archive, i * 10 + 1, i * 10 + 11)?;
    }
    assert!(
        eventually(Duration::from_secs(30), || archive
            .replication()
            .is_some_and(|p| p.behind == 0)),
        "caught up: {:?}",
        archive.replication()
    );
    let progress = archive.replication().ok_or("the handle replicates")?;
    assert_eq!(progress.commits, 30, "{progress:?}");
    assert!(
        progress.passes < 15,
        "30 commits in quick succession took {} passes",
        progress.passes
    );
    assert_eq!(watermark(&url, &cache)?, Position(300));
    Ok(())
}

#[test]
fn a_failing_bucket_never_fails_a_barrier_and_its_lag_is_worked_off() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("a");
    let bucket = dir.path().join("bucket");
    let away = dir.path().join("bucket-away");
    let url = format!("file://{}", bucket.display());
    let cache = dir.path().join("cache");
    let a = root.to_str().ok_or("utf-8")?;

    // Declared by one handle; a later one replicates without being told.
    let mut archive = Archive::open(&root, config()?.replicate(ColdTier::from_url(&url)?))?;
    barrier(&mut archive, 1, 11)?;
    drop(archive);
    assert_eq!(
        watermark(&url, &cache)?,
        Position(10),
        "closing waits for the last pass"
    );

    // The bucket fails every request: barriers still commit, and the lag is reported.
    std::fs::rename(&bucket, &away)?;
    std::fs::write(&bucket, "not a directory")?;
    let mut archive = Archive::open(&root, config()?)?;
    for i in 1..4 {
        barrier(&mut archive, i * 10 + 1, i * 10 + 11)?;
    }
    assert!(
        eventually(Duration::from_secs(20), || archive
            .replication()
            .is_some_and(|p| p.failures > 0
                && p.behind > 0
                && p.last_error.is_some())),
        "{:?}",
        archive.replication()
    );
    assert_eq!(
        watermark(a, &cache)?,
        Position(40),
        "every barrier is durable locally"
    );

    // Under a bound, a barrier the bucket does not take in time is refused as the bucket's,
    // saying the barrier is durable; it is.
    drop(archive);
    let mut bounded = Archive::open(&root, config()?.max_lag(0, Duration::from_millis(500)))?;
    let refused = barrier(&mut bounded, 41, 51).expect_err("the bucket is down");
    assert!(
        matches!(&refused, ArchiveError::Replica(m) if m.contains("durable locally")),
        "{refused}"
    );
    assert_eq!(watermark(a, &cache)?, Position(50));

    // The bucket is back: the lag is worked off, and the bucket serves what the archive does.
    std::fs::remove_file(&bucket)?;
    std::fs::rename(&away, &bucket)?;
    assert!(
        eventually(Duration::from_secs(20), || bounded
            .replication()
            .is_some_and(|p| p.behind == 0 && p.failures == 0)),
        "{:?}",
        bounded.replication()
    );
    barrier(&mut bounded, 51, 61)?;
    assert_eq!(watermark(&url, &cache)?, Position(60));
    drop(bounded);

    // Turned off, a handle replicates nothing (a pass is then run by hand).
    let mut off = Archive::open(&root, config()?.replication(false))?;
    assert!(off.replication().is_none());
    barrier(&mut off, 61, 71)?;
    drop(off);
    assert_eq!(watermark(&url, &cache)?, Position(60));
    Ok(())
}

/// Every file of `dir` and beneath, as paths relative to `dir` with their bytes.
fn tree(dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<u8>>, Failed> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir)?.to_string_lossy().into_owned();
                out.insert(relative, std::fs::read(&path)?);
            }
        }
    }
    Ok(out)
}

/// The replicator's passes remember the bucket between them, and still leave it exactly the
/// archive: after a compaction and a checkpoint while it runs, the bucket's data and level
/// files are the live ones (what the compaction dropped is deleted by a pass that did not
/// list the prefix), and its Delta logs are the archive's own, `_last_checkpoint` included.
#[test]
fn remembering_passes_delete_what_a_compaction_dropped_and_carry_every_delta_object(
) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("a");
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let cache = dir.path().join("cache");
    let mut archive = bound_to_zero(&root, &url)?;
    for i in 0..12 {
        barrier(&mut archive, i * 10 + 1, i * 10 + 11)?;
    }
    let dropped: Vec<String> = archive
        .state()
        .live_files()
        .map(|f| f.path.clone())
        .collect();
    assert!(
        !archive.compact(true, |_, _, _| {})?.is_empty(),
        "compacted"
    );
    archive.checkpoint()?;
    barrier(&mut archive, 121, 131)?;
    let live: std::collections::BTreeSet<String> = archive
        .state()
        .live_files()
        .map(|f| f.path.clone())
        .collect();
    assert!(
        dropped.iter().any(|f| !live.contains(f)),
        "the compaction dropped files"
    );
    // Each of the 13 barriers waits for a pass that began after it committed; the open's
    // state, the compaction and the checkpoint wait for none, so their hand-overs may share
    // a barrier's pass (hand-overs coalesce: a pass takes the newest).
    let passes = archive.replication().ok_or("replicating")?.passes;
    assert!(
        passes >= 13,
        "a pass a barrier under the lag bound: {passes}"
    );
    // Whatever the last pass found still unnamed is gone after it.
    let stopped = archive.stop_replication().ok_or("it was replicating")?;
    assert_eq!(stopped.behind, 0, "{stopped:?}");

    let held = tree(&bucket.join("streams"))?;
    let data: std::collections::BTreeSet<String> = held
        .keys()
        .filter(|k| !k.contains("_delta_log"))
        .map(|k| format!("streams/{k}"))
        .collect();
    assert_eq!(
        data, live,
        "the bucket's data and level files are the live ones"
    );
    let local = tree(&root.join("streams"))?;
    let logs = |t: &std::collections::BTreeMap<String, Vec<u8>>| {
        t.iter()
            .filter(|(k, _)| k.contains("_delta_log/") && !k.contains('#'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (theirs, ours) = (logs(&held), logs(&local));
    assert!(
        ours.keys().any(|k| k.ends_with("_last_checkpoint")),
        "the checkpoint wrote a Delta checkpoint"
    );
    assert_eq!(
        theirs, ours,
        "the bucket's Delta logs are the archive's, byte for byte"
    );
    assert_eq!(watermark(&url, &cache)?, Position(130));
    Ok(())
}
