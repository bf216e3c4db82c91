//! Data files: Parquet row groups per track, each row group and the footer under a digest
//! bound to the file and group identity, verified on every read.

use crate::archive::error::Invalid;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::manifest::{GroupEntry, SegmentFile, Slice, Span};
use crate::archive::format::physical;
use crate::contract::Labels;
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::borrow::Cow;
use std::sync::Arc;

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

/// A track's rows: a batch of its own, or a range of one batch a barrier's tracks share,
/// sliced only when a consumer asks for the rows themselves. A barrier of 100,000 tracks that
/// sliced every track spent a fifth of its time making and dropping slices (one array per
/// column per track) that only their row counts were read of: the packed file is written from
/// the shared batch, and level partials are deferred for such sparse tracks.
#[derive(Clone, Debug)]
pub(crate) enum TrackBatch {
    /// Rows of this track alone.
    Own(RecordBatch),
    /// Rows `offset .. offset + len` of `whole`.
    Range {
        whole: Arc<RecordBatch>,
        offset: usize,
        len: usize,
    },
}

impl TrackBatch {
    /// How many rows.
    pub fn num_rows(&self) -> usize {
        match self {
            TrackBatch::Own(batch) => batch.num_rows(),
            TrackBatch::Range { len, .. } => *len,
        }
    }

    /// The rows as a batch (a slice of the shared batch, made now).
    pub fn get(&self) -> Cow<'_, RecordBatch> {
        match self {
            TrackBatch::Own(batch) => Cow::Borrowed(batch),
            TrackBatch::Range { whole, offset, len } => Cow::Owned(whole.slice(*offset, *len)),
        }
    }

    /// Rows `offset .. offset + len` of these, still a range of the shared batch when they
    /// are one (nothing is copied either way).
    pub fn slice(&self, offset: usize, len: usize) -> TrackBatch {
        match self {
            TrackBatch::Own(batch) => TrackBatch::Own(batch.slice(offset, len)),
            TrackBatch::Range {
                whole, offset: at, ..
            } => TrackBatch::Range {
                whole: whole.clone(),
                offset: at + offset,
                len,
            },
        }
    }

    /// `pieces`' rows as one slice of the batch they share, when each is the range of that
    /// batch right after the one before it (a barrier's tracks, in key order); `None`
    /// otherwise, and they are joined by a copy.
    pub(crate) fn shared(pieces: &[TrackRows]) -> Option<RecordBatch> {
        let (first, rest) = pieces.split_first()?;
        let TrackBatch::Range {
            whole,
            offset: start,
            len,
        } = &first.batch
        else {
            return None;
        };
        let mut end = start + len;
        for piece in rest {
            match &piece.batch {
                TrackBatch::Range {
                    whole: other,
                    offset,
                    len,
                } if Arc::ptr_eq(whole, other) && *offset == end => end += len,
                _ => return None,
            }
        }
        Some(whole.slice(*start, end - start))
    }
}

impl From<RecordBatch> for TrackBatch {
    fn from(batch: RecordBatch) -> Self {
        TrackBatch::Own(batch)
    }
}

/// One track's rows for a barrier, with the bookkeeping its manifest entry records.
#[derive(Debug)]
pub(crate) struct TrackRows {
    pub labels: Labels,
    /// The row's columns followed by `_position` and `_seq`.
    pub batch: TrackBatch,
    pub position: [u64; 2],
    pub axis: Option<[u64; 2]>,
    pub seq: [u64; 2],
}

/// How every data and level file is written. Integer columns (positions, `_seq`, the axis,
/// counts, measured integers) are delta-encoded and float columns byte-stream-split, neither
/// through a dictionary: a track's rows in publish order are runs of nearby integers and
/// noisy floats, which a dictionary only inflates. Strings keep parquet-rs's dictionary.
///
/// `format` is the file's layout (its `series_archive.format` value).
pub(crate) fn properties(schema: &SchemaRef, format: &str) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("1 is a valid zstd level"),
        ))
        .set_max_row_group_row_count(None)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "series_archive.format".to_owned(),
            format.to_owned(),
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
    labels: &Labels,
    batch: &TrackBatch,
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
        let part = batch.slice(offset, len);
        let rows = part.get();
        out.push(TrackRows {
            labels: labels.clone(),
            position: range(&rows, crate::archive::format::spec::POSITION_COLUMN),
            seq: range(&rows, crate::archive::format::spec::SEQ_COLUMN),
            axis: axis.map(|name| range(&rows, name)),
            batch: part.clone(),
        });
        offset += len;
    }
    out
}

