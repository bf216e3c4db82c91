//! Opening an archive: the lock, replaying the manifest's trusted prefix, keeping what
//! a crash left as evidence, healing a torn tail, and recording the declarations.

use super::commit::CommitPoint;
use super::{beyond, delta, replicate, restore, Archive, Selected, READ_ONLY_ATTEMPTS};
use crate::archive::config::Config;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::levels;
use crate::archive::format::manifest;
use crate::archive::format::manifest::{Record, State, StreamDecl};
use crate::archive::format::spec::stored_schema;
use crate::archive::io::log::{self, LogWriter};
use crate::archive::io::store::{self};
use crate::archive::io::{durable, local, lock};
use crate::archive::layout::{
    generation_of, numbered, relative, MANIFEST_DIR, QUARANTINE_DIR, STREAMS_DIR, TMP_DIR,
};
use crate::archive::plan::recovery::{self, Action, Verdict};
use crate::contract::Position;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What open found and did to recover.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recovery {
    /// Files moved into quarantine by this open, relative to the archive root.
    pub quarantined: Vec<String>,
    /// The byte offset at which the manifest's torn tail started, if it had one.
    pub torn_tail_at: Option<u64>,
    /// A damaged (not torn) manifest: a read-only open holds the trusted prefix for
    /// `inspect` and refuses every read (`Unreadable`), since valid records follow the damage.
    pub damaged_at: Option<u64>,
    /// The damaged generation file, relative to the root, when `damaged_at` is set.
    pub damaged_path: Option<String>,
    /// What shows the manifest damaged, in words, when `damaged_at` is set.
    pub damage: Option<String>,
    /// The evidence of acknowledged records past the trusted prefix, when the tail alone
    /// looked torn or clean (see `docs/format.md`, "Replay").
    pub beyond: Option<beyond::Beyond>,
    /// The generation started by the repair, if one was.
    pub repaired_generation: Option<u64>,
    /// Barriers the repair restored from their files (see `restore.rs`), as
    /// `(barrier, files)`.
    pub restored: Vec<(u64, Vec<String>)>,
    /// Objects under the cold tier that no record named (an upload cut off before its
    /// record), removed by this open.
    pub cold_orphans_removed: Vec<String>,
    /// Delta logs this open brought level with the manifest (a crash came between a record
    /// and its Delta commit), as `<stream>/<rows|levels>@<version>`.
    pub delta_leveled: Vec<String>,
    /// Delta logs this open could not read and wrote anew from the manifest (the old ones
    /// kept as evidence), as `<stream>/<rows|levels>`.
    pub delta_rebuilt: Vec<String>,
    /// Delta logs this open could not bring level, with why: reads through them are behind
    /// the manifest (`files` refuses them) until the next commit or `publish` succeeds.
    pub delta_behind: Vec<String>,
    /// Data files still holding retired row groups (a crash came between a retirement and
    /// its rewrite) that this open rewrote without them.
    pub retired_rewritten: usize,
}

impl Recovery {
    /// Where the manifest is damaged mid-log, unless this open repaired it: while this is
    /// `Some`, every read refuses and `verify` reports the manifest.
    pub fn unrepaired_damage(&self) -> Option<u64> {
        self.damaged_at
            .filter(|_| self.repaired_generation.is_none())
    }
}

