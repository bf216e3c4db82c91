//! `sweep`, `retire`, `compact`, `checkpoint`, `repair` and `quarantine`: the lifecycle from
//! the command line.

use crate::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use series_archive::archive::cold::ColdTier;
use series_archive::archive::lifecycle::{plan_offload, OffloadPolicy};
use series_archive::archive::lifecycle::{
    plan_retirement, Compaction, Lifetime, Retention, RetireReport,
};
use series_archive::archive::{Archive, Config};
use std::path::Path;
use std::time::Instant;

/// Lifetimes given on the command line for one stream.
#[derive(clap::Args)]
pub(crate) struct Lifetimes {
    /// How long raw rows live: forever, age:7d (or just 7d), behind:AXIS_UNITS, bytes:10GiB.
    #[arg(long, value_parser = Lifetime::parse)]
    raw: Option<Lifetime>,
    /// How long every level lives (forever, age:30d, behind:AXIS_UNITS).
    #[arg(long, value_parser = Lifetime::parse)]
    levels: Option<Lifetime>,
    /// One level's lifetime, K=LIFETIME (e.g. 0=age:30d); repeatable, wins over --levels.
    #[arg(long = "level", value_parser = parse_level)]
    level: Vec<(usize, Lifetime)>,
    /// Retire a track whole once it has had no rows for this long (e.g. 2d).
    #[arg(long, value_parser = series_archive::archive::lifecycle::parse_duration)]
    idle: Option<std::time::Duration>,
}

fn parse_level(text: &str) -> Result<(usize, Lifetime), String> {
    let (k, lifetime) = text
        .split_once('=')
        .ok_or_else(|| format!("--level {text:?}: write K=LIFETIME, e.g. 0=age:30d"))?;
    let k: usize = k
        .trim()
        .parse()
        .map_err(|_| format!("--level {text:?}: {k:?} is not a level number"))?;
    Ok((k, Lifetime::parse(lifetime)?))
}

impl Lifetimes {
    fn retention(&self, levels: usize) -> Retention {
        let mut r = Retention::forever();
        if let Some(raw) = self.raw {
            r = r.raw(raw);
        }
        if let Some(all) = self.levels {
            r = r.all_levels(levels, all);
        }
        for &(k, l) in &self.level {
            r = r.level(k, l);
        }
        if let Some(idle) = self.idle {
            r = r.idle(idle);
        }
        r
    }
}

/// Opens an existing archive; a writable open with the `--cold` tier, whose orphan objects
/// (uploads no record names) it removes and reports. A command that writes runs to its end
/// when its standard output fails, and fails then (`output::defer_failures`).
fn open(archive: &Path, config: Config) -> Result<Archive, Failure> {
    crate::output::defer_failures();
    if !archive.join("manifest").is_dir() {
        return Err(format!(
            "{} is not an archive (no manifest directory)",
            archive.display()
        )
        .into());
    }
    let opened = Archive::open(archive, with_cold(config)?)?;
    let recovery = opened.recovery();
    for removed in &recovery.cold_orphans_removed {
        eprintln!("recovery: removed {removed} (an upload no record names)");
    }
    if recovery.retired_rewritten > 0 {
        eprintln!(
            "recovery: rewrote {} data file(s) still holding retired row groups",
            recovery.retired_rewritten
        );
    }
    for table in &recovery.delta_leveled {
        eprintln!("recovery: brought the Delta log {table} level with the manifest");
    }
    for table in &recovery.delta_rebuilt {
        eprintln!("recovery: the Delta log {table} could not be read; wrote it anew (the old one is in .quarantine/)");
    }
    for why in &recovery.delta_behind {
        eprintln!("warning: {why}");
    }
    Ok(opened)
}

