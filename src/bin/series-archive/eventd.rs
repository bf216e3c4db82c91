//! `import-eventd`: an eventd metric store (SQLite: `series`, `samples`, `rollups`,
//! `metadata`) moved into the archive whole, resumably, and checked before anything is
//! touched. The mapping is `docs/eventd.md`'s.
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

use crate::{lifecycle, progress, Failure};
use arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, ListBuilder, RecordBatch, StringBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use series_archive::archive::{Archive, Config, Ladder, StreamSpec};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The one schema version this importer reads (seed 002 §5.2.6: version 1 comprises
/// `series`, `samples`, `rollups` and `metadata`).
pub const SCHEMA_VERSION: &str = "1";

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
    Ladder::parse(&format!("{ns},{rest}"))
}

/// Rows per staged batch.
const BATCH_ROWS: usize = 64 * 1024;

/// The kinds of series (`series.type`), each its own stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Counter, Kind::Gauge, Kind::Histogram];

    fn of(code: i64) -> Option<Kind> {
        match code {
            0 => Some(Kind::Counter),
            1 => Some(Kind::Gauge),
            2 => Some(Kind::Histogram),
            _ => None,
        }
    }

    fn stream(self) -> &'static str {
        match self {
            Kind::Counter => "counters",
            Kind::Gauge => "gauges",
            Kind::Histogram => "histograms",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    /// The stream's columns: track, axis, then the sample's own.
    fn schema(self) -> SchemaRef {
        let text = |n: &str| Field::new(n, DataType::Utf8, false);
        let mut fields = vec![text("name"), text("labels")];
        if self == Kind::Histogram {
            fields.push(text("boundaries"));
        }
        fields.push(Field::new("timestamp", DataType::UInt64, false));
        fields.push(text("boot_id"));
        match self {
            Kind::Counter | Kind::Gauge => {
                fields.push(Field::new("value", DataType::Float64, false));
            }
            Kind::Histogram => {
                fields.push(Field::new("total_count", DataType::UInt64, false));
                fields.push(Field::new("sum", DataType::Float64, false));
                fields.push(Field::new(
                    "bucket_bounds",
                    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
                    false,
                ));
                fields.push(Field::new(
                    "counts",
                    DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true))),
                    false,
                ));
            }
        }
        Arc::new(Schema::new(fields))
    }

    fn track(self) -> Vec<String> {
        let mut t = vec!["name".to_owned(), "labels".to_owned()];
        if self == Kind::Histogram {
            t.push("boundaries".to_owned());
        }
        t
    }
}

