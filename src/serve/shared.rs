//! The server's state: the snapshot it answers from, the commits it tells watchers of, and
//! what it was asked to enforce.

use super::request::ApiError;
use crate::archive::{reader, Archive, Config, ReadError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// Where the archive stands: sent to `/api/watch` subscribers on every commit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct Summary {
    pub(super) generation: u64,
    pub(super) barriers: u64,
    pub(super) watermarks: BTreeMap<String, u64>,
}

impl Summary {
    pub(super) fn of(archive: &Archive) -> Summary {
        let state = archive.state();
        Summary {
            generation: state.generation,
            barriers: state.barriers,
            watermarks: state
                .streams
                .iter()
                .map(|(id, s)| (id.clone(), s.watermark.0))
                .collect(),
        }
    }
}

/// The server's state: the snapshot it answers from and what it was asked to enforce.
pub(super) struct Shared {
    pub(super) root: PathBuf,
    pub(super) config: Config,
    pub(super) current: RwLock<Arc<Archive>>,
    pub(super) changes: tokio::sync::watch::Sender<Summary>,
    pub(super) stopping: tokio::sync::watch::Sender<bool>,
    pub(super) token: Option<String>,
    pub(super) max_budget: usize,
    pub(super) raw: Arc<tokio::sync::Semaphore>,
    pub(super) reopening: std::sync::Mutex<()>,
    /// Where the archive's replica stood when last asked, and when that was.
    pub(super) replica: std::sync::Mutex<Option<(std::time::Instant, Option<serde_json::Value>)>>,
}

/// How long an answer of where the replica stands is reused (each costs a listing of the
/// bucket's manifest parts).
const REPLICA_FRESH: std::time::Duration = std::time::Duration::from_secs(2);

impl Shared {
    /// Where the replica of the archive served stands (blocking: it asks the bucket, at most
    /// once per [`REPLICA_FRESH`]); `None` for an archive without a replica, or one served
    /// by its URL (it is the replica).
    pub(super) fn replica(&self) -> Option<serde_json::Value> {
        use crate::archive::{cold::ColdTier, replicate, Clock, SystemClock};
        if replicate::as_url(&self.root).is_some() {
            return None;
        }
        let mut seen = self.replica.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, answer)) = seen.as_ref() {
            if at.elapsed() < REPLICA_FRESH {
                return answer.clone();
            }
        }
        let answer = replicate::recorded(&self.root).ok().flatten().map(|url| {
            let status = ColdTier::from_url(&url)
                .map_err(|e| e.to_string())
                .and_then(|tier| {
                    replicate::status(&self.root, &tier, SystemClock.now_ns())
                        .map_err(|e| e.to_string())
                });
            match status {
                Ok(status) => serde_json::to_value(status).unwrap_or_default(),
                Err(error) => serde_json::json!({
                    "url": url,
                    "error": error,
                    "last_seen": replicate::last_seen(&self.root, &url, SystemClock.now_ns())
                        .ok()
                        .flatten(),
                }),
            }
        });
        *seen = Some((std::time::Instant::now(), answer.clone()));
        answer
    }

    pub(super) fn snapshot(&self) -> Arc<Archive> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reopens when a writer moved the manifest since the snapshot was opened (blocking).
    /// One reopen at a time: requests that find the manifest moved together wait for it and
    /// take its snapshot.
    pub(super) fn refresh(&self) -> Result<Arc<Archive>, ApiError> {
        if !self.snapshot().manifest_moved() {
            return Ok(self.snapshot());
        }
        let _one = self.reopening.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = self.snapshot();
        if !snapshot.manifest_moved() {
            return Ok(snapshot);
        }
        let mut opened = reader::open(&self.root, &self.config).map_err(|e| {
            ApiError::unreadable(format!("reopening the archive after a commit: {e}"))
        })?;
        // Committed files never change and names are never reused: what the last snapshot
        // decoded stays true, so a commit does not leave the next surveys cold.
        opened.share_level_cache(&snapshot);
        let opened = Arc::new(opened);
        let summary = Summary::of(&opened);
        match self.current.write() {
            Ok(mut current) => *current = opened.clone(),
            Err(poisoned) => *poisoned.into_inner() = opened.clone(),
        }
        self.changes.send_if_modified(|old| {
            let moved = *old != summary;
            *old = summary;
            moved
        });
        Ok(opened)
    }

    /// Runs a read on the current snapshot (blocking). A read that finds a file its snapshot
    /// named deleted, or no stream by that name, after a writer moved the manifest reads
    /// again on a fresh snapshot, at most `READ_ATTEMPTS` times, as the CLI does
    /// ([`reader::read_on`]).
    pub(super) fn read<T>(
        &self,
        read: impl Fn(&Archive) -> Result<T, ReadError>,
    ) -> Result<T, ApiError> {
        reader::read_on(self.snapshot(), || self.refresh(), read)?.map_err(ApiError::from)
    }
}
