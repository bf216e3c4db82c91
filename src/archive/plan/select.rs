//! Which tracks and row groups a read touches: key-range scans of the catalog, and the
//! floor a range may not reach beneath. Pure.

use crate::archive::error::ReadError;
use crate::archive::format::manifest::{StreamState, TrackState};
use crate::contract::{BeneathWindow, Position, TrackKey};
use std::collections::BTreeMap;
use std::ops::Bound;

/// The tracks beneath `prefix`, by a key-range scan of the catalog, in key order.
pub(crate) fn select<'a>(
    stream: &'a StreamState,
    prefix: &TrackKey,
) -> Vec<(&'a TrackKey, &'a TrackState)> {
    beneath(&stream.tracks, prefix)
}

/// The entries of a map keyed by track whose keys lie beneath `prefix`: a key-range scan.
pub(crate) fn beneath<'a, V>(
    map: &'a BTreeMap<TrackKey, V>,
    prefix: &TrackKey,
) -> Vec<(&'a TrackKey, &'a V)> {
    match prefix.upper() {
        None => map.iter().collect(),
        Some(upper) => map.range(prefix.clone()..upper).collect(),
    }
}

/// The highest floor of the selected tracks, when the range reaches beneath it.
pub(crate) fn floor_refusal(
    tracks: &[(&TrackKey, &TrackState)],
    start: Bound<Position>,
) -> Result<(), ReadError> {
    let floor = tracks
        .iter()
        .map(|(_, t)| t.floor())
        .max()
        .unwrap_or(Position::ORIGIN);
    if floor == Position::ORIGIN {
        return Ok(());
    }
    let reaches_beneath = match start {
        Bound::Unbounded => true,
        Bound::Included(s) => s < floor,
        Bound::Excluded(s) => s.0.saturating_add(1) < floor.0,
    };
    if reaches_beneath {
        Err(ReadError::Refused(BeneathWindow::Floor {
            floor,
            axis: None,
        }))
    } else {
        Ok(())
    }
}
