//! The eventd importer (`import-eventd`): an eventd metric store (SQLite: `series`,
//! `samples`, `rollups`, `metadata`) moved into the archive whole, resumably, and checked
//! before anything is touched. The mapping is `docs/eventd.md`'s. Behind the cargo feature
//! `eventd` (it links SQLite).
//!
//! [`import`] does the work and tells its [`Progress`] what it does (the command line draws
//! progress bars and prints the lines from it); it answers an [`ImportError`] that names
//! what was refused and where, and says whether anything was imported.
//!
//! - Counter, gauge and histogram series become tracks `(name, labels)` of the streams
//!   `counters` and `gauges`, and `(name, labels, boundaries)` of `histograms`: the series'
//!   identity, never its hash (two series whose label hashes collide stay two tracks).
//! - A series' samples are read in eventd's query order, `(timestamp, id)`, and staged in it:
//!   a sample inserted late (a larger `id` than later-stamped ones) takes its timestamp's
//!   place, as every eventd query shows it.
//! - Barriers are cut only where the timestamp changes within a series (or between series), so
//!   a track's newest timestamp in the archive says exactly which of its samples are there: a
//!   second run, after a kill or after eventd wrote more, imports each series' samples past
//!   it, with no duplicate and no gap.
//! - `rollups` rows become the stream `rollups` (tracks `(name, labels, function,
//!   window_seconds)`, axis `window_start`): eventd keeps them after it deletes the raw
//!   samples beneath, so they can be the only history of a window.

mod check;
mod error;
mod model;
mod pipeline;
mod progress;

use error::refuse;
pub use error::ImportError;
use model::LEDGER;
pub use model::SCHEMA_VERSION;
pub use progress::Progress;

use crate::archive::{reader, Archive, Config, Ladder, StreamSpec};
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rusqlite::{Connection, OpenFlags};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use check::{
    check_histograms, check_rollup_values, check_rollups, check_samples, check_schema, load_series,
    Counts, RollupLayout,
};
use model::{rollup_schema, rollup_track, Kind, Series, ROLLUPS};
use pipeline::{Msg, Reader, Rollups, Sealer};

/// The default level ladder of the sample streams: 60 s cells (eventd's finest rollup window,
/// so every rollup window folds from whole cells), ×8 per level, 8 levels (up to 8⁷ minutes,
/// about four years, a cell). Finer cells cost more than the samples: with 1 s cells every
/// sample of a 10 s scrape is a cell of its own (docs/eventd.md has the figures).
pub const LADDER: Ladder = Ladder {
    base: 60_000_000_000,
    factor: 8,
    levels: 8,
};

/// Parses `--ladder BASE,FACTOR,LEVELS` where BASE is nanoseconds or a duration (`1s`, `60s`,
/// `5m`, `1h`).
pub fn parse_ladder(text: &str) -> Result<Ladder, String> {
    let (base, rest) = text
        .split_once(',')
        .ok_or_else(|| format!("ladder {text:?}: write BASE,FACTOR,LEVELS (e.g. 60s,8,8)"))?;
    let base = base.trim();
    let unit = |suffix: &str, ns: u64| {
        base.strip_suffix(suffix)
            .and_then(|n| n.trim().parse::<u64>().ok())
            .and_then(|n| n.checked_mul(ns))
    };
    let ns = base
        .parse::<u64>()
        .ok()
        .or_else(|| unit("ms", 1_000_000))
        .or_else(|| unit("s", 1_000_000_000))
        .or_else(|| unit("m", 60_000_000_000))
        .or_else(|| unit("h", 3_600_000_000_000))
        .ok_or_else(|| {
            format!("ladder {text:?}: base {base:?} is neither nanoseconds nor a duration like 60s")
        })?;
    Ladder::parse(&format!("{ns},{rest}")).map_err(String::from)
}

/// What an import is asked.
#[derive(Debug)]
pub struct Request<'a> {
    /// The eventd metric database (`metrics.db`), opened read-only.
    pub database: &'a Path,
    /// The archive directory (created when absent).
    pub archive: &'a Path,
    /// The configuration the archive is opened with for writing (a cold tier, say): the
    /// importer adds its streams to it.
    pub config: Config,
    /// Seal a barrier every this many samples (at the next timestamp change).
    pub seal_rows: u64,
    /// The ladder for new sample streams (an existing one keeps its own).
    pub ladder: Option<Ladder>,
}

