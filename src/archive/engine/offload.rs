//! Moving data files to the cold tier, and evicting those the replica holds.
//!
//! ```text
//! plan (pure: age, local byte budget) ─► upload (multipart when large, aborted on failure)
//!   ─► confirm whole (digests checked before a checked upload, else read back in one GET)
//!   ─► ONE `offload` record
//!   ─► delete the local copies (only after the record is durable)
//! ```
//!
//! A failed upload or confirmation deletes what it uploaded, leaves the file local and is
//! reported; the move is retried by a later offload. Nothing is recorded that is not whole.

use super::Archive;
use crate::archive::error::{ArchiveError, ColdError, Result};
use crate::archive::format::manifest::{Offload, Offloaded, Record, SegmentFile};
use crate::archive::format::segment;
use crate::archive::io::cold::ColdTier;
use crate::archive::io::durable;
use crate::archive::io::faults::FaultPoint;
use crate::archive::layout::OWNER_FILE;
pub use crate::archive::plan::offload::{plan_offload, OffloadPolicy};
use bytes::Bytes;
use serde::Serialize;

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

impl Archive {
    /// Moves the data files `policy` selects at `now_ns` (for every stream, or the declared
    /// policy of each stream when `policy` is `None`) to the configured cold tier.
    /// `progress(done, total, bytes)` after each upload.
    pub fn offload(
        &mut self,
        policy: Option<&OffloadPolicy>,
        now_ns: u64,
        progress: impl FnMut(usize, usize, u64),
    ) -> Result<Vec<OffloadReport>> {
        self.commit.writable("offload")?;
        let tier = self.store.configured().ok_or_else(|| {
            ArchiveError::declaration(
                "",
                "no cold tier is declared (Config::cold, or --cold URL on the command line)",
            )
        })?;
        self.refuse_a_tier_that_lost_objects(&tier)?;
        let plans = self.offload_plans(policy, now_ns);
        self.move_files(&tier, plans, Self::upload, progress)
    }

    /// Evicts the data files `policy` selects at `now_ns` (for every stream, or each stream's
    /// declared policy when `policy` is `None`) that the archive's replica holds: each object
    /// is read back whole and every digest checked, then ONE `offload` record per stream names
    /// the files at their URLs in the replica, and the local copies are deleted. Nothing is
    /// uploaded: a file the replica does not hold yet stays local and is reported (a
    /// replication pass uploads it; evict again after). Reads fetch evicted files from the
    /// bucket by ranged GETs, as cold files; the replica's own passes delete the objects once
    /// no record names them (a retirement or compaction never deletes them itself, which would
    /// break the bucket's last commit).
    pub fn evict(
        &mut self,
        policy: Option<&OffloadPolicy>,
        now_ns: u64,
        progress: impl FnMut(usize, usize, u64),
    ) -> Result<Vec<OffloadReport>> {
        self.commit.writable("evict")?;
        let url = super::replicate::recorded(&self.root)?.ok_or_else(|| {
            ArchiveError::Replica(
                "eviction drops local copies of files the replica holds, and this archive has no replica (declare one: `series-archive replicate ARCHIVE URL`, Config::replicate)".into(),
            )
        })?;
        let tier = ColdTier::from_url(&url)
            .map_err(|e| ArchiveError::Replica(format!("the replica {url}: {e}")))?;
        let plans = self.offload_plans(policy, now_ns);
        self.move_files(&tier, plans, Self::held, progress)
    }

