//! Input files (CSV, JSON lines, Parquet) as Arrow batches shaped to a stream's declaration.
//! Reading belongs to arrow-csv, arrow-json and parquet; this only chooses and shapes.

use arrow::array::{Array, ArrayRef, RecordBatch, UInt64Array};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use indicatif::ProgressBar;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const BATCH_ROWS: usize = 64 * 1024;

/// Rows a file's reader reads to infer its columns and their types.
const INFERENCE_ROWS: usize = 10_000;

/// The kinds of file `ingest` reads, chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Csv,
    JsonLines,
    Parquet,
}

impl Kind {
    pub fn of(path: &Path) -> Result<Kind, String> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => Ok(Kind::Csv),
            Some("jsonl" | "ndjson" | "json") => Ok(Kind::JsonLines),
            Some("parquet" | "pq") => Ok(Kind::Parquet),
            _ => Err(format!(
                "{}: unknown file kind; ingest reads .csv (with a header), .jsonl/.ndjson (one JSON object per line) and .parquet",
                path.display()
            )),
        }
    }

    /// The line a zero-based data row sits on, for messages.
    pub fn locate(self, row: usize) -> String {
        match self {
            Kind::Csv => format!("row {row} (line {})", row + 2),
            Kind::JsonLines => format!("row {row} (line {})", row + 1),
            Kind::Parquet => format!("row {row}"),
        }
    }
}

/// The schema a file holds, as its reader infers or declares it. A column name that appears
/// twice in it (a CSV header, a Parquet schema) is refused naming it: every reader would keep
/// one of the two and drop the other silently. (A key repeated inside one JSON object is
/// refused as the file is read.)
pub fn file_schema(path: &Path) -> Result<Schema, String> {
    let schema = inferred_schema(path)?;
    let mut seen = std::collections::HashSet::new();
    for field in schema.fields() {
        if !seen.insert(field.name()) {
            return Err(format!(
                "{}: column {:?} appears twice; rename one of them (a reader would keep one and drop the other)",
                path.display(),
                field.name()
            ));
        }
    }
    Ok(schema)
}

/// Checks one JSON object's keys: each is a column the file's columns were read as (a key
/// first seen past the inference window would be dropped by the decoder), and none repeats
/// (a JSON parser keeps the last value and drops the first, silently). Values are skipped,
/// not built.
struct ObjectKeys<'a> {
    known: &'a std::collections::HashSet<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for ObjectKeys<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ObjectKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !self.known.contains(&key) {
                return Err(serde::de::Error::custom(format!(
                    "column {key:?} is not among the file's columns as its first {INFERENCE_ROWS} rows name them; name it there, or ingest this file into its own stream"
                )));
            }
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "column {key:?} appears twice in one object; rename one of them (a reader would keep one and drop the other)"
                )));
            }
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        Ok(())
    }
}

/// A JSON-lines file read once: each chunk of whole lines is checked line by line (one object
/// per line, its keys known and none repeated) and then handed, the same bytes, to arrow-json's
/// decoder.
struct JsonLines<R> {
    reader: R,
    /// The columns the file was read as.
    known: std::collections::HashSet<String>,
    decoder: arrow::json::reader::Decoder,
    buf: Vec<u8>,
    /// Bytes of `buf` the decoder has taken.
    taken: usize,
    /// Bytes of `buf` checked for repeated keys (whole lines).
    checked: usize,
    /// Objects and lines checked before `buf`'s checked part, for messages.
    rows: usize,
    lines: usize,
    /// The rows' schema, to decode a failed batch's lines again one by one.
    schema: SchemaRef,
    /// Where in `buf` the decoder's current batch begins, and the rows and lines before it.
    batch_from: usize,
    batch_row: usize,
    batch_line: usize,
    eof: bool,
    shown: String,
}

impl<R: std::io::Read> JsonLines<R> {
    const CHUNK: usize = 1 << 20;

