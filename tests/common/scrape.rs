//! A metric scraper's stream as the sparse-level tests make it: `metrics`, tracked by `host`,
//! a nanosecond axis `ts` (every host every 10 s) on the nanosecond ladder, and integral
//! values so every sum is exact.

use arrow::array::{Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use series_archive::archive::{Archive, Config, Ladder, StreamSpec};
use std::sync::Arc;

/// The axis step between one host's rows: 10 s.
pub const STEP_NS: u64 = 10_000_000_000;
/// The first axis value.
pub const T0: u64 = 1_764_000_000_000_000_000;

/// `host` (Utf8), `ts` (UInt64), `value` (Float64).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("host", DataType::Utf8, false),
        Field::new("ts", DataType::UInt64, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

/// The `metrics` stream with the nanosecond ladder, without Delta logs.
pub fn config() -> Config {
    let spec = StreamSpec::dynamic("metrics", schema(), vec!["host".into()], Some("ts".into()))
        .expect("a valid stream")
        .with_ladder(Some(Ladder::NANOSECONDS));
    Config::new().stream(spec).delta(false)
}

/// Rows `from..to` of `hosts` hosts scraped tick by tick: row `i` is host `i % hosts` at
/// tick `i / hosts`.
pub fn rows(hosts: usize, from: usize, to: usize) -> RecordBatch {
    let at: Vec<(String, u64, f64)> = (from..to)
        .map(|i| {
            let (tick, host) = (i / hosts, i % hosts);
            let value = ((i * 7919) % 1000) as f64 - 500.0;
            (format!("h{host:02}"), T0 + tick as u64 * STEP_NS, value)
        })
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                at.iter().map(|r| r.0.as_str()),
            )),
            Arc::new(UInt64Array::from_iter_values(at.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter_values(at.iter().map(|r| r.2))),
        ],
    )
    .expect("a batch")
}

/// Seals rows `from..to` of `hosts` hosts in barriers of `per_barrier` rows (positions one
/// above the row index).
pub fn seal(archive: &mut Archive, hosts: usize, from: usize, to: usize, per_barrier: usize) {
    let mut at = from;
    while at < to {
        let end = (at + per_barrier).min(to);
        let positions: Vec<u64> = (at as u64 + 1..=end as u64).collect();
        archive
            .stage_batch("metrics", &rows(hosts, at, end), &positions)
            .expect("stage");
        archive.seal_all().expect("seal").expect("a barrier");
        at = end;
    }
}
