//! The typed verbs, spelled as the spec writes them:
//!
//! ```text
//! streams.query::<Capture>(range).track((run, probe)).as_of(at).await?;   // rows
//! streams.survey::<Capture>(axis).track((run, probe)).budget(400).await?; // buckets
//! streams.survey::<Capture>(axis).fold(Aggregate::Mean).await?;           // statistics
//! streams.seal::<Capture>().track((run, probe)).await;                    // Position
//! ```
//!
//! Every caller error the types can rule out does not compile: `.track(..)` exists only on a
//! tracked stream and takes the declared tuple or a prefix of it (component types and depth
//! checked); a survey exists only on an axial stream, and a survey is not a read until
//! `budget(n)` or `fold(kind)` says which (awaiting a bare survey does not compile).

use super::error::ReadFailure;
use super::Streams;
use crate::contract::{
    Aggregate, Aggregated, Application, At, Axial, Bucket, Position, Prefix, Stream, TrackTuple,
    Tracked,
};
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::pin::Pin;
use std::sync::Arc;

type Boxed<'s, T> = Pin<Box<dyn Future<Output = T> + Send + 's>>;

/// The keep-filter a track selection applies to the window's rows: the application's own
/// component equality, by label.
type Keep<T> = Box<dyn Fn(&T) -> bool + Send + Sync>;

/// A raw read being described; awaiting it reads.
pub struct Query<'s, A: Application, T: Stream> {
    streams: &'s Streams<A>,
    start: Bound<Position>,
    end: Bound<Position>,
    labels: Vec<String>,
    keep: Option<Keep<T>>,
}

impl<'s, A: Application, T: Stream> Query<'s, A, T> {
    /// The range as the history stood at position `at`: nothing published after `at`.
    pub fn as_of(mut self, at: Position) -> Self {
        self.end = match self.end {
            Bound::Included(e) if e <= at => Bound::Included(e),
            Bound::Excluded(e) if e <= at => Bound::Excluded(e),
            _ => Bound::Included(at),
        };
        self
    }
}

impl<'s, A: Application, T: Stream + Tracked> Query<'s, A, T> {
    /// Narrows to a track: the declared tuple, or a prefix of it.
    pub fn track<P: Prefix<T::Track>>(mut self, selection: P) -> Self {
        let labels = selection.labels();
        let keep = labels.clone();
        self.labels = labels;
        self.keep = Some(Box::new(move |row: &T| {
            row.track().labels().starts_with(&keep)
        }));
        self
    }
}

impl<'s, A: Application, T: Stream> IntoFuture for Query<'s, A, T> {
    type Output = Result<Vec<At<Arc<T>>>, ReadFailure>;
    type IntoFuture = Boxed<'s, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let keep = self.keep;
            self.streams
                .query_labels::<T>(self.labels, self.start, self.end, move |row: &T| {
                    keep.as_ref().is_none_or(|k| k(row))
                })
                .await
        })
    }
}

/// A survey of an axis range being described: not a read until [`Survey::budget`] or
/// [`Survey::fold`] says which.
pub struct Survey<'s, A: Application, T: Stream + Axial> {
    streams: &'s Streams<A>,
    start: Bound<u64>,
    end: Bound<u64>,
    labels: Vec<String>,
    _row: PhantomData<fn() -> T>,
}

impl<'s, A: Application, T: Stream + Axial + Tracked> Survey<'s, A, T> {
    /// Narrows to a track: the declared tuple, or a prefix of it.
    pub fn track<P: Prefix<T::Track>>(mut self, selection: P) -> Self {
        self.labels = selection.labels();
        self
    }
}

impl<'s, A: Application, T: Stream + Axial> Survey<'s, A, T> {
    /// Display buckets under a point budget (four points per bucket per measured field):
    /// the only way to take buckets.
    pub fn budget(
        self,
        points: usize,
    ) -> impl Future<Output = Result<Vec<Bucket>, ReadFailure>> + Send + 's {
        self.streams
            .buckets::<T>(self.labels, self.start, self.end, points)
    }

    /// A statistic of the range: the only way to take one.
    pub fn fold(
        self,
        kind: Aggregate,
    ) -> impl Future<Output = Result<Vec<Aggregated>, ReadFailure>> + Send + 's {
        self.streams
            .aggregate::<T>(self.labels, self.start, self.end, kind)
    }
}

/// A barrier being described; awaiting it seals and answers the position the stream (and
/// track) is durable through.
pub struct Seal<'s, A: Application, T: Stream> {
    streams: &'s Streams<A>,
    labels: Vec<String>,
    _row: PhantomData<fn() -> T>,
}

impl<'s, A: Application, T: Stream + Tracked> Seal<'s, A, T> {
    /// Names the track the answer is for (a barrier still covers everything staged).
    pub fn track<P: Prefix<T::Track>>(mut self, selection: P) -> Self {
        self.labels = selection.labels();
        self
    }
}

impl<'s, A: Application, T: Stream> IntoFuture for Seal<'s, A, T> {
    type Output = Position;
    type IntoFuture = Boxed<'s, Position>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.streams.seal_labels::<T>(self.labels))
    }
}

fn bounds<B: Copy>(range: impl RangeBounds<B>) -> (Bound<B>, Bound<B>) {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

impl<A: Application> Streams<A> {
    /// Rows of a position range, in publish order, spliced from the window and the tier
    /// beneath: `streams.query::<Capture>(..).track((run,)).as_of(at).await`.
    pub fn query<T: Stream>(&self, range: impl RangeBounds<Position>) -> Query<'_, A, T> {
        let (start, end) = bounds(range);
        Query {
            streams: self,
            start,
            end,
            labels: Vec::new(),
            keep: None,
        }
    }

    /// A survey of an axis range: `.budget(n)` for buckets, `.fold(kind)` for a statistic.
    pub fn survey<T: Stream + Axial>(&self, axis: impl RangeBounds<u64>) -> Survey<'_, A, T> {
        let (start, end) = bounds(axis);
        Survey {
            streams: self,
            start,
            end,
            labels: Vec::new(),
            _row: PhantomData,
        }
    }

    /// A barrier for everything staged: `streams.seal::<Capture>().await`.
    pub fn seal<T: Stream>(&self) -> Seal<'_, A, T> {
        Seal {
            streams: self,
            labels: Vec::new(),
            _row: PhantomData,
        }
    }
}
