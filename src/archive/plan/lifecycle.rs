//! Pure planners: state + declaration + now → a plan. No I/O, no clock: tests run days of
//! cadence in microseconds, and the executor only carries a plan out.

use super::retention::{Compaction, Lifetime, Retention};
use crate::archive::format::levels;
use crate::archive::format::manifest::{
    GroupRef, LevelFloor, RawFloor, Retire, SegmentFile, StreamState, TrackRetire, TrackState,
};
use crate::contract::TrackKey;
use std::collections::{BTreeMap, BTreeSet};

/// Floors one track would move to.
#[derive(Default)]
struct Moves {
    raw: Option<RawFloor>,
    levels: Vec<Option<LevelFloor>>,
    whole: bool,
}

/// The retirement the stream's declared lifetimes and idle time call for at `now_ns`, if any.
/// A duration or size sweep never retires a track's newest row group nor its newest level
/// cell; only the idle time retires a track whole.
pub fn plan_retirement(stream: &StreamState, retention: &Retention, now_ns: u64) -> Option<Retire> {
    let mut moves: BTreeMap<&TrackKey, Moves> = BTreeMap::new();
    // Raw rows: per track, the longest prefix of row groups the lifetime lets go, from where
    // each track's live groups are (beside `stream.tracks`, in key order), found only when a
    // raw lifetime may retire some.
    let located = match retention.raw {
        Lifetime::Forever => Vec::new(),
        _ => stream.locate_all(),
    };
    let retirable = raw_retirable(stream, &located, retention.raw, now_ns);
    for ((key, track), groups) in stream.tracks.iter().zip(&located) {
        if track.whole {
            continue;
        }
        let n = retirable.get(key).copied().unwrap_or(0);
        if n > 0 {
            let floor = raw_floor_after(stream, track, &groups[..n]);
            if floor != track.raw {
                moves.entry(key).or_default().raw = Some(floor);
            }
        }
    }
    // Levels: per track and level, a cell-aligned axis floor.
    if let Some(ladder) = stream.decl.ladder {
        for (key, track) in &stream.tracks {
            let Some(last) = track.last_axis.filter(|_| !track.whole) else {
                continue;
            };
            for k in 0..ladder.levels as usize {
                let w = ladder.width(k);
                let end = match retention.level_lifetime(k) {
                    Lifetime::Forever | Lifetime::Bytes(_) => continue,
                    Lifetime::Age(d) => {
                        track.sealed_axis_by(now_ns.saturating_sub(d.as_nanos() as u64))
                    }
                    Lifetime::Behind(d) => last.saturating_sub(d),
                };
                // Whole cells only, and never the cell holding the newest axis value.
                let axis = (end / w * w).min(last / w * w);
                if axis > track.level_floor(k).axis {
                    let floor = LevelFloor {
                        axis,
                        position: level_position_floor(stream, track, k, axis),
                    };
                    let m = moves.entry(key).or_default();
                    if m.levels.len() <= k {
                        m.levels.resize(k + 1, None);
                    }
                    m.levels[k] = Some(floor);
                }
            }
        }
    }
    // Idle tracks retire whole; only their groups are looked for.
    if let Some(idle) = retention.idle {
        let cutoff = now_ns.saturating_sub(idle.as_nanos() as u64);
        let idle: Vec<(&TrackKey, &TrackState)> = stream
            .tracks
            .iter()
            .filter(|(_, t)| !t.whole && t.last_sealed_ns < cutoff)
            .collect();
        let located = stream.locate(&idle.iter().map(|(_, t)| *t).collect::<Vec<_>>());
        for ((key, track), groups) in idle.into_iter().zip(located) {
            moves.insert(key, whole_moves(stream, track, &groups));
        }
    }
    finish(stream, moves, now_ns, "sweep")
}

/// The retirement of every track beneath `prefix`, whole: nothing of them is served after.
pub fn plan_track_retirement(
    stream: &StreamState,
    prefix: &TrackKey,
    now_ns: u64,
) -> Option<Retire> {
    let tracks: Vec<_> = crate::archive::engine::read::select(stream, prefix)
        .into_iter()
        .filter(|(_, t)| !t.whole)
        .collect();
    let located = stream.locate(&tracks.iter().map(|(_, t)| *t).collect::<Vec<_>>());
    let moves = tracks
        .into_iter()
        .zip(located)
        .map(|((key, track), groups)| (key, whole_moves(stream, track, &groups)))
        .collect();
    finish(stream, moves, now_ns, "explicit")
}