    /// Checks `buf[from..to]` (whole lines), line by line.
    fn check(&mut self, from: usize, to: usize) -> Result<(), String> {
        use serde::de::DeserializeSeed;
        for line in self.buf[from..to].split(|&b| b == b'\n') {
            self.lines += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let mut de = serde_json::Deserializer::from_slice(line);
            ObjectKeys { known: &self.known }
                .deserialize(&mut de)
                .and_then(|()| de.end())
                .map_err(|e| {
                    format!(
                        "{}: row {} (line {}): {e} (a JSON-lines file holds one JSON object per line)",
                        self.shown, self.rows, self.lines
                    )
                })?;
            self.rows += 1;
        }
        // The split counts one line past the chunk's last newline.
        self.lines -= 1;
        Ok(())
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, String> {
        loop {
            if self.taken < self.checked {
                let n = match self.decoder.decode(&self.buf[self.taken..self.checked]) {
                    Ok(n) => n,
                    Err(e) => return Err(self.locate(&e)),
                };
                self.taken += n;
                if self.taken < self.checked {
                    // The decoder holds a whole batch.
                    return self.flush();
                }
                continue;
            }
            if self.eof {
                return self.flush();
            }
            // Keep the current batch's bytes: a failure is located by decoding them again.
            self.buf.drain(..self.batch_from);
            self.checked -= self.batch_from;
            self.taken -= self.batch_from;
            self.batch_from = 0;
            let before = self.buf.len();
            self.buf.resize(before + Self::CHUNK, 0);
            let read = loop {
                match self.reader.read(&mut self.buf[before..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other.map_err(|e| format!("{}: {e}", self.shown))?,
                }
            };
            self.buf.truncate(before + read);
            let end = if read == 0 {
                self.eof = true;
                self.buf.len()
            } else {
                match self.buf[self.checked..].iter().rposition(|&b| b == b'\n') {
                    Some(at) => self.checked + at + 1,
                    // No whole line yet: read on.
                    None => continue,
                }
            };
            self.check(self.checked, end)?;
            self.checked = end;
        }
    }

    /// The decoder's batch; the next batch starts where this one's bytes end.
    fn flush(&mut self) -> Result<Option<RecordBatch>, String> {
        let batch = match self.decoder.flush() {
            Ok(b) => b,
            Err(e) => return Err(self.locate(&e)),
        };
        if let Some(b) = &batch {
            self.batch_row += b.num_rows();
            self.batch_line += self.buf[self.batch_from..self.taken]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.batch_from = self.taken;
        }
        Ok(batch)
    }

    /// Names the row and line of a decoder failure, decoding the batch's lines one by one.
    fn locate(&self, error: &dyn std::fmt::Display) -> String {
        let (mut row, mut line) = (self.batch_row, self.batch_line);
        for text in self.buf[self.batch_from..self.checked].split(|&b| b == b'\n') {
            line += 1;
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let failed = json_decoder(self.schema.clone())
                .and_then(|mut d| d.decode(text).and_then(|_| d.flush()))
                .err();
            if let Some(e) = failed {
                return format!("{}: row {row} (line {line}): {e}", self.shown);
            }
            row += 1;
        }
        format!("{}: {error}", self.shown)
    }
}

/// arrow-json's decoder as ingest reads with it.
fn json_decoder(
    schema: SchemaRef,
) -> Result<arrow::json::reader::Decoder, arrow::error::ArrowError> {
    arrow::json::ReaderBuilder::new(schema)
        .with_batch_size(BATCH_ROWS)
        .with_coerce_primitive(true)
        .build_decoder()
}

impl<R: std::io::Read> Iterator for JsonLines<R> {
    type Item = Result<RecordBatch, String>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}

/// The schema as the file's reader infers or declares it.
fn inferred_schema(path: &Path) -> Result<Schema, String> {
    let open = || File::open(path).map_err(|e| format!("{}: {e}", path.display()));
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    match Kind::of(path)? {
        Kind::Csv => arrow::csv::reader::Format::default()
            .with_header(true)
            .infer_schema(open()?, Some(INFERENCE_ROWS))
            .map(|(s, _)| s)
            .map_err(|e| fail(&e)),
        Kind::JsonLines => {
            let (inferred, _) = arrow::json::reader::infer_json_schema_from_seekable(
                BufReader::new(open()?),
                Some(INFERENCE_ROWS),
            )
            .map_err(|e| fail(&e))?;
            // arrow-json answers the columns sorted by name; a stream declared from the file
            // keeps them in the order the file first names them.
            let order = json_key_order(path, INFERENCE_ROWS)?;
            let at = |name: &str| order.iter().position(|k| k == name).unwrap_or(usize::MAX);
            let mut fields: Vec<_> = inferred.fields().iter().cloned().collect();
            fields.sort_by_key(|f| at(f.name()));
            Ok(Schema::new(fields))
        }
        Kind::Parquet => ParquetRecordBatchReaderBuilder::try_new(open()?)
            .map(|b| b.schema().as_ref().clone())
            .map_err(|e| fail(&e)),
    }
}

/// The keys of the first `limit` objects of a JSON-lines file, in the order the file first
/// names them. A syntax-only pass: values are skipped, not built.
fn json_key_order(path: &Path, limit: usize) -> Result<Vec<String>, String> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    /// Appends one object's keys not seen before.
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> DeserializeSeed<'de> for Keys<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if !self.0.contains(&key) {
                    self.0.push(key);
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::new(file));
    let mut order = Vec::new();
    for _ in 0..limit {
        // The end of the input, or a line the reader will report with its own position.
        if Keys(&mut order).deserialize(&mut de).is_err() {
            break;
        }
    }
    Ok(order)
}

