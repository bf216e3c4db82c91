//! What an archive holds, for people and for tools: streams, tracks, files, bytes, floors.

use super::Archive;
use crate::archive::error::Result;
use crate::contract::Position;
use serde::Serialize;

/// An archive's contents as `inspect` shows them.
#[derive(Clone, Debug, Serialize)]
pub struct Description {
    /// The archive root.
    pub root: String,
    /// Current manifest generation.
    pub generation: u64,
    /// Barriers recorded.
    pub barriers: u64,
    /// Bytes of the current manifest generation (a checkpoint starts a new one past the
    /// configured size).
    pub manifest_bytes: u64,
    /// Streams by id.
    pub streams: Vec<StreamDescription>,
    /// Evidence kept in `.quarantine/`.
    pub quarantine: Vec<QuarantinedFile>,
    /// What this open recovered.
    pub recovery: super::Recovery,
}

/// One stream.
#[derive(Clone, Debug, Serialize)]
pub struct StreamDescription {
    /// Stream id.
    pub id: String,
    /// Columns as `name type`.
    pub columns: Vec<String>,
    /// Track columns.
    pub track: Vec<String>,
    /// Axis column.
    pub axis: Option<String>,
    /// Measured fields in declared order.
    pub measured: Vec<String>,
    /// Position through which the stream is durable.
    pub watermark: Position,
    /// Live data files.
    pub files: usize,
    /// Bytes of live data files.
    pub bytes: u64,
    /// Live level files (one per barrier, every level inside).
    pub level_files: usize,
    /// Bytes of live level files.
    pub level_bytes: u64,
    /// Of the live data files, those in the cold tier.
    pub cold_files: usize,
    /// Their bytes.
    pub cold_bytes: u64,
    /// The cold tiers they are in (URLs).
    pub cold_tiers: Vec<String>,
    /// The level ladder, if the stream builds levels.
    pub ladder: Option<crate::archive::format::ladder::Ladder>,
    /// The first level the stream stores, once a barrier decided it (format version 6):
    /// finer levels are folded from the raw rows when read. `None` while undecided.
    pub levels_from: Option<u8>,
    /// The first `_seq` whose rows no level file summarises yet (format version 8): their
    /// barriers deferred their partials, and reads fold their cells from the raw rows.
    pub levels_deferred_from: Option<u64>,
    /// Rows stored.
    pub rows: u64,
    /// The highest raw floor of any track (an unnarrowed read answers to it).
    pub floor: Position,
    /// Tracks in key order.
    pub tracks: Vec<TrackDescription>,
    /// Its Delta tables (rows, then levels): whether each log is level with the manifest.
    pub delta: Vec<DeltaDescription>,
    /// Row groups whose rows could not be read when the archive was opened (format version
    /// 11), each in words: their tracks are not in `tracks`, and `rows` leaves their rows out.
    /// Empty for a sound archive.
    pub unreadable: Vec<String>,
}

/// One of a stream's Delta tables, as `inspect` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct DeltaDescription {
    /// `rows` or `levels`.
    pub table: String,
    /// The table's directory (open it with `delta_scan`, `scan_delta`, `DeltaTable`).
    pub path: String,
    /// Whether a Delta reader reads exactly what the manifest holds now.
    pub level: bool,
    /// Files the log shows, when level.
    pub files: usize,
    /// Why not, when not level (and the command that makes it level).
    pub note: Option<String>,
}

/// One track.
#[derive(Clone, Debug, Serialize)]
pub struct TrackDescription {
    /// Labels, outermost first.
    pub labels: Vec<String>,
    /// Rows stored.
    pub rows: u64,
    /// Row groups.
    pub groups: usize,
    /// Highest axis value stored.
    pub last_axis: Option<u64>,
    /// Raw floor: no row beneath this position is retained.
    pub floor: Position,
    /// The raw floor on the axis.
    pub raw_axis_floor: u64,
    /// Each level's floor on the axis (cells beneath it are retired), by level.
    pub level_floors: Vec<u64>,
    /// Retired whole (`retire` or the idle time).
    pub retired: bool,
}

