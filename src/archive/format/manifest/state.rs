//! The state every claim is derived from: records applied in order, invariants checked.
//!
//! Replay and seal share [`State::apply`]: a barrier changes what the archive claims only by
//! being a record that was appended and synced, and then applied exactly as replay would.

use super::columns::{meets, UnreadGroup};
use super::record::{
    Barrier, Compact, GroupEntry, LevelFloor, RawFloor, Record, Retire, SegmentFile, Snapshot,
    StreamDecl, StreamSnapshot, TrackSnapshot,
};
use crate::archive::error::Invalid;
use crate::contract::{Labels, Position, TrackKey};
use std::collections::{BTreeMap, BTreeSet};

/// Age marks are kept one per this many nanoseconds of sealing time (an hour): a level's age
/// lifetime is honoured to within it, never early.
pub const MARK_GRAIN_NS: u64 = 3_600_000_000_000;
/// At most this many age marks per track; past it the oldest are thinned, which only ever
/// delays a retirement.
pub const MAX_MARKS: usize = 256;

/// A reference to one row group: index of the file in its stream, index of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRef {
    /// Index into [`StreamState::files`].
    pub file: usize,
    /// Index into that file's groups.
    pub group: usize,
}

/// Which tracks a read-only open catalogs: one stream's tracks beneath one selection. Replay
/// still applies and checks every record; it only leaves out of the catalog the tracks no
/// read of the scope can reach (their catalog entries, floors and age marks), which is what
/// an open of a fleet of 100,000 tracks spends its time and memory on. See
/// [`crate::archive::Config::scope`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The stream whose tracks are cataloged; no other stream's are.
    pub stream: String,
    /// The selection, labels outermost first (empty: every track of the stream).
    pub track: Vec<String>,
}

impl Scope {
    /// Whether a read of `stream` beneath `track` (labels, outermost first) stays within
    /// the scope: the same stream, and a selection at or beneath the scope's.
    pub fn covers(&self, stream: &str, track: &[String]) -> bool {
        stream == self.stream && track.starts_with(&self.track)
    }
}

/// Which of a stream's tracks its catalog holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Catalog {
    /// Every track (any open but a scoped one).
    #[default]
    All,
    /// The tracks beneath these labels (a scoped open, for its stream).
    Beneath(Vec<String>),
    /// None (a scoped open, for every other stream).
    Nothing,
}

impl Catalog {
    /// Whether the track labelled `labels` is cataloged.
    pub fn holds(&self, labels: &[String]) -> bool {
        match self {
            Catalog::All => true,
            Catalog::Beneath(prefix) => labels.starts_with(prefix),
            Catalog::Nothing => false,
        }
    }
}

/// What the archive holds of one track.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrackState {
    /// The labels, outermost first.
    pub labels: Labels,
    /// How many live row-group entries name it. Where they are is not kept per track (a
    /// fleet's catalog would hold a reference per track per barrier): the files' entries
    /// are in key order, and [`StreamState::locate`] finds them.
    pub groups: usize,
    /// Rows stored.
    pub rows: u64,
    /// The lowest axis value of the live raw rows.
    pub first_axis: Option<u64>,
    /// The lowest axis value ever stored (levels may outlive the raw rows beneath it).
    pub origin_axis: Option<u64>,
    /// The highest axis value stored.
    pub last_axis: Option<u64>,
    /// The last `_seq` of its live groups: the next group's must be higher.
    pub last_seq: Option<u64>,
    /// The raw floor (position, axis, `_seq`): nothing beneath it is retained. Derived from
    /// retirement records only; the origin while nothing has been retired.
    pub raw: RawFloor,
    /// Floors per level (empty: every level at the origin).
    pub level_floors: Vec<LevelFloor>,
    /// The whole track is retired.
    pub whole: bool,
    /// The newest barrier time that wrote this track, ns since the epoch.
    pub last_sealed_ns: u64,
    /// Age marks by hour of sealing, `(hour, [sealed_ns, axis])` in hour order: this track's
    /// rows beneath `axis` were all sealed by `sealed_ns`. (A sorted vector: most tracks hold
    /// a mark or two, and a map's node would cost every track of a fleet 300 bytes.)
    pub marks: Vec<(u64, [u64; 2])>,
}

impl TrackState {
    /// A track new to the catalog, holding nothing yet.
    fn named(labels: &Labels) -> TrackState {
        TrackState {
            labels: labels.clone(),
            ..TrackState::default()
        }
    }

    /// The raw floor as a position: no row beneath it is retained.
    pub fn floor(&self) -> Position {
        Position(self.raw.position)
    }

    /// The floor of level `k`.
    pub fn level_floor(&self, k: usize) -> LevelFloor {
        self.level_floors.get(k).copied().unwrap_or_default()
    }

    /// For a track with nothing live: the highest axis value its raw retirement passed, which
    /// new rows may not go beneath. (Rows landing in a level cell a floor has passed are kept
    /// raw; that cell stays retired, and reads of it answer the floor.)
    pub fn retired_axis(&self) -> Option<u64> {
        self.raw.axis.checked_sub(1)
    }

    /// Whether anything of this track has ever been retired.
    pub fn has_lifecycle(&self) -> bool {
        self.whole
            || self.raw != RawFloor::default()
            || self
                .level_floors
                .iter()
                .any(|f| *f != LevelFloor::default())
    }

    fn mark(&mut self, sealed_ns: u64, axis_end: u64) {
        let hour = sealed_ns / MARK_GRAIN_NS;
        let at = match self.marks.binary_search_by_key(&hour, |(h, _)| *h) {
            Ok(at) => at,
            Err(at) => {
                self.marks.insert(at, (hour, [0, 0]));
                at
            }
        };
        let slot = &mut self.marks[at].1;
        slot[0] = slot[0].max(sealed_ns);
        slot[1] = slot[1].max(axis_end);
        while self.marks.len() > MAX_MARKS {
            // Drop the second oldest: the oldest stays, so a cutoff between them answers from
            // it, which retires less, never more.
            self.marks.remove(1);
        }
    }

    /// The highest axis beneath which every row of this track was sealed at or before
    /// `cutoff_ns` (0 when none is known).
    pub fn sealed_axis_by(&self, cutoff_ns: u64) -> u64 {
        self.marks
            .iter()
            .map(|(_, mark)| mark)
            .filter(|[t, _]| *t <= cutoff_ns)
            .map(|[_, a]| *a)
            .max()
            .unwrap_or(0)
    }

    fn snapshot(&self) -> TrackSnapshot {
        TrackSnapshot {
            track: self.labels.to_vec(),
            raw: self.raw,
            levels: self.level_floors.clone(),
            whole: self.whole,
            last_sealed_ns: self.last_sealed_ns,
            marks: self.marks.iter().map(|(_, mark)| *mark).collect(),
            origin_axis: self.origin_axis,
        }
    }

    /// Whether a row group whose last `_seq` is `seq_hi` is retired.
    pub fn retires(&self, seq_hi: u64) -> bool {
        seq_hi < self.raw.seq
    }
}

/// A file naming at least one in this many of the catalog's tracks is joined with the
/// catalog in one walk ([`StreamState::index_file`]); a smaller one is searched entry by entry.
const JOIN_SHARE: usize = 8;

/// Catalogs entry `g` of `file` in its track: its age marks and origin always, its rows,
/// ranges and count of live groups unless the track's floor has retired it.
fn catalog_group(track: &mut TrackState, file: &SegmentFile, g: usize) -> Result<(), String> {
    let group = &file.groups[g];
    track.last_sealed_ns = track.last_sealed_ns.max(file.sealed_at_ns);
    if let Some([low, high]) = group.axis {
        track.mark(file.sealed_at_ns, high.saturating_add(1));
        track.origin_axis = Some(track.origin_axis.map_or(low, |o| o.min(low)));
    }
    if track.retires(group.seq[1]) {
        return Ok(());
    }
    // Rows after a whole retirement bring the track back.
    track.whole = false;
    if let (Some(last), Some([low, _])) = (track.last_axis, group.axis) {
        if low < last {
            return Err(format!(
                "file {} group {g} moves track {:?} axis backwards ({low} < {last})",
                file.path, group.track
            ));
        }
    }
    // A track's groups, across the files in order of their first `_seq`, are in `_seq` order.
    if let Some(last) = track.last_seq.filter(|last| group.seq[0] <= *last) {
        return Err(format!(
            "file {} group {g} moves track {:?} back in _seq ({} after {last})",
            file.path, group.track, group.seq[0]
        ));
    }
    track.last_seq = Some(group.seq[1]);
    track.groups += 1;
    track.rows += group.rows;
    track.last_axis = group.axis.map(|[_, high]| high).or(track.last_axis);
    track.first_axis = track.first_axis.or(group.axis.map(|[low, _]| low));
    Ok(())
}

