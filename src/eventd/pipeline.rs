//! The import proper, on two threads: a [`Reader`] reads the database in eventd's order and
//! builds batches, a [`Sealer`] stages them and seals where the reader says a barrier ends.

use super::check::RollupLayout;
use super::error::{stopped, ImportError};
use super::model::LEDGER;
use super::model::{
    boot_text, decode_histogram, rollup_schema, rollup_track, HistogramSample, Kind, Series,
    ROLLUPS,
};
use super::progress::Progress;
use crate::archive::Archive;
use arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, ListBuilder, RecordBatch, StringBuilder, UInt64Builder,
};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Rows per staged batch.
pub(super) const BATCH_ROWS: usize = 64 * 1024;

/// Rows being built for one sample stream.
pub(super) struct Samples {
    pub(super) kind: Kind,
    pub(super) len: usize,
    pub(super) name: StringBuilder,
    pub(super) labels: StringBuilder,
    pub(super) boundaries: StringBuilder,
    pub(super) timestamp: UInt64Builder,
    pub(super) boot: StringBuilder,
    pub(super) value: Float64Builder,
    pub(super) total_count: UInt64Builder,
    pub(super) sum: Float64Builder,
    pub(super) bucket_bounds: ListBuilder<Float64Builder>,
    pub(super) counts: ListBuilder<UInt64Builder>,
    /// Boot id bytes → text, so a boot is formatted once.
    pub(super) boots: HashMap<Vec<u8>, String>,
}

impl Samples {
    pub(super) fn new(kind: Kind) -> Samples {
        Samples {
            kind,
            len: 0,
            name: StringBuilder::new(),
            labels: StringBuilder::new(),
            boundaries: StringBuilder::new(),
            timestamp: UInt64Builder::new(),
            boot: StringBuilder::new(),
            value: Float64Builder::new(),
            total_count: UInt64Builder::new(),
            sum: Float64Builder::new(),
            bucket_bounds: ListBuilder::new(Float64Builder::new()),
            counts: ListBuilder::new(UInt64Builder::new()),
            boots: HashMap::new(),
        }
    }

    pub(super) fn push_head(&mut self, track: &[String], timestamp: u64, boot: &[u8]) {
        self.name.append_value(&track[0]);
        self.labels.append_value(&track[1]);
        if let Some(b) = track.get(2) {
            self.boundaries.append_value(b);
        }
        self.timestamp.append_value(timestamp);
        match self.boots.get(boot) {
            Some(text) => self.boot.append_value(text),
            None => {
                let text = boot_text(boot);
                self.boot.append_value(&text);
                self.boots.insert(boot.to_vec(), text);
            }
        }
        self.len += 1;
    }

    pub(super) fn push_histogram(&mut self, h: HistogramSample) {
        self.total_count.append_value(h.total_count);
        self.sum.append_value(h.sum);
        self.bucket_bounds.values().append_slice(&h.boundaries);
        self.bucket_bounds.append(true);
        self.counts.values().append_slice(&h.counts);
        self.counts.append(true);
    }

    /// The rows built so far, as a batch of the stream's schema; the builders start over.
    pub(super) fn finish(&mut self) -> Result<RecordBatch, ImportError> {
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(self.name.finish()), Arc::new(self.labels.finish())];
        if self.kind == Kind::Histogram {
            columns.push(Arc::new(self.boundaries.finish()));
        }
        columns.push(Arc::new(self.timestamp.finish()));
        columns.push(Arc::new(self.boot.finish()));
        match self.kind {
            Kind::Counter | Kind::Gauge => columns.push(Arc::new(self.value.finish())),
            Kind::Histogram => {
                columns.push(Arc::new(self.total_count.finish()));
                columns.push(Arc::new(self.sum.finish()));
                columns.push(Arc::new(self.bucket_bounds.finish()));
                columns.push(Arc::new(self.counts.finish()));
            }
        }
        self.len = 0;
        Ok(RecordBatch::try_new(self.kind.schema(), columns)?)
    }
}

/// What the database reader hands the sealer.
pub(super) enum Msg {
    /// Rows of a stream, in order.
    Rows(&'static str, RecordBatch),
    /// Seal what is staged: a barrier ends here.
    Seal,
}

/// Stages batches with consecutive positions per stream and seals when told, printing each
/// barrier as it becomes durable.
pub(super) struct Sealer<'a> {
    pub(super) archive: &'a mut Archive,
    pub(super) progress: &'a mut dyn Progress,
    pub(super) next: HashMap<&'static str, u64>,
    /// The run's ledger row, sealed with its first barrier that holds anything.
    pub(super) ledger: Option<RecordBatch>,
}

