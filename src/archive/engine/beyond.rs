//! What the archive holds beyond its manifest's trusted prefix: the evidence that tells a
//! torn append (never acknowledged, safe to drop) from lost records (acknowledged, never to
//! be dropped by a routine open).
//!
//! A barrier's data files are renamed into place before its record is appended, and its
//! Delta commit is written only after that record is durable. So after one interrupted
//! append the directory can hold, beyond what the trusted prefix names, at most one new data
//! file per stream, whose rows start exactly at the stream's next `_seq` (plus the segments
//! of a compaction in flight, which rewrite rows the prefix already names), and no Delta
//! commit naming a file the prefix does not. Anything more was written after a record the
//! prefix does not hold had been acknowledged: the manifest lost records, whatever its tail
//! looks like. See `docs/format.md`, "Replay".

use crate::archive::engine::delta::LOG_DIR;
use crate::archive::error::Result;
use crate::archive::format::manifest::State;
use crate::archive::format::segment;
use crate::archive::format::spec::SEQ_COLUMN;
use crate::archive::io::durable;
use crate::archive::io::local;
use crate::archive::layout::relative;
use crate::archive::layout::STREAMS_DIR;
use parquet::file::statistics::Statistics;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Delta commits read back from a table's newest, per stream: a lost barrier's commit is
/// among the newest, and a later commit that removed a file it added is too.
const DELTA_COMMITS_READ: usize = 8;

/// Evidence of acknowledged records beyond the trusted prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Beyond {
    /// What the evidence shows, one sentence each.
    pub why: Vec<String>,
    /// Data files under `streams/` holding rows beyond the prefix (relative paths).
    pub files: Vec<String>,
    /// Delta commits naming files the prefix does not, as `<stream>/rows@<version>: NAME`.
    pub delta_commits: Vec<String>,
}

/// The `_seq` span a data file's footer states, or `None` when its footer cannot be read.
fn seq_span(path: &Path) -> Option<(u64, u64)> {
    let metadata = local::footer(path)?;
    let schema = metadata.file_metadata().schema_descr();
    let column = (0..schema.num_columns()).find(|&i| schema.column(i).name() == SEQ_COLUMN)?;
    let mut span: Option<(u64, u64)> = None;
    for group in metadata.row_groups() {
        if group.num_rows() == 0 {
            continue;
        }
        let (lo, hi) = match group.column(column).statistics()? {
            Statistics::Int64(s) => (*s.min_opt()? as u64, *s.max_opt()? as u64),
            _ => return None,
        };
        span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    span
}

/// The files a Delta table's newest commits add and no later one of them removes, by name,
/// with the version that added each.
fn delta_adds(log: &Path) -> Vec<(u64, u64)> {
    let Ok(files) = durable::list_files(log) else {
        return Vec::new();
    };
    let mut commits: Vec<(u64, &Path)> = files
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let version = name.strip_suffix(".json")?;
            (version.len() == 20 && version.bytes().all(|b| b.is_ascii_digit()))
                .then(|| Some((version.parse().ok()?, p.as_path())))
                .flatten()
        })
        .collect();
    commits.sort_by_key(|(v, _)| std::cmp::Reverse(*v));
    let named = |action: &serde_json::Value| -> Option<u64> {
        let path = action.get("path")?.as_str()?;
        segment::parse_data_file_name(path.rsplit('/').next()?)
    };
    let mut removed = BTreeSet::new();
    let mut added = Vec::new();
    for (version, path) in commits.into_iter().take(DELTA_COMMITS_READ) {
        let Ok(text) = local::read_to_string(path) else {
            continue;
        };
        let mut adds = Vec::new();
        for line in text.lines() {
            let Ok(action) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(name) = action.get("remove").and_then(named) {
                removed.insert(name);
            }
            if let Some(name) = action.get("add").and_then(named) {
                adds.push(name);
            }
        }
        added.extend(
            adds.into_iter()
                .filter(|n| !removed.contains(n))
                .map(|n| (version, n)),
        );
    }
    added
}