/// Makes entry `g` of `file` name its track by the catalog's labels (equal ones), so the
/// entry's own copy is freed. Labels already shared (a barrier this handle sealed, a replay's
/// file whose labels were found in the file before) are left as they are, and the entries
/// are not touched.
fn share(cataloged: &Labels, file: &mut SegmentFile, g: usize) {
    if !Labels::ptr_eq(cataloged, &file.groups[g].track) {
        std::sync::Arc::make_mut(&mut file.groups)[g].track = cataloged.clone();
    }
}

/// A stream's durable state.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamState {
    /// The recorded declaration.
    pub decl: StreamDecl,
    /// The position through which the stream is durable.
    pub watermark: Position,
    /// The next `_seq` to assign.
    pub next_seq: u64,
    /// Live files in barrier order.
    pub files: Vec<SegmentFile>,
    /// Live level files in barrier order; row group k of each holds level k.
    pub levels: Vec<SegmentFile>,
    /// The catalog: tracks by key, so a prefix is a range scan.
    pub tracks: BTreeMap<TrackKey, TrackState>,
    /// The first level the stream stores, once a barrier decided it (format version 6):
    /// levels beneath it are computed from the raw rows when read. `None` while undecided
    /// (every level stored).
    pub levels_from: Option<u8>,
    /// The first `_seq` whose rows no level file summarises (format version 8): barriers
    /// from there on deferred their partials, and reads fold those rows' cells from the raw
    /// rows. `None`: the level files cover every row.
    pub levels_deferred_from: Option<u64>,
    /// Which tracks `tracks` holds: every one, except in a scoped open.
    pub catalog: Catalog,
    /// What [`StreamState::locate`] knows of each live file, by name, without walking its
    /// entries.
    pub facts: BTreeMap<u64, FileFacts>,
    /// Whether the replay left the slices of a file recorded by its row groups unread (a file
    /// a later record removes, format version 11): a track may then be known only from the
    /// records that name it.
    pub unread_files: bool,
}

/// What a search of a live file's entries needs to know of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileFacts {
    /// In a whole catalog, its entries are in key order (every writer lays them out so; a
    /// file that is not is scanned instead of searched). Always `false` in a scoped catalog,
    /// whose files are scanned across `within` only.
    pub ordered: bool,
    /// Its cataloged entries' highest `_seq`.
    pub last_seq: u64,
    /// In a scoped catalog, the span of entries (`[from, to)`) that name its tracks: only
    /// they are looked at. `None` in a whole catalog: every entry.
    pub within: Option<(usize, usize)>,
}

impl StreamState {
    /// A declared stream holding nothing yet.
    pub(crate) fn new(decl: StreamDecl) -> Self {
        StreamState {
            decl,
            watermark: Position::ORIGIN,
            next_seq: 0,
            files: Vec::new(),
            levels: Vec::new(),
            tracks: BTreeMap::new(),
            levels_from: None,
            levels_deferred_from: None,
            catalog: Catalog::All,
            facts: BTreeMap::new(),
            unread_files: false,
        }
    }

    /// Where each of `tracks` (tracks of this catalog) has its live row-group entries: for
    /// each, in publish order (live files in order of their first `_seq`, a file's entries
    /// in order), the entries naming it that its raw floor has not retired.
    ///
    /// The catalog keeps no reference per entry: a file's entries are in key order, so a
    /// track's are found by a search of each live file, and many tracks given in key order
    /// (a prefix, a whole stream) by one walk of each file beside them. A file naming a
    /// track is never skipped: a read that missed one would answer less than the archive
    /// holds.
    pub fn locate(&self, tracks: &[&TrackState]) -> Vec<Vec<GroupRef>> {
        self.locate_since(tracks, 0)
    }

    /// [`StreamState::locate`], of the entries whose last `_seq` is `since` or later (the
    /// ones that may hold rows from `since` on: a track's last entries). A file holding none
    /// is not looked at.
    pub fn locate_since(&self, tracks: &[&TrackState], since: u64) -> Vec<Vec<GroupRef>> {
        self.find(tracks, since, false)
    }

    /// [`StreamState::locate`] of every cataloged track, in key order (as `tracks` iterates).
    pub fn locate_all(&self) -> Vec<Vec<GroupRef>> {
        self.locate(&self.tracks.values().collect::<Vec<_>>())
    }

    /// Every entry naming each of `tracks`, retired ones too, in publish order.
    pub fn entries_of(&self, tracks: &[&TrackState]) -> Vec<Vec<GroupRef>> {
        self.find(tracks, 0, true)
    }

    /// The entries naming each of `tracks` whose last `_seq` is `since` or later, and
    /// (unless `retired`) that its raw floor has not retired.
    fn find(&self, tracks: &[&TrackState], since: u64, retired: bool) -> Vec<Vec<GroupRef>> {
        // Sized by each track's count of live groups, which a search from the start finds.
        let mut out: Vec<Vec<GroupRef>> = tracks
            .iter()
            .map(|t| Vec::with_capacity(if since == 0 { t.groups } else { 0 }))
            .collect();
        self.visit_since(tracks, since, retired, |t, g| out[t].push(g));
        out
    }

    /// Hands `visit` each entry naming one of `tracks` (its index there, and where the entry
    /// is) whose last `_seq` is `since` or later and (unless `retired`) that its raw floor has
    /// not retired: file by file in publish order, a file's entries in order. What
    /// [`StreamState::locate_since`] answers, without gathering it per track: a caller that
    /// sums per track keeps a value per track, not a list per track (at 100,000 tracks of a
    /// hundred barriers each, ten million references written all over the heap).
    pub fn visit_since(
        &self,
        tracks: &[&TrackState],
        since: u64,
        retired: bool,
        visit: impl FnMut(usize, GroupRef),
    ) {
        self.visit_within(tracks, 0..self.files.len(), since, retired, visit)
    }

    /// The live entries of `tracks` in the files `files` (indices into
    /// [`StreamState::files`]), per track in publish order: what a compaction of that run of
    /// files rewrites. Walks only those files' entries.
    pub fn locate_in(
        &self,
        tracks: &[&TrackState],
        files: std::ops::Range<usize>,
    ) -> Vec<Vec<GroupRef>> {
        let mut out: Vec<Vec<GroupRef>> = vec![Vec::new(); tracks.len()];
        self.visit_within(tracks, files, 0, false, |t, g| out[t].push(g));
        out
    }

    /// [`StreamState::visit_since`] over the files `files` alone.
    fn visit_within(
        &self,
        tracks: &[&TrackState],
        files: std::ops::Range<usize>,
        since: u64,
        retired: bool,
        mut visit: impl FnMut(usize, GroupRef),
    ) {
        let sorted = tracks.windows(2).all(|w| w[0].labels[..] < w[1].labels[..]);
        let same = |t: &TrackState, e: &GroupEntry| {
            Labels::ptr_eq(&t.labels, &e.track) || t.labels[..] == e.track[..]
        };
        let (start, end) = (files.start, files.end.min(self.files.len()));
        for (index, file) in self.files.iter().enumerate().take(end).skip(start) {
            let facts = self.facts.get(&file.name);
            if facts.is_some_and(|f| f.last_seq < since) {
                continue;
            }
            let (from, to) = facts
                .and_then(|f| f.within)
                .unwrap_or((0, file.groups.len()));
            let entries = &file.groups[..];
            let mut found = |t: usize, g: usize| {
                let seq = entries[g].seq[1];
                if seq >= since && (retired || !tracks[t].retires(seq)) {
                    visit(
                        t,
                        GroupRef {
                            file: index,
                            group: g,
                        },
                    );
                }
            };
            if facts.is_none_or(|f| !f.ordered) {
                for (g, entry) in entries.iter().enumerate().take(to).skip(from) {
                    let t = match sorted {
                        true => tracks
                            .binary_search_by(|t| t.labels[..].cmp(&entry.track[..]))
                            .ok(),
                        false => tracks.iter().position(|t| same(t, entry)),
                    };
                    if let Some(t) = t {
                        found(t, g);
                    }
                }
            } else if sorted && tracks.len() * JOIN_SHARE >= entries.len() {
                // One walk of the file's entries beside the tracks, both in key order.
                let mut t = 0;
                for (g, entry) in entries.iter().enumerate() {
                    // Cataloged entries share their track's labels: the next track is most
                    // often found by address, with no comparison.
                    if tracks
                        .get(t + 1)
                        .is_some_and(|next| Labels::ptr_eq(&next.labels, &entry.track))
                    {
                        t += 1;
                    }
                    while t < tracks.len()
                        && !same(tracks[t], entry)
                        && tracks[t].labels[..] < entry.track[..]
                    {
                        t += 1;
                    }
                    if t == tracks.len() {
                        break;
                    }
                    if same(tracks[t], entry) {
                        found(t, g);
                    }
                }
            } else {
                for (t, track) in tracks.iter().enumerate() {
                    let from = entries.partition_point(|e| e.track[..] < track.labels[..]);
                    for (g, _) in entries
                        .iter()
                        .enumerate()
                        .skip(from)
                        .take_while(|(_, e)| same(track, e))
                    {
                        found(t, g);
                    }
                }
            }
        }
    }