/// What an import did.
#[derive(Debug)]
pub struct Imported {
    /// The archive, still open for writing (the caller may compact it).
    pub archive: Archive,
    /// Samples imported by this run.
    pub samples: u64,
    /// Rollups imported by this run.
    pub rollups: u64,
    /// Rollups of windows eventd's newest sample has not yet passed, left for a later run.
    pub open_rollups: u64,
}

/// Imports the eventd database `req.database` into the archive `req.archive`: checks every
/// sample, then stages and seals in eventd's order, resuming after what an earlier run made
/// durable. Compacting the archive afterwards is the caller's ([`Imported::archive`]).
pub fn import(req: Request, progress: &mut dyn Progress) -> Result<Imported, ImportError> {
    let db = req.database;
    if !db.is_file() {
        return Err(ImportError::NoDatabase(db.to_path_buf()));
    }
    let sql = |e: rusqlite::Error| refuse(db, e);
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    // One read transaction: the whole import sees one state of a database eventd may still
    // be writing.
    conn.execute_batch("BEGIN").map_err(sql)?;
    progress.checking(db);
    let began = Instant::now();
    let plan = preflight(&conn, &req, progress);
    progress.checked();
    let Plan {
        series,
        counts,
        specs,
        rollup_keys,
        rollup_layout,
        resume,
        rollup_resume,
        already,
        ledger,
    } = plan?;

    let mut config = req.config;
    for spec in specs {
        config = config.stream(spec);
    }
    let mut archive = Archive::open(req.archive, config)?;
    progress.opened(&archive);
    progress.note(&format!(
        "{}: {} series ({} counters, {} gauges, {} histograms), {} samples, {} rollups; schema version {SCHEMA_VERSION}; checked in {:.2?}",
        db.display(),
        series.len(),
        series.iter().filter(|s| s.kind == Kind::Counter).count(),
        series.iter().filter(|s| s.kind == Kind::Gauge).count(),
        series.iter().filter(|s| s.kind == Kind::Histogram).count(),
        counts.samples,
        counts.rollups,
        began.elapsed()
    ));
    if let Some(said) = rollup_layout.said() {
        progress.note(&said);
    }
    if already > 0 {
        progress.note(&format!(
            "resuming: the archive already holds {already} of the samples"
        ));
    }

    let started = Instant::now();
    let rows = counts.samples + counts.rollups;
    progress.importing(rows, already.min(rows));
    let mut sealer = Sealer::new(&mut archive, progress, ledger.batch()?);
    let newest = ledger.newest;
    // Two stages on two threads: the database is read, decoded and built into batches on one,
    // while the batches before are staged and sealed on this one. The reader decides where
    // barriers end (at a timestamp change, past `seal_rows`).
    let (samples, (rollups, open)) =
        std::thread::scope(|scope| -> Result<(u64, (u64, u64)), ImportError> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(8);
            let reader = Reader {
                tx,
                seal_rows: usize::try_from(req.seal_rows).unwrap_or(usize::MAX),
                since_cut: 0,
            };
            let (series, resume, rollup_keys, layout) =
                (&series, &resume, &rollup_keys, &rollup_layout);
            let producer = scope.spawn(move || -> Result<(u64, (u64, u64)), ImportError> {
                let mut reader = reader;
                let samples = reader.samples(&conn, db, series, resume)?;
                let rollups = reader.rollups(
                    &conn,
                    db,
                    series,
                    Rollups {
                        keys: rollup_keys,
                        layout,
                        newest: &rollup_resume,
                        now: newest,
                    },
                )?;
                Ok((samples, rollups))
            });
            let consumed = sealer.consume(rx);
            let produced = producer.join().map_err(|_| ImportError::Panicked)?;
            // The consumer's failure first: the reader then only saw its channel close.
            consumed?;
            produced
        })?;
    drop(sealer);
    let secs = started.elapsed().as_secs_f64();
    progress.imported();
    progress.note(&format!(
        "imported {samples} samples of {} series and {rollups} rollups in {secs:.2} s ({:.0} rows/s, seals included)",
        series.len(),
        (samples + rollups) as f64 / secs.max(1e-9)
    ));
    if open > 0 {
        progress.note(&format!(
            "{open} rollups of windows eventd's newest sample has not yet passed were left for a later run (they may still change)"
        ));
    }
    Ok(Imported {
        archive,
        samples,
        rollups,
        open_rollups: open,
    })
}

