//! The cold tier: any `object_store` store (S3, GCS, Azure, a local file system, memory)
//! under one prefix per archive.
//!
//! `object_store` is async and the archive is sync. The tier owns the bridge: a small tokio
//! runtime of its own, on whose threads every request runs; a caller's thread waits on a
//! channel with a deadline. A caller inside its own tokio runtime is never blocked on with
//! `block_on`, and a request that outlives its deadline is a transient failure, never a hang.

use crate::archive::error::ColdError;
use crate::archive::io::priority;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How many times a delete that fails transiently is sent in all ([`ColdTier::delete`]).
pub const DELETE_ATTEMPTS: usize = 3;
/// Files at least this large are uploaded in parts (S3 needs parts of 5 MiB or more). Below
/// it, one PUT carries the whole file and its checksum: AWS advises multipart uploads from
/// about 100 MB, and below that a multipart upload's extra requests (create, complete) cost
/// more than its parts save (a 61 MB segment: 9 requests, `docs/bench-tiers.md`).
pub const MULTIPART_THRESHOLD: usize = 100 << 20;

/// A listing's objects: archive-relative paths, sizes and entity tags.
pub type Listing = Vec<(String, u64, Option<String>)>;
/// How many uploads [`ColdTier::put_all`] keeps in flight at once: a request's latency, not
/// the link, bounds one upload at a time (S3 answers a PUT in tens of milliseconds).
pub const UPLOADS_AT_ONCE: usize = 8;
/// The size of one part of a multipart upload.
pub const PART_SIZE: usize = 8 << 20;
/// How long one request may take before it is abandoned as a transient failure.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The environment variable that sets [`DEFAULT_TIMEOUT`] for tiers opened from a URL
/// ([`ColdTier::from_url`]: the command line's, and those the manifest records), in seconds.
pub const TIMEOUT_ENV: &str = "SERIES_ARCHIVE_COLD_TIMEOUT";
/// How [`Archive::verify`](crate::archive::engine::Archive::verify) begins what it reports of a cold file it
/// could not check because its tier did not answer: not damage, and not verified.
pub const UNVERIFIED: &str = "UNVERIFIED";

/// Request counters, for `inspect` and the benchmarks.
#[derive(Debug, Default)]
pub struct Requests {
    /// Objects written (a multipart upload counts once per part).
    pub puts: AtomicU64,
    /// Reads (whole or ranged).
    pub gets: AtomicU64,
    /// Deletes.
    pub deletes: AtomicU64,
    /// Listings.
    pub lists: AtomicU64,
    /// Ranges answered from the local cache (`archive::io::cache`) instead of a GET.
    pub cached: AtomicU64,
}

impl Requests {
    /// `(puts, gets, deletes, lists)` so far.
    pub fn snapshot(&self) -> [u64; 4] {
        [
            self.puts.load(Ordering::Relaxed),
            self.gets.load(Ordering::Relaxed),
            self.deletes.load(Ordering::Relaxed),
            self.lists.load(Ordering::Relaxed),
        ]
    }
}

/// One cold tier: a store, the prefix the archive lives under in it, and the URL that names
/// that prefix (`s3://bucket/prefix`), which is what the manifest records.
pub struct ColdTier {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
    /// Always `Some` until the tier is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    /// The runtime of requests sent by background threads (the replicator's,
    /// [`priority::is_background`]), its threads at the background priority; built at the
    /// first such request.
    background: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
    timeout: Duration,
    requests: Requests,
    /// Files at least this large are uploaded in parts of `part_size`.
    multipart_threshold: usize,
    part_size: usize,
    /// The endpoint an S3 tier opened from a URL was pointed at (`AWS_ENDPOINT`), if any:
    /// two servers may hold the same bucket name.
    endpoint: Option<String>,
    /// Whether an upload that succeeds is known whole (a checksum the server checks, or a
    /// local write renamed into place): see [`ColdTier::verified_puts`].
    verified_puts: bool,
}

impl fmt::Debug for ColdTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColdTier")
            .field("url", &self.url)
            .field("store", &self.store.to_string())
            .finish_non_exhaustive()
    }
}

impl Drop for ColdTier {
    /// Stops the tier's runtime without waiting: an archive may be dropped inside a caller's
    /// async task, where blocking on a runtime's shutdown is not allowed.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        if let Some(Some(runtime)) = self.background.take() {
            runtime.shutdown_background();
        }
    }
}