/// `publish`: writes the streams' Delta logs anew from the manifest.
pub(crate) fn publish(archive: &Path, streams: &[String]) -> Result<(), Failure> {
    let mut archive = open(archive, crate::config())?;
    let reports = if streams.is_empty() {
        archive.publish(None)?
    } else {
        let mut all = Vec::new();
        for s in streams {
            all.extend(archive.publish(Some(s))?);
        }
        all
    };
    for r in reports {
        match r.version {
            Some(v) => out!(
                "{}/{}: Delta version {v}, {} file(s): {}",
                r.stream,
                r.table,
                r.files,
                r.path
            ),
            None => out!("{}/{}: no files, no log", r.stream, r.table),
        }
    }
    Ok(())
}

fn show_retirement(r: &RetireReport, verb: &str) {
    out!(
        "{verb} {}: {} track(s) moved their floors ({} retired whole); {} file(s), {} bytes deleted; {} file(s), {} bytes rewritten without their retired row groups",
        r.stream,
        r.tracks,
        r.whole,
        r.files_deleted,
        r.bytes_deleted,
        r.files_rewritten,
        r.bytes_rewritten
    );
}

/// `sweep`: applies lifetimes now (or at `--now`), or shows what they would retire.
pub(crate) fn sweep(
    archive: &Path,
    stream: &str,
    lifetimes: &Lifetimes,
    now_ns: Option<u64>,
    dry_run: bool,
) -> Result<(), Failure> {
    // The declaration is checked against the recorded stream before anything is written.
    let probe = open(archive, crate::config().read_only(true))?;
    let state = probe
        .state()
        .streams
        .get(stream)
        .ok_or_else(|| format!("the archive records no stream {stream:?}"))?;
    let levels = state.decl.ladder.map_or(0, |l| l.levels as usize);
    let retention = lifetimes.retention(levels);
    retention
        .validate(stream, state.decl.axis.is_some(), levels)
        .map_err(Failure::from)?;
    if retention.is_forever() {
        return Err("no lifetime given: pass --raw, --levels, --level K=LIFETIME or --idle".into());
    }
    let now = now_ns.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    if dry_run {
        match plan_retirement(state, &retention, now) {
            None => out!("nothing to retire in {stream}"),
            Some(plan) => {
                out!(
                    "would retire in {stream}: {} track(s), {} file(s) dropped",
                    plan.tracks.len(),
                    plan.dropped.len()
                );
                for t in &plan.tracks {
                    let raw = t.raw.map_or("-".to_owned(), |f| {
                        format!("position {} axis {}", f.position, f.axis)
                    });
                    let levels: Vec<String> = t
                        .levels
                        .iter()
                        .enumerate()
                        .filter_map(|(k, f)| f.map(|f| format!("L{k}≥{}", f.axis)))
                        .collect();
                    out!(
                        "  {:<32} raw floor {raw}{}{}",
                        t.track.join(" / "),
                        if levels.is_empty() {
                            String::new()
                        } else {
                            format!("; levels {}", levels.join(" "))
                        },
                        if t.whole { "; WHOLE TRACK" } else { "" }
                    );
                }
            }
        }
        return Ok(());
    }
    drop(probe);
    let mut archive = open(archive, crate::config().retention(stream, retention))?;
    let reports = archive.sweep(now)?;
    if reports.is_empty() {
        out!("nothing to retire in {stream}");
    }
    for r in &reports {
        show_retirement(r, "retired in");
    }
    Ok(())
}

/// `retire`: one or more tracks, whole.
pub(crate) fn retire(
    archive: &Path,
    stream: &str,
    track: &[String],
    all: bool,
) -> Result<(), Failure> {
    if track.is_empty() && !all {
        return Err("name the track to retire with --track LABEL.. (a prefix retires every track beneath it), or pass --all-tracks".into());
    }
    let mut archive = open(archive, crate::config())?;
    // A label that names no track (a typo, `--track a,b` for `--track a b`) is refused:
    // "nothing left to retire" is the answer for tracks that are retired already.
    if let Some(state) = archive.state().streams.get(stream) {
        // (More labels than the stream has components: the library names that.)
        let named = track.is_empty()
            || track.len() > state.decl.track.len()
            || state.tracks.values().any(|t| t.labels.starts_with(track));
        if !named {
            return Err(format!(
                "stream {stream:?} has no track under {track:?} (labels are separate values, outermost first: --track run_0 probe.1); nothing was retired"
            )
            .into());
        }
    }
    match archive.retire_track(stream, track)? {
        None => out!("nothing left to retire under {}", track.join(" / ")),
        Some(r) => show_retirement(&r, "retired in"),
    }
    Ok(())
}