    /// A row group of a live file whose rows the replay could not read (format version 11)
    /// that may hold a track beneath `prefix` (labels, outermost first; empty: every track):
    /// the file, the row group and its first and last track. No track of it is cataloged.
    pub fn unreadable_beneath(
        &self,
        prefix: &[String],
    ) -> Option<(&SegmentFile, &UnreadGroup, &[String], &[String])> {
        self.files.iter().find_map(|file| {
            let elided = file.elided.as_ref()?;
            elided
                .unreadable()
                .find(|(_, first, last)| meets(prefix, first, last))
                .map(|(unread, first, last)| (file, unread, first, last))
        })
    }

    /// Every row group of a live file whose rows the replay could not read: what a writer
    /// (which must know every track) and `verify` name.
    pub fn unreadable(&self) -> Vec<(&SegmentFile, &UnreadGroup)> {
        self.files
            .iter()
            .filter_map(|f| Some((f, f.elided.as_ref()?)))
            .flat_map(|(f, e)| e.unreadable().map(move |(u, _, _)| (f, u)))
            .collect()
    }

    /// What the catalog holds of each of `names` (label tuples), in order; `None` for a
    /// track it does not hold. Names that come in key order (label tuples sort as their keys
    /// do), as a barrier's tracks do, and are many beside the catalog are found in one walk
    /// beside it, comparing labels; others (few, or out of order) by a search each, which
    /// encodes a key (at 100,000 tracks a twentieth of a fleet's first barriers).
    pub(crate) fn cataloged(&self, names: &[&[String]]) -> Vec<Option<&TrackState>> {
        let walk =
            names.len() * JOIN_SHARE >= self.tracks.len() && names.windows(2).all(|w| w[0] <= w[1]);
        if !walk {
            return names
                .iter()
                .map(|labels| {
                    let key = TrackKey::encode(labels).ok()?;
                    self.tracks.get(&key)
                })
                .collect();
        }
        let mut catalog = self.tracks.values().peekable();
        names
            .iter()
            .map(|&labels| {
                while catalog.next_if(|c| &c.labels[..] < labels).is_some() {}
                catalog.peek().copied().filter(|c| &c.labels[..] == labels)
            })
            .collect()
    }

    /// The first level the stream stores (0 while undecided): levels beneath it are
    /// answered from the raw rows.
    pub fn first_stored_level(&self) -> usize {
        self.levels_from.map_or(0, usize::from)
    }

    /// Records the first stored level a barrier decided; it never changes once recorded.
    fn decide_levels(&mut self, from: u8) -> Result<(), String> {
        let levels = self.decl.ladder.map_or(0, |l| l.levels);
        if from >= levels {
            return Err(format!(
                "stream {:?}: first stored level {from}, the ladder has {levels}",
                self.decl.id
            ));
        }
        match self.levels_from {
            Some(had) if had != from => Err(format!(
                "stream {:?}: first stored level {from} recorded after {had}",
                self.decl.id
            )),
            _ => {
                self.levels_from = Some(from);
                Ok(())
            }
        }
    }

    fn add_level_file(&mut self, file: SegmentFile) -> Result<(), String> {
        self.check_level_file(&file)?;
        self.levels.push(file);
        Ok(())
    }

    /// A level file fits the stream's ladder: a barrier's partials hold every level (group k
    /// = level k); a level table holds one declared level in at least one group.
    fn check_level_file(&self, file: &SegmentFile) -> Result<(), String> {
        let Some(ladder) = self.decl.ladder else {
            return Err(format!(
                "level file {} belongs to a stream declared without levels",
                file.path
            ));
        };
        let levels = ladder.levels as usize;
        let first = file.first_level.map_or(0, usize::from);
        match file.run.and_then(|r| r.level) {
            None if first >= levels || file.groups.len() != levels - first => Err(format!(
                "level file {} holds {} levels from level {first}; the stream declares {levels}",
                file.path,
                file.groups.len()
            )),
            Some(_) if file.first_level.is_some() => {
                Err(format!("level table {} names a first level", file.path))
            }
            Some(level) if level as usize >= levels => Err(format!(
                "level table {} holds level {level}; the stream declares {levels}",
                file.path
            )),
            Some(_) if file.groups.is_empty() => {
                Err(format!("level table {} has no row group", file.path))
            }
            _ => Ok(()),
        }
    }

    fn add_file(&mut self, mut file: SegmentFile) -> Result<(), String> {
        file.check_slices()?;
        self.unread_files |= file.elided.as_ref().is_some_and(|e| e.is_rows_form());
        self.index_file(&mut file)?;
        self.files.push(file);
        Ok(())
    }

    /// Catalogs the groups of `file` (not yet retired ones), and makes each
    /// cataloged entry share its track's labels (a track named by every barrier keeps one
    /// copy of its labels, not one per barrier).
    ///
    /// A file's entries are in track-key order (every writer lays them out so), and the
    /// catalog is a map in the same order, so a file naming a good part of the catalog is
    /// joined with it in one walk instead of one search per entry: at 100,000 tracks the
    /// searches were a quarter of an open. Entries out of key order, or a file naming few of
    /// many tracks, are looked up one by one.
    fn index_file(&mut self, file: &mut SegmentFile) -> Result<(), String> {
        let held: Vec<usize> = (0..file.groups.len())
            .filter(|&g| self.catalog.holds(&file.groups[g].track))
            .collect();
        let key = |labels: &[String]| TrackKey::encode(labels).map_err(|e| e.to_string());
        // Label tuples sort as their keys do (each label is followed by U+001F, below every
        // character a label may hold), so the walk compares labels and encodes a key only
        // for the range's ends and the tracks it brings in. Labels already shared (a barrier
        // this handle sealed names its tracks by the catalog's own) compare by address.
        let in_order = |a: &GroupEntry, b: &GroupEntry| {
            Labels::ptr_eq(&a.track, &b.track) || a.track[..] <= b.track[..]
        };
        let ordered = held
            .windows(2)
            .all(|w| in_order(&file.groups[w[0]], &file.groups[w[1]]));
        // What `locate` needs: a file of a whole catalog is searched when all its entries are
        // in key order (then `held` is all of them); a scoped catalog's is only ever asked for
        // the tracks it holds, which lie among its held entries, so only their span is
        // looked at (a scoped open of a fleet reads a few entries of a file of 100,000).
        let last_seq = held
            .iter()
            .map(|&g| file.groups[g].seq[1])
            .max()
            .unwrap_or(0);
        let facts = match self.catalog {
            Catalog::All => FileFacts {
                ordered,
                last_seq,
                within: None,
            },
            _ => FileFacts {
                ordered: false,
                last_seq,
                within: Some(match (held.first(), held.last()) {
                    (Some(&first), Some(&last)) => (first, last + 1),
                    _ => (0, 0),
                }),
            },
        };
        self.facts.insert(file.name, facts);
        let (Some(&first), Some(&last)) = (held.first(), held.last()) else {
            return Ok(());
        };
        if !ordered || held.len() * JOIN_SHARE < self.tracks.len() {
            for g in held {
                self.catalog_searched(file, g)?;
            }
            return Ok(());
        }
        // One walk over the catalog's tracks in the file's key range; the tracks the file
        // brings into the catalog are the entries the walk does not meet, cataloged after it
        // (a track's pieces stay in file order: they are adjacent, all new or all known).
        let mut new: Vec<usize> = Vec::new();
        let range = key(&file.groups[first].track)?..=key(&file.groups[last].track)?;
        let mut walk = self.tracks.range_mut(range).peekable();
        let mut at = walk.next();
        for g in held {
            let labels = &file.groups[g].track;
            let found = loop {
                let Some((_, track)) = at.as_mut() else {
                    break None;
                };
                if Labels::ptr_eq(&track.labels, labels) {
                    break Some(track);
                }
                // A barrier this handle sealed names its tracks by the catalog's own labels,
                // so the next track is found by address, with no comparison.
                if walk
                    .peek()
                    .is_some_and(|(_, next)| Labels::ptr_eq(&next.labels, labels))
                {
                    at = walk.next();
                    continue;
                }
                match track.labels[..].cmp(&labels[..]) {
                    std::cmp::Ordering::Less => at = walk.next(),
                    std::cmp::Ordering::Equal => break Some(track),
                    std::cmp::Ordering::Greater => break None,
                }
            };
            match found {
                Some(track) => {
                    catalog_group(track, file, g)?;
                    share(&track.labels, file, g);
                }
                None => new.push(g),
            }
        }
        // Many tracks new to the catalog (a fleet's first barrier, an open's first record)
        // join it in one merge of two key-ordered runs, not a search each: the walk has met
        // none of them, and they come in key order, each track's pieces adjacent.
        if new.len() * JOIN_SHARE < self.tracks.len() {
            for g in new {
                self.catalog_searched(file, g)?;
            }
            return Ok(());
        }
        let mut fresh: Vec<(TrackKey, TrackState)> = Vec::new();
        for g in new {
            let labels = &file.groups[g].track;
            let piece_of_last = fresh
                .last()
                .is_some_and(|(_, last)| last.labels[..] == labels[..]);
            if !piece_of_last {
                fresh.push((key(labels)?, TrackState::named(labels)));
            }
            let (_, track) = fresh
                .last_mut()
                .ok_or_else(|| "a track joining the catalog was lost".to_string())?;
            catalog_group(track, file, g)?;
            share(&track.labels, file, g);
        }
        let (before, joining) = (self.tracks.len(), fresh.len());
        let mut fresh: BTreeMap<TrackKey, TrackState> = fresh.into_iter().collect();
        self.tracks.append(&mut fresh);
        // A track the walk missed would have been replaced, its groups lost: a read would then
        // answer less than the archive holds. The counts tell, at no cost.
        if self.tracks.len() != before + joining {
            return Err(format!(
                "file {}: {} of its tracks new to the catalog were already in it (an internal error: nothing is served from this state)",
                file.path,
                before + joining - self.tracks.len()
            ));
        }
        Ok(())
    }

