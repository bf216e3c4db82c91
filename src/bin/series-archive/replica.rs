//! `replicate` and `restore`: the bucket as a whole archive, from the command line; and the
//! pass every committing command runs once a replica is declared.

use crate::Failure;
use series_archive::archive::cold::ColdTier;
use series_archive::archive::replicate::{self, ReplicaStatus, ReplicationReport};
use series_archive::archive::{Archive, Clock, Config, LocalDisk, SystemClock};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `replicate` was asked.
pub(crate) struct Request<'a> {
    pub archive: &'a Path,
    pub url: Option<&'a str>,
    pub status: bool,
    pub follow: Option<Duration>,
    pub json: bool,
}

fn tier_of(archive: &Path, url: Option<&str>) -> Result<ColdTier, Failure> {
    let url = match url {
        Some(url) => url.to_owned(),
        None => replicate::recorded(archive)?.ok_or_else(|| Failure {
            code: 2,
            message: format!(
                "{} has no replica: declare one with `series-archive replicate {} s3://bucket/prefix`",
                archive.display(),
                archive.display()
            ),
        })?,
    };
    Ok(ColdTier::from_url(&url)?)
}

fn show_status(s: &ReplicaStatus) -> String {
    if s.caught_up() {
        format!(
            "{}: caught up (generation {}, {} record(s), {} bytes of manifest)",
            s.url, s.local_generation, s.local_records, s.local_bytes
        )
    } else {
        format!(
            "{}: {} record(s) ({} bytes of manifest{}) behind generation {}{}",
            s.url,
            s.records_behind,
            s.bytes_behind,
            s.seconds_behind
                .map(|t| format!(", the oldest committed {t:.1} s ago"))
                .unwrap_or_default(),
            s.local_generation,
            match s.generation {
                Some(g) if g != s.local_generation => format!(" (the bucket holds generation {g})"),
                Some(_) => String::new(),
                None => " (the bucket holds no manifest yet)".into(),
            }
        )
    }
}

fn show_pass(r: &ReplicationReport, secs: f64) -> String {
    format!(
        "replicated to {}: {} file(s), {} bytes, {} Delta object(s), {} manifest part(s), {} object(s) deleted in {secs:.2} s; {}",
        r.status.url,
        r.files,
        r.bytes,
        r.delta_objects,
        r.parts,
        r.deleted,
        if r.status.caught_up() { "caught up".to_owned() } else { show_status(&r.status) }
    )
}

