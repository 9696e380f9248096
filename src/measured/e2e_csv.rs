//! Reader for end-to-end serving runs in the `e2e_serving.csv` form (one row per benchmark
//! run: engine and version, HF model id, system, precision and quant modes, request lengths,
//! concurrency, parallel layout, measured TTFT and TPOT), as NVIDIA's aiconfigurator ships
//! them (`systems/silicon_sample.csv`).
//!
//! Unlike the other readers these rows do not share one model or system: each run names its
//! own, so they are kept as [`E2eRun`]s rather than [`super::Observation`]s of one scenario,
//! and `rooftop validate` evaluates each against the description it maps to (`crate::e2e`).
//!
//! Numbers may be written as floats (`4.0`); counts must be whole and at least 1, except the
//! MoE degrees, where the file writes 0 for "not applicable" on some dense runs (kept as 0 and
//! refused by the layout mapping, not here). An empty `attention_dp_size` means no attention
//! data parallelism (1). Latencies must be positive and finite.

use super::CsvRow;
use crate::error::Result;
use serde::Serialize;

/// The engine, model, system, precision and request-length columns every serving file's
/// rows start with (the disaggregated form's too).
pub const REQUEST_COLUMNS: [&str; 9] = [
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "gemm_quant_mode",
    "moe_quant_mode",
    "isl",
    "osl",
];

/// Columns every file must have: [`REQUEST_COLUMNS`], the layout and the measured TTFT and
/// TPOT.
pub const COLUMNS: [&str; 17] = {
    let r = REQUEST_COLUMNS;
    [
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        "batch_size",
        "tp_size",
        "pp_size",
        "attention_dp_size",
        "moe_tp_size",
        "moe_ep_size",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    ]
};

/// Columns a file may have: how each run was made (`campaign`, `image`, `measured_at`) and
/// the client's concurrency (`silicon_concurrency`: `batch_size` is per attention-DP replica).
pub const OPTIONAL_COLUMNS: [&str; 4] = ["campaign", "image", "measured_at", "silicon_concurrency"];

/// One measured serving run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct E2eRun {
    /// 1-based line in the file.
    pub line: usize,
    /// `vllm`, `sglang` or `trtllm`.
    pub backend: String,
    /// Engine version; empty when the file does not say.
    pub backend_version: String,
    /// Hugging Face model id.
    pub model_path: String,
    /// The file's system name (`h100_sxm`, `b200`).
    pub system: String,
    pub precision: String,
    pub gemm_quant_mode: String,
    pub moe_quant_mode: String,
    pub isl: u32,
    pub osl: u32,
    /// Concurrent requests per attention-DP replica.
    pub batch_size: u32,
    /// Concurrent requests the client held: `silicon_concurrency` where the file has it,
    /// else `batch_size` × `attention_dp`.
    pub concurrency: u32,
    /// The collection the run came from (empty when the file does not say).
    pub campaign: String,
    /// The engine's container image (empty when the file does not say).
    pub image: String,
    pub tp: u32,
    pub pp: u32,
    pub attention_dp: u32,
    pub moe_tp: u32,
    pub moe_ep: u32,
    /// Measured time to first token, seconds.
    pub ttft: f64,
    /// Measured decode inter-token latency, seconds.
    pub tpot: f64,
}

impl E2eRun {
    /// Every field but the line: two runs with the same are one measurement written twice
    /// (its configuration, how it was made, and both measured times to the last digit).
    pub fn fields_without_line(&self) -> String {
        format!(
            "{:?}",
            E2eRun {
                line: 0,
                ..self.clone()
            }
        )
    }
}

/// For each of `runs`, the line of the first earlier run whose `fields` are the same (the
/// same measurement written twice, as an export that lists a run once per collection it
/// passed through does), or None. Such a repeat is one observation, not two: counted twice it
/// weighs its deployment double in a median, and a repeat split across the fitted and the
/// held-out points of a deployment predicts itself.
pub fn repeated_lines<T>(
    runs: &[T],
    line: impl Fn(&T) -> usize,
    fields: impl Fn(&T) -> String,
) -> Vec<Option<usize>> {
    let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    runs.iter()
        .map(|r| {
            let key = fields(r);
            match first.get(&key) {
                Some(&l) => Some(l),
                None => {
                    first.insert(key, line(r));
                    None
                }
            }
        })
        .collect()
}

