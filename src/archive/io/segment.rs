//! Data and level files on their way to and from storage: a file written row group by row
//! group straight to disk, and an open file (local, or an object in a cold tier) whose
//! footer is verified once and whose row groups are read by range and verified each time.

use crate::archive::error::{ArchiveError, ColdError, Result, StoredError, StoredErrorKind};
use crate::archive::format::manifest::{GroupEntry, SegmentFile, Span};
use crate::archive::format::physical;
use crate::archive::format::segment::{
    digest, encode_error, group_starts, properties, seed, TrackRows, Verified, FOOTER_INDEX,
    PAR1_LEN,
};
use crate::archive::io::cold::ColdTier;
use crate::archive::io::decoded::DecodedCache;
use crate::archive::io::durable;
use crate::archive::io::storage::{Disk, ReadFile, WriteFile};
use crate::archive::io::store::Store;
use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::PageIndexPolicy;
use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A file being written row group by row group straight to disk, each group's digest taken
/// as its bytes pass: memory holds one row group, never the file. The bytes and digests are
/// exactly what [`encode_groups`](crate::archive::format::segment::encode_groups) makes of the same groups with every group compressed
/// ([`COMPRESS_EVERY_GROUP`](crate::archive::format::segment::COMPRESS_EVERY_GROUP)): the files compaction writes keep zstd on every row group.
pub(crate) struct Writer {
    writer: ArrowWriter<DigestSink>,
    /// The schema the file stores (`physical::disk_schema` of the rows').
    disk: SchemaRef,
    stream: String,
    name: u64,
    path: std::path::PathBuf,
    groups: Vec<GroupEntry>,
    start: u64,
    /// Parquet row groups written so far (one per entry unless packed).
    physical: u32,
    /// Whether the file packs several entries into a row group (format version 6).
    packed: bool,
}