    /// The data files `policy` (or each stream's declared policy) selects at `now_ns`, by
    /// stream.
    fn offload_plans(
        &self,
        policy: Option<&OffloadPolicy>,
        now_ns: u64,
    ) -> Vec<(String, Vec<SegmentFile>)> {
        let mut plans = Vec::new();
        for (id, stream) in &self.commit.state().streams {
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
        plans
    }

    /// Moves the planned files to `tier`: `place` makes each whole there (or says why not,
    /// and the file stays local), then one `offload` record per stream names those that are,
    /// then their local copies are deleted.
    fn move_files(
        &mut self,
        tier: &ColdTier,
        plans: Vec<(String, Vec<SegmentFile>)>,
        place: fn(&Self, &ColdTier, &SegmentFile, &str) -> std::result::Result<(), String>,
        mut progress: impl FnMut(usize, usize, u64),
    ) -> Result<Vec<OffloadReport>> {
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
                match place(self, tier, &file, &url) {
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
            self.disk.reached(FaultPoint::AfterUpload);
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
            self.commit(Record::Offload(record))?;
            let locals: Vec<std::path::PathBuf> =
                moved.iter().map(|(f, _)| self.root.join(&f.path)).collect();
            self.delete(locals.iter().map(std::path::PathBuf::as_path))?;
            report.files = moved.len();
            report.bytes = moved.iter().map(|(f, _)| f.bytes).sum();
            tracing::info!(stream = %id, files = report.files, bytes = report.bytes, tier = %tier.url(), "offloaded");
            reports.push(report);
        }
        Ok(reports)
    }

    /// Confirms the replica holds `file` whole: read back in one GET, every digest checked.
    fn held(
        &self,
        tier: &ColdTier,
        file: &SegmentFile,
        url: &str,
    ) -> std::result::Result<(), String> {
        let back = tier.get(&file.path).map_err(|e| {
            if e.missing {
                format!("{url} is not in the replica yet (a replication pass uploads it)")
            } else {
                e.to_string()
            }
        })?;
        segment::verify_bytes(file, &back).map_err(|why| format!("{url} read back: {why}"))
    }

    /// Refuses to add to a tier that lost objects this archive's manifest names there: the
    /// rows they hold are unreadable already, and moving more files onto that tier would put
    /// more of the archive where it is being lost. One listing of the prefix.
    fn refuse_a_tier_that_lost_objects(&self, tier: &ColdTier) -> Result<()> {
        let named: Vec<(&str, &str)> = self
            .commit
            .state()
            .live_files()
            .filter_map(|f| Some((f.path.as_str(), f.cold.as_deref()?)))
            .filter(|(_, url)| tier.relative(url).is_some())
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        let listed: std::collections::BTreeSet<String> = tier
            .list(crate::archive::layout::STREAMS_DIR)
            .map_err(|e| ArchiveError::Cold(e.to_string()))?
            .into_iter()
            .map(|(relative, _)| relative)
            .collect();
        let missing: Vec<&str> = named
            .iter()
            .filter(|(_, url)| tier.relative(url).is_some_and(|r| !listed.contains(r)))
            .map(|(_, url)| *url)
            .collect();
        if let Some(first) = missing.first() {
            return Err(ArchiveError::Cold(format!(
                "the cold tier {} lost {} object(s) this archive's manifest names there (first: {first}); their rows are unreadable, so offload adds nothing to it — run `series-archive verify`, and put the objects back (or repair the tier) first",
                tier.url(),
                missing.len()
            )));
        }
        Ok(())
    }

    /// Uploads one file and confirms the object is whole. A tier whose uploads are checked by
    /// the server ([`ColdTier::verified_puts`]: S3 opened from a URL, whose every upload
    /// carries its SHA-256; a local directory, written whole and renamed) is sent bytes whose
    /// every digest was checked first, so the object is those bytes: no read-back. Any other
    /// tier's object is read back whole (one GET) and every digest checked, as a reader will.
    fn upload(
        &self,
        tier: &ColdTier,
        file: &SegmentFile,
        url: &str,
    ) -> std::result::Result<(), String> {
        let path = self.root.join(&file.path);
        let bytes = crate::archive::io::local::read(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if tier.verified_puts() {
            segment::verify_bytes(file, &bytes)
                .map_err(|why| format!("{}: {why}; not offloaded (run verify)", path.display()))?;
        } else if bytes.len() as u64 != file.bytes {
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
        if tier.verified_puts() {
            return Ok(());
        }
        let back = tier.get(&file.path).map_err(|e| discard(e.to_string()))?;
        segment::verify_bytes(file, &back)
            .map_err(|why| discard(format!("{url} read back: {why}")))?;
        Ok(())
    }

    /// Claims the configured tier's prefix for this archive, or refuses it. The sweep that
    /// follows deletes every object under the prefix that no record names, so it must never
    /// run over another archive's objects: the prefix holds an `OWNER` object whose token
    /// equals the one this archive keeps in `OWNER` at its root. A prefix claimed by another
    /// token is refused; an unclaimed one is claimed (a conditional create, so two archives
    /// racing for it cannot both win) only when nothing under it could be another archive's:
    /// it is empty, or this archive's manifest already names objects there (an archive that
    /// offloaded before claims existed).
    /// Answers the listing of `streams/` when it made one (the sweep reuses it).
    fn claim_cold_prefix(&mut self, tier: &ColdTier) -> Result<Option<Vec<(String, u64)>>> {
        let cold = |e: ColdError| ArchiveError::Cold(e.to_string());
        // A replica's prefix holds objects the cold tier's sweep would take for orphans (the
        // replicated local files, the Delta logs, the manifest's parts).
        if let Some(replica) = super::replicate::recorded(&self.root)? {
            if super::replicate::overlaps(&replica, tier.url()) {
                return Err(ArchiveError::Cold(format!(
                    "the cold tier {} and this archive's replica {replica} share a prefix: give the cold tier a prefix of its own (each removes objects the other holds)",
                    tier.url()
                )));
            }
        }
        let local_path = self.root.join(OWNER_FILE);
        let local = super::replicate::local_token(&self.root)?;
        let claimed = |tier: &ColdTier| super::replicate::bucket_token(tier).map_err(cold);
        let refuse = |theirs: &str| {
            ArchiveError::Cold(format!(
                "{} belongs to another archive (its {OWNER_FILE} object holds {theirs:?}; this archive's {} is {}): two archives must not share a prefix, since each removes the objects its own manifest does not name — give this archive its own prefix",
                tier.url(),
                local_path.display(),
                local.as_deref().map_or("absent".to_owned(), |t| format!("{t:?}")),
            ))
        };
        match claimed(tier)? {
            Some(theirs) if Some(&theirs) == local.as_ref() => return Ok(None),
            Some(theirs) => return Err(refuse(&theirs)),
            None => {}
        }
        let names_objects_there = self.commit.state().live_files().any(|f| {
            f.cold
                .as_deref()
                .is_some_and(|u| tier.relative(u).is_some())
        });
        let mut listing = None;
        if !names_objects_there {
            let listed = tier
                .list(crate::archive::layout::STREAMS_DIR)
                .map_err(cold)?;
            if !listed.is_empty() {
                return Err(ArchiveError::Cold(format!(
                    "{} holds {} object(s) under streams/ that this archive's manifest does not name, and no {OWNER_FILE} object: it may be another archive's prefix, and claiming it would delete them — give this archive its own prefix (or, if they are this archive's own leftovers, remove them)",
                    tier.url(),
                    listed.len()
                )));
            }
            listing = Some(listed);
        }
        let token = match local.clone() {
            Some(token) => token,
            None => {
                let token = new_owner_token(self.config.clock.now_ns());
                super::replicate::write_root_file(
                    &self.disk,
                    &self.root,
                    OWNER_FILE,
                    &format!("{token}\n"),
                )?;
                token
            }
        };
        if !tier
            .put_if_absent(OWNER_FILE, Bytes::from(format!("{token}\n")))
            .map_err(cold)?
        {
            // Another archive created it between the look and the create.
            match claimed(tier)? {
                Some(theirs) if theirs == token => {}
                Some(theirs) => return Err(refuse(&theirs)),
                None => {
                    return Err(ArchiveError::Cold(format!(
                        "{}: {OWNER_FILE} was refused as existing, then read as absent",
                        tier.url()
                    )))
                }
            }
        }
        tracing::info!(tier = %tier.url(), "claimed the cold prefix for this archive");
        Ok(listing)
    }

    /// Claims the configured tier's prefix (see `claim_cold_prefix`), then removes objects
    /// under its `streams/` that no live file names: uploads a crash (or a failure) cut off
    /// before their record, and objects whose deletion after a retirement or compaction did
    /// not happen. Never an object a record names; an object the state cannot account for
    /// is first kept as evidence under `.quarantine/`. Answers the removed objects.
    pub(crate) fn sweep_cold_orphans(&mut self) -> Result<Vec<String>> {
        let Some(tier) = self.store.configured() else {
            return Ok(Vec::new());
        };
        let listed_at_claim = self.claim_cold_prefix(&tier)?;
        let named: std::collections::BTreeSet<&str> = self
            .commit
            .state()
            .live_files()
            .filter_map(|f| f.cold.as_deref())
            .collect();
        let listed = match listed_at_claim {
            Some(listed) => listed,
            None => tier
                .list(crate::archive::layout::STREAMS_DIR)
                .map_err(|e| ArchiveError::Cold(e.to_string()))?,
        };
        // What the state can account for goes: an upload whose local file is still live
        // (a crash before its record), or a file a record retired or replaced. An object it
        // cannot account for may be the only copy of data (a `repair` that dropped the
        // `offload` record naming it): its bytes are kept as evidence under `.quarantine/`
        // first, as recovery keeps every local leftover.
        let leftover = self.commit.state().leftovers();
        let mut keep = Vec::new();
        let mut removed = Vec::new();
        for (relative, _) in listed {
            let url = tier.object_url(&relative);
            if named.contains(url.as_str()) {
                continue;
            }
            if leftover(&relative) == crate::archive::format::manifest::Leftover::Evidence {
                keep.push(relative.clone());
            }
            removed.push((relative, url));
        }
        drop(leftover);
        if !keep.is_empty() {
            let quarantine = self.quarantine_dir()?;
            for relative in &keep {
                let bytes = tier
                    .get(relative)
                    .map_err(|e| ArchiveError::Cold(e.to_string()))?;
                let target = quarantine.join(relative);
                if let Some(parent) = target.parent() {
                    durable::create_dir(&self.disk, parent)?;
                }
                durable::write_synced(&self.disk, &target, &bytes)?;
                if let Some(parent) = target.parent() {
                    durable::sync_dir(&self.disk, parent)?;
                }
                self.recovery
                    .quarantined
                    .push(crate::archive::layout::relative(&self.root, &target));
            }
        }
        let removed: Vec<String> = removed
            .into_iter()
            .map(|(relative, url)| {
                tier.delete(&relative)
                    .map(|()| url)
                    .map_err(|e| ArchiveError::Cold(e.to_string()))
            })
            .collect::<Result<_>>()?;
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
        // A replay reads the slices of a file recorded by its row groups (format 11) from its
        // rows, and what they say of their tracks (where they started, when they were sealed)
        // is history the record that removed the file does not carry: a checkpoint first makes
        // the replay start past that record, from a snapshot that carries it.
        let rows_form = files.iter().any(|f| {
            f.format == Some(crate::archive::format::manifest::ROWS_FORMAT) && f.run.is_none()
        });
        if rows_form {
            self.checkpoint()?;
        }
        let (cold, local): (Vec<&SegmentFile>, Vec<&SegmentFile>) =
            files.iter().partition(|f| f.cold.is_some());
        for file in files {
            // Names are never reused: a discarded file's footer is never asked for again.
            self.store.forget(file.name);
        }
        let names: Vec<u64> = files.iter().map(|f| f.name).collect();
        self.level_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .forget(&names);
        self.raw_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .forget(&names);
        // An evicted file lives in the replica, whose last commit may still name it: its
        // object goes with the replica pass that no longer does.
        let replica = super::replicate::recorded(&self.root)?.map(|r| format!("{r}/"));
        for file in cold {
            let url = file.cold.as_deref().unwrap_or_default();
            if replica.as_deref().is_some_and(|r| url.starts_with(r)) {
                continue;
            }
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
        if let Err(e) = durable::remove_all(&self.disk, paths.iter().map(|p| p.as_path())) {
            return Err(self.poison(e));
        }
        Ok(())
    }
}

/// A token no other archive holds: the time, the process and two randomly keyed hashes.
/// (32 hex digits; `docs/format.md`, "Who owns a cold prefix".)
pub(super) fn new_owner_token(now_ns: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut a = std::collections::hash_map::RandomState::new().build_hasher();
    a.write_u64(now_ns);
    a.write_u32(std::process::id());
    let mut b = std::collections::hash_map::RandomState::new().build_hasher();
    b.write_u64(a.finish());
    format!("{:016x}{:016x}", a.finish(), b.finish())
}
