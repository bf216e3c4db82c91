//! The integer types a data or level file stores (format version 5): every unsigned column
//! as the signed type that holds it, because the Delta protocol, and so every engine's
//! default Delta reader, has no unsigned integers. The archive's own columns and the
//! declared types stay what they are in memory; a file is converted on its way to and from
//! the disk, by the rules `docs/format.md` ("Version 5") writes down. Pure.
//!
//! | in memory | on disk (version 5) | Delta |
//! |---|---|---|
//! | `UInt8` | `Int16` | `short` |
//! | `UInt16` | `Int32` | `integer` |
//! | `UInt32` | `Int64` | `long` |
//! | `UInt64` | `Int64`, values at most 2^63 − 1 | `long` |
//!
//! Files of versions 1–4 stored the unsigned types themselves; they are read as they are.

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::buffer::ScalarBuffer;
use arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// The largest unsigned value a version-5 file stores: `i64::MAX`.
pub const MAX_STORED: u64 = i64::MAX as u64;

/// The layout version of a level file, and of a data file written one row group per entry
/// (compaction's single-track segments): the `format` its manifest entry records.
pub const FILE_VERSION: u16 = 5;

/// The value of the `series_archive.format` key a version-5 file carries.
pub const FILE_FORMAT: &str = "5";

/// The `format` a packed data file's manifest entry records: its row groups pack
/// consecutive tracks (the layout of format version 6: signed integers as in version 5,
/// entries that are slices), and since version 9 its entries are recorded as columns
/// (`manifest::columns`). The file's bytes, and its `series_archive.format` key, are version
/// 6's.
pub const PACKED_FILE_VERSION: u16 = 9;

/// The value of the `series_archive.format` key a version-6 (packed) file carries.
pub const PACKED_FILE_FORMAT: &str = "6";

/// The type a column of type `t` is stored as.
pub fn disk_type(t: &DataType) -> DataType {
    match t {
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        other => other.clone(),
    }
}

/// The schema a file of `schema`'s rows is stored with.
pub fn disk_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema.fields().iter().any(|f| changes(f.data_type())) {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_data_type(disk_type(f.data_type())))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn changes(t: &DataType) -> bool {
    disk_type(t) != *t
}

/// A column's values as another 64-bit integer type, sharing the buffer (the caller has
/// checked that every value is at most `i64::MAX`).
fn reinterpret_u64(column: &UInt64Array) -> ArrayRef {
    let values = ScalarBuffer::<i64>::from(column.values().inner().clone());
    Arc::new(Int64Array::new(values, column.nulls().cloned()))
}

fn reinterpret_i64(column: &Int64Array) -> ArrayRef {
    let values = ScalarBuffer::<u64>::from(column.values().inner().clone());
    Arc::new(UInt64Array::new(values, column.nulls().cloned()))
}

/// The rows of `batch` as `disk` (made by [`disk_schema`] of the batch's schema) stores
/// them. A `UInt64` value above `i64::MAX` is refused, naming the column and the row: the
/// places rows enter refuse such values first, so this is the last guard, never a wrap.
pub fn to_disk(batch: &RecordBatch, disk: &SchemaRef) -> Result<RecordBatch, String> {
    if Arc::ptr_eq(batch.schema_ref(), disk) {
        return Ok(batch.clone());
    }
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
        let want = disk_type(field.data_type());
        if want == *column.data_type() {
            columns.push(column.clone());
            continue;
        }
        if let Some(u) = column.as_any().downcast_ref::<UInt64Array>() {
            if let Some(row) = first_unstorable(u) {
                return Err(format!(
                    "column {:?} row {row} holds {}, above the largest value the archive stores (2^63 - 1 = {MAX_STORED})",
                    field.name(),
                    u.value(row)
                ));
            }
            columns.push(reinterpret_u64(u));
            continue;
        }
        columns.push(cast(column, &want, field.name())?);
    }
    RecordBatch::try_new(disk.clone(), columns).map_err(|e| e.to_string())
}

/// A decoded row group as the rows of `expected`: every column whose stored type differs
/// (a version-5 file's signed integers) converted back. A stored value the expected type
/// cannot hold (a negative number where the column is unsigned) is an error: the file is
/// not one this archive wrote.
pub fn from_disk(batch: RecordBatch, expected: &SchemaRef) -> Result<RecordBatch, String> {
    if batch.schema().fields().len() != expected.fields().len() {
        return Err(format!(
            "{} columns stored, {} declared",
            batch.num_columns(),
            expected.fields().len()
        ));
    }
    let stored = batch.schema();
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (i, (column, field)) in batch.columns().iter().zip(expected.fields()).enumerate() {
        let name = stored.field(i).name();
        if name != field.name() {
            return Err(format!(
                "column {i} is {name:?}, declared {:?}",
                field.name()
            ));
        }
        if column.data_type() == field.data_type() {
            columns.push(column.clone());
            continue;
        }
        if let (Some(i), DataType::UInt64) = (
            column.as_any().downcast_ref::<Int64Array>(),
            field.data_type(),
        ) {
            if let Some(row) = first_negative(i) {
                return Err(format!(
                    "column {:?} row {row} holds {}, but the column is unsigned",
                    field.name(),
                    i.value(row)
                ));
            }
            columns.push(reinterpret_i64(i));
            continue;
        }
        columns.push(cast(column, field.data_type(), field.name())?);
    }
    RecordBatch::try_new(expected.clone(), columns).map_err(|e| e.to_string())
}