    /// Catalogs entry `g` of the file at `index` by a search of the catalog, bringing its
    /// track in when it is new.
    fn catalog_searched(&mut self, file: &mut SegmentFile, g: usize) -> Result<(), String> {
        let labels = &file.groups[g].track;
        let key = TrackKey::encode(labels).map_err(|e| e.to_string())?;
        let track = self
            .tracks
            .entry(key)
            .or_insert_with(|| TrackState::named(labels));
        catalog_group(track, file, g)?;
        share(&track.labels, file, g);
        Ok(())
    }

    /// Rebuilds the catalog's groups from `files` (kept in order of their first `_seq`),
    /// keeping every track's lifecycle state.
    fn reindex(&mut self) -> Result<(), String> {
        self.files.sort_by_key(SegmentFile::first_seq);
        for track in self.tracks.values_mut() {
            track.groups = 0;
            track.rows = 0;
            track.first_axis = None;
            track.last_axis = None;
            track.last_seq = None;
            // The age marks of a track nothing was ever retired of are what its live files
            // say, nothing more: a snapshot writes down only the marks of tracks with a
            // lifecycle, so marks kept from files a record removed would be held by the
            // handle that applied it and lost by an open from the next checkpoint (the two
            // would then retire the track at different times). Dropping them only ever
            // retires later: a compaction's output is sealed when its newest input was.
            if !track.has_lifecycle() {
                track.marks.clear();
            }
        }
        let mut files = std::mem::take(&mut self.files);
        self.facts.clear();
        for file in files.iter_mut() {
            self.index_file(file)?;
        }
        self.files = files;
        Ok(())
    }

    fn apply_retire(&mut self, retire: &Retire) -> Result<Vec<String>, String> {
        let levels = self.decl.ladder.map_or(0, |l| l.levels as usize);
        for t in retire
            .tracks
            .iter()
            .filter(|t| self.catalog.holds(&t.track))
        {
            let key = TrackKey::encode(&t.track).map_err(|e| e.to_string())?;
            // A track whose rows lie only in files a later record removes is not cataloged
            // when their slices are not read (format version 11); its floors are kept all
            // the same.
            if self.unread_files && !self.tracks.contains_key(&key) {
                self.tracks
                    .insert(key.clone(), TrackState::named(&t.track.as_slice().into()));
            }
            let track = self
                .tracks
                .get_mut(&key)
                .ok_or_else(|| format!("retirement names unknown track {:?}", t.track))?;
            if let Some(raw) = t.raw {
                if raw.position < track.raw.position
                    || raw.axis < track.raw.axis
                    || raw.seq < track.raw.seq
                {
                    return Err(format!(
                        "retirement moves track {:?}'s raw floor back",
                        t.track
                    ));
                }
                track.raw = raw;
            }
            if t.levels.len() > levels {
                return Err(format!(
                    "retirement names {} levels; the stream declares {levels}",
                    t.levels.len()
                ));
            }
            for (k, floor) in t.levels.iter().enumerate() {
                if let Some(floor) = floor {
                    if track.level_floors.len() <= k {
                        track.level_floors.resize(k + 1, LevelFloor::default());
                    }
                    if *floor < track.level_floors[k] || floor.axis < track.level_floors[k].axis {
                        return Err(format!(
                            "retirement moves track {:?}'s level {k} floor back",
                            t.track
                        ));
                    }
                    track.level_floors[k] = *floor;
                }
            }
            track.whole |= t.whole;
            prune_marks(track, levels);
        }
        let removed = self.remove_files(&retire.dropped, true)?;
        self.reindex()?;
        Ok(removed)
    }

    /// Takes the named files out of the live set (data files, and level files if asked);
    /// answers their paths.
    fn remove_files(&mut self, names: &[u64], levels_too: bool) -> Result<Vec<String>, String> {
        let mut missing: BTreeSet<u64> = names.iter().copied().collect();
        let mut removed = Vec::new();
        let mut take = |f: &SegmentFile| {
            let gone = missing.remove(&f.name);
            if gone {
                removed.push(f.path.clone());
            }
            !gone
        };
        self.files.retain(&mut take);
        if levels_too {
            self.levels.retain(&mut take);
        }
        match missing.first() {
            Some(name) => Err(format!("a record removes file {name}, which is not live")),
            None => Ok(removed),
        }
    }

    /// The rows of the live files `names` that the catalog counts (the entries their track's
    /// floor has not retired): exactly what a compaction replacing them writes, which
    /// [`crate::archive::Archive::finish_compaction`] checks before the swap is recorded. A
    /// file's entries are walked beside the catalog (both in key order; an entry out of that
    /// order is looked up). Refuses a name that is not live, or an entry naming no cataloged
    /// track.
    pub fn live_rows_in(&self, names: &[u64]) -> Result<u64, String> {
        let wanted: BTreeSet<u64> = names.iter().copied().collect();
        let same = |t: &TrackState, e: &GroupEntry| {
            Labels::ptr_eq(&t.labels, &e.track) || t.labels[..] == e.track[..]
        };
        let mut total = 0u64;
        let mut found = 0;
        for file in self.files.iter().filter(|f| wanted.contains(&f.name)) {
            found += 1;
            // From the file's first track on: a file naming few of many tracks (a track's own
            // file, under an axis-distance lifetime) walks its own part of the catalog only.
            let from = match file.groups.first() {
                Some(first) => TrackKey::encode(&first.track).map_err(|e| e.to_string())?,
                None => continue,
            };
            let mut walk = self.tracks.range(from..).peekable();
            let mut at: Option<&TrackState> = None;
            for (g, entry) in file.groups.iter().enumerate() {
                let track = match at.filter(|t| same(t, entry)) {
                    Some(track) => track,
                    None => {
                        while walk
                            .next_if(|(_, t)| !same(t, entry) && t.labels[..] < entry.track[..])
                            .is_some()
                        {}
                        match walk.next_if(|(_, t)| same(t, entry)) {
                            Some((_, track)) => track,
                            None => {
                                let key =
                                    TrackKey::encode(&entry.track).map_err(|e| e.to_string())?;
                                let track = self.tracks.get(&key).ok_or_else(|| {
                                    format!(
                                        "file {} entry {g} names track {:?}, which the catalog does not hold",
                                        file.path, entry.track
                                    )
                                })?;
                                walk = self.tracks.range(key..).peekable();
                                walk.next();
                                track
                            }
                        }
                    }
                };
                at = Some(track);
                if !track.retires(entry.seq[1]) {
                    total = total.saturating_add(entry.rows);
                }
            }
        }
        if found != wanted.len() {
            return Err(format!(
                "{} of the files named are not live",
                wanted.len() - found
            ));
        }
        Ok(total)
    }

