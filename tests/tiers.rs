//! The cold tier, against three real `object_store` stores: the local file system, memory,
//! and S3 (moto's server on loopback, started here). One shared suite: offload moves data
//! files and every read answers exactly as before; compaction, retirement and verify work
//! across tiers; objects no record names are removed by a writable open, never one a record
//! names, and another archive's prefix in the same bucket is left alone. Then a
//! fault-injecting store: 503s, timeouts, a put whose outcome is unknown — nothing recorded
//! that is not whole, nothing lost, the move retried later, a cold read refused (transient),
//! never short and never a hang.

mod common;
#[path = "common/s3.rs"]
mod s3;

use async_trait::async_trait;
use common::*;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use series_archive::archive::cold::ColdTier;
use series_archive::archive::lifecycle::OffloadPolicy;
use series_archive::archive::{Archive, ReadError, StoredErrorKind};
use series_archive::{Aggregate, BeneathWindow};
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn stage(archive: &mut Archive, barrier: u64) {
    let (rows, positions) = workload(2, 2, 8, barrier * 8);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
}

/// What the archive serves: rows of several selections, a survey, a mean and a p95.
fn served(archive: &Archive) -> Vec<String> {
    let mut out = Vec::new();
    for selection in [vec![], vec!["run_0".to_owned()], vec!["run_1".to_owned()]] {
        out.push(
            match archive.read_rows("capture", &selection, Unbounded, Unbounded) {
                Ok(batch) => format!("{selection:?}: {:?}", rows_of(&batch)),
                Err(e) => format!("{selection:?}: refused {e}"),
            },
        );
    }
    out.push(format!(
        "{:?}",
        archive
            .survey("capture", &[], Unbounded, Unbounded, 64)
            .map(|s| s.buckets)
    ));
    for kind in ["mean", "p95"] {
        out.push(format!(
            "{:?}",
            archive
                .fold(
                    "capture",
                    &[],
                    Unbounded,
                    Unbounded,
                    Aggregate::parse(kind).expect("a kind")
                )
                .map(|f| f.answers)
        ));
    }
    out
}

/// Object paths under `prefix` in `store`.
fn objects(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        use futures::TryStreamExt;
        let mut listed: Vec<String> = store
            .list(Some(&ObjectPath::from(prefix)))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .expect("list");
        listed.sort();
        listed
    })
}

fn put(store: &Arc<dyn ObjectStore>, path: &str, bytes: &'static [u8]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(store.put(&ObjectPath::from(path), PutPayload::from_static(bytes)))
        .expect("put");
}