impl Archive {
    /// Opens (creating when absent) the archive at `root` with `config`.
    ///
    /// A writable open takes the lock, replays the manifest's trusted prefix, moves every
    /// leftover (a torn tail, `.tmp/` files, files no record names) into `.quarantine/`,
    /// repairs with a fresh generation if the tail was torn, records new stream declarations,
    /// and only then claims anything. A declaration that differs from the recorded one is an
    /// error; nothing is modified by a failed open beyond quarantining evidence.
    pub fn open(root: impl AsRef<Path>, config: Config) -> Result<Archive> {
        let root = root.as_ref().to_path_buf();
        let read_only = config.read_only;
        if config.scope.is_some() && !read_only {
            return Err(ArchiveError::Scoped("a writable open"));
        }
        let disk = config.disk();
        let lock = if read_only {
            lock::is_archive(&root)?;
            None
        } else {
            durable::create_dir(&disk, &root)?;
            let lock = lock::acquire(&root)?;
            for dir in [MANIFEST_DIR, STREAMS_DIR, TMP_DIR, QUARANTINE_DIR] {
                durable::create_dir(&disk, &root.join(dir))?;
            }
            Some(lock)
        };
        let store = Arc::new(store::Store::new(
            &root,
            disk.clone(),
            config.cold.clone(),
            config.requests.clone(),
        ));
        if let Some((tier, cache)) = &config.files_in {
            if let Some(cache) = cache {
                store.set_cache(cache.clone());
            }
            store.adopt(tier.clone());
        }
        let commit = CommitPoint::recovered(&root, disk.clone(), State::default(), None, 1, 0);
        let level_cache = Arc::new(std::sync::Mutex::new(levels::LevelCache::new(
            config.level_cache_cells,
        )));
        let raw_cache = Arc::new(std::sync::Mutex::new(
            crate::archive::io::decoded::DecodedCache::new(config.raw_cache_bytes),
        ));
        let mut archive = Archive {
            replicator: None,
            root,
            config,
            commit,
            _lock: lock,
            selected: BTreeMap::new(),
            staged: BTreeMap::new(),
            cursor: Position::ORIGIN,
            recovery: Recovery::default(),
            level_cache,
            raw_cache,
            replayed: None,
            disk,
            store,
            delta: None,
            origin: None,
            live_measured: std::sync::Mutex::new(None),
            summary_judged: BTreeMap::new(),
            gone: Vec::new(),
        };
        archive.recover()?;
        archive.declare()?;
        archive.check_retention()?;
        if !archive.gone.is_empty() {
            archive.checkpoint()?;
            let gone = std::mem::take(&mut archive.gone);
            archive.delete(gone.iter().map(PathBuf::as_path))?;
        }
        // Last: a declaration or a lifetime refused above leaves the cold tier untouched.
        if !archive.config.read_only {
            archive.recovery.cold_orphans_removed = archive.sweep_cold_orphans()?;
            if archive.config.delta {
                archive.delta = Some(delta::Publisher::new(&archive.root, archive.disk.clone())?);
                archive.level_delta_logs()?;
            }
            archive.start_replicator()?;
        }
        Ok(archive)
    }

    /// Declares the replica [`Config::replicate`] names (once), then starts replicating to the
    /// archive's recorded replica, unless [`Config::replication`] is off.
    fn start_replicator(&mut self) -> Result<()> {
        if let Some(tier) = self.config.replica.clone() {
            let now = self.config.clock.now_ns();
            replicate::declare(&self.root, &self.disk, &tier, now)?;
        }
        if !self.config.replication {
            return Ok(());
        }
        let tier = match (replicate::recorded(&self.root)?, &self.config.replica) {
            (None, _) => return Ok(()),
            (Some(url), Some(tier)) if url == tier.url() => tier.clone(),
            (Some(url), _) => Arc::new(
                crate::archive::io::cold::ColdTier::from_url(&url)
                    .map_err(|e| ArchiveError::Replica(format!("the replica {url}: {e}")))?,
            ),
        };
        let recovered = replicate::Committed::of(self.commit.state(), self.commit.manifest_bytes());
        self.replicator = Some(super::replicator::Replicator::start(
            self.root.clone(),
            tier,
            self.config.faults.clone(),
            recovered,
        )?);
        Ok(())
    }

    pub(super) fn recover(&mut self) -> Result<()> {
        let (state, log, highest) = self.replay_and_heal()?;
        let evidence = durable::walk_files(&self.root.join(QUARANTINE_DIR))?;
        let next_name = self.name_floor(&state, &evidence)?;
        self.commit = CommitPoint::recovered(
            &self.root,
            self.disk.clone(),
            state,
            log,
            next_name,
            highest,
        );
        Ok(())
    }