/// A request the tier could not send: its runtime is stopping.
fn shutting_down(what: &str) -> ColdError {
    ColdError {
        message: format!("{what}: the cold tier is shutting down"),
        transient: true,
        missing: false,
    }
}

/// A request that did not answer within its deadline.
fn no_answer(what: &str, timeout: Duration) -> ColdError {
    ColdError {
        message: format!("{what}: no answer within {timeout:?}"),
        transient: true,
        missing: false,
    }
}

fn is_transient(e: &object_store::Error) -> bool {
    !matches!(
        e,
        object_store::Error::NotFound { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::AlreadyExists { .. }
            | object_store::Error::Precondition { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

impl ColdTier {
    /// A tier over `store`, the archive living under `prefix` in it; `url` names that
    /// prefix for people and for the manifest (`s3://bucket/prefix`, `memory:///prefix`).
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        url: impl Into<String>,
    ) -> Result<ColdTier, ColdError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            // At most 15 characters: the part of a name `top -H` and perf show.
            .thread_name("archive-cold")
            .enable_all()
            .build()
            .map_err(|e| ColdError {
                message: format!("starting the cold tier's runtime: {e}"),
                transient: false,
                missing: false,
            })?;
        let prefix = ObjectPath::parse(prefix.trim_matches('/')).map_err(|e| ColdError {
            message: format!("cold prefix {prefix:?}: {e}"),
            transient: false,
            missing: false,
        })?;
        Ok(ColdTier {
            store,
            prefix,
            url: url.into().trim_end_matches('/').to_owned(),
            runtime: Some(runtime),
            background: std::sync::OnceLock::new(),
            timeout: DEFAULT_TIMEOUT,
            requests: Requests::default(),
            multipart_threshold: MULTIPART_THRESHOLD,
            part_size: PART_SIZE,
            endpoint: None,
            verified_puts: false,
        })
    }

    /// A tier from a URL: `s3://bucket/prefix` (credentials, region and endpoint from the
    /// standard AWS environment variables, as `AmazonS3Builder::from_env` reads them),
    /// `file:///dir/prefix` or `memory:///prefix`.
    pub fn from_url(url: &str) -> Result<ColdTier, ColdError> {
        let bad = |m: String| ColdError {
            message: format!("cold tier {url:?}: {m}"),
            transient: false,
            missing: false,
        };
        let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        let mut endpoint = None;
        let (store, prefix): (Arc<dyn ObjectStore>, String) = match parsed.scheme() {
            "s3" | "s3a" => {
                let mut builder = object_store::aws::AmazonS3Builder::from_env().with_url(url);
                // Every upload carries its SHA-256, which the server checks before it stores
                // the object: an upload that succeeds is whole, with no read-back (unless the
                // environment chose the algorithm: AWS_CHECKSUM_ALGORITHM).
                if std::env::var_os("AWS_CHECKSUM_ALGORITHM").is_none() {
                    builder =
                        builder.with_checksum_algorithm(object_store::aws::Checksum::SHA256);
                    // The checksum header is signed and the server checks the body against
                    // it, so the signature need not hash the body a second time (unless the
                    // environment says how to sign: AWS_UNSIGNED_PAYLOAD).
                    if std::env::var_os("AWS_UNSIGNED_PAYLOAD").is_none() {
                        builder = builder.with_unsigned_payload(true);
                    }
                }
                endpoint = builder
                    .get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint);
                let store = builder.build().map_err(|e| bad(e.to_string()))?;
                (Arc::new(store), parsed.path().to_owned())
            }
            "file" | "memory" => {
                let (store, path) =
                    object_store::parse_url(&parsed).map_err(|e| bad(e.to_string()))?;
                (Arc::from(store), path.to_string())
            }
            other => {
                return Err(bad(format!(
                    "scheme {other:?} is not a cold tier this build opens from a URL (s3://, file://, memory://); pass a store to Config::cold instead"
                )))
            }
        };
        let mut tier = ColdTier::new(store, &prefix, url)?;
        tier.endpoint = endpoint;
        // S3 with a checksum on every upload (set above, or chosen by the environment), or a
        // local directory or memory, which store an object whole or not at all.
        tier.verified_puts = true;
        Ok(match std::env::var(TIMEOUT_ENV) {
            Ok(text) => {
                let seconds = text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        bad(format!(
                            "{TIMEOUT_ENV}={text:?} is not a positive number of seconds"
                        ))
                    })?;
                tier.with_timeout(Duration::from_secs_f64(seconds))
            }
            Err(_) => tier,
        })
    }

    /// Sets how long one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> ColdTier {
        self.timeout = timeout;
        self
    }

    /// Uploads files of at least `threshold` bytes in parts of `part_size` (S3 needs parts
    /// of 5 MiB or more but the last; the defaults are [`MULTIPART_THRESHOLD`] and
    /// [`PART_SIZE`]).
    pub fn with_multipart(mut self, threshold: usize, part_size: usize) -> ColdTier {
        self.multipart_threshold = threshold;
        self.part_size = part_size.max(1);
        self
    }

    /// Whether an upload that succeeds is known whole without reading it back: a tier opened
    /// from a URL (S3 with a checksum on every upload, which the server checks; a local
    /// directory, written and renamed). A tier built from a store ([`ColdTier::new`]) says
    /// no: its store may check nothing.
    pub fn verified_puts(&self) -> bool {
        self.verified_puts
    }

    /// The endpoint an S3 tier opened from a URL was pointed at, if one was set.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// The URL naming the tier's prefix.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object URL of `relative` (an archive-relative path such as
    /// `streams/capture/rows/000000000001.parquet`).
    pub fn object_url(&self, relative: &str) -> String {
        format!("{}/{relative}", self.url)
    }

    /// The archive-relative path an object URL of this tier names.
    pub fn relative<'u>(&self, object_url: &'u str) -> Option<&'u str> {
        object_url
            .strip_prefix(self.url.as_str())?
            .strip_prefix('/')
    }

    /// The requests made so far.
    pub fn requests(&self) -> &Requests {
        &self.requests
    }

    fn location(&self, relative: &str) -> ObjectPath {
        relative
            .split('/')
            .filter(|p| !p.is_empty())
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    /// The runtime of background threads' requests: its threads at the background priority
    /// (one worker: background work is one pass at a time). Falls back to the tier's own
    /// runtime if it cannot be started.
    fn background_runtime(&self) -> Option<&tokio::runtime::Runtime> {
        self.background
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("archive-cold-bg")
                    .on_thread_start(priority::lower_priority)
                    .enable_all()
                    .build()
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "starting the cold tier's background runtime")
                    })
                    .ok()
            })
            .as_ref()
            .or(self.runtime.as_ref())
    }

    /// The runtime the calling thread's requests run on: the background one for a background
    /// thread ([`priority::is_background`]), the tier's own otherwise.
    fn callers_runtime(&self) -> Option<&tokio::runtime::Runtime> {
        if priority::is_background() {
            self.background_runtime()
        } else {
            self.runtime.as_ref()
        }
    }

    /// Runs `request` on the tier's runtime (the background one for a background thread's
    /// request); waits at most the timeout.
    fn run<T: Send + 'static>(
        &self,
        what: String,
        request: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Result<T, ColdError> {
        self.begin(what, request).wait()
    }

    /// Sends `request` on the tier's runtime (the background one for a background thread's
    /// request) and answers at once; [`Pending::wait`] waits at most the timeout.
    fn begin<T: Send + 'static>(
        &self,
        what: String,
        request: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Pending<'_, T> {
        let answer = self.callers_runtime().map(|runtime| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let timeout = self.timeout;
            runtime.spawn(async move {
                let outcome = tokio::time::timeout(timeout, request).await;
                let _ = tx.send(outcome);
            });
            rx
        });
        Pending {
            tier: self,
            what,
            answer,
        }
    }

    /// A request's outcome under its deadline, as the tier reports it.
    fn outcome<T>(
        &self,
        what: &str,
        outcome: Result<object_store::Result<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, ColdError> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(ColdError {
                transient: is_transient(&e),
                missing: matches!(e, object_store::Error::NotFound { .. }),
                message: format!("{what}: {e}"),
            }),
            Err(_) => Err(no_answer(what, self.timeout)),
        }
    }

    /// Writes `bytes` as the object of `relative`: one request below the multipart
    /// threshold, otherwise parts of `PART_SIZE`, the upload aborted on any failure.
    pub fn put(&self, relative: &str, bytes: Bytes) -> Result<(), ColdError> {
        let (what, upload) = self.upload(relative, bytes);
        self.run(what, upload)
    }

    /// Writes each `(relative, bytes)` as [`ColdTier::put`] does, up to [`UPLOADS_AT_ONCE`]
    /// at a time, each under its own deadline; answers each upload's outcome, in the order
    /// given. Nothing is said of the order in which the objects appear.
    pub fn put_all(&self, uploads: &[(String, Bytes)]) -> Vec<Result<(), ColdError>> {
        let Some(runtime) = self.callers_runtime() else {
            return uploads
                .iter()
                .map(|(relative, _)| {
                    Err(shutting_down(&format!(
                        "upload {}",
                        self.object_url(relative)
                    )))
                })
                .collect();
        };
        let count = uploads.len();
        let timeout = self.timeout;
        let gate = Arc::new(tokio::sync::Semaphore::new(UPLOADS_AT_ONCE));
        let (tx, rx) = std::sync::mpsc::channel();
        let mut whats = Vec::with_capacity(count);
        for (i, (relative, bytes)) in uploads.iter().enumerate() {
            let (what, upload) = self.upload(relative, bytes.clone());
            whats.push(what);
            let (gate, tx) = (gate.clone(), tx.clone());
            runtime.spawn(async move {
                // The deadline starts when the upload does, not while it waits its turn.
                let _turn = gate.acquire_owned().await;
                let _ = tx.send((i, tokio::time::timeout(timeout, upload).await));
            });
        }
        drop(tx);
        let mut outcomes: Vec<Option<Result<(), ColdError>>> = (0..count).map(|_| None).collect();
        // Each waits its turn behind at most the others, each bounded by the deadline.
        let waves = count.div_ceil(UPLOADS_AT_ONCE).max(1) as u32;
        let deadline = std::time::Instant::now() + (timeout + Duration::from_secs(1)) * waves;
        while let Some(wait) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(wait) {
                Ok((i, outcome)) => outcomes[i] = Some(self.outcome(&whats[i], outcome)),
                Err(_) => break,
            }
        }
        outcomes
            .into_iter()
            .zip(&whats)
            .map(|(outcome, what)| outcome.unwrap_or_else(|| Err(no_answer(what, timeout))))
            .collect()
    }

    /// The request that writes `bytes` as the object of `relative` (counted now), and what
    /// to call it in an error: one PUT below the multipart threshold, otherwise parts of
    /// `part_size`, the upload aborted on any failure.
    fn upload(
        &self,
        relative: &str,
        bytes: Bytes,
    ) -> (
        String,
        std::pin::Pin<Box<dyn std::future::Future<Output = object_store::Result<()>> + Send>>,
    ) {
        let location = self.location(relative);
        let store = self.store.clone();
        let what = format!("upload {}", self.object_url(relative));
        if bytes.len() < self.multipart_threshold {
            self.requests.puts.fetch_add(1, Ordering::Relaxed);
            return (
                what,
                Box::pin(async move {
                    store
                        .put(&location, PutPayload::from(bytes))
                        .await
                        .map(|_| ())
                }),
            );
        }
        let part_size = self.part_size;
        let parts = bytes.len().div_ceil(part_size) as u64;
        self.requests.puts.fetch_add(parts, Ordering::Relaxed);
        (
            what,
            Box::pin(async move {
                let mut upload = store.put_multipart(&location).await?;
                let mut outcome = Ok(());
                for chunk in bytes.chunks(part_size) {
                    if let Err(e) = upload
                        .put_part(PutPayload::from(bytes.slice_ref(chunk)))
                        .await
                    {
                        outcome = Err(e);
                        break;
                    }
                }
                match outcome {
                    Ok(()) => match upload.complete().await {
                        Ok(_) => Ok(()),
                        Err(e) => {
                            let _ = upload.abort().await;
                            Err(e)
                        }
                    },
                    Err(e) => {
                        let _ = upload.abort().await;
                        Err(e)
                    }
                }
            }),
        )
    }

    /// Writes `bytes` as the object of `relative` only if no object is there (one
    /// conditional PUT). Answers `false`, writing nothing, when one already is.
    pub fn put_if_absent(&self, relative: &str, bytes: Bytes) -> Result<bool, ColdError> {
        let location = self.location(relative);
        let store = self.store.clone();
        self.requests.puts.fetch_add(1, Ordering::Relaxed);
        self.run(
            format!("create {}", self.object_url(relative)),
            async move {
                let opts = object_store::PutOptions::from(object_store::PutMode::Create);
                match store
                    .put_opts(&location, PutPayload::from(bytes), opts)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            },
        )
    }

    /// Bytes `offset..offset + len` of the object (one ranged GET).
    pub fn read(&self, relative: &str, offset: u64, len: u64) -> Result<Bytes, ColdError> {
        let location = self.location(relative);
        let store = self.store.clone();
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        self.run(
            format!(
                "read bytes {offset}..{} of {}",
                offset + len,
                self.object_url(relative)
            ),
            async move { store.get_range(&location, offset..offset + len).await },
        )
    }

    /// The whole object (one GET).
    pub fn get(&self, relative: &str) -> Result<Bytes, ColdError> {
        self.begin_get(relative).wait()
    }

    /// Sends the read of [`ColdTier::get`] and answers at once, so that requests that do not
    /// depend on each other wait one round trip together instead of one each.
    pub fn begin_get(&self, relative: &str) -> Pending<'_, Bytes> {
        let location = self.location(relative);
        let store = self.store.clone();
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        self.begin(format!("read {}", self.object_url(relative)), async move {
            store.get(&location).await?.bytes().await
        })
    }

    /// The object's size in bytes (one HEAD).
    pub fn size(&self, relative: &str) -> Result<u64, ColdError> {
        let location = self.location(relative);
        let store = self.store.clone();
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        self.run(
            format!("look up {}", self.object_url(relative)),
            async move { store.head(&location).await.map(|meta| meta.size) },
        )
    }

    /// Deletes the object (already absent is fine).
    ///
    /// A delete is idempotent (an absent object is deleted), so one that fails transiently is
    /// sent again, up to [`DELETE_ATTEMPTS`] times in all: S3's client sends it as a `POST`,
    /// which `object_store` does not retry once the request may have reached the server, and
    /// a delete whose answer was lost would otherwise fail the whole pass that made it.
    pub fn delete(&self, relative: &str) -> Result<(), ColdError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let location = self.location(relative);
            let store = self.store.clone();
            self.requests.deletes.fetch_add(1, Ordering::Relaxed);
            let outcome = self.run(
                format!("delete {}", self.object_url(relative)),
                async move {
                    match store.delete(&location).await {
                        Err(object_store::Error::NotFound { .. }) => Ok(()),
                        other => other,
                    }
                },
            );
            match outcome {
                Err(e) if e.transient && attempt < DELETE_ATTEMPTS => {}
                other => return other,
            }
        }
    }

    /// Every object under `relative_dir`, as archive-relative paths with their sizes.
    pub fn list(&self, relative_dir: &str) -> Result<Vec<(String, u64)>, ColdError> {
        Ok(self
            .list_tagged(relative_dir)?
            .into_iter()
            .map(|(path, size, _)| (path, size))
            .collect())
    }

    /// Sends the listing of [`ColdTier::list_tagged`] and answers at once (see
    /// [`ColdTier::begin_get`]).
    pub fn begin_list(&self, relative_dir: &str) -> Pending<'_, Listing> {
        let location = self.location(relative_dir);
        let store = self.store.clone();
        let prefix = self.prefix.clone();
        self.requests.lists.fetch_add(1, Ordering::Relaxed);
        self.begin(
            format!("list {}", self.object_url(relative_dir)),
            async move {
                let metas: Vec<object_store::ObjectMeta> =
                    store.list(Some(&location)).try_collect().await?;
                Ok(metas
                    .into_iter()
                    .filter_map(|m| {
                        let parts: Vec<String> = m
                            .location
                            .prefix_match(&prefix)?
                            .map(|p| p.as_ref().to_owned())
                            .collect();
                        Some((parts.join("/"), m.size, m.e_tag))
                    })
                    .collect())
            },
        )
    }

    /// Every object under `relative_dir`, as archive-relative paths with their sizes and
    /// entity tags (what the store answers to tell one object's bytes from another's under
    /// the same name; `None` where it gives none).
    pub fn list_tagged(&self, relative_dir: &str) -> Result<Listing, ColdError> {
        self.begin_list(relative_dir).wait()
    }
}

