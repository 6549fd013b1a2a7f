//! The tables as Parquet: one row group, no compression (the files are a few KB per rank; a
//! codec would add a dependency and little else), the columns of [`super::table`], and the
//! schema version both as the `schema` column and as the file's `memscope.schema` key.
//!
//! Reading takes files written by anyone: a file is read only up to [`MAX_FILE_BYTES`] and
//! [`MAX_ROWS`] rows, and a column of another type than the table's is refused, not guessed.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{ConvertedType, Repetition, Type as Physical};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;
use parquet::schema::types::Type;
use serde_json::{Map, Value};

use super::rows::SUMMARIES_SCHEMA;
use super::table::{Column, Table, Ty};
use super::SummariesError;

/// The largest Parquet file read (memscope writes a few KB per rank and table).
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The most rows read from one file.
pub const MAX_ROWS: usize = 100_000;

fn schema(table: Table) -> Result<Type, parquet::errors::ParquetError> {
    let mut fields = Vec::new();
    for col in table.columns() {
        let (physical, converted) = match col.ty {
            Ty::I64 => (Physical::INT64, ConvertedType::NONE),
            Ty::F64 => (Physical::DOUBLE, ConvertedType::NONE),
            Ty::Bool => (Physical::BOOLEAN, ConvertedType::NONE),
            Ty::Str => (Physical::BYTE_ARRAY, ConvertedType::UTF8),
        };
        let rep = if col.nullable {
            Repetition::OPTIONAL
        } else {
            Repetition::REQUIRED
        };
        fields.push(Arc::new(
            Type::primitive_type_builder(col.name, physical)
                .with_converted_type(converted)
                .with_repetition(rep)
                .build()?,
        ));
    }
    Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
}

/// Writes `rows` (JSON objects of `table`'s rows) as one Parquet file.
pub fn write(table: Table, rows: &[Value], out: impl Write + Send) -> Result<(), SummariesError> {
    let props = WriterProperties::builder()
        .set_created_by(format!("memscope {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut w = SerializedFileWriter::new(out, Arc::new(schema(table)?), Arc::new(props))?;
    w.append_key_value_metadata(KeyValue::new(
        "memscope.schema".to_owned(),
        SUMMARIES_SCHEMA.to_owned(),
    ));
    let mut rg = w.next_row_group()?;
    let mut cols = table.columns().iter();
    while let Some(mut cw) = rg.next_column()? {
        let col = cols.next().ok_or(SummariesError::Columns)?;
        write_column(col, rows, cw.untyped())?;
        cw.close()?;
    }
    rg.close()?;
    w.close()?;
    Ok(())
}

fn write_column(
    col: &Column,
    rows: &[Value],
    w: &mut ColumnWriter<'_>,
) -> Result<(), SummariesError> {
    let cells: Vec<&Value> = rows
        .iter()
        .map(|r| r.get(col.name).unwrap_or(&Value::Null))
        .collect();
    let defs: Vec<i16> = cells.iter().map(|v| i16::from(!v.is_null())).collect();
    if !col.nullable && defs.contains(&0) {
        return Err(SummariesError::NullIn(col.name));
    }
    let defs = col.nullable.then_some(defs.as_slice());
    let present = cells.iter().filter(|v| !v.is_null());
    match w {
        ColumnWriter::Int64ColumnWriter(w) => {
            let v: Vec<i64> = present
                .map(|v| {
                    v.as_i64()
                        .or_else(|| v.as_u64().map(|u| u.min(i64::MAX as u64) as i64))
                        .unwrap_or(0)
                })
                .collect();
            w.write_batch(&v, defs, None)?;
        }
        ColumnWriter::DoubleColumnWriter(w) => {
            let v: Vec<f64> = present.map(|v| v.as_f64().unwrap_or(0.0)).collect();
            w.write_batch(&v, defs, None)?;
        }
        ColumnWriter::BoolColumnWriter(w) => {
            let v: Vec<bool> = present.map(|v| v.as_bool().unwrap_or(false)).collect();
            w.write_batch(&v, defs, None)?;
        }
        ColumnWriter::ByteArrayColumnWriter(w) => {
            let v: Vec<ByteArray> = present
                .map(|v| ByteArray::from(v.as_str().unwrap_or_default()))
                .collect();
            w.write_batch(&v, defs, None)?;
        }
        _ => return Err(SummariesError::Columns),
    }
    Ok(())
}

/// Reads a Parquet file of `table` back into JSON objects, one per row. The file is anyone's:
/// a panic of the Parquet decoder on a malformed file is that file's error, not the process'.
pub fn read(table: Table, path: &Path) -> Result<Vec<Value>, SummariesError> {
    std::panic::catch_unwind(|| read_unguarded(table, path)).unwrap_or_else(|_| {
        Err(SummariesError::Malformed {
            path: path.display().to_string(),
            what: "the Parquet decoder failed on this file".into(),
        })
    })
}

fn read_unguarded(table: Table, path: &Path) -> Result<Vec<Value>, SummariesError> {
    let f = File::open(path).map_err(|e| SummariesError::io(path, e))?;
    let len = f.metadata().map_err(|e| SummariesError::io(path, e))?.len();
    if len > MAX_FILE_BYTES {
        return Err(SummariesError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    let r = SerializedFileReader::new(f)?;
    let meta = r.metadata();
    if meta.file_metadata().num_rows() > MAX_ROWS as i64 {
        return Err(SummariesError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_ROWS as u64,
        });
    }
    let mut out = Vec::new();
    for row in r.get_row_iter(None)? {
        let row = row?;
        let mut m = Map::new();
        for (name, field) in row.get_column_iter() {
            let Some(col) = table.columns().iter().find(|c| c.name == name) else {
                continue; // a column a later schema added: not ours to read
            };
            m.insert(name.clone(), cell(col, field)?);
        }
        out.push(Value::Object(m));
    }
    Ok(out)
}

fn cell(col: &Column, f: &Field) -> Result<Value, SummariesError> {
    Ok(match (col.ty, f) {
        (_, Field::Null) => Value::Null,
        (Ty::I64, Field::Long(n)) => Value::from(*n),
        (Ty::I64, Field::Int(n)) => Value::from(*n),
        (Ty::F64, Field::Double(x)) => Value::from(*x),
        (Ty::Bool, Field::Bool(b)) => Value::from(*b),
        (Ty::Str, Field::Str(s)) => Value::from(s.as_str()),
        _ => return Err(SummariesError::ColumnType(col.name)),
    })
}