/// Batches of a file read with `schema` (the file's own column types); `bar` counts the
/// bytes read.
pub fn batches(
    path: &Path,
    schema: SchemaRef,
    bar: &ProgressBar,
) -> Result<Box<dyn Iterator<Item = Result<RecordBatch, String>> + Send>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let shown = path.display().to_string();
    let fail = move |e: &dyn std::fmt::Display| format!("{shown}: {e}");
    let iter: Box<dyn Iterator<Item = Result<RecordBatch, String>> + Send> = match Kind::of(path)? {
        Kind::Csv => {
            // Read every column as text: `shape` casts to the declared types and names the
            // row, line and column of a bad value anywhere in the file (a value past the
            // inference window would otherwise fail inside arrow-csv, named by neither).
            let text: Vec<Field> = schema
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), DataType::Utf8, true))
                .collect();
            let reader = arrow::csv::ReaderBuilder::new(Arc::new(Schema::new(text)))
                .with_header(true)
                .with_batch_size(BATCH_ROWS)
                .build(bar.wrap_read(file))
                .map_err(|e| fail(&e))?;
            Box::new(reader.map(move |b| b.map_err(|e| fail(&e))))
        }
        Kind::JsonLines => {
            let schema_names = schema.fields().iter().map(|f| f.name().clone()).collect();
            let decoder = json_decoder(schema.clone()).map_err(|e| fail(&e))?;
            Box::new(JsonLines {
                reader: bar.wrap_read(file),
                known: schema_names,
                decoder,
                buf: Vec::new(),
                taken: 0,
                checked: 0,
                rows: 0,
                lines: 0,
                schema,
                batch_from: 0,
                batch_row: 0,
                batch_line: 0,
                eof: false,
                shown: path.display().to_string(),
            })
        }
        Kind::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fail(&e))?;
            // A Parquet reader seeks: count each batch's share of the file's bytes.
            let rows = builder.metadata().file_metadata().num_rows().max(1) as u64;
            let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
            let reader = builder
                .with_batch_size(BATCH_ROWS)
                .build()
                .map_err(|e| fail(&e))?;
            let bar = bar.clone();
            Box::new(reader.map(move |b| {
                if let Ok(b) = &b {
                    bar.inc(bytes * b.num_rows() as u64 / rows);
                }
                b.map_err(|e| fail(&e))
            }))
        }
    };
    Ok(iter)
}

/// How the command line names a stream's coordinates.
#[derive(Clone, Debug)]
pub struct Columns {
    pub track: Vec<String>,
    pub axis: String,
    pub position: Option<String>,
    /// Declared column types (`--types`), over whatever the reader infers.
    pub types: Vec<(String, DataType)>,
}