/// The moves that retire `track` whole; `groups` are its live groups.
fn whole_moves(stream: &StreamState, track: &TrackState, groups: &[GroupRef]) -> Moves {
    let raw = if !groups.is_empty() {
        raw_floor_after(stream, track, groups)
    } else {
        track.raw
    };
    let levels = match (stream.decl.ladder, track.last_axis) {
        (Some(ladder), Some(last)) => (0..ladder.levels as usize)
            .map(|k| {
                let w = ladder.width(k);
                Some(LevelFloor {
                    axis: (last / w).saturating_add(1).saturating_mul(w),
                    position: raw.position,
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    Moves {
        raw: Some(raw),
        levels,
        whole: true,
    }
}

fn finish(
    stream: &StreamState,
    moves: BTreeMap<&TrackKey, Moves>,
    now_ns: u64,
    reason: &str,
) -> Option<Retire> {
    if moves.is_empty() {
        return None;
    }
    // A data file leaves the live set when every group in it is retired under the new floors.
    let retired = |track: &[String], seq_hi: u64| -> bool {
        let Ok(key) = TrackKey::encode(track) else {
            return false;
        };
        let Some(state) = stream.tracks.get(&key) else {
            return false;
        };
        match moves.get(&key) {
            Some(m) if m.whole => true,
            Some(Moves { raw: Some(f), .. }) => seq_hi < f.seq,
            _ => state.retires(seq_hi),
        }
    };
    let dropped = stream
        .files
        .iter()
        .filter(|f| f.groups.iter().all(|g| retired(&g.track, g.seq[1])))
        .map(|f| f.name)
        .collect();
    let tracks = moves
        .into_iter()
        .map(|(key, m)| TrackRetire {
            track: stream.tracks[key].labels.to_vec(),
            raw: m.raw,
            levels: m.levels,
            whole: m.whole,
        })
        .collect();
    Some(Retire {
        stream: stream.decl.id.clone(),
        retired_at_ns: now_ns,
        reason: reason.to_owned(),
        tracks,
        dropped,
    })
}

/// The raw floor after retiring `groups`, the first live groups of `track`.
fn raw_floor_after(stream: &StreamState, track: &TrackState, groups: &[GroupRef]) -> RawFloor {
    let mut floor = track.raw;
    for g in groups {
        let entry = &stream.files[g.file].groups[g.group];
        floor.position = floor.position.max(entry.position[1].saturating_add(1));
        floor.seq = floor.seq.max(entry.seq[1].saturating_add(1));
        if let Some([_, hi]) = entry.axis {
            floor.axis = floor.axis.max(hi.saturating_add(1));
        }
    }
    floor
}

/// How many leading live groups of each track the raw lifetime retires (never the newest);
/// `located` holds each track's live groups, beside `stream.tracks`.
fn raw_retirable<'a>(
    stream: &'a StreamState,
    located: &[Vec<GroupRef>],
    lifetime: Lifetime,
    now_ns: u64,
) -> BTreeMap<&'a TrackKey, usize> {
    let mut out = BTreeMap::new();
    let tracks = stream.tracks.iter().zip(located);
    match lifetime {
        Lifetime::Forever => {}
        Lifetime::Age(d) => {
            let cutoff = now_ns.saturating_sub(d.as_nanos() as u64);
            for ((key, _), groups) in tracks {
                let n = groups
                    .iter()
                    .take(groups.len().saturating_sub(1))
                    .take_while(|g| stream.files[g.file].sealed_at_ns < cutoff)
                    .count();
                out.insert(key, n);
            }
        }
        Lifetime::Behind(d) => {
            for ((key, track), groups) in tracks {
                let Some(last) = track.last_axis else {
                    continue;
                };
                let horizon = last.saturating_sub(d);
                let n = groups
                    .iter()
                    .take(groups.len().saturating_sub(1))
                    .take_while(|g| {
                        stream.files[g.file].groups[g.group]
                            .axis
                            .is_some_and(|[_, hi]| hi < horizon)
                    })
                    .count();
                out.insert(key, n);
            }
        }
        Lifetime::Bytes(budget) => {
            // Oldest first across tracks (by `_seq`), each track's newest group kept.
            let mut groups: Vec<(u64, u64, &TrackKey, usize)> = Vec::new();
            let mut total = 0u64;
            let sizes: Vec<Vec<u64>> = stream.files.iter().map(SegmentFile::entry_sizes).collect();
            for ((key, _), live) in tracks {
                for (i, g) in live.iter().enumerate() {
                    let entry = &stream.files[g.file].groups[g.group];
                    let len = sizes[g.file][g.group];
                    total += len;
                    if i + 1 < live.len() {
                        groups.push((entry.seq[0], len, key, i));
                    }
                }
            }
            groups.sort_unstable();
            let mut counts: BTreeMap<&TrackKey, usize> = BTreeMap::new();
            for (_, bytes, key, i) in groups {
                if total <= budget {
                    break;
                }
                // Prefixes only: a track's group retires after every older one of it.
                let n = counts.entry(key).or_insert(0);
                if *n == i {
                    *n += 1;
                    total -= bytes;
                }
            }
            out.extend(counts);
        }
    }
    out
}

/// A lower bound on the position of any row a retained cell of level `k` at or above
/// `axis` folds: the least first position of the level files that may hold such cells.
fn level_position_floor(stream: &StreamState, track: &TrackState, k: usize, axis: u64) -> u64 {
    let this = std::slice::from_ref(&track.labels);
    let known = levels::level_groups(&stream.levels, k)
        .map(|(f, g)| &stream.levels[f].groups[g])
        .filter(|g| levels::group_holds_any(g, this))
        .filter(|g| g.axis.is_none_or(|[_, hi]| hi >= axis))
        .map(|g| g.position[0])
        .min();
    let previous = track.level_floor(k).position;
    known.unwrap_or(track.raw.position).max(previous)
}

/// Where compacted segments are cut besides their size, so compaction never merges rows
/// the raw lifetime would retire at different times into one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Size only (raw rows kept forever, or by a byte budget).
    None,
    /// At multiples of this many ns of sealing time (an age lifetime: an eighth of it).
    Sealed(u64),
    /// At multiples of this many axis units (an axis-distance lifetime: an eighth of it).
    Axis(u64),
}

impl Split {
    /// The cut a raw lifetime calls for: an eighth of it, so a segment retires at most an
    /// eighth of a lifetime late.
    pub fn for_lifetime(raw: Lifetime) -> Split {
        match raw {
            Lifetime::Age(d) => Split::Sealed((d.as_nanos() as u64 / 8).max(1)),
            Lifetime::Behind(units) => Split::Axis((units / 8).max(1)),
            Lifetime::Forever | Lifetime::Bytes(_) => Split::None,
        }
    }

    /// The cut a stream's retention calls for: its raw lifetime's, and where that leaves
    /// segments uncut by sealing time, an eighth of its shortest level age lifetime. A
    /// level's age is judged by its track's age marks, which for a track nothing was retired
    /// of are what its live files say (a segment is sealed when its newest input was): a
    /// segment merging rows sealed far apart would hold the level's cells back until its
    /// newest rows are old, forever under repeated compaction.
    pub fn for_retention(retention: &Retention) -> Split {
        match Split::for_lifetime(retention.raw) {
            Split::None => {
                let shortest = retention
                    .levels
                    .iter()
                    .filter_map(|l| match l {
                        Lifetime::Age(d) => Some(*d),
                        _ => None,
                    })
                    .min();
                shortest.map_or(Split::None, |d| Split::for_lifetime(Lifetime::Age(d)))
            }
            Split::Sealed(raw) => {
                let levels = retention.levels.iter().filter_map(|l| match l {
                    Lifetime::Age(d) => Some((d.as_nanos() as u64 / 8).max(1)),
                    _ => None,
                });
                Split::Sealed(levels.fold(raw, u64::min))
            }
            axis => axis,
        }
    }
}

/// The most data files one packed compaction reads, about (each is kept open, with one
/// decoded row group, while it runs; a run may take one more file in to keep the order). A
/// migration of 10^5 single-track files takes several rounds.
pub const MAX_FAN_IN: usize = 256;

/// A track's older segment joins a compaction while it is at most this many times the bytes
/// newer than it (size-tiered merging).
pub const MERGE_RATIO: u64 = 4;

/// What one compaction of a stream rewrites and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactPlan {
    /// The stream.
    pub stream: String,
    /// Data files rewritten (removed by the swap), by name.
    pub inputs: Vec<u64>,
    /// The data files to write, each of about the target size: its tracks in key order,
    /// each with its source groups in `_seq` order. A file packs many tracks (format
    /// version 7); a track larger than the target gets files of its own; under an
    /// axis-distance lifetime every file holds one track.
    pub outputs: Vec<PlannedFile>,
    /// Level files merged into one run (removed by the swap), by name, in publish order:
    /// whole runs, adjacent.
    pub level_inputs: Vec<u64>,
    /// The tier of the run the merge writes.
    pub level_tier: u8,
    /// Whether the plan left data files out that it would have rewritten, to keep within
    /// [`MAX_FAN_IN`] inputs: another round has work to do.
    pub more: bool,
    /// Whether the merged run is written as level tables (one file per level); otherwise as
    /// one file of every level. Tables once the run is worth them ([`TABLE_MIN_BYTES`]), and
    /// always for a forced compaction.
    pub level_tables: bool,
}

/// A merged level run this large (its inputs' bytes) is written as level tables, one file
/// per level; a smaller one stays one file of every level, so small barriers do not multiply
/// files (a table's footer and page index cost a few KiB each).
pub const TABLE_MIN_BYTES: u64 = 256 << 10;

/// One data file a compaction writes: its tracks' rows in key order, packed into shared row
/// groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlannedFile {
    /// Its tracks in key order (a track at most once).
    pub segments: Vec<PlannedSegment>,
}

