//! A stream selected at assembly: its schema, track columns, axis column and ladder, checked
//! before anything is written.

use crate::archive::error::Invalid;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::format::levels::Ladder;
use crate::archive::format::manifest::{ColumnDecl, StreamDecl};
use crate::contract::{At, ErasedRow, Stream};
use arrow::array::RecordBatch;
use arrow::datatypes::Field;
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use serde_arrow::schema::{SchemaLike, TracingOptions};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The longest stream id, in bytes: the id names a directory, and common file systems
/// (ext4, xfs, btrfs, APFS, NTFS) allow 255 bytes per path component.
pub const MAX_STREAM_ID: usize = 255;

/// Names of the two columns the archive adds to every stored row.
pub const POSITION_COLUMN: &str = "_position";
/// The publish-order column: a stream-wide counter assigned at staging.
pub const SEQ_COLUMN: &str = "_seq";

/// Converts erased typed rows to Arrow and back; present for streams selected by type.
/// Erased typed rows to an Arrow batch of the given fields.
pub(crate) type ToBatch =
    fn(&[At<ErasedRow>], &[FieldRef]) -> std::result::Result<RecordBatch, String>;
/// An Arrow batch back to erased typed rows.
pub(crate) type FromBatch = fn(&RecordBatch) -> std::result::Result<Vec<ErasedRow>, String>;

#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub type_name: &'static str,
    pub to_batch: ToBatch,
    pub from_batch: FromBatch,
}

impl fmt::Debug for Typed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Typed({})", self.type_name)
    }
}

fn to_batch<T: Stream>(
    rows: &[At<ErasedRow>],
    fields: &[FieldRef],
) -> std::result::Result<RecordBatch, String> {
    let mut typed: Vec<&T> = Vec::with_capacity(rows.len());
    for (i, at) in rows.iter().enumerate() {
        typed.push(at.row.downcast_ref::<T>().ok_or_else(|| {
            format!(
                "row {i} is not a {} (the type this stream was selected with)",
                std::any::type_name::<T>()
            )
        })?);
    }
    serde_arrow::to_record_batch(fields, &typed).map_err(|e| e.to_string())
}

/// Rows serde decodes at a time: a small buffer stays in cache while its rows move into
/// their `Arc`s, instead of one buffer as large as the read.
const DECODE_CHUNK: usize = 4096;
/// Reads at least this long decode on every core, in contiguous shares, in order.
const PARALLEL_DECODE_ROWS: usize = 1 << 16;

fn from_batch<T: Stream>(batch: &RecordBatch) -> std::result::Result<Vec<ErasedRow>, String> {
    let decode = |range: std::ops::Range<usize>| -> std::result::Result<Vec<ErasedRow>, String> {
        let mut out: Vec<ErasedRow> = Vec::with_capacity(range.len());
        let mut at = range.start;
        while at < range.end {
            let len = DECODE_CHUNK.min(range.end - at);
            let rows: Vec<T> =
                serde_arrow::from_record_batch(&batch.slice(at, len)).map_err(|e| e.to_string())?;
            out.extend(rows.into_iter().map(|r| Arc::new(r) as ErasedRow));
            at += len;
        }
        Ok(out)
    };
    let n = batch.num_rows();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if n < PARALLEL_DECODE_ROWS || cores < 2 {
        return decode(0..n);
    }
    let share = n.div_ceil(cores);
    let parts: Vec<std::result::Result<Vec<ErasedRow>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .step_by(share)
            .map(|start| {
                let decode = &decode;
                scope.spawn(move || decode(start..(start + share).min(n)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a decoding thread panicked".to_owned()))
            })
            .collect()
    });
    let mut rows = Vec::with_capacity(n);
    for part in parts {
        rows.extend(part?);
    }
    Ok(rows)
}

/// A stream selected at assembly: its schema, track columns and axis column.
///
/// Two ways reach the same core: [`StreamSpec::typed`] traces the Arrow schema from a
/// `#[stream]` row type, [`StreamSpec::dynamic`] takes a schema and column names at run time.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub(crate) id: String,
    pub(crate) schema: SchemaRef,
    pub(crate) track: Vec<String>,
    pub(crate) axis: Option<String>,
    pub(crate) ladder: Option<Ladder>,
    pub(crate) typed: Option<Typed>,
}

impl StreamSpec {
    /// A stream selected by its row type; rows come back as `Arc<T>` behind `dyn Any`.
    pub fn typed<T: Stream>() -> Result<StreamSpec> {
        let options = TracingOptions::default().strings_as_large_utf8(false);
        let fields = Vec::<FieldRef>::from_type::<T>(options).map_err(|e| {
            ArchiveError::declaration(
                T::ID,
                format!(
                    "cannot trace an Arrow schema from {}: {e}",
                    std::any::type_name::<T>()
                ),
            )
        })?;
        let definition = T::definition();
        Ok(StreamSpec {
            id: T::ID.to_owned(),
            schema: Arc::new(Schema::new(fields)),
            track: definition.track.iter().map(|t| t.to_string()).collect(),
            ladder: definition.axis.as_ref().map(|_| Ladder::ORDINAL),
            axis: definition.axis.map(|a| a.to_string()),
            typed: Some(Typed {
                type_name: std::any::type_name::<T>(),
                to_batch: to_batch::<T>,
                from_batch: from_batch::<T>,
            }),
        })
    }

