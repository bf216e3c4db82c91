//! What an eventd store holds, as the archive holds it: the kinds of series and their
//! streams, a series' track, and eventd's encodings (boundary blobs, MessagePack histogram
//! samples, boot ids).

/// The one schema version this importer reads (seed 002 §5.2.6: version 1 comprises
/// `series`, `samples`, `rollups` and `metadata`).
pub const SCHEMA_VERSION: &str = "1";

/// The stream that records which databases were imported, and how far.
pub(super) const LEDGER: &str = "eventd_imports";

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// The kinds of series (`series.type`), each its own stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub(super) const ALL: [Kind; 3] = [Kind::Counter, Kind::Gauge, Kind::Histogram];

    pub(super) fn of(code: i64) -> Option<Kind> {
        match code {
            0 => Some(Kind::Counter),
            1 => Some(Kind::Gauge),
            2 => Some(Kind::Histogram),
            _ => None,
        }
    }

    pub(super) fn stream(self) -> &'static str {
        match self {
            Kind::Counter => "counters",
            Kind::Gauge => "gauges",
            Kind::Histogram => "histograms",
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    /// The stream's columns: track, axis, then the sample's own.
    pub(super) fn schema(self) -> SchemaRef {
        let text = |n: &str| Field::new(n, DataType::Utf8, false);
        let mut fields = vec![text("name"), text("labels")];
        if self == Kind::Histogram {
            fields.push(text("boundaries"));
        }
        fields.push(Field::new("timestamp", DataType::UInt64, false));
        fields.push(text("boot_id"));
        match self {
            Kind::Counter | Kind::Gauge => {
                fields.push(Field::new("value", DataType::Float64, false));
            }
            Kind::Histogram => {
                fields.push(Field::new("total_count", DataType::UInt64, false));
                fields.push(Field::new("sum", DataType::Float64, false));
                fields.push(Field::new(
                    "bucket_bounds",
                    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
                    false,
                ));
                fields.push(Field::new(
                    "counts",
                    DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true))),
                    false,
                ));
            }
        }
        Arc::new(Schema::new(fields))
    }

    pub(super) fn track(self) -> Vec<String> {
        let mut t = vec!["name".to_owned(), "labels".to_owned()];
        if self == Kind::Histogram {
            t.push("boundaries".to_owned());
        }
        t
    }
}

/// The rollups stream's columns.
pub(super) fn rollup_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("labels", DataType::Utf8, false),
        Field::new("function", DataType::Utf8, false),
        Field::new("window_seconds", DataType::Int64, false),
        Field::new("window_start", DataType::UInt64, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]))
}

pub(super) const ROLLUPS: &str = "rollups";

/// The track labels of a series' rollups of one function and window width.
pub(super) fn rollup_track(s: &Series, function: &str, window: i64) -> Vec<String> {
    vec![
        s.name.clone(),
        s.labels.clone(),
        function.to_owned(),
        window.to_string(),
    ]
}

/// One row of `series`.
pub(super) struct Series {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) labels: String,
    pub(super) kind: Kind,
    /// A histogram's boundaries, decoded from the canonical blob.
    pub(super) boundaries: Option<Vec<f64>>,
}

impl Series {
    /// The track labels: the series' identity (name, canonical labels, and a histogram's
    /// boundaries as text).
    pub(super) fn track(&self) -> Vec<String> {
        let mut t = vec![self.name.clone(), self.labels.clone()];
        if let Some(b) = &self.boundaries {
            t.push(boundaries_text(b));
        }
        t
    }

    pub(super) fn shown(&self) -> String {
        format!(
            "series {} ({} {}{{{}}})",
            self.id,
            self.kind.name(),
            self.name,
            self.labels
        )
    }
}