/// A checked conversion: an out-of-range value is an error, never a null or a wrap.
fn cast(column: &ArrayRef, to: &DataType, name: &str) -> Result<ArrayRef, String> {
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(column, to, &options).map_err(|e| {
        format!(
            "column {name:?}: {} cannot be stored as {to}: {e}",
            column.data_type()
        )
    })
}

/// The first row of `column` holding a value the archive cannot store (above
/// [`MAX_STORED`]): what every place rows enter refuses, naming that row.
pub fn first_unstorable(column: &UInt64Array) -> Option<usize> {
    if arrow::compute::max(column).is_none_or(|m| m <= MAX_STORED) {
        return None;
    }
    (0..column.len()).find(|&i| column.is_valid(i) && column.value(i) > MAX_STORED)
}

/// The first row of `column`, of any type, holding an unsigned value the archive cannot
/// store (above [`MAX_STORED`]) at any depth of its lists (of any size), maps, structs and
/// dictionaries, and that value: a list of counts is refused as a counts column is (its
/// files and Delta logs declare signed integers there too).
pub fn first_unstorable_anywhere(column: &dyn Array) -> Option<(usize, u64)> {
    use arrow::array::AsArray;
    match column.data_type() {
        DataType::UInt64 => {
            let values = column.as_primitive::<arrow::datatypes::UInt64Type>();
            first_unstorable(values).map(|row| (row, values.value(row)))
        }
        DataType::List(_) => first_unstorable_in_list(column.as_list::<i32>()),
        DataType::LargeList(_) => first_unstorable_in_list(column.as_list::<i64>()),
        DataType::FixedSizeList(..) => {
            let list = column.as_fixed_size_list();
            first_unstorable_anywhere(list.values().as_ref())?;
            first_row_holding(list, |row| list.value(row))
        }
        DataType::Map(..) => {
            let map = column.as_map();
            first_unstorable_anywhere(map.entries())?;
            first_row_holding(map, |row| {
                Arc::new(map.value(row)) as arrow::array::ArrayRef
            })
        }
        DataType::Dictionary(..) => {
            let dictionary = column.as_any_dictionary();
            let values = dictionary.values();
            first_unstorable_anywhere(values.as_ref())?;
            let keys = dictionary.normalized_keys();
            first_row_holding(column, |row| values.slice(keys[row], 1))
        }
        DataType::Struct(_) => {
            let fields = column.as_struct();
            if fields
                .columns()
                .iter()
                .all(|c| first_unstorable_anywhere(c.as_ref()).is_none())
            {
                return None;
            }
            (0..fields.len())
                .filter(|&row| fields.is_valid(row))
                .find_map(|row| {
                    fields
                        .columns()
                        .iter()
                        .find_map(|c| first_unstorable_anywhere(c.slice(row, 1).as_ref()))
                        .map(|(_, v)| (row, v))
                })
        }
        _ => None,
    }
}

/// The first valid row of `column` whose value (`value(row)`, an array) holds an unstorable
/// value, and that value.
fn first_row_holding(
    column: &dyn Array,
    value: impl Fn(usize) -> arrow::array::ArrayRef,
) -> Option<(usize, u64)> {
    (0..column.len())
        .filter(|&row| column.is_valid(row))
        .find_map(|row| first_unstorable_anywhere(value(row).as_ref()).map(|(_, v)| (row, v)))
}

/// [`first_unstorable_anywhere`] of a list: its rows are looked at one by one only when
/// some value of its elements is unstorable.
fn first_unstorable_in_list<O: arrow::array::OffsetSizeTrait>(
    list: &arrow::array::GenericListArray<O>,
) -> Option<(usize, u64)> {
    first_unstorable_anywhere(list.values().as_ref())?;
    (0..list.len())
        .filter(|&row| list.is_valid(row))
        .find_map(|row| first_unstorable_anywhere(list.value(row).as_ref()).map(|(_, v)| (row, v)))
}