/// A request sent to a tier and not yet waited for ([`ColdTier::begin_get`],
/// [`ColdTier::begin_list`]). Dropped unwaited, its answer is discarded.
pub struct Pending<'t, T> {
    tier: &'t ColdTier,
    what: String,
    /// `None` when the tier is shutting down (nothing was sent).
    answer: Option<
        std::sync::mpsc::Receiver<Result<object_store::Result<T>, tokio::time::error::Elapsed>>,
    >,
}

impl<T> Pending<'_, T> {
    /// The request's outcome, waiting at most the tier's timeout for it.
    pub fn wait(self) -> Result<T, ColdError> {
        let Some(answer) = self.answer else {
            return Err(shutting_down(&self.what));
        };
        match answer.recv_timeout(self.tier.timeout + Duration::from_secs(1)) {
            Ok(outcome) => self.tier.outcome(&self.what, outcome),
            Err(_) => Err(no_answer(&self.what, self.tier.timeout)),
        }
    }
}

/// What `verify` learned of the cold tiers so far: those that did not answer, so that each
/// is asked once and every other file in it is reported unverified at once, not after a
/// timeout each.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    /// Tier URLs that failed to answer.
    unreachable: Vec<String>,
}

/// Verifies one committed file for [`Archive::verify`](crate::archive::engine::Archive::verify):
/// a cold one first by its size in the tier (one HEAD: an object longer or shorter than the
/// manifest records is damaged, even where the recorded ranges still read back whole), then,
/// local or cold, by `whole`: its length, footer and every row group digest, and whatever
/// else the caller reads of it in the same pass (`segment::verify_digests` alone). A tier that does
/// not answer (a timeout, a refused connection, a server error) is reported once, naming it,
/// and every file in it as [`UNVERIFIED`], without asking it again.
pub(crate) fn verify_file(
    store: &crate::archive::io::store::Store,
    file: &crate::archive::format::manifest::record::SegmentFile,
    reach: &mut Reach,
    whole: impl FnOnce() -> Result<(), crate::archive::error::StoredError>,
) -> Result<(), crate::archive::error::StoredError> {
    use crate::archive::error::{StoredError, StoredErrorKind};
    let Some(url) = file.cold.as_deref() else {
        return whole();
    };
    let tier_url = url
        .strip_suffix(file.path.as_str())
        .map(|t| t.trim_end_matches('/'))
        .unwrap_or(url)
        .to_owned();
    let unverified = |tier: &str, why: String| {
        StoredError::new(
            StoredErrorKind::Unavailable,
            format!("{UNVERIFIED} {url}: not verified: {why}; run `verify` again once the cold tier {tier} answers"),
        )
    };
    if reach.unreachable.contains(&tier_url) {
        return Err(unverified(
            &tier_url,
            "its cold tier did not answer (above)".into(),
        ));
    }
    let tier = store.tier_for(url, &file.path).map_err(|e| {
        StoredError::new(
            StoredErrorKind::Io,
            format!("{url}: its cold tier cannot be opened: {e}"),
        )
    })?;
    let mut unreachable = |e: &dyn std::fmt::Display| {
        reach.unreachable.push(tier_url.clone());
        unverified(
            &tier_url,
            format!("the cold tier {tier_url} is unreachable ({e}); every other file in it is reported unverified without asking it again"),
        )
    };
    match tier.size(&file.path) {
        Ok(size) if size != file.bytes => {
            return Err(StoredError::corrupt(format!(
                "{url}: {size} bytes in the cold tier, the manifest recorded {}",
                file.bytes
            )))
        }
        Ok(_) => {}
        Err(e) if e.transient => return Err(unreachable(&e)),
        Err(e) if e.missing => {
            return Err(StoredError::new(
                StoredErrorKind::Missing,
                format!("{url} (named by the manifest) is not in the cold tier: {e}"),
            ))
        }
        Err(e) => return Err(StoredError::new(StoredErrorKind::Io, format!("{url}: {e}"))),
    }
    match whole() {
        Err(e) if e.kind == StoredErrorKind::Unavailable => Err(unreachable(&e)),
        other => other,
    }
}