    /// Checks, before it is recorded, that a compaction's swap keeps every track it writes in
    /// `_seq` order across the live files in order of their first `_seq` (what replaying the
    /// record checks): a swap that would not is never made durable.
    pub fn check_compact_order(&self, compact: &Compact) -> Result<(), String> {
        let removed: BTreeSet<u64> = compact.removed.iter().copied().collect();
        // Per track: (its file's first `_seq`, entry index, entry `_seq` range, file path).
        type Place<'a> = (u64, usize, [u64; 2], &'a str);
        let mut touched: BTreeMap<&[String], Vec<Place<'_>>> = BTreeMap::new();
        for file in &compact.added {
            let first = file.first_seq();
            for (i, g) in file.groups.iter().enumerate() {
                touched
                    .entry(&g.track[..])
                    .or_default()
                    .push((first, i, g.seq, &file.path));
            }
        }
        // The cataloged tracks among them, located together (they come in key order), in
        // the files the swap keeps (none when it replaces every live file).
        let mut known: Vec<(&TrackState, usize)> = Vec::new();
        let keeps_any = self.files.iter().any(|f| !removed.contains(&f.name));
        for (t, labels) in touched.keys().enumerate().filter(|_| keeps_any) {
            let key = TrackKey::encode(labels).map_err(|e| e.to_string())?;
            if let Some(track) = self.tracks.get(&key) {
                known.push((track, t));
            }
        }
        let located = self.locate(&known.iter().map(|(t, _)| *t).collect::<Vec<_>>());
        let mut first_seqs: BTreeMap<usize, u64> = BTreeMap::new();
        let mut places_of: Vec<&mut Vec<Place<'_>>> = touched.values_mut().collect();
        for ((_, t), groups) in known.iter().zip(located) {
            for r in groups {
                let f = &self.files[r.file];
                if !removed.contains(&f.name) {
                    let first = *first_seqs.entry(r.file).or_insert_with(|| f.first_seq());
                    places_of[*t].push((first, r.group, f.groups[r.group].seq, &f.path));
                }
            }
        }
        for (labels, places) in &mut touched {
            places.sort_unstable();
            for pair in places.windows(2) {
                if pair[1].2[0] <= pair[0].2[1] {
                    return Err(format!(
                        "track {labels:?}: {} (from _seq {}) would come after {} (to _seq {})",
                        pair[1].3, pair[1].2[0], pair[0].3, pair[0].2[1]
                    ));
                }
            }
        }
        Ok(())
    }

    fn apply_compact(&mut self, compact: &Compact) -> Result<Vec<String>, String> {
        if let Some(span) = compact.levels_summary {
            return self.apply_summary(compact, span);
        }
        let mut removed = self.remove_files(&compact.removed, false)?;
        for file in &compact.added {
            // Since format version 7 a compacted file packs many tracks; one that is not
            // packed holds one track.
            if !file.is_packed() && file.holds_several_tracks() {
                return Err(format!(
                    "compacted file {} holds more than one track and is not packed",
                    file.path
                ));
            }
            self.files.push(file.clone());
        }
        // Level files keep publish order: the compacted ones take the place of the first
        // file they replace.
        let mut missing: BTreeSet<u64> = compact.removed_levels.iter().copied().collect();
        let mut kept = Vec::with_capacity(self.levels.len());
        let mut placed = false;
        for file in std::mem::take(&mut self.levels) {
            if missing.remove(&file.name) {
                removed.push(file.path.clone());
                if !placed {
                    kept.extend(compact.added_levels.iter().cloned());
                    placed = true;
                }
            } else {
                kept.push(file);
            }
        }
        if !placed {
            kept.extend(compact.added_levels.iter().cloned());
        }
        if let Some(name) = missing.first() {
            return Err(format!(
                "compaction removes level file {name}, which is not live"
            ));
        }
        for file in &compact.added_levels {
            self.check_level_file(file)?;
        }
        self.levels = kept;
        self.reindex()?;
        Ok(removed)
    }
}

impl StreamState {
    /// A `compact` record with `levels_summary` (format version 8): one level file holding
    /// the cells of the deferred rows `[from, through)`, appended to the level list.
    fn apply_summary(
        &mut self,
        compact: &Compact,
        [from, through]: [u64; 2],
    ) -> Result<Vec<String>, String> {
        if self.levels_deferred_from != Some(from) {
            return Err(format!(
                "stream {:?}: a summary of deferred levels from _seq {from}, but the deferred rows start at {:?}",
                self.decl.id, self.levels_deferred_from
            ));
        }
        if through <= from || through > self.next_seq {
            return Err(format!(
                "stream {:?}: a summary of deferred levels through _seq {through}, but the deferred rows are _seq {from}..{}",
                self.decl.id, self.next_seq
            ));
        }
        if compact.added_levels.len() > 1 {
            return Err(format!(
                "stream {:?}: a summary of deferred levels adds {} level files, not one",
                self.decl.id,
                compact.added_levels.len()
            ));
        }
        if !compact.added.is_empty()
            || !compact.removed.is_empty()
            || !compact.removed_levels.is_empty()
        {
            return Err(format!(
                "stream {:?}: a summary of deferred levels may only add its level file",
                self.decl.id
            ));
        }
        // No file when every deferred measured value is null.
        for file in &compact.added_levels {
            self.add_level_file(file.clone())?;
        }
        self.levels_deferred_from = (through < self.next_seq).then_some(through);
        Ok(Vec::new())
    }
}

/// Drops marks no age lifetime can use: those at or beneath every level's floor.
fn prune_marks(track: &mut TrackState, levels: usize) {
    if levels == 0 || track.level_floors.len() < levels {
        return;
    }
    let lowest = track.level_floors.iter().map(|f| f.axis).min().unwrap_or(0);
    track.marks.retain(|(_, [_, axis])| *axis > lowest);
}

/// A file under `streams/`, as recovery judges it against the durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A live local file: kept.
    Live,
    /// A record took it out of the live set, or moved it to the cold tier (confirmed whole
    /// there): a crash came before its local deletion, so it is deleted.
    Gone,
    /// No record names it (renamed into place, its record never durable): kept as evidence.
    Evidence,
}

/// The whole archive's durable state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// Current generation.
    pub generation: u64,
    /// Next file name to claim.
    pub next_name: u64,
    /// Barriers recorded.
    pub barriers: u64,
    /// Streams by id.
    pub streams: BTreeMap<String, StreamState>,
    /// Files this generation's records took out of the live set (paths relative to the
    /// root): recovery deletes what a crash left of them instead of keeping it as evidence.
    pub obsolete: BTreeSet<String>,
    /// A scoped open's scope: the catalog holds only its tracks.
    pub scope: Option<Scope>,
    /// A replay that needs the live files alone (replication's reading of a manifest): no
    /// stream catalogs any track, and no file's slices are read from its rows.
    pub files_only: bool,
    /// Of `obsolete`, the data files recorded by their row groups (format version 11): a
    /// replay reads them for their tracks' history while they are there, so recovery deletes
    /// what a crash left of them only after a checkpoint.
    pub obsolete_rows_form: BTreeSet<String>,
}

impl State {
    /// Applies one record, refusing any that would break an invariant (a watermark moving
    /// back, a name reused, a barrier out of order, a stream declared twice differently).
    pub fn apply(&mut self, record: &Record) -> Result<(), Invalid> {
        self.apply_record(record.clone()).map_err(Invalid)
    }

    /// [`State::apply`] of a record the caller no longer needs: its files move into the
    /// state instead of being copied (replay, where a snapshot may name every file).
    pub fn apply_owned(&mut self, record: Record) -> Result<(), Invalid> {
        self.apply_record(record).map_err(Invalid)
    }

    fn apply_record(&mut self, record: Record) -> Result<(), String> {
        match record {
            Record::Snapshot(snapshot) => self.apply_snapshot(snapshot),
            Record::Barrier(barrier) => self.apply_barrier(barrier),
            other => self.apply_other(&other),
        }
    }