/// The rollups stream's columns.
fn rollup_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("labels", DataType::Utf8, false),
        Field::new("function", DataType::Utf8, false),
        Field::new("window_seconds", DataType::Int64, false),
        Field::new("window_start", DataType::UInt64, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

const ROLLUPS: &str = "rollups";

/// The track labels of a series' rollups of one function and window width.
fn rollup_track(s: &Series, function: &str, window: i64) -> Vec<String> {
    vec![
        s.name.clone(),
        s.labels.clone(),
        function.to_owned(),
        window.to_string(),
    ]
}

/// One row of `series`.
struct Series {
    id: i64,
    name: String,
    labels: String,
    kind: Kind,
    /// A histogram's boundaries, decoded from the canonical blob.
    boundaries: Option<Vec<f64>>,
}

impl Series {
    /// The track labels: the series' identity (name, canonical labels, and a histogram's
    /// boundaries as text).
    fn track(&self) -> Vec<String> {
        let mut t = vec![self.name.clone(), self.labels.clone()];
        if let Some(b) = &self.boundaries {
            t.push(boundaries_text(b));
        }
        t
    }

    fn shown(&self) -> String {
        format!(
            "series {} ({} {}{{{}}})",
            self.id,
            self.kind.name(),
            self.name,
            self.labels
        )
    }
}

/// Boundaries as a track label: each f64 in its shortest round-trip form, comma-separated.
fn boundaries_text(b: &[f64]) -> String {
    b.iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Decodes eventd's canonical boundary blob: `u32` count, then that many `f64`, little-endian.
fn decode_boundaries(blob: &[u8]) -> Result<Vec<f64>, String> {
    let (count, rest) = blob
        .split_first_chunk::<4>()
        .ok_or_else(|| format!("a boundaries blob of {} bytes has no count", blob.len()))?;
    let count = u32::from_le_bytes(*count) as usize;
    if rest.len() != count * 8 {
        return Err(format!(
            "a boundaries blob says {count} boundaries but holds {} bytes after the count (expected {})",
            rest.len(),
            count * 8
        ));
    }
    Ok(rest
        .chunks_exact(8)
        .map(|c| {
            let mut le = [0u8; 8];
            le.copy_from_slice(c);
            f64::from_le_bytes(le)
        })
        .collect())
}

/// A histogram sample as eventd stores it: a canonical MessagePack map.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HistogramSample {
    boundaries: Vec<f64>,
    counts: Vec<u64>,
    total_count: u64,
    sum: f64,
}

fn decode_histogram(blob: &[u8], series: &Series) -> Result<HistogramSample, String> {
    let h: HistogramSample = rmp_serde::from_slice(blob)
        .map_err(|e| format!("histogram_data is not eventd's MessagePack sample map: {e}"))?;
    if Some(&h.boundaries) != series.boundaries.as_ref() {
        return Err(format!(
            "its boundaries [{}] are not its series' [{}]",
            boundaries_text(&h.boundaries),
            series
                .boundaries
                .as_deref()
                .map(boundaries_text)
                .unwrap_or_default()
        ));
    }
    Ok(h)
}

/// A boot id as canonical UUID text.
fn boot_text(bytes: &[u8]) -> String {
    // 16 bytes: the check before the import refuses any other length.
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// What `import-eventd` was asked.
pub struct Request<'a> {
    pub database: &'a Path,
    pub archive: &'a Path,
    pub seal_rows: u64,
    pub compact: bool,
    /// The ladder for new sample streams (an existing one keeps its own).
    pub ladder: Option<Ladder>,
}

/// Stops an import already under way, naming the database: what is durable stays, and a run
/// again resumes after it.
fn stopped(db: &Path, what: impl std::fmt::Display) -> Failure {
    Failure::from(format!(
        "{}: {what}; the import stopped after its last durable barrier (run it again to resume)",
        db.display()
    ))
}

/// Refuses naming the database, saying nothing was imported.
fn refuse(db: &Path, what: impl std::fmt::Display) -> Failure {
    Failure::from(format!("{}: {what}; nothing was imported", db.display()))
}

pub fn import(req: Request) -> Result<(), Failure> {
    let db = req.database;
    if !db.is_file() {
        return Err(format!("{}: no such file", db.display()).into());
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
    let checking = indicatif::ProgressBar::new_spinner().with_message(format!(
        "checking {} (every sample, before anything is written)",
        db.display()
    ));
    checking.enable_steady_tick(std::time::Duration::from_millis(120));
    let began = Instant::now();
    let plan = preflight(&conn, &req);
    checking.finish_and_clear();
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

    let mut config = Config::new();
    for spec in specs {
        config = config.stream(spec);
    }
    let mut archive = Archive::open(req.archive, lifecycle::with_cold(config)?)?;
    for q in &archive.recovery().quarantined {
        eprintln!(
            "recovery: moved {} into quarantine (kept as {q})",
            crate::quarantined_from(q)
        );
    }
    eprintln!(
        "{}: {} series ({} counters, {} gauges, {} histograms), {} samples, {} rollups; schema version {SCHEMA_VERSION}; checked in {:.2?}",
        db.display(),
        series.len(),
        series.iter().filter(|s| s.kind == Kind::Counter).count(),
        series.iter().filter(|s| s.kind == Kind::Gauge).count(),
        series.iter().filter(|s| s.kind == Kind::Histogram).count(),
        counts.samples,
        counts.rollups,
        began.elapsed()
    );
    if let Some(said) = rollup_layout.said() {
        eprintln!("{said}");
    }
    if already > 0 {
        eprintln!("resuming: the archive already holds {already} of the samples");
    }

    let started = Instant::now();
    let rows = counts.samples + counts.rollups;
    let bar = progress(rows, "importing", "{pos}/{len} rows");
    bar.set_position(already.min(rows));
    let mut sealer = Sealer::new(&mut archive, &bar, ledger.batch()?);
    let newest = ledger.newest;
    // Two stages on two threads: the database is read, decoded and built into batches on one,
    // while the batches before are staged and sealed on this one. The reader decides where
    // barriers end (at a timestamp change, past --seal-rows).
    let (samples, (rollups, open)) =
        std::thread::scope(|scope| -> Result<(u64, (u64, u64)), Failure> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(8);
            let reader = Reader {
                tx,
                seal_rows: usize::try_from(req.seal_rows).unwrap_or(usize::MAX),
                since_cut: 0,
            };
            let (series, resume, rollup_keys, layout) =
                (&series, &resume, &rollup_keys, &rollup_layout);
            let producer = scope.spawn(move || -> Result<(u64, (u64, u64)), Failure> {
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
            let produced = producer
                .join()
                .map_err(|_| Failure::from("the database reader panicked"))?;
            // The consumer's failure first: the reader then only saw its channel close.
            consumed?;
            produced
        })?;
    drop(sealer);
    let secs = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    eprintln!(
        "imported {samples} samples of {} series and {rollups} rollups in {secs:.2} s ({:.0} rows/s, seals included)",
        series.len(),
        (samples + rollups) as f64 / secs.max(1e-9)
    );
    if open > 0 {
        eprintln!(
            "{open} rollups of windows eventd's newest sample has not yet passed were left for a later run (they may still change)"
        );
    }
    if req.compact {
        crate::maintain(&mut archive)?;
    }
    Ok(())
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
fn preflight(conn: &Connection, req: &Request) -> Result<Plan, Failure> {
    let db = req.database;
    let sql = |e: rusqlite::Error| refuse(db, e);
    check_schema(conn, db)?;
    let series = load_series(conn, db)?;
    let counts = check_samples(conn, db)?;
    check_histograms(conn, db, &series)?;
    check_rollup_values(conn, db)?;
    let recorded = if req.archive.join("manifest").is_dir() {
        Some(crate::read_only(req.archive)?)
    } else {
        None
    };
    let ladder_of = |k: Kind| -> Result<Option<Ladder>, Failure> {
        let Some(decl) = recorded
            .as_ref()
            .and_then(|a| a.state().streams.get(k.stream()))
            .map(|s| &s.decl)
        else {
            return Ok(Some(req.ladder.unwrap_or(LADDER)));
        };
        match req.ladder {
            Some(asked) if decl.ladder != Some(asked) => Err(format!(
                "stream {} is recorded with ladder {:?}; --ladder asked for {asked:?} (a stream's ladder cannot change)",
                k.stream(),
                decl.ladder
            )
            .into()),
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
        .collect::<Result<Vec<_>, Failure>>()?;
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
        Some(existing) => resume_points(conn, db, &series, &rollup_keys, &rollup_layout, existing)?,
        None => (HashMap::new(), 0),
    };
    let rollup_resume = recorded
        .as_ref()
        .and_then(|a| a.state().streams.get(ROLLUPS))
        .map(|st| {
            st.tracks
                .values()
                .filter_map(|t| Some((t.labels.clone(), t.last_axis?)))
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
) -> Result<(HashMap<i64, u64>, u64), Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let mut resume: HashMap<i64, u64> = HashMap::new();
    let mut already = 0u64;
    // Where a track stands: its lowest axis ever, its first live and newest axis, and the
    // rows it holds.
    let stands = |stream: &str, track: &[String]| -> Option<(u64, u64, u64, u64)> {
        let state = existing.state().streams.get(stream)?;
        let key = series_archive::TrackKey::encode(track).ok()?;
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
        let mut n = |from: u64, to: u64| -> Result<u64, Failure> {
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
                _ => eprintln!(
                    "warning: {}: eventd deleted this series' samples up to {} before they were imported; the archive has a gap after {last}",
                    s.shown(),
                    from.map_or("its newest".to_owned(), |f| f.to_string())
                ),
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
        let n = |from: u64, to: u64| -> Result<u64, Failure> {
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
    mut n: impl FnMut(u64, u64) -> Result<u64, Failure>,
) -> Result<u64, Failure> {
    let before = if origin > 0 { n(0, origin - 1)? } else { 0 };
    Ok(before + n(first, last)?.saturating_sub(rows))
}

/// The largest sample id any earlier run recorded in the ledger.
fn ledger_max(archive: &Archive) -> Result<Option<i64>, Failure> {
    if !archive.state().streams.contains_key(LEDGER) {
        return Ok(None);
    }
    let rows = archive
        .read_rows(
            LEDGER,
            &[],
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )
        .map_err(crate::refused)?;
    let ids = rows
        .column_by_name("max_sample_id")
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::Int64Array>())
        .ok_or("the ledger has no max_sample_id column")?;
    Ok(arrow::compute::max(ids))
}

const LEDGER: &str = "eventd_imports";

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

    fn batch(&self) -> Result<RecordBatch, Failure> {
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

/// A `window_start` at or above this is nanoseconds since the epoch; every one below it (and
/// above 0) is seconds. As nanoseconds, 10^12 is 16 min 40 s into 1970, before any eventd
/// ran; as seconds it is past the year 33 000. A table holding both is refused.
const SECONDS_BELOW: i64 = 1_000_000_000_000;

/// The unit of `rollups.window_start`, decided from the data by [`SECONDS_BELOW`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WindowUnit {
    Nanoseconds,
    Seconds,
}

impl WindowUnit {
    fn nanoseconds(self) -> i64 {
        match self {
            WindowUnit::Nanoseconds => 1,
            WindowUnit::Seconds => 1_000_000_000,
        }
    }

    fn name(self) -> &'static str {
        match self {
            WindowUnit::Nanoseconds => "nanoseconds",
            WindowUnit::Seconds => "seconds",
        }
    }

    /// A window start in this unit as nanoseconds since the epoch (the archive's axis);
    /// `None` before 1970 or past what the axis holds.
    fn to_ns(self, start: i64) -> Option<u64> {
        u64::try_from(start.checked_mul(self.nanoseconds())?).ok()
    }
}

/// How `rollups` is read: the column that keeps rows of one window in a stable order, and
/// the unit of `window_start`.
#[derive(Clone, Debug)]
struct RollupLayout {
    /// `rowid` (or its other names, when a column takes one), or `None` for a table
    /// declared `WITHOUT ROWID`, whose primary key orders its rows.
    tiebreak: Option<&'static str>,
    unit: WindowUnit,
    /// The smallest and largest non-zero window start, when there is one.
    span: Option<(i64, i64)>,
}

impl RollupLayout {
    /// Reads the table's shape and decides the unit from its window starts; refuses a table
    /// whose window starts are in both units.
    fn of(conn: &Connection, db: &Path) -> Result<RollupLayout, Failure> {
        let sql = |e: rusqlite::Error| refuse(db, e);
        let columns: Vec<String> = column(conn, db, "PRAGMA table_info(rollups)", 1)?;
        // SQLite's rowid has three names; a column of that name hides it.
        let tiebreak = ["rowid", "_rowid_", "oid"].into_iter().find(|name| {
            !columns.iter().any(|c| c.eq_ignore_ascii_case(name))
                && conn
                    .prepare(&format!("SELECT {name} FROM rollups LIMIT 0"))
                    .is_ok()
        });
        let span: Option<(i64, i64)> = conn
            .query_row(
                "SELECT min(window_start), max(window_start) FROM rollups WHERE window_start > 0",
                [],
                |r| Ok(r.get::<_, Option<i64>>(0)?.zip(r.get::<_, Option<i64>>(1)?)),
            )
            .map_err(sql)?;
        let unit = match span {
            None => WindowUnit::Nanoseconds,
            Some((_, high)) if high < SECONDS_BELOW => WindowUnit::Seconds,
            Some((low, _)) if low >= SECONDS_BELOW => WindowUnit::Nanoseconds,
            Some((low, high)) => {
                return Err(refuse(
                    db,
                    format!(
                        "table rollups: column window_start holds {low}, which reads as seconds since the epoch (every start below 10^12 does), and {high}, which reads as nanoseconds; expected one unit throughout (nanoseconds like samples.timestamp, or seconds)"
                    ),
                ))
            }
        };
        if let Some((_, high)) = span {
            if unit.to_ns(high).is_none() {
                return Err(refuse(
                    db,
                    format!(
                        "table rollups: column window_start holds {high} seconds, past what a nanosecond timestamp holds (the year 2262); expected a window start since the epoch"
                    ),
                ));
            }
        }
        Ok(RollupLayout {
            tiebreak,
            unit,
            span,
        })
    }

    /// `, rowid` for an `ORDER BY`, or nothing.
    fn tiebreak(&self) -> String {
        self.tiebreak.map(|t| format!(", {t}")).unwrap_or_default()
    }

    /// What the run says about the unit it decided, when there are rollups to decide it by.
    fn said(&self) -> Option<String> {
        let (low, high) = self.span?;
        Some(match self.unit {
            WindowUnit::Seconds => format!(
                "rollups: window_start is read as seconds since the epoch (every one, {low} to {high}, is below 10^12; as nanoseconds they would all fall in 1970's first 17 minutes) and stored as nanoseconds"
            ),
            WindowUnit::Nanoseconds => format!(
                "rollups: window_start is read as nanoseconds since the epoch (every one, {low} to {high}, is at least 10^12)"
            ),
        })
    }
}

/// Refuses rollups no track could hold: a window that is not a non-negative integer, a width
/// that is not a positive integer, a value that is not a number, a function that is not text
/// or holds a control character. A row is named by what it holds (eventd's `rollups` has no
/// identifier a person would know it by), and the refusal says which column holds what,
/// and what was expected.
fn check_rollup_values(conn: &Connection, db: &Path) -> Result<(), Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    // (column, the condition that makes it wrong, what was expected)
    let checks = [
        (
            "window_start",
            "typeof(window_start) != 'integer' OR window_start < 0",
            "a non-negative integer: the window's start since the epoch, in nanoseconds (like samples.timestamp) or seconds",
        ),
        (
            "window_seconds",
            "typeof(window_seconds) != 'integer' OR window_seconds <= 0",
            "a positive integer: the window's width in seconds",
        ),
        (
            "value",
            "typeof(value) NOT IN ('real', 'integer')",
            "a number",
        ),
        ("function", "typeof(function) != 'text'", "text (min, max, sum, count, avg, …)"),
    ];
    let any: Vec<String> = checks.iter().map(|(_, c, _)| format!("({c})")).collect();
    let found = conn
        .query_row(
            &format!(
                "SELECT quote(series_id) || coalesce(' (' || (SELECT name || '{{' || labels || '}}' FROM series WHERE series.id = rollups.series_id) || ')', ''), \
                 quote(function), quote(window_seconds), quote(window_start), quote(value), \
                 {} FROM rollups WHERE {} LIMIT 1",
                checks
                    .iter()
                    .map(|(_, c, _)| format!("coalesce({c}, 1)"))
                    .collect::<Vec<_>>()
                    .join(", "),
                any.join(" OR ")
            ),
            [],
            |r| {
                let shown: Vec<String> = (0..5).map(|i| r.get(i)).collect::<Result<_, _>>()?;
                let wrong: Vec<bool> = (0..checks.len())
                    .map(|i| r.get::<_, i64>(5 + i).map(|w| w != 0))
                    .collect::<Result<_, _>>()?;
                Ok((shown, wrong))
            },
        )
        .optional()
        .map_err(sql)?;
    if let Some((shown, wrong)) = found {
        let column_value = |name: &str| match name {
            "function" => &shown[1],
            "window_seconds" => &shown[2],
            "window_start" => &shown[3],
            _ => &shown[4],
        };
        let what: Vec<String> = checks
            .iter()
            .zip(&wrong)
            .filter(|(_, w)| **w)
            .map(|((column, _, expected), _)| {
                format!(
                    "column {column} holds {}, expected {expected}",
                    column_value(column)
                )
            })
            .collect();
        return Err(refuse(
            db,
            format!(
                "table rollups: the rollup of series {} (function {}, window_seconds {}, window_start {}): {}",
                shown[0],
                shown[1],
                shown[2],
                shown[3],
                what.join("; ")
            ),
        ));
    }
    for function in column::<String>(conn, db, "SELECT DISTINCT function FROM rollups", 0)? {
        series_archive::TrackKey::encode(&[function.as_str()])
            .map_err(|e| refuse(db, format!("rollup function {function:?}: {e}")))?;
    }
    Ok(())
}

/// Column `index` of every row `query` answers.
fn column<T: rusqlite::types::FromSql>(
    conn: &Connection,
    db: &Path,
    query: &str,
    index: usize,
) -> Result<Vec<T>, Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let mut stmt = conn.prepare(query).map_err(sql)?;
    let values = stmt
        .query_map([], |r| r.get::<_, T>(index))
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(values)
}

/// Refuses anything but an eventd metric store of [`SCHEMA_VERSION`].
fn check_schema(conn: &Connection, db: &Path) -> Result<(), Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let columns = |table: &str| -> Result<Vec<String>, Failure> {
        column(conn, db, &format!("PRAGMA table_info({table})"), 1)
    };
    let has = columns("metadata")?;
    if has.is_empty() {
        return Err(refuse(
            db,
            "there is no table metadata: an eventd metric store keeps its schema version in metadata(key, value), so this is not one",
        ));
    }
    if let Some(lacks) = ["key", "value"]
        .into_iter()
        .find(|n| !has.iter().any(|c| c == n))
    {
        return Err(refuse(
            db,
            format!(
                "table metadata has no column {lacks} (it has: {}); expected metadata(key, value), where eventd keeps its schema version",
                has.join(", ")
            ),
        ));
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT CAST(value AS TEXT) FROM metadata WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    match version.as_deref() {
        Some(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(refuse(
                db,
                format!(
                "eventd schema version {v:?}; this importer reads version {SCHEMA_VERSION:?} only"
            ),
            ))
        }
        None => {
            return Err(refuse(
                db,
                format!("table metadata has no row with key 'schema_version'; expected one holding {SCHEMA_VERSION:?}, the eventd schema this importer reads"),
            ))
        }
    }
    // Each table the importer reads, the columns it reads there, and what each holds.
    let tables: [(&str, &[(&str, &str)]); 3] = [
        (
            "series",
            &[
                ("id", "the series' identifier"),
                ("name", "the metric name"),
                ("labels", "the canonical label string"),
                ("type", "0 counter, 1 gauge, 2 histogram"),
                ("boundaries", "a histogram's boundary blob"),
            ],
        ),
        (
            "samples",
            &[
                (
                    "id",
                    "the sample's identifier, the tiebreak of one timestamp",
                ),
                ("series_id", "its series"),
                ("boot_id", "16 bytes"),
                ("timestamp", "nanoseconds since the epoch"),
                ("value", "a number"),
                ("histogram_data", "a histogram's MessagePack sample"),
            ],
        ),
        (
            "rollups",
            &[
                ("series_id", "its series"),
                ("function", "min, max, sum, count, avg, …"),
                ("window_seconds", "the window's width in seconds"),
                ("window_start", "the window's start since the epoch"),
                ("value", "a number"),
            ],
        ),
    ];
    for (table, needed) in tables {
        let has = columns(table)?;
        let expected = || {
            needed
                .iter()
                .map(|(c, what)| format!("{c} ({what})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if has.is_empty() {
            return Err(refuse(
                db,
                format!(
                    "there is no table {table}; an eventd metric store (schema version {SCHEMA_VERSION}) has one, and the importer reads its columns {}",
                    expected()
                ),
            ));
        }
        let missing: Vec<&str> = needed
            .iter()
            .map(|(c, _)| *c)
            .filter(|n| !has.iter().any(|c| c == n))
            .collect();
        if !missing.is_empty() {
            return Err(refuse(
                db,
                format!(
                    "table {table} lacks column(s) {} (it has: {}); the importer reads {}",
                    missing.join(", "),
                    has.join(", "),
                    expected()
                ),
            ));
        }
    }
    Ok(())
}

/// Every series, by id; refuses a series the archive could not hold as its own track.
fn load_series(conn: &Connection, db: &Path) -> Result<Vec<Series>, Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let mut stmt = conn
        .prepare("SELECT id, name, labels, type, boundaries FROM series ORDER BY id")
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    let mut series = Vec::new();
    let mut seen: HashMap<(Kind, Vec<String>), i64> = HashMap::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let id: i64 = row.get(0).map_err(sql)?;
        let name: String = row.get(1).map_err(sql)?;
        let labels: String = row.get(2).map_err(sql)?;
        let code: i64 = row.get(3).map_err(sql)?;
        let blob: Option<Vec<u8>> = row.get(4).map_err(sql)?;
        let who = format!("series {id} ({name}{{{labels}}})");
        let bad = |what: String| refuse(db, format!("{who}: {what}"));
        let kind = Kind::of(code).ok_or_else(|| {
            bad(format!(
                "type {code} is none of 0 (counter), 1 (gauge), 2 (histogram)"
            ))
        })?;
        let boundaries = match (kind, blob) {
            (Kind::Histogram, Some(blob)) => Some(decode_boundaries(&blob).map_err(&bad)?),
            (Kind::Histogram, None) => return Err(bad("a histogram without boundaries".into())),
            (_, _) => None,
        };
        let s = Series {
            id,
            name,
            labels,
            kind,
            boundaries,
        };
        let track = s.track();
        series_archive::TrackKey::encode(&track).map_err(|e| bad(e.to_string()))?;
        if let Some(other) = seen.insert((kind, track), id) {
            return Err(bad(format!(
                "series {other} has the same identity (name, labels{}); eventd resolves one series per identity, so this database breaks its own rule and the two cannot be told apart",
                if kind == Kind::Histogram { ", boundaries" } else { "" }
            )));
        }
        series.push(s);
    }
    Ok(series)
}

/// How much the database holds.
struct Counts {
    samples: u64,
    rollups: u64,
}

/// One scan of `samples` for what no track could hold: a sample of no series, a boot id
/// that is not 16 bytes, a timestamp that is not a non-negative integer, a value that is not
/// a number.
fn check_samples(conn: &Connection, db: &Path) -> Result<Counts, Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let checks = [
        (
            "series_id NOT IN (SELECT id FROM series)",
            "belong to no series",
        ),
        (
            "typeof(boot_id) != 'blob' OR length(boot_id) != 16",
            "have a boot_id that is not 16 bytes",
        ),
        (
            "typeof(timestamp) != 'integer' OR timestamp < 0",
            "have a timestamp that is not a non-negative integer of nanoseconds",
        ),
        (
            "typeof(value) NOT IN ('real', 'integer')",
            "have a value that is not a number",
        ),
    ];
    let sums: Vec<String> = checks
        .iter()
        .map(|(c, _)| format!("coalesce(sum({c}), 0)"))
        .collect();
    let (total, found): (i64, Vec<i64>) = conn
        .query_row(
            &format!("SELECT count(*), {} FROM samples", sums.join(", ")),
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    (1..=checks.len())
                        .map(|i| r.get(i))
                        .collect::<Result<_, _>>()?,
                ))
            },
        )
        .map_err(sql)?;
    for ((condition, what), n) in checks.iter().zip(found) {
        if n > 0 {
            let first: i64 = conn
                .query_row(
                    &format!("SELECT min(id) FROM samples WHERE {condition}"),
                    [],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            return Err(refuse(
                db,
                format!("{n} sample(s) {what} (the first is sample {first})"),
            ));
        }
    }
    let rollups: i64 = conn
        .query_row("SELECT count(*) FROM rollups", [], |r| r.get(0))
        .map_err(sql)?;
    Ok(Counts {
        samples: total as u64,
        rollups: rollups as u64,
    })
}

/// Decodes every histogram sample once before anything is written: a damaged one is refused
/// naming it, rather than found after barriers were already committed.
fn check_histograms(conn: &Connection, db: &Path, series: &[Series]) -> Result<(), Failure> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let by_id: HashMap<i64, &Series> = series
        .iter()
        .filter(|s| s.kind == Kind::Histogram)
        .map(|s| (s.id, s))
        .collect();
    if by_id.is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare(
            "SELECT s.id, s.series_id, s.histogram_data FROM samples s \
             JOIN series e ON e.id = s.series_id WHERE e.type = 2",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    while let Some(row) = rows.next().map_err(sql)? {
        let id: i64 = row.get(0).map_err(sql)?;
        let Some(s) = by_id.get(&row.get::<_, i64>(1).map_err(sql)?) else {
            continue;
        };
        let blob: Option<Vec<u8>> = row.get(2).map_err(sql)?;
        let blob = blob.ok_or_else(|| {
            refuse(
                db,
                format!("sample {id} of {}: no histogram_data", s.shown()),
            )
        })?;
        decode_histogram(&blob, s)
            .map_err(|e| refuse(db, format!("sample {id} of {}: {e}", s.shown())))?;
    }
    Ok(())
}

/// The rollups track `(name, labels)` of each series that has rollups; refuses two such
/// series that would share one (a counter and a gauge of one name and labels, or histograms
/// differing only in boundaries), and rollups of no series.
fn check_rollups(
    conn: &Connection,
    db: &Path,
    series: &[Series],
) -> Result<HashMap<i64, usize>, Failure> {
    let by_id: HashMap<i64, usize> = series.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let ids: Vec<i64> = column(
        conn,
        db,
        "SELECT DISTINCT series_id FROM rollups ORDER BY series_id",
        0,
    )?;
    let mut keys: HashMap<(&str, &str), i64> = HashMap::new();
    let mut out = HashMap::new();
    for id in ids {
        let &i = by_id
            .get(&id)
            .ok_or_else(|| refuse(db, format!("rollups of series {id}, which does not exist")))?;
        let s = &series[i];
        if let Some(other) = keys.insert((&s.name, &s.labels), id) {
            return Err(refuse(
                db,
                format!(
                    "series {other} and {id} both have rollups and share name and labels {}{{{}}}; their rollups would share one track",
                    s.name, s.labels
                ),
            ));
        }
        out.insert(id, i);
    }
    Ok(out)
}

/// Rows being built for one sample stream.
struct Samples {
    kind: Kind,
    len: usize,
    name: StringBuilder,
    labels: StringBuilder,
    boundaries: StringBuilder,
    timestamp: UInt64Builder,
    boot: StringBuilder,
    value: Float64Builder,
    total_count: UInt64Builder,
    sum: Float64Builder,
    bucket_bounds: ListBuilder<Float64Builder>,
    counts: ListBuilder<UInt64Builder>,
    /// Boot id bytes → text, so a boot is formatted once.
    boots: HashMap<Vec<u8>, String>,
}

impl Samples {
    fn new(kind: Kind) -> Samples {
        Samples {
            kind,
            len: 0,
            name: StringBuilder::new(),
            labels: StringBuilder::new(),
            boundaries: StringBuilder::new(),
            timestamp: UInt64Builder::new(),
            boot: StringBuilder::new(),
            value: Float64Builder::new(),
            total_count: UInt64Builder::new(),
            sum: Float64Builder::new(),
            bucket_bounds: ListBuilder::new(Float64Builder::new()),
            counts: ListBuilder::new(UInt64Builder::new()),
            boots: HashMap::new(),
        }
    }

    fn push_head(&mut self, track: &[String], timestamp: u64, boot: &[u8]) {
        self.name.append_value(&track[0]);
        self.labels.append_value(&track[1]);
        if let Some(b) = track.get(2) {
            self.boundaries.append_value(b);
        }
        self.timestamp.append_value(timestamp);
        match self.boots.get(boot) {
            Some(text) => self.boot.append_value(text),
            None => {
                let text = boot_text(boot);
                self.boot.append_value(&text);
                self.boots.insert(boot.to_vec(), text);
            }
        }
        self.len += 1;
    }

    fn push_histogram(&mut self, h: HistogramSample) {
        self.total_count.append_value(h.total_count);
        self.sum.append_value(h.sum);
        self.bucket_bounds.values().append_slice(&h.boundaries);
        self.bucket_bounds.append(true);
        self.counts.values().append_slice(&h.counts);
        self.counts.append(true);
    }

    /// The rows built so far, as a batch of the stream's schema; the builders start over.
    fn finish(&mut self) -> Result<RecordBatch, Failure> {
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(self.name.finish()), Arc::new(self.labels.finish())];
        if self.kind == Kind::Histogram {
            columns.push(Arc::new(self.boundaries.finish()));
        }
        columns.push(Arc::new(self.timestamp.finish()));
        columns.push(Arc::new(self.boot.finish()));
        match self.kind {
            Kind::Counter | Kind::Gauge => columns.push(Arc::new(self.value.finish())),
            Kind::Histogram => {
                columns.push(Arc::new(self.total_count.finish()));
                columns.push(Arc::new(self.sum.finish()));
                columns.push(Arc::new(self.bucket_bounds.finish()));
                columns.push(Arc::new(self.counts.finish()));
            }
        }
        self.len = 0;
        Ok(RecordBatch::try_new(self.kind.schema(), columns)?)
    }
}

/// What the database reader hands the sealer.
enum Msg {
    /// Rows of a stream, in order.
    Rows(&'static str, RecordBatch),
    /// Seal what is staged: a barrier ends here.
    Seal,
}

/// Stages batches with consecutive positions per stream and seals when told, printing each
/// barrier as it becomes durable.
struct Sealer<'a> {
    archive: &'a mut Archive,
    bar: &'a indicatif::ProgressBar,
    next: HashMap<&'static str, u64>,
    /// The run's ledger row, sealed with its first barrier that holds anything.
    ledger: Option<RecordBatch>,
}

impl<'a> Sealer<'a> {
    fn new(
        archive: &'a mut Archive,
        bar: &'a indicatif::ProgressBar,
        ledger: RecordBatch,
    ) -> Sealer<'a> {
        Sealer {
            archive,
            bar,
            next: HashMap::new(),
            ledger: Some(ledger),
        }
    }

    /// Stages and seals everything the reader sends, until it hangs up.
    fn consume(&mut self, rx: std::sync::mpsc::Receiver<Msg>) -> Result<(), Failure> {
        for msg in rx {
            match msg {
                Msg::Rows(stream, batch) => {
                    self.stage(stream, &batch)?;
                    self.bar.inc(batch.num_rows() as u64);
                }
                Msg::Seal => self.seal()?,
            }
        }
        Ok(())
    }

    fn stage(&mut self, stream: &'static str, batch: &RecordBatch) -> Result<(), Failure> {
        let first = match self.next.get(stream) {
            Some(&p) => p,
            None => self.archive.watermark(stream).0.saturating_add(1),
        };
        let n = batch.num_rows() as u64;
        let positions: Vec<u64> = (first..first + n).collect();
        self.archive.stage_batch(stream, batch, &positions)?;
        self.next.insert(stream, first + n);
        Ok(())
    }

    fn seal(&mut self) -> Result<(), Failure> {
        if self.archive.staged_rows() > 0 {
            if let Some(ledger) = self.ledger.take() {
                self.stage(LEDGER, &ledger)?;
            }
        }
        if let Some(r) = self.archive.seal_all()? {
            crate::print_barrier(&r, self.bar);
        }
        Ok(())
    }
}

