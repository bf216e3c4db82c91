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

/// Rows per batch a file is read in, at most.
const BATCH_ROWS: usize = 64 * 1024;

/// Values (rows × columns) per batch, at most. The readers allocate for a whole batch up
/// front (arrow-csv keeps an offset per field, arrow-json two tape elements per field, the
/// Parquet reader a buffer per column), so a fixed row count made memory follow rows ×
/// columns: one row of 10 000 columns took 10 GB. Rows per batch shrink as columns grow,
/// and memory follows the bytes read.
const BATCH_VALUES: usize = 1 << 20;

/// Rows per batch for a file of `columns` columns.
fn batch_rows(columns: usize) -> usize {
    (BATCH_VALUES / columns.max(1)).clamp(1, BATCH_ROWS)
}

/// Columns a file may have, at most. Reading is bounded by the bytes read whatever the width
/// (see [`BATCH_VALUES`]), but sealing costs memory per column (a Parquet column writer
/// each, about 25 KiB): 10 000 columns seal in about 300 MiB, 100 000 would take 2.3 GiB.
pub const MAX_COLUMNS: usize = 10_000;

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
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        return Err(format!(
            "{}: no rows in the file (it is empty; leave it out)",
            path.display()
        ));
    }
    let schema = inferred_schema(path)?;
    if schema.fields().len() > MAX_COLUMNS {
        return Err(format!(
            "{}: {} columns; a stream holds at most {MAX_COLUMNS} (split the columns over several streams)",
            path.display(),
            schema.fields().len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, field) in schema.fields().iter().enumerate() {
        if field.name().trim().is_empty() {
            return Err(format!(
                "{}: column {} (of {}) has no name{}; name it, or remove it (an empty name would be a column named {:?})",
                path.display(),
                i + 1,
                schema.fields().len(),
                if matches!(Kind::of(path), Ok(Kind::Csv)) {
                    " in the header (a trailing comma makes one)"
                } else {
                    ""
                },
                field.name()
            ));
        }
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

/// Checks one JSON object: each key is a column the file's columns were read as (a key first
/// seen past the inference window would be dropped by the decoder), none repeats (a JSON
/// parser keeps the last value and drops the first, silently), and each value is one its
/// column's type holds as it is (see [`JsonValue`]). Values are checked, not built.
struct ObjectKeys<'a> {
    /// Each column and the type it is decoded as; `None` while the columns are not known
    /// yet (any key, any value, only parsed).
    known: Option<&'a std::collections::HashMap<String, DataType>>,
    /// What is wrong, with the column, for the message (a serde error has no room for it).
    problem: &'a std::cell::RefCell<Option<String>>,
    /// Set when a float column's number parsed as zero: the line's text is then looked at
    /// for a number too small for a float (`1e-400`), which parses as zero too.
    zero: &'a std::cell::Cell<bool>,
}

/// Checks one JSON value against the type its column is decoded as. arrow-json converts
/// where it should refuse: a string `"7"` parsed into an Int64 column, `7.5` truncated to 7,
/// `true` into a number column, a number past ±1.8e308 stored as infinity. A number column
/// takes JSON numbers (an integer column integers within its range), a boolean column
/// booleans, a text column strings, numbers and booleans (their text); null is a missing
/// value. Other types are left to the decoder.
struct JsonValue<'a> {
    /// The column, then the keys and list positions down to this value (`m.x`, `l[2]`).
    column: std::borrow::Cow<'a, str>,
    to: &'a DataType,
    problem: &'a std::cell::RefCell<Option<String>>,
    zero: &'a std::cell::Cell<bool>,
}

impl<'a> JsonValue<'a> {
    fn refuse<E: serde::de::Error>(&self, what: String) -> E {
        let message = format!(
            ", column {:?}: {what}; its type is {} (nothing is converted: fix the value)",
            self.column, self.to
        );
        self.problem.borrow_mut().get_or_insert(message.clone());
        E::custom(message)
    }

    /// The check of a value within this one (a list's element, an object's field).
    fn within(&self, at: String, to: &'a DataType) -> JsonValue<'a> {
        JsonValue {
            column: std::borrow::Cow::Owned(format!("{}{at}", self.column)),
            to,
            problem: self.problem,
            zero: self.zero,
        }
    }

    fn integer_range(&self) -> Option<(i128, i128)> {
        Some(match self.to {
            DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
            DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
            DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
            DataType::Int64 => (i64::MIN.into(), i64::MAX.into()),
            DataType::UInt8 => (0, u8::MAX.into()),
            DataType::UInt16 => (0, u16::MAX.into()),
            DataType::UInt32 => (0, u32::MAX.into()),
            DataType::UInt64 => (0, series_archive::archive::MAX_STORED.into()),
            _ => return None,
        })
    }

    fn is_text(&self) -> bool {
        matches!(
            self.to,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        )
    }

    /// A type this check knows; others are left to the decoder.
    fn checked(&self) -> bool {
        self.integer_range().is_some()
            || self.to.is_floating()
            || self.is_text()
            || matches!(
                self.to,
                DataType::Boolean
                    | DataType::List(_)
                    | DataType::LargeList(_)
                    | DataType::Struct(_)
            )
    }

    /// `integral`: the value as an integer when it is one; `written_integer`: whether the
    /// JSON wrote it as an integer (`7`, not `7.0` or `7e0`).
    fn number<E: serde::de::Error>(
        &self,
        integral: Option<i128>,
        v: f64,
        written_integer: bool,
    ) -> Result<(), E> {
        // An integer a float column cannot hold exactly (past 2^53 for Float64, 2^24 for
        // Float32) would be stored rounded. (A number written with a fraction or an exponent
        // is stored as the nearest float, as every decimal fraction is.)
        if let Some(i) = integral.filter(|_| written_integer) {
            let exact = !self.to.is_floating() || narrowed(self.to, i as f64) as i128 == i;
            if !exact {
                return Err(self.refuse(format!(
                    "value {i} is an integer this float type cannot hold exactly (it would be stored rounded)"
                )));
            }
        }
        // A number written with a fraction or an exponent that parsed as zero: the line's text
        // tells whether it said zero (`0.0`) or was too near zero to hold (`1e-400`), for an
        // integer column as for a float one (see `underflow`).
        if v == 0.0 && !written_integer && !self.is_text() {
            self.zero.set(true);
        }
        if let Some((min, max)) = self.integer_range() {
            return match integral {
                Some(i) if (min..=max).contains(&i) => Ok(()),
                Some(i) => Err(self.refuse(format!("value {i} is out of its range"))),
                None => Err(self.refuse(format!("value {v} is not an integer"))),
            };
        }
        let limit = match self.to {
            DataType::Float16 => 65504.0,
            DataType::Float32 => f64::from(f32::MAX),
            _ => f64::MAX,
        };
        if self.to.is_floating() && v.abs() > limit {
            return Err(self.refuse(format!(
                "value {v} is out of its range (it would be stored as infinity)"
            )));
        }
        // A number nearer zero than the type's smallest (1e-50 in a Float32 column) would be
        // stored as zero. (Past a 64-bit float's, serde_json has parsed it as zero already:
        // the line's text is looked at, see `underflow`.)
        if self.to.is_floating() && v != 0.0 && narrowed(self.to, v) == 0.0 {
            return Err(self.refuse(format!(
                "value {v:?} is too near zero for its type (it would be stored as 0)"
            )));
        }
        if self.to.is_floating() || self.is_text() || !self.checked() {
            return Ok(());
        }
        Err(self.refuse(format!("value {v} is a JSON number")))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for JsonValue<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.checked() {
            d.deserialize_any(self)
        } else {
            d.deserialize_any(Parsed)
        }
    }
}

/// Any JSON value, parsed (not skipped: a number past ±1.8e308 is refused) and dropped.
struct Parsed;

impl<'de> serde::de::DeserializeSeed<'de> for Parsed {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Parsed {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Parsed)?.is_some() {}
        Ok(())
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while map.next_key_seed(Parsed)?.is_some() {
            map.next_value_seed(Parsed)?;
        }
        Ok(())
    }
}

impl<'de> serde::de::Visitor<'de> for JsonValue<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a value of type {}", self.to)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        if *self.to == DataType::Boolean || self.is_text() {
            return Ok(());
        }
        Err(self.refuse(format!("value {v} is a JSON boolean")))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.number(Some(v.into()), v as f64, true)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.number(Some(v.into()), v as f64, true)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        // Integral and finite: exact as an i128 (every such f64 below 2^127 is).
        let integral = (v.is_finite() && v.fract() == 0.0 && v.abs() < 1.7e38).then_some(v as i128);
        self.number(integral, v, false)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        if self.is_text() {
            return Ok(());
        }
        Err(self.refuse(format!(
            "value {v:?} is a JSON string{}",
            if *self.to == DataType::Boolean {
                " (write true or false unquoted)"
            } else {
                " (write a number unquoted)"
            }
        )))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // A list's elements are checked as values of its element type.
        if let DataType::List(item) | DataType::LargeList(item) = self.to {
            let mut at = 0usize;
            while seq
                .next_element_seed(self.within(format!("[{at}]"), item.data_type()))?
                .is_some()
            {
                at += 1;
            }
            return Ok(());
        }
        while seq.next_element_seed(Parsed)?.is_some() {}
        Err(self.refuse("the value is a JSON array".into()))
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        // An object's keys are its struct's fields, each once (a key the struct does not
        // have would be dropped by the decoder), each value checked as its field's type.
        if let DataType::Struct(fields) = self.to {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let Some(field) = fields.iter().find(|f| f.name() == &key) else {
                    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
                    return Err(self.refuse(format!(
                        "key {key:?} is not among its fields ({}) as the file's first {INFERENCE_ROWS} rows name them (it would be dropped)",
                        names.join(", ")
                    )));
                };
                if !seen.insert(key.clone()) {
                    return Err(self.refuse(format!(
                        "key {key:?} appears twice in one object (a reader would keep one and drop the other)"
                    )));
                }
                map.next_value_seed(self.within(format!(".{key}"), field.data_type()))?;
            }
            return Ok(());
        }
        while map.next_key_seed(Parsed)?.is_some() {
            map.next_value_seed(Parsed)?;
        }
        Err(self.refuse("the value is a JSON object".into()))
    }
}