    fn apply_other(&mut self, record: &Record) -> Result<(), String> {
        match record {
            Record::Snapshot(_) | Record::Barrier(_) => {
                Err("a snapshot or barrier is applied by value (State::apply_record)".into())
            }
            Record::Declare(decl) => match self.streams.get(&decl.id) {
                Some(existing) if existing.decl == *decl => Ok(()),
                Some(_) => Err(format!("stream {:?} declared twice, differently", decl.id)),
                None => {
                    let stream = self.new_stream(decl.clone());
                    self.streams.insert(decl.id.clone(), stream);
                    Ok(())
                }
            },
            Record::Retire(retire) => {
                self.note_rows_form(&retire.stream, &retire.dropped);
                let removed = self.stream_mut(&retire.stream)?.apply_retire(retire)?;
                self.obsolete.extend(removed);
                Ok(())
            }
            Record::Compact(compact) => {
                if compact.next_name < self.next_name {
                    return Err("a compaction moves next_name back".into());
                }
                // Names were reserved when the compaction was planned, so barriers recorded
                // since may hold higher ones; a name must still be new to the live set.
                let live: BTreeSet<u64> = self.live_files().map(|f| f.name).collect();
                for file in compact.added.iter().chain(&compact.added_levels) {
                    if live.contains(&file.name) {
                        return Err(format!("compacted file name {} is already live", file.name));
                    }
                    if file.name >= compact.next_name {
                        return Err(format!(
                            "compacted file name {} is not below the record's next_name",
                            file.name
                        ));
                    }
                }
                self.note_rows_form(&compact.stream, &compact.removed);
                let removed = self.stream_mut(&compact.stream)?.apply_compact(compact)?;
                self.obsolete.extend(removed);
                self.next_name = compact.next_name;
                Ok(())
            }
            Record::Offload(offload) => {
                let streams = &mut self.streams;
                let obsolete = &mut self.obsolete;
                let stream = streams.get_mut(&offload.stream).ok_or_else(|| {
                    format!("record names undeclared stream {:?}", offload.stream)
                })?;
                for moved in &offload.files {
                    let file = stream
                        .files
                        .iter_mut()
                        .chain(stream.levels.iter_mut())
                        .find(|f| f.name == moved.name)
                        .ok_or_else(|| {
                            format!("offload names file {} which is not live", moved.name)
                        })?;
                    if file.cold.is_some() {
                        return Err(format!("file {} is already in the cold tier", moved.name));
                    }
                    if !moved.url.ends_with(&format!("/{}", file.path)) {
                        return Err(format!(
                            "offload URL {:?} does not end with the file's path {:?}",
                            moved.url, file.path
                        ));
                    }
                    file.cold = Some(moved.url.clone());
                    // Its local copy is deleted after the record: what a crash leaves of it
                    // is deleted by recovery, never served.
                    obsolete.insert(file.path.clone());
                }
                Ok(())
            }
        }
    }

    /// Notes which of the files `names` of stream `id`, about to leave the live set, are
    /// recorded by their row groups ([`State::obsolete_rows_form`]).
    fn note_rows_form(&mut self, id: &str, names: &[u64]) {
        if let Some(stream) = self.streams.get(id) {
            let paths = stream
                .files
                .iter()
                .filter(|f| {
                    f.format == Some(super::columns::ROWS_FORMAT) && names.contains(&f.name)
                })
                .map(|f| f.path.clone());
            self.obsolete_rows_form.extend(paths);
        }
    }

    /// A declared stream holding nothing yet, cataloging what the scope asks of it.
    fn new_stream(&self, decl: StreamDecl) -> StreamState {
        StreamState {
            catalog: self.catalog_of(&decl.id),
            ..StreamState::new(decl)
        }
    }

    /// Which tracks of stream `id` this state catalogs.
    pub fn catalog_of(&self, id: &str) -> Catalog {
        match &self.scope {
            _ if self.files_only => Catalog::Nothing,
            None => Catalog::All,
            Some(scope) if scope.stream == id => Catalog::Beneath(scope.track.clone()),
            Some(_) => Catalog::Nothing,
        }
    }

    fn stream_mut(&mut self, id: &str) -> Result<&mut StreamState, String> {
        self.streams
            .get_mut(id)
            .ok_or_else(|| format!("record names undeclared stream {id:?}"))
    }

    fn apply_snapshot(&mut self, snapshot: Snapshot) -> Result<(), String> {
        if self.generation != 0 || !self.streams.is_empty() || self.barriers != 0 {
            return Err("a snapshot may only start a generation".into());
        }
        self.generation = snapshot.generation;
        self.next_name = snapshot.next_name;
        self.barriers = snapshot.barriers;
        for s in snapshot.streams {
            let mut stream = self.new_stream(s.decl.clone());
            stream.watermark = Position(s.watermark);
            stream.next_seq = s.next_seq;
            if let Some(from) = s.levels_from {
                stream.decide_levels(from)?;
            }
            if let Some(from) = s.levels_deferred_from {
                if from >= s.next_seq {
                    return Err(format!(
                        "stream {:?}: levels deferred from _seq {from}, but the next _seq is {}",
                        s.decl.id, s.next_seq
                    ));
                }
                stream.levels_deferred_from = Some(from);
            }
            for t in s.tracks.iter().filter(|t| stream.catalog.holds(&t.track)) {
                let key = TrackKey::encode(&t.track).map_err(|e| e.to_string())?;
                let track = stream.tracks.entry(key).or_insert_with(|| TrackState {
                    labels: t.track.as_slice().into(),
                    ..TrackState::default()
                });
                track.raw = t.raw;
                track.level_floors = t.levels.clone();
                track.whole = t.whole;
                track.last_sealed_ns = t.last_sealed_ns;
                track.origin_axis = t.origin_axis;
                for &[sealed, axis] in &t.marks {
                    track.mark(sealed, axis);
                }
            }
            for file in s.files {
                stream.add_file(file)?;
            }
            for file in s.levels {
                stream.add_level_file(file)?;
            }
            self.streams.insert(s.decl.id, stream);
        }
        Ok(())
    }

    fn apply_barrier(&mut self, barrier: Barrier) -> Result<(), String> {
        if barrier.barrier != self.barriers + 1 {
            return Err(format!(
                "barrier {} follows barrier {}",
                barrier.barrier, self.barriers
            ));
        }
        let mut next_name = self.next_name;
        for s in barrier.streams {
            let stream = self
                .streams
                .get_mut(&s.stream)
                .ok_or_else(|| format!("barrier names undeclared stream {:?}", s.stream))?;
            if s.watermark < stream.watermark.0 || s.next_seq < stream.next_seq {
                return Err(format!("barrier moves stream {:?} backwards", s.stream));
            }
            if s.file.name < next_name {
                return Err(format!(
                    "file name {} reuses a name below {next_name}",
                    s.file.name
                ));
            }
            next_name = s.file.name + 1;
            if s.levels_deferred && s.levels.is_some() {
                return Err(format!(
                    "barrier {}: stream {:?} both defers its level partials and writes them",
                    barrier.barrier, s.stream
                ));
            }
            if s.levels.is_some() && stream.levels_deferred_from.is_some() {
                return Err(format!(
                    "barrier {}: stream {:?} writes level partials while earlier rows await theirs",
                    barrier.barrier, s.stream
                ));
            }
            if s.levels_deferred
                && (stream.decl.ladder.is_none() || stream.decl.measured.is_empty())
            {
                return Err(format!(
                    "barrier {}: stream {:?} defers level partials it has no ladder or measured field for",
                    barrier.barrier, s.stream
                ));
            }
            if s.levels_deferred && stream.levels_deferred_from.is_none() {
                // The barrier's own rows start at the stream's previous next `_seq`.
                stream.levels_deferred_from = Some(stream.next_seq);
            }
            stream.watermark = Position(s.watermark);
            stream.next_seq = s.next_seq;
            if let Some(from) = s.levels_from {
                stream.decide_levels(from)?;
            }
            stream.add_file(s.file)?;
            if let Some(file) = s.levels {
                if file.name < next_name {
                    return Err(format!(
                        "level file name {} reuses a name below {next_name}",
                        file.name
                    ));
                }
                next_name = file.name + 1;
                stream.add_level_file(file)?;
            }
        }
        if barrier.next_name < next_name {
            return Err("barrier's next_name is below a name it used".into());
        }
        self.next_name = barrier.next_name;
        self.barriers = barrier.barrier;
        Ok(())
    }

    /// Every file the state names, data and level files of every stream: exactly the
    /// committed set, no more and no less.
    pub fn live_files(&self) -> impl Iterator<Item = &SegmentFile> {
        self.streams
            .values()
            .flat_map(|s| s.files.iter().chain(&s.levels))
    }