/// Reads the database in order and sends its rows as batches, with a seal wherever a barrier
/// may end once `seal_rows` rows were sent since the last.
struct Reader {
    tx: std::sync::mpsc::SyncSender<Msg>,
    seal_rows: usize,
    since_cut: usize,
}

impl Reader {
    fn send(&self, msg: Msg) -> Result<(), Failure> {
        self.tx
            .send(msg)
            .map_err(|_| Failure::from("the import stopped"))
    }

    fn rows(&mut self, stream: &'static str, batch: RecordBatch) -> Result<(), Failure> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.since_cut += batch.num_rows();
        self.send(Msg::Rows(stream, batch))
    }

    fn seal(&mut self) -> Result<(), Failure> {
        self.since_cut = 0;
        self.send(Msg::Seal)
    }

    /// Whether a barrier may end before the next row, once `pending` more rows are sent.
    fn due(&self, pending: usize) -> bool {
        self.since_cut + pending >= self.seal_rows
    }

    /// Every series' samples past its track's newest timestamp; answers how many.
    fn samples(
        &mut self,
        conn: &Connection,
        db: &Path,
        series: &[Series],
        resume: &HashMap<i64, u64>,
    ) -> Result<u64, Failure> {
        let sql = |e: rusqlite::Error| stopped(db, e);
        // One builder per kind, indexed by it.
        let mut batches = Kind::ALL.map(Samples::new);
        let mut query = conn
            .prepare(
                "SELECT id, boot_id, timestamp, value, histogram_data FROM samples \
                 WHERE series_id = ?1 AND timestamp > ?2 ORDER BY timestamp, id",
            )
            .map_err(sql)?;
        let mut imported = 0u64;
        for s in series {
            let after = resume.get(&s.id).map_or(-1, |&t| t as i64);
            let mut rows = query.query((s.id, after)).map_err(sql)?;
            let mut last: Option<u64> = None;
            let track = s.track();
            while let Some(row) = rows.next().map_err(sql)? {
                let id: i64 = row.get(0).map_err(sql)?;
                let boot = row
                    .get_ref(1)
                    .map_err(sql)?
                    .as_blob()
                    .map_err(|e| sql(e.into()))?;
                let timestamp = row.get::<_, i64>(2).map_err(sql)? as u64;
                if last != Some(timestamp) && self.due(batches.iter().map(|b| b.len).sum()) {
                    self.seal_samples(&mut batches)?;
                }
                last = Some(timestamp);
                let batch = &mut batches[s.kind as usize];
                batch.push_head(&track, timestamp, boot);
                match s.kind {
                    Kind::Counter | Kind::Gauge => {
                        batch.value.append_value(row.get(3).map_err(sql)?)
                    }
                    Kind::Histogram => {
                        let blob = row
                            .get_ref(4)
                            .map_err(sql)?
                            .as_blob()
                            .map_err(|e| sql(e.into()))?;
                        let h = decode_histogram(blob, s).map_err(|e| {
                            stopped(db, format!("sample {id} of {}: {e}", s.shown()))
                        })?;
                        batch.push_histogram(h);
                    }
                }
                imported += 1;
                if batch.len >= BATCH_ROWS {
                    self.rows(s.kind.stream(), batch.finish()?)?;
                }
            }
        }
        self.seal_samples(&mut batches)?;
        Ok(imported)
    }