/// The shared suite against one store, the archive under `prefix` in it.
fn suite(name: &str, store: Arc<dyn ObjectStore>, url: &str, dir: &Path) {
    let root = dir.join(format!("archive-{name}"));
    let tier = || ColdTier::new(store.clone(), "arch-a", url).expect("a tier");
    let config = || capture_config().cold(tier());
    let mut archive = Archive::open(&root, config()).expect("open");
    for b in 0..6 {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
    let before = served(&archive);
    let data_files = archive.state().streams["capture"].files.len();
    // Another archive in the same store, under another prefix: never touched.
    put(
        &store,
        "arch-b/streams/capture/rows/000000000001.parquet",
        b"not ours",
    );

    // Everything moves (a budget of 0 local bytes).
    let reports = archive
        .offload(
            Some(&OffloadPolicy::default().local_budget(0)),
            0,
            |_, _, _| {},
        )
        .expect("offload");
    assert_eq!(reports.len(), 1, "{name}: {reports:?}");
    assert_eq!(reports[0].files, data_files, "{name}: {reports:?}");
    assert!(reports[0].failed.is_empty(), "{name}: {reports:?}");
    let stream = &archive.state().streams["capture"];
    assert!(
        stream.files.iter().all(|f| f.cold.is_some()),
        "{name}: all data files cold"
    );
    assert!(
        stream.levels.iter().all(|f| f.cold.is_none()),
        "{name}: level files stay local"
    );
    let local_rows = std::fs::read_dir(root.join("streams/capture/rows"))
        .expect("rows dir")
        .filter(|e| e.as_ref().map_or(true, |e| e.file_name() != "_delta_log"))
        .count();
    assert_eq!(
        local_rows, 0,
        "{name}: local copies deleted after the record"
    );
    assert_eq!(
        objects(&store, "arch-a/streams").len(),
        data_files,
        "{name}: one object per file"
    );
    assert_eq!(
        served(&archive),
        before,
        "{name}: reads answer exactly as before"
    );
    // A cold read costs one ranged GET per row group once a file's footer is cached (a
    // packed row group once, however many tracks' slices it holds).
    {
        let reader = Archive::open(&root, config().read_only(true)).expect("open");
        let groups: usize = reader.state().streams["capture"]
            .files
            .iter()
            .map(|f| f.row_groups().len())
            .sum();
        let gets = |a: &Archive| a.cold_requests().expect("a tier")[1] as usize;
        // The open reads the files recorded by their row groups (format 11) for their
        // slices: magic, footer and each row group once; the footers stay cached.
        let rows_form: Vec<usize> = reader.state().streams["capture"]
            .files
            .iter()
            .filter(|f| f.format == Some(series_archive::archive::manifest::ROWS_FORMAT))
            .map(|f| f.row_groups().len())
            .collect();
        let opened = gets(&reader);
        assert_eq!(
            opened,
            2 * rows_form.len() + rows_form.iter().sum::<usize>(),
            "{name}: the open reads each format-11 file's magic, footer and row groups"
        );
        reader
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("rows");
        let first = gets(&reader);
        assert_eq!(
            first - opened,
            2 * (data_files - rows_form.len()) + groups,
            "{name}: magic + footer (unless the open read them) + one per group"
        );
        reader
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("rows");
        assert_eq!(gets(&reader) - first, groups, "{name}: footers cached");
    }
    assert!(
        archive.verify(|_, _| {}).is_empty(),
        "{name}: verify reads the cold tier"
    );
    assert!(
        archive
            .files("capture")
            .expect("files")
            .iter()
            .all(|f| f.starts_with(url)),
        "{name}: files prints object URLs"
    );
    drop(archive);

    // Reopened (read-only, and writable): the same, from the cold tier.
    let reader = Archive::open(&root, config().read_only(true)).expect("read-only open");
    assert_eq!(
        served(&reader),
        before,
        "{name}: a read-only open reads cold files"
    );
    drop(reader);
    let mut archive = Archive::open(&root, config()).expect("reopen");
    assert!(archive.recovery().cold_orphans_removed.is_empty(), "{name}");
    assert_eq!(served(&archive), before, "{name}");

    // New barriers stay local; compaction reads cold inputs; retirement deletes objects.
    for b in 6..9 {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
    let grown = served(&archive);
    archive
        .compact(true, |_, _, _| {})
        .expect("compact across tiers");
    assert_eq!(
        served(&archive),
        grown,
        "{name}: compaction across tiers is equal"
    );
    archive
        .offload(
            Some(&OffloadPolicy::default().local_budget(0)),
            0,
            |_, _, _| {},
        )
        .expect("offload again");
    archive
        .retire_track("capture", &["run_0".to_owned()])
        .expect("retire");
    let named: Vec<String> = archive
        .state()
        .live_files()
        .filter_map(|f| f.cold.clone())
        .map(|u| {
            u.strip_prefix(&format!("{url}/"))
                .map(|r| format!("arch-a/{r}"))
                .expect("under the tier")
        })
        .collect();
    let mut named = named;
    named.sort();
    assert_eq!(
        objects(&store, "arch-a/streams"),
        named,
        "{name}: exactly the live cold files have objects"
    );
    let after_retire = served(&archive);
    drop(archive);

    // An upload no record names (a crash between upload and record) is removed by the next
    // writable open; the other archive's object is not.
    put(
        &store,
        "arch-a/streams/capture/rows/000000009999.parquet",
        b"orphan",
    );
    let archive = Archive::open(&root, config()).expect("reopen");
    assert_eq!(
        archive.recovery().cold_orphans_removed,
        vec![format!("{url}/streams/capture/rows/000000009999.parquet")],
        "{name}"
    );
    // No record ever named it and no local file accounts for it (it could be the only copy
    // of data a `repair` dropped the record of): its bytes are kept as evidence first.
    let kept: Vec<&String> = archive
        .recovery()
        .quarantined
        .iter()
        .filter(|p| p.ends_with("streams/capture/rows/000000009999.parquet"))
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "{name}: {:?}",
        archive.recovery().quarantined
    );
    assert_eq!(
        std::fs::read(root.join(kept[0])).expect("the evidence"),
        b"orphan",
        "{name}"
    );
    assert_eq!(served(&archive), after_retire, "{name}");
    assert_eq!(
        objects(&store, "arch-b"),
        vec!["arch-b/streams/capture/rows/000000000001.parquet".to_owned()],
        "{name}: another prefix is never touched"
    );
    drop(archive);

    // A prefix belongs to one archive: a second archive configured with the same prefix is
    // refused before it lists or deletes anything (its sweep would remove every object the
    // first archive's manifest names), and so is a prefix holding objects nobody claimed.
    let objects_before = objects(&store, "");
    for (prefix, why) in [
        ("arch-a", "belongs to another archive"),
        ("arch-b", "does not name"),
    ] {
        let other = dir.join(format!("other-{name}-{prefix}"));
        let tier = ColdTier::new(store.clone(), prefix, format!("{url}-{prefix}")).expect("tier");
        match Archive::open(&other, capture_config().cold(tier)) {
            Err(e) => assert!(e.to_string().contains(why), "{name}: {prefix}: {e}"),
            Ok(_) => panic!("{name}: a second archive claimed {prefix}"),
        }
    }
    assert_eq!(
        objects(&store, ""),
        objects_before,
        "{name}: nothing was touched"
    );
    let archive = Archive::open(&root, config()).expect("the owner reopens");
    assert_eq!(served(&archive), after_retire, "{name}");
    assert!(archive.recovery().cold_orphans_removed.is_empty(), "{name}");
}

#[test]
fn the_shared_suite_on_the_local_file_system() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = dir.path().join("bucket");
    std::fs::create_dir_all(&bucket).expect("mkdir");
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::local::LocalFileSystem::new_with_prefix(&bucket).expect("a local store"),
    );
    let url = format!("file://{}/arch-a", bucket.display());
    suite("local", store, &url, dir.path());
}

