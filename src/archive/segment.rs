//! Data files: Parquet row groups per track, each row group and the footer under a digest
//! bound to the file and group identity, verified on every read.

use super::cold::{ColdError, ColdTier};
use super::error::{ArchiveError, Result};
use super::faults::Op;
use super::manifest::{GroupEntry, SegmentFile, Span};
use super::store::{Store, StoredError, StoredErrorKind};
use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{ChunkReader, Length};
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The group index the footer's digest is bound to.
const FOOTER_INDEX: u32 = u32::MAX;
/// Parquet's leading magic.
const PAR1_LEN: u64 = 4;

/// The file name of data file number `name`.
pub fn data_file_name(name: u64) -> String {
    format!("{name:012}.parquet")
}

/// The name number a data file name carries.
pub fn parse_data_file_name(file: &str) -> Option<u64> {
    let digits = file.strip_suffix(".parquet")?;
    (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

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
fn group_starts(metadata: &parquet::file::metadata::ParquetMetaData) -> Vec<u64> {
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
fn writer_properties(schema: &SchemaRef) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("1 is a valid zstd level"),
        ))
        .set_max_row_group_row_count(None)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "series_archive.format".to_owned(),
            "1".to_owned(),
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
            position: range(&slice, super::POSITION_COLUMN),
            seq: range(&slice, super::SEQ_COLUMN),
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
    let mut bytes = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut bytes, schema.clone(), Some(writer_properties(schema)))
            .map_err(fail)?;
    for track in tracks {
        writer.write(&track.batch).map_err(fail)?;
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

/// A file being written row group by row group straight to disk, each group's digest taken
/// as its bytes pass: memory holds one row group, never the file. The bytes and digests are
/// exactly what [`encode`] makes of the same groups.
pub(crate) struct Writer {
    writer: ArrowWriter<DigestSink>,
    stream: String,
    name: u64,
    path: std::path::PathBuf,
    groups: Vec<GroupEntry>,
    start: u64,
}

/// The file under a [`Writer`]. Parquet buffers its writes, so bytes arrive here later than
/// the writer knows where a region ends: each region's end is registered as a cut (with the
/// seed of the region after it) when the writer reaches it, and the running CRC-32C is
/// closed there as the bytes pass.
struct DigestSink {
    file: std::io::BufWriter<File>,
    written: u64,
    crc: u32,
    cuts: std::collections::VecDeque<(u64, u32)>,
    closed: Vec<u32>,
}

impl std::io::Write for DigestSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        let mut part = &buf[..n];
        while let Some(&(at, seed)) = self.cuts.front() {
            let room = at.saturating_sub(self.written);
            if room > part.len() as u64 {
                break;
            }
            let (before, after) = part.split_at(room as usize);
            self.closed.push(crc32c::crc32c_append(self.crc, before));
            self.crc = seed;
            self.written += before.len() as u64;
            part = after;
            self.cuts.pop_front();
        }
        self.crc = crc32c::crc32c_append(self.crc, part);
        self.written += part.len() as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The digest seed of region `index` of file `name` (see [`digest`]).
fn seed(name: u64, index: u32) -> u32 {
    digest(name, index, &[])
}

impl Writer {
    /// Creates the file at `path` (it must not exist) for file name `name`.
    pub fn create(
        faults: &super::faults::Faults,
        path: &Path,
        stream: &str,
        schema: &SchemaRef,
        name: u64,
    ) -> Result<Writer> {
        let file = super::durable::create(faults, path)?;
        let sink = DigestSink {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            written: 0,
            crc: 0,
            // Group 0 starts after the leading magic.
            cuts: std::collections::VecDeque::from([(PAR1_LEN, seed(name, 0))]),
            closed: Vec::new(),
        };
        let writer = ArrowWriter::try_new(sink, schema.clone(), Some(writer_properties(schema)))
            .map_err(|e| encode_error(stream, e))?;
        Ok(Writer {
            writer,
            stream: stream.to_owned(),
            name,
            path: path.to_path_buf(),
            groups: Vec::new(),
            start: PAR1_LEN,
        })
    }

    /// Writes one row group.
    pub fn push(&mut self, group: &TrackRows) -> Result<()> {
        let fail = |e| encode_error(&self.stream, e);
        self.writer.write(&group.batch).map_err(fail)?;
        self.writer.flush().map_err(fail)?;
        let end = self.writer.bytes_written() as u64;
        let index = self.groups.len() as u32;
        self.writer
            .inner_mut()
            .cuts
            .push_back((end, seed(self.name, index + 1)));
        self.groups.push(GroupEntry {
            track: group.labels.clone(),
            rows: group.batch.num_rows() as u64,
            position: group.position,
            axis: group.axis,
            seq: group.seq,
            // The digest is filled in once the bytes have passed (`finish`).
            span: Span {
                offset: self.start,
                len: end - self.start,
                crc32c: 0,
            },
            last_track: None,
        });
        self.start = end;
        Ok(())
    }

    /// Writes the footer, checks every region against the file's own metadata, flushes and
    /// syncs. Answers the file's length, footer span and group entries.
    pub fn finish(
        mut self,
        faults: &super::faults::Faults,
    ) -> Result<(u64, Span, Vec<GroupEntry>)> {
        let fail = |e| encode_error(&self.stream, e);
        let footer_offset = self.start;
        // The last cut opens the footer's region, whose digest also covers the magic.
        if let Some(last) = self.writer.inner_mut().cuts.back_mut() {
            last.1 = digest(self.name, FOOTER_INDEX, &[b"PAR1"]);
        }
        let metadata = self.writer.finish().map_err(fail)?;
        let starts = group_starts(&metadata);
        let sink = self.writer.inner_mut();
        std::io::Write::flush(&mut sink.file).map_err(ArchiveError::io("write", &self.path))?;
        // Region 0 is the magic; then one per group; the footer's is still running.
        let closed = sink.closed.get(1..).unwrap_or_default();
        if starts.len() != self.groups.len()
            || closed.len() != self.groups.len()
            || !sink.cuts.is_empty()
            || starts
                .iter()
                .zip(&self.groups)
                .any(|(s, g)| *s != g.span.offset)
        {
            return Err(ArchiveError::Encode {
                stream: self.stream.clone(),
                message: format!(
                    "{}: the row groups the metadata places ({starts:?}) are not the regions written",
                    self.path.display()
                ),
            });
        }
        for (group, crc) in self.groups.iter_mut().zip(closed) {
            group.span.crc32c = *crc;
        }
        let footer = Span {
            offset: footer_offset,
            len: sink.written - footer_offset,
            crc32c: sink.crc,
        };
        let length = sink.written;
        let file = sink.file.get_ref();
        super::durable::sync(faults, &self.path, file)?;
        Ok((length, footer, self.groups))
    }
}

fn encode_error(stream: &str, e: parquet::errors::ParquetError) -> ArchiveError {
    ArchiveError::Encode {
        stream: stream.to_owned(),
        message: e.to_string(),
    }
}

/// Verified byte ranges of one file: the only bytes a decode may touch.
struct Verified {
    len: u64,
    ranges: Vec<(u64, Bytes)>,
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

fn read_from(
    store: &Store,
    source: &Source,
    shown: &str,
    offset: u64,
    len: u64,
) -> std::result::Result<Bytes, StoredError> {
    match source {
        Source::Local(file) => {
            store.count_local_read();
            let mut buf = vec![0u8; len as usize];
            store
                .faults()
                .check(Op::Read, Path::new(shown))
                .and_then(|()| file.read_exact_at(&mut buf, offset))
                .map_err(|e| {
                    let kind = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        StoredErrorKind::Corrupt
                    } else {
                        StoredErrorKind::Io
                    };
                    StoredError::new(
                        kind,
                        format!("{shown}: reading bytes {offset}..{}: {e}", offset + len),
                    )
                })?;
            Ok(Bytes::from(buf))
        }
        Source::Cold(tier, relative) => {
            store
                .faults()
                .check(Op::Read, Path::new(shown))
                .map_err(|e| StoredError::new(StoredErrorKind::Io, format!("{shown}: {e}")))?;
            let bytes = tier.read(relative, offset, len).map_err(cold_failure)?;
            if bytes.len() as u64 != len {
                return Err(StoredError::corrupt(format!(
                    "{shown}: bytes {offset}..{} answered {} bytes (the object is shorter than the manifest records)",
                    offset + len,
                    bytes.len()
                )));
            }
            Ok(bytes)
        }
    }
}

/// Checks a whole file's bytes against its manifest entry: its length, the footer digest
/// (with the leading magic) and every row group's digest. Answers what does not match.
pub(crate) fn verify_bytes(entry: &SegmentFile, bytes: &[u8]) -> std::result::Result<(), String> {
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

/// Where an open file's bytes come from.
enum Source {
    /// The local copy under the root.
    Local(File),
    /// An object in a cold tier, by its archive-relative path.
    Cold(Arc<ColdTier>, String),
}

/// The files one read opens, each once: a file's footer is verified the first time one of
/// its row groups is read, and the open file is kept for the rest of the read.
pub(crate) struct Opened<'a, K> {
    store: &'a Store,
    files: std::collections::BTreeMap<K, OpenSegment<'a>>,
}

impl<'a, K: Ord> Opened<'a, K> {
    pub fn new(store: &'a Store) -> Self {
        Opened {
            store,
            files: std::collections::BTreeMap::new(),
        }
    }

    /// Row group `group` of `file`, known to this read as `key`.
    pub fn read_group(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let segment = match self.files.entry(key) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(OpenSegment::open(self.store, file)?)
            }
        };
        segment.read_group(group)
    }
}