/// `v` as a float column of type `to` stores it, read back as f64 (`v` itself for a type
/// that is not a float).
fn narrowed(to: &DataType, v: f64) -> f64 {
    type Half = <arrow::datatypes::Float16Type as arrow::datatypes::ArrowPrimitiveType>::Native;
    match to {
        DataType::Float32 => f64::from(v as f32),
        DataType::Float16 => Half::from_f64(v).to_f64(),
        _ => v,
    }
}

/// Whether a number's text has a digit other than zero before its exponent (`1e-400` has,
/// `-0.0e5` has not): text that must not be stored as zero.
fn nonzero_digits(number: &str) -> bool {
    number
        .split(['e', 'E'])
        .next()
        .unwrap_or_default()
        .bytes()
        .any(|b| matches!(b, b'1'..=b'9'))
}

/// The first number in a JSON line whose digits are not all zero but which parses as a 64-bit
/// float's zero (`1e-400`), with the key before it, unless `skip` says that key's numbers are
/// not judged; `None` when there is none. Strings are stepped over, escapes included.
fn underflow(line: &[u8], skip: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let mut key = String::new();
    let mut at = 0;
    while at < line.len() {
        match line[at] {
            b'"' => {
                let start = at + 1;
                at = start;
                while at < line.len() && line[at] != b'"' {
                    at += if line[at] == b'\\' { 2 } else { 1 };
                }
                key = String::from_utf8_lossy(&line[start..at.min(line.len())]).into_owned();
                at += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while at < line.len()
                    && matches!(line[at], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    at += 1;
                }
                let number = std::str::from_utf8(&line[start..at]).unwrap_or_default();
                if nonzero_digits(number) && number.parse::<f64>() == Ok(0.0) && !skip(&key) {
                    return Some((key, number.to_string()));
                }
            }
            _ => at += 1,
        }
    }
    None
}