/// Boundaries as a track label: each f64 in its shortest round-trip form, comma-separated.
pub(super) fn boundaries_text(b: &[f64]) -> String {
    b.iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Decodes eventd's canonical boundary blob: `u32` count, then that many `f64`, little-endian.
pub(super) fn decode_boundaries(blob: &[u8]) -> Result<Vec<f64>, String> {
    let (count, rest) = blob
        .split_first_chunk::<4>()
        .ok_or_else(|| format!("a boundaries blob of {} bytes has no count", blob.len()))?;
    let count = u32::from_le_bytes(*count) as usize;
    if rest.len() != count * 8 {
        return Err(format!(
            "a boundaries blob says {count} boundaries but holds {} bytes after the count (expected {})",
            rest.len(),
            count * 8
        ));
    }
    Ok(rest
        .chunks_exact(8)
        .map(|c| {
            let mut le = [0u8; 8];
            le.copy_from_slice(c);
            f64::from_le_bytes(le)
        })
        .collect())
}

/// A histogram sample as eventd stores it: a canonical MessagePack map.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistogramSample {
    pub(super) boundaries: Vec<f64>,
    pub(super) counts: Vec<u64>,
    pub(super) total_count: u64,
    pub(super) sum: f64,
}

pub(super) fn decode_histogram(blob: &[u8], series: &Series) -> Result<HistogramSample, String> {
    let h: HistogramSample = rmp_serde::from_slice(blob)
        .map_err(|e| format!("histogram_data is not eventd's MessagePack sample map: {e}"))?;
    // The archive stores integers as signed 64-bit values (every Delta reader's kind): a
    // count past that is refused here, before anything is written, naming the sample.
    let max = crate::archive::MAX_STORED;
    if let Some(count) = std::iter::once(h.total_count)
        .chain(h.counts.iter().copied())
        .find(|&c| c > max)
    {
        return Err(format!(
            "a count of {count} is above {max} (2^63 - 1), the largest integer the archive stores"
        ));
    }
    if Some(&h.boundaries) != series.boundaries.as_ref() {
        return Err(format!(
            "its boundaries [{}] are not its series' [{}]",
            boundaries_text(&h.boundaries),
            series
                .boundaries
                .as_deref()
                .map(boundaries_text)
                .unwrap_or_default()
        ));
    }
    Ok(h)
}

/// A boot id as canonical UUID text.
pub(super) fn boot_text(bytes: &[u8]) -> String {
    // 16 bytes: the check before the import refuses any other length.
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_count_the_archive_cannot_store_is_refused_before_the_import() {
        #[derive(serde::Serialize)]
        struct Sample {
            boundaries: Vec<f64>,
            counts: Vec<u64>,
            total_count: u64,
            sum: f64,
        }
        let series = Series {
            id: 1,
            name: "latency".into(),
            labels: String::new(),
            kind: Kind::Histogram,
            boundaries: Some(vec![1.0]),
        };
        let blob = |counts: Vec<u64>, total_count: u64| {
            rmp_serde::to_vec_named(&Sample {
                boundaries: vec![1.0],
                counts,
                total_count,
                sum: 2.0,
            })
            .expect("encodes")
        };
        assert!(decode_histogram(&blob(vec![1, 1], 2), &series).is_ok());
        for (counts, total) in [(vec![1, 1], u64::MAX), (vec![1, u64::MAX], 2)] {
            let e = decode_histogram(&blob(counts, total), &series)
                .err()
                .expect("refused");
            assert!(e.contains("18446744073709551615 is above"), "{e}");
        }
    }

    #[test]
    fn a_boundaries_blob_is_a_count_then_that_many_f64() {
        let mut blob = 2u32.to_le_bytes().to_vec();
        blob.extend(0.5f64.to_le_bytes());
        blob.extend(10.0f64.to_le_bytes());
        let b = decode_boundaries(&blob).expect("decodes");
        assert_eq!(b, [0.5, 10.0]);
        assert_eq!(boundaries_text(&b), "0.5,10.0");
        assert!(decode_boundaries(&blob[..blob.len() - 1]).is_err());
        assert!(decode_boundaries(&blob[..3]).is_err());
    }
}