/// Declared column types, `--types COL:TYPE,…`.
#[derive(Clone, Debug)]
pub struct Types(pub Vec<(String, DataType)>);

/// Parses `--types COL:TYPE,…`, splitting at commas outside parentheses (so
/// `Decimal128(10, 2)` stays one type).
pub fn parse_types(text: &str) -> Result<Types, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .map(|i| parse_type(i.trim()))
        .collect::<Result<_, _>>()
        .map(Types)
}

/// Parses one `--types` item, `COL:TYPE`.
fn parse_type(item: &str) -> Result<(String, DataType), String> {
    let (name, ty) = item
        .split_once(':')
        .ok_or_else(|| format!("{item:?}: a type is declared as COL:TYPE, e.g. zip:text"))?;
    if name.is_empty() {
        return Err(format!("{item:?}: no column name before ':'"));
    }
    let data_type = match ty.trim().to_ascii_lowercase().as_str() {
        "text" | "string" | "str" | "utf8" => DataType::Utf8,
        "int" | "integer" | "i64" | "int64" => DataType::Int64,
        "uint" | "u64" | "uint64" => DataType::UInt64,
        "float" | "double" | "f64" | "float64" => DataType::Float64,
        "bool" | "boolean" => DataType::Boolean,
        _ => ty.trim().parse::<DataType>().map_err(|_| {
            format!(
                "{item:?}: unknown type {ty:?}; use text, int, uint, float, bool or an Arrow type name such as Int32, Float32, Date32 or Timestamp(ns)"
            )
        })?,
    };
    Ok((name.to_owned(), data_type))
}

/// The declaration a new stream gets from its first file: every column but the position
/// column, the axis as UInt64, track and axis columns not nullable. A track column is text
/// when the file is CSV (CSV has no types: inferring `7` and `007` as the integer 7 would
/// merge two tracks, and `7.1` would be a float, which no track component can be) and when
/// the file types it as a float; otherwise it keeps the file's type. `--types` overrides all of
/// this, column by column.
pub fn declare_from(file: &Schema, columns: &Columns, path: &Path) -> Result<SchemaRef, String> {
    let csv = matches!(Kind::of(path)?, Kind::Csv);
    let mut fields = Vec::new();
    for name in columns
        .track
        .iter()
        .chain([&columns.axis])
        .chain(columns.position.iter())
    {
        if file.field_with_name(name).is_err() {
            return Err(format!(
                "{}: no column {name:?} (the file has: {})",
                path.display(),
                names(file)
            ));
        }
    }
    for (name, _) in &columns.types {
        if Some(name) == columns.position.as_ref() {
            return Err(format!(
                "--types names {name:?}, the --position column; positions are unsigned integers and not a column of the stream"
            ));
        }
        if file.field_with_name(name).is_err() {
            return Err(format!(
                "--types names {name:?}, which {} does not have (it has: {})",
                path.display(),
                names(file)
            ));
        }
    }
    for f in file.fields() {
        if Some(f.name()) == columns.position.as_ref() {
            continue;
        }
        let coordinate = columns.track.contains(f.name()) || f.name() == &columns.axis;
        let declared = columns.types.iter().find(|(n, _)| n == f.name());
        let data_type = if let Some((_, t)) = declared {
            t.clone()
        } else if f.name() == &columns.axis {
            DataType::UInt64
        } else if columns.track.contains(f.name()) && (csv || f.data_type().is_floating()) {
            DataType::Utf8
        } else {
            f.data_type().clone()
        };
        fields.push(Field::new(
            f.name(),
            data_type,
            f.is_nullable() && !coordinate,
        ));
    }
    Ok(Arc::new(Schema::new(fields)))
}