    /// What recovery does with a file found under `streams/` (a path relative to the root),
    /// given this state; one rule for recovery and for what `repair` plans. Build it once
    /// and ask it per file.
    pub fn leftovers(&self) -> impl Fn(&str) -> Leftover + '_ {
        let mut local = BTreeSet::new();
        let mut cold = BTreeSet::new();
        for f in self.live_files() {
            if f.cold.is_some() {
                cold.insert(f.path.as_str());
            } else {
                local.insert(f.path.as_str());
            }
        }
        move |path: &str| {
            if local.contains(path) {
                Leftover::Live
            } else if cold.contains(path) || self.obsolete.contains(path) {
                Leftover::Gone
            } else {
                Leftover::Evidence
            }
        }
    }

    /// The snapshot that starts a new generation holding exactly this state.
    pub fn snapshot(&self, generation: u64) -> Snapshot {
        Snapshot {
            generation,
            next_name: self.next_name,
            barriers: self.barriers,
            streams: self
                .streams
                .values()
                .map(|s| StreamSnapshot {
                    decl: s.decl.clone(),
                    watermark: s.watermark.0,
                    next_seq: s.next_seq,
                    files: s.files.clone(),
                    levels: s.levels.clone(),
                    tracks: s
                        .tracks
                        .values()
                        .filter(|t| t.has_lifecycle())
                        .map(TrackState::snapshot)
                        .collect(),
                    levels_from: s.levels_from,
                    levels_deferred_from: s.levels_deferred_from,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::format::manifest::columns::{GroupEntry, Span};

    fn stream() -> StreamState {
        StreamState::new(StreamDecl {
            id: "m".into(),
            columns: Vec::new(),
            track: vec!["host".into(), "metric".into()],
            axis: Some("ts".into()),
            measured: Vec::new(),
            ladder: None,
        })
    }

    /// A file of one entry of `rows` rows per track, in the order given, `_seq` from `seq`.
    fn file(name: u64, tracks: &[(usize, usize)], seq: u64, rows: u64) -> SegmentFile {
        let groups = tracks
            .iter()
            .enumerate()
            .map(|(i, &(h, m))| {
                let lo = seq + i as u64 * rows;
                GroupEntry {
                    track: vec![format!("h{h:03}"), format!("m{m:02}")].into(),
                    rows,
                    position: [lo, lo + rows - 1],
                    axis: Some([name * 1_000 + i as u64, name * 1_000 + i as u64]),
                    seq: [lo, lo + rows - 1],
                    span: Span {
                        offset: 4 + i as u64 * 10,
                        len: 10,
                        crc32c: 0,
                    },
                    last_track: None,
                    slice: None,
                }
            })
            .collect::<Vec<_>>()
            .into();
        SegmentFile {
            name,
            path: format!("f{name}"),
            bytes: 0,
            barrier: name,
            sealed_at_ns: name,
            footer: Span {
                offset: 0,
                len: 0,
                crc32c: 0,
            },
            groups,
            cold: None,
            run: None,
            format: None,
            first_level: None,
            elided: None,
        }
    }

    /// The catalog as the entry-by-entry search builds it, for the same files.
    fn searched(files: &[SegmentFile]) -> BTreeMap<TrackKey, TrackState> {
        let mut tracks: BTreeMap<TrackKey, TrackState> = BTreeMap::new();
        for file in files {
            for (g, group) in file.groups.iter().enumerate() {
                let key = TrackKey::encode(&group.track).expect("labels");
                let track = tracks.entry(key).or_insert_with(|| TrackState {
                    labels: group.track.clone(),
                    ..TrackState::default()
                });
                catalog_group(track, file, g).expect("in order");
            }
        }
        tracks
    }

    /// A barrier of every track of 40 hosts x 5 metrics; one of a dense part with new tracks
    /// among known ones and a track cut in two pieces (joined); a small one (searched); one
    /// out of key order (searched). Each made on its own, as decoding makes them: every file
    /// holds its own copy of every label tuple.
    fn mixed_files() -> Vec<SegmentFile> {
        let all: Vec<(usize, usize)> = (0..40).flat_map(|h| (0..5).map(move |m| (h, m))).collect();
        let mut dense: Vec<(usize, usize)> =
            (10..30).flat_map(|h| (0..7).map(move |m| (h, m))).collect();
        // A known track cut in two, and a track new to the catalog cut in two.
        dense.insert(3, dense[3]);
        dense.insert(6, dense[6]);
        vec![
            file(0, &all, 0, 2),
            file(1, &dense, 1_000, 1),
            file(2, &[(5, 1), (39, 4)], 2_000, 3),
            file(3, &[(7, 2), (2, 0), (45, 1)], 3_000, 1),
        ]
    }

    #[test]
    fn a_file_joined_with_the_catalog_catalogs_what_a_search_would() {
        let files = mixed_files();
        let mut joined = stream();
        for f in &files {
            joined.add_file(f.clone()).expect("in order");
        }
        let searched = searched(&files);
        assert_eq!(joined.tracks.len(), 40 * 5 + 20 * 2 + 1);
        assert_eq!(joined.tracks, searched);
        let key = TrackKey::encode(&["h010", "m03"]).expect("labels");
        assert_eq!(
            joined.tracks[&key].groups, 3,
            "the piece cut in two counts twice"
        );
        let key = TrackKey::encode(&["h010", "m05"]).expect("labels");
        assert_eq!(
            joined.tracks[&key].groups, 2,
            "a new track's piece cut in two counts twice"
        );
    }

    /// What `locate` must answer, by a plain scan of every live file's every entry.
    fn scanned(s: &StreamState, track: &TrackState, since: u64, retired: bool) -> Vec<GroupRef> {
        let mut out = Vec::new();
        for (file, f) in s.files.iter().enumerate() {
            for (group, g) in f.groups.iter().enumerate() {
                let live = retired || !track.retires(g.seq[1]);
                if g.track[..] == track.labels[..] && g.seq[1] >= since && live {
                    out.push(GroupRef { file, group });
                }
            }
        }
        out
    }

    /// A track's live groups are found whether its files are searched (a few tracks asked
    /// for), walked beside many tracks in key order, or walked because they are out of key
    /// order; retired entries only when asked for, and from a `_seq` on only those that
    /// reach it. None is ever missed: a read would answer less than the archive holds.
    #[test]
    fn a_tracks_groups_are_located_alike_searched_walked_or_scanned() {
        let mut s = stream();
        for f in mixed_files() {
            s.add_file(f).expect("in order");
        }
        assert_eq!(
            s.facts.values().filter(|f| !f.ordered).count(),
            1,
            "the file out of key order is known"
        );
        // Some tracks' raw floors pass their first file's entries.
        for (i, track) in s.tracks.values_mut().enumerate() {
            if i % 3 == 0 {
                track.raw.seq = 1_000;
            }
        }
        s.reindex().expect("reindex");
        let all: Vec<&TrackState> = s.tracks.values().collect();
        let every = s.locate_all();
        let some: Vec<&TrackState> = all.iter().copied().step_by(7).collect();
        let mut shuffled = some.clone();
        shuffled.reverse();
        for (asked, answers) in [
            (&all, s.locate(&all)),
            (&some, s.locate(&some)),
            (&shuffled, s.locate(&shuffled)),
        ] {
            for (track, groups) in asked.iter().zip(&answers) {
                assert_eq!(groups, &scanned(&s, track, 0, false), "{:?}", track.labels);
            }
        }
        assert_eq!(every, s.locate(&all));
        let mut found = 0;
        for (track, groups) in all.iter().zip(&every) {
            assert_eq!(track.groups, groups.len(), "{:?}", track.labels);
            assert_eq!(s.locate(&[track]), std::slice::from_ref(groups));
            found += groups.len();
        }
        assert!(found > 150, "most entries are live: {found}");
        for (track, groups) in all.iter().zip(s.entries_of(&all)) {
            assert_eq!(groups, scanned(&s, track, 0, true), "{:?}", track.labels);
        }
        for since in [
            0, 399, 999, 1_000, 1_050, 1_141, 2_001, 2_005, 3_000, 3_002, 5_000,
        ] {
            for (track, groups) in all.iter().zip(s.locate_since(&all, since)) {
                assert_eq!(groups, scanned(&s, track, since, false), "from {since}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Over random archives: files holding random tracks of a random fleet (some tracks
        /// cut in two pieces, some files out of key order), random raw floors, a whole or a
        /// scoped catalog, a random selection in key order or not, and a `_seq` bound
        /// (random, or a file's last `_seq`), every way `locate` answers is what a plain scan
        /// of every entry answers.
        #[test]
        fn located_groups_are_what_a_scan_finds(
            hosts in 1usize..60,
            metrics in 1usize..5,
            files in proptest::collection::vec(
                (proptest::collection::vec(0u8..4, 0..300), proptest::prelude::any::<bool>()),
                1..8,
            ),
            floors in proptest::collection::vec(0u64..80_000, 0..40),
            picked in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..300),
            shuffled in proptest::prelude::any::<bool>(),
            since in 0u64..80_000,
            at_a_file in proptest::option::of(0usize..8),
            scope in proptest::option::of(0usize..60),
            run in (0usize..8, 0usize..9),
        ) {
            let fleet: Vec<(usize, usize)> =
                (0..hosts).flat_map(|h| (0..metrics).map(move |m| (h, m))).collect();
            let mut s = stream();
            // A scoped open catalogs one host's tracks.
            if let Some(h) = scope {
                s.catalog = Catalog::Beneath(vec![format!("h{h:03}")]);
            }
            for (i, (pieces, backwards)) in files.iter().enumerate() {
                // Each track of the fleet: absent (0), one piece (1, 2) or two (3).
                let mut held: Vec<(usize, usize)> = Vec::new();
                for (t, &n) in fleet.iter().zip(pieces) {
                    match n {
                        0 => {}
                        3 => held.extend([*t, *t]),
                        _ => held.push(*t),
                    }
                }
                if *backwards {
                    // Out of key order (a track's pieces made one, so its `_seq` stays in
                    // order).
                    held.dedup();
                    held.reverse();
                }
                s.add_file(file(i as u64, &held, i as u64 * 10_000, 1)).expect("in order");
            }
            for (track, floor) in s.tracks.values_mut().zip(&floors) {
                track.raw.seq = *floor;
            }
            s.reindex().expect("reindex");
            // A bound at a file's last `_seq` keeps that file's last entry.
            let since = match at_a_file.and_then(|i| s.files.get(i)) {
                Some(f) => f.groups.iter().map(|g| g.seq[1]).max().unwrap_or(since),
                None => since,
            };
            let all: Vec<&TrackState> = s.tracks.values().collect();
            let mut asked: Vec<&TrackState> = all
                .iter()
                .zip(picked.iter().chain(std::iter::repeat(&true)))
                .filter(|(_, &p)| p)
                .map(|(t, _)| *t)
                .collect();
            if shuffled {
                asked.reverse();
            }
            for (track, groups) in asked.iter().zip(s.locate_since(&asked, since)) {
                proptest::prop_assert_eq!(groups, scanned(&s, track, since, false));
            }
            for (track, groups) in asked.iter().zip(s.entries_of(&asked)) {
                proptest::prop_assert_eq!(groups, scanned(&s, track, 0, true));
            }
            // A run of files, as a compaction plans one: the same entries, in it.
            let run = {
                let start = run.0.min(s.files.len());
                start..run.1.clamp(start, s.files.len())
            };
            let in_run = s.locate_in(&asked, run.clone());
            for (track, groups) in all.iter().zip(s.locate_all()) {
                proptest::prop_assert_eq!(track.groups, groups.len());
                proptest::prop_assert_eq!(&groups, &scanned(&s, track, 0, false));
                let within: Vec<GroupRef> =
                    groups.iter().filter(|g| run.contains(&g.file)).copied().collect();
                let one = s.locate_in(&[*track], run.clone()).pop().unwrap_or_default();
                proptest::prop_assert_eq!(one, within.clone());
                if let Some(i) = asked.iter().position(|t| std::ptr::eq(*t, *track)) {
                    proptest::prop_assert_eq!(&in_run[i], &within);
                }
            }
        }
    }

    #[test]
    fn every_cataloged_entry_shares_its_tracks_labels_walked_or_searched() {
        let mut s = stream();
        for f in mixed_files() {
            s.add_file(f).expect("in order");
        }
        let mut entries = 0;
        for f in &s.files {
            for g in f.groups.iter() {
                let key = TrackKey::encode(&g.track).expect("labels");
                let track = &s.tracks[&key];
                assert!(
                    Labels::ptr_eq(&g.track, &track.labels),
                    "file {} names {:?} by a copy of its own",
                    f.path,
                    g.track
                );
                entries += 1;
            }
        }
        assert_eq!(entries, 200 + 142 + 2 + 3);
        // A retirement's reindex keeps them shared.
        s.reindex().expect("reindex");
        assert!(s.files.iter().all(|f| f.groups.iter().all(|g| {
            let key = TrackKey::encode(&g.track).expect("labels");
            Labels::ptr_eq(&g.track, &s.tracks[&key].labels)
        })));
    }

    /// The catalog answers the same for names found by the walk beside it (many, in key
    /// order) as by a search each (few, or out of order): tracks it holds and tracks it does
    /// not, before, between and after its own.
    #[test]
    fn names_are_found_alike_walked_or_searched() {
        let mut s = stream();
        let held: Vec<(usize, usize)> = (10..40)
            .step_by(3)
            .flat_map(|h| (0..3).map(move |m| (h, m)))
            .collect();
        s.add_file(file(0, &held, 0, 1)).expect("in order");
        let label = |(h, m): (usize, usize)| vec![format!("h{h:03}"), format!("m{m:02}")];
        let names: Vec<Vec<String>> = (0..45)
            .flat_map(|h| (0..4).map(move |m| (h, m)))
            .map(label)
            .collect();
        let searched = |names: &[Vec<String>]| -> Vec<Option<u64>> {
            names
                .iter()
                .map(|n| {
                    let key = TrackKey::encode(n).expect("labels");
                    s.tracks.get(&key).map(|t| t.rows)
                })
                .collect()
        };
        let found = |names: &[Vec<String>]| -> Vec<Option<u64>> {
            let refs: Vec<&[String]> = names.iter().map(Vec::as_slice).collect();
            s.cataloged(&refs)
                .into_iter()
                .map(|t| t.map(|t| t.rows))
                .collect()
        };
        // Walked: many, in key order.
        assert_eq!(found(&names), searched(&names));
        assert_eq!(found(&names).iter().flatten().count(), held.len());
        // Searched: out of key order, and few.
        let reversed: Vec<Vec<String>> = names.iter().rev().cloned().collect();
        assert_eq!(found(&reversed), searched(&reversed));
        let few = [label((13, 0)), label((13, 3)), label((14, 0))];
        assert_eq!(found(&few), [Some(1), None, None]);
    }

    /// Tracks a file brings into the catalog in one merge never replace a track already in
    /// it: a catalog whose labels disagree with its keys (so the walk cannot meet the track)
    /// is refused, not quietly overwritten.
    #[test]
    fn a_merge_that_would_replace_a_cataloged_track_is_refused() {
        let all: Vec<(usize, usize)> = (0..20).map(|h| (h, 0)).collect();
        let mut s = stream();
        let key = TrackKey::encode(&["h005", "m00"]).expect("labels");
        s.tracks.insert(
            key,
            TrackState {
                labels: vec!["zz".to_string()].into(),
                ..TrackState::default()
            },
        );
        let err = s.add_file(file(0, &all, 0, 1)).expect_err("replaced");
        assert!(
            err.contains("1 of its tracks new to the catalog were already in it"),
            "{err}"
        );
    }

    #[test]
    fn a_joined_file_that_moves_a_track_back_is_refused_naming_it() {
        let all: Vec<(usize, usize)> = (0..20).map(|h| (h, 0)).collect();
        let mut s = stream();
        s.add_file(file(0, &all, 100, 1)).expect("first");
        let err = s.add_file(file(1, &all, 50, 1)).expect_err("back in _seq");
        assert!(
            err.contains("moves track [\"h000\", \"m00\"] back in _seq"),
            "{err}"
        );
    }

    #[test]
    fn label_tuples_sort_as_their_keys_do() {
        let tuples: Vec<Vec<String>> = [
            &["a"][..],
            &["a", "b"],
            &["a!"],
            &["a", "a"],
            &["a", ""],
            &[""],
            &["", "x"],
            &["a b"],
            &["é"],
            &["e\u{301}"],
            &["\u{10FFFF}"],
            &["z", "a", "a", "a"],
            &[],
        ]
        .iter()
        .map(|t| t.iter().map(|l| l.to_string()).collect())
        .collect();
        let mut by_labels = tuples.clone();
        by_labels.sort();
        let mut by_keys = tuples.clone();
        by_keys.sort_by_key(|t| TrackKey::encode(t).expect("labels"));
        assert_eq!(by_labels, by_keys);
    }

    #[test]
    fn a_joined_file_naming_a_label_with_a_control_character_is_refused() {
        let all: Vec<(usize, usize)> = (0..20).map(|h| (h, 0)).collect();
        let mut s = stream();
        s.add_file(file(0, &all, 0, 1)).expect("first");
        let mut bad = file(1, &all, 100, 1);
        let groups = std::sync::Arc::make_mut(&mut bad.groups);
        groups[7].track = vec![groups[7].track[0].clone(), "m\u{7}".into()].into();
        let err = s.add_file(bad).expect_err("a control character");
        assert!(err.contains("control character U+0007"), "{err}");
    }
}