fn first_negative(column: &Int64Array) -> Option<usize> {
    if arrow::compute::min(column).is_none_or(|m| m >= 0) {
        return None;
    }
    (0..column.len()).find(|&i| column.is_valid(i) && column.value(i) < 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int16Array, StringArray, UInt8Array};

    /// Fixed-size lists, maps and dictionaries are looked into too, naming the row.
    #[test]
    fn an_unstorable_value_is_found_in_fixed_lists_maps_and_dictionaries() {
        use arrow::array::{DictionaryArray, FixedSizeListArray, MapBuilder, UInt64Builder};
        use arrow::datatypes::{Int32Type, UInt64Type};
        let big = MAX_STORED + 1;
        let fixed = FixedSizeListArray::from_iter_primitive::<UInt64Type, _, _>(
            vec![Some(vec![Some(1), Some(2)]), Some(vec![Some(3), Some(big)])],
            2,
        );
        assert_eq!(first_unstorable_anywhere(&fixed), Some((1, big)));
        let mut map = MapBuilder::new(None, UInt64Builder::new(), UInt64Builder::new());
        for (k, v) in [(1, 2), (3, 4), (5, big)] {
            map.keys().append_value(k);
            map.values().append_value(v);
            map.append(true).expect("a map row");
        }
        assert_eq!(first_unstorable_anywhere(&map.finish()), Some((2, big)));
        let dictionary = DictionaryArray::<Int32Type>::new(
            arrow::array::Int32Array::from(vec![0, 0, 1, 0]),
            Arc::new(UInt64Array::from(vec![7, big])),
        );
        assert_eq!(first_unstorable_anywhere(&dictionary), Some((2, big)));
        let fine = DictionaryArray::<Int32Type>::new(
            arrow::array::Int32Array::from(vec![0, 0]),
            Arc::new(UInt64Array::from(vec![7, 8])),
        );
        assert_eq!(first_unstorable_anywhere(&fine), None);
    }

    #[test]
    fn an_unstorable_value_is_found_at_any_depth_under_a_valid_row() {
        use arrow::array::{ListArray, StructArray};
        use arrow::datatypes::UInt64Type;
        let big = MAX_STORED + 1;
        let list = ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![
            Some(vec![Some(1)]),
            None,
            Some(vec![Some(2), Some(big)]),
        ]);
        assert_eq!(first_unstorable_anywhere(&list), Some((2, big)));
        let fine = ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![Some(vec![Some(1)])]);
        assert_eq!(first_unstorable_anywhere(&fine), None);
        // A struct's child under a null row is not a value; the next valid one is found.
        let child: ArrayRef = Arc::new(UInt64Array::from(vec![big, 1, big]));
        let fields = StructArray::new(
            vec![Field::new("c", DataType::UInt64, false)].into(),
            vec![child],
            Some(vec![false, true, true].into()),
        );
        assert_eq!(first_unstorable_anywhere(&fields), Some((2, big)));
        assert_eq!(
            first_unstorable_anywhere(&UInt64Array::from(vec![1, big])),
            Some((1, big))
        );
    }

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Utf8, false),
            Field::new("u8", DataType::UInt8, false),
            Field::new("u64", DataType::UInt64, true),
            Field::new("f", DataType::Float64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
                Arc::new(UInt8Array::from(vec![0, 200, 255])),
                Arc::new(UInt64Array::from(vec![Some(0), None, Some(MAX_STORED)])),
                Arc::new(arrow::array::Float64Array::from(vec![1.0, 2.0, 3.0])),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn unsigned_columns_are_stored_signed_and_come_back_exactly() {
        let b = batch();
        let disk = disk_schema(&b.schema());
        let types: Vec<String> = disk
            .fields()
            .iter()
            .map(|f| f.data_type().to_string())
            .collect();
        assert_eq!(types, ["Utf8", "Int16", "Int64", "Float64"]);
        let stored = to_disk(&b, &disk).expect("fits");
        let small = stored.column(1).as_any().downcast_ref::<Int16Array>();
        assert_eq!(small.map(|a| a.value(2)), Some(255));
        let back = from_disk(stored, &b.schema()).expect("back");
        assert_eq!(back, b);
    }

    #[test]
    fn a_value_above_the_signed_range_is_refused_not_wrapped() {
        let b = batch();
        let schema = b.schema();
        let mut columns = b.columns().to_vec();
        columns[2] = Arc::new(UInt64Array::from(vec![Some(1), Some(MAX_STORED + 1), None]));
        let b = RecordBatch::try_new(schema.clone(), columns).expect("batch");
        let err = to_disk(&b, &disk_schema(&schema)).expect_err("refused");
        assert!(err.contains("\"u64\" row 1"), "{err}");
    }

    #[test]
    fn a_negative_stored_value_in_an_unsigned_column_is_refused() {
        let b = batch();
        let disk = disk_schema(&b.schema());
        let mut columns = to_disk(&b, &disk).expect("fits").columns().to_vec();
        columns[2] = Arc::new(Int64Array::from(vec![Some(1), Some(-1), None]));
        let stored = RecordBatch::try_new(disk, columns).expect("batch");
        let err = from_disk(stored, &b.schema()).expect_err("refused");
        assert!(err.contains("row 1 holds -1"), "{err}");
    }

    #[test]
    fn a_version_4_batch_is_read_as_it_is() {
        let b = batch();
        assert_eq!(from_disk(b.clone(), &b.schema()).expect("same"), b);
    }
}