    /// Replays the current generation's trusted prefix and (writable) moves every leftover
    /// into quarantine, starting a new generation after a torn tail. Answers the state, the
    /// log to append to, and the highest generation ever held.
    pub(super) fn replay_and_heal(&mut self) -> Result<(State, Option<LogWriter>, u64)> {
        let manifest_dir = self.root.join(MANIFEST_DIR);
        let quarantine_root = self.root.join(QUARANTINE_DIR);
        let read_only = self.config.read_only;
        // Heal before claim: whatever a crash left in `.tmp/` (a data file, or a generation
        // that never claimed its name) is evidence, moved aside before anything is decided.
        let mut moved = Vec::new();
        let quarantine = self.quarantine_dir()?;
        if !read_only {
            for path in durable::walk_files(&self.root.join(TMP_DIR))? {
                moved.push(self.keep_as_evidence(&quarantine, &path)?);
            }
        }
        // A read-only open beside a writer can list the directory after the writer committed
        // past what it replayed: evidence counts only when the manifest did not move meanwhile.
        let mut attempt = 0;
        let (generations, highest_generation_ever, current, current_path, replayed, beyond) = loop {
            attempt += 1;
            let generations: Vec<(u64, PathBuf)> = durable::list_files(&manifest_dir)?
                .into_iter()
                .filter_map(|p| generation_of(&p).map(|g| (g, p)))
                .collect();
            let evidence = durable::walk_files(&quarantine_root)?;
            let highest_generation_ever = generations
                .iter()
                .map(|(g, _)| *g)
                .chain(evidence.iter().filter_map(|p| generation_of(p)))
                .max()
                .unwrap_or(0);
            let Some((current, current_path)) = generations.last().cloned() else {
                let data = durable::walk_files(&self.root.join(STREAMS_DIR))?;
                if !data.is_empty() {
                    return Err(ArchiveError::NoManifest {
                        path: self.root.clone(),
                    });
                }
                let mut state = State::default();
                let mut log = None;
                if !read_only {
                    let generation = highest_generation_ever + 1;
                    state.generation = generation;
                    state.next_name = 1;
                    log = Some(LogWriter::create(
                        &self.root.join(TMP_DIR),
                        &manifest_dir,
                        generation,
                        &state,
                        &self.disk,
                    )?);
                }
                self.recovery.quarantined = moved.iter().map(|p| relative(&self.root, p)).collect();
                return Ok((state, log, highest_generation_ever));
            };
            let began = std::time::Instant::now();
            let rows = crate::archive::io::rows::RowsIn::new(&self.store)
                .files_in(self.config.files_in.as_ref().map(|(tier, _)| tier.clone()));
            let replayed =
                log::replay_within(&current_path, current, self.config.scope.clone(), &rows)?;
            let replay_took = began.elapsed();
            // Read for every tail: past damage it is what `repair` shows.
            let beyond = beyond::beyond(&self.root, &replayed.state, current, &evidence)?;
            tracing::debug!(
                generation = current,
                records = replayed.records,
                bytes = replayed.file_len,
                scoped = self.config.scope.is_some(),
                replay_ms = replay_took.as_secs_f64() * 1e3,
                evidence_ms = (began.elapsed() - replay_took).as_secs_f64() * 1e3,
                "replayed the manifest"
            );
            let moved_on = || {
                let newest = durable::list_files(&manifest_dir)
                    .ok()
                    .and_then(|files| files.iter().filter_map(|p| generation_of(p)).max());
                newest != Some(current)
                    || local::len(&current_path).map_or(true, |len| len != replayed.file_len)
            };
            let mut beyond = beyond;
            if beyond.is_some() && read_only && moved_on() {
                if attempt < READ_ONLY_ATTEMPTS {
                    continue;
                }
                // A writer kept committing through every attempt: the files past this
                // replay are its new barriers. A live writer holds an archive whose open
                // refused damage, so the evidence is not evidence of loss.
                tracing::debug!(
                    attempt,
                    "the manifest kept moving; evidence past the prefix is a live writer's"
                );
                beyond = None;
            }
            break (
                generations,
                highest_generation_ever,
                current,
                current_path,
                replayed,
                beyond,
            );
        };
        let mut state = replayed.state;
        self.replayed = Some((current, replayed.trusted_len));
        // The plan: what the tail and the evidence say, and what this open does about it.
        let shown = beyond.as_ref().map(|b| b.why.join("; "));
        self.recovery.beyond = beyond;
        let verdict = recovery::verdict(&replayed.tail, replayed.trusted_len, shown);
        let action = recovery::action(&verdict, !read_only, self.config.repair);
        // The executor.
        match (&verdict, action) {
            (Verdict::Torn { offset }, _) => self.recovery.torn_tail_at = Some(*offset),
            (_, Action::Refuse) => {
                let Verdict::Damaged {
                    offset,
                    why,
                    following,
                } = verdict
                else {
                    return Err(ArchiveError::Internal(
                        "recovery refused an undamaged manifest".into(),
                    ));
                };
                return Err(match following {
                    Some(following) => ArchiveError::DamagedManifest {
                        path: current_path,
                        offset,
                        following,
                    },
                    None => ArchiveError::DamagedTail {
                        path: current_path,
                        offset,
                        why,
                    },
                });
            }
            (Verdict::Damaged { offset, .. }, Action::Repair) => {
                // A replica that holds this generation past the damage holds the records a
                // repair would drop, and the pass after it would replace them there too.
                replicate::guard_repair(
                    &self.root,
                    self.config.replica.as_deref(),
                    current,
                    *offset,
                )?;
                // `repair`: the damaged tail is handled as a torn one — a new generation from
                // the trusted prefix, the damaged generation kept whole as evidence.
                tracing::warn!(manifest = %current_path.display(), offset, "repair: starting a new generation from the trusted prefix");
                self.recovery.torn_tail_at = Some(*offset);
                // The lost barriers whose files prove themselves come back; the rest stays
                // evidence.
                let (restored, stopped) =
                    restore::restorable(&self.root, &state, self.config.compaction.group_rows)?;
                for barrier in restored {
                    state
                        .apply_owned(Record::Barrier(barrier.record.clone()))
                        .map_err(|e| {
                            ArchiveError::Internal(format!(
                                "a restored barrier does not apply: {e}"
                            ))
                        })?;
                    self.recovery
                        .restored
                        .push((barrier.record.barrier, barrier.files));
                }
                for why in stopped {
                    tracing::warn!(%why, "repair: not restored");
                }
            }
            _ => {}
        }
        if let Verdict::Damaged { offset, why, .. } = verdict {
            self.recovery.damaged_at = Some(offset);
            self.recovery.damaged_path = Some(relative(&self.root, &current_path));
            self.recovery.damage = Some(why);
        }
        if action == Action::Hold {
            return Ok((state, None, highest_generation_ever));
        }
        // Every other leftover becomes evidence, then repair, then claim.
        {
            let leftover = state.leftovers();
            for path in durable::walk_files(&self.root.join(STREAMS_DIR))? {
                match leftover(&relative(&self.root, &path)) {
                    manifest::Leftover::Live => {}
                    // A file of format 11 is kept until a checkpoint when the log goes on
                    // (see `Archive::gone`).
                    manifest::Leftover::Gone
                        if !matches!(action, Action::NewGeneration | Action::Repair)
                            && state
                                .obsolete_rows_form
                                .contains(&relative(&self.root, &path)) =>
                    {
                        self.gone.push(path)
                    }
                    manifest::Leftover::Gone => durable::remove(&self.disk, &path)?,
                    manifest::Leftover::Evidence => {
                        moved.push(self.keep_as_evidence(&quarantine, &path)?)
                    }
                }
            }
        }
        for (_, path) in &generations[..generations.len() - 1] {
            moved.push(self.keep_as_evidence(&quarantine, path)?);
        }
        let log = if matches!(action, Action::NewGeneration | Action::Repair) {
            let generation = highest_generation_ever + 1;
            let log = LogWriter::create(
                &self.root.join(TMP_DIR),
                &manifest_dir,
                generation,
                &state,
                &self.disk,
            )?;
            state.generation = generation;
            self.recovery.repaired_generation = Some(generation);
            moved.push(self.keep_as_evidence(&quarantine, &current_path)?);
            log
        } else {
            LogWriter::append_to(
                &self.disk,
                &current_path,
                replayed.trusted_len,
                replayed.snapshot_len,
            )?
        };
        self.recovery.quarantined = moved.iter().map(|p| relative(&self.root, p)).collect();
        if !moved.is_empty() {
            tracing::warn!(archive = %self.root.display(), files = moved.len(), "recovery moved leftovers into quarantine");
        }
        Ok((state, Some(log), highest_generation_ever))
    }

