//! Reader for GEMM micro-benchmark CSV, the form operator benchmarks are usually saved in. It
//! exists to calibrate GEMM efficiency against shape: each row is one `m × k` by `k × n`
//! product in one dtype and its latency, a [`Quantity::Gemm`].
//!
//! The first line that is neither blank nor a `#` comment is the header. Required columns
//! (any order, names case-insensitive, extra columns ignored): `m`, `n`, `k`, `dtype`, and one
//! latency column, taken in this order of preference: `latency_ms`, `time_ms`, `latency_us`,
//! `time_us`. An optional `kernel` column names the kernel each row ran (the kernel tables'
//! own column), which calibrate prices as `validate` does. Fields are split at commas;
//! surrounding double quotes are removed, but quoted fields containing commas are not
//! supported (no GEMM benchmark writes them).
//!
//! A missing column is an error naming it; a missing or malformed value is an error with its
//! line. Sizes must be positive integers (`4096` or `4096.0`); latencies positive.

use super::{measured_error, observation, MeasuredSet, Quantity};
use crate::error::Result;

/// Latency column names and their scale to seconds, in order of preference.
const LATENCY_COLUMNS: [(&str, f64); 4] = [
    ("latency_ms", 1e-3),
    ("time_ms", 1e-3),
    ("latency_us", 1e-6),
    ("time_us", 1e-6),
];

/// The weight format a GEMM table's `dtype` names: a rooftop format (`fp8-block128`), or the
/// kernel tables' own names (`bfloat16`; `fp8-block` / `fp8_block`, DeepSeek-style 128-wide
/// block scales; `int4`, W4A16 with group 32), read as `validate` reads those tables.
pub fn weight_format_of(dtype: &str) -> std::result::Result<crate::spec::WeightFormat, String> {
    let d = dtype.to_ascii_lowercase();
    let name = match d.as_str() {
        "bfloat16" => "bf16",
        "fp8-block" | "fp8_block" => "fp8-block128",
        "int4" => "int4-g32",
        other => other,
    };
    name.parse()
}

/// Parse a GEMM benchmark CSV. `file` labels errors and origins.
pub fn parse_gemm_csv(text: &str, file: &str) -> Result<MeasuredSet> {
    let CsvText {
        header_line,
        titles,
        lines,
    } = csv_text(text, file)?;
    let column = |name: &str| -> Result<usize> {
        titles.iter().position(|t| t == name).ok_or_else(|| {
            measured_error(
                file,
                Some(header_line),
                format!("missing column `{name}` (header: {})", titles.join(",")),
            )
        })
    };
    let (m, n, k, dtype) = (column("m")?, column("n")?, column("k")?, column("dtype")?);
    // Optional: the kernel the row ran (a kernel table's column), which names the family
    // its constants come from, as `validate` reads it.
    let kernel = titles.iter().position(|t| t == "kernel");
    let latencies: Vec<(usize, (&str, f64))> = LATENCY_COLUMNS
        .iter()
        .filter_map(|c| titles.iter().position(|t| t == c.0).map(|i| (i, *c)))
        .collect();
    let (latency, (latency_name, scale)) = latencies.first().copied().ok_or_else(|| {
        measured_error(
            file,
            Some(header_line),
            format!(
                "missing latency column: expected `latency_ms` or `time_us` (or `time_ms`, \
                     `latency_us`) (header: {})",
                titles.join(",")
            ),
        )
    })?;

    let mut set = MeasuredSet::default();
    for (line, row) in lines {
        let fields: Vec<&str> = split(row).collect();
        let field = |i: usize, name: &str| -> Result<&str> {
            fields
                .get(i)
                .copied()
                .filter(|f| !f.is_empty())
                .ok_or_else(|| measured_error(file, Some(line), format!("no value for `{name}`")))
        };
        let size = |i: usize, name: &str| -> Result<u64> {
            let v = field(i, name)?;
            parse_size(v).ok_or_else(|| {
                measured_error(
                    file,
                    Some(line),
                    format!("`{name}` = \"{v}\" is not a positive integer"),
                )
            })
        };
        let (mv, nv, kv) = (size(m, "m")?, size(n, "n")?, size(k, "k")?);
        let dt = field(dtype, "dtype")?;
        weight_format_of(dt)
            .map_err(|e| measured_error(file, Some(line), format!("`dtype`: {e}")))?;
        let lat = field(latency, latency_name)?;
        let seconds = lat
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                measured_error(
                    file,
                    Some(line),
                    format!("`{latency_name}` = \"{lat}\" is not a positive number"),
                )
            })?
            * scale;
        set.observations.push(observation(
            Quantity::Gemm {
                m: mv,
                n: nv,
                k: kv,
                dtype: dt.to_string(),
                kernel: kernel
                    .and_then(|i| fields.get(i))
                    .map_or(String::new(), |f| f.to_string()),
                seconds,
            },
            file,
            Some(line),
        ));
    }
    if set.observations.is_empty() {
        return Err(measured_error(file, None, "no data rows after the header"));
    }
    Ok(set)
}

