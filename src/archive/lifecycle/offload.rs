//! Moving data files to the cold tier.
//!
//! ```text
//! plan (pure: age, local byte budget) ─► upload (multipart when large, aborted on failure)
//!   ─► confirm whole (read back in one GET, every digest checked) ─► ONE `offload` record
//!   ─► delete the local copies (only after the record is durable)
//! ```
//!
//! A failed upload or confirmation deletes what it uploaded, leaves the file local and is
//! reported; the move is retried by a later offload. Nothing is recorded that is not whole.

use super::super::faults::FaultPoint;
use super::super::manifest::{Offload, Offloaded, Record, SegmentFile};
use super::super::segment;
use super::super::{durable, Archive, ArchiveError, Result};
use serde::Serialize;
use std::time::Duration;

/// When a stream's data files move to the cold tier. Level files stay local: they are small
/// and answer every survey.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadPolicy {
    /// Files sealed longer ago than this move.
    pub older_than: Option<Duration>,
    /// Beyond this many bytes of local data files, the oldest move.
    pub local_budget: Option<u64>,
}

impl OffloadPolicy {
    /// Files sealed longer ago than `age` move.
    pub fn older_than(age: Duration) -> Self {
        OffloadPolicy {
            older_than: Some(age),
            local_budget: None,
        }
    }

    /// The oldest files move until at most `bytes` of data files stay local.
    pub fn local_budget(mut self, bytes: u64) -> Self {
        self.local_budget = Some(bytes);
        self
    }
}

/// What one offload of a stream did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OffloadReport {
    /// The stream.
    pub stream: String,
    /// Files moved (recorded, local copies deleted).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files that could not be moved this time, with why (they stay local, served as before).
    pub failed: Vec<String>,
}

/// The data files of a stream that `policy` moves at `now_ns`, oldest first: those sealed
/// longer ago than the age, then, while the local bytes exceed the budget, the oldest left.
pub fn plan_offload<'a>(
    files: &'a [SegmentFile],
    policy: &OffloadPolicy,
    now_ns: u64,
) -> Vec<&'a SegmentFile> {
    let mut local: Vec<&SegmentFile> = files.iter().filter(|f| f.cold.is_none()).collect();
    local.sort_by_key(|f| (f.sealed_at_ns, f.name));
    let mut moving = Vec::new();
    let mut kept_bytes: u64 = local.iter().map(|f| f.bytes).sum();
    for file in local {
        let old = policy.older_than.is_some_and(|age| {
            file.sealed_at_ns
                .saturating_add(u64::try_from(age.as_nanos()).unwrap_or(u64::MAX))
                <= now_ns
        });
        let over = policy.local_budget.is_some_and(|b| kept_bytes > b);
        if old || over {
            kept_bytes -= file.bytes;
            moving.push(file);
        }
    }
    moving
}

impl Archive {
    /// Moves the data files `policy` selects at `now_ns` (for every stream, or the declared
    /// policy of each stream when `policy` is `None`) to the configured cold tier.
    /// `progress(done, total, bytes)` after each upload.
    pub fn offload(
        &mut self,
        policy: Option<&OffloadPolicy>,
        now_ns: u64,
        mut progress: impl FnMut(usize, usize, u64),
    ) -> Result<Vec<OffloadReport>> {
        self.writable()?;
        let tier = self.store.configured().ok_or_else(|| {
            ArchiveError::declaration(
                "",
                "no cold tier is declared (Config::cold, or --cold URL on the command line)",
            )
        })?;
        let mut plans = Vec::new();
        for (id, stream) in &self.state.streams {
            let Some(policy) = policy.or_else(|| self.config.offload.get(id)) else {
                continue;
            };
            let files: Vec<SegmentFile> = plan_offload(&stream.files, policy, now_ns)
                .into_iter()
                .cloned()
                .collect();
            if !files.is_empty() {
                plans.push((id.clone(), files));
            }
        }
        let total: usize = plans.iter().map(|(_, f)| f.len()).sum();
        let mut done = 0;
        let mut reports = Vec::new();
        for (id, files) in plans {
            let mut report = OffloadReport {
                stream: id.clone(),
                ..OffloadReport::default()
            };
            let mut moved: Vec<(SegmentFile, String)> = Vec::new();
            for file in files {
                let url = tier.object_url(&file.path);
                match self.upload(&tier, &file, &url) {
                    Ok(()) => moved.push((file, url)),
                    Err(why) => {
                        tracing::warn!(file = %file.path, %why, "offload: left local, to retry later");
                        report.failed.push(format!("{}: {why}", file.path));
                    }
                }
                done += 1;
                progress(done, total, moved.iter().map(|(f, _)| f.bytes).sum());
            }
            if moved.is_empty() {
                reports.push(report);
                continue;
            }
            self.config.faults.hit(FaultPoint::AfterUpload);
            let record = Offload {
                stream: id.clone(),
                files: moved
                    .iter()
                    .map(|(f, url)| Offloaded {
                        name: f.name,
                        url: url.clone(),
                    })
                    .collect(),
            };
            self.commit(&Record::Offload(record))?;
            let locals: Vec<std::path::PathBuf> =
                moved.iter().map(|(f, _)| self.root.join(&f.path)).collect();
            self.delete(locals.iter().map(std::path::PathBuf::as_path))?;
            report.files = moved.len();
            report.bytes = moved.iter().map(|(f, _)| f.bytes).sum();
            tracing::info!(stream = %id, files = report.files, bytes = report.bytes, "offloaded");
            reports.push(report);
        }
        Ok(reports)
    }