/// A [`WriteFile`] as `std::io::Write` (what a buffered writer writes into).
struct Sink(Box<dyn WriteFile>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The file under a [`Writer`]. Parquet buffers its writes, so bytes arrive here later than
/// the writer knows where a region ends: each region's end is registered as a cut (with the
/// seed of the region after it) when the writer reaches it, and the running CRC-32C is
/// closed there as the bytes pass.
struct DigestSink {
    file: std::io::BufWriter<Sink>,
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
impl Writer {
    /// Creates the file at `path` (it must not exist) for file name `name`: one row group
    /// per entry (format version 5, [`Writer::push`]), or, `packed`, row groups each packing
    /// consecutive tracks' pieces (format version 6, [`Writer::push_packed`]).
    pub fn create(
        disk: &Disk,
        path: &Path,
        stream: &str,
        schema: &SchemaRef,
        name: u64,
        packed: bool,
    ) -> Result<Writer> {
        let file = Sink(durable::create(disk, path)?);
        let sink = DigestSink {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            written: 0,
            crc: 0,
            // Group 0 starts after the leading magic.
            cuts: std::collections::VecDeque::from([(PAR1_LEN, seed(name, 0))]),
            closed: Vec::new(),
        };
        let disk = physical::disk_schema(schema);
        let format = if packed {
            physical::PACKED_FILE_FORMAT
        } else {
            physical::FILE_FORMAT
        };
        let writer = ArrowWriter::try_new(sink, disk.clone(), Some(properties(&disk, format)))
            .map_err(|e| encode_error(stream, e))?;
        Ok(Writer {
            writer,
            disk,
            stream: stream.to_owned(),
            name,
            path: path.to_path_buf(),
            groups: Vec::new(),
            start: PAR1_LEN,
            physical: 0,
            packed,
        })
    }

    /// The layout version the file's manifest entry records.
    pub fn format_version(&self) -> u16 {
        if self.packed {
            physical::PACKED_FILE_VERSION
        } else {
            physical::FILE_VERSION
        }
    }

    /// Writes `batch` as the next row group; answers where its bytes end.
    fn write_group(&mut self, batch: &RecordBatch) -> Result<u64> {
        let fail = |e| encode_error(&self.stream, e);
        let batch =
            physical::to_disk(batch, &self.disk).map_err(|message| ArchiveError::Encode {
                stream: self.stream.clone(),
                message,
            })?;
        self.writer.write(&batch).map_err(fail)?;
        self.writer.flush().map_err(fail)?;
        let end = self.writer.bytes_written() as u64;
        self.physical += 1;
        self.writer
            .inner_mut()
            .cuts
            .push_back((end, seed(self.name, self.physical)));
        Ok(end)
    }

    /// Writes consecutive tracks' pieces (in key order, each at most the file's row-group
    /// rows) as one packed row group, one entry per piece naming its slice.
    pub fn push_packed(&mut self, pieces: &[TrackRows]) -> Result<()> {
        if !self.packed || pieces.is_empty() {
            return Err(ArchiveError::Internal(format!(
                "{}: a packed row group of {} pieces written to a file that {}",
                self.path.display(),
                pieces.len(),
                if self.packed {
                    "is packed"
                } else {
                    "is not packed"
                }
            )));
        }
        // Pieces that are consecutive ranges of one batch (a compaction's gathered row
        // group) are written as one slice of it; others are joined by a copy.
        let joined = match crate::archive::format::segment::TrackBatch::shared(pieces) {
            Some(shared) => shared,
            None => {
                let batches: Vec<Cow<'_, RecordBatch>> =
                    pieces.iter().map(|p| p.batch.get()).collect();
                match batches.as_slice() {
                    [one] => one.clone().into_owned(),
                    _ => arrow::compute::concat_batches(
                        &batches[0].schema(),
                        batches.iter().map(|b| b.as_ref()),
                    )
                    .map_err(|e| ArchiveError::Encode {
                        stream: self.stream.clone(),
                        message: e.to_string(),
                    })?,
                }
            }
        };
        let group = self.physical;
        let end = self.write_group(&joined)?;
        let mut row = 0;
        for piece in pieces {
            let slice = crate::archive::format::manifest::Slice { group, row };
            self.groups.push(self.entry(piece, end, Some(slice)));
            row += piece.batch.num_rows() as u64;
        }
        self.start = end;
        Ok(())
    }

    /// The entry of `piece`, whose row group ends at `end` (its digest is filled in once the
    /// bytes have passed, by `finish`).
    fn entry(
        &self,
        piece: &TrackRows,
        end: u64,
        slice: Option<crate::archive::format::manifest::Slice>,
    ) -> GroupEntry {
        GroupEntry {
            track: piece.labels.clone(),
            rows: piece.batch.num_rows() as u64,
            position: piece.position,
            axis: piece.axis,
            seq: piece.seq,
            span: Span {
                offset: self.start,
                len: end - self.start,
                crc32c: 0,
            },
            last_track: None,
            slice,
        }
    }

    /// Writes one row group (an entry of its own; the file is not packed).
    pub fn push(&mut self, group: &TrackRows) -> Result<()> {
        if self.packed {
            return self.push_packed(std::slice::from_ref(group));
        }
        let end = self.write_group(&group.batch.get())?;
        self.groups.push(self.entry(group, end, None));
        self.start = end;
        Ok(())
    }

    /// Writes the footer, checks every region against the file's own metadata, flushes and
    /// syncs. Answers the file's length, footer span and group entries.
    pub fn finish(mut self) -> Result<(u64, Span, Vec<GroupEntry>)> {
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
        let physical = self.physical as usize;
        if starts.len() != physical
            || closed.len() != physical
            || !sink.cuts.is_empty()
            || self
                .groups
                .iter()
                .enumerate()
                .any(|(i, g)| starts.get(g.physical(i)) != Some(&g.span.offset))
        {
            return Err(ArchiveError::Encode {
                stream: self.stream.clone(),
                message: format!(
                    "{}: the row groups the metadata places ({starts:?}) are not the regions written",
                    self.path.display()
                ),
            });
        }
        for (i, group) in self.groups.iter_mut().enumerate() {
            group.span.crc32c = closed[group.physical(i)];
        }
        let footer = Span {
            offset: footer_offset,
            len: sink.written - footer_offset,
            crc32c: sink.crc,
        };
        let length = sink.written;
        let file = sink.file.get_mut();
        durable::sync(&self.path, file.0.as_mut())?;
        Ok((length, footer, self.groups))
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
            file.read_exact_at(&mut buf, offset).map_err(|e| {
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
        Source::Cold {
            tier,
            relative,
            identity,
        } => {
            store
                .disk()
                .before_cold_read(Path::new(shown))
                .map_err(|e| StoredError::new(StoredErrorKind::Io, format!("{shown}: {e}")))?;
            // An object's ranges never change under the identity the manifest gives it (see
            // `io::cache`): a range kept from an earlier read costs no request.
            let cache = store.cache().filter(|c| len <= c.max_entry());
            let key = cache.map(|_| format!("{}#{identity}@{offset}+{len}", shown));
            if let (Some(cache), Some(key)) = (cache, &key) {
                if let Some(bytes) = cache.get(key).filter(|b| b.len() as u64 == len) {
                    tier.requests()
                        .cached
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(bytes);
                }
            }
            let bytes = tier.read(relative, offset, len).map_err(cold_failure)?;
            if let (Some(cache), Some(key)) = (cache, &key) {
                if bytes.len() as u64 == len {
                    cache.put(key, &bytes);
                }
            }
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

/// The names of `schema`'s columns, in its order.
fn names(schema: &SchemaRef) -> impl Iterator<Item = &str> {
    schema.fields().iter().map(|f| f.name().as_str())
}

/// Where an open file's bytes come from.
enum Source {
    /// The local copy under the root.
    Local(Box<dyn ReadFile>),
    /// An object in a cold tier, by its archive-relative path, and what identifies its
    /// bytes for good (its name, length and footer digest as the manifest records them).
    Cold {
        tier: Arc<ColdTier>,
        relative: String,
        identity: String,
    },
}

/// The files one read opens, each once: a file's footer is verified the first time one of
/// its row groups is read, and the open file is kept for the rest of the read.
pub(crate) struct Opened<'a, K> {
    store: &'a Store,
    /// The rows as the archive holds them in memory (what a stored group converts back to).
    schema: SchemaRef,
    /// Whether `schema` is a projection of the stored schema ([`Opened::projected`]): its
    /// reads decode only the columns it names. Otherwise a file's columns must be exactly
    /// the schema's, and a file holding others is damage.
    projects: bool,
    files: std::collections::BTreeMap<K, OpenSegment<'a>>,
    /// Decoded row groups kept across reads ([`Opened::keeping`]), and the key of the
    /// columns this read decodes.
    decoded: Option<(Arc<Mutex<DecodedCache>>, u64)>,
}

impl<'a, K: Ord> Opened<'a, K> {
    /// A read of files whose rows are `schema`'s (a stream's stored schema, or its level
    /// schema).
    pub fn new(store: &'a Store, schema: SchemaRef) -> Self {
        Opened {
            store,
            schema,
            projects: false,
            files: std::collections::BTreeMap::new(),
            decoded: None,
        }
    }

    /// Reads packed row groups through `cache` (a long-lived handle's, see
    /// [`super::decoded`]): a group is decoded whole (the columns of this read's schema) the
    /// first time any of its slices is read and kept there, and every read of a slice of it
    /// after, by this read or a later one, is cut from it. A cache that keeps nothing leaves
    /// the read as it was.
    pub fn keeping(mut self, cache: &Arc<Mutex<DecodedCache>>) -> Self {
        if cache.lock().unwrap_or_else(|p| p.into_inner()).keeps() {
            let mut columns = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&self.projects, &mut columns);
            for field in self.schema.fields() {
                std::hash::Hash::hash(field.name(), &mut columns);
                std::hash::Hash::hash(&field.data_type().to_string(), &mut columns);
            }
            self.decoded = Some((cache.clone(), std::hash::Hasher::finish(&columns)));
        }
        self
    }

    /// A read of only the columns of `schema`, a projection of the files' stored schema (its
    /// columns in the stored order): a survey's or a fold's axis, fields and `_seq`. Each file
    /// must hold every column it names; the file's other columns are not decoded.
    pub fn projected(store: &'a Store, schema: SchemaRef) -> Self {
        Opened {
            projects: true,
            ..Opened::new(store, schema)
        }
    }

    /// `file`, known to this read as `key`: opened (its footer verified) the first time.
    fn segment(
        &mut self,
        key: K,
        file: &'a SegmentFile,
    ) -> std::result::Result<&mut OpenSegment<'a>, StoredError> {
        Ok(match self.files.entry(key) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let mut segment = OpenSegment::open(self.store, file)?;
                segment.projects = self.projects;
                segment.decoded = self.decoded.clone();
                v.insert(segment)
            }
        })
    }

    /// `read` of `file` (known to this read as `key`, opened the first time), handed the
    /// rows' schema.
    fn on<T>(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        read: impl FnOnce(&OpenSegment<'a>, &SchemaRef) -> std::result::Result<T, StoredError>,
    ) -> std::result::Result<T, StoredError> {
        let schema = self.schema.clone();
        read(self.segment(key, file)?, &schema)
    }

    /// The decoded Parquet row group holding entry `group` of `file` (known to this read as
    /// `key`): see [`OpenSegment::whole_group`].
    pub fn whole_group(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, schema| s.whole_group(group, schema))
    }

    /// How many row groups `file`'s footer lists (known to this read as `key`).
    pub fn footer_row_groups(
        &mut self,
        key: K,
        file: &'a SegmentFile,
    ) -> std::result::Result<usize, StoredError> {
        self.on(key, file, |s, _| s.footer_row_groups())
    }

    /// Parquet row group `physical` of `file` (known to this read as `key`), decoded whole
    /// and checked against its digest: `span` its bytes, `rows` the rows the record gives it.
    /// What a replay reads the slices of a file recorded by its row groups from.
    pub fn physical_group(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        physical: usize,
        span: Span,
        rows: u64,
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, schema| {
            s.decode(physical, &span, None, rows, schema)
        })
    }

    /// Rows `rows` of Parquet row group `physical` of `file` (known to this read as `key`),
    /// checked against the group's digest (`span`): only the pages holding them are decoded.
    pub fn selected_rows(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        physical: usize,
        span: Span,
        rows: std::ops::Range<u64>,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let wanted = rows.end - rows.start;
        self.on(key, file, |s, schema| {
            s.decode(
                physical,
                &span,
                Some(std::slice::from_ref(&rows)),
                wanted,
                schema,
            )
        })
    }

    /// Row group `group` of `file`, known to this read as `key`.
    pub fn read_group(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, schema| s.read_group(group, schema))
    }

    /// The columns `schema` names of row group `group` of `file` (an entry of its own, as a
    /// level file's are), known to this read as `key`.
    pub fn read_columns(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, _| s.read_columns(group, schema))
    }

    /// The rows `ranges` of row group `group` of `file` (an entry of its own), known to this
    /// read as `key`.
    pub fn read_rows(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
        ranges: &[std::ops::Range<u64>],
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, schema| s.read_rows(group, ranges, schema))
    }

    /// The rows of row group `group` of `file` (known to this read as `key`) whose column
    /// `axis` lies in `[lo, hi]`: see [`OpenSegment::read_axis_window`].
    pub fn read_axis_window(
        &mut self,
        key: K,
        file: &'a SegmentFile,
        group: usize,
        axis: &str,
        window: [u64; 2],
    ) -> std::result::Result<RecordBatch, StoredError> {
        self.on(key, file, |s, schema| {
            s.read_axis_window(group, schema, axis, window)
        })
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
    /// Whether reads decode only the columns their schema names ([`Opened::projected`]).
    projects: bool,
    /// What reads of a packed file's shared row groups keep: see [`OpenSegment::read_group`].
    kept: std::sync::Mutex<Kept>,
    /// The long-lived cache its packed groups are read through, if any ([`Opened::keeping`]).
    decoded: Option<(Arc<Mutex<DecodedCache>>, u64)>,
}

