//! The fleet-metrics barriers the replica benchmarks write: hosts as tracks, a timestamp
//! axis 10 s a tick, one value a row.

use arrow::array::{Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use std::sync::Arc;

/// The rows' schema: `host` (the track), `ts` (ns), `value`.
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("host", DataType::Utf8, false),
        Field::new("ts", DataType::UInt64, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

/// Barrier `b`: `rows` rows over `tracks` hosts, one tick a row per host.
pub fn batch(b: u64, rows: u64, tracks: u64) -> (RecordBatch, Vec<u64>) {
    let ticks = rows / tracks;
    let mut host = Vec::with_capacity(rows as usize);
    let mut ts = Vec::with_capacity(rows as usize);
    let mut value = Vec::with_capacity(rows as usize);
    let mut positions = Vec::with_capacity(rows as usize);
    for t in 0..ticks {
        let tick = b * ticks + t;
        for h in 0..tracks {
            host.push(format!("h{h:05}"));
            ts.push(tick * 10_000_000_000);
            let mut x = tick * tracks + h + 0x9E37_79B9_7F4A_7C15;
            x ^= x >> 33;
            x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
            value.push((x % 100_000) as f64 / 100.0);
            positions.push(tick + 1);
        }
    }
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(host)),
            Arc::new(UInt64Array::from(ts)),
            Arc::new(Float64Array::from(value)),
        ],
    )
    .expect("batch");
    (batch, positions)
}
