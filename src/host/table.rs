//! The boot-frozen stream table: each stream's definition and its bounded window.

use crate::contract::{At, Definition, ErasedRow, Position};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// Published rows of one stream on their way to the adapter, in publish order.
pub(crate) struct Fed {
    pub stream: usize,
    pub rows: Vec<At<ErasedRow>>,
}

/// One stream's bounded window: the newest rows, and the floor beneath which it holds
/// nothing (everything at or below the floor belongs to the tier beneath).
#[derive(Debug, Default)]
pub(crate) struct Window {
    pub(crate) capacity: usize,
    pub(crate) ring: VecDeque<At<ErasedRow>>,
    /// Rows published and not yet sent on the feed (at most `FEED_BATCH`): sent in one
    /// message when full, and before any read, seal or stop, and at every tick.
    pub(crate) pending: Vec<At<ErasedRow>>,
    pub(crate) floor: Position,
    /// The adapter's watermark was beyond the frontier the boot recovered: the tiers no
    /// longer share a coordinate, so the window alone is served (beneath it: `Unserved`).
    pub(crate) alone: bool,
    /// An adapter was designated but the boot never learnt what it holds (its supervisor
    /// died, or never started): a read that may reach beneath the ring's oldest row answers
    /// `Unserved`, never the ring alone as if it were the whole history.
    pub(crate) unknown: bool,
}

/// How many published rows travel to the supervisor in one feed message.
pub(crate) const FEED_BATCH: usize = 256;

impl Window {
    /// Sends the rows published since the last send onto the feed. Called under this
    /// window's lock, so the feed keeps each stream's publish order, and before any read
    /// takes its snapshot: every row at or beneath a floor a read sees is on the feed.
    pub(crate) fn send_pending(&mut self, stream: usize, feed: &mpsc::UnboundedSender<Fed>) {
        if !self.pending.is_empty() {
            let rows = std::mem::take(&mut self.pending);
            // A closed feed means the supervisor is gone; reads beneath answer Unserved.
            let _ = feed.send(Fed { stream, rows });
        }
    }
}

/// The boot-frozen stream table: definitions and their windows, by index.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) index: BTreeMap<String, usize>,
    pub(crate) windows: Vec<Mutex<Window>>,
}

impl Table {
    /// The table of `streams`, every window empty and standing on origin.
    pub(crate) fn new(streams: &[Definition]) -> Table {
        let mut index = BTreeMap::new();
        for (i, d) in streams.iter().enumerate() {
            index.insert(d.id.to_string(), i);
        }
        let windows = streams
            .iter()
            .map(|d| {
                Mutex::new(Window {
                    capacity: d.window.max(1),
                    ..Window::default()
                })
            })
            .collect();
        Table { index, windows }
    }

    /// Stands each window on the position its adapter is durable through, or alone when
    /// that is beyond the frontier the boot recovered. Before anything is published.
    pub(crate) fn stand(
        &self,
        streams: &[Definition],
        marks: &[Option<Position>],
        frontier: Option<Position>,
    ) {
        for ((d, window), mark) in streams.iter().zip(&self.windows).zip(marks) {
            // A stream the adapter does not serve stands alone: its window is the whole
            // served history, and beneath it nothing is (Unserved).
            let alone = match mark {
                None => true,
                Some(mark) => frontier.is_some_and(|f| *mark > f),
            };
            let mark = mark.unwrap_or(Position::ORIGIN);
            if alone && mark > Position::ORIGIN {
                tracing::warn!(stream = %d.id, watermark = %mark, frontier = %frontier.unwrap_or_default(), "the adapter is durable beyond the recovered frontier; serving the window alone");
            }
            let mut window = window.lock().unwrap_or_else(|p| p.into_inner());
            window.floor = if alone { Position::ORIGIN } else { mark };
            window.alone = alone;
        }
    }

    /// Marks every window as standing over history the boot could not learn.
    pub(crate) fn lost(&self) {
        for window in &self.windows {
            window.lock().unwrap_or_else(|p| p.into_inner()).unknown = true;
        }
    }

    /// Sends every window's pending rows onto the feed.
    pub(crate) fn flush_all(&self, feed: &mpsc::UnboundedSender<Fed>) {
        for (stream, window) in self.windows.iter().enumerate() {
            window
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send_pending(stream, feed);
        }
    }
}