/// For each of `runs`, the line of the first earlier run that measured the same TTFT and TPOT
/// to the last digit under other fields (another layout, model id or version: an export
/// that labelled one measurement twice), or None. Two runs never agree on both times to
/// every digit by chance, so the two rows are one measurement; which label is right the
/// file does not say, and the first is kept, as the file tags a measurement with the first
/// export it appears in. Exact repeats are [`repeated_lines`]'s. Only times written with
/// more digits than a person rounds to count ([`written_precisely`]): two runs of a file
/// rounded to 0.1 ms can share both times honestly.
pub fn relabelled_lines(runs: &[E2eRun]) -> Vec<Option<usize>> {
    let mut first: std::collections::HashMap<(u64, u64), (usize, String)> =
        std::collections::HashMap::new();
    runs.iter()
        .map(|r| {
            if !(written_precisely(r.ttft) && written_precisely(r.tpot)) {
                return None;
            }
            let key = (r.ttft.to_bits(), r.tpot.to_bits());
            match first.get(&key) {
                Some((l, fields)) if *fields != r.fields_without_line() => Some(*l),
                Some(_) => None,
                None => {
                    first.insert(key, (r.line, r.fields_without_line()));
                    None
                }
            }
        })
        .collect()
}

/// Significant digits a measured time must carry beyond for a match of two runs' times to
/// say they are one measurement: a rounded figure (61.2 ms, 7.54 ms) can recur by chance.
const ROUNDED_DIGITS: i32 = 6;

/// Whether `seconds` holds more than [`ROUNDED_DIGITS`] significant digits in milliseconds
/// (its value is not that of a figure rounded to them, to a part in 10⁹).
fn written_precisely(seconds: f64) -> bool {
    let ms = seconds * 1e3;
    if !(ms.is_finite() && ms > 0.0) {
        return false;
    }
    let scale = 10f64.powi(ROUNDED_DIGITS - 1 - ms.log10().floor() as i32);
    let rounded = (ms * scale).round() / scale;
    ((ms - rounded) / ms).abs() > 1e-9
}

/// Why a run that carries an earlier run's measured times under another label is set aside.
pub const RELABEL_REASON: &str = "carries an earlier row's measured TTFT and TPOT to the last \
     digit under another layout, model id or version (one measurement labelled twice): counted \
     once, as the earlier row";

/// Why a repeated run is set aside (the skipped list's first line is the first repeat).
pub const REPEAT_REASON: &str =
    "repeats an earlier row field for field (the same measurement written twice): counted once";

/// Whether `text` looks like an e2e serving CSV (its header names `backend` and
/// `model_path`, and not the prefill and decode columns of a disaggregated file).
pub fn is_e2e_csv(text: &str) -> bool {
    // Told by the columns that say how a run was made, not by the measured ones: a file
    // whose `silicon_tpot_ms` is misspelt is still an e2e CSV, refused naming that column.
    super::csv_header_has(text, &["backend", "model_path"])
        && !super::e2e_disagg_csv::is_disagg_csv(text)
}

/// Parse an e2e serving CSV. `file` labels errors.
pub fn parse_e2e_csv(text: &str, file: &str) -> Result<Vec<E2eRun>> {
    let kind = "an e2e serving CSV";
    super::read_rows(text, file, kind, &COLUMNS, &OPTIONAL_COLUMNS, |row| {
        let request = read_request(row, 15, 16)?;
        let batch_size = row.count(9, 1.0)?;
        let attention_dp = row.maybe_count(12)?.unwrap_or(1);
        let concurrency = super::concurrency_field(row.extra(3), file, row.line)?
            .unwrap_or_else(|| batch_size.saturating_mul(attention_dp));
        Ok(E2eRun {
            batch_size,
            concurrency,
            campaign: row.extra(0).to_string(),
            image: row.extra(1).to_string(),
            tp: row.count(10, 1.0)?,
            pp: row.count(11, 1.0)?,
            attention_dp,
            moe_tp: row.count(13, 0.0)?,
            moe_ep: row.count(14, 0.0)?,
            ..request
        })
    })
}

