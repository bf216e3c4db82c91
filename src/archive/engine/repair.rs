//! Getting past a manifest damaged mid-log: what a repair would lose, shown before anything
//! changes.
//!
//! A record that fails its check with valid records after it is damage, not a torn write, and
//! an open refuses it: truncating there drops committed records. The records after the damage
//! cannot be replayed on top of the trusted prefix either — the damaged record's effect is
//! unknown, and a barrier replayed past a lost barrier would leave a gap in its stream that no
//! floor accounts for (a quiet short answer). So a repair keeps the trusted prefix, starts a
//! new generation from it, and keeps everything else as evidence: the damaged generation
//! whole, and every file that only the lost records named. Nothing is deleted.

use super::Archive;
use crate::archive::error::ArchiveError;
use crate::archive::error::Result;
use crate::archive::format::manifest::frame::{self, Decoded};
use crate::archive::format::manifest::{Leftover, Record};
use crate::archive::io::durable;
use crate::archive::io::local;
use crate::archive::layout::relative;
use crate::archive::layout::STREAMS_DIR;
use serde::Serialize;
use std::path::Path;

/// One valid record after the damage: what its loss takes out of the archive's claims.
#[derive(Clone, Debug, Serialize)]
pub struct LostRecord {
    /// Where it starts in the damaged generation.
    pub offset: u64,
    /// What it recorded, in words (`barrier 7: stream capture through position 1400, 400 rows`).
    pub what: String,
}

/// What a repair finds and would do; see [`Archive::repair_plan`].
#[derive(Clone, Debug, Serialize)]
pub struct RepairPlan {
    /// The damaged generation, relative to the root; it is kept whole in `.quarantine/`.
    pub generation: String,
    /// Where the first record that fails its check starts.
    pub damaged_at: u64,
    /// Records in the trusted prefix (the snapshot included): the state a repair keeps.
    pub trusted_records: usize,
    /// Bytes from the damage to the end of the generation.
    pub bytes_after_damage: u64,
    /// The valid records after the damage, whose claims the repaired archive will not make.
    pub lost: Vec<LostRecord>,
    /// What shows the manifest damaged, in words.
    pub why: String,
    /// Data files holding rows past the trusted prefix (relative paths): the rows of
    /// acknowledged records the manifest lost, kept readable as plain Parquet.
    pub beyond_files: Vec<String>,
    /// Delta commits naming files the trusted prefix does not (`<stream>/rows@<version>:
    /// NAME`): evidence that their manifest records were acknowledged.
    pub delta_commits: Vec<String>,
    /// Lost barriers whose files prove themselves (see `restore.rs`): a repair restores them
    /// into the new generation, in words.
    pub restorable: Vec<String>,
    /// Why restoring stops where it does, per stream, when files are left.
    pub not_restored: Vec<String>,
    /// Files under `streams/` the trusted prefix does not name, with their sizes: a repair
    /// moves them into `.quarantine/` (the rows of lost barriers stay readable there as plain
    /// Parquet).
    pub quarantined: Vec<(String, u64)>,
}

fn describe(record: &Record) -> String {
    match record {
        Record::Snapshot(s) => format!("snapshot of generation {}", s.generation),
        Record::Declare(d) => format!("declaration of stream {:?}", d.id),
        Record::Barrier(b) => {
            let streams: Vec<String> = b
                .streams
                .iter()
                .map(|s| {
                    let rows = s.file.rows();
                    format!(
                        "stream {} through position {} ({rows} rows in {})",
                        s.stream, s.watermark, s.file.path
                    )
                })
                .collect();
            format!("barrier {}: {}", b.barrier, streams.join("; "))
        }
        Record::Retire(r) => format!(
            "retirement ({}) of {} track(s) of stream {}",
            r.reason,
            r.tracks.len(),
            r.stream
        ),
        Record::Offload(o) => format!(
            "move of {} file(s) of stream {} to the cold tier",
            o.files.len(),
            o.stream
        ),
        Record::Compact(c) => format!(
            "compaction of stream {}: {} file(s) replaced by {}",
            c.stream,
            c.removed.len() + c.removed_levels.len(),
            c.added.len() + c.added_levels.len()
        ),
    }
}