/// One track's rows in a compacted file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedSegment {
    /// The track's labels.
    pub track: crate::contract::Labels,
    /// Source row groups, in `_seq` order: `(file name, group index)`.
    pub sources: Vec<(u64, usize)>,
}

/// Whether the data file `f` of `stream` holds a row group its track has retired.
pub fn holds_retired(stream: &StreamState, f: &SegmentFile) -> bool {
    f.groups.iter().any(|g| {
        TrackKey::encode(&g.track)
            .ok()
            .and_then(|k| stream.tracks.get(&k))
            .is_some_and(|t| t.retires(g.seq[1]))
    })
}

/// For each of the stream's data files (in `stream.files` order), whether it holds a row
/// group its track has retired. Only tracks whose raw floor has moved can have retired one,
/// so a stream without retirements answers at once, and others search only those tracks'
/// entries, with no key encoding.
pub fn files_holding_retired(stream: &StreamState) -> Vec<bool> {
    let mut out = vec![false; stream.files.len()];
    let retiring: Vec<&TrackState> = stream.tracks.values().filter(|t| t.raw.seq > 0).collect();
    if retiring.is_empty() {
        return out;
    }
    for (track, groups) in retiring.iter().zip(stream.entries_of(&retiring)) {
        for g in groups {
            if track.retires(stream.files[g.file].groups[g.group].seq[1]) {
                out[g.file] = true;
            }
        }
    }
    out
}