    /// Moves `path` into this open's evidence directory, keeping its relative path.
    pub(super) fn keep_as_evidence(&self, quarantine: &Path, path: &Path) -> Result<PathBuf> {
        durable::quarantine(&self.disk, &self.root, quarantine, path)
    }

    /// A fresh directory under `.quarantine/` for this open's evidence.
    pub(super) fn quarantine_dir(&self) -> Result<PathBuf> {
        let base = self.root.join(QUARANTINE_DIR);
        let stamp = self.config.clock.now_ns();
        let mut n = 0u32;
        loop {
            let dir = base.join(format!("open-{stamp}-{n}"));
            if !dir.exists() {
                return Ok(dir);
            }
            n += 1;
        }
    }

    /// The lowest name above every name the archive ever held: recorded, live, or evidence.
    pub(super) fn name_floor(&self, state: &State, evidence: &[PathBuf]) -> Result<u64> {
        let live = durable::walk_files(&self.root.join(STREAMS_DIR))?;
        let tmp = durable::walk_files(&self.root.join(TMP_DIR))?;
        let seen = live
            .iter()
            .chain(&tmp)
            .chain(evidence)
            .filter_map(|p| numbered(p))
            .max();
        Ok(state.next_name.max(seen.map_or(1, |n| n + 1)))
    }

