//! A minimal host playing the stream runtime's part: a bounded window per stream, the splice
//! onto the series tier beneath it, and a boot that stands each window on the watermark.
//!
//! This is not the runtime: it has no supervisor, no lane and no cadence. It exists so the
//! contract's read path — window first, floor from the same snapshot, the tier beneath
//! capped at that floor — is exercised end to end against a real adapter.

use crate::contract::{
    Application, At, BeneathWindow, Definition, ErasedRow, Position, Prefix, Run, Series, Stream,
    Tracked,
};
use std::collections::{BTreeMap, VecDeque};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

/// One stream's bounded window: the newest rows, and the floor beneath which it holds
/// nothing (everything at or below the floor belongs to the tier beneath).
#[derive(Debug, Default)]
struct Window {
    capacity: usize,
    ring: VecDeque<At<ErasedRow>>,
    floor: Position,
}

/// Why a row was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError<E: std::error::Error + 'static> {
    /// The stream was not declared at boot: the stream table is frozen there, and a window
    /// made up on the spot would stand on origin over history it knows nothing of.
    #[error("stream {0:?} was not declared at boot; declare it in the streams passed to `Streams::boot`")]
    Undeclared(&'static str),
    /// The adapter refused the delivery; nothing of the row was staged.
    #[error(transparent)]
    Adapter(E),
}

/// Streams over an optional series adapter.
pub struct Streams<A: Application, S: Series<A>> {
    adapter: Option<S>,
    windows: BTreeMap<String, Window>,
    _application: PhantomData<A>,
}

impl<A: Application, S: Series<A>> std::fmt::Debug for Streams<A, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("windows", &self.windows.len())
            .field("adapter", &self.adapter.is_some())
            .finish()
    }
}

/// A row as the type its stream was read as. A row of another type (two row types declaring
/// one stream id) is refused, never dropped from the answer.
fn typed<T: Stream>(position: Position, row: ErasedRow) -> Result<At<Arc<T>>, BeneathWindow> {
    row.downcast::<T>()
        .map(|row| At::new(position, row))
        .map_err(|_| {
            BeneathWindow::unreadable(format!(
                "the row at position {position} of stream {:?} is not a {}",
                T::ID,
                std::any::type_name::<T>()
            ))
        })
}

fn within(start: Bound<Position>, end: Bound<Position>, p: Position) -> bool {
    (match start {
        Bound::Included(s) => p >= s,
        Bound::Excluded(s) => p > s,
        Bound::Unbounded => true,
    }) && (match end {
        Bound::Included(e) => p <= e,
        Bound::Excluded(e) => p < e,
        Bound::Unbounded => true,
    })
}

impl<A: Application, S: Series<A>> Streams<A, S> {
    /// Boots: declares the streams and, with an adapter attached, stands each window on the
    /// position the adapter is durable through (a `seal` with nothing staged: no barrier).
    pub async fn boot(adapter: Option<S>, streams: &[Definition]) -> Self {
        let mut host = Streams {
            adapter,
            windows: BTreeMap::new(),
            _application: PhantomData,
        };
        for definition in streams {
            let floor = match host.adapter.as_mut() {
                Some(adapter) => adapter.seal(definition.clone(), &[]).await,
                None => Position::ORIGIN,
            };
            host.windows.insert(
                definition.id.to_string(),
                Window {
                    capacity: definition.window.max(1),
                    ring: VecDeque::new(),
                    floor,
                },
            );
        }
        host
    }

    /// Publishes one row: synchronous into the window, delivered to the adapter (which only
    /// stages it). Evicting a row raises the floor to its position. The stream table is
    /// frozen at boot: a stream not declared there is refused, nothing delivered.
    pub fn publish<T: Stream>(
        &mut self,
        position: Position,
        row: T,
    ) -> Result<(), PublishError<S::Error>> {
        let Some(window) = self.windows.get_mut(T::ID) else {
            return Err(PublishError::Undeclared(T::ID));
        };
        let at = At::new(position, Arc::new(row) as ErasedRow);
        if let Some(adapter) = self.adapter.as_mut() {
            let definition = T::definition();
            adapter
                .deliver(Run {
                    stream: &definition,
                    rows: std::slice::from_ref(&at),
                })
                .map_err(PublishError::Adapter)?;
        }
        window.ring.push_back(at);
        while window.ring.len() > window.capacity {
            if let Some(evicted) = window.ring.pop_front() {
                window.floor = window.floor.max(evicted.position);
            }
        }
        Ok(())
    }

    /// The window's floor for a stream.
    pub fn floor<T: Stream>(&self) -> Position {
        self.windows
            .get(T::ID)
            .map_or(Position::ORIGIN, |w| w.floor)
    }

    /// Makes everything staged durable; answers the position the stream is durable through.
    pub async fn seal<T: Stream>(&mut self) -> Position {
        match self.adapter.as_mut() {
            Some(adapter) => adapter.seal(T::definition(), &[]).await,
            None => Position::ORIGIN,
        }
    }

    /// Rows of the position range in publish order: the window above its floor, and at or
    /// below the floor the tier beneath, capped at the same floor — one snapshot, so the
    /// boundary is owned by exactly one tier and neither sorts.
    pub async fn query<T: Stream>(
        &mut self,
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> Result<Vec<At<Arc<T>>>, BeneathWindow> {
        self.query_labels::<T>(&[], start, end, |_| true).await
    }

    /// As [`Streams::query`], narrowed to a track or a prefix of it.
    pub async fn query_track<T: Stream + Tracked, P: Prefix<T::Track>>(
        &mut self,
        track: P,
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> Result<Vec<At<Arc<T>>>, BeneathWindow> {
        use crate::contract::TrackTuple;
        let labels = track.labels();
        let keep = labels.clone();
        self.query_labels::<T>(&labels, start, end, move |row: &T| {
            row.track().labels().starts_with(&keep)
        })
        .await
    }

    async fn query_labels<T: Stream>(
        &mut self,
        labels: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<At<Arc<T>>>, BeneathWindow> {
        let window = self.windows.get(T::ID).ok_or(BeneathWindow::Unserved)?;
        // One snapshot: the floor and the rows above it.
        let floor = window.floor;
        let mut above: Vec<At<Arc<T>>> = Vec::new();
        for at in window
            .ring
            .iter()
            .filter(|at| at.position > floor && within(start, end, at.position))
        {
            let at = typed::<T>(at.position, at.row.clone())?;
            if keep(&at.row) {
                above.push(at);
            }
        }
        let reaches_beneath = match start {
            Bound::Unbounded => true,
            Bound::Included(s) => s <= floor,
            Bound::Excluded(s) => s < floor,
        };
        if !reaches_beneath || floor == Position::ORIGIN {
            return Ok(above);
        }
        let Some(adapter) = self.adapter.as_mut() else {
            return Err(BeneathWindow::Unserved);
        };
        let cap = match end {
            Bound::Included(e) if e < floor => Bound::Included(e),
            Bound::Excluded(e) if e <= floor => Bound::Excluded(e),
            _ => Bound::Included(floor),
        };
        let beneath = adapter.rows(T::definition(), labels, start, cap).await?;
        let mut out: Vec<At<Arc<T>>> = beneath
            .into_iter()
            .map(|at| typed::<T>(at.position, at.row))
            .collect::<Result<_, _>>()?;
        out.extend(above);
        Ok(out)
    }

    /// A clean stop: closes the last barrier through the adapter's flush.
    pub async fn stop(mut self) -> Result<(), S::Error> {
        match self.adapter.as_mut() {
            Some(adapter) => adapter.flush().await,
            None => Ok(()),
        }
    }
}