/// What a compaction rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// What is due under the policy's thresholds.
    Due,
    /// Whatever can be rewritten at all (`compact --force`).
    All,
    /// Only the data files that hold retired row groups (with every later file of their
    /// tracks), whatever their number; no level merge. A retirement runs it so that no live
    /// file holds a row the archive no longer serves: what a Delta reader, or a glob, sees is
    /// then exactly what `rows` serves.
    Retired,
}

/// The compaction `stream` calls for under `policy`, if any.
///
/// Data files merge size-tiered, newest first, within each retention slice: from the
/// newest file back, an older small file (under half the target) joins while its row groups'
/// bytes are at most `MERGE_RATIO` times those newer than it, so each byte is rewritten a logarithmic
/// number of times. A file holding retired groups, a file of format versions 1-4 (unsigned)
/// and a barrier file of versions 1-5 (one row group per track) always go. The files chosen
/// are merged in contiguous runs (in `_seq` order) into packed files of about the target
/// size, tracks in key order ([`PlannedFile`]): what they hold is then still in `_seq`
/// order for every track. Under an axis-distance lifetime ([`Split::Axis`]), files stay one
/// track each (see `choose_per_track`).
///
/// Level runs merge size-tiered ([`tiered_merge`]) into one run of whole cells (level
/// tables once it is large, or forced), retired cells dropped.
pub fn plan_compaction(
    stream: &StreamState,
    policy: &Compaction,
    split: Split,
    rewrite: Rewrite,
) -> Option<CompactPlan> {
    let force = rewrite == Rewrite::All;
    let purge = rewrite == Rewrite::Retired;
    // Each entry's bytes (a packed row group's shared out by rows), per file in stream order:
    // worked out only when a plan needs them (a maintenance pass that finds nothing due does
    // not walk every entry of every file).
    let sizes_of =
        || -> Vec<Vec<u64>> { stream.files.iter().map(SegmentFile::entry_sizes).collect() };
    let per_track = matches!(split, Split::Axis(_));
    // Each track's live groups (beside `stream.tracks`), found once a plan needs them.
    let (mut chosen, per_track_inputs) = if per_track {
        let sizes = sizes_of();
        let located = stream.locate_all();
        (
            choose_per_track(stream, &located, policy, split, purge, &sizes),
            Some((located, sizes)),
        )
    } else {
        (choose_files(stream, policy, split, purge), None)
    };
    // Levels: runs merged size-tiered; a forced compaction merges every run into one (or
    // rewrites a lone run to drop the cells a level floor has passed, or to turn a run that is
    // not yet in tables into tables).
    let floors_moved = stream
        .tracks
        .values()
        .any(|t| t.level_floors.iter().any(|f| f.axis > 0));
    let runs = level_runs(&stream.levels);
    let (merged, level_tier) = if purge {
        (0..0, 0)
    } else if force {
        let rewrite = runs.len() >= 2
            || runs
                .first()
                .is_some_and(|r| floors_moved || !r.tables || !r.signed);
        let top = runs.iter().map(|r| r.tier).max().unwrap_or(0);
        if rewrite {
            (0..runs.len(), top.saturating_add(u8::from(runs.len() > 1)))
        } else {
            (0..0, 0)
        }
    } else {
        tiered_merge(&runs.iter().map(|r| r.tier).collect::<Vec<_>>()).unwrap_or((0..0, 0))
    };
    let level_bytes: u64 = runs[merged.clone()].iter().map(|r| r.bytes).sum();
    let level_tables = force || level_bytes >= TABLE_MIN_BYTES;
    let level_inputs: Vec<u64> = runs[merged]
        .iter()
        .flat_map(|r| r.files.iter().copied())
        .collect();
    // Raw files are rewritten when there are enough of them, whether or not levels merge.
    let count = chosen.iter().filter(|c| **c).count();
    let raw_worth = if force || purge {
        count > 0
    } else {
        count >= policy.min_inputs
    };
    if !raw_worth {
        chosen.iter_mut().for_each(|c| *c = false);
    }
    if !chosen.contains(&true) && level_inputs.is_empty() {
        return None;
    }
    let (outputs, more) = match per_track_inputs {
        Some((located, sizes)) => (
            per_track_outputs(stream, &located, policy, split, &chosen, &sizes),
            false,
        ),
        None => {
            let more = trim_fan_in(stream, &mut chosen);
            // Each track's groups and each entry's bytes only when data files are rewritten:
            // a merge of level runs alone walks no entry.
            let outputs = match chosen.contains(&true) {
                true => packed_outputs(stream, policy, split, &mut chosen),
                false => Vec::new(),
            };
            (outputs, more)
        }
    };
    Some(CompactPlan {
        stream: stream.decl.id.clone(),
        inputs: stream
            .files
            .iter()
            .zip(&chosen)
            .filter(|(_, c)| **c)
            .map(|(f, _)| f.name)
            .collect(),
        outputs,
        more,
        level_inputs,
        level_tier,
        level_tables,
    })
}