    /// Sends every sample stream's rows built so far and ends a barrier there.
    fn seal_samples(&mut self, batches: &mut [Samples; 3]) -> Result<(), Failure> {
        for b in batches {
            self.rows(b.kind.stream(), b.finish()?)?;
        }
        self.seal()
    }

    /// Every rollup past its rollup track's newest window; answers how many.
    fn rollups(
        &mut self,
        conn: &Connection,
        db: &Path,
        series: &[Series],
        Rollups {
            keys,
            layout,
            newest,
            now,
        }: Rollups,
    ) -> Result<(u64, u64), Failure> {
        let sql = |e: rusqlite::Error| stopped(db, e);
        let mut stmt = conn
            .prepare(&format!(
                "SELECT series_id, function, window_seconds, window_start, value FROM rollups \
                 ORDER BY series_id, function, window_seconds, window_start{}",
                layout.tiebreak()
            ))
            .map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        let mut b = RollupRows::default();
        let mut total = 0u64;
        let mut open = 0u64;
        // The rollup track being read, (series, function, window), its newest window start in
        // the archive, and the window start of its last row sent.
        let mut current: Option<(i64, String, i64)> = None;
        let mut resume: Option<u64> = None;
        let mut last_start: Option<u64> = None;
        while let Some(row) = rows.next().map_err(sql)? {
            let series_id: i64 = row.get(0).map_err(sql)?;
            let function: String = row.get(1).map_err(sql)?;
            let window: i64 = row.get(2).map_err(sql)?;
            let start: i64 = row.get(3).map_err(sql)?;
            let value: f64 = row.get(4).map_err(sql)?;
            let s = keys.get(&series_id).map(|&i| &series[i]).ok_or_else(|| {
                stopped(
                    db,
                    format!("rollups of series {series_id}, which does not exist"),
                )
            })?;
            let start = layout.unit.to_ns(start).ok_or_else(|| {
                stopped(
                    db,
                    format!(
                        "a rollup of {} starts at {start} ({}), which is no time since the epoch in nanoseconds",
                        s.shown(),
                        layout.unit.name()
                    ),
                )
            })?;
            // A window eventd's newest sample has not passed may still change: it waits for
            // a later run (a rollup track's windows are imported once).
            let end = start.saturating_add((window.max(0) as u64).saturating_mul(1_000_000_000));
            if end > now {
                open += 1;
                continue;
            }
            let same = current
                .as_ref()
                .is_some_and(|(id, f, w)| *id == series_id && *f == function && *w == window);
            if !same {
                resume = newest.get(&rollup_track(s, &function, window)).copied();
                current = Some((series_id, function.clone(), window));
                last_start = None;
            }
            if resume.is_some_and(|r| start <= r) {
                continue;
            }
            if last_start != Some(start) && self.due(b.len) {
                self.rows(ROLLUPS, b.finish()?)?;
                self.seal()?;
            }
            last_start = Some(start);
            b.push(s, &function, window, start, value);
            total += 1;
            if b.len >= BATCH_ROWS {
                self.rows(ROLLUPS, b.finish()?)?;
            }
        }
        self.rows(ROLLUPS, b.finish()?)?;
        self.seal()?;
        Ok((total, open))
    }
}