impl<'a> Sealer<'a> {
    pub(super) fn new(
        archive: &'a mut Archive,
        progress: &'a mut dyn Progress,
        ledger: RecordBatch,
    ) -> Sealer<'a> {
        Sealer {
            archive,
            progress,
            next: HashMap::new(),
            ledger: Some(ledger),
        }
    }

    /// Stages and seals everything the reader sends, until it hangs up.
    pub(super) fn consume(
        &mut self,
        rx: std::sync::mpsc::Receiver<Msg>,
    ) -> Result<(), ImportError> {
        for msg in rx {
            match msg {
                Msg::Rows(stream, batch) => {
                    self.stage(stream, &batch)?;
                    self.progress.staged(batch.num_rows() as u64);
                }
                Msg::Seal => self.seal()?,
            }
        }
        Ok(())
    }

    pub(super) fn stage(
        &mut self,
        stream: &'static str,
        batch: &RecordBatch,
    ) -> Result<(), ImportError> {
        let first = match self.next.get(stream) {
            Some(&p) => p,
            None => self.archive.watermark(stream).0.saturating_add(1),
        };
        let n = batch.num_rows() as u64;
        let positions: Vec<u64> = (first..first + n).collect();
        self.archive.stage_batch(stream, batch, &positions)?;
        self.next.insert(stream, first + n);
        Ok(())
    }

    pub(super) fn seal(&mut self) -> Result<(), ImportError> {
        if self.archive.staged_rows() > 0 {
            if let Some(ledger) = self.ledger.take() {
                self.stage(LEDGER, &ledger)?;
            }
        }
        if let Some(r) = self.archive.seal_all()? {
            self.progress.sealed(&r);
        }
        Ok(())
    }
}

/// Reads the database in order and sends its rows as batches, with a seal wherever a barrier
/// may end once `seal_rows` rows were sent since the last.
pub(super) struct Reader {
    pub(super) tx: std::sync::mpsc::SyncSender<Msg>,
    pub(super) seal_rows: usize,
    pub(super) since_cut: usize,
}

impl Reader {
    pub(super) fn send(&self, msg: Msg) -> Result<(), ImportError> {
        self.tx.send(msg).map_err(|_| ImportError::Hangup)
    }