/// The columns a serving run's row starts with, backend to osl (the first nine of
/// [`COLUMNS`], and of the disaggregated form's), and its measured TTFT and TPOT at columns
/// `ttft` and `tpot` of `row`: a run of one sequence on one GPU and no campaign, its
/// layout, concurrency and provenance the caller's to set.
pub(crate) fn read_request(row: &CsvRow, ttft: usize, tpot: usize) -> Result<E2eRun> {
    if row.get(2).is_empty() {
        return Err(row.err(2, "a Hugging Face model id"));
    }
    // One output token has no time per output token after it: a TPOT beside it is another
    // run's, or the length is wrong.
    let osl = row.count(8, 1.0)?;
    if osl < 2 {
        return Err(row.err(
            8,
            "an output length of at least 2 tokens (the row gives a TPOT, which one output \
             token does not have)",
        ));
    }
    Ok(E2eRun {
        line: row.line,
        backend: row.text(0),
        backend_version: row.text(1),
        model_path: row.text(2),
        system: row.text(3),
        precision: row.text(4),
        gemm_quant_mode: row.text(5),
        moe_quant_mode: row.text(6),
        isl: row.count(7, 1.0)?,
        osl,
        batch_size: 1,
        concurrency: 1,
        campaign: String::new(),
        image: String::new(),
        tp: 1,
        pp: 1,
        attention_dp: 1,
        moe_tp: 1,
        moe_ep: 1,
        ttft: row.ms(ttft)?,
        tpot: row.ms(tpot)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "backend,backend_version,model_path,system,precision,gemm_quant_mode,moe_quant_mode,isl,osl,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms";

    #[test]
    fn reads_a_row() {
        let t = format!(
            "{HEAD}\nvllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,4.0,2.0,1.0,,2.0,1.0,61.2,7.5\n"
        );
        assert!(is_e2e_csv(&t));
        let r = parse_e2e_csv(&t, "f.csv").unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].line, 2);
        assert_eq!((r[0].batch_size, r[0].tp, r[0].attention_dp), (4, 2, 1));
        assert!((r[0].ttft - 0.0612).abs() < 1e-12);
        assert_eq!(r[0].concurrency, 4);
    }

    /// A column the header holds twice (a TPOT of 7.24 and one of 999) is refused with the
    /// header's line, not read from the first.
    #[test]
    fn a_repeated_column_is_refused() {
        let t = format!(
            "{HEAD},silicon_tpot_ms\nvllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,4.0,2.0,1.0,,2.0,1.0,61.2,7.5,999\n"
        );
        let e = parse_e2e_csv(&t, "f.csv").unwrap_err().to_string();
        assert!(
            e.contains("f.csv:1") && e.contains("`silicon_tpot_ms` appears twice"),
            "{e}"
        );
    }

    /// A run of one output token has no TPOT: a row that gives one is refused at its `osl`,
    /// where it was predicted (a 343 % TPOT error); two tokens are read.
    #[test]
    fn one_output_token_with_a_tpot_is_refused() {
        let row = |osl: &str| {
            format!("{HEAD}\nvllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,{osl},4.0,2.0,1.0,,2.0,1.0,61.2,7.5\n")
        };
        let e = parse_e2e_csv(&row("1"), "f.csv").unwrap_err().to_string();
        assert!(e.contains("f.csv:2") && e.contains("`osl` = \"1\""), "{e}");
        assert_eq!(parse_e2e_csv(&row("2"), "f.csv").unwrap()[0].osl, 2);
    }

    /// A serving time past ten minutes (a unit slip: 1e9 ms) is refused with its line and
    /// column, as the measurement-TOML readers refuse it; ten minutes itself is read.
    #[test]
    fn a_serving_time_past_ten_minutes_is_refused() {
        let row = "vllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,4.0,2.0,1.0,,2.0,1.0,61.2,7.5";
        for (from, to, column) in [
            ("7.5", "1e9", "silicon_tpot_ms"),
            ("61.2", "600000.1", "silicon_ttft_ms"),
        ] {
            let t = format!("{HEAD}\n{row}\n{}\n", row.replace(from, to));
            let e = parse_e2e_csv(&t, "f.csv").unwrap_err().to_string();
            assert!(
                e.contains("f.csv:3") && e.contains(column) && e.contains("at most 600 s"),
                "{e}"
            );
        }
        let t = format!("{HEAD}\n{}\n", row.replace("61.2", "600000"));
        assert!(parse_e2e_csv(&t, "f.csv").is_ok());
    }

    /// Rows equal in every field but their line are one measurement; a row that differs in
    /// any field, a measured digit included, is not.
    #[test]
    fn a_row_written_twice_is_a_repeat_of_its_first() {
        let row = "vllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,4.0,2.0,1.0,,2.0,1.0,61.2,7.5";
        let t = format!(
            "{HEAD}\n{row}\n{}\n{row}\n{row}\n",
            row.replace("61.2", "61.3")
        );
        let r = parse_e2e_csv(&t, "f.csv").unwrap();
        let rep = repeated_lines(&r, |x| x.line, E2eRun::fields_without_line);
        assert_eq!(rep, vec![None, None, Some(2), Some(2)]);
        // Only the rows equal to the letter are repeats; none carries another's times under
        // a different label.
        assert_eq!(relabelled_lines(&r), vec![None; 4]);
    }

    /// A row with an earlier row's measured times to the last digit under another layout is
    /// the same measurement labelled twice; a time one digit off is a run of its own, and
    /// times rounded to a few digits are never matched.
    #[test]
    fn a_measurement_under_a_second_label_is_found() {
        let row =
            "sglang,0.5.9,m/x,b200,fp4,nvfp4,nvfp4,1024,1024,4.0,4.0,1.0,,1.0,1.0,188.734,8.049";
        let t = format!(
            "{HEAD}\n{row}\n{}\n{}\n{row}\n",
            row.replace(",4.0,4.0,1.0,,1.0,1.0,", ",4.0,16.0,1.0,,4.0,1.0,"),
            row.replace("8.049", "8.048")
        );
        let r = parse_e2e_csv(&t, "f.csv").unwrap();
        assert_eq!(
            relabelled_lines(&r),
            vec![None; 4],
            "rounded times can recur"
        );
        let precise = t
            .replace("188.734", "188.73418088187464")
            .replace("8.049", "8.049247144615052");
        let r = parse_e2e_csv(&precise, "f.csv").unwrap();
        assert_eq!(relabelled_lines(&r), vec![None, Some(2), None, None]);
        let rep = repeated_lines(&r, |x| x.line, E2eRun::fields_without_line);
        assert_eq!(rep, vec![None, None, None, Some(2)]);
    }

    /// The client's concurrency is `silicon_concurrency` where the file has it, else
    /// `batch_size` per attention-DP replica times the replicas.
    #[test]
    fn concurrency_is_the_clients() {
        let t = format!(
            "{HEAD},campaign,image,measured_at,silicon_concurrency\n\
             vllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,8.0,1.0,1.0,4.0,1.0,4.0,61.2,7.5,ci-x,img:1,2026-04-22,32\n\
             vllm,0.19.0,m/x,b200,fp8,fp8,fp8,1024,128,8.0,1.0,1.0,4.0,1.0,4.0,61.2,7.5,,,,\n"
        );
        let r = parse_e2e_csv(&t, "f.csv").unwrap();
        assert_eq!((r[0].batch_size, r[0].concurrency), (8, 32));
        assert_eq!(
            (r[0].campaign.as_str(), r[0].image.as_str()),
            ("ci-x", "img:1")
        );
        assert_eq!(r[1].concurrency, 32);
        assert_eq!(r[1].campaign, "");
        let bad = t.replace(",32\n", ",3.5\n");
        let e = parse_e2e_csv(&bad, "f.csv").unwrap_err().to_string();
        assert!(e.contains("silicon_concurrency"), "{e}");
    }

    #[test]
    fn refuses_bad_values_with_line_and_column() {
        let t = format!("{HEAD}\nvllm,,m/x,b200,,,,1024,128,4.5,2,1,1,2,1,61.2,7.5\n");
        let e = parse_e2e_csv(&t, "f.csv").unwrap_err().to_string();
        assert!(e.contains("f.csv:2") && e.contains("batch_size"), "{e}");
        let t = format!("{HEAD}\nvllm,,m/x,b200,,,,1024,128,4,2,1,1,2,1,61.2,-1\n");
        let e = parse_e2e_csv(&t, "f.csv").unwrap_err().to_string();
        assert!(e.contains("silicon_tpot_ms"), "{e}");
        let e = parse_e2e_csv("backend,model_path\n", "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing column"), "{e}");
        assert!(!is_e2e_csv("m,n,k,dtype,latency_ms\n1,2,3,bf16,1"));
    }
}