#[test]
fn the_shared_suite_in_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    suite(
        "memory",
        Arc::new(InMemory::new()),
        "memory:///arch-a",
        dir.path(),
    );
}

#[test]
fn the_shared_suite_on_s3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let moto = s3::Moto::start(&["tier-suite"]);
    suite(
        "s3",
        Arc::new(moto.store("tier-suite")),
        "s3://tier-suite/arch-a",
        dir.path(),
    );
}

/// How the faulty store misbehaves.
#[derive(Debug, Default)]
struct Faulty {
    inner: InMemory,
    /// Fail this many puts with a 503-like error.
    fail_puts: AtomicUsize,
    /// Perform this many puts, then answer an error anyway (the outcome is unknown).
    unknown_puts: AtomicUsize,
    /// Store this many puts with one byte flipped, and answer success.
    corrupt_puts: AtomicUsize,
    /// Fail this many reads.
    fail_gets: AtomicUsize,
    /// Stall this many reads for two seconds.
    stall_gets: AtomicUsize,
    /// Reset the connection on this many parts of multipart uploads.
    fail_parts: Arc<AtomicUsize>,
    /// Multipart uploads aborted.
    aborted: Arc<AtomicUsize>,
    /// Multipart uploads completed.
    completed: Arc<AtomicUsize>,
}