    pub(super) fn rows(
        &mut self,
        stream: &'static str,
        batch: RecordBatch,
    ) -> Result<(), ImportError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.since_cut += batch.num_rows();
        self.send(Msg::Rows(stream, batch))
    }

    pub(super) fn seal(&mut self) -> Result<(), ImportError> {
        self.since_cut = 0;
        self.send(Msg::Seal)
    }

    /// Whether a barrier may end before the next row, once `pending` more rows are sent.
    pub(super) fn due(&self, pending: usize) -> bool {
        self.since_cut + pending >= self.seal_rows
    }

    /// Every series' samples past its track's newest timestamp; answers how many.
    pub(super) fn samples(
        &mut self,
        conn: &Connection,
        db: &Path,
        series: &[Series],
        resume: &HashMap<i64, u64>,
    ) -> Result<u64, ImportError> {
        let sql = |e: rusqlite::Error| stopped(db, e);
        // One builder per kind, indexed by it.
        let mut batches = Kind::ALL.map(Samples::new);
        let mut query = conn
            .prepare(
                "SELECT id, boot_id, timestamp, value, histogram_data FROM samples \
                 WHERE series_id = ?1 AND timestamp > ?2 ORDER BY timestamp, id",
            )
            .map_err(sql)?;
        let mut imported = 0u64;
        for s in series {
            let after = resume.get(&s.id).map_or(-1, |&t| t as i64);
            let mut rows = query.query((s.id, after)).map_err(sql)?;
            let mut last: Option<u64> = None;
            let track = s.track();
            while let Some(row) = rows.next().map_err(sql)? {
                let id: i64 = row.get(0).map_err(sql)?;
                let boot = row
                    .get_ref(1)
                    .map_err(sql)?
                    .as_blob()
                    .map_err(|e| sql(e.into()))?;
                let timestamp = row.get::<_, i64>(2).map_err(sql)? as u64;
                if last != Some(timestamp) && self.due(batches.iter().map(|b| b.len).sum()) {
                    self.seal_samples(&mut batches)?;
                }
                last = Some(timestamp);
                let batch = &mut batches[s.kind as usize];
                batch.push_head(&track, timestamp, boot);
                match s.kind {
                    Kind::Counter | Kind::Gauge => {
                        batch.value.append_value(row.get(3).map_err(sql)?)
                    }
                    Kind::Histogram => {
                        let blob = row
                            .get_ref(4)
                            .map_err(sql)?
                            .as_blob()
                            .map_err(|e| sql(e.into()))?;
                        let h = decode_histogram(blob, s).map_err(|e| {
                            stopped(db, format!("sample {id} of {}: {e}", s.shown()))
                        })?;
                        batch.push_histogram(h);
                    }
                }
                imported += 1;
                if batch.len >= BATCH_ROWS {
                    self.rows(s.kind.stream(), batch.finish()?)?;
                }
            }
        }
        self.seal_samples(&mut batches)?;
        Ok(imported)
    }

    /// Sends every sample stream's rows built so far and ends a barrier there.
    pub(super) fn seal_samples(&mut self, batches: &mut [Samples; 3]) -> Result<(), ImportError> {
        for b in batches {
            self.rows(b.kind.stream(), b.finish()?)?;
        }
        self.seal()
    }

    /// Every rollup past its rollup track's newest window; answers how many.
    pub(super) fn rollups(
        &mut self,
        conn: &Connection,
        db: &Path,
        series: &[Series],
        Rollups {
            keys,
            layout,
            newest,
            now,
        }: Rollups,
    ) -> Result<(u64, u64), ImportError> {
        let sql = |e: rusqlite::Error| stopped(db, e);
        let mut stmt = conn
            .prepare(&format!(
                "SELECT series_id, function, window_seconds, window_start, value FROM rollups \
                 ORDER BY series_id, function, window_seconds, window_start{}",
                layout.tiebreak()
            ))
            .map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        let mut b = RollupRows::default();
        let mut total = 0u64;
        let mut open = 0u64;
        // The rollup track being read, (series, function, window), its newest window start in
        // the archive, and the window start of its last row sent.
        let mut current: Option<(i64, String, i64)> = None;
        let mut resume: Option<u64> = None;
        let mut last_start: Option<u64> = None;
        while let Some(row) = rows.next().map_err(sql)? {
            let series_id: i64 = row.get(0).map_err(sql)?;
            let function: String = row.get(1).map_err(sql)?;
            let window: i64 = row.get(2).map_err(sql)?;
            let start: i64 = row.get(3).map_err(sql)?;
            let value: f64 = row.get(4).map_err(sql)?;
            let s = keys.get(&series_id).map(|&i| &series[i]).ok_or_else(|| {
                stopped(
                    db,
                    format!("rollups of series {series_id}, which does not exist"),
                )
            })?;
            let start = layout.unit.to_ns(start).ok_or_else(|| {
                stopped(
                    db,
                    format!(
                        "a rollup of {} starts at {start} ({}), which is no time since the epoch in nanoseconds",
                        s.shown(),
                        layout.unit.name()
                    ),
                )
            })?;
            // A window eventd's newest sample has not passed may still change: it waits for
            // a later run (a rollup track's windows are imported once).
            let end = start.saturating_add((window.max(0) as u64).saturating_mul(1_000_000_000));
            if end > now {
                open += 1;
                continue;
            }
            let same = current
                .as_ref()
                .is_some_and(|(id, f, w)| *id == series_id && *f == function && *w == window);
            if !same {
                resume = newest.get(&rollup_track(s, &function, window)).copied();
                current = Some((series_id, function.clone(), window));
                last_start = None;
            }
            if resume.is_some_and(|r| start <= r) {
                continue;
            }
            if last_start != Some(start) && self.due(b.len) {
                self.rows(ROLLUPS, b.finish()?)?;
                self.seal()?;
            }
            last_start = Some(start);
            b.push(s, &function, window, start, value);
            total += 1;
            if b.len >= BATCH_ROWS {
                self.rows(ROLLUPS, b.finish()?)?;
            }
        }
        self.rows(ROLLUPS, b.finish()?)?;
        self.seal()?;
        Ok((total, open))
    }
}

/// What the rollups reader needs besides the database and the series.
pub(super) struct Rollups<'a> {
    /// The series with rollups, by id, as indexes into the series.
    pub(super) keys: &'a HashMap<i64, usize>,
    pub(super) layout: &'a RollupLayout,
    /// Each rollup track's newest window start in the archive, by its labels.
    pub(super) newest: &'a HashMap<Vec<String>, u64>,
    /// eventd's newest sample: a window not yet past it may still change.
    pub(super) now: u64,
}

/// Rollup rows being built.
#[derive(Default)]
pub(super) struct RollupRows {
    pub(super) len: usize,
    pub(super) name: StringBuilder,
    pub(super) labels: StringBuilder,
    pub(super) function: StringBuilder,
    pub(super) window_seconds: Int64Builder,
    pub(super) window_start: UInt64Builder,
    pub(super) kind: StringBuilder,
    pub(super) value: Float64Builder,
}

impl RollupRows {
    pub(super) fn push(&mut self, s: &Series, function: &str, window: i64, start: u64, value: f64) {
        self.name.append_value(&s.name);
        self.labels.append_value(&s.labels);
        self.function.append_value(function);
        self.window_seconds.append_value(window);
        self.window_start.append_value(start);
        self.kind.append_value(s.kind.name());
        self.value.append_value(value);
        self.len += 1;
    }

    pub(super) fn finish(&mut self) -> Result<RecordBatch, ImportError> {
        self.len = 0;
        Ok(RecordBatch::try_new(
            rollup_schema(),
            vec![
                Arc::new(self.name.finish()),
                Arc::new(self.labels.finish()),
                Arc::new(self.function.finish()),
                Arc::new(self.window_seconds.finish()),
                Arc::new(self.window_start.finish()),
                Arc::new(self.kind.finish()),
                Arc::new(self.value.finish()),
            ],
        )?)
    }
}
