//! The library's error type: every failure names the file, the line where known, the field,
//! and what was expected, so a user can fix the input without reading the code.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not valid TOML/JSON, or a field has the wrong type or unit (the parser's
    /// message carries line and column).
    #[error("{file}: {message}")]
    Parse { file: String, message: String },

    /// A field parsed but is physically impossible or inconsistent.
    #[error("{file}{}: field `{field}`: expected {expected}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: String,
        line: Option<usize>,
        field: String,
        expected: String,
    },

    /// A name that is neither a built-in description nor a readable file.
    #[error("unknown {kind} \"{name}\": not a file, and not a built-in (built-ins: {known})")]
    Unknown {
        kind: &'static str,
        name: String,
        known: String,
    },

    /// A measured-data file that cannot be read as the format it claims.
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Measured {
        file: String,
        line: Option<usize>,
        message: String,
    },

    /// A scenario the cost model cannot evaluate (e.g. TP that does not divide the heads).
    #[error("{0}")]
    Scenario(String),

    /// Arguments that ask what the descriptions cannot answer (`explore --objective cost`
    /// over a system without a price): bad usage, exit code 2, as clap's own refusals.
    #[error("{0}")]
    Usage(String),

    /// A chart that cannot be drawn or written (unsupported file extension, a backend
    /// failure); the message names the output file.
    #[error("{0}")]
    Plot(String),

    /// An OS error reading or writing `path` (printed once: it is not a `source`, so the
    /// cause chain does not repeat it).
    #[error("{path}: {}", io_message(error))]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The OS error in words a user acts on: "not found" rather than only "os error 2".
fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("not found ({e})"),
        std::io::ErrorKind::PermissionDenied => format!("permission denied ({e})"),
        _ => e.to_string(),
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Line (1-based) of the first assignment to `field` (a dotted path such as
/// `config.num_experts_per_tok`) in TOML `text`, looking inside the field's table when
/// there is one. Used to point validation errors at a line.
pub fn line_of_field(text: &str, field: &str) -> Option<usize> {
    let (table, key) = match field.rsplit_once('.') {
        Some((t, k)) => (Some(t), k),
        None => (None, field),
    };
    let mut in_table = table.is_none();
    let mut first_any = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            let name = line.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = table.is_some_and(|t| t == name);
            continue;
        }
        let Some((k, _)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim().trim_matches('"');
        // dotted keys inside a table line, e.g. `gemm.bf16 = 0.7`
        let matches = k == key || k.ends_with(&format!(".{key}"));
        if matches {
            if in_table {
                return Some(i + 1);
            }
            first_any.get_or_insert(i + 1);
        }
    }
    first_any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_field_line_in_table() {
        let t = "name = \"x\"\n[config]\nhidden_size = 5\nnum_experts_per_tok = 9\n";
        assert_eq!(line_of_field(t, "config.num_experts_per_tok"), Some(4));
        assert_eq!(line_of_field(t, "name"), Some(1));
        assert_eq!(line_of_field(t, "config.missing"), None);
    }
}