/// A multipart upload whose parts can fail mid-upload, counting aborts and completions.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    fail_parts: Arc<AtomicUsize>,
    aborted: Arc<AtomicUsize>,
    completed: Arc<AtomicUsize>,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        if take(&self.fail_parts) {
            return Box::pin(async { Err(unavailable("connection reset mid-upload")) });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.completed.fetch_add(1, Ordering::SeqCst);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.aborted.fetch_add(1, Ordering::SeqCst);
        self.inner.abort().await
    }
}

fn take(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

fn unavailable(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: format!("503 Service Unavailable ({what})").into(),
    }
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if take(&self.fail_puts) {
            return Err(unavailable("put"));
        }
        // One fault per upload: an unknown outcome, or else a corrupted body.
        let unknown = take(&self.unknown_puts);
        let payload = if !unknown && take(&self.corrupt_puts) {
            let mut bytes: Vec<u8> = payload.iter().flat_map(|b| b.iter().copied()).collect();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x40;
            PutPayload::from(bytes)
        } else {
            payload
        };
        let done = self.inner.put_opts(location, payload, opts).await?;
        if unknown {
            return Err(unavailable("connection reset after the body was sent"));
        }
        Ok(done)
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if take(&self.fail_puts) {
            return Err(unavailable("multipart"));
        }
        Ok(Box::new(FaultyUpload {
            inner: self.inner.put_multipart_opts(location, opts).await?,
            fail_parts: self.fail_parts.clone(),
            aborted: self.aborted.clone(),
            completed: self.completed.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if take(&self.fail_gets) {
            return Err(unavailable("get"));
        }
        if take(&self.stall_gets) {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[test]
fn a_faulty_store_records_nothing_partial_loses_nothing_and_never_hangs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let faulty = Arc::new(Faulty::default());
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let tier = || {
        ColdTier::new(store.clone(), "a", "memory:///a")
            .expect("tier")
            .with_timeout(Duration::from_millis(500))
    };
    let config = || capture_config().cold(tier());
    let mut archive = Archive::open(&root, config()).expect("open");
    for b in 0..4 {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
    let before = served(&archive);
    let files = archive.state().streams["capture"].files.len();
    let everything = OffloadPolicy::default().local_budget(0);

    // A 503 on one upload, an unknown outcome on another, and one stored with a flipped
    // byte (the read-back catches it): those three stay local and unrecorded, their objects
    // are not left behind, the rest move.
    faulty.fail_puts.store(1, Ordering::SeqCst);
    faulty.unknown_puts.store(1, Ordering::SeqCst);
    faulty.corrupt_puts.store(1, Ordering::SeqCst);
    let report = archive
        .offload(Some(&everything), 0, |_, _, _| {})
        .expect("offload with failures");
    assert_eq!(report[0].failed.len(), 3, "{report:?}");
    assert!(
        report[0]
            .failed
            .iter()
            .any(|f| f.contains("digest mismatch")),
        "{report:?}"
    );
    assert_eq!(report[0].files, files - 3, "{report:?}");
    let cold: Vec<String> = archive
        .state()
        .live_files()
        .filter_map(|f| f.cold.clone())
        .collect();
    assert_eq!(cold.len(), files - 3);
    assert_eq!(
        objects(&store, "a/streams").len(),
        files - 3,
        "no object without a record"
    );
    assert_eq!(served(&archive), before, "nothing lost");
    // Retried later, the rest move.
    moves_all(&mut archive, &everything, 3);
    assert_eq!(served(&archive), before);

    // A cold read that fails is refused as transient, never short; a stalled one times out.
    for (what, counter) in [("503", &faulty.fail_gets), ("stall", &faulty.stall_gets)] {
        let reader = Archive::open(&root, config().read_only(true)).expect("open");
        counter.store(1, Ordering::SeqCst);
        let started = std::time::Instant::now();
        match reader.read_rows("capture", &[], Unbounded, Unbounded) {
            Err(ReadError::Stored(e)) => {
                assert_eq!(e.kind, StoredErrorKind::Unavailable, "{what}: {e}");
                assert!(e.is_transient(), "{what}: {e}");
                // At the contract boundary it is an `Unreadable` that says a retry may help.
                match BeneathWindow::from(e) {
                    BeneathWindow::Unreadable(u) => assert!(u.is_transient(), "{what}: {u}"),
                    other => panic!("{what}: {other:?}"),
                }
            }
            other => panic!(
                "{what}: expected a transient Unreadable, got {:?}",
                other.map(|b| b.num_rows())
            ),
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: never a hang ({:?})",
            started.elapsed()
        );
        counter.store(0, Ordering::SeqCst);
        assert_eq!(served(&reader), before, "{what}: the retry answers whole");
    }
}

/// A tier whose uploads the server checks (here a local directory opened from its URL, as S3
/// is with a checksum on every upload) takes no read-back, so the bytes are checked before
/// they go: a local file damaged since it was sealed is refused, stays local and unrecorded,
/// and leaves no object; repaired, it moves, and every answer is as before.
#[test]
fn a_checked_tier_refuses_a_damaged_file_before_it_goes_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, bucket) = (dir.path().join("archive"), dir.path().join("bucket"));
    std::fs::create_dir_all(&bucket).expect("mkdir bucket");
    let url = format!("file://{}/site", bucket.display());
    let tier = || ColdTier::from_url(&url).expect("tier");
    assert!(tier().verified_puts());
    let mut archive = Archive::open(&root, capture_config().cold(tier())).expect("open");
    for b in 0..4 {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
    let before = served(&archive);
    let files: Vec<String> = archive.state().streams["capture"]
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    let victim = root.join(&files[0]);
    let original = std::fs::read(&victim).expect("read");
    let mut damaged = original.clone();
    damaged[4] ^= 0xff; // the first row group's first byte, after the leading magic
    std::fs::write(&victim, &damaged).expect("damage");

    let everything = OffloadPolicy::default().local_budget(0);
    let report = archive
        .offload(Some(&everything), 0, |_, _, _| {})
        .expect("offload");
    assert_eq!(report[0].failed.len(), 1, "{report:?}");
    assert!(
        report[0].failed[0].contains("digest mismatch") && report[0].failed[0].contains(&files[0]),
        "{report:?}"
    );
    assert_eq!(report[0].files, files.len() - 1, "{report:?}");
    let still = archive
        .state()
        .live_files()
        .find(|f| f.path == files[0])
        .expect("still named");
    assert!(still.cold.is_none(), "unrecorded: {:?}", still.cold);
    assert!(victim.exists(), "left local");
    let uploaded = walk(&bucket.join("site/streams"));
    assert_eq!(uploaded.len(), files.len() - 1, "{uploaded:?}");
    assert!(
        !uploaded.iter().any(|p| p.ends_with(&files[0])),
        "{uploaded:?}"
    );

    std::fs::write(&victim, &original).expect("repair");
    moves_all(&mut archive, &everything, 1);
    assert_eq!(served(&archive), before, "nothing lost");
}

/// Offloads under `policy` and checks that `moved` files went and none failed.
fn moves_all(archive: &mut Archive, policy: &OffloadPolicy, moved: usize) {
    let report = archive
        .offload(Some(policy), 0, |_, _, _| {})
        .expect("offload");
    assert_eq!(
        (report[0].files, report[0].failed.len()),
        (moved, 0),
        "{report:?}"
    );
}

const CRASH_DIR: &str = "SERIES_ARCHIVE_TIER_CRASH_DIR";
const CRASH_AT: &str = "SERIES_ARCHIVE_TIER_CRASH_AT";

fn local_tier(bucket: &Path) -> ColdTier {
    std::fs::create_dir_all(bucket).expect("mkdir bucket");
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::local::LocalFileSystem::new_with_prefix(bucket).expect("a local store"),
    );
    ColdTier::new(store, "site", format!("file://{}/site", bucket.display())).expect("tier")
}

/// The child: seals four barriers, then offloads everything with an abort at the chosen
/// point. A no-op unless both variables are set.
#[test]
fn offload_crash_child() {
    let (Ok(dir), Ok(at)) = (std::env::var(CRASH_DIR), std::env::var(CRASH_AT)) else {
        return;
    };
    let dir = Path::new(&dir);
    let point = series_archive::archive::FaultPoint::parse(&at).expect("a fault point");
    {
        let mut archive = Archive::open(dir.join("archive"), capture_config()).expect("open");
        for b in 0..4 {
            stage(&mut archive, b);
            archive.seal_all().expect("seal");
        }
    }
    let mut archive = Archive::open(
        dir.join("archive"),
        capture_config()
            .cold(local_tier(&dir.join("bucket")))
            .faults(series_archive::archive::Faults::abort_at(point)),
    )
    .expect("open");
    let outcome = archive.offload(
        Some(&OffloadPolicy::default().local_budget(0)),
        0,
        |_, _, _| {},
    );
    eprintln!("offload returned instead of crashing: {outcome:?}");
    std::process::exit(3);
}

/// A real crash after the upload (no record) and after the record (local copies not yet
/// deleted): after reopening, every row is served from exactly one tier, the leftovers are
/// cleaned (orphan objects removed, stale local copies deleted), and the archive verifies.
#[test]
fn a_crash_inside_offload_leaves_every_row_in_exactly_one_tier() {
    use series_archive::archive::FaultPoint;
    for (point, moved) in [
        (FaultPoint::AfterUpload, false),
        (FaultPoint::AfterRecord, true),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "offload_crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR, dir.path())
            .env(CRASH_AT, point.name())
            .output()
            .expect("run the child");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "{}: the child aborts: {}",
            point.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let bucket = dir.path().join("bucket");
        let objects_before: Vec<_> = walk(&bucket.join("site/streams"));
        assert!(
            !objects_before.is_empty(),
            "{}: uploads happened",
            point.name()
        );
        let archive = Archive::open(
            dir.path().join("archive"),
            capture_config().cold(local_tier(&bucket)),
        )
        .expect("reopen");
        let files = &archive.state().streams["capture"].files;
        assert!(
            files.iter().all(|f| f.cold.is_some() == moved),
            "{}: the record decides the tier of every file",
            point.name()
        );
        let locals = walk(&dir.path().join("archive/streams/capture/rows"));
        let objects = walk(&bucket.join("site/streams"));
        // The prefix is claimed by this archive: the same token at the root and the prefix.
        let token = |p: std::path::PathBuf| std::fs::read_to_string(p).expect("OWNER");
        assert_eq!(
            token(bucket.join("site/OWNER")),
            token(dir.path().join("archive/OWNER")),
            "{}",
            point.name()
        );
        if moved {
            assert!(locals.is_empty(), "stale local copies deleted: {locals:?}");
            assert_eq!(objects.len(), files.len(), "one object per cold file");
        } else {
            assert!(objects.is_empty(), "orphan uploads removed: {objects:?}");
            assert_eq!(locals.len(), files.len());
            assert_eq!(
                archive.recovery().cold_orphans_removed.len(),
                objects_before.len()
            );
        }
        assert!(archive.verify(|_, _| {}).is_empty(), "{}", point.name());
        let (rows, positions) = {
            let mut all = (Vec::new(), Vec::new());
            for b in 0..4 {
                let (r, p) = workload(2, 2, 8, b * 8);
                all.0.extend(r);
                all.1.extend(p);
            }
            all
        };
        let want: Vec<(u64, Row)> = positions.into_iter().zip(rows).collect();
        let got = rows_of(
            &archive
                .read_rows("capture", &[], Unbounded, Unbounded)
                .expect("rows"),
        );
        assert_eq!(got, want, "{}: every row, once", point.name());
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.expect("entry").path();
        if p.file_name().is_some_and(|n| n == "_delta_log") {
            continue;
        }
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Files above the multipart threshold go up in parts; a connection reset on a part aborts
/// the upload, records nothing and leaves the file local; the retry completes it.
#[test]
fn a_multipart_upload_reset_mid_way_is_aborted_and_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let faulty = Arc::new(Faulty::default());
    let store: Arc<dyn ObjectStore> = faulty.clone();
    // Every data file here is a few KiB: parts of 1 KiB make each upload multipart.
    let tier = || {
        ColdTier::new(store.clone(), "m", "memory:///m")
            .expect("tier")
            .with_multipart(2048, 1024)
    };
    let mut archive = Archive::open(&root, capture_config().cold(tier())).expect("open");
    for b in 0..3 {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
    let before = served(&archive);
    let files = archive.state().streams["capture"].files.len();
    assert!(
        archive.state().streams["capture"]
            .files
            .iter()
            .all(|f| f.bytes > 2048),
        "every upload is multipart"
    );
    faulty.fail_parts.store(1, Ordering::SeqCst);
    let everything = OffloadPolicy::default().local_budget(0);
    let report = archive
        .offload(Some(&everything), 0, |_, _, _| {})
        .expect("offload");
    assert_eq!(
        (report[0].files, report[0].failed.len()),
        (files - 1, 1),
        "{report:?}"
    );
    assert_eq!(
        faulty.aborted.load(Ordering::SeqCst),
        1,
        "the reset upload was aborted"
    );
    assert_eq!(faulty.completed.load(Ordering::SeqCst), files - 1);
    assert_eq!(
        objects(&store, "m/streams").len(),
        files - 1,
        "nothing partial left"
    );
    assert_eq!(served(&archive), before);
    let report = archive
        .offload(Some(&everything), 0, |_, _, _| {})
        .expect("retry");
    assert_eq!((report[0].files, report[0].failed.len()), (1, 0));
    assert_eq!(served(&archive), before);
    assert!(archive.verify(|_, _| {}).is_empty());
}

/// An archive with a cold tier can be used and dropped inside a caller's async task (the
/// tier's own runtime is never blocked on there, and shuts down without waiting).
#[test]
fn a_cold_archive_lives_and_dies_inside_a_callers_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let tier = ColdTier::new(store.clone(), "x", "memory:///x").expect("tier");
        let mut archive = Archive::open(&root, capture_config().cold(tier)).expect("open");
        stage(&mut archive, 0);
        archive.seal_all().expect("seal");
        let report = archive
            .offload(
                Some(&OffloadPolicy::default().local_budget(0)),
                0,
                |_, _, _| {},
            )
            .expect("offload inside an async task");
        assert_eq!(report[0].files, 1);
        let rows = archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("a cold read inside an async task");
        assert_eq!(rows.num_rows(), 32);
        drop(archive);
    });
}

/// A tier opened only to read a file the manifest names (no tier configured) is not the
/// configured tier: a writable open without one still refuses to offload, and reports no
/// cold requests of its own.
#[test]
fn a_tier_opened_to_read_is_not_the_configured_tier() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("archive");
    let bucket = dir.path().join("bucket");
    {
        let mut archive =
            Archive::open(&root, capture_config().cold(local_tier(&bucket))).expect("open");
        for b in 0..2 {
            stage(&mut archive, b);
            archive.seal_all().expect("seal");
        }
        archive
            .offload(
                Some(&OffloadPolicy::default().local_budget(0)),
                0,
                |_, _, _| {},
            )
            .expect("offload");
    }
    // No tier configured: the cold files are read through a tier opened from their URL.
    let mut archive = Archive::open(&root, capture_config()).expect("open");
    assert_eq!(
        archive
            .read_rows("capture", &[], Unbounded, Unbounded)
            .expect("cold rows")
            .num_rows(),
        64
    );
    assert_eq!(archive.cold_requests(), None, "no tier is configured");
    stage(&mut archive, 2);
    archive.seal_all().expect("seal");
    let refused = archive.offload(
        Some(&OffloadPolicy::default().local_budget(0)),
        0,
        |_, _, _| {},
    );
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("no cold tier is declared")),
        "{refused:?}"
    );
}
