//! The supervisor: the one owner of the series adapter, on a thread of its own.
//!
//! Rows arrive on the feed (unbounded: `publish` never waits); reads, seals and the stop
//! arrive on the lane (bounded) and are answered on a single-use reply, each only after every
//! ready feed has been drained, so an answer beneath a window's floor holds every row the
//! window evicted. A tick of the declared cadence drains, closes one barrier for every
//! stream, then runs the declared lifecycle. The adapter's work (staging, barriers and their
//! fsyncs, Parquet decoding) happens here, never on a publisher's thread or a caller's
//! executor.

use super::error::{ReadFailure, StopError};
use crate::contract::{
    Aggregate, Aggregated, Application, Asked, At, BeneathWindow, Bucket, Definition, ErasedRow,
    Position, Run, Series,
};
use std::marker::PhantomData;
use std::ops::Bound;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many requests may wait on the lane before a caller waits to send.
pub const LANE_DEPTH: usize = 64;
/// The most feed messages (each up to 256 rows) one drain step hands the adapter before it
/// looks at the lane again.
const DRAIN_BATCH: usize = 4096;

pub(crate) use super::table::Fed;

/// A reply the supervisor owes.
type Reply<T> = oneshot::Sender<T>;

/// What crosses the lane.
pub(crate) enum Request {
    Rows {
        stream: usize,
        track: Vec<String>,
        start: Bound<Position>,
        end: Bound<Position>,
        reply: Reply<Result<Vec<At<ErasedRow>>, ReadFailure>>,
    },
    Buckets {
        stream: usize,
        track: Vec<String>,
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
        reply: Reply<Result<Vec<Bucket>, ReadFailure>>,
    },
    Aggregate {
        stream: usize,
        track: Vec<String>,
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
        reply: Reply<Result<Vec<Aggregated>, ReadFailure>>,
    },
    /// A barrier; answers the position the stream is durable through.
    Seal {
        stream: usize,
        track: Vec<String>,
        reply: Reply<Position>,
    },
    /// Drain, close the last barrier through `flush`, and end.
    Stop { reply: Reply<Result<(), StopError>> },
}

/// What runs after each tick's barrier (a compaction, a sweep, a checkpoint).
pub type Lifecycle<S> = Box<dyn FnMut(&mut S) + Send>;

/// The supervisor's state: the adapter and what it learnt about it.
pub(crate) struct Supervisor<A: Application, S: Series<A>> {
    pub adapter: S,
    /// Adapters demoted by a later designation: still fed, sealed and flushed, never read.
    pub recording: Vec<S>,
    pub streams: Vec<Definition>,
    pub feed: mpsc::UnboundedReceiver<Fed>,
    /// The windows, whose rows not yet sent on the feed a tick sends first (so a barrier
    /// covers every row published before it), and the feed's send half to do it with.
    pub table: std::sync::Arc<super::table::Table>,
    pub feed_tx: mpsc::UnboundedSender<Fed>,
    pub lane: mpsc::Receiver<Request>,
    pub cadence: Option<Duration>,
    pub lifecycle: Option<Lifecycle<S>>,
    /// Per stream: why the adapter refused a delivery, once it did. Reads of that stream
    /// beneath the window then refuse `Unreadable` (the adapter lacks rows it was handed).
    pub failed: Vec<Option<String>>,
    pub _application: PhantomData<fn() -> A>,
}