/// A row group of a barrier's level file holding fewer rows than this is stored uncompressed
/// (`docs/format.md`, "Level files"). zstd saves next to nothing on a column chunk of a few
/// hundred values already delta-encoded or byte-stream-split, and parquet makes a compressor
/// and a decompressor for every chunk it writes or reads: a barrier's partials are a row group
/// per level of about 16 columns, most of them a few cells, and at 2,000 rows a barrier those
/// contexts were the larger part of sealing's CPU (`docs/bench-tiers.md`).
pub(crate) const PLAIN_GROUP_ROWS: usize = 1024;
/// The `plain_below` of a file whose every row group is compressed: a data file, and a level
/// file sealed before 2026-12-06 (which a repair still recognises).
pub(crate) const COMPRESS_EVERY_GROUP: usize = 0;

/// Encodes rows as one row group per entry, in the order given (a barrier's tracks in
/// track-key order, each in groups of at most the configured rows): a barrier's level file,
/// its row groups of fewer than `plain_below` rows uncompressed ([`PLAIN_GROUP_ROWS`] since
/// 2026-12-06; [`COMPRESS_EVERY_GROUP`] before). Answers the file's bytes and its manifest
/// entry (without path/barrier).
pub(crate) fn encode_groups(
    stream: &str,
    schema: &SchemaRef,
    name: u64,
    tracks: &[TrackRows],
    plain_below: usize,
) -> Result<Encoded> {
    let batches = tracks.iter().map(|t| Ok(t.batch.get().into_owned()));
    let (bytes, metadata) = write_groups(
        stream,
        schema,
        physical::FILE_FORMAT,
        batches,
        1,
        plain_below,
    )?;
    let (spans, footer) = regions(stream, name, &bytes, &metadata, tracks.len())?;
    let groups = tracks
        .iter()
        .zip(spans)
        .map(|(track, span)| GroupEntry {
            track: track.labels.clone(),
            rows: track.batch.num_rows() as u64,
            position: track.position,
            axis: track.axis,
            seq: track.seq,
            span,
            last_track: None,
            slice: None,
        })
        .collect();
    Ok((bytes, footer, groups))
}

/// Consecutive pieces (a barrier's tracks in key order, each bounded to at most `rows` rows)
/// packed into row groups of at most `rows` rows: each range of pieces shares one row group.
/// A piece is never split, and a row group holds at least one.
pub(crate) fn pack(pieces: &[TrackRows], rows: usize) -> Vec<std::ops::Range<usize>> {
    let rows = rows.max(1);
    let mut out = Vec::new();
    let (mut start, mut filled) = (0, 0);
    for (i, piece) in pieces.iter().enumerate() {
        let n = piece.batch.num_rows();
        if i > start && filled + n > rows {
            out.push(start..i);
            (start, filled) = (i, 0);
        }
        filled += n;
    }
    if start < pieces.len() {
        out.push(start..pieces.len());
    }
    out
}

