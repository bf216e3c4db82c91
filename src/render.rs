//! Rows as they are handed out (the command line's `rows`, the server's `/api/rows`): without
//! the archive's own bookkeeping, and in a shape every output format can hold.

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use std::sync::Arc;

/// The batch without `_seq` ([`crate::archive::SEQ_COLUMN`]): internal bookkeeping, never
/// an output field.
pub fn without_seq(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != crate::archive::SEQ_COLUMN)
        .collect();
    batch.project(&keep)
}

/// The batch with every nested column (a list, such as a histogram's counts) as text,
/// `[1, null, 3]`, which CSV can hold; the batch itself when it has none.
pub fn flat(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
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
            columns.push(Arc::new(text));
        } else {
            fields.push(f.as_ref().clone());
            columns.push(c.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}