/// What the checks found and the import needs.
struct Plan {
    series: Vec<Series>,
    counts: Counts,
    specs: Vec<StreamSpec>,
    rollup_keys: HashMap<i64, usize>,
    /// How `rollups` is read: its row order's tiebreak and its `window_start` unit.
    rollup_layout: RollupLayout,
    /// Each series' track's newest timestamp in the archive.
    resume: HashMap<i64, u64>,
    /// Each rollup track's newest window start in the archive, by its labels.
    rollup_resume: HashMap<Vec<String>, u64>,
    /// Samples the archive already holds.
    already: u64,
    /// This run's ledger row.
    ledger: Ledger,
}

/// Every check, before anything is written; refuses naming what and where.
fn preflight(
    conn: &Connection,
    req: &Request,
    progress: &mut dyn Progress,
) -> Result<Plan, ImportError> {
    let db = req.database;
    let sql = |e: rusqlite::Error| refuse(db, e);
    check_schema(conn, db)?;
    let series = load_series(conn, db)?;
    let counts = check_samples(conn, db)?;
    check_histograms(conn, db, &series)?;
    check_rollup_values(conn, db)?;
    let recorded = if req.archive.join("manifest").is_dir() {
        Some(reader::open(
            req.archive,
            &Config::new().requests(req.config.requests.clone()),
        )?)
    } else {
        None
    };
    let ladder_of = |k: Kind| -> Result<Option<Ladder>, ImportError> {
        let Some(decl) = recorded
            .as_ref()
            .and_then(|a| a.state().streams.get(k.stream()))
            .map(|s| &s.decl)
        else {
            return Ok(Some(req.ladder.unwrap_or(LADDER)));
        };
        match req.ladder {
            Some(asked) if decl.ladder != Some(asked) => Err(ImportError::Ladder {
                stream: k.stream(),
                recorded: decl.ladder,
                asked,
            }),
            _ => Ok(decl.ladder),
        }
    };
    let mut specs = Kind::ALL
        .iter()
        .map(|&k| {
            let ladder = ladder_of(k)?;
            Ok(StreamSpec::dynamic(
                k.stream(),
                k.schema(),
                k.track(),
                Some("timestamp".to_owned()),
            )?
            .with_ladder(ladder))
        })
        .collect::<Result<Vec<_>, ImportError>>()?;
    specs.push(
        StreamSpec::dynamic(
            ROLLUPS,
            rollup_schema(),
            ["name", "labels", "function", "window_seconds"]
                .map(String::from)
                .to_vec(),
            Some("window_start".to_owned()),
        )?
        .with_ladder(None),
    );
    specs.push(
        StreamSpec::dynamic(LEDGER, Ledger::schema(), vec!["database".to_owned()], None)?
            .with_ladder(None),
    );
    let rollup_keys = check_rollups(conn, db, &series)?;
    let rollup_layout = RollupLayout::of(conn, db)?;
    let (max_id, newest): (i64, i64) = conn
        .query_row(
            "SELECT coalesce(max(id), 0), coalesce(max(timestamp), 0) FROM samples",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    let ledger = Ledger {
        database: db.display().to_string(),
        max_sample_id: max_id,
        newest: newest.max(0) as u64,
    };

    let (resume, already) = match &recorded {
        Some(existing) => resume_points(
            conn,
            db,
            &series,
            &rollup_keys,
            &rollup_layout,
            existing,
            progress,
        )?,
        None => (HashMap::new(), 0),
    };
    let rollup_resume = recorded
        .as_ref()
        .and_then(|a| a.state().streams.get(ROLLUPS))
        .map(|st| {
            st.tracks
                .values()
                .filter_map(|t| Some((t.labels.to_vec(), t.last_axis?)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Plan {
        series,
        counts,
        specs,
        rollup_keys,
        rollup_layout,
        resume,
        rollup_resume,
        already,
        ledger,
    })
}

/// Where each series' track stands in `existing` (its newest timestamp), and the samples the
/// archive holds; refuses samples and rollups the archive can no longer take and an archive
/// imported from another database.
fn resume_points(
    conn: &Connection,
    db: &Path,
    series: &[Series],
    rollup_keys: &HashMap<i64, usize>,
    layout: &RollupLayout,
    existing: &Archive,
    progress: &mut dyn Progress,
) -> Result<(HashMap<i64, u64>, u64), ImportError> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let mut resume: HashMap<i64, u64> = HashMap::new();
    let mut already = 0u64;
    // Where a track stands: its lowest axis ever, its first live and newest axis, and the
    // rows it holds.
    let stands = |stream: &str, track: &[String]| -> Option<(u64, u64, u64, u64)> {
        let state = existing.state().streams.get(stream)?;
        let key = crate::TrackKey::encode(track).ok()?;
        let t = state.tracks.get(&key)?;
        Some((t.origin_axis?, t.first_axis?, t.last_axis?, t.rows))
    };
    let mut count = conn
        .prepare(
            "SELECT count(*) FROM samples WHERE series_id = ?1 AND timestamp >= ?2 AND timestamp <= ?3",
        )
        .map_err(sql)?;
    let mut oldest = conn
        .prepare("SELECT min(timestamp) FROM samples WHERE series_id = ?1")
        .map_err(sql)?;
    // (series id, what) of rows the archive cannot take any more.
    let mut late: Vec<(i64, String)> = Vec::new();
    for s in series {
        let Some(stand @ (_, _, last, rows)) = stands(s.kind.stream(), &s.track()) else {
            continue;
        };
        let mut n = |from: u64, to: u64| -> Result<u64, ImportError> {
            count
                .query_row((s.id, from as i64, to as i64), |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(sql)
        };
        if n(last, last)? == 0 {
            // The archive's newest sample of the series is not in this database.
            let from: Option<i64> = oldest.query_row([s.id], |r| r.get(0)).map_err(sql)?;
            match from {
                Some(from) if from as u64 <= last => {
                    return Err(refuse(
                        db,
                        format!(
                            "{}: the archive's newest sample of it (at {last}) is not in this database, so the archive was imported from another one; import each eventd database into an archive of its own",
                            s.shown()
                        ),
                    ))
                }
                _ => progress.note(&format!(
                    "warning: {}: eventd deleted this series' samples up to {} before they were imported; the archive has a gap after {last}",
                    s.shown(),
                    from.map_or("its newest".to_owned(), |f| f.to_string())
                )),
            }
        }
        let cannot = unappendable(stand, n)?;
        if cannot > 0 {
            late.push((
                s.id,
                format!(
                    "{}: {cannot} sample(s) at or before {last}, the newest timestamp the archive holds of it",
                    s.shown(),
                ),
            ));
        }
        resume.insert(s.id, last);
        already += rows;
    }
    // Samples eventd took since an earlier run began (a larger id than any it had then) and
    // stamped at or before their track's newest: exact whatever eventd deleted meanwhile.
    let since = ledger_max(existing)?;
    if let Some(since) = since {
        let mut stmt = conn
            .prepare("SELECT series_id, timestamp FROM samples WHERE id > ?1")
            .map_err(sql)?;
        let mut rows = stmt.query([since]).map_err(sql)?;
        let mut found: BTreeMap<i64, u64> = BTreeMap::new();
        while let Some(row) = rows.next().map_err(sql)? {
            let (sid, ts): (i64, i64) = (row.get(0).map_err(sql)?, row.get(1).map_err(sql)?);
            if resume.get(&sid).is_some_and(|&last| ts as u64 <= last) {
                *found.entry(sid).or_default() += 1;
            }
        }
        for (sid, n) in found {
            if late.iter().any(|(id, _)| *id == sid) {
                continue;
            }
            if let Some(s) = series.iter().find(|s| s.id == sid) {
                late.push((
                    sid,
                    format!(
                        "{}: {n} sample(s) written after an earlier import began, stamped at or before the newest the archive holds of it",
                        s.shown()
                    ),
                ));
            }
        }
    }
    // Rollups the same way, per rollup track: the import skips every window at or before the
    // track's newest, so one eventd wrote there since must be refused, not left out.
    // The archive's window starts are nanoseconds; the database's in its own unit.
    let mut rollups = conn
        .prepare(&format!(
            "SELECT count(*) FROM rollups WHERE series_id = ?1 AND function = ?2 \
             AND window_seconds = ?3 AND window_start * {scale} >= ?4 AND window_start * {scale} <= ?5",
            scale = layout.unit.nanoseconds()
        ))
        .map_err(sql)?;
    let tracks: Vec<(i64, String, i64)> = {
        let mut stmt = conn
            .prepare("SELECT DISTINCT series_id, function, window_seconds FROM rollups")
            .map_err(sql)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)?
    };
    for (sid, function, window) in tracks {
        let Some(s) = rollup_keys.get(&sid).map(|&i| &series[i]) else {
            continue;
        };
        let Some(stand @ (_, _, last, _)) = stands(ROLLUPS, &rollup_track(s, &function, window))
        else {
            continue;
        };
        let n = |from: u64, to: u64| -> Result<u64, ImportError> {
            rollups
                .query_row((sid, &function, window, from as i64, to as i64), |r| {
                    r.get::<_, i64>(0)
                })
                .map(|n| n as u64)
                .map_err(sql)
        };
        let cannot = unappendable(stand, n)?;
        if cannot > 0 {
            late.push((
                sid,
                format!(
                    "{}: {cannot} {function} rollup(s) over {window} s starting at or before {last}, the newest window the archive holds of them",
                    s.shown(),
                ),
            ));
        }
    }
    if !late.is_empty() {
        let lines: Vec<&str> = late.iter().map(|(_, l)| l.as_str()).collect();
        return Err(refuse(
            db,
            format!(
                "eventd holds samples or rollups older than what this archive already imported of their track, which cannot be appended (a track's axis never goes back):\n  {}\nimport this database into a new archive instead",
                lines.join("\n  ")
            ),
        ));
    }
    Ok((resume, already))
}

/// How many rows of a track the database holds that the archive can no longer take: those
/// before anything it ever held of the track, and those beyond the rows it holds from its
/// first live axis to its newest. `stand` is the track's (lowest axis ever, first live axis,
/// newest axis, rows); `n(from, to)` counts the database's rows of the track in `[from, to]`.
fn unappendable(
    (origin, first, last, rows): (u64, u64, u64, u64),
    mut n: impl FnMut(u64, u64) -> Result<u64, ImportError>,
) -> Result<u64, ImportError> {
    let before = if origin > 0 { n(0, origin - 1)? } else { 0 };
    Ok(before + n(first, last)?.saturating_sub(rows))
}

/// The largest sample id any earlier run recorded in the ledger.
fn ledger_max(archive: &Archive) -> Result<Option<i64>, ImportError> {
    if !archive.state().streams.contains_key(LEDGER) {
        return Ok(None);
    }
    let rows = archive.read_rows(
        LEDGER,
        &[],
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
    )?;
    let ids = rows
        .column_by_name("max_sample_id")
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::Int64Array>())
        .ok_or(ImportError::Ledger)?;
    Ok(arrow::compute::max(ids))
}

/// One row of the stream `eventd_imports`, sealed with a run's first barrier: which database,
/// and the largest sample id and the newest timestamp it held when the run began.
struct Ledger {
    database: String,
    max_sample_id: i64,
    newest: u64,
}

impl Ledger {
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("database", DataType::Utf8, false),
            Field::new("max_sample_id", DataType::Int64, false),
            Field::new("newest_timestamp", DataType::UInt64, false),
            Field::new("began_ns", DataType::UInt64, false),
        ]))
    }

    fn batch(&self) -> Result<RecordBatch, ImportError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(RecordBatch::try_new(
            Self::schema(),
            vec![
                Arc::new(arrow::array::StringArray::from(vec![self.database.clone()])),
                Arc::new(arrow::array::Int64Array::from(vec![self.max_sample_id])),
                Arc::new(arrow::array::UInt64Array::from(vec![self.newest])),
                Arc::new(arrow::array::UInt64Array::from(vec![now])),
            ],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ladder_base_is_nanoseconds_or_a_duration() {
        for (text, base) in [
            ("60000000000,8,8", 60_000_000_000),
            ("250ms,8,8", 250_000_000),
            ("60s,8,8", 60_000_000_000),
            ("5m,8,8", 300_000_000_000),
            ("1h,8,8", 3_600_000_000_000),
        ] {
            let ladder = parse_ladder(text).expect(text);
            assert_eq!((ladder.base, ladder.factor, ladder.levels), (base, 8, 8));
        }
        assert_eq!(parse_ladder("60s,8,8").ok(), Some(LADDER));
        for bad in ["60s", "1d,8,8", "s,8,8"] {
            assert!(parse_ladder(bad).is_err(), "{bad} was taken");
        }
    }
}
