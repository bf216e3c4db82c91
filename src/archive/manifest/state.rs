//! The state every claim is derived from: records applied in order, invariants checked.
//!
//! Replay and seal share [`State::apply`]: a barrier changes what the archive claims only by
//! being a record that was appended and synced, and then applied exactly as replay would.

use super::record::{Barrier, Record, SegmentFile, Snapshot, StreamDecl, StreamSnapshot};
use crate::contract::{Position, TrackKey};
use std::collections::BTreeMap;

/// A reference to one row group: index of the file in its stream, index of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRef {
    /// Index into [`StreamState::files`].
    pub file: usize,
    /// Index into that file's groups.
    pub group: usize,
}

/// What the archive holds of one track.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrackState {
    /// The labels, outermost first.
    pub labels: Vec<String>,
    /// Its row groups in barrier order.
    pub groups: Vec<GroupRef>,
    /// Rows stored.
    pub rows: u64,
    /// The lowest axis value stored.
    pub first_axis: Option<u64>,
    /// The highest axis value stored.
    pub last_axis: Option<u64>,
    /// The raw floor: nothing beneath it is retained. Derived from retirement records only;
    /// the origin while nothing has been retired.
    pub floor: Position,
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
        }
    }

    fn add_level_file(&mut self, file: SegmentFile) -> Result<(), String> {
        let Some(ladder) = self.decl.ladder else {
            return Err(format!(
                "level file {} belongs to a stream declared without levels",
                file.path
            ));
        };
        let levels = ladder.levels as usize;
        if file.groups.len() != levels {
            return Err(format!(
                "level file {} holds {} levels; the stream declares {levels}",
                file.path,
                file.groups.len()
            ));
        }
        self.levels.push(file);
        Ok(())
    }

    fn add_file(&mut self, file: SegmentFile) -> Result<(), String> {
        let index = self.files.len();
        for (g, group) in file.groups.iter().enumerate() {
            let key = TrackKey::encode(&group.track).map_err(|e| e.to_string())?;
            let track = self.tracks.entry(key).or_insert_with(|| TrackState {
                labels: group.track.clone(),
                ..TrackState::default()
            });
            if let (Some(last), Some([low, _])) = (track.last_axis, group.axis) {
                if low < last {
                    return Err(format!(
                        "file {} group {g} moves track {:?} axis backwards ({low} < {last})",
                        file.path, group.track
                    ));
                }
            }
            track.groups.push(GroupRef {
                file: index,
                group: g,
            });
            track.rows += group.rows;
            track.last_axis = group.axis.map(|[_, high]| high).or(track.last_axis);
            track.first_axis = track.first_axis.or(group.axis.map(|[low, _]| low));
        }
        self.files.push(file);
        Ok(())
    }
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
}

impl State {
    /// Applies one record, refusing any that would break an invariant (a watermark moving
    /// back, a name reused, a barrier out of order, a stream declared twice differently).
    pub fn apply(&mut self, record: &Record) -> Result<(), String> {
        match record {
            Record::Snapshot(snapshot) => self.apply_snapshot(snapshot),
            Record::Declare(decl) => match self.streams.get(&decl.id) {
                Some(existing) if existing.decl == *decl => Ok(()),
                Some(_) => Err(format!("stream {:?} declared twice, differently", decl.id)),
                None => {
                    self.streams
                        .insert(decl.id.clone(), StreamState::new(decl.clone()));
                    Ok(())
                }
            },
            Record::Barrier(barrier) => self.apply_barrier(barrier),
        }
    }

    fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), String> {
        if self.generation != 0 || !self.streams.is_empty() || self.barriers != 0 {
            return Err("a snapshot may only start a generation".into());
        }
        self.generation = snapshot.generation;
        self.next_name = snapshot.next_name;
        self.barriers = snapshot.barriers;
        for s in &snapshot.streams {
            let mut stream = StreamState::new(s.decl.clone());
            stream.watermark = Position(s.watermark);
            stream.next_seq = s.next_seq;
            for file in &s.files {
                stream.add_file(file.clone())?;
            }
            for file in &s.levels {
                stream.add_level_file(file.clone())?;
            }
            self.streams.insert(s.decl.id.clone(), stream);
        }
        Ok(())
    }

    fn apply_barrier(&mut self, barrier: &Barrier) -> Result<(), String> {
        if barrier.barrier != self.barriers + 1 {
            return Err(format!(
                "barrier {} follows barrier {}",
                barrier.barrier, self.barriers
            ));
        }
        let mut next_name = self.next_name;
        for s in &barrier.streams {
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
            stream.watermark = Position(s.watermark);
            stream.next_seq = s.next_seq;
            stream.add_file(s.file.clone())?;
            if let Some(file) = &s.levels {
                if file.name < next_name {
                    return Err(format!(
                        "level file name {} reuses a name below {next_name}",
                        file.name
                    ));
                }
                next_name = file.name + 1;
                stream.add_level_file(file.clone())?;
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
                })
                .collect(),
        }
    }
}
