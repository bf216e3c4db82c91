//! The archive as a series adapter: the contract's traits over the inherent API.

use super::Archive;
use crate::archive::error::ArchiveError;
use crate::archive::error::ReadError;
use crate::archive::error::StoredError;
use crate::contract::{
    Aggregate, Aggregated, Application, Asked, At, BeneathWindow, Bucket, Cursor, Definition,
    ErasedRow, Position, Run, Series, StreamConsumer,
};
use std::ops::Bound;

impl Archive {
    /// Takes a delivery run of typed rows for a stream selected by type.
    pub fn deliver_run(&mut self, run: Run<'_>) -> Result<usize, ArchiveError> {
        let id = run.stream.id.as_ref();
        let selected = self
            .selected
            .get(id)
            .ok_or_else(|| ArchiveError::UnknownStream(id.to_owned()))?;
        let typed = selected.spec.typed.ok_or_else(|| {
            ArchiveError::declaration(
                id,
                "selected from a schema, not a row type: stage Arrow batches with stage_batch",
            )
        })?;
        let fields: Vec<_> = selected.spec.schema.fields().iter().cloned().collect();
        let batch =
            (typed.to_batch)(run.rows, &fields).map_err(|m| ArchiveError::input(id, 0, None, m))?;
        let positions: Vec<u64> = run.rows.iter().map(|r| r.position.0).collect();
        self.stage_batch(id, &batch, &positions)
    }

    /// Raw rows as the typed rows of a stream selected by type, at their positions.
    pub fn typed_rows(
        &self,
        stream: &str,
        track: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> Result<Vec<At<ErasedRow>>, ReadError> {
        let typed = self
            .selected
            .get(stream)
            .and_then(|s| s.spec.typed)
            .ok_or_else(|| ReadError::NotSelected(stream.to_owned()))?;
        let batch = self.read_rows(stream, track, start, end)?;
        let positions = crate::archive::engine::read::position_column(&batch)?.clone();
        let own = batch.num_columns() - 2;
        let rows_only = batch
            .project(&(0..own).collect::<Vec<_>>())
            .map_err(|e| StoredError::internal(e.to_string()))?;
        let rows = (typed.from_batch)(&rows_only).map_err(StoredError::corrupt)?;
        Ok(rows
            .into_iter()
            .zip(positions.values().iter())
            .map(|(row, &p)| At::new(Position(p), row))
            .collect())
    }
}

impl Archive {
    /// The caller errors a read of `stream` would meet, before any of it is read: a
    /// selection deeper than the track or holding a control character, and for a survey or
    /// fold a stream without an axis, levels or measured field, or a budget that buys no
    /// bucket. A stream the archive does not record is no caller error (the read answers
    /// `Unserved`).
    pub fn check_read(
        &self,
        stream: &str,
        track: &[String],
        asked: Asked,
    ) -> Result<(), ReadError> {
        let Some(state) = self.state().streams.get(stream) else {
            return Ok(());
        };
        match asked {
            Asked::Rows => {
                if track.len() > state.decl.track.len() {
                    return Err(ReadError::BadSelection(format!(
                        "stream {stream:?} is tracked by {} component(s); {} label(s) were given",
                        state.decl.track.len(),
                        track.len()
                    )));
                }
                crate::contract::TrackKey::encode(track)
                    .map_err(|e| ReadError::BadSelection(e.to_string()))?;
            }
            Asked::Buckets { budget } => {
                self.survey_check(stream, track)?;
                let fields = state.decl.measured.len();
                if budget < 4 * fields {
                    return Err(ReadError::Budget {
                        budget,
                        fields,
                        needed: 4 * fields,
                    });
                }
            }
            Asked::Aggregate => self.survey_check(stream, track)?,
        }
        Ok(())
    }
}

impl<A: Application> StreamConsumer<A> for Archive {
    type Error = ArchiveError;

    fn deliver(&mut self, run: Run<'_>) -> Result<(), Self::Error> {
        self.deliver_run(run).map(|_| ())
    }

    fn cursor(&self) -> Cursor {
        Cursor(self.cursor)
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        self.flush_all().map(|_| ())
    }
}

fn refusal(e: ReadError) -> BeneathWindow {
    match e {
        ReadError::Refused(r) => r,
        // The contract boundary: whatever the kind, the adapter could not read what it
        // holds; only the transient kind says a retry may answer.
        ReadError::Stored(e) => e.into(),
        // An axis read's floor keeps its axis: that is what the caller narrows to.
        ReadError::Floor { floor, axis, .. } => BeneathWindow::Floor {
            floor,
            axis: Some(axis),
        },
        // Nothing is stored under a stream the archive never recorded: the tier holds no
        // history for it, which is the unattached answer.
        ReadError::UnknownStream(_) => BeneathWindow::Unserved,
        // A stream the assembly did not select is not this adapter's to serve.
        ReadError::NotSelected(_) => BeneathWindow::Unserved,
        // Caller errors. `Series::check` names each before a read is served, and the runtime
        // asks it first and answers `ReadFailure::Invalid`; only a caller of the bare
        // contract that skips the check gets here, and then hears exactly what was wrong.
        ReadError::BadSelection(m) => BeneathWindow::unreadable(m),
        ReadError::NotSurveyable { .. } => BeneathWindow::Unserved,
        e @ (ReadError::Budget { .. } | ReadError::Abandoned) => {
            BeneathWindow::unreadable(e.to_string())
        }
    }
}

impl<A: Application> Series<A> for Archive {
    async fn rows(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<Position>,
        end: Bound<Position>,
    ) -> Result<Vec<At<ErasedRow>>, BeneathWindow> {
        self.typed_rows(&stream.id, track, start, end)
            .map_err(refusal)
    }

    async fn buckets(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        budget: usize,
    ) -> Result<Vec<Bucket>, BeneathWindow> {
        self.survey(&stream.id, track, start, end, budget)
            .map(|s| s.buckets)
            .map_err(refusal)
    }

    async fn aggregate(
        &mut self,
        stream: Definition,
        track: &[String],
        start: Bound<u64>,
        end: Bound<u64>,
        kind: Aggregate,
    ) -> Result<Vec<Aggregated>, BeneathWindow> {
        self.fold(&stream.id, track, start, end, kind)
            .map(|f| f.answers)
            .map_err(refusal)
    }

    fn serves(&self, stream: &Definition) -> bool {
        self.selects(&stream.id)
    }

    fn check(&self, stream: &Definition, track: &[String], asked: Asked) -> Option<String> {
        match self.check_read(&stream.id, track, asked) {
            Err(
                e @ (ReadError::BadSelection(_)
                | ReadError::Budget { .. }
                | ReadError::NotSurveyable { .. }),
            ) => Some(e.to_string()),
            // Anything else (a damaged manifest, a file that cannot be read) is no caller
            // error: the read itself answers it with its refusal.
            _ => None,
        }
    }

    async fn seal(&mut self, stream: Definition, _track: &[String]) -> Position {
        // A stream this archive does not select is not its to serve: however much of it the
        // manifest records, the host stands that window on origin, alone.
        if !self.selects(&stream.id) {
            return Position::ORIGIN;
        }
        if let Err(e) = self.seal_all() {
            tracing::error!(error = %e, "barrier failed; the archive refuses further barriers until reopened");
        }
        self.watermark(&stream.id)
    }
}
