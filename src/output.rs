//! Output formats shared by every command that reports numbers: text for people, JSON
//! (the stable record) and CSV for spreadsheets. Commands build a serde record once and
//! hand it here; plots consume the same records.

use serde::Serialize;
use std::fmt::Write as _;

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Format {
    /// Human-readable tables.
    #[default]
    Text,
    /// One JSON object (field names documented in README).
    Json,
    /// Comma-separated rows with a header.
    Csv,
}

/// Pretty JSON of a record.
pub fn json<T: Serialize>(v: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// Quote a CSV field when it needs it.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A CSV table from a header and rows.
pub fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        header
            .iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{}",
            r.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",")
        );
    }
    out
}

/// A number for CSV/text with up to `digits` decimals, no trailing noise.
pub fn num(v: f64, digits: usize) -> String {
    if !v.is_finite() {
        return "inf".into();
    }
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A text table with right-aligned numeric columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, f) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(f.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, r: &[String]| {
        for (i, f) in r.iter().enumerate().take(n) {
            let pad = w[i] - f.chars().count();
            if i == 0 {
                let _ = write!(out, "{f}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{f}", " ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(
        &mut out,
        &header.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    let total: usize = w.iter().sum::<usize>() + 2 * (n - 1);
    let _ = writeln!(out, "{}", "-".repeat(total));
    for r in rows {
        line(&mut out, r);
    }
    out
}