/// The data files of stream `id` in place that `state` does not name, with names at or
/// above its `next_name` (a barrier or compaction past it wrote them), in name order, as
/// `(name, path, path relative to the root)`.
pub(crate) fn orphans_past(
    root: &Path,
    state: &State,
    id: &str,
) -> Result<Vec<(u64, std::path::PathBuf, String)>> {
    let rows_dir = root.join(STREAMS_DIR).join(id).join("rows");
    let files = match durable::list_files(&rows_dir) {
        Ok(files) => files,
        Err(_) if !rows_dir.is_dir() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    // Every name the state holds (live, retired, cold) is below its `next_name`, so a name at
    // or above it is one no applied record claimed: no set of the live files is needed.
    let mut out: Vec<_> = files
        .into_iter()
        .filter_map(|path| {
            let name = segment::parse_data_file_name(path.file_name()?.to_str()?)?;
            (name >= state.next_name).then(|| (name, path.clone(), relative(root, &path)))
        })
        .collect();
    out.sort_by_key(|(name, _, _)| *name);
    Ok(out)
}

/// Reads the evidence under `root` against `state`, the trusted prefix of generation
/// `generation`. `evidence` lists every file under `.quarantine/`. `None` when everything
/// beyond the prefix is what one interrupted append can leave.
pub(crate) fn beyond(
    root: &Path,
    state: &State,
    generation: u64,
    evidence: &[std::path::PathBuf],
) -> Result<Option<Beyond>> {
    let mut found = Beyond::default();
    // Names a repair (or an earlier recovery) already set aside: not evidence again.
    let quarantined: BTreeSet<u64> = evidence
        .iter()
        .filter_map(|p| segment::parse_data_file_name(p.file_name()?.to_str()?))
        .collect();
    // Only a generation that was in place (`manifest/`) counts: one a crash left in `.tmp/`
    // (a checkpoint that never renamed it) is quarantined from there and never held.
    if let Some(newer) = evidence
        .iter()
        .filter(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|d| d == crate::archive::layout::MANIFEST_DIR)
        })
        .filter_map(|p| {
            crate::archive::format::manifest::log::parse_generation(p.file_name()?.to_str()?)
        })
        .filter(|&g| g > generation)
        .max()
    {
        found.why.push(format!(
            "quarantine holds generation {newer}, newer than the current generation {generation}: the manifest was rolled back"
        ));
    }
    let streams_dir = root.join(STREAMS_DIR);
    let streams = local::subdirectories(&streams_dir)?;
    for stream in streams {
        let next_seq = state.streams.get(&stream).map_or(0, |s| s.next_seq);
        let rows_dir = streams_dir.join(&stream).join("rows");
        // Data files beyond the prefix holding rows it does not name, by name.
        let mut new_rows: BTreeMap<u64, (String, Option<(u64, u64)>)> = BTreeMap::new();
        // Data files in place that the prefix does not name, above its names.
        let mut orphans = 0usize;
        for (name, path, rel) in orphans_past(root, state, &stream)? {
            orphans += 1;
            let span = seq_span(&path);
            // A compaction in flight rewrites rows the prefix names: below `next_seq`.
            if span.is_some_and(|(_, hi)| hi < next_seq) {
                continue;
            }
            new_rows.insert(name, (rel, span));
        }
        let one_torn_barrier = match new_rows.values().collect::<Vec<_>>().as_slice() {
            [] => true,
            [(_, Some((lo, _)))] => *lo == next_seq,
            _ => false,
        };
        if !one_torn_barrier {
            let described: Vec<String> = new_rows
                .values()
                .map(|(rel, span)| match span {
                    Some((lo, hi)) => format!("{rel} (_seq {lo}..={hi})"),
                    None => format!("{rel} (footer unreadable)"),
                })
                .collect();
            found.why.push(format!(
                "stream {stream}: {} data file(s) hold rows past the trusted prefix (its next _seq is {next_seq}), more than one interrupted barrier leaves: {}",
                new_rows.len(),
                described.join(", ")
            ));
            found
                .files
                .extend(new_rows.into_values().map(|(rel, _)| rel));
        }
        // A Delta commit is written only after its record is durable. A record lost whole
        // leaves its files in place (or a later one's, which replaced them): without such a
        // file there is nothing for the log to name, and the open reads no log.
        if orphans == 0 {
            continue;
        }
        let log = rows_dir.join(LOG_DIR);
        let mut beyond_delta: Vec<(u64, u64)> = delta_adds(&log)
            .into_iter()
            // At or above `next_name`: a name no applied record claimed.
            .filter(|(_, name)| *name >= state.next_name && !quarantined.contains(name))
            .collect();
        beyond_delta.sort();
        if let Some(&(version, name)) = beyond_delta.last() {
            found.why.push(format!(
                "stream {stream}: Delta commit {version} of its rows table names {}, which the trusted prefix does not; a Delta commit is written only after its manifest record is durable, so that record was acknowledged",
                segment::data_file_name(name)
            ));
            found.delta_commits.extend(
                beyond_delta
                    .iter()
                    .map(|(v, n)| format!("{stream}/rows@{v}: {}", segment::data_file_name(*n))),
            );
        }
    }
    Ok((!found.why.is_empty()).then_some(found))
}