    /// Uploads one file and confirms the object is whole: every digest read back.
    fn upload(
        &self,
        tier: &super::super::cold::ColdTier,
        file: &SegmentFile,
        url: &str,
    ) -> std::result::Result<(), String> {
        let path = self.root.join(&file.path);
        let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        if bytes.len() as u64 != file.bytes {
            return Err(format!(
                "{}: {} bytes on disk, the manifest recorded {}",
                path.display(),
                bytes.len(),
                file.bytes
            ));
        }
        let discard = |why: String| {
            if let Err(e) = tier.delete(&file.path) {
                tracing::warn!(object = %url, error = %e, "offload: could not delete a partial upload; the next writable open removes it");
            }
            self.store.forget(file.name);
            why
        };
        tier.put(&file.path, bytes.into())
            .map_err(|e| discard(e.to_string()))?;
        // Read back whole (one GET) and check every digest, as a reader will.
        let back = tier.get(&file.path).map_err(|e| discard(e.to_string()))?;
        segment::verify_bytes(file, &back)
            .map_err(|why| discard(format!("{url} read back: {why}")))?;
        Ok(())
    }

    /// Removes objects under the cold tier's `streams/` that no live file names: uploads a
    /// crash (or a failure) cut off before their record, and objects whose deletion after a
    /// retirement or compaction did not happen. Never an object a record names. Answers the
    /// removed objects.
    pub(crate) fn sweep_cold_orphans(&mut self) -> Result<Vec<String>> {
        let Some(tier) = self.store.configured() else {
            return Ok(Vec::new());
        };
        let named: std::collections::BTreeSet<&str> = self
            .state
            .live_files()
            .filter_map(|f| f.cold.as_deref())
            .collect();
        let listed = tier
            .list(super::super::STREAMS_DIR)
            .map_err(|e| ArchiveError::Cold(e.to_string()))?;
        let mut removed = Vec::new();
        for (relative, _) in listed {
            let url = tier.object_url(&relative);
            if !named.contains(url.as_str()) {
                tier.delete(&relative)
                    .map_err(|e| ArchiveError::Cold(e.to_string()))?;
                removed.push(url);
            }
        }
        if !removed.is_empty() {
            tracing::warn!(
                objects = removed.len(),
                "recovery removed cold objects no record names"
            );
        }
        Ok(removed)
    }

    /// Deletes retired or replaced files wherever they live: local files (durably, a
    /// failure poisons), and cold objects (a failure is logged; the next writable open
    /// removes the orphan).
    pub(crate) fn discard(&mut self, files: &[SegmentFile]) -> Result<()> {
        let (cold, local): (Vec<&SegmentFile>, Vec<&SegmentFile>) =
            files.iter().partition(|f| f.cold.is_some());
        for file in cold {
            self.store.forget(file.name);
            let url = file.cold.as_deref().unwrap_or_default();
            match self.store.tier_for(url, &file.path) {
                Ok(tier) => {
                    if let Err(e) = tier.delete(&file.path) {
                        tracing::warn!(object = %url, error = %e, "could not delete a retired cold object; the next writable open removes it");
                    }
                }
                Err(e) => tracing::warn!(object = %url, error = %e, "no cold tier to delete from"),
            }
        }
        let paths: Vec<std::path::PathBuf> =
            local.iter().map(|f| self.root.join(&f.path)).collect();
        if let Err(e) = durable::remove_all(&self.config.faults, paths.iter().map(|p| p.as_path()))
        {
            return Err(self.poison(e));
        }
        Ok(())
    }
}