/// An open data file whose footer has been verified.
pub(crate) struct OpenSegment<'a> {
    source: Source,
    /// The local path or the object's URL, for messages.
    shown: String,
    entry: &'a SegmentFile,
    magic: Bytes,
    footer: Bytes,
    store: &'a Store,
}

/// A cold read's failure by kind: transient failures say so, so a caller can retry.
fn cold_failure(e: ColdError) -> StoredError {
    let kind = if e.transient {
        StoredErrorKind::Unavailable
    } else if e.missing {
        StoredErrorKind::Missing
    } else {
        StoredErrorKind::Io
    };
    StoredError::new(kind, e.to_string())
}

impl<'a> OpenSegment<'a> {
    fn read_at(&self, offset: u64, len: u64) -> std::result::Result<Bytes, StoredError> {
        read_from(self.store, &self.source, &self.shown, offset, len)
    }

    /// Opens the file where it lives (locally, or in the cold tier its URL names), checks
    /// its length and verifies the footer's digest. The verified footer is cached in the
    /// store: opening the file again reads no footer (for a cold file, costs no request).
    pub fn open(
        store: &'a Store,
        entry: &'a SegmentFile,
    ) -> std::result::Result<Self, StoredError> {
        let (source, shown) = match &entry.cold {
            None => {
                let path = store.root().join(&entry.path);
                let shown = path.display().to_string();
                let file = store
                    .faults()
                    .check(Op::Read, &path)
                    .and_then(|()| File::open(&path))
                    .map_err(|e| {
                        let kind = if e.kind() == std::io::ErrorKind::NotFound {
                            StoredErrorKind::Missing
                        } else {
                            StoredErrorKind::Io
                        };
                        StoredError::new(kind, format!("{shown} (named by the manifest): {e}"))
                    })?;
                let len = file
                    .metadata()
                    .map_err(|e| StoredError::new(StoredErrorKind::Io, format!("{shown}: {e}")))?
                    .len();
                if len != entry.bytes {
                    return Err(StoredError::corrupt(format!(
                        "{shown}: {len} bytes on disk, the manifest recorded {}",
                        entry.bytes
                    )));
                }
                (Source::Local(file), shown)
            }
            Some(url) => {
                let tier = store.tier_for(url, &entry.path).map_err(cold_failure)?;
                (Source::Cold(tier, entry.path.clone()), url.clone())
            }
        };
        // One cache for rows, surveys, folds and compaction: a file's verified footer is
        // read once per store (names are never reused; every row group is still checked
        // against its own digest on every read).
        let cached = store.cached_footer(entry.name);
        let (magic, footer) = match cached {
            Some(pair) => pair,
            None => {
                let magic = read_from(store, &source, &shown, 0, PAR1_LEN)?;
                let footer = read_from(
                    store,
                    &source,
                    &shown,
                    entry.footer.offset,
                    entry.footer.len,
                )?;
                if digest(entry.name, FOOTER_INDEX, &[&magic, &footer]) != entry.footer.crc32c {
                    return Err(StoredError::corrupt(format!(
                        "{shown}: footer digest mismatch (bytes {}..{} or the leading magic were altered)",
                        entry.footer.offset, entry.bytes
                    )));
                }
                store.cache_footer(entry.name, magic.clone(), footer.clone());
                (magic, footer)
            }
        };
        Ok(OpenSegment {
            source,
            shown,
            entry,
            magic,
            footer,
            store,
        })
    }

