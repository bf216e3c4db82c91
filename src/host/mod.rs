//! The runtime side of the contract: bounded windows, a supervisor that owns the series
//! adapter, and the splice that answers a read from both.
//!
//! ```text
//!  publish (sync, no I/O) ──► window ring ──evicts──► floor
//!        │ feed (unbounded)
//!        ▼
//!  supervisor thread ── owns the adapter: drains feeds, answers the lane, ticks the cadence
//!        ▲ lane (bounded, single-use replies)
//!        │
//!  query / survey / fold / seal ── window above the floor, the adapter at or beneath it
//! ```
//!
//! - The stream table is frozen at boot: a stream not declared there is refused.
//! - `publish` pushes into the window and sends on the feed; the adapter's staging happens
//!   on the supervisor. A delivery the adapter refuses makes that stream's reads beneath the
//!   window refuse `Unreadable` (it no longer holds the whole history), never answer short.
//! - A read takes one snapshot of the window (its floor and the rows above it), then asks
//!   the adapter for the rest capped at that floor; the supervisor drains every ready feed
//!   first, so the rows the window evicted are staged before it answers.
//! - Once the supervisor is gone (stopped, or it panicked), a failed send and a dropped
//!   reply both answer `Unserved`: never a hang.
//! - The cadence declared at assembly closes one barrier per tick for every stream and then
//!   runs the declared lifecycle; a clean stop closes the last barrier through `flush`.

mod error;
mod supervisor;
mod table;
mod verbs;

pub use error::{PublishError, ReadFailure, StopError};

pub use supervisor::{Lifecycle, LANE_DEPTH};
pub use verbs::{Query, Seal, Survey};

use crate::contract::{
    Aggregate, Aggregated, Application, At, BeneathWindow, Bucket, Definition, ErasedRow, Position,
    Series, Stream,
};

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{Fed, Request, Supervisor};
use table::{Table, Window, FEED_BATCH};
use tokio::sync::{mpsc, oneshot};

/// The supervisor's end of the handle: the feed and the lane, and its thread.
struct Attached {
    table: Arc<Table>,
    feed: mpsc::UnboundedSender<Fed>,
    lane: mpsc::Sender<Request>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Attached {
    /// The last handle is gone: closing both channels makes the supervisor drain, close the
    /// last barrier through `flush` and end; waiting for it means the adapter (and whatever
    /// it holds, such as an archive's writer lock) is released when this returns.
    fn drop(&mut self) {
        self.table.flush_all(&self.feed);
        drop(std::mem::replace(
            &mut self.feed,
            mpsc::unbounded_channel().0,
        ));
        drop(std::mem::replace(&mut self.lane, mpsc::channel(1).0));
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Dropped on the supervisor's own thread (a handle the lifecycle closure held), it
        // cannot wait for itself: closing the lane above already ends its loop.
        if let Some(thread) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = thread.join();
        }
    }
}

/// Streams over an optional series adapter. Cheap to clone; every clone publishes into the
/// same windows and reads through the same supervisor.
pub struct Streams<A: Application> {
    table: Arc<Table>,
    attached: Option<Arc<Attached>>,
    _application: PhantomData<fn() -> A>,
}

impl<A: Application> Clone for Streams<A> {
    fn clone(&self) -> Self {
        Streams {
            table: self.table.clone(),
            attached: self.attached.clone(),
            _application: PhantomData,
        }
    }
}

impl<A: Application> std::fmt::Debug for Streams<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("streams", &self.table.index.keys().collect::<Vec<_>>())
            .field("adapter", &self.attached.is_some())
            .finish()
    }
}

/// What a runtime is assembled from: the streams, and at most one designated series
/// adapter with its sealing cadence and lifecycle.
pub struct Assembly<A: Application, S: Series<A>> {
    streams: Vec<Definition>,
    adapter: Option<S>,
    recording: Vec<S>,
    cadence: Option<Duration>,
    lifecycle: Option<Lifecycle<S>>,
    frontier: Option<Position>,
    _application: PhantomData<fn() -> A>,
}