impl<A: Application, S: Series<A>> Supervisor<A, S> {
    /// The loop: feeds first, then the lane, then the tick. Ends on `Stop`, or when every
    /// `Streams` handle is gone (then the last barrier is closed through `flush` too).
    pub async fn run(mut self) {
        let mut ticker = self.cadence.map(|every| {
            // The first barrier one period after the boot, not at it.
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        loop {
            // The lane is looked at first: a request waits only for the rows fed before it
            // (drained first, which is what the splice needs), never for the ones published
            // after it, so sustained publishing cannot starve a read. Feeds go in batches.
            tokio::select! {
                biased;
                request = self.lane.recv() => match request {
                    Some(Request::Stop { reply }) => {
                        let outcome = self.stop().await;
                        let _ = reply.send(outcome);
                        return;
                    }
                    Some(request) => {
                        self.drain();
                        self.answer(request).await;
                    }
                    None => break,
                },
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    self.table.flush_all(&self.feed_tx);
                    self.drain();
                    self.tick().await;
                }
                fed = self.feed.recv() => match fed {
                    Some(fed) => {
                        let mut batch = vec![fed];
                        while batch.len() < DRAIN_BATCH {
                            match self.feed.try_recv() {
                                Ok(fed) => batch.push(fed),
                                Err(_) => break,
                            }
                        }
                        self.deliver(batch);
                    }
                    // The supervisor holds a sender itself (ticks send windows' pending rows),
                    // so the feed never closes; the end is the lane closing.
                    None => unreachable!("the supervisor holds a feed sender"),
                },
            }
        }
        if let Err(e) = self.stop().await {
            tracing::error!(error = %e, "the last barrier failed as the streams closed");
        }
    }

    /// Hands the adapter every row fed before this call, in publish order, in batches, one
    /// run per stream stretch. Rows published meanwhile wait for the next drain: a read is
    /// answered after the rows fed before it, not after an endless stream of later ones.
    fn drain(&mut self) {
        let mut ready = self.feed.len();
        while ready > 0 {
            let mut batch = Vec::with_capacity(ready.min(DRAIN_BATCH));
            while batch.len() < ready.min(DRAIN_BATCH) {
                match self.feed.try_recv() {
                    Ok(fed) => batch.push(fed),
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                return;
            }
            ready -= batch.len();
            self.deliver(batch);
        }
    }

    fn deliver(&mut self, batch: Vec<Fed>) {
        let mut rest = batch.as_slice();
        while let Some(first) = rest.first() {
            let same = rest.iter().take_while(|f| f.stream == first.stream).count();
            let (run, tail) = rest.split_at(same);
            rest = tail;
            let stream = first.stream;
            if self.failed[stream].is_some() {
                continue;
            }
            let rows: Vec<At<ErasedRow>> =
                run.iter().flat_map(|f| f.rows.iter().cloned()).collect();
            let definition = &self.streams[stream];
            for recorder in self.recording.iter_mut().filter(|r| r.serves(definition)) {
                if let Err(e) = recorder.deliver(Run {
                    stream: definition,
                    rows: &rows,
                }) {
                    tracing::error!(stream = %definition.id, error = %e, "a recording copy refused a delivery");
                }
            }
            if !self.adapter.serves(definition) {
                continue;
            }
            if let Err(e) = self.adapter.deliver(Run {
                stream: definition,
                rows: &rows,
            }) {
                tracing::error!(stream = %definition.id, error = %e, "the adapter refused a delivery; reads of this stream beneath its window refuse from now on");
                self.failed[stream] = Some(e.to_string());
            }
        }
    }

    /// The stream's definition to ask the adapter with, or why it cannot be asked: the read
    /// is a caller error the adapter names, or the adapter refused rows of the stream and no
    /// longer holds its whole history.
    fn served(
        &self,
        stream: usize,
        track: &[String],
        asked: Asked,
    ) -> Result<Definition, ReadFailure> {
        let definition = &self.streams[stream];
        if let Some(why) = &self.failed[stream] {
            return Err(BeneathWindow::unreadable(format!(
                "the adapter refused rows of stream {:?} it was handed ({why}); it no longer holds the whole history",
                definition.id
            ))
            .into());
        }
        if let Some(why) = self.adapter.check(definition, track, asked) {
            return Err(ReadFailure::Invalid(why));
        }
        Ok(definition.clone())
    }

    async fn answer(&mut self, request: Request) {
        match request {
            Request::Rows {
                stream,
                track,
                start,
                end,
                reply,
            } => {
                let answer = match self.served(stream, &track, Asked::Rows) {
                    Ok(d) => self
                        .adapter
                        .rows(d, &track, start, end)
                        .await
                        .map_err(Into::into),
                    Err(failure) => Err(failure),
                };
                let _ = reply.send(answer);
            }
            Request::Buckets {
                stream,
                track,
                start,
                end,
                budget,
                reply,
            } => {
                let answer = match self.served(stream, &track, Asked::Buckets { budget }) {
                    Ok(d) => self
                        .adapter
                        .buckets(d, &track, start, end, budget)
                        .await
                        .map_err(Into::into),
                    Err(failure) => Err(failure),
                };
                let _ = reply.send(answer);
            }
            Request::Aggregate {
                stream,
                track,
                start,
                end,
                kind,
                reply,
            } => {
                let answer = match self.served(stream, &track, Asked::Aggregate) {
                    Ok(d) => self
                        .adapter
                        .aggregate(d, &track, start, end, kind)
                        .await
                        .map_err(Into::into),
                    Err(failure) => Err(failure),
                };
                let _ = reply.send(answer);
            }
            Request::Seal {
                stream,
                track,
                reply,
            } => {
                let definition = self.streams[stream].clone();
                let _ = reply.send(self.adapter.seal(definition, &track).await);
            }
            Request::Stop { .. } => unreachable!("handled by the loop"),
        }
    }

    /// One barrier for every stream (the first seal closes it; the rest find nothing staged
    /// and do no I/O), then the lifecycle.
    async fn tick(&mut self) {
        for definition in self.streams.clone() {
            self.adapter.seal(definition.clone(), &[]).await;
            for recorder in &mut self.recording {
                recorder.seal(definition.clone(), &[]).await;
            }
        }
        if let Some(lifecycle) = self.lifecycle.as_mut() {
            lifecycle(&mut self.adapter);
        }
    }

    async fn stop(&mut self) -> Result<(), StopError> {
        self.drain();
        let mut failed = Vec::new();
        for recorder in &mut self.recording {
            if let Err(e) = recorder.flush().await {
                failed.push(format!("a recording copy: {e}"));
            }
        }
        if let Err(e) = self.adapter.flush().await {
            failed.push(e.to_string());
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(StopError::Flush(failed.join("; ")))
        }
    }
}

/// Answers what the boot asks before anything is published: each stream's watermark (a seal
/// with nothing staged does no I/O).
/// Per stream, in table order: the position the adapter is durable through, or `None` for a
/// stream it does not serve.
pub(crate) async fn watermarks<A: Application, S: Series<A>>(
    adapter: &mut S,
    streams: &[Definition],
) -> Vec<Option<Position>> {
    let mut out = Vec::with_capacity(streams.len());
    for definition in streams {
        out.push(match adapter.serves(definition) {
            true => Some(adapter.seal(definition.clone(), &[]).await),
            false => None,
        });
    }
    out
}