/// A serde_json message without its position (`at line 1 column 9`: the line within one
/// line's slice, which would mislead).
fn without_position(text: &str) -> &str {
    text.rsplit_once(" at line ")
        .map_or(text, |(message, _)| message)
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
        let refuse = |message: String| {
            self.problem
                .borrow_mut()
                .get_or_insert(format!(": {message}"));
            serde::de::Error::custom(message)
        };
        while let Some(key) = map.next_key::<String>()? {
            let to = match self.known {
                None => &DataType::Null,
                Some(known) => match known.get(&key) {
                    Some(to) => to,
                    None => {
                        return Err(refuse(format!(
                    "column {key:?} is not among the file's columns as its first {INFERENCE_ROWS} rows name them; name it there, or ingest this file into its own stream"
                        )))
                    }
                },
            };
            if !seen.insert(key.clone()) {
                return Err(refuse(format!(
                    "column {key:?} appears twice in one object; rename one of them (a reader would keep one and drop the other)"
                )));
            }
            let value = JsonValue {
                column: std::borrow::Cow::Borrowed(&key),
                to,
                problem: self.problem,
                zero: self.zero,
            };
            map.next_value_seed(value).inspect_err(|e: &M::Error| {
                // A value serde_json itself refused (a number past ±1.8e308): name the column.
                let text = e.to_string();
                let text = without_position(&text);
                self.problem.borrow_mut().get_or_insert(format!(
                    ", column {key:?}: {text}{}",
                    if text.starts_with("number out of range") {
                        " (past ±1.8e308, it would be stored as infinity)"
                    } else {
                        ""
                    }
                ));
            })?;
        }
        Ok(())
    }
}