/// Encodes a barrier's pieces as a packed file (format version 6): row groups of at most
/// `rows` rows, each packing the rows of consecutive pieces ([`pack`]), one manifest entry
/// per piece naming its slice. Answers the file's bytes and its entries (without
/// path/barrier).
///
/// Pieces that are consecutive ranges of one shared batch ([`TrackBatch::Range`], a
/// barrier's tracks) make their row group as a slice of it, not a copy. With `cores` 2 each
/// row group's columns are encoded on two threads; the bytes are the same.
pub(crate) fn encode_packed(
    stream: &str,
    schema: &SchemaRef,
    name: u64,
    pieces: &[TrackRows],
    rows: usize,
    cores: usize,
) -> Result<Encoded> {
    let packs = pack(pieces, rows);
    // One batch per row group: its pieces joined, converted to the stored types once; a
    // slice of the batch they share when they are consecutive ranges of one.
    let batches = packs.iter().map(|range| {
        let pieces = &pieces[range.clone()];
        if let Some(group) = TrackBatch::shared(pieces) {
            return Ok(group);
        }
        let parts: Vec<Cow<'_, RecordBatch>> = pieces.iter().map(|p| p.batch.get()).collect();
        match parts.as_slice() {
            [one] => Ok(one.clone().into_owned()),
            _ => arrow::compute::concat_batches(schema, parts.iter().map(|p| p.as_ref())).map_err(
                |e| ArchiveError::Encode {
                    stream: stream.to_owned(),
                    message: e.to_string(),
                },
            ),
        }
    });
    let (bytes, metadata) = write_groups(
        stream,
        schema,
        physical::PACKED_FILE_FORMAT,
        batches,
        cores,
        COMPRESS_EVERY_GROUP,
    )?;
    let (spans, footer) = regions(stream, name, &bytes, &metadata, packs.len())?;
    let mut groups = Vec::with_capacity(pieces.len());
    for (g, range) in packs.iter().enumerate() {
        let mut row = 0;
        for piece in &pieces[range.clone()] {
            groups.push(GroupEntry {
                track: piece.labels.clone(),
                rows: piece.batch.num_rows() as u64,
                position: piece.position,
                axis: piece.axis,
                seq: piece.seq,
                span: spans[g],
                last_track: None,
                slice: Some(Slice {
                    group: g as u32,
                    row,
                }),
            });
            row += piece.batch.num_rows() as u64;
        }
    }
    Ok((bytes, footer, groups))
}

/// Writes `batches` (of the rows' `schema`) as a file of layout `format`, one row group each,
/// converted to the stored types; answers its bytes and Parquet metadata. With `cores` above
/// 1, row groups are encoded on that many threads at once (each whole, as `ArrowWriter`
/// encodes it) and appended in order; a file of one row group has its columns encoded on
/// them instead. Either way the same bytes as on one. A row group of fewer than
/// `plain_below` rows is written uncompressed (none with [`COMPRESS_EVERY_GROUP`]).
fn write_groups(
    stream: &str,
    schema: &SchemaRef,
    format: &str,
    batches: impl Iterator<Item = Result<RecordBatch>>,
    cores: usize,
    plain_below: usize,
) -> Result<(Vec<u8>, parquet::file::metadata::ParquetMetaData)> {
    let fail = |e: parquet::errors::ParquetError| encode_error(stream, e);
    let disk = physical::disk_schema(schema);
    let mut bytes = Vec::new();
    let writer = ArrowWriter::try_new(&mut bytes, disk.clone(), Some(properties(&disk, format)))
        .map_err(fail)?;
    let (mut file, columns) = writer.into_serialized_writer().map_err(fail)?;
    // Column writers for the small row groups: the file's own settings but no compression
    // (a chunk records its codec, so row groups of one file may differ).
    let plain = match plain_below {
        0 => None,
        _ => {
            // Only the default codec is overridden: `properties` sets no column's own.
            let properties = (**file.properties())
                .clone()
                .into_builder()
                .set_compression(Compression::UNCOMPRESSED)
                .build();
            let root = file.schema_descr().root_schema_ptr();
            let sink = SerializedFileWriter::new(std::io::sink(), root, Arc::new(properties))
                .map_err(fail)?;
            Some(ArrowRowGroupWriterFactory::new(&sink, disk.clone()))
        }
    };
    // Row group `index` of `batch`, its columns encoded on `threads` threads.
    let encode = |index: usize, batch: RecordBatch, threads: usize| {
        let batch = physical::to_disk(&batch, &disk).map_err(|message| ArchiveError::Encode {
            stream: stream.to_owned(),
            message,
        })?;
        let mut leaves = Vec::with_capacity(disk.fields().len());
        for (field, column) in disk.fields().iter().zip(batch.columns()) {
            leaves.extend(compute_leaves(field, column).map_err(fail)?);
        }
        let factory = match &plain {
            Some(plain) if batch.num_rows() < plain_below => plain,
            _ => &columns,
        };
        let writers = factory.create_column_writers(index).map_err(fail)?;
        if writers.len() != leaves.len() {
            return Err(ArchiveError::Encode {
                stream: stream.to_owned(),
                message: format!(
                    "{} column writers for {} leaves",
                    writers.len(),
                    leaves.len()
                ),
            });
        }
        let jobs: Vec<(ArrowColumnWriter, ArrowLeafColumn)> =
            writers.into_iter().zip(leaves).collect();
        encode_columns(jobs, threads).map_err(fail)
    };
    // As `ArrowWriter::write` does: an empty batch makes no row group.
    let mut batches = batches.filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0));
    let first = batches.next().transpose()?;
    let second = batches.next().transpose()?;
    let mut append = |chunks: Vec<ArrowColumnChunk>| -> Result<()> {
        let mut row_group = file.next_row_group().map_err(fail)?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group).map_err(fail)?;
        }
        row_group.close().map_err(fail)?;
        Ok(())
    };
    match (first, second) {
        (None, _) => {}
        (Some(only), None) => append(encode(0, only, cores)?)?,
        (Some(first), Some(second)) if cores <= 1 => {
            let rest = [Ok(first), Ok(second)].into_iter().chain(batches);
            for (index, batch) in rest.enumerate() {
                append(encode(index, batch?, 1)?)?;
            }
        }
        (Some(first), Some(second)) => {
            // Row groups to `cores` workers, at most `cores` waiting; the encoded ones are
            // appended in order as they come (a few at most are held).
            let (to_work, work) = std::sync::mpsc::sync_channel::<(usize, RecordBatch)>(cores);
            let work = std::sync::Mutex::new(work);
            let (to_done, done) = std::sync::mpsc::channel();
            std::thread::scope(|scope| -> Result<()> {
                for _ in 0..cores {
                    let (work, to_done, encode) = (&work, to_done.clone(), &encode);
                    scope.spawn(move || loop {
                        let job = match work.lock() {
                            Ok(queue) => queue.recv(),
                            Err(_) => return,
                        };
                        let Ok((index, batch)) = job else { return };
                        // A panic is answered as this group's failure: a worker that died
                        // would leave the queue full and the writer waiting on it for ever.
                        let encoded =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                encode(index, batch, 1)
                            }))
                            .unwrap_or_else(|_| {
                                Err(ArchiveError::Internal(format!(
                                    "stream {stream:?}: encoding row group {index} panicked"
                                )))
                            });
                        if to_done.send((index, encoded)).is_err() {
                            return;
                        }
                    });
                }
                drop(to_done);
                // The next row group to append, and the ones encoded before it.
                let mut next = 0usize;
                let mut held = std::collections::BTreeMap::new();
                let rest = [Ok(first), Ok(second)].into_iter().chain(batches);
                let mut sent = 0usize;
                for batch in rest {
                    if to_work.send((sent, batch?)).is_err() {
                        break;
                    }
                    sent += 1;
                    held.extend(done.try_iter());
                    while let Some(chunks) = held.remove(&next) {
                        append(chunks?)?;
                        next += 1;
                    }
                }
                drop(to_work);
                for (index, chunks) in done.iter() {
                    held.insert(index, chunks);
                    while let Some(chunks) = held.remove(&next) {
                        append(chunks?)?;
                        next += 1;
                    }
                }
                if next != sent {
                    return Err(ArchiveError::Encode {
                        stream: stream.to_owned(),
                        message: format!("{sent} row groups were to be encoded, {next} were"),
                    });
                }
                Ok(())
            })?;
        }
    }
    let metadata = file.close().map_err(fail)?;
    Ok((bytes, metadata))
}