    /// A stream declared at run time from an Arrow schema and the names of its track
    /// columns (outermost first) and axis column.
    pub fn dynamic(
        id: impl Into<String>,
        schema: SchemaRef,
        track: Vec<String>,
        axis: Option<String>,
    ) -> Result<StreamSpec> {
        let spec = StreamSpec {
            id: id.into(),
            schema,
            track,
            ladder: axis.as_ref().map(|_| Ladder::ORDINAL),
            axis,
            typed: None,
        };
        spec.decl()?;
        Ok(spec)
    }

    /// Declares the level ladder (an axial stream gets [`Ladder::ORDINAL`] unless told
    /// otherwise; `None` builds no levels). Recorded in the manifest: reopening with another
    /// ladder is an error.
    pub fn with_ladder(mut self, ladder: Option<Ladder>) -> Self {
        self.ladder = ladder;
        self
    }

    /// The stream id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The row schema (without the archive's own columns).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Validates the declaration and derives what the manifest records of it. Nothing is
    /// written before this passes.
    pub(crate) fn decl(&self) -> Result<StreamDecl> {
        let id = &self.id;
        let bad = |m: String| ArchiveError::declaration(id, m);
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad(
                "a stream id is a plain identifier: letters, digits, '_' and '-'".into(),
            ));
        }
        if id.len() > MAX_STREAM_ID {
            // The id names a directory (`streams/<id>/`): a longer one fails at the first
            // write, after its declaration would already be recorded.
            return Err(bad(format!(
                "a stream id is at most {MAX_STREAM_ID} bytes (it names a directory, and file systems allow {MAX_STREAM_ID}); this one is {} bytes",
                id.len()
            )));
        }
        if self.track.len() > crate::contract::MAX_DEPTH {
            return Err(bad(format!(
                "a track has at most 4 components; {} were declared",
                self.track.len()
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for field in self.schema.fields() {
            let name = field.name();
            if name == POSITION_COLUMN || name == SEQ_COLUMN {
                return Err(bad(format!(
                    "column {name:?} is reserved for the archive's own bookkeeping; rename it"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(bad(format!("column {name:?} appears twice")));
            }
        }
        for (i, t) in self.track.iter().enumerate() {
            let field = self
                .schema
                .field_with_name(t)
                .map_err(|_| bad(format!("track column {t:?} is not a column of the stream")))?;
            if self.track[..i].contains(t) {
                return Err(bad(format!("track column {t:?} is named twice")));
            }
            if !is_label_type(field.data_type()) {
                return Err(bad(format!(
                    "track column {t:?} is {}; a track component is text, an integer or a boolean",
                    field.data_type()
                )));
            }
        }
        if let Some(axis) = &self.axis {
            let field = self.schema.field_with_name(axis).map_err(|_| {
                bad(format!(
                    "axis column {axis:?} is not a column of the stream"
                ))
            })?;
            if self.track.contains(axis) {
                return Err(bad(format!(
                    "axis column {axis:?} is also a track column; a coordinate is one or the other"
                )));
            }
            if field.data_type() != &DataType::UInt64 {
                return Err(bad(format!(
                    "axis column {axis:?} is {}; the axis is a u64 (UInt64) coordinate",
                    field.data_type()
                )));
            }
            if field.is_nullable() {
                return Err(bad(format!(
                    "axis column {axis:?} is nullable; every row needs an axis value"
                )));
            }
        }
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|f| ColumnDecl {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect();
        let measured = self
            .schema
            .fields()
            .iter()
            .filter(|f| f.data_type().is_numeric())
            .map(|f| f.name().clone())
            .filter(|n| Some(n) != self.axis.as_ref() && !self.track.contains(n))
            .collect();
        if self.ladder.is_some() && self.axis.is_none() {
            return Err(bad(
                "levels sit on the axis: a stream without an axis has no ladder".into(),
            ));
        }
        if let Some(l) = self.ladder {
            Ladder::new(l.base, l.factor, l.levels).map_err(|e| bad(e.into()))?;
        }
        Ok(StreamDecl {
            id: id.clone(),
            columns,
            track: self.track.clone(),
            axis: self.axis.clone(),
            measured,
            ladder: self.ladder,
        })
    }
}

fn is_label_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
    ) || t.is_integer()
}
/// The stored schema projected to what a data file's slices are made of: the track columns,
/// the axis, `_position` and `_seq`, in the stored order (what `verify` checks the entries
/// against, and what a replay reads a format-11 file's slices from).
pub(crate) fn slice_schema(decl: &StreamDecl) -> std::result::Result<SchemaRef, String> {
    let full = stored_schema(decl).map_err(|e| e.to_string())?;
    let wanted: Vec<&str> = decl
        .track
        .iter()
        .map(String::as_str)
        .chain(decl.axis.as_deref())
        .chain([POSITION_COLUMN, SEQ_COLUMN])
        .collect();
    let indices: Vec<usize> = (0..full.fields().len())
        .filter(|&i| wanted.contains(&full.field(i).name().as_str()))
        .collect();
    Ok(Arc::new(full.project(&indices).map_err(|e| e.to_string())?))
}

/// Rebuilds the stored Arrow schema (row columns + `_position` + `_seq`) from a declaration.
pub(crate) fn stored_schema(decl: &StreamDecl) -> std::result::Result<SchemaRef, Invalid> {
    let mut fields = Vec::with_capacity(decl.columns.len() + 2);
    for c in &decl.columns {
        let t = DataType::from_str(&c.data_type)
            .map_err(|e| format!("column {:?}: unknown type {:?}: {e}", c.name, c.data_type))?;
        fields.push(Field::new(&c.name, t, c.nullable));
    }
    fields.push(Field::new(POSITION_COLUMN, DataType::UInt64, false));
    fields.push(Field::new(SEQ_COLUMN, DataType::UInt64, false));
    Ok(Arc::new(Schema::new(fields)))
}
