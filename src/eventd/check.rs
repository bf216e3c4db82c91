//! The checks before anything is written: the schema, every series, sample and rollup the
//! import would take, and how `rollups` is laid out. Each refuses naming what and where.

use super::error::{refuse, ImportError};
use super::model::SCHEMA_VERSION;
use super::model::{decode_boundaries, decode_histogram, Kind, Series};
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;
use std::path::Path;

/// A `window_start` at or above this is nanoseconds since the epoch; every one below it (and
/// above 0) is seconds. As nanoseconds, 10^12 is 16 min 40 s into 1970, before any eventd
/// ran; as seconds it is past the year 33 000. A table holding both is refused.
pub(super) const SECONDS_BELOW: i64 = 1_000_000_000_000;

/// The unit of `rollups.window_start`, decided from the data by [`SECONDS_BELOW`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WindowUnit {
    Nanoseconds,
    Seconds,
}

impl WindowUnit {
    pub(super) fn nanoseconds(self) -> i64 {
        match self {
            WindowUnit::Nanoseconds => 1,
            WindowUnit::Seconds => 1_000_000_000,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            WindowUnit::Nanoseconds => "nanoseconds",
            WindowUnit::Seconds => "seconds",
        }
    }

    /// A window start in this unit as nanoseconds since the epoch (the archive's axis);
    /// `None` before 1970 or past what the axis holds.
    pub(super) fn to_ns(self, start: i64) -> Option<u64> {
        u64::try_from(start.checked_mul(self.nanoseconds())?).ok()
    }
}

/// How `rollups` is read: the column that keeps rows of one window in a stable order, and
/// the unit of `window_start`.
#[derive(Clone, Debug)]
pub(super) struct RollupLayout {
    /// `rowid` (or its other names, when a column takes one), or `None` for a table
    /// declared `WITHOUT ROWID`, whose primary key orders its rows.
    pub(super) tiebreak: Option<&'static str>,
    pub(super) unit: WindowUnit,
    /// The smallest and largest non-zero window start, when there is one.
    pub(super) span: Option<(i64, i64)>,
}

impl RollupLayout {
    /// Reads the table's shape and decides the unit from its window starts; refuses a table
    /// whose window starts are in both units.
    pub(super) fn of(conn: &Connection, db: &Path) -> Result<RollupLayout, ImportError> {
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
    pub(super) fn tiebreak(&self) -> String {
        self.tiebreak.map(|t| format!(", {t}")).unwrap_or_default()
    }

    /// What the run says about the unit it decided, when there are rollups to decide it by.
    pub(super) fn said(&self) -> Option<String> {
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
pub(super) fn check_rollup_values(conn: &Connection, db: &Path) -> Result<(), ImportError> {
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
            "typeof(value) NOT IN ('real', 'integer') OR (typeof(value) = 'integer' AND CAST(value AS REAL) != value)",
            "a number a 64-bit float holds exactly (an integer past 2^53 would be stored rounded)",
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
        crate::TrackKey::encode(&[function.as_str()])
            .map_err(|e| refuse(db, format!("rollup function {function:?}: {e}")))?;
    }
    Ok(())
}

/// Column `index` of every row `query` answers.
pub(super) fn column<T: rusqlite::types::FromSql>(
    conn: &Connection,
    db: &Path,
    query: &str,
    index: usize,
) -> Result<Vec<T>, ImportError> {
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
pub(super) fn check_schema(conn: &Connection, db: &Path) -> Result<(), ImportError> {
    let sql = |e: rusqlite::Error| refuse(db, e);
    let columns = |table: &str| -> Result<Vec<String>, ImportError> {
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
pub(super) fn load_series(conn: &Connection, db: &Path) -> Result<Vec<Series>, ImportError> {
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
        crate::TrackKey::encode(&track).map_err(|e| bad(e.to_string()))?;
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
pub(super) struct Counts {
    pub(super) samples: u64,
    pub(super) rollups: u64,
}

/// One scan of `samples` for what no track could hold: a sample of no series, a boot id
/// that is not 16 bytes, a timestamp that is not a non-negative integer, a value that is not
/// a number.
pub(super) fn check_samples(conn: &Connection, db: &Path) -> Result<Counts, ImportError> {
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
        (
            // The archive's `value` is a 64-bit float, as eventd's column is REAL: an integer
            // a float cannot hold exactly would be stored rounded.
            "typeof(value) = 'integer' AND CAST(value AS REAL) != value",
            "have an integer value a 64-bit float cannot hold exactly (past 2^53: it would be stored rounded)",
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
pub(super) fn check_histograms(
    conn: &Connection,
    db: &Path,
    series: &[Series],
) -> Result<(), ImportError> {
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
pub(super) fn check_rollups(
    conn: &Connection,
    db: &Path,
    series: &[Series],
) -> Result<HashMap<i64, usize>, ImportError> {
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