/// A CSV text: its header (the first line that is neither blank nor a `#` comment, titles
/// lower-cased) and its data lines with their 1-based numbers.
pub(crate) struct CsvText<'a, I: Iterator<Item = (usize, &'a str)>> {
    pub header_line: usize,
    pub titles: Vec<String>,
    pub lines: I,
}

/// Split `text` into header and data lines; an empty text is an error naming `file`.
pub(crate) fn csv_text<'a>(
    text: &'a str,
    file: &str,
) -> Result<CsvText<'a, impl Iterator<Item = (usize, &'a str)>>> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let Some((header_line, header)) = lines.next() else {
        return Err(measured_error(
            file,
            None,
            "no header line: the file is empty",
        ));
    };
    let titles: Vec<String> = split(header).map(|t| t.to_ascii_lowercase()).collect();
    if let Some(t) = super::duplicate_title(titles.iter().map(String::as_str)) {
        return Err(super::duplicate_title_error(file, header_line, t));
    }
    // Two time columns of different units: which one the reader should take is not known
    // (a kernel table read `latency_ms` and ignored a `time_us` beside it).
    let times: Vec<&str> = LATENCY_COLUMNS
        .iter()
        .map(|c| c.0)
        .filter(|c| titles.iter().any(|t| t == c))
        .collect();
    if let [a, b, ..] = times.as_slice() {
        return Err(measured_error(
            file,
            Some(header_line),
            format!(
                "two latency columns, `{a}` and `{b}`: which holds the time is not known; keep one"
            ),
        ));
    }
    // A row with more fields than the header has: its values no longer sit under their
    // titles (an unquoted comma, a column added to the rows only), so none can be trusted.
    let lines: Vec<(usize, &str)> = lines.collect();
    if let Some((line, row)) = lines.iter().find(|(_, l)| split(l).count() > titles.len()) {
        return Err(measured_error(
            file,
            Some(*line),
            format!(
                "{} fields where the header has {} columns ({}): each row gives one value per column",
                split(row).count(),
                titles.len(),
                titles.join(",")
            ),
        ));
    }
    Ok(CsvText {
        header_line,
        titles,
        lines: lines.into_iter(),
    })
}

/// Fields of a CSV line, trimmed and unquoted.
pub(crate) fn split(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| f.trim().trim_matches('"').trim())
}

