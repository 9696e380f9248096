//! Text tables for people: right-aligned columns under a rule.

use std::fmt::Write as _;

/// A number for text with up to `digits` decimals, no trailing noise.
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