/// A JSON-lines file read once: each chunk of whole lines is checked line by line (one object
/// per line, its keys known and none repeated) and then handed, the same bytes, to arrow-json's
/// decoder.
struct JsonLines<R> {
    reader: R,
    /// The columns the file is decoded as, with their types.
    known: std::collections::HashMap<String, DataType>,
    /// The last line's problem, for its message.
    problem: std::cell::RefCell<Option<String>>,
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
            let zero = std::cell::Cell::new(false);
            ObjectKeys {
                known: Some(&self.known),
                problem: &self.problem,
                zero: &zero,
            }
            .deserialize(&mut de)
            .and_then(|()| de.end())
            .and_then(|()| {
                // A number written into a text column is stored as its text: not judged.
                let text_column = |key: &str| {
                    self.known.get(key).is_some_and(|t| {
                        matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
                    })
                };
                match zero.get().then(|| underflow(line, text_column)).flatten() {
                None => Ok(()),
                Some((key, number)) => {
                    *self.problem.borrow_mut() = Some(format!(
                        ", column {key:?}: value {number} is too near zero to be held (it would be stored as 0; nothing is converted: fix the value)"
                    ));
                    Err(serde::de::Error::custom("underflow"))
                }
            }})
            .map_err(|e| {
                let detail = self.problem.take().unwrap_or_else(|| {
                    format!(": {e} (a JSON-lines file holds one JSON object per line)")
                });
                format!(
                    "{}: row {} (line {}){detail}",
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
    let rows = batch_rows(schema.fields().len());
    arrow::json::ReaderBuilder::new(schema)
        .with_batch_size(rows)
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
            .map_err(|e| locate_json(path).unwrap_or_else(|| fail(&e)))?;
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

/// Where the first `INFERENCE_ROWS` objects of a JSON-lines file go wrong, as row, line and
/// column: arrow-json's inference names neither (a number past ±1.8e308, a line that is not
/// one object). `None` when they read whole.
fn locate_json(path: &Path) -> Option<String> {
    use serde::de::DeserializeSeed;
    use std::io::BufRead;
    let file = File::open(path).ok()?;
    let problem = std::cell::RefCell::new(None);
    let mut row = 0;
    for (at, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.ok()?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if row == INFERENCE_ROWS {
            return None;
        }
        let mut de = serde_json::Deserializer::from_slice(&line);
        let read = ObjectKeys {
            known: None,
            problem: &problem,
            zero: &std::cell::Cell::new(false),
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        if let Err(e) = read {
            let detail = problem.take().unwrap_or_else(|| {
                format!(": {e} (a JSON-lines file holds one JSON object per line)")
            });
            return Some(format!(
                "{}: row {row} (line {}){detail}",
                path.display(),
                at + 1
            ));
        }
        row += 1;
    }
    None
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
/// bytes read. A JSON-lines file is decoded straight into the `declared` types (and the
/// `position` column as UInt64), every value checked against them first: its reader would
/// otherwise convert what it should refuse.
pub fn batches(
    path: &Path,
    schema: SchemaRef,
    declared: &Schema,
    position: Option<&str>,
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
            let rows = batch_rows(text.len());
            let reader = arrow::csv::ReaderBuilder::new(Arc::new(Schema::new(text)))
                .with_header(true)
                .with_batch_size(rows)
                .build(bar.wrap_read(file))
                .map_err(|e| fail(&e))?;
            Box::new(reader.map(move |b| b.map_err(|e| fail(&e))))
        }
        Kind::JsonLines => {
            let wanted: std::collections::HashMap<&str, &DataType> = declared
                .fields()
                .iter()
                .map(|f| (f.name().as_str(), f.data_type()))
                .collect();
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .map(|f| {
                    let to = if Some(f.name().as_str()) == position {
                        DataType::UInt64
                    } else {
                        wanted
                            .get(f.name().as_str())
                            .map_or_else(|| f.data_type().clone(), |&t| t.clone())
                    };
                    // Nullable: `shape` names the row of a missing coordinate.
                    Field::new(f.name(), to, true)
                })
                .collect();
            let known = fields
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect();
            let schema = Arc::new(Schema::new(fields));
            let decoder = json_decoder(schema.clone()).map_err(|e| fail(&e))?;
            Box::new(JsonLines {
                reader: bar.wrap_read(file),
                known,
                problem: std::cell::RefCell::new(None),
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
            let columns = builder.schema().fields().len();
            let reader = builder
                .with_batch_size(batch_rows(columns))
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

/// Refuses a `UInt64` value the archive cannot store (above 2^63 - 1: files hold integers
/// as signed 64-bit values, the only kind a Delta reader takes), naming where it is.
fn refuse_unstorable(
    array: &ArrayRef,
    name: &str,
    path: &Path,
    kind: Kind,
    first_row: usize,
) -> Result<(), String> {
    let max = series_archive::archive::MAX_STORED;
    let Some((row, value)) = series_archive::archive::first_unstorable_anywhere(array.as_ref())
    else {
        return Ok(());
    };
    Err(format!(
        "{}, {}, column {name:?}: value {value} is above {max} (2^63 - 1), the largest integer the archive stores (its files hold signed 64-bit integers, the only kind every Delta reader takes)",
        path.display(),
        kind.locate(first_row + row),
    ))
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
    // By name, through maps: a wide file (thousands of columns) is not a quadratic search.
    let declared_names: std::collections::HashSet<&str> = declared
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    let file_columns: std::collections::HashMap<&str, &ArrayRef> = file_schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| (f.name().as_str(), c))
        .collect();
    for f in file_schema.fields() {
        if !declared_names.contains(f.name().as_str()) && Some(f.name().as_str()) != position {
            return Err(format!(
                "{}: column {:?} is not a column of the stream (it declares: {})",
                path.display(),
                f.name(),
                names(declared)
            ));
        }
    }
    let shown = |input: &dyn Array, row: usize| {
        arrow::util::display::array_value_to_string(input, row).unwrap_or_default()
    };
    let convert = |name: &str, input: &ArrayRef, to: &DataType| -> Result<ArrayRef, String> {
        if input.data_type() == to {
            return Ok(input.clone());
        }
        let safe = CastOptions {
            safe: true,
            ..CastOptions::default()
        };
        let cast = |a: &dyn Array, t: &DataType| {
            cast_with_options(a, t, &safe).map_err(|e| {
                format!(
                    "{}: column {name:?} is {} and cannot become {t}: {e}",
                    path.display(),
                    a.data_type()
                )
            })
        };
        // A column of the Null type (all its values missing) is missing values of any type.
        if *input.data_type() == DataType::Null {
            return Ok(arrow::array::new_null_array(to, input.len()));
        }
        // A dictionary holds its values' type: judge (and convert) those.
        let input = match input.data_type() {
            DataType::Dictionary(_, values) => cast(input.as_ref(), values)?,
            _ => input.clone(),
        };
        // A CSV column is read as text: casting it is parsing it. A JSON or Parquet column
        // has a type of its own, converted only where every value survives as it is.
        let from = input.data_type();
        let text_source = kind == Kind::Csv;
        if !text_source && !convertible(from, to) && input.null_count() < input.len() {
            let row = (0..input.len()).find(|&r| input.is_valid(r)).unwrap_or(0);
            return Err(format!(
                "{}, {}, column {name:?}: the file holds {from} and the column is {to} (value {:?}); nothing is converted: write the column as {to}",
                path.display(),
                kind.locate(first_row + row),
                shown(input.as_ref(), row)
            ));
        }
        let out = cast(input.as_ref(), to)?;
        let numeric = |t: &DataType| t.is_integer() || t.is_floating();
        let neq = |a: &dyn Array, b: &dyn Array| {
            arrow::compute::kernels::cmp::neq(&a, &b)
                .map_err(|e| format!("{}: column {name:?}: {e}", path.display()))
        };
        // A number that becomes another number type survives the way back, or is refused (a
        // float truncated to an integer, an integer past 2^53 rounded as a float). A value
        // whose way back fails (rounded past the source type's maximum) did not survive.
        let differs = if numeric(from) && numeric(to) {
            let back = cast(out.as_ref(), from)?;
            Some(neq(back.as_ref(), input.as_ref())?)
        } else {
            None
        };
        // Text parsed as a time, a date or a decimal is parsed again at the finest grain
        // (nanoseconds, 18 decimal places) and must equal the value stored: a fraction of a
        // second dropped by a coarser unit, the time of a date-time dropped by a date
        // column, a decimal rounded to the column's scale are refused.
        let text = matches!(
            from,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        let finest = match to {
            DataType::Timestamp(_, zone) => Some(DataType::Timestamp(
                arrow::datatypes::TimeUnit::Nanosecond,
                zone.clone(),
            )),
            DataType::Date32 | DataType::Date64 => Some(DataType::Timestamp(
                arrow::datatypes::TimeUnit::Nanosecond,
                None,
            )),
            DataType::Time32(_) | DataType::Time64(_) => {
                Some(DataType::Time64(arrow::datatypes::TimeUnit::Nanosecond))
            }
            DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) => {
                Some(DataType::Decimal256(76, (*scale).max(18)))
            }
            _ => None,
        };
        let parsed_differs = match finest.filter(|_| text) {
            Some(finest) => {
                let fine = cast(input.as_ref(), &finest)?;
                let stored = cast(out.as_ref(), &finest)?;
                Some(neq(fine.as_ref(), stored.as_ref())?)
            }
            None => None,
        };
        // Text parsed as a boolean says true or false (any case): a cast would also take
        // `yes`, `on`, `1` or `t`, which is a word the file holds, not the boolean stored.
        // The words are compared where they lie, nothing rendered a row.
        let words = match text && *to == DataType::Boolean {
            true => Some(cast(input.as_ref(), &DataType::Utf8)?),
            false => None,
        };
        let words = words
            .as_ref()
            .and_then(|w| w.as_any().downcast_ref::<arrow::array::StringArray>());
        let not_a_boolean = |r: usize| {
            words.is_some_and(|w| {
                let word = w.value(r).trim();
                !word.eq_ignore_ascii_case("true") && !word.eq_ignore_ascii_case("false")
            })
        };
        let lossy = |r: usize| {
            differs
                .as_ref()
                .is_some_and(|d| !d.is_valid(r) || d.value(r))
                || parsed_differs
                    .as_ref()
                    .is_some_and(|d| d.is_valid(r) && d.value(r))
                || not_a_boolean(r)
        };
        if let Some(row) =
            (0..input.len()).find(|&r| input.is_valid(r) && (out.is_null(r) || lossy(r)))
        {
            let stored = match out.is_valid(row) {
                true => format!(
                    " (it would be stored as {}, which is not what it says; a --types NAME:TYPE that holds it keeps it whole)",
                    shown(out.as_ref(), row)
                ),
                false => String::new(),
            };
            return Err(format!(
                "{}, {}, column {name:?}: value {:?} is not a valid {to}{stored}",
                path.display(),
                kind.locate(first_row + row),
                shown(input.as_ref(), row)
            ));
        }
        // Text past a float's range parses as infinity: refuse it, unless it says `inf`.
        if text_source && to.is_floating() {
            let wide = cast(out.as_ref(), &DataType::Float64)?;
            let values = wide
                .as_any()
                .downcast_ref::<arrow::array::Float64Array>()
                .ok_or_else(|| format!("{}: column {name:?}: not Float64", path.display()))?;
            let overflow = (0..values.len()).find(|&r| {
                values.is_valid(r) && values.value(r).is_infinite() && {
                    let text = shown(input.as_ref(), r).trim().to_ascii_lowercase();
                    !matches!(text.trim_start_matches(['+', '-']), "inf" | "infinity")
                }
            });
            if let Some(row) = overflow {
                return Err(format!(
                    "{}, {}, column {name:?}: value {:?} is out of the range of {to} (it would be stored as infinity)",
                    path.display(),
                    kind.locate(first_row + row),
                    shown(input.as_ref(), row)
                ));
            }
            // Text too near zero for the type (`1e-400`, or `1e-50` for Float32) parses as
            // zero: refuse it when its digits are not all zero. An integer the type cannot
            // hold exactly (past 2^53 for Float64) parses rounded: refuse it too, as JSON's.
            let texts = input.as_any().downcast_ref::<arrow::array::StringArray>();
            let text = |r: usize| match texts {
                Some(t) => std::borrow::Cow::Borrowed(t.value(r).trim()),
                None => std::borrow::Cow::Owned(shown(input.as_ref(), r)),
            };
            let changed = (0..values.len()).find_map(|r| {
                if !values.is_valid(r) {
                    return None;
                }
                let (stored, text) = (values.value(r), text(r));
                if stored == 0.0 && nonzero_digits(&text) {
                    return Some((r, "is too near zero for"));
                }
                let rounded = text.parse::<i128>().is_ok_and(|i| stored as i128 != i);
                rounded.then_some((r, "is an integer that cannot be held exactly by"))
            });
            if let Some((row, what)) = changed {
                return Err(format!(
                    "{}, {}, column {name:?}: value {:?} {what} {to} (it would be stored as {})",
                    path.display(),
                    kind.locate(first_row + row),
                    shown(input.as_ref(), row),
                    shown(out.as_ref(), row)
                ));
            }
        }
        Ok(out)
    };
    let mut arrays = Vec::with_capacity(declared.fields().len());
    for f in declared.fields() {
        let input = file_columns
            .get(f.name().as_str())
            .copied()
            .ok_or_else(|| {
                format!(
                    "{}: missing column {:?} (the file has: {})",
                    path.display(),
                    f.name(),
                    names(&file_schema)
                )
            })?;
        let array = convert(f.name(), input, f.data_type())?;
        refuse_unstorable(&array, f.name(), path, kind, first_row)?;
        arrays.push(array);
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
            refuse_unstorable(&cast, name, path, kind, first_row)?;
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

/// Whether a value of a Parquet (or JSON) file's own type `from` may be stored as `to`: text
/// as text, bytes as bytes, a number as another number type (each value then checked to
/// survive the way back), and a number or boolean as its text (a track label). Nothing
/// else: text is never parsed into a number, a boolean never becomes a number, a timestamp
/// never becomes an integer of unknown unit.
fn convertible(from: &DataType, to: &DataType) -> bool {
    let text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let bytes = |t: &DataType| {
        matches!(
            t,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        )
    };
    let number = |t: &DataType| t.is_integer() || t.is_floating();
    (text(from) && text(to))
        || (bytes(from) && bytes(to))
        || (number(from) && number(to))
        || ((number(from) || *from == DataType::Boolean) && text(to))
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