/// `compact`: every stream (or the named ones), with a progress bar.
static COLD: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Records the global `--cold URL`.
pub(crate) fn set_cold(url: Option<String>) {
    let _ = COLD.set(url);
}

pub(crate) fn cold_url() -> Option<&'static str> {
    COLD.get().and_then(|u| u.as_deref())
}

/// A writable configuration with the cold tier `--cold` names, when one is given.
pub(crate) fn with_cold(config: Config) -> Result<Config, Failure> {
    Ok(match cold_url() {
        Some(url) => config.cold(ColdTier::from_url(url)?),
        None => config,
    })
}

pub(crate) fn compact(
    archive: &Path,
    streams: &[String],
    target: u64,
    group_rows: usize,
    auto: bool,
) -> Result<(), Failure> {
    let compaction = Compaction {
        target_bytes: target,
        group_rows,
        ..Compaction::default()
    };
    let mut archive = open(archive, crate::config().compaction(compaction))?;
    let ids: Vec<String> = if streams.is_empty() {
        archive.state().streams.keys().cloned().collect()
    } else {
        for s in streams {
            if !archive.state().streams.contains_key(s) {
                return Err(format!("the archive records no stream {s:?}").into());
            }
        }
        streams.to_vec()
    };
    let began = Instant::now();
    let mut any = false;
    for id in ids {
        // One bar a job: a job's first step makes it, its commit (the report) ends it.
        let mut bar: Option<ProgressBar> = None;
        let reports = archive.compact_stream(&id, !auto, |done, total| {
            bar.get_or_insert_with(|| {
                let bar = ProgressBar::new(total as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "compacting {prefix} {bar:40} {pos}/{len} segments [{elapsed}]",
                    )
                    .expect("a valid template"),
                );
                bar.set_prefix(id.clone());
                bar
            })
            .set_position(done as u64);
            if done == total {
                if let Some(bar) = bar.take() {
                    bar.finish_and_clear();
                }
            }
        })?;
        for r in &reports {
            any = true;
            out!(
                "{id}: {} data file(s), {} bytes → {} file(s), {} bytes; {} level file(s), {} bytes → {} bytes",
                r.files_in,
                r.bytes_in,
                r.files_out,
                r.bytes_out,
                r.level_files_in,
                r.level_bytes_in,
                r.level_bytes_out
            );
        }
    }
    if !any {
        out!("nothing to compact");
    } else {
        eprintln!("compacted in {:.2} s", began.elapsed().as_secs_f64());
        if let Some(generation) = archive.checkpoint_if_due()? {
            eprintln!("checkpoint: manifest generation {generation} holds the live state");
        }
    }
    Ok(())
}

/// `checkpoint`: a new manifest generation from the live state.
pub(crate) fn checkpoint(archive: &Path) -> Result<(), Failure> {
    let mut archive = open(archive, crate::config())?;
    let before = archive.manifest_bytes();
    let generation = archive.checkpoint()?;
    out!(
        "manifest generation {generation}: {} bytes (was {before})",
        archive.manifest_bytes()
    );
    Ok(())
}