    /// Reads row group `index`, verifying its digest first.
    pub fn read_group(&self, index: usize) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.entry.groups.get(index).ok_or_else(|| {
            StoredError::internal(format!("{}: no row group {index}", self.shown))
        })?;
        let bytes = self.read_at(group.span.offset, group.span.len)?;
        if digest(self.entry.name, index as u32, &[&bytes]) != group.span.crc32c {
            return Err(StoredError::corrupt(format!(
                "{}: row group {index} digest mismatch (bytes {}..{} were altered)",
                self.shown,
                group.span.offset,
                group.span.offset + group.span.len
            )));
        }
        let verified = Verified {
            len: self.entry.bytes,
            ranges: vec![
                (0, self.magic.clone()),
                (group.span.offset, bytes),
                (self.entry.footer.offset, self.footer.clone()),
            ],
        };
        let decode = |e: &dyn std::fmt::Display| {
            StoredError::corrupt(format!("{}: row group {index}: {e}", self.shown))
        };
        let reader = ParquetRecordBatchReaderBuilder::try_new(verified)
            .map_err(|e| decode(&e))?
            .with_row_groups(vec![index])
            .with_batch_size(group.rows.max(1) as usize)
            .build()
            .map_err(|e| decode(&e))?;
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = reader
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| decode(&e))?;
        let batch = arrow::compute::concat_batches(&schema, &batches).map_err(|e| decode(&e))?;
        if batch.num_rows() as u64 != group.rows {
            return Err(decode(&format!(
                "{} rows decoded, {} recorded",
                batch.num_rows(),
                group.rows
            )));
        }
        Ok(batch)
    }

    /// Verifies every digest of the file.
    pub fn verify_all(&self) -> std::result::Result<(), StoredError> {
        for (index, group) in self.entry.groups.iter().enumerate() {
            let bytes = self.read_at(group.span.offset, group.span.len)?;
            if digest(self.entry.name, index as u32, &[&bytes]) != group.span.crc32c {
                return Err(StoredError::corrupt(format!(
                    "{}: row group {index} digest mismatch (bytes {}..{})",
                    self.shown,
                    group.span.offset,
                    group.span.offset + group.span.len
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{StringArray, UInt64Array};
    use arrow::datatypes::{Field, Schema};

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
        let faults = super::super::faults::Faults::default();
        let mut writer = Writer::create(&faults, &path, "s", &schema, 42).expect("create");
        for g in &groups {
            writer.push(g).expect("push");
        }
        let (len, streamed_footer, streamed) = writer.finish(&faults).expect("finish");
        assert_eq!(std::fs::read(&path).expect("read"), bytes);
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(streamed_footer, footer);
        assert_eq!(streamed, entries);
    }
}