/// One file of evidence.
#[derive(Clone, Debug, Serialize)]
pub struct QuarantinedFile {
    /// Path relative to the root.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// The Delta tables of stream `s` that a reader can open: a stream kept without levels has
/// no levels table, and a table whose log was never written because it holds no file is not
/// there either. Naming them would send every Delta reader to a table that does not exist.
fn existing_tables(
    s: &crate::archive::format::manifest::state::StreamState,
    tables: Vec<DeltaDescription>,
) -> Vec<DeltaDescription> {
    tables
        .into_iter()
        .filter(|d| {
            !(d.table == crate::archive::engine::delta::Table::Levels.dir()
                && s.decl.ladder.is_none())
        })
        .filter(|d| {
            !d.level
                || d.files > 0
                || std::path::Path::new(&d.path)
                    .join(crate::archive::engine::delta::LOG_DIR)
                    .is_dir()
        })
        .collect()
}

impl Archive {
    /// Describes the archive's durable contents.
    pub fn describe(&self) -> Result<Description> {
        if self.config.scope.is_some() {
            return Err(crate::archive::error::ArchiveError::Scoped("describe"));
        }
        let mut delta = self.describe_delta()?;
        let streams = self
            .commit
            .state()
            .streams
            .values()
            .map(|s| StreamDescription {
                id: s.decl.id.clone(),
                columns: s
                    .decl
                    .columns
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.data_type))
                    .collect(),
                track: s.decl.track.clone(),
                axis: s.decl.axis.clone(),
                measured: s.decl.measured.clone(),
                watermark: s.watermark,
                files: s.files.len(),
                bytes: s.files.iter().map(|f| f.bytes).sum(),
                level_files: s.levels.len(),
                level_bytes: s.levels.iter().map(|f| f.bytes).sum(),
                cold_files: s.files.iter().filter(|f| f.cold.is_some()).count(),
                cold_bytes: s
                    .files
                    .iter()
                    .filter(|f| f.cold.is_some())
                    .map(|f| f.bytes)
                    .sum(),
                cold_tiers: s
                    .files
                    .iter()
                    .filter_map(|f| {
                        let url = f.cold.as_deref()?;
                        Some(url.strip_suffix(&f.path)?.trim_end_matches('/').to_owned())
                    })
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                ladder: s.decl.ladder,
                levels_from: s.levels_from,
                levels_deferred_from: s.levels_deferred_from,
                rows: s.tracks.values().map(|t| t.rows).sum(),
                floor: s
                    .tracks
                    .values()
                    .map(|t| t.floor())
                    .max()
                    .unwrap_or(Position::ORIGIN),
                tracks: s
                    .tracks
                    .values()
                    .map(|t| TrackDescription {
                        labels: t.labels.to_vec(),
                        rows: t.rows,
                        groups: t.groups,
                        last_axis: t.last_axis,
                        floor: t.floor(),
                        raw_axis_floor: t.raw.axis,
                        level_floors: (0..s.decl.ladder.map_or(0, |l| l.levels as usize))
                            .map(|k| t.level_floor(k).axis)
                            .collect(),
                        retired: t.whole,
                    })
                    .collect(),
                delta: existing_tables(s, delta.remove(&s.decl.id).unwrap_or_default()),
                unreadable: s
                    .unreadable()
                    .into_iter()
                    .map(|(file, unread)| {
                        format!(
                            "row group {} of {} could not be read when the archive was opened ({}): its tracks and rows are left out of these counts",
                            unread.group, file.path, unread.why
                        )
                    })
                    .collect(),
            })
            .collect();
        Ok(Description {
            root: self.root.display().to_string(),
            generation: self.commit.state().generation,
            barriers: self.commit.state().barriers,
            manifest_bytes: crate::archive::io::local::len(
                &self.root.join(crate::archive::layout::MANIFEST_DIR).join(
                    crate::archive::format::manifest::log::generation_name(
                        self.commit.state().generation,
                    ),
                ),
            )
            .unwrap_or(0),
            streams,
            quarantine: self
                .quarantine()?
                .into_iter()
                .map(|(path, bytes)| QuarantinedFile { path, bytes })
                .collect(),
            recovery: self.recovery.clone(),
        })
    }
}
