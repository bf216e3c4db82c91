//! Helpers shared by the integration tests: a dynamic capture stream and its rows.
#![allow(dead_code)]

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use series_archive::archive::{Config, StreamSpec};
use std::sync::Arc;

pub mod child;
pub mod delivered;
pub mod hand;
pub mod ops;
pub mod scrape;
pub mod tree;

/// The capture schema: run, probe, ordinal (axis), value, noise.
pub fn capture_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::Utf8, false),
        Field::new("probe", DataType::Utf8, false),
        Field::new("ordinal", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
        Field::new("noise", DataType::Float64, false),
    ]))
}

/// The dynamic capture stream.
pub fn capture_spec() -> StreamSpec {
    StreamSpec::dynamic(
        "capture",
        capture_schema(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("valid declaration")
}

/// A config selecting the capture stream.
pub fn capture_config() -> Config {
    Config::new().stream(capture_spec())
}

/// One row of the capture stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub run: String,
    pub probe: String,
    pub ordinal: u64,
    pub value: i64,
    pub noise: f64,
}

/// Builds a batch from rows.
pub fn batch(rows: &[Row]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.run.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.probe.as_str()),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.ordinal),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.value))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.noise))),
    ];
    RecordBatch::try_new(capture_schema(), columns).expect("valid batch")
}

/// Reads rows back out of a stored batch (the stream's columns + `_position` + `_seq`).
pub fn rows_of(batch: &RecordBatch) -> Vec<(u64, Row)> {
    let s = |i: usize| {
        batch
            .column(i)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8")
            .clone()
    };
    let (run, probe) = (s(0), s(1));
    let ordinal = batch
        .column(2)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .expect("u64")
        .clone();
    let value = batch
        .column(3)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("i64")
        .clone();
    let noise = batch
        .column(4)
        .as_any()
        .downcast_ref::<Float64Array>()
        .expect("f64")
        .clone();
    let position = batch
        .column(5)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .expect("u64")
        .clone();
    (0..batch.num_rows())
        .map(|i| {
            (
                position.value(i),
                Row {
                    run: run.value(i).to_owned(),
                    probe: probe.value(i).to_owned(),
                    ordinal: ordinal.value(i),
                    value: value.value(i),
                    noise: noise.value(i),
                },
            )
        })
        .collect()
}

/// A deterministic workload: `runs × probes` tracks interleaved in publish order, one row
/// per track per tick, positions advancing by one per tick (so shared within a tick).
pub fn workload(runs: usize, probes: usize, ticks: u64, start_tick: u64) -> (Vec<Row>, Vec<u64>) {
    let mut rows = Vec::new();
    let mut positions = Vec::new();
    for t in start_tick..start_tick + ticks {
        for r in 0..runs {
            for p in 0..probes {
                let seed = (t * 31 + r as u64 * 7 + p as u64 * 3) % 1000;
                rows.push(Row {
                    run: format!("run_{r}"),
                    probe: format!("probe.{p}"),
                    ordinal: t * 10 + (seed % 3),
                    value: seed as i64 - 500,
                    noise: seed as f64 / 7.0,
                });
                positions.push(t + 1);
            }
        }
    }
    (rows, positions)
}