impl<A: Application, S: Series<A> + Send + 'static> Assembly<A, S> {
    /// The frontier the runtime's boot recovered (its journal's highest position). A stream
    /// whose adapter is durable beyond it has rows the runtime's state never stood on: its
    /// window is served alone (reads beneath it answer `Unserved`) rather than spliced on a
    /// coordinate the two tiers no longer share.
    pub fn frontier(mut self, at: Position) -> Self {
        self.frontier = Some(at);
        self
    }

    /// Declares stream `T`. The table is frozen at boot.
    pub fn stream<T: Stream>(mut self) -> Self {
        self.streams.push(T::definition());
        self
    }

    /// Declares a stream by its definition (the dynamic path).
    pub fn definition(mut self, definition: Definition) -> Self {
        self.streams.push(definition);
        self
    }

    /// Designates the series adapter reads beneath the windows are served from. Zero or
    /// one: naming another demotes the one named before to an ordinary recording copy,
    /// still fed, sealed on the cadence and flushed at the stop, but no longer read.
    pub fn series(mut self, adapter: S) -> Self {
        if let Some(demoted) = self.adapter.replace(adapter) {
            self.recording.push(demoted);
        }
        self
    }

    /// One barrier per `every` for every stream, closed on the supervisor; without a
    /// cadence only `seal` and the stop close barriers.
    pub fn cadence(mut self, every: Duration) -> Self {
        self.cadence = Some(every);
        self
    }

    /// Runs after each tick's barrier, on the supervisor, with the adapter (for the archive:
    /// `|a| { a.maintain(now) … }`: sweep, compaction, offload, checkpoint). It runs where
    /// reads are answered, so a long compaction holds them back for its length; and it must
    /// not hold a `Streams` handle, which would keep the supervisor alive forever.
    pub fn lifecycle(mut self, run: impl FnMut(&mut S) + Send + 'static) -> Self {
        self.lifecycle = Some(Box::new(run));
        self
    }

    /// Boots: freezes the stream table, starts the supervisor on its own thread with the
    /// adapter, and stands each window on the position the adapter is durable through
    /// (origin for a stream it does not serve, and without an adapter).
    pub async fn boot(self) -> Streams<A> {
        let table = Arc::new(Table::new(&self.streams));
        let alone = |table: Arc<Table>| Streams {
            table,
            attached: None,
            _application: PhantomData,
        };
        let Some(mut adapter) = self.adapter else {
            return alone(table);
        };
        let frontier = self.frontier;
        let (feed_tx, feed_rx) = mpsc::unbounded_channel();
        let (lane_tx, lane_rx) = mpsc::channel(LANE_DEPTH);
        let (booted_tx, booted_rx) = oneshot::channel();
        let streams = self.streams.clone();
        let failed = vec![None; streams.len()];
        let (cadence, lifecycle, recording) = (self.cadence, self.lifecycle, self.recording);
        let (supervised, supervisor_feed) = (table.clone(), feed_tx.clone());
        let thread = std::thread::Builder::new()
            .name("series-supervisor".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        tracing::error!(error = %e, "the supervisor could not start its runtime");
                        return;
                    }
                };
                runtime.block_on(async move {
                    let marks = supervisor::watermarks(&mut adapter, &streams).await;
                    if booted_tx.send(marks).is_err() {
                        return;
                    }
                    Supervisor {
                        adapter,
                        recording,
                        streams,
                        feed: feed_rx,
                        table: supervised,
                        feed_tx: supervisor_feed,
                        lane: lane_rx,
                        cadence,
                        lifecycle,
                        failed,
                        _application: PhantomData,
                    }
                    .run()
                    .await;
                });
            });
        let thread = match thread {
            Ok(thread) => thread,
            Err(e) => {
                tracing::error!(error = %e, "the supervisor thread could not start; nothing beneath the windows is served");
                table.lost();
                return alone(table);
            }
        };
        // A supervisor that died before answering leaves every window over history it could
        // not learn: reads that may reach beneath a ring answer Unserved.
        match booted_rx.await {
            Ok(marks) => table.stand(&self.streams, &marks, frontier),
            Err(_) => table.lost(),
        }
        let attached = Attached {
            table: table.clone(),
            feed: feed_tx,
            lane: lane_tx,
            thread: Mutex::new(Some(thread)),
        };
        Streams {
            table,
            attached: Some(Arc::new(attached)),
            _application: PhantomData,
        }
    }
}