/// A file compaction rewrites whatever the thresholds say: it holds retired groups
/// (`retired`, from [`files_holding_retired`]), stores its integers unsigned (format
/// versions 1-4), or holds several tracks one row group each (a barrier file of versions
/// 1-5).
fn always_due(f: &SegmentFile, retired: bool) -> bool {
    retired || !f.is_signed() || (!f.is_packed() && f.holds_several_tracks())
}

/// The retention slice a file belongs to, for packed compaction: files of different slices
/// never merge, so a slice's files retire whole.
fn file_slice(split: Split, file: &SegmentFile) -> u64 {
    match split {
        Split::Sealed(ns) => file.sealed_at_ns / ns.max(1),
        Split::None | Split::Axis(_) => 0,
    }
}

/// The data files a packed compaction rewrites (by index in `stream.files`): size-tiered
/// from the newest back within each slice, plus every file [`always_due`] (a purge: only
/// the files holding retired groups).
fn choose_files(stream: &StreamState, policy: &Compaction, split: Split, purge: bool) -> Vec<bool> {
    let files = &stream.files;
    let retired = files_holding_retired(stream);
    let mut chosen: Vec<bool> = files
        .iter()
        .zip(&retired)
        .map(|(f, &retired)| retired || (!purge && always_due(f, false)))
        .collect();
    if purge {
        return chosen;
    }
    let small = |f: &SegmentFile| f.bytes < policy.target_bytes / 2;
    // The ratio compares the rows' bytes (row groups), not footers: a barrier of a few rows
    // is mostly footer, which a merge does not add up.
    // Each file's figure worked out once, when the walk reaches it (a fleet's barrier file
    // holds an entry per track).
    let mut memo: Vec<Option<u64>> = vec![None; files.len()];
    let mut data = |i: usize| -> u64 { *memo[i].get_or_insert_with(|| files[i].row_bytes()) };
    let mut end = files.len();
    while end > 0 {
        let slice = file_slice(split, &files[end - 1]);
        let mut start = end - 1;
        while start > 0 && file_slice(split, &files[start - 1]) == slice {
            start -= 1;
        }
        let (mut newer, mut pending) = (0u64, None);
        for i in (start..end).rev() {
            let f = &files[i];
            if chosen[i] {
                newer += data(i);
            } else if !small(f) {
                break;
            } else if newer == 0 {
                // The newest file waits for an older one to join it.
                newer = data(i);
                pending = Some(i);
            } else if data(i) <= MERGE_RATIO * newer {
                chosen[i] = true;
                if let Some(p) = pending.take() {
                    chosen[p] = true;
                }
                newer += data(i);
            } else {
                break;
            }
        }
        end = start;
    }
    chosen
}

/// Keeps at most [`MAX_FAN_IN`] chosen files: the smallest (by their row groups' bytes;
/// the older first among equals), so a round never rewrites what an earlier round of the
/// same backlog wrote while smaller files wait (the backlog merges like a size-tiered tree,
/// each byte rewritten a logarithmic number of times). Answers whether it left any out. The
/// files kept may fall into several runs; each is merged on its own.
fn trim_fan_in(stream: &StreamState, chosen: &mut [bool]) -> bool {
    let mut picked: Vec<(u64, usize)> = chosen
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .map(|(i, _)| {
            let data = stream.files[i].row_bytes();
            (data, i)
        })
        .collect();
    if picked.len() <= MAX_FAN_IN {
        return false;
    }
    picked.sort_unstable();
    for &(_, i) in &picked[MAX_FAN_IN..] {
        chosen[i] = false;
    }
    true
}