/// `repair`: shows what getting past mid-log manifest damage would lose; with `--yes` does it.
pub(crate) fn repair(archive: &Path, yes: bool) -> Result<(), Failure> {
    if !archive.join("manifest").is_dir() {
        return Err(format!(
            "{} is not an archive (no manifest directory)",
            archive.display()
        )
        .into());
    }
    let Some(plan) = Archive::repair_plan(archive)? else {
        out!("nothing to repair: the manifest replays whole (a torn tail, if any, is repaired by the next writable open)");
        return Ok(());
    };
    out!(
        "manifest {} is damaged at byte {}: {} record(s) before it are trusted, {} byte(s) from there on are not",
        plan.generation,
        plan.damaged_at,
        plan.trusted_records,
        plan.bytes_after_damage
    );
    out!("what shows it: {}", plan.why);
    if plan.lost.is_empty() {
        out!("  no valid record follows the damage");
    }
    if !plan.restorable.is_empty() {
        out!(
            "lost barriers whose files prove themselves (encoded again from their rows, byte for byte), restored into the new generation ({}):",
            plan.restorable.len()
        );
        for barrier in &plan.restorable {
            out!("  {barrier}");
        }
    }
    for why in &plan.not_restored {
        out!("not restored: {why}");
    }
    if !plan.beyond_files.is_empty() {
        out!(
            "data files holding rows of acknowledged records the manifest lost ({}):",
            plan.beyond_files.len()
        );
        for path in &plan.beyond_files {
            out!("  {path}");
        }
    }
    if !plan.delta_commits.is_empty() {
        out!(
            "Delta commits naming files the trusted prefix does not ({}); a Delta commit is written only after its record is durable:",
            plan.delta_commits.len()
        );
        for commit in &plan.delta_commits {
            out!("  {commit}");
        }
    }
    if !plan.lost.is_empty() {
        out!(
            "valid records after the damage, whose claims the repaired archive will not make ({}):",
            plan.lost.len()
        );
    }
    for lost in &plan.lost {
        out!("  at byte {}: {}", lost.offset, lost.what);
    }
    let bytes: u64 = plan.quarantined.iter().map(|(_, b)| b).sum();
    out!(
        "files no trusted or restored record names, moved into .quarantine/ ({}, {bytes} bytes):",
        plan.quarantined.len()
    );
    for (path, len) in &plan.quarantined {
        out!("  {path} ({len} bytes)");
    }
    out!("the damaged generation is kept whole in .quarantine/ as evidence; nothing is deleted");
    if !yes {
        out!("nothing was changed: rerun with --yes to repair");
        return Ok(());
    }
    let repaired = Archive::open(archive, crate::config().repair(true))?;
    let recovery = repaired.recovery();
    out!(
        "repaired: manifest generation {} starts from the trusted prefix and {} restored barrier(s); {} file(s) kept in quarantine",
        recovery.repaired_generation.unwrap_or(repaired.state().generation),
        recovery.restored.len(),
        recovery.quarantined.len()
    );
    Ok(())
}

/// `quarantine`: lists evidence; with `--purge-older-than` deletes what is older.
pub(crate) fn quarantine(
    archive: &Path,
    purge_older_than: Option<std::time::Duration>,
) -> Result<(), Failure> {
    let show = |e: &series_archive::archive::Evidence, now: u64| {
        let bytes: u64 = e.files.iter().map(|(_, b)| b).sum();
        let age = e.kept_at_ns.map_or("age unknown".to_owned(), |t| {
            format!("kept {:.1} h ago", now.saturating_sub(t) as f64 / 3.6e12)
        });
        format!(
            "{} ({} file(s), {bytes} bytes, {age})",
            e.dir,
            e.files.len()
        )
    };
    let now = series_archive::archive::Clock::now_ns(&series_archive::archive::SystemClock);
    match purge_older_than {
        None => {
            let archive = crate::read_only(archive)?;
            let evidence = archive.evidence()?;
            if evidence.is_empty() {
                out!("quarantine: empty");
            }
            for e in &evidence {
                out!("{}", show(e, now));
                for (path, len) in &e.files {
                    out!("  {path} ({len} bytes)");
                }
            }
        }
        Some(age) => {
            let mut archive = open(archive, crate::config())?;
            let before = now.saturating_sub(u64::try_from(age.as_nanos()).unwrap_or(u64::MAX));
            let purged = archive.purge_evidence(before)?;
            for e in &purged {
                out!("purged {}", show(e, now));
            }
            let kept = archive.evidence()?.len();
            out!(
                "purged {} evidence director(ies); {kept} kept",
                purged.len()
            );
        }
    }
    Ok(())
}