/// A packed file's row groups read so far, and the one kept decoded whole.
#[derive(Default)]
struct Kept {
    /// Per row group read so far, the first entry (slice) read of it.
    seen: std::collections::BTreeMap<usize, usize>,
    whole: Option<(usize, RecordBatch)>,
    /// The last row group's verified bytes.
    bytes: Option<(usize, Bytes)>,
    /// Each Parquet row group's rows, as the manifest entry gives them (found once: a
    /// packed file's entries are one per track).
    group_rows: Option<Vec<u64>>,
}

impl Kept {
    /// Whether a read of entry `entry` of row group `physical` may decode its own rows
    /// only: no other entry of the group was read before. A second track of one group is
    /// worth decoding the group whole for (the next ones are cut from it); a second read
    /// of the same track (a fold's two edges) is not.
    fn alone(&mut self, physical: usize, entry: usize) -> bool {
        *self.seen.entry(physical).or_insert(entry) == entry
    }
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
                let file = store.disk().open(&path).map_err(|e| {
                    let kind = if e.kind() == std::io::ErrorKind::NotFound {
                        StoredErrorKind::Missing
                    } else {
                        StoredErrorKind::Io
                    };
                    StoredError::new(kind, format!("{shown} (named by the manifest): {e}"))
                })?;
                let len = file
                    .len()
                    .map_err(|e| StoredError::new(StoredErrorKind::Io, format!("{shown}: {e}")))?;
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
                let identity =
                    format!("{}:{}:{:08x}", entry.name, entry.bytes, entry.footer.crc32c);
                (
                    Source::Cold {
                        tier,
                        relative: entry.path.clone(),
                        identity,
                    },
                    url.clone(),
                )
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
            projects: false,
            kept: std::sync::Mutex::new(Kept::default()),
            decoded: None,
        })
    }

    /// Reads entry `index`'s rows, verifying its row group's digest first, as the rows of
    /// `schema` (a version-5 file's signed integers converted back to the declared types).
    /// An entry of a packed file is a slice of a shared row group: the first read of that
    /// group decodes only the pages holding the slice (the page index); a read of another
    /// slice of the same group decodes it whole and keeps it, so a read of many tracks
    /// decodes each group once (one group per open file is kept).
    pub fn read_group(
        &self,
        index: usize,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.entry.groups.get(index).ok_or_else(|| {
            StoredError::internal(format!("{}: no row group {index}", self.shown))
        })?;
        let Some(slice) = group.slice else {
            return self.decode(index, &group.span, None, group.rows, schema);
        };
        let physical = slice.group as usize;
        match self.shared_group(index, schema)? {
            Some(batch) => cut(
                &batch,
                slice.row as usize,
                group.rows as usize,
                &self.shown,
                physical,
            ),
            None => self.decode(
                physical,
                &group.span,
                Some(std::slice::from_ref(&(slice.row..slice.row + group.rows))),
                group.rows,
                schema,
            ),
        }
    }

    /// The rows of Parquet row group `physical`, as the manifest entry gives them.
    fn group_rows(&self, physical: usize) -> u64 {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let rows = kept.group_rows.get_or_insert_with(|| {
            self.entry
                .row_groups()
                .into_iter()
                .map(|(_, _, rows)| rows)
                .collect()
        });
        rows.get(physical).copied().unwrap_or_default()
    }

    /// The decoded Parquet row group holding entry `index` (the entry itself when it is a
    /// row group of its own). A packed group is decoded whole once and kept, so a reader of
    /// every entry in file order (a compaction) decodes each group once and copies nothing
    /// until it gathers the rows it keeps.
    pub fn whole_group(
        &self,
        index: usize,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.entry.groups.get(index).ok_or_else(|| {
            StoredError::internal(format!("{}: no row group {index}", self.shown))
        })?;
        let Some(slice) = group.slice else {
            return self.decode(index, &group.span, None, group.rows, schema);
        };
        let batch = self.kept_whole(slice.group as usize, &group.span, schema)?;
        if slice.row + group.rows > batch.num_rows() as u64 {
            return Err(StoredError::corrupt(format!(
                "{}: entry {index} lies past the {} rows of row group {}",
                self.shown,
                batch.num_rows(),
                slice.group
            )));
        }
        Ok(batch)
    }

    /// Packed row group `physical` (bytes `span`) decoded whole: the one kept, or decoded now
    /// and kept in its place.
    fn kept_whole(
        &self,
        physical: usize,
        span: &Span,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, batch)) = kept.whole.as_ref().filter(|(at, _)| *at == physical) {
            return Ok(batch.clone());
        }
        drop(kept);
        let key = self
            .decoded
            .as_ref()
            .map(|(cache, columns)| (cache, (self.entry.name, physical, *columns)));
        let held = key
            .as_ref()
            .and_then(|(cache, key)| cache.lock().unwrap_or_else(|p| p.into_inner()).get(*key));
        let batch = match held {
            Some(batch) => batch,
            None => {
                // The row group's rows as the record gives them (a scoped replay of a paged
                // file holds only some of its entries).
                let total = self.group_rows(physical);
                let batch = self.decode(physical, span, None, total, schema)?;
                if let Some((cache, key)) = key {
                    cache
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .put(key, batch.clone());
                }
                batch
            }
        };
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).whole = Some((physical, batch.clone()));
        Ok(batch)
    }

    /// The packed row group holding slice entry `index`, decoded whole, when a read of it
    /// should be cut from the whole group: the group is the one kept, or another entry of it
    /// was read before (many tracks of one read share it: it is decoded whole once and kept).
    /// `None` for an entry that is no slice, or the first read of its group (the caller
    /// decodes the entry's own rows).
    fn shared_group(
        &self,
        index: usize,
        schema: &SchemaRef,
    ) -> std::result::Result<Option<RecordBatch>, StoredError> {
        let Some(group) = self.entry.groups.get(index) else {
            return Ok(None);
        };
        let Some(slice) = group.slice else {
            return Ok(None);
        };
        let physical = slice.group as usize;
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let is_kept = kept.whole.as_ref().is_some_and(|(at, _)| *at == physical);
        // Through a long-lived cache, a group it would keep is decoded whole at once; one it
        // refused as too large is read as a one-shot read reads it.
        let cached = self.decoded.as_ref().is_some_and(|(cache, columns)| {
            cache.lock().unwrap_or_else(|p| p.into_inner()).wants((
                self.entry.name,
                physical,
                *columns,
            ))
        });
        if !is_kept && kept.alone(physical, index) && !cached {
            return Ok(None);
        }
        drop(kept);
        self.kept_whole(physical, &group.span, schema).map(Some)
    }

    /// The rows of entry `index` whose column `axis` lies in `[lo, hi]`, as the rows of
    /// `schema`. An entry's rows are one track's in publish order, so its axis never goes
    /// back: the entry's axis column alone is decoded first, the window found in it by binary
    /// search, and then only the window's rows are decoded (the offset index skips the pages
    /// around them). An axis that does go back is damage, refused, never a guess. A read of a
    /// narrow window (a fold's edge cells, a percentile of a short range) so decodes a page a
    /// column, not the track's rows.
    pub fn read_axis_window(
        &self,
        index: usize,
        schema: &SchemaRef,
        axis: &str,
        [lo, hi]: [u64; 2],
    ) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.entry.groups.get(index).ok_or_else(|| {
            StoredError::internal(format!("{}: no row group {index}", self.shown))
        })?;
        let (physical, first) = match group.slice {
            Some(slice) => (slice.group as usize, slice.row),
            None => (index, 0),
        };
        // As `read_group` does: a packed group many tracks of one read share is decoded whole
        // once, and every window after is cut from it.
        let kept_whole = self.shared_group(index, schema)?;
        let (values, decoded) = match kept_whole {
            Some(batch) => {
                let rows = cut(
                    &batch,
                    first as usize,
                    group.rows as usize,
                    &self.shown,
                    physical,
                )?;
                let column = rows.column_by_name(axis).ok_or_else(|| {
                    StoredError::corrupt(format!("{}: no {axis} column", self.shown))
                })?;
                (axis_values(column, &self.shown, physical)?, Some(rows))
            }
            None => {
                let column = self.decode_axis(physical, &group.span, (first, group.rows), axis)?;
                (axis_values(&column, &self.shown, physical)?, None)
            }
        };
        if values.windows(2).any(|w| w[1] < w[0]) {
            return Err(StoredError::corrupt(format!(
                "{}: row group {physical}: the rows of one track go back on the axis {axis:?}",
                self.shown
            )));
        }
        let from = values.partition_point(|&a| a < lo);
        let to = values.partition_point(|&a| a <= hi);
        let wanted = to.saturating_sub(from);
        match decoded {
            Some(rows) => Ok(rows.slice(from, wanted)),
            None if wanted == 0 => Ok(RecordBatch::new_empty(schema.clone())),
            None => self.decode(
                physical,
                &group.span,
                Some(std::slice::from_ref(
                    &(first + from as u64..first + to as u64),
                )),
                wanted as u64,
                schema,
            ),
        }
    }

    /// Column `axis` of rows `first .. first + rows` of row group `index` (whose bytes are
    /// `span`), as stored.
    fn decode_axis(
        &self,
        index: usize,
        span: &Span,
        (first, rows): (u64, u64),
        axis: &str,
    ) -> std::result::Result<arrow::array::ArrayRef, StoredError> {
        let decode = |e: &dyn std::fmt::Display| self.damaged(index, e);
        let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
        let builder = self.reader(index, span, options)?;
        let mask = self.columns(index, &builder, [axis])?;
        let reader = builder
            .with_projection(mask)
            .with_row_groups(vec![index])
            .with_batch_size(rows.max(1) as usize)
            .with_row_selection(selection(std::slice::from_ref(&(first..first + rows))))
            .build()
            .map_err(|e| decode(&e))?;
        let batch = self.read_all(index, reader)?;
        if batch.num_rows() as u64 != rows {
            return Err(decode(&format!(
                "{} rows of {axis} decoded, {rows} recorded",
                batch.num_rows()
            )));
        }
        Ok(batch.column(0).clone())
    }

    /// The bytes of row group `index` (`span`), read and checked against their digest; a
    /// packed file's last group read is kept, so its next slice costs no read.
    fn verified_group(&self, index: usize, span: &Span) -> std::result::Result<Bytes, StoredError> {
        let packed = self.entry.is_packed();
        if packed {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, bytes)) = &kept.bytes {
                if *at == index {
                    return Ok(bytes.clone());
                }
            }
        }
        let bytes = self.read_at(span.offset, span.len)?;
        if digest(self.entry.name, index as u32, &[&bytes]) != span.crc32c {
            return Err(StoredError::corrupt(format!(
                "{}: row group {index} digest mismatch (bytes {}..{} were altered)",
                self.shown,
                span.offset,
                span.offset + span.len
            )));
        }
        if packed {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.bytes = Some((index, bytes.clone()));
        }
        Ok(bytes)
    }

    /// A Parquet reader over row group `index`'s bytes (`span`, read and checked against
    /// their digest first) beside the file's verified magic and footer.
    fn reader(
        &self,
        index: usize,
        span: &Span,
        options: ArrowReaderOptions,
    ) -> std::result::Result<ParquetRecordBatchReaderBuilder<Verified>, StoredError> {
        let bytes = self.verified_group(index, span)?;
        let verified = Verified {
            len: self.entry.bytes,
            ranges: vec![
                (0, self.magic.clone()),
                (span.offset, bytes),
                (self.entry.footer.offset, self.footer.clone()),
            ],
        };
        ParquetRecordBatchReaderBuilder::try_new_with_options(verified, options)
            .map_err(|e| self.damaged(index, &e))
    }

    /// Everything `reader` decodes of row group `index`, as one batch.
    fn read_all(
        &self,
        index: usize,
        reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let stored = reader.schema();
        let batches: Vec<RecordBatch> = reader
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.damaged(index, &e))?;
        arrow::compute::concat_batches(&stored, &batches).map_err(|e| self.damaged(index, &e))
    }

    /// The projection of the columns `wanted` names, each a top-level column of the file, in
    /// the file's order: damage naming the first the file lacks, or an internal error when
    /// `wanted` does not follow the file's order (the projection would hand the columns back
    /// in another order than the caller's schema, and that is no fault of the file).
    fn columns<'n>(
        &self,
        index: usize,
        builder: &ParquetRecordBatchReaderBuilder<Verified>,
        wanted: impl IntoIterator<Item = &'n str>,
    ) -> std::result::Result<parquet::arrow::ProjectionMask, StoredError> {
        let stored = builder.schema();
        let roots = wanted
            .into_iter()
            .map(|name| {
                stored
                    .index_of(name)
                    .map_err(|_| self.damaged(index, &format!("no {name} column")))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if roots.windows(2).any(|w| w[0] >= w[1]) {
            return Err(StoredError::internal(format!(
                "{}: row group {index}: a read asked for columns out of the file's order",
                self.shown
            )));
        }
        Ok(parquet::arrow::ProjectionMask::roots(
            builder.parquet_schema(),
            roots,
        ))
    }

    /// Row group `index` failed to decode: damage, named by file and row group.
    fn damaged(&self, index: usize, e: &dyn std::fmt::Display) -> StoredError {
        StoredError::corrupt(format!("{}: row group {index}: {e}", self.shown))
    }

    /// Decodes Parquet row group `index` (whose bytes are `span`), all of it or the rows of
    /// `select` (ascending, disjoint row ranges), checking that `expected` rows come out.
    fn decode(
        &self,
        index: usize,
        span: &Span,
        select: Option<&[std::ops::Range<u64>]>,
        expected: u64,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let decode = |e: &dyn std::fmt::Display| self.damaged(index, e);
        // A selection's read loads the offset index, so the reader skips the pages around it.
        let options = match select {
            Some(_) => {
                ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional)
            }
            None => ArrowReaderOptions::new(),
        };
        let builder = self.reader(index, span, options)?;
        // A projected read (a survey's axis, fields and `_seq`) decodes only those columns:
        // each column chunk decoded costs its pages and a codec of its own. Any other read
        // decodes every column, and a file holding more than its schema is refused.
        let mut builder = match self.projects {
            true => {
                let mask = self.columns(index, &builder, names(schema))?;
                builder.with_projection(mask)
            }
            false => builder,
        }
        .with_row_groups(vec![index])
        .with_batch_size(expected.max(1) as usize);
        if let Some(ranges) = select {
            builder = builder.with_row_selection(selection(ranges));
        }
        let reader = builder.build().map_err(|e| decode(&e))?;
        let batch = self.read_all(index, reader)?;
        let batch = physical::from_disk(batch, schema).map_err(|e| decode(&e))?;
        if batch.num_rows() as u64 != expected {
            return Err(decode(&format!(
                "{} rows decoded, {expected} recorded",
                batch.num_rows(),
            )));
        }
        Ok(batch)
    }

    /// The columns `schema` names (a part of the file's) of whole row group `index`, an entry
    /// of its own (a level file's group): what a reader needs to find the rows it wants
    /// before it decodes them ([`OpenSegment::read_rows`]).
    pub fn read_columns(
        &self,
        index: usize,
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.own_group(index)?;
        let decode = |e: &dyn std::fmt::Display| self.damaged(index, e);
        let builder = self.reader(index, &group.span, ArrowReaderOptions::new())?;
        let mask = self.columns(index, &builder, names(schema))?;
        let reader = builder
            .with_projection(mask)
            .with_row_groups(vec![index])
            .with_batch_size(group.rows.max(1) as usize)
            .build()
            .map_err(|e| decode(&e))?;
        let batch = self.read_all(index, reader)?;
        let batch = physical::from_disk(batch, schema).map_err(|e| decode(&e))?;
        if batch.num_rows() as u64 != group.rows {
            return Err(decode(&format!(
                "{} rows decoded, {} recorded",
                batch.num_rows(),
                group.rows
            )));
        }
        Ok(batch)
    }

    /// The rows `ranges` (ascending, disjoint) of whole row group `index`, an entry of its
    /// own, every column: the pages around them are skipped (the page index).
    pub fn read_rows(
        &self,
        index: usize,
        ranges: &[std::ops::Range<u64>],
        schema: &SchemaRef,
    ) -> std::result::Result<RecordBatch, StoredError> {
        let group = self.own_group(index)?;
        if let Some(beyond) = ranges
            .iter()
            .find(|r| r.end > group.rows || r.start > r.end)
        {
            return Err(StoredError::internal(format!(
                "{}: rows {beyond:?} asked of row group {index}, which holds {}",
                self.shown, group.rows
            )));
        }
        let expected = ranges.iter().map(|r| r.end - r.start).sum();
        if expected == 0 {
            return Ok(RecordBatch::new_empty(schema.clone()));
        }
        self.decode(index, &group.span, Some(ranges), expected, schema)
    }

    /// Entry `index`, which must be a row group of its own (not a slice of a packed one).
    fn own_group(&self, index: usize) -> std::result::Result<&'a GroupEntry, StoredError> {
        match self.entry.groups.get(index) {
            Some(group) if group.slice.is_none() => Ok(group),
            Some(_) => Err(StoredError::internal(format!(
                "{}: entry {index} is a slice of a packed row group",
                self.shown
            ))),
            None => Err(StoredError::internal(format!(
                "{}: no row group {index}",
                self.shown
            ))),
        }
    }

    /// How many row groups the file's (verified) footer lists, read by parquet's own
    /// metadata reader over the verified magic and footer.
    pub fn footer_row_groups(&self) -> std::result::Result<usize, StoredError> {
        let verified = Verified {
            len: self.entry.bytes,
            ranges: vec![
                (0, self.magic.clone()),
                (self.entry.footer.offset, self.footer.clone()),
            ],
        };
        parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&verified)
            .map(|m| m.num_row_groups())
            .map_err(|e| StoredError::corrupt(format!("{}: its footer: {e}", self.shown)))
    }

    /// Verifies every digest of the file.
    pub fn verify_all(&self) -> std::result::Result<(), StoredError> {
        for (index, span, _) in self.entry.row_groups() {
            let bytes = self.read_at(span.offset, span.len)?;
            if digest(self.entry.name, index as u32, &[&bytes]) != span.crc32c {
                return Err(StoredError::corrupt(format!(
                    "{}: row group {index} digest mismatch (bytes {}..{})",
                    self.shown,
                    span.offset,
                    span.offset + span.len
                )));
            }
        }
        Ok(())
    }
}