/// The lowest `_seq` a planned file holds.
fn planned_first_seq(
    stream: &StreamState,
    names: &BTreeMap<u64, usize>,
    file: &PlannedFile,
) -> u64 {
    // A segment's sources are its track's groups in `_seq` order, so its first holds its
    // lowest (a source each would be a lookup per slice of a fleet's run). Were they not,
    // the bound would be wrong and the compaction's record refused (`check_compact_order`).
    file.segments
        .iter()
        .filter_map(|s| s.sources.first())
        .filter_map(|(name, group)| {
            let f = &stream.files[*names.get(name)?];
            Some(f.groups.get(*group)?.seq[0])
        })
        .min()
        .unwrap_or(u64::MAX)
}

/// The packed files the chosen files become: each contiguous run of chosen files of one
/// slice (in `_seq` order) is merged on its own, its tracks in key order, cut into files of
/// about the target size; a track larger than the target gets files of its own.
///
/// The live files stay in order of their first `_seq`, and every track's groups must stay
/// in `_seq` order across them. A run's files are replaced by files that hold only its
/// rows, so they sort after every file before the run; each must also sort before the file
/// after it. Where one would not, the run takes that file in too (`chosen` grows) and is
/// planned again.
fn packed_outputs(
    stream: &StreamState,
    policy: &Compaction,
    split: Split,
    chosen: &mut [bool],
) -> Vec<PlannedFile> {
    let files = &stream.files;
    let tracks: Vec<&TrackState> = stream.tracks.values().collect();
    // Each entry's bytes, worked out for the files a run rewrites (the others stay empty).
    let mut sizes: Vec<Vec<u64>> = vec![Vec::new(); files.len()];
    let names: BTreeMap<u64, usize> = files.iter().enumerate().map(|(i, f)| (f.name, i)).collect();
    let mut outputs = Vec::new();
    let mut i = 0;
    while i < files.len() {
        if !chosen[i] {
            i += 1;
            continue;
        }
        let slice = file_slice(split, &files[i]);
        let mut end = i + 1;
        while end < files.len() && chosen[end] && file_slice(split, &files[end]) == slice {
            end += 1;
        }
        loop {
            // Only the run's files are searched and sized: a round bounded by its fan-in
            // walks the entries it rewrites, not every live file's.
            for f in i..end {
                if sizes[f].is_empty() {
                    sizes[f] = files[f].entry_sizes();
                }
            }
            let located = stream.locate_in(&tracks, i..end);
            let planned = pack_range(stream, &located, policy, &sizes);
            let fits = files.get(end).is_none_or(|next| {
                let bound = next.first_seq();
                planned
                    .iter()
                    .all(|p| planned_first_seq(stream, &names, p) < bound)
            });
            if fits {
                outputs.extend(planned);
                break;
            }
            chosen[end] = true;
            end += 1;
            while end < files.len() && chosen[end] {
                end += 1;
            }
        }
        i = end;
    }
    outputs
}