/// `offload`: moves data files to the cold tier (or, with `--dry-run`, shows which would move).
pub(crate) fn offload(
    archive: &Path,
    policy: OffloadPolicy,
    dry_run: bool,
    now: Option<u64>,
) -> Result<(), Failure> {
    // With --cold, files move to the cold tier; without it, an archive with a replica evicts
    // the local copies of files the replica holds (nothing is uploaded twice).
    let replica = series_archive::archive::replicate::recorded(archive)?;
    let (cold, evict) = match (cold_url(), replica) {
        (Some(cold), _) => (cold.to_owned(), false),
        (None, Some(replica)) => (replica, true),
        (None, None) => {
            return Err(Failure {
                code: 2,
                message: "offload needs a cold tier (--cold s3://bucket/prefix, or file:///dir), or a replica whose copies it evicts (series-archive replicate ARCHIVE URL)"
                    .into(),
            })
        }
    };
    let (verb, verbed) = if evict {
        ("evict", "evicted")
    } else {
        ("move", "offloaded")
    };
    if policy.older_than.is_none() && policy.local_budget.is_none() {
        return Err("say which files move: --older-than AGE and/or --local-budget SIZE".into());
    }
    let now = now.unwrap_or_else(|| {
        series_archive::archive::Clock::now_ns(&series_archive::archive::SystemClock)
    });
    if dry_run {
        let archive = crate::read_only(archive)?;
        let mut any = false;
        for (id, stream) in &archive.state().streams {
            let moving = plan_offload(&stream.files, &policy, now);
            any |= !moving.is_empty();
            for f in moving {
                out!(
                    "would {verb} {} ({} bytes) of stream {id} {} {cold}/{}",
                    f.path,
                    f.bytes,
                    if evict { "held at" } else { "to" },
                    f.path
                );
            }
        }
        if !any {
            out!("nothing to move");
        }
        return Ok(());
    }
    if evict {
        // The replica first holds every commit, so every file the policy picks can go.
        let tier = ColdTier::from_url(&cold)?;
        crate::replica::pass(archive, &tier).map_err(|f| Failure {
            code: f.code,
            message: format!(
                "evicting needs the replica up to date, and the replication pass failed: {}; nothing was evicted",
                f.message
            ),
        })?;
    }
    let mut archive = open(archive, crate::config())?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{}ing {{bar:40}} {{pos}}/{{len}} files, {{msg}} [{{elapsed}}]",
            if evict { "evict" } else { "offload" }
        ))
        .expect("a valid template"),
    );
    let began = Instant::now();
    let shown = |done: usize, total: usize, bytes: u64| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(format!("{bytes} bytes"));
    };
    let reports = if evict {
        archive.evict(Some(&policy), now, shown)?
    } else {
        archive.offload(Some(&policy), now, shown)?
    };
    bar.finish_and_clear();
    let secs = began.elapsed().as_secs_f64();
    let mut failed = 0;
    for r in &reports {
        out!(
            "{verbed} {}: {} file(s), {} bytes {} {cold} in {secs:.2} s ({:.1} MB/s)",
            r.stream,
            r.files,
            r.bytes,
            if evict { "held at" } else { "to" },
            r.bytes as f64 / 1e6 / secs.max(1e-9)
        );
        for why in &r.failed {
            out!("  left local (retry later): {why}");
        }
        failed += r.failed.len();
    }
    if reports.is_empty() {
        out!("nothing to move");
    }
    if failed > 0 {
        return Err(Failure::from(format!(
            "{failed} file(s) could not be {}; they stay local and are served as before",
            if evict { "evicted" } else { "moved" }
        )));
    }
    Ok(())
}