/// A Parquet row selection of `ranges` (ascending, disjoint row ranges of one row group).
fn selection(ranges: &[std::ops::Range<u64>]) -> RowSelection {
    let mut selectors = Vec::with_capacity(2 * ranges.len());
    let mut at = 0u64;
    for range in ranges {
        if range.start > at {
            selectors.push(RowSelector::skip((range.start - at) as usize));
        }
        if range.end > range.start {
            selectors.push(RowSelector::select((range.end - range.start) as usize));
        }
        at = at.max(range.end);
    }
    RowSelection::from(selectors)
}

/// An axis column's values, stored signed (format version 5 on) or unsigned (earlier), as
/// the u64 the archive serves; a negative stored value is damage.
fn axis_values(
    column: &arrow::array::ArrayRef,
    shown: &str,
    index: usize,
) -> std::result::Result<Vec<u64>, StoredError> {
    use arrow::array::{Array, Int64Array, UInt64Array};
    let damaged = |what: &str| StoredError::corrupt(format!("{shown}: row group {index}: {what}"));
    if column.null_count() > 0 {
        return Err(damaged("the axis holds nulls"));
    }
    if let Some(values) = column.as_any().downcast_ref::<UInt64Array>() {
        return Ok(values.values().to_vec());
    }
    let values = column
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| damaged(&format!("the axis is stored as {}", column.data_type())))?;
    values
        .values()
        .iter()
        .map(|&v| u64::try_from(v).map_err(|_| damaged(&format!("axis value {v} is negative"))))
        .collect()
}