impl Archive {
    /// What a repair of the archive at `root` would do, changing nothing: `None` when its
    /// manifest is not damaged mid-log (a torn tail is repaired by any writable open). Apply
    /// it with a writable open under [`crate::archive::config::Config::repair`].
    pub fn repair_plan(root: impl AsRef<Path>) -> Result<Option<RepairPlan>> {
        let root = root.as_ref();
        // The same classification a read-only open makes (see `docs/format.md`, "Replay").
        let opened = Archive::open(root, crate::archive::config::Config::new().read_only(true))?;
        let recovery = opened.recovery();
        let (Some(offset), Some(generation)) = (recovery.damaged_at, recovery.damaged_path.clone())
        else {
            return Ok(None);
        };
        let path = root.join(&generation);
        let (beyond_files, delta_commits) = recovery
            .beyond
            .as_ref()
            .map(|b| (b.files.clone(), b.delta_commits.clone()))
            .unwrap_or_default();
        let why = recovery.damage.clone().unwrap_or_default();
        let (restored, not_restored) = crate::archive::engine::restore::restorable(
            root,
            opened.state(),
            crate::archive::config::Config::new().compaction.group_rows,
        )?;
        let restored_files: std::collections::BTreeSet<&str> = restored
            .iter()
            .flat_map(|b| b.files.iter().map(String::as_str))
            .collect();
        let restorable = restored
            .iter()
            .map(|b| {
                let s = &b.record.streams[0];
                format!(
                    "barrier {}: stream {} through position {} ({} rows in {})",
                    b.record.barrier,
                    s.stream,
                    s.watermark,
                    b.rows,
                    b.files.join(" and ")
                )
            })
            .collect();
        let bytes = local::read(&path).map_err(ArchiveError::io("read manifest", &path))?;
        // The open replayed the prefix; here its records are only counted.
        let (mut trusted_records, mut at) = (0, 0);
        while at < offset as usize {
            match frame::decode(&bytes, at) {
                Decoded::Record { next, .. } => (trusted_records, at) = (trusted_records + 1, next),
                _ => break,
            }
        }
        let lost = frame::valid_records_after(&bytes, offset as usize)
            .into_iter()
            .map(|at| {
                let what = match frame::decode(&bytes, at) {
                    Decoded::Record { payload, .. } => match Record::decode(payload) {
                        Ok(record) => describe(&record),
                        Err(e) => {
                            format!("a record that passes its check but does not decode: {e}")
                        }
                    },
                    Decoded::UnknownVersion(v) => format!("a record of format version {v}"),
                    Decoded::Failed | Decoded::End => "unreadable".to_owned(),
                };
                LostRecord {
                    offset: at as u64,
                    what,
                }
            })
            .collect();
        let leftover = opened.state().leftovers();
        let mut quarantined = Vec::new();
        for file in durable::walk_files(&root.join(STREAMS_DIR))? {
            let rel = relative(root, &file);
            if leftover(&rel) != Leftover::Evidence || restored_files.contains(rel.as_str()) {
                continue;
            }
            let len = local::len(&file).map_err(ArchiveError::io("stat", &file))?;
            quarantined.push((rel, len));
        }
        Ok(Some(RepairPlan {
            generation,
            damaged_at: offset,
            why,
            beyond_files,
            delta_commits,
            restorable,
            not_restored,
            trusted_records,
            bytes_after_damage: bytes.len() as u64 - offset,
            lost,
            quarantined,
        }))
    }
}

/// One open's (or repair's) evidence: a directory under `.quarantine/`.
#[derive(Clone, Debug, Serialize)]
pub struct Evidence {
    /// The directory, relative to the root (`.quarantine/open-STAMP-N`).
    pub dir: String,
    /// When it was kept, ns since the Unix epoch (the archive's clock at that open); `None`
    /// for a directory the archive did not name.
    pub kept_at_ns: Option<u64>,
    /// Its files, relative to the root, with their sizes.
    pub files: Vec<(String, u64)>,
}

impl Archive {
    /// The evidence under `.quarantine/`, one entry per open that kept any, oldest first.
    pub fn evidence(&self) -> Result<Vec<Evidence>> {
        let base = self.root.join(crate::archive::layout::QUARANTINE_DIR);
        let mut out = Vec::new();
        for entry in local::entries(&base)? {
            let (name, path) = (entry.name, entry.path);
            let files = if entry.is_dir {
                durable::walk_files(&path)?
            } else {
                vec![path.clone()]
            };
            let mut sized = Vec::with_capacity(files.len());
            for f in files {
                let len = local::len(&f).map_err(ArchiveError::io("stat", &f))?;
                sized.push((relative(&self.root, &f), len));
            }
            let kept_at_ns = name
                .strip_prefix("open-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|stamp| stamp.parse().ok());
            out.push(Evidence {
                dir: relative(&self.root, &path),
                kept_at_ns,
                files: sized,
            });
        }
        out.sort_by(|a, b| (a.kept_at_ns, &a.dir).cmp(&(b.kept_at_ns, &b.dir)));
        Ok(out)
    }

    /// Deletes the evidence kept before `before_ns` (the archive's clock), answering what
    /// was deleted. Needs a writable open, so no recovery adds evidence meanwhile; evidence
    /// whose time the archive cannot tell is kept.
    pub fn purge_evidence(&mut self, before_ns: u64) -> Result<Vec<Evidence>> {
        self.commit.writable("purging quarantine")?;
        let mut purged = Vec::new();
        for evidence in self.evidence()? {
            if evidence.kept_at_ns.is_some_and(|t| t < before_ns) {
                let path = self.root.join(&evidence.dir);
                local::remove_tree(&self.disk, &path)?;
                purged.push(evidence);
            }
        }
        if !purged.is_empty() {
            durable::sync_dir(
                &self.disk,
                &self.root.join(crate::archive::layout::QUARANTINE_DIR),
            )?;
        }
        Ok(purged)
    }
}