/// Encodes each column's leaf with its writer, on up to `cores` threads (column `i` on thread
/// `i % cores`, in column order), answering the chunks in column order: chunk `i` is the
/// `i / cores`-th of thread `i % cores`.
fn encode_columns(
    jobs: Vec<(ArrowColumnWriter, ArrowLeafColumn)>,
    cores: usize,
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    fn encode(
        share: Vec<(ArrowColumnWriter, ArrowLeafColumn)>,
    ) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
        share
            .into_iter()
            .map(|(mut writer, leaf)| {
                writer.write(&leaf)?;
                writer.close()
            })
            .collect()
    }
    let (columns, cores) = (jobs.len(), cores.clamp(1, jobs.len().max(1)));
    if cores == 1 {
        return encode(jobs);
    }
    let mut shares: Vec<Vec<_>> = (0..cores).map(|_| Vec::new()).collect();
    for (i, job) in jobs.into_iter().enumerate() {
        shares[i % cores].push(job);
    }
    let mine = shares.remove(0);
    let mut encoded = std::thread::scope(|scope| {
        let others: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(move || encode(share)))
            .collect();
        let mut encoded = vec![encode(mine)?.into_iter()];
        for other in others {
            // A panic stays a panic.
            let theirs = other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
            encoded.push(theirs.into_iter());
        }
        Ok::<_, parquet::errors::ParquetError>(encoded)
    })?;
    (0..columns)
        .map(|i| {
            encoded[i % cores].next().ok_or_else(|| {
                parquet::errors::ParquetError::General(format!("column {i} was not encoded"))
            })
        })
        .collect()
}

