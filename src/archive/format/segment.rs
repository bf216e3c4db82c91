//! Data files: Parquet row groups per track, each row group and the footer under a digest
//! bound to the file and group identity, verified on every read.

use crate::archive::error::Invalid;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{GroupEntry, SegmentFile, Span};
use crate::archive::format::physical;
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{ChunkReader, Length};
use parquet::schema::types::ColumnPath;

/// The group index the footer's digest is bound to.
pub(crate) const FOOTER_INDEX: u32 = u32::MAX;
/// Parquet's leading magic.
pub(crate) const PAR1_LEN: u64 = 4;

pub use crate::archive::layout::{data_file_name, parse_data_file_name};

/// CRC-32C of `parts`, bound to the file's name number and the group index.
pub fn digest(name: u64, index: u32, parts: &[&[u8]]) -> u32 {
    let mut crc = crc32c::crc32c(&name.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &index.to_le_bytes());
    for part in parts {
        crc = crc32c::crc32c_append(crc, part);
    }
    crc
}

/// Where each row group of a written file starts: its first column chunk.
pub(crate) fn group_starts(metadata: &parquet::file::metadata::ParquetMetaData) -> Vec<u64> {
    metadata
        .row_groups()
        .iter()
        .map(|rg| {
            rg.columns()
                .iter()
                .map(|c| c.byte_range().0)
                .min()
                .unwrap_or(PAR1_LEN)
        })
        .collect()
}

/// An encoded file: its bytes, its footer span and its row groups' entries.
pub(crate) type Encoded = (Vec<u8>, Span, Vec<GroupEntry>);

/// One track's rows for a barrier, with the bookkeeping its manifest entry records.
#[derive(Debug)]
pub(crate) struct TrackRows {
    pub labels: Vec<String>,
    /// The row's columns followed by `_position` and `_seq`.
    pub batch: RecordBatch,
    pub position: [u64; 2],
    pub axis: Option<[u64; 2]>,
    pub seq: [u64; 2],
}

/// How every data and level file is written. Integer columns (positions, `_seq`, the axis,
/// counts, measured integers) are delta-encoded and float columns byte-stream-split, neither
/// through a dictionary: a track's rows in publish order are runs of nearby integers and
/// noisy floats, which a dictionary only inflates. Strings keep parquet-rs's dictionary.
pub(crate) fn writer_properties(schema: &SchemaRef) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("1 is a valid zstd level"),
        ))
        .set_max_row_group_row_count(None)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "series_archive.format".to_owned(),
            crate::archive::format::physical::FILE_FORMAT.to_owned(),
        )]));
    for field in schema.fields() {
        let encoding = match field.data_type() {
            t if t.is_integer() => Encoding::DELTA_BINARY_PACKED,
            DataType::Float32 | DataType::Float64 => Encoding::BYTE_STREAM_SPLIT,
            _ => continue,
        };
        let column = ColumnPath::from(field.name().as_str());
        builder = builder
            .set_column_dictionary_enabled(column.clone(), false)
            .set_column_encoding(column, encoding);
    }
    builder.build()
}

/// One track's rows as row groups of at most `rows` rows each (zero-copy slices), each with
/// its own position, `_seq` and axis range (the columns are in order within a track).
pub(crate) fn bounded(
    labels: &[String],
    batch: &RecordBatch,
    rows: usize,
    axis: Option<&str>,
) -> Vec<TrackRows> {
    let range = |slice: &RecordBatch, name: &str| -> [u64; 2] {
        slice
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<arrow::array::UInt64Array>())
            .filter(|c| !c.is_empty())
            .map_or([0, 0], |c| [c.value(0), c.value(c.len() - 1)])
    };
    let rows = rows.max(1);
    let mut out = Vec::with_capacity(batch.num_rows().div_ceil(rows));
    let mut offset = 0;
    while offset < batch.num_rows() {
        let len = rows.min(batch.num_rows() - offset);
        let slice = batch.slice(offset, len);
        out.push(TrackRows {
            labels: labels.to_vec(),
            position: range(&slice, crate::archive::format::spec::POSITION_COLUMN),
            seq: range(&slice, crate::archive::format::spec::SEQ_COLUMN),
            axis: axis.map(|name| range(&slice, name)),
            batch: slice,
        });
        offset += len;
    }
    out
}

