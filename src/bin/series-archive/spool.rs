//! The checked input between ingest's one read and its staging.
//!
//! `ingest` must leave the archive exactly as it was when any row of the input is bad, yet
//! seal a barrier every `--seal-rows` rows. So it reads and checks the whole input first and
//! stages afterwards. Reading twice doubles the cost of parsing, the dominant cost of a CSV;
//! instead every shaped, checked batch is kept here: in memory up to a budget, then appended
//! to an Arrow IPC file in a temporary directory (`TMPDIR`), which is removed when the spool
//! is dropped. Replaying it decodes no text.

use arrow::array::{Array, ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::sync::Arc;

/// The column a spilled batch carries its positions in (never a stream column: the spool's
/// schema is its own).
const POSITIONS: &str = "__spool_positions";

/// Where a spooled batch came from, to name it if staging refuses it after all.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// Index of the file in the ingest's file list.
    pub file: usize,
    /// The batch's first row within that file.
    pub first_row: usize,
}

/// One checked delivery.
pub struct Delivery {
    pub origin: Origin,
    pub batch: RecordBatch,
    pub positions: Vec<u64>,
}

/// Checked deliveries in input order: the first ones in memory, the rest spilled.
pub struct Spool {
    schema: SchemaRef,
    budget: usize,
    held: usize,
    memory: Vec<Delivery>,
    spilled: Option<Spill>,
    /// Origins of the spilled batches, in order (an IPC batch carries no such metadata).
    spilled_origins: Vec<Origin>,
    rows: usize,
}

struct Spill {
    dir: tempfile::TempDir,
    writer: FileWriter<BufWriter<File>>,
}

impl Spool {
    /// A spool for batches of `schema`, holding up to `budget` bytes of Arrow memory before it
    /// spills to a file in a temporary directory.
    pub fn new(schema: SchemaRef, budget: usize) -> Spool {
        Spool {
            schema,
            budget,
            held: 0,
            memory: Vec::new(),
            spilled: None,
            spilled_origins: Vec::new(),
            rows: 0,
        }
    }

    /// Rows spooled so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether checked input is kept in the temporary file (past the memory budget).
    pub fn spilled(&self) -> bool {
        self.spilled.is_some()
    }

    /// Bytes spilled to disk so far (0 when everything fits in memory).
    pub fn spilled_bytes(&mut self) -> u64 {
        let Some(spill) = self.spilled.as_mut() else {
            return 0;
        };
        // What the buffer holds counts too.
        let _ = std::io::Write::flush(spill.writer.get_mut());
        spill
            .writer
            .get_ref()
            .get_ref()
            .metadata()
            .map_or(0, |m| m.len())
    }

    /// Keeps one checked delivery.
    pub fn push(&mut self, delivery: Delivery) -> Result<(), String> {
        self.rows += delivery.batch.num_rows();
        let size = delivery.batch.get_array_memory_size() + delivery.positions.len() * 8;
        if self.spilled.is_none() && self.held + size <= self.budget {
            self.held += size;
            self.memory.push(delivery);
            return Ok(());
        }
        if self.spilled.is_none() {
            self.spilled = Some(self.start_spill()?);
        }
        let spill = self.spilled.as_mut().ok_or("the spool has no spill file")?;
        let mut columns: Vec<ArrayRef> = delivery.batch.columns().to_vec();
        columns.push(Arc::new(UInt64Array::from(delivery.positions)));
        let batch = RecordBatch::try_new(spill.writer.schema().clone(), columns)
            .map_err(|e| format!("spooling a checked batch: {e}"))?;
        spill.writer.write(&batch).map_err(|e| {
            format!(
                "spilling checked input to {}: {e} (set TMPDIR to a directory with room for the input as Arrow)",
                spill.dir.path().display()
            )
        })?;
        self.spilled_origins.push(delivery.origin);
        Ok(())
    }

    fn start_spill(&self) -> Result<Spill, String> {
        let dir = tempfile::Builder::new()
            .prefix("series-archive-ingest-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory for the checked input: {e}"))?;
        let path = dir.path().join("checked.arrow");
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(POSITIONS, DataType::UInt64, false));
        let writer = FileWriter::try_new(BufWriter::new(file), &Schema::new(fields))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Spill { dir, writer })
    }

    /// Every delivery in input order: the held ones, then the spilled ones read back.
    pub fn replay(self) -> Result<impl Iterator<Item = Result<Delivery, String>>, String> {
        let spilled = match self.spilled {
            None => None,
            Some(mut spill) => {
                spill
                    .writer
                    .finish()
                    .map_err(|e| format!("finishing the spill file: {e}"))?;
                let path = spill.dir.path().join("checked.arrow");
                let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let reader = FileReader::try_new(BufReader::new(file), None)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Some((spill.dir, reader))
            }
        };
        let schema = self.schema;
        let from_disk = spilled.into_iter().flat_map(move |(dir, reader)| {
            let schema = schema.clone();
            // The directory lives as long as its reader.
            let dir = Arc::new(dir);
            reader
                .zip(self.spilled_origins.clone())
                .map(move |(batch, origin)| {
                    let _keep = &dir;
                    let batch = batch.map_err(|e| format!("reading the spill file back: {e}"))?;
                    let width = batch.num_columns() - 1;
                    let positions = batch
                        .column(width)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or("the spill file's positions are not UInt64")?
                        .values()
                        .to_vec();
                    let batch =
                        RecordBatch::try_new(schema.clone(), batch.columns()[..width].to_vec())
                            .map_err(|e| format!("reading the spill file back: {e}"))?;
                    Ok(Delivery {
                        origin,
                        batch,
                        positions,
                    })
                })
        });
        Ok(self.memory.into_iter().map(Ok).chain(from_disk))
    }
}
