//! The archive's own replicator: a thread beside a writable handle that keeps the declared
//! replica (the archive's `REPLICA`) level with every commit, off the delivery path.
//!
//! ```text
//! writer: commit ─► hand the replicator what the commit proves (generation, durable bytes,
//!                   live files) ─► return (or, under a lag bound, wait for the bucket)
//! thread: take the newest hand-over ─► one pass (`replicate::replicate_committed`) ─►
//!         record where the bucket stands ─► wait for the next commit, and until PASS_GAP
//!         after this pass began (unless a barrier waits for the bucket); a failed pass
//!         is tried again, backing off up to BACKOFF_MAX
//! ```
//!
//! Hand-overs coalesce: the thread replicates the newest commit it was handed, so a slow
//! bucket costs passes, never memory. A pass reads only what the writer made durable before
//! handing it over, so it never uploads a record a crash could take back. Nothing here can
//! fail a commit: the commit is durable before the replicator hears of it; only a declared lag
//! bound ([`crate::archive::Config::max_lag`]) makes a barrier wait, and answer an error
//! saying so when the bucket does not catch up in time.

use super::replicate::{self, Committed};
use crate::archive::error::{ArchiveError, Result};
use crate::archive::io::cold::ColdTier;
use crate::archive::io::faults::Faults;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The first retry's delay after a failed pass; it doubles per failure up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest delay between two passes while the bucket keeps failing.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The least time from one pass's start to the next while no barrier waits for the bucket:
/// the commits of a busy writer go up several to a pass (each pass costs the owner check,
/// reading the manifest's new bytes and listing the Delta logs, on the writer's machine),
/// and the bucket still holds every commit within about this long of it (Litestream syncs
/// once a second). A barrier that waits under a lag bound, and a stop, end the pause at once.
const PASS_GAP: Duration = Duration::from_millis(250);
/// How long closing the handle waits for the thread's last pass before leaving it to end on
/// its own (a pass is bounded by the tier's request deadline).
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Where the archive's own replicator stands ([`crate::archive::Archive::replication`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Replication {
    /// The replica's prefix.
    pub url: String,
    /// Commits this handle made since it opened (its recovered state is commit 0).
    pub commits: u64,
    /// The newest of them the bucket holds, once a pass has succeeded.
    pub replicated: Option<u64>,
    /// Commits the bucket lacks: `commits − replicated`, or all of them and what the bucket
    /// lacked at the open (counted as one) while no pass has succeeded.
    pub behind: u64,
    /// Passes that succeeded.
    pub passes: u64,
    /// Failed passes since the last that succeeded.
    pub failures: u32,
    /// Why the last pass failed, while the bucket is failing.
    pub last_error: Option<String>,
    /// Set by [`Archive::stop_replication`](crate::archive::Archive::stop_replication) when
    /// its wait ended with a pass still running (a bucket that stalls, or is slow): that pass
    /// is left to finish on its own, or to end with the process.
    pub running: bool,
}

#[derive(Default)]
struct Progress {
    /// The newest hand-over the thread has not taken, and its commit number.
    pending: Option<(u64, Committed)>,
    shown: Replication,
    stopping: bool,
    exited: bool,
    /// Barriers waiting for the bucket under a lag bound ([`Replicator::wait_for`]): while
    /// any is, passes follow each other without a pause.
    waiting: usize,
}

struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits on `p` until `done` holds of the progress or `within` has passed; answers the
    /// guard and whether `done` holds.
    fn wait_until<'a>(
        &self,
        p: MutexGuard<'a, Progress>,
        within: Duration,
        done: impl Fn(&Progress) -> bool,
    ) -> (MutexGuard<'a, Progress>, bool) {
        let (p, _) = self
            .changed
            .wait_timeout_while(p, within, |p| !done(p))
            .unwrap_or_else(|e| e.into_inner());
        let held = done(&p);
        (p, held)
    }
}

/// The replicator of one writable handle; stopped when dropped.
pub(crate) struct Replicator {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Where [`Replicator::stop`] left it, once it was stopped.
    stopped: Option<Replication>,
}

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicator")
            .field("url", &self.shared.lock().shown.url)
            .finish_non_exhaustive()
    }
}