    pub(super) fn declare(&mut self) -> Result<()> {
        let specs = self.config.streams.clone();
        for spec in specs {
            let decl = spec.decl()?;
            match self.commit.state().streams.get(&decl.id) {
                Some(existing) if existing.decl != decl => {
                    return Err(ArchiveError::declaration(
                        &decl.id,
                        describe_drift(&existing.decl, &decl),
                    ));
                }
                Some(_) => {}
                None if self.config.read_only => {}
                None => {
                    let record = Record::Declare(decl.clone());
                    self.commit(record)?;
                }
            }
            if self.selected.contains_key(&decl.id) {
                return Err(ArchiveError::declaration(
                    &decl.id,
                    "selected twice at assembly",
                ));
            }
            let full_schema =
                stored_schema(&decl).map_err(|m| ArchiveError::declaration(&decl.id, m))?;
            self.selected
                .insert(decl.id.clone(), Selected { spec, full_schema });
        }
        Ok(())
    }
}

fn describe_drift(recorded: &StreamDecl, declared: &StreamDecl) -> String {
    let cols = |d: &StreamDecl| {
        d.columns
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}",
                    c.name,
                    c.data_type,
                    if c.nullable { "?" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut diffs = Vec::new();
    if recorded.columns != declared.columns {
        diffs.push(format!(
            "columns: recorded [{}], declared [{}]",
            cols(recorded),
            cols(declared)
        ));
    }
    if recorded.track != declared.track {
        diffs.push(format!(
            "track: recorded {:?}, declared {:?}",
            recorded.track, declared.track
        ));
    }
    if recorded.axis != declared.axis {
        diffs.push(format!(
            "axis: recorded {:?}, declared {:?}",
            recorded.axis, declared.axis
        ));
    }
    if recorded.ladder != declared.ladder {
        diffs.push(format!(
            "ladder: recorded {:?}, declared {:?}",
            recorded.ladder, declared.ladder
        ));
    }
    if recorded.measured != declared.measured {
        diffs.push(format!(
            "measured fields: recorded {:?}, declared {:?}",
            recorded.measured, declared.measured
        ));
    }
    format!("the declaration differs from the one the manifest records ({}); a stream's shape cannot drift — declare it as recorded or use a new stream id", diffs.join("; "))
}