/// Encodes rows as one row group per entry, in the order given (a barrier's tracks in
/// track-key order, each in groups of at most the configured rows). Answers the file's bytes and its manifest entry (without path/barrier).
pub(crate) fn encode(
    stream: &str,
    schema: &SchemaRef,
    name: u64,
    tracks: &[TrackRows],
) -> Result<Encoded> {
    let fail = |e: parquet::errors::ParquetError| ArchiveError::Encode {
        stream: stream.to_owned(),
        message: e.to_string(),
    };
    let disk = physical::disk_schema(schema);
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, disk.clone(), Some(writer_properties(&disk)))
        .map_err(fail)?;
    for track in tracks {
        let batch =
            physical::to_disk(&track.batch, &disk).map_err(|message| ArchiveError::Encode {
                stream: stream.to_owned(),
                message,
            })?;
        writer.write(&batch).map_err(fail)?;
        writer.flush().map_err(fail)?;
    }
    let metadata = writer.close().map_err(fail)?;
    if metadata.num_row_groups() != tracks.len() {
        return Err(ArchiveError::Encode {
            stream: stream.to_owned(),
            message: format!(
                "wrote {} row groups for {} tracks",
                metadata.num_row_groups(),
                tracks.len()
            ),
        });
    }
    let starts = group_starts(&metadata);
    let ends: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|rg| {
            rg.columns()
                .iter()
                .map(|c| c.byte_range().0 + c.byte_range().1)
                .max()
                .unwrap_or(PAR1_LEN)
        })
        .collect();
    let mut groups = Vec::with_capacity(tracks.len());
    for (i, track) in tracks.iter().enumerate() {
        let offset = starts[i];
        let end = starts.get(i + 1).copied().unwrap_or(ends[i]);
        let slice = &bytes[offset as usize..end as usize];
        groups.push(GroupEntry {
            track: track.labels.clone(),
            rows: track.batch.num_rows() as u64,
            position: track.position,
            axis: track.axis,
            seq: track.seq,
            span: Span {
                offset,
                len: end - offset,
                crc32c: digest(name, i as u32, &[slice]),
            },
            last_track: None,
        });
    }
    let footer_offset = ends.last().copied().unwrap_or(PAR1_LEN);
    let footer = Span {
        offset: footer_offset,
        len: bytes.len() as u64 - footer_offset,
        crc32c: digest(
            name,
            FOOTER_INDEX,
            &[
                &bytes[..PAR1_LEN as usize],
                &bytes[footer_offset as usize..],
            ],
        ),
    };
    Ok((bytes, footer, groups))
}

pub(crate) fn seed(name: u64, index: u32) -> u32 {
    digest(name, index, &[])
}

pub(crate) fn encode_error(stream: &str, e: parquet::errors::ParquetError) -> ArchiveError {
    ArchiveError::Encode {
        stream: stream.to_owned(),
        message: e.to_string(),
    }
}

/// Verified byte ranges of one file: the only bytes a decode may touch.
pub(crate) struct Verified {
    pub(crate) len: u64,
    pub(crate) ranges: Vec<(u64, Bytes)>,
}

impl Verified {
    fn slice(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        for (offset, bytes) in &self.ranges {
            let end = offset + bytes.len() as u64;
            if start >= *offset && start + length as u64 <= end {
                let from = (start - offset) as usize;
                return Ok(bytes.slice(from..from + length));
            }
        }
        Err(parquet::errors::ParquetError::General(format!(
            "bytes {start}..{} are outside the verified ranges",
            start + length as u64
        )))
    }
}

impl Length for Verified {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Verified {
    type T = std::io::Cursor<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        for (offset, bytes) in &self.ranges {
            let end = offset + bytes.len() as u64;
            if start >= *offset && start < end {
                return Ok(std::io::Cursor::new(
                    bytes.slice((start - offset) as usize..),
                ));
            }
        }
        Err(parquet::errors::ParquetError::General(format!(
            "byte {start} is outside the verified ranges"
        )))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length)
    }
}

/// Checks a whole file's bytes against its manifest entry: its length, the footer digest
/// (with the leading magic) and every row group's digest. Answers what does not match.
pub(crate) fn verify_bytes(entry: &SegmentFile, bytes: &[u8]) -> std::result::Result<(), Invalid> {
    verify_whole(entry, bytes).map_err(Invalid)
}

fn verify_whole(entry: &SegmentFile, bytes: &[u8]) -> std::result::Result<(), String> {
    if bytes.len() as u64 != entry.bytes {
        return Err(format!(
            "{} bytes, the manifest records {}",
            bytes.len(),
            entry.bytes
        ));
    }
    let range = |offset: u64, len: u64| -> std::result::Result<&[u8], String> {
        let (a, b) = (offset as usize, (offset + len) as usize);
        bytes
            .get(a..b)
            .ok_or_else(|| format!("bytes {a}..{b} are past the end"))
    };
    let magic = range(0, PAR1_LEN)?;
    let footer = range(entry.footer.offset, entry.footer.len)?;
    if digest(entry.name, FOOTER_INDEX, &[magic, footer]) != entry.footer.crc32c {
        return Err("footer digest mismatch".into());
    }
    for (index, group) in entry.groups.iter().enumerate() {
        let body = range(group.span.offset, group.span.len)?;
        if digest(entry.name, index as u32, &[body]) != group.span.crc32c {
            return Err(format!("row group {index} digest mismatch"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::io::segment::Writer;
    use arrow::array::{StringArray, UInt64Array};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    /// The streaming writer makes exactly the bytes, spans and digests `encode` makes.
    #[test]
    fn the_streaming_writer_writes_what_encode_writes() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("probe", DataType::Utf8, false),
            Field::new("v", DataType::UInt64, false),
        ]));
        let group = |label: &str, n: u64| TrackRows {
            labels: vec![label.to_owned()],
            batch: RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(vec![label; n as usize])),
                    Arc::new(UInt64Array::from_iter_values(0..n)),
                ],
            )
            .expect("batch"),
            position: [1, n],
            axis: None,
            seq: [0, n - 1],
        };
        let groups = [group("a", 1000), group("b", 3), group("c", 70_000)];
        let (bytes, footer, entries) = encode("s", &schema, 42, &groups).expect("encode");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.parquet");
        let disk: crate::archive::io::storage::Disk =
            Arc::new(crate::archive::io::storage::LocalDisk);
        let mut writer = Writer::create(&disk, &path, "s", &schema, 42).expect("create");
        for g in &groups {
            writer.push(g).expect("push");
        }
        let (len, streamed_footer, streamed) = writer.finish().expect("finish");
        assert_eq!(std::fs::read(&path).expect("read"), bytes);
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(streamed_footer, footer);
        assert_eq!(streamed, entries);
    }
}