impl Replicator {
    /// Starts replicating the archive at `root` to `tier`, from `recovered`, the state the
    /// open recovered (commit 0): a bucket behind it from an earlier run is caught up first.
    pub(crate) fn start(
        root: PathBuf,
        tier: Arc<ColdTier>,
        faults: Faults,
        recovered: Committed,
    ) -> Result<Replicator> {
        let shared = Arc::new(Shared {
            progress: Mutex::new(Progress {
                pending: Some((0, recovered)),
                shown: Replication {
                    url: tier.url().to_owned(),
                    ..Replication::default()
                },
                ..Progress::default()
            }),
            changed: Condvar::new(),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            // At most 15 characters: the part of a name `top -H` and perf show.
            .name("archive-replica".into())
            .spawn(move || run(&root, &tier, &faults, &theirs))
            .map_err(|e| ArchiveError::Replica(format!("starting the replicator thread: {e}")))?;
        Ok(Replicator {
            shared,
            thread: Some(thread),
            stopped: None,
        })
    }

    /// Hands the thread what a commit proves; answers the commit's number.
    pub(crate) fn committed(&self, committed: Committed) -> u64 {
        let mut p = self.shared.lock();
        p.shown.commits += 1;
        let n = p.shown.commits;
        p.pending = Some((n, committed));
        self.shared.changed.notify_all();
        n
    }

    /// Waits until the bucket holds every commit of this handle but the newest `max_lag`, at
    /// most `wait`. Refuses, saying where the bucket stands, when it does not in time.
    pub(crate) fn wait_for(&self, max_lag: u64, wait: Duration) -> Result<()> {
        let mut p = self.shared.lock();
        let n = p.shown.commits;
        p.waiting += 1;
        self.shared.changed.notify_all();
        let (mut p, held) = self.shared.wait_until(p, wait, |p| {
            p.shown.replicated.is_some_and(|r| r + max_lag >= n)
        });
        p.waiting -= 1;
        if held {
            return Ok(());
        }
        Err(ArchiveError::Replica(format!(
            "commit {n} is durable locally, and the replica {} holds {} after {:.1} s, more than the lag bound of {max_lag} commit(s) allows{}",
            p.shown.url,
            p.shown
                .replicated
                .map_or("no commit of this handle yet".to_owned(), |r| format!("commits up to {r}")),
            wait.as_secs_f64(),
            p.shown
                .last_error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        )))
    }

    /// Where the replicator stands.
    pub(crate) fn progress(&self) -> Replication {
        let mut shown = self.shared.lock().shown.clone();
        shown.behind = match shown.replicated {
            Some(r) => shown.commits - r,
            None => shown.commits + 1,
        };
        shown
    }
}

impl Replicator {
    /// Stops the thread: a commit it was handed and has not replicated gets one last pass
    /// (unless the bucket is failing), waited for at most [`CLOSE_WAIT`]; a pass still running
    /// then is left to end on its own. Answers where replication stands then.
    pub(crate) fn stop(&mut self) -> Replication {
        if let Some(stopped) = &self.stopped {
            return stopped.clone();
        }
        let mut p = self.shared.lock();
        p.stopping = true;
        self.shared.changed.notify_all();
        let (p, exited) = self.shared.wait_until(p, CLOSE_WAIT, |p| p.exited);
        if !exited {
            tracing::warn!(
                replica = %p.shown.url,
                "closing the archive: the replication pass still running is left to finish on its own"
            );
        }
        drop(p);
        if exited {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
        let stopped = Replication {
            running: !exited,
            ..self.progress()
        };
        self.stopped = Some(stopped.clone());
        stopped
    }
}

impl Drop for Replicator {
    /// Stops the thread ([`Replicator::stop`]).
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: one pass per hand-over it takes, until stopped.
fn run(root: &std::path::Path, tier: &ColdTier, faults: &Faults, shared: &Shared) {
    // Off the delivery path, and below it: the pass's reads, hashing and requests take the
    // CPU the writer leaves (`io::priority`).
    crate::archive::io::priority::become_background();
    // What the bucket held after the last pass: a pass lists the prefix only when it is not
    // known (the first pass, and the one after a failure).
    let mut known: Option<replicate::Known> = None;
    let mut last_pass: Option<std::time::Instant> = None;
    loop {
        let (n, committed) = {
            let p = shared.lock();
            let mut p = shared
                .changed
                .wait_while(p, |p| p.pending.is_none() && !p.stopping)
                .unwrap_or_else(|e| e.into_inner());
            // Commits that come within PASS_GAP of the last pass's start wait for the next,
            // together, unless a barrier waits for them or the handle closes.
            if let Some(pause) = last_pass.map(|at| PASS_GAP.saturating_sub(at.elapsed())) {
                if !pause.is_zero() && p.waiting == 0 && !p.stopping {
                    p = shared
                        .wait_until(p, pause, |p| p.waiting > 0 || p.stopping)
                        .0;
                }
            }
            // Stopping: a pending commit gets its last pass, unless the bucket is failing.
            let give_up = p.stopping && p.shown.failures > 0;
            match p.pending.take() {
                Some(next) if !give_up => next,
                _ => {
                    replicate::flush_seen(root, &mut known);
                    p.exited = true;
                    shared.changed.notify_all();
                    return;
                }
            }
        };
        last_pass = Some(std::time::Instant::now());
        let outcome =
            replicate::replicate_committed(root, tier, faults, committed.clone(), &mut known);
        let mut p = shared.lock();
        match outcome {
            Ok(_) => {
                if p.shown.failures > 0 {
                    tracing::info!(replica = %p.shown.url, "replication caught up again");
                }
                p.shown.replicated = Some(p.shown.replicated.map_or(n, |r| r.max(n)));
                p.shown.passes += 1;
                p.shown.failures = 0;
                p.shown.last_error = None;
                shared.changed.notify_all();
            }
            // A checkpoint replaced the generation this hand-over named: the newer one is
            // already pending.
            Err(ArchiveError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && p.pending.is_some() => {}
            Err(e) => {
                if p.shown.failures == 0 {
                    tracing::warn!(replica = %p.shown.url, error = %e, "replication failed; retrying, the lag grows meanwhile");
                }
                p.shown.failures = p.shown.failures.saturating_add(1);
                p.shown.last_error = Some(e.to_string());
                // Tried again unless a newer commit came meanwhile.
                if p.pending.is_none() {
                    p.pending = Some((n, committed));
                }
                shared.changed.notify_all();
                let delay = BACKOFF_MIN
                    .saturating_mul(1 << p.shown.failures.min(16))
                    .min(BACKOFF_MAX);
                // Woken early only to stop.
                drop(shared.wait_until(p, delay, |p| p.stopping));
            }
        }
    }
}