/// A positive integer size; `4096.0` (as pandas writes integer columns with gaps) is accepted.
pub(crate) fn parse_size(v: &str) -> Option<u64> {
    if let Ok(n) = v.parse::<u64>() {
        return (n > 0).then_some(n);
    }
    let f = v.parse::<f64>().ok()?;
    (f.is_finite() && f >= 1.0 && f.fract() == 0.0 && f <= u64::MAX as f64).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn keeps_the_kernel_a_row_names() {
        let text =
            "m,n,k,dtype,kernel,latency_us\n1,2048,7168,fp8_block,vllm_triton_w8a8_block,25\n";
        let set = parse_gemm_csv(text, "g.csv").unwrap();
        match &set.observations[0].quantity {
            Quantity::Gemm { kernel, .. } => assert_eq!(kernel, "vllm_triton_w8a8_block"),
            q => panic!("{q:?}"),
        }
    }

    #[test]
    fn reads_rows_in_any_column_order() {
        let text = "# gemm sweep\nDTYPE,k,time_us,n,m,gpu\nbf16,7168,25.0,2048,1,rtx\n\nfp8,7168,\"30\",2048,16,rtx\n";
        let set = parse_gemm_csv(text, "g.csv").unwrap();
        assert_eq!(set.observations.len(), 2);
        match &set.observations[1].quantity {
            Quantity::Gemm {
                m,
                n,
                k,
                dtype,
                kernel,
                seconds,
            } => {
                assert_eq!((*m, *n, *k, dtype.as_str()), (16, 2048, 7168, "fp8"));
                assert_eq!(kernel, "", "no `kernel` column: none named");
                assert_relative_eq!(*seconds, 30e-6);
            }
            q => panic!("{q:?}"),
        }
        assert_eq!(set.observations[1].origin.line, Some(5));
    }

    #[test]
    fn two_latency_columns_or_a_repeated_column_are_refused() {
        // Which of two times (999 us, 0.5 ms) is the row's is not known: neither is taken.
        let text = "m,n,k,dtype,time_us,latency_ms\n1,2,3,bf16,999,0.5\n";
        let e = parse_gemm_csv(text, "g.csv").unwrap_err().to_string();
        assert!(
            e.contains("g.csv:1") && e.contains("two latency columns"),
            "{e}"
        );
        let e = parse_gemm_csv("m,n,k,m,dtype,time_us\n1,2,3,4,bf16,9\n", "g.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("column `m` appears twice"), "{e}");
        // One latency column reads as ever.
        let set = parse_gemm_csv("m,n,k,dtype,latency_ms\n1,2,3,bf16,0.5\n", "g.csv").unwrap();
        assert!(
            matches!(set.observations[0].quantity, Quantity::Gemm { seconds, .. } if seconds == 0.5e-3)
        );
    }

    #[test]
    fn missing_column_is_named() {
        let e = parse_gemm_csv("m,n,dtype,time_us\n1,2,bf16,3\n", "g.csv").unwrap_err();
        assert!(e.to_string().contains("missing column `k`"), "{e}");
        let e = parse_gemm_csv("m,n,k,dtype,gflops\n1,2,3,bf16,3\n", "g.csv").unwrap_err();
        assert!(e.to_string().contains("latency_ms"), "{e}");
    }

    #[test]
    fn bad_value_gives_line() {
        let e = parse_gemm_csv("m,n,k,dtype,time_us\n1,2,3,bf16,3\n1,2,x,bf16,3\n", "g.csv")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("g.csv:3:") && e.contains("`k`"), "{e}");
        let e = parse_gemm_csv("m,n,k,dtype,time_us\n1,2,3,bf16\n", "g.csv")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("g.csv:2:") && e.contains("time_us"), "{e}");
        let e = parse_gemm_csv("m,n,k,dtype,time_us\n1,2,3,bf16,-4\n", "g.csv")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("g.csv:2:"), "{e}");
    }

    /// The kernel tables' dtype names read as the formats `validate` prices them in, and a
    /// dtype no format has is refused with its line, not later in the fit.
    #[test]
    fn kernel_table_dtypes_are_read_and_an_unknown_one_is_refused_with_its_line() {
        use crate::spec::WeightFormat;
        for (name, format) in [
            ("bfloat16", "bf16"),
            ("fp8-block", "fp8-block128"),
            ("FP8_BLOCK", "fp8-block128"),
            ("int4", "int4-g32"),
            ("nvfp4", "nvfp4"),
        ] {
            assert_eq!(
                weight_format_of(name).unwrap(),
                format.parse::<WeightFormat>().unwrap(),
                "{name}"
            );
        }
        let text = "m,n,k,dtype,latency_ms\n1,2,3,fp8-block,0.1\n1,2,3,fp7,0.1\n";
        let e = parse_gemm_csv(text, "g.csv").unwrap_err().to_string();
        assert!(
            e.starts_with("g.csv:3:") && e.contains("`dtype`") && e.contains("fp7"),
            "{e}"
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "",
            "#",
            "m,n,k,dtype,time_us",
            ",,,,",
            "m,n,k,dtype,time_us\n,,,,\n",
            "m,n,k,dtype,time_us\n1e400,1,1,a,1\n",
            "\"\"\n",
        ] {
            assert!(parse_gemm_csv(t, "f").is_err(), "{t}");
        }
    }
}