/// The spans (bytes and digests) of a written file's `groups` row groups and its footer.
fn regions(
    stream: &str,
    name: u64,
    bytes: &[u8],
    metadata: &parquet::file::metadata::ParquetMetaData,
    groups: usize,
) -> Result<(Vec<Span>, Span)> {
    if metadata.num_row_groups() != groups {
        return Err(ArchiveError::Encode {
            stream: stream.to_owned(),
            message: format!(
                "wrote {} row groups, {groups} were written",
                metadata.num_row_groups()
            ),
        });
    }
    let starts = group_starts(metadata);
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
    let spans = (0..groups)
        .map(|i| {
            let offset = starts[i];
            let end = starts.get(i + 1).copied().unwrap_or(ends[i]);
            Span {
                offset,
                len: end - offset,
                crc32c: digest(name, i as u32, &[&bytes[offset as usize..end as usize]]),
            }
        })
        .collect();
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
    Ok((spans, footer))
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
    for (index, span, _) in entry.row_groups() {
        let body = range(span.offset, span.len)?;
        if digest(entry.name, index as u32, &[body]) != span.crc32c {
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

    /// Rows of a track `probe` with one integer column `v`.
    fn probe_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("probe", DataType::Utf8, false),
            Field::new("v", DataType::UInt64, false),
        ]))
    }

    /// `n` rows of the track `label` (`v` counts from 0), as one group of a file.
    fn probe_group(schema: &SchemaRef, label: &str, n: u64) -> TrackRows {
        TrackRows {
            labels: vec![label.to_owned()].into(),
            batch: RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(vec![label; n as usize])),
                    Arc::new(UInt64Array::from_iter_values(0..n)),
                ],
            )
            .expect("batch")
            .into(),
            position: [1, n],
            axis: None,
            seq: [0, n - 1],
        }
    }

    /// The streaming writer makes exactly the bytes, spans and digests `encode_groups` makes
    /// with every group compressed.
    #[test]
    fn the_streaming_writer_writes_what_encode_writes() {
        let schema = probe_schema();
        let groups = [
            probe_group(&schema, "a", 1000),
            probe_group(&schema, "b", 3),
            probe_group(&schema, "c", 70_000),
        ];
        // Every group compressed, as the streaming writer compresses them.
        let (bytes, footer, entries) =
            encode_groups("s", &schema, 42, &groups, COMPRESS_EVERY_GROUP).expect("encode");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.parquet");
        let disk: crate::archive::io::storage::Disk =
            Arc::new(crate::archive::io::storage::LocalDisk);
        let mut writer = Writer::create(&disk, &path, "s", &schema, 42, false).expect("create");
        for g in &groups {
            writer.push(g).expect("push");
        }
        let (len, streamed_footer, streamed) = writer.finish().expect("finish");
        assert_eq!(std::fs::read(&path).expect("read"), bytes);
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(streamed_footer, footer);
        assert_eq!(streamed, entries);
    }

    /// A level file's row groups of fewer than `PLAIN_GROUP_ROWS` rows are stored
    /// uncompressed, the others with zstd; every reader reads the rows back as written, and
    /// the entries' spans and digests cover the bytes as written.
    #[test]
    fn small_row_groups_of_a_level_file_are_stored_uncompressed() {
        let schema = probe_schema();
        let sizes = [PLAIN_GROUP_ROWS - 1, PLAIN_GROUP_ROWS, 3, 5000];
        let groups: Vec<TrackRows> = ["a", "b", "c", "d"]
            .into_iter()
            .zip(sizes)
            .map(|(label, n)| probe_group(&schema, label, n as u64))
            .collect();
        let (bytes, footer, entries) =
            encode_groups("s", &schema, 9, &groups, PLAIN_GROUP_ROWS).expect("encode");
        let bytes = Bytes::from(bytes);
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
                .expect("a Parquet file");
        let codecs: Vec<Vec<Compression>> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.columns().iter().map(|c| c.compression()).collect())
            .collect();
        let zstd = Compression::ZSTD(ZstdLevel::try_new(1).expect("level"));
        for (i, (n, codecs)) in sizes.iter().zip(&codecs).enumerate() {
            let expected = if *n < PLAIN_GROUP_ROWS {
                Compression::UNCOMPRESSED
            } else {
                zstd
            };
            assert_eq!(codecs, &vec![expected; 2], "row group {i} of {n} rows");
        }
        let read: Vec<RecordBatch> = reader
            .build()
            .expect("reader")
            .collect::<std::result::Result<_, _>>()
            .expect("rows");
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).expect("concat");
        let written: Vec<RecordBatch> = groups
            .iter()
            .map(|g| physical::to_disk(&g.batch.get(), &physical::disk_schema(&schema)))
            .collect::<std::result::Result<_, _>>()
            .expect("to disk");
        let written =
            arrow::compute::concat_batches(&written[0].schema(), &written).expect("concat");
        assert_eq!(read, written);
        // The spans and digests are those of the bytes as written.
        assert_eq!(entries.len(), groups.len());
        for (i, entry) in entries.iter().enumerate() {
            let span = entry.span;
            let part = &bytes[span.offset as usize..(span.offset + span.len) as usize];
            assert_eq!(digest(9, i as u32, &[part]), span.crc32c, "row group {i}");
        }
        assert!(footer.offset + footer.len == bytes.len() as u64);
    }

    /// A barrier's tracks as ranges of one shared batch, split where they exceed the row
    /// group size, encode to exactly the bytes and entries of the same rows as batches of
    /// their own; ranges that are not consecutive in one batch are joined, not sliced.
    #[test]
    fn ranges_of_a_shared_batch_encode_as_their_own_rows_do() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("probe", DataType::Utf8, false),
            Field::new("_position", DataType::UInt64, false),
            Field::new("_seq", DataType::UInt64, false),
        ]));
        let tracks = [("a", 5usize), ("b", 1), ("c", 9), ("d", 2)];
        let probes: Vec<&str> = tracks
            .iter()
            .flat_map(|&(label, n)| std::iter::repeat_n(label, n))
            .collect();
        let whole = Arc::new(
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(probes.clone())),
                    Arc::new(UInt64Array::from_iter_values(1..=probes.len() as u64)),
                    Arc::new(UInt64Array::from_iter_values(0..probes.len() as u64)),
                ],
            )
            .expect("batch"),
        );
        let pieces = |shared: bool| -> Vec<TrackRows> {
            let mut at = 0;
            let mut out = Vec::new();
            for &(label, n) in &tracks {
                let batch = if shared {
                    TrackBatch::Range {
                        whole: whole.clone(),
                        offset: at,
                        len: n,
                    }
                } else {
                    TrackBatch::Own(whole.slice(at, n))
                };
                out.extend(bounded(&Labels::from([label.to_owned()]), &batch, 4, None));
                at += n;
            }
            out
        };
        let (shared, own) = (pieces(true), pieces(false));
        assert!(shared
            .iter()
            .all(|p| matches!(p.batch, TrackBatch::Range { .. })));
        let joined = TrackBatch::shared(&shared).expect("consecutive ranges of one batch");
        assert_eq!(joined, *whole);
        assert!(TrackBatch::shared(&own).is_none());
        let gapped = [shared[0].batch.clone(), shared[2].batch.clone()].map(|batch| TrackRows {
            labels: Default::default(),
            batch,
            position: [0, 0],
            axis: None,
            seq: [0, 0],
        });
        assert!(TrackBatch::shared(&gapped).is_none());
        let encoded =
            |pieces: &[TrackRows]| encode_packed("s", &schema, 7, pieces, 6, 1).expect("encode");
        assert_eq!(encoded(&shared), encoded(&own));
        // Row groups encoded on two or three threads at once (several groups), or one
        // group's columns on them: the same bytes and entries.
        let one_group =
            |cores: usize| encode_packed("s", &schema, 7, &shared, 100, cores).expect("encode");
        for cores in [2, 3] {
            let parallel = encode_packed("s", &schema, 7, &shared, 6, cores).expect("encode");
            assert_eq!(parallel, encoded(&shared), "on {cores} threads");
            assert_eq!(
                one_group(cores),
                one_group(1),
                "one group on {cores} threads"
            );
        }
        assert!(encoded(&shared)
            .2
            .iter()
            .any(|g| g.slice.is_some_and(|s| s.group > 1)));
    }
}