/// A read of a stream the boot did not declare: a caller error, never a refusal.
fn undeclared(id: &str) -> ReadFailure {
    ReadFailure::Invalid(format!(
        "stream {id:?} was not declared at boot; declare it in the assembly"
    ))
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

impl<A: Application> Streams<A> {
    /// Assembles a runtime over series adapter type `S` (designate one with
    /// [`Assembly::series`], or none).
    pub fn assemble<S: Series<A> + Send + 'static>() -> Assembly<A, S> {
        Assembly {
            streams: Vec::new(),
            adapter: None,
            recording: Vec::new(),
            cadence: None,
            lifecycle: None,
            frontier: None,
            _application: PhantomData,
        }
    }

    /// Boots with `adapter` (or none) over `streams`, with no cadence: the shorthand for an
    /// [`Assembly`] that only seals when asked.
    pub async fn boot<S: Series<A> + Send + 'static>(
        adapter: Option<S>,
        streams: &[Definition],
    ) -> Streams<A> {
        let mut assembly = Streams::<A>::assemble::<S>();
        for d in streams {
            assembly = assembly.definition(d.clone());
        }
        if let Some(adapter) = adapter {
            assembly = assembly.series(adapter);
        }
        assembly.boot().await
    }

    fn window(&self, id: &str) -> Option<(usize, &Mutex<Window>)> {
        let i = *self.table.index.get(id)?;
        Some((i, &self.table.windows[i]))
    }

    /// Publishes one row: into the window and onto the feed to the adapter, on this thread,
    /// with no I/O and no waiting. Evicting a row raises the floor to its position. Refused
    /// only for a stream not declared at boot.
    pub fn publish<T: Stream>(&self, position: Position, row: T) -> Result<(), PublishError> {
        let Some((stream, window)) = self.window(T::ID) else {
            return Err(PublishError::Undeclared(T::ID));
        };
        let at = At::new(position, Arc::new(row) as ErasedRow);
        let mut window = window.lock().unwrap_or_else(|p| p.into_inner());
        // Queued for the feed before it can be evicted, under the window's lock; a read
        // sends the queue before it takes its snapshot, so every row at or beneath a floor
        // it sees is on the feed ahead of its request.
        if let Some(attached) = &self.attached {
            window.pending.push(at.clone());
            if window.pending.len() >= FEED_BATCH {
                window.send_pending(stream, &attached.feed);
            }
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
        self.window(T::ID).map_or(Position::ORIGIN, |(_, w)| {
            w.lock().unwrap_or_else(|p| p.into_inner()).floor
        })
    }

    /// Sends `request` across the lane and waits for its reply; a gone supervisor answers
    /// `gone`.
    async fn ask<T>(&self, request: impl FnOnce(oneshot::Sender<T>) -> Request, gone: T) -> T {
        let Some(attached) = &self.attached else {
            return gone;
        };
        let (tx, rx) = oneshot::channel();
        if attached.lane.send(request(tx)).await.is_err() {
            return gone;
        }
        rx.await.unwrap_or(gone)
    }

    /// A barrier for everything staged, closed on the supervisor; answers the position the
    /// stream (and track) is durable through (origin without an adapter, or once it is gone).
    pub(crate) async fn seal_labels<T: Stream>(&self, track: Vec<String>) -> Position {
        let Some((stream, _)) = self.window(T::ID) else {
            return Position::ORIGIN;
        };
        // The barrier covers every row published before the seal was asked for.
        if let Some(attached) = &self.attached {
            self.table.flush_all(&attached.feed);
        }
        self.ask(
            |reply| Request::Seal {
                stream,
                track,
                reply,
            },
            Position::ORIGIN,
        )
        .await
    }

    /// Rows of the position range in publish order: the window above its floor, and at or
    /// below the floor the tier beneath, capped at the same floor — one snapshot, so the
    /// boundary is owned by exactly one tier and neither sorts. `keep` is the track
    /// selection's own equality over the window's rows; `labels` narrow the tier beneath.
    pub(crate) async fn query_labels<T: Stream>(
        &self,
        labels: Vec<String>,
        start: Bound<Position>,
        end: Bound<Position>,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<At<Arc<T>>>, ReadFailure> {
        let (stream, window) = self.window(T::ID).ok_or_else(|| undeclared(T::ID))?;
        // One snapshot: the floor and the rows above it.
        let (floor, alone, unknown, oldest, snapshot) = {
            let mut window = window.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(attached) = &self.attached {
                window.send_pending(stream, &attached.feed);
            }
            let rows: Vec<At<ErasedRow>> = window
                .ring
                .iter()
                .filter(|at| at.position > window.floor && (start, end).contains(&at.position))
                .cloned()
                .collect();
            let oldest = window.ring.front().map(|at| at.position);
            (window.floor, window.alone, window.unknown, oldest, rows)
        };
        let mut above = Vec::with_capacity(snapshot.len());
        for at in snapshot {
            let at = typed::<T>(at.position, at.row)?;
            if keep(&at.row) {
                above.push(at);
            }
        }
        if unknown {
            // Positions are not unique: only a range that starts strictly after the ring's
            // oldest row is sure to hold nothing from before the boot.
            let after_oldest = match (start, oldest) {
                (Bound::Included(s), Some(o)) => s > o,
                (Bound::Excluded(s), Some(o)) => s >= o,
                _ => false,
            };
            if !after_oldest {
                return Err(BeneathWindow::Unserved.into());
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
        if alone {
            return Err(BeneathWindow::Unserved.into());
        }
        let cap = match end {
            Bound::Included(e) if e < floor => Bound::Included(e),
            Bound::Excluded(e) if e <= floor => Bound::Excluded(e),
            _ => Bound::Included(floor),
        };
        let beneath = self
            .ask(
                |reply| Request::Rows {
                    stream,
                    track: labels,
                    start,
                    end: cap,
                    reply,
                },
                Err(BeneathWindow::Unserved.into()),
            )
            .await?;
        let mut out: Vec<At<Arc<T>>> = beneath
            .into_iter()
            .map(|at| typed::<T>(at.position, at.row))
            .collect::<Result<_, _>>()?;
        out.extend(above);
        Ok(out)
    }

    /// Display buckets of the axis range under a point budget, from the served tier alone
    /// (a survey sees what a seal made durable: seal, then survey).
    pub(crate) async fn buckets<T: Stream>(
        &self,
        track: Vec<String>,
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
    ) -> Result<Vec<Bucket>, ReadFailure> {
        let (stream, _) = self.window(T::ID).ok_or_else(|| undeclared(T::ID))?;
        self.ask(
            |reply| Request::Buckets {
                stream,
                track,
                start,
                end,
                budget,
                reply,
            },
            Err(BeneathWindow::Unserved.into()),
        )
        .await
    }

    /// A statistic of the axis range, from the served tier alone.
    pub(crate) async fn aggregate<T: Stream>(
        &self,
        track: Vec<String>,
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
    ) -> Result<Vec<Aggregated>, ReadFailure> {
        let (stream, _) = self.window(T::ID).ok_or_else(|| undeclared(T::ID))?;
        self.ask(
            |reply| Request::Aggregate {
                stream,
                track,
                start,
                end,
                kind,
                reply,
            },
            Err(BeneathWindow::Unserved.into()),
        )
        .await
    }

    /// A clean stop: the supervisor drains every ready feed, closes the last barrier
    /// through the adapter's `flush` (never `seal`), and ends; this waits for its thread.
    /// Other clones then answer `Unserved` beneath their windows.
    pub async fn stop(self) -> Result<(), StopError> {
        let Some(attached) = self.attached.clone() else {
            return Ok(());
        };
        self.table.flush_all(&attached.feed);
        let outcome = self
            .ask(|reply| Request::Stop { reply }, Err(StopError::Gone))
            .await;
        let thread = attached
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(thread) = thread {
            // The supervisor replied just before it returned: joining waits microseconds.
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        outcome
    }
}