/// The files a run of `stream.files` merges into: tracks in key order, each with its groups
/// in the run, gathered into files of about the target size. `located` holds each track's
/// live groups in the run ([`StreamState::locate_in`]), beside `stream.tracks`.
fn pack_range(
    stream: &StreamState,
    located: &[Vec<GroupRef>],
    policy: &Compaction,
    sizes: &[Vec<u64>],
) -> Vec<PlannedFile> {
    let target = policy.target_bytes.max(1);
    let mut out = Vec::new();
    let mut current = PlannedFile::default();
    let mut bytes = 0u64;
    for (track, groups) in stream.tracks.values().zip(located) {
        if groups.is_empty() {
            continue;
        }
        let len: u64 = groups.iter().map(|g| sizes[g.file][g.group]).sum();
        let source = |g: &GroupRef| (stream.files[g.file].name, g.group);
        if len <= target {
            if !current.segments.is_empty() && bytes + len > target {
                out.push(std::mem::take(&mut current));
                bytes = 0;
            }
            current.segments.push(PlannedSegment {
                track: track.labels.clone(),
                sources: groups.iter().map(source).collect(),
            });
            bytes += len;
            continue;
        }
        // A track larger than the target: files of its own, in `_seq` order.
        if !current.segments.is_empty() {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        out.extend(track_files(
            &track.labels,
            groups
                .iter()
                .map(|g| (source(g), sizes[g.file][g.group], 0)),
            target,
        ));
    }
    if !current.segments.is_empty() {
        out.push(current);
    }
    out
}

/// One track's groups, `(source, bytes, slice)` in `_seq` order, as files of their own: the
/// next file starts where a group would take the current one past `target` bytes, or where
/// the slice changes.
fn track_files(
    labels: &crate::contract::Labels,
    groups: impl IntoIterator<Item = ((u64, usize), u64, u64)>,
    target: u64,
) -> Vec<PlannedFile> {
    let mut out = Vec::new();
    let mut current: Vec<(u64, usize)> = Vec::new();
    let (mut bytes, mut slice) = (0u64, None);
    for (source, len, key) in groups {
        let crosses = slice.is_some_and(|s| s != key);
        slice = Some(key);
        if !current.is_empty() && (crosses || bytes + len > target) {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        current.push(source);
        bytes += len;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.into_iter()
        .map(|sources| PlannedFile {
            segments: vec![PlannedSegment {
                track: labels.clone(),
                sources,
            }],
        })
        .collect()
}

/// The data files a per-track compaction (under an axis-distance lifetime) rewrites: a
/// track's small segments merge size-tiered per retention slice, from the newest back, and
/// every file [`always_due`] goes; then, for every track an input holds, every later file
/// holding that track, so a track's segments stay in `_seq` order.
fn choose_per_track(
    stream: &StreamState,
    located: &[Vec<GroupRef>],
    policy: &Compaction,
    split: Split,
    purge: bool,
    sizes: &[Vec<u64>],
) -> Vec<bool> {
    let key_of = |file: &SegmentFile, group: usize| -> u64 { slice_key(split, file, group) };
    let small = |f: &SegmentFile| f.bytes < policy.target_bytes / 2;
    let by_name: BTreeMap<u64, &SegmentFile> = stream.files.iter().map(|f| (f.name, f)).collect();
    let retired = files_holding_retired(stream);
    // Per file (by index), whether it always goes.
    let always: Vec<bool> = stream
        .files
        .iter()
        .zip(&retired)
        .map(|(f, &retired)| always_due(f, retired))
        .collect();
    let mut inputs: BTreeSet<u64> = stream
        .files
        .iter()
        .enumerate()
        .filter(|&(i, _)| if purge { retired[i] } else { always[i] })
        .map(|(_, f)| f.name)
        .collect();
    for groups in located.iter().filter(|_| !purge) {
        // This track's pieces per slice, in `_seq` order: (file name, bytes, always).
        let mut slices: BTreeMap<u64, Vec<(u64, u64, bool)>> = BTreeMap::new();
        for g in groups {
            let file = &stream.files[g.file];
            let piece = (file.name, sizes[g.file][g.group], always[g.file]);
            let list = slices.entry(key_of(file, g.group)).or_default();
            match list.last_mut() {
                Some(last) if last.0 == file.name => last.1 += piece.1,
                _ => list.push(piece),
            }
        }
        for pieces in slices.values() {
            let (mut newer, mut pending) = (0u64, None);
            for &(name, bytes, forced) in pieces.iter().rev() {
                let file_small = by_name.get(&name).is_some_and(|f| small(f));
                if forced {
                    newer += bytes;
                } else if !file_small {
                    break;
                } else if newer == 0 {
                    // The newest segment waits for an older one to join it.
                    newer = bytes;
                    pending = Some(name);
                } else if bytes <= MERGE_RATIO * newer {
                    inputs.insert(name);
                    inputs.extend(pending.take());
                    newer += bytes;
                } else {
                    break;
                }
            }
        }
    }
    // Closure: for every track an input holds, every later file holding that track.
    loop {
        let mut from: BTreeMap<&[String], usize> = BTreeMap::new();
        for (i, f) in stream.files.iter().enumerate() {
            if inputs.contains(&f.name) {
                for g in f.groups.iter() {
                    from.entry(&g.track[..]).or_insert(i);
                }
            }
        }
        let before = inputs.len();
        for (i, f) in stream.files.iter().enumerate() {
            if f.groups
                .iter()
                .any(|g| from.get(&g.track[..]).is_some_and(|&s| i > s))
            {
                inputs.insert(f.name);
            }
        }
        if inputs.len() == before {
            break;
        }
    }
    stream
        .files
        .iter()
        .map(|f| inputs.contains(&f.name))
        .collect()
}

/// The retention slice of a file's group `group` under `split`.
fn slice_key(split: Split, file: &SegmentFile, group: usize) -> u64 {
    match split {
        Split::None => 0,
        Split::Sealed(ns) => file.sealed_at_ns / ns.max(1),
        Split::Axis(units) => file.groups[group]
            .axis
            .map_or(0, |[lo, _]| lo / units.max(1)),
    }
}

/// Per track, its live groups in the chosen files, split at about the target size and at
/// slice boundaries: one file each.
fn per_track_outputs(
    stream: &StreamState,
    located: &[Vec<GroupRef>],
    policy: &Compaction,
    split: Split,
    chosen: &[bool],
    sizes: &[Vec<u64>],
) -> Vec<PlannedFile> {
    let mut outputs = Vec::new();
    for (track, groups) in stream.tracks.values().zip(located) {
        let groups = groups.iter().filter(|g| chosen[g.file]).map(|g| {
            let file = &stream.files[g.file];
            (
                (file.name, g.group),
                sizes[g.file][g.group],
                slice_key(split, file, g.group),
            )
        });
        outputs.extend(track_files(&track.labels, groups, policy.target_bytes));
    }
    outputs
}

/// How many level runs merge at once, and the most a tier keeps before they do.
pub const LEVEL_FANOUT: usize = 4;

/// One run of live level files, oldest first: a barrier's partials alone (tier 0), or what
/// one compaction wrote (one file of every level, or level tables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Its files' names, in live order.
    pub files: Vec<u64>,
    /// Its tier (0 for a barrier's partials).
    pub tier: u8,
    /// Whether it is level tables (one file per level).
    pub tables: bool,
    /// Its files' bytes.
    pub bytes: u64,
    /// Whether every file of it stores its integers signed (format version 5).
    pub signed: bool,
}

/// The stream's live level files as runs, in publish order.
pub fn level_runs(levels: &[SegmentFile]) -> Vec<Run> {
    let mut runs: Vec<(Option<u64>, Run)> = Vec::new();
    for file in levels {
        let id = file.run.map(|r| r.id);
        match runs.last_mut() {
            Some((Some(run), last)) if id == Some(*run) => {
                last.files.push(file.name);
                last.bytes += file.bytes;
                last.signed &= file.is_signed();
            }
            _ => runs.push((
                id,
                Run {
                    files: vec![file.name],
                    tier: file.run.map_or(0, |r| r.tier),
                    tables: file.run.is_some_and(|r| r.level.is_some()),
                    bytes: file.bytes,
                    signed: file.is_signed(),
                },
            )),
        }
    }
    runs.into_iter().map(|(_, r)| r).collect()
}

/// The size-tiered merge the runs' tiers (oldest first) call for: the runs to merge and the
/// merged run's tier. Like carrying in a base-`LEVEL_FANOUT` counter: the runs are counted in
/// oldest first, and whenever the newest `LEVEL_FANOUT` counted share a tier t they become one
/// run of tier t + 1, which may carry on. The first carry (with its cascade) is the answer, so
/// a backlog is worked off one merge at a time. A barrier's cells are rewritten once a tier,
/// `log_FANOUT(barriers)` times in all, and at most `FANOUT − 1` runs of each tier stay live.
pub fn tiered_merge(tiers: &[u8]) -> Option<(std::ops::Range<usize>, u8)> {
    // (tier, index of its first run)
    let mut counted: Vec<(u8, usize)> = Vec::new();
    for (i, &tier) in tiers.iter().enumerate() {
        counted.push((tier, i));
        let mut carried = false;
        while counted.len() >= LEVEL_FANOUT {
            let tail = &counted[counted.len() - LEVEL_FANOUT..];
            if tail.iter().any(|(t, _)| *t != tail[0].0) {
                break;
            }
            let merged = (tail[0].0.saturating_add(1), tail[0].1);
            counted.truncate(counted.len() - LEVEL_FANOUT);
            counted.push(merged);
            carried = true;
        }
        if carried {
            let (tier, start) = counted[counted.len() - 1];
            return Some((start..i + 1, tier));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts `barriers` partials in one at a time, merging whenever the plan says so, and
    /// answers the tiers that stay and the barrier-cells rewritten (a run's size is the number
    /// of barriers it holds).
    fn count(barriers: usize) -> (Vec<u8>, usize) {
        let mut runs: Vec<(u8, usize)> = Vec::new();
        let mut rewritten = 0;
        for _ in 0..barriers {
            runs.push((0, 1));
            while let Some((merged, tier)) =
                tiered_merge(&runs.iter().map(|r| r.0).collect::<Vec<_>>())
            {
                let size: usize = runs[merged.clone()].iter().map(|r| r.1).sum();
                rewritten += size;
                runs.splice(merged, [(tier, size)]);
            }
        }
        (runs.iter().map(|r| r.0).collect(), rewritten)
    }

    #[test]
    fn level_runs_merge_like_a_base_four_counter() {
        assert_eq!(tiered_merge(&[0, 0, 0]), None);
        assert_eq!(tiered_merge(&[0, 0, 0, 0]), Some((0..4, 1)));
        assert_eq!(tiered_merge(&[1, 1, 1, 0, 0, 0, 0]), Some((0..7, 2)));
        assert_eq!(tiered_merge(&[2, 1, 0, 0, 0, 0, 0]), Some((2..6, 1)));
        // 40 = 2·16 + 2·4 + 0 in base 4.
        assert_eq!(count(40).0, [2, 2, 1, 1]);
        // Each barrier's cells are rewritten at most once per tier: log4(N) times (a cascade
        // skips the intermediate rewrites).
        for n in [16usize, 256, 4096] {
            let (tiers, rewritten) = count(n);
            let log = (n as f64).log(4.0).round() as usize;
            assert_eq!(tiers, [log as u8]);
            assert!(
                rewritten <= n * log && rewritten >= n,
                "{n} barriers: {rewritten}"
            );
        }
    }

    #[test]
    fn a_backlog_is_worked_off_oldest_first_and_ends_as_the_counter_would() {
        let mut tiers = vec![0u8; 21];
        while let Some((merged, tier)) = tiered_merge(&tiers) {
            tiers.splice(merged, [tier]);
        }
        assert_eq!(tiers, [2, 1, 0], "21 = 1·16 + 1·4 + 1");
    }
}