/// One pass, with a progress bar over the files it uploads.
pub(crate) fn pass(archive: &Path, tier: &ColdTier) -> Result<(ReplicationReport, f64), Failure> {
    let began = Instant::now();
    let bar = crate::progress(0, "replicating", "files");
    let report = replicate::replicate(archive, tier, &Default::default(), |done, total, _| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    Ok((report, began.elapsed().as_secs_f64()))
}

/// `replicate ARCHIVE [URL]`.
pub(crate) fn run(req: Request<'_>) -> Result<(), Failure> {
    if let Some(url) = req.url {
        // Declaring takes the writer's lock: no other writer commits meanwhile.
        if let Some(cold) = crate::lifecycle::cold_url() {
            if replicate::overlaps(cold, url) {
                return Err(Failure {
                    code: 2,
                    message: format!("--cold {cold} and the replica {url} share a prefix: give each a prefix of its own (each removes objects the other holds)"),
                });
            }
        }
        let tier = ColdTier::from_url(url)?;
        let open = Archive::open(req.archive, crate::config())?;
        replicate::declare(
            req.archive,
            &(Arc::new(LocalDisk) as series_archive::archive::Disk),
            &tier,
            SystemClock.now_ns(),
        )?;
        drop(open);
        eprintln!("{} replicates to {url} from now on", req.archive.display());
    }
    let tier = tier_of(req.archive, req.url)?;
    if req.status {
        let status = match replicate::status(req.archive, &tier, SystemClock.now_ns()) {
            Ok(status) => status,
            Err(e) => {
                // The bucket did not answer: what the last pass left says the most the lag
                // can be; the command still fails, since the bucket could not be asked.
                let url = tier.url();
                let seen = last_seen(req.archive, url);
                if req.json {
                    out!(
                        "{}",
                        serde_json::json!({ "url": url, "error": e.to_string(), "last_seen": seen })
                    );
                } else if let Some(seen) = &seen {
                    out!(
                        "{url}: not reachable; as of the last pass that reached it, {}",
                        show_seen(seen)
                    );
                }
                return Err(e.into());
            }
        };
        if req.json {
            out!("{}", serde_json::to_string(&status)?);
        } else {
            out!("{}", show_status(&status));
        }
        return Ok(());
    }
    let (report, secs) = pass(req.archive, &tier)?;
    if req.json {
        out!("{}", serde_json::to_string(&report)?);
    } else {
        out!("{}", show_pass(&report, secs));
    }
    let Some(every) = req.follow else {
        return Ok(());
    };
    // Following: a pass whenever the manifest moved, until the process is stopped. A pass
    // that fails (the bucket down, throttling) is reported and tried again.
    loop {
        std::thread::sleep(every);
        match pass(req.archive, &tier) {
            Ok((report, _)) if report.parts == 0 => {}
            Ok((report, secs)) => {
                if req.json {
                    out!("{}", serde_json::to_string(&report)?);
                } else {
                    out!("{}", show_pass(&report, secs));
                }
            }
            Err(f) => eprintln!(
                "series-archive: replication pass failed, retrying: {}",
                f.message
            ),
        }
    }
}

/// Where the command left its replica, for `--requests` ([`lag_said`]).
static LAG: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn lag(said: String) {
    *LAG.lock().unwrap_or_else(|p| p.into_inner()) = Some(said);
}

/// Where the command left its replica, when it has one and the command replicated: what
/// `--requests` prints beside the requests.
pub(crate) fn lag_said() -> Option<String> {
    LAG.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Where the command's own replicator left the bucket ([`stopped`]), for [`after_commit`].
static STOPPED: std::sync::Mutex<Option<series_archive::archive::Replication>> =
    std::sync::Mutex::new(None);

/// Stops the replicator of `archive` (a command that sealed with it on, at its end) and keeps
/// where it left the bucket for [`after_commit`].
pub(crate) fn stopped(archive: &mut Archive) {
    if let Some(r) = archive.stop_replication() {
        *STOPPED.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }
}

/// `--max-lag` and `--max-lag-wait`, for [`replicating`].
static MAX_LAG: std::sync::OnceLock<Option<(u64, std::time::Duration)>> =
    std::sync::OnceLock::new();

pub(crate) fn set_max_lag(lag: Option<u64>, wait: f64) -> Result<(), Failure> {
    if !(wait.is_finite() && wait > 0.0) {
        return Err(Failure {
            code: 2,
            message: format!("--max-lag-wait {wait}: give a number of seconds above 0"),
        });
    }
    let _ = MAX_LAG.set(lag.map(|n| (n, std::time::Duration::from_secs_f64(wait))));
    Ok(())
}

/// `config` for a command that seals many barriers: the archive's own replicator follows
/// each commit while the command runs (a long ingest's replica does not wait for its end),
/// under `--max-lag` when given.
pub(crate) fn replicating(config: Config) -> Config {
    let config = config.replication(true);
    match MAX_LAG.get().copied().flatten() {
        Some((lag, wait)) => config.max_lag(lag, wait),
        None => config,
    }
}

/// The pass a command that committed runs when the archive has a replica: the commit stands
/// whatever the bucket answers; a pass that fails says so (the lag is worked off by the next
/// pass) and the command still succeeds.
pub(crate) fn after_commit(archive: &Path, result: Result<(), Failure>) -> Result<(), Failure> {
    result?;
    let Ok(Some(url)) = replicate::recorded(archive) else {
        return Ok(());
    };
    // A command whose own replicator followed its commits says where that left the bucket,
    // and runs another pass unless the replicator caught up, or its last pass was still
    // running at the close: a bucket that stalls holds the command up once (the
    // replicator's last wait, 10 s), not again for a pass of its own under the request
    // deadline (60 s). A pass that failed is tried once more here (a transient fault).
    let replicated = STOPPED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(r) = replicated {
        lag(format!(
            "{url}: {} pass(es) by the archive's replicator, {} commit(s) behind at its end{}",
            r.passes,
            r.behind,
            if r.running {
                " (a pass still running)"
            } else {
                ""
            }
        ));
        if r.behind == 0 {
            eprintln!(
                "replicated to {url}: caught up ({} pass(es) by the archive's replicator while the command ran)",
                r.passes
            );
            return Ok(());
        }
        if r.running {
            let why = "a pass was still running 10 s after the last commit (the bucket is slow or stalls)";
            eprintln!(
                "series-archive: WARNING: replication to {url} failed: the archive's replicator is {} commit(s) behind: {why}; what this command committed is durable locally, and `series-archive replicate {}` works the lag off",
                r.behind,
                archive.display()
            );
            return Ok(());
        }
    }
    let outcome = ColdTier::from_url(&url)
        .map_err(Failure::from)
        .and_then(|tier| pass(archive, &tier));
    match outcome {
        // Said whether or not this pass found anything left: the archive's own replicator may
        // have carried the commits already.
        Ok((report, secs)) => {
            lag(show_status(&report.status));
            eprintln!("{}", show_pass(&report, secs))
        }
        Err(f) => eprintln!(
            "series-archive: WARNING: replication to {url} failed: {}; what this command committed is durable locally, and `series-archive replicate {}` works the lag off",
            f.message,
            archive.display()
        ),
    }
    Ok(())
}

/// What `inspect` says of the archive's replica, if it has one: where it stands, or why the
/// bucket could not say.
pub(crate) fn inspected(archive: &Path) -> Option<String> {
    if replicate::as_url(archive).is_some() {
        return None;
    }
    let (url, status) = replica_status(archive)?;
    Some(match status {
        Ok(status) => show_status(&status),
        Err(f) => match last_seen(archive, &url) {
            Some(seen) => format!(
                "{url}: not reachable ({}); as of the last pass that reached it, {}",
                f.message,
                show_seen(&seen)
            ),
            None => format!(
                "{url}: not reachable ({}); no pass has reached it yet",
                f.message
            ),
        },
    })
}

/// Where the bucket stood as of the archive's last completed pass (`None` before the first).
fn last_seen(archive: &Path, url: &str) -> Option<ReplicaStatus> {
    replicate::last_seen(archive, url, SystemClock.now_ns())
        .ok()
        .flatten()
}

/// What an unreachable bucket's last known standing says: an upper bound on the lag.
fn show_seen(s: &ReplicaStatus) -> String {
    let ago = s
        .as_of_ns
        .map(|at| SystemClock.now_ns().saturating_sub(at) as f64 / 1e9)
        .unwrap_or(0.0);
    if s.caught_up() {
        format!("{ago:.0} s ago, it was caught up, and nothing was committed since")
    } else {
        format!(
            "{ago:.0} s ago: now at most {} record(s) ({} bytes of manifest{}) behind",
            s.records_behind,
            s.bytes_behind,
            s.seconds_behind
                .map(|t| format!(", the oldest committed {t:.1} s ago"))
                .unwrap_or_default(),
        )
    }
}

/// The archive's recorded replica and where it stands, or why the bucket could not say.
fn replica_status(archive: &Path) -> Option<(String, Result<ReplicaStatus, Failure>)> {
    let url = replicate::recorded(archive).ok()??;
    let status = ColdTier::from_url(&url)
        .map_err(Failure::from)
        .and_then(|tier| Ok(replicate::status(archive, &tier, SystemClock.now_ns())?));
    Some((url, status))
}

/// What `inspect --json` says of the archive's replica under `"replica"`: the status
/// (`replicate --status --json`), or the URL and why the bucket could not say.
pub(crate) fn inspected_json(archive: &Path) -> Option<serde_json::Value> {
    if replicate::as_url(archive).is_some() {
        return None;
    }
    let (url, status) = replica_status(archive)?;
    Some(match status {
        Ok(status) => serde_json::to_value(&status).ok()?,
        Err(f) => serde_json::json!({
            "url": url,
            "error": f.message,
            "last_seen": last_seen(archive, &url),
        }),
    })
}

/// `restore URL DIR`.
pub(crate) fn restore(url: &str, dir: &Path, json: bool) -> Result<(), Failure> {
    let tier = ColdTier::from_url(url)?;
    let began = Instant::now();
    let bar = crate::progress(0, "restoring", "files");
    let report = replicate::restore(
        &tier,
        dir,
        &(Arc::new(LocalDisk) as series_archive::archive::Disk),
        SystemClock.now_ns(),
        |done, total, _| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    // The restored archive opens as its own writer (recovery checks it), then every file it
    // names is verified.
    let archive = Archive::open(dir, crate::config())?;
    let damaged = archive.verify(|_, _| {});
    drop(archive);
    if !damaged.is_empty() {
        for d in &damaged {
            out!("DAMAGED {d}");
        }
        return Err(Failure {
            code: 4,
            message: format!(
                "the restored archive at {} does not verify ({} problem(s))",
                dir.display(),
                damaged.len()
            ),
        });
    }
    let secs = began.elapsed().as_secs_f64();
    if json {
        out!("{}", serde_json::to_string(&report)?);
    } else {
        out!(
            "restored {url} (generation {}, {} record(s)) into {}: {} file(s), {} bytes, {} Delta object(s) in {secs:.2} s; verified; it replicates to {url} and the archive it came from is fenced",
            report.generation,
            report.records,
            dir.display(),
            report.files,
            report.bytes,
            report.delta_objects
        );
    }
    Ok(())
}