fn names(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Shapes one file batch to the declared columns (by name, cast to the declared type) and
/// takes out the positions. `first_row` is the batch's first row within its file.
pub fn shape(
    batch: &RecordBatch,
    declared: &SchemaRef,
    position: Option<&str>,
    path: &Path,
    kind: Kind,
    first_row: usize,
) -> Result<(RecordBatch, Option<Vec<u64>>), String> {
    let file_schema = batch.schema();
    for f in file_schema.fields() {
        if declared.field_with_name(f.name()).is_err() && Some(f.name().as_str()) != position {
            return Err(format!(
                "{}: column {:?} is not a column of the stream (it declares: {})",
                path.display(),
                f.name(),
                names(declared)
            ));
        }
    }
    let convert = |name: &str, input: &ArrayRef, to: &DataType| -> Result<ArrayRef, String> {
        if input.data_type() == to {
            return Ok(input.clone());
        }
        let safe = CastOptions {
            safe: true,
            ..CastOptions::default()
        };
        let out = cast_with_options(input, to, &safe).map_err(|e| {
            format!(
                "{}: column {name:?} is {} and cannot become {to}: {e}",
                path.display(),
                input.data_type()
            )
        })?;
        // A float cast to an integer truncates: refuse any value that does not survive.
        let differs = if input.data_type().is_floating() && to.is_integer() {
            let back = cast_with_options(&out, input.data_type(), &safe)
                .map_err(|e| format!("{}: column {name:?}: {e}", path.display()))?;
            Some(
                arrow::compute::kernels::cmp::neq(&back, input)
                    .map_err(|e| format!("{}: column {name:?}: {e}", path.display()))?,
            )
        } else {
            None
        };
        let lossy = |r: usize| {
            differs
                .as_ref()
                .is_some_and(|d| d.is_valid(r) && d.value(r))
        };
        if let Some(row) =
            (0..input.len()).find(|&r| input.is_valid(r) && (out.is_null(r) || lossy(r)))
        {
            let shown = arrow::util::display::array_value_to_string(input, row).unwrap_or_default();
            return Err(format!(
                "{}, {}, column {name:?}: value {shown:?} is not a valid {to}",
                path.display(),
                kind.locate(first_row + row)
            ));
        }
        Ok(out)
    };
    let mut arrays = Vec::with_capacity(declared.fields().len());
    for f in declared.fields() {
        let input = batch.column_by_name(f.name()).ok_or_else(|| {
            format!(
                "{}: missing column {:?} (the file has: {})",
                path.display(),
                f.name(),
                names(&file_schema)
            )
        })?;
        arrays.push(convert(f.name(), input, f.data_type())?);
    }
    let shaped = RecordBatch::try_new(declared.clone(), arrays).map_err(|e| {
        // A null in a not-nullable column: find it to name it.
        let detail = declared
            .fields()
            .iter()
            .filter(|f| !f.is_nullable())
            .find_map(|f| {
                let c = batch.column_by_name(f.name())?;
                (0..c.len()).find(|&r| c.is_null(r)).map(|r| {
                    format!(
                        "{}, column {:?}: empty value",
                        kind.locate(first_row + r),
                        f.name()
                    )
                })
            })
            .unwrap_or_else(|| e.to_string());
        format!("{}, {detail}", path.display())
    })?;
    let positions = match position {
        None => None,
        Some(name) => {
            let input = batch
                .column_by_name(name)
                .ok_or_else(|| format!("{}: missing position column {name:?}", path.display()))?;
            let cast = convert(name, input, &DataType::UInt64)?;
            let values = cast
                .as_any()
                .downcast_ref::<UInt64Array>()
                .expect("cast to UInt64");
            if let Some(r) = (0..values.len()).find(|&r| values.is_null(r)) {
                return Err(format!(
                    "{}, {}, column {name:?}: empty position",
                    path.display(),
                    kind.locate(first_row + r)
                ));
            }
            Some(values.values().to_vec())
        }
    };
    Ok((shaped, positions))
}

/// Expands the FILE arguments (a directory means every file in it, sorted).
pub fn expand(files: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for f in files {
        if f.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(f)
                .map_err(|e| format!("{}: {e}", f.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            inner.sort();
            out.extend(inner);
        } else if f.is_file() {
            out.push(f.clone());
        } else {
            return Err(format!("{}: no such file", f.display()));
        }
    }
    Ok(out)
}