/// Rows `row .. row + rows` of a decoded row group, refused as damage when it is shorter.
fn cut(
    batch: &RecordBatch,
    row: usize,
    rows: usize,
    shown: &str,
    index: usize,
) -> std::result::Result<RecordBatch, StoredError> {
    if row + rows > batch.num_rows() {
        return Err(StoredError::corrupt(format!(
            "{shown}: row group {index}: rows {row}..{} recorded, {} decoded",
            row + rows,
            batch.num_rows()
        )));
    }
    Ok(batch.slice(row, rows))
}

/// A file's length, footer digest and every row group digest, read where it lives (for
/// `verify`).
pub(crate) fn verify_digests(
    store: &Store,
    file: &SegmentFile,
) -> std::result::Result<(), StoredError> {
    OpenSegment::open(store, file).and_then(|s| s.verify_all())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::format::segment::{encode_groups, TrackRows, COMPRESS_EVERY_GROUP};
    use crate::archive::io::store::RequestLog;
    use arrow::array::{StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    /// Only a read opened as a projection decodes part of a file: any other read of a file
    /// holding a column its schema does not name is refused as damage (a full read never
    /// drops a column it was not told of), and a projection asked for in another order than
    /// the file's is an internal error, not damage.
    #[test]
    fn only_a_projected_read_decodes_part_of_a_file() {
        let field = |name: &str, t: DataType| Field::new(name, t, false);
        let file_schema: SchemaRef = Arc::new(Schema::new(vec![
            field("probe", DataType::Utf8),
            field("v", DataType::UInt64),
            field("w", DataType::UInt64),
        ]));
        let rows = RecordBatch::try_new(
            file_schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a"; 4])),
                Arc::new(UInt64Array::from_iter_values(0..4)),
                Arc::new(UInt64Array::from_iter_values(10..14)),
            ],
        )
        .expect("batch");
        let track = TrackRows {
            labels: vec!["a".to_owned()].into(),
            batch: rows.clone().into(),
            position: [1, 4],
            axis: None,
            seq: [0, 3],
        };
        let (bytes, footer, groups) =
            encode_groups("s", &file_schema, 7, &[track], COMPRESS_EVERY_GROUP).expect("encode");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f.parquet"), &bytes).expect("write");
        let entry = SegmentFile {
            name: 7,
            path: "f.parquet".into(),
            bytes: bytes.len() as u64,
            barrier: 1,
            sealed_at_ns: 0,
            footer,
            groups: groups.into(),
            cold: None,
            run: None,
            format: Some(5),
            first_level: None,
            elided: None,
        };
        let disk: Disk = Arc::new(crate::archive::io::storage::LocalDisk);
        let store = Store::new(dir.path(), disk, None, RequestLog::new());
        let part = |names: &[usize]| Arc::new(file_schema.project(names).expect("project"));

        // The whole schema: every column, as stored.
        let mut whole = Opened::new(&store, file_schema.clone());
        assert_eq!(whole.read_group(0, &entry, 0).expect("whole read"), rows);
        // A projection: only its columns.
        let mut projected = Opened::projected(&store, part(&[0, 2]));
        let got = projected.read_group(0, &entry, 0).expect("projected read");
        assert_eq!(got, rows.project(&[0, 2]).expect("project"));
        // A read of fewer columns that is not a projection: the file holds one more than the
        // schema says, and that is damage.
        let mut short = Opened::new(&store, part(&[0, 1]));
        let refused = short.read_group(0, &entry, 0).expect_err("an extra column");
        assert_eq!(refused.kind, StoredErrorKind::Corrupt, "{refused}");
        assert!(
            refused.to_string().contains("3 columns stored, 2 declared"),
            "{refused}"
        );
        // A projection out of the file's order is the caller's fault.
        let mut misordered = Opened::projected(&store, part(&[2, 0]));
        let refused = misordered
            .read_group(0, &entry, 0)
            .expect_err("out of order");
        assert_eq!(refused.kind, StoredErrorKind::Internal, "{refused}");
        // A projection naming a column the file lacks is damage, named.
        let lacking: SchemaRef = Arc::new(Schema::new(vec![field("x", DataType::UInt64)]));
        let refused = Opened::projected(&store, lacking)
            .read_group(0, &entry, 0)
            .expect_err("no such column");
        assert_eq!(refused.kind, StoredErrorKind::Corrupt, "{refused}");
        assert!(refused.to_string().contains("no x column"), "{refused}");
    }
}
