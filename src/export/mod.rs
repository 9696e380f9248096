//! Every number rooftop reports leaves through here: text for people, JSON (the stable record,
//! field names documented in the README) and CSV for spreadsheets. Commands build a serde
//! record once; this module turns it into bytes. CSV goes through the `csv` crate and JSON
//! through serde_json, so quoting and escaping are never written by hand.
//!
//! To add an output format: a variant of [`Format`] and a branch in [`export`].

pub mod rows;
pub mod text;

pub use text::{num, table};

use crate::error::{Error, Result};
use serde::Serialize;

/// `--format` values. The names (`text`, `json`, `csv`) come from clap and serde.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Human-readable tables.
    #[default]
    Text,
    /// One JSON object (field names documented in README).
    Json,
    /// Comma-separated rows with a header.
    Csv,
}

/// A CSV table: flat serde rows, each followed by columns named only at run time (breakdown
/// categories, one column per concurrency). The header is the row struct's field names, then
/// `extra_columns`.
pub struct Table<R> {
    pub rows: Vec<R>,
    /// Names of the trailing columns.
    pub extra_columns: Vec<String>,
    /// One value per trailing column for each row (empty where there are none).
    pub extra: Vec<Vec<Option<f64>>>,
}

impl<R> Table<R> {
    /// Rows with no trailing columns.
    pub fn flat(rows: Vec<R>) -> Table<R> {
        Table {
            rows,
            extra_columns: Vec::new(),
            extra: Vec::new(),
        }
    }
}

/// A record that has a CSV form.
pub trait Tabular {
    /// The flat row struct of its CSV form (one doc line per field, in `rows.rs`).
    type Row<'a>: Serialize
    where
        Self: 'a;
    fn table(&self) -> Table<Self::Row<'_>>;
}

/// The record in `format`: JSON and CSV from serde, text from the command's own `text`.
pub fn export<T: Serialize + Tabular>(
    record: &T,
    format: Format,
    text: impl FnOnce(&T) -> String,
) -> Result<Vec<u8>> {
    match format {
        Format::Json => json(record),
        Format::Csv => csv(&record.table()),
        Format::Text => Ok(text(record).into_bytes()),
    }
}

fn export_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Scenario(format!("cannot write {what}: {e}"))
}

/// Pretty JSON of a record, with a final newline.
pub fn json<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(v).map_err(|e| export_error("JSON", e))?;
    out.push(b'\n');
    Ok(out)
}

/// One compact JSON object and a newline, appended to `out` (JSON lines).
pub fn json_line<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) -> Result<()> {
    serde_json::to_writer(&mut *out, v).map_err(|e| export_error("JSON", e))?;
    out.push(b'\n');
    Ok(())
}

/// The header of a row struct: its serde field names, as the `csv` crate writes them.
fn header_of<R: Serialize>(row: &R) -> Result<Vec<String>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(row).map_err(|e| export_error("CSV", e))?;
    let bytes = w.into_inner().map_err(|e| export_error("CSV", e))?;
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    let h = r.headers().map_err(|e| export_error("CSV", e))?;
    Ok(h.iter().map(String::from).collect())
}

/// A CSV table with its header.
pub fn csv<R: Serialize>(t: &Table<R>) -> Result<Vec<u8>> {
    let Some(first) = t.rows.first() else {
        return Ok(Vec::new());
    };
    let mut header = header_of(first)?;
    header.extend(t.extra_columns.iter().cloned());
    let rows: Vec<(&R, &[Option<f64>])> = t
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r, t.extra.get(i).map(Vec::as_slice).unwrap_or_default()))
        .collect();
    csv_with_header(&header, &rows)
}

/// Rows under a header written out by the caller (rows whose columns carry run-time names;
/// each row is a struct or a tuple of structs and sequences, flattened by the `csv` crate).
pub fn csv_with_header<R: Serialize>(header: &[String], rows: &[R]) -> Result<Vec<u8>> {
    let err = |e: csv::Error| export_error("CSV", e);
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.write_record(header).map_err(err)?;
    for r in rows {
        w.serialize(r).map_err(err)?;
    }
    w.into_inner().map_err(|e| export_error("CSV", e))
}

/// One CSV row without a header, appended to `out` (streamed tables).
pub fn csv_row<R: Serialize>(out: &mut Vec<u8>, row: &R) -> Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .buffer_capacity(256)
        .from_writer(out);
    w.serialize(row).map_err(|e| export_error("CSV", e))?;
    w.flush().map_err(|e| export_error("CSV", e))
}

/// The CSV header line of a row struct (for streamed tables).
pub fn csv_header<R: Serialize>(row: &R) -> Result<String> {
    Ok(header_of(row)?.join(","))
}

/// `v` rounded to `digits` decimals: CSV cells keep the precision the columns always had.
pub fn round(v: f64, digits: i32) -> f64 {
    if !v.is_finite() {
        return v;
    }
    let f = 10f64.powi(digits);
    let r = (v * f).round() / f;
    // Past ~1e302 the scaling overflows to infinity: such a value has no digits below the
    // decimal point to round away.
    if r.is_finite() {
        r
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        label: String,
        value: f64,
    }

    /// Rounding never turns a finite value infinite (1e305 scaled by 10^6 overflowed, so a
    /// wide interval read `inf` in CSV beside a finite number in JSON).
    #[test]
    fn rounding_keeps_huge_values_finite() {
        for v in [1e305, -1e305, f64::MAX, 3.96e302] {
            assert_eq!(round(v, 6), v);
        }
        assert_eq!(round(1.23456789, 3), 1.235);
    }

    #[test]
    fn csv_quotes_labels_and_appends_named_columns() {
        let t = Table {
            rows: vec![Row {
                label: "a, \"b\"".into(),
                value: 1.5,
            }],
            extra_columns: vec!["x_ms".into()],
            extra: vec![vec![Some(2.0)]],
        };
        let s = String::from_utf8(csv(&t).unwrap()).unwrap();
        assert_eq!(s, "label,value,x_ms\n\"a, \"\"b\"\"\",1.5,2.0\n");
    }

    #[test]
    fn json_line_is_one_line() {
        let mut out = Vec::new();
        json_line(
            &mut out,
            &Row {
                label: "q\"".into(),
                value: 2.0,
            },
        )
        .unwrap();
        assert_eq!(out, b"{\"label\":\"q\\\"\",\"value\":2.0}\n");
    }
}