/// What the rollups reader needs besides the database and the series.
struct Rollups<'a> {
    /// The series with rollups, by id, as indexes into the series.
    keys: &'a HashMap<i64, usize>,
    layout: &'a RollupLayout,
    /// Each rollup track's newest window start in the archive, by its labels.
    newest: &'a HashMap<Vec<String>, u64>,
    /// eventd's newest sample: a window not yet past it may still change.
    now: u64,
}

/// Rollup rows being built.
#[derive(Default)]
struct RollupRows {
    len: usize,
    name: StringBuilder,
    labels: StringBuilder,
    function: StringBuilder,
    window_seconds: Int64Builder,
    window_start: UInt64Builder,
    kind: StringBuilder,
    value: Float64Builder,
}

impl RollupRows {
    fn push(&mut self, s: &Series, function: &str, window: i64, start: u64, value: f64) {
        self.name.append_value(&s.name);
        self.labels.append_value(&s.labels);
        self.function.append_value(function);
        self.window_seconds.append_value(window);
        self.window_start.append_value(start);
        self.kind.append_value(s.kind.name());
        self.value.append_value(value);
        self.len += 1;
    }

    fn finish(&mut self) -> Result<RecordBatch, Failure> {
        self.len = 0;
        Ok(RecordBatch::try_new(
            rollup_schema(),
            vec![
                Arc::new(self.name.finish()),
                Arc::new(self.labels.finish()),
                Arc::new(self.function.finish()),
                Arc::new(self.window_seconds.finish()),
                Arc::new(self.window_start.finish()),
                Arc::new(self.kind.finish()),
                Arc::new(self.value.finish()),
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

    #[test]
    fn a_boundaries_blob_is_a_count_then_that_many_f64() {
        let mut blob = 2u32.to_le_bytes().to_vec();
        blob.extend(0.5f64.to_le_bytes());
        blob.extend(10.0f64.to_le_bytes());
        let b = decode_boundaries(&blob).expect("decodes");
        assert_eq!(b, [0.5, 10.0]);
        assert_eq!(boundaries_text(&b), "0.5,10.0");
        assert!(decode_boundaries(&blob[..blob.len() - 1]).is_err());
        assert!(decode_boundaries(&blob[..3]).is_err());
    }
}
