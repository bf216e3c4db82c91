//! Writing rows out: CSV, JSON lines or Parquet, to a file or standard output.

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use std::io::Write;
use std::path::Path;

/// Output formats of `rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Comma-separated values with a header.
    Csv,
    /// One JSON object per line.
    Jsonl,
    /// A Parquet file (needs --out).
    Parquet,
}

/// Refuses an output file inside the archive (it could replace a manifest generation or a
/// data file: the archive would be destroyed by a typo), and an existing file unless
/// `force`. Checked before anything is read or written.
pub fn check_target(archive: &Path, out: &Path, force: bool) -> Result<(), String> {
    let absolute = |p: &Path| -> Option<std::path::PathBuf> {
        // The file may not exist yet: resolve its directory, then add its name.
        let name = p.file_name()?;
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(parent).ok()?.join(name))
    };
    if let (Ok(root), Some(target)) = (std::fs::canonicalize(archive), absolute(out)) {
        let resolved = std::fs::canonicalize(&target).unwrap_or(target);
        if resolved.starts_with(&root) {
            return Err(format!(
                "{}: is inside the archive {}; write output elsewhere (a file there could replace the archive's own)",
                out.display(),
                archive.display()
            ));
        }
    }
    if out.is_dir() {
        return Err(format!(
            "{}: is a directory; give a file name",
            out.display()
        ));
    }
    if !force && out.exists() {
        return Err(format!(
            "{}: exists; give --force to replace it, or another name",
            out.display()
        ));
    }
    Ok(())
}

/// Writes `batch` in `format` to `out` (standard output when `None`).
pub fn write(batch: &RecordBatch, format: Format, out: Option<&Path>) -> Result<(), String> {
    let sink: Box<dyn Write + Send> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None if format == Format::Parquet => {
            return Err("--format parquet writes a file: give --out FILE".into());
        }
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    // A reader that stops early (`| head`) closes the pipe: that ends the program quietly.
    let to_stdout = out.is_none();
    let fail = |e: &dyn std::fmt::Display| {
        let text = e.to_string();
        if to_stdout && (text.contains("Broken pipe") || text.contains("os error 32")) {
            std::process::exit(0);
        }
        format!("writing rows: {text}")
    };
    match format {
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(sink);
            w.write(&flat(batch).map_err(|e| fail(&e))?)
                .map_err(|e| fail(&e))?;
            w.into_inner().flush().map_err(|e| fail(&e))
        }
        Format::Jsonl => {
            let mut w = arrow::json::LineDelimitedWriter::new(sink);
            w.write(batch).map_err(|e| fail(&e))?;
            w.finish().map_err(|e| fail(&e))?;
            w.into_inner().flush().map_err(|e| fail(&e))
        }
        Format::Parquet => {
            let mut w = ArrowWriter::try_new(sink, batch.schema(), None).map_err(|e| fail(&e))?;
            w.write(batch).map_err(|e| fail(&e))?;
            w.close().map(|_| ()).map_err(|e| fail(&e))
        }
    }
}

/// The batch without `_seq`: internal bookkeeping, never an output field.
pub(crate) fn without_seq(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != series_archive::archive::SEQ_COLUMN)
        .collect();
    batch.project(&keep)
}

/// The batch with every nested column (a list, such as a histogram's counts) as text,
/// `[1, null, 3]`, which CSV can hold.
pub(crate) fn flat(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::array::{ArrayRef, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| f.data_type().is_nested())
    {
        return Ok(batch.clone());
    }
    let options = FormatOptions::default().with_null("null");
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if f.data_type().is_nested() {
            let shown = ArrayFormatter::try_new(c.as_ref(), &options)?;
            let text: StringArray = (0..c.len())
                .map(|i| c.is_valid(i).then(|| shown.value(i).to_string()))
                .collect();
            fields.push(Field::new(f.name(), DataType::Utf8, f.is_nullable()));
            columns.push(std::sync::Arc::new(text));
        } else {
            fields.push(f.as_ref().clone());
            columns.push(c.clone());
        }
    }
    RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns)
}
